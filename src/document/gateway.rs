//! `warden/v1`'s top-level `gateway` section: what `warden gateway` does with the JSON-RPC
//! methods it does not know, with the icons upstream lists carry, with tool use inside
//! sampling, and which credential it sends upstream. The section decides no action (an action
//! is decided by its entry), so, like `notify`, it is outside the policy hash — the upstream
//! credential too: it names a reference (never a value), changes who the gateway is to the
//! upstream and not what the document allows, and rotating or renaming it must not make every
//! receipt before it cite another policy (as `notify.webhook.secret_ref` does not).

use super::evidence::line_of;
use super::tree::{child_path, Member, NodeValue};
use super::validate::Cx;
use super::DocumentError;
use crate::sight::config::{parse_named_auth, Auth};

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
    /// use (`bearer`, `basic`, `api_key`, as a source's `auth`); `None` when absent or
    /// `mode: none`: nothing is sent (the client's own token never is).
    pub upstream_auth: Option<Auth>,
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
    /// reference named, and no header the gateway writes itself.
    fn upstream_auth(&self, found: &Member) -> Result<Option<Auth>, DocumentError> {
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
        let auth = parse_named_auth(&value, &path).map_err(|e| self.error(&e.path, Some(at(&e.path)), e.message))?;
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
            auth => Some(auth),
        })
    }
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
        let Some(Auth::Bearer { credential }) = &bearer.gateway.upstream_auth else {
            panic!("{:?}", bearer.gateway.upstream_auth)
        };
        assert_eq!(credential.as_str(), "UPSTREAM_TOKEN");
        assert_eq!(bearer.policy_hash, plain.policy_hash, "the credential decides no action");
        let key = load_str(
            &format!("{HEAD}gateway:\n  upstream_auth: {{mode: api_key, header: X-Api-Key, credential: K, prefix: 'Key '}}\n"),
            "t",
        )
        .expect("loads");
        let Some(Auth::ApiKey { header, credential, prefix }) = &key.gateway.upstream_auth else {
            panic!("{:?}", key.gateway.upstream_auth)
        };
        assert_eq!((header.as_str(), credential.as_str(), prefix.as_deref()), ("X-Api-Key", "K", Some("Key ")));
        let basic =
            load_str(&format!("{HEAD}gateway:\n  upstream_auth: {{mode: basic, username: U, password: P}}\n"), "t")
                .expect("loads");
        assert!(matches!(basic.gateway.upstream_auth, Some(Auth::Basic { .. })));
        let none = load_str(&format!("{HEAD}gateway:\n  upstream_auth: {{mode: none}}\n"), "t").expect("loads");
        assert_eq!(none.gateway.upstream_auth, None, "mode none sends nothing");
        let authorization = load_str(
            &format!("{HEAD}gateway:\n  upstream_auth: {{mode: api_key, header: Authorization, credential: K}}\n"),
            "t",
        )
        .expect("a raw key in Authorization is a scheme some APIs use");
        assert!(matches!(authorization.gateway.upstream_auth, Some(Auth::ApiKey { .. })));
    }
}
