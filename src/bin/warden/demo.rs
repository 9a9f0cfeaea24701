//! `warden demo`: the effect kernel's story in process, under the starter policy, with no
//! network and no executor but a counter: a lost reply left AMBIGUOUS blocks the blind retry,
//! an approval is bound to one exact action and spent once, two agents race for one refund and
//! one wins, and an action nobody listed is denied; then authority (`demo_authority`): delegation
//! that cannot widen, a budget that counts refunds still executing, revocation. Every step is a
//! real call on a real store: a fresh one in a scratch folder of its own every time, never the
//! operator's (`--store`, `--config` and their variables are ignored with a note), removed
//! afterwards unless `--keep`.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};

use serde_json::json;
use warden::pipeline::{ActionRequest, Warden, WardenOptions};
use warden::{EffectState, Error, Permit, Principal};

use warden::hint::shell_word;
use warden::scratch::ScratchDir;

use crate::exit::Failure;
use crate::output::{shown, write_stderr};

/// What the demo was handed and does not use.
pub struct Ignored<'a> {
    pub store: Option<&'a Path>,
    pub config: Option<&'a Path>,
}

impl Ignored<'_> {
    /// One note per option given, for stderr (stdout stays the story, as the README quotes it).
    fn notes(&self) -> Vec<String> {
        let given =
            |path: Option<&Path>| path.filter(|p| !p.as_os_str().is_empty()).map(|p| shown(&p.display().to_string()));
        let mut notes = Vec::new();
        if let Some(store) = given(self.store) {
            notes.push(format!(
                "note: the demo ignores --store/WARDEN_STORE ({store}): it runs on a fresh scratch store of its own and never touches yours"
            ));
        }
        if let Some(config) = given(self.config) {
            notes.push(format!(
                "note: the demo ignores --config/WARDEN_CONFIG ({config}): it always runs the starter policy"
            ));
        }
        notes
    }
}

struct Story {
    warden: Warden,
    lines: Vec<String>,
    /// How many times the "remote provider" was actually called.
    remote_calls: AtomicUsize,
}

impl Story {
    fn say(&mut self, step: &str, outcome: impl std::fmt::Display) {
        self.lines.push(format!("  {step:<46} {outcome}"));
    }

    fn title(&mut self, text: &str) {
        self.lines.push(String::new());
        self.lines.push(text.to_owned());
    }

    /// The executor: counts the call, and "loses the reply" when told to.
    fn call_provider(&self, permit: Permit, lose_reply: bool) -> Result<(), Error> {
        self.remote_calls.fetch_add(1, Ordering::SeqCst);
        if lose_reply {
            permit.ambiguous("connection reset after the request was sent")
        } else {
            permit.commit(&json!({"refund_id": format!("re_{}", self.remote_calls.load(Ordering::SeqCst))}))
        }
    }
}

fn agent(name: &str) -> Result<Principal, Failure> {
    Principal::new(name, Some("ada")).map_err(|e| Failure::internal(e.to_string()))
}

fn refund(who: &str, payment: &str, amount: i64) -> Result<ActionRequest<'static>, Failure> {
    Ok(ActionRequest::new("stripe.refund", json!({"payment_id": payment, "amount": amount}), agent(who)?))
}

fn refusal<T>(outcome: Result<T, Error>) -> String {
    match outcome {
        Ok(_) => "ALLOWED (the demo expected a refusal)".into(),
        Err(error) => format!("refused: {}", error.reason()),
    }
}

/// The story on a fresh store in a new scratch folder, which is removed afterwards (also when
/// the story fails) unless `keep`.
pub fn demo(ignored: &Ignored<'_>, keep: bool, starter: &str) -> Result<String, Failure> {
    for note in ignored.notes() {
        write_stderr(&note);
    }
    let mut scratch = ScratchDir::create("warden-demo").map_err(|e| {
        Failure::internal(format!("cannot create a scratch folder under {}: {e}", std::env::temp_dir().display()))
    })?;
    if keep {
        scratch.keep();
    }
    let path = scratch.path("demo.redb");
    let mut lines = story(&path, starter)?;
    if keep {
        lines.push(format!(
            "the scratch store is kept; look closer: warden --store {} receipts",
            shell_word(&path.display().to_string())
        ));
    } else {
        let dir = scratch.dir().display().to_string();
        if let Err(error) = scratch.remove() {
            write_stderr(&format!("could not remove the scratch folder {dir}: {error}"));
        }
        lines.push("the scratch store is removed; to look closer, run: warden demo --keep".to_owned());
    }
    Ok(lines.join("\n") + "\n")
}

/// Every step, on the store at `path` (closed again when this returns).
fn story(path: &Path, starter: &str) -> Result<Vec<String>, Failure> {
    let document =
        warden::document::load_str(starter, "the starter policy").map_err(|e| Failure::internal(e.to_string()))?;
    let hash = document.policy_hash.clone();
    let warden = Warden::open(path, document, WardenOptions::default())?;
    let mut story = Story { warden, lines: Vec::new(), remote_calls: AtomicUsize::new(0) };
    story.lines.push(format!("warden demo: the starter policy ({hash})"));
    story.lines.push(format!("store: {}", path.display()));

    story.title("1. A lost reply is AMBIGUOUS, and a blind retry is refused");
    let permit = story.warden.submit(&refund("refund-agent", "pay_1001", 4_200)?)?;
    let key = permit.effect_key().unwrap_or("-").to_owned();
    story.say("refund pay_1001, 4200 (rule[0]: allow)", format!("permit {key}, attempt {}", permit.attempt()));
    story.call_provider(permit, true)?;
    story.say("the provider is called; the reply is lost", "AMBIGUOUS");
    let retry = story.warden.submit(&refund("refund-agent", "pay_1001", 4_200)?);
    let calls = story.remote_calls.load(Ordering::SeqCst);
    story.say("the agent retries blindly", format!("{} (remote calls: {calls})", refusal(retry)));
    let resolved = story.warden.kernel().resolve(&key, EffectState::Committed, "ops:bob")?;
    story.say("ops:bob checks the provider and resolves it", resolved.state);

    story.title("2. An approval is bound to one exact action and spent once");
    let request_id = match story.warden.submit(&refund("refund-agent", "pay_2002", 250_000)?) {
        Err(Error::ApprovalRequired { request_id, .. }) => request_id,
        other => return Err(Failure::internal(format!("expected approval required, got {:?}", other.map(|_| ())))),
    };
    story.say("refund pay_2002, 250000 (rule[1]: approve)", "approval required");
    story.say("the agent approves its own request", refusal(story.warden.kernel().grant(&request_id, "ada")));
    story.warden.kernel().grant(&request_id, "ops:bob")?;
    story.say("ops:bob approves it", "granted");
    let mut mutated = refund("refund-agent", "pay_2002", 490_000)?;
    mutated.approval_id = Some(&request_id);
    story.say("presented for 490000 instead", refusal(story.warden.submit(&mutated)));
    let mut exact = refund("refund-agent", "pay_2002", 250_000)?;
    exact.approval_id = Some(&request_id);
    let permit = story.warden.submit(&exact)?;
    story.call_provider(permit, false)?;
    story.say("presented for the approved 250000", "COMMITTED");
    story.say("the approval is replayed", refusal(story.warden.submit(&exact)));

    story.title("3. Two agents race for one refund; one wins");
    let before = story.remote_calls.load(Ordering::SeqCst);
    let barrier = Arc::new(Barrier::new(2));
    let outcomes: Vec<Result<bool, Error>> = std::thread::scope(|scope| {
        let handles: Vec<_> = ["agent-a", "agent-b"]
            .into_iter()
            .map(|who| {
                let barrier = barrier.clone();
                let story = &story;
                scope.spawn(move || -> Result<bool, Error> {
                    let request = ActionRequest::new(
                        "stripe.refund",
                        json!({"payment_id": "pay_3003", "amount": 1_500}),
                        Principal::new(who, None)?,
                    );
                    barrier.wait();
                    match story.warden.submit(&request) {
                        Ok(permit) => story.call_provider(permit, false).map(|()| true),
                        Err(Error::Duplicate { .. }) => Ok(false),
                        Err(other) => Err(other),
                    }
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err(Error::Panic("a racer panicked".into())))).collect()
    });
    let mut winners = 0;
    for outcome in outcomes {
        if outcome? {
            winners += 1;
        }
    }
    let calls = story.remote_calls.load(Ordering::SeqCst) - before;
    story.say(
        "agent-a and agent-b refund pay_3003 at once",
        format!("{winners} winner, {} refused (remote calls: {calls})", 2 - winners),
    );

    story.title("4. An action nobody listed is denied");
    let drop = ActionRequest::new("db.drop_table", json!({"table": "customers"}), agent("refund-agent")?);
    story.say("db.drop_table", refusal(story.warden.submit(&drop)));

    crate::demo_authority::chapters(path, &mut story.lines)?;

    let report = story.warden.kernel().verify_chain()?;
    story.lines.push(String::new());
    story.lines.push(format!(
        "{} receipts, chain {}; remote calls in all: {}",
        report.chained,
        if report.ok { "verified" } else { "BROKEN" },
        story.remote_calls.load(Ordering::SeqCst)
    ));
    Ok(story.lines)
}
