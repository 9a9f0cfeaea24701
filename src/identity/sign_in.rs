//! `warden/v1`'s top-level `sign_in` section: how the people who answer approvals sign in to
//! `warden console` and `warden operator` through the organisation's identity provider (single
//! sign-on) instead of the approver tokens `warden approvers add` prints. It names a JWT issuer
//! and the existing verifier ([`super::jwt::JwtProvider`]) checks every token against it: the
//! signature against a pinned public key or the issuer's JWK Set, `iss` exactly, `aud`, `typ`,
//! `exp`/`nbf`. The person is the token's `name_claim` (default `sub`) and their roles its
//! `roles_claim`, if one is named.
//!
//! ```yaml
//! sign_in:
//!   jwt:
//!     issuer: https://id.example.com/
//!     audience: warden-console
//!     algorithms: [ES256]
//!     jwks_url: https://id.example.com/.well-known/jwks.json   # or public_key_file: /etc/warden/idp.pem
//!     token_type: JWT
//!     header: X-Auth-Request-Access-Token                      # the console's; default Authorization
//!     name_claim: preferred_username
//!     roles_claim: groups
//! ```
//!
//! It decides no action, so, like `notify`, it is outside the policy hash: who may sign in is
//! the identity provider's word, and what an approval needs (how many, which roles) is the
//! policy's.

use std::path::PathBuf;

use serde_json::{Map, Value};

use super::jwt::JwtAlgorithm;
use crate::evidence::settings::SettingsError;

/// The keys `sign_in.jwt` takes.
const JWT_KEYS: [&str; 10] = [
    "algorithms",
    "audience",
    "header",
    "issuer",
    "jwks_url",
    "name_claim",
    "public_key_file",
    "roles_claim",
    "token_type",
    "leeway_seconds",
];

/// The `sign_in` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignIn {
    /// The JWT issuer people sign in through.
    pub jwt: SignInJwt,
}

/// Where the issuer's verification key comes from: exactly one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignInKey {
    /// A PEM public key in this file (read when the console or operator starts).
    PublicKeyFile(PathBuf),
    /// The issuer's JWK Set at this `https://` URL.
    JwksUrl(String),
}

/// `sign_in.jwt`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignInJwt {
    /// `iss`, compared exactly.
    pub issuer: String,
    /// What `aud` must contain.
    pub audience: String,
    /// The algorithms a token may use (RS256, ES256, EdDSA); never taken from the token.
    pub algorithms: Vec<JwtAlgorithm>,
    /// The verification key.
    pub key: SignInKey,
    /// The `typ` a token must declare (`JWT` for most ID tokens, `at+jwt` for access tokens).
    pub token_type: String,
    /// The request header the console reads the token from (`Bearer <token>` or the bare token,
    /// as an authenticating proxy sets it); `warden operator` always reads `Authorization`.
    pub header: String,
    /// The claim that names the person.
    pub name_claim: String,
    /// The claim that lists their roles (a string or an array of strings), if any.
    pub roles_claim: Option<String>,
    /// Clock skew allowed on `exp` and `nbf`, in seconds.
    pub leeway_seconds: u64,
}

fn refuse(path: &str, message: impl Into<String>) -> SettingsError {
    SettingsError { path: path.to_owned(), message: message.into() }
}

fn text<'a>(map: &'a Map<String, Value>, key: &str) -> Result<Option<&'a str>, SettingsError> {
    match map.get(key) {
        None => Ok(None),
        Some(Value::String(text)) if !text.trim().is_empty() => Ok(Some(text)),
        Some(_) => Err(refuse(&format!("sign_in.jwt.{key}"), format!("'{key}' must be a non-empty string"))),
    }
}

fn required<'a>(map: &'a Map<String, Value>, key: &str, example: &str) -> Result<&'a str, SettingsError> {
    text(map, key)?.ok_or_else(|| refuse(&format!("sign_in.jwt.{key}"), format!("'{key}' is required, e.g. {example}")))
}

impl SignIn {
    /// Parse the section (as JSON).
    pub fn parse(value: &Value) -> Result<SignIn, SettingsError> {
        let Value::Object(map) = value else {
            return Err(refuse("sign_in", "'sign_in' must be a mapping with one key, jwt"));
        };
        if let Some(key) = map.keys().find(|key| key.as_str() != "jwt") {
            return Err(refuse(&format!("sign_in.{key}"), format!("unknown key '{key}'; sign_in takes jwt")));
        }
        let Some(Value::Object(jwt)) = map.get("jwt") else {
            return Err(refuse(
                "sign_in.jwt",
                "'sign_in.jwt' must be a mapping: issuer, audience, algorithms, public_key_file or jwks_url, token_type",
            ));
        };
        if let Some(key) = jwt.keys().find(|key| !JWT_KEYS.contains(&key.as_str())) {
            return Err(refuse(
                &format!("sign_in.jwt.{key}"),
                format!("unknown key '{key}'; sign_in.jwt takes {}", JWT_KEYS.join(", ")),
            ));
        }
        let issuer = required(jwt, "issuer", "https://id.example.com/")?.to_owned();
        let audience = required(jwt, "audience", "warden-console")?.to_owned();
        let token_type = required(jwt, "token_type", "JWT (an ID token) or at+jwt (an access token)")?.to_owned();
        let algorithms =
            match jwt.get("algorithms") {
                Some(Value::Array(names)) if !names.is_empty() => names
                    .iter()
                    .enumerate()
                    .map(|(index, name)| {
                        name.as_str().and_then(JwtAlgorithm::parse).ok_or_else(|| {
                            refuse(&format!("sign_in.jwt.algorithms[{index}]"), "an algorithm is RS256, ES256 or EdDSA")
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()?,
                _ => return Err(refuse(
                    "sign_in.jwt.algorithms",
                    "'algorithms' is required: a non-empty list of RS256, ES256, EdDSA (never taken from the token)",
                )),
            };
        let key = match (text(jwt, "public_key_file")?, text(jwt, "jwks_url")?) {
            (Some(path), None) => SignInKey::PublicKeyFile(PathBuf::from(path)),
            (None, Some(url)) => {
                if !url.starts_with("https://") {
                    return Err(refuse("sign_in.jwt.jwks_url", "the JWK Set is fetched over https:// only"));
                }
                SignInKey::JwksUrl(url.to_owned())
            }
            _ => {
                return Err(refuse(
                    "sign_in.jwt",
                    "give exactly one key source: public_key_file (a PEM public key) or jwks_url (https://)",
                ))
            }
        };
        let header = text(jwt, "header")?.unwrap_or(super::jwt::DEFAULT_HEADER).to_ascii_lowercase();
        if header.contains(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_')) || header == "cookie" {
            return Err(refuse(
                "sign_in.jwt.header",
                "'header' must be an HTTP header name (letters, digits, -, _), not Cookie",
            ));
        }
        let name_claim = text(jwt, "name_claim")?.unwrap_or(super::jwt::DEFAULT_AGENT_CLAIM).to_owned();
        let roles_claim = text(jwt, "roles_claim")?.map(str::to_owned);
        let leeway_seconds = match jwt.get("leeway_seconds") {
            None => super::jwt::DEFAULT_LEEWAY_SECONDS,
            Some(value) => value.as_u64().filter(|seconds| *seconds <= 300).ok_or_else(|| {
                refuse("sign_in.jwt.leeway_seconds", "'leeway_seconds' must be a whole number of seconds, 0 to 300")
            })?,
        };
        Ok(SignIn {
            jwt: SignInJwt {
                issuer,
                audience,
                algorithms,
                key,
                token_type,
                header,
                name_claim,
                roles_claim,
                leeway_seconds,
            },
        })
    }
}

/// The roles a verified token's `claim` lists: a string (one role, or several separated by
/// spaces, as OAuth's `scope` is written) or an array of strings; anything else is no role.
pub fn roles_of(claims: &Map<String, Value>, claim: Option<&str>) -> Vec<String> {
    let Some(value) = claim.and_then(|claim| claims.get(claim)) else { return Vec::new() };
    let mut roles: Vec<String> = match value {
        Value::String(text) => text.split_whitespace().map(str::to_owned).collect(),
        Value::Array(items) => items.iter().filter_map(Value::as_str).map(str::to_owned).collect(),
        _ => Vec::new(),
    };
    roles.retain(|role| !role.is_empty() && role.len() <= 128 && !role.chars().any(char::is_control));
    roles.sort();
    roles.dedup();
    roles
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn base() -> Value {
        json!({"jwt": {"issuer": "https://id.example.com/", "audience": "warden-console", "algorithms": ["ES256"],
                        "jwks_url": "https://id.example.com/jwks", "token_type": "JWT"}})
    }

    #[test]
    fn defaults_and_a_full_section() {
        let parsed = SignIn::parse(&base()).expect("parses");
        assert_eq!(parsed.jwt.header, "authorization");
        assert_eq!(parsed.jwt.name_claim, "sub");
        assert_eq!(parsed.jwt.roles_claim, None);
        assert_eq!(parsed.jwt.key, SignInKey::JwksUrl("https://id.example.com/jwks".into()));
        let mut full = base();
        full["jwt"]["header"] = json!("X-Auth-Request-Access-Token");
        full["jwt"]["name_claim"] = json!("preferred_username");
        full["jwt"]["roles_claim"] = json!("groups");
        full["jwt"]["leeway_seconds"] = json!(0);
        let parsed = SignIn::parse(&full).expect("parses");
        assert_eq!(parsed.jwt.header, "x-auth-request-access-token");
        assert_eq!(
            (parsed.jwt.name_claim.as_str(), parsed.jwt.roles_claim.as_deref()),
            ("preferred_username", Some("groups"))
        );
        assert_eq!(parsed.jwt.leeway_seconds, 0);
    }

    #[test]
    fn every_mistake_is_refused_at_its_path() {
        type Change = Box<dyn Fn(&mut Value)>;
        let cases: Vec<(Change, &str)> = vec![
            (Box::new(|v| *v = json!("jwt")), "sign_in"),
            (Box::new(|v| v["oidc"] = json!({})), "sign_in.oidc"),
            (Box::new(|v| v["jwt"] = json!(1)), "sign_in.jwt"),
            (Box::new(|v| v["jwt"]["secret"] = json!("x")), "sign_in.jwt.secret"),
            (Box::new(|v| drop(v["jwt"].as_object_mut().map(|m| m.remove("issuer")))), "sign_in.jwt.issuer"),
            (Box::new(|v| v["jwt"]["issuer"] = json!(" ")), "sign_in.jwt.issuer"),
            (Box::new(|v| drop(v["jwt"].as_object_mut().map(|m| m.remove("audience")))), "sign_in.jwt.audience"),
            (Box::new(|v| drop(v["jwt"].as_object_mut().map(|m| m.remove("token_type")))), "sign_in.jwt.token_type"),
            (Box::new(|v| v["jwt"]["algorithms"] = json!([])), "sign_in.jwt.algorithms"),
            (Box::new(|v| v["jwt"]["algorithms"] = json!(["ES256", "HS256"])), "sign_in.jwt.algorithms[1]"),
            (Box::new(|v| v["jwt"]["algorithms"] = json!("ES256")), "sign_in.jwt.algorithms"),
            (Box::new(|v| v["jwt"]["jwks_url"] = json!("http://id.example.com/jwks")), "sign_in.jwt.jwks_url"),
            (Box::new(|v| v["jwt"]["public_key_file"] = json!("/k.pem")), "sign_in.jwt"),
            (Box::new(|v| drop(v["jwt"].as_object_mut().map(|m| m.remove("jwks_url")))), "sign_in.jwt"),
            (Box::new(|v| v["jwt"]["header"] = json!("X-Token: x")), "sign_in.jwt.header"),
            (Box::new(|v| v["jwt"]["header"] = json!("Cookie")), "sign_in.jwt.header"),
            (Box::new(|v| v["jwt"]["name_claim"] = json!(7)), "sign_in.jwt.name_claim"),
            (Box::new(|v| v["jwt"]["leeway_seconds"] = json!(301)), "sign_in.jwt.leeway_seconds"),
            (Box::new(|v| v["jwt"]["leeway_seconds"] = json!(-1)), "sign_in.jwt.leeway_seconds"),
        ];
        for (change, path) in cases {
            let mut value = base();
            change(&mut value);
            let refused = SignIn::parse(&value).expect_err("refused");
            assert_eq!(refused.path, path, "{}", refused.message);
        }
    }

    #[test]
    fn roles_come_from_a_string_or_an_array_and_nothing_else() {
        let claims = json!({"groups": ["ops", "finance", "ops", ""], "scope": "ops  finance", "n": 3});
        let claims = claims.as_object().expect("object");
        assert_eq!(roles_of(claims, Some("groups")), ["finance", "ops"]);
        assert_eq!(roles_of(claims, Some("scope")), ["finance", "ops"]);
        assert!(roles_of(claims, Some("n")).is_empty());
        assert!(roles_of(claims, Some("missing")).is_empty());
        assert!(roles_of(claims, None).is_empty());
    }
}
