//! Store conformance: the retry table, leases, approvals, resolution, receipts and events,
//! each named for the guarantee it checks.

mod common;

use std::sync::{Arc, Barrier};
use warden::test_support::KernelInternals;

use common::*;
use warden::effect::idempotency_token;
use warden::store::EventKind;
use warden::{Decision, DuplicateState, EffectState, Error, Proposal, Ruling};

fn reasons(fixture: &Fixture) -> Vec<String> {
    fixture
        .kernel
        .receipts(1, 1000)
        .unwrap()
        .into_iter()
        .map(|(_, r)| {
            let doc: serde_json::Value = serde_json::from_str(&r.document).unwrap();
            format!("{}:{}", doc["result"].as_str().unwrap(), doc["decision_reason"].as_str().unwrap())
        })
        .collect()
}

#[test]
fn reserve_then_commit_then_retry_is_refused_as_committed() {
    let f = Fixture::new();
    let t = key_template();
    let action = refund("txn_1", 500);
    let permit = f.kernel.propose(&allow(&action, &t)).unwrap();
    assert_eq!(permit.effect_key(), Some("refund:txn_1"));
    assert_eq!(permit.attempt(), 1);
    assert_eq!(f.kernel.effect("refund:txn_1").unwrap().unwrap().state, EffectState::Executing);
    permit.commit(&serde_json::json!({"refund_id": "re_1"})).unwrap();
    let record = f.kernel.effect("refund:txn_1").unwrap().unwrap();
    assert_eq!(record.state, EffectState::Committed);
    assert_eq!(record.result.unwrap().json, r#"{"refund_id":"re_1"}"#);

    let again = refund("txn_1", 500);
    let refused = f.kernel.propose(&allow(&again, &t)).unwrap_err();
    assert!(matches!(refused, Error::Duplicate { state: DuplicateState::Committed, .. }), "{refused}");
    assert_eq!(reasons(&f), ["committed:decision", "blocked:duplicate"]);
}

#[test]
fn live_lease_refuses_even_the_same_action_as_in_progress() {
    let f = Fixture::new();
    let t = key_template();
    let action = refund("txn_1", 500);
    let _permit = f.kernel.propose(&allow(&action, &t)).unwrap();
    let refused = f.kernel.propose(&allow(&action, &t)).unwrap_err();
    assert!(matches!(refused, Error::Duplicate { state: DuplicateState::InProgress, .. }), "{refused}");
    assert_eq!(refused.reason(), "in_progress");
}

#[test]
fn failed_renews_with_the_next_attempt_and_a_new_token() {
    let f = Fixture::new();
    let t = key_template();
    let first = f.kernel.propose(&allow(&refund("txn_1", 5), &t)).unwrap();
    let token1 = first.idempotency_token().unwrap().to_owned();
    first.not_executed("card declined before the charge").unwrap();
    assert_eq!(f.kernel.effect("refund:txn_1").unwrap().unwrap().state, EffectState::Failed);
    let second = f.kernel.propose(&allow(&refund("txn_1", 5), &t)).unwrap();
    assert_eq!(second.attempt(), 2);
    assert_ne!(second.idempotency_token().unwrap(), token1);
    assert_eq!(second.idempotency_token().unwrap(), idempotency_token("refund:txn_1", 2).unwrap());
    let record = f.kernel.effect("refund:txn_1").unwrap().unwrap();
    assert_eq!(
        (record.state, record.attempt, record.error.as_deref(), record.result.as_ref()),
        (EffectState::Executing, 2, None, None)
    );
}

#[test]
fn max_attempts_is_a_ceiling_on_failed_renewals() {
    let f = Fixture::new();
    let t = key_template();
    for _ in 0..2 {
        let action = refund("txn_1", 5);
        let mut p = allow(&action, &t);
        p.max_attempts = Some(2);
        f.kernel.propose(&p).unwrap().not_executed("nope").unwrap();
    }
    let action = refund("txn_1", 5);
    let mut p = allow(&action, &t);
    p.max_attempts = Some(2);
    let refused = f.kernel.propose(&p).unwrap_err();
    assert!(matches!(refused, Error::AttemptCeiling { attempts: 2, max_attempts: 2, .. }), "{refused}");
    assert_eq!(f.kernel.effect("refund:txn_1").unwrap().unwrap().state, EffectState::Failed);
}

#[test]
fn ambiguous_refuses_every_retry_until_resolved() {
    let f = Fixture::new();
    let t = key_template();
    f.kernel.propose(&allow(&refund("txn_1", 5), &t)).unwrap().ambiguous("connection reset after send").unwrap();
    for _ in 0..3 {
        let refused = f.kernel.propose(&allow(&refund("txn_1", 5), &t)).unwrap_err();
        assert!(matches!(refused, Error::Ambiguous { .. }), "{refused}");
    }
    assert_eq!(f.kernel.effect("refund:txn_1").unwrap().unwrap().state, EffectState::Ambiguous);
}

#[test]
fn lease_expiry_keeps_the_ambiguous_write_while_refusing_the_call() {
    let f = Fixture::new();
    let t = key_template();
    let action = refund("txn_1", 5);
    let mut proposal = allow(&action, &t);
    proposal.lease = Some(30 * SECOND);
    let permit = f.kernel.propose(&proposal).unwrap();
    std::mem::forget(permit); // the worker vanished without a word
    f.clock.advance(31 * SECOND);
    let refused = f.kernel.propose(&allow(&refund("txn_1", 5), &t)).unwrap_err();
    assert!(matches!(refused, Error::Ambiguous { .. }), "{refused}");
    let record = f.kernel.effect("refund:txn_1").unwrap().unwrap();
    assert_eq!(record.state, EffectState::Ambiguous);
    assert_eq!(record.error.as_deref(), Some(warden::effect::LEASE_EXPIRED));
}

#[test]
fn a_late_commit_after_the_record_moved_is_refused_and_kept_as_evidence() {
    let f = Fixture::new();
    let t = key_template();
    let action = refund("txn_1", 5);
    let mut proposal = allow(&action, &t);
    proposal.lease = Some(SECOND);
    let permit = f.kernel.propose(&proposal).unwrap();
    f.clock.advance(2 * SECOND);
    let _ = f.kernel.propose(&allow(&refund("txn_1", 5), &t)).unwrap_err(); // ambiguates
    let late = permit.commit(&serde_json::json!({"ok": true})).unwrap_err();
    assert!(matches!(late, Error::LateOutcome { state: EffectState::Ambiguous, .. }), "{late}");
    assert_eq!(f.kernel.effect("refund:txn_1").unwrap().unwrap().state, EffectState::Ambiguous);
    let last = f.kernel.receipts(1, 100).unwrap().pop().unwrap().1;
    assert!(last.document.contains(r#""result":"ambiguous""#));
    assert!(last.executor_result.is_some(), "the late result is still kept as evidence");
}

#[test]
fn a_dropped_permit_records_ambiguous() {
    let f = Fixture::new();
    let t = key_template();
    drop(f.kernel.propose(&allow(&refund("txn_1", 5), &t)).unwrap());
    assert_eq!(f.kernel.effect("refund:txn_1").unwrap().unwrap().state, EffectState::Ambiguous);
    assert_eq!(reasons(&f), ["ambiguous:decision"]);
}

#[test]
fn resolve_moves_only_ambiguous_and_records_who() {
    let f = Fixture::new();
    let t = key_template();
    let permit = f.kernel.propose(&allow(&refund("txn_1", 5), &t)).unwrap();
    let refused = f.kernel.resolve("refund:txn_1", EffectState::Committed, "ops:ada").unwrap_err();
    assert!(matches!(refused, Error::NotResolvable { state: EffectState::Executing, .. }), "{refused}");
    permit.ambiguous("timeout").unwrap();
    let resolved = f.kernel.resolve("refund:txn_1", EffectState::Committed, "ops:ada").unwrap();
    assert_eq!((resolved.state, resolved.resolved_by.as_deref()), (EffectState::Committed, Some("ops:ada")));
    assert!(resolved.error.unwrap().contains("was: timeout"));
    let again = f.kernel.resolve("refund:txn_1", EffectState::Failed, "ops:ada").unwrap_err();
    assert!(matches!(again, Error::NotResolvable { state: EffectState::Committed, .. }));
    for to in [EffectState::Executing, EffectState::Ambiguous] {
        assert!(matches!(f.kernel.resolve("refund:txn_1", to, "x").unwrap_err(), Error::InvalidInput(_)));
    }
    assert!(matches!(f.kernel.resolve("refund:none", EffectState::Failed, "x").unwrap_err(), Error::NotFound(_)));
    assert!(matches!(
        f.kernel.resolve("refund:txn_1", EffectState::Failed, "eve\nforged line").unwrap_err(),
        Error::InvalidInput(_)
    ));
}

#[test]
fn resolution_attribution_is_cleared_on_renewal() {
    let f = Fixture::new();
    let t = key_template();
    f.kernel.propose(&allow(&refund("txn_1", 5), &t)).unwrap().ambiguous("timeout").unwrap();
    f.kernel.resolve("refund:txn_1", EffectState::Failed, "ops:bob").unwrap();
    let permit = f.kernel.propose(&allow(&refund("txn_1", 5), &t)).unwrap();
    assert_eq!(permit.attempt(), 2);
    let record = f.kernel.effect("refund:txn_1").unwrap().unwrap();
    assert_eq!((record.resolved_by, record.error), (None, None));
}

#[test]
fn no_refusal_path_writes_failed_or_deletes_a_record() {
    let f = Fixture::new();
    let t = key_template();
    // committed, ambiguous, in progress, ceiling: refuse each, and the record is untouched.
    f.kernel.propose(&allow(&refund("a", 1), &t)).unwrap().commit(&serde_json::json!(null)).unwrap();
    f.kernel.propose(&allow(&refund("b", 1), &t)).unwrap().ambiguous("?").unwrap();
    let _held = f.kernel.propose(&allow(&refund("c", 1), &t)).unwrap();
    let before: Vec<_> = f.kernel.effects(None, 100).unwrap();
    for payment in ["a", "b", "c"] {
        assert!(f.kernel.propose(&allow(&refund(payment, 1), &t)).is_err());
    }
    let after: Vec<_> = f.kernel.effects(None, 100).unwrap();
    assert_eq!(before, after);
    assert!(after.iter().all(|r| r.state != EffectState::Failed));
}

#[test]
fn extend_lease_only_for_the_live_executing_holder_and_never_shorter() {
    let f = Fixture::new();
    let t = key_template();
    let action = refund("txn_1", 5);
    let mut proposal = allow(&action, &t);
    proposal.lease = Some(10 * SECOND);
    let mut permit = f.kernel.propose(&proposal).unwrap();
    let until = permit.lease_expires_at().unwrap();
    assert!(matches!(permit.extend_lease(until - SECOND).unwrap_err(), Error::InvalidInput(_)));
    permit.extend_lease(until + 60 * SECOND).unwrap();
    assert_eq!(f.kernel.effect("refund:txn_1").unwrap().unwrap().lease_expires_at, Some(until + 60 * SECOND));
    f.clock.advance(100 * SECOND);
    let lapsed = permit.extend_lease(T0 + 200 * SECOND).unwrap_err();
    assert!(matches!(lapsed, Error::Ambiguous { .. }), "{lapsed}");
    permit.commit(&serde_json::json!(1)).unwrap();
}

#[test]
fn suspend_and_resume_are_events_of_the_holder_only_and_suspend_extends_the_lease_in_the_same_write() {
    let f = Fixture::new();
    let t = key_template();
    let action = refund("txn_s", 5);
    let mut proposal = allow(&action, &t);
    proposal.lease = Some(10 * SECOND);
    let mut permit = f.kernel.propose(&proposal).unwrap();
    let until = permit.lease_expires_at().unwrap() + 60 * SECOND;
    permit.suspend(Some(until), &serde_json::json!({"reason": "input_required", "input_requests": ["a"]})).unwrap();
    assert_eq!(permit.lease_expires_at(), Some(until));
    assert_eq!(f.kernel.effect("refund:txn_s").unwrap().unwrap().lease_expires_at, Some(until));
    // Data that is not an object, or too large, is refused before anything is written.
    assert!(matches!(permit.suspend(None, &serde_json::json!("x")).unwrap_err(), Error::InvalidInput(_)));
    let huge = serde_json::json!({"blob": "x".repeat(20_000)});
    assert!(matches!(permit.resume(&huge).unwrap_err(), Error::InvalidInput(_)));
    permit.resume(&serde_json::json!({"reason": "continuation"})).unwrap();
    let kinds = |kind: EventKind| {
        f.kernel.events(0, 1000).unwrap().into_iter().filter(|e| e.kind == kind).map(|e| e.data).collect::<Vec<_>>()
    };
    assert_eq!(kinds(EventKind::EXECUTION_SUSPENDED), [r#"{"input_requests":["a"],"reason":"input_required"}"#]);
    assert_eq!(kinds(EventKind::EXECUTION_RESUMED), [r#"{"reason":"continuation"}"#]);
    // Once the lease has lapsed the attempt holds nothing: no event is written.
    f.clock.advance(200 * SECOND);
    let lapsed = permit.resume(&serde_json::json!({})).unwrap_err();
    assert!(matches!(lapsed, Error::Ambiguous { .. }), "{lapsed}");
    assert_eq!(kinds(EventKind::EXECUTION_RESUMED).len(), 1);
    let _ = permit.ambiguous("lapsed");
}

#[test]
fn mark_ambiguous_is_idempotent_and_never_touches_a_known_outcome() {
    let f = Fixture::new();
    let t = key_template();
    let held = f.kernel.propose(&allow(&refund("a", 1), &t)).unwrap();
    let holder = Some((held.action().action_id.as_str(), held.attempt()));
    let first = f.kernel.mark_ambiguous("refund:a", holder, "operator saw a crash").unwrap();
    let second = f.kernel.mark_ambiguous("refund:a", holder, "again").unwrap();
    assert_eq!(first, second);
    let committed = f.kernel.propose(&allow(&refund("b", 1), &t)).unwrap();
    let holder_b = committed.action().action_id.clone();
    committed.commit(&serde_json::json!(1)).unwrap();
    assert!(f.kernel.mark_ambiguous("refund:b", Some((&holder_b, 1)), "no").is_err());
    assert_eq!(f.kernel.effect("refund:b").unwrap().unwrap().state, EffectState::Committed);
}

#[test]
fn approval_required_creates_a_pending_request_and_no_receipt() {
    let f = Fixture::new();
    let t = key_template();
    let action = refund("txn_9", 90_000);
    let refused = f.kernel.propose(&approve(&action, &t, None)).unwrap_err();
    let Error::ApprovalRequired { request_id, expires_at, .. } = refused else { panic!("{refused}") };
    assert_eq!(expires_at, T0 + 15 * 60 * SECOND);
    assert_eq!(f.kernel.pending_approvals().unwrap().len(), 1);
    assert_eq!(f.kernel.receipts(1, 10).unwrap().len(), 0);
    f.kernel.grant(&request_id, "ops:bob").unwrap();
    let permit = f.kernel.propose(&approve(&refund("txn_9", 90_000), &t, Some(&request_id))).unwrap();
    assert_eq!(permit.approval_id(), Some(request_id.as_str()));
    permit.commit(&serde_json::json!({"ok": true})).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&f.kernel.receipts(1, 10).unwrap()[0].1.document).unwrap();
    assert_eq!(doc["approver"], "ops:bob");
    assert_eq!(doc["approval_id"], request_id.as_str());
}

fn granted(f: &Fixture, action: &warden::Action) -> String {
    let request = f.kernel.request_approval(action, None).unwrap();
    f.kernel.grant(&request.approval_id, "ops:bob").unwrap();
    request.approval_id
}

#[test]
fn an_approval_is_single_use() {
    let f = Fixture::new();
    let t = key_template();
    let action = refund("txn_1", 5);
    let id = granted(&f, &action);
    f.kernel.propose(&approve(&action, &t, Some(&id))).unwrap().not_executed("declined").unwrap();
    let refused = f.kernel.propose(&approve(&refund("txn_1", 5), &t, Some(&id))).unwrap_err();
    assert!(matches!(&refused, Error::ApprovalMismatch { reason, .. } if reason == "consumed"), "{refused}");
}

#[test]
fn a_mutated_action_is_refused_and_leaves_the_approval_granted() {
    let f = Fixture::new();
    let t = key_template();
    let id = granted(&f, &refund("txn_1", 5));
    let refused = f.kernel.propose(&approve(&refund("txn_1", 5_000_000), &t, Some(&id))).unwrap_err();
    assert!(matches!(&refused, Error::ApprovalMismatch { reason, .. } if reason == "mismatch"), "{refused}");
    assert_eq!(f.kernel.approval(&id).unwrap().unwrap().status, warden::approval::ApprovalStatus::Granted);
    f.kernel.propose(&approve(&refund("txn_1", 5), &t, Some(&id))).unwrap().commit(&serde_json::json!(1)).unwrap();
}

#[test]
fn expiry_is_checked_at_consumption_and_the_expired_status_is_kept() {
    let f = Fixture::new();
    let t = key_template();
    let action = refund("txn_1", 5);
    let id = granted(&f, &action);
    f.clock.advance(16 * 60 * SECOND);
    let refused = f.kernel.propose(&approve(&action, &t, Some(&id))).unwrap_err();
    assert!(matches!(&refused, Error::ApprovalMismatch { reason, .. } if reason == "approval_expired"), "{refused}");
    assert_eq!(f.kernel.approval(&id).unwrap().unwrap().status, warden::approval::ApprovalStatus::Expired);
    assert!(f.kernel.effect("refund:txn_1").unwrap().is_none());
}

#[test]
fn a_refused_reservation_leaves_the_approval_granted() {
    let f = Fixture::new();
    let t = key_template();
    f.kernel.propose(&allow(&refund("txn_1", 5), &t)).unwrap().commit(&serde_json::json!(1)).unwrap();
    let action = refund("txn_1", 5);
    let id = granted(&f, &action);
    let refused = f.kernel.propose(&approve(&action, &t, Some(&id))).unwrap_err();
    assert!(matches!(refused, Error::Duplicate { state: DuplicateState::Committed, .. }));
    assert_eq!(f.kernel.approval(&id).unwrap().unwrap().status, warden::approval::ApprovalStatus::Granted);
}

#[test]
fn the_approval_is_checked_before_the_effect() {
    let f = Fixture::new();
    let t = key_template();
    f.kernel.propose(&allow(&refund("txn_1", 5), &t)).unwrap().commit(&serde_json::json!(1)).unwrap();
    let other = granted(&f, &refund("txn_other", 5));
    // Both the approval (wrong hash) and the effect (committed) would refuse: the approval wins.
    let refused = f.kernel.propose(&approve(&refund("txn_1", 5), &t, Some(&other))).unwrap_err();
    assert!(matches!(&refused, Error::ApprovalMismatch { reason, .. } if reason == "mismatch"), "{refused}");
}

#[test]
fn consume_and_reserve_is_atomic() {
    let f = Fixture::new();
    let action = refund("txn_1", 5);
    let id = granted(&f, &action);
    let record = f.kernel.consume_and_reserve(&action, "refund:txn_1", Some(&id), None, None).unwrap();
    assert_eq!(record.state, EffectState::Reserved);
    assert_eq!(f.kernel.approval(&id).unwrap().unwrap().status, warden::approval::ApprovalStatus::Consumed);
    // A second consume finds it consumed and reserves nothing more.
    let other = refund("txn_1", 5);
    assert!(f.kernel.consume_and_reserve(&other, "refund:txn_1", Some(&id), None, None).is_err());
    f.kernel.begin("refund:txn_1", &action.action_id, record.attempt).unwrap();
    f.kernel
        .complete(
            "refund:txn_1",
            &action.action_id,
            record.attempt,
            warden::effect::Outcome::Committed(warden::effect::StoredResult::from_value(&serde_json::json!(1))),
        )
        .unwrap();
    assert_eq!(f.kernel.effect("refund:txn_1").unwrap().unwrap().state, EffectState::Committed);
}

#[test]
fn grant_and_deny_are_answered_exactly_once_and_never_by_the_requester() {
    let f = Fixture::new();
    let action = refund("txn_1", 5);
    let request = f.kernel.request_approval(&action, None).unwrap();
    for who in ["refund-agent", "ada", "Ada "] {
        let refused = f.kernel.grant(&request.approval_id, who).unwrap_err();
        assert!(
            matches!(&refused, Error::ApprovalMismatch { reason, .. } if reason == "approver_is_requester"),
            "{refused}"
        );
    }
    f.kernel.deny(&request.approval_id, "ops:bob", Some("too large")).unwrap();
    let again = f.kernel.grant(&request.approval_id, "ops:carol").unwrap_err();
    assert!(matches!(&again, Error::ApprovalMismatch { reason, .. } if reason == "denied"), "{again}");
    let t = key_template();
    let denied = f.kernel.propose(&approve(&action, &t, Some(&request.approval_id))).unwrap_err();
    assert!(matches!(&denied, Error::Denied { reason, .. } if reason == "approval_denied"), "{denied}");
}

#[test]
fn answering_an_expired_request_keeps_the_expired_status() {
    let f = Fixture::new();
    let request = f.kernel.request_approval(&refund("txn_1", 5), Some(60 * SECOND)).unwrap();
    f.clock.advance(61 * SECOND);
    assert!(f.kernel.pending_approvals().unwrap().is_empty());
    let refused = f.kernel.grant(&request.approval_id, "ops:bob").unwrap_err();
    assert!(matches!(&refused, Error::ApprovalMismatch { reason, .. } if reason == "expired"));
    assert_eq!(
        f.kernel.approval(&request.approval_id).unwrap().unwrap().status,
        warden::approval::ApprovalStatus::Expired
    );
}

#[test]
fn a_deny_decision_writes_a_denied_receipt_and_no_effect() {
    let f = Fixture::new();
    let t = key_template();
    let action = refund("txn_1", 5);
    let mut proposal = Proposal::new(&action, Ruling::new(Decision::Deny, "no_matching_rule"));
    proposal.effect = Some(&t);
    let refused = f.kernel.propose(&proposal).unwrap_err();
    assert!(matches!(&refused, Error::Denied { reason, .. } if reason == "no_matching_rule"));
    assert!(f.kernel.effect("refund:txn_1").unwrap().is_none());
    assert_eq!(reasons(&f), ["denied:no_matching_rule"]);
}

#[test]
fn an_unrenderable_effect_key_is_denied_with_effect_key_error() {
    let f = Fixture::new();
    let t = warden::Template::parse("refund:{missing}", warden::TemplateMode::Escaped).unwrap();
    let action = refund("txn_1", 5);
    let refused = f.kernel.propose(&allow(&action, &t)).unwrap_err();
    assert!(matches!(&refused, Error::Denied { reason, .. } if reason == "effect_key_error"), "{refused}");
    assert_eq!(reasons(&f), ["denied:effect_key_error"]);
}

#[test]
fn an_action_without_an_effect_runs_unreserved_but_leaves_a_receipt() {
    let f = Fixture::new();
    let action = refund("txn_1", 5);
    let permit = f.kernel.propose(&Proposal::new(&action, Ruling::new(Decision::Allow, "decision"))).unwrap();
    assert_eq!(permit.effect_key(), None);
    permit.commit(&serde_json::json!({"balance": 10})).unwrap();
    assert!(f.kernel.effects(None, 10).unwrap().is_empty());
    assert_eq!(reasons(&f), ["committed:decision"]);
}

#[test]
fn a_float_result_is_committed_and_stored_marked_with_its_text() {
    let f = Fixture::new();
    let t = key_template();
    let permit = f.kernel.propose(&allow(&refund("txn_1", 5), &t)).unwrap();
    permit.commit(&serde_json::json!({"fee": 0.3})).unwrap();
    let record = f.kernel.effect("refund:txn_1").unwrap().unwrap();
    assert_eq!(record.state, EffectState::Committed);
    let stored = record.result.unwrap();
    assert!(!stored.canonical);
    let marked = stored.to_value();
    assert_eq!(
        (marked["warden_result"].as_str(), marked["excerpt"].as_str()),
        (Some("not_canonical"), Some(r#"{"fee":0.3}"#))
    );
}

#[test]
fn one_winner_among_eight_threads_in_each_of_twelve_rounds() {
    let f = Fixture::new();
    let t = Arc::new(key_template());
    for round in 0..12 {
        let barrier = Arc::new(Barrier::new(8));
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let kernel = f.kernel.clone();
                let barrier = barrier.clone();
                let t = t.clone();
                std::thread::spawn(move || {
                    let action = refund(&format!("txn_{round}"), 5);
                    barrier.wait();
                    match kernel.propose(&allow(&action, &t)) {
                        Ok(permit) => {
                            permit.commit(&serde_json::json!({"round": round})).unwrap();
                            1
                        }
                        Err(Error::Duplicate { .. }) => 0,
                        Err(other) => panic!("unexpected {other}"),
                    }
                })
            })
            .collect();
        let winners: i32 = handles.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(winners, 1, "round {round}");
    }
}

#[test]
fn state_and_attribution_survive_reopen() {
    let f = Fixture::new();
    let t = key_template();
    f.kernel.propose(&allow(&refund("a", 1), &t)).unwrap().commit(&serde_json::json!({"big": 1u128 << 70})).unwrap();
    f.kernel.propose(&allow(&refund("b", 1), &t)).unwrap().ambiguous("?").unwrap();
    f.kernel.propose(&allow(&refund("c", 1), &t)).unwrap().not_executed("no").unwrap();
    f.kernel.propose(&allow(&refund("d", 1), &t)).unwrap().ambiguous("?").unwrap();
    f.kernel.resolve("refund:d", EffectState::Failed, "ops:ada").unwrap();
    let before = f.kernel.effects(None, 100).unwrap();
    let path = f.path();
    let clock = f.clock.clone();
    drop(f.kernel);
    let reopened = open(&path, &clock);
    assert_eq!(reopened.effects(None, 100).unwrap(), before);
    assert_eq!(reopened.effect("refund:d").unwrap().unwrap().resolved_by.as_deref(), Some("ops:ada"));
    assert_eq!(
        reopened.effect("refund:a").unwrap().unwrap().result.unwrap().json,
        format!("{{\"big\":{}}}", 1u128 << 70)
    );
}

#[test]
fn actions_round_trip_with_exact_types() {
    let f = Fixture::new();
    let action = warden::Action::new(
        "db.write",
        serde_json::json!({"n": 1u128 << 70, "neg": -5, "s": "x", "b": false, "z": null, "l": [1, "1", true], "o": {"k": "v"}}),
        warden::Principal::new("a", None).unwrap(),
        Some("db:1"),
        "production",
    )
    .unwrap();
    f.kernel
        .propose(&Proposal::new(&action, Ruling::new(Decision::Allow, "decision")))
        .unwrap()
        .commit(&serde_json::json!(null))
        .unwrap();
    let stored = &f.kernel.receipts(1, 1).unwrap()[0].1;
    let doc = warden::canonical::parse_json(&stored.document).unwrap();
    assert_eq!(doc["arguments"], action.canonical_arguments());
    assert_eq!(doc["action_hash"], action.hash().unwrap().as_str());
    assert_eq!(doc["arguments"]["n"].to_string(), (1u128 << 70).to_string());
}

#[test]
fn event_ids_ascend_and_name_the_pipeline_in_order() {
    let f = Fixture::new();
    let t = key_template();
    f.kernel.propose(&allow(&refund("a", 1), &t)).unwrap().commit(&serde_json::json!(1)).unwrap();
    let events = f.kernel.events(0, 100).unwrap();
    let ids: Vec<u64> = events.iter().map(|e| e.event_id).collect();
    assert_eq!(ids, (1..=ids.len() as u64).collect::<Vec<_>>());
    let kinds: Vec<EventKind> = events.iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        [
            EventKind::ACTION_PROPOSED,
            EventKind::POLICY_EVALUATED,
            EventKind::EFFECT_RESERVED,
            EventKind::EXECUTION_STARTED,
            EventKind::EXECUTION_COMMITTED
        ]
    );
}

#[test]
fn receipts_round_trip_with_their_chain_hash() {
    let f = Fixture::new();
    let t = key_template();
    for n in 0..5 {
        f.kernel.propose(&allow(&refund(&format!("p{n}"), 1), &t)).unwrap().commit(&serde_json::json!(n)).unwrap();
    }
    let rows = f.kernel.receipts(1, 10).unwrap();
    let mut prev = warden::receipt::GENESIS_HASH.to_owned();
    for (seq, row) in &rows {
        let doc = warden::canonical::parse_json(&row.document).unwrap();
        assert_eq!(doc["seq"].as_u64(), Some(*seq));
        assert_eq!(doc["prev_hash"], prev.as_str());
        assert_eq!(doc["schema"], "warden.receipt/v1");
        let hash = warden::canonical::sha256_prefixed(row.document.as_bytes());
        assert_eq!(row.hash.as_deref(), Some(hash.as_str()));
        prev = hash;
    }
    let report = f.kernel.verify_chain().unwrap();
    assert!(report.ok, "{report:?}");
    assert_eq!((report.verified, report.head_seq), (5, Some(5)));
}

#[test]
fn a_panic_poisons_the_handle_until_reopened() {
    let f = Fixture::new();
    let t = key_template();
    assert!(matches!(f.kernel.force_panic().unwrap_err(), Error::Panic(_)));
    let refused = f.kernel.propose(&allow(&refund("a", 1), &t)).unwrap_err();
    assert!(matches!(refused, Error::Poisoned(_)), "{refused}");
    let reopened = open(&f.path(), &f.clock);
    reopened.propose(&allow(&refund("a", 1), &t)).unwrap().commit(&serde_json::json!(1)).unwrap();
}

#[test]
fn two_handles_in_one_process_share_one_database() {
    let f = Fixture::new();
    let t = key_template();
    let second = open(&f.path(), &f.clock);
    let held = f.kernel.propose(&allow(&refund("a", 1), &t)).unwrap();
    let refused = second.propose(&allow(&refund("a", 1), &t)).unwrap_err();
    assert!(matches!(refused, Error::Duplicate { state: DuplicateState::InProgress, .. }), "{refused}");
    held.commit(&serde_json::json!(1)).unwrap();
    assert_eq!(second.effect("refund:a").unwrap().unwrap().state, EffectState::Committed);
}

#[test]
fn an_old_permit_of_a_reused_action_cannot_report_into_the_renewed_attempt() {
    let f = Fixture::new();
    let t = key_template();
    let action = refund("txn_1", 5);
    let first = f.kernel.propose(&allow(&action, &t)).unwrap();
    f.kernel.mark_ambiguous("refund:txn_1", Some((&action.action_id, 1)), "operator saw a crash").unwrap();
    f.kernel.resolve("refund:txn_1", EffectState::Failed, "ops:ada").unwrap();
    let second = f.kernel.propose(&allow(&action, &t)).unwrap(); // the same Action value, attempt 2
    assert_eq!(second.attempt(), 2);
    let late = first.commit(&serde_json::json!({"stale": true})).unwrap_err();
    assert!(matches!(late, Error::LateOutcome { .. }), "{late}");
    let record = f.kernel.effect("refund:txn_1").unwrap().unwrap();
    assert_eq!((record.state, record.attempt, record.result), (EffectState::Executing, 2, None));
    second.commit(&serde_json::json!({"fresh": true})).unwrap();
}

#[test]
fn a_late_not_executed_after_the_record_became_ambiguous_stays_ambiguous() {
    let f = Fixture::new();
    let t = key_template();
    let action = refund("txn_1", 5);
    let mut proposal = allow(&action, &t);
    proposal.lease = Some(SECOND);
    let permit = f.kernel.propose(&proposal).unwrap();
    f.clock.advance(2 * SECOND);
    let _ = f.kernel.propose(&allow(&refund("txn_1", 5), &t)).unwrap_err();
    assert!(matches!(permit.not_executed("declined").unwrap_err(), Error::LateOutcome { .. }));
    assert_eq!(f.kernel.effect("refund:txn_1").unwrap().unwrap().state, EffectState::Ambiguous);
}

#[test]
fn the_resolution_event_names_the_resolver() {
    let f = Fixture::new();
    let t = key_template();
    f.kernel.propose(&allow(&refund("txn_1", 5), &t)).unwrap().ambiguous("timeout").unwrap();
    f.kernel.resolve("refund:txn_1", EffectState::Committed, "ops:ada").unwrap();
    let event =
        f.kernel.events(0, 100).unwrap().into_iter().rev().find(|e| e.kind == EventKind::EFFECT_RESOLVED).unwrap();
    let data = event.to_json()["data"].clone();
    assert_eq!((data["resolved_by"].as_str(), data["state"].as_str()), (Some("ops:ada"), Some("committed")));
}

fn observe<'a>(action: &'a warden::Action, template: &'a warden::Template, decision: Decision) -> Proposal<'a> {
    let mut proposal = Proposal::new(action, Ruling::new(decision, "rule[0]"));
    proposal.effect = Some(template);
    proposal.observe = true;
    proposal
}

fn last_doc(f: &Fixture) -> serde_json::Value {
    let row = f.kernel.receipts(1, 1000).unwrap().pop().unwrap().1;
    warden::canonical::parse_json(&row.document).unwrap()
}

#[test]
fn observe_mode_runs_a_denied_action_and_records_what_enforce_would_have_done() {
    let f = Fixture::new();
    let t = key_template();
    let action = refund("txn_1", 5);
    let permit = f.kernel.propose(&observe(&action, &t, Decision::Deny)).unwrap();
    permit.commit(&serde_json::json!({"ok": true})).unwrap();
    let doc = last_doc(&f);
    assert_eq!(doc["result"], "observed");
    assert_eq!(doc["execution"], "committed");
    assert_eq!(doc["would_have"], serde_json::json!({"decision": "deny", "reason": "rule[0]", "blocked_reason": null}));
    // It still owned its key: the record is committed.
    assert_eq!(f.kernel.effect("refund:txn_1").unwrap().unwrap().state, EffectState::Committed);
}

#[test]
fn observe_mode_names_the_refusal_enforce_would_have_raised_and_runs_holding_nothing() {
    let f = Fixture::new();
    let t = key_template();
    f.kernel.propose(&allow(&refund("txn_1", 5), &t)).unwrap().commit(&serde_json::json!(1)).unwrap();
    let action = refund("txn_1", 5);
    let permit = f.kernel.propose(&observe(&action, &t, Decision::Allow)).unwrap();
    permit.not_executed("declined").unwrap();
    let doc = last_doc(&f);
    assert_eq!((doc["result"].as_str(), doc["execution"].as_str()), (Some("observed"), Some("failed")));
    assert_eq!(doc["would_have"]["blocked_reason"], "duplicate");
    assert_eq!(
        f.kernel.effect("refund:txn_1").unwrap().unwrap().state,
        EffectState::Committed,
        "the committed record is untouched"
    );
}

#[test]
fn observe_mode_never_creates_or_consumes_an_approval() {
    let f = Fixture::new();
    let t = key_template();
    let action = refund("txn_1", 5);
    let permit = f.kernel.propose(&observe(&action, &t, Decision::Approve)).unwrap();
    permit.commit(&serde_json::json!(1)).unwrap();
    assert_eq!(last_doc(&f)["would_have"]["blocked_reason"], "approval_required");
    assert!(f.kernel.pending_approvals().unwrap().is_empty());
    let action = refund("txn_2", 5);
    let id = granted(&f, &action);
    let mut proposal = observe(&action, &t, Decision::Approve);
    proposal.approval_id = Some(&id);
    f.kernel.propose(&proposal).unwrap().commit(&serde_json::json!(1)).unwrap();
    assert_eq!(last_doc(&f)["would_have"]["blocked_reason"], serde_json::Value::Null);
    assert_eq!(f.kernel.approval(&id).unwrap().unwrap().status, warden::approval::ApprovalStatus::Granted);
}

#[test]
fn an_action_from_another_environment_is_refused_with_a_receipt() {
    let f = Fixture::new();
    let t = key_template();
    let action = warden::Action::new(
        "stripe.refund",
        serde_json::json!({"payment_id": "txn_1", "amount": 5}),
        warden::Principal::new("refund-agent", None).unwrap(),
        None,
        "staging",
    )
    .unwrap();
    let refused = f.kernel.propose(&allow(&action, &t)).unwrap_err();
    assert!(matches!(&refused, Error::Denied { reason, .. } if reason == "environment_mismatch"), "{refused}");
    assert_eq!(reasons(&f), ["denied:environment_mismatch"]);
}

#[test]
fn the_attempt_ceiling_is_checked_before_a_human_is_asked() {
    let f = Fixture::new();
    let t = key_template();
    let action = refund("txn_1", 5);
    let mut first = allow(&action, &t);
    first.max_attempts = Some(1);
    f.kernel.propose(&first).unwrap().not_executed("declined").unwrap();
    let again = refund("txn_1", 5);
    let mut proposal = approve(&again, &t, None);
    proposal.max_attempts = Some(1);
    let refused = f.kernel.propose(&proposal).unwrap_err();
    assert!(matches!(refused, Error::AttemptCeiling { .. }), "{refused}");
    assert!(f.kernel.pending_approvals().unwrap().is_empty());
}

#[test]
fn a_grant_with_a_ttl_sets_the_window_from_the_grant() {
    let f = Fixture::new();
    let t = key_template();
    let action = refund("txn_1", 5);
    let request = f.kernel.request_approval(&action, None).unwrap();
    f.clock.advance(10 * SECOND);
    let granted = f.kernel.grant_for(&request.approval_id, "ops:bob", 30 * SECOND).unwrap();
    assert_eq!(granted.expires_at, T0 + 40 * SECOND);
    f.clock.advance(31 * SECOND);
    let refused = f.kernel.propose(&approve(&action, &t, Some(&request.approval_id))).unwrap_err();
    assert!(matches!(&refused, Error::ApprovalMismatch { reason, .. } if reason == "approval_expired"), "{refused}");
}

// ---- parking a permit and adopting it in another handle (issue 31) ------------------------------

const TRACEPARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
const DIGEST: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";

/// Another handle on `f`'s store, running another policy: what a restarted process opens.
fn another_process(f: &Fixture) -> warden::Kernel {
    let options = warden::KernelOptions {
        clock: Arc::new(f.clock.clone()),
        policy_hash: Some("sha256:other".into()),
        ..warden::KernelOptions::default()
    };
    warden::Kernel::open(f.path(), options).unwrap()
}

/// A permit for `payment` granted with a 10 s lease, parked until 60 s from now with the data
/// `{reason: "task", task_id}`, and left (as a stopping process leaves it): its action id and
/// receipt id.
fn parked(f: &Fixture, payment: &str) -> (String, String) {
    let t = key_template();
    let action = refund(payment, 5);
    let mut proposal = allow(&action, &t);
    proposal.lease = Some(10 * SECOND);
    proposal.traceparent = Some(TRACEPARENT);
    let mut permit = f.kernel.propose(&proposal).unwrap();
    permit.bind_result_sha256(DIGEST).unwrap();
    permit
        .park(Some(f.kernel.now() + 60 * SECOND), &serde_json::json!({"reason": "task", "task_id": payment}))
        .unwrap();
    let ids = (action.action_id.clone(), permit.receipt_id().to_owned());
    // A stopping process reports no outcome: the attempt stays EXECUTING for an adopter.
    std::mem::forget(permit);
    ids
}

fn receipt_docs(kernel: &warden::Kernel) -> Vec<serde_json::Value> {
    let rows = kernel.receipts(1, 1000).unwrap();
    rows.into_iter().map(|(_, r)| warden::canonical::parse_json(&r.document).unwrap()).collect()
}

#[test]
fn a_parked_permit_is_adopted_by_another_process_and_its_outcome_writes_the_receipt_chosen_at_the_grant() {
    let f = Fixture::new();
    let (action_id, receipt_id) = parked(&f, "txn_p");
    let suspended = f.kernel.events(0, 100).unwrap().into_iter().find(|e| e.kind == EventKind::EXECUTION_SUSPENDED);
    let data = warden::canonical::parse_json(&suspended.unwrap().data).unwrap();
    assert_eq!((data["reason"].as_str(), data["task_id"].as_str()), (Some("task"), Some("txn_p")));
    assert_eq!(data["parked"]["receipt_id"].as_str(), Some(receipt_id.as_str()));
    assert_eq!(data["parked"]["arguments"].as_str(), Some(r#"{"amount":5,"payment_id":"txn_p"}"#));

    let other = another_process(&f);
    let adopted = other.adopt("refund:txn_p", &action_id, 1, 0).unwrap();
    assert_eq!(adopted.receipt_id(), receipt_id);
    assert_eq!(adopted.action().action_id, action_id);
    assert_eq!(adopted.action().arguments, refund("txn_p", 5).arguments);
    assert_eq!((adopted.attempt(), adopted.traceparent()), (1, Some(TRACEPARENT)));
    assert_eq!(adopted.lease_expires_at(), Some(T0 + 60 * SECOND), "the lease the record has now");
    assert_eq!(adopted.idempotency_token(), Some(idempotency_token("refund:txn_p", 1).unwrap().as_str()));
    assert!(receipt_docs(&other).is_empty(), "no receipt before the outcome");
    adopted.commit(&serde_json::json!({"refund": "re_1"})).unwrap();

    let docs = receipt_docs(&other);
    assert_eq!(docs.len(), 1);
    let doc = &docs[0];
    assert_eq!(doc["receipt_id"].as_str(), Some(receipt_id.as_str()));
    assert_eq!((doc["result"].as_str(), doc["action_id"].as_str()), (Some("committed"), Some(action_id.as_str())));
    assert_eq!((doc["result_sha256"].as_str(), doc["traceparent"].as_str()), (Some(DIGEST), Some(TRACEPARENT)));
    assert_eq!(doc["policy_hash"].as_str(), Some("sha256:test"), "the policy the grant was decided under");
    assert_eq!((doc["effect_key"].as_str(), doc["attempt"].as_u64()), (Some("refund:txn_p"), Some(1)));
    assert_eq!(doc["arguments"], serde_json::json!({"amount": 5, "payment_id": "txn_p"}));
    assert_eq!(other.effect("refund:txn_p").unwrap().unwrap().state, EffectState::Committed);
    let report = f.kernel.verify_chain().unwrap();
    assert!(report.ok, "{report:?}");
    // Adopting from the suspension's own event on finds the same record; a later start finds none.
    let suspended_at = f.kernel.events(0, 100).unwrap().into_iter().find(|e| e.kind == EventKind::EXECUTION_SUSPENDED);
    let since = suspended_at.unwrap().event_id;
    let (action_2, _) = parked(&f, "txn_q");
    let other = another_process(&f);
    let last = other.events(0, 1000).unwrap().last().unwrap().event_id;
    let found = other.adopt("refund:txn_q", &action_2, 1, since).unwrap();
    assert!(matches!(other.adopt("refund:txn_q", &action_2, 1, last).unwrap_err(), Error::NotFound(_)));
    found.not_executed("declined").unwrap();
}

#[test]
fn adoption_is_refused_unless_the_attempt_was_parked_and_still_holds_its_key() {
    let f = Fixture::new();
    let t = key_template();
    // Suspended without parking (what an earlier Warden wrote).
    let action = refund("plain", 5);
    let mut permit = f.kernel.propose(&allow(&action, &t)).unwrap();
    permit.suspend(None, &serde_json::json!({"reason": "task", "task_id": "plain"})).unwrap();
    let plain = (action.action_id.clone(), permit);
    // Parked, then settled by its own process: the record moved on.
    let action = refund("settled", 5);
    let mut permit = f.kernel.propose(&allow(&action, &t)).unwrap();
    permit.park(None, &serde_json::json!({})).unwrap();
    permit.commit(&serde_json::json!(1)).unwrap();
    let settled = action.action_id.clone();
    // Parked with a lease of 10 s that nothing extends.
    let action = refund("lapsing", 5);
    let mut proposal = allow(&action, &t);
    proposal.lease = Some(10 * SECOND);
    let mut permit = f.kernel.propose(&proposal).unwrap();
    permit.park(None, &serde_json::json!({})).unwrap();
    std::mem::forget(permit);
    let lapsing = action.action_id.clone();
    let (held, _) = parked(&f, "held");
    f.clock.advance(20 * SECOND); // "lapsing" lapses; "held" was parked until 60 s
    let other = another_process(&f);
    let cases: [(&str, &str, u32, &str); 6] = [
        ("refund:plain", &plain.0, 1, "not parked"),
        ("refund:settled", &settled, 1, "no longer holds the key"),
        ("refund:lapsing", &lapsing, 1, "lapsed"),
        ("refund:held", &held, 2, "no longer holds the key"),
        ("refund:held", &plain.0, 1, "no longer holds the key"),
        ("refund:never", &held, 1, "was ever reserved"),
    ];
    for (key, action_id, attempt, why) in cases {
        let refused = other.adopt(key, action_id, attempt, 0).unwrap_err();
        let text = refused.to_string();
        assert!(refused.is_refusal(), "{key}: {text}");
        assert!(text.contains(why), "{key} attempt {attempt}: {text}");
        if why == "not parked" {
            assert!(matches!(refused, Error::NotFound(_)) && text.contains("Kernel::complete"), "{text}");
        }
    }
    assert!(other.poisoned().is_none());
    assert!(other.adopt("refund:held", &held, 1, 0).is_ok(), "the one case that holds");
    plain.1.ambiguous("done").unwrap();
}

#[test]
fn only_a_permit_that_holds_its_key_parks_and_the_parked_member_is_the_kernels_alone() {
    let f = Fixture::new();
    let t = key_template();
    let action = refund("nokey", 5);
    let mut unkeyed = f.kernel.propose(&Proposal::new(&action, Ruling::new(Decision::Allow, "decision"))).unwrap();
    assert!(matches!(unkeyed.park(None, &serde_json::json!({})).unwrap_err(), Error::InvalidInput(_)));
    unkeyed.commit(&serde_json::json!(1)).unwrap();
    let mut permit = f.kernel.propose(&allow(&refund("forged", 5), &t)).unwrap();
    let forged = serde_json::json!({"parked": {"attempt": 1}});
    assert!(matches!(permit.suspend(None, &forged).unwrap_err(), Error::InvalidInput(_)));
    assert!(matches!(permit.park(None, &forged).unwrap_err(), Error::InvalidInput(_)));
    let huge = serde_json::json!({"blob": "x".repeat(20_000)});
    assert!(matches!(permit.park(None, &huge).unwrap_err(), Error::InvalidInput(_)));
    let suspended = f.kernel.events(0, 100).unwrap().into_iter().filter(|e| e.kind == EventKind::EXECUTION_SUSPENDED);
    assert_eq!(suspended.count(), 0, "nothing was written");
    permit.commit(&serde_json::json!(1)).unwrap();
}

#[test]
fn a_parked_record_whose_action_was_altered_is_a_store_fault_naming_the_key() {
    let f = Fixture::new();
    let (action_id, _) = parked(&f, "txn_t");
    let event = f.kernel.events(0, 100).unwrap().into_iter().find(|e| e.kind == EventKind::EXECUTION_SUSPENDED);
    let data = warden::canonical::parse_json(&event.unwrap().data).unwrap();
    let altered = |arguments: &str, rehash: bool| {
        let mut data = data.clone();
        data["parked"]["arguments"] = serde_json::json!(arguments);
        if rehash {
            let mut action = refund("txn_t", 5_000);
            action.action_id = action_id.clone();
            data["parked"]["action_hash"] = serde_json::json!(action.hash().unwrap());
        }
        data
    };
    let cases = [
        ("the amount altered", altered(r#"{"amount":5000,"payment_id":"txn_t"}"#, false)),
        ("the amount and its hash altered", altered(r#"{"amount":5000,"payment_id":"txn_t"}"#, true)),
        ("the arguments not an object", altered("[1]", false)),
        ("the record unreadable", {
            let mut data = data.clone();
            data["parked"]["ruling"] = serde_json::json!("allow");
            data
        }),
    ];
    for (what, data) in cases {
        // Written as a later suspension of the same attempt (the latest record is the one read).
        let op = warden::kernel::ops::Write::Suspension(Box::new(warden::kernel::ops::Suspension {
            action_id: action_id.clone(),
            effect_key: Some("refund:txn_t".into()),
            attempt: 1,
            holds_key: true,
            resumed: false,
            until: None,
            data,
        }));
        let now = warden::store::Now::Fixed(f.kernel.now());
        f.kernel.store().write(op, &now, warden::store::Durability::Durable).unwrap();
        let other = another_process(&f);
        let fault = other.adopt("refund:txn_t", &action_id, 1, 0).unwrap_err();
        assert_store_fault(&fault, "events", "refund:txn_t");
        assert!(other.poisoned().is_some(), "{what}: a store fault latches the handle");
    }
    assert_eq!(f.kernel.effect("refund:txn_t").unwrap().unwrap().state, EffectState::Executing, "nothing moved");
}

#[test]
fn two_adopters_of_one_attempt_record_one_outcome_and_one_receipt() {
    let f = Fixture::new();
    let (action_id, receipt_id) = parked(&f, "txn_d");
    let (first, second) = (another_process(&f), another_process(&f));
    let one = first.adopt("refund:txn_d", &action_id, 1, 0).unwrap();
    let two = second.adopt("refund:txn_d", &action_id, 1, 0).unwrap();
    let three = second.adopt("refund:txn_d", &action_id, 1, 0).unwrap();
    one.commit(&serde_json::json!({"refund": "re_1"})).unwrap();
    // Another outcome for the same attempt is late: kept as an event, with no second receipt.
    let late = two.ambiguous("the second adopter saw a timeout").unwrap_err();
    assert!(matches!(&late, Error::LateOutcome { state: EffectState::Committed, .. }), "{late}");
    // The same outcome again is the one already recorded: nothing is written.
    three.commit(&serde_json::json!({"refund": "re_1"})).unwrap();
    let docs = receipt_docs(&f.kernel);
    assert_eq!(docs.len(), 1, "{docs:?}");
    assert_eq!(
        (docs[0]["receipt_id"].as_str(), docs[0]["result"].as_str()),
        (Some(receipt_id.as_str()), Some("committed"))
    );
    let late_events: Vec<_> = f
        .kernel
        .events(0, 1000)
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == EventKind::EXECUTION_AMBIGUOUS)
        .map(|e| warden::canonical::parse_json(&e.data).unwrap())
        .collect();
    assert_eq!(late_events.len(), 1, "{late_events:?}");
    assert_eq!(late_events[0]["late_outcome"].as_str(), Some("ambiguous"));
    assert_eq!(f.kernel.effect("refund:txn_d").unwrap().unwrap().state, EffectState::Committed);
    // Once settled, the attempt cannot be adopted again.
    assert!(matches!(first.adopt("refund:txn_d", &action_id, 1, 0).unwrap_err(), Error::Ambiguous { .. }));
    assert!(f.kernel.verify_chain().unwrap().ok);
}

#[test]
fn a_dropped_adopted_permit_records_ambiguous_under_the_receipt_chosen_at_the_grant() {
    let f = Fixture::new();
    let (action_id, receipt_id) = parked(&f, "txn_x");
    drop(another_process(&f).adopt("refund:txn_x", &action_id, 1, 0).unwrap());
    assert_eq!(f.kernel.effect("refund:txn_x").unwrap().unwrap().state, EffectState::Ambiguous);
    let docs = receipt_docs(&f.kernel);
    assert_eq!(docs.len(), 1);
    assert_eq!(
        (docs[0]["receipt_id"].as_str(), docs[0]["result"].as_str()),
        (Some(receipt_id.as_str()), Some("ambiguous"))
    );
}
