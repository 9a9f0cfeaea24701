//! Budget arithmetic as pure functions: what an action is charged up its chain, the inclusive
//! predicate with in-flight charges counted, release only on FAILED, and a running window sum
//! that agrees with summing the ledger from scratch.

use std::collections::BTreeSet;

use proptest::prelude::*;
use serde_json::json;
use warden::action::{new_id, IdKind};
use warden::authority::budget::{
    charges_for, check_charges, ledger_entries, metric_value, releases_charges, LedgerRow, WindowSum, WindowSumError,
};
use warden::authority::{
    evaluate, parse_instant, plan_delegation, Authority, BudgetRefusal, Call, CreatedVia, MemorySource, Proposal,
};
use warden::document::{load_grant_str, load_str};
use warden::{Action, EffectState, Principal};

const HOUR: i64 = 3_600_000_000;

fn t0() -> i64 {
    parse_instant("2026-11-01T09:00:00Z").unwrap()
}

/// The demo's scenario: finance may refund up to €25,000 and delegates €2,000 per refund to
/// support, at most €5,000 an hour.
fn setup() -> (Authority, MemorySource, String) {
    let document = load_str(
        r#"
schema: warden/v1
authority:
  grants:
    - id: finance
      subject: { agent: finance-agent }
      actions: [stripe.refund]
      constraints: { amount_lte: 2500000 }
      expires_at: "2026-12-01T00:00:00Z"
      delegable: true
      budgets: [{ metric: count, limit: 100, window: P1D }]
"#,
        "doc.yaml",
    )
    .unwrap();
    let authority = document.authority_config.unwrap();
    let child = load_grant_str(
        r#"
subject: { agent: support-agent }
actions: [stripe.refund]
constraints: { amount_lte: 200000 }
expires_at: "2026-11-02T00:00:00Z"
budgets: [{ metric: amount, limit: 500000, window: PT1H }, { metric: count, limit: 50, window: P1D }]
"#,
        "grant.yaml",
    )
    .unwrap();
    let mut source = MemorySource::new();
    let id = new_id(IdKind::Delegation).unwrap();
    let by = Principal::new("finance-agent", None).unwrap();
    let proposal = Proposal {
        parent_id: "finance",
        grant: &child,
        by: &by,
        by_expires_at: None,
        via: CreatedVia::Api,
        now: t0(),
        new_id: &id,
    };
    let planned = plan_delegation(&authority, &proposal, &source).unwrap();
    source.insert(planned.record, &planned.index_keys).unwrap();
    (authority, source, id)
}

fn refund(amount: serde_json::Value) -> Action {
    Action::new(
        "stripe.refund",
        json!({"payment_id": "p", "amount": amount}),
        Principal::new("support-agent", None).unwrap(),
        None,
        "production",
    )
    .unwrap()
}

#[test]
fn every_budget_up_the_chain_is_charged() {
    let (authority, source, id) = setup();
    let action = refund(json!(200000));
    let result = evaluate(&authority, &Call::new(&action, t0()), &source).unwrap();
    assert!(result.passed);
    let charges = charges_for(&action.name, &result.budgets, &action.arguments, Some("refund:p")).unwrap();
    let summary: Vec<(&str, &str, u64, u64)> =
        charges.iter().map(|c| (c.grant_id.as_str(), c.metric.as_str(), c.amount, c.limit)).collect();
    assert_eq!(
        summary,
        [(id.as_str(), "amount", 200000, 500000), (id.as_str(), "count", 1, 50), ("finance", "count", 1, 100)]
    );
    assert_eq!(ledger_entries(&charges).len(), 3);
}

/// (grant, metric, consumed_at, amount, state of the effect it was charged for)
type Ledger = Vec<(String, String, i64, u64, EffectState)>;

/// The naive sum the store's running sum must agree with: unreleased, inside `[now - window, now]`.
fn spent(ledger: &Ledger, now: i64) -> impl FnMut(&warden::authority::Charge) -> Result<u128, ()> + '_ {
    move |charge| {
        Ok(ledger
            .iter()
            .filter(|(g, m, at, _, state)| {
                *g == charge.grant_id
                    && *m == charge.metric
                    && *at >= now - charge.window()
                    && !releases_charges(*state)
            })
            .map(|(_, _, _, amount, _)| u128::from(*amount))
            .sum())
    }
}

#[test]
fn the_third_two_thousand_euro_refund_in_the_hour_is_exhausted_while_two_are_in_flight() {
    let (authority, source, id) = setup();
    let mut ledger: Ledger = Vec::new();
    let mut outcomes = Vec::new();
    for minute in 0..3 {
        let now = t0() + minute * 60_000_000;
        let action = refund(json!(200000));
        let result = evaluate(&authority, &Call::new(&action, now), &source).unwrap();
        let charges = charges_for(&action.name, &result.budgets, &action.arguments, Some("refund:p")).unwrap();
        let verdict = check_charges(&charges, spent(&ledger, now)).unwrap();
        if verdict.is_ok() {
            for (grant, metric, amount) in ledger_entries(&charges) {
                ledger.push((grant, metric, now, amount, EffectState::Executing));
            }
        }
        outcomes.push(verdict);
    }
    assert!(outcomes[0].is_ok() && outcomes[1].is_ok());
    match &outcomes[2] {
        Err(refusal @ BudgetRefusal::Exhausted { grant_id, metric, window_seconds }) => {
            assert_eq!((grant_id.as_str(), metric.as_str(), *window_seconds), (id.as_str(), "amount", 3600));
            assert_eq!(refusal.reason(), "budget_exhausted");
        }
        other => panic!("expected budget_exhausted, got {other:?}"),
    }
    // FAILED releases; COMMITTED and AMBIGUOUS hold.
    assert!(releases_charges(EffectState::Failed));
    for held in [EffectState::Reserved, EffectState::Executing, EffectState::Committed, EffectState::Ambiguous] {
        assert!(!releases_charges(held), "{held:?}");
    }
    ledger[0].4 = EffectState::Failed;
    ledger[1].4 = EffectState::Failed;
    ledger[2].4 = EffectState::Failed;
    let now = t0() + 3 * 60_000_000;
    let action = refund(json!(200000));
    let result = evaluate(&authority, &Call::new(&action, now), &source).unwrap();
    let charges = charges_for(&action.name, &result.budgets, &action.arguments, Some("refund:p")).unwrap();
    assert!(check_charges(&charges, spent(&ledger, now)).unwrap().is_ok(), "the failed refund gave its charge back");
    // An hour after the first two, the window has moved past them.
    ledger[0].4 = EffectState::Committed;
    ledger[2].4 = EffectState::Committed;
    let later = t0() + HOUR + 60_000_001;
    assert!(check_charges(&charges, spent(&ledger, later)).unwrap().is_ok());
    let edge = t0() + HOUR;
    assert!(
        check_charges(&charges, spent(&ledger, edge)).unwrap().is_err(),
        "the floor is closed: at now - window the first charge still counts, and 4000 + 2000 > 5000"
    );
}

#[test]
fn the_limit_is_inclusive() {
    let charge = warden::authority::Charge {
        grant_id: "g".into(),
        metric: "amount".into(),
        amount: 5,
        limit: 10,
        window_seconds: 60,
    };
    assert!(check_charges(std::slice::from_ref(&charge), |_| Ok::<u128, ()>(5)).unwrap().is_ok());
    assert!(check_charges(&[charge], |_| Ok::<u128, ()>(6)).unwrap().is_err());
}

#[test]
fn an_unmeasurable_or_unkeyed_action_is_refused_not_counted_as_zero() {
    let (authority, source, _) = setup();
    for (amount, expected) in [
        (json!(null), "budget_unmeasurable"),
        (json!(-1), "budget_unmeasurable"),
        (json!("200"), "budget_unmeasurable"),
        (json!(true), "budget_unmeasurable"),
        (json!(18446744073709551616u128), "budget_unmeasurable"),
    ] {
        let action = refund(amount.clone());
        let budgets = vec![(
            "g".to_owned(),
            warden::authority::Budget { metric: "amount".into(), limit: 10, window_seconds: 60 },
        )];
        let refused = charges_for(&action.name, &budgets, &action.arguments, Some("k")).unwrap_err();
        assert_eq!(refused.reason(), expected, "{amount}");
    }
    assert_eq!(metric_value("count", &serde_json::Map::new()), Ok(1));
    // A number that is not an integer is named as such (not as too large, nor as negative).
    for spelling in ["2.5", "100.0", "1e2", "-0.0"] {
        let arguments: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(&format!("{{\"amount\": {spelling}}}")).unwrap();
        let refused = metric_value("amount", &arguments).unwrap_err();
        assert!(refused.contains("is not an integer"), "{spelling}: {refused}");
    }
    let action = refund(json!(100));
    let result = evaluate(&authority, &Call::new(&action, t0()), &source).unwrap();
    let refused = charges_for(&action.name, &result.budgets, &action.arguments, None).unwrap_err();
    assert_eq!(refused.reason(), "budget_unkeyed");
    assert!(
        charges_for(&action.name, &[], &action.arguments, None).unwrap().is_empty(),
        "an unbudgeted chain needs no key"
    );
}

#[test]
fn a_floor_that_moves_back_asks_for_a_rebuild() {
    let mut sum = WindowSum::default();
    sum.add(5);
    let rows = [LedgerRow { seq: 0, consumed_at: 100, amount: 5, released: false }];
    sum.advance(200, 1, |seq| Ok::<_, ()>(rows.get(usize::try_from(seq).unwrap()).copied())).unwrap();
    assert_eq!((sum.sum, sum.next), (0, 1));
    assert!(matches!(sum.advance(50, 1, |_| Ok::<_, ()>(None)), Err(WindowSumError::FloorMovedBack { .. })));
    let rebuilt = WindowSum::rebuild(50, rows);
    assert_eq!((rebuilt.sum, rebuilt.next), (5, 0));
}

#[test]
fn a_rebuild_evicts_the_rows_before_the_floor_and_starts_after_the_last_of_them() {
    let row = |seq, consumed_at, amount, released| LedgerRow { seq, consumed_at, amount, released };
    let rows = [
        row(0, 10, 7, false),
        row(1, 20, 11, false),
        row(2, 100, 5, false),
        row(3, 110, 3, true),
        // A clock that stepped back: before the floor, but after an in-window row, so it stays.
        row(4, 30, 2, false),
    ];
    let rebuilt = WindowSum::rebuild(50, rows);
    // `next` is the first row not evicted: seq 2, one past the last evicted (seq 1).
    assert_eq!((rebuilt.sum, rebuilt.next), (5 + 2, 2));
    // The floor at the first row's instant evicts nothing; one past it evicts that row only.
    assert_eq!(WindowSum::rebuild(10, rows).next, 0);
    assert_eq!(WindowSum::rebuild(11, rows).next, 1);
}

#[derive(Debug, Clone)]
enum Step {
    Charge { after: i64, amount: u64 },
    Release(usize),
    Check { after: i64 },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0i64..50, 0u64..1000).prop_map(|(after, amount)| Step::Charge { after, amount }),
        (0usize..64).prop_map(Step::Release),
        (0i64..80).prop_map(|after| Step::Check { after }),
    ]
}

proptest! {
    #[test]
    fn the_running_window_sum_equals_the_sum_from_scratch(steps in prop::collection::vec(step(), 1..120), window in 1i64..200) {
        let mut rows: Vec<LedgerRow> = Vec::new();
        let mut sum = WindowSum::default();
        let mut now = 0i64;
        let mut reads = 0usize;
        for step in steps {
            match step {
                Step::Charge { after, amount } => {
                    now += after;
                    let seq = u64::try_from(rows.len()).unwrap();
                    rows.push(LedgerRow { seq, consumed_at: now, amount, released: false });
                    sum.add(amount);
                }
                Step::Release(index) => {
                    if let Some(row) = rows.get_mut(index) {
                        if !row.released {
                            row.released = true;
                            sum.release(row);
                        }
                    }
                }
                Step::Check { after } => {
                    now += after;
                    let floor = now - window;
                    let end = u64::try_from(rows.len()).unwrap();
                    sum.advance(floor, end, |seq| { reads += 1; Ok::<_, ()>(rows.get(usize::try_from(seq).unwrap()).copied()) }).unwrap();
                    let naive: u128 = rows.iter().filter(|r| !r.released && r.consumed_at >= floor).map(|r| u128::from(r.amount)).sum();
                    prop_assert_eq!(sum.sum, naive);
                    prop_assert_eq!(WindowSum::rebuild(floor, rows.iter().copied()).sum, naive);
                }
            }
        }
        // Each row is read at most once to evict it, plus one read per check that stops.
        prop_assert!(reads <= rows.len() * 2 + 120);
    }
}

#[test]
fn index_keys_follow_the_first_action_segment() {
    let grant =
        load_grant_str("subject: { agent: bot }\nactions: [stripe.refund, \"mail.*\", \"*.send\", \"**\"]\n", "g")
            .unwrap();
    let keys: BTreeSet<String> = warden::authority::source::index_keys(&grant)
        .into_iter()
        .map(|k| format!("{}/{}", k.agent, k.action))
        .collect();
    assert_eq!(keys, BTreeSet::from(["bot/stripe".to_owned(), "bot/mail".to_owned(), "bot/*".to_owned()]));
}
