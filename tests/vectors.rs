//! ctrlrun 0.12.2's own outputs, replayed: canonical JSON, action canonical forms and hashes,
//! and raw-mode effect-key templates must agree byte for byte. Then `warden/floats.json`: float
//! arguments under a `warden/v1` document, computed without Warden (RFC 8785's number text, by
//! the `rfc8785` package, checked against Node's `JSON.stringify`).
//!
//! The vector files are read with serde_json rather than `warden::canonical::parse_json`, so the
//! harness does not share the parser under test.

use serde_json::{Map, Number, Value};
use warden::action::{Action, ActionError, Principal};
use warden::canonical::{parse_json, to_canonical_string, to_canonical_string_with, CanonicalError, Floats};
use warden::pipeline::{action_for, ActionRequest};
use warden::template::{Template, TemplateError, TemplateMode};

const VECTORS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/vectors/ctrlrun-0.12.2/");
const FLOATS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/vectors/warden/floats.json");

fn rows(file: &str) -> Vec<Value> {
    let path = format!("{VECTORS}{file}");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let rows: Vec<Value> = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
    assert!(!rows.is_empty(), "{path} has no rows");
    rows
}

fn text<'v>(row: &'v Value, field: &str) -> &'v str {
    row[field].as_str().unwrap_or_else(|| panic!("field {field} is not a string in {row}"))
}

fn optional_text<'v>(row: &'v Value, field: &str) -> Option<&'v str> {
    row[field].as_str()
}

fn assert_no_failures(file: &str, total: usize, failures: Vec<String>) {
    assert!(failures.is_empty(), "{} of {total} rows of {file} failed:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn every_canonical_vector_encodes_byte_for_byte_or_is_refused_as_a_float() {
    let rows = rows("canonical.json");
    let mut failures = Vec::new();
    for (index, row) in rows.iter().enumerate() {
        let outcome = parse_json(text(row, "input")).and_then(|v| to_canonical_string(&v, "input"));
        match (optional_text(row, "canonical"), optional_text(row, "error"), &outcome) {
            (Some(expected), None, Ok(actual)) if actual == expected => {}
            (None, Some("float"), Err(CanonicalError::Float { .. })) => {}
            _ => failures.push(format!("row {index}: {row} gave {outcome:?}")),
        }
    }
    assert_no_failures("canonical.json", rows.len(), failures);
}

#[test]
fn every_action_vector_has_ctrlrun_s_canonical_form_and_hash() {
    let rows = rows("actions.json");
    let mut failures = Vec::new();
    for (index, row) in rows.iter().enumerate() {
        let outcome = (|| {
            let principal = Principal::new(text(&row["principal"], "agent"), optional_text(&row["principal"], "user"))?;
            let action = Action::new(
                text(row, "name"),
                parse_json(text(row, "arguments_json"))?,
                principal,
                optional_text(row, "resource"),
                text(row, "environment"),
            )?;
            Ok::<_, warden::action::ActionError>((action.canonical()?, action.hash()?))
        })();
        match &outcome {
            Ok((canonical, hash)) if canonical == text(row, "canonical") && hash == text(row, "action_hash") => {}
            _ => failures.push(format!("row {index}: {row} gave {outcome:?}")),
        }
    }
    assert_no_failures("actions.json", rows.len(), failures);
}

#[test]
fn every_template_vector_renders_the_same_key_or_fails_with_the_same_class_in_raw_mode() {
    let rows = rows("templates.json");
    let mut failures = Vec::new();
    for (index, row) in rows.iter().enumerate() {
        let arguments = match parse_json(text(row, "arguments_json")) {
            Ok(Value::Object(arguments)) => arguments,
            other => {
                failures.push(format!("row {index}: arguments did not parse: {other:?}"));
                continue;
            }
        };
        let outcome = Template::parse(text(row, "template"), TemplateMode::Raw)
            .and_then(|t| t.render_effect_key(&arguments, optional_text(row, "resource")));
        let agrees = match (optional_text(row, "key"), optional_text(row, "error"), &outcome) {
            (Some(expected), None, Ok(actual)) => actual == expected,
            (None, Some("InvalidArgument"), Err(TemplateError::Invalid(_))) => true,
            (None, Some("EffectKeyError"), Err(TemplateError::EffectKey(_))) => true,
            _ => false,
        };
        if !agrees {
            failures.push(format!("row {index}: {row} gave {outcome:?}"));
        }
    }
    assert_no_failures("templates.json", rows.len(), failures);
}

fn floats_file() -> Value {
    let text = std::fs::read_to_string(FLOATS).unwrap_or_else(|e| panic!("{FLOATS}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{FLOATS}: {e}"))
}

/// The arguments a float case sends, as a Rust host builds them: parsed from the case's JSON
/// text, or `{"case", "a"}` with `a` the double of the given IEEE-754 bits (which serde_json
/// writes with Rust's own shortest formatting, a text the library then reads).
fn sent_arguments(case: &Value) -> Value {
    if let Some(text) = optional_text(case, "arguments_json") {
        return parse_json(text).unwrap_or_else(|e| panic!("{case}: {e}"));
    }
    let bits = u64::from_str_radix(text(case, "ieee"), 16).expect("hex bits");
    let double = Number::from_f64(f64::from_bits(bits)).expect("a finite double");
    let mut arguments = Map::new();
    arguments.insert("case".into(), Value::String(text(case, "name").to_owned()));
    arguments.insert("a".into(), Value::Number(double));
    Value::Object(arguments)
}

fn float_principal(file: &Value) -> Principal {
    Principal::new(text(&file["principal"], "agent"), optional_text(&file["principal"], "user")).expect("principal")
}

#[test]
fn every_float_vector_has_its_canonical_arguments_hash_and_effect_key_under_warden_v1() {
    let file = floats_file();
    let cases = file["cases"].as_array().expect("cases");
    assert!(cases.len() >= 40, "{} cases", cases.len());
    let document = warden::document::load_str(text(&file, "policy_yaml"), "floats.json").expect("the vector policy");
    assert_eq!(document.schema.floats(), Floats::Rfc8785);
    let template = Template::parse(text(&file, "effect"), TemplateMode::Escaped).expect("template");
    let environment = text(&file, "environment");
    let mut failures = Vec::new();
    for case in cases {
        let sent = sent_arguments(case);
        let built = Action::new_with(
            text(&file, "action"),
            sent.clone(),
            float_principal(&file),
            None,
            environment,
            Floats::Rfc8785,
        );
        let action = match built {
            Ok(action) => action,
            Err(e) => {
                failures.push(format!("{}: refused: {e}", text(case, "name")));
                continue;
            }
        };
        let arguments = to_canonical_string_with(&action.canonical_arguments(), "arguments", Floats::Rfc8785);
        let hash = action.hash();
        let key = template.render_effect_key(&action.arguments, None);
        // The key renders alike from the arguments as sent (a resource template renders from
        // them, before the action holds its canonical reading).
        let sent_key = template.render_effect_key(sent.as_object().expect("an object"), None);
        // The one place a request becomes an action picks the numbers from the document.
        let request = ActionRequest::new(text(&file, "action"), sent.clone(), float_principal(&file));
        let through_document =
            action_for(Some(&document), &request, environment).and_then(|a| a.hash().map_err(warden::Error::from));
        let expected_hash = text(case, "action_hash");
        let agrees = arguments.as_deref() == Ok(text(case, "canonical_arguments"))
            && hash.as_deref() == Ok(expected_hash)
            && key.as_deref() == Ok(text(case, "effect_key"))
            && sent_key.as_deref() == Ok(text(case, "effect_key"))
            && through_document.as_deref().ok() == Some(expected_hash)
            && action.arguments_text().as_deref() == Ok(text(case, "canonical_arguments"));
        if !agrees {
            failures.push(format!(
                "{}: arguments {arguments:?}, hash {hash:?}, key {key:?} (as sent {sent_key:?}), through the \
                 document {through_document:?}",
                text(case, "name")
            ));
        }
    }
    assert_no_failures("warden/floats.json", cases.len(), failures);
}

#[test]
fn a_float_vector_is_refused_without_a_document_and_one_without_floats_hashes_alike_in_both_forms() {
    let file = floats_file();
    let cases = file["cases"].as_array().expect("cases");
    let environment = text(&file, "environment");
    let mut unchanged = 0;
    for case in cases {
        let sent = sent_arguments(case);
        let float_free = warden::canonical::find_float(&sent, "arguments").is_none();
        let ctrlrun = Action::new(text(&file, "action"), sent.clone(), float_principal(&file), None, environment);
        let no_document =
            action_for(None, &ActionRequest::new(text(&file, "action"), sent, float_principal(&file)), environment);
        if float_free {
            // No float: ctrlrun's rule changes nothing, byte for byte.
            assert_eq!(ctrlrun.and_then(|a| a.hash()).as_deref(), Ok(text(case, "action_hash")), "{case}");
            assert!(no_document.is_ok(), "{case}");
            unchanged += 1;
        } else {
            assert!(
                matches!(ctrlrun, Err(ActionError::Canonical(CanonicalError::Float { .. }))),
                "{case}: {ctrlrun:?}"
            );
            assert!(
                matches!(no_document, Err(warden::Error::InvalidInput(ref m)) if m.message.contains("float")
                && m.kind == warden::error::InvalidInputKind::NotCanonical),
                "{case}"
            );
        }
    }
    // The integers among the cases: 10, 11, 10^21 and 2^53 + 1 written as integers.
    assert_eq!(unchanged, 4);
}

#[test]
fn a_refused_float_vector_has_no_canonical_form_and_is_refused_naming_its_path() {
    let file = floats_file();
    let refused = file["refused"].as_array().expect("refused");
    assert!(!refused.is_empty());
    for case in refused {
        let sent = parse_json(text(case, "arguments_json")).expect("valid JSON");
        let outcome =
            Action::new_with(text(&file, "action"), sent, float_principal(&file), None, "production", Floats::Rfc8785);
        assert_eq!(
            outcome,
            Err(ActionError::Canonical(CanonicalError::BeyondDouble { path: "arguments.a".into() })),
            "{case}"
        );
    }
}
