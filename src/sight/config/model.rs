//! What the `sources:` section configures, once validated: the sources, their auth, endpoints
//! and params, and the check of a value against a param.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::Value;
use sha2::{Digest, Sha256};
use url::Url;

use super::syntax::{exact_i64, is_reference, kind_of, looks_like_secret};

/// A source's `limits` unless it sets them.
pub const DEFAULT_LIMITS: Limits = Limits { max_depth: 8, max_items: 50, max_string: 2000 };

/// The validated sources, in document order, with lookup by id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sources {
    pub(super) list: Vec<Source>,
    pub(super) by_id: BTreeMap<String, usize>,
}

impl Sources {
    /// The source named `id`, if configured.
    pub fn get(&self, id: &str) -> Option<&Source> {
        self.by_id.get(id).and_then(|&i| self.list.get(i))
    }
    /// The sources in document order.
    pub fn iter(&self) -> std::slice::Iter<'_, Source> {
        self.list.iter()
    }
    /// How many sources there are.
    pub fn len(&self) -> usize {
        self.list.len()
    }
    /// Whether no source is configured.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }
}

impl<'a> IntoIterator for &'a Sources {
    type Item = &'a Source;
    type IntoIter = std::slice::Iter<'a, Source>;
    fn into_iter(self) -> Self::IntoIter {
        self.list.iter()
    }
}

/// One configured source: where it is, how it authenticates, its bounds and endpoints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    /// The name agents use for it.
    pub id: String,
    /// As parsed; equal to `origin + base_path` (plus a `/` when the base path is empty).
    pub base_url: Url,
    /// `scheme://host[:port]`, the ASCII serialisation; every request URL must have it.
    pub origin: String,
    /// The path prefix without a trailing `/`; empty for a bare origin.
    pub base_path: String,
    /// How requests authenticate.
    pub auth: Auth,
    /// One query's deadline.
    pub timeout_ms: u64,
    /// The largest response body read.
    pub max_response_bytes: u64,
    /// Extra PEM roots for this source only.
    pub ca_certs: Option<PathBuf>,
    /// How much of a response an agent is shown.
    pub limits: Limits,
    /// What the source is, for an agent.
    pub description: Option<String>,
    /// Its endpoints, in document order.
    pub endpoints: Vec<Endpoint>,
    /// The effective flag: the source's own, else the document's, else false.
    pub allow_insecure_http: bool,
}

impl Source {
    /// The endpoint named `id`, if configured.
    pub fn endpoint(&self, id: &str) -> Option<&Endpoint> {
        self.endpoints.iter().find(|e| e.id == id)
    }

    /// The fingerprint of one window's configuration: `sha256:` + hex over the origin, the full
    /// path (base path + endpoint path), the auth mode and the reference name(s). A snapshot
    /// taken under one fingerprint is not comparable with one taken under another; timeouts,
    /// limits and descriptions do not change it.
    pub fn fingerprint(&self, endpoint: &Endpoint) -> String {
        let refs: Vec<&str> = self.auth.references().iter().map(|r| r.as_str()).collect();
        let path = format!("{}{}", self.base_path, endpoint.path);
        let material = serde_json::json!([self.origin, path, self.auth.mode(), refs]);
        let digest = Sha256::digest(material.to_string().as_bytes());
        format!("sha256:{}", hex::encode(digest))
    }
}

/// How much of a response an agent is shown; beyond it values are cut and reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Deepest nesting kept.
    pub max_depth: u64,
    /// Most items kept per array.
    pub max_items: u64,
    /// Longest string kept, in characters.
    pub max_string: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        DEFAULT_LIMITS
    }
}

/// The name of a credential, never its value.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CredentialRef(pub(super) String);

impl CredentialRef {
    /// A checked reference: `^[A-Za-z_][A-Za-z0-9_]{0,127}$` and not shaped like a secret.
    pub fn parse(text: &str) -> Option<CredentialRef> {
        if is_reference(text) && !looks_like_secret(text) {
            Some(CredentialRef(text.to_owned()))
        } else {
            None
        }
    }
    /// `WARDEN_CREDENTIAL_<ID upper-cased, non-alphanumerics as _>`.
    pub fn derived(source_id: &str) -> CredentialRef {
        let tail: String =
            source_id.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_uppercase() } else { '_' }).collect();
        CredentialRef(format!("WARDEN_CREDENTIAL_{tail}"))
    }
    /// The reference's name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for CredentialRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// How a source's requests authenticate: the mode and the references it reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Auth {
    /// No credential.
    None,
    /// `Authorization: Bearer <credential>`.
    Bearer {
        /// The token's reference.
        credential: CredentialRef,
    },
    /// `Authorization: Basic`, from two references.
    Basic {
        /// The username's reference.
        username: CredentialRef,
        /// The password's reference.
        password: CredentialRef,
    },
    /// The credential in a header of the source's choosing.
    ApiKey {
        /// The header's name.
        header: String,
        /// The key's reference.
        credential: CredentialRef,
        /// Text sent before the key (`Token `), if any.
        prefix: Option<String>,
    },
}

impl Auth {
    /// The mode as the document spells it.
    pub fn mode(&self) -> &'static str {
        match self {
            Auth::None => "none",
            Auth::Bearer { .. } => "bearer",
            Auth::Basic { .. } => "basic",
            Auth::ApiKey { .. } => "api_key",
        }
    }
    /// The references as the credentials module resolves them.
    pub fn spec(&self) -> crate::sight::credentials::AuthSpec {
        use crate::sight::credentials::AuthSpec;
        match self {
            Auth::None => AuthSpec::None,
            Auth::Bearer { credential } => AuthSpec::Bearer { credential: credential.as_str().to_owned() },
            Auth::Basic { username, password } => {
                AuthSpec::Basic { username: username.as_str().to_owned(), password: password.as_str().to_owned() }
            }
            Auth::ApiKey { header, credential, prefix } => AuthSpec::ApiKey {
                header: header.clone(),
                credential: credential.as_str().to_owned(),
                prefix: prefix.clone(),
            },
        }
    }
    /// Every credential reference the mode reads.
    pub fn references(&self) -> Vec<&CredentialRef> {
        match self {
            Auth::None => Vec::new(),
            Auth::Bearer { credential } | Auth::ApiKey { credential, .. } => vec![credential],
            Auth::Basic { username, password } => vec![username, password],
        }
    }
}

/// One endpoint of a source: a path, its params and the fields an agent may read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// The name agents use for it.
    pub id: String,
    /// Starts with `/`; appended to the source's base path.
    pub path: String,
    /// Its params, in declaration order.
    pub params: Vec<Param>,
    /// alias → RFC 6901 pointer.
    pub fields: BTreeMap<String, String>,
    /// What the endpoint returns, for an agent.
    pub description: Option<String>,
}

impl Endpoint {
    /// The param named `name`, if declared.
    pub fn param(&self, name: &str) -> Option<&Param> {
        self.params.iter().find(|p| p.name == name)
    }
}

/// One declared query param.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Param {
    /// Its name in the query string.
    pub name: String,
    /// Its type and bounds.
    pub kind: ParamKind,
    /// Whether a query must give it.
    pub required: bool,
    /// Already checked against `kind`.
    pub default: Option<Value>,
    /// What the param is, for an agent.
    pub description: Option<String>,
}

/// A param's type and bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParamKind {
    /// Lengths in Unicode scalar values.
    String {
        /// Shortest accepted.
        min_length: u64,
        /// Longest accepted.
        max_length: u64,
    },
    /// An integer, optionally bounded (inclusive).
    Integer {
        /// Smallest accepted, if bounded.
        min: Option<i64>,
        /// Largest accepted, if bounded.
        max: Option<i64>,
    },
    /// `true` or `false`.
    Boolean,
    /// One of a fixed list.
    Enum {
        /// The accepted values.
        values: Vec<String>,
    },
}

impl ParamKind {
    /// The type as the document spells it.
    pub fn type_name(&self) -> &'static str {
        match self {
            ParamKind::String { .. } => "string",
            ParamKind::Integer { .. } => "integer",
            ParamKind::Boolean => "boolean",
            ParamKind::Enum { .. } => "enum",
        }
    }
}

/// Check a value against a param's type and constraints (shared with `confine`). The message
/// never repeats the value.
pub fn check_param_value(kind: &ParamKind, value: &Value) -> Result<(), String> {
    match (kind, value) {
        (ParamKind::String { min_length, max_length }, Value::String(s)) => {
            if s.chars().any(char::is_control) {
                return Err("contains control characters".to_owned());
            }
            let n = u64::try_from(s.chars().count()).unwrap_or(u64::MAX);
            if n < *min_length || n > *max_length {
                return Err(format!("must be {min_length} to {max_length} characters long, got {n}"));
            }
            Ok(())
        }
        (ParamKind::Integer { min, max }, Value::Number(n)) => {
            let Some(i) = exact_i64(n) else {
                return Err("must be an integer (no fraction, no exponent, within 64 bits)".to_owned());
            };
            if min.is_some_and(|m| i < m) || max.is_some_and(|m| i > m) {
                let lo = min.map_or("-inf".to_owned(), |m| m.to_string());
                let hi = max.map_or("inf".to_owned(), |m| m.to_string());
                return Err(format!("must be between {lo} and {hi}"));
            }
            Ok(())
        }
        (ParamKind::Boolean, Value::Bool(_)) => Ok(()),
        (ParamKind::Enum { values }, Value::String(s)) => {
            if values.iter().any(|v| v == s) {
                Ok(())
            } else {
                Err(format!("must be exactly one of: {}", values.join(", ")))
            }
        }
        (kind, other) => Err(format!("must be {}, got {}", expected(kind), kind_of(other))),
    }
}

fn expected(kind: &ParamKind) -> &'static str {
    match kind {
        ParamKind::String { .. } | ParamKind::Enum { .. } => "a string",
        ParamKind::Integer { .. } => "an integer",
        ParamKind::Boolean => "true or false",
    }
}
