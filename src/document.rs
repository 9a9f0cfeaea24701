//! The administrator's document (DESIGN §5): loaded strictly, validated fail-fast, hashed.
//!
//! Two dialects share one loader. `schema: warden/v1` is Warden's own: unquoted scalars whose
//! meaning differs between YAML 1.1 and YAML 1.2 (`yes`, `on`, `017`, `1_000`, `1:30`, a date)
//! are refused with a hint to quote them, and anchors and aliases are refused outright.
//! `schema: ctrlrun.policy/v1`…`v5` documents are read the way ctrlrun 0.12.2 reads them —
//! PyYAML's `safe_load` (YAML 1.1) plus ctrlrun's validation — and get ctrlrun's policy hash, so
//! a ctrlrun deployment can move over with its receipts' provenance intact. Where ctrlrun
//! accepts something Warden cannot honour (a control registry, data labels, MCP options, an
//! inline authority section), the document is refused with a message that names the feature;
//! it is never loaded with the feature silently dropped.
//!
//! The YAML layer is an event parser (`yaml-rust2`) feeding a tree built here, so every node
//! keeps its line and every mapping can be checked for duplicate keys before anything is
//! resolved. Alias expansion is bounded (an alias bomb is refused), nesting is bounded, the
//! document is at most [`MAX_DOCUMENT_BYTES`], and nothing on these paths panics on input.

use std::collections::{BTreeMap, HashMap};
use std::io::Read as _;
use std::path::Path;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Map, Number, Value};
use yaml_rust2::parser::{Event, Parser, Tag};
use yaml_rust2::scanner::{Scanner, TScalarStyle, TokenType};

use crate::canonical::{canonical_bytes, sha256_prefixed};
use crate::clock::{parse_duration, Micros};
use crate::decision::Decision;
use crate::template::{Template, TemplateMode};

/// The largest document accepted, file or string.
pub const MAX_DOCUMENT_BYTES: usize = 4 * 1024 * 1024;

/// How deep sequences and mappings may nest (alias expansions included).
pub const MAX_NESTING: usize = 128;

/// How many nodes anchors and aliases may materialise in one document. A ctrlrun document that
/// uses anchors for shared rule blocks needs a few hundred; an alias bomb needs billions.
pub const MAX_ALIAS_NODES: usize = 100_000;

/// Python refuses to print an `int` longer than this (`sys.int_info.str_digits_check_threshold`),
/// so ctrlrun cannot hash one; neither does Warden.
const MAX_INT_DIGITS: usize = 4300;

/// Names a condition may not address: they are fields of the action or of its principal, not
/// arguments, and a rule written against one would silently match nothing (ctrlrun's rule).
pub const RESERVED_SUBJECTS: [&str; 9] =
    ["action_id", "agent", "claims", "environment", "expires_at", "issuer", "principal", "resource", "user"];

/// ctrlrun's derived subject (data labels, `ctrlrun.policy/v4`). Warden has no data labels, so
/// it is refused as a subject and as a placeholder rather than read as an ordinary argument.
const DATA_SCOPE: &str = "data_scope";

/// The one action name ctrlrun's policy-change flow owns (`ctrlrun.policy/v6`).
const POLICY_CHANGE_ACTION: &str = "ctrlrun.policy.change";

const WARDEN_V1: &str = "warden/v1";
const CTRLRUN_SCHEMA_PREFIX: &str = "ctrlrun.policy/v";
const NEWEST_CTRLRUN: u8 = 5;
const DEFAULT_CTRLRUN_ENVIRONMENT: &str = "production";

const YAML_STR_TAG: &str = "tag:yaml.org,2002:str";
const YAML_SEQ_TAG: &str = "tag:yaml.org,2002:seq";
const YAML_MAP_TAG: &str = "tag:yaml.org,2002:map";

/// Path used for errors about the document as a whole (its bytes, its YAML).
const WHOLE_DOCUMENT: &str = "(document)";
/// Path used for errors about the top-level mapping itself.
const TOP_LEVEL: &str = "top level";

const WARDEN_TOP_KEYS: [&str; 8] =
    ["actions", "allow_insecure_http", "authority", "environment", "mode", "schema", "sources", "version"];
const CTRLRUN_TOP_KEYS: [&str; 7] = ["actions", "authority", "controls", "environment", "mode", "schema", "version"];
const WARDEN_ENTRY_KEYS: [&str; 7] =
    ["decision", "description", "effect", "lease", "max_attempts", "resource", "rules"];
/// ctrlrun 0.12.2's `_ENTRY_KEYS`; `approvals_required` and `upstream` need v6 and v8.
const CTRLRUN_ENTRY_KEYS: [&str; 10] = [
    "approvals_required",
    "controls",
    "data",
    "decision",
    "effect",
    "max_attempts",
    "mcp",
    "resource",
    "rules",
    "upstream",
];
const WARDEN_RULE_KEYS: [&str; 2] = ["decision", "when"];
const CTRLRUN_RULE_KEYS: [&str; 3] = ["controls", "decision", "when"];
const MCP_KEYS: [&str; 1] = ["not_executed_on_error"];

/// ctrlrun's operators, longest first, so `amount_neq` splits as (`amount`, `neq`) and never as
/// (`amount_n`, `eq`). The order within one length is ctrlrun's (a stable sort of its tuple).
const OPERATORS_BY_LENGTH: [(&str, Op); 7] = [
    ("neq", Op::Neq),
    ("lte", Op::Lte),
    ("gte", Op::Gte),
    ("eq", Op::Eq),
    ("in", Op::In),
    ("lt", Op::Lt),
    ("gt", Op::Gt),
];

/// Verbs whose actions usually change the world; such an action with no effect template gets a
/// load-time warning, because nothing would stop it running twice.
const WRITE_VERBS: [&str; 8] = ["create", "delete", "deploy", "grant", "refund", "send", "transfer", "update"];

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Schema {
    WardenV1,
    /// `ctrlrun.policy/vN`, N in 1..=5.
    Ctrlrun(u8),
}

impl Schema {
    /// The schema string as the document spells it.
    pub fn name(&self) -> String {
        match self {
            Schema::WardenV1 => WARDEN_V1.to_owned(),
            Schema::Ctrlrun(version) => format!("{CTRLRUN_SCHEMA_PREFIX}{version}"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Enforce,
    Observe,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Enforce => "enforce",
            Mode::Observe => "observe",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Document {
    pub schema: Schema,
    pub version: Option<String>,
    pub environment: Option<String>,
    pub mode: Mode,
    pub actions: BTreeMap<String, ActionEntry>,
    /// Parsed and shape-validated by the authority module; kept as JSON here.
    pub authority: Option<Value>,
    /// Validated by the sights module; kept as JSON here.
    pub sources: Option<Value>,
    pub allow_insecure_http: Option<bool>,
    /// `sha256:` + hex. ctrlrun's definition for ctrlrun documents; for `warden/v1`, over the
    /// canonical JSON of `{actions, authority, environment, mode, schema, sources}` as parsed
    /// (`version` excluded: relabelling a document does not change the policy).
    pub policy_hash: String,
    /// Load-time warnings: the document is valid, but something in it is probably a mistake.
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct ActionEntry {
    /// Exactly one of `decision` and a non-empty `rules` is set.
    pub decision: Option<Decision>,
    pub rules: Vec<Rule>,
    /// `TemplateMode::Escaped` for `warden/v1`, `TemplateMode::Raw` for ctrlrun documents.
    pub effect: Option<Template>,
    pub resource: Option<Template>,
    pub max_attempts: Option<u32>,
    /// `warden/v1` only.
    pub lease: Option<Micros>,
    /// `warden/v1` only.
    pub description: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Rule {
    /// Empty: the rule always matches. Conditions are in document order; all must hold.
    pub when: Vec<Condition>,
    pub decision: Decision,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Eq,
    Neq,
    In,
    Lt,
    Lte,
    Gt,
    Gte,
}

impl Op {
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Eq => "eq",
            Op::Neq => "neq",
            Op::In => "in",
            Op::Lt => "lt",
            Op::Lte => "lte",
            Op::Gt => "gt",
            Op::Gte => "gte",
        }
    }

    /// `lt`, `lte`, `gt`, `gte`: integers only.
    pub fn is_order(self) -> bool {
        matches!(self, Op::Lt | Op::Lte | Op::Gt | Op::Gte)
    }
}

#[derive(Debug, Clone)]
pub struct Condition {
    /// The key as written, e.g. `amount_gte`.
    pub key: String,
    /// The argument it tests, e.g. `amount`.
    pub subject: String,
    pub op: Op,
    /// An integer for the order ops, a list for `in`, any JSON value (no floats) otherwise.
    pub operand: Value,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{origin}{}: {path}: {message}", line.map(|l| format!(":{l}")).unwrap_or_default())]
pub struct DocumentError {
    /// The file path, or whatever name the caller gave a string.
    pub origin: String,
    /// Where in the document, e.g. `actions.stripe.refund.rules[1].when.amount_lte`.
    pub path: String,
    /// 1-based line, where one is known.
    pub line: Option<usize>,
    pub message: String,
}

/// Load a document from a file. The origin in errors is the path; a file that is missing,
/// unreadable, not UTF-8 or larger than [`MAX_DOCUMENT_BYTES`] is an error naming it.
pub fn load_file(path: &Path) -> Result<Document, DocumentError> {
    let origin = path.display().to_string();
    let whole = |message: String| DocumentError {
        origin: origin.clone(),
        path: WHOLE_DOCUMENT.to_owned(),
        line: None,
        message,
    };
    let file = std::fs::File::open(path).map_err(|e| whole(format!("the document could not be read: {e}")))?;
    let mut bytes = Vec::new();
    let limit = u64::try_from(MAX_DOCUMENT_BYTES).unwrap_or(u64::MAX).saturating_add(1);
    file.take(limit).read_to_end(&mut bytes).map_err(|e| whole(format!("the document could not be read: {e}")))?;
    if bytes.len() > MAX_DOCUMENT_BYTES {
        return Err(whole(too_large_message()));
    }
    let text = String::from_utf8(bytes).map_err(|e| {
        let valid = e.utf8_error().valid_up_to();
        let line = e.as_bytes().get(..valid).map_or(1, |prefix| prefix.iter().filter(|b| **b == b'\n').count() + 1);
        DocumentError {
            origin: origin.clone(),
            path: WHOLE_DOCUMENT.to_owned(),
            line: Some(line),
            message: format!("the document is not valid UTF-8 (at byte {valid})"),
        }
    })?;
    load_str(&text, &origin)
}

/// Load a document from text. `origin` names it in errors.
pub fn load_str(text: &str, origin: &str) -> Result<Document, DocumentError> {
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
    let parsed = parse_events(text).map_err(|(line, message)| whole(line, message))?;
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

// ---------------------------------------------------------------------------------------------
// YAML events → a raw tree (scalars unresolved, lines kept, aliases expanded within bounds)
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct Raw {
    line: usize,
    kind: RawKind,
}

#[derive(Debug, Clone)]
enum RawKind {
    Scalar { text: String, plain: bool, tag: Option<String> },
    Seq { items: Vec<Raw>, tag: Option<String> },
    Map { entries: Vec<(Raw, Raw)>, tag: Option<String> },
}

struct Parsed {
    root: Option<Raw>,
    /// The line of the first anchor, if the document has any.
    first_anchor: Option<usize>,
}

enum Frame {
    Seq { line: usize, anchor: usize, tag: Option<String>, items: Vec<Raw> },
    Map { line: usize, anchor: usize, tag: Option<String>, entries: Vec<(Raw, Raw)>, key: Option<Raw> },
}

struct Anchored {
    node: Raw,
    size: usize,
    height: usize,
}

type SyntaxError = (Option<usize>, String);

fn tag_text(tag: Option<Tag>) -> Option<String> {
    tag.map(|tag| format!("{}{}", tag.handle, tag.suffix))
}

fn parse_events(text: &str) -> Result<Parsed, SyntaxError> {
    let mut parser = Parser::new_from_str(text);
    let mut stack: Vec<Frame> = Vec::new();
    let mut anchors: HashMap<usize, Anchored> = HashMap::new();
    let mut root: Option<Raw> = None;
    let mut documents = 0usize;
    let mut materialised = 0usize;
    let mut first_anchor: Option<usize> = None;
    let too_deep = |line: usize| (Some(line), format!("containers nest deeper than {MAX_NESTING} levels"));
    loop {
        let (event, mark) =
            parser.next_token().map_err(|e| (Some(e.marker().line()), format!("not valid YAML: {}", e.info())))?;
        let line = mark.line();
        let completed: Option<(Raw, usize)> = match event {
            Event::StreamEnd => break,
            Event::Nothing | Event::StreamStart | Event::DocumentEnd => None,
            Event::DocumentStart => {
                documents += 1;
                if documents > 1 {
                    return Err((
                        Some(line),
                        "a document holds one YAML document, and a second one starts here".into(),
                    ));
                }
                None
            }
            Event::Alias(id) => {
                first_anchor.get_or_insert(line);
                let Some(anchored) = anchors.get(&id) else {
                    return Err((
                        Some(line),
                        "an alias refers to the node that contains it (a recursive alias)".into(),
                    ));
                };
                if stack.len() + anchored.height > MAX_NESTING {
                    return Err(too_deep(line));
                }
                materialised = materialised.saturating_add(anchored.size);
                if materialised > MAX_ALIAS_NODES {
                    return Err((
                        Some(line),
                        format!(
                            "anchors and aliases expand to more than {MAX_ALIAS_NODES} nodes; refused as an \
                             alias bomb"
                        ),
                    ));
                }
                let mut node = anchored.node.clone();
                node.line = line;
                Some((node, 0))
            }
            Event::Scalar(text, style, anchor, tag) => {
                let plain = style == TScalarStyle::Plain;
                Some((Raw { line, kind: RawKind::Scalar { text, plain, tag: tag_text(tag) } }, anchor))
            }
            Event::SequenceStart(anchor, tag) => {
                if stack.len() >= MAX_NESTING {
                    return Err(too_deep(line));
                }
                stack.push(Frame::Seq { line, anchor, tag: tag_text(tag), items: Vec::new() });
                None
            }
            Event::MappingStart(anchor, tag) => {
                if stack.len() >= MAX_NESTING {
                    return Err(too_deep(line));
                }
                stack.push(Frame::Map { line, anchor, tag: tag_text(tag), entries: Vec::new(), key: None });
                None
            }
            Event::SequenceEnd => match stack.pop() {
                Some(Frame::Seq { line, anchor, tag, items }) => {
                    Some((Raw { line, kind: RawKind::Seq { items, tag } }, anchor))
                }
                _ => return Err((Some(line), "not valid YAML: a sequence ends that never started".into())),
            },
            Event::MappingEnd => match stack.pop() {
                Some(Frame::Map { line, anchor, tag, entries, key: None }) => {
                    Some((Raw { line, kind: RawKind::Map { entries, tag } }, anchor))
                }
                _ => return Err((Some(line), "not valid YAML: a mapping ends that never started".into())),
            },
        };
        let Some((node, anchor)) = completed else { continue };
        if anchor != 0 {
            first_anchor = Some(first_anchor.map_or(node.line, |first| first.min(node.line)));
            let (size, height) = measure(&node);
            materialised = materialised.saturating_add(size);
            if materialised > MAX_ALIAS_NODES {
                return Err((
                    Some(node.line),
                    format!("anchors and aliases expand to more than {MAX_ALIAS_NODES} nodes"),
                ));
            }
            anchors.insert(anchor, Anchored { node: node.clone(), size, height });
        }
        match stack.last_mut() {
            None => root = Some(node),
            Some(Frame::Seq { items, .. }) => items.push(node),
            Some(Frame::Map { entries, key, .. }) => match key.take() {
                None => *key = Some(node),
                Some(name) => entries.push((name, node)),
            },
        }
    }
    if !stack.is_empty() {
        return Err((None, "not valid YAML: the document ends inside a container".into()));
    }
    Ok(Parsed { root, first_anchor })
}

/// (nodes, container height) of a raw tree. Recursion is bounded by [`MAX_NESTING`].
fn measure(node: &Raw) -> (usize, usize) {
    match &node.kind {
        RawKind::Scalar { .. } => (1, 0),
        RawKind::Seq { items, .. } => {
            items.iter().map(measure).fold((1, 1), |(n, h), (cn, ch)| (n + cn, h.max(ch + 1)))
        }
        RawKind::Map { entries, .. } => entries.iter().fold((1, 1), |(n, h), (k, v)| {
            let (kn, kh) = measure(k);
            let (vn, vh) = measure(v);
            (n + kn + vn, h.max(kh + 1).max(vh + 1))
        }),
    }
}

/// PyYAML refuses an anchor name defined twice; the event parser silently rebinds it, so the
/// tokens are scanned once more (only for documents that have anchors at all).
fn duplicate_anchor(text: &str) -> Option<(String, usize, usize)> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    for token in Scanner::new(text.chars()) {
        if let TokenType::Anchor(name) = token.1 {
            let line = token.0.line();
            if let Some(first) = seen.get(&name) {
                return Some((name, *first, line));
            }
            seen.insert(name, line);
        }
    }
    None
}

// ---------------------------------------------------------------------------------------------
// The schema decides how scalars are read, so it is found before anything is resolved
// ---------------------------------------------------------------------------------------------

fn raw_string(node: &Raw) -> Option<&str> {
    match &node.kind {
        RawKind::Scalar { text, tag, .. } if tag.as_deref().is_none_or(|t| t == YAML_STR_TAG) => Some(text),
        _ => None,
    }
}

fn raw_kind_name(node: &Raw) -> &'static str {
    match &node.kind {
        RawKind::Scalar { .. } => "a scalar",
        RawKind::Seq { .. } => "a list",
        RawKind::Map { .. } => "a mapping",
    }
}

fn detect_schema(root: &Raw, origin: &str) -> Result<Schema, DocumentError> {
    let error = |line: Option<usize>, message: String| DocumentError {
        origin: origin.to_owned(),
        path: TOP_LEVEL.to_owned(),
        line,
        message,
    };
    let RawKind::Map { entries, .. } = &root.kind else {
        let empty = matches!(&root.kind, RawKind::Scalar { text, plain: true, tag: None } if is_null_text(text));
        if empty {
            return Err(error(
                Some(root.line),
                "the document is empty; it must be a mapping with 'schema' and 'actions' keys".into(),
            ));
        }
        return Err(error(
            Some(root.line),
            format!("the document must be a mapping with 'schema' and 'actions' keys, got {}", raw_kind_name(root)),
        ));
    };
    let Some((key, value)) = entries.iter().find(|(key, _)| raw_string(key) == Some("schema")) else {
        return Err(error(
            Some(root.line),
            format!(
                "missing 'schema'; a document declares 'schema: {WARDEN_V1}' (or a ctrlrun schema, \
                 {CTRLRUN_SCHEMA_PREFIX}1 to {CTRLRUN_SCHEMA_PREFIX}{NEWEST_CTRLRUN}), and none is ever assumed"
            ),
        ));
    };
    let path_error = |message: String| DocumentError {
        origin: origin.to_owned(),
        path: "schema".to_owned(),
        line: Some(key.line),
        message,
    };
    let Some(name) = raw_string(value) else {
        return Err(path_error(format!("'schema' must be a string, got {}", raw_kind_name(value))));
    };
    if name == WARDEN_V1 {
        return Ok(Schema::WardenV1);
    }
    if let Some(version) = name.strip_prefix(CTRLRUN_SCHEMA_PREFIX) {
        let supported = match version {
            "1" => Some(1),
            "2" => Some(2),
            "3" => Some(3),
            "4" => Some(4),
            "5" => Some(5),
            "6" | "7" | "8" => return Err(path_error(later_ctrlrun_message(name, version))),
            _ => None,
        };
        if let Some(version) = supported {
            return Ok(Schema::Ctrlrun(version));
        }
    }
    let shown: String = name.chars().take(60).collect();
    Err(path_error(format!(
        "unknown schema '{shown}'; expected '{WARDEN_V1}' or one of '{CTRLRUN_SCHEMA_PREFIX}1' to \
         '{CTRLRUN_SCHEMA_PREFIX}{NEWEST_CTRLRUN}'"
    )))
}

fn later_ctrlrun_message(name: &str, version: &str) -> String {
    let mut features = vec![
        "'approver_role' on controls",
        "'approvals_required' (M-of-N approvals)",
        "the 'ctrlrun.policy.change' action",
    ];
    if version != "6" {
        features.push("'tasks' and 'budgets' on grants");
    }
    if version == "8" {
        features.push("'upstream' pins on actions");
    }
    format!(
        "schema '{name}' is not supported: Warden reads {CTRLRUN_SCHEMA_PREFIX}1 to \
         {CTRLRUN_SCHEMA_PREFIX}{NEWEST_CTRLRUN}, and does not implement what later versions add \
         ({}). Declare the oldest schema your document needs, or write it as '{WARDEN_V1}'",
        features.join(", ")
    )
}

// ---------------------------------------------------------------------------------------------
// Scalar resolution: YAML 1.1 as PyYAML reads it, YAML 1.2 core, and Warden's refusal of the gap
// ---------------------------------------------------------------------------------------------

/// A resolved plain scalar.
#[derive(Debug, Clone, PartialEq)]
enum Scalar {
    Null,
    Bool(bool),
    /// Canonical decimal text, as Python prints the `int`.
    Int(String),
    Float(f64),
    /// PyYAML's implicit timestamp (a `date` or `datetime` in Python).
    Timestamp,
    Str,
}

struct Patterns {
    bool11: Regex,
    float11: Regex,
    int11: Regex,
    null: Regex,
    timestamp11: Regex,
    int12: Regex,
    float12: Regex,
    leading_zero: Regex,
}

static PATTERNS: LazyLock<Result<Patterns, String>> = LazyLock::new(|| {
    let compile = |pattern: &str| Regex::new(pattern).map_err(|e| e.to_string());
    Ok(Patterns {
        // PyYAML's resolver.py, verbatim but for the verbose-mode whitespace.
        bool11: compile(r"^(?:yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF)$")?,
        float11: compile(
            r"^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
        )?,
        int11: compile(
            r"^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$",
        )?,
        null: compile(r"^(?:~|null|Null|NULL|)$")?,
        timestamp11: compile(
            r"^(?:[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]|[0-9][0-9][0-9][0-9]-[0-9][0-9]?-[0-9][0-9]?(?:[Tt]|[ \t]+)[0-9][0-9]?:[0-9][0-9]:[0-9][0-9](?:\.[0-9]*)?(?:[ \t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?)$",
        )?,
        // YAML 1.2.2 §10.3.2, the core schema.
        int12: compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$")?,
        float12: compile(
            r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
        )?,
        leading_zero: compile(r"^[-+]?0[0-9_]+$")?,
    })
});

fn patterns() -> Result<&'static Patterns, String> {
    PATTERNS.as_ref().map_err(|e| format!("internal error: a scalar pattern failed to compile: {e}"))
}

fn is_null_text(text: &str) -> bool {
    matches!(text, "" | "~" | "null" | "Null" | "NULL")
}

/// A plain scalar as PyYAML's `SafeLoader` resolves and constructs it. `Err` where PyYAML (and
/// so ctrlrun) refuses the document.
fn yaml11(text: &str) -> Result<Scalar, String> {
    let p = patterns()?;
    if p.bool11.is_match(text) {
        return Ok(Scalar::Bool(matches!(text.to_ascii_lowercase().as_str(), "yes" | "true" | "on")));
    }
    if p.float11.is_match(text) {
        return Ok(Scalar::Float(float11(text)?));
    }
    if p.int11.is_match(text) {
        return int11(text).map(Scalar::Int);
    }
    if text == "<<" {
        return Err("YAML merge keys ('<<') are not supported; write the keys out".into());
    }
    if p.null.is_match(text) {
        return Ok(Scalar::Null);
    }
    if p.timestamp11.is_match(text) {
        return Ok(Scalar::Timestamp);
    }
    if text == "=" {
        return Err("a plain '=' is YAML 1.1's value key, which no loader constructs; quote it".into());
    }
    Ok(Scalar::Str)
}

/// PyYAML's `construct_yaml_int`, with Python's unbounded integers.
fn int11(text: &str) -> Result<String, String> {
    let cleaned: String = text.chars().filter(|c| *c != '_').collect();
    let (negative, body) = split_sign(&cleaned);
    let invalid = || format!("'{}' is not a valid integer", shorten(text));
    let magnitude = if body == "0" {
        "0".to_owned()
    } else if let Some(digits) = body.strip_prefix("0b") {
        radix_to_decimal(digits, 2).ok_or_else(invalid)??
    } else if let Some(digits) = body.strip_prefix("0x") {
        radix_to_decimal(digits, 16).ok_or_else(invalid)??
    } else if body.starts_with('0') {
        radix_to_decimal(body, 8).ok_or_else(invalid)??
    } else if body.contains(':') {
        sexagesimal_to_decimal(body).ok_or_else(invalid)??
    } else {
        decimal(body)?
    };
    Ok(signed(negative, magnitude))
}

/// PyYAML's `construct_yaml_float`.
fn float11(text: &str) -> Result<f64, String> {
    let cleaned = text.replace('_', "").to_ascii_lowercase();
    let (negative, body) = split_sign(&cleaned);
    let sign = if negative { -1.0 } else { 1.0 };
    let invalid = || format!("'{}' is not a valid float", shorten(text));
    if body == ".inf" {
        return Ok(sign * f64::INFINITY);
    }
    if body == ".nan" {
        return Ok(f64::NAN);
    }
    if body.contains(':') {
        let mut value = 0.0;
        let mut base = 1.0;
        for part in body.split(':').rev() {
            let digit: f64 = part.parse().map_err(|_| invalid())?;
            value += digit * base;
            base *= 60.0;
        }
        return Ok(sign * value);
    }
    body.parse::<f64>().map(|v| sign * v).map_err(|_| invalid())
}

/// A plain scalar under the YAML 1.2 core schema.
fn yaml12(text: &str) -> Result<Scalar, String> {
    let p = patterns()?;
    if is_null_text(text) {
        return Ok(Scalar::Null);
    }
    match text {
        "true" | "True" | "TRUE" => return Ok(Scalar::Bool(true)),
        "false" | "False" | "FALSE" => return Ok(Scalar::Bool(false)),
        _ => {}
    }
    if p.int12.is_match(text) {
        let magnitude = if let Some(digits) = text.strip_prefix("0o") {
            radix_to_decimal(digits, 8).unwrap_or_else(|| Err(format!("'{}' is not a valid integer", shorten(text))))?
        } else if let Some(digits) = text.strip_prefix("0x") {
            radix_to_decimal(digits, 16)
                .unwrap_or_else(|| Err(format!("'{}' is not a valid integer", shorten(text))))?
        } else {
            let (negative, body) = split_sign(text);
            return Ok(Scalar::Int(signed(negative, decimal(body)?)));
        };
        return Ok(Scalar::Int(magnitude));
    }
    if p.float12.is_match(text) {
        let lower = text.to_ascii_lowercase();
        let (negative, body) = split_sign(&lower);
        let sign = if negative { -1.0 } else { 1.0 };
        let value = match body {
            ".inf" => f64::INFINITY,
            ".nan" => f64::NAN,
            _ => body.parse::<f64>().map_err(|_| format!("'{}' is not a valid float", shorten(text)))?,
        };
        return Ok(Scalar::Float(sign * value));
    }
    Ok(Scalar::Str)
}

fn same_scalar(a: &Scalar, b: &Scalar) -> bool {
    match (a, b) {
        (Scalar::Float(x), Scalar::Float(y)) => x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()),
        _ => a == b,
    }
}

fn describe_scalar(scalar: &Scalar, text: &str) -> String {
    match scalar {
        Scalar::Null => "null".into(),
        Scalar::Bool(b) => format!("the boolean {b}"),
        Scalar::Int(i) => format!("the integer {}", shorten(i)),
        Scalar::Float(f) => format!("the float {f}"),
        Scalar::Timestamp => "a timestamp".into(),
        Scalar::Str => format!("the string \"{}\"", shorten(text)),
    }
}

/// A plain scalar in a `warden/v1` document: YAML 1.2's reading, refused wherever YAML 1.1 would
/// read it differently, or wherever it merely looks like it might.
fn warden_scalar(text: &str) -> Result<Scalar, String> {
    let shown = shorten(text);
    let refuse = |why: String| {
        format!(
            "the unquoted value `{shown}` {why}; warden/v1 refuses values whose meaning depends on \
             the YAML version. Quote it (\"{shown}\") if you mean the text, or write it unambiguously"
        )
    };
    let lower = text.to_ascii_lowercase();
    if matches!(lower.as_str(), "yes" | "no" | "on" | "off" | "y" | "n") {
        return Err(refuse(
            "is a boolean to YAML 1.1 readers and a string to YAML 1.2 readers (write true or false for a boolean)"
                .into(),
        ));
    }
    if patterns()?.leading_zero.is_match(text) {
        return Err(refuse("has a leading zero, which YAML 1.1 reads as octal and YAML 1.2 as decimal".into()));
    }
    let modern = yaml12(text)?;
    match yaml11(text) {
        Ok(old) if same_scalar(&old, &modern) => Ok(modern),
        Ok(old) => Err(refuse(format!(
            "means {} in YAML 1.1 but {} in YAML 1.2",
            describe_scalar(&old, text),
            describe_scalar(&modern, text)
        ))),
        Err(why) => Err(refuse(format!(
            "is refused by YAML 1.1 readers ({why}) but means {} in YAML 1.2",
            describe_scalar(&modern, text)
        ))),
    }
}

fn split_sign(text: &str) -> (bool, &str) {
    if let Some(rest) = text.strip_prefix('-') {
        (true, rest)
    } else {
        (false, text.strip_prefix('+').unwrap_or(text))
    }
}

fn signed(negative: bool, magnitude: String) -> String {
    if negative && magnitude != "0" {
        format!("-{magnitude}")
    } else {
        magnitude
    }
}

fn too_long_integer() -> String {
    format!("integers are limited to {MAX_INT_DIGITS} decimal digits")
}

/// Decimal digits without leading zeros (Python's `int(body)`).
fn decimal(body: &str) -> Result<String, String> {
    if body.is_empty() || !body.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("'{}' is not a valid integer", shorten(body)));
    }
    if body.len() > MAX_INT_DIGITS {
        return Err(too_long_integer());
    }
    let trimmed = body.trim_start_matches('0');
    Ok(if trimmed.is_empty() { "0".to_owned() } else { trimmed.to_owned() })
}

/// Little-endian base-10⁹ limbs: just enough arithmetic to print Python's integers.
struct Big(Vec<u32>);

const LIMB: u64 = 1_000_000_000;

impl Big {
    fn zero() -> Big {
        Big(Vec::new())
    }

    fn mul_add(&mut self, factor: u32, addend: u32) {
        let mut carry = u64::from(addend);
        for limb in &mut self.0 {
            let value = u64::from(*limb) * u64::from(factor) + carry;
            *limb = (value % LIMB) as u32;
            carry = value / LIMB;
        }
        while carry > 0 {
            self.0.push((carry % LIMB) as u32);
            carry /= LIMB;
        }
    }

    fn decimal_digits_at_least(&self) -> usize {
        self.0.len().saturating_sub(1) * 9
    }

    fn to_decimal(&self) -> String {
        let mut limbs = self.0.iter().rev();
        let Some(top) = limbs.next() else { return "0".to_owned() };
        let mut out = top.to_string();
        for limb in limbs {
            out.push_str(&format!("{limb:09}"));
        }
        out
    }
}

/// `None` for an empty digit string (Python's `int("", base)` raises); `Some(Err)` if too large.
fn radix_to_decimal(digits: &str, radix: u32) -> Option<Result<String, String>> {
    if digits.is_empty() {
        return None;
    }
    let significant = digits.trim_start_matches('0');
    // log10(radix) ≤ 1.21; refuse before doing quadratic work on a huge literal.
    let bound = (significant.len() as f64) * f64::from(radix).log10();
    if bound > (MAX_INT_DIGITS + 2) as f64 {
        return Some(Err(too_long_integer()));
    }
    let mut big = Big::zero();
    for c in significant.chars() {
        let digit = c.to_digit(radix)?;
        big.mul_add(radix, digit);
    }
    let text = big.to_decimal();
    if text.len() > MAX_INT_DIGITS {
        return Some(Err(too_long_integer()));
    }
    Some(Ok(text))
}

/// PyYAML's base-60 integers (`1:30` is 90).
fn sexagesimal_to_decimal(body: &str) -> Option<Result<String, String>> {
    let mut parts = body.split(':');
    let first = parts.next()?;
    let first = match decimal(first) {
        Ok(text) => text,
        Err(e) => return Some(Err(e)),
    };
    let mut big = Big::zero();
    for c in first.chars() {
        big.mul_add(10, c.to_digit(10)?);
    }
    for part in parts {
        let digit: u32 = part.parse().ok()?;
        big.mul_add(60, digit);
        if big.decimal_digits_at_least() > MAX_INT_DIGITS {
            return Some(Err(too_long_integer()));
        }
    }
    let text = big.to_decimal();
    if text.len() > MAX_INT_DIGITS {
        return Some(Err(too_long_integer()));
    }
    Some(Ok(text))
}

fn shorten(text: &str) -> String {
    const LIMIT: usize = 40;
    if text.chars().count() <= LIMIT {
        text.to_owned()
    } else {
        let mut short: String = text.chars().take(LIMIT).collect();
        short.push('…');
        short
    }
}

// ---------------------------------------------------------------------------------------------
// The resolved tree
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct Node {
    line: usize,
    value: NodeValue,
}

#[derive(Debug, Clone)]
enum NodeValue {
    Null,
    Bool(bool),
    /// Canonical decimal text.
    Int(String),
    /// The text as written; floats are refused wherever they would be used.
    Float(String),
    Str(String),
    /// ctrlrun documents only (PyYAML's implicit dates); refused wherever it would be used.
    Timestamp(String),
    Seq(Vec<Node>),
    Map(Vec<Member>),
}

#[derive(Debug, Clone)]
struct Member {
    key: String,
    line: usize,
    value: Node,
}

impl Node {
    fn kind(&self) -> &'static str {
        match &self.value {
            NodeValue::Null => "null",
            NodeValue::Bool(_) => "a boolean",
            NodeValue::Int(_) => "an integer",
            NodeValue::Float(_) => "a float",
            NodeValue::Str(_) => "a string",
            NodeValue::Timestamp(_) => "a timestamp",
            NodeValue::Seq(_) => "a list",
            NodeValue::Map(_) => "a mapping",
        }
    }

    /// The kind, with the value where it is short enough to help.
    fn shown(&self) -> String {
        match &self.value {
            NodeValue::Bool(b) => format!("the boolean {b}"),
            NodeValue::Int(i) => format!("the integer {}", shorten(i)),
            NodeValue::Float(f) => format!("the float {}", shorten(f)),
            NodeValue::Str(s) => format!("the string '{}'", shorten(s)),
            NodeValue::Timestamp(t) => format!("the timestamp {}", shorten(t)),
            _ => self.kind().to_owned(),
        }
    }

    fn as_str(&self) -> Option<&str> {
        match &self.value {
            NodeValue::Str(s) => Some(s),
            _ => None,
        }
    }

    fn is_null(&self) -> bool {
        matches!(self.value, NodeValue::Null)
    }
}

fn child_path(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

fn display_path(path: &str) -> &str {
    if path.is_empty() {
        TOP_LEVEL
    } else {
        path
    }
}

/// Python's `str.isspace`, which ctrlrun's `.strip()` uses: Rust's whitespace plus the four
/// information separators U+001C..U+001F.
fn is_python_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

fn is_blank(text: &str) -> bool {
    text.chars().all(is_python_space)
}

// ---------------------------------------------------------------------------------------------
// Validation
// ---------------------------------------------------------------------------------------------

struct Cx<'a> {
    origin: &'a str,
    schema: Schema,
}

impl Cx<'_> {
    fn error(&self, path: &str, line: Option<usize>, message: impl Into<String>) -> DocumentError {
        DocumentError {
            origin: self.origin.to_owned(),
            path: display_path(path).to_owned(),
            line,
            message: message.into(),
        }
    }

    fn warden(&self) -> bool {
        self.schema == Schema::WardenV1
    }

    fn template_mode(&self) -> TemplateMode {
        if self.warden() {
            TemplateMode::Escaped
        } else {
            TemplateMode::Raw
        }
    }

    fn resolve(&self, raw: Raw, path: &str) -> Result<Node, DocumentError> {
        let line = raw.line;
        let value = match raw.kind {
            RawKind::Scalar { text, plain, tag } => {
                self.resolve_scalar(text, plain, tag).map_err(|message| self.error(path, Some(line), message))?
            }
            RawKind::Seq { items, tag } => {
                self.check_collection_tag(tag, YAML_SEQ_TAG, path, line)?;
                let mut nodes = Vec::with_capacity(items.len());
                for (index, item) in items.into_iter().enumerate() {
                    nodes.push(self.resolve(item, &format!("{path}[{index}]"))?);
                }
                NodeValue::Seq(nodes)
            }
            RawKind::Map { entries, tag } => {
                self.check_collection_tag(tag, YAML_MAP_TAG, path, line)?;
                let mut members: Vec<Member> = Vec::with_capacity(entries.len());
                let mut seen: HashMap<String, usize> = HashMap::new();
                for (key, value) in entries {
                    let key_line = key.line;
                    let name = self.resolve_key(key, path)?;
                    let member_path = child_path(path, &name);
                    if let Some(first) = seen.get(&name) {
                        return Err(self.error(
                            &member_path,
                            Some(key_line),
                            format!(
                                "duplicate key '{}' (first on line {first}); a key may appear once",
                                shorten(&name)
                            ),
                        ));
                    }
                    seen.insert(name.clone(), key_line);
                    let value = self.resolve(value, &member_path)?;
                    members.push(Member { key: name, line: key_line, value });
                }
                NodeValue::Map(members)
            }
        };
        Ok(Node { line, value })
    }

    fn check_collection_tag(
        &self,
        tag: Option<String>,
        allowed: &str,
        path: &str,
        line: usize,
    ) -> Result<(), DocumentError> {
        match tag {
            None => Ok(()),
            Some(tag) if tag == allowed => Ok(()),
            Some(tag) => Err(self.error(path, Some(line), unsupported_tag(&tag))),
        }
    }

    fn resolve_scalar(&self, text: String, plain: bool, tag: Option<String>) -> Result<NodeValue, String> {
        if let Some(tag) = tag {
            if tag == YAML_STR_TAG {
                return Ok(NodeValue::Str(text));
            }
            return Err(unsupported_tag(&tag));
        }
        if !plain {
            return Ok(NodeValue::Str(text));
        }
        if text.starts_with('?') {
            // In a flow collection PyYAML reads `?x` as an explicit key `x`, where YAML 1.2
            // reads the text `?x`: one document, two meanings.
            return Err(format!(
                "the unquoted value `{}` begins with '?', which YAML 1.1 reads as an explicit key \
                 inside [ ] and {{ }}; quote it",
                shorten(&text)
            ));
        }
        let scalar = if self.warden() { warden_scalar(&text)? } else { yaml11(&text)? };
        Ok(match scalar {
            Scalar::Null => NodeValue::Null,
            Scalar::Bool(b) => NodeValue::Bool(b),
            Scalar::Int(i) => NodeValue::Int(i),
            Scalar::Float(_) => NodeValue::Float(text),
            Scalar::Timestamp => NodeValue::Timestamp(text),
            Scalar::Str => NodeValue::Str(text),
        })
    }

    fn resolve_key(&self, key: Raw, parent: &str) -> Result<String, DocumentError> {
        let line = key.line;
        let node = self.resolve(key, parent)?;
        match node.value {
            NodeValue::Str(name) => Ok(name),
            _ => Err(self.error(
                parent,
                Some(line),
                format!("keys must be strings, and this one is {}; quote it if you mean the text", node.shown()),
            )),
        }
    }

    fn document(&self, root: Node) -> Result<Document, DocumentError> {
        let NodeValue::Map(members) = &root.value else {
            return Err(self.error(
                "",
                Some(root.line),
                format!("the document must be a mapping, got {}", root.kind()),
            ));
        };
        let allowed: &[&str] = if self.warden() { &WARDEN_TOP_KEYS } else { &CTRLRUN_TOP_KEYS };
        self.reject_unknown(members, allowed, "")?;
        let get = |key: &str| members.iter().find(|m| m.key == key);

        if let Schema::Ctrlrun(version) = self.schema {
            for (key, needs, consequence) in [
                ("environment", 3, "an older reader would ignore it and put every action in the wrong deployment"),
                ("authority", 3, "an older reader would ignore it and run every action with no authority check at all"),
                ("mode", 3, "an older reader would enforce a configuration that was deployed to observe"),
                ("version", 4, "an older reader would refuse the document outright, since its top-level key set is closed"),
                ("controls", 4, "an older reader would ignore the registry and load a document whose rules cite ids nothing defines"),
            ] {
                if let Some(member) = get(key) {
                    if version < needs {
                        return Err(self.needs_schema(key, member.line, needs, consequence));
                    }
                }
            }
        }

        let environment = match get("environment") {
            None => None,
            Some(member) => Some(self.non_empty_string(member, "environment")?),
        };
        let version = match get("version") {
            None => None,
            Some(member) => Some(self.non_empty_string(member, "version")?),
        };
        let mode = match get("mode") {
            None => Mode::Enforce,
            Some(member) => match member.value.as_str() {
                Some("enforce") => Mode::Enforce,
                Some("observe") => Mode::Observe,
                _ => {
                    return Err(self.error(
                        "mode",
                        Some(member.line),
                        format!("'mode' must be exactly 'enforce' or 'observe', got {}", member.value.shown()),
                    ))
                }
            },
        };
        let allow_insecure_http = match get("allow_insecure_http") {
            None => None,
            Some(member) => match member.value.value {
                NodeValue::Bool(b) => Some(b),
                _ => {
                    return Err(self.error(
                        "allow_insecure_http",
                        Some(member.line),
                        format!("'allow_insecure_http' must be true or false, got {}", member.value.shown()),
                    ))
                }
            },
        };
        let authority = match get("authority") {
            None => None,
            Some(member) => self.authority(member)?,
        };
        let sources = match get("sources") {
            None => None,
            Some(member) => {
                if !matches!(member.value.value, NodeValue::Seq(_)) {
                    return Err(self.error(
                        "sources",
                        Some(member.line),
                        format!("'sources' must be a list of source windows, got {}", member.value.kind()),
                    ));
                }
                Some(self.json(&member.value, "sources")?)
            }
        };
        if let Some(member) = get("controls") {
            self.no_op_controls_registry(member)?;
        }

        let mut actions = BTreeMap::new();
        let mut warnings = Vec::new();
        match get("actions") {
            None if self.warden() => {}
            None => return Err(self.error(
                "",
                Some(root.line),
                "missing 'actions'; a policy maps action names to entries, and an action it does not list is denied",
            )),
            Some(member) => {
                let NodeValue::Map(entries) = &member.value.value else {
                    return Err(self.error(
                        "actions",
                        Some(member.line),
                        format!("'actions' must be a mapping of action name to entry, got {}", member.value.kind()),
                    ));
                };
                for entry in entries {
                    let path = child_path("actions", &entry.key);
                    if entry.key.is_empty() {
                        return Err(self.error("actions", Some(entry.line), "action names must be non-empty strings"));
                    }
                    if !self.warden() && entry.key == POLICY_CHANGE_ACTION {
                        return Err(self.error(
                            &path,
                            Some(entry.line),
                            format!(
                                "declaring '{POLICY_CHANGE_ACTION}' needs 'schema: ctrlrun.policy/v6', and Warden does not \
                                 implement ctrlrun's policy-change flow"
                            ),
                        ));
                    }
                    let parsed = self.entry(&entry.value, &path, entry.line)?;
                    if let Some(warning) = write_without_effect(&entry.key, &parsed, &path) {
                        warnings.push(warning);
                    }
                    actions.insert(entry.key.clone(), parsed);
                }
            }
        }

        let canonical = if self.warden() {
            self.warden_canonical(&actions, authority.as_ref(), environment.as_deref(), mode, sources.as_ref())
        } else {
            self.ctrlrun_canonical(get("actions"), get("controls"), environment.as_deref(), mode)?
        };
        let bytes = canonical_bytes(&canonical, "")
            .map_err(|e| self.error(WHOLE_DOCUMENT, None, format!("the policy cannot be hashed: {e}")))?;

        Ok(Document {
            schema: self.schema.clone(),
            version,
            environment,
            mode,
            actions,
            authority,
            sources,
            allow_insecure_http,
            policy_hash: sha256_prefixed(&bytes),
            warnings,
        })
    }

    fn needs_schema(&self, key: &str, line: usize, version: u8, consequence: &str) -> DocumentError {
        self.error(
            key,
            Some(line),
            format!(
                "'{key}' needs 'schema: ctrlrun.policy/v{version}'; this document declares '{}', and {consequence}",
                self.schema.name()
            ),
        )
    }

    fn reject_unknown(&self, members: &[Member], allowed: &[&str], path: &str) -> Result<(), DocumentError> {
        for member in members {
            if allowed.contains(&member.key.as_str()) {
                continue;
            }
            let hint = if member.key.chars().any(|c| c.is_ascii_uppercase()) { " (keys are snake_case)" } else { "" };
            return Err(self.error(
                &child_path(path, &member.key),
                Some(member.line),
                format!("unknown key '{}'{hint}; allowed here: {}", shorten(&member.key), allowed.join(", ")),
            ));
        }
        Ok(())
    }

    /// ctrlrun: `mode` is top level and nothing else, and says so rather than "unknown key".
    fn reject_nested_mode(&self, members: &[Member], path: &str) -> Result<(), DocumentError> {
        if let Some(member) = members.iter().find(|m| m.key == "mode") {
            return Err(self.error(
                &child_path(path, "mode"),
                Some(member.line),
                "'mode' is top level and nothing else: a configuration where some actions are observed and \
                 some enforced is one where nobody can say whether an action was permitted or merely \
                 watched; move it beside 'schema:'",
            ));
        }
        Ok(())
    }

    fn non_empty_string(&self, member: &Member, key: &str) -> Result<String, DocumentError> {
        match member.value.as_str() {
            Some(text) if !is_blank(text) => Ok(text.to_owned()),
            _ => Err(self.error(
                key,
                Some(member.line),
                format!("'{key}' must be a non-empty string, got {}", member.value.shown()),
            )),
        }
    }

    fn authority(&self, member: &Member) -> Result<Option<Value>, DocumentError> {
        if !self.warden() {
            if member.value.is_null() {
                return Ok(None);
            }
            return Err(self.error(
                "authority",
                Some(member.line),
                "an 'authority' section in a ctrlrun document is not supported: Warden does not implement \
                 ctrlrun's grant semantics or the policy hash taken over them; declare the grants in a \
                 'warden/v1' document",
            ));
        }
        if !matches!(member.value.value, NodeValue::Map(_)) {
            return Err(self.error(
                "authority",
                Some(member.line),
                format!("'authority' must be a mapping (with 'grants'), got {}", member.value.kind()),
            ));
        }
        self.json(&member.value, "authority").map(Some)
    }

    /// ctrlrun's control registry (v4). Warden records no control attribution, so only an
    /// empty registry — which changes nothing — is accepted.
    fn no_op_controls_registry(&self, member: &Member) -> Result<(), DocumentError> {
        let empty = match &member.value.value {
            NodeValue::Null => true,
            NodeValue::Map(entries) => entries.is_empty(),
            _ => false,
        };
        if empty {
            return Ok(());
        }
        Err(self.error(
            "controls",
            Some(member.line),
            "the control registry ('controls:') is not supported: Warden does not attribute decisions to \
             controls, and loading the registry without that would drop evidence the document promises",
        ))
    }

    fn entry(&self, node: &Node, path: &str, line: usize) -> Result<ActionEntry, DocumentError> {
        let NodeValue::Map(members) = &node.value else {
            return Err(self.error(
                path,
                Some(line),
                format!("an action entry must be a mapping with 'decision' or 'rules', got {}", node.kind()),
            ));
        };
        self.reject_nested_mode(members, path)?;
        let allowed: &[&str] = if self.warden() { &WARDEN_ENTRY_KEYS } else { &CTRLRUN_ENTRY_KEYS };
        self.reject_unknown(members, allowed, path)?;
        let get = |key: &str| members.iter().find(|m| m.key == key);

        if let Schema::Ctrlrun(version) = self.schema {
            if version < 2 {
                if let Some(member) = members.iter().find(|m| matches!(m.key.as_str(), "effect" | "resource" | "mcp")) {
                    return Err(self.error(
                        &child_path(path, &member.key),
                        Some(member.line),
                        format!(
                            "'{}' needs 'schema: ctrlrun.policy/v2'; this document declares 'ctrlrun.policy/v1', and a \
                             v0.1 reader would ignore the template and execute with no duplicate protection",
                            member.key
                        ),
                    ));
                }
            }
            for (key, needs, consequence) in [
                ("data", 4, "an older reader would ignore the labels"),
                ("max_attempts", 5, "an older reader would ignore the ceiling and renew over FAILED without bound"),
            ] {
                if let Some(member) = get(key) {
                    if version < needs {
                        return Err(self.needs_schema(&child_path(path, key), member.line, needs, consequence));
                    }
                }
            }
            for (key, needs, feature) in
                [("approvals_required", 6, "M-of-N approvals"), ("upstream", 8, "upstream pins")]
            {
                if let Some(member) = get(key) {
                    return Err(self.error(
                        &child_path(path, key),
                        Some(member.line),
                        format!(
                            "'{key}' needs 'schema: ctrlrun.policy/v{needs}', which Warden does not support ({feature} \
                             are not implemented)"
                        ),
                    ));
                }
            }
        }

        let decision_member = get("decision");
        let rules_member = get("rules");
        if decision_member.is_some() == rules_member.is_some() {
            return Err(self.error(path, Some(line), "an entry must have exactly one of 'decision' or 'rules'"));
        }

        let effect = self.template(get("effect"), path, "effect")?;
        let resource = self.template(get("resource"), path, "resource")?;
        if !self.warden() {
            self.reserved_templates(effect.as_ref(), resource.as_ref(), path, get("effect").or(get("resource")))?;
            if let Some(member) = get("mcp") {
                self.no_op_mcp(member, path)?;
            }
            if let Some(member) = get("controls") {
                self.no_op_citations(member, &child_path(path, "controls"))?;
            }
            if let Some(member) = get("data") {
                self.no_op_data(member, path)?;
            }
        }
        let max_attempts = match get("max_attempts") {
            None => None,
            Some(member) => Some(self.max_attempts(member, path)?),
        };
        let lease = match get("lease") {
            None => None,
            Some(member) => Some(self.lease(member, path)?),
        };
        let description = match get("description") {
            None => None,
            Some(member) => match member.value.as_str() {
                Some(text) => Some(text.to_owned()),
                None => {
                    return Err(self.error(
                        &child_path(path, "description"),
                        Some(member.line),
                        format!("'description' must be a string, got {}", member.value.shown()),
                    ))
                }
            },
        };

        let (decision, rules) = match (decision_member, rules_member) {
            (Some(member), _) => {
                (Some(self.decision(&member.value, &child_path(path, "decision"), member.line)?), Vec::new())
            }
            (None, Some(member)) => (None, self.rules(member, &child_path(path, "rules"))?),
            (None, None) => (None, Vec::new()),
        };
        Ok(ActionEntry { decision, rules, effect, resource, max_attempts, lease, description })
    }

    fn template(&self, member: Option<&Member>, path: &str, key: &str) -> Result<Option<Template>, DocumentError> {
        let Some(member) = member else { return Ok(None) };
        let path = child_path(path, key);
        // ctrlrun reads `effect: null` (or an empty `effect:`) as no template.
        if member.value.is_null() && !self.warden() {
            return Ok(None);
        }
        let Some(source) = member.value.as_str() else {
            return Err(self.error(
                &path,
                Some(member.line),
                format!(
                    "'{key}' must be a template string such as 'refund:{{payment_id}}', got {}",
                    member.value.shown()
                ),
            ));
        };
        let template = Template::parse(source, self.template_mode())
            .map_err(|e| self.error(&path, Some(member.line), format!("'{key}': {e}")))?;
        if template.placeholders().contains(&DATA_SCOPE) {
            return Err(self.error(
                &path,
                Some(member.line),
                format!("'{DATA_SCOPE}' is ctrlrun's derived data-label subject and may not be a placeholder; rename the argument"),
            ));
        }
        Ok(Some(template))
    }

    /// ctrlrun refuses templates that could mint its policy-change marker.
    fn reserved_templates(
        &self,
        effect: Option<&Template>,
        resource: Option<&Template>,
        path: &str,
        member: Option<&Member>,
    ) -> Result<(), DocumentError> {
        let line = member.map(|m| m.line);
        for (label, template) in [("resource", resource), ("effect", effect)] {
            if let Some(template) = template {
                if template.source().contains(POLICY_CHANGE_ACTION) {
                    return Err(self.error(
                        &child_path(path, label),
                        line,
                        format!(
                            "the '{label}' template names '{POLICY_CHANGE_ACTION}', which is reserved for ctrlrun's \
                             policy-change flow"
                        ),
                    ));
                }
            }
        }
        if let Some(template) = effect {
            if template.source().starts_with("policy:") {
                return Err(self.error(
                    &child_path(path, "effect"),
                    line,
                    "an 'effect' template may not begin 'policy:', the effect key ctrlrun records policy approvals under",
                ));
            }
        }
        Ok(())
    }

    fn no_op_mcp(&self, member: &Member, path: &str) -> Result<(), DocumentError> {
        let path = child_path(path, "mcp");
        let unsupported = || {
            self.error(
                &path,
                Some(member.line),
                "'mcp' options are not supported: Warden has no MCP gateway, and an executor that can report \
                 'not executed' says so through the host API instead",
            )
        };
        match &member.value.value {
            NodeValue::Null => Ok(()),
            NodeValue::Map(members) => {
                self.reject_unknown(members, &MCP_KEYS, &path)?;
                match members.first() {
                    None => Ok(()),
                    Some(claim) => match claim.value.value {
                        NodeValue::Bool(false) => Ok(()),
                        NodeValue::Bool(true) => Err(unsupported()),
                        _ => Err(self.error(
                            &child_path(&path, "not_executed_on_error"),
                            Some(claim.line),
                            format!("'not_executed_on_error' must be true or false, got {}", claim.value.shown()),
                        )),
                    },
                }
            }
            _ => Err(self.error(
                &path,
                Some(member.line),
                format!("'mcp' must be a mapping, got {}", member.value.kind()),
            )),
        }
    }

    /// Control citations on an entry or a rule. With no registry (the only kind Warden
    /// accepts), ctrlrun itself refuses any id, so only an empty citation list loads.
    fn no_op_citations(&self, member: &Member, path: &str) -> Result<(), DocumentError> {
        match &member.value.value {
            NodeValue::Null => Ok(()),
            NodeValue::Seq(items) if items.is_empty() => Ok(()),
            NodeValue::Seq(_) => Err(self.error(
                path,
                Some(member.line),
                "control citations are not supported: Warden has no control registry, so a cited id resolves to nothing",
            )),
            _ => Err(self.error(
                path,
                Some(member.line),
                format!("'controls' must be a list of ids, got {}", member.value.kind()),
            )),
        }
    }

    fn no_op_data(&self, member: &Member, path: &str) -> Result<(), DocumentError> {
        let empty = match &member.value.value {
            NodeValue::Null => true,
            NodeValue::Map(entries) => entries.is_empty(),
            _ => false,
        };
        if empty {
            return Ok(());
        }
        Err(self.error(
            &child_path(path, "data"),
            Some(member.line),
            "data labels ('data:' and the 'data_scope' subject) are not supported by Warden",
        ))
    }

    fn max_attempts(&self, member: &Member, path: &str) -> Result<u32, DocumentError> {
        let path = child_path(path, "max_attempts");
        let NodeValue::Int(text) = &member.value.value else {
            return Err(self.error(
                &path,
                Some(member.line),
                format!(
                    "'max_attempts' must be an integer of at least 1, got {}. It counts the attempts that may \
                     execute on one effect key, the first included; remove the key for no ceiling",
                    member.value.shown()
                ),
            ));
        };
        if text.starts_with('-') || text == "0" {
            return Err(self.error(
                &path,
                Some(member.line),
                format!(
                    "'max_attempts' must be at least 1, got {text}; an action that may never run is 'decision: deny'"
                ),
            ));
        }
        text.parse::<u32>().map_err(|_| {
            self.error(
                &path,
                Some(member.line),
                format!("'max_attempts' is {}; Warden counts attempts up to {}", shorten(text), u32::MAX),
            )
        })
    }

    fn lease(&self, member: &Member, path: &str) -> Result<Micros, DocumentError> {
        let path = child_path(path, "lease");
        let Some(text) = member.value.as_str() else {
            return Err(self.error(
                &path,
                Some(member.line),
                format!("'lease' must be an ISO 8601 duration such as PT15M, got {}", member.value.shown()),
            ));
        };
        let micros = parse_duration(text).map_err(|e| self.error(&path, Some(member.line), e))?;
        if micros <= 0 {
            return Err(self.error(&path, Some(member.line), "'lease' must be longer than zero"));
        }
        Ok(micros)
    }

    fn decision(&self, node: &Node, path: &str, line: usize) -> Result<Decision, DocumentError> {
        let allowed = "allow, approve, deny";
        match node.as_str() {
            Some(text) => Decision::parse(text).ok_or_else(|| {
                self.error(path, Some(line), format!("unknown decision '{}', expected one of {allowed}", shorten(text)))
            }),
            None => {
                Err(self.error(path, Some(line), format!("decision must be one of {allowed}, got {}", node.shown())))
            }
        }
    }

    fn rules(&self, member: &Member, path: &str) -> Result<Vec<Rule>, DocumentError> {
        let items = match &member.value.value {
            NodeValue::Seq(items) if !items.is_empty() => items,
            _ => {
                return Err(self.error(
                    path,
                    Some(member.line),
                    format!("'rules' must be a non-empty list, got {}", describe_rules(&member.value)),
                ))
            }
        };
        let mut rules = Vec::with_capacity(items.len());
        for (index, item) in items.iter().enumerate() {
            rules.push(self.rule(item, &format!("{path}[{index}]"))?);
        }
        Ok(rules)
    }

    fn rule(&self, node: &Node, path: &str) -> Result<Rule, DocumentError> {
        let NodeValue::Map(members) = &node.value else {
            return Err(self.error(path, Some(node.line), format!("a rule must be a mapping, got {}", node.kind())));
        };
        self.reject_nested_mode(members, path)?;
        let allowed: &[&str] = if self.warden() { &WARDEN_RULE_KEYS } else { &CTRLRUN_RULE_KEYS };
        self.reject_unknown(members, allowed, path)?;
        let get = |key: &str| members.iter().find(|m| m.key == key);
        let Some(decision) = get("decision") else {
            return Err(self.error(path, Some(node.line), "a rule must have a 'decision'"));
        };
        let decision = self.decision(&decision.value, &child_path(path, "decision"), decision.line)?;
        if let Some(member) = get("controls") {
            self.no_op_citations(member, &child_path(path, "controls"))?;
        }
        let Some(when) = get("when") else {
            return Ok(Rule { when: Vec::new(), decision });
        };
        let when_path = child_path(path, "when");
        // An empty mapping is a truncated edit; the catch-all is spelled "no 'when'" (ctrlrun).
        let conditions = match &when.value.value {
            NodeValue::Map(conditions) if !conditions.is_empty() => conditions,
            _ => {
                return Err(self.error(
                    &when_path,
                    Some(when.line),
                    format!(
                        "'when' must be a non-empty mapping of conditions, got {}; leave 'when' out for a rule \
                         that always matches",
                        describe_when(&when.value)
                    ),
                ))
            }
        };
        let mut parsed = Vec::with_capacity(conditions.len());
        for condition in conditions {
            parsed.push(self.condition(condition, &child_path(&when_path, &condition.key))?);
        }
        Ok(Rule { when: parsed, decision })
    }

    fn condition(&self, member: &Member, path: &str) -> Result<Condition, DocumentError> {
        let key = &member.key;
        let line = Some(member.line);
        let Some((subject, op)) = split_condition_key(key) else {
            return Err(self.error(
                path,
                line,
                format!(
                    "condition '{}' must be '<argument>_<op>' where op is one of eq, gt, gte, in, lt, lte, neq",
                    shorten(key)
                ),
            ));
        };
        if subject == DATA_SCOPE {
            return Err(self.error(
                path,
                line,
                format!(
                    "condition '{}' addresses '{DATA_SCOPE}', ctrlrun's derived data-label subject; data labels are \
                     not supported by Warden",
                    shorten(key)
                ),
            ));
        }
        if RESERVED_SUBJECTS.contains(&subject) {
            return Err(self.error(
                path,
                line,
                format!(
                    "condition '{}' names the action field '{subject}', not an argument; a condition can only \
                     address the action's arguments, so this rule would never match. If the action really \
                     takes an argument called '{subject}', rename it",
                    shorten(key)
                ),
            ));
        }
        let operand = self.operand(op, &member.value, key, path)?;
        Ok(Condition { key: key.clone(), subject: subject.to_owned(), op, operand })
    }

    fn operand(&self, op: Op, node: &Node, key: &str, path: &str) -> Result<Value, DocumentError> {
        let key = shorten(key);
        if op.is_order() {
            return match &node.value {
                NodeValue::Int(text) => Ok(Value::Number(integer_number(text))),
                NodeValue::Float(_) => Err(self.error(
                    path,
                    Some(node.line),
                    format!(
                        "condition '{key}': a numeric operator needs an integer operand, got {}. Only integers can \
                         be bounded: write amounts in integer minor units (amount_lte: 200000)",
                        node.shown()
                    ),
                )),
                _ => Err(self.error(
                    path,
                    Some(node.line),
                    format!("condition '{key}': a numeric operator needs an integer operand, got {}", node.shown()),
                )),
            };
        }
        if op == Op::In {
            let NodeValue::Seq(items) = &node.value else {
                return Err(self.error(
                    path,
                    Some(node.line),
                    format!("condition '{key}': '_in' needs a list operand, got {}", node.kind()),
                ));
            };
            let mut values = Vec::with_capacity(items.len());
            for (index, item) in items.iter().enumerate() {
                values.push(self.checked_operand(item, &key, &format!("{path}[{index}]"))?);
            }
            return Ok(Value::Array(values));
        }
        if let NodeValue::Seq(items) = &node.value {
            // ctrlrun refuses nested containers inside an `_eq`/`_neq` list (its set comparison
            // needs hashable elements), whatever the subject.
            if let Some((index, item)) =
                items.iter().enumerate().find(|(_, item)| matches!(item.value, NodeValue::Seq(_) | NodeValue::Map(_)))
            {
                return Err(self.error(
                    &format!("{path}[{index}]"),
                    Some(item.line),
                    format!("condition '{key}': a list operand holds scalars, got {}; write it flat", item.kind()),
                ));
            }
        }
        self.checked_operand(node, &key, path)
    }

    /// An operand value: JSON without floats (ctrlrun's `_checked_operand`).
    fn checked_operand(&self, node: &Node, key: &str, path: &str) -> Result<Value, DocumentError> {
        match &node.value {
            NodeValue::Float(_) => Err(self.error(
                path,
                Some(node.line),
                format!(
                    "condition '{key}': float operands are not allowed, got {}; use integer minor units \
                     (amount_lte: 50000) or a decimal string",
                    node.shown()
                ),
            )),
            NodeValue::Timestamp(_) => Err(self.error(
                path,
                Some(node.line),
                format!("condition '{key}': {} is not an allowed operand type; quote it", node.shown()),
            )),
            _ => self.json(node, path),
        }
    }

    /// A subtree as JSON: what is hashed and what operands are compared with. Floats and
    /// timestamps have no canonical form and are refused with their path.
    fn json(&self, node: &Node, path: &str) -> Result<Value, DocumentError> {
        Ok(match &node.value {
            NodeValue::Null => Value::Null,
            NodeValue::Bool(b) => Value::Bool(*b),
            NodeValue::Int(text) => Value::Number(integer_number(text)),
            NodeValue::Str(s) => Value::String(s.clone()),
            NodeValue::Float(_) => {
                return Err(self.error(
                    path,
                    Some(node.line),
                    format!(
                        "floats are not accepted, got {}; write an integer (minor units) or a string",
                        node.shown()
                    ),
                ))
            }
            NodeValue::Timestamp(_) => {
                return Err(self.error(
                    path,
                    Some(node.line),
                    format!("{} is not accepted here; quote it", node.shown()),
                ))
            }
            NodeValue::Seq(items) => {
                let mut values = Vec::with_capacity(items.len());
                for (index, item) in items.iter().enumerate() {
                    values.push(self.json(item, &format!("{path}[{index}]"))?);
                }
                Value::Array(values)
            }
            NodeValue::Map(members) => {
                let mut map = Map::new();
                for member in members {
                    map.insert(member.key.clone(), self.json(&member.value, &child_path(path, &member.key))?);
                }
                Value::Object(map)
            }
        })
    }

    /// ctrlrun's `_canonical_policy`: the raw `actions` and `controls` sections as PyYAML
    /// produced them, the resolved environment, the mode and the schema. `authority` is `None`
    /// because a ctrlrun document with a non-null one is refused above.
    fn ctrlrun_canonical(
        &self,
        actions: Option<&Member>,
        controls: Option<&Member>,
        environment: Option<&str>,
        mode: Mode,
    ) -> Result<Value, DocumentError> {
        let section = |member: Option<&Member>, key: &str| match member {
            None => Ok(Value::Null),
            Some(member) => self.json(&member.value, key),
        };
        let mut canonical = Map::new();
        canonical.insert("actions".into(), section(actions, "actions")?);
        canonical.insert("authority".into(), Value::Null);
        canonical.insert("controls".into(), section(controls, "controls")?);
        canonical
            .insert("environment".into(), Value::String(environment.unwrap_or(DEFAULT_CTRLRUN_ENVIRONMENT).to_owned()));
        canonical.insert("mode".into(), Value::String(mode.as_str().into()));
        canonical.insert("schema".into(), Value::String(self.schema.name()));
        Ok(Value::Object(canonical))
    }

    /// `warden/v1`: the parsed decision inputs, every entry in one fixed shape (absent fields
    /// are `null`), rules in document order, leases in microseconds.
    fn warden_canonical(
        &self,
        actions: &BTreeMap<String, ActionEntry>,
        authority: Option<&Value>,
        environment: Option<&str>,
        mode: Mode,
        sources: Option<&Value>,
    ) -> Value {
        let optional_string = |s: Option<&str>| s.map_or(Value::Null, |s| Value::String(s.to_owned()));
        let mut entries = Map::new();
        for (name, entry) in actions {
            let mut object = Map::new();
            object.insert("decision".into(), optional_string(entry.decision.map(Decision::as_str)));
            let rules = entry
                .rules
                .iter()
                .map(|rule| {
                    let when: Map<String, Value> =
                        rule.when.iter().map(|c| (c.key.clone(), c.operand.clone())).collect();
                    let mut object = Map::new();
                    object.insert("decision".into(), Value::String(rule.decision.as_str().into()));
                    object.insert("when".into(), Value::Object(when));
                    Value::Object(object)
                })
                .collect();
            object.insert("rules".into(), Value::Array(rules));
            object.insert("effect".into(), optional_string(entry.effect.as_ref().map(Template::source)));
            object.insert("resource".into(), optional_string(entry.resource.as_ref().map(Template::source)));
            object.insert("max_attempts".into(), entry.max_attempts.map_or(Value::Null, Value::from));
            object.insert("lease".into(), entry.lease.map_or(Value::Null, Value::from));
            object.insert("description".into(), optional_string(entry.description.as_deref()));
            entries.insert(name.clone(), Value::Object(object));
        }
        let mut canonical = Map::new();
        canonical.insert("actions".into(), Value::Object(entries));
        canonical.insert("authority".into(), authority.cloned().unwrap_or(Value::Null));
        canonical.insert("environment".into(), optional_string(environment));
        canonical.insert("mode".into(), Value::String(mode.as_str().into()));
        canonical.insert("schema".into(), Value::String(WARDEN_V1.into()));
        canonical.insert("sources".into(), sources.cloned().unwrap_or(Value::Null));
        Value::Object(canonical)
    }
}

fn unsupported_tag(tag: &str) -> String {
    format!("explicit YAML tags are not supported (found '{}'); only !!str is accepted", shorten(tag))
}

fn describe_rules(node: &Node) -> String {
    match &node.value {
        NodeValue::Seq(_) => "an empty list".into(),
        _ => node.kind().into(),
    }
}

fn describe_when(node: &Node) -> String {
    match &node.value {
        NodeValue::Map(_) => "an empty mapping".into(),
        _ => node.kind().into(),
    }
}

/// `<argument>_<op>`, longest operator first; the argument is never empty.
fn split_condition_key(key: &str) -> Option<(&str, Op)> {
    OPERATORS_BY_LENGTH.iter().find_map(|(name, op)| {
        let subject = key.strip_suffix(name)?.strip_suffix('_')?;
        (!subject.is_empty()).then_some((subject, *op))
    })
}

/// A number from canonical integer text. serde_json (with `arbitrary_precision`) keeps the
/// digits exactly; the text is always a valid JSON integer here.
fn integer_number(text: &str) -> Number {
    serde_json::from_str::<Number>(text).unwrap_or_else(|_| Number::from(0))
}

/// A load-time warning for an action whose name sounds like a write, which can be allowed or
/// approved, and which has no effect template: nothing would stop it running twice.
fn write_without_effect(name: &str, entry: &ActionEntry, path: &str) -> Option<String> {
    if entry.effect.is_some() {
        return None;
    }
    let reachable = match entry.decision {
        Some(decision) => decision != Decision::Deny,
        None => entry.rules.iter().any(|rule| rule.decision != Decision::Deny),
    };
    if !reachable {
        return None;
    }
    let last = name.rsplit('.').next().unwrap_or(name).to_ascii_lowercase();
    let verb = WRITE_VERBS.iter().find(|verb| {
        last == **verb
            || last.strip_prefix(**verb).is_some_and(|rest| rest.starts_with(['_', '-']) || **verb == "grant")
    })?;
    Some(format!(
        "{path}: the name sounds like a write ({verb}) but the entry has no 'effect' template, so nothing \
         stops it from running twice; add one such as 'effect: \"{verb}:{{id}}\"'"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_1_1_reads_integers_the_way_pyyaml_does() {
        let int = |text: &str| match yaml11(text) {
            Ok(Scalar::Int(i)) => i,
            other => panic!("{text}: {other:?}"),
        };
        assert_eq!(int("017"), "15");
        assert_eq!(int("1_000"), "1000");
        assert_eq!(int("0x1F"), "31");
        assert_eq!(int("-0x1F"), "-31");
        assert_eq!(int("0b101"), "5");
        assert_eq!(int("1:30"), "90");
        assert_eq!(int("-1:00:00"), "-3600");
        assert_eq!(int("+5"), "5");
        assert_eq!(int("-0"), "0");
        assert_eq!(int("0_"), "0");
        assert_eq!(int("99999999999999999999999"), "99999999999999999999999");
        assert_eq!(int("0xFFFFFFFFFFFFFFFFFFFF"), "1208925819614629174706175");
        assert_eq!(yaml11("08"), Ok(Scalar::Str));
        assert_eq!(yaml11("0o17"), Ok(Scalar::Str));
        assert!(yaml11("0b_").is_err());
        assert_eq!(yaml11("yes"), Ok(Scalar::Bool(true)));
        assert_eq!(yaml11("OFF"), Ok(Scalar::Bool(false)));
        assert_eq!(yaml11("y"), Ok(Scalar::Str));
        assert_eq!(yaml11("1e3"), Ok(Scalar::Str));
        assert_eq!(yaml11("1.0e+3"), Ok(Scalar::Float(1000.0)));
        assert_eq!(yaml11("2026-11-01"), Ok(Scalar::Timestamp));
        assert_eq!(yaml11("~"), Ok(Scalar::Null));
        assert_eq!(yaml11(""), Ok(Scalar::Null));
        assert!(yaml11("<<").is_err());
        assert!(yaml11("=").is_err());
    }

    #[test]
    fn warden_scalars_are_refused_where_yaml_versions_disagree() {
        for ambiguous in [
            "yes",
            "No",
            "ON",
            "off",
            "y",
            "N",
            "017",
            "00",
            "08",
            "0o17",
            "1_000",
            "1:30",
            "0b1",
            "-0x1F",
            "1e3",
            "+.5",
            "2026-11-01",
            "<<",
            "=",
        ] {
            assert!(warden_scalar(ambiguous).is_err(), "{ambiguous} must be refused");
        }
        assert_eq!(warden_scalar("0x1F"), Ok(Scalar::Int("31".into())));
        assert_eq!(warden_scalar("17"), Ok(Scalar::Int("17".into())));
        assert_eq!(warden_scalar("-5"), Ok(Scalar::Int("-5".into())));
        assert_eq!(warden_scalar("0"), Ok(Scalar::Int("0".into())));
        assert_eq!(warden_scalar("true"), Ok(Scalar::Bool(true)));
        assert_eq!(warden_scalar("1.5"), Ok(Scalar::Float(1.5)));
        assert_eq!(warden_scalar("null"), Ok(Scalar::Null));
        assert_eq!(warden_scalar("hello"), Ok(Scalar::Str));
    }

    #[test]
    fn condition_keys_split_on_the_longest_operator() {
        assert_eq!(split_condition_key("amount_lte"), Some(("amount", Op::Lte)));
        assert_eq!(split_condition_key("amount_neq"), Some(("amount", Op::Neq)));
        assert_eq!(split_condition_key("a__eq"), Some(("a_", Op::Eq)));
        assert_eq!(split_condition_key("role_in"), Some(("role", Op::In)));
        assert_eq!(split_condition_key("_eq"), None);
        assert_eq!(split_condition_key("amount"), None);
        assert_eq!(split_condition_key("amount_between"), None);
    }

    #[test]
    fn huge_radix_literals_are_refused_before_any_quadratic_work() {
        let huge = format!("0x{}", "F".repeat(100_000));
        assert!(yaml11(&huge).is_err());
        let many = format!("1{}", ":59".repeat(10_000));
        assert!(yaml11(&many).is_err());
    }
}
