//! `warden_propose` and `warden_permit`: the right to execute one action once, and the one
//! outcome it reports.

use std::sync::Arc;

use serde_json::Value;

use crate::effect::{ResultForm, StoredResult};
use crate::error::{Error, InvalidInputKind};
use crate::kernel::{Kernel, Permit};
use crate::pipeline::ActionRequest;

use super::bytes::{optional_str, required_json, warden_buf, Out};
use super::handle::{warden_handle, with_handle};
use super::panic::{fallible, Latch};
use super::precondition::HostPrecondition;
use super::request::Fields;
use super::result::warden_result;
use super::unwind::infallible;

/// A permit. Opaque: created by `warden_propose`, freed by `warden_permit_free`.
#[allow(non_camel_case_types)]
pub struct warden_permit {
    /// `None` once an outcome was reported.
    permit: Option<Permit>,
    kernel: Kernel,
    /// The issuing handle's latch: a panic at the boundary poisons both.
    latch: Arc<Latch>,
    /// The permit JSON as last known; still readable after the outcome.
    info: Value,
}

// The header promises a permit may move between threads (one at a time).
const _: fn() = || {
    fn movable_between_threads<T: Send>() {}
    movable_between_threads::<warden_permit>();
};

fn info_of(permit: &Permit) -> Value {
    let mut info = permit.to_json();
    if let Some(map) = info.as_object_mut() {
        map.insert("arguments".into(), permit.action().canonical_arguments());
    }
    info
}

impl warden_permit {
    fn unfinished(&mut self) -> Result<&mut Permit, Error> {
        self.permit.as_mut().ok_or_else(already_finished)
    }

    fn take(&mut self) -> Result<Permit, Error> {
        self.permit.take().ok_or_else(already_finished)
    }
}

fn already_finished() -> Error {
    Error::invalid(InvalidInputKind::State, "this permit already reported its outcome; free it with warden_permit_free")
}

/// Runs one fallible export on a permit: refuses a NULL permit, refuses with
/// WARDEN_RESULT_POISONED once the issuing handle is poisoned, and poisons it on a panic.
///
/// # Safety
/// `p` is NULL or a live permit not used by another thread meanwhile; `err` is NULL or valid.
unsafe fn with_permit(
    p: *mut warden_permit,
    err: *mut warden_buf,
    work: impl FnOnce(&mut warden_permit) -> Result<(), Error>,
) -> warden_result {
    let work = || -> Result<(), Error> {
        // SAFETY: the caller guarantees `p` is NULL or a live permit that no other thread
        // uses meanwhile, so this is the only reference.
        let permit = unsafe { p.as_mut() }.ok_or_else(|| {
            Error::invalid_at(InvalidInputKind::Missing, "p", "p (the permit) is NULL, and it is required")
        })?;
        // First, before anything that could take a lock: a permit from before a fork.
        permit.kernel.check_fork()?;
        let latch = Arc::clone(&permit.latch);
        latch.guard(|| work(permit))
    };
    // SAFETY: the caller's guarantee for `err`, forwarded.
    unsafe { fallible(err, work) }
}

const REQUEST_FIELDS: [&str; 13] = [
    "name",
    "arguments",
    "principal",
    "approval_id",
    "lease_ms",
    "resource",
    "principal_expires_at_ms",
    "task",
    "hop",
    "identity",
    "precondition",
    "reconciled",
    "traceparent",
];

/// Runs the full pipeline for one request under the handle's document: principal, authority,
/// policy, attempt ceiling, approval gate, then one durable write that reserves the effect.
///
/// - `h`: an open handle with a configuration document. Required.
/// - `request`, `len`: UTF-8 JSON `{"name": str, "arguments": {...}, "principal":
///   {"agent": str, "user": str|null}|null, "approval_id": "apr_…"|null, "lease_ms": int|null,
///   "resource": str|null, "principal_expires_at_ms": int|null, "task": str|null, "hop":
///   "dlg_…"|null, "identity": {"issuer": str|null, "claims": {...}}|null, "precondition":
///   {"state": any}|null}`. Required. `name` is required; absent `arguments` is `{}`; a null
///   `principal` is a programming error, not a denial: WARDEN_RESULT_INVALID_INPUT with reason
///   `no_principal`, and nothing is decided or recorded; an unknown field is INVALID_INPUT.
///   `task` names the unit of work (grants naming `tasks` need a matching one); `hop` is a
///   delegation id handed over by another agent, which then is the only grant considered.
///   `identity`: what the host's identity provider verified about the principal, kept with an
///   approval request. `precondition`: the state the action depends on, read just before this
///   call; when the policy says `approve` its fingerprint is kept with a new request, and a
///   presented approval is spent only when the fingerprint is the same (else
///   WARDEN_RESULT_APPROVAL_MISMATCH, reason `precondition_changed`, the approval stays granted).
///   `reconciled`: `{"effect_key", "answer"}`, the host's reconcile hook's answer after this
///   request was refused AMBIGUOUS on `effect_key` (an effect of this action): `committed` or
///   `not_executed` resolves it and the proposal goes on (the retry, once); `unknown` is
///   recorded and WARDEN_RESULT_AMBIGUOUS comes back. The one rule both bindings use.
///   `traceparent`: the caller's W3C trace context (`00-<32 hex>-<16 hex>-<2 hex>`), recorded
///   on the call's receipts; one that is not valid is INVALID_INPUT.
/// - `out`: receives a new permit on WARDEN_RESULT_OK only. Required. The caller owns it:
///   report exactly one outcome (`warden_permit_commit`, `_not_executed`, `_ambiguous`) and
///   then free it with `warden_permit_free` (freeing it without an outcome records AMBIGUOUS).
/// - `err`: NULL, or receives the error object on failure; for a refusal it carries the
///   refusal's fields (`request_id`, `expires_at`, `action_hash`, `approval_id`, `state`,
///   `effect_key`, `action_id`, `attempts`, `max_attempts`, as they apply). An authority
///   denial (DENIED with `"authority": true`) carries `reason` (`no_authority`,
///   `authority_revoked`, `budget_exhausted`, …), `grant_id`, `hop` and `dimension`.
///
/// Returns WARDEN_RESULT_OK; a refusal: WARDEN_RESULT_DENIED, WARDEN_RESULT_APPROVAL_REQUIRED,
/// WARDEN_RESULT_APPROVAL_MISMATCH, WARDEN_RESULT_DUPLICATE, WARDEN_RESULT_IN_PROGRESS,
/// WARDEN_RESULT_AMBIGUOUS, WARDEN_RESULT_ATTEMPT_CEILING; or a fault:
/// WARDEN_RESULT_INVALID_INPUT, WARDEN_RESULT_CONFIG (no document), WARDEN_RESULT_STORE,
/// WARDEN_RESULT_PANIC, WARDEN_RESULT_POISONED.
///
/// Thread safety: safe to call concurrently on one handle.
///
/// # Safety
/// `h` is NULL or a live handle; byte pointers follow the conventions at the top of this
/// header; `out` and `err` are NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn warden_propose(
    h: *mut warden_handle,
    request: *const u8,
    len: usize,
    out: *mut *mut warden_permit,
    err: *mut warden_buf,
) -> warden_result {
    let recovery = crate::pipeline::Recovery::default();
    // SAFETY: the caller's guarantees, forwarded; no description is asked for.
    unsafe { propose(h, request, len, None, &recovery, None, out, std::ptr::null_mut(), err) }
}

/// `warden_propose`, and in the same call the permit's description (the JSON
/// `warden_permit_info` returns), so a binding needs one call per proposal, not two.
///
/// - `h`, `request`, `len`, `out`, `err`: as for `warden_propose`.
/// - `info`: receives a new buffer with the description on WARDEN_RESULT_OK only. Required.
///   Free it with `warden_buf_free`.
///
/// Returns WARDEN_RESULT_OK, or the refusals and faults `warden_propose` returns;
/// WARDEN_RESULT_INVALID_INPUT also for a NULL `info`.
///
/// Thread safety: safe to call concurrently on one handle.
///
/// # Safety
/// As for `warden_propose`; `info` is NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn warden_propose_described(
    h: *mut warden_handle,
    request: *const u8,
    len: usize,
    out: *mut *mut warden_permit,
    info: *mut warden_buf,
    err: *mut warden_buf,
) -> warden_result {
    if info.is_null() {
        // SAFETY: the caller's guarantee for `err`, forwarded.
        return unsafe {
            fallible(err, || {
                Err(Error::invalid_at(InvalidInputKind::Missing, "info", "info is NULL, and it is required"))
            })
        };
    }
    let recovery = crate::pipeline::Recovery::default();
    // SAFETY: the caller's guarantees, forwarded.
    unsafe { propose(h, request, len, None, &recovery, None, out, info, err) }
}

/// The one body of every proposal export. `info` is NULL or valid for one write;
/// `precondition` is the host's provider, when it passed one; `recovery` what to do after a
/// first refusal (`Warden::submit_recovering`); `trace` where the call's span is recorded (it
/// ends there with any failure of this call).
///
/// # Safety
/// As for `warden_propose_described`, with `info` allowed to be NULL.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn propose(
    h: *mut warden_handle,
    request: *const u8,
    len: usize,
    precondition: Option<&HostPrecondition>,
    recovery: &crate::pipeline::Recovery<'_>,
    trace: Option<&Arc<crate::telemetry::ActionTrace>>,
    out: *mut *mut warden_permit,
    info: *mut warden_buf,
    err: *mut warden_buf,
) -> warden_result {
    let work = |handle: &warden_handle| -> Result<(), Error> {
        // SAFETY: the caller's guarantees for the request, `out` and `info`, forwarded.
        let proposed = unsafe { proposal(handle, request, len, precondition, recovery, trace, out, info) };
        if let (Some(trace), Err(error)) = (trace, &proposed) {
            trace.end_error(handle.kernel.now(), error);
        }
        proposed
    };
    // SAFETY: the caller's guarantees for `h` and `err`, forwarded.
    unsafe { with_handle(h, err, work) }
}

/// `propose`'s work on an open handle.
///
/// # Safety
/// As for `propose`.
#[allow(clippy::too_many_arguments)]
unsafe fn proposal(
    handle: &warden_handle,
    request: *const u8,
    len: usize,
    precondition: Option<&HostPrecondition>,
    recovery: &crate::pipeline::Recovery<'_>,
    trace: Option<&Arc<crate::telemetry::ActionTrace>>,
    out: *mut *mut warden_permit,
    info: *mut warden_buf,
) -> Result<(), Error> {
    let out = Out::required(out, "out")?;
    // Before parsing: a parsed document takes many times its text in memory.
    handle.kernel.limits().check_request(len)?;
    // SAFETY: the caller's guarantee for (request, len).
    let value = unsafe { required_json(request, len, "request") }?;
    let fields = Fields::new(&value, "request", &REQUEST_FIELDS)?;
    let action_request = ActionRequest {
        name: fields.required_string("name")?,
        arguments: fields.arguments()?,
        principal: fields.principal()?,
        principal_expires_at: fields.millis("principal_expires_at_ms")?,
        resource: fields.string("resource")?.map(str::to_owned),
        approval_id: fields.string("approval_id")?,
        lease: fields.millis("lease_ms")?,
        task: fields.string("task")?,
        hop: fields.string("hop")?,
        identity: super::request::identity(&fields)?,
        precondition: super::precondition::precondition(&fields, precondition)?,
        traceparent: fields.string("traceparent")?,
        trace: trace.cloned(),
    };
    let warden = handle.warden()?;
    if let Some(reconciled) = fields.get("reconciled") {
        apply_reconciled(&handle.kernel, reconciled, action_request.name)?;
    }
    let permit = warden.submit_recovering(&action_request, recovery).1?;
    let boxed = warden_permit {
        info: info_of(&permit),
        permit: Some(permit),
        kernel: handle.kernel.clone(),
        latch: Arc::clone(&handle.latch),
    };
    if !info.is_null() {
        // SAFETY: `info` is non-NULL here and the caller guarantees it is writable.
        unsafe { Out::required(info, "info")?.write_json(&boxed.info) };
    }
    // SAFETY: `out` was checked non-NULL and the caller guarantees it is writable.
    unsafe { out.write(Box::into_raw(Box::new(boxed))) };
    Ok(())
}

/// The second step of propose → AMBIGUOUS → ask the reconcile hook → propose once more: the
/// request's `reconciled: {"effect_key", "answer"}` is the hook's answer about the key the
/// first proposal was refused on. `committed` and `not_executed` resolve it (resolver
/// `reconcile:<action>`) and this proposal goes on; `unknown` is recorded and the AMBIGUOUS
/// refusal stands. The key must hold an effect of this very action.
fn apply_reconciled(kernel: &Kernel, reconciled: &Value, action: &str) -> Result<(), Error> {
    let shape = || {
        Error::invalid_at(
            InvalidInputKind::Malformed,
            "request.reconciled",
            "request.reconciled must be {\"effect_key\": str, \"answer\": \"committed\"|\"not_executed\"|\"unknown\"}",
        )
    };
    let map = reconciled.as_object().filter(|map| map.len() == 2).ok_or_else(shape)?;
    let key = map.get("effect_key").and_then(Value::as_str).ok_or_else(shape)?;
    let answer = map.get("answer").and_then(Value::as_str).ok_or_else(shape)?;
    let answer = crate::kernel::ReconcileAnswer::parse(answer).ok_or_else(|| {
        Error::invalid_at(
            InvalidInputKind::Malformed,
            "request.reconciled.answer",
            format!(
                "a reconcile hook answers committed, not_executed or unknown, not {}",
                serde_json::Value::String(answer.chars().take(64).collect())
            ),
        )
    })?;
    let record = kernel.effect(key)?.ok_or_else(|| Error::NotFound(format!("no effect {key:?} to reconcile")))?;
    if record.action_name != action {
        return Err(Error::invalid_at(
            InvalidInputKind::Conflict,
            "request.reconciled.effect_key",
            format!("request.reconciled names effect {key:?} of {}, not of this action", record.action_name),
        ));
    }
    kernel.reconcile(key, action, answer)?;
    match answer {
        crate::kernel::ReconcileAnswer::Unknown => Err(Error::Ambiguous {
            effect_key: key.to_owned(),
            action_id: record.action_id,
            detail: "the reconcile hook answered unknown".into(),
        }),
        crate::kernel::ReconcileAnswer::Committed | crate::kernel::ReconcileAnswer::NotExecuted => Ok(()),
    }
}

/// Describes a permit as JSON: `{"action_id", "action", "action_hash", "effect_key",
/// "attempt", "lease_expires_at", "idempotency_token", "approval_id", "decision",
/// "decision_reason", "arguments"}`. `arguments` are the canonical arguments the executor must
/// use; `idempotency_token` is the token to hand the provider for this attempt (null without
/// an effect key). Still readable after the outcome was reported.
///
/// - `p`: a permit. Required. Not modified.
/// - `out`: receives a new buffer on WARDEN_RESULT_OK only. Required. Free it with
///   `warden_buf_free`.
/// - `err`: NULL, or receives the error object on failure.
///
/// Returns WARDEN_RESULT_OK; WARDEN_RESULT_INVALID_INPUT (NULL `p` or `out`, a permit used in
/// a child forked after it was issued); WARDEN_RESULT_PANIC; WARDEN_RESULT_POISONED (the
/// issuing handle is poisoned).
///
/// Thread safety: a permit must not be used from two threads at the same time.
///
/// # Safety
/// `p` is NULL or a live permit; `out` and `err` are NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn warden_permit_info(
    p: *const warden_permit,
    out: *mut warden_buf,
    err: *mut warden_buf,
) -> warden_result {
    let work = || -> Result<(), Error> {
        let out = Out::required(out, "out")?;
        // SAFETY: the caller guarantees `p` is NULL or a live permit not used elsewhere.
        let permit = unsafe { p.as_ref() }.ok_or_else(|| {
            Error::invalid_at(InvalidInputKind::Missing, "p", "p (the permit) is NULL, and it is required")
        })?;
        // A permit from before a fork is refused here too, like every other permit call.
        permit.kernel.check_fork()?;
        let info = permit.latch.guard(|| Ok(permit.info.clone()))?;
        // SAFETY: `out` was checked non-NULL and the caller guarantees it is writable.
        unsafe { out.write_json(&info) };
        Ok(())
    };
    // SAFETY: the caller's guarantees for `err`, forwarded.
    unsafe { fallible(err, work) }
}

/// Reports that the executor succeeded: COMMITTED. The permit is spent (even when this returns
/// a refusal or a fault). A success is never refused for its result: whatever bytes are handed
/// over are stored.
///
/// - `p`: an unfinished permit. Required.
/// - `result_json`, `len`: the executor's result as UTF-8 JSON, stored as evidence outside any
///   hash. Optional: (NULL, 0) stores null. Canonical JSON nested at most 100 deep and at most
///   the handle's `limits.max_result_bytes` (default 1 MiB) long is stored as itself; anything
///   else is stored as the marked form `{"warden_result": why, "bytes", "sha256", "excerpt"}`
///   (the size and SHA-256 of the bytes handed over, and their first 64 KiB as text), `why`
///   being `truncated` (over the size bound, never parsed), `too_deep`, `not_canonical` (a
///   float) or `text` (not JSON), and the effect still commits.
/// - `err`: NULL, or receives the error object on failure.
///
/// Returns WARDEN_RESULT_OK; WARDEN_RESULT_LATE_OUTCOME (the record moved on first, e.g. the
/// lease lapsed; the outcome was kept as evidence); WARDEN_RESULT_INVALID_INPUT (NULL `p`, an
/// outcome already reported); WARDEN_RESULT_STORE; WARDEN_RESULT_PANIC;
/// WARDEN_RESULT_POISONED.
///
/// Thread safety: a permit must not be used from two threads at the same time.
///
/// # Safety
/// `p` is NULL or a live permit; byte pointers follow the conventions at the top of this
/// header; `err` is NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn warden_permit_commit(
    p: *mut warden_permit,
    result_json: *const u8,
    len: usize,
    err: *mut warden_buf,
) -> warden_result {
    // SAFETY: the caller's guarantees, forwarded.
    unsafe { commit(p, result_json, len, ResultForm::Json, err) }
}

/// `warden_permit_commit` for a result with no JSON form: `text`, `len` describe it (a Python
/// `repr`, a Node `util.inspect`), and are stored as the marked form with `why` = `text`
/// (`{"warden_result": "text", "bytes", "sha256", "excerpt"}`). The effect commits.
///
/// - `p`: an unfinished permit. Required.
/// - `text`, `len`: any bytes (UTF-8 expected; others are shown with replacement characters).
///   Optional: (NULL, 0) stores the marked form of no bytes.
/// - `err`: NULL, or receives the error object on failure.
///
/// Returns WARDEN_RESULT_OK; WARDEN_RESULT_LATE_OUTCOME; WARDEN_RESULT_INVALID_INPUT (NULL `p`,
/// an outcome already reported); WARDEN_RESULT_STORE; WARDEN_RESULT_PANIC;
/// WARDEN_RESULT_POISONED.
///
/// Thread safety: a permit must not be used from two threads at the same time.
///
/// # Safety
/// As for `warden_permit_commit`.
#[no_mangle]
pub unsafe extern "C" fn warden_permit_commit_text(
    p: *mut warden_permit,
    text: *const u8,
    len: usize,
    err: *mut warden_buf,
) -> warden_result {
    // SAFETY: the caller's guarantees, forwarded.
    unsafe { commit(p, text, len, ResultForm::Text, err) }
}

/// The one body of both commit exports.
///
/// # Safety
/// As for `warden_permit_commit`.
unsafe fn commit(
    p: *mut warden_permit,
    bytes: *const u8,
    len: usize,
    form: ResultForm,
    err: *mut warden_buf,
) -> warden_result {
    let work = |permit: &mut warden_permit| -> Result<(), Error> {
        // SAFETY: the caller's guarantee for (bytes, len).
        let handed = unsafe { super::bytes::borrow(bytes, len, form.parameter()) }?;
        let max = permit.kernel.limits().max_result_bytes;
        let stored = match (handed, form) {
            (None, ResultForm::Json) => StoredResult::from_value_within(&Value::Null, max),
            (handed, form) => StoredResult::from_bytes(handed.unwrap_or_default(), form, max),
        };
        permit.take()?.commit_stored(stored)
    };
    // SAFETY: the caller's guarantees for `p` and `err`, forwarded.
    unsafe { with_permit(p, err, work) }
}

/// Reports that the executor proved the remote side did nothing: FAILED, and a later attempt
/// may run. The permit is spent (even on a refusal or fault), except when `msg` is not UTF-8.
///
/// - `p`: an unfinished permit. Required.
/// - `msg`, `len`: why, UTF-8. Optional: (NULL, 0) records a generic message.
/// - `err`: NULL, or receives the error object on failure.
///
/// Returns WARDEN_RESULT_OK; WARDEN_RESULT_LATE_OUTCOME; WARDEN_RESULT_INVALID_INPUT (NULL `p`,
/// invalid UTF-8, an outcome already reported); WARDEN_RESULT_STORE; WARDEN_RESULT_PANIC;
/// WARDEN_RESULT_POISONED.
///
/// Thread safety: a permit must not be used from two threads at the same time.
///
/// # Safety
/// `p` is NULL or a live permit; byte pointers follow the conventions at the top of this
/// header; `err` is NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn warden_permit_not_executed(
    p: *mut warden_permit,
    msg: *const u8,
    len: usize,
    err: *mut warden_buf,
) -> warden_result {
    let work = |permit: &mut warden_permit| -> Result<(), Error> {
        // SAFETY: the caller's guarantee for (msg, len).
        let msg = unsafe { optional_str(msg, len, "msg") }?.unwrap_or("the host reported it was not executed");
        permit.take()?.not_executed(msg)
    };
    // SAFETY: the caller's guarantees for `p` and `err`, forwarded.
    unsafe { with_permit(p, err, work) }
}

/// Reports that the caller left before the executor started (a cancelled task, an abandoned
/// call): the function never ran, so NOT_EXECUTED (FAILED, and a later attempt may run), with
/// the library's message. The rule for every binding: a permit nobody will use is finished
/// with this, never freed unfinished (which records AMBIGUOUS). The permit is spent.
///
/// - `p`: an unfinished permit. Required.
/// - `err`: NULL, or receives the error object on failure.
///
/// Returns WARDEN_RESULT_OK; WARDEN_RESULT_LATE_OUTCOME; WARDEN_RESULT_INVALID_INPUT (NULL `p`,
/// an outcome already reported); WARDEN_RESULT_STORE; WARDEN_RESULT_PANIC;
/// WARDEN_RESULT_POISONED.
///
/// Thread safety: a permit must not be used from two threads at the same time.
///
/// # Safety
/// `p` is NULL or a live permit; `err` is NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn warden_permit_cancel(p: *mut warden_permit, err: *mut warden_buf) -> warden_result {
    let work = |permit: &mut warden_permit| -> Result<(), Error> { permit.take()?.not_executed(CANCELLED_BEFORE_RUN) };
    // SAFETY: the caller's guarantees for `p` and `err`, forwarded.
    unsafe { with_permit(p, err, work) }
}

/// What `warden_permit_cancel` records.
pub(crate) const CANCELLED_BEFORE_RUN: &str = "the caller was cancelled before the protected function ran";

/// Reports that the outcome is unknown: AMBIGUOUS until a human resolves it (or a reconcile
/// answers). The permit is spent (even on a refusal or fault), except when `msg` is not UTF-8.
///
/// - `p`: an unfinished permit. Required.
/// - `msg`, `len`: what happened, UTF-8. Optional: (NULL, 0) records a generic message.
/// - `err`: NULL, or receives the error object on failure.
///
/// Returns WARDEN_RESULT_OK; WARDEN_RESULT_LATE_OUTCOME; WARDEN_RESULT_INVALID_INPUT (NULL `p`,
/// invalid UTF-8, an outcome already reported); WARDEN_RESULT_STORE; WARDEN_RESULT_PANIC;
/// WARDEN_RESULT_POISONED.
///
/// Thread safety: a permit must not be used from two threads at the same time.
///
/// # Safety
/// `p` is NULL or a live permit; byte pointers follow the conventions at the top of this
/// header; `err` is NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn warden_permit_ambiguous(
    p: *mut warden_permit,
    msg: *const u8,
    len: usize,
    err: *mut warden_buf,
) -> warden_result {
    let work = |permit: &mut warden_permit| -> Result<(), Error> {
        // SAFETY: the caller's guarantee for (msg, len).
        let msg = unsafe { optional_str(msg, len, "msg") }?.unwrap_or("the host reported an unknown outcome");
        permit.take()?.ambiguous(msg)
    };
    // SAFETY: the caller's guarantees for `p` and `err`, forwarded.
    unsafe { with_permit(p, err, work) }
}

/// Extends this attempt's lease to `lease_ms` milliseconds from now; only while the attempt
/// still holds its effect, and never shorter than the current lease. `warden_permit_info`
/// shows the new `lease_expires_at`.
///
/// - `p`: an unfinished permit with an effect key. Required.
/// - `lease_ms`: milliseconds from now, at least 1.
/// - `err`: NULL, or receives the error object on failure.
///
/// Returns WARDEN_RESULT_OK; a refusal when the attempt no longer holds the effect
/// (WARDEN_RESULT_LATE_OUTCOME, WARDEN_RESULT_AMBIGUOUS, WARDEN_RESULT_DUPLICATE, …);
/// WARDEN_RESULT_INVALID_INPUT (NULL `p`, `lease_ms` 0 or too large, a permit without an effect
/// key or already finished); WARDEN_RESULT_STORE; WARDEN_RESULT_PANIC; WARDEN_RESULT_POISONED.
///
/// Thread safety: a permit must not be used from two threads at the same time.
///
/// # Safety
/// `p` is NULL or a live permit; `err` is NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn warden_permit_extend_lease(
    p: *mut warden_permit,
    lease_ms: u64,
    err: *mut warden_buf,
) -> warden_result {
    let work = |permit: &mut warden_permit| -> Result<(), Error> {
        let lease = super::store_ops::lease_micros(lease_ms)?;
        let until = permit.kernel.now().saturating_add(lease);
        let extended = permit.unfinished()?;
        extended.extend_lease(until)?;
        let info = info_of(extended);
        permit.info = info;
        Ok(())
    };
    // SAFETY: the caller's guarantees for `p` and `err`, forwarded.
    unsafe { with_permit(p, err, work) }
}

/// Frees a permit. NULL is a no-op. A permit freed before reporting an outcome records
/// AMBIGUOUS (the host lost track of the call), so free only after reporting one. In a child
/// created by `fork()` after the permit was issued, this records nothing (the permit is the
/// parent's to finish).
///
/// Ownership: takes the permit back; it is invalid afterwards.
///
/// Thread safety: no other thread may be using the permit.
///
/// # Safety
/// `p` is NULL or a permit from `warden_propose` not yet freed.
#[no_mangle]
pub unsafe extern "C" fn warden_permit_free(p: *mut warden_permit) {
    infallible((), || {
        if !p.is_null() {
            // SAFETY: `p` came from `Box::into_raw` in `warden_propose`, and the caller gives up
            // every use of it. Dropping an unfinished `Permit` records AMBIGUOUS.
            drop(unsafe { Box::from_raw(p) });
        }
    });
}
