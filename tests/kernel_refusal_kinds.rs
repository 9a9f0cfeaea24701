//! `Kernel::begin`, `complete`, `mark_ambiguous`, `extend_lease` and `consume_approval` (the
//! integrator's own pipeline, without a permit) return each refusal as its kind, and the lease
//! holds up to its expiry instant inclusive: each boundary is tested at the instant and one
//! microsecond past it.

mod common;

use common::*;
use warden::effect::{Outcome, StoredResult};
use warden::{DuplicateState, EffectState, Error};

const KEY: &str = "refund:txn_1";
const LEASE: i64 = 60 * SECOND;

fn committed() -> Outcome {
    Outcome::Committed(StoredResult::from_value(&serde_json::json!({"refund_id": "re_1"})))
}

/// A RESERVED record for a fresh proposal, leased until T0 + LEASE; its action_id.
fn reserved(f: &Fixture) -> String {
    let action = refund("txn_1", 5);
    let record = f.kernel.reserve_only(&action, KEY, Some(LEASE), None).expect("reserved");
    assert_eq!((record.state, record.lease_expires_at), (EffectState::Reserved, Some(T0 + LEASE)));
    action.action_id
}

#[test]
fn the_holder_begins_at_the_lease_expiry_instant() {
    let f = Fixture::new();
    let holder = reserved(&f);
    f.clock.set(T0 + LEASE);
    assert_eq!(f.kernel.begin(KEY, &holder, 1).expect("the instant itself is valid").state, EffectState::Executing);
}

#[test]
fn the_holder_cannot_begin_one_microsecond_after_the_lease_expired_and_the_record_becomes_ambiguous() {
    let f = Fixture::new();
    let holder = reserved(&f);
    f.clock.set(T0 + LEASE + 1);
    let refused = f.kernel.begin(KEY, &holder, 1).unwrap_err();
    assert!(matches!(refused, Error::Ambiguous { .. }), "{refused}");
    let record = f.kernel.effect(KEY).unwrap().expect("kept");
    assert_eq!(
        (record.state, record.lease_expires_at, record.error.as_deref()),
        (EffectState::Ambiguous, None, Some(warden::effect::LEASE_EXPIRED))
    );
    // The state change and its evidence were written together.
    let last = f.kernel.events(0, 1000).unwrap().pop().expect("an event");
    assert_eq!((last.kind.as_str(), last.effect_key.as_deref()), ("EXECUTION_AMBIGUOUS", Some(KEY)));
    // Nobody takes the key over: a new proposal is refused as ambiguous.
    let again = f.kernel.reserve_only(&refund("txn_1", 5), KEY, Some(LEASE), None).unwrap_err();
    assert!(matches!(again, Error::Ambiguous { .. }), "{again}");
}

#[test]
fn begin_at_and_past_the_lease_expiry_instant() {
    // (offset from the expiry instant, begins, state afterwards)
    let table = [(0, true, EffectState::Executing), (1, false, EffectState::Ambiguous)];
    for (offset, begins, after) in table {
        let f = Fixture::new();
        let holder = reserved(&f);
        f.clock.set(T0 + LEASE + offset);
        assert_eq!(f.kernel.begin(KEY, &holder, 1).is_ok(), begins, "offset {offset}");
        assert_eq!(f.kernel.effect(KEY).unwrap().expect("kept").state, after, "offset {offset}");
    }
}

#[test]
fn a_reserved_attempt_that_never_began_cannot_be_completed_committed_or_not_executed() {
    for outcome in [committed(), Outcome::NotExecuted("declined".into())] {
        let f = Fixture::new();
        let holder = reserved(&f);
        let refused = f.kernel.complete(KEY, &holder, 1, outcome.clone()).unwrap_err();
        assert!(matches!(&refused, Error::InvalidInput(m) if m.message.contains("never begun")), "{refused}");
        assert_eq!(refused.invalid_input_kind(), Some(warden::error::InvalidInputKind::State), "{refused}");
        // Nothing was written: it is still RESERVED, and the holder can begin.
        assert_eq!(f.kernel.effect(KEY).unwrap().expect("kept").state, EffectState::Reserved);
        assert_eq!(f.kernel.begin(KEY, &holder, 1).unwrap().state, EffectState::Executing);
        assert!(f.kernel.complete(KEY, &holder, 1, outcome).is_ok());
    }
}

#[test]
fn a_reserved_attempt_that_never_began_may_be_reported_ambiguous() {
    let f = Fixture::new();
    let holder = reserved(&f);
    let record = f.kernel.complete(KEY, &holder, 1, Outcome::Ambiguous("the worker crashed".into())).unwrap();
    assert_eq!(record.state, EffectState::Ambiguous);
}

#[test]
fn mark_ambiguous_on_a_live_lease_needs_its_holder_up_to_the_expiry_instant() {
    // (offset from the expiry instant, named holder, marked)
    let other = "act_00000000000000000000000000000000";
    type Row<'a> = (i64, Option<(&'a str, u32)>, bool);
    let table: [Row<'_>; 8] = [
        (0, None, false),
        (1, None, true),
        (0, Some((other, 1)), false),
        (1, Some((other, 1)), false),
        (0, Some(("", 2)), false), // the holder's id with another attempt (filled in below)
        (1, Some(("", 2)), false),
        (0, Some(("", 1)), true), // the holder itself
        (1, Some(("", 1)), true),
    ];
    for (offset, named, marks) in table {
        let f = Fixture::new();
        let holder = reserved(&f);
        let named = named.map(|(id, attempt)| (if id.is_empty() { holder.as_str() } else { id }, attempt));
        f.clock.set(T0 + LEASE + offset);
        let result = f.kernel.mark_ambiguous(KEY, named, "the worker died");
        assert_eq!(result.is_ok(), marks, "offset {offset}, named {named:?}: {result:?}");
        let state = f.kernel.effect(KEY).unwrap().expect("kept").state;
        if marks {
            assert_eq!(state, EffectState::Ambiguous);
        } else {
            let refused = result.unwrap_err();
            assert!(
                matches!(&refused, Error::Duplicate { state: DuplicateState::InProgress, holder: h, .. } if *h == holder),
                "the refusal names the holder: {refused}"
            );
            assert_eq!(state, EffectState::Reserved, "a refused mark writes nothing");
        }
    }
}

#[test]
fn extend_lease_at_and_past_the_expiry_instant() {
    // (offset from the expiry instant, extends)
    for (offset, extends) in [(0, true), (1, false)] {
        let f = Fixture::new();
        let holder = reserved(&f);
        f.kernel.begin(KEY, &holder, 1).unwrap();
        f.clock.set(T0 + LEASE + offset);
        let until = T0 + 10 * LEASE;
        let result = f.kernel.extend_lease(KEY, &holder, 1, until);
        if extends {
            assert_eq!(result.unwrap().lease_expires_at, Some(until));
        } else {
            assert!(matches!(result, Err(Error::Ambiguous { .. })), "{result:?}");
        }
    }
}

#[test]
fn extend_lease_refuses_another_holder_a_reserved_attempt_and_a_shorter_lease() {
    let f = Fixture::new();
    let holder = reserved(&f);
    // The holder's own RESERVED attempt: a state refusal (held, not executing), as ctrlrun's store answers.
    let early = f.kernel.extend_lease(KEY, &holder, 1, T0 + 2 * LEASE).unwrap_err();
    assert!(
        matches!(&early, Error::Duplicate { state: DuplicateState::InProgress, holder: h, .. } if *h == holder),
        "{early}"
    );
    assert_eq!(f.kernel.effect(KEY).unwrap().expect("kept").state, EffectState::Reserved, "nothing written");
    f.kernel.begin(KEY, &holder, 1).unwrap();
    let other = f.kernel.extend_lease(KEY, "act_00000000000000000000000000000000", 1, T0 + 2 * LEASE).unwrap_err();
    assert!(matches!(other, Error::Duplicate { state: DuplicateState::InProgress, .. }), "{other}");
    let shorter = f.kernel.extend_lease(KEY, &holder, 1, T0 + LEASE - 1).unwrap_err();
    assert!(matches!(shorter, Error::InvalidInput(_)), "{shorter}");
    assert_eq!(f.kernel.effect(KEY).unwrap().expect("kept").lease_expires_at, Some(T0 + LEASE));
}

#[test]
fn an_approval_is_consumed_without_a_key_once_and_only_for_its_action() {
    let f = Fixture::new();
    let action = refund("txn_1", 5);
    let request = f.kernel.request_approval(&action, None).unwrap();
    f.kernel.grant(&request.approval_id, "ops:bob").unwrap();
    let mismatch = f.kernel.consume_approval(&refund("txn_2", 5), &request.approval_id).unwrap_err();
    assert!(matches!(mismatch, Error::ApprovalMismatch { .. }), "{mismatch}");
    let consumed = f.kernel.consume_approval(&action, &request.approval_id).unwrap();
    assert_eq!(consumed.status, warden::approval::ApprovalStatus::Consumed);
    assert_eq!(consumed.consumed_by.as_deref(), Some(action.action_id.as_str()));
    let twice = f.kernel.consume_approval(&refund("txn_1", 5), &request.approval_id).unwrap_err();
    assert!(matches!(&twice, Error::ApprovalMismatch { reason, .. } if reason == "consumed"), "{twice}");
    assert!(f.kernel.effect(KEY).unwrap().is_none(), "no key was reserved");
}

#[test]
fn another_proposal_is_in_progress_up_to_the_expiry_instant_and_late_after_it() {
    let f = Fixture::new();
    let holder = reserved(&f);
    let other = refund("txn_1", 5).action_id;
    f.clock.set(T0 + LEASE);
    let live = f.kernel.begin(KEY, &other, 1).unwrap_err();
    assert!(
        matches!(&live, Error::Duplicate { state: DuplicateState::InProgress, holder: h, .. } if *h == holder),
        "{live}"
    );
    f.clock.set(T0 + LEASE + 1);
    let late = f.kernel.complete(KEY, &other, 1, committed()).unwrap_err();
    assert!(matches!(late, Error::LateOutcome { state: EffectState::Reserved, .. }), "{late}");
}

#[test]
fn a_key_with_no_record_is_not_found() {
    let f = Fixture::new();
    assert!(matches!(f.kernel.begin(KEY, "act_x", 1), Err(Error::NotFound(_))));
    assert!(matches!(f.kernel.complete(KEY, "act_x", 1, committed()), Err(Error::NotFound(_))));
}

#[test]
fn completing_a_committed_effect_is_a_duplicate_and_an_ambiguous_one_is_ambiguous() {
    let f = Fixture::new();
    let holder = reserved(&f);
    f.kernel.begin(KEY, &holder, 1).unwrap();
    f.kernel.complete(KEY, &holder, 1, committed()).unwrap();
    let again = f.kernel.complete(KEY, &holder, 1, committed()).unwrap_err();
    assert!(matches!(again, Error::Duplicate { state: DuplicateState::Committed, .. }), "{again}");

    let g = Fixture::new();
    let holder = reserved(&g);
    g.kernel.begin(KEY, &holder, 1).unwrap();
    g.kernel.mark_ambiguous(KEY, Some((&holder, 1)), "the worker died").unwrap();
    let known = g.kernel.complete(KEY, &holder, 1, committed()).unwrap_err();
    assert!(matches!(known, Error::Ambiguous { .. }), "{known}");
    let unchanged = g.kernel.complete(KEY, &holder, 1, Outcome::Ambiguous("no reply".into())).unwrap();
    assert_eq!((unchanged.state, unchanged.error.as_deref()), (EffectState::Ambiguous, Some("the worker died")));
}

#[test]
fn the_holder_beginning_twice_is_a_late_outcome() {
    let f = Fixture::new();
    let holder = reserved(&f);
    f.kernel.begin(KEY, &holder, 1).unwrap();
    let twice = f.kernel.begin(KEY, &holder, 1).unwrap_err();
    assert!(matches!(twice, Error::LateOutcome { state: EffectState::Executing, .. }), "{twice}");
}
