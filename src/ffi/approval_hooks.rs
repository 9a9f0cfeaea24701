//! The host's side of approvals: a hook told of each new request, and a proposal that takes a
//! precondition provider (`precondition`: asked when an approval is requested and again just
//! before it is spent).

use std::ffi::c_void;
use std::sync::Arc;

use serde_json::Value;

use crate::error::{Error, InvalidInputKind};

use super::bytes::warden_buf;
use super::handle::{warden_handle, with_handle};
use super::permit::warden_permit;
use super::precondition::{warden_precondition_fn, HostPrecondition};
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

type ApprovalCallback = unsafe extern "C" fn(*mut c_void, *const u8, usize) -> i32;

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
    let provider = precondition.map(|callback| HostPrecondition::new(callback, user_data));
    let recovery = crate::pipeline::Recovery::default();
    // SAFETY: the caller's guarantees, forwarded.
    unsafe { super::permit::propose(h, request, len, provider.as_ref(), &recovery, None, out, info, err) }
}
