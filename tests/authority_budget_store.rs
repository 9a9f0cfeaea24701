//! The store's running budget sums against the sum from scratch: for any sequence of charges,
//! releases (an effect written FAILED) and checks of several windows, the running sum a
//! reservation reads equals the unreleased amount charged inside the window — and when the
//! clock steps back it never undercounts.

mod common;

use common::*;
use proptest::prelude::*;
use warden::authority::Charge;
use warden::test_support::KernelInternals;
use warden::{EffectRecord, EffectState};

const WINDOWS: [u64; 3] = [10, 60, 3600];
const UNIT: i64 = 7 * SECOND;

#[derive(Debug, Clone)]
enum Op {
    /// Charge `amount`, `advance` units after the last instant.
    Charge { amount: u64, advance: i64 },
    /// Write the effect of the `index`-th charge (modulo their number) FAILED.
    Release { index: usize },
    /// Read the running sum of window `window`, `advance` units later.
    Check { window: usize, advance: i64 },
    /// The clock steps back this many units.
    StepBack { units: i64 },
}

fn op(with_steps_back: bool) -> impl Strategy<Value = Op> {
    let steps = u32::from(with_steps_back);
    prop_oneof![
        4 => (0u64..1000, 0i64..3).prop_map(|(amount, advance)| Op::Charge { amount, advance }),
        2 => (0usize..64).prop_map(|index| Op::Release { index }),
        4 => (0usize..WINDOWS.len(), 0i64..6).prop_map(|(window, advance)| Op::Check { window, advance }),
        steps => (1i64..4).prop_map(|units| Op::StepBack { units }),
    ]
}

fn charge(window_seconds: u64, amount: u64) -> Charge {
    Charge { grant_id: "support".into(), metric: "amount".into(), amount, limit: u64::MAX, window_seconds }
}

fn failed(key: &str, at: i64) -> EffectRecord {
    EffectRecord {
        effect_key: key.to_owned(),
        state: EffectState::Failed,
        action_id: "act_00000000000000000000000000000000".into(),
        action_name: "stripe.refund".into(),
        action_hash: "sha256:00".into(),
        attempt: 1,
        created_at: at,
        updated_at: at,
        lease_expires_at: None,
        result: None,
        error: Some("not executed".into()),
        resolved_by: None,
        approval_id: None,
    }
}

/// Runs `ops` in one write transaction; returns every check as (running, from scratch).
fn run(ops: &[Op]) -> Vec<(u128, u128)> {
    let fixture = Fixture::new();
    let mut checks = Vec::new();
    fixture
        .kernel
        .store()
        .tamper(|t| {
            // (consumed at, amount, released)
            let mut ledger: Vec<(i64, u64, bool)> = Vec::new();
            let mut now = T0;
            for op in ops {
                match op {
                    Op::Charge { amount, advance } => {
                        now += advance * UNIT;
                        let key = format!("refund:{}", ledger.len());
                        t.put_budget_charges(&[charge(WINDOWS[0], *amount)], &key, 1, now)?;
                        ledger.push((now, *amount, false));
                    }
                    Op::Release { index } if !ledger.is_empty() => {
                        let index = index % ledger.len();
                        t.put_effect(&failed(&format!("refund:{index}"), now))?;
                        ledger[index].2 = true;
                    }
                    Op::Release { .. } => {}
                    Op::Check { window, advance } => {
                        now += advance * UNIT;
                        let seconds = WINDOWS[*window];
                        let running = t.budget_window_sum(&charge(seconds, 0), now)?;
                        let floor = now - i64::try_from(seconds).unwrap() * SECOND;
                        let scratch: u128 = ledger
                            .iter()
                            .filter(|(at, _, released)| !released && *at >= floor && *at <= now)
                            .map(|(_, amount, _)| u128::from(*amount))
                            .sum();
                        checks.push((running, scratch));
                    }
                    Op::StepBack { units } => now -= units * UNIT,
                }
            }
            Ok(())
        })
        .unwrap();
    checks
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn the_running_window_sum_equals_the_sum_from_scratch(ops in proptest::collection::vec(op(false), 1..60)) {
        for (running, scratch) in run(&ops) {
            prop_assert_eq!(running, scratch);
        }
    }

    #[test]
    fn a_clock_that_steps_back_never_makes_the_running_sum_undercount(
        ops in proptest::collection::vec(op(true), 1..60)
    ) {
        for (running, scratch) in run(&ops) {
            prop_assert!(running >= scratch, "running {} < from scratch {}", running, scratch);
        }
    }
}

#[test]
fn a_released_charge_leaves_every_window_once_even_when_failed_is_written_twice() {
    let checks = run(&[
        Op::Charge { amount: 500, advance: 0 },
        Op::Charge { amount: 200, advance: 1 },
        Op::Check { window: 2, advance: 0 },
        Op::Release { index: 0 },
        Op::Release { index: 0 },
        Op::Check { window: 2, advance: 0 },
        Op::Check { window: 1, advance: 0 },
    ]);
    assert_eq!(checks, [(700, 700), (200, 200), (200, 200)]);
}

#[test]
fn a_charge_after_the_clock_stepped_back_still_counts_in_a_shorter_window() {
    // Two charges at T0, one 14 s earlier (the clock stepped back), then a 60 s window whose
    // floor falls between them: the charge at T0 is inside it and must be counted.
    let checks = run(&[
        Op::Charge { amount: 0, advance: 0 },
        Op::Charge { amount: 1, advance: 0 },
        Op::StepBack { units: 2 },
        Op::Charge { amount: 0, advance: 0 },
        Op::Check { window: 2, advance: 4 },
        Op::Check { window: 1, advance: 5 },
    ]);
    assert_eq!(checks, [(1, 1), (1, 1)]);
}
