//! `warden_propose_recovering`: the one propose-and-wait every binding calls. The host passes
//! the wait and its callbacks (the precondition provider, the reconcile hook); the pipeline
//! (`Warden::submit_recovering`) owns the loop and judges the wait by the kernel's clock.

use std::ffi::c_void;
use std::time::Duration;

use crate::error::{Error, InvalidInputKind};
use crate::kernel::{AnswerWait, ReconcileAnswer};

use super::bytes::{required_str, warden_buf};
use super::handle::warden_handle;
use super::permit::warden_permit;
use super::precondition::{warden_precondition_fn, HostPrecondition};
use super::result::warden_result;

/// Where a reconcile hook puts its answer. Opaque; valid only during the callback call that
/// received it.
#[allow(non_camel_case_types)]
pub struct warden_reconcile_sink {
    answer: Option<String>,
}

/// A host reconcile hook: called with the `user_data` of its `warden_propose_options` and the
/// effect key (UTF-8, not NUL-terminated, valid only during the call) a proposal was refused
/// AMBIGUOUS on. Put what happened with `warden_reconcile_put(sink, answer, len)` —
/// "committed", "not_executed" or "unknown" — and return 0. A non-zero return, or no put,
/// stops the proposal with WARDEN_RESULT_INVALID_INPUT and resolves nothing.
///
/// Thread safety: called on the thread that called `warden_propose_recovering`, before it
/// returns; at most twice per call (once per proposal the call makes).
#[allow(non_camel_case_types)]
pub type warden_reconcile_fn = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        effect_key: *const u8,
        effect_key_len: usize,
        sink: *mut warden_reconcile_sink,
    ) -> i32,
>;

/// What `warden_propose_recovering` may do after a first refusal. Zero-initialised it does
/// nothing more than `warden_propose_described`.
#[allow(non_camel_case_types)]
#[repr(C)]
pub struct warden_propose_options {
    /// How long to wait, in milliseconds by the handle's clock, for a human to answer the
    /// approval request the proposal made, before presenting it; 0: do not wait. Any length:
    /// the request's own expiry ends a wait first.
    pub wait_ms: u64,
    /// The longest pause, in milliseconds, between two reads of the request while waiting
    /// (the store is read again at least this often, so an answer given in another process is
    /// seen); 0: 200.
    pub poll_ms: u64,
    /// NULL, or the precondition provider (as for `warden_propose_checked`): called only when
    /// the policy says `approve`, when the request is made and again just before a presented
    /// approval is spent.
    pub precondition: warden_precondition_fn,
    /// NULL, or the reconcile hook, asked once per proposal refused AMBIGUOUS.
    pub reconcile: warden_reconcile_fn,
    /// Passed back unchanged to both callbacks; never dereferenced by Warden.
    pub user_data: *mut c_void,
}

type ReconcileCallback = unsafe extern "C" fn(*mut c_void, *const u8, usize, *mut warden_reconcile_sink) -> i32;

/// The host's reconcile hook for one call.
struct HostReconcile {
    callback: ReconcileCallback,
    user_data: *mut c_void,
}

impl HostReconcile {
    fn answer(&self, effect_key: &str) -> Result<ReconcileAnswer, String> {
        let mut sink = warden_reconcile_sink { answer: None };
        // SAFETY: the host passed `callback` as a valid function taking these arguments;
        // `effect_key` is live for the call and `sink` is a live exclusive borrow for the call.
        let status = unsafe { (self.callback)(self.user_data, effect_key.as_ptr(), effect_key.len(), &raw mut sink) };
        match (status, sink.answer) {
            (0, Some(answer)) => ReconcileAnswer::parse(&answer).ok_or_else(|| {
                format!(
                    "a reconcile hook answers committed, not_executed or unknown, not {}",
                    serde_json::Value::String(answer.chars().take(64).collect())
                )
            }),
            (0, None) => Err("the reconcile hook returned 0 without warden_reconcile_put".into()),
            (status, _) => Err(format!("the reconcile hook returned {status}")),
        }
    }
}

/// Runs the pipeline for one request like `warden_propose_described`, and recovers the way
/// `options` asks, in the library: on WARDEN_RESULT_AMBIGUOUS with a reconcile hook, the hook
/// is asked once about the effect key — "committed" or "not_executed" resolves it (resolver
/// `reconcile:<action>`) and the proposal runs once more; "unknown" is recorded and AMBIGUOUS
/// comes back. On WARDEN_RESULT_APPROVAL_REQUIRED with `wait_ms`, it waits (judged by the
/// handle's clock) for a human to answer the request; an answered request is presented in the
/// same request (a grant is spent with the reservation; a denial refuses as DENIED, reason
/// `approval_denied`), reconciling again if that proposal is AMBIGUOUS; a request still pending
/// or expired when the wait ends keeps the APPROVAL_REQUIRED refusal. With a precondition
/// provider, the state is read only when the policy says `approve` (see
/// `warden_propose_checked`).
///
/// - `h`, `request`, `len`, `out`, `info`, `err`: as for `warden_propose_described`; the
///   request must not carry `precondition` when `options` has a provider.
/// - `options`: NULL (the same as `warden_propose_described`), or the wait and callbacks, read
///   only during the call.
///
/// Returns WARDEN_RESULT_OK, or the refusals and faults `warden_propose_described` returns;
/// WARDEN_RESULT_INVALID_INPUT also when a callback fails (non-zero, no put, an answer that is
/// not one of the three, a state with no canonical form): nothing is requested, spent or
/// resolved by that step then.
///
/// Thread safety: safe to call concurrently on one handle; both callbacks run on this thread,
/// which the wait blocks (and only it).
///
/// # Safety
/// As for `warden_propose_described`; `options` is NULL or valid for reads during the call,
/// and its callbacks are NULL or functions with the `warden_precondition_fn` and
/// `warden_reconcile_fn` signatures.
#[no_mangle]
pub unsafe extern "C" fn warden_propose_recovering(
    h: *mut warden_handle,
    request: *const u8,
    len: usize,
    options: *const warden_propose_options,
    out: *mut *mut warden_permit,
    info: *mut warden_buf,
    err: *mut warden_buf,
) -> warden_result {
    // SAFETY: the caller's guarantees, forwarded; no trace.
    unsafe { propose_with(h, request, len, options, None, out, info, err) }
}

/// The body of `warden_propose_recovering` and `warden_propose_traced`: `options` turned into
/// the pipeline's recovery, and the proposal, recorded in `trace` when there is one.
///
/// # Safety
/// As for `warden_propose_recovering`.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn propose_with(
    h: *mut warden_handle,
    request: *const u8,
    len: usize,
    options: *const warden_propose_options,
    trace: Option<&std::sync::Arc<crate::telemetry::ActionTrace>>,
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
    // SAFETY: the caller guarantees `options` is NULL or valid for reads during the call.
    let options = unsafe { options.as_ref() };
    let precondition = options
        .and_then(|options| options.precondition.map(|callback| HostPrecondition::new(callback, options.user_data)));
    let reconcile = options
        .and_then(|options| options.reconcile.map(|callback| HostReconcile { callback, user_data: options.user_data }));
    let hook = reconcile.as_ref().map(|host| move |key: &str| host.answer(key));
    let wait = options.filter(|options| options.wait_ms > 0).map(|options| AnswerWait {
        timeout: i64::try_from(options.wait_ms).unwrap_or(i64::MAX).saturating_mul(1000),
        poll: Duration::from_millis(options.poll_ms),
        keep_waiting: None,
    });
    let recovery = crate::pipeline::Recovery {
        reconcile: hook.as_ref().map(|hook| hook as &crate::pipeline::ReconcileHook<'_>),
        wait,
    };
    // SAFETY: the caller's guarantees, forwarded.
    unsafe { super::permit::propose(h, request, len, precondition.as_ref(), &recovery, trace, out, info, err) }
}

/// Hands Warden the reconcile hook's answer: "committed", "not_executed" or "unknown" (UTF-8).
/// Call it from inside a `warden_reconcile_fn`, at most once per call (a second call replaces
/// the answer).
///
/// - `sink`: the sink the callback received. Required.
/// - `answer`, `len`: the answer. Required; its spelling is checked when the callback returns.
///
/// Returns WARDEN_RESULT_OK; WARDEN_RESULT_INVALID_INPUT (NULL sink, invalid UTF-8);
/// WARDEN_RESULT_PANIC. Never writes an error object (no `err`).
///
/// Thread safety: only on the thread running the callback that received `sink`.
///
/// # Safety
/// `sink` is NULL or the sink passed to the running callback; `(answer, len)` follows the
/// conventions at the top of this header.
#[no_mangle]
pub unsafe extern "C" fn warden_reconcile_put(
    sink: *mut warden_reconcile_sink,
    answer: *const u8,
    len: usize,
) -> warden_result {
    let work = |sink: &mut warden_reconcile_sink| -> Result<(), Error> {
        // SAFETY: the caller's guarantee for (answer, len).
        sink.answer = Some(unsafe { required_str(answer, len, "answer") }?.to_owned());
        Ok(())
    };
    // SAFETY: the caller guarantees NULL or the live sink of the running callback, which
    // nothing else touches during the callback.
    unsafe { super::panic::put_into(sink, work) }
}
