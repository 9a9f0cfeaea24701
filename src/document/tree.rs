//! The resolved tree: every node keeps its line, every mapping has unique string keys.

use serde_json::Number;

use super::error::TOP_LEVEL;
use super::quote::shorten;

pub(super) const YAML_STR_TAG: &str = "tag:yaml.org,2002:str";

#[derive(Debug, Clone)]
pub(super) struct Node {
    pub(super) line: usize,
    pub(super) value: NodeValue,
}

#[derive(Debug, Clone)]
pub(super) enum NodeValue {
    Null,
    Bool(bool),
    /// Canonical decimal text.
    Int(String),
    /// The text as written, and the double it denotes. Refused wherever it would be used but in
    /// a `warden/v1` rule's condition operand.
    Float(String, f64),
    Str(String),
    /// ctrlrun documents only (PyYAML's implicit dates); refused wherever it would be used.
    Timestamp(String),
    Seq(Vec<Node>),
    Map(Vec<Member>),
}

#[derive(Debug, Clone)]
pub(super) struct Member {
    pub(super) key: String,
    pub(super) line: usize,
    pub(super) value: Node,
}

impl Node {
    pub(super) fn kind(&self) -> &'static str {
        match &self.value {
            NodeValue::Null => "null",
            NodeValue::Bool(_) => "a boolean",
            NodeValue::Int(_) => "an integer",
            NodeValue::Float(..) => "a float",
            NodeValue::Str(_) => "a string",
            NodeValue::Timestamp(_) => "a timestamp",
            NodeValue::Seq(_) => "a list",
            NodeValue::Map(_) => "a mapping",
        }
    }

    /// The kind, with the value where it is short enough to help.
    pub(super) fn shown(&self) -> String {
        match &self.value {
            NodeValue::Bool(b) => format!("the boolean {b}"),
            NodeValue::Int(i) => format!("the integer {}", shorten(i)),
            NodeValue::Float(f, _) => format!("the float {}", shorten(f)),
            NodeValue::Str(s) => format!("the string '{}'", shorten(s)),
            NodeValue::Timestamp(t) => format!("the timestamp {}", shorten(t)),
            _ => self.kind().to_owned(),
        }
    }

    pub(super) fn as_str(&self) -> Option<&str> {
        match &self.value {
            NodeValue::Str(s) => Some(s),
            _ => None,
        }
    }

    pub(super) fn is_null(&self) -> bool {
        matches!(self.value, NodeValue::Null)
    }
}

pub(super) fn child_path(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

pub(super) fn display_path(path: &str) -> &str {
    if path.is_empty() {
        TOP_LEVEL
    } else {
        path
    }
}

/// Python's `str.isspace`, which ctrlrun's `.strip()` uses: Rust's whitespace plus the four
/// information separators U+001C..U+001F.
fn is_python_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

pub(super) fn is_blank(text: &str) -> bool {
    text.chars().all(is_python_space)
}

/// The canonical reading of a double as a JSON number (RFC 8785's text, read back); `None` for
/// NaN and the infinities.
pub(super) fn double_number(value: f64) -> Option<Number> {
    serde_json::from_str::<Number>(&crate::canonical::double_text(value)?).ok()
}

/// A number from canonical integer text. serde_json (with `arbitrary_precision`) keeps the
/// digits exactly; the text is always a valid JSON integer here.
pub(super) fn integer_number(text: &str) -> Number {
    serde_json::from_str::<Number>(text).unwrap_or_else(|_| Number::from(0))
}
