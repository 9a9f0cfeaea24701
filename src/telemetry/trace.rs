//! `ActionTrace`: the recorder of one protected call. The host makes one per call and hands it
//! in with the request; the pipeline and the kernel write what they decide into it as they go
//! (the decision, the refusal and its receipt, the permit, the wait, the outcome), and the host
//! reads the span out of it (`ActionTrace::span`) to give it to its own tracing SDK.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use serde_json::Value;

use crate::action::Action;
use crate::approval::{ApprovalRecord, ApprovalStatus};
use crate::clock::Micros;
use crate::decision::Ruling;
use crate::effect::StoredResult;
use crate::effect_state::EffectState;
use crate::error::{DuplicateState, Error, InvalidInputKind};
use crate::sight::echo::Echo;

use super::span::{guardrail_event, ActionSpan, AttributeValue, Capture, Ended, Facts, SpanEvent};

/// The recorder of one protected call (see the module documentation). Shared: the permit the
/// call gets keeps it to record its outcome, so the host may read the span from any thread.
#[derive(Debug, Default)]
pub struct ActionTrace {
    facts: Mutex<Facts>,
}

/// What a permit reported, as the span tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reported {
    Committed,
    NotExecuted,
    Ambiguous,
}

impl ActionTrace {
    /// A new, empty recorder.
    pub fn new() -> Arc<ActionTrace> {
        Arc::new(ActionTrace::default())
    }

    /// The span as far as it is known: complete (with an end, a status and its measurements)
    /// once the call was refused or its permit reported an outcome.
    pub fn span(&self) -> ActionSpan {
        self.facts().span()
    }

    /// The span as an SDK creates it when the permit is issued: its name, its start and the
    /// attributes the conventions set at creation (`gen_ai.operation.name`, `gen_ai.tool.name`);
    /// nothing else (no events, no end, no measurements). Cheaper than `span`, which a host
    /// reads once more when the call has ended.
    pub fn span_at_start(&self) -> ActionSpan {
        self.facts().span_at_start()
    }

    /// Whether the protected call has ended.
    pub fn is_ended(&self) -> bool {
        self.facts().ended.is_some()
    }

    /// What the operator lets this call's span carry (set when the call begins).
    pub(crate) fn capture(&self) -> Capture {
        self.facts().capture
    }

    fn facts(&self) -> MutexGuard<'_, Facts> {
        // A panic while recording leaves facts that are still facts: keep reading them.
        self.facts.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The call starts: its tool, what the operator lets the span carry, and when outcomes are
    /// durable. A recorder serves one call: a second start is refused, recording nothing.
    pub(crate) fn begin(
        &self,
        now: Micros,
        tool: Option<&str>,
        capture: Capture,
        outcomes: &'static str,
    ) -> Result<(), Error> {
        let mut facts = self.facts();
        if facts.started_at.is_some() || facts.ended.is_some() {
            return Err(Error::invalid(
                InvalidInputKind::State,
                "this trace already recorded a protected call; make a new trace for each call",
            ));
        }
        facts.started_at = Some(now);
        facts.tool = tool.map(str::to_owned);
        facts.capture = capture;
        facts.outcomes = Some(outcomes);
        Ok(())
    }

    /// One decision of the call (a re-proposal after a wait or a reconcile is another one):
    /// the action, the ruling, the policy, and its `gen_ai.guardrail.result` event.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn decided(
        &self,
        now: Micros,
        action: &Action,
        action_hash: &str,
        ruling: &Ruling,
        policy: (Option<&str>, Option<&str>),
        observe: bool,
        presented: Option<&str>,
    ) {
        let mut facts = self.facts();
        let capture = facts.capture;
        if capture.arguments || capture.results {
            let canonical = action.canonical_arguments();
            let guard = Arc::new(sensitive_echo(&canonical));
            facts.arguments = capture.arguments.then(|| redacted(&canonical, &guard));
            facts.guard = Some(guard);
        }
        facts.action_id = Some(action.action_id.clone());
        facts.action_hash = Some(action_hash.to_owned());
        facts.decision = Some(ruling.decision);
        facts.rule = Some(ruling.reason.clone());
        facts.decision_reason = Some(ruling.reason.clone());
        facts.policy_hash = policy.0.map(str::to_owned);
        facts.policy_version = policy.1.map(str::to_owned);
        facts.observe = observe;
        if let Some(id) = presented {
            facts.approval_id = Some(id.to_owned());
        }
        facts.events.push(guardrail_event(now, ruling.decision, &ruling.reason, policy.0, policy.1));
    }

    /// The effect key the document's template rendered (`None`: no key).
    pub(crate) fn rendered(&self, effect_key: Option<&str>) {
        self.facts().effect_key = effect_key.map(str::to_owned);
    }

    /// The action waited `took` for one of its durable writes (`proposal` or `outcome`),
    /// committed with `together` writes in all (0: no commit was seen, as for a failed write).
    pub(crate) fn wrote(&self, write: &'static str, took: Duration, together: u32) {
        self.facts().writes.push((write, took, together));
    }

    /// A proposal was refused; `receipt_id` names the receipt the refusal wrote, if it wrote one.
    pub(crate) fn refused(&self, refusal: &Error, receipt_id: Option<&str>) {
        let mut facts = self.facts();
        facts.decision_reason = Some(refusal.reason());
        facts.receipt_id = receipt_id.map(str::to_owned);
        facts.receipt_seq = None;
        facts.receipt_hash = None;
        match refusal {
            Error::Duplicate { effect_key, state, .. } => {
                facts.effect_key = Some(effect_key.clone());
                facts.effect_state = match state {
                    DuplicateState::Committed => Some(EffectState::Committed),
                    // Reserved or executing: the refusal does not say which.
                    DuplicateState::InProgress => None,
                };
            }
            Error::Ambiguous { effect_key, .. } => {
                facts.effect_key = Some(effect_key.clone());
                facts.effect_state = Some(EffectState::Ambiguous);
            }
            Error::AttemptCeiling { effect_key, attempts, .. } => {
                facts.effect_key = Some(effect_key.clone());
                facts.effect_state = Some(EffectState::Failed);
                facts.attempt = Some(*attempts);
            }
            Error::ApprovalRequired { request_id, .. } => facts.approval_id = Some(request_id.clone()),
            Error::ApprovalMismatch { approval_id, .. } => facts.approval_id = Some(approval_id.clone()),
            _ => {}
        }
    }

    /// The receipt named by the span, as the store holds it.
    pub(crate) fn receipt(&self, seq: u64, hash: Option<String>) {
        let mut facts = self.facts();
        facts.receipt_seq = Some(seq);
        facts.receipt_hash = hash;
    }

    /// A permit was issued: its outcome ends the span.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn permitted(
        &self,
        action_id: &str,
        effect_key: Option<&str>,
        holds_key: bool,
        attempt: u32,
        approval_id: Option<&str>,
        decided_in: Option<Micros>,
        receipt_id: &str,
    ) {
        let mut facts = self.facts();
        facts.permitted = true;
        facts.action_id = Some(action_id.to_owned());
        facts.effect_key = effect_key.map(str::to_owned);
        facts.effect_state = (holds_key && effect_key.is_some()).then_some(EffectState::Executing);
        facts.attempt = Some(attempt);
        if approval_id.is_some() {
            facts.approval_id = approval_id.map(str::to_owned);
        }
        if decided_in.is_some() {
            facts.approval_decided_in = decided_in;
        }
        facts.receipt_id = Some(receipt_id.to_owned());
        facts.receipt_seq = None;
        facts.receipt_hash = None;
    }

    /// The call waited `took` for a human; `record` is the request as the wait left it.
    pub(crate) fn waited(&self, took: Micros, record: Option<&ApprovalRecord>) {
        let mut facts = self.facts();
        facts.approval_wait = Some(facts.approval_wait.unwrap_or_default().saturating_add(took.max(0)));
        if let Some(record) = record {
            facts.approval_id = Some(record.approval_id.clone());
            if matches!(record.status, ApprovalStatus::Granted | ApprovalStatus::Denied) {
                facts.approval_decided_in = record.answered_at.map(|at| at - record.requested_at);
            }
        }
    }

    /// The host's reconcile hook answered about an AMBIGUOUS effect.
    pub(crate) fn reconciled(&self, now: Micros, effect_key: &str, answer: &str) {
        self.facts().events.push(SpanEvent {
            name: "warden.reconcile",
            at: now,
            attributes: vec![
                ("warden.effect.key", AttributeValue::Str(effect_key.to_owned())),
                ("warden.reconcile.answer", AttributeValue::Str(answer.to_owned())),
            ],
        });
    }

    /// The call ended without a permit (a refusal or a fault). Nothing once it ended, or once a
    /// permit was issued (its outcome ends it).
    pub(crate) fn end_error(&self, now: Micros, error: &Error) {
        let mut facts = self.facts();
        if facts.ended.is_some() || facts.permitted {
            return;
        }
        facts.started_at.get_or_insert(now);
        facts.ended = Some(Ended {
            at: now,
            outcome: if error.is_refusal() { "refused" } else { "error" },
            error_type: Some(error_type(error)),
            description: Some(error.to_string()),
        });
    }

    /// The permit reported `reported` (with the host's `message`, or the `result` as stored),
    /// and the kernel answered `answer`. Nothing once the span ended.
    pub(crate) fn end_outcome(
        &self,
        now: Micros,
        reported: Reported,
        message: Option<&str>,
        result: Option<&StoredResult>,
        holds_key: bool,
        answer: &Result<(), Error>,
    ) {
        let mut facts = self.facts();
        if facts.ended.is_some() {
            return;
        }
        let keyed = holds_key && facts.effect_key.is_some();
        let capture = facts.capture;
        let none = Echo::none();
        let guard = facts.guard.clone();
        let guard: &Echo = guard.as_deref().unwrap_or(&none);
        let host = |fixed: &str| match message {
            Some(message) if capture.results => crate::sight::shape::error_text(message, guard),
            _ => fixed.to_owned(),
        };
        let (outcome, error_type, description, state) = match (answer, reported) {
            (Ok(()), Reported::Committed) => ("committed", None, None, EffectState::Committed),
            (Ok(()), Reported::NotExecuted) => (
                "failed",
                Some("not_executed".to_owned()),
                Some(host("the effect was not executed (FAILED)")),
                EffectState::Failed,
            ),
            (Ok(()), Reported::Ambiguous) => (
                "ambiguous",
                Some("ambiguous".to_owned()),
                Some(host("the outcome is unknown (AMBIGUOUS)")),
                EffectState::Ambiguous,
            ),
            (Err(late @ Error::LateOutcome { state, .. }), _) => {
                ("ambiguous", Some(error_type(late)), Some(late.to_string()), *state)
            }
            (Err(fault), _) => {
                facts.effect_state = None;
                facts.ended = Some(Ended {
                    at: now,
                    outcome: "error",
                    error_type: Some(error_type(fault)),
                    description: Some(fault.to_string()),
                });
                return;
            }
        };
        if capture.results && answer.is_ok() && reported == Reported::Committed {
            facts.result = result.map(|stored| redacted(&stored.to_value(), guard));
        }
        facts.effect_state = keyed.then_some(state);
        facts.ended = Some(Ended { at: now, outcome, error_type, description });
    }
}

/// `error.type` for an error: its C result code's name, lower case, without the prefix
/// (`denied`, `approval_required`, `duplicate`, `in_progress`, `ambiguous`, `attempt_ceiling`,
/// `late_outcome`, `invalid_input`, `store`, …): the same code every binding raises.
pub(crate) fn error_type(error: &Error) -> String {
    let name = crate::ffi::result::name_str(crate::ffi::result::code_of(error));
    name.trim_start_matches("WARDEN_RESULT_").to_ascii_lowercase()
}

/// `value` redacted and bounded as a sight's result is (`sight::shape`): sensitive keys at any
/// depth, credential shapes inside strings, what `guard` guards wherever it is echoed, and the
/// depth, item and string bounds.
pub(crate) fn redacted(value: &Value, guard: &Echo) -> Value {
    let whole = [("value".to_owned(), String::new())];
    let mut shaped = crate::sight::shape::shape(value, &whole, &crate::sight::shape::Limits::default(), guard);
    shaped.values.remove("value").unwrap_or(Value::Null)
}

/// An echo guard for every value the arguments hold under a sensitive key (at any depth, every
/// scalar beneath such a key): a credential the call was handed is scrubbed wherever the
/// captured arguments, the result or the host's message repeat it, not only under its own key.
pub(crate) fn sensitive_echo(arguments: &Value) -> Echo {
    fn collect(value: &Value, sensitive: bool, out: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                for (key, inner) in map {
                    collect(inner, sensitive || crate::sight::shape::is_sensitive_key(key), out);
                }
            }
            Value::Array(items) => items.iter().for_each(|item| collect(item, sensitive, out)),
            Value::String(text) if sensitive => out.push(text.clone()),
            Value::Number(number) if sensitive => out.push(number.to_string()),
            _ => {}
        }
    }
    let mut values = Vec::new();
    collect(arguments, false, &mut values);
    let parts: Vec<&str> = values.iter().map(String::as_str).collect();
    let echo = Echo::for_sent(None, &parts);
    for value in &mut values {
        zeroize::Zeroize::zeroize(value);
    }
    echo
}
