//! A bearer JWT as an identity (SPEC v0.3 §3.4), verified with `jsonwebtoken` (RustCrypto
//! backend).
//!
//! The algorithm comes from this provider's allow-list and never from the token: the token's
//! `alg` is read only to refuse it when it is not listed (`none` is never listed, and HMAC
//! cannot be configured, so a public key can never be used as a shared secret). Then: the
//! signature against the pinned key or the JWK Set's key for the token's `kid`; `typ` against the
//! configured token type; `iss` exactly; `aud` by exact membership; `exp` required and `nbf`
//! honoured against this provider's clock with a leeway of 60 s (a bound on clock skew, not a
//! grace period). The verified `exp` becomes the principal's expiry, which the pipeline checks
//! before anything else on every action.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::{Map, Value};

use crate::action::Principal;
use crate::canonical::is_integer;
use crate::clock::{Clock, Micros, MICROS_PER_SECOND};

use super::jwks::{JwkKey, JwksEndpoint};
use super::provider::{Identity, IdentityContext, IdentityError, IdentityProvider, Refusal};

/// The header a token is read from unless configured otherwise.
pub const DEFAULT_HEADER: &str = "authorization";
/// The claim that names the agent unless configured otherwise.
pub const DEFAULT_AGENT_CLAIM: &str = "sub";
/// The clock skew allowed on `exp` and `nbf` unless configured otherwise.
pub const DEFAULT_LEEWAY_SECONDS: u64 = 60;
/// The least time between two fetches of the JWK Set unless configured otherwise.
pub const DEFAULT_JWKS_MIN_REFRESH: Micros = 30 * MICROS_PER_SECOND;
/// How long one JWK Set fetch may take unless configured otherwise.
pub const DEFAULT_HTTP_TIMEOUT_MS: u64 = 5_000;

/// The algorithms a deployment may allow. HMAC is deliberately absent: with a public key source
/// it is key confusion, and Warden verifies identities it does not share a secret with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JwtAlgorithm {
    /// RSASSA-PKCS1-v1_5 with SHA-256.
    Rs256,
    /// ECDSA on P-256 with SHA-256.
    Es256,
    /// Ed25519.
    EdDsa,
}

impl JwtAlgorithm {
    /// The name a token's `alg` header uses.
    pub fn name(self) -> &'static str {
        match self {
            JwtAlgorithm::Rs256 => "RS256",
            JwtAlgorithm::Es256 => "ES256",
            JwtAlgorithm::EdDsa => "EdDSA",
        }
    }

    /// The algorithm named `name`, if it is one Warden allows.
    pub fn parse(name: &str) -> Option<JwtAlgorithm> {
        match name {
            "RS256" => Some(JwtAlgorithm::Rs256),
            "ES256" => Some(JwtAlgorithm::Es256),
            "EdDSA" => Some(JwtAlgorithm::EdDsa),
            _ => None,
        }
    }

    fn library(self) -> Algorithm {
        match self {
            JwtAlgorithm::Rs256 => Algorithm::RS256,
            JwtAlgorithm::Es256 => Algorithm::ES256,
            JwtAlgorithm::EdDsa => Algorithm::EdDSA,
        }
    }
}

/// Where verification keys come from: exactly one source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// A public key in PEM (SPKI); its type must fit every allowed algorithm.
    Pinned {
        /// The key, PEM-encoded.
        pem: String,
    },
    /// A JWK Set over HTTPS, keys chosen by the token's `kid`.
    Jwks {
        /// The JWK Set's `https://` URL.
        url: String,
        /// Extra PEM roots for this endpoint only (a private issuer's CA).
        ca_certs: Option<PathBuf>,
    },
}

/// Everything a JWT provider checks. `new` fills the defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JwtConfig {
    /// Where verification keys come from.
    pub key: KeySource,
    /// The algorithms a token may use.
    pub algorithms: Vec<JwtAlgorithm>,
    /// Compared exactly: a multi-tenant endpoint without its tenant pinned would make every
    /// tenant a valid issuer.
    pub issuer: String,
    /// The audience `aud` must contain.
    pub audience: String,
    /// The `typ` a token must declare (`at+jwt`, `JWT`), compared case-insensitively with an
    /// `application/` prefix ignored: the defence against an ID token from the same issuer.
    pub token_type: String,
    /// The header the token is read from (`Bearer <token>`).
    pub header: String,
    /// The claim that names the agent.
    pub agent_claim: String,
    /// The claim that names the user, if any.
    pub user_claim: Option<String>,
    /// The clock skew allowed on `exp` and `nbf`.
    pub leeway_seconds: u64,
    /// The least time between two fetches of the JWK Set.
    pub jwks_min_refresh: Micros,
    /// How long one JWK Set fetch may take.
    pub http_timeout_ms: u64,
}

impl JwtConfig {
    /// The configuration with these checks and every other setting at its default.
    pub fn new(
        key: KeySource,
        algorithms: Vec<JwtAlgorithm>,
        issuer: &str,
        audience: &str,
        token_type: &str,
    ) -> JwtConfig {
        JwtConfig {
            key,
            algorithms,
            issuer: issuer.to_owned(),
            audience: audience.to_owned(),
            token_type: token_type.to_owned(),
            header: DEFAULT_HEADER.to_owned(),
            agent_claim: DEFAULT_AGENT_CLAIM.to_owned(),
            user_claim: None,
            leeway_seconds: DEFAULT_LEEWAY_SECONDS,
            jwks_min_refresh: DEFAULT_JWKS_MIN_REFRESH,
            http_timeout_ms: DEFAULT_HTTP_TIMEOUT_MS,
        }
    }
}

enum Keys {
    Pinned(DecodingKey),
    Jwks { endpoint: JwksEndpoint, cache: Mutex<JwksCache> },
}

#[derive(Default)]
struct JwksCache {
    keys: HashMap<String, JwkKey>,
    fetched_at: Option<Micros>,
}

/// Verifies `Authorization: Bearer <jwt>` and maps the verified claims onto a principal.
pub struct JwtProvider {
    config: JwtConfig,
    keys: Keys,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for JwtProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwtProvider")
            .field("issuer", &self.config.issuer)
            .field("audience", &self.config.audience)
            .field("algorithms", &self.config.algorithms)
            .finish_non_exhaustive()
    }
}

impl JwtProvider {
    /// Every configuration mistake that can be caught before a token is seen is caught here.
    pub fn new(config: JwtConfig, clock: Arc<dyn Clock>) -> Result<JwtProvider, String> {
        ensure_crypto_provider()?;
        if config.algorithms.is_empty() {
            return Err("a JWT provider needs at least one algorithm; there is no default and no wildcard, \
                        because the algorithm never comes from the token"
                .to_owned());
        }
        for (field, value) in [
            ("issuer", &config.issuer),
            ("audience", &config.audience),
            ("token_type", &config.token_type),
            ("header", &config.header),
            ("agent_claim", &config.agent_claim),
        ] {
            if value.trim().is_empty() {
                return Err(format!("a JWT provider needs a non-empty '{field}'"));
            }
        }
        let keys = match &config.key {
            KeySource::Pinned { pem } => Keys::Pinned(pinned_key(pem, &config.algorithms)?),
            KeySource::Jwks { url, ca_certs } => Keys::Jwks {
                endpoint: JwksEndpoint::new(url, config.http_timeout_ms, ca_certs.clone())?,
                cache: Mutex::new(JwksCache::default()),
            },
        };
        Ok(JwtProvider { config, keys, clock })
    }

    /// Verify one token and return the identity it names.
    pub fn verify(&self, token: &str) -> Result<Identity, IdentityError> {
        self.verify_claims(token).map(|(identity, _)| identity)
    }

    /// `verify`, and the token's verified claims beside the identity (a person's roles, for
    /// the console's sign-in).
    pub fn verify_claims(&self, token: &str) -> Result<(Identity, Map<String, Value>), IdentityError> {
        let algorithm = self.allowed_algorithm(token)?;
        let key = self.key_for(token, algorithm)?;
        let mut validation = Validation::new(algorithm.library());
        // Every claim check below is Warden's, against Warden's clock; the library verifies the
        // signature and that the key fits the algorithm.
        validation.validate_exp = false;
        validation.validate_nbf = false;
        validation.validate_aud = false;
        validation.required_spec_claims.clear();
        let data = jsonwebtoken::decode::<Map<String, Value>>(token, &key, &validation).map_err(|e| {
            use jsonwebtoken::errors::ErrorKind;
            match e.kind() {
                ErrorKind::InvalidSignature => IdentityError::new(Refusal::Signature, "the signature does not verify"),
                ErrorKind::InvalidAlgorithm | ErrorKind::InvalidAlgorithmName => {
                    IdentityError::new(Refusal::Algorithm, "the key does not fit the token's algorithm")
                }
                ErrorKind::InvalidKeyFormat | ErrorKind::InvalidEcdsaKey | ErrorKind::InvalidRsaKey(_) => {
                    IdentityError::new(Refusal::Key, "the verification key does not fit the token's algorithm")
                }
                _ => IdentityError::new(Refusal::Malformed, "the token could not be decoded"),
            }
        })?;
        let declared = data.header.typ.as_deref().map(normalized_typ);
        if declared.as_deref() != Some(normalized_typ(&self.config.token_type).as_str()) {
            return Err(IdentityError::new(
                Refusal::TokenType,
                format!(
                    "typ is not '{}'; a token of another kind from this issuer is not a credential here",
                    self.config.token_type
                ),
            ));
        }
        let identity = self.claims(&data.claims)?;
        Ok((identity, data.claims))
    }

    /// The token's `alg`, read from the unverified header only to refuse it when unlisted.
    fn allowed_algorithm(&self, token: &str) -> Result<JwtAlgorithm, IdentityError> {
        let malformed = || IdentityError::new(Refusal::Malformed, "the token is not a JWS in compact form");
        let mut parts = token.split('.');
        let (Some(header), Some(_), Some(_), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
            return Err(malformed());
        };
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(header).map_err(|_| malformed())?;
        let header: Value = serde_json::from_slice(&bytes).map_err(|_| malformed())?;
        let name = header.get("alg").and_then(Value::as_str).unwrap_or("");
        match JwtAlgorithm::parse(name) {
            Some(algorithm) if self.config.algorithms.contains(&algorithm) => Ok(algorithm),
            _ => Err(IdentityError::new(
                Refusal::Algorithm,
                format!("alg '{}' is not in the allow-list", name.chars().take(20).collect::<String>()),
            )),
        }
    }

    fn key_for(&self, token: &str, algorithm: JwtAlgorithm) -> Result<DecodingKey, IdentityError> {
        let (endpoint, cache) = match &self.keys {
            Keys::Pinned(key) => return Ok(key.clone()),
            Keys::Jwks { endpoint, cache } => (endpoint, cache),
        };
        let kid = jsonwebtoken::decode_header(token)
            .ok()
            .and_then(|header| header.kid)
            .filter(|kid| !kid.is_empty())
            .ok_or_else(|| {
            IdentityError::new(Refusal::Key, "a JWK Set deployment needs a 'kid' and the token has none")
        })?;
        let mut cache = cache.lock().map_err(|_| IdentityError::new(Refusal::KeySet, "the key cache is poisoned"))?;
        if !cache.keys.contains_key(&kid) {
            // At most one fetch per interval: a stream of unknown kids must not turn this process
            // into a load generator aimed at the issuer.
            let now = self.clock.now();
            let recent = cache.fetched_at.is_some_and(|at| now.saturating_sub(at) < self.config.jwks_min_refresh);
            if !recent {
                cache.fetched_at = Some(now);
                cache.keys = endpoint.fetch()?;
            }
        }
        let found = cache
            .keys
            .get(&kid)
            .ok_or_else(|| IdentityError::new(Refusal::Key, "the token's kid is not in the JWK Set"))?;
        if found.algorithm.as_deref().is_some_and(|alg| alg != algorithm.name()) {
            return Err(IdentityError::new(Refusal::Key, "the key for this kid is for another algorithm"));
        }
        Ok(found.key.clone())
    }

    fn claims(&self, claims: &Map<String, Value>) -> Result<Identity, IdentityError> {
        let now = self.clock.now();
        let leeway = i64::try_from(self.config.leeway_seconds).unwrap_or(i64::MAX).saturating_mul(MICROS_PER_SECOND);
        let exp = seconds_claim(claims, "exp")?
            .ok_or_else(|| IdentityError::new(Refusal::MissingClaim, "exp is required"))?;
        if exp.saturating_add(leeway) < now {
            return Err(IdentityError::new(Refusal::Expired, "the token has expired"));
        }
        if let Some(nbf) = seconds_claim(claims, "nbf")? {
            if nbf.saturating_sub(leeway) > now {
                return Err(IdentityError::new(Refusal::NotYetValid, "the token is not valid yet (nbf)"));
            }
        }
        match claims.get("iss").and_then(Value::as_str) {
            None => return Err(IdentityError::new(Refusal::MissingClaim, "iss is required")),
            Some(issuer) if issuer != self.config.issuer => {
                return Err(IdentityError::new(Refusal::Issuer, "iss is not the configured issuer"))
            }
            Some(_) => {}
        }
        // A string or an array, and membership is exact: never a substring test on the string.
        let audiences: Vec<&str> = match claims.get("aud") {
            Some(Value::String(one)) => vec![one.as_str()],
            Some(Value::Array(many)) => many.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !audiences.contains(&self.config.audience.as_str()) {
            return Err(IdentityError::new(Refusal::Audience, "aud does not contain the configured audience"));
        }
        let agent = claims
            .get(&self.config.agent_claim)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|agent| !agent.is_empty())
            .ok_or_else(|| IdentityError::new(Refusal::MissingClaim, "the agent claim is missing or empty"))?;
        let user = self
            .config
            .user_claim
            .as_deref()
            .and_then(|name| claims.get(name))
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|user| !user.is_empty());
        let principal =
            Principal::new(agent, user).map_err(|e| IdentityError::new(Refusal::MissingClaim, e.to_string()))?;
        Ok(Identity { principal, expires_at: Some(exp), issuer: Some(self.config.issuer.clone()) })
    }
}

impl IdentityProvider for JwtProvider {
    /// No header is a decline; a header that is not `Bearer <token>`, or a token that fails any
    /// check, is a refusal.
    fn resolve(&self, context: &IdentityContext<'_>) -> Result<Option<Identity>, IdentityError> {
        let Some(raw) = context.header(&self.config.header) else { return Ok(None) };
        let token = match raw.split_once(' ') {
            Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") && !token.trim().is_empty() => token.trim(),
            _ => return Err(IdentityError::new(Refusal::Malformed, "the header carries no 'Bearer <token>'")),
        };
        self.verify(token).map(Some)
    }
}

/// An integer NumericDate claim as microseconds; a boolean, float or string is refused.
fn seconds_claim(claims: &Map<String, Value>, name: &str) -> Result<Option<Micros>, IdentityError> {
    match claims.get(name) {
        None => Ok(None),
        Some(Value::Number(n)) if is_integer(n) => n
            .as_str()
            .parse::<i64>()
            .ok()
            .and_then(|seconds| seconds.checked_mul(MICROS_PER_SECOND))
            .map(Some)
            .ok_or_else(|| IdentityError::new(Refusal::MissingClaim, format!("{name} is out of range"))),
        Some(_) => Err(IdentityError::new(Refusal::MissingClaim, format!("{name} is not an integer NumericDate"))),
    }
}

/// RFC 7519 §5.1: case-insensitive, an `application/` prefix ignored.
fn normalized_typ(value: &str) -> String {
    let lowered = value.trim().to_ascii_lowercase();
    lowered.strip_prefix("application/").map(str::to_owned).unwrap_or(lowered)
}

fn pinned_key(pem: &str, algorithms: &[JwtAlgorithm]) -> Result<DecodingKey, String> {
    let first = algorithms[0];
    if algorithms.iter().any(|a| *a != first) {
        return Err(
            "a pinned key has one type, so it can serve only one algorithm; use a JWK Set for several".to_owned()
        );
    }
    let bytes = pem.as_bytes();
    let key = match first {
        JwtAlgorithm::Rs256 => DecodingKey::from_rsa_pem(bytes),
        JwtAlgorithm::Es256 => DecodingKey::from_ec_pem(bytes),
        JwtAlgorithm::EdDsa => DecodingKey::from_ed_pem(bytes),
    };
    key.map_err(|_| format!("the pinned key is not a PEM public key for {}", first.name()))
}

/// The RustCrypto backend, unless something else in the process already installed a provider:
/// with none the library would panic on the first verification.
fn ensure_crypto_provider() -> Result<(), String> {
    if jsonwebtoken::crypto::CryptoProvider::try_get_default().is_some() {
        return Ok(());
    }
    let _ = jsonwebtoken::crypto::rust_crypto::DEFAULT_PROVIDER.install_default();
    jsonwebtoken::crypto::CryptoProvider::try_get_default()
        .map(|_| ())
        .ok_or_else(|| "no JWT crypto provider could be installed".to_owned())
}
