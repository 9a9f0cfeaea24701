//! The pipeline that composes the pure modules with the store; the only place that orders
//! steps. In this issue the host (trusted code) passes the decision in; the policy module
//! will produce it.
//!
//! Every state change is one write transaction carrying the state, its events and, for a
//! terminal outcome, its receipt and the new chain head.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::{Arc, Mutex};

use crate::action::{new_id, Action, IdKind, Principal};
use crate::approval::{self, ApprovalRecord, ApprovalStatus, Verdict, DEFAULT_APPROVAL_TTL};
use crate::clock::{Clock, Micros, SystemClock};
use crate::decision::{Decision, Ruling};
use crate::effect::{
    self, Claim, EffectRecord, EffectState, Outcome, OutcomePlan, ReservationPlan, StoredResult, DEFAULT_LEASE,
};
use crate::error::{Error, Result};
use crate::receipt::{ChainReport, ReceiptDraft, ReceiptResult, StoredReceipt};
use crate::store::{Event, EventKind, Store, WriteTx};
use crate::template::Template;

/// How a kernel is opened.
#[derive(Debug, Clone)]
pub struct KernelOptions {
    pub clock: Arc<dyn Clock>,
    /// Recorded on every receipt: the policy in force.
    pub policy_hash: Option<String>,
    pub policy_version: Option<String>,
    /// The one environment this kernel acts in; an action from another is refused. `None`:
    /// `$WARDEN_ENVIRONMENT`, else `production`.
    pub environment: Option<String>,
}

impl Default for KernelOptions {
    fn default() -> Self {
        KernelOptions { clock: Arc::new(SystemClock), policy_hash: None, policy_version: None, environment: None }
    }
}

/// The environment a kernel acts in: the argument, then `$WARDEN_ENVIRONMENT`, then the
/// document's, then `production`.
pub fn resolve_environment(argument: Option<&str>, document: Option<&str>) -> String {
    argument
        .map(str::to_owned)
        .or_else(|| std::env::var("WARDEN_ENVIRONMENT").ok().filter(|e| !e.is_empty()))
        .or_else(|| document.map(str::to_owned))
        .unwrap_or_else(|| "production".to_owned())
}

/// What the host asks the kernel to do with one action.
#[derive(Debug, Clone)]
pub struct Proposal<'a> {
    pub action: &'a Action,
    pub ruling: Ruling,
    /// The effect-key template. `None`: the action has no effect to protect (a read); it runs
    /// with no reservation but still leaves a receipt.
    pub effect: Option<&'a Template>,
    pub max_attempts: Option<u32>,
    /// Lease in microseconds; `None` is the default five minutes.
    pub lease: Option<Micros>,
    /// A granted approval presented for this exact action.
    pub approval_id: Option<&'a str>,
    /// How long a new approval request stays answerable; `None` is fifteen minutes.
    pub approval_ttl: Option<Micros>,
    /// Observe mode: record what enforce mode would have done, and let the action run.
    pub observe: bool,
}

impl<'a> Proposal<'a> {
    pub fn new(action: &'a Action, ruling: Ruling) -> Proposal<'a> {
        Proposal {
            action,
            ruling,
            effect: None,
            max_attempts: None,
            lease: None,
            approval_id: None,
            approval_ttl: None,
            observe: false,
        }
    }
}

struct Inner {
    store: Store,
    clock: Arc<dyn Clock>,
    poisoned: Mutex<Option<String>>,
    policy_hash: Option<String>,
    policy_version: Option<String>,
    environment: String,
}

/// A handle on one store. Cheap to clone; clones share the poisoned latch.
#[derive(Clone)]
pub struct Kernel {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kernel").field("store", &self.inner.store).finish()
    }
}

/// The right to execute one action once, until the lease expires. Report exactly one outcome;
/// a permit dropped without one records AMBIGUOUS.
#[derive(Debug)]
pub struct Permit {
    kernel: Kernel,
    action: Action,
    action_hash: String,
    ruling: Ruling,
    effect_key: Option<String>,
    attempt: u32,
    lease_expires_at: Option<Micros>,
    idempotency_token: Option<String>,
    approval_id: Option<String>,
    approver: Option<String>,
    started_at: Micros,
    /// False when the permit names a key it does not hold (observe mode, refused reservation).
    holds_key: bool,
    /// Observe mode: what enforce mode would have done.
    would_have: Option<serde_json::Value>,
    finished: bool,
}

impl Permit {
    pub fn action(&self) -> &Action {
        &self.action
    }
    pub fn action_hash(&self) -> &str {
        &self.action_hash
    }
    pub fn effect_key(&self) -> Option<&str> {
        self.effect_key.as_deref()
    }
    pub fn attempt(&self) -> u32 {
        self.attempt
    }
    pub fn lease_expires_at(&self) -> Option<Micros> {
        self.lease_expires_at
    }
    /// The provider idempotency token for this (effect key, attempt); `None` without a key.
    pub fn idempotency_token(&self) -> Option<&str> {
        self.idempotency_token.as_deref()
    }
    pub fn approval_id(&self) -> Option<&str> {
        self.approval_id.as_deref()
    }

    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "action_id": self.action.action_id,
            "action": self.action.name,
            "action_hash": self.action_hash,
            "effect_key": self.effect_key,
            "attempt": self.attempt,
            "lease_expires_at": self.lease_expires_at.map(crate::clock::render),
            "idempotency_token": self.idempotency_token,
            "approval_id": self.approval_id,
            "decision": self.ruling.decision.as_str(),
            "decision_reason": self.ruling.reason,
        })
    }

    /// The executor succeeded. `result` is stored as plain JSON outside any hashed content.
    pub fn commit(mut self, result: &serde_json::Value) -> Result<()> {
        self.finished = true;
        let outcome = Outcome::Committed(StoredResult::from_value(result));
        self.kernel.clone().finish(&self, outcome)
    }

    /// The executor proved the remote side did nothing: FAILED, and a retry may renew.
    pub fn not_executed(mut self, error: &str) -> Result<()> {
        self.finished = true;
        self.kernel.clone().finish(&self, Outcome::NotExecuted(error.to_owned()))
    }

    /// The outcome is unknown: AMBIGUOUS until a human resolves it.
    pub fn ambiguous(mut self, error: &str) -> Result<()> {
        self.finished = true;
        self.kernel.clone().finish(&self, Outcome::Ambiguous(error.to_owned()))
    }

    /// Extend this attempt's lease to `until`; only while it is live, and never shorter.
    pub fn extend_lease(&mut self, until: Micros) -> Result<()> {
        let Some(key) = self.effect_key.clone() else {
            return Err(Error::InvalidInput("this action has no effect key, so it holds no lease".into()));
        };
        let action_id = self.action.action_id.clone();
        let attempt = self.attempt;
        let record = self.kernel.guarded(|kernel, now| {
            kernel.inner.store.write(|tx| {
                let planned =
                    effect::plan_lease_extension(tx.effect(&key)?.as_ref(), &key, &action_id, attempt, until, now);
                match planned {
                    Ok(record) => {
                        tx.put_effect(&record)?;
                        tx.event(
                            EventKind::EFFECT_LEASE_EXTENDED,
                            now,
                            Some(&action_id),
                            Some(&key),
                            None,
                            serde_json::json!({"lease_expires_at": crate::clock::render(until)}),
                        )?;
                        Ok(Ok(record))
                    }
                    Err(refusal) => Ok(Err(refusal)),
                }
            })
        })??;
        self.lease_expires_at = record.lease_expires_at;
        Ok(())
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        if !self.finished {
            self.finished = true;
            let outcome = Outcome::Ambiguous(
                "the permit was dropped without an outcome (a panic, a lost reply or a bug in the host)".into(),
            );
            // Nothing to report to: a failure here leaves the record in flight, and its lease
            // lapsing turns it AMBIGUOUS all the same.
            let _ = self.kernel.clone().finish(self, outcome);
        }
    }
}

impl Kernel {
    pub fn open(path: impl AsRef<Path>, options: KernelOptions) -> Result<Kernel> {
        let store = Store::open(path)?;
        Ok(Kernel {
            inner: Arc::new(Inner {
                store,
                clock: options.clock,
                poisoned: Mutex::new(None),
                policy_hash: options.policy_hash,
                policy_version: options.policy_version,
                environment: resolve_environment(options.environment.as_deref(), None),
            }),
        })
    }

    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    /// The one environment this handle acts in.
    pub fn environment(&self) -> &str {
        &self.inner.environment
    }

    pub fn now(&self) -> Micros {
        self.inner.clock.now()
    }

    /// `Some(reason)` once a fault or panic latched this handle closed.
    pub fn poisoned(&self) -> Option<String> {
        self.inner.poisoned.lock().map(|p| p.clone()).unwrap_or_else(|_| Some("poisoned latch".into()))
    }

    fn latch(&self, reason: &str) {
        if let Ok(mut slot) = self.inner.poisoned.lock() {
            slot.get_or_insert_with(|| reason.to_owned());
        }
    }

    /// Runs one operation: refuses on a poisoned handle, turns a panic into `Error::Panic`,
    /// and latches the handle on any store fault or panic.
    fn guarded<T>(&self, work: impl FnOnce(&Kernel, Micros) -> Result<T>) -> Result<T> {
        if let Some(reason) = self.poisoned() {
            return Err(Error::Poisoned(reason));
        }
        let now = self.inner.clock.now();
        let outcome = match catch_unwind(AssertUnwindSafe(|| work(self, now))) {
            Ok(outcome) => outcome,
            Err(payload) => {
                let text = payload
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic with no message".into());
                Err(Error::Panic(text))
            }
        };
        if let Err(error) = &outcome {
            if error.poisons() {
                self.latch(&error.to_string());
            }
        }
        outcome
    }

    /// Test support: latch the handle as if a panic had happened inside it.
    #[doc(hidden)]
    pub fn force_panic(&self) -> Result<()> {
        self.guarded(|_, _| -> Result<()> { panic!("forced panic for a test") })
    }

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
                // The attempt ceiling comes before the approval gate: no human is asked to
                // approve an attempt that could never run.
                if let (Some(key), Some(max)) = (&effect_key, proposal.max_attempts) {
                    if let Some(record) = kernel.inner.store.effect(key)? {
                        if record.state == EffectState::Failed && record.attempt >= max {
                            let refusal = Error::AttemptCeiling {
                                effect_key: key.clone(),
                                attempts: record.attempt,
                                max_attempts: max,
                            };
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

    fn new_request(
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
                let record = tx.approval(id)?;
                let refusal = match approval::check_consumable(record.as_ref(), id, action_hash, now) {
                    Verdict::Proceed => None,
                    Verdict::Refuse(refusal) => Some(refusal),
                    Verdict::ExpireAndRefuse(refusal) => {
                        if let Some(mut expired) = record {
                            expired.status = ApprovalStatus::Expired;
                            tx.put_approval(&expired)?;
                            tx.event(
                                EventKind::APPROVAL_EXPIRED,
                                now,
                                Some(&action.action_id),
                                None,
                                Some(id),
                                serde_json::json!({}),
                            )?;
                        }
                        Some(refusal)
                    }
                };
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
    fn finish(&self, permit: &Permit, outcome: Outcome) -> Result<()> {
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

    // ---- approvals ---------------------------------------------------------------------------

    /// Create a pending approval request for `action` directly (the pipeline does this itself
    /// on an `approve` decision).
    pub fn request_approval(&self, action: &Action, ttl: Option<Micros>) -> Result<ApprovalRecord> {
        let action_hash = action.hash().map_err(|e| Error::InvalidInput(e.to_string()))?;
        self.guarded(|kernel, now| {
            let record = kernel.new_request(action, &action_hash, ttl, now)?;
            kernel.inner.store.write(|tx| {
                tx.put_approval(&record)?;
                tx.event(EventKind::APPROVAL_REQUESTED, now, Some(&action.action_id), None, Some(&record.approval_id),
                    serde_json::json!({"action_hash": action_hash, "expires_at": crate::clock::render(record.expires_at)}))?;
                Ok(())
            })?;
            Ok(record)
        })
    }

    pub fn grant(&self, approval_id: &str, approver: &str) -> Result<ApprovalRecord> {
        self.answer(approval_id, approver, None, true, None)
    }

    /// Grant, and let the approval be used for `ttl` from now instead of until the request's
    /// own expiry (an approver may shorten or lengthen the window they are vouching for).
    pub fn grant_for(&self, approval_id: &str, approver: &str, ttl: Micros) -> Result<ApprovalRecord> {
        if ttl <= 0 {
            return Err(Error::InvalidInput("an approval TTL must be positive".into()));
        }
        self.answer(approval_id, approver, None, true, Some(ttl))
    }

    pub fn deny(&self, approval_id: &str, approver: &str, note: Option<&str>) -> Result<ApprovalRecord> {
        self.answer(approval_id, approver, note, false, None)
    }

    fn answer(
        &self,
        approval_id: &str,
        approver: &str,
        note: Option<&str>,
        grant: bool,
        ttl: Option<Micros>,
    ) -> Result<ApprovalRecord> {
        approval::check_person_name("the approver name", approver)?;
        if let Some(note) = note {
            approval::check_person_name("the note", note)?;
        }
        self.guarded(|kernel, now| {
            kernel.inner.store.write(|tx| {
                let record = tx.approval(approval_id)?;
                match approval::check_answerable(record.as_ref(), approval_id, approver, now) {
                    Verdict::Proceed => {}
                    Verdict::Refuse(refusal) => return Ok(Err(refusal)),
                    Verdict::ExpireAndRefuse(refusal) => {
                        if let Some(mut record) = record {
                            record.status = ApprovalStatus::Expired;
                            tx.put_approval(&record)?;
                            tx.event(
                                EventKind::APPROVAL_EXPIRED,
                                now,
                                Some(&record.action_id),
                                None,
                                Some(approval_id),
                                serde_json::json!({}),
                            )?;
                        }
                        return Ok(Err(refusal));
                    }
                }
                let Some(mut record) = record else {
                    return Ok(Err(Error::NotFound(format!("no approval {approval_id}"))));
                };
                record.status = if grant { ApprovalStatus::Granted } else { ApprovalStatus::Denied };
                record.approver = Some(approver.to_owned());
                record.answered_at = Some(now);
                if let Some(ttl) = ttl {
                    record.expires_at = now.saturating_add(ttl);
                }
                record.note = note.map(str::to_owned);
                tx.put_approval(&record)?;
                let kind = if grant { EventKind::APPROVAL_GRANTED } else { EventKind::APPROVAL_DENIED };
                tx.event(
                    kind,
                    now,
                    Some(&record.action_id),
                    None,
                    Some(approval_id),
                    serde_json::json!({"approver": approver, "note": note}),
                )?;
                Ok(Ok(record))
            })?
        })
    }

    pub fn approval(&self, approval_id: &str) -> Result<Option<ApprovalRecord>> {
        self.guarded(|kernel, _| kernel.inner.store.approval(approval_id))
    }

    pub fn pending_approvals(&self) -> Result<Vec<ApprovalRecord>> {
        self.guarded(|kernel, now| kernel.inner.store.pending_approvals(now))
    }

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

/// What a reconcile hook may say about an AMBIGUOUS effect: it happened, it provably did not,
/// or it cannot tell (which moves nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReconcileAnswer {
    Committed,
    NotExecuted,
    Unknown,
}

impl ReconcileAnswer {
    pub fn as_str(self) -> &'static str {
        match self {
            ReconcileAnswer::Committed => "committed",
            ReconcileAnswer::NotExecuted => "not_executed",
            ReconcileAnswer::Unknown => "unknown",
        }
    }

    pub fn parse(text: &str) -> Option<ReconcileAnswer> {
        match text {
            "committed" => Some(ReconcileAnswer::Committed),
            "not_executed" => Some(ReconcileAnswer::NotExecuted),
            "unknown" => Some(ReconcileAnswer::Unknown),
            _ => None,
        }
    }
}

/// Shorthand for tests and the CLI: a principal from two strings.
pub fn principal(agent: &str, user: Option<&str>) -> Result<Principal> {
    Principal::new(agent, user).map_err(|e| Error::InvalidInput(e.to_string()))
}

/// One reservation attempt as the shared step of the pipeline and the integrator API.
struct ClaimRequest<'a> {
    action: &'a Action,
    action_hash: &'a str,
    effect_key: Option<&'a str>,
    presented: Option<&'a str>,
    /// Refuse when the presented approval cannot be consumed; otherwise it is spent if it can be.
    approval_required: bool,
    lease: Micros,
    max_attempts: Option<u32>,
    /// Reserve and begin in one write (a permit) rather than leave the record RESERVED.
    begin: bool,
}

/// What a claim decided (built once per call, so the size gap between variants costs nothing);
/// its writes (an expired approval, a lapsed lease turned AMBIGUOUS,
/// the events) are already in the transaction either way.
#[allow(clippy::large_enum_variant)]
enum Claimed {
    Granted {
        record: Option<EffectRecord>,
        attempt: u32,
        lease_expires_at: Option<Micros>,
        consumed: Option<ApprovalRecord>,
    },
    ApprovalRefused(Error),
    EffectRefused(Error),
}

/// The approval check, then the effect check, then approval consume and reservation: the
/// approval is written only once the reservation is, so a refused reservation leaves it granted.
fn claim_in(tx: &mut WriteTx<'_>, request: &ClaimRequest<'_>, now: Micros) -> Result<Claimed> {
    let action = request.action;
    let mut approval = None;
    if let Some(id) = request.presented {
        let record = tx.approval(id)?;
        let refusal = match approval::check_consumable(record.as_ref(), id, request.action_hash, now) {
            Verdict::Proceed => {
                approval = record;
                None
            }
            Verdict::Refuse(refusal) => Some((refusal, None)),
            Verdict::ExpireAndRefuse(refusal) => Some((refusal, record)),
        };
        if let (Some((refusal, expired)), true) = (refusal, request.approval_required) {
            if let Some(mut expired) = expired {
                expired.status = ApprovalStatus::Expired;
                tx.put_approval(&expired)?;
                tx.event(
                    EventKind::APPROVAL_EXPIRED,
                    now,
                    Some(&action.action_id),
                    None,
                    Some(id),
                    serde_json::json!({}),
                )?;
            }
            return Ok(Claimed::ApprovalRefused(refusal));
        }
    }
    let mut granted = None;
    if let Some(key) = request.effect_key {
        let claim = Claim {
            effect_key: key,
            action_id: &action.action_id,
            action_name: &action.name,
            action_hash: request.action_hash,
            approval_id: approval.as_ref().map(|a: &ApprovalRecord| a.approval_id.as_str()),
            lease: request.lease,
            max_attempts: request.max_attempts,
        };
        let refusal =
            match effect::plan_reservation(tx.effect(key)?.as_ref(), &claim, now).map_err(Error::InvalidInput)? {
                ReservationPlan::Grant(mut record) => {
                    if !request.begin {
                        record.state = EffectState::Reserved;
                    }
                    tx.put_effect(&record)?;
                    granted = Some(record);
                    None
                }
                ReservationPlan::Refuse(refusal) => Some(refusal),
                ReservationPlan::AmbiguateAndRefuse(record, refusal) => {
                    tx.put_effect(&record)?;
                    tx.event(
                        EventKind::EXECUTION_AMBIGUOUS,
                        now,
                        Some(&record.action_id),
                        Some(key),
                        None,
                        serde_json::json!({"error": effect::LEASE_EXPIRED, "attempt": record.attempt}),
                    )?;
                    Some(refusal)
                }
            };
        if let Some(refusal) = refusal {
            tx.event(
                EventKind::EFFECT_RESERVATION_REFUSED,
                now,
                Some(&action.action_id),
                Some(key),
                None,
                serde_json::json!({"reason": refusal.reason()}),
            )?;
            return Ok(Claimed::EffectRefused(refusal));
        }
    }
    if let Some(record) = approval.as_mut() {
        record.status = ApprovalStatus::Consumed;
        record.consumed_at = Some(now);
        record.consumed_by = Some(action.action_id.clone());
        tx.put_approval(record)?;
        tx.event(
            EventKind::APPROVAL_CONSUMED,
            now,
            Some(&action.action_id),
            request.effect_key,
            Some(&record.approval_id),
            serde_json::json!({"approver": record.approver}),
        )?;
    }
    if let Some(record) = &granted {
        tx.event(
            EventKind::EFFECT_RESERVED,
            now,
            Some(&action.action_id),
            Some(&record.effect_key),
            None,
            serde_json::json!({"attempt": record.attempt, "lease_expires_at": record.lease_expires_at.map(crate::clock::render)}),
        )?;
    }
    Ok(Claimed::Granted {
        attempt: granted.as_ref().map_or(1, |r| r.attempt),
        lease_expires_at: granted.as_ref().and_then(|r| r.lease_expires_at),
        record: granted,
        consumed: approval,
    })
}
