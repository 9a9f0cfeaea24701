//! One reservation attempt: the shared step of the pipeline and the integrator API.

use crate::action::Action;
use crate::approval::{self, ApprovalRecord, ApprovalStatus, Verdict};
use crate::clock::Micros;
use crate::effect::{self, Claim, EffectRecord, EffectState, ReservationPlan};
use crate::error::{Error, Result};
use crate::event::EventKind;
use crate::store::WriteTx;

/// One reservation attempt as the shared step of the pipeline and the integrator API.
pub(super) struct ClaimRequest<'a> {
    pub(super) action: &'a Action,
    pub(super) action_hash: &'a str,
    pub(super) effect_key: Option<&'a str>,
    pub(super) presented: Option<&'a str>,
    /// Refuse when the presented approval cannot be consumed; otherwise it is spent if it can be.
    pub(super) approval_required: bool,
    pub(super) lease: Micros,
    pub(super) max_attempts: Option<u32>,
    /// Reserve and begin in one write (a permit) rather than leave the record RESERVED.
    pub(super) begin: bool,
    /// The precondition fingerprint taken now, compared with the presented approval's.
    pub(super) precondition: Option<&'a str>,
}

/// What a claim decided (built once per call, so the size gap between variants costs nothing);
/// its writes (an expired approval, a lapsed lease turned AMBIGUOUS,
/// the events) are already in the transaction either way.
#[allow(clippy::large_enum_variant)]
pub(super) enum Claimed {
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
pub(super) fn claim_in(tx: &mut WriteTx<'_>, request: &ClaimRequest<'_>, now: Micros) -> Result<Claimed> {
    let action = request.action;
    let mut approval = None;
    if let Some(id) = request.presented {
        // Only a required approval marks a lapsed one expired: an allow that was merely
        // handed one writes nothing about it.
        match presented_approval(
            tx,
            &action.action_id,
            id,
            request.action_hash,
            request.precondition,
            now,
            request.approval_required,
        )? {
            Ok(record) => approval = Some(record),
            Err(refusal) if request.approval_required => return Ok(Claimed::ApprovalRefused(refusal)),
            Err(_) => {}
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
        // A key with no row is new only once its absence is proven (`absence`).
        let current = super::absence::effect_to_reserve(tx, key)?;
        let refusal = match effect::plan_reservation(current.as_ref(), &claim, now).map_err(Error::InvalidInput)? {
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

/// Check an approval presented for `action_hash` inside `tx`: the record if it may be consumed
/// now, else the refusal. A lapsed approval is marked `expired` (and that write kept) when
/// `mark_expired`.
pub(super) fn presented_approval(
    tx: &mut WriteTx<'_>,
    action_id: &str,
    approval_id: &str,
    action_hash: &str,
    precondition: Option<&str>,
    now: Micros,
    mark_expired: bool,
) -> Result<std::result::Result<ApprovalRecord, Error>> {
    let record = tx.approval(approval_id)?;
    match approval::check_consumable(record.as_ref(), approval_id, action_hash, precondition, now) {
        Verdict::Proceed => match record {
            Some(record) => Ok(Ok(record)),
            None => Ok(Err(Error::NotFound(format!("no approval {approval_id}")))),
        },
        Verdict::Refuse(refusal) => Ok(Err(refusal)),
        Verdict::ExpireAndRefuse(refusal) => {
            if let (true, Some(record)) = (mark_expired, record) {
                mark_approval_expired(tx, record, action_id, now)?;
            }
            Ok(Err(refusal))
        }
    }
}

/// Keep the `expired` status of a lapsed approval, with its event.
pub(super) fn mark_approval_expired(
    tx: &mut WriteTx<'_>,
    mut record: ApprovalRecord,
    action_id: &str,
    now: Micros,
) -> Result<()> {
    record.status = ApprovalStatus::Expired;
    tx.put_approval(&record)?;
    tx.event(
        EventKind::APPROVAL_EXPIRED,
        now,
        Some(action_id),
        None,
        Some(&record.approval_id),
        serde_json::json!({}),
    )?;
    Ok(())
}
