//! A permit's life across the boundary: propose, commit, a retry refused, a live attempt holding
//! its key (across threads too), a permit freed unfinished left AMBIGUOUS then resolved or
//! reconciled, refusals with their reasons, and the chain, events and lists read back.

use std::ptr;

use serde_json::json;

use super::super::effects::*;
use super::super::handle::*;
use super::super::permit::*;
use super::super::result::*;
use super::{commit, effect, free, info, open, propose, refund, with_err, with_out, POLICY};

#[test]
fn propose_commit_then_a_retry_is_refused_as_a_duplicate() {
    let handle = open(Some(POLICY));
    let permit = propose(&handle, &refund("pay_1", 1200)).expect("allowed");
    let described = info(permit);
    assert_eq!(described["action"], "stripe.refund");
    assert_eq!(described["effect_key"], "refund:pay_1");
    assert_eq!(described["attempt"], 1);
    assert_eq!(described["decision"], "allow");
    assert_eq!(described["arguments"], json!({"amount": 1200, "payment_id": "pay_1"}));
    assert!(described["idempotency_token"].is_string());
    for field in ["action_id", "action_hash", "lease_expires_at", "approval_id", "decision_reason"] {
        assert!(described.get(field).is_some(), "permit info lacks {field}");
    }
    commit(permit, r#"{"refund_id": "re_1", "fee": 0.3}"#).expect("committed");
    assert!(commit(permit, "{}").expect_err("one outcome").code == WARDEN_RESULT_INVALID_INPUT);
    assert_eq!(info(permit)["effect_key"], "refund:pay_1", "info stays readable after the outcome");
    free(permit);
    assert_eq!(effect(&handle, "refund:pay_1")["state"], "committed");
    // A float has no canonical form: the result is kept marked, with its text and hash.
    let stored = &effect(&handle, "refund:pay_1")["result"];
    assert_eq!(stored["warden_result"], "not_canonical");
    assert!(stored["excerpt"].as_str().is_some_and(|text| text.contains("re_1")), "{stored}");

    let refused = propose(&handle, &refund("pay_1", 1200)).expect_err("a retry is refused");
    assert_eq!(refused.code, WARDEN_RESULT_DUPLICATE);
    assert_eq!(refused.error["code"], "WARDEN_RESULT_DUPLICATE");
    assert_eq!(refused.error["state"], "committed");
    assert_eq!(refused.error["effect_key"], "refund:pay_1");
    assert_eq!(refused.error["reason"], "duplicate");
    assert!(refused.error["message"].is_string());
}

#[test]
fn a_live_attempt_refuses_a_concurrent_one_as_in_progress() {
    let handle = open(Some(POLICY));
    let first = propose(&handle, &refund("pay_2", 100)).expect("allowed");
    let second = propose(&handle, &refund("pay_2", 100)).expect_err("held");
    assert_eq!(second.code, WARDEN_RESULT_IN_PROGRESS);
    assert_eq!(second.error["state"], "in_progress");
    // SAFETY: a live permit; a NULL msg is the absent message.
    with_err(|err| unsafe { warden_permit_not_executed(first, ptr::null(), 0, err) }).expect("failed");
    free(first);
    let again = propose(&handle, &refund("pay_2", 100)).expect("a FAILED effect may be retried");
    assert_eq!(info(again)["attempt"], 2);
    // SAFETY: a live permit.
    with_err(|err| unsafe { warden_permit_extend_lease(again, 600_000, err) }).expect("extended");
    // SAFETY: a live permit; a zero lease is what is under test.
    let zero = with_err(|err| unsafe { warden_permit_extend_lease(again, 0, err) }).expect_err("zero lease");
    assert_eq!(zero.code, WARDEN_RESULT_INVALID_INPUT);
    let message = "timeout";
    // SAFETY: a live permit and string.
    with_err(|err| unsafe { warden_permit_ambiguous(again, message.as_ptr(), message.len(), err) }).expect("ambiguous");
    free(again);
    let blocked = propose(&handle, &refund("pay_2", 100)).expect_err("ambiguous blocks the retry");
    assert_eq!(blocked.code, WARDEN_RESULT_AMBIGUOUS);
    assert_eq!(blocked.error["effect_key"], "refund:pay_2");
}

/// A handle pointer handed to other threads: the header promises one handle serves many.
#[derive(Clone, Copy)]
struct Shared(*mut warden_handle);

// SAFETY: `warden_handle` is `Send + Sync` (asserted in handle.rs) and the library only ever
// takes shared references to it, so its pointer may cross threads while the handle is open.
unsafe impl Send for Shared {}

#[test]
fn one_handle_serves_many_threads_and_exactly_one_of_them_wins_a_key() {
    let handle = open(Some(POLICY));
    let shared = Shared(handle.raw);
    let request = refund("pay_race", 100).to_string();
    let outcomes: Vec<warden_result> = std::thread::scope(|scope| {
        let racers: Vec<_> = (0..4)
            .map(|_| {
                let request = request.clone();
                scope.spawn(move || {
                    let shared = shared;
                    let mut permit = ptr::null_mut();
                    // SAFETY: the handle outlives the scope; the string and out-parameter are live.
                    let code = unsafe {
                        warden_propose(shared.0, request.as_ptr(), request.len(), &raw mut permit, ptr::null_mut())
                    };
                    if code == WARDEN_RESULT_OK {
                        commit(permit, "{}").expect("the winner commits");
                        free(permit);
                    }
                    code
                })
            })
            .collect();
        racers.into_iter().map(|racer| racer.join().expect("no racer panicked")).collect()
    });
    assert_eq!(outcomes.iter().filter(|code| **code == WARDEN_RESULT_OK).count(), 1, "{outcomes:?}");
    assert!(outcomes
        .iter()
        .all(|code| [WARDEN_RESULT_OK, WARDEN_RESULT_IN_PROGRESS, WARDEN_RESULT_DUPLICATE].contains(code)));
    assert_eq!(effect(&handle, "refund:pay_race")["state"], "committed");
}

#[test]
fn freeing_an_unfinished_permit_records_ambiguous_until_resolved() {
    let handle = open(Some(POLICY));
    let permit = propose(&handle, &refund("pay_lost", 100)).expect("allowed");
    free(permit);
    assert_eq!(effect(&handle, "refund:pay_lost")["state"], "ambiguous");
    assert_eq!(propose(&handle, &refund("pay_lost", 100)).expect_err("blocked").code, WARDEN_RESULT_AMBIGUOUS);

    let (key, to, by) = ("refund:pay_lost", "failed", "ops:bob");
    // SAFETY: a live handle, strings and writable out-parameters.
    let resolved = with_out(|out, err| unsafe {
        warden_effect_resolve(
            handle.raw,
            key.as_ptr(),
            key.len(),
            to.as_ptr(),
            to.len(),
            by.as_ptr(),
            by.len(),
            out,
            err,
        )
    })
    .expect("resolved");
    assert_eq!(resolved.json()["state"], "failed");
    // SAFETY: as above.
    let again = with_err(|err| unsafe {
        warden_effect_resolve(
            handle.raw,
            key.as_ptr(),
            key.len(),
            to.as_ptr(),
            to.len(),
            by.as_ptr(),
            by.len(),
            ptr::null_mut(),
            err,
        )
    })
    .expect_err("only AMBIGUOUS is resolved");
    assert_eq!(again.code, WARDEN_RESULT_NOT_RESOLVABLE);
    let permit = propose(&handle, &refund("pay_lost", 100)).expect("a retry after FAILED");
    commit(permit, "null").expect("committed");
    free(permit);
}

#[test]
fn reconcile_answers_an_ambiguous_effect() {
    let handle = open(Some(POLICY));
    let permit = propose(&handle, &refund("pay_r", 100)).expect("allowed");
    free(permit);
    let (key, action) = ("refund:pay_r", "stripe.refund");
    let reconcile = |answer: &str| {
        // SAFETY: a live handle and strings.
        with_err(|err| unsafe {
            warden_effect_reconcile(
                handle.raw,
                key.as_ptr(),
                key.len(),
                action.as_ptr(),
                action.len(),
                answer.as_ptr(),
                answer.len(),
                err,
            )
        })
    };
    reconcile("unknown").expect("unknown moves nothing");
    assert_eq!(effect(&handle, key)["state"], "ambiguous");
    assert_eq!(reconcile("maybe").expect_err("bad answer").code, WARDEN_RESULT_INVALID_INPUT);
    reconcile("committed").expect("resolved");
    assert_eq!(effect(&handle, key)["state"], "committed");
    assert_eq!(effect(&handle, key)["resolved_by"], "reconcile:stripe.refund");
    assert_eq!(reconcile("committed").expect_err("no longer ambiguous").code, WARDEN_RESULT_NOT_RESOLVABLE);
}

#[test]
fn refusals_carry_their_reason_and_the_chain_events_and_lists_read_back() {
    let handle = open(Some(POLICY));
    let unknown = propose(&handle, &json!({"name": "db.drop", "arguments": {}, "principal": {"agent": "a"}}))
        .expect_err("unknown action");
    assert_eq!(unknown.code, WARDEN_RESULT_DENIED);
    assert_eq!(unknown.error["reason"], "unknown_action");
    assert_eq!(unknown.error["refusal"], true);
    let nobody = propose(&handle, &json!({"name": "customer.read", "arguments": {}, "principal": null}))
        .expect_err("no principal");
    assert_eq!((nobody.code, &nobody.error["reason"]), (WARDEN_RESULT_INVALID_INPUT, &json!("no_principal")));
    assert_eq!(nobody.error["refusal"], false);
    let read = propose(&handle, &json!({"name": "customer.read", "arguments": {"id": 1}, "principal": {"agent": "a"}}))
        .expect("a read");
    assert!(info(read)["effect_key"].is_null());
    commit(read, r#"{"name": "Ada"}"#).expect("committed");
    free(read);

    // SAFETY: a live handle and writable out-parameters, for each call below.
    let chain = with_out(|out, err| unsafe { warden_chain_verify(handle.raw, out, err) }).expect("verify").json();
    assert_eq!(chain["ok"], true);
    // The unknown action and the read; a proposal with no principal leaves no receipt.
    assert_eq!(chain["chained"], 2);
    // SAFETY: as above.
    let receipts = with_out(|out, err| unsafe { warden_receipts_list(handle.raw, 1, 0, out, err) }).expect("receipts");
    assert_eq!(receipts.json().as_array().map(Vec::len), Some(2));
    // SAFETY: as above.
    let one = with_out(|out, err| unsafe { warden_receipts_list(handle.raw, 1, 1, out, err) }).expect("receipts");
    assert_eq!(one.json().as_array().map(Vec::len), Some(1));
    // SAFETY: as above.
    let events = with_out(|out, err| unsafe { warden_events_list(handle.raw, 0, 0, out, err) }).expect("events").json();
    let last = events.as_array().and_then(|e| e.last()).expect("events")["event_id"].as_u64().expect("id");
    // SAFETY: as above.
    let after = with_out(|out, err| unsafe { warden_events_list(handle.raw, last, 0, out, err) }).expect("events");
    assert_eq!(after.json(), json!([]));
    let state = "committed";
    // SAFETY: as above, with a live string.
    let effects =
        with_out(|out, err| unsafe { warden_effects_list(handle.raw, state.as_ptr(), state.len(), 0, out, err) })
            .expect("effects");
    assert_eq!(effects.json(), json!([]));
    let bad = "done";
    // SAFETY: as above.
    let refused = with_out(|out, err| unsafe { warden_effects_list(handle.raw, bad.as_ptr(), bad.len(), 0, out, err) });
    assert_eq!(refused.err().map(|f| f.code), Some(WARDEN_RESULT_INVALID_INPUT));
}

#[test]
fn a_reconciled_proposal_applies_the_hooks_answer_then_proposes_once() {
    let handle = open(Some(POLICY));
    let key = "refund:pay_rr";
    free(propose(&handle, &refund("pay_rr", 100)).expect("allowed")); // freed unfinished: AMBIGUOUS
    let refused = propose(&handle, &refund("pay_rr", 100)).expect_err("ambiguous");
    assert_eq!((refused.code, refused.error["effect_key"].as_str()), (WARDEN_RESULT_AMBIGUOUS, Some(key)));
    let answered = |answer: &str| {
        let mut request = refund("pay_rr", 100);
        request["reconciled"] = json!({"effect_key": key, "answer": answer});
        propose(&handle, &request)
    };
    // unknown: recorded, and the refusal stands.
    let unknown = answered("unknown").expect_err("still ambiguous");
    assert_eq!((unknown.code, unknown.error["effect_key"].as_str()), (WARDEN_RESULT_AMBIGUOUS, Some(key)));
    assert_eq!(answered("maybe").expect_err("bad answer").code, WARDEN_RESULT_INVALID_INPUT);
    // Another action's key is refused and changes nothing.
    let mut other = json!({"name": "customer.read", "arguments": {"id": 1}, "principal": {"agent": "a"}});
    other["reconciled"] = json!({"effect_key": key, "answer": "not_executed"});
    assert_eq!(propose(&handle, &other).expect_err("not its key").code, WARDEN_RESULT_INVALID_INPUT);
    assert_eq!(effect(&handle, key)["state"], "ambiguous");
    // not_executed: resolved FAILED, and this very call is the retry (attempt 2).
    let permit = answered("not_executed").expect("the retry runs");
    assert_eq!(info(permit)["attempt"], 2);
    commit(permit, "null").expect("committed");
    free(permit);
    assert_eq!(effect(&handle, key)["resolved_by"], serde_json::Value::Null);
}
