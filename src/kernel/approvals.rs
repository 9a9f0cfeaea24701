//! Approval requests and answers.

use crate::action::Action;
use crate::approval::{self, ApprovalRecord, ApprovalStatus, Verdict};
use crate::clock::Micros;
use crate::error::{Error, Result};
use crate::store::EventKind;

use super::claim::mark_approval_expired;
use super::Kernel;

impl Kernel {
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
                        if let Some(record) = record {
                            let action_id = record.action_id.clone();
                            mark_approval_expired(tx, record, &action_id, now)?;
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
}
