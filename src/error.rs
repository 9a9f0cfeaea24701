//! The one error type of the kernel. Refusals (the kernel said no, as designed) and faults
//! (something is broken) are separate families; `is_refusal` tells them apart and every
//! message says what happened and what to do next. No message ever carries a secret or an
//! argument value.

mod denial;
mod input;
pub(crate) mod sight;
mod store;

pub use denial::DenialReason;
pub use input::{InvalidInput, InvalidInputKind};
pub use sight::{SightError, SightKind};
pub use store::{StoreFault, StoreFaultKind};

use crate::clock::Micros;
use crate::effect_state::EffectState;

/// `Duplicate.state`: the effect is done, or another attempt holds it right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum DuplicateState {
    /// The effect was committed; it never runs again.
    Committed,
    /// Another attempt holds the effect under a live lease.
    InProgress,
}

impl DuplicateState {
    /// The state as error objects spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            DuplicateState::Committed => "committed",
            DuplicateState::InProgress => "in_progress",
        }
    }
}

/// Errors cross the store's socket between processes (serde), so a refusal decided by the
/// process that owns the store reaches the caller in another process unchanged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub enum Error {
    // ---- refusals -------------------------------------------------------------------------
    /// The document, the caller's credential, the action's environment or a human said no;
    /// `reason` says which (a receipt records it as `decision_reason`).
    #[error("action denied ({reason}): {detail}")]
    Denied {
        /// Which rule said no.
        reason: DenialReason,
        /// What was denied, in words.
        detail: String,
    },

    /// The document asks a human first: a request was created (or is still pending).
    #[error("approval required: request {request_id} waits for a human until {}; present it with the approval id once granted", crate::clock::render(*expires_at))]
    ApprovalRequired {
        /// The pending request (`apr_…`) a human answers.
        request_id: String,
        /// When the request lapses unanswered.
        expires_at: Micros,
        /// The exact action the request binds.
        action_hash: String,
    },

    /// The presented approval cannot be used for this action.
    #[error("approval {approval_id} refused ({reason}): {detail}")]
    ApprovalMismatch {
        /// Why the approval does not apply (`mismatch`, `consumed`, `expired`, …).
        reason: String,
        /// The approval presented.
        approval_id: String,
        /// What was wrong with it, in words.
        detail: String,
    },

    /// The effect was committed, or another attempt holds it: it will not run twice.
    #[error("{}", duplicate_message(effect_key, *state, holder))]
    Duplicate {
        /// Done, or held by another attempt right now.
        state: DuplicateState,
        /// The effect refused.
        effect_key: String,
        /// The action (`act_…`) that committed or holds it.
        holder: String,
    },

    /// The effect's outcome is unknown; it cannot be retried until it is resolved.
    #[error("effect {effect_key:?} is ambiguous: {detail}; before it can be retried a human must check the remote side and run `{}` (or `--failed` if it did not happen), with WARDEN_STORE (or --store) naming this store", crate::hint::resolve_command(effect_key, None))]
    Ambiguous {
        /// The effect whose outcome is unknown.
        effect_key: String,
        /// The action whose attempt left it so.
        action_id: String,
        /// What is known about how it became ambiguous.
        detail: String,
    },

    /// The effect failed as many times as its `max_attempts` allows.
    #[error("effect {effect_key:?} failed {attempts} time(s), which is its max_attempts of {max_attempts}; no further attempt is allowed")]
    AttemptCeiling {
        /// The effect refused.
        effect_key: String,
        /// How many attempts failed.
        attempts: u32,
        /// The document's `max_attempts` for the action.
        max_attempts: u32,
    },

    /// Only an AMBIGUOUS effect is resolved by hand, and this one is not.
    #[error(
        "effect {effect_key:?} is {state}, not ambiguous; only an effect with an unknown outcome is resolved by hand"
    )]
    NotResolvable {
        /// The effect named.
        effect_key: String,
        /// The state it is actually in.
        state: EffectState,
    },

    /// An outcome arrived after the effect had moved on; it was kept as evidence only.
    #[error("effect {effect_key:?} moved on to {state} under {holder} before this outcome arrived; the outcome was recorded as ambiguous evidence and the record left as it is")]
    LateOutcome {
        /// The effect the outcome was for.
        effect_key: String,
        /// The state it had moved on to.
        state: EffectState,
        /// The action that holds it now.
        holder: String,
    },

    /// The named record (effect, approval, delegation, …) does not exist.
    #[error("{0}")]
    NotFound(String),

    /// The authority axis said no: no grant covers the action, the deciding chain is revoked,
    /// expired or escalating, or a budget on it refuses (`budget_exhausted`,
    /// `budget_unmeasurable`, `budget_unkeyed`). `grant_id` names the grant the reason is about.
    /// A denial like `Denied` (same C code), with the authority evidence.
    #[error("action denied by authority ({reason}{}): {detail}", grant_id.as_deref().map(|g| format!(", grant '{g}'")).unwrap_or_default())]
    AuthorityDenied {
        /// The authority reason (`no_authority`, `authority_revoked`, `budget_exhausted`, …).
        reason: String,
        /// The grant the reason is about, if one.
        grant_id: Option<String>,
        /// The delegation presented as the hop, if any.
        hop: Option<String>,
        /// The containment dimension that failed, if that was the reason.
        dimension: Option<String>,
        /// What was refused, in words.
        detail: String,
    },

    /// A delegation was refused at creation, in ctrlrun's order of checks: the reason and, for
    /// a containment refusal, the dimension. Nothing was written but the DELEGATION_REJECTED event.
    #[error("delegation under '{parent_id}' refused ({reason}{}): {detail}", dimension.as_deref().map(|d| format!(" on {d}")).unwrap_or_default())]
    DelegationRefused {
        /// ctrlrun's reason for the refusal.
        reason: String,
        /// The grant or delegation the new one was to narrow.
        parent_id: String,
        /// The dimension not contained, for a containment refusal.
        dimension: Option<String>,
        /// What was refused, in words.
        detail: String,
    },

    /// A sight (confined read) refused or failed; `is_refusal` and the C result code follow
    /// its `code` (see `SightError::kind`).
    #[error("{0}")]
    Sight(SightError),

    // ---- faults ---------------------------------------------------------------------------
    /// The caller handed in something malformed or out of bounds; nothing was done. Its
    /// `kind` is what a caller branches on, its `path` names the offending field when known.
    #[error("invalid input: {0}")]
    InvalidInput(InvalidInput),

    /// A call with no principal: a programming error in the host (it never set one), not a
    /// policy decision, so nothing is decided or recorded. An `InvalidInput`-class fault (same
    /// C code) with reason `no_principal`, so code that catches denials does not swallow it.
    #[error("invalid input: {action} was proposed with no principal, which is a programming error, not a denial; nothing was decided or recorded. Set the principal around the call: warden.context(agent=..., user=...) in Python, withContext({{ agent, user }}, fn) in Node, the request's \"principal\" in C")]
    NoPrincipal {
        /// The action proposed without one.
        action: String,
    },

    /// The store failed (I/O, corruption, a write that timed out); the handle is poisoned.
    /// The fault's `kind` is what a caller branches on.
    #[error("store error: {0}")]
    Store(StoreFault),

    /// The store could not be reached or did not answer in time (its owner process went away
    /// or is stopped). Nothing is half-applied by this call's fault; unlike `Store` it does not
    /// poison the handle, so the next call may succeed.
    #[error("store unavailable: {0}")]
    Unavailable(String),

    /// The document or the open options are invalid, or absent where a call needs them.
    #[error("configuration error: {0}")]
    Config(String),

    /// An earlier fault latched the handle closed; reopen the store.
    #[error("this handle is poisoned after an earlier fault ({0}); close it and open the store again")]
    Poisoned(String),

    /// The library panicked; the handle is poisoned.
    #[error("internal panic: {0}")]
    Panic(String),
}

fn duplicate_message(effect_key: &str, state: DuplicateState, holder: &str) -> String {
    match state {
        DuplicateState::Committed => {
            format!("effect {effect_key:?} was already committed by {holder}; it will not run twice")
        }
        DuplicateState::InProgress => format!(
            "effect {effect_key:?} is in progress under {holder}; wait for its outcome (or its lease to lapse) instead of retrying"
        ),
    }
}

impl Error {
    /// True for the kernel saying no by design; false for a fault.
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            Error::Denied { .. }
                | Error::AuthorityDenied { .. }
                | Error::DelegationRefused { .. }
                | Error::ApprovalRequired { .. }
                | Error::ApprovalMismatch { .. }
                | Error::Duplicate { .. }
                | Error::Ambiguous { .. }
                | Error::AttemptCeiling { .. }
                | Error::NotResolvable { .. }
                | Error::LateOutcome { .. }
                | Error::NotFound(_)
        ) || matches!(
            self,
            Error::Sight(error) if matches!(error.kind(), SightKind::OutOfWindow | SightKind::NotFound)
        )
    }

    /// A store this user is not allowed to open (or to write): a problem with the caller's
    /// permissions, not with the store, so the CLI reports it as a usage error (exit 2).
    pub fn is_access_problem(&self) -> bool {
        self.store_fault_kind() == Some(StoreFaultKind::Permission)
    }

    /// A store fault of `kind`, its message saying what happened and what to do.
    pub fn store(kind: StoreFaultKind, message: impl Into<String>) -> Error {
        Error::Store(StoreFault { kind, message: message.into() })
    }

    /// Invalid input of `kind`, its message saying what was wrong and what to send instead.
    pub fn invalid(kind: InvalidInputKind, message: impl Into<String>) -> Error {
        Error::InvalidInput(InvalidInput::new(kind, message))
    }

    /// Invalid input of `kind` at the field `path` (`arguments.b`, `answer.approver`).
    pub fn invalid_at(kind: InvalidInputKind, path: impl Into<String>, message: impl Into<String>) -> Error {
        Error::InvalidInput(InvalidInput::at(kind, path, message))
    }

    /// The kind of invalid input; `None` for every other error. A call with no principal
    /// ([`Error::NoPrincipal`], the same C code) is [`InvalidInputKind::Missing`].
    pub fn invalid_input_kind(&self) -> Option<InvalidInputKind> {
        match self {
            Error::InvalidInput(invalid) => Some(invalid.kind),
            Error::NoPrincipal { .. } => Some(InvalidInputKind::Missing),
            _ => None,
        }
    }

    /// The field path of invalid input, when the site knew it; `None` for every other error.
    pub fn invalid_input_path(&self) -> Option<&str> {
        match self {
            Error::InvalidInput(invalid) => invalid.path.as_deref(),
            Error::NoPrincipal { .. } => Some("principal"),
            _ => None,
        }
    }

    /// The kind of a store fault; `None` for every other error.
    pub fn store_fault_kind(&self) -> Option<StoreFaultKind> {
        match self {
            Error::Store(fault) => Some(fault.kind),
            _ => None,
        }
    }

    /// Whether a fault must latch the handle closed (fail closed until reopened).
    pub fn poisons(&self) -> bool {
        matches!(self, Error::Store(_) | Error::Panic(_))
    }

    /// The short machine reason: what receipts record as `decision_reason` for a refusal and
    /// what bindings expose as `.reason`.
    pub fn reason(&self) -> String {
        match self {
            Error::Denied { reason, .. } => reason.to_string(),
            Error::AuthorityDenied { reason, .. } => reason.clone(),
            Error::DelegationRefused { reason, .. } => reason.clone(),
            Error::ApprovalRequired { .. } => "approval_required".into(),
            Error::ApprovalMismatch { reason, .. } => reason.clone(),
            Error::Duplicate { state: DuplicateState::Committed, .. } => "duplicate".into(),
            Error::Duplicate { state: DuplicateState::InProgress, .. } => "in_progress".into(),
            Error::Ambiguous { .. } => "ambiguous".into(),
            Error::AttemptCeiling { .. } => "attempt_ceiling".into(),
            Error::NotResolvable { .. } => "not_ambiguous".into(),
            Error::LateOutcome { .. } => "late_outcome".into(),
            Error::NotFound(_) => "not_found".into(),
            Error::Sight(error) => error.code.into(),
            Error::InvalidInput(_) => "invalid_input".into(),
            Error::NoPrincipal { .. } => "no_principal".into(),
            Error::Store(_) => "store".into(),
            Error::Unavailable(_) => "store_unavailable".into(),
            Error::Config(_) => "configuration_invalid".into(),
            Error::Poisoned(_) => "poisoned".into(),
            Error::Panic(_) => "panic".into(),
        }
    }

    /// The refusal's fields as JSON, for the CLI and (later) the C ABI's error object.
    pub fn to_json(&self) -> serde_json::Value {
        let mut fields = serde_json::json!({
            "reason": self.reason(),
            "message": self.to_string(),
            "refusal": self.is_refusal(),
        });
        let extra = match self {
            Error::ApprovalRequired { request_id, expires_at, action_hash } => serde_json::json!({
                "request_id": request_id,
                "expires_at": crate::clock::render(*expires_at),
                "action_hash": action_hash,
            }),
            Error::ApprovalMismatch { approval_id, .. } => serde_json::json!({ "approval_id": approval_id }),
            Error::AuthorityDenied { grant_id, hop, dimension, .. } => serde_json::json!({
                "authority": true, "grant_id": grant_id, "hop": hop, "dimension": dimension,
            }),
            Error::DelegationRefused { parent_id, dimension, .. } => {
                serde_json::json!({ "parent_id": parent_id, "dimension": dimension })
            }
            Error::Duplicate { state, effect_key, .. } => {
                serde_json::json!({ "state": state.as_str(), "effect_key": effect_key })
            }
            Error::Ambiguous { effect_key, action_id, .. } => {
                serde_json::json!({ "effect_key": effect_key, "action_id": action_id })
            }
            Error::AttemptCeiling { effect_key, attempts, max_attempts } => serde_json::json!({
                "effect_key": effect_key, "attempts": attempts, "max_attempts": max_attempts,
            }),
            Error::NotResolvable { effect_key, state } | Error::LateOutcome { effect_key, state, .. } => {
                serde_json::json!({ "effect_key": effect_key, "state": state.as_str() })
            }
            Error::Store(fault) => serde_json::json!({ "kind": fault.kind.as_str() }),
            Error::InvalidInput(_) | Error::NoPrincipal { .. } => {
                let mut fields = serde_json::Map::new();
                if let Some(kind) = self.invalid_input_kind() {
                    fields.insert("kind".into(), kind.as_str().into());
                }
                if let Some(path) = self.invalid_input_path() {
                    fields.insert("path".into(), path.into());
                }
                serde_json::Value::Object(fields)
            }
            _ => serde_json::json!({}),
        };
        if let (Some(into), serde_json::Value::Object(extra)) = (fields.as_object_mut(), extra) {
            into.extend(extra);
        }
        fields
    }
}

impl From<crate::canonical::CanonicalError> for Error {
    /// A value with no canonical form: invalid input of its kind, at its path when known.
    fn from(error: crate::canonical::CanonicalError) -> Error {
        Error::InvalidInput(error.into())
    }
}

/// The text of a caught panic's payload.
pub(crate) fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|text| (*text).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic with no message".into())
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
