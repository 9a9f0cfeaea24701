//! Delegation containment (SPEC v0.3 §5.4, v0.9 §2.6.1, §6.2): is a child grant inside its
//! parent on every dimension? Checked when a delegation is created and again, for every link of
//! the chain, on every evaluation.
//!
//! **Omission never means unlimited.** A child that drops a dimension its parent constrains is
//! refused, never read as inheriting the parent's limit: a child that silently inherited would
//! look, in the store and in the receipt, like one authorised for what it says.

use std::cmp::Ordering;

use serde_json::Value;

use crate::canonical::is_integer;
use crate::condition::{compare_numbers, equal, Condition, Op};

use super::grant::{Budget, Grant, Subject};
use super::pattern::{all_contained, matches, PatternKind};
use super::reason::Dimension;

/// The first dimension on which `child` is not contained in `parent`, in [`Dimension::ALL`]
/// order, or `None` where it is contained on every one.
pub fn contained_dimension(parent: &Grant, child: &Grant) -> Option<Dimension> {
    if !subject_contained(&parent.subject, &child.subject) {
        return Some(Dimension::Subject);
    }
    if !all_contained(&parent.actions, &child.actions, PatternKind::Action) {
        return Some(Dimension::Actions);
    }
    if !optional_patterns_contained(parent.resources.as_deref(), child.resources.as_deref(), PatternKind::Resource) {
        return Some(Dimension::Resources);
    }
    if !constraints_contained(&parent.constraints, &child.constraints) {
        return Some(Dimension::Constraints);
    }
    if let Some(outer) = &parent.environments {
        match &child.environments {
            Some(inner) if inner.iter().all(|name| outer.contains(name)) => {}
            _ => return Some(Dimension::Environments),
        }
    }
    if let Some(outer) = parent.expires_at {
        match child.expires_at {
            Some(inner) if inner <= outer => {}
            _ => return Some(Dimension::ExpiresAt),
        }
    }
    if !optional_patterns_contained(parent.tasks.as_deref(), child.tasks.as_deref(), PatternKind::Task) {
        return Some(Dimension::Tasks);
    }
    if !budgets_contained(parent.budgets.as_deref(), child.budgets.as_deref()) {
        return Some(Dimension::Budgets);
    }
    None
}

/// A delegation names a concrete grantee: no wildcard in either field, an agent always, and the
/// parent's user kept (a grant to act *for alice* does not become one to act alone). Which agent
/// the child names is otherwise free; that is what delegation is for.
fn subject_contained(parent: &Subject, child: &Subject) -> bool {
    let Some(agent) = &child.agent else { return false };
    if agent.contains('*') {
        return false;
    }
    match (&parent.user, &child.user) {
        (Some(_), None) => false,
        (Some(outer), Some(inner)) => !inner.contains('*') && matches(outer, inner, PatternKind::Subject),
        (None, inner) => inner.as_ref().is_none_or(|user| !user.contains('*')),
    }
}

fn optional_patterns_contained(parent: Option<&[String]>, child: Option<&[String]>, kind: PatternKind) -> bool {
    match (parent, child) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some(outer), Some(inner)) => all_contained(outer, inner, kind),
    }
}

/// For every constraint key the parent declares, the child declares the same key at least as
/// strictly. The child may add constraints; it may not drop one or move it to another operator.
fn constraints_contained(parent: &[Condition], child: &[Condition]) -> bool {
    parent.iter().all(|outer| {
        child.iter().find(|inner| inner.key == outer.key).is_some_and(|inner| at_least_as_strict(outer, inner))
    })
}

fn at_least_as_strict(parent: &Condition, child: &Condition) -> bool {
    match parent.op {
        Op::Lt | Op::Lte => integer_order(&child.operand, &parent.operand).is_some_and(|o| o != Ordering::Greater),
        Op::Gt | Op::Gte => integer_order(&child.operand, &parent.operand).is_some_and(|o| o != Ordering::Less),
        Op::In => match (child.operand.as_array(), parent.operand.as_array()) {
            (Some(inner), Some(outer)) => inner.iter().all(|item| outer.iter().any(|other| equal(item, other))),
            _ => false,
        },
        // `neq` is equality too: there is no deny-list operator, so "the parent's exclusions
        // plus more" cannot be written, and equality is the only sound rule.
        Op::Eq | Op::Neq => equal(&child.operand, &parent.operand),
    }
}

fn integer_order(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if is_integer(x) && is_integer(y) => compare_numbers(x, y),
        _ => None,
    }
}

/// For every parent budget some child budget on the same metric has `limit ≤` and `window ≥`.
///
/// The window reads backwards on first sight: over the same limit a *shorter* window is a
/// *higher* rate. Any interval of the parent's length lies inside one of the child's, whose sum
/// is at most the child's limit, which is at most the parent's. One child budget may discharge
/// several parent budgets, and a child may add budgets on metrics the parent does not budget.
pub fn budgets_contained(parent: Option<&[Budget]>, child: Option<&[Budget]>) -> bool {
    let Some(parent) = parent else { return true };
    let child = child.unwrap_or(&[]);
    parent.iter().all(|outer| {
        child.iter().any(|inner| {
            inner.metric == outer.metric && inner.limit <= outer.limit && inner.window_seconds >= outer.window_seconds
        })
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn budget(metric: &str, limit: u64, window_seconds: u64) -> Budget {
        Budget { metric: metric.into(), limit, window_seconds }
    }

    #[test]
    fn a_shorter_window_at_the_same_limit_is_a_wider_budget() {
        let day = [budget("amount", 100_000, 86_400)];
        assert!(!budgets_contained(Some(&day), Some(&[budget("amount", 100_000, 3_600)])));
        assert!(budgets_contained(Some(&day), Some(&[budget("amount", 100_000, 604_800)])));
        assert!(budgets_contained(Some(&day), Some(&[budget("amount", 50_000, 86_400)])));
        assert!(!budgets_contained(Some(&day), Some(&[budget("amount", 100_001, 86_400)])));
        assert!(!budgets_contained(Some(&day), Some(&[budget("count", 1, 86_400)])));
        assert!(!budgets_contained(Some(&day), None));
        assert!(budgets_contained(None, Some(&[budget("count", 1, 60)])));
        assert!(budgets_contained(None, None));
    }

    #[test]
    fn one_child_budget_may_discharge_several_parent_budgets() {
        let parent = [budget("amount", 100_000, 86_400), budget("amount", 500_000, 2_592_000)];
        assert!(budgets_contained(Some(&parent), Some(&[budget("amount", 1_000, 2_592_000)])));
        assert!(!budgets_contained(Some(&parent), Some(&[budget("amount", 1_000, 86_400)])));
    }

    #[test]
    fn a_delegated_subject_names_a_concrete_grantee() {
        let parent = Subject { agent: Some("finance-*".into()), user: Some("alice".into()) };
        let child = |agent: Option<&str>, user: Option<&str>| Subject {
            agent: agent.map(Into::into),
            user: user.map(Into::into),
        };
        assert!(subject_contained(&parent, &child(Some("support-1"), Some("alice"))));
        assert!(!subject_contained(&parent, &child(Some("support-1"), None)));
        assert!(!subject_contained(&parent, &child(Some("support-1"), Some("bob"))));
        assert!(!subject_contained(&parent, &child(Some("support-*"), Some("alice"))));
        assert!(!subject_contained(&parent, &child(None, Some("alice"))));
        let no_user = Subject { agent: Some("*".into()), user: None };
        assert!(subject_contained(&no_user, &child(Some("x"), None)));
        assert!(subject_contained(&no_user, &child(Some("x"), Some("bob"))));
        assert!(!subject_contained(&no_user, &child(Some("x"), Some("b*"))));
    }

    fn condition(key: &str, op: Op, operand: Value) -> Condition {
        let subject = key.rsplit_once('_').map_or(key, |(subject, _)| subject);
        Condition { key: key.into(), subject: subject.into(), op, operand }
    }

    #[test]
    fn an_upper_bound_may_only_stay_or_fall_and_the_same_bound_is_contained() {
        for op in [Op::Lte, Op::Lt] {
            let parent = condition("amount_lte", op, json!(100));
            assert!(at_least_as_strict(&parent, &condition("amount_lte", op, json!(100))), "{op:?} at the bound");
            assert!(at_least_as_strict(&parent, &condition("amount_lte", op, json!(99))), "{op:?} one below");
            assert!(!at_least_as_strict(&parent, &condition("amount_lte", op, json!(101))), "{op:?} one above");
        }
    }

    #[test]
    fn a_lower_bound_may_only_stay_or_rise_and_the_same_bound_is_contained() {
        for op in [Op::Gte, Op::Gt] {
            let parent = condition("amount_gte", op, json!(100));
            assert!(at_least_as_strict(&parent, &condition("amount_gte", op, json!(100))), "{op:?} at the bound");
            assert!(at_least_as_strict(&parent, &condition("amount_gte", op, json!(101))), "{op:?} one above");
            assert!(!at_least_as_strict(&parent, &condition("amount_gte", op, json!(99))), "{op:?} one below");
        }
    }

    #[test]
    fn a_bound_that_is_not_an_integer_is_never_as_strict() {
        let parent = condition("amount_lte", Op::Lte, json!(100));
        assert!(!at_least_as_strict(&parent, &condition("amount_lte", Op::Lte, json!(1.5))));
        assert!(!at_least_as_strict(&parent, &condition("amount_lte", Op::Lte, json!("99"))));
        assert_eq!(integer_order(&json!(1.5), &json!(100)), None);
        assert_eq!(integer_order(&json!(100), &json!(1.5)), None);
        assert_eq!(integer_order(&json!(99), &json!(100)), Some(Ordering::Less));
    }

    #[test]
    fn an_in_list_may_only_shrink() {
        let parent = condition("currency_in", Op::In, json!(["eur", "usd"]));
        assert!(at_least_as_strict(&parent, &condition("currency_in", Op::In, json!(["eur", "usd"]))));
        assert!(at_least_as_strict(&parent, &condition("currency_in", Op::In, json!(["eur"]))));
        assert!(!at_least_as_strict(&parent, &condition("currency_in", Op::In, json!(["eur", "gbp"]))));
        assert!(!at_least_as_strict(&parent, &condition("currency_in", Op::In, json!("eur"))));
    }

    #[test]
    fn equality_and_inequality_must_stay_the_same_value() {
        for op in [Op::Eq, Op::Neq] {
            let parent = condition("mode_eq", op, json!("test"));
            assert!(at_least_as_strict(&parent, &condition("mode_eq", op, json!("test"))), "{op:?}");
            assert!(!at_least_as_strict(&parent, &condition("mode_eq", op, json!("live"))), "{op:?}");
        }
    }

    #[test]
    fn a_child_keeps_every_parent_constraint_and_may_add_more() {
        let parent = [condition("amount_lte", Op::Lte, json!(100))];
        let kept = [condition("count_lte", Op::Lte, json!(5)), condition("amount_lte", Op::Lte, json!(50))];
        assert!(constraints_contained(&parent, &kept));
        assert!(!constraints_contained(&parent, &[condition("count_lte", Op::Lte, json!(5))]));
        assert!(constraints_contained(&[], &kept));
    }
}
