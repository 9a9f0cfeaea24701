//! The schema row, creating the tables of a new store, and forward-only migrations, each one
//! durable write transaction (a crash leaves the old schema or the new one, never a mix).

use redb::{Database, ReadableDatabase, ReadableTable, ReadableTableMetadata, TableDefinition, TableHandle};

use crate::approval::ApprovalRecord;
use crate::error::{Error, Result};
use crate::event::Event;
use crate::receipt::StoredReceipt;
use crate::snapshot_record::SnapshotRecord;
use crate::store::redb::rows::{fault, fault_in};
use crate::store::rows::codec::{decode, decode_legacy, encode};
use crate::store::rows::records::{ApprovalV2, ChainHead, EffectV1};
use crate::store::rows::semantics::genesis_head;
use crate::store::tables::{self, name, SCHEMA_VERSION};

/// Fill a brand-new database: every table, the schema row and the genesis chain head.
pub(crate) fn write_fresh(db: &Database) -> Result<()> {
    let txn = db.begin_write().map_err(fault)?;
    create_missing_tables(&txn)?;
    {
        let mut meta = txn.open_table(tables::META).map_err(fault_in(name::META))?;
        meta.insert(tables::META_SCHEMA, SCHEMA_VERSION.to_le_bytes().as_slice()).map_err(fault_in(name::META))?;
        meta.insert(tables::META_HEAD, genesis_head()?.as_slice()).map_err(fault_in(name::META))?;
    }
    txn.commit().map_err(fault)
}

fn create_missing_tables(txn: &redb::WriteTransaction) -> Result<()> {
    let touching = std::cell::Cell::new("");
    crate::store::redb::rows::FileWrites::open(txn, &touching).create_all()
}

/// The schema version a database says it has: `None` when it has no schema row.
pub(crate) fn version(db: &impl ReadableDatabase, path: &std::path::Path) -> Result<Option<u32>> {
    let txn = db.begin_read().map_err(fault)?;
    let meta = match txn.open_table(tables::META) {
        Ok(meta) => meta,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
        Err(other) => return Err(fault_in(name::META)(other)),
    };
    match meta.get(tables::META_SCHEMA).map_err(fault_in(name::META))? {
        None => Ok(None),
        Some(bytes) => <[u8; 4]>::try_from(bytes.value())
            .map(u32::from_le_bytes)
            .map(Some)
            .map_err(|_| crate::store::redb::file::not_a_store(path, "its schema version row is unreadable")),
    }
}

/// A file with tables but no schema row: a Warden store whose directory lost its `meta` table
/// (it holds Warden's other tables) is damage; anything else was not written by Warden.
pub(crate) fn without_version(rows: &crate::store::redb::rows::FileReads, path: &std::path::Path) -> Error {
    use crate::store::rows::{RowRead, Table};
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
        v if v > SCHEMA_VERSION => Err(Error::Store(format!(
            "the store {} has schema version {v}, newer than this build's {SCHEMA_VERSION}; upgrade Warden to open it",
            path.display()
        ))),
        1..=4 => Ok(()),
        v => Err(Error::Store(format!(
            "the store {} has schema version {v}, which this build does not know",
            path.display()
        ))),
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
        None => {
            let reads = crate::store::redb::rows::FileReads::new(db.begin_read().map_err(fault)?);
            if reads.txn().list_tables().map_err(fault)?.next().is_none() {
                Ok(())
            } else {
                Err(without_version(&reads, path))
            }
        }
    }
}

/// Bring an opened store to this build's schema, or refuse it. The caller is the store's one
/// writer.
pub(crate) fn ensure(db: &Database, path: &std::path::Path) -> Result<()> {
    match version(db, path)? {
        Some(v) if v == SCHEMA_VERSION => Ok(()),
        Some(from @ (1..=4)) => migrate_forward(db, from),
        Some(v) => check_version(v, path),
        None => {
            // A redb file without a schema row. One with no tables at all is a creation by an
            // older Warden that never finished (it holds nothing to lose): finish it. Anything
            // else was not written by Warden.
            let reads = crate::store::redb::rows::FileReads::new(db.begin_read().map_err(fault)?);
            let empty = reads.txn().list_tables().map_err(fault)?.next().is_none();
            if empty {
                drop(reads);
                write_fresh(db)
            } else {
                Err(without_version(&reads, path))
            }
        }
    }
}

/// Every step from schema `from` to this build's, in one durable write transaction: a crash
/// leaves the old schema or the new one, never a step in between. Each step only rewrites the
/// tables it owns, so steps added on other branches slot in by their number.
fn migrate_forward(db: &Database, from: u32) -> Result<()> {
    let txn = db.begin_write().map_err(fault)?;
    if from < 2 {
        step_1_to_2(&txn)?;
    }
    // 2 → 3 creates the authority tables empty (create_missing_tables, in the next step too).
    if from < 3 {
        create_missing_tables(&txn)?;
    }
    if from < 4 {
        approvals_keep_the_action(&txn)?;
    }
    // 4 → 5 rewrites nothing: layout-2 rows stay readable; new rows may be layout 3.
    {
        let mut meta = txn.open_table(tables::META).map_err(fault_in(name::META))?;
        meta.insert(tables::META_SCHEMA, SCHEMA_VERSION.to_le_bytes().as_slice()).map_err(fault_in(name::META))?;
    }
    txn.commit().map_err(fault)
}

/// Schema 3 → 4 (from 2 on a store without delegations): approval rows take the schema-4 form
/// (`ApprovalV2::upgrade`: the action unknown, the one answer a vote) and `approvals_by_action`
/// indexes the latest request per action hash.
fn approvals_keep_the_action(txn: &redb::WriteTransaction) -> Result<()> {
    create_missing_tables(txn)?;
    rewrite_str::<ApprovalV2, crate::approval::ApprovalRecord>(
        txn,
        tables::APPROVALS,
        name::APPROVALS,
        |table, key, bytes| decode(table, key, bytes),
        |old| Ok(old.upgrade()),
    )?;
    let approvals = txn.open_table(tables::APPROVALS).map_err(fault_in(name::APPROVALS))?;
    let mut latest: std::collections::BTreeMap<String, (crate::clock::Micros, String)> = Default::default();
    for row in approvals.iter().map_err(fault_in(name::APPROVALS))? {
        let (key, value) = row.map_err(fault_in(name::APPROVALS))?;
        let record: ApprovalRecord = decode(name::APPROVALS, &key.value(), value.value())?;
        let newer = latest.get(&record.action_hash).is_none_or(|(at, _)| *at <= record.requested_at);
        if newer {
            latest.insert(record.action_hash.clone(), (record.requested_at, record.approval_id.clone()));
        }
    }
    let mut index = txn.open_table(tables::APPROVALS_BY_ACTION).map_err(fault_in(name::APPROVALS_BY_ACTION))?;
    for (hash, (_, id)) in &latest {
        let key = hash.as_str();
        index
            .insert(key, encode(name::APPROVALS_BY_ACTION, &key, id)?.as_slice())
            .map_err(fault_in(name::APPROVALS_BY_ACTION))?;
    }
    Ok(())
}

/// Schema 1 → 2: every row gains its checksum, effect rows stop carrying the executor result
/// (the committing receipt keeps it), and the receipt id and effect outcome indexes are built.
fn step_1_to_2(txn: &redb::WriteTransaction) -> Result<()> {
    {
        // The snapshot index changes type: retype it before anything opens it as schema 2.
        retype_snapshot_index(txn)?;
        create_missing_tables(txn)?;
        rewrite_str::<ApprovalV2, ApprovalV2>(txn, tables::APPROVALS, name::APPROVALS, legacy, Ok)?;
        rewrite_str::<SnapshotRecord, SnapshotRecord>(txn, tables::SNAPSHOTS, name::SNAPSHOTS, legacy, Ok)?;
        rewrite_u64::<Event>(txn, tables::EVENTS, name::EVENTS)?;
        rewrite_u64::<StoredReceipt>(txn, tables::RECEIPTS, name::RECEIPTS)?;
        let on_receipts = index_receipts(txn)?;
        rewrite_str::<EffectV1, _>(txn, tables::EFFECTS, name::EFFECTS, legacy, |v1| {
            let kept = on_receipts.contains(&v1.effect_key);
            Ok(v1.upgrade(kept))
        })?;
        let mut meta = txn.open_table(tables::META).map_err(fault_in(name::META))?;
        let head: Option<ChainHead> = match meta.get(tables::META_HEAD).map_err(fault_in(name::META))? {
            Some(bytes) => Some(decode_legacy(name::META, &tables::META_HEAD, bytes.value())?),
            None => None,
        };
        let head =
            head.ok_or_else(|| Error::Store("the schema-1 store has no chain head row; it was altered".into()))?;
        meta.insert(tables::META_HEAD, encode(name::META, &tables::META_HEAD, &head)?.as_slice())
            .map_err(fault_in(name::META))?;
        // Schema 1 kept the snapshot counter as 8 raw bytes.
        let counter = match meta.get(tables::META_SNAPSHOT_SEQ).map_err(fault_in(name::META))? {
            Some(bytes) => Some(<[u8; 8]>::try_from(bytes.value()).map(u64::from_le_bytes).map_err(|_| {
                Error::Store("the schema-1 store's snapshot counter is unreadable; it was altered".into())
            })?),
            None => None,
        };
        if let Some(counter) = counter {
            meta.insert(
                tables::META_SNAPSHOT_SEQ,
                encode(name::META, &tables::META_SNAPSHOT_SEQ, &counter)?.as_slice(),
            )
            .map_err(fault_in(name::META))?;
        }
    }
    Ok(())
}

/// A schema-1 row (layout 1, no checksum).
fn legacy<T: serde::de::DeserializeOwned>(table: &str, key: &&str, bytes: &[u8]) -> Result<T> {
    decode_legacy(table, key, bytes)
}

const CHUNK: usize = 1024;

fn rewrite_str<Old: serde::de::DeserializeOwned, New: serde::Serialize>(
    txn: &redb::WriteTransaction,
    definition: TableDefinition<&str, &[u8]>,
    table_name: &'static str,
    read: impl Fn(&str, &&str, &[u8]) -> Result<Old>,
    convert: impl Fn(Old) -> Result<New>,
) -> Result<()> {
    let mut table = txn.open_table(definition).map_err(fault_in(table_name))?;
    let mut after: Option<String> = None;
    loop {
        let mut chunk = Vec::with_capacity(CHUNK);
        {
            let range = match &after {
                None => table.range::<&str>(..).map_err(fault_in(table_name))?,
                Some(last) => table
                    .range::<&str>((std::ops::Bound::Excluded(last.as_str()), std::ops::Bound::Unbounded))
                    .map_err(fault_in(table_name))?,
            };
            for row in range.take(CHUNK) {
                let (key, value) = row.map_err(fault_in(table_name))?;
                let key = key.value().to_owned();
                let old: Old = read(table_name, &key.as_str(), value.value())?;
                let new = encode(table_name, &key.as_str(), &convert(old)?)?;
                chunk.push((key, new));
            }
        }
        let Some((last, _)) = chunk.last() else { return Ok(()) };
        after = Some(last.clone());
        for (key, value) in &chunk {
            table.insert(key.as_str(), value.as_slice()).map_err(fault_in(table_name))?;
        }
    }
}

fn rewrite_u64<T: serde::de::DeserializeOwned + serde::Serialize>(
    txn: &redb::WriteTransaction,
    definition: TableDefinition<u64, &[u8]>,
    table_name: &'static str,
) -> Result<()> {
    let mut table = txn.open_table(definition).map_err(fault_in(table_name))?;
    let mut from = 0u64;
    loop {
        let mut chunk = Vec::with_capacity(CHUNK);
        for row in table.range(from..).map_err(fault_in(table_name))?.take(CHUNK) {
            let (key, value) = row.map_err(fault_in(table_name))?;
            let key = key.value();
            let old: T = decode_legacy(table_name, &key, value.value())?;
            chunk.push((key, encode(table_name, &key, &old)?));
        }
        let Some((last, _)) = chunk.last() else { return Ok(()) };
        let Some(next) = last.checked_add(1) else { break };
        from = next;
        for (key, value) in &chunk {
            table.insert(*key, value.as_slice()).map_err(fault_in(table_name))?;
        }
    }
    Ok(())
}

/// Build `receipt_ids` and `effect_receipts` from the (already rewritten) receipts. Returns the
/// effect keys whose last outcome receipt is a commit carrying the executor result.
fn index_receipts(txn: &redb::WriteTransaction) -> Result<std::collections::HashSet<String>> {
    let mut with_result = std::collections::HashSet::new();
    let receipts = txn.open_table(tables::RECEIPTS).map_err(fault_in(name::RECEIPTS))?;
    let mut ids = txn.open_table(tables::RECEIPT_IDS).map_err(fault_in(name::RECEIPT_IDS))?;
    let mut outcomes = txn.open_table(tables::EFFECT_RECEIPTS).map_err(fault_in(name::EFFECT_RECEIPTS))?;
    for row in receipts.iter().map_err(fault_in(name::RECEIPTS))? {
        let (key, value) = row.map_err(fault_in(name::RECEIPTS))?;
        let seq = key.value();
        let receipt: StoredReceipt = crate::store::rows::codec::decode(name::RECEIPTS, &seq, value.value())?;
        let Ok(document) = crate::canonical::parse_json(&receipt.document) else { continue };
        if let Some(id) = document.get("receipt_id").and_then(serde_json::Value::as_str) {
            ids.insert(id, encode(name::RECEIPT_IDS, &id, &seq)?.as_slice()).map_err(fault_in(name::RECEIPT_IDS))?;
        }
        let result = document.get("result").and_then(serde_json::Value::as_str);
        let outcome = matches!(result, Some("committed" | "failed" | "ambiguous" | "observed"));
        if let (true, Some(effect_key)) = (outcome, document.get("effect_key").and_then(serde_json::Value::as_str)) {
            outcomes
                .insert(effect_key, encode(name::EFFECT_RECEIPTS, &effect_key, &seq)?.as_slice())
                .map_err(fault_in(name::EFFECT_RECEIPTS))?;
            let committed = result == Some("committed")
                || document.get("execution").and_then(serde_json::Value::as_str) == Some("committed");
            if committed && receipt.executor_result.is_some() {
                with_result.insert(effect_key.to_owned());
            } else {
                with_result.remove(effect_key);
            }
        }
    }
    Ok(with_result)
}

fn retype_snapshot_index(txn: &redb::WriteTransaction) -> Result<()> {
    let exists = txn.list_tables().map_err(fault)?.any(|table| table.name() == name::SNAPSHOT_INDEX);
    let mut rows: Vec<(String, u64, String)> = Vec::new();
    if exists {
        let old = txn.open_table(tables::SNAPSHOT_INDEX_V1).map_err(fault_in(name::SNAPSHOT_INDEX))?;
        for row in old.iter().map_err(fault_in(name::SNAPSHOT_INDEX))? {
            let (key, value) = row.map_err(fault_in(name::SNAPSHOT_INDEX))?;
            let (scope, seq) = key.value();
            rows.push((scope.to_owned(), seq, value.value().to_owned()));
        }
        drop(old);
        txn.delete_table(tables::SNAPSHOT_INDEX_V1).map_err(fault_in(name::SNAPSHOT_INDEX))?;
    }
    let mut index = txn.open_table(tables::SNAPSHOT_INDEX).map_err(fault_in(name::SNAPSHOT_INDEX))?;
    for (scope, seq, id) in &rows {
        let key = (scope.as_str(), *seq);
        index
            .insert(key, encode(name::SNAPSHOT_INDEX, &key, id)?.as_slice())
            .map_err(fault_in(name::SNAPSHOT_INDEX))?;
    }
    debug_assert_eq!(index.len().unwrap_or(0), rows.len() as u64);
    Ok(())
}
