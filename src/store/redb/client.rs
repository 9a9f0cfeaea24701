//! A process using a store that another process owns: requests go over the owner's socket,
//! one connection per store per process, shared by every thread (requests are pipelined and
//! answers matched by id, so threads of one process share the owner's group commit too).
//!
//! When the connection breaks, what was in flight ends fail-closed: a write whose answer was
//! lost is reported `Unavailable` (its effect may have happened: the reservation is then in
//! progress until its lease lapses, then AMBIGUOUS), except writes that are safe to send again
//! (an outcome, keyed by its receipt id), which are re-sent to the next owner. Deferred
//! outcomes are kept until the owner confirms them, and re-sent after a takeover.

use std::collections::HashMap;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::clock::Micros;
use crate::error::{Error, Result, StoreFaultKind};
use crate::store::fork;
use crate::store::redb::commit::Slot;
use crate::store::redb::file::FileId;
use crate::store::redb::owner::check_peer;
use crate::store::redb::wire::{self, Down, Up, PROTOCOL};
use crate::store::{Protocol, ReadOp, WriteOp, Written};

/// What came back for one request.
pub(in crate::store) enum Answer<T> {
    Done(Result<T>),
    /// The owner is handing over and did not apply it: send it to the next owner.
    Moved,
    /// The connection broke before an answer: it may or may not have been applied.
    Lost(String),
}

type WriteAnswer<P> = Answer<Written<<<P as Protocol>::Write as WriteOp>::Reply>>;
/// Deferred outcomes waiting for a new owner, with their fixed "now" if any.
pub(in crate::store) type Orphans<P> = Arc<Mutex<Vec<(<P as Protocol>::Write, Option<Micros>)>>>;
type DownOf<P> = Down<<<P as Protocol>::Write as WriteOp>::Reply, <<P as Protocol>::Read as ReadOp>::Reply>;

enum Waiting<P: Protocol> {
    Write(Arc<Slot<WriteAnswer<P>>>),
    Read(Arc<Slot<Answer<<P::Read as ReadOp>::Reply>>>),
    /// A deferred outcome nobody waits for: kept to be re-sent if the owner goes away.
    Deferred(P::Write, Option<Micros>),
}

pub(in crate::store) struct Client<P: Protocol> {
    registered: fork::Registered,
    /// Shared with the reader thread, which answers the owner's goodbye under this lock: a request
    /// is either written before the `Bye` (so the owner reads it and answers it) or not at all.
    writer: Arc<Mutex<UnixStream>>,
    waiting: Arc<Mutex<HashMap<u64, Waiting<P>>>>,
    next_id: AtomicU64,
    /// Set once the connection is unusable (broken, or the owner said goodbye).
    done: Arc<OnceLock<String>>,
    /// Deferred outcomes orphaned by a broken connection, for the next owner.
    orphans: Orphans<P>,
    reader: Mutex<Option<JoinHandle<()>>>,
    wait: Duration,
    pub(in crate::store) owner_pid: u32,
    generation: u64,
}

impl<P: Protocol> Client<P> {
    /// Connect to the owner at `address` and say hello. `Ok(None)`: nobody is listening (the
    /// owner is starting or gone; try to take ownership again).
    pub(in crate::store) fn connect(
        address: &Path,
        expected: Option<FileId>,
        wait: Duration,
        orphans: Orphans<P>,
    ) -> Result<Option<Client<P>>> {
        let mut stream = match UnixStream::connect(address) {
            Ok(stream) => stream,
            Err(error)
                if matches!(
                    error.kind(),
                    std::io::ErrorKind::NotFound
                        | std::io::ErrorKind::ConnectionRefused
                        | std::io::ErrorKind::ConnectionReset
                ) =>
            {
                return Ok(None)
            }
            Err(error) if error.kind() == std::io::ErrorKind::PermissionDenied => {
                return Err(Error::store(
                    StoreFaultKind::Permission,
                    format!(
                    "permission denied reaching the store's owner process at {}: the store is in use by another user's \
                     process; use the store as that user",
                    address.display()
                ),
                ))
            }
            Err(error) => return Err(Error::Unavailable(format!("cannot reach the store's owner process: {error}"))),
        };
        let registered = fork::Registered::new(stream.as_raw_fd())?;
        check_peer(&stream)?;
        stream
            .set_read_timeout(Some(wait))
            .and_then(|()| stream.set_write_timeout(Some(wait)))
            .map_err(|e| Error::Unavailable(format!("cannot set timeouts on the store socket: {e}")))?;
        let hello: Up<P::Write, P::Read> = Up::Hello { protocol: PROTOCOL, pid: std::process::id() };
        if wire::send(&mut stream, &hello).is_err() {
            return Ok(None);
        }
        let welcome: Option<DownOf<P>> = match wire::receive(&mut stream) {
            Ok(welcome) => welcome,
            Err(Error::Unavailable(text)) if text.contains("timed out") || text.contains("Resource temporarily") => {
                return Err(Error::Unavailable(format!(
                    "the store's owner process did not answer within {} ms (is it stopped, or in a debugger?); nothing \
                     was done. Raise WARDEN_WRITE_WAIT_MS or resume that process",
                    wait.as_millis()
                )))
            }
            Err(_) => return Ok(None),
        };
        let owner_pid = match welcome {
            Some(Down::Welcome { protocol, owner_pid, dev, ino }) if protocol == PROTOCOL => {
                if expected.is_some_and(|expected| expected != (dev, ino)) {
                    return Err(Error::store(StoreFaultKind::Damaged, format!(
                        "the process owning the store's socket (pid {owner_pid}) serves another file than the one at the \
                         store's path (it was replaced while open); nothing was done"
                    )));
                }
                owner_pid
            }
            Some(Down::Refused { message }) => return Err(Error::store(StoreFaultKind::Version, message)),
            Some(Down::Goodbye) | None => return Ok(None),
            Some(_) => {
                return Err(Error::store(
                    StoreFaultKind::Defect,
                    "the store's owner process answered the handshake out of turn",
                ))
            }
        };
        // The reader waits without a timeout: requests carry their own deadlines.
        stream.set_read_timeout(None).map_err(|e| Error::Unavailable(format!("cannot clear a timeout: {e}")))?;
        let reader_stream =
            stream.try_clone().map_err(|e| Error::Unavailable(format!("cannot share the store socket: {e}")))?;
        let waiting: Arc<Mutex<HashMap<u64, Waiting<P>>>> = Arc::default();
        let done: Arc<OnceLock<String>> = Arc::default();
        let writer = Arc::new(Mutex::new(stream));
        let reader = {
            let waiting = waiting.clone();
            let done = done.clone();
            let orphans = orphans.clone();
            let writer = writer.clone();
            std::thread::Builder::new()
                .name("warden-client".into())
                .spawn(move || read_loop::<P>(reader_stream, writer, &waiting, &done, &orphans))
                .map_err(|e| Error::Unavailable(format!("cannot start the store client thread: {e}")))?
        };
        Ok(Some(Client {
            registered,
            writer,
            waiting,
            next_id: AtomicU64::new(1),
            done,
            orphans,
            reader: Mutex::new(Some(reader)),
            wait,
            owner_pid,
            generation: fork::generation(),
        }))
    }

    /// Whether this connection can no longer be used (then elect again).
    pub(in crate::store) fn is_done(&self) -> bool {
        self.done.get().is_some()
    }

    fn send(&self, message: &Up<P::Write, P::Read>) -> std::result::Result<(), String> {
        let mut writer = self.writer.lock().map_err(|_| "the store socket's lock was poisoned".to_owned())?;
        if let Some(reason) = self.done.get() {
            // The owner said goodbye (or the connection broke) before this request went out.
            return Err(reason.clone());
        }
        wire::send(&mut *writer, message).map_err(|error| {
            let text = error.to_string();
            let _ = self.done.set(text.clone());
            text
        })
    }

    pub(in crate::store) fn write(&self, op: P::Write, now: Option<Micros>, deferred: bool) -> WriteAnswer<P>
    where
        P::Write: Clone,
    {
        if self.done.get().is_some() {
            // Never sent on this connection (it broke, or the owner said goodbye): not applied.
            return Answer::Moved;
        }
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let slot = Slot::new();
        let entry = if deferred { Waiting::Deferred(op.clone(), now) } else { Waiting::Write(slot.clone()) };
        if let Ok(mut waiting) = self.waiting.lock() {
            waiting.insert(id, entry);
        }
        if let Err(reason) = self.send(&Up::Write { id, op, deferred, now }) {
            // Never sent (or sent partly, which the owner cannot read as a request).
            if let Ok(mut waiting) = self.waiting.lock() {
                if let Some(Waiting::Deferred(op, now)) = waiting.remove(&id) {
                    if let Ok(mut orphans) = self.orphans.lock() {
                        orphans.push((op, now));
                    }
                    return Answer::Done(Ok(Written::NOT_WAITED));
                }
            }
            // A request that could not be written whole was not applied: send it elsewhere.
            let _ = reason;
            return Answer::Moved;
        }
        if deferred {
            return Answer::Done(Ok(Written::NOT_WAITED));
        }
        self.answer(id, &slot)
    }

    /// The answer to request `id`, or lost when the owner stays silent past the wait.
    fn answer<T>(&self, id: u64, slot: &Slot<Answer<T>>) -> Answer<T> {
        match slot.wait(Instant::now() + self.wait) {
            Some(answer) => answer,
            None => {
                if let Ok(mut waiting) = self.waiting.lock() {
                    waiting.remove(&id);
                }
                Answer::Lost(format!(
                    "the store's owner process (pid {}) did not answer within {} ms (is it stopped?)",
                    self.owner_pid,
                    self.wait.as_millis()
                ))
            }
        }
    }

    pub(in crate::store) fn read(&self, op: P::Read, now: Option<Micros>) -> Answer<<P::Read as ReadOp>::Reply> {
        if self.done.get().is_some() {
            // Never sent on this connection (it broke, or the owner said goodbye): not applied.
            return Answer::Moved;
        }
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let slot = Slot::new();
        if let Ok(mut waiting) = self.waiting.lock() {
            waiting.insert(id, Waiting::Read(slot.clone()));
        }
        if let Err(reason) = self.send(&Up::Read { id, op, now }) {
            return Answer::Lost(reason);
        }
        self.answer(id, &slot)
    }

    /// Deferred outcomes not yet confirmed by the owner.
    pub(in crate::store) fn unconfirmed(&self) -> usize {
        self.waiting
            .lock()
            .map(|waiting| waiting.values().filter(|entry| matches!(entry, Waiting::Deferred(..))).count())
            .unwrap_or(0)
    }
}

impl<P: Protocol> Drop for Client<P> {
    fn drop(&mut self) {
        if self.generation != fork::generation() {
            // A forked child: the descriptor was closed by the fork hook; touch nothing.
            self.registered.disarm();
            if let Ok(mut writer) = self.writer.lock() {
                // Replace the stream without closing its (already closed, maybe reused) number.
                if let Ok(placeholder) = UnixStream::pair() {
                    std::mem::forget(std::mem::replace(&mut *writer, placeholder.0));
                }
            }
            if let Ok(mut reader) = self.reader.lock() {
                std::mem::forget(reader.take());
            }
            return;
        }
        let _ = self.done.set("the connection was closed".into());
        if let Ok(writer) = self.writer.lock() {
            let _ = writer.shutdown(std::net::Shutdown::Both);
        }
        if let Ok(mut reader) = self.reader.lock() {
            if let Some(reader) = reader.take() {
                let _ = reader.join();
            }
        }
    }
}

fn read_loop<P: Protocol>(
    mut stream: UnixStream,
    writer: Arc<Mutex<UnixStream>>,
    waiting: &Mutex<HashMap<u64, Waiting<P>>>,
    done: &OnceLock<String>,
    orphans: &Mutex<Vec<(P::Write, Option<Micros>)>>,
) {
    let _registered = fork::Registered::new(stream.as_raw_fd());
    let reason = loop {
        let message: DownOf<P> = match wire::receive(&mut stream) {
            Ok(Some(message)) => message,
            Ok(None) => break "the store's owner process closed the connection".to_owned(),
            Err(error) => break error.to_string(),
        };
        match message {
            Down::Wrote { id, result, together } => {
                let entry = waiting.lock().ok().and_then(|mut waiting| waiting.remove(&id));
                if let Some(Waiting::Write(slot)) = entry {
                    slot.fill(Answer::Done(result.map(|reply| Written { reply, together })));
                }
            }
            Down::Read { id, result } => {
                let entry = waiting.lock().ok().and_then(|mut waiting| waiting.remove(&id));
                if let Some(Waiting::Read(slot)) = entry {
                    slot.fill(Answer::Done(result));
                }
            }
            Down::Moved { id } => {
                let entry = waiting.lock().ok().and_then(|mut waiting| waiting.remove(&id));
                match entry {
                    Some(Waiting::Write(slot)) => slot.fill(Answer::Moved),
                    Some(Waiting::Read(slot)) => slot.fill(Answer::Moved),
                    Some(Waiting::Deferred(op, now)) => {
                        if let Ok(mut orphans) = orphans.lock() {
                            orphans.push((op, now));
                        }
                    }
                    None => {}
                }
            }
            Down::Goodbye => {
                // Under the writer's lock: no request can follow the `Bye` on the wire.
                if let Ok(mut writer) = writer.lock() {
                    let _ = done.set("the store's owner process is handing the store over".into());
                    let bye: Up<P::Write, P::Read> = Up::Bye;
                    let _ = wire::send(&mut *writer, &bye);
                } else {
                    let _ = done.set("the store socket's lock was poisoned".into());
                }
            }
            Down::Welcome { .. } | Down::Refused { .. } => {}
        }
    };
    let _ = done.set(reason.clone());
    let left: Vec<Waiting<P>> =
        waiting.lock().map(|mut waiting| waiting.drain().map(|(_, entry)| entry).collect()).unwrap_or_default();
    for entry in left {
        match entry {
            Waiting::Write(slot) => slot.fill(Answer::Lost(reason.clone())),
            Waiting::Read(slot) => slot.fill(Answer::Lost(reason.clone())),
            Waiting::Deferred(op, now) => {
                if let Ok(mut orphans) = orphans.lock() {
                    orphans.push((op, now));
                }
            }
        }
    }
}
