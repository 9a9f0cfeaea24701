//! What the file engine asks of the disk, in one place: redb's pages (a `StorageBackend`) and
//! the journal's appends go through here, so that this process's writes and syncs are counted
//! (`io_counters`, for `warden bench`) and so that the crash tests can put a simulated disk
//! under both (`sim`, in test builds).

use std::fs::{File, OpenOptions};
use std::io::ErrorKind;
use std::ops::Bound;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use redb::backends::FileBackend;
use redb::{BackendError, DatabaseError, StorageBackend};

/// redb's I/O error type with the standard library (its `std` feature).
type BackendIoError = std::io::Error;

#[cfg(test)]
pub(crate) mod sim;

static SYNCS: AtomicU64 = AtomicU64::new(0);
static WRITES: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);

/// This process's writes to file stores (redb's pages and the journals) since it started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IoCounters {
    /// `fdatasync` calls.
    pub syncs: u64,
    /// Write calls.
    pub writes: u64,
    /// Bytes written.
    pub bytes: u64,
}

/// The counters now (subtract two readings to measure a stretch of work).
pub fn io_counters() -> IoCounters {
    IoCounters {
        syncs: SYNCS.load(Ordering::Relaxed),
        writes: WRITES.load(Ordering::Relaxed),
        bytes: BYTES.load(Ordering::Relaxed),
    }
}

fn wrote(bytes: usize) {
    WRITES.fetch_add(1, Ordering::Relaxed);
    BYTES.fetch_add(bytes as u64, Ordering::Relaxed);
}

fn synced() {
    SYNCS.fetch_add(1, Ordering::Relaxed);
}

/// The journal's file: positioned writes, one sync, its length, all of it read back.
pub(crate) trait JournalFile: Send + Sync + std::fmt::Debug {
    fn write_at(&self, data: &[u8], offset: u64) -> std::io::Result<()>;
    fn sync(&self) -> std::io::Result<()>;
    fn len(&self) -> std::io::Result<u64>;
    fn read_all(&self) -> std::io::Result<Vec<u8>>;
}

impl JournalFile for File {
    fn write_at(&self, data: &[u8], offset: u64) -> std::io::Result<()> {
        self.write_all_at(data, offset)?;
        wrote(data.len());
        Ok(())
    }

    fn sync(&self) -> std::io::Result<()> {
        self.sync_data()?;
        synced();
        Ok(())
    }

    fn len(&self) -> std::io::Result<u64> {
        Ok(self.metadata()?.len())
    }

    fn read_all(&self) -> std::io::Result<Vec<u8>> {
        let mut bytes = vec![0u8; JournalFile::len(self)? as usize];
        self.read_exact_at(&mut bytes, 0)?;
        Ok(bytes)
    }
}

/// redb's backend, counted: the file's (or, in test builds, a simulated disk's).
#[derive(Debug)]
pub(crate) struct Counted(Box<dyn StorageBackend>);

/// The backend for the store file at `path`, opened as `file` (whose descriptor the caller keeps
/// registered for fork safety).
pub(crate) fn redb_backend(path: &Path, file: File) -> Result<Counted, DatabaseError> {
    #[cfg(test)]
    if let Some(disk) = sim::serving(path) {
        return Ok(Counted(Box::new(sim::SimBackend::adopt(disk, path, file)?)));
    }
    let _ = path;
    counted_file(file)
}

/// A real file's backend, counted (a new store is built on the real file system, always).
pub(crate) fn counted_file(file: File) -> Result<Counted, DatabaseError> {
    Ok(Counted(Box::new(FileBackend::new(file)?)))
}

/// The file grows by this much, zeroed, when a record does not fit (a new journal is this long).
pub(crate) const GROW_BYTES: u64 = 256 << 10;
/// A lap ends with a checkpoint once its records would pass this many bytes.
pub(crate) const LAP_BYTES: u64 = 8 << 20;

/// How a journal's laps are sized: a lap's record bytes before a checkpoint, and how much the
/// file grows by. Tests on the simulated disk use small ones, to wrap within a short workload.
pub(crate) fn journal_sizing(path: &Path) -> (u64, u64) {
    #[cfg(test)]
    if let Some(disk) = sim::serving(path) {
        return disk.journal_sizing();
    }
    let _ = path;
    (LAP_BYTES, GROW_BYTES)
}

/// A journal's file as opened, with its descriptor (none on a simulated disk).
pub(crate) type OpenedJournal = (Box<dyn JournalFile>, Option<RawFd>);

/// The journal at `path`, if there is one.
pub(crate) fn open_journal(path: &Path) -> std::io::Result<Option<OpenedJournal>> {
    #[cfg(test)]
    if let Some(disk) = sim::serving(path) {
        let journal = sim::SimJournal::new(disk.clone(), path);
        if !disk.exists(path) {
            // The first open on this disk takes the real file's bytes, if there is one.
            match std::fs::read(path) {
                Ok(bytes) => journal.create(&bytes)?,
                Err(error) if error.kind() == ErrorKind::NotFound => return Ok(None),
                Err(error) => return Err(error),
            }
        }
        return Ok(Some((Box::new(journal), None)));
    }
    match OpenOptions::new().read(true).write(true).open(path) {
        Ok(file) => {
            let fd = file.as_raw_fd();
            Ok(Some((Box::new(file), Some(fd))))
        }
        Err(error) if error.kind() == ErrorKind::NotFound => Ok(None),
        Err(error) => Err(error),
    }
}

/// Rename a journal (the directory synced after).
pub(crate) fn rename(from: &Path, to: &Path) -> std::io::Result<()> {
    #[cfg(test)]
    if let Some(disk) = sim::serving(from) {
        return disk.rename(from, to);
    }
    std::fs::rename(from, to)?;
    if let Some(directory) = to.parent().filter(|p| !p.as_os_str().is_empty()) {
        File::open(directory)?.sync_all()?;
    }
    Ok(())
}

/// A new journal at `path` holding `bytes`, durable with its directory entry.
pub(crate) fn create_journal(path: &Path, bytes: &[u8]) -> std::io::Result<OpenedJournal> {
    #[cfg(test)]
    if let Some(disk) = sim::serving(path) {
        let journal = sim::SimJournal::new(disk, path);
        journal.create(bytes)?;
        return Ok((Box::new(journal), None));
    }
    let file = OpenOptions::new().read(true).write(true).create_new(true).open(path)?;
    JournalFile::write_at(&file, bytes, 0)?;
    file.sync_all()?;
    synced();
    if let Some(directory) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        File::open(directory)?.sync_all()?;
    }
    let fd = file.as_raw_fd();
    Ok((Box::new(file), Some(fd)))
}

impl StorageBackend for Counted {
    fn len(&self) -> Result<u64, BackendIoError> {
        self.0.len()
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), BackendIoError> {
        self.0.read(offset, out)
    }

    fn set_len(&self, len: u64) -> Result<(), BackendIoError> {
        self.0.set_len(len)
    }

    fn sync_data(&self) -> Result<(), BackendIoError> {
        self.0.sync_data()?;
        synced();
        Ok(())
    }

    fn write(&self, offset: u64, data: &[u8]) -> Result<(), BackendIoError> {
        self.0.write(offset, data)?;
        wrote(data.len());
        Ok(())
    }

    fn close(&self) -> Result<(), BackendIoError> {
        self.0.close()
    }

    fn try_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.0.try_lock_range(start, end)
    }

    fn try_lock_shared_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.0.try_lock_shared_range(start, end)
    }

    fn lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.0.lock_range(start, end)
    }

    fn lock_shared_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.0.lock_shared_range(start, end)
    }

    fn unlock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.0.unlock_range(start, end)
    }

    fn query_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.0.query_lock_range(start, end)
    }
}
