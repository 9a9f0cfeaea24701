//! `warden_store_begin` and `warden_store_complete` return each refusal as its own code: a host
//! without a permit decides what to do next from the code, so which one comes back is pinned.

use std::ptr;

use serde_json::json;

use super::super::result::*;
use super::super::store_ops::*;
use super::{open, with_out, Failure, Handle, Owned};

const KEY: &str = "refund:pay_kinds";

fn action() -> String {
    json!({
        "name": "stripe.refund",
        "arguments": {"payment_id": "pay_kinds", "amount": 1},
        "principal": {"agent": "worker"},
    })
    .to_string()
}

/// Reserves KEY for a fresh proposal and returns its action_id.
fn reserve(handle: &Handle) -> String {
    let action = action();
    // SAFETY: a live handle, live strings and writable out-parameters.
    let reserved = with_out(|out, err| unsafe {
        warden_store_reserve(
            handle.raw,
            action.as_ptr(),
            action.len(),
            KEY.as_ptr(),
            KEY.len(),
            ptr::null(),
            0,
            0,
            out,
            err,
        )
    })
    .expect("reserved")
    .json();
    reserved["action_id"].as_str().expect("action_id").to_owned()
}

fn begin(handle: &Handle, key: &str, holder: &str, attempt: u32) -> Result<Owned, Failure> {
    // SAFETY: a live handle, live strings and writable out-parameters.
    with_out(|out, err| unsafe {
        warden_store_begin(handle.raw, key.as_ptr(), key.len(), holder.as_ptr(), holder.len(), attempt, out, err)
    })
}

fn complete(handle: &Handle, holder: &str, attempt: u32, outcome: &str) -> Result<Owned, Failure> {
    // SAFETY: a live handle, live strings and writable out-parameters.
    with_out(|out, err| unsafe {
        warden_store_complete(
            handle.raw,
            KEY.as_ptr(),
            KEY.len(),
            holder.as_ptr(),
            holder.len(),
            attempt,
            outcome.as_ptr(),
            outcome.len(),
            out,
            err,
        )
    })
}

fn code(result: Result<Owned, Failure>) -> warden_result {
    result.err().map_or(WARDEN_RESULT_OK, |failure| failure.code)
}

const COMMITTED: &str = r#"{"committed": {"refund_id": "re_1"}}"#;
const AMBIGUOUS: &str = r#"{"ambiguous": "the reply was lost"}"#;

#[test]
fn begin_on_a_key_with_no_reservation_is_not_found() {
    let handle = open(None);
    assert_eq!(code(begin(&handle, "refund:nothing_here", "act_x", 1)), WARDEN_RESULT_NOT_FOUND);
}

#[test]
fn another_proposal_beginning_or_completing_a_live_reservation_is_in_progress() {
    let handle = open(None);
    let holder = reserve(&handle);
    let other = "act_00000000000000000000000000000000";
    assert_eq!(code(begin(&handle, KEY, other, 1)), WARDEN_RESULT_IN_PROGRESS);
    assert_eq!(code(complete(&handle, other, 1, COMMITTED)), WARDEN_RESULT_IN_PROGRESS);
    // The refusals wrote nothing: the holder still begins.
    assert_eq!(code(begin(&handle, KEY, &holder, 1)), WARDEN_RESULT_OK);
}

#[test]
fn the_holder_beginning_twice_or_reporting_for_another_attempt_is_a_late_outcome() {
    let handle = open(None);
    let holder = reserve(&handle);
    assert_eq!(code(begin(&handle, KEY, &holder, 1)), WARDEN_RESULT_OK);
    assert_eq!(code(begin(&handle, KEY, &holder, 1)), WARDEN_RESULT_LATE_OUTCOME);
    assert_eq!(code(complete(&handle, &holder, 2, COMMITTED)), WARDEN_RESULT_LATE_OUTCOME);
}

#[test]
fn completing_a_committed_effect_again_is_a_duplicate() {
    let handle = open(None);
    let holder = reserve(&handle);
    assert_eq!(code(begin(&handle, KEY, &holder, 1)), WARDEN_RESULT_OK);
    assert_eq!(code(complete(&handle, &holder, 1, COMMITTED)), WARDEN_RESULT_OK);
    let again = complete(&handle, &holder, 1, COMMITTED).expect_err("already committed");
    assert_eq!(again.code, WARDEN_RESULT_DUPLICATE);
    assert_eq!(again.error["state"], "committed");
    assert_eq!(code(begin(&handle, KEY, &holder, 1)), WARDEN_RESULT_DUPLICATE);
}

#[test]
fn a_known_outcome_after_the_effect_went_ambiguous_is_ambiguous_and_an_ambiguous_one_is_accepted() {
    let handle = open(None);
    let holder = reserve(&handle);
    assert_eq!(code(begin(&handle, KEY, &holder, 1)), WARDEN_RESULT_OK);
    assert_eq!(code(complete(&handle, &holder, 1, AMBIGUOUS)), WARDEN_RESULT_OK);
    assert_eq!(code(complete(&handle, &holder, 1, COMMITTED)), WARDEN_RESULT_AMBIGUOUS);
    // Reporting ambiguous again is idempotent and leaves the record as it is.
    let unchanged = complete(&handle, &holder, 1, r#"{"ambiguous": "still no reply"}"#).expect("idempotent").json();
    assert_eq!(unchanged["state"], "ambiguous");
    assert_eq!(unchanged["error"], "the reply was lost");
    assert_eq!(code(begin(&handle, KEY, &holder, 1)), WARDEN_RESULT_AMBIGUOUS);
}
