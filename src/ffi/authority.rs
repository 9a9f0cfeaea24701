//! Authority: delegate, revoke (one id or a sweep), list delegations. A handle opened with a
//! document that has an `authority:` section; proposals carry `task` and `hop` in the
//! `warden_propose` request.

use serde_json::Value;

use crate::authority::CreatedVia;
use crate::error::{Error, InvalidInputKind, StoreFaultKind};
use crate::kernel::authority::{ListedDelegation, Sweep};

use super::bytes::{optional_str, required_json, required_str, warden_buf, Out};
use super::handle::{warden_handle, with_handle};
use super::request::Fields;
use super::result::warden_result;

const DELEGATE_FIELDS: [&str; 5] = ["parent_id", "grant", "by", "by_expires_at_ms", "via"];
const SWEEP_FIELDS: [&str; 3] = ["created_by", "under", "by"];

/// The most delegations one `warden_delegations` call lists when `limit` is 0.
const DEFAULT_PAGE: usize = crate::kernel::authority::DELEGATION_PAGE;

/// Creates a delegation: part of a root grant's or a delegation's authority, handed to the
/// grantee the grant names, by the principal `by`. The checks run in ctrlrun's order (the
/// creator's credential unexpired, the parent live and delegable with a valid chain, the
/// creator the parent's subject, the depth within `max_delegation_depth`, the child contained
/// on every dimension — omitting one the parent constrains is refused) and the row is written
/// in the same transaction, with a DELEGATION_CREATED event.
///
/// - `h`: an open handle whose document has an `authority:` section. Required.
/// - `request`, `len`: UTF-8 JSON `{"parent_id": str, "grant": {...}, "by": {"agent": str,
///   "user": str|null}, "by_expires_at_ms": int|null, "via": "api"|"cli"|"hop"|null}`.
///   Required. `grant` holds the keys of a grant minus `id` (assigned here); `via` (default
///   `api`) records how the delegation came to be: through the application, typed at a shell,
///   or handed across an agent boundary.
/// - `out`: NULL, or receives `{"delegation_id": "dlg_…", "parent_id", "depth", "grant",
///   "created_by", "created_via", "created_at", "revoked": false, …}` on WARDEN_RESULT_OK only;
///   free it with `warden_buf_free`.
/// - `err`: NULL, or receives the error object on failure. For
///   WARDEN_RESULT_AUTHORITY_ESCALATION it carries `reason` (`principal_expired`,
///   `id_assigned`, `unknown_parent`, `parent_not_delegable`, `parent_not_valid`,
///   `not_the_subject`, `max_depth`, `containment`), `dimension` (containment only) and
///   `parent_id`; a DELEGATION_REJECTED event was written and no row.
///
/// Returns WARDEN_RESULT_OK; WARDEN_RESULT_AUTHORITY_ESCALATION; WARDEN_RESULT_INVALID_INPUT
/// (a malformed grant or request); WARDEN_RESULT_CONFIG (no document, or no authority section);
/// WARDEN_RESULT_STORE; WARDEN_RESULT_PANIC; WARDEN_RESULT_POISONED.
///
/// Thread safety: safe to call concurrently on one handle.
///
/// # Safety
/// `h` is NULL or a live handle; byte pointers follow the conventions at the top of this
/// header; `out` and `err` are NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn warden_delegate(
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
        let fields = Fields::new(&value, "request", &DELEGATE_FIELDS)?;
        let parent_id = fields.required_string("parent_id")?;
        let grant = match value.get("grant") {
            Some(grant @ Value::Object(_)) => grant.to_string(),
            _ => {
                return Err(Error::invalid_at(
                    InvalidInputKind::Malformed,
                    "request.grant",
                    "request.grant must be a JSON object (a grant without 'id')",
                ))
            }
        };
        let by = fields.required_principal_named("by")?;
        let via = match fields.string("via")? {
            None => CreatedVia::Api,
            Some(text) => CreatedVia::parse(text).ok_or_else(|| {
                Error::invalid_at(
                    InvalidInputKind::Malformed,
                    "request.via",
                    "request.via must be \"api\", \"cli\" or \"hop\"",
                )
            })?,
        };
        let warden = handle.warden()?;
        let id = warden.delegate_text(parent_id, &grant, &by, fields.millis("by_expires_at_ms")?, via)?;
        let record = match warden.delegation(&id)? {
            Some(found) => found.to_json(),
            None => {
                return Err(Error::store(
                    StoreFaultKind::Damaged,
                    format!("delegation {id} was created but cannot be read back"),
                ))
            }
        };
        // SAFETY: `out` is NULL or writable (the caller's guarantee).
        unsafe { out.write_json(&record) };
        Ok(())
    };
    // SAFETY: the caller's guarantees for `h` and `err`, forwarded.
    unsafe { with_handle(h, err, work) }
}

/// Revokes one delegation: inserts its revocation row (never rewritten) and a
/// DELEGATION_REVOKED event. Transitive by structure: every delegation beneath it is denied
/// `authority_revoked` from now on, without touching their rows.
///
/// - `h`: an open handle. Required.
/// - `id`, `id_len`: the delegation id (`dlg_…`). Required.
/// - `by`, `by_len`: who revokes, one plain line. Optional (NULL, 0).
/// - `out`: NULL, or receives `{"delegation_id": str, "revoked": bool}` on WARDEN_RESULT_OK
///   only: `true` when this call revoked it, `false` when it already was (idempotent). Free it
///   with `warden_buf_free`.
/// - `err`: NULL, or receives the error object on failure.
///
/// Returns WARDEN_RESULT_OK; WARDEN_RESULT_NOT_FOUND (no such delegation: nothing revoked);
/// WARDEN_RESULT_INVALID_INPUT; WARDEN_RESULT_STORE; WARDEN_RESULT_PANIC; WARDEN_RESULT_POISONED.
///
/// Thread safety: safe to call concurrently on one handle.
///
/// # Safety
/// `h` is NULL or a live handle; byte pointers follow the conventions at the top of this
/// header; `out` and `err` are NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn warden_revoke(
    h: *mut warden_handle,
    id: *const u8,
    id_len: usize,
    by: *const u8,
    by_len: usize,
    out: *mut warden_buf,
    err: *mut warden_buf,
) -> warden_result {
    let work = |handle: &warden_handle| -> Result<(), Error> {
        let out = Out::optional(out);
        // SAFETY: the caller's guarantee for each (ptr, len) pair.
        let (id, by) = unsafe { (required_str(id, id_len, "id")?, optional_str(by, by_len, "by")?) };
        let revoked = handle.kernel.revoke(id, by)?;
        // SAFETY: `out` is NULL or writable (the caller's guarantee).
        unsafe { out.write_json(&serde_json::json!({"delegation_id": id, "revoked": revoked})) };
        Ok(())
    };
    // SAFETY: the caller's guarantees for `h` and `err`, forwarded.
    unsafe { with_handle(h, err, work) }
}

/// Revokes, in one write, every delegation a sweep selects: those an agent (and user) created,
/// or every delegation beneath an id (a root grant or a delegation), at any depth.
///
/// - `h`: an open handle. Required.
/// - `request`, `len`: UTF-8 JSON with exactly one of `"created_by": {"agent": str, "user":
///   str|null}` (a null user selects every user of that agent) and `"under": str`, and
///   optionally `"by": str` (who revokes). Required.
/// - `out`: NULL, or receives `[{"delegation_id": str, "revoked": bool}, …]` on
///   WARDEN_RESULT_OK only (`false`: already revoked); free it with `warden_buf_free`.
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
pub unsafe extern "C" fn warden_revoke_sweep(
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
        let fields = Fields::new(&value, "request", &SWEEP_FIELDS)?;
        let sweep = match (fields.principal_named("created_by")?, fields.string("under")?) {
            (Some(creator), None) => Sweep::CreatedBy { agent: creator.agent, user: creator.user },
            (None, Some(under)) => Sweep::Under { id: under.to_owned() },
            _ => {
                return Err(Error::invalid_at(
                    InvalidInputKind::Conflict,
                    "request",
                    "a sweep names exactly one of \"created_by\": {\"agent\", \"user\"} and \"under\": id",
                ))
            }
        };
        let revoked = handle.kernel.revoke_sweep(sweep, fields.string("by")?)?;
        let list: Vec<Value> = revoked
            .into_iter()
            .map(|(id, written)| serde_json::json!({"delegation_id": id, "revoked": written}))
            .collect();
        // SAFETY: `out` is NULL or writable (the caller's guarantee).
        unsafe { out.write_json(&Value::Array(list)) };
        Ok(())
    };
    // SAFETY: the caller's guarantees for `h` and `err`, forwarded.
    unsafe { with_handle(h, err, work) }
}

/// Lists stored delegations in id order, revoked ones included, as a JSON array of
/// `{"delegation_id", "parent_id", "depth", "grant", "created_by", "created_via", "created_at",
/// "revoked", "revoked_at", "revoked_by", "readable", "problem"}` (a row whose grant no longer
/// parses is listed with `readable: false` and the problem).
///
/// - `h`: an open handle. Required.
/// - `after`, `after_len`: list ids after this one (the last id of the previous page).
///   Optional (NULL, 0): from the first.
/// - `limit`: at most this many; 0 means 1000.
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
pub unsafe extern "C" fn warden_delegations(
    h: *mut warden_handle,
    after: *const u8,
    after_len: usize,
    limit: u32,
    out: *mut warden_buf,
    err: *mut warden_buf,
) -> warden_result {
    let work = |handle: &warden_handle| -> Result<(), Error> {
        let out = Out::required(out, "out")?;
        // SAFETY: the caller's guarantee for (after, after_len).
        let after = unsafe { optional_str(after, after_len, "after") }?;
        let limit = match limit {
            0 => DEFAULT_PAGE,
            n => usize::try_from(n).unwrap_or(DEFAULT_PAGE),
        };
        let listed = handle.kernel.delegations(after, limit)?;
        // SAFETY: `out` was checked non-NULL and the caller guarantees it is writable.
        unsafe {
            out.write_json(&Value::Array(listed.iter().map(ListedDelegation::to_json).collect()));
        };
        Ok(())
    };
    // SAFETY: the caller's guarantees for `h` and `err`, forwarded.
    unsafe { with_handle(h, err, work) }
}

/// Lists every stored delegation in id order, revoked ones included, as one JSON array of the
/// objects `warden_delegations` lists: the library pages through the store (1000 a read), so a
/// binding never does.
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
pub unsafe extern "C" fn warden_delegations_all(
    h: *mut warden_handle,
    out: *mut warden_buf,
    err: *mut warden_buf,
) -> warden_result {
    let work = |handle: &warden_handle| -> Result<(), Error> {
        let out = Out::required(out, "out")?;
        let listed = handle.kernel.all_delegations()?;
        // SAFETY: `out` was checked non-NULL and the caller guarantees it is writable.
        unsafe {
            out.write_json(&Value::Array(listed.iter().map(ListedDelegation::to_json).collect()));
        };
        Ok(())
    };
    // SAFETY: the caller's guarantees for `h` and `err`, forwarded.
    unsafe { with_handle(h, err, work) }
}
