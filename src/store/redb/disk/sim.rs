//! A simulated disk for crash tests (ALICE, CrashMonkey): every file keeps what was synced and
//! the writes since, which live only in a simulated page cache until the file is synced. A
//! power loss keeps the synced bytes and any subset of the unsynced writes, torn at 512-byte
//! boundaries; a process crash keeps everything written. A test registers a directory; the
//! store's redb file and journal under it go through here, and the test's hook sees every
//! write and sync with the disk's state at that instant.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Error, ErrorKind, Result};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use redb::StorageBackend;

use super::JournalFile;

/// One file: what a power loss cannot take, what the running process sees, and what lies
/// between.
#[derive(Clone, Debug, Default)]
pub(crate) struct SimFile {
    pub durable: Arc<Vec<u8>>,
    pub cache: Vec<u8>,
    /// Since the last sync, in order: a write at an offset, or a new length.
    pub pending: Vec<Pending>,
}

#[derive(Clone, Debug)]
pub(crate) enum Pending {
    Write(u64, Vec<u8>),
    Len(u64),
}

/// What the hook is told about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Event {
    /// A write just reached the page cache.
    Wrote,
    /// A sync is about to make a file's pending writes durable (it has not yet).
    Syncing,
}

type Hook = Box<dyn FnMut(Event, &Path, &BTreeMap<PathBuf, SimFile>) + Send>;

#[derive(Default)]
struct State {
    files: BTreeMap<PathBuf, SimFile>,
    hook: Option<Hook>,
    /// Writes fail with ENOSPC once this many more bytes were written.
    space_left: Option<u64>,
    /// Writes and syncs of this file fail with EIO (a failing device under one file).
    refused: Option<PathBuf>,
}

/// A simulated disk serving the files under one directory.
pub(crate) struct SimDisk {
    root: PathBuf,
    state: Mutex<State>,
    journal_sizing: (u64, u64),
}

static DISKS: Mutex<Vec<Arc<SimDisk>>> = Mutex::new(Vec::new());

/// Unregisters its disk when dropped.
pub(crate) struct Installed(Arc<SimDisk>);

impl Drop for Installed {
    fn drop(&mut self) {
        if let Ok(mut disks) = DISKS.lock() {
            disks.retain(|disk| !Arc::ptr_eq(disk, &self.0));
        }
    }
}

/// The disk serving `path`, if a test registered one for a directory above it.
pub(crate) fn serving(path: &Path) -> Option<Arc<SimDisk>> {
    let disks = DISKS.lock().ok()?;
    disks.iter().find(|disk| path.starts_with(&disk.root)).cloned()
}

fn poisoned() -> Error {
    Error::other("the simulated disk was poisoned by a panic")
}

impl SimDisk {
    /// Serve the store files under `root` (a journal's lap of `lap_bytes`, growing by
    /// `grow_bytes`) until the returned guard drops.
    pub(crate) fn install(root: &Path, lap_bytes: u64, grow_bytes: u64) -> (Arc<SimDisk>, Installed) {
        let disk = Arc::new(SimDisk {
            root: root.to_owned(),
            state: Mutex::new(State::default()),
            journal_sizing: (lap_bytes, grow_bytes),
        });
        DISKS.lock().expect("disks").push(disk.clone());
        (disk.clone(), Installed(disk))
    }

    pub(crate) fn journal_sizing(&self) -> (u64, u64) {
        self.journal_sizing
    }

    /// Call `hook` on every write and before every sync, with the disk's state.
    pub(crate) fn set_hook(&self, hook: impl FnMut(Event, &Path, &BTreeMap<PathBuf, SimFile>) + Send + 'static) {
        self.state.lock().expect("state").hook = Some(Box::new(hook));
    }

    /// Refuse writes with ENOSPC once `bytes` more were written (`None`: never).
    pub(crate) fn set_space_left(&self, bytes: Option<u64>) {
        self.state.lock().expect("state").space_left = bytes;
    }

    /// Fail every write and sync of `path` with EIO from now on (`None`: none).
    pub(crate) fn refuse_writes_to(&self, path: Option<&Path>) {
        self.state.lock().expect("state").refused = path.map(Path::to_owned);
    }

    /// Every file as a process that opens it now would read it (the page cache included).
    pub(crate) fn cached_files(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        let state = self.state.lock().expect("state");
        state.files.iter().map(|(path, file)| (path.clone(), file.cache.clone())).collect()
    }

    pub(crate) fn exists(&self, path: &Path) -> bool {
        self.state.lock().is_ok_and(|state| state.files.contains_key(path))
    }

    fn with<T>(&self, path: &Path, work: impl FnOnce(&mut SimFile) -> Result<T>) -> Result<T> {
        let mut state = self.state.lock().map_err(|_| poisoned())?;
        let file =
            state.files.get_mut(path).ok_or_else(|| Error::new(ErrorKind::NotFound, "no such simulated file"))?;
        work(file)
    }

    /// A file that exists (durably) on this disk from now on.
    pub(crate) fn create(&self, path: &Path, bytes: Vec<u8>) -> Result<()> {
        let mut state = self.state.lock().map_err(|_| poisoned())?;
        if state.files.contains_key(path) {
            return Err(Error::new(ErrorKind::AlreadyExists, "the simulated file exists"));
        }
        // Created, written and synced with its directory: durable at once.
        state
            .files
            .insert(path.to_owned(), SimFile { durable: Arc::new(bytes.clone()), cache: bytes, pending: Vec::new() });
        Ok(())
    }

    /// Rename a file, durably (as a rename with its directory synced).
    pub(crate) fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        let mut state = self.state.lock().map_err(|_| poisoned())?;
        let file = state.files.remove(from).ok_or_else(|| Error::new(ErrorKind::NotFound, "no such simulated file"))?;
        state.files.insert(to.to_owned(), file);
        Ok(())
    }

    fn write(&self, path: &Path, offset: u64, data: &[u8]) -> Result<()> {
        let mut state = self.state.lock().map_err(|_| poisoned())?;
        if state.refused.as_deref() == Some(path) {
            return Err(Error::from_raw_os_error(5)); // EIO
        }
        if let Some(left) = &mut state.space_left {
            if *left < data.len() as u64 {
                return Err(Error::from_raw_os_error(28)); // ENOSPC
            }
            *left -= data.len() as u64;
        }
        let file =
            state.files.get_mut(path).ok_or_else(|| Error::new(ErrorKind::NotFound, "no such simulated file"))?;
        let end = offset as usize + data.len();
        if file.cache.len() < end {
            file.cache.resize(end, 0);
        }
        file.cache[offset as usize..end].copy_from_slice(data);
        file.pending.push(Pending::Write(offset, data.to_vec()));
        let State { files, hook, .. } = &mut *state;
        if let Some(hook) = hook {
            hook(Event::Wrote, path, files);
        }
        Ok(())
    }

    fn set_len(&self, path: &Path, len: u64) -> Result<()> {
        self.with(path, |file| {
            file.cache.resize(len as usize, 0);
            file.pending.push(Pending::Len(len));
            Ok(())
        })
    }

    fn sync(&self, path: &Path) -> Result<()> {
        let mut state = self.state.lock().map_err(|_| poisoned())?;
        if state.refused.as_deref() == Some(path) {
            return Err(Error::from_raw_os_error(5)); // EIO
        }
        let State { files, hook, .. } = &mut *state;
        if files.get(path).is_some_and(|file| !file.pending.is_empty()) {
            if let Some(hook) = hook {
                hook(Event::Syncing, path, files);
            }
        }
        let file = files.get_mut(path).ok_or_else(|| Error::new(ErrorKind::NotFound, "no such simulated file"))?;
        if !file.pending.is_empty() {
            file.durable = Arc::new(file.cache.clone());
            file.pending.clear();
        }
        Ok(())
    }

    fn read(&self, path: &Path, offset: u64, out: &mut [u8]) -> Result<()> {
        self.with(path, |file| {
            let end = offset as usize + out.len();
            let bytes = file.cache.get(offset as usize..end).ok_or_else(|| Error::from(ErrorKind::UnexpectedEof))?;
            out.copy_from_slice(bytes);
            Ok(())
        })
    }

    fn len(&self, path: &Path) -> Result<u64> {
        self.with(path, |file| Ok(file.cache.len() as u64))
    }
}

/// What a power loss leaves of `file`: its durable bytes, then each pending write's 512-byte
/// sectors that `keep(write, sector)` keeps, and each new length `keep(write, 0)` keeps.
pub(crate) fn after_power_loss(file: &SimFile, mut keep: impl FnMut(usize, usize) -> bool) -> Vec<u8> {
    let mut bytes = file.durable.as_ref().clone();
    for (index, pending) in file.pending.iter().enumerate() {
        match pending {
            Pending::Len(len) => {
                if keep(index, 0) {
                    bytes.resize(*len as usize, 0);
                }
            }
            Pending::Write(offset, data) => {
                // Sectors of the device: a write not aligned to them tears at their boundaries.
                let mut at = *offset as usize;
                let end = at + data.len();
                while at < end {
                    let sector_end = ((at / 512) + 1) * 512;
                    let piece = at..sector_end.min(end);
                    if keep(index, at / 512) {
                        if bytes.len() < piece.end {
                            bytes.resize(piece.end, 0);
                        }
                        bytes[piece.clone()]
                            .copy_from_slice(&data[piece.start - *offset as usize..piece.end - *offset as usize]);
                    }
                    at = piece.end;
                }
            }
        }
    }
    bytes
}

/// redb's backend on the simulated disk. The real file it was opened from stays open (its
/// descriptor is registered for fork safety) but is never written.
#[derive(Debug)]
pub(crate) struct SimBackend {
    disk: Arc<SimDisk>,
    path: PathBuf,
    _file: File,
}

impl std::fmt::Debug for SimDisk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimDisk").field("root", &self.root).finish()
    }
}

impl SimBackend {
    /// Serve `path` from the disk, which takes the real file's bytes the first time.
    pub(crate) fn adopt(
        disk: Arc<SimDisk>,
        path: &Path,
        file: File,
    ) -> std::result::Result<SimBackend, redb::DatabaseError> {
        if !disk.exists(path) {
            let bytes = std::fs::read(path).map_err(|e| redb::DatabaseError::Storage(redb::StorageError::Io(e)))?;
            disk.create(path, bytes).map_err(|e| redb::DatabaseError::Storage(redb::StorageError::Io(e)))?;
        }
        Ok(SimBackend { disk, path: path.to_owned(), _file: file })
    }
}

impl StorageBackend for SimBackend {
    fn len(&self) -> Result<u64> {
        self.disk.len(&self.path)
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> Result<()> {
        self.disk.read(&self.path, offset, out)
    }

    fn set_len(&self, len: u64) -> Result<()> {
        self.disk.set_len(&self.path, len)
    }

    fn sync_data(&self) -> Result<()> {
        self.disk.sync(&self.path)
    }

    fn write(&self, offset: u64, data: &[u8]) -> Result<()> {
        self.disk.write(&self.path, offset, data)
    }
    // Locks: unsupported (the default), which redb's exclusive single-writer mode accepts.
}

/// The journal on the simulated disk.
#[derive(Debug)]
pub(crate) struct SimJournal {
    disk: Arc<SimDisk>,
    path: PathBuf,
}

impl SimJournal {
    pub(crate) fn new(disk: Arc<SimDisk>, path: &Path) -> SimJournal {
        SimJournal { disk, path: path.to_owned() }
    }

    pub(crate) fn create(&self, bytes: &[u8]) -> Result<()> {
        self.disk.create(&self.path, bytes.to_vec())
    }
}

impl JournalFile for SimJournal {
    fn write_at(&self, data: &[u8], offset: u64) -> Result<()> {
        self.disk.write(&self.path, offset, data)
    }

    fn sync(&self) -> Result<()> {
        self.disk.sync(&self.path)
    }

    fn len(&self) -> Result<u64> {
        self.disk.len(&self.path)
    }

    fn read_all(&self) -> Result<Vec<u8>> {
        let len = self.disk.len(&self.path)?;
        let mut bytes = vec![0u8; len as usize];
        self.disk.read(&self.path, 0, &mut bytes)?;
        Ok(bytes)
    }
}
