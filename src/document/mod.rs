//! The administrator's document (DESIGN §5): loaded strictly, validated fail-fast, hashed.
//!
//! Two dialects share one loader. `schema: warden/v1` is Warden's own: unquoted scalars whose
//! meaning differs between YAML 1.1 and YAML 1.2 (`yes`, `on`, `017`, `1_000`, `1:30`, a date)
//! are refused with a hint to quote them, and anchors and aliases are refused outright.
//! `schema: ctrlrun.policy/v1`…`v8` documents are read the way ctrlrun 0.12.2 reads them —
//! PyYAML's `safe_load` (YAML 1.1) plus ctrlrun's validation — and get ctrlrun's policy hash, so
//! a ctrlrun deployment can move over with its receipts' provenance intact. Where ctrlrun
//! accepts something Warden cannot honour (a control registry, data labels, an inline authority
//! section, M-of-N approvals, the policy-change action), the document is refused with a message
//! that names the feature;
//! it is never loaded with the feature silently dropped.
//!
//! The YAML layer is an event parser (`yaml-rust2`) feeding a tree built here, so every node
//! keeps its line and every mapping can be checked for duplicate keys before anything is
//! resolved. Alias expansion is bounded (an alias bomb is refused), nesting is bounded, the
//! document is at most [`MAX_DOCUMENT_BYTES`], and nothing on these paths panics on input.

mod approval;
mod authority;
mod conditions;
mod ctrlrun;
mod events;
mod evidence;
mod gateway;
mod hash;
mod integer;
mod quote;
mod scalar;
mod schema;
mod schema_kind;
mod tree;
mod upstream;
mod validate;
mod warden;
mod warnings;

pub use gateway::{
    ClientAuthMethod, GatewaySettings, Icons, SamplingTools, TokenExchange, UnknownMethods, UpstreamAuth,
};
pub use upstream::{is_digest, pem_certificate, pem_certificates, UpstreamPins};

use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::Path;

use serde_json::Value;

use crate::clock::Micros;
use crate::condition::Condition;
use crate::decision::Decision;
use crate::template::Template;

use events::{duplicate_anchor, parse_events};
use schema::detect_schema;
pub use schema_kind::Schema;
use schema_kind::WARDEN_V1;
use validate::Cx;

/// The largest document accepted, file or string.
pub const MAX_DOCUMENT_BYTES: usize = 4 * 1024 * 1024;

/// How deep sequences and mappings may nest (alias expansions included).
pub const MAX_NESTING: usize = 128;

/// How many nodes anchors and aliases may materialise in one document. A ctrlrun document that
/// uses anchors for shared rule blocks needs a few hundred; an alias bomb needs billions.
pub const MAX_ALIAS_NODES: usize = 100_000;

/// Names a condition may not address: they are fields of the action or of its principal, not
/// arguments, and a rule written against one would silently match nothing (ctrlrun's rule).
pub const RESERVED_SUBJECTS: [&str; 9] =
    ["action_id", "agent", "claims", "environment", "expires_at", "issuer", "principal", "resource", "user"];

/// Path used for errors about the document as a whole (its bytes, its YAML).
const WHOLE_DOCUMENT: &str = "(document)";
/// Path used for errors about the top-level mapping itself.
const TOP_LEVEL: &str = "top level";

/// Whether decisions are applied or only recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Decisions are applied (the default).
    Enforce,
    /// Everything runs; receipts record what enforce mode would have done.
    Observe,
}

impl Mode {
    /// The mode as the document spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Enforce => "enforce",
            Mode::Observe => "observe",
        }
    }
}

/// The administrator's document, loaded strictly and hashed: the trust boundary.
#[derive(Debug, Clone)]
pub struct Document {
    /// The declared schema.
    pub schema: Schema,
    /// The administrator's label for this version (outside the policy hash).
    pub version: Option<String>,
    /// The environment the document is for, if it names one.
    pub environment: Option<String>,
    /// Enforce or observe.
    pub mode: Mode,
    /// Every action the document lists, by name; any other action is denied.
    pub actions: BTreeMap<String, ActionEntry>,
    /// The `authority` section as written (parsed values), which the policy hash covers.
    pub authority: Option<Value>,
    /// The same section as typed grants (`crate::authority`); `Some` exactly when `authority` is.
    pub authority_config: Option<crate::authority::Authority>,
    /// Validated by the sights module; kept as JSON here.
    pub sources: Option<Value>,
    /// `sources` as validated by `crate::sight::config` at load; empty when absent.
    pub sources_config: crate::sight::config::Sources,
    /// The top-level flag that lets sights and notification webhooks use plain http.
    pub allow_insecure_http: Option<bool>,
    /// `notify`: who is told of a new approval request (`warden/v1` only). Not part of the
    /// policy hash: it decides nothing.
    pub notify: Option<crate::approval::webhook::NotifyConfig>,
    /// `evidence`: the key and the bounds of automatic checkpoints (`warden/v1` only). Not part
    /// of the policy hash: it decides nothing.
    pub evidence: Option<crate::evidence::settings::EvidenceSettings>,
    /// `sign_in`: the JWT issuer people sign in to the console and the operator server through
    /// (`warden/v1` only). Not part of the policy hash: it decides no action.
    pub sign_in: Option<crate::identity::sign_in::SignIn>,
    /// `gateway`: what `warden gateway` does with methods it does not know (`warden/v1` only;
    /// the default otherwise). Not part of the policy hash: it decides no action.
    pub gateway: GatewaySettings,
    /// `sha256:` + hex. ctrlrun's definition for ctrlrun documents; for `warden/v1`, over the
    /// canonical JSON of `{actions, authority, environment, mode, schema, sources}` as parsed
    /// (`version` excluded: relabelling a document does not change the policy).
    pub policy_hash: String,
    /// The canonical policy `policy_hash` is the SHA-256 of, as bytes (canonical JSON): what the
    /// store keeps under the hash (`policies`) and `warden export` carries as
    /// `policies/<hex>.json`. It holds what decides (the entries, `authority`, `sources` with
    /// their credential references), never a credential value.
    pub canonical_policy: Vec<u8>,
    /// Load-time warnings: the document is valid, but something in it is probably a mistake.
    pub warnings: Vec<String>,
}

/// What the document says about one action.
#[derive(Debug, Clone)]
pub struct ActionEntry {
    /// Exactly one of `decision` and a non-empty `rules` is set.
    pub decision: Option<Decision>,
    /// The rules, in order; the first whose conditions all hold decides.
    pub rules: Vec<Rule>,
    /// `TemplateMode::Escaped` for `warden/v1`, `TemplateMode::Raw` for ctrlrun documents.
    pub effect: Option<Template>,
    /// The template that renders what the action acts on.
    pub resource: Option<Template>,
    /// How many FAILED attempts an effect may have before retries are refused.
    pub max_attempts: Option<u32>,
    /// `warden/v1` only.
    pub lease: Option<Micros>,
    /// `warden/v1` only.
    pub description: Option<String>,
    /// `approval` beside `decision: approve` (`warden/v1` only).
    pub approval: Option<crate::approval::Requirement>,
    /// `approval.scoped` beside `decision: approve`: what a scoped grant may reach (`None`: no
    /// scoped grant may be made).
    pub scoped: Option<crate::approval::scope::ScopeLimits>,
    /// `mcp.not_executed_on_error`: for `warden gateway`, an upstream `isError` on this tool
    /// means it did nothing (FAILED, retry allowed) instead of AMBIGUOUS. An unchecked claim.
    pub not_executed_on_error: bool,
    /// `upstream:` pins for `warden gateway` (`warden/v1` and `ctrlrun.policy/v8`).
    pub upstream: Option<UpstreamPins>,
}

/// One rule of an action: its conditions and the decision when they hold.
#[derive(Debug, Clone)]
pub struct Rule {
    /// Empty: the rule always matches. Conditions are in document order; all must hold.
    pub when: Vec<Condition>,
    /// The decision when every condition holds.
    pub decision: Decision,
    /// `approval: {required, roles}` on an `approve` rule (`warden/v1` only); `None` is one
    /// approver, any role.
    pub approval: Option<crate::approval::Requirement>,
    /// `approval.scoped` on an `approve` rule: what a scoped grant may reach (`None`: no scoped
    /// grant may be made under this rule).
    pub scoped: Option<crate::approval::scope::ScopeLimits>,
}

/// Why a document (or an authority or grant file) does not load: where, and what to fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{origin}{}: {path}: {message}", line.map(|l| format!(":{l}")).unwrap_or_default())]
pub struct DocumentError {
    /// The file path, or whatever name the caller gave a string.
    pub origin: String,
    /// Where in the document, e.g. `actions.stripe.refund.rules[1].when.amount_lte`.
    pub path: String,
    /// 1-based line, where one is known.
    pub line: Option<usize>,
    /// What is wrong, and what is allowed there.
    pub message: String,
}

/// Load a document from a file. The origin in errors is the path; a file that is missing,
/// unreadable, not UTF-8 or larger than [`MAX_DOCUMENT_BYTES`] is an error naming it.
pub fn load_file(path: &Path) -> Result<Document, DocumentError> {
    let origin = path.display().to_string();
    let text = read_text(path, &origin)?;
    load_str(&text, &origin)
}

/// A file's text, bounded by [`MAX_DOCUMENT_BYTES`] and required to be UTF-8.
fn read_text(path: &Path, origin: &str) -> Result<String, DocumentError> {
    let whole = |message: String| DocumentError {
        origin: origin.to_owned(),
        path: WHOLE_DOCUMENT.to_owned(),
        line: None,
        message,
    };
    let file = crate::files::open_regular(path).map_err(|e| whole(format!("the document could not be read: {e}")))?;
    let mut bytes = Vec::new();
    let limit = u64::try_from(MAX_DOCUMENT_BYTES).unwrap_or(u64::MAX).saturating_add(1);
    file.take(limit).read_to_end(&mut bytes).map_err(|e| whole(format!("the document could not be read: {e}")))?;
    if bytes.len() > MAX_DOCUMENT_BYTES {
        return Err(whole(too_large_message()));
    }
    String::from_utf8(bytes).map_err(|e| {
        let valid = e.utf8_error().valid_up_to();
        let line = e.as_bytes().get(..valid).map_or(1, |prefix| prefix.iter().filter(|b| **b == b'\n').count() + 1);
        DocumentError {
            origin: origin.to_owned(),
            path: WHOLE_DOCUMENT.to_owned(),
            line: Some(line),
            message: format!("the document is not valid UTF-8 (at byte {valid})"),
        }
    })
}

/// Load a document from text. `origin` names it in errors.
pub fn load_str(text: &str, origin: &str) -> Result<Document, DocumentError> {
    let parsed = parse_text(text, origin)?;
    let Some(root) = parsed.root else {
        return Err(DocumentError {
            origin: origin.to_owned(),
            path: TOP_LEVEL.to_owned(),
            line: None,
            message: "the document is empty; it must be a mapping with 'schema' and 'actions' keys".to_owned(),
        });
    };
    let schema = detect_schema(&root, origin)?;
    let cx = Cx { origin, schema };
    if let Some(line) = parsed.first_anchor {
        if cx.schema == Schema::WardenV1 {
            return Err(cx.error(
                WHOLE_DOCUMENT,
                Some(line),
                "anchors and aliases (&name, *name) are not allowed in warden/v1: every value is \
                 written where it applies, so what a rule says can be read where it stands",
            ));
        }
        if let Some((name, first, second)) = duplicate_anchor(text) {
            return Err(cx.error(
                WHOLE_DOCUMENT,
                Some(second),
                format!("not valid YAML: duplicate anchor '{name}' (first on line {first})"),
            ));
        }
    }
    let root = cx.resolve(root, "")?;
    cx.document(root)
}

/// A standalone authority file: `schema: warden/v1` and `authority:`, nothing else (the policy
/// owns every other key, and two sources for one key is an ambiguity). Attach it to a document
/// with [`Document::with_authority`].
#[derive(Debug, Clone)]
pub struct AuthorityFile {
    /// The section as written; folded into the policy hash.
    pub raw: Value,
    /// The section as typed grants.
    pub authority: crate::authority::Authority,
}

/// Load a standalone authority file; errors name the path.
pub fn load_authority_file(path: &Path) -> Result<AuthorityFile, DocumentError> {
    let origin = path.display().to_string();
    let text = read_text(path, &origin)?;
    load_authority_str(&text, &origin)
}

/// Load a standalone authority file from text; errors name `origin`.
pub fn load_authority_str(text: &str, origin: &str) -> Result<AuthorityFile, DocumentError> {
    let (cx, root) = warden_tree(text, origin)?;
    let Some(root) = root else {
        return Err(cx.error("", None, "the authority file is empty; it holds 'schema: warden/v1' and 'authority:'"));
    };
    let tree::NodeValue::Map(members) = &root.value else {
        return Err(cx.error("", Some(root.line), format!("an authority file must be a mapping, got {}", root.kind())));
    };
    cx.reject_unknown(members, &authority::STANDALONE_KEYS, "")?;
    match members.iter().find(|m| m.key == "schema") {
        Some(member) if member.value.as_str() == Some(WARDEN_V1) => {}
        Some(member) => {
            return Err(cx.error(
                "schema",
                Some(member.line),
                format!("an authority file declares 'schema: {WARDEN_V1}', got {}", member.value.shown()),
            ))
        }
        None => {
            return Err(cx.error(
                "",
                Some(root.line),
                format!("missing 'schema'; an authority file declares 'schema: {WARDEN_V1}'"),
            ))
        }
    }
    let Some(member) = members.iter().find(|m| m.key == "authority") else {
        return Err(cx.error(
            "",
            Some(root.line),
            "missing 'authority'; a file loaded as authority must state what it permits",
        ));
    };
    let authority = cx.authority_config(member)?;
    let raw = cx.json(&member.value, "authority")?;
    Ok(AuthorityFile { raw, authority })
}

/// One top-level member of a settings file ([`load_settings_str`]): its key, its line and its
/// value as JSON.
#[derive(Debug, Clone, PartialEq)]
pub struct Setting {
    /// The key as written.
    pub key: String,
    /// Its 1-based line.
    pub line: usize,
    /// Its value, as JSON.
    pub value: Value,
}

/// A settings file (`warden gateway --settings`): a YAML mapping read as `warden/v1` reads YAML
/// (one value per key, no anchors or aliases, YAML 1.2 scalars, no floats), each top-level
/// member with its line and its value as JSON, in the file's order. What the keys mean is the
/// caller's; an empty file has none. Errors name `origin` and the line.
pub fn load_settings_str(text: &str, origin: &str) -> Result<Vec<Setting>, DocumentError> {
    let (cx, root) = warden_tree(text, origin)?;
    let Some(root) = root else { return Ok(Vec::new()) };
    let tree::NodeValue::Map(members) = &root.value else {
        return Err(cx.error("", Some(root.line), format!("a settings file must be a mapping, got {}", root.kind())));
    };
    members
        .iter()
        .map(|member| {
            let value = cx.json(&member.value, &member.key)?;
            Ok(Setting { key: member.key.clone(), line: member.line, value })
        })
        .collect()
}

/// Load a settings file; errors name the path. A file that is missing, unreadable, not a
/// regular file, not UTF-8 or larger than [`MAX_DOCUMENT_BYTES`] is an error naming it.
pub fn load_settings_file(path: &Path) -> Result<Vec<Setting>, DocumentError> {
    let origin = path.display().to_string();
    let text = read_text(path, &origin)?;
    load_settings_str(&text, &origin)
}

/// A delegated grant (`warden delegate --file`, or the JSON a binding passes): the keys of a
/// grant minus `id`, which is assigned at creation. JSON is YAML, so both arrive here.
pub fn load_grant_str(text: &str, origin: &str) -> Result<crate::authority::Grant, DocumentError> {
    let (cx, root) = warden_tree(text, origin)?;
    let Some(root) = root else {
        return Err(cx.error("", None, "the grant is empty; it needs at least 'subject' and 'actions'"));
    };
    cx.grant(&root, "", authority::GrantOrigin::Delegated)
}

/// Load one grant from a file; errors name the path.
pub fn load_grant_file(path: &Path) -> Result<crate::authority::Grant, DocumentError> {
    let origin = path.display().to_string();
    let text = read_text(path, &origin)?;
    load_grant_str(&text, &origin)
}

/// Constraints read back from storage as `{key: operand}`, parsed by the condition grammar the
/// document uses; the message says what is wrong.
pub fn conditions_from_json(map: &serde_json::Map<String, Value>) -> Result<Vec<Condition>, String> {
    authority::conditions_from_json(map)
}

impl Document {
    /// This document governed by a standalone authority file: refused when the document has its
    /// own `authority:` section (two sources for one key) or is a ctrlrun document. The policy
    /// hash is recomputed with the file's section folded in, so receipts name the grants too.
    pub fn with_authority(mut self, file: AuthorityFile, origin: &str) -> Result<Document, DocumentError> {
        let cx = Cx { origin, schema: self.schema.clone() };
        if self.schema != Schema::WardenV1 {
            return Err(cx.error("authority", None, "an authority file governs warden/v1 documents only"));
        }
        if self.authority.is_some() {
            return Err(cx.error(
                "authority",
                None,
                "the document already has an 'authority:' section; grants come from one place, so remove one of the two",
            ));
        }
        let canonical = cx.warden_canonical(
            &self.actions,
            Some(&file.raw),
            self.environment.as_deref(),
            self.mode,
            self.sources.as_ref(),
        );
        (self.policy_hash, self.canonical_policy) = cx.policy_hash(&canonical)?;
        self.authority = Some(file.raw);
        self.authority_config = Some(file.authority);
        Ok(self)
    }
}

/// Size, characters and YAML events: what every file Warden reads as YAML goes through first.
fn parse_text(text: &str, origin: &str) -> Result<events::Parsed, DocumentError> {
    let whole = |line: Option<usize>, message: String| DocumentError {
        origin: origin.to_owned(),
        path: WHOLE_DOCUMENT.to_owned(),
        line,
        message,
    };
    if text.len() > MAX_DOCUMENT_BYTES {
        return Err(whole(None, too_large_message()));
    }
    if let Some((line, c)) = first_refused_character(text) {
        let why = if matches!(c, '\u{85}' | '\u{2028}' | '\u{2029}') {
            "which YAML 1.1 reads as a line break and YAML 1.2 as text"
        } else {
            "which YAML does not allow unescaped"
        };
        return Err(whole(
            Some(line),
            format!(
                "the document contains the character U+{:04X}, {why}; write it as an escape inside a \
                 double-quoted string",
                u32::from(c)
            ),
        ));
    }
    parse_events(text).map_err(|(line, message)| whole(line, message))
}

/// A `warden/v1`-only file (a standalone authority file, a delegated grant): parsed with
/// `warden/v1`'s scalar rules, anchors refused. `None` for an empty file.
fn warden_tree<'a>(text: &str, origin: &'a str) -> Result<(Cx<'a>, Option<tree::Node>), DocumentError> {
    let parsed = parse_text(text, origin)?;
    let cx = Cx { origin, schema: Schema::WardenV1 };
    if let Some(line) = parsed.first_anchor {
        return Err(cx.error(
            WHOLE_DOCUMENT,
            Some(line),
            "anchors and aliases (&name, *name) are not allowed in warden/v1: every value is written where it \
             applies",
        ));
    }
    let root = match parsed.root {
        None => None,
        Some(raw) => Some(cx.resolve(raw, "")?),
    };
    Ok((cx, root))
}

fn too_large_message() -> String {
    format!("the document is larger than {MAX_DOCUMENT_BYTES} bytes")
}

/// PyYAML's reader refuses the unprintable characters anywhere in the stream; so does Warden,
/// in both dialects. NEL, LINE SEPARATOR and PARAGRAPH SEPARATOR are printable but are line
/// breaks to YAML 1.1 and text to YAML 1.2, so a raw one means two things and is refused too.
fn first_refused_character(text: &str) -> Option<(usize, char)> {
    let mut line = 1;
    for c in text.chars() {
        if c == '\n' {
            line += 1;
        }
        let printable = matches!(c,
            '\t' | '\n' | '\r' | '\u{20}'..='\u{7E}' | '\u{85}' | '\u{A0}'..='\u{D7FF}'
            | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..='\u{10FFFF}');
        if !printable || matches!(c, '\u{85}' | '\u{2028}' | '\u{2029}') {
            return Some((line, c));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::{load_settings_str, Setting};
    use serde_json::json;

    #[test]
    fn a_settings_file_is_its_members_with_lines_and_strict_yaml_is_refused() {
        let text = "# the gateway\nupstream: http://127.0.0.1:9000/mcp\nallow_remote: true\nupstream_timeout: 5\n\
                    allow_origin:\n  - https://a.example\nlisten: '127.0.0.1:0'\n";
        let settings = load_settings_str(text, "g.yaml").expect("loads");
        let expected = [
            ("upstream", 2, json!("http://127.0.0.1:9000/mcp")),
            ("allow_remote", 3, json!(true)),
            ("upstream_timeout", 4, json!(5)),
            ("allow_origin", 5, json!(["https://a.example"])),
            ("listen", 7, json!("127.0.0.1:0")),
        ]
        .map(|(key, line, value)| Setting { key: key.into(), line, value });
        assert_eq!(settings, expected);
        assert_eq!(load_settings_str("", "g.yaml"), Ok(Vec::new()));
        assert_eq!(load_settings_str("# nothing\n", "g.yaml"), Ok(Vec::new()));
        for (text, line, message) in [
            ("a: 1\na: 2\n", 2, "duplicate"),
            ("allow_remote: yes\n", 1, "YAML 1.1"),
            ("a: &x 1\nb: *x\n", 1, "anchors and aliases"),
            ("upstream_timeout: 1.5\n", 1, "floats are not accepted"),
            ("- a\n- b\n", 1, "must be a mapping"),
            ("a: [\n", 1, ""),
        ] {
            let error = load_settings_str(text, "g.yaml").expect_err(text);
            assert_eq!((error.origin.as_str(), error.line.is_some()), ("g.yaml", true), "{text}: {error}");
            assert!(error.line >= Some(line) && error.message.contains(message), "{text}: {error}");
        }
    }
}
