//! The grant model (SPEC v0.3 §4.2, v0.9 §2.2, §6.1): who may propose which actions on which
//! resources, under which constraints, where, until when, for which tasks, within which budgets.
//!
//! [`Grant::validate`] refuses exactly what the document loader refuses (the loader calls it),
//! so a grant built in code, parsed from a delegation file or read back from the store is held
//! to one grammar. Absent lists mean "any"; present lists are never empty, because an empty list
//! is a truncated edit, not a decision.

use serde_json::{Map, Value};

use crate::action::{Action, Principal};
use crate::clock::{Micros, MICROS_PER_SECOND};
use crate::condition::Condition;

use super::pattern::{matches, shorten, validate_pattern, PatternKind};
use super::reason::Dimension;

/// The widest budget window, in seconds: a hundred years (365-day years), ctrlrun's bound.
pub const MAX_WINDOW_SECONDS: u64 = 100 * 365 * 24 * 60 * 60;

/// The one metric the kernel supplies: one per action. An argument named `count` does not
/// replace it.
pub const COUNT_METRIC: &str = "count";

/// Who a grant is addressed to. At least one of the two is set: a subject matching every
/// principal is spelled `agent: "*"`, which a review can find.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subject {
    /// The agent pattern, if the subject names one.
    pub agent: Option<String>,
    /// The user pattern, if the subject names one.
    pub user: Option<String>,
}

impl Subject {
    /// Refuses a subject with neither pattern, or a malformed one.
    pub fn validate(&self) -> Result<(), String> {
        if self.agent.is_none() && self.user.is_none() {
            return Err("a subject must declare at least one of 'agent' and 'user'; a subject matching \
                        every principal is written agent: \"*\""
                .to_owned());
        }
        for (key, pattern) in [("agent", &self.agent), ("user", &self.user)] {
            if let Some(pattern) = pattern {
                validate_pattern(pattern, PatternKind::Subject).map_err(|e| format!("subject.{key}: {e}"))?;
            }
        }
        Ok(())
    }

    /// A grant naming a user is not satisfied by an agent acting alone.
    pub fn matches(&self, principal: &Principal) -> bool {
        if let Some(agent) = &self.agent {
            if !matches(agent, &principal.agent, PatternKind::Subject) {
                return false;
            }
        }
        match (&self.user, &principal.user) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(pattern), Some(user)) => matches(pattern, user, PatternKind::Subject),
        }
    }
}

/// How much, of which metric, over which rolling window (SPEC v0.9 §2.2).
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Budget {
    /// `count`, or the name of an integer argument.
    pub metric: String,
    /// The most the window's sum may reach (inclusive).
    pub limit: u64,
    /// Whole seconds, 1..=[`MAX_WINDOW_SECONDS`].
    pub window_seconds: u64,
}

impl Budget {
    /// Refuses an empty metric or a window outside 1..=`MAX_WINDOW_SECONDS`.
    pub fn validate(&self) -> Result<(), String> {
        if self.metric.trim().is_empty() {
            return Err("a budget metric must be a non-empty string".to_owned());
        }
        if self.window_seconds == 0 || self.window_seconds > MAX_WINDOW_SECONDS {
            return Err(format!(
                "budget '{}': 'window' must be a positive duration of at most {MAX_WINDOW_SECONDS} seconds",
                shorten(&self.metric)
            ));
        }
        Ok(())
    }

    /// The window in microseconds.
    pub fn window(&self) -> Micros {
        // Bounded by MAX_WINDOW_SECONDS, so this cannot overflow.
        Micros::try_from(self.window_seconds).unwrap_or(Micros::MAX / MICROS_PER_SECOND) * MICROS_PER_SECOND
    }
}

/// One permission. `id` is the document's id for a root grant, the `dlg_…` id for a delegation,
/// and empty only for a delegation not yet created.
#[derive(Debug, Clone, PartialEq)]
pub struct Grant {
    /// The grant's id (empty only for a delegation not yet created).
    pub id: String,
    /// Who the grant is addressed to.
    pub subject: Subject,
    /// Action-name patterns; never empty.
    pub actions: Vec<String>,
    /// Resource patterns; `None` grants any resource, including none.
    pub resources: Option<Vec<String>>,
    /// All must hold; unique keys, in the order written.
    pub constraints: Vec<Condition>,
    /// Exact environment names; `None` grants every environment.
    pub environments: Option<Vec<String>>,
    /// Microseconds UTC; the instant itself is still valid.
    pub expires_at: Option<Micros>,
    /// Whether the grant may be delegated further.
    pub delegable: bool,
    /// Task patterns; `None` grants any task, including none.
    pub tasks: Option<Vec<String>>,
    /// `None` budgets nothing.
    pub budgets: Option<Vec<Budget>>,
}

/// `^[A-Za-z0-9][A-Za-z0-9._-]*$`
pub fn is_grant_id(text: &str) -> bool {
    let mut chars = text.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

impl Grant {
    /// The model's rules. The loader adds only what a document alone can get wrong (duplicate
    /// ids, a `dlg_` id, key sets and types).
    pub fn validate(&self) -> Result<(), String> {
        if !self.id.is_empty() && !is_grant_id(&self.id) {
            return Err(format!("grant id '{}' must match ^[A-Za-z0-9][A-Za-z0-9._-]*$", shorten(&self.id)));
        }
        self.subject.validate()?;
        if self.actions.is_empty() {
            return Err("'actions' must be a non-empty list of patterns".to_owned());
        }
        patterns_valid(&self.actions, PatternKind::Action, "actions")?;
        if let Some(resources) = &self.resources {
            if resources.is_empty() {
                return Err("'resources' must be a non-empty list, or absent (absent grants any resource)".to_owned());
            }
            patterns_valid(resources, PatternKind::Resource, "resources")?;
        }
        if let Some(environments) = &self.environments {
            if environments.is_empty() {
                return Err("'environments' must be a non-empty list, or absent".to_owned());
            }
            if environments.iter().any(String::is_empty) {
                return Err("an environment must be a non-empty string".to_owned());
            }
        }
        if let Some(tasks) = &self.tasks {
            if tasks.is_empty() {
                return Err("'tasks' must be a non-empty list, or absent (absent grants any task)".to_owned());
            }
            patterns_valid(tasks, PatternKind::Task, "tasks")?;
        }
        if let Some(budgets) = &self.budgets {
            if budgets.is_empty() {
                return Err("'budgets' must be a non-empty list, or absent".to_owned());
            }
            for budget in budgets {
                budget.validate()?;
            }
        }
        for (index, condition) in self.constraints.iter().enumerate() {
            if condition.key != format!("{}_{}", condition.subject, condition.op.as_str()) {
                return Err(format!("constraint '{}' disagrees with the condition it holds", shorten(&condition.key)));
            }
            if self.constraints[..index].iter().any(|earlier| earlier.key == condition.key) {
                return Err(format!("constraint '{}' appears twice", shorten(&condition.key)));
            }
        }
        if self.delegable && self.expires_at.is_none() {
            return Err("a grant with 'delegable: true' must declare 'expires_at': nothing else bounds \
                        the population a delegable grant can reach"
                .to_owned());
        }
        Ok(())
    }

    /// `now > expires_at`: the expiry instant itself is valid.
    pub fn is_expired(&self, now: Micros) -> bool {
        self.expires_at.is_some_and(|at| now > at)
    }

    /// The first shape row (subject, actions, resources, environments) `action` fails, or
    /// `None` where the grant's shape covers it.
    pub fn unmatched_shape(&self, action: &Action) -> Option<Dimension> {
        if !self.subject.matches(&action.principal) {
            return Some(Dimension::Subject);
        }
        if !self.actions.iter().any(|pattern| matches(pattern, &action.name, PatternKind::Action)) {
            return Some(Dimension::Actions);
        }
        if let Some(resources) = &self.resources {
            // A grant naming resources never matches an action carrying none.
            let Some(resource) = &action.resource else {
                return Some(Dimension::Resources);
            };
            if !resources.iter().any(|pattern| matches(pattern, resource, PatternKind::Resource)) {
                return Some(Dimension::Resources);
            }
        }
        // Exact names: a glob over a short closed list buys only a way to typo `prod*`.
        if let Some(environments) = &self.environments {
            if !environments.contains(&action.environment) {
                return Some(Dimension::Environments);
            }
        }
        None
    }

    /// A grant naming no task holds for any task and for none; one naming tasks refuses a call
    /// that names none.
    pub fn task_holds(&self, task: Option<&str>) -> bool {
        match (&self.tasks, task) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(patterns), Some(task)) => patterns.iter().any(|p| matches(p, task, PatternKind::Task)),
        }
    }

    /// Every constraint, ANDed, with the policy's evaluator. A missing argument makes one false
    /// and is reported in `warnings`. Grants exist only in `warden/v1` documents, so a float
    /// argument is compared with a bound by value, as that document's rules compare it.
    pub fn constraints_hold(&self, name: &str, arguments: &Map<String, Value>, warnings: &mut Vec<String>) -> bool {
        let floats = crate::document::Schema::WardenV1.floats();
        self.constraints.iter().all(|condition| crate::condition::holds(condition, name, arguments, floats, warnings))
    }

    /// The constraint with this key, if the grant has one.
    pub fn constraint(&self, key: &str) -> Option<&Condition> {
        self.constraints.iter().find(|c| c.key == key)
    }
}

fn patterns_valid(patterns: &[String], kind: PatternKind, key: &str) -> Result<(), String> {
    for pattern in patterns {
        validate_pattern(pattern, kind).map_err(|e| format!("{key}: {e}"))?;
    }
    Ok(())
}

/// An RFC 3339 timestamp with its offset (`2026-11-01T00:00:00Z`, `…+01:00`) as microseconds
/// UTC. A timestamp without an offset names no instant and is refused; so is a fraction finer
/// than a microsecond, which could not be compared exactly.
pub fn parse_instant(text: &str) -> Result<Micros, String> {
    let refuse = || {
        format!(
            "'{}' is not an RFC 3339 timestamp with an offset, such as 2026-11-01T00:00:00Z or \
             2026-11-01T01:00:00+01:00",
            shorten(text)
        )
    };
    let moment =
        time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339).map_err(|_| refuse())?;
    let nanos = moment.unix_timestamp_nanos();
    if nanos % 1000 != 0 {
        return Err(format!("'{}' is finer than a microsecond; Warden keeps time in microseconds", shorten(text)));
    }
    Micros::try_from(nanos / 1000).map_err(|_| refuse())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn principal(agent: &str, user: Option<&str>) -> Principal {
        Principal { agent: agent.into(), user: user.map(Into::into) }
    }

    #[test]
    fn grant_ids_follow_the_documented_shape() {
        for good in ["a", "head-of-finance", "A.b_c-9", "0"] {
            assert!(is_grant_id(good), "{good}");
        }
        for bad in ["", "-a", ".a", "a b", "a/b", "é"] {
            assert!(!is_grant_id(bad), "{bad}");
        }
    }

    #[test]
    fn a_subject_naming_a_user_is_not_satisfied_by_an_agent_alone() {
        let subject = Subject { agent: Some("support-*".into()), user: Some("alice".into()) };
        assert!(subject.matches(&principal("support-7", Some("alice"))));
        assert!(!subject.matches(&principal("support-7", None)));
        assert!(!subject.matches(&principal("support-7", Some("bob"))));
        assert!(!subject.matches(&principal("billing-1", Some("alice"))));
        let anyone_for_alice = Subject { agent: None, user: Some("alice".into()) };
        assert!(anyone_for_alice.matches(&principal("x", Some("alice"))));
        assert!(Subject { agent: None, user: None }.validate().is_err());
    }

    #[test]
    fn instants_need_an_offset_and_microsecond_precision() {
        assert_eq!(parse_instant("1970-01-01T00:00:01Z"), Ok(1_000_000));
        assert_eq!(parse_instant("1970-01-01T01:00:01+01:00"), Ok(1_000_000));
        assert_eq!(parse_instant("1970-01-01T00:00:00.000001Z"), Ok(1));
        for bad in ["1970-01-01T00:00:01", "1970-01-01", "1970-01-01T00:00:00.0000001Z", "yesterday"] {
            assert!(parse_instant(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_delegable_grant_needs_an_expiry() {
        let mut grant = Grant {
            id: "g".into(),
            subject: Subject { agent: Some("a".into()), user: None },
            actions: vec!["x.y".into()],
            resources: None,
            constraints: Vec::new(),
            environments: None,
            expires_at: None,
            delegable: true,
            tasks: None,
            budgets: None,
        };
        assert!(grant.validate().is_err());
        grant.expires_at = Some(10);
        assert_eq!(grant.validate(), Ok(()));
        assert!(!grant.is_expired(10));
        assert!(grant.is_expired(11));
    }
}
