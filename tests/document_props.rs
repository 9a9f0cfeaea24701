//! Properties of the loader: no input panics it, and a document means the same thing whether it
//! is written as JSON or as block YAML.

use proptest::prelude::*;
use serde_json::{Map, Value};
use warden::document::{load_file, load_str, DocumentError};
use warden::policy::evaluate;

fn well_formed(error: &DocumentError, origin: &str) {
    assert_eq!(error.origin, origin);
    assert!(!error.path.is_empty(), "an error names a path: {error}");
    assert!(!error.message.is_empty(), "an error says what is wrong: {error}");
    assert!(error.to_string().starts_with(origin));
}

/// Fragments that YAML gives meaning to, so random strings reach deep into the parser.
const YAML_SOUP: &[&str] = &[
    "schema: warden/v1\n",
    "schema: ctrlrun.policy/v2\n",
    "schema: ctrlrun.policy/v5\n",
    "actions:\n",
    "  a:\n",
    "    decision: allow\n",
    "    rules:\n",
    "      - when: {",
    "amount_lte: ",
    "role_in: [",
    "]",
    "}",
    "{",
    "[",
    ", ",
    ": ",
    "- ",
    "? ",
    "&a ",
    "*a",
    "!!str ",
    "!!int ",
    "! ",
    "|\n",
    ">-\n",
    "'",
    "\"",
    "\\",
    "#",
    "\n",
    "  ",
    "\t",
    "---\n",
    "...\n",
    "%YAML 1.1\n",
    "yes",
    "017",
    "1_000",
    "1:30",
    "0x1F",
    "1.5",
    "~",
    "null",
    "2026-11-01",
    "<<",
    "=",
    "é",
    "\u{1F600}",
    "\u{feff}",
    "\u{85}",
    "\r\n",
    "decision: ",
    "effect: 'x:{id}'",
    "max_attempts: 3",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn any_string_loads_or_is_refused_without_panicking(text in any::<String>()) {
        if let Err(error) = load_str(&text, "s.yaml") {
            well_formed(&error, "s.yaml");
        }
    }

    #[test]
    fn any_soup_of_yaml_fragments_loads_or_is_refused_without_panicking(
        parts in prop::collection::vec(prop::sample::select(YAML_SOUP), 0..60)
    ) {
        let text = parts.concat();
        if let Err(error) = load_str(&text, "soup.yaml") {
            well_formed(&error, "soup.yaml");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn any_bytes_in_a_file_load_or_are_refused_without_panicking(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        let dir = tempfile::tempdir().map_err(|e| TestCaseError::fail(e.to_string()))?;
        let path = dir.path().join("w.yaml");
        std::fs::write(&path, &bytes).map_err(|e| TestCaseError::fail(e.to_string()))?;
        if let Err(error) = load_file(&path) {
            well_formed(&error, &path.display().to_string());
        }
    }
}

// ---- a structured generator of valid-ish documents -------------------------------------------

const SUBJECTS: &[&str] = &["amount", "role", "env", "tags", "count", "x_y", "user", "data_scope"];
const OPS: &[&str] = &["eq", "neq", "in", "lt", "lte", "gt", "gte", "between"];
const AWKWARD_TEXT: &[&str] = &[
    "yes",
    "017",
    "1_000",
    "1:30",
    "on",
    "",
    "a b",
    "x:y",
    "#",
    "-",
    "?x",
    "'",
    "\"",
    "\\",
    "é",
    "\u{1F600}",
    "\u{2028}",
];

fn integer() -> impl Strategy<Value = Value> {
    prop_oneof![
        (-3i64..600_000).prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        Just(serde_json::from_str::<Value>("1180591620717411303424").unwrap_or(Value::Null)),
    ]
}

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => integer(),
        2 => any::<bool>().prop_map(Value::from),
        1 => Just(Value::Null),
        4 => "[a-z]{0,6}".prop_map(Value::from),
        2 => prop::sample::select(AWKWARD_TEXT).prop_map(Value::from),
        1 => Just(Value::from(1.5)),
    ]
}

fn operand(op: &'static str) -> BoxedStrategy<Value> {
    match op {
        "lt" | "lte" | "gt" | "gte" => prop_oneof![8 => integer(), 1 => scalar()].boxed(),
        "in" => prop_oneof![
            8 => prop::collection::vec(scalar(), 0..4).prop_map(Value::Array),
            1 => scalar(),
        ]
        .boxed(),
        _ => prop_oneof![
            6 => scalar(),
            1 => prop::collection::vec(scalar(), 0..3).prop_map(Value::Array),
            1 => prop::collection::btree_map("[a-c]", scalar(), 0..3)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
        .boxed(),
    }
}

fn conditions() -> impl Strategy<Value = Value> {
    prop::collection::vec(
        (prop::sample::select(SUBJECTS), prop::sample::select(OPS))
            .prop_flat_map(|(subject, op)| (Just(format!("{subject}_{op}")), operand(op))),
        0..4,
    )
    .prop_map(|pairs| Value::Object(pairs.into_iter().collect()))
}

fn decision() -> impl Strategy<Value = Value> {
    prop_oneof![
        5 => prop::sample::select(&["allow", "approve", "deny"][..]).prop_map(Value::from),
        1 => Just(Value::from("maybe")),
    ]
}

fn rule() -> impl Strategy<Value = Value> {
    (prop::option::weighted(0.8, conditions()), decision()).prop_map(|(when, decision)| {
        let mut rule = Map::new();
        if let Some(when) = when {
            rule.insert("when".into(), when);
        }
        rule.insert("decision".into(), decision);
        Value::Object(rule)
    })
}

fn entry(warden: bool) -> impl Strategy<Value = Value> {
    let effects = prop::sample::select(
        &["refund:{payment_id}", "x:{a}:{b}", "x:{a}{b}", "{resource}", "bad{{", "policy:{x}"][..],
    );
    (
        prop_oneof![
            1 => decision().prop_map(|d| ("decision", d)),
            3 => prop::collection::vec(rule(), 0..4).prop_map(|rules| ("rules", Value::Array(rules))),
        ],
        prop::option::weighted(0.4, effects),
        prop::option::weighted(0.2, prop_oneof![(0i64..5).prop_map(Value::from), Just(Value::from(2.5))]),
        prop::option::weighted(if warden { 0.2 } else { 0.02 }, prop::sample::select(&["PT15M", "P1D", "15m"][..])),
        prop::option::weighted(0.05, Just(("timeoutMs", Value::from(5)))),
    )
        .prop_map(|((key, body), effect, attempts, lease, unknown)| {
            let mut entry = Map::new();
            entry.insert(key.into(), body);
            if let Some(effect) = effect {
                entry.insert("effect".into(), Value::from(effect));
            }
            if let Some(attempts) = attempts {
                entry.insert("max_attempts".into(), attempts);
            }
            if let Some(lease) = lease {
                entry.insert("lease".into(), Value::from(lease));
            }
            if let Some((key, value)) = unknown {
                entry.insert(key.into(), value);
            }
            Value::Object(entry)
        })
}

fn document() -> impl Strategy<Value = Value> {
    prop::sample::select(&["warden/v1", "ctrlrun.policy/v2", "ctrlrun.policy/v5"][..]).prop_flat_map(|schema| {
        let warden = schema == "warden/v1";
        (
            prop::collection::btree_map(
                prop::sample::select(&["stripe.refund", "customer.read", "iam.grant_admin", "deploy.run", "a"][..]),
                entry(warden),
                0..4,
            ),
            prop::option::weighted(0.3, prop::sample::select(&["production", "staging", ""][..])),
            prop::option::weighted(0.3, prop::sample::select(&["enforce", "observe", "audit"][..])),
            prop::option::weighted(0.3, prop::sample::select(&["r1", "2026-11 r3"][..])),
        )
            .prop_map(move |(actions, environment, mode, version)| {
                let mut document = Map::new();
                document.insert("schema".into(), Value::from(schema));
                document.insert(
                    "actions".into(),
                    Value::Object(actions.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()),
                );
                for (key, value) in [("environment", environment), ("mode", mode), ("version", version)] {
                    if let Some(value) = value {
                        document.insert(key.into(), Value::from(value));
                    }
                }
                Value::Object(document)
            })
    })
}

fn arguments() -> impl Strategy<Value = Map<String, Value>> {
    prop::collection::btree_map(prop::sample::select(SUBJECTS), prop_oneof![scalar(), conditions()], 0..6)
        .prop_map(|m| m.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
}

/// Block YAML: mappings and sequences in block style down to `depth`, flow (JSON) below it;
/// every string and key double-quoted, so no plain scalar is left to resolve.
fn block_yaml(value: &Value, indent: usize, depth: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    match value {
        Value::Object(members) if depth > 0 && !members.is_empty() => {
            for (key, item) in members {
                out.push_str(&format!("{pad}{}:", serde_json::to_string(key).unwrap_or_default()));
                nested(item, indent, depth, out);
            }
        }
        Value::Array(items) if depth > 0 && !items.is_empty() => {
            for item in items {
                out.push_str(&format!("{pad}-"));
                nested(item, indent, depth, out);
            }
        }
        _ => out.push_str(&format!("{pad}{}\n", flow(value))),
    }
}

fn nested(item: &Value, indent: usize, depth: usize, out: &mut String) {
    let is_block = match item {
        Value::Object(m) => !m.is_empty(),
        Value::Array(a) => !a.is_empty(),
        _ => false,
    };
    if is_block && depth > 1 {
        out.push('\n');
        block_yaml(item, indent + 2, depth - 1, out);
    } else {
        out.push_str(&format!(" {}\n", flow(item)));
    }
}

fn flow(value: &Value) -> String {
    match value {
        Value::Null => "~".to_owned(),
        _ => serde_json::to_string(value).unwrap_or_default(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn a_generated_document_means_the_same_as_json_and_as_block_yaml(
        document in document(),
        depth in 1usize..6,
        calls in prop::collection::vec(
            (prop::sample::select(&["stripe.refund", "customer.read", "deploy.run", "a", "unknown"][..]), arguments()),
            1..5,
        ),
    ) {
        let json = serde_json::to_string(&document).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let mut yaml = String::new();
        block_yaml(&document, 0, depth, &mut yaml);
        let from_json = load_str(&json, "d.json");
        let from_yaml = load_str(&yaml, "d.yaml");
        match (&from_json, &from_yaml) {
            (Ok(a), Ok(b)) => {
                prop_assert_eq!(&a.policy_hash, &b.policy_hash, "{}\n{}", json, yaml);
                prop_assert_eq!(&a.warnings, &b.warnings);
                for (name, arguments) in &calls {
                    let x = evaluate(a, name, arguments);
                    let y = evaluate(b, name, arguments);
                    prop_assert_eq!(&x, &y);
                    let reason = x.ruling.reason.as_str();
                    let known = ["decision", "no_matching_rule", "unknown_action"].contains(&reason)
                        || (reason.starts_with("rule[") && reason.ends_with(']'));
                    prop_assert!(known, "unexpected reason {}", reason);
                }
            }
            (Err(a), Err(b)) => {
                well_formed(a, "d.json");
                well_formed(b, "d.yaml");
                prop_assert_eq!(&a.path, &b.path, "{}\n{}", a, b);
                prop_assert_eq!(&a.message, &b.message);
            }
            _ => prop_assert!(false, "JSON and YAML disagree:\n{json}\n{from_json:?}\n{yaml}\n{from_yaml:?}"),
        }
    }
}
