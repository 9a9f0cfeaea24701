//! Budgets (SPEC v0.9 §2–§4): what an action spends against every budgeted grant up its chain,
//! whether that fits, and the running window sums that keep the check flat.
//!
//! On reservation, every budget up the deciding chain is charged inside the reservation's
//! transaction: the sum of unreleased charges in `[now - window, now]` plus this one must stay
//! ≤ limit. In-flight actions count. A charge is released only when its effect reaches FAILED
//! (COMMITTED and AMBIGUOUS hold it): FAILED is the one state in which the executor proved
//! nothing happened. Charging every ancestor is what makes the feature mean anything: ten
//! contained children of a 100,000-a-day grant still share its 100,000.

use serde_json::{Map, Value};

use crate::canonical::is_integer;
use crate::clock::Micros;
use crate::effect::EffectState;

pub use super::charge::Charge;
use super::grant::{Budget, COUNT_METRIC};
use super::pattern::shorten;

/// The reason when a budget's window would pass its limit.
pub const BUDGET_EXHAUSTED: &str = "budget_exhausted";
/// The reason when a budgeted argument is missing or not a countable integer.
pub const BUDGET_UNMEASURABLE: &str = "budget_unmeasurable";
/// The reason when a budgeted grant decided an action with no effect key.
pub const BUDGET_UNKEYED: &str = "budget_unkeyed";

impl Charge {
    /// The window in microseconds.
    pub fn window(&self) -> Micros {
        Budget { metric: String::new(), limit: 0, window_seconds: self.window_seconds }.window()
    }
}

/// Why an action's budgets refuse it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BudgetRefusal {
    /// The metric's argument is missing, not an integer, negative, or too large to count.
    #[error("{action}: grant '{grant_id}' budgets '{metric}' and {detail}; a missing value is refused, never counted as zero")]
    Unmeasurable {
        /// The action refused.
        action: String,
        /// The grant whose budget could not measure it.
        grant_id: String,
        /// The budget's metric.
        metric: String,
        /// What is wrong with the argument.
        detail: String,
    },
    /// A budgeted grant decided an action that resolved no effect key, so nothing could be charged.
    #[error("{action}: grant '{grant_id}' carries a budget and the action resolved no effect key; declare an 'effect' template for it, or take the budget off the grant")]
    Unkeyed {
        /// The action refused.
        action: String,
        /// The budgeted grant.
        grant_id: String,
    },
    /// The window's sum plus this charge would pass the limit.
    #[error("budget '{metric}' of grant '{grant_id}' over {window_seconds} s is exhausted")]
    Exhausted {
        /// The grant whose budget is exhausted.
        grant_id: String,
        /// The budget's metric.
        metric: String,
        /// The budget's window, in seconds.
        window_seconds: u64,
    },
}

impl BudgetRefusal {
    /// The reason receipts and events record for this refusal.
    pub fn reason(&self) -> &'static str {
        match self {
            BudgetRefusal::Unmeasurable { .. } => BUDGET_UNMEASURABLE,
            BudgetRefusal::Unkeyed { .. } => BUDGET_UNKEYED,
            BudgetRefusal::Exhausted { .. } => BUDGET_EXHAUSTED,
        }
    }
}

/// What `action` spends on `metric`: 1 for `count`; otherwise the integer argument of that name.
/// The kernel knows no other metric and assumes nothing about one.
pub fn metric_value(metric: &str, arguments: &Map<String, Value>) -> Result<u64, String> {
    if metric == COUNT_METRIC {
        return Ok(1);
    }
    match arguments.get(metric) {
        None | Some(Value::Null) => Err(format!("the action carries no '{}' argument", shorten(metric))),
        Some(Value::Number(n)) if is_integer(n) => {
            let text = n.as_str();
            if text.starts_with('-') && text.trim_start_matches(['-', '0']).is_empty() {
                return Ok(0);
            }
            if text.starts_with('-') {
                return Err(format!("its '{}' is negative; a metric value is a non-negative integer", shorten(metric)));
            }
            text.parse::<u64>().map_err(|_| {
                format!("its '{}' is larger than {}, which Warden cannot count", shorten(metric), u64::MAX)
            })
        }
        Some(_) => Err(format!(
            "its '{}' is not an integer; a metric value is a non-negative integer (money in minor units)",
            shorten(metric)
        )),
    }
}

/// One charge per budget up the chain (`budgets` as [`super::AuthorityResult::budgets`] lists
/// them), then the unkeyed check: a budgeted chain on an action with no effect key is refused.
pub fn charges_for(
    action: &str,
    budgets: &[(String, Budget)],
    arguments: &Map<String, Value>,
    effect_key: Option<&str>,
) -> Result<Vec<Charge>, BudgetRefusal> {
    let mut charges = Vec::with_capacity(budgets.len());
    for (grant_id, budget) in budgets {
        let amount = metric_value(&budget.metric, arguments).map_err(|detail| BudgetRefusal::Unmeasurable {
            action: action.to_owned(),
            grant_id: grant_id.clone(),
            metric: budget.metric.clone(),
            detail,
        })?;
        charges.push(Charge {
            grant_id: grant_id.clone(),
            metric: budget.metric.clone(),
            amount,
            limit: budget.limit,
            window_seconds: budget.window_seconds,
        });
    }
    if let (Some(first), None) = (charges.first(), effect_key) {
        return Err(BudgetRefusal::Unkeyed { action: action.to_owned(), grant_id: first.grant_id.clone() });
    }
    Ok(charges)
}

/// The predicate, inclusive: `spent + amount ≤ limit` for every charge, in order; the first that
/// fails is the refusal. `spent` is the store's unreleased sum for that charge's grant, metric
/// and window.
pub fn check_charges<E>(
    charges: &[Charge],
    mut spent: impl FnMut(&Charge) -> Result<u128, E>,
) -> Result<Result<(), BudgetRefusal>, E> {
    for charge in charges {
        if spent(charge)? + u128::from(charge.amount) > u128::from(charge.limit) {
            return Ok(Err(BudgetRefusal::Exhausted {
                grant_id: charge.grant_id.clone(),
                metric: charge.metric.clone(),
                window_seconds: charge.window_seconds,
            }));
        }
    }
    Ok(Ok(()))
}

/// The ledger rows one reservation writes: one per `(grant, metric)` — two budgets on one metric
/// are one spend measured against two windows — in first-seen order.
pub fn ledger_entries(charges: &[Charge]) -> Vec<(String, String, u64)> {
    let mut rows: Vec<(String, String, u64)> = Vec::new();
    for charge in charges {
        if !rows.iter().any(|(grant, metric, _)| *grant == charge.grant_id && *metric == charge.metric) {
            rows.push((charge.grant_id.clone(), charge.metric.clone(), charge.amount));
        }
    }
    rows
}

/// Charges are released exactly when the effect reaches FAILED, whatever moved it there.
pub fn releases_charges(state: EffectState) -> bool {
    state == EffectState::Failed
}

/// One ledger row of a `(grant, metric)` series, as the window sum reads it. `seq` increases by
/// one per charge of the series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LedgerRow {
    /// The row's place in its series.
    pub seq: u64,
    /// When the charge was made.
    pub consumed_at: Micros,
    /// How much it spent.
    pub amount: u64,
    /// Whether it was released (its effect FAILED), so it no longer counts.
    pub released: bool,
}

/// A running sum of the unreleased charges of one `(grant, metric)` series inside one window,
/// kept per `(grant, metric, window)` so the budget check is a point read plus amortised O(1)
/// eviction, however many charges the window holds.
///
/// Rows enter at the tail when charged (`add`), leave the sum when released (`release`) or when
/// they fall below the window floor (`advance`, which reads each row at most once over its
/// life). If the floor ever moves backwards (the clock was set back), rows already evicted
/// could belong to the window again; `advance` then reports [`WindowSumError::FloorMovedBack`]
/// and the store rebuilds the sum with [`WindowSum::rebuild`] — a rare full read, chosen over an
/// undercount.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowSum {
    /// The unreleased sum of rows `next..` (every row at or after the floor).
    pub sum: u128,
    /// The first row not yet evicted.
    pub next: u64,
    /// The floor this sum was last advanced to.
    pub floor: Micros,
}

impl Default for WindowSum {
    /// An empty series: nothing summed, nothing evicted, and a floor below every instant.
    fn default() -> WindowSum {
        WindowSum { sum: 0, next: 0, floor: Micros::MIN }
    }
}

/// Why a window sum could not be advanced.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WindowSumError<E> {
    /// The floor moved back (the clock was set back); the sum must be rebuilt.
    #[error("the window floor moved back from {from} to {to}; rebuild the sum")]
    FloorMovedBack {
        /// The floor before.
        from: Micros,
        /// The earlier floor asked for.
        to: Micros,
    },
    /// A ledger row the sum needed is missing.
    #[error("ledger row {0} is missing")]
    MissingRow(u64),
    /// The store could not read a row.
    #[error(transparent)]
    Read(E),
}

impl WindowSum {
    /// A new charge at the tail (its `seq` ≥ `next`).
    pub fn add(&mut self, amount: u64) {
        self.sum += u128::from(amount);
    }

    /// A charge released: it leaves the sum if it is still inside (not evicted).
    pub fn release(&mut self, row: &LedgerRow) {
        if row.seq >= self.next {
            self.sum = self.sum.saturating_sub(u128::from(row.amount));
        }
    }

    /// Evict rows below `floor`. `end` is the next `seq` the series will use; `row(seq)` reads
    /// one ledger row.
    pub fn advance<E>(
        &mut self,
        floor: Micros,
        end: u64,
        mut row: impl FnMut(u64) -> Result<Option<LedgerRow>, E>,
    ) -> Result<(), WindowSumError<E>> {
        if floor < self.floor {
            return Err(WindowSumError::FloorMovedBack { from: self.floor, to: floor });
        }
        self.floor = floor;
        while self.next < end {
            let current = row(self.next).map_err(WindowSumError::Read)?.ok_or(WindowSumError::MissingRow(self.next))?;
            if current.consumed_at >= floor {
                break;
            }
            if !current.released {
                self.sum = self.sum.saturating_sub(u128::from(current.amount));
            }
            self.next += 1;
        }
        Ok(())
    }

    /// The sum from scratch over every row of the series (in `seq` order), for `floor`. Rows
    /// before the first in-window row are evicted; a later row with an earlier timestamp (a
    /// clock that stepped back) stays counted, which overcounts rather than undercounts.
    pub fn rebuild(floor: Micros, rows: impl IntoIterator<Item = LedgerRow>) -> WindowSum {
        let mut sum = WindowSum { sum: 0, next: 0, floor };
        let mut evicting = true;
        for row in rows {
            if evicting && row.consumed_at < floor {
                sum.next = row.seq + 1;
                continue;
            }
            evicting = false;
            if !row.released {
                sum.sum += u128::from(row.amount);
            }
        }
        sum
    }
}
