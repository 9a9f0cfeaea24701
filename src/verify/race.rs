//! G4: one winner among racing processes (or threads, when the caller gives no process race).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::outcome::{fail, not_applicable, pass, Outcome};
use super::scenarios::{Ctx, NO_ALLOWED_EFFECT};
use crate::action::{Action, Principal};
use crate::canonical::Floats;
use crate::clock::{Clock, ManualClock, Micros};
use crate::decision::{Decision, Ruling};
use crate::effect::EffectState;
use crate::error::{Error, InvalidInputKind, Result, StoreFaultKind};
use crate::kernel::{Kernel, KernelOptions, Proposal};
use crate::template::{Template, TemplateMode};

/// The hidden `warden` subcommand a G4 child runs: `warden __verify-child SPEC INDEX`.
pub const CHILD_SUBCOMMAND: &str = "__verify-child";

/// How many processes (or threads) race for one effect key in G4.
pub const CONTENDERS: usize = 8;

/// How long G4 waits for its contenders to reach the barrier, and then to finish.
pub const RACE_TIMEOUT: Duration = Duration::from_secs(60);

/// The child's exit code when it won but found the effect had already run.
pub const SECOND_WINNER_EXIT: i32 = 3;

/// The files of one G4 race: the spec every contender reads, and the barrier directory where
/// contender `i` creates `ready.i` and waits for `go`.
#[derive(Debug, Clone)]
pub struct RaceFiles {
    /// Passed to each contender: `warden __verify-child SPEC INDEX`.
    pub spec: PathBuf,
    /// The directory where contenders meet before they race.
    pub barrier: PathBuf,
    /// How many processes race.
    pub contenders: usize,
}

impl RaceFiles {
    /// Created by contender `index` once it is lined up.
    pub fn ready(&self, index: usize) -> PathBuf {
        self.barrier.join(format!("ready.{index}"))
    }

    /// Created by the race to release every contender at once.
    pub fn go(&self) -> PathBuf {
        self.barrier.join("go")
    }
}

/// Runs G4's contenders as separate OS processes, each one calling [`child_main`] with
/// `[spec, index]`: start them, wait for every `ready.i`, create `go`, and read each one's
/// answer ([`Contended::from_output`]). The library spawns nothing itself; the `warden` binary
/// provides this (`src/bin/warden/verify_race.rs`).
pub trait ProcessRace {
    /// What each contender answered, or `Err(why)` when the race could not be run at all.
    fn race(&self, files: &RaceFiles) -> std::result::Result<Vec<std::result::Result<Contended, String>>, String>;

    /// How the report names the racers, e.g. "8 OS processes".
    fn describe(&self, contenders: usize) -> String {
        format!("{contenders} OS processes")
    }
}

/// Everything a G4 contender needs, written to a file for child processes.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct ChildSpec {
    store: PathBuf,
    barrier: PathBuf,
    /// Created with create_new by each winner: the "remote call".
    marker: PathBuf,
    now: Micros,
    environment: String,
    policy_hash: String,
    policy_version: Option<String>,
    action: String,
    arguments: Map<String, Value>,
    resource: Option<String>,
    agent: String,
    user: Option<String>,
    decision: String,
    reason: String,
    effect: String,
    /// `raw` or `escaped`.
    effect_mode: String,
    max_attempts: Option<u32>,
    lease: Option<Micros>,
}

/// What one G4 contender got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Contended {
    /// Got the permit and ran the effect.
    Won,
    /// Was refused.
    Lost,
    /// Got a permit, but the effect had already run: at-most-once is broken.
    SecondWinner,
}

impl Contended {
    /// The word [`child_main`] prints for it.
    pub fn word(self) -> &'static str {
        match self {
            Contended::Won => "won",
            Contended::Lost => "lost",
            Contended::SecondWinner => "second-winner",
        }
    }

    /// A contender's answer from what it printed and whether it exited successfully; `None`
    /// when it said nothing a contender says.
    pub fn from_output(stdout: &str, success: bool) -> Option<Contended> {
        let said = |word: &str| stdout.lines().any(|line| line.trim() == word);
        if said(Contended::SecondWinner.word()) {
            return Some(Contended::SecondWinner);
        }
        match (success, said(Contended::Won.word()), said(Contended::Lost.word())) {
            (true, true, _) => Some(Contended::Won),
            (true, false, true) => Some(Contended::Lost),
            _ => None,
        }
    }
}

/// Open the store, line up at `wait`, propose once, and run the "remote call" if granted.
fn contend(
    spec: &ChildSpec,
    wait: impl FnOnce() -> std::result::Result<(), String>,
) -> std::result::Result<Contended, String> {
    let kernel = Kernel::open(
        &spec.store,
        KernelOptions {
            clock: Arc::new(ManualClock::new(spec.now)),
            policy_hash: Some(spec.policy_hash.clone()),
            policy_version: spec.policy_version.clone(),
            environment: Some(spec.environment.clone()),
            ..KernelOptions::default()
        },
    )
    .map_err(|e| e.to_string())?;
    let principal = Principal::new(&spec.agent, spec.user.as_deref()).map_err(|e| e.to_string())?;
    // The parent built these arguments under the document, which admitted them.
    let action = Action::new_with(
        &spec.action,
        Value::Object(spec.arguments.clone()),
        principal,
        spec.resource.as_deref(),
        &spec.environment,
        Floats::ADMITTED,
    )
    .map_err(|e| e.to_string())?;
    let mode = match spec.effect_mode.as_str() {
        "raw" => TemplateMode::Raw,
        "escaped" => TemplateMode::Escaped,
        other => return Err(format!("unknown template mode {other:?}")),
    };
    let template = Template::parse(&spec.effect, mode).map_err(|e| e.to_string())?;
    let decision = Decision::parse(&spec.decision).ok_or_else(|| format!("unknown decision {:?}", spec.decision))?;
    let mut proposal = Proposal::new(&action, Ruling::new(decision, &spec.reason));
    proposal.effect = Some(&template);
    proposal.max_attempts = spec.max_attempts;
    proposal.lease = spec.lease;
    wait()?;
    match kernel.propose(&proposal) {
        Ok(permit) => {
            let ran = std::fs::OpenOptions::new().write(true).create_new(true).open(&spec.marker);
            match ran {
                Ok(_) => {
                    permit.commit(&serde_json::json!({"warden_verify": "G4 winner"})).map_err(|e| e.to_string())?;
                    Ok(Contended::Won)
                }
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
                    permit.ambiguous("warden verify: the effect had already run").map_err(|e| e.to_string())?;
                    Ok(Contended::SecondWinner)
                }
                Err(error) => Err(format!("cannot create the marker {}: {error}", spec.marker.display())),
            }
        }
        Err(Error::Duplicate { .. }) => Ok(Contended::Lost),
        Err(error) => Err(format!("refused ({}): {error}", error.reason())),
    }
}

/// The body of `warden __verify-child SPEC INDEX`: one G4 contender. Prints `won` or `lost`
/// and exits 0; `second-winner` and exit 3 if it got a permit after the effect already ran;
/// a message on stderr and exit 1 on anything else.
pub fn child_main(args: &[String]) -> i32 {
    let outcome = (|| -> std::result::Result<Contended, String> {
        let [spec_path, index] = args else {
            return Err(format!("usage: warden {CHILD_SUBCOMMAND} SPEC INDEX (got {} arguments)", args.len()));
        };
        let index: usize = index.parse().map_err(|_| format!("the index {index:?} is not a number"))?;
        let text = std::fs::read_to_string(spec_path).map_err(|e| format!("cannot read {spec_path}: {e}"))?;
        let spec: ChildSpec = serde_json::from_str(&text).map_err(|e| format!("{spec_path} is not a G4 spec: {e}"))?;
        let files = RaceFiles { spec: PathBuf::from(spec_path), barrier: spec.barrier.clone(), contenders: CONTENDERS };
        contend(&spec, || {
            std::fs::write(files.ready(index), b"").map_err(|e| format!("cannot reach the barrier: {e}"))?;
            let deadline = Instant::now() + RACE_TIMEOUT;
            while !files.go().exists() {
                if Instant::now() >= deadline {
                    return Err("the start signal never came".into());
                }
                std::thread::sleep(Duration::from_micros(200));
            }
            Ok(())
        })
    })();
    match outcome {
        Ok(answer @ (Contended::Won | Contended::Lost)) => {
            println!("{}", answer.word());
            0
        }
        Ok(Contended::SecondWinner) => {
            println!("{}", Contended::SecondWinner.word());
            SECOND_WINNER_EXIT
        }
        Err(message) => {
            eprintln!("warden {CHILD_SUBCOMMAND}: {message}");
            1
        }
    }
}

pub(super) fn g4_one_winner(ctx: &Ctx<'_>, racer: Option<&dyn ProcessRace>) -> Result<Outcome> {
    let Some(case) = ctx.allowed_effect() else { return not_applicable(NO_ALLOWED_EFFECT) };
    let Some(effect) = &case.entry.effect else { return not_applicable(NO_ALLOWED_EFFECT) };
    // Create the store (and its schema) before anyone races for it.
    let warden = ctx.warden("g4")?;
    let call = case.call(ctx.document, "g4")?;
    // Each contender rebuilds this action from the spec's fields.
    let action = warden.action_for(&ctx.request(case.action, &call))?;
    let barrier = ctx.scratch.path("g4-barrier");
    std::fs::create_dir(&barrier)
        .map_err(|e| Error::store(StoreFaultKind::Io, format!("cannot create {}: {e}", barrier.display())))?;
    let spec = ChildSpec {
        store: ctx.scratch.store("g4")?,
        barrier: barrier.clone(),
        marker: barrier.join("effect-ran"),
        now: ctx.clock.now(),
        environment: action.environment.clone(),
        policy_hash: ctx.document.policy_hash.clone(),
        policy_version: ctx.document.version.clone(),
        action: case.action.to_owned(),
        arguments: call.arguments.clone(),
        resource: action.resource.clone(),
        agent: ctx.principal.agent.clone(),
        user: ctx.principal.user.clone(),
        decision: case.decision.as_str().to_owned(),
        reason: case.reason.clone(),
        effect: effect.source().to_owned(),
        effect_mode: match effect.mode() {
            TemplateMode::Raw => "raw".into(),
            TemplateMode::Escaped => "escaped".into(),
        },
        max_attempts: case.entry.max_attempts,
        lease: case.entry.lease,
    };
    let (outcomes, how) = match racer {
        Some(racer) => {
            let files = RaceFiles { spec: barrier.join("spec.json"), barrier: barrier.clone(), contenders: CONTENDERS };
            let text = serde_json::to_string(&spec).map_err(|e| {
                Error::invalid(InvalidInputKind::NotCanonical, format!("cannot encode the G4 spec: {e}"))
            })?;
            std::fs::write(&files.spec, text)
                .map_err(|e| Error::store(StoreFaultKind::Io, format!("cannot write {}: {e}", files.spec.display())))?;
            match racer.race(&files) {
                Ok(outcomes) => (outcomes, racer.describe(CONTENDERS)),
                Err(why) => return fail(format!("{}: {why}", case.label())),
            }
        }
        None => (
            race_threads(&spec),
            format!(
                "{CONTENDERS} threads in this process (no child program was given; `warden verify` races \
                 {CONTENDERS} OS processes)"
            ),
        ),
    };
    let won = outcomes.iter().filter(|o| matches!(o, Ok(Contended::Won))).count();
    let lost = outcomes.iter().filter(|o| matches!(o, Ok(Contended::Lost))).count();
    let second = outcomes.iter().filter(|o| matches!(o, Ok(Contended::SecondWinner))).count();
    let errors: Vec<&String> = outcomes.iter().filter_map(|o| o.as_ref().err()).collect();
    let key = call.effect_key.clone().unwrap_or_default();
    if second > 0 {
        return fail(format!("{}: among {how}, the effect {key:?} ran more than once", case.label()));
    }
    if let Some(first) = errors.first() {
        return fail(format!("{}: {} of {how} failed; the first said: {first}", case.label(), errors.len()));
    }
    if (won, lost) != (1, CONTENDERS - 1) {
        return fail(format!(
            "{}: among {how}, {won} won and {lost} lost (expected 1 and {})",
            case.label(),
            CONTENDERS - 1
        ));
    }
    let state = warden.kernel().effect(&key)?.map(|r| r.state);
    if state != Some(EffectState::Committed) || !spec.marker.exists() {
        return fail(format!(
            "{}: the winner's effect {key:?} is {} after the race",
            case.label(),
            state.map_or("absent", |s| s.as_str())
        ));
    }
    let chain = warden.kernel().verify_chain()?;
    if !chain.ok {
        return fail(format!("{}: the receipt chain does not verify after the race", case.label()));
    }
    pass(format!(
        "{}: {how} raced for {key:?} on one scratch store; exactly one got the permit and ran the effect, \
         {lost} were refused (duplicate)",
        case.label()
    ))
}

fn race_threads(spec: &ChildSpec) -> Vec<std::result::Result<Contended, String>> {
    let start = std::sync::Barrier::new(CONTENDERS);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..CONTENDERS)
            .map(|_| {
                let start = &start;
                scope.spawn(move || {
                    contend(spec, || {
                        start.wait();
                        Ok(())
                    })
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("a contender thread panicked".into()))).collect()
    })
}
