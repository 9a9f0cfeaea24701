//! Sights across the C ABI: the catalog and tool schema, one confined query (cancellable from
//! another thread), snapshot history and diff, and the host's credential callback.
//!
//! The agent's arguments arrive as one JSON object per call and are parsed with unknown keys
//! refused before any I/O (`url`, `host`, `headers`, … → WARDEN_RESULT_OUT_OF_WINDOW).

use std::ffi::c_void;
use std::sync::Arc;

use zeroize::Zeroizing;

use crate::error::{Error, InvalidInputKind};
use crate::http::CancelToken;
use crate::pipeline::Warden;
use crate::sight::credentials::CredentialProvider;

use super::bytes::{required_json, warden_buf, Out};
use super::handle::{warden_handle, with_handle};
use super::result::warden_result;
use super::unwind::infallible;

/// A cancellation token for `warden_sight_query`. Opaque: created by `warden_cancel_new`,
/// triggered by `warden_cancel_trigger` (from any thread), freed by `warden_cancel_free`.
#[allow(non_camel_case_types)]
pub struct warden_cancel {
    token: CancelToken,
}

/// Where a credential callback puts the value it resolved. Opaque; valid only during the
/// callback call that received it.
#[allow(non_camel_case_types)]
pub struct warden_credential_sink {
    value: Option<Zeroizing<String>>,
}

/// A host credential resolver. Called with the `user_data` given at registration and one
/// credential reference (UTF-8, not NUL-terminated). To supply a value, call
/// `warden_credential_put(sink, value, len)` and return 0; return non-zero (or return 0
/// without a put) when the reference has no value. Called once per reference per query;
/// values are never cached.
///
/// Thread safety: called on the thread running the query, which may be any thread; the
/// function and its `user_data` must allow that.
#[allow(non_camel_case_types)]
pub type warden_credential_fn = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        reference: *const u8,
        reference_len: usize,
        sink: *mut warden_credential_sink,
    ) -> i32,
>;

/// A registered callback and its `user_data`.
struct HostCallback {
    callback: unsafe extern "C" fn(*mut c_void, *const u8, usize, *mut warden_credential_sink) -> i32,
    user_data: *mut c_void,
}

// SAFETY: `warden_sight_credentials_set` documents that the callback and `user_data` must be
// usable from any thread for as long as they are registered; Warden only passes the pointer
// back to the host's own function.
unsafe impl Send for HostCallback {}
// SAFETY: as above; Warden never dereferences `user_data`.
unsafe impl Sync for HostCallback {}

impl CredentialProvider for HostCallback {
    fn resolve(&self, reference: &str) -> Option<Zeroizing<String>> {
        let mut sink = warden_credential_sink { value: None };
        // SAFETY: the host registered `callback` as a valid function taking these arguments;
        // `reference` is live for the call, and `sink` is a live exclusive borrow for the call.
        let status = unsafe { (self.callback)(self.user_data, reference.as_ptr(), reference.len(), &raw mut sink) };
        if status == 0 {
            sink.value.take()
        } else {
            None
        }
    }

    fn looked_in(&self, reference: &str) -> String {
        format!(
            "Warden asked the host's credential callback (set with warden_sight_credentials_set), which returned \
             no value for {reference}"
        )
    }
}

/// Creates a cancellation token. Returns NULL only if the library panicked (allocation failure).
///
/// Ownership: the caller frees it with `warden_cancel_free`, after every query using it has
/// returned.
///
/// Thread safety: safe from any thread.
#[no_mangle]
pub extern "C" fn warden_cancel_new() -> *mut warden_cancel {
    infallible(std::ptr::null_mut(), || Box::into_raw(Box::new(warden_cancel { token: CancelToken::new() })))
}

/// Cancels every query running (or later started) with this token: it returns
/// WARDEN_RESULT_FETCH with reason `aborted`, and nothing is stored. A running query notices
/// within about 10 ms in every phase (resolving the host, connecting, the TLS handshake,
/// waiting for the response head, a blocked body read): it shuts its connection down and
/// returns without waiting for the server or `timeout_ms`. A request already sent may have
/// reached the server; no result of it is returned. NULL is a no-op.
///
/// Thread safety: safe from any thread, while a query using the token runs.
///
/// # Safety
/// `cancel` is NULL or a live token from `warden_cancel_new`.
#[no_mangle]
pub unsafe extern "C" fn warden_cancel_trigger(cancel: *const warden_cancel) {
    infallible((), || {
        // SAFETY: the caller guarantees NULL or a live token.
        if let Some(cancel) = unsafe { cancel.as_ref() } {
            cancel.token.cancel();
        }
    });
}

/// Frees a cancellation token. NULL is a no-op.
///
/// Thread safety: no query may still be using the token.
///
/// # Safety
/// `cancel` is NULL or a token from `warden_cancel_new` not yet freed.
#[no_mangle]
pub unsafe extern "C" fn warden_cancel_free(cancel: *mut warden_cancel) {
    infallible((), || {
        if !cancel.is_null() {
            // SAFETY: `cancel` came from `Box::into_raw` in `warden_cancel_new` and the caller
            // gives up every use of it.
            drop(unsafe { Box::from_raw(cancel) });
        }
    });
}

/// Copies a credential value into Warden's zeroizing buffer. Call it from inside a
/// `warden_credential_fn`, at most once per call (a second call replaces the value).
///
/// - `sink`: the sink the callback received. Required.
/// - `value`, `len`: the value, UTF-8. Invalid UTF-8 is refused and the reference stays
///   unresolved. The host may wipe its copy as soon as this returns.
///
/// Returns WARDEN_RESULT_OK; WARDEN_RESULT_INVALID_INPUT (NULL sink, NULL value with len > 0,
/// invalid UTF-8); WARDEN_RESULT_PANIC. Never writes an error object (no `err`): nothing about a
/// value is ever reported.
///
/// Thread safety: only on the thread running the callback that received `sink`.
///
/// # Safety
/// `sink` is NULL or the sink passed to the running callback; `(value, len)` follows the
/// conventions at the top of this header.
#[no_mangle]
pub unsafe extern "C" fn warden_credential_put(
    sink: *mut warden_credential_sink,
    value: *const u8,
    len: usize,
) -> warden_result {
    let work = |sink: &mut warden_credential_sink| -> Result<(), Error> {
        if value.is_null() && len > 0 {
            return Err(Error::invalid_at(
                InvalidInputKind::Malformed,
                "value",
                "value is NULL with a non-zero length",
            ));
        }
        let bytes: &[u8] = if len == 0 {
            &[]
        } else {
            // SAFETY: non-NULL, and the caller guarantees `len` readable bytes.
            unsafe { std::slice::from_raw_parts(value, len) }
        };
        // Copied straight into a zeroizing buffer of the final size: no stray copy remains.
        let mut text = Zeroizing::new(String::with_capacity(len));
        text.push_str(std::str::from_utf8(bytes).map_err(|_| {
            Error::invalid_at(InvalidInputKind::Malformed, "value", "the credential value is not UTF-8")
        })?);
        sink.value = Some(text);
        Ok(())
    };
    // SAFETY: the caller guarantees NULL or the live sink of the running callback, which
    // nothing else touches during the callback.
    unsafe { super::panic::put_into(sink, work) }
}

/// Registers the host's credential resolver for sights on this handle, replacing the current
/// provider; a NULL `callback` restores the default (environment variables, or the
/// `credentials_dir` given to `warden_open`). Queries already running keep the provider they
/// started with. The approval webhook's `secret_ref` (`notify.webhook` in the document) is
/// resolved through the same provider.
///
/// - `h`: an open handle. Required.
/// - `callback`, `user_data`: see `warden_credential_fn`. `user_data` is passed back unchanged
///   and never dereferenced by Warden.
/// - `err`: NULL, or receives the error object on failure.
///
/// Returns WARDEN_RESULT_OK; WARDEN_RESULT_INVALID_INPUT; WARDEN_RESULT_PANIC;
/// WARDEN_RESULT_POISONED.
///
/// Thread safety: safe from any thread. The callback and `user_data` must stay valid, and be
/// callable from any thread, until the handle is closed — also after being replaced, since a
/// query that started with this provider may still call it until it returns.
///
/// # Safety
/// `h` is NULL or a live handle; `callback` is NULL or a function with the
/// `warden_credential_fn` signature; `err` is NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn warden_sight_credentials_set(
    h: *const warden_handle,
    callback: warden_credential_fn,
    user_data: *mut c_void,
    err: *mut warden_buf,
) -> warden_result {
    let work = |handle: &warden_handle| -> Result<(), Error> {
        let provider: Arc<dyn CredentialProvider> = match callback {
            Some(callback) => Arc::new(HostCallback { callback, user_data }),
            None => handle.default_credentials.clone(),
        };
        // The approval webhook's secret and the evidence key resolve where sight credentials do.
        handle.share_credentials(&provider);
        let mut slot = handle
            .credentials
            .write()
            .map_err(|_| Error::Panic("the credential provider slot was poisoned by an earlier panic".into()))?;
        *slot = provider;
        Ok(())
    };
    // SAFETY: the caller's guarantees for `h` and `err`, forwarded.
    unsafe { with_handle(h, err, work) }
}

/// Runs one export that answers JSON on a handle opened with a configuration.
///
/// # Safety
/// As for `with_handle`; `out` is NULL or valid for one write.
unsafe fn answer(
    h: *const warden_handle,
    out: *mut warden_buf,
    err: *mut warden_buf,
    work: impl FnOnce(&warden_handle) -> Result<serde_json::Value, Error>,
) -> warden_result {
    let work = |handle: &warden_handle| -> Result<(), Error> {
        let out = Out::required(out, "out")?;
        let value = work(handle)?;
        // SAFETY: `out` was checked non-NULL; the caller guarantees it is writable.
        unsafe { out.write_json(&value) };
        Ok(())
    };
    // SAFETY: the caller's guarantees, forwarded.
    unsafe { with_handle(h, err, work) }
}

/// Runs one export that takes the agent's request as JSON and answers JSON.
///
/// # Safety
/// As for `answer`; `(request_json, len)` follows the conventions at the top of this header.
unsafe fn answer_request(
    h: *const warden_handle,
    request_json: *const u8,
    len: usize,
    out: *mut warden_buf,
    err: *mut warden_buf,
    call: fn(&Warden, &serde_json::Value) -> Result<serde_json::Value, Error>,
) -> warden_result {
    let work = |handle: &warden_handle| -> Result<serde_json::Value, Error> {
        // SAFETY: the caller's guarantee for (request_json, len).
        let request = unsafe { required_json(request_json, len, "request_json") }?;
        call(handle.warden()?, &request)
    };
    // SAFETY: the caller's guarantees, forwarded.
    unsafe { answer(h, out, err, work) }
}

/// Returns the configured windows as an agent may name them:
/// `{"sources": [{"id", "description", "endpoints": [{"id", "description", "params": [{"name",
/// "required", "schema", "default"?, "description"?}], "fields": [alias…]}]}], "note"}`. No
/// origin, path or credential reference.
///
/// - `h`: a handle opened with a configuration. Required.
/// - `out`: receives the JSON on WARDEN_RESULT_OK only. Required. Free with `warden_buf_free`.
/// - `err`: NULL, or receives the error object on failure.
///
/// Returns WARDEN_RESULT_OK; WARDEN_RESULT_CONFIG (opened without a configuration);
/// WARDEN_RESULT_INVALID_INPUT; WARDEN_RESULT_PANIC; WARDEN_RESULT_POISONED.
///
/// Thread safety: safe to call concurrently on one handle.
///
/// # Safety
/// `h` is NULL or a live handle; `out` and `err` are NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn warden_sight_sources(
    h: *const warden_handle,
    out: *mut warden_buf,
    err: *mut warden_buf,
) -> warden_result {
    // SAFETY: the caller's guarantees, forwarded.
    unsafe { answer(h, out, err, |handle| Ok(handle.warden()?.sources())) }
}

/// Returns the JSON array of the four tool definitions (`warden_sources`, `warden_query`,
/// `warden_history`, `warden_diff`), each `{"name", "description", "input_schema"}` with
/// source and endpoint ids as enums and `additionalProperties: false`.
///
/// - `h`: a handle opened with a configuration. Required.
/// - `out`: receives the JSON on WARDEN_RESULT_OK only. Required (not NULL). Free with
///   `warden_buf_free`.
/// - `err`: NULL, or receives the error object on failure.
///
/// Returns WARDEN_RESULT_OK; WARDEN_RESULT_CONFIG (opened without a configuration);
/// WARDEN_RESULT_INVALID_INPUT; WARDEN_RESULT_PANIC; WARDEN_RESULT_POISONED.
///
/// Thread safety: safe to call concurrently on one handle.
///
/// # Safety
/// `h` is NULL or a live handle; `out` and `err` are NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn warden_sight_tool_schema(
    h: *const warden_handle,
    out: *mut warden_buf,
    err: *mut warden_buf,
) -> warden_result {
    // SAFETY: the caller's guarantees, forwarded.
    unsafe { answer(h, out, err, |handle| Ok(handle.warden()?.tool_schema())) }
}

/// Reads one configured window: Warden builds the GET from the configuration, resolves the
/// source's credential through the handle's provider, enforces every bound, and returns the
/// shaped, redacted result.
///
/// - `h`: a handle opened with a configuration. Required.
/// - `query_json`, `len`: UTF-8 JSON `{"source", "endpoint", "params"?: {...}, "fields"?:
///   [alias…], "snapshot"?: bool}`; any other key is refused. Required.
/// - `cancel`: NULL, or a token another thread may trigger to abort this query.
/// - `out`: receives the result `{"source", "endpoint", "fetchedAt", "status", "values",
///   "warnings", "warningsTruncated", "truncation", "redactions", "snapshotId"?}` on
///   WARDEN_RESULT_OK only; `truncation` maps an alias something was cut from to
///   `{"depth"?, "items"?, "strings"?}`, each `{"shown", "total"}` plus a count
///   (`"containers"`, or `"strings"`). Required. Free with `warden_buf_free`.
/// - `err`: NULL, or receives the error object (`reason` = the sight code) on failure.
///
/// Returns WARDEN_RESULT_OK; WARDEN_RESULT_OUT_OF_WINDOW (nothing was sent);
/// WARDEN_RESULT_FETCH (`credential_unavailable`, `redirect_refused`, `response_too_large`,
/// `timeout`, `aborted`, `upstream_error`, `network_error`, `invalid_response`);
/// WARDEN_RESULT_CONFIG; WARDEN_RESULT_STORE (the snapshot could not be written);
/// WARDEN_RESULT_INVALID_INPUT; WARDEN_RESULT_PANIC; WARDEN_RESULT_POISONED.
///
/// Thread safety: safe to call concurrently on one handle. Blocks for at most the source's
/// `timeout_ms` (plus the snapshot write).
///
/// # Safety
/// `h` is NULL or a live handle; byte pointers follow the conventions at the top of this
/// header; `cancel` is NULL or a live token; `out` and `err` are NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn warden_sight_query(
    h: *const warden_handle,
    query_json: *const u8,
    len: usize,
    cancel: *const warden_cancel,
    out: *mut warden_buf,
    err: *mut warden_buf,
) -> warden_result {
    let work = |handle: &warden_handle| -> Result<serde_json::Value, Error> {
        // SAFETY: the caller's guarantee for (query_json, len).
        let query = unsafe { required_json(query_json, len, "query_json") }?;
        // SAFETY: the caller guarantees NULL or a live token for the whole call.
        unsafe { run_query(handle, &query, cancel) }
    };
    // SAFETY: the caller's guarantees, forwarded.
    unsafe { answer(h, out, err, work) }
}

/// The body of a query, for `warden_sight_query` and `warden_sight_call_tool`.
///
/// # Safety
/// `cancel` is NULL or a live token for the whole call.
unsafe fn run_query(
    handle: &warden_handle,
    query: &serde_json::Value,
    cancel: *const warden_cancel,
) -> Result<serde_json::Value, Error> {
    // SAFETY: the caller guarantees NULL or a live token for the whole call.
    let token = unsafe { cancel.as_ref() }.map(|c| c.token.clone()).unwrap_or_default();
    let provider = handle
        .credentials
        .read()
        .map_err(|_| Error::Panic("the credential provider slot was poisoned by an earlier panic".into()))?
        .clone();
    let result = handle.warden()?.query(query, provider.as_ref(), &token)?;
    serde_json::to_value(&result)
        .map_err(|e| Error::invalid(InvalidInputKind::NotCanonical, format!("cannot encode the result: {e}")))
}

/// Runs one tool call an LLM made against `warden_sight_tool_schema`, its arguments as the
/// model sent them: `warden_sources` (no arguments), `warden_query`, `warden_history` or
/// `warden_diff`. The arguments go to the call unchanged, so a key the schema does not declare
/// (`url`, `headers`, …) is refused with WARDEN_RESULT_OUT_OF_WINDOW before any I/O. The one
/// dispatch every binding uses.
///
/// - `h`: a handle opened with a configuration. Required.
/// - `name`, `name_len`: the tool's name, UTF-8. Required.
/// - `arguments_json`, `len`: the call's input object, UTF-8 JSON. Optional: (NULL, 0) is `{}`.
/// - `cancel`: NULL, or a token another thread may trigger to abort a `warden_query`.
/// - `out`: receives the tool's answer (as the matching `warden_sight_*` call returns it) on
///   WARDEN_RESULT_OK only. Required. Free with `warden_buf_free`.
/// - `err`: NULL, or receives the error object on failure.
///
/// Returns WARDEN_RESULT_OK; the codes of the matching call (WARDEN_RESULT_OUT_OF_WINDOW,
/// WARDEN_RESULT_FETCH, WARDEN_RESULT_NOT_FOUND, WARDEN_RESULT_CONFIG, WARDEN_RESULT_STORE);
/// WARDEN_RESULT_INVALID_INPUT (not a Warden tool, bad JSON); WARDEN_RESULT_PANIC;
/// WARDEN_RESULT_POISONED.
///
/// Thread safety: safe to call concurrently on one handle. A `warden_query` blocks as
/// `warden_sight_query` does.
///
/// # Safety
/// `h` is NULL or a live handle; byte pointers follow the conventions at the top of this
/// header; `cancel` is NULL or a live token; `out` and `err` are NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn warden_sight_call_tool(
    h: *const warden_handle,
    name: *const u8,
    name_len: usize,
    arguments_json: *const u8,
    len: usize,
    cancel: *const warden_cancel,
    out: *mut warden_buf,
    err: *mut warden_buf,
) -> warden_result {
    let work = |handle: &warden_handle| -> Result<serde_json::Value, Error> {
        // SAFETY: the caller's guarantee for (name, name_len).
        let name = unsafe { super::bytes::required_str(name, name_len, "name") }?;
        // SAFETY: the caller's guarantee for (arguments_json, len).
        let arguments = unsafe { super::bytes::optional_json(arguments_json, len, "arguments_json") }?
            .unwrap_or_else(|| serde_json::json!({}));
        match name {
            "warden_sources" => {
                if arguments != serde_json::json!({}) {
                    return Err(Error::Sight(crate::sight::SightError::new(
                        "invalid_params",
                        "warden_sources takes no arguments; nothing was read",
                    )));
                }
                Ok(handle.warden()?.sources())
            }
            // SAFETY: the caller guarantees NULL or a live token for the whole call.
            "warden_query" => unsafe { run_query(handle, &arguments, cancel) },
            "warden_history" => handle.warden()?.history(&arguments),
            "warden_diff" => handle.warden()?.diff(&arguments),
            _ => Err(Error::invalid_at(
                InvalidInputKind::Unknown,
                "name",
                format!(
                "{} is not a Warden tool; the tools are warden_sources, warden_query, warden_history and warden_diff",
                serde_json::Value::String(name.chars().take(64).collect())
            ),
            )),
        }
    };
    // SAFETY: the caller's guarantees, forwarded.
    unsafe { answer(h, out, err, work) }
}

/// Returns one page of snapshots, newest first: `{"source", "endpoint", "params"?,
/// "snapshots": [result + "params"…], "hasMore", "nextCursor"?}`.
///
/// - `request_json`, `len`: UTF-8 JSON `{"source", "endpoint", "params"?, "cursor"?,
///   "limit"?}` (limit 1–100, default 20). With `params`, only that window (defaults applied);
///   without, every window of the endpoint. `cursor` is the previous page's `nextCursor`.
///   Required.
/// - `out`: receives the page on WARDEN_RESULT_OK only. Required (not NULL). Free with
///   `warden_buf_free`.
/// - `err`: NULL, or receives the error object on failure.
///
/// Thread safety: safe to call concurrently on one handle.
///
/// Returns WARDEN_RESULT_OK; WARDEN_RESULT_OUT_OF_WINDOW (`unknown_source`,
/// `unknown_endpoint`, `invalid_params`, `invalid_page`); WARDEN_RESULT_CONFIG;
/// WARDEN_RESULT_STORE; WARDEN_RESULT_INVALID_INPUT; WARDEN_RESULT_PANIC;
/// WARDEN_RESULT_POISONED.
///
/// # Safety
/// `h` is NULL or a live handle; byte pointers follow the conventions at the top of this
/// header; `out` and `err` are NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn warden_sight_history(
    h: *const warden_handle,
    request_json: *const u8,
    len: usize,
    out: *mut warden_buf,
    err: *mut warden_buf,
) -> warden_result {
    // SAFETY: the caller's guarantees, forwarded.
    unsafe { answer_request(h, request_json, len, out, err, Warden::history) }
}

/// Compares two snapshots of one window: `{"a", "b", "source", "endpoint", "params",
/// "fetchedAt": {"a", "b"}, "entries": [{"change": "added"|"removed"|"changed", "path",
/// "before"?, "after"?}], "total", "omitted"}` with at most 50 entries.
///
/// - `request_json`, `len`: UTF-8 JSON `{"a": "snp_…", "b": "snp_…"}`. Required.
/// - `out`: receives the diff on WARDEN_RESULT_OK only. Required (not NULL). Free with
///   `warden_buf_free`.
/// - `err`: NULL, or receives the error object on failure.
///
/// Thread safety: safe to call concurrently on one handle.
///
/// Returns WARDEN_RESULT_OK; WARDEN_RESULT_NOT_FOUND (`snapshot_not_found`);
/// WARDEN_RESULT_OUT_OF_WINDOW (different windows or configurations, a source no longer
/// configured, a malformed id); WARDEN_RESULT_CONFIG; WARDEN_RESULT_STORE;
/// WARDEN_RESULT_INVALID_INPUT; WARDEN_RESULT_PANIC; WARDEN_RESULT_POISONED.
///
/// # Safety
/// `h` is NULL or a live handle; byte pointers follow the conventions at the top of this
/// header; `out` and `err` are NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn warden_sight_diff(
    h: *const warden_handle,
    request_json: *const u8,
    len: usize,
    out: *mut warden_buf,
    err: *mut warden_buf,
) -> warden_result {
    // SAFETY: the caller's guarantees, forwarded.
    unsafe { answer_request(h, request_json, len, out, err, Warden::diff) }
}
