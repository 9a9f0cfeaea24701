//! The host's precondition provider: a callback asked for the state an action depends on when
//! an approval is requested and again just before it is spent, the sink it puts that state
//! in, and a proposal request's `precondition`.

use std::ffi::c_void;

use serde_json::Value;

use crate::approval::precondition::{PreconditionProvider, PreconditionSource};
use crate::error::{Error, InvalidInputKind};

use super::bytes::required_json;
use super::request::Fields;
use super::result::warden_result;

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

pub(super) type PreconditionCallback =
    unsafe extern "C" fn(*mut c_void, *const u8, usize, *mut warden_precondition_sink) -> i32;

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
