//! Approval requests, answers (M-of-N, compare-and-set in the answer's own transaction),
//! waiting for an answer by the kernel's clock, and the listener told of each new request.

use std::sync::Arc;
use std::time::Duration;

use crate::action::{new_id, Action, IdKind};
use crate::approval::{
    self, ApprovalAsk, ApprovalRecord, ApprovalStatus, Approver, RequestedAction, Verdict, Vote, DEFAULT_APPROVAL_TTL,
};
use crate::clock::Micros;
use crate::error::{Error, InvalidInputKind, Result, StoreFaultKind};
use crate::event::EventKind;
use crate::store::WriteTx;

use super::claim::mark_approval_expired;
use super::ops::{unexpected, Read, ReadReply, Write, WriteReply};
use super::{ApprovalListener, Kernel, WeakKernel};

pub use crate::limits::MAX_WAIT;
/// How often a wait reads the request again, at most, unless told otherwise (it starts faster
/// and backs off).
pub const WAIT_POLL_MAX: Duration = Duration::from_millis(200);

/// How long [`Kernel::wait_until_answered`] waits for a human, and how it checks.
#[derive(Clone, Copy)]
pub struct AnswerWait<'a> {
    /// The longest wait, judged by the kernel's clock (microseconds; any length).
    pub timeout: Micros,
    /// The longest pause between two reads of the request; zero: [`WAIT_POLL_MAX`].
    pub poll: Duration,
    /// Asked before each pause: `false` ends the wait at once (the caller left, the host is
    /// stopping). `None`: wait on.
    pub keep_waiting: Option<&'a dyn Fn() -> bool>,
}

impl AnswerWait<'_> {
    /// A wait of at most `timeout` with the default poll and nothing that stops it early.
    pub fn for_at_most(timeout: Micros) -> AnswerWait<'static> {
        AnswerWait { timeout, poll: WAIT_POLL_MAX, keep_waiting: None }
    }
}

impl std::fmt::Debug for AnswerWait<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnswerWait")
            .field("timeout", &self.timeout)
            .field("poll", &self.poll)
            .field("keep_waiting", &self.keep_waiting.is_some())
            .finish()
    }
}

fn approval_reply(reply: WriteReply) -> Result<ApprovalRecord> {
    match reply {
        WriteReply::Approval(record) => Ok(record),
        WriteReply::Refused(refusal) => Err(refusal),
        _ => Err(unexpected("approval")),
    }
}

impl crate::approval::notify::Recorder for WeakKernel {
    fn record(&self, approval_id: &str, kind: EventKind, data: serde_json::Value) {
        if let Some(kernel) = self.upgrade() {
            // Best effort by design: a notification never fails anything, its record included.
            let _ = kernel.record_notification(approval_id, kind, data);
        }
    }
}

impl Kernel {
    /// Create a pending approval request for `action` directly (the pipeline does this itself
    /// on an `approve` decision). One approver, any role, no precondition; the rule reads
    /// `requested directly`.
    pub fn request_approval(&self, action: &Action, ttl: Option<Micros>) -> Result<ApprovalRecord> {
        let action_hash = action.hash()?;
        let ttl = ttl.unwrap_or(DEFAULT_APPROVAL_TTL);
        if ttl <= 0 {
            return Err(Error::invalid_at(InvalidInputKind::OutOfRange, "ttl", "an approval TTL must be positive"));
        }
        let approval_id = new_id(IdKind::Approval)
            .map_err(|e| Error::store(StoreFaultKind::Io, format!("no randomness for an id: {e}")))?;
        let op = Write::RequestApproval {
            action: action.clone(),
            action_hash,
            approval_id,
            ttl,
            ask: ApprovalAsk::default(),
            policy_hash: self.inner.policy_hash.clone(),
            policy_version: self.inner.policy_version.clone(),
        };
        let record = self.guarded(|kernel, _| approval_reply(kernel.write(op)?))?;
        self.approval_requested(&record);
        Ok(record)
    }

    /// Grant as an asserted approver named by one plain line (`ada`, `cli:ada`; see `asserted`).
    pub fn grant(&self, approval_id: &str, approver: &str) -> Result<ApprovalRecord> {
        self.answer(approval_id, &asserted(approver)?, None, true, None, None)
    }

    /// Grant, and let the approval be used for `ttl` from now instead of until the request's
    /// own expiry (an approver may shorten or lengthen the window they are vouching for).
    pub fn grant_for(&self, approval_id: &str, approver: &str, ttl: Micros) -> Result<ApprovalRecord> {
        self.answer(approval_id, &asserted(approver)?, None, true, Some(ttl), None)
    }

    /// Deny as an asserted approver named by one plain line, with an optional note.
    pub fn deny(&self, approval_id: &str, approver: &str, note: Option<&str>) -> Result<ApprovalRecord> {
        self.answer(approval_id, &asserted(approver)?, note, false, None, None)
    }

    /// One approver's answer. A grant counts toward the request's requirement and grants it
    /// when the count is reached; a deny by an entitled approver denies it. `ttl` (grants only)
    /// makes the approval usable for that long from the moment it is granted. `expect_hash`
    /// refuses unless the request binds that action hash (the action the approver was shown).
    pub fn answer(
        &self,
        approval_id: &str,
        approver: &Approver,
        note: Option<&str>,
        grant: bool,
        ttl: Option<Micros>,
        expect_hash: Option<&str>,
    ) -> Result<ApprovalRecord> {
        approval::person::check_principal(&approver.principal)?;
        if let Some(note) = note {
            approval::check_person_name("the note", note)?;
        }
        if ttl.is_some_and(|ttl| ttl <= 0) {
            return Err(Error::invalid_at(InvalidInputKind::OutOfRange, "ttl", "an approval TTL must be positive"));
        }
        let op = Write::Answer {
            approval_id: approval_id.to_owned(),
            approver: approver.clone(),
            note: note.map(str::to_owned),
            grant,
            ttl,
            expect_hash: expect_hash.map(str::to_owned),
        };
        self.guarded(|kernel, _| approval_reply(kernel.write(op)?))
    }

    /// The approval request `approval_id` as stored, or `None` when there is no such request.
    pub fn approval(&self, approval_id: &str) -> Result<Option<ApprovalRecord>> {
        match self.guarded(|kernel, _| kernel.read(&Read::Approval { approval_id: approval_id.to_owned() }))? {
            ReadReply::Approval(record) => Ok(record),
            _ => Err(unexpected("approval")),
        }
    }

    /// The requests still pending and unexpired by this kernel's clock, oldest first.
    pub fn pending_approvals(&self) -> Result<Vec<ApprovalRecord>> {
        match self.guarded(|kernel, _| kernel.read(&Read::Pending))? {
            ReadReply::Approvals(records) => Ok(records),
            _ => Err(unexpected("pending approvals")),
        }
    }

    /// Wait until the request is answered (granted, denied, consumed), expires, or `timeout`
    /// passes — every instant judged by this kernel's clock, not the caller's. Returns the
    /// record as it then stands (a lapsed pending request reads `expired`; one still `pending`
    /// means the wait ran out), or `None` when there is no such request. At most [`MAX_WAIT`]:
    /// a longer wait is [`Kernel::wait_until_answered`]'s.
    pub fn wait_for_answer(&self, approval_id: &str, timeout: Micros) -> Result<Option<ApprovalRecord>> {
        if !(0..=MAX_WAIT).contains(&timeout) {
            return Err(Error::invalid_at(
                InvalidInputKind::OutOfRange,
                "timeout",
                format!("a wait must be 0..={} ms, got {} ms", MAX_WAIT / 1000, timeout / 1000),
            ));
        }
        self.wait_until_answered(approval_id, &AnswerWait::for_at_most(timeout))
    }

    /// The one wait loop: read the request, and while it is pending, unexpired, before
    /// `wait.timeout` has passed by this kernel's clock and `wait.keep_waiting` still says so,
    /// pause (starting at 2 ms, doubling up to `wait.poll`) and read it again. Any timeout is
    /// accepted (a request's own expiry ends the wait first); the record as it then stands, or
    /// `None` when there is no such request.
    pub fn wait_until_answered(&self, approval_id: &str, wait: &AnswerWait<'_>) -> Result<Option<ApprovalRecord>> {
        let deadline = self.now().saturating_add(wait.timeout.max(0));
        let poll = if wait.poll.is_zero() { WAIT_POLL_MAX } else { wait.poll };
        let mut pause = Duration::from_millis(2).min(poll);
        loop {
            let Some(mut record) = self.approval(approval_id)? else { return Ok(None) };
            let now = self.now();
            if record.status == ApprovalStatus::Pending && now > record.expires_at {
                record.status = ApprovalStatus::Expired;
            }
            let wanted = wait.keep_waiting.is_none_or(|keep_waiting| keep_waiting());
            if record.status != ApprovalStatus::Pending || now >= deadline || !wanted {
                return Ok(Some(record));
            }
            let left = Duration::from_micros(u64::try_from(deadline - now).unwrap_or(0));
            std::thread::sleep(pause.min(left).max(Duration::from_millis(1)));
            pause = (pause * 2).min(poll);
        }
    }

    /// Tell `listener` of every approval request this handle creates from now on (`None`
    /// stops). It runs on the proposing thread and must return at once (the notifier queues).
    pub fn set_approval_listener(&self, listener: Option<ApprovalListener>) {
        if let Ok(mut slot) = self.inner.approval_listener.write() {
            *slot = listener;
        }
    }

    /// A handle that does not keep the store open.
    pub fn downgrade(&self) -> WeakKernel {
        WeakKernel(Arc::downgrade(&self.inner))
    }

    pub(super) fn approval_requested(&self, record: &ApprovalRecord) {
        let listener = self.inner.approval_listener.read().ok().and_then(|slot| slot.clone());
        if let Some(listener) = listener {
            // A listener must never fail the action that created the request.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| listener(record)));
        }
    }

    /// Record what became of one notification, as an event on the request.
    pub fn record_notification(&self, approval_id: &str, kind: EventKind, data: serde_json::Value) -> Result<()> {
        let op = Write::NotifyEvent { approval_id: approval_id.to_owned(), kind, data };
        self.guarded(|kernel, _| match kernel.write(op)? {
            WriteReply::Done => Ok(()),
            WriteReply::Refused(refusal) => Err(refusal),
            _ => Err(unexpected("notification event")),
        })
    }
}

/// A name typed by a person (`ada`, `cli:ada`, `slack/ada`), as an asserted approver: parsed by
/// `approval::person::parse_name`, the agent `cli` when the name gives none.
pub fn asserted(name: &str) -> Result<Approver> {
    Ok(Approver::asserted(approval::person::parse_name("the approver name", name, "cli")?))
}

/// A pending request for `action`, bound to its hash, answerable until `now + ttl`, keeping
/// the whole action and why it was asked.
#[allow(clippy::too_many_arguments)]
pub(super) fn new_request(
    action: &Action,
    action_hash: &str,
    approval_id: &str,
    ttl: Micros,
    ask: &ApprovalAsk,
    rule: &str,
    policy: (Option<String>, Option<String>),
    precondition: Option<String>,
    now: Micros,
) -> Result<ApprovalRecord> {
    let arguments = action.arguments_text()?;
    Ok(ApprovalRecord {
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
        action: Some(RequestedAction {
            arguments,
            resource: action.resource.clone(),
            environment: action.environment.clone(),
            identity: ask.identity.clone(),
            rule: rule.to_owned(),
            when: ask.when.clone(),
            policy_hash: policy.0,
            policy_version: policy.1,
        }),
        requirement: ask.requirement.clone(),
        votes: Vec::new(),
        precondition,
    })
}

/// The request row, its index entry and its event. The stored action is checked against the
/// hash before it is written, so a request can never be created unable to pass its own read.
pub(super) fn write_request(tx: &mut WriteTx<'_>, record: &ApprovalRecord, now: Micros) -> Result<()> {
    if tx.approval(&record.approval_id)?.is_some() {
        return Err(Error::store(
            StoreFaultKind::Defect,
            format!(
                "approval id {} already exists; nothing was written (the random source repeated itself)",
                record.approval_id
            ),
        ));
    }
    record
        .check_binding()
        .map_err(|problem| Error::invalid(InvalidInputKind::Conflict, format!("the approval request {problem}")))?;
    tx.put_approval(record)?;
    tx.index_approval(&record.action_hash, &record.approval_id)?;
    tx.event(
        EventKind::APPROVAL_REQUESTED,
        now,
        Some(&record.action_id),
        None,
        Some(&record.approval_id),
        serde_json::json!({
            "action_hash": record.action_hash,
            "expires_at": crate::clock::render(record.expires_at),
            "required": record.requirement.required,
            "roles": record.requirement.roles,
            "precondition": record.precondition,
        }),
    )?;
    Ok(())
}

pub(super) fn apply_request(tx: &mut WriteTx<'_>, op: &Write, now: Micros) -> Result<WriteReply> {
    let Write::RequestApproval { action, action_hash, approval_id, ttl, ask, policy_hash, policy_version } = op else {
        return Err(unexpected("approval request"));
    };
    let policy = (policy_hash.clone(), policy_version.clone());
    let record = new_request(action, action_hash, approval_id, *ttl, ask, "requested directly", policy, None, now)?;
    write_request(tx, &record, now)?;
    Ok(WriteReply::Approval(record))
}

pub(super) fn apply_answer(tx: &mut WriteTx<'_>, op: &Write, now: Micros) -> Result<WriteReply> {
    let Write::Answer { approval_id, approver, note, grant, ttl, expect_hash } = op else {
        return Err(unexpected("approval answer"));
    };
    let record = tx.approval(approval_id)?;
    if let (Some(expected), Some(found)) = (expect_hash, &record) {
        if &found.action_hash != expected {
            return Ok(WriteReply::Refused(Error::ApprovalMismatch {
                reason: "mismatch".into(),
                approval_id: approval_id.clone(),
                detail: format!("it binds {}, not the action shown ({expected})", found.action_hash),
            }));
        }
    }
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
    record.votes.push(Vote {
        approver: approver.principal.clone(),
        verified: approver.verified.clone(),
        grant: *grant,
        at: now,
        note: note.clone(),
    });
    let grants = record.grants();
    let required = usize::try_from(record.requirement.required).unwrap_or(usize::MAX);
    let decided = !grant || grants >= required;
    if decided {
        record.status = if *grant { ApprovalStatus::Granted } else { ApprovalStatus::Denied };
        record.approver = Some(approver.label());
        record.answered_at = Some(now);
        record.note = note.clone();
        if let (true, Some(ttl)) = (*grant, ttl) {
            record.expires_at = now.saturating_add(*ttl);
        }
    }
    tx.put_approval(&record)?;
    let kind = match (decided, grant) {
        (true, true) => EventKind::APPROVAL_GRANTED,
        (true, false) => EventKind::APPROVAL_DENIED,
        (false, _) => EventKind::APPROVAL_VOTED,
    };
    tx.event(
        kind,
        now,
        Some(&record.action_id),
        None,
        Some(approval_id),
        serde_json::json!({
            "approver": approver.label(),
            "verified": approver.verified.is_some(),
            "issuer": approver.verified.as_ref().and_then(|v| v.issuer.clone()),
            "note": note,
            "grants": grants,
            "required": record.requirement.required,
        }),
    )?;
    Ok(WriteReply::Approval(record))
}

pub(super) fn apply_notify_event(
    tx: &mut WriteTx<'_>,
    approval_id: &str,
    kind: EventKind,
    data: &serde_json::Value,
    now: Micros,
) -> Result<WriteReply> {
    if !matches!(kind, EventKind::APPROVAL_NOTIFIED | EventKind::APPROVAL_NOTIFY_FAILED) {
        return Err(Error::invalid(
            InvalidInputKind::Unknown,
            format!("{} is not a notification event", kind.as_str()),
        ));
    }
    let action_id = tx.approval(approval_id)?.map(|record| record.action_id);
    tx.event(kind, now, action_id.as_deref(), None, Some(approval_id), data.clone())?;
    Ok(WriteReply::Done)
}
