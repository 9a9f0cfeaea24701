//! Streamable HTTP downstream, on the CLI's one HTTP stack (`crate::server`: hyper 1.x on a
//! current-thread tokio runtime of the listener's own thread), one request per connection
//! (`Connection: close`). `POST` carries one JSON-RPC message; `GET` and `DELETE` are relayed;
//! any other verb gets 501. Only `tools/call` is intercepted; everything else goes to the
//! upstream and back untouched. Who gets a slot, and how long a request may take to arrive, is
//! the `gate`'s. The engine is synchronous: each request's work runs on a blocking thread (at
//! most one per slot), and writes its answer into a `Sink` — the head through a one-shot
//! channel, the body (an event stream as it comes) through a bounded one that hyper drains.

pub mod gate;

use std::convert::Infallible;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Bytes;
use hyper::body::{Frame, Incoming};
use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt as _, ReadBuf};

use super::answer;
use super::catalog::{self, ListTools};
use super::classify::{Observation, Reply};
use super::client;
use super::elicitation;
use super::intercept::{Admitted, Call, Engine};
use super::lists;
use super::resource::ProtectedResource;
use super::sampling;
use super::sse;
use super::tasks;
use super::upstream::{self, Dialer, Upstream};
use super::wire::{self, Checks, Kind};
use super::{end_to_end_request, end_to_end_response, log};
use crate::server;
use gate::{Admission, Gate, Limit};

/// The most bytes a request head may take (more: 431).
const MAX_HEAD_BYTES: usize = 64 * 1024;
/// The most header fields a request may have (more: 431).
const MAX_HEADERS: usize = 128;
/// The largest upstream answer read whole (JSON); event streams are relayed as they come.
const MAX_ANSWER_BYTES: usize = 64 * 1024 * 1024;
/// How long a write to the client may wait for it to read; then it is taken for gone.
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);
/// Body chunks waiting for hyper to write them.
const QUEUED_CHUNKS: usize = 16;
/// Threads for blocking work: a slot's request, and a connection waiting for a slot.
const BLOCKING_THREADS: usize = gate::MAX_CONNECTIONS * 2 + gate::MAX_WAITING + 16;

pub struct HttpConfig {
    pub path: String,
    pub max_body_bytes: usize,
    pub upstream: Upstream,
    pub dialer: Dialer,
    pub identity_headers: Vec<String>,
    pub allowed_origins: Vec<String>,
    /// A header this gateway consumes (the identity token): never forwarded upstream.
    pub consumed: Vec<String>,
    /// Connections one peer may hold at once (`--max-connections-per-peer`).
    pub max_per_peer: usize,
    /// With `--identity-jwt`: the resource every request's bearer token must be for.
    pub protected: Option<ProtectedResource>,
    /// `--refusal-status 200`: a JSON-RPC refusal of an accepted `tools/call` is HTTP 200.
    pub refusals_ok: bool,
}

impl HttpConfig {
    /// The HTTP status a refusal of an accepted `tools/call` is written with.
    fn refusal_status(&self, status: u16) -> u16 {
        if self.refusals_ok {
            200
        } else {
            status
        }
    }
}

/// A connection being served (or its request's work still running): counted from admission
/// until the last holder lets go.
struct Live(Arc<AtomicUsize>);

impl Live {
    fn new(active: &Arc<AtomicUsize>) -> Arc<Live> {
        active.fetch_add(1, Ordering::SeqCst);
        Arc::new(Live(Arc::clone(active)))
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Serve on a thread of its own until `stopping` is set (the signal watcher then connects once
/// to wake the accept); the listener is closed then, and the count of connections still being
/// served returned. They go on being served (the runtime's thread stays) while the caller
/// drains.
pub fn serve(
    listener: TcpListener,
    engine: Arc<Engine>,
    config: Arc<HttpConfig>,
    stopping: Arc<AtomicBool>,
) -> Result<Arc<AtomicUsize>, String> {
    let active = Arc::new(AtomicUsize::new(0));
    listener.set_nonblocking(true).map_err(|e| format!("cannot set up the listener: {e}"))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .max_blocking_threads(BLOCKING_THREADS)
        .build()
        .map_err(|e| format!("cannot start the listener's runtime: {e}"))?;
    let (stopped, stop) = std::sync::mpsc::channel::<Result<(), String>>();
    let counted = Arc::clone(&active);
    std::thread::Builder::new()
        .name("gateway-listener".into())
        .spawn(move || {
            runtime.block_on(async move {
                let listener = match tokio::net::TcpListener::from_std(listener) {
                    Ok(listener) => listener,
                    Err(e) => {
                        let _ = stopped.send(Err(format!("cannot set up the listener: {e}")));
                        return;
                    }
                };
                let gate = Arc::new(Gate::new(config.max_per_peer));
                loop {
                    let (stream, peer) = server::accept(&listener).await;
                    if stopping.load(Ordering::SeqCst) {
                        break;
                    }
                    let (gate, engine, config, active) =
                        (Arc::clone(&gate), Arc::clone(&engine), Arc::clone(&config), Arc::clone(&counted));
                    tokio::spawn(connection(stream, peer, gate, engine, config, active));
                }
                // Nothing here holds the engine any more: once the connections in flight let go
                // of it too, the gateway's own drop of it closes the store.
                drop((listener, gate, engine, config));
                let _ = stopped.send(Ok(()));
                // The connections in flight are served until the process ends.
                std::future::pending::<()>().await;
            });
        })
        .map_err(|e| format!("cannot start the listener's thread: {e}"))?;
    match stop.recv() {
        Ok(Ok(())) => Ok(active),
        Ok(Err(what)) => Err(what),
        Err(_) => Err("the listener's thread ended".into()),
    }
}

/// One connection: admitted by the gate (or refused with the limit it hit), a slot waited for,
/// then its one request read and answered by hyper.
async fn connection(
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    gate: Arc<Gate>,
    engine: Arc<Engine>,
    config: Arc<HttpConfig>,
    active: Arc<AtomicUsize>,
) {
    let admission = match gate.admit(peer.ip()) {
        Ok(admission) => admission,
        Err(limit) => {
            gate.note(limit);
            refuse(stream, limit).await;
            return;
        }
    };
    let live = Live::new(&active);
    // A second descriptor of the same socket: the gate shuts its read side to cut a slow
    // request, and a refusal is written on it after hyper gave up on the request.
    let Ok(std) = stream.into_std() else { return };
    let Ok(side) = std.try_clone() else { return };
    let Ok(stream) = tokio::net::TcpStream::from_std(std) else { return };
    let (received, cut) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicBool::new(false)));
    let waiting = {
        let (received, cut) = (Arc::clone(&received), Arc::clone(&cut));
        tokio::task::spawn_blocking(move || {
            let mut admission = admission;
            let waited = admission.wait(&side, received, cut);
            (admission, side, waited)
        })
    };
    let Ok((admission, side, waited)) = waiting.await else { return };
    if let Err(limit) = waited {
        admission.note(limit);
        refuse(stream, limit).await;
        return;
    }
    let invoked = Arc::new(AtomicBool::new(false));
    let (done, finished) = tokio::sync::oneshot::channel::<()>();
    let request = Arc::new(Served {
        engine,
        config,
        admission: Arc::new(admission),
        cut: Arc::clone(&cut),
        invoked: Arc::clone(&invoked),
        done: Mutex::new(Some(done)),
        live: Arc::clone(&live),
    });
    let service =
        hyper::service::service_fn(move |incoming: hyper::Request<Incoming>| answer(incoming, Arc::clone(&request)));
    let io = hyper_util::rt::TokioIo::new(Counted { inner: stream, received, cut: Arc::clone(&cut) });
    let mut served = Box::pin(
        server::http1(gate::HEAD_DEADLINE)
            .keep_alive(false)
            .title_case_headers(true)
            .max_header_size(MAX_HEAD_BYTES)
            .max_headers(MAX_HEADERS)
            .serve_connection(io, service),
    );
    // Once the request's work is done, what is left of its answer has `WRITE_TIMEOUT` to go.
    let outcome = tokio::select! {
        outcome = &mut served => Some(outcome),
        () = async { let _ = finished.await; tokio::time::sleep(WRITE_TIMEOUT).await; } => None,
    };
    drop(served);
    if invoked.load(Ordering::SeqCst) {
        return;
    }
    // hyper writes nothing when the head is late, and the gate's cut ends the read: the
    // refusal names the limit.
    let limit = if cut.load(Ordering::SeqCst) {
        Some(Limit::Cut)
    } else {
        matches!(&outcome, Some(Err(error)) if error.is_timeout()).then_some(Limit::Head)
    };
    if let Some(limit) = limit {
        gate.note(limit);
        if let Ok(side) = side.set_nonblocking(true).and_then(|()| tokio::net::TcpStream::from_std(side)) {
            refuse(side, limit).await;
        }
    }
    drop(live);
}

/// The answer to a connection that hit a limit: its status, the limit's name and why, and
/// (when trying again may help) `Retry-After`, written within a second. What the client already
/// sent is read away (without waiting) so that closing does not reset the connection before it
/// reads this.
async fn refuse(mut stream: tokio::net::TcpStream, limit: Limit) {
    let (status, fields, body) = refusal(limit);
    let mut head = format!("HTTP/1.1 {status} {}\r\n", reason(status));
    for (name, value) in &fields {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!("Content-Length: {}\r\nConnection: close\r\n\r\n", body.len()));
    let written = async {
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(&body).await?;
        stream.shutdown().await
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), written).await;
    let mut sink = [0u8; 8192];
    let mut drained = 0;
    while drained < MAX_HEAD_BYTES {
        match stream.try_read(&mut sink) {
            Ok(n) if n > 0 => drained += n,
            _ => break,
        }
    }
}

/// A limit's answer: status, header fields (`Content-Type`, `Retry-After`), JSON body.
fn refusal(limit: Limit) -> (u16, Vec<(String, String)>, Vec<u8>) {
    let body = json!({"error": limit.name(), "message": limit.message()});
    let mut fields = vec![("Content-Type".to_owned(), "application/json".to_owned())];
    if let Some(seconds) = limit.retry_after() {
        fields.push(("Retry-After".to_owned(), seconds.to_string()));
    }
    (limit.status(), fields, serde_json::to_vec(&body).unwrap_or_default())
}

/// The client's side of a connection, every byte read counted (the gate's measure of a slow
/// request). Once the gate cut it, hyper's closing leaves the write side open: the refusal
/// that names the cut is written after.
struct Counted {
    inner: tokio::net::TcpStream,
    received: Arc<AtomicU64>,
    cut: Arc<AtomicBool>,
}

impl AsyncRead for Counted {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        let read = buf.filled().len().saturating_sub(before);
        self.received.fetch_add(read as u64, Ordering::SeqCst);
        polled
    }
}

impl AsyncWrite for Counted {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        if self.cut.load(Ordering::SeqCst) {
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// What one connection's request is answered with.
struct Served {
    engine: Arc<Engine>,
    config: Arc<HttpConfig>,
    admission: Arc<Admission>,
    cut: Arc<AtomicBool>,
    /// Set when hyper read a request head: the answer is hyper's to write from then on.
    invoked: Arc<AtomicBool>,
    /// Dropped when the request's work is done.
    done: Mutex<Option<tokio::sync::oneshot::Sender<()>>>,
    live: Arc<Live>,
}

/// The head of an answer, and the channel its body comes through.
struct Head {
    status: u16,
    fields: Vec<(String, String)>,
    body: tokio::sync::mpsc::Receiver<Bytes>,
}

/// An answer's body: the chunks its `Sink` sends, until the sink is dropped.
struct Chunks(Option<tokio::sync::mpsc::Receiver<Bytes>>);

impl hyper::body::Body for Chunks {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.0.as_mut() {
            None => Poll::Ready(None),
            Some(receiver) => receiver.poll_recv(cx).map(|chunk| chunk.map(|bytes| Ok(Frame::data(bytes)))),
        }
    }
}

/// An answer made here (no blocking work): status, header fields, body.
fn made(status: u16, fields: &[(String, String)], body: Vec<u8>) -> hyper::Response<Chunks> {
    let (sender, receiver) = tokio::sync::mpsc::channel(1);
    if !body.is_empty() {
        let _ = sender.try_send(Bytes::from(body));
    }
    drop(sender);
    response(Head { status, fields: fields.to_vec(), body: receiver })
}

fn response(head: Head) -> hyper::Response<Chunks> {
    let mut response = hyper::Response::new(Chunks(Some(head.body)));
    *response.status_mut() =
        hyper::StatusCode::from_u16(head.status).unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    let headers = response.headers_mut();
    for (name, value) in &head.fields {
        let (Ok(name), Ok(value)) =
            (hyper::header::HeaderName::from_bytes(name.as_bytes()), hyper::header::HeaderValue::from_str(value))
        else {
            continue;
        };
        headers.append(name, value);
    }
    headers.insert(hyper::header::CONNECTION, hyper::header::HeaderValue::from_static("close"));
    response
}

/// A made-up JSON answer (or an empty body), as `Sink::json` writes it.
fn made_json(status: u16, body: Option<&Value>) -> hyper::Response<Chunks> {
    let bytes = body.map(|b| serde_json::to_vec(b).unwrap_or_default()).unwrap_or_default();
    let mut fields = Vec::new();
    if body.is_some() {
        fields.push(("Content-Type".to_owned(), "application/json".to_owned()));
    }
    fields.push(("Content-Length".to_owned(), bytes.len().to_string()));
    made(status, &fields, bytes)
}

fn made_refusal(served: &Served, limit: Limit) -> hyper::Response<Chunks> {
    served.admission.note(limit);
    let (status, mut fields, body) = refusal(limit);
    fields.push(("Content-Length".to_owned(), body.len().to_string()));
    made(status, &fields, body)
}

/// The one request of a connection: read, checked, and handed to a blocking thread.
async fn answer(
    incoming: hyper::Request<Incoming>,
    served: Arc<Served>,
) -> Result<hyper::Response<Chunks>, Infallible> {
    served.invoked.store(true, Ordering::SeqCst);
    let done = served.done.lock().ok().and_then(|mut done| done.take());
    let (parts, body) = incoming.into_parts();
    let request = Request {
        method: parts.method.as_str().to_owned(),
        path: parts.uri.path_and_query().map_or_else(|| parts.uri.to_string(), |p| p.as_str().to_owned()),
        headers: parts
            .headers
            .iter()
            .map(|(name, value)| (name.as_str().to_owned(), String::from_utf8_lossy(value.as_bytes()).into_owned()))
            .collect(),
    };
    if request.method != "POST" && !served.admission.request_read() {
        return Ok(made_refusal(&served, Limit::Cut));
    }
    let path = request.path.split('?').next().unwrap_or_default();
    if let Some(protected) = served.config.protected.as_ref().filter(|p| p.serves(path)) {
        // Public by design (RFC 9728): a client reads it to learn where to get a token.
        let status = if request.method == "GET" { 200 } else { 405 };
        return Ok(made_json(status, (status == 200).then(|| protected.metadata()).as_ref()));
    }
    let wanted = served.config.path.trim_end_matches('/');
    if path.trim_end_matches('/') != wanted {
        return Ok(made_json(404, None));
    }
    let mut bytes = Vec::new();
    if request.method == "POST" {
        let length = match body_length(&request.headers, served.config.max_body_bytes) {
            Ok(length) => length,
            Err(status) => return Ok(made_json(status, None)),
        };
        // hyper answers `Expect: 100-continue` when the body is first read, here.
        let reading = axum::body::to_bytes(axum::body::Body::new(body), length);
        match tokio::time::timeout(gate::body_deadline(length), reading).await {
            Ok(Ok(read)) if read.len() == length => bytes = read.to_vec(),
            _ if served.cut.load(Ordering::SeqCst) => return Ok(made_refusal(&served, Limit::Cut)),
            Err(_) => return Ok(made_refusal(&served, Limit::Body)),
            Ok(_) => return Ok(made_json(400, None)),
        }
        if !served.admission.request_read() {
            return Ok(made_refusal(&served, Limit::Cut));
        }
    }
    let (head, headed) = tokio::sync::oneshot::channel();
    let mut sink = Sink { head: Some(head), body: None, runtime: tokio::runtime::Handle::current() };
    let work = Arc::clone(&served);
    let worked = tokio::task::spawn_blocking(move || {
        let live = Arc::clone(&work.live);
        handle(&mut sink, &work.engine, &work.config, &request, bytes);
        drop((sink, done, live));
    });
    match headed.await {
        Ok(head) => Ok(response(head)),
        // The work ended without an answer (it panicked): nothing was said.
        Err(_) => {
            let _ = worked.await;
            Ok(made_json(500, None))
        }
    }
}

/// Step 1 of §1.3: a length that is a number, within the cap; no chunked request bodies.
fn body_length(headers: &[(String, String)], cap: usize) -> Result<usize, u16> {
    if wire::header(headers, "transfer-encoding").1 > 0 {
        return Err(411);
    }
    let lengths: Vec<&str> =
        headers.iter().filter(|(k, _)| k.eq_ignore_ascii_case("content-length")).map(|(_, v)| v.trim()).collect();
    let Some(first) = lengths.first() else { return Ok(0) };
    if lengths.iter().any(|l| l != first) || first.is_empty() || !first.bytes().all(|b| b.is_ascii_digit()) {
        return Err(400);
    }
    let length: usize = first.parse().map_err(|_| 413u16)?;
    if length > cap {
        return Err(413);
    }
    Ok(length)
}

/// Where a request's blocking work writes its answer: the head once, then the body in chunks
/// (`Write`), each waiting at most `WRITE_TIMEOUT` for the client to take the one before.
struct Sink {
    head: Option<tokio::sync::oneshot::Sender<Head>>,
    body: Option<tokio::sync::mpsc::Sender<Bytes>>,
    runtime: tokio::runtime::Handle,
}

impl Sink {
    /// Send the head: the status and these header fields.
    fn head(&mut self, status: u16, fields: Vec<(String, String)>) -> std::io::Result<()> {
        let Some(head) = self.head.take() else {
            return Err(std::io::Error::other("the head was sent already"));
        };
        let (sender, receiver) = tokio::sync::mpsc::channel(QUEUED_CHUNKS);
        head.send(Head { status, fields, body: receiver })
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::BrokenPipe))?;
        self.body = Some(sender);
        Ok(())
    }

    /// Whether the client went away: hyper dropped the answer (it saw the connection end).
    fn gone(&self) -> bool {
        match (&self.head, &self.body) {
            (Some(head), _) => head.is_closed(),
            (None, Some(body)) => body.is_closed(),
            (None, None) => true,
        }
    }
}

impl Write for Sink {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let Some(body) = &self.body else { return Err(std::io::ErrorKind::NotConnected.into()) };
        if bytes.is_empty() {
            return Ok(0);
        }
        let chunk = Bytes::copy_from_slice(bytes);
        // The timer is made inside the runtime's context, whichever thread this is.
        let sent = self.runtime.block_on(async { tokio::time::timeout(WRITE_TIMEOUT, body.send(chunk)).await });
        match sent {
            Ok(Ok(())) => Ok(bytes.len()),
            Ok(Err(_)) => Err(std::io::ErrorKind::BrokenPipe.into()),
            Err(_) => Err(std::io::ErrorKind::TimedOut.into()),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

struct Request {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
}

/// A request read whole (the gate's checks and the path done): answered into `stream`.
fn handle(stream: &mut Sink, engine: &Engine, config: &HttpConfig, request: &Request, body: Vec<u8>) {
    if request.method == "POST" {
        let checks = Checks { identity_headers: &config.identity_headers, allowed_origins: &config.allowed_origins };
        if let Err(answer) = wire::check_headers(&request.headers, &checks) {
            let _ = write_json(stream, answer.status, answer.body.as_ref());
            return;
        }
        if !bearer(stream, engine, config, &request.headers) {
            return;
        }
        match wire::parse_post_with(&request.headers, &body, engine.unknown_methods(), &|t| engine.annotations_of(t)) {
            Err(answer) => {
                log::warn(&format!("refused a request before forwarding: HTTP {}", answer.status));
                let _ = write_json(stream, answer.status, answer.body.as_ref());
            }
            Ok(inbound) => match &inbound.kind {
                Kind::Relay => {
                    if let Some(answer) = sampling::relayed_tool_use_refusal(&inbound.message) {
                        let _ = write_json(stream, answer.status, Some(&answer.body));
                        return;
                    }
                    let is_response = inbound.message.get("method").is_none();
                    let uses = if is_response { sampling::response_tool_uses(&inbound.message) } else { Vec::new() };
                    let mut inbound = inbound;
                    if !uses.is_empty() {
                        // The server gets a refusal in place of the tool uses (it is not left
                        // waiting for an answer), and never the tool uses.
                        let id = inbound.message.get("id").cloned().unwrap_or(Value::Null);
                        inbound.message = sampling::legacy_tool_use_refusal(&id, &uses).body;
                    }
                    if is_response {
                        let session = wire::header(&request.headers, "mcp-session-id").0;
                        engine.client_answered(session, &inbound.message);
                    }
                    let body = serde_json::to_vec(&inbound.message).unwrap_or(body);
                    let method = inbound
                        .message
                        .get("method")
                        .and_then(Value::as_str)
                        .filter(|m| lists::rewritten(m) || tasks::observed(m));
                    let id = inbound.message.get("id").cloned().unwrap_or(Value::Null);
                    let cursor = method.and_then(|m| tasks::read_param(m, &inbound.message));
                    let answering = method.map(|method| Answering { engine, id: &id, method, cursor });
                    relay(stream, engine, config, "POST", &request.headers, &body, answering);
                }
                Kind::ToolCall { id, tool } => {
                    let lister = Lister { config, headers: &request.headers, revision: &inbound.revision };
                    let call = Call {
                        id,
                        tool,
                        message: &inbound.message,
                        revision: &inbound.revision,
                        headers: &request.headers,
                        raw: &body,
                        lister: &lister,
                    };
                    intercepted(stream, engine, config, &call);
                }
            },
        }
        return;
    }
    if request.method == "GET" || request.method == "DELETE" {
        let checks = Checks { identity_headers: &config.identity_headers, allowed_origins: &config.allowed_origins };
        if let Err(answer) = wire::check_headers(&request.headers, &checks) {
            let _ = write_json(stream, answer.status, answer.body.as_ref());
            return;
        }
        if !bearer(stream, engine, config, &request.headers) {
            return;
        }
        if let Err(answer) = wire::revision(&request.headers, &Value::Null) {
            let _ = write_json(stream, answer.status, answer.body.as_ref());
            return;
        }
        relay(stream, engine, config, &request.method, &request.headers, &[], None);
        return;
    }
    let _ = write_json(stream, 501, None);
}

/// With `--identity-jwt`, the request's bearer token must verify for this resource before
/// anything is parsed, relayed or decided: `false` when it was answered 401.
fn bearer(stream: &mut Sink, engine: &Engine, config: &HttpConfig, headers: &[(String, String)]) -> bool {
    let Some(protected) = &config.protected else { return true };
    match protected.check(engine.identity.as_ref(), headers) {
        Ok(()) => true,
        Err(refused) => {
            log::warn(&format!("refused a request with HTTP 401: {}", log::printable(&refused.why)));
            let challenge = [("WWW-Authenticate".to_owned(), refused.challenge)];
            let _ = write_json_with(stream, 401, &challenge, Some(&refused.body));
            false
        }
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        202 => "Accepted",
        204 => "No Content",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        411 => "Length Required",
        413 => "Content Too Large",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "",
    }
}

/// A made-up answer: JSON with its type and length, or an empty body.
fn write_json(stream: &mut Sink, status: u16, body: Option<&Value>) -> std::io::Result<()> {
    write_json_with(stream, status, &[], body)
}

/// `write_json` with these extra header fields.
fn write_json_with(
    stream: &mut Sink,
    status: u16,
    fields: &[(String, String)],
    body: Option<&Value>,
) -> std::io::Result<()> {
    let bytes = body.map(|b| serde_json::to_vec(b).unwrap_or_default()).unwrap_or_default();
    let mut fields = fields.to_vec();
    if body.is_some() {
        fields.push(("Content-Type".into(), "application/json".into()));
    }
    fields.push(("Content-Length".into(), bytes.len().to_string()));
    stream.head(status, fields)?;
    stream.write_all(&bytes)
}

/// The upstream's status and end-to-end headers; the body is framed by length when known,
/// else chunked (hyper's framing of an answer of unknown length on HTTP/1.1).
fn write_head(
    stream: &mut Sink,
    status: u16,
    headers: &[(String, String)],
    length: Option<usize>,
) -> std::io::Result<()> {
    let mut fields = end_to_end_response(headers);
    if let Some(length) = length {
        fields.push(("Content-Length".into(), length.to_string()));
    }
    stream.head(status, fields)
}

fn dialer(config: &HttpConfig) -> &Dialer {
    &config.dialer
}

/// The client's verified token in `headers`, when the upstream credential exchanges it
/// (`token_exchange`); `None` otherwise. Never forwarded.
fn subject<'h>(config: &HttpConfig, headers: &'h [(String, String)]) -> Option<&'h str> {
    config.dialer.credential.as_ref().and_then(|credential| credential.subject(headers))
}

/// A relayed request whose answer is read on its way back (`lists::REWRITTEN`): its id, method
/// and cursor.
struct Answering<'a> {
    engine: &'a Engine,
    id: &'a Value,
    method: &'a str,
    cursor: Option<&'a str>,
}

impl Answering<'_> {
    /// The answer to this request, rewritten as the gateway serves it (`None`: not this
    /// request's answer, or nothing to change).
    fn rewritten(&self, envelope: &Value) -> Option<Value> {
        if !is_response_to(envelope, self.id) {
            return None;
        }
        let mut envelope = envelope.clone();
        self.engine.rewrite_answer(self.method, self.cursor, &mut envelope).then_some(envelope)
    }
}

/// Relay one exchange: no action, no decision, no record. The answer to a request of
/// `answering` — JSON, or the response to that request's id on an event stream — is read (the
/// tool set) and rewritten where the gateway says (`lists`); everything else is relayed as it
/// came, an event stream byte for byte — except, with `gateway.sampling_tools: refuse`, a
/// server request for sampling with tools on the stream (the standalone `GET` stream, or a
/// relayed request's): it never reaches the client, and the upstream gets the `-41019`
/// refusal as the client's answer (`refuse_sampling_request`).
#[allow(clippy::too_many_arguments)]
fn relay(
    stream: &mut Sink,
    engine: &Engine,
    config: &HttpConfig,
    method: &str,
    headers: &[(String, String)],
    body: &[u8],
    answering: Option<Answering<'_>>,
) {
    let mut forwarded = end_to_end_request(headers, &config.consumed);
    if method == "POST" {
        forwarded.push(("Content-Type".into(), "application/json".into()));
    }
    let sent = upstream::send(&config.upstream, method, &forwarded, body, dialer(config), subject(config, headers));
    let mut response = match sent {
        Ok(response) => response,
        Err(upstream::Failure::NoCredential(why)) => {
            log::warn(&format!(
                "relaying a {method} refused, the upstream credential is not available: {}",
                log::printable(&why)
            ));
            // A request gets a JSON-RPC error; a notification or a client's response, the status.
            let id = serde_json::from_slice::<Value>(body)
                .ok()
                .filter(|message| message.get("method").is_some())
                .and_then(|message| message.get("id").cloned());
            let message = match &config.dialer.credential {
                Some(credential) => credential.refusal(&why),
                None => "the gateway's upstream credential is not available, so nothing was sent".to_owned(),
            };
            let answer = id.map(|id| wire::Answer::rpc_error(503, &id, -41020, &message));
            let _ = write_json(stream, 503, answer.as_ref().and_then(|a| a.body.as_ref()));
            return;
        }
        Err(failure) => {
            log::warn(&format!("relaying a {method} failed: {failure:?}"));
            let _ = write_json(stream, 502, None);
            return;
        }
    };
    if response.is_event_stream() {
        if write_head(stream, response.status, &response.headers, None).is_err() {
            upstream::shut(&response.socket);
            return;
        }
        let mut buffer = [0u8; 8192];
        // Read for an answer, or for sampling requests the gateway refuses: every event is
        // re-emitted as decoded (lines as they came, `id:` included), the response rewritten,
        // a refused request left out. Otherwise the bytes go as they come.
        let refuse = engine.refuses_sampling_tools();
        let mut decoder = (answering.is_some() || refuse).then(sse::Decoder::new);
        loop {
            match response.body.read(&mut buffer) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let out = match &mut decoder {
                        Some(decoder) => match decoder.feed(&buffer[..n]) {
                            Ok(events) => {
                                let mut out = String::new();
                                for event in &events {
                                    if refuse && refuse_sampling_request(config, headers, event) {
                                        continue;
                                    }
                                    out.push_str(&reemitted(event, answering.as_ref()));
                                }
                                out.into_bytes()
                            }
                            Err(why) => {
                                log::warn(&format!("a relayed event stream could not be read: {why}"));
                                break;
                            }
                        },
                        None => buffer[..n].to_vec(),
                    };
                    if stream.write_all(&out).and_then(|()| stream.flush()).is_err() {
                        break;
                    }
                }
            }
        }
        upstream::shut(&response.socket);
        return;
    }
    match upstream::read_all(&mut response.body, MAX_ANSWER_BYTES) {
        Ok(mut bytes) => {
            let parsed = answering.as_ref().and_then(|a| serde_json::from_slice::<Value>(&bytes).ok().map(|e| (a, e)));
            if let Some(rewritten) = parsed.and_then(|(answering, envelope)| answering.rewritten(&envelope)) {
                bytes = serde_json::to_vec(&rewritten).unwrap_or(bytes);
            }
            let _ = write_head(stream, response.status, &response.headers, Some(bytes.len()))
                .and_then(|()| stream.write_all(&bytes))
                .and_then(|()| stream.flush());
        }
        Err(what) => {
            log::warn(&format!("relaying a {method} failed: {what}"));
            let _ = write_json(stream, 502, None);
        }
    }
}

/// When `event` is a server request for sampling with tools (`sampling::request_uses_tools`)
/// on a relayed stream, under `gateway.sampling_tools: refuse`: the upstream is answered in the
/// client's place with the `-41019` refusal (a JSON-RPC error response with the request's id,
/// POSTed in the stream's session), so it is not left waiting, and `true`: the event is not
/// relayed. The client never sees the request; there is no call, so no receipt.
fn refuse_sampling_request(config: &HttpConfig, headers: &[(String, String)], event: &sse::Event) -> bool {
    let Some(message) = event.data.as_deref().and_then(|data| serde_json::from_str::<Value>(data).ok()) else {
        return false;
    };
    let Some(id) = message.get("id").filter(|_| sampling::request_uses_tools(&message)) else {
        return false;
    };
    log::warn(
        "the upstream asked for sampling with tools on a relayed stream; not relayed (gateway.sampling_tools: refuse)",
    );
    let refused = answer::refusal(
        id,
        403,
        -41019,
        "warden.sampling_tools_refused",
        "the gateway does not relay sampling with tools (gateway.sampling_tools: refuse)",
        serde_json::json!({"reason": "sampling_tools"}),
    );
    let body = serde_json::to_vec(&refused.body).unwrap_or_default();
    let mut forwarded = end_to_end_request(headers, &config.consumed);
    forwarded.retain(|(k, _)| !k.eq_ignore_ascii_case("accept") && !k.eq_ignore_ascii_case("last-event-id"));
    forwarded.push(("Content-Type".into(), "application/json".into()));
    forwarded.push(("Accept".into(), "application/json, text/event-stream".into()));
    match upstream::send(&config.upstream, "POST", &forwarded, &body, dialer(config), subject(config, headers)) {
        Ok(response) => upstream::shut(&response.socket),
        Err(failure) => log::warn(&format!("answering the upstream's sampling request failed: {failure:?}")),
    }
    true
}

/// One decoded event as relayed: its lines as they came, or, when it is the answer the
/// gateway rewrites, its other lines and the rewritten data.
fn reemitted(event: &sse::Event, answering: Option<&Answering<'_>>) -> String {
    let rewritten = answering.and_then(|answering| {
        event
            .data
            .as_deref()
            .and_then(|data| serde_json::from_str::<Value>(data).ok())
            .and_then(|envelope| answering.rewritten(&envelope))
    });
    let mut out = String::new();
    for line in &event.lines {
        if rewritten.is_some() && (line == "data" || line.starts_with("data:")) {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    if let Some(rewritten) = rewritten {
        out.push_str(&format!("data: {rewritten}\n"));
    }
    out.push('\n');
    out
}

/// The gateway's own `tools/list`, sent in the session of the call that needs it (the call's
/// end-to-end headers, minus the mirrored headers that name the call), on a fresh connection.
struct Lister<'a> {
    config: &'a HttpConfig,
    headers: &'a [(String, String)],
    revision: &'a str,
}

impl ListTools for Lister<'_> {
    fn page(&self, cursor: Option<&str>) -> Result<Value, String> {
        let (_, message) = catalog::list_request(cursor, None);
        let mut headers = end_to_end_request(self.headers, &self.config.consumed);
        headers.retain(|(k, _)| {
            let lower = k.to_ascii_lowercase();
            lower != "accept-encoding"
                && lower != "mcp-method"
                && lower != "mcp-name"
                && !lower.starts_with("mcp-param-")
        });
        headers.push(("Content-Type".into(), "application/json".into()));
        headers.push(("Accept-Encoding".into(), "identity".into()));
        if self.revision == wire::REVISION_2026 {
            headers.push(("Mcp-Method".into(), "tools/list".into()));
        }
        let subject = subject(self.config, self.headers);
        client::post(&self.config.upstream, dialer(self.config), &headers, &message, subject)
            .map(|(envelope, _)| envelope)
    }
}

/// The gateway's own task polls (`tasks::spawn_poller`) over HTTP: each a request in the
/// session and revision of the call that created the task.
pub fn poll_tasks(engine: &Arc<Engine>, config: &Arc<HttpConfig>) {
    let config = Arc::clone(config);
    tasks::spawn_poller(engine, move |due, id| {
        let mut headers = vec![
            ("Content-Type".to_owned(), "application/json".to_owned()),
            ("Accept".to_owned(), "application/json, text/event-stream".to_owned()),
            ("Accept-Encoding".to_owned(), "identity".to_owned()),
        ];
        if let Some(session) = &due.session {
            headers.push(("Mcp-Session-Id".to_owned(), session.clone()));
        }
        if let Some(revision) = &due.revision {
            headers.push(("MCP-Protocol-Version".to_owned(), revision.clone()));
            if revision == wire::REVISION_2026 {
                headers.push(("Mcp-Method".to_owned(), due.method.to_owned()));
            }
        }
        let message = json!({"jsonrpc": "2.0", "id": id, "method": due.method, "params": {"taskId": due.task_id}});
        // No client's token here: a `token_exchange` credential has nothing to exchange, and the
        // poll fails as an unavailable credential does (nothing is sent).
        client::post(&config.upstream, dialer(&config), &headers, &message, None).map(|(envelope, _)| envelope)
    });
}

/// One `tools/call` through the kernel: refuse, or forward on a fresh connection and record.
fn intercepted(stream: &mut Sink, engine: &Engine, config: &HttpConfig, call: &Call<'_>) {
    let watched = &*stream;
    let present = move || !watched.gone();
    let admitted = match engine.admit(call, &present) {
        Ok(admitted) => admitted,
        Err(answer) => {
            let _ = write_json(stream, config.refusal_status(answer.status), Some(&answer.body));
            return;
        }
    };
    let mut forwarded = end_to_end_request(call.headers, &config.consumed);
    forwarded.retain(|(k, _)| !k.eq_ignore_ascii_case("accept-encoding"));
    forwarded.push(("Content-Type".into(), "application/json".into()));
    forwarded.push(("Accept-Encoding".into(), "identity".into()));
    let body = serde_json::to_vec(&admitted.forward).unwrap_or_default();
    let sent =
        upstream::send(&config.upstream, "POST", &forwarded, &body, dialer(config), subject(config, call.headers));
    let mut response = match sent {
        Ok(response) => response,
        Err(failure) => {
            let observation = match failure {
                // The credential vanished between the check and the send: nothing was sent.
                upstream::Failure::NeverConnected(what) | upstream::Failure::NoCredential(what) => {
                    Observation::NeverConnected(what)
                }
                upstream::Failure::Broken(what) => Observation::Broken(what),
            };
            let finished = engine.finish(admitted, &observation, call.revision);
            let answer = answer::synthesised(call.id, &finished);
            let _ = write_json(stream, config.refusal_status(answer.status), Some(&answer.body));
            return;
        }
    };
    if response.is_event_stream() {
        streamed(stream, engine, admitted, &mut response, call);
        return;
    }
    let challenge = response.header("www-authenticate").is_some();
    let (observation, bytes) = match upstream::read_all(&mut response.body, MAX_ANSWER_BYTES) {
        Ok(bytes) => {
            let body = serde_json::from_slice::<Value>(&bytes).ok();
            (Observation::Answered { status: response.status, challenge, body }, bytes)
        }
        Err(what) => (Observation::Broken(what), Vec::new()),
    };
    let finished = engine.finish(admitted, &observation, call.revision);
    match (&finished.reply, observation) {
        (Reply::Relay, Observation::Answered { body, .. }) => {
            let bytes = match body {
                Some(mut envelope) if envelope.is_object() => {
                    finished.relayed(&mut envelope);
                    serde_json::to_vec(&envelope).unwrap_or(bytes)
                }
                _ => bytes,
            };
            let _ = write_head(stream, response.status, &response.headers, Some(bytes.len()))
                .and_then(|()| stream.write_all(&bytes))
                .and_then(|()| stream.flush());
        }
        _ => {
            let answer = answer::synthesised(call.id, &finished);
            let _ = write_json(stream, config.refusal_status(answer.status), Some(&answer.body));
        }
    }
}

/// An intercepted answer on an event stream: every event before the final one relayed at once
/// without its `id:` line; the outcome recorded before the client sees the final event.
fn streamed(
    stream: &mut Sink,
    engine: &Engine,
    mut admitted: Admitted,
    response: &mut upstream::Response,
    call: &Call<'_>,
) {
    let status = response.status;
    if write_head(stream, status, &response.headers, None).is_err() {
        upstream::shut(&response.socket);
        let observation = Observation::Broken("the client went away before the stream began".into());
        engine.finish(admitted, &observation, call.revision);
        return;
    }
    // One reader thread feeds the upstream's bytes through a one-slot queue while this thread
    // looks at the client every 100 ms: a client gone mid-stream is noticed even while the
    // upstream is silent, and the upstream socket is shut at once.
    let mut body = std::mem::replace(&mut response.body, upstream::Guarded::empty());
    let (chunks, received) = std::sync::mpsc::sync_channel::<Result<Vec<u8>, Observation>>(1);
    // While a server request relayed on this stream awaits the client's answer (legacy
    // elicitation: a human may be typing), the upstream's silence is bounded by
    // --elicitation-timeout rather than --upstream-timeout (D15).
    let waiting_on_client: Arc<std::sync::Mutex<Option<std::time::Instant>>> = Arc::default();
    let until = Arc::clone(&waiting_on_client);
    let reader = std::thread::spawn(move || {
        let mut buffer = [0u8; 8192];
        loop {
            let item = match body.read(&mut buffer) {
                Ok(0) => Err(Observation::Broken("the event stream ended before the final response".into())),
                Ok(n) => Ok(buffer[..n].to_vec()),
                Err(e) if matches!(e.kind(), std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock) => {
                    let waiting = until.lock().ok().and_then(|deadline| *deadline);
                    if waiting.is_some_and(|deadline| std::time::Instant::now() < deadline) {
                        continue;
                    }
                    Err(Observation::Broken("timeout after headers".into()))
                }
                Err(e) => Err(Observation::Broken(format!("the event stream broke: {}", e.kind()))),
            };
            let last = item.is_err();
            if chunks.send(item).is_err() || last {
                return;
            }
        }
    });
    let mut decoder = sse::Decoder::new();
    // Legacy elicitation (D10): each server request relayed on this stream is a suspension,
    // and the client's answer to it (relayed on another connection) a resumption.
    let session = wire::header(call.headers, "mcp-session-id").0;
    let mut awaited: Vec<(String, std::sync::mpsc::Receiver<Value>)> = Vec::new();
    let mut rounds = 0u32;
    let mut outstanding = 0usize;
    let observation = 'read: loop {
        match resumed(&mut admitted, &awaited) {
            Ok(answered) if answered > 0 => {
                outstanding = outstanding.saturating_sub(answered);
                if outstanding == 0 {
                    if let Ok(mut deadline) = waiting_on_client.lock() {
                        *deadline = None;
                    }
                }
            }
            Ok(_) => {}
            Err(what) => break 'read Observation::Broken(what),
        }
        let chunk = match received.recv_timeout(Duration::from_millis(100)) {
            Ok(Ok(chunk)) => chunk,
            Ok(Err(observation)) => break 'read observation,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                if stream.gone() {
                    break 'read Observation::Broken("the client went away mid-stream".into());
                }
                continue;
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                break 'read Observation::Broken("the event stream broke".into());
            }
        };
        let n = chunk.len();
        let buffer = chunk;
        let events = match decoder.feed(&buffer[..n]) {
            Ok(events) => events,
            Err(what) => break 'read Observation::Broken(what),
        };
        for event in events {
            let parsed = event.data.as_deref().and_then(|d| serde_json::from_str::<Value>(d).ok());
            let is_final = parsed
                .as_ref()
                .and_then(Value::as_object)
                .is_some_and(|o| !o.contains_key("method") && (o.contains_key("result") || o.contains_key("error")));
            if is_final {
                if let Err(what) = resumed(&mut admitted, &awaited) {
                    break 'read Observation::Broken(what);
                }
                break 'read Observation::Answered { status, challenge: false, body: parsed };
            }
            let request = parsed.as_ref().and_then(Value::as_object).and_then(|o| {
                let method = o.get("method").and_then(Value::as_str)?;
                Some((method.to_owned(), o.get("id")?.clone()))
            });
            if parsed.as_ref().is_some_and(sampling::request_uses_tools) && engine.refuses_sampling_tools() {
                log::warn("the upstream asked for sampling with tools on a call's stream; not relayed (gateway.sampling_tools: refuse)");
                break 'read Observation::SamplingRefused(
                    "the upstream asked the client to sample with tools, which gateway.sampling_tools: refuse does not relay".into(),
                );
            }
            if let Some((method, id)) = request {
                rounds += 1;
                let data = json!({
                    "reason": "server_request",
                    "held": true,
                    "round": rounds,
                    "request_id": id,
                    "input_requests": [method.chars().take(256).collect::<String>()],
                });
                // The lease covers the wait for the client's answer, as for MRTR.
                if let Err(error) = admitted.permit.suspend(Some(engine.elicitation_lease()), &data) {
                    log::warn(&format!("recording a suspension failed: {error}"));
                    break 'read Observation::Broken(format!("the suspension could not be recorded: {error}"));
                }
                let key = elicitation::answer_key(session, &id);
                match engine.await_answer(&key) {
                    Some(receiver) => {
                        awaited.push((key, receiver));
                        outstanding += 1;
                    }
                    None => {
                        log::warn("a server request id already awaited by another stream; its answer is not attributed")
                    }
                }
                if let Ok(mut deadline) = waiting_on_client.lock() {
                    *deadline = Some(std::time::Instant::now() + engine.elicitation_timeout());
                }
            }
            if stream.write_all(event.without_id().as_bytes()).and_then(|()| stream.flush()).is_err() {
                break 'read Observation::Broken("the client went away mid-stream".into());
            }
        }
    };
    upstream::shut(&response.socket);
    drop(received);
    let _ = reader.join();
    for (key, _) in &awaited {
        engine.forget_answer(key);
    }
    if matches!(&observation, Observation::Broken(what) if what.starts_with("the client went away")) {
        engine.finish(admitted, &observation, call.revision);
        return;
    }
    let finished = engine.finish(admitted, &observation, call.revision);
    let envelope = match (&finished.reply, observation) {
        (Reply::Relay, Observation::Answered { body: Some(mut envelope), .. }) => {
            finished.relayed(&mut envelope);
            envelope
        }
        _ => answer::synthesised(call.id, &finished).body,
    };
    let line = format!("event: message\ndata: {}\n\n", serde_json::to_string(&envelope).unwrap_or_default());
    let _ = stream.write_all(line.as_bytes()).and_then(|()| stream.flush());
}

/// Record `EXECUTION_RESUMED` for every client answer that came since the last look; how many.
fn resumed(admitted: &mut Admitted, awaited: &[(String, std::sync::mpsc::Receiver<Value>)]) -> Result<usize, String> {
    let mut answered = 0;
    for (_, receiver) in awaited {
        while let Ok(data) = receiver.try_recv() {
            admitted.permit.resume(&data).map_err(|error| {
                log::warn(&format!("recording a resumption failed: {error}"));
                format!("the resumption could not be recorded: {error}")
            })?;
            answered += 1;
        }
    }
    Ok(answered)
}

/// A JSON-RPC response (no `method`) to the request with this id.
fn is_response_to(envelope: &Value, id: &Value) -> bool {
    envelope.get("method").is_none() && envelope.get("id") == Some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_body_is_framed_by_one_decimal_length_within_the_cap() {
        type Case<'a> = (&'a [(&'a str, &'a str)], Result<usize, u16>);
        let cases: &[Case<'_>] = &[
            (&[], Ok(0)),
            (&[("Content-Length", "12")], Ok(12)),
            (&[("content-length", "64")], Ok(64)),
            (&[("Content-Length", "65")], Err(413)),
            (&[("Content-Length", "99999999999999999999999")], Err(413)),
            (&[("Content-Length", "12"), ("Content-Length", "12")], Ok(12)),
            (&[("Content-Length", "12"), ("Content-Length", "13")], Err(400)),
            (&[("Content-Length", "+12")], Err(400)),
            (&[("Content-Length", "")], Err(400)),
            (&[("Content-Length", "0x10")], Err(400)),
            (&[("Transfer-Encoding", "chunked")], Err(411)),
            (&[("Transfer-Encoding", "chunked"), ("Content-Length", "3")], Err(411)),
        ];
        for (headers, expected) in cases {
            let headers: Vec<(String, String)> =
                headers.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
            assert_eq!(body_length(&headers, 64), *expected, "{headers:?}");
        }
    }

    #[test]
    fn a_sink_takes_the_client_for_gone_once_hyper_dropped_the_answer() {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        let sink = |head| Sink { head: Some(head), body: None, runtime: runtime.handle().clone() };
        // Before the head: gone when the answer's receiver is dropped (hyper saw the client leave).
        let (head, headed) = tokio::sync::oneshot::channel();
        let mut before = sink(head);
        assert!(!before.gone());
        drop(headed);
        assert!(before.gone());
        assert!(before.head(200, Vec::new()).is_err(), "no head goes to a client gone");
        // After the head: the body's chunks arrive in order until the body is dropped.
        let (head, headed) = tokio::sync::oneshot::channel();
        let mut after = sink(head);
        after.head(200, vec![("Content-Type".into(), "text/event-stream".into())]).expect("head");
        assert!(after.head(200, Vec::new()).is_err(), "one head only");
        let mut received = headed.blocking_recv().expect("the head");
        assert_eq!((received.status, received.fields.len()), (200, 1));
        after.write_all(b"data: 1\n\n").expect("a chunk");
        after.write_all(b"data: 2\n\n").expect("a chunk");
        assert_eq!(received.body.blocking_recv().as_deref(), Some(&b"data: 1\n\n"[..]));
        assert_eq!(received.body.blocking_recv().as_deref(), Some(&b"data: 2\n\n"[..]));
        assert!(!after.gone());
        drop(received);
        assert!(after.gone());
        assert_eq!(after.write_all(b"data: 3\n\n").map_err(|e| e.kind()), Err(std::io::ErrorKind::BrokenPipe));
    }
}
