//! Result codes: one flat `uint32_t`, 0 for OK, refusals in 100..199, faults in 200..299.
//! Codes are only ever added; a retired code is never reused. Every `Error` maps to exactly one
//! code through an exhaustive `match` with no catch-all arm, so a new error variant cannot ship
//! without a code.

use std::ffi::{c_char, CStr};

use crate::error::{DuplicateState, Error};
use crate::sight::SightKind;

use super::unwind::infallible;

/// A result code. 0 is OK; 100..199 are refusals (the kernel said no, as designed); 200..299
/// are faults (something is broken). See the table at the top of this header.
#[allow(non_camel_case_types)]
pub type warden_result = u32;

/// Success.
pub const WARDEN_RESULT_OK: warden_result = 0;
/// Refusal: the policy (or a denied approval, an expired principal, an unknown action) said no.
pub const WARDEN_RESULT_DENIED: warden_result = 100;
/// Refusal: a human must approve first; the error object carries `request_id`, `expires_at`
/// and `action_hash`.
pub const WARDEN_RESULT_APPROVAL_REQUIRED: warden_result = 101;
/// Refusal: the presented approval does not authorize this exact action now (unknown,
/// mismatched hash, expired, already answered or consumed, approver is the requester).
pub const WARDEN_RESULT_APPROVAL_MISMATCH: warden_result = 102;
/// Refusal: the effect was already committed (`"state": "committed"`); it will not run twice.
pub const WARDEN_RESULT_DUPLICATE: warden_result = 103;
/// Refusal: another attempt holds the effect right now (`"state": "in_progress"`).
pub const WARDEN_RESULT_IN_PROGRESS: warden_result = 104;
/// Refusal: the effect's outcome is unknown; a human must resolve it before a retry.
pub const WARDEN_RESULT_AMBIGUOUS: warden_result = 105;
/// Refusal: the effect failed as many times as its `max_attempts` allows.
pub const WARDEN_RESULT_ATTEMPT_CEILING: warden_result = 106;
/// Refusal: only an AMBIGUOUS effect is resolved by hand, and this one is not.
pub const WARDEN_RESULT_NOT_RESOLVABLE: warden_result = 107;
/// Refusal: the record moved on before this outcome arrived; it was kept as evidence only.
pub const WARDEN_RESULT_LATE_OUTCOME: warden_result = 108;
/// Refusal: the named record does not exist.
pub const WARDEN_RESULT_NOT_FOUND: warden_result = 109;
/// Refusal: a sight query named something outside the configured windows (an unknown source,
/// endpoint, param or field; a param value of the wrong type or out of bounds; an unknown
/// argument such as `url`; a bad page cursor or limit; snapshots of different windows). Nothing
/// was sent. The error object's `reason` is the sight code, e.g. `invalid_params`.
pub const WARDEN_RESULT_OUT_OF_WINDOW: warden_result = 110;
/// Refusal: a delegation was refused at creation (it would widen or drop what its parent
/// constrains, or its parent is unknown, revoked, expired or not delegable, or the creator is
/// not the parent's subject, or it is too deep). The error object carries `reason` (e.g.
/// `containment`), `dimension` (for a containment refusal, e.g. `constraints`) and
/// `parent_id`. Nothing was written but the DELEGATION_REJECTED event.
pub const WARDEN_RESULT_AUTHORITY_ESCALATION: warden_result = 111;
/// Fault: bad input (a NULL required pointer, invalid UTF-8, bad JSON, a bad value).
pub const WARDEN_RESULT_INVALID_INPUT: warden_result = 200;
/// Fault: the store failed; the handle is poisoned until closed and reopened.
pub const WARDEN_RESULT_STORE: warden_result = 201;
/// Fault: the configuration document is missing, unreadable or invalid.
pub const WARDEN_RESULT_CONFIG: warden_result = 202;
/// Fault: a confined fetch failed, was refused (a redirect, an oversized or invalid response)
/// or was cancelled, or its credential is unavailable. No values were returned; the error
/// object's `reason` is the sight code, e.g. `timeout`, `redirect_refused`, `aborted`.
pub const WARDEN_RESULT_FETCH: warden_result = 203;
/// Fault: a panic was caught inside the library; the handle is now poisoned.
pub const WARDEN_RESULT_PANIC: warden_result = 204;
/// Fault: the handle is poisoned after an earlier store fault or panic; close and reopen it.
pub const WARDEN_RESULT_POISONED: warden_result = 205;
/// Fault: a binding found a library with another ABI version (reserved for bindings).
pub const WARDEN_RESULT_ABI_MISMATCH: warden_result = 206;

/// Every code and its name, in code order. `warden_result_name` and the error object's
/// `"code"` field read this table.
pub(super) const CODES: [(warden_result, &CStr); 20] = [
    (WARDEN_RESULT_OK, c"WARDEN_RESULT_OK"),
    (WARDEN_RESULT_DENIED, c"WARDEN_RESULT_DENIED"),
    (WARDEN_RESULT_APPROVAL_REQUIRED, c"WARDEN_RESULT_APPROVAL_REQUIRED"),
    (WARDEN_RESULT_APPROVAL_MISMATCH, c"WARDEN_RESULT_APPROVAL_MISMATCH"),
    (WARDEN_RESULT_DUPLICATE, c"WARDEN_RESULT_DUPLICATE"),
    (WARDEN_RESULT_IN_PROGRESS, c"WARDEN_RESULT_IN_PROGRESS"),
    (WARDEN_RESULT_AMBIGUOUS, c"WARDEN_RESULT_AMBIGUOUS"),
    (WARDEN_RESULT_ATTEMPT_CEILING, c"WARDEN_RESULT_ATTEMPT_CEILING"),
    (WARDEN_RESULT_NOT_RESOLVABLE, c"WARDEN_RESULT_NOT_RESOLVABLE"),
    (WARDEN_RESULT_LATE_OUTCOME, c"WARDEN_RESULT_LATE_OUTCOME"),
    (WARDEN_RESULT_NOT_FOUND, c"WARDEN_RESULT_NOT_FOUND"),
    (WARDEN_RESULT_OUT_OF_WINDOW, c"WARDEN_RESULT_OUT_OF_WINDOW"),
    (WARDEN_RESULT_AUTHORITY_ESCALATION, c"WARDEN_RESULT_AUTHORITY_ESCALATION"),
    (WARDEN_RESULT_INVALID_INPUT, c"WARDEN_RESULT_INVALID_INPUT"),
    (WARDEN_RESULT_STORE, c"WARDEN_RESULT_STORE"),
    (WARDEN_RESULT_CONFIG, c"WARDEN_RESULT_CONFIG"),
    (WARDEN_RESULT_FETCH, c"WARDEN_RESULT_FETCH"),
    (WARDEN_RESULT_PANIC, c"WARDEN_RESULT_PANIC"),
    (WARDEN_RESULT_POISONED, c"WARDEN_RESULT_POISONED"),
    (WARDEN_RESULT_ABI_MISMATCH, c"WARDEN_RESULT_ABI_MISMATCH"),
];

const UNKNOWN: &CStr = c"WARDEN_RESULT_UNKNOWN";

/// The code for an error. No `_` arm: a new `Error` variant does not compile until it has a code.
pub(crate) fn code_of(error: &Error) -> warden_result {
    match error {
        Error::Denied { .. } | Error::AuthorityDenied { .. } => WARDEN_RESULT_DENIED,
        Error::DelegationRefused { .. } => WARDEN_RESULT_AUTHORITY_ESCALATION,
        Error::ApprovalRequired { .. } => WARDEN_RESULT_APPROVAL_REQUIRED,
        Error::ApprovalMismatch { .. } => WARDEN_RESULT_APPROVAL_MISMATCH,
        Error::Duplicate { state: DuplicateState::Committed, .. } => WARDEN_RESULT_DUPLICATE,
        Error::Duplicate { state: DuplicateState::InProgress, .. } => WARDEN_RESULT_IN_PROGRESS,
        Error::Ambiguous { .. } => WARDEN_RESULT_AMBIGUOUS,
        Error::AttemptCeiling { .. } => WARDEN_RESULT_ATTEMPT_CEILING,
        Error::NotResolvable { .. } => WARDEN_RESULT_NOT_RESOLVABLE,
        Error::LateOutcome { .. } => WARDEN_RESULT_LATE_OUTCOME,
        Error::NotFound(_) => WARDEN_RESULT_NOT_FOUND,
        Error::Sight(sight) => match sight.kind() {
            SightKind::OutOfWindow => WARDEN_RESULT_OUT_OF_WINDOW,
            SightKind::NotFound => WARDEN_RESULT_NOT_FOUND,
            SightKind::Config => WARDEN_RESULT_CONFIG,
            SightKind::Fetch => WARDEN_RESULT_FETCH,
        },
        Error::InvalidInput(_) | Error::NoPrincipal { .. } => WARDEN_RESULT_INVALID_INPUT,
        Error::Store(_) | Error::Unavailable(_) => WARDEN_RESULT_STORE,
        Error::Config(_) => WARDEN_RESULT_CONFIG,
        Error::Poisoned(_) => WARDEN_RESULT_POISONED,
        Error::Panic(_) => WARDEN_RESULT_PANIC,
    }
}

/// The constant's name for `code`, or `WARDEN_RESULT_UNKNOWN`.
pub(super) fn name_of(code: warden_result) -> &'static CStr {
    CODES.iter().find(|(known, _)| *known == code).map_or(UNKNOWN, |(_, name)| name)
}

/// The name as UTF-8 text, for the error object.
pub(crate) fn name_str(code: warden_result) -> &'static str {
    name_of(code).to_str().unwrap_or("WARDEN_RESULT_UNKNOWN")
}

/// The error object: `{"code", "reason", "message", "refusal", …the refusal's fields}`.
pub(super) fn error_json(error: &Error) -> serde_json::Value {
    let mut value = error.to_json();
    if let Some(map) = value.as_object_mut() {
        map.insert("code".into(), name_str(code_of(error)).into());
    }
    value
}

/// Returns the name of a result code, e.g. "WARDEN_RESULT_DUPLICATE", as a static
/// NUL-terminated string; "WARDEN_RESULT_UNKNOWN" for a code this library does not know.
///
/// Ownership: the string is static; never free it. Never returns NULL, never allocates.
///
/// Thread safety: safe from any thread.
#[no_mangle]
pub extern "C" fn warden_result_name(code: warden_result) -> *const c_char {
    infallible(UNKNOWN.as_ptr(), || name_of(code).as_ptr())
}
