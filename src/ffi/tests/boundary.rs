//! The boundary itself: a NULL or malformed argument is INVALID_INPUT and writes nothing, outputs
//! are NUL-terminated, and a panic comes back as PANIC and poisons the handle and its permits.

use std::ptr;

use super::super::bytes::*;
use super::super::handle::*;
use super::super::permit::*;
use super::super::pure::*;
use super::super::result::*;
use super::{commit, effect, empty, free, open, propose, refund, with_err, with_out, POLICY};

#[test]
fn a_null_required_pointer_is_invalid_input_and_leaves_out_untouched() {
    let sentinel = ptr::dangling_mut::<warden_handle>();
    let mut out = sentinel;
    let failed = with_err(|err| {
        // SAFETY: NULL store is what is under test; `out` and `err` are writable.
        unsafe { warden_open(ptr::null(), 0, ptr::null(), 0, ptr::null(), 0, &raw mut out, err) }
    })
    .expect_err("NULL store is refused");
    assert_eq!(failed.code, WARDEN_RESULT_INVALID_INPUT);
    assert_eq!(failed.error["code"], "WARDEN_RESULT_INVALID_INPUT");
    assert!(failed.error["message"].as_str().unwrap_or_default().contains("store"), "{}", failed.error);
    assert_eq!(out, sentinel, "out is written only on success");

    let handle = open(Some(POLICY));
    let request = refund("pay_null", 100).to_string();
    // SAFETY: NULL out is what is under test.
    let code = unsafe { warden_propose(handle.raw, request.as_ptr(), request.len(), ptr::null_mut(), ptr::null_mut()) };
    assert_eq!(code, WARDEN_RESULT_INVALID_INPUT);
    assert!(effect(&handle, "refund:pay_null").is_null(), "nothing was reserved for a call that could not return");
    // SAFETY: NULL handle is what is under test.
    let code = unsafe {
        warden_propose(ptr::null_mut(), request.as_ptr(), request.len(), &mut ptr::null_mut(), ptr::null_mut())
    };
    assert_eq!(code, WARDEN_RESULT_INVALID_INPUT);
    // SAFETY: NULL with a length is what is under test.
    let code = unsafe { warden_propose(handle.raw, ptr::null(), 3, &mut ptr::null_mut(), ptr::null_mut()) };
    assert_eq!(code, WARDEN_RESULT_INVALID_INPUT);
    // Freeing NULL is a no-op.
    // SAFETY: NULL is allowed.
    unsafe {
        warden_close(ptr::null_mut());
        warden_permit_free(ptr::null_mut());
        warden_buf_free(empty());
    }
}

#[test]
fn a_result_given_as_null_with_a_length_is_refused_naming_its_parameter_and_the_permit_stays_usable() {
    let handle = open(Some(POLICY));
    let permit = propose(&handle, &refund("pay_null_result", 100)).expect("permit");
    // SAFETY: NULL with a length is what is under test; a live permit and a writable err.
    let json = with_err(|err| unsafe { warden_permit_commit(permit, ptr::null(), 5, err) }).expect_err("refused");
    assert_eq!(json.code, WARDEN_RESULT_INVALID_INPUT);
    assert_eq!(json.error["message"], "invalid input: result_json is NULL with a length of 5");
    // SAFETY: as above.
    let text = with_err(|err| unsafe { warden_permit_commit_text(permit, ptr::null(), 3, err) }).expect_err("refused");
    assert_eq!(text.error["message"], "invalid input: text is NULL with a length of 3");
    commit(permit, r#"{"ok":true}"#).expect("the refusals spent nothing: the permit still commits");
    free(permit);
    assert_eq!(effect(&handle, "refund:pay_null_result")["state"], "committed");
}

#[test]
fn invalid_utf8_and_bad_json_are_invalid_input() {
    let handle = open(Some(POLICY));
    for bytes in [&b"{\"name\": \"\xff\"}"[..], b"{not json", b"[]", b"{\"name\": \"customer.read\", \"typo\": 1}"] {
        let mut permit = ptr::null_mut();
        // SAFETY: a live handle and byte slice; writable out-parameters.
        let failed =
            with_err(|err| unsafe { warden_propose(handle.raw, bytes.as_ptr(), bytes.len(), &raw mut permit, err) })
                .expect_err("refused");
        assert_eq!(failed.code, WARDEN_RESULT_INVALID_INPUT, "{}", failed.error);
        assert!(permit.is_null());
    }
}

#[test]
fn outputs_are_nul_terminated_past_their_length() {
    let text = r#"{"b": 1, "a": [true, null]}"#;
    // SAFETY: a live string and writable out-parameters.
    let out = with_out(|out, err| unsafe { warden_canonical(text.as_ptr(), text.len(), out, err) }).expect("canonical");
    assert_eq!(out.text(), r#"{"a":[true,null],"b":1}"#);
    // SAFETY: the library promises one NUL byte after the data.
    assert_eq!(unsafe { *out.0.ptr.add(out.0.len) }, 0);
}

#[cfg(feature = "test-exports")]
#[test]
fn a_forced_panic_returns_panic_then_the_handle_and_its_permits_answer_poisoned() {
    use super::super::test_exports::warden_test_panic;

    let handle = open(Some(POLICY));
    let permit = propose(&handle, &refund("pay_panic", 100)).expect("allowed");
    // SAFETY: a live handle and a writable err.
    let panicked = with_err(|err| unsafe { warden_test_panic(handle.raw, err) }).expect_err("panics");
    assert_eq!(panicked.code, WARDEN_RESULT_PANIC);
    assert_eq!(panicked.error["code"], "WARDEN_RESULT_PANIC");
    assert!(panicked.error["message"].as_str().unwrap_or_default().contains("warden_test_panic"));

    let poisoned = propose(&handle, &refund("pay_other", 100)).expect_err("poisoned");
    assert_eq!(poisoned.code, WARDEN_RESULT_POISONED);
    assert_eq!(poisoned.error["code"], "WARDEN_RESULT_POISONED");
    assert_eq!(commit(permit, "{}").expect_err("poisoned").code, WARDEN_RESULT_POISONED);
    // SAFETY: a live handle and a writable err.
    let again = with_err(|err| unsafe { warden_test_panic(handle.raw, err) }).expect_err("still poisoned");
    assert_eq!(again.code, WARDEN_RESULT_POISONED);
    free(permit);
}
