//! The syntax of names and values in the `sources:` section: ids, aliases, references, param
//! names, pointers, header tokens, the JSON kind of a value, and the shapes of literal secrets.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use super::bounds::MAX_PATH_LEN;

/// `^[a-z][a-z0-9_]{0,63}$`
pub fn is_id(text: &str) -> bool {
    let mut bytes = text.bytes();
    matches!(bytes.next(), Some(b'a'..=b'z'))
        && text.len() <= 64
        && bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// `^[A-Za-z][A-Za-z0-9_]{0,63}$`
pub fn is_alias(text: &str) -> bool {
    let mut bytes = text.bytes();
    matches!(bytes.next(), Some(b) if b.is_ascii_alphabetic())
        && text.len() <= 64
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// `^[A-Za-z_][A-Za-z0-9_]{0,127}$`
pub fn is_reference(text: &str) -> bool {
    let mut bytes = text.bytes();
    matches!(bytes.next(), Some(b) if b.is_ascii_alphabetic() || b == b'_')
        && text.len() <= 128
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// `^[A-Za-z_][A-Za-z0-9_.-]{0,63}$`: query-string keys that need no encoding.
pub fn is_param_name(text: &str) -> bool {
    let mut bytes = text.bytes();
    matches!(bytes.next(), Some(b) if b.is_ascii_alphabetic() || b == b'_')
        && text.len() <= 64
        && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// An RFC 6901 pointer other than the empty one: starts with `/`, `~` only as `~0`/`~1`.
pub fn is_pointer(text: &str) -> bool {
    if !text.starts_with('/') || text.len() > MAX_PATH_LEN || text.chars().any(char::is_control) {
        return false;
    }
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '~' && !matches!(chars.next(), Some('0' | '1')) {
            return false;
        }
    }
    true
}

/// RFC 9110 token.
pub(super) fn is_token(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 64
        && text.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Shapes of literal secrets: refused anywhere in source config. Linear-time (Rust `regex`).
static SECRET_SHAPES: LazyLock<Result<Regex, String>> = LazyLock::new(|| {
    Regex::new(concat!(
        r"\bsk-[A-Za-z0-9_-]{8,}",
        r"|\b[rsp]k_(?:live|test)_[A-Za-z0-9]{8,}",
        r"|\bgh[pousr]_[A-Za-z0-9]{20,}",
        r"|\bgithub_pat_[A-Za-z0-9_]{20,}",
        r"|\bxox[abpr]-[A-Za-z0-9-]{8,}",
        r"|\b(?:AKIA|ASIA)[A-Z0-9]{16}",
        r"|\beyJ[A-Za-z0-9_-]{8,}",
        r"|(?i:(?:pass(?:word)?|passwd|pwd|secret|token|api[_-]?key|access[_-]?key|auth|credentials?|session)\s*=\s*[^\s&;]+)",
    ))
    .map_err(|e| e.to_string())
});

/// `Bearer …` / `Basic …` followed by something token-like (checked further in code, so that
/// "Basic information" in a description is not a secret).
static AUTH_SCHEME: LazyLock<Result<Regex, String>> =
    LazyLock::new(|| Regex::new(r"(?i)\b(?:bearer|basic)\s+([A-Za-z0-9._~+/=-]{8,})").map_err(|e| e.to_string()));

/// True when `text` carries something shaped like a credential. Fails closed.
pub fn looks_like_secret(text: &str) -> bool {
    let (Ok(shapes), Ok(scheme)) = (&*SECRET_SHAPES, &*AUTH_SCHEME) else {
        return true;
    };
    if shapes.is_match(text) {
        return true;
    }
    scheme.captures_iter(text).filter_map(|c| c.get(1)).any(|m| {
        let token = m.as_str();
        token.bytes().any(|b| b.is_ascii_digit() || matches!(b, b'+' | b'/' | b'=' | b'_' | b'.' | b'~'))
            || token.bytes().skip(1).any(|b| b.is_ascii_uppercase())
    })
}

/// Name a key in an error only when it is plainly a name.
pub(super) fn shown_key(key: &str) -> String {
    let plain = !key.is_empty()
        && key.len() <= 64
        && key.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
        && !looks_like_secret(key);
    if plain {
        format!("'{key}'")
    } else {
        "a key that is not a plain name".to_owned()
    }
}

pub(super) fn child(path: &str, key: &str) -> String {
    format!("{path}.{key}")
}

pub(crate) fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if exact_i64(n).is_some() => "an integer",
        Value::Number(_) => "a non-integer number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// An integer written as one: `5`, `-3`; not `5.0`, `1e2` or beyond i64.
pub fn exact_i64(n: &serde_json::Number) -> Option<i64> {
    let text = n.to_string();
    let digits = text.strip_prefix('-').unwrap_or(&text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse::<i64>().ok()
}
