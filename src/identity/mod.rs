//! Where a principal comes from (SPEC v0.3 §3): an [`IdentityProvider`] resolves the principal
//! of one call from what the binding's context carries. Warden consumes identities; it issues
//! none.
//!
//! Returning `Ok(None)` is a **decline** ("I have nothing to say about this call"); returning an
//! error is a **refusal** ("I was given a credential and rejected it"), and a caller must never
//! fall back from a refusal to another source of identity: that would turn a rejected token into
//! a successful action. Once a document has an `authority:` section the principal is an
//! authorization input, so a provider's answer wins over anything the calling code says.
//!
//! - [`StaticProvider`]: a fixed principal nobody verified — development and tests only.
//! - [`HeaderProvider`]: the principal a trusted header names. **A header is worth exactly what
//!   the thing that sets it is worth**: correct behind a proxy that authenticates the caller and
//!   overwrites the header on every request, worthless wherever the agent can set it.
//! - [`jwt::JwtProvider`]: a verified bearer JWT (RS256, ES256, EdDSA) against a pinned key or a
//!   JWK Set fetched over HTTPS with redirects refused.

pub mod jwks;
pub mod jwt;
pub mod sign_in;

use std::fmt;

use crate::action::Principal;
use crate::clock::Micros;

pub use jwt::{JwtAlgorithm, JwtConfig, JwtProvider, KeySource};

/// What a provider is told about the call it resolves a principal for.
#[derive(Debug, Clone, Copy)]
pub struct IdentityContext<'a> {
    /// The action being proposed.
    pub action: &'a str,
    /// The environment it is proposed in.
    pub environment: &'a str,
    /// Request headers (name, value); names match case-insensitively. Empty in process.
    pub headers: &'a [(String, String)],
    /// What the calling code's context supplied: a hint a provider may use or ignore.
    pub agent: Option<&'a str>,
    /// The user the calling code's context supplied, as a hint.
    pub user: Option<&'a str>,
}

impl<'a> IdentityContext<'a> {
    /// A context with no headers and no hints.
    pub fn new(action: &'a str, environment: &'a str) -> IdentityContext<'a> {
        IdentityContext { action, environment, headers: &[], agent: None, user: None }
    }

    /// The named header, case-insensitively, trimmed; a blank value is absent (it names nobody).
    pub fn header(&self, name: &str) -> Option<&'a str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.trim())
            .filter(|value| !value.is_empty())
    }
}

/// A resolved identity: the principal, when its credential expires (checked before anything else
/// on every action), and who vouched for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// Who is acting.
    pub principal: Principal,
    /// When the credential lapses, if it does.
    pub expires_at: Option<Micros>,
    /// Who vouched for it (a JWT's `iss`), if anyone did.
    pub issuer: Option<String>,
}

/// Why a credential was refused. The kinds are for tests and operators; the message never holds
/// the credential itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Refusal {
    /// Not `Bearer <token>`, not three base64url parts, or a header that is not JSON.
    Malformed,
    /// The token's `alg` is not in the configured allow-list (`none` included).
    Algorithm,
    /// The `typ` header is missing or not the configured token type.
    TokenType,
    /// The signature does not verify with the key for this issuer.
    Signature,
    /// No key: an unknown or missing `kid`, or a key that constrains itself to another algorithm.
    Key,
    /// The JWK Set could not be fetched or read.
    KeySet,
    /// `iss` is not exactly the configured issuer.
    Issuer,
    /// `aud` does not contain the configured audience.
    Audience,
    /// A required claim (`exp`, `iss`, the agent claim) is missing or of the wrong type.
    MissingClaim,
    /// `exp` (plus leeway) is in the past.
    Expired,
    /// `nbf` (minus leeway) is in the future.
    NotYetValid,
}

impl Refusal {
    /// The kind as error messages spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::Malformed => "malformed",
            Refusal::Algorithm => "algorithm",
            Refusal::TokenType => "token_type",
            Refusal::Signature => "signature",
            Refusal::Key => "key",
            Refusal::KeySet => "key_set",
            Refusal::Issuer => "issuer",
            Refusal::Audience => "audience",
            Refusal::MissingClaim => "missing_claim",
            Refusal::Expired => "expired",
            Refusal::NotYetValid => "not_yet_valid",
        }
    }
}

/// A refused credential: `the credential was rejected (kind): detail`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the credential was rejected ({}): {detail}", kind.as_str())]
pub struct IdentityError {
    /// Why the credential was refused.
    pub kind: Refusal,
    /// What exactly was wrong (never the credential itself).
    pub detail: String,
}

impl IdentityError {
    /// A refusal of `kind`, with `detail`.
    pub fn new(kind: Refusal, detail: impl Into<String>) -> IdentityError {
        IdentityError { kind, detail: detail.into() }
    }
}

/// Resolves the principal of one call.
pub trait IdentityProvider: Send + Sync + fmt::Debug {
    /// The identity of this call; `None` when the provider has nothing to say (a decline).
    fn resolve(&self, context: &IdentityContext<'_>) -> Result<Option<Identity>, IdentityError>;
}

/// A fixed principal that nothing verified: for development, tests and single-tenant demos. A
/// deployment where the principal is an authorization input wants a provider that checks a
/// credential.
#[derive(Debug, Clone)]
pub struct StaticProvider {
    identity: Identity,
}

impl StaticProvider {
    /// A provider that always answers `principal`.
    pub fn new(principal: Principal, expires_at: Option<Micros>) -> StaticProvider {
        StaticProvider { identity: Identity { principal, expires_at, issuer: None } }
    }
}

impl IdentityProvider for StaticProvider {
    fn resolve(&self, _: &IdentityContext<'_>) -> Result<Option<Identity>, IdentityError> {
        Ok(Some(self.identity.clone()))
    }
}

/// The principal named by a header. Worth exactly what the thing that sets the header is worth:
/// use it only behind a proxy that authenticates the caller and overwrites the header on every
/// request. No header is a decline (in process there are none); it carries no claims and no
/// expiry, because a header is a name and nothing more.
#[derive(Debug, Clone)]
pub struct HeaderProvider {
    agent_header: String,
    user_header: Option<String>,
    issuer: Option<String>,
}

impl HeaderProvider {
    /// A provider reading the agent (and user) from these headers; refused when a name is blank.
    pub fn new(agent_header: &str, user_header: Option<&str>, issuer: Option<&str>) -> Result<HeaderProvider, String> {
        if agent_header.trim().is_empty() || user_header.is_some_and(|h| h.trim().is_empty()) {
            return Err("a header provider needs non-empty header names".to_owned());
        }
        Ok(HeaderProvider {
            agent_header: agent_header.to_owned(),
            user_header: user_header.map(str::to_owned),
            issuer: issuer.map(str::to_owned),
        })
    }
}

impl IdentityProvider for HeaderProvider {
    fn resolve(&self, context: &IdentityContext<'_>) -> Result<Option<Identity>, IdentityError> {
        let Some(agent) = context.header(&self.agent_header) else { return Ok(None) };
        let user = self.user_header.as_deref().and_then(|name| context.header(name));
        let principal =
            Principal::new(agent, user).map_err(|e| IdentityError::new(Refusal::MissingClaim, e.to_string()))?;
        Ok(Some(Identity { principal, expires_at: None, issuer: self.issuer.clone() }))
    }
}
