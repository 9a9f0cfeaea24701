//! Plumbing for one C call: byte views in, owned buffers out, result codes to errors.
//!
//! A failed call is thrown as a structured value: a JavaScript `Error` whose `code` is the C
//! constant's name, whose `message` is the library's message and whose `fields` is the
//! library's error object (`{"code", "reason", "message", …the refusal's fields}`) as a plain
//! object; `index.js` turns it into the matching `WardenError` subclass. Nothing here
//! interprets Warden's semantics.

use std::ffi::CStr;

use napi::bindgen_prelude::{JsObjectValue, ToNapiValue, TypeName};
use napi::{Env, JsValue, Task};

use crate::ffi::{self, WardenBuf, WardenResult, WARDEN_RESULT_OK};

/// A refused or failed C call: its code and its error object as JSON text.
#[derive(Debug, Clone)]
pub struct Failure {
    pub error_json: String,
}

impl Failure {
    /// An error the binding raises itself (a closed handle, a finished permit), shaped like
    /// the library's error object so JavaScript sees one kind of error.
    pub fn binding(code: &str, reason: &str, message: &str) -> Failure {
        Failure {
            error_json: format!(
                "{{\"code\":{},\"reason\":{},\"message\":{}}}",
                json_string(code),
                json_string(reason),
                json_string(message)
            ),
        }
    }

    /// `WARDEN_RESULT_INVALID_INPUT`, raised by the binding.
    pub fn invalid(message: &str) -> Failure {
        Failure::binding("WARDEN_RESULT_INVALID_INPUT", "invalid_input", message)
    }

    /// `WARDEN_RESULT_POISONED`: a thread panicked holding the binding's `what` lock.
    pub fn poisoned(what: &str) -> Failure {
        Failure::binding("WARDEN_RESULT_POISONED", "poisoned", &format!("the {what} lock is poisoned"))
    }

    /// `WARDEN_RESULT_PANIC`: the library broke its contract (or could not allocate).
    pub fn panic(message: &str) -> Failure {
        Failure::binding("WARDEN_RESULT_PANIC", "panic", message)
    }
}

impl From<Failure> for napi::Error {
    fn from(failure: Failure) -> napi::Error {
        napi::Error::new(napi::Status::GenericFailure, failure.error_json)
    }
}

/// The structured JavaScript error for a failure carried in `error` (its reason is the
/// library's error object, from `From<Failure>`): an `Error` with `code`, `message` and
/// `fields`. Any other error (napi's own) is returned as it is.
pub fn structured(env: &Env, error: napi::Error) -> napi::Error {
    let Ok(serde_json::Value::Object(fields)) = serde_json::from_str::<serde_json::Value>(&error.reason) else {
        return error;
    };
    let Some(code) = fields.get("code").and_then(serde_json::Value::as_str).map(str::to_owned) else {
        return error;
    };
    let message = fields.get("message").and_then(serde_json::Value::as_str).unwrap_or(&code).to_owned();
    let built = (|| -> napi::Result<napi::Error> {
        let mut object = env.create_error(napi::Error::new(napi::Status::GenericFailure, message))?;
        object.set_named_property("code", code)?;
        object.set_named_property("fields", serde_json::Value::Object(fields))?;
        Ok(napi::Error::from(object.to_unknown()))
    })();
    built.unwrap_or(error)
}

/// `result`, with a failure thrown as the structured error (see `structured`).
pub fn thrown<T>(env: &Env, result: napi::Result<T>) -> napi::Result<T> {
    result.map_err(|error| structured(env, error))
}

pub type CallResult<T> = Result<T, Failure>;

/// The constant name of `code`, e.g. `WARDEN_RESULT_DUPLICATE`.
pub fn result_name(code: WardenResult) -> String {
    // SAFETY: warden_result_name returns a static NUL-terminated string and never NULL; the
    // NULL check only guards a broken library.
    unsafe {
        let name = ffi::warden_result_name(code);
        if name.is_null() {
            return "WARDEN_RESULT_UNKNOWN".to_owned();
        }
        CStr::from_ptr(name).to_string_lossy().into_owned()
    }
}

/// Copy an owned buffer into a `String` and free it.
pub fn take(buf: WardenBuf) -> String {
    if buf.ptr.is_null() {
        return String::new();
    }
    // SAFETY: a non-NULL warden_buf written by the library points at `len` initialised bytes
    // that stay valid until warden_buf_free, which is called right after the copy.
    let text = unsafe { String::from_utf8_lossy(std::slice::from_raw_parts(buf.ptr, buf.len)).into_owned() };
    // SAFETY: the buffer came from the library and is freed exactly once, here.
    unsafe { ffi::warden_buf_free(buf) };
    text
}

/// Turn a result code and its error buffer into `Ok(())` or the error object.
pub fn check(code: WardenResult, err: WardenBuf) -> CallResult<()> {
    if code == WARDEN_RESULT_OK {
        // On success the library leaves `err` untouched; free it anyway should it not have.
        if !err.ptr.is_null() {
            take(err);
        }
        return Ok(());
    }
    let text = take(err);
    if text.is_empty() {
        let name = result_name(code);
        return Err(Failure::binding(&name, "", &format!("{name} ({code}); the library gave no error object")));
    }
    Err(Failure { error_json: text })
}

/// A C call whose last parameter is `warden_buf *err`: `Ok(())` or its failure.
pub fn status(call: impl FnOnce(*mut WardenBuf) -> WardenResult) -> CallResult<()> {
    let mut err = WardenBuf::empty();
    let code = call(&mut err);
    check(code, err)
}

/// A C call ending `(warden_buf *out, warden_buf *err)`: the output's text, or its failure.
pub fn output(call: impl FnOnce(*mut WardenBuf, *mut WardenBuf) -> WardenResult) -> CallResult<String> {
    let mut out = WardenBuf::empty();
    let mut err = WardenBuf::empty();
    let code = call(&mut out, &mut err);
    check(code, err)?;
    Ok(take(out))
}

/// Blocking work run as N-API async work on the libuv thread pool: a Promise of its value,
/// rejected with the structured error (see `structured`) when it fails.
pub struct Blocking<T>(Box<dyn FnMut() -> CallResult<T> + Send>);

impl<T> Blocking<T> {
    pub fn new(work: impl FnMut() -> CallResult<T> + Send + 'static) -> Blocking<T> {
        Blocking(Box::new(work))
    }
}

impl<T: ToNapiValue + TypeName + Send + 'static> Task for Blocking<T> {
    type Output = T;
    type JsValue = T;

    fn compute(&mut self) -> napi::Result<T> {
        Ok((self.0)()?)
    }

    fn resolve(&mut self, _env: Env, output: T) -> napi::Result<T> {
        Ok(output)
    }

    fn reject(&mut self, env: Env, err: napi::Error) -> napi::Result<T> {
        Err(structured(&env, err))
    }
}

/// A borrowed UTF-8 view for a `(ptr, len)` parameter.
pub fn bytes(text: &str) -> (*const u8, usize) {
    (text.as_ptr(), text.len())
}

/// An optional `(ptr, len)` parameter: NULL and 0 when absent.
pub fn optional(text: Option<&str>) -> (*const u8, usize) {
    match text {
        Some(text) => bytes(text),
        None => (std::ptr::null(), 0),
    }
}

/// The UTF-8 text a callback was handed as `(ptr, len)`; None when it is not UTF-8 (or NULL
/// with a length).
///
/// # Safety
/// `ptr` is NULL or valid for `len` bytes that outlive `'a`.
pub unsafe fn borrowed_text<'a>(ptr: *const u8, len: usize) -> Option<&'a str> {
    match (ptr.is_null(), len) {
        (_, 0) => Some(""),
        (true, _) => None,
        // SAFETY: non-NULL and valid for `len` bytes, by this function's contract.
        (false, _) => std::str::from_utf8(unsafe { std::slice::from_raw_parts(ptr, len) }).ok(),
    }
}

/// A JavaScript number taken as a `uint64_t` count or duration.
pub fn unsigned(what: &str, value: i64) -> CallResult<u64> {
    u64::try_from(value).map_err(|_| Failure::invalid(&format!("{what} must not be negative")))
}

fn json_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
