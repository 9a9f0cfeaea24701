//! Witnesses and anchors: providers that receive each signed checkpoint and may hand back
//! something to keep beside it (a cosignature, a time-stamp token, a record of where it went).
//!
//! An [`AnchorProvider`] gets the checkpoint's exact note bytes, its tree size and its number,
//! and answers `Ok(Some(receipt))` (an [`AnchorReceipt`]: a kind, opaque bytes to store beside
//! the checkpoint, a short description), `Ok(None)` (delivered, nothing to keep) or an
//! [`AnchorError`] that names the sink and says what to do. An anchor's failure never blocks an
//! action: the caller keeps the checkpoint, retries the anchor later and reports it.
//!
//! Built in: [`FileSink`] (one JSON line per checkpoint appended to a regular file),
//! [`HttpSink`] (the note POSTed as `text/plain`) and `TsaClient` (an RFC 3161 time-stamp;
//! `src/evidence/tsa.rs` implements [`AnchorProvider`] for it). Both HTTP providers go
//! through the sights' bounded, no-redirect client ([`crate::http::post`]); errors show a
//! URL's scheme, host, port and path only, never a user name, a password, a query or a header.

use std::io::{Seek, Write};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::Digest;
use zeroize::Zeroizing;

use crate::error::SightError;
use crate::http::{CancelToken, FetchRequest, FetchResponse};

/// The receipt kind of [`FileSink`].
pub const KIND_FILE: &str = "file";
/// The receipt kind of [`HttpSink`].
pub const KIND_HTTP: &str = "http";
/// The receipt kind of `TsaClient` (tsa.rs): the bytes are a `TimeStampToken`, DER.
pub const KIND_RFC3161: &str = "rfc3161";
/// The `format` member of every line [`FileSink`] appends.
pub const FILE_LINE_FORMAT: &str = "warden.anchor/v1";
/// The content type [`HttpSink`] posts the note with.
pub const NOTE_CONTENT_TYPE: &str = "text/plain; charset=utf-8";
/// The deadline of one HTTP anchor request unless set.
pub const DEFAULT_TIMEOUT_MS: u64 = 10_000;
/// The largest HTTP answer read unless set.
pub const DEFAULT_MAX_RESPONSE_BYTES: u64 = 64 * 1024;

/// One signed checkpoint, as an anchor receives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignedCheckpoint<'a> {
    /// The signed note, exactly as signed and stored.
    pub note: &'a [u8],
    /// The tree size it states.
    pub size: u64,
    /// The checkpoint's number, from 1.
    pub number: u64,
}

/// What an anchor hands back, to store beside the checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnchorReceipt {
    /// Which kind of anchor made it ([`KIND_FILE`], [`KIND_HTTP`], [`KIND_RFC3161`], or a
    /// custom provider's own).
    pub kind: String,
    /// The receipt itself, opaque to Warden (a token, a cosignature, a line).
    pub bytes: Vec<u8>,
    /// One short line for people: where it went and what came back.
    pub description: String,
}

/// Why an anchor did not take a checkpoint. `sink` names the provider ([`AnchorProvider::name`]);
/// `code` the kind of failure (the HTTP client's codes, the TSA's, `io_error`,
/// `configuration_invalid`); `message` what happened and what to do. Never a secret: no URL
/// user name, password or query, no header value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[error("anchor {sink}: {message}")]
pub struct AnchorError {
    /// The provider, as [`AnchorProvider::name`] says it.
    pub sink: String,
    /// The kind of failure.
    pub code: String,
    /// What happened and what to do, one line.
    pub message: String,
}

impl AnchorError {
    pub(super) fn new(sink: impl Into<String>, code: &str, message: impl Into<String>) -> AnchorError {
        AnchorError { sink: sink.into(), code: code.to_owned(), message: message.into() }
    }
}

/// A provider that receives each signed checkpoint.
pub trait AnchorProvider: Send + Sync {
    /// The provider in messages and reports, e.g. `file /var/log/warden-anchors.jsonl` or
    /// `rfc3161 https://tsa.example/tsr`. Never a secret.
    fn name(&self) -> String;

    /// Receive `checkpoint`. `Ok(Some)` is a receipt to store beside it, `Ok(None)` a delivery
    /// with nothing to keep; an error is retried later by the caller.
    fn anchor(&self, checkpoint: &SignedCheckpoint<'_>) -> Result<Option<AnchorReceipt>, AnchorError>;
}

// ---- the file sink ------------------------------------------------------------------------

/// Appends one line per checkpoint to a regular file: `{"format":"warden.anchor/v1",
/// "checkpoint":N,"size":S,"sha256":"<hex of the note bytes>","note":"<the note>"}`. The file is
/// opened for appending only (`O_APPEND`), created `0600` if missing, and synced after each
/// line; a path that is a symbolic link or anything but a regular file is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileSink {
    path: PathBuf,
}

/// One line of a [`FileSink`], in this member order.
#[derive(Serialize)]
struct FileLine<'a> {
    format: &'a str,
    checkpoint: u64,
    size: u64,
    sha256: String,
    note: &'a str,
}

impl FileSink {
    /// A sink appending to `path`.
    pub fn new(path: impl Into<PathBuf>) -> FileSink {
        FileSink { path: path.into() }
    }

    /// The file appended to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The line (with its newline) appended for `checkpoint`.
    pub fn line(checkpoint: &SignedCheckpoint<'_>) -> Result<String, String> {
        let note = std::str::from_utf8(checkpoint.note).map_err(|_| "the checkpoint note is not UTF-8 text")?;
        let line = FileLine {
            format: FILE_LINE_FORMAT,
            checkpoint: checkpoint.number,
            size: checkpoint.size,
            sha256: hex::encode(sha2::Sha256::digest(checkpoint.note)),
            note,
        };
        let mut text = serde_json::to_string(&line).map_err(|e| format!("the line could not be written: {e}"))?;
        text.push('\n');
        Ok(text)
    }

    fn open(&self) -> Result<std::fs::File, String> {
        let opened = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            // O_NOFOLLOW: a symlink at the path is refused (ELOOP); O_NONBLOCK: a FIFO there
            // never blocks the open (it is refused below).
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(&self.path);
        let file = match opened {
            Ok(file) => file,
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                return Err("the path is a symbolic link; give the path of a regular file".to_owned())
            }
            Err(e) if e.raw_os_error() == Some(libc::EISDIR) => {
                return Err("the path is a directory, not a regular file; give the path of a regular file".to_owned())
            }
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
                return Err("the path is a named pipe or socket; give the path of a regular file".to_owned())
            }
            Err(e) => return Err(format!("cannot open it for appending: {e}; check the path and its permissions")),
        };
        let kind = file.metadata().map_err(|e| format!("cannot inspect it: {e}"))?.file_type();
        let Some(what) = crate::files::not_regular(&kind) else {
            return Ok(file);
        };
        Err(format!("the path is {what}, not a regular file; give the path of a regular file"))
    }
}

impl AnchorProvider for FileSink {
    fn name(&self) -> String {
        format!("file {}", self.path.display())
    }

    fn anchor(&self, checkpoint: &SignedCheckpoint<'_>) -> Result<Option<AnchorReceipt>, AnchorError> {
        let fail = |code: &str, message: String| AnchorError::new(self.name(), code, message);
        let line = FileSink::line(checkpoint).map_err(|m| fail("invalid_input", m))?;
        let mut file = self.open().map_err(|m| fail("io_error", m))?;
        file.write_all(line.as_bytes()).map_err(|e| {
            fail("io_error", format!("cannot append checkpoint {}: {e}; it is retried", checkpoint.number))
        })?;
        file.sync_data().map_err(|e| {
            fail("io_error", format!("cannot sync checkpoint {}: {e}; it is retried", checkpoint.number))
        })?;
        // With O_APPEND the offset after the write is the end of this line.
        let end = file.stream_position().map_err(|e| fail("io_error", format!("cannot read the file offset: {e}")))?;
        let start = end.saturating_sub(line.len() as u64);
        let mut bytes = line.into_bytes();
        bytes.pop();
        Ok(Some(AnchorReceipt {
            kind: KIND_FILE.to_owned(),
            bytes,
            description: format!(
                "appended checkpoint {} at byte {start} of {}",
                checkpoint.number,
                self.path.display()
            ),
        }))
    }
}

// ---- HTTP ---------------------------------------------------------------------------------

/// Where an HTTP anchor posts, with the bounds of the request. The URL is `http` or `https`
/// with no user name or password; only its scheme, host, port and path are ever shown.
#[derive(Clone)]
pub struct HttpTarget {
    url: url::Url,
    timeout_ms: u64,
    max_response_bytes: u64,
    ca_certs: Option<PathBuf>,
    header: Option<(String, Zeroizing<String>)>,
    cancel: CancelToken,
}

impl std::fmt::Debug for HttpTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the query, never the header's value.
        f.debug_struct("HttpTarget")
            .field("url", &self.shown())
            .field("timeout_ms", &self.timeout_ms)
            .field("max_response_bytes", &self.max_response_bytes)
            .field("ca_certs", &self.ca_certs)
            .field("header", &self.header.as_ref().map(|(name, _)| name.as_str()))
            .finish()
    }
}

impl HttpTarget {
    /// A target at `url` with [`DEFAULT_TIMEOUT_MS`] and [`DEFAULT_MAX_RESPONSE_BYTES`].
    /// Refuses anything but an absolute `http`/`https` URL with a host, and a URL carrying a
    /// user name or password (put a credential in [`HttpTarget::header`]); the refusal never
    /// repeats the URL.
    pub fn new(url: &str) -> Result<HttpTarget, AnchorError> {
        let refuse = |why: &str| AnchorError::new("http (URL withheld)", "configuration_invalid", why);
        let mut url = url::Url::parse(url)
            .map_err(|_| refuse("the anchor URL is not an absolute URL; give http(s)://host/path"))?;
        if url.scheme() != "http" && url.scheme() != "https" {
            return Err(refuse("the anchor URL must be http:// or https://"));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(refuse(
                "the anchor URL carries a user name or password; remove it and send the credential in a header",
            ));
        }
        if url.host_str().is_none_or(str::is_empty) {
            return Err(refuse("the anchor URL has no host"));
        }
        url.set_fragment(None);
        Ok(HttpTarget {
            url,
            timeout_ms: DEFAULT_TIMEOUT_MS,
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            ca_certs: None,
            header: None,
            cancel: CancelToken::new(),
        })
    }

    /// The deadline of each request, connect to last byte (at least 1 ms).
    pub fn timeout_ms(mut self, timeout_ms: u64) -> HttpTarget {
        self.timeout_ms = timeout_ms.max(1);
        self
    }

    /// The largest answer read; a longer one is `response_too_large`.
    pub fn max_response_bytes(mut self, max: u64) -> HttpTarget {
        self.max_response_bytes = max;
        self
    }

    /// Extra PEM roots for this target's TLS.
    pub fn ca_certs(mut self, path: impl Into<PathBuf>) -> HttpTarget {
        self.ca_certs = Some(path.into());
        self
    }

    /// One header sent with each request (an `authorization`, say); its value is never shown.
    pub fn header(mut self, name: impl Into<String>, value: Zeroizing<String>) -> HttpTarget {
        self.header = Some((name.into(), value));
        self
    }

    /// Cancel in-flight requests with this token (shutting down, say).
    pub fn cancel_token(mut self, cancel: CancelToken) -> HttpTarget {
        self.cancel = cancel;
        self
    }

    /// The URL as messages show it: scheme, host, port and path.
    pub fn shown(&self) -> String {
        let mut shown = format!("{}://{}", self.url.scheme(), self.url.host_str().unwrap_or(""));
        if let Some(port) = self.url.port() {
            shown += &format!(":{port}");
        }
        shown += self.url.path();
        shown
    }

    /// One POST through the sights' client.
    pub(crate) fn post(&self, content_type: &str, body: &[u8]) -> Result<FetchResponse, SightError> {
        let request = FetchRequest {
            url: self.url.clone(),
            header: self.header.clone(),
            timeout_ms: self.timeout_ms,
            max_response_bytes: self.max_response_bytes,
            ca_certs: self.ca_certs.clone(),
        };
        crate::http::post(&request, content_type, body, &self.cancel)
    }
}

/// What to do about a failure of an HTTP anchor, by its code.
pub(super) fn remedy(code: &str, shown: &str) -> String {
    match code {
        "timeout" | "network_error" => format!("it is retried; check that {shown} is reachable from this host"),
        "redirect_refused" => "redirects are not followed; configure the URL the redirect points to".to_owned(),
        "response_too_large" => "check the endpoint, or raise the anchor's max_response_bytes".to_owned(),
        "upstream_error" => "it is retried; check the endpoint's logs".to_owned(),
        "rejected" => "it is retried; check the TSA accepts SHA-256 imprints under its default policy".to_owned(),
        "untrusted" => format!("check that the trusted TSA certificate is the one {shown} signs with"),
        "imprint_mismatch" | "nonce_mismatch" | "malformed" | "invalid_response" => {
            format!("check that {shown} is an RFC 3161 time-stamp endpoint; it is retried")
        }
        "unsupported" => "the TSA signs with an algorithm this verifier does not support".to_owned(),
        "configuration_invalid" | "certificate_invalid" => "fix the anchor's configuration".to_owned(),
        _ => "it is retried".to_owned(),
    }
}

/// POSTs each checkpoint's note bytes as `text/plain; charset=utf-8`. A 2xx with a body
/// (a witness's cosignature, a receipt) is `Ok(Some)` of kind [`KIND_HTTP`] with those bytes;
/// a 2xx with an empty body is `Ok(None)`. A redirect, a non-2xx, a timeout or an answer over
/// the cap is an error.
#[derive(Debug, Clone)]
pub struct HttpSink {
    target: HttpTarget,
}

impl HttpSink {
    /// A sink posting to `target`.
    pub fn new(target: HttpTarget) -> HttpSink {
        HttpSink { target }
    }
}

impl AnchorProvider for HttpSink {
    fn name(&self) -> String {
        format!("http {}", self.target.shown())
    }

    fn anchor(&self, checkpoint: &SignedCheckpoint<'_>) -> Result<Option<AnchorReceipt>, AnchorError> {
        let shown = self.target.shown();
        let response = self.target.post(NOTE_CONTENT_TYPE, checkpoint.note).map_err(|e| {
            AnchorError::new(
                self.name(),
                e.code,
                format!(
                    "checkpoint {} not delivered: {} ({}); {}",
                    checkpoint.number,
                    e.message,
                    e.code,
                    remedy(e.code, &shown)
                ),
            )
        })?;
        if response.body.is_empty() {
            return Ok(None);
        }
        let description = format!(
            "posted checkpoint {} to {shown}: HTTP {}, {} bytes back",
            checkpoint.number,
            response.status,
            response.body.len()
        );
        Ok(Some(AnchorReceipt { kind: KIND_HTTP.to_owned(), bytes: response.body, description }))
    }
}

#[cfg(test)]
pub(crate) mod tests;
