//! Approval requests and answers.

use crate::action::{new_id, Action, IdKind};
use crate::approval::{self, ApprovalRecord, ApprovalStatus, Verdict, DEFAULT_APPROVAL_TTL};
use crate::clock::Micros;
use crate::error::{Error, Result};
use crate::event::EventKind;
use crate::store::WriteTx;

use super::claim::mark_approval_expired;
use super::ops::{unexpected, Read, ReadReply, Write, WriteReply};
use super::Kernel;

fn approval_reply(reply: WriteReply) -> Result<ApprovalRecord> {
    match reply {
        WriteReply::Approval(record) => Ok(record),
        WriteReply::Refused(refusal) => Err(refusal),
        _ => Err(unexpected("approval")),
    }
}

impl Kernel {
    /// Create a pending approval request for `action` directly (the pipeline does this itself
    /// on an `approve` decision).
    pub fn request_approval(&self, action: &Action, ttl: Option<Micros>) -> Result<ApprovalRecord> {
        let action_hash = action.hash().map_err(|e| Error::InvalidInput(e.to_string()))?;
        let ttl = ttl.unwrap_or(DEFAULT_APPROVAL_TTL);
        if ttl <= 0 {
            return Err(Error::InvalidInput("an approval TTL must be positive".into()));
        }
        let approval_id =
            new_id(IdKind::Approval).map_err(|e| Error::Store(format!("no randomness for an id: {e}")))?;
        let op = Write::RequestApproval { action: action.clone(), action_hash, approval_id, ttl };
        self.guarded(|kernel, _| approval_reply(kernel.write(op)?))
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
        let op = Write::Answer {
            approval_id: approval_id.to_owned(),
            approver: approver.to_owned(),
            note: note.map(str::to_owned),
            grant,
            ttl,
        };
        self.guarded(|kernel, _| approval_reply(kernel.write(op)?))
    }

    pub fn approval(&self, approval_id: &str) -> Result<Option<ApprovalRecord>> {
        match self.guarded(|kernel, _| kernel.read(&Read::Approval { approval_id: approval_id.to_owned() }))? {
            ReadReply::Approval(record) => Ok(record),
            _ => Err(unexpected("approval")),
        }
    }

    pub fn pending_approvals(&self) -> Result<Vec<ApprovalRecord>> {
        match self.guarded(|kernel, _| kernel.read(&Read::Pending))? {
            ReadReply::Approvals(records) => Ok(records),
            _ => Err(unexpected("pending approvals")),
        }
    }
}

/// A pending request for `action`, bound to its hash, answerable until `now + ttl`.
pub(super) fn new_request(
    action: &Action,
    action_hash: &str,
    approval_id: &str,
    ttl: Micros,
    now: Micros,
) -> ApprovalRecord {
    ApprovalRecord {
        approval_id: approval_id.to_owned(),
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
    }
}

/// The request row and its event.
pub(super) fn write_request(
    tx: &mut WriteTx<'_>,
    record: &ApprovalRecord,
    action_hash: &str,
    now: Micros,
) -> Result<()> {
    if tx.approval(&record.approval_id)?.is_some() {
        return Err(Error::Store(format!(
            "approval id {} already exists; nothing was written (the random source repeated itself)",
            record.approval_id
        )));
    }
    tx.put_approval(record)?;
    tx.event(
        EventKind::APPROVAL_REQUESTED,
        now,
        Some(&record.action_id),
        None,
        Some(&record.approval_id),
        serde_json::json!({"action_hash": action_hash, "expires_at": crate::clock::render(record.expires_at)}),
    )?;
    Ok(())
}

pub(super) fn apply_request(
    tx: &mut WriteTx<'_>,
    action: &Action,
    action_hash: &str,
    approval_id: &str,
    ttl: Micros,
    now: Micros,
) -> Result<WriteReply> {
    let record = new_request(action, action_hash, approval_id, ttl, now);
    write_request(tx, &record, action_hash, now)?;
    Ok(WriteReply::Approval(record))
}

pub(super) fn apply_answer(
    tx: &mut WriteTx<'_>,
    approval_id: &str,
    approver: &str,
    note: Option<&str>,
    grant: bool,
    ttl: Option<Micros>,
    now: Micros,
) -> Result<WriteReply> {
    let record = tx.approval(approval_id)?;
    match approval::check_answerable(record.as_ref(), approval_id, approver, now) {
        Verdict::Proceed => {}
        Verdict::Refuse(refusal) => return Ok(WriteReply::Refused(refusal)),
        Verdict::ExpireAndRefuse(refusal) => {
            if let Some(record) = record {
                let action_id = record.action_id.clone();
                mark_approval_expired(tx, record, &action_id, now)?;
            }
            return Ok(WriteReply::Refused(refusal));
        }
    }
    let Some(mut record) = record else {
        return Ok(WriteReply::Refused(Error::NotFound(format!("no approval {approval_id}"))));
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
    Ok(WriteReply::Approval(record))
}
