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
mod provider;
pub mod sign_in;

use crate::action::Principal;
use crate::clock::Micros;

pub use jwt::{JwtAlgorithm, JwtConfig, JwtProvider, KeySource};
pub use provider::{Identity, IdentityContext, IdentityError, IdentityProvider, Refusal};

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
