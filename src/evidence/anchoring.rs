//! Anchors wired to checkpoints: the document's `evidence.anchors` entries, the row kept for
//! each (sink, checkpoint), and the rule that says which checkpoints a sink is sent next.
//!
//! Each sink gets every checkpoint after the last one it anchored, oldest first; a sink with
//! none yet starts at the newest (every earlier checkpoint is consistent with it). A failure is
//! kept in the row with its attempt count and tried again after a delay that doubles up to
//! [`MAX_RETRY_DELAY`]; once a later checkpoint is anchored, an earlier one that kept failing is
//! left alone (the later one covers its receipts). Nothing here blocks an action: the worker of
//! `auto` runs it on its own commits.

use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use zeroize::Zeroizing;

use super::anchor::{AnchorError, AnchorProvider, FileSink, HttpSink, HttpTarget};
use super::checkpoint::StoredCheckpoint;
use super::settings::SettingsError;
use super::tsa::{TrustedTsa, TsaClient};
use crate::clock::{Micros, MICROS_PER_SECOND};
use crate::sight::credentials::{is_reference, CredentialProvider};

/// The first retry of a failed anchor waits this long; each failure doubles it.
pub const FIRST_RETRY_DELAY: Micros = 2 * MICROS_PER_SECOND;
/// The longest wait between two tries of one anchor (five minutes).
pub const MAX_RETRY_DELAY: Micros = 300 * MICROS_PER_SECOND;
/// The most checkpoints one sink is sent in one pass.
pub const MAX_PER_PASS: usize = 16;
/// The longest failure text a row or the worker's status keeps.
const ERROR_CHARS: usize = 300;

const ENTRY_KEYS: [&str; 8] = ["ca_certs", "file", "header", "header_ref", "http", "rfc3161", "timeout_ms", "tsa_cert"];
const KINDS: [&str; 3] = ["file", "http", "rfc3161"];
/// Headers the HTTP client sets itself.
const RESERVED_HEADERS: [&str; 4] = ["host", "content-type", "content-length", "transfer-encoding"];

/// Where one anchor sends each checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnchorTarget {
    /// Append a line to this regular file ([`FileSink`]).
    File(PathBuf),
    /// POST the note to this URL ([`HttpSink`]).
    Http(String),
    /// Ask this RFC 3161 time-stamp authority ([`TsaClient`]).
    Rfc3161(String),
}

/// One entry of `evidence.anchors`, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnchorSpec {
    /// Where it goes.
    pub target: AnchorTarget,
    /// One header sent with each request: its name and the credential reference of its value
    /// (resolved at each try, never stored).
    pub header: Option<(String, String)>,
    /// Extra PEM roots for the target's TLS.
    pub ca_certs: Option<PathBuf>,
    /// `rfc3161` only: the TSA's certificate; every token must verify against it.
    pub tsa_cert: Option<PathBuf>,
    /// The deadline of one request, in milliseconds.
    pub timeout_ms: Option<u64>,
}

fn refuse(path: &str, message: impl Into<String>) -> SettingsError {
    SettingsError { path: path.to_owned(), message: message.into() }
}

fn text_member<'a>(
    entry: &'a serde_json::Map<String, Value>,
    key: &str,
    path: &str,
) -> Result<Option<&'a str>, SettingsError> {
    match entry.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) if !text.is_empty() => Ok(Some(text)),
        Some(_) => Err(refuse(&format!("{path}.{key}"), format!("'{key}' must be a non-empty string"))),
    }
}

impl AnchorSpec {
    /// Parse `evidence.anchors` (a list; an empty one is no anchors).
    pub fn parse_list(value: &Value) -> Result<Vec<AnchorSpec>, SettingsError> {
        let Value::Array(entries) = value else {
            return Err(refuse(
                "evidence.anchors",
                "'anchors' must be a list such as [{file: /var/log/warden-anchors.jsonl}, {rfc3161: https://tsa.example/tsr}]",
            ));
        };
        let mut specs: Vec<AnchorSpec> = Vec::with_capacity(entries.len());
        for (index, entry) in entries.iter().enumerate() {
            let path = format!("evidence.anchors[{index}]");
            let spec = AnchorSpec::parse(entry, &path)?;
            let sink = spec.sink();
            if specs.iter().any(|other| other.sink() == sink) {
                return Err(refuse(&path, format!("the anchor '{sink}' is listed twice; list each sink once")));
            }
            specs.push(spec);
        }
        Ok(specs)
    }

    fn parse(entry: &Value, path: &str) -> Result<AnchorSpec, SettingsError> {
        let Value::Object(entry) = entry else {
            return Err(refuse(path, "each anchor is a mapping with one of: file, http, rfc3161"));
        };
        if let Some(key) = entry.keys().find(|key| !ENTRY_KEYS.contains(&key.as_str())) {
            return Err(refuse(
                &format!("{path}.{key}"),
                format!("unknown key '{key}'; allowed here: {}", ENTRY_KEYS.join(", ")),
            ));
        }
        let named: Vec<&str> = KINDS.iter().copied().filter(|kind| entry.contains_key(*kind)).collect();
        let kind = match named.as_slice() {
            [kind] => *kind,
            [] => {
                return Err(refuse(path, "an anchor needs one of: file (a path), http (a URL), rfc3161 (a TSA's URL)"))
            }
            _ => return Err(refuse(path, format!("an anchor is one sink; this entry names {}", named.join(" and ")))),
        };
        let place = text_member(entry, kind, path)?
            .ok_or_else(|| refuse(&format!("{path}.{kind}"), format!("'{kind}' must be a non-empty string")))?;
        let target = match kind {
            "file" => {
                if !place.starts_with('/') {
                    return Err(refuse(&format!("{path}.file"), "'file' must be an absolute path"));
                }
                AnchorTarget::File(PathBuf::from(place))
            }
            _ => {
                HttpTarget::new(place).map_err(|e| refuse(&format!("{path}.{kind}"), e.message))?;
                if kind == "http" {
                    AnchorTarget::Http(place.to_owned())
                } else {
                    AnchorTarget::Rfc3161(place.to_owned())
                }
            }
        };
        let header = match (text_member(entry, "header", path)?, text_member(entry, "header_ref", path)?) {
            (None, None) => None,
            (Some(name), Some(reference)) => {
                let lower = name.to_ascii_lowercase();
                if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
                    return Err(refuse(
                        &format!("{path}.header"),
                        "'header' must be a header name such as authorization",
                    ));
                }
                if RESERVED_HEADERS.contains(&lower.as_str()) {
                    return Err(refuse(&format!("{path}.header"), format!("'{name}' is set by the client itself")));
                }
                if !is_reference(reference) {
                    return Err(refuse(
                        &format!("{path}.header_ref"),
                        "'header_ref' must be a credential reference (an environment-variable-like name such as \
                         WITNESS_TOKEN), never the value itself",
                    ));
                }
                Some((lower, reference.to_owned()))
            }
            (Some(_), None) => {
                return Err(refuse(
                    &format!("{path}.header"),
                    "'header' needs 'header_ref', its value's credential reference",
                ))
            }
            (None, Some(_)) => {
                return Err(refuse(&format!("{path}.header_ref"), "'header_ref' needs 'header', the header's name"))
            }
        };
        let ca_certs = text_member(entry, "ca_certs", path)?.map(PathBuf::from);
        let tsa_cert = text_member(entry, "tsa_cert", path)?.map(PathBuf::from);
        let timeout_ms = match entry.get("timeout_ms") {
            None | Some(Value::Null) => None,
            Some(value) => match value.as_u64() {
                Some(ms) if (100..=60_000).contains(&ms) => Some(ms),
                _ => {
                    return Err(refuse(
                        &format!("{path}.timeout_ms"),
                        "'timeout_ms' must be a whole number from 100 to 60000",
                    ))
                }
            },
        };
        if kind == "file" {
            for (key, set) in
                [("header", header.is_some()), ("ca_certs", ca_certs.is_some()), ("timeout_ms", timeout_ms.is_some())]
            {
                if set {
                    return Err(refuse(&format!("{path}.{key}"), format!("'{key}' is for http and rfc3161 anchors")));
                }
            }
        }
        if tsa_cert.is_some() && kind != "rfc3161" {
            return Err(refuse(&format!("{path}.tsa_cert"), "'tsa_cert' is for rfc3161 anchors"));
        }
        Ok(AnchorSpec { target, header, ca_certs, tsa_cert, timeout_ms })
    }

    /// The sink's name, as its provider gives it: the key of its rows and what reports show.
    /// Never a secret (a URL shows only its scheme, host, port and path).
    pub fn sink(&self) -> String {
        match &self.target {
            AnchorTarget::File(path) => FileSink::new(path.clone()).name(),
            AnchorTarget::Http(url) => {
                HttpTarget::new(url).map_or_else(|_| "http (URL withheld)".into(), |t| format!("http {}", t.shown()))
            }
            AnchorTarget::Rfc3161(url) => HttpTarget::new(url)
                .map_or_else(|_| "rfc3161 (URL withheld)".into(), |t| format!("rfc3161 {}", t.shown())),
        }
    }
}

/// A sink's name and its provider, or why the provider could not be built.
pub type SinkProvider = (String, Result<Arc<dyn AnchorProvider>, AnchorError>);

/// The anchors of a handle, ready to build providers: each spec, with its TSA certificate read
/// once at open.
#[derive(Clone)]
pub struct Anchors {
    sinks: Vec<(AnchorSpec, Option<TrustedTsa>)>,
}

impl std::fmt::Debug for Anchors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.sinks.iter().map(|(spec, _)| spec.sink())).finish()
    }
}

impl Anchors {
    /// Read what the specs name now (a TSA certificate): refused with its path if it cannot be.
    pub fn load(specs: &[AnchorSpec]) -> Result<Anchors, crate::error::Error> {
        let mut sinks = Vec::with_capacity(specs.len());
        for spec in specs {
            let trusted = match &spec.tsa_cert {
                None => None,
                Some(path) => {
                    let bytes = std::fs::read(path).map_err(|e| {
                        crate::error::Error::Config(format!(
                            "the anchor '{}' names tsa_cert {}, which cannot be read: {e}",
                            spec.sink(),
                            path.display()
                        ))
                    })?;
                    Some(TrustedTsa::parse(&bytes).map_err(|e| {
                        crate::error::Error::Config(format!(
                            "the anchor '{}' names tsa_cert {}, which {}",
                            spec.sink(),
                            path.display(),
                            e.message
                        ))
                    })?)
                }
            };
            sinks.push((spec.clone(), trusted));
        }
        Ok(Anchors { sinks })
    }

    /// No anchors configured.
    pub fn is_empty(&self) -> bool {
        self.sinks.is_empty()
    }

    /// The sinks' names, in document order.
    pub fn sinks(&self) -> Vec<String> {
        self.sinks.iter().map(|(spec, _)| spec.sink()).collect()
    }

    /// The provider of each sink, its header's credential resolved through `credentials` now.
    /// A sink whose credential is missing is an error for that sink only.
    pub fn providers(&self, credentials: &Arc<dyn CredentialProvider>) -> Vec<SinkProvider> {
        self.sinks.iter().map(|(spec, trusted)| (spec.sink(), build(spec, trusted.as_ref(), credentials))).collect()
    }
}

fn build(
    spec: &AnchorSpec,
    trusted: Option<&TrustedTsa>,
    credentials: &Arc<dyn CredentialProvider>,
) -> Result<Arc<dyn AnchorProvider>, AnchorError> {
    let url = match &spec.target {
        AnchorTarget::File(path) => return Ok(Arc::new(FileSink::new(path.clone()))),
        AnchorTarget::Http(url) | AnchorTarget::Rfc3161(url) => url,
    };
    let mut target = HttpTarget::new(url)?;
    if let Some(ms) = spec.timeout_ms {
        target = target.timeout_ms(ms);
    }
    if let Some(path) = &spec.ca_certs {
        target = target.ca_certs(path.clone());
    }
    if let Some((name, reference)) = &spec.header {
        let value: Zeroizing<String> = credentials.resolve(reference).ok_or_else(|| AnchorError {
            sink: spec.sink(),
            code: "credential_missing".into(),
            message: format!(
                "the credential {reference} for the '{name}' header is unavailable: {}; it is retried",
                credentials.looked_in(reference)
            ),
        })?;
        target = target.header(name.clone(), value);
    }
    Ok(match &spec.target {
        AnchorTarget::Rfc3161(_) => {
            let client = TsaClient::new(target);
            Arc::new(match trusted {
                Some(trusted) => client.trust(trusted.clone()),
                None => client,
            })
        }
        _ => Arc::new(HttpSink::new(target)),
    })
}

/// One sink's record of one checkpoint: anchored (with what came back, if anything) or still
/// failing (with the last failure). Written by the worker on its own commits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredAnchor {
    /// The sink, as [`AnchorSpec::sink`] names it.
    pub sink: String,
    /// The checkpoint's number.
    pub checkpoint: u64,
    /// Tries so far, the successful one included.
    pub attempts: u32,
    /// When it was last tried.
    pub last_try: Micros,
    /// When it was anchored; `None` while it fails.
    pub anchored_at: Option<Micros>,
    /// What the sink handed back: its kind, the bytes (base64) and a line for people.
    pub kind: Option<String>,
    /// The receipt's bytes, base64; `None` when the sink kept nothing to return.
    pub receipt: Option<String>,
    /// One line for people: where it went and what came back, or why it failed.
    pub description: String,
    /// The failure's code while it fails.
    pub error_code: Option<String>,
}

impl StoredAnchor {
    /// Whether the sink took the checkpoint.
    pub fn anchored(&self) -> bool {
        self.anchored_at.is_some()
    }

    /// The receipt's bytes, decoded.
    pub fn receipt_bytes(&self) -> Option<Vec<u8>> {
        let encoded = self.receipt.as_ref()?;
        base64::Engine::decode(&base64::prelude::BASE64_STANDARD, encoded).ok()
    }

    /// The row after one more try at `now` that gave `outcome`.
    pub fn after_try(
        sink: &str,
        checkpoint: u64,
        before: Option<&StoredAnchor>,
        now: Micros,
        outcome: &Result<Option<super::anchor::AnchorReceipt>, AnchorError>,
    ) -> StoredAnchor {
        let attempts = before.map_or(0, |row| row.attempts).saturating_add(1);
        let mut row = StoredAnchor {
            sink: sink.to_owned(),
            checkpoint,
            attempts,
            last_try: now,
            anchored_at: None,
            kind: None,
            receipt: None,
            description: String::new(),
            error_code: None,
        };
        match outcome {
            Ok(Some(receipt)) => {
                row.anchored_at = Some(now);
                row.kind = Some(receipt.kind.clone());
                row.receipt = Some(base64::Engine::encode(&base64::prelude::BASE64_STANDARD, &receipt.bytes));
                row.description = bounded(&receipt.description);
            }
            Ok(None) => {
                row.anchored_at = Some(now);
                row.description = "delivered; nothing came back to keep".into();
            }
            Err(error) => {
                row.description = bounded(&error.message);
                row.error_code = Some(error.code.clone());
            }
        }
        row
    }
}

/// `text` cut to [`ERROR_CHARS`] characters, marked with `…` when cut.
pub(super) fn bounded(text: &str) -> String {
    match text.char_indices().nth(ERROR_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// One try of one sink with one checkpoint, as a pass made it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnchorTry {
    /// The record as stored after the try.
    pub row: StoredAnchor,
    /// The sink's failure, when it failed.
    pub error: Option<AnchorError>,
}

/// How long after its `attempts`-th failed try an anchor is tried again.
pub fn retry_delay(attempts: u32) -> Micros {
    let doublings = attempts.saturating_sub(1).min(20);
    FIRST_RETRY_DELAY.saturating_mul(1 << doublings).min(MAX_RETRY_DELAY)
}

/// What the store holds for one sink: its last anchored checkpoint, and each checkpoint after
/// it (oldest first, at most [`MAX_PER_PASS`]) with its row if it was tried.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SinkState {
    /// The sink.
    pub sink: String,
    /// The newest checkpoint it anchored.
    pub last_anchored: Option<u64>,
    /// The checkpoints waiting for it, with their rows.
    pub waiting: Vec<(StoredCheckpoint, Option<StoredAnchor>)>,
}

impl SinkState {
    /// The checkpoints to send now: each waiting one never tried, or whose retry delay has
    /// passed (all of them when `force`).
    pub fn to_try(&self, now: Micros, force: bool) -> Vec<&(StoredCheckpoint, Option<StoredAnchor>)> {
        self.waiting
            .iter()
            .filter(|(_, row)| match row {
                None => true,
                Some(row) if row.anchored() => false,
                Some(row) => force || now.saturating_sub(row.last_try) >= retry_delay(row.attempts),
            })
            .collect()
    }
}

/// Which checkpoints a sink waits on: after `last_anchored`, or only the newest when it never
/// anchored one. `newest` is the store's last checkpoint number.
pub fn waiting_from(last_anchored: Option<u64>, newest: Option<u64>) -> Option<u64> {
    let newest = newest?;
    match last_anchored {
        Some(last) if last >= newest => None,
        Some(last) => Some(last + 1),
        None => Some(newest),
    }
}

#[cfg(test)]
mod tests;
