//! The pipeline's steps for one proposal: refusals, the approval gate, the permit
//! transaction, observe mode, and the outcome transaction.

use crate::action::{new_id, Action, IdKind};
use crate::approval::{ApprovalRecord, ApprovalStatus, DEFAULT_APPROVAL_TTL};
use crate::clock::Micros;
use crate::decision::{Decision, Ruling};
use crate::effect::{self, Claim, EffectState, Outcome, OutcomePlan, ReservationPlan, DEFAULT_LEASE};
use crate::error::{Error, Result};
use crate::receipt::{ReceiptDraft, ReceiptResult};
use crate::store::{EventKind, WriteTx};

use super::claim::{claim_in, presented_approval, ClaimRequest, Claimed};
use super::{Kernel, Permit, Proposal};

impl Kernel {
    // ---- the pipeline ------------------------------------------------------------------------

    /// normalize → (decision passed in) → approval gate → one write transaction → permit.
    pub fn propose(&self, proposal: &Proposal<'_>) -> Result<Permit> {
        let action = proposal.action;
        let action_hash = action.hash().map_err(|e| Error::InvalidInput(e.to_string()))?;
        let lease = proposal.lease.unwrap_or(DEFAULT_LEASE);
        if lease <= 0 {
            return Err(Error::InvalidInput("a lease must be positive".into()));
        }
        if let Some(id) = proposal.approval_id {
            if !crate::action::is_id(IdKind::Approval, id) {
                return Err(Error::InvalidInput("an approval id is apr_ followed by 32 lowercase hex digits".into()));
            }
        }
        self.guarded(|kernel, now| {
            let mut draft = kernel.draft(action, &action_hash, &proposal.ruling, now)?;
            if action.environment != kernel.inner.environment {
                let refusal = Error::Denied {
                    reason: "environment_mismatch".into(),
                    detail: format!(
                        "the action is for {:?} and this kernel acts in {:?}",
                        action.environment, kernel.inner.environment
                    ),
                };
                draft.decision = Decision::Deny.as_str().into();
                return kernel.refuse(action, &proposal.ruling, &mut draft, None, ReceiptResult::Denied, refusal, now);
            }
            if proposal.observe {
                return kernel.observe(action, &action_hash, proposal, lease, now);
            }
            // Deny: one transaction with its evidence and receipt.
            if proposal.ruling.decision == Decision::Deny {
                let refusal = Error::Denied {
                    reason: proposal.ruling.reason.clone(),
                    detail: format!("the policy denies {}", action.name),
                };
                return kernel.refuse(action, &proposal.ruling, &mut draft, None, ReceiptResult::Denied, refusal, now);
            }
            let effect_key = match proposal.effect {
                None => None,
                Some(template) => match template.render_effect_key(&action.arguments, action.resource.as_deref()) {
                    Ok(key) => Some(key),
                    Err(error) => {
                        let refusal = Error::Denied { reason: "effect_key_error".into(), detail: error.to_string() };
                        draft.decision = Decision::Deny.as_str().into();
                        return kernel.refuse(
                            action,
                            &proposal.ruling,
                            &mut draft,
                            None,
                            ReceiptResult::Denied,
                            refusal,
                            now,
                        );
                    }
                },
            };
            draft.effect_key = effect_key.clone();
            if proposal.ruling.decision == Decision::Approve && proposal.approval_id.is_none() {
                // The effect check comes before the approval gate: no human is asked to
                // approve an attempt that could never run (committed, ambiguous, held by a
                // live lease, or at its attempt ceiling). The plan is only read here; the
                // permit transaction decides again when the approval is presented.
                if let Some(key) = &effect_key {
                    let claim = Claim {
                        effect_key: key,
                        action_id: &action.action_id,
                        action_name: &action.name,
                        action_hash: &action_hash,
                        approval_id: None,
                        lease,
                        max_attempts: proposal.max_attempts,
                    };
                    let record = kernel.inner.store.effect(key)?;
                    let plan = effect::plan_reservation(record.as_ref(), &claim, now).map_err(Error::InvalidInput)?;
                    if let ReservationPlan::Refuse(refusal) = plan {
                        return kernel.refuse(
                            action,
                            &proposal.ruling,
                            &mut draft,
                            None,
                            ReceiptResult::Blocked,
                            refusal,
                            now,
                        );
                    }
                }
                return kernel.request_approval_for(action, &action_hash, &proposal.ruling, proposal.approval_ttl, now);
            }
            kernel.reserve(action, &action_hash, proposal, effect_key, lease, draft, now)
        })
    }

    fn draft(&self, action: &Action, action_hash: &str, ruling: &Ruling, now: Micros) -> Result<ReceiptDraft> {
        Ok(ReceiptDraft {
            receipt_id: new_id(IdKind::Receipt)
                .map_err(|e| Error::Store(format!("no randomness for a receipt id: {e}")))?,
            action_id: action.action_id.clone(),
            action: action.name.clone(),
            action_hash: action_hash.to_owned(),
            agent: action.principal.agent.clone(),
            user: action.principal.user.clone(),
            resource: action.resource.clone(),
            arguments: action.canonical_arguments(),
            environment: action.environment.clone(),
            decision: ruling.decision.as_str().into(),
            decision_reason: ruling.reason.clone(),
            approval_id: None,
            approver: None,
            effect_key: None,
            attempt: 1,
            result: ReceiptResult::Blocked,
            execution: None,
            would_have: None,
            error: None,
            started_at: now,
            finished_at: now,
            policy_hash: self.inner.policy_hash.clone(),
            policy_version: self.inner.policy_version.clone(),
        })
    }

    fn proposed_events(
        tx: &mut WriteTx<'_>,
        action: &Action,
        action_hash: &str,
        ruling: &Ruling,
        now: Micros,
    ) -> Result<()> {
        tx.event(
            EventKind::ACTION_PROPOSED,
            now,
            Some(&action.action_id),
            None,
            None,
            serde_json::json!({
                "action": action.name, "action_hash": action_hash,
                "principal": {"agent": action.principal.agent, "user": action.principal.user},
            }),
        )?;
        tx.event(
            EventKind::POLICY_EVALUATED,
            now,
            Some(&action.action_id),
            None,
            None,
            serde_json::json!({"decision": ruling.decision.as_str(), "reason": ruling.reason, "warnings": ruling.warnings}),
        )?;
        Ok(())
    }

    /// A terminal refusal before any reservation: events, receipt and the refusal, one write.
    #[allow(clippy::too_many_arguments)]
    fn refuse(
        &self,
        action: &Action,
        ruling: &Ruling,
        draft: &mut ReceiptDraft,
        approval_id: Option<&str>,
        result: ReceiptResult,
        refusal: Error,
        now: Micros,
    ) -> Result<Permit> {
        draft.result = result;
        draft.decision_reason = refusal.reason();
        draft.error = Some(refusal.to_string());
        self.inner.store.write(|tx| {
            Self::proposed_events(tx, action, &draft.action_hash, ruling, now)?;
            tx.event(
                EventKind::ACTION_DENIED,
                now,
                Some(&action.action_id),
                draft.effect_key.as_deref(),
                approval_id,
                serde_json::json!({"reason": refusal.reason()}),
            )?;
            tx.append_receipt(draft, None)?;
            Ok(())
        })?;
        Err(refusal)
    }

    fn request_approval_for(
        &self,
        action: &Action,
        action_hash: &str,
        ruling: &Ruling,
        ttl: Option<Micros>,
        now: Micros,
    ) -> Result<Permit> {
        let record = self.new_request(action, action_hash, ttl, now)?;
        self.inner.store.write(|tx| {
            Self::proposed_events(tx, action, action_hash, ruling, now)?;
            tx.put_approval(&record)?;
            tx.event(
                EventKind::APPROVAL_REQUESTED,
                now,
                Some(&action.action_id),
                None,
                Some(&record.approval_id),
                serde_json::json!({"action_hash": action_hash, "expires_at": crate::clock::render(record.expires_at)}),
            )?;
            Ok(())
        })?;
        Err(Error::ApprovalRequired {
            request_id: record.approval_id,
            expires_at: record.expires_at,
            action_hash: action_hash.to_owned(),
        })
    }

    pub(super) fn new_request(
        &self,
        action: &Action,
        action_hash: &str,
        ttl: Option<Micros>,
        now: Micros,
    ) -> Result<ApprovalRecord> {
        let ttl = ttl.unwrap_or(DEFAULT_APPROVAL_TTL);
        if ttl <= 0 {
            return Err(Error::InvalidInput("an approval TTL must be positive".into()));
        }
        Ok(ApprovalRecord {
            approval_id: new_id(IdKind::Approval).map_err(|e| Error::Store(format!("no randomness for an id: {e}")))?,
            action_hash: action_hash.to_owned(),
            action_name: action.name.clone(),
            action_id: action.action_id.clone(),
            requested_by: action.principal.clone(),
            status: ApprovalStatus::Pending,
            requested_at: now,
            expires_at: now.saturating_add(ttl),
            approver: None,
            answered_at: None,
            consumed_at: None,
            consumed_by: None,
            note: None,
        })
    }

    /// The one write transaction of a grant: approval check first, then the effect check, then
    /// approval consume + reservation + events together. A refused reservation leaves the
    /// approval granted, because the approval is only written when the reservation is.
    #[allow(clippy::too_many_arguments)]
    fn reserve(
        &self,
        action: &Action,
        action_hash: &str,
        proposal: &Proposal<'_>,
        effect_key: Option<String>,
        lease: Micros,
        mut draft: ReceiptDraft,
        now: Micros,
    ) -> Result<Permit> {
        let ruling = &proposal.ruling;
        let request = ClaimRequest {
            action,
            action_hash,
            effect_key: effect_key.as_deref(),
            presented: proposal.approval_id,
            // An allow that was handed an approval spends it when it can, and never refuses for it.
            approval_required: ruling.decision == Decision::Approve,
            lease,
            max_attempts: proposal.max_attempts,
            begin: true,
        };
        let claimed = self.inner.store.write(|tx| {
            Self::proposed_events(tx, action, action_hash, ruling, now)?;
            let claimed = claim_in(tx, &request, now)?;
            match &claimed {
                Claimed::Granted { attempt, .. } => {
                    tx.event(
                        EventKind::EXECUTION_STARTED,
                        now,
                        Some(&action.action_id),
                        effect_key.as_deref(),
                        proposal.approval_id,
                        serde_json::json!({"attempt": attempt}),
                    )?;
                }
                Claimed::ApprovalRefused(refusal) => {
                    draft.result = if matches!(refusal, Error::Denied { .. }) {
                        ReceiptResult::Denied
                    } else {
                        ReceiptResult::Blocked
                    };
                    draft.approval_id = proposal.approval_id.map(str::to_owned);
                    draft.decision_reason = refusal.reason();
                    draft.error = Some(refusal.to_string());
                    tx.event(
                        EventKind::ACTION_DENIED,
                        now,
                        Some(&action.action_id),
                        effect_key.as_deref(),
                        proposal.approval_id,
                        serde_json::json!({"reason": refusal.reason()}),
                    )?;
                    tx.append_receipt(&draft, None)?;
                }
                Claimed::EffectRefused(refusal) => {
                    draft.result = ReceiptResult::Blocked;
                    draft.decision_reason = refusal.reason();
                    draft.error = Some(refusal.to_string());
                    tx.append_receipt(&draft, None)?;
                }
            }
            Ok(claimed)
        })?;
        let (attempt, lease_expires_at, consumed) = match claimed {
            Claimed::Granted { attempt, lease_expires_at, consumed, .. } => (attempt, lease_expires_at, consumed),
            Claimed::ApprovalRefused(refusal) | Claimed::EffectRefused(refusal) => return Err(refusal),
        };
        let idempotency_token = match &effect_key {
            Some(key) => Some(effect::idempotency_token(key, attempt).map_err(Error::InvalidInput)?),
            None => None,
        };
        Ok(Permit {
            kernel: self.clone(),
            action: action.clone(),
            action_hash: action_hash.to_owned(),
            ruling: ruling.clone(),
            effect_key,
            attempt,
            lease_expires_at,
            idempotency_token,
            approval_id: consumed.as_ref().map(|a| a.approval_id.clone()),
            approver: consumed.and_then(|a| a.approver),
            started_at: now,
            holds_key: true,
            would_have: None,
            finished: false,
        })
    }

    /// Observe mode: every check runs and is recorded, nothing is refused, the action runs.
    /// The reservation is still taken where it can be (an effect that runs must own its key),
    /// a presented approval is checked but never consumed, and the first check enforce mode
    /// would have refused on becomes `would_have.blocked_reason`.
    fn observe(
        &self,
        action: &Action,
        action_hash: &str,
        proposal: &Proposal<'_>,
        lease: Micros,
        now: Micros,
    ) -> Result<Permit> {
        let ruling = &proposal.ruling;
        let mut blocked: Option<String> = None;
        let effect_key = match proposal.effect {
            None => None,
            Some(template) => match template.render_effect_key(&action.arguments, action.resource.as_deref()) {
                Ok(key) => Some(key),
                Err(_) => {
                    blocked = Some("effect_key_error".into());
                    None
                }
            },
        };
        if ruling.decision == Decision::Approve && proposal.approval_id.is_none() {
            blocked.get_or_insert_with(|| "approval_required".into());
        }
        let (attempt, lease_expires_at, holds_key, blocked) = self.inner.store.write(|tx| {
            Self::proposed_events(tx, action, action_hash, ruling, now)?;
            if let Some(id) = proposal.approval_id {
                let refusal = presented_approval(tx, &action.action_id, id, action_hash, now, true)?.err();
                if let Some(refusal) = refusal {
                    if ruling.decision == Decision::Approve {
                        blocked.get_or_insert_with(|| refusal.reason());
                    }
                    tx.event(
                        EventKind::APPROVAL_INVALIDATED,
                        now,
                        Some(&action.action_id),
                        effect_key.as_deref(),
                        Some(id),
                        serde_json::json!({"reason": refusal.reason()}),
                    )?;
                }
            }
            let request = ClaimRequest {
                action,
                action_hash,
                effect_key: effect_key.as_deref(),
                presented: None,
                approval_required: false,
                lease,
                max_attempts: proposal.max_attempts,
                begin: true,
            };
            let (attempt, lease_expires_at, holds) = match claim_in(tx, &request, now)? {
                Claimed::Granted { attempt, lease_expires_at, record, .. } => {
                    (attempt, lease_expires_at, record.is_some())
                }
                Claimed::ApprovalRefused(refusal) | Claimed::EffectRefused(refusal) => {
                    blocked.get_or_insert_with(|| refusal.reason());
                    (1, None, false)
                }
            };
            tx.event(
                EventKind::EXECUTION_STARTED,
                now,
                Some(&action.action_id),
                effect_key.as_deref(),
                proposal.approval_id,
                serde_json::json!({"attempt": attempt, "observed": true}),
            )?;
            Ok((attempt, lease_expires_at, holds, blocked))
        })?;
        let idempotency_token = match &effect_key {
            Some(key) => Some(effect::idempotency_token(key, attempt).map_err(Error::InvalidInput)?),
            None => None,
        };
        Ok(Permit {
            kernel: self.clone(),
            action: action.clone(),
            action_hash: action_hash.to_owned(),
            ruling: ruling.clone(),
            effect_key,
            attempt,
            lease_expires_at,
            idempotency_token,
            approval_id: None,
            approver: None,
            started_at: now,
            holds_key,
            would_have: Some(serde_json::json!({
                "decision": ruling.decision.as_str(),
                "reason": ruling.reason,
                "blocked_reason": blocked,
            })),
            finished: false,
        })
    }

    /// Record an outcome for a permit: state, event and receipt in one write. A record that
    /// moved on is left alone, and the late outcome is kept as ambiguous evidence.
    pub(super) fn finish(&self, permit: &Permit, outcome: Outcome) -> Result<()> {
        self.guarded(|kernel, now| {
            let mut draft = kernel.draft(&permit.action, &permit.action_hash, &permit.ruling, permit.started_at)?;
            draft.finished_at = now;
            draft.effect_key = permit.effect_key.clone();
            draft.attempt = permit.attempt;
            draft.approval_id = permit.approval_id.clone();
            draft.approver = permit.approver.clone();
            let action_id = permit.action.action_id.clone();
            let executor_result = match &outcome {
                Outcome::Committed(result) => Some(result.clone()),
                _ => None,
            };
            let (kind, result, error) = match &outcome {
                Outcome::Committed(_) => (EventKind::EXECUTION_COMMITTED, ReceiptResult::Committed, None),
                Outcome::NotExecuted(error) => (EventKind::EXECUTION_FAILED, ReceiptResult::Failed, Some(error.clone())),
                Outcome::Ambiguous(error) => (EventKind::EXECUTION_AMBIGUOUS, ReceiptResult::Ambiguous, Some(error.clone())),
            };
            kernel.inner.store.write(|tx| {
                let held = if permit.holds_key { permit.effect_key.as_ref() } else { None };
                let late = match held {
                    None => None,
                    Some(key) => match effect::plan_outcome(tx.effect(key)?.as_ref(), key, &action_id, permit.attempt, &outcome, now) {
                        Ok(OutcomePlan::Write(record)) => {
                            tx.put_effect(&record)?;
                            None
                        }
                        Ok(OutcomePlan::Unchanged(_)) => None,
                        Err(Error::Ambiguous { .. } | Error::Duplicate { .. } | Error::LateOutcome { .. } | Error::NotFound(_)) => {
                            let record = tx.effect(key)?;
                            Some(Error::LateOutcome {
                                effect_key: key.clone(),
                                state: record.as_ref().map(|r| r.state).unwrap_or(EffectState::Ambiguous),
                                holder: record.map(|r| r.action_id).unwrap_or_default(),
                            })
                        }
                        Err(other) => return Err(other),
                    },
                };
                let data = match (&late, &error) {
                    (Some(refusal), _) => serde_json::json!({"attempt": permit.attempt, "late_outcome": result.as_str(), "error": refusal.to_string()}),
                    (None, Some(error)) => serde_json::json!({"attempt": permit.attempt, "error": error}),
                    (None, None) => serde_json::json!({"attempt": permit.attempt}),
                };
                let kind = if late.is_some() { EventKind::EXECUTION_AMBIGUOUS } else { kind };
                tx.event(kind, now, Some(&action_id), permit.effect_key.as_deref(), None, data)?;
                match &late {
                    Some(refusal) => {
                        draft.result = ReceiptResult::Ambiguous;
                        draft.error = Some(format!("late {} outcome refused: {refusal}", result.as_str()));
                    }
                    None => {
                        draft.result = result;
                        draft.error = error.clone();
                    }
                }
                if let Some(would_have) = &permit.would_have {
                    draft.execution = Some(draft.result);
                    draft.result = ReceiptResult::Observed;
                    draft.would_have = Some(would_have.clone());
                }
                tx.append_receipt(&draft, executor_result.clone())?;
                Ok(late)
            })
            .and_then(|late| match late {
                Some(refusal) => Err(refusal),
                None => Ok(()),
            })
        })
    }
}
