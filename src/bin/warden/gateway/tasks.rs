//! Tasks at most once (issue 31 item 1): a `tools/call` the upstream answers with a task handle
//! (the tasks extension, SEP-2663 `resultType: "task"`, or the 2025-11-25 experimental
//! `{task: {…}}`) has not finished. Its effect stays EXECUTING under the task id — an
//! `EXECUTION_SUSPENDED` event `{reason: "task", task_id}` in the store, the lease extended to
//! the task's window — and the outcome is recorded once, from the task's terminal state as a
//! relayed `tasks/get` or `tasks/result` answer, or the gateway's own poll (over HTTP or
//! stdio), shows it, per the extension's table:
//!
//! | seen                                   | effect                              |
//! |----------------------------------------|-------------------------------------|
//! | `completed` (a result, `isError` too)  | COMMITTED, the result's digest bound |
//! | `failed` (a JSON-RPC error)            | AMBIGUOUS: "during execution"       |
//! | `cancelled`                            | AMBIGUOUS: cancellation is cooperative |
//! | `-32602` to `tasks/get` (lost handle)  | AMBIGUOUS                           |
//! | still open at the window's end         | AMBIGUOUS                           |
//!
//! The extension never says of a `failed` task that nothing ran (a server may even mark a task
//! failed once its TTL elapsed), so no task outcome is FAILED — except under the entry's own
//! `mcp.not_executed_on_error` claim for a completed `isError` result.
//!
//! The permit is parked (`Permit::park`): the suspension event keeps everything its receipt
//! needs. A stopping gateway leaves its open tasks EXECUTING; the next one on the store adopts
//! them (`resume_tasks`, `Kernel::adopt`) and settles each through its adopted permit, so the
//! outcome writes the receipt chosen at the grant, with the result's digest bound, as the
//! gateway that held it would have. A task an earlier gateway suspended without parking is
//! settled through `Kernel::complete`: its state and event, and no receipt (logged).

use serde_json::{json, Value};

use warden::kernel::Permit;

use super::answer::with_meta;
use super::classify::Effect;
use super::intercept::{digest, micros, Engine};
use super::log;
use super::telemetry::InFlight;

/// The relayed requests whose answers are read for a held task.
pub const METHODS: [&str; 3] = ["tasks/get", "tasks/result", "tasks/cancel"];

/// The most tasks one gateway holds at once; a handle over the bound is recorded AMBIGUOUS.
pub const MAX_HELD: usize = 4096;

/// How many settled tasks are remembered (a later `tasks/get` of one still carries its receipt).
const SETTLED_KEPT: usize = 4096;

/// The JSON-RPC code a server answers `tasks/get` with for a task it does not know (SEP-2663:
/// "Invalid or nonexistent taskId", also an expired and purged one).
const UNKNOWN_TASK: i64 = -32602;

/// Whether answers to `method` are read for held tasks.
pub fn observed(method: &str) -> bool {
    METHODS.contains(&method)
}

/// The request parameter an answer is read against: `taskId` for the tasks methods, `cursor`
/// for the lists (`lists::REWRITTEN`).
pub fn read_param<'a>(method: &str, message: &'a Value) -> Option<&'a str> {
    let name = if observed(method) { "taskId" } else { "cursor" };
    message.get("params").and_then(|p| p.get(name)).and_then(Value::as_str)
}

/// A task handle in a `tools/call` answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handle {
    pub task_id: String,
    pub status: String,
    /// `ttlMs` (SEP-2663) or `ttl` (2025-11-25); `None` when null or absent.
    pub ttl_ms: Option<u64>,
    /// `pollIntervalMs` (SEP-2663) or `pollInterval` (2025-11-25).
    pub poll_interval_ms: Option<u64>,
}

/// The task handle a `tools/call` response envelope carries, if it is one: SEP-2663's
/// `CreateTaskResult` (`resultType: "task"`, `taskId`, `status`) or 2025-11-25's
/// `{task: {taskId, status}}` (a result with no `content`).
pub fn handle_of(envelope: &Value) -> Option<Handle> {
    let result = envelope.get("result")?.as_object()?;
    let (task, ttl, interval) = match result.get("resultType").and_then(Value::as_str) {
        Some("task") => (result, "ttlMs", "pollIntervalMs"),
        None if !result.contains_key("content") => (result.get("task")?.as_object()?, "ttl", "pollInterval"),
        _ => return None,
    };
    let task_id = task.get("taskId")?.as_str().filter(|id| !id.is_empty() && id.len() <= 256)?;
    let status = task.get("status")?.as_str()?;
    Some(Handle {
        task_id: task_id.to_owned(),
        status: status.to_owned(),
        ttl_ms: task.get(ttl).and_then(Value::as_u64).or_else(|| task.get("ttlMs").and_then(Value::as_u64)),
        poll_interval_ms: task.get(interval).and_then(Value::as_u64),
    })
}

/// What one answer to a tasks method shows of the task.
#[derive(Debug, Clone, PartialEq)]
pub enum Seen {
    /// Still open (`working`, `input_required`, a status not known, an acknowledged cancel).
    Open {
        ttl_ms: Option<u64>,
    },
    /// `completed` with its result (the underlying `CallToolResult`).
    Completed(Value),
    /// `completed` on a `tasks/get` that does not inline the result (2025-11-25): the result
    /// comes with `tasks/result`.
    CompletedElsewhere,
    /// `failed`, with its JSON-RPC error.
    Failed(Value),
    Cancelled,
    /// The upstream does not know the task.
    Lost(String),
    /// Not an answer that says anything of the task (an error other than "unknown task").
    Nothing,
}

/// What the answer to `method` (a response envelope) shows of its task.
pub fn seen(method: &str, envelope: &Value) -> Seen {
    let result = envelope.get("result").and_then(Value::as_object);
    let error = envelope.get("error").and_then(Value::as_object);
    let code = error.and_then(|e| e.get("code")).and_then(Value::as_i64);
    match method {
        "tasks/get" => {
            if let Some(result) = result {
                let ttl_ms = result.get("ttlMs").or_else(|| result.get("ttl")).and_then(Value::as_u64);
                return match result.get("status").and_then(Value::as_str) {
                    Some("completed") => match result.get("result").filter(|r| r.is_object()) {
                        Some(inner) => Seen::Completed(inner.clone()),
                        None => Seen::CompletedElsewhere,
                    },
                    Some("failed") => Seen::Failed(result.get("error").cloned().unwrap_or(Value::Null)),
                    Some("cancelled") => Seen::Cancelled,
                    _ => Seen::Open { ttl_ms },
                };
            }
            match code {
                Some(UNKNOWN_TASK) => Seen::Lost(format!("tasks/get answered {UNKNOWN_TASK}")),
                _ => Seen::Nothing,
            }
        }
        // 2025-11-25: exactly what the underlying request would have returned, once terminal.
        "tasks/result" => match (result, error) {
            (Some(result), _) => Seen::Completed(Value::Object(result.clone())),
            (None, Some(error)) => Seen::Failed(Value::Object(error.clone())),
            _ => Seen::Nothing,
        },
        _ => Seen::Nothing,
    }
}

/// The effect a terminal observation records (`None`: the task is still open).
pub fn outcome(seen: &Seen, not_executed_on_error: bool) -> Option<Effect> {
    match seen {
        Seen::Completed(result) => {
            let is_error = result.get("isError") == Some(&Value::Bool(true));
            Some(if is_error && not_executed_on_error {
                Effect::Failed("the task completed with isError (not_executed_on_error)".into())
            } else {
                Effect::Committed
            })
        }
        Seen::Failed(error) => {
            let code = error.get("code").and_then(Value::as_i64).map_or("no code".into(), |c| c.to_string());
            Some(Effect::Ambiguous(format!(
                "the task failed (error {code}): a JSON-RPC error during execution does not prove that nothing ran"
            )))
        }
        Seen::Cancelled => Some(Effect::Ambiguous(
            "the task was cancelled: cancellation is cooperative, and does not prove that nothing ran".into(),
        )),
        Seen::Lost(what) => Some(Effect::Ambiguous(format!("the upstream no longer knows the task ({what})"))),
        Seen::Open { .. } | Seen::CompletedElsewhere | Seen::Nothing => None,
    }
}

/// A `tools/call` answered with a task handle: its permit, held until the task ends.
pub struct HeldTask {
    pub permit: Permit,
    pub tool: String,
    pub decision: String,
    pub not_executed_on_error: bool,
    /// When the gateway began deciding the call (its log line's latency).
    pub started: std::time::Instant,
    /// When the task's window ends (then AMBIGUOUS); moved on each sight of the task alive.
    pub deadline: std::time::Instant,
    /// The window: `ttlMs`, at most `--task-timeout`.
    pub window: std::time::Duration,
    /// A `tasks/get` said `completed` without the result (2025-11-25): the window's end
    /// records it committed, with no digest, if `tasks/result` never shows it.
    pub completed_seen: bool,
    pub flight: Option<InFlight>,
    pub poll: Polling,
}

/// How the gateway polls an open task itself (`http::poll_tasks`, `stdio::poll_tasks`): in the session
/// and revision of the call that created it, every `pollIntervalMs` (1 to 30 s).
pub struct Polling {
    pub session: Option<String>,
    pub revision: Option<String>,
    pub interval: std::time::Duration,
    pub next: std::time::Instant,
    /// A failed poll was logged (once per task).
    pub warned: bool,
}

impl Polling {
    pub fn new(session: Option<String>, revision: Option<&str>, interval_ms: Option<u64>) -> Polling {
        let interval = std::time::Duration::from_millis(interval_ms.unwrap_or(5_000))
            .clamp(POLL_EVERY, std::time::Duration::from_secs(30));
        Polling {
            session,
            revision: revision.map(str::to_owned),
            interval,
            next: std::time::Instant::now() + interval,
            warned: false,
        }
    }

    /// Due now: the next poll is moved on by the interval.
    fn due(&mut self, now: std::time::Instant) -> bool {
        if self.next > now {
            return false;
        }
        self.next = now + self.interval;
        true
    }
}

/// One poll the gateway sends: `tasks/get`, or `tasks/result` once a `tasks/get` said
/// `completed` without the result (2025-11-25).
pub struct Due {
    pub task_id: String,
    pub method: &'static str,
    pub session: Option<String>,
    pub revision: Option<String>,
}

/// Poll every open task (held, and adopted after a restart) with the gateway's own requests,
/// for as long as the gateway runs: a round every [`POLL_EVERY`], at most [`MAX_POLLED`] polls
/// a round (`Engine::due_polls`: `tasks/get`, or `tasks/result` for a 2025 task seen
/// completed), each with an id of the gateway's own (`warden-task-N`). `exchange` sends one
/// poll over the gateway's transport and returns the answer's envelope, which is read as a
/// relayed answer is; a failed one is logged once per task.
pub fn spawn_poller(
    engine: &std::sync::Arc<Engine>,
    exchange: impl Fn(&Due, Value) -> Result<Value, String> + Send + 'static,
) {
    engine.polls_tasks.store(true, std::sync::atomic::Ordering::SeqCst);
    let engine = std::sync::Arc::downgrade(engine);
    let _ = std::thread::Builder::new().name("gateway-task-poller".into()).spawn(move || {
        let mut next = 0u64;
        loop {
            std::thread::sleep(POLL_EVERY);
            let Some(engine) = engine.upgrade() else { return };
            if engine.stopping.load(std::sync::atomic::Ordering::SeqCst) {
                return;
            }
            for due in engine.due_polls() {
                next += 1;
                match exchange(&due, Value::String(format!("warden-task-{next}"))) {
                    Ok(mut envelope) => {
                        engine.observe_task_as(due.method, Some(&due.task_id), &mut envelope, true);
                    }
                    Err(what) => engine.poll_failed(&due.task_id, &what),
                }
            }
        }
    });
}

/// The window of a task: its `ttlMs`, at most `cap`, at least a second.
pub fn window(ttl_ms: Option<u64>, cap: std::time::Duration) -> std::time::Duration {
    ttl_ms.map_or(cap, |ms| std::time::Duration::from_millis(ms).min(cap)).max(std::time::Duration::from_secs(1))
}

/// A task an earlier gateway process held on this store, found at startup (`resume_tasks`):
/// its effect is still EXECUTING under that process's attempt and lease.
pub struct Adopted {
    /// The permit adopted from the record the earlier process parked (`Kernel::adopt`); `None`
    /// when it suspended the task without parking (an older gateway), so the outcome goes
    /// through the kernel's permit-less surface (`Kernel::complete`) and no receipt is written.
    pub permit: Option<Permit>,
    pub effect_key: String,
    pub action_id: String,
    pub attempt: u32,
    pub action: String,
    pub deadline: std::time::Instant,
    pub window: std::time::Duration,
    pub completed_seen: bool,
    pub poll: Polling,
}

/// The held, adopted and settled tasks, by task id.
#[derive(Default)]
pub struct Tasks {
    held: std::collections::HashMap<String, HeldTask>,
    adopted: std::collections::HashMap<String, Adopted>,
    settled: std::collections::VecDeque<(String, Value)>,
}

/// The most events read at startup looking for the tasks of effects still EXECUTING.
const MAX_EVENTS_SCANNED: u64 = 10_000_000;

/// The most tasks polled in one round, and how often a round runs.
pub const MAX_POLLED: usize = 64;
pub const POLL_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

impl Engine {
    /// Hold the call under the task `handle`: `EXECUTION_SUSPENDED {reason: "task", task_id}`
    /// and the lease over the task's window, in one write, the permit parked in it when it
    /// holds a lease (so a later gateway can adopt it). The receipt summary the handle is
    /// relayed with, or (the call back) why it could not be held.
    pub fn hold_task(&self, mut held: HeldTask, handle: &Handle) -> Result<Value, (Box<HeldTask>, String)> {
        let Ok(mut tasks) = self.tasks.lock() else {
            return Err((Box::new(held), "the held tasks are unreadable".into()));
        };
        if tasks.held.contains_key(&handle.task_id) || tasks.adopted.contains_key(&handle.task_id) {
            return Err((Box::new(held), "the upstream answered with the task id of a task already held".into()));
        }
        if tasks.held.len() >= MAX_HELD {
            return Err((Box::new(held), format!("the gateway already holds {MAX_HELD} open tasks")));
        }
        let until = self.warden.kernel().now().saturating_add(micros(held.window));
        let data = json!({
            "reason": "task",
            "held": true,
            "task_id": handle.task_id,
            "status": handle.status,
            "ttl_ms": handle.ttl_ms,
            "attempt": held.permit.attempt(),
        });
        let written = match held.permit.lease_expires_at() {
            Some(_) => held.permit.park(Some(until), &data),
            // No lease, so nothing another process could adopt (no effect key, observe mode).
            None => held.permit.suspend(Some(until), &data),
        };
        if let Err(error) = written {
            return Err((Box::new(held), format!("the task could not be recorded: {error}")));
        }
        let meta = json!({
            "action_id": held.permit.action().action_id,
            "receipt_id": Value::Null,
            "effect_key": held.permit.effect_key(),
            "result": "task",
            "task_id": handle.task_id,
            "attempt": held.permit.attempt(),
        });
        tasks.held.insert(handle.task_id.clone(), held);
        Ok(meta)
    }

    /// A relayed answer to a tasks method (`method`, for the task `task_id`) on its way to the
    /// client: a terminal state records the held task's outcome and the answer carries the
    /// receipt summary; an open one moves its window. Whether the answer changed.
    pub fn observe_task(&self, method: &str, task_id: Option<&str>, envelope: &mut Value) -> bool {
        self.observe_task_as(method, task_id, envelope, false)
    }

    /// `observe_task`, saying whether the answer is to the gateway's own poll (`own_poll`). A
    /// lost handle (`-32602`) in a relayed answer is not believed while the gateway polls
    /// (over HTTP): a client in another session, or another principal, may be told so of a task
    /// that lives. Its own poll, in the call's session, is sent at once and decides.
    pub fn observe_task_as(&self, method: &str, task_id: Option<&str>, envelope: &mut Value, own_poll: bool) -> bool {
        let Some(task_id) = task_id else { return false };
        let seen = seen(method, envelope);
        let Ok(mut tasks) = self.tasks.lock() else { return false };
        if matches!(seen, Seen::Lost(_)) && !own_poll && self.polls_tasks.load(std::sync::atomic::Ordering::SeqCst) {
            let Tasks { held, adopted, .. } = &mut *tasks;
            let poll =
                held.get_mut(task_id).map(|t| &mut t.poll).or_else(|| adopted.get_mut(task_id).map(|t| &mut t.poll));
            if let Some(poll) = poll {
                poll.next = std::time::Instant::now();
                return false;
            }
        }
        if tasks.adopted.contains_key(task_id) {
            let meta = self.observe_adopted(&mut tasks, task_id, &seen);
            drop(tasks);
            return meta.is_some_and(|meta| put_meta(envelope, &meta));
        }
        let Some(held) = tasks.held.get_mut(task_id) else {
            // Settled already: the answer still names its receipt.
            let meta = tasks.settled.iter().rev().find(|(id, _)| id == task_id).map(|(_, meta)| meta.clone());
            drop(tasks);
            return meta.is_some_and(|meta| put_meta(envelope, &meta));
        };
        if let Seen::Open { ttl_ms } = &seen {
            let window = match ttl_ms {
                Some(_) => window(*ttl_ms, self.task_timeout),
                None => held.window,
            };
            let until = self.warden.kernel().now().saturating_add(micros(window));
            let extended = match held.permit.effect_key() {
                Some(_) => held.permit.extend_lease(until),
                None => Ok(()),
            };
            match extended {
                Ok(()) => {
                    held.window = window;
                    held.deadline = held.deadline.max(std::time::Instant::now() + window);
                }
                Err(error) => log::warn(&format!("extending the lease of task {task_id} failed: {error}")),
            }
        }
        if seen == Seen::CompletedElsewhere {
            held.completed_seen = true;
        }
        let Some(effect) = outcome(&seen, held.not_executed_on_error) else { return false };
        let Some(held) = tasks.held.remove(task_id) else { return false };
        let result = match &seen {
            Seen::Completed(result) => Some(result),
            _ => None,
        };
        let meta = self.settle_task(task_id, held, &effect, result);
        remember(&mut tasks, task_id, &meta);
        drop(tasks);
        put_meta(envelope, &meta)
    }

    /// Record a held task's outcome: its receipt, the result's digest bound to it when there
    /// is one. The receipt summary.
    fn settle_task(&self, task_id: &str, held: HeldTask, effect: &Effect, result: Option<&Value>) -> Value {
        let HeldTask { permit, tool, decision, flight, started, .. } = held;
        let meta = settle_permit(task_id, permit, effect, result);
        self.task_settled(&tool, &decision, &meta, started, flight);
        meta
    }

    /// Record every held task whose window ended AMBIGUOUS (or, when a `tasks/get` said it
    /// completed and `tasks/result` never came, COMMITTED without a digest).
    pub fn sweep_tasks(&self) {
        let now = std::time::Instant::now();
        let Ok(mut tasks) = self.tasks.lock() else { return };
        let ended: Vec<String> =
            tasks.held.iter().filter(|(_, held)| held.deadline < now).map(|(id, _)| id.clone()).collect();
        for task_id in ended {
            let Some(held) = tasks.held.remove(&task_id) else { continue };
            let effect = if held.completed_seen {
                Effect::Committed
            } else {
                Effect::Ambiguous(format!(
                    "the task was not seen to end within its window ({} s: its ttlMs, at most --task-timeout)",
                    held.window.as_secs()
                ))
            };
            let meta = self.settle_task(&task_id, held, &effect, None);
            remember(&mut tasks, &task_id, &meta);
        }
        let ended: Vec<String> =
            tasks.adopted.iter().filter(|(_, task)| task.deadline < now).map(|(id, _)| id.clone()).collect();
        for task_id in ended {
            let Some(task) = tasks.adopted.remove(&task_id) else { continue };
            let effect = if task.completed_seen {
                Effect::Committed
            } else {
                Effect::Ambiguous(format!(
                    "the task (resumed after a restart) was not seen to end within its window ({} s)",
                    task.window.as_secs()
                ))
            };
            let meta = self.settle_adopted(&task_id, task, &effect, None);
            remember(&mut tasks, &task_id, &meta);
        }
    }

    /// The gateway is stopping: every held task that holds a lease is left EXECUTING under it,
    /// for the next gateway process on this store to resume (`resume_tasks`); its lease
    /// lapsing, if none comes, turns it AMBIGUOUS at the next claim. One that holds none (no
    /// effect key, or observe mode) cannot be found again: it is recorded AMBIGUOUS now. How
    /// many were left open.
    pub fn leave_tasks_open(&self) -> usize {
        let Ok(mut tasks) = self.tasks.lock() else { return 0 };
        let held: Vec<(String, HeldTask)> = tasks.held.drain().collect();
        let adopted: Vec<Adopted> = tasks.adopted.drain().map(|(_, task)| task).collect();
        let mut count = adopted.len();
        // An adopted permit dropped would record AMBIGUOUS; the task lives on, so it is left as
        // the store has it, for the next gateway to adopt again.
        adopted.into_iter().filter_map(|task| task.permit).for_each(std::mem::forget);
        for (task_id, held) in held {
            if held.permit.effect_key().is_none() || held.permit.lease_expires_at().is_none() {
                let effect = Effect::Ambiguous(
                    "the gateway stopped while the task was open, and a call that holds no lease cannot be resumed"
                        .into(),
                );
                let meta = self.settle_task(&task_id, held, &effect, None);
                remember(&mut tasks, &task_id, &meta);
                continue;
            }
            count += 1;
            self.end_flight(held.flight);
            // A permit dropped without an outcome records AMBIGUOUS; the task is not over, so
            // no outcome is written at all: the effect stays as the store has it.
            std::mem::forget(held.permit);
        }
        count
    }

    /// At startup: the tasks an earlier gateway process left open on this store — effects of
    /// this alias still EXECUTING under a live lease whose attempt's `EXECUTION_SUSPENDED`
    /// names a task — are adopted: polled (`adopted_to_poll`), and settled by a relayed answer
    /// or the end of their lease. At most `MAX_HELD` effects and `MAX_EVENTS_SCANNED` events
    /// are read. How many were adopted.
    pub fn resume_tasks(&self) -> usize {
        let kernel = self.warden.kernel();
        let prefix = format!("mcp.{}.", self.alias);
        let now = kernel.now();
        let executing = match kernel.effects(Some(warden::EffectState::Executing), MAX_HELD) {
            Ok(records) => records,
            Err(error) => {
                log::warn(&format!("the open tasks could not be read from the store: {error}"));
                return 0;
            }
        };
        let mut open: std::collections::HashMap<String, warden::EffectRecord> = executing
            .into_iter()
            .filter(|r| r.action_name.starts_with(&prefix) && r.lease_is_live(now))
            .map(|r| (r.action_id.clone(), r))
            .collect();
        if open.is_empty() {
            return 0;
        }
        let mut found = Vec::new();
        let mut after = 0;
        while after < MAX_EVENTS_SCANNED && !open.is_empty() {
            let page = match kernel.events(after, 1000) {
                Ok(page) => page,
                Err(error) => {
                    log::warn(&format!("the open tasks could not be read from the store: {error}"));
                    break;
                }
            };
            let Some(last) = page.last() else { break };
            after = last.event_id;
            for event in page {
                if event.kind != warden::event::EventKind::EXECUTION_SUSPENDED {
                    continue;
                }
                let Some(action_id) = event.action_id.as_deref() else { continue };
                let Ok(data) = serde_json::from_str::<Value>(&event.data) else { continue };
                let task_id = data.get("task_id").and_then(Value::as_str).filter(|_| data["reason"] == "task");
                let attempt = data.get("attempt").and_then(Value::as_u64);
                if let (Some(task_id), Some(attempt)) = (task_id, attempt) {
                    if open.get(action_id).is_some_and(|r| u64::from(r.attempt) == attempt) {
                        if let Some(record) = open.remove(action_id) {
                            let parked = data.get("parked").is_some();
                            found.push((task_id.to_owned(), record, event.event_id, parked));
                        }
                    }
                }
            }
        }
        let mut adopted = Vec::new();
        for (task_id, record, event_id, parked) in found {
            let shown = log::printable(&task_id);
            if !parked {
                log::warn(&format!(
                    "task {shown} ({}) was held by an earlier gateway that did not park its permit: its outcome \
                     will be recorded without a receipt",
                    record.action_id
                ));
                adopted.push((task_id, record, None));
                continue;
            }
            // The scan starts at the suspension this one found; the kernel reads the latest
            // parked record of the attempt from there.
            match kernel.adopt(&record.effect_key, &record.action_id, record.attempt, event_id.saturating_sub(1)) {
                Ok(permit) => adopted.push((task_id, record, Some(permit))),
                Err(error) => log::warn(&format!("task {shown} ({}) could not be adopted: {error}", record.action_id)),
            }
        }
        let Ok(mut tasks) = self.tasks.lock() else { return 0 };
        let count = adopted.len();
        for (task_id, record, permit) in adopted {
            let left = record.lease_expires_at.unwrap_or(now).saturating_sub(now);
            let window = std::time::Duration::from_micros(u64::try_from(left).unwrap_or(0));
            tasks.adopted.insert(
                task_id,
                Adopted {
                    permit,
                    effect_key: record.effect_key,
                    action_id: record.action_id,
                    attempt: record.attempt,
                    action: record.action_name,
                    deadline: std::time::Instant::now() + window,
                    window: window.max(std::time::Duration::from_secs(1)),
                    completed_seen: false,
                    poll: Polling::new(None, None, None),
                },
            );
        }
        count
    }

    /// The open tasks (held and adopted) due for a poll now, at most `MAX_POLLED`.
    pub fn due_polls(&self) -> Vec<Due> {
        let now = std::time::Instant::now();
        let Ok(mut tasks) = self.tasks.lock() else { return Vec::new() };
        let Tasks { held, adopted, .. } = &mut *tasks;
        let open = held
            .iter_mut()
            .map(|(id, task)| (id, &mut task.poll, task.completed_seen))
            .chain(adopted.iter_mut().map(|(id, task)| (id, &mut task.poll, task.completed_seen)));
        let mut due = Vec::new();
        for (task_id, poll, completed_seen) in open {
            if due.len() >= MAX_POLLED {
                break;
            }
            if poll.due(now) {
                due.push(Due {
                    task_id: task_id.clone(),
                    method: if completed_seen { "tasks/result" } else { "tasks/get" },
                    session: poll.session.clone(),
                    revision: poll.revision.clone(),
                });
            }
        }
        due
    }

    /// A poll of `task_id` failed: logged once per task (its window still bounds it).
    pub fn poll_failed(&self, task_id: &str, what: &str) {
        let Ok(mut tasks) = self.tasks.lock() else { return };
        let Tasks { held, adopted, .. } = &mut *tasks;
        let poll = held.get_mut(task_id).map(|t| &mut t.poll).or_else(|| adopted.get_mut(task_id).map(|t| &mut t.poll));
        if let Some(poll) = poll.filter(|poll| !poll.warned) {
            poll.warned = true;
            log::warn(&format!("polling task {} failed: {}", log::printable(task_id), log::printable(what)));
        }
    }

    /// What an answer shows of an adopted task: an open one's lease extended, a terminal one
    /// reported. The receipt summary once it is settled.
    fn observe_adopted(&self, tasks: &mut Tasks, task_id: &str, seen: &Seen) -> Option<Value> {
        let task = tasks.adopted.get_mut(task_id)?;
        match seen {
            Seen::Open { ttl_ms } => {
                let window = ttl_ms.map_or(task.window, |_| window(*ttl_ms, self.task_timeout));
                let until = self.warden.kernel().now().saturating_add(micros(window));
                let extended = match task.permit.as_mut() {
                    Some(permit) => permit.extend_lease(until),
                    None => self
                        .warden
                        .kernel()
                        .extend_lease(&task.effect_key, &task.action_id, task.attempt, until)
                        .map(drop),
                };
                match extended {
                    Ok(()) => {
                        task.window = window;
                        task.deadline = task.deadline.max(std::time::Instant::now() + window);
                    }
                    Err(error) => log::warn(&format!("extending the lease of task {task_id} failed: {error}")),
                }
                None
            }
            Seen::CompletedElsewhere => {
                task.completed_seen = true;
                None
            }
            _ => {
                let effect = outcome(seen, false)?;
                let task = tasks.adopted.remove(task_id)?;
                let result = match seen {
                    Seen::Completed(result) => Some(result),
                    _ => None,
                };
                let meta = self.settle_adopted(task_id, task, &effect, result);
                remember(tasks, task_id, &meta);
                Some(meta)
            }
        }
    }

    /// Report an adopted task's outcome: through its adopted permit, as a held task's (its
    /// receipt, the result's digest bound); for a task an older gateway did not park, through
    /// `Kernel::complete` (the effect's state and its event, no receipt). The summary.
    fn settle_adopted(&self, task_id: &str, task: Adopted, effect: &Effect, result: Option<&Value>) -> Value {
        let Adopted { permit, effect_key, action_id, attempt, action, .. } = task;
        let mut meta = match permit {
            Some(permit) => settle_permit(task_id, permit, effect, result),
            None => {
                let recorded = self.complete_unparked(task_id, &effect_key, &action_id, attempt, effect);
                json!({
                    "action_id": action_id,
                    "receipt_id": Value::Null,
                    "effect_key": effect_key,
                    "result": recorded,
                    "task_id": task_id,
                    "attempt": attempt,
                })
            }
        };
        meta["resumed"] = json!(true);
        let mut line = json!({"action": action, "outcome": meta["result"], "effect_key": meta["effect_key"],
                              "action_id": meta["action_id"], "attempt": attempt, "task_id": task_id,
                              "receipt_id": meta["receipt_id"], "resumed": true});
        if let Some(digest) = meta.get("result_sha256") {
            line["result_sha256"] = digest.clone();
        }
        log::call(&line);
        meta
    }

    /// The outcome of a task an older gateway suspended without parking its permit, through
    /// the kernel's permit-less surface: no permit, so no receipt (logged). The state recorded.
    fn complete_unparked(
        &self,
        task_id: &str,
        effect_key: &str,
        action_id: &str,
        attempt: u32,
        effect: &Effect,
    ) -> String {
        let kernel = self.warden.kernel();
        let outcome = match effect {
            Effect::Committed => warden::effect::Outcome::Committed(warden::effect::StoredResult::from_value_within(
                &Value::Null,
                kernel.limits().max_result_bytes,
            )),
            Effect::Failed(what) => warden::effect::Outcome::NotExecuted(log::printable(what)),
            Effect::Ambiguous(what) => warden::effect::Outcome::Ambiguous(log::printable(what)),
        };
        match kernel.complete(effect_key, action_id, attempt, outcome) {
            Ok(record) => {
                log::warn(&format!(
                    "resumed task {} ({action_id}) recorded {} without a receipt: the gateway that held it did not \
                     park its permit, so no process can rebuild it",
                    log::printable(task_id),
                    record.state
                ));
                record.state.as_str().to_owned()
            }
            Err(error) => {
                log::warn(&format!("recording the outcome of resumed task {task_id} failed: {error}"));
                "ambiguous".to_owned()
            }
        }
    }
}

/// Report a task's outcome through its permit (held or adopted): the result's digest bound
/// when there is a result, then the one outcome, which writes its receipt. The summary.
fn settle_permit(task_id: &str, mut permit: Permit, effect: &Effect, result: Option<&Value>) -> Value {
    let action_id = permit.action().action_id.clone();
    let effect_key = permit.effect_key().map(str::to_owned);
    let attempt = permit.attempt();
    let bound = result.map(digest).filter(|d| match permit.bind_result_sha256(d) {
        Ok(()) => true,
        Err(error) => {
            log::warn(&format!("{action_id}: the task result's digest was not bound: {error}"));
            false
        }
    });
    let (outcome, receipt_id) =
        super::intercept::report(permit, effect, &format!("task {} ({action_id})", log::printable(task_id)));
    let mut meta = json!({
        "action_id": action_id,
        "receipt_id": receipt_id,
        "effect_key": effect_key,
        "result": outcome,
        "task_id": task_id,
        "attempt": attempt,
    });
    if let (Some(digest), Some(_)) = (bound, &receipt_id) {
        meta["result_sha256"] = json!(digest);
    }
    meta
}

fn remember(tasks: &mut Tasks, task_id: &str, meta: &Value) {
    if tasks.settled.len() >= SETTLED_KEPT {
        tasks.settled.pop_front();
    }
    tasks.settled.push_back((task_id.to_owned(), meta.clone()));
}

/// The receipt summary into the answer: `result._meta` (or the error's `data._meta`), and the
/// `_meta` of a `tasks/get` result's inlined `result`, where an SDK reads a `CallToolResult`'s.
fn put_meta(envelope: &mut Value, meta: &Value) -> bool {
    if let Some(inner) = envelope.get_mut("result").and_then(|r| r.get_mut("result")).filter(|r| r.is_object()) {
        let mut wrapped = json!({"result": std::mem::take(inner)});
        with_meta(&mut wrapped, meta);
        *inner = wrapped["result"].take();
    }
    with_meta(envelope, meta);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_handles_are_read_in_both_shapes_and_nothing_else_is_one() {
        let cases = [
            (
                json!({"result": {"resultType": "task", "taskId": "t1", "status": "working", "ttlMs": 60000, "pollIntervalMs": 500}}),
                Some(("t1", "working", Some(60000), Some(500))),
            ),
            (
                json!({"result": {"task": {"taskId": "t2", "status": "working", "ttl": 5000, "pollInterval": 700}}}),
                Some(("t2", "working", Some(5000), Some(700))),
            ),
            (
                json!({"result": {"resultType": "task", "taskId": "t3", "status": "working", "ttlMs": null}}),
                Some(("t3", "working", None, None)),
            ),
            // A tool result, whatever it holds, is not a handle.
            (json!({"result": {"content": [], "task": {"taskId": "t4", "status": "working"}}}), None),
            (json!({"result": {"resultType": "complete", "task": {"taskId": "t5", "status": "working"}}}), None),
            (json!({"result": {"resultType": "task", "status": "working"}}), None),
            (json!({"result": {"resultType": "task", "taskId": "", "status": "working"}}), None),
            (json!({"result": {"resultType": "task", "taskId": 7, "status": "working"}}), None),
            (json!({"result": {"resultType": "task", "taskId": "t8"}}), None),
            (json!({"error": {"code": -32603, "message": "x"}}), None),
        ];
        for (envelope, expected) in cases {
            let got = handle_of(&envelope);
            let want = expected.map(|(id, status, ttl, interval)| Handle {
                task_id: id.into(),
                status: status.into(),
                ttl_ms: ttl,
                poll_interval_ms: interval,
            });
            assert_eq!(got, want, "{envelope}");
        }
    }

    #[test]
    fn the_extensions_table_committed_only_on_completed_never_failed_by_default() {
        let done = json!({"content": [], "isError": false});
        let tool_error = json!({"content": [], "isError": true});
        let cases: Vec<(&str, Value, Option<&str>)> = vec![
            ("tasks/get", json!({"result": {"taskId": "t", "status": "working", "ttlMs": 1000}}), None),
            ("tasks/get", json!({"result": {"taskId": "t", "status": "input_required"}}), None),
            ("tasks/get", json!({"result": {"taskId": "t", "status": "completed", "result": done}}), Some("committed")),
            (
                "tasks/get",
                json!({"result": {"taskId": "t", "status": "completed", "result": tool_error}}),
                Some("committed"),
            ),
            ("tasks/get", json!({"result": {"taskId": "t", "status": "completed"}}), None),
            (
                "tasks/get",
                json!({"result": {"taskId": "t", "status": "failed", "error": {"code": -32602, "message": "m"}}}),
                Some("ambiguous"),
            ),
            (
                "tasks/get",
                json!({"result": {"taskId": "t", "status": "failed", "error": {"code": -32603, "message": "m"}}}),
                Some("ambiguous"),
            ),
            ("tasks/get", json!({"result": {"taskId": "t", "status": "cancelled"}}), Some("ambiguous")),
            ("tasks/get", json!({"error": {"code": -32602, "message": "Task not found"}}), Some("ambiguous")),
            ("tasks/get", json!({"error": {"code": -32603, "message": "busy"}}), None),
            ("tasks/result", json!({"result": {"content": [], "isError": true}}), Some("committed")),
            ("tasks/result", json!({"error": {"code": -32603, "message": "m"}}), Some("ambiguous")),
            ("tasks/cancel", json!({"result": {}}), None),
        ];
        for (method, envelope, expected) in cases {
            let got = outcome(&seen(method, &envelope), false).map(|effect| match effect {
                Effect::Committed => "committed",
                Effect::Failed(_) => "failed",
                Effect::Ambiguous(_) => "ambiguous",
            });
            assert_eq!(got, expected, "{method} {envelope}");
        }
        // The operator's claim that isError means nothing ran holds for a completed task too.
        let claimed = outcome(&Seen::Completed(json!({"isError": true})), true);
        assert!(matches!(claimed, Some(Effect::Failed(_))));
        assert_eq!(outcome(&Seen::Completed(json!({"isError": false})), true), Some(Effect::Committed));
    }

    #[test]
    fn polls_come_every_interval_clamped_to_one_to_thirty_seconds() {
        let second = std::time::Duration::from_secs(1);
        for (asked, interval) in [(Some(100), 1), (Some(2_500), 2), (None, 5), (Some(600_000), 30)] {
            let poll = Polling::new(None, None, asked);
            assert_eq!(poll.interval.as_secs(), interval, "{asked:?}");
        }
        let mut poll = Polling::new(Some("s".into()), Some("2025-11-25"), Some(1_000));
        let start = poll.next;
        let before = start.checked_sub(second / 2).expect("an instant half a second earlier");
        assert!(!poll.due(before), "not before its time");
        assert!(poll.due(start), "due at its time");
        assert!(!poll.due(start), "then not again until the interval passed");
        assert!(poll.due(start + second));
    }

    #[test]
    fn the_window_is_the_ttl_capped_and_at_least_a_second() {
        let cap = std::time::Duration::from_secs(60);
        assert_eq!(window(None, cap), cap);
        assert_eq!(window(Some(5_000), cap), std::time::Duration::from_secs(5));
        assert_eq!(window(Some(600_000), cap), cap);
        assert_eq!(window(Some(0), cap), std::time::Duration::from_secs(1));
    }

    #[test]
    fn answers_are_read_against_the_task_id_or_the_cursor() {
        let get = json!({"method": "tasks/get", "params": {"taskId": "t1", "cursor": "c"}});
        assert_eq!(read_param("tasks/get", &get), Some("t1"));
        assert_eq!(read_param("tools/list", &get), Some("c"));
        assert_eq!(read_param("tasks/result", &json!({"params": {"taskId": 3}})), None);
    }
}
