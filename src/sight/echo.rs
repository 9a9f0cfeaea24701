//! The echo guard: the credential sent on *this* request is scrubbed wherever the upstream
//! echoes it back, in the result, the error text and so the stored snapshot.
//!
//! What is guarded is the header value sent and every value it was built from (a bearer
//! token, a basic username and password, an api key without its prefix), each in several
//! forms: as is, percent-encoded (either hex case, `+` for space), in its three base64
//! alignments (standard and URL-safe), and for `Basic` the decoded `user:password` pair.
//! Matching also runs on two views of each text: JSON string escapes decoded (`\u0073k-…`,
//! `\/`), and, for base64 forms, with whitespace removed (MIME base64 wraps at 76 columns; an
//! error excerpt has its line breaks collapsed to spaces).
//!
//! Short values are the honest limit. A value of at least [`MIN_ANYWHERE_CHARS`] characters
//! is scrubbed wherever it occurs, inside longer words included. A value of
//! [`MIN_ECHO_CHARS`] up to `MIN_ANYWHERE_CHARS - 1` characters is scrubbed only where it
//! stands as a whole token (no letter, digit or `_` right before or after it), so a
//! six-character password `hunt3r` is scrubbed in `you sent hunt3r.` but `hunt3rs` is left
//! alone; the cost is that the same word elsewhere in the response is redacted too. A value
//! shorter than `MIN_ECHO_CHARS` is not guarded at all: scrubbing it would turn ordinary text
//! into redactions, and a secret that short is guessable anyway. Base64 forms shorter than
//! eight characters are skipped for the same reason.
//!
//! This is a backstop, not a guarantee: an upstream that transforms the value in any other way
//! (reversed, hashed, split, encoded twice, JSON escapes nested twice) is not caught.

use base64::Engine as _;
use memchr::memmem::Finder;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use zeroize::Zeroizing;

/// The replacement for anything redacted.
pub const REDACTED: &str = "[REDACTED]";
/// Values shorter than this are not guarded (see the module documentation).
pub const MIN_ECHO_CHARS: usize = 4;
/// Values at least this long are scrubbed anywhere; shorter ones only as whole tokens.
pub const MIN_ANYWHERE_CHARS: usize = 8;
/// Base64 forms shorter than this are skipped.
const MIN_BASE64_CHARS: usize = 8;
/// A run of base64 characters at least this long next to whitespace makes the guard look at
/// the text with its whitespace removed (a wrapped base64 block); shorter runs are words.
const MIN_WRAPPED_RUN: usize = 16;

/// Unreserved characters (RFC 3986) stay literal in the component form most encoders produce.
const COMPONENT: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

/// One guarded form of a sent value.
struct Form {
    text: Zeroizing<String>,
    /// Matched only where no word character touches it (a short value).
    whole_token: bool,
    /// A base64 form: also matched in the text with whitespace removed.
    base64: bool,
}

/// The credential sent on one request, in every form in which an echo of it is scrubbed. The
/// values are held in zeroizing buffers and never printed by `Debug`.
pub struct Echo {
    /// Longest first.
    forms: Vec<Form>,
}

impl std::fmt::Debug for Echo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Echo").field("forms", &self.forms.len()).finish_non_exhaustive()
    }
}

impl Echo {
    /// An echo guard for a header value alone (`None`: nothing to guard). A value of the form
    /// `Scheme X` guards `X` as a part too, and `Basic X` its decoded username and password.
    /// A request built from resolved values uses [`Echo::for_sent`], which knows the parts
    /// whatever the prefix.
    pub fn new(sent_value: Option<&str>) -> Echo {
        Echo::for_sent(sent_value, &[])
    }

    /// An echo guard for the header value sent and the values it was built from.
    ///
    /// The whole header value is guarded only when no guarded part covers it: every form of a
    /// part is inside the same form of a value containing it, and guarding the part alone
    /// keeps an echo readable (`Bearer [REDACTED]`, `key=[REDACTED]`).
    pub fn for_sent(header_value: Option<&str>, parts: &[&str]) -> Echo {
        let mut echo = Echo { forms: Vec::new() };
        let mut values: Vec<&str> = parts.to_vec();
        let mut basic = None;
        let header_value = header_value.map(str::trim);
        if let Some((scheme, rest)) = header_value.and_then(|value| value.split_once(' ')) {
            if !scheme.is_empty() && scheme.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
                values.push(rest.trim());
                if scheme.eq_ignore_ascii_case("basic") {
                    basic = Some(rest.trim());
                }
            }
        }
        if let Some(value) = header_value {
            let covered = values.iter().any(|part| part.chars().count() >= MIN_ECHO_CHARS && value.contains(part));
            if !covered {
                echo.add_value(value);
            }
        }
        for value in values {
            echo.add_value(value);
        }
        if let Some(encoded) = basic {
            echo.add_basic(encoded);
        }
        echo.forms.sort_by(|a, b| b.text.len().cmp(&a.text.len()).then_with(|| a.text.cmp(&b.text)));
        echo.forms.dedup_by(|a, b| a.text == b.text && a.whole_token == b.whole_token);
        echo
    }

    /// An echo guard with nothing to guard.
    pub fn none() -> Echo {
        Echo { forms: Vec::new() }
    }

    /// Whether there is nothing to guard (no credential, or one too short to guard).
    pub fn is_empty(&self) -> bool {
        self.forms.is_empty()
    }

    /// `text` with every guarded form replaced by `[REDACTED]` — in every view the sights
    /// search (as is, JSON string escapes decoded, wrapped base64 with its whitespace removed) —
    /// and how many were replaced. For a caller that relays whole messages (the gateway); one
    /// that scrubs many strings of one document builds one `scan`.
    pub fn scrub_text(&self, text: &str) -> (String, usize) {
        self.scan().scrub(text)
    }

    /// Searchers for every form, built once per document rather than once per string. They
    /// borrow the zeroizing forms, so no copy of a credential outlives the `Echo`.
    pub(crate) fn scan(&self) -> EchoScan<'_> {
        EchoScan {
            finders: self
                .forms
                .iter()
                .map(|form| (Finder::new(form.text.as_bytes()), form.whole_token, form.base64))
                .collect(),
        }
    }

    fn push(&mut self, text: Zeroizing<String>, whole_token: bool, base64: bool) {
        if !text.is_empty() {
            self.forms.push(Form { text, whole_token, base64 });
        }
    }

    /// `value` as is and percent-encoded (matched as a whole token when short), and its base64
    /// alignments.
    fn add_value(&mut self, value: &str) {
        let chars = value.chars().count();
        if chars < MIN_ECHO_CHARS {
            return;
        }
        let whole_token = chars < MIN_ANYWHERE_CHARS;
        self.push(Zeroizing::new(value.to_owned()), whole_token, false);
        for set in [NON_ALPHANUMERIC, COMPONENT] {
            let upper = Zeroizing::new(utf8_percent_encode(value, set).to_string());
            if upper.as_str() == value {
                continue;
            }
            let lower = Zeroizing::new(lower_hex_escapes(&upper));
            let plus = Zeroizing::new(upper.replace("%20", "+"));
            for form in [upper, lower, plus] {
                if form.as_str() != value {
                    self.push(form, whole_token, false);
                }
            }
        }
        // If the value sits at byte offset p of some text that is base64-encoded, the encoding
        // contains the encoding of the value's bytes from the first 3-byte boundary on:
        // skipping 0, 2 or 1 bytes for p ≡ 0, 1, 2 (mod 3), and keeping only whole groups.
        let bytes = value.as_bytes();
        for skip in 0..3 {
            let Some(rest) = bytes.get(skip..) else { continue };
            let whole = rest.len() / 3 * 3;
            let Some(groups) = rest.get(..whole) else { continue };
            let standard = Zeroizing::new(base64::engine::general_purpose::STANDARD_NO_PAD.encode(groups));
            if standard.len() < MIN_BASE64_CHARS {
                continue;
            }
            let url_safe = Zeroizing::new(standard.replace('+', "-").replace('/', "_"));
            if url_safe != standard {
                self.push(url_safe, false, true);
            }
            self.push(standard, false, true);
        }
    }

    /// For `Basic X`: the decoded `user:password`, the username and the password.
    fn add_basic(&mut self, encoded: &str) {
        let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(encoded) else { return };
        let decoded = Zeroizing::new(decoded);
        let Ok(pair) = std::str::from_utf8(&decoded) else { return };
        self.add_value(pair);
        if let Some((user, password)) = pair.split_once(':') {
            self.add_value(user);
            self.add_value(password);
        }
    }
}

/// `%2F` → `%2f` (only the hex digits of escapes; everything else as is).
fn lower_hex_escapes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut after_percent = 0;
    for c in text.chars() {
        if c == '%' {
            after_percent = 2;
            out.push(c);
        } else if after_percent > 0 {
            after_percent -= 1;
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// The echo guard's searchers for one shaping pass; see `Echo::scan`. Linear time per string
/// and form.
pub(crate) struct EchoScan<'e> {
    /// (searcher, whole token only, base64), longest form first.
    finders: Vec<(Finder<'e>, bool, bool)>,
}

impl EchoScan<'_> {
    /// Whether `text` holds any guarded form (in any view).
    pub(crate) fn found_in(&self, text: &str) -> bool {
        !self.finders.is_empty() && !self.ranges(text).is_empty()
    }

    /// `text` with every guarded form replaced by `[REDACTED]`, and the number of
    /// replacements (overlapping or touching matches count once).
    pub(crate) fn scrub(&self, text: &str) -> (String, usize) {
        if self.finders.is_empty() {
            return (text.to_owned(), 0);
        }
        let ranges = self.ranges(text);
        if ranges.is_empty() {
            return (text.to_owned(), 0);
        }
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        for &(start, end) in &ranges {
            out.push_str(text.get(at..start).unwrap_or_default());
            out.push_str(REDACTED);
            at = end;
        }
        out.push_str(text.get(at..).unwrap_or_default());
        (out, ranges.len())
    }

    /// The byte ranges of `text` to redact, sorted and merged; each starts and ends on a
    /// character boundary.
    fn ranges(&self, text: &str) -> Vec<(usize, usize)> {
        let mut found = Vec::new();
        let identity = View::identity(text);
        self.search(&identity, false, &mut found);
        if text.contains('\\') {
            self.search(&View::decoded(text, false), false, &mut found);
        }
        if has_wrapped_run(text) {
            self.search(&View::decoded(text, true), true, &mut found);
        }
        found.sort_unstable();
        let mut merged: Vec<(usize, usize)> = Vec::with_capacity(found.len());
        for (start, end) in found {
            match merged.last_mut() {
                Some(last) if start <= last.1 => last.1 = last.1.max(end),
                _ => merged.push((start, end)),
            }
        }
        merged
    }

    /// Every match of a form in `view` (only base64 forms when `base64_only`), as ranges of the
    /// original text.
    fn search(&self, view: &View<'_>, base64_only: bool, found: &mut Vec<(usize, usize)>) {
        let haystack = view.text.as_bytes();
        for (finder, whole_token, base64) in &self.finders {
            if base64_only && !base64 {
                continue;
            }
            let len = finder.needle().len();
            let mut from = 0;
            while let Some(offset) = haystack.get(from..).and_then(|rest| finder.find(rest)) {
                let start = from + offset;
                let end = start + len;
                if !whole_token || (!word_char_before(&view.text, start) && !word_char_after(&view.text, end)) {
                    found.push(view.original(start, end));
                    from = end;
                } else {
                    // Step one character: a later, overlapping occurrence may stand alone.
                    from =
                        start + view.text.get(start..).and_then(|rest| rest.chars().next()).map_or(1, char::len_utf8);
                }
            }
        }
    }
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

fn word_char_before(text: &str, at: usize) -> bool {
    text.get(..at).and_then(|head| head.chars().next_back()).is_some_and(is_word_char)
}

fn word_char_after(text: &str, at: usize) -> bool {
    text.get(at..).and_then(|tail| tail.chars().next()).is_some_and(is_word_char)
}

/// Whether `text` has a run of at least `MIN_WRAPPED_RUN` base64 characters with whitespace
/// (or an escaped line break) right after it: a wrapped base64 block may be there.
fn has_wrapped_run(text: &str) -> bool {
    let bytes = text.as_bytes();
    let mut run = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'-' | b'_' | b'=') {
            run += 1;
            continue;
        }
        let breaks = b.is_ascii_whitespace() || (b == b'\\' && matches!(bytes.get(i + 1), Some(b'r' | b'n' | b't')));
        if breaks && run >= MIN_WRAPPED_RUN {
            return true;
        }
        run = 0;
    }
    false
}

/// A text as the guard searches it, with the original byte range behind each of its bytes.
struct View<'t> {
    text: std::borrow::Cow<'t, str>,
    /// For each byte of `text`, the (start, end) of the original characters it came from;
    /// empty for the identity view.
    spans: Vec<(usize, usize)>,
}

impl<'t> View<'t> {
    fn identity(text: &'t str) -> View<'t> {
        View { text: std::borrow::Cow::Borrowed(text), spans: Vec::new() }
    }

    /// JSON string escapes decoded (`\uXXXX` with surrogate pairs, `\" \\ \/ \b \f \n \r \t`;
    /// anything else kept as written), and with `drop_whitespace` every whitespace character
    /// (decoded ones included) removed.
    fn decoded(original: &'t str, drop_whitespace: bool) -> View<'t> {
        let mut text = String::with_capacity(original.len());
        let mut spans = Vec::with_capacity(original.len());
        let mut emit = |c: char, start: usize, end: usize, text: &mut String| {
            if drop_whitespace && c.is_whitespace() {
                return;
            }
            text.push(c);
            spans.extend(std::iter::repeat_n((start, end), c.len_utf8()));
        };
        let bytes = original.as_bytes();
        let mut chars = original.char_indices().peekable();
        while let Some((start, c)) = chars.next() {
            if c != '\\' {
                emit(c, start, start + c.len_utf8(), &mut text);
                continue;
            }
            let simple = match bytes.get(start + 1) {
                Some(b'"') => Some('"'),
                Some(b'\\') => Some('\\'),
                Some(b'/') => Some('/'),
                Some(b'b') => Some('\u{8}'),
                Some(b'f') => Some('\u{c}'),
                Some(b'n') => Some('\n'),
                Some(b'r') => Some('\r'),
                Some(b't') => Some('\t'),
                _ => None,
            };
            if let Some(decoded) = simple {
                chars.next();
                emit(decoded, start, start + 2, &mut text);
                continue;
            }
            if let Some(high) = hex4(bytes, start + 2).filter(|_| bytes.get(start + 1) == Some(&b'u')) {
                let (decoded, len) = match high {
                    0xD800..=0xDBFF => match (bytes.get(start + 6..start + 8), hex4(bytes, start + 8)) {
                        (Some(b"\\u"), Some(low @ 0xDC00..=0xDFFF)) => {
                            let code = 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00);
                            (char::from_u32(code).unwrap_or(char::REPLACEMENT_CHARACTER), 12)
                        }
                        _ => (char::REPLACEMENT_CHARACTER, 6),
                    },
                    code => (char::from_u32(code).unwrap_or(char::REPLACEMENT_CHARACTER), 6),
                };
                // The escape is ASCII: skip its remaining characters.
                for _ in 1..len {
                    chars.next();
                }
                emit(decoded, start, start + len, &mut text);
                continue;
            }
            emit(c, start, start + 1, &mut text);
        }
        View { text: std::borrow::Cow::Owned(text), spans }
    }

    /// The original byte range behind `start..end` of this view.
    fn original(&self, start: usize, end: usize) -> (usize, usize) {
        if self.spans.is_empty() {
            return (start, end);
        }
        let first = self.spans.get(start).map_or(start, |span| span.0);
        let last = end.checked_sub(1).and_then(|i| self.spans.get(i)).map_or(end, |span| span.1);
        (first, last.max(first))
    }
}

/// Four hex digits at `at`, as a number.
fn hex4(bytes: &[u8], at: usize) -> Option<u32> {
    let digits = bytes.get(at..at + 4)?;
    let text = std::str::from_utf8(digits).ok()?;
    if !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(text, 16).ok()
}
