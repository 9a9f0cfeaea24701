//! A call waiting on its client's input. On a 2026 revision, a leg answered `input_required`
//! with a `requestState` is held as a suspension — its permit, so its reservation — until the
//! continuation comes, which is checked against the suspended call before it is consumed (D1);
//! one that does not come in time is recorded AMBIGUOUS by the sweep (D4), and every held one
//! when the gateway stops. Legacy (2025) elicitation: a server request relayed on an
//! intercepted event stream awaits the client's answer under its `answer_key`.

use serde_json::{json, Value};

use warden::kernel::Permit;

use super::answer::{internal, refusal, Answer};
use super::intercept::{digest, micros, Admitted, Call, Engine};
use super::log;
use super::telemetry::InFlight;

/// How long suspensions are held and how many rounds a call may take.
#[derive(Debug, Clone, Copy)]
pub struct Elicitation {
    pub max_rounds: u32,
    pub timeout: std::time::Duration,
}

/// A first leg answered `input_required` with a `requestState`: the permit (and so the
/// reservation, its lease extended) is held here until the continuation arrives.
pub(super) struct Suspension {
    pub(super) permit: Permit,
    pub(super) tool: String,
    /// The canonical arguments of the suspended call: a continuation must carry the same.
    pub(super) arguments: String,
    pub(super) principal: warden::Principal,
    pub(super) round: u32,
    pub(super) deadline: std::time::Instant,
    /// The call's `execute_tool` span, ended when the call is.
    pub(super) flight: Option<InFlight>,
}

/// What is kept of a suspension that lapsed: enough to check a late continuation is the same
/// call (D1), and the effect it left AMBIGUOUS.
pub(super) struct Lapsed {
    tool: String,
    arguments: String,
    principal: warden::Principal,
    effect_key: Option<String>,
}

/// How many lapsed suspensions are remembered.
const LAPSED_KEPT: usize = 4096;

/// Where a client's answer to a server request is expected: the session (when the revision
/// has one) and the request's id.
pub fn answer_key(session: Option<&str>, id: &Value) -> String {
    format!("{}\n{id}", session.unwrap_or_default())
}

impl Engine {
    /// `--elicitation-timeout`: how long a call may wait on its client's input.
    pub fn elicitation_timeout(&self) -> std::time::Duration {
        self.elicitation.timeout
    }

    /// The lease that covers a wait of `--elicitation-timeout` from now.
    pub fn elicitation_lease(&self) -> warden::Micros {
        self.warden.kernel().now().saturating_add(micros(self.elicitation.timeout))
    }

    /// The kernel time of `instant` (a lease that lasts until then).
    pub fn lease_until(&self, instant: std::time::Instant) -> warden::Micros {
        let left = instant.saturating_duration_since(std::time::Instant::now());
        self.warden.kernel().now().saturating_add(micros(left))
    }

    /// A call carrying a `requestState`: the held suspension it continues, checked against the
    /// suspended call (tool, canonical arguments, principal) **before** it is consumed (D1).
    /// `Ok(None)`: no suspension and a keyless tool, which runs as an ordinary call (D3).
    pub(super) fn continuation(
        &self,
        call: &Call<'_>,
        name: &str,
        state: &str,
        arguments: &Value,
        principal: &warden::Principal,
    ) -> Result<Option<Admitted>, Answer> {
        let unknown = |why: &str| {
            refusal(
                call.id,
                400,
                -41009,
                "warden.unknown_continuation",
                &format!("{name}: {why}; start the call again without requestState"),
                json!({"tool": name}),
            )
        };
        let canonical = warden::canonical::to_canonical_string(arguments, "arguments").ok();
        let Ok(mut held) = self.suspended.lock() else { return Err(unknown("the suspension table is unavailable")) };
        let Some(suspension) = held.get(state) else {
            drop(held);
            if let Some(late) = self.lapsed_continuation(call, state, canonical.as_deref(), principal) {
                return Err(late);
            }
            let keyed = self.warden.document().actions.get(name).is_some_and(|entry| entry.effect.is_some());
            if keyed {
                return Err(unknown("this requestState continues no call held by this gateway"));
            }
            return Ok(None);
        };
        if suspension.tool != call.tool
            || canonical.as_deref() != Some(suspension.arguments.as_str())
            || &suspension.principal != principal
        {
            log::warn(&format!("{name}: a continuation with other arguments or another principal was refused"));
            return Err(unknown("this continuation's tool, arguments or principal differ from the suspended call's"));
        }
        let Some(suspension) = held.remove(state) else { return Err(unknown("the suspension is gone")) };
        drop(held);
        if suspension.deadline < std::time::Instant::now() {
            let key = suspension.permit.effect_key().map(str::to_owned);
            let _ = suspension.permit.ambiguous("elicitation timeout: the continuation came too late");
            self.end_flight(suspension.flight);
            return Err(refusal(
                call.id,
                409,
                -41005,
                "warden.ambiguous_effect",
                "the suspended call waited longer than --elicitation-timeout; its effect is AMBIGUOUS until a human resolves it",
                json!({"effect_key": key}),
            ));
        }
        let mut permit = suspension.permit;
        let flight = suspension.flight;
        let responses = call.message.get("params").and_then(|p| p.get("inputResponses"));
        let data = json!({
            "reason": "continuation",
            "round": suspension.round,
            "input_responses": keys(responses),
            "input_responses_sha256": responses.map(digest),
        });
        if let Err(error) = permit.resume(&data) {
            // Nothing is forwarded without its EXECUTION_RESUMED (D10): the first leg may have
            // acted, so the effect is AMBIGUOUS.
            log::warn(&format!("{name}: recording the continuation failed: {error}"));
            let key = permit.effect_key().map(str::to_owned);
            let _ = permit.ambiguous(&format!("the continuation could not be recorded: {error}"));
            self.end_flight(flight);
            if !error.is_refusal() {
                return Err(internal(call.id));
            }
            return Err(refusal(
                call.id,
                409,
                -41005,
                "warden.ambiguous_effect",
                "the suspended call no longer holds its effect; it is AMBIGUOUS until a human resolves it",
                json!({"effect_key": key}),
            ));
        }
        let mut forward = call.message.clone();
        if let Some(params) = forward.get_mut("params").and_then(Value::as_object_mut) {
            params.insert("arguments".into(), permit.action().canonical_arguments());
        }
        let not_executed_on_error =
            self.warden.document().actions.get(name).is_some_and(|entry| entry.not_executed_on_error);
        Ok(Some(Admitted {
            permit,
            forward,
            not_executed_on_error,
            round: suspension.round,
            started: std::time::Instant::now(),
            span: None,
            flight,
            nested: Vec::new(),
            session: None,
        }))
    }

    /// A continuation of a suspension the sweep recorded AMBIGUOUS: `409 -41005` naming the
    /// effect when it is the same call (tool, canonical arguments, principal); `None` otherwise.
    fn lapsed_continuation(
        &self,
        call: &Call<'_>,
        state: &str,
        canonical: Option<&str>,
        principal: &warden::Principal,
    ) -> Option<Answer> {
        let kept = self.lapsed.lock().ok()?;
        let (_, lapsed) = kept.iter().rev().find(|(kept_state, _)| kept_state == state)?;
        if lapsed.tool != call.tool || canonical != Some(lapsed.arguments.as_str()) || &lapsed.principal != principal {
            return None;
        }
        Some(refusal(
            call.id,
            409,
            -41005,
            "warden.ambiguous_effect",
            "the suspended call waited longer than --elicitation-timeout; its effect is AMBIGUOUS until a human resolves it",
            json!({"effect_key": lapsed.effect_key}),
        ))
    }

    /// Record every suspension whose continuation did not come in time as AMBIGUOUS (D4).
    pub fn sweep(&self) {
        let now = std::time::Instant::now();
        let lapsed: Vec<(String, Suspension)> = match self.suspended.lock() {
            Ok(mut held) => {
                let states: Vec<String> =
                    held.iter().filter(|(_, s)| s.deadline < now).map(|(state, _)| state.clone()).collect();
                states.into_iter().filter_map(|state| held.remove(&state).map(|s| (state, s))).collect()
            }
            Err(_) => return,
        };
        for (state, suspension) in lapsed {
            let seconds = self.elicitation.timeout.as_secs();
            if let Ok(mut kept) = self.lapsed.lock() {
                if kept.len() >= LAPSED_KEPT {
                    kept.pop_front();
                }
                kept.push_back((
                    state,
                    Lapsed {
                        tool: suspension.tool.clone(),
                        arguments: suspension.arguments.clone(),
                        principal: suspension.principal.clone(),
                        effect_key: suspension.permit.effect_key().map(str::to_owned),
                    },
                ));
            }
            if let Err(error) =
                suspension.permit.ambiguous(&format!("elicitation timeout: no continuation within {seconds} s"))
            {
                log::warn(&format!("recording a lapsed suspension failed: {error}"));
            }
            self.end_flight(suspension.flight);
        }
    }

    /// The gateway is stopping: every held suspension is recorded AMBIGUOUS now (its
    /// continuation can no longer come), rather than when its lease lapses.
    pub fn abandon_suspensions(&self) -> usize {
        let held: Vec<Suspension> = match self.suspended.lock() {
            Ok(mut held) => held.drain().map(|(_, suspension)| suspension).collect(),
            Err(_) => return 0,
        };
        let count = held.len();
        for suspension in held {
            if let Err(error) =
                suspension.permit.ambiguous("the gateway stopped while the call waited for its continuation")
            {
                log::warn(&format!("recording an abandoned suspension failed: {error}"));
            }
            self.end_flight(suspension.flight);
        }
        count
    }

    /// An intercepted stream relayed a server request (legacy elicitation): the client's
    /// answer, relayed later on another connection, is handed to the returned receiver as the
    /// `EXECUTION_RESUMED` data. `None` when that key is already awaited by another stream
    /// (its answer could not be told apart).
    pub fn await_answer(&self, key: &str) -> Option<std::sync::mpsc::Receiver<Value>> {
        let mut waiting = self.answers.lock().ok()?;
        if waiting.contains_key(key) {
            return None;
        }
        let (sender, receiver) = std::sync::mpsc::channel();
        waiting.insert(key.to_owned(), sender);
        Some(receiver)
    }

    pub fn forget_answer(&self, key: &str) {
        if let Ok(mut waiting) = self.answers.lock() {
            waiting.remove(key);
        }
    }

    /// A client's JSON-RPC response, about to be relayed: when an intercepted stream awaits
    /// it, that stream records `EXECUTION_RESUMED` (before the upstream can answer the call).
    pub fn client_answered(&self, session: Option<&str>, message: &Value) {
        let Some(id) = message.get("id") else { return };
        let key = answer_key(session, id);
        let Some(waiter) = self.answers.lock().ok().and_then(|mut waiting| waiting.remove(&key)) else { return };
        let (member, value) = match (message.get("result"), message.get("error")) {
            (Some(result), _) => ("result", result),
            (None, Some(error)) => ("error", error),
            (None, None) => return,
        };
        let _ = waiter.send(json!({
            "reason": "client_response",
            "request_id": id,
            "input_responses": [member],
            "input_responses_sha256": digest(value),
        }));
    }
}

/// The `requestState` of an `input_required` result, when it has a non-empty one.
pub(super) fn requested_state(envelope: &Value) -> Option<String> {
    let result = envelope.get("result")?;
    if result.get("resultType").and_then(Value::as_str) != Some("input_required") {
        return None;
    }
    result.get("requestState").and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_owned)
}

/// The member names of an `inputRequests`/`inputResponses` object (at most 64, each at most
/// 256 characters): what a suspension event keeps of them, never their values.
pub(super) fn keys(object: Option<&Value>) -> Vec<String> {
    let Some(map) = object.and_then(Value::as_object) else { return Vec::new() };
    map.keys().take(64).map(|key| key.chars().take(256).collect()).collect()
}
