//! The `sources:` section of the administrator's document (DESIGN.md §6), validated fail-fast.
//!
//! Every error is `configuration_invalid`, names the config path (`sources[0].auth.credential`)
//! and never repeats a value that could be a secret: values are described, not echoed, except
//! names that already passed their own syntax check. Raw strings are checked before the WHATWG
//! parser sees them, because it silently repairs tabs, `\`, `%2e` segments and numeric hosts.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use url::Url;

use crate::error::SightError;

mod base_url;
mod endpoint;

pub use base_url::check_path_text;
use base_url::parse_base_url;
use endpoint::{parse_auth, parse_endpoint};

/// Longest `base_url`, endpoint path or pointer accepted.
pub const MAX_PATH_LEN: usize = 2048;
/// Most sources, endpoints per source, params per endpoint, fields per endpoint.
pub const MAX_SOURCES: usize = 256;
/// Most endpoints per source.
pub const MAX_ENDPOINTS: usize = 256;
/// Most params per endpoint.
pub const MAX_PARAMS: usize = 64;
/// Most fields per endpoint.
pub const MAX_FIELDS: usize = 128;
/// Longest description.
pub const MAX_DESCRIPTION: usize = 2000;
/// Default and ceiling of a string param's `max_length` (Unicode scalar values).
pub const DEFAULT_MAX_LENGTH: u64 = 256;
/// The ceiling of a string param's `max_length`.
pub const MAX_STRING_PARAM: u64 = 2048;
/// Enum values: at most this many, each at most this long.
pub const MAX_ENUM_VALUES: usize = 256;
/// Longest enum value.
pub const MAX_ENUM_VALUE_LEN: usize = 256;

/// A source's `timeout_ms` unless it sets one.
pub const DEFAULT_TIMEOUT_MS: u64 = 10_000;
/// The `timeout_ms` a source may set, inclusive.
pub const TIMEOUT_MS_RANGE: (u64, u64) = (500, 60_000);
/// A source's `max_response_bytes` unless it sets one.
pub const DEFAULT_MAX_RESPONSE_BYTES: u64 = 1_048_576;
/// The `max_response_bytes` a source may set, inclusive.
pub const MAX_RESPONSE_BYTES_RANGE: (u64, u64) = (1024, 4_194_304);
/// A source's `limits` unless it sets them.
pub const DEFAULT_LIMITS: Limits = Limits { max_depth: 8, max_items: 50, max_string: 2000 };

const SOURCE_KEYS: [&str; 10] = [
    "allow_insecure_http",
    "auth",
    "base_url",
    "ca_certs",
    "description",
    "endpoints",
    "id",
    "limits",
    "max_response_bytes",
    "timeout_ms",
];
const ENDPOINT_KEYS: [&str; 5] = ["description", "fields", "id", "params", "path"];
const PARAM_KEYS: [&str; 10] =
    ["default", "description", "max", "max_length", "min", "min_length", "name", "required", "type", "values"];
const LIMIT_KEYS: [&str; 3] = ["max_depth", "max_items", "max_string"];

/// Header names an `api_key` source may not set (compared case-insensitively; `Proxy-*` too).
const FORBIDDEN_HEADERS: [&str; 11] = [
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "upgrade",
    "te",
    "trailer",
    "cookie",
    "expect",
    "keep-alive",
    "proxy-",
];

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

fn err(path: &str, message: impl Into<String>) -> ConfigError {
    ConfigError { path: path.to_owned(), message: message.into() }
}

/// The validated sources, in document order, with lookup by id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sources {
    list: Vec<Source>,
    by_id: BTreeMap<String, usize>,
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
pub struct CredentialRef(String);

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

// ---------------------------------------------------------------------------------------------
// Syntax helpers
// ---------------------------------------------------------------------------------------------

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
fn is_token(text: &str) -> bool {
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
fn shown_key(key: &str) -> String {
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

fn child(path: &str, key: &str) -> String {
    format!("{path}.{key}")
}

// ---------------------------------------------------------------------------------------------
// Parsing
// ---------------------------------------------------------------------------------------------

/// Validate the `sources` section; `allow_insecure_http` is the document's top-level flag.
pub fn parse(sources: &Value, allow_insecure_http: Option<bool>) -> Result<Sources, SightError> {
    parse_detailed(sources, allow_insecure_http).map_err(SightError::from)
}

/// An `auth` mapping outside `sources` (`gateway.upstream_auth`), at `path`: the modes, the
/// header checks and the refusal of literal secrets a source's `auth` has, except that nothing
/// is derived — every reference is named (there is no source id to derive one from).
pub fn parse_named_auth(value: &Value, path: &str) -> Result<Auth, ConfigError> {
    scan_secrets(value, path)?;
    parse_auth(Some(value), path, None)
}

/// As [`parse`], keeping the path apart from the message.
pub fn parse_detailed(sources: &Value, allow_insecure_http: Option<bool>) -> Result<Sources, ConfigError> {
    let Value::Array(items) = sources else {
        return Err(err("sources", format!("must be a list of sources, got {}", kind_of(sources))));
    };
    if items.len() > MAX_SOURCES {
        return Err(err("sources", format!("at most {MAX_SOURCES} sources")));
    }
    let global_insecure = allow_insecure_http.unwrap_or(false);
    let mut out = Sources::default();
    let mut seen_ids: BTreeMap<String, usize> = BTreeMap::new();
    // reference → (source index, derived?)
    let mut refs: BTreeMap<String, (usize, bool)> = BTreeMap::new();
    for (index, item) in items.iter().enumerate() {
        let path = format!("sources[{index}]");
        scan_secrets(item, &path)?;
        let source = parse_source(item, &path, global_insecure)?;
        let folded = source.id.to_ascii_lowercase();
        if let Some(first) = seen_ids.insert(folded, index) {
            return Err(err(
                &child(&path, "id"),
                format!(
                    "duplicate source id '{}' (also sources[{first}]; ids are unique case-insensitively)",
                    source.id
                ),
            ));
        }
        let derived_names: BTreeSet<String> = derived_references(&source.id).into_iter().collect();
        for reference in source.auth.references() {
            let name = reference.as_str().to_owned();
            let derived_here = derived_names.contains(&name);
            match refs.get(&name) {
                Some(&(other, derived_there)) if other != index && (derived_here || derived_there) => {
                    return Err(err(
                        &child(&path, "auth"),
                        format!(
                            "credential reference {name} is also used by sources[{other}], and one of them derives \
                             it from its id; name the references explicitly so each source has its own"
                        ),
                    ));
                }
                Some(_) => {}
                None => {
                    refs.insert(name, (index, derived_here));
                }
            }
        }
        out.by_id.insert(source.id.clone(), out.list.len());
        out.list.push(source);
    }
    Ok(out)
}

fn derived_references(id: &str) -> Vec<String> {
    let base = CredentialRef::derived(id).0;
    vec![format!("{base}_USERNAME"), format!("{base}_PASSWORD"), base]
}

/// Refuse literal secrets anywhere in a source, keys and values, naming only the path.
fn scan_secrets(value: &Value, path: &str) -> Result<(), ConfigError> {
    match value {
        Value::String(s) if looks_like_secret(s) => Err(err(
            path,
            format!(
                "literal secret in {path}: configuration holds credential references (names such as \
                 GITHUB_TOKEN), never credential values; the value is not repeated here"
            ),
        )),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                scan_secrets(item, &format!("{path}[{i}]"))?;
            }
            Ok(())
        }
        Value::Object(map) => {
            for (key, item) in map {
                if looks_like_secret(key) {
                    return Err(err(path, format!("literal secret in a key of {path}; the key is not repeated here")));
                }
                scan_secrets(item, &child(path, key))?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

fn object<'v>(value: &'v Value, path: &str, what: &str) -> Result<&'v Map<String, Value>, ConfigError> {
    match value {
        Value::Object(map) => Ok(map),
        other => Err(err(path, format!("{what} must be a mapping, got {}", kind_of(other)))),
    }
}

fn deny_unknown(map: &Map<String, Value>, allowed: &[&str], path: &str) -> Result<(), ConfigError> {
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

fn string<'v>(value: &'v Value, path: &str) -> Result<&'v str, ConfigError> {
    match value {
        Value::String(s) => Ok(s),
        other => Err(err(path, format!("must be a string, got {}", kind_of(other)))),
    }
}

fn boolean(value: &Value, path: &str) -> Result<bool, ConfigError> {
    match value {
        Value::Bool(b) => Ok(*b),
        other => Err(err(path, format!("must be true or false, got {}", kind_of(other)))),
    }
}

fn integer(value: &Value, path: &str) -> Result<i64, ConfigError> {
    match value {
        Value::Number(n) => exact_i64(n)
            .ok_or_else(|| err(path, "must be an integer (floats, exponents and numbers beyond 64 bits are refused)")),
        other => Err(err(path, format!("must be an integer, got {}", kind_of(other)))),
    }
}

fn bounded(
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

fn description(map: &Map<String, Value>, path: &str) -> Result<Option<String>, ConfigError> {
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

fn id(map: &Map<String, Value>, path: &str, what: &str) -> Result<String, ConfigError> {
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

fn parse_source(value: &Value, path: &str, global_insecure: bool) -> Result<Source, ConfigError> {
    let map = object(value, path, "a source")?;
    deny_unknown(map, &SOURCE_KEYS, path)?;
    let id = id(map, path, "source")?;
    let allow_insecure_http = match map.get("allow_insecure_http") {
        Some(v) => boolean(v, &child(path, "allow_insecure_http"))?,
        None => global_insecure,
    };
    let base_path_key = child(path, "base_url");
    let Some(raw) = map.get("base_url") else {
        return Err(err(&base_path_key, "every source needs a base_url"));
    };
    let base = parse_base_url(string(raw, &base_path_key)?, allow_insecure_http).map_err(|m| err(&base_path_key, m))?;
    let auth = parse_auth(map.get("auth"), &child(path, "auth"), Some(&id))?;
    let timeout_ms = bounded(map, "timeout_ms", path, DEFAULT_TIMEOUT_MS, TIMEOUT_MS_RANGE)?;
    let max_response_bytes =
        bounded(map, "max_response_bytes", path, DEFAULT_MAX_RESPONSE_BYTES, MAX_RESPONSE_BYTES_RANGE)?;
    let ca_certs = match map.get("ca_certs") {
        None => None,
        Some(v) => {
            let p = child(path, "ca_certs");
            let text = string(v, &p)?;
            if text.is_empty() || text.len() > 4096 || text.chars().any(char::is_control) {
                return Err(err(&p, "must be a non-empty file path without control characters"));
            }
            Some(PathBuf::from(text))
        }
    };
    let limits = match map.get("limits") {
        None => Limits::default(),
        Some(v) => {
            let p = child(path, "limits");
            let m = object(v, &p, "'limits'")?;
            deny_unknown(m, &LIMIT_KEYS, &p)?;
            Limits {
                max_depth: bounded(m, "max_depth", &p, DEFAULT_LIMITS.max_depth, (1, 64))?,
                max_items: bounded(m, "max_items", &p, DEFAULT_LIMITS.max_items, (1, 10_000))?,
                max_string: bounded(m, "max_string", &p, DEFAULT_LIMITS.max_string, (1, 1_000_000))?,
            }
        }
    };
    let description = description(map, path)?;
    let endpoints_path = child(path, "endpoints");
    let Some(endpoints_value) = map.get("endpoints") else {
        return Err(err(&endpoints_path, "every source needs at least one endpoint"));
    };
    let Value::Array(items) = endpoints_value else {
        return Err(err(&endpoints_path, format!("must be a list, got {}", kind_of(endpoints_value))));
    };
    if items.is_empty() || items.len() > MAX_ENDPOINTS {
        return Err(err(&endpoints_path, format!("must list 1 to {MAX_ENDPOINTS} endpoints")));
    }
    let mut endpoints: Vec<Endpoint> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let p = format!("{endpoints_path}[{i}]");
        let endpoint = parse_endpoint(item, &p, &base)?;
        if let Some(first) = endpoints.iter().position(|e| e.id.eq_ignore_ascii_case(&endpoint.id)) {
            return Err(err(
                &child(&p, "id"),
                format!("duplicate endpoint id '{}' (also {endpoints_path}[{first}])", endpoint.id),
            ));
        }
        endpoints.push(endpoint);
    }
    Ok(Source {
        id,
        base_url: base.url,
        origin: base.origin,
        base_path: base.base_path,
        auth,
        timeout_ms,
        max_response_bytes,
        ca_certs,
        limits,
        description,
        endpoints,
        allow_insecure_http,
    })
}
