//! Scoped grants in the kernel: the answer that grants a request and makes a scoped grant in one
//! write transaction (with its own receipt and event), the gate's spending of a grant that covers
//! a proposal (in the proposal's transaction), revocation (one write, receipt and event) and the
//! reads. What a grant may reach and what it covers are `approval::scope`'s pure checks; the
//! document's caps are read from the policy the store keeps under the request's policy hash.

use super::ops::{unexpected, Read, ReadReply, RevokeScopedOp, ScopedGrantDone, ScopedGrantOp, Write, WriteReply};
use super::propose::draft_for;
use super::Kernel;
use crate::action::{new_id, Action, IdKind, Principal};
use crate::approval::scope::{
    self, check_scope, GrantRevocation, GrantState, Scope, ScopeLimits, ScopedGrant, SCOPED_AGENT, SCOPED_GRANT_ACTION,
    SCOPED_REVOKE_ACTION,
};
use crate::approval::{self, ApprovalRecord, ApprovalStatus, Approver};
use crate::clock::Micros;
use crate::decision::{Decision, Ruling};
use crate::error::{Error, InvalidInputKind, Result, StoreFaultKind};
use crate::event::EventKind;
use crate::receipt::{ReceiptDraft, ReceiptResult};
use crate::store::WriteTx;

fn refused(error: Error) -> Result<WriteReply> {
    Ok(WriteReply::Refused(error))
}

/// The receipt of a grant or a revocation: the approver's (or revoker's) act, allowed, committed,
/// naming the grant.
fn draft(
    environment: &str,
    ids: (&str, &str),
    person: &str,
    action: &str,
    arguments: serde_json::Value,
    now: Micros,
) -> Result<ReceiptDraft> {
    let (action_id, receipt_id) = ids;
    let principal = Principal::new(SCOPED_AGENT, Some(person))?;
    let mut acted = Action::new(action, arguments, principal, None, environment)?;
    acted.action_id = action_id.to_owned();
    let action_hash = acted.hash()?;
    let mut draft = draft_for(receipt_id.to_owned(), &acted, &action_hash, &Ruling::new(Decision::Allow, action));
    (draft.result, draft.started_at, draft.finished_at) = (ReceiptResult::Committed, now, now);
    Ok(draft)
}

/// The request's arguments as a map (a request's stored arguments are canonical JSON text).
fn arguments_of(record: &ApprovalRecord) -> Option<serde_json::Map<String, serde_json::Value>> {
    let action = record.action.as_ref()?;
    match crate::canonical::parse_json(&action.arguments).ok()? {
        serde_json::Value::Object(map) => Some(map),
        _ => None,
    }
}

/// Grant the request and make the scoped grant, or refuse and change nothing the refusal does
/// not name (an answer to a lapsed request marks it expired, as any answer does).
pub(super) fn apply_grant(tx: &mut WriteTx<'_>, op: &ScopedGrantOp, now: Micros) -> Result<WriteReply> {
    let Some(record) = tx.approval(&op.approval_id)? else {
        return refused(Error::NotFound(format!("no approval {}", op.approval_id)));
    };
    if record.requirement.required != 1 {
        return refused(Error::invalid(
            InvalidInputKind::State,
            format!(
            "approval {} needs {} approvers; a scoped grant is made only by the one answer of a request that needs \
             one",
            op.approval_id, record.requirement.required
        ),
        ));
    }
    let Some(requested) = record.action.clone() else {
        return refused(Error::invalid(
            InvalidInputKind::State,
            format!(
            "approval {} keeps no action (a request from before schema 4), so no scoped grant can be anchored in it",
            op.approval_id
        ),
        ));
    };
    let Some(arguments) = arguments_of(&record) else {
        return Err(Error::store(
            StoreFaultKind::Damaged,
            format!("approval {} keeps arguments that are not a JSON object", op.approval_id),
        ));
    };
    let shape = match check_scope(&arguments, &op.scope, op.limits) {
        Ok(shape) => shape,
        Err(refusal) => return refused(refusal),
    };
    // The caps were read under the request's policy hash before this transaction: it must still
    // name that hash (it always does; a request's policy never changes).
    let Some(policy_hash) = requested.policy_hash.clone().filter(|hash| Some(hash) == op.policy_hash.as_ref()) else {
        return refused(Error::invalid(
            InvalidInputKind::State,
            format!(
                "approval {} was not asked under the policy whose caps were read; nothing was granted. Answer again",
                op.approval_id
            ),
        ));
    };
    if tx.scoped_grant(&op.grant_id)?.is_some() {
        return Err(Error::store(
            StoreFaultKind::Defect,
            format!("scoped grant id {} already exists; nothing was written", op.grant_id),
        ));
    }
    let answer = Write::Answer {
        approval_id: op.approval_id.clone(),
        approver: op.approver.clone(),
        note: None,
        grant: true,
        ttl: None,
        expect_hash: op.expect_hash.clone(),
    };
    let answered = match super::approvals::apply_answer(tx, &answer, now)? {
        WriteReply::Approval(answered) if answered.status == ApprovalStatus::Granted => answered,
        WriteReply::Refused(refusal) => return refused(refusal),
        // One approver is required, so a grant decides the request: anything else is a defect,
        // and the transaction is dropped.
        _ => return Err(unexpected("scoped grant answer")),
    };
    let label = op.approver.label();
    let grant = ScopedGrant {
        grant_id: op.grant_id.clone(),
        approval_id: op.approval_id.clone(),
        action_name: record.action_name.clone(),
        rule: requested.rule.clone(),
        policy_hash: policy_hash.clone(),
        requested_by: record.requested_by.clone(),
        requester_identity: requested.identity.clone(),
        approver: label.clone(),
        approver_verified: op.approver.verified.clone(),
        scope: op.scope.clone(),
        shape,
        uses_left: op.scope.uses,
        granted_at: now,
        expires_at: scope::expires_at(now, op.scope.minutes),
        revoked: None,
    };
    let data = serde_json::json!({
        "grant_id": grant.grant_id,
        "approval_id": grant.approval_id,
        "action": grant.action_name,
        "rule": grant.rule,
        "scope": grant.scope.to_json(),
        "expires_at": crate::clock::render(grant.expires_at),
    });
    // The approval and approver are named in its arguments and principal, not in `approval_id` and
    // `approver`: those say an approval was spent on this receipt's own action, which bundle
    // verifiers check against the approval's action hash.
    let mut receipt =
        draft(&op.environment, (&op.action_id, &op.receipt_id), &label, SCOPED_GRANT_ACTION, data.clone(), now)?;
    receipt.scoped_grant_id = Some(grant.grant_id.clone());
    receipt.policy_hash = Some(policy_hash);
    receipt.policy_version = requested.policy_version.clone();
    let (seq, _) = tx.append_receipt(&receipt, None)?;
    tx.put_scoped_grant(&grant, true)?;
    tx.event(EventKind::SCOPED_GRANT_MADE, now, Some(&record.action_id), None, Some(&op.approval_id), data)?;
    Ok(WriteReply::ScopedGrant(Box::new(ScopedGrantDone {
        approval: Some(answered),
        grant,
        receipt_seq: seq,
        receipt_id: op.receipt_id.clone(),
    })))
}

/// Revoke a grant that is not revoked yet (used up and expired ones too: the record then says
/// someone ended it), with its receipt and event.
pub(super) fn apply_revoke(tx: &mut WriteTx<'_>, op: &RevokeScopedOp, now: Micros) -> Result<WriteReply> {
    if let Err(error) =
        approval::check_person_name("--by", &op.by).and_then(|()| approval::check_person_name("--reason", &op.reason))
    {
        return refused(error);
    }
    let Some(mut grant) = tx.scoped_grant(&op.grant_id)? else {
        return refused(Error::NotFound(format!("no scoped grant {}", op.grant_id)));
    };
    if let Some(revoked) = &grant.revoked {
        return refused(Error::invalid(
            InvalidInputKind::State,
            format!(
                "scoped grant {} was revoked already, by {} at {}",
                op.grant_id,
                revoked.by,
                crate::clock::render(revoked.at)
            ),
        ));
    }
    let data = serde_json::json!({
        "grant_id": grant.grant_id,
        "approval_id": grant.approval_id,
        "uses_left": grant.uses_left,
        "reason": op.reason,
    });
    let mut receipt =
        draft(&op.environment, (&op.action_id, &op.receipt_id), &op.by, SCOPED_REVOKE_ACTION, data.clone(), now)?;
    receipt.scoped_grant_id = Some(grant.grant_id.clone());
    let (seq, _) = tx.append_receipt(&receipt, None)?;
    grant.revoked = Some(GrantRevocation { by: op.by.clone(), reason: op.reason.clone(), at: now });
    tx.put_scoped_grant(&grant, false)?;
    tx.event(EventKind::SCOPED_GRANT_REVOKED, now, Some(&op.action_id), None, Some(&grant.approval_id), data)?;
    Ok(WriteReply::ScopedGrant(Box::new(ScopedGrantDone {
        approval: None,
        grant,
        receipt_seq: seq,
        receipt_id: op.receipt_id.clone(),
    })))
}

/// The caps the kept canonical policy `policy` sets for scoped grants of `action_name` under
/// `rule` (`rule[N]`: that rule's `approval.scoped`; `decision`: the entry's).
pub fn limits_in_policy(policy: &serde_json::Value, action_name: &str, rule: &str) -> Option<ScopeLimits> {
    let entry = policy.get("actions")?.get(action_name)?;
    let approval = if rule == crate::policy::BARE_DECISION {
        entry.get("approval")?
    } else {
        let index: usize = rule.strip_prefix("rule[")?.strip_suffix(']')?.parse().ok()?;
        entry.get("rules")?.get(index)?.get("approval")?
    };
    ScopeLimits::from_json(approval.get("scoped")?)
}

impl Kernel {
    /// Grant `approval_id` as `approver` and make a scoped grant of `scope` in the same write:
    /// the next `scope.uses` proposals of the same action, by the same requester, decided
    /// `approve` by the same rule under the same policy hash, whose arguments have the scope's
    /// shape, proceed without asking, until `scope.minutes` pass. The document's caps
    /// (`approval.scoped` on the rule that asked) are read from the policy the store keeps under
    /// the request's hash; past them, or with no caps, it is refused and nothing changes.
    /// `expect_hash` refuses unless the request binds that action hash.
    pub fn answer_scoped(
        &self,
        approval_id: &str,
        approver: &Approver,
        scope: &Scope,
        expect_hash: Option<&str>,
    ) -> Result<ScopedGrantDone> {
        approval::person::check_principal(&approver.principal)?;
        let record =
            self.approval(approval_id)?.ok_or_else(|| Error::NotFound(format!("no approval {approval_id}")))?;
        let policy_hash = record.action.as_ref().and_then(|action| action.policy_hash.clone());
        let rule = record.action.as_ref().map(|action| action.rule.clone()).unwrap_or_default();
        let limits = match &policy_hash {
            None => None,
            Some(hash) => match self.policy(hash)? {
                None => None,
                Some(bytes) => {
                    let policy = crate::canonical::parse_json(std::str::from_utf8(&bytes).unwrap_or_default())
                        .map_err(|e| {
                            Error::store(
                                StoreFaultKind::Damaged,
                                format!("the policy kept under {hash} is not JSON: {e}"),
                            )
                        })?;
                    limits_in_policy(&policy, &record.action_name, &rule)
                }
            },
        };
        let ids =
            |kind| new_id(kind).map_err(|e| Error::store(StoreFaultKind::Io, format!("no randomness for an id: {e}")));
        let op = ScopedGrantOp {
            approval_id: approval_id.to_owned(),
            approver: approver.clone(),
            scope: scope.clone(),
            expect_hash: expect_hash.map(str::to_owned),
            policy_hash,
            limits,
            grant_id: ids(IdKind::ScopedGrant)?,
            environment: self.environment().to_owned(),
            action_id: ids(IdKind::Action)?,
            receipt_id: ids(IdKind::Receipt)?,
        };
        self.scoped_write(Write::ScopedGrant(Box::new(op)))
    }

    /// Revoke the scoped grant `grant_id`: no later proposal is covered by it. One write with its
    /// receipt and event; a grant revoked already is refused.
    pub fn revoke_scoped_grant(&self, grant_id: &str, by: &str, reason: &str) -> Result<ScopedGrantDone> {
        if !crate::action::is_id(IdKind::ScopedGrant, grant_id) {
            return Err(Error::invalid_at(
                InvalidInputKind::Malformed,
                "grant_id",
                "a scoped grant id is sgr_ followed by 32 lowercase hex digits",
            ));
        }
        let ids =
            |kind| new_id(kind).map_err(|e| Error::store(StoreFaultKind::Io, format!("no randomness for an id: {e}")));
        let op = RevokeScopedOp {
            grant_id: grant_id.to_owned(),
            by: by.to_owned(),
            reason: reason.to_owned(),
            environment: self.environment().to_owned(),
            action_id: ids(IdKind::Action)?,
            receipt_id: ids(IdKind::Receipt)?,
        };
        self.scoped_write(Write::RevokeScopedGrant(Box::new(op)))
    }

    fn scoped_write(&self, op: Write) -> Result<ScopedGrantDone> {
        match self.guarded(|kernel, _| kernel.write(op))? {
            WriteReply::ScopedGrant(done) => Ok(*done),
            WriteReply::Refused(error) => Err(error),
            _ => Err(unexpected("scoped grant")),
        }
    }

    /// Every scoped grant (live or not), by id; with `live_only`, those that may still be spent
    /// by this kernel's clock.
    pub fn scoped_grants(&self, live_only: bool) -> Result<Vec<ScopedGrant>> {
        let ReadReply::ScopedGrants(grants) = self.guarded(|kernel, _| kernel.read(&Read::ScopedGrants))? else {
            return Err(unexpected("scoped grants"));
        };
        let now = self.now();
        Ok(grants.into_iter().filter(|grant| !live_only || grant.state(now) == GrantState::Live).collect())
    }

    /// The scoped grant `grant_id`, or `None`.
    pub fn scoped_grant(&self, grant_id: &str) -> Result<Option<ScopedGrant>> {
        match self.guarded(|kernel, _| kernel.read(&Read::ScopedGrant { grant_id: grant_id.to_owned() }))? {
            ReadReply::ScopedGrants(mut grants) => Ok(grants.pop()),
            _ => Err(unexpected("scoped grant")),
        }
    }
}
