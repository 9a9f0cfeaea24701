//! What a request's blocking work does once the server side (`super`) has read it whole and
//! the gate let it in: the header checks, the bearer, then a `POST`'s one JSON-RPC message —
//! a `tools/call` intercepted (the kernel's decision, the upstream call, the answer with its
//! receipt), anything else relayed to the upstream and back, an event stream as it comes (with
//! elicitation answered and sampling with tools refused) — and `GET`/`DELETE` relayed. Written
//! into the request's `Sink`.

use std::io::{Read, Write};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use super::super::answer;
use super::super::catalog::{self, ListTools};
use super::super::classify::{Observation, Reply};
use super::super::client;
use super::super::elicitation;
use super::super::intercept::{Admitted, Call, Engine};
use super::super::lists;
use super::super::sampling;
use super::super::sse;
use super::super::tasks;
use super::super::upstream::{self, Dialer};
use super::super::wire::{self, Checks, Kind};
use super::super::{end_to_end_request, end_to_end_response, log};
use super::{HttpConfig, Request, Sink, MAX_ANSWER_BYTES};

/// A request read whole (the gate's checks and the path done): answered into `stream`.
pub(super) fn handle(stream: &mut Sink, engine: &Engine, config: &HttpConfig, request: &Request, body: Vec<u8>) {
    if request.method == "POST" {
        if !admitted(stream, engine, config, request) {
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
        if !admitted(stream, engine, config, request) {
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

/// The checks every verb's request passes first: a repeated identity header and `Origin` (steps
/// 2 and 3 of §1.3), then the bearer; a refusal is written into `stream`.
fn admitted(stream: &mut Sink, engine: &Engine, config: &HttpConfig, request: &Request) -> bool {
    let checks = Checks { identity_headers: &config.identity_headers, allowed_origins: &config.allowed_origins };
    if let Err(answer) = wire::check_headers(&request.headers, &checks) {
        let _ = write_json(stream, answer.status, answer.body.as_ref());
        return false;
    }
    bearer(stream, engine, config, &request.headers)
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
