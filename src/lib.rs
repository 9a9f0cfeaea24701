//! Warden: at-most-once effects and confined reads for AI agents, in process.
//!
//! The entry point is [`Warden`]: open it on a store file and the administrator's document
//! ([`Warden::open_files`], or [`Warden::open`] with a [`Document`] from [`load_document`] or
//! [`parse_document`]), then [`Warden::submit`] one [`ActionRequest`] per call an agent asks
//! for. A [`Permit`] is the right to run that action once; report what happened on it
//! ([`Permit::commit`], [`Permit::not_executed`], [`Permit::ambiguous`]). A refusal is an
//! [`Error`] whose [`Error::is_refusal`] is true, with its [`Error::reason`]; anything else is a
//! fault, and nothing was done that the store does not record. What this page lists is the
//! whole API; the modules named below are the implementation (public only for the `warden`
//! binary and the tests, hidden here, no stability promised).
//!
//! # How a call is handled
//!
//! Pure modules decide; `store` is the only code that touches redb; `kernel` is the only place that orders
//! steps and writes. The modules, in the order one call meets them:
//!
//! 1. `canonical`, `action`, `template`, `limits`: the request becomes a bounded
//!    action with a canonical form and a hash (ctrlrun's, byte for byte), and its effect key
//!    is rendered from the document's template.
//! 2. `identity`: who the principal is, resolved from what the binding's context carries.
//! 3. `document`: the administrator's document, loaded strictly and hashed; the trust
//!    boundary.
//! 4. `authority`, `policy`, `decision`: may this principal act at all, and with how much
//!    autonomy (`allow`, `approve`, `deny`); the stricter axis wins. What a condition means
//!    (`amount_lte: 100` against the arguments) is the leaf `condition`, which the document,
//!    the policy, the authority and approval scopes share without depending on one another.
//! 5. `pipeline`: [`Warden::submit`] runs steps 1–4 in order and hands the kernel one
//!    proposal; the only way into the kernel from outside the crate.
//! 6. `approval`: pure checks for a human's approval, bound to one exact action hash, spent
//!    once.
//! 7. `effect`: the effect state machine as pure planners (the retry table, leases,
//!    outcomes, resolution), over the states in `effect_state` (a leaf module, so that
//!    `error` can name a state without depending on the planners).
//! 8. `kernel`: composes the planners with the store; each state change is one operation
//!    applied in one write transaction with its `event`s and, for a terminal outcome, its
//!    `receipt` in the hash chain. [`Permit`] is the right to run one action once.
//! 9. `store`: the one redb file, its owner process and group commit.
//! 10. `sight`: confined reads, the other half of the product, through the same store; the
//!     stored form of its snapshots is the leaf `snapshot_record`, which the store and the
//!     kernel encode without depending on `sight`.
//!
//! Around them: `clock` (injectable time), `error` and `hint` (what went wrong and the
//! command to run), `files` (opening a file the administrator names, refusing what is not a
//! regular file; a leaf), `ffi` (the C ABI) and `os` (fork hooks and signal flags), the only
//! modules with `unsafe`, `verify` and `scratch` (the `warden verify` guarantees, run in a
//! throwaway store), `telemetry` (the span record of each protected action, for the host's
//! OpenTelemetry SDK). `docs/` holds the
//! threat model, the claims and the store's design.

#![deny(unsafe_code)]

// The crate's own macros, first so that every module below sees them by path
// (`crate::private_outside!`).
#[macro_use]
mod macros;
pub(crate) use macros::private_outside;

// The modules, in pipeline order as listed above. None of them is the API: each is
// `#[doc(hidden)]` and public only because the `warden` binary (a separate crate target), the
// C ABI's own tests and the integration tests in tests/ reach into them. The API is the
// re-exports below; `cargo doc --no-deps` shows exactly those, and
// `cargo doc --no-deps --document-private-items` shows everything, for maintainers.
// `missing_docs` (Cargo.toml's [lints]) holds for every module.
#[doc(hidden)]
pub mod action;
#[doc(hidden)]
pub mod approval;
#[doc(hidden)]
pub mod authority;
#[doc(hidden)]
pub mod canonical;
#[doc(hidden)]
pub mod condition;
#[doc(hidden)]
pub mod decision;
#[doc(hidden)]
pub mod document;
#[doc(hidden)]
pub mod effect;
#[doc(hidden)]
pub mod effect_state;
#[doc(hidden)]
pub mod event;
#[doc(hidden)]
pub mod evidence;
#[doc(hidden)]
pub mod identity;
#[doc(hidden)]
pub mod kernel;
#[doc(hidden)]
pub mod limits;
#[doc(hidden)]
pub mod pipeline;
#[doc(hidden)]
pub mod policy;
#[doc(hidden)]
pub mod receipt;
#[doc(hidden)]
pub mod sight;
#[doc(hidden)]
pub mod snapshot_record;
#[doc(hidden)]
pub mod store;
#[doc(hidden)]
pub mod template;

// Around the pipeline.
#[doc(hidden)]
pub mod clock;
#[doc(hidden)]
pub mod error;
#[allow(unsafe_code)]
#[doc(hidden)]
pub mod ffi;
#[doc(hidden)]
// Opening a file the administrator names, refusing what is not a regular file. A leaf.
pub mod files;
#[doc(hidden)]
pub mod hint;
// The one bounded HTTP client: a sight's GET; the POST of an anchor, a timestamp authority and
// an approval webhook; an identity provider's keys. A leaf (it knows only `error`).
#[doc(hidden)]
pub mod http;
// The operating system's calls Rust's standard library has no safe form of (fork hooks, signal
// handlers): beside the C ABI, not inside it, since the store and the CLI use them too.
#[allow(unsafe_code)]
#[doc(hidden)]
pub mod os;
// `warden verify`'s guarantees and their throwaway stores. They stay in the library, not the
// binary, because G4 and G11–G12 need what the library gives no one outside it: a kernel
// proposal with a ruling handed in (`Kernel::propose`) and raw row edits (`Kernel::store`).
#[doc(hidden)]
pub mod scratch;
#[doc(hidden)]
pub mod telemetry;
// What the integration tests reach that no other build offers (the kernel's trusted proposal,
// its raw store, a forced panic): only with the test-only `test-exports` feature.
#[cfg(feature = "test-exports")]
#[doc(hidden)]
pub mod test_support;
#[doc(hidden)]
pub mod verify;

// ---- The API: what a Rust host embedding Warden uses --------------------------------------

// Open a store under the administrator's document, submit what an agent asks for, report the
// outcome on the permit.
pub use document::{load_file as load_document, load_str as parse_document, Document, DocumentError};
pub use kernel::{Outcomes, Permit, ReconcileAnswer};
pub use pipeline::{ActionRequest, ReconcileHook, Recovery, Warden, WardenOptions};

// Who acts and what: the principal, the canonical action, the document's ruling on it.
pub use action::{Action, Principal};
pub use decision::{Decision, Ruling};
pub use policy::Evaluation;
pub use template::{Template, TemplateMode};

// Effects and their states, as `Kernel::effect` and the refusals report them.
pub use effect::{EffectRecord, EffectState};

// What went wrong: refusals by design and faults, with the kinds a caller branches on.
pub use error::{
    DenialReason, DuplicateState, Error, InvalidInput, InvalidInputKind, Result, SightError, SightKind, StoreFault,
    StoreFaultKind,
};

// Time, injectable for tests of a host's own code.
pub use clock::{Clock, ManualClock, Micros, SystemClock};

// Authority: delegations a principal hands on, and the evaluation of a request against grants.
pub use kernel::authority::{ListedDelegation, Sweep};
pub use pipeline::AuthorityEvaluation;

// Telemetry: the span record of one protected action, for the host's OpenTelemetry SDK.
pub use telemetry::{ActionSpan, ActionTrace, AttributeValue, SpanEvent, SpanStatus};

// The kernel, for integrators with a pipeline of their own (`Kernel::reserve_only` and the
// store operations behind the C ABI's `warden_store_*`).
pub use kernel::{Kernel, KernelOptions, Proposal};
