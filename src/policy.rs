//! Deciding an action under a loaded document: ctrlrun's evaluator, with its reasons.
//!
//! An unlisted action is denied `unknown_action`; an entry with a plain decision gives it with
//! reason `decision`; otherwise the first rule whose conditions all hold gives `rule[N]`
//! (0-based), and no match is denied `no_matching_rule`. Conditions are checked in document
//! order and stop at the first that fails, as ctrlrun's `all()` does, so the warnings are the
//! ones ctrlrun would log: a missing argument, or a non-integer argument under an order
//! operator, makes a condition false and is reported, never silently skipped.
//!
//! Equality is type-strict and recursive: `true` never equals `1`, `1` never equals `"1"`, a
//! list equals a list of the same length whose items are equal in order, and a mapping equals a
//! mapping with the same keys and equal values. Integers compare exactly at any size.

use std::cmp::Ordering;

use serde_json::{Map, Number, Value};

use crate::canonical::is_integer;
use crate::decision::{Decision, Ruling};
use crate::document::{ActionEntry, Condition, Document, Op};

/// The reason for denying an action the document does not list.
pub const UNKNOWN_ACTION: &str = "unknown_action";
/// The reason for denying an action none of whose rules matched.
pub const NO_MATCHING_RULE: &str = "no_matching_rule";
/// The reason for an entry's plain `decision:` with no rules.
pub const BARE_DECISION: &str = "decision";

/// How many argument names a "missing argument" warning lists.
const LISTED_NAMES: usize = 20;
/// How many characters of one argument name a warning shows.
const NAME_CHARS: usize = 40;

/// The outcome of evaluating one action against the document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Evaluation {
    /// The decision and the reason (`decision`, `rule[N]`, `unknown_action`, `no_matching_rule`).
    pub ruling: Ruling,
    /// Conditions that were false because an argument was missing or had the wrong type.
    pub warnings: Vec<String>,
}

/// Decide `action_name` with these (canonical) arguments. Pure: no clock, no store.
pub fn evaluate(document: &Document, action_name: &str, arguments: &Map<String, Value>) -> Evaluation {
    match document.actions.get(action_name) {
        None => Evaluation { ruling: Ruling::new(Decision::Deny, UNKNOWN_ACTION), warnings: Vec::new() },
        Some(entry) => evaluate_entry(entry, action_name, arguments),
    }
}

fn evaluate_entry(entry: &ActionEntry, action_name: &str, arguments: &Map<String, Value>) -> Evaluation {
    let mut warnings = Vec::new();
    if let Some(decision) = entry.decision {
        return Evaluation { ruling: Ruling::new(decision, BARE_DECISION), warnings };
    }
    for (index, rule) in entry.rules.iter().enumerate() {
        if rule.when.iter().all(|condition| holds(condition, action_name, arguments, &mut warnings)) {
            return Evaluation { ruling: Ruling::new(rule.decision, &format!("rule[{index}]")), warnings };
        }
    }
    Evaluation { ruling: Ruling::new(Decision::Deny, NO_MATCHING_RULE), warnings }
}

/// The rule of `entry` that produced a ruling with `reason` (`rule[N]`), if any.
pub fn matched_rule<'e>(entry: &'e ActionEntry, reason: &str) -> Option<&'e crate::document::Rule> {
    let index: usize = reason.strip_prefix("rule[")?.strip_suffix(']')?.parse().ok()?;
    entry.rules.get(index)
}

pub(crate) fn holds(
    condition: &Condition,
    action_name: &str,
    arguments: &Map<String, Value>,
    warnings: &mut Vec<String>,
) -> bool {
    let Some(value) = arguments.get(&condition.subject) else {
        warnings.push(format!(
            "{action_name}: condition {} ignored: the action has no argument '{}' (it has: {})",
            condition.key,
            condition.subject,
            listed_names(arguments)
        ));
        return false;
    };
    match condition.op {
        Op::Eq => equal(value, &condition.operand),
        Op::Neq => !equal(value, &condition.operand),
        Op::In => condition.operand.as_array().is_some_and(|items| items.iter().any(|item| equal(value, item))),
        Op::Lt | Op::Lte | Op::Gt | Op::Gte => {
            let (Some(argument), Some(bound)) = (integer(value), integer(&condition.operand)) else {
                warnings.push(format!(
                    "{action_name}: condition {} ignored: argument '{}' is {}, not int",
                    condition.key,
                    condition.subject,
                    python_type(value)
                ));
                return false;
            };
            let order = compare_integers(argument, bound);
            match condition.op {
                Op::Lt => order == Ordering::Less,
                Op::Lte => order != Ordering::Greater,
                Op::Gt => order == Ordering::Greater,
                _ => order != Ordering::Less,
            }
        }
    }
}

/// ctrlrun's `_equal`: type-strict, recursive. Values of two different JSON kinds are never
/// equal (`true` is not `1`, `[1]` is not `1`): only the same-kind pairs below can be.
pub fn equal(value: &Value, operand: &Value) -> bool {
    match (value, operand) {
        (Value::Bool(a), Value::Bool(b)) => a == b,
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len() && a.iter().all(|(key, item)| b.get(key).is_some_and(|other| equal(item, other)))
        }
        (Value::Array(a), Value::Array(b)) => a.len() == b.len() && a.iter().zip(b).all(|(x, y)| equal(x, y)),
        (Value::Null, Value::Null) => true,
        (Value::String(a), Value::String(b)) => a == b,
        (Value::Number(a), Value::Number(b)) => numbers_equal(a, b),
        _ => false,
    }
}

// Exact float equality is Python's `==`, which this mirrors.
#[allow(clippy::float_cmp)]
fn numbers_equal(a: &Number, b: &Number) -> bool {
    if is_integer(a) && is_integer(b) {
        return compare_integers(a.as_str(), b.as_str()) == Ordering::Equal;
    }
    // Only reachable with float arguments, which an `Action` never carries; Python compares
    // `1.0 == 1` numerically, and so does this.
    matches!((a.as_f64(), b.as_f64()), (Some(x), Some(y)) if x == y)
}

/// The integer text of an `int` in Python's sense: a JSON number without fraction or exponent
/// (a boolean is not one).
fn integer(value: &Value) -> Option<&str> {
    match value {
        Value::Number(n) if is_integer(n) => Some(n.as_str()),
        _ => None,
    }
}

/// Compare two integers written in decimal, of any size.
pub(crate) fn compare_integers(a: &str, b: &str) -> Ordering {
    let (a_negative, a_digits) = magnitude(a);
    let (b_negative, b_digits) = magnitude(b);
    match (a_negative, b_negative) {
        (true, false) => Ordering::Less,
        (false, true) => Ordering::Greater,
        (negative, _) => {
            let order = a_digits.len().cmp(&b_digits.len()).then_with(|| a_digits.cmp(b_digits));
            if negative {
                order.reverse()
            } else {
                order
            }
        }
    }
}

/// (negative, digits without leading zeros); zero is `(false, "")`.
fn magnitude(text: &str) -> (bool, &str) {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let digits = digits.trim_start_matches('0');
    (negative && !digits.is_empty(), digits)
}

/// The Python type name ctrlrun's warning would print.
fn python_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "NoneType",
        Value::Bool(_) => "bool",
        Value::Number(n) if is_integer(n) => "int",
        Value::Number(_) => "float",
        Value::String(_) => "str",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    }
}

/// The argument names, sorted, bounded: they come from the agent.
fn listed_names(arguments: &Map<String, Value>) -> String {
    if arguments.is_empty() {
        return "none".to_owned();
    }
    let mut names: Vec<&String> = arguments.keys().collect();
    names.sort_unstable();
    let mut listed: Vec<String> = names
        .iter()
        .take(LISTED_NAMES)
        .map(|name| {
            if name.chars().count() > NAME_CHARS {
                let mut short: String = name.chars().take(NAME_CHARS).collect();
                short.push('…');
                short
            } else {
                (*name).clone()
            }
        })
        .collect();
    if names.len() > LISTED_NAMES {
        listed.push(format!("and {} more", names.len() - LISTED_NAMES));
    }
    listed.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn number(text: &str) -> Value {
        serde_json::from_str(text).unwrap_or(Value::Null)
    }

    fn condition(key: &str, op: Op, operand: Value) -> Condition {
        let subject = key.rsplit_once('_').map_or(key, |(subject, _)| subject);
        Condition { key: key.into(), subject: subject.into(), op, operand }
    }

    fn arguments(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            _ => Map::new(),
        }
    }

    /// Whether the condition holds for `amount`, and the warnings it left.
    fn check(op: Op, amount: Value, operand: Value) -> (bool, Vec<String>) {
        let mut warnings = Vec::new();
        let holds =
            holds(&condition("amount_x", op, operand), "pay", &arguments(json!({"amount": amount})), &mut warnings);
        (holds, warnings)
    }

    #[test]
    fn each_order_operator_holds_exactly_on_its_side_of_the_bound() {
        let table = [
            (Op::Lt, [true, false, false]),
            (Op::Lte, [true, true, false]),
            (Op::Gt, [false, false, true]),
            (Op::Gte, [false, true, true]),
        ];
        for (op, expected) in table {
            for (amount, holds) in [99, 100, 101].into_iter().zip(expected) {
                assert_eq!(check(op, json!(amount), json!(100)), (holds, Vec::new()), "{op:?} {amount}");
            }
        }
    }

    #[test]
    fn eq_neq_and_in_are_type_strict() {
        assert!(check(Op::Eq, json!("a"), json!("a")).0);
        assert!(!check(Op::Neq, json!("a"), json!("a")).0);
        assert!(check(Op::Neq, json!(1), json!("1")).0);
        assert!(check(Op::In, json!(2), json!([1, 2])).0);
        assert!(!check(Op::In, json!("2"), json!([1, 2])).0);
        assert!(!check(Op::In, json!(2), json!(2)).0);
    }

    #[test]
    fn a_non_integer_under_an_order_operator_is_false_and_named_by_its_python_type() {
        for (value, kind) in [
            (json!(null), "NoneType"),
            (json!(true), "bool"),
            (json!("5"), "str"),
            (json!([5]), "list"),
            (json!({"v": 5}), "dict"),
            (number("5.0"), "float"),
        ] {
            let (holds, warnings) = check(Op::Lte, value, json!(10));
            assert!(!holds, "{kind}");
            assert_eq!(warnings, [format!("pay: condition amount_x ignored: argument 'amount' is {kind}, not int")]);
        }
        assert_eq!(python_type(&json!(5)), "int");
    }

    #[test]
    fn a_missing_argument_is_false_and_the_warning_lists_the_names_there_are() {
        let mut warnings = Vec::new();
        let condition = condition("amount_lte", Op::Lte, json!(10));
        assert!(!holds(&condition, "pay", &arguments(json!({"b": 1, "a": 2})), &mut warnings));
        assert_eq!(warnings, ["pay: condition amount_lte ignored: the action has no argument 'amount' (it has: a, b)"]);
        warnings.clear();
        assert!(!holds(&condition, "pay", &Map::new(), &mut warnings));
        assert!(warnings[0].ends_with("(it has: none)"), "{warnings:?}");
    }

    #[test]
    fn the_warning_lists_twenty_names_of_up_to_forty_characters() {
        let names = |n: usize| -> Map<String, Value> { (0..n).map(|i| (format!("n{i:02}"), json!(i))).collect() };
        assert!(!listed_names(&names(20)).contains("more"));
        assert!(listed_names(&names(20)).ends_with("n19"));
        assert!(listed_names(&names(21)).ends_with("n19, and 1 more"), "{}", listed_names(&names(21)));
        let forty = "x".repeat(40);
        let long = arguments(json!({ forty.clone(): 1, "y".repeat(41): 2 }));
        assert_eq!(listed_names(&long), format!("{forty}, {forty_y}…", forty_y = "y".repeat(40)));
    }

    #[test]
    fn the_matched_rule_is_the_one_its_reason_names_and_no_other() {
        let yaml = "schema: warden/v1\nactions:\n  pay:\n    rules:\n      - when: {amount_gt: 100}\n        \
                    decision: deny\n      - decision: allow\n";
        let document = crate::document::load_str(yaml, "t.yaml").unwrap();
        let entry = &document.actions["pay"];
        let at = |reason: &str| matched_rule(entry, reason).map(std::ptr::from_ref);
        assert_eq!(at("rule[0]"), Some(std::ptr::from_ref(&entry.rules[0])));
        assert_eq!(at("rule[1]"), Some(std::ptr::from_ref(&entry.rules[1])));
        for reason in ["rule[2]", "rule[]", "rule[x]", "rule[0", "rule0]", NO_MATCHING_RULE, BARE_DECISION, ""] {
            assert_eq!(at(reason), None, "{reason:?}");
        }
    }

    #[test]
    fn numbers_compare_as_integers_when_both_are_and_numerically_otherwise() {
        assert!(equal(&number("1"), &number("1.0")));
        assert!(equal(&number("1.5"), &number("1.5")));
        assert!(!equal(&number("1.5"), &number("2.5")));
        assert!(!equal(&number("1"), &number("2")));
        assert!(equal(&number("-0"), &number("0")));
    }

    #[test]
    fn null_equals_only_null_and_strings_equal_only_the_same_text() {
        assert!(equal(&json!(null), &json!(null)));
        assert!(!equal(&json!(null), &json!("null")));
        assert!(equal(&json!("a"), &json!("a")));
        assert!(!equal(&json!("a"), &json!("b")));
        assert!(equal(&json!({}), &json!({})));
        assert!(!equal(&json!({"a": 1}), &json!({"a": 1, "b": 2})));
        assert!(!equal(&json!({"a": 1}), &json!({"b": 1})));
        assert!(!equal(&json!([1]), &json!([1, 1])));
        assert!(equal(&json!(false), &json!(false)));
        assert!(!equal(&json!(false), &json!(true)));
    }

    #[test]
    fn integers_compare_exactly_at_any_size() {
        assert_eq!(compare_integers("-1208925819614629174706176", "-1"), Ordering::Less);
        assert_eq!(compare_integers("18446744073709551616", "9223372036854775807"), Ordering::Greater);
        assert_eq!(compare_integers("-0", "0"), Ordering::Equal);
        assert_eq!(compare_integers("-5", "-40"), Ordering::Greater);
        assert_eq!(compare_integers("500000", "500000"), Ordering::Equal);
    }

    #[test]
    fn equality_is_type_strict_and_recursive() {
        assert!(!equal(&json!(true), &json!(1)));
        assert!(!equal(&json!(1), &json!("1")));
        assert!(!equal(&json!(null), &json!(false)));
        assert!(equal(&json!(["a", "b"]), &json!(["a", "b"])));
        assert!(!equal(&json!(["b", "a"]), &json!(["a", "b"])));
        assert!(!equal(&json!([1]), &json!(1)));
        assert!(equal(&json!({"a": [1, true]}), &json!({"a": [1, true]})));
        assert!(!equal(&json!({"a": [1, true]}), &json!({"a": [1, 1]})));
        assert!(equal(&number("1180591620717411303424"), &number("1180591620717411303424")));
    }
}
