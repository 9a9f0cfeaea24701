//! Events: the closed set of things that happen to an action, each written in the same
//! transaction as the state change it describes.

use serde::{Deserialize, Serialize};

use crate::clock::Micros;

/// The closed set of event types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[allow(non_camel_case_types, clippy::upper_case_acronyms)]
pub enum EventKind {
    ACTION_PROPOSED,
    POLICY_EVALUATED,
    APPROVAL_REQUESTED,
    APPROVAL_GRANTED,
    APPROVAL_DENIED,
    APPROVAL_EXPIRED,
    APPROVAL_INVALIDATED,
    APPROVAL_CONSUMED,
    EFFECT_RESERVED,
    EFFECT_RESERVATION_REFUSED,
    EXECUTION_STARTED,
    EXECUTION_COMMITTED,
    EXECUTION_FAILED,
    EXECUTION_AMBIGUOUS,
    EFFECT_RESOLVED,
    EFFECT_LEASE_EXTENDED,
    ACTION_DENIED,
    RECONCILIATION_STARTED,
    RECONCILIATION_RESOLVED,
    /// The authority axis refused the action (before policy); written with ACTION_DENIED.
    AUTHORITY_DENIED,
    DELEGATION_CREATED,
    /// A delegation was refused at creation; no row was written.
    DELEGATION_REJECTED,
    DELEGATION_REVOKED,
    /// An effect reached FAILED and its budget charges were released.
    BUDGET_RELEASED,
    // Appended (postcard stores the variant's index): M-of-N and notifications.
    /// A grant counted toward an M-of-N request that still needs more.
    APPROVAL_VOTED,
    /// A notification of a new request was delivered (the webhook's 2xx).
    APPROVAL_NOTIFIED,
    /// A notification failed (the hook raised, the webhook could not deliver); the action is
    /// never affected.
    APPROVAL_NOTIFY_FAILED,
    // Appended: executions that wait for input their remote side asked for.
    /// The executor waits for input (an MCP elicitation); the permit still holds the key.
    EXECUTION_SUSPENDED,
    /// The input came; the same attempt goes on.
    EXECUTION_RESUMED,
}

impl EventKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::ACTION_PROPOSED => "ACTION_PROPOSED",
            EventKind::POLICY_EVALUATED => "POLICY_EVALUATED",
            EventKind::APPROVAL_REQUESTED => "APPROVAL_REQUESTED",
            EventKind::APPROVAL_GRANTED => "APPROVAL_GRANTED",
            EventKind::APPROVAL_DENIED => "APPROVAL_DENIED",
            EventKind::APPROVAL_EXPIRED => "APPROVAL_EXPIRED",
            EventKind::APPROVAL_INVALIDATED => "APPROVAL_INVALIDATED",
            EventKind::APPROVAL_CONSUMED => "APPROVAL_CONSUMED",
            EventKind::EFFECT_RESERVED => "EFFECT_RESERVED",
            EventKind::EFFECT_RESERVATION_REFUSED => "EFFECT_RESERVATION_REFUSED",
            EventKind::EXECUTION_STARTED => "EXECUTION_STARTED",
            EventKind::EXECUTION_COMMITTED => "EXECUTION_COMMITTED",
            EventKind::EXECUTION_FAILED => "EXECUTION_FAILED",
            EventKind::EXECUTION_AMBIGUOUS => "EXECUTION_AMBIGUOUS",
            EventKind::EFFECT_RESOLVED => "EFFECT_RESOLVED",
            EventKind::EFFECT_LEASE_EXTENDED => "EFFECT_LEASE_EXTENDED",
            EventKind::ACTION_DENIED => "ACTION_DENIED",
            EventKind::RECONCILIATION_STARTED => "RECONCILIATION_STARTED",
            EventKind::RECONCILIATION_RESOLVED => "RECONCILIATION_RESOLVED",
            EventKind::AUTHORITY_DENIED => "AUTHORITY_DENIED",
            EventKind::DELEGATION_CREATED => "DELEGATION_CREATED",
            EventKind::DELEGATION_REJECTED => "DELEGATION_REJECTED",
            EventKind::DELEGATION_REVOKED => "DELEGATION_REVOKED",
            EventKind::BUDGET_RELEASED => "BUDGET_RELEASED",
            EventKind::APPROVAL_VOTED => "APPROVAL_VOTED",
            EventKind::APPROVAL_NOTIFIED => "APPROVAL_NOTIFIED",
            EventKind::APPROVAL_NOTIFY_FAILED => "APPROVAL_NOTIFY_FAILED",
            EventKind::EXECUTION_SUSPENDED => "EXECUTION_SUSPENDED",
            EventKind::EXECUTION_RESUMED => "EXECUTION_RESUMED",
        }
    }
}

/// One ordered step in the life of an action. `event_id` is assigned by the store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    pub event_id: u64,
    pub ts: Micros,
    pub kind: EventKind,
    pub action_id: Option<String>,
    pub effect_key: Option<String>,
    pub approval_id: Option<String>,
    /// Canonical JSON text (postcard cannot carry a `serde_json::Value`).
    pub data: String,
}

impl Event {
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "event_id": self.event_id,
            "ts": crate::clock::render(self.ts),
            "type": self.kind.as_str(),
            "action_id": self.action_id,
            "effect_key": self.effect_key,
            "approval_id": self.approval_id,
            "data": crate::canonical::parse_json(&self.data).unwrap_or(serde_json::Value::Null),
        })
    }
}
