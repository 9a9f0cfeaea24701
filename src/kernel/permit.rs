//! The permit: the right to execute one action once, and the one outcome it reports.

use crate::action::Action;
use crate::clock::Micros;
use crate::decision::Ruling;
use crate::effect::{self, EffectState, Outcome, OutcomePlan, StoredResult};
use crate::error::{Error, InvalidInputKind, Result};
use crate::event::EventKind;
use crate::receipt::ReceiptResult;
use crate::store::WriteTx;
use crate::telemetry::trace::Reported;

use super::ops::{unexpected, Finish, Suspension, Write, WriteReply};
use super::Kernel;

/// The member of an `EXECUTION_SUSPENDED` event's data that holds a parked permit.
pub(super) const PARKED: &str = "parked";

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
    /// The scoped grant that covered this action instead of a human's answer, if one did.
    pub(super) scoped_grant_id: Option<String>,
    pub(super) started_at: Micros,
    /// False when the permit names a key it does not hold (observe mode, refused reservation).
    pub(super) holds_key: bool,
    /// Observe mode: what enforce mode would have done.
    pub(super) would_have: Option<serde_json::Value>,
    /// The authority evidence every receipt of this permit carries.
    pub(super) authority: Option<crate::receipt::ReceiptAuthority>,
    /// The call's W3C trace context, which every receipt of this permit carries.
    pub(super) traceparent: Option<String>,
    /// The digest of the result the host bound to the outcome, which its receipt carries.
    pub(super) result_sha256: Option<String>,
    /// The id of the receipt this permit's outcome writes, chosen when the permit is granted.
    pub(super) receipt_id: String,
    /// The policy the grant was decided under, which every receipt of this permit records (an
    /// adopted permit's, too, whatever policy the adopting handle runs).
    pub(super) policy_hash: Option<String>,
    /// That policy's `version`.
    pub(super) policy_version: Option<String>,
    /// The call's span recorder, when its host traces it: the outcome ends the span.
    pub(super) trace: Option<std::sync::Arc<crate::telemetry::ActionTrace>>,
    pub(super) finished: bool,
}

impl Permit {
    /// The id (`rct_…`) of the receipt the outcome of this permit writes, whichever outcome it
    /// is (also the AMBIGUOUS one a dropped permit records).
    pub fn receipt_id(&self) -> &str {
        &self.receipt_id
    }

    /// The action this permit may run.
    pub fn action(&self) -> &Action {
        &self.action
    }
    /// The action's hash, which any approval was bound to.
    pub fn action_hash(&self) -> &str {
        &self.action_hash
    }
    /// The rendered effect key; `None` for an action with no effect to protect.
    pub fn effect_key(&self) -> Option<&str> {
        self.effect_key.as_deref()
    }
    /// This attempt's number, from 1.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }
    /// When this attempt's lease lapses; `None` when it holds no lease.
    pub fn lease_expires_at(&self) -> Option<Micros> {
        self.lease_expires_at
    }
    /// The provider idempotency token for this (effect key, attempt); `None` without a key.
    pub fn idempotency_token(&self) -> Option<&str> {
        self.idempotency_token.as_deref()
    }
    /// The approval this attempt consumed, if any.
    pub fn approval_id(&self) -> Option<&str> {
        self.approval_id.as_deref()
    }
    /// The scoped grant (`sgr_…`) this attempt spent a use of, when one covered it.
    pub fn scoped_grant_id(&self) -> Option<&str> {
        self.scoped_grant_id.as_deref()
    }
    /// The grant (root id or `dlg_…`) that authorised this action, when the document has an
    /// `authority:` section.
    pub fn authority_grant_id(&self) -> Option<&str> {
        self.authority.as_ref().and_then(|a| a.grant_id.as_deref())
    }
    /// The call's W3C trace context, which the receipts of this permit carry.
    pub fn traceparent(&self) -> Option<&str> {
        self.traceparent.as_deref()
    }
    /// What the reservation charged against budgets.
    pub fn budget_charges(&self) -> &[crate::authority::Charge] {
        self.authority.as_ref().map_or(&[], |a| a.budget_charges.as_slice())
    }

    /// The permit as JSON: ids, key, attempt, lease, decision (the C ABI's permit info).
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
            "scoped_grant_id": self.scoped_grant_id,
            "decision": self.ruling.decision.as_str(),
            "decision_reason": self.ruling.reason,
            "authority_grant_id": self.authority_grant_id(),
        })
    }

    /// Bind a digest of the result to this permit's outcome: the receipt it writes (whichever
    /// outcome) carries `result_sha256`, inside the hashed document. `digest` is `sha256:` and
    /// 64 lowercase hex digits; anything else is invalid input.
    pub fn bind_result_sha256(&mut self, digest: &str) -> Result<()> {
        let hex = digest.strip_prefix("sha256:").unwrap_or_default();
        if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
            return Err(Error::invalid_at(
                InvalidInputKind::Malformed,
                "result_sha256",
                "a result digest is sha256: and 64 lowercase hex digits (canonical::sha256_prefixed)",
            ));
        }
        self.result_sha256 = Some(digest.to_owned());
        Ok(())
    }

    /// The executor succeeded. `result` is stored as plain JSON outside any hashed content.
    pub fn commit(self, result: &serde_json::Value) -> Result<()> {
        let stored = StoredResult::from_value_within(result, self.kernel.limits().max_result_bytes);
        self.commit_stored(stored)
    }

    /// The executor succeeded, with its result already in stored form (what a binding handed
    /// over: `StoredResult::from_bytes`).
    pub fn commit_stored(mut self, result: StoredResult) -> Result<()> {
        self.finished = true;
        self.kernel.clone().finish(&self, Outcome::Committed(result))
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
            return Err(Error::invalid(InvalidInputKind::State, "this action has no effect key, so it holds no lease"));
        };
        let op = Write::ExtendLease {
            effect_key: key,
            action_id: self.action.action_id.clone(),
            attempt: self.attempt,
            until,
        };
        let record = self.kernel.write_effect(op)?;
        self.lease_expires_at = record.lease_expires_at;
        Ok(())
    }
}

/// The most bytes of `data` one suspension event keeps.
pub const MAX_SUSPENSION_DATA_BYTES: usize = 16 * 1024;

impl Permit {
    /// The executor waits for input its remote side asked for (an MCP elicitation): write
    /// `EXECUTION_SUSPENDED` with `data` and, with `until`, extend the lease to cover the wait
    /// (never shortened), in one write. Only while this attempt still holds its key; the
    /// permit still reports the one outcome.
    pub fn suspend(&mut self, until: Option<Micros>, data: &serde_json::Value) -> Result<()> {
        self.suspend_with(until, data, None)
    }

    /// `suspend`, and with `parked` (`Permit::park`) that record as the event's `parked` member.
    pub(super) fn suspend_with(
        &mut self,
        until: Option<Micros>,
        data: &serde_json::Value,
        parked: Option<serde_json::Value>,
    ) -> Result<()> {
        let until = until.filter(|until| {
            self.holds_key && self.effect_key.is_some() && self.lease_expires_at.is_none_or(|l| l < *until)
        });
        self.suspension(false, until, data, parked)?;
        if until.is_some() {
            self.lease_expires_at = until;
        }
        Ok(())
    }

    /// The input came and the same attempt goes on: write `EXECUTION_RESUMED` with `data`,
    /// only while this attempt still holds its key.
    pub fn resume(&mut self, data: &serde_json::Value) -> Result<()> {
        self.suspension(true, None, data, None)
    }

    fn suspension(
        &self,
        resumed: bool,
        until: Option<Micros>,
        data: &serde_json::Value,
        parked: Option<serde_json::Value>,
    ) -> Result<()> {
        let size = serde_json::to_vec(data).map(|bytes| bytes.len()).unwrap_or(usize::MAX);
        if size > MAX_SUSPENSION_DATA_BYTES || !data.is_object() {
            return Err(Error::invalid_at(InvalidInputKind::TooLarge, "data", format!(
                "suspension data must be a JSON object of at most {MAX_SUSPENSION_DATA_BYTES} bytes; keep keys and digests, not payloads"
            )));
        }
        if data.get(PARKED).is_some() {
            return Err(Error::invalid_at(
                InvalidInputKind::Malformed,
                "data",
                format!("suspension data may not have a member named {PARKED:?}: the kernel writes it (Permit::park)"),
            ));
        }
        let mut data = data.clone();
        if let (Some(parked), Some(object)) = (parked, data.as_object_mut()) {
            object.insert(PARKED.to_owned(), parked);
        }
        let op = Write::Suspension(Box::new(Suspension {
            action_id: self.action.action_id.clone(),
            effect_key: self.effect_key.clone(),
            attempt: self.attempt,
            holds_key: self.holds_key,
            resumed,
            until,
            data,
        }));
        self.kernel.guarded(|kernel, _| match kernel.write(op)? {
            WriteReply::Done => Ok(()),
            WriteReply::Refused(refusal) => Err(refusal),
            _ => Err(unexpected("suspension")),
        })
    }
}

/// `suspend`/`resume` inside the transaction: the key must still be this attempt's, executing
/// under a live lease; then the lease extension (with its event) and the suspension event.
pub(super) fn apply_suspension(tx: &mut WriteTx<'_>, s: &Suspension, now: Micros) -> Result<WriteReply> {
    let key = if s.holds_key { s.effect_key.as_deref() } else { None };
    if let Some(key) = key {
        let record = tx.effect(key)?;
        let held = record.as_ref().is_some_and(|r| {
            r.state == EffectState::Executing
                && r.action_id == s.action_id
                && r.attempt == s.attempt
                && r.lease_is_live(now)
        });
        if !held {
            return Ok(WriteReply::Refused(Error::Ambiguous {
                effect_key: key.to_owned(),
                action_id: s.action_id.clone(),
                detail: "this attempt no longer holds the key (its lease lapsed or the record moved on); nothing was suspended or resumed".into(),
            }));
        }
        if let Some(until) = s.until {
            match effect::plan_lease_extension(record.as_ref(), key, &s.action_id, s.attempt, until, now) {
                Ok(extended) => {
                    tx.put_effect(&extended)?;
                    let data = serde_json::json!({"lease_expires_at": crate::clock::render(until)});
                    tx.event(EventKind::EFFECT_LEASE_EXTENDED, now, Some(&s.action_id), Some(key), None, data)?;
                }
                Err(refusal) => return Ok(WriteReply::Refused(refusal)),
            }
        }
    }
    let kind = if s.resumed { EventKind::EXECUTION_RESUMED } else { EventKind::EXECUTION_SUSPENDED };
    tx.event(kind, now, Some(&s.action_id), s.effect_key.as_deref(), None, s.data.clone())?;
    Ok(WriteReply::Done)
}

impl Kernel {
    /// Record an outcome for a permit: state, event and receipt in one write. A record that
    /// moved on is left alone, and the late outcome is kept as ambiguous evidence. Under
    /// `outcomes: deferred` this returns before the write is durable (and a late outcome is
    /// then only in the evidence).
    pub(super) fn finish(&self, permit: &Permit, outcome: Outcome) -> Result<()> {
        let Some(trace) = &permit.trace else { return self.record_outcome(permit, outcome, false).map(drop) };
        let captured = trace.capture().results;
        let (reported, message, result) = match &outcome {
            Outcome::Committed(result) => (Reported::Committed, None, captured.then(|| result.clone())),
            Outcome::NotExecuted(message) => (Reported::NotExecuted, captured.then(|| message.clone()), None),
            Outcome::Ambiguous(message) => (Reported::Ambiguous, captured.then(|| message.clone()), None),
        };
        let began = std::time::Instant::now();
        let answer = self.record_outcome(permit, outcome, true);
        let durable = self.inner.outcomes == super::Outcomes::Durable;
        if durable {
            trace.wrote("outcome", began.elapsed(), answer.as_ref().map_or(0, |(_, together)| *together));
        }
        let (answer, written) = match answer {
            Ok((written, _)) => (Ok(()), written),
            Err(error) => (Err(error), None),
        };
        trace.end_outcome(self.now(), reported, message.as_deref(), result.as_ref(), permit.holds_key, &answer);
        // A deferred outcome's receipt is written after this returns: the span names it by id.
        // The write names the receipt it appended; an outcome that found its receipt written
        // already (re-sent) or was refused late (a receipt all the same) is read back.
        match written {
            Some((seq, hash)) => trace.receipt(seq, Some(hash)),
            None if durable && matches!(answer, Ok(()) | Err(Error::LateOutcome { .. })) => {
                self.trace_receipt(trace, &permit.receipt_id);
            }
            None => {}
        }
        answer
    }

    /// `finish` itself: the outcome's one write; with `report_receipt`, the seq and hash of the
    /// receipt it appended, when it appended one and the store answered in time to say so; and
    /// how many writes the outcome's commit carried.
    fn record_outcome(
        &self,
        permit: &Permit,
        outcome: Outcome,
        report_receipt: bool,
    ) -> Result<(Option<(u64, String)>, u32)> {
        self.guarded(|kernel, _| {
            let mut draft = kernel.draft(&permit.action, &permit.action_hash, &permit.ruling)?;
            draft.started_at = permit.started_at;
            draft.effect_key = permit.effect_key.clone();
            draft.attempt = permit.attempt;
            draft.approval_id = permit.approval_id.clone();
            draft.approver = permit.approver.clone();
            draft.scoped_grant_id = permit.scoped_grant_id.clone();
            draft.authority = permit.authority.clone();
            draft.traceparent = permit.traceparent.clone();
            draft.result_sha256 = permit.result_sha256.clone();
            draft.receipt_id = permit.receipt_id.clone();
            draft.policy_hash = permit.policy_hash.clone();
            draft.policy_version = permit.policy_version.clone();
            let op = Write::Finish(Box::new(Finish {
                action: permit.action.clone(),
                effect_key: permit.effect_key.clone(),
                attempt: permit.attempt,
                holds_key: permit.holds_key,
                draft,
                would_have: permit.would_have.clone(),
                outcome: outcome.bounded(kernel.limits()),
                report_receipt,
            }));
            let written = kernel.write_outcome(op)?;
            match written.reply {
                None | Some(WriteReply::Done) => Ok((None, written.together)),
                Some(WriteReply::Receipt { seq, hash }) => Ok((Some((seq, hash)), written.together)),
                Some(WriteReply::Refused(refusal)) => Err(refusal),
                Some(_) => Err(unexpected("outcome")),
            }
        })
    }
}

/// The outcome transaction. Lands once per receipt id: an outcome re-sent after a lost answer
/// (to a new owner of the store) finds its receipt and writes nothing; another outcome under
/// that id (a second adopter of a parked attempt) is refused as late (`already_recorded`).
pub(super) fn apply_finish(tx: &mut WriteTx<'_>, finish: &Finish, now: Micros) -> Result<WriteReply> {
    if let Some(seq) = tx.receipt_seq(&finish.draft.receipt_id)? {
        return already_recorded(tx, finish, seq, now);
    }
    let mut draft = finish.draft.clone();
    draft.finished_at = now;
    let action_id = finish.action.action_id.as_str();
    let executor_result = match &finish.outcome {
        Outcome::Committed(result) => Some(result.clone()),
        _ => None,
    };
    let (kind, result, error) = match &finish.outcome {
        Outcome::Committed(_) => (EventKind::EXECUTION_COMMITTED, ReceiptResult::Committed, None),
        Outcome::NotExecuted(error) => (EventKind::EXECUTION_FAILED, ReceiptResult::Failed, Some(error.clone())),
        Outcome::Ambiguous(error) => (EventKind::EXECUTION_AMBIGUOUS, ReceiptResult::Ambiguous, Some(error.clone())),
    };
    let held = if finish.holds_key { finish.effect_key.as_ref() } else { None };
    let late = match held {
        None => None,
        Some(key) => {
            match effect::plan_outcome(tx.effect(key)?.as_ref(), key, action_id, finish.attempt, &finish.outcome, now) {
                Ok(OutcomePlan::Write(mut record)) => {
                    // The receipt below keeps the result; the effect row does not repeat it.
                    record.result = None;
                    tx.put_effect(&record)?;
                    None
                }
                Ok(OutcomePlan::Unchanged(_)) => None,
                Err(
                    Error::Ambiguous { .. } | Error::Duplicate { .. } | Error::LateOutcome { .. } | Error::NotFound(_),
                ) => {
                    let record = tx.effect(key)?;
                    Some(Error::LateOutcome {
                        effect_key: key.clone(),
                        state: record.as_ref().map(|r| r.state).unwrap_or(EffectState::Ambiguous),
                        holder: record.map(|r| r.action_id).unwrap_or_default(),
                    })
                }
                Err(other) => return Err(other),
            }
        }
    };
    let data = match (&late, &error) {
        (Some(refusal), _) => {
            serde_json::json!({"attempt": finish.attempt, "late_outcome": result.as_str(), "error": refusal.to_string()})
        }
        (None, Some(error)) => serde_json::json!({"attempt": finish.attempt, "error": error}),
        (None, None) => serde_json::json!({"attempt": finish.attempt}),
    };
    let kind = if late.is_some() { EventKind::EXECUTION_AMBIGUOUS } else { kind };
    tx.event(kind, now, Some(action_id), finish.effect_key.as_deref(), None, data)?;
    match &late {
        Some(refusal) => {
            draft.result = ReceiptResult::Ambiguous;
            draft.error = Some(format!("late {} outcome refused: {refusal}", result.as_str()));
        }
        None => {
            draft.result = result;
            draft.error = error;
        }
    }
    if let Some(would_have) = &finish.would_have {
        draft.execution = Some(draft.result);
        draft.result = ReceiptResult::Observed;
        draft.would_have = Some(would_have.clone());
    }
    let (seq, hash) = tx.append_receipt(&draft, executor_result)?;
    Ok(match late {
        Some(refusal) => WriteReply::Refused(refusal),
        None if finish.report_receipt => WriteReply::Receipt { seq, hash },
        None => WriteReply::Done,
    })
}

/// An outcome whose receipt (at `seq`) is written already. The same outcome again (a re-send)
/// writes nothing. Another one, for a held key, reaches the receipt id only through a second
/// permit of the same grant — two adopters of one parked attempt (`Kernel::adopt`): it is
/// refused as late and kept as an `EXECUTION_AMBIGUOUS` event, with no second receipt.
fn already_recorded(tx: &mut WriteTx<'_>, finish: &Finish, seq: u64, now: Micros) -> Result<WriteReply> {
    let (Some(key), true) = (finish.effect_key.as_ref(), finish.holds_key) else { return Ok(WriteReply::Done) };
    let Some(document) = tx.receipt_document(seq)? else { return Ok(WriteReply::Done) };
    let document = crate::canonical::parse_json(&document).unwrap_or_default();
    // An observed receipt says what happened as `execution`.
    let recorded = document.get("execution").and_then(|e| e.as_str()).or_else(|| document["result"].as_str());
    let reported = match &finish.outcome {
        Outcome::Committed(_) => ReceiptResult::Committed,
        Outcome::NotExecuted(_) => ReceiptResult::Failed,
        Outcome::Ambiguous(_) => ReceiptResult::Ambiguous,
    };
    if recorded == Some(reported.as_str()) {
        return Ok(WriteReply::Done);
    }
    let record = tx.effect(key)?;
    let refusal = Error::LateOutcome {
        effect_key: key.clone(),
        state: record.as_ref().map(|r| r.state).unwrap_or(EffectState::Ambiguous),
        holder: record.map(|r| r.action_id).unwrap_or_default(),
    };
    let data = serde_json::json!({
        "attempt": finish.attempt,
        "late_outcome": reported.as_str(),
        "error": format!("{refusal} (receipt {} recorded it {})", finish.draft.receipt_id, recorded.unwrap_or("unreadable")),
    });
    tx.event(EventKind::EXECUTION_AMBIGUOUS, now, Some(&finish.action.action_id), Some(key), None, data)?;
    Ok(WriteReply::Refused(refusal))
}

/// `extend_lease` inside the transaction.
pub(super) fn apply_extend(
    tx: &mut WriteTx<'_>,
    effect_key: &str,
    action_id: &str,
    attempt: u32,
    until: Micros,
    now: Micros,
) -> Result<WriteReply> {
    let record = tx.effect(effect_key)?;
    let planned = effect::plan_lease_extension(record.as_ref(), effect_key, action_id, attempt, until, now);
    super::effects::put_planned(
        tx,
        effect_key,
        planned.map(OutcomePlan::Write),
        |_| (EventKind::EFFECT_LEASE_EXTENDED, serde_json::json!({"lease_expires_at": crate::clock::render(until)})),
        now,
    )
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
