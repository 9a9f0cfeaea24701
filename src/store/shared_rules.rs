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
