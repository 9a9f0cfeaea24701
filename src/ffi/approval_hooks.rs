//! The host's side of approvals: a hook told of each new request, a precondition provider
//! asked when an approval is requested and again just before it is spent, and a proposal that
//! takes that provider.

use std::ffi::c_void;
use std::sync::Arc;

use serde_json::Value;

use crate::approval::precondition::{PreconditionProvider, PreconditionSource};
use crate::approval::Verified;
use crate::error::{Error, InvalidInputKind};

use super::bytes::{required_json, warden_buf};
use super::handle::{warden_handle, with_handle};
use super::permit::warden_permit;
use super::request::Fields;
use super::result::warden_result;

/// The host's approval hook: called with the `user_data` given at registration and one new
/// approval request as UTF-8 JSON (the record `warden_approval_get` returns, arguments
/// included; not NUL-terminated, valid only during the call). Return 0; anything else is
/// recorded as a failed notification (event `APPROVAL_NOTIFY_FAILED`) and never fails the
/// action.
///
/// Thread safety: called on Warden's notification thread, never on the thread that proposed;
/// one call at a time per handle.
#[allow(non_camel_case_types)]
pub type warden_approval_fn =
    Option<unsafe extern "C" fn(user_data: *mut c_void, request: *const u8, request_len: usize) -> i32>;

/// Where a precondition provider puts the state it read. Opaque; valid only during the
/// callback call that received it.
#[allow(non_camel_case_types)]
pub struct warden_precondition_sink {
    state: Option<Value>,
}

/// A host precondition provider: called with the `user_data` given to
/// `warden_propose_checked` and the action as UTF-8 JSON `{"name", "arguments", "principal",
/// "resource", "environment"}`. Put the state the action depends on with
/// `warden_precondition_put(sink, json, len)` and return 0; a non-zero return, or no put,
/// refuses the call (WARDEN_RESULT_INVALID_INPUT; nothing requested, nothing spent).
///
/// Thread safety: called on the thread that called `warden_propose_checked`, before it returns.
#[allow(non_camel_case_types)]
pub type warden_precondition_fn = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        action: *const u8,
        action_len: usize,
        sink: *mut warden_precondition_sink,
    ) -> i32,
>;

type ApprovalCallback = unsafe extern "C" fn(*mut c_void, *const u8, usize) -> i32;
pub(super) type PreconditionCallback =
    unsafe extern "C" fn(*mut c_void, *const u8, usize, *mut warden_precondition_sink) -> i32;

/// A registered approval hook and its `user_data`.
struct HostHook {
    callback: ApprovalCallback,
    user_data: *mut c_void,
}

// SAFETY: `warden_approval_notify_set` documents that the callback and `user_data` must be
// callable from another thread until replaced or the handle is closed; Warden only passes the
// pointer back to the host's own function.
unsafe impl Send for HostHook {}
// SAFETY: as above; Warden never dereferences `user_data`, and calls one at a time.
unsafe impl Sync for HostHook {}

impl HostHook {
    fn call(&self, request: &Value) -> Result<(), String> {
        let text = request.to_string();
        // SAFETY: the host registered `callback` as a valid function taking these arguments;
        // `text` is live for the call.
        let status = unsafe { (self.callback)(self.user_data, text.as_ptr(), text.len()) };
        if status == 0 {
            Ok(())
        } else {
            Err(format!("the host's approval hook returned {status}"))
        }
    }
}

/// A precondition provider passed to one `warden_propose_checked` or
/// `warden_propose_recovering` call.
pub(super) struct HostPrecondition {
    callback: PreconditionCallback,
    user_data: *mut c_void,
}

impl HostPrecondition {
    pub(super) fn new(callback: PreconditionCallback, user_data: *mut c_void) -> HostPrecondition {
        HostPrecondition { callback, user_data }
    }
}

// SAFETY: the provider is called only on the thread that passed it, during that call; the
// marker lets it sit behind the `Sync` the pipeline's provider type asks for.
unsafe impl Sync for HostPrecondition {}

impl PreconditionProvider for HostPrecondition {
    fn state(&self, action: &Value) -> Result<Value, String> {
        let text = action.to_string();
        let mut sink = warden_precondition_sink { state: None };
        // SAFETY: the host passed `callback` as a valid function taking these arguments;
        // `text` is live for the call and `sink` is a live exclusive borrow for the call.
        let status = unsafe { (self.callback)(self.user_data, text.as_ptr(), text.len(), &raw mut sink) };
        match (status, sink.state) {
            (0, Some(state)) => Ok(state),
            (0, None) => Err("the precondition provider returned 0 without warden_precondition_put".into()),
            (status, _) => Err(format!("the precondition provider returned {status}")),
        }
    }
}

/// `identity` of a proposal request: `{"issuer": str|null, "claims": {...}}`.
pub(super) fn identity(fields: &Fields<'_>) -> Result<Option<Verified>, Error> {
    let Some(value) = fields.get("identity") else { return Ok(None) };
    let what = fields.what();
    let identity = Fields::new(value, "identity", &["issuer", "claims"])?;
    let claims = identity.get("claims").cloned().unwrap_or_else(|| Value::Object(Default::default()));
    Verified::new(identity.string("issuer")?, &claims).map(Some).map_err(|e| {
        Error::invalid_at(InvalidInputKind::Malformed, format!("{what}.identity"), format!("{what}.identity: {e}"))
    })
}

/// `precondition` of a proposal request (`{"state": any}`), or the host's provider; not both.
pub(super) fn precondition<'p>(
    fields: &Fields<'_>,
    provider: Option<&'p HostPrecondition>,
) -> Result<Option<PreconditionSource<'p>>, Error> {
    let given = match fields.get("precondition") {
        None => None,
        Some(value) => {
            Fields::new(value, "precondition", &["state"])?;
            Some(value.get("state").cloned().unwrap_or(Value::Null))
        }
    };
    match (given, provider) {
        (Some(_), Some(_)) => Err(Error::invalid_at(
            InvalidInputKind::Conflict,
            format!("{}.precondition", fields.what()),
            format!("{}.precondition and a precondition provider were both given; pass one", fields.what()),
        )),
        (Some(state), None) => Ok(Some(PreconditionSource::State(state))),
        (None, Some(provider)) => Ok(Some(PreconditionSource::Provider(provider))),
        (None, None) => Ok(None),
    }
}

/// Registers the host's approval hook on this handle, replacing the current one; a NULL
/// `callback` removes it. The hook is called once for each approval request this handle's
/// proposals (or `warden_approval_request`) create — not for a re-proposal that finds its
/// request still pending — off the proposing thread, so it never delays or fails an action.
///
/// - `h`: an open handle. Required.
/// - `callback`, `user_data`: see `warden_approval_fn`. `user_data` is passed back unchanged
///   and never dereferenced by Warden.
/// - `err`: NULL, or receives the error object on failure.
///
/// Returns WARDEN_RESULT_OK; WARDEN_RESULT_INVALID_INPUT; WARDEN_RESULT_PANIC;
/// WARDEN_RESULT_POISONED.
///
/// Thread safety: safe from any thread, but not from inside the hook itself. When this returns,
/// the previous hook is not running and will not be called again, so the host may free it;
/// the current one is released the same way by `warden_close`.
///
/// # Safety
/// `h` is NULL or a live handle; `callback` is NULL or a function with the
/// `warden_approval_fn` signature, callable from another thread until replaced or the handle is
/// closed; `err` is NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn warden_approval_notify_set(
    h: *const warden_handle,
    callback: warden_approval_fn,
    user_data: *mut c_void,
    err: *mut warden_buf,
) -> warden_result {
    let work = |handle: &warden_handle| -> Result<(), Error> {
        let hook: Option<crate::approval::notify::Hook> = callback.map(|callback| {
            let host = HostHook { callback, user_data };
            Arc::new(move |request: &Value| host.call(request)) as crate::approval::notify::Hook
        });
        handle.notifier.set_hook(hook);
        Ok(())
    };
    // SAFETY: the caller's guarantees for `h` and `err`, forwarded.
    unsafe { with_handle(h, err, work) }
}

/// `warden_propose_described` with a precondition provider: when the policy says `approve`,
/// `precondition` is called for the action and its answer's fingerprint (SHA-256 of the
/// canonical `{"schema": "warden.precondition/v1", "state": …}`) is kept with the new request;
/// when an approval is presented, it is called again just before the approval would be spent,
/// and a different fingerprint refuses with WARDEN_RESULT_APPROVAL_MISMATCH (reason
/// `precondition_changed`) and leaves the approval granted. It is not called for an `allow` or
/// `deny` decision.
///
/// - `h`, `request`, `len`, `out`, `info`, `err`: as for `warden_propose_described`; the
///   request must not also carry `precondition`.
/// - `precondition`, `user_data`: see `warden_precondition_fn`. NULL `precondition` is the
///   same as `warden_propose_described`.
///
/// Returns WARDEN_RESULT_OK, or the refusals and faults `warden_propose_described` returns;
/// WARDEN_RESULT_INVALID_INPUT also when the provider fails (non-zero, or no `warden_precondition_put`) or its state has no canonical
/// form (a float): nothing is requested or spent then.
///
/// Thread safety: safe to call concurrently on one handle; the provider runs on this thread.
///
/// # Safety
/// As for `warden_propose_described`; `precondition` is NULL or a function with the
/// `warden_precondition_fn` signature.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn warden_propose_checked(
    h: *mut warden_handle,
    request: *const u8,
    len: usize,
    precondition: warden_precondition_fn,
    user_data: *mut c_void,
    out: *mut *mut warden_permit,
    info: *mut warden_buf,
    err: *mut warden_buf,
) -> warden_result {
    if info.is_null() {
        // SAFETY: the caller's guarantee for `err`, forwarded.
        return unsafe {
            super::panic::fallible(err, || {
                Err(Error::invalid_at(InvalidInputKind::Missing, "info", "info is NULL, and it is required"))
            })
        };
    }
    let provider = precondition.map(|callback| HostPrecondition { callback, user_data });
    let recovery = crate::pipeline::Recovery::default();
    // SAFETY: the caller's guarantees, forwarded.
    unsafe { super::permit::propose(h, request, len, provider.as_ref(), &recovery, None, out, info, err) }
}

/// Hands Warden the state a precondition provider read, as UTF-8 JSON. Call it from inside a
/// `warden_precondition_fn`, at most once per call (a second call replaces the state).
///
/// - `sink`: the sink the callback received. Required.
/// - `state`, `len`: any JSON value. Invalid JSON is refused.
///
/// Returns WARDEN_RESULT_OK; WARDEN_RESULT_INVALID_INPUT (NULL sink, invalid UTF-8 or JSON);
/// WARDEN_RESULT_PANIC. Never writes an error object (no `err`).
///
/// Thread safety: only on the thread running the callback that received `sink`.
///
/// # Safety
/// `sink` is NULL or the sink passed to the running callback; `(state, len)` follows the
/// conventions at the top of this header.
#[no_mangle]
pub unsafe extern "C" fn warden_precondition_put(
    sink: *mut warden_precondition_sink,
    state: *const u8,
    len: usize,
) -> warden_result {
    let work = |sink: &mut warden_precondition_sink| -> Result<(), Error> {
        // SAFETY: the caller's guarantee for (state, len).
        sink.state = Some(unsafe { required_json(state, len, "state") }?);
        Ok(())
    };
    // SAFETY: the caller guarantees NULL or the live sink of the running callback, which
    // nothing else touches during the callback.
    unsafe { super::panic::put_into(sink, work) }
}
