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

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::action::{Action, Principal};
use crate::canonical::Floats;
use crate::clock::{Clock, ManualClock, Micros, SystemClock};
use crate::decision::{Decision, Ruling};
use crate::document::{ActionEntry, Condition, Document, Mode, Op};
use crate::effect::EffectState;
use crate::error::{Error, Result, StoreFaultKind};
use crate::kernel::{Kernel, KernelOptions, Proposal};
use crate::pipeline::{ActionRequest, Warden, WardenOptions};
use crate::scratch::ScratchDir;
use crate::template::{Template, TemplateMode};

mod authority;

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
/// At most this many values are tried per constrained argument, and this many combinations.
const VALUES_PER_SUBJECT: usize = 16;
const MAX_COMBINATIONS: usize = 512;

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
    let principal = Principal::new(AGENT, Some(USER)).map_err(|e| Error::InvalidInput(e.to_string()))?;
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

// ---- scenario arguments from the document's rules -----------------------------------------------

/// One reachable decision of the document: an action and the rule (or bare decision) that
/// synthesized arguments reach.
#[derive(Debug, Clone)]
struct Case<'d> {
    action: &'d str,
    entry: &'d ActionEntry,
    rule: Option<usize>,
    decision: Decision,
    /// The reason `evaluate` gives: `rule[N]` or `decision`.
    reason: String,
    /// Two scenarios' arguments render different effect keys (a placeholder is not fixed by the rule).
    fresh_keys: bool,
}

/// Arguments (and a resource, when the effect template names one the document does not render)
/// for one call.
#[derive(Debug, Clone)]
struct Call {
    arguments: Map<String, Value>,
    resource: Option<String>,
    effect_key: Option<String>,
}

impl Case<'_> {
    fn label(&self) -> String {
        format!("{} {}", self.action, self.reason)
    }

    fn conditions(&self) -> &[Condition] {
        match self.rule.and_then(|index| self.entry.rules.get(index)) {
            Some(rule) => &rule.when,
            None => &[],
        }
    }

    fn call(&self, document: &Document, tag: &str) -> Result<Call> {
        synthesize(document, self.action, self.entry, self.conditions(), self.decision, &self.reason, tag)
            .map_err(|why| Error::InvalidInput(format!("{}: {why}", self.label())))
    }
}

/// Every rule of every action, with synthesized arguments checked against `evaluate`; the
/// rules no arguments could reach come back as notes.
fn catalog(document: &Document) -> (Vec<Case<'_>>, Vec<String>) {
    let mut cases = Vec::new();
    let mut unreachable = Vec::new();
    for (action, entry) in &document.actions {
        let mut targets: Vec<(Option<usize>, Decision, String)> = Vec::new();
        if let Some(decision) = entry.decision {
            targets.push((None, decision, crate::policy::BARE_DECISION.to_owned()));
        }
        for (index, rule) in entry.rules.iter().enumerate() {
            targets.push((Some(index), rule.decision, format!("rule[{index}]")));
        }
        for (rule, decision, reason) in targets {
            let conditions: &[Condition] = match rule.and_then(|index| entry.rules.get(index)) {
                Some(rule) => &rule.when,
                None => &[],
            };
            let first = synthesize(document, action, entry, conditions, decision, &reason, "probe-a");
            match first {
                Ok(a) => {
                    let fresh_keys = match synthesize(document, action, entry, conditions, decision, &reason, "probe-b")
                    {
                        Ok(b) => a.effect_key.is_some() && a.effect_key != b.effect_key,
                        Err(_) => false,
                    };
                    cases.push(Case { action, entry, rule, decision, reason, fresh_keys });
                }
                Err(why) => unreachable.push(format!("{action} {reason} ({}): {why}", decision.as_str())),
            }
        }
    }
    (cases, unreachable)
}

fn fresh(tag: &str, name: &str) -> String {
    format!("verify-{tag}-{name}")
}

fn integer_of(value: &Value) -> Option<i128> {
    match value {
        Value::Number(n) if crate::canonical::is_integer(n) => n.as_str().parse().ok(),
        _ => None,
    }
}

/// The integers an order condition admits, as (lowest, highest): a float bound (`warden/v1`) is
/// met by the integers on its side of it, from its floor or ceiling.
fn integer_range(op: Op, operand: &Value) -> Option<(Option<i128>, Option<i128>)> {
    let (floor, ceiling) = match integer_of(operand) {
        Some(bound) => (bound, bound),
        None => {
            let double = operand.as_f64().filter(|d| d.is_finite())?;
            (whole(double.floor())?, whole(double.ceil())?)
        }
    };
    Some(match op {
        Op::Gt => (floor.checked_add(1), None),
        Op::Gte => (Some(ceiling), None),
        Op::Lt => (None, ceiling.checked_sub(1)),
        _ => (None, Some(floor)),
    })
}

/// The integers next to an operand that other rules compare with: itself, or a float's floor
/// and ceiling.
fn integer_points(operand: &Value) -> Vec<i128> {
    match (integer_of(operand), operand.as_f64().filter(|d| d.is_finite())) {
        (Some(n), _) => vec![n],
        (None, Some(double)) => [double.floor(), double.ceil()].into_iter().filter_map(whole).collect(),
        (None, None) => Vec::new(),
    }
}

/// A whole double as an integer, within what `i128` holds.
fn whole(double: f64) -> Option<i128> {
    (double.abs() < 1e38).then_some(double as i128)
}

fn integer_value(n: i128) -> Option<Value> {
    serde_json::from_str(&n.to_string()).ok()
}

/// Whether `value` satisfies one condition, by the policy's own equality.
fn satisfies(value: &Value, condition: &Condition) -> bool {
    let equal = crate::policy::equal;
    match condition.op {
        Op::Eq => equal(value, &condition.operand),
        Op::Neq => !equal(value, &condition.operand),
        Op::In => condition.operand.as_array().is_some_and(|items| items.iter().any(|item| equal(value, item))),
        Op::Lt | Op::Lte | Op::Gt | Op::Gte => match (value, &condition.operand) {
            (Value::Number(v), Value::Number(bound)) => match crate::policy::compare_numbers(v, bound) {
                Some(order) => match condition.op {
                    Op::Lt => order.is_lt(),
                    Op::Lte => order.is_le(),
                    Op::Gt => order.is_gt(),
                    _ => order.is_ge(),
                },
                None => false,
            },
            _ => false,
        },
    }
}

/// A value of the operand's type that is not the operand.
fn different(operand: &Value, fresh_text: &str) -> Option<Value> {
    Some(match operand {
        Value::String(s) if s == fresh_text => Value::String(format!("{s}-other")),
        Value::String(_) | Value::Null => Value::String(fresh_text.to_owned()),
        Value::Bool(b) => Value::Bool(!b),
        Value::Number(_) => integer_value(integer_of(operand)?.checked_add(1)?)?,
        Value::Array(items) if items.is_empty() => Value::Array(vec![Value::String(fresh_text.to_owned())]),
        Value::Array(_) => Value::Array(Vec::new()),
        Value::Object(map) if map.is_empty() => {
            let mut map = Map::new();
            map.insert("verify".into(), Value::String(fresh_text.to_owned()));
            Value::Object(map)
        }
        Value::Object(_) => Value::Object(Map::new()),
    })
}

/// What an effect-key placeholder can render: a non-empty string or an integer.
fn renders(value: &Value) -> bool {
    matches!(value, Value::String(s) if !s.is_empty()) || integer_of(value).is_some()
}

/// Up to [`VALUES_PER_SUBJECT`] values satisfying every condition on one argument. `hints` are
/// the integers any rule of the entry compares this argument with.
fn subject_values(
    subject: &str,
    conditions: &[&Condition],
    hints: &[i128],
    placeholder: bool,
    tag: &str,
) -> Vec<Value> {
    let fresh_text = fresh(tag, subject);
    let mut pool: Vec<Value> = Vec::new();
    pool.extend(conditions.iter().filter(|c| c.op == Op::Eq).map(|c| c.operand.clone()));
    for condition in conditions.iter().filter(|c| c.op == Op::In) {
        if let Some(items) = condition.operand.as_array() {
            pool.extend(items.iter().cloned());
        }
    }
    let mut low: Option<i128> = None;
    let mut high: Option<i128> = None;
    for condition in conditions.iter().filter(|c| c.op.is_order()) {
        let Some((lo, hi)) = integer_range(condition.op, &condition.operand) else { continue };
        if let Some(lo) = lo {
            low = Some(low.map_or(lo, |l| l.max(lo)));
        }
        if let Some(hi) = hi {
            high = Some(high.map_or(hi, |h| h.min(hi)));
        }
    }
    let inside = |n: i128| low.is_none_or(|l| n >= l) && high.is_none_or(|h| n <= h);
    if low.is_some() || high.is_some() {
        // The bounds, a few steps inward, and both sides of every integer the entry's other
        // rules test this argument against, so an earlier overlapping rule can be stepped past.
        let mut points: BTreeSet<i128> = BTreeSet::new();
        for end in [low, high].into_iter().flatten() {
            points.extend((0..3).filter_map(|step| end.checked_add(step)));
            points.extend((0..3).filter_map(|step| end.checked_sub(step)));
        }
        for hint in hints {
            points.extend([hint.checked_sub(1), Some(*hint), hint.checked_add(1)].into_iter().flatten());
        }
        pool.extend(points.into_iter().filter(|n| inside(*n)).filter_map(integer_value));
    }
    if placeholder {
        pool.push(Value::String(fresh_text.clone()));
    }
    for condition in conditions.iter().filter(|c| c.op == Op::Neq) {
        pool.extend(different(&condition.operand, &fresh_text));
    }
    let mut values: Vec<Value> = Vec::new();
    for value in pool {
        if conditions.iter().all(|c| satisfies(&value, c)) && !values.contains(&value) {
            values.push(value);
        }
    }
    if placeholder {
        values.sort_by_key(|value| !renders(value));
    }
    values.truncate(VALUES_PER_SUBJECT);
    values
}

/// Arguments that make `evaluate` give exactly (`decision`, `reason`) for `action`, with every
/// template placeholder filled, and the effect key and resource rendering.
fn synthesize(
    document: &Document,
    action: &str,
    entry: &ActionEntry,
    conditions: &[Condition],
    decision: Decision,
    reason: &str,
    tag: &str,
) -> std::result::Result<Call, String> {
    let mut placeholders: BTreeSet<&str> = BTreeSet::new();
    let mut needs_resource = false;
    if let Some(effect) = &entry.effect {
        for name in effect.placeholders() {
            match (name, &entry.resource) {
                ("resource", None) => needs_resource = true,
                ("resource", Some(_)) => {}
                (name, _) => {
                    placeholders.insert(name);
                }
            }
        }
    }
    if let Some(resource) = &entry.resource {
        placeholders.extend(resource.placeholders());
    }
    let mut by_subject: BTreeMap<&str, Vec<&Condition>> = BTreeMap::new();
    for condition in conditions {
        by_subject.entry(condition.subject.as_str()).or_default().push(condition);
    }
    let mut choices: Vec<(&str, Vec<Value>)> = Vec::new();
    for (subject, subject_conditions) in &by_subject {
        let hints: Vec<i128> = entry
            .rules
            .iter()
            .flat_map(|rule| &rule.when)
            .filter(|c| c.subject == *subject)
            .flat_map(|c| integer_points(&c.operand))
            .collect();
        let values = subject_values(subject, subject_conditions, &hints, placeholders.contains(subject), tag);
        if values.is_empty() {
            let keys: Vec<&str> = subject_conditions.iter().map(|c| c.key.as_str()).collect();
            return Err(format!("no value satisfies {} together", keys.join(", ")));
        }
        choices.push((subject, values));
    }
    let mut base = Map::new();
    for name in &placeholders {
        if !by_subject.contains_key(name) {
            base.insert((*name).to_owned(), Value::String(fresh(tag, name)));
        }
    }
    let resource = needs_resource.then(|| fresh(tag, "resource"));
    let mut first_miss: Option<String> = None;
    let mut picks = vec![0usize; choices.len()];
    for _ in 0..MAX_COMBINATIONS {
        let mut arguments = base.clone();
        for ((subject, values), pick) in choices.iter().zip(&picks) {
            if let Some(value) = values.get(*pick) {
                arguments.insert((*subject).to_owned(), value.clone());
            }
        }
        match check_call(document, action, entry, arguments, resource.clone(), decision, reason) {
            Ok(call) => return Ok(call),
            Err(miss) => {
                first_miss.get_or_insert(miss);
            }
        }
        // The next combination, odometer-style; stop after the last.
        let mut advanced = false;
        for (pick, (_, values)) in picks.iter_mut().zip(&choices) {
            if *pick + 1 < values.len() {
                *pick += 1;
                advanced = true;
                break;
            }
            *pick = 0;
        }
        if !advanced {
            break;
        }
    }
    Err(first_miss.unwrap_or_else(|| "no arguments could be synthesized".into()))
}

fn check_call(
    document: &Document,
    action: &str,
    entry: &ActionEntry,
    arguments: Map<String, Value>,
    resource: Option<String>,
    decision: Decision,
    reason: &str,
) -> std::result::Result<Call, String> {
    let ruling = crate::policy::evaluate(document, action, &arguments).ruling;
    if ruling.decision != decision || ruling.reason != reason {
        return Err(format!(
            "synthesized arguments were decided {} by {}, not {} by {reason}",
            ruling.decision.as_str(),
            ruling.reason,
            decision.as_str()
        ));
    }
    let rendered_resource =
        crate::pipeline::resource_for(Some(document), action, &Value::Object(arguments.clone()), resource.as_deref())
            .map_err(|e| format!("the resource does not render: {e}"))?;
    let effect_key = match &entry.effect {
        Some(template) => Some(
            template
                .render_effect_key(&arguments, rendered_resource.as_deref())
                .map_err(|e| format!("the effect key does not render: {e}"))?,
        ),
        None => None,
    };
    Ok(Call { arguments, resource, effect_key })
}

// ---- the scenarios ------------------------------------------------------------------------------

struct Ctx<'d> {
    document: &'d Document,
    /// What the scratch kernels are governed by: the document, with a root grant for verify's
    /// own principal when it has an `authority:` section (the policy guarantees are about the
    /// policy; G8 and G9 show authority).
    governed: Document,
    scratch: Scratch,
    clock: ManualClock,
    environment: String,
    principal: Principal,
    cases: Vec<Case<'d>>,
}

impl<'d> Ctx<'d> {
    /// A kernel under the document on its own scratch store file, so no scenario sees another's keys.
    fn warden(&self, store: &str) -> Result<Warden> {
        Warden::open(
            self.scratch.store(store)?,
            self.governed.clone(),
            WardenOptions {
                clock: Arc::new(self.clock.clone()),
                environment: Some(self.environment.clone()),
                ..WardenOptions::default()
            },
        )
    }

    fn request<'a>(&self, name: &'a str, call: &Call) -> ActionRequest<'a> {
        let mut request = ActionRequest::new(name, Value::Object(call.arguments.clone()), self.principal.clone());
        request.resource = call.resource.clone();
        request
    }

    fn cases_where(&self, keep: impl Fn(&Case<'d>) -> bool) -> Vec<&Case<'d>> {
        self.cases.iter().filter(|case| keep(case)).collect()
    }

    /// An allowed action with an effect template, preferring one whose key two scenarios do not share.
    fn allowed_effect(&self) -> Option<&Case<'d>> {
        let allowed = self.cases_where(|c| c.decision == Decision::Allow && c.entry.effect.is_some());
        allowed.iter().find(|c| c.fresh_keys).or(allowed.first()).copied()
    }

    fn allowed(&self) -> Option<&Case<'d>> {
        self.allowed_effect().or_else(|| self.cases_where(|c| c.decision == Decision::Allow).first().copied())
    }

    fn approvable(&self) -> Vec<&Case<'d>> {
        self.cases_where(|c| c.decision == Decision::Approve)
    }

    fn has_approve_rule(&self) -> bool {
        self.document.actions.values().any(|entry| {
            entry.decision == Some(Decision::Approve) || entry.rules.iter().any(|r| r.decision == Decision::Approve)
        })
    }

    fn unknown_action(&self) -> String {
        let mut name = UNKNOWN_ACTION.to_owned();
        while self.document.actions.contains_key(&name) {
            name.push('_');
        }
        name
    }
}

const NO_APPROVE_RULE: &str = "the document has no approve rule";
const NO_ALLOWED_EFFECT: &str = "the document allows no action with an effect template";

fn no_approve_case(ctx: &Ctx<'_>) -> Result<Outcome> {
    if ctx.has_approve_rule() {
        not_applicable("no synthesized arguments reach the document's approve rule(s); see `verify cannot see`")
    } else {
        not_applicable(NO_APPROVE_RULE)
    }
}

/// Ask for approval of `request` and grant it as other people, as many and with the roles
/// the rule requires (verified approvers, so an M-of-N rule is met); the approval id.
fn approved(warden: &Warden, request: &ActionRequest<'_>) -> Result<std::result::Result<String, String>> {
    match warden.submit(request) {
        Err(Error::ApprovalRequired { request_id, .. }) => {
            grant_fully(warden.kernel(), &request_id)?;
            Ok(Ok(request_id))
        }
        Ok(permit) => {
            permit.not_executed("warden verify: never executed")?;
            Ok(Err("got a permit without any approval".into()))
        }
        Err(error) => Ok(Err(format!("was refused ({}) instead of asking for approval: {error}", error.reason()))),
    }
}

/// Grant `approval_id` with as many distinct verified approvers, holding its roles, as it
/// requires.
fn grant_fully(kernel: &Kernel, approval_id: &str) -> Result<()> {
    let record = kernel
        .approval(approval_id)?
        .ok_or_else(|| Error::NotFound(format!("the approval request {approval_id} vanished")))?;
    let claims = serde_json::json!({"roles": record.requirement.roles});
    let verified = crate::approval::Verified::new(Some("warden verify"), &claims).map_err(Error::InvalidInput)?;
    for n in 0..record.requirement.required {
        let principal = Principal::new(APPROVER_AGENT, Some(&format!("{APPROVER}-{n}")))
            .map_err(|e| Error::InvalidInput(e.to_string()))?;
        let approver = crate::approval::Approver::verified(principal, verified.clone());
        kernel.answer(approval_id, &approver, None, true, None, None)?;
    }
    Ok(())
}

/// An argument name the entry neither tests nor renders, so adding it keeps the same rule.
fn mutation_key(case: &Case<'_>, arguments: &Map<String, Value>) -> String {
    let used = |name: &str| {
        arguments.contains_key(name)
            || case.entry.rules.iter().flat_map(|r| &r.when).any(|c| c.subject == name)
            || case.entry.effect.as_ref().is_some_and(|t| t.placeholders().contains(&name))
            || case.entry.resource.as_ref().is_some_and(|t| t.placeholders().contains(&name))
    };
    let mut key = MUTATION_KEY.to_owned();
    while used(&key) {
        key.push('_');
    }
    key
}

fn g1_mutated_approval(ctx: &Ctx<'_>) -> Result<Outcome> {
    let mut chosen = None;
    for case in ctx.approvable() {
        let call = case.call(ctx.document, "g1")?;
        let key = mutation_key(case, &call.arguments);
        let mut mutated = call.clone();
        mutated.arguments.insert(key.clone(), Value::from(1));
        let ruling = crate::policy::evaluate(ctx.document, case.action, &mutated.arguments).ruling;
        if ruling.decision == case.decision && ruling.reason == case.reason {
            chosen = Some((case, call, mutated, key));
            break;
        }
    }
    let Some((case, call, mutated, key)) = chosen else {
        if ctx.approvable().is_empty() {
            return no_approve_case(ctx);
        }
        return not_applicable("no approve rule keeps its decision when an argument it does not test is added");
    };
    let warden = ctx.warden("g1")?;
    let request = ctx.request(case.action, &call);
    let approval = match approved(&warden, &request)? {
        Ok(id) => id,
        Err(why) => return fail(format!("{}: the action {why}", case.label())),
    };
    let mut altered = ctx.request(case.action, &mutated);
    altered.approval_id = Some(&approval);
    #[cfg(test)]
    if broken_build::REBIND_G1.with(std::cell::Cell::get) {
        broken_build::rebind(&warden, &approval, &altered)?;
    }
    let refusal = match warden.submit(&altered) {
        Ok(permit) => {
            permit.not_executed("warden verify: never executed")?;
            return fail(format!(
                "{}: a copy mutated with {key:?} got a permit with the approval granted for the original action",
                case.label()
            ));
        }
        Err(error) => error,
    };
    if refusal.reason() != "mismatch" {
        return fail(format!(
            "{}: the mutated copy was refused for {} instead of mismatch: {refusal}",
            case.label(),
            refusal.reason()
        ));
    }
    let mut exact = ctx.request(case.action, &call);
    exact.approval_id = Some(&approval);
    match warden.submit(&exact) {
        Ok(permit) => permit.commit(&serde_json::json!({"warden_verify": "G1 control"}))?,
        Err(error) => {
            return fail(format!(
                "{}: control failed: the exact approved action was refused ({}): {error}",
                case.label(),
                error.reason()
            ))
        }
    }
    pass(format!(
        "{}: a copy with {key:?} added was refused (mismatch); control: the exact approved action got a permit",
        case.label()
    ))
}

fn g2_replayed_approval(ctx: &Ctx<'_>) -> Result<Outcome> {
    let Some(case) = ctx.approvable().first().copied() else { return no_approve_case(ctx) };
    let warden = ctx.warden("g2")?;
    let call = case.call(ctx.document, "g2")?;
    let request = ctx.request(case.action, &call);
    let approval = match approved(&warden, &request)? {
        Ok(id) => id,
        Err(why) => return fail(format!("{}: the action {why}", case.label())),
    };
    let mut with_approval = ctx.request(case.action, &call);
    with_approval.approval_id = Some(&approval);
    match warden.submit(&with_approval) {
        Ok(permit) => permit.commit(&serde_json::json!({"warden_verify": "G2 control"}))?,
        Err(error) => {
            return fail(format!(
                "{}: control failed: the first use of the approval was refused ({}): {error}",
                case.label(),
                error.reason()
            ))
        }
    }
    match warden.submit(&with_approval) {
        Ok(permit) => {
            permit.not_executed("warden verify: never executed")?;
            fail(format!("{}: the spent approval got a second permit", case.label()))
        }
        Err(error) if error.reason() == "consumed" => pass(format!(
            "{}: presenting the spent approval again was refused (consumed); control: its first use got a permit",
            case.label()
        )),
        Err(error) => fail(format!(
            "{}: the replay was refused for {} instead of consumed: {error}",
            case.label(),
            error.reason()
        )),
    }
}

fn g3_duplicate_effect(ctx: &Ctx<'_>) -> Result<Outcome> {
    let Some(case) = ctx.allowed_effect() else { return not_applicable(NO_ALLOWED_EFFECT) };
    let warden = ctx.warden("g3")?;
    let call = case.call(ctx.document, "g3")?;
    let request = ctx.request(case.action, &call);
    match warden.submit(&request) {
        Ok(permit) => permit.commit(&serde_json::json!({"warden_verify": "G3 first"}))?,
        Err(error) => return fail(format!("{}: control failed: the first call {}", case.label(), refused(&error))),
    }
    let second = warden.submit(&request);
    let key = call.effect_key.clone().unwrap_or_default();
    match second {
        Ok(permit) => {
            permit.not_executed("warden verify: never executed")?;
            return fail(format!("{}: a second call for the committed effect {key:?} got a permit", case.label()));
        }
        Err(error) if error.reason() == "duplicate" => {}
        Err(error) => {
            return fail(format!(
                "{}: the second call was refused for {} instead of duplicate: {error}",
                case.label(),
                error.reason()
            ))
        }
    }
    let control = if case.fresh_keys {
        let other = case.call(ctx.document, "g3-control")?;
        match warden.submit(&ctx.request(case.action, &other)) {
            Ok(permit) => permit.commit(&serde_json::json!({"warden_verify": "G3 control"}))?,
            Err(error) => {
                return fail(format!(
                    "{}: control failed: a call for another effect key {}",
                    case.label(),
                    refused(&error)
                ))
            }
        }
        "the first call and a call for another key got permits"
    } else {
        "the first call got a permit (the rule fixes every placeholder, so there is no other key)"
    };
    pass(format!("{}: a second call for {key:?} was refused (duplicate); control: {control}", case.label()))
}

/// Permit → not executed → FAILED, then a retry is admitted (or stopped only by a ceiling of 1).
fn not_executed_control(ctx: &Ctx<'_>, case: &Case<'_>, store: &str) -> Result<std::result::Result<String, String>> {
    let warden = ctx.warden(store)?;
    let call = case.call(ctx.document, store)?;
    let request = ctx.request(case.action, &call);
    match warden.submit(&request) {
        Ok(permit) => permit.not_executed("warden verify: declined before anything was sent")?,
        Err(error) => return Ok(Err(format!("the first call {}", refused(&error)))),
    }
    let key = call.effect_key.clone().unwrap_or_default();
    let state = warden.kernel().effect(&key)?.map(|r| r.state);
    if state != Some(EffectState::Failed) {
        return Ok(Err(format!("not_executed left {key:?} {}, not failed", state.map_or("absent", |s| s.as_str()))));
    }
    let retry = warden.submit(&request);
    match (retry, case.entry.max_attempts) {
        (Ok(permit), _) => {
            let attempt = permit.attempt();
            permit.commit(&serde_json::json!({"warden_verify": "retry"}))?;
            Ok(Ok(format!("not_executed gave FAILED and a retry was admitted (attempt {attempt})")))
        }
        (Err(error), Some(1)) if error.reason() == "attempt_ceiling" => Ok(Ok(
            "not_executed gave FAILED and the retry met only the document's max_attempts of 1 (attempt_ceiling), \
             not ambiguous"
                .into(),
        )),
        (Err(error), _) => Ok(Err(format!("the retry after not_executed {}", refused(&error)))),
    }
}

fn g5_ambiguous_blocks_retry(ctx: &Ctx<'_>) -> Result<Outcome> {
    let Some(case) = ctx.allowed_effect() else { return not_applicable(NO_ALLOWED_EFFECT) };
    let warden = ctx.warden("g5")?;
    let call = case.call(ctx.document, "g5")?;
    let request = ctx.request(case.action, &call);
    match warden.submit(&request) {
        Ok(permit) => permit.ambiguous("warden verify: the executor timed out")?,
        Err(error) => return fail(format!("{}: the first call {}", case.label(), refused(&error))),
    }
    let key = call.effect_key.clone().unwrap_or_default();
    let state = warden.kernel().effect(&key)?.map(|r| r.state);
    if state != Some(EffectState::Ambiguous) {
        return fail(format!(
            "{}: an ambiguous outcome left {key:?} {}",
            case.label(),
            state.map_or("absent", |s| s.as_str())
        ));
    }
    match warden.submit(&request) {
        Ok(permit) => {
            permit.not_executed("warden verify: never executed")?;
            return fail(format!("{}: a blind retry of the ambiguous {key:?} got a permit", case.label()));
        }
        Err(error) if error.reason() == "ambiguous" => {}
        Err(error) => {
            return fail(format!(
                "{}: the blind retry was refused for {} instead of ambiguous: {error}",
                case.label(),
                error.reason()
            ))
        }
    }
    match not_executed_control(ctx, case, "g5-control")? {
        Ok(control) => pass(format!(
            "{}: after an ambiguous outcome a blind retry was refused (ambiguous); control: {control}",
            case.label()
        )),
        Err(why) => fail(format!("{}: control failed: {why}", case.label())),
    }
}

fn g10_unknown_error(ctx: &Ctx<'_>) -> Result<Outcome> {
    let Some(case) = ctx.allowed_effect() else { return not_applicable(NO_ALLOWED_EFFECT) };
    let warden = ctx.warden("g10")?;
    let call = case.call(ctx.document, "g10")?;
    let request = ctx.request(case.action, &call);
    match warden.submit(&request) {
        // The executor failed in a way nobody classified: the permit is dropped with no outcome.
        Ok(permit) => drop(permit),
        Err(error) => return fail(format!("{}: the first call {}", case.label(), refused(&error))),
    }
    let key = call.effect_key.clone().unwrap_or_default();
    let state = warden.kernel().effect(&key)?.map(|r| r.state);
    if state != Some(EffectState::Ambiguous) {
        return fail(format!(
            "{}: a permit dropped without an outcome left {key:?} {}, not ambiguous",
            case.label(),
            state.map_or("absent", |s| s.as_str())
        ));
    }
    match warden.submit(&request) {
        Ok(permit) => {
            permit.not_executed("warden verify: never executed")?;
            return fail(format!("{}: a retry after an unknown error got a permit", case.label()));
        }
        Err(error) if error.reason() == "ambiguous" => {}
        Err(error) => {
            return fail(format!(
                "{}: the retry was refused for {} instead of ambiguous: {error}",
                case.label(),
                error.reason()
            ))
        }
    }
    match not_executed_control(ctx, case, "g10-control")? {
        Ok(control) => pass(format!(
            "{}: a permit dropped without an outcome left the effect AMBIGUOUS and a retry was refused (ambiguous); \
             control: {control}",
            case.label()
        )),
        Err(why) => fail(format!("{}: control failed: {why}", case.label())),
    }
}

fn g6_unknown_action(ctx: &Ctx<'_>) -> Result<Outcome> {
    let warden = ctx.warden("g6")?;
    let name = ctx.unknown_action();
    let unknown = Call { arguments: Map::new(), resource: None, effect_key: None };
    match warden.submit(&ctx.request(&name, &unknown)) {
        Ok(permit) => {
            permit.not_executed("warden verify: never executed")?;
            return fail(format!("{name:?}, which the document does not list, got a permit"));
        }
        Err(error) if error.reason() == "unknown_action" => {}
        Err(error) => {
            return fail(format!("{name:?} was refused for {} instead of unknown_action: {error}", error.reason()))
        }
    }
    let Some(case) = ctx.allowed() else {
        return not_applicable(
            "the document allows no action, so the control (an allowed action gets a permit) cannot run",
        );
    };
    let call = case.call(ctx.document, "g6")?;
    match warden.submit(&ctx.request(case.action, &call)) {
        Ok(permit) => permit.commit(&serde_json::json!({"warden_verify": "G6 control"}))?,
        Err(error) => return fail(format!("{}: control failed: the allowed action {}", case.label(), refused(&error))),
    }
    pass(format!("{name:?} was refused (unknown_action); control: the allowed {} got a permit", case.label()))
}

fn g7_no_principal(ctx: &Ctx<'_>) -> Result<Outcome> {
    let warden = ctx.warden("g7")?;
    // An action whose call with a principal leaves a receipt: allowed, else denied, else unknown.
    let case = ctx.allowed().or_else(|| ctx.cases_where(|c| c.decision == Decision::Deny).first().copied());
    let unknown = ctx.unknown_action();
    let (name, call, label) = match case {
        Some(case) => (case.action, case.call(ctx.document, "g7")?, case.label()),
        None => (
            unknown.as_str(),
            Call { arguments: Map::new(), resource: None, effect_key: None },
            format!("{unknown} (unlisted)"),
        ),
    };
    let store = warden.kernel();
    let evidence = || -> Result<(u64, usize)> { Ok((store.receipt_count()?, store.events(0, usize::MAX)?.len())) };
    let before = evidence()?;
    let mut anonymous = ctx.request(name, &call);
    anonymous.principal = None;
    match warden.submit(&anonymous) {
        Ok(permit) => {
            permit.not_executed("warden verify: never executed")?;
            return fail(format!("{label}: a call with no principal got a permit"));
        }
        Err(error) if error.reason() == "no_principal" => {}
        Err(error) => {
            return fail(format!(
                "{label}: the call with no principal was refused for {} instead: {error}",
                error.reason()
            ))
        }
    }
    let after = evidence()?;
    if after != before {
        return fail(format!(
            "{label}: the call with no principal was refused but left {} receipt(s) and {} event(s)",
            after.0.saturating_sub(before.0),
            after.1.saturating_sub(before.1)
        ));
    }
    // A denied call leaves its receipt too; an allowed one leaves it on its outcome.
    if let Ok(permit) = warden.submit(&ctx.request(name, &call)) {
        permit.commit(&serde_json::json!({"warden_verify": "G7 control"}))?;
    }
    let receipts = store.receipt_count()?;
    if receipts <= after.0 {
        return fail(format!("{label}: control failed: the same call with a principal wrote no receipt"));
    }
    pass(format!(
        "{label}: a call with no principal was refused (no_principal) with no receipt and no event; \
         control: with a principal it wrote a receipt"
    ))
}

fn g11_altered_receipt(ctx: &Ctx<'_>) -> Result<Outcome> {
    let warden = ctx.warden("g11")?;
    write_receipts(ctx, &warden, "g11", 2)?;
    let kernel = warden.kernel();
    let untouched = kernel.verify_chain()?;
    if !untouched.ok || untouched.chained < 2 {
        return fail(format!(
            "control failed: the untouched chain of {} receipt(s) did not verify ({:?})",
            untouched.chained,
            untouched.breaks.iter().map(|b| b.name).collect::<Vec<_>>()
        ));
    }
    kernel.store().edit_receipt(1, |row| {
        let mut document =
            crate::canonical::parse_json(&row.document).map_err(|e| Error::InvalidInput(e.to_string()))?;
        let Some(fields) = document.as_object_mut() else {
            return Err(Error::InvalidInput("receipt 1 is not a JSON object".into()));
        };
        fields.insert("decision_reason".into(), Value::String("edited-by-warden-verify".into()));
        row.document = crate::canonical::to_canonical_string_with(&document, "receipt", Floats::ADMITTED)
            .map_err(|e| Error::InvalidInput(e.to_string()))?;
        Ok(())
    })?;
    let altered = kernel.verify_chain()?;
    let detected = altered.breaks.iter().any(|b| b.name == "content_altered" && b.seq == Some(1));
    if altered.ok || !detected {
        return fail(format!(
            "receipt 1 was edited in place and verify_chain reported {:?} (ok: {})",
            altered.breaks.iter().map(|b| b.name).collect::<Vec<_>>(),
            altered.ok
        ));
    }
    pass(format!(
        "receipt 1's decision_reason was edited in the store and verify_chain reported content_altered at seq 1; \
         control: the untouched chain of {} receipts verified",
        untouched.chained
    ))
}

/// Receipts under this document: an allowed call committed when there is one, and `refusals`
/// calls of an unlisted action.
fn write_receipts(ctx: &Ctx<'_>, warden: &Warden, tag: &str, refusals: usize) -> Result<()> {
    if let Some(case) = ctx.allowed() {
        let call = case.call(ctx.document, tag)?;
        if let Ok(permit) = warden.submit(&ctx.request(case.action, &call)) {
            permit.commit(&serde_json::json!({"warden_verify": tag.to_uppercase()}))?;
        }
    }
    let unknown = ctx.unknown_action();
    let empty = Call { arguments: Map::new(), resource: None, effect_key: None };
    for _ in 0..refusals {
        let _refused = warden.submit(&ctx.request(&unknown, &empty));
    }
    Ok(())
}

/// G13: a signed checkpoint fixes the log: a bundle whose receipts stop short of the last
/// checkpoint is refused as `truncated`, and two checkpoints of one size with different roots as
/// `log_forked`; control: the bundle as exported verifies. The key is made here and never stored.
fn g13_checkpointed_log(ctx: &Ctx<'_>) -> Result<Outcome> {
    use crate::evidence::{bundle, checkpoint, key::NoteSigner};
    let warden = ctx.warden("g13")?;
    write_receipts(ctx, &warden, "g13", 3)?;
    let kernel = warden.kernel();
    let signer = NoteSigner::generate("warden-verify")?;
    let one = kernel.checkpoint(&signer, Some("warden-verify/g13"))?;
    let dir = crate::scratch::ScratchDir::create("warden-verify-g13")
        .map_err(|e| Error::Config(format!("cannot create a scratch directory for G13: {e}")))?;
    let sound = dir.path("sound");
    bundle::export(kernel, &sound, None, None)?;
    let trusted = [signer.verifier()];
    let control = bundle::verify_bundle(&sound, &trusted);
    if !control.ok {
        return fail(format!(
            "control failed: the bundle as exported was refused: {:?} {}",
            control.reason, control.detail
        ));
    }
    let io = |e: std::io::Error| Error::Config(format!("G13's scratch bundle: {e}"));
    let copy = |name: &str| -> Result<std::path::PathBuf> {
        let to = dir.path(name);
        for sub in ["", "checkpoints", "keys", "proofs"] {
            std::fs::create_dir_all(to.join(sub)).map_err(io)?;
            for entry in std::fs::read_dir(sound.join(sub)).map_err(io)? {
                let entry = entry.map_err(io)?;
                if entry.file_type().map_err(io)?.is_file() {
                    std::fs::copy(entry.path(), to.join(sub).join(entry.file_name())).map_err(io)?;
                }
            }
        }
        Ok(to)
    };
    // Truncated: the last receipt cut off the end, as a rewritten store file would show it.
    let truncated = copy("truncated")?;
    let text = std::fs::read_to_string(truncated.join("receipts.jsonl")).map_err(io)?;
    let kept: Vec<&str> = text.lines().collect();
    let shorter = kept[..kept.len().saturating_sub(1)].iter().map(|line| format!("{line}\n")).collect::<String>();
    std::fs::write(truncated.join("receipts.jsonl"), shorter).map_err(io)?;
    let cut = bundle::verify_bundle(&truncated, &trusted);
    if cut.reason.as_deref() != Some("truncated") {
        return fail(format!(
            "the last receipt was cut off and the bundle verdict was {:?}: {}",
            cut.reason, cut.detail
        ));
    }
    // Forked: the key signs a second checkpoint of the same size with another root.
    let forked = copy("forked")?;
    let companion: checkpoint::Companion = serde_json::from_str(&one.companion)
        .map_err(|e| Error::store(StoreFaultKind::Damaged, format!("checkpoint 1's companion does not parse: {e}")))?;
    let mut root = checkpoint::decode_hash(&one.root)
        .ok_or_else(|| Error::store(StoreFaultKind::Damaged, "checkpoint 1's root is unreadable"))?;
    root[0] ^= 1;
    let fork = checkpoint::Basis {
        number: 2,
        origin: one.origin.clone(),
        size: one.size,
        root,
        time: one.time,
        open: companion.open,
        closed_without_receipt: companion.closed_without_receipt,
    };
    let (fork_companion, text) = checkpoint::texts(&fork)?;
    std::fs::write(forked.join("checkpoints/000002.note"), signer.sign_note(&text)?).map_err(io)?;
    std::fs::write(forked.join("checkpoints/000002.json"), fork_companion).map_err(io)?;
    let mut manifest: Value = serde_json::from_slice(&std::fs::read(forked.join("bundle.json")).map_err(io)?)
        .map_err(|e| Error::store(StoreFaultKind::Damaged, format!("G13's bundle.json: {e}")))?;
    manifest["checkpoints"] = serde_json::json!([1, 2]);
    std::fs::write(forked.join("bundle.json"), manifest.to_string()).map_err(io)?;
    let split = bundle::verify_bundle(&forked, &trusted);
    if split.reason.as_deref() != Some("log_forked") {
        return fail(format!(
            "two checkpoints of {} receipts with different roots gave {:?}: {}",
            one.size, split.reason, split.detail
        ));
    }
    pass(format!(
        "a checkpoint of {} receipts was signed and exported; the bundle without its last receipt was refused as \
         truncated, and a second checkpoint of the same size with another root as log_forked; control: the bundle \
         as exported verified",
        one.size
    ))
}

/// G14: a prune deletes receipts only when it may: refused before its checkpoint (or a later
/// one) was anchored, and refused while a hold stands, each time with nothing deleted; control:
/// with the anchor made and the hold released the prune goes ahead, and what is left — the
/// chain from the pruned prefix on, and a bundle exported after it — still verifies.
fn g14_prune_under_hold(ctx: &Ctx<'_>) -> Result<Outcome> {
    use crate::evidence::{anchor::FileSink, anchoring::SinkProvider, bundle, key::NoteSigner};
    let warden = ctx.warden("g14")?;
    write_receipts(ctx, &warden, "g14", 3)?;
    let kernel = warden.kernel();
    let signer = NoteSigner::generate("warden-verify")?;
    let checkpoint = kernel.checkpoint(&signer, Some("warden-verify/g14"))?;
    let dir = crate::scratch::ScratchDir::create("warden-verify-g14")
        .map_err(|e| Error::Config(format!("cannot create a scratch directory for G14: {e}")))?;
    let intact = |when: &str| -> Result<Option<String>> {
        let (count, pruned) = (kernel.receipt_count()?, kernel.pruned()?);
        Ok((pruned.is_some() || count < checkpoint.size).then(|| {
            format!("{when} the prune was refused but the store holds {count} receipts and pruned {pruned:?}")
        }))
    };
    let (by, reason) = (APPROVER, "warden verify G14");
    match kernel.prune(checkpoint.number, by, reason) {
        Err(Error::InvalidInput(message)) if message.contains("was anchored") => {}
        other => return fail(format!("a prune before any anchor was not refused for it: {other:?}")),
    }
    if let Some(why) = intact("before any anchor,")? {
        return fail(why);
    }
    let file = dir.path("anchors.jsonl");
    let sinks: Vec<SinkProvider> =
        vec![(format!("file {}", file.display()), Ok(Arc::new(FileSink::new(file)) as Arc<_>))];
    let tries = kernel.anchor_pending(&sinks, true)?;
    if !tries.iter().any(|tried| tried.row.anchored()) {
        return fail(format!("the scratch file anchor did not take checkpoint {}: {tries:?}", checkpoint.number));
    }
    kernel.place_hold("warden-verify-g14", by, reason)?;
    match kernel.prune(checkpoint.number, by, reason) {
        Err(Error::InvalidInput(message)) if message.contains("warden-verify-g14") => {}
        other => return fail(format!("a prune under a standing hold was not refused naming it: {other:?}")),
    }
    if let Some(why) = intact("under the hold,")? {
        return fail(why);
    }
    kernel.release_hold("warden-verify-g14", by, reason)?;
    let done = match kernel.prune(checkpoint.number, by, reason) {
        Ok(done) => done,
        Err(error) => return fail(format!("control failed: with the hold released the prune was refused: {error}")),
    };
    let chain = kernel.verify_chain()?;
    if !chain.ok || chain.pruned_through != checkpoint.size {
        return fail(format!("control failed: after the prune the chain reports {:?}", chain.breaks));
    }
    let after = kernel.checkpoint(&signer, None)?;
    let out = dir.path("bundle");
    bundle::export(kernel, &out, None, None)?;
    let verdict = bundle::verify_bundle(&out, &[signer.verifier()]);
    if !verdict.ok {
        return fail(format!(
            "control failed: the bundle exported after the prune was refused: {:?} {}",
            verdict.reason, verdict.detail
        ));
    }
    pass(format!(
        "checkpoint {} of {} receipts: a prune through it was refused before it was anchored and again while a hold \
         stood, deleting nothing; control: anchored and released, the prune deleted {} receipts, and the chain after \
         it and a bundle to checkpoint {} verified",
        checkpoint.number, checkpoint.size, done.receipts_deleted, after.number
    ))
}

/// G12: the pending request an approver reads carries the very action its hash binds — the
/// canonical arguments, resource, environment and principal the proposal had — and a stored
/// action that differs from the bound one is refused as damage, never shown as approvable.
fn g12_approval_shows_its_action(ctx: &Ctx<'_>) -> Result<Outcome> {
    let Some(case) = ctx.approvable().first().copied() else { return no_approve_case(ctx) };
    let call = case.call(ctx.document, "g12")?;
    let warden = ctx.warden("g12")?;
    let request = ctx.request(case.action, &call);
    let approval_id = match warden.submit(&request) {
        Err(Error::ApprovalRequired { request_id, .. }) => request_id,
        Ok(permit) => {
            permit.not_executed("warden verify: never executed")?;
            return fail(format!("{}: got a permit without any approval", case.label()));
        }
        Err(error) => return fail(format!("{}: {}", case.label(), refused(&error))),
    };
    // The action the proposal was built as, by the pipeline's own builder.
    let proposed = warden.action_for(&request)?;
    let hash = proposed.hash().map_err(|e| Error::InvalidInput(e.to_string()))?;
    let shown = warden.kernel().pending_approvals()?.into_iter().find(|r| r.approval_id == approval_id);
    let Some(record) = shown else {
        return fail(format!("{}: the request {approval_id} is not among the pending ones", case.label()));
    };
    let json = record.to_json();
    let same = json["arguments"] == proposed.canonical_arguments()
        && json["environment"] == proposed.environment.as_str()
        && json["resource"] == serde_json::json!(proposed.resource)
        && record.requested_by == proposed.principal
        && record.action_hash == hash;
    if !same {
        return fail(format!(
            "{}: the request shows {} for {} but the proposal was {} for {hash}",
            case.label(),
            json["arguments"],
            record.action_hash,
            proposed.canonical_arguments()
        ));
    }
    let document_hash = record
        .action_document()
        .and_then(|document| crate::canonical::to_canonical_string_with(&document, "", Floats::ADMITTED).ok())
        .map(|text| crate::canonical::sha256_prefixed(text.as_bytes()));
    if document_hash.as_deref() != Some(hash.as_str()) {
        return fail(format!("{}: the action document shown does not hash to {hash}", case.label()));
    }
    // Alter the shown action (a checksum-valid row): it must be refused, not shown.
    let key = mutation_key(case, &call.arguments);
    let mut altered = record.clone();
    if let Some(stored) = altered.action.as_mut() {
        let mut arguments = call.arguments.clone();
        arguments.insert(key.clone(), Value::from(1));
        stored.arguments =
            crate::canonical::to_canonical_string_with(&Value::Object(arguments), "arguments", Floats::ADMITTED)
                .map_err(|e| Error::InvalidInput(e.to_string()))?;
    }
    warden.kernel().store().overwrite_approval(&altered)?;
    let reader = ctx.warden("g12")?;
    match reader.kernel().approval(&approval_id) {
        Err(Error::Store(_)) => {}
        Ok(_) => {
            return fail(format!(
                "{}: a request whose shown arguments gained {key:?} was still read as approvable",
                case.label()
            ))
        }
        Err(other) => return fail(format!("{}: the altered request {}", case.label(), refused(&other))),
    }
    pass(format!(
        "{}: the pending request showed the proposal's canonical arguments, resource, environment and principal, \
         and its action document hashed to the bound {hash}; control: the same request with {key:?} added to its \
         shown arguments was refused as store damage",
        case.label()
    ))
}

// ---- G4: one winner among racing processes ------------------------------------------------------

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

fn g4_one_winner(ctx: &Ctx<'_>, racer: Option<&dyn ProcessRace>) -> Result<Outcome> {
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
            let text = serde_json::to_string(&spec)
                .map_err(|e| Error::InvalidInput(format!("cannot encode the G4 spec: {e}")))?;
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

/// The positive control for G1, in the library's own unit tests only (no library build carries
/// it): the approval granted for the original action is rebound in the store, through the row
/// layer G12 uses, to the mutated copy, as a store that forgot which action a human approved
/// would be. G1 must then fail, and only G1.
#[cfg(test)]
mod broken_build {
    use super::*;

    thread_local! {
        pub(super) static REBIND_G1: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }

    /// Rewrite `approval_id`'s row so that it binds `request`'s action, hash and shown action both.
    pub(super) fn rebind(warden: &Warden, approval_id: &str, request: &ActionRequest<'_>) -> Result<()> {
        let action = warden.action_for(request)?;
        let mut record = warden
            .kernel()
            .approval(approval_id)?
            .ok_or_else(|| Error::InvalidInput(format!("{approval_id} is not in the scratch store")))?;
        record.action_hash = action.hash().map_err(|e| Error::InvalidInput(e.to_string()))?;
        if let Some(stored) = record.action.as_mut() {
            stored.arguments = action.arguments_text().map_err(|e| Error::InvalidInput(e.to_string()))?;
        }
        warden.kernel().store().overwrite_approval(&record)
    }

    const DOCUMENT: &str =
        "schema: warden/v1\nenvironment: production\nmode: enforce\nactions:\n  stripe.refund:\n    \
                            effect: \"refund:{payment_id}\"\n    rules:\n      - when: { amount_lte: 50000 }\n        \
                            decision: allow\n      - decision: approve\n";

    #[test]
    fn a_store_that_lets_an_approval_bind_another_action_fails_g1_and_only_g1() {
        let document = crate::document::load_str(DOCUMENT, "verify-unit.yaml").unwrap();
        let control = run(&document, None).unwrap();
        assert!(control.ok(), "{}", control.render());
        REBIND_G1.with(|on| on.set(true));
        let report = run(&document, None);
        REBIND_G1.with(|on| on.set(false));
        let report = report.unwrap();
        assert!(!report.ok(), "{}", report.render());
        for guarantee in &report.guarantees {
            if guarantee.id == "G1" {
                assert_eq!(guarantee.status, Status::Fail, "{}", report.render());
                assert!(guarantee.detail.contains("got a permit"), "{}", guarantee.detail);
            } else {
                assert_ne!(guarantee.status, Status::Fail, "only G1 depends on the binding: {}", report.render());
            }
        }
    }
}

#[cfg(test)]
mod synthesis {
    use super::*;

    fn number(text: &str) -> Value {
        Value::Number(text.parse().expect("a JSON number"))
    }

    #[test]
    fn a_float_bound_is_met_by_the_integers_on_its_side_and_an_integer_bound_by_itself() {
        let table = [
            (Op::Lte, "10.5", (None, Some(10))),
            (Op::Lt, "10.5", (None, Some(10))),
            (Op::Gte, "10.5", (Some(11), None)),
            (Op::Gt, "10.5", (Some(11), None)),
            (Op::Lte, "-10.5", (None, Some(-11))),
            (Op::Gt, "-10.5", (Some(-10), None)),
            (Op::Lte, "10", (None, Some(10))),
            (Op::Lt, "10", (None, Some(9))),
            (Op::Gte, "10", (Some(10), None)),
            (Op::Gt, "10", (Some(11), None)),
            (Op::Lt, "1e+21", (None, Some(999_999_999_999_999_999_999))),
        ];
        for (op, bound, expected) in table {
            assert_eq!(integer_range(op, &number(bound)), Some(expected), "{op:?} {bound}");
        }
        assert_eq!(integer_range(Op::Lte, &Value::String("10".into())), None);
        assert_eq!(integer_range(Op::Lte, &number("1e300")), None, "past what i128 holds");
        assert_eq!(integer_points(&number("10.5")), [10, 11]);
        assert_eq!(integer_points(&number("-7")), [-7]);
        assert!(integer_points(&Value::Bool(true)).is_empty());
    }

    #[test]
    fn a_float_operand_is_satisfied_by_value() {
        let condition = |op: Op, operand: &str| Condition {
            key: format!("a_{}", op.as_str()),
            subject: "a".into(),
            op,
            operand: number(operand),
        };
        assert!(satisfies(&number("10"), &condition(Op::Lte, "10.5")));
        assert!(!satisfies(&number("11"), &condition(Op::Lte, "10.5")));
        assert!(satisfies(&number("10.5"), &condition(Op::Gte, "10.5")));
        assert!(!satisfies(&number("10.5"), &condition(Op::Gt, "10.5")));
        assert!(satisfies(&number("10.25"), &condition(Op::Lt, "10.5")));
        assert!(!satisfies(&Value::String("1".into()), &condition(Op::Lt, "10.5")));
    }
}
