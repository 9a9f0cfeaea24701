//! The gateway as an MCP client of its own: one JSON-RPC request over HTTP and its response
//! (the gateway's own `tools/list`), and a whole session — `initialize`, `tools/list` (every
//! page), goodbye — for `warden gateway scaffold` and `warden check --upstream`, over HTTP or
//! with the server as a child process.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{json, Value};

use super::catalog::{self, ListTools};
use super::sse;
use super::upstream::{self, Dialer, Upstream};

/// The largest answer read whole.
const MAX_ANSWER_BYTES: usize = 64 * 1024 * 1024;

/// The revision this client asks for in `initialize` (a server answers with the one it speaks).
pub const CLIENT_REVISION: &str = "2025-11-25";

/// One POST of `message` on a fresh connection; its response (JSON, or on an event stream the
/// response to its id) and the answer's headers. `subject`: as `upstream::send`'s.
pub fn post(
    upstream: &Upstream,
    dialer: &Dialer,
    headers: &[(String, String)],
    message: &Value,
    subject: Option<&str>,
) -> Result<(Value, Vec<(String, String)>), String> {
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    let body = serde_json::to_vec(message).unwrap_or_default();
    let mut response =
        upstream::send(upstream, "POST", headers, &body, dialer, subject).map_err(|failure| match failure {
            upstream::Failure::NeverConnected(what)
            | upstream::Failure::Broken(what)
            | upstream::Failure::NoCredential(what) => what,
        })?;
    let method = message.get("method").and_then(Value::as_str).unwrap_or("request");
    let is_response = |envelope: &Value| envelope.get("method").is_none() && envelope.get("id") == Some(&id);
    let answer = if response.is_event_stream() {
        let mut decoder = sse::Decoder::new();
        let mut buffer = [0u8; 8192];
        let mut found = None;
        while found.is_none() {
            let n = response.body.read(&mut buffer).map_err(|e| format!("reading the event stream: {}", e.kind()))?;
            if n == 0 {
                break;
            }
            found = decoder
                .feed(&buffer[..n])?
                .iter()
                .filter_map(|event| event.data.as_deref())
                .filter_map(|data| serde_json::from_str::<Value>(data).ok())
                .find(|envelope| is_response(envelope));
        }
        found.ok_or_else(|| format!("the event stream ended before the {method} answer"))?
    } else {
        let bytes = upstream::read_all(&mut response.body, MAX_ANSWER_BYTES)?;
        let envelope: Value = serde_json::from_slice(&bytes)
            .map_err(|_| format!("HTTP {}: the {method} answer is not JSON", response.status))?;
        if !is_response(&envelope) {
            return Err(format!("HTTP {}: the answer is not the {method} response", response.status));
        }
        envelope
    };
    upstream::shut(&response.socket);
    Ok((answer, response.headers))
}

/// What a session learnt: the server's `serverInfo`, the revision it speaks and its tools.
#[derive(Debug, Clone)]
pub struct Listed {
    pub server: Value,
    pub revision: String,
    pub tools: Vec<Value>,
}

/// Where the server is.
pub enum Target<'a> {
    Http { upstream: Upstream, dialer: Dialer },
    Child { command: &'a [String], timeout: Duration },
}

/// `initialize`, `notifications/initialized`, then every page of `tools/list`.
pub fn list_tools(target: &Target<'_>) -> Result<Listed, String> {
    match target {
        Target::Http { upstream, dialer } => over_http(upstream, dialer),
        Target::Child { command, timeout } => over_stdio(command, *timeout),
    }
}

/// `initialize` as a client with the capabilities an agent's client commonly has (roots,
/// sampling, form and URL elicitation): servers offer some tools only to such clients, and a
/// skeleton or a coverage report should name every tool an agent may be offered. The session
/// only lists tools; over stdio a server's requests to it are answered (`server_request_answer`:
/// no roots, a ping, nothing else), so the server is not left waiting on them.
fn initialize_request() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": CLIENT_REVISION,
        "capabilities": {"roots": {"listChanged": false}, "sampling": {}, "elicitation": {"form": {}, "url": {}}},
        "clientInfo": {"name": "warden-gateway", "version": env!("CARGO_PKG_VERSION")},
    }})
}

/// The `result` of a response, or what went wrong.
fn result_of(envelope: Value, method: &str) -> Result<Value, String> {
    if let Some(error) = envelope.get("error") {
        return Err(format!(
            "the server answered {method} with error {} ({})",
            error.get("code").unwrap_or(&Value::Null),
            error.get("message").and_then(Value::as_str).unwrap_or("no message")
        ));
    }
    envelope.get("result").cloned().ok_or_else(|| format!("the {method} answer has no result"))
}

/// Every page of `tools/list` through `lister`, collected.
fn pages(lister: &dyn ListTools) -> Result<Vec<Value>, String> {
    let tools = std::cell::RefCell::new(Vec::new());
    catalog::list_all(lister, &|_, envelope| {
        let result = result_of(envelope.clone(), "tools/list")?;
        let page = result.get("tools").and_then(Value::as_array).ok_or("the tools/list result has no tools array")?;
        tools.borrow_mut().extend(page.iter().cloned());
        Ok(())
    })?;
    Ok(tools.into_inner())
}

fn over_http(upstream: &Upstream, dialer: &Dialer) -> Result<Listed, String> {
    let mut headers: Vec<(String, String)> = vec![
        ("Content-Type".into(), "application/json".into()),
        ("Accept".into(), "application/json, text/event-stream".into()),
        ("Accept-Encoding".into(), "identity".into()),
    ];
    let (answer, answered) = post(upstream, dialer, &headers, &initialize_request(), None)?;
    let result = result_of(answer, "initialize")?;
    let revision = result.get("protocolVersion").and_then(Value::as_str).unwrap_or(CLIENT_REVISION).to_owned();
    if let Some((_, session)) = answered.iter().find(|(k, _)| k.eq_ignore_ascii_case("mcp-session-id")) {
        headers.push(("Mcp-Session-Id".into(), session.clone()));
    }
    headers.push(("MCP-Protocol-Version".into(), revision.clone()));
    let note =
        serde_json::to_vec(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).unwrap_or_default();
    if let Ok(response) = upstream::send(upstream, "POST", &headers, &note, dialer, None) {
        upstream::shut(&response.socket);
    }
    struct Http<'a>(&'a Upstream, &'a Dialer, &'a [(String, String)]);
    impl ListTools for Http<'_> {
        fn page(&self, cursor: Option<&str>) -> Result<Value, String> {
            let (_, message) = catalog::list_request(cursor, None);
            post(self.0, self.1, self.2, &message, None).map(|(envelope, _)| envelope)
        }
    }
    let tools = pages(&Http(upstream, dialer, &headers))?;
    if headers.iter().any(|(k, _)| k == "Mcp-Session-Id") {
        if let Ok(response) = upstream::send(upstream, "DELETE", &headers, &[], dialer, None) {
            upstream::shut(&response.socket);
        }
    }
    Ok(Listed { server: result.get("serverInfo").cloned().unwrap_or(Value::Null), revision, tools })
}

fn over_stdio(command: &[String], timeout: Duration) -> Result<Listed, String> {
    let Some((program, arguments)) = command.split_first() else {
        return Err("give the server's command after --".into());
    };
    // Its own process group, so the stop reaches what it starts too (`npx` runs the server as
    // its own child, which would otherwise outlive it holding the output open).
    let mut child = Command::new(program)
        .args(arguments)
        .process_group(0)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start {program:?}: {e}"))?;
    let (Some(mut input), Some(output)) = (child.stdin.take(), child.stdout.take()) else {
        let _ = child.kill();
        let _ = child.wait();
        return Err("the child's pipes were not created".into());
    };
    let (sender, lines) = mpsc::channel::<Value>();
    let reader = std::thread::spawn(move || {
        let mut output = BufReader::new(output);
        loop {
            let mut line = Vec::new();
            match output.by_ref().take(MAX_ANSWER_BYTES as u64).read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            if let Ok(message) = serde_json::from_slice::<Value>(&line) {
                if sender.send(message).is_err() {
                    return;
                }
            }
        }
    });
    let exchange = |input: &mut std::process::ChildStdin, message: &Value| -> Result<Value, String> {
        let mut line = serde_json::to_vec(message).unwrap_or_default();
        line.push(b'\n');
        input.write_all(&line).and_then(|()| input.flush()).map_err(|e| format!("writing to the server: {e}"))?;
        let Some(id) = message.get("id") else { return Ok(Value::Null) };
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let answer = lines.recv_timeout(left).map_err(|_| {
                format!(
                    "no answer to {} within {} s",
                    message["method"].as_str().unwrap_or("the request"),
                    timeout.as_secs()
                )
            })?;
            // Notifications and requests of the server's own are not this answer; a request is
            // answered, so the server does not wait on it (its timeout is often a minute).
            if answer.get("method").is_none() && answer.get("id") == Some(id) {
                return Ok(answer);
            }
            if let Some(reply) = server_request_answer(&answer) {
                let mut line = serde_json::to_vec(&reply).unwrap_or_default();
                line.push(b'\n');
                input
                    .write_all(&line)
                    .and_then(|()| input.flush())
                    .map_err(|e| format!("writing to the server: {e}"))?;
            }
        }
    };
    let listed = (|| {
        let result = result_of(exchange(&mut input, &initialize_request())?, "initialize")?;
        exchange(&mut input, &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
        struct Child<'a, F: Fn(&mut std::process::ChildStdin, &Value) -> Result<Value, String>>(
            std::cell::RefCell<&'a mut std::process::ChildStdin>,
            &'a F,
        );
        impl<F: Fn(&mut std::process::ChildStdin, &Value) -> Result<Value, String>> ListTools for Child<'_, F> {
            fn page(&self, cursor: Option<&str>) -> Result<Value, String> {
                let (_, message) = catalog::list_request(cursor, None);
                (self.1)(&mut self.0.borrow_mut(), &message)
            }
        }
        let tools = pages(&Child(std::cell::RefCell::new(&mut input), &exchange))?;
        let revision = result.get("protocolVersion").and_then(Value::as_str).unwrap_or(CLIENT_REVISION).to_owned();
        Ok(Listed { server: result.get("serverInfo").cloned().unwrap_or(Value::Null), revision, tools })
    })();
    drop(input);
    stop_child(&mut child, &reader);
    let _ = reader.join();
    listed
}

/// The listing session's answer to a request of the server's own (`None` for anything else):
/// `roots/list` has no roots, `ping` is answered, and any other method is not one this session
/// serves (`-32601`).
fn server_request_answer(message: &Value) -> Option<Value> {
    let id = message.get("id")?;
    let method = message.get("method")?.as_str()?;
    Some(match method {
        "roots/list" => json!({"jsonrpc": "2.0", "id": id, "result": {"roots": []}}),
        "ping" => json!({"jsonrpc": "2.0", "id": id, "result": {}}),
        _ => json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601,
                "message": "the warden tool-listing session serves no requests but roots/list and ping"}}),
    })
}

/// The stdio transport's shutdown: the child's input is closed; a child still running after a
/// second is sent SIGTERM, and after two more SIGKILL, each to its whole process group; then it
/// is reaped. Whatever else of the group still holds the output open (a server `npx` started)
/// gets the same, until `reader` has seen the output end.
fn stop_child(child: &mut std::process::Child, reader: &std::thread::JoinHandle<()>) {
    let exits_within = |child: &mut std::process::Child, wait: Duration| {
        let deadline = std::time::Instant::now() + wait;
        while std::time::Instant::now() < deadline {
            if !matches!(child.try_wait(), Ok(None)) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    };
    let group = rustix::process::Pid::from_child(child);
    let signal = |signal| {
        let _ = rustix::process::kill_process_group(group, signal);
    };
    if !exits_within(child, Duration::from_secs(1)) {
        signal(rustix::process::Signal::TERM);
        if !exits_within(child, Duration::from_secs(2)) {
            signal(rustix::process::Signal::KILL);
        }
    }
    let _ = child.wait();
    let output_ends_within = |wait: Duration| {
        let deadline = std::time::Instant::now() + wait;
        while std::time::Instant::now() < deadline {
            if reader.is_finished() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        reader.is_finished()
    };
    if !output_ends_within(Duration::from_millis(500)) {
        signal(rustix::process::Signal::TERM);
        if !output_ends_within(Duration::from_secs(2)) {
            signal(rustix::process::Signal::KILL);
        }
    }
}
