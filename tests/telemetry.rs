//! The span record of each protected call (`telemetry`): one per call, ended by its refusal or
//! its permit's outcome, named and attributed as docs/TELEMETRY.md says, its times the
//! kernel's, its receipt the one the store holds; nothing of the arguments or the result unless
//! the operator opts in, and then redacted.
// Durations are whole microseconds over 1e6: whole seconds compare exactly.
#![allow(clippy::float_cmp)]

mod common;

use std::sync::Arc;

use common::*;
use serde_json::{json, Value};
use warden::document::load_str;
use warden::kernel::{AnswerWait, Outcomes, ReconcileAnswer};
use warden::pipeline::{ActionRequest, Recovery, Warden, WardenOptions};
use warden::telemetry::{ActionSpan, ActionTrace, AttributeValue, Capture, Instrument, SpanStatus};
use warden::{Error, ManualClock, Principal};

const POLICY: &str = r#"
schema: warden/v1
version: "2026-11 r1"
environment: production
actions:
  customer.read:
    decision: allow
  stripe.refund:
    effect: "refund:{payment_id}"
    max_attempts: 2
    lease: PT1M
    rules:
      - when: { amount_gte: 0, amount_lte: 50000 }
        decision: allow
      - when: { amount_gte: 0, amount_lte: 500000 }
        decision: approve
      - decision: deny
"#;

const MINUTE: i64 = 60 * SECOND;

struct Setup {
    _dir: tempfile::TempDir,
    warden: Warden,
    clock: ManualClock,
}

fn setup_with(policy: &str, options: WardenOptions) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let document = load_str(policy, "test.yaml").unwrap();
    let options = WardenOptions { clock: Arc::new(clock.clone()), environment: Some("production".into()), ..options };
    let warden = Warden::open(dir.path().join("state.redb"), document, options).unwrap();
    Setup { _dir: dir, warden, clock }
}

fn setup() -> Setup {
    setup_with(POLICY, WardenOptions::default())
}

fn ada() -> Principal {
    Principal::new("refund-agent", Some("ada")).unwrap()
}

fn refund(payment: &str, amount: i64) -> ActionRequest<'static> {
    ActionRequest::new(
        "stripe.refund",
        json!({"payment_id": payment, "amount": amount, "memo": "customer-called-about-order-8812"}),
        ada(),
    )
}

/// `request` proposed once with a new trace; the outcome and the trace.
fn traced(s: &Setup, mut request: ActionRequest<'_>) -> (warden::error::Result<warden::Permit>, Arc<ActionTrace>) {
    let trace = ActionTrace::new();
    request.trace = Some(Arc::clone(&trace));
    (s.warden.submit_recovering(&request, &Recovery::default()).1, trace)
}

fn text<'a>(span: &'a ActionSpan, key: &str) -> Option<&'a str> {
    match span.attribute(key) {
        Some(AttributeValue::Str(text)) => Some(text),
        None => None,
        Some(other) => panic!("{key} is not a string: {other:?}"),
    }
}

fn int(span: &ActionSpan, key: &str) -> Option<i64> {
    match span.attribute(key) {
        Some(AttributeValue::Int(n)) => Some(*n),
        None => None,
        Some(other) => panic!("{key} is not an integer: {other:?}"),
    }
}

fn double(span: &ActionSpan, key: &str) -> Option<f64> {
    match span.attribute(key) {
        Some(AttributeValue::Double(x)) => Some(*x),
        None => None,
        Some(other) => panic!("{key} is not a double: {other:?}"),
    }
}

/// The stored receipt with id `id`: its seq and hash.
fn stored_receipt(s: &Setup, id: &str) -> (u64, String) {
    let seq = s.warden.kernel().receipt_seq(id).unwrap().unwrap_or_else(|| panic!("no receipt {id}"));
    let row = s.warden.kernel().receipts(seq, 1).unwrap().pop().unwrap().1;
    (seq, row.hash.unwrap())
}

/// The span names the receipt the store holds, by id, seq and hash.
fn assert_names_its_receipt(s: &Setup, span: &ActionSpan) {
    let id = text(span, "warden.receipt.id").expect("a receipt id");
    let (seq, hash) = stored_receipt(s, id);
    assert_eq!(int(span, "warden.receipt.seq"), Some(seq as i64), "{span:?}");
    assert_eq!(text(span, "warden.receipt.hash"), Some(hash.as_str()), "{span:?}");
}

fn measurement<'a>(span: &'a ActionSpan, name: &str) -> Vec<&'a warden::telemetry::Measurement> {
    span.measurements.iter().filter(|m| m.name == name).collect()
}

#[test]
fn a_committed_call_is_one_span_named_for_its_tool_with_the_kernels_times_and_its_receipt() {
    let s = setup();
    let (permit, trace) = traced(&s, refund("txn_1", 4_200));
    let permit = permit.unwrap();
    let started = trace.span();
    assert_eq!(started.name, "execute_tool stripe.refund");
    assert_eq!(started.start, T0);
    assert_eq!(started.end, None, "the function has not run yet");
    assert_eq!(started.status, SpanStatus::Unset);
    assert!(started.measurements.is_empty(), "nothing is measured before the end");
    assert_eq!(text(&started, "gen_ai.operation.name"), Some("execute_tool"));
    assert_eq!(text(&started, "gen_ai.tool.name"), Some("stripe.refund"));
    assert_eq!(text(&started, "warden.effect.state"), Some("executing"));
    assert_eq!(started.attributes[0].0, "gen_ai.operation.name", "set when the span starts");

    s.clock.advance(2 * SECOND);
    let receipt_id = permit.receipt_id().to_owned();
    let action_hash = permit.action_hash().to_owned();
    let action_id = permit.action().action_id.clone();
    permit.commit(&json!({"refund_id": "re_1"})).unwrap();
    let span = trace.span();
    assert_eq!((span.start, span.end), (T0, Some(T0 + 2 * SECOND)));
    assert_eq!(span.status, SpanStatus::Unset, "a committed call is no error");
    assert_eq!(span.attribute("error.type"), None);
    assert_eq!(text(&span, "gen_ai.tool.call.id"), Some(action_id.as_str()));
    assert_eq!(text(&span, "warden.decision"), Some("allow"));
    assert_eq!(text(&span, "warden.decision.reason"), Some("rule[0]"));
    assert_eq!(text(&span, "warden.rule"), Some("rule[0]"));
    let policy_hash = s.warden.document().policy_hash.clone();
    assert_eq!(text(&span, "warden.policy.hash"), Some(policy_hash.as_str()));
    assert_eq!(text(&span, "warden.policy.version"), Some("2026-11 r1"));
    assert_eq!(text(&span, "warden.action.hash"), Some(action_hash.as_str()));
    assert_eq!(text(&span, "warden.effect.key"), Some("refund:txn_1"));
    assert_eq!(int(&span, "warden.effect.attempt"), Some(1));
    assert_eq!(text(&span, "warden.effect.state"), Some("committed"));
    assert_eq!(text(&span, "warden.receipt.id"), Some(receipt_id.as_str()));
    assert_names_its_receipt(&s, &span);
    assert_eq!(text(&span, "warden.outcome"), Some("committed"));
    assert_eq!(text(&span, "warden.outcomes"), Some("durable"));
    assert_eq!(span.attribute("warden.observe"), None);
    assert_eq!(span.attribute("gen_ai.tool.call.arguments"), None, "not without the operator's opt-in");
    assert_eq!(span.attribute("gen_ai.tool.call.result"), None, "not without the operator's opt-in");

    assert_eq!(span.events.len(), 1, "{:?}", span.events);
    let event = &span.events[0];
    assert_eq!((event.name, event.at), ("gen_ai.guardrail.result", T0));
    let event_attr = |key: &str| event.attributes.iter().find(|(k, _)| *k == key).map(|(_, v)| v.clone());
    assert_eq!(event_attr("gen_ai.guardrail.policy.id"), Some(AttributeValue::Str(policy_hash)));
    assert_eq!(event_attr("gen_ai.guardrail.policy.rule.id"), Some(AttributeValue::Str("rule[0]".into())));
    assert_eq!(event_attr("gen_ai.guardrail.result.type"), Some(AttributeValue::Str("decision".into())));
    assert_eq!(event_attr("gen_ai.guardrail.result.value"), Some(AttributeValue::Str("allow".into())));

    let actions = measurement(&span, "warden.actions");
    assert_eq!(actions.len(), 1);
    assert_eq!((actions[0].instrument, actions[0].value), (Instrument::Counter, 1.0));
    let duration = measurement(&span, "warden.action.duration");
    assert_eq!(duration[0].value, 2.0, "by the kernel's clock");
    let writes: Vec<_> =
        measurement(&span, "warden.store.write.duration").iter().map(|m| m.attributes[0].1.clone()).collect();
    assert_eq!(writes, [AttributeValue::Str("proposal".into()), AttributeValue::Str("outcome".into())]);
    let batches = measurement(&span, "warden.store.write.batch_size");
    let batched: Vec<_> = batches.iter().map(|m| (m.attributes[0].1.clone(), m.value)).collect();
    assert_eq!(
        batched,
        [(AttributeValue::Str("proposal".into()), 1.0), (AttributeValue::Str("outcome".into()), 1.0)],
        "one caller alone: each of its writes is its sync's only write"
    );
    assert!(measurement(&span, "warden.approval.decision.duration").is_empty());

    let record = span.to_json();
    assert_eq!(record["kind"], "internal");
    assert_eq!(record["start_time_unix_nano"], json!(i128::from(T0) * 1000));
    assert_eq!(record["end_time_unix_nano"], json!(i128::from(T0 + 2 * SECOND) * 1000));
    assert_eq!(record["status"], json!({"code": "unset"}));
    assert_eq!(record["attributes"]["warden.effect.attempt"], json!(1));
    assert_eq!(record["metrics"][0]["instrument"], "counter");
}

/// A refusal case: what to set up first, the request, and what the span must say.
struct Refusal {
    label: &'static str,
    before: fn(&Setup),
    request: fn() -> ActionRequest<'static>,
    error_type: &'static str,
    outcome: &'static str,
    reason: &'static str,
    decision: Option<&'static str>,
    /// The refusal wrote a receipt.
    receipt: bool,
    state: Option<&'static str>,
}

fn nothing(_: &Setup) {}

fn commit_txn_2(s: &Setup) {
    s.warden.submit(&refund("txn_2", 100)).unwrap().commit(&json!(null)).unwrap();
}

fn hold_txn_3(s: &Setup) {
    // Leaked on purpose: the attempt holds its key under a live lease.
    std::mem::forget(s.warden.submit(&refund("txn_3", 100)).unwrap());
}

fn ambiguate_txn_4(s: &Setup) {
    s.warden.submit(&refund("txn_4", 100)).unwrap().ambiguous("timeout").unwrap();
}

fn fail_txn_5_twice(s: &Setup) {
    for _ in 0..2 {
        s.warden.submit(&refund("txn_5", 100)).unwrap().not_executed("declined").unwrap();
    }
}

#[test]
fn every_refusal_is_one_ended_span_with_its_error_type_status_and_the_receipt_it_wrote() {
    let cases = [
        Refusal {
            label: "unknown action",
            before: nothing,
            request: || ActionRequest::new("stripe.payout", json!({"amount": 1}), ada()),
            error_type: "denied",
            outcome: "refused",
            reason: "unknown_action",
            decision: Some("deny"),
            receipt: true,
            state: None,
        },
        Refusal {
            label: "the policy's last rule",
            before: nothing,
            request: || refund("txn_d", 900_000),
            error_type: "denied",
            outcome: "refused",
            reason: "rule[2]",
            decision: Some("deny"),
            receipt: true,
            state: None,
        },
        Refusal {
            label: "approval required",
            before: nothing,
            request: || refund("txn_a", 90_000),
            error_type: "approval_required",
            outcome: "refused",
            reason: "approval_required",
            decision: Some("approve"),
            receipt: false,
            state: None,
        },
        Refusal {
            label: "an approval that does not exist",
            before: nothing,
            request: || {
                let mut request = refund("txn_m", 90_000);
                request.approval_id = Some("apr_00000000000000000000000000000000");
                request
            },
            error_type: "approval_mismatch",
            outcome: "refused",
            reason: "unknown",
            decision: Some("approve"),
            receipt: true,
            state: None,
        },
        Refusal {
            label: "duplicate",
            before: commit_txn_2,
            request: || refund("txn_2", 100),
            error_type: "duplicate",
            outcome: "refused",
            reason: "duplicate",
            decision: Some("allow"),
            receipt: true,
            state: Some("committed"),
        },
        Refusal {
            label: "in progress",
            before: hold_txn_3,
            request: || refund("txn_3", 100),
            error_type: "in_progress",
            outcome: "refused",
            reason: "in_progress",
            decision: Some("allow"),
            receipt: true,
            state: None,
        },
        Refusal {
            label: "ambiguous",
            before: ambiguate_txn_4,
            request: || refund("txn_4", 100),
            error_type: "ambiguous",
            outcome: "refused",
            reason: "ambiguous",
            decision: Some("allow"),
            receipt: true,
            state: Some("ambiguous"),
        },
        Refusal {
            label: "attempt ceiling",
            before: fail_txn_5_twice,
            request: || refund("txn_5", 100),
            error_type: "attempt_ceiling",
            outcome: "refused",
            reason: "attempt_ceiling",
            decision: Some("allow"),
            receipt: true,
            state: Some("failed"),
        },
        Refusal {
            label: "arguments that are not an object (a fault, decided nothing)",
            before: nothing,
            request: || ActionRequest::new("stripe.refund", json!([1]), ada()),
            error_type: "invalid_input",
            outcome: "error",
            reason: "",
            decision: None,
            receipt: false,
            state: None,
        },
    ];
    let s = setup();
    for case in cases {
        (case.before)(&s);
        s.clock.advance(SECOND);
        let at = s.warden.kernel().now();
        let (outcome, trace) = traced(&s, (case.request)());
        let refusal = outcome.expect_err(case.label);
        let span = trace.span();
        assert!(trace.is_ended(), "{}", case.label);
        assert_eq!((span.start, span.end), (at, Some(at)), "{}", case.label);
        assert_eq!(span.status, SpanStatus::Error(refusal.to_string()), "{}", case.label);
        assert_eq!(text(&span, "error.type"), Some(case.error_type), "{}", case.label);
        assert_eq!(text(&span, "warden.outcome"), Some(case.outcome), "{}", case.label);
        assert_eq!(text(&span, "warden.decision"), case.decision, "{}", case.label);
        assert_eq!(text(&span, "warden.effect.state"), case.state, "{}: {span:?}", case.label);
        if case.decision.is_some() {
            assert_eq!(text(&span, "warden.decision.reason"), Some(case.reason), "{}", case.label);
            assert_eq!(span.events.len(), 1, "{}: one decision, one guardrail event", case.label);
        } else {
            assert!(span.events.is_empty(), "{}", case.label);
        }
        assert_eq!(span.attribute("warden.receipt.id").is_some(), case.receipt, "{}: {span:?}", case.label);
        if case.receipt {
            assert_names_its_receipt(&s, &span);
        }
        let counted = measurement(&span, "warden.actions");
        assert_eq!(counted.len(), 1, "{}", case.label);
        let error_type = counted[0].attributes.iter().find(|(k, _)| *k == "error.type").map(|(_, v)| v.clone());
        assert_eq!(error_type, Some(AttributeValue::Str(case.error_type.into())), "{}", case.label);
    }
}

#[test]
fn an_approval_required_span_names_the_request_a_human_answers() {
    let s = setup();
    let (outcome, trace) = traced(&s, refund("txn_r", 90_000));
    let Err(Error::ApprovalRequired { request_id, .. }) = outcome else { panic!("{outcome:?}") };
    assert_eq!(text(&trace.span(), "warden.approval.id"), Some(request_id.as_str()));
}

#[test]
fn each_outcome_ends_the_span_with_its_effect_state_and_error_type() {
    let s = setup();
    type Report = fn(warden::Permit) -> warden::error::Result<()>;
    let cases: [(&str, Report, Option<&str>, &str, &str); 4] = [
        ("not executed", |p| p.not_executed("card declined"), Some("not_executed"), "failed", "failed"),
        ("ambiguous", |p| p.ambiguous("timeout"), Some("ambiguous"), "ambiguous", "ambiguous"),
        (
            "dropped",
            |p| {
                drop(p);
                Ok(())
            },
            Some("ambiguous"),
            "ambiguous",
            "ambiguous",
        ),
        ("committed", |p| p.commit(&json!(1)), None, "committed", "committed"),
    ];
    for (i, (label, report, error_type, outcome, state)) in cases.into_iter().enumerate() {
        let (permit, trace) = traced(&s, refund(&format!("txn_o{i}"), 100));
        report(permit.unwrap()).unwrap();
        let span = trace.span();
        assert_eq!(text(&span, "error.type"), error_type, "{label}");
        assert_eq!(text(&span, "warden.outcome"), Some(outcome), "{label}");
        assert_eq!(text(&span, "warden.effect.state"), Some(state), "{label}");
        assert_eq!(matches!(span.status, SpanStatus::Error(_)), error_type.is_some(), "{label}");
        assert_names_its_receipt(&s, &span);
    }
}

#[test]
fn a_late_outcome_ends_the_span_ambiguous_with_the_state_the_record_moved_to() {
    let s = setup();
    let (permit, trace) = traced(&s, refund("txn_late", 100));
    let permit = permit.unwrap();
    s.clock.advance(2 * MINUTE);
    // The lease lapsed: the next proposal of the key makes it AMBIGUOUS and is refused.
    assert!(matches!(s.warden.submit(&refund("txn_late", 100)), Err(Error::Ambiguous { .. })));
    assert!(matches!(permit.commit(&json!(1)), Err(Error::LateOutcome { .. })));
    let span = trace.span();
    assert_eq!(text(&span, "error.type"), Some("late_outcome"));
    assert_eq!(text(&span, "warden.outcome"), Some("ambiguous"));
    assert_eq!(text(&span, "warden.effect.state"), Some("ambiguous"));
    assert_names_its_receipt(&s, &span);
}

#[test]
fn a_wait_for_a_human_is_in_the_one_span_with_the_wait_and_the_time_to_decision() {
    let s = setup();
    let trace = ActionTrace::new();
    let mut request = refund("txn_w", 90_000);
    request.trace = Some(Arc::clone(&trace));
    // Asked before each pause of the wait: the clock moves only once the wait has begun.
    let waiting_now = std::sync::atomic::AtomicBool::new(false);
    let keep_waiting = || {
        waiting_now.store(true, std::sync::atomic::Ordering::SeqCst);
        true
    };
    std::thread::scope(|scope| {
        let waiting = scope.spawn(|| {
            let poll = std::time::Duration::from_millis(5);
            let wait = AnswerWait { timeout: 60 * MINUTE, poll, keep_waiting: Some(&keep_waiting) };
            s.warden.submit_recovering(&request, &Recovery { reconcile: None, wait: Some(wait) }).1
        });
        while !waiting_now.load(std::sync::atomic::Ordering::SeqCst) {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let id = s.warden.kernel().pending_approvals().unwrap().pop().unwrap().approval_id;
        s.clock.advance(10 * MINUTE);
        s.warden.kernel().grant(&id, "ops:bob").unwrap();
        let permit = waiting.join().unwrap().expect("the grant is presented in the same call");
        assert!(!trace.is_ended(), "the permit's outcome ends it");
        permit.commit(&json!(1)).unwrap();
        let span = trace.span();
        assert_eq!(text(&span, "warden.approval.id"), Some(id.as_str()));
        assert_eq!(double(&span, "warden.approval.wait_time"), Some(600.0));
        assert_eq!(double(&span, "warden.approval.decision_time"), Some(600.0));
        let decisions: Vec<_> = span.events.iter().filter(|e| e.name == "gen_ai.guardrail.result").collect();
        assert_eq!(decisions.len(), 2, "the request, then the proposal that spent the grant");
        assert_eq!(text(&span, "warden.outcome"), Some("committed"));
        assert_eq!(span.end, Some(T0 + 10 * MINUTE));
        let decided = measurement(&span, "warden.approval.decision.duration");
        assert_eq!(decided.len(), 1);
        assert_eq!(decided[0].value, 600.0);
    });
}

#[test]
fn a_reconciled_retry_is_the_same_span_with_the_hooks_answer_and_the_new_attempt() {
    let s = setup();
    s.warden.submit(&refund("txn_rc", 100)).unwrap().ambiguous("timeout").unwrap();
    let trace = ActionTrace::new();
    let mut request = refund("txn_rc", 100);
    request.trace = Some(Arc::clone(&trace));
    let hook = |_: &str| Ok(ReconcileAnswer::NotExecuted);
    let permit = s.warden.submit_recovering(&request, &Recovery { reconcile: Some(&hook), wait: None }).1.unwrap();
    permit.commit(&json!(1)).unwrap();
    let span = trace.span();
    let names: Vec<_> = span.events.iter().map(|e| e.name).collect();
    assert_eq!(names, ["gen_ai.guardrail.result", "warden.reconcile", "gen_ai.guardrail.result"]);
    assert_eq!(int(&span, "warden.effect.attempt"), Some(2));
    assert_eq!(text(&span, "warden.outcome"), Some("committed"));
    assert_eq!(span.status, SpanStatus::Unset, "the AMBIGUOUS refusal was handled, not the call's end");
}

#[test]
fn a_trace_records_one_call_and_a_second_is_refused_leaving_the_first_span() {
    let s = setup();
    let (permit, trace) = traced(&s, refund("txn_t", 100));
    permit.unwrap().commit(&json!(1)).unwrap();
    let first = trace.span();
    let mut again = refund("txn_t2", 100);
    again.trace = Some(Arc::clone(&trace));
    let refused = s.warden.submit_recovering(&again, &Recovery::default()).1.unwrap_err();
    assert!(
        matches!(refused, Error::InvalidInput(ref m) if m.message.contains("make a new trace")
        && m.kind == warden::error::InvalidInputKind::State),
        "{refused}"
    );
    assert_eq!(trace.span(), first);
    assert!(s.warden.kernel().effect("refund:txn_t2").unwrap().is_none(), "nothing was proposed");
}

#[test]
fn by_default_a_span_carries_no_argument_or_result_value() {
    let s = setup();
    let (permit, trace) = traced(&s, refund("txn_v", 4_321));
    permit.unwrap().commit(&json!({"card_last4": "4242", "refund_id": "re_77"})).unwrap();
    let record = trace.span().to_json().to_string();
    for value in ["4321", "customer-called-about-order-8812", "4242", "re_77"] {
        assert!(!record.contains(value), "{value} is in {record}");
    }
    // The one argument value a span carries is what the document's effect template renders.
    assert!(record.contains("refund:txn_v"));
}

#[test]
fn with_the_operators_opt_in_arguments_and_result_are_recorded_redacted_as_sights_redact() {
    let capture = Capture { arguments: true, results: true };
    let s = setup_with(POLICY, WardenOptions { telemetry: capture, ..WardenOptions::default() });
    let mut request = refund("txn_c", 100);
    request.arguments["api_key"] = json!("ak-7c1e55a2b3d94f60");
    request.arguments["note"] = json!("caller said Authorization: Bearer tok-3c9a1f7e5b2d8064 works");
    let (permit, trace) = traced(&s, request);
    let permit = permit.unwrap();
    permit
        .commit(
            &json!({"refund_id": "re_9", "session_token": "st-9f8e7d6c5b4a3210", "nested": {"password": "hunter22"}}),
        )
        .unwrap();
    let span = trace.span();
    let arguments: Value = serde_json::from_str(text(&span, "gen_ai.tool.call.arguments").unwrap()).unwrap();
    assert_eq!(arguments["payment_id"], "txn_c");
    assert_eq!(arguments["amount"], 100);
    assert_eq!(arguments["api_key"], "[REDACTED]");
    assert_eq!(arguments["note"], "caller said Authorization: Bearer [REDACTED] works");
    let result: Value = serde_json::from_str(text(&span, "gen_ai.tool.call.result").unwrap()).unwrap();
    assert_eq!(
        result,
        json!({"refund_id": "re_9", "session_token": "[REDACTED]", "nested": {"password": "[REDACTED]"}})
    );
    let record = span.to_json().to_string();
    for secret in ["ak-7c1e55a2b3d94f60", "tok-3c9a1f7e5b2d8064", "st-9f8e7d6c5b4a3210", "hunter22"] {
        assert!(!record.contains(secret), "{secret} is in {record}");
    }

    let (permit, trace) = traced(&s, refund("txn_c2", 100));
    permit.unwrap().not_executed("declined: key=sk-live-0123456789abcdefghij").unwrap();
    let span = trace.span();
    let SpanStatus::Error(description) = &span.status else { panic!("{span:?}") };
    assert_eq!(description, "declined: key=[REDACTED]");
    assert_eq!(span.attribute("gen_ai.tool.call.result"), None, "only a committed call has a result");
}

#[test]
fn with_the_opt_in_a_sensitive_arguments_value_is_scrubbed_wherever_the_call_repeats_it() {
    let capture = Capture { arguments: true, results: true };
    let s = setup_with(POLICY, WardenOptions { telemetry: capture, ..WardenOptions::default() });
    // Shapes no pattern knows: only the value's own sensitive key tells that it is a credential.
    let key = "ak-7c1e55a2b3d94f60";
    let pin = 80_417_293;
    enum Ends {
        Commit(Value),
        NotExecuted(String),
        Ambiguous(String),
    }
    let cases = [
        ("echoed in the result", Ends::Commit(json!({"refund_id": "re_1", "debug": format!("used {key}")}))),
        ("nested in the result", Ends::Commit(json!({"echo": {"sent": [key, pin]}}))),
        ("in the host's failure", Ends::NotExecuted(format!("processor refused {key}"))),
        ("in the host's timeout", Ends::Ambiguous(format!("timed out calling with {key} pin {pin}"))),
    ];
    for (n, (label, ends)) in cases.into_iter().enumerate() {
        let mut request = refund(&format!("txn_e{n}"), 100);
        request.arguments["api_key"] = json!(key);
        request.arguments["auth"] = json!({"credentials": {"pin": pin}});
        request.arguments["note"] = json!(format!("the customer read out {key}"));
        let (permit, trace) = traced(&s, request);
        let permit = permit.unwrap();
        match ends {
            Ends::Commit(result) => permit.commit(&result).unwrap(),
            Ends::NotExecuted(message) => permit.not_executed(&message).unwrap(),
            Ends::Ambiguous(message) => permit.ambiguous(&message).unwrap(),
        }
        let span = trace.span();
        let record = span.to_json().to_string();
        assert!(!record.contains(key) && !record.contains(&pin.to_string()), "{label}: {record}");
        let arguments: Value = serde_json::from_str(text(&span, "gen_ai.tool.call.arguments").unwrap()).unwrap();
        assert_eq!(arguments["note"], "the customer read out [REDACTED]", "{label}");
        assert_eq!(arguments["payment_id"], format!("txn_e{n}"), "{label}: what is not sensitive stays");
        match &span.status {
            SpanStatus::Error(description) => assert!(description.contains("[REDACTED]"), "{label}: {description}"),
            SpanStatus::Unset => {
                let result = text(&span, "gen_ai.tool.call.result").unwrap();
                assert!(result.contains("[REDACTED]"), "{label}: {result}");
            }
        }
    }
}

#[test]
fn without_the_opt_in_the_hosts_failure_message_is_not_in_the_span() {
    let s = setup();
    let (permit, trace) = traced(&s, refund("txn_f", 100));
    permit.unwrap().not_executed("declined for card 4000-0000-0000-0002").unwrap();
    let span = trace.span();
    assert_eq!(span.status, SpanStatus::Error("the effect was not executed (FAILED)".into()));
    assert!(!span.to_json().to_string().contains("4000-0000"));
}

#[test]
fn a_deferred_outcome_names_its_receipt_by_id_alone_and_no_outcome_write_is_timed() {
    let deferred = Outcomes::Deferred { max_delay: Outcomes::DEFAULT_MAX_DELAY };
    let s = setup_with(POLICY, WardenOptions { outcomes: deferred, ..WardenOptions::default() });
    let (permit, trace) = traced(&s, refund("txn_df", 100));
    let permit = permit.unwrap();
    let receipt_id = permit.receipt_id().to_owned();
    permit.commit(&json!(1)).unwrap();
    let span = trace.span();
    assert_eq!(text(&span, "warden.outcomes"), Some("deferred"));
    assert_eq!(text(&span, "warden.receipt.id"), Some(receipt_id.as_str()));
    assert_eq!((span.attribute("warden.receipt.seq"), span.attribute("warden.receipt.hash")), (None, None));
    let writes = measurement(&span, "warden.store.write.duration");
    assert_eq!(writes.len(), 1, "the proposal's write only: {writes:?}");
    let batches = measurement(&span, "warden.store.write.batch_size");
    assert_eq!(batches.len(), 1, "a deferred outcome saw no sync: {batches:?}");
}

#[test]
fn in_observe_mode_a_denied_call_runs_and_its_span_says_observe_and_deny() {
    let observe = POLICY.replace("environment: production\n", "environment: production\nmode: observe\n");
    let s = setup_with(&observe, WardenOptions::default());
    let (permit, trace) = traced(&s, refund("txn_obs", 900_000));
    permit.unwrap().commit(&json!(1)).unwrap();
    let span = trace.span();
    assert_eq!(span.attribute("warden.observe"), Some(&AttributeValue::Bool(true)));
    assert_eq!(text(&span, "warden.decision"), Some("deny"));
    assert_eq!(text(&span, "warden.outcome"), Some("committed"));
    assert_eq!(span.status, SpanStatus::Unset);
}

#[test]
fn the_gauges_count_effects_by_state_pending_requests_and_the_chain() {
    let s = setup();
    let read = |name: &str| warden::telemetry::gauges::read(s.warden.kernel(), name).unwrap();
    let by_state = |points: &[warden::telemetry::gauges::GaugePoint]| -> Vec<(String, i64)> {
        points
            .iter()
            .map(|p| match &p.attributes[..] {
                [("warden.effect.state", AttributeValue::Str(state))] => (state.clone(), p.value),
                other => panic!("{other:?}"),
            })
            .collect()
    };
    let zero = [("ambiguous", 0), ("executing", 0), ("reserved", 0), ("failed", 0)].map(|(s, n)| (s.to_owned(), n));
    assert_eq!(by_state(&read("warden.effects")), zero);
    s.warden.submit(&refund("g1", 100)).unwrap().ambiguous("timeout").unwrap();
    s.warden.submit(&refund("g2", 100)).unwrap().ambiguous("timeout").unwrap();
    let live = s.warden.submit(&refund("g3", 100)).unwrap();
    s.warden.submit(&refund("g4", 100)).unwrap().not_executed("declined").unwrap();
    s.warden.submit(&refund("g5", 100)).unwrap().commit(&json!(1)).unwrap();
    let _ = s.warden.submit(&refund("g6", 90_000));
    let counts = [("ambiguous", 2), ("executing", 1), ("reserved", 0), ("failed", 1)].map(|(s, n)| (s.to_owned(), n));
    assert_eq!(by_state(&read("warden.effects")), counts);
    assert_eq!(read("warden.approvals.pending")[0].value, 1);
    assert_eq!(read("warden.chain.length")[0].value, s.warden.kernel().chain_size().unwrap() as i64);
    assert_eq!(read("warden.chain.length")[0].value, 4, "four outcomes wrote receipts");
    live.commit(&json!(1)).unwrap();
    let refused = warden::telemetry::gauges::read(s.warden.kernel(), "warden.effect").unwrap_err();
    assert!(
        matches!(refused, Error::InvalidInput(ref m) if m.message.contains("warden.effects")
        && m.kind == warden::error::InvalidInputKind::Unknown),
        "{refused}"
    );
}
