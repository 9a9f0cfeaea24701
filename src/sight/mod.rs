//! Sights: confined reads. Administrators define where the windows are; agents decide which
//! window to look through; agents never punch holes in the wall.
//!
//! `config` validates the `sources:` section at load; `confine` turns an agent's
//! (source, endpoint, params, fields) into a URL the administrator's config already allows;
//! `credentials` resolves a reference per request; `http` performs the one GET with every
//! bound enforced while streaming; `shape` selects, redacts and prunes the response, with
//! `echo` scrubbing whatever the upstream echoes of the credential sent.

pub mod api;
pub mod config;
pub mod confine;
pub mod credentials;
pub mod echo;
pub mod http;
pub mod query;
pub mod record;
pub mod shape;
pub mod snapshot;
pub mod tool_schema;

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
    pub code: &'static str,
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

    pub fn new(code: &'static str, message: impl Into<String>) -> SightError {
        debug_assert!(ERROR_CODES.contains(&code), "unknown sight error code {code}");
        SightError { code, message: message.into() }
    }
}
