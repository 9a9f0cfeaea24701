//! `SightError`: how a confined read refuses or fails, and how that reaches a caller. A leaf
//! of `error` (it names nothing else in the crate), so `error` and `sight` do not depend on
//! each other: `sight` uses `error`, and re-exports these under its own path.

/// The closed set of sight error codes (DESIGN.md §6). Bindings expose the code as `.reason`.
pub const ERROR_CODES: [&str; 15] = [
    "configuration_invalid",
    "credential_unavailable",
    "unknown_source",
    "unknown_endpoint",
    "invalid_params",
    "unknown_field",
    "redirect_refused",
    "response_too_large",
    "timeout",
    "aborted",
    "upstream_error",
    "network_error",
    "invalid_response",
    "snapshot_not_found",
    "invalid_page",
];

/// A refusal or failure of a sight. `code` is one of `ERROR_CODES`; `message` is redacted,
/// single-line and at most 300 characters (see `shape::error_text`), and never carries a
/// credential, a reference's value, a URL query or a response body beyond a redacted excerpt.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct SightError {
    /// One of `ERROR_CODES`; bindings expose it as `.reason`.
    pub code: &'static str,
    /// What happened, redacted and on one line.
    pub message: String,
}

/// How a sight error reaches a caller: the C result code and a binding's exception class
/// follow it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SightKind {
    /// The agent named something outside the configured windows (or a bad page); nothing was
    /// sent.
    OutOfWindow,
    /// The named snapshot does not exist.
    NotFound,
    /// The administrator's configuration cannot serve the query.
    Config,
    /// The one GET failed, was refused or was cancelled; no values were returned.
    Fetch,
}

impl serde::Serialize for SightError {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        (self.code, &self.message).serialize(serializer)
    }
}

impl<'de> serde::Deserialize<'de> for SightError {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let (code, message) = <(String, String)>::deserialize(deserializer)?;
        let code = ERROR_CODES
            .iter()
            .copied()
            .find(|known| *known == code)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown sight error code {code:?}")))?;
        Ok(SightError { code, message })
    }
}

impl SightError {
    /// How the error reaches a caller (C code, exception class).
    pub fn kind(&self) -> SightKind {
        match self.code {
            "unknown_source" | "unknown_endpoint" | "invalid_params" | "unknown_field" | "invalid_page" => {
                SightKind::OutOfWindow
            }
            "snapshot_not_found" => SightKind::NotFound,
            "configuration_invalid" => SightKind::Config,
            _ => SightKind::Fetch,
        }
    }

    /// An error with `code` (one of `ERROR_CODES`) and `message`.
    pub fn new(code: &'static str, message: impl Into<String>) -> SightError {
        debug_assert!(ERROR_CODES.contains(&code), "unknown sight error code {code}");
        SightError { code, message: message.into() }
    }
}
