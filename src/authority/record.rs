//! A delegation as stored: the row, its revocation, and the grant's storage encoding.
//!
//! The store persists rows, not grants. A row is parsed back into a [`Delegation`] on every
//! read, validated exactly as the document loader validates a grant: a store is not more trusted
//! than a file, and a row that no longer parses is `authority_unreadable`, never a grant with a
//! field quietly defaulted.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::action::{is_id, IdKind, Principal};
use crate::clock::Micros;

use super::grant::{Budget, Grant, Subject};

/// How a delegation came to exist: through the API (`by` came from the application's identity),
/// typed at a shell (`cli`), or handed across an agent boundary (`hop`). A closed set: a row
/// carrying anything else is unreadable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CreatedVia {
    /// Through the API: `by` came from the application's identity.
    Api,
    /// Typed at a shell.
    Cli,
    /// Handed across an agent boundary.
    Hop,
}

impl CreatedVia {
    /// The value as rows and listings spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            CreatedVia::Api => "api",
            CreatedVia::Cli => "cli",
            CreatedVia::Hop => "hop",
        }
    }

    /// The value spelled `text`, if it is one.
    pub fn parse(text: &str) -> Option<CreatedVia> {
        match text {
            "api" => Some(CreatedVia::Api),
            "cli" => Some(CreatedVia::Cli),
            "hop" => Some(CreatedVia::Hop),
            _ => None,
        }
    }
}

/// One row of the delegations table. Insert-only: a row is never rewritten; revocation is a
/// separate row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DelegationRecord {
    /// `dlg_` + 32 lowercase hex.
    pub delegation_id: String,
    /// A root grant id or another `dlg_` id.
    pub parent_id: String,
    /// Recorded for reading; evaluation walks the chain and never trusts it.
    pub depth: u32,
    /// [`grant_to_json`] of the delegated grant.
    pub grant_json: String,
    /// Who made the delegation.
    pub created_by: Principal,
    /// [`CreatedVia::as_str`], kept as text so an unknown value is readable as evidence.
    pub created_via: String,
    /// When.
    pub created_at: Micros,
}

/// One row of the revocations table, keyed by delegation id; written once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Revocation {
    /// The revoked delegation.
    pub delegation_id: String,
    /// When it was revoked.
    pub revoked_at: Micros,
    /// Who revoked it, if named.
    pub revoked_by: Option<String>,
}

/// A delegation row joined with its revocation, as a `DelegationSource` (`source`) returns it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredDelegation {
    /// The delegation row.
    pub record: DelegationRecord,
    /// Its revocation, if revoked.
    pub revocation: Option<Revocation>,
}

/// The parsed, validated form of a [`StoredDelegation`]. `grant.id` is the delegation id: one
/// namespace addresses root grants and delegations.
#[derive(Debug, Clone, PartialEq)]
pub struct Delegation {
    /// `dlg_` + 32 lowercase hex.
    pub delegation_id: String,
    /// A root grant id or another `dlg_` id.
    pub parent_id: String,
    /// The depth the row recorded (evaluation walks the chain instead).
    pub recorded_depth: u32,
    /// The delegated grant (its id is the delegation id).
    pub grant: Grant,
    /// Who made the delegation.
    pub created_by: Principal,
    /// How it was made.
    pub created_via: CreatedVia,
    /// When.
    pub created_at: Micros,
    /// When it was revoked, if it was.
    pub revoked_at: Option<Micros>,
    /// Who revoked it, if named.
    pub revoked_by: Option<String>,
}

impl Delegation {
    /// Whether it was revoked.
    pub fn is_revoked(&self) -> bool {
        self.revoked_at.is_some()
    }
}

/// Why a stored row is not a delegation. Evaluation turns it into `authority_unreadable`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("delegation '{delegation_id}' is unreadable: {detail}")]
pub struct Unreadable {
    /// The row's delegation id.
    pub delegation_id: String,
    /// What is wrong with it.
    pub detail: String,
}

/// Parse and validate a stored row.
pub fn parse_delegation(stored: &StoredDelegation) -> Result<Delegation, Unreadable> {
    let record = &stored.record;
    let unreadable = |detail: String| Unreadable { delegation_id: record.delegation_id.clone(), detail };
    // Enforced on the way out as well as in: a hand-inserted row named like a root grant would
    // otherwise shadow it.
    if !is_id(IdKind::Delegation, &record.delegation_id) {
        return Err(unreadable("the id is not 'dlg_' followed by 32 lowercase hex digits".into()));
    }
    let created_via = CreatedVia::parse(&record.created_via)
        .ok_or_else(|| unreadable("created_via is not one of api, cli, hop".into()))?;
    if record.parent_id.is_empty() {
        return Err(unreadable("the parent id is empty".into()));
    }
    record.created_by.validate().map_err(|e| unreadable(format!("created_by: {e}")))?;
    let (revoked_at, revoked_by) = match &stored.revocation {
        None => (None, None),
        Some(revocation) if revocation.delegation_id == record.delegation_id => {
            (Some(revocation.revoked_at), revocation.revoked_by.clone())
        }
        Some(_) => return Err(unreadable("its revocation row names another delegation".into())),
    };
    let grant = grant_from_json(&record.grant_json, &record.delegation_id).map_err(unreadable)?;
    Ok(Delegation {
        delegation_id: record.delegation_id.clone(),
        parent_id: record.parent_id.clone(),
        recorded_depth: record.depth,
        grant,
        created_by: record.created_by.clone(),
        created_via,
        created_at: record.created_at,
        revoked_at,
        revoked_by,
    })
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoredGrant {
    subject: StoredSubject,
    actions: Vec<String>,
    resources: Option<Vec<String>>,
    constraints: Map<String, Value>,
    environments: Option<Vec<String>>,
    expires_at: Option<Micros>,
    delegable: bool,
    tasks: Option<Vec<String>>,
    budgets: Option<Vec<StoredBudget>>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoredSubject {
    agent: Option<String>,
    user: Option<String>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoredBudget {
    metric: String,
    limit: u64,
    window: u64,
}

/// A grant's storage encoding: JSON with every dimension present (absent ones `null`), the
/// constraints as `{key: operand}`, `expires_at` in microseconds UTC and budget windows in
/// seconds. Not hashed and not canonical; the id is the row's key, not part of the text.
pub fn grant_to_json(grant: &Grant) -> String {
    let stored = StoredGrant {
        subject: StoredSubject { agent: grant.subject.agent.clone(), user: grant.subject.user.clone() },
        actions: grant.actions.clone(),
        resources: grant.resources.clone(),
        constraints: grant.constraints.iter().map(|c| (c.key.clone(), c.operand.clone())).collect(),
        environments: grant.environments.clone(),
        expires_at: grant.expires_at,
        delegable: grant.delegable,
        tasks: grant.tasks.clone(),
        budgets: grant.budgets.as_ref().map(|budgets| {
            budgets
                .iter()
                .map(|b| StoredBudget { metric: b.metric.clone(), limit: b.limit, window: b.window_seconds })
                .collect()
        }),
    };
    // Strings, integers, booleans and JSON values only: serialisation cannot fail.
    serde_json::to_string(&stored).unwrap_or_default()
}

/// Read a grant back and validate it as the loader would; `id` becomes its id.
pub fn grant_from_json(text: &str, id: &str) -> Result<Grant, String> {
    let stored: StoredGrant = serde_json::from_str(text).map_err(|e| format!("grant_json does not parse: {e}"))?;
    let constraints = crate::document::conditions_from_json(&stored.constraints)?;
    let grant = Grant {
        id: id.to_owned(),
        subject: Subject { agent: stored.subject.agent, user: stored.subject.user },
        actions: stored.actions,
        resources: stored.resources,
        constraints,
        environments: stored.environments,
        expires_at: stored.expires_at,
        delegable: stored.delegable,
        tasks: stored.tasks,
        budgets: stored.budgets.map(|budgets| {
            budgets.into_iter().map(|b| Budget { metric: b.metric, limit: b.limit, window_seconds: b.window }).collect()
        }),
    };
    grant.validate()?;
    Ok(grant)
}
