//! Float arguments under a `warden/v1` document, end to end through the pipeline: the permit,
//! the receipt chain, an approval bound to a float action, and the same calls refused under a
//! ctrlrun document, which keeps ctrlrun's refusal.

mod common;

use std::sync::Arc;

use common::T0;
use serde_json::{json, Value};
use warden::canonical::parse_json;
use warden::document::load_str;
use warden::pipeline::{ActionRequest, Warden, WardenOptions};
use warden::{Error, ManualClock, Principal};

/// `get-sum` the way an MCP server's numeric tool is fronted: the sum is allowed up to 10.5,
/// asked for up to 100, denied past it; the effect key names the operands.
const POLICY: &str = r#"
schema: warden/v1
environment: production
actions:
  get-sum:
    effect: "sum:{a}:{b}"
    rules:
      - when: { a_lte: 10.5 }
        decision: allow
      - when: { a_lte: 100 }
        decision: approve
      - decision: deny
"#;

struct Setup {
    _dir: tempfile::TempDir,
    warden: Warden,
}

fn setup(policy: &str) -> Setup {
    let dir = tempfile::tempdir().expect("tempdir");
    let document = load_str(policy, "test.yaml").expect("the document loads");
    let warden = Warden::open(
        dir.path().join("state.redb"),
        document,
        WardenOptions {
            clock: Arc::new(ManualClock::new(T0)),
            environment: Some("production".into()),
            ..WardenOptions::default()
        },
    )
    .expect("opens");
    Setup { _dir: dir, warden }
}

fn agent() -> Principal {
    Principal::new("sum-agent", None).expect("principal")
}

/// A `get-sum` request whose arguments are this JSON text, numbers exactly as written.
fn get_sum(arguments: &str) -> ActionRequest<'static> {
    ActionRequest::new("get-sum", parse_json(arguments).expect("JSON"), agent())
}

fn last_receipt(s: &Setup) -> Value {
    let row = s.warden.kernel().last_receipts(1).expect("receipts").pop().expect("a receipt").1;
    parse_json(&row.document).expect("the receipt is JSON")
}

#[test]
fn a_float_call_is_permitted_run_and_receipted_with_its_canonical_arguments() {
    let s = setup(POLICY);
    let permit = s.warden.submit(&get_sum(r#"{"a": 1.50, "b": 2.0}"#)).expect("a permit");
    assert_eq!(permit.effect_key(), Some("sum:1.5:2"));
    // The executor is given the canonical reading: 1.50 as 1.5, 2.0 as the integer 2.
    assert_eq!(permit.action().canonical_arguments().to_string(), r#"{"a":1.5,"b":2}"#);
    let hash = permit.action().hash().expect("hash");
    permit.commit(&json!({"sum": 3.5})).expect("commit");
    let receipt = last_receipt(&s);
    assert_eq!(receipt["result"], "committed");
    assert_eq!(receipt["action_hash"], hash.as_str());
    assert_eq!(receipt["arguments"].to_string(), r#"{"a":1.5,"b":2}"#);
    assert!(s.warden.kernel().verify_chain().expect("verify").ok, "the chain verifies with float arguments");
    // The same call spelled differently is the same effect, already committed.
    let again = s.warden.submit(&get_sum(r#"{"b": 2, "a": 15e-1}"#)).expect_err("a duplicate");
    assert!(matches!(again, Error::Duplicate { .. }), "{again}");
    assert_eq!(last_receipt(&s)["action_hash"], hash.as_str());
}

#[test]
fn order_operators_decide_floats_at_the_bound_and_one_double_past_it() {
    let s = setup(POLICY);
    s.warden.submit(&get_sum(r#"{"a": 10.5, "b": 0}"#)).expect("at the bound").commit(&json!(null)).expect("commit");
    let past = s.warden.submit(&get_sum(r#"{"a": 10.500000000000002, "b": 0}"#)).expect_err("asks");
    assert!(matches!(past, Error::ApprovalRequired { .. }), "{past}");
    let beyond = s.warden.submit(&get_sum(r#"{"a": 100.00000000000001, "b": 0}"#)).expect_err("denied");
    assert!(matches!(&beyond, Error::Denied { reason, .. } if reason == "rule[2]"), "{beyond}");
}

#[test]
fn an_approval_binds_a_float_action_and_is_consumed_by_it() {
    let s = setup(POLICY);
    let asked = s.warden.submit(&get_sum(r#"{"a": 50.25, "b": 1e-7}"#)).expect_err("approval required");
    let Error::ApprovalRequired { request_id, .. } = asked else { panic!("{asked}") };
    let record = s.warden.kernel().approval(&request_id).expect("read").expect("the request");
    record.check_binding().expect("the stored float action hashes to the bound hash");
    assert_eq!(record.arguments().expect("arguments").to_string(), r#"{"a":50.25,"b":1e-7}"#);
    s.warden.kernel().grant(&request_id, "ops:bob").expect("grant");
    // Another spelling of the same numbers is the same action, so the approval applies.
    let mut request = get_sum(r#"{"a": 50.250, "b": 0.0000001}"#);
    request.approval_id = Some(&request_id);
    let permit = s.warden.submit(&request).expect("approved");
    assert_eq!(permit.effect_key(), Some("sum:50.25:1e-7"));
    permit.commit(&json!(50.2500001)).expect("commit");
    assert_eq!(last_receipt(&s)["approver"], "ops:bob");
    // A different number is a different action: the consumed approval does not carry over.
    let mut other = get_sum(r#"{"a": 50.26, "b": 1e-7}"#);
    other.approval_id = Some(&request_id);
    assert!(s.warden.submit(&other).is_err());
}

#[test]
fn a_ctrlrun_document_keeps_refusing_floats_and_its_integer_calls_hash_as_before() {
    let ctrlrun = POLICY.replace("schema: warden/v1", "schema: ctrlrun.policy/v3").replace("10.5", "10");
    let s = setup(&ctrlrun);
    let refused = s.warden.submit(&get_sum(r#"{"a": 1.5, "b": 2}"#)).expect_err("refused");
    assert!(
        matches!(&refused, Error::InvalidInput(m) if m.message.contains("float is not encodable at arguments.a")
            && m.kind == warden::error::InvalidInputKind::NotCanonical && m.path.as_deref() == Some("arguments.a")),
        "{refused}"
    );
    let whole = s.warden.submit(&get_sum(r#"{"a": 1.0, "b": 2}"#)).expect_err("a whole float is a float to ctrlrun");
    assert!(matches!(whole, Error::InvalidInput(_)), "{whole}");
    let permit = s.warden.submit(&get_sum(r#"{"a": 1, "b": 2}"#)).expect("an integer call");
    // Byte-identical to ctrlrun's hash of the same action (and to warden/v1's).
    let ctrlrun_hash = warden::Action::new("get-sum", json!({"a": 1, "b": 2}), agent(), None, "production")
        .and_then(|action| action.hash())
        .expect("hash");
    assert_eq!(permit.action().hash().expect("hash"), ctrlrun_hash);
    permit.commit(&json!(3)).expect("commit");
}

#[test]
fn a_float_beyond_the_double_range_is_refused_naming_its_path() {
    let s = setup(POLICY);
    let refused = s.warden.submit(&get_sum(r#"{"a": 1, "b": [0, -1e400]}"#)).expect_err("refused");
    assert!(
        matches!(&refused, Error::InvalidInput(m) if m.message.contains("the number at arguments.b[1] is beyond the range of a double")
            && m.kind == warden::error::InvalidInputKind::NotCanonical && m.path.as_deref() == Some("arguments.b[1]")),
        "{refused}"
    );
}
