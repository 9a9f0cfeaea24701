//! What both backends decide the same way about the rows they read: written once here, so the
//! file and PostgreSQL cannot drift apart. Each takes the boundary's own view of a transaction.

use crate::approval::ApprovalRecord;
use crate::authority::record::StoredDelegation;
use crate::authority::source::{DelegationSource, SourceError};
use crate::clock::Micros;
use crate::error::Result;
use crate::event::EventKind;

use super::boundary::WriteTables;
use super::codec::damaged;
use super::tables::name;

/// The latest approval request for `action_hash`, given the id its index row names: the
/// request must exist and bind that same action, or the index is damage.
pub(super) fn indexed_approval(
    tables: &dyn WriteTables,
    action_hash: &str,
    id: Option<String>,
) -> Result<Option<ApprovalRecord>> {
    let Some(id) = id else { return Ok(None) };
    match tables.approval(&id)? {
        Some(record) if record.action_hash == action_hash => Ok(Some(record)),
        Some(_) => Err(damaged(
            name::APPROVALS_BY_ACTION,
            &action_hash,
            &format!("points at approval {id}, which binds another action"),
        )),
        None => {
            Err(damaged(name::APPROVALS_BY_ACTION, &action_hash, &format!("points at approval {id}, which is missing")))
        }
    }
}

/// The BUDGET_RELEASED event of one FAILED attempt, naming what it released (none: no event).
pub(super) fn budget_released(
    tables: &mut dyn WriteTables,
    effect_key: &str,
    attempt: u32,
    action_id: &str,
    now: Micros,
    released: Vec<serde_json::Value>,
) -> Result<()> {
    if released.is_empty() {
        return Ok(());
    }
    tables.event(
        EventKind::BUDGET_RELEASED,
        now,
        Some(action_id),
        Some(effect_key),
        None,
        serde_json::json!({"attempt": attempt, "released": released}),
    )?;
    Ok(())
}

/// The delegations an index lists, each required: an id indexed without its row is a fact about
/// that row (`Unreadable`), never a silently shorter list.
pub(super) fn indexed_delegations(
    source: &dyn DelegationSource,
    ids: Vec<String>,
) -> std::result::Result<Vec<StoredDelegation>, SourceError> {
    let mut found = Vec::with_capacity(ids.len());
    for id in ids {
        match source.delegation(&id)? {
            Some(stored) => found.push(stored),
            None => {
                return Err(SourceError::Unreadable {
                    delegation_id: id,
                    detail: "it is indexed but its row is missing; the store was altered".into(),
                })
            }
        }
    }
    Ok(found)
}

/// The event row `WriteTables::event` appends as `event_id`: its data in canonical form (or
/// plain JSON when it has no canonical form).
pub(super) fn event_row(
    event_id: u64,
    ts: Micros,
    kind: EventKind,
    ids: [Option<&str>; 3],
    data: &serde_json::Value,
) -> crate::event::Event {
    let [action_id, effect_key, approval_id] = ids;
    let data = crate::canonical::to_canonical_string(data, "event.data")
        .unwrap_or_else(|_| serde_json::to_string(data).unwrap_or_else(|_| "null".into()));
    crate::event::Event {
        event_id,
        ts,
        kind,
        action_id: action_id.map(str::to_owned),
        effect_key: effect_key.map(str::to_owned),
        approval_id: approval_id.map(str::to_owned),
        data,
    }
}

/// Whether a receipt records an effect's outcome (so the effect's outcome index points at it).
pub(super) fn records_outcome(draft: &crate::receipt::ReceiptDraft) -> bool {
    use crate::receipt::ReceiptResult;
    matches!(
        draft.result,
        ReceiptResult::Committed | ReceiptResult::Failed | ReceiptResult::Ambiguous | ReceiptResult::Observed
    )
}
