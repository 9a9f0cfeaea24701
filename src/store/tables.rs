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
/// 6: a journal beside the file (`FILE.journal`) may hold answered batches the file does not yet
/// (the meta row `journal` says which); a build that knows only 5 would ignore them, so it
/// refuses the file. Nothing is rewritten: a schema-5 store becomes 6 by its version row.
/// 7: the evidence tables (`merkle_nodes`, the cached nodes of the receipts' Merkle tree, and
/// `checkpoints`, the signed checkpoints), created empty; nothing is rewritten. A build that
/// knows only 6 would let a checkpointed log be pruned under it unseen, so it refuses the file.
/// 8: `anchors` (each sink's record of each checkpoint) and `policies` (the canonical policy each
/// handle ran under, by its hash), created empty; nothing is rewritten. A build that knows only 7
/// would write receipts naming policies it never keeps, so it refuses the file.
/// 9: `holds` (retention holds, by name) and `pruned_outcomes` (what a prune keeps of each
/// effect's last outcome receipt), created empty, and the meta row `pruned` once a prefix of the
/// receipts is pruned; nothing is rewritten. A build that knows only 8 would read a pruned
/// chain as damaged and a standing hold not at all, so it refuses the file.
/// 10: `scoped_grants` (an approval's grant of the next actions of one shape, by id) and
/// `scoped_grants_by_action` (their index by action name), created empty; nothing is rewritten.
/// A build that knows only 9 would ask a human for an action a scoped grant covers and never
/// spend it, so it refuses the file.
pub const SCHEMA_VERSION: u32 = 10;

pub(super) const META_SCHEMA: &str = "schema_version";
pub(super) const META_HEAD: &str = "chain_head";
pub(super) const META_SNAPSHOT_SEQ: &str = "snapshot_seq";
/// The pruned prefix of the receipts (`evidence::retention::PrunedPrefix`), once there is one.
pub(super) const META_PRUNED: &str = "pruned";
/// The file engine's journal mark (`redb::journal::JournalMark`).
pub(super) const META_JOURNAL: &str = "journal";

/// Schema 1's snapshot index, whose value was the bare id (read by the migration only).
pub(super) const SNAPSHOT_INDEX_V1: TableDefinition<(&str, u64), &str> = TableDefinition::new("snapshot_index");
