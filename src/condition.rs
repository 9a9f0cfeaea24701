//! Conditions: the `<argument>_<op>: operand` tests a rule, an authority constraint and an
//! approval scope share, and what each one means for an action's arguments.
//!
//! `holds` decides one condition and reports, as ctrlrun's evaluator logs, a missing argument
//! or one an order operator cannot compare (the condition is then false, never skipped);
//! [`equal`] and [`compare_numbers`] are the equality and the order the operators use, and what
//! the authority's containment checks and an approval scope's bounds compare with. Rule
//! matching (which rule of an entry decides) stays in `policy`; reading a condition out of a
//! document is `document`'s (neither is linked here: this module names no module above it).
//!
//! Numbers compare by value, exactly: the value of a number is the decimal its canonical text
//! writes (`canonical::number_text`: an integer's digits at any size, a float's RFC 8785 text),
//! so no integer is ever rounded to a double and `10` equals `10.0` (both are written `10`,
//! and hash alike). Order operators compare integers only in a ctrlrun document (a float
//! argument is reported as ctrlrun reports it), and any two numbers in `warden/v1`
//! (`amount_lte: 10.5` holds for `10.5` and not for `10.500000000000002`).
//!
//! Equality is type-strict and recursive: `true` never equals `1`, `1` never equals `"1"`, a
//! list equals a list of the same length whose items are equal in order, and a mapping equals a
//! mapping with the same keys and equal values. Two numbers are equal when their values are, so
//! equality agrees with the order operators everywhere, and with the hash wherever a number has
//! one text: an integer written out (`1000000000000000000000`) and a float of the same value
//! (`1e21`, whose canonical text from 10^21 on is `1e+21`) are equal but hash differently.
//!
//! A leaf: it depends only on [`crate::canonical`] (number texts and the float dialects) and
//! `serde_json`, so `document`, `policy`, `authority` and `approval` can all use it without
//! depending on each other.

use std::cmp::Ordering;

use serde_json::{Map, Number, Value};

use crate::canonical::{is_integer, number_text, Floats};

/// How many argument names a "missing argument" warning lists.
const LISTED_NAMES: usize = 20;
/// How many characters of one argument name a warning shows.
const NAME_CHARS: usize = 40;

/// A condition's operator, from the suffix of its key (`amount_gte`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Equal (type-strict).
    Eq,
    /// Not equal.
    Neq,
    /// One of a list.
    In,
    /// Less than (integers; numbers in `warden/v1`).
    Lt,
    /// At most (integers; numbers in `warden/v1`).
    Lte,
    /// Greater than (integers; numbers in `warden/v1`).
    Gt,
    /// At least (integers; numbers in `warden/v1`).
    Gte,
}

impl Op {
    /// The operator as a condition key's suffix spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Eq => "eq",
            Op::Neq => "neq",
            Op::In => "in",
            Op::Lt => "lt",
            Op::Lte => "lte",
            Op::Gt => "gt",
            Op::Gte => "gte",
        }
    }

    /// `lt`, `lte`, `gt`, `gte`: the operators that order numbers.
    pub fn is_order(self) -> bool {
        matches!(self, Op::Lt | Op::Lte | Op::Gt | Op::Gte)
    }
}

/// One condition of a rule: an argument, an operator and an operand.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    /// The key as written, e.g. `amount_gte`.
    pub key: String,
    /// The argument it tests, e.g. `amount`.
    pub subject: String,
    /// The operator.
    pub op: Op,
    /// A number for the order ops (an integer in ctrlrun documents and authority constraints), a
    /// list for `in`, any JSON value otherwise; floats only in a `warden/v1` document's rules,
    /// held in their canonical reading (`10.50` as `10.5`, `10.0` as `10`).
    pub operand: Value,
}

/// Whether one condition holds for these arguments; `floats` says whether an order operator
/// compares floats (`warden/v1`) or integers only (ctrlrun).
pub(crate) fn holds(
    condition: &Condition,
    action_name: &str,
    arguments: &Map<String, Value>,
    floats: Floats,
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
            let Some(order) = order(value, &condition.operand, floats) else {
                warnings.push(format!(
                    "{action_name}: condition {} ignored: argument '{}' is {}, not {}",
                    condition.key,
                    condition.subject,
                    python_type(value),
                    match floats {
                        Floats::Refused => "int",
                        Floats::Rfc8785 => "a number",
                    }
                ));
                return false;
            };
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

fn numbers_equal(a: &Number, b: &Number) -> bool {
    compare_numbers(a, b) == Some(Ordering::Equal)
}

/// How an order operator sees `value` against its bound: two numbers (two integers where
/// `floats` refuses floats) compared by value, or `None` when it cannot compare them.
fn order(value: &Value, bound: &Value, floats: Floats) -> Option<Ordering> {
    let (Value::Number(a), Value::Number(b)) = (value, bound) else { return None };
    if floats == Floats::Refused && !(is_integer(a) && is_integer(b)) {
        return None;
    }
    compare_numbers(a, b)
}

/// Two numbers by value, exactly: the decimals their canonical texts write. `None` for a float
/// beyond the double range, which has no canonical text (no action carries one).
pub fn compare_numbers(a: &Number, b: &Number) -> Option<Ordering> {
    let a = Decimal::parse(&number_text(a, Floats::Rfc8785).ok()?)?;
    let b = Decimal::parse(&number_text(b, Floats::Rfc8785).ok()?)?;
    Some(a.cmp(&b))
}

/// A decimal number's exact value: its sign, its significant digits (no leading or trailing
/// zero; none for zero) and the power of ten of the last of them. `-1.250e3` is
/// (`true`, `"125"`, `1`).
#[derive(Debug, PartialEq, Eq)]
struct Decimal {
    negative: bool,
    digits: String,
    exponent: i64,
}

impl Decimal {
    /// JSON number text: `-`, digits, an optional fraction, an optional exponent.
    fn parse(text: &str) -> Option<Decimal> {
        let (negative, unsigned) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let (mantissa, exponent) = match unsigned.split_once(['e', 'E']) {
            Some((mantissa, exponent)) => (mantissa, exponent.parse::<i64>().ok()?),
            None => (unsigned, 0),
        };
        let (whole, fraction) = match mantissa.split_once('.') {
            Some((_, "")) => return None,
            Some(parts) => parts,
            None => (mantissa, ""),
        };
        if whole.is_empty() || !whole.bytes().chain(fraction.bytes()).all(|b| b.is_ascii_digit()) {
            return None;
        }
        let written = format!("{whole}{fraction}");
        let significant = written.trim_end_matches('0');
        let exponent = exponent
            .checked_sub(i64::try_from(fraction.len()).ok()?)?
            .checked_add(i64::try_from(written.len() - significant.len()).ok()?)?;
        let digits = significant.trim_start_matches('0');
        if digits.is_empty() {
            return Some(Decimal { negative: false, digits: String::new(), exponent: 0 });
        }
        Some(Decimal { negative, digits: digits.to_owned(), exponent })
    }

    /// -1, 0 or 1.
    fn sign(&self) -> i8 {
        match (self.digits.is_empty(), self.negative) {
            (true, _) => 0,
            (false, true) => -1,
            (false, false) => 1,
        }
    }

    /// The power of ten just above the leading digit: of two magnitudes, the one with the
    /// larger power is the larger.
    fn scale(&self) -> i64 {
        self.exponent.saturating_add(self.digits.len() as i64)
    }
}

impl Ord for Decimal {
    fn cmp(&self, other: &Decimal) -> Ordering {
        self.sign().cmp(&other.sign()).then_with(|| {
            // With the same leading power, digits compare as text: neither has a trailing zero.
            let magnitude = self.scale().cmp(&other.scale()).then_with(|| self.digits.cmp(&other.digits));
            if self.negative {
                magnitude.reverse()
            } else {
                magnitude
            }
        })
    }
}

impl PartialOrd for Decimal {
    fn partial_cmp(&self, other: &Decimal) -> Option<Ordering> {
        Some(self.cmp(other))
    }
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

    /// Whether the condition holds for `amount` in a ctrlrun document, and the warnings it left.
    fn check(op: Op, amount: Value, operand: Value) -> (bool, Vec<String>) {
        check_in(Floats::Refused, op, amount, operand)
    }

    /// Whether the condition holds for `amount` under `floats`, and the warnings it left.
    fn check_in(floats: Floats, op: Op, amount: Value, operand: Value) -> (bool, Vec<String>) {
        let mut warnings = Vec::new();
        let condition = condition("amount_x", op, operand);
        let holds = holds(&condition, "pay", &arguments(json!({"amount": amount})), floats, &mut warnings);
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
        assert!(!holds(&condition, "pay", &arguments(json!({"b": 1, "a": 2})), Floats::Rfc8785, &mut warnings));
        assert_eq!(warnings, ["pay: condition amount_lte ignored: the action has no argument 'amount' (it has: a, b)"]);
        warnings.clear();
        assert!(!holds(&condition, "pay", &Map::new(), Floats::Rfc8785, &mut warnings));
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

    /// `compare_numbers` over two JSON number texts.
    fn compared(a: &str, b: &str) -> Option<Ordering> {
        let number = |text: &str| serde_json::from_str::<Number>(text).expect("a JSON number");
        compare_numbers(&number(a), &number(b))
    }

    #[test]
    fn numbers_compare_by_the_value_their_canonical_text_writes() {
        use Ordering::{Equal, Greater, Less};
        let table = [
            // Integers, exactly at any size and sign.
            ("-1208925819614629174706176", "-1", Less),
            ("18446744073709551616", "9223372036854775807", Greater),
            ("-0", "0", Equal),
            ("-5", "-40", Greater),
            ("-40", "-5", Less),
            ("500000", "500000", Equal),
            ("7", "-7", Greater),
            ("-7", "7", Less),
            ("0", "-1", Greater),
            ("0", "1", Less),
            ("10", "9", Greater),
            ("100", "99", Greater),
            // One number, any spelling: what hashes alike compares equal.
            ("1", "1.0", Equal),
            ("10", "1e1", Equal),
            ("1000", "1E3", Equal),
            ("1.5", "1.50", Equal),
            ("1.5", "15e-1", Equal),
            ("-0.0", "0", Equal),
            ("0.1", "0.10000000000000000555", Equal),
            // Mixed, with no integer ever rounded to a double: 2^53 + 1 is not 2^53.
            ("9007199254740993", "9007199254740992.0", Greater),
            ("9007199254740992.0", "9007199254740993", Less),
            ("9007199254740992", "9007199254740993.0", Equal),
            // At and past the bound: the next double above 10.5, and fractions either side.
            ("10.5", "10.5", Equal),
            ("10.500000000000002", "10.5", Greater),
            ("10.499999999999998", "10.5", Less),
            ("10", "10.5", Less),
            ("11", "10.5", Greater),
            ("-10.5", "-10", Less),
            ("-10", "-10.5", Greater),
            ("-10.5", "-11", Greater),
            // Leading powers decide before digits: 1.25 < 1.3, 0.05 < 0.1, 9.9 < 10.
            ("1.25", "1.3", Less),
            ("1.3", "1.25", Greater),
            ("0.05", "0.1", Less),
            ("9.9", "10", Less),
            ("1e-7", "0.000001", Less),
            ("1.5e-7", "1e-7", Greater),
            ("-1.5e-7", "-1e-7", Less),
            // From 10^21 on a float's text has an exponent; its value is still the integer's.
            ("1e21", "1000000000000000000000", Equal),
            ("1e21", "999999999999999999999", Greater),
            ("1e21", "1000000000000000000001", Less),
            // The double nearest 1e23 is 99999999999999991611392; its text, and value here, 1e+23.
            ("1e23", "100000000000000000000000", Equal),
            ("1e23", "99999999999999991611392", Greater),
            ("5e-324", "0", Greater),
            ("-5e-324", "0", Less),
            (
                "1.7976931348623157e308",
                "179769313486231570000000000000000000000000000000000000000000000000000",
                Greater,
            ),
        ];
        for (a, b, order) in table {
            assert_eq!(compared(a, b), Some(order), "{a} against {b}");
        }
        // Beyond the double range there is no canonical text and so no comparison.
        assert_eq!(compared("1e400", "1"), None);
        assert_eq!(compared("1", "-1e400"), None);
    }

    #[test]
    fn decimal_parse_keeps_the_significant_digits_and_the_power_of_the_last() {
        let decimal =
            |negative: bool, digits: &str, exponent: i64| Decimal { negative, digits: digits.into(), exponent };
        let table = [
            ("0", decimal(false, "", 0)),
            ("-0", decimal(false, "", 0)),
            ("0.000", decimal(false, "", 0)),
            ("-0e5", decimal(false, "", 0)),
            ("7", decimal(false, "7", 0)),
            ("-7", decimal(true, "7", 0)),
            ("1000", decimal(false, "1", 3)),
            ("-1.250e3", decimal(true, "125", 1)),
            ("1.5e-7", decimal(false, "15", -8)),
            ("1e+21", decimal(false, "1", 21)),
            ("1E21", decimal(false, "1", 21)),
            ("0.001", decimal(false, "1", -3)),
            ("10.5", decimal(false, "105", -1)),
            ("120.0", decimal(false, "12", 1)),
        ];
        for (text, expected) in table {
            assert_eq!(Decimal::parse(text), Some(expected), "{text}");
        }
        for text in ["", "-", "1.", ".5", "1e", "1e+", "1ex", "x", "1.2.3", "1-2", "--1", "1e9999999999999999999"] {
            assert_eq!(Decimal::parse(text), None, "{text:?}");
        }
        assert_eq!(decimal(true, "5", 0).sign(), -1);
        assert_eq!(decimal(false, "5", 0).sign(), 1);
        assert_eq!(decimal(true, "", 0).sign(), 0);
        assert_eq!(decimal(false, "125", 1).scale(), 4);
        assert_eq!(decimal(false, "15", -8).scale(), -6);
        assert_eq!(decimal(false, "1", i64::MAX).scale(), i64::MAX);
        assert_eq!(decimal(false, "1", 0).partial_cmp(&decimal(false, "2", 0)), Some(Ordering::Less));
    }

    #[test]
    fn in_warden_v1_order_operators_compare_floats_and_integers_at_the_bound() {
        let number = |text: &str| Value::Number(text.parse().expect("a number"));
        // (operator, bound, argument, holds): each bound tried on it, one double past it, and
        // an integer on each side.
        let table = [
            (Op::Lte, "10.5", "10.5", true),
            (Op::Lte, "10.5", "10.500000000000002", false),
            (Op::Lte, "10.5", "10", true),
            (Op::Lte, "10.5", "11", false),
            (Op::Lt, "10.5", "10.5", false),
            (Op::Lt, "10.5", "10.499999999999998", true),
            (Op::Gte, "10.5", "10.5", true),
            (Op::Gte, "10.5", "10.499999999999998", false),
            (Op::Gt, "10.5", "10.5", false),
            (Op::Gt, "10.5", "10.500000000000002", true),
            (Op::Gt, "10.5", "11", true),
            (Op::Lte, "10", "10.0", true),
            (Op::Lte, "10", "10.000000000000002", false),
            (Op::Gte, "9007199254740993", "9007199254740992.0", false),
            (Op::Lte, "9007199254740992", "9007199254740993.0", true),
            (Op::Gt, "-0.5", "-0.49999999999999994", true),
            (Op::Lt, "0", "-5e-324", true),
        ];
        for (op, bound, argument, expected) in table {
            assert_eq!(
                check_in(Floats::Rfc8785, op, number(argument), number(bound)),
                (expected, Vec::new()),
                "{argument} {op:?} {bound}"
            );
        }
    }

    #[test]
    fn a_float_argument_under_an_order_operator_is_reported_in_a_ctrlrun_document_and_compared_in_warden_v1() {
        let half = Value::Number("10.5".parse().expect("a number"));
        let (holds, warnings) = check_in(Floats::Refused, Op::Lte, half.clone(), json!(100));
        assert!(!holds);
        assert_eq!(warnings, ["pay: condition amount_x ignored: argument 'amount' is float, not int"]);
        assert_eq!(check_in(Floats::Rfc8785, Op::Lte, half.clone(), json!(100)), (true, Vec::new()));
        // A float bound never reaches a ctrlrun evaluation (the loader refuses it); were one
        // handed in, the integer argument could not be compared with it either.
        assert!(!check_in(Floats::Refused, Op::Gte, json!(100), half.clone()).0);
        assert!(check_in(Floats::Rfc8785, Op::Gte, json!(100), half).0);
        let (holds, warnings) = check_in(Floats::Rfc8785, Op::Lte, json!("5"), json!(10));
        assert!(!holds);
        assert_eq!(warnings, ["pay: condition amount_x ignored: argument 'amount' is str, not a number"]);
        let beyond = Value::Number("1e400".parse().expect("a number"));
        let (holds, warnings) = check_in(Floats::Rfc8785, Op::Lte, beyond, json!(10));
        assert!(!holds);
        assert_eq!(warnings, ["pay: condition amount_x ignored: argument 'amount' is float, not a number"]);
    }

    #[test]
    fn equality_between_numbers_is_by_value_in_both_dialects() {
        let number = |text: &str| Value::Number(text.parse().expect("a number"));
        // `eq: 10` holds for 10.0 (both are written `10` and hash alike), for 1e1, not for 10.5.
        for floats in [Floats::Refused, Floats::Rfc8785] {
            assert!(check_in(floats, Op::Eq, number("10.0"), json!(10)).0);
            assert!(check_in(floats, Op::Eq, number("1e1"), json!(10)).0);
            assert!(!check_in(floats, Op::Eq, number("10.5"), json!(10)).0);
            assert!(check_in(floats, Op::Neq, number("10.5"), json!(10)).0);
            assert!(!check_in(floats, Op::Neq, number("10.0"), json!(10)).0);
            assert!(check_in(floats, Op::In, number("2.5"), json!([1, number("2.5")])).0);
            assert!(!check_in(floats, Op::In, number("2.5"), json!([1, 2, 3])).0);
            assert!(!check_in(floats, Op::Eq, number("2.5"), json!("2.5")).0);
        }
        assert!(equal(&number("1"), &number("1.0")));
        assert!(equal(&number("1.5"), &number("1.5")));
        assert!(!equal(&number("1.5"), &number("2.5")));
        assert!(!equal(&number("1"), &number("2")));
        assert!(equal(&number("-0"), &number("0")));
        assert!(!equal(&number("9007199254740993"), &number("9007199254740992.0")));
        assert!(equal(&json!({"a": [number("0.5")]}), &json!({"a": [number("5e-1")]})));
        assert!(!equal(&number("1e400"), &number("1e400")));
    }

    #[test]
    fn equality_is_type_strict_and_recursive() {
        assert!(!equal(&json!(true), &json!(1)));
        assert!(!equal(&json!(1), &json!("1")));
        assert!(!equal(&json!(null), &json!(false)));
        assert!(equal(&json!(null), &json!(null)));
        assert!(equal(&json!(["a", "b"]), &json!(["a", "b"])));
        assert!(!equal(&json!(["b", "a"]), &json!(["a", "b"])));
        assert!(!equal(&json!([1]), &json!(1)));
        assert!(equal(&json!({"a": [1, true]}), &json!({"a": [1, true]})));
        assert!(!equal(&json!({"a": [1, true]}), &json!({"a": [1, 1]})));
        assert!(equal(&number("1180591620717411303424"), &number("1180591620717411303424")));
    }
}
