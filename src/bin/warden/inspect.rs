//! `warden inspect ID`: everything the store knows about any id Warden prints — an approval
//! (`apr_…`), an action (`act_…`, named by every event and refusal), a receipt (`rct_…`, or its
//! `seq` number as `warden receipts` lists it) or an effect key.
//!
//! A prefixed id that names a record of its kind is that record; anything else is read as an
//! effect key, and a number nothing names as an effect key is a receipt's seq. Events and
//! receipts are found by a scan in id order (the store keeps no index on them), so this is an
//! operator's tool, not a hot path.

use serde_json::{json, Value};

use warden::action::IdKind;
use warden::canonical::parse_json;
use warden::receipt::StoredReceipt;
use warden::store::Event;
use warden::Kernel;

use crate::exit::Failure;
use crate::output::{document, fields, shown};
use crate::store_commands::{event_table, receipt_lines};

/// How many events or receipts one scan step reads.
const PAGE: usize = 1_000;

/// What `inspect` accepts, as its refusal names it.
const ACCEPTED: &str =
    "an approval id (apr_…), a scoped grant id (sgr_…), an action id (act_…), a receipt id (rct_…) or seq, or an effect key";

pub fn inspect(kernel: &Kernel, id: &str, json: bool) -> Result<String, Failure> {
    if id.starts_with(IdKind::Approval.prefix()) {
        if let Some(record) = kernel.approval(id)? {
            let events = events_where(kernel, |e| e.approval_id.as_deref() == Some(id))?;
            let receipts = receipts_where(kernel, |doc| doc.get("approval_id").and_then(Value::as_str) == Some(id))?;
            return Ok(if json {
                document(&json!({
                    "kind": "approval",
                    "id": id,
                    "approval": record.to_json(),
                    "action_document": record.action_document(),
                    "events": events.iter().map(Event::to_json).collect::<Vec<_>>(),
                    "receipts": receipts.iter().map(|(_, r)| r.to_json()).collect::<Vec<_>>(),
                }))
            } else {
                let mut out = crate::approval_view::summary(&record);
                out.push_str(&history(&events, &receipts));
                out
            });
        }
    }
    if id.starts_with(IdKind::ScopedGrant.prefix()) {
        if let Some(grant) = kernel.scoped_grant(id)? {
            let events = events_where(kernel, |e| e.data.contains(id))?;
            let receipts =
                receipts_where(kernel, |doc| doc.get("scoped_grant_id").and_then(Value::as_str) == Some(id))?;
            return Ok(if json {
                document(&json!({
                    "kind": "scoped_grant",
                    "id": id,
                    "grant": grant.to_json(kernel.now()),
                    "events": events.iter().map(Event::to_json).collect::<Vec<_>>(),
                    "receipts": receipts.iter().map(|(_, r)| r.to_json()).collect::<Vec<_>>(),
                }))
            } else {
                let mut out = format!(
                    "{}\nstate {}, {} of {} use(s) left, granted by {} answering {}\n",
                    crate::grant_commands::describe(&grant),
                    grant.state(kernel.now()).as_str(),
                    grant.uses_left,
                    grant.scope.uses,
                    shown(&grant.approver),
                    grant.approval_id
                );
                out.push_str(&history(&events, &receipts));
                out
            });
        }
    }
    if id.starts_with(IdKind::Receipt.prefix()) {
        let found = receipts_where(kernel, |doc| doc.get("receipt_id").and_then(Value::as_str) == Some(id))?;
        if let Some((seq, receipt)) = found.first() {
            return Ok(one_receipt(*seq, receipt, json));
        }
    }
    if id.starts_with(IdKind::Action.prefix()) {
        if let Some(found) = action(kernel, id, json)? {
            return Ok(found);
        }
    }
    let record = kernel.effect(id)?;
    let events = events_where(kernel, |e| e.effect_key.as_deref() == Some(id))?;
    let receipts = receipts_where(kernel, |doc| doc.get("effect_key").and_then(Value::as_str) == Some(id))?;
    let by_seq = match id.parse::<u64>() {
        Ok(seq) if !id.starts_with('+') => kernel.receipts(seq, 1)?.into_iter().find(|(found, _)| *found == seq),
        _ => None,
    };
    if record.is_none() && events.is_empty() && receipts.is_empty() {
        return match by_seq {
            Some((seq, receipt)) => Ok(one_receipt(seq, &receipt, json)),
            None => {
                Err(Failure::check("not_found", format!("nothing known about {}; inspect takes {ACCEPTED}", shown(id))))
            }
        };
    }
    let record = record.map_or(Value::Null, |r| r.to_json());
    Ok(if json {
        document(&json!({
            "kind": "effect",
            "id": id,
            "effect": record,
            "events": events.iter().map(Event::to_json).collect::<Vec<_>>(),
            "receipts": receipts.iter().map(|(_, r)| r.to_json()).collect::<Vec<_>>(),
        }))
    } else {
        let mut out = human(&format!("effect {}", shown(id)), &record, &events, &receipts);
        if let Some((seq, receipt)) = by_seq {
            // The number is an effect key and a receipt's seq: the receipt stays one id away.
            let receipt_id = parse_json(&receipt.document).ok().and_then(|d| d.get("receipt_id").cloned());
            let receipt_id = receipt_id.as_ref().and_then(Value::as_str).unwrap_or("its receipt id");
            out.push_str(&format!("\n(receipt seq {seq} is another thing: warden inspect {})\n", shown(receipt_id)));
        }
        out
    })
}

fn one_receipt(seq: u64, receipt: &StoredReceipt, json: bool) -> String {
    let value = receipt.to_json();
    let id = value.get("receipt_id").and_then(Value::as_str).map(str::to_owned).unwrap_or_default();
    if json {
        document(&json!({"kind": "receipt", "id": id, "receipt": value}))
    } else {
        format!("receipt {} (seq {seq})\n{}", shown(&id), fields(&value))
    }
}

/// One proposal: the effects its events name, its events and its receipts; `None` when nothing
/// names it.
fn action(kernel: &Kernel, id: &str, json: bool) -> Result<Option<String>, Failure> {
    let events = events_where(kernel, |e| e.action_id.as_deref() == Some(id))?;
    let receipts = receipts_where(kernel, |doc| doc.get("action_id").and_then(Value::as_str) == Some(id))?;
    if events.is_empty() && receipts.is_empty() {
        return Ok(None);
    }
    let mut keys: Vec<&str> = events.iter().filter_map(|e| e.effect_key.as_deref()).collect();
    keys.sort_unstable();
    keys.dedup();
    let mut effects = Vec::new();
    for key in keys {
        if let Some(record) = kernel.effect(key)? {
            effects.push(record.to_json());
        }
    }
    let mut approvals: Vec<&str> = events.iter().filter_map(|e| e.approval_id.as_deref()).collect();
    approvals.sort_unstable();
    approvals.dedup();
    if json {
        return Ok(Some(document(&json!({
            "kind": "action",
            "id": id,
            "effects": effects,
            "approvals": approvals,
            "events": events.iter().map(Event::to_json).collect::<Vec<_>>(),
            "receipts": receipts.iter().map(|(_, r)| r.to_json()).collect::<Vec<_>>(),
        }))));
    }
    let mut out = format!("action {}\n", shown(id));
    for effect in &effects {
        let key = effect.get("effect_key").and_then(Value::as_str).unwrap_or("-");
        out.push_str(&format!(
            "\neffect {} (its record now; warden inspect {} for its history)\n",
            shown(key),
            shown(key)
        ));
        out.push_str(&fields(effect));
    }
    for approval in &approvals {
        out.push_str(&format!(
            "\napproval {} (warden inspect {} shows what it binds)\n",
            shown(approval),
            shown(approval)
        ));
    }
    out.push_str(&history(&events, &receipts));
    Ok(Some(out))
}

fn human(title: &str, record: &Value, events: &[Event], receipts: &[(u64, StoredReceipt)]) -> String {
    let mut out = format!("{title}\n");
    if record.is_null() {
        out.push_str("  (no record: only events and receipts name it)\n");
    } else {
        out.push_str(&fields(record));
    }
    out.push_str(&history(events, receipts));
    out
}

/// The events and receipts that name an id.
fn history(events: &[Event], receipts: &[(u64, StoredReceipt)]) -> String {
    let mut out = String::new();
    out.push_str(&format!("\nevents ({}):\n", events.len()));
    if !events.is_empty() {
        out.push_str(&event_table(events));
    }
    out.push_str(&format!("\nreceipts ({}):\n", receipts.len()));
    if !receipts.is_empty() {
        out.push_str(&receipt_lines(receipts));
    }
    out
}

fn events_where(kernel: &Kernel, keep: impl Fn(&Event) -> bool) -> Result<Vec<Event>, Failure> {
    let mut found = Vec::new();
    let mut after = 0;
    loop {
        let page = kernel.events(after, PAGE)?;
        let next = page.last().map(|e| e.event_id);
        let full = page.len() == PAGE;
        found.extend(page.into_iter().filter(&keep));
        match next {
            Some(next) if full => after = next,
            _ => return Ok(found),
        }
    }
}

/// Receipts whose (parsed) document satisfies `keep`; an unreadable document matches nothing.
fn receipts_where(kernel: &Kernel, keep: impl Fn(&Value) -> bool) -> Result<Vec<(u64, StoredReceipt)>, Failure> {
    let mut found = Vec::new();
    let mut from = 0;
    loop {
        let page = kernel.receipts(from, PAGE)?;
        let next = page.last().and_then(|(seq, _)| seq.checked_add(1));
        let full = page.len() == PAGE;
        found.extend(page.into_iter().filter(|(_, r)| parse_json(&r.document).is_ok_and(|doc| keep(&doc))));
        match next {
            Some(next) if full => from = next,
            _ => return Ok(found),
        }
    }
}
