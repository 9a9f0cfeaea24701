//! Escaped effect-key templates are injective: two different assignments of values never render
//! the same key, however the values are chosen to look like delimiters or escapes.

use proptest::prelude::*;
use serde_json::{Map, Value};
use warden::template::{Template, TemplateError, TemplateMode};

/// A small alphabet, so that values often contain the delimiters and `%XX`-lookalikes that
/// raw insertion confuses, plus unreserved characters and multi-byte UTF-8.
fn value() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop::sample::select(vec![
            'a', 'A', '2', '3', '5', 'F', ':', '%', '/', '-', '.', '_', '~', ' ', 'é', '中', '😀', '|', '@', '=',
        ]),
        1..6,
    )
    .prop_map(String::from_iter)
}

/// Literal text between placeholders: each holds at least one delimiter, and some also carry
/// characters that escaped values are made of.
fn delimiter() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![":", "/", "|", "::", "a:", ":2", "%:", "-/-", "@", "é", " ", "=5"])
}

fn affix() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec!["", "refund:", "x", "%", ":", "k/"])
}

#[derive(Debug, Clone)]
struct Shape {
    prefix: &'static str,
    delimiters: Vec<&'static str>,
    suffix: &'static str,
}

impl Shape {
    fn count(&self) -> usize {
        self.delimiters.len() + 1
    }

    fn source(&self) -> String {
        let mut source = self.prefix.to_owned();
        for index in 0..self.count() {
            if index > 0 {
                source.push_str(self.delimiters[index - 1]);
            }
            source.push_str(&format!("{{p{index}}}"));
        }
        source.push_str(self.suffix);
        source
    }

    /// Every assignment of non-empty values whose raw insertion gives the same text as
    /// `values`: the collisions ctrlrun's raw keys have.
    fn raw_collisions(&self, values: &[String]) -> Vec<Vec<String>> {
        let mut joined = String::new();
        for (index, value) in values.iter().enumerate() {
            if index > 0 {
                joined.push_str(self.delimiters[index - 1]);
            }
            joined.push_str(value);
        }
        splits(&joined, &self.delimiters)
    }
}

fn splits(text: &str, delimiters: &[&str]) -> Vec<Vec<String>> {
    let Some((delimiter, rest)) = delimiters.split_first() else {
        return if text.is_empty() { Vec::new() } else { vec![vec![text.to_owned()]] };
    };
    let mut found = Vec::new();
    for (at, _) in text.char_indices().skip(1) {
        if text[at..].starts_with(delimiter) {
            for mut tail in splits(&text[at + delimiter.len()..], rest) {
                tail.insert(0, text[..at].to_owned());
                found.push(tail);
            }
        }
    }
    found
}

fn shape() -> impl Strategy<Value = Shape> {
    (prop::collection::vec(delimiter(), 1..=2), affix(), affix()).prop_map(|(delimiters, prefix, suffix)| Shape {
        prefix,
        delimiters,
        suffix,
    })
}

fn arguments(values: &[String]) -> Map<String, Value> {
    values.iter().enumerate().map(|(index, value)| (format!("p{index}"), Value::String(value.clone()))).collect()
}

fn render(template: &Template, values: &[String]) -> String {
    template.render_effect_key(&arguments(values), None).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn distinct_assignments_never_render_the_same_escaped_key(
        shape in shape(),
        first in prop::collection::vec(value(), 3),
        second in prop::collection::vec(value(), 3),
    ) {
        let template = Template::parse(&shape.source(), TemplateMode::Escaped).unwrap();
        let first = &first[..shape.count()];
        let second = &second[..shape.count()];
        let (first_key, second_key) = (render(&template, first), render(&template, second));
        prop_assert_eq!(first == second, first_key == second_key, "{} vs {}", first_key, second_key);
    }

    #[test]
    fn assignments_that_collide_under_raw_insertion_render_apart_when_escaped(
        shape in shape(),
        values in prop::collection::vec(value(), 3),
    ) {
        let source = shape.source();
        let raw = Template::parse(&source, TemplateMode::Raw).unwrap();
        let escaped = Template::parse(&source, TemplateMode::Escaped).unwrap();
        let values = &values[..shape.count()];
        let escaped_key = render(&escaped, values);
        for other in shape.raw_collisions(values) {
            // The generator's own check: these really are raw collisions.
            prop_assert_eq!(render(&raw, &other), render(&raw, values));
            if other != values {
                prop_assert_ne!(render(&escaped, &other), escaped_key.clone());
            }
        }
    }

    #[test]
    fn an_escaped_template_without_a_delimiter_between_placeholders_is_refused(
        gap in "[A-Za-z0-9._~%-]{0,3}",
    ) {
        let outcome = Template::parse(&format!("k:{{a}}{gap}{{b}}"), TemplateMode::Escaped);
        prop_assert!(matches!(outcome, Err(TemplateError::Invalid(_))));
    }
}

#[test]
fn the_collision_generator_finds_the_documented_raw_collision() {
    let shape = Shape { prefix: "refund:", delimiters: vec![":"], suffix: "" };
    let values = vec!["acme:evil".to_owned(), "p1".to_owned()];
    let collisions = shape.raw_collisions(&values);
    assert!(collisions.contains(&vec!["acme".to_owned(), "evil:p1".to_owned()]));
    assert!(collisions.contains(&values));
}

/// Two finite doubles, often equal or adjacent, so that "same key" and "different key" both occur.
fn two_doubles() -> impl Strategy<Value = (f64, f64)> {
    let double = any::<u64>().prop_map(f64::from_bits).prop_filter("finite", |d| d.is_finite());
    prop_oneof![
        (double.clone(), double.clone()),
        double.clone().prop_map(|d| (d, d)),
        double
            .prop_map(|d| (d, f64::from_bits(d.to_bits().wrapping_add(1))))
            .prop_filter("finite", |(_, e)| e.is_finite()),
    ]
}

/// `{"x": <text>}`, the number written exactly as given.
fn number_arguments(text: &str) -> Map<String, Value> {
    let mut map = Map::new();
    map.insert("x".into(), Value::Number(text.parse().expect("a JSON number")));
    map
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    /// In escaped mode a float names its double: any spelling of one double renders one key, and
    /// two doubles render the same key only when they are the same number (0 and -0 are).
    #[test]
    // Numeric equality is what is meant: 0 and -0 are one number, and name one effect.
    #[allow(clippy::float_cmp)]
    fn an_escaped_float_key_names_its_double_whatever_its_spelling((a, b) in two_doubles()) {
        let template = Template::parse("sum:{x}", TemplateMode::Escaped).expect("template");
        let key = |text: String| template.render_effect_key(&number_arguments(&text), None).expect("renders");
        let key_a = key(format!("{a:?}"));
        prop_assert_eq!(&key(format!("{a:e}")), &key_a);
        prop_assert_eq!(&key(format!("{a:.17e}")), &key_a);
        prop_assert_eq!(key_a == key(format!("{b:?}")), a == b);
    }
}
