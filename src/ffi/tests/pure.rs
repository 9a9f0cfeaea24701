//! The pure functions: the action hash, canonical JSON and the library's defaults.

use std::ptr;

use serde_json::Value;

use super::super::bytes::*;
use super::super::pure::*;
use super::super::result::*;
use super::{empty, with_out};

#[test]
fn the_action_hash_is_ctrlruns() {
    // From ctrlrun 0.12.2's vectors (actions.json row 3), as in `action::tests`.
    let action = r#"{"name": "email.send", "arguments": {}, "principal": {"agent": "a", "user": "bob"}, "environment": "staging"}"#;
    // SAFETY: a live string and writable out-parameters.
    let hash =
        with_out(|out, err| unsafe { warden_action_hash(action.as_ptr(), action.len(), out, err) }).expect("hash");
    assert_eq!(hash.text(), "sha256:8b113a75ca3fee715ffc7c33d687b6805820678eecdf4287ac34610a13dcd097");
    let float = r#"{"price": 1.5}"#;
    // SAFETY: as above.
    let refused = with_out(|out, err| unsafe { warden_canonical(float.as_ptr(), float.len(), out, err) });
    let refused = refused.expect_err("a float has no canonical form");
    assert_eq!(refused.code, WARDEN_RESULT_INVALID_INPUT);
    assert!(refused.error["message"].as_str().unwrap_or_default().contains("price"));
}

#[test]
fn the_defaults_cross_the_boundary_as_the_core_defines_them() {
    let mut out = empty();
    // SAFETY: out points at a local; err is NULL.
    assert_eq!(unsafe { warden_defaults(&raw mut out, ptr::null_mut()) }, WARDEN_RESULT_OK);
    // SAFETY: out was written on OK with `len` bytes.
    let text = unsafe { std::slice::from_raw_parts(out.ptr, out.len) }.to_vec();
    // SAFETY: out came from the library and is freed once.
    unsafe { warden_buf_free(out) };
    let defaults: Value = serde_json::from_slice(&text).expect("JSON");
    assert_eq!(defaults, crate::limits::defaults_json());
    assert_eq!((defaults["list_limit"].as_u64(), defaults["environment"].as_str()), (Some(100), Some("production")));
    // SAFETY: NULL out is refused before anything is written.
    assert_eq!(unsafe { warden_defaults(ptr::null_mut(), ptr::null_mut()) }, WARDEN_RESULT_INVALID_INPUT);
}
