//! The full pipeline under a document: each path's exact event sequence and receipt reason.

mod common;

use std::sync::Arc;

use common::*;
use warden::document::load_str;
use warden::kernel::AnswerWait;
use warden::kernel::ReconcileAnswer;
use warden::pipeline::{ActionRequest, Recovery, Warden, WardenOptions};
use warden::store::EventKind::{self, *};
use warden::{EffectState, Error, ManualClock, Principal};

const POLICY: &str = r#"
schema: warden/v1
version: "2026-11 r1"
environment: production
mode: enforce
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

struct Setup {
    _dir: tempfile::TempDir,
    warden: Warden,
    clock: ManualClock,
}

fn setup(policy: &str) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let document = load_str(policy, "test.yaml").unwrap();
    let warden = Warden::open(
        dir.path().join("state.redb"),
        document,
        WardenOptions {
            clock: Arc::new(clock.clone()),
            environment: Some("production".into()),
            ..WardenOptions::default()
        },
    )
    .unwrap();
    Setup { _dir: dir, warden, clock }
}

fn ada() -> Principal {
    Principal::new("refund-agent", Some("ada")).unwrap()
}

fn refund_request(payment: &str, amount: i64) -> ActionRequest<'static> {
    ActionRequest::new("stripe.refund", serde_json::json!({"payment_id": payment, "amount": amount}), ada())
}

/// The event types written since `after`, and the new high-water mark.
fn events_since(s: &Setup, after: u64) -> (Vec<EventKind>, u64) {
    let events = s.warden.kernel().events(after, 1000).unwrap();
    let last = events.last().map_or(after, |e| e.event_id);
    (events.into_iter().map(|e| e.kind).collect(), last)
}

fn last_receipt(s: &Setup) -> serde_json::Value {
    let row = s.warden.kernel().last_receipts(1).unwrap().pop().unwrap().1;
    warden::canonical::parse_json(&row.document).unwrap()
}

#[test]
fn a_permit_names_the_receipt_its_outcome_writes_for_every_outcome() {
    let s = setup(POLICY);
    let committed = s.warden.submit(&refund_request("txn_r1", 4200)).unwrap();
    let id = committed.receipt_id().to_owned();
    assert!(id.starts_with("rct_"), "{id}");
    committed.commit(&serde_json::json!({})).unwrap();
    assert_eq!(last_receipt(&s)["receipt_id"], id.as_str());
    let failed = s.warden.submit(&refund_request("txn_r2", 4200)).unwrap();
    let other = failed.receipt_id().to_owned();
    assert_ne!(other, id);
    failed.not_executed("the provider refused").unwrap();
    assert_eq!(last_receipt(&s)["receipt_id"], other.as_str());
    let dropped = s.warden.submit(&refund_request("txn_r3", 4200)).unwrap();
    let third = dropped.receipt_id().to_owned();
    drop(dropped);
    assert_eq!(
        (last_receipt(&s)["receipt_id"].as_str(), last_receipt(&s)["result"].as_str()),
        (Some(third.as_str()), Some("ambiguous"))
    );
}

#[test]
fn an_allowed_refund_runs_once_with_its_event_sequence() {
    let s = setup(POLICY);
    let permit = s.warden.submit(&refund_request("txn_1", 4200)).unwrap();
    assert_eq!(permit.lease_expires_at(), Some(T0 + 60 * SECOND), "the document's lease");
    permit.commit(&serde_json::json!({"refund_id": "re_1"})).unwrap();
    let (kinds, _) = events_since(&s, 0);
    assert_eq!(kinds, [ACTION_PROPOSED, POLICY_EVALUATED, EFFECT_RESERVED, EXECUTION_STARTED, EXECUTION_COMMITTED]);
    let receipt = last_receipt(&s);
    assert_eq!((receipt["result"].as_str(), receipt["decision_reason"].as_str()), (Some("committed"), Some("rule[0]")));
    assert_eq!(receipt["policy_hash"], s.warden.document().policy_hash.as_str());
    assert_eq!(receipt["policy_version"], "2026-11 r1");
}

#[test]
fn approval_required_then_approved_then_consumed() {
    let s = setup(POLICY);
    let refused = s.warden.submit(&refund_request("txn_2", 90_000)).unwrap_err();
    let Error::ApprovalRequired { request_id, .. } = refused else { panic!("{refused}") };
    let (kinds, mark) = events_since(&s, 0);
    assert_eq!(kinds, [ACTION_PROPOSED, POLICY_EVALUATED, APPROVAL_REQUESTED]);
    assert_eq!(s.warden.kernel().receipts(1, 10).unwrap().len(), 0, "no receipt for approval required");
    s.warden.kernel().grant(&request_id, "ops:bob").unwrap();
    let mut request = refund_request("txn_2", 90_000);
    request.approval_id = Some(&request_id);
    s.warden.submit(&request).unwrap().commit(&serde_json::json!(1)).unwrap();
    let (kinds, _) = events_since(&s, mark);
    assert_eq!(
        kinds,
        [
            APPROVAL_GRANTED,
            ACTION_PROPOSED,
            POLICY_EVALUATED,
            APPROVAL_CONSUMED,
            EFFECT_RESERVED,
            EXECUTION_STARTED,
            EXECUTION_COMMITTED
        ]
    );
    assert_eq!(last_receipt(&s)["approver"], "ops:bob");
}

#[test]
fn each_refusal_writes_a_receipt_with_its_reason() {
    let s = setup(POLICY);
    let table: Vec<(ActionRequest<'static>, &str, &str, Vec<EventKind>)> = vec![
        (
            ActionRequest::new("db.drop", serde_json::json!({}), ada()),
            "denied",
            "unknown_action",
            vec![ACTION_PROPOSED, POLICY_EVALUATED, ACTION_DENIED],
        ),
        (
            refund_request("txn_3", 9_000_000),
            "denied",
            "rule[2]",
            vec![ACTION_PROPOSED, POLICY_EVALUATED, ACTION_DENIED],
        ),
        (
            ActionRequest::new("stripe.refund", serde_json::json!({"amount": 5}), ada()),
            "denied",
            "effect_key_error",
            vec![ACTION_PROPOSED, POLICY_EVALUATED, ACTION_DENIED],
        ),
    ];
    let mut mark = 0;
    for (request, result, reason, expected) in table {
        let refused = s.warden.submit(&request).unwrap_err();
        assert_eq!(refused.reason(), reason, "{refused}");
        let receipt = last_receipt(&s);
        assert_eq!((receipt["result"].as_str(), receipt["decision_reason"].as_str()), (Some(result), Some(reason)));
        let (kinds, next) = events_since(&s, mark);
        assert_eq!(kinds, expected, "{reason}");
        mark = next;
    }
}

#[test]
fn duplicate_ambiguous_and_ceiling_are_blocked_with_their_reasons() {
    let s = setup(POLICY);
    s.warden.submit(&refund_request("txn_4", 5)).unwrap().commit(&serde_json::json!(1)).unwrap();
    let (_, mark) = events_since(&s, 0);
    assert_eq!(s.warden.submit(&refund_request("txn_4", 5)).unwrap_err().reason(), "duplicate");
    assert_eq!(events_since(&s, mark).0, [ACTION_PROPOSED, POLICY_EVALUATED, EFFECT_RESERVATION_REFUSED]);
    assert_eq!(last_receipt(&s)["result"], "blocked");

    s.warden.submit(&refund_request("txn_5", 5)).unwrap().ambiguous("timeout").unwrap();
    assert_eq!(s.warden.submit(&refund_request("txn_5", 5)).unwrap_err().reason(), "ambiguous");

    for _ in 0..2 {
        s.warden.submit(&refund_request("txn_6", 5)).unwrap().not_executed("declined").unwrap();
    }
    assert_eq!(s.warden.submit(&refund_request("txn_6", 5)).unwrap_err().reason(), "attempt_ceiling");
    assert_eq!(last_receipt(&s)["decision_reason"], "attempt_ceiling");
}

#[test]
fn a_read_without_an_effect_runs_unreserved_and_leaves_a_receipt() {
    let s = setup(POLICY);
    let request = ActionRequest::new("customer.read", serde_json::json!({"id": "c_1"}), ada());
    let permit = s.warden.submit(&request).unwrap();
    assert_eq!(permit.effect_key(), None);
    permit.commit(&serde_json::json!({"name": "Ada"})).unwrap();
    assert_eq!(last_receipt(&s)["result"], "committed");
    assert!(s.warden.kernel().effects(None, 10).unwrap().is_empty());
}

#[test]
fn no_principal_is_refused_and_leaves_no_receipt_and_no_event() {
    let s = setup(POLICY);
    let mut request = refund_request("txn_7", 5);
    request.principal = None;
    let error = s.warden.submit(&request).unwrap_err();
    assert_eq!(error.reason(), "no_principal");
    // A programming error, not a denial: a fault whose message says how to set one.
    assert!(matches!(error, Error::NoPrincipal { .. }) && !error.is_refusal(), "{error:?}");
    let message = error.to_string();
    assert!(message.contains("warden.context(") && message.contains("withContext("), "{message}");
    assert!(s.warden.kernel().receipts(1, 10).unwrap().is_empty());
    assert!(s.warden.kernel().events(0, 10).unwrap().is_empty());
}

#[test]
fn an_expired_principal_is_denied() {
    let s = setup(POLICY);
    let mut request = refund_request("txn_8", 5);
    request.principal_expires_at = Some(T0 - 1);
    assert_eq!(s.warden.submit(&request).unwrap_err().reason(), "principal_expired");
    assert_eq!(last_receipt(&s)["result"], "denied");
}

#[test]
fn an_allow_spends_a_presented_approval_without_refusing() {
    let s = setup(POLICY);
    // 5 is allowed; a human approved this exact action anyway (a stale bearer token).
    let action = warden::Action::new(
        "stripe.refund",
        serde_json::json!({"payment_id": "txn_9", "amount": 5}),
        ada(),
        None,
        "production",
    )
    .unwrap();
    let request_id = s.warden.kernel().request_approval(&action, None).unwrap().approval_id;
    s.warden.kernel().grant(&request_id, "ops:bob").unwrap();
    let mut request = refund_request("txn_9", 5);
    request.approval_id = Some(&request_id);
    s.warden.submit(&request).unwrap().commit(&serde_json::json!(1)).unwrap();
    assert_eq!(
        s.warden.kernel().approval(&request_id).unwrap().unwrap().status,
        warden::approval::ApprovalStatus::Consumed
    );
    // Spent now: handing it to another allowed action is ignored, never a refusal.
    let mut again = ActionRequest::new("customer.read", serde_json::json!({}), ada());
    again.approval_id = Some(&request_id);
    s.warden.submit(&again).unwrap().commit(&serde_json::json!(1)).unwrap();
}

#[test]
fn reconcile_not_executed_resolves_and_retries_once() {
    let s = setup(POLICY);
    s.warden.submit(&refund_request("txn_10", 5)).unwrap().ambiguous("timeout").unwrap();
    let mut asked = 0;
    let permit = s
        .warden
        .submit_reconciling(&refund_request("txn_10", 5), |key| {
            asked += 1;
            assert_eq!(key, "refund:txn_10");
            ReconcileAnswer::NotExecuted
        })
        .unwrap();
    assert_eq!((asked, permit.attempt()), (1, 2));
    permit.commit(&serde_json::json!(1)).unwrap();
    let resolved = s.warden.kernel().events(0, 1000).unwrap().into_iter().find(|e| e.kind == EFFECT_RESOLVED).unwrap();
    assert_eq!(resolved.to_json()["data"]["resolved_by"], "reconcile:stripe.refund");
}

#[test]
fn reconcile_committed_makes_the_retry_a_duplicate_and_unknown_moves_nothing() {
    let s = setup(POLICY);
    s.warden.submit(&refund_request("txn_11", 5)).unwrap().ambiguous("timeout").unwrap();
    let refused = s.warden.submit_reconciling(&refund_request("txn_11", 5), |_| ReconcileAnswer::Unknown).unwrap_err();
    assert_eq!(refused.reason(), "ambiguous");
    assert_eq!(s.warden.kernel().effect("refund:txn_11").unwrap().unwrap().state, EffectState::Ambiguous);
    let refused =
        s.warden.submit_reconciling(&refund_request("txn_11", 5), |_| ReconcileAnswer::Committed).unwrap_err();
    assert_eq!(refused.reason(), "duplicate");
    assert_eq!(s.warden.kernel().effect("refund:txn_11").unwrap().unwrap().state, EffectState::Committed);
}

#[test]
fn observe_mode_lets_a_denied_action_run_and_says_what_enforce_would_have_done() {
    let s = setup(&POLICY.replace("mode: enforce", "mode: observe"));
    let permit = s.warden.submit(&refund_request("txn_12", 9_000_000)).unwrap();
    permit.commit(&serde_json::json!(1)).unwrap();
    let receipt = last_receipt(&s);
    assert_eq!((receipt["result"].as_str(), receipt["execution"].as_str()), (Some("observed"), Some("committed")));
    assert_eq!(receipt["would_have"]["decision"], "deny");
    assert_eq!(receipt["would_have"]["reason"], "rule[2]");
}

#[test]
fn the_environment_is_fixed_by_the_argument_before_the_document() {
    let dir = tempfile::tempdir().unwrap();
    let document = load_str(POLICY, "test.yaml").unwrap();
    let warden = Warden::open(
        dir.path().join("s.redb"),
        document,
        WardenOptions {
            clock: Arc::new(ManualClock::new(T0)),
            environment: Some("staging".into()),
            ..WardenOptions::default()
        },
    )
    .unwrap();
    assert_eq!(warden.kernel().environment(), "staging");
    let permit = warden.submit(&refund_request("txn_13", 5)).unwrap();
    assert_eq!(permit.action().environment, "staging");
    permit.commit(&serde_json::json!(1)).unwrap();
}

#[test]
fn a_document_with_an_empty_authority_section_denies_every_action() {
    let policy = format!("{POLICY}authority:\n  grants: []\n");
    let document = load_str(&policy, "test.yaml").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let warden = Warden::open(dir.path().join("s.redb"), document, WardenOptions::default()).unwrap();
    let refused = warden.submit(&ActionRequest::new("customer.read", serde_json::json!({}), ada())).unwrap_err();
    assert_eq!(refused.reason(), "no_authority");
}

#[test]
fn no_human_is_asked_to_approve_an_effect_that_cannot_run() {
    let s = setup(POLICY);
    s.warden.submit(&refund_request("txn_14", 5)).unwrap().ambiguous("timeout").unwrap();
    // 90_000 needs approval, but the key is AMBIGUOUS: refused before any request is made.
    let refused = s.warden.submit(&refund_request("txn_14", 90_000)).unwrap_err();
    assert_eq!(refused.reason(), "ambiguous");
    assert!(s.warden.kernel().pending_approvals().unwrap().is_empty());
    assert_eq!(last_receipt(&s)["result"], "blocked");
}

#[test]
fn a_traceparent_handed_to_submit_is_on_every_receipt_of_the_call_and_an_invalid_one_is_refused() {
    let s = setup(POLICY);
    let trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let mut request = refund_request("p1", 100);
    request.traceparent = Some(trace);
    let permit = s.warden.submit(&request).unwrap();
    assert_eq!(permit.traceparent(), Some(trace));
    permit.commit(&serde_json::json!({"refund_id": "re_1"})).unwrap();
    let mut denied = refund_request("p2", 9_000_000);
    denied.traceparent = Some(trace);
    assert!(matches!(s.warden.submit(&denied), Err(Error::Denied { .. })));
    let untraced = s.warden.submit(&refund_request("p3", 100)).unwrap();
    untraced.commit(&serde_json::json!({})).unwrap();
    let receipts: Vec<serde_json::Value> =
        s.warden.kernel().last_receipts(3).unwrap().into_iter().map(|(_, row)| row.to_json()).collect();
    let traced: Vec<&str> = receipts.iter().filter_map(|r| r.get("traceparent").and_then(|t| t.as_str())).collect();
    assert_eq!(traced, [trace, trace], "the committed and the denied receipt carry it: {receipts:?}");
    assert!(receipts.iter().any(|r| r["effect_key"] == "refund:p3" && r.get("traceparent").is_none()));
    assert!(s.warden.kernel().verify_chain().unwrap().ok);

    let mut invalid = refund_request("p4", 100);
    invalid.traceparent = Some("00-not-a-trace-01");
    match s.warden.submit(&invalid) {
        Err(Error::InvalidInput(refused)) => {
            assert!(refused.message.contains("W3C trace context"), "{refused}");
            assert_eq!(refused.kind, warden::error::InvalidInputKind::Malformed, "{refused}");
            assert_eq!(refused.path.as_deref(), Some("traceparent"), "{refused}");
        }
        other => panic!("an invalid traceparent must be refused as invalid input, got {other:?}"),
    }
    assert_eq!(s.warden.kernel().last_receipts(10).unwrap().len(), 3, "nothing written for it");
}

/// `Warden::action_for` is the action `submit` records: the document's resource template
/// decides the resource (the caller's is ignored), else the caller's resource is kept; a
/// template that cannot render refuses the action, and `refused_action_for` leaves its
/// resource empty instead.
#[test]
fn the_action_a_request_becomes_is_the_action_submit_records() {
    let policy = format!("{POLICY}  stripe.capture:\n    resource: \"payment:{{payment_id}}\"\n    decision: allow\n");
    let s = setup(&policy);
    let mut read = ActionRequest::new("customer.read", serde_json::json!({"id": 7}), ada());
    read.resource = Some("customer:7".into());
    let built = s.warden.action_for(&read).unwrap();
    assert_eq!((built.resource.as_deref(), built.environment.as_str()), (Some("customer:7"), "production"));
    s.warden.submit(&read).unwrap().not_executed("test").unwrap();
    let receipt = last_receipt(&s);
    assert_eq!(
        (receipt["resource"].as_str(), receipt["action_hash"].as_str()),
        (Some("customer:7"), Some(built.hash().unwrap().as_str()))
    );

    let mut capture = ActionRequest::new("stripe.capture", serde_json::json!({"payment_id": "p/1"}), ada());
    capture.resource = Some("chosen-by-the-caller".into());
    assert_eq!(s.warden.action_for(&capture).unwrap().resource.as_deref(), Some("payment:p%2F1"));

    let unrenderable = ActionRequest::new("stripe.capture", serde_json::json!({}), ada());
    assert!(matches!(s.warden.action_for(&unrenderable), Err(Error::InvalidInput(_))));
    assert_eq!(s.warden.refused_action_for(&unrenderable).unwrap().resource, None);
}

// ---- the one propose-and-wait (`submit_recovering`), judged by the kernel's clock ------------

const TWO_DAYS: i64 = 2 * 24 * 60 * 60 * 1_000_000;
const MINUTE: i64 = 60 * 1_000_000;

/// The id of the one pending request, once the waiting call has made it.
fn pending_request(s: &Setup) -> String {
    loop {
        if let Some(record) = s.warden.kernel().pending_approvals().unwrap().first() {
            return record.approval_id.clone();
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

#[test]
fn a_wait_of_two_days_presents_the_grant_given_ten_minutes_in_by_the_kernels_clock() {
    let s = setup(POLICY);
    std::thread::scope(|scope| {
        let waiting = scope.spawn(|| {
            let wait = AnswerWait { timeout: TWO_DAYS, poll: std::time::Duration::from_millis(5), keep_waiting: None };
            s.warden
                .submit_recovering(&refund_request("txn_w1", 90_000), &Recovery { reconcile: None, wait: Some(wait) })
                .1
        });
        let id = pending_request(&s);
        s.clock.advance(10 * MINUTE);
        s.warden.kernel().grant(&id, "ops:bob").unwrap();
        let permit = waiting.join().unwrap().expect("the grant is presented in the same call");
        assert_eq!(permit.approval_id(), Some(id.as_str()));
        permit.commit(&serde_json::json!(1)).unwrap();
    });
}

#[test]
fn a_wait_ends_with_the_requests_expiry_refused_as_expired_not_denied_and_the_next_proposal_asks_anew() {
    let s = setup(POLICY);
    std::thread::scope(|scope| {
        let waiting = scope.spawn(|| {
            let wait = AnswerWait { timeout: TWO_DAYS, poll: std::time::Duration::from_millis(5), keep_waiting: None };
            s.warden
                .submit_recovering(&refund_request("txn_w2", 90_000), &Recovery { reconcile: None, wait: Some(wait) })
                .1
        });
        let id = pending_request(&s);
        s.clock.advance(16 * MINUTE);
        match waiting.join().unwrap() {
            Err(Error::ApprovalMismatch { reason, approval_id, detail }) => {
                assert_eq!((reason.as_str(), approval_id.as_str()), ("approval_expired", id.as_str()));
                assert!(detail.contains("never answered"), "{detail}");
            }
            other => panic!("expected approval_expired, got {other:?}"),
        }
        let receipt = last_receipt(&s);
        assert_eq!(
            (receipt["result"].as_str(), receipt["decision_reason"].as_str(), receipt["approval_id"].as_str()),
            (Some("blocked"), Some("approval_expired"), Some(id.as_str())),
            "{receipt}"
        );
        let record = s.warden.kernel().approval(&id).unwrap().expect("the request");
        assert_eq!(record.status.as_str(), "expired");
        // Nobody denied it: the same action may be asked for again, as a new request.
        match s.warden.submit(&refund_request("txn_w2", 90_000)) {
            Err(Error::ApprovalRequired { request_id, .. }) => assert_ne!(request_id, id),
            other => panic!("expected a new request, got {other:?}"),
        }
    });
}

#[test]
fn a_wait_the_caller_stops_wanting_ends_at_once_and_a_denied_answer_refuses_as_denied() {
    let s = setup(POLICY);
    let gone = || false;
    let wait = AnswerWait { timeout: TWO_DAYS, poll: std::time::Duration::from_millis(5), keep_waiting: Some(&gone) };
    let (_, outcome) =
        s.warden.submit_recovering(&refund_request("txn_w3", 90_000), &Recovery { reconcile: None, wait: Some(wait) });
    assert!(matches!(outcome, Err(Error::ApprovalRequired { .. })), "{outcome:?}");
    std::thread::scope(|scope| {
        let waiting = scope.spawn(|| {
            let wait = AnswerWait { timeout: TWO_DAYS, poll: std::time::Duration::from_millis(5), keep_waiting: None };
            s.warden
                .submit_recovering(&refund_request("txn_w4", 90_000), &Recovery { reconcile: None, wait: Some(wait) })
                .1
        });
        let id = loop {
            let pending = s.warden.kernel().pending_approvals().unwrap();
            let asked_for_w4 = |r: &&warden::approval::ApprovalRecord| {
                r.action.as_ref().is_some_and(|action| action.arguments.contains("txn_w4"))
            };
            if let Some(record) = pending.iter().find(asked_for_w4) {
                break record.approval_id.clone();
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        };
        let approver = warden::kernel::asserted("ops:bob").unwrap();
        s.warden.kernel().answer(&id, &approver, None, false, None, None).unwrap();
        let refused = waiting.join().unwrap().unwrap_err();
        assert_eq!(refused.reason(), "approval_denied");
    });
}

#[test]
fn a_failing_reconcile_hook_resolves_nothing_and_names_why() {
    let s = setup(POLICY);
    s.warden.submit(&refund_request("txn_w5", 5)).unwrap().ambiguous("timeout").unwrap();
    let hook = |_: &str| Err("the provider's API is down".to_owned());
    let (_, outcome) =
        s.warden.submit_recovering(&refund_request("txn_w5", 5), &Recovery { reconcile: Some(&hook), wait: None });
    match outcome {
        Err(Error::InvalidInput(refused)) => {
            assert!(refused.message.contains("the provider's API is down"), "{refused}");
            assert_eq!(refused.kind, warden::error::InvalidInputKind::HookFailed, "{refused}");
        }
        other => panic!("expected InvalidInput, got {other:?}"),
    }
    assert_eq!(s.warden.kernel().effect("refund:txn_w5").unwrap().unwrap().state, EffectState::Ambiguous);
}
