//! A JWK Set: fetched over HTTPS with the confined fetch's agent (no proxy from the environment,
//! redirects refused, one deadline, a byte cap), parsed into verification keys by `kid`.
//!
//! A key that says it is not for signatures (`use` other than `sig`, `key_ops` without `verify`)
//! is never used for one. Two usable keys claiming one `kid` make the whole set unreadable:
//! "take the first" would be a silent trust decision about which key signs for the issuer. A key
//! that cannot be read is skipped; a set that cannot be read replaces nothing.

use std::collections::HashMap;
use std::path::PathBuf;

use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::DecodingKey;
use serde_json::Value;

use crate::http::{fetch, CancelToken, FetchRequest};

use super::provider::{IdentityError, Refusal};

/// The largest JWK Set read.
pub const MAX_JWKS_BYTES: u64 = 256 * 1024;

/// One usable verification key and the algorithm it constrains itself to, if any.
#[derive(Clone)]
pub struct JwkKey {
    /// The key.
    pub key: DecodingKey,
    /// The JWK's `alg`, if it names one.
    pub algorithm: Option<String>,
}

impl std::fmt::Debug for JwkKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwkKey").field("algorithm", &self.algorithm).finish_non_exhaustive()
    }
}

/// Where a JWK Set lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JwksEndpoint {
    /// `https://…` only.
    pub url: url::Url,
    /// How long one fetch may take.
    pub timeout_ms: u64,
    /// Extra PEM roots for this endpoint only (a private issuer's CA).
    pub ca_certs: Option<PathBuf>,
}

impl JwksEndpoint {
    /// An endpoint at `url`, which must be https.
    pub fn new(url: &str, timeout_ms: u64, ca_certs: Option<PathBuf>) -> Result<JwksEndpoint, String> {
        let parsed = url::Url::parse(url).map_err(|e| format!("the JWK Set URL does not parse: {e}"))?;
        if parsed.scheme() != "https" {
            return Err("the JWK Set URL must be https://; keys fetched in clear text can be replaced".to_owned());
        }
        if !parsed.username().is_empty() || parsed.password().is_some() {
            return Err("the JWK Set URL must not carry credentials".to_owned());
        }
        Ok(JwksEndpoint { url: parsed, timeout_ms, ca_certs })
    }

    /// GET the set. A redirect, a non-2xx status, a body over [`MAX_JWKS_BYTES`] or a network
    /// failure is a refusal naming what happened.
    pub fn fetch(&self) -> Result<HashMap<String, JwkKey>, IdentityError> {
        let request = FetchRequest {
            url: self.url.clone(),
            header: None,
            timeout_ms: self.timeout_ms,
            max_response_bytes: MAX_JWKS_BYTES,
            ca_certs: self.ca_certs.clone(),
        };
        let response = fetch(&request, &CancelToken::new()).map_err(|e| {
            IdentityError::new(Refusal::KeySet, format!("the JWK Set could not be fetched ({}): {}", e.code, e.message))
        })?;
        if !(200..300).contains(&response.status) {
            return Err(IdentityError::new(
                Refusal::KeySet,
                format!("the JWK Set endpoint answered HTTP {}", response.status),
            ));
        }
        let document: Value = serde_json::from_slice(&response.body)
            .map_err(|_| IdentityError::new(Refusal::KeySet, "the JWK Set is not JSON"))?;
        parse_jwks(&document)
    }
}

/// The usable keys of a JWK Set document, by `kid`.
pub fn parse_jwks(document: &Value) -> Result<HashMap<String, JwkKey>, IdentityError> {
    let Some(entries) = document.get("keys").and_then(Value::as_array) else {
        return Err(IdentityError::new(Refusal::KeySet, "the JWK Set has no 'keys' array"));
    };
    let mut keys = HashMap::new();
    let mut seen = std::collections::HashSet::new();
    for entry in entries {
        let Some(object) = entry.as_object() else { continue };
        let Some(kid) = object.get("kid").and_then(Value::as_str).filter(|kid| !kid.is_empty()) else { continue };
        if !for_verification(entry) {
            continue;
        }
        // Counted before parsing, so an unreadable duplicate cannot make the readable one look
        // unambiguous.
        if !seen.insert(kid.to_owned()) {
            return Err(IdentityError::new(
                Refusal::KeySet,
                "the JWK Set carries two keys with one kid; refusing rather than choosing one",
            ));
        }
        let Ok(jwk) = serde_json::from_value::<Jwk>(entry.clone()) else { continue };
        let Ok(key) = DecodingKey::from_jwk(&jwk) else { continue };
        let algorithm = object.get("alg").and_then(Value::as_str).map(str::to_owned);
        keys.insert(kid.to_owned(), JwkKey { key, algorithm });
    }
    Ok(keys)
}

fn for_verification(entry: &Value) -> bool {
    if entry.get("use").and_then(Value::as_str).is_some_and(|usage| usage != "sig") {
        return false;
    }
    match entry.get("key_ops").and_then(Value::as_array) {
        Some(operations) => operations.iter().any(|op| op.as_str() == Some("verify")),
        None => true,
    }
}
