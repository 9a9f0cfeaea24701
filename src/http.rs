//! Warden's one outbound HTTP client: the GET of a sight (DESIGN.md §6, "At request time") and
//! of an identity provider's keys (src/identity/jwks.rs), the POST of an evidence anchor and a
//! timestamp request (src/evidence/anchor.rs, tsa.rs), an approval webhook's agent
//! (src/approval/webhook.rs) and `warden gateway`'s token exchange ([`post_for_answer`]), all
//! under the same bounds. A leaf module: it knows only `error`.
//!
//! Every request builds its own ureq agent: method GET with no body ([`fetch`]; a sight never
//! sends anything else) or POST with the caller's body and content type ([`post`]), no proxy from
//! the environment, redirects never followed (any 3xx is `redirect_refused`), one deadline over
//! connect, TLS, headers and body, no transparent decompression (ureq is built without
//! `gzip`/`brotli`, and any `Content-Encoding` but `identity` is refused), an early reject on
//! an advertised `content-length` over the cap and the cap enforced again while streaming.
//! Only `host` and the configured auth header go out. TLS verification is never disabled;
//! `ca_certs` adds roots for this request only. A cancel ends the caller's wait within
//! [`CANCEL_POLL`] in every phase of the request (see [`fetch`]).

use std::io::{ErrorKind, Read};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ureq::tls::{Certificate, PemItem, RootCerts, TlsConfig, TlsProvider};
use zeroize::Zeroizing;

use crate::error::SightError;

/// Raw bytes of an error body kept for the `upstream_error` excerpt (the orchestrator redacts
/// and shortens it further).
pub const ERROR_EXCERPT_BYTES: usize = 2048;
/// Bytes read per chunk: the cancel flag and the deadline are checked between chunks.
const READ_CHUNK: usize = 8 * 1024;
/// The largest `ca_certs` PEM file read.
const MAX_CA_FILE_BYTES: u64 = 1024 * 1024;

/// One confined GET. `url` has already been confined; `header` is the one auth header (name,
/// value) or `None`.
#[derive(Clone)]
pub struct FetchRequest {
    /// The confined URL.
    pub url: url::Url,
    /// The one auth header (name, value), if any.
    pub header: Option<(String, Zeroizing<String>)>,
    /// The whole request's deadline.
    pub timeout_ms: u64,
    /// The largest body read.
    pub max_response_bytes: u64,
    /// Extra PEM roots for this request only.
    pub ca_certs: Option<std::path::PathBuf>,
}

impl std::fmt::Debug for FetchRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the header value, never the query.
        f.debug_struct("FetchRequest")
            .field("origin", &self.url.origin().ascii_serialization())
            .field("path", &self.url.path())
            .field("header", &self.header.as_ref().map(|(name, _)| name.as_str()))
            .field("timeout_ms", &self.timeout_ms)
            .field("max_response_bytes", &self.max_response_bytes)
            .field("ca_certs", &self.ca_certs)
            .finish()
    }
}

/// Cancels an in-flight [`fetch`] from another thread. The caller of `fetch` gets `aborted`
/// within one [`CANCEL_POLL`] of the cancel, whatever the request is waiting for (the name
/// lookup, the connection, the TLS handshake, the response head or a body read); the
/// connection is shut down at the same moment.
#[derive(Clone, Default, Debug)]
pub struct CancelToken(Arc<AtomicBool>);

impl CancelToken {
    /// A token not yet cancelled.
    pub fn new() -> CancelToken {
        CancelToken::default()
    }

    /// Cancel every fetch using this token (sticky).
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// Whether `cancel` was called.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    fn check(&self) -> Result<(), SightError> {
        if self.is_cancelled() {
            Err(aborted())
        } else {
            Ok(())
        }
    }
}

fn aborted() -> SightError {
    SightError::new("aborted", "the query was cancelled")
}

/// How often the caller of [`fetch`] looks at its cancel token while the request runs: the
/// bound on how long a cancelled query keeps its caller's thread.
pub const CANCEL_POLL: Duration = Duration::from_millis(10);
/// How long past `timeout_ms` the caller waits for the request's own timeout to report before
/// it reports `timeout` itself (a backstop: ureq's global timeout ends the request first).
const DEADLINE_GRACE: Duration = Duration::from_millis(500);

/// A 2xx response (or from [`post_for_answer`] any status but a 3xx): its status, the whole
/// body (at most `max_response_bytes`) and its `content-type`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchResponse {
    /// The HTTP status (2xx; any but 3xx from [`post_for_answer`]).
    pub status: u16,
    /// The whole body.
    pub body: Vec<u8>,
    /// The `content-type` header, if sent.
    pub content_type: Option<String>,
}

/// Perform the GET. See the module documentation for every bound.
///
/// The request runs on a thread of its own while the calling thread waits for its answer and
/// watches `cancel` every [`CANCEL_POLL`]. On a cancel the caller shuts the request's
/// connection down (which ends a blocked read or handshake at once) and returns `aborted`
/// without waiting; a request still resolving the host name or connecting ends by itself
/// within `timeout_ms`, holding nothing the caller needs. So a cancelled query never keeps
/// its caller (a binding's worker thread) until `timeout_ms`.
pub fn fetch(request: &FetchRequest, cancel: &CancelToken) -> Result<FetchResponse, SightError> {
    run(request, None, cancel)
}

/// One POST of `body` with `content-type: content_type`, under every bound [`fetch`] keeps
/// (redirects refused, one deadline, the body cap enforced while streaming, no decompression,
/// the same cancel). Only `host`, `content-type`, `content-length` and the request's auth
/// header go out. For the evidence anchors (an HTTP sink, an RFC 3161 time-stamp authority);
/// a sight never posts.
pub fn post(
    request: &FetchRequest,
    content_type: &str,
    body: &[u8],
    cancel: &CancelToken,
) -> Result<FetchResponse, SightError> {
    let payload = Payload {
        content_type: content_type.to_owned(),
        body: Arc::new(Zeroizing::new(body.to_vec())),
        answers: false,
    };
    run(request, Some(payload), cancel)
}

/// [`post`], with an error status (4xx, 5xx) returned as a response rather than an error: its
/// body read under the same cap and at most [`ERROR_EXCERPT_BYTES`] of it kept, for a caller
/// that reads the error the server gave (an OAuth error at a token endpoint). A 3xx is still
/// `redirect_refused`. The body is zeroized when the request is done (it may carry a token).
pub fn post_for_answer(
    request: &FetchRequest,
    content_type: &str,
    body: &[u8],
    cancel: &CancelToken,
) -> Result<FetchResponse, SightError> {
    let payload =
        Payload { content_type: content_type.to_owned(), body: Arc::new(Zeroizing::new(body.to_vec())), answers: true };
    run(request, Some(payload), cancel)
}

/// What a POST sends, zeroized when the last holder lets go.
#[derive(Clone)]
struct Payload {
    content_type: String,
    body: Arc<Zeroizing<Vec<u8>>>,
    /// Whether an error status is an answer ([`post_for_answer`]) rather than an error.
    answers: bool,
}

fn run(request: &FetchRequest, payload: Option<Payload>, cancel: &CancelToken) -> Result<FetchResponse, SightError> {
    cancel.check()?;
    let deadline_len = Duration::from_millis(request.timeout_ms.max(1));
    let started = Instant::now();
    let agent = confined_agent(request.ca_certs.as_deref(), deadline_len)?;

    let (answer, answered) = mpsc::sync_channel(1);
    let worker = {
        let (agent, request, cancel) = (agent.clone(), request.clone(), cancel.clone());
        let name = if payload.is_some() { "warden-http-post" } else { "warden-sight-get" };
        std::thread::Builder::new().name(name.into()).spawn(move || {
            // The receiver may be gone (the caller was cancelled): nothing to tell then.
            let _ = answer.send(exchange(&agent, &request, payload.as_ref(), &cancel, started, deadline_len));
        })
    };
    let worker =
        worker.map_err(|_| SightError::new("network_error", "could not start the request (no thread available)"))?;
    loop {
        match answered.recv_timeout(CANCEL_POLL) {
            Ok(result) => {
                // A query cancelled while its answer was on the way is still `aborted`.
                cancel.check()?;
                return result;
            }
            Err(RecvTimeoutError::Timeout) => {
                if cancel.is_cancelled() {
                    agent.shutdown();
                    return Err(aborted());
                }
                if started.elapsed() > deadline_len + DEADLINE_GRACE {
                    agent.shutdown();
                    return Err(timeout_error(request.timeout_ms));
                }
            }
            Err(RecvTimeoutError::Disconnected) => {
                // The request thread ended without an answer: it panicked. Hand the panic to
                // this thread, where the library's panic boundaries expect it.
                if let Err(panic) = worker.join() {
                    std::panic::resume_unwind(panic);
                }
                return Err(SightError::new("network_error", "the request ended without an answer"));
            }
        }
    }
}

/// The request itself, on its own thread: send, check the head, stream the body under the
/// caps. `cancel` is checked between steps and body chunks too, so a request whose caller
/// has gone stops at its next step.
fn exchange(
    agent: &ureq::Agent,
    request: &FetchRequest,
    payload: Option<&Payload>,
    cancel: &CancelToken,
    started: Instant,
    deadline_len: Duration,
) -> Result<FetchResponse, SightError> {
    let sent = match payload {
        None => {
            let mut builder = agent.get(request.url.as_str());
            if let Some((name, value)) = &request.header {
                builder = builder.header(name.as_str(), value.as_str());
            }
            builder.call()
        }
        Some(payload) => {
            let mut builder = agent.post(request.url.as_str()).header("content-type", payload.content_type.as_str());
            if let Some((name, value)) = &request.header {
                builder = builder.header(name.as_str(), value.as_str());
            }
            builder.send(&payload.body[..])
        }
    };
    let response = sent.map_err(|err| match cancel.check() {
        Err(aborted) => aborted,
        Ok(()) => map_error(err, request.timeout_ms),
    })?;
    cancel.check()?;

    let status = response.status().as_u16();
    if (300..400).contains(&status) {
        // Never followed; the Location is never read or surfaced.
        return Err(SightError::new(
            "redirect_refused",
            format!("upstream answered with a redirect (HTTP {status}); redirects are not followed"),
        ));
    }
    if !(200..600).contains(&status) {
        return Err(SightError::new(
            "invalid_response",
            format!("upstream answered with an unexpected status (HTTP {status})"),
        ));
    }

    let headers = response.headers();
    for value in headers.get_all("content-encoding") {
        let ok = value
            .to_str()
            .map(|text| text.split(',').all(|part| part.trim().eq_ignore_ascii_case("identity")))
            .unwrap_or(false);
        if !ok {
            return Err(SightError::new(
                "invalid_response",
                "upstream used a content-encoding; only identity is accepted",
            ));
        }
    }
    let content_type = headers
        .get("content-type")
        .and_then(|value| value.to_str().ok())
        .map(|text| text.chars().take(256).collect::<String>());

    let is_error = status >= 400;
    let mut body = response.into_body();
    if !is_error {
        if let Some(length) = body.content_length() {
            if length > request.max_response_bytes {
                return Err(SightError::new(
                    "response_too_large",
                    format!("upstream advertised {length} bytes, over the {} byte cap", request.max_response_bytes),
                ));
            }
        }
    }

    let cap =
        if is_error { request.max_response_bytes.min(ERROR_EXCERPT_BYTES as u64) } else { request.max_response_bytes };
    let mut reader = body.with_config().limit(cap.saturating_add(1)).reader();
    let mut out: Vec<u8> = Vec::new();
    let mut chunk = [0u8; READ_CHUNK];
    loop {
        cancel.check()?;
        if started.elapsed() > deadline_len {
            return Err(timeout_error(request.timeout_ms));
        }
        let n = match reader.read(&mut chunk) {
            Ok(n) => n,
            Err(err) if err.kind() == ErrorKind::Interrupted => continue,
            Err(err) => {
                cancel.check()?;
                if is_error && out.len() as u64 >= cap {
                    break;
                }
                return Err(map_error(ureq::Error::from(err), request.timeout_ms));
            }
        };
        if n == 0 {
            break;
        }
        let room = (cap as usize).saturating_sub(out.len());
        if n > room {
            if is_error {
                out.extend_from_slice(&chunk[..room]);
                break;
            }
            return Err(SightError::new(
                "response_too_large",
                format!("response body exceeds the {} byte cap", request.max_response_bytes),
            ));
        }
        out.extend_from_slice(&chunk[..n]);
    }
    cancel.check()?;

    if is_error && payload.is_some_and(|p| p.answers) {
        return Ok(FetchResponse { status, body: out, content_type });
    }
    if is_error {
        let excerpt = excerpt(&out);
        let message = if excerpt.is_empty() {
            format!("upstream answered HTTP {status}")
        } else {
            format!("upstream answered HTTP {status}: {excerpt}")
        };
        return Err(SightError::new("upstream_error", message));
    }
    Ok(FetchResponse { status, body: out, content_type })
}

/// The agent every outbound request of Warden uses (a sight's GET, the approval webhook's
/// POST): no proxy from the environment, no redirect followed (a 3xx comes back as a response),
/// statuses as responses, only the headers the caller sets, one deadline, no pooled connection,
/// the Mozilla roots plus `ca_certs` when given.
pub(crate) fn confined_agent(ca_certs: Option<&Path>, deadline: Duration) -> Result<ureq::Agent, SightError> {
    let mut tls = TlsConfig::builder().provider(TlsProvider::Rustls);
    if let Some(path) = ca_certs {
        tls = tls.root_certs(roots_with(path)?);
    }
    let config = ureq::Agent::config_builder()
        .proxy(None)
        .max_redirects(0)
        .max_redirects_will_error(false)
        .save_redirect_history(false)
        .http_status_as_error(false)
        .https_only(false)
        .user_agent("")
        .accept("")
        .accept_encoding("")
        .timeout_global(Some(deadline))
        .max_idle_connections(0)
        .max_idle_connections_per_host(0)
        .tls_config(tls.build())
        .build();
    Ok(config.new_agent())
}

/// The Mozilla roots plus every certificate in the PEM file at `path`.
fn roots_with(path: &Path) -> Result<RootCerts, SightError> {
    let unreadable = || SightError::new("configuration_invalid", "ca_certs file could not be read");
    let file = crate::files::open_regular(path).map_err(|_| unreadable())?;
    let mut pem = Vec::new();
    file.take(MAX_CA_FILE_BYTES + 1).read_to_end(&mut pem).map_err(|_| unreadable())?;
    if pem.len() as u64 > MAX_CA_FILE_BYTES {
        return Err(SightError::new("configuration_invalid", "ca_certs file is too large"));
    }
    let mut extra: Vec<Certificate<'static>> = Vec::new();
    for item in ureq::tls::parse_pem(&pem) {
        match item {
            Ok(PemItem::Certificate(cert)) => extra.push(cert),
            Ok(_) => {}
            Err(_) => return Err(SightError::new("configuration_invalid", "ca_certs file is not valid PEM")),
        }
    }
    if extra.is_empty() {
        return Err(SightError::new("configuration_invalid", "ca_certs file holds no certificate"));
    }
    let defaults =
        webpki_root_certs::TLS_SERVER_ROOT_CERTS.iter().map(|der| Certificate::from_der(der.as_ref()).to_owned());
    Ok(RootCerts::from(defaults.chain(extra)))
}

fn timeout_error(timeout_ms: u64) -> SightError {
    SightError::new("timeout", format!("upstream did not answer within {timeout_ms} ms"))
}

/// A transport error (connect, TLS, timeout) as a sight error code and a bounded message.
pub(crate) fn transport_error(err: ureq::Error, timeout_ms: u64) -> SightError {
    map_error(err, timeout_ms)
}

/// Map a ureq error to a bounded message that never carries the URL, a header or a body.
fn map_error(err: ureq::Error, timeout_ms: u64) -> SightError {
    use ureq::Error as E;
    match err {
        E::Timeout(_) => timeout_error(timeout_ms),
        E::Io(io) => match io.kind() {
            ErrorKind::TimedOut | ErrorKind::WouldBlock => timeout_error(timeout_ms),
            ErrorKind::ConnectionRefused => SightError::new("network_error", "connection refused by upstream"),
            ErrorKind::ConnectionReset
            | ErrorKind::ConnectionAborted
            | ErrorKind::BrokenPipe
            | ErrorKind::UnexpectedEof => {
                SightError::new("network_error", "connection closed by upstream before the response ended")
            }
            ErrorKind::InvalidData => {
                // rustls reports certificate problems as InvalidData I/O errors.
                SightError::new("network_error", format!("TLS or transport error: {}", bounded(&io.to_string())))
            }
            kind => SightError::new("network_error", format!("I/O error ({kind})")),
        },
        E::HostNotFound => SightError::new("network_error", "host not found"),
        E::ConnectionFailed => SightError::new("network_error", "connection failed"),
        E::Tls(reason) => SightError::new("network_error", format!("TLS error: {}", bounded(reason))),
        E::Rustls(reason) => SightError::new("network_error", format!("TLS error: {}", bounded(&reason.to_string()))),
        E::Pem(_) => SightError::new("network_error", "TLS error: invalid PEM"),
        E::TlsRequired => SightError::new("network_error", "TLS error: TLS required"),
        E::LargeResponseHeader(_, limit) => {
            SightError::new("invalid_response", format!("upstream response headers exceed {limit} bytes"))
        }
        E::Protocol(_) => SightError::new("invalid_response", "upstream sent a malformed HTTP response"),
        E::BodyExceedsLimit(limit) => SightError::new(
            "response_too_large",
            format!("response body exceeds the {} byte cap", limit.saturating_sub(1)),
        ),
        E::BodyStalled => SightError::new("network_error", "upstream stopped sending the body"),
        E::BadUri(_) | E::Http(_) => SightError::new("configuration_invalid", "the request could not be built"),
        E::TooManyRedirects | E::RedirectFailed => SightError::new("redirect_refused", "redirects are not followed"),
        _ => SightError::new("network_error", "the request failed"),
    }
}

/// At most 200 characters of a library message, on one line.
fn bounded(text: &str) -> String {
    let one_line: String = text.chars().map(|c| if c.is_control() { ' ' } else { c }).take(200).collect();
    one_line.trim().to_string()
}

/// An error body as one line of at most [`ERROR_EXCERPT_BYTES`] bytes: invalid UTF-8 replaced,
/// control characters and whitespace runs collapsed to single spaces.
fn excerpt(raw: &[u8]) -> String {
    let text = String::from_utf8_lossy(raw);
    let mut out = String::with_capacity(text.len().min(ERROR_EXCERPT_BYTES));
    let mut pending_space = false;
    for c in text.chars() {
        if c.is_whitespace() || c.is_control() {
            pending_space = !out.is_empty();
            continue;
        }
        let extra = c.len_utf8() + usize::from(pending_space);
        if out.len() + extra > ERROR_EXCERPT_BYTES {
            break;
        }
        if pending_space {
            out.push(' ');
            pending_space = false;
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_excerpt_is_one_bounded_line() {
        let raw = "a\r\nb\t\tc\u{0}d".repeat(2000);
        let line = excerpt(raw.as_bytes());
        assert!(line.len() <= ERROR_EXCERPT_BYTES);
        assert!(!line.contains('\n') && !line.contains('\r') && !line.contains('\0'));
        assert!(line.starts_with("a b c d"));
    }
}
