//! Creating a delegation (SPEC v0.3 §5.3): the checks in ctrlrun's order, each refusal naming
//! its reason and, for containment, the dimension. Pure: it reads the source and returns the
//! row to write, or the refusal to record (a DELEGATION_REJECTED event and no row).
//!
//! Order: the creator's credential is unexpired; the parent is a root grant or a live
//! delegation; it is delegable; it and the chain above it are still valid; the creator matches
//! its subject; the new depth is within `max_delegation_depth`; the child is contained on every
//! dimension.

use std::collections::BTreeSet;

use crate::action::Principal;
use crate::clock::Micros;

use super::chain::{walk, WalkError};
use super::containment::contained_dimension;
use super::grant::Grant;
use super::pattern::shorten;
use super::reason::{CreationReason, Dimension};
use super::record::{grant_to_json, parse_delegation, CreatedVia, DelegationRecord};
use super::section::Authority;
use super::source::{index_keys, DelegationSource, IndexKey};

/// One request to create a delegation.
#[derive(Debug, Clone)]
pub struct Proposal<'a> {
    /// A root grant id or a `dlg_` id.
    pub parent_id: &'a str,
    /// The child grant, with an empty id: the id is assigned, never chosen.
    pub grant: &'a Grant,
    /// Who is delegating, and when their credential expires.
    pub by: &'a Principal,
    /// When the delegating principal's credential expires, if it does.
    pub by_expires_at: Option<Micros>,
    /// How the delegation is being made.
    pub via: CreatedVia,
    /// The instant of creation.
    pub now: Micros,
    /// A fresh `dlg_` id minted by the caller (`action::new_id(IdKind::Delegation)`).
    pub new_id: &'a str,
}

/// A delegation refused: the reason, the parent, the dimension for a containment refusal only,
/// and a message that says what was wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("delegation under '{parent_id}' refused ({reason}{}): {message}", dimension.map(|d| format!(" on {d}")).unwrap_or_default())]
pub struct CreationRefusal {
    /// Why it was refused.
    pub reason: CreationReason,
    /// The grant or delegation it was to narrow.
    pub parent_id: String,
    /// The dimension not contained, for a containment refusal.
    pub dimension: Option<Dimension>,
    /// What was wrong, in words.
    pub message: String,
}

/// Why no decision could be reached.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CreationError {
    /// The delegation was refused, with the reason.
    #[error(transparent)]
    Refused(CreationRefusal),
    /// The proposed grant is malformed (the loader would have refused it).
    #[error("the delegated grant is invalid: {0}")]
    InvalidGrant(String),
    /// The store failed.
    #[error("the delegation store failed: {0}")]
    Fault(String),
}

/// The row to insert, and the index keys to insert it under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewDelegation {
    /// The delegation row.
    pub record: DelegationRecord,
    /// The index entries it is found under.
    pub index_keys: BTreeSet<IndexKey>,
}

/// Decide a delegation. `Ok` is the row to write; nothing is written here.
pub fn plan_delegation(
    authority: &Authority,
    proposal: &Proposal<'_>,
    source: &dyn DelegationSource,
) -> Result<NewDelegation, CreationError> {
    let parent_id = proposal.parent_id;
    let refuse = |reason: CreationReason, message: String| {
        CreationError::Refused(CreationRefusal { reason, parent_id: parent_id.to_owned(), dimension: None, message })
    };
    // Rule 0: an agent whose credential lapsed must not write a durable, re-delegable grant.
    if proposal.by_expires_at.is_some_and(|at| proposal.now > at) {
        return Err(refuse(
            CreationReason::PrincipalExpired,
            "the delegating principal's credential has expired; an expired credential may not create authority".into(),
        ));
    }
    if !proposal.grant.id.is_empty() {
        return Err(refuse(
            CreationReason::IdAssigned,
            format!(
                "the grant carries the id '{}'; a delegation's id is assigned, not chosen",
                shorten(&proposal.grant.id)
            ),
        ));
    }
    proposal.grant.validate().map_err(CreationError::InvalidGrant)?;
    let (parent, parent_depth) = parent_for_creation(authority, proposal, source)?;
    if !parent.subject.matches(proposal.by) {
        return Err(refuse(
            CreationReason::NotTheSubject,
            format!(
                "'{}' does not match the subject of '{}'; only authority you hold can be delegated",
                shorten(&proposal.by.agent),
                shorten(parent_id)
            ),
        ));
    }
    let depth = parent_depth.saturating_add(1);
    if depth > authority.max_delegation_depth {
        return Err(refuse(
            CreationReason::MaxDepth,
            format!(
                "a delegation of '{}' would be at depth {depth}, beyond max_delegation_depth {}",
                shorten(parent_id),
                authority.max_delegation_depth
            ),
        ));
    }
    if let Some(dimension) = contained_dimension(&parent, proposal.grant) {
        return Err(CreationError::Refused(CreationRefusal {
            reason: CreationReason::Containment,
            parent_id: parent_id.to_owned(),
            dimension: Some(dimension),
            message: format!(
                "the child grant is not contained in '{}' on '{dimension}'; narrow it, and state every \
                 dimension the parent constrains (omission never means unlimited)",
                shorten(parent_id)
            ),
        }));
    }
    let mut grant = proposal.grant.clone();
    grant.id = proposal.new_id.to_owned();
    let keys = index_keys(&grant);
    Ok(NewDelegation {
        record: DelegationRecord {
            delegation_id: proposal.new_id.to_owned(),
            parent_id: parent_id.to_owned(),
            depth,
            grant_json: grant_to_json(&grant),
            created_by: proposal.by.clone(),
            created_via: proposal.via.as_str().to_owned(),
            created_at: proposal.now,
        },
        index_keys: keys,
    })
}

/// Rules 1–3 and the walked depth of the parent. A root grant wins an id collision.
fn parent_for_creation(
    authority: &Authority,
    proposal: &Proposal<'_>,
    source: &dyn DelegationSource,
) -> Result<(Grant, u32), CreationError> {
    let parent_id = proposal.parent_id;
    let now = proposal.now;
    let refuse = |reason: CreationReason, message: String| {
        CreationError::Refused(CreationRefusal { reason, parent_id: parent_id.to_owned(), dimension: None, message })
    };
    let not_delegable =
        || refuse(CreationReason::ParentNotDelegable, format!("'{}' is not delegable", shorten(parent_id)));
    let expired = || refuse(CreationReason::ParentNotValid, format!("'{}' has expired", shorten(parent_id)));
    if let Some(root) = authority.grants.get(parent_id) {
        if !root.delegable {
            return Err(not_delegable());
        }
        if root.is_expired(now) {
            return Err(expired());
        }
        return Ok((root.clone(), 0));
    }
    let unknown =
        || refuse(CreationReason::UnknownParent, format!("no live grant or delegation '{}'", shorten(parent_id)));
    let stored = match source.delegation(parent_id) {
        Ok(Some(stored)) if stored.revocation.is_none() => stored,
        Ok(_) => return Err(unknown()),
        Err(super::source::SourceError::Fault(message)) => return Err(CreationError::Fault(message)),
        Err(super::source::SourceError::Unreadable { detail, .. }) => {
            return Err(refuse(
                CreationReason::ParentNotValid,
                format!("'{}' is unreadable: {detail}", shorten(parent_id)),
            ))
        }
    };
    let parent = parse_delegation(&stored).map_err(|e| refuse(CreationReason::ParentNotValid, e.to_string()))?;
    if !parent.grant.delegable {
        return Err(not_delegable());
    }
    if parent.grant.is_expired(now) {
        return Err(expired());
    }
    let grant = parent.grant.clone();
    let walked = match walk(authority, parent, source) {
        Ok(walked) => walked,
        Err(WalkError::Unreadable(unreadable)) => {
            return Err(refuse(CreationReason::ParentNotValid, unreadable.to_string()))
        }
        Err(WalkError::Fault(message)) => return Err(CreationError::Fault(message)),
    };
    // The chain above, not only the parent: `delegable: false` or an expiry on a root grant
    // stops new delegations anywhere beneath it.
    let invalid = walked.missing_parent_id.is_some()
        || walked.cycle_at.is_some()
        || walked.nodes.iter().skip(1).any(super::record::Delegation::is_revoked)
        || walked.ancestors().iter().any(|(_, ancestor)| ancestor.is_expired(now))
        || walked.undelegable_ancestor();
    if invalid {
        return Err(refuse(
            CreationReason::ParentNotValid,
            format!("the chain above '{}' is no longer valid", shorten(parent_id)),
        ));
    }
    Ok((grant, walked.depth()))
}
