//! The store file on disk: what may be opened, how a new one comes into being, and whether the
//! path still names the file that is open.
//!
//! A store is created only when no file exists at the path, and never in place: the database
//! and its schema are written to a temporary file in the same directory, synced, linked to the
//! path (which fails if something appeared there meanwhile), and the directory synced. A crash
//! or a full disk at any point leaves either no store or a complete one, never a partial file
//! that later opens would refuse. Any existing file that is not a Warden store — empty, not a
//! redb database, or a redb database with rows but no Warden schema — is refused, so that a
//! damaged or replaced store is a fault, never a fresh start.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use redb::{Builder, Database, DatabaseError};

use crate::error::{Error, InvalidInputKind, Result, StoreFaultKind};
use crate::store::fork;

/// Redb's page cache per process; the working set of a kernel is small.
const CACHE_BYTES: usize = 32 * 1024 * 1024;

/// The first bytes of every redb file.
const REDB_MAGIC: [u8; 9] = [b'r', b'e', b'd', b'b', 0x1A, 0x0A, 0xA9, 0x0D, 0x0A];

/// A file's identity: (device, inode).
pub(crate) type FileId = (u64, u64);

pub(crate) fn identity(path: &Path) -> Option<FileId> {
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// The message for a path that holds something other than a Warden store.
pub(crate) fn not_a_store(path: &Path, what: &str) -> Error {
    Error::store(
        StoreFaultKind::NotAStore,
        format!(
            "{} is not a Warden store ({what}); Warden creates a store only where no file exists, so it will not \
         overwrite this one. Pass the path of the store, or remove the file if it is yours to discard",
            path.display()
        ),
    )
}

/// Checks what is at `path` before it is opened: `Ok(true)` when a redb file is there,
/// `Ok(false)` when nothing is, and a refusal for anything else.
pub(crate) fn inspect(path: &Path) -> Result<bool> {
    let metadata = match std::fs::metadata(path) {
        Ok(metadata) => metadata,
        Err(error) if error.kind() == ErrorKind::NotFound => return Ok(false),
        Err(error) => {
            return Err(Error::store(StoreFaultKind::Io, format!("cannot read the store {}: {error}", path.display())))
        }
    };
    if !metadata.is_file() {
        return Err(not_a_store(path, "it is not a regular file"));
    }
    if metadata.len() == 0 {
        return Err(not_a_store(path, "the file is empty (0 bytes)"));
    }
    let mut head = [0u8; REDB_MAGIC.len()];
    let mut file = File::open(path).map_err(|e| access_error(path, &e))?;
    match file.read_exact(&mut head) {
        Ok(()) if head == REDB_MAGIC => Ok(true),
        Ok(()) => Err(not_a_store(path, "it is not a redb database: the magic number is missing")),
        Err(_) => Err(not_a_store(path, "it is shorter than a redb header")),
    }
}

/// A permission problem or another I/O error opening the store, named for the store.
pub(crate) fn access_error(path: &Path, error: &std::io::Error) -> Error {
    match error.kind() {
        ErrorKind::PermissionDenied => Error::store(
            StoreFaultKind::Permission,
            format!(
            "permission denied opening the store {}: {error}. Run as a user who may read (and, to change it, write) \
             the store and its directory",
            path.display()
        ),
        ),
        _ => Error::store(StoreFaultKind::Io, format!("cannot open the store {}: {error}", path.display())),
    }
}

/// An open redb database this process owns. In a forked child it is leaked, never dropped:
/// dropping would close descriptor numbers the child may have reused.
pub(crate) struct Db {
    /// Declared first so it unregisters before the database closes the descriptor.
    registered: fork::Registered,
    db: Option<Database>,
    /// The write-ahead journal, once the owner attached it (`attach_journal`).
    journal: Option<super::journal::Journal>,
    generation: u64,
    path: PathBuf,
    identity: FileId,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db").field("path", &self.path).finish()
    }
}

impl Db {
    /// Opens the redb file at `path` as its one writer. The caller holds the store's owner
    /// lock and has checked the file with `inspect`.
    pub(crate) fn open_existing(path: &Path) -> Result<Db> {
        let file = OpenOptions::new().read(true).write(true).open(path).map_err(|e| access_error(path, &e))?;
        let identity = {
            let metadata = file.metadata().map_err(|e| access_error(path, &e))?;
            (metadata.dev(), metadata.ino())
        };
        let registered = fork::Registered::new(file.as_raw_fd())?;
        let backend = super::disk::redb_backend(path, file).map_err(|e| open_error(path, e))?;
        let db =
            Builder::new().set_cache_size(CACHE_BYTES).create_with_backend(backend).map_err(|e| open_error(path, e))?;
        Ok(Db {
            registered,
            db: Some(db),
            journal: None,
            generation: fork::generation(),
            path: path.to_owned(),
            identity,
        })
    }

    /// Recover from the store's journal (creating it when the store has none) and write every
    /// later batch through it.
    /// `fresh`: this open created the store file.
    pub(crate) fn attach_journal(&mut self, withstands: crate::store::Withstands, fresh: bool) -> Result<()> {
        let journal = super::journal::Journal::open(self.database()?, &self.path, withstands, fresh)?;
        self.journal = Some(journal);
        Ok(())
    }

    /// This process is a forked child of the one that opened the file: nothing of it may be
    /// written or closed here.
    pub(crate) fn forked(&self) -> bool {
        self.generation != fork::generation()
    }

    pub(crate) fn journal(&self) -> Option<&super::journal::Journal> {
        self.journal.as_ref()
    }

    pub(crate) fn database(&self) -> Result<&Database> {
        self.db.as_ref().ok_or_else(|| Error::store(StoreFaultKind::Stopped, "the store was closed"))
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn identity(&self) -> FileId {
        self.identity
    }

    /// Whether the path still names the file that is open. A store deleted or replaced under
    /// an open handle must not keep taking writes into an unlinked inode while another process
    /// starts a fresh store at the path.
    pub(crate) fn check_still_there(&self) -> Result<()> {
        match identity(&self.path) {
            Some(now) if now == self.identity => Ok(()),
            Some(_) => Err(Error::store(
                StoreFaultKind::Damaged,
                format!(
                    "the store file {} was replaced by another file while it was open; nothing was written. Every \
                 handle on it refuses further calls: find out who replaced it, then open the store again",
                    self.path.display()
                ),
            )),
            None => Err(Error::store(
                StoreFaultKind::Damaged,
                format!(
                    "the store file {} was deleted while it was open; nothing was written. Every handle on it refuses \
                 further calls: restore the store (or, if it is meant to be gone, open a new one)",
                    self.path.display()
                ),
            )),
        }
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        if self.generation != fork::generation() {
            std::mem::forget(self.db.take());
            std::mem::forget(self.journal.take());
            self.registered.disarm();
            return;
        }
        // A clean close: the file holds every batch, and says so, so the journal is not needed
        // to open it again. (Skipped when the file is gone or replaced: nothing more is written.)
        if let (Some(journal), Some(database)) = (self.journal.take(), self.db.as_ref()) {
            if self.check_still_there().is_ok() {
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| journal.checkpoint(database, true)));
            }
        }
        // Closing runs a last commit inside redb; on a file redb already panicked on, that can
        // panic again. Never let it unwind out of a drop.
        let db = self.db.take();
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(db)));
    }
}

/// The start of the message for a file another process holds open outside the owner protocol
/// (a reader); an election waits that out within its bound.
pub(crate) const HELD_ELSEWHERE: &str = "the store is held open by a process outside the owner protocol";

fn open_error(path: &Path, error: DatabaseError) -> Error {
    match error {
        DatabaseError::DatabaseAlreadyOpen => Error::store(
            StoreFaultKind::Busy,
            format!(
                "{HELD_ELSEWHERE} (a reader such as `warden doctor`, or an older Warden): {}; nothing was written. \
             Close that process and open again",
                path.display()
            ),
        ),
        DatabaseError::Storage(redb::StorageError::Corrupted(detail)) => Error::store(
            StoreFaultKind::Damaged,
            format!("the store file {} is damaged: {detail}. Run `warden doctor` on it", path.display()),
        ),
        other => {
            let kind = match &other {
                DatabaseError::Storage(redb::StorageError::Io(error)) => StoreFaultKind::of_io(error),
                _ => StoreFaultKind::Io,
            };
            Error::store(kind, format!("cannot open the store {}: {other}", path.display()))
        }
    }
}

/// Creates a new store at `path` (where nothing exists): temp file, schema, sync, link into
/// place, sync the directory. `write_schema` fills the fresh database.
pub(crate) fn create(path: &Path, write_schema: impl FnOnce(&Database) -> Result<()>) -> Result<()> {
    let directory = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_owned(),
        _ => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| {
            Error::invalid_at(
                InvalidInputKind::Malformed,
                "store",
                format!("the store path {} names no file", path.display()),
            )
        })?
        .to_string_lossy()
        .into_owned();
    remove_abandoned_creations(&directory, &name);
    let suffix = crate::action::new_id(crate::action::IdKind::Receipt)
        .map_err(|e| Error::store(StoreFaultKind::Io, format!("no randomness for a temporary name: {e}")))?;
    let temporary = directory.join(format!(".{name}.creating-{}-{}", std::process::id(), &suffix[4..]));
    let outcome = build(&temporary, path, &directory, write_schema);
    if outcome.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    outcome.map_err(|error| match error {
        Error::Store(fault) if fault.kind == StoreFaultKind::NoSpace => Error::store(
            StoreFaultKind::NoSpace,
            format!(
            "no space left on the device while creating the store {}; nothing was left behind. Free some space and \
             open it again ({})",
            path.display(),
            fault.message
        ),
        ),
        other => other,
    })
}

fn build(
    temporary: &Path,
    path: &Path,
    directory: &Path,
    write_schema: impl FnOnce(&Database) -> Result<()>,
) -> Result<()> {
    let file = OpenOptions::new().read(true).write(true).create_new(true).mode(0o600).open(temporary).map_err(|e| {
        Error::store(StoreFaultKind::of_io(&e), format!("cannot create the store {}: {e}", path.display()))
    })?;
    {
        let backend = super::disk::counted_file(file).map_err(|e| open_error(path, e))?;
        let db =
            Builder::new().set_cache_size(CACHE_BYTES).create_with_backend(backend).map_err(|e| open_error(path, e))?;
        write_schema(&db)?;
    }
    File::open(temporary).and_then(|file| file.sync_all()).map_err(|e| {
        Error::store(StoreFaultKind::of_io(&e), format!("cannot sync the new store {}: {e}", path.display()))
    })?;
    match std::fs::hard_link(temporary, path) {
        Ok(()) => {
            std::fs::remove_file(temporary).map_err(|e| {
                Error::store(StoreFaultKind::of_io(&e), format!("cannot remove {}: {e}", temporary.display()))
            })?;
        }
        Err(error) if error.kind() == ErrorKind::AlreadyExists => {
            return Err(not_a_store(path, "a file appeared at the path while the store was being created"));
        }
        // A filesystem without hard links: the owner lock keeps other Warden processes out,
        // so a rename is as good here.
        Err(_) => std::fs::rename(temporary, path).map_err(|e| {
            Error::store(
                StoreFaultKind::of_io(&e),
                format!("cannot move the new store into place at {}: {e}", path.display()),
            )
        })?,
    }
    File::open(directory).and_then(|dir| dir.sync_all()).map_err(|e| {
        Error::store(
            StoreFaultKind::of_io(&e),
            format!("cannot sync the directory of the new store {}: {e}", path.display()),
        )
    })
}

/// Temporary files of creations that crashed: safe to remove, because the caller holds the
/// store's owner lock and nobody else creates it.
fn remove_abandoned_creations(directory: &Path, name: &str) {
    let prefix = format!(".{name}.creating-");
    if let Ok(entries) = std::fs::read_dir(directory) {
        for entry in entries.flatten() {
            if entry.file_name().to_string_lossy().starts_with(&prefix) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
}

/// What redb's own integrity check found in a copy of a store file (`warden doctor`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageCheck {
    /// The bytes of the file copied and checked.
    pub bytes: u64,
    /// Why the pages fail, when they do.
    pub problem: Option<String>,
}

/// Run redb's integrity check — the checksum of every page of the committed trees, the
/// allocator rebuilt — on a private copy of the store file, so the store itself is never
/// repaired or rolled back by the check. The copy is taken while the file's header stays the
/// same (no commit landed meanwhile: redb never rewrites the pages the current header reaches),
/// and removed afterwards. A copy whose last commit fails its checksums is damage even though
/// redb could fall back to the commit before it: that fallback would forget the last commit.
pub fn check_pages(path: &Path) -> Result<PageCheck> {
    let suffix = crate::action::new_id(crate::action::IdKind::Receipt)
        .map_err(|e| Error::store(StoreFaultKind::Io, format!("no randomness for a temporary name: {e}")))?;
    let copy = std::env::temp_dir().join(format!("warden-doctor-{}-{}.redb", std::process::id(), &suffix[4..]));
    let outcome = copy_unchanging(path, &copy).and_then(|bytes| Ok(PageCheck { bytes, problem: check_copy(&copy)? }));
    let _ = std::fs::remove_file(&copy);
    outcome
}

fn header(path: &Path) -> Result<Vec<u8>> {
    let mut head = vec![0u8; 4096];
    let mut file = File::open(path).map_err(|e| access_error(path, &e))?;
    let mut read = 0;
    while read < head.len() {
        match file.read(&mut head[read..]) {
            Ok(0) => break,
            Ok(n) => read += n,
            Err(e) => return Err(access_error(path, &e)),
        }
    }
    head.truncate(read);
    Ok(head)
}

fn copy_unchanging(path: &Path, copy: &Path) -> Result<u64> {
    for _ in 0..5 {
        let before = header(path)?;
        let bytes = std::fs::copy(path, copy).map_err(|e| {
            Error::store(StoreFaultKind::Io, format!("cannot copy the store {} to check it: {e}", path.display()))
        })?;
        if header(path)? == before {
            return Ok(bytes);
        }
    }
    Err(Error::Unavailable(format!(
        "the store {} committed during each of five copies; run `warden doctor` when it is quieter",
        path.display()
    )))
}

fn check_copy(copy: &Path) -> Result<Option<String>> {
    use std::sync::atomic::{AtomicBool, Ordering};
    let fell_back = std::sync::Arc::new(AtomicBool::new(false));
    let seen = fell_back.clone();
    // redb reports a repair's progress: 0.0 when it starts (any copy of an open store needs
    // one), 0.3 only after the last commit's pages failed their checksums, 0.6 and 0.9 later.
    let opened = Builder::new()
        .set_repair_callback(move |session| {
            if (0.2..0.5).contains(&session.progress()) {
                seen.store(true, Ordering::SeqCst);
            }
        })
        .open(copy);
    let mut db = match opened {
        Ok(db) => db,
        Err(DatabaseError::Storage(redb::StorageError::Corrupted(detail))) => return Ok(Some(detail)),
        Err(other) => return Ok(Some(format!("redb cannot open a copy of it: {other}"))),
    };
    if fell_back.load(Ordering::SeqCst) {
        return Ok(Some("the pages of its last commit fail redb's checksums".into()));
    }
    match db.check_integrity() {
        Ok(true) => Ok(None),
        Ok(false) => Ok(Some("redb's integrity check had to repair a copy of it".into())),
        Err(DatabaseError::Storage(redb::StorageError::Corrupted(detail))) => Ok(Some(detail)),
        Err(other) => Ok(Some(format!("redb's integrity check failed: {other}"))),
    }
}
