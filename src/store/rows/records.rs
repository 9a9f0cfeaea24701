//! The stored forms of the kernel's records, where they differ from the kernel's own types,
//! and schema 1's forms for the migration.

use serde::{Deserialize, Serialize};

use crate::clock::Micros;
use crate::effect::{EffectRecord, EffectState, StoredResult};

/// The file engine's meta row `journal` (`store::redb::journal`): which journal belongs to the
/// store, the last batch the file holds durably, and whether the store was closed with nothing
/// left only in the journal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(in crate::store) struct JournalMark {
    pub id: String,
    pub seq: u64,
    pub clean: bool,
}

/// The chain head: the last receipt's seq and hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(in crate::store) struct ChainHead {
    pub seq: u64,
    pub hash: String,
}

/// An effect row. The executor's result of a commit recorded with a receipt is stored once, on
/// that receipt, and read from there for display (`result` is then `None`); an integrator's
/// `complete` writes no receipt and keeps it here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(in crate::store) struct StoredEffect {
    pub effect_key: String,
    pub state: EffectState,
    pub action_id: String,
    pub action_name: String,
    pub action_hash: String,
    pub attempt: u32,
    pub created_at: Micros,
    pub updated_at: Micros,
    pub lease_expires_at: Option<Micros>,
    pub result: Option<StoredResult>,
    pub error: Option<String>,
    pub resolved_by: Option<String>,
    pub approval_id: Option<String>,
}

impl StoredEffect {
    pub fn from_record(record: &EffectRecord) -> StoredEffect {
        StoredEffect {
            effect_key: record.effect_key.clone(),
            state: record.state,
            action_id: record.action_id.clone(),
            action_name: record.action_name.clone(),
            action_hash: record.action_hash.clone(),
            attempt: record.attempt,
            created_at: record.created_at,
            updated_at: record.updated_at,
            lease_expires_at: record.lease_expires_at,
            result: record.result.clone(),
            error: record.error.clone(),
            resolved_by: record.resolved_by.clone(),
            approval_id: record.approval_id.clone(),
        }
    }

    /// Schema 1's row (the same form, which carried the result itself) as schema 2 keeps it: a
    /// committed pipeline effect's result is also on its receipt, kept once, there. Other rows
    /// keep theirs (`has_receipt` says whether a receipt recorded the outcome).
    pub fn upgrade(mut self, has_receipt: bool) -> StoredEffect {
        if has_receipt {
            self.result = None;
        }
        self
    }

    /// The record, with `result` from the row or (when the row has none) the one given.
    pub fn into_record(self, result: Option<StoredResult>) -> EffectRecord {
        EffectRecord {
            effect_key: self.effect_key,
            state: self.state,
            action_id: self.action_id,
            action_name: self.action_name,
            action_hash: self.action_hash,
            attempt: self.attempt,
            created_at: self.created_at,
            updated_at: self.updated_at,
            lease_expires_at: self.lease_expires_at,
            result: self.result.or(result),
            error: self.error,
            resolved_by: self.resolved_by,
            approval_id: self.approval_id,
        }
    }
}

/// The approval row of schemas 1–3: the action's name and hash, without the action itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(in crate::store) struct ApprovalV2 {
    pub approval_id: String,
    pub action_hash: String,
    pub action_name: String,
    pub action_id: String,
    pub requested_by: crate::action::Principal,
    pub status: crate::approval::ApprovalStatus,
    pub requested_at: Micros,
    pub expires_at: Micros,
    pub approver: Option<String>,
    pub answered_at: Option<Micros>,
    pub consumed_at: Option<Micros>,
    pub consumed_by: Option<String>,
    pub note: Option<String>,
}

impl ApprovalV2 {
    /// Schema 4's row. The action was never kept, so it stays unknown (`action: None`): the
    /// request can no longer be answered (nothing can show what it binds), while a grant given
    /// before the migration is still bound by its hash and may be spent. The one answer it had
    /// becomes its one asserted vote.
    pub fn upgrade(self) -> crate::approval::ApprovalRecord {
        let answered = matches!(
            self.status,
            crate::approval::ApprovalStatus::Granted
                | crate::approval::ApprovalStatus::Denied
                | crate::approval::ApprovalStatus::Consumed
        );
        let denied = self.status == crate::approval::ApprovalStatus::Denied;
        let votes = match (&self.approver, self.answered_at, answered) {
            (Some(label), Some(at), true) => vec![crate::approval::Vote {
                approver: legacy_principal(label),
                verified: None,
                grant: !denied,
                at,
                note: self.note.clone(),
            }],
            _ => Vec::new(),
        };
        crate::approval::ApprovalRecord {
            approval_id: self.approval_id,
            action_hash: self.action_hash,
            action_name: self.action_name,
            action_id: self.action_id,
            requested_by: self.requested_by,
            status: self.status,
            requested_at: self.requested_at,
            expires_at: self.expires_at,
            approver: self.approver,
            answered_at: self.answered_at,
            consumed_at: self.consumed_at,
            consumed_by: self.consumed_by,
            note: self.note,
            action: None,
            requirement: crate::approval::Requirement::default(),
            votes,
            precondition: None,
        }
    }
}

/// An approver name of schema 2 (`cli:ada`, `ops:bob`, `bob`) as a principal.
fn legacy_principal(label: &str) -> crate::action::Principal {
    match label.split_once(':') {
        Some((agent, user)) if !agent.is_empty() && !user.is_empty() => {
            crate::action::Principal { agent: agent.to_owned(), user: Some(user.to_owned()) }
        }
        _ => crate::action::Principal { agent: label.to_owned(), user: None },
    }
}
