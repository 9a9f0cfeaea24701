//! The store: the only code that touches redb.
//!
//! One file holds every table (`tables`), every row integrity-checked when read (`codec`). One
//! process at a time owns the file (`owner`): it opens redb as its single writer and applies
//! every state change — its own and, over a Unix socket, those of every other process using
//! the store (`client`) — through one group commit (`commit`): everything waiting goes into one
//! write transaction and one durable commit. When the owner goes away another process takes
//! over (`Store::write` elects again on a broken connection). Nothing crosses a `fork()`
//! (`fork`). New stores are created atomically and anything that is not a Warden store is
//! refused (`file`); older schemas migrate forward in one transaction (`schema`).
//!
//! The store knows nothing of the kernel: the kernel hands it operations (`WriteOp`, `ReadOp`)
//! that say what one state change reads and writes, and the store decides only where and when
//! they run. See `docs/STORE.md`.

mod boundary;
pub(crate) mod fork;
mod mem;
#[cfg(feature = "postgres")]
mod pg;
pub(crate) mod protocol;
#[cfg(feature = "postgres")]
pub(crate) use pg::ScratchSchemas;
mod redb;
pub(crate) mod rows;
mod tables;

use std::any::Any;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, RwLock, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub use self::redb::disk::{io_counters, IoCounters};
use crate::clock::Micros;
use crate::error::{Error, InvalidInputKind, Result, StoreFaultKind};
pub use crate::event::{Event, EventKind};
pub use boundary::{
    AbsenceWitnesses, AuthorityReads, AuthorityWrites, CountedSource, EvidenceReads, GrantReads, Neighbour, ReadTables,
    WriteTables,
};
pub(crate) use handle::Store;
pub use mem::is_memory;
pub(crate) use protocol::WriteTx;
pub use protocol::{
    Durability, Now, Prefetch, Protocol, ReadOp, ReadTx, Withstands, WriteOp, Written, DEFAULT_DEFERRED_DELAY,
};
use redb::client::{Answer, Client};
use redb::commit::{Claim, Committer, Item, Slot};
pub use redb::file::{check_pages, PageCheck};
use redb::file::{Db, FileId};
use redb::owner::{Attempt, OwnerLock, Server};
#[cfg(any(test, feature = "test-exports"))]
pub use rows::semantics::RawTable;
#[cfg(any(test, feature = "test-exports"))]
pub use rows::semantics::Tamper;
pub use tables::SCHEMA_VERSION;

/// How a store is opened.
#[derive(Clone, Debug)]
pub struct StoreOptions {
    /// The bound on every wait: for the owner to answer, for ownership, for the writer.
    pub wait: Duration,
    /// Only read (the operator's views, `warden doctor`): use the owner if one runs, else open
    /// the file read-only without taking ownership, so the file is not written at all. A store
    /// that needs recovery after a crash is opened as usual (recovery writes).
    pub read_only: bool,
    /// What a returned write survives (a file store's owner applies its own).
    pub durability: Withstands,
}

impl Default for StoreOptions {
    fn default() -> StoreOptions {
        StoreOptions { wait: wait_from_environment(), read_only: false, durability: Withstands::Power }
    }
}

/// `WARDEN_WRITE_WAIT_MS`, default 30 s, read once per open.
pub fn wait_from_environment() -> Duration {
    let millis = std::env::var("WARDEN_WRITE_WAIT_MS").ok().and_then(|v| v.parse::<u64>().ok()).unwrap_or(30_000);
    Duration::from_millis(millis.clamp(1, 3_600_000))
}

/// What this process is to the store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// This process has the file open and serves the others.
    Owner,
    /// Another process (this pid) owns it; calls go over its socket.
    Client {
        /// The owner's process id.
        owner_pid: u32,
    },
    /// This user may read the store but not write it.
    ReadOnly,
    /// The store is a PostgreSQL database: every process talks to the server.
    Server,
    /// The store lives in this process's memory (tests): nothing is durable.
    Memory,
}

/// Test support: the next PostgreSQL write on this thread loses its COMMIT (`answer_lost`
/// false) or only COMMIT's answer (true), as a partitioned network would.
#[cfg(all(feature = "test-exports", feature = "postgres"))]
#[doc(hidden)]
pub fn lose_next_postgres_commit(answer_lost: bool) {
    pg::lose_next_commit(answer_lost);
}

/// Whether a store location names a PostgreSQL database (`postgresql://…`) rather than a file.
pub fn is_postgres(location: &str) -> bool {
    location.starts_with("postgresql://") || location.starts_with("postgres://")
}

/// The store handle's type, in a module of its own: its name is `pub` here, but `store`
/// re-exports it only to the crate, so outside it a release build cannot reach it (the kernel is
/// the only way to the store). A `test-exports` build re-exports it from `crate::test_support`
/// for the tests that inspect or damage raw rows.
pub(crate) mod handle {
    use std::sync::Arc;

    /// An open store. Cheap to clone; every handle on one file in one process shares it.
    pub struct Store<P: crate::store::Protocol> {
        pub(in crate::store) engine: Arc<crate::store::Engine<P>>,
        pub(in crate::store) generation: u64,
        pub(in crate::store) opened_in: u32,
    }
}

impl<P: Protocol> Clone for Store<P> {
    fn clone(&self) -> Self {
        Store { engine: self.engine.clone(), generation: self.generation, opened_in: self.opened_in }
    }
}

impl<P: Protocol> std::fmt::Debug for Store<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("path", &self.engine.path).finish()
    }
}

impl<P: Protocol> Drop for Store<P> {
    fn drop(&mut self) {
        if self.generation != fork::generation() {
            // A forked child: never run the parent's teardown here.
            std::mem::forget(self.engine.clone());
        }
    }
}

use redb::client::Orphans;

struct Engine<P: Protocol> {
    path: PathBuf,
    mode: RwLock<Arc<Mode<P>>>,
    orphans: Orphans<P>,
    wait: Duration,
    /// What a returned write survives, when this process becomes the owner.
    durability: Withstands,
}

impl<P: Protocol> Engine<P> {
    fn new(path: PathBuf, mode: Mode<P>, orphans: Orphans<P>, options: &StoreOptions) -> Arc<Engine<P>> {
        let (wait, durability) = (options.wait, options.durability);
        Arc::new(Engine { path, mode: RwLock::new(Arc::new(mode)), orphans, wait, durability })
    }
}

enum Mode<P: Protocol> {
    Owner(Owned<P>),
    Client(Client<P>),
    ReadOnly(ReadOnly),
    /// A PostgreSQL database (`pg`): every process talks to the server; no owner.
    #[cfg(feature = "postgres")]
    Postgres(Box<pg::PgStore>),
    /// A store in this process's memory (`mem`): tests, and nothing durable.
    Memory(Arc<mem::MemStore>),
}

impl<P: Protocol> Mode<P> {
    fn is_done(&self) -> bool {
        match self {
            Mode::Client(client) => client.is_done(),
            Mode::Owner(_) | Mode::ReadOnly(_) | Mode::Memory(_) => false,
            #[cfg(feature = "postgres")]
            Mode::Postgres(_) => false,
        }
    }
}

struct Owned<P: Protocol> {
    server: Option<Server>,
    writer: Option<JoinHandle<()>>,
    shared: Arc<redb::owner::Shared<P>>,
    generation: u64,
    /// Declared last: released after the database closed.
    _lock: OwnerLock,
}

impl<P: Protocol> Drop for Owned<P> {
    fn drop(&mut self) {
        if self.generation != fork::generation() {
            std::mem::forget(self.server.take());
            std::mem::forget(self.writer.take());
            std::mem::forget(self.shared.clone());
            return;
        }
        if let Some(mut server) = self.server.take() {
            server.stop::<P>(self.shared.wait);
        }
        self.shared.committer.shutdown();
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
    }
}

impl<P: Protocol> Owned<P> {
    fn write(&self, op: P::Write, now: &Now, durability: Durability) -> Result<Written<<P::Write as WriteOp>::Reply>> {
        match durability {
            Durability::Deferred(delay) => {
                let item = Item {
                    op: Some(op),
                    now: now.clone(),
                    deadline: Some(Instant::now() + delay),
                    reply: Box::new(|_, _| {}),
                    claim: None,
                };
                self.shared.committer.submit(item);
                Ok(Written::NOT_WAITED)
            }
            Durability::Durable => {
                let slot = Slot::new();
                let filled = slot.clone();
                let claim = Arc::new(Claim::default());
                let item = Item {
                    op: Some(op),
                    now: now.clone(),
                    deadline: None,
                    reply: Box::new(move |result, together| filled.fill((result, together))),
                    claim: Some(claim.clone()),
                };
                self.shared.committer.submit_and_lead(item, &self.shared.db);
                let wait = self.shared.wait;
                if let Some((result, together)) = slot.wait(Instant::now() + wait) {
                    return result.map(|reply| Written { reply, together });
                }
                if claim.withdraw() {
                    return Err(Error::Unavailable(format!(
                        "the store's writer was busy for longer than {} ms (another transaction held it: a stopped \
                         process or a stalled disk?); nothing was applied. Raise WARDEN_WRITE_WAIT_MS or look for \
                         what holds the store",
                        wait.as_millis()
                    )));
                }
                // Taken into a transaction: its commit is under way, so wait for its answer.
                match slot.wait(Instant::now() + wait) {
                    Some((result, together)) => result.map(|reply| Written { reply, together }),
                    None => Err(Error::Unavailable(format!(
                        "the store's commit did not finish within {} ms (a stalled disk?); the change may still be \
                         applied. Look at the disk",
                        wait.as_millis()
                    ))),
                }
            }
        }
    }

    fn flush(&self) -> Result<()> {
        let slot = Slot::new();
        let filled = slot.clone();
        self.shared.committer.submit(Item {
            op: None,
            now: Now::System,
            deadline: None,
            reply: Box::new(move |result, _| filled.fill(result.map(drop))),
            claim: None,
        });
        slot.wait(Instant::now() + self.shared.wait)
            .unwrap_or_else(|| Err(Error::Unavailable("the store's writer did not finish flushing in time".into())))
    }
}

/// A store this user may read but not write.
struct ReadOnly {
    db: Option<::redb::ReadOnlyDatabase>,
    registered: fork::Registered,
    generation: u64,
    why: String,
}

impl Drop for ReadOnly {
    fn drop(&mut self) {
        if self.generation != fork::generation() {
            std::mem::forget(self.db.take());
            self.registered.disarm();
        }
    }
}

// ---- the process-wide registry: one engine per store file per process ------------------------

type Registry = Mutex<HashMap<FileId, Weak<dyn Any + Send + Sync>>>;

/// One registry per fork generation: a child never touches (or waits on) its parent's.
static REGISTRIES: [OnceLock<Registry>; 64] = [const { OnceLock::new() }; 64];

/// At a normal process exit: make every deferred outcome of this process durable (bounded),
/// without ever waiting on a lock another thread may hold.
fn flush_at_exit() {
    let Ok(registry) = registry(fork::generation()) else { return };
    let Ok(map) = registry.try_lock() else { return };
    let engines: Vec<Arc<dyn Any + Send + Sync>> = map.values().filter_map(Weak::upgrade).collect();
    drop(map);
    for engine in engines {
        if let Some(flush) = EXIT_FLUSHERS.get() {
            flush(&engine);
        }
    }
}

/// How an engine of the one protocol this process uses is flushed at exit (type-erased: the
/// registry holds `dyn Any`).
static EXIT_FLUSHERS: OnceLock<fn(&Arc<dyn Any + Send + Sync>)> = OnceLock::new();

fn flush_engine<P: Protocol>(engine: &Arc<dyn Any + Send + Sync>) {
    if let Ok(engine) = engine.clone().downcast::<Engine<P>>() {
        let store = Store { engine, generation: fork::generation(), opened_in: std::process::id() };
        let _ = store.flush();
    }
}

fn registry(generation: u64) -> Result<&'static Registry> {
    let slot = REGISTRIES.get(generation as usize).ok_or_else(|| {
        Error::store(
            StoreFaultKind::Limit,
            "this process descends from more than 63 nested forks of a Warden process; start it afresh",
        )
    })?;
    Ok(slot.get_or_init(Registry::default))
}

impl<P: Protocol> Store<P> {
    /// Open the store at `path` (creating it only if no file exists there), as its owner or as
    /// a client of the process that owns it.
    pub fn open(path: impl AsRef<Path>, options: StoreOptions) -> Result<Store<P>> {
        let path = path.as_ref().to_path_buf();
        if path.as_os_str().is_empty() {
            return Err(Error::invalid_at(
                InvalidInputKind::Missing,
                "store",
                "the store path is empty; pass --store PATH or set WARDEN_STORE",
            ));
        }
        if let Some(location) = path.to_str().filter(|location| is_postgres(location)) {
            return Store::open_postgres(location, &options);
        }
        if let Some(location) = path.to_str().filter(|location| is_memory(location)) {
            let store = mem::MemStore::open(location)?;
            let path = PathBuf::from(store.shown());
            let engine = Engine::new(path, Mode::Memory(store), Arc::default(), &options);
            return Ok(Store { engine, generation: fork::current(), opened_in: std::process::id() });
        }
        let generation = fork::current();
        crate::os::install_exit_hook(flush_at_exit);
        let registry = registry(generation)?;
        let mut map = registry.lock().map_err(|_| {
            Error::store(
                StoreFaultKind::Defect,
                "the store registry is poisoned by an earlier panic; restart the process",
            )
        })?;
        let opened_in = std::process::id();
        if let Some(id) = redb::file::identity(&path) {
            if let Some(engine) = map.get(&id).and_then(Weak::upgrade).and_then(|any| any.downcast::<Engine<P>>().ok())
            {
                return Ok(Store { engine, generation, opened_in });
            }
        }
        let _ = EXIT_FLUSHERS.set(flush_engine::<P>);
        let orphans: Orphans<P> = Arc::default();
        let mode = match options.read_only.then(|| only_read::<P>(&path, options.wait, &orphans)).transpose()? {
            Some(Some(mode)) => mode,
            _ => elect::<P>(&path, options.wait, options.durability, &orphans)?,
        };
        let identity = redb::file::identity(&path).ok_or_else(|| {
            Error::store(
                StoreFaultKind::Absent,
                format!("the store {} vanished while it was being opened", path.display()),
            )
        })?;
        let engine = Engine::new(path, mode, orphans, &options);
        map.retain(|_, weak| weak.strong_count() > 0);
        let weak: Weak<dyn Any + Send + Sync> = Arc::downgrade(&engine) as Weak<dyn Any + Send + Sync>;
        map.insert(identity, weak);
        Ok(Store { engine, generation, opened_in })
    }

    #[cfg(feature = "postgres")]
    fn open_postgres(location: &str, options: &StoreOptions) -> Result<Store<P>> {
        if options.durability != Withstands::Power {
            return Err(Error::invalid_at(
                InvalidInputKind::Conflict,
                "durability",
                "durability \"process\" applies to a file store; a PostgreSQL store keeps the server's own \
                 (synchronous_commit)",
            ));
        }
        let store = pg::PgStore::open(location, options.wait)?;
        let path = PathBuf::from(store.shown());
        let engine = Engine::new(path, Mode::Postgres(Box::new(store)), Arc::default(), options);
        Ok(Store { engine, generation: fork::current(), opened_in: std::process::id() })
    }

    #[cfg(not(feature = "postgres"))]
    fn open_postgres(location: &str, _options: &StoreOptions) -> Result<Store<P>> {
        let _ = location;
        Err(Error::Config(
            "the store is a postgresql:// URL, but this build of Warden has no PostgreSQL backend; build it with              `--features postgres`"
                .into(),
        ))
    }

    /// For a PostgreSQL store, the database's clock minus this host's (microseconds), measured
    /// when the handle opened: leases and expiry are judged by the database's clock, so this only
    /// says how far this host's own readings are off. `None` for a file.
    pub fn clock_skew(&self) -> Option<Micros> {
        match &*self.engine.current().ok()? {
            #[cfg(feature = "postgres")]
            Mode::Postgres(store) => Some(store.skew()),
            _ => None,
        }
    }

    /// The path of the store file.
    pub fn path(&self) -> &Path {
        &self.engine.path
    }

    /// Refuse a handle used in a forked child of the process that opened it. Touches nothing.
    pub fn check_fork(&self) -> Result<()> {
        if self.generation == fork::generation() {
            Ok(())
        } else {
            Err(fork::forked_error(self.opened_in))
        }
    }

    /// What this process is to the store right now.
    pub fn role(&self) -> Result<Role> {
        self.check_fork()?;
        Ok(match &*self.engine.current()? {
            Mode::Owner(_) => Role::Owner,
            Mode::Client(client) => Role::Client { owner_pid: client.owner_pid },
            Mode::ReadOnly(_) => Role::ReadOnly,
            #[cfg(feature = "postgres")]
            Mode::Postgres(_) => Role::Server,
            Mode::Memory(_) => Role::Memory,
        })
    }

    /// Apply one state change: its reply (`None` only for a deferred write, applied later) and
    /// how many writes the commit that made it durable carried.
    pub fn write(
        &self,
        op: P::Write,
        now: &Now,
        durability: Durability,
    ) -> Result<Written<<P::Write as WriteOp>::Reply>> {
        self.check_fork()?;
        let deadline = Instant::now() + self.engine.wait;
        let resend_safe = op.resend_safe();
        loop {
            let mode = self.engine.current()?;
            match &*mode {
                Mode::Owner(owned) => return owned.write(op, now, durability),
                Mode::ReadOnly(read_only) => return Err(read_only_refusal(&self.engine.path, &read_only.why)),
                #[cfg(feature = "postgres")]
                // One transaction per write: each commit carries one write.
                Mode::Postgres(store) => {
                    return store.write(&op, now, durability).map(|reply| Written { reply: Some(reply), together: 1 })
                }
                // Nothing in memory is durable: a deferred write is applied at once like any other.
                Mode::Memory(store) => {
                    return store.write(&op, now).map(|reply| Written { reply: Some(reply), together: 0 })
                }
                Mode::Client(client) => {
                    self.engine.resend_orphans(client);
                    let deferred = matches!(durability, Durability::Deferred(_));
                    match client.write(op.clone(), now.for_wire(), deferred) {
                        Answer::Done(result) => return result,
                        Answer::Moved => {}
                        Answer::Lost(reason) if !resend_safe => {
                            return Err(Error::Unavailable(format!(
                                "{reason}; this call's answer was lost, so it may or may not have been applied (a \
                                 reservation it made is in progress until its lease lapses, then AMBIGUOUS). Nothing \
                                 will retry it blindly"
                            )))
                        }
                        Answer::Lost(_) => {}
                    }
                }
            }
            if Instant::now() >= deadline {
                return Err(Error::Unavailable(format!(
                    "no process took over the store {} within {} ms; nothing was applied by this call",
                    self.engine.path.display(),
                    self.engine.wait.as_millis()
                )));
            }
            self.engine.retire(&mode);
        }
    }

    /// Run one read.
    pub fn read(&self, op: &P::Read, now: &Now) -> Result<<P::Read as ReadOp>::Reply>
    where
        P::Read: Clone,
    {
        self.check_fork()?;
        let deadline = Instant::now() + self.engine.wait;
        loop {
            let mode = self.engine.current()?;
            match &*mode {
                Mode::Owner(owned) => return owned.shared.read(op, now),
                Mode::ReadOnly(read_only) => return read_only.read(op, now),
                #[cfg(feature = "postgres")]
                Mode::Postgres(store) => return store.read(op, now),
                Mode::Memory(store) => return store.read(op, now),
                Mode::Client(client) => match client.read(op.clone(), now.for_wire()) {
                    Answer::Done(result) => return result,
                    Answer::Moved | Answer::Lost(_) => {}
                },
            }
            if Instant::now() >= deadline {
                return Err(Error::Unavailable(format!(
                    "no process took over the store {} within {} ms",
                    self.engine.path.display(),
                    self.engine.wait.as_millis()
                )));
            }
            self.engine.retire(&mode);
        }
    }

    /// Make every deferred write of this process durable before returning.
    pub fn flush(&self) -> Result<()> {
        self.check_fork()?;
        let deadline = Instant::now() + self.engine.wait;
        loop {
            let mode = self.engine.current()?;
            match &*mode {
                Mode::Owner(owned) => return owned.flush(),
                Mode::ReadOnly(_) | Mode::Memory(_) => return Ok(()),
                #[cfg(feature = "postgres")]
                Mode::Postgres(store) => return store.flush(),
                Mode::Client(client) => {
                    self.engine.resend_orphans(client);
                    if client.unconfirmed() == 0 && self.engine.orphans.lock().map(|o| o.is_empty()).unwrap_or(true) {
                        return Ok(());
                    }
                    if client.is_done() {
                        self.engine.retire(&mode);
                    } else {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
            }
            if Instant::now() >= deadline {
                return Err(Error::Unavailable(
                    "deferred outcomes were not confirmed by the store's owner in time; they stay in flight and \
                     turn AMBIGUOUS when their leases lapse"
                        .into(),
                ));
            }
        }
    }

    /// Edit receipt `seq` in place, outside the chain's rules: `warden verify`'s G11 does this
    /// to a scratch store (file or PostgreSQL) to show that the chain notices.
    pub(crate) fn edit_receipt(
        &self,
        seq: u64,
        edit: impl FnOnce(&mut crate::receipt::StoredReceipt) -> Result<()>,
    ) -> Result<()> {
        self.edit_rows(|writes| {
            let Some(mut row) = writes.stored_receipt(seq)? else {
                return Err(Error::NotFound(format!("receipt {seq} is not in the store")));
            };
            edit(&mut row)?;
            writes.put_stored_receipt(seq, &row)
        })
    }

    /// Overwrite an approval request's row as it is given, outside the approval rules: `warden
    /// verify`'s G12 does this to a scratch store (file or PostgreSQL) to show damage is noticed.
    pub(crate) fn overwrite_approval(&self, record: &crate::approval::ApprovalRecord) -> Result<()> {
        self.edit_rows(|writes| writes.put_raw_approval(record))
    }

    /// Edit rows in one write transaction of this store's engine, outside every operation's
    /// rules (owner only for a file).
    fn edit_rows(&self, edit: impl FnOnce(&mut rows::semantics::Writes<'_>) -> Result<()>) -> Result<()> {
        self.check_fork()?;
        let mode = self.engine.current()?;
        #[cfg(feature = "postgres")]
        if let Mode::Postgres(store) = &*mode {
            return store.edit_rows(edit);
        }
        if let Mode::Memory(store) = &*mode {
            return store.edit(edit);
        }
        let Mode::Owner(owned) = &*mode else {
            return Err(Error::invalid(
                InvalidInputKind::State,
                "only the process that owns a store can edit its rows",
            ));
        };
        let journal = owned.shared.db.journal();
        owned.shared.with_database(|database| {
            let txn = database.begin_write().map_err(redb::rows::fault)?;
            {
                let touching = std::cell::Cell::new("");
                let mut rows = redb::rows::FileWrites::open(&txn, &touching);
                edit(&mut rows::semantics::Writes::new(&mut rows))?;
                // A durable commit outside the journal: the file holds every batch before it.
                if let Some(journal) = journal {
                    journal.mark_in(&mut rows, false, false)?;
                }
            }
            txn.commit().map_err(redb::rows::fault)
        })
    }

    /// Test support: edit raw rows in one write transaction (owner only, for a file).
    #[cfg(any(test, feature = "test-exports"))]
    #[cfg_attr(test, allow(dead_code))] // the store's own unit tests edit rows through the engines
    #[doc(hidden)]
    pub fn tamper(&self, edit: impl FnOnce(&mut Tamper<'_, '_>) -> Result<()>) -> Result<()> {
        self.edit_rows(|writes| edit(&mut Tamper { writes }))
    }
}

impl<P: Protocol> redb::owner::Shared<P> {
    /// Run `work` on the database from this thread, holding the writer (`Committer::exclusive`).
    fn with_database(&self, work: impl FnOnce(&::redb::Database) -> Result<()>) -> Result<()> {
        let database = self.db.database()?;
        self.committer.exclusive(&self.db, || work(database))?
    }
}

fn read_only_refusal(path: &Path, why: &str) -> Error {
    Error::store(
        StoreFaultKind::Permission,
        format!(
            "the store {} is open read-only for this user ({why}); nothing was written. Run as a user who may write \
         the store and its directory to change it",
            path.display()
        ),
    )
}

impl<P: Protocol> Engine<P> {
    /// The current mode, electing again if the connection to the owner is gone.
    fn current(&self) -> Result<Arc<Mode<P>>> {
        let mode = self
            .mode
            .read()
            .map_err(|_| Error::store(StoreFaultKind::Defect, "the store's mode lock was poisoned"))?
            .clone();
        if mode.is_done() {
            return self.reelect(&mode);
        }
        Ok(mode)
    }

    fn retire(&self, stale: &Arc<Mode<P>>) {
        let _ = self.reelect(stale);
    }

    fn reelect(&self, stale: &Arc<Mode<P>>) -> Result<Arc<Mode<P>>> {
        let mut slot = self
            .mode
            .write()
            .map_err(|_| Error::store(StoreFaultKind::Defect, "the store's mode lock was poisoned"))?;
        if !Arc::ptr_eq(&slot, stale) {
            return Ok(slot.clone());
        }
        let fresh = Arc::new(elect::<P>(&self.path, self.wait, self.durability, &self.orphans)?);
        *slot = fresh.clone();
        drop(slot);
        if let Mode::Owner(owned) = &*fresh {
            // Deferred outcomes the last owner never confirmed: this process applies them now.
            let orphans: Vec<_> = self.orphans.lock().map(|mut o| o.drain(..).collect()).unwrap_or_default();
            for (op, now) in orphans {
                let now = now.map_or(Now::System, Now::Fixed);
                let _ = owned.write(op, &now, Durability::Deferred(DEFAULT_DEFERRED_DELAY));
            }
        }
        Ok(fresh)
    }

    fn resend_orphans(&self, client: &Client<P>) {
        let orphans: Vec<_> = match self.orphans.lock() {
            Ok(mut orphans) if !orphans.is_empty() => orphans.drain(..).collect(),
            _ => return,
        };
        for (op, now) in orphans {
            if let Answer::Lost(_) | Answer::Moved = client.write(op.clone(), now, true) {
                if let Ok(mut again) = self.orphans.lock() {
                    again.push((op, now));
                }
            }
        }
    }
}

/// Take ownership, or reach the owner, or (for a user who cannot write) open read-only;
/// bounded by `wait`.
fn elect<P: Protocol>(path: &Path, wait: Duration, durability: Withstands, orphans: &Orphans<P>) -> Result<Mode<P>> {
    let deadline = Instant::now() + wait;
    let mut pause = Duration::from_millis(1);
    loop {
        match OwnerLock::try_take(path)? {
            Attempt::Owner(lock) => match damaged_if_panics(path, || become_owner(path, lock, wait, durability)) {
                // A reader has the file open for a moment: wait it out within the bound.
                Err(error) if error.store_fault_kind() == Some(StoreFaultKind::Busy) && Instant::now() < deadline => {}
                owned => return owned,
            },
            Attempt::NoWriteAccess(error) => {
                return damaged_if_panics(path, || open_read_only(path, &error, wait, orphans))
            }
            Attempt::Held => {}
        }
        if let Some(client) = connect::<P>(path, wait, orphans)? {
            return Ok(Mode::Client(client));
        }
        if Instant::now() >= deadline {
            return Err(Error::Unavailable(format!(
                "another process holds the store {} (its lock file {}) but did not start serving it within {} ms \
                 (stopped, or still opening a large store?); nothing was done. Raise WARDEN_WRITE_WAIT_MS, or look \
                 for that process",
                path.display(),
                redb::owner::lock_path(path).display(),
                wait.as_millis()
            )));
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

/// redb panics on some damaged pages instead of returning an error: that is a damaged store,
/// reported as a store fault, never a crash of the host.
fn damaged_if_panics<T>(path: &Path, open: impl FnOnce() -> Result<T>) -> Result<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(open)).unwrap_or_else(|payload| {
        Err(Error::store(
            StoreFaultKind::Damaged,
            format!(
                "the store file {} is damaged: redb failed while opening it ({}). Run `warden doctor` on it, and \
             restore it from a backup if the damage is confirmed",
                path.display(),
                crate::error::panic_text(payload.as_ref())
            ),
        ))
    })
}

fn connect<P: Protocol>(path: &Path, wait: Duration, orphans: &Orphans<P>) -> Result<Option<Client<P>>> {
    let dir = redb::owner::run_dir(path);
    if !dir.is_dir() {
        return Ok(None);
    }
    let (address, _handle) = redb::owner::socket_address(&dir)?;
    Client::connect(&address, redb::file::identity(path), wait, orphans.clone())
}

fn become_owner<P: Protocol>(path: &Path, lock: OwnerLock, wait: Duration, durability: Withstands) -> Result<Mode<P>> {
    let fresh = !redb::file::inspect(path)?;
    if fresh {
        redb::file::create(path, redb::schema::write_fresh)?;
    } else {
        redb::schema::probe(path)?;
    }
    let mut db = Db::open_existing(path)?;
    redb::schema::ensure(db.database()?, path)?;
    // Before anything reads: the batches only the journal holds are replayed into the file.
    db.attach_journal(durability, fresh)?;
    {
        use ::redb::ReadableDatabase;
        let reads = redb::rows::FileReads::new(db.database()?.begin_read().map_err(redb::rows::fault)?);
        rows::semantics::check_on_open(&reads)?;
    }
    let dir = redb::owner::prepare_run_dir(path)?;
    let shared = Arc::new(redb::owner::Shared { committer: Committer::new(), db, wait });
    let writer = {
        let shared = shared.clone();
        std::thread::Builder::new()
            .name("warden-writer".into())
            .spawn(move || shared.committer.run(&shared.db))
            .map_err(|e| Error::store(StoreFaultKind::Io, format!("cannot start the store's writer thread: {e}")))?
    };
    let mut owned = Owned {
        server: None,
        writer: Some(writer),
        shared: shared.clone(),
        generation: fork::generation(),
        _lock: lock,
    };
    owned.server = Some(Server::start(&dir, shared)?);
    Ok(Mode::Owner(owned))
}

/// A read-only open: the owner if one is serving, else the file read-only. `None` when the
/// file cannot be opened read-only as it is (it needs recovery): then elect as usual.
fn only_read<P: Protocol>(path: &Path, wait: Duration, orphans: &Orphans<P>) -> Result<Option<Mode<P>>> {
    if let Ok(Some(client)) = connect::<P>(path, wait, orphans) {
        return Ok(Some(Mode::Client(client)));
    }
    if !redb::file::inspect(path)? {
        return Err(Error::store(
            StoreFaultKind::Absent,
            format!("there is no store at {} (reading never creates one)", path.display()),
        ));
    }
    match damaged_if_panics(path, || read_only_mode(path, "opened to read only".into())) {
        Ok(mode) => Ok(Some(mode)),
        Err(error) if error.store_fault_kind() == Some(StoreFaultKind::NeedsRecovery) => Ok(None),
        Err(other) => Err(other),
    }
}

fn open_read_only<P: Protocol>(
    path: &Path,
    why: &std::io::Error,
    wait: Duration,
    orphans: &Orphans<P>,
) -> Result<Mode<P>> {
    // An owner running as this same user can still serve us.
    if let Ok(Some(client)) = connect::<P>(path, wait, orphans) {
        return Ok(Mode::Client(client));
    }
    if !redb::file::inspect(path)? {
        return Err(Error::store(
            StoreFaultKind::Permission,
            format!("there is no store at {}, and this user cannot create one there ({why})", path.display()),
        ));
    }
    read_only_mode(path, why.to_string())
}

/// The file opened read-only (redb refuses while a writer holds it; it never writes).
fn read_only_mode<P: Protocol>(path: &Path, why: String) -> Result<Mode<P>> {
    let file = std::fs::File::open(path).map_err(|e| redb::file::access_error(path, &e))?;
    let registered = fork::Registered::new(std::os::fd::AsRawFd::as_raw_fd(&file))?;
    let backend = ::redb::backends::FileBackend::new(file)
        .map_err(|e| Error::store(StoreFaultKind::Io, format!("cannot open {}: {e}", path.display())))?;
    let db = ::redb::Builder::new().open_read_only_with_backend(backend).map_err(|e| match e {
        ::redb::DatabaseError::DatabaseAlreadyOpen => Error::store(
            StoreFaultKind::Permission,
            format!(
                "the store {} is in use by a process of another user, and this user may only read it; read it as that \
             user, or when that process has closed it",
                path.display()
            ),
        ),
        ::redb::DatabaseError::RepairAborted | ::redb::DatabaseError::Storage(_) => Error::store(
            StoreFaultKind::NeedsRecovery,
            format!(
                "the store {} needs recovery after a crash, which a read-only user cannot do: open it once as a user \
             who may write it ({e})",
                path.display()
            ),
        ),
        other => {
            Error::store(StoreFaultKind::Io, format!("cannot open the store {} read-only: {other}", path.display()))
        }
    })?;
    match redb::schema::version(&db, path)? {
        // The file alone is the store only when its journal holds nothing more. Schema 7 differs
        // only in having no anchors or policies table, 8 in having no holds table, 9 in having no
        // scoped grants tables, which read as empty.
        Some(7 | 8 | 9 | SCHEMA_VERSION) => {
            use ::redb::ReadableDatabase;
            let reads = redb::rows::FileReads::new(db.begin_read().map_err(redb::rows::fault)?);
            redb::journal::check_read_only(&reads, path)?;
        }
        // Schema 4 differs only in never holding a compressed row, 5 in having no journal:
        // every row reads as it is.
        Some(4 | 5) => {}
        // Older rows (schema 1: no checksums; 2 and 3: approvals without their action) are only
        // readable after the migration, which needs a writer.
        Some(old @ 1..=3) => {
            return Err(Error::store(
                StoreFaultKind::Version,
                format!(
                    "the store {} has schema {old} and must be migrated before it can be read; open it once as a user \
                 who may write it",
                    path.display()
                ),
            ))
        }
        Some(other) => redb::schema::check_version(other, path)?,
        None => {
            use ::redb::ReadableDatabase;
            return Err(redb::schema::without_version(
                &redb::rows::FileReads::new(db.begin_read().map_err(redb::rows::fault)?),
                path,
            ));
        }
    }
    Ok(Mode::ReadOnly(ReadOnly { db: Some(db), registered, generation: fork::generation(), why }))
}

impl ReadOnly {
    fn read<R: ReadOp>(&self, op: &R, now: &Now) -> Result<R::Reply> {
        use ::redb::ReadableDatabase;
        let db = self.db.as_ref().ok_or_else(|| Error::store(StoreFaultKind::Stopped, "the store was closed"))?;
        let rows = redb::rows::FileReads::new(db.begin_read().map_err(redb::rows::fault)?);
        op.run(&rows::semantics::Reads::new(&rows), now.read())
    }
}
