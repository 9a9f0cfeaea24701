//! The store boundary: everything the kernel may read and write inside one transaction, as
//! traits. The kernel's operations (`WriteOp::apply`, `ReadOp::run`) see only these, as
//! `WriteTx` and `ReadTx` (`dyn WriteTables`, `dyn ReadTables`), so a second backend implements
//! them over its own transactions without touching the kernel (`docs/STORE.md`, "One boundary").
//!
//! Each method says what it guarantees, not how: the backend owns sequence numbers (receipt
//! seq, event ids, snapshot seq), the integrity check of every row it returns, and the guards
//! that keep a state change whole. Implemented once, over every engine's rows, by `rows::semantics`.

use crate::approval::scope::ScopedGrant;
use crate::approval::ApprovalRecord;
use crate::authority::record::{Revocation, StoredDelegation};
use crate::authority::source::DelegationSource;
use crate::authority::{Charge, NewDelegation};
use crate::clock::Micros;
use crate::effect::{EffectRecord, EffectState, StoredResult};
use crate::error::Result;
use crate::event::{Event, EventKind};
use crate::evidence::anchoring::StoredAnchor;
use crate::evidence::checkpoint::{OpenEffect, StoredCheckpoint};
use crate::evidence::retention::{Hold, PrunedPrefix};
use crate::receipt::{ChainReport, ReceiptDraft, StoredReceipt};
use crate::snapshot_record::SnapshotRecord;

/// What one state change may read and write: the rows of one write transaction. Every write
/// lands with the rest of its transaction or not at all.
pub trait WriteTables: AuthorityWrites + EvidenceReads + GrantReads {
    /// The effect row for `effect_key`, integrity-checked, and (when it says FAILED, the one
    /// state that lets another attempt run) cross-checked against the last receipt that
    /// recorded an outcome for the key: a FAILED row whose receipt says committed is damage,
    /// never a reason to run the effect again. The executor result is not loaded.
    fn effect(&self, effect_key: &str) -> Result<Option<EffectRecord>>;

    /// What stands around `effect_key` in the store, read when `effect` found no row for it, so
    /// the kernel can prove the key new before it reserves it (`kernel::absence`). Reads only:
    /// it writes nothing and opens no write of its own.
    fn absence_witnesses(&self, effect_key: &str) -> Result<AbsenceWitnesses>;

    /// Write the effect row; a FAILED record releases its attempt's budget charges in the same
    /// transaction.
    fn put_effect(&mut self, record: &EffectRecord) -> Result<()>;

    /// The approval row, integrity-checked and its stored action checked against its hash.
    fn approval(&self, approval_id: &str) -> Result<Option<ApprovalRecord>>;

    /// The latest approval request made for this action hash, if any.
    fn latest_approval_for(&self, action_hash: &str) -> Result<Option<ApprovalRecord>>;

    /// Make `approval_id` the latest request for `action_hash`.
    fn index_approval(&mut self, action_hash: &str, approval_id: &str) -> Result<()>;

    /// Write the approval row, replacing any with its id.
    fn put_approval(&mut self, record: &ApprovalRecord) -> Result<()>;

    /// Append an event; ids are assigned here, ascending.
    fn event(
        &mut self,
        kind: EventKind,
        ts: Micros,
        action_id: Option<&str>,
        effect_key: Option<&str>,
        approval_id: Option<&str>,
        data: serde_json::Value,
    ) -> Result<u64>;

    /// The seq of the receipt with this id, if one was written.
    fn receipt_seq(&self, receipt_id: &str) -> Result<Option<u64>>;

    /// Seal `draft` onto the chain: next seq, previous hash, the row, the id index, the
    /// effect's outcome index and the new head, in this same transaction.
    fn append_receipt(&mut self, draft: &ReceiptDraft, executor_result: Option<StoredResult>) -> Result<(u64, String)>;

    /// Append one snapshot: the row, its index entries under every scope, and the counter.
    /// Returns the record with its `seq` assigned.
    fn append_snapshot(&mut self, record: SnapshotRecord, scopes: &[String]) -> Result<SnapshotRecord>;

    /// Cache the hash of the complete Merkle subtree `index` at `level` (derived data: the
    /// kernel computed it from the receipts). An existing row is replaced.
    fn cache_node(&mut self, level: u8, index: u64, hash: [u8; 32]) -> Result<()>;

    /// Append a checkpoint under its number; a number already used is refused.
    fn append_checkpoint(&mut self, checkpoint: &StoredCheckpoint) -> Result<()>;

    /// Write a sink's record of a checkpoint, replacing the one it had.
    fn put_anchor(&mut self, anchor: &StoredAnchor) -> Result<()>;

    /// Keep the canonical policy `canonical` under its hash `policy_hash`, once: `true` when
    /// written by this call, `false` when the same bytes were already kept. Bytes that do not
    /// hash to `policy_hash`, or a row holding other bytes, are a fault (never overwritten).
    fn keep_policy(&mut self, policy_hash: &str, canonical: &[u8]) -> Result<bool>;

    /// Write a hold's row, replacing the one under its name.
    fn put_hold(&mut self, hold: &Hold) -> Result<()>;

    /// Write a scoped grant's row, replacing the one under its id, and keep its entry in the
    /// index by action name (`indexed`) or remove it (a grant that can cover nothing more).
    fn put_scoped_grant(&mut self, grant: &ScopedGrant, indexed: bool) -> Result<()>;

    /// Delete receipts `from..=marker.through_seq` and events `..=marker.events_through`, keep
    /// what the FAILED cross-check and a duplicate need of each effect's last outcome receipt
    /// among them, and write `marker` as the pruned prefix (with the last reservation whose
    /// event went); the receipts deleted. A receipt missing from that range is a fault. The
    /// receipt ids and the effects' outcome index are kept. The kernel decided the prune may go
    /// ahead (`evidence::retention`).
    fn prune(&mut self, marker: &mut PrunedPrefix, from: u64) -> Result<u64>;
}

/// What the evidence reads in a transaction of either kind: the receipts as the Merkle tree's
/// leaves, its cached nodes, the checkpoints, the effects still open, the policies kept, the
/// anchors, the pruned prefix and the holds.
pub trait EvidenceReads {
    /// The canonical document of the receipt at `seq`, integrity-checked.
    fn receipt_document(&self, seq: u64) -> Result<Option<String>>;

    /// The cached hash of the complete Merkle subtree `index` at `level`.
    fn cached_node(&self, level: u8, index: u64) -> Result<Option<[u8; 32]>>;

    /// The seq of the last receipt (0 for an empty chain).
    fn chain_size(&self) -> Result<u64>;

    /// The checkpoint numbered `number`.
    fn checkpoint(&self, number: u64) -> Result<Option<StoredCheckpoint>>;

    /// Checkpoints numbered `from..`, at most `limit`, in number order.
    fn checkpoints(&self, from: u64, limit: usize) -> Result<Vec<StoredCheckpoint>>;

    /// The last checkpoint.
    fn last_checkpoint(&self) -> Result<Option<StoredCheckpoint>>;

    /// Every effect reserved, executing or AMBIGUOUS, by key.
    fn open_effects(&self) -> Result<Vec<OpenEffect>>;

    /// The canonical policy kept under `policy_hash` (`sha256:…`), checked to hash to it.
    fn policy(&self, policy_hash: &str) -> Result<Option<Vec<u8>>>;

    /// A sink's record of checkpoint `checkpoint`.
    fn anchor(&self, sink: &str, checkpoint: u64) -> Result<Option<StoredAnchor>>;

    /// The newest checkpoint `sink` anchored.
    fn last_anchored(&self, sink: &str) -> Result<Option<u64>>;

    /// Every sink's records of checkpoints `from..=to`, by sink then checkpoint.
    fn anchors(&self, from: u64, to: u64) -> Result<Vec<StoredAnchor>>;

    /// The pruned prefix of the receipts, once a prune removed one, checked against the prune's
    /// receipt, the checkpoint it pruned through and the first receipt kept (damage otherwise).
    fn pruned(&self) -> Result<Option<PrunedPrefix>>;

    /// Every hold, standing or released, by name.
    fn holds(&self) -> Result<Vec<Hold>>;

    /// The hold named `name`.
    fn hold(&self, name: &str) -> Result<Option<Hold>>;

    /// The id of the last event of the longest prefix of events written at or before `until`
    /// (0 when there is none).
    fn events_through(&self, until: Micros) -> Result<u64>;
}

/// The scoped grants, read in a transaction of either kind.
pub trait GrantReads {
    /// The scoped grant `grant_id`, checked to be filed under its id.
    fn scoped_grant(&self, grant_id: &str) -> Result<Option<ScopedGrant>>;

    /// The scoped grants of `action_name` still in the index (live, or expired and not yet seen
    /// so by a proposal), by id.
    fn scoped_grants_for(&self, action_name: &str) -> Result<Vec<ScopedGrant>>;

    /// Every scoped grant, by id.
    fn scoped_grants(&self) -> Result<Vec<ScopedGrant>>;
}

/// What a store holds around an effect key that has no effect row (`WriteTables::absence_witnesses`).
/// The backend only reads and integrity-checks rows; what they prove is the kernel's rule.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AbsenceWitnesses {
    /// The seq the outcome index (`effect_receipts`) holds for the key, if it holds one.
    pub outcome_receipt: Option<u64>,
    /// The effect rows next to the key in key order (the one before it, then the one after),
    /// where the backend's own lookup structure can lose a row to a damaged page (the redb
    /// file); empty where it is not the file's (PostgreSQL's indexes are PostgreSQL's).
    pub neighbours: Vec<Neighbour>,
}

/// One effect row next to a key that has none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Neighbour {
    /// The key the row is stored under.
    pub key: String,
    /// Why the row fails its integrity check under that key, when it does.
    pub damage: Option<String>,
}

/// The authority rows of one write transaction: delegations, revocations, budget charges.
pub trait AuthorityWrites {
    /// The delegations of this transaction, as a source.
    fn delegations(&self) -> Box<dyn CountedSource + '_>;

    /// Insert a new delegation with its index, children and creator entries. Insert-only: an
    /// existing id is refused and nothing is written.
    fn insert_delegation(&mut self, new: &NewDelegation) -> Result<()>;

    /// Insert a revocation row: `true` when written, `false` when one already stands (it is
    /// never overwritten). The caller checked the delegation exists.
    fn insert_revocation(&mut self, revocation: &Revocation) -> Result<bool>;

    /// Whether a revocation row stands for `delegation_id` (integrity-checked).
    fn is_revoked(&self, delegation_id: &str) -> Result<bool>;

    /// The ids of the delegations `agent` created (and, when given, as `user`), in id order.
    fn delegations_created_by(&self, agent: &str, user: Option<&str>) -> Result<Vec<String>>;

    /// The unreleased sum of `charge`'s grant and metric in its window ending `now`.
    fn budget_window_sum(&mut self, charge: &Charge, now: Micros) -> Result<u128>;

    /// Write one ledger row per `(grant, metric)` of `charges` for this reservation, and the
    /// list its FAILED outcome releases.
    fn charge_budgets(&mut self, charges: &[Charge], effect_key: &str, attempt: u32, now: Micros) -> Result<()>;
}

/// A delegation source that counts its reads (one per point lookup, one per range, one per row
/// a range returns): what shows an evaluation's reads do not grow with the delegations stored.
pub trait CountedSource: DelegationSource {
    /// The reads made through this source so far.
    fn reads(&self) -> u64;
}

/// One consistent read of the whole store.
pub trait ReadTables: AuthorityReads + EvidenceReads + GrantReads {
    /// The effect with its executor result (read from the receipt that recorded the commit).
    fn effect(&self, effect_key: &str) -> Result<Option<EffectRecord>>;

    /// Effects in key order, optionally only those in `state`, at most `limit`.
    fn effects(&self, state: Option<EffectState>, limit: usize) -> Result<Vec<EffectRecord>>;

    /// The approval row, integrity-checked and its stored action checked against its hash.
    fn approval(&self, approval_id: &str) -> Result<Option<ApprovalRecord>>;

    /// Approvals still pending (unanswered and unexpired at `now`), oldest first.
    fn pending_approvals(&self, now: Micros) -> Result<Vec<ApprovalRecord>>;

    /// The receipt at `seq`, integrity-checked.
    fn receipt(&self, seq: u64) -> Result<Option<StoredReceipt>>;

    /// The seq of the receipt with this id.
    fn receipt_seq(&self, receipt_id: &str) -> Result<Option<u64>>;

    /// Receipts with `seq` in `from..`, at most `limit`, in seq order.
    fn receipts(&self, from: u64, limit: usize) -> Result<Vec<(u64, StoredReceipt)>>;

    /// The last `n` receipts, in seq order.
    fn last_receipts(&self, n: usize) -> Result<Vec<(u64, StoredReceipt)>>;

    /// How many receipts the chain holds.
    fn receipt_count(&self) -> Result<u64>;

    /// Events with id after `after`, at most `limit`, ascending.
    fn events(&self, after: u64, limit: usize) -> Result<Vec<Event>>;

    /// Walk every receipt in this one read snapshot, streaming, and name every break.
    fn verify_chain(&self) -> Result<ChainReport>;

    /// The snapshot with id `id`, integrity-checked.
    fn snapshot(&self, id: &str) -> Result<Option<SnapshotRecord>>;

    /// Snapshots indexed under `scope` with seq below `before` (all when `None`), newest first,
    /// at most `limit`, and whether older ones remain.
    fn snapshot_page(&self, scope: &str, before: Option<u64>, limit: usize) -> Result<(Vec<SnapshotRecord>, bool)>;

    /// Every row of every table checked, for `warden doctor`: (table, rows checked, problems).
    fn check_all(&self) -> Result<Vec<(&'static str, u64, Vec<String>)>>;

    /// The bytes the store's tables occupy (for `warden doctor` and `warden bench`).
    fn bytes_in_use(&self) -> Result<u64>;

    /// Rows that point at nothing: index rows naming a missing receipt or snapshot, effects
    /// whose outcome index names a receipt about another key.
    fn orphans(&self) -> Result<Vec<String>>;
}

/// The authority rows of one consistent read.
pub trait AuthorityReads {
    /// The delegations of this read, as a source.
    fn delegation_source(&self) -> Result<Box<dyn CountedSource + '_>>;

    /// Delegations in id order after `after` (all when `None`), revoked ones included, at most
    /// `limit`: the listing `warden delegations` prints. A row failing its check is a store fault.
    fn delegation_page(&self, after: Option<&str>, limit: usize) -> Result<Vec<StoredDelegation>>;

    /// The unreleased amount charged to `(grant, metric)` with `consumed_at` in
    /// `[now - window, now]`, summed from the ledger (for listings and tests; the reservation
    /// reads the running sum instead).
    fn budget_spent(&self, grant_id: &str, metric: &str, window_seconds: u64, now: Micros) -> Result<u128>;
}
