//! Group commit: one writer thread applies every waiting operation in one redb write
//! transaction and commits it without a sync; the journal stage then writes the changes of
//! every batch waiting for it as one journal record (`journal`), syncs it, and answers each
//! operation with its own result. The next batch is applied while a record syncs (the
//! pipeline); one record is written at a time, each synced before the next.
//!
//! - Each operation reads its clock when it is applied, inside the transaction, so a lease or
//!   an approval is judged at the moment of the write, not when the caller started waiting.
//! - One operation's refusal is its own result (refusals travel inside `Ok`). An operation that
//!   fails outright (a row failing its integrity check, an input it cannot encode) is taken
//!   out: the transaction is aborted and the batch re-applied without it, so it writes nothing
//!   and its neighbours are unaffected.
//! - A fault of the batch itself (begin or commit failing, the file deleted or replaced, redb
//!   panicking on a damaged page) fails every operation in it and latches the writer closed:
//!   every later operation gets the same fault until the store is opened again.
//! - Deferred operations (outcomes under `outcomes: deferred`) do not wake the writer: they
//!   ride along with the next batch, or are committed when their delay runs out, or on flush.
//! - Leader or follower: a caller whose durable operation finds no batch being written writes
//!   the batch itself, on its own thread (`submit_and_lead`), so an uncontended call costs no
//!   hand-over to the writer thread and back. Whatever queues while a batch is being written
//!   is the writer thread's next batch. At most one batch is applied at a time (`writing`).
//!   A leading caller also writes its batch's journal record unless one is being written; the
//!   writer thread hands records to the journal thread, so it never waits on a sync.

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::error::{Error, Result, StoreFaultKind};
use crate::store::redb::file::Db;
use crate::store::redb::rows::{fault, FileWrites};
use crate::store::rows::semantics::Writes;
use crate::store::{Now, WriteOp};

/// At most this many operations share one transaction.
const MAX_BATCH: usize = 512;
/// A kept transaction is committed (without a sync) after this many batches even when nobody
/// reads: a redb transaction's bookkeeping of the pages it allocated grows with it.
const KEEP_AT_MOST: u32 = 256;

/// Where an operation's result goes once its batch committed.
/// A barrier (no operation) is answered `Ok(None)` once everything queued before it committed.
/// An item's answer: its result, and how many writes the sync that made it durable carried,
/// this one included (1 for a write committed alone; 0 for a refusal or a fault).
pub(in crate::store) type Reply<W> = Box<dyn FnOnce(Result<Option<<W as WriteOp>::Reply>>, u32) + Send>;

pub(in crate::store) struct Item<W: WriteOp> {
    /// `None`: a barrier (flush) that writes nothing.
    pub op: Option<W>,
    pub now: Now,
    /// Deferred items carry the instant by which they must be durable.
    pub deadline: Option<Instant>,
    pub reply: Reply<W>,
    /// For a caller that may give up waiting: whether the writer took the item into a
    /// transaction, or the caller withdrew it first (then it is never applied).
    pub claim: Option<Arc<Claim>>,
}

/// Who got to an item first: the writer (taken into a transaction) or its caller (withdrawn).
#[derive(Debug, Default)]
pub(in crate::store) struct Claim(AtomicU8);

const QUEUED: u8 = 0;
const TAKEN: u8 = 1;
const WITHDRAWN: u8 = 2;

impl Claim {
    /// The caller gives up: true when the item was not taken, and now never will be.
    pub(in crate::store) fn withdraw(&self) -> bool {
        self.0.compare_exchange(QUEUED, WITHDRAWN, Ordering::SeqCst, Ordering::SeqCst).is_ok()
    }

    /// The writer takes it: false when its caller withdrew it.
    fn take(&self) -> bool {
        match self.0.compare_exchange(QUEUED, TAKEN, Ordering::SeqCst, Ordering::SeqCst) {
            Ok(_) => true,
            Err(state) => state == TAKEN,
        }
    }
}

struct Queue<W: WriteOp> {
    items: VecDeque<Item<W>>,
    /// Items that want a commit now (not deferred).
    urgent: usize,
    shutdown: bool,
    /// A batch is being written (by the writer thread or by a leading caller), or a
    /// transaction outside the queue holds the writer (`exclusive`).
    writing: bool,
    /// Callers of `exclusive` waiting for the writer.
    waiting_exclusive: usize,
}

pub(in crate::store) struct Committer<W: WriteOp> {
    queue: Mutex<Queue<W>>,
    wake: Condvar,
    poisoned: OnceLock<String>,
    /// Batches committed to redb whose journal record is still to be written and synced.
    journaling: Mutex<Journaling<W>>,
    /// Signalled when the journal stage finished a record or has work.
    journaled: Condvar,
    /// The redb transaction of the batches applied since the last commit to redb, kept open
    /// for the next batch (see `Kept`). Touched only by the holder of the writer flag.
    kept: Mutex<Option<redb::WriteTransaction>>,
    /// `kept` holds batches redb has not committed: a read must commit them first (`publish`).
    holding: AtomicBool,
    /// Batches applied since the kept transaction was begun.
    kept_batches: AtomicU32,
    /// A kept transaction holding answered batches was lost to a fault: redb lacks them until
    /// the journal is replayed (the next open), so nothing may be read or checkpointed here.
    lost: AtomicBool,
}

/// The journal stage: batches wait here, in the order they committed, for one record.
struct Journaling<W: WriteOp> {
    waiting: Vec<Settle<W>>,
    /// A thread is writing and syncing a record now (one at a time).
    active: bool,
    /// The writer thread stopped: the journal thread finishes what waits and stops.
    shutdown: bool,
    /// The journal thread is parked, waiting for a batch to write.
    journal_parked: bool,
    /// Threads parked in `drain_journal`, waiting for the record being written.
    draining: usize,
}

impl<W: WriteOp> Journaling<W> {
    /// Whether the parked journal thread has a record to write: batches wait and nobody is
    /// writing one. Waking it for anything less is a context switch per batch for nothing (a
    /// thread that leads its own batch writes its own record).
    fn work_for_parked_thread(&self) -> bool {
        self.journal_parked && !self.active && !self.waiting.is_empty()
    }
}

/// A batch committed (visible, not durable) and its answers, owed once its changes are in a
/// synced record.
struct Settle<W: WriteOp> {
    changes: Vec<u8>,
    /// The lap's room held for its record (`Journal::reserve`).
    reserved: u64,
    answers: Vec<Answer<W>>,
}

/// An operation's reply and the result it is owed.
type Answer<W> = (Reply<W>, Result<Option<<W as WriteOp>::Reply>>);

impl<W: WriteOp> Committer<W> {
    pub(in crate::store) fn new() -> Committer<W> {
        Committer {
            queue: Mutex::new(Queue {
                items: VecDeque::new(),
                urgent: 0,
                shutdown: false,
                writing: false,
                waiting_exclusive: 0,
            }),
            wake: Condvar::new(),
            poisoned: OnceLock::new(),
            journaling: Mutex::new(Journaling {
                waiting: Vec::new(),
                active: false,
                shutdown: false,
                journal_parked: false,
                draining: 0,
            }),
            journaled: Condvar::new(),
            kept: Mutex::new(None),
            holding: AtomicBool::new(false),
            kept_batches: AtomicU32::new(0),
            lost: AtomicBool::new(false),
        }
    }

    pub(in crate::store) fn poisoned(&self) -> Option<&str> {
        self.poisoned.get().map(String::as_str)
    }

    fn poison_error(reason: &str) -> Error {
        Error::store(
            StoreFaultKind::Stopped,
            format!("{reason} (the store's writer stopped at that fault; open the store again once it is fixed)"),
        )
    }

    /// Queue one item. Refused at once when the writer is latched or stopping.
    pub(in crate::store) fn submit(&self, item: Item<W>) {
        if let Some(queue) = self.enqueue(item) {
            drop(queue);
            self.wake.notify_one();
        }
    }

    /// Queue one durable item and, when no batch is being written, write the batch (this item
    /// and everything queued with it) on the calling thread. Otherwise the item waits for the
    /// writer thread's next batch, as with `submit`.
    pub(in crate::store) fn submit_and_lead(&self, item: Item<W>, db: &Db) {
        let Some(mut queue) = self.enqueue(item) else { return };
        if queue.writing {
            drop(queue);
            self.wake.notify_one();
            return;
        }
        queue.writing = true;
        let batch = Self::take_batch(&mut queue);
        drop(queue);
        self.write_batch(db, batch, false);
        // The next batch may be applied while this one's record is synced; this caller writes
        // the record itself unless a record is being written already (then its writer, or the
        // journal thread, takes this batch next).
        if self.journal_round(db) {
            self.hand_on();
        }
    }

    /// Commit `batch`, then let the next writer go — also if committing panicked outside the
    /// guarded attempt, so the writer flag is never left set. `wake_journal`: the journal
    /// thread is to write its record (the writer thread never waits on a sync itself).
    fn write_batch(&self, db: &Db, batch: Vec<Item<W>>, wake_journal: bool) {
        let _release = Release(self);
        self.commit_batch(db, batch, wake_journal);
    }

    /// The batch is written: the writer thread may take what queued meanwhile.
    fn done_writing(&self) {
        let waiting = match self.queue.lock() {
            Ok(mut queue) => {
                queue.writing = false;
                !queue.items.is_empty() || queue.shutdown || queue.waiting_exclusive > 0
            }
            Err(_) => true,
        };
        // Wake the writer thread only when it has something to do: an idle wake-up per call
        // is a context switch per call.
        if waiting {
            self.wake.notify_all();
        }
    }

    /// Run `work` while holding the writer: no batch is written meanwhile, and callers whose
    /// operations queue up wait (bounded) as they would for a long batch. For a transaction
    /// opened outside the queue (tests that edit the file); redb would otherwise block a
    /// leading caller inside `begin_write`, beyond any bound.
    /// The journal stage is drained first: `work` may move the journal's mark.
    pub(in crate::store) fn exclusive<T>(&self, db: &Db, work: impl FnOnce() -> T) -> Result<T> {
        let _release = self.hold_writer()?;
        self.drain_journal(db);
        // `work` opens transactions of its own; redb has one writer at a time.
        self.commit_kept(db)?;
        Ok(work())
    }

    /// Take the writer flag ahead of queued batches (once the batch being applied, if any, is
    /// done); dropping the guard lets the next writer go.
    fn hold_writer(&self) -> Result<Release<'_, W>> {
        let poisoned = || Error::store(StoreFaultKind::Defect, "the store's writer queue was poisoned by a panic");
        let mut queue = self.queue.lock().map_err(|_| poisoned())?;
        queue.waiting_exclusive += 1;
        while queue.writing {
            queue = self.wake.wait(queue).map_err(|_| poisoned())?;
        }
        queue.waiting_exclusive -= 1;
        queue.writing = true;
        Ok(Release(self))
    }

    /// Make every batch applied so far visible to redb's readers: the kept transaction, if it
    /// holds any, is committed (without a sync: the journal holds them). Every read in the
    /// owner's process starts here, so it sees every write that was answered. Waits for a
    /// batch being applied, as a writer would.
    pub(in crate::store) fn publish(&self, db: &Db) -> Result<()> {
        if !self.holding.load(Ordering::Acquire) {
            return self.not_lost();
        }
        let _release = self.hold_writer()?;
        self.commit_kept(db)
    }

    /// The store closes (`Shared` drops, nothing else holds it): the kept transaction, if any,
    /// is committed without a sync — the close's checkpoint makes it durable — or, if that
    /// fails, the journal keeps its batches for the next open. In a forked child it is leaked.
    pub(in crate::store) fn close(&mut self, db: &Db) {
        let kept = match self.kept.get_mut() {
            Ok(kept) => kept.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        };
        let Some(mut txn) = kept else { return };
        if db.forked() {
            std::mem::forget(txn);
            return;
        }
        let committed = txn.set_durability(redb::Durability::None).is_ok()
            && catch_unwind(AssertUnwindSafe(move || txn.commit().is_ok())).unwrap_or(false);
        if committed {
            self.holding.store(false, Ordering::Release);
        } else {
            self.lose(
                db,
                &Error::store(StoreFaultKind::Stopped, "the store's last batches could not be committed to its file"),
            );
        }
    }

    fn not_lost(&self) -> Result<()> {
        if self.lost.load(Ordering::Acquire) {
            return Err(Self::poison_error(self.poisoned().unwrap_or(
                "a fault took the batches applied since the store's last commit to the file; the journal holds them",
            )));
        }
        Ok(())
    }

    /// Commit the kept transaction, if any, without a sync (the caller holds the writer flag).
    fn commit_kept(&self, db: &Db) -> Result<()> {
        let kept = self
            .kept
            .lock()
            .map_err(|_| Error::store(StoreFaultKind::Defect, "the store's writer was poisoned by a panic"))?
            .take();
        self.kept_batches.store(0, Ordering::Relaxed);
        let Some(mut txn) = kept else { return self.not_lost() };
        let committed = txn
            .set_durability(redb::Durability::None)
            .map_err(|error| {
                Error::store(StoreFaultKind::Stopped, format!("the store cannot defer its commit: {error}"))
            })
            .and_then(|()| txn.commit().map_err(fault));
        match committed {
            Ok(()) => {
                self.holding.store(false, Ordering::Release);
                Ok(())
            }
            Err(error) => {
                self.lose(db, &error);
                Err(error)
            }
        }
    }

    /// Keep `txn`, which now holds the batch just applied, for the next batch.
    fn keep(&self, txn: redb::WriteTransaction) {
        match self.kept.lock() {
            Ok(mut kept) => {
                *kept = Some(txn);
                // Before the batch's answers can be given (they wait for its record), so a
                // reader that has an answer finds this set.
                self.holding.store(true, Ordering::Release);
            }
            // Unreachable in practice (nothing panics holding this lock); dropping the
            // transaction loses what it holds, and says so.
            Err(_) => self.lose_without_db(),
        }
    }

    /// A transaction holding answered batches was dropped uncommitted (`error` says why): the
    /// writer stops, reads are refused, and the journal keeps every record past the file's
    /// last mark for the next open to replay — no checkpoint may claim the file holds them.
    fn lose(&self, db: &Db, error: &Error) {
        let _ = self.poisoned.set(error.to_string());
        if let Some(journal) = db.journal() {
            journal.fell_behind();
        }
        self.lose_without_db();
    }

    fn lose_without_db(&self) {
        let _ = self.poisoned.set("the store's writer lost its transaction".into());
        self.lost.store(true, Ordering::Release);
        self.holding.store(false, Ordering::Release);
    }

    fn take_batch(queue: &mut Queue<W>) -> Vec<Item<W>> {
        let take = queue.items.len().min(MAX_BATCH);
        let batch: Vec<Item<W>> = queue.items.drain(..take).collect();
        queue.urgent -= batch.iter().filter(|item| item.deadline.is_none()).count();
        batch
    }

    /// Put `item` on the queue and return the queue still locked, or answer it at once with
    /// the reason it cannot be queued.
    fn enqueue(&self, item: Item<W>) -> Option<std::sync::MutexGuard<'_, Queue<W>>> {
        if let Some(reason) = self.poisoned() {
            (item.reply)(Err(Self::poison_error(reason)), 0);
            return None;
        }
        let Ok(mut queue) = self.queue.lock() else {
            (item.reply)(
                Err(Error::store(StoreFaultKind::Defect, "the store's writer queue was poisoned by a panic")),
                0,
            );
            return None;
        };
        if queue.shutdown {
            drop(queue);
            (item.reply)(Err(Error::Unavailable("the store is closing; open it again".into())), 0);
            return None;
        }
        if item.deadline.is_none() {
            queue.urgent += 1;
        }
        queue.items.push_back(item);
        Some(queue)
    }

    /// Ask the writer thread to finish what is queued and stop.
    /// How many items wait in the queue (tests that hold the writer watch callers queue up).
    #[cfg(test)]
    pub(in crate::store) fn queued(&self) -> usize {
        self.queue.lock().map_or(0, |queue| queue.items.len())
    }

    pub(in crate::store) fn shutdown(&self) {
        if let Ok(mut queue) = self.queue.lock() {
            queue.shutdown = true;
        }
        self.wake.notify_all();
    }

    /// The writer thread's loop, with the journal thread beside it: returns when shut down and
    /// both are drained.
    pub(in crate::store) fn run(&self, db: &Db)
    where
        W: Send,
        W::Reply: Send,
    {
        std::thread::scope(|scope| {
            let journal =
                std::thread::Builder::new().name("warden-journal".into()).spawn_scoped(scope, || self.journal_loop(db));
            loop {
                let Some(batch) = self.next_batch() else { break };
                if journal.is_ok() {
                    self.write_batch(db, batch, true);
                } else {
                    // No journal thread (the system refused one): this thread writes the records.
                    self.write_batch(db, batch, false);
                    self.drain_journal(db);
                }
            }
            if let Ok(mut journaling) = self.journaling.lock() {
                journaling.shutdown = true;
            }
            self.journaled.notify_all();
        });
        // Every batch into redb before the store closes (its checkpoint then makes them durable).
        let _ = self.publish(db);
    }

    /// The journal thread: write a record whenever batches wait and no other thread is writing
    /// one; stop once shut down with nothing waiting.
    fn journal_loop(&self, db: &Db) {
        loop {
            {
                let Ok(mut journaling) = self.journaling.lock() else { return };
                while journaling.active || journaling.waiting.is_empty() {
                    if journaling.shutdown && !journaling.active && journaling.waiting.is_empty() {
                        return;
                    }
                    journaling.journal_parked = true;
                    journaling = match self.journaled.wait(journaling) {
                        Ok(journaling) => journaling,
                        Err(_) => return,
                    };
                    journaling.journal_parked = false;
                }
            }
            self.journal_round(db);
        }
    }

    /// After a caller's own round: what queued meanwhile goes to the journal thread.
    fn hand_on(&self) {
        let wake = self.journaling.lock().map_or(true, |journaling| journaling.work_for_parked_thread());
        if wake {
            self.journaled.notify_all();
        }
    }

    /// Write every waiting batch's changes as one record, sync it, and answer them; `false`
    /// when nothing waits or another thread is writing a record (it, or the journal thread,
    /// takes what waits next). One record at a time, each synced before the next is written,
    /// so a power loss can tear only the last one (the journal's recovery rule).
    fn journal_round(&self, db: &Db) -> bool {
        let taken = {
            let Ok(mut journaling) = self.journaling.lock() else { return false };
            if journaling.active || journaling.waiting.is_empty() {
                return false;
            }
            journaling.active = true;
            std::mem::take(&mut journaling.waiting)
        };
        let written = self.write_record(db, &taken);
        let wake = match self.journaling.lock() {
            Ok(mut journaling) => {
                journaling.active = false;
                journaling.draining > 0 || journaling.work_for_parked_thread()
            }
            Err(_) => true,
        };
        if wake {
            self.journaled.notify_all();
        }
        match written {
            Ok(()) => {
                let together =
                    synced_together(taken.iter().flat_map(|settle| settle.answers.iter().map(|(_, result)| result)));
                for settle in taken {
                    for (reply, result) in settle.answers {
                        reply(result, together);
                    }
                }
            }
            Err(error) => {
                for settle in taken {
                    for (reply, _) in settle.answers {
                        reply(Err(error.clone()), 0);
                    }
                }
                if let Some(reason) = self.poisoned() {
                    let reason = reason.to_owned();
                    self.fail_queued(&reason);
                }
            }
        }
        true
    }

    /// The record of `taken`, written and (under `power`) synced; a failure latches the writer
    /// closed before any later record could be written.
    fn write_record(&self, db: &Db, taken: &[Settle<W>]) -> Result<()> {
        if let Some(reason) = self.poisoned() {
            return Err(Self::poison_error(reason));
        }
        let reserved = taken.iter().map(|settle| settle.reserved).sum();
        let payload: Vec<u8> = match taken {
            [one] => one.changes.clone(),
            _ => taken.iter().flat_map(|settle| settle.changes.iter().copied()).collect(),
        };
        // Barriers (and batches that changed nothing) have nothing to keep: every record
        // before them was synced by an earlier round.
        if payload.is_empty() {
            return Ok(());
        }
        let Some(journal) = db.journal() else {
            return Err(Error::store(StoreFaultKind::Stopped, "the store's journal is gone while batches wait for it"));
        };
        journal.append(&payload, reserved).inspect_err(|error| {
            let _ = self.poisoned.set(error.to_string());
        })
    }

    /// Write what waits in the journal stage on this thread, until nothing waits and no record
    /// is being written (before anything that moves the journal's mark).
    fn drain_journal(&self, db: &Db) {
        loop {
            if self.journal_round(db) {
                continue;
            }
            let Ok(mut journaling) = self.journaling.lock() else { return };
            if !journaling.active && journaling.waiting.is_empty() {
                return;
            }
            if journaling.active {
                journaling.draining += 1;
                journaling = match self.journaled.wait(journaling) {
                    Ok(journaling) => journaling,
                    Err(_) => return,
                };
                journaling.draining -= 1;
            }
            drop(journaling);
        }
    }

    /// Wait until something must be committed; take up to `MAX_BATCH` items.
    fn next_batch(&self) -> Option<Vec<Item<W>>> {
        let Ok(mut queue) = self.queue.lock() else { return None };
        loop {
            let earliest = queue.items.iter().filter_map(|item| item.deadline).min();
            let due = earliest.is_some_and(|at| at <= Instant::now());
            if queue.writing {
                // A leading caller is writing a batch; it wakes this thread when done.
                queue = match self.wake.wait(queue) {
                    Ok(queue) => queue,
                    Err(_) => return None,
                };
                continue;
            }
            if queue.urgent > 0 || due || (queue.shutdown && !queue.items.is_empty()) {
                queue.writing = true;
                return Some(Self::take_batch(&mut queue));
            }
            if queue.shutdown {
                return None;
            }
            queue = match earliest {
                Some(at) => {
                    let wait = at.saturating_duration_since(Instant::now()).max(Duration::from_micros(50));
                    match self.wake.wait_timeout(queue, wait) {
                        Ok((queue, _)) => queue,
                        Err(_) => return None,
                    }
                }
                None => match self.wake.wait(queue) {
                    Ok(queue) => queue,
                    Err(_) => return None,
                },
            };
        }
    }

    fn commit_batch(&self, db: &Db, mut batch: Vec<Item<W>>, wake_journal: bool) {
        if let Some(reason) = self.poisoned() {
            let error = Self::poison_error(reason);
            for item in batch {
                (item.reply)(Err(error.clone()), 0);
            }
            return;
        }
        loop {
            match self.apply(db, &batch) {
                Applied::Committed(results) => {
                    let together = synced_together(results.iter());
                    for (item, result) in batch.into_iter().zip(results) {
                        (item.reply)(result, together);
                    }
                    return;
                }
                Applied::Journaled(results, changes, reserved) => {
                    let answers = batch.into_iter().zip(results).map(|(item, result)| (item.reply, result)).collect();
                    let settle = Settle { changes, reserved, answers };
                    let wake = match self.journaling.lock() {
                        Ok(mut journaling) => {
                            journaling.waiting.push(settle);
                            wake_journal && journaling.work_for_parked_thread()
                        }
                        Err(_) => {
                            let error = Error::store(
                                StoreFaultKind::Defect,
                                "the store's journal stage was poisoned by a panic",
                            );
                            let _ = self.poisoned.set(error.to_string());
                            for (reply, _) in settle.answers {
                                reply(Err(error.clone()), 0);
                            }
                            return;
                        }
                    };
                    if wake {
                        self.journaled.notify_all();
                    }
                    return;
                }
                Applied::CommittedThenFault(results, error) => {
                    let together = synced_together(results.iter());
                    for (item, result) in batch.into_iter().zip(results) {
                        (item.reply)(result, together);
                    }
                    let reason = error.to_string();
                    let _ = self.poisoned.set(reason.clone());
                    self.fail_queued(&reason);
                    return;
                }
                Applied::Rejected(index, error) => {
                    let item = batch.remove(index);
                    (item.reply)(Err(error), 0);
                    if batch.is_empty() {
                        return;
                    }
                }
                Applied::Withdrawn(index) => {
                    // Its caller already has its answer; nobody waits for this one.
                    drop(batch.remove(index));
                    if batch.is_empty() {
                        return;
                    }
                }
                Applied::Fault(error) => {
                    let reason = error.to_string();
                    let _ = self.poisoned.set(reason.clone());
                    let error = match error {
                        Error::Store(_) => error,
                        other => Error::store(StoreFaultKind::Stopped, other.to_string()),
                    };
                    for item in batch {
                        (item.reply)(Err(error.clone()), 0);
                    }
                    self.fail_queued(&reason);
                    return;
                }
            }
        }
    }

    /// After a fault, answer everything still queued with it.
    fn fail_queued(&self, reason: &str) {
        let drained: Vec<Item<W>> = match self.queue.lock() {
            Ok(mut queue) => {
                queue.urgent = 0;
                queue.items.drain(..).collect()
            }
            Err(_) => Vec::new(),
        };
        for item in drained {
            (item.reply)(Err(Self::poison_error(reason)), 0);
        }
    }

    /// One attempt at the batch: every operation applied in one transaction, then one commit.
    /// redb panics on some damaged pages instead of returning an error: a panic anywhere in the
    /// attempt is a damaged store, a fault of the batch.
    fn apply(&self, db: &Db, batch: &[Item<W>]) -> Applied<W> {
        if let Err(error) = db.check_still_there() {
            return Applied::Fault(error);
        }
        let touching = std::cell::Cell::new("");
        let applied = match catch_unwind(AssertUnwindSafe(|| self.attempt(db, batch, &touching))) {
            Ok(applied) => applied,
            Err(payload) => Applied::Fault(Error::store(
                StoreFaultKind::Damaged,
                format!(
                    "the store file {} is damaged: redb failed while using the {} table ({}). Run `warden doctor` on \
                     it, and restore it from a backup if the damage is confirmed",
                    db.path().display(),
                    match touching.get() {
                        "" => "first",
                        table => table,
                    },
                    crate::error::panic_text(payload.as_ref())
                ),
            )),
        };
        // A fault while the kept transaction was taken drops it, and with it what it held.
        if let Applied::Fault(error) = &applied {
            let taken = self.kept.lock().map_or(true, |kept| kept.is_none());
            if taken && self.holding.load(Ordering::Acquire) {
                self.lose(db, error);
            }
        }
        applied
    }

    fn attempt(&self, db: &Db, batch: &[Item<W>], touching: &std::cell::Cell<&'static str>) -> Applied<W> {
        let database = match db.database() {
            Ok(database) => database,
            Err(error) => return Applied::Fault(error),
        };
        let kept = match self.kept.lock() {
            Ok(mut kept) => kept.take(),
            Err(_) => {
                return Applied::Fault(Error::store(
                    StoreFaultKind::Defect,
                    "the store's writer was poisoned by a panic",
                ))
            }
        };
        // `held`: the transaction holds batches before this one, so this batch is undone
        // change by change if it must be, never by aborting them with it.
        let (txn, held) = match kept {
            Some(txn) => (txn, true),
            None => match database.begin_write() {
                Ok(txn) => (txn, false),
                Err(error) => return Applied::Fault(fault(error)),
            },
        };
        // Only now, with the transaction open, are items taken: a caller that gave up while
        // the writer waited for the transaction withdrew its item, and it is left out.
        if let Some(index) = batch.iter().position(|item| item.claim.as_ref().is_some_and(|claim| !claim.take())) {
            self.put_back(txn, held);
            return Applied::Withdrawn(index);
        }
        let journal = db.journal();
        let mut results = Vec::with_capacity(batch.len());
        let mut rejected = None;
        let mut log = None;
        let mut reserved = 0;
        {
            let mut rows = FileWrites::open(&txn, touching);
            if journal.is_some() {
                rows = rows.recording();
            }
            if held {
                rows = rows.undoable();
            }
            let mut tx = Writes::new(&mut rows);
            for (index, item) in batch.iter().enumerate() {
                let Some(op) = &item.op else {
                    results.push(Ok(None));
                    continue;
                };
                let now = item.now.read();
                let applied = catch_unwind(AssertUnwindSafe(|| op.apply(&mut tx, now)));
                match applied {
                    Ok(Ok(reply)) => results.push(Ok(Some(reply))),
                    Ok(Err(error)) => {
                        rejected = Some((index, error));
                        break;
                    }
                    Err(payload) => std::panic::resume_unwind(payload),
                }
            }
            if rejected.is_none() {
                log = rows.take_log();
                // A batch too large for the journal's lap is a checkpoint itself: committed
                // durably, with the mark saying the file holds it — once every batch before it
                // is in the journal, so that the mark counts them.
                if let (Some(journal), Some(changes)) = (journal, &log) {
                    match journal.reserve(changes.len()) {
                        Ok(Some(room)) => reserved = room,
                        Ok(None) => {
                            self.drain_journal(db);
                            if let Some(reason) = self.poisoned() {
                                return Applied::Fault(Self::poison_error(reason));
                            }
                            if let Err(error) = journal.mark_in(&mut rows, true, false) {
                                return Applied::Fault(error);
                            }
                            log = None;
                        }
                        Err(error) => return Applied::Fault(error),
                    }
                }
            } else if let Err(error) = rows.undo() {
                return Applied::Fault(error);
            }
        }
        if let Some((index, error)) = rejected {
            self.put_back(txn, held);
            return Applied::Rejected(index, error);
        }
        let Some(journal) = journal else {
            return match txn.commit() {
                Ok(()) => Applied::Committed(results),
                Err(error) => Applied::Fault(fault(error)),
            };
        };
        match log {
            // Journaled: committed without a sync, so the next batch can be applied while this
            // one's record is written and synced; its answers wait for that (`journal_round`).
            // Records are written in the order batches commit, one synced before the next.
            // Kept open for the next batch: redb commits it when a read needs it (`publish`),
            // after `KEEP_AT_MOST` batches, at a checkpoint, or when the store closes.
            Some(changes) => {
                self.keep(txn);
                if self.kept_batches.fetch_add(1, Ordering::Relaxed) + 1 >= KEEP_AT_MOST {
                    if let Err(error) = self.commit_kept(db) {
                        return Applied::Fault(error);
                    }
                }
                Applied::Journaled(results, changes, reserved)
            }
            // The batch is the checkpoint: durable in the file (with every batch the transaction
            // held before it), then a new lap.
            None => match txn.commit() {
                Ok(()) => match self.committed_kept_then(|| journal.checkpointed_with_this()) {
                    Ok(()) => Applied::Committed(results),
                    Err(error) => Applied::CommittedThenFault(results, error),
                },
                Err(error) => Applied::Fault(fault(error)),
            },
        }
    }
}

impl<W: WriteOp> Committer<W> {
    /// After a commit of the transaction that held the kept batches: nothing is held; then `next`.
    fn committed_kept_then<T>(&self, next: impl FnOnce() -> T) -> T {
        self.holding.store(false, Ordering::Release);
        self.kept_batches.store(0, Ordering::Relaxed);
        next()
    }

    /// A transaction left as it was found: kept again when it holds earlier batches, aborted
    /// when it was begun for this attempt.
    fn put_back(&self, txn: redb::WriteTransaction, held: bool) {
        if held {
            self.keep(txn);
        } else {
            let _ = txn.abort();
        }
    }
}

/// Holds the writer flag for a batch or an `exclusive` caller; dropping it (also while
/// unwinding) lets the next writer go.
struct Release<'c, W: WriteOp>(&'c Committer<W>);

impl<W: WriteOp> Drop for Release<'_, W> {
    fn drop(&mut self) {
        self.0.done_writing();
    }
}

enum Applied<W: WriteOp> {
    /// Committed durably (or with no journal): answered now.
    Committed(Vec<Result<Option<W::Reply>>>),
    /// Committed without a sync; answered once its changes (and the room held for them in the
    /// lap) are in a synced journal record.
    Journaled(Vec<Result<Option<W::Reply>>>, Vec<u8>, u64),
    /// The batch is durable, but the journal could not start its next lap: the answers stand,
    /// and the writer stops at the fault.
    CommittedThenFault(Vec<Result<Option<W::Reply>>>, Error),
    Rejected(usize, Error),
    Withdrawn(usize),
    Fault(Error),
}

/// How many of these answers are writes made durable together: a barrier (a flush, which
/// writes nothing) and a refused operation (undone) are not.
fn synced_together<'r, R: 'r>(results: impl Iterator<Item = &'r Result<Option<R>>>) -> u32 {
    u32::try_from(results.filter(|result| matches!(result, Ok(Some(_)))).count()).unwrap_or(u32::MAX)
}

/// A one-shot answer a caller waits for, with a bound.
pub(in crate::store) struct Slot<T> {
    value: Mutex<Option<T>>,
    ready: Condvar,
}

impl<T> Slot<T> {
    pub(in crate::store) fn new() -> Arc<Slot<T>> {
        Arc::new(Slot { value: Mutex::new(None), ready: Condvar::new() })
    }

    pub(in crate::store) fn fill(&self, value: T) {
        if let Ok(mut slot) = self.value.lock() {
            if slot.is_none() {
                *slot = Some(value);
            }
        }
        self.ready.notify_all();
    }

    /// The value, or `None` when `deadline` passed first.
    pub(in crate::store) fn wait(&self, deadline: Instant) -> Option<T> {
        let mut slot = self.value.lock().ok()?;
        loop {
            if let Some(value) = slot.take() {
                return Some(value);
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            slot = self.ready.wait_timeout(slot, left).ok()?.0;
        }
    }
}
