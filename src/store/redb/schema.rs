//! The schema row, creating the tables of a new store, and forward-only migrations, each one
//! durable write transaction (a crash leaves the old schema or the new one, never a mix). The
//! migrations read and write through the row layer, so every row they write is the codec's.

use std::cell::Cell;
use std::ops::Bound;

use redb::{Database, ReadableDatabase, ReadableTable, TableHandle};

use crate::approval::ApprovalRecord;
use crate::error::{Error, Result, StoreFaultKind};
use crate::event::Event;
use crate::receipt::StoredReceipt;
use crate::snapshot_record::SnapshotRecord;
use crate::store::redb::rows::{fault, fault_in, FileReads, FileWrites};
use crate::store::rows::codec::{decode, decode_legacy};
use crate::store::rows::records::{ApprovalV2, ChainHead, StoredEffect};
use crate::store::rows::semantics::{genesis_head, write};
use crate::store::rows::{own, parts, KeyView, Own, Part, Put, RowRead, RowWrite, Scan, Table};
use crate::store::tables::{self, META_HEAD, META_SCHEMA, META_SNAPSHOT_SEQ, SCHEMA_VERSION};

/// Fill a brand-new database: every table, the schema row and the genesis chain head.
pub(crate) fn write_fresh(db: &Database) -> Result<()> {
    let txn = db.begin_write().map_err(fault)?;
    {
        let touching = Cell::new("");
        let mut rows = FileWrites::open(&txn, &touching);
        rows.create_all()?;
        rows.put(Table::Meta, &[Part::Text(META_SCHEMA)], &SCHEMA_VERSION.to_le_bytes(), Put::Replace)?;
        rows.put(Table::Meta, &[Part::Text(META_HEAD)], &genesis_head()?, Put::Replace)?;
    }
    txn.commit().map_err(fault)
}

/// The schema version a database says it has: `None` when it has no schema row.
pub(crate) fn version(db: &impl ReadableDatabase, path: &std::path::Path) -> Result<Option<u32>> {
    let reads = FileReads::new(db.begin_read().map_err(fault)?);
    match reads.get(Table::Meta, &[Part::Text(META_SCHEMA)])? {
        None => Ok(None),
        Some(bytes) => <[u8; 4]>::try_from(bytes.as_slice())
            .map(u32::from_le_bytes)
            .map(Some)
            .map_err(|_| crate::store::redb::file::not_a_store(path, "its schema version row is unreadable")),
    }
}

/// A file with tables but no schema row: a Warden store whose directory lost its `meta` table
/// (it holds Warden's other tables) is damage; anything else was not written by Warden.
pub(crate) fn without_version(rows: &FileReads, path: &std::path::Path) -> Error {
    match rows.missing_tables() {
        Ok(missing) if missing.contains(&Table::Meta) && missing.len() < Table::ALL.len() => {
            let names: Vec<&str> = missing.iter().map(|table| table.name()).collect();
            crate::store::rows::semantics::missing_tables(&names)
        }
        Ok(_) => crate::store::redb::file::not_a_store(path, "it has tables but no Warden schema version"),
        Err(error) => error,
    }
}

/// Refuse a schema this build cannot use.
pub(crate) fn check_version(version: u32, path: &std::path::Path) -> Result<()> {
    match version {
        v if v == SCHEMA_VERSION => Ok(()),
        v if v > SCHEMA_VERSION => Err(Error::store(
            StoreFaultKind::Version,
            format!(
            "the store {} has schema version {v}, newer than this build's {SCHEMA_VERSION}; upgrade Warden to open it",
            path.display()
        ),
        )),
        1..=9 => Ok(()),
        v => Err(Error::store(
            StoreFaultKind::Version,
            format!("the store {} has schema version {v}, which this build does not know", path.display()),
        )),
    }
}

/// Before opening an existing file for writing (which writes to it), look at it read-only:
/// refuse a redb database that is not a Warden store, or a schema this build cannot use,
/// without touching a byte. A file redb cannot open read-only (it needs recovery after a
/// crash) is left to the writable open, which repairs it and checks again.
pub(crate) fn probe(path: &std::path::Path) -> Result<()> {
    let Ok(db) = redb::Builder::new().open_read_only(path) else { return Ok(()) };
    match version(&db, path)? {
        Some(v) => check_version(v, path),
        None => unversioned(&db, path),
    }
}

/// A redb file without a schema row. One with no tables at all is a creation by an older
/// Warden that never finished (it holds nothing to lose): `Ok`, to finish it. Anything else
/// was not written by Warden, or lost its `meta` table (`without_version`).
fn unversioned(db: &impl ReadableDatabase, path: &std::path::Path) -> Result<()> {
    let reads = FileReads::new(db.begin_read().map_err(fault)?);
    if reads.txn().list_tables().map_err(fault)?.next().is_none() {
        Ok(())
    } else {
        Err(without_version(&reads, path))
    }
}

/// Bring an opened store to this build's schema, or refuse it. The caller is the store's one
/// writer.
pub(crate) fn ensure(db: &Database, path: &std::path::Path) -> Result<()> {
    match version(db, path)? {
        Some(v) if v == SCHEMA_VERSION => Ok(()),
        Some(from @ (1..=9)) => migrate_forward(db, from),
        Some(v) => check_version(v, path),
        None => unversioned(db, path).and_then(|()| write_fresh(db)),
    }
}

/// Every step from schema `from` to this build's, in one durable write transaction: a crash
/// leaves the old schema or the new one, never a step in between. Each step only rewrites the
/// tables it owns, so steps added on other branches slot in by their number.
fn migrate_forward(db: &Database, from: u32) -> Result<()> {
    let txn = db.begin_write().map_err(fault)?;
    // The snapshot index changes type: take its schema-1 rows before anything opens it as schema 2.
    let snapshot_index = if from < 2 { take_snapshot_index_v1(&txn)? } else { Vec::new() };
    {
        let touching = Cell::new("");
        let mut rows = FileWrites::open(&txn, &touching);
        // 2 → 3 creates the authority tables empty; 3 → 4 the approvals_by_action index; 6 → 7
        // the evidence tables; 7 → 8 the anchors and the policies; 8 → 9 the holds and
        // the pruned outcomes; 9 → 10 the scoped grants and their index.
        if from < 10 {
            rows.create_all()?;
        }
        if from < 2 {
            step_1_to_2(&mut rows, &snapshot_index)?;
        }
        if from < 4 {
            approvals_keep_the_action(&mut rows)?;
        }
        // 4 → 5 rewrites nothing: layout-2 rows stay readable; new rows may be layout 3.
        // 5 → 6 rewrites nothing: the journal and its mark come with the first owner's open.
        // 6 → 7 rewrites nothing: the Merkle tree is derived from the receipts when asked.
        // 7 → 8 rewrites nothing: no checkpoint was anchored before, and the receipts written
        // before name policies the store never kept.
        // 8 → 9 rewrites nothing: no hold was placed and nothing was pruned before.
        // 9 → 10 rewrites nothing: no scoped grant was made before.
        rows.put(Table::Meta, &[Part::Text(META_SCHEMA)], &SCHEMA_VERSION.to_le_bytes(), Put::Replace)?;
    }
    txn.commit().map_err(fault)
}

/// Schema 3 → 4 (from 2 on a store without delegations): approval rows take the schema-4 form
/// (`ApprovalV2::upgrade`: the action unknown, the one answer a vote) and `approvals_by_action`
/// indexes the latest request per action hash.
fn approvals_keep_the_action(rows: &mut FileWrites<'_, '_>) -> Result<()> {
    rewrite::<ApprovalV2, ApprovalRecord>(rows, Table::Approvals, |t, k, b| decode(t, k, b), |old| Ok(old.upgrade()))?;
    let mut latest: std::collections::BTreeMap<String, (crate::clock::Micros, String)> = Default::default();
    rows.scan(Table::Approvals, &Scan::all(), &mut |key, bytes| {
        let record: ApprovalRecord = decode(Table::Approvals.name(), &KeyView(key), bytes)?;
        let newer = latest.get(&record.action_hash).is_none_or(|(at, _)| *at <= record.requested_at);
        if newer {
            latest.insert(record.action_hash.clone(), (record.requested_at, record.approval_id.clone()));
        }
        Ok(true)
    })?;
    for (hash, (_, id)) in &latest {
        write(rows, Table::ApprovalsByAction, &[Part::Text(hash)], id, Put::Replace)?;
    }
    Ok(())
}

/// Schema 1 → 2: every row gains its checksum, effect rows stop carrying the executor result
/// (the committing receipt keeps it), and the receipt id and effect outcome indexes are built.
fn step_1_to_2(rows: &mut FileWrites<'_, '_>, snapshot_index: &[(String, u64, String)]) -> Result<()> {
    for (scope, seq, id) in snapshot_index {
        write(rows, Table::SnapshotIndex, &[Part::Text(scope), Part::Int(*seq)], id, Put::Replace)?;
    }
    rewrite::<ApprovalV2, _>(rows, Table::Approvals, |t, k, b| decode_legacy(t, k, b), Ok)?;
    rewrite::<SnapshotRecord, _>(rows, Table::Snapshots, |t, k, b| decode_legacy(t, k, b), Ok)?;
    rewrite::<Event, _>(rows, Table::Events, |t, k, b| decode_legacy(t, k, b), Ok)?;
    rewrite::<StoredReceipt, _>(rows, Table::Receipts, |t, k, b| decode_legacy(t, k, b), Ok)?;
    let on_receipts = index_receipts(rows)?;
    rewrite::<StoredEffect, _>(
        rows,
        Table::Effects,
        |t, k, b| decode_legacy(t, k, b),
        |v1| {
            let kept = on_receipts.contains(&v1.effect_key);
            Ok(v1.upgrade(kept))
        },
    )?;
    let meta = Table::Meta.name();
    let head_key = [Part::Text(META_HEAD)];
    let head: ChainHead = match rows.get(Table::Meta, &head_key)? {
        Some(bytes) => decode_legacy(meta, &KeyView(&head_key), &bytes)?,
        None => {
            return Err(Error::store(
                StoreFaultKind::Damaged,
                "the schema-1 store has no chain head row; it was altered",
            ))
        }
    };
    write(rows, Table::Meta, &head_key, &head, Put::Replace)?;
    // Schema 1 kept the snapshot counter as 8 raw bytes.
    let counter_key = [Part::Text(META_SNAPSHOT_SEQ)];
    if let Some(bytes) = rows.get(Table::Meta, &counter_key)? {
        let counter = <[u8; 8]>::try_from(bytes.as_slice()).map(u64::from_le_bytes).map_err(|_| {
            Error::store(StoreFaultKind::Damaged, "the schema-1 store's snapshot counter is unreadable; it was altered")
        })?;
        write(rows, Table::Meta, &counter_key, &counter, Put::Replace)?;
    }
    Ok(())
}

const CHUNK: usize = 1024;

/// Hand every row of a one-part-key `table` to `each`, in key order, [`CHUNK`] rows at a time
/// (a large table is never held in memory whole); `each` may write to any table.
fn in_chunks(
    rows: &mut FileWrites<'_, '_>,
    table: Table,
    mut each: impl FnMut(&mut FileWrites<'_, '_>, Vec<(Vec<Own>, Vec<u8>)>) -> Result<()>,
) -> Result<()> {
    let mut after: Option<Vec<Own>> = None;
    loop {
        let mut chunk = Vec::with_capacity(CHUNK);
        let last = after.as_deref().map(parts);
        let from = last.as_ref().and_then(|key| key.first()).map_or(Bound::Unbounded, |part| Bound::Excluded(*part));
        rows.scan(table, &Scan::all().from(from), &mut |key, bytes| {
            chunk.push((own(key), bytes.to_vec()));
            Ok(chunk.len() < CHUNK)
        })?;
        let Some((last, _)) = chunk.last() else { return Ok(()) };
        after = Some(last.clone());
        each(rows, chunk)?;
    }
}

/// Rewrite every row of `table`: `read` as stored, `convert`, written in the current layout.
fn rewrite<Old, New: serde::Serialize>(
    rows: &mut FileWrites<'_, '_>,
    table: Table,
    read: impl Fn(&str, &KeyView<'_>, &[u8]) -> Result<Old>,
    convert: impl Fn(Old) -> Result<New>,
) -> Result<()> {
    in_chunks(rows, table, |rows, chunk| {
        for (key, bytes) in chunk {
            let key = parts(&key);
            let old = read(table.name(), &KeyView(&key), &bytes)?;
            write(rows, table, &key, &convert(old)?, Put::Replace)?;
        }
        Ok(())
    })
}

/// Build `receipt_ids` and `effect_receipts` from the (already rewritten) receipts. Returns the
/// effect keys whose last outcome receipt is a commit carrying the executor result.
fn index_receipts(rows: &mut FileWrites<'_, '_>) -> Result<std::collections::HashSet<String>> {
    let mut with_result = std::collections::HashSet::new();
    in_chunks(rows, Table::Receipts, |rows, chunk| {
        for (key, bytes) in chunk {
            let key = parts(&key);
            let Some(Part::Int(seq)) = key.first().copied() else { continue };
            let receipt: StoredReceipt = decode(Table::Receipts.name(), &KeyView(&key), &bytes)?;
            let Ok(document) = crate::canonical::parse_json(&receipt.document) else { continue };
            let says = |field: &str| document.get(field).and_then(serde_json::Value::as_str);
            if let Some(id) = says("receipt_id") {
                write(rows, Table::ReceiptIds, &[Part::Text(id)], &seq, Put::Replace)?;
            }
            let result = says("result");
            let outcome = matches!(result, Some("committed" | "failed" | "ambiguous" | "observed"));
            if let (true, Some(effect_key)) = (outcome, says("effect_key")) {
                write(rows, Table::EffectReceipts, &[Part::Text(effect_key)], &seq, Put::Replace)?;
                let committed = result == Some("committed") || says("execution") == Some("committed");
                if committed && receipt.executor_result.is_some() {
                    with_result.insert(effect_key.to_owned());
                } else {
                    with_result.remove(effect_key);
                }
            }
        }
        Ok(())
    })?;
    Ok(with_result)
}

/// Schema 1's snapshot index, whose value was the bare id: its rows, and the table dropped.
fn take_snapshot_index_v1(txn: &redb::WriteTransaction) -> Result<Vec<(String, u64, String)>> {
    let name = Table::SnapshotIndex.name();
    let mut rows = Vec::new();
    if txn.list_tables().map_err(fault)?.any(|table| table.name() == name) {
        let old = txn.open_table(tables::SNAPSHOT_INDEX_V1).map_err(fault_in(name))?;
        for row in old.iter().map_err(fault_in(name))? {
            let (key, value) = row.map_err(fault_in(name))?;
            let (scope, seq) = key.value();
            rows.push((scope.to_owned(), seq, value.value().to_owned()));
        }
        drop(old);
        txn.delete_table(tables::SNAPSHOT_INDEX_V1).map_err(fault_in(name))?;
    }
    Ok(rows)
}
