//! Walking a delegation to its root grant, and re-checking the whole chain (SPEC v0.3 §5.5,
//! §5.6). Done on every evaluation: this is what makes revocation transitive by structure, an
//! expiring parent stop authorising without anyone finding its children, and a narrowed root
//! grant narrow everything beneath it. The stored depth is never trusted, the walk is bounded
//! by `max_delegation_depth`, and a chain that revisits an id is a cycle.

use std::collections::HashSet;

use super::containment::contained_dimension;
use super::grant::Grant;
use super::reason::{AuthorityReason, Dimension};
use super::record::{parse_delegation, Delegation, Unreadable};
use super::section::Authority;
use super::source::{DelegationSource, SourceError};

/// What walking a delegation up towards its root found.
#[derive(Debug, Clone)]
pub struct Walk<'a> {
    /// Leaf first.
    pub nodes: Vec<Delegation>,
    /// The root grant's id and grant, where the walk reached one.
    pub root: Option<(&'a str, &'a Grant)>,
    /// The parent id the walk could not find, if one was missing.
    pub missing_parent_id: Option<String>,
    /// The delegation id at which the walk found a loop, if it did.
    pub cycle_at: Option<String>,
    /// The depth at which the bound stopped the walk, if it did.
    pub depth_exceeded: Option<u32>,
}

/// Why a walk could not be completed into a decision.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum WalkError {
    /// A delegation on the way up could not be read.
    Unreadable(Unreadable),
    /// The store failed.
    Fault(String),
}

impl From<SourceError> for WalkError {
    fn from(error: SourceError) -> WalkError {
        match error {
            SourceError::Unreadable { delegation_id, detail } => {
                WalkError::Unreadable(Unreadable { delegation_id, detail })
            }
            SourceError::Fault(message) => WalkError::Fault(message),
        }
    }
}

impl Walk<'_> {
    /// The walked depth: the number of delegations from the leaf to the root, or the depth at
    /// which the bound stopped the walk.
    pub fn depth(&self) -> u32 {
        self.depth_exceeded.unwrap_or_else(|| u32::try_from(self.nodes.len()).unwrap_or(u32::MAX))
    }

    /// Every grant above the leaf, root first.
    pub fn ancestors(&self) -> Vec<(&str, &Grant)> {
        let mut above: Vec<(&str, &Grant)> = self.root.iter().map(|(id, grant)| (*id, *grant)).collect();
        above.extend(self.nodes.iter().skip(1).rev().map(|node| (node.delegation_id.as_str(), &node.grant)));
        above
    }

    /// Every parent → child pair, root first, ending at the leaf.
    pub fn steps(&self) -> Vec<(&Grant, &Grant)> {
        let mut chain: Vec<&Grant> = self.ancestors().into_iter().map(|(_, grant)| grant).collect();
        if let Some(leaf) = self.nodes.first() {
            chain.push(&leaf.grant);
        }
        chain.windows(2).map(|pair| (pair[0], pair[1])).collect()
    }

    /// Whether any grant above the leaf is not `delegable`.
    pub fn undelegable_ancestor(&self) -> bool {
        self.ancestors().iter().any(|(_, grant)| !grant.delegable)
    }
}

/// Walk `leaf` towards its root: at most `max_delegation_depth` delegations are read.
pub fn walk<'a>(
    authority: &'a Authority,
    leaf: Delegation,
    source: &dyn DelegationSource,
) -> Result<Walk<'a>, WalkError> {
    let mut seen: HashSet<String> = HashSet::from([leaf.delegation_id.clone()]);
    let mut nodes = vec![leaf];
    let bound = usize::try_from(authority.max_delegation_depth).unwrap_or(usize::MAX);
    loop {
        let parent_id = nodes.last().map(|node| node.parent_id.clone()).unwrap_or_default();
        let done = |nodes, root, missing, cycle, exceeded| Walk {
            nodes,
            root,
            missing_parent_id: missing,
            cycle_at: cycle,
            depth_exceeded: exceeded,
        };
        if let Some((id, grant)) = authority.grants.get_key_value(&parent_id) {
            return Ok(done(nodes, Some((id.as_str(), grant)), None, None, None));
        }
        if seen.contains(&parent_id) {
            return Ok(done(nodes, None, None, Some(parent_id), None));
        }
        let Some(stored) = source.delegation(&parent_id)? else {
            return Ok(done(nodes, None, Some(parent_id), None, None));
        };
        if nodes.len() >= bound {
            // One more node would pass the bound; the bound is what stops an edited store from
            // hanging the process.
            let exceeded = u32::try_from(nodes.len() + 1).unwrap_or(u32::MAX);
            return Ok(done(nodes, None, None, None, Some(exceeded)));
        }
        seen.insert(parent_id);
        nodes.push(parse_delegation(&stored).map_err(WalkError::Unreadable)?);
    }
}

/// The first of the chain rules a walked delegation fails, with the evidence that names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainFailure {
    /// The failing rule's reason.
    pub reason: AuthorityReason,
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
}

impl ChainFailure {
    fn new(reason: AuthorityReason) -> ChainFailure {
        ChainFailure {
            reason,
            dimension: None,
            missing_parent_id: None,
            expired_parent_id: None,
            depth_exceeded: None,
            cycle_at: None,
        }
    }
}

/// The chain rules in their fixed order: a missing parent, a revoked node, an expired ancestor,
/// a link that is not contained, a cycle, a chain deeper than the bound, an undelegable ancestor.
/// Fixed, because several yield `authority_escalation` with different evidence.
pub fn check_chain(authority: &Authority, walk: &Walk<'_>, now: crate::clock::Micros) -> Option<ChainFailure> {
    if let Some(missing) = &walk.missing_parent_id {
        return Some(ChainFailure {
            missing_parent_id: Some(missing.clone()),
            ..ChainFailure::new(AuthorityReason::Escalation)
        });
    }
    if walk.nodes.iter().any(Delegation::is_revoked) {
        return Some(ChainFailure::new(AuthorityReason::Revoked));
    }
    if let Some((id, _)) = walk.ancestors().into_iter().find(|(_, grant)| grant.is_expired(now)) {
        return Some(ChainFailure {
            expired_parent_id: Some(id.to_owned()),
            ..ChainFailure::new(AuthorityReason::Escalation)
        });
    }
    for (parent, child) in walk.steps() {
        if let Some(dimension) = contained_dimension(parent, child) {
            return Some(ChainFailure { dimension: Some(dimension), ..ChainFailure::new(AuthorityReason::Escalation) });
        }
    }
    if let Some(cycle) = &walk.cycle_at {
        return Some(ChainFailure { cycle_at: Some(cycle.clone()), ..ChainFailure::new(AuthorityReason::Unreadable) });
    }
    let depth = walk.depth();
    if depth > authority.max_delegation_depth {
        // Compared here, not inferred from the walk stopping: a chain that reaches its root in
        // one step is never measured by the walk, and `max_delegation_depth: 0` must still
        // switch existing depth-1 delegations off.
        return Some(ChainFailure { depth_exceeded: Some(depth), ..ChainFailure::new(AuthorityReason::Escalation) });
    }
    if walk.undelegable_ancestor() {
        return Some(ChainFailure::new(AuthorityReason::Escalation));
    }
    None
}
