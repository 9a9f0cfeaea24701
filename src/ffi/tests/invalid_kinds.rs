//! The C ABI's error object for invalid input carries its "kind" and, where the library knows
//! it, the "path" of the offending field: pinned for request texts a host can send, including
//! ones no serde value can hold (`NaN`, a lone surrogate, a repeated key).

use std::ptr;

use serde_json::Value;

use super::super::permit::*;
use super::super::result::*;
use super::{free, open, with_err, POLICY};

fn propose_text(handle: &super::Handle, text: &str) -> Result<(), super::Failure> {
    let mut permit = ptr::null_mut();
    // SAFETY: a live handle, a live string, writable out-parameters.
    let proposed =
        with_err(|err| unsafe { warden_propose(handle.raw, text.as_ptr(), text.len(), &raw mut permit, err) });
    if !permit.is_null() {
        free(permit);
    }
    proposed
}

#[test]
fn invalid_requests_name_their_kind_and_path() {
    let handle = open(Some(POLICY));
    let request = |arguments: &str| {
        format!(r#"{{"name": "stripe.refund", "arguments": {arguments}, "principal": {{"agent": "a"}}}}"#)
    };
    let long = request(&format!(r#"{{"payment_id": "p", "amount": 1, "note": "{}"}}"#, "x".repeat(300 * 1024)));
    let table: Vec<(&str, String, &str, Option<&str>)> = vec![
        (
            "beyond a double",
            request(r#"{"payment_id": "p", "amount": 1, "b": 1e400}"#),
            "not_canonical",
            Some("arguments.b"),
        ),
        ("NaN", request(r#"{"payment_id": "p", "amount": NaN}"#), "not_canonical", None),
        ("a lone surrogate", request(r#"{"payment_id": "\ud800", "amount": 1}"#), "not_canonical", None),
        (
            "a repeated key",
            request(r#"{"payment_id": "p", "amount": 1, "amount": 2}"#),
            "conflict",
            Some("arguments.amount"),
        ),
        ("over max_arguments_bytes", long, "too_large", Some("arguments")),
        ("not JSON", "{".to_owned(), "malformed", None),
        (
            "an unknown field",
            r#"{"name": "stripe.refund", "colour": 1}"#.to_owned(),
            "malformed",
            Some("request.colour"),
        ),
        ("arguments not an object", request("[1]"), "malformed", Some("request.arguments")),
        (
            "an empty agent",
            r#"{"name": "stripe.refund", "arguments": {"payment_id": "p", "amount": 1}, "principal": {"agent": ""}}"#
                .to_owned(),
            "missing",
            Some("request.principal.agent"),
        ),
        (
            "no principal",
            r#"{"name": "stripe.refund", "arguments": {"payment_id": "p", "amount": 1}}"#.to_owned(),
            "missing",
            Some("principal"),
        ),
    ];
    for (what, text, kind, path) in table {
        let refused = propose_text(&handle, &text).expect_err(what);
        assert_eq!(refused.code, WARDEN_RESULT_INVALID_INPUT, "{what}: {:?}", refused.error);
        assert_eq!(refused.error["kind"], kind, "{what}: {}", refused.error);
        assert_eq!(refused.error.get("path").and_then(Value::as_str), path, "{what}: {}", refused.error);
    }
}
