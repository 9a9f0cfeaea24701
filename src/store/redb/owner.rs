//! The owner of a store: the one process that has the redb file open and serves every other
//! process using the store over a Unix socket, through the same group commit as its own calls.
//!
//! Ownership is an exclusive `flock` on `<store>.lock`, taken without waiting: whoever holds it
//! opens the database (redb's single-writer mode, one-phase commits) and listens on
//! `<store>.warden/owner.sock`. The directory is created with mode 0700 and refused if it is
//! not this user's and private; a peer must run as the same user (`SO_PEERCRED`). A forked
//! child never inherits ownership: the fork hook closes its copies of the lock, database and
//! socket descriptors.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::ErrorKind;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::{Error, Result, StoreFaultKind};
use crate::store::fork;
use crate::store::redb::commit::{Committer, Item, Reply};
use crate::store::redb::file::Db;
use crate::store::redb::wire::{self, Down, Up, PROTOCOL};
use crate::store::{Now, Protocol, ReadOp, WriteOp};
use redb::ReadableDatabase;

/// The sidecar lock file whose exclusive lock makes a process the owner.
pub(in crate::store) fn lock_path(store: &Path) -> PathBuf {
    let mut name = store.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

/// The private directory holding the owner's socket.
pub(in crate::store) fn run_dir(store: &Path) -> PathBuf {
    let mut name = store.as_os_str().to_owned();
    name.push(".warden");
    PathBuf::from(name)
}

/// How a socket in `dir` is addressed: directly, or through `/proc/self/fd` when the path is
/// longer than a socket address may be (the directory is held open meanwhile).
pub(in crate::store) fn socket_address(dir: &Path) -> Result<(PathBuf, Option<File>)> {
    let direct = dir.join("owner.sock");
    if direct.as_os_str().len() < 100 {
        return Ok((direct, None));
    }
    let handle =
        File::open(dir).map_err(|e| Error::store(StoreFaultKind::Io, format!("cannot open {}: {e}", dir.display())))?;
    let short = PathBuf::from(format!("/proc/self/fd/{}/owner.sock", handle.as_raw_fd()));
    Ok((short, Some(handle)))
}

/// The outcome of trying to take ownership.
pub(in crate::store) enum Attempt {
    Owner(OwnerLock),
    /// Someone else holds the lock.
    Held,
    /// The lock file cannot be opened for writing: this user may at most read the store.
    NoWriteAccess(std::io::Error),
}

/// The held ownership lock. Released when dropped (in the owning process only).
pub(in crate::store) struct OwnerLock {
    registered: fork::Registered,
    file: Option<File>,
    generation: u64,
}

impl OwnerLock {
    pub(in crate::store) fn try_take(store: &Path) -> Result<Attempt> {
        let path = lock_path(store);
        let file = match OpenOptions::new().read(true).write(true).create(true).truncate(false).mode(0o600).open(&path)
        {
            Ok(file) => file,
            Err(error) if matches!(error.kind(), ErrorKind::PermissionDenied | ErrorKind::ReadOnlyFilesystem) => {
                return Ok(Attempt::NoWriteAccess(error))
            }
            Err(error) => {
                return Err(Error::store(
                    StoreFaultKind::Io,
                    format!("cannot open the store's lock file {}: {error}", path.display()),
                ))
            }
        };
        let registered = fork::Registered::new(file.as_raw_fd())?;
        match file.try_lock() {
            Ok(()) => Ok(Attempt::Owner(OwnerLock { registered, file: Some(file), generation: fork::generation() })),
            Err(std::fs::TryLockError::WouldBlock) => Ok(Attempt::Held),
            Err(std::fs::TryLockError::Error(error)) => Err(Error::store(
                StoreFaultKind::Io,
                format!("cannot lock the store's lock file {}: {error}", path.display()),
            )),
        }
    }
}

impl Drop for OwnerLock {
    fn drop(&mut self) {
        if self.generation != fork::generation() {
            std::mem::forget(self.file.take());
            self.registered.disarm();
        }
    }
}

/// Create (or check) the private socket directory.
pub(in crate::store) fn prepare_run_dir(store: &Path) -> Result<PathBuf> {
    let dir = run_dir(store);
    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => {}
        Err(error) if error.kind() == ErrorKind::AlreadyExists => {}
        Err(error) => {
            return Err(Error::store(
                StoreFaultKind::Io,
                format!("cannot create the store's socket directory {}: {error}", dir.display()),
            ))
        }
    }
    let metadata = std::fs::symlink_metadata(&dir).map_err(|e| {
        Error::store(StoreFaultKind::Io, format!("cannot read the store's socket directory {}: {e}", dir.display()))
    })?;
    let uid = rustix::process::getuid().as_raw();
    if !metadata.is_dir() || metadata.uid() != uid || metadata.permissions().mode() & 0o077 != 0 {
        return Err(Error::store(
            StoreFaultKind::Permission,
            format!(
                "the store's socket directory {} must be a directory owned by this user (uid {uid}) with mode 0700; \
             it is not, so another user could reach the store's owner. Remove it and open the store again",
                dir.display()
            ),
        ));
    }
    Ok(dir)
}

/// The peer's user id, checked against ours.
pub(in crate::store) fn check_peer(stream: &UnixStream) -> Result<u32> {
    let credentials = rustix::net::sockopt::socket_peercred(stream).map_err(|e| {
        Error::store(StoreFaultKind::Permission, format!("cannot read the peer's credentials on the store socket: {e}"))
    })?;
    let ours = rustix::process::getuid().as_raw();
    let theirs = credentials.uid.as_raw();
    if theirs != ours {
        return Err(Error::store(
            StoreFaultKind::Permission,
            format!(
            "the process at the other end of the store's socket runs as uid {theirs}, not this user ({ours}); refused"
        ),
        ));
    }
    Ok(credentials.pid.as_raw_nonzero().get() as u32)
}

/// What the owner's threads share.
pub(in crate::store) struct Shared<P: Protocol> {
    pub committer: Committer<P::Write>,
    pub db: Db,
    pub wait: Duration,
}

/// Before the database closes (its fields drop after this): the batches the writer kept in an
/// open transaction go into redb, so the close's checkpoint covers them — or, when they cannot,
/// the journal is told, so that no checkpoint claims them and the next open replays them.
impl<P: Protocol> Drop for Shared<P> {
    fn drop(&mut self) {
        self.committer.close(&self.db);
    }
}

impl<P: Protocol> Shared<P> {
    pub(in crate::store) fn read(&self, op: &P::Read, now: &Now) -> Result<<P::Read as ReadOp>::Reply> {
        // The writer keeps its last batches in an open transaction; a read sees them only once
        // they are committed to redb.
        self.committer.publish(&self.db)?;
        let database = self.db.database()?;
        let txn = database.begin_read().map_err(crate::store::redb::rows::fault)?;
        let rows = crate::store::redb::rows::FileReads::new(txn);
        let rx = crate::store::rows::semantics::Reads::new(&rows);
        let time = now.read();
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| op.run(&rx, time))) {
            Ok(result) => result,
            Err(payload) => Err(Error::store(
                StoreFaultKind::Damaged,
                format!(
                    "the store file {} is damaged: redb failed while reading it ({}). Run `warden doctor` on it",
                    self.db.path().display(),
                    crate::error::panic_text(payload.as_ref())
                ),
            )),
        }
    }
}

/// The listening socket and every connection's thread.
pub(in crate::store) struct Server {
    stopping: Arc<AtomicBool>,
    listener: Option<UnixListener>,
    _listener_fd: Option<fork::Registered>,
    accept: Option<JoinHandle<()>>,
    connections: Arc<Connections>,
    socket: PathBuf,
    _dir_handle: Option<File>,
}

#[derive(Default)]
struct Connections {
    live: Mutex<HashMap<u64, Arc<Connection>>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    next: AtomicUsize,
}

struct Connection {
    /// Declared first: unregistered before the stream closes.
    _registered: fork::Registered,
    writer: Mutex<UnixStream>,
    /// Writes enqueued and not yet answered.
    in_flight: Mutex<usize>,
    answered: Condvar,
    said_goodbye: AtomicBool,
}

impl Connection {
    fn send<WR: serde::Serialize, RR: serde::Serialize>(&self, message: &Down<WR, RR>) -> Result<()> {
        let mut writer = self.writer.lock().map_err(|_| Error::Unavailable("a connection lock was poisoned".into()))?;
        wire::send(&mut *writer, message)
    }

    fn finished_one(&self) {
        if let Ok(mut count) = self.in_flight.lock() {
            *count = count.saturating_sub(1);
        }
        self.answered.notify_all();
    }

    fn goodbye<WR: serde::Serialize, RR: serde::Serialize>(&self) {
        if !self.said_goodbye.swap(true, Ordering::SeqCst) {
            let _ = self.send::<WR, RR>(&Down::Goodbye);
        }
    }
}

impl Server {
    pub(in crate::store) fn start<P: Protocol>(dir: &Path, shared: Arc<Shared<P>>) -> Result<Server> {
        let (address, dir_handle) = socket_address(dir)?;
        let socket = dir.join("owner.sock");
        match std::fs::remove_file(&socket) {
            Ok(()) => {}
            Err(error) if error.kind() == ErrorKind::NotFound => {}
            Err(error) => {
                return Err(Error::store(
                    StoreFaultKind::Io,
                    format!("cannot remove the stale socket {}: {error}", socket.display()),
                ))
            }
        }
        let listener = UnixListener::bind(&address).map_err(|e| {
            Error::store(StoreFaultKind::Io, format!("cannot listen on the store's socket {}: {e}", socket.display()))
        })?;
        let _ = std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600));
        let listener_fd = fork::Registered::new(listener.as_raw_fd())?;
        let stopping = Arc::new(AtomicBool::new(false));
        let connections = Arc::new(Connections::default());
        let accept = {
            let listener = listener
                .try_clone()
                .map_err(|e| Error::store(StoreFaultKind::Io, format!("cannot share the listening socket: {e}")))?;
            let stopping = stopping.clone();
            let connections = connections.clone();
            let identity = shared.db.identity();
            std::thread::Builder::new()
                .name("warden-owner".into())
                .spawn(move || accept_loop::<P>(listener, stopping, connections, shared, identity))
                .map_err(|e| Error::store(StoreFaultKind::Io, format!("cannot start the store's owner thread: {e}")))?
        };
        Ok(Server {
            stopping,
            listener: Some(listener),
            _listener_fd: Some(listener_fd),
            accept: Some(accept),
            connections,
            socket,
            _dir_handle: dir_handle,
        })
    }

    /// Hand the store over: stop accepting, say goodbye on every connection, answer what was
    /// sent before each peer's `Bye` (later requests get `Moved`), wait for the writes already
    /// queued to be answered, close, and remove the socket. Bounded by `wait`.
    pub(in crate::store) fn stop<P: Protocol>(&mut self, wait: Duration) {
        self.stopping.store(true, Ordering::SeqCst);
        if let Some(listener) = &self.listener {
            let _ = rustix::net::shutdown(listener, rustix::net::Shutdown::Both);
        }
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
        let live: Vec<Arc<Connection>> =
            self.connections.live.lock().map(|live| live.values().cloned().collect()).unwrap_or_default();
        for connection in &live {
            connection.goodbye::<<P::Write as WriteOp>::Reply, <P::Read as ReadOp>::Reply>();
        }
        let deadline = Instant::now() + wait.min(Duration::from_secs(5));
        let threads: Vec<JoinHandle<()>> =
            self.connections.threads.lock().map(|mut threads| threads.drain(..).collect()).unwrap_or_default();
        // Each peer answers the goodbye with `Bye` (its connection thread then ends); a request it
        // sent before reading the goodbye is answered `Moved` meanwhile. Closing a connection
        // before that would drop those requests unread, which the peer sees as a reset: an answer
        // lost, where `Moved` tells it to send the request to the next owner.
        while !threads.iter().all(JoinHandle::is_finished) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        for connection in &live {
            let Ok(mut count) = connection.in_flight.lock() else { continue };
            while *count > 0 {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                count = match connection.answered.wait_timeout(count, left) {
                    Ok((count, _)) => count,
                    Err(_) => break,
                };
            }
        }
        for connection in &live {
            if let Ok(writer) = connection.writer.lock() {
                let _ = writer.shutdown(std::net::Shutdown::Both);
            }
        }
        for thread in threads {
            let _ = thread.join();
        }
        let _ = std::fs::remove_file(&self.socket);
        self.listener = None;
    }
}

fn accept_loop<P: Protocol>(
    listener: UnixListener,
    stopping: Arc<AtomicBool>,
    connections: Arc<Connections>,
    shared: Arc<Shared<P>>,
    identity: (u64, u64),
) {
    let _registered = fork::Registered::new(listener.as_raw_fd());
    for stream in listener.incoming() {
        if stopping.load(Ordering::SeqCst) {
            return;
        }
        let Ok(stream) = stream else {
            std::thread::sleep(Duration::from_millis(5));
            continue;
        };
        let Ok(registered) = fork::Registered::new(stream.as_raw_fd()) else { continue };
        if check_peer(&stream).is_err() {
            continue;
        }
        let Ok(writer) = stream.try_clone() else { continue };
        let _ = writer.set_write_timeout(Some(shared.wait));
        let connection = Arc::new(Connection {
            _registered: registered,
            writer: Mutex::new(writer),
            in_flight: Mutex::new(0),
            answered: Condvar::new(),
            said_goodbye: AtomicBool::new(false),
        });
        let id = connections.next.fetch_add(1, Ordering::SeqCst) as u64;
        if let Ok(mut live) = connections.live.lock() {
            live.insert(id, connection.clone());
        }
        let shared = shared.clone();
        let stopping = stopping.clone();
        let registry = connections.clone();
        let spawned = std::thread::Builder::new().name("warden-owner-conn".into()).spawn(move || {
            serve::<P>(stream, &connection, &shared, &stopping, identity);
            if let Ok(mut live) = registry.live.lock() {
                live.remove(&id);
            }
        });
        if let (Ok(thread), Ok(mut threads)) = (spawned, connections.threads.lock()) {
            threads.retain(|thread| !thread.is_finished());
            threads.push(thread);
        }
    }
}

type DownOf<P> = Down<<<P as Protocol>::Write as WriteOp>::Reply, <<P as Protocol>::Read as ReadOp>::Reply>;
type UpOf<P> = Up<<P as Protocol>::Write, <P as Protocol>::Read>;

/// One connection: the handshake, then requests until the peer leaves.
fn serve<P: Protocol>(
    mut stream: UnixStream,
    connection: &Arc<Connection>,
    shared: &Arc<Shared<P>>,
    stopping: &AtomicBool,
    identity: (u64, u64),
) {
    let hello: Option<UpOf<P>> = wire::receive(&mut stream).ok().flatten();
    match hello {
        Some(Up::Hello { protocol, .. }) if protocol == PROTOCOL => {
            let welcome: DownOf<P> =
                Down::Welcome { protocol: PROTOCOL, owner_pid: std::process::id(), dev: identity.0, ino: identity.1 };
            if connection.send(&welcome).is_err() {
                return;
            }
        }
        Some(Up::Hello { protocol, .. }) => {
            let refused: DownOf<P> = Down::Refused {
                message: format!(
                    "the store's owner process speaks store protocol {PROTOCOL} and this process {protocol}; run the same \
                     Warden version in every process using one store"
                ),
            };
            let _ = connection.send(&refused);
            return;
        }
        _ => return,
    }
    if stopping.load(Ordering::SeqCst) {
        connection.goodbye::<<P::Write as WriteOp>::Reply, <P::Read as ReadOp>::Reply>();
    }
    loop {
        let message: UpOf<P> = match wire::receive(&mut stream) {
            Ok(Some(message)) => message,
            Ok(None) | Err(_) => return,
        };
        let handing_over = connection.said_goodbye.load(Ordering::SeqCst);
        match message {
            Up::Hello { .. } => return,
            Up::Bye => {
                // Nothing more comes; wait for the answers still owed, then end.
                return;
            }
            Up::Write { id, .. } | Up::Read { id, .. } if handing_over => {
                let moved: DownOf<P> = Down::Moved { id };
                if connection.send(&moved).is_err() {
                    return;
                }
            }
            Up::Read { id, op, now } => {
                let now = now.map_or(Now::System, Now::Fixed);
                let result = shared.read(&op, &now);
                let answer: DownOf<P> = Down::Read { id, result };
                if connection.send(&answer).is_err() {
                    return;
                }
            }
            Up::Write { id, op, now, deferred } => {
                if let Ok(mut count) = connection.in_flight.lock() {
                    *count += 1;
                }
                let answer_to = connection.clone();
                let reply: Reply<P::Write> = Box::new(move |result, together| {
                    let answer: DownOf<P> = Down::Wrote { id, result, together };
                    let _ = answer_to.send(&answer);
                    answer_to.finished_one();
                });
                // A deferred outcome from another process rides with the next batch, or is
                // committed within the default delay; that process keeps it until answered.
                let deadline = deferred.then(|| Instant::now() + crate::store::DEFAULT_DEFERRED_DELAY);
                shared.committer.submit(Item {
                    op: Some(op),
                    now: now.map_or(Now::System, Now::Fixed),
                    deadline,
                    reply,
                    claim: None,
                });
            }
        }
    }
}
