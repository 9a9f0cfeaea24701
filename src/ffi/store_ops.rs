//! The lower-level store operations, for integrators who run their own pipeline: reserve (with
//! an optional approval consumed in the same write), begin, complete, mark ambiguous, extend a
//! lease, consume an approval without a key. They write state and events; the integrator's
//! pipeline owns its receipts.

use serde_json::Value;

use crate::effect::{Outcome, StoredResult};
use crate::error::{Error, InvalidInputKind};

use super::bytes::{optional_str, required_json, required_str, warden_buf, Out};
use super::handle::{warden_handle, with_handle};
use super::request::action;
use super::result::warden_result;

/// `{"committed": result} | {"not_executed": msg} | {"ambiguous": msg}`.
fn outcome(value: &Value) -> Result<Outcome, Error> {
    let shape = || {
        Error::invalid_at(InvalidInputKind::Malformed, "outcome_json", 
            "outcome_json must be one of {\"committed\": result}, {\"not_executed\": \"msg\"}, {\"ambiguous\": \"msg\"}"
                ,
        )
    };
    let Some((kind, payload)) = value.as_object().filter(|map| map.len() == 1).and_then(|map| map.iter().next()) else {
        return Err(shape());
    };
    match (kind.as_str(), payload) {
        ("committed", result) => Ok(Outcome::Committed(StoredResult::from_value(result))),
        ("not_executed", Value::String(msg)) => Ok(Outcome::NotExecuted(msg.clone())),
        ("ambiguous", Value::String(msg)) => Ok(Outcome::Ambiguous(msg.clone())),
        _ => Err(shape()),
    }
}

/// Reserves an effect key for one action, consuming a granted approval in the same write when
/// one is given (the approval is checked first; a refused reservation leaves it granted). The
/// record is RESERVED until `warden_store_begin`.
///
/// - `h`: an open handle. Required.
/// - `action_json`, `len`: UTF-8 JSON `{"name", "arguments", "principal", "resource",
///   "environment"}` as for `warden_action_hash`; an absent `environment` is the handle's.
///   Required. A fresh `action_id` is assigned; read it from the returned record.
/// - `key`, `key_len`: the effect key. Required.
/// - `approval_id`, `approval_len`: a granted approval for this exact action. Optional (NULL, 0).
/// - `lease_ms`: how long the reservation holds; 0 is the default five minutes.
/// - `out`: NULL, or receives the effect record on WARDEN_RESULT_OK only; free it with
///   `warden_buf_free`.
/// - `err`: NULL, or receives the error object on failure.
///
/// Returns WARDEN_RESULT_OK; a refusal: WARDEN_RESULT_DUPLICATE, WARDEN_RESULT_IN_PROGRESS,
/// WARDEN_RESULT_AMBIGUOUS, WARDEN_RESULT_ATTEMPT_CEILING, WARDEN_RESULT_APPROVAL_MISMATCH,
/// WARDEN_RESULT_DENIED (a denied approval); or a fault: WARDEN_RESULT_INVALID_INPUT,
/// WARDEN_RESULT_STORE, WARDEN_RESULT_PANIC, WARDEN_RESULT_POISONED.
///
/// Thread safety: safe to call concurrently on one handle.
///
/// # Safety
/// `h` is NULL or a live handle; byte pointers follow the conventions at the top of this
/// header; `out` and `err` are NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn warden_store_reserve(
    h: *mut warden_handle,
    action_json: *const u8,
    len: usize,
    key: *const u8,
    key_len: usize,
    approval_id: *const u8,
    approval_len: usize,
    lease_ms: u64,
    out: *mut warden_buf,
    err: *mut warden_buf,
) -> warden_result {
    let work = |handle: &warden_handle| -> Result<(), Error> {
        let out = Out::optional(out);
        // SAFETY: the caller's guarantee for each (ptr, len) pair.
        let (value, key, approval_id) = unsafe {
            (
                required_json(action_json, len, "action_json")?,
                required_str(key, key_len, "key")?,
                optional_str(approval_id, approval_len, "approval_id")?,
            )
        };
        let action = action(&value, handle.environment())?;
        let lease =
            match lease_ms {
                0 => None,
                ms => Some(i64::try_from(ms).ok().and_then(|ms| ms.checked_mul(1000)).ok_or_else(|| {
                    Error::invalid_at(InvalidInputKind::OutOfRange, "lease_ms", "lease_ms is too large")
                })?),
            };
        let record = handle.kernel.consume_and_reserve(&action, key, approval_id, lease, None)?;
        // SAFETY: `out` is NULL or writable (the caller's guarantee).
        unsafe { out.write_json(&record.to_json()) };
        Ok(())
    };
    // SAFETY: the caller's guarantees for `h` and `err`, forwarded.
    unsafe { with_handle(h, err, work) }
}

/// Moves a RESERVED effect to EXECUTING for its holder: call it right before running the effect.
///
/// - `h`: an open handle. Required.
/// - `key`, `key_len`: the effect key. Required.
/// - `action_id`, `id_len`: the holder's `action_id` from the reserved record. Required.
/// - `attempt`: the record's `attempt`.
/// - `out`: NULL, or receives the effect record on WARDEN_RESULT_OK only; free it with
///   `warden_buf_free`.
/// - `err`: NULL, or receives the error object on failure.
///
/// A holder whose lease lapsed before it began is refused with WARDEN_RESULT_AMBIGUOUS, and the
/// record becomes AMBIGUOUS in the same write (the holder may have started the effect anyway).
///
/// Returns WARDEN_RESULT_OK; a refusal when this holder no longer holds the key
/// (WARDEN_RESULT_LATE_OUTCOME, WARDEN_RESULT_AMBIGUOUS, WARDEN_RESULT_DUPLICATE,
/// WARDEN_RESULT_IN_PROGRESS, WARDEN_RESULT_NOT_FOUND); WARDEN_RESULT_INVALID_INPUT;
/// WARDEN_RESULT_STORE; WARDEN_RESULT_PANIC; WARDEN_RESULT_POISONED.
///
/// Thread safety: safe to call concurrently on one handle.
///
/// # Safety
/// `h` is NULL or a live handle; byte pointers follow the conventions at the top of this
/// header; `out` and `err` are NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn warden_store_begin(
    h: *mut warden_handle,
    key: *const u8,
    key_len: usize,
    action_id: *const u8,
    id_len: usize,
    attempt: u32,
    out: *mut warden_buf,
    err: *mut warden_buf,
) -> warden_result {
    let work = |handle: &warden_handle| -> Result<(), Error> {
        let out = Out::optional(out);
        // SAFETY: the caller's guarantee for each (ptr, len) pair.
        let (key, action_id) =
            unsafe { (required_str(key, key_len, "key")?, required_str(action_id, id_len, "action_id")?) };
        let record = handle.kernel.begin(key, action_id, attempt)?;
        // SAFETY: `out` is NULL or writable (the caller's guarantee).
        unsafe { out.write_json(&record.to_json()) };
        Ok(())
    };
    // SAFETY: the caller's guarantees for `h` and `err`, forwarded.
    unsafe { with_handle(h, err, work) }
}

/// Reports the outcome of an attempt without a permit: COMMITTED, FAILED (not executed) or
/// AMBIGUOUS.
///
/// - `h`: an open handle. Required.
/// - `key`, `key_len`: the effect key. Required.
/// - `action_id`, `id_len`: the holder's `action_id`. Required.
/// - `attempt`: the attempt being reported.
/// - `outcome_json`, `outcome_len`: UTF-8 JSON, exactly one of `{"committed": result}`,
///   `{"not_executed": "msg"}`, `{"ambiguous": "msg"}`. Required.
/// - `out`: NULL, or receives the effect record on WARDEN_RESULT_OK only; free it with
///   `warden_buf_free`.
/// - `err`: NULL, or receives the error object on failure.
///
/// `committed` and `not_executed` need an attempt that began (`warden_store_begin`): for a
/// record still RESERVED they return WARDEN_RESULT_INVALID_INPUT and write nothing; only
/// `ambiguous` is accepted for an attempt that never began.
///
/// Returns WARDEN_RESULT_OK; a refusal when the record moved on (WARDEN_RESULT_LATE_OUTCOME,
/// WARDEN_RESULT_NOT_FOUND, …); WARDEN_RESULT_INVALID_INPUT; WARDEN_RESULT_STORE;
/// WARDEN_RESULT_PANIC; WARDEN_RESULT_POISONED.
///
/// Thread safety: safe to call concurrently on one handle.
///
/// # Safety
/// `h` is NULL or a live handle; byte pointers follow the conventions at the top of this
/// header; `out` and `err` are NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn warden_store_complete(
    h: *mut warden_handle,
    key: *const u8,
    key_len: usize,
    action_id: *const u8,
    id_len: usize,
    attempt: u32,
    outcome_json: *const u8,
    outcome_len: usize,
    out: *mut warden_buf,
    err: *mut warden_buf,
) -> warden_result {
    let work = |handle: &warden_handle| -> Result<(), Error> {
        let out = Out::optional(out);
        // SAFETY: the caller's guarantee for each (ptr, len) pair.
        let (key, action_id, value) = unsafe {
            (
                required_str(key, key_len, "key")?,
                required_str(action_id, id_len, "action_id")?,
                required_json(outcome_json, outcome_len, "outcome_json")?,
            )
        };
        let record = handle.kernel.complete(key, action_id, attempt, outcome(&value)?)?;
        // SAFETY: `out` is NULL or writable (the caller's guarantee).
        unsafe { out.write_json(&record.to_json()) };
        Ok(())
    };
    // SAFETY: the caller's guarantees for `h` and `err`, forwarded.
    unsafe { with_handle(h, err, work) }
}

/// Marks an in-flight effect AMBIGUOUS (idempotent from RESERVED, EXECUTING and AMBIGUOUS), e.g.
/// when a worker is known to have died mid-call. While the lease is live only its holder may
/// mark it, so the caller names the holder; a lapsed lease may be marked without one.
///
/// - `h`: an open handle. Required.
/// - `key`, `key_len`: the effect key. Required.
/// - `action_id`, `id_len`: the holder's `action_id` from the record. Optional (NULL, 0) only
///   when the lease has lapsed; when given it must be the record's holder, lapsed or not.
/// - `attempt`: the holder's `attempt` (ignored when `action_id` is NULL).
/// - `msg`, `msg_len`: what happened, UTF-8. Optional (NULL, 0): a generic message.
/// - `out`: NULL, or receives the effect record on WARDEN_RESULT_OK only; free it with
///   `warden_buf_free`.
/// - `err`: NULL, or receives the error object on failure.
///
/// Returns WARDEN_RESULT_OK; WARDEN_RESULT_IN_PROGRESS (a live lease and no holder named, or
/// another holder named; the error names the holder); a refusal when the effect is not in
/// flight (WARDEN_RESULT_INVALID_INPUT for a known outcome or no record, …);
/// WARDEN_RESULT_STORE; WARDEN_RESULT_PANIC; WARDEN_RESULT_POISONED.
///
/// Thread safety: safe to call concurrently on one handle.
///
/// # Safety
/// `h` is NULL or a live handle; byte pointers follow the conventions at the top of this
/// header; `out` and `err` are NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn warden_store_mark_ambiguous(
    h: *mut warden_handle,
    key: *const u8,
    key_len: usize,
    action_id: *const u8,
    id_len: usize,
    attempt: u32,
    msg: *const u8,
    msg_len: usize,
    out: *mut warden_buf,
    err: *mut warden_buf,
) -> warden_result {
    let work = |handle: &warden_handle| -> Result<(), Error> {
        let out = Out::optional(out);
        // SAFETY: the caller's guarantee for each (ptr, len) pair.
        let (key, action_id, msg) = unsafe {
            (
                required_str(key, key_len, "key")?,
                optional_str(action_id, id_len, "action_id")?,
                optional_str(msg, msg_len, "msg")?,
            )
        };
        let holder = action_id.map(|id| (id, attempt));
        let record = handle.kernel.mark_ambiguous(
            key,
            holder,
            msg.unwrap_or("marked ambiguous by the integrator's pipeline"),
        )?;
        // SAFETY: `out` is NULL or writable (the caller's guarantee).
        unsafe { out.write_json(&record.to_json()) };
        Ok(())
    };
    // SAFETY: the caller's guarantees for `h` and `err`, forwarded.
    unsafe { with_handle(h, err, work) }
}

/// Extends the lease of an EXECUTING attempt to `lease_ms` milliseconds from now (the
/// integrator's `warden_permit_extend_lease`): only its holder, only while the lease is live,
/// and never shorter than the current lease.
///
/// - `h`: an open handle. Required.
/// - `key`, `key_len`: the effect key. Required.
/// - `action_id`, `id_len`: the holder's `action_id`. Required.
/// - `attempt`: the holder's `attempt`.
/// - `lease_ms`: milliseconds from now, at least 1.
/// - `out`: NULL, or receives the effect record on WARDEN_RESULT_OK only; free it with
///   `warden_buf_free`.
/// - `err`: NULL, or receives the error object on failure.
///
/// Returns WARDEN_RESULT_OK; WARDEN_RESULT_AMBIGUOUS (the lease lapsed, or no record);
/// WARDEN_RESULT_IN_PROGRESS (a live lease that is not an EXECUTING attempt of this holder:
/// another holder's, or this holder's RESERVED attempt that has not begun — call
/// `warden_store_begin` first); WARDEN_RESULT_DUPLICATE (already committed);
/// WARDEN_RESULT_INVALID_INPUT (`lease_ms` 0 or too large, a shorter lease);
/// WARDEN_RESULT_STORE; WARDEN_RESULT_PANIC; WARDEN_RESULT_POISONED.
///
/// Thread safety: safe to call concurrently on one handle.
///
/// # Safety
/// `h` is NULL or a live handle; byte pointers follow the conventions at the top of this
/// header; `out` and `err` are NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn warden_store_extend_lease(
    h: *mut warden_handle,
    key: *const u8,
    key_len: usize,
    action_id: *const u8,
    id_len: usize,
    attempt: u32,
    lease_ms: u64,
    out: *mut warden_buf,
    err: *mut warden_buf,
) -> warden_result {
    let work = |handle: &warden_handle| -> Result<(), Error> {
        let out = Out::optional(out);
        // SAFETY: the caller's guarantee for each (ptr, len) pair.
        let (key, action_id) =
            unsafe { (required_str(key, key_len, "key")?, required_str(action_id, id_len, "action_id")?) };
        let lease = lease_micros(lease_ms)?;
        let until = handle.kernel.now().saturating_add(lease);
        let record = handle.kernel.extend_lease(key, action_id, attempt, until)?;
        // SAFETY: `out` is NULL or writable (the caller's guarantee).
        unsafe { out.write_json(&record.to_json()) };
        Ok(())
    };
    // SAFETY: the caller's guarantees for `h` and `err`, forwarded.
    unsafe { with_handle(h, err, work) }
}

/// Consumes a granted approval for an action that reserves no effect key (a read, or an effect
/// the integrator protects elsewhere): the checks of `warden_store_reserve` — granted,
/// unexpired, unconsumed, bound to this exact action — and the consume, in one write.
///
/// - `h`: an open handle. Required.
/// - `action_json`, `len`: the action, as for `warden_store_reserve`. Required.
/// - `approval_id`, `approval_len`: the granted approval. Required.
/// - `out`: NULL, or receives the consumed approval on WARDEN_RESULT_OK only; free it with
///   `warden_buf_free`.
/// - `err`: NULL, or receives the error object on failure.
///
/// Returns WARDEN_RESULT_OK; a refusal: WARDEN_RESULT_APPROVAL_MISMATCH, WARDEN_RESULT_DENIED
/// (a denied approval), WARDEN_RESULT_NOT_FOUND, …; or a fault: WARDEN_RESULT_INVALID_INPUT,
/// WARDEN_RESULT_STORE, WARDEN_RESULT_PANIC, WARDEN_RESULT_POISONED.
///
/// Thread safety: safe to call concurrently on one handle.
///
/// # Safety
/// `h` is NULL or a live handle; byte pointers follow the conventions at the top of this
/// header; `out` and `err` are NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn warden_store_consume_approval(
    h: *mut warden_handle,
    action_json: *const u8,
    len: usize,
    approval_id: *const u8,
    approval_len: usize,
    out: *mut warden_buf,
    err: *mut warden_buf,
) -> warden_result {
    let work = |handle: &warden_handle| -> Result<(), Error> {
        let out = Out::optional(out);
        // SAFETY: the caller's guarantee for each (ptr, len) pair.
        let (value, approval_id) = unsafe {
            (required_json(action_json, len, "action_json")?, required_str(approval_id, approval_len, "approval_id")?)
        };
        let action = action(&value, handle.environment())?;
        let record = handle.kernel.consume_approval(&action, approval_id)?;
        // SAFETY: `out` is NULL or writable (the caller's guarantee).
        unsafe { out.write_json(&record.to_json()) };
        Ok(())
    };
    // SAFETY: the caller's guarantees for `h` and `err`, forwarded.
    unsafe { with_handle(h, err, work) }
}

/// A lease of `lease_ms` milliseconds in microseconds: 1 ms up to what microseconds can hold.
pub(super) fn lease_micros(lease_ms: u64) -> Result<crate::clock::Micros, Error> {
    i64::try_from(lease_ms).ok().filter(|ms| *ms > 0).and_then(|ms| ms.checked_mul(1000)).ok_or_else(|| {
        Error::invalid_at(
            InvalidInputKind::OutOfRange,
            "lease_ms",
            format!("lease_ms must be between 1 and {}", i64::MAX / 1000),
        )
    })
}
