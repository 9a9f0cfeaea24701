//! The file engine's write-ahead journal: one sequential append per batch, so a durable step
//! costs one small write and one `fdatasync` instead of a redb B-tree commit.
//!
//! Each batch of the group commit is committed to redb without a sync (`Durability::None`) and
//! written here: the row changes (every `put` and `delete`, whole values) of every batch waiting
//! for the journal become one record, with its sequence number and a CRC, made durable (under
//! `withstands: power`) before any of those batches is answered. Records are written one at a
//! time, each synced before the next is written (the committer's journal stage), so a power
//! loss can tear only the last. redb is made durable at **checkpoints** — a durable commit that records, in
//! the meta row `journal`, the last batch it includes — after which the journal starts a new
//! lap from its first record.
//!
//! The file (`STORE.journal`): 4 KiB of header — two 512-byte slots, lap N in slot N mod 2, each
//! with the magic, format, the store's journal id, the lap, the first sequence number of the
//! lap and a CRC; the valid slot with the higher lap is the current one, so a torn header write
//! leaves the previous lap's — then records, each starting on a 512-byte boundary so that a
//! torn write damages only its own sectors:
//! `magic "WJR1" | lap u64 | seq u64 | length u32 | crc32 u32 | payload`, zero-padded.
//! The file grows by zeroed quarter megabytes and is reused, never truncated: a lap's appends change
//! no file size, so their `fdatasync` carries no metadata.
//!
//! Recovery (every owner's open) replays the records of the lap past the mark's sequence
//! number, in one durable transaction, before anything is served. The end of the lap is the
//! first position holding no valid record of the lap (zeros, or an older lap's record). A
//! damaged record with a valid record of the lap after it, a record out of sequence, a lap that
//! starts past the mark (records missing), a journal of another store, or a missing journal
//! of a store not closed cleanly is a store fault naming the file and offset — never a silent
//! truncation. A damaged last record with nothing valid after it is a torn last write, never
//! acknowledged, and is dropped.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use redb::{Database, ReadableDatabase};

use crate::error::{Error, Result, StoreFaultKind};
use crate::store::fork;
use crate::store::redb::disk::{self, JournalFile};
use crate::store::redb::payload::{changes, Change, Cursor};
use crate::store::redb::rows::{fault, FileReads, FileWrites};
use crate::store::rows::codec::{decode, encode};
use crate::store::rows::records::JournalMark;
use crate::store::rows::{KeyView, Part, Put, RowRead, RowWrite, Table};
use crate::store::tables::META_JOURNAL;
use crate::store::Withstands;

const FILE_MAGIC: [u8; 8] = *b"WARDENJ1";
const FORMAT: u32 = 1;
/// Where the first record of a lap starts.
const HEADER_BYTES: u64 = 4096;
/// Records start on these boundaries.
const SECTOR: u64 = 512;
const RECORD_MAGIC: [u8; 4] = *b"WJR1";
/// magic, lap, seq, length, crc.
const RECORD_HEAD: usize = 4 + 8 + 8 + 4 + 4;

/// The journal's path beside the store file.
pub(crate) fn path_for(store: &Path) -> PathBuf {
    let mut name = store.as_os_str().to_owned();
    name.push(".journal");
    PathBuf::from(name)
}

// ---- the file's header and records --------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Eq)]
struct Header {
    id: String,
    lap: u64,
    first_seq: u64,
}

impl Header {
    /// Where this lap's header goes.
    fn slot(&self) -> u64 {
        (self.lap % 2) * SECTOR
    }

    /// The current header of a journal: the valid slot with the higher lap.
    fn current(bytes: &[u8]) -> std::result::Result<Header, &'static str> {
        let slot =
            |at: usize| bytes.get(at..at + SECTOR as usize).map_or(Err("it is shorter than its header"), Header::parse);
        match (slot(0), slot(SECTOR as usize)) {
            (Ok(a), Ok(b)) => Ok(if b.lap > a.lap { b } else { a }),
            (Ok(one), Err(_)) | (Err(_), Ok(one)) => Ok(one),
            (Err(what), Err(_)) => Err(what),
        }
    }

    fn bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(SECTOR as usize);
        out.extend_from_slice(&FILE_MAGIC);
        out.extend_from_slice(&FORMAT.to_le_bytes());
        out.extend_from_slice(&(self.id.len() as u32).to_le_bytes());
        out.extend_from_slice(self.id.as_bytes());
        out.extend_from_slice(&self.lap.to_le_bytes());
        out.extend_from_slice(&self.first_seq.to_le_bytes());
        let crc = crc32fast::hash(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out.resize(SECTOR as usize, 0);
        out
    }

    fn parse(bytes: &[u8]) -> std::result::Result<Header, &'static str> {
        let mut cursor = Cursor { bytes };
        if cursor.take(8) != Some(&FILE_MAGIC[..]) {
            return Err("it does not start with a Warden journal's magic number");
        }
        if cursor.u32() != Some(FORMAT) {
            return Err("its format is not one this build reads");
        }
        let len = cursor.u32().filter(|len| *len <= 256).ok_or("its header is damaged")? as usize;
        let id = cursor.take(len).and_then(|id| std::str::from_utf8(id).ok()).ok_or("its header is damaged")?;
        let lap = cursor.u64().ok_or("its header is damaged")?;
        let first_seq = cursor.u64().ok_or("its header is damaged")?;
        let covered = bytes.len() - cursor.bytes.len();
        let crc = cursor.u32().ok_or("its header is damaged")?;
        if crc32fast::hash(&bytes[..covered]) != crc {
            return Err("its header failed its checksum");
        }
        Ok(Header { id: id.to_owned(), lap, first_seq })
    }
}

/// A record's bytes, padded to whole sectors.
fn record_bytes(lap: u64, seq: u64, payload: &[u8]) -> Vec<u8> {
    let total = (RECORD_HEAD + payload.len()).div_ceil(SECTOR as usize) * SECTOR as usize;
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(&RECORD_MAGIC);
    out.extend_from_slice(&lap.to_le_bytes());
    out.extend_from_slice(&seq.to_le_bytes());
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    let mut crc = crc32fast::Hasher::new();
    crc.update(&out[4..]);
    crc.update(payload);
    out.extend_from_slice(&crc.finalize().to_le_bytes());
    out.extend_from_slice(payload);
    out.resize(total, 0);
    out
}

/// A valid record of `lap` at `offset`: its seq, payload and where the next one starts.
fn record_at(bytes: &[u8], offset: usize, lap: u64) -> Option<(u64, &[u8], usize)> {
    let head = bytes.get(offset..offset + RECORD_HEAD)?;
    if head[..4] != RECORD_MAGIC || u64::from_le_bytes(head[4..12].try_into().ok()?) != lap {
        return None;
    }
    let seq = u64::from_le_bytes(head[12..20].try_into().ok()?);
    let len = u32::from_le_bytes(head[20..24].try_into().ok()?) as usize;
    let stored = u32::from_le_bytes(head[24..28].try_into().ok()?);
    let payload = bytes.get(offset + RECORD_HEAD..(offset + RECORD_HEAD).checked_add(len)?)?;
    let mut crc = crc32fast::Hasher::new();
    crc.update(&head[4..24]);
    crc.update(payload);
    if crc.finalize() != stored {
        return None;
    }
    let next = (offset + RECORD_HEAD + len).div_ceil(SECTOR as usize) * SECTOR as usize;
    Some((seq, payload, next))
}

/// Read the lap of `header` from the whole journal `bytes`, or say where and why it is damaged.
/// A lap's records: each batch's seq and payload, in order.
type Records<'a> = Vec<(u64, &'a [u8])>;

/// The lap's valid records in order (a torn last write is not one of them).
fn read_lap<'a>(bytes: &'a [u8], header: &Header) -> std::result::Result<Records<'a>, (u64, String)> {
    let mut records = Vec::new();
    let mut offset = HEADER_BYTES as usize;
    let mut expected = header.first_seq;
    loop {
        if let Some((seq, payload, next)) = record_at(bytes, offset, header.lap) {
            if seq != expected {
                return Err((offset as u64, format!("the record holds batch {seq} where batch {expected} belongs")));
            }
            records.push((seq, payload));
            expected += 1;
            offset = next;
            continue;
        }
        // The end of the lap (zeros, an older lap, or a torn last write), unless a valid record
        // of the lap follows.
        let mut later = offset + SECTOR as usize;
        while later + RECORD_HEAD <= bytes.len() {
            if let Some((seq, _, _)) = record_at(bytes, later, header.lap) {
                return Err((
                    offset as u64,
                    format!(
                        "the record for batch {expected} is damaged, and a valid record (batch {seq}, at offset {later}) \
                         follows it"
                    ),
                ));
            }
            later += SECTOR as usize;
        }
        return Ok(records);
    }
}

// ---- the journal of an open store ---------------------------------------------------------------

struct Tail {
    lap: u64,
    /// The sequence number the next batch gets.
    next_seq: u64,
    /// Where the next record goes.
    offset: u64,
    /// The file's length.
    len: u64,
    /// Bytes held for the records of batches committed but not yet written (`reserve`).
    reserved: u64,
}

/// The journal of the store this process owns. Only the committer's journal stage (one record
/// at a time) appends.
pub(crate) struct Journal {
    _registered: Option<fork::Registered>,
    file: Box<dyn JournalFile>,
    path: PathBuf,
    id: String,
    withstands: Withstands,
    /// A lap's record bytes before a checkpoint, and the file's growth step.
    lap_bytes: u64,
    grow_bytes: u64,
    tail: Mutex<Tail>,
    /// The writer lost batches redb had not committed (they are in this journal): no mark may
    /// say the file holds them, so the next open replays them.
    behind: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Journal").field("path", &self.path).finish()
    }
}

fn io_fault(path: &Path, doing: &str, error: &std::io::Error) -> Error {
    Error::store(
        StoreFaultKind::of_io(error),
        format!("the store's journal {} failed while {doing}: {error}", path.display()),
    )
}

fn damaged(path: &Path, offset: u64, what: &str) -> Error {
    Error::store(
        StoreFaultKind::Damaged,
        format!(
        "the store's journal {} is damaged at offset {offset}: {what}. Nothing was decided from it and nothing was \
         replayed; keep the journal and the store as they are and restore both from a backup, or ask for help",
        path.display()
    ),
    )
}

/// The store's journal mark, if it has one.
pub(in crate::store) fn mark(rows: &impl RowRead) -> Result<Option<JournalMark>> {
    let key = [Part::Text(META_JOURNAL)];
    match rows.get(Table::Meta, &key)? {
        Some(bytes) => Ok(Some(decode(Table::Meta.name(), &KeyView(&key), &bytes)?)),
        None => Ok(None),
    }
}

fn put_mark(rows: &mut impl RowWrite, mark: &JournalMark) -> Result<()> {
    let key = [Part::Text(META_JOURNAL)];
    let bytes = encode(Table::Meta.name(), &KeyView(&key), mark)?;
    rows.put(Table::Meta, &key, &bytes, Put::Replace)
}

/// Apply the changes of one record to `rows`, idempotently (a put replaces, a delete of an
/// absent row is nothing).
fn replay(rows: &mut FileWrites<'_, '_>, payload: &[u8]) -> Option<Result<()>> {
    for change in changes(payload)? {
        let applied = match change {
            Change::Put(table, key, value) => rows.put(table, &key, value, Put::Replace),
            Change::Delete(table, key) => rows.delete(table, &key),
        };
        if let Err(error) = applied {
            return Some(Err(error));
        }
    }
    Some(Ok(()))
}

/// What a read-only open may know without writing: `Err` when the journal holds batches redb
/// does not (the store needs an owner's recovery first).
pub(crate) fn check_read_only(reads: &FileReads, store: &Path) -> Result<()> {
    let Some(mark) = mark(reads)? else { return Ok(()) };
    if mark.clean {
        return Ok(());
    }
    let path = path_for(store);
    let bytes = std::fs::read(&path).map_err(|e| io_fault(&path, "being read", &e))?;
    let (_, records) = checked_lap(&bytes, &path, &mark)?;
    if records.iter().any(|(seq, _)| *seq > mark.seq) {
        return Err(Error::store(
            StoreFaultKind::NeedsRecovery,
            format!(
                "the store {} needs recovery after a crash: its journal holds writes the file does not yet, which a \
             read-only user cannot apply. Open it once as a user who may write it",
                store.display()
            ),
        ));
    }
    Ok(())
}

impl Journal {
    /// Open the journal of the store at `store` (whose one writer the caller is), replay what
    /// redb lacks, checkpoint, and start a new lap.
    /// `fresh`: this open created the store (no file was at the path), so a journal already
    /// beside it was left by a store deleted before; it is set aside, never replayed.
    pub(crate) fn open(database: &Database, store: &Path, withstands: Withstands, fresh: bool) -> Result<Journal> {
        let path = path_for(store);
        let mark = mark(&FileReads::new(database.begin_read().map_err(fault)?))?;
        let (lap_bytes, grow_bytes) = disk::journal_sizing(&path);
        let mut existing = disk::open_journal(&path).map_err(|error| io_fault(&path, "being opened", &error))?;
        if fresh && mark.is_none() {
            if let Some((file, _)) = existing.take() {
                set_aside(file.as_ref(), &path)?;
            }
        }
        let (file, id, last, lap) = match (existing, mark) {
            (None, Some(mark)) if !mark.clean => {
                return Err(Error::store(
                    StoreFaultKind::Damaged,
                    format!(
                        "the store's journal {} is missing, and the store was not closed cleanly: writes that were \
                     answered may be only in it. Nothing was decided; put the journal back beside the store and open \
                     it again",
                        path.display()
                    ),
                ))
            }
            (None, mark) => {
                let id = match &mark {
                    Some(mark) => mark.id.clone(),
                    None => crate::action::new_id(crate::action::IdKind::Receipt)
                        .map_err(|e| Error::store(StoreFaultKind::Io, format!("no journal id for the store: {e}")))?,
                };
                let last = mark.as_ref().map_or(0, |mark| mark.seq);
                if mark.is_none() {
                    // The store names its journal before the journal exists: a crash between
                    // the two leaves a clean store without one (made again on the next open),
                    // never a journal its store disowns.
                    commit_mark(database, &JournalMark { id: id.clone(), seq: last, clean: true })?;
                }
                let mut bytes = Header { id: id.clone(), lap: 0, first_seq: last + 1 }.bytes();
                bytes.resize(grow_bytes as usize, 0);
                let created = disk::create_journal(&path, &bytes).map_err(|e| io_fault(&path, "being created", &e))?;
                (created, id, last, 0)
            }
            (Some(file), None) => {
                drop(file);
                return Err(Error::store(
                    StoreFaultKind::Damaged,
                    format!(
                    "{} is a journal, but the store {} has never had one: it belongs to another store (or the store \
                     was restored without it). Nothing was decided; move the journal away if it is not this store's \
                     (a store deleted and created again at the path sets its old journal aside by itself)",
                    path.display(),
                    store.display()
                ),
                ));
            }
            (Some(file), Some(mark)) => {
                let (last, lap) = recover(database, file.0.as_ref(), &path, &mark)?;
                (file, mark.id, last, lap)
            }
        };
        let (file, fd) = file;
        let len = file.len().map_err(|e| io_fault(&path, "being measured", &e))?;
        let registered = fd.map(fork::Registered::new).transpose()?;
        let journal = Journal {
            _registered: registered,
            file,
            path,
            id,
            withstands,
            lap_bytes,
            grow_bytes,
            tail: Mutex::new(Tail { lap, next_seq: last + 1, offset: HEADER_BYTES, len, reserved: 0 }),
            behind: std::sync::atomic::AtomicBool::new(false),
        };
        journal.checkpoint(database, false)?;
        Ok(journal)
    }

    fn tail(&self) -> Result<std::sync::MutexGuard<'_, Tail>> {
        self.tail
            .lock()
            .map_err(|_| Error::store(StoreFaultKind::Defect, "the store's journal was poisoned by a panic"))
    }

    /// Room in the lap for a batch of `payload` bytes, taken now for its record to come: the
    /// bytes held (to give to `append`), or `None` when it does not fit (the batch is then a
    /// checkpoint itself). Records still to be written hold their room, so a lap never
    /// overflows while batches wait for the journal.
    pub(crate) fn reserve(&self, payload: usize) -> Result<Option<u64>> {
        let mut tail = self.tail()?;
        let size = (RECORD_HEAD + payload).div_ceil(SECTOR as usize) as u64 * SECTOR;
        if tail.offset + tail.reserved + size > HEADER_BYTES + self.lap_bytes {
            return Ok(None);
        }
        tail.reserved += size;
        Ok(Some(size))
    }

    /// Append one record holding `payload` (the changes of one or more batches, in the order
    /// they committed), giving back the room `reserved` for them, and, under `power`, make it
    /// durable. One caller at a time (the committer's journal stage), and never while a
    /// record is unsynced: so at most the last record can be torn by a power loss.
    /// The tail is unlocked during the sync, so the next batch can reserve its room meanwhile.
    pub(crate) fn append(&self, payload: &[u8], reserved: u64) -> Result<()> {
        {
            let mut tail = self.tail()?;
            tail.reserved = tail.reserved.saturating_sub(reserved);
            let bytes = record_bytes(tail.lap, tail.next_seq, payload);
            let end = tail.offset + bytes.len() as u64;
            if end > tail.len {
                let grown = end.div_ceil(self.grow_bytes) * self.grow_bytes;
                let zeros = vec![0u8; (grown - tail.len) as usize];
                self.file.write_at(&zeros, tail.len).map_err(|e| io_fault(&self.path, "growing", &e))?;
                tail.len = grown;
            }
            self.file.write_at(&bytes, tail.offset).map_err(|e| io_fault(&self.path, "appending a batch", &e))?;
            tail.offset = end;
            tail.next_seq += 1;
        }
        if self.withstands == Withstands::Power {
            self.file.sync().map_err(|e| io_fault(&self.path, "syncing a batch", &e))?;
        }
        Ok(())
    }

    /// Write the mark for a durable commit in `rows`: redb will hold every batch so far (and
    /// the batch being written, when `including_this` — a batch that is a checkpoint itself).
    pub(crate) fn mark_in(&self, rows: &mut impl RowWrite, including_this: bool, clean: bool) -> Result<()> {
        put_mark(rows, &self.mark_now(including_this, clean)?)
    }

    /// The writer lost the batches it had applied since redb's last commit (they are in this
    /// journal): from now on no mark is written, so no checkpoint — not even the clean close —
    /// can claim the file holds them. The next open replays them.
    pub(crate) fn fell_behind(&self) {
        self.behind.store(true, std::sync::atomic::Ordering::Release);
    }

    /// The mark for a durable commit now (see `mark_in`).
    fn mark_now(&self, including_this: bool, clean: bool) -> Result<JournalMark> {
        if self.behind.load(std::sync::atomic::Ordering::Acquire) {
            return Err(Error::store(
                StoreFaultKind::Stopped,
                format!(
                "the store's writer lost batches the file does not hold yet; its journal {} keeps them for the next \
                 open to replay, so no checkpoint is written now. Open the store again",
                self.path.display()
            ),
            ));
        }
        let tail = self.tail()?;
        let seq = if including_this { tail.next_seq } else { tail.next_seq - 1 };
        Ok(JournalMark { id: self.id.clone(), seq, clean })
    }

    /// After a durable commit that included the next batch itself: a new lap after it.
    pub(crate) fn checkpointed_with_this(&self) -> Result<()> {
        let mut tail = self.tail()?;
        tail.next_seq += 1;
        self.new_lap(&mut tail)
    }

    /// A checkpoint of its own: one durable commit of the mark, then a new lap.
    pub(crate) fn checkpoint(&self, database: &Database, clean: bool) -> Result<()> {
        commit_mark(database, &self.mark_now(false, clean)?)?;
        let mut tail = self.tail()?;
        self.new_lap(&mut tail)
    }

    /// Start lap `lap + 1` at the header: written and synced before its first record, so an
    /// older lap's records after the new lap's end are never taken for the new lap's.
    fn new_lap(&self, tail: &mut Tail) -> Result<()> {
        let header = Header { id: self.id.clone(), lap: tail.lap + 1, first_seq: tail.next_seq };
        self.file.write_at(&header.bytes(), header.slot()).map_err(|e| io_fault(&self.path, "starting a lap", &e))?;
        self.file.sync().map_err(|e| io_fault(&self.path, "starting a lap", &e))?;
        tail.lap += 1;
        tail.offset = HEADER_BYTES;
        tail.len = tail.len.max(HEADER_BYTES);
        Ok(())
    }
}

/// A journal left beside a new store by a deleted one: renamed to `STORE.journal.of-ID` (its
/// id, or the time when its header is unreadable), kept for whoever wants what it held.
fn set_aside(file: &dyn JournalFile, path: &Path) -> Result<()> {
    let id = file.read_all().ok().and_then(|bytes| Header::current(&bytes).ok()).map(|header| header.id);
    let id = id.filter(|id| id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')).unwrap_or_else(|| {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros());
        format!("unreadable-{now}")
    });
    let mut aside = path.as_os_str().to_owned();
    aside.push(format!(".of-{id}"));
    disk::rename(path, Path::new(&aside)).map_err(|e| io_fault(path, "being set aside (a deleted store's)", &e))
}

/// A durable commit of the mark alone.
fn commit_mark(database: &Database, mark: &JournalMark) -> Result<()> {
    let txn = database.begin_write().map_err(fault)?;
    {
        let touching = std::cell::Cell::new("");
        put_mark(&mut FileWrites::open(&txn, &touching), mark)?;
    }
    txn.commit().map_err(fault)
}

/// The current lap of the journal `bytes` at `path`, checked against the store's mark: the
/// journal is the store's own, and its lap starts no later than the batch after the mark.
fn checked_lap<'a>(bytes: &'a [u8], path: &Path, mark: &JournalMark) -> Result<(Header, Records<'a>)> {
    let header = Header::current(bytes).map_err(|what| damaged(path, 0, what))?;
    if header.id != mark.id {
        return Err(Error::store(
            StoreFaultKind::Damaged,
            format!(
            "the journal {} belongs to another store (journal {}, the store's is {}); nothing was decided. Put this \
             store's own journal beside it",
            path.display(),
            header.id,
            mark.id
        ),
        ));
    }
    if header.first_seq > mark.seq + 1 {
        return Err(damaged(
            path,
            0,
            &format!(
                "its lap starts at batch {} but the store holds batches only up to {}: batches in between are missing",
                header.first_seq, mark.seq
            ),
        ));
    }
    let records = read_lap(bytes, &header).map_err(|(offset, what)| damaged(path, offset, &what))?;
    Ok((header, records))
}

/// Replay the records redb lacks, in one durable transaction that also moves the mark: the
/// last batch redb holds afterwards, and the journal's lap.
fn recover(database: &Database, file: &dyn JournalFile, path: &Path, mark: &JournalMark) -> Result<(u64, u64)> {
    let bytes = file.read_all().map_err(|e| io_fault(path, "being read", &e))?;
    let (header, records) = checked_lap(&bytes, path, mark)?;
    let missing: Vec<&(u64, &[u8])> = records.iter().filter(|(seq, _)| *seq > mark.seq).collect();
    let Some(&&(last, _)) = missing.last() else { return Ok((mark.seq, header.lap)) };
    let txn = database.begin_write().map_err(fault)?;
    {
        let touching = std::cell::Cell::new("");
        let mut rows = FileWrites::open(&txn, &touching);
        for (seq, payload) in &missing {
            if replay(&mut rows, payload).transpose()?.is_none() {
                return Err(damaged(
                    path,
                    0,
                    &format!("the record of batch {seq} passed its checksum but does not parse"),
                ));
            }
        }
        put_mark(&mut rows, &JournalMark { id: mark.id.clone(), seq: last, clean: false })?;
    }
    txn.commit().map_err(fault)?;
    Ok((last, header.lap))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> Header {
        Header { id: "rcp_test".into(), lap: 7, first_seq: 10 }
    }

    fn journal(records: &[(u64, u64, &[u8])]) -> Vec<u8> {
        let mut bytes = header().bytes();
        bytes.resize(HEADER_BYTES as usize, 0);
        for (lap, seq, payload) in records {
            bytes.extend(record_bytes(*lap, *seq, payload));
        }
        bytes.resize(bytes.len() + 4 * SECTOR as usize, 0);
        bytes
    }

    #[test]
    fn a_lap_ends_at_zeros_or_an_older_lap_and_a_torn_last_record_is_dropped() {
        let bytes = journal(&[(7, 10, b"a"), (7, 11, b"b"), (6, 3, b"old")]);
        let lap = read_lap(&bytes, &header()).expect("reads");
        assert_eq!(lap, vec![(10, &b"a"[..]), (11, &b"b"[..])]);
        // The last record torn: dropped, and said so.
        let mut torn = journal(&[(7, 10, b"a"), (7, 11, b"b")]);
        let last = HEADER_BYTES as usize + SECTOR as usize;
        torn[last + RECORD_HEAD] ^= 1;
        let lap = read_lap(&torn, &header()).expect("reads");
        assert_eq!(lap, vec![(10, &b"a"[..])]);
    }

    #[test]
    fn a_damaged_record_with_a_valid_one_after_it_and_a_gap_are_faults_naming_the_offset() {
        let mut flipped = journal(&[(7, 10, b"a"), (7, 11, b"b"), (7, 12, b"c")]);
        let second = HEADER_BYTES as usize + SECTOR as usize;
        flipped[second + RECORD_HEAD] ^= 0x40;
        let (offset, what) = read_lap(&flipped, &header()).unwrap_err();
        assert_eq!(offset, second as u64);
        assert!(what.contains("batch 11 is damaged") && what.contains("batch 12"), "{what}");
        let gap = journal(&[(7, 10, b"a"), (7, 12, b"c")]);
        let (offset, what) = read_lap(&gap, &header()).unwrap_err();
        assert_eq!(offset, second as u64);
        assert!(what.contains("batch 12 where batch 11"), "{what}");
        // The twin: the same records in sequence read whole.
        assert_eq!(read_lap(&journal(&[(7, 10, b"a"), (7, 11, b"b")]), &header()).expect("reads").len(), 2);
    }

    #[test]
    fn the_current_header_is_the_valid_slot_with_the_higher_lap_so_a_torn_header_leaves_the_last() {
        let older = Header { lap: 6, ..header() };
        let mut bytes = vec![0u8; HEADER_BYTES as usize];
        bytes[older.slot() as usize..][..SECTOR as usize].copy_from_slice(&older.bytes());
        bytes[header().slot() as usize..][..SECTOR as usize].copy_from_slice(&header().bytes());
        assert_eq!(Header::current(&bytes), Ok(header()));
        // Lap 7's header torn: lap 6's is current.
        bytes[header().slot() as usize + 20] ^= 1;
        assert_eq!(Header::current(&bytes), Ok(older.clone()));
        // Both damaged: refused.
        bytes[older.slot() as usize + 20] ^= 1;
        assert!(Header::current(&bytes).is_err());
    }

    #[test]
    fn a_header_is_refused_for_every_damaged_byte_it_checks() {
        let bytes = header().bytes();
        assert_eq!(Header::parse(&bytes), Ok(header()));
        let covered = 8 + 4 + 4 + "rcp_test".len() + 8 + 8 + 4;
        for at in 0..covered {
            let mut damaged = bytes.clone();
            damaged[at] ^= 1;
            assert!(Header::parse(&damaged).is_err(), "byte {at}");
        }
    }
}
