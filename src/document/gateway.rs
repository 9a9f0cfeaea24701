//! `warden/v1`'s top-level `gateway` section: what `warden gateway` does with the JSON-RPC
//! methods it does not know, and with the icons upstream lists carry. The section decides no
//! action (an action is decided by its entry), so, like `notify`, it is outside the policy hash.

use super::tree::{child_path, Member, NodeValue};
use super::validate::Cx;
use super::DocumentError;

const GATEWAY_KEYS: [&str; 3] = ["icons", "sampling_tools", "unknown_methods"];

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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GatewaySettings {
    /// `gateway.unknown_methods`: `relay` (default) or `refuse`.
    pub unknown_methods: UnknownMethods,
    /// `gateway.icons`: `strip` (default) or `data_uris`.
    pub icons: Icons,
    /// `gateway.sampling_tools`: `refuse` (default) or `govern`.
    pub sampling_tools: SamplingTools,
}

impl Cx<'_> {
    /// `gateway: {unknown_methods: relay | refuse, icons: strip | data_uris, sampling_tools:
    /// refuse | govern}`.
    pub(super) fn gateway(&self, member: &Member) -> Result<GatewaySettings, DocumentError> {
        let NodeValue::Map(members) = &member.value.value else {
            return Err(self.error(
                "gateway",
                Some(member.line),
                format!(
                    "'gateway' must be a mapping (with 'unknown_methods', 'icons', 'sampling_tools'), got {}",
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
        Ok(settings)
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
                "allowed here: icons, sampling_tools, unknown_methods",
            ),
            ("gateway:\n  sampling_tools: allow\n", "gateway.sampling_tools", "exactly 'refuse' or 'govern'"),
            ("gateway:\n  sampling_tools: true\n", "gateway.sampling_tools", "exactly 'refuse' or 'govern'"),
            ("gateway:\n  sampling_tools: Govern\n", "gateway.sampling_tools", "exactly 'refuse' or 'govern'"),
            ("gateway:\n  icons: keep\n", "gateway.icons", "exactly 'strip' or 'data_uris'"),
            ("gateway:\n  icons: [strip]\n", "gateway.icons", "exactly 'strip' or 'data_uris'"),
        ];
        for (tail, path, message) in table {
            let error = load_str(&format!("{HEAD}{tail}"), "t").expect_err(tail);
            assert_eq!(error.path, path, "{tail}");
            assert!(error.message.contains(message), "{tail}: {}", error.message);
        }
        let ctrlrun =
            "schema: ctrlrun.policy/v8\nactions:\n  a.b: {decision: allow}\ngateway: {unknown_methods: refuse}\n";
        assert!(load_str(ctrlrun, "t").is_err(), "ctrlrun documents have no gateway section");
    }
}
