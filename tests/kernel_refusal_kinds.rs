//! `Kernel::begin` and `Kernel::complete` (the integrator's own pipeline, without a permit)
//! return each refusal as its kind, and the lease holds up to its expiry instant inclusive.

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
fn the_holder_cannot_begin_one_microsecond_after_the_lease_expired() {
    let f = Fixture::new();
    let holder = reserved(&f);
    f.clock.set(T0 + LEASE + 1);
    let refused = f.kernel.begin(KEY, &holder, 1).unwrap_err();
    assert!(matches!(refused, Error::Ambiguous { .. }), "{refused}");
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
    g.kernel.mark_ambiguous(KEY, "the worker died").unwrap();
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
