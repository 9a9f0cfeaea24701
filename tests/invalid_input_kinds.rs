//! Invalid input says what kind it is and where: each refusal below goes through the real
//! entry point (`Warden::submit`) and is pinned by its kind and field path, which is what a
//! caller branches on (and what the C ABI's error object carries as "kind" and "path").

mod common;

use std::sync::Arc;

use common::T0;
use serde_json::{json, Value};
use warden::canonical::parse_json;
use warden::document::load_str;
use warden::error::InvalidInputKind::{self, *};
use warden::pipeline::{ActionRequest, Warden, WardenOptions};
use warden::{Error, ManualClock, Principal};

const POLICY: &str = r#"
schema: warden/v1
environment: production
actions:
  get-sum:
    effect: "sum:{a}"
    decision: allow
"#;

fn open() -> (tempfile::TempDir, Warden) {
    let dir = tempfile::tempdir().expect("tempdir");
    let document = load_str(POLICY, "test.yaml").expect("the document loads");
    let options = WardenOptions {
        clock: Arc::new(ManualClock::new(T0)),
        environment: Some("production".into()),
        ..WardenOptions::default()
    };
    let warden = Warden::open(dir.path().join("state.redb"), document, options).expect("opens");
    (dir, warden)
}

fn agent() -> Principal {
    Principal::new("sum-agent", None).expect("principal")
}

fn nested(levels: usize) -> Value {
    (0..levels).fold(json!(1), |inner, _| json!([inner]))
}

#[test]
fn each_refusal_names_its_kind_and_path() {
    let (_dir, warden) = open();
    let base = || ActionRequest::new("get-sum", json!({"a": 1}), agent());
    let with = |arguments: Value| ActionRequest::new("get-sum", arguments, agent());
    let table: Vec<(&str, ActionRequest<'_>, InvalidInputKind, Option<&str>)> = vec![
        (
            "a float beyond a double",
            with(parse_json(r#"{"a": 1, "b": 1e400}"#).unwrap()),
            NotCanonical,
            Some("arguments.b"),
        ),
        (
            "deep in a list",
            with(parse_json(r#"{"a": 1, "b": [0, -1e400]}"#).unwrap()),
            NotCanonical,
            Some("arguments.b[1]"),
        ),
        ("an over-long argument", with(json!({"a": 1, "note": "x".repeat(300 * 1024)})), TooLarge, Some("arguments")),
        ("arguments nested too deep", with(json!({"a": 1, "b": nested(120)})), TooLarge, Some("arguments")),
        ("arguments not an object", with(json!([1])), Malformed, Some("arguments")),
        (
            "an empty agent",
            ActionRequest::new("get-sum", json!({"a": 1}), Principal { agent: String::new(), user: None }),
            Missing,
            Some("principal.agent"),
        ),
        (
            "an empty user",
            ActionRequest::new("get-sum", json!({"a": 1}), Principal { agent: "a".into(), user: Some(String::new()) }),
            Missing,
            Some("principal.user"),
        ),
        ("no principal", ActionRequest { principal: None, ..base() }, Missing, Some("principal")),
        ("a zero lease", ActionRequest { lease: Some(0), ..base() }, OutOfRange, Some("lease")),
        ("a bad traceparent", ActionRequest { traceparent: Some("00-x"), ..base() }, Malformed, Some("traceparent")),
        (
            "an approval id of the wrong shape",
            ActionRequest { approval_id: Some("apr_nope"), ..base() },
            Malformed,
            Some("approval_id"),
        ),
    ];
    for (what, request, kind, path) in table {
        let Err(refused) = warden.submit(&request) else { panic!("{what}: not refused") };
        assert_eq!(refused.invalid_input_kind(), Some(kind), "{what}: {refused}");
        assert_eq!(refused.invalid_input_path(), path, "{what}: {refused}");
        assert!(refused.to_string().starts_with("invalid input: "), "{what}: {refused}");
        // The C ABI's error object carries both, spelled as the bindings read them.
        let object = refused.to_json();
        assert_eq!(
            object["reason"],
            if matches!(refused, Error::NoPrincipal { .. }) { "no_principal" } else { "invalid_input" }
        );
        assert_eq!(object["kind"], kind.as_str(), "{what}: {object}");
        assert_eq!(object.get("path").and_then(Value::as_str), path, "{what}: {object}");
    }
}

#[test]
fn other_errors_have_no_input_kind() {
    let (_dir, warden) = open();
    let unknown = warden.submit(&ActionRequest::new("no-such-action", json!({}), agent())).unwrap_err();
    assert_eq!(unknown.invalid_input_kind(), None, "{unknown}");
    assert!(unknown.to_json().get("kind").is_none(), "{unknown}");
}
