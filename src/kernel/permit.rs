//! The permit: the right to execute one action once, and the one outcome it reports.

use crate::action::Action;
use crate::clock::Micros;
use crate::decision::Ruling;
use crate::effect::{self, Outcome, StoredResult};
use crate::error::{Error, Result};
use crate::store::EventKind;

use super::Kernel;

/// The right to execute one action once, until the lease expires. Report exactly one outcome;
/// a permit dropped without one records AMBIGUOUS.
#[derive(Debug)]
pub struct Permit {
    pub(super) kernel: Kernel,
    pub(super) action: Action,
    pub(super) action_hash: String,
    pub(super) ruling: Ruling,
    pub(super) effect_key: Option<String>,
    pub(super) attempt: u32,
    pub(super) lease_expires_at: Option<Micros>,
    pub(super) idempotency_token: Option<String>,
    pub(super) approval_id: Option<String>,
    pub(super) approver: Option<String>,
    pub(super) started_at: Micros,
    /// False when the permit names a key it does not hold (observe mode, refused reservation).
    pub(super) holds_key: bool,
    /// Observe mode: what enforce mode would have done.
    pub(super) would_have: Option<serde_json::Value>,
    pub(super) finished: bool,
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
