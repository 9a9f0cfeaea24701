//! Load-time warnings: the document is valid, but something in it is probably a mistake.

use crate::decision::Decision;

use super::model::ActionEntry;

/// Verbs whose actions usually change the world; such an action with no effect template gets a
/// load-time warning, because nothing would stop it running twice.
const WRITE_VERBS: [&str; 8] = ["create", "delete", "deploy", "grant", "refund", "send", "transfer", "update"];

/// A load-time warning for an action whose name sounds like a write, which can be allowed or
/// approved, and which has no effect template: nothing would stop it running twice.
pub(super) fn write_without_effect(name: &str, entry: &ActionEntry, path: &str) -> Option<String> {
    if entry.effect.is_some() {
        return None;
    }
    let reachable = match entry.decision {
        Some(decision) => decision != Decision::Deny,
        None => entry.rules.iter().any(|rule| rule.decision != Decision::Deny),
    };
    if !reachable {
        return None;
    }
    let last = name.rsplit('.').next().unwrap_or(name).to_ascii_lowercase();
    let verb = WRITE_VERBS.iter().find(|verb| {
        last == **verb
            || last.strip_prefix(**verb).is_some_and(|rest| rest.starts_with(['_', '-']) || **verb == "grant")
    })?;
    Some(format!(
        "{path}: the name sounds like a write ({verb}) but the entry has no 'effect' template, so nothing \
         stops it from running twice; add one such as 'effect: \"{verb}:{{id}}\"'"
    ))
}
