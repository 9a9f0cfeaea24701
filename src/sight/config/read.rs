//! Reading the `sources:` section: the `configuration_invalid` refusal with its path, and the
//! readers of mappings, strings, booleans and bounded integers that give it.

use serde_json::{Map, Value};

use super::bounds::MAX_DESCRIPTION;
use super::syntax::{child, exact_i64, is_id, kind_of, shown_key};
use crate::error::SightError;

/// A `configuration_invalid` refusal with the config path kept apart, so the document loader
/// can attach a line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// Where in the `sources` section.
    pub path: String,
    /// What is wrong.
    pub message: String,
}

impl From<ConfigError> for SightError {
    fn from(e: ConfigError) -> SightError {
        SightError::new("configuration_invalid", format!("{}: {}", e.path, e.message))
    }
}

pub(super) fn err(path: &str, message: impl Into<String>) -> ConfigError {
    ConfigError { path: path.to_owned(), message: message.into() }
}

pub(super) fn object<'v>(value: &'v Value, path: &str, what: &str) -> Result<&'v Map<String, Value>, ConfigError> {
    match value {
        Value::Object(map) => Ok(map),
        other => Err(err(path, format!("{what} must be a mapping, got {}", kind_of(other)))),
    }
}

pub(super) fn deny_unknown(map: &Map<String, Value>, allowed: &[&str], path: &str) -> Result<(), ConfigError> {
    for key in map.keys() {
        if !allowed.contains(&key.as_str()) {
            let hint = if key.chars().any(|c| c.is_ascii_uppercase()) { " (keys are snake_case)" } else { "" };
            let at = if shown_key(key).starts_with('\'') { child(path, key) } else { path.to_owned() };
            return Err(err(
                &at,
                format!("unknown key {}{hint}; allowed here: {}", shown_key(key), allowed.join(", ")),
            ));
        }
    }
    Ok(())
}

pub(super) fn string<'v>(value: &'v Value, path: &str) -> Result<&'v str, ConfigError> {
    match value {
        Value::String(s) => Ok(s),
        other => Err(err(path, format!("must be a string, got {}", kind_of(other)))),
    }
}

pub(super) fn boolean(value: &Value, path: &str) -> Result<bool, ConfigError> {
    match value {
        Value::Bool(b) => Ok(*b),
        other => Err(err(path, format!("must be true or false, got {}", kind_of(other)))),
    }
}

pub(super) fn integer(value: &Value, path: &str) -> Result<i64, ConfigError> {
    match value {
        Value::Number(n) => exact_i64(n)
            .ok_or_else(|| err(path, "must be an integer (floats, exponents and numbers beyond 64 bits are refused)")),
        other => Err(err(path, format!("must be an integer, got {}", kind_of(other)))),
    }
}

pub(super) fn bounded(
    map: &Map<String, Value>,
    key: &str,
    path: &str,
    default: u64,
    range: (u64, u64),
) -> Result<u64, ConfigError> {
    let Some(value) = map.get(key) else { return Ok(default) };
    let path = child(path, key);
    let n = integer(value, &path)?;
    match u64::try_from(n) {
        Ok(n) if (range.0..=range.1).contains(&n) => Ok(n),
        _ => Err(err(&path, format!("must be between {} and {}, got {n}", range.0, range.1))),
    }
}

pub(super) fn description(map: &Map<String, Value>, path: &str) -> Result<Option<String>, ConfigError> {
    let Some(value) = map.get("description") else { return Ok(None) };
    let path = child(path, "description");
    let text = string(value, &path)?;
    if text.chars().count() > MAX_DESCRIPTION {
        return Err(err(&path, format!("at most {MAX_DESCRIPTION} characters")));
    }
    if text.chars().any(|c| c.is_control() && c != '\n' && c != '\t') {
        return Err(err(&path, "control characters other than newline and tab are refused"));
    }
    Ok(Some(text.to_owned()))
}

pub(super) fn id(map: &Map<String, Value>, path: &str, what: &str) -> Result<String, ConfigError> {
    let path = child(path, "id");
    let Some(value) = map.get("id") else {
        return Err(err(&path, format!("every {what} needs an id")));
    };
    let text = string(value, &path)?;
    if !is_id(text) {
        return Err(err(&path, "must match ^[a-z][a-z0-9_]{0,63}$ (lower-case letter first, then a-z, 0-9, _)"));
    }
    Ok(text.to_owned())
}
