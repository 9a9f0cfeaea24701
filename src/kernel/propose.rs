//! The pipeline's steps for one proposal: refusals, the approval gate, the permit transaction
//! and observe mode. `Kernel::propose` does the pure work (hash, effect key, ids) and picks one
//! operation; the `apply_*` functions are that operation inside the store's transaction.

use std::sync::Arc;

use crate::action::{new_id, Action, IdKind};
use crate::approval::scope::{self, Candidate, GrantState};
use crate::approval::{ApprovalAsk, ApprovalStatus, DEFAULT_APPROVAL_TTL};
use crate::clock::Micros;
use crate::decision::{Decision, Ruling};
use crate::effect::{self, Claim, ReservationPlan, DEFAULT_LEASE};
use crate::error::{DenialReason, Error, InvalidInputKind, Result, StoreFaultKind};
use crate::event::EventKind;
use crate::receipt::{ReceiptDraft, ReceiptResult};
use crate::store::WriteTx;

use super::claim::{claim_in, presented_approval, ClaimRequest, Claimed};
use super::ops::{unexpected, Granted, Proposed, Write, WriteReply};
use super::{Kernel, Permit, Proposal};

impl Kernel {
    /// Record an action its host refused before any decision (a gateway's check before
    /// forwarding): `ACTION_DENIED` and a denied receipt are written exactly as for a policy
    /// denial, with `reason`, and nothing is ever granted (the ruling is `deny`, which is why this
    /// is public while `propose`, which trusts its ruling, is not). Returns the refusal; any
    /// other error (the store) is returned as `Err`.
    /// `traceparent` is the call's W3C trace context, recorded on the receipt (refused as
    /// invalid input when it is not one); `trace`, a recorder its caller began
    /// (`Warden::record_denial` begins and ends it), gets the decision and the refusal with its
    /// receipt, as a refused proposal's does.
    pub fn record_denial(
        &self,
        action: &Action,
        reason: &str,
        traceparent: Option<&str>,
        trace: Option<&Arc<crate::telemetry::ActionTrace>>,
    ) -> Result<Error> {
        let mut proposal = Proposal::new(action, Ruling::new(Decision::Deny, reason));
        proposal.traceparent = traceparent;
        proposal.trace = trace;
        match self.propose(&proposal) {
            Err(error) if error.is_refusal() => Ok(error),
            Err(error) => Err(error),
            Ok(permit) => {
                // A deny ruling never grants; were it to, nothing may run under this permit.
                let _ = permit.not_executed("refused by the host before any decision");
                Err(Error::store(StoreFaultKind::Defect, "a deny ruling was granted a permit; nothing was executed"))
            }
        }
    }

    /// normalize → (the pipeline's decision) → approval gate → one write transaction → permit.
    /// Crate-private: it trusts the ruling its caller hands in, so `Warden::submit`, which
    /// decides with the administrator's document, is the only way in (tests reach it through
    /// `crate::test_support` in a `test-exports` build).
    pub(crate) fn propose(&self, proposal: &Proposal<'_>) -> Result<Permit> {
        let action = proposal.action;
        let action_hash = action.hash()?;
        let lease = proposal.lease.unwrap_or(DEFAULT_LEASE);
        if lease <= 0 {
            return Err(Error::invalid_at(InvalidInputKind::OutOfRange, "lease", "a lease must be positive"));
        }
        if proposal.traceparent.is_some_and(|trace| !crate::receipt::is_traceparent(trace)) {
            return Err(Error::invalid_at(
                InvalidInputKind::Malformed,
                "traceparent",
                "a traceparent is a W3C trace context such as 00-<32 hex>-<16 hex>-<2 hex>, lowercase, neither id \
                 all zeros; pass none when the caller sent none or an invalid one",
            ));
        }
        if let Some(id) = proposal.approval_id {
            if !crate::action::is_id(IdKind::Approval, id) {
                return Err(Error::invalid_at(
                    InvalidInputKind::Malformed,
                    "approval_id",
                    "an approval id is apr_ followed by 32 lowercase hex digits",
                ));
            }
        }
        // The receipt a refusal writes (the draft's), for the trace.
        let mut refusal_receipt = None;
        let proposed = self.guarded(|kernel, now| {
            let draft = kernel.draft(action, &action_hash, &proposal.ruling)?;
            if let Some(trace) = proposal.trace {
                let policy = (kernel.inner.policy_hash.as_deref(), kernel.inner.policy_version.as_deref());
                trace.decided(
                    now,
                    action,
                    &action_hash,
                    &proposal.ruling,
                    policy,
                    proposal.observe,
                    proposal.approval_id,
                );
                refusal_receipt = Some(draft.receipt_id.clone());
            }
            let mut proposed = Proposed {
                action: action.clone(),
                action_hash: action_hash.clone(),
                ruling: proposal.ruling.clone(),
                draft,
                effect_key: None,
                lease,
                max_attempts: proposal.max_attempts,
                authority: proposal.authority.clone(),
                charges: Vec::new(),
                precondition: proposal.precondition.clone(),
            };
            proposed.draft.authority = proposal.authority.as_ref().map(|stamp| stamp.receipt(&[]));
            proposed.draft.traceparent = proposal.traceparent.map(str::to_owned);
            let refuse = |mut proposed: Proposed, refusal: Error| {
                proposed.draft.decision = Decision::Deny.as_str().into();
                kernel.finish_refusal(Write::Refuse { proposed, refusal }, proposal.trace)
            };
            if action.environment != kernel.inner.environment {
                let refusal = Error::Denied {
                    reason: DenialReason::EnvironmentMismatch,
                    detail: format!(
                        "the action is for {:?} and this kernel acts in {:?}",
                        action.environment, kernel.inner.environment
                    ),
                };
                return refuse(proposed, refusal);
            }
            let effect_key = match proposal.effect {
                None => None,
                Some(template) => match template.render_effect_key(&action.arguments, action.resource.as_deref()) {
                    Ok(key) => Some(key),
                    Err(error) if !proposal.observe && proposal.ruling.decision != Decision::Deny => {
                        let refusal = Error::Denied { reason: DenialReason::EffectKeyError, detail: error.to_string() };
                        return refuse(proposed, refusal);
                    }
                    Err(_) => None,
                },
            };
            if let Some(trace) = proposal.trace {
                trace.rendered(effect_key.as_deref());
            }
            proposed.draft.effect_key = effect_key.clone();
            proposed.effect_key = effect_key;
            // What the reservation will charge, measured before any human is asked: a budget on
            // a missing argument or on an action with no effect key can never be charged.
            let mut budget_refusal = None;
            if let Some(stamp) = proposed.authority.as_ref().filter(|s| s.passed && !s.budgets.is_empty()) {
                match crate::authority::charges_for(
                    &action.name,
                    &stamp.budgets,
                    &action.arguments,
                    proposed.effect_key.as_deref(),
                ) {
                    Ok(charges) => proposed.charges = charges,
                    Err(refusal) => budget_refusal = Some(stamp.refused(refusal.reason(), None, refusal.to_string())),
                }
            }
            if proposal.observe {
                let unrenderable = proposal.effect.is_some() && proposed.effect_key.is_none();
                let blocked = if unrenderable {
                    Some(DenialReason::EffectKeyError.to_string())
                } else {
                    budget_refusal.map(|refusal| refusal.reason())
                };
                let op = Write::Observe { proposed, presented: proposal.approval_id.map(str::to_owned) };
                return kernel.permit_from(op, proposal, &action_hash, blocked);
            }
            if proposal.ruling.decision == Decision::Deny {
                proposed.draft.effect_key = None;
                let refusal = match proposed.authority.as_ref().filter(|stamp| !stamp.passed) {
                    Some(stamp) => stamp.refusal(&action.name),
                    None => Error::Denied {
                        reason: DenialReason::parse(&proposal.ruling.reason),
                        detail: format!("the policy denies {}", action.name),
                    },
                };
                return kernel.finish_refusal(Write::Refuse { proposed, refusal }, proposal.trace);
            }
            if let Some(refusal) = budget_refusal {
                return refuse(proposed, refusal);
            }
            if proposal.ruling.decision == Decision::Approve && proposal.approval_id.is_none() {
                let ttl = proposal.approval_ttl.unwrap_or(DEFAULT_APPROVAL_TTL);
                if ttl <= 0 {
                    return Err(Error::invalid_at(
                        InvalidInputKind::OutOfRange,
                        "ttl",
                        "an approval TTL must be positive",
                    ));
                }
                let approval_id = new_id(IdKind::Approval)
                    .map_err(|e| Error::store(StoreFaultKind::Io, format!("no randomness for an id: {e}")))?;
                let ask = proposal.ask.clone();
                // A scoped grant may cover it (a permit), else a human is asked.
                return kernel.permit_from(
                    Write::Gate { proposed, approval_id, ttl, ask },
                    proposal,
                    &action_hash,
                    None,
                );
            }
            let op = Write::Reserve {
                proposed,
                presented: proposal.approval_id.map(str::to_owned),
                // An allow that was handed an approval spends it when it can, and never refuses for it.
                approval_required: proposal.ruling.decision == Decision::Approve,
            };
            kernel.permit_from(op, proposal, &action_hash, None)
        });
        if let (Some(trace), Err(refusal)) = (proposal.trace, &proposed) {
            self.trace_refusal(trace, refusal, refusal_receipt.as_deref());
        }
        proposed
    }

    /// Record a refused proposal in its trace, with the receipt the refusal wrote: every refusal
    /// of a proposal writes its draft's receipt except ApprovalRequired, which writes none (a
    /// fault writes nothing). The receipt's seq and hash are read back when it was written.
    fn trace_refusal(&self, trace: &crate::telemetry::ActionTrace, refusal: &Error, draft_receipt: Option<&str>) {
        if !refusal.is_refusal() {
            return;
        }
        let receipt = draft_receipt.filter(|_| !matches!(refusal, Error::ApprovalRequired { .. }));
        trace.refused(refusal, receipt);
        if let Some(receipt) = receipt {
            self.trace_receipt(trace, receipt);
        }
    }

    /// Read the seq and hash of receipt `receipt_id` into `trace`; a receipt not found (or a
    /// read that failed) leaves the span naming it by id alone.
    pub(super) fn trace_receipt(&self, trace: &crate::telemetry::ActionTrace, receipt_id: &str) {
        let Ok(Some(seq)) = self.receipt_seq(receipt_id) else { return };
        let hash = self.receipts(seq, 1).ok().and_then(|rows| rows.into_iter().next()).and_then(|(_, r)| r.hash);
        trace.receipt(seq, hash);
    }

    /// `write`, timed into `trace` as one of the action's durable writes.
    fn write_traced(&self, op: Write, trace: Option<&Arc<crate::telemetry::ActionTrace>>) -> Result<WriteReply> {
        let Some(trace) = trace else { return self.write(op) };
        let began = std::time::Instant::now();
        let written = self.write_counted(op);
        trace.wrote("proposal", began.elapsed(), written.as_ref().map_or(0, |(_, together)| *together));
        written.map(|(reply, _)| reply)
    }

    /// Apply an operation that can only refuse (or ask for an approval). A new request is
    /// told to the approval listener before ApprovalRequired is reported.
    fn finish_refusal(&self, op: Write, trace: Option<&Arc<crate::telemetry::ActionTrace>>) -> Result<Permit> {
        match self.write_traced(op, trace)? {
            WriteReply::Refused(refusal) => Err(refusal),
            WriteReply::Requested(record) => {
                self.approval_requested(&record);
                Err(Error::ApprovalRequired {
                    request_id: record.approval_id,
                    expires_at: record.expires_at,
                    action_hash: record.action_hash,
                })
            }
            _ => Err(unexpected("refusal")),
        }
    }

    /// Apply a permit operation and build the permit from what its transaction decided. A
    /// permit whose commit was confirmed only after its lease lapsed is not handed out.
    fn permit_from(
        &self,
        op: Write,
        proposal: &Proposal<'_>,
        action_hash: &str,
        blocked_before: Option<String>,
    ) -> Result<Permit> {
        let (effect_key, stamp, charges) = match &op {
            Write::Reserve { proposed, .. } | Write::Observe { proposed, .. } | Write::Gate { proposed, .. } => {
                (proposed.effect_key.clone(), proposed.authority.clone(), proposed.charges.clone())
            }
            _ => (None, None, Vec::new()),
        };
        let observe = matches!(op, Write::Observe { .. });
        let (granted, lapsed) = match self.write_traced(op, proposal.trace)? {
            WriteReply::Granted(granted) => (granted, false),
            WriteReply::Lapsed(granted) => (granted, true),
            WriteReply::Refused(refusal) => return Err(refusal),
            WriteReply::Requested(record) => {
                self.approval_requested(&record);
                return Err(Error::ApprovalRequired {
                    request_id: record.approval_id,
                    expires_at: record.expires_at,
                    action_hash: record.action_hash,
                });
            }
            _ => return Err(unexpected("permit")),
        };
        let idempotency_token = match &effect_key {
            Some(key) => Some(effect::idempotency_token(key, granted.attempt).map_err(Error::InvalidInput)?),
            None => None,
        };
        let ruling = &proposal.ruling;
        let would_have = observe.then(|| {
            let mut blocked = granted.blocked.clone();
            if blocked_before.is_some() {
                blocked = blocked_before.clone();
            }
            serde_json::json!({
                "decision": ruling.decision.as_str(),
                "reason": ruling.reason,
                "blocked_reason": blocked,
            })
        });
        let decided_in = granted.decided_in;
        let mut permit = Permit {
            kernel: self.clone(),
            action: proposal.action.clone(),
            action_hash: action_hash.to_owned(),
            ruling: ruling.clone(),
            effect_key,
            attempt: granted.attempt,
            lease_expires_at: granted.lease_expires_at,
            idempotency_token,
            approval_id: granted.approval_id,
            approver: granted.approver,
            scoped_grant_id: granted.scoped_grant_id,
            started_at: granted.started_at,
            holds_key: granted.holds_key,
            would_have,
            authority: stamp.map(|stamp| stamp.receipt(if granted.charged { &charges } else { &[] })),
            traceparent: proposal.traceparent.map(str::to_owned),
            result_sha256: None,
            receipt_id: new_id(IdKind::Receipt)
                .map_err(|e| Error::store(StoreFaultKind::Io, format!("no randomness for a receipt id: {e}")))?,
            policy_hash: self.inner.policy_hash.clone(),
            policy_version: self.inner.policy_version.clone(),
            trace: None,
            finished: false,
        };
        if lapsed {
            // Never handed out, so it provably never ran: FAILED (a compare-and-set on this
            // action and attempt), and the caller may propose again.
            permit.not_executed(super::ops::LAPSED_BEFORE_HANDED_OUT)?;
            return Err(Error::Unavailable(format!(
                "{}; the attempt was recorded FAILED and nothing ran. Propose again",
                super::ops::LAPSED_BEFORE_HANDED_OUT
            )));
        }
        if let Some(trace) = proposal.trace {
            // Only a permit handed out carries the trace: its outcome ends the span.
            trace.permitted(
                &permit.action.action_id,
                permit.effect_key.as_deref(),
                permit.holds_key,
                permit.attempt,
                permit.approval_id.as_deref(),
                decided_in,
                &permit.receipt_id,
            );
            permit.trace = Some(Arc::clone(trace));
        }
        Ok(permit)
    }

    /// A receipt draft for `action`; its times are set when its transaction runs.
    pub(super) fn draft(&self, action: &Action, action_hash: &str, ruling: &Ruling) -> Result<ReceiptDraft> {
        let receipt_id = new_id(IdKind::Receipt)
            .map_err(|e| Error::store(StoreFaultKind::Io, format!("no randomness for a receipt id: {e}")))?;
        let mut draft = draft_for(receipt_id, action, action_hash, ruling);
        draft.policy_hash = self.inner.policy_hash.clone();
        draft.policy_version = self.inner.policy_version.clone();
        Ok(draft)
    }
}

/// The receipt draft of `action` as `ruling` decided it: blocked, with no times, no policy and
/// nothing the reservation adds (effect key, approval, authority), until the caller sets them.
pub(super) fn draft_for(receipt_id: String, action: &Action, action_hash: &str, ruling: &Ruling) -> ReceiptDraft {
    ReceiptDraft {
        receipt_id,
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
        started_at: 0,
        finished_at: 0,
        policy_hash: None,
        policy_version: None,
        authority: None,
        traceparent: None,
        result_sha256: None,
        scoped_grant_id: None,
    }
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

/// A terminal refusal before any reservation: events and receipt, one write.
pub(super) fn apply_refuse(
    tx: &mut WriteTx<'_>,
    proposed: &Proposed,
    approval_id: Option<&str>,
    refusal: Error,
    now: Micros,
) -> Result<WriteReply> {
    let mut draft = proposed.draft.clone();
    draft.started_at = now;
    draft.finished_at = now;
    draft.result = ReceiptResult::Denied;
    draft.decision_reason = refusal.reason();
    draft.error = Some(refusal.to_string());
    proposed_events(tx, &proposed.action, &proposed.action_hash, &proposed.ruling, now)?;
    if matches!(refusal, Error::AuthorityDenied { .. }) {
        // The stricter axis decides: whatever the policy said, the action is denied.
        draft.decision = Decision::Deny.as_str().into();
        tx.event(
            EventKind::AUTHORITY_DENIED,
            now,
            Some(&proposed.action.action_id),
            draft.effect_key.as_deref(),
            approval_id,
            super::authority::denial_evidence(proposed.authority.as_ref(), &refusal),
        )?;
    }
    tx.event(
        EventKind::ACTION_DENIED,
        now,
        Some(&proposed.action.action_id),
        draft.effect_key.as_deref(),
        approval_id,
        serde_json::json!({"reason": refusal.reason()}),
    )?;
    tx.append_receipt(&draft, None)?;
    Ok(WriteReply::Refused(refusal))
}

/// The gate's first step: when a live scoped grant covers the proposal (no precondition, same
/// action, rule, policy hash, requester and shape), the proposal is reserved as `apply_reserve`
/// would an approved one, and only when that grants is one use spent, with its event, in this
/// same transaction. `None`: no grant covers it (a human is asked).
pub(super) fn covered(
    tx: &mut WriteTx<'_>,
    proposed: &Proposed,
    ask: &ApprovalAsk,
    now: Micros,
) -> Result<Option<WriteReply>> {
    if proposed.precondition.is_some() {
        return Ok(None);
    }
    let action = &proposed.action;
    let candidate = Candidate {
        action_name: &action.name,
        rule: &proposed.ruling.reason,
        policy_hash: proposed.draft.policy_hash.as_deref(),
        principal: &action.principal,
        identity: ask.identity.as_ref(),
        arguments: &action.arguments,
    };
    let mut found = None;
    for grant in tx.scoped_grants_for(&action.name)? {
        if grant.state(now) != GrantState::Live {
            // Expired (used-up and revoked ones left the index when they ended): it leaves the
            // index now, so a proposal reads only the grants that may still cover something.
            tx.put_scoped_grant(&grant, false)?;
        } else if found.is_none() && scope::applies(&grant, &candidate, now) {
            found = Some(grant);
        }
    }
    let Some(mut grant) = found else { return Ok(None) };
    let reply = apply_reserve(tx, proposed, None, false, now)?;
    let WriteReply::Granted(mut granted) = reply else { return Ok(Some(reply)) };
    grant.uses_left -= 1;
    tx.put_scoped_grant(&grant, grant.uses_left > 0)?;
    tx.event(
        EventKind::SCOPED_GRANT_USED,
        now,
        Some(&action.action_id),
        proposed.effect_key.as_deref(),
        Some(&grant.approval_id),
        serde_json::json!({"grant_id": grant.grant_id, "uses_left": grant.uses_left}),
    )?;
    granted.scoped_grant_id = Some(grant.grant_id.clone());
    granted.approver = Some(grant.approver);
    Ok(Some(WriteReply::Granted(granted)))
}

/// The approval gate: a live scoped grant that covers the proposal is spent and the proposal
/// proceeds as approved (`covered`); otherwise the effect check comes first (no human is asked to approve an attempt
/// that could never run: committed, ambiguous, held by a live lease, or at its ceiling), then
/// a pending request bound to the action hash.
pub(super) fn apply_gate(
    tx: &mut WriteTx<'_>,
    proposed: &Proposed,
    approval_id: &str,
    ttl: Micros,
    ask: &ApprovalAsk,
    now: Micros,
) -> Result<WriteReply> {
    if let Some(reply) = covered(tx, proposed, ask, now)? {
        return Ok(reply);
    }
    let action = &proposed.action;
    if let Some(refusal) = super::authority::recheck_revocations(tx, proposed.authority.as_ref())? {
        return apply_refuse(tx, proposed, None, refusal, now);
    }
    if let Some(key) = &proposed.effect_key {
        let claim = Claim {
            effect_key: key,
            action_id: &action.action_id,
            action_name: &action.name,
            action_hash: &proposed.action_hash,
            approval_id: None,
            lease: proposed.lease,
            max_attempts: proposed.max_attempts,
        };
        // A key with no row is new only once its absence is proven (`absence`).
        let current = super::absence::effect_to_reserve(tx, key)?;
        let plan = effect::plan_reservation(current.as_ref(), &claim, now).map_err(Error::InvalidInput)?;
        if let ReservationPlan::Refuse(refusal) = plan {
            let mut draft = proposed.draft.clone();
            draft.started_at = now;
            draft.finished_at = now;
            draft.result = ReceiptResult::Blocked;
            draft.decision_reason = refusal.reason();
            draft.error = Some(refusal.to_string());
            proposed_events(tx, action, &proposed.action_hash, &proposed.ruling, now)?;
            tx.event(
                EventKind::ACTION_DENIED,
                now,
                Some(&action.action_id),
                Some(key),
                None,
                serde_json::json!({"reason": refusal.reason()}),
            )?;
            tx.append_receipt(&draft, None)?;
            return Ok(WriteReply::Refused(refusal));
        }
    }
    proposed_events(tx, action, &proposed.action_hash, &proposed.ruling, now)?;
    if let Some(reply) = earlier_request(tx, proposed, now)? {
        return Ok(reply);
    }
    let policy = (proposed.draft.policy_hash.clone(), proposed.draft.policy_version.clone());
    let record = super::approvals::new_request(
        action,
        &proposed.action_hash,
        approval_id,
        ttl,
        ask,
        &proposed.ruling.reason,
        policy,
        proposed.precondition.clone(),
        now,
    )?;
    super::approvals::write_request(tx, &record, now)?;
    Ok(WriteReply::Requested(record))
}

/// The latest request for this exact action, when it decides the gate: still pending (and
/// unexpired) → that request is reported, and nobody is asked twice; denied and unexpired →
/// the action is refused as denied until the request expires. A lapsed pending request is
/// marked expired and a new one made.
fn earlier_request(tx: &mut WriteTx<'_>, proposed: &Proposed, now: Micros) -> Result<Option<WriteReply>> {
    let Some(earlier) = tx.latest_approval_for(&proposed.action_hash)? else { return Ok(None) };
    let live = now <= earlier.expires_at;
    match earlier.status {
        ApprovalStatus::Pending if live => Ok(Some(WriteReply::Refused(Error::ApprovalRequired {
            request_id: earlier.approval_id,
            expires_at: earlier.expires_at,
            action_hash: earlier.action_hash,
        }))),
        ApprovalStatus::Pending => {
            let action_id = proposed.action.action_id.clone();
            super::claim::mark_approval_expired(tx, earlier, &action_id, now)?;
            Ok(None)
        }
        ApprovalStatus::Denied if live => {
            let refusal = Error::Denied {
                reason: DenialReason::ApprovalDenied,
                detail: format!(
                    "approval {} for this exact action was denied by {}; it is not asked again until {}",
                    earlier.approval_id,
                    earlier.approver.as_deref().unwrap_or("an approver"),
                    crate::clock::render(earlier.expires_at)
                ),
            };
            let mut draft = proposed.draft.clone();
            draft.started_at = now;
            draft.finished_at = now;
            draft.result = ReceiptResult::Denied;
            draft.approval_id = Some(earlier.approval_id.clone());
            draft.decision_reason = refusal.reason();
            draft.error = Some(refusal.to_string());
            tx.event(
                EventKind::ACTION_DENIED,
                now,
                Some(&proposed.action.action_id),
                proposed.effect_key.as_deref(),
                Some(&earlier.approval_id),
                serde_json::json!({"reason": refusal.reason()}),
            )?;
            tx.append_receipt(&draft, None)?;
            Ok(Some(WriteReply::Refused(refusal)))
        }
        _ => Ok(None),
    }
}

/// The one write transaction of a grant: approval check first, then the effect check, then
/// approval consume + reservation + events together. A refused reservation leaves the
/// approval granted, because the approval is only written when the reservation is.
pub(super) fn apply_reserve(
    tx: &mut WriteTx<'_>,
    proposed: &Proposed,
    presented: Option<&str>,
    approval_required: bool,
    now: Micros,
) -> Result<WriteReply> {
    let action = &proposed.action;
    // Evaluation ran before this transaction: the deciding chain is read again here, and the
    // budgets up it are checked against what is charged now, in-flight actions included.
    if let Some(refusal) = super::authority::recheck(tx, proposed.authority.as_ref(), &proposed.charges, now)? {
        return apply_refuse(tx, proposed, presented, refusal, now);
    }
    let request = ClaimRequest {
        action,
        action_hash: &proposed.action_hash,
        effect_key: proposed.effect_key.as_deref(),
        presented,
        approval_required,
        lease: proposed.lease,
        max_attempts: proposed.max_attempts,
        begin: true,
        precondition: proposed.precondition.as_deref(),
    };
    proposed_events(tx, action, &proposed.action_hash, &proposed.ruling, now)?;
    let claimed = claim_in(tx, &request, now)?;
    let mut draft = proposed.draft.clone();
    draft.started_at = now;
    draft.finished_at = now;
    match claimed {
        Claimed::Granted { attempt, lease_expires_at, consumed, record } => {
            let charged = charge(tx, proposed, record.as_ref(), now)?;
            let decided_in = consumed.as_ref().and_then(|a| a.answered_at.map(|at| at - a.requested_at));
            tx.event(
                EventKind::EXECUTION_STARTED,
                now,
                Some(&action.action_id),
                proposed.effect_key.as_deref(),
                presented,
                serde_json::json!({"attempt": attempt}),
            )?;
            Ok(WriteReply::Granted(Granted {
                attempt,
                lease_expires_at,
                approval_id: consumed.as_ref().map(|a| a.approval_id.clone()),
                approver: consumed.and_then(|a| a.approver),
                started_at: now,
                holds_key: true,
                blocked: None,
                charged,
                decided_in,
                scoped_grant_id: None,
            }))
        }
        Claimed::ApprovalRefused(refusal) => {
            draft.result =
                if matches!(refusal, Error::Denied { .. }) { ReceiptResult::Denied } else { ReceiptResult::Blocked };
            draft.approval_id = presented.map(str::to_owned);
            draft.decision_reason = refusal.reason();
            draft.error = Some(refusal.to_string());
            tx.event(
                EventKind::ACTION_DENIED,
                now,
                Some(&action.action_id),
                proposed.effect_key.as_deref(),
                presented,
                serde_json::json!({"reason": refusal.reason()}),
            )?;
            tx.append_receipt(&draft, None)?;
            Ok(WriteReply::Refused(refusal))
        }
        Claimed::EffectRefused(refusal) => {
            draft.result = ReceiptResult::Blocked;
            draft.decision_reason = refusal.reason();
            draft.error = Some(refusal.to_string());
            tx.append_receipt(&draft, None)?;
            Ok(WriteReply::Refused(refusal))
        }
    }
}

/// Observe mode: every check runs and is recorded, nothing is refused, the action runs. The
/// reservation is still taken where it can be (an effect that runs must own its key), a
/// presented approval is checked but never consumed, and the first check enforce mode would
/// have refused on becomes `blocked`.
pub(super) fn apply_observe(
    tx: &mut WriteTx<'_>,
    proposed: &Proposed,
    presented: Option<&str>,
    now: Micros,
) -> Result<WriteReply> {
    let action = &proposed.action;
    let ruling = &proposed.ruling;
    let mut blocked: Option<String> = None;
    if ruling.decision == Decision::Approve && presented.is_none() {
        blocked = Some("approval_required".into());
    }
    let authority_refusal = super::authority::recheck(tx, proposed.authority.as_ref(), &proposed.charges, now)?;
    proposed_events(tx, action, &proposed.action_hash, ruling, now)?;
    if let Some(refusal) = &authority_refusal {
        blocked.get_or_insert_with(|| refusal.reason());
    }
    if let Some(id) = presented {
        let refusal = presented_approval(
            tx,
            &action.action_id,
            id,
            &proposed.action_hash,
            proposed.precondition.as_deref(),
            now,
            true,
        )?
        .err();
        if let Some(refusal) = refusal {
            if ruling.decision == Decision::Approve {
                blocked.get_or_insert_with(|| refusal.reason());
            }
            tx.event(
                EventKind::APPROVAL_INVALIDATED,
                now,
                Some(&action.action_id),
                proposed.effect_key.as_deref(),
                Some(id),
                serde_json::json!({"reason": refusal.reason()}),
            )?;
        }
    }
    let request = ClaimRequest {
        action,
        action_hash: &proposed.action_hash,
        effect_key: proposed.effect_key.as_deref(),
        presented: None,
        approval_required: false,
        lease: proposed.lease,
        max_attempts: proposed.max_attempts,
        begin: true,
        precondition: None,
    };
    let (attempt, lease_expires_at, holds_key, charged) = match claim_in(tx, &request, now)? {
        Claimed::Granted { attempt, lease_expires_at, record, .. } => {
            // Enforce mode would not have charged a refused action; it would have charged this one.
            let charged = authority_refusal.is_none() && charge(tx, proposed, record.as_ref(), now)?;
            (attempt, lease_expires_at, record.is_some(), charged)
        }
        Claimed::ApprovalRefused(refusal) | Claimed::EffectRefused(refusal) => {
            blocked.get_or_insert_with(|| refusal.reason());
            (1, None, false, false)
        }
    };
    tx.event(
        EventKind::EXECUTION_STARTED,
        now,
        Some(&action.action_id),
        proposed.effect_key.as_deref(),
        presented,
        serde_json::json!({"attempt": attempt, "observed": true}),
    )?;
    Ok(WriteReply::Granted(Granted {
        attempt,
        lease_expires_at,
        approval_id: None,
        approver: None,
        started_at: now,
        holds_key,
        blocked,
        charged,
        decided_in: None,
        scoped_grant_id: None,
    }))
}

/// Write the reservation's budget charges (one ledger row per grant and metric), keyed by the
/// effect and attempt its FAILED outcome would release. `true` when anything was charged.
fn charge(
    tx: &mut WriteTx<'_>,
    proposed: &Proposed,
    record: Option<&crate::effect::EffectRecord>,
    now: Micros,
) -> Result<bool> {
    match record {
        Some(record) if !proposed.charges.is_empty() => {
            tx.charge_budgets(&proposed.charges, &record.effect_key, record.attempt, now)?;
            Ok(true)
        }
        _ => Ok(false),
    }
}
