//! The gateway's own upstream credential (`gateway.upstream_auth`): references resolved through
//! the credential providers sights use (environment variables, or `--credentials-dir`) afresh
//! for every request, so a rotated value is used from the next request on. The value lives in
//! zeroizing buffers from the provider to the socket, and no message here ever carries it:
//! a refusal names the reference and where it was looked for. In `token_exchange` mode the
//! credential is the client's verified token exchanged at the token endpoint (`exchange`), with
//! the client id and secret resolved the same way.

use std::path::Path;
use std::time::Duration;

use warden::document::UpstreamAuth;
use warden::sight::config::Auth;
use warden::sight::credentials::{credential_for, AuthSpec, CredentialProvider, DirectoryProvider, EnvProvider};
use warden::sight::echo::Echo;
use zeroize::Zeroizing;

use super::exchange::Exchanger;

/// How the gateway authenticates to its HTTP upstream.
pub struct UpstreamCredential {
    kind: Kind,
    provider: Box<dyn CredentialProvider>,
    /// Where the provider looks, for the startup line.
    place: String,
}

enum Kind {
    /// The gateway's own static credential.
    Static { auth: Auth, spec: AuthSpec },
    /// The client's verified token, read from `header`, exchanged.
    Exchange { exchanger: Exchanger, header: String },
}

/// With `--identity-jwt`: where the client's verified token is, for `token_exchange`, and how
/// long one exchange may take.
pub struct Subjects {
    /// The header the token was verified in (`Authorization`, or `--identity-jwt-header`).
    pub header: String,
    pub timeout: Duration,
}

/// The environment, as sights read it, with the gateway's own words for a reference it lacks
/// (the gateway has `--credentials-dir`, and no host callback).
struct GatewayEnv;

impl CredentialProvider for GatewayEnv {
    fn resolve(&self, reference: &str) -> Option<Zeroizing<String>> {
        EnvProvider.resolve(reference)
    }

    fn looked_in(&self, reference: &str) -> String {
        format!(
            "Warden looked for the environment variable {reference}, which is not set (or not UTF-8); set it in \
             the gateway's environment, or give --credentials-dir DIR with a file named {reference}"
        )
    }
}

/// The one header of a request, built from resolved values: name lower-cased, value zeroized
/// when dropped. Its `Debug` shows the name only.
pub struct Header {
    pub name: String,
    pub value: Zeroizing<String>,
    /// The echo guard for this value and the values it was built from: what the upstream's
    /// answer to this request is scrubbed of before it reaches the client.
    pub echo: Echo,
}

impl std::fmt::Debug for Header {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Header").field("name", &self.name).finish_non_exhaustive()
    }
}

impl UpstreamCredential {
    /// The document's `upstream_auth` with the provider `--credentials-dir` names (the
    /// environment without it). A directory that is not one is a refusal to start, and so is
    /// `token_exchange` without `subjects` (no verified client token to exchange).
    pub fn new(
        auth: &UpstreamAuth,
        credentials_dir: Option<&Path>,
        subjects: Option<&Subjects>,
    ) -> Result<UpstreamCredential, String> {
        let (provider, place): (Box<dyn CredentialProvider>, String) = match credentials_dir {
            None => (Box::new(GatewayEnv), "from the environment".to_owned()),
            Some(dir) if dir.is_dir() => (
                Box::new(DirectoryProvider { dir: dir.to_path_buf() }),
                format!("from files in {}", super::log::printable(&dir.display().to_string())),
            ),
            Some(dir) => {
                return Err(format!(
                    "--credentials-dir {} is not a directory (one file per credential reference)",
                    super::log::printable(&dir.display().to_string())
                ))
            }
        };
        let kind = match (auth, subjects) {
            (UpstreamAuth::Static(auth), _) => Kind::Static { auth: auth.clone(), spec: auth.spec() },
            (UpstreamAuth::TokenExchange(config), Some(subjects)) => Kind::Exchange {
                exchanger: Exchanger::new(config, subjects.timeout)?,
                header: subjects.header.clone(),
            },
            (UpstreamAuth::TokenExchange(config), None) => {
                return Err(format!(
                    "gateway.upstream_auth (line {}) is token_exchange, which exchanges the client's verified bearer \
                     token: it needs --identity-jwt, which verifies that token for this gateway first (with --principal \
                     or --principal-header there is no verified token to exchange)",
                    config.line
                ))
            }
        };
        Ok(UpstreamCredential { kind, provider, place })
    }

    /// The references the mode reads, comma-separated (never a value).
    pub fn references(&self) -> String {
        let references = match &self.kind {
            Kind::Static { auth, .. } => auth.references(),
            Kind::Exchange { exchanger, .. } => vec![&exchanger.config().client_id, &exchanger.config().client_secret],
        };
        references.iter().map(|r| r.as_str()).collect::<Vec<_>>().join(", ")
    }

    /// The startup line: the mode, the header, the references and where they are read.
    pub fn describe(&self) -> String {
        match &self.kind {
            Kind::Static { auth, .. } => {
                let header = match auth {
                    Auth::ApiKey { header, .. } => header.clone(),
                    _ => "Authorization".to_owned(),
                };
                format!(
                    "upstream credential {} in {header} from {} ({}, resolved per request); the client's token is never forwarded\n",
                    auth.mode(),
                    self.references(),
                    self.place
                )
            }
            Kind::Exchange { exchanger, .. } => {
                let config = exchanger.config();
                let mut target = Vec::new();
                for (name, value) in
                    [("audience", &config.audience), ("resource", &config.resource), ("scope", &config.scope)]
                {
                    if let Some(value) = value {
                        target.push(format!("{name} {value}"));
                    }
                }
                format!(
                    "upstream credential token_exchange in Authorization: the client's verified token exchanged \
                     (RFC 8693) at {} for {}, as client {} by {} ({}, resolved per exchange); issued tokens cached \
                     until shortly before expires_in; the client's token is never forwarded\n",
                    config.token_endpoint,
                    target.join(", "),
                    self.references(),
                    config.auth_method.as_str(),
                    self.place
                )
            }
        }
    }

    /// The client's verified token in `headers`, when this credential exchanges it.
    pub fn subject<'h>(&self, headers: &'h [(String, String)]) -> Option<&'h str> {
        let Kind::Exchange { header, .. } = &self.kind else { return None };
        let (_, value) = headers.iter().find(|(name, _)| name.eq_ignore_ascii_case(header))?;
        super::resource::bearer_token(value)
    }

    /// The header for one request, resolved now (for `token_exchange`, `subject` exchanged or
    /// its cached exchange), or why there is none (the reference and where it was looked for,
    /// or the token endpoint and what failed; never a value).
    pub fn header(&self, subject: Option<&str>) -> Result<Header, String> {
        match &self.kind {
            Kind::Static { spec, .. } => match credential_for(spec, self.provider.as_ref()) {
                Ok(Some(sent)) => {
                    let parts: Vec<&str> = sent.parts.iter().map(|part| part.as_str()).collect();
                    let echo = Echo::for_sent(Some(&sent.value), &parts);
                    Ok(Header { name: sent.name, value: sent.value, echo })
                }
                Ok(None) => Err("the upstream credential's mode sends no header".to_owned()),
                Err(error) => Err(error.message),
            },
            Kind::Exchange { exchanger, .. } => {
                let Some(subject) = subject else {
                    return Err(format!(
                        "the request carries no client token to exchange at {} (the gateway's own requests, such \
                         as its task polls, have none)",
                        exchanger.config().token_endpoint
                    ));
                };
                let token = exchanger.token(subject, self.provider.as_ref())?;
                let mut value = Zeroizing::new(String::with_capacity(7 + token.len()));
                value.push_str("Bearer ");
                value.push_str(&token);
                let echo = Echo::for_sent(Some(&value), &[&token]);
                Ok(Header { name: "authorization".to_owned(), value, echo })
            }
        }
    }

    /// Whether the credential for a request with the client's `headers` resolves now (the
    /// value is dropped, zeroized, at once; an exchanged token stays cached).
    pub fn check(&self, headers: &[(String, String)]) -> Result<(), String> {
        self.header(self.subject(headers)).map(drop)
    }

    /// At startup: whether the references resolve now (for `token_exchange`, the client id and
    /// secret: there is no client token yet).
    pub fn check_at_startup(&self) -> Result<(), String> {
        match &self.kind {
            Kind::Static { .. } => self.header(None).map(drop),
            Kind::Exchange { exchanger, .. } => {
                let config = exchanger.config();
                for reference in [&config.client_id, &config.client_secret] {
                    warden::sight::credentials::resolve_checked(self.provider.as_ref(), reference.as_str())
                        .map_err(|error| error.message)?;
                }
                Ok(())
            }
        }
    }

    /// What a client is told when the credential for its request is unavailable (`why` is what
    /// `header` said): for a static credential its references, and that the log says where they
    /// were looked for; for an exchange, the endpoint and what failed.
    pub fn refusal(&self, why: &str) -> String {
        match &self.kind {
            Kind::Static { .. } => format!(
                "the gateway's upstream credential ({}) is not available, so nothing was sent; the gateway's log \
                 says where it was looked for",
                self.references()
            ),
            Kind::Exchange { .. } => {
                format!("the gateway's upstream credential is not available, so nothing was sent: {why}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use warden::sight::config::parse_named_auth;

    fn auth(json: serde_json::Value) -> UpstreamAuth {
        UpstreamAuth::Static(parse_named_auth(&json, "gateway.upstream_auth").expect("valid"))
    }

    #[test]
    fn a_header_is_built_per_request_from_the_directory_and_never_shown() {
        let dir = std::env::temp_dir().join(format!("warden-upcred-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let bearer = auth(serde_json::json!({"mode": "bearer", "credential": "UPSTREAM_TOKEN"}));
        let credential = UpstreamCredential::new(&bearer, Some(&dir), None).expect("a directory");
        let missing = credential.header(None).expect_err("no file yet");
        assert!(missing.starts_with("credential UPSTREAM_TOKEN is not available"), "{missing}");
        std::fs::write(dir.join("UPSTREAM_TOKEN"), "first-secret-1\n").expect("write");
        let header = credential.header(None).expect("resolves");
        assert_eq!((header.name.as_str(), header.value.as_str()), ("authorization", "Bearer first-secret-1"));
        assert!(!format!("{header:?}").contains("first-secret-1"), "Debug never shows the value");
        std::fs::write(dir.join("UPSTREAM_TOKEN"), "rotated-secret-2").expect("write");
        assert_eq!(credential.header(None).expect("resolves").value.as_str(), "Bearer rotated-secret-2", "rotation");
        std::fs::write(dir.join("UPSTREAM_TOKEN"), "bad\r\nX-Injected: 1").expect("write");
        let injected = credential.header(None).expect_err("a control character");
        assert!(injected.contains("control character") && !injected.contains("Injected"), "{injected}");
        let key = auth(serde_json::json!({"mode": "api_key", "header": "X-Api-Key", "credential": "UPSTREAM_TOKEN"}));
        std::fs::write(dir.join("UPSTREAM_TOKEN"), "k-3").expect("write");
        let header = UpstreamCredential::new(&key, Some(&dir), None).expect("dir").header(None).expect("resolves");
        assert_eq!((header.name.as_str(), header.value.as_str()), ("x-api-key", "k-3"));
        let described = UpstreamCredential::new(&key, Some(&dir), None).expect("dir").describe();
        assert!(described.starts_with("upstream credential api_key in X-Api-Key from UPSTREAM_TOKEN"), "{described}");
        assert!(!described.contains("k-3"));
        std::fs::remove_dir_all(&dir).ok();
        assert!(UpstreamCredential::new(&key, Some(&dir), None).is_err(), "a missing directory refuses to start");
        let unset = auth(serde_json::json!({"mode": "bearer", "credential": "WARDEN_TEST_SURELY_UNSET_UPSTREAM"}));
        let from_env =
            UpstreamCredential::new(&unset, None, None).expect("the environment").header(None).expect_err("unset");
        assert_eq!(
            from_env,
            "credential WARDEN_TEST_SURELY_UNSET_UPSTREAM is not available: Warden looked for the environment variable \
             WARDEN_TEST_SURELY_UNSET_UPSTREAM, which is not set (or not UTF-8); set it in the gateway's environment, \
             or give --credentials-dir DIR with a file named WARDEN_TEST_SURELY_UNSET_UPSTREAM"
        );
    }
}
