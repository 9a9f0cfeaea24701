//! Loading: a file or a string through size and character checks, the YAML event parser and
//! the resolver, into a [`Document`], a standalone authority file, a settings file or a grant.

use std::io::Read as _;
use std::path::Path;

use serde_json::Value;

use crate::condition::Condition;

use super::authority;
use super::cx::Cx;
use super::error::{DocumentError, TOP_LEVEL, WHOLE_DOCUMENT};
use super::events::{self, duplicate_anchor, parse_events};
use super::limits::MAX_DOCUMENT_BYTES;
use super::model::Document;
use super::schema::detect_schema;
use super::schema_kind::{Schema, WARDEN_V1};
use super::tree;

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
