//! Resolution, reconciliation, reads, and the lower-level operations for integrators who run
//! their own pipeline.

use crate::action::Action;
use crate::approval;
use crate::clock::Micros;
use crate::effect::{self, EffectRecord, EffectState, Outcome, OutcomePlan, DEFAULT_LEASE};
use crate::error::{Error, InvalidInputKind, Result};
use crate::event::{Event, EventKind};
use crate::receipt::{ChainReport, StoredReceipt};
use crate::snapshot_record::SnapshotRecord;
use crate::store::WriteTx;

use super::claim::{claim_in, ClaimRequest, Claimed};
use super::ops::{unexpected, DoctorReport, Read, ReadReply, Write, WriteReply};
use super::{Kernel, ReconcileAnswer};

/// The record a write answered with, or its refusal.
fn effect_reply(reply: WriteReply) -> Result<EffectRecord> {
    match reply {
        WriteReply::Effect(record) => Ok(record),
        WriteReply::Refused(refusal) => Err(refusal),
        _ => Err(unexpected("effect")),
    }
}

/// One effect transition inside the transaction, the shape every planner-driven change shares:
/// a planned record is written with its one event (named by `event`) in this transaction; an
/// unchanged record writes nothing; a planner's refusal comes back inside `Ok`, so whatever the
/// transaction already kept still commits.
pub(super) fn put_planned(
    tx: &mut WriteTx<'_>,
    effect_key: &str,
    planned: std::result::Result<OutcomePlan, Error>,
    event: impl FnOnce(&EffectRecord) -> (EventKind, serde_json::Value),
    now: Micros,
) -> Result<WriteReply> {
    match planned {
        Ok(OutcomePlan::Write(record)) => {
            tx.put_effect(&record)?;
            let (kind, data) = event(&record);
            tx.event(kind, now, Some(&record.action_id), Some(effect_key), None, data)?;
            Ok(WriteReply::Effect(record))
        }
        Ok(OutcomePlan::Unchanged(record)) => Ok(WriteReply::Effect(record)),
        Err(refusal) => Ok(WriteReply::Refused(refusal)),
    }
}

impl Kernel {
    /// One effect operation from outside: guarded (fork, poison, panic), written durably, and
    /// its record or refusal.
    pub(super) fn write_effect(&self, op: Write) -> Result<EffectRecord> {
        self.guarded(|kernel, _| effect_reply(kernel.write(op)?))
    }
}

impl Kernel {
    // ---- resolution and effects ----------------------------------------------------------------

    /// A human (or a reconcile hook, named `reconcile:<action>`) says what happened to an
    /// AMBIGUOUS effect. Only AMBIGUOUS moves.
    pub fn resolve(&self, effect_key: &str, to: EffectState, resolver: &str) -> Result<EffectRecord> {
        self.resolve_attempt(effect_key, None, to, resolver)
    }

    /// [`Kernel::resolve`], bound to the attempt the resolver looked at: when `attempt` is
    /// given and the effect is now at another attempt (it was resolved and tried again since),
    /// nothing moves and the refusal names both attempts. Pages and prompts that show an
    /// effect before a human resolves it pass the attempt they showed.
    pub fn resolve_attempt(
        &self,
        effect_key: &str,
        attempt: Option<u32>,
        to: EffectState,
        resolver: &str,
    ) -> Result<EffectRecord> {
        approval::check_person_name("the resolver name", resolver)?;
        let op = Write::Resolve {
            effect_key: effect_key.to_owned(),
            to,
            resolver: resolver.to_owned(),
            expect_attempt: attempt,
        };
        self.write_effect(op)
    }

    /// Apply a reconcile hook's answer about an AMBIGUOUS effect, in one write: `committed`
    /// and `not_executed` resolve it (resolver `reconcile:<action>`), `unknown` moves nothing.
    /// Only AMBIGUOUS moves; anything else is refused as for a human resolution.
    pub fn reconcile(&self, effect_key: &str, action_name: &str, answer: ReconcileAnswer) -> Result<EffectRecord> {
        approval::check_person_name("the resolver name", &format!("reconcile:{action_name}"))?;
        let op = Write::Reconcile { effect_key: effect_key.to_owned(), action_name: action_name.to_owned(), answer };
        self.write_effect(op)
    }

    /// Mark an in-flight effect AMBIGUOUS (idempotent from reserved, executing and ambiguous).
    /// While the lease is live only its holder may: `holder` must name the record's
    /// (`action_id`, `attempt`); a lapsed lease may be marked by anyone (`holder` `None`), and
    /// a holder that is named must still be the record's.
    pub fn mark_ambiguous(&self, effect_key: &str, holder: Option<(&str, u32)>, error: &str) -> Result<EffectRecord> {
        let op = Write::MarkAmbiguous {
            effect_key: effect_key.to_owned(),
            holder: holder.map(|(action_id, attempt)| (action_id.to_owned(), attempt)),
            error: effect::bounded_message(error.to_owned(), self.limits().max_message_bytes),
        };
        self.write_effect(op)
    }

    /// The effect record for `effect_key` with its executor result, or `None` if never reserved.
    pub fn effect(&self, effect_key: &str) -> Result<Option<EffectRecord>> {
        match self.guarded(|kernel, _| kernel.read(&Read::Effect { effect_key: effect_key.to_owned() }))? {
            ReadReply::Effect(record) => Ok(record),
            _ => Err(unexpected("effect")),
        }
    }

    /// Effects in key order, only those in `state` when given, at most `limit`.
    pub fn effects(&self, state: Option<EffectState>, limit: usize) -> Result<Vec<EffectRecord>> {
        match self.guarded(|kernel, _| kernel.read(&Read::Effects { state, limit }))? {
            ReadReply::Effects(records) => Ok(records),
            _ => Err(unexpected("effects")),
        }
    }

    /// Receipts with seq `from` onward, at most `limit`, in seq order.
    pub fn receipts(&self, from: u64, limit: usize) -> Result<Vec<(u64, StoredReceipt)>> {
        match self.guarded(|kernel, _| kernel.read(&Read::Receipts { from, limit }))? {
            ReadReply::Receipts(rows) => Ok(rows),
            _ => Err(unexpected("receipts")),
        }
    }

    /// The last `n` receipts, in seq order.
    pub fn last_receipts(&self, n: usize) -> Result<Vec<(u64, StoredReceipt)>> {
        match self.guarded(|kernel, _| kernel.read(&Read::LastReceipts { count: n }))? {
            ReadReply::Receipts(rows) => Ok(rows),
            _ => Err(unexpected("receipts")),
        }
    }

    /// How many receipts the store holds (a prune's deleted ones not counted; see `chain_size`).
    pub fn receipt_count(&self) -> Result<u64> {
        match self.guarded(|kernel, _| kernel.read(&Read::ReceiptCount))? {
            ReadReply::Count(count) => Ok(count),
            _ => Err(unexpected("receipt count")),
        }
    }

    /// The chain's size: the seq of its last receipt, the receipts a prune deleted included.
    pub fn chain_size(&self) -> Result<u64> {
        match self.guarded(|kernel, _| kernel.read(&Read::ChainSize))? {
            ReadReply::Count(size) => Ok(size),
            _ => Err(unexpected("chain size")),
        }
    }

    /// The seq of the receipt with id `receipt_id` (`rct_…`).
    pub fn receipt_seq(&self, receipt_id: &str) -> Result<Option<u64>> {
        match self.guarded(|kernel, _| kernel.read(&Read::ReceiptSeq { receipt_id: receipt_id.to_owned() }))? {
            ReadReply::Seq(seq) => Ok(seq),
            _ => Err(unexpected("receipt")),
        }
    }

    /// Walk the whole receipt chain in one read and report every break.
    pub fn verify_chain(&self) -> Result<ChainReport> {
        match self.guarded(|kernel, _| kernel.read(&Read::VerifyChain))? {
            ReadReply::Chain(report) => Ok(report),
            _ => Err(unexpected("chain")),
        }
    }

    /// Events with id after `after`, at most `limit`, ascending.
    pub fn events(&self, after: u64, limit: usize) -> Result<Vec<Event>> {
        match self.guarded(|kernel, _| kernel.read(&Read::Events { after, limit }))? {
            ReadReply::Events(events) => Ok(events),
            _ => Err(unexpected("events")),
        }
    }

    /// Every row integrity-checked, the chain verified and orphans listed, in one read.
    pub fn doctor(&self) -> Result<DoctorReport> {
        match self.guarded(|kernel, _| kernel.read(&Read::Doctor))? {
            ReadReply::Doctor(report) => Ok(*report),
            _ => Err(unexpected("doctor")),
        }
    }

    // ---- snapshots (sights) ----------------------------------------------------------------------

    /// Append one snapshot under `scopes`, durably; the record comes back with its `seq`.
    pub fn append_snapshot(&self, record: SnapshotRecord, scopes: Vec<String>) -> Result<SnapshotRecord> {
        match self.guarded(|kernel, _| kernel.write(Write::AppendSnapshot { record, scopes }))? {
            WriteReply::Snapshot(record) => Ok(record),
            _ => Err(unexpected("snapshot")),
        }
    }

    /// The snapshot with id `id`, or `None`.
    pub fn snapshot(&self, id: &str) -> Result<Option<SnapshotRecord>> {
        match self.guarded(|kernel, _| kernel.read(&Read::Snapshot { id: id.to_owned() }))? {
            ReadReply::Snapshot(record) => Ok(record),
            _ => Err(unexpected("snapshot")),
        }
    }

    /// Snapshots indexed under `scope` with seq below `before`, newest first, at most `limit`,
    /// and whether older ones remain.
    pub fn snapshot_page(&self, scope: &str, before: Option<u64>, limit: usize) -> Result<(Vec<SnapshotRecord>, bool)> {
        let op = Read::SnapshotPage { scope: scope.to_owned(), before, limit };
        match self.guarded(|kernel, _| kernel.read(&op))? {
            ReadReply::SnapshotPage(page, more) => Ok((page, more)),
            _ => Err(unexpected("snapshot page")),
        }
    }

    // ---- the lower-level store operations, for integrators with their own pipeline -------------

    /// Reserve without beginning: the record is RESERVED until `begin`. Writes events only;
    /// an integrator's own pipeline owns its receipts.
    pub fn reserve_only(
        &self,
        action: &Action,
        effect_key: &str,
        lease: Option<Micros>,
        max_attempts: Option<u32>,
    ) -> Result<EffectRecord> {
        self.consume_and_reserve(action, effect_key, None, lease, max_attempts)
    }

    /// Consume a granted approval and reserve in one transaction; a refused reservation leaves
    /// the approval granted, and the approval is checked first.
    pub fn consume_and_reserve(
        &self,
        action: &Action,
        effect_key: &str,
        approval_id: Option<&str>,
        lease: Option<Micros>,
        max_attempts: Option<u32>,
    ) -> Result<EffectRecord> {
        let action_hash = action.hash()?;
        let op = Write::Claim {
            action: action.clone(),
            action_hash,
            effect_key: Some(effect_key.to_owned()),
            presented: approval_id.map(str::to_owned),
            lease: lease.unwrap_or(DEFAULT_LEASE),
            max_attempts,
        };
        match self.guarded(|kernel, _| kernel.write(op))? {
            WriteReply::LapsedClaim(record) => {
                // Never returned, so never begun. The integrator API has no FAILED for an attempt
                // that never began (it cannot tell a holder that ran without `begin`): the key
                // stays reserved with its lease lapsed, which the next claim finds AMBIGUOUS.
                Err(Error::Unavailable(format!(
                    "{}; nothing was begun. Attempt {} of {effect_key} is left to lapse: the next claim finds it \
                     AMBIGUOUS, and `warden resolve` settles it (it never ran)",
                    super::ops::LAPSED_BEFORE_HANDED_OUT,
                    record.attempt
                )))
            }
            other => effect_reply(other),
        }
    }

    /// Consume a granted approval for an action that reserves no effect key (a read, or an
    /// effect the integrator keys elsewhere): the same checks as `consume_and_reserve`, and the
    /// consumed approval comes back. Events only.
    pub fn consume_approval(&self, action: &Action, approval_id: &str) -> Result<approval::ApprovalRecord> {
        let action_hash = action.hash()?;
        let op = Write::Claim {
            action: action.clone(),
            action_hash,
            effect_key: None,
            presented: Some(approval_id.to_owned()),
            lease: DEFAULT_LEASE,
            max_attempts: None,
        };
        match self.guarded(|kernel, _| kernel.write(op))? {
            WriteReply::Approval(record) => Ok(record),
            WriteReply::Refused(refusal) => Err(refusal),
            _ => Err(unexpected("approval")),
        }
    }

    /// Extend the lease of the EXECUTING attempt (`action_id`, `attempt`) to `until`: only while
    /// it is live, and never shorter (`effect::plan_lease_extension`).
    pub fn extend_lease(&self, effect_key: &str, action_id: &str, attempt: u32, until: Micros) -> Result<EffectRecord> {
        let op =
            Write::ExtendLease { effect_key: effect_key.to_owned(), action_id: action_id.to_owned(), attempt, until };
        self.write_effect(op)
    }

    /// RESERVED → EXECUTING for the holder `action_id`. A holder whose lease lapsed before it
    /// began is refused, and the record becomes AMBIGUOUS in the same write (the holder may
    /// have started anyway).
    pub fn begin(&self, effect_key: &str, action_id: &str, attempt: u32) -> Result<EffectRecord> {
        let op = Write::Begin { effect_key: effect_key.to_owned(), action_id: action_id.to_owned(), attempt };
        self.write_effect(op)
    }

    /// Report an outcome for the holder `action_id` without a permit. Events only. COMMITTED and
    /// not executed need an attempt that began (`begin`); a RESERVED one can only be reported
    /// ambiguous.
    pub fn complete(&self, effect_key: &str, action_id: &str, attempt: u32, outcome: Outcome) -> Result<EffectRecord> {
        let op = Write::Complete {
            effect_key: effect_key.to_owned(),
            action_id: action_id.to_owned(),
            attempt,
            outcome: outcome.bounded(self.limits()),
        };
        self.write_effect(op)
    }
}

// ---- the transactions ------------------------------------------------------------------------

pub(super) fn apply_resolve(
    tx: &mut WriteTx<'_>,
    effect_key: &str,
    to: EffectState,
    resolver: &str,
    expect_attempt: Option<u32>,
    now: Micros,
) -> Result<WriteReply> {
    let record = tx.effect(effect_key)?;
    let planned = effect::plan_resolution(record.as_ref(), effect_key, to, resolver, expect_attempt, now);
    put_planned(
        tx,
        effect_key,
        planned.map(OutcomePlan::Write),
        |record| {
            (
                EventKind::EFFECT_RESOLVED,
                serde_json::json!({"state": to.as_str(), "resolved_by": resolver, "attempt": record.attempt}),
            )
        },
        now,
    )
}

pub(super) fn apply_reconcile(
    tx: &mut WriteTx<'_>,
    effect_key: &str,
    action_name: &str,
    answer: ReconcileAnswer,
    now: Micros,
) -> Result<WriteReply> {
    let resolver = format!("reconcile:{action_name}");
    let record = tx.effect(effect_key)?;
    let action_id = record.as_ref().map(|r| r.action_id.clone());
    tx.event(
        EventKind::RECONCILIATION_STARTED,
        now,
        action_id.as_deref(),
        Some(effect_key),
        None,
        serde_json::json!({"resolver": resolver}),
    )?;
    let to = match answer {
        ReconcileAnswer::Committed => Some(EffectState::Committed),
        ReconcileAnswer::NotExecuted => Some(EffectState::Failed),
        ReconcileAnswer::Unknown => None,
    };
    let outcome = match to {
        None => match record {
            Some(record) if record.state == EffectState::Ambiguous => Ok(record),
            Some(record) => Err(Error::NotResolvable { effect_key: effect_key.to_owned(), state: record.state }),
            None => Err(Error::NotFound(format!("no effect {effect_key:?} to reconcile"))),
        },
        Some(to) => effect::plan_resolution(record.as_ref(), effect_key, to, &resolver, None, now),
    };
    if let (Ok(resolved), Some(to)) = (&outcome, to) {
        tx.put_effect(resolved)?;
        tx.event(
            EventKind::EFFECT_RESOLVED,
            now,
            Some(&resolved.action_id),
            Some(effect_key),
            None,
            serde_json::json!({"state": to.as_str(), "resolved_by": resolver, "attempt": resolved.attempt}),
        )?;
    }
    tx.event(
        EventKind::RECONCILIATION_RESOLVED,
        now,
        action_id.as_deref(),
        Some(effect_key),
        None,
        serde_json::json!({"answer": answer.as_str(), "moved": outcome.is_ok() && to.is_some()}),
    )?;
    Ok(match outcome {
        Ok(record) => WriteReply::Effect(record),
        Err(refusal) => WriteReply::Refused(refusal),
    })
}

pub(super) fn apply_mark_ambiguous(
    tx: &mut WriteTx<'_>,
    effect_key: &str,
    holder: Option<(&str, u32)>,
    error: &str,
    now: Micros,
) -> Result<WriteReply> {
    let record = tx.effect(effect_key)?;
    if let Some(refusal) = record.as_ref().and_then(|record| foreign_marker(record, effect_key, holder, now)) {
        return Ok(WriteReply::Refused(refusal));
    }
    let planned = effect::plan_mark_ambiguous(record.as_ref(), effect_key, error, now);
    put_planned(
        tx,
        effect_key,
        planned,
        |record| (EventKind::EXECUTION_AMBIGUOUS, serde_json::json!({"error": error, "attempt": record.attempt})),
        now,
    )
}

/// Why `mark_ambiguous` by this caller must not touch an in-flight record: a live lease belongs
/// to its holder, so the caller must name it; a named holder must be the record's, lapsed or not.
fn foreign_marker(record: &EffectRecord, effect_key: &str, holder: Option<(&str, u32)>, now: Micros) -> Option<Error> {
    if !matches!(record.state, EffectState::Reserved | EffectState::Executing) {
        return None;
    }
    let names_the_holder = holder.is_some_and(|(id, attempt)| id == record.action_id && attempt == record.attempt);
    let refused = match holder {
        Some(_) => !names_the_holder,
        None => record.lease_is_live(now),
    };
    refused.then(|| Error::Duplicate {
        state: crate::error::DuplicateState::InProgress,
        effect_key: effect_key.to_owned(),
        holder: record.action_id.clone(),
    })
}

#[allow(clippy::too_many_arguments)]
pub(super) fn apply_claim(
    tx: &mut WriteTx<'_>,
    action: &Action,
    action_hash: &str,
    effect_key: Option<&str>,
    presented: Option<&str>,
    lease: Micros,
    max_attempts: Option<u32>,
    now: Micros,
) -> Result<WriteReply> {
    if effect_key.is_none() && presented.is_none() {
        return Err(Error::invalid(InvalidInputKind::Missing, "a claim needs an effect key, an approval, or both"));
    }
    let request = ClaimRequest {
        action,
        action_hash,
        effect_key,
        presented,
        approval_required: presented.is_some(),
        lease,
        max_attempts,
        begin: false,
        // The integrator API takes no precondition: an approval given under one is refused.
        precondition: None,
    };
    Ok(match claim_in(tx, &request, now)? {
        Claimed::Granted { record: Some(record), .. } => WriteReply::Effect(record),
        Claimed::Granted { record: None, consumed: Some(approval), .. } if effect_key.is_none() => {
            WriteReply::Approval(approval)
        }
        Claimed::Granted { .. } => {
            return Err(Error::invalid(
                InvalidInputKind::State,
                "internal: a claim granted neither its reservation nor its approval",
            ))
        }
        Claimed::ApprovalRefused(refusal) | Claimed::EffectRefused(refusal) => WriteReply::Refused(refusal),
    })
}

pub(super) fn apply_begin(
    tx: &mut WriteTx<'_>,
    effect_key: &str,
    action_id: &str,
    attempt: u32,
    now: Micros,
) -> Result<WriteReply> {
    let record = tx.effect(effect_key)?;
    match effect::plan_begin(record.as_ref(), effect_key, action_id, attempt, now) {
        Err(refusal @ Error::Ambiguous { .. }) => {
            // The holder's lease lapsed before it began: it may have started the effect anyway,
            // so the record is never left RESERVED for another attempt to take.
            if let Some(mut ambiguous) = record.filter(|r| r.state == EffectState::Reserved && !r.lease_is_live(now)) {
                ambiguous.state = EffectState::Ambiguous;
                ambiguous.updated_at = now;
                ambiguous.lease_expires_at = None;
                ambiguous.error = Some(effect::LEASE_EXPIRED.to_owned());
                put_planned(
                    tx,
                    effect_key,
                    Ok(OutcomePlan::Write(ambiguous)),
                    |record| {
                        (
                            EventKind::EXECUTION_AMBIGUOUS,
                            serde_json::json!({"error": effect::LEASE_EXPIRED, "attempt": record.attempt, "refused": "begin"}),
                        )
                    },
                    now,
                )?;
            }
            Ok(WriteReply::Refused(refusal))
        }
        planned => put_planned(
            tx,
            effect_key,
            planned.map(OutcomePlan::Write),
            |record| (EventKind::EXECUTION_STARTED, serde_json::json!({"attempt": record.attempt})),
            now,
        ),
    }
}

pub(super) fn apply_complete(
    tx: &mut WriteTx<'_>,
    effect_key: &str,
    action_id: &str,
    attempt: u32,
    outcome: &Outcome,
    now: Micros,
) -> Result<WriteReply> {
    let record = tx.effect(effect_key)?;
    let never_begun = record
        .as_ref()
        .is_some_and(|r| r.state == EffectState::Reserved && r.action_id == action_id && r.attempt == attempt);
    if never_begun && !matches!(outcome, Outcome::Ambiguous(_)) {
        return Ok(WriteReply::Refused(Error::invalid(
            InvalidInputKind::State,
            format!(
                "effect {effect_key:?} is reserved and was never begun: call begin before running the effect; \
             an attempt that never began can only be reported ambiguous"
            ),
        )));
    }
    let planned = effect::plan_outcome(record.as_ref(), effect_key, action_id, attempt, outcome, now);
    put_planned(
        tx,
        effect_key,
        planned,
        |record| {
            let kind = match record.state {
                EffectState::Committed => EventKind::EXECUTION_COMMITTED,
                EffectState::Failed => EventKind::EXECUTION_FAILED,
                _ => EventKind::EXECUTION_AMBIGUOUS,
            };
            (kind, serde_json::json!({"attempt": record.attempt, "error": record.error}))
        },
        now,
    )
}
