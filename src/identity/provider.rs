//! What every identity provider shares: the call it is asked about, the identity it answers,
//! and the refusal it gives a credential it rejects.

use std::fmt;

use crate::action::Principal;
use crate::clock::Micros;

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
