//! Every table of the store file, in one place, and the schema row.

use redb::TableDefinition;

/// The store layout this build reads and writes. Opening a newer one is refused; an older one
/// is migrated forward in one transaction.
///
/// 2: every row checksummed. 3: delegations, revocations, their indexes, the budget ledger and sums.
/// 4: approval rows keep the whole action, votes and requirement; `approvals_by_action`.
/// 5: rows may be written compressed (layout 3, `codec`); no row is rewritten, so a schema-4
/// store becomes 5 by its version row alone, and a build that knows only 4 refuses the file
/// instead of failing on the first compressed row.
pub const SCHEMA_VERSION: u32 = 5;

pub(super) const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");
pub(super) const EFFECTS: TableDefinition<&str, &[u8]> = TableDefinition::new("effects");
pub(super) const APPROVALS: TableDefinition<&str, &[u8]> = TableDefinition::new("approvals");
pub(super) const RECEIPTS: TableDefinition<u64, &[u8]> = TableDefinition::new("receipts");
pub(super) const EVENTS: TableDefinition<u64, &[u8]> = TableDefinition::new("events");
/// Sight snapshots by id. Append-only: nothing in Warden updates or removes a row.
pub(super) const SNAPSHOTS: TableDefinition<&str, &[u8]> = TableDefinition::new("snapshots");
/// (scope, seq) → snapshot id, for paging newest first. Each snapshot is indexed under its
/// endpoint's scope and its window's scope (see `sight::snapshot::scopes`).
pub(super) const SNAPSHOT_INDEX: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("snapshot_index");
/// receipt id → seq: finds a receipt by id, and makes an outcome re-sent after a lost reply
/// land once.
pub(super) const RECEIPT_IDS: TableDefinition<&str, &[u8]> = TableDefinition::new("receipt_ids");
/// effect key → seq of the last receipt that recorded an outcome for it: what the receipts can
/// prove about an effect, checked before a FAILED record is allowed another attempt.
pub(super) const EFFECT_RECEIPTS: TableDefinition<&str, &[u8]> = TableDefinition::new("effect_receipts");

/// action hash → the id of the latest approval request for it: a re-proposal finds the pending
/// (or denied) request instead of asking again.
pub(super) const APPROVALS_BY_ACTION: TableDefinition<&str, &[u8]> = TableDefinition::new("approvals_by_action");

pub(super) const META_SCHEMA: &str = "schema_version";
pub(super) const META_HEAD: &str = "chain_head";
pub(super) const META_SNAPSHOT_SEQ: &str = "snapshot_seq";

/// Table names as the checksum and the messages spell them.
pub(super) mod name {
    pub const META: &str = "meta";
    pub const EFFECTS: &str = "effects";
    pub const APPROVALS: &str = "approvals";
    pub const RECEIPTS: &str = "receipts";
    pub const EVENTS: &str = "events";
    pub const SNAPSHOTS: &str = "snapshots";
    pub const SNAPSHOT_INDEX: &str = "snapshot_index";
    pub const RECEIPT_IDS: &str = "receipt_ids";
    pub const EFFECT_RECEIPTS: &str = "effect_receipts";
    pub const APPROVALS_BY_ACTION: &str = "approvals_by_action";
}

/// Schema 1's snapshot index, whose value was the bare id (read by the migration only).
pub(super) const SNAPSHOT_INDEX_V1: TableDefinition<(&str, u64), &str> = TableDefinition::new("snapshot_index");
