//! `Trace`: one `warden_trace`, where libwarden records a protected call's span. `index.js`
//! reads the record (`span()`) and turns it into an OpenTelemetry span; nothing here reads it.
//!
//! The pointer lives in an `Arc`: a proposal running on the thread pool holds it until it
//! returns, so a Trace collected by the garbage collector meanwhile is freed only after. The
//! permit it gave keeps what it records into, so freeing the trace never loses an outcome.

use std::sync::Arc;

use napi::Env;
use napi_derive::napi;

use crate::call::{output, thrown, Failure};
use crate::ffi::{self, WardenTrace};

/// An owned `warden_trace`, freed on drop.
pub struct TracePtr {
    raw: *mut WardenTrace,
}

// SAFETY: the C ABI documents a warden_trace as readable from any thread, also while a permit
// records into it; it is freed only when the last reference goes.
unsafe impl Send for TracePtr {}
// SAFETY: as above; every call through &TracePtr is a thread-safe C function.
unsafe impl Sync for TracePtr {}

impl TracePtr {
    pub fn raw(&self) -> *const WardenTrace {
        self.raw
    }
}

impl Drop for TracePtr {
    fn drop(&mut self) {
        // SAFETY: the pointer came from warden_trace_new and this is the last reference to it.
        unsafe { ffi::warden_trace_free(self.raw) };
    }
}

#[napi]
pub struct Trace {
    ptr: Arc<TracePtr>,
}

#[napi]
impl Trace {
    /// A new trace for one protected call (`warden_trace_new`).
    #[napi(constructor)]
    pub fn new(env: Env) -> napi::Result<Trace> {
        // SAFETY: no arguments; the result is NULL only on a caught panic.
        let raw = unsafe { ffi::warden_trace_new() };
        if raw.is_null() {
            return thrown(&env, Err(Failure::panic("warden_trace_new returned NULL").into()));
        }
        Ok(Trace { ptr: Arc::new(TracePtr { raw }) })
    }

    /// The span record as JSON text (`warden_trace_span`): a fast read, no store involved.
    #[napi]
    pub fn span(&self, env: Env) -> napi::Result<String> {
        // SAFETY: `raw` is a live trace held by self; out and err point at locals of `output`.
        thrown(&env, Ok(output(|out, err| unsafe { ffi::warden_trace_span(self.ptr.raw(), out, err) })?))
    }
}

impl Trace {
    /// The pointer, shared with a proposal that records into it.
    pub fn shared(&self) -> Arc<TracePtr> {
        Arc::clone(&self.ptr)
    }
}
