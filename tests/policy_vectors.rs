//! ctrlrun 0.12.2's policy outputs, replayed: every document's policy hash, every case's
//! decision and reason, and every document ctrlrun refuses. Plus the `warden/v1` policy hash, and
//! the decisions of `warden/floats.json`'s float cases (computed with Python's comparisons).
//!
//! The vector file is read with serde_json, not with the loader under test.

use serde_json::{Map, Value};
use warden::document::{load_str, Document};
use warden::policy::evaluate;

const POLICIES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/vectors/ctrlrun-0.12.2/policies.json");
const FLOATS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/vectors/warden/floats.json");

fn rows() -> Vec<Value> {
    let text = std::fs::read_to_string(POLICIES).unwrap_or_else(|e| panic!("{POLICIES}: {e}"));
    let rows: Vec<Value> = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{POLICIES}: {e}"));
    assert_eq!(rows.len(), 16, "policies.json is expected to hold 16 rows");
    rows
}

fn field<'v>(row: &'v Value, name: &str) -> &'v str {
    row[name].as_str().unwrap_or_else(|| panic!("field {name} is not a string in {row}"))
}

fn load(text: &str) -> Document {
    load_str(text, "<vector>").unwrap_or_else(|e| panic!("a document ctrlrun loads was refused: {e}\n{text}"))
}

#[test]
fn every_ctrlrun_policy_vector_hashes_decides_and_refuses_as_ctrlrun_does() {
    let mut failures = Vec::new();
    let mut cases_checked = 0;
    let mut refusals_checked = 0;
    for (index, row) in rows().iter().enumerate() {
        let yaml = field(row, "policy_yaml");
        if row.get("error").is_some() {
            assert_eq!(field(row, "error"), "PolicyError");
            refusals_checked += 1;
            if let Ok(document) = load_str(yaml, "<vector>") {
                failures.push(format!(
                    "row {index}: ctrlrun refuses this document, Warden loaded it ({})\n{yaml}",
                    document.policy_hash
                ));
            }
            continue;
        }
        let document = match load_str(yaml, "<vector>") {
            Ok(document) => document,
            Err(e) => {
                failures.push(format!("row {index}: refused: {e}"));
                continue;
            }
        };
        let expected_hash = field(row, "policy_hash");
        if document.policy_hash != expected_hash {
            failures.push(format!("row {index}: hash {} != {expected_hash}", document.policy_hash));
        }
        // The policy the store keeps under the hash is the one hashed (`warden export` carries it).
        if warden::canonical::sha256_prefixed(&document.canonical_policy) != expected_hash {
            failures.push(format!("row {index}: the canonical policy kept does not hash to {expected_hash}"));
        }
        let cases = row["cases"].as_array().unwrap_or_else(|| panic!("row {index} has no cases"));
        for case in cases {
            let arguments: Map<String, Value> = serde_json::from_str(field(case, "arguments_json"))
                .unwrap_or_else(|e| panic!("row {index}: arguments_json: {e}"));
            let evaluation = evaluate(&document, field(case, "action"), &arguments);
            let (decision, reason) = (field(case, "decision"), field(case, "reason"));
            cases_checked += 1;
            if evaluation.ruling.decision.as_str() != decision || evaluation.ruling.reason != reason {
                failures.push(format!(
                    "row {index}: {} {}: got {} {}, ctrlrun says {decision} {reason}",
                    field(case, "action"),
                    field(case, "arguments_json"),
                    evaluation.ruling.decision.as_str(),
                    evaluation.ruling.reason
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
    assert!(cases_checked > 0 && refusals_checked > 0, "the vectors exercised nothing");
}

const WARDEN_POLICY: &str = r#"
schema: warden/v1
version: "2026-11 r1"
environment: production
actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    max_attempts: 3
    lease: PT15M
    rules:
      - when: { amount_gte: 0, amount_lte: 50000 }
        decision: allow
      - when: { amount_gte: 0, amount_lte: 500000 }
        decision: approve
      - decision: deny
  customer.read: { decision: allow }
"#;

#[test]
fn a_warden_policy_hash_ignores_the_version_label_and_formatting() {
    let original = load(WARDEN_POLICY);
    assert!(original.policy_hash.starts_with("sha256:") && original.policy_hash.len() == 71);
    let relabelled = load(&WARDEN_POLICY.replace("2026-11 r1", "2026-12 r2"));
    assert_eq!(original.policy_hash, relabelled.policy_hash);
    let unlabelled = load(&WARDEN_POLICY.replace("version: \"2026-11 r1\"\n", ""));
    assert_eq!(original.policy_hash, unlabelled.policy_hash);
    let as_json = load(
        r#"{"schema": "warden/v1", "environment": "production",
            "actions": {"customer.read": {"decision": "allow"},
                        "stripe.refund": {"effect": "refund:{payment_id}", "max_attempts": 3, "lease": "PT15M",
                                          "rules": [{"when": {"amount_lte": 50000, "amount_gte": 0}, "decision": "allow"},
                                                    {"decision": "approve", "when": {"amount_gte": 0, "amount_lte": 500000}},
                                                    {"decision": "deny"}]}}}"#,
    );
    assert_eq!(original.policy_hash, as_json.policy_hash, "JSON is YAML, and key order is not policy");
    let same_lease = load(&WARDEN_POLICY.replace("PT15M", "PT900S"));
    assert_eq!(original.policy_hash, same_lease.policy_hash, "a lease is hashed as the duration it means");
}

#[test]
fn a_warden_policy_hash_changes_when_a_decision_input_changes() {
    let original = load(WARDEN_POLICY).policy_hash;
    for (from, to) in [
        ("amount_lte: 50000 }", "amount_lte: 50001 }"),
        ("decision: approve", "decision: deny"),
        ("max_attempts: 3", "max_attempts: 4"),
        ("refund:{payment_id}", "refund:{charge_id}"),
        ("PT15M", "PT16M"),
        ("environment: production", "environment: staging"),
        ("customer.read: { decision: allow }", "customer.read: { decision: approve }"),
    ] {
        let changed = WARDEN_POLICY.replace(from, to);
        assert_ne!(changed, WARDEN_POLICY, "the edit {from:?} did not apply");
        assert_ne!(load(&changed).policy_hash, original, "changing {from:?} to {to:?} must change the hash");
    }
    let reordered = WARDEN_POLICY.replace(
        "      - when: { amount_gte: 0, amount_lte: 50000 }\n        decision: allow\n      - when: { amount_gte: 0, amount_lte: 500000 }\n        decision: approve\n",
        "      - when: { amount_gte: 0, amount_lte: 500000 }\n        decision: approve\n      - when: { amount_gte: 0, amount_lte: 50000 }\n        decision: allow\n",
    );
    assert_ne!(reordered, WARDEN_POLICY);
    assert_ne!(load(&reordered).policy_hash, original, "first match wins, so rule order is policy");
    let observed = format!("{WARDEN_POLICY}mode: observe\n");
    assert_ne!(load(&observed).policy_hash, original);
}

#[test]
fn a_warden_policy_decides_with_ctrlrun_reasons() {
    let document = load(WARDEN_POLICY);
    let decide = |name: &str, arguments: Value| {
        let Value::Object(arguments) = arguments else { panic!("arguments must be an object") };
        let evaluation = evaluate(&document, name, &arguments);
        (evaluation.ruling.decision.as_str().to_owned(), evaluation.ruling.reason, evaluation.warnings)
    };
    let (decision, reason, warnings) = decide("stripe.refund", serde_json::json!({"amount": 100, "payment_id": "p1"}));
    assert_eq!((decision.as_str(), reason.as_str()), ("allow", "rule[0]"));
    assert!(warnings.is_empty());
    let (decision, reason, _) = decide("stripe.refund", serde_json::json!({"amount": 60000}));
    assert_eq!((decision.as_str(), reason.as_str()), ("approve", "rule[1]"));
    let (decision, reason, warnings) = decide("stripe.refund", serde_json::json!({"amount": "100"}));
    assert_eq!((decision.as_str(), reason.as_str()), ("deny", "rule[2]"));
    assert_eq!(warnings.len(), 2, "one warning per rule whose first condition saw a string: {warnings:?}");
    assert!(warnings.iter().all(|w| w.contains("is str, not a number")), "{warnings:?}");
    let (decision, reason, warnings) = decide("stripe.refund", serde_json::json!({}));
    assert_eq!((decision.as_str(), reason.as_str()), ("deny", "rule[2]"));
    assert!(warnings.iter().all(|w| w.contains("no argument 'amount'")), "{warnings:?}");
    let (decision, reason, _) = decide("customer.read", serde_json::json!({}));
    assert_eq!((decision.as_str(), reason.as_str()), ("allow", "decision"));
    let (decision, reason, _) = decide("customer.delete", serde_json::json!({}));
    assert_eq!((decision.as_str(), reason.as_str()), ("deny", "unknown_action"));
}

#[test]
fn a_policy_with_no_catch_all_denies_when_no_rule_matches() {
    let document = load("schema: warden/v1\nactions:\n  deploy.run:\n    rules:\n      - when: { env_in: [dev, staging] }\n        decision: allow\n");
    let arguments: Map<String, Value> = serde_json::from_str(r#"{"env": "production"}"#).unwrap_or_default();
    let evaluation = evaluate(&document, "deploy.run", &arguments);
    assert_eq!(evaluation.ruling.decision.as_str(), "deny");
    assert_eq!(evaluation.ruling.reason, "no_matching_rule");
}

const LATER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/vectors/ctrlrun-0.12.2/policies_v6_v8.json");
/// The documents name certificate files relative to themselves; ctrlrun read them from here.
const LATER_ORIGIN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/ctrlrun-v8/policy.yaml");

/// `{tls_cert_sha256, certificates in the tls_cert_files, tool_schema_sha256, not_executed_on_error}` of one
/// action, as ctrlrun recorded it and as Warden loaded it.
fn warden_pins(document: &Document, name: &str) -> Value {
    let Some(entry) = document.actions.get(name) else { return Value::Null };
    let pins = entry.upstream.clone().unwrap_or_default();
    serde_json::json!({
        "not_executed_on_error": entry.not_executed_on_error,
        "tls_cert_sha256": pins.tls_cert_sha256,
        "tls_cert_files": pins.tls_cert_der.len(),
        "tool_schema_sha256": pins.tool_schema_sha256,
    })
}

fn ctrlrun_pins(pins: &Value) -> Value {
    serde_json::json!({
        "not_executed_on_error": pins["not_executed_on_error"],
        "tls_cert_sha256": pins["tls_cert_sha256"],
        "tls_cert_files": pins["tls_cert_count"],
        "tool_schema_sha256": pins["tool_schema_sha256"],
    })
}

/// ctrlrun 0.12.2 over `ctrlrun.policy/v6`–`v8` documents (`tests/vectors/generate_policies_v6_v8.py`):
/// a document that only adds the gateway keys loads with ctrlrun's hash, decisions, `mcp` and
/// `upstream` options; one ctrlrun refuses is refused; one that needs a v6/v7 feature Warden does
/// not implement is refused naming the key. Every refusal names its path and line.
#[test]
fn ctrlrun_v6_to_v8_documents_load_as_ctrlrun_reads_them_where_they_add_only_gateway_keys() {
    let text = std::fs::read_to_string(LATER).unwrap_or_else(|e| panic!("{LATER}: {e}"));
    let rows: Vec<Value> = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{LATER}: {e}"));
    let mut failures = Vec::new();
    let (mut loaded, mut refused, mut cases_checked) = (0, 0, 0);
    for row in &rows {
        let (name, yaml) = (field(row, "name"), field(row, "policy_yaml"));
        let result = load_str(yaml, LATER_ORIGIN);
        if let Some(expected) = row.get("warden_refuses") {
            refused += 1;
            let error = match result {
                Ok(document) => {
                    failures.push(format!("{name}: Warden loaded it ({}), it must refuse", document.policy_hash));
                    continue;
                }
                Err(error) => error,
            };
            let path = expected["path"].as_str().unwrap_or_default();
            if error.path != path || error.line.is_none() {
                failures.push(format!(
                    "{name}: refused at {} line {:?}, expected {path} with a line",
                    error.path, error.line
                ));
            }
            for words in expected["names"].as_array().into_iter().flatten() {
                let words = words.as_str().unwrap_or_default();
                if !error.message.contains(words) {
                    failures.push(format!("{name}: the refusal does not say {words:?}: {error}"));
                }
            }
            continue;
        }
        assert!(row.get("error").is_none(), "{name}: ctrlrun refuses it, so the row must say where Warden refuses");
        let document = match result {
            Ok(document) => document,
            Err(e) => {
                failures.push(format!("{name}: ctrlrun loads it, Warden refused: {e}"));
                continue;
            }
        };
        loaded += 1;
        let expected_hash = field(row, "policy_hash");
        if document.policy_hash != expected_hash {
            failures.push(format!("{name}: hash {} != ctrlrun's {expected_hash}", document.policy_hash));
        }
        let Some(pins) = row["pins"].as_object() else { panic!("{name}: no pins") };
        let names: Vec<&String> = document.actions.keys().collect();
        if names != pins.keys().collect::<Vec<_>>() {
            failures.push(format!("{name}: actions {names:?} != ctrlrun's {:?}", pins.keys()));
        }
        for (action, pins) in pins {
            let (ours, theirs) = (warden_pins(&document, action), ctrlrun_pins(pins));
            if ours != theirs {
                failures.push(format!("{name}: {action}: options {ours} != ctrlrun's {theirs}"));
            }
        }
        for case in row["cases"].as_array().into_iter().flatten() {
            let arguments: Map<String, Value> = serde_json::from_str(field(case, "arguments_json"))
                .unwrap_or_else(|e| panic!("{name}: arguments_json: {e}"));
            let evaluation = evaluate(&document, field(case, "action"), &arguments);
            cases_checked += 1;
            let (decision, reason) = (field(case, "decision"), field(case, "reason"));
            if evaluation.ruling.decision.as_str() != decision || evaluation.ruling.reason != reason {
                failures.push(format!(
                    "{name}: {} {}: got {} {}, ctrlrun says {decision} {reason}",
                    field(case, "action"),
                    field(case, "arguments_json"),
                    evaluation.ruling.decision.as_str(),
                    evaluation.ruling.reason
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
    assert!(loaded >= 6 && refused >= 15 && cases_checked >= 10, "the vectors exercised too little");
}

#[test]
fn every_float_vector_is_decided_as_its_canonical_arguments_say() {
    let text = std::fs::read_to_string(FLOATS).unwrap_or_else(|e| panic!("{FLOATS}: {e}"));
    let file: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{FLOATS}: {e}"));
    let document = load(field(&file, "policy_yaml"));
    let cases = file["cases"].as_array().expect("cases");
    let mut failures = Vec::new();
    let mut by_reason = std::collections::BTreeMap::<String, usize>::new();
    for case in cases {
        let arguments: Map<String, Value> = match warden::canonical::parse_json(field(case, "canonical_arguments")) {
            Ok(Value::Object(arguments)) => arguments,
            other => panic!("{case}: {other:?}"),
        };
        let evaluation = evaluate(&document, field(&file, "action"), &arguments);
        let got = (evaluation.ruling.decision.as_str(), evaluation.ruling.reason.as_str());
        *by_reason.entry(got.1.to_owned()).or_default() += 1;
        if got != (field(case, "decision"), field(case, "reason")) || !evaluation.warnings.is_empty() {
            failures.push(format!("{}: {got:?}, warnings {:?}", field(case, "name"), evaluation.warnings));
        }
    }
    assert!(failures.is_empty(), "{} of {} cases:\n{}", failures.len(), cases.len(), failures.join("\n"));
    // Every rule decides some case, and some match none.
    assert_eq!(by_reason.keys().map(String::as_str).collect::<Vec<_>>(), ["no_matching_rule", "rule[0]", "rule[1]"]);
}
