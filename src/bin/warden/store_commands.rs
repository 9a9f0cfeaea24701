//! The operator's view of one store: `effects`, `resolve`, `receipts`, `events`, `pending`,
//! `approve`, `deny`. Every one of them reads or answers what is already there.

use std::path::Path;

use serde_json::Value;

use std::io::IsTerminal as _;

use warden::approval::{ApprovalRecord, ApprovalStatus};
use warden::canonical::parse_json;
use warden::clock::{parse_duration, render, Micros};
use warden::receipt::{ChainReport, StoredReceipt};
use warden::store::Event;
use warden::{EffectRecord, EffectState, Kernel, KernelOptions};

use crate::approval_view;
use crate::exit::{Done, Failure};
use crate::output::{document, shown, shown_value, table};

/// Where the store is when neither `--store` nor `$WARDEN_STORE` names one: beside the document
/// `warden init` writes (`warden.yaml`), in the current directory.
pub const DEFAULT_STORE: &str = "warden.redb";

/// The store a command uses: the one named, else [`DEFAULT_STORE`].
pub fn store_path(named: Option<&Path>) -> &Path {
    named.filter(|path| !path.as_os_str().is_empty()).unwrap_or(Path::new(DEFAULT_STORE))
}

/// How every message about a store path ends: how to name another one.
const NAME_IT: &str = "name the store with --store PATH or WARDEN_STORE (without either it is warden.redb in the \
                       current directory)";

/// How a command that runs the pipeline for a moment opens its handle: without the document's
/// automatic checkpoints (the process that serves the agents signs them; an operator need not
/// be able to read the key).
pub fn cli_options() -> warden::pipeline::WardenOptions {
    warden::pipeline::WardenOptions { automatic_checkpoints: false, ..Default::default() }
}

/// Every store command reads or answers what is already there, so a missing file is a mistake
/// in `--store` / `$WARDEN_STORE`, never a request for a new, empty store.
pub fn open_store(path: Option<&Path>) -> Result<Kernel, Failure> {
    open_store_as(path, false)
}

/// For commands that only read: the owner if one serves the store, else the file read-only
/// (the file is not written at all).
pub fn open_store_to_read(path: Option<&Path>) -> Result<Kernel, Failure> {
    open_store_as(path, true)
}

fn open_store_as(path: Option<&Path>, read_only: bool) -> Result<Kernel, Failure> {
    let Some(path) = path.filter(|path| !path.as_os_str().is_empty()) else {
        return Err(Failure::usage("no store given; pass --store PATH or set WARDEN_STORE"));
    };
    let store = warden::store::StoreOptions { read_only, ..warden::store::StoreOptions::default() };
    if path.to_str().is_some_and(warden::store::is_postgres) {
        // A database: no file to look at. Opening checks the server and the schema, and brings
        // an empty or older schema forward, as opening a file store does.
        return Ok(Kernel::open(path, KernelOptions { store, ..KernelOptions::default() })?);
    }
    let shown_path = shown(&path.display().to_string());
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_file() && meta.len() > 0 => {}
        Ok(meta) if meta.is_file() => {
            // The `.lock` beside a store is the empty file most often named by mistake.
            let lock = path.extension().is_some_and(|extension| extension == "lock");
            let hint = if lock { " (the lock file that sits beside a store: name the store itself)" } else { "" };
            return Err(Failure::usage(format!("{shown_path} is an empty file{hint}, not a Warden store; {NAME_IT}")));
        }
        Ok(_) => {
            return Err(Failure::usage(format!("{shown_path} is not a file, so it is not a Warden store; {NAME_IT}")))
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Err(Failure::usage(format!(
                "no store at {shown_path}; {NAME_IT}; read commands never create a store"
            )));
        }
        Err(error) => return Err(Failure::usage(format!("cannot read the store {shown_path}: {error}"))),
    }
    Kernel::open(path, KernelOptions { store, ..KernelOptions::default() }).map_err(not_a_store)
}

/// A file that is there but holds something else (a document, the `.lock` beside a store) is a
/// mistake in the path, exit 2 as for a missing one, not a fault of the store (exit 3).
fn not_a_store(error: warden::Error) -> Failure {
    match &error {
        warden::Error::Store(fault) if fault.kind == warden::error::StoreFaultKind::NotAStore => {
            let message = &fault.message;
            Failure::usage(format!("{}; {NAME_IT}", shown(message.split("; ").next().unwrap_or(message))))
        }
        _ => error.into(),
    }
}

/// Who approves, denies or resolves when `--by` is not given: `cli:$USER`.
pub fn default_person() -> String {
    match std::env::var("USER") {
        Ok(user) if !user.is_empty() => format!("cli:{user}"),
        _ => "cli:unknown".to_owned(),
    }
}

pub fn effects(kernel: &Kernel, state: Option<EffectState>, limit: usize, json: bool) -> Result<String, Failure> {
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

pub fn resolve(
    kernel: &Kernel,
    key: &str,
    attempt: Option<u32>,
    to: EffectState,
    by: &str,
    json: bool,
) -> Result<String, Failure> {
    let record = kernel.resolve_attempt(key, attempt, to, by)?;
    Ok(if json { document(&record.to_json()) } else { format!("{}\n", record.state) })
}

pub fn receipts(kernel: &Kernel, last: usize, json: bool) -> Result<String, Failure> {
    let rows = kernel.last_receipts(last)?;
    if json {
        return Ok(document(&Value::Array(rows.iter().map(|(_, receipt)| receipt.to_json()).collect())));
    }
    if rows.is_empty() {
        return Ok("no receipts\n".to_owned());
    }
    Ok(receipt_lines(&rows))
}

/// One line per receipt under a header: seq, receipt id, finished, result, action, effect key,
/// decision reason. Both ids work with `warden inspect`.
pub fn receipt_lines(rows: &[(u64, StoredReceipt)]) -> String {
    let lines = rows
        .iter()
        .map(|(seq, receipt)| match parse_json(&receipt.document) {
            Ok(doc) => {
                let field = |name: &str| shown_value(doc.get(name));
                vec![
                    seq.to_string(),
                    field("receipt_id"),
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
    table(Some(&["SEQ", "RECEIPT", "FINISHED", "RESULT", "ACTION", "EFFECT_KEY", "REASON"]), lines)
}

pub fn chain(report: &ChainReport, json: bool) -> Result<Done, Failure> {
    let stdout = if json {
        let value = serde_json::to_value(report)
            .map_err(|e| Failure::internal(format!("cannot serialize the chain report: {e}")))?;
        document(&value)
    } else if report.ok {
        let pruned = match report.pruned_through {
            0 => String::new(),
            n => format!(" (receipts 1..={n} were pruned; the first kept names the last pruned)"),
        };
        format!("chain ok: {} receipts verified, head seq {}{pruned}\n", report.verified, report.head_seq.unwrap_or(0))
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
    let failed = (!report.ok).then(|| {
        let found = u64::try_from(report.breaks.len()).unwrap_or(u64::MAX).saturating_add(report.breaks_not_listed);
        Failure::check(
            "chain_broken",
            format!("the receipt chain is broken: {found} break(s); the store's evidence was altered or damaged"),
        )
    });
    Ok(Done { stdout, failed })
}

pub fn events(kernel: &Kernel, after: u64, limit: usize, json: bool) -> Result<String, Failure> {
    let events = kernel.events(after, limit)?;
    if json {
        return Ok(document(&Value::Array(events.iter().map(Event::to_json).collect())));
    }
    if events.is_empty() {
        return Ok(format!("no events after {after}\n"));
    }
    Ok(event_table(&events))
}

/// The events as a table with a header.
pub fn event_table(events: &[Event]) -> String {
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
    table(Some(&["ID", "TS", "TYPE", "ACTION_ID", "EFFECT_KEY", "APPROVAL_ID", "DATA"]), rows)
}

pub fn pending(kernel: &Kernel, json: bool) -> Result<String, Failure> {
    let records = kernel.pending_approvals()?;
    if json {
        return Ok(document(&Value::Array(records.iter().map(ApprovalRecord::to_json).collect())));
    }
    if records.is_empty() {
        return Ok("no pending approvals\n".to_owned());
    }
    let rows = records
        .iter()
        .map(|r| {
            let arguments = r.arguments().map_or_else(|| "(not recorded)".to_owned(), |a| approval_view::one_line(&a));
            vec![
                r.approval_id.clone(),
                shown(&r.action_name),
                arguments,
                approval_view::requester(r),
                approval_view::progress(r),
                render(r.expires_at),
            ]
        })
        .collect();
    let mut out = table(Some(&["APPROVAL", "ACTION", "ARGUMENTS", "REQUESTED_BY", "GRANTS", "EXPIRES"]), rows);
    out.push_str("(long values are cut and marked …; `warden inspect APPROVAL` shows the full action)\n");
    Ok(out)
}

/// `--ttl`, read before the store is opened: an ISO 8601 duration, positive.
pub fn parse_ttl(text: &str) -> Result<Micros, Failure> {
    let ttl = parse_duration(text).map_err(|e| Failure::usage(format!("--ttl: {e}")))?;
    if ttl <= 0 {
        return Err(Failure::usage("--ttl must be a positive duration such as PT15M"));
    }
    Ok(ttl)
}

/// How `approve` may go ahead: `--yes`, or a person at a terminal who said yes.
pub struct Confirm {
    pub yes: bool,
}

/// Show what is being approved, get the approver's yes (on a terminal, unless `--yes`; anywhere
/// else `--yes` is required), and grant exactly that action: the grant names the action hash
/// shown, so a request that binds anything else is refused. With a TTL the approval is usable
/// for that long from the moment it is granted.
///
/// The store is read, then closed while the person decides, and opened again to answer: a
/// command waiting at a prompt never owns the store, so an interrupt (Ctrl-C) there leaves no
/// owner's socket behind. The answer names the action hash shown, so nothing can change in
/// between unnoticed.
pub fn approve(
    store: Option<&Path>,
    id: &str,
    by: &str,
    ttl: Option<Micros>,
    scope: Option<&warden::approval::scope::Scope>,
    confirm: Confirm,
    json: bool,
) -> Result<String, Failure> {
    let approver = warden::kernel::asserted(by)?;
    let Some(record) = open_store_to_read(store)?.approval(id)? else {
        return Err(Failure::check("unknown", format!("no approval request {}", shown(id))));
    };
    let summary = approval_view::summary(&record);
    if !confirm.yes {
        if !std::io::stdin().is_terminal() {
            return Err(Failure::usage(format!(
                "refusing to approve {} without confirmation: stdin is not a terminal. Read what it binds with \
                 `warden inspect {}`, then run approve again with --yes",
                shown(id),
                shown(id)
            )));
        }
        let scoped = match scope {
            Some(scope) => format!(" and the next {} like it for {} minutes", scope.uses, scope.minutes),
            None => String::new(),
        };
        if !ask(&format!("{summary}Grant this{scoped} as {}? [y/N] ", shown(&approver.label())))? {
            return Err(Failure::check(
                "not_confirmed",
                format!("nothing was granted: {} was not confirmed", shown(id)),
            ));
        }
    }
    if let Some(scope) = scope {
        let kernel = open_store(store)?;
        let done = kernel
            .answer_scoped(id, &approver, scope, Some(&record.action_hash))
            .map_err(crate::grant_commands::refusal("scope_refused"))?;
        if json {
            return Ok(document(&done.to_json(kernel.now())));
        }
        let outcome = format!(
            "approval {} granted by {}\n{}\nreceipt {} (seq {}) records it; `warden grants revoke {}` ends it\n",
            done.grant.approval_id,
            shown(&approver.label()),
            crate::grant_commands::describe(&done.grant),
            done.receipt_id,
            done.receipt_seq,
            done.grant.grant_id
        );
        return Ok(if confirm.yes { format!("{summary}{outcome}") } else { outcome });
    }
    let updated = open_store(store)?.answer(id, &approver, None, true, ttl, Some(&record.action_hash))?;
    if json {
        return Ok(document(&updated.to_json()));
    }
    let who = shown(&approver.label());
    let outcome = match updated.status {
        ApprovalStatus::Granted => match ttl {
            Some(_) => format!(
                "approval {} granted by {who}, usable until {}\n",
                updated.approval_id,
                render(updated.expires_at)
            ),
            None => format!("approval {} granted by {who}\n", updated.approval_id),
        },
        _ => format!(
            "grant by {who} recorded on {}: {}; still pending\n",
            updated.approval_id,
            approval_view::progress(&updated)
        ),
    };
    Ok(if confirm.yes { format!("{summary}{outcome}") } else { outcome })
}

/// Ask on the terminal (stderr for the question, stdin for the answer); `y` or `yes` is yes.
fn ask(question: &str) -> Result<bool, Failure> {
    use std::io::Write as _;
    let mut stderr = std::io::stderr().lock();
    stderr
        .write_all(question.as_bytes())
        .and_then(|()| stderr.flush())
        .map_err(|e| Failure::internal(format!("cannot ask on the terminal: {e}")))?;
    let mut answer = String::new();
    std::io::stdin().read_line(&mut answer).map_err(|e| Failure::internal(format!("cannot read the answer: {e}")))?;
    Ok(matches!(answer.trim().to_lowercase().as_str(), "y" | "yes"))
}

pub fn deny(kernel: &Kernel, id: &str, by: &str, reason: Option<&str>, json: bool) -> Result<String, Failure> {
    let approver = warden::kernel::asserted(by)?;
    let record = kernel.answer(id, &approver, reason, false, None, None)?;
    Ok(answered(&record, json))
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

/// At most this many effects of one state are counted by `stats`; a count that reaches it is
/// said as "at least".
pub const STATS_EFFECTS_CAP: usize = 100_000;

/// `warden stats`: the store in numbers — pending approvals, effects by state (AMBIGUOUS first,
/// each counted up to [`STATS_EFFECTS_CAP`]), receipts held and the chain's size, the last signed
/// checkpoint.
pub fn stats(kernel: &Kernel, json: bool) -> Result<String, Failure> {
    let pending = kernel.pending_approvals()?.len();
    let states = [
        EffectState::Ambiguous,
        EffectState::Reserved,
        EffectState::Executing,
        EffectState::Committed,
        EffectState::Failed,
    ];
    let mut counts = Vec::with_capacity(states.len());
    for state in states {
        counts.push((state, kernel.effects(Some(state), STATS_EFFECTS_CAP)?.len()));
    }
    let receipts = kernel.receipt_count()?;
    let chain = kernel.chain_size()?;
    let checkpoint = kernel.checkpoint_numbered(None)?;
    if json {
        let effects: serde_json::Map<String, Value> =
            counts.iter().map(|(state, n)| (state.to_string(), Value::from(*n))).collect();
        let capped: Vec<String> =
            counts.iter().filter(|(_, n)| *n >= STATS_EFFECTS_CAP).map(|(state, _)| state.to_string()).collect();
        return Ok(document(&serde_json::json!({
            "pending_approvals": pending,
            "effects": effects,
            "effects_capped": capped,
            "receipts": receipts,
            "chain_size": chain,
            "last_checkpoint": checkpoint.as_ref().map(|c| serde_json::json!({
                "number": c.number, "size": c.size, "time": render(c.time),
            })),
        })));
    }
    let mut rows = vec![vec!["pending approvals".to_owned(), pending.to_string()]];
    for (state, n) in &counts {
        let at_least = if *n >= STATS_EFFECTS_CAP { "at least " } else { "" };
        rows.push(vec![format!("effects {state}"), format!("{at_least}{n}")]);
    }
    rows.push(vec!["receipts held".to_owned(), receipts.to_string()]);
    rows.push(vec!["chain size".to_owned(), chain.to_string()]);
    rows.push(vec![
        "last checkpoint".to_owned(),
        checkpoint
            .map_or_else(|| "none".to_owned(), |c| format!("{} (covers {}, {})", c.number, c.size, render(c.time))),
    ]);
    Ok(table(None, rows))
}
