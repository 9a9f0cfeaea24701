//! The operator's view of one store: `effects`, `resolve`, `receipts`, `events`, `pending`,
//! `approve`, `deny`. Every one of them reads or answers what is already there.

use std::path::Path;

use serde_json::Value;

use warden::approval::ApprovalRecord;
use warden::canonical::parse_json;
use warden::clock::{parse_duration, render, Micros};
use warden::receipt::{ChainReport, StoredReceipt};
use warden::store::Event;
use warden::{EffectRecord, EffectState, Kernel, KernelOptions};

use crate::exit::{Done, Failure};
use crate::output::{document, shown, shown_value, table};

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
    let store = warden::store::StoreOptions { read_only, ..warden::store::StoreOptions::default() };
    Ok(Kernel::open(path, KernelOptions { store, ..KernelOptions::default() })?)
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

pub fn resolve(kernel: &Kernel, key: &str, to: EffectState, by: &str, json: bool) -> Result<String, Failure> {
    let record = kernel.resolve(key, to, by)?;
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

/// One line per receipt: seq, finished, result, action, effect key, decision reason.
pub fn receipt_lines(rows: &[(u64, StoredReceipt)]) -> String {
    let lines = rows
        .iter()
        .map(|(seq, receipt)| match parse_json(&receipt.document) {
            Ok(doc) => {
                let field = |name: &str| shown_value(doc.get(name));
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
    table(None, lines)
}

pub fn chain(report: &ChainReport, json: bool) -> Result<Done, Failure> {
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

/// `--ttl`, read before the store is opened: an ISO 8601 duration, positive.
pub fn parse_ttl(text: &str) -> Result<Micros, Failure> {
    let ttl = parse_duration(text).map_err(|e| Failure::usage(format!("--ttl: {e}")))?;
    if ttl <= 0 {
        return Err(Failure::usage("--ttl must be a positive duration such as PT15M"));
    }
    Ok(ttl)
}

/// Grant; with a TTL the approval is usable for that long from now instead of until the
/// request's own expiry.
pub fn approve(kernel: &Kernel, id: &str, by: &str, ttl: Option<Micros>, json: bool) -> Result<String, Failure> {
    let record = match ttl {
        Some(ttl) => kernel.grant_for(id, by, ttl)?,
        None => kernel.grant(id, by)?,
    };
    if json || ttl.is_none() {
        return Ok(answered(&record, json));
    }
    let who = record.approver.as_deref().map_or_else(|| "-".to_owned(), shown);
    Ok(format!("approval {} granted by {who}, usable until {}\n", record.approval_id, render(record.expires_at)))
}

pub fn deny(kernel: &Kernel, id: &str, by: &str, reason: Option<&str>, json: bool) -> Result<String, Failure> {
    let record = kernel.deny(id, by, reason)?;
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
