//! `warden_store_begin` and `warden_store_complete` return each refusal as its own code: a host
//! without a permit decides what to do next from the code, so which one comes back is pinned.
//! A handle opened without a policy document refuses `warden_propose` and serves these calls.

use std::ptr;

use serde_json::json;

use super::super::result::*;
use super::super::store_ops::*;
use super::{open, propose, refund, with_err, with_out, Failure, Handle, Owned};

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

fn mark_ambiguous(handle: &Handle, holder: Option<(&str, u32)>) -> Result<Owned, Failure> {
    let (id, id_len, attempt) = holder.map_or((ptr::null(), 0, 0), |(id, attempt)| (id.as_ptr(), id.len(), attempt));
    // SAFETY: a live handle, live strings (or NULL, 0) and writable out-parameters.
    with_out(|out, err| unsafe {
        warden_store_mark_ambiguous(handle.raw, KEY.as_ptr(), KEY.len(), id, id_len, attempt, ptr::null(), 0, out, err)
    })
}

fn extend(handle: &Handle, holder: &str, lease_ms: u64) -> Result<Owned, Failure> {
    // SAFETY: a live handle, live strings and writable out-parameters.
    with_out(|out, err| unsafe {
        warden_store_extend_lease(
            handle.raw,
            KEY.as_ptr(),
            KEY.len(),
            holder.as_ptr(),
            holder.len(),
            1,
            lease_ms,
            out,
            err,
        )
    })
}

fn consume(handle: &Handle, approval_id: &str) -> Result<Owned, Failure> {
    let action = action();
    // SAFETY: a live handle, live strings and writable out-parameters.
    with_out(|out, err| unsafe {
        warden_store_consume_approval(
            handle.raw,
            action.as_ptr(),
            action.len(),
            approval_id.as_ptr(),
            approval_id.len(),
            out,
            err,
        )
    })
}

fn state(handle: &Handle) -> serde_json::Value {
    let key = KEY;
    // SAFETY: a live handle, a live string and writable out-parameters.
    let record = with_out(|out, err| unsafe {
        super::super::effects::warden_effect_get(handle.raw, key.as_ptr(), key.len(), out, err)
    });
    record.expect("read").json()["state"].clone()
}

#[test]
fn a_reserved_record_that_never_began_refuses_committed_and_not_executed_and_writes_nothing() {
    let handle = open(None);
    let holder = reserve(&handle);
    for outcome in [COMMITTED, r#"{"not_executed": "declined"}"#] {
        let refused = complete(&handle, &holder, 1, outcome).expect_err("never begun");
        assert_eq!(refused.code, WARDEN_RESULT_INVALID_INPUT, "{:?}", refused.error);
        assert!(refused.error["message"].as_str().unwrap_or_default().contains("never begun"));
        assert_eq!(state(&handle), "reserved");
    }
    assert_eq!(code(begin(&handle, KEY, &holder, 1)), WARDEN_RESULT_OK);
    assert_eq!(code(complete(&handle, &holder, 1, COMMITTED)), WARDEN_RESULT_OK);
}

#[test]
fn mark_ambiguous_of_a_live_reservation_must_name_its_holder() {
    let handle = open(None);
    let holder = reserve(&handle);
    let anonymous = mark_ambiguous(&handle, None).expect_err("live lease, no holder");
    assert_eq!(anonymous.code, WARDEN_RESULT_IN_PROGRESS);
    let message = anonymous.error["message"].as_str().unwrap_or_default();
    assert!(message.contains(&holder), "the refusal names the holder: {message}");
    let other = "act_00000000000000000000000000000000";
    assert_eq!(code(mark_ambiguous(&handle, Some((other, 1)))), WARDEN_RESULT_IN_PROGRESS);
    assert_eq!(code(mark_ambiguous(&handle, Some((&holder, 2)))), WARDEN_RESULT_IN_PROGRESS);
    assert_eq!(state(&handle), "reserved");
    let marked = mark_ambiguous(&handle, Some((&holder, 1))).expect("the holder").json();
    assert_eq!(marked["state"], "ambiguous");
}

#[test]
fn extend_lease_needs_an_executing_holder_and_a_positive_lease() {
    let handle = open(None);
    let holder = reserve(&handle);
    // Not begun: a state refusal (the key is held and not executing), not bad input.
    let not_begun = extend(&handle, &holder, 60_000);
    assert_eq!(code(not_begun), WARDEN_RESULT_IN_PROGRESS, "not begun");
    assert_eq!(state(&handle), "reserved", "nothing written");
    assert_eq!(code(begin(&handle, KEY, &holder, 1)), WARDEN_RESULT_OK);
    assert_eq!(code(extend(&handle, &holder, 0)), WARDEN_RESULT_INVALID_INPUT);
    assert_eq!(code(extend(&handle, &holder, u64::MAX)), WARDEN_RESULT_INVALID_INPUT);
    assert_eq!(code(extend(&handle, "act_00000000000000000000000000000000", 600_000)), WARDEN_RESULT_IN_PROGRESS);
    let extended = extend(&handle, &holder, 600_000).expect("extended").json();
    assert_eq!(extended["state"], "executing");
    // Shorter than the lease it has now: refused.
    assert_eq!(code(extend(&handle, &holder, 1)), WARDEN_RESULT_INVALID_INPUT);
}

#[test]
fn an_approval_is_consumed_without_a_key_once() {
    let handle = open(None);
    let request = json!({
        "name": "stripe.refund",
        "arguments": {"payment_id": "pay_kinds", "amount": 1},
        "principal": {"agent": "worker"},
    })
    .to_string();
    // SAFETY: a live handle, a live string and writable out-parameters.
    let created = with_out(|out, err| unsafe {
        super::super::approvals::warden_approval_request(handle.raw, request.as_ptr(), request.len(), out, err)
    })
    .expect("requested")
    .json();
    let id = created["approval_id"].as_str().expect("approval_id").to_owned();
    assert_eq!(code(consume(&handle, &id)), WARDEN_RESULT_APPROVAL_MISMATCH, "pending, not granted");
    let by = "ops:bob";
    // SAFETY: as above.
    with_out(|out, err| unsafe {
        super::super::approvals::warden_approval_grant(
            handle.raw,
            id.as_ptr(),
            id.len(),
            by.as_ptr(),
            by.len(),
            0,
            out,
            err,
        )
    })
    .expect("granted");
    let consumed = consume(&handle, &id).expect("consumed").json();
    assert_eq!(consumed["status"], "consumed", "{consumed}");
    assert_eq!(code(consume(&handle, &id)), WARDEN_RESULT_APPROVAL_MISMATCH, "spent once");
    assert_eq!(code(consume(&handle, "apr_unknown")), WARDEN_RESULT_APPROVAL_MISMATCH, "unknown");
}

#[test]
fn a_handle_without_a_config_refuses_propose_but_serves_the_kernel_calls() {
    let handle = open(None);
    let refused = propose(&handle, &refund("pay_k", 1)).expect_err("no document");
    assert_eq!(refused.code, WARDEN_RESULT_CONFIG);

    let action = json!({
        "name": "stripe.refund",
        "arguments": {"payment_id": "pay_k", "amount": 1},
        "principal": {"agent": "worker"},
    })
    .to_string();
    let key = "refund:pay_k";
    let reserve = || {
        // SAFETY: a live handle, strings and writable out-parameters.
        with_out(|out, err| unsafe {
            warden_store_reserve(
                handle.raw,
                action.as_ptr(),
                action.len(),
                key.as_ptr(),
                key.len(),
                ptr::null(),
                0,
                0,
                out,
                err,
            )
        })
    };
    let reserved = reserve().expect("reserved").json();
    assert_eq!(reserved["state"], "reserved");
    let holder = reserved["action_id"].as_str().expect("action_id").to_owned();
    assert_eq!(reserve().expect_err("held").code, WARDEN_RESULT_IN_PROGRESS);
    // SAFETY: a live handle and strings.
    let began = with_out(|out, err| unsafe {
        warden_store_begin(handle.raw, key.as_ptr(), key.len(), holder.as_ptr(), holder.len(), 1, out, err)
    })
    .expect("began");
    assert_eq!(began.json()["state"], "executing");
    let outcome = r#"{"committed": {"refund_id": "re_9"}}"#;
    // SAFETY: as above.
    let done = with_out(|out, err| unsafe {
        warden_store_complete(
            handle.raw,
            key.as_ptr(),
            key.len(),
            holder.as_ptr(),
            holder.len(),
            1,
            outcome.as_ptr(),
            outcome.len(),
            out,
            err,
        )
    })
    .expect("completed");
    assert_eq!(done.json()["state"], "committed");
    let refused = reserve().expect_err("duplicate");
    assert_eq!(refused.code, WARDEN_RESULT_DUPLICATE);
    assert_eq!(refused.error["state"], "committed");

    let bad = r#"{"committed": 1, "ambiguous": "x"}"#;
    // SAFETY: as above.
    let shape = with_err(|err| unsafe {
        warden_store_complete(
            handle.raw,
            key.as_ptr(),
            key.len(),
            holder.as_ptr(),
            holder.len(),
            1,
            bad.as_ptr(),
            bad.len(),
            ptr::null_mut(),
            err,
        )
    });
    assert_eq!(shape.expect_err("two outcomes").code, WARDEN_RESULT_INVALID_INPUT);
    let other = "refund:pay_other";
    // SAFETY: as above.
    let missing = with_err(|err| unsafe {
        warden_store_mark_ambiguous(
            handle.raw,
            other.as_ptr(),
            other.len(),
            ptr::null(),
            0,
            0,
            ptr::null(),
            0,
            ptr::null_mut(),
            err,
        )
    });
    assert!(missing.is_err());
}

#[cfg(not(feature = "test-exports"))]
#[test]
fn a_release_library_refuses_the_manual_clock_option() {
    let refused = super::open_with(None, r#"{"clock": {"manual_ms": 1}}"#).err().expect("unknown option");
    assert_eq!(refused.code, WARDEN_RESULT_INVALID_INPUT);
}

/// With the `test-exports` feature: a manual clock moves the lease boundaries without sleeping.
#[cfg(feature = "test-exports")]
mod manual_clock {
    use super::super::super::test_exports::warden_test_clock_set;
    use super::*;

    const START_MS: u64 = 1_764_000_000_000;
    /// `warden_store_reserve`'s lease, in ms.
    const LEASE_MS: u64 = 60_000;

    fn open_at_start() -> Handle {
        let options = format!(r#"{{"environment": "production", "clock": {{"manual_ms": {START_MS}}}}}"#);
        super::super::open_with(None, &options).expect("opens with a manual clock")
    }

    fn set(handle: &Handle, now_ms: u64) {
        // SAFETY: a live handle and a writable err.
        super::super::with_err(|err| unsafe { warden_test_clock_set(handle.raw, now_ms, err) }).expect("clock set");
    }

    fn reserve_leased(handle: &Handle) -> String {
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
                LEASE_MS,
                out,
                err,
            )
        })
        .expect("reserved")
        .json();
        reserved["action_id"].as_str().expect("action_id").to_owned()
    }

    #[test]
    fn begin_at_the_expiry_instant_and_one_millisecond_past_it() {
        // (ms past the expiry instant, code, state afterwards)
        let table = [(0, WARDEN_RESULT_OK, "executing"), (1, WARDEN_RESULT_AMBIGUOUS, "ambiguous")];
        for (past, expected, after) in table {
            let handle = open_at_start();
            let holder = reserve_leased(&handle);
            set(&handle, START_MS + LEASE_MS + past);
            assert_eq!(code(begin(&handle, KEY, &holder, 1)), expected, "{past} ms past");
            assert_eq!(state(&handle), after, "{past} ms past");
        }
    }

    #[test]
    fn mark_ambiguous_without_a_holder_at_the_expiry_instant_and_one_millisecond_past_it() {
        let table = [(0, WARDEN_RESULT_IN_PROGRESS, "reserved"), (1, WARDEN_RESULT_OK, "ambiguous")];
        for (past, expected, after) in table {
            let handle = open_at_start();
            reserve_leased(&handle);
            set(&handle, START_MS + LEASE_MS + past);
            assert_eq!(code(mark_ambiguous(&handle, None)), expected, "{past} ms past");
            assert_eq!(state(&handle), after, "{past} ms past");
        }
    }

    #[test]
    fn extend_lease_at_the_expiry_instant_and_one_millisecond_past_it() {
        let table = [(0, WARDEN_RESULT_OK), (1, WARDEN_RESULT_AMBIGUOUS)];
        for (past, expected) in table {
            let handle = open_at_start();
            let holder = reserve_leased(&handle);
            assert_eq!(code(begin(&handle, KEY, &holder, 1)), WARDEN_RESULT_OK);
            set(&handle, START_MS + LEASE_MS + past);
            assert_eq!(code(extend(&handle, &holder, LEASE_MS)), expected, "{past} ms past");
        }
    }

    #[test]
    fn the_clock_setter_refuses_a_handle_without_a_manual_clock_and_a_bad_option_is_refused() {
        let handle = open(None);
        // SAFETY: a live handle and a writable err.
        let refused = super::super::with_err(|err| unsafe { warden_test_clock_set(handle.raw, 1, err) });
        assert_eq!(refused.expect_err("no manual clock").code, WARDEN_RESULT_INVALID_INPUT);
        for bad in [r#"{"clock": {}}"#, r#"{"clock": {"manual_ms": -1}}"#, r#"{"clock": {"manual_ms": 1, "x": 2}}"#] {
            let failed = super::super::open_with(None, bad).err().expect("refused");
            assert_eq!(failed.code, WARDEN_RESULT_INVALID_INPUT, "{bad}");
        }
    }
}
