//! Approvals across the boundary: request, grant, deny and consume; answers naming a principal,
//! verified or asserted; waiting; the notification hook; the precondition callback.

use std::ptr;

use serde_json::{json, Value};

use super::super::approvals::*;
use super::super::effects::*;
use super::super::permit::*;
use super::super::result::*;
use super::{
    approval_required, commit, free, info, open, propose, refund, with_err, with_out, Failure, Handle, POLICY,
};

#[test]
fn approval_required_then_granted_then_consumed_once() {
    let handle = open(Some(POLICY));
    let refused = propose(&handle, &refund("pay_big", 200_000)).expect_err("needs a human");
    assert_eq!(refused.code, WARDEN_RESULT_APPROVAL_REQUIRED);
    let id = refused.error["request_id"].as_str().expect("request_id").to_owned();
    assert!(refused.error["expires_at"].is_string() && refused.error["action_hash"].is_string());

    // SAFETY: a live handle and writable out-parameters.
    let pending = with_out(|out, err| unsafe { warden_approvals_pending(handle.raw, out, err) }).expect("pending");
    assert_eq!(pending.json()[0]["approval_id"], id.as_str());

    let requester = "ada";
    // SAFETY: a live handle and strings.
    let own = with_err(|err| unsafe {
        warden_approval_grant(
            handle.raw,
            id.as_ptr(),
            id.len(),
            requester.as_ptr(),
            requester.len(),
            0,
            ptr::null_mut(),
            err,
        )
    })
    .expect_err("the requester cannot approve");
    assert_eq!(own.code, WARDEN_RESULT_APPROVAL_MISMATCH);
    assert_eq!(own.error["reason"], "approver_is_requester");

    let bob = "ops:bob";
    // SAFETY: a live handle, strings and writable out-parameters.
    let granted = with_out(|out, err| unsafe {
        warden_approval_grant(handle.raw, id.as_ptr(), id.len(), bob.as_ptr(), bob.len(), 0, out, err)
    })
    .expect("granted");
    assert_eq!(granted.json()["status"], "granted");
    assert_eq!(granted.json()["approver"], "ops:bob");

    let mut presented = refund("pay_big", 200_000);
    presented["approval_id"] = json!(id);
    let mutated = {
        let mut other = refund("pay_big", 200_001);
        other["approval_id"] = json!(id);
        propose(&handle, &other).expect_err("another action")
    };
    assert_eq!(mutated.code, WARDEN_RESULT_APPROVAL_MISMATCH);
    assert_eq!(mutated.error["approval_id"], id.as_str());

    let permit = propose(&handle, &presented).expect("approved");
    assert_eq!(info(permit)["approval_id"], id.as_str());
    commit(permit, "{}").expect("committed");
    free(permit);
    // SAFETY: a live handle, string and writable out-parameters.
    let record = with_out(|out, err| unsafe { warden_approval_get(handle.raw, id.as_ptr(), id.len(), out, err) })
        .expect("get")
        .json();
    assert_eq!(record["status"], "consumed");
    let missing = "apr_00000000000000000000000000000000";
    // SAFETY: as above.
    let absent =
        with_out(|out, err| unsafe { warden_approval_get(handle.raw, missing.as_ptr(), missing.len(), out, err) });
    assert!(absent.expect("get").json().is_null());
}

#[test]
fn a_denied_request_denies_the_proposal_that_presents_it() {
    let handle = open(Some(POLICY));
    let request = json!({
        "name": "stripe.refund",
        "arguments": {"payment_id": "pay_d", "amount": 300_000},
        "principal": {"agent": "refund-agent", "user": "ada"},
        "ttl_ms": 60_000,
    })
    .to_string();
    // SAFETY: a live handle, string and writable out-parameters.
    let record =
        with_out(|out, err| unsafe { warden_approval_request(handle.raw, request.as_ptr(), request.len(), out, err) })
            .expect("requested")
            .json();
    let id = record["approval_id"].as_str().expect("id").to_owned();
    let (by, why) = ("ops:carol", "too large");
    // SAFETY: a live handle and strings; NULL out is allowed here.
    with_err(|err| unsafe {
        warden_approval_deny(
            handle.raw,
            id.as_ptr(),
            id.len(),
            by.as_ptr(),
            by.len(),
            why.as_ptr(),
            why.len(),
            ptr::null_mut(),
            err,
        )
    })
    .expect("denied");
    let mut presented = refund("pay_d", 300_000);
    presented["approval_id"] = json!(id);
    let refused = propose(&handle, &presented).expect_err("denied");
    assert_eq!(refused.code, WARDEN_RESULT_DENIED);
    assert_eq!(refused.error["reason"], "approval_denied");
}

fn answer(handle: &Handle, answer: &Value) -> Result<Value, Failure> {
    let text = answer.to_string();
    // SAFETY: a live handle, a live string, writable out-parameters.
    with_out(|out, err| unsafe {
        super::super::approvals::warden_approval_answer(handle.raw, text.as_ptr(), text.len(), out, err)
    })
    .map(|owned| owned.json())
}

fn wait(handle: &Handle, id: &str, timeout_ms: u64) -> Result<Value, Failure> {
    // SAFETY: a live handle, a live string, writable out-parameters.
    with_out(|out, err| unsafe {
        super::super::approvals::warden_approval_wait(handle.raw, id.as_ptr(), id.len(), timeout_ms, out, err)
    })
    .map(|owned| owned.json())
}

#[test]
fn an_answer_names_a_principal_verified_or_asserted_and_the_requester_is_refused_in_any_spelling() {
    let handle = open(Some(POLICY));
    let id = approval_required(&handle, &refund("pay_c1", 90_000));
    for user in ["ADA", "ａｄａ", " ada"] {
        let refused = answer(
            &handle,
            &json!({"approval_id": id, "decision": "grant", "approver": {"agent": "slack", "user": user}}),
        )
        .expect_err("the requester");
        assert_eq!(
            (refused.code, refused.error["reason"].as_str()),
            (WARDEN_RESULT_APPROVAL_MISMATCH, Some("approver_is_requester"))
        );
    }
    for bad in [
        json!({"approval_id": id, "decision": "maybe", "approver": {"agent": "slack", "user": "bob"}}),
        json!({"approval_id": id, "decision": "grant"}),
        json!({"approval_id": id, "decision": "deny", "approver": {"agent": "slack", "user": "bob"}, "ttl_ms": 5}),
        json!({"approval_id": id, "decision": "grant", "approver": {"agent": "slack", "user": "bob"}, "verified": {"claims": [1]}}),
        json!({"approval_id": id, "decision": "grant", "approver": {"agent": "slack", "user": "bob"}, "extra": 1}),
    ] {
        assert_eq!(answer(&handle, &bad).expect_err("refused").code, WARDEN_RESULT_INVALID_INPUT, "{bad}");
    }
    let granted = answer(
        &handle,
        &json!({"approval_id": id, "decision": "grant", "approver": {"agent": "slack", "user": "bob"},
                "verified": {"issuer": "https://id.example", "claims": {"roles": ["finance"]}}}),
    )
    .expect("granted");
    assert_eq!(granted["status"], "granted");
    assert_eq!(granted["votes"][0]["verified"], true);
    assert_eq!(granted["votes"][0]["issuer"], "https://id.example");
    assert_eq!(granted["arguments"], json!({"amount": 90_000, "payment_id": "pay_c1"}));
}

#[test]
fn an_answer_naming_another_action_hash_is_refused() {
    let handle = open(Some(POLICY));
    let id = approval_required(&handle, &refund("pay_c2", 90_000));
    let refused = answer(
        &handle,
        &json!({"approval_id": id, "decision": "grant", "approver": {"agent": "cli", "user": "bob"}, "action_hash": "sha256:00"}),
    )
    .expect_err("another action");
    assert_eq!((refused.code, refused.error["reason"].as_str()), (WARDEN_RESULT_APPROVAL_MISMATCH, Some("mismatch")));
}

#[test]
fn wait_returns_the_record_and_refuses_a_timeout_over_a_day() {
    let handle = open(Some(POLICY));
    let id = approval_required(&handle, &refund("pay_c3", 90_000));
    assert_eq!(wait(&handle, &id, 0).expect("read once")["status"], "pending");
    answer(&handle, &json!({"approval_id": id, "decision": "deny", "approver": {"agent": "cli", "user": "bob"}}))
        .expect("denied");
    assert_eq!(wait(&handle, &id, 60_000).expect("answered")["status"], "denied");
    assert_eq!(wait(&handle, "apr_00000000000000000000000000000000", 0).expect("none"), Value::Null);
    assert_eq!(wait(&handle, &id, 86_400_001).expect_err("too long").code, WARDEN_RESULT_INVALID_INPUT);
    assert!(wait(&handle, &id, 86_400_000).is_ok(), "a day is the limit (answered, so it returns at once)");
}

static HOOK_CALLS: std::sync::Mutex<Vec<(String, String)>> = std::sync::Mutex::new(Vec::new());

unsafe extern "C" fn record_hook(user_data: *mut std::ffi::c_void, request: *const u8, len: usize) -> i32 {
    // SAFETY: the library passes `len` readable bytes at `request` for the call.
    let text = String::from_utf8_lossy(unsafe { std::slice::from_raw_parts(request, len) }).into_owned();
    let tag = format!("{user_data:p}");
    if let Ok(mut calls) = HOOK_CALLS.lock() {
        calls.push((tag, text));
    }
    7 // a failure: recorded, never the action's
}

#[test]
fn the_hook_is_called_once_per_new_request_with_the_request_and_its_failure_is_only_recorded() {
    let handle = open(Some(POLICY));
    let marker = 0x5eed_usize as *mut std::ffi::c_void;
    // SAFETY: a live handle; `record_hook` has the warden_approval_fn signature and touches no
    // user data; a writable err.
    with_err(|err| unsafe {
        super::super::approval_hooks::warden_approval_notify_set(handle.raw, Some(record_hook), marker, err)
    })
    .expect("hook set");
    let id = approval_required(&handle, &refund("pay_c4", 90_000));
    assert_eq!(approval_required(&handle, &refund("pay_c4", 90_000)), id, "the pending request is reported again");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let events = || -> Vec<Value> {
        // SAFETY: a live handle and writable out-parameters.
        let listed = with_out(|out, err| unsafe { warden_events_list(handle.raw, 0, 1000, out, err) }).expect("events");
        listed.json().as_array().cloned().unwrap_or_default()
    };
    while !events().iter().any(|e| e["type"] == "APPROVAL_NOTIFY_FAILED") && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    // SAFETY: a live handle; NULL removes the hook; a writable err.
    with_err(|err| unsafe {
        super::super::approval_hooks::warden_approval_notify_set(handle.raw, None, ptr::null_mut(), err)
    })
    .expect("hook removed");
    let calls: Vec<(String, String)> = HOOK_CALLS
        .lock()
        .map(|calls| calls.iter().filter(|(_, text)| text.contains(&id)).cloned().collect())
        .unwrap_or_default();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0].0, format!("{marker:p}"));
    let request: Value = serde_json::from_str(&calls[0].1).expect("JSON");
    assert_eq!(request["arguments"]["payment_id"], "pay_c4");
    let failed: Vec<Value> = events().into_iter().filter(|e| e["type"] == "APPROVAL_NOTIFY_FAILED").collect();
    assert_eq!(failed.len(), 1);
    assert!(failed[0]["data"]["error"].as_str().unwrap_or_default().contains("returned 7"), "{failed:?}");
}

unsafe extern "C" fn ledger_state(
    user_data: *mut std::ffi::c_void,
    _action: *const u8,
    _len: usize,
    sink: *mut super::super::precondition::warden_precondition_sink,
) -> i32 {
    // SAFETY: the test passes a pointer to a live AtomicI64 as user data.
    let balance =
        unsafe { &*(user_data as *const std::sync::atomic::AtomicI64) }.load(std::sync::atomic::Ordering::SeqCst);
    if balance < 0 {
        return 1;
    }
    let state = format!("{{\"balance\":{balance}}}");
    // SAFETY: the sink of this running callback and a live string.
    unsafe { super::super::precondition::warden_precondition_put(sink, state.as_ptr(), state.len()) };
    0
}

fn propose_checked(
    handle: &Handle,
    request: &Value,
    balance: &std::sync::atomic::AtomicI64,
) -> Result<*mut warden_permit, Failure> {
    let text = request.to_string();
    let mut permit = ptr::null_mut();
    let user_data = std::ptr::from_ref::<std::sync::atomic::AtomicI64>(balance) as *mut std::ffi::c_void;
    let described = with_out(|info, err| {
        // SAFETY: a live handle, a live string, a callback with the right signature whose user
        // data outlives the call, writable out-parameters.
        unsafe {
            super::super::approval_hooks::warden_propose_checked(
                handle.raw,
                text.as_ptr(),
                text.len(),
                Some(ledger_state),
                user_data,
                &raw mut permit,
                info,
                err,
            )
        }
    })?;
    drop(described);
    Ok(permit)
}

#[test]
fn the_precondition_callback_fingerprints_the_request_and_a_changed_state_is_refused_with_the_approval_granted() {
    use std::sync::atomic::{AtomicI64, Ordering};
    let handle = open(Some(POLICY));
    let balance = AtomicI64::new(500);
    let refused = propose_checked(&handle, &refund("pay_c5", 90_000), &balance).expect_err("approval required");
    let id = refused.error["request_id"].as_str().expect("id").to_owned();
    let record = wait(&handle, &id, 0).expect("record");
    assert_eq!(
        record["precondition"],
        crate::approval::precondition::fingerprint(&json!({"balance": 500})).expect("fingerprint")
    );
    answer(&handle, &json!({"approval_id": id, "decision": "grant", "approver": {"agent": "cli", "user": "bob"}}))
        .expect("granted");
    let mut presented = refund("pay_c5", 90_000);
    presented["approval_id"] = json!(id);
    balance.store(0, Ordering::SeqCst);
    let changed = propose_checked(&handle, &presented, &balance).expect_err("changed");
    assert_eq!(
        (changed.code, changed.error["reason"].as_str()),
        (WARDEN_RESULT_APPROVAL_MISMATCH, Some("precondition_changed"))
    );
    assert_eq!(wait(&handle, &id, 0).expect("record")["status"], "granted");
    balance.store(-1, Ordering::SeqCst);
    assert_eq!(
        propose_checked(&handle, &presented, &balance).expect_err("provider failed").code,
        WARDEN_RESULT_INVALID_INPUT
    );
    let mut both = presented.clone();
    both["precondition"] = json!({"state": {"balance": 500}});
    balance.store(500, Ordering::SeqCst);
    assert_eq!(propose_checked(&handle, &both, &balance).expect_err("both").code, WARDEN_RESULT_INVALID_INPUT);
    let permit = propose_checked(&handle, &presented, &balance).expect("unchanged: a permit");
    commit(permit, "null").expect("commit");
    free(permit);
    assert_eq!(wait(&handle, &id, 0).expect("record")["status"], "consumed");
}
