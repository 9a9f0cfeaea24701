//! Warden: at-most-once effects and confined reads for AI agents, in process.
//!
//! The entry point is [`Warden`]: open it on a store file and the administrator's document,
//! then [`Warden::submit`] one [`ActionRequest`] per call an agent asks for. Pure modules
//! decide; `store` is the only code that touches redb; `kernel` is the only place that orders
//! steps and writes. The modules, in the order one call meets them:
//!
//! 1. [`canonical`], [`action`], [`template`], [`limits`]: the request becomes a bounded
//!    action with a canonical form and a hash (ctrlrun's, byte for byte), and its effect key
//!    is rendered from the document's template.
//! 2. [`identity`]: who the principal is, resolved from what the binding's context carries.
//! 3. [`document`]: the administrator's document, loaded strictly and hashed; the trust
//!    boundary.
//! 4. [`authority`], [`policy`], [`decision`]: may this principal act at all, and with how much
//!    autonomy (`allow`, `approve`, `deny`); the stricter axis wins. What a condition means
//!    (`amount_lte: 100` against the arguments) is the leaf [`condition`], which the document,
//!    the policy, the authority and approval scopes share without depending on one another.
//! 5. [`pipeline`]: [`Warden::submit`] runs steps 1–4 in order and hands the kernel one
//!    proposal; the only way into the kernel from outside the crate.
//! 6. [`approval`]: pure checks for a human's approval, bound to one exact action hash, spent
//!    once.
//! 7. [`effect`]: the effect state machine as pure planners (the retry table, leases,
//!    outcomes, resolution), over the states in [`effect_state`] (a leaf module, so that
//!    [`error`] can name a state without depending on the planners).
//! 8. [`kernel`]: composes the planners with the store; each state change is one operation
//!    applied in one write transaction with its [`event`]s and, for a terminal outcome, its
//!    [`receipt`] in the hash chain. [`kernel::Permit`] is the right to run one action once.
//! 9. [`store`]: the one redb file, its owner process and group commit.
//! 10. [`sight`]: confined reads, the other half of the product, through the same store; the
//!     stored form of its snapshots is the leaf [`snapshot_record`], which the store and the
//!     kernel encode without depending on `sight`.
//!
//! Around them: [`clock`] (injectable time), [`error`] and [`hint`] (what went wrong and the
//! command to run), [`files`] (opening a file the administrator names, refusing what is not a
//! regular file; a leaf), [`ffi`] (the C ABI) and [`os`] (fork hooks and signal flags), the only
//! modules with `unsafe`, [`verify`] and [`scratch`] (the `warden verify` guarantees, run in a
//! throwaway store), [`telemetry`] (the span record of each protected action, for the host's
//! OpenTelemetry SDK). `docs/` holds the
//! threat model, the claims and the store's design.

#![deny(unsafe_code)]

/// Declares an item `pub` in a build with the `test-exports` feature and `pub(crate)` in every
/// other build: internals the integration tests drive directly never reach a release build's
/// public API.
macro_rules! test_pub {
    ($(#[$meta:meta])* $kind:ident $($rest:tt)*) => {
        #[cfg(feature = "test-exports")]
        $(#[$meta])* pub $kind $($rest)*
        #[cfg(not(feature = "test-exports"))]
        $(#[$meta])* pub(crate) $kind $($rest)*
    };
}
pub(crate) use test_pub;

/// Documents `$item` with its leading doc lines, then doc tests that prove internals stay private: each snippet must fail to
/// compile outside the crate in every build without `test-exports` (the error code is named for
/// the reader; stable rustdoc does not compare it), and must compile in a `test-exports` build,
/// where the same internals are public — so a typo in a snippet fails that build's doc tests
/// instead of passing as "does not compile".
macro_rules! private_outside {
    ($(#[$meta:meta])* $( ($code:literal, $error:literal) ),+ ; $item:item) => {
        $(#[$meta])*
        $(
            #[cfg_attr(not(feature = "test-exports"), doc = concat!("```compile_fail,", $error, "\n", $code, "\n```"))]
            #[cfg_attr(feature = "test-exports", doc = concat!("```\n", $code, "\n```"))]
        )+
        $item
    };
}
pub(crate) use private_outside;

// Pipeline order, as listed above. `missing_docs` (Cargo.toml's [lints]) holds for every module.
pub mod action;
pub mod approval;
pub mod authority;
pub mod canonical;
pub mod condition;
pub mod decision;
pub mod document;
pub mod effect;
pub mod effect_state;
pub mod event;
pub mod evidence;
pub mod identity;
pub mod kernel;
pub mod limits;
pub mod pipeline;
pub mod policy;
pub mod receipt;
pub mod sight;
pub mod snapshot_record;
pub mod store;
pub mod template;

// Around the pipeline.
pub mod clock;
pub mod error;
#[allow(unsafe_code)]
pub mod ffi;
// Opening a file the administrator names, refusing what is not a regular file. A leaf.
pub mod files;
pub mod hint;
// The one bounded HTTP client: a sight's GET; the POST of an anchor, a timestamp authority and
// an approval webhook; an identity provider's keys. A leaf (it knows only `error`).
pub mod http;
// The operating system's calls Rust's standard library has no safe form of (fork hooks, signal
// handlers): beside the C ABI, not inside it, since the store and the CLI use them too.
#[allow(unsafe_code)]
pub mod os;
pub mod scratch;
pub mod telemetry;
pub mod verify;

pub use action::{Action, Principal};
pub use clock::{Clock, ManualClock, Micros, SystemClock};
pub use decision::{Decision, Ruling};
pub use effect::{EffectRecord, EffectState};
pub use error::{DuplicateState, Error};
pub use kernel::{Kernel, KernelOptions, Permit, Proposal};
pub use pipeline::{ActionRequest, Warden, WardenOptions};
pub use template::{Template, TemplateMode};
