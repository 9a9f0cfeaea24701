//! Pure functions: no handle, no store. Canonical JSON and the action hash approvals bind to.

use super::bytes::{required_json, warden_buf, Out};
use super::panic::fallible;
use super::request::action;
use super::result::warden_result;
use crate::canonical::to_canonical_string;
use crate::error::Error;

use crate::limits::DEFAULT_ENVIRONMENT;

/// Returns the library's defaults as JSON, so that a binding never restates them:
/// `{"environment": "production", "list_limit": 100, "from_seq": 1, "after_id": 0, "limits":
/// {"max_request_bytes", "max_name_bytes", "max_arguments_bytes", "max_result_bytes",
/// "max_message_bytes"}, "result_excerpt_bytes", "max_result_depth", "max_wait_ms"}`. `list_limit` is what a
/// binding passes for `limit` when its caller names none (the C list calls take 0 as "no
/// limit"); `limits` are the bounds a handle opened without `{"limits": ...}` enforces.
///
/// - `out`: receives the JSON on WARDEN_RESULT_OK only. Required. Free it with
///   `warden_buf_free`.
/// - `err`: NULL, or receives the error object on failure.
///
/// Returns WARDEN_RESULT_OK; WARDEN_RESULT_INVALID_INPUT (NULL `out`); WARDEN_RESULT_PANIC.
///
/// Thread safety: safe from any thread.
///
/// # Safety
/// `out` and `err` are NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn warden_defaults(out: *mut warden_buf, err: *mut warden_buf) -> warden_result {
    let work = || -> Result<(), Error> {
        let out = Out::required(out, "out")?;
        // SAFETY: `out` was checked non-NULL and the caller guarantees it is writable.
        unsafe { out.write_json(&crate::limits::defaults_json()) };
        Ok(())
    };
    // SAFETY: the caller's guarantees for `err`, forwarded.
    unsafe { fallible(err, work) }
}

/// Returns the canonical form of a JSON document: sorted keys, no whitespace, integers exactly
/// as written, the bytes every Warden and ctrlrun hash is taken over. A float anywhere is
/// refused (INVALID_INPUT, naming its path).
///
/// - `json`, `len`: UTF-8 JSON. Required.
/// - `out`: receives the canonical text on WARDEN_RESULT_OK only. Required. Free it with
///   `warden_buf_free`.
/// - `err`: NULL, or receives the error object on failure.
///
/// Returns WARDEN_RESULT_OK; WARDEN_RESULT_INVALID_INPUT; WARDEN_RESULT_PANIC.
///
/// Thread safety: safe from any thread.
///
/// # Safety
/// Byte pointers follow the conventions at the top of this header; `out` and `err` are NULL or
/// valid for one write.
#[no_mangle]
pub unsafe extern "C" fn warden_canonical(
    json: *const u8,
    len: usize,
    out: *mut warden_buf,
    err: *mut warden_buf,
) -> warden_result {
    let work = || -> Result<(), Error> {
        let out = Out::required(out, "out")?;
        // SAFETY: the caller's guarantee for (json, len).
        let value = unsafe { required_json(json, len, "json") }?;
        let canonical = to_canonical_string(&value, "")?;
        // SAFETY: `out` was checked non-NULL and the caller guarantees it is writable.
        unsafe { out.write(warden_buf::from_text(&canonical)) };
        Ok(())
    };
    // SAFETY: the caller's guarantees for `err`, forwarded.
    unsafe { fallible(err, work) }
}

/// Returns the action hash an approval binds to: `sha256:` and 64 hex digits (plain text, no
/// quotes), identical to ctrlrun's `ctrlrun.action/v1` hash.
///
/// - `action_json`, `len`: UTF-8 JSON `{"name": str, "arguments": {...}, "principal":
///   {"agent": str, "user": str|null}, "resource": str|null, "environment": str}`. Required.
///   An absent `environment` is "production"; an unknown field is INVALID_INPUT.
/// - `out`: receives the hash on WARDEN_RESULT_OK only. Required. Free it with
///   `warden_buf_free`.
/// - `err`: NULL, or receives the error object on failure.
///
/// Returns WARDEN_RESULT_OK; WARDEN_RESULT_INVALID_INPUT; WARDEN_RESULT_PANIC.
///
/// Thread safety: safe from any thread.
///
/// # Safety
/// Byte pointers follow the conventions at the top of this header; `out` and `err` are NULL or
/// valid for one write.
#[no_mangle]
pub unsafe extern "C" fn warden_action_hash(
    action_json: *const u8,
    len: usize,
    out: *mut warden_buf,
    err: *mut warden_buf,
) -> warden_result {
    let work = || -> Result<(), Error> {
        let out = Out::required(out, "out")?;
        // SAFETY: the caller's guarantee for (action_json, len).
        let value = unsafe { required_json(action_json, len, "action_json") }?;
        let hash = action(&value, DEFAULT_ENVIRONMENT)?.hash()?;
        // SAFETY: `out` was checked non-NULL and the caller guarantees it is writable.
        unsafe { out.write(warden_buf::from_text(&hash)) };
        Ok(())
    };
    // SAFETY: the caller's guarantees for `err`, forwarded.
    unsafe { fallible(err, work) }
}
