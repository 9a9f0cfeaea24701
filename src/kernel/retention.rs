//! Retention in the kernel: placing and releasing holds, and pruning a prefix of the receipts.
//! Each is one write transaction that writes its own receipt (so the chain records who pruned
//! or held, when and why, and a later prune cannot remove the record of the one before it
//! without a checkpoint over it) and its event with the change itself. The rule a prune obeys is
//! `evidence::retention::may_prune`; what it keeps is [`PrunedPrefix`].

use super::evidence::Rows;
use super::ops::{unexpected, Read, ReadReply, Retention, RetentionDone, RetentionOp, Write, WriteReply};
use super::propose::draft_for;
use super::Kernel;
use crate::action::{new_id, Action, IdKind, Principal};
use crate::approval::check_person_name;
use crate::clock::{self, Micros};
use crate::decision::{Decision, Ruling};
use crate::error::{Error, InvalidInputKind, Result, StoreFaultKind};
use crate::event::EventKind;
use crate::evidence::anchoring::StoredAnchor;
use crate::evidence::retention::{
    self, check_hold_name, may_prune, Hold, PruneFacts, PrunedPrefix, Release, RETENTION_AGENT,
};
use crate::receipt::{ReceiptDraft, ReceiptResult};
use crate::store::WriteTx;

fn refused(error: Error) -> Result<WriteReply> {
    Ok(WriteReply::Refused(error))
}

/// The receipt of a retention write: the store's own administration, allowed, committed.
fn draft(op: &RetentionOp, action: &str, arguments: serde_json::Value, now: Micros) -> Result<ReceiptDraft> {
    let principal = Principal::new(RETENTION_AGENT, Some(&op.by))?;
    let mut acted = Action::new(action, arguments, principal, None, &op.environment)?;
    acted.action_id = op.action_id.clone();
    let action_hash = acted.hash()?;
    let mut draft = draft_for(op.receipt_id.clone(), &acted, &action_hash, &Ruling::new(Decision::Allow, "retention"));
    (draft.result, draft.started_at, draft.finished_at) = (ReceiptResult::Committed, now, now);
    Ok(draft)
}

pub(super) fn apply(tx: &mut WriteTx<'_>, op: &RetentionOp, now: Micros) -> Result<WriteReply> {
    if let Err(error) = check_person_name("--by", &op.by).and_then(|()| check_person_name("--reason", &op.reason)) {
        return refused(error);
    }
    match &op.what {
        Retention::PlaceHold { name } => place(tx, op, name, now),
        Retention::ReleaseHold { name } => release(tx, op, name, now),
        Retention::Prune { checkpoint } => prune(tx, op, *checkpoint, now),
    }
}

fn record(
    tx: &mut WriteTx<'_>,
    op: &RetentionOp,
    action: &str,
    kind: EventKind,
    data: serde_json::Value,
    now: Micros,
) -> Result<u64> {
    let draft = draft(op, action, data.clone(), now)?;
    let (seq, _) = tx.append_receipt(&draft, None)?;
    tx.event(kind, now, Some(&op.action_id), None, None, data)?;
    Ok(seq)
}

fn done(
    op: &RetentionOp,
    receipt_seq: u64,
    hold: Option<Hold>,
    pruned: Option<PrunedPrefix>,
    deleted: u64,
) -> WriteReply {
    WriteReply::Retention(Box::new(RetentionDone {
        receipt_seq,
        receipt_id: op.receipt_id.clone(),
        hold,
        pruned,
        receipts_deleted: deleted,
    }))
}

fn place(tx: &mut WriteTx<'_>, op: &RetentionOp, name: &str, now: Micros) -> Result<WriteReply> {
    if let Err(error) = check_hold_name(name) {
        return refused(error);
    }
    if let Some(standing) = tx.hold(name)?.filter(Hold::stands) {
        return refused(Error::invalid(
            InvalidInputKind::State,
            format!("the hold {} stands already", standing.describe()),
        ));
    }
    let hold = Hold {
        name: name.to_owned(),
        placed_by: op.by.clone(),
        reason: op.reason.clone(),
        placed_at: now,
        released: None,
    };
    let seq = record(
        tx,
        op,
        retention::HOLD_PLACE_ACTION,
        EventKind::HOLD_PLACED,
        serde_json::json!({"hold": name, "reason": op.reason}),
        now,
    )?;
    tx.put_hold(&hold)?;
    Ok(done(op, seq, Some(hold), None, 0))
}

fn release(tx: &mut WriteTx<'_>, op: &RetentionOp, name: &str, now: Micros) -> Result<WriteReply> {
    let Some(mut hold) = tx.hold(name)?.filter(Hold::stands) else {
        return refused(Error::NotFound(format!(
            "no hold named {name:?} stands; `warden hold list` shows the standing ones"
        )));
    };
    let seq = record(
        tx,
        op,
        retention::HOLD_RELEASE_ACTION,
        EventKind::HOLD_RELEASED,
        serde_json::json!({"hold": name, "reason": op.reason}),
        now,
    )?;
    hold.released = Some(Release { by: op.by.clone(), reason: op.reason.clone(), at: now });
    tx.put_hold(&hold)?;
    Ok(done(op, seq, Some(hold), None, 0))
}

fn prune(tx: &mut WriteTx<'_>, op: &RetentionOp, number: u64, now: Micros) -> Result<WriteReply> {
    let Some(checkpoint) = tx.checkpoint(number)? else {
        return refused(Error::NotFound(format!("there is no checkpoint {number}; `warden checkpoints` lists them")));
    };
    let standing: Vec<Hold> = tx.holds()?.into_iter().filter(Hold::stands).collect();
    let prior = tx.pruned()?;
    let newest = tx.last_checkpoint()?.map_or(number, |last| last.number);
    let anchored =
        tx.anchors(number, newest)?.into_iter().filter(StoredAnchor::anchored).map(|row| row.checkpoint).max();
    let vouching = match anchored {
        Some(n) => tx.checkpoint(n)?,
        None => None,
    };
    let facts = PruneFacts {
        checkpoint: number,
        size: checkpoint.size,
        pruned_through: prior.as_ref().map_or(0, |prefix| prefix.through_seq),
        standing: &standing,
        anchored,
    };
    if let Err(error) = may_prune(&facts) {
        return refused(error);
    }
    let through = checkpoint.size;
    // What the prefix leaves behind, computed (and checked against the signed root) before
    // anything is deleted.
    // The anchored checkpoint vouches for this one only if the receipts make both their roots.
    let (frontier, roots) = {
        let rows = Rows::of(&*tx)?;
        let tree = rows.tree(through);
        let mut roots = vec![(number, through, tree.root()?, checkpoint.root.clone())];
        if let Some(later) = vouching.as_ref().filter(|later| later.number != number) {
            roots.push((later.number, later.size, rows.tree(later.size).root()?, later.root.clone()));
        }
        (tree.frontier()?, roots)
    };
    for (n, size, root, signed) in roots {
        if base64::Engine::encode(&base64::prelude::BASE64_STANDARD, root) != signed {
            return Err(Error::store(
                StoreFaultKind::Damaged,
                format!(
                    "the receipts through {size} hash to another root than checkpoint {n} signed; nothing was pruned. \
                 Run `warden doctor`"
                ),
            ));
        }
    }
    let last = tx.receipt_document(through)?.ok_or_else(|| {
        Error::store(
            StoreFaultKind::Damaged,
            format!("receipt {through} is missing from the chain; nothing was pruned. Run `warden doctor`"),
        )
    })?;
    let last_hash = crate::canonical::sha256_prefixed(last.as_bytes());
    let finished = crate::canonical::parse_json(&last)
        .ok()
        .and_then(|document| document.get("finished_at").and_then(serde_json::Value::as_str).map(clock::parse))
        .and_then(std::result::Result::ok)
        .ok_or_else(|| {
            Error::store(
                StoreFaultKind::Damaged,
                format!("receipt {through} has no readable finished_at; run `warden doctor`"),
            )
        })?;
    // Never less than a prune before deleted (the first event kept may be later than this one).
    let events_through = tx.events_through(finished)?.max(prior.as_ref().map_or(0, |prefix| prefix.events_through));
    let data = serde_json::json!({
        "checkpoint": number,
        "through_seq": through,
        "root": checkpoint.root,
        "last_hash": last_hash,
        "events_through": events_through,
        "reason": op.reason,
    });
    let seq = record(tx, op, retention::PRUNE_ACTION, EventKind::RECEIPTS_PRUNED, data, now)?;
    let mut marker = PrunedPrefix {
        checkpoint: number,
        through_seq: through,
        last_hash,
        frontier,
        events_through,
        last_reservation: prior.and_then(|prefix| prefix.last_reservation),
        receipt_seq: seq,
        at: now,
        by: op.by.clone(),
        reason: op.reason.clone(),
    };
    let deleted = tx.prune(&mut marker, facts.pruned_through + 1)?;
    Ok(done(op, seq, None, Some(marker), deleted))
}

impl Kernel {
    fn retention(&self, what: Retention, by: &str, reason: &str) -> Result<RetentionDone> {
        let ids = |kind| {
            new_id(kind).map_err(|e| Error::store(StoreFaultKind::Io, format!("no randomness for a receipt: {e}")))
        };
        let op = RetentionOp {
            what,
            by: by.to_owned(),
            reason: reason.to_owned(),
            environment: self.environment().to_owned(),
            action_id: ids(IdKind::Action)?,
            receipt_id: ids(IdKind::Receipt)?,
        };
        match self.guarded(|kernel, _| kernel.write(Write::Retention(Box::new(op))))? {
            WriteReply::Retention(done) => Ok(*done),
            WriteReply::Refused(error) => Err(error),
            _ => Err(unexpected("retention")),
        }
    }

    /// Delete the receipts through checkpoint `checkpoint`'s size, and the events of their time,
    /// after writing the prune's own receipt, in one transaction: refused while a hold stands,
    /// when nothing new would go, and unless that checkpoint or a later one was anchored.
    pub fn prune(&self, checkpoint: u64, by: &str, reason: &str) -> Result<RetentionDone> {
        self.retention(Retention::Prune { checkpoint }, by, reason)
    }

    /// Place the hold `name`: nothing is pruned while it stands.
    pub fn place_hold(&self, name: &str, by: &str, reason: &str) -> Result<RetentionDone> {
        self.retention(Retention::PlaceHold { name: name.to_owned() }, by, reason)
    }

    /// Release the standing hold `name`.
    pub fn release_hold(&self, name: &str, by: &str, reason: &str) -> Result<RetentionDone> {
        self.retention(Retention::ReleaseHold { name: name.to_owned() }, by, reason)
    }

    /// Every hold, standing or released, by name.
    pub fn holds(&self) -> Result<Vec<Hold>> {
        match self.guarded(|kernel, _| kernel.read(&Read::Holds))? {
            ReadReply::Holds(holds) => Ok(holds),
            _ => Err(unexpected("holds")),
        }
    }

    /// The pruned prefix of the receipts, once a prune removed one.
    pub fn pruned(&self) -> Result<Option<PrunedPrefix>> {
        match self.guarded(|kernel, _| kernel.read(&Read::Pruned))? {
            ReadReply::Pruned(prefix) => Ok(prefix.map(|prefix| *prefix)),
            _ => Err(unexpected("pruned prefix")),
        }
    }
}
