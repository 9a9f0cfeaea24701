//! Escaped effect-key templates are injective: two different assignments of values never render
//! the same key, however the values are chosen to look like delimiters or escapes.

use proptest::prelude::*;
use serde_json::{Map, Value};
use warden::template::{Template, TemplateError, TemplateMode};

/// A small alphabet, so that collisions would be found if they existed: delimiters, `%` and hex
/// digits that mimic escapes, unreserved characters, and multi-byte UTF-8.
fn value() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop::sample::select(vec![
            'a', 'A', '2', '5', 'F', ':', '%', '/', '-', '.', '_', '~', ' ', 'é', '中', '😀', '|',
        ]),
        1..6,
    )
    .prop_map(String::from_iter)
}

/// Literal text between placeholders: each holds at least one delimiter, some also carry
/// characters that escaped values are made of.
fn delimiter() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![":", "/", "|", "::", "a:", ":2", "%:", "-/-", "@", "é", " ", "=5"])
}

fn affix() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec!["", "refund:", "x", "%", ":", "k/"])
}

fn template() -> impl Strategy<Value = (String, usize)> {
    (2usize..=3, prop::collection::vec(delimiter(), 2), affix(), affix()).prop_map(
        |(count, delimiters, prefix, suffix)| {
            let mut source = prefix.to_owned();
            for index in 0..count {
                if index > 0 {
                    source.push_str(delimiters[index - 1]);
                }
                source.push_str(&format!("{{p{index}}}"));
            }
            source.push_str(suffix);
            (source, count)
        },
    )
}

fn arguments(values: &[String]) -> Map<String, Value> {
    values
        .iter()
        .enumerate()
        .map(|(index, value)| (format!("p{index}"), Value::String(value.clone())))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn distinct_assignments_never_render_the_same_escaped_key(
        (source, count) in template(),
        first in prop::collection::vec(value(), 3),
        second in prop::collection::vec(value(), 3),
    ) {
        let template = Template::parse(&source, TemplateMode::Escaped).unwrap();
        let first = &first[..count];
        let second = &second[..count];
        let first_key = template.render_effect_key(&arguments(first), None).unwrap();
        let second_key = template.render_effect_key(&arguments(second), None).unwrap();
        prop_assert_eq!(first == second, first_key == second_key, "{} vs {}", first_key, second_key);
    }

    #[test]
    fn an_escaped_template_without_a_delimiter_between_placeholders_is_refused(
        gap in "[A-Za-z0-9._~%-]{0,3}",
    ) {
        let outcome = Template::parse(&format!("k:{{a}}{gap}{{b}}"), TemplateMode::Escaped);
        prop_assert!(matches!(outcome, Err(TemplateError::Invalid(_))));
    }
}
