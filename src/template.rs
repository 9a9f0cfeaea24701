//! Effect-key and resource templates: `refund:{payment_id}`.
//!
//! The grammar is ctrlrun's, deliberately smaller than a format string: literal text and `{name}`
//! placeholders, nothing else. No `{{` escape, no format spec, no attribute or index access. An
//! effect key is an identity, so a stray brace is a typo, and a typo must not become part of an
//! identity.
//!
//! Two rendering modes:
//!
//! * [`TemplateMode::Raw`] inserts values as they are, exactly as ctrlrun does; it is kept for
//!   ctrlrun-schema documents, whose keys must match the ones ctrlrun computes.
//! * [`TemplateMode::Escaped`], the default for Warden documents, percent-encodes every byte of a
//!   placeholder value outside RFC 3986's unreserved set, and requires a delimiter between any two
//!   placeholders. Together these make rendering injective: under raw insertion
//!   `refund:{tenant}:{payment_id}` renders (`acme:evil`, `p1`) and (`acme`, `evil:p1`) as the
//!   same key, so one tenant's refund would be refused as a duplicate of another's (or, worse,
//!   an attacker could pre-empt a victim's key); escaped, they are `refund:acme%3Aevil:p1` and
//!   `refund:acme:evil%3Ap1`.
//!
//! A number renders as its canonical text (`canonical::number_text`): an integer's exact digits
//! in both modes, and in escaped mode (`warden/v1`, whose numbers are RFC 8785's) a float's
//! RFC 8785 text, then escaped like any value: `1.50` renders `1.5`, `1.0` renders `1` as the
//! integer `1` does, `1e21` renders `1e%2B21`. Raw mode refuses floats, as ctrlrun documents do.
//!
//! One collision is kept on purpose in both modes: a number and its canonical text as a string
//! render alike, so `7` and `"7"` (and `1.5` and `"1.5"`) name the same effect. Callers routinely
//! send an id as either, and the collision can only make Warden refuse a call as a duplicate,
//! never let a duplicate through. The one number with two renderings is an integer of 10^21 or
//! more written out in digits and the same value sent as a float (`1e+21`): RFC 8785 writes the
//! float in exponent form, and an integer keeps its digits.

use std::borrow::Cow;
use std::sync::LazyLock;

use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use regex::Regex;
use serde_json::{Map, Value};

use crate::canonical::{number_text, Floats, Unprintable};

/// How a template renders argument values into text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TemplateMode {
    /// Values are inserted as they are, as ctrlrun does (ctrlrun-schema documents); a float
    /// does not render.
    Raw,
    /// Values are percent-encoded outside RFC 3986's unreserved set (Warden documents), so
    /// rendering is injective; a float renders as its RFC 8785 text.
    Escaped,
}

impl TemplateMode {
    /// The numbers a placeholder renders: the dialect's whose documents use this mode.
    fn floats(self) -> Floats {
        match self {
            TemplateMode::Raw => Floats::Refused,
            TemplateMode::Escaped => Floats::Rfc8785,
        }
    }
}

/// Why a template could not be parsed or rendered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TemplateError {
    /// The template itself is malformed (ctrlrun's `InvalidArgument`), or, for a resource
    /// template, a value cannot render (ctrlrun raises `InvalidArgument` there too).
    #[error("{0}")]
    Invalid(String),
    /// A value cannot render into an effect key (ctrlrun's `EffectKeyError`).
    #[error("{0}")]
    EffectKey(String),
}

/// The placeholder that names the action's `resource` field in an effect-key template.
const RESOURCE_PLACEHOLDER: &str = "resource";

/// Everything but RFC 3986's unreserved `A-Z a-z 0-9 - . _ ~` is percent-encoded; non-ASCII
/// bytes always are.
const ESCAPED: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

/// ctrlrun's `\{(?P<name>[^\W\d]\w*)\}|(?P<text>[^{}]+)|(?P<bad>.)`, with Python's Unicode `\w`
/// (letters, numbers and `_`, but not marks, which Rust's `\w` includes) and `\d` (category Nd)
/// spelled out. Checked against Python 3.11 for every code point: the two agree on every
/// character Python's Unicode 14 tables assign.
const TOKEN_PATTERN: &str = r"\{(?P<name>[\p{L}\p{Nl}\p{No}_][\p{L}\p{N}_]*)\}|(?P<text>[^{}]+)|(?P<bad>.)";

static TOKEN: LazyLock<Result<Regex, String>> =
    LazyLock::new(|| Regex::new(TOKEN_PATTERN).map_err(|error| error.to_string()));

#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Text(String),
    Placeholder(String),
}

/// A parsed `{name}` template: an effect key or a resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    source: String,
    mode: TemplateMode,
    segments: Vec<Segment>,
}

impl Template {
    /// Parses `source`, refusing a malformed template.
    pub fn parse(source: &str, mode: TemplateMode) -> Result<Template, TemplateError> {
        if source.is_empty() {
            return Err(TemplateError::Invalid("a template must be a non-empty string".into()));
        }
        let token = TOKEN
            .as_ref()
            .map_err(|error| TemplateError::Invalid(format!("the template grammar failed to compile: {error}")))?;
        let mut segments = Vec::new();
        for captures in token.captures_iter(source) {
            if let Some(bad) = captures.name("bad") {
                let position = source.get(..bad.start()).map_or(0, |b| b.chars().count());
                return Err(TemplateError::Invalid(format!(
                    "{source:?} is not a valid template: expected literal text and '{{name}}' \
                     placeholders, found {:?} at position {position}",
                    bad.as_str()
                )));
            }
            if let Some(name) = captures.name("name") {
                segments.push(Segment::Placeholder(name.as_str().to_owned()));
            } else if let Some(text) = captures.name("text") {
                segments.push(Segment::Text(text.as_str().to_owned()));
            }
        }
        if mode == TemplateMode::Escaped {
            require_delimiters(source, &segments)?;
        }
        Ok(Template { source: source.to_owned(), mode, segments })
    }

    /// The template as the document wrote it.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// How it renders values.
    pub fn mode(&self) -> TemplateMode {
        self.mode
    }

    /// Placeholder names in order of appearance, repeats included.
    pub fn placeholders(&self) -> Vec<&str> {
        self.segments
            .iter()
            .filter_map(|segment| match segment {
                Segment::Placeholder(name) => Some(name.as_str()),
                Segment::Text(_) => None,
            })
            .collect()
    }

    /// The effect key for an action with these arguments and resource.
    ///
    /// Placeholders name arguments; `{resource}` names the action's resource. An argument that
    /// is also called `resource` makes `{resource}` ambiguous, and that is refused rather than
    /// resolved: duplicate protection depends on which value it is. Only a non-empty string or
    /// a number (an integer in raw mode) renders; anything else identifies nothing, and an action whose effect cannot
    /// be identified cannot be protected against running twice.
    pub fn render_effect_key(
        &self,
        arguments: &Map<String, Value>,
        resource: Option<&str>,
    ) -> Result<String, TemplateError> {
        let mut resource_value = None;
        if self.placeholders().contains(&RESOURCE_PLACEHOLDER) {
            if arguments.contains_key(RESOURCE_PLACEHOLDER) {
                return Err(TemplateError::EffectKey(format!(
                    "{:?}: '{{resource}}' is ambiguous: the action has both a resource field and \
                     an argument named 'resource'; rename the argument",
                    self.source
                )));
            }
            let Some(resource) = resource else {
                return Err(TemplateError::EffectKey(format!(
                    "{:?}: '{{resource}}' needs a resource on the action, and it has none",
                    self.source
                )));
            };
            resource_value = Some(resource);
        }
        self.render(arguments, resource_value, TemplateError::EffectKey)
    }

    /// A resource, rendered from the call's arguments before the action exists. The resource is
    /// part of the action hash, so a value that cannot render makes the action itself invalid,
    /// hence [`TemplateError::Invalid`] for every failure, as ctrlrun does.
    pub fn render_resource(&self, arguments: &Map<String, Value>) -> Result<String, TemplateError> {
        self.render(arguments, None, TemplateError::Invalid)
    }

    fn render(
        &self,
        arguments: &Map<String, Value>,
        resource: Option<&str>,
        fail: fn(String) -> TemplateError,
    ) -> Result<String, TemplateError> {
        let mut key = String::new();
        for segment in &self.segments {
            let name = match segment {
                Segment::Text(text) => {
                    key.push_str(text);
                    continue;
                }
                Segment::Placeholder(name) => name,
            };
            let rendered = match resource.filter(|_| name == RESOURCE_PLACEHOLDER) {
                Some(resource) => Cow::Borrowed(self.rendered_string(name, resource).map_err(fail)?),
                None => match arguments.get(name) {
                    Some(value) => self.rendered(name, value).map_err(fail)?,
                    None => return Err(fail(self.missing(name, arguments, resource.is_some()))),
                },
            };
            match self.mode {
                TemplateMode::Raw => key.push_str(&rendered),
                TemplateMode::Escaped => key.extend(utf8_percent_encode(&rendered, ESCAPED)),
            }
        }
        Ok(key)
    }

    /// The names available are listed, never their values: an error message travels further
    /// than the arguments do.
    fn missing(&self, name: &str, arguments: &Map<String, Value>, with_resource: bool) -> String {
        let mut names: Vec<&str> = arguments.keys().map(String::as_str).collect();
        if with_resource {
            names.push(RESOURCE_PLACEHOLDER);
        }
        names.sort_unstable();
        let have = if names.is_empty() { "nothing".to_owned() } else { names.join(", ") };
        format!("{:?}: no value for '{{{name}}}' (have: {have})", self.source)
    }

    fn rendered<'v>(&self, name: &str, value: &'v Value) -> Result<Cow<'v, str>, String> {
        let kind = match value {
            Value::String(text) => return self.rendered_string(name, text).map(Cow::Borrowed),
            Value::Number(n) => match number_text(n, self.mode.floats()) {
                Ok(text) => return Ok(text),
                Err(Unprintable::Float) => "a float",
                Err(Unprintable::BeyondDouble) => "a number beyond the range of a double",
            },
            Value::Bool(_) => "a boolean",
            Value::Null => "null",
            Value::Array(_) => "an array",
            Value::Object(_) => "an object",
        };
        Err(format!(
            "{:?}: '{{{name}}}' is {kind}; a placeholder must resolve to a non-empty string or \
             {}",
            self.source,
            match self.mode.floats() {
                Floats::Refused => "an integer",
                Floats::Rfc8785 => "a number",
            }
        ))
    }

    fn rendered_string<'v>(&self, name: &str, text: &'v str) -> Result<&'v str, String> {
        if text.is_empty() {
            return Err(format!("{:?}: '{{{name}}}' is empty; an effect key must identify something", self.source));
        }
        Ok(text)
    }
}

/// A character escaping can never produce: escaped values are made of unreserved characters and
/// `%XX` triplets, so neither those nor `%` itself can separate two of them. With `%` as the
/// only delimiter, `{a}%{b}` renders (`x%`, `41`) and (`x`, `25A`) both as `x%25%41`.
fn is_delimiter(c: char) -> bool {
    !(c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | '~' | '%'))
}

/// In escaped mode the literal text between two placeholders must hold a delimiter. Then the
/// first delimiter after each value marks where the value ends, so every key splits back into
/// its values in exactly one way.
fn require_delimiters(source: &str, segments: &[Segment]) -> Result<(), TemplateError> {
    let mut previous: Option<&str> = None;
    let mut delimited = false;
    for segment in segments {
        match segment {
            Segment::Text(text) => delimited |= text.chars().any(is_delimiter),
            Segment::Placeholder(name) => {
                if let Some(before) = previous.filter(|_| !delimited) {
                    return Err(TemplateError::Invalid(format!(
                        "{source:?}: placeholders '{{{before}}}' and '{{{name}}}' need a \
                         delimiter between them, such as ':' or '/': a character other than \
                         A-Z a-z 0-9 - . _ ~ and %, which escaped values are made of; without \
                         one, two different pairs of values can render the same effect key"
                    )));
                }
                previous = Some(name);
                delimited = false;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            _ => panic!("test arguments must be an object"),
        }
    }

    fn escaped(source: &str) -> Template {
        Template::parse(source, TemplateMode::Escaped).unwrap()
    }

    fn raw(source: &str) -> Template {
        Template::parse(source, TemplateMode::Raw).unwrap()
    }

    #[test]
    fn escaped_keys_keep_tenant_and_payment_apart_in_both_directions() {
        let template = escaped("refund:{tenant}:{payment_id}");
        let evil_tenant =
            template.render_effect_key(&args(json!({"tenant": "acme:evil", "payment_id": "p1"})), None).unwrap();
        let evil_payment =
            template.render_effect_key(&args(json!({"tenant": "acme", "payment_id": "evil:p1"})), None).unwrap();
        assert_eq!(evil_tenant, "refund:acme%3Aevil:p1");
        assert_eq!(evil_payment, "refund:acme:evil%3Ap1");
        assert_ne!(evil_tenant, evil_payment);
    }

    #[test]
    fn raw_keys_collide_exactly_as_ctrlrun_s_do() {
        let template = raw("refund:{tenant}:{payment_id}");
        let a = template.render_effect_key(&args(json!({"tenant": "acme:evil", "payment_id": "p1"})), None).unwrap();
        let b = template.render_effect_key(&args(json!({"tenant": "acme", "payment_id": "evil:p1"})), None).unwrap();
        assert_eq!(a, "refund:acme:evil:p1");
        assert_eq!(a, b);
    }

    #[test]
    fn escaping_encodes_values_as_uppercase_utf8_triplets_and_leaves_literal_text_alone() {
        let template = escaped("ü/{a}:{b}");
        let key = template.render_effect_key(&args(json!({"a": "é %/", "b": "AZaz09-._~"})), None).unwrap();
        assert_eq!(key, "ü/%C3%A9%20%25%2F:AZaz09-._~");
        let key = template.render_effect_key(&args(json!({"a": "😀", "b": "\n"})), None).unwrap();
        assert_eq!(key, "ü/%F0%9F%98%80:%0A");
    }

    #[test]
    fn escaped_templates_need_a_delimiter_between_placeholders() {
        for refused in ["{a}{b}", "{a}x{b}", "{a}%{b}", "{a}-._~09AZ{b}", "k:{a}:{b}{c}", "{a}{a}"] {
            let outcome = Template::parse(refused, TemplateMode::Escaped);
            let Err(TemplateError::Invalid(message)) = outcome else {
                panic!("{refused} was not refused: {outcome:?}");
            };
            assert!(message.contains("delimiter"), "{message}");
            assert!(Template::parse(refused, TemplateMode::Raw).is_ok(), "{refused}");
        }
        for accepted in ["{a}:{b}", "{a}/{b}", "{a}x:y{b}", "{a}é{b}", "{a} {b}", "{a}", "x{a}y"] {
            assert!(Template::parse(accepted, TemplateMode::Escaped).is_ok(), "{accepted}");
        }
    }

    #[test]
    fn malformed_templates_are_refused_in_both_modes() {
        for source in [
            "",
            "refund:{{x}}",
            "refund:{x!r}",
            "refund:{x:>10}",
            "refund:{0}",
            "refund:{1x}",
            "refund:{x.y}",
            "refund:{x[0]}",
            "refund:}",
            "refund:{",
            "refund:{x",
            "refund:x}",
            "refund:{}",
            "refund:{ x}",
            "refund:{-x}",
            "refund:{x-y}",
            "refund:{\u{301}x}",
        ] {
            for mode in [TemplateMode::Raw, TemplateMode::Escaped] {
                assert!(
                    matches!(Template::parse(source, mode), Err(TemplateError::Invalid(_))),
                    "{source:?} in {mode:?}"
                );
            }
        }
    }

    #[test]
    fn placeholder_names_follow_python_identifier_characters() {
        for (source, name) in
            [("k:{é}", "é"), ("k:{_x}", "_x"), ("k:{x1}", "x1"), ("k:{中文}", "中文"), ("k:{x²}", "x²"), ("k:{Ⅻ}", "Ⅻ")]
        {
            assert_eq!(raw(source).placeholders(), vec![name], "{source}");
        }
    }

    #[test]
    fn the_bad_token_is_reported_with_its_character_position() {
        let Err(TemplateError::Invalid(message)) = Template::parse("é:{x.y}", TemplateMode::Raw) else {
            panic!("not refused");
        };
        assert!(message.contains("at position 2"), "{message}");
    }

    #[test]
    fn placeholders_are_listed_in_order_with_repeats() {
        let template = raw("{b}:{a}:{b}");
        assert_eq!(template.placeholders(), vec!["b", "a", "b"]);
        assert_eq!(template.source(), "{b}:{a}:{b}");
        assert_eq!(template.mode(), TemplateMode::Raw);
    }

    #[test]
    fn values_that_identify_nothing_are_refused_as_effect_key_errors() {
        for value in [json!(""), json!(true), json!(false), json!(null), json!([1]), json!({"a": 1})] {
            for mode in [TemplateMode::Raw, TemplateMode::Escaped] {
                let template = Template::parse("k:{x}", mode).unwrap();
                let outcome = template.render_effect_key(&args(json!({ "x": value })), None);
                assert!(matches!(outcome, Err(TemplateError::EffectKey(_))), "{value} in {mode:?}: {outcome:?}");
            }
        }
    }

    /// `{"x": <text>}` with the number written exactly as given.
    fn number_args(text: &str) -> Map<String, Value> {
        let mut map = Map::new();
        map.insert("x".into(), Value::Number(text.parse().unwrap()));
        map
    }

    #[test]
    fn a_float_renders_its_rfc_8785_text_escaped_and_raw_mode_refuses_it_naming_what_renders() {
        let escaped = escaped("k:{x}");
        for (text, key) in [
            ("1.5", "k:1.5"),
            ("1.50", "k:1.5"),
            ("15e-1", "k:1.5"),
            ("1.0", "k:1"),
            ("1e3", "k:1000"),
            ("-0.0", "k:0"),
            ("-2.75", "k:-2.75"),
            ("1e21", "k:1e%2B21"),
            ("1e-7", "k:1e-7"),
            ("0.30000000000000004", "k:0.30000000000000004"),
            ("9007199254740993", "k:9007199254740993"),
            ("9007199254740993.0", "k:9007199254740992"),
        ] {
            assert_eq!(escaped.render_effect_key(&number_args(text), None).as_deref(), Ok(key), "{text}");
            assert_eq!(escaped.render_resource(&number_args(text)).as_deref(), Ok(key), "{text}");
        }
        let beyond = escaped.render_effect_key(&number_args("1e400"), None);
        assert_eq!(
            beyond,
            Err(TemplateError::EffectKey(
                "\"k:{x}\": '{x}' is a number beyond the range of a double; a placeholder must resolve to a \
                 non-empty string or a number"
                    .into()
            ))
        );
        let raw = raw("k:{x}");
        assert_eq!(
            raw.render_effect_key(&number_args("1.5"), None),
            Err(TemplateError::EffectKey(
                "\"k:{x}\": '{x}' is a float; a placeholder must resolve to a non-empty string or an integer".into()
            ))
        );
        assert!(matches!(raw.render_resource(&number_args("1.0")), Err(TemplateError::Invalid(_))));
        assert_eq!(raw.render_effect_key(&number_args("-0"), None).as_deref(), Ok("k:0"));
        assert_eq!(escaped.render_effect_key(&number_args("-0"), None).as_deref(), Ok("k:0"));
    }

    #[test]
    fn a_missing_value_names_the_placeholder_and_the_available_names_but_no_values() {
        let template = escaped("k:{x}");
        let outcome = template.render_effect_key(&args(json!({"b": "secret-b", "a": "secret-a"})), None);
        let Err(TemplateError::EffectKey(message)) = outcome else {
            panic!("not refused: {outcome:?}");
        };
        assert!(message.contains("'{x}'"), "{message}");
        assert!(message.contains("have: a, b"), "{message}");
        assert!(!message.contains("secret"), "{message}");

        let Err(TemplateError::EffectKey(message)) = template.render_effect_key(&Map::new(), None) else {
            panic!("not refused");
        };
        assert!(message.contains("have: nothing"), "{message}");
    }

    #[test]
    fn an_integer_and_its_decimal_string_name_the_same_effect() {
        for mode in [TemplateMode::Raw, TemplateMode::Escaped] {
            let template = Template::parse("k:{x}", mode).unwrap();
            let number = template.render_effect_key(&args(json!({"x": 7})), None);
            let string = template.render_effect_key(&args(json!({"x": "7"})), None);
            assert_eq!(number, Ok("k:7".to_owned()));
            assert_eq!(number, string);
        }
    }

    #[test]
    fn integers_render_exactly_at_any_size() {
        let big = crate::canonical::parse_json(r#"{"x":-1180591620717411303424,"z":-0}"#).unwrap();
        let big = args(big);
        assert_eq!(escaped("k:{x}").render_effect_key(&big, None).unwrap(), "k:-1180591620717411303424");
        assert_eq!(escaped("k:{z}").render_effect_key(&big, None).unwrap(), "k:0");
    }

    #[test]
    fn resource_placeholder_takes_the_action_resource() {
        let template = escaped("k:{resource}");
        assert_eq!(template.render_effect_key(&Map::new(), Some("res:1")), Ok("k:res%3A1".to_owned()));
        assert_eq!(raw("k:{resource}").render_effect_key(&Map::new(), Some("res:1")), Ok("k:res:1".to_owned()));
    }

    #[test]
    fn resource_placeholder_refuses_a_same_named_argument_and_a_missing_resource() {
        let template = escaped("k:{resource}");
        let ambiguous = template.render_effect_key(&args(json!({"resource": "r"})), Some("res:1"));
        assert!(matches!(ambiguous, Err(TemplateError::EffectKey(m)) if m.contains("ambiguous")));
        let missing = template.render_effect_key(&Map::new(), None);
        assert!(matches!(missing, Err(TemplateError::EffectKey(_))));
        let empty = template.render_effect_key(&Map::new(), Some(""));
        assert!(matches!(empty, Err(TemplateError::EffectKey(_))));
    }

    #[test]
    fn a_resource_argument_is_an_ordinary_argument_when_the_template_does_not_use_it() {
        let template = escaped("k:{id}");
        let key = template.render_effect_key(&args(json!({"resource": "r", "id": 1})), None);
        assert_eq!(key, Ok("k:1".to_owned()));
    }

    #[test]
    fn resource_templates_render_from_arguments_and_fail_as_invalid() {
        let template = escaped("payment:{payment_id}");
        assert_eq!(template.render_resource(&args(json!({"payment_id": "txn/1"}))), Ok("payment:txn%2F1".to_owned()));
        for arguments in [json!({}), json!({"payment_id": ""}), json!({"payment_id": null})] {
            assert!(matches!(template.render_resource(&args(arguments)), Err(TemplateError::Invalid(_))));
        }
        let by_argument = escaped("r:{resource}");
        assert_eq!(by_argument.render_resource(&args(json!({"resource": "x"}))), Ok("r:x".to_owned()));
    }
}
