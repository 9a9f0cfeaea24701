//! The `warden` command line: pure checks (`canonical`, `action-hash`, `template`) and the
//! operator's view of one store (`effects`, `resolve`, `receipts`, `events`, `pending`,
//! `approve`, `deny`).
//!
//! Exit codes: 0 ok; 1 refused or check failed; 2 usage or configuration error (clap's own
//! errors, a missing store, invalid input such as a resolver name with a newline); 3 internal
//! error (store faults). Errors go to stderr as one line `warden: <message>`; with `--json`
//! the error is also printed on stdout as `{"error": {...}}`, so stdout always holds exactly one
//! JSON document.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{ArgGroup, Parser, Subcommand};
use serde_json::{json, Map, Value};

use warden::approval::{is_control_or_format, ApprovalRecord};
use warden::canonical::{parse_json, to_canonical_string};
use warden::clock::render;
use warden::receipt::ChainReport;
use warden::store::Event;
use warden::{Action, EffectRecord, EffectState, Error, Kernel, KernelOptions, Principal, Template, TemplateMode};

const EXIT_CHECK_FAILED: u8 = 1;
const EXIT_USAGE: u8 = 2;
const EXIT_INTERNAL: u8 = 3;

/// The environment every action hashed by `action-hash` is in unless the document says otherwise.
const DEFAULT_ENVIRONMENT: &str = "production";

#[derive(Debug, Parser)]
#[command(
    name = "warden",
    version,
    about = "At-most-once effects for AI agents: checks and the operator's view of a store"
)]
struct Cli {
    /// The store file. Read commands refuse a path that does not exist.
    #[arg(long, global = true, env = "WARDEN_STORE", value_name = "PATH")]
    store: Option<PathBuf>,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Read one JSON value on stdin and print its canonical form (floats are refused).
    Canonical,

    /// Read an action document on stdin and print its action hash (`sha256:…`).
    ///
    /// The document is {"name", "arguments", "principal": {"agent", "user"}, "resource",
    /// "environment"}; user and resource may be absent or null, environment defaults to
    /// "production".
    ActionHash,

    /// Render an effect-key template against arguments and print the key.
    Template {
        /// The template, e.g. 'refund:{payment_id}'.
        template: String,
        /// The action's arguments, a JSON object.
        #[arg(long, value_name = "JSON", default_value = "{}")]
        args: String,
        /// The action's resource, for a `{resource}` placeholder.
        #[arg(long, value_name = "R")]
        resource: Option<String>,
        /// Insert values as they are (ctrlrun's raw mode) instead of percent-encoding them.
        #[arg(long)]
        raw: bool,
    },

    /// List effect records in key order.
    Effects {
        /// Only effects in this state (reserved, executing, committed, failed, ambiguous).
        #[arg(long, value_name = "S", value_parser = parse_state)]
        state: Option<EffectState>,
        /// At most this many effects.
        #[arg(long, value_name = "N", default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..))]
        limit: u64,
        /// Print one JSON array.
        #[arg(long)]
        json: bool,
    },

    /// Say what happened to an AMBIGUOUS effect: it committed, or it failed.
    #[command(group(ArgGroup::new("outcome").required(true).args(["committed", "failed"])))]
    Resolve {
        /// The effect key.
        key: String,
        /// The effect did happen.
        #[arg(long)]
        committed: bool,
        /// The effect did not happen; a later attempt may run it.
        #[arg(long)]
        failed: bool,
        /// Who says so (default: cli:$USER).
        #[arg(long, value_name = "WHO")]
        by: Option<String>,
        /// Print the resolved record as one JSON object.
        #[arg(long)]
        json: bool,
    },

    /// List the last receipts, or verify the receipt chain.
    Receipts {
        /// Show the last N receipts.
        #[arg(long, value_name = "N", default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..))]
        last: u64,
        /// Print one JSON document.
        #[arg(long)]
        json: bool,
        /// Recompute every receipt hash and link; exit 1 on any break.
        #[arg(long, conflicts_with = "last")]
        verify_chain: bool,
    },

    /// List events in id order.
    Events {
        /// Only events with an id greater than this.
        #[arg(long, value_name = "ID", default_value_t = 0)]
        after: u64,
        /// At most this many events.
        #[arg(long, value_name = "N", default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..))]
        limit: u64,
        /// Print one JSON array.
        #[arg(long)]
        json: bool,
    },

    /// List approval requests still waiting for a human.
    Pending {
        /// Print one JSON array.
        #[arg(long)]
        json: bool,
    },

    /// Grant a pending approval request.
    Approve {
        /// The approval id (apr_…).
        id: String,
        /// The human granting it; never the agent or user who asked.
        #[arg(long, value_name = "WHO")]
        by: String,
        /// Print the answered request as one JSON object.
        #[arg(long)]
        json: bool,
    },

    /// Deny a pending approval request.
    Deny {
        /// The approval id (apr_…).
        id: String,
        /// The human denying it; never the agent or user who asked.
        #[arg(long, value_name = "WHO")]
        by: String,
        /// Why, one line.
        #[arg(long, value_name = "TEXT")]
        reason: Option<String>,
        /// Print the answered request as one JSON object.
        #[arg(long)]
        json: bool,
    },
}

impl Command {
    fn json(&self) -> bool {
        match self {
            Command::Canonical | Command::ActionHash | Command::Template { .. } => false,
            Command::Effects { json, .. }
            | Command::Resolve { json, .. }
            | Command::Receipts { json, .. }
            | Command::Events { json, .. }
            | Command::Pending { json }
            | Command::Approve { json, .. }
            | Command::Deny { json, .. } => *json,
        }
    }
}

fn parse_state(text: &str) -> Result<EffectState, String> {
    EffectState::parse(text)
        .ok_or_else(|| "expected one of reserved, executing, committed, failed, ambiguous".to_owned())
}

/// What a command printed, and whether the check it ran failed (exit 1 with `note` on stderr).
struct Done {
    stdout: String,
    check_failed: Option<String>,
}

impl Done {
    fn ok(stdout: String) -> Done {
        Done { stdout, check_failed: None }
    }
}

/// A command that did not do what was asked: the exit code, the one-line message and the
/// error object printed under `--json`.
#[derive(Debug)]
struct Failure {
    code: u8,
    message: String,
    json: Value,
}

impl Failure {
    fn new(code: u8, reason: &str, message: String) -> Failure {
        let json = json!({"reason": reason, "message": message, "refusal": code == EXIT_CHECK_FAILED});
        Failure { code, message, json }
    }

    fn check(reason: &str, message: impl Into<String>) -> Failure {
        Failure::new(EXIT_CHECK_FAILED, reason, message.into())
    }

    fn usage(message: impl Into<String>) -> Failure {
        Failure::new(EXIT_USAGE, "usage", message.into())
    }

    fn internal(message: impl Into<String>) -> Failure {
        Failure::new(EXIT_INTERNAL, "internal", message.into())
    }
}

impl From<Error> for Failure {
    fn from(error: Error) -> Failure {
        let code = if error.is_refusal() {
            EXIT_CHECK_FAILED
        } else if matches!(error, Error::InvalidInput(_) | Error::Config(_)) {
            EXIT_USAGE
        } else {
            EXIT_INTERNAL
        };
        Failure { code, message: error.to_string(), json: error.to_json() }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let json = cli.command.json();
    match run(&cli) {
        Ok(done) => {
            let written = write_stdout(&done.stdout);
            match (done.check_failed, written) {
                (_, Err(failure)) => {
                    write_stderr(&failure.message);
                    ExitCode::from(failure.code)
                }
                (Some(note), Ok(())) => {
                    write_stderr(&note);
                    ExitCode::from(EXIT_CHECK_FAILED)
                }
                (None, Ok(())) => ExitCode::SUCCESS,
            }
        }
        Err(failure) => {
            if json {
                // Nothing useful is left to do if stdout is gone; the exit code still says it.
                let _ = write_stdout(&document(&json!({"error": failure.json})));
            }
            write_stderr(&failure.message);
            ExitCode::from(failure.code)
        }
    }
}

fn run(cli: &Cli) -> Result<Done, Failure> {
    let store = cli.store.as_deref();
    match &cli.command {
        Command::Canonical => canonical(&read_stdin()?).map(Done::ok),
        Command::ActionHash => action_hash(&read_stdin()?).map(Done::ok),
        Command::Template { template, args, resource, raw } => {
            render_template(template, args, resource.as_deref(), *raw).map(Done::ok)
        }
        Command::Effects { state, limit, json } => {
            effects(&open_store(store)?, *state, count(*limit), *json).map(Done::ok)
        }
        Command::Resolve { key, committed, failed, by, json } => {
            let to = match (committed, failed) {
                (true, false) => EffectState::Committed,
                (false, true) => EffectState::Failed,
                _ => return Err(Failure::usage("give exactly one of --committed or --failed")),
            };
            let by = by.clone().unwrap_or_else(default_resolver);
            let record = open_store(store)?.resolve(key, to, &by)?;
            Ok(Done::ok(if *json { document(&record.to_json()) } else { format!("{}\n", record.state) }))
        }
        Command::Receipts { last, json, verify_chain } => {
            let kernel = open_store(store)?;
            if *verify_chain {
                chain(&kernel.verify_chain()?, *json)
            } else {
                receipts(&kernel, count(*last), *json).map(Done::ok)
            }
        }
        Command::Events { after, limit, json } => {
            events(&open_store(store)?, *after, count(*limit), *json).map(Done::ok)
        }
        Command::Pending { json } => pending(&open_store(store)?.pending_approvals()?, *json).map(Done::ok),
        Command::Approve { id, by, json } => {
            let record = open_store(store)?.grant(id, by)?;
            Ok(Done::ok(answered(&record, *json)))
        }
        Command::Deny { id, by, reason, json } => {
            let record = open_store(store)?.deny(id, by, reason.as_deref())?;
            Ok(Done::ok(answered(&record, *json)))
        }
    }
}

// ---- pure checks ----------------------------------------------------------------------------

fn canonical(text: &str) -> Result<String, Failure> {
    let value = parse_json(text).map_err(|e| Failure::check("invalid_json", e.to_string()))?;
    let canonical = to_canonical_string(&value, "").map_err(|e| Failure::check("float", e.to_string()))?;
    Ok(format!("{canonical}\n"))
}

fn action_hash(text: &str) -> Result<String, Failure> {
    let action = action_from_document(text)?;
    let hash = action.hash().map_err(|e| Failure::check("invalid_action", e.to_string()))?;
    Ok(format!("{hash}\n"))
}

const ACTION_FIELDS: [&str; 5] = ["name", "arguments", "principal", "resource", "environment"];
const PRINCIPAL_FIELDS: [&str; 2] = ["agent", "user"];

fn action_from_document(text: &str) -> Result<Action, Failure> {
    let invalid = |message: String| Failure::check("invalid_action", message);
    let value = parse_json(text).map_err(|e| Failure::check("invalid_json", e.to_string()))?;
    let Value::Object(document) = value else {
        return Err(invalid(
            "the action document must be a JSON object {\"name\", \"arguments\", \"principal\", ...}".into(),
        ));
    };
    only_fields(&document, &ACTION_FIELDS, "the action document").map_err(invalid)?;
    let name = match document.get("name") {
        Some(Value::String(name)) => name.as_str(),
        _ => return Err(invalid("the action document needs \"name\", a string".into())),
    };
    let Some(arguments) = document.get("arguments") else {
        return Err(invalid("the action document needs \"arguments\", a JSON object".into()));
    };
    let Some(Value::Object(principal)) = document.get("principal") else {
        return Err(invalid("the action document needs \"principal\", an object {\"agent\", \"user\"}".into()));
    };
    only_fields(principal, &PRINCIPAL_FIELDS, "principal").map_err(invalid)?;
    let agent = match principal.get("agent") {
        Some(Value::String(agent)) => agent.as_str(),
        _ => return Err(invalid("principal needs \"agent\", a string".into())),
    };
    let user = optional_string(principal, "user", "principal.user").map_err(invalid)?;
    let resource = optional_string(&document, "resource", "resource").map_err(invalid)?;
    let environment = match document.get("environment") {
        None => DEFAULT_ENVIRONMENT,
        Some(Value::String(environment)) => environment.as_str(),
        Some(_) => return Err(invalid("environment must be a string (absent means \"production\")".into())),
    };
    let principal = Principal::new(agent, user).map_err(|e| invalid(e.to_string()))?;
    Action::new(name, arguments.clone(), principal, resource, environment).map_err(|e| invalid(e.to_string()))
}

/// A typo in a field name must not quietly hash a different action.
fn only_fields(object: &Map<String, Value>, allowed: &[&str], what: &str) -> Result<(), String> {
    match object.keys().find(|key| !allowed.contains(&key.as_str())) {
        Some(key) => Err(format!("{what} has an unknown field {:?}; the fields are {}", key, allowed.join(", "))),
        None => Ok(()),
    }
}

fn optional_string<'v>(object: &'v Map<String, Value>, field: &str, what: &str) -> Result<Option<&'v str>, String> {
    match object.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(_) => Err(format!("{what} must be a string, null or absent")),
    }
}

fn render_template(source: &str, args: &str, resource: Option<&str>, raw: bool) -> Result<String, Failure> {
    let mode = if raw { TemplateMode::Raw } else { TemplateMode::Escaped };
    let template = Template::parse(source, mode).map_err(|e| Failure::check("template_invalid", e.to_string()))?;
    let arguments = parse_json(args).map_err(|e| Failure::check("invalid_json", format!("--args: {e}")))?;
    let Value::Object(arguments) = arguments else {
        return Err(Failure::check("invalid_json", "--args must be a JSON object"));
    };
    let key = template
        .render_effect_key(&arguments, resource)
        .map_err(|e| Failure::check("effect_key_error", e.to_string()))?;
    Ok(format!("{key}\n"))
}

// ---- the store --------------------------------------------------------------------------------

/// Every store command reads or answers what is already there, so a missing file is a mistake
/// in `--store` / `$WARDEN_STORE`, never a request for a new, empty store.
fn open_store(path: Option<&Path>) -> Result<Kernel, Failure> {
    let Some(path) = path.filter(|path| !path.as_os_str().is_empty()) else {
        return Err(Failure::usage("no store given; pass --store PATH or set WARDEN_STORE"));
    };
    let shown_path = shown(&path.display().to_string());
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_file() && meta.len() > 0 => {}
        Ok(meta) if meta.is_file() => {
            return Err(Failure::usage(format!(
                "{shown_path} is an empty file, not a Warden store; check --store or WARDEN_STORE"
            )));
        }
        Ok(_) => {
            return Err(Failure::usage(format!(
                "{shown_path} is not a file, so it is not a Warden store; check --store or WARDEN_STORE"
            )))
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Err(Failure::usage(format!(
                "no store at {shown_path}; check --store or WARDEN_STORE (read commands never create a store)"
            )));
        }
        Err(error) => return Err(Failure::usage(format!("cannot read the store {shown_path}: {error}"))),
    }
    Ok(Kernel::open(path, KernelOptions::default())?)
}

fn default_resolver() -> String {
    match std::env::var("USER") {
        Ok(user) if !user.is_empty() => format!("cli:{user}"),
        _ => "cli:unknown".to_owned(),
    }
}

fn effects(kernel: &Kernel, state: Option<EffectState>, limit: usize, json: bool) -> Result<String, Failure> {
    let records = kernel.effects(state, limit)?;
    if json {
        return Ok(document(&Value::Array(records.iter().map(EffectRecord::to_json).collect())));
    }
    if records.is_empty() {
        return Ok(match state {
            Some(state) => format!("no {state} effects\n"),
            None => "no effects\n".to_owned(),
        });
    }
    let rows = records
        .iter()
        .map(|r| {
            vec![
                shown(&r.effect_key),
                r.state.to_string(),
                r.attempt.to_string(),
                shown(&r.action_name),
                render(r.updated_at),
                r.resolved_by.as_deref().map_or_else(|| "-".to_owned(), shown),
            ]
        })
        .collect();
    Ok(table(Some(&["KEY", "STATE", "ATTEMPT", "ACTION", "UPDATED", "RESOLVED_BY"]), rows))
}

fn receipts(kernel: &Kernel, last: usize, json: bool) -> Result<String, Failure> {
    let rows = kernel.last_receipts(last)?;
    if json {
        return Ok(document(&Value::Array(rows.iter().map(|(_, receipt)| receipt.to_json()).collect())));
    }
    if rows.is_empty() {
        return Ok("no receipts\n".to_owned());
    }
    let lines = rows
        .iter()
        .map(|(seq, receipt)| match parse_json(&receipt.document) {
            Ok(doc) => {
                let field = |name: &str| match doc.get(name) {
                    Some(Value::String(text)) => shown(text),
                    Some(Value::Null) | None => "-".to_owned(),
                    Some(other) => shown(&other.to_string()),
                };
                vec![
                    seq.to_string(),
                    field("finished_at"),
                    field("result"),
                    field("action"),
                    field("effect_key"),
                    field("decision_reason"),
                ]
            }
            Err(_) => vec![seq.to_string(), "<unreadable receipt document>".to_owned()],
        })
        .collect();
    Ok(table(None, lines))
}

fn chain(report: &ChainReport, json: bool) -> Result<Done, Failure> {
    let stdout = if json {
        let value = serde_json::to_value(report)
            .map_err(|e| Failure::internal(format!("cannot serialize the chain report: {e}")))?;
        document(&value)
    } else if report.ok {
        format!("chain ok: {} receipts verified, head seq {}\n", report.verified, report.head_seq.unwrap_or(0))
    } else {
        let mut out = String::new();
        for found in &report.breaks {
            match found.seq {
                Some(seq) => out.push_str(&format!("break {} at seq {seq}: {}\n", found.name, shown(&found.detail))),
                None => out.push_str(&format!("break {}: {}\n", found.name, shown(&found.detail))),
            }
        }
        if report.breaks_not_listed > 0 {
            out.push_str(&format!("… and {} more break(s) not listed\n", report.breaks_not_listed));
        }
        out
    };
    let check_failed = (!report.ok).then(|| {
        let found = u64::try_from(report.breaks.len()).unwrap_or(u64::MAX).saturating_add(report.breaks_not_listed);
        format!("the receipt chain is broken: {found} break(s); the store's evidence was altered or damaged")
    });
    Ok(Done { stdout, check_failed })
}

fn events(kernel: &Kernel, after: u64, limit: usize, json: bool) -> Result<String, Failure> {
    let events = kernel.events(after, limit)?;
    if json {
        return Ok(document(&Value::Array(events.iter().map(Event::to_json).collect())));
    }
    if events.is_empty() {
        return Ok(format!("no events after {after}\n"));
    }
    let dash = |value: &Option<String>| value.as_deref().map_or_else(|| "-".to_owned(), shown);
    let rows = events
        .iter()
        .map(|e| {
            vec![
                e.event_id.to_string(),
                render(e.ts),
                e.kind.as_str().to_owned(),
                dash(&e.action_id),
                dash(&e.effect_key),
                dash(&e.approval_id),
                shown(&e.data),
            ]
        })
        .collect();
    Ok(table(Some(&["ID", "TS", "TYPE", "ACTION_ID", "EFFECT_KEY", "APPROVAL_ID", "DATA"]), rows))
}

fn pending(records: &[ApprovalRecord], json: bool) -> Result<String, Failure> {
    if json {
        return Ok(document(&Value::Array(records.iter().map(ApprovalRecord::to_json).collect())));
    }
    if records.is_empty() {
        return Ok("no pending approvals\n".to_owned());
    }
    let rows = records
        .iter()
        .map(|r| {
            let by = match &r.requested_by.user {
                Some(user) => format!("{} for {}", r.requested_by.agent, user),
                None => r.requested_by.agent.clone(),
            };
            vec![
                r.approval_id.clone(),
                shown(&r.action_name),
                shown(&by),
                render(r.requested_at),
                render(r.expires_at),
                r.action_hash.clone(),
            ]
        })
        .collect();
    Ok(table(Some(&["APPROVAL", "ACTION", "REQUESTED_BY", "REQUESTED", "EXPIRES", "ACTION_HASH"]), rows))
}

fn answered(record: &ApprovalRecord, json: bool) -> String {
    if json {
        return document(&record.to_json());
    }
    let who = record.approver.as_deref().map_or_else(|| "-".to_owned(), shown);
    match &record.note {
        Some(note) => {
            format!("approval {} {} by {who} ({})\n", record.approval_id, record.status.as_str(), shown(note))
        }
        None => format!("approval {} {} by {who}\n", record.approval_id, record.status.as_str()),
    }
}

// ---- output -----------------------------------------------------------------------------------

/// `--limit`/`--last` arrive as `u64`; on a 32-bit host anything larger than memory is "all".
fn count(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// Stored text (effect keys from raw templates, action names, data) may hold control or format
/// characters; human output escapes them so no value can forge a line or hide text.
fn shown(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if is_control_or_format(c) {
            out.push_str(&format!("\\u{{{:04X}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

/// Left-aligned columns two spaces apart; the last column is not padded.
fn table(header: Option<&[&str]>, rows: Vec<Vec<String>>) -> String {
    let mut all: Vec<Vec<String>> = Vec::with_capacity(rows.len() + 1);
    if let Some(header) = header {
        all.push(header.iter().map(|h| (*h).to_owned()).collect());
    }
    all.extend(rows);
    let columns = all.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|i| all.iter().filter_map(|row| row.get(i)).map(|cell| cell.chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in &all {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i > 0 {
                line.push_str("  ");
            }
            line.push_str(cell);
            if i + 1 < row.len() {
                let pad = widths.get(i).copied().unwrap_or(0).saturating_sub(cell.chars().count());
                line.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn document(value: &Value) -> String {
    match serde_json::to_string_pretty(value) {
        Ok(text) => format!("{text}\n"),
        // A `Value` always serializes; keep the one-document promise regardless.
        Err(error) => {
            format!("{}\n", json!({"error": {"reason": "internal", "message": error.to_string(), "refusal": false}}))
        }
    }
}

fn read_stdin() -> Result<String, Failure> {
    let mut text = String::new();
    match std::io::stdin().read_to_string(&mut text) {
        Ok(_) => Ok(text),
        Err(error) if error.kind() == std::io::ErrorKind::InvalidData => {
            Err(Failure::check("invalid_json", "stdin is not UTF-8 text"))
        }
        Err(error) => Err(Failure::internal(format!("cannot read stdin: {error}"))),
    }
}

/// A closed pipe (`warden events | head`) is not an error worth a message.
fn write_stdout(text: &str) -> Result<(), Failure> {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(error) => Err(Failure::internal(format!("cannot write to stdout: {error}"))),
    }
}

/// One line, always: a message can carry an effect key or a path with a newline in it.
fn write_stderr(message: &str) {
    let _ = writeln!(std::io::stderr().lock(), "warden: {}", shown(message));
}
