//! The redb backend's transactions: `RedbWriteTx` is everything one batch of state changes may
//! read and write, `RedbReadTx` a consistent read: the `boundary` traits, as the kernel sees
//! them. Every row read is integrity-checked (`codec`).

use std::cell::Cell;

use redb::{ReadTransaction, ReadableDatabase, ReadableTable, ReadableTableMetadata, WriteTransaction};

use super::boundary::{AbsenceWitnesses, Neighbour, ReadTables, WriteTables};
use super::codec::{damaged, decode, encode, KeyBytes};
use super::lazy::LazyTable;
use super::records::{ChainHead, StoredEffect};
use super::tables::{self, name};
use crate::approval::{ApprovalRecord, ApprovalStatus};
use crate::clock::Micros;
use crate::effect::{EffectRecord, EffectState, StoredResult};
use crate::error::{Error, Result};
use crate::event::{Event, EventKind};
use crate::receipt::{ChainReport, ReceiptDraft, StoredReceipt, GENESIS_HASH};
use crate::snapshot_record::SnapshotRecord;

/// A redb error while touching `table`: the storage layer failed (I/O, a damaged page).
pub(super) fn fault_in<E: Into<redb::Error>>(table: &'static str) -> impl FnOnce(E) -> Error {
    move |error| {
        let error: redb::Error = error.into();
        match error {
            redb::Error::Corrupted(detail) => Error::Store(format!(
                "the store file is damaged: redb reports {detail} while reading the {table} table; nothing was \
                 decided from it. Run `warden doctor` on the store"
            )),
            other => Error::Store(format!("the store failed while using the {table} table: {other}")),
        }
    }
}

pub(super) fn fault<E: Into<redb::Error>>(error: E) -> Error {
    Error::Store(format!("the store failed: {}", error.into()))
}

/// Every table one write transaction uses, each opened the first time it is touched
/// (`lazy`): a batch pays only for the tables it reads or writes.
pub struct RedbWriteTx<'t> {
    meta: LazyTable<'t, &'static str, &'static [u8]>,
    effects: LazyTable<'t, &'static str, &'static [u8]>,
    approvals: LazyTable<'t, &'static str, &'static [u8]>,
    receipts: LazyTable<'t, u64, &'static [u8]>,
    events: LazyTable<'t, u64, &'static [u8]>,
    snapshots: LazyTable<'t, &'static str, &'static [u8]>,
    snapshot_index: LazyTable<'t, (&'static str, u64), &'static [u8]>,
    receipt_ids: LazyTable<'t, &'static str, &'static [u8]>,
    effect_receipts: LazyTable<'t, &'static str, &'static [u8]>,
    /// Delegations, revocations, their indexes and the budget tables (`authority_rows`).
    pub(super) authority: super::authority_rows::AuthorityTables<'t>,
    approvals_by_action: LazyTable<'t, &'static str, &'static [u8]>,
    /// The last event id, read once per transaction.
    last_event_id: Option<u64>,
    /// The table being touched, named when redb panics on a damaged page.
    touching: Cell<&'static str>,
}

impl<'t> RedbWriteTx<'t> {
    pub(super) fn open(txn: &'t WriteTransaction) -> Result<RedbWriteTx<'t>> {
        Ok(RedbWriteTx {
            meta: LazyTable::new(txn, tables::META, name::META),
            effects: LazyTable::new(txn, tables::EFFECTS, name::EFFECTS),
            approvals: LazyTable::new(txn, tables::APPROVALS, name::APPROVALS),
            receipts: LazyTable::new(txn, tables::RECEIPTS, name::RECEIPTS),
            events: LazyTable::new(txn, tables::EVENTS, name::EVENTS),
            snapshots: LazyTable::new(txn, tables::SNAPSHOTS, name::SNAPSHOTS),
            snapshot_index: LazyTable::new(txn, tables::SNAPSHOT_INDEX, name::SNAPSHOT_INDEX),
            receipt_ids: LazyTable::new(txn, tables::RECEIPT_IDS, name::RECEIPT_IDS),
            effect_receipts: LazyTable::new(txn, tables::EFFECT_RECEIPTS, name::EFFECT_RECEIPTS),
            authority: super::authority_rows::AuthorityTables::open(txn),
            approvals_by_action: LazyTable::new(txn, tables::APPROVALS_BY_ACTION, name::APPROVALS_BY_ACTION),
            last_event_id: None,
            touching: Cell::new(""),
        })
    }

    /// The table the last access touched (for naming a damaged page after a panic).
    pub(super) fn touching(&self) -> &'static str {
        self.touching.get()
    }

    pub(super) fn touch(&self, table: &'static str) {
        self.touching.set(table);
    }

    // ---- raw access, for tests that damage or tamper with a store --------------------------

    pub(super) fn raw_table(&mut self, table: RawTable) -> Result<&mut redb::Table<'t, &'static str, &'static [u8]>> {
        match table {
            RawTable::Meta => self.meta.get_mut(),
            RawTable::Effects => self.effects.get_mut(),
            RawTable::Approvals => self.approvals.get_mut(),
        }
    }

    pub(super) fn raw_receipts(&mut self) -> Result<&mut redb::Table<'t, u64, &'static [u8]>> {
        self.receipts.get_mut()
    }
}

impl WriteTables for RedbWriteTx<'_> {
    fn effect(&self, effect_key: &str) -> Result<Option<EffectRecord>> {
        self.touch(name::EFFECTS);
        let Some(stored) = read_effect(self.effects.get()?, effect_key)? else { return Ok(None) };
        if stored.state == EffectState::Failed {
            self.touch(name::EFFECT_RECEIPTS);
            check_failed_against_receipts(self.effect_receipts.get()?, self.receipts.get()?, &stored)?;
        }
        Ok(Some(stored.into_record(None)))
    }

    fn absence_witnesses(&self, effect_key: &str) -> Result<AbsenceWitnesses> {
        self.touch(name::EFFECTS);
        let effects = self.effects.get()?;
        let mut neighbours = Vec::with_capacity(2);
        // Two descents through the pages the lookup just read (cached): a damaged key or slot in
        // the leaf shows as a neighbour that fails its check under its own key, and a row the
        // lookup missed but the tree still holds shows as a neighbour with the very key.
        let before = effects.range::<&str>(..effect_key).map_err(fault_in(name::EFFECTS))?.next_back();
        let after = effects.range::<&str>(effect_key..).map_err(fault_in(name::EFFECTS))?.next();
        for row in [before, after].into_iter().flatten() {
            let (key, value) = row.map_err(fault_in(name::EFFECTS))?;
            let key = key.value();
            let damage = decode::<StoredEffect>(name::EFFECTS, &key, value.value()).err().map(|e| e.to_string());
            neighbours.push(Neighbour { key: key.to_owned(), damage });
        }
        self.touch(name::EFFECT_RECEIPTS);
        let outcome_receipt = read_row(self.effect_receipts.get()?, name::EFFECT_RECEIPTS, effect_key)?;
        Ok(AbsenceWitnesses { outcome_receipt, neighbours })
    }

    fn put_effect(&mut self, record: &EffectRecord) -> Result<()> {
        self.touch(name::EFFECTS);
        let key = record.effect_key.as_str();
        let row = encode(name::EFFECTS, &key, &StoredEffect::from_record(record))?;
        self.effects.get_mut()?.insert(key, row.as_slice()).map_err(fault_in(name::EFFECTS))?;
        // FAILED is the one state in which the executor proved nothing happened: whatever moved
        // the effect there (an outcome, a resolution, a reconciliation), its budget charges are
        // released here, in the same transaction, so no path can forget them.
        if crate::authority::budget::releases_charges(record.state) {
            self.release_budget_charges(&record.effect_key, record.attempt, &record.action_id, record.updated_at)?;
        }
        Ok(())
    }

    fn approval(&self, approval_id: &str) -> Result<Option<ApprovalRecord>> {
        self.touch(name::APPROVALS);
        read_row(self.approvals.get()?, name::APPROVALS, approval_id)?.map(|r| bound(r, approval_id)).transpose()
    }

    fn latest_approval_for(&self, action_hash: &str) -> Result<Option<ApprovalRecord>> {
        self.touch(name::APPROVALS_BY_ACTION);
        let id: Option<String> = read_row(self.approvals_by_action.get()?, name::APPROVALS_BY_ACTION, action_hash)?;
        super::shared_rules::indexed_approval(self, action_hash, id)
    }

    fn index_approval(&mut self, action_hash: &str, approval_id: &str) -> Result<()> {
        self.touch(name::APPROVALS_BY_ACTION);
        let row = encode(name::APPROVALS_BY_ACTION, &action_hash, &approval_id.to_owned())?;
        self.approvals_by_action
            .get_mut()?
            .insert(action_hash, row.as_slice())
            .map_err(fault_in(name::APPROVALS_BY_ACTION))?;
        Ok(())
    }

    fn put_approval(&mut self, record: &ApprovalRecord) -> Result<()> {
        self.touch(name::APPROVALS);
        let key = record.approval_id.as_str();
        let row = encode(name::APPROVALS, &key, record)?;
        self.approvals.get_mut()?.insert(key, row.as_slice()).map_err(fault_in(name::APPROVALS))?;
        Ok(())
    }

    fn event(
        &mut self,
        kind: EventKind,
        ts: Micros,
        action_id: Option<&str>,
        effect_key: Option<&str>,
        approval_id: Option<&str>,
        data: serde_json::Value,
    ) -> Result<u64> {
        self.touch(name::EVENTS);
        let last = match self.last_event_id {
            Some(last) => last,
            None => self.events.get()?.last().map_err(fault_in(name::EVENTS))?.map(|(key, _)| key.value()).unwrap_or(0),
        };
        let event_id = last + 1;
        self.last_event_id = Some(event_id);
        let event = super::shared_rules::event_row(event_id, ts, kind, [action_id, effect_key, approval_id], &data);
        let row = encode(name::EVENTS, &event_id, &event)?;
        self.events.get_mut()?.insert(event_id, row.as_slice()).map_err(fault_in(name::EVENTS))?;
        Ok(event_id)
    }

    fn receipt_seq(&self, receipt_id: &str) -> Result<Option<u64>> {
        self.touch(name::RECEIPT_IDS);
        read_row(self.receipt_ids.get()?, name::RECEIPT_IDS, receipt_id)
    }

    fn append_receipt(&mut self, draft: &ReceiptDraft, executor_result: Option<StoredResult>) -> Result<(u64, String)> {
        self.touch(name::META);
        let head: ChainHead = read_row(self.meta.get()?, name::META, tables::META_HEAD)?
            .ok_or_else(|| Error::Store("the store has no chain head row; it was altered".into()))?;
        let seq = head.seq + 1;
        self.touch(name::RECEIPTS);
        if self.receipts.get()?.get(seq).map_err(fault_in(name::RECEIPTS))?.is_some() {
            return Err(Error::Store(format!(
                "receipt seq {seq} already exists but the chain head says {}; the store was altered. Run `warden receipts --verify-chain`",
                head.seq
            )));
        }
        if self.receipt_seq(&draft.receipt_id)?.is_some() {
            return Err(Error::Store(format!(
                "receipt id {} is already on the chain; nothing was written (the random source repeated itself)",
                draft.receipt_id
            )));
        }
        let (document, hash) =
            draft.seal(seq, &head.hash).map_err(|e| Error::InvalidInput(format!("cannot encode a receipt: {e}")))?;
        let row = StoredReceipt { document, hash: Some(hash.clone()), executor_result };
        self.touch(name::RECEIPTS);
        self.receipts
            .get_mut()?
            .insert(seq, encode(name::RECEIPTS, &seq, &row)?.as_slice())
            .map_err(fault_in(name::RECEIPTS))?;
        let id = draft.receipt_id.as_str();
        self.touch(name::RECEIPT_IDS);
        self.receipt_ids
            .get_mut()?
            .insert(id, encode(name::RECEIPT_IDS, &id, &seq)?.as_slice())
            .map_err(fault_in(name::RECEIPT_IDS))?;
        let outcome = super::shared_rules::records_outcome(draft);
        if let (true, Some(key)) = (outcome, draft.effect_key.as_deref()) {
            self.touch(name::EFFECT_RECEIPTS);
            self.effect_receipts
                .get_mut()?
                .insert(key, encode(name::EFFECT_RECEIPTS, &key, &seq)?.as_slice())
                .map_err(fault_in(name::EFFECT_RECEIPTS))?;
        }
        self.touch(name::META);
        let head = encode(name::META, &tables::META_HEAD, &ChainHead { seq, hash: hash.clone() })?;
        self.meta.get_mut()?.insert(tables::META_HEAD, head.as_slice()).map_err(fault_in(name::META))?;
        Ok((seq, hash))
    }

    fn append_snapshot(&mut self, mut record: SnapshotRecord, scopes: &[String]) -> Result<SnapshotRecord> {
        self.touch(name::META);
        let last: u64 = read_row(self.meta.get()?, name::META, tables::META_SNAPSHOT_SEQ)?.unwrap_or(0);
        record.seq = last + 1;
        self.touch(name::SNAPSHOTS);
        let id = record.id.as_str();
        if self.snapshots.get()?.get(id).map_err(fault_in(name::SNAPSHOTS))?.is_some() {
            return Err(Error::Store(format!(
                "snapshot id {id} already exists; nothing was written (the random source repeated itself)"
            )));
        }
        self.snapshots
            .get_mut()?
            .insert(id, encode(name::SNAPSHOTS, &id, &record)?.as_slice())
            .map_err(fault_in(name::SNAPSHOTS))?;
        self.touch(name::SNAPSHOT_INDEX);
        for scope in scopes {
            let key = (scope.as_str(), record.seq);
            self.snapshot_index
                .get_mut()?
                .insert(key, encode(name::SNAPSHOT_INDEX, &key, &record.id)?.as_slice())
                .map_err(fault_in(name::SNAPSHOT_INDEX))?;
        }
        self.touch(name::META);
        let counter = encode(name::META, &tables::META_SNAPSHOT_SEQ, &record.seq)?;
        self.meta.get_mut()?.insert(tables::META_SNAPSHOT_SEQ, counter.as_slice()).map_err(fault_in(name::META))?;
        Ok(record)
    }
}

/// The string-keyed tables a test may edit byte by byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RawTable {
    /// The `meta` table: the schema version, the chain head, the snapshot counter.
    Meta,
    /// The effect rows, by effect key.
    Effects,
    /// The approval rows, by approval id.
    Approvals,
}

/// A row of a string-keyed or number-keyed table, integrity-checked.
trait RowKey: KeyBytes + Copy {
    type Table: redb::Key + 'static;
    fn get<T: serde::de::DeserializeOwned>(
        self,
        table: &impl ReadableTable<Self::Table, &'static [u8]>,
        table_name: &'static str,
    ) -> Result<Option<T>>;
}

impl RowKey for &str {
    type Table = &'static str;
    fn get<T: serde::de::DeserializeOwned>(
        self,
        table: &impl ReadableTable<&'static str, &'static [u8]>,
        table_name: &'static str,
    ) -> Result<Option<T>> {
        let found = table.get(self).map_err(fault_in(table_name))?;
        found.map(|bytes| decode(table_name, &self, bytes.value())).transpose()
    }
}

impl RowKey for u64 {
    type Table = u64;
    fn get<T: serde::de::DeserializeOwned>(
        self,
        table: &impl ReadableTable<u64, &'static [u8]>,
        table_name: &'static str,
    ) -> Result<Option<T>> {
        let found = table.get(self).map_err(fault_in(table_name))?;
        found.map(|bytes| decode(table_name, &self, bytes.value())).transpose()
    }
}

fn read_row<K: RowKey, T: serde::de::DeserializeOwned>(
    table: &impl ReadableTable<K::Table, &'static [u8]>,
    table_name: &'static str,
    key: K,
) -> Result<Option<T>> {
    key.get(table, table_name)
}

/// An approval row whose stored action no longer hashes to its `action_hash` is damage: it
/// is never shown as approvable and never decided from.
pub(super) fn bound(record: ApprovalRecord, key: &str) -> Result<ApprovalRecord> {
    match record.check_binding() {
        Ok(()) => Ok(record),
        Err(problem) => Err(damaged(name::APPROVALS, &key, &problem)),
    }
}

fn read_effect(table: &impl ReadableTable<&'static str, &'static [u8]>, key: &str) -> Result<Option<StoredEffect>> {
    let found = table.get(key).map_err(fault_in(name::EFFECTS))?;
    found.map(|bytes| decode(name::EFFECTS, &key, bytes.value())).transpose()
}

/// Whether the receipt the outcome index names for `key` is missing or about another effect.
fn outcome_receipt_problem(
    receipts: &impl ReadableTable<u64, &'static [u8]>,
    key: &str,
    seq: u64,
) -> Result<Option<String>> {
    let Some(row) = receipts.get(seq).map_err(fault_in(name::RECEIPTS))? else {
        return Ok(Some(format!("the outcome index of effect {key:?} names receipt {seq}, which is missing")));
    };
    let Ok(receipt) = decode::<StoredReceipt>(name::RECEIPTS, &seq, row.value()) else {
        // Reported by the row check.
        return Ok(None);
    };
    let about = crate::canonical::parse_json(&receipt.document)
        .ok()
        .and_then(|document| document.get("effect_key").and_then(serde_json::Value::as_str).map(str::to_owned));
    Ok((about.as_deref() != Some(key))
        .then(|| format!("the outcome index of effect {key:?} names receipt {seq}, which is about {about:?}")))
}

/// What the receipts prove about a FAILED effect, read from redb's tables (`failed_proof`).
fn check_failed_against_receipts(
    index: &impl ReadableTable<&'static str, &'static [u8]>,
    receipts: &impl ReadableTable<u64, &'static [u8]>,
    stored: &StoredEffect,
) -> Result<()> {
    let key = stored.effect_key.as_str();
    let last = match index.get(key).map_err(fault_in(name::EFFECT_RECEIPTS))? {
        // Schema-1 stores have no index for effects finished before the migration.
        None => None,
        Some(seq) => {
            let seq: u64 = decode(name::EFFECT_RECEIPTS, &key, seq.value())?;
            let row = receipts.get(seq).map_err(fault_in(name::RECEIPTS))?;
            let receipt: Option<StoredReceipt> =
                row.map(|row| decode(name::RECEIPTS, &seq, row.value())).transpose()?;
            Some((seq, receipt))
        }
    };
    failed_proof(stored, last)
}

/// What the receipts prove about a FAILED effect: the last receipt that recorded an outcome
/// for its key (`last`: its seq from the outcome index and the row, `None` when the row is
/// missing) must be about that key and must not say it committed. Shared by both backends.
pub(super) fn failed_proof(stored: &StoredEffect, last: Option<(u64, Option<StoredReceipt>)>) -> Result<()> {
    let key = stored.effect_key.as_str();
    let Some((seq, receipt)) = last else { return Ok(()) };
    let receipt =
        receipt.ok_or_else(|| damaged(name::EFFECTS, &key, &format!("points at receipt {seq}, which is missing")))?;
    let document = crate::canonical::parse_json(&receipt.document)
        .map_err(|_| damaged(name::RECEIPTS, &seq, "holds a document that is not JSON"))?;
    let says = |field: &str| document.get(field).and_then(serde_json::Value::as_str);
    if says("effect_key") != Some(key) {
        return Err(damaged(
            name::EFFECT_RECEIPTS,
            &key,
            &format!("points at receipt {seq}, which is about another effect"),
        ));
    }
    if says("result") == Some("committed") || says("execution") == Some("committed") {
        return Err(damaged(
            name::EFFECTS,
            &key,
            &format!("says failed, but receipt {seq} on the chain says the effect committed"),
        ));
    }
    let attempt = document.get("attempt").and_then(serde_json::Value::as_u64).unwrap_or(0);
    if attempt > u64::from(stored.attempt) {
        return Err(damaged(
            name::EFFECTS,
            &key,
            &format!("is at attempt {}, but receipt {seq} records attempt {attempt}", stored.attempt),
        ));
    }
    Ok(())
}

/// A consistent read of the whole store.
pub struct RedbReadTx {
    txn: ReadTransaction,
}

macro_rules! open_read {
    ($txn:expr, $def:expr, $name:expr) => {
        match $txn.open_table($def) {
            Ok(table) => Some(table),
            Err(redb::TableError::TableDoesNotExist(_)) => None,
            Err(other) => return Err(fault_in($name)(other)),
        }
    };
}

impl RedbReadTx {
    pub(super) fn new(txn: ReadTransaction) -> RedbReadTx {
        RedbReadTx { txn }
    }

    pub(super) fn txn(&self) -> &ReadTransaction {
        &self.txn
    }

    fn with_result(&self, stored: StoredEffect) -> Result<EffectRecord> {
        if stored.state != EffectState::Committed || stored.result.is_some() {
            if stored.state == EffectState::Failed {
                if let (Some(index), Some(receipts)) = (
                    open_read!(self.txn, tables::EFFECT_RECEIPTS, name::EFFECT_RECEIPTS),
                    open_read!(self.txn, tables::RECEIPTS, name::RECEIPTS),
                ) {
                    check_failed_against_receipts(&index, &receipts, &stored)?;
                }
            }
            return Ok(stored.into_record(None));
        }
        let key = stored.effect_key.as_str();
        let result = match open_read!(self.txn, tables::EFFECT_RECEIPTS, name::EFFECT_RECEIPTS) {
            None => None,
            Some(index) => match index.get(key).map_err(fault_in(name::EFFECT_RECEIPTS))? {
                None => None,
                Some(seq) => {
                    let seq: u64 = decode(name::EFFECT_RECEIPTS, &key, seq.value())?;
                    self.receipt(seq)?.and_then(|receipt| receipt.executor_result)
                }
            },
        };
        Ok(stored.into_record(result))
    }
}

impl ReadTables for RedbReadTx {
    fn effect(&self, effect_key: &str) -> Result<Option<EffectRecord>> {
        let Some(effects) = open_read!(self.txn, tables::EFFECTS, name::EFFECTS) else { return Ok(None) };
        let Some(stored) = read_effect(&effects, effect_key)? else { return Ok(None) };
        self.with_result(stored).map(Some)
    }

    fn effects(&self, state: Option<EffectState>, limit: usize) -> Result<Vec<EffectRecord>> {
        let Some(table) = open_read!(self.txn, tables::EFFECTS, name::EFFECTS) else { return Ok(Vec::new()) };
        let mut out = Vec::new();
        for row in table.iter().map_err(fault_in(name::EFFECTS))? {
            let (key, value) = row.map_err(fault_in(name::EFFECTS))?;
            let stored: StoredEffect = decode(name::EFFECTS, &key.value(), value.value())?;
            if state.is_none_or(|wanted| stored.state == wanted) {
                out.push(self.with_result(stored)?);
                if out.len() >= limit {
                    break;
                }
            }
        }
        Ok(out)
    }

    fn approval(&self, approval_id: &str) -> Result<Option<ApprovalRecord>> {
        let Some(table) = open_read!(self.txn, tables::APPROVALS, name::APPROVALS) else { return Ok(None) };
        read_row(&table, name::APPROVALS, approval_id)?.map(|r| bound(r, approval_id)).transpose()
    }

    fn pending_approvals(&self, now: Micros) -> Result<Vec<ApprovalRecord>> {
        let Some(table) = open_read!(self.txn, tables::APPROVALS, name::APPROVALS) else { return Ok(Vec::new()) };
        let mut out = Vec::new();
        for row in table.iter().map_err(fault_in(name::APPROVALS))? {
            let (key, value) = row.map_err(fault_in(name::APPROVALS))?;
            let record: ApprovalRecord = decode(name::APPROVALS, &key.value(), value.value())?;
            let record = bound(record, key.value())?;
            if record.status == ApprovalStatus::Pending && now <= record.expires_at {
                out.push(record);
            }
        }
        out.sort_by_key(|record| record.requested_at);
        Ok(out)
    }

    fn receipt(&self, seq: u64) -> Result<Option<StoredReceipt>> {
        let Some(table) = open_read!(self.txn, tables::RECEIPTS, name::RECEIPTS) else { return Ok(None) };
        read_row(&table, name::RECEIPTS, seq)
    }

    fn receipt_seq(&self, receipt_id: &str) -> Result<Option<u64>> {
        let Some(table) = open_read!(self.txn, tables::RECEIPT_IDS, name::RECEIPT_IDS) else { return Ok(None) };
        read_row(&table, name::RECEIPT_IDS, receipt_id)
    }

    fn receipts(&self, from: u64, limit: usize) -> Result<Vec<(u64, StoredReceipt)>> {
        let Some(table) = open_read!(self.txn, tables::RECEIPTS, name::RECEIPTS) else { return Ok(Vec::new()) };
        let mut out = Vec::new();
        for row in table.range(from..).map_err(fault_in(name::RECEIPTS))?.take(limit) {
            let (key, value) = row.map_err(fault_in(name::RECEIPTS))?;
            let seq = key.value();
            out.push((seq, decode(name::RECEIPTS, &seq, value.value())?));
        }
        Ok(out)
    }

    fn last_receipts(&self, n: usize) -> Result<Vec<(u64, StoredReceipt)>> {
        let Some(table) = open_read!(self.txn, tables::RECEIPTS, name::RECEIPTS) else { return Ok(Vec::new()) };
        let mut out = Vec::new();
        for row in table.iter().map_err(fault_in(name::RECEIPTS))?.rev().take(n) {
            let (key, value) = row.map_err(fault_in(name::RECEIPTS))?;
            let seq = key.value();
            out.push((seq, decode(name::RECEIPTS, &seq, value.value())?));
        }
        out.reverse();
        Ok(out)
    }

    fn receipt_count(&self) -> Result<u64> {
        let Some(table) = open_read!(self.txn, tables::RECEIPTS, name::RECEIPTS) else { return Ok(0) };
        table.len().map_err(fault_in(name::RECEIPTS))
    }

    fn events(&self, after: u64, limit: usize) -> Result<Vec<Event>> {
        let Some(table) = open_read!(self.txn, tables::EVENTS, name::EVENTS) else { return Ok(Vec::new()) };
        let mut out = Vec::new();
        for row in table.range(after.saturating_add(1)..).map_err(fault_in(name::EVENTS))?.take(limit) {
            let (key, value) = row.map_err(fault_in(name::EVENTS))?;
            out.push(decode(name::EVENTS, &key.value(), value.value())?);
        }
        Ok(out)
    }

    fn verify_chain(&self) -> Result<ChainReport> {
        let head = match open_read!(self.txn, tables::META, name::META) {
            None => None,
            Some(meta) => match meta.get(tables::META_HEAD).map_err(fault_in(name::META))? {
                // A head that fails its check is reported as no head (`head_mismatch`).
                Some(bytes) => {
                    decode::<ChainHead>(name::META, &tables::META_HEAD, bytes.value()).ok().map(|h| (h.seq, h.hash))
                }
                None => None,
            },
        };
        let Some(table) = open_read!(self.txn, tables::RECEIPTS, name::RECEIPTS) else {
            return Ok(crate::receipt::verify_chain(std::iter::empty(), head));
        };
        let mut iter_error = None;
        let rows = table.iter().map_err(fault_in(name::RECEIPTS))?.map_while(|row| match row {
            Ok((key, value)) => {
                let seq = key.value();
                Some((seq, decode::<StoredReceipt>(name::RECEIPTS, &seq, value.value()).map_err(|e| e.to_string())))
            }
            Err(e) => {
                iter_error = Some(fault_in(name::RECEIPTS)(e));
                None
            }
        });
        let report = crate::receipt::verify_chain(rows, head);
        match iter_error {
            Some(error) => Err(error),
            None => Ok(report),
        }
    }

    fn snapshot(&self, id: &str) -> Result<Option<SnapshotRecord>> {
        let Some(table) = open_read!(self.txn, tables::SNAPSHOTS, name::SNAPSHOTS) else { return Ok(None) };
        read_row(&table, name::SNAPSHOTS, id)
    }

    fn snapshot_page(&self, scope: &str, before: Option<u64>, limit: usize) -> Result<(Vec<SnapshotRecord>, bool)> {
        let (Some(index), Some(rows)) = (
            open_read!(self.txn, tables::SNAPSHOT_INDEX, name::SNAPSHOT_INDEX),
            open_read!(self.txn, tables::SNAPSHOTS, name::SNAPSHOTS),
        ) else {
            return Ok((Vec::new(), false));
        };
        let upper = before.unwrap_or(u64::MAX);
        let mut out = Vec::new();
        let mut more = false;
        for entry in index.range((scope, 0)..(scope, upper)).map_err(fault_in(name::SNAPSHOT_INDEX))?.rev() {
            let (key, id) = entry.map_err(fault_in(name::SNAPSHOT_INDEX))?;
            if out.len() == limit {
                more = true;
                break;
            }
            let key = key.value();
            let id: String = decode(name::SNAPSHOT_INDEX, &key, id.value())?;
            let bytes = rows.get(id.as_str()).map_err(fault_in(name::SNAPSHOTS))?.ok_or_else(|| {
                Error::Store(format!("snapshot {id} is indexed but missing; the store file was altered"))
            })?;
            out.push(decode(name::SNAPSHOTS, &id.as_str(), bytes.value())?);
        }
        Ok((out, more))
    }

    fn check_all(&self) -> Result<Vec<(&'static str, u64, Vec<String>)>> {
        let mut report = Vec::new();
        macro_rules! check_str_table {
            ($def:expr, $name:expr, $ty:ty) => {
                check_str_table!($def, $name, $ty, |row: $ty, _key: &str| Ok::<$ty, Error>(row))
            };
            ($def:expr, $name:expr, $ty:ty, $check:expr) => {{
                let mut problems = Vec::new();
                let mut rows = 0u64;
                if let Some(table) = open_read!(self.txn, $def, $name) {
                    for row in table.iter().map_err(fault_in($name))? {
                        let (key, value) = row.map_err(fault_in($name))?;
                        rows += 1;
                        if let Err(error) =
                            decode::<$ty>($name, &key.value(), value.value()).and_then(|r| $check(r, key.value()))
                        {
                            problems.push(error.to_string());
                        }
                    }
                }
                report.push(($name, rows, problems));
            }};
        }
        check_str_table!(tables::EFFECTS, name::EFFECTS, StoredEffect);
        check_str_table!(tables::APPROVALS, name::APPROVALS, ApprovalRecord, |r: ApprovalRecord, k: &str| bound(r, k));
        check_str_table!(tables::APPROVALS_BY_ACTION, name::APPROVALS_BY_ACTION, String);
        check_str_table!(tables::SNAPSHOTS, name::SNAPSHOTS, SnapshotRecord);
        check_str_table!(tables::RECEIPT_IDS, name::RECEIPT_IDS, u64);
        check_str_table!(tables::EFFECT_RECEIPTS, name::EFFECT_RECEIPTS, u64);
        let mut problems = Vec::new();
        let mut rows = 0u64;
        if let Some(table) = open_read!(self.txn, tables::EVENTS, name::EVENTS) {
            for row in table.iter().map_err(fault_in(name::EVENTS))? {
                let (key, value) = row.map_err(fault_in(name::EVENTS))?;
                rows += 1;
                if let Err(error) = decode::<Event>(name::EVENTS, &key.value(), value.value()) {
                    problems.push(error.to_string());
                }
            }
        }
        report.push((name::EVENTS, rows, problems));
        let mut problems = Vec::new();
        let mut rows = 0u64;
        if let Some(table) = open_read!(self.txn, tables::SNAPSHOT_INDEX, name::SNAPSHOT_INDEX) {
            for row in table.iter().map_err(fault_in(name::SNAPSHOT_INDEX))? {
                let (key, value) = row.map_err(fault_in(name::SNAPSHOT_INDEX))?;
                rows += 1;
                if let Err(error) = decode::<String>(name::SNAPSHOT_INDEX, &key.value(), value.value()) {
                    problems.push(error.to_string());
                }
            }
        }
        report.push((name::SNAPSHOT_INDEX, rows, problems));
        let mut problems = Vec::new();
        let mut rows = 0u64;
        if let Some(table) = open_read!(self.txn, tables::META, name::META) {
            for row in table.iter().map_err(fault_in(name::META))? {
                let (key, value) = row.map_err(fault_in(name::META))?;
                rows += 1;
                let key = key.value();
                let checked = match key {
                    tables::META_SCHEMA => Ok(()),
                    tables::META_HEAD => decode::<ChainHead>(name::META, &key, value.value()).map(drop),
                    tables::META_SNAPSHOT_SEQ => decode::<u64>(name::META, &key, value.value()).map(drop),
                    other => Err(Error::Store(format!("the meta table holds an unknown row {other:?}"))),
                };
                if let Err(error) = checked {
                    problems.push(error.to_string());
                }
            }
        }
        report.push((name::META, rows, problems));
        self.check_authority_tables(&mut report)?;
        let missing = tables_missing(&self.txn)?;
        for (table, _, problems) in report.iter_mut().filter(|(table, _, _)| missing.contains(table)) {
            problems.push(format!("the {table} table is missing from the file's table directory"));
        }
        Ok(report)
    }

    // Every table's pages (rows, their bookkeeping, and the free space inside those pages), as
    // redb counts them. The file is larger: redb grows it by doubling and keeps freed pages.
    fn bytes_in_use(&self) -> Result<u64> {
        let mut total = 0u64;
        for handle in self.txn.list_tables().map_err(fault)? {
            let table = self.txn.open_untyped_table(handle).map_err(fault)?;
            let stats = table.stats().map_err(fault)?;
            total += stats.stored_bytes() + stats.metadata_bytes() + stats.fragmented_bytes();
        }
        Ok(total)
    }

    fn orphans(&self) -> Result<Vec<String>> {
        let mut out = Vec::new();
        if let (Some(index), Some(receipts)) = (
            open_read!(self.txn, tables::RECEIPT_IDS, name::RECEIPT_IDS),
            open_read!(self.txn, tables::RECEIPTS, name::RECEIPTS),
        ) {
            for row in index.iter().map_err(fault_in(name::RECEIPT_IDS))? {
                let (key, value) = row.map_err(fault_in(name::RECEIPT_IDS))?;
                let id = key.value();
                if let Ok(seq) = decode::<u64>(name::RECEIPT_IDS, &id, value.value()) {
                    if receipts.get(seq).map_err(fault_in(name::RECEIPTS))?.is_none() {
                        out.push(format!("receipt id {id} points at receipt {seq}, which is missing"));
                    }
                }
            }
        }
        if let (Some(index), Some(effects)) = (
            open_read!(self.txn, tables::EFFECT_RECEIPTS, name::EFFECT_RECEIPTS),
            open_read!(self.txn, tables::EFFECTS, name::EFFECTS),
        ) {
            let receipts = open_read!(self.txn, tables::RECEIPTS, name::RECEIPTS);
            for row in index.iter().map_err(fault_in(name::EFFECT_RECEIPTS))? {
                let (key, value) = row.map_err(fault_in(name::EFFECT_RECEIPTS))?;
                let key = key.value();
                if effects.get(key).map_err(fault_in(name::EFFECTS))?.is_none() {
                    out.push(format!("effect {key:?} has receipts but no effect row"));
                }
                // The index agrees with the receipts: the one it names exists and is about the key.
                if let (Ok(seq), Some(receipts)) =
                    (decode::<u64>(name::EFFECT_RECEIPTS, &key, value.value()), &receipts)
                {
                    if let Some(problem) = outcome_receipt_problem(receipts, key, seq)? {
                        out.push(problem);
                    }
                }
            }
            // The walk in key order agrees with the lookup: a damaged branch or leaf page can
            // send a point lookup past a row the walk still finds, or put keys out of order.
            let mut previous: Option<String> = None;
            for row in effects.iter().map_err(fault_in(name::EFFECTS))? {
                let (key, value) = row.map_err(fault_in(name::EFFECTS))?;
                let walked = key.value();
                if previous.as_deref().is_some_and(|before| before >= walked) {
                    out.push(format!(
                        "the effects table lists {walked:?} after {:?}: its pages are out of key order",
                        previous.as_deref().unwrap_or_default()
                    ));
                }
                if effects.get(walked).map_err(fault_in(name::EFFECTS))?.is_none() {
                    out.push(format!(
                        "the effects table lists a row {walked:?} that a lookup of that key does not find"
                    ));
                }
                previous = Some(walked.to_owned());
                if let Ok(stored) = decode::<StoredEffect>(name::EFFECTS, &key.value(), value.value()) {
                    if stored.state == EffectState::Failed {
                        if let Some(receipts) = open_read!(self.txn, tables::RECEIPTS, name::RECEIPTS) {
                            if let Err(error) = check_failed_against_receipts(&index, &receipts, &stored) {
                                out.push(error.to_string());
                            }
                        }
                    }
                }
            }
        }
        if let (Some(index), Some(rows)) = (
            open_read!(self.txn, tables::SNAPSHOT_INDEX, name::SNAPSHOT_INDEX),
            open_read!(self.txn, tables::SNAPSHOTS, name::SNAPSHOTS),
        ) {
            for entry in index.iter().map_err(fault_in(name::SNAPSHOT_INDEX))? {
                let (key, value) = entry.map_err(fault_in(name::SNAPSHOT_INDEX))?;
                let key = key.value();
                if let Ok(id) = decode::<String>(name::SNAPSHOT_INDEX, &key, value.value()) {
                    if rows.get(id.as_str()).map_err(fault_in(name::SNAPSHOTS))?.is_none() {
                        out.push(format!("snapshot index {key:?} names {id}, which is missing"));
                    }
                }
            }
        }
        Ok(out)
    }
}

/// Every table of the schema is in the file's table directory. A write transaction creates a
/// table it opens when the directory lacks it, so a directory page that lost `effects` would
/// otherwise hand every effect key an empty table: every key new, every effect runnable again.
pub(super) fn check_tables_present(txn: &ReadTransaction) -> Result<()> {
    let missing = tables_missing(txn)?;
    if missing.is_empty() {
        Ok(())
    } else {
        Err(missing_tables(&missing))
    }
}

/// The tables of the schema the file's table directory does not list.
pub(super) fn tables_missing(txn: &ReadTransaction) -> Result<Vec<&'static str>> {
    use redb::TableHandle;
    let present: Vec<String> = txn.list_tables().map_err(fault)?.map(|table| table.name().to_owned()).collect();
    Ok(name::ALL.into_iter().filter(|table| !present.iter().any(|p| p == table)).collect())
}

pub(super) fn missing_tables(missing: &[&str]) -> Error {
    Error::Store(format!(
        "the store file is damaged: its table directory has no {} table{} (a store holds every table from its \
         creation); nothing was decided from it and nothing was written. Run `warden doctor` on the store, and \
         restore it from a backup",
        missing.join(", "),
        if missing.len() == 1 { "" } else { "s" }
    ))
}

/// The genesis head, written when a store is created.
pub(super) fn genesis_head() -> Result<Vec<u8>> {
    encode(name::META, &tables::META_HEAD, &ChainHead { seq: 0, hash: GENESIS_HASH.to_owned() })
}

/// What an open checks, at the cost of a handful of point reads whatever the store's size: the
/// rows the last receipt wrote agree with each other. The chain head names the last receipt,
/// which exists with the head's hash and has no successor; when it recorded an outcome for an
/// effect, that effect's row exists and its outcome index names this receipt. The newest pages
/// are the ones the last commit wrote; everything older is `warden doctor`'s (`docs/STORE.md`).
pub(super) fn check_on_open(db: &redb::Database) -> Result<()> {
    let txn = db.begin_read().map_err(fault)?;
    check_tables_present(&txn)?;
    let Some(meta) = open_read!(txn, tables::META, name::META) else {
        return Err(missing_tables(&[name::META]));
    };
    let head: ChainHead = read_row(&meta, name::META, tables::META_HEAD)?.ok_or_else(|| {
        Error::Store("the store has no chain head row; it was altered. Run `warden doctor` on it".into())
    })?;
    let Some(receipts) = open_read!(txn, tables::RECEIPTS, name::RECEIPTS) else {
        return match head.seq {
            0 => Ok(()),
            seq => {
                Err(damaged(name::META, &tables::META_HEAD, &format!("names receipt {seq}, but there are no receipts")))
            }
        };
    };
    let last = receipts.last().map_err(fault_in(name::RECEIPTS))?.map(|(seq, _)| seq.value()).unwrap_or(0);
    if last != head.seq {
        return Err(damaged(
            name::META,
            &tables::META_HEAD,
            &format!("names receipt {} as the last, but the last receipt stored is {last}", head.seq),
        ));
    }
    if head.seq == 0 {
        return Ok(());
    }
    let receipt: StoredReceipt = read_row(&receipts, name::RECEIPTS, head.seq)?
        .ok_or_else(|| damaged(name::RECEIPTS, &head.seq, "is missing, though the chain head names it"))?;
    if receipt.hash.as_deref().is_some_and(|hash| hash != head.hash) {
        return Err(damaged(name::META, &tables::META_HEAD, &format!("does not match receipt {}'s hash", head.seq)));
    }
    let document = crate::canonical::parse_json(&receipt.document)
        .map_err(|_| damaged(name::RECEIPTS, &head.seq, "holds a document that is not JSON"))?;
    let says = |field: &str| document.get(field).and_then(serde_json::Value::as_str);
    let outcome = matches!(says("result"), Some("committed" | "failed" | "ambiguous" | "observed"));
    let Some(key) = says("effect_key").filter(|_| outcome) else { return Ok(()) };
    let found = match open_read!(txn, tables::EFFECTS, name::EFFECTS) {
        Some(effects) => read_effect(&effects, key)?.is_some(),
        None => false,
    };
    if !found {
        return Err(damaged(
            name::EFFECTS,
            &key,
            &format!("is missing, though the last receipt ({}) recorded an outcome for it", head.seq),
        ));
    }
    let indexed: Option<u64> = match open_read!(txn, tables::EFFECT_RECEIPTS, name::EFFECT_RECEIPTS) {
        Some(index) => read_row(&index, name::EFFECT_RECEIPTS, key)?,
        None => None,
    };
    if indexed != Some(head.seq) {
        return Err(damaged(
            name::EFFECT_RECEIPTS,
            &key,
            &format!("names receipt {indexed:?}, though the last receipt ({}) recorded an outcome for it", head.seq),
        ));
    }
    Ok(())
}
