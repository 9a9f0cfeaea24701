//! The kernel: composes the pure planners (`effect`, `approval`, `receipt`) with the store and
//! is the only place that orders steps and writes.
//!
//! The way in is `Warden::submit` (`pipeline`): it decides with the administrator's document
//! and hands the kernel a `Proposal` carrying that ruling. `Kernel::propose`, which trusts the
//! ruling it is given, is crate-private for that reason. Every state change is one operation
//! (`ops::Write`) that the store applies in one write transaction carrying the state, its
//! events and, for a terminal outcome, its receipt and the new chain head. The step order of
//! one proposal lives in `propose`; the permit's outcome in `permit`; approvals in
//! `approvals`; resolution, reads and the integrator's lower-level operations in `effects`;
//! the shared reservation step in `claim`.
//!
//! The files form layers, each naming only the ones below it: `ops` (the operations and their
//! payloads, as the store's protocol) at the bottom; `handle` (`Kernel`, its options, the
//! `Proposal`) on it; the concept files on those; `dispatch` (which concept applies each
//! operation) on top. This file only declares them and re-exports what is used outside.

mod absence;
mod approvals;
pub mod authority;
mod claim;
mod dispatch;
mod effects;
mod evidence;
mod handle;
pub mod ops;
mod park;
mod permit;
mod propose;
mod retention;
mod scoped;

pub use approvals::{asserted, AnswerWait, MAX_WAIT, WAIT_POLL_MAX};
pub use handle::{
    principal, resolve_environment, ApprovalListener, Kernel, KernelOptions, Outcomes, Proposal, WeakKernel,
};
pub use ops::{DoctorReport, Ops, ProofAsk, ReconcileAnswer, Retention, RetentionDone, ScopedGrantDone};
pub use permit::Permit;
pub use scoped::limits_in_policy;
