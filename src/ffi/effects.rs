//! Effects, reconcile and resolve, receipts, the chain, events.

use serde_json::Value;

use crate::effect::{EffectRecord, EffectState};
use crate::error::{Error, InvalidInputKind};
use crate::kernel::ReconcileAnswer;
use crate::store::Event;

use super::bytes::{optional_str, required_str, warden_buf, Out};
use super::handle::{warden_handle, with_handle};
use super::result::warden_result;

/// A list limit: 0 means no limit.
fn limit(limit: u64) -> usize {
    match limit {
        0 => usize::MAX,
        n => usize::try_from(n).unwrap_or(usize::MAX),
    }
}

/// Applies a reconcile hook's answer about an AMBIGUOUS effect, in one write: "committed" and
/// "not_executed" resolve it (resolver `reconcile:<action>`); "unknown" moves nothing.
///
/// - `h`: an open handle. Required.
/// - `key`, `key_len`: the effect key. Required.
/// - `action`, `action_len`: the action name, recorded as the resolver. Required.
/// - `answer`, `answer_len`: "committed" | "not_executed" | "unknown". Required.
/// - `err`: NULL, or receives the error object on failure.
///
/// Returns WARDEN_RESULT_OK; WARDEN_RESULT_NOT_RESOLVABLE (the effect is not AMBIGUOUS);
/// WARDEN_RESULT_NOT_FOUND (no such effect); WARDEN_RESULT_INVALID_INPUT;
/// WARDEN_RESULT_STORE; WARDEN_RESULT_PANIC; WARDEN_RESULT_POISONED.
///
/// Thread safety: safe to call concurrently on one handle.
///
/// # Safety
/// `h` is NULL or a live handle; byte pointers follow the conventions at the top of this
/// header; `err` is NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn warden_effect_reconcile(
    h: *mut warden_handle,
    key: *const u8,
    key_len: usize,
    action: *const u8,
    action_len: usize,
    answer: *const u8,
    answer_len: usize,
    err: *mut warden_buf,
) -> warden_result {
    let work = |handle: &warden_handle| -> Result<(), Error> {
        // SAFETY: the caller's guarantee for each (ptr, len) pair.
        let (key, action, answer) = unsafe {
            (
                required_str(key, key_len, "key")?,
                required_str(action, action_len, "action")?,
                required_str(answer, answer_len, "answer")?,
            )
        };
        let answer = ReconcileAnswer::parse(answer).ok_or_else(|| {
            Error::invalid_at(
                InvalidInputKind::Malformed,
                "answer",
                format!("answer must be committed, not_executed or unknown, not {answer:?}"),
            )
        })?;
        handle.kernel.reconcile(key, action, answer)?;
        Ok(())
    };
    // SAFETY: the caller's guarantees for `h` and `err`, forwarded.
    unsafe { with_handle(h, err, work) }
}

/// A human says what happened to an AMBIGUOUS effect: "committed" or "failed" (after which a
/// retry may run). Only AMBIGUOUS moves.
///
/// - `h`: an open handle. Required.
/// - `key`, `key_len`: the effect key. Required.
/// - `to`, `to_len`: "committed" | "failed". Required.
/// - `by`, `by_len`: who resolves it, one plain line. Required.
/// - `out`: NULL, or receives the updated effect record on WARDEN_RESULT_OK only; free it with
///   `warden_buf_free`.
/// - `err`: NULL, or receives the error object on failure.
///
/// Returns WARDEN_RESULT_OK; WARDEN_RESULT_NOT_RESOLVABLE; WARDEN_RESULT_NOT_FOUND;
/// WARDEN_RESULT_INVALID_INPUT; WARDEN_RESULT_STORE; WARDEN_RESULT_PANIC; WARDEN_RESULT_POISONED.
///
/// Thread safety: safe to call concurrently on one handle.
///
/// # Safety
/// `h` is NULL or a live handle; byte pointers follow the conventions at the top of this
/// header; `out` and `err` are NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn warden_effect_resolve(
    h: *mut warden_handle,
    key: *const u8,
    key_len: usize,
    to: *const u8,
    to_len: usize,
    by: *const u8,
    by_len: usize,
    out: *mut warden_buf,
    err: *mut warden_buf,
) -> warden_result {
    // SAFETY: the caller's guarantees, forwarded unchanged.
    unsafe { resolve(h, (key, key_len), None, (to, to_len), (by, by_len), out, err) }
}

/// "committed" or "failed", as a resolution names where an AMBIGUOUS effect goes.
fn resolved_to(to: &str) -> Result<EffectState, Error> {
    match to {
        "committed" => Ok(EffectState::Committed),
        "failed" => Ok(EffectState::Failed),
        other => Err(Error::invalid_at(
            InvalidInputKind::Malformed,
            "to",
            format!("to must be committed or failed, not {other:?}"),
        )),
    }
}

/// `warden_effect_resolve`, bound to the attempt the resolver looked at: if the effect is now
/// AMBIGUOUS at another attempt (it was resolved and tried again since), nothing moves and the
/// call fails with WARDEN_RESULT_INVALID_INPUT naming both attempts. A host that shows an
/// effect to a person before they resolve it passes the `attempt` it showed.
///
/// - `h`: an open handle. Required.
/// - `key`, `key_len`: the effect key. Required.
/// - `attempt`: the attempt shown, 1 or more (the effect record's `attempt`).
/// - `to`, `to_len`: "committed" | "failed". Required.
/// - `by`, `by_len`: who resolves it, one plain line. Required.
/// - `out`: NULL, or receives the updated effect record on WARDEN_RESULT_OK only; free it with
///   `warden_buf_free`.
/// - `err`: NULL, or receives the error object on failure.
///
/// Returns WARDEN_RESULT_OK; WARDEN_RESULT_NOT_RESOLVABLE; WARDEN_RESULT_NOT_FOUND;
/// WARDEN_RESULT_INVALID_INPUT (an attempt of 0, another attempt than the effect's);
/// WARDEN_RESULT_STORE; WARDEN_RESULT_PANIC; WARDEN_RESULT_POISONED.
///
/// Thread safety: safe to call concurrently on one handle.
///
/// # Safety
/// `h` is NULL or a live handle; byte pointers follow the conventions at the top of this
/// header; `out` and `err` are NULL or valid for one write.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn warden_effect_resolve_attempt(
    h: *mut warden_handle,
    key: *const u8,
    key_len: usize,
    attempt: u32,
    to: *const u8,
    to_len: usize,
    by: *const u8,
    by_len: usize,
    out: *mut warden_buf,
    err: *mut warden_buf,
) -> warden_result {
    // SAFETY: the caller's guarantees, forwarded unchanged.
    unsafe { resolve(h, (key, key_len), Some(attempt), (to, to_len), (by, by_len), out, err) }
}

/// Both resolve exports: the strings read, `attempt` (when bound) checked and passed to
/// `Kernel::resolve_attempt`, the record written to `out`.
///
/// # Safety
/// As for `warden_effect_resolve`.
unsafe fn resolve(
    h: *mut warden_handle,
    key: (*const u8, usize),
    attempt: Option<u32>,
    to: (*const u8, usize),
    by: (*const u8, usize),
    out: *mut warden_buf,
    err: *mut warden_buf,
) -> warden_result {
    let work = |handle: &warden_handle| -> Result<(), Error> {
        let out = Out::optional(out);
        // SAFETY: the caller's guarantee for each (ptr, len) pair.
        let (key, to, by) = unsafe {
            (required_str(key.0, key.1, "key")?, required_str(to.0, to.1, "to")?, required_str(by.0, by.1, "by")?)
        };
        if attempt == Some(0) {
            return Err(Error::invalid_at(
                InvalidInputKind::OutOfRange,
                "attempt",
                "attempt starts at 1: pass the effect record's attempt",
            ));
        }
        let record = handle.kernel.resolve_attempt(key, attempt, resolved_to(to)?, by)?;
        // SAFETY: `out` is NULL or writable (the caller's guarantee).
        unsafe { out.write_json(&record.to_json()) };
        Ok(())
    };
    // SAFETY: the caller's guarantees for `h` and `err`, forwarded.
    unsafe { with_handle(h, err, work) }
}

/// Reads one effect record: the record, or JSON `null` when the key was never reserved.
///
/// - `h`: an open handle. Required.
/// - `key`, `key_len`: the effect key. Required.
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
pub unsafe extern "C" fn warden_effect_get(
    h: *mut warden_handle,
    key: *const u8,
    key_len: usize,
    out: *mut warden_buf,
    err: *mut warden_buf,
) -> warden_result {
    let work = |handle: &warden_handle| -> Result<(), Error> {
        let out = Out::required(out, "out")?;
        // SAFETY: the caller's guarantee for (key, key_len).
        let key = unsafe { required_str(key, key_len, "key") }?;
        let record = handle.kernel.effect(key)?;
        // SAFETY: `out` was checked non-NULL and the caller guarantees it is writable.
        unsafe { out.write_json(&record.as_ref().map_or(Value::Null, EffectRecord::to_json)) };
        Ok(())
    };
    // SAFETY: the caller's guarantees for `h` and `err`, forwarded.
    unsafe { with_handle(h, err, work) }
}

/// Lists effect records in key order as a JSON array.
///
/// - `h`: an open handle. Required.
/// - `state`, `state_len`: only records in this state ("reserved", "executing", "committed",
///   "failed", "ambiguous"). Optional (NULL, 0): every state.
/// - `limit`: at most this many records; 0 means no limit.
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
pub unsafe extern "C" fn warden_effects_list(
    h: *mut warden_handle,
    state: *const u8,
    state_len: usize,
    limit: u64,
    out: *mut warden_buf,
    err: *mut warden_buf,
) -> warden_result {
    let work = |handle: &warden_handle| -> Result<(), Error> {
        let out = Out::required(out, "out")?;
        // SAFETY: the caller's guarantee for (state, state_len).
        let state = unsafe { optional_str(state, state_len, "state") }?
            .map(|text| {
                EffectState::parse(text).ok_or_else(|| {
                    Error::invalid_at(
                        InvalidInputKind::Malformed,
                        "state",
                        format!("state must be reserved, executing, committed, failed or ambiguous, not {text:?}"),
                    )
                })
            })
            .transpose()?;
        let records = handle.kernel.effects(state, self::limit(limit))?;
        // SAFETY: `out` was checked non-NULL and the caller guarantees it is writable.
        unsafe { out.write_json(&Value::Array(records.iter().map(EffectRecord::to_json).collect())) };
        Ok(())
    };
    // SAFETY: the caller's guarantees for `h` and `err`, forwarded.
    unsafe { with_handle(h, err, work) }
}

/// Lists receipts with `seq >= from_seq`, in seq order, as a JSON array of receipt documents
/// (each with its `hash` and the `executor_result` kept outside the hash).
///
/// - `h`: an open handle. Required.
/// - `from_seq`: the first seq to return (receipts start at 1).
/// - `limit`: at most this many receipts; 0 means no limit.
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
pub unsafe extern "C" fn warden_receipts_list(
    h: *mut warden_handle,
    from_seq: u64,
    limit: u64,
    out: *mut warden_buf,
    err: *mut warden_buf,
) -> warden_result {
    let work = |handle: &warden_handle| -> Result<(), Error> {
        let out = Out::required(out, "out")?;
        let rows = handle.kernel.receipts(from_seq, self::limit(limit))?;
        // SAFETY: `out` was checked non-NULL and the caller guarantees it is writable.
        unsafe { out.write_json(&Value::Array(rows.iter().map(|(_, receipt)| receipt.to_json()).collect())) };
        Ok(())
    };
    // SAFETY: the caller's guarantees for `h` and `err`, forwarded.
    unsafe { with_handle(h, err, work) }
}

/// Walks the whole receipt chain and reports as JSON `{"ok", "verified", "chained",
/// "unchained", "head_seq", "head_hash", "breaks": [{"name", "seq", "detail"}],
/// "breaks_not_listed", "pruned_through"}` (`pruned_through`: the receipts `warden prune`
/// deleted before the first one walked, 0 when none). A broken chain is reported in the JSON
/// (`"ok": false`), not as an error code.
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
pub unsafe extern "C" fn warden_chain_verify(
    h: *mut warden_handle,
    out: *mut warden_buf,
    err: *mut warden_buf,
) -> warden_result {
    let work = |handle: &warden_handle| -> Result<(), Error> {
        let out = Out::required(out, "out")?;
        let report = handle.kernel.verify_chain()?;
        let report = serde_json::to_value(&report).map_err(|e| {
            Error::invalid(InvalidInputKind::NotCanonical, format!("internal: the chain report did not encode: {e}"))
        })?;
        // SAFETY: `out` was checked non-NULL and the caller guarantees it is writable.
        unsafe { out.write_json(&report) };
        Ok(())
    };
    // SAFETY: the caller's guarantees for `h` and `err`, forwarded.
    unsafe { with_handle(h, err, work) }
}

/// Lists events with `event_id > after_id`, ascending, as a JSON array of `{"event_id", "ts",
/// "type", "action_id", "effect_key", "approval_id", "data"}`.
///
/// - `h`: an open handle. Required.
/// - `after_id`: 0 for the first event; the last `event_id` seen to page on.
/// - `limit`: at most this many events; 0 means no limit.
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
pub unsafe extern "C" fn warden_events_list(
    h: *mut warden_handle,
    after_id: u64,
    limit: u64,
    out: *mut warden_buf,
    err: *mut warden_buf,
) -> warden_result {
    let work = |handle: &warden_handle| -> Result<(), Error> {
        let out = Out::required(out, "out")?;
        let events = handle.kernel.events(after_id, self::limit(limit))?;
        // SAFETY: `out` was checked non-NULL and the caller guarantees it is writable.
        unsafe { out.write_json(&Value::Array(events.iter().map(Event::to_json).collect())) };
        Ok(())
    };
    // SAFETY: the caller's guarantees for `h` and `err`, forwarded.
    unsafe { with_handle(h, err, work) }
}
