//! Canonical JSON: the bytes that action hashes, receipt hashes and policy hashes are taken over.
//!
//! The output is byte-identical to ctrlrun's `canonical_bytes`, i.e. Python's
//! `json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)`, so a hash
//! computed here and one computed by ctrlrun agree. Numbers are handled as text (serde_json's
//! `arbitrary_precision`), so an integer of any size is printed exactly as it was written, the
//! way Python's unbounded `int` does.
//!
//! Floats are where the two dialects part, and [`Floats`] says which one an encoding serves.
//! ctrlrun refuses them at any depth ([`Floats::Refused`]): a binary float has no portable text
//! form in Python's `repr`, and two hosts that printed `0.1` differently would disagree about a
//! hash that approvals are bound to. `warden/v1` prints them as RFC 8785 (JCS) does
//! ([`Floats::Rfc8785`]): the IEEE-754 double the text denotes, written as ECMAScript's
//! `Number::toString` writes it (the shortest text that reads back as the same double), which
//! Node's `JSON.stringify` prints and which a float sent by Python's `json.dumps` reads back as.
//! So `1.50`, `15e-1` and `1.5` are one number, `1.0` and `1e3` print `1` and `1000` (the canonical
//! reading of an action then holds the integers 1 and 1000), and a text beyond the double range
//! (`1e400`) is refused, as `NaN` and `Infinity` are by the parser. The rest of the form is the
//! same in both: keys sorted by code point (RFC 8785 sorts by UTF-16 code unit, which differs only
//! for keys that mix characters above U+FFFF with ones in U+E000..U+FFFF) and integers written
//! with a fraction and exponent neither; an integer is never read as a double, so one beyond 2^53
//! keeps every digit.

use std::borrow::Cow;
use std::fmt::Write as _;

use serde_json::{Map, Number, Value};
use sha2::{Digest, Sha256};

/// Why a value has no canonical form.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CanonicalError {
    /// A float, which has no exact canonical form; `path` says where it is.
    #[error(
        "float is not encodable at {path}: use integer minor units (amount=200000) or a decimal string (\"2000.00\")"
    )]
    Float {
        /// Where the float is, as a JSON path.
        path: String,
    },
    /// A float whose text denotes no finite double (`1e400`), which RFC 8785 cannot print.
    #[error(
        "the number at {path} is beyond the range of a double (about ±1.8e308), so it has no canonical form; send it \
         as a decimal string"
    )]
    BeyondDouble {
        /// Where the number is, as a JSON path.
        path: String,
    },
    /// The text is not valid JSON.
    #[error("invalid JSON: {message}")]
    Parse {
        /// The parser's account of what is wrong.
        message: String,
    },
    /// Text that names a value with no canonical form: `NaN`, `Infinity`, a lone UTF-16
    /// surrogate.
    #[error("invalid JSON: {message}")]
    NoForm {
        /// The parser's account of what is wrong, with its position.
        message: String,
    },
    /// Containers nested deeper than the parser or the encoder goes.
    #[error("invalid JSON: {message}")]
    TooDeep {
        /// Where the encoder stopped, as a JSON path (the parser gives a position instead).
        path: Option<String>,
        /// What is wrong, with the position or path.
        message: String,
    },
    /// A key given twice in one object, which has no single canonical form.
    #[error("invalid JSON: {message}")]
    Duplicate {
        /// The repeated key's path.
        path: String,
        /// What is wrong, with the path and position.
        message: String,
    },
}

/// Which numbers a canonical form holds: the one difference between the dialects' canonical JSON.
///
/// A document's schema decides it (`Schema::floats`), for the values that come in under that
/// document: an action's arguments and the document's own condition operands. Whatever wraps a
/// value already admitted is written with [`Floats::ADMITTED`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Floats {
    /// ctrlrun's: a float anywhere has no canonical form and is refused with its path
    /// (`ctrlrun.policy/*` documents, the pure functions that know no document, executor results).
    Refused,
    /// RFC 8785's: a float is the double its text denotes, printed as ECMAScript prints it
    /// (`warden/v1` documents).
    Rfc8785,
}

impl Floats {
    /// How a document wrapping values some door already admitted is written (the action hash,
    /// receipts, an approval's copy of the arguments): it holds a float only if that door let
    /// one in, and for a value without floats both forms are the same bytes.
    pub const ADMITTED: Floats = Floats::Rfc8785;
}

/// Containers nested deeper than this are refused by [`parse_json`]. serde_json uses the same
/// limit; it keeps every recursive walk over a parsed value far from the end of the stack.
pub const MAX_PARSE_DEPTH: usize = 128;

/// How deep a value taken in from outside (action arguments, an executor's result) may nest.
///
/// Lower than [`MAX_PARSE_DEPTH`] on purpose: such a value is later wrapped in documents (an
/// action, a receipt, an event) that are written canonically and read back with [`parse_json`],
/// and the headroom is what lets the wrapped document read back. Check with [`nesting_depth`].
pub const MAX_INPUT_DEPTH: usize = 100;

/// The encoder's own limit is looser than the parser's so that a parsed value can still be
/// wrapped and encoded; it exists only so that a hand-built, absurdly deep value is refused
/// instead of overflowing the stack.
const MAX_ENCODE_DEPTH: usize = 512;

/// Object keys that serde_json, with `arbitrary_precision` (or `raw_value`), reads back as a
/// number (or raw value) instead of an object. A value holding one would not survive a
/// serde_json round trip, and `{"amount": {"$serde_json::private::Number": "12"}}` would turn
/// into `{"amount": 12}` after storage; Python sees an object. Refusing them at the door keeps
/// every accepted value stable wherever it is stored.
const RESERVED_KEYS: [&str; 2] = ["$serde_json::private::Number", "$serde_json::private::RawValue"];

/// Parse JSON text the way Python's `json.loads` reads it, refusing what ctrlrun could not hash.
///
/// A strict RFC 8259 parser rather than `serde_json::from_str`: serde_json turns the reserved
/// key above into a number, and its errors for the same inputs are worded differently. Refused,
/// where Python would hand ctrlrun a value it then fails to encode: lone UTF-16 surrogates, `NaN`
/// and `Infinity`. Refused where Python silently keeps the last value: a key given twice in one
/// object (`{"a":1,"a":2}` has no single canonical form — a reader that keeps the first value
/// and one that keeps the last would act on different arguments under one hash); the error
/// names the repeated key's path. Other error messages give a position, never a copy of the input.
pub fn parse_json(text: &str) -> Result<Value, CanonicalError> {
    let mut parser = Parser { text, bytes: text.as_bytes(), pos: 0, repeated: None };
    let parsed = parser.whole();
    match (parsed, parser.repeated.take()) {
        (Err(CanonicalError::Parse { message }), Some(mut trail)) => {
            // Collected innermost first while the error unwound.
            trail.reverse();
            let path = trail.iter().fold(String::new(), |path, step| match step {
                Step::Member(key) => member_path(&path, key),
                Step::Item(index) => format!("{path}[{index}]"),
            });
            let message =
                format!("duplicate key at {}: an object may give each key once ({message})", display_path(&path));
            Err(CanonicalError::Duplicate { path, message })
        }
        (parsed, _) => parsed,
    }
}

/// The canonical text of `value`, floats refused ([`Floats::Refused`], ctrlrun's form). `root`
/// names the top of the path in a [`CanonicalError::Float`] (`"arguments"` gives
/// `arguments.items[3].price`); with an empty root, paths start at the first member name
/// (`arguments.items[3].price` again, for a value that wraps `arguments`).
pub fn to_canonical_string(value: &Value, root: &str) -> Result<String, CanonicalError> {
    to_canonical_string_with(value, root, Floats::Refused)
}

/// The canonical text of `value` with `floats` deciding what a float is; see
/// [`to_canonical_string`] for `root`.
pub fn to_canonical_string_with(value: &Value, root: &str, floats: Floats) -> Result<String, CanonicalError> {
    let mut out = String::new();
    let mut path = String::from(root);
    write_value(&mut out, value, &mut path, 0, floats)?;
    Ok(out)
}

/// [`to_canonical_string`] as UTF-8 bytes: what a digest is taken over.
pub fn canonical_bytes(value: &Value, root: &str) -> Result<Vec<u8>, CanonicalError> {
    to_canonical_string(value, root).map(String::into_bytes)
}

/// [`to_canonical_string_with`] as UTF-8 bytes.
pub fn canonical_bytes_with(value: &Value, root: &str, floats: Floats) -> Result<Vec<u8>, CanonicalError> {
    to_canonical_string_with(value, root, floats).map(String::into_bytes)
}

/// Why a number has no canonical text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unprintable {
    /// A float, under [`Floats::Refused`].
    Float,
    /// A float whose text denotes no finite double.
    BeyondDouble,
}

impl Unprintable {
    /// The encoder's error for a number at `path`.
    fn at(self, path: String) -> CanonicalError {
        match self {
            Unprintable::Float => CanonicalError::Float { path },
            Unprintable::BeyondDouble => CanonicalError::BeyondDouble { path },
        }
    }
}

/// The canonical text of one number: an integer's exact digits (`-0` as `0`), or, where
/// `floats` admits them, the RFC 8785 text of the double a float denotes. The one place a number
/// is printed: hashes, templates and the policy's comparisons all read this text.
pub fn number_text(n: &Number, floats: Floats) -> Result<Cow<'_, str>, Unprintable> {
    if let Some(text) = integer_text(n) {
        return Ok(Cow::Borrowed(text));
    }
    match floats {
        Floats::Refused => Err(Unprintable::Float),
        Floats::Rfc8785 => float_text(n.as_str()).map(Cow::Owned).ok_or(Unprintable::BeyondDouble),
    }
}

/// ECMAScript's `Number::toString` of the double nearest to `text` (RFC 8785 §3.2.2.3): the
/// shortest digits that read back as that double, plain from 1e-7 up to 1e21 and in exponent
/// form (`1e+21`, `1.5e-7`) outside, `-0` as `0`. `None` when `text` is no number or the double
/// is not finite. Rust's `f64` parsing rounds correctly, as Python's and ECMAScript's do.
pub fn float_text(text: &str) -> Option<String> {
    double_text(text.parse().ok()?)
}

/// ECMAScript's `Number::toString` of `value` (see [`float_text`]); `None` for NaN and the
/// infinities, which JSON cannot carry.
pub fn double_text(value: f64) -> Option<String> {
    value.is_finite().then(|| ryu_js::Buffer::new().format_finite(value).to_owned())
}

/// Whether Python would read this number as an `int`: its text has no fraction and no exponent.
///
/// `1.0` and `1e3` are floats there even though their values are whole, so they are floats here.
pub fn is_integer(n: &Number) -> bool {
    !n.as_str().contains(['.', 'e', 'E'])
}

/// `"sha256:"` followed by the 64 lowercase hex digits of the SHA-256 of `bytes`.
pub fn sha256_prefixed(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// The path of the first float in `value`, visiting members in canonical (sorted) order, which is
/// the float [`to_canonical_string`] would report.
///
/// Iterative, so that a value of any depth can be searched without exhausting the stack.
pub fn find_float(value: &Value, root: &str) -> Option<String> {
    let mut pending: Vec<(&Value, String)> = vec![(value, root.to_owned())];
    while let Some((node, path)) = pending.pop() {
        match node {
            Value::Number(n) if !is_integer(n) => return Some(display_path(&path)),
            Value::Array(items) => {
                for (index, item) in items.iter().enumerate().rev() {
                    pending.push((item, format!("{path}[{index}]")));
                }
            }
            Value::Object(members) => {
                for (key, item) in sorted_members(members).into_iter().rev() {
                    pending.push((item, member_path(&path, key)));
                }
            }
            _ => {}
        }
    }
    None
}

/// How many containers deep `value` nests: 0 for a scalar, 1 for `[]` or `{"a": 1}`.
///
/// Iterative, so that any value can be measured without exhausting the stack.
pub fn nesting_depth(value: &Value) -> usize {
    let mut deepest = 0;
    let mut pending: Vec<(&Value, usize)> = vec![(value, 0)];
    while let Some((node, depth)) = pending.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match node {
            Value::Array(items) => Box::new(items.iter()),
            Value::Object(members) => Box::new(members.values()),
            _ => continue,
        };
        let inner = depth + 1;
        deepest = deepest.max(inner);
        pending.extend(children.map(|child| (child, inner)));
    }
    deepest
}

/// Members in code-point order of their keys. UTF-8 byte order is code-point order, so `str`
/// comparison is Python's `sorted`. Sorted here rather than trusted from the map, because a
/// dependency enabling serde_json's `preserve_order` would silently make the map insertion-ordered.
fn sorted_members(members: &Map<String, Value>) -> Vec<(&String, &Value)> {
    let mut entries: Vec<(&String, &Value)> = members.iter().collect();
    entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
    entries
}

fn member_path(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

fn display_path(path: &str) -> String {
    if path.is_empty() {
        "the top level".to_owned()
    } else {
        path.to_owned()
    }
}

/// The integer's text as Python prints the `int`: exactly its digits, with `-0` read as `0`.
pub(crate) fn integer_text(n: &Number) -> Option<&str> {
    if !is_integer(n) {
        return None;
    }
    let text = n.as_str();
    let digits = text.strip_prefix('-').unwrap_or(text);
    if digits.bytes().all(|b| b == b'0') {
        Some("0")
    } else {
        Some(text)
    }
}

fn write_value(
    out: &mut String,
    value: &Value,
    path: &mut String,
    depth: usize,
    floats: Floats,
) -> Result<(), CanonicalError> {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(n) => match number_text(n, floats) {
            Ok(text) => out.push_str(&text),
            Err(why) => return Err(why.at(display_path(path))),
        },
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            let depth = enter(depth, path)?;
            out.push('[');
            let parent_len = path.len();
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                // Writing to a String cannot fail.
                let _ = write!(path, "[{index}]");
                write_value(out, item, path, depth, floats)?;
                path.truncate(parent_len);
            }
            out.push(']');
        }
        Value::Object(members) => {
            let depth = enter(depth, path)?;
            out.push('{');
            let parent_len = path.len();
            for (index, (key, item)) in sorted_members(members).into_iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write_string(out, key);
                out.push(':');
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(key);
                write_value(out, item, path, depth, floats)?;
                path.truncate(parent_len);
            }
            out.push('}');
        }
    }
    Ok(())
}

fn enter(depth: usize, path: &str) -> Result<usize, CanonicalError> {
    let deeper = depth + 1;
    if deeper > MAX_ENCODE_DEPTH {
        return Err(CanonicalError::TooDeep {
            path: Some(display_path(path)),
            message: format!("containers nest deeper than {MAX_ENCODE_DEPTH} levels at {}", display_path(path)),
        });
    }
    Ok(deeper)
}

/// Python's `ensure_ascii=False` string encoding: only `"`, `\` and C0 controls are escaped,
/// the five with short forms by those forms and the rest as lowercase `\u00xx`; DEL, U+2028 and
/// everything else non-ASCII are written raw.
fn write_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

struct Parser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    /// Set when a key repeats: the path to it, innermost step first, filled in by each
    /// enclosing container as the error unwinds (nothing is tracked on the way down).
    repeated: Option<Vec<Step>>,
}

/// One step of a JSON path.
enum Step {
    Member(String),
    Item(usize),
}

impl Parser<'_> {
    fn whole(&mut self) -> Result<Value, CanonicalError> {
        self.skip_whitespace();
        let value = self.value(0)?;
        self.skip_whitespace();
        if self.pos != self.bytes.len() {
            return Err(self.error("extra data after the JSON value"));
        }
        Ok(value)
    }

    /// On the way out of a failed member or item: the step that led into it joins the trail.
    fn unwinding(&mut self, step: impl FnOnce() -> Step) {
        if let Some(trail) = &mut self.repeated {
            trail.push(step());
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    /// Python's positions: line and column from 1, and `char` as a code-point offset.
    fn error(&self, what: &str) -> CanonicalError {
        CanonicalError::Parse { message: self.located(what) }
    }

    /// `what` with the position, as [`Parser::error`] words it.
    fn located(&self, what: &str) -> String {
        let before = self.text.get(..self.pos).unwrap_or(self.text);
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = before.get(line_start..).map_or(0, |l| l.chars().count()) + 1;
        let offset = before.chars().count();
        format!("{what}: line {line} column {column} (char {offset})")
    }

    /// Text with no canonical form (`NaN`, a lone surrogate), at the current position.
    fn no_form(&self, what: &str) -> CanonicalError {
        CanonicalError::NoForm { message: self.located(what) }
    }

    fn skip_whitespace(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn eat(&mut self, literal: &str) -> bool {
        let matched = self.bytes.get(self.pos..self.pos + literal.len()).is_some_and(|b| b == literal.as_bytes());
        if matched {
            self.pos += literal.len();
        }
        matched
    }

    fn value(&mut self, depth: usize) -> Result<Value, CanonicalError> {
        match self.peek() {
            Some(b'{') => self.object(depth + 1),
            Some(b'[') => self.array(depth + 1),
            Some(b'"') => self.string().map(Value::String),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(b't') if self.eat("true") => Ok(Value::Bool(true)),
            Some(b'f') if self.eat("false") => Ok(Value::Bool(false)),
            Some(b'n') if self.eat("null") => Ok(Value::Null),
            Some(b'N' | b'I') if self.rest_starts_with_non_finite() => {
                Err(self.no_form("NaN and Infinity are not JSON numbers and have no canonical form"))
            }
            _ => Err(self.error("expecting value")),
        }
    }

    fn rest_starts_with_non_finite(&self) -> bool {
        let rest = self.bytes.get(self.pos..).unwrap_or_default();
        rest.starts_with(b"NaN") || rest.starts_with(b"Infinity")
    }

    fn enter(&self, depth: usize) -> Result<(), CanonicalError> {
        if depth > MAX_PARSE_DEPTH {
            let message = self.located(&format!("containers nest deeper than {MAX_PARSE_DEPTH} levels"));
            return Err(CanonicalError::TooDeep { path: None, message });
        }
        Ok(())
    }

    fn object(&mut self, depth: usize) -> Result<Value, CanonicalError> {
        self.enter(depth)?;
        self.pos += 1;
        let mut members = Map::new();
        self.skip_whitespace();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(Value::Object(members));
        }
        loop {
            if self.peek() != Some(b'"') {
                return Err(self.error("expecting property name enclosed in double quotes"));
            }
            let key_at = self.pos;
            let key = self.string()?;
            if RESERVED_KEYS.contains(&key.as_str()) {
                self.pos = key_at;
                return Err(self.error(
                    "this object key is reserved by the JSON library and would not read back as \
                     an object",
                ));
            }
            self.skip_whitespace();
            if self.peek() != Some(b':') {
                return Err(self.error("expecting ':' delimiter"));
            }
            self.pos += 1;
            self.skip_whitespace();
            let item = match self.value(depth) {
                Ok(item) => item,
                Err(error) => {
                    self.unwinding(|| Step::Member(key));
                    return Err(error);
                }
            };
            match members.entry(key) {
                serde_json::map::Entry::Vacant(slot) => {
                    slot.insert(item);
                }
                serde_json::map::Entry::Occupied(taken) => {
                    self.pos = key_at;
                    self.repeated = Some(vec![Step::Member(taken.key().clone())]);
                    return Err(self.error("the key repeats"));
                }
            }
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => {
                    self.pos += 1;
                    self.skip_whitespace();
                }
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(Value::Object(members));
                }
                _ => return Err(self.error("expecting ',' delimiter")),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<Value, CanonicalError> {
        self.enter(depth)?;
        self.pos += 1;
        let mut items = Vec::new();
        self.skip_whitespace();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(Value::Array(items));
        }
        loop {
            match self.value(depth) {
                Ok(item) => items.push(item),
                Err(error) => {
                    let index = items.len();
                    self.unwinding(|| Step::Item(index));
                    return Err(error);
                }
            }
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => {
                    self.pos += 1;
                    self.skip_whitespace();
                }
                Some(b']') => {
                    self.pos += 1;
                    return Ok(Value::Array(items));
                }
                _ => return Err(self.error("expecting ',' delimiter")),
            }
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.pos;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.pos += 1;
        }
        self.pos - start
    }

    /// JSON's number grammar exactly; the text is kept as written so that integers of any size
    /// survive, and whether it is a float is decided by the encoder, with a path.
    fn number(&mut self) -> Result<Value, CanonicalError> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
            if self.peek() == Some(b'I') && self.rest_starts_with_non_finite() {
                return Err(self.no_form("NaN and Infinity are not JSON numbers and have no canonical form"));
            }
        }
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return Err(self.error("expecting value")),
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if self.digits() == 0 {
                return Err(self.error("expecting a digit after the decimal point"));
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if self.digits() == 0 {
                return Err(self.error("expecting a digit in the exponent"));
            }
        }
        let text = self.text.get(start..self.pos).ok_or_else(|| self.error("number is not valid UTF-8"))?;
        text.parse::<Number>().map(Value::Number).map_err(|_| self.error("number is out of range"))
    }

    fn string(&mut self) -> Result<String, CanonicalError> {
        self.pos += 1;
        let mut out = String::new();
        let mut chunk_start = self.pos;
        loop {
            match self.peek() {
                None => return Err(self.error("unterminated string")),
                Some(b'"') => {
                    self.push_chunk(&mut out, chunk_start)?;
                    self.pos += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.push_chunk(&mut out, chunk_start)?;
                    self.pos += 1;
                    self.escape(&mut out)?;
                    chunk_start = self.pos;
                }
                Some(0x00..=0x1f) => return Err(self.error("invalid control character in string")),
                Some(_) => self.pos += 1,
            }
        }
    }

    fn push_chunk(&self, out: &mut String, chunk_start: usize) -> Result<(), CanonicalError> {
        // Both ends sit on ASCII bytes (a quote, a backslash or the string start), so the slice
        // is on character boundaries; `get` keeps that an error rather than a panic regardless.
        let chunk = self.text.get(chunk_start..self.pos).ok_or_else(|| self.error("string is not valid UTF-8"))?;
        out.push_str(chunk);
        Ok(())
    }

    fn escape(&mut self, out: &mut String) -> Result<(), CanonicalError> {
        let short = match self.peek() {
            Some(b'"') => '"',
            Some(b'\\') => '\\',
            Some(b'/') => '/',
            Some(b'b') => '\u{08}',
            Some(b'f') => '\u{0c}',
            Some(b'n') => '\n',
            Some(b'r') => '\r',
            Some(b't') => '\t',
            Some(b'u') => {
                self.pos += 1;
                let c = self.unicode_escape()?;
                out.push(c);
                return Ok(());
            }
            _ => return Err(self.error("invalid escape")),
        };
        self.pos += 1;
        out.push(short);
        Ok(())
    }

    /// A `\uXXXX` escape, after the `u`. A surrogate is accepted only as half of a pair that
    /// names one character: a lone one has no UTF-8 form, so no canonical form, and replacing it
    /// would give two distinct inputs one hash.
    fn unicode_escape(&mut self) -> Result<char, CanonicalError> {
        let first = self.hex4()?;
        let code = match first {
            0xd800..=0xdbff => {
                let low_at = self.pos;
                let low = if self.eat("\\u") { self.hex4().ok() } else { None };
                match low {
                    Some(low @ 0xdc00..=0xdfff) => 0x10000 + ((first - 0xd800) << 10) + (low - 0xdc00),
                    _ => {
                        self.pos = low_at;
                        return Err(self.no_form("lone UTF-16 surrogate in \\u escape"));
                    }
                }
            }
            0xdc00..=0xdfff => return Err(self.no_form("lone UTF-16 surrogate in \\u escape")),
            other => other,
        };
        char::from_u32(code).ok_or_else(|| self.error("invalid \\u escape"))
    }

    fn hex4(&mut self) -> Result<u32, CanonicalError> {
        let mut code = 0u32;
        for _ in 0..4 {
            let digit =
                self.peek().and_then(|b| char::from(b).to_digit(16)).ok_or_else(|| self.error("invalid \\u escape"))?;
            code = code * 16 + digit;
            self.pos += 1;
        }
        Ok(code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn canonical(text: &str) -> Result<String, CanonicalError> {
        to_canonical_string(&parse_json(text)?, "value")
    }

    #[test]
    fn float_anywhere_is_refused_with_its_path() {
        let value = parse_json(r#"{"items":[{"price":1},{"price":2},3,{"price":19.99}]}"#).unwrap();
        let expected = CanonicalError::Float { path: "arguments.items[3].price".into() };
        assert_eq!(to_canonical_string(&value, "arguments"), Err(expected));
        assert_eq!(find_float(&value, "arguments").as_deref(), Some("arguments.items[3].price"));
    }

    #[test]
    fn whole_numbers_written_as_floats_are_still_floats() {
        for text in ["1.0", "1e3", "1E3", "-0.0", "0.1", "2.5e-3"] {
            let refused = canonical(&format!(r#"{{"x":[{text}]}}"#));
            assert_eq!(refused, Err(CanonicalError::Float { path: "value.x[0]".into() }), "{text}");
        }
    }

    #[test]
    fn the_first_float_in_sorted_order_is_the_one_reported() {
        let value = json!({"b": 1.5, "a": [0, 2.5]});
        assert_eq!(find_float(&value, "v").as_deref(), Some("v.a[1]"));
        assert_eq!(to_canonical_string(&value, "v"), Err(CanonicalError::Float { path: "v.a[1]".into() }));
    }

    #[test]
    fn an_empty_root_starts_paths_at_the_member_name() {
        let value = json!({"arguments": {"items": [0, 0, 0, {"price": 0.5}]}});
        assert_eq!(find_float(&value, "").as_deref(), Some("arguments.items[3].price"));
        assert_eq!(
            to_canonical_string(&value, ""),
            Err(CanonicalError::Float { path: "arguments.items[3].price".into() })
        );
    }

    #[test]
    fn the_float_message_says_what_to_use_instead() {
        let message = CanonicalError::Float { path: "arguments.amount".into() }.to_string();
        assert!(message.contains("arguments.amount"), "{message}");
        assert!(message.contains("amount=200000"), "{message}");
    }

    #[test]
    fn integers_beyond_u64_round_trip_exactly() {
        let two_to_the_70 = "1180591620717411303424";
        assert_eq!(
            canonical(&format!("[{two_to_the_70},-{two_to_the_70}]")).unwrap(),
            format!("[{two_to_the_70},-{two_to_the_70}]")
        );
        let huge = format!("9{}", "0".repeat(400));
        assert_eq!(canonical(&huge).unwrap(), huge);
    }

    #[test]
    fn negative_zero_is_printed_as_python_prints_the_int() {
        assert_eq!(canonical("[-0,0]").unwrap(), "[0,0]");
    }

    #[test]
    fn keys_are_sorted_by_code_point_at_every_depth() {
        let text = r#"{"z":1,"é":{"b":1,"a":2},"Z":3,"😀":4,"￿":5,"":6,"a":7}"#;
        assert_eq!(canonical(text).unwrap(), r#"{"":6,"Z":3,"a":7,"z":1,"é":{"a":2,"b":1},"￿":5,"😀":4}"#);
    }

    #[test]
    fn strings_escape_only_quote_backslash_and_c0_controls() {
        let value = json!("\"\\\n\r\t\u{8}\u{c}\u{0}\u{1f}\u{7f}\u{2028}é😀/");
        assert_eq!(
            to_canonical_string(&value, "v").unwrap(),
            "\"\\\"\\\\\\n\\r\\t\\b\\f\\u0000\\u001f\u{7f}\u{2028}é😀/\""
        );
    }

    #[test]
    fn output_is_compact_with_no_whitespace() {
        assert_eq!(
            canonical(" { \"a\" : [ 1 , true , null , \"x\" ] , \"b\" : { } } ").unwrap(),
            r#"{"a":[1,true,null,"x"],"b":{}}"#
        );
    }

    #[test]
    fn a_repeated_key_is_refused_with_its_path_and_position() {
        let message = |text: &str| match parse_json(text) {
            Err(CanonicalError::Duplicate { message, .. } | CanonicalError::Parse { message }) => message,
            other => panic!("{text}: expected a refusal, got {other:?}"),
        };
        let refused = "an object may give each key once (the key repeats";
        for (text, path, at) in [
            (r#"{"a":1,"a":2}"#, "a", "line 1 column 8 (char 7)"),
            (r#"{"a":1,"b":2,"a":3}"#, "a", "line 1 column 14 (char 13)"),
            // Equal once unescaped: the spelling is not the key.
            (r#"{"a":1,"\u0061":2}"#, "a", "line 1 column 8 (char 7)"),
            (r#"{"x":{"y":[0,{"k":1,"k":1}]}}"#, "x.y[1].k", "line 1 column 21 (char 20)"),
            (r#"[[],{"k":null,"k":null}]"#, "[1].k", "line 1 column 15 (char 14)"),
            (r#"{"":1,"":2}"#, "", "line 1 column 7 (char 6)"),
        ] {
            let shown = if path.is_empty() { "the top level".to_owned() } else { path.to_owned() };
            assert_eq!(message(text), format!("duplicate key at {shown}: {refused}: {at})"), "{text}");
            assert!(matches!(parse_json(text), Err(CanonicalError::Duplicate { path: p, .. }) if p == path), "{text}");
        }
        // Same key in sibling objects, or a key equal to a value, is no repetition.
        assert_eq!(canonical(r#"[{"a":1},{"a":2}]"#).unwrap(), r#"[{"a":1},{"a":2}]"#);
        assert_eq!(canonical(r#"{"a":{"a":"a"}}"#).unwrap(), r#"{"a":{"a":"a"}}"#);
        // Any other error after a container keeps its own message, untouched by the path trail.
        assert_eq!(message(r#"{"a":[1,]}"#), "expecting value: line 1 column 9 (char 8)");
        assert!(matches!(parse_json(r#"{"a":[1,]}"#), Err(CanonicalError::Parse { .. })));
    }

    #[test]
    fn escaped_surrogate_pairs_decode_to_one_character() {
        assert_eq!(canonical(r#""\ud83d\ude00""#).unwrap(), "\"😀\"");
    }

    #[test]
    fn lone_surrogates_are_refused_as_invalid_json() {
        for text in [r#""\ud800""#, r#""\udc00""#, r#""\ud800x""#, r#""\ud800\u0041""#, r#"{"\ud83d":1}"#] {
            assert!(matches!(parse_json(text), Err(CanonicalError::NoForm { .. })), "{text}");
        }
    }

    #[test]
    fn malformed_json_is_refused() {
        for text in [
            "",
            " ",
            "{",
            "[1,]",
            r#"{"a":1,}"#,
            "{'a':1}",
            "01",
            "1.",
            ".5",
            "-",
            "+1",
            "1e",
            "tru",
            "nul",
            "{\"a\"}",
            "\"a\u{1}b\"",
            r#""\x""#,
            r#""\u12""#,
            "[1] x",
            "{} {}",
            "\u{a0}1",
        ] {
            assert!(matches!(parse_json(text), Err(CanonicalError::Parse { .. })), "{text:?}");
        }
    }

    #[test]
    fn non_finite_numbers_are_refused_as_having_no_form() {
        for text in ["NaN", "Infinity", "-Infinity", "[1, NaN]"] {
            assert!(matches!(parse_json(text), Err(CanonicalError::NoForm { .. })), "{text:?}");
        }
    }

    #[test]
    fn a_number_missing_its_digits_is_refused_naming_which() {
        let table = [
            ("1.", "expecting a digit after the decimal point: line 1 column 3 (char 2)"),
            ("[10.]", "expecting a digit after the decimal point: line 1 column 5 (char 4)"),
            ("1e", "expecting a digit in the exponent: line 1 column 3 (char 2)"),
            ("[2.5e+]", "expecting a digit in the exponent: line 1 column 7 (char 6)"),
        ];
        for (text, message) in table {
            assert_eq!(parse_json(text), Err(CanonicalError::Parse { message: message.into() }), "{text:?}");
        }
    }

    #[test]
    fn parse_errors_give_a_position_and_never_echo_the_input() {
        let garbage = format!("[1,{}]", "x".repeat(10_000));
        let message = parse_json(&garbage).unwrap_err().to_string();
        assert!(message.len() < 120, "{message}");
        assert!(!message.contains("xxx"), "{message}");
        assert!(message.contains("char 3"), "{message}");
    }

    #[test]
    fn nesting_beyond_the_parse_limit_is_refused_without_overflowing() {
        let ok = format!("{}{}", "[".repeat(MAX_PARSE_DEPTH), "]".repeat(MAX_PARSE_DEPTH));
        assert!(parse_json(&ok).is_ok());
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(matches!(parse_json(&deep), Err(CanonicalError::TooDeep { path: None, .. })));
    }

    fn parse_error(text: &str) -> String {
        match parse_json(text) {
            Err(
                CanonicalError::Parse { message }
                | CanonicalError::NoForm { message }
                | CanonicalError::TooDeep { message, .. }
                | CanonicalError::Duplicate { message, .. },
            ) => message,
            other => panic!("{text:?} was not refused as invalid JSON: {other:?}"),
        }
    }

    #[test]
    fn parse_errors_name_line_column_and_character_as_python_does() {
        // Columns and offsets count characters, not bytes: `é` is two bytes and one character.
        assert_eq!(parse_error("[\"é\", x]"), "expecting value: line 1 column 7 (char 6)");
        assert_eq!(parse_error("{\n\"a\": tru}"), "expecting value: line 2 column 6 (char 7)");
        assert_eq!(
            parse_error("[1,\n\n  {]"),
            "expecting property name enclosed in double quotes: line 3 column 4 (char 8)"
        );
        assert_eq!(parse_error(""), "expecting value: line 1 column 1 (char 0)");
    }

    #[test]
    fn non_finite_numbers_are_refused_as_floats_by_name() {
        for text in ["NaN", "Infinity", "-Infinity", "[1, NaN]"] {
            assert!(
                parse_error(text).starts_with("NaN and Infinity are not JSON numbers"),
                "{text}: {}",
                parse_error(text)
            );
        }
        for text in ["Nope", "Inf", "-Inf", "-x"] {
            assert!(parse_error(text).starts_with("expecting value"), "{text}: {}", parse_error(text));
        }
    }

    /// `[[[…]]]`, `depth` arrays deep, built without the parser.
    fn nested(depth: usize) -> Value {
        let mut value = json!([]);
        for _ in 1..depth {
            value = Value::Array(vec![value]);
        }
        value
    }

    #[test]
    fn the_encoder_writes_512_levels_and_refuses_513_naming_where() {
        let text = to_canonical_string(&nested(MAX_ENCODE_DEPTH), "v").expect("512 levels encode");
        assert_eq!(text.len(), 2 * MAX_ENCODE_DEPTH);
        let refused = to_canonical_string(&json!({ "a": nested(MAX_ENCODE_DEPTH) }), "v");
        let Err(CanonicalError::TooDeep { message, path: Some(at) }) = refused else {
            panic!("513 levels were not refused: {refused:?}");
        };
        let path = format!("v.a{}", "[0]".repeat(MAX_ENCODE_DEPTH - 1));
        assert_eq!(at, path);
        assert_eq!(message, format!("containers nest deeper than 512 levels at {path}"));
    }

    #[test]
    fn the_parser_reads_128_levels_and_refuses_129() {
        let at = |depth: usize| format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        assert_eq!(nesting_depth(&parse_json(&at(MAX_PARSE_DEPTH)).expect("128 levels parse")), 128);
        assert!(parse_error(&at(MAX_PARSE_DEPTH + 1)).starts_with("containers nest deeper than 128 levels"));
        let objects = format!("{}1{}", r#"{"a":"#.repeat(MAX_PARSE_DEPTH + 1), "}".repeat(MAX_PARSE_DEPTH + 1));
        assert!(parse_error(&objects).starts_with("containers nest deeper than 128 levels"));
    }

    #[test]
    fn space_and_every_printable_character_are_written_raw() {
        let value = json!(" !~\u{7f}\u{a0}");
        assert_eq!(to_canonical_string(&value, "v").unwrap(), "\" !~\u{7f}\u{a0}\"");
        assert_eq!(to_canonical_string(&json!("\u{1f} "), "v").unwrap(), "\"\\u001f \"");
    }

    #[test]
    fn whitespace_between_tokens_is_any_of_space_tab_newline_and_return() {
        assert_eq!(canonical("\t[\r\n1 ,\t2\n]\r ").unwrap(), "[1,2]");
    }

    #[test]
    fn escapes_decode_to_their_characters() {
        let text = r#""\"\\\/\b\f\n\r\t\u00e9\u0041""#;
        assert_eq!(parse_json(text).unwrap(), json!("\"\\/\u{8}\u{c}\n\r\téA"));
    }

    #[test]
    fn nesting_depth_counts_containers_without_recursing() {
        assert_eq!(nesting_depth(&json!(1)), 0);
        assert_eq!(nesting_depth(&json!([])), 1);
        assert_eq!(nesting_depth(&json!({"a": [1, {"b": []}], "c": 2})), 4);
        let deep = format!("{}{}", "[".repeat(MAX_PARSE_DEPTH), "]".repeat(MAX_PARSE_DEPTH));
        assert_eq!(nesting_depth(&parse_json(&deep).unwrap()), MAX_PARSE_DEPTH);
    }

    #[test]
    fn a_value_at_the_input_limit_still_reads_back_after_being_wrapped_in_documents() {
        let input = format!("{}{}", "[".repeat(MAX_INPUT_DEPTH), "]".repeat(MAX_INPUT_DEPTH));
        let mut value = parse_json(&input).unwrap();
        for _ in 0..(MAX_PARSE_DEPTH - MAX_INPUT_DEPTH) {
            value = json!({ "wrapped": value });
        }
        let text = to_canonical_string(&value, "document").unwrap();
        assert_eq!(parse_json(&text).unwrap(), value);
    }

    #[test]
    fn keys_serde_json_would_read_back_as_numbers_are_refused() {
        for text in [
            r#"{"amount":{"$serde_json::private::Number":"12"}}"#,
            r#"{"\u0024serde_json::private::Number":"12"}"#,
            r#"{"$serde_json::private::RawValue":"12"}"#,
        ] {
            assert!(matches!(parse_json(text), Err(CanonicalError::Parse { .. })), "{text}");
        }
    }

    #[test]
    fn scalars_are_valid_at_the_top_level() {
        assert_eq!(canonical("7").unwrap(), "7");
        assert_eq!(canonical("\"s\"").unwrap(), "\"s\"");
        assert_eq!(canonical("null").unwrap(), "null");
        assert_eq!(to_canonical_string(&json!(0.5), ""), Err(CanonicalError::Float { path: "the top level".into() }));
    }

    #[test]
    fn is_integer_follows_python_int_versus_float() {
        for (text, integer) in
            [("0", true), ("-0", true), ("18446744073709551616", true), ("1.0", false), ("1e3", false), ("1E3", false)]
        {
            let n: Number = text.parse().unwrap();
            assert_eq!(is_integer(&n), integer, "{text}");
        }
    }

    fn rfc8785(text: &str) -> Result<String, CanonicalError> {
        to_canonical_string_with(&parse_json(text)?, "value", Floats::Rfc8785)
    }

    #[test]
    fn under_rfc_8785_a_float_is_printed_as_ecmascript_prints_its_double() {
        // RFC 8785 Appendix B (IEEE-754 bits, the text it prints), and the edges of the formats.
        let table = [
            (0x0000000000000000_u64, "0"),
            (0x8000000000000000, "0"),
            (0x0000000000000001, "5e-324"),
            (0x8000000000000001, "-5e-324"),
            (0x7fefffffffffffff, "1.7976931348623157e+308"),
            (0xffefffffffffffff, "-1.7976931348623157e+308"),
            (0x4340000000000000, "9007199254740992"),
            (0xc340000000000000, "-9007199254740992"),
            (0x4430000000000000, "295147905179352830000"),
            (0x44b52d02c7e14af5, "9.999999999999997e+22"),
            (0x44b52d02c7e14af6, "1e+23"),
            (0x44b52d02c7e14af7, "1.0000000000000001e+23"),
            (0x444b1ae4d6e2ef4e, "999999999999999700000"),
            (0x444b1ae4d6e2ef4f, "999999999999999900000"),
            (0x444b1ae4d6e2ef50, "1e+21"),
            (0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"),
            (0x3eb0c6f7a0b5ed8d, "0.000001"),
            (0x41b3de4355555553, "333333333.3333332"),
            (0x41b3de4355555554, "333333333.33333325"),
            (0x41b3de4355555555, "333333333.3333333"),
            (0x41b3de4355555556, "333333333.3333334"),
            (0x41b3de4355555557, "333333333.33333343"),
            (0xbecbf647612f3696, "-0.0000033333333333333333"),
            (0x43143ff3c1cb0959, "1424953923781206.2"),
        ];
        for (bits, expected) in table {
            let double = f64::from_bits(bits);
            assert_eq!(double_text(double).as_deref(), Some(expected), "{bits:016x}");
            // The text reads back as the same double (RFC 8785's round trip).
            assert_eq!(float_text(expected).as_deref(), Some(expected), "{expected}");
        }
        for (text, expected) in [
            ("1.50", "1.5"),
            ("15e-1", "1.5"),
            ("1.0", "1"),
            ("1e3", "1000"),
            ("1E3", "1000"),
            ("-0.0", "0"),
            ("0.1", "0.1"),
            ("0.1000000000000000055511151231257827", "0.1"),
            ("100000000000000000000.0", "100000000000000000000"),
            ("1e20", "100000000000000000000"),
            ("1e21", "1e+21"),
            ("1e-6", "0.000001"),
            ("1e-7", "1e-7"),
            ("1e-400", "0"),
            ("9007199254740993.0", "9007199254740992"),
        ] {
            assert_eq!(float_text(expected).as_deref(), Some(expected), "{expected} is a fixed point");
            assert_eq!(float_text(text).as_deref(), Some(expected), "{text}");
            assert_eq!(rfc8785(&format!("[{text}]")).unwrap(), format!("[{expected}]"), "{text}");
        }
    }

    #[test]
    fn nothing_beyond_the_finite_doubles_has_a_text() {
        for double in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            assert_eq!(double_text(double), None, "{double}");
        }
        for text in ["1e400", "-1e400", "1.8e308", "x", "", "NaN", "inf"] {
            assert_eq!(float_text(text), None, "{text:?}");
        }
        assert_eq!(float_text("1.7976931348623157e308").as_deref(), Some("1.7976931348623157e+308"));
    }

    #[test]
    fn under_rfc_8785_a_number_beyond_the_double_range_is_refused_with_its_path() {
        let value = parse_json(r#"{"items":[{"price":1.5},{"price":1e400}]}"#).unwrap();
        assert_eq!(
            to_canonical_string_with(&value, "arguments", Floats::Rfc8785),
            Err(CanonicalError::BeyondDouble { path: "arguments.items[1].price".into() })
        );
        assert_eq!(
            to_canonical_string_with(&value, "arguments", Floats::Refused),
            Err(CanonicalError::Float { path: "arguments.items[0].price".into() })
        );
        assert_eq!(
            canonical_bytes_with(&parse_json("-1e400").unwrap(), "", Floats::Rfc8785),
            Err(CanonicalError::BeyondDouble { path: "the top level".into() })
        );
        let message = CanonicalError::BeyondDouble { path: "arguments.a".into() }.to_string();
        assert_eq!(
            message,
            "the number at arguments.a is beyond the range of a double (about ±1.8e308), so it has no canonical \
             form; send it as a decimal string"
        );
    }

    #[test]
    fn integers_and_float_free_values_are_the_same_bytes_in_both_forms() {
        for text in [
            "[1180591620717411303424,-1180591620717411303424]",
            "[9007199254740993,-0,0,7]",
            r#"{"z":1,"é":{"b":1,"a":2},"😀":[true,null,"x"]}"#,
        ] {
            let value = parse_json(text).unwrap();
            let refused = to_canonical_string(&value, "v").unwrap();
            assert_eq!(to_canonical_string_with(&value, "v", Floats::Rfc8785).unwrap(), refused, "{text}");
            assert_eq!(canonical_bytes_with(&value, "v", Floats::Rfc8785).unwrap(), refused.as_bytes());
        }
        let huge = format!("9{}", "0".repeat(400));
        assert_eq!(rfc8785(&huge).unwrap(), huge, "an integer is never read as a double");
        assert_eq!(rfc8785("[-0]").unwrap(), "[0]");
    }

    #[test]
    fn number_text_is_an_integers_digits_in_both_forms_and_a_floats_rfc_8785_text_where_admitted() {
        let number = |text: &str| -> Number { text.parse().unwrap() };
        for floats in [Floats::Refused, Floats::Rfc8785] {
            assert_eq!(number_text(&number("12"), floats).as_deref(), Ok("12"));
            assert_eq!(number_text(&number("-0"), floats).as_deref(), Ok("0"));
            assert_eq!(number_text(&number("-12"), floats).as_deref(), Ok("-12"));
        }
        assert_eq!(number_text(&number("1.5"), Floats::Refused), Err(Unprintable::Float));
        assert_eq!(number_text(&number("1e400"), Floats::Refused), Err(Unprintable::Float));
        assert_eq!(number_text(&number("1.50"), Floats::Rfc8785).as_deref(), Ok("1.5"));
        assert_eq!(number_text(&number("1e400"), Floats::Rfc8785), Err(Unprintable::BeyondDouble));
        assert_eq!(Floats::ADMITTED, Floats::Rfc8785);
    }

    #[test]
    fn sha256_prefixed_is_lowercase_hex_of_the_digest() {
        assert_eq!(sha256_prefixed(b""), "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    }

    #[test]
    fn canonical_bytes_are_the_utf8_of_the_canonical_string() {
        let value = json!({"k": "é"});
        assert_eq!(canonical_bytes(&value, "v").unwrap(), "{\"k\":\"é\"}".as_bytes());
    }
}
