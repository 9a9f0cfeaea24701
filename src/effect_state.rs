//! `EffectState`: where a logical effect stands. A leaf module (it names nothing else in the
//! crate) because both `effect`, whose planners move between the states, and `error`, whose
//! refusals report one, need it; `effect` re-exports it under its own path.

use serde::{Deserialize, Serialize};

/// Where a logical effect stands. "New" is no record at all and is never written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Hash)]
#[serde(rename_all = "snake_case")]
pub enum EffectState {
    /// The key is held for an attempt that has not begun yet.
    Reserved,
    /// The attempt has begun: the host may be calling the remote side.
    Executing,
    /// The call succeeded; the effect never runs again.
    Committed,
    /// The remote side provably did nothing; a retry may run as the next attempt.
    Failed,
    /// The outcome is unknown; only a human (or the reconcile hook) moves it on.
    Ambiguous,
}

impl EffectState {
    /// The state as records, receipts and the bindings spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            EffectState::Reserved => "reserved",
            EffectState::Executing => "executing",
            EffectState::Committed => "committed",
            EffectState::Failed => "failed",
            EffectState::Ambiguous => "ambiguous",
        }
    }

    /// The state spelled `text`, if it is one.
    pub fn parse(text: &str) -> Option<EffectState> {
        Some(match text {
            "reserved" => EffectState::Reserved,
            "executing" => EffectState::Executing,
            "committed" => EffectState::Committed,
            "failed" => EffectState::Failed,
            "ambiguous" => EffectState::Ambiguous,
            _ => return None,
        })
    }
}

impl std::fmt::Display for EffectState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
