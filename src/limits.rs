//! The bounds on every input that crosses the boundary: documented defaults, configurable per
//! handle (C open options `{"limits": {...}}`, the bindings' `limits=`), each with a ceiling no
//! configuration may pass. Past a bound, an input is refused with `invalid_input` naming the
//! limit — except what records an effect that already happened: an executor result over its
//! bound is stored as a marked excerpt plus its SHA-256 (the effect still commits), and an
//! outcome message over its bound is cut and marked (the outcome is still recorded).

use serde::{Deserialize, Serialize};

use crate::error::{Error, InvalidInputKind, Result};

/// The largest JSON document any C entry parses, whatever the configuration (a parsed JSON
/// value takes many times its text in memory).
pub const HARD_MAX_JSON_BYTES: usize = 64 * 1024 * 1024;

/// The environment an action is in when nothing names one.
pub const DEFAULT_ENVIRONMENT: &str = "production";
/// How many records a list call returns when its caller names no limit.
pub const DEFAULT_LIST_LIMIT: u64 = 100;
/// The first receipt's sequence number: where a receipt listing starts by default.
pub const FIRST_RECEIPT_SEQ: u64 = 1;
/// Events are listed after an id; 0 lists them from the first.
pub const FIRST_EVENT_AFTER: u64 = 0;

/// The largest executor result stored whole (its JSON text); a larger one is stored as a
/// bounded, marked excerpt plus the SHA-256 of the whole text, and the effect still commits.
pub const MAX_RESULT_BYTES: usize = 1024 * 1024;
/// How much of an over-size result the excerpt keeps.
pub const RESULT_EXCERPT_BYTES: usize = 64 * 1024;
/// The longest outcome message (a not-executed or ambiguous error text) kept whole; a longer
/// one is cut at a character boundary and marked, and the outcome is still recorded.
pub const MAX_OUTCOME_MESSAGE: usize = 4096;
/// The longest wait for an approval's answer (`wait_for_answer`) accepted: a day.
pub const MAX_WAIT: crate::clock::Micros = 24 * 60 * 60 * crate::clock::MICROS_PER_SECOND;

/// Every default a binding would otherwise restate, as the JSON `warden_defaults` returns:
/// the bindings read it and never write these numbers themselves.
pub fn defaults_json() -> serde_json::Value {
    let limits = Limits::default();
    serde_json::json!({
        "environment": DEFAULT_ENVIRONMENT,
        "list_limit": DEFAULT_LIST_LIMIT,
        "from_seq": FIRST_RECEIPT_SEQ,
        "after_id": FIRST_EVENT_AFTER,
        "limits": limits,
        "result_excerpt_bytes": RESULT_EXCERPT_BYTES,
        "max_result_depth": crate::canonical::MAX_INPUT_DEPTH,
        "max_wait_ms": MAX_WAIT / 1000,
    })
}

/// The bounds on what one call may hand the library (defaults in `Limits::default`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// A proposal request (`warden_propose`'s JSON), in bytes.
    pub max_request_bytes: usize,
    /// An action name, in bytes.
    pub max_name_bytes: usize,
    /// An action's arguments in canonical form, in bytes.
    pub max_arguments_bytes: usize,
    /// An executor result stored whole, in bytes; a larger one is stored as an excerpt.
    pub max_result_bytes: usize,
    /// An outcome message (not executed, ambiguous) kept whole, in bytes; a longer one is cut.
    pub max_message_bytes: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_request_bytes: 1024 * 1024,
            max_name_bytes: 256,
            max_arguments_bytes: 256 * 1024,
            max_result_bytes: MAX_RESULT_BYTES,
            max_message_bytes: MAX_OUTCOME_MESSAGE,
        }
    }
}

/// What no configuration may raise a limit above.
const CEILINGS: Limits = Limits {
    max_request_bytes: HARD_MAX_JSON_BYTES,
    max_name_bytes: 4096,
    max_arguments_bytes: 16 * 1024 * 1024,
    max_result_bytes: HARD_MAX_JSON_BYTES,
    max_message_bytes: 1024 * 1024,
};

impl Limits {
    /// Limits from a JSON object of overrides; each must be at least 1 and at most its ceiling.
    pub fn from_json(value: &serde_json::Value) -> Result<Limits> {
        let limits: Limits = serde_json::from_value(value.clone()).map_err(|e| {
            Error::invalid_at(
                InvalidInputKind::Malformed,
                "limits",
                format!(
                "limits: {e}; the keys are max_request_bytes, max_name_bytes, max_arguments_bytes, max_result_bytes, \
                 max_message_bytes (positive integers)"
            ),
            )
        })?;
        for (name, value, ceiling) in limits.rows() {
            if value == 0 || value > ceiling {
                return Err(Error::invalid_at(
                    InvalidInputKind::OutOfRange,
                    format!("limits.{name}"),
                    format!("limits.{name} must be between 1 and {ceiling}, got {value}"),
                ));
            }
        }
        Ok(limits)
    }

    fn rows(&self) -> [(&'static str, usize, usize); 5] {
        [
            ("max_request_bytes", self.max_request_bytes, CEILINGS.max_request_bytes),
            ("max_name_bytes", self.max_name_bytes, CEILINGS.max_name_bytes),
            ("max_arguments_bytes", self.max_arguments_bytes, CEILINGS.max_arguments_bytes),
            ("max_result_bytes", self.max_result_bytes, CEILINGS.max_result_bytes),
            ("max_message_bytes", self.max_message_bytes, CEILINGS.max_message_bytes),
        ]
    }

    /// Refuses a request longer than `max_request_bytes`, naming the limit.
    pub fn check_request(&self, bytes: usize) -> Result<()> {
        over("the request", None, bytes, "max_request_bytes", self.max_request_bytes)
    }

    /// Refuses an action name longer than `max_name_bytes`, naming the limit.
    pub fn check_name(&self, name: &str) -> Result<()> {
        over("the action name", Some("name"), name.len(), "max_name_bytes", self.max_name_bytes)
    }

    /// Refuses arguments whose canonical form is longer than `max_arguments_bytes`.
    pub fn check_arguments(&self, canonical_bytes: usize) -> Result<()> {
        over(
            "the arguments (canonical JSON)",
            Some("arguments"),
            canonical_bytes,
            "max_arguments_bytes",
            self.max_arguments_bytes,
        )
    }

    /// Whether a result of this many bytes is stored whole.
    pub fn result_fits(&self, bytes: usize) -> bool {
        bytes <= self.max_result_bytes
    }
}

/// Never echoes the input itself: only its size and the limit.
/// `path` is where the value is in an action (`arguments`), when it is in one.
fn over(what: &str, path: Option<&str>, bytes: usize, limit: &str, max: usize) -> Result<()> {
    if bytes <= max {
        return Ok(());
    }
    let message = format!(
        "{what} is {bytes} bytes, over limits.{limit} ({max}); nothing was done. Send less, or raise the limit \
         when opening the store"
    );
    Err(match path {
        Some(path) => Error::invalid_at(InvalidInputKind::TooLarge, path, message),
        None => Error::invalid(InvalidInputKind::TooLarge, message),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_limit_holds_at_its_edge_and_refuses_one_byte_past_it_naming_itself() {
        let limits = Limits::default();
        assert!(limits.check_name(&"a".repeat(256)).is_ok());
        let refused = limits.check_name(&"a".repeat(257)).unwrap_err().to_string();
        assert!(
            refused.contains("max_name_bytes") && refused.contains("257") && !refused.contains("aaaa"),
            "{refused}"
        );
        assert!(limits.check_request(1024 * 1024).is_ok());
        assert!(limits.check_request(1024 * 1024 + 1).unwrap_err().to_string().contains("max_request_bytes"));
        assert!(limits.check_arguments(256 * 1024).is_ok());
        assert!(limits.check_arguments(256 * 1024 + 1).unwrap_err().to_string().contains("max_arguments_bytes"));
        assert!(limits.result_fits(limits.max_result_bytes) && !limits.result_fits(limits.max_result_bytes + 1));
    }

    #[test]
    fn the_defaults_the_bindings_read_are_defined_here_once() {
        let defaults = defaults_json();
        assert_eq!(
            (&defaults["environment"], &defaults["list_limit"], &defaults["from_seq"], &defaults["after_id"]),
            (&serde_json::json!("production"), &serde_json::json!(100), &serde_json::json!(1), &serde_json::json!(0))
        );
        assert_eq!(defaults["limits"]["max_message_bytes"], 4096);
        assert_eq!(defaults["max_wait_ms"], 86_400_000);
        assert_eq!(defaults["limits"]["max_result_bytes"], 1024 * 1024);
        assert_eq!(defaults["limits"], serde_json::to_value(Limits::default()).unwrap_or_default());
    }

    #[test]
    fn configured_limits_are_checked_against_their_ceilings_and_unknown_keys_are_refused() {
        let set = Limits::from_json(&serde_json::json!({"max_name_bytes": 64})).unwrap();
        assert_eq!((set.max_name_bytes, set.max_request_bytes), (64, Limits::default().max_request_bytes));
        assert!(Limits::from_json(&serde_json::json!({"max_name_bytes": 0})).is_err());
        assert!(Limits::from_json(&serde_json::json!({"max_name_bytes": 4097})).is_err());
        assert!(Limits::from_json(&serde_json::json!({"max_name_bytes": 4096})).is_ok());
        assert!(Limits::from_json(&serde_json::json!({"max_bytes": 1}))
            .unwrap_err()
            .to_string()
            .contains("max_request_bytes"));
    }
}
