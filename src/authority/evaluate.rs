//! Does any grant cover this action? (SPEC v0.3 §4.3, v0.9 §6, v0.10 §2.3.2.)
//!
//! Candidates are the document's root grants plus the stored delegations indexed under the
//! principal's agent and the action's first name segment — or, under a presented hop, that one
//! delegation alone. A candidate whose shape (subject, action, resource, environment) does not
//! match is not considered. Every other candidate is checked completely — chain, expiry,
//! constraints, task — and every reason it fails for is collected rather than short-circuited.
//! A passing candidate wins (the smallest grant id in code-point order when several pass);
//! otherwise the reported failure is the first in [`AuthorityReason`]'s precedence order, from
//! the candidate with the smallest id. The evidence is a property of the configuration, not of
//! the order anything was written or checked in.

use std::collections::BTreeMap;

use crate::action::Action;
use crate::clock::Micros;

use super::chain::{check_chain, walk, WalkError};
use super::grant::{Budget, Grant};
use super::reason::{AuthorityReason, Dimension};
use super::record::{parse_delegation, Delegation};
use super::section::Authority;
use super::source::{lookup_keys, DelegationSource};

/// One call to evaluate.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    /// The action evaluated.
    pub action: &'a Action,
    /// The instant it is evaluated at.
    pub now: Micros,
    /// The unit of work the caller names; `None` satisfies only grants that name no task.
    pub task: Option<&'a str>,
    /// `false` only where the action is rehydrated and carries no task (a resumed leg).
    pub evaluate_task: bool,
    /// A delegation id handed over by another agent: then it is the only candidate.
    pub hop: Option<&'a str>,
}

impl<'a> Call<'a> {
    /// A call with no task and no hop.
    pub fn new(action: &'a Action, now: Micros) -> Call<'a> {
        Call { action, now, task: None, evaluate_task: true, hop: None }
    }
}

/// What the authority axis decided and which grant it decided on. The trailing fields are the
/// evidence an `AUTHORITY_DENIED` event carries; several chain rules share one reason, and
/// without them they could not be told apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthorityResult {
    /// Whether a grant covers the action.
    pub passed: bool,
    /// Why (the failing reason, or `authority_grant` on a pass).
    pub reason: AuthorityReason,
    /// The root grant id, or the delegation id, that decided.
    pub grant_id: Option<String>,
    /// Set when the deciding grant is a delegation (then equal to `grant_id`), or when an
    /// unreadable row is named.
    pub delegation_id: Option<String>,
    /// The walked depth of the deciding grant (0 for a root grant).
    pub depth: u32,
    /// The hop presented, on every result of a call under one.
    pub hop: Option<String>,
    /// The containment dimension that failed, for a containment failure.
    pub dimension: Option<Dimension>,
    /// The parent id that no longer exists, if that was the failure.
    pub missing_parent_id: Option<String>,
    /// The parent that had expired, if that was the failure.
    pub expired_parent_id: Option<String>,
    /// The depth at which the bound stopped the walk, if it did.
    pub depth_exceeded: Option<u32>,
    /// The delegation id at which the chain loops, if it does.
    pub cycle_at: Option<String>,
    /// On a pass: every budget up the deciding chain as `(grant id, budget)` — the leaf first,
    /// then the root and down towards the leaf's parent. Each one is charged on reservation.
    pub budgets: Vec<(String, Budget)>,
    /// On a pass through a delegation: the delegation ids of the deciding chain, leaf first. The
    /// reservation re-checks each for a revocation inside its own transaction.
    pub chain: Vec<String>,
    /// Constraints that were false because an argument was missing or of the wrong type.
    pub warnings: Vec<String>,
}

impl AuthorityResult {
    fn new(passed: bool, reason: AuthorityReason) -> AuthorityResult {
        AuthorityResult {
            passed,
            reason,
            grant_id: None,
            delegation_id: None,
            depth: 0,
            hop: None,
            dimension: None,
            missing_parent_id: None,
            expired_parent_id: None,
            depth_exceeded: None,
            cycle_at: None,
            budgets: Vec::new(),
            chain: Vec::new(),
            warnings: Vec::new(),
        }
    }

    fn unreadable(delegation_id: String, hop: Option<&str>) -> AuthorityResult {
        AuthorityResult {
            delegation_id: Some(delegation_id),
            hop: hop.map(str::to_owned),
            ..AuthorityResult::new(false, AuthorityReason::Unreadable)
        }
    }
}

/// A store fault met while evaluating: no decision can be taken, and none is invented.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("authority could not be evaluated: {0}")]
pub struct EvaluationFault(pub String);

struct Candidate<'a> {
    id: String,
    grant: &'a Grant,
    delegation: Option<&'a Delegation>,
}

/// Evaluate `call` against the document's grants and the source's delegations. Reads at most
/// two index keys plus, per matching delegation, its chain up to `max_delegation_depth` rows.
pub fn evaluate(
    authority: &Authority,
    call: &Call<'_>,
    source: &dyn DelegationSource,
) -> Result<AuthorityResult, EvaluationFault> {
    let hop = call.hop;
    let delegations = match load_delegations(call, source) {
        Ok(Loaded::Delegations(delegations)) => delegations,
        Ok(Loaded::HopRefused { grant_id, dimension }) => {
            return Ok(AuthorityResult {
                grant_id,
                dimension,
                hop: hop.map(str::to_owned),
                ..AuthorityResult::new(false, AuthorityReason::Hop)
            })
        }
        Err(WalkError::Unreadable(unreadable)) => {
            return Ok(AuthorityResult::unreadable(unreadable.delegation_id, hop))
        }
        Err(WalkError::Fault(message)) => return Err(EvaluationFault(message)),
    };
    let mut candidates: Vec<Candidate<'_>> = Vec::new();
    if hop.is_none() {
        candidates.extend(authority.grants.iter().map(|(id, grant)| Candidate {
            id: id.clone(),
            grant,
            delegation: None,
        }));
    }
    candidates.extend(delegations.values().map(|d| Candidate {
        id: d.delegation_id.clone(),
        grant: &d.grant,
        delegation: Some(d),
    }));

    let mut passed: Vec<AuthorityResult> = Vec::new();
    let mut failed: BTreeMap<AuthorityReason, Vec<AuthorityResult>> = BTreeMap::new();
    let mut warnings = Vec::new();
    for candidate in candidates {
        if candidate.grant.unmatched_shape(call.action).is_some() {
            continue;
        }
        let mut outcomes: Vec<AuthorityResult> = Vec::new();
        let mut depth = 0;
        let mut budgets: Vec<(String, Budget)> = own_budgets(&candidate.id, candidate.grant);
        let mut chain = Vec::new();
        if let Some(delegation) = candidate.delegation {
            let walked = match walk(authority, delegation.clone(), source) {
                Ok(walked) => walked,
                Err(WalkError::Unreadable(unreadable)) => {
                    return Ok(AuthorityResult::unreadable(unreadable.delegation_id, hop))
                }
                Err(WalkError::Fault(message)) => return Err(EvaluationFault(message)),
            };
            depth = walked.depth();
            chain = walked.nodes.iter().map(|node| node.delegation_id.clone()).collect();
            if let Some(failure) = check_chain(authority, &walked, call.now) {
                outcomes.push(AuthorityResult {
                    dimension: failure.dimension,
                    missing_parent_id: failure.missing_parent_id,
                    expired_parent_id: failure.expired_parent_id,
                    depth_exceeded: failure.depth_exceeded,
                    cycle_at: failure.cycle_at,
                    ..AuthorityResult::new(false, failure.reason)
                });
            }
            for (id, grant) in walked.ancestors() {
                budgets.extend(own_budgets(id, grant));
            }
        }
        if candidate.grant.is_expired(call.now) {
            outcomes.push(AuthorityResult::new(false, AuthorityReason::Expired));
        }
        if !candidate.grant.constraints_hold(&call.action.name, &call.action.arguments, &mut warnings) {
            outcomes.push(AuthorityResult::new(false, AuthorityReason::Constraint));
        }
        if call.evaluate_task && !candidate.grant.task_holds(call.task) {
            outcomes.push(AuthorityResult::new(false, AuthorityReason::Task));
        }
        let named = candidate.delegation.map(|d| d.delegation_id.clone());
        if outcomes.is_empty() {
            passed.push(AuthorityResult {
                grant_id: Some(candidate.id.clone()),
                delegation_id: named,
                depth,
                budgets,
                chain,
                ..AuthorityResult::new(true, AuthorityReason::Grant)
            });
        } else {
            for outcome in outcomes {
                let reason = outcome.reason;
                failed.entry(reason).or_default().push(AuthorityResult {
                    grant_id: Some(candidate.id.clone()),
                    delegation_id: named.clone(),
                    depth,
                    ..outcome
                });
            }
        }
    }
    let chosen = smallest_id(passed)
        .or_else(|| failed.into_iter().next().and_then(|(_, results)| smallest_id(results)))
        .unwrap_or_else(|| AuthorityResult::new(false, AuthorityReason::NoAuthority));
    Ok(AuthorityResult { hop: hop.map(str::to_owned), warnings, ..chosen })
}

fn own_budgets(id: &str, grant: &Grant) -> Vec<(String, Budget)> {
    grant.budgets.iter().flatten().map(|budget| (id.to_owned(), budget.clone())).collect()
}

fn smallest_id(results: Vec<AuthorityResult>) -> Option<AuthorityResult> {
    results.into_iter().min_by(|a, b| a.grant_id.cmp(&b.grant_id))
}

enum Loaded {
    /// Parsed candidate delegations by id (an index may list one under two keys).
    Delegations(BTreeMap<String, Delegation>),
    HopRefused {
        grant_id: Option<String>,
        dimension: Option<Dimension>,
    },
}

fn load_delegations(call: &Call<'_>, source: &dyn DelegationSource) -> Result<Loaded, WalkError> {
    let mut found = BTreeMap::new();
    if let Some(hop) = call.hop {
        let Some(stored) = source.delegation(hop).map_err(WalkError::from)? else {
            return Ok(Loaded::HopRefused { grant_id: None, dimension: None });
        };
        let delegation = parse_delegation(&stored).map_err(WalkError::Unreadable)?;
        if let Some(dimension) = delegation.grant.unmatched_shape(call.action) {
            return Ok(Loaded::HopRefused { grant_id: Some(hop.to_owned()), dimension: Some(dimension) });
        }
        // A revoked hop stays a candidate: the chain check answers `authority_revoked` for it,
        // and `authority_hop` must not stand in for that.
        found.insert(delegation.delegation_id.clone(), delegation);
        return Ok(Loaded::Delegations(found));
    }
    for key in lookup_keys(&call.action.principal.agent, &call.action.name) {
        for stored in source.candidates(&key).map_err(WalkError::from)? {
            if found.contains_key(&stored.record.delegation_id) {
                continue;
            }
            let delegation = parse_delegation(&stored).map_err(WalkError::Unreadable)?;
            found.insert(delegation.delegation_id.clone(), delegation);
        }
    }
    Ok(Loaded::Delegations(found))
}
