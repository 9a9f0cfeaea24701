//! Authority: may this principal propose this action at all? (Policy answers how much autonomy
//! it gets; an action needs both, and the stricter wins.) Semantics follow ctrlrun 0.12.2's
//! authority model (SPEC v0.3 as built there, with the v0.9 tasks and budgets and the v0.10 hop).
//!
//! In pipeline order:
//! - [`pattern`]: the pattern grammar, `matches` and the separate `contains` relation;
//! - [`grant`] and [`section`]: the grant model with its closed rules, and the document's grants;
//! - [`record`]: delegations as stored, parsed back and re-validated on every read;
//! - [`source`]: the narrow, index-shaped read access to stored delegations;
//! - [`chain`]: walking a delegation to its root and re-checking every link;
//! - [`evaluate`](mod@evaluate): candidates, outcomes, the winner and the failure precedence;
//! - [`containment`] and [`delegate`]: creating a delegation, in ctrlrun's order of checks;
//! - [`revoke`]: insert-only, idempotent revocation and the sweep selectors;
//! - [`budget`]: charges up the chain, the inclusive predicate, and running window sums.
//!
//! Everything here is pure: it reads a [`DelegationSource`] and returns what to write or what to
//! refuse. The kernel performs every write and appends every event.

pub mod budget;
pub mod chain;
mod charge;
pub mod containment;
pub mod delegate;
pub mod evaluate;
pub mod grant;
pub mod pattern;
pub mod reason;
pub mod record;
pub mod revoke;
pub mod section;
pub mod source;

pub use budget::{charges_for, check_charges, BudgetRefusal, Charge, WindowSum};
pub use containment::contained_dimension;
pub use delegate::{plan_delegation, CreationError, CreationRefusal, NewDelegation, Proposal};
pub use evaluate::{evaluate, AuthorityResult, Call, EvaluationFault};
pub use grant::{parse_instant, Budget, Grant, Subject};
pub use pattern::{contains, matches, validate_pattern, PatternKind};
pub use reason::{AuthorityReason, CreationReason, Dimension};
pub use record::{
    grant_from_json, grant_to_json, CreatedVia, Delegation, DelegationRecord, Revocation, StoredDelegation,
};
pub use revoke::{plan_revocation, RevocationError, RevocationPlan};
pub use section::{Authority, DEFAULT_MAX_DELEGATION_DEPTH};
pub use source::{DelegationSource, IndexKey, MemorySource, NoDelegations, SourceError};
