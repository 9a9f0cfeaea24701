//! Deciding an action under a loaded document: ctrlrun's evaluator, with its reasons.
//!
//! An unlisted action is denied `unknown_action`; an entry with a plain decision gives it with
//! reason `decision`; otherwise the first rule whose conditions all hold gives `rule[N]`
//! (0-based), and no match is denied `no_matching_rule`. Conditions are checked in document
//! order and stop at the first that fails, as ctrlrun's `all()` does, so the warnings are the
//! ones ctrlrun would log: a missing argument, or an argument an order operator cannot compare,
//! makes a condition false and is reported, never silently skipped.
//!
//! What one condition means (operators, numbers by value, type-strict equality) is
//! [`crate::condition`]'s, which the authority and approval scopes share.

use serde_json::{Map, Value};

use crate::canonical::Floats;
use crate::condition::holds;
use crate::decision::{Decision, Ruling};
use crate::document::{ActionEntry, Document};

/// The reason for denying an action the document does not list.
pub const UNKNOWN_ACTION: &str = "unknown_action";
/// The reason for denying an action none of whose rules matched.
pub const NO_MATCHING_RULE: &str = "no_matching_rule";
/// The reason for an entry's plain `decision:` with no rules.
pub const BARE_DECISION: &str = "decision";

/// The outcome of evaluating one action against the document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Evaluation {
    /// The decision and the reason (`decision`, `rule[N]`, `unknown_action`, `no_matching_rule`).
    pub ruling: Ruling,
    /// Conditions that were false because an argument was missing or had the wrong type.
    pub warnings: Vec<String>,
}

/// Decide `action_name` with these (canonical) arguments. Pure: no clock, no store. The
/// document's schema says which numbers its order operators compare (`Schema::floats`).
pub fn evaluate(document: &Document, action_name: &str, arguments: &Map<String, Value>) -> Evaluation {
    match document.actions.get(action_name) {
        None => Evaluation { ruling: Ruling::new(Decision::Deny, UNKNOWN_ACTION), warnings: Vec::new() },
        Some(entry) => evaluate_entry(entry, action_name, arguments, document.schema.floats()),
    }
}

fn evaluate_entry(
    entry: &ActionEntry,
    action_name: &str,
    arguments: &Map<String, Value>,
    floats: Floats,
) -> Evaluation {
    let mut warnings = Vec::new();
    if let Some(decision) = entry.decision {
        return Evaluation { ruling: Ruling::new(decision, BARE_DECISION), warnings };
    }
    for (index, rule) in entry.rules.iter().enumerate() {
        if rule.when.iter().all(|condition| holds(condition, action_name, arguments, floats, &mut warnings)) {
            return Evaluation { ruling: Ruling::new(rule.decision, &format!("rule[{index}]")), warnings };
        }
    }
    Evaluation { ruling: Ruling::new(Decision::Deny, NO_MATCHING_RULE), warnings }
}

/// The rule of `entry` that produced a ruling with `reason` (`rule[N]`), if any.
pub fn matched_rule<'e>(entry: &'e ActionEntry, reason: &str) -> Option<&'e crate::document::Rule> {
    let index: usize = reason.strip_prefix("rule[")?.strip_suffix(']')?.parse().ok()?;
    entry.rules.get(index)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_matched_rule_is_the_one_its_reason_names_and_no_other() {
        let yaml = "schema: warden/v1\nactions:\n  pay:\n    rules:\n      - when: {amount_gt: 100}\n        \
                    decision: deny\n      - decision: allow\n";
        let document = crate::document::load_str(yaml, "t.yaml").unwrap();
        let entry = &document.actions["pay"];
        let at = |reason: &str| matched_rule(entry, reason).map(std::ptr::from_ref);
        assert_eq!(at("rule[0]"), Some(std::ptr::from_ref(&entry.rules[0])));
        assert_eq!(at("rule[1]"), Some(std::ptr::from_ref(&entry.rules[1])));
        for reason in ["rule[2]", "rule[]", "rule[x]", "rule[0", "rule0]", NO_MATCHING_RULE, BARE_DECISION, ""] {
            assert_eq!(at(reason), None, "{reason:?}");
        }
    }
}
