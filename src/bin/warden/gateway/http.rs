//! Streamable HTTP downstream, on the CLI's one HTTP stack (`crate::server`: hyper 1.x on a
//! current-thread tokio runtime of the listener's own thread), one request per connection
//! (`Connection: close`). `POST` carries one JSON-RPC message; `GET` and `DELETE` are relayed;
//! any other verb gets 501. Only `tools/call` is intercepted; everything else goes to the
//! upstream and back untouched. Who gets a slot, and how long a request may take to arrive, is
//! the `gate`'s. The engine is synchronous: each request's work runs on a blocking thread (at
//! most one per slot), and writes its answer into a `Sink` — the head through a one-shot
//! channel, the body (an event stream as it comes) through a bounded one that hyper drains.
//! This file is the server side (connections, the gate, reading a request, the `Sink`);
//! what the request's work does with it is `handle`'s.

pub mod gate;
mod handle;

pub use handle::poll_tasks;

use std::convert::Infallible;
use std::io::Write;
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

use super::intercept::Engine;
use super::log;
use super::resource::ProtectedResource;
use super::upstream::{Dialer, Upstream};
use super::wire;
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
        handle::handle(&mut sink, &work.engine, &work.config, &request, bytes);
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

struct Request {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
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
