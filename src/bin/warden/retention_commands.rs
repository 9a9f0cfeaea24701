//! Retention: `warden prune` and `warden hold place|release|list` (docs/EVIDENCE.md,
//! "Retention"). The names and reasons are checked here first, so what the store then refuses
//! (a hold stands, nothing anchored, nothing new) is a refusal (exit 1), never a usage error.

use serde_json::{json, Value};

use warden::approval::check_person_name;
use warden::clock::render;
use warden::evidence::retention::{check_hold_name, Hold, PrunedPrefix};
use warden::kernel::RetentionDone;
use warden::{Error, Kernel};

use crate::exit::Failure;
use crate::output::{document, shown, table};

/// Names and reason checked before the store is asked.
fn asked(by: &str, reason: &str, hold: Option<&str>) -> Result<(), Failure> {
    check_person_name("--by", by).map_err(|e| Failure::usage(e.to_string()))?;
    check_person_name("--reason", reason).map_err(|e| Failure::usage(e.to_string()))?;
    if let Some(name) = hold {
        check_hold_name(name).map_err(|e| Failure::usage(e.to_string()))?;
    }
    Ok(())
}

/// What the store refused: a refusal (exit 1) named `reason`; a fault stays a fault.
fn refusal(reason: &'static str) -> impl Fn(Error) -> Failure {
    move |error| match error {
        Error::InvalidInput(warden::error::InvalidInput { message, .. }) | Error::NotFound(message) => {
            Failure::check(reason, message)
        }
        other => other.into(),
    }
}

pub fn hold_json(hold: &Hold) -> Value {
    json!({
        "name": hold.name,
        "standing": hold.stands(),
        "placed_by": hold.placed_by,
        "placed_at": render(hold.placed_at),
        "reason": hold.reason,
        "released": hold.released.as_ref().map(|r| json!({"by": r.by, "at": render(r.at), "reason": r.reason})),
    })
}

pub fn pruned_json(prefix: &PrunedPrefix) -> Value {
    json!({
        "checkpoint": prefix.checkpoint,
        "through_seq": prefix.through_seq,
        "last_hash": prefix.last_hash,
        "events_through": prefix.events_through,
        "receipt_seq": prefix.receipt_seq,
        "at": render(prefix.at),
        "by": prefix.by,
        "reason": prefix.reason,
    })
}

fn done_json(done: &RetentionDone) -> Value {
    json!({
        "receipt_id": done.receipt_id,
        "receipt_seq": done.receipt_seq,
        "hold": done.hold.as_ref().map(hold_json),
        "pruned": done.pruned.as_ref().map(pruned_json),
        "receipts_deleted": done.receipts_deleted,
    })
}

pub fn prune(kernel: &Kernel, through: u64, by: &str, reason: &str, json: bool) -> Result<String, Failure> {
    asked(by, reason, None)?;
    let done = kernel.prune(through, by, reason).map_err(refusal("prune_refused"))?;
    if json {
        return Ok(document(&done_json(&done)));
    }
    let prefix = done.pruned.as_ref().ok_or_else(|| Failure::internal("the prune answered without its prefix"))?;
    Ok(format!(
        "pruned {} receipts and the events of their time: the chain now starts after receipt {} (checkpoint {})\n\
         receipt {} (seq {}) records the prune\n",
        done.receipts_deleted, prefix.through_seq, prefix.checkpoint, done.receipt_id, done.receipt_seq
    ))
}

pub fn place(kernel: &Kernel, name: &str, by: &str, reason: &str, json: bool) -> Result<String, Failure> {
    asked(by, reason, Some(name))?;
    let done = kernel.place_hold(name, by, reason).map_err(refusal("hold_refused"))?;
    Ok(if json {
        document(&done_json(&done))
    } else {
        format!(
            "hold {} placed: nothing is pruned until it is released\nreceipt {} (seq {}) records it\n",
            shown(name),
            done.receipt_id,
            done.receipt_seq
        )
    })
}

pub fn release(kernel: &Kernel, name: &str, by: &str, reason: &str, json: bool) -> Result<String, Failure> {
    asked(by, reason, Some(name))?;
    let done = kernel.release_hold(name, by, reason).map_err(refusal("hold_refused"))?;
    let standing = kernel.holds()?.iter().filter(|hold| hold.stands()).count();
    Ok(if json {
        document(&done_json(&done))
    } else {
        format!(
            "hold {} released; {standing} other hold(s) stand\nreceipt {} (seq {}) records it\n",
            shown(name),
            done.receipt_id,
            done.receipt_seq
        )
    })
}

pub fn list(kernel: &Kernel, all: bool, json: bool) -> Result<String, Failure> {
    let holds: Vec<Hold> = kernel.holds()?.into_iter().filter(|hold| all || hold.stands()).collect();
    if json {
        return Ok(document(&json!({"holds": holds.iter().map(hold_json).collect::<Vec<_>>()})));
    }
    if holds.is_empty() {
        return Ok(if all { "no holds were ever placed\n" } else { "no hold stands\n" }.to_owned());
    }
    let rows = holds
        .iter()
        .map(|hold| {
            vec![
                shown(&hold.name),
                if hold.stands() { "standing".to_owned() } else { "released".to_owned() },
                shown(&hold.placed_by),
                render(hold.placed_at),
                shown(&hold.reason),
            ]
        })
        .collect();
    Ok(table(Some(&["NAME", "STATE", "PLACED BY", "PLACED AT", "REASON"]), rows))
}
