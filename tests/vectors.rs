//! ctrlrun 0.12.2's own outputs, replayed: canonical JSON, action canonical forms and hashes,
//! and raw-mode effect-key templates must agree byte for byte.
//!
//! The vector files are read with serde_json rather than `warden::canonical::parse_json`, so the
//! harness does not share the parser under test.

use serde_json::Value;
use warden::action::{Action, Principal};
use warden::canonical::{parse_json, to_canonical_string, CanonicalError};
use warden::template::{Template, TemplateError, TemplateMode};

const VECTORS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/vectors/ctrlrun-0.12.2/");

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
