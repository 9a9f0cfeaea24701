//! The C ABI exercised from Rust through the exported functions themselves. This module holds the
//! helpers every test file shares (an owned buffer, a failure, a handle on a fresh store, the
//! calls most tests make); the tests are in `tests/`, one file per concept.

use std::ffi::CStr;
use std::ptr;

use serde_json::{json, Value};

use super::bytes::*;
use super::effects::*;
use super::handle::*;
use super::permit::*;
use super::result::*;

const POLICY: &str = r#"schema: warden/v1
environment: production
actions:
  customer.read:
    decision: allow
  stripe.refund:
    effect: "refund:{payment_id}"
    max_attempts: 3
    lease: PT5M
    rules:
      - when: { amount_gte: 0, amount_lte: 50000 }
        decision: allow
      - when: { amount_gte: 0, amount_lte: 500000 }
        decision: approve
      - decision: deny
"#;

/// An owned buffer from the library, freed on drop.
struct Owned(warden_buf);

impl Owned {
    fn text(&self) -> &str {
        // SAFETY: the library returned `len` bytes of UTF-8 at `ptr`, alive until freed.
        let bytes = unsafe { std::slice::from_raw_parts(self.0.ptr, self.0.len) };
        std::str::from_utf8(bytes).expect("the library returns UTF-8")
    }

    fn json(&self) -> Value {
        serde_json::from_str(self.text()).expect("the library returns JSON")
    }
}

impl std::fmt::Debug for Owned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.ptr.is_null() {
            f.write_str("<empty>")
        } else {
            f.write_str(self.text())
        }
    }
}

impl Drop for Owned {
    fn drop(&mut self) {
        // SAFETY: a buffer returned by the library, freed once here.
        unsafe { warden_buf_free(std::mem::replace(&mut self.0, empty())) }
    }
}

fn empty() -> warden_buf {
    warden_buf { ptr: ptr::null_mut(), len: 0 }
}

/// A failed call: its code and its error object.
#[derive(Debug)]
struct Failure {
    code: warden_result,
    error: Value,
}

/// Runs `call` with an output buffer and an error buffer; `Ok(output)` on WARDEN_RESULT_OK.
fn with_out(call: impl FnOnce(*mut warden_buf, *mut warden_buf) -> warden_result) -> Result<Owned, Failure> {
    let mut out = empty();
    let mut err = empty();
    let code = call(&raw mut out, &raw mut err);
    let (out, err) = (Owned(out), Owned(err));
    if code == WARDEN_RESULT_OK {
        assert!(err.0.ptr.is_null(), "err is untouched on success");
        Ok(out)
    } else {
        assert!(out.0.ptr.is_null(), "out is written only on success");
        Err(Failure { code, error: err.json() })
    }
}

fn with_err(call: impl FnOnce(*mut warden_buf) -> warden_result) -> Result<(), Failure> {
    with_out(|_, err| call(err)).map(drop)
}

struct Handle {
    raw: *mut warden_handle,
    _dir: tempfile::TempDir,
}

impl Drop for Handle {
    fn drop(&mut self) {
        // SAFETY: a handle from `warden_open`, closed once here.
        unsafe { warden_close(self.raw) }
    }
}

fn open(config: Option<&str>) -> Handle {
    open_with(config, r#"{"environment": "production"}"#).expect("the store opens")
}

/// Opens a store in a fresh directory with these `options_json`.
fn open_with(config: Option<&str>, options: &str) -> Result<Handle, Failure> {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("state.redb").to_string_lossy().into_owned();
    let config_path = config.map(|text| {
        let path = dir.path().join("warden.yaml");
        std::fs::write(&path, text).expect("write the config");
        path.to_string_lossy().into_owned()
    });
    let mut raw = ptr::null_mut();
    let opened = with_err(|err| {
        let (config, config_len) = config_path.as_deref().map_or((ptr::null(), 0), |c| (c.as_ptr(), c.len()));
        // SAFETY: every (ptr, len) pair is a live Rust string; `raw` and `err` are writable.
        unsafe {
            warden_open(
                store.as_ptr(),
                store.len(),
                config,
                config_len,
                options.as_ptr(),
                options.len(),
                &raw mut raw,
                err,
            )
        }
    });
    opened.map(|()| Handle { raw, _dir: dir })
}

fn propose(handle: &Handle, request: &Value) -> Result<*mut warden_permit, Failure> {
    let text = request.to_string();
    let mut permit = ptr::null_mut();
    // SAFETY: a live handle, a live string, writable out-parameters.
    with_err(|err| unsafe { warden_propose(handle.raw, text.as_ptr(), text.len(), &raw mut permit, err) })?;
    assert!(!permit.is_null());
    Ok(permit)
}

fn info(permit: *mut warden_permit) -> Value {
    // SAFETY: a live permit and writable out-parameters.
    with_out(|out, err| unsafe { warden_permit_info(permit, out, err) }).expect("permit info").json()
}

fn commit(permit: *mut warden_permit, result: &str) -> Result<(), Failure> {
    // SAFETY: a live permit, a live string, a writable err.
    with_err(|err| unsafe { warden_permit_commit(permit, result.as_ptr(), result.len(), err) })
}

fn free(permit: *mut warden_permit) {
    // SAFETY: a permit from `warden_propose`, freed once.
    unsafe { warden_permit_free(permit) }
}

fn effect(handle: &Handle, key: &str) -> Value {
    // SAFETY: a live handle, a live string, writable out-parameters.
    with_out(|out, err| unsafe { warden_effect_get(handle.raw, key.as_ptr(), key.len(), out, err) })
        .expect("effect get")
        .json()
}

fn refund(payment: &str, amount: i64) -> Value {
    json!({
        "name": "stripe.refund",
        "arguments": {"payment_id": payment, "amount": amount},
        "principal": {"agent": "refund-agent", "user": "ada"},
    })
}

fn name(code: warden_result) -> &'static str {
    // SAFETY: `warden_result_name` returns a static NUL-terminated string.
    unsafe { CStr::from_ptr(warden_result_name(code)) }.to_str().expect("ASCII")
}

fn known_codes() -> Vec<(u32, String)> {
    CODES.iter().map(|(code, name)| (*code, name.to_str().expect("ASCII").to_owned())).collect()
}

fn approval_required(handle: &Handle, request: &Value) -> String {
    let refused = propose(handle, request).expect_err("approval required");
    assert_eq!(refused.code, WARDEN_RESULT_APPROVAL_REQUIRED, "{refused:?}");
    refused.error["request_id"].as_str().expect("a request id").to_owned()
}

mod approvals;
mod boundary;
mod codes;
mod evidence;
mod header;
mod invalid_kinds;
mod permits;
mod pure;
mod scoped;
mod store_refusals;
mod telemetry;
