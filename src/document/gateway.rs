//! `warden/v1`'s top-level `gateway` section: what `warden gateway` does with the JSON-RPC
//! methods it does not know, with the icons upstream lists carry, with tool use inside
//! sampling, and which credential it sends upstream. The section decides no action (an action
//! is decided by its entry), so, like `notify`, it is outside the policy hash — the upstream
//! credential too: it names a reference (never a value), changes who the gateway is to the
//! upstream and not what the document allows, and rotating or renaming it must not make every
//! receipt before it cite another policy (as `notify.webhook.secret_ref` does not).

use super::cx::Cx;
use super::error::DocumentError;
use super::evidence::line_of;
use super::tree::{child_path, Member, NodeValue};
use crate::sight::config::{looks_like_secret, parse_named_auth, Auth, CredentialRef};

const GATEWAY_KEYS: [&str; 4] = ["icons", "sampling_tools", "unknown_methods", "upstream_auth"];

/// Headers `warden gateway` writes itself on every upstream request (or relays as the MCP
/// session's), which an `api_key` upstream credential may not take over (compared
/// case-insensitively; `Mcp-*` as a prefix). The HTTP layer's own (`Host`, `Content-Length`,
/// hop-by-hop, `Proxy-*`, …) are refused by the sights' check this reuses.
const GATEWAY_MANAGED_HEADERS: [&str; 8] = [
    "accept",
    "accept-encoding",
    "content-encoding",
    "content-type",
    "last-event-id",
    "mcp-",
    "traceparent",
    "tracestate",
];

/// What `warden gateway` does with a JSON-RPC method that is not on its list of known MCP
/// methods (docs/GATEWAY.md, "Which methods are relayed").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UnknownMethods {
    /// Relayed to the upstream untouched, as ctrlrun's gateway does (the default): an MCP
    /// server's extension methods keep working.
    #[default]
    Relay,
    /// Refused with JSON-RPC `-32601` before anything reaches the upstream.
    Refuse,
}

impl UnknownMethods {
    /// The setting as the document spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            UnknownMethods::Relay => "relay",
            UnknownMethods::Refuse => "refuse",
        }
    }
}

/// What `warden gateway` does with the `icons` (SEP-973) of the lists it relays
/// (docs/GATEWAY.md, "Lists").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Icons {
    /// Every icon is removed (the default): an icon URL is fetched by the client, which tells
    /// its owner who is looking and when, and an SVG may carry script.
    #[default]
    Strip,
    /// Only `data:` URIs of a PNG, JPEG, GIF or WebP image whose bytes are that image are kept;
    /// every other icon (a URL, SVG, anything that does not check) is removed.
    DataUris,
}

impl Icons {
    /// The setting as the document spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Icons::Strip => "strip",
            Icons::DataUris => "data_uris",
        }
    }
}

/// What `warden gateway` does with tool use inside sampling (SEP-1577): a server's
/// `sampling/createMessage` offering the client's model `tools`, and the `tool_use` blocks the
/// client answers with, which the server then runs without any `tools/call` (docs/GATEWAY.md,
/// "Sampling with tools").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SamplingTools {
    /// Refused (the default): such a request is not relayed to the client and such an answer
    /// is not forwarded to the server; the call is refused `-41019` with its receipt.
    #[default]
    Refuse,
    /// Each `tool_use` the client answers with is an action `sampling.<alias>.<tool>` decided
    /// by the kernel before the answer is forwarded (one refused: nothing is forwarded).
    Govern,
}

impl SamplingTools {
    /// The setting as the document spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            SamplingTools::Refuse => "refuse",
            SamplingTools::Govern => "govern",
        }
    }
}

/// `gateway.upstream_auth`: what `warden gateway` sends its HTTP upstream in place of the
/// client's token (which is never forwarded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpstreamAuth {
    /// The gateway's own static credential: a source's `auth` (`bearer`, `basic`, `api_key`),
    /// references resolved per request.
    Static(Auth),
    /// `mode: token_exchange`: the client's verified bearer token exchanged (RFC 8693) for one
    /// the upstream takes.
    TokenExchange(TokenExchange),
}

impl UpstreamAuth {
    /// The mode as the document spells it.
    pub fn mode(&self) -> &'static str {
        match self {
            UpstreamAuth::Static(auth) => auth.mode(),
            UpstreamAuth::TokenExchange(_) => "token_exchange",
        }
    }
}

/// How the gateway authenticates itself to the token endpoint (RFC 6749 §2.3.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClientAuthMethod {
    /// `Authorization: Basic` of the form-encoded client id and secret (the default; every
    /// authorization server supports it).
    #[default]
    ClientSecretBasic,
    /// `client_id` and `client_secret` in the request body.
    ClientSecretPost,
}

impl ClientAuthMethod {
    /// The method as the document (and RFC 8414's registry) spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            ClientAuthMethod::ClientSecretBasic => "client_secret_basic",
            ClientAuthMethod::ClientSecretPost => "client_secret_post",
        }
    }
}

/// `gateway.upstream_auth: {mode: token_exchange, …}`: per request, the client's verified
/// bearer token is the `subject_token` of an RFC 8693 token exchange at `token_endpoint`, and
/// the token issued is what the upstream gets. Names references for the client's id and secret,
/// never values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenExchange {
    /// The authorization server's token endpoint: `https://`, or `http://` on a loopback host.
    pub token_endpoint: String,
    /// `audience`: the logical name of the upstream the token is for.
    pub audience: Option<String>,
    /// `resource`: the upstream's URI (RFC 8707), absolute, no fragment.
    pub resource: Option<String>,
    /// `scope`: space-separated RFC 6749 scope tokens.
    pub scope: Option<String>,
    /// The reference holding the gateway's client id at the token endpoint.
    pub client_id: CredentialRef,
    /// The reference holding the gateway's client secret.
    pub client_secret: CredentialRef,
    /// How the client id and secret are sent.
    pub auth_method: ClientAuthMethod,
    /// The line `upstream_auth` is written on, for refusals made when the gateway starts.
    pub line: usize,
}

/// The keys of `upstream_auth` in `token_exchange` mode.
const TOKEN_EXCHANGE_KEYS: [&str; 8] =
    ["audience", "auth_method", "client_id", "client_secret", "mode", "resource", "scope", "token_endpoint"];

/// The longest `token_endpoint`, `audience`, `resource` or `scope`.
const MAX_EXCHANGE_TEXT: usize = 2048;

/// The `gateway` section; the default when the document has none.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GatewaySettings {
    /// `gateway.unknown_methods`: `relay` (default) or `refuse`.
    pub unknown_methods: UnknownMethods,
    /// `gateway.icons`: `strip` (default) or `data_uris`.
    pub icons: Icons,
    /// `gateway.sampling_tools`: `refuse` (default) or `govern`.
    pub sampling_tools: SamplingTools,
    /// `gateway.upstream_auth`: the credential `warden gateway` sends on every request to an
    /// HTTP upstream, as references resolved per request by the credential providers sights
    /// use (`bearer`, `basic`, `api_key`, as a source's `auth`), or the client's token
    /// exchanged for one (`token_exchange`); `None` when absent or `mode: none`: nothing is
    /// sent (the client's own token never is).
    pub upstream_auth: Option<UpstreamAuth>,
}

impl Cx<'_> {
    /// `gateway: {unknown_methods: relay | refuse, icons: strip | data_uris, sampling_tools:
    /// refuse | govern, upstream_auth: {mode, credential | username + password | header, …}}`.
    pub(super) fn gateway(&self, member: &Member) -> Result<GatewaySettings, DocumentError> {
        let NodeValue::Map(members) = &member.value.value else {
            return Err(self.error(
                "gateway",
                Some(member.line),
                format!(
                    "'gateway' must be a mapping (with 'unknown_methods', 'icons', 'sampling_tools', 'upstream_auth'), got {}",
                    member.value.kind()
                ),
            ));
        };
        self.reject_unknown(members, &GATEWAY_KEYS, "gateway")?;
        let mut settings = GatewaySettings::default();
        if let Some(found) = members.iter().find(|m| m.key == "unknown_methods") {
            settings.unknown_methods = match found.value.as_str() {
                Some("relay") => UnknownMethods::Relay,
                Some("refuse") => UnknownMethods::Refuse,
                _ => {
                    return Err(self.error(
                        &child_path("gateway", "unknown_methods"),
                        Some(found.line),
                        format!("'unknown_methods' must be exactly 'relay' or 'refuse', got {}", found.value.shown()),
                    ))
                }
            };
        }
        if let Some(found) = members.iter().find(|m| m.key == "icons") {
            settings.icons = match found.value.as_str() {
                Some("strip") => Icons::Strip,
                Some("data_uris") => Icons::DataUris,
                _ => {
                    return Err(self.error(
                        &child_path("gateway", "icons"),
                        Some(found.line),
                        format!("'icons' must be exactly 'strip' or 'data_uris', got {}", found.value.shown()),
                    ))
                }
            };
        }
        if let Some(found) = members.iter().find(|m| m.key == "sampling_tools") {
            settings.sampling_tools = match found.value.as_str() {
                Some("refuse") => SamplingTools::Refuse,
                Some("govern") => SamplingTools::Govern,
                _ => {
                    return Err(self.error(
                        &child_path("gateway", "sampling_tools"),
                        Some(found.line),
                        format!("'sampling_tools' must be exactly 'refuse' or 'govern', got {}", found.value.shown()),
                    ))
                }
            };
        }
        if let Some(found) = members.iter().find(|m| m.key == "upstream_auth") {
            settings.upstream_auth = self.upstream_auth(found)?;
        }
        Ok(settings)
    }

    /// `gateway.upstream_auth`: a source's `auth` (the sights' parser and checks), every
    /// reference named, and no header the gateway writes itself; or `token_exchange`.
    fn upstream_auth(&self, found: &Member) -> Result<Option<UpstreamAuth>, DocumentError> {
        let path = child_path("gateway", "upstream_auth");
        if !matches!(found.value.value, NodeValue::Map(_)) {
            return Err(self.error(
                &path,
                Some(found.line),
                format!(
                    "'upstream_auth' must be a mapping such as {{mode: bearer, credential: UPSTREAM_TOKEN}}, got {}",
                    found.value.kind()
                ),
            ));
        }
        let value = self.json(&found.value, &path)?;
        let at = |refused_path: &str| {
            refused_path.strip_prefix(path.as_str()).and_then(|rest| line_of(&found.value, rest)).unwrap_or(found.line)
        };
        if value.get("mode").and_then(serde_json::Value::as_str) == Some("token_exchange") {
            return self.token_exchange(&value, &path, found.line, &at).map(|t| Some(UpstreamAuth::TokenExchange(t)));
        }
        let auth = parse_named_auth(&value, &path).map_err(|e| {
            // The sights' parser knows the modes a source has; the gateway has one more.
            let message = if e.path != child_path(&path, "mode") {
                e.message
            } else if e.message.contains("basic or api_key") {
                e.message.replace("basic or api_key", "basic, api_key or token_exchange")
            } else {
                e.message.replace("basic, api_key", "basic, api_key, token_exchange")
            };
            self.error(&e.path, Some(at(&e.path)), message)
        })?;
        if let Auth::ApiKey { header, .. } = &auth {
            let lower = header.to_ascii_lowercase();
            let managed =
                GATEWAY_MANAGED_HEADERS
                    .iter()
                    .any(|m| if m.ends_with('-') { lower.starts_with(m) } else { lower == *m });
            if managed {
                let header_path = child_path(&path, "header");
                return Err(self.error(
                    &header_path,
                    Some(at(&header_path)),
                    format!(
                        "the header '{header}' is one warden gateway writes itself on upstream requests (the MCP \
                         session's, framing, tracing) and cannot carry a credential; name another header"
                    ),
                ));
            }
        }
        Ok(match auth {
            Auth::None => None,
            auth => Some(UpstreamAuth::Static(auth)),
        })
    }

    /// `upstream_auth: {mode: token_exchange, token_endpoint, client_id, client_secret,
    /// audience | resource, scope?, auth_method?}`: every key known, no literal secret anywhere,
    /// the endpoint `https://` (or `http://` on loopback), at least one of `audience` and
    /// `resource` (a token exchanged for no named target is a token for anything).
    fn token_exchange(
        &self,
        value: &serde_json::Value,
        path: &str,
        line: usize,
        at: &dyn Fn(&str) -> usize,
    ) -> Result<TokenExchange, DocumentError> {
        let serde_json::Value::Object(map) = value else {
            return Err(self.error(path, Some(line), "'upstream_auth' must be a mapping"));
        };
        let refuse = |key: &str, message: String| {
            let key_path = child_path(path, key);
            let line = at(&key_path);
            self.error(&key_path, Some(line), message)
        };
        for (key, item) in map {
            if looks_like_secret(key) {
                return Err(self.error(
                    path,
                    Some(line),
                    format!("literal secret in a key of {path}; the key is not repeated here"),
                ));
            }
            if item.as_str().is_some_and(looks_like_secret) {
                let key_path = child_path(path, key);
                return Err(refuse(
                    key,
                    format!(
                        "literal secret in {key_path}: configuration holds credential references (names such as \
                         STS_CLIENT_SECRET), never credential values; the value is not repeated here"
                    ),
                ));
            }
            if !TOKEN_EXCHANGE_KEYS.contains(&key.as_str()) {
                let shown = if key.len() <= 64 && key.bytes().all(|b| b.is_ascii_graphic()) {
                    format!("'{key}'")
                } else {
                    "a key that is not a plain name".to_owned()
                };
                return Err(self.error(
                    &child_path(path, key),
                    Some(at(&child_path(path, key))),
                    format!(
                        "unknown key {shown} for mode token_exchange; allowed here: {}",
                        TOKEN_EXCHANGE_KEYS.join(", ")
                    ),
                ));
            }
        }
        let text = |key: &str| -> Result<Option<String>, DocumentError> {
            match map.get(key) {
                None => Ok(None),
                Some(serde_json::Value::String(text))
                    if !text.trim().is_empty()
                        && text.len() <= MAX_EXCHANGE_TEXT
                        && !text.chars().any(char::is_control) =>
                {
                    Ok(Some(text.clone()))
                }
                Some(_) => Err(refuse(
                    key,
                    format!("'{key}' must be a non-empty string of at most {MAX_EXCHANGE_TEXT} characters, without control characters"),
                )),
            }
        };
        let reference = |key: &str| -> Result<CredentialRef, DocumentError> {
            let Some(name) = text(key)? else {
                return Err(refuse(key, format!("token_exchange needs '{key}', a credential reference (such as STS_CLIENT_ID); none is derived here")));
            };
            CredentialRef::parse(&name).ok_or_else(|| {
                refuse(key, "must be a credential reference matching ^[A-Za-z_][A-Za-z0-9_]{0,127}$ (the value is not repeated)".to_owned())
            })
        };
        let Some(token_endpoint) = text("token_endpoint")? else {
            return Err(refuse(
                "token_endpoint",
                "token_exchange needs 'token_endpoint', the authorization server's token endpoint (https://…)"
                    .to_owned(),
            ));
        };
        check_token_endpoint(&token_endpoint).map_err(|why| refuse("token_endpoint", why))?;
        let audience = text("audience")?;
        let resource = text("resource")?;
        if let Some(resource) = &resource {
            let absolute =
                url::Url::parse(resource).is_ok_and(|url| url.fragment().is_none() && !url.cannot_be_a_base());
            if !absolute || resource.contains(char::is_whitespace) {
                return Err(refuse(
                    "resource",
                    "'resource' must be an absolute URI without a fragment (RFC 8693 §2.1, RFC 8707)".to_owned(),
                ));
            }
        }
        if audience.is_none() && resource.is_none() {
            return Err(self.error(
                path,
                Some(line),
                "token_exchange needs 'audience' or 'resource' (or both): the upstream the exchanged token is for; a \
                 token exchanged for no named target would be good for any",
            ));
        }
        let scope = text("scope")?;
        if let Some(scope) = &scope {
            // RFC 6749 §3.3: scope-token = 1*( %x21 / %x23-5B / %x5D-7E ), separated by one space.
            let token = |t: &str| {
                !t.is_empty()
                    && t.bytes().all(|b| b == 0x21 || (0x23..=0x5b).contains(&b) || (0x5d..=0x7e).contains(&b))
            };
            if !scope.split(' ').all(token) {
                return Err(refuse(
                    "scope",
                    "'scope' must be RFC 6749 scope tokens separated by single spaces (no quotes or backslashes)"
                        .to_owned(),
                ));
            }
        }
        let client_id = reference("client_id")?;
        let client_secret = reference("client_secret")?;
        let auth_method = match text("auth_method")?.as_deref() {
            None | Some("client_secret_basic") => ClientAuthMethod::ClientSecretBasic,
            Some("client_secret_post") => ClientAuthMethod::ClientSecretPost,
            Some(_) => {
                return Err(refuse(
                    "auth_method",
                    "'auth_method' must be exactly 'client_secret_basic' or 'client_secret_post'".to_owned(),
                ))
            }
        };
        Ok(TokenExchange { token_endpoint, audience, resource, scope, client_id, client_secret, auth_method, line })
    }
}

/// A token endpoint the gateway may POST a client's token to: an absolute `https://` URL, or
/// `http://` on a loopback host (a test's authorization server); no credentials in it, no
/// fragment (RFC 6749 §3.2), nothing the URL parser would rewrite.
fn check_token_endpoint(text: &str) -> Result<(), String> {
    if text.chars().any(|c| c.is_whitespace() || c == '\\') {
        return Err("'token_endpoint' holds whitespace or a backslash; give a plain https:// URL".to_owned());
    }
    let url = url::Url::parse(text).map_err(|e| format!("'token_endpoint' is not an absolute URL ({e})"))?;
    let loopback = match url.host() {
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(address)) => address.is_loopback(),
        Some(url::Host::Ipv6(address)) => address.is_loopback(),
        None => false,
    };
    match url.scheme() {
        "https" => {}
        "http" if loopback => {}
        "http" => {
            return Err("'token_endpoint' must be https:// (http:// only on a loopback host: 127.0.0.1, [::1], \
                 localhost): the client's token is sent there"
                .to_owned())
        }
        _ => return Err("'token_endpoint' must be an https:// URL".to_owned()),
    }
    if url.host().is_none() || !url.username().is_empty() || url.password().is_some() {
        return Err(
            "'token_endpoint' must have a host and no credentials in it (name them in client_id and client_secret)"
                .to_owned(),
        );
    }
    if url.fragment().is_some() {
        return Err("'token_endpoint' has a #fragment, which a token endpoint may not have (RFC 6749 §3.2)".to_owned());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::load_str;
    use super::*;

    const HEAD: &str = "schema: warden/v1\nactions:\n  a.b: {decision: allow}\n";

    #[test]
    fn the_gateway_section_is_optional_and_strict() {
        let plain = load_str(HEAD, "t").expect("loads");
        assert_eq!(plain.gateway.unknown_methods, UnknownMethods::Relay);
        let refuse = load_str(&format!("{HEAD}gateway:\n  unknown_methods: refuse\n"), "t").expect("loads");
        assert_eq!(refuse.gateway.unknown_methods, UnknownMethods::Refuse);
        assert_eq!((plain.gateway.icons, refuse.gateway.icons), (Icons::Strip, Icons::Strip));
        let data = load_str(&format!("{HEAD}gateway:\n  icons: data_uris\n"), "t").expect("loads");
        assert_eq!(data.gateway.icons, Icons::DataUris);
        assert_eq!(data.policy_hash, plain.policy_hash, "the section decides no action");
        assert_eq!(refuse.policy_hash, plain.policy_hash, "the section decides no action");
        assert_eq!(plain.gateway.sampling_tools, SamplingTools::Refuse, "tool use in sampling is refused by default");
        let govern = load_str(&format!("{HEAD}gateway:\n  sampling_tools: govern\n"), "t").expect("loads");
        assert_eq!(govern.gateway.sampling_tools, SamplingTools::Govern);
        assert_eq!(govern.policy_hash, plain.policy_hash, "the section decides no action");
        let refuse_tools = load_str(&format!("{HEAD}gateway: {{sampling_tools: refuse}}\n"), "t").expect("loads");
        assert_eq!(refuse_tools.gateway.sampling_tools, SamplingTools::Refuse);
        let relay = load_str(&format!("{HEAD}gateway: {{unknown_methods: relay}}\n"), "t").expect("loads");
        assert_eq!(relay.gateway.unknown_methods, UnknownMethods::Relay);
        let table = [
            ("gateway: refuse\n", "gateway", "must be a mapping"),
            ("gateway:\n  unknown_methods: deny\n", "gateway.unknown_methods", "exactly 'relay' or 'refuse'"),
            ("gateway:\n  unknown_methods: Refuse\n", "gateway.unknown_methods", "exactly 'relay' or 'refuse'"),
            (
                "gateway:\n  unknown_method: refuse\n",
                "gateway.unknown_method",
                "allowed here: icons, sampling_tools, unknown_methods, upstream_auth",
            ),
            ("gateway:\n  sampling_tools: allow\n", "gateway.sampling_tools", "exactly 'refuse' or 'govern'"),
            ("gateway:\n  sampling_tools: true\n", "gateway.sampling_tools", "exactly 'refuse' or 'govern'"),
            ("gateway:\n  sampling_tools: Govern\n", "gateway.sampling_tools", "exactly 'refuse' or 'govern'"),
            ("gateway:\n  icons: keep\n", "gateway.icons", "exactly 'strip' or 'data_uris'"),
            ("gateway:\n  icons: [strip]\n", "gateway.icons", "exactly 'strip' or 'data_uris'"),
            ("gateway:\n  upstream_auth: bearer\n", "gateway.upstream_auth", "must be a mapping"),
            ("gateway:\n  upstream_auth: {credential: T}\n", "gateway.upstream_auth.mode", "needs a mode"),
            ("gateway:\n  upstream_auth: {mode: token, credential: T}\n", "gateway.upstream_auth.mode", "one of none"),
            ("gateway:\n  upstream_auth: {mode: bearer}\n", "gateway.upstream_auth.credential", "none is derived"),
            (
                "gateway:\n  upstream_auth: {mode: basic, username: U}\n",
                "gateway.upstream_auth.password",
                "none is derived",
            ),
            ("gateway:\n  upstream_auth: {mode: api_key, credential: K}\n", "gateway.upstream_auth.header", "needs a header"),
            (
                "gateway:\n  upstream_auth: {mode: bearer, credential: 'bad-name'}\n",
                "gateway.upstream_auth.credential",
                "must be a credential reference",
            ),
            (
                "gateway:\n  upstream_auth: {mode: bearer, credential: T, header: X-Key}\n",
                "gateway.upstream_auth.header",
                "allowed here",
            ),
            (
                "gateway:\n  upstream_auth:\n    mode: bearer\n    credential: ghp_abcdefghijklmnopqrstuvwxyz0123456789\n",
                "gateway.upstream_auth.credential",
                "literal secret",
            ),
            (
                "gateway:\n  upstream_auth: {mode: api_key, header: Connection, credential: K}\n",
                "gateway.upstream_auth.header",
                "managed by the HTTP layer",
            ),
            (
                "gateway:\n  upstream_auth: {mode: api_key, header: Proxy-Authorization, credential: K}\n",
                "gateway.upstream_auth.header",
                "managed by the HTTP layer",
            ),
            (
                "gateway:\n  upstream_auth: {mode: api_key, header: Mcp-Session-Id, credential: K}\n",
                "gateway.upstream_auth.header",
                "warden gateway writes itself",
            ),
            (
                "gateway:\n  upstream_auth: {mode: api_key, header: content-type, credential: K}\n",
                "gateway.upstream_auth.header",
                "warden gateway writes itself",
            ),
            (
                "gateway:\n  upstream_auth: {mode: api_key, header: 'X Key', credential: K}\n",
                "gateway.upstream_auth.header",
                "valid HTTP header name",
            ),
        ];
        for (tail, path, message) in table {
            let error = load_str(&format!("{HEAD}{tail}"), "t").expect_err(tail);
            assert_eq!(error.path, path, "{tail}");
            assert!(error.message.contains(message), "{tail}: {}", error.message);
        }
        let error =
            load_str(&format!("{HEAD}gateway:\n  upstream_auth:\n    mode: bearer\n    credential: 'a b'\n"), "t")
                .expect_err("not a reference");
        assert_eq!(error.line, Some(7), "the line of the refused credential");
        let ctrlrun =
            "schema: ctrlrun.policy/v8\nactions:\n  a.b: {decision: allow}\ngateway: {unknown_methods: refuse}\n";
        assert!(load_str(ctrlrun, "t").is_err(), "ctrlrun documents have no gateway section");
    }

    #[test]
    fn the_upstream_credential_is_a_reference_outside_the_policy_hash() {
        let plain = load_str(HEAD, "t").expect("loads");
        assert_eq!(plain.gateway.upstream_auth, None, "no upstream credential by default");
        let bearer =
            load_str(&format!("{HEAD}gateway:\n  upstream_auth: {{mode: bearer, credential: UPSTREAM_TOKEN}}\n"), "t")
                .expect("loads");
        let Some(UpstreamAuth::Static(Auth::Bearer { credential })) = &bearer.gateway.upstream_auth else {
            panic!("{:?}", bearer.gateway.upstream_auth)
        };
        assert_eq!(credential.as_str(), "UPSTREAM_TOKEN");
        assert_eq!(bearer.policy_hash, plain.policy_hash, "the credential decides no action");
        let key = load_str(
            &format!("{HEAD}gateway:\n  upstream_auth: {{mode: api_key, header: X-Api-Key, credential: K, prefix: 'Key '}}\n"),
            "t",
        )
        .expect("loads");
        let Some(UpstreamAuth::Static(Auth::ApiKey { header, credential, prefix })) = &key.gateway.upstream_auth else {
            panic!("{:?}", key.gateway.upstream_auth)
        };
        assert_eq!((header.as_str(), credential.as_str(), prefix.as_deref()), ("X-Api-Key", "K", Some("Key ")));
        let basic =
            load_str(&format!("{HEAD}gateway:\n  upstream_auth: {{mode: basic, username: U, password: P}}\n"), "t")
                .expect("loads");
        assert!(matches!(basic.gateway.upstream_auth, Some(UpstreamAuth::Static(Auth::Basic { .. }))));
        let none = load_str(&format!("{HEAD}gateway:\n  upstream_auth: {{mode: none}}\n"), "t").expect("loads");
        assert_eq!(none.gateway.upstream_auth, None, "mode none sends nothing");
        let authorization = load_str(
            &format!("{HEAD}gateway:\n  upstream_auth: {{mode: api_key, header: Authorization, credential: K}}\n"),
            "t",
        )
        .expect("a raw key in Authorization is a scheme some APIs use");
        assert!(matches!(authorization.gateway.upstream_auth, Some(UpstreamAuth::Static(Auth::ApiKey { .. }))));
    }

    #[test]
    fn token_exchange_names_an_endpoint_a_target_and_references_only() {
        let plain = load_str(HEAD, "t").expect("loads");
        let full = load_str(
            &format!(
                "{HEAD}gateway:\n  upstream_auth:\n    mode: token_exchange\n    token_endpoint: https://sts.example/oauth2/token\n    \
                 audience: status-api\n    resource: https://status.example/mcp\n    scope: status.read status.write\n    \
                 client_id: STS_CLIENT_ID\n    client_secret: STS_CLIENT_SECRET\n    auth_method: client_secret_post\n"
            ),
            "t",
        )
        .expect("loads");
        let Some(UpstreamAuth::TokenExchange(exchange)) = &full.gateway.upstream_auth else {
            panic!("{:?}", full.gateway.upstream_auth)
        };
        assert_eq!(exchange.token_endpoint, "https://sts.example/oauth2/token");
        assert_eq!(exchange.audience.as_deref(), Some("status-api"));
        assert_eq!(exchange.resource.as_deref(), Some("https://status.example/mcp"));
        assert_eq!(exchange.scope.as_deref(), Some("status.read status.write"));
        assert_eq!(
            (exchange.client_id.as_str(), exchange.client_secret.as_str()),
            ("STS_CLIENT_ID", "STS_CLIENT_SECRET")
        );
        assert_eq!((exchange.auth_method, exchange.line), (ClientAuthMethod::ClientSecretPost, 5));
        assert_eq!(full.policy_hash, plain.policy_hash, "the exchange decides no action");
        let minimal = |endpoint: &str| {
            format!(
                "{HEAD}gateway:\n  upstream_auth: {{mode: token_exchange, token_endpoint: '{endpoint}', audience: a, \
                 client_id: I, client_secret: S}}\n"
            )
        };
        for endpoint in [
            "http://127.0.0.1:9/token",
            "http://[::1]:9/token",
            "http://localhost:9/token",
            "https://sts.example/t?x=1",
        ] {
            let loaded = load_str(&minimal(endpoint), "t").expect(endpoint);
            let Some(UpstreamAuth::TokenExchange(exchange)) = &loaded.gateway.upstream_auth else {
                panic!("{endpoint}")
            };
            assert_eq!(exchange.auth_method, ClientAuthMethod::ClientSecretBasic, "the default");
            assert_eq!(exchange.resource, None);
        }
        let at = "gateway.upstream_auth";
        let table = [
            (minimal("http://sts.example/token"), "gateway.upstream_auth.token_endpoint", "must be https://"),
            (minimal("http://10.0.0.1/token"), "gateway.upstream_auth.token_endpoint", "must be https://"),
            (minimal("ftp://sts.example/token"), "gateway.upstream_auth.token_endpoint", "must be an https:// URL"),
            (minimal("https://u:p@sts.example/token"), "gateway.upstream_auth.token_endpoint", "no credentials"),
            (minimal("https://sts.example/token#f"), "gateway.upstream_auth.token_endpoint", "fragment"),
            (minimal("/token"), "gateway.upstream_auth.token_endpoint", "not an absolute URL"),
            (
                format!("{HEAD}gateway:\n  upstream_auth: {{mode: token_exchange, audience: a, client_id: I, client_secret: S}}\n"),
                "gateway.upstream_auth.token_endpoint",
                "needs 'token_endpoint'",
            ),
            (
                format!("{HEAD}gateway:\n  upstream_auth: {{mode: token_exchange, token_endpoint: 'https://s/t', client_id: I, client_secret: S}}\n"),
                at,
                "needs 'audience' or 'resource'",
            ),
            (
                format!("{HEAD}gateway:\n  upstream_auth: {{mode: token_exchange, token_endpoint: 'https://s/t', audience: a, client_secret: S}}\n"),
                "gateway.upstream_auth.client_id",
                "needs 'client_id'",
            ),
            (
                format!("{HEAD}gateway:\n  upstream_auth: {{mode: token_exchange, token_endpoint: 'https://s/t', audience: a, client_id: I}}\n"),
                "gateway.upstream_auth.client_secret",
                "needs 'client_secret'",
            ),
            (
                format!(
                    "{HEAD}gateway:\n  upstream_auth:\n    mode: token_exchange\n    token_endpoint: 'https://s/t'\n    audience: a\n    \
                     client_id: I\n    client_secret: ghp_abcdefghijklmnopqrstuvwxyz0123456789\n"
                ),
                "gateway.upstream_auth.client_secret",
                "literal secret",
            ),
            (
                format!(
                    "{HEAD}gateway:\n  upstream_auth: {{mode: token_exchange, token_endpoint: 'https://s/t', audience: a, \
                     client_id: I, client_secret: 'not a name'}}\n"
                ),
                "gateway.upstream_auth.client_secret",
                "must be a credential reference",
            ),
            (
                format!(
                    "{HEAD}gateway:\n  upstream_auth: {{mode: token_exchange, token_endpoint: 'https://s/t', audience: a, \
                     client_id: I, client_secret: S, credential: T}}\n"
                ),
                "gateway.upstream_auth.credential",
                "unknown key 'credential' for mode token_exchange",
            ),
            (
                format!(
                    "{HEAD}gateway:\n  upstream_auth: {{mode: token_exchange, token_endpoint: 'https://s/t', audience: a, \
                     client_id: I, client_secret: S, auth_method: private_key_jwt}}\n"
                ),
                "gateway.upstream_auth.auth_method",
                "exactly 'client_secret_basic' or 'client_secret_post'",
            ),
            (
                format!(
                    "{HEAD}gateway:\n  upstream_auth: {{mode: token_exchange, token_endpoint: 'https://s/t', resource: 'status', \
                     client_id: I, client_secret: S}}\n"
                ),
                "gateway.upstream_auth.resource",
                "absolute URI",
            ),
            (
                format!(
                    "{HEAD}gateway:\n  upstream_auth: {{mode: token_exchange, token_endpoint: 'https://s/t', audience: a, \
                     scope: 'a  \"b\"', client_id: I, client_secret: S}}\n"
                ),
                "gateway.upstream_auth.scope",
                "scope tokens",
            ),
            (
                format!(
                    "{HEAD}gateway:\n  upstream_auth: {{mode: token_exchange, token_endpoint: 'https://s/t', audience: [a], \
                     client_id: I, client_secret: S}}\n"
                ),
                "gateway.upstream_auth.audience",
                "non-empty string",
            ),
            (
                format!("{HEAD}gateway:\n  upstream_auth: {{mode: exchange}}\n"),
                "gateway.upstream_auth.mode",
                "must be one of none, bearer, basic, api_key, token_exchange",
            ),
            (
                format!("{HEAD}gateway:\n  upstream_auth: {{audience: a}}\n"),
                "gateway.upstream_auth.mode",
                "needs a mode: none, bearer, basic, api_key or token_exchange",
            ),
        ];
        for (document, path, message) in &table {
            let error = load_str(document, "t").expect_err(document);
            assert_eq!(&error.path, path, "{document}");
            assert!(error.message.contains(message), "{document}: {}", error.message);
            assert!(!error.message.contains("ghp_abcdef"), "a secret is never repeated");
        }
        let literal = load_str(&table[10].0, "t").expect_err("a literal secret");
        assert_eq!(literal.line, Some(10), "the line of the refused client_secret");
        let unknown = load_str(&table[12].0, "t").expect_err("an unknown key");
        assert_eq!(unknown.line, Some(5), "the line of the refused key");
    }
}
