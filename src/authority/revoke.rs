//! Revocation (SPEC v0.3 §5.7, v0.8 §7.3): one insert-only row per revoked delegation,
//! idempotent, and transitive by structure — nothing beneath is rewritten, because every
//! evaluation walks the chain to its root and meets the revoked link. A chain of any depth is
//! cut by one write.
//!
//! The selectors `--created-by` and `--under` are pure functions over the rows a listing read;
//! they decide which ids to revoke, one at a time, through the same plan a single id takes.

use std::collections::{BTreeSet, HashSet};

use crate::clock::Micros;

use super::pattern::shorten;
use super::record::{parse_delegation, Revocation, StoredDelegation};
use super::source::{DelegationSource, SourceError};

/// What revoking one id would do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RevocationPlan {
    /// Insert this row (the call answers `true`).
    Revoke(Revocation),
    /// Already revoked; nothing is written and no second event appended (the call answers `false`).
    AlreadyRevoked {
        /// When it was revoked.
        revoked_at: Micros,
    },
}

/// Why nothing could be revoked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RevocationError {
    /// No delegation has this id.
    #[error("no delegation '{0}'; nothing was revoked")]
    Unknown(String),
    /// The delegation's row could not be read.
    #[error("{0}")]
    Unreadable(String),
    /// The store failed.
    #[error("the delegation store failed: {0}")]
    Fault(String),
}

/// Plan the revocation of `delegation_id`. An unknown id is an error, never a silent success.
pub fn plan_revocation(
    source: &dyn DelegationSource,
    delegation_id: &str,
    by: Option<&str>,
    now: Micros,
) -> Result<RevocationPlan, RevocationError> {
    let stored = match source.delegation(delegation_id) {
        Ok(Some(stored)) => stored,
        Ok(None) => return Err(RevocationError::Unknown(shorten(delegation_id))),
        Err(SourceError::Unreadable { delegation_id, detail }) => {
            return Err(RevocationError::Unreadable(format!("delegation '{delegation_id}' is unreadable: {detail}")))
        }
        Err(SourceError::Fault(message)) => return Err(RevocationError::Fault(message)),
    };
    let delegation = parse_delegation(&stored).map_err(|e| RevocationError::Unreadable(e.to_string()))?;
    if let Some(revoked_at) = delegation.revoked_at {
        return Ok(RevocationPlan::AlreadyRevoked { revoked_at });
    }
    Ok(RevocationPlan::Revoke(Revocation {
        delegation_id: delegation.delegation_id,
        revoked_at: now,
        revoked_by: by.map(str::to_owned),
    }))
}

/// `--created-by AGENT` or `--created-by AGENT/USER`, split on the first `/`. `AGENT/` is a
/// typed-and-lost user and is refused rather than read as "every user"; so is a second `/`.
pub fn parse_created_by(value: &str) -> Result<(String, Option<String>), String> {
    let (agent, user) = match value.split_once('/') {
        None => (value, None),
        Some((agent, user)) => (agent, Some(user)),
    };
    if agent.is_empty() {
        return Err("--created-by needs an agent name: AGENT or AGENT/USER".into());
    }
    match user {
        Some("") => Err(format!(
            "--created-by '{}' ends with '/': write AGENT for every user, or AGENT/USER for one",
            shorten(value)
        )),
        Some(user) if user.contains('/') => {
            Err(format!("--created-by '{}' has more than one '/': write AGENT or AGENT/USER", shorten(value)))
        }
        _ => Ok((agent.to_owned(), user.map(str::to_owned))),
    }
}

/// The rows `agent` (and, when given, `user`) created, in the order given.
pub fn created_by<'a>(rows: &'a [StoredDelegation], agent: &str, user: Option<&str>) -> Vec<&'a StoredDelegation> {
    rows.iter()
        .filter(|row| {
            row.record.created_by.agent == agent
                && user.is_none_or(|u| row.record.created_by.user.as_deref() == Some(u))
        })
        .collect()
}

/// Every row whose parent chain reaches `parent_id`, at any depth — strictly beneath, so the row
/// itself is not included. Bounded by the rows already seen, so a chain edited into a cycle
/// cannot hang an incident command.
pub fn beneath<'a>(rows: &'a [StoredDelegation], parent_id: &str) -> Vec<&'a StoredDelegation> {
    let by_id: std::collections::HashMap<&str, &StoredDelegation> =
        rows.iter().map(|row| (row.record.delegation_id.as_str(), row)).collect();
    rows.iter()
        .filter(|row| {
            let mut seen: HashSet<&str> = HashSet::from([row.record.delegation_id.as_str()]);
            let mut current = row.record.parent_id.as_str();
            while !seen.contains(current) {
                if current == parent_id {
                    return true;
                }
                seen.insert(current);
                match by_id.get(current) {
                    Some(parent) => current = parent.record.parent_id.as_str(),
                    None => return false,
                }
            }
            false
        })
        .collect()
}

/// The descendants of `parent_id` through the source's children index (breadth first, each id
/// once), for a store that does not want to list every row.
pub fn descendants(source: &dyn DelegationSource, parent_id: &str) -> Result<Vec<String>, SourceError> {
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut order = Vec::new();
    let mut frontier = vec![parent_id.to_owned()];
    while let Some(id) = frontier.pop() {
        for child in source.children(&id)? {
            if child != parent_id && seen.insert(child.clone()) {
                order.push(child.clone());
                frontier.push(child);
            }
        }
    }
    Ok(order)
}
