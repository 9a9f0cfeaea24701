//! The only code that touches redb: table definitions, value encoding, transactions.
//!
//! One file, one database, shared by every process on the host (`ConcurrencyMode::MultiWriter`)
//! and by every handle in one process (a registry keyed by the file's identity hands out the
//! same `Database`). Every state change is one durable write transaction carrying state,
//! events, receipt and chain head together, so after any crash state and evidence agree.

use std::collections::HashMap;
use std::fs::OpenOptions;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use redb::{ConcurrencyMode, Database, ReadableDatabase, ReadableTable, ReadableTableMetadata, TableDefinition};
use serde::{de::DeserializeOwned, Deserialize, Serialize};

use crate::approval::ApprovalRecord;
use crate::clock::Micros;
use crate::effect::{EffectRecord, EffectState, StoredResult};
use crate::error::{Error, Result};
use crate::receipt::{ChainReport, ReceiptDraft, StoredReceipt, GENESIS_HASH};
use crate::sight::snapshot::SnapshotRecord;

/// The store layout this build reads and writes. Opening any other is refused.
pub const SCHEMA_VERSION: u32 = 1;
/// The first byte of every encoded value: postcard layout version.
const VALUE_VERSION: u8 = 1;

// ---- all table definitions ----------------------------------------------------------------
const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");
const EFFECTS: TableDefinition<&str, &[u8]> = TableDefinition::new("effects");
const APPROVALS: TableDefinition<&str, &[u8]> = TableDefinition::new("approvals");
const RECEIPTS: TableDefinition<u64, &[u8]> = TableDefinition::new("receipts");
const EVENTS: TableDefinition<u64, &[u8]> = TableDefinition::new("events");
/// Sight snapshots by id. Append-only: nothing in Warden updates or removes a row.
const SNAPSHOTS: TableDefinition<&str, &[u8]> = TableDefinition::new("snapshots");
/// (scope, seq) → snapshot id, for paging newest first. Each snapshot is indexed under its
/// endpoint's scope and its window's scope (see `sight::snapshot::scopes`).
const SNAPSHOT_INDEX: TableDefinition<(&str, u64), &str> = TableDefinition::new("snapshot_index");

const META_SCHEMA: &str = "schema_version";
const META_HEAD: &str = "chain_head";
const META_SNAPSHOT_SEQ: &str = "snapshot_seq";

/// How long a write waits for the write slot before giving up: `WARDEN_WRITE_WAIT_MS`, default
/// 30 s. A healthy transaction holds the slot for about a millisecond.
fn write_wait() -> std::time::Duration {
    let millis = std::env::var("WARDEN_WRITE_WAIT_MS").ok().and_then(|v| v.parse::<u64>().ok()).unwrap_or(30_000);
    std::time::Duration::from_millis(millis.clamp(1, 3_600_000))
}

/// Redb's page cache per process; the working set of a kernel is small.
const CACHE_BYTES: usize = 32 * 1024 * 1024;

/// The closed set of event types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[allow(non_camel_case_types, clippy::upper_case_acronyms)]
pub enum EventKind {
    ACTION_PROPOSED,
    POLICY_EVALUATED,
    APPROVAL_REQUESTED,
    APPROVAL_GRANTED,
    APPROVAL_DENIED,
    APPROVAL_EXPIRED,
    APPROVAL_INVALIDATED,
    APPROVAL_CONSUMED,
    EFFECT_RESERVED,
    EFFECT_RESERVATION_REFUSED,
    EXECUTION_STARTED,
    EXECUTION_COMMITTED,
    EXECUTION_FAILED,
    EXECUTION_AMBIGUOUS,
    EFFECT_RESOLVED,
    EFFECT_LEASE_EXTENDED,
    ACTION_DENIED,
    RECONCILIATION_STARTED,
    RECONCILIATION_RESOLVED,
}

impl EventKind {
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
        }
    }
}

/// One ordered step in the life of an action. `event_id` is assigned by the store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    pub event_id: u64,
    pub ts: Micros,
    pub kind: EventKind,
    pub action_id: Option<String>,
    pub effect_key: Option<String>,
    pub approval_id: Option<String>,
    /// Canonical JSON text (postcard cannot carry a `serde_json::Value`).
    pub data: String,
}

impl Event {
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

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct ChainHead {
    seq: u64,
    hash: String,
}

fn fault<E: Into<redb::Error>>(error: E) -> Error {
    Error::Store(error.into().to_string())
}

fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>> {
    let mut bytes = vec![VALUE_VERSION];
    let body = postcard::to_stdvec(value).map_err(|e| Error::Store(format!("cannot encode a row: {e}")))?;
    bytes.extend_from_slice(&body);
    Ok(bytes)
}

fn decode<T: DeserializeOwned>(what: &str, key: &str, bytes: &[u8]) -> Result<T> {
    match bytes.split_first() {
        Some((&VALUE_VERSION, body)) => postcard::from_bytes(body)
            .map_err(|e| Error::Store(format!("the {what} row {key:?} is corrupt ({e}); the store file was altered or damaged"))),
        Some((version, _)) => Err(Error::Store(format!(
            "the {what} row {key:?} has value layout {version}, which this build does not know; use the Warden version that wrote it"
        ))),
        None => Err(Error::Store(format!("the {what} row {key:?} is empty; the store file was altered or damaged"))),
    }
}

/// Handles in one process share one `Database` per file.
/// A file's identity: (device, inode), so two spellings of one path share one database.
type FileId = (u64, u64);
static OPEN: Mutex<Option<HashMap<FileId, Weak<Database>>>> = Mutex::new(None);

/// An open store. Cheap to clone; every clone shares the database.
#[derive(Clone)]
pub struct Store {
    db: Arc<Database>,
    path: PathBuf,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("path", &self.path).finish()
    }
}

impl Store {
    /// Open the store at `path`, creating it if it does not exist. Several processes may do
    /// this at the same moment: creation and schema setup run under an exclusive lock on a
    /// sidecar `<path>.lock`, so all of them agree on one schema.
    pub fn open(path: impl AsRef<Path>) -> Result<Store> {
        let path = path.as_ref().to_path_buf();
        if path.as_os_str().is_empty() {
            return Err(Error::InvalidInput("the store path is empty; pass --store PATH or set WARDEN_STORE".into()));
        }
        let mut lock_name = path.clone().into_os_string();
        lock_name.push(".lock");
        let lock_file =
            OpenOptions::new().create(true).truncate(false).read(true).write(true).open(&lock_name).map_err(|e| {
                Error::Store(format!("cannot open the lock file {}: {e}", Path::new(&lock_name).display()))
            })?;
        let _guard = FileLock::exclusive(&lock_file)?;
        let mut registry = OPEN.lock().map_err(|_| {
            Error::Store("the store registry is poisoned by an earlier panic; restart the process".into())
        })?;
        let registry = registry.get_or_insert_with(HashMap::new);
        let identity = |p: &Path| std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()));
        if let Some(id) = identity(&path) {
            if let Some(db) = registry.get(&id).and_then(Weak::upgrade) {
                return Ok(Store { db, path });
            }
        }
        let db = Database::builder()
            .set_concurrency_mode(ConcurrencyMode::MultiWriter)
            .set_cache_size(CACHE_BYTES)
            .create(&path)
            .map_err(|e| Error::Store(format!("cannot open the store {}: {e}", path.display())))?;
        let store = Store { db: Arc::new(db), path: path.clone() };
        store.ensure_schema()?;
        if let Some(id) = identity(&path) {
            registry.retain(|_, weak| weak.strong_count() > 0);
            registry.insert(id, Arc::downgrade(&store.db));
        }
        Ok(store)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn ensure_schema(&self) -> Result<()> {
        let txn = self.db.begin_write().map_err(fault)?;
        {
            let mut meta = txn.open_table(META).map_err(fault)?;
            let existing = meta.get(META_SCHEMA).map_err(fault)?.map(|v| v.value().to_vec());
            match existing {
                None => {
                    if meta.len().map_err(fault)? > 0 {
                        return Err(Error::Store(
                            "the store has rows but no schema version; it was not written by Warden".into(),
                        ));
                    }
                    meta.insert(META_SCHEMA, SCHEMA_VERSION.to_le_bytes().as_slice()).map_err(fault)?;
                    let head = encode(&ChainHead { seq: 0, hash: GENESIS_HASH.to_owned() })?;
                    meta.insert(META_HEAD, head.as_slice()).map_err(fault)?;
                }
                Some(bytes) => {
                    let version = <[u8; 4]>::try_from(bytes.as_slice()).map(u32::from_le_bytes).map_err(|_| {
                        Error::Store(
                            "the store's schema version row is unreadable; it was not written by Warden".into(),
                        )
                    })?;
                    if version != SCHEMA_VERSION {
                        return Err(Error::Store(if version > SCHEMA_VERSION {
                            format!("the store has schema version {version}, newer than this build's {SCHEMA_VERSION}; upgrade Warden to open it")
                        } else {
                            format!("the store has schema version {version}, which this build does not know")
                        }));
                    }
                    // Nothing to create: abort rather than commit an empty write.
                    drop(meta);
                    txn.abort().map_err(fault)?;
                    return Ok(());
                }
            }
            txn.open_table(EFFECTS).map_err(fault)?;
            txn.open_table(APPROVALS).map_err(fault)?;
            txn.open_table(RECEIPTS).map_err(fault)?;
            txn.open_table(EVENTS).map_err(fault)?;
            txn.open_table(SNAPSHOTS).map_err(fault)?;
            txn.open_table(SNAPSHOT_INDEX).map_err(fault)?;
        }
        txn.commit().map_err(fault)
    }

    /// Run `work` in one durable write transaction. It commits only if `work` returns `Ok`;
    /// a refusal that must keep its writes is returned inside the `Ok`.
    pub fn write<T>(&self, work: impl FnOnce(&mut WriteTx<'_>) -> Result<T>) -> Result<T> {
        let txn = self.begin_write_bounded()?;
        let value = {
            let mut tx = WriteTx {
                meta: txn.open_table(META).map_err(fault)?,
                effects: txn.open_table(EFFECTS).map_err(fault)?,
                approvals: txn.open_table(APPROVALS).map_err(fault)?,
                receipts: txn.open_table(RECEIPTS).map_err(fault)?,
                events: txn.open_table(EVENTS).map_err(fault)?,
                last_event_id: None,
            };
            work(&mut tx)?
        };
        txn.commit().map_err(fault)?;
        Ok(value)
    }

    /// Wait for the one write slot (another thread's or another process's transaction may hold
    /// it) with a bounded backoff, instead of surfacing "busy" to the caller or waiting forever
    /// behind a writer that stopped (a process frozen by a debugger or SIGSTOP).
    fn begin_write_bounded(&self) -> Result<redb::WriteTransaction> {
        let deadline = std::time::Instant::now() + write_wait();
        let mut pause = std::time::Duration::from_micros(20);
        loop {
            match self.db.try_begin_write() {
                Ok(txn) => return Ok(txn),
                Err(redb::TransactionError::WouldBlock) => {
                    if std::time::Instant::now() >= deadline {
                        return Err(Error::Store(format!(
                            "another writer held the store {} for longer than {} ms; nothing was written. Look for a stopped process using this store, or raise WARDEN_WRITE_WAIT_MS",
                            self.path.display(),
                            write_wait().as_millis()
                        )));
                    }
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(std::time::Duration::from_millis(2));
                }
                Err(other) => return Err(fault(other)),
            }
        }
    }

    fn read_txn(&self) -> Result<redb::ReadTransaction> {
        self.db.begin_read().map_err(fault)
    }

    pub fn effect(&self, effect_key: &str) -> Result<Option<EffectRecord>> {
        let txn = self.read_txn()?;
        let table = txn.open_table(EFFECTS).map_err(fault)?;
        let found = table.get(effect_key).map_err(fault)?;
        found.map(|bytes| decode("effect", effect_key, bytes.value())).transpose()
    }

    /// Effects in key order, optionally only those in `state`, at most `limit`.
    pub fn effects(&self, state: Option<EffectState>, limit: usize) -> Result<Vec<EffectRecord>> {
        let txn = self.read_txn()?;
        let table = txn.open_table(EFFECTS).map_err(fault)?;
        let mut out = Vec::new();
        for row in table.iter().map_err(fault)? {
            let (key, value) = row.map_err(fault)?;
            let record: EffectRecord = decode("effect", key.value(), value.value())?;
            if state.is_none_or(|wanted| record.state == wanted) {
                out.push(record);
                if out.len() >= limit {
                    break;
                }
            }
        }
        Ok(out)
    }

    pub fn approval(&self, approval_id: &str) -> Result<Option<ApprovalRecord>> {
        let txn = self.read_txn()?;
        let table = txn.open_table(APPROVALS).map_err(fault)?;
        let found = table.get(approval_id).map_err(fault)?;
        found.map(|bytes| decode("approval", approval_id, bytes.value())).transpose()
    }

    /// Approvals still pending (unanswered and unexpired at `now`), oldest first.
    pub fn pending_approvals(&self, now: Micros) -> Result<Vec<ApprovalRecord>> {
        let txn = self.read_txn()?;
        let table = txn.open_table(APPROVALS).map_err(fault)?;
        let mut out = Vec::new();
        for row in table.iter().map_err(fault)? {
            let (key, value) = row.map_err(fault)?;
            let record: ApprovalRecord = decode("approval", key.value(), value.value())?;
            if record.status == crate::approval::ApprovalStatus::Pending && now <= record.expires_at {
                out.push(record);
            }
        }
        out.sort_by_key(|record| record.requested_at);
        Ok(out)
    }

    /// Receipts with `seq` in `from..`, at most `limit`, in seq order.
    pub fn receipts(&self, from: u64, limit: usize) -> Result<Vec<(u64, StoredReceipt)>> {
        let txn = self.read_txn()?;
        let table = txn.open_table(RECEIPTS).map_err(fault)?;
        let mut out = Vec::new();
        for row in table.range(from..).map_err(fault)?.take(limit) {
            let (key, value) = row.map_err(fault)?;
            let seq = key.value();
            out.push((seq, decode("receipt", &seq.to_string(), value.value())?));
        }
        Ok(out)
    }

    /// The last `n` receipts, in seq order.
    pub fn last_receipts(&self, n: usize) -> Result<Vec<(u64, StoredReceipt)>> {
        let txn = self.read_txn()?;
        let table = txn.open_table(RECEIPTS).map_err(fault)?;
        let mut out = Vec::new();
        for row in table.iter().map_err(fault)?.rev().take(n) {
            let (key, value) = row.map_err(fault)?;
            let seq = key.value();
            out.push((seq, decode("receipt", &seq.to_string(), value.value())?));
        }
        out.reverse();
        Ok(out)
    }

    pub fn receipt_count(&self) -> Result<u64> {
        let txn = self.read_txn()?;
        let table = txn.open_table(RECEIPTS).map_err(fault)?;
        table.len().map_err(fault)
    }

    /// Events with id after `after`, at most `limit`, ascending.
    pub fn events(&self, after: u64, limit: usize) -> Result<Vec<Event>> {
        let txn = self.read_txn()?;
        let table = txn.open_table(EVENTS).map_err(fault)?;
        let mut out = Vec::new();
        for row in table.range(after.saturating_add(1)..).map_err(fault)?.take(limit) {
            let (key, value) = row.map_err(fault)?;
            out.push(decode("event", &key.value().to_string(), value.value())?);
        }
        Ok(out)
    }

    /// Walk every receipt in one read snapshot, streaming, and name every break.
    pub fn verify_chain(&self) -> Result<ChainReport> {
        let txn = self.read_txn()?;
        let meta = txn.open_table(META).map_err(fault)?;
        let head = match meta.get(META_HEAD).map_err(fault)? {
            Some(bytes) => decode::<ChainHead>("meta", META_HEAD, bytes.value()).ok().map(|h| (h.seq, h.hash)),
            None => None,
        };
        let table = txn.open_table(RECEIPTS).map_err(fault)?;
        let mut iter_error = None;
        let rows = table.iter().map_err(fault)?.map_while(|row| match row {
            Ok((key, value)) => {
                let seq = key.value();
                Some((
                    seq,
                    decode::<StoredReceipt>("receipt", &seq.to_string(), value.value()).map_err(|e| e.to_string()),
                ))
            }
            Err(e) => {
                iter_error = Some(fault(e));
                None
            }
        });
        let report = crate::receipt::verify_chain(rows, head);
        match iter_error {
            Some(error) => Err(error),
            None => Ok(report),
        }
    }

    /// Append one snapshot in one durable write transaction: the row, its index entries under
    /// every scope, and the sequence counter. Returns the record with its `seq` assigned.
    /// Stores created before snapshots existed gain the tables on the first append.
    pub fn append_snapshot(&self, mut record: SnapshotRecord, scopes: &[String]) -> Result<SnapshotRecord> {
        let txn = self.begin_write_bounded()?;
        {
            let mut meta = txn.open_table(META).map_err(fault)?;
            let mut rows = txn.open_table(SNAPSHOTS).map_err(fault)?;
            let mut index = txn.open_table(SNAPSHOT_INDEX).map_err(fault)?;
            let last = match meta.get(META_SNAPSHOT_SEQ).map_err(fault)? {
                None => 0,
                Some(bytes) => <[u8; 8]>::try_from(bytes.value()).map(u64::from_le_bytes).map_err(|_| {
                    Error::Store("the store's snapshot counter row is unreadable; the store file was altered".into())
                })?,
            };
            record.seq = last + 1;
            if rows.get(record.id.as_str()).map_err(fault)?.is_some() {
                return Err(Error::Store(format!(
                    "snapshot id {} already exists; nothing was written (the random source repeated itself)",
                    record.id
                )));
            }
            rows.insert(record.id.as_str(), encode(&record)?.as_slice()).map_err(fault)?;
            for scope in scopes {
                index.insert((scope.as_str(), record.seq), record.id.as_str()).map_err(fault)?;
            }
            meta.insert(META_SNAPSHOT_SEQ, record.seq.to_le_bytes().as_slice()).map_err(fault)?;
        }
        txn.commit().map_err(fault)?;
        Ok(record)
    }

    pub fn snapshot(&self, id: &str) -> Result<Option<SnapshotRecord>> {
        let txn = self.read_txn()?;
        let table = match txn.open_table(SNAPSHOTS) {
            Ok(table) => table,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
            Err(other) => return Err(fault(other)),
        };
        let found = table.get(id).map_err(fault)?;
        found.map(|bytes| decode("snapshot", id, bytes.value())).transpose()
    }

    /// Snapshots indexed under `scope` with seq below `before` (all when `None`), newest first,
    /// at most `limit`, and whether older ones remain. Read in one read transaction.
    pub fn snapshot_page(&self, scope: &str, before: Option<u64>, limit: usize) -> Result<(Vec<SnapshotRecord>, bool)> {
        let txn = self.read_txn()?;
        let (index, rows) = match (txn.open_table(SNAPSHOT_INDEX), txn.open_table(SNAPSHOTS)) {
            (Ok(index), Ok(rows)) => (index, rows),
            (Err(redb::TableError::TableDoesNotExist(_)), _) | (_, Err(redb::TableError::TableDoesNotExist(_))) => {
                return Ok((Vec::new(), false))
            }
            (Err(other), _) | (_, Err(other)) => return Err(fault(other)),
        };
        let upper = before.unwrap_or(u64::MAX);
        let mut out = Vec::new();
        let mut more = false;
        for entry in index.range((scope, 0)..(scope, upper)).map_err(fault)?.rev() {
            let (_, id) = entry.map_err(fault)?;
            if out.len() == limit {
                more = true;
                break;
            }
            let id = id.value();
            let bytes = rows.get(id).map_err(fault)?.ok_or_else(|| {
                Error::Store(format!("snapshot {id} is indexed but missing; the store file was altered"))
            })?;
            out.push(decode("snapshot", id, bytes.value())?);
        }
        Ok((out, more))
    }

    /// Test support: overwrite raw rows to simulate tampering with the file. Not part of the
    /// kernel's surface; nothing in Warden calls it.
    #[doc(hidden)]
    pub fn tamper(&self, edit: impl FnOnce(&mut Tamper<'_>) -> Result<()>) -> Result<()> {
        let txn = self.db.begin_write().map_err(fault)?;
        {
            let mut tamper = Tamper {
                meta: txn.open_table(META).map_err(fault)?,
                receipts: txn.open_table(RECEIPTS).map_err(fault)?,
            };
            edit(&mut tamper)?;
        }
        txn.commit().map_err(fault)
    }
}

/// Raw access for tamper tests.
#[doc(hidden)]
pub struct Tamper<'t> {
    meta: redb::Table<'t, &'static str, &'static [u8]>,
    receipts: redb::Table<'t, u64, &'static [u8]>,
}

impl Tamper<'_> {
    pub fn receipt(&self, seq: u64) -> Result<Option<StoredReceipt>> {
        let found = self.receipts.get(seq).map_err(fault)?;
        found.map(|bytes| decode("receipt", &seq.to_string(), bytes.value())).transpose()
    }
    pub fn put_receipt(&mut self, seq: u64, row: &StoredReceipt) -> Result<()> {
        self.receipts.insert(seq, encode(row)?.as_slice()).map_err(fault)?;
        Ok(())
    }
    pub fn remove_receipt(&mut self, seq: u64) -> Result<()> {
        self.receipts.remove(seq).map_err(fault)?;
        Ok(())
    }
    pub fn set_head(&mut self, seq: u64, hash: &str) -> Result<()> {
        self.meta.insert(META_HEAD, encode(&ChainHead { seq, hash: hash.to_owned() })?.as_slice()).map_err(fault)?;
        Ok(())
    }
    pub fn set_schema_version(&mut self, version: u32) -> Result<()> {
        self.meta.insert(META_SCHEMA, version.to_le_bytes().as_slice()).map_err(fault)?;
        Ok(())
    }
}

/// One open write transaction. Everything one state change writes goes through here.
pub struct WriteTx<'t> {
    meta: redb::Table<'t, &'static str, &'static [u8]>,
    effects: redb::Table<'t, &'static str, &'static [u8]>,
    approvals: redb::Table<'t, &'static str, &'static [u8]>,
    receipts: redb::Table<'t, u64, &'static [u8]>,
    events: redb::Table<'t, u64, &'static [u8]>,
    /// The last event id, read once per transaction: a permit writes up to six events and
    /// each would otherwise look up the table's last key again.
    last_event_id: Option<u64>,
}

impl WriteTx<'_> {
    pub fn effect(&self, effect_key: &str) -> Result<Option<EffectRecord>> {
        let found = self.effects.get(effect_key).map_err(fault)?;
        found.map(|bytes| decode("effect", effect_key, bytes.value())).transpose()
    }

    pub fn put_effect(&mut self, record: &EffectRecord) -> Result<()> {
        self.effects.insert(record.effect_key.as_str(), encode(record)?.as_slice()).map_err(fault)?;
        Ok(())
    }

    pub fn approval(&self, approval_id: &str) -> Result<Option<ApprovalRecord>> {
        let found = self.approvals.get(approval_id).map_err(fault)?;
        found.map(|bytes| decode("approval", approval_id, bytes.value())).transpose()
    }

    pub fn put_approval(&mut self, record: &ApprovalRecord) -> Result<()> {
        self.approvals.insert(record.approval_id.as_str(), encode(record)?.as_slice()).map_err(fault)?;
        Ok(())
    }

    /// Append an event; ids are assigned here, ascending.
    pub fn event(
        &mut self,
        kind: EventKind,
        ts: Micros,
        action_id: Option<&str>,
        effect_key: Option<&str>,
        approval_id: Option<&str>,
        data: serde_json::Value,
    ) -> Result<u64> {
        let last = match self.last_event_id {
            Some(last) => last,
            None => self.events.last().map_err(fault)?.map(|(key, _)| key.value()).unwrap_or(0),
        };
        let event_id = last + 1;
        self.last_event_id = Some(event_id);
        let data = crate::canonical::to_canonical_string(&data, "event.data")
            .unwrap_or_else(|_| serde_json::to_string(&data).unwrap_or_else(|_| "null".into()));
        let event = Event {
            event_id,
            ts,
            kind,
            action_id: action_id.map(str::to_owned),
            effect_key: effect_key.map(str::to_owned),
            approval_id: approval_id.map(str::to_owned),
            data,
        };
        self.events.insert(event_id, encode(&event)?.as_slice()).map_err(fault)?;
        Ok(event_id)
    }

    /// Seal `draft` onto the chain: next seq, previous hash, the row and the new head, in this
    /// same transaction.
    pub fn append_receipt(
        &mut self,
        draft: &ReceiptDraft,
        executor_result: Option<StoredResult>,
    ) -> Result<(u64, String)> {
        let head: ChainHead = match self.meta.get(META_HEAD).map_err(fault)? {
            Some(bytes) => decode("meta", META_HEAD, bytes.value())?,
            None => return Err(Error::Store("the store has no chain head row; it was altered".into())),
        };
        let seq = head.seq + 1;
        if self.receipts.get(seq).map_err(fault)?.is_some() {
            return Err(Error::Store(format!(
                "receipt seq {seq} already exists but the chain head says {}; the store was altered. Run `warden receipts --verify-chain`",
                head.seq
            )));
        }
        let (document, hash) =
            draft.seal(seq, &head.hash).map_err(|e| Error::InvalidInput(format!("cannot encode a receipt: {e}")))?;
        let row = StoredReceipt { document, hash: Some(hash.clone()), executor_result };
        self.receipts.insert(seq, encode(&row)?.as_slice()).map_err(fault)?;
        self.meta.insert(META_HEAD, encode(&ChainHead { seq, hash: hash.clone() })?.as_slice()).map_err(fault)?;
        Ok((seq, hash))
    }
}

/// An exclusive `flock` held for its lifetime.
struct FileLock<'f> {
    file: &'f std::fs::File,
}

impl<'f> FileLock<'f> {
    fn exclusive(file: &'f std::fs::File) -> Result<FileLock<'f>> {
        file.lock().map_err(|e| Error::Store(format!("cannot lock the store's lock file: {e}")))?;
        Ok(FileLock { file })
    }
}

impl Drop for FileLock<'_> {
    fn drop(&mut self) {
        let _ = self.file.unlock();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str) -> SnapshotRecord {
        SnapshotRecord {
            id: id.to_owned(),
            seq: 0,
            source: "s".into(),
            endpoint: "e".into(),
            window: r#"["s","e",{}]"#.into(),
            fingerprint: "sha256:0".into(),
            taken_at: 1,
            result: "{}".into(),
        }
    }

    #[test]
    fn a_store_written_before_snapshots_existed_reads_them_as_empty_and_gains_them_on_append() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path().join("old.redb")).expect("open");
        // What a store created by the first schema-1 build looks like: no snapshot tables.
        let txn = store.db.begin_write().expect("write");
        assert!(txn.delete_table(SNAPSHOTS).expect("delete"));
        assert!(txn.delete_table(SNAPSHOT_INDEX).expect("delete"));
        txn.commit().expect("commit");

        assert_eq!(store.snapshot("snp_x").expect("read"), None);
        assert_eq!(store.snapshot_page("endpoint:s/e", None, 10).expect("page"), (Vec::new(), false));
        let scopes = ["endpoint:s/e".to_owned()];
        let first = store.append_snapshot(record("snp_a"), &scopes).expect("append");
        let second = store.append_snapshot(record("snp_b"), &scopes).expect("append");
        assert_eq!((first.seq, second.seq), (1, 2));
        let (page, more) = store.snapshot_page("endpoint:s/e", None, 1).expect("page");
        assert_eq!((page[0].id.as_str(), more), ("snp_b", true));
        let (page, more) = store.snapshot_page("endpoint:s/e", Some(2), 1).expect("page");
        assert_eq!((page[0].id.as_str(), more), ("snp_a", false));
        // An id is written once.
        assert!(store.append_snapshot(record("snp_a"), &scopes).is_err());
        assert_eq!(store.snapshot_page("endpoint:s/e", None, 10).expect("page").0.len(), 2);
    }
}
