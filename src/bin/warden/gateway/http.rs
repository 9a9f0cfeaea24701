//! Streamable HTTP downstream: a plain HTTP/1.1 listener on `std::net`, one thread per
//! connection (bounded), one request per connection (`Connection: close`). `POST` carries one
//! JSON-RPC message; `GET` and `DELETE` are relayed; any other verb gets 501. Only `tools/call`
//! is intercepted; everything else goes to the upstream and back untouched. Who gets a slot,
//! and how long a request may take to arrive, is the `gate`'s.

pub mod gate;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::catalog::{self, ListTools};
use super::classify::{Observation, Reply};
use super::client;
use super::intercept::{self, Admitted, Call, Engine};
use super::lists;
use super::resource::ProtectedResource;
use super::sse;
use super::tasks;
use super::upstream::{self, Dialer, Upstream};
use super::wire::{self, Checks, Kind};
use super::{end_to_end_request, end_to_end_response, log};
use gate::{Admission, Gate, Limit, Timed};

/// The most bytes a request head may take.
const MAX_HEAD_BYTES: usize = 64 * 1024;
/// The largest upstream answer read whole (JSON); event streams are relayed as they come.
const MAX_ANSWER_BYTES: usize = 64 * 1024 * 1024;

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

/// Serve until `stopping` is set; returns the count of connections still being served.
pub fn serve(
    listener: TcpListener,
    engine: Arc<Engine>,
    config: Arc<HttpConfig>,
    stopping: &AtomicBool,
) -> Arc<AtomicUsize> {
    let active = Arc::new(AtomicUsize::new(0));
    let gate = Arc::new(Gate::new(config.max_per_peer));
    for stream in listener.incoming() {
        if stopping.load(Ordering::SeqCst) {
            break;
        }
        let Ok(mut stream) = stream else { continue };
        let Ok(peer) = stream.peer_addr() else { continue };
        let admission = match gate.admit(peer.ip()) {
            Ok(admission) => admission,
            Err(limit) => {
                gate.note(limit);
                refuse(&mut stream, limit);
                continue;
            }
        };
        active.fetch_add(1, Ordering::SeqCst);
        let (engine, config, done) = (Arc::clone(&engine), Arc::clone(&config), Arc::clone(&active));
        let spawned = std::thread::Builder::new().name("gateway-connection".into()).spawn(move || {
            handle(stream, &engine, &config, admission);
            done.fetch_sub(1, Ordering::SeqCst);
        });
        if spawned.is_err() {
            active.fetch_sub(1, Ordering::SeqCst);
            log::warn("could not start a thread for a connection; it was dropped");
        }
    }
    active
}

/// The answer to a connection that hit a limit: its status, the limit's name and why, and
/// (when trying again may help) `Retry-After`. What the client already sent is read away
/// (without blocking) so that closing does not reset the connection before it reads this.
fn refuse(stream: &mut TcpStream, limit: Limit) {
    let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
    let body = json!({"error": limit.name(), "message": limit.message()});
    let bytes = serde_json::to_vec(&body).unwrap_or_default();
    let mut head =
        format!("HTTP/1.1 {} {}\r\nContent-Type: application/json\r\n", limit.status(), reason(limit.status()));
    if let Some(seconds) = limit.retry_after() {
        head.push_str(&format!("Retry-After: {seconds}\r\n"));
    }
    head.push_str(&format!("Content-Length: {}\r\nConnection: close\r\n\r\n", bytes.len()));
    let _ = stream.write_all(head.as_bytes()).and_then(|()| stream.write_all(&bytes)).and_then(|()| stream.flush());
    let _ = stream.shutdown(Shutdown::Write);
    if stream.set_nonblocking(true).is_ok() {
        let mut sink = [0u8; 8192];
        let mut drained = 0;
        while drained < MAX_HEAD_BYTES {
            match stream.read(&mut sink) {
                Ok(n) if n > 0 => drained += n,
                _ => break,
            }
        }
    }
}

/// `refuse`, logged.
fn refused(stream: &mut TcpStream, admission: &Admission, limit: Limit) {
    admission.note(limit);
    refuse(stream, limit);
}

struct Request {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
}

fn handle(mut stream: TcpStream, engine: &Engine, config: &HttpConfig, mut admission: Admission) {
    let _ = stream.set_write_timeout(Some(Duration::from_secs(30)));
    let (received, cut) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicBool::new(false)));
    if let Err(limit) = admission.wait(&stream, Arc::clone(&received), Arc::clone(&cut)) {
        return refused(&mut stream, &admission, limit);
    }
    let Ok(reader_side) = stream.try_clone() else { return };
    let mut reader =
        BufReader::new(Timed { stream: reader_side, until: Instant::now() + gate::HEAD_DEADLINE, received });
    let request = match read_request(&mut reader) {
        Ok(request) => request,
        Err(_) if cut.load(Ordering::SeqCst) => return refused(&mut stream, &admission, Limit::Cut),
        Err(408) => return refused(&mut stream, &admission, Limit::Head),
        Err(status) => {
            let _ = write_json(&mut stream, status, None);
            return;
        }
    };
    if request.method != "POST" && !admission.request_read() {
        return refused(&mut stream, &admission, Limit::Cut);
    }
    let path = request.path.split('?').next().unwrap_or_default();
    if let Some(protected) = config.protected.as_ref().filter(|p| p.serves(path)) {
        // Public by design (RFC 9728): a client reads it to learn where to get a token.
        let status = if request.method == "GET" { 200 } else { 405 };
        let _ = write_json(&mut stream, status, (status == 200).then(|| protected.metadata()).as_ref());
        return;
    }
    let wanted = config.path.trim_end_matches('/');
    if path.trim_end_matches('/') != wanted {
        let _ = write_json(&mut stream, 404, None);
        return;
    }
    if request.method == "POST" {
        let continue_first =
            wire::header(&request.headers, "expect").0.is_some_and(|v| v.trim().eq_ignore_ascii_case("100-continue"));
        let body =
            match read_body(&mut reader, &request.headers, config.max_body_bytes, continue_first.then_some(&stream)) {
                Ok(body) => body,
                Err(_) if cut.load(Ordering::SeqCst) => return refused(&mut stream, &admission, Limit::Cut),
                Err(408) => return refused(&mut stream, &admission, Limit::Body),
                Err(status) => {
                    let _ = write_json(&mut stream, status, None);
                    return;
                }
            };
        if !admission.request_read() {
            return refused(&mut stream, &admission, Limit::Cut);
        }
        let checks = Checks { identity_headers: &config.identity_headers, allowed_origins: &config.allowed_origins };
        if let Err(answer) = wire::check_headers(&request.headers, &checks) {
            let _ = write_json(&mut stream, answer.status, answer.body.as_ref());
            return;
        }
        if !bearer(&mut stream, engine, config, &request.headers) {
            return;
        }
        match wire::parse_post_with(&request.headers, &body, engine.unknown_methods(), &|t| engine.annotations_of(t)) {
            Err(answer) => {
                log::warn(&format!("refused a request before forwarding: HTTP {}", answer.status));
                let _ = write_json(&mut stream, answer.status, answer.body.as_ref());
            }
            Ok(inbound) => match &inbound.kind {
                Kind::Relay => {
                    if let Some(answer) = intercept::relayed_tool_use_refusal(&inbound.message) {
                        let _ = write_json(&mut stream, answer.status, Some(&answer.body));
                        return;
                    }
                    let is_response = inbound.message.get("method").is_none();
                    let uses = if is_response { intercept::response_tool_uses(&inbound.message) } else { Vec::new() };
                    let mut inbound = inbound;
                    if !uses.is_empty() {
                        // The server gets a refusal in place of the tool uses (it is not left
                        // waiting for an answer), and never the tool uses.
                        let id = inbound.message.get("id").cloned().unwrap_or(Value::Null);
                        inbound.message = intercept::legacy_tool_use_refusal(&id, &uses).body;
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
                    relay(&mut stream, config, "POST", &request.headers, &body, answering);
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
                    intercepted(&mut stream, engine, config, &call);
                }
            },
        }
        return;
    }
    if request.method == "GET" || request.method == "DELETE" {
        let checks = Checks { identity_headers: &config.identity_headers, allowed_origins: &config.allowed_origins };
        if let Err(answer) = wire::check_headers(&request.headers, &checks) {
            let _ = write_json(&mut stream, answer.status, answer.body.as_ref());
            return;
        }
        if !bearer(&mut stream, engine, config, &request.headers) {
            return;
        }
        if let Err(answer) = wire::revision(&request.headers, &Value::Null) {
            let _ = write_json(&mut stream, answer.status, answer.body.as_ref());
            return;
        }
        relay(&mut stream, config, &request.method, &request.headers, &[], None);
        return;
    }
    let _ = write_json(&mut stream, 501, None);
}

/// With `--identity-jwt`, the request's bearer token must verify for this resource before
/// anything is parsed, relayed or decided: `false` when it was answered 401.
fn bearer(stream: &mut TcpStream, engine: &Engine, config: &HttpConfig, headers: &[(String, String)]) -> bool {
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

fn read_request(reader: &mut BufReader<Timed>) -> Result<Request, u16> {
    let mut head = Vec::new();
    loop {
        let before = head.len();
        match reader.by_ref().take((MAX_HEAD_BYTES + 1 - before) as u64).read_until(b'\n', &mut head) {
            Ok(0) => return Err(400),
            Ok(_) => {}
            Err(e) if matches!(e.kind(), std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock) => {
                return Err(408)
            }
            Err(_) => return Err(400),
        }
        if head.len() > MAX_HEAD_BYTES {
            return Err(431);
        }
        let line = &head[before..];
        if (line == b"\r\n" || line == b"\n") && before > 0 {
            break;
        }
    }
    let mut fields = [httparse::EMPTY_HEADER; 128];
    let mut parsed = httparse::Request::new(&mut fields);
    match parsed.parse(&head) {
        Ok(httparse::Status::Complete(_)) => {}
        _ => return Err(400),
    }
    let method = parsed.method.ok_or(400u16)?.to_owned();
    let path = parsed.path.ok_or(400u16)?.to_owned();
    let headers =
        parsed.headers.iter().map(|h| (h.name.to_owned(), String::from_utf8_lossy(h.value).into_owned())).collect();
    Ok(Request { method, path, headers })
}

/// Step 1 of §1.3: a length that is a number, within the cap; no chunked request bodies. The
/// body must arrive within its deadline (408 when it does not).
fn read_body(
    reader: &mut BufReader<Timed>,
    headers: &[(String, String)],
    cap: usize,
    continue_on: Option<&TcpStream>,
) -> Result<Vec<u8>, u16> {
    if wire::header(headers, "transfer-encoding").1 > 0 {
        return Err(411);
    }
    let lengths: Vec<&str> =
        headers.iter().filter(|(k, _)| k.eq_ignore_ascii_case("content-length")).map(|(_, v)| v.trim()).collect();
    let Some(first) = lengths.first() else { return Ok(Vec::new()) };
    if lengths.iter().any(|l| l != first) || first.is_empty() || !first.bytes().all(|b| b.is_ascii_digit()) {
        return Err(400);
    }
    let length: usize = first.parse().map_err(|_| 413u16)?;
    if length > cap {
        return Err(413);
    }
    if let Some(mut client) = continue_on {
        // The client waits for this before it sends the body (curl does so above 1 KiB).
        let _ = client.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").and_then(|()| client.flush());
    }
    reader.get_mut().until = Instant::now() + gate::body_deadline(length);
    let mut body = vec![0; length];
    reader.read_exact(&mut body).map_err(|e| match e.kind() {
        std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => 408u16,
        _ => 400,
    })?;
    Ok(body)
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
fn write_json(stream: &mut TcpStream, status: u16, body: Option<&Value>) -> std::io::Result<()> {
    write_json_with(stream, status, &[], body)
}

/// `write_json` with these extra header fields.
fn write_json_with(
    stream: &mut TcpStream,
    status: u16,
    fields: &[(String, String)],
    body: Option<&Value>,
) -> std::io::Result<()> {
    let bytes = body.map(|b| serde_json::to_vec(b).unwrap_or_default()).unwrap_or_default();
    let mut head = format!("HTTP/1.1 {status} {}\r\n", reason(status));
    for (name, value) in fields {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if body.is_some() {
        head.push_str("Content-Type: application/json\r\n");
    }
    head.push_str(&format!("Content-Length: {}\r\nConnection: close\r\n\r\n", bytes.len()));
    stream.write_all(head.as_bytes())?;
    stream.write_all(&bytes)?;
    stream.flush()
}

/// The upstream's status and end-to-end headers; the body is framed by length when known,
/// else by closing the connection.
fn write_head(
    stream: &mut TcpStream,
    status: u16,
    headers: &[(String, String)],
    length: Option<usize>,
) -> std::io::Result<()> {
    let mut head = format!("HTTP/1.1 {status} {}\r\n", reason(status));
    for (name, value) in end_to_end_response(headers) {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if let Some(length) = length {
        head.push_str(&format!("Content-Length: {length}\r\n"));
    }
    head.push_str("Connection: close\r\n\r\n");
    stream.write_all(head.as_bytes())?;
    stream.flush()
}

/// Whether the client closed its side: a read that would block means it is still there.
fn client_gone(stream: &TcpStream) -> bool {
    if stream.set_nonblocking(true).is_err() {
        return false;
    }
    let mut probe = [0u8; 1];
    let gone = matches!(stream.peek(&mut probe), Ok(0))
        || matches!(stream.peek(&mut probe), Err(e) if e.kind() != std::io::ErrorKind::WouldBlock);
    let _ = stream.set_nonblocking(false);
    gone
}

fn dialer(config: &HttpConfig) -> &Dialer {
    &config.dialer
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
/// came, an event stream byte for byte.
fn relay(
    stream: &mut TcpStream,
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
    let mut response = match upstream::send(&config.upstream, method, &forwarded, body, dialer(config)) {
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
            let answer = id.map(|id| {
                wire::Answer::rpc_error(
                    503,
                    &id,
                    -41020,
                    "the gateway's upstream credential is not available, so nothing was sent",
                )
            });
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
        // Read for an answer: every event is re-emitted as decoded (lines as they came, `id:`
        // included), the response rewritten. Otherwise the bytes go as they come.
        let mut decoder = answering.as_ref().map(|_| sse::Decoder::new());
        loop {
            match response.body.read(&mut buffer) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let out = match (&mut decoder, &answering) {
                        (Some(decoder), Some(answering)) => match decoder.feed(&buffer[..n]) {
                            Ok(events) => {
                                events.iter().map(|event| reemitted(event, answering)).collect::<String>().into_bytes()
                            }
                            Err(why) => {
                                log::warn(&format!("a relayed event stream could not be read: {why}"));
                                break;
                            }
                        },
                        _ => buffer[..n].to_vec(),
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

/// One decoded event as relayed: its lines as they came, or, when it is the answer the
/// gateway rewrites, its other lines and the rewritten data.
fn reemitted(event: &sse::Event, answering: &Answering<'_>) -> String {
    let rewritten = event
        .data
        .as_deref()
        .and_then(|data| serde_json::from_str::<Value>(data).ok())
        .and_then(|envelope| answering.rewritten(&envelope));
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
        client::post(&self.config.upstream, dialer(self.config), &headers, &message).map(|(envelope, _)| envelope)
    }
}

/// Poll every open task (held, and adopted after a restart) with the gateway's own requests
/// (`tasks::Engine::due_polls`: `tasks/get`, or `tasks/result` for a 2025 task seen completed),
/// in the session and revision of the call that created it, at most `tasks::MAX_POLLED` a round,
/// a round every `tasks::POLL_EVERY`, for as long as the gateway runs. The answers are read as
/// a relayed answer's are.
pub fn poll_tasks(engine: &Arc<Engine>, config: &Arc<HttpConfig>) {
    engine.polls_tasks.store(true, Ordering::SeqCst);
    let (engine, config) = (Arc::downgrade(engine), Arc::clone(config));
    let _ = std::thread::Builder::new().name("gateway-task-poller".into()).spawn(move || {
        let mut next = 0u64;
        loop {
            std::thread::sleep(tasks::POLL_EVERY);
            let Some(engine) = engine.upgrade() else { return };
            if engine.stopping.load(Ordering::SeqCst) {
                return;
            }
            for due in engine.due_polls() {
                next += 1;
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
                let message = json!({"jsonrpc": "2.0", "id": format!("warden-task-{next}"), "method": due.method,
                                     "params": {"taskId": due.task_id}});
                match client::post(&config.upstream, dialer(&config), &headers, &message) {
                    Ok((mut envelope, _)) => {
                        engine.observe_task_as(due.method, Some(&due.task_id), &mut envelope, true);
                    }
                    Err(what) => engine.poll_failed(&due.task_id, &what),
                }
            }
        }
    });
}

/// One `tools/call` through the kernel: refuse, or forward on a fresh connection and record.
fn intercepted(stream: &mut TcpStream, engine: &Engine, config: &HttpConfig, call: &Call<'_>) {
    let probe = stream.try_clone().ok();
    let present = move || probe.as_ref().is_none_or(|probe| !client_gone(probe));
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
    let mut response = match upstream::send(&config.upstream, "POST", &forwarded, &body, dialer(config)) {
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
            let answer = intercept::synthesised(call.id, &finished);
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
            let answer = intercept::synthesised(call.id, &finished);
            let _ = write_json(stream, config.refusal_status(answer.status), Some(&answer.body));
        }
    }
}

/// An intercepted answer on an event stream: every event before the final one relayed at once
/// without its `id:` line; the outcome recorded before the client sees the final event.
fn streamed(
    stream: &mut TcpStream,
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
    let mut body = std::mem::replace(&mut response.body, upstream::Body::Empty);
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
                if client_gone(stream) {
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
            if parsed.as_ref().is_some_and(intercept::request_uses_tools) && engine.refuses_sampling_tools() {
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
                let key = intercept::answer_key(session, &id);
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
        _ => intercept::synthesised(call.id, &finished).body,
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
