//! `warden inspect ID`: everything the store knows about an approval id, an effect key or a
//! receipt id.
//!
//! An `apr_…` id that names an approval is that approval; an `rct_…` id that names a receipt is
//! that receipt; anything else is read as an effect key. Events and receipts are found by a
//! scan in id order (the store keeps no index on them), so this is an operator's tool, not a
//! hot path.

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
    if id.starts_with(IdKind::Receipt.prefix()) {
        let found = receipts_where(kernel, |doc| doc.get("receipt_id").and_then(Value::as_str) == Some(id))?;
        if let Some((seq, receipt)) = found.first() {
            let receipt = receipt.to_json();
            return Ok(if json {
                document(&json!({"kind": "receipt", "id": id, "receipt": receipt}))
            } else {
                format!("receipt {} (seq {seq})\n{}", shown(id), fields(&receipt))
            });
        }
    }
    let record = kernel.effect(id)?;
    let events = events_where(kernel, |e| e.effect_key.as_deref() == Some(id))?;
    let receipts = receipts_where(kernel, |doc| doc.get("effect_key").and_then(Value::as_str) == Some(id))?;
    if record.is_none() && events.is_empty() && receipts.is_empty() {
        return Err(Failure::check("not_found", format!("nothing known about {id}")));
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
        human(&format!("effect {}", shown(id)), &record, &events, &receipts)
    })
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
