//! `warden verify`: the guarantees G1–G14, run against the operator's own document in a scratch
//! store (a fresh temporary directory, never the live store).
//!
//! Every scenario's arguments are derived from the document's rules: for a rule's `when`
//! conditions a value is synthesized that satisfies them (`eq` → the operand, `in` → an element,
//! `neq` → a different value of the same type, order operators → an integer inside the bounds),
//! every placeholder of the effect and resource templates gets a fresh value, and
//! [`crate::policy::evaluate`] must confirm that the arguments really reach that rule before a
//! scenario uses them. Each refusal is paired with a positive control (the same path that must
//! succeed), so a scenario cannot pass by refusing everything.
//!
//! Nothing sleeps except the G4 barrier: the scratch kernels run on a [`ManualClock`].
//!
//! G4 races [`CONTENDERS`] OS processes when the caller gives a [`ProcessRace`]: the library
//! spawns no process itself. The `warden` binary implements it by starting itself as
//! `warden __verify-child SPEC INDEX`, which calls [`child_main`]
//! (`src/bin/warden/verify_race.rs`); without one the race runs on threads instead and says so.

use serde_json::Value;

use crate::action::Principal;
use crate::clock::{Clock, ManualClock, SystemClock};
use crate::document::{ActionEntry, Document, Mode};
use crate::error::{Error, Result};

mod authority;
mod names;
mod outcome;
mod race;
mod scenarios;
mod scratch;
mod synthesis;

use names::{AGENT, USER};
use outcome::Outcome;
pub use outcome::Status;
use race::g4_one_winner;
pub use race::{
    child_main, Contended, ProcessRace, RaceFiles, CHILD_SUBCOMMAND, CONTENDERS, RACE_TIMEOUT, SECOND_WINNER_EXIT,
};
use scenarios::{
    g10_unknown_error, g11_altered_receipt, g12_approval_shows_its_action, g13_checkpointed_log, g14_prune_under_hold,
    g1_mutated_approval, g2_replayed_approval, g3_duplicate_effect, g5_ambiguous_blocks_retry, g6_unknown_action,
    g7_no_principal, Ctx,
};
use scratch::Scratch;
use synthesis::catalog;

/// What verify cannot see, whatever the result.
pub const BLIND_SPOTS: [&str; 4] = [
    "the host's executors and reconcile hooks: verify plays the executor's part (commit, not executed, \
     an unknown outcome) and never calls a real one, so it cannot tell whether yours report outcomes truthfully",
    "whether every call site goes through Warden: a call the host makes around the pipeline is protected by nothing",
    "the deployment: the live store's location, permissions and backups, the environment, and who may edit \
     the document; verify ran in a scratch store in a temporary directory",
    "whether the policy is the right policy: a document that allows everything can pass every guarantee; \
     verify shows the kernel enforces this document, not that this document says what you mean",
];

/// One guarantee checked against the document.
#[derive(Debug, Clone)]
pub struct Guarantee {
    /// `G1`…`G13`.
    pub id: &'static str,
    /// What it promises, in one line.
    pub title: &'static str,
    /// How it came out.
    pub status: Status,
    /// What was checked and what was seen.
    pub detail: String,
}

/// What `warden verify` found for one document.
#[derive(Debug, Clone)]
pub struct VerifyReport {
    /// The hash of the document verified.
    pub policy_hash: String,
    /// Every guarantee, in order.
    pub guarantees: Vec<Guarantee>,
    /// What verify cannot see: [`BLIND_SPOTS`], then every rule no scenario could reach.
    pub blind_spots: Vec<String>,
}

impl VerifyReport {
    /// True when no applicable guarantee failed.
    pub fn ok(&self) -> bool {
        self.guarantees.iter().all(|g| g.status != Status::Fail)
    }

    fn count(&self, status: Status) -> usize {
        self.guarantees.iter().filter(|g| g.status == status).count()
    }

    /// The report as `warden verify --json` prints it.
    pub fn to_json(&self) -> Value {
        serde_json::json!({
            "ok": self.ok(),
            "policy_hash": self.policy_hash,
            "summary": {
                "pass": self.count(Status::Pass),
                "fail": self.count(Status::Fail),
                "not_applicable": self.count(Status::NotApplicable),
            },
            "guarantees": self.guarantees.iter().map(|g| serde_json::json!({
                "id": g.id,
                "title": g.title,
                "status": g.status.as_str(),
                "detail": g.detail,
            })).collect::<Vec<_>>(),
            "blind_spots": self.blind_spots,
        })
    }

    /// One line per guarantee (`G1 pass  mutated approval refused — …`), the verdict, then the
    /// `verify cannot see:` list.
    pub fn render(&self) -> String {
        let mut out = format!("warden verify: policy {} (scratch store)\n", self.policy_hash);
        for g in &self.guarantees {
            out.push_str(&format!("{} {:<5} {} — {}\n", g.id, g.status.label(), g.title, g.detail));
        }
        out.push_str(&format!(
            "{}: {} pass, {} fail, {} not applicable\n",
            if self.ok() { "verify passed" } else { "verify FAILED" },
            self.count(Status::Pass),
            self.count(Status::Fail),
            self.count(Status::NotApplicable)
        ));
        out.push_str("verify cannot see:\n");
        for spot in &self.blind_spots {
            out.push_str(&format!("  - {spot}\n"));
        }
        out
    }
}

/// Run G1–G14 against `document` in a fresh scratch store. `racer` runs G4's contenders as OS
/// processes (the `warden` binary's); `None` races threads.
///
/// An observe-mode document is refused: verify needs enforce mode to see anything refused.
pub fn run(document: &Document, racer: Option<&dyn ProcessRace>) -> Result<VerifyReport> {
    run_on(document, racer, None)
}

/// `run`, with every scratch store in a schema of its own in the PostgreSQL database `postgres`
/// names (a `postgresql://` URL without `options=`; its user needs CREATE there), each dropped at
/// the end; `None`: files in a temporary directory.
pub fn run_on(document: &Document, racer: Option<&dyn ProcessRace>, postgres: Option<&str>) -> Result<VerifyReport> {
    if document.mode == Mode::Observe {
        return Err(Error::Config(
            "this document is in observe mode, where nothing is refused, so no guarantee can be shown; \
             set `mode: enforce` (in a copy, if you are still observing) and run verify on that"
                .into(),
        ));
    }
    let scratch = Scratch::create(postgres)?;
    let principal = Principal::new(AGENT, Some(USER))?;
    let (cases, unreachable) = catalog(document);
    let governed = authority::with_verify_grant(document)?;
    let ctx = Ctx {
        document,
        governed,
        scratch,
        clock: ManualClock::new(SystemClock.now()),
        environment: document.environment.clone().unwrap_or_else(|| "production".to_owned()),
        principal,
        cases,
    };
    let guarantees = vec![
        guarantee("G1", "mutated approval refused", || g1_mutated_approval(&ctx)),
        guarantee("G2", "replayed approval refused", || g2_replayed_approval(&ctx)),
        guarantee("G3", "duplicate effect refused", || g3_duplicate_effect(&ctx)),
        guarantee("G4", "one winner among 8 OS processes", || g4_one_winner(&ctx, racer)),
        guarantee("G5", "ambiguous blocks a blind retry", || g5_ambiguous_blocks_retry(&ctx)),
        guarantee("G6", "unknown action refused", || g6_unknown_action(&ctx)),
        guarantee("G7", "no principal refused with no receipt", || g7_no_principal(&ctx)),
        guarantee("G8", "expired authority refused", || authority::g8_expired_authority(&ctx)),
        guarantee("G9", "delegation cannot escalate", || authority::g9_no_escalation(&ctx)),
        guarantee("G10", "unknown error is ambiguous", || g10_unknown_error(&ctx)),
        guarantee("G11", "an altered receipt is detected", || g11_altered_receipt(&ctx)),
        guarantee("G12", "an approval shows the exact arguments it binds", || g12_approval_shows_its_action(&ctx)),
        guarantee("G13", "a truncated or forked log is caught against its checkpoints", || g13_checkpointed_log(&ctx)),
        guarantee("G14", "a prune waits for an anchor and every hold", || g14_prune_under_hold(&ctx)),
    ];
    let mut blind_spots: Vec<String> = BLIND_SPOTS.iter().map(|s| (*s).to_owned()).collect();
    if document.authority_config.is_some() {
        blind_spots.push(authority::GRANTS_BLIND_SPOT.to_owned());
    }
    blind_spots.extend(gateway_blind_spots(document));
    blind_spots.extend(unreachable.into_iter().map(|note| format!("{note}, so no scenario exercised it")));
    Ok(VerifyReport { policy_hash: document.policy_hash.clone(), guarantees, blind_spots })
}

/// What verify cannot see of the gateway entries (`mcp.<alias>.<tool>`): the scenarios decide,
/// reserve and record them through the kernel like any other action, but never run
/// `warden gateway`, so its own checks and the operator's claims are named here, entry by entry.
fn gateway_blind_spots(document: &Document) -> Vec<String> {
    let gateway: Vec<(&String, &ActionEntry)> =
        document.actions.iter().filter(|(name, _)| name.starts_with("mcp.")).collect();
    if gateway.is_empty() {
        return Vec::new();
    }
    let mut spots = vec![format!(
        "`warden gateway`'s own checks for the {} mcp.* action(s) (the checks before forwarding, \
         the outcome table, elicitation): the scenarios decide, reserve and record those actions \
         through the kernel like any other, but never run a gateway or an MCP server",
        gateway.len()
    )];
    if document.gateway.unknown_methods == crate::document::UnknownMethods::Refuse {
        spots.push(
            "gateway.unknown_methods: refuse — the gateway refuses every method it does not know before it \
             reaches the upstream; verify never sends one"
                .to_owned(),
        );
    }
    for (name, entry) in &gateway {
        if let Some(pins) = &entry.upstream {
            let mut what = Vec::new();
            if pins.pins_certificate() {
                what.push("certificate");
            }
            if pins.tool_schema_sha256.is_some() {
                what.push("tool schema");
            }
            if !what.is_empty() {
                spots.push(format!(
                    "{name} pins the upstream's {}: the gateway checks that, at startup and on every call, not verify",
                    what.join(" and ")
                ));
            }
        }
        if entry.not_executed_on_error {
            spots.push(format!(
                "{name} claims mcp.not_executed_on_error: an isError answer is recorded FAILED and may run \
                 again; whether the server really acts on nothing before it errs is the operator's claim, unchecked"
            ));
        }
    }
    spots
}

fn guarantee(id: &'static str, title: &'static str, body: impl FnOnce() -> Result<Outcome>) -> Guarantee {
    let (status, detail) = match body() {
        Ok(outcome) => outcome,
        Err(error) => (Status::Fail, format!("the scenario could not run: {error}")),
    };
    Guarantee { id, title, status, detail }
}
