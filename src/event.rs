//! Events: the closed set of things that happen to an action, each written in the same
//! transaction as the state change it describes.

use serde::{Deserialize, Serialize};

use crate::clock::Micros;

/// The closed set of event types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[allow(non_camel_case_types, clippy::upper_case_acronyms)]
pub enum EventKind {
    /// An action was proposed (every proposal writes one).
    ACTION_PROPOSED,
    /// The document decided the action; the data holds the decision, reason and warnings.
    POLICY_EVALUATED,
    /// A pending approval request was created for the action.
    APPROVAL_REQUESTED,
    /// An approver granted the request (enough approvers, for M-of-N).
    APPROVAL_GRANTED,
    /// An approver denied the request.
    APPROVAL_DENIED,
    /// The request or its grant lapsed unused.
    APPROVAL_EXPIRED,
    /// A presented approval failed its checks for this action; the data holds the reason.
    APPROVAL_INVALIDATED,
    /// A granted approval was spent on the action it binds.
    APPROVAL_CONSUMED,
    /// The effect key was reserved for an attempt.
    EFFECT_RESERVED,
    /// The reservation was refused (duplicate, in progress, ambiguous, ceiling).
    EFFECT_RESERVATION_REFUSED,
    /// The attempt began: the host may now call the remote side.
    EXECUTION_STARTED,
    /// The attempt succeeded: COMMITTED.
    EXECUTION_COMMITTED,
    /// The remote side provably did nothing: FAILED.
    EXECUTION_FAILED,
    /// The outcome is unknown: AMBIGUOUS (lost reply, lapsed lease, dropped permit).
    EXECUTION_AMBIGUOUS,
    /// A human (or the reconcile hook) recorded what happened to an AMBIGUOUS effect.
    EFFECT_RESOLVED,
    /// The attempt holding the effect extended its lease.
    EFFECT_LEASE_EXTENDED,
    /// The action was refused before any reservation.
    ACTION_DENIED,
    /// A reconcile answer arrived for an AMBIGUOUS effect and is being applied.
    RECONCILIATION_STARTED,
    /// The reconcile hook's answer was applied.
    RECONCILIATION_RESOLVED,
    /// The authority axis refused the action (before policy); written with ACTION_DENIED.
    AUTHORITY_DENIED,
    /// A delegation was stored.
    DELEGATION_CREATED,
    /// A delegation was refused at creation; no row was written.
    DELEGATION_REJECTED,
    /// A delegation was revoked (and with it everything beneath it).
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
    // Appended: retention.
    /// A retention hold was placed; nothing is pruned while it stands.
    HOLD_PLACED,
    /// A retention hold was released.
    HOLD_RELEASED,
    /// A prefix of the receipts and the events of its time were deleted (`warden prune`).
    RECEIPTS_PRUNED,
    // Appended: scoped grants.
    /// An approver granted a request and the next actions of its shape (a scoped grant).
    SCOPED_GRANT_MADE,
    /// A proposal was covered by a scoped grant, spending one of its uses.
    SCOPED_GRANT_USED,
    /// A scoped grant was revoked.
    SCOPED_GRANT_REVOKED,
}

impl EventKind {
    /// The kind as events are listed and exported.
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
            EventKind::HOLD_PLACED => "HOLD_PLACED",
            EventKind::HOLD_RELEASED => "HOLD_RELEASED",
            EventKind::RECEIPTS_PRUNED => "RECEIPTS_PRUNED",
            EventKind::SCOPED_GRANT_MADE => "SCOPED_GRANT_MADE",
            EventKind::SCOPED_GRANT_USED => "SCOPED_GRANT_USED",
            EventKind::SCOPED_GRANT_REVOKED => "SCOPED_GRANT_REVOKED",
        }
    }
}

/// One ordered step in the life of an action. `event_id` is assigned by the store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// The event's place in the store's one order (from 1).
    pub event_id: u64,
    /// When it happened, by the kernel's clock.
    pub ts: Micros,
    /// What happened.
    pub kind: EventKind,
    /// The action it is about, if any.
    pub action_id: Option<String>,
    /// The effect it is about, if any.
    pub effect_key: Option<String>,
    /// The approval it is about, if any.
    pub approval_id: Option<String>,
    /// Canonical JSON text (postcard cannot carry a `serde_json::Value`).
    pub data: String,
}

impl Event {
    /// The event as the CLI and the bindings show it.
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
