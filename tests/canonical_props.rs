//! Properties of canonical JSON over generated values: float-free values always encode, and the
//! encoding is a fixed point of parse-then-encode; a float anywhere is refused with its path.

use proptest::prelude::*;
use serde_json::{Map, Number, Value};
use warden::canonical::{find_float, parse_json, to_canonical_string, CanonicalError};

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
