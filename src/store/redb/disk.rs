//! What the file engine asks of the disk, in one place: redb's pages (a `StorageBackend`) and
//! the journal's appends go through here, so that this process's writes and syncs are counted
//! (`io_counters`, for `warden bench`) and so that the crash tests can put a simulated disk
//! under both (`sim`, in test builds).

use std::fs::File;
use std::ops::Bound;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, Ordering};

use redb::backends::FileBackend;
use redb::{BackendError, StorageBackend};

/// redb's I/O error type with the standard library (its `std` feature).
type BackendIoError = std::io::Error;

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
pub(crate) trait JournalFile: Send + Sync {
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

/// redb's file backend, counted.
#[derive(Debug)]
pub(crate) struct Counted(pub FileBackend);

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
