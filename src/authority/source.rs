//! Where stored delegations come from during evaluation, creation and revocation.
//!
//! Evaluation must not read every delegation row per action: its cost may not grow with the
//! number of delegations stored. So a source answers three narrow questions — one row by id,
//! the rows indexed under one [`IndexKey`], and the children of one id — and the keys are
//! defined here, so that the store's index and the evaluator cannot disagree about them.
//!
//! A delegation's subject always names one concrete agent (containment refuses a wildcard or a
//! missing agent), so the index is keyed by that agent and by the first segment of each action
//! pattern, with every pattern whose first segment is a wildcard under [`WILDCARD_SEGMENT`].
//! An evaluation reads exactly two keys: (principal agent, first segment of the action name) and
//! (principal agent, `*`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};

use super::grant::Grant;
use super::record::{DelegationRecord, Revocation, StoredDelegation};

/// The index bucket of action patterns whose first segment is a wildcard (`*`, `ref*`, `**`).
/// A literal segment never contains `*`, so it cannot collide with a literal.
pub const WILDCARD_SEGMENT: &str = "*";

/// One index entry: a delegation is a candidate for actions proposed by `agent` whose first
/// name segment is `action` (or for every action, under [`WILDCARD_SEGMENT`]).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
pub struct IndexKey {
    /// The agent that proposes.
    pub agent: String,
    /// The first segment of the action's name, or `*`.
    pub action: String,
}

/// What a source could not do. `Unreadable` is a fact about one row (a decision follows:
/// `authority_unreadable`); `Fault` is a fault of the store (no decision; the call fails).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SourceError {
    /// One row could not be read; evaluation decides `authority_unreadable`.
    #[error("delegation '{delegation_id}' is unreadable: {detail}")]
    Unreadable {
        /// The row's delegation id.
        delegation_id: String,
        /// What is wrong with it.
        detail: String,
    },
    /// The store failed; no decision.
    #[error("the delegation store failed: {0}")]
    Fault(String),
}

/// Read access to stored delegations. Implemented over the store with an index; [`MemorySource`]
/// is the reference implementation the tests use.
pub trait DelegationSource {
    /// One delegation by id, joined with its revocation, or `None`.
    fn delegation(&self, delegation_id: &str) -> Result<Option<StoredDelegation>, SourceError>;

    /// Every delegation indexed under `key` (see [`index_keys`]), revoked ones included. Cost
    /// proportional to the rows under that key, never to the table.
    fn candidates(&self, key: &IndexKey) -> Result<Vec<StoredDelegation>, SourceError>;

    /// The ids of the delegations whose parent is `parent_id` (for `revoke --under`).
    fn children(&self, parent_id: &str) -> Result<Vec<String>, SourceError>;
}

/// The index keys a delegation with this grant is stored under. Empty only for a grant with no
/// concrete agent, which containment never lets a delegation have.
pub fn index_keys(grant: &Grant) -> BTreeSet<IndexKey> {
    let Some(agent) = grant.subject.agent.as_deref().filter(|agent| !agent.contains('*')) else {
        return BTreeSet::new();
    };
    grant
        .actions
        .iter()
        .map(|pattern| {
            let first = pattern.split('.').next().unwrap_or(pattern);
            let action = if first.contains('*') { WILDCARD_SEGMENT } else { first };
            IndexKey { agent: agent.to_owned(), action: action.to_owned() }
        })
        .collect()
}

/// The keys one evaluation reads for this principal agent and action name.
pub fn lookup_keys(agent: &str, action_name: &str) -> [IndexKey; 2] {
    let first = action_name.split('.').next().unwrap_or(action_name);
    [
        IndexKey { agent: agent.to_owned(), action: first.to_owned() },
        IndexKey { agent: agent.to_owned(), action: WILDCARD_SEGMENT.to_owned() },
    ]
}

/// An in-memory source with the same index a store keeps, counting its reads: one per row
/// returned and one per index range or point lookup.
#[derive(Debug, Default)]
pub struct MemorySource {
    rows: BTreeMap<String, DelegationRecord>,
    revocations: BTreeMap<String, Revocation>,
    index: BTreeMap<IndexKey, BTreeSet<String>>,
    children: BTreeMap<String, BTreeSet<String>>,
    reads: AtomicU64,
}

impl MemorySource {
    /// An empty source.
    pub fn new() -> MemorySource {
        MemorySource::default()
    }

    /// Insert a row under `keys`; insert-only, so an existing id is refused. A store computes
    /// `keys` with [`index_keys`] from the validated grant at creation.
    pub fn insert(&mut self, record: DelegationRecord, keys: &BTreeSet<IndexKey>) -> Result<(), String> {
        if self.rows.contains_key(&record.delegation_id) {
            return Err(format!("delegation '{}' already exists; rows are never rewritten", record.delegation_id));
        }
        for key in keys {
            self.index.entry(key.clone()).or_default().insert(record.delegation_id.clone());
        }
        self.children.entry(record.parent_id.clone()).or_default().insert(record.delegation_id.clone());
        self.rows.insert(record.delegation_id.clone(), record);
        Ok(())
    }

    /// Insert a revocation row: `true` when written, `false` when the delegation was already
    /// revoked (the first row stands). An unknown id is an error.
    pub fn revoke(&mut self, revocation: Revocation) -> Result<bool, String> {
        if !self.rows.contains_key(&revocation.delegation_id) {
            return Err(format!("no delegation '{}'", revocation.delegation_id));
        }
        if self.revocations.contains_key(&revocation.delegation_id) {
            return Ok(false);
        }
        self.revocations.insert(revocation.delegation_id.clone(), revocation);
        Ok(true)
    }

    /// Every row, revoked ones included, in id order (for listings and sweeps).
    pub fn all(&self) -> Vec<StoredDelegation> {
        self.rows.values().map(|record| self.joined(record)).collect()
    }

    /// How many rows it holds.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Reads since creation or the last [`MemorySource::reset_reads`].
    pub fn reads(&self) -> u64 {
        self.reads.load(Ordering::SeqCst)
    }

    /// Set the read count back to 0.
    pub fn reset_reads(&self) {
        self.reads.store(0, Ordering::SeqCst);
    }

    fn count(&self, n: usize) {
        self.reads.fetch_add(u64::try_from(n).unwrap_or(u64::MAX), Ordering::SeqCst);
    }

    fn joined(&self, record: &DelegationRecord) -> StoredDelegation {
        StoredDelegation { record: record.clone(), revocation: self.revocations.get(&record.delegation_id).cloned() }
    }
}

impl DelegationSource for MemorySource {
    fn delegation(&self, delegation_id: &str) -> Result<Option<StoredDelegation>, SourceError> {
        self.count(1);
        Ok(self.rows.get(delegation_id).map(|record| self.joined(record)))
    }

    fn candidates(&self, key: &IndexKey) -> Result<Vec<StoredDelegation>, SourceError> {
        self.count(1);
        let Some(ids) = self.index.get(key) else { return Ok(Vec::new()) };
        self.count(ids.len());
        Ok(ids.iter().filter_map(|id| self.rows.get(id)).map(|record| self.joined(record)).collect())
    }

    fn children(&self, parent_id: &str) -> Result<Vec<String>, SourceError> {
        self.count(1);
        Ok(self.children.get(parent_id).map(|ids| ids.iter().cloned().collect()).unwrap_or_default())
    }
}

/// A source with no delegations: what a document-only evaluation (no store yet) reads.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoDelegations;

impl DelegationSource for NoDelegations {
    fn delegation(&self, _: &str) -> Result<Option<StoredDelegation>, SourceError> {
        Ok(None)
    }

    fn candidates(&self, _: &IndexKey) -> Result<Vec<StoredDelegation>, SourceError> {
        Ok(Vec::new())
    }

    fn children(&self, _: &str) -> Result<Vec<String>, SourceError> {
        Ok(Vec::new())
    }
}
