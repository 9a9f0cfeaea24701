//! The gateway's own upstream credential (`gateway.upstream_auth`): references resolved through
//! the credential providers sights use (environment variables, or `--credentials-dir`) afresh
//! for every request, so a rotated value is used from the next request on. The value lives in
//! zeroizing buffers from the provider to the socket, and no message here ever carries it:
//! a refusal names the reference and where it was looked for.

use std::path::Path;

use warden::sight::config::Auth;
use warden::sight::credentials::{credential_for, AuthSpec, CredentialProvider, DirectoryProvider, EnvProvider};
use warden::sight::echo::Echo;
use zeroize::Zeroizing;

/// How the gateway authenticates to its HTTP upstream.
pub struct UpstreamCredential {
    auth: Auth,
    spec: AuthSpec,
    provider: Box<dyn CredentialProvider>,
    /// Where the provider looks, for the startup line.
    place: String,
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
    /// environment without it). A directory that is not one is a refusal to start.
    pub fn new(auth: &Auth, credentials_dir: Option<&Path>) -> Result<UpstreamCredential, String> {
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
        Ok(UpstreamCredential { auth: auth.clone(), spec: auth.spec(), provider, place })
    }

    /// The references the mode reads, comma-separated (never a value).
    pub fn references(&self) -> String {
        self.auth.references().iter().map(|r| r.as_str()).collect::<Vec<_>>().join(", ")
    }

    /// The startup line: the mode, the header, the references and where they are read.
    pub fn describe(&self) -> String {
        let header = match &self.auth {
            Auth::ApiKey { header, .. } => header.clone(),
            _ => "Authorization".to_owned(),
        };
        format!(
            "upstream credential {} in {header} from {} ({}, resolved per request); the client's token is never forwarded\n",
            self.auth.mode(),
            self.references(),
            self.place
        )
    }

    /// The header for one request, resolved now, or why there is none (the reference and where
    /// it was looked for; never a value).
    pub fn header(&self) -> Result<Header, String> {
        match credential_for(&self.spec, self.provider.as_ref()) {
            Ok(Some(sent)) => {
                let parts: Vec<&str> = sent.parts.iter().map(|part| part.as_str()).collect();
                let echo = Echo::for_sent(Some(&sent.value), &parts);
                Ok(Header { name: sent.name, value: sent.value, echo })
            }
            Ok(None) => Err("the upstream credential's mode sends no header".to_owned()),
            Err(error) => Err(error.message),
        }
    }

    /// Whether the credential resolves now (the value is dropped, zeroized, at once).
    pub fn check(&self) -> Result<(), String> {
        self.header().map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use warden::sight::config::parse_named_auth;

    fn auth(json: serde_json::Value) -> Auth {
        parse_named_auth(&json, "gateway.upstream_auth").expect("valid")
    }

    #[test]
    fn a_header_is_built_per_request_from_the_directory_and_never_shown() {
        let dir = std::env::temp_dir().join(format!("warden-upcred-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let bearer = auth(serde_json::json!({"mode": "bearer", "credential": "UPSTREAM_TOKEN"}));
        let credential = UpstreamCredential::new(&bearer, Some(&dir)).expect("a directory");
        let missing = credential.header().expect_err("no file yet");
        assert!(missing.starts_with("credential UPSTREAM_TOKEN is not available"), "{missing}");
        std::fs::write(dir.join("UPSTREAM_TOKEN"), "first-secret-1\n").expect("write");
        let header = credential.header().expect("resolves");
        assert_eq!((header.name.as_str(), header.value.as_str()), ("authorization", "Bearer first-secret-1"));
        assert!(!format!("{header:?}").contains("first-secret-1"), "Debug never shows the value");
        std::fs::write(dir.join("UPSTREAM_TOKEN"), "rotated-secret-2").expect("write");
        assert_eq!(credential.header().expect("resolves").value.as_str(), "Bearer rotated-secret-2", "rotation");
        std::fs::write(dir.join("UPSTREAM_TOKEN"), "bad\r\nX-Injected: 1").expect("write");
        let injected = credential.header().expect_err("a control character");
        assert!(injected.contains("control character") && !injected.contains("Injected"), "{injected}");
        let key = auth(serde_json::json!({"mode": "api_key", "header": "X-Api-Key", "credential": "UPSTREAM_TOKEN"}));
        std::fs::write(dir.join("UPSTREAM_TOKEN"), "k-3").expect("write");
        let header = UpstreamCredential::new(&key, Some(&dir)).expect("dir").header().expect("resolves");
        assert_eq!((header.name.as_str(), header.value.as_str()), ("x-api-key", "k-3"));
        let described = UpstreamCredential::new(&key, Some(&dir)).expect("dir").describe();
        assert!(described.starts_with("upstream credential api_key in X-Api-Key from UPSTREAM_TOKEN"), "{described}");
        assert!(!described.contains("k-3"));
        std::fs::remove_dir_all(&dir).ok();
        assert!(UpstreamCredential::new(&key, Some(&dir)).is_err(), "a missing directory refuses to start");
        let unset = auth(serde_json::json!({"mode": "bearer", "credential": "WARDEN_TEST_SURELY_UNSET_UPSTREAM"}));
        let from_env = UpstreamCredential::new(&unset, None).expect("the environment").header().expect_err("unset");
        assert_eq!(
            from_env,
            "credential WARDEN_TEST_SURELY_UNSET_UPSTREAM is not available: Warden looked for the environment variable \
             WARDEN_TEST_SURELY_UNSET_UPSTREAM, which is not set (or not UTF-8); set it in the gateway's environment, \
             or give --credentials-dir DIR with a file named WARDEN_TEST_SURELY_UNSET_UPSTREAM"
        );
    }
}
