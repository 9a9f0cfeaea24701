//! Single sign-on for the console and the operator server: the document's `sign_in.jwt` names
//! the organisation's JWT issuer (`warden::identity::sign_in`), and the library's verifier
//! (`JwtProvider`) checks every token against it. The person is the token's name claim and their
//! roles its roles claim; they answer as `console:NAME` or `operator:NAME`, verified, with the
//! issuer the token's `iss` — the same names an approver token gives, so one person is one
//! approver however they signed in, and the requester is still never the approver.
//!
//! The console reads the token from the header the section names (an authenticating proxy in
//! front of the console sets it: `Bearer <token>` or the bare token), only when the person
//! presses "Sign in with single sign-on" (a same-origin POST), and opens a session that ends
//! when the token expires (or after the console's 12 hours, whichever is first). The operator
//! server takes it as `Authorization: Bearer <token>` on every request.

use std::sync::Arc;

use warden::clock::Micros;
use warden::identity::sign_in::{roles_of, SignIn, SignInKey};
use warden::identity::{JwtConfig, JwtProvider, KeySource};

use crate::exit::Failure;
use crate::output::shown;

/// The largest PEM public-key file read (a key is a few hundred bytes).
const MAX_PUBLIC_KEY_BYTES: u64 = 64 * 1024;

/// What an approval answered through single sign-on records as how the person was verified.
pub const AMR: &str = "sso_jwt";

/// The document's issuer, ready to verify tokens.
pub struct Sso {
    provider: JwtProvider,
    sign_in: SignIn,
}

/// A person a token verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SsoUser {
    /// The name claim's value.
    pub name: String,
    /// The roles claim's values (none without a roles claim).
    pub roles: Vec<String>,
    /// When the token expires.
    pub expires_at: Micros,
}

/// A PEM public key from `path`, refusing a FIFO or anything that is not a regular file (a
/// plain read of a FIFO would block) and anything larger than a key.
pub fn read_public_key(path: &std::path::Path) -> Result<String, String> {
    warden::files::open_regular(path)
        .and_then(|file| {
            let mut pem = String::new();
            std::io::Read::read_to_string(&mut std::io::Read::take(file, MAX_PUBLIC_KEY_BYTES + 1), &mut pem)?;
            if pem.len() as u64 > MAX_PUBLIC_KEY_BYTES {
                return Err(std::io::Error::other("it is larger than 64 KiB; a PEM public key is a few hundred bytes"));
            }
            Ok(pem)
        })
        .map_err(|e| e.to_string())
}

impl Sso {
    /// The verifier for the document's `sign_in` section, if it has one. A key file that cannot
    /// be read, or a key that fits none of the algorithms, refuses to start.
    pub fn from_section(section: Option<&SignIn>) -> Result<Option<Arc<Sso>>, Failure> {
        let Some(sign_in) = section else { return Ok(None) };
        let jwt = &sign_in.jwt;
        let key = match &jwt.key {
            SignInKey::PublicKeyFile(path) => KeySource::Pinned {
                pem: read_public_key(path).map_err(|e| {
                    Failure::usage(format!("sign_in.jwt.public_key_file {}: {e}", shown(&path.display().to_string())))
                })?,
            },
            SignInKey::JwksUrl(url) => KeySource::Jwks { url: url.clone(), ca_certs: None },
        };
        let mut config = JwtConfig::new(key, jwt.algorithms.clone(), &jwt.issuer, &jwt.audience, &jwt.token_type);
        config.header = jwt.header.clone();
        config.agent_claim = jwt.name_claim.clone();
        config.leeway_seconds = jwt.leeway_seconds;
        let provider = JwtProvider::new(config, Arc::new(warden::SystemClock))
            .map_err(|e| Failure::usage(format!("sign_in.jwt: {e}")))?;
        Ok(Some(Arc::new(Sso { provider, sign_in: sign_in.clone() })))
    }

    /// The header the console reads the token from (lowercase).
    pub fn header(&self) -> &str {
        &self.sign_in.jwt.header
    }

    /// The issuer, as the section names it.
    pub fn issuer(&self) -> &str {
        &self.sign_in.jwt.issuer
    }

    /// The person a header value (`Bearer <token>` or the bare token) names, or why not — in
    /// words that never contain the token.
    pub fn verify(&self, value: &str) -> Result<SsoUser, String> {
        let value = value.trim();
        let token = match value.split_once(' ') {
            Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") => token.trim(),
            Some(_) => return Err("the header carries neither `Bearer <token>` nor a bare token".into()),
            None => value,
        };
        if token.is_empty() {
            return Err("the header carries no token".into());
        }
        let (identity, claims) = self.provider.verify_claims(token).map_err(|e| e.to_string())?;
        let expires_at = identity.expires_at.ok_or("the token has no exp")?;
        let name = identity.principal.agent;
        let roles = roles_of(&claims, self.sign_in.jwt.roles_claim.as_deref());
        Ok(SsoUser { name, roles, expires_at })
    }

    /// A person this issuer verified, as an approver answering as `agent:NAME`.
    pub fn approver(&self, agent: &str, name: &str, roles: &[String]) -> Result<warden::approval::Approver, Failure> {
        super::approvers::verified_approver(agent, self.issuer(), AMR, name, roles)
    }
}
