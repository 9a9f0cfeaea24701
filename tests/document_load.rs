//! Strict loading of the administrator's document: what is refused, where the error points, and
//! what a ctrlrun document still means.

use serde_json::{json, Map, Value};
use warden::document::{load_file, load_str, Document, DocumentError, Mode, Schema};
use warden::policy::evaluate;

/// One refusal: a label, the document, the path the error must name, its line, and a phrase the
/// message must contain.
struct Refusal {
    label: &'static str,
    yaml: &'static str,
    path: &'static str,
    line: Option<usize>,
    message: &'static str,
}

const fn refusal(
    label: &'static str,
    yaml: &'static str,
    path: &'static str,
    line: Option<usize>,
    message: &'static str,
) -> Refusal {
    Refusal { label, yaml, path, line, message }
}

fn check(rows: &[Refusal]) {
    let mut failures = Vec::new();
    for row in rows {
        match load_str(row.yaml, "test.yaml") {
            Ok(document) => failures.push(format!("{}: loaded (hash {})", row.label, document.policy_hash)),
            Err(error) => {
                let shown = error.to_string();
                if error.path != row.path {
                    failures.push(format!("{}: path {:?}, expected {:?}: {shown}", row.label, error.path, row.path));
                }
                if row.line.is_some() && error.line != row.line {
                    failures.push(format!("{}: line {:?}, expected {:?}: {shown}", row.label, error.line, row.line));
                }
                if !error.message.contains(row.message) {
                    failures.push(format!("{}: message lacks {:?}: {shown}", row.label, row.message));
                }
                if !shown.starts_with("test.yaml") {
                    failures.push(format!("{}: the error does not name its origin: {shown}", row.label));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} of {} rows failed:\n{}", failures.len(), rows.len(), failures.join("\n"));
}

fn load(yaml: &str) -> Document {
    load_str(yaml, "test.yaml").unwrap_or_else(|e| panic!("refused: {e}\n{yaml}"))
}

fn decide(document: &Document, name: &str, arguments: Value) -> (String, String) {
    let Value::Object(arguments) = arguments else { panic!("arguments must be an object") };
    let evaluation = evaluate(document, name, &arguments);
    (evaluation.ruling.decision.as_str().to_owned(), evaluation.ruling.reason)
}

#[test]
fn duplicate_keys_are_refused_at_every_level_naming_the_path_and_line() {
    check(&[
        refusal(
            "top-level duplicate",
            "schema: warden/v1\nenvironment: prod\nenvironment: staging\nactions: {}\n",
            "environment",
            Some(3),
            "duplicate key 'environment' (first on line 2)",
        ),
        refusal(
            "duplicate action",
            "schema: warden/v1\nactions:\n  a.b: {decision: allow}\n  a.b: {decision: deny}\n",
            "actions.a.b",
            Some(4),
            "duplicate key",
        ),
        refusal(
            "duplicate condition",
            "schema: warden/v1\nactions:\n  stripe.refund:\n    rules:\n      - when:\n          amount_lte: 5\n          amount_lte: 50000\n        decision: allow\n",
            "actions.stripe.refund.rules[0].when.amount_lte",
            Some(7),
            "duplicate key 'amount_lte' (first on line 6)",
        ),
        refusal(
            "quoted and plain spellings of one key",
            "schema: warden/v1\nactions:\n  a: {decision: allow, 'decision': deny}\n",
            "actions.a.decision",
            Some(3),
            "duplicate key",
        ),
        refusal(
            "duplicate in a ctrlrun document",
            "schema: ctrlrun.policy/v2\nactions:\n  a.b: {decision: allow}\n  a.b: {decision: deny}\n",
            "actions.a.b",
            Some(4),
            "duplicate key",
        ),
    ]);
}

#[test]
fn unknown_keys_are_refused_at_every_level() {
    check(&[
        refusal(
            "top level",
            "schema: warden/v1\ntimeoutMs: 5\nactions: {}\n",
            "timeoutMs",
            Some(2),
            "(keys are snake_case)",
        ),
        refusal("top-level typo", "schema: warden/v1\naction: {}\n", "action", Some(2), "unknown key 'action'"),
        refusal(
            "action entry",
            "schema: warden/v1\nactions:\n  a: {decision: allow, timeout_ms: 5}\n",
            "actions.a.timeout_ms",
            Some(3),
            "allowed here: approval, decision, description, effect, lease, max_attempts, mcp, resource, rules, upstream",
        ),
        refusal(
            "rule",
            "schema: warden/v1\nactions:\n  a:\n    rules:\n      - decision: allow\n        unless: {x_eq: 1}\n",
            "actions.a.rules[0].unless",
            Some(6),
            "unknown key 'unless'",
        ),
        refusal(
            "a warden key in a ctrlrun document",
            "schema: ctrlrun.policy/v5\nactions:\n  a: {decision: allow, lease: PT1M}\n",
            "actions.a.lease",
            Some(3),
            "unknown key 'lease'",
        ),
        refusal(
            "sources in a ctrlrun document",
            "schema: ctrlrun.policy/v5\nsources: []\nactions: {}\n",
            "sources",
            Some(2),
            "unknown key",
        ),
        refusal(
            "mode nested in an entry",
            "schema: warden/v1\nactions:\n  a: {decision: allow, mode: observe}\n",
            "actions.a.mode",
            Some(3),
            "'mode' is top level",
        ),
    ]);
}

#[test]
fn keys_that_are_not_strings_are_refused() {
    check(&[
        refusal(
            "an integer key",
            "schema: warden/v1\n1: x\nactions: {}\n",
            "top level",
            Some(2),
            "keys must be strings, and this one is the integer 1",
        ),
        refusal("a boolean key", "schema: warden/v1\ntrue: x\nactions: {}\n", "top level", Some(2), "the boolean true"),
        refusal("a null key", "schema: warden/v1\n~: x\nactions: {}\n", "top level", Some(2), "keys must be strings"),
        refusal(
            "a key that YAML 1.1 reads as a boolean, in warden/v1",
            "schema: warden/v1\nactions:\n  on: {decision: allow}\n",
            "actions",
            Some(3),
            "Quote it",
        ),
        refusal(
            "a key that YAML 1.1 reads as a boolean, in ctrlrun",
            "schema: ctrlrun.policy/v2\nactions:\n  on: {decision: allow}\n",
            "actions",
            Some(3),
            "the boolean true",
        ),
        refusal(
            "a complex key",
            "schema: warden/v1\nactions:\n  ? [a, b]\n  : {decision: allow}\n",
            "actions",
            None,
            "keys must be strings, and this one is a list",
        ),
        refusal(
            "an integer key inside an operand",
            "schema: warden/v1\nactions:\n  a:\n    rules:\n      - when: {x_eq: {1: a}}\n        decision: allow\n",
            "actions.a.rules[0].when.x_eq",
            Some(5),
            "keys must be strings",
        ),
    ]);
}

#[test]
fn integers_are_required_where_integers_are_expected() {
    check(&[
        refusal(
            "a float attempt ceiling",
            "schema: warden/v1\nactions:\n  a:\n    decision: allow\n    max_attempts: 2.5\n",
            "actions.a.max_attempts",
            Some(5),
            "must be an integer of at least 1, got the float 2.5",
        ),
        refusal("zero attempts", "schema: warden/v1\nactions:\n  a: {decision: allow, max_attempts: 0}\n", "actions.a.max_attempts", Some(3), "at least 1"),
        refusal("negative attempts", "schema: warden/v1\nactions:\n  a: {decision: allow, max_attempts: -2}\n", "actions.a.max_attempts", Some(3), "at least 1"),
        refusal("a boolean ceiling", "schema: warden/v1\nactions:\n  a: {decision: allow, max_attempts: true}\n", "actions.a.max_attempts", Some(3), "the boolean true"),
        refusal("a string ceiling", "schema: warden/v1\nactions:\n  a: {decision: allow, max_attempts: '3'}\n", "actions.a.max_attempts", Some(3), "the string '3'"),
        refusal(
            "a ceiling beyond 32 bits",
            "schema: ctrlrun.policy/v5\nactions:\n  a: {decision: allow, max_attempts: 99999999999}\n",
            "actions.a.max_attempts",
            Some(3),
            "Warden counts attempts up to 4294967295",
        ),
        refusal(
            "a float operand in a ctrlrun document",
            "schema: ctrlrun.policy/v2\nactions:\n  a.b:\n    rules:\n      - when: {amount_lte: 1.5}\n        decision: allow\n",
            "actions.a.b.rules[0].when.amount_lte",
            Some(5),
            "needs an integer operand, got the float 1.5. Only integers can be bounded: write amounts in integer minor units",
        ),
        refusal(
            "a float inside an equality operand in a ctrlrun document",
            "schema: ctrlrun.policy/v2\nactions:\n  a:\n    rules:\n      - when: {x_eq: {price: 1.5}}\n        decision: allow\n",
            "actions.a.rules[0].when.x_eq.price",
            Some(5),
            "floats are not accepted",
        ),
        refusal(
            "a float inside an in list in a ctrlrun document",
            "schema: ctrlrun.policy/v2\nactions:\n  a:\n    rules:\n      - when: {x_in: [1, 2.5]}\n        decision: allow\n",
            "actions.a.rules[0].when.x_in[1]",
            Some(5),
            "float operands are not allowed",
        ),
        refusal(
            "an equality operand that is a float in a ctrlrun document",
            "schema: ctrlrun.policy/v2\nactions:\n  a:\n    rules:\n      - when: {x_eq: 2.5}\n        decision: allow\n",
            "actions.a.rules[0].when.x_eq",
            Some(5),
            "float operands are not allowed, got the float 2.5",
        ),
        refusal(
            "a boolean bound",
            "schema: warden/v1\nactions:\n  a:\n    rules:\n      - when: {x_lt: true}\n        decision: allow\n",
            "actions.a.rules[0].when.x_lt",
            Some(5),
            "needs a number operand, got the boolean true",
        ),
        refusal(
            "a string bound in a ctrlrun document",
            "schema: ctrlrun.policy/v2\nactions:\n  a:\n    rules:\n      - when: {x_lt: '5'}\n        decision: allow\n",
            "actions.a.rules[0].when.x_lt",
            Some(5),
            "needs an integer operand, got the string '5'",
        ),
        refusal(
            "an infinite bound",
            "schema: warden/v1\nactions:\n  a:\n    rules:\n      - when: {x_lt: .inf}\n        decision: allow\n",
            "actions.a.rules[0].when.x_lt",
            Some(5),
            "the float .inf is not a finite number, and only finite numbers have a canonical form",
        ),
        refusal(
            "a bound beyond the double range",
            "schema: warden/v1\nactions:\n  a:\n    rules:\n      - when: {x_lte: 1.0e+400}\n        decision: allow\n",
            "actions.a.rules[0].when.x_lte",
            Some(5),
            "is not a finite number",
        ),
        refusal(
            "NaN in an in list",
            "schema: warden/v1\nactions:\n  a:\n    rules:\n      - when: {x_in: [1, .nan]}\n        decision: allow\n",
            "actions.a.rules[0].when.x_in[1]",
            Some(5),
            "the float .nan is not a finite number",
        ),
        refusal(
            "negative infinity inside an equality operand",
            "schema: warden/v1\nactions:\n  a:\n    rules:\n      - when: {x_eq: {p: -.inf}}\n        decision: allow\n",
            "actions.a.rules[0].when.x_eq.p",
            Some(5),
            "is not a finite number",
        ),
        refusal(
            "a float attempt ceiling in warden/v1",
            "schema: warden/v1\nactions:\n  a: {decision: allow, max_attempts: 2.0}\n",
            "actions.a.max_attempts",
            Some(3),
            "must be an integer of at least 1, got the float 2.0",
        ),
        refusal(
            "a float lease",
            "schema: warden/v1\nactions:\n  a: {decision: allow, lease: 1.5}\n",
            "actions.a.lease",
            Some(3),
            "the float 1.5",
        ),
        refusal(
            "a float grant constraint, though the document is warden/v1",
            "schema: warden/v1\nactions:\n  a: {decision: allow}\nauthority:\n  grants:\n    - id: g\n      subject: {agent: x}\n      actions: [a]\n      constraints: {amount_lte: 1.5}\n",
            "authority.grants[0].constraints.amount_lte",
            Some(9),
            "floats are not accepted, got the float 1.5",
        ),
        refusal(
            "a float in a source window",
            "schema: warden/v1\nsources:\n  - id: status\n    timeout: 1.5\n",
            "sources[0].timeout",
            Some(4),
            "floats are not accepted",
        ),
    ]);
}

#[test]
fn unquoted_values_that_yaml_versions_read_differently_are_refused_in_warden_v1() {
    let ambiguous = [
        ("yes", "a boolean to YAML 1.1"),
        ("No", "a boolean to YAML 1.1"),
        ("on", "a boolean to YAML 1.1"),
        ("OFF", "a boolean to YAML 1.1"),
        ("y", "a boolean to YAML 1.1"),
        ("017", "leading zero"),
        ("08", "leading zero"),
        ("0o17", "means the string \"0o17\" in YAML 1.1 but the integer 15 in YAML 1.2"),
        ("1_000", "means the integer 1000 in YAML 1.1 but the string \"1_000\" in YAML 1.2"),
        ("1:30", "means the integer 90 in YAML 1.1"),
        ("0b101", "means the integer 5 in YAML 1.1"),
        ("-0x1F", "means the integer -31 in YAML 1.1"),
        ("1e3", "the float 1000 in YAML 1.2"),
        ("2026-11-01", "a timestamp"),
    ];
    let mut failures = Vec::new();
    for (value, why) in ambiguous {
        for (template, path) in [
            (
                "schema: warden/v1\nactions:\n  a:\n    rules:\n      - when: {{x_eq: {}}}\n        decision: allow\n",
                "actions.a.rules[0].when.x_eq",
            ),
            ("schema: warden/v1\nversion: {}\nactions: {{}}\n", "version"),
        ] {
            let yaml = template.replacen("{}", value, 1).replace("{{", "{").replace("}}", "}");
            match load_str(&yaml, "test.yaml") {
                Ok(_) => failures.push(format!("{value} loaded in {path}")),
                Err(e) if e.path != path || !e.message.contains(why) || !e.message.contains("Quote it") => {
                    failures.push(format!("{value}: {e}"));
                }
                Err(_) => {}
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    for quoted in ["'yes'", "\"017\"", "'1_000'", "'2026-11-01'", "!!str on"] {
        let yaml = format!("schema: warden/v1\nversion: {quoted}\nactions: {{}}\n");
        assert!(load_str(&yaml, "test.yaml").is_ok(), "{quoted} is quoted and must load");
    }
    let unambiguous = load(
        "schema: warden/v1\nactions:\n  a:\n    rules:\n      - when: {x_eq: 0x1F, y_eq: true, z_eq: ~, w_eq: +5}\n        decision: allow\n",
    );
    assert_eq!(decide(&unambiguous, "a", json!({"x": 31, "y": true, "z": null, "w": 5})).1, "rule[0]");
}

#[test]
fn ctrlrun_documents_read_plain_scalars_as_yaml_1_1_does() {
    let document = load(
        "schema: ctrlrun.policy/v5\nactions:\n  a:\n    rules:\n      - when: {flag_eq: yes, mode_eq: off, n_eq: n}\n        decision: allow\n      - when: {octal_eq: 017, big_eq: 1_000, time_eq: 1:30, hex_eq: 0x1F, modern_eq: 0o17}\n        decision: approve\n",
    );
    assert_eq!(document.schema, Schema::Ctrlrun(5));
    assert_eq!(
        decide(&document, "a", json!({"flag": true, "mode": false, "n": "n"})),
        ("allow".into(), "rule[0]".into())
    );
    assert_eq!(decide(&document, "a", json!({"flag": "yes", "mode": false, "n": "n"})).1, "no_matching_rule");
    let yaml_1_1 = json!({"flag": 0, "octal": 15, "big": 1000, "time": 90, "hex": 31, "modern": "0o17"});
    assert_eq!(decide(&document, "a", yaml_1_1), ("approve".into(), "rule[1]".into()));
    let yaml_1_2 = json!({"flag": 0, "octal": 17, "big": "1_000", "time": "1:30", "hex": 31, "modern": 15});
    assert_eq!(decide(&document, "a", yaml_1_2).1, "no_matching_rule");
}

#[test]
fn alias_bombs_are_refused_and_anchors_are_refused_in_warden_v1() {
    let laughs = "schema: ctrlrun.policy/v2\n\
        a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n\
        b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n\
        c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n\
        d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n\
        e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n\
        f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n\
        g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]\n\
        h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g, *g]\n\
        i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h, *h]\n\
        actions: {}\n";
    let error = load_str(laughs, "laughs.yaml").err().unwrap_or_else(|| panic!("a billion laughs loaded"));
    assert!(error.message.contains("alias bomb") || error.message.contains("expand to more than"), "{error}");
    assert_eq!(error.path, "(document)");
    check(&[
        refusal(
            "an anchor in warden/v1",
            "schema: warden/v1\nactions:\n  a: &shared {decision: allow}\n  b: *shared\n",
            "(document)",
            Some(3),
            "anchors and aliases",
        ),
        refusal(
            "a recursive alias",
            "schema: ctrlrun.policy/v2\nx: &a [*a]\nactions: {}\n",
            "(document)",
            Some(2),
            "recursive alias",
        ),
        refusal(
            "an anchor defined twice",
            "schema: ctrlrun.policy/v2\nactions:\n  a: &x {decision: allow}\n  b: &x {decision: deny}\n",
            "(document)",
            Some(4),
            "duplicate anchor 'x'",
        ),
    ]);
    let shared = load("schema: ctrlrun.policy/v2\nactions:\n  a: &shared {decision: allow}\n  b: *shared\n");
    assert_eq!(decide(&shared, "b", json!({})), ("allow".into(), "decision".into()));
}

/// `pay` with one rule, `when: {<condition>}` → allow.
fn one_condition(schema: &str, condition: &str) -> String {
    format!("schema: {schema}\nactions:\n  pay:\n    rules:\n      - when: {{{condition}}}\n        decision: allow\n")
}

/// A number written exactly as given.
fn number(text: &str) -> Value {
    Value::Number(text.parse().expect("a JSON number"))
}

#[test]
fn a_warden_v1_rule_takes_float_operands_in_their_canonical_reading_and_compares_by_value() {
    let document = load(&one_condition("warden/v1", "amount_lte: 10.5, fee_in: [0.25, 1.0], rate_eq: 2.50"));
    let when = &document.actions["pay"].rules[0].when;
    let operands: Vec<String> = when.iter().map(|c| c.operand.to_string()).collect();
    assert_eq!(operands, ["10.5", "[0.25,1]", "2.5"], "10.5 as written, 1.0 as the integer 1, 2.50 as 2.5");
    let decided = |amount: &str, fee: &str, rate: &str| {
        decide(&document, "pay", json!({"amount": number(amount), "fee": number(fee), "rate": number(rate)})).1
    };
    assert_eq!(decided("10.5", "0.25", "2.5"), "rule[0]");
    assert_eq!(decided("10", "1", "2.5"), "rule[0]", "the integer 1 is in [0.25, 1.0]");
    assert_eq!(decided("-3", "1.0", "2.50"), "rule[0]");
    assert_eq!(decided("10.500000000000002", "0.25", "2.5"), "no_matching_rule", "one double past the bound");
    assert_eq!(decided("11", "0.25", "2.5"), "no_matching_rule");
    assert_eq!(decided("10.5", "0.5", "2.5"), "no_matching_rule");
    assert_eq!(decided("10.5", "0.25", "2.4999999999999996"), "no_matching_rule");
    // Floats compare with integer bounds too, and an integer keeps every digit.
    let big = load(&one_condition("warden/v1", "n_gte: 9007199254740993"));
    assert_eq!(decide(&big, "pay", json!({"n": number("9007199254740993")})).1, "rule[0]");
    assert_eq!(decide(&big, "pay", json!({"n": number("9007199254740992.0")})).1, "no_matching_rule");
    let integer = load(&one_condition("warden/v1", "amount_lte: 10"));
    assert_eq!(decide(&integer, "pay", json!({"amount": number("10.0")})).1, "rule[0]");
    assert_eq!(decide(&integer, "pay", json!({"amount": number("10.000000000000002")})).1, "no_matching_rule");
}

#[test]
fn a_float_operand_is_hashed_as_its_canonical_reading() {
    let hash = |condition: &str| load(&one_condition("warden/v1", condition)).policy_hash;
    assert_eq!(hash("amount_lte: 10.5"), hash("amount_lte: 10.50"));
    assert_eq!(hash("amount_lte: 10.0"), hash("amount_lte: 10"), "10.0 is the number 10");
    assert_eq!(hash("amount_lte: 1.0e+3"), hash("amount_lte: 1000"));
    assert_ne!(hash("amount_lte: 10.5"), hash("amount_lte: 10.6"));
    assert_ne!(hash("amount_lte: 10.5"), hash("amount_eq: 10.5"));
    let document = load(&one_condition("warden/v1", "amount_lte: 10.50"));
    let canonical = String::from_utf8(document.canonical_policy).expect("UTF-8");
    assert!(canonical.contains(r#""when":{"amount_lte":10.5}"#), "{canonical}");
    // A document without floats keeps the hash it always had.
    assert_eq!(hash("amount_lte: 10"), load(&one_condition("warden/v1", "amount_lte: 10")).policy_hash,);
}

#[test]
fn the_schema_decides_which_numbers_an_action_may_hold() {
    use warden::canonical::Floats;
    assert_eq!(Schema::WardenV1.floats(), Floats::Rfc8785);
    for version in 1..=8 {
        assert_eq!(Schema::Ctrlrun(version).floats(), Floats::Refused, "v{version}");
    }
}

#[test]
fn conditions_are_checked_at_load() {
    check(&[
        refusal(
            "a reserved subject",
            "schema: warden/v1\nactions:\n  a:\n    rules:\n      - when: {user_eq: alice}\n        decision: allow\n",
            "actions.a.rules[0].when.user_eq",
            Some(5),
            "names the action field 'user'",
        ),
        refusal(
            "the environment as a subject",
            "schema: ctrlrun.policy/v2\nactions:\n  a.b:\n    rules:\n      - when: {environment_eq: prod}\n        decision: allow\n",
            "actions.a.b.rules[0].when.environment_eq",
            Some(5),
            "not an argument",
        ),
        refusal(
            "ctrlrun's data-label subject",
            "schema: ctrlrun.policy/v4\nactions:\n  a:\n    rules:\n      - when: {data_scope_in: [phi]}\n        decision: approve\n",
            "actions.a.rules[0].when.data_scope_in",
            Some(5),
            "data labels are not supported",
        ),
        refusal(
            "an unknown operator",
            "schema: warden/v1\nactions:\n  a:\n    rules:\n      - when: {amount_between: [1, 2]}\n        decision: allow\n",
            "actions.a.rules[0].when.amount_between",
            Some(5),
            "must be '<argument>_<op>'",
        ),
        refusal(
            "an operator with no argument",
            "schema: warden/v1\nactions:\n  a:\n    rules:\n      - when: {_eq: 1}\n        decision: allow\n",
            "actions.a.rules[0].when._eq",
            Some(5),
            "must be '<argument>_<op>'",
        ),
        refusal(
            "an in operand that is not a list",
            "schema: warden/v1\nactions:\n  a:\n    rules:\n      - when: {role_in: admin}\n        decision: allow\n",
            "actions.a.rules[0].when.role_in",
            Some(5),
            "'_in' needs a list operand",
        ),
        refusal(
            "a nested list in an equality operand",
            "schema: ctrlrun.policy/v2\nactions:\n  a:\n    rules:\n      - when: {tags_eq: [[a]]}\n        decision: allow\n",
            "actions.a.rules[0].when.tags_eq[0]",
            Some(5),
            "write it flat",
        ),
        refusal(
            "an empty when",
            "schema: warden/v1\nactions:\n  a:\n    rules:\n      - when: {}\n        decision: allow\n",
            "actions.a.rules[0].when",
            Some(5),
            "'when' must be a non-empty mapping of conditions, got an empty mapping; leave 'when' out",
        ),
        refusal(
            "a null when",
            "schema: warden/v1\nactions:\n  a:\n    rules:\n      - when:\n        decision: allow\n",
            "actions.a.rules[0].when",
            Some(5),
            "non-empty mapping of conditions, got null;",
        ),
        refusal(
            "a when that is a list",
            "schema: warden/v1\nactions:\n  a:\n    rules:\n      - when: [x_eq]\n        decision: allow\n",
            "actions.a.rules[0].when",
            Some(5),
            "non-empty mapping of conditions, got a list;",
        ),
        refusal(
            "a timestamp equality operand (a ctrlrun document: warden/v1 refuses an unquoted date before this)",
            "schema: ctrlrun.policy/v2\nactions:\n  a:\n    rules:\n      - when: {day_eq: 2026-11-01}\n        decision: allow\n",
            "actions.a.rules[0].when.day_eq",
            Some(5),
            "condition 'day_eq': the timestamp 2026-11-01 is not an allowed operand type; quote it",
        ),
        refusal(
            "a timestamp in an in list",
            "schema: ctrlrun.policy/v2\nactions:\n  a:\n    rules:\n      - when: {day_in: [\"2026-11-01\", 2026-11-02]}\n        decision: allow\n",
            "actions.a.rules[0].when.day_in[1]",
            Some(5),
            "condition 'day_in': the timestamp 2026-11-02 is not an allowed operand type; quote it",
        ),
        refusal(
            "a rule with no decision",
            "schema: warden/v1\nactions:\n  a:\n    rules:\n      - when: {x_eq: 1}\n",
            "actions.a.rules[0]",
            Some(5),
            "must have a 'decision'",
        ),
        refusal(
            "a question mark that YAML 1.1 reads as a key",
            "schema: ctrlrun.policy/v5\nactions:\n  a:\n    rules:\n      - when: {env_in: [?dev, staging]}\n        decision: allow\n",
            "actions.a.rules[0].when.env_in[0]",
            Some(5),
            "begins with '?'",
        ),
    ]);
}

#[test]
fn entries_need_exactly_one_of_decision_and_non_empty_rules() {
    check(&[
        refusal(
            "both",
            "schema: warden/v1\nactions:\n  a: {decision: allow, rules: [{decision: deny}]}\n",
            "actions.a",
            Some(3),
            "exactly one of 'decision' or 'rules'",
        ),
        refusal(
            "neither",
            "schema: warden/v1\nactions:\n  a: {effect: 'x:{id}'}\n",
            "actions.a",
            Some(3),
            "exactly one of",
        ),
        refusal(
            "empty rules",
            "schema: warden/v1\nactions:\n  a:\n    rules: []\n",
            "actions.a.rules",
            Some(4),
            "non-empty list, got an empty list",
        ),
        refusal(
            "rules that are a mapping",
            "schema: warden/v1\nactions:\n  a:\n    rules: {decision: allow}\n",
            "actions.a.rules",
            Some(4),
            "non-empty list",
        ),
        refusal(
            "an unknown decision",
            "schema: warden/v1\nactions:\n  a: {decision: maybe}\n",
            "actions.a.decision",
            Some(3),
            "unknown decision 'maybe'",
        ),
        refusal(
            "an entry that is a string",
            "schema: warden/v1\nactions:\n  a: allow\n",
            "actions.a",
            Some(3),
            "must be a mapping",
        ),
        refusal(
            "actions that are a list",
            "schema: warden/v1\nactions: [a]\n",
            "actions",
            Some(2),
            "mapping of action name to entry",
        ),
        refusal(
            "an empty action name",
            "schema: warden/v1\nactions:\n  '': {decision: allow}\n",
            "actions",
            Some(3),
            "non-empty",
        ),
    ]);
}

#[test]
fn templates_leases_and_top_level_values_are_validated() {
    check(&[
        refusal(
            "a malformed effect template",
            "schema: warden/v1\nactions:\n  a: {decision: allow, effect: 'refund:{{id}}'}\n",
            "actions.a.effect",
            Some(3),
            "not a valid template",
        ),
        refusal(
            "adjacent placeholders in warden/v1",
            "schema: warden/v1\nactions:\n  a: {decision: allow, effect: 'x:{a}{b}'}\n",
            "actions.a.effect",
            Some(3),
            "'effect'",
        ),
        refusal(
            "an effect that is null in warden/v1",
            "schema: warden/v1\nactions:\n  a: {decision: allow, effect: ~}\n",
            "actions.a.effect",
            Some(3),
            "must be a template string",
        ),
        refusal("a bad duration", "schema: warden/v1\nactions:\n  a: {decision: allow, lease: 15m}\n", "actions.a.lease", Some(3), "ISO 8601"),
        refusal("a zero duration", "schema: warden/v1\nactions:\n  a: {decision: allow, lease: PT0S}\n", "actions.a.lease", Some(3), "longer than zero"),
        refusal("a numeric lease", "schema: warden/v1\nactions:\n  a: {decision: allow, lease: 900}\n", "actions.a.lease", Some(3), "ISO 8601 duration"),
        refusal("an unknown mode", "schema: warden/v1\nmode: audit\nactions: {}\n", "mode", Some(2), "exactly 'enforce' or 'observe'"),
        refusal("a blank environment", "schema: warden/v1\nenvironment: '  '\nactions: {}\n", "environment", Some(2), "non-empty string"),
        refusal("a numeric version", "schema: warden/v1\nversion: 3\nactions: {}\n", "version", Some(2), "non-empty string, got the integer 3"),
        refusal("a string for a boolean", "schema: warden/v1\nallow_insecure_http: 'false'\n", "allow_insecure_http", Some(2), "true or false"),
        refusal("authority that is a list", "schema: warden/v1\nauthority: []\n", "authority", Some(2), "must be a mapping"),
        refusal("sources that are a mapping", "schema: warden/v1\nsources: {a: 1}\n", "sources", Some(2), "must be a list"),
        refusal(
            "an explicit integer tag",
            "schema: warden/v1\nactions:\n  a: {decision: allow, max_attempts: !!int '3'}\n",
            "actions.a.max_attempts",
            Some(3),
            "explicit YAML tags are not supported",
        ),
        refusal(
            "a binary value",
            "schema: ctrlrun.policy/v2\nactions:\n  a:\n    rules:\n      - when: {x_eq: !!binary aGVsbG8=}\n        decision: allow\n",
            "actions.a.rules[0].when.x_eq",
            Some(5),
            "explicit YAML tags are not supported",
        ),
    ]);
}

#[test]
fn schemas_are_never_assumed_and_unknown_schemas_are_refused() {
    check(&[
        refusal("a missing schema", "actions:\n  a.b: {decision: allow}\n", "top level", Some(1), "missing 'schema'"),
        refusal(
            "an unknown schema",
            "schema: warden/v2\nactions: {}\n",
            "schema",
            Some(1),
            "unknown schema 'warden/v2'",
        ),
        refusal(
            "a far-future ctrlrun schema",
            "schema: ctrlrun.policy/v9\nactions: {}\n",
            "schema",
            Some(1),
            "unknown schema",
        ),
        refusal("a schema that is a list", "schema: [warden/v1]\nactions: {}\n", "schema", Some(1), "must be a string"),
        refusal(
            "a list document",
            "- schema: warden/v1\n",
            "top level",
            Some(1),
            "must be a mapping with 'schema' and 'actions' keys, got a list",
        ),
        refusal("a scalar document", "just some text\n", "top level", Some(1), "got a scalar"),
        refusal("an empty document", "", "top level", None, "the document is empty"),
        refusal("a comment-only document", "# nothing here\n", "top level", None, "the document is empty"),
        refusal(
            "a ctrlrun document with no actions",
            "schema: ctrlrun.policy/v2\n",
            "top level",
            Some(1),
            "missing 'actions'",
        ),
    ]);
}

#[test]
fn ctrlrun_features_warden_does_not_implement_are_refused_by_name() {
    check(&[
        refusal(
            "a control registry",
            "schema: ctrlrun.policy/v4\ncontrols:\n  pci: {title: Card data}\nactions: {}\n",
            "controls",
            Some(2),
            "control registry",
        ),
        refusal(
            "data labels",
            "schema: ctrlrun.policy/v4\nactions:\n  a: {decision: allow, data: {card: pci}}\n",
            "actions.a.data",
            Some(3),
            "data labels",
        ),
        refusal(
            "an unknown MCP option",
            "schema: ctrlrun.policy/v2\nactions:\n  a: {decision: allow, mcp: {retry: true}}\n",
            "actions.a.mcp.retry",
            Some(3),
            "unknown key 'retry'",
        ),
        refusal(
            "an inline authority section",
            "schema: ctrlrun.policy/v3\nauthority:\n  grants: []\nactions: {}\n",
            "authority",
            Some(2),
            "'authority' section in a ctrlrun document is not supported",
        ),
        refusal(
            "M-of-N approvals",
            "schema: ctrlrun.policy/v5\nactions:\n  a: {decision: approve, approvals_required: 2}\n",
            "actions.a.approvals_required",
            Some(3),
            "M-of-N approvals",
        ),
        refusal(
            "the policy-change action",
            "schema: ctrlrun.policy/v5\nactions:\n  ctrlrun.policy.change: {decision: approve}\n",
            "actions.ctrlrun.policy.change",
            Some(3),
            "policy-change flow",
        ),
        refusal(
            "an effect key under ctrlrun's policy prefix",
            "schema: ctrlrun.policy/v2\nactions:\n  a.b: {decision: allow, effect: 'policy:{y}'}\n",
            "actions.a.b.effect",
            Some(3),
            "may not begin 'policy:'",
        ),
        refusal(
            "an effect template in a v1 document",
            "schema: ctrlrun.policy/v1\nactions:\n  a.b: {decision: allow, effect: 'x:{y}'}\n",
            "actions.a.b.effect",
            Some(3),
            "needs 'schema: ctrlrun.policy/v2'",
        ),
        refusal(
            "an environment in a v2 document",
            "schema: ctrlrun.policy/v2\nenvironment: prod\nactions: {}\n",
            "environment",
            Some(2),
            "needs 'schema: ctrlrun.policy/v3'",
        ),
        refusal(
            "an attempt ceiling in a v4 document",
            "schema: ctrlrun.policy/v4\nactions:\n  a: {decision: allow, max_attempts: 3}\n",
            "actions.a.max_attempts",
            Some(3),
            "needs 'schema: ctrlrun.policy/v5'",
        ),
    ]);
    // The no-op spellings of those features change nothing, so they load.
    let document = load(
        "schema: ctrlrun.policy/v5\ncontrols: {}\nauthority: ~\nactions:\n  a: {decision: allow, mcp: {not_executed_on_error: false}, data: {}, controls: [], effect: ~}\n",
    );
    assert!(document.authority.is_none());
    assert!(document.actions.get("a").is_some_and(|entry| entry.effect.is_none()));
}

#[test]
fn ctrlrun_v6_to_v8_documents_load_with_the_gateway_keys_and_refuse_the_rest_by_name() {
    let digest = format!("sha256:{}", "ab".repeat(32));
    for schema in ["ctrlrun.policy/v6", "ctrlrun.policy/v7", "ctrlrun.policy/v8"] {
        let document = load(&format!(
            "schema: {schema}\nactions:\n  mcp.acme.pay:\n    effect: 'pay:{{id}}'\n    approvals_required: 1\n    mcp: {{not_executed_on_error: true}}\n    decision: approve\n"
        ));
        assert_eq!(document.schema.name(), schema);
        let entry = document.actions.get("mcp.acme.pay").unwrap_or_else(|| panic!("{schema}: no entry"));
        assert!(entry.not_executed_on_error && entry.upstream.is_none(), "{schema}");
        assert_eq!(decide(&document, "mcp.acme.pay", json!({"id": "x"})), ("approve".into(), "decision".into()));
    }
    let document = load(&format!(
        "schema: ctrlrun.policy/v8\nactions:\n  mcp.acme.read:\n    upstream: {{tool_schema_sha256: '{digest}', tls_cert_sha256: '{digest}'}}\n    decision: allow\n  mcp.acme.list:\n    upstream: ~\n    decision: allow\n"
    ));
    let pins = document.actions.get("mcp.acme.read").and_then(|entry| entry.upstream.clone()).unwrap_or_default();
    assert_eq!(pins.tool_schema_sha256.as_deref(), Some(digest.as_str()));
    assert_eq!(pins.tls_cert_sha256, vec![digest.clone()], "ctrlrun's single string is a list of one");
    assert!(document.actions.get("mcp.acme.list").is_some_and(|entry| entry.upstream.is_none()));
    check(&[
        refusal(
            "upstream before v8",
            "schema: ctrlrun.policy/v7\nactions:\n  mcp.a.b:\n    decision: allow\n    upstream: {}\n",
            "actions.mcp.a.b.upstream",
            Some(5),
            "needs 'schema: ctrlrun.policy/v8'",
        ),
        refusal(
            "an unknown upstream key in v8",
            "schema: ctrlrun.policy/v8\nactions:\n  mcp.a.b:\n    decision: allow\n    upstream:\n      tool_schema: x\n",
            "actions.mcp.a.b.upstream.tool_schema",
            Some(6),
            "unknown key 'tool_schema'; allowed here: tls_cert_file, tls_cert_sha256, tool_schema_sha256",
        ),
        refusal(
            "M-of-N approvals in v6",
            "schema: ctrlrun.policy/v6\nactions:\n  a:\n    decision: approve\n    approvals_required: 3\n",
            "actions.a.approvals_required",
            Some(5),
            "'approvals_required' is the integer 3, and M-of-N approvals (ctrlrun.policy/v6) are not implemented",
        ),
        refusal(
            "approvals_required that is not an integer",
            "schema: ctrlrun.policy/v8\nactions:\n  a:\n    decision: approve\n    approvals_required: true\n",
            "actions.a.approvals_required",
            Some(5),
            "remove the key for one approval",
        ),
        refusal(
            "the policy-change action in v8",
            "schema: ctrlrun.policy/v8\nactions:\n  ctrlrun.policy.change: {decision: approve}\n",
            "actions.ctrlrun.policy.change",
            Some(3),
            "Warden does not implement; remove the entry",
        ),
        refusal(
            "grants with tasks in v7",
            "schema: ctrlrun.policy/v7\nauthority:\n  grants: []\nactions: {}\n",
            "authority",
            Some(2),
            "declare the grants (their 'tasks' and 'budgets' included) in a 'warden/v1' document",
        ),
        refusal(
            "an approver role in v6",
            "schema: ctrlrun.policy/v6\ncontrols:\n  pci: {title: Card data, approver_role: finance}\nactions: {}\n",
            "controls",
            Some(2),
            "control registry",
        ),
    ]);
}

#[test]
fn malformed_yaml_and_forbidden_characters_are_refused_with_a_line() {
    check(&[
        refusal(
            "a syntax error",
            "schema: warden/v1\nactions:\n  a: {decision: allow\n",
            "(document)",
            None,
            "not valid YAML",
        ),
        refusal(
            "two documents",
            "schema: warden/v1\nactions: {}\n---\nschema: warden/v1\n",
            "(document)",
            Some(3),
            "a second one starts here",
        ),
        refusal("a control character", "schema: warden/v1\nactions: {}\n\u{7}\n", "(document)", Some(3), "U+0007"),
        refusal(
            "a raw line separator",
            "schema: warden/v1\nversion: \"a\u{2028}b\"\n",
            "(document)",
            Some(2),
            "U+2028",
        ),
        refusal(
            "a merge key",
            "schema: ctrlrun.policy/v2\nactions:\n  a: {<<: {decision: allow}}\n",
            "actions.a",
            Some(3),
            "merge keys",
        ),
    ]);
}

#[test]
fn json_is_yaml_and_loads() {
    let document = load(
        r#"{"schema": "warden/v1", "mode": "observe", "environment": "staging",
            "actions": {"stripe.refund": {"effect": "refund:{payment_id}", "rules": [{"when": {"amount_lte": 50000}, "decision": "allow"}, {"decision": "approve"}]}},
            "authority": {"grants": []}, "sources": [{"id": "status", "base_url": "https://status.example.com", "endpoints": [{"id": "now", "path": "/now", "fields": {"state": "/state"}}]}], "allow_insecure_http": false}"#,
    );
    assert_eq!(document.schema, Schema::WardenV1);
    assert_eq!(document.mode, Mode::Observe);
    assert_eq!(document.environment.as_deref(), Some("staging"));
    assert_eq!(document.allow_insecure_http, Some(false));
    assert_eq!(document.authority, Some(json!({"grants": []})));
    assert_eq!(
        document.sources,
        Some(
            json!([{"id": "status", "base_url": "https://status.example.com", "endpoints": [{"id": "now", "path": "/now", "fields": {"state": "/state"}}]}])
        )
    );
    assert_eq!(document.sources_config.get("status").map(|s| s.origin.as_str()), Some("https://status.example.com"));
    assert_eq!(decide(&document, "stripe.refund", json!({"amount": 50001})), ("approve".into(), "rule[1]".into()));
}

#[test]
fn a_full_warden_document_loads_with_its_parsed_fields() {
    let document = load(
        "schema: warden/v1\nenvironment: production\nmode: enforce\nversion: \"2026-11 r1\"\nactions:\n  stripe.refund:\n    description: Refund a charge\n    effect: \"refund:{payment_id}\"\n    resource: \"charge:{payment_id}\"\n    max_attempts: 3\n    lease: PT1H30M\n    rules:\n      - when: { amount_gte: 0, amount_lte: 50000 }\n        decision: allow\n      - decision: deny\n",
    );
    let entry = document.actions.get("stripe.refund").unwrap_or_else(|| panic!("the entry is missing"));
    assert_eq!(document.version.as_deref(), Some("2026-11 r1"));
    assert_eq!(entry.max_attempts, Some(3));
    assert_eq!(entry.lease, Some(5_400_000_000));
    assert_eq!(entry.description.as_deref(), Some("Refund a charge"));
    assert_eq!(entry.effect.as_ref().map(warden::Template::source), Some("refund:{payment_id}"));
    assert_eq!(entry.effect.as_ref().map(warden::Template::mode), Some(warden::TemplateMode::Escaped));
    assert_eq!(entry.rules.len(), 2);
    let first = entry.rules.first().unwrap_or_else(|| panic!("no rules"));
    let keys: Vec<&str> = first.when.iter().map(|c| c.key.as_str()).collect();
    assert_eq!(keys, ["amount_gte", "amount_lte"], "conditions keep document order");
    assert!(document.warnings.is_empty(), "{:?}", document.warnings);
    let ctrlrun = load("schema: ctrlrun.policy/v2\nactions:\n  a: {decision: allow, effect: 'x:{a}{b}'}\n");
    assert_eq!(
        ctrlrun.actions.get("a").and_then(|e| e.effect.as_ref()).map(warden::Template::mode),
        Some(warden::TemplateMode::Raw)
    );
}

#[test]
fn write_sounding_actions_without_an_effect_template_load_with_a_warning() {
    let document = load(
        "schema: warden/v1\nactions:\n  stripe.refund: {decision: approve}\n  iam.grant_admin: {decision: allow}\n  k8s.delete_namespace: {decision: allow}\n  email.send: {decision: allow, effect: 'email:{id}'}\n  audit.log.delete: {decision: deny}\n  customer.read: {decision: allow}\n",
    );
    let warned: Vec<&str> = ["stripe.refund", "iam.grant_admin", "k8s.delete_namespace"]
        .into_iter()
        .filter(|name| document.warnings.iter().any(|w| w.starts_with(&format!("actions.{name}:"))))
        .collect();
    assert_eq!(warned.len(), 3, "{:?}", document.warnings);
    assert_eq!(
        document.warnings.len(),
        3,
        "a denied action, a read and a templated send are not warned: {:?}",
        document.warnings
    );
}

#[test]
fn errors_display_origin_line_path_and_message() {
    let error = load_str("schema: warden/v1\nactions:\n  a: {decision: maybe}\n", "conf/warden.yaml")
        .err()
        .unwrap_or_else(|| panic!("loaded"));
    assert_eq!(
        error.to_string(),
        "conf/warden.yaml:3: actions.a.decision: unknown decision 'maybe', expected one of allow, approve, deny"
    );
    let no_line = DocumentError { origin: "x".into(), path: "p".into(), line: None, message: "m".into() };
    assert_eq!(no_line.to_string(), "x: p: m");
}

#[test]
fn files_are_read_with_their_path_as_origin_and_bounded() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let missing = dir.path().join("absent.yaml");
    let error = load_file(&missing).err().unwrap_or_else(|| panic!("a missing file loaded"));
    assert!(error.to_string().starts_with(&missing.display().to_string()), "{error}");
    assert!(error.message.contains("could not be read"), "{error}");

    let good = dir.path().join("warden.yaml");
    std::fs::write(&good, "schema: warden/v1\nactions:\n  a: {decision: allow}\n").unwrap_or_else(|e| panic!("{e}"));
    let document = load_file(&good).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(decide(&document, "a", json!({})).0, "allow");

    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, "schema: warden/v1\nactions:\n  a: {decision: deny}\n  b: {decision: allow\n")
        .unwrap_or_else(|e| panic!("{e}"));
    let error = load_file(&bad).err().unwrap_or_else(|| panic!("loaded"));
    assert_eq!(error.origin, bad.display().to_string());

    let latin1 = dir.path().join("latin1.yaml");
    std::fs::write(&latin1, b"schema: warden/v1\nversion: caf\xe9\n").unwrap_or_else(|e| panic!("{e}"));
    let error = load_file(&latin1).err().unwrap_or_else(|| panic!("loaded"));
    assert!(error.message.contains("not valid UTF-8") && error.line == Some(2), "{error}");

    let huge = dir.path().join("huge.yaml");
    let mut text = String::from("schema: warden/v1\nactions: {}\n");
    text.push_str(&"# padding padding padding padding padding padding padding padding\n".repeat(70_000));
    std::fs::write(&huge, &text).unwrap_or_else(|e| panic!("{e}"));
    let error = load_file(&huge).err().unwrap_or_else(|| panic!("a document over the size cap loaded"));
    assert!(error.message.contains("larger than"), "{error}");
    assert!(load_str(&text, "huge").is_err(), "the cap applies to strings too");
}

#[test]
fn missing_and_mistyped_arguments_make_a_condition_false_with_a_warning() {
    let document = load(
        "schema: warden/v1\nactions:\n  a:\n    rules:\n      - when: {amount_lte: 100, role_eq: admin}\n        decision: allow\n      - when: {role_eq: admin}\n        decision: approve\n",
    );
    let arguments: Map<String, Value> =
        serde_json::from_value(json!({"amount": "50", "role": "admin"})).unwrap_or_default();
    let evaluation = evaluate(&document, "a", &arguments);
    assert_eq!(evaluation.ruling.reason, "rule[1]");
    assert_eq!(evaluation.warnings.len(), 1, "{:?}", evaluation.warnings);
    assert!(
        evaluation.warnings.iter().all(|w| w.contains("argument 'amount' is str, not a number")),
        "{:?}",
        evaluation.warnings
    );
    let evaluation = evaluate(&document, "a", &Map::new());
    assert_eq!(evaluation.ruling.reason, "no_matching_rule");
    assert_eq!(evaluation.warnings.len(), 2, "{:?}", evaluation.warnings);
    assert!(evaluation.warnings.iter().all(|w| w.contains("(it has: none)")), "{:?}", evaluation.warnings);
}
