//! Telemetry across the C ABI: a trace records one protected call's span (`warden_trace_new`,
//! `warden_propose_traced`, `warden_trace_span`, `warden_trace_free`), and the gauges a metrics
//! SDK observes (`warden_gauges_describe`, `warden_gauge_read`). The record is JSON; the header
//! names no OpenTelemetry type, and a binding only turns the record into its SDK's span.

use std::sync::Arc;

use crate::error::{Error, InvalidInputKind};
use crate::telemetry::ActionTrace;

use super::bytes::{required_str, warden_buf, Out};
use super::handle::{warden_handle, with_handle};
use super::panic::fallible;
use super::permit::warden_permit;
use super::recovering::warden_propose_options;
use super::result::warden_result;
use super::unwind::infallible;

/// The recorder of one protected call's span. Opaque: created by `warden_trace_new`, filled by
/// `warden_propose_traced` (and by the permit it returns, when that reports its outcome), read
/// by `warden_trace_span`, freed by `warden_trace_free`.
#[allow(non_camel_case_types)]
pub struct warden_trace {
    trace: Arc<ActionTrace>,
}

// The header promises a trace may be read from any thread while its permit records into it.
const _: fn() = || {
    fn shared_across_threads<T: Send + Sync>() {}
    shared_across_threads::<warden_trace>();
};

/// Creates a trace for one protected call. Returns NULL only if the library panicked
/// (allocation failure).
///
/// Ownership: the caller frees it with `warden_trace_free`; a permit proposed with it keeps
/// what it needs, so the trace may be freed before or after the permit.
///
/// Thread safety: safe from any thread.
#[no_mangle]
pub extern "C" fn warden_trace_new() -> *mut warden_trace {
    infallible(std::ptr::null_mut(), || Box::into_raw(Box::new(warden_trace { trace: ActionTrace::new() })))
}

/// Frees a trace. NULL is a no-op.
///
/// Ownership: takes the trace back; it is invalid afterwards.
///
/// Thread safety: no other thread may be using the trace.
///
/// # Safety
/// `trace` is NULL or a trace from `warden_trace_new` not yet freed.
#[no_mangle]
pub unsafe extern "C" fn warden_trace_free(trace: *mut warden_trace) {
    infallible((), || {
        if !trace.is_null() {
            // SAFETY: `trace` came from `Box::into_raw` in `warden_trace_new`, and the caller
            // gives up every use of it.
            drop(unsafe { Box::from_raw(trace) });
        }
    });
}

/// `warden_propose_recovering`, recording the call's span in `trace`: the decision of each
/// proposal the call makes (an event `gen_ai.guardrail.result` each), the refusal and the receipt
/// it wrote, the wait for a human, the reconcile hook's answer, and the permit, which records its
/// outcome in the same trace. When this returns anything but WARDEN_RESULT_OK the span has ended
/// (a refusal or a fault); with a permit it ends when the permit reports its outcome (or is freed
/// without one: AMBIGUOUS). Read it with `warden_trace_span`.
///
/// - `h`, `request`, `len`, `options`, `out`, `info`, `err`: as for `warden_propose_recovering`.
/// - `trace`: a new trace from `warden_trace_new`. Required. One trace records one call: a trace
///   that already recorded one is refused (WARDEN_RESULT_INVALID_INPUT) and left as it was.
///
/// Returns WARDEN_RESULT_OK, or the refusals and faults `warden_propose_recovering` returns;
/// WARDEN_RESULT_INVALID_INPUT also for a NULL or used `trace`.
///
/// Thread safety: safe to call concurrently on one handle, each call with its own trace.
///
/// # Safety
/// As for `warden_propose_recovering`; `trace` is NULL or a live trace from `warden_trace_new`.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn warden_propose_traced(
    h: *mut warden_handle,
    request: *const u8,
    len: usize,
    options: *const warden_propose_options,
    trace: *const warden_trace,
    out: *mut *mut warden_permit,
    info: *mut warden_buf,
    err: *mut warden_buf,
) -> warden_result {
    // SAFETY: the caller guarantees `trace` is NULL or a live trace.
    let Some(trace) = (unsafe { trace.as_ref() }) else {
        // SAFETY: the caller's guarantee for `err`, forwarded.
        return unsafe {
            fallible(err, || {
                Err(Error::invalid_at(InvalidInputKind::Missing, "trace", "trace is NULL, and it is required"))
            })
        };
    };
    // SAFETY: the caller's guarantees, forwarded.
    unsafe { super::recovering::propose_with(h, request, len, options, Some(&trace.trace), out, info, err) }
}

/// Returns the trace's span as JSON: `{"name": "execute_tool <action>", "kind": "internal",
/// "start_time_unix_nano", "end_time_unix_nano": int|null, "attributes": {...}, "events":
/// [{"name", "time_unix_nano", "attributes"}], "status": {"code": "unset"|"error",
/// "description"}, "metrics": [{"instrument": "counter"|"histogram", "name", "unit",
/// "description", "value", "attributes"}]}`. Before the call ended, `end_time_unix_nano` is
/// null and `metrics` empty (a binding starts its span from this, and makes it current while
/// the permitted function runs); once it ended, the record is complete. Times are by the
/// handle's clock. docs/TELEMETRY.md lists every attribute.
///
/// - `trace`: a trace. Required. Not modified.
/// - `out`: receives a new buffer on WARDEN_RESULT_OK only. Required. Free it with
///   `warden_buf_free`.
/// - `err`: NULL, or receives the error object on failure.
///
/// Returns WARDEN_RESULT_OK; WARDEN_RESULT_INVALID_INPUT (NULL `trace` or `out`);
/// WARDEN_RESULT_PANIC.
///
/// Thread safety: safe from any thread, also while the permit records into the trace.
///
/// # Safety
/// `trace` is NULL or a live trace; `out` and `err` are NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn warden_trace_span(
    trace: *const warden_trace,
    out: *mut warden_buf,
    err: *mut warden_buf,
) -> warden_result {
    let work = || -> Result<(), Error> {
        let out = Out::required(out, "out")?;
        // SAFETY: the caller guarantees `trace` is NULL or a live trace.
        let trace = unsafe { trace.as_ref() }.ok_or_else(|| {
            Error::invalid_at(InvalidInputKind::Missing, "trace", "trace is NULL, and it is required")
        })?;
        // SAFETY: `out` was checked non-NULL and the caller guarantees it is writable.
        unsafe { out.write_json_text(trace.trace.span().to_json_text()) };
        Ok(())
    };
    // SAFETY: the caller's guarantee for `err`, forwarded.
    unsafe { fallible(err, work) }
}

/// Returns the gauges a metrics SDK can observe with `warden_gauge_read`, as JSON `[{"name",
/// "unit", "description"}]`: `warden.effects` (effects by `warden.effect.state`: ambiguous,
/// executing, reserved, failed), `warden.approvals.pending`, `warden.chain.length`. Pure.
///
/// - `out`: receives a new buffer on WARDEN_RESULT_OK only. Required. Free it with
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
pub unsafe extern "C" fn warden_gauges_describe(out: *mut warden_buf, err: *mut warden_buf) -> warden_result {
    let work = || -> Result<(), Error> {
        let out = Out::required(out, "out")?;
        // SAFETY: `out` was checked non-NULL and the caller guarantees it is writable.
        unsafe { out.write_json(&crate::telemetry::gauges::describe()) };
        Ok(())
    };
    // SAFETY: the caller's guarantee for `err`, forwarded.
    unsafe { fallible(err, work) }
}

/// Reads one gauge from the store now, as JSON `[{"value": int, "attributes": {...}}]`.
/// `warden.effects` reads the effect records of each state it counts (a read of the effect
/// table per state), the other two one small read each.
///
/// - `h`: an open handle. Required.
/// - `name`, `name_len`: a name `warden_gauges_describe` lists. Required.
/// - `out`: receives a new buffer on WARDEN_RESULT_OK only. Required. Free it with
///   `warden_buf_free`.
/// - `err`: NULL, or receives the error object on failure.
///
/// Returns WARDEN_RESULT_OK; WARDEN_RESULT_INVALID_INPUT (NULL pointers, an unknown gauge);
/// WARDEN_RESULT_STORE; WARDEN_RESULT_PANIC; WARDEN_RESULT_POISONED.
///
/// Thread safety: safe to call concurrently on one handle (a metrics SDK calls it from its
/// own thread).
///
/// # Safety
/// `h` is NULL or a live handle; byte pointers follow the conventions at the top of this
/// header; `out` and `err` are NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn warden_gauge_read(
    h: *const warden_handle,
    name: *const u8,
    name_len: usize,
    out: *mut warden_buf,
    err: *mut warden_buf,
) -> warden_result {
    let work = |handle: &warden_handle| -> Result<(), Error> {
        let out = Out::required(out, "out")?;
        // SAFETY: the caller's guarantee for (name, name_len).
        let name = unsafe { required_str(name, name_len, "name") }?;
        let points = crate::telemetry::gauges::read(&handle.kernel, name)?;
        // SAFETY: `out` was checked non-NULL and the caller guarantees it is writable.
        unsafe { out.write_json(&crate::telemetry::gauges::points_json(&points)) };
        Ok(())
    };
    // SAFETY: the caller's guarantees for `h` and `err`, forwarded.
    unsafe { with_handle(h, err, work) }
}
