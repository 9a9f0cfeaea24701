//! Properties of canonical JSON over generated values: float-free values always encode, and the
//! encoding is a fixed point of parse-then-encode; a float anywhere is refused with its path.
//! Under RFC 8785 numbers (`warden/v1`): every finite double has one text, which reads back as
//! that double however the double was spelled, and a value without floats is the same bytes in
//! both forms.

use proptest::prelude::*;
use serde_json::{Map, Number, Value};
use warden::canonical::{
    double_text, find_float, float_text, parse_json, to_canonical_string, to_canonical_string_with, CanonicalError,
    Floats,
};

/// Characters chosen to hit every escaping rule: C0 controls, the short escapes, quote,
/// backslash, DEL, U+2028, and multi-byte UTF-8, alongside arbitrary scalar values.
fn tricky_char() -> impl Strategy<Value = char> {
    prop_oneof![
        4 => any::<char>(),
        2 => (0u32..0x20).prop_filter_map("C0 control", char::from_u32),
        1 => prop::sample::select(vec![
            '"', '\\', '/', '\u{7f}', '\u{2028}', '\u{2029}', '\u{feff}', '\u{ffff}', 'é', '中',
            '😀', '{', '}', ':', 'a', 'Z', '0',
        ]),
    ]
}

fn tricky_string() -> impl Strategy<Value = String> {
    prop::collection::vec(tricky_char(), 0..12).prop_map(String::from_iter)
}

fn integer() -> impl Strategy<Value = Number> {
    prop_oneof![
        any::<i64>().prop_map(Number::from),
        any::<u64>().prop_map(Number::from),
        // Far past u64, as Python's int allows.
        "-?[1-9][0-9]{19,80}".prop_map(|digits| digits.parse::<Number>().unwrap()),
    ]
}

fn float_number() -> impl Strategy<Value = Number> {
    prop_oneof!["-?(0|[1-9][0-9]{0,6})\\.[0-9]{1,6}([eE][-+]?[0-9]{1,3})?", "-?(0|[1-9][0-9]{0,6})[eE][-+]?[0-9]{1,3}",]
        .prop_map(|text| text.parse::<Number>().unwrap())
}

fn float_free_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        integer().prop_map(Value::Number),
        tricky_string().prop_map(Value::String),
    ];
    leaf.prop_recursive(5, 96, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            prop::collection::btree_map(tricky_string(), inner, 0..8)
                .prop_map(|members| Value::Object(members.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// Replaces one node of `value`, chosen by walking `route`, with `float`, and returns the path
/// the encoder must report for it (members are chosen in sorted order, as the encoder walks).
fn plant(value: &mut Value, route: &[usize], float: Number, path: String) -> String {
    let Some((step, rest)) = route.split_first() else {
        *value = Value::Number(float);
        return path;
    };
    match value {
        Value::Array(items) if !items.is_empty() => {
            let index = step % items.len();
            plant(&mut items[index], rest, float, format!("{path}[{index}]"))
        }
        Value::Object(members) if !members.is_empty() => {
            let mut keys: Vec<String> = members.keys().cloned().collect();
            keys.sort();
            let key = keys[step % keys.len()].clone();
            let child = members.get_mut(&key).unwrap();
            plant(child, rest, float, format!("{path}.{key}"))
        }
        _ => {
            *value = Value::Number(float);
            path
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn float_free_values_encode_and_parsing_the_encoding_gives_the_same_bytes(
        value in float_free_value()
    ) {
        let canonical = to_canonical_string(&value, "value").unwrap();
        let reparsed = parse_json(&canonical).unwrap();
        prop_assert_eq!(&reparsed, &value);
        prop_assert_eq!(to_canonical_string(&reparsed, "value").unwrap(), canonical);
        prop_assert_eq!(find_float(&value, "value"), None);
    }

    #[test]
    fn encoding_ignores_whitespace_and_member_order_in_the_input(value in float_free_value()) {
        let pretty = serde_json::to_string_pretty(&value).unwrap();
        let canonical = to_canonical_string(&value, "value").unwrap();
        prop_assert_eq!(
            to_canonical_string(&parse_json(&pretty).unwrap(), "value").unwrap(),
            canonical
        );
    }

    #[test]
    fn a_float_anywhere_is_refused_with_its_path(
        mut value in float_free_value(),
        route in prop::collection::vec(any::<usize>(), 0..6),
        float in float_number(),
    ) {
        let path = plant(&mut value, &route, float, "value".to_owned());
        prop_assert_eq!(
            to_canonical_string(&value, "value"),
            Err(CanonicalError::Float { path: path.clone() })
        );
        prop_assert_eq!(find_float(&value, "value"), Some(path));
    }
}

/// Any finite double: arbitrary bit patterns (subnormals, huge and tiny exponents) and
/// ordinary decimals.
fn finite_double() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<u64>().prop_map(f64::from_bits).prop_filter("finite", |d| d.is_finite()),
        (-1_000_000i64..1_000_000, 0u32..8).prop_map(|(n, places)| n as f64 / 10f64.powi(places as i32)),
    ]
}

/// Spellings of one double: Rust's shortest, its exponent form, and its 17-digit exponent form.
fn spellings(double: f64) -> Vec<String> {
    vec![format!("{double:?}"), format!("{double:e}"), format!("{double:.16e}")]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn every_finite_double_has_one_text_and_it_reads_back_as_the_same_double(double in finite_double()) {
        let text = double_text(double).expect("a finite double has a text");
        let back: f64 = text.parse().unwrap();
        // The same double, but -0, whose text is `0` (RFC 8785 prints both zeros alike).
        let zero_as_positive = if double.to_bits() == (-0.0f64).to_bits() { 0.0 } else { double };
        prop_assert_eq!(back.to_bits(), zero_as_positive.to_bits(), "{} read back as {}", text, back);
        for spelling in spellings(double) {
            prop_assert_eq!(float_text(&spelling), Some(text.clone()), "{}", spelling);
            let value = parse_json(&format!("{{\"a\":[{spelling}]}}")).unwrap();
            let canonical = to_canonical_string_with(&value, "v", Floats::Rfc8785).unwrap();
            prop_assert_eq!(&canonical, &format!("{{\"a\":[{text}]}}"));
            // A fixed point: the canonical text reads back to the same canonical text.
            let again = to_canonical_string_with(&parse_json(&canonical).unwrap(), "v", Floats::Rfc8785).unwrap();
            prop_assert_eq!(again, canonical);
        }
        // Never more digits than the shortest round trip needs: at most 17 significant digits.
        let mantissa = text.split(['e']).next().unwrap_or("");
        let significant = mantissa.trim_start_matches('-').replace('.', "");
        let significant = significant.trim_start_matches('0').trim_end_matches('0');
        prop_assert!(significant.len() <= 17, "{}", text);
    }

    #[test]
    fn a_value_without_floats_is_the_same_bytes_under_both_forms(value in float_free_value()) {
        prop_assert_eq!(
            to_canonical_string_with(&value, "value", Floats::Rfc8785).unwrap(),
            to_canonical_string(&value, "value").unwrap()
        );
    }

    #[test]
    fn under_rfc_8785_a_planted_float_encodes_where_ctrlrun_refuses_it(
        mut value in float_free_value(),
        route in prop::collection::vec(any::<usize>(), 0..6),
        float in float_number(),
    ) {
        let text = float_text(float.as_str());
        let path = plant(&mut value, &route, float, "value".to_owned());
        let encoded = to_canonical_string_with(&value, "value", Floats::Rfc8785);
        match text {
            Some(text) => {
                let encoded = encoded.unwrap();
                prop_assert!(encoded.contains(&text), "{} lacks {}", encoded, text);
                let reparsed = parse_json(&encoded).unwrap();
                prop_assert_eq!(to_canonical_string_with(&reparsed, "value", Floats::Rfc8785).unwrap(), encoded);
            }
            None => prop_assert_eq!(encoded, Err(CanonicalError::BeyondDouble { path: path.clone() })),
        }
        prop_assert_eq!(to_canonical_string(&value, "value"), Err(CanonicalError::Float { path }));
    }
}
