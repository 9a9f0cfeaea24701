//! The gateway as an OAuth protected resource (the MCP authorization spec): its canonical URI
//! (`--resource`, RFC 8707), the metadata it publishes about itself (RFC 9728) and the bearer
//! check every request to the MCP endpoint passes before anything is parsed, forwarded or
//! decided (RFC 6750). Only with `--identity-jwt`: the other identity sources are no OAuth.
//!
//! A request without a bearer token, or whose token fails any check (signature, algorithm,
//! type, issuer, audience = `--resource`, expiry, not-before), is answered 401 with
//! `WWW-Authenticate: Bearer resource_metadata="…"` (and `error="invalid_token"` when a token
//! was offered), nothing relayed, no action built, no receipt. The description names the kind of
//! failure in fixed words: never the token, nothing read from it.

use serde_json::{json, Value};
use warden::clock::Clock;
use warden::identity::{IdentityContext, IdentityError, IdentityProvider, Refusal};

/// The well-known path of protected-resource metadata (RFC 9728 §3).
pub const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";

/// What this gateway says about itself as a protected resource.
#[derive(Debug, Clone)]
pub struct ProtectedResource {
    /// The canonical URI, as given (the `aud` a token must name).
    pub resource: String,
    /// Where the metadata is published, as a client reaches it.
    pub metadata_url: String,
    /// The local paths the metadata is served on: the path-suffixed form, then the root form.
    pub metadata_paths: Vec<String>,
    /// The issuer whose tokens are accepted (the one authorization server).
    pub issuer: String,
    /// `scopes_supported`, when configured.
    pub scopes: Vec<String>,
    /// The header the token is read from.
    pub header: String,
}

/// `--resource`: an absolute `https://` URI (`http://` only for a loopback host), no userinfo,
/// query or fragment, already in canonical form (lowercase scheme and host, no default port),
/// so the `aud` a token carries is compared with exactly what the operator wrote.
pub fn parse_resource(text: &str) -> Result<url::Url, String> {
    let url = url::Url::parse(text).map_err(|e| format!("--resource {text:?} is not an absolute URI ({e})"))?;
    let host = url.host_str().unwrap_or_default();
    let loopback = host == "localhost"
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    match url.scheme() {
        "https" => {}
        "http" if loopback => {}
        _ => return Err(format!("--resource {text:?}: the resource is an https:// URI (http:// only on loopback)")),
    }
    if host.is_empty() || !url.username().is_empty() || url.password().is_some() {
        return Err(format!("--resource {text:?}: a host and no credentials"));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(format!("--resource {text:?}: a resource URI has no query and no fragment (RFC 8707 §2)"));
    }
    let canonical = url.as_str();
    let bare = url.path() == "/" && !text.ends_with('/') && canonical.strip_suffix('/') == Some(text);
    if canonical != text && !bare {
        return Err(format!(
            "--resource {text:?} is not in canonical form; write {canonical:?} (tokens name it exactly in aud)"
        ));
    }
    Ok(url)
}

impl ProtectedResource {
    /// The resource `resource` (checked by `parse_resource`), for tokens of `issuer`.
    pub fn new(resource: &str, issuer: &str, scopes: Vec<String>, header: &str) -> Result<ProtectedResource, String> {
        let url = parse_resource(resource)?;
        let path = url.path().trim_end_matches('/');
        let origin = url.origin().ascii_serialization();
        let suffixed = format!("{WELL_KNOWN}{path}");
        let mut metadata_paths = vec![suffixed.clone()];
        if !path.is_empty() {
            metadata_paths.push(WELL_KNOWN.to_owned());
        }
        if let Some(bad) = scopes.iter().find(|s| s.is_empty() || s.chars().any(|c| c <= ' ' || c == '"' || c == '\\'))
        {
            return Err(format!("--scopes-supported {bad:?}: a scope is printable ASCII without spaces or quotes"));
        }
        Ok(ProtectedResource {
            resource: resource.to_owned(),
            metadata_url: format!("{origin}{suffixed}"),
            metadata_paths,
            issuer: issuer.to_owned(),
            scopes,
            header: header.to_owned(),
        })
    }

    /// The RFC 9728 metadata document.
    pub fn metadata(&self) -> Value {
        let mut document = json!({
            "resource": self.resource,
            "authorization_servers": [self.issuer],
            "bearer_methods_supported": ["header"],
        });
        if !self.scopes.is_empty() {
            document["scopes_supported"] = json!(self.scopes);
        }
        document
    }

    /// Whether `path` (no query) is one the metadata is served on.
    pub fn serves(&self, path: &str) -> bool {
        self.metadata_paths.iter().any(|p| p == path)
    }

    /// The `WWW-Authenticate` value for a refusal (`None`: no token was offered).
    pub fn challenge(&self, refusal: Option<Refusal>) -> String {
        let mut value = format!("Bearer resource_metadata=\"{}\"", self.metadata_url);
        if !self.scopes.is_empty() {
            value.push_str(&format!(", scope=\"{}\"", self.scopes.join(" ")));
        }
        if let Some(kind) = refusal {
            value.push_str(&format!(", error=\"invalid_token\", error_description=\"{}\"", description(kind)));
        }
        value
    }

    /// The bearer check of one request: `Ok` when its token verifies for this resource, else
    /// the refusal to answer with (and why, for the log).
    pub fn check(&self, provider: &dyn IdentityProvider, headers: &[(String, String)]) -> Result<(), Unauthorized> {
        let mut context = IdentityContext::new("", "");
        context.headers = headers;
        let offered = context.header(&self.header).and_then(bearer_token);
        if offered.is_none() {
            return Err(self.unauthorized(None, "no bearer token".to_owned()));
        }
        match provider.resolve(&context) {
            Ok(Some(identity)) => {
                // The provider's leeway bounds clock skew when it reads `exp`; the kernel
                // refuses a principal whose expiry has passed by its own clock. A token the
                // kernel would refuse is a 401 here, before anything is decided.
                let now = warden::SystemClock.now();
                if identity.expires_at.is_some_and(|at| at <= now) {
                    return Err(self.unauthorized(Some(Refusal::Expired), "the token has expired".to_owned()));
                }
                Ok(())
            }
            Ok(None) => Err(self.unauthorized(None, "no bearer token".to_owned())),
            Err(IdentityError { kind, detail }) => Err(self.unauthorized(Some(kind), detail)),
        }
    }

    fn unauthorized(&self, refusal: Option<Refusal>, why: String) -> Unauthorized {
        let (token, message) = match refusal {
            None => ("warden.no_token", "this gateway needs a bearer token for its resource".to_owned()),
            Some(kind) => ("warden.invalid_token", format!("the bearer token was refused: {}", description(kind))),
        };
        Unauthorized {
            challenge: self.challenge(refusal),
            body: json!({"jsonrpc": "2.0", "id": null, "error": {"code": -41007, "message": message, "data": {"error": token}}}),
            why,
        }
    }
}

/// The token of a `Bearer <token>` header value (the scheme case-insensitive), or `None`.
pub fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// A 401: the `WWW-Authenticate` value, the body, and why (for the log only).
#[derive(Debug)]
pub struct Unauthorized {
    pub challenge: String,
    pub body: Value,
    pub why: String,
}

/// Fixed words per kind of refusal: nothing from the token.
fn description(kind: Refusal) -> &'static str {
    match kind {
        Refusal::Malformed => "the token is not a well-formed JWT",
        Refusal::Algorithm => "the token's algorithm is not accepted",
        Refusal::TokenType => "the token is not an access token of the accepted type",
        Refusal::Signature => "the token's signature does not verify",
        Refusal::Key => "no accepted key verifies the token",
        Refusal::KeySet => "the issuer's keys could not be fetched",
        Refusal::Issuer => "the token is not from this resource's authorization server",
        Refusal::Audience => "the token's audience is not this resource",
        Refusal::MissingClaim => "the token lacks a required claim",
        Refusal::Expired => "the token has expired",
        Refusal::NotYetValid => "the token is not valid yet",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_uris_are_canonical_https_without_query_or_fragment() {
        // (given, Ok(metadata URL) or Err(part of the refusal))
        let table: [(&str, Result<&str, &str>); 12] = [
            ("https://gw.example/mcp", Ok("https://gw.example/.well-known/oauth-protected-resource/mcp")),
            ("https://gw.example", Ok("https://gw.example/.well-known/oauth-protected-resource")),
            ("https://gw.example/", Ok("https://gw.example/.well-known/oauth-protected-resource")),
            ("https://gw.example:8443/a/b", Ok("https://gw.example:8443/.well-known/oauth-protected-resource/a/b")),
            ("http://127.0.0.1:8900/mcp", Ok("http://127.0.0.1:8900/.well-known/oauth-protected-resource/mcp")),
            ("http://gw.example/mcp", Err("https:// URI")),
            ("https://GW.example/mcp", Err("not in canonical form; write \"https://gw.example/mcp\"")),
            ("https://gw.example:443/mcp", Err("not in canonical form")),
            ("https://gw.example/mcp?x=1", Err("no query and no fragment")),
            ("https://gw.example/mcp#f", Err("no query and no fragment")),
            ("https://u:p@gw.example/mcp", Err("no credentials")),
            ("gw.example/mcp", Err("not an absolute URI")),
        ];
        for (given, expected) in table {
            let found = ProtectedResource::new(given, "https://issuer.example", Vec::new(), "authorization");
            match expected {
                Ok(url) => assert_eq!(found.map(|r| r.metadata_url).as_deref(), Ok(url), "{given}"),
                Err(part) => {
                    let error = found.err().unwrap_or_default();
                    assert!(error.contains(part), "{given}: {error}");
                }
            }
        }
    }

    #[test]
    fn the_metadata_and_the_challenge_name_the_resource() {
        let scoped = ProtectedResource::new(
            "https://gw.example/mcp",
            "https://issuer.example",
            vec!["mcp:tools".into(), "mcp:read".into()],
            "authorization",
        )
        .expect("resource");
        assert_eq!(
            scoped.metadata(),
            json!({
                "resource": "https://gw.example/mcp",
                "authorization_servers": ["https://issuer.example"],
                "bearer_methods_supported": ["header"],
                "scopes_supported": ["mcp:tools", "mcp:read"],
            })
        );
        assert!(scoped.serves("/.well-known/oauth-protected-resource/mcp"));
        assert!(scoped.serves("/.well-known/oauth-protected-resource"));
        assert!(!scoped.serves("/.well-known/oauth-protected-resource/other"));
        assert_eq!(
            scoped.challenge(Some(Refusal::Audience)),
            "Bearer resource_metadata=\"https://gw.example/.well-known/oauth-protected-resource/mcp\", \
             scope=\"mcp:tools mcp:read\", error=\"invalid_token\", \
             error_description=\"the token's audience is not this resource\""
        );
        let plain = ProtectedResource::new("https://gw.example", "https://i", Vec::new(), "authorization").expect("r");
        assert_eq!(plain.metadata().get("scopes_supported"), None);
        assert_eq!(
            plain.challenge(None),
            "Bearer resource_metadata=\"https://gw.example/.well-known/oauth-protected-resource\""
        );
        assert_eq!(plain.metadata_paths, [WELL_KNOWN]);
        for bad in ["", "a b", "a\"b"] {
            assert!(
                ProtectedResource::new("https://gw.example", "https://i", vec![bad.into()], "a").is_err(),
                "{bad:?}"
            );
        }
    }
}
