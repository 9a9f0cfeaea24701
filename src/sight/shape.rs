//! Shaping a sight's response: parse strictly, select the configured aliases, redact, prune.
//!
//! Redaction is a heuristic, not DLP: a secret under an innocent key in a shape no pattern
//! knows passes. What this module guarantees is narrower and tested:
//!
//! - a value under a sensitive key (at any depth) never appears: the whole value, object or
//!   array included, becomes `"[REDACTED]"`;
//! - a pointer that selects *through* a sensitive key yields `"[REDACTED]"` for the whole
//!   selected value (the pointer guard);
//! - `Bearer …`, `Basic …`, `key=value` for sensitive names, `sk-…` and a few other well-known
//!   token shapes are scrubbed inside strings by linear-time regexes;
//! - the credential sent on *this* request — the header value and each value it was built
//!   from — is scrubbed wherever it is echoed, in the forms `sight::echo` lists (the echo
//!   guard);
//! - every output string is at most `max_string` characters, every container at most
//!   `max_items` entries, and non-empty containers nest at most `max_depth` deep, with honest
//!   flags in `truncation`: each says what was shown out of the original total.

use std::sync::LazyLock;

use base64::Engine as _;
use regex::{Captures, Regex};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use zeroize::Zeroizing;

use super::echo::EchoScan;
pub use super::echo::{Echo, REDACTED};
use crate::error::SightError;

/// The replacement for a non-empty container nested deeper than `max_depth`.
pub const TRUNCATED_DEPTH: &str = "[TRUNCATED: depth]";
/// The replacement for a number whose text is longer than `max_string`.
pub const TRUNCATED_NUMBER: &str = "[TRUNCATED: number]";
/// At most this many warnings are kept; the rest set `warnings_truncated`.
pub const MAX_WARNINGS: usize = 20;
/// Each warning is at most this many characters.
pub const MAX_WARNING_CHARS: usize = 240;
/// An error text is at most this many characters.
pub const MAX_ERROR_CHARS: usize = 300;

/// Pruning limits, configurable per source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Non-empty containers nest at most this deep below (and including) the selected value.
    pub max_depth: usize,
    /// At most this many entries per array or object.
    pub max_items: usize,
    /// At most this many characters (Unicode scalar values) per string.
    pub max_string: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits { max_depth: 8, max_items: 50, max_string: 2000 }
    }
}

/// The shaped values of one response, ready to become a result.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Shaped {
    /// alias → selected value after redaction and pruning, or `null` when not found.
    pub values: Map<String, Value>,
    /// At most `MAX_WARNINGS`, each at most `MAX_WARNING_CHARS` characters; never response data.
    pub warnings: Vec<String>,
    /// Whether warnings were dropped.
    pub warnings_truncated: bool,
    /// alias → `{depth?, items?, strings?}`, only for aliases something was cut from. Each flag
    /// is `{shown, total}` plus a count: `depth: {shown: max_depth, total: the deepest nesting
    /// of non-empty containers, containers: how many were replaced}`, `items: {shown:
    /// max_items, total: the most entries any cut container had, containers}`, `strings:
    /// {shown: max_string, total: the longest cut string's length in characters, strings: how
    /// many were cut}` (a number too long to show counts as a string).
    pub truncation: Map<String, Value>,
    /// alias → number of redactions (only aliases with at least one).
    pub redactions: Map<String, Value>,
}

impl Shaped {
    fn warn(&mut self, text: String) {
        if self.warnings.len() >= MAX_WARNINGS {
            self.warnings_truncated = true;
            return;
        }
        // Warnings are single lines of plain text whatever an alias or pointer holds.
        let text: String = text.chars().map(|c| if c.is_control() || is_invisible(c) { ' ' } else { c }).collect();
        self.warnings.push(cut_chars(&text, MAX_WARNING_CHARS, true));
    }

    /// The result of a query (DESIGN.md §6), from these shaped values.
    pub fn into_result(
        self,
        source: &str,
        endpoint: &str,
        fetched_at: &str,
        status: u16,
        snapshot_id: Option<String>,
    ) -> SightResult {
        SightResult {
            source: source.to_owned(),
            endpoint: endpoint.to_owned(),
            fetched_at: fetched_at.to_owned(),
            status,
            values: self.values,
            warnings: self.warnings,
            warnings_truncated: self.warnings_truncated,
            truncation: self.truncation,
            redactions: self.redactions,
            snapshot_id,
        }
    }
}

/// A query's result as agents see it. Never the raw body, the URL's query, a credential or a
/// reference's value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SightResult {
    /// The source's id.
    pub source: String,
    /// The endpoint's id.
    pub endpoint: String,
    /// When it was fetched (RFC 3339).
    pub fetched_at: String,
    /// The upstream's HTTP status.
    pub status: u16,
    /// The selected values, by alias, redacted and pruned.
    pub values: Map<String, Value>,
    /// What could not be selected or shown.
    pub warnings: Vec<String>,
    /// Whether more warnings were dropped.
    pub warnings_truncated: bool,
    /// What was cut from each alias, with `{shown, total}`.
    pub truncation: Map<String, Value>,
    /// What was redacted from each alias.
    pub redactions: Map<String, Value>,
    /// The snapshot kept, when one was asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_id: Option<String>,
}

/// Parses a response body strictly: a leading UTF-8 BOM is stripped; anything but exactly one
/// JSON value (with surrounding whitespace) is `invalid_response`, as are invalid UTF-8, an
/// empty body and nesting beyond serde_json's recursion limit (128). Numbers keep their text.
pub fn parse_body(bytes: &[u8]) -> Result<Value, SightError> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(SightError::new("invalid_response", "response body is empty"));
    }
    serde_json::from_slice::<Value>(bytes).map_err(|error| {
        // serde_json's messages name the problem and a position, never the content.
        SightError::new(
            "invalid_response",
            error_text(&format!("response body is not valid JSON: {error}"), &Echo::none()),
        )
    })
}

/// Whether a key names a secret (DESIGN.md §6): matched after lower-casing and removing
/// `_ - .`, whitespace and invisible format characters.
pub fn is_sensitive_key(key: &str) -> bool {
    const EXACT: [&str; 17] = [
        "password",
        "passwd",
        "pwd",
        "secret",
        "clientsecret",
        "token",
        "accesstoken",
        "refreshtoken",
        "idtoken",
        "apikey",
        "apisecret",
        "authorization",
        "proxyauthorization",
        "cookie",
        "setcookie",
        "credential",
        "privatekey",
    ];
    // A bare `token` suffix does not count: `nextPageToken`, `pageToken` are pagination.
    const SUFFIXES: [&str; 12] = [
        "password",
        "passwd",
        "secret",
        "apikey",
        "privatekey",
        "accesstoken",
        "refreshtoken",
        "idtoken",
        "authtoken",
        "sessiontoken",
        "credential",
        "credentials",
    ];
    let normalized: String = key
        .chars()
        .filter(|c| !matches!(c, '_' | '-' | '.') && !c.is_whitespace() && !is_invisible(*c))
        .flat_map(char::to_lowercase)
        .collect();
    EXACT.contains(&normalized.as_str()) || SUFFIXES.iter().any(|suffix| normalized.ends_with(suffix))
}

/// Zero-width and bidi formatting characters.
fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}' | '\u{061C}' | '\u{180E}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{2069}' | '\u{FEFF}'
    )
}

/// Terminal escapes and other control characters (tab, LF and CR are ordinary text).
fn is_suspicious(c: char) -> bool {
    (c.is_control() && !matches!(c, '\t' | '\n' | '\r')) || is_invisible(c)
}

struct Patterns {
    /// `key=value`, `key: value`, `"key": "value"` — kept only when `key` is sensitive.
    key_value: Regex,
    /// `Bearer X`, `Basic X`.
    scheme: Regex,
    /// Well-known token shapes, replaced whole.
    shapes: Regex,
}

static PATTERNS: LazyLock<Result<Patterns, String>> = LazyLock::new(|| {
    let compile = |pattern: &str| Regex::new(pattern).map_err(|error| error.to_string());
    Ok(Patterns {
        key_value: compile(
            r#"(?i)(?P<key>[a-z0-9_.\-]{0,64}?(?:password|passwd|pwd|secret|token|key|authorization|cookie|credentials?))(?P<sep>["']?[ \t]*[:=][ \t]*(?:(?:bearer|basic|token)[ \t]+)?)(?P<val>"[^"\r\n]{0,512}"|'[^'\r\n]{0,512}'|[^\s&"',;<>]+)"#,
        )?,
        scheme: compile(r"(?i)\b(?P<scheme>bearer|basic)(?P<sep>[ \t]+)(?P<val>[A-Za-z0-9\-._~+/]+=*)")?,
        shapes: compile(
            r"\b(?:sk-[A-Za-z0-9_\-]{16,}|(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|xox[abprs]-[A-Za-z0-9\-]{10,}|AKIA[0-9A-Z]{16}|eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*)",
        )?,
    })
});

/// Scrubs secrets from text: echoes of the sent credential first, then sensitive `key=value`
/// pairs, `Bearer`/`Basic` credentials and well-known token shapes. Returns the text and the
/// number of redactions. Linear in the text's length.
pub fn scrub_text(text: &str, echo: &Echo) -> (String, usize) {
    scrub_with(text, &echo.scan())
}

fn scrub_with(text: &str, echo: &EchoScan<'_>) -> (String, usize) {
    let Ok(patterns) = &*PATTERNS else {
        // Fail closed: without the patterns nothing can be vouched for.
        return (REDACTED.to_owned(), 1);
    };
    let (mut out, count) = echo.scrub(text);
    let mut replaced = 0;
    let step = patterns.key_value.replace_all(&out, |caps: &Captures<'_>| {
        let (key, sep, val) = (group(caps, "key"), group(caps, "sep"), group(caps, "val"));
        let inner = val.trim_matches(|c| c == '"' || c == '\'');
        if !is_sensitive_key(key) || inner == REDACTED || inner.is_empty() {
            return whole(caps).to_owned();
        }
        replaced += 1;
        let quote = if val.len() >= 2 && val.starts_with(['"', '\'']) { &val[..1] } else { "" };
        format!("{key}{sep}{quote}{REDACTED}{quote}")
    });
    let next = step.into_owned();
    out = next;
    let step = patterns.scheme.replace_all(&out, |caps: &Captures<'_>| {
        let (scheme, sep, val) = (group(caps, "scheme"), group(caps, "sep"), group(caps, "val"));
        if scheme.eq_ignore_ascii_case("basic") && !looks_like_basic(val) {
            return whole(caps).to_owned();
        }
        replaced += 1;
        format!("{scheme}{sep}{REDACTED}")
    });
    let next = step.into_owned();
    out = next;
    let step = patterns.shapes.replace_all(&out, |_: &Captures<'_>| {
        replaced += 1;
        REDACTED
    });
    let next = step.into_owned();
    out = next;
    (out, count + replaced)
}

fn group<'h>(caps: &Captures<'h>, name: &str) -> &'h str {
    caps.name(name).map_or("", |m| m.as_str())
}

fn whole<'h>(caps: &Captures<'h>) -> &'h str {
    caps.get(0).map_or("", |m| m.as_str())
}

/// `Basic X` is a credential when X decodes to `user:password`, or is long and not a plain word
/// ("Basic information" is prose).
fn looks_like_basic(token: &str) -> bool {
    let trimmed = token.trim_end_matches('=');
    let decoded = base64::engine::general_purpose::STANDARD_NO_PAD
        .decode(trimmed)
        .or_else(|_| base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(trimmed));
    if let Ok(bytes) = decoded {
        let bytes = Zeroizing::new(bytes);
        if bytes.contains(&b':') {
            return true;
        }
    }
    token.len() >= 8 && !token.chars().all(|c| c.is_ascii_alphabetic())
}

/// A redacted, whitespace-collapsed, single-line excerpt of at most 300 characters, for error
/// messages (for example an upstream error page).
pub fn error_text(raw: &str, echo: &Echo) -> String {
    let (scrubbed, _) = scrub_text(raw, echo);
    let mut line = String::with_capacity(scrubbed.len().min(MAX_ERROR_CHARS * 4));
    let mut pending_space = false;
    let mut chars = 0;
    for c in scrubbed.chars() {
        if c.is_whitespace() || is_suspicious(c) {
            pending_space = chars > 0;
            continue;
        }
        if pending_space {
            line.push(' ');
            chars += 1;
            pending_space = false;
        }
        line.push(c);
        chars += 1;
        if chars > MAX_ERROR_CHARS {
            break;
        }
    }
    cut_chars(&line, MAX_ERROR_CHARS, true)
}

/// At most `max` characters; with `ellipsis`, a cut text ends in `…` within the bound.
fn cut_chars(text: &str, max: usize, ellipsis: bool) -> String {
    match text.char_indices().nth(max) {
        None => text.to_owned(),
        Some(_) if ellipsis && max > 0 => {
            let end = text.char_indices().nth(max - 1).map_or(text.len(), |(i, _)| i);
            format!("{}…", &text[..end])
        }
        Some((end, _)) => text[..end].to_owned(),
    }
}

/// Per-alias bookkeeping while walking a selected value. Each kind of cut keeps how many
/// places were cut and the largest original size among them, so a flag can say what was
/// shown out of what there was.
#[derive(Default)]
struct Walk {
    redactions: usize,
    depth: Cuts,
    items: Cuts,
    strings: Cuts,
    suspicious: bool,
}

/// The places one limit cut and the largest original size (levels, entries or characters).
#[derive(Default)]
struct Cuts {
    count: usize,
    largest: usize,
}

impl Cuts {
    fn record(&mut self, total: usize) {
        self.count += 1;
        self.largest = self.largest.max(total);
    }

    /// `{shown, total, <counted>: n}`, or nothing when this limit cut nothing.
    fn flag(&self, shown: usize, counted: &str) -> Option<Value> {
        (self.count > 0).then(|| {
            let mut flag = Map::new();
            flag.insert("shown".into(), Value::from(shown));
            flag.insert("total".into(), Value::from(self.largest));
            flag.insert(counted.into(), Value::from(self.count));
            Value::Object(flag)
        })
    }
}

/// How many levels of non-empty containers `value` holds (0 for a scalar or an empty
/// container), counted without recursion so no document can exhaust the stack.
fn nesting(value: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(value, 0usize)];
    while let Some((value, above)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match value {
            Value::Array(items) if !items.is_empty() => Box::new(items.iter()),
            Value::Object(entries) if !entries.is_empty() => Box::new(entries.values()),
            _ => continue,
        };
        let level = above + 1;
        deepest = deepest.max(level);
        stack.extend(children.map(|child| (child, level)));
    }
    deepest
}

impl Walk {
    fn string(&mut self, text: &str, limits: &Limits, echo: &EchoScan<'_>) -> String {
        let (scrubbed, count) = scrub_with(text, echo);
        self.redactions += count;
        if scrubbed.chars().any(is_suspicious) {
            self.suspicious = true;
        }
        let cut = cut_chars(&scrubbed, limits.max_string, false);
        if cut.len() != scrubbed.len() {
            self.strings.record(scrubbed.chars().count());
        }
        cut
    }

    fn marker(&self, marker: &str, limits: &Limits) -> Value {
        Value::String(cut_chars(marker, limits.max_string, false))
    }

    fn redacted(&mut self, limits: &Limits) -> Value {
        self.redactions += 1;
        self.marker(REDACTED, limits)
    }

    fn value(&mut self, value: &Value, depth: usize, limits: &Limits, echo: &EchoScan<'_>) -> Value {
        match value {
            Value::Null | Value::Bool(_) => value.clone(),
            Value::Number(number) => {
                let text = number.to_string();
                if echo.found_in(&text) {
                    self.redacted(limits)
                } else if text.chars().count() > limits.max_string {
                    self.strings.record(text.chars().count());
                    self.marker(TRUNCATED_NUMBER, limits)
                } else {
                    value.clone()
                }
            }
            Value::String(text) => Value::String(self.string(text, limits, echo)),
            Value::Array(items) if items.is_empty() => Value::Array(Vec::new()),
            Value::Object(entries) if entries.is_empty() => Value::Object(Map::new()),
            Value::Array(_) | Value::Object(_) if depth >= limits.max_depth => {
                self.depth.record(depth + nesting(value));
                self.marker(TRUNCATED_DEPTH, limits)
            }
            Value::Array(items) => {
                self.items(items.len(), limits);
                Value::Array(
                    items.iter().take(limits.max_items).map(|item| self.value(item, depth + 1, limits, echo)).collect(),
                )
            }
            Value::Object(entries) => {
                self.items(entries.len(), limits);
                let mut out = Map::new();
                for (key, item) in entries.iter().take(limits.max_items) {
                    let shown_key = self.string(key, limits, echo);
                    let shown = if is_sensitive_key(key) {
                        self.redacted(limits)
                    } else {
                        self.value(item, depth + 1, limits, echo)
                    };
                    out.insert(shown_key, shown);
                }
                Value::Object(out)
            }
        }
    }

    fn items(&mut self, total: usize, limits: &Limits) {
        if total > limits.max_items {
            self.items.record(total);
        }
    }

    /// `{depth?, items?, strings?}`, each `{shown, total, …}` (see `Shaped::truncation`).
    fn truncation(&self, limits: &Limits) -> Option<Value> {
        let mut details = Map::new();
        let flags = [
            ("depth", self.depth.flag(limits.max_depth, "containers")),
            ("items", self.items.flag(limits.max_items, "containers")),
            ("strings", self.strings.flag(limits.max_string, "strings")),
        ];
        for (name, flag) in flags {
            if let Some(flag) = flag {
                details.insert(name.into(), flag);
            }
        }
        (!details.is_empty()).then_some(Value::Object(details))
    }
}

/// The reference tokens of an RFC 6901 pointer (`None` when it is not one).
fn pointer_tokens(pointer: &str) -> Option<Vec<String>> {
    if pointer.is_empty() {
        return Some(Vec::new());
    }
    let rest = pointer.strip_prefix('/')?;
    rest.split('/')
        .map(|token| {
            let mut out = String::with_capacity(token.len());
            let mut chars = token.chars();
            while let Some(c) = chars.next() {
                if c == '~' {
                    match chars.next() {
                        Some('0') => out.push('~'),
                        Some('1') => out.push('/'),
                        _ => return None,
                    }
                } else {
                    out.push(c);
                }
            }
            Some(out)
        })
        .collect()
}

/// Selects each alias's pointer in `document`, then redacts and prunes the selected values.
pub fn shape(document: &Value, aliases: &[(String, String)], limits: &Limits, echo: &Echo) -> Shaped {
    let mut shaped = Shaped::default();
    let echo = echo.scan();
    for (alias, pointer) in aliases {
        let Some(tokens) = pointer_tokens(pointer) else {
            shaped.values.insert(alias.clone(), Value::Null);
            shaped.warn(format!("field '{alias}': its pointer is not a valid JSON pointer; value is null"));
            continue;
        };
        let Some(selected) = document.pointer(pointer) else {
            shaped.values.insert(alias.clone(), Value::Null);
            shaped.warn(format!("field '{alias}': not found at {pointer}; value is null"));
            continue;
        };
        let mut walk = Walk::default();
        let value = if tokens.iter().any(|token| is_sensitive_key(token)) {
            walk.redacted(limits)
        } else {
            walk.value(selected, 0, limits, &echo)
        };
        shaped.values.insert(alias.clone(), value);
        if walk.suspicious {
            shaped.warn(format!(
                "field '{alias}': contains control, bidi or zero-width characters (kept, JSON-escaped); treat as untrusted data"
            ));
        }
        if let Some(details) = walk.truncation(limits) {
            shaped.truncation.insert(alias.clone(), details);
        }
        if walk.redactions > 0 {
            shaped.redactions.insert(alias.clone(), Value::from(walk.redactions));
        }
    }
    shaped
}
