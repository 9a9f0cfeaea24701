//! Scoped grants across the boundary: `warden_approval_grant_scoped` grants a request and makes
//! the grant the next covered proposals spend without a human until its uses run out;
//! `warden_scoped_grant_revoke` ends one early; `warden_scoped_grants` lists them. Every refusal
//! names what was wrong and changes nothing.

use std::ptr;

use serde_json::{json, Value};

use super::super::approvals::*;
use super::super::result::*;
use super::{approval_required, commit, free, info, open, propose, with_out, Failure, Handle};

/// Refunds of at most 10000 ask a human and allow a scoped grant of at most 3 uses and 30
/// minutes; larger ones ask a human and allow none.
const SCOPED_POLICY: &str = r#"schema: warden/v1
environment: production
actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    rules:
      - when: { amount_lte: 10000 }
        decision: approve
        approval: { scoped: { max_uses: 3, max_minutes: 30 } }
      - decision: approve
"#;

fn refund(payment: &str, amount: i64) -> Value {
    json!({
        "name": "stripe.refund",
        "arguments": {"payment_id": payment, "customer_id": "cus_1", "amount": amount},
        "principal": {"agent": "refund-agent", "user": "ada"},
    })
}

/// The customer fixed, the amount at most 5000, `uses` further refunds, 30 minutes.
fn scope(uses: u32) -> Value {
    json!({"uses": uses, "minutes": 30, "fixed": ["/customer_id"], "at_most": {"/amount": 5000}})
}

fn grant_scoped(handle: &Handle, answer: &str) -> Result<Value, Failure> {
    // SAFETY: a live handle, a live string, writable out-parameters.
    with_out(|out, err| unsafe { warden_approval_grant_scoped(handle.raw, answer.as_ptr(), answer.len(), out, err) })
        .map(|owned| owned.json())
}

fn grant_as_bob(handle: &Handle, approval_id: &str, scope: Value) -> Result<Value, Failure> {
    grant_scoped(handle, &json!({"approval_id": approval_id, "approver": "ops:bob", "scope": scope}).to_string())
}

fn grants(handle: &Handle, live_only: bool) -> Value {
    // SAFETY: a live handle and writable out-parameters.
    with_out(|out, err| unsafe { warden_scoped_grants(handle.raw, live_only, out, err) }).expect("the grants").json()
}

fn revoke(handle: &Handle, id: Option<&str>, by: &str, reason: &str) -> Result<Value, Failure> {
    let (id_ptr, id_len) = id.map_or((ptr::null(), 0), |id| (id.as_ptr(), id.len()));
    // SAFETY: a live handle, live strings (or NULL with 0), writable out-parameters.
    with_out(|out, err| unsafe {
        warden_scoped_grant_revoke(
            handle.raw,
            id_ptr,
            id_len,
            by.as_ptr(),
            by.len(),
            reason.as_ptr(),
            reason.len(),
            out,
            err,
        )
    })
    .map(|owned| owned.json())
}

/// Proposes `request`: the grant that covered it (then committed), or the approval id it asks.
fn covered_or_asks(handle: &Handle, request: &Value) -> Result<String, String> {
    match propose(handle, request) {
        Ok(permit) => {
            let grant = info(permit)["scoped_grant_id"].as_str().map(str::to_owned);
            commit(permit, "{}").expect("committed");
            free(permit);
            Ok(grant.expect("a permit without an approval names the grant that covered it"))
        }
        Err(refused) => {
            assert_eq!(refused.code, WARDEN_RESULT_APPROVAL_REQUIRED, "{refused:?}");
            Err(refused.error["request_id"].as_str().expect("a request id").to_owned())
        }
    }
}

/// Runs the refund the human approved, presenting its approval.
fn run_approved(handle: &Handle, mut request: Value, approval_id: &str) {
    request["approval_id"] = json!(approval_id);
    let permit = propose(handle, &request).expect("the approved refund");
    assert_eq!(info(permit)["approval_id"], approval_id);
    commit(permit, "{}").expect("committed");
    free(permit);
}

fn status(handle: &Handle, approval_id: &str) -> Value {
    // SAFETY: a live handle, a live string, writable out-parameters.
    with_out(|out, err| unsafe { warden_approval_get(handle.raw, approval_id.as_ptr(), approval_id.len(), out, err) })
        .expect("get")
        .json()["status"]
        .clone()
}

#[test]
fn a_scoped_grant_covers_the_next_proposals_until_its_uses_run_out_and_a_revoked_one_covers_none() {
    let handle = open(Some(SCOPED_POLICY));
    let first = approval_required(&handle, &refund("p0", 2000));
    let done = grant_as_bob(&handle, &first, scope(2)).expect("granted as a scoped grant");
    assert_eq!(done["approval"]["status"], "granted", "{done}");
    assert_eq!(done["grant"]["uses_left"], 2, "{done}");
    assert_eq!(done["grant"]["approver"], "ops:bob", "{done}");
    assert_eq!(done["grant"]["fixed_values"], json!({"/customer_id": "cus_1"}), "{done}");
    assert!(done["receipt_id"].as_str().is_some_and(|id| id.starts_with("rct_")), "{done}");
    let grant_id = done["grant"]["grant_id"].as_str().expect("an id").to_owned();
    assert_eq!(grants(&handle, true).as_array().map(Vec::len), Some(1));

    run_approved(&handle, refund("p0", 2000), &first);
    assert_eq!(covered_or_asks(&handle, &refund("p1", 4000)), Ok(grant_id.clone()));
    // Another shape (past the bound) asks a human and spends nothing.
    let past_bound = covered_or_asks(&handle, &refund("p2", 6000)).expect_err("past the bound asks");
    assert_eq!(covered_or_asks(&handle, &refund("p3", 5000)), Ok(grant_id.clone()));
    // Used up: the next refund of the same shape asks again.
    let asked = covered_or_asks(&handle, &refund("p4", 3000)).expect_err("used up: asks again");
    assert_eq!(grants(&handle, true), json!([]));
    let all = grants(&handle, false);
    assert_eq!((all[0]["state"].as_str(), all[0]["uses_left"].as_u64()), (Some("used_up"), Some(0)), "{all}");
    assert_ne!(asked, past_bound);

    // A second grant, revoked before it is spent: the next refund asks again.
    let second = grant_as_bob(&handle, &asked, scope(3)).expect("a second grant");
    let second_id = second["grant"]["grant_id"].as_str().expect("an id").to_owned();
    let revoked = revoke(&handle, Some(&second_id), "ops:carol", "the customer complained").expect("revoked");
    assert_eq!(revoked["grant"]["state"], "revoked", "{revoked}");
    assert_eq!(revoked["grant"]["revoked"]["by"], "ops:carol", "{revoked}");
    assert_eq!(revoked["grant"]["uses_left"], 3, "{revoked}");
    assert_eq!(revoked["approval"], Value::Null, "{revoked}");
    run_approved(&handle, refund("p4", 3000), &asked);
    covered_or_asks(&handle, &refund("p5", 3000)).expect_err("revoked: asks again");
    assert_eq!(grants(&handle, true), json!([]));
    let states: Vec<Value> =
        grants(&handle, false).as_array().into_iter().flatten().map(|g| g["state"].clone()).collect();
    assert_eq!(states.len(), 2);
    assert!(states.contains(&json!("used_up")) && states.contains(&json!("revoked")), "{states:?}");
}

#[test]
fn refused_scoped_grants_name_what_is_wrong_and_change_nothing() {
    let handle = open(Some(SCOPED_POLICY));
    let id = approval_required(&handle, &refund("p0", 2000));
    let large = approval_required(&handle, &refund("p9", 20000));
    let answer = |scope: Value| json!({"approval_id": id, "approver": "ops:bob", "scope": scope}).to_string();
    let invalid = WARDEN_RESULT_INVALID_INPUT;
    // (why, the answer JSON, the code, the reason, what the message says)
    let cases: Vec<(&str, String, warden_result, &str, &str)> = vec![
        ("bad JSON", "{\"approval_id\": ".into(), invalid, "invalid_input", "answer"),
        ("not an object", "[1]".into(), invalid, "invalid_input", "answer must be a JSON object"),
        (
            "an unknown field",
            json!({"approval_id": id, "approver": "ops:bob", "scope": scope(1), "ttl_ms": 5}).to_string(),
            invalid,
            "invalid_input",
            "unknown field \"ttl_ms\"",
        ),
        (
            "no scope",
            json!({"approval_id": id, "approver": "ops:bob"}).to_string(),
            invalid,
            "invalid_input",
            "answer needs \"scope\"",
        ),
        (
            "no approver",
            json!({"approval_id": id, "scope": scope(1)}).to_string(),
            invalid,
            "invalid_input",
            "answer needs \"approver\"",
        ),
        (
            "an unknown scope field",
            answer(json!({"uses": 1, "minutes": 1, "max": 3})),
            invalid,
            "invalid_input",
            "scope has no field \"max\"",
        ),
        ("a scope that is not an object", answer(json!("all")), invalid, "invalid_input", "scope must be an object"),
        ("no minutes", answer(json!({"uses": 1})), invalid, "invalid_input", "scope.minutes must be an integer"),
        ("negative uses", answer(json!({"uses": -1, "minutes": 1})), invalid, "invalid_input", "scope.uses must be"),
        (
            "a bound that is a string",
            answer(json!({"uses": 1, "minutes": 1, "at_most": {"/amount": "5000"}})),
            invalid,
            "invalid_input",
            "scope.at_most maps JSON pointers to numbers",
        ),
        ("more uses than the document allows", answer(scope(4)), invalid, "invalid_input", "scope uses must be 1..=3"),
        (
            "longer than the document allows",
            answer(json!({"uses": 1, "minutes": 31})),
            invalid,
            "invalid_input",
            "scope minutes must be 1..=30",
        ),
        ("zero uses", answer(json!({"uses": 0, "minutes": 1})), invalid, "invalid_input", "scope uses must be 1..=3"),
        (
            "a bound below the approved value",
            answer(json!({"uses": 1, "minutes": 1, "at_most": {"/amount": 1999}})),
            invalid,
            "invalid_input",
            "below the approved action's own value",
        ),
        (
            "a pointer the action does not have",
            answer(json!({"uses": 1, "minutes": 1, "fixed": ["/merchant"]})),
            invalid,
            "invalid_input",
            "not an argument of the approved action",
        ),
        (
            "a rule that allows no scoped grant",
            json!({"approval_id": large, "approver": "ops:bob", "scope": {"uses": 1, "minutes": 1}}).to_string(),
            invalid,
            "invalid_input",
            "does not allow scoped grants",
        ),
        (
            "another action hash",
            json!({"approval_id": id, "approver": "ops:bob", "scope": scope(1),
                   "action_hash": format!("sha256:{}", "0".repeat(64))})
            .to_string(),
            WARDEN_RESULT_APPROVAL_MISMATCH,
            "mismatch",
            "",
        ),
        (
            "the requester",
            json!({"approval_id": id, "approver": "refund-agent:ada", "scope": scope(1)}).to_string(),
            WARDEN_RESULT_APPROVAL_MISMATCH,
            "approver_is_requester",
            "",
        ),
        (
            "an unknown request",
            json!({"approval_id": "apr_00000000000000000000000000000000", "approver": "ops:bob", "scope": scope(1)})
                .to_string(),
            WARDEN_RESULT_NOT_FOUND,
            "not_found",
            "no approval apr_0000",
        ),
    ];
    for (why, text, code, reason, says) in &cases {
        let refused = grant_scoped(&handle, text).expect_err(why);
        assert_eq!((refused.code, refused.error["reason"].as_str()), (*code, Some(*reason)), "{why}: {refused:?}");
        assert_eq!(refused.error["code"], name_str(*code), "{why}");
        let message = refused.error["message"].as_str().unwrap_or_default();
        assert!(message.contains(says), "{why}: {message}");
        assert_eq!(grants(&handle, false), json!([]), "{why}: a grant was made");
        assert_eq!((status(&handle, &id), status(&handle, &large)), (json!("pending"), json!("pending")), "{why}");
    }
    // SAFETY: a live handle; `out` NULL is the refusal under test.
    let no_out = with_out(|_, err| unsafe { warden_scoped_grants(handle.raw, true, ptr::null_mut(), err) });
    assert_eq!(no_out.expect_err("out is required").code, WARDEN_RESULT_INVALID_INPUT);
}

/// (why, the grant id or NULL, by, reason, the code, what the message says).
type Revocation<'a> = (&'a str, Option<&'a str>, &'a str, &'a str, warden_result, &'a str);

#[test]
fn refused_revocations_name_what_is_wrong_and_change_nothing() {
    let handle = open(Some(SCOPED_POLICY));
    let id = approval_required(&handle, &refund("p0", 2000));
    let grant_id =
        grant_as_bob(&handle, &id, scope(3)).expect("granted")["grant"]["grant_id"].as_str().expect("an id").to_owned();
    let unknown = format!("sgr_{}", "0".repeat(32));
    let cases: [Revocation<'_>; 7] = [
        ("an unknown grant", Some(&unknown), "ops:bob", "x", WARDEN_RESULT_NOT_FOUND, "no scoped grant sgr_0000"),
        ("a malformed id", Some("sgr_1"), "ops:bob", "x", WARDEN_RESULT_INVALID_INPUT, "sgr_ followed by 32"),
        ("no id", None, "ops:bob", "x", WARDEN_RESULT_INVALID_INPUT, "id is NULL"),
        ("an empty reason", Some(&grant_id), "ops:bob", "", WARDEN_RESULT_INVALID_INPUT, "reason must be a non-empty"),
        ("a blank reason", Some(&grant_id), "ops:bob", "  ", WARDEN_RESULT_INVALID_INPUT, "reason must be a non-empty"),
        ("an empty by", Some(&grant_id), "", "x", WARDEN_RESULT_INVALID_INPUT, "by must be a non-empty"),
        ("a two-line reason", Some(&grant_id), "ops:bob", "a\nb", WARDEN_RESULT_INVALID_INPUT, "one plain line"),
    ];
    let before = grants(&handle, false);
    for (why, target, by, reason, code, says) in cases {
        let refused = revoke(&handle, target, by, reason).expect_err(why);
        assert_eq!(refused.code, code, "{why}: {refused:?}");
        assert!(refused.error["message"].as_str().unwrap_or_default().contains(says), "{why}: {refused:?}");
        assert_eq!(grants(&handle, false), before, "{why}: the grant changed");
    }
    assert_eq!(before[0]["state"], "live");
    revoke(&handle, Some(&grant_id), "ops:bob", "done").expect("revoked");
    let revoked = grants(&handle, false);
    let twice = revoke(&handle, Some(&grant_id), "ops:bob", "again").expect_err("revoked twice");
    assert_eq!(twice.code, WARDEN_RESULT_INVALID_INPUT, "{twice:?}");
    let message = twice.error["message"].as_str().unwrap_or_default();
    assert!(message.contains("was revoked already, by ops:bob"), "{message}");
    assert_eq!(grants(&handle, false), revoked, "a second revocation changed the grant");
}
