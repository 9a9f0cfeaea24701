//! Warden: at-most-once effects and confined reads for AI agents, in process.
//!
//! Pure modules decide (`canonical`, `action`, `template`, `effect`, `approval`, `receipt`);
//! `store` is the only code that touches redb; `kernel` composes them and is the only place
//! that orders steps. See `docs/` for the threat model, the claims and the store.

pub mod action;
pub mod approval;
pub mod authority;
pub mod canonical;
pub mod clock;
pub mod decision;
pub mod document;
pub mod effect;
pub mod error;
pub mod event;
pub mod hint;
pub mod identity;
pub mod kernel;
pub mod limits;
pub mod pipeline;
pub mod policy;
pub mod receipt;
pub mod scratch;
pub mod store;
pub mod template;
pub mod verify;

pub use action::{Action, Principal};
pub use clock::{Clock, ManualClock, Micros, SystemClock};
pub use decision::{Decision, Ruling};
pub use effect::{EffectRecord, EffectState};
pub use error::{DuplicateState, Error};
pub use kernel::{Kernel, KernelOptions, Permit, Proposal};
pub use template::{Template, TemplateMode};
pub mod ffi;
pub mod sight;
