//! Approvals: request, grant, deny, get, pending, answer, wait; scoped grants (grant, list,
//! revoke). Records cross as `ApprovalRecord::to_json` and `ScopedGrant::to_json`.

use serde_json::Value;

use crate::action::Action;
use crate::approval::scope::Scope;
use crate::approval::{check_person_name, ApprovalRecord};
use crate::error::{Error, InvalidInput, InvalidInputKind};
use crate::pipeline::ActionRequest;

use super::bytes::{optional_str, required_json, required_str, warden_buf, Out};
use super::handle::{warden_handle, with_handle};
use super::request::Fields;
use super::result::warden_result;

const REQUEST_FIELDS: [&str; 5] = ["name", "arguments", "principal", "resource", "ttl_ms"];

/// The action an approval request names, in the handle's environment; the document's
/// `resource` template, when it has one for the action, decides the resource as `propose` does.
fn requested_action(handle: &warden_handle, fields: &Fields<'_>) -> Result<Action, Error> {
    let name = fields.required_string("name")?;
    let mut request = ActionRequest::new(name, fields.arguments()?, fields.required_principal()?);
    request.resource = fields.string("resource")?.map(str::to_owned);
    let document = handle.warden().ok().map(crate::pipeline::Warden::document);
    crate::pipeline::action_for(document, &request, handle.environment())
}

/// Creates a pending approval request for one exact action directly (`warden_propose` does
/// this itself when the policy says `approve`).
///
/// - `h`: an open handle. Required.
/// - `request`, `len`: UTF-8 JSON `{"name": str, "arguments": {...}, "principal":
///   {"agent", "user"}, "resource": str|null, "ttl_ms": int|null}`. Required. The action is
///   in the handle's environment; `ttl_ms` (default 15 minutes) is how long it stays answerable.
/// - `out`: NULL, or receives the new record on WARDEN_RESULT_OK only (its `approval_id` is
///   what a human grants); free it with `warden_buf_free`.
/// - `err`: NULL, or receives the error object on failure.
///
/// Returns WARDEN_RESULT_OK; WARDEN_RESULT_INVALID_INPUT; WARDEN_RESULT_STORE;
/// WARDEN_RESULT_PANIC; WARDEN_RESULT_POISONED.
///
/// Thread safety: safe to call concurrently on one handle.
///
/// # Safety
/// `h` is NULL or a live handle; byte pointers follow the conventions at the top of this
/// header; `out` and `err` are NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn warden_approval_request(
    h: *mut warden_handle,
    request: *const u8,
    len: usize,
    out: *mut warden_buf,
    err: *mut warden_buf,
) -> warden_result {
    let work = |handle: &warden_handle| -> Result<(), Error> {
        let out = Out::optional(out);
        // SAFETY: the caller's guarantee for (request, len).
        let value = unsafe { required_json(request, len, "request") }?;
        let fields = Fields::new(&value, "request", &REQUEST_FIELDS)?;
        let action = requested_action(handle, &fields)?;
        let record = handle.kernel.request_approval(&action, fields.millis("ttl_ms")?)?;
        // SAFETY: `out` is NULL or writable (the caller's guarantee).
        unsafe { out.write_json(&record.to_json()) };
        Ok(())
    };
    // SAFETY: the caller's guarantees for `h` and `err`, forwarded.
    unsafe { with_handle(h, err, work) }
}

/// Grants a pending approval request as an *asserted* approver (a name nobody verified). A
/// grant is bound to the exact action hash the request named and spent once. For a verified
/// approver, or an M-of-N request, use `warden_approval_answer`.
///
/// - `h`: an open handle. Required.
/// - `id`, `id_len`: the approval id (`apr_…`). Required.
/// - `by`, `by_len`: the approver, one plain line: `USER` (agent `cli`), `AGENT:USER`,
///   `AGENT/USER`, or `AGENT:` (the agent alone). INVALID_INPUT, naming it, when it has more
///   than one separator, nothing before one, an invisible character, or a separator look-alike
///   (a fullwidth `：`). Refused (`approver_is_requester`) when any of its parts is a part of the
///   requester's agent or user, compared after Unicode NFKC case folding and the TR39
///   confusables skeleton. Required.
/// - `ttl_ms`: 0 keeps the request's own expiry; otherwise the grant is usable for `ttl_ms`
///   milliseconds from now. Negative is INVALID_INPUT.
/// - `out`: NULL, or receives the updated record on WARDEN_RESULT_OK only; free it with
///   `warden_buf_free`.
/// - `err`: NULL, or receives the error object on failure.
///
/// Returns WARDEN_RESULT_OK; WARDEN_RESULT_APPROVAL_MISMATCH (unknown, already answered,
/// expired, the approver is the requester, or the request needs verified approvers or roles);
/// WARDEN_RESULT_NOT_FOUND;
/// WARDEN_RESULT_INVALID_INPUT; WARDEN_RESULT_STORE; WARDEN_RESULT_PANIC; WARDEN_RESULT_POISONED.
///
/// Thread safety: safe to call concurrently on one handle.
///
/// # Safety
/// `h` is NULL or a live handle; byte pointers follow the conventions at the top of this
/// header; `out` and `err` are NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn warden_approval_grant(
    h: *mut warden_handle,
    id: *const u8,
    id_len: usize,
    by: *const u8,
    by_len: usize,
    ttl_ms: i64,
    out: *mut warden_buf,
    err: *mut warden_buf,
) -> warden_result {
    let work = |handle: &warden_handle| -> Result<(), Error> {
        let out = Out::optional(out);
        // SAFETY: the caller's guarantee for each (ptr, len) pair.
        let (id, by) = unsafe { (required_str(id, id_len, "id")?, required_str(by, by_len, "by")?) };
        let record = match ttl_ms {
            0 => handle.kernel.grant(id, by)?,
            ms => {
                let ttl = ms.checked_mul(1000).filter(|ttl| *ttl > 0).ok_or_else(|| {
                    Error::invalid_at(
                        InvalidInputKind::OutOfRange,
                        "ttl_ms",
                        "ttl_ms must be 0 (no change) or positive",
                    )
                })?;
                handle.kernel.grant_for(id, by, ttl)?
            }
        };
        // SAFETY: `out` is NULL or writable (the caller's guarantee).
        unsafe { out.write_json(&record.to_json()) };
        Ok(())
    };
    // SAFETY: the caller's guarantees for `h` and `err`, forwarded.
    unsafe { with_handle(h, err, work) }
}

/// Denies a pending approval request as an asserted approver; a proposal presenting it is then
/// DENIED, and the same action is not asked again until the request expires.
///
/// - `h`: an open handle. Required.
/// - `id`, `id_len`: the approval id. Required.
/// - `by`, `by_len`: the approver, as for `warden_approval_grant`; refused when it names the
///   requester. Required.
/// - `reason`, `reason_len`: a note kept on the record, one plain line. Optional (NULL, 0).
/// - `out`: NULL, or receives the updated record on WARDEN_RESULT_OK only; free it with
///   `warden_buf_free`.
/// - `err`: NULL, or receives the error object on failure.
///
/// Returns WARDEN_RESULT_OK; WARDEN_RESULT_APPROVAL_MISMATCH; WARDEN_RESULT_NOT_FOUND;
/// WARDEN_RESULT_INVALID_INPUT; WARDEN_RESULT_STORE; WARDEN_RESULT_PANIC; WARDEN_RESULT_POISONED.
///
/// Thread safety: safe to call concurrently on one handle.
///
/// # Safety
/// `h` is NULL or a live handle; byte pointers follow the conventions at the top of this
/// header; `out` and `err` are NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn warden_approval_deny(
    h: *mut warden_handle,
    id: *const u8,
    id_len: usize,
    by: *const u8,
    by_len: usize,
    reason: *const u8,
    reason_len: usize,
    out: *mut warden_buf,
    err: *mut warden_buf,
) -> warden_result {
    let work = |handle: &warden_handle| -> Result<(), Error> {
        let out = Out::optional(out);
        // SAFETY: the caller's guarantee for each (ptr, len) pair.
        let (id, by, reason) = unsafe {
            (
                required_str(id, id_len, "id")?,
                required_str(by, by_len, "by")?,
                optional_str(reason, reason_len, "reason")?,
            )
        };
        let record = handle.kernel.deny(id, by, reason)?;
        // SAFETY: `out` is NULL or writable (the caller's guarantee).
        unsafe { out.write_json(&record.to_json()) };
        Ok(())
    };
    // SAFETY: the caller's guarantees for `h` and `err`, forwarded.
    unsafe { with_handle(h, err, work) }
}

/// Reads one approval record: the record, or JSON `null` when there is none. The record carries
/// the whole action it binds (`arguments`, `resource`, `environment`, `requested_by`,
/// `requester_identity`, `rule`, `when`, `policy_hash`), the requirement (`required`, `roles`),
/// the `votes` so far and the `precondition` fingerprint; a row whose stored action does not hash
/// to its `action_hash` is WARDEN_RESULT_STORE, never returned.
///
/// - `h`: an open handle. Required.
/// - `id`, `id_len`: the approval id. Required.
/// - `out`: receives the JSON on WARDEN_RESULT_OK only. Required. Free it with
///   `warden_buf_free`.
/// - `err`: NULL, or receives the error object on failure.
///
/// Returns WARDEN_RESULT_OK; WARDEN_RESULT_INVALID_INPUT; WARDEN_RESULT_STORE;
/// WARDEN_RESULT_PANIC; WARDEN_RESULT_POISONED.
///
/// Thread safety: safe to call concurrently on one handle.
///
/// # Safety
/// `h` is NULL or a live handle; byte pointers follow the conventions at the top of this
/// header; `out` and `err` are NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn warden_approval_get(
    h: *mut warden_handle,
    id: *const u8,
    id_len: usize,
    out: *mut warden_buf,
    err: *mut warden_buf,
) -> warden_result {
    let work = |handle: &warden_handle| -> Result<(), Error> {
        let out = Out::required(out, "out")?;
        // SAFETY: the caller's guarantee for (id, id_len).
        let id = unsafe { required_str(id, id_len, "id") }?;
        let record = handle.kernel.approval(id)?;
        // SAFETY: `out` was checked non-NULL and the caller guarantees it is writable.
        unsafe { out.write_json(&record.as_ref().map_or(Value::Null, ApprovalRecord::to_json)) };
        Ok(())
    };
    // SAFETY: the caller's guarantees for `h` and `err`, forwarded.
    unsafe { with_handle(h, err, work) }
}

/// Lists the approval requests still waiting for an answer, oldest first, as a JSON array of
/// records.
///
/// - `h`: an open handle. Required.
/// - `out`: receives the JSON on WARDEN_RESULT_OK only. Required. Free it with
///   `warden_buf_free`.
/// - `err`: NULL, or receives the error object on failure.
///
/// Returns WARDEN_RESULT_OK; WARDEN_RESULT_INVALID_INPUT; WARDEN_RESULT_STORE;
/// WARDEN_RESULT_PANIC; WARDEN_RESULT_POISONED.
///
/// Thread safety: safe to call concurrently on one handle.
///
/// # Safety
/// `h` is NULL or a live handle; `out` and `err` are NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn warden_approvals_pending(
    h: *mut warden_handle,
    out: *mut warden_buf,
    err: *mut warden_buf,
) -> warden_result {
    let work = |handle: &warden_handle| -> Result<(), Error> {
        let out = Out::required(out, "out")?;
        let records = handle.kernel.pending_approvals()?;
        // SAFETY: `out` was checked non-NULL and the caller guarantees it is writable.
        unsafe { out.write_json(&Value::Array(records.iter().map(ApprovalRecord::to_json).collect())) };
        Ok(())
    };
    // SAFETY: the caller's guarantees for `h` and `err`, forwarded.
    unsafe { with_handle(h, err, work) }
}

/// The approver an answer names: `"approver"` (an object `{"agent", "user"}`, or a name read as
/// `warden_approval_grant` reads `by`, the agent `host` when it gives none) and `"verified"`
/// (`{"issuer", "claims"}`; absent: asserted).
fn approver_of(fields: &Fields<'_>) -> Result<crate::approval::Approver, Error> {
    let principal = match fields.get("approver") {
        None => {
            return Err(Error::invalid_at(
                InvalidInputKind::Missing,
                "answer.approver",
                "answer needs \"approver\": an object {\"agent\", \"user\"}, or a name (USER, AGENT:USER or \
                 AGENT/USER; the agent \"host\" when it gives none)",
            ))
        }
        Some(Value::String(name)) => crate::approval::person::parse_name("answer.approver", name, "host")?,
        Some(value) => {
            let approver = Fields::new(value, "answer.approver", &["agent", "user"])?;
            crate::action::Principal::new(approver.required_string("agent")?, approver.string("user")?).map_err(
                |e| {
                    Error::InvalidInput(InvalidInput::from(e).prefixed("answer.approver: ").rerooted("answer.approver"))
                },
            )?
        }
    };
    Ok(match fields.get("verified") {
        None => crate::approval::Approver::asserted(principal),
        Some(value) => {
            let verified = Fields::new(value, "answer.verified", &["issuer", "claims"])?;
            let claims = verified.get("claims").cloned().unwrap_or_else(|| Value::Object(Default::default()));
            let verified = crate::approval::Verified::new(verified.string("issuer")?, &claims).map_err(|e| {
                Error::invalid_at(InvalidInputKind::Malformed, "answer.verified", format!("answer.verified: {e}"))
            })?;
            crate::approval::Approver::verified(principal, verified)
        }
    })
}

const ANSWER_FIELDS: [&str; 7] = ["approval_id", "decision", "approver", "verified", "ttl_ms", "note", "action_hash"];

/// Answers an approval request as one approver: a principal, verified by the host's identity
/// provider or asserted. A grant counts toward the request's `approval: {required, roles}`
/// (the status becomes `granted` when the count is reached); a deny by an entitled approver
/// denies it. Each person answers once: a verified identity (the issuer and the `sub` claim)
/// once whatever name it gives, and a name (compared after Unicode NFKC case folding and the
/// TR39 confusables skeleton) once. The requester never answers: not under any spelling of its
/// agent or user, nor with its own verified identity. Concurrent answers are applied one at a time against the stored row,
/// so each is counted exactly once or refused.
///
/// - `h`: an open handle. Required.
/// - `answer`, `len`: UTF-8 JSON `{"approval_id": "apr_…", "decision": "grant"|"deny",
///   "approver": {"agent": str, "user": str|null} | str, "verified": {"issuer": str|null,
///   "claims": {...}}|null, "ttl_ms": int|null, "note": str|null, "action_hash": str|null}`.
///   Required. `approver` as an object: the agent and user each one plain name (no `:` or `/`);
///   as a string: a name read as `warden_approval_grant` reads `by`, the agent `host` when it
///   gives none.
///   `verified` says the host's identity provider vouched for the approver (the `roles` claim
///   entitles it under a rule's `roles`); without it the approver is asserted and counts only
///   where one approver with no role is required. `action_hash`: refuse unless the request
///   binds exactly this action (the one the approver was shown). `ttl_ms` (grants): the
///   approval stays usable that long from the moment it is granted.
/// - `out`: NULL, or receives the updated record on WARDEN_RESULT_OK only; free it with
///   `warden_buf_free`.
/// - `err`: NULL, or receives the error object on failure.
///
/// Returns WARDEN_RESULT_OK; WARDEN_RESULT_APPROVAL_MISMATCH (reason `unknown`, `granted`,
/// `denied`, `consumed`, `expired`, `approver_is_requester`, `approver_not_verified`,
/// `approver_lacks_role`, `already_answered`, `action_not_recorded`, `mismatch`);
/// WARDEN_RESULT_INVALID_INPUT; WARDEN_RESULT_STORE; WARDEN_RESULT_PANIC;
/// WARDEN_RESULT_POISONED.
///
/// Thread safety: safe to call concurrently on one handle.
///
/// # Safety
/// `h` is NULL or a live handle; byte pointers follow the conventions at the top of this
/// header; `out` and `err` are NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn warden_approval_answer(
    h: *mut warden_handle,
    answer: *const u8,
    len: usize,
    out: *mut warden_buf,
    err: *mut warden_buf,
) -> warden_result {
    let work = |handle: &warden_handle| -> Result<(), Error> {
        let out = Out::optional(out);
        // SAFETY: the caller's guarantee for (answer, len).
        let value = unsafe { required_json(answer, len, "answer") }?;
        let fields = Fields::new(&value, "answer", &ANSWER_FIELDS)?;
        let approval_id = fields.required_string("approval_id")?;
        let grant = match fields.required_string("decision")? {
            "grant" => true,
            "deny" => false,
            other => {
                return Err(Error::invalid_at(
                    InvalidInputKind::Malformed,
                    "answer.decision",
                    format!("answer.decision must be \"grant\" or \"deny\", got {other:?}"),
                ))
            }
        };
        let approver = approver_of(&fields)?;
        let ttl = fields.millis("ttl_ms")?;
        if ttl.is_some() && !grant {
            return Err(Error::invalid_at(
                InvalidInputKind::Conflict,
                "answer.ttl_ms",
                "answer.ttl_ms applies only to a grant",
            ));
        }
        let record = handle.kernel.answer(
            approval_id,
            &approver,
            fields.string("note")?,
            grant,
            ttl,
            fields.string("action_hash")?,
        )?;
        // SAFETY: `out` is NULL or writable (the caller's guarantee).
        unsafe { out.write_json(&record.to_json()) };
        Ok(())
    };
    // SAFETY: the caller's guarantees for `h` and `err`, forwarded.
    unsafe { with_handle(h, err, work) }
}

/// Waits until an approval request is answered (granted, denied, consumed), expires, or
/// `timeout_ms` passes, and returns the record as it then stands: `"status": "pending"` means
/// the wait ran out; a request past its expiry reads `"expired"`; JSON `null` when there is no
/// such request. Every instant is judged by the handle's clock (the kernel's), never the
/// host's. Requests answered in another process are seen too (the store is read again, at
/// most every 200 ms).
///
/// - `h`: an open handle. Required.
/// - `id`, `id_len`: the approval id. Required.
/// - `timeout_ms`: how long to wait, at most 86 400 000 (a day); 0 reads once.
/// - `out`: receives the JSON on WARDEN_RESULT_OK only. Required. Free it with
///   `warden_buf_free`.
/// - `err`: NULL, or receives the error object on failure.
///
/// Returns WARDEN_RESULT_OK; WARDEN_RESULT_INVALID_INPUT (a NULL `out`, a timeout over a day);
/// WARDEN_RESULT_STORE; WARDEN_RESULT_PANIC; WARDEN_RESULT_POISONED.
///
/// Thread safety: safe to call concurrently on one handle; it blocks only the calling thread.
///
/// # Safety
/// `h` is NULL or a live handle; byte pointers follow the conventions at the top of this
/// header; `out` and `err` are NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn warden_approval_wait(
    h: *mut warden_handle,
    id: *const u8,
    id_len: usize,
    timeout_ms: u64,
    out: *mut warden_buf,
    err: *mut warden_buf,
) -> warden_result {
    let work = |handle: &warden_handle| -> Result<(), Error> {
        let out = Out::required(out, "out")?;
        // SAFETY: the caller's guarantee for (id, id_len).
        let id = unsafe { required_str(id, id_len, "id") }?;
        let timeout = i64::try_from(timeout_ms)
            .ok()
            .and_then(|ms| ms.checked_mul(1000))
            .filter(|micros| *micros <= crate::kernel::MAX_WAIT)
            .ok_or_else(|| {
                Error::invalid_at(
                    InvalidInputKind::OutOfRange,
                    "timeout_ms",
                    "timeout_ms must be at most 86400000 (a day)",
                )
            })?;
        let record = handle.kernel.wait_for_answer(id, timeout)?;
        // SAFETY: `out` was checked non-NULL and the caller guarantees it is writable.
        unsafe { out.write_json(&record.as_ref().map_or(Value::Null, ApprovalRecord::to_json)) };
        Ok(())
    };
    // SAFETY: the caller's guarantees for `h` and `err`, forwarded.
    unsafe { with_handle(h, err, work) }
}

const SCOPED_FIELDS: [&str; 5] = ["approval_id", "approver", "verified", "action_hash", "scope"];

/// Grants a pending approval request and, in the same write, makes a *scoped grant*: the next
/// `scope.uses` proposals of the same action, by the same requester, decided `approve` by the
/// same rule under the same policy hash, whose arguments have the scope's shape, are allowed
/// without asking a human until `scope.minutes` pass (their permits name `scoped_grant_id`).
/// Only a rule whose document opts in (`approval: {scoped: {max_uses, max_minutes}}`) and needs
/// one approver allows it; anything past the document's caps is refused and nothing changes.
///
/// - `h`: an open handle. Required.
/// - `answer`, `len`: UTF-8 JSON `{"approval_id": "apr_…", "approver": {"agent": str, "user":
///   str|null} | str, "verified": {"issuer": str|null, "claims": {...}}|null, "action_hash":
///   str|null, "scope": {"uses": int, "minutes": int, "fixed": [pointer, …], "at_most":
///   {pointer: number, …}}}`. Required. `approver`, `verified` and `action_hash` as for
///   `warden_approval_answer`. `scope.uses`: how many further proposals (1 to the rule's
///   `max_uses`); `scope.minutes`: how long (1 to its `max_minutes`); `fixed`: JSON pointers
///   (`/customer_id`) whose values must equal the approved action's; `at_most`: JSON pointers to
///   numeric arguments, each with a bound not below the approved action's value. Any other
///   field, here or in `scope`, is refused.
/// - `out`: NULL, or receives `{"grant": {...}, "approval": {...}, "receipt_id": str,
///   "receipt_seq": int}` on WARDEN_RESULT_OK only (the grant as `warden_scoped_grants` lists
///   it, the approval record granted); free it with `warden_buf_free`.
/// - `err`: NULL, or receives the error object on failure.
///
/// Returns WARDEN_RESULT_OK; WARDEN_RESULT_APPROVAL_MISMATCH (as for `warden_approval_answer`);
/// WARDEN_RESULT_NOT_FOUND (no such request); WARDEN_RESULT_INVALID_INPUT (bad JSON, an unknown
/// field, a scope the rule does not allow or wider than its caps, a pointer not in the approved
/// action, a bound below its value, a request that needs more than one approver; the message
/// names which); WARDEN_RESULT_STORE; WARDEN_RESULT_PANIC; WARDEN_RESULT_POISONED.
///
/// Thread safety: safe to call concurrently on one handle.
///
/// # Safety
/// `h` is NULL or a live handle; byte pointers follow the conventions at the top of this
/// header; `out` and `err` are NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn warden_approval_grant_scoped(
    h: *mut warden_handle,
    answer: *const u8,
    len: usize,
    out: *mut warden_buf,
    err: *mut warden_buf,
) -> warden_result {
    let work = |handle: &warden_handle| -> Result<(), Error> {
        let out = Out::optional(out);
        // SAFETY: the caller's guarantee for (answer, len).
        let value = unsafe { required_json(answer, len, "answer") }?;
        let fields = Fields::new(&value, "answer", &SCOPED_FIELDS)?;
        let approval_id = fields.required_string("approval_id")?;
        let approver = approver_of(&fields)?;
        let scope = fields.get("scope").ok_or_else(|| {
            Error::invalid_at(
                InvalidInputKind::Missing,
                "answer.scope",
                "answer needs \"scope\": {\"uses\", \"minutes\", \"fixed\", \"at_most\"}",
            )
        })?;
        let scope = Scope::from_json(scope)?;
        let done = handle.kernel.answer_scoped(approval_id, &approver, &scope, fields.string("action_hash")?)?;
        // SAFETY: `out` is NULL or writable (the caller's guarantee).
        unsafe { out.write_json(&done.to_json(handle.kernel.now())) };
        Ok(())
    };
    // SAFETY: the caller's guarantees for `h` and `err`, forwarded.
    unsafe { with_handle(h, err, work) }
}

/// Lists scoped grants by id as a JSON array of `{"grant_id", "approval_id", "action", "rule",
/// "policy_hash", "requested_by", "approver", "approver_verified", "scope", "fixed_values",
/// "uses_left", "granted_at", "expires_at", "state", "revoked"}` (`state`: `live`, `used_up`,
/// `expired` or `revoked`, by the handle's clock).
///
/// - `h`: an open handle. Required.
/// - `live_only`: true lists only the grants that may still be spent; false lists every grant
///   ever made.
/// - `out`: receives the JSON on WARDEN_RESULT_OK only. Required. Free it with
///   `warden_buf_free`.
/// - `err`: NULL, or receives the error object on failure.
///
/// Returns WARDEN_RESULT_OK; WARDEN_RESULT_INVALID_INPUT; WARDEN_RESULT_STORE;
/// WARDEN_RESULT_PANIC; WARDEN_RESULT_POISONED.
///
/// Thread safety: safe to call concurrently on one handle.
///
/// # Safety
/// `h` is NULL or a live handle; `out` and `err` are NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn warden_scoped_grants(
    h: *mut warden_handle,
    live_only: bool,
    out: *mut warden_buf,
    err: *mut warden_buf,
) -> warden_result {
    let work = |handle: &warden_handle| -> Result<(), Error> {
        let out = Out::required(out, "out")?;
        let grants = handle.kernel.scoped_grants(live_only)?;
        let now = handle.kernel.now();
        // SAFETY: `out` was checked non-NULL and the caller guarantees it is writable.
        unsafe { out.write_json(&Value::Array(grants.iter().map(|grant| grant.to_json(now)).collect())) };
        Ok(())
    };
    // SAFETY: the caller's guarantees for `h` and `err`, forwarded.
    unsafe { with_handle(h, err, work) }
}

/// Revokes one scoped grant: no later proposal is covered by it (the uses left are not spent).
/// One write with its own receipt (`warden.approval.scoped_revoke`) and event.
///
/// - `h`: an open handle. Required.
/// - `id`, `id_len`: the grant id (`sgr_` and 32 lowercase hex digits). Required.
/// - `by`, `by_len`: who revokes, one plain line, not empty. Required.
/// - `reason`, `reason_len`: why, one plain line, not empty. Required.
/// - `out`: NULL, or receives `{"grant": {...}, "approval": null, "receipt_id": str,
///   "receipt_seq": int}` on WARDEN_RESULT_OK only (the grant as revoked); free it with
///   `warden_buf_free`.
/// - `err`: NULL, or receives the error object on failure.
///
/// Returns WARDEN_RESULT_OK; WARDEN_RESULT_NOT_FOUND (no such grant); WARDEN_RESULT_INVALID_INPUT
/// (a malformed id, an empty `by` or `reason`, a grant revoked already); WARDEN_RESULT_STORE;
/// WARDEN_RESULT_PANIC; WARDEN_RESULT_POISONED. A refused revocation changes nothing.
///
/// Thread safety: safe to call concurrently on one handle.
///
/// # Safety
/// `h` is NULL or a live handle; byte pointers follow the conventions at the top of this
/// header; `out` and `err` are NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn warden_scoped_grant_revoke(
    h: *mut warden_handle,
    id: *const u8,
    id_len: usize,
    by: *const u8,
    by_len: usize,
    reason: *const u8,
    reason_len: usize,
    out: *mut warden_buf,
    err: *mut warden_buf,
) -> warden_result {
    let work = |handle: &warden_handle| -> Result<(), Error> {
        let out = Out::optional(out);
        // SAFETY: the caller's guarantee for each (ptr, len) pair.
        let (id, by, reason) = unsafe {
            (
                required_str(id, id_len, "id")?,
                required_str(by, by_len, "by")?,
                required_str(reason, reason_len, "reason")?,
            )
        };
        check_person_name("by", by)?;
        check_person_name("reason", reason)?;
        let done = handle.kernel.revoke_scoped_grant(id, by, reason)?;
        // SAFETY: `out` is NULL or writable (the caller's guarantee).
        unsafe { out.write_json(&done.to_json(handle.kernel.now())) };
        Ok(())
    };
    // SAFETY: the caller's guarantees for `h` and `err`, forwarded.
    unsafe { with_handle(h, err, work) }
}
