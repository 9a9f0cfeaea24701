//! Parking a permit, and adopting it in another process. A permit whose execution waits on
//! something that outlives this process (an MCP task) is parked: the one write of `suspend`
//! (`EXECUTION_SUSPENDED`, the lease extended) whose event also keeps everything the permit
//! holds in memory, as its `parked` member. A later process on the same store adopts the
//! attempt from that record (`Kernel::adopt`) and gets the permit back, so the one outcome it
//! reports writes the receipt the permit was granted with, through the usual `finish`.
//!
//! The parked record keeps the action's arguments in the store's events table, as receipts do
//! in theirs; it is bounded by the kernel's limits (`max_parked_bytes`), apart from the
//! caller's own data (`MAX_SUSPENSION_DATA_BYTES`).

use serde::{Deserialize, Serialize};

use crate::action::{Action, Principal};
use crate::clock::Micros;
use crate::decision::Ruling;
use crate::effect::{self, EffectRecord, EffectState};
use crate::error::{Error, InvalidInputKind, Result, StoreFaultKind};
use crate::event::EventKind;
use crate::receipt::ReceiptAuthority;

use super::ops::{unexpected, Read, ReadReply};
use super::permit::PARKED;
use super::{Kernel, Permit};

/// What a parked record may take beyond the action's arguments: names, ids, the ruling's
/// reason and warnings, the authority evidence, the trace context.
const PARKED_OVERHEAD_BYTES: usize = 64 * 1024;

/// The most bytes a parked record (the `parked` member) may take under `limits`.
fn max_parked_bytes(limits: &crate::limits::Limits) -> usize {
    limits.max_arguments_bytes.saturating_add(PARKED_OVERHEAD_BYTES)
}

/// Everything a permit holds in memory that its receipt needs, as a parked record keeps it.
/// The lease comes from the effect record and the idempotency token from the key and attempt,
/// so neither is kept; a parked permit holds its key, so that is not kept either.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct ParkedPermit {
    action_id: String,
    name: String,
    /// The canonical arguments, as JSON text (what the action hash covers).
    arguments: String,
    principal: Principal,
    resource: Option<String>,
    environment: String,
    action_hash: String,
    ruling: Ruling,
    effect_key: String,
    attempt: u32,
    started_at: Micros,
    approval_id: Option<String>,
    approver: Option<String>,
    scoped_grant_id: Option<String>,
    authority: Option<ReceiptAuthority>,
    traceparent: Option<String>,
    receipt_id: String,
    result_sha256: Option<String>,
    would_have: Option<serde_json::Value>,
    policy_hash: Option<String>,
    policy_version: Option<String>,
}

impl Permit {
    /// Park this attempt so that another process on the store can adopt it (`Kernel::adopt`)
    /// when this one stops before the outcome is known: `suspend`'s one write (the
    /// `EXECUTION_SUSPENDED` event with `data`, the lease extended to `until`, never shortened),
    /// whose event also keeps, as its `parked` member, everything this permit holds that its
    /// receipt needs — the action with its arguments, the ruling, the approval, the authority
    /// evidence, the trace context, the result digest bound so far and the id of the receipt
    /// its outcome writes. Only a permit that holds its effect key under a lease can be parked.
    /// This permit still reports the one outcome, unless the process leaves it to an adopter.
    pub fn park(&mut self, until: Option<Micros>, data: &serde_json::Value) -> Result<()> {
        let parked = self.parked_record()?;
        self.suspend_with(until, data, Some(parked))
    }

    fn parked_record(&self) -> Result<serde_json::Value> {
        let effect_key = match (&self.effect_key, self.holds_key, self.lease_expires_at) {
            (Some(key), true, Some(_)) => key.clone(),
            _ => {
                return Err(Error::invalid(
                    InvalidInputKind::State,
                    "only a permit that holds its effect key under a lease can be parked: no other process could \
                     find one that does not. Report its outcome here (suspend keeps it waiting without parking)",
                ))
            }
        };
        let arguments = self.action.arguments_text()?;
        let record = ParkedPermit {
            action_id: self.action.action_id.clone(),
            name: self.action.name.clone(),
            arguments,
            principal: self.action.principal.clone(),
            resource: self.action.resource.clone(),
            environment: self.action.environment.clone(),
            action_hash: self.action_hash.clone(),
            ruling: self.ruling.clone(),
            effect_key,
            attempt: self.attempt,
            started_at: self.started_at,
            approval_id: self.approval_id.clone(),
            approver: self.approver.clone(),
            scoped_grant_id: self.scoped_grant_id.clone(),
            authority: self.authority.clone(),
            traceparent: self.traceparent.clone(),
            receipt_id: self.receipt_id.clone(),
            result_sha256: self.result_sha256.clone(),
            would_have: self.would_have.clone(),
            policy_hash: self.policy_hash.clone(),
            policy_version: self.policy_version.clone(),
        };
        let value = serde_json::to_value(&record)
            .map_err(|e| Error::invalid(InvalidInputKind::NotCanonical, format!("a parked record: {e}")))?;
        let size = serde_json::to_vec(&value).map(|bytes| bytes.len()).unwrap_or(usize::MAX);
        let bound = max_parked_bytes(self.kernel.limits());
        if size > bound {
            return Err(Error::invalid(
                InvalidInputKind::TooLarge,
                format!(
                    "this permit's parked record takes {size} bytes, over its bound of {bound} (max_arguments_bytes + \
                 {PARKED_OVERHEAD_BYTES}); nothing was parked"
                ),
            ));
        }
        Ok(value)
    }
}

/// How many events one read of the scan for a parked record takes.
const SCAN_PAGE: usize = 1000;

impl Kernel {
    /// Adopt attempt `attempt` of `action_id` on `effect_key`, which a permit parked
    /// (`Permit::park`), in another process or an earlier one: the permit comes back as it was
    /// parked, holding the key under the lease the record has now, and reports exactly one
    /// outcome (`commit`, `not_executed`, `ambiguous`; dropped, AMBIGUOUS), which writes the
    /// receipt with the id chosen at the grant, in one write with the state change.
    ///
    /// The effect record must be EXECUTING, held by exactly that action and attempt under a
    /// live lease; otherwise nothing is adopted (`Error::Ambiguous`, or `NotFound` for a key
    /// never reserved). The latest parked record of the attempt is read from the events after
    /// `since_event` (the id of an event before the park, such as the one before the suspension
    /// the caller found; 0 reads them all). None found is `NotFound`: the attempt was suspended
    /// without parking (by an earlier Warden), and only `Kernel::complete` (no receipt) or its
    /// lease lapsing is left. A record that does not rebuild, or whose action does not hash to
    /// its own action hash and to the effect record's, is a store fault naming the key.
    ///
    /// Two adopters of one attempt record one outcome: both write under the same receipt id,
    /// so the second finds it written — the same outcome again writes nothing, another one is
    /// refused as late (`Error::LateOutcome`) and kept as an event.
    pub fn adopt(&self, effect_key: &str, action_id: &str, attempt: u32, since_event: u64) -> Result<Permit> {
        self.guarded(|kernel, now| {
            let record = match kernel.read(&Read::Effect { effect_key: effect_key.to_owned() })? {
                ReadReply::Effect(Some(record)) => record,
                ReadReply::Effect(None) => {
                    return Err(Error::NotFound(format!(
                        "no effect {effect_key:?} was ever reserved; nothing to adopt"
                    )))
                }
                _ => return Err(unexpected("effect")),
            };
            if let Some(refusal) = not_held(&record, action_id, attempt, now) {
                return Err(refusal);
            }
            let (event_id, parked) =
                kernel.latest_parked(effect_key, action_id, attempt, since_event)?.ok_or_else(|| {
                    Error::NotFound(format!(
                    "attempt {attempt} of {action_id} on {effect_key:?} was not parked (no EXECUTION_SUSPENDED event \
                     after event {since_event} keeps its permit: it was suspended without Permit::park, by an earlier \
                     Warden), so its permit cannot be rebuilt and no receipt can be written for it; report its \
                     outcome with Kernel::complete, or let its lease lapse and resolve it"
                ))
                })?;
            kernel.rebuild(&record, event_id, parked)
        })
    }

    /// The latest parked record (the `parked` member of an `EXECUTION_SUSPENDED` event) of
    /// this action's attempt on this key among the events after `since_event`, with its event id.
    fn latest_parked(
        &self,
        effect_key: &str,
        action_id: &str,
        attempt: u32,
        since_event: u64,
    ) -> Result<Option<(u64, serde_json::Value)>> {
        let mut latest = None;
        let mut after = since_event;
        loop {
            let ReadReply::Events(page) = self.read(&Read::Events { after, limit: SCAN_PAGE })? else {
                return Err(unexpected("events"));
            };
            let Some(last) = page.last() else { break };
            after = last.event_id;
            for event in page {
                if event.kind != EventKind::EXECUTION_SUSPENDED
                    || event.action_id.as_deref() != Some(action_id)
                    || event.effect_key.as_deref() != Some(effect_key)
                {
                    continue;
                }
                let data = crate::canonical::parse_json(&event.data)
                    .map_err(|e| damaged(effect_key, event.event_id, &format!("its data does not parse ({e})")))?;
                let Some(parked) = data.get(PARKED) else { continue };
                let parked_attempt = parked.get("attempt").and_then(serde_json::Value::as_u64);
                if parked_attempt.is_none() {
                    return Err(damaged(effect_key, event.event_id, "it names no attempt"));
                }
                if parked_attempt == Some(u64::from(attempt)) {
                    latest = Some((event.event_id, parked.clone()));
                }
            }
        }
        Ok(latest)
    }

    /// The permit a parked record keeps, checked against itself and the effect record.
    fn rebuild(&self, record: &EffectRecord, event_id: u64, parked: serde_json::Value) -> Result<Permit> {
        let key = record.effect_key.as_str();
        let parked: ParkedPermit =
            serde_json::from_value(parked).map_err(|e| damaged(key, event_id, &format!("it does not read ({e})")))?;
        if parked.action_id != record.action_id || parked.effect_key != key || parked.attempt != record.attempt {
            return Err(damaged(key, event_id, "it names another action, key or attempt than its event"));
        }
        let Ok(serde_json::Value::Object(arguments)) = crate::canonical::parse_json(&parked.arguments) else {
            return Err(damaged(key, event_id, "its arguments are not a JSON object"));
        };
        let action = Action {
            action_id: parked.action_id,
            name: parked.name,
            arguments,
            principal: parked.principal,
            resource: parked.resource,
            environment: parked.environment,
        };
        let hash = action.hash().map_err(|e| damaged(key, event_id, &format!("its action cannot be hashed ({e})")))?;
        if hash != parked.action_hash || hash != record.action_hash {
            return Err(damaged(
                key,
                event_id,
                &format!(
                    "its action hashes to {hash}, but it says {} and the effect record {}; the stored action was altered",
                    parked.action_hash, record.action_hash
                ),
            ));
        }
        let idempotency_token = effect::idempotency_token(key, parked.attempt).map_err(Error::InvalidInput)?;
        Ok(Permit {
            kernel: self.clone(),
            action,
            action_hash: hash,
            ruling: parked.ruling,
            effect_key: Some(key.to_owned()),
            attempt: parked.attempt,
            lease_expires_at: record.lease_expires_at,
            idempotency_token: Some(idempotency_token),
            approval_id: parked.approval_id,
            approver: parked.approver,
            scoped_grant_id: parked.scoped_grant_id,
            started_at: parked.started_at,
            holds_key: true,
            would_have: parked.would_have,
            authority: parked.authority,
            traceparent: parked.traceparent,
            result_sha256: parked.result_sha256,
            receipt_id: parked.receipt_id,
            policy_hash: parked.policy_hash,
            policy_version: parked.policy_version,
            trace: None,
            finished: false,
        })
    }
}

/// Why `action_id`'s attempt `attempt` cannot be adopted from `record`, if it cannot.
fn not_held(record: &EffectRecord, action_id: &str, attempt: u32, now: Micros) -> Option<Error> {
    let refused = |detail: String| {
        Some(Error::Ambiguous {
            effect_key: record.effect_key.clone(),
            action_id: action_id.to_owned(),
            detail: format!("{detail}; nothing was adopted"),
        })
    };
    if record.state != EffectState::Executing || record.action_id != action_id || record.attempt != attempt {
        return refused(format!(
            "attempt {attempt} of {action_id} no longer holds the key: the record is {} under attempt {} of {}",
            record.state, record.attempt, record.action_id
        ));
    }
    if !record.lease_is_live(now) {
        return refused(format!(
            "the lease of attempt {attempt} lapsed: the next claim of the key finds it AMBIGUOUS, and `warden \
             resolve` settles it"
        ));
    }
    None
}

/// A parked record that cannot be believed: a store fault naming the key and the event.
fn damaged(effect_key: &str, event_id: u64, problem: &str) -> Error {
    Error::store(
        StoreFaultKind::Damaged,
        format!(
            "the parked record of effect {effect_key:?} (event {event_id} in the events table) is damaged: {problem}; \
             nothing was adopted. Run `warden doctor`"
        ),
    )
}
