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

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use crate::action::Principal;
use crate::clock::{Clock, ManualClock, SystemClock};
use crate::document::{ActionEntry, Document, Mode};
use crate::error::{Error, Result, StoreFaultKind};
use crate::scratch::ScratchDir;

mod authority;
mod race;
mod scenarios;
mod synthesis;

use race::g4_one_winner;
pub use race::{child_main, Contended};
use scenarios::{
    g10_unknown_error, g11_altered_receipt, g12_approval_shows_its_action, g13_checkpointed_log, g14_prune_under_hold,
    g1_mutated_approval, g2_replayed_approval, g3_duplicate_effect, g5_ambiguous_blocks_retry, g6_unknown_action,
    g7_no_principal, Ctx,
};
use synthesis::catalog;

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

const AGENT: &str = "warden-verify";
const USER: &str = "verify-requester";
const APPROVER: &str = "verify-approver";
/// The agent verify's approvers answer through: not the requester's (an approver with any part
/// of the requester's principal is the requester, `approval::person::is_requester`).
const APPROVER_AGENT: &str = "warden-verify-host";
const MUTATION_KEY: &str = "_verify_mutation";
const UNKNOWN_ACTION: &str = "warden.verify.unknown_action";

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

/// How one guarantee came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// It held.
    Pass,
    /// It did not hold.
    Fail,
    /// The document gives it nothing to check (never reported as a pass).
    NotApplicable,
}

impl Status {
    /// The JSON spelling: `pass`, `fail`, `not_applicable`.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Fail => "fail",
            Status::NotApplicable => "not_applicable",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Fail => "fail",
            Status::NotApplicable => "n/a",
        }
    }
}

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

type Outcome = (Status, String);

fn guarantee(id: &'static str, title: &'static str, body: impl FnOnce() -> Result<Outcome>) -> Guarantee {
    let (status, detail) = match body() {
        Ok(outcome) => outcome,
        Err(error) => (Status::Fail, format!("the scenario could not run: {error}")),
    };
    Guarantee { id, title, status, detail }
}

fn pass(detail: String) -> Result<Outcome> {
    Ok((Status::Pass, detail))
}

fn fail(detail: String) -> Result<Outcome> {
    Ok((Status::Fail, detail))
}

fn not_applicable(detail: &str) -> Result<Outcome> {
    Ok((Status::NotApplicable, detail.to_owned()))
}

/// "was refused (reason: message)", for details.
fn refused(error: &Error) -> String {
    format!("was refused ({}: {error})", error.reason())
}

// ---- the scratch store --------------------------------------------------------------------------

/// The scratch directory, its I/O errors reported as store errors (verify cannot run without it),
/// and where the scratch stores go: files in it, or schemas of their own in a PostgreSQL
/// database (`run_on`), dropped at the end.
struct Scratch {
    dir: ScratchDir,
    #[cfg(feature = "postgres")]
    postgres: Option<crate::store::ScratchSchemas>,
}

impl Scratch {
    fn create(postgres: Option<&str>) -> Result<Scratch> {
        let dir = ScratchDir::create("warden-verify").map_err(|e| {
            Error::store(
                StoreFaultKind::Io,
                format!("cannot create a scratch directory under {}: {e}", std::env::temp_dir().display()),
            )
        })?;
        #[cfg(feature = "postgres")]
        let postgres = postgres.map(crate::store::ScratchSchemas::new).transpose()?;
        #[cfg(not(feature = "postgres"))]
        if postgres.is_some() {
            return Err(Error::Config(
                "this build has no PostgreSQL support; build with --features postgres to verify on PostgreSQL".into(),
            ));
        }
        Ok(Scratch {
            dir,
            #[cfg(feature = "postgres")]
            postgres,
        })
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path(name)
    }

    /// A new scratch store named `name`: a file in the directory, or a fresh PostgreSQL schema.
    fn store(&self, name: &str) -> Result<PathBuf> {
        #[cfg(feature = "postgres")]
        if let Some(schemas) = &self.postgres {
            return schemas.location(name).map(PathBuf::from);
        }
        Ok(self.path(&format!("{name}.redb")))
    }
}
