//! Resolution, reconciliation, reads, and the lower-level operations for integrators who run
//! their own pipeline.

use crate::action::Action;
use crate::approval::{self};
use crate::clock::Micros;
use crate::effect::{self, EffectRecord, EffectState, Outcome, OutcomePlan, DEFAULT_LEASE};
use crate::error::{Error, Result};
use crate::receipt::{ChainReport, StoredReceipt};
use crate::store::{Event, EventKind};

use super::claim::{claim_in, ClaimRequest, Claimed};
use super::{Kernel, ReconcileAnswer};

impl Kernel {
    // ---- resolution and effects ----------------------------------------------------------------

    /// A human (or a reconcile hook, named `reconcile:<action>`) says what happened to an
    /// AMBIGUOUS effect. Only AMBIGUOUS moves.
    pub fn resolve(&self, effect_key: &str, to: EffectState, resolver: &str) -> Result<EffectRecord> {
        approval::check_person_name("the resolver name", resolver)?;
        self.guarded(|kernel, now| {
            kernel.inner.store.write(|tx| {
                match effect::plan_resolution(tx.effect(effect_key)?.as_ref(), effect_key, to, resolver, now) {
                    Ok(record) => {
                        tx.put_effect(&record)?;
                        tx.event(EventKind::EFFECT_RESOLVED, now, Some(&record.action_id), Some(effect_key), None,
                            serde_json::json!({"state": to.as_str(), "resolved_by": resolver, "attempt": record.attempt}))?;
                        Ok(Ok(record))
                    }
                    Err(refusal) => Ok(Err(refusal)),
                }
            })?
        })
    }

    /// Apply a reconcile hook's answer about an AMBIGUOUS effect, in one write: `committed`
    /// and `not_executed` resolve it (resolver `reconcile:<action>`), `unknown` moves nothing.
    /// Only AMBIGUOUS moves; anything else is refused as for a human resolution.
    pub fn reconcile(&self, effect_key: &str, action_name: &str, answer: ReconcileAnswer) -> Result<EffectRecord> {
        let resolver = format!("reconcile:{action_name}");
        approval::check_person_name("the resolver name", &resolver)?;
        self.guarded(|kernel, now| {
            kernel.inner.store.write(|tx| {
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
                        Some(record) => {
                            Err(Error::NotResolvable { effect_key: effect_key.to_owned(), state: record.state })
                        }
                        None => Err(Error::NotFound(format!("no effect {effect_key:?} to reconcile"))),
                    },
                    Some(to) => effect::plan_resolution(record.as_ref(), effect_key, to, &resolver, now),
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
                Ok(outcome)
            })?
        })
    }

    /// Mark an in-flight effect AMBIGUOUS (idempotent from reserved, executing and ambiguous).
    pub fn mark_ambiguous(&self, effect_key: &str, error: &str) -> Result<EffectRecord> {
        self.guarded(|kernel, now| {
            kernel.inner.store.write(|tx| {
                match effect::plan_mark_ambiguous(tx.effect(effect_key)?.as_ref(), effect_key, error, now) {
                    Ok(OutcomePlan::Write(record)) => {
                        tx.put_effect(&record)?;
                        tx.event(
                            EventKind::EXECUTION_AMBIGUOUS,
                            now,
                            Some(&record.action_id),
                            Some(effect_key),
                            None,
                            serde_json::json!({"error": error, "attempt": record.attempt}),
                        )?;
                        Ok(Ok(record))
                    }
                    Ok(OutcomePlan::Unchanged(record)) => Ok(Ok(record)),
                    Err(refusal) => Ok(Err(refusal)),
                }
            })?
        })
    }

    pub fn effect(&self, effect_key: &str) -> Result<Option<EffectRecord>> {
        self.guarded(|kernel, _| kernel.inner.store.effect(effect_key))
    }

    pub fn effects(&self, state: Option<EffectState>, limit: usize) -> Result<Vec<EffectRecord>> {
        self.guarded(|kernel, _| kernel.inner.store.effects(state, limit))
    }

    pub fn receipts(&self, from: u64, limit: usize) -> Result<Vec<(u64, StoredReceipt)>> {
        self.guarded(|kernel, _| kernel.inner.store.receipts(from, limit))
    }

    /// The last `n` receipts, in seq order.
    pub fn last_receipts(&self, n: usize) -> Result<Vec<(u64, StoredReceipt)>> {
        self.guarded(|kernel, _| kernel.inner.store.last_receipts(n))
    }

    pub fn verify_chain(&self) -> Result<ChainReport> {
        self.guarded(|kernel, _| kernel.inner.store.verify_chain())
    }

    pub fn events(&self, after: u64, limit: usize) -> Result<Vec<Event>> {
        self.guarded(|kernel, _| kernel.inner.store.events(after, limit))
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
        let action_hash = action.hash().map_err(|e| Error::InvalidInput(e.to_string()))?;
        let request = ClaimRequest {
            action,
            action_hash: &action_hash,
            effect_key: Some(effect_key),
            presented: approval_id,
            approval_required: approval_id.is_some(),
            lease: lease.unwrap_or(DEFAULT_LEASE),
            max_attempts,
            begin: false,
        };
        self.guarded(|kernel, now| {
            let claimed = kernel.inner.store.write(|tx| claim_in(tx, &request, now))?;
            match claimed {
                Claimed::Granted { record: Some(record), .. } => Ok(record),
                Claimed::Granted { record: None, .. } => {
                    Err(Error::InvalidInput("internal: a reservation with a key granted no record".into()))
                }
                Claimed::ApprovalRefused(refusal) | Claimed::EffectRefused(refusal) => Err(refusal),
            }
        })
    }

    /// RESERVED → EXECUTING for the holder `action_id`.
    pub fn begin(&self, effect_key: &str, action_id: &str, attempt: u32) -> Result<EffectRecord> {
        self.guarded(|kernel, now| {
            kernel.inner.store.write(|tx| {
                match effect::plan_begin(tx.effect(effect_key)?.as_ref(), effect_key, action_id, attempt, now) {
                    Ok(record) => {
                        tx.put_effect(&record)?;
                        tx.event(
                            EventKind::EXECUTION_STARTED,
                            now,
                            Some(action_id),
                            Some(effect_key),
                            None,
                            serde_json::json!({"attempt": record.attempt}),
                        )?;
                        Ok(Ok(record))
                    }
                    Err(refusal) => Ok(Err(refusal)),
                }
            })?
        })
    }

    /// Report an outcome for the holder `action_id` without a permit. Events only.
    pub fn complete(&self, effect_key: &str, action_id: &str, attempt: u32, outcome: Outcome) -> Result<EffectRecord> {
        self.guarded(|kernel, now| {
            kernel.inner.store.write(|tx| {
                match effect::plan_outcome(
                    tx.effect(effect_key)?.as_ref(),
                    effect_key,
                    action_id,
                    attempt,
                    &outcome,
                    now,
                ) {
                    Ok(OutcomePlan::Write(record)) => {
                        tx.put_effect(&record)?;
                        let kind = match record.state {
                            EffectState::Committed => EventKind::EXECUTION_COMMITTED,
                            EffectState::Failed => EventKind::EXECUTION_FAILED,
                            _ => EventKind::EXECUTION_AMBIGUOUS,
                        };
                        tx.event(
                            kind,
                            now,
                            Some(action_id),
                            Some(effect_key),
                            None,
                            serde_json::json!({"attempt": record.attempt, "error": record.error}),
                        )?;
                        Ok(Ok(record))
                    }
                    Ok(OutcomePlan::Unchanged(record)) => Ok(Ok(record)),
                    Err(refusal) => Ok(Err(refusal)),
                }
            })?
        })
    }
}
