//! `--stdio`: MCP over stdin/stdout to the client, and the upstream server as a child process
//! over its stdin/stdout, newline-delimited JSON-RPC on both sides. The same interception as
//! over HTTP; everything else passes through line by line. The child's stderr is the
//! gateway's; the child is stopped and reaped when the client goes away.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::answer;
use super::catalog::{self, ListTools};
use super::classify::{Observation, Reply};
use super::intercept::{Call, Engine};
use super::lists;
use super::log;
use super::sampling;
use super::tasks;
use super::wire::{self, Kind};
use crate::exit::Failure;

type Waiters = Arc<Mutex<HashMap<String, Sender<Value>>>>;
/// Relayed requests whose answers are read (`lists`), by id: the method and the cursor.
type Listing = Arc<Mutex<HashMap<String, (String, Option<String>)>>>;
/// Server requests the child sent the client (legacy elicitation, sampling, …) whose answer has
/// not come back yet, by id, each with how long it may be waited for.
type Asks = Arc<Mutex<HashMap<String, Instant>>>;

/// The most bytes of one line read from either side.
const MAX_LINE_BYTES: u64 = 64 * 1024 * 1024;

pub fn run(engine: Arc<Engine>, command: &[String], timeout: Duration) -> Result<(), Failure> {
    let Some((program, arguments)) = command.split_first() else {
        return Err(Failure::usage("--stdio needs the upstream server's command after --"));
    };
    // Its own process group: a Ctrl-C in the terminal reaches the gateway, which lets the calls
    // in flight finish before it stops the child, rather than the child dying mid-call.
    let mut child = Command::new(program)
        .args(arguments)
        .process_group(0)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| Failure::usage(format!("cannot start the upstream {}: {e}", log::printable(program))))?;
    let (Some(child_in), Some(child_out)) = (child.stdin.take(), child.stdout.take()) else {
        stop(&mut child);
        return Err(Failure::internal("the child's pipes were not created"));
    };
    let child_in: Arc<Mutex<Option<ChildStdin>>> = Arc::new(Mutex::new(Some(child_in)));
    let child = Arc::new(Mutex::new(child));
    let in_flight = Arc::new(AtomicUsize::new(0));
    // Set by whichever ends the session first: the client closing stdin, or a signal.
    let ending = Arc::new(AtomicBool::new(false));
    {
        let (engine, child_in, child, in_flight, ending) = (
            Arc::clone(&engine),
            Arc::clone(&child_in),
            Arc::clone(&child),
            Arc::clone(&in_flight),
            Arc::clone(&ending),
        );
        // SIGTERM/SIGINT: no new calls, the calls in flight finish (bounded), the child is
        // stopped and reaped, the store flushed, exit 0. The main thread may be blocked
        // reading stdin, so the watcher ends the process itself.
        let _ = super::on_termination(move |_| {
            if ending.swap(true, Ordering::SeqCst) {
                return;
            }
            engine.stopping.store(true, Ordering::SeqCst);
            super::drain(&engine, || in_flight.load(Ordering::SeqCst));
            close_child(&child_in, &child);
            log::info("stopped");
            std::process::exit(0);
        });
    }
    let client_out = Arc::new(Mutex::new(std::io::stdout()));
    let waiters: Waiters = Arc::new(Mutex::new(HashMap::new()));
    let asks: Asks = Arc::new(Mutex::new(HashMap::new()));
    // Ids of relayed requests whose answers are read and may be rewritten (`lists`: the tool
    // set, icons), with the method and cursor of each.
    let listing: Listing = Arc::new(Mutex::new(HashMap::new()));
    let reader = {
        let (waiters, client_out) = (Arc::clone(&waiters), Arc::clone(&client_out));
        let (listing, engine, asks) = (Arc::clone(&listing), Arc::clone(&engine), Arc::clone(&asks));
        let child_in = Arc::clone(&child_in);
        std::thread::spawn(move || {
            let mut lines = BufReader::new(child_out);
            loop {
                let mut line = Vec::new();
                match lines.by_ref().take(MAX_LINE_BYTES).read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                let parsed: Option<Value> = serde_json::from_slice(&line).ok();
                let response_id = parsed.as_ref().and_then(|message| {
                    let object = message.as_object()?;
                    let is_response = !object.contains_key("method")
                        && (object.contains_key("result") || object.contains_key("error"));
                    is_response.then(|| object.get("id").map(Value::to_string)).flatten()
                });
                // A server request to the client: a human may take a while to answer it (D15).
                let asked = parsed.as_ref().and_then(Value::as_object).and_then(|object| {
                    object.get("method")?;
                    object.get("id").map(Value::to_string)
                });
                // Sampling with tools (gateway.sampling_tools: refuse): the client is never asked;
                // the child gets the refusal as its answer.
                if let Some(message) = parsed.as_ref().filter(|m| m.get("id").is_some()) {
                    if sampling::request_uses_tools(message) && engine.refuses_sampling_tools() {
                        log::warn(
                            "the upstream asked for sampling with tools; not relayed (gateway.sampling_tools: refuse)",
                        );
                        let id = message.get("id").cloned().unwrap_or(Value::Null);
                        let refused = answer::refusal(
                            &id,
                            403,
                            -41019,
                            "warden.sampling_tools_refused",
                            "the gateway does not relay sampling with tools (gateway.sampling_tools: refuse)",
                            json!({"reason": "sampling_tools"}),
                        );
                        let mut line = serde_json::to_vec(&refused.body).unwrap_or_default();
                        line.push(b'\n');
                        write_child(&child_in, &line);
                        continue;
                    }
                }
                if let (Some(id), Ok(mut asks)) = (asked, asks.lock()) {
                    asks.insert(id, Instant::now() + engine.elicitation_timeout());
                }
                let mut parsed = parsed;
                if let (Some(id), Some(message)) = (&response_id, &mut parsed) {
                    if let Some((method, cursor)) = listing.lock().ok().and_then(|mut ids| ids.remove(id)) {
                        if engine.rewrite_answer(&method, cursor.as_deref(), message) {
                            line = serde_json::to_vec(message).unwrap_or(line);
                        }
                    }
                }
                let waiter = response_id.and_then(|id| waiters.lock().ok().and_then(|mut w| w.remove(&id)));
                match (waiter, parsed) {
                    (Some(waiter), Some(message)) => {
                        let _ = waiter.send(message);
                    }
                    _ => {
                        if !line.ends_with(b"\n") {
                            line.push(b'\n');
                        }
                        write_line(&client_out, &line);
                    }
                }
            }
            // The child is gone: every waiting call learns it (its sender is dropped).
            if let Ok(mut waiting) = waiters.lock() {
                waiting.clear();
            }
        })
    };
    poll_tasks(&engine, &child_in, &waiters, timeout);
    let mut calls = Vec::new();
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    loop {
        let mut line = Vec::new();
        match input.by_ref().take(MAX_LINE_BYTES).read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        if line.trim_ascii().is_empty() || ending.load(Ordering::SeqCst) {
            // A stopping gateway takes nothing new.
            continue;
        }
        match wire::parse_post_with(&[], line.trim_ascii(), engine.unknown_methods(), &|_| None) {
            Err(answer) => {
                if let Some(body) = answer.body {
                    write_value(&client_out, &body);
                }
            }
            Ok(mut inbound) => match inbound.kind.clone() {
                Kind::Relay => {
                    if let Some(answer) = sampling::relayed_tool_use_refusal(&inbound.message) {
                        write_value(&client_out, &answer.body);
                        continue;
                    }
                    if inbound.message.get("method").is_none() {
                        if let (Some(id), Ok(mut asks)) = (inbound.message.get("id"), asks.lock()) {
                            asks.remove(&id.to_string());
                        }
                        // A sampling answer that uses tools: the child gets a refusal instead.
                        let uses = sampling::response_tool_uses(&inbound.message);
                        if !uses.is_empty() {
                            let id = inbound.message.get("id").cloned().unwrap_or(Value::Null);
                            inbound.message = sampling::legacy_tool_use_refusal(&id, &uses).body;
                        }
                    }
                    let method = inbound
                        .message
                        .get("method")
                        .and_then(Value::as_str)
                        .filter(|m| lists::rewritten(m) || tasks::observed(m));
                    if let (Some(method), Some(id), Ok(mut ids)) = (method, inbound.message.get("id"), listing.lock()) {
                        let read = tasks::read_param(method, &inbound.message).map(str::to_owned);
                        ids.insert(id.to_string(), (method.to_owned(), read));
                    }
                    // What was checked is what is sent: the parsed message, re-serialised (as over
                    // HTTP), so a key the parser dropped (a second "method") never reaches an
                    // upstream that might read the other one.
                    let mut line = serde_json::to_vec(&inbound.message).unwrap_or_default();
                    line.push(b'\n');
                    if !write_child(&child_in, &line) {
                        log::warn("the upstream process is gone; a message to it was dropped");
                    }
                }
                Kind::ToolCall { id, tool } => {
                    // stdio has no MCP-Protocol-Version header: a 2026-07-28 request names its
                    // revision in params._meta instead.
                    if let Some(revision) = stdio_revision(&inbound.message) {
                        inbound.revision = revision;
                    }
                    let (engine, child_in, client_out, waiters) =
                        (Arc::clone(&engine), Arc::clone(&child_in), Arc::clone(&client_out), Arc::clone(&waiters));
                    let asks = Arc::clone(&asks);
                    let raw = line.trim_ascii().to_vec();
                    let in_flight = Arc::clone(&in_flight);
                    in_flight.fetch_add(1, Ordering::SeqCst);
                    calls.push(std::thread::spawn(move || {
                        let meta = inbound.message.get("params").and_then(|p| p.get("_meta"));
                        let revision = meta.and_then(|m| m.get(REVISION_KEY)).map(|r| json!({REVISION_KEY: r}));
                        let lister =
                            Lister { child_in: &child_in, waiters: &waiters, meta: revision.as_ref(), timeout };
                        let call = Call {
                            id: &id,
                            tool: &tool,
                            message: &inbound.message,
                            revision: &inbound.revision,
                            headers: &[],
                            raw: &raw,
                            lister: &lister,
                        };
                        let answer = intercepted(&engine, &call, &child_in, (&waiters, &asks), timeout);
                        write_value(&client_out, &answer);
                        in_flight.fetch_sub(1, Ordering::SeqCst);
                    }));
                }
            },
        }
    }
    if ending.swap(true, Ordering::SeqCst) {
        // A signal is already ending the session; its watcher exits the process.
        loop {
            std::thread::park();
        }
    }
    // The client went away: let the calls in flight get their answers (each bounded by the
    // timeout; none waits for a human any more), then close the child's input, give it a
    // moment, and stop it.
    engine.stopping.store(true, Ordering::SeqCst);
    for call in calls {
        let _ = call.join();
    }
    close_child(&child_in, &child);
    let _ = reader.join();
    Ok(())
}

/// How long a child whose input was closed is given to exit.
const CHILD_GRACE: Duration = Duration::from_secs(5);
/// At most this much of it is left once SIGTERM or SIGINT arrives: a client that closes the
/// gateway's input and then signals it (the MCP SDKs give 2 s before SIGTERM and 2 s more
/// before SIGKILL) must not find the gateway still waiting, or its child outlives both.
const SIGNALED_GRACE: Duration = Duration::from_secs(1);

/// Close the child's input, give it [`CHILD_GRACE`] to exit ([`SIGNALED_GRACE`] once a
/// termination signal arrived), stop it if it has not, and reap it.
fn close_child(child_in: &Mutex<Option<ChildStdin>>, child: &Mutex<Child>) {
    if let Ok(mut slot) = child_in.lock() {
        slot.take();
    }
    let mut deadline = Instant::now() + CHILD_GRACE;
    let mut hurried = false;
    while Instant::now() < deadline {
        let exited = child.lock().map_or(true, |mut child| matches!(child.try_wait(), Ok(Some(_))));
        if exited {
            break;
        }
        if !hurried && warden::os::signals::termination().is_some() {
            hurried = true;
            deadline = deadline.min(Instant::now() + SIGNALED_GRACE);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    if let Ok(mut child) = child.lock() {
        stop(&mut child);
    }
}

/// The gateway's own task polls (`tasks::spawn_poller`) over stdio: each a line to the child,
/// answered through the reader like a call's (never relayed to the client); a 2026-07-28 poll
/// names its revision in `params._meta`, as a client's request does over stdio.
fn poll_tasks(engine: &Arc<Engine>, child_in: &Arc<Mutex<Option<ChildStdin>>>, waiters: &Waiters, timeout: Duration) {
    let (child_in, waiters) = (Arc::clone(child_in), Arc::clone(waiters));
    tasks::spawn_poller(engine, move |due, id| {
        let mut message = json!({"jsonrpc": "2.0", "id": id, "method": due.method, "params": {"taskId": due.task_id}});
        if let Some(revision) = due.revision.as_deref().filter(|r| *r == wire::REVISION_2026) {
            message["params"]["_meta"] = json!({REVISION_KEY: revision});
        }
        let (sender, receiver) = mpsc::channel();
        let key = id.to_string();
        waiters.lock().map_err(|_| "the waiter table is unavailable")?.insert(key.clone(), sender);
        let mut line = serde_json::to_vec(&message).unwrap_or_default();
        line.push(b'\n');
        let answer = if write_child(&child_in, &line) {
            receiver.recv_timeout(timeout).map_err(|error| match error {
                RecvTimeoutError::Timeout => format!("no answer within {} s", timeout.as_secs()),
                RecvTimeoutError::Disconnected => "the upstream process exited".to_owned(),
            })
        } else {
            Err("the upstream process is not running".to_owned())
        };
        if let Ok(mut waiting) = waiters.lock() {
            waiting.remove(&key);
        }
        answer
    });
}

/// Where a stdio request names its revision, in `params._meta`.
const REVISION_KEY: &str = "io.modelcontextprotocol/protocolVersion";

/// The gateway's own `tools/list` to the child, answered through the reader like a call's.
struct Lister<'a> {
    child_in: &'a Mutex<Option<ChildStdin>>,
    waiters: &'a Waiters,
    /// The call's revision, named as the call named it.
    meta: Option<&'a Value>,
    timeout: Duration,
}

impl ListTools for Lister<'_> {
    fn page(&self, cursor: Option<&str>) -> Result<Value, String> {
        let (id, message) = catalog::list_request(cursor, self.meta);
        let key = id.to_string();
        let (sender, receiver) = mpsc::channel();
        self.waiters.lock().map_err(|_| "the waiter table is unavailable")?.insert(key.clone(), sender);
        let mut line = serde_json::to_vec(&message).unwrap_or_default();
        line.push(b'\n');
        let answer = if write_child(self.child_in, &line) {
            receiver.recv_timeout(self.timeout).map_err(|error| match error {
                RecvTimeoutError::Timeout => format!("no tools/list answer within {} s", self.timeout.as_secs()),
                RecvTimeoutError::Disconnected => "the upstream process exited".to_owned(),
            })
        } else {
            Err("the upstream process is not running".to_owned())
        };
        if let Ok(mut waiting) = self.waiters.lock() {
            waiting.remove(&key);
        }
        answer
    }
}

/// The revision a request names in `params._meta["io.modelcontextprotocol/protocolVersion"]`,
/// when it is one this gateway speaks.
fn stdio_revision(message: &Value) -> Option<String> {
    let named = message.get("params")?.get("_meta")?.get(REVISION_KEY)?.as_str()?;
    wire::ACCEPTED_REVISIONS.contains(&named).then(|| named.to_owned())
}

/// Stop the child and whatever it started (its process group: `npx` runs the server as its own
/// child), and reap it.
fn stop(child: &mut Child) {
    // The group outlives its leader while a member lives, so its id is not reused before this.
    let group = rustix::process::Pid::from_child(child);
    let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
    let _ = child.kill();
    let _ = child.wait();
}

fn intercepted(
    engine: &Engine,
    call: &Call<'_>,
    child_in: &Mutex<Option<ChildStdin>>,
    (waiters, asks): (&Waiters, &Asks),
    timeout: Duration,
) -> Value {
    // The client's presence is the session's: stdin closed (or a signal) ends every wait.
    let present = || !engine.stopping.load(Ordering::SeqCst);
    let mut admitted = match engine.admit(call, &present) {
        Ok(admitted) => admitted,
        Err(answer) => return answer.body,
    };
    let key = call.id.to_string();
    let (sender, receiver) = mpsc::channel();
    let registered = match waiters.lock() {
        Ok(mut waiting) if !waiting.contains_key(&key) => {
            waiting.insert(key.clone(), sender);
            true
        }
        _ => false,
    };
    if !registered {
        // Another call with this id is in flight: its answer could not be told apart. Nothing
        // was sent, so the reservation is released as not executed.
        let finished = engine.finish(
            admitted,
            &Observation::NeverConnected("the JSON-RPC id was already in flight".into()),
            call.revision,
        );
        let mut answer = answer::refusal(
            call.id,
            400,
            -32600,
            "warden.id_in_use",
            "another tools/call with this id is still in flight; use a fresh id per request",
            json!({}),
        );
        answer::with_meta(&mut answer.body, &finished.meta);
        return answer.body;
    }
    let mut line = serde_json::to_vec(&admitted.forward).unwrap_or_default();
    line.push(b'\n');
    let observation = if !write_child(child_in, &line) {
        // Nothing reached the child: its input is closed.
        Observation::NeverConnected("the upstream process is not running".into())
    } else {
        // The answer is awaited `--upstream-timeout`, except while the client owes the child an
        // answer to a server request (a human at an elicitation): then until that request's
        // `--elicitation-timeout` has passed (D15), the reservation's lease extended to match.
        // Over stdio a server request names no call, so it stretches every call in flight.
        let mut deadline = Instant::now() + timeout;
        loop {
            match receiver.recv_timeout(timeout.min(Duration::from_millis(250))) {
                Ok(message) => break Observation::Answered { status: 200, challenge: false, body: Some(message) },
                Err(RecvTimeoutError::Timeout) => {
                    let now = Instant::now();
                    let owed = asks.lock().ok().and_then(|mut asks| {
                        asks.retain(|_, until| *until > now);
                        asks.values().max().copied()
                    });
                    if let Some(until) = owed {
                        deadline = deadline.max(until);
                        // Once per request: the new lease covers it whole.
                        let needed = engine.lease_until(until);
                        if admitted.permit.lease_expires_at().is_some_and(|current| current < needed) {
                            if let Err(error) = admitted.permit.extend_lease(engine.elicitation_lease()) {
                                log::warn(&format!("extending a waiting call's lease failed: {error}"));
                            }
                        }
                    }
                    if now >= deadline {
                        break Observation::Broken(format!("timeout after {} s", timeout.as_secs()));
                    }
                }
                Err(RecvTimeoutError::Disconnected) => {
                    break Observation::Broken("the upstream process exited mid-call".into())
                }
            }
        }
    };
    if let Ok(mut waiting) = waiters.lock() {
        waiting.remove(&key);
    }
    let finished = engine.finish(admitted, &observation, call.revision);
    match (&finished.reply, observation) {
        (Reply::Relay, Observation::Answered { body: Some(mut envelope), .. }) => {
            finished.relayed(&mut envelope);
            envelope
        }
        _ => answer::synthesised(call.id, &finished).body,
    }
}

/// Write one line to the child; false when its input is closed (nothing was written).
fn write_child(child_in: &Mutex<Option<ChildStdin>>, line: &[u8]) -> bool {
    let Ok(mut slot) = child_in.lock() else { return false };
    let Some(pipe) = slot.as_mut() else { return false };
    pipe.write_all(line).and_then(|()| pipe.flush()).is_ok()
}

fn write_value(out: &Mutex<std::io::Stdout>, value: &Value) {
    let mut line = serde_json::to_vec(value).unwrap_or_default();
    line.push(b'\n');
    write_line(out, &line);
}

fn write_line(out: &Mutex<std::io::Stdout>, line: &[u8]) {
    if let Ok(out) = out.lock() {
        let mut out = out.lock();
        let _ = out.write_all(line).and_then(|()| out.flush());
    }
}
