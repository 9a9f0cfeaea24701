//! The writer keeps the batches it applied in an open redb transaction until a read, a
//! checkpoint or the close commits them (`commit::Committer::publish`); their records are in the
//! journal before anyone is answered. These tests drop that transaction with a fault that leaves
//! redb itself healthy — an operation that panics — and check that nothing answered is lost: the
//! writer and every read are refused from then on, the clean close writes no checkpoint claiming
//! the file holds the dropped batches, and the next open replays them from the journal.

use serde::{Deserialize, Serialize};

use crate::clock::Micros;
use crate::effect::{EffectRecord, EffectState};
use crate::error::{Error, Result};
use crate::store::{Durability, Now, Protocol, ReadOp, ReadTx, Store, StoreOptions, WriteOp, WriteTx};

const T0: Micros = 1_764_000_000_000_000;

/// A write that stores one committed effect under a key, or panics inside the batch.
#[derive(Serialize, Deserialize, Clone, Debug)]
enum Poke {
    Put(String),
    Panic,
}

impl WriteOp for Poke {
    type Reply = ();
    fn apply(&self, tx: &mut WriteTx<'_>, now: Micros) -> Result<()> {
        match self {
            Poke::Put(key) => tx.put_effect(&EffectRecord {
                effect_key: key.clone(),
                state: EffectState::Committed,
                action_id: format!("act_{key}"),
                action_name: "test.poke".into(),
                action_hash: "0".repeat(64),
                attempt: 1,
                created_at: now,
                updated_at: now,
                lease_expires_at: None,
                result: None,
                error: None,
                resolved_by: None,
                approval_id: None,
            }),
            Poke::Panic => panic!("an operation that panics inside its batch"),
        }
    }
}

/// The state of the effect under a key.
#[derive(Serialize, Deserialize, Clone, Debug)]
struct Look(String);

impl ReadOp for Look {
    type Reply = Option<EffectState>;
    fn run(&self, rx: &ReadTx<'_>, _now: Micros) -> Result<Option<EffectState>> {
        Ok(rx.effect(&self.0)?.map(|effect| effect.state))
    }
}

#[derive(Debug)]
struct Pokes;

impl Protocol for Pokes {
    type Write = Poke;
    type Read = Look;
}

fn open(path: &std::path::Path) -> Store<Pokes> {
    Store::open(path, StoreOptions::default()).expect("open the store")
}

#[test]
fn a_panic_that_drops_the_kept_transaction_loses_no_answered_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("kept.redb");
    let now = Now::Fixed(T0);
    let store = open(&path);
    // Answered, with no read since: only the kept transaction and the journal hold them.
    for n in 0..5 {
        store.write(Poke::Put(format!("k{n}")), &now, Durability::Durable).expect("an answered write");
    }
    let panicked = store.write(Poke::Panic, &now, Durability::Durable);
    assert!(panicked.is_err(), "the panicking operation is refused: {panicked:?}");
    // The file lacks the five: nothing is read from it, nothing more is written to it.
    let read = store.read(&Look("k0".into()), &now);
    assert!(matches!(&read, Err(Error::Store(_) | Error::Poisoned(_))), "a read after the loss: {read:?}");
    let write = store.write(Poke::Put("later".into()), &now, Durability::Durable);
    assert!(write.is_err(), "a write after the loss: {write:?}");
    // A clean close: it must not mark the file as holding every journaled batch.
    drop(store);
    let store = open(&path);
    for n in 0..5 {
        let state = store.read(&Look(format!("k{n}")), &now).expect("read after the next open");
        assert_eq!(state, Some(EffectState::Committed), "k{n} was answered");
    }
    assert_eq!(store.read(&Look("later".into()), &now).expect("read"), None, "refused, so never written");
}

#[test]
fn a_read_sees_every_answered_write_of_the_kept_transaction() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("kept.redb");
    let now = Now::Fixed(T0);
    let store = open(&path);
    for n in 0..300 {
        store.write(Poke::Put(format!("k{n}")), &now, Durability::Durable).expect("write");
        // Past KEEP_AT_MOST batches too: every answered write is visible to the next read.
        if n % 7 == 0 || n > 250 {
            assert_eq!(store.read(&Look(format!("k{n}")), &now).expect("read"), Some(EffectState::Committed));
        }
    }
    drop(store);
    let store = open(&path);
    assert_eq!(store.read(&Look("k299".into()), &now).expect("read"), Some(EffectState::Committed));
}

/// Durable writes that queue behind a busy writer go into one batch, made durable by one
/// journal sync, and each caller is told so: `together` counts the writes that sync carried.
#[test]
fn writes_queued_behind_a_held_writer_share_one_sync_and_each_says_how_many() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(&dir.path().join("together.redb"));
    let now = Now::Fixed(T0);
    let alone = store.write(Poke::Put("alone".into()), &now, Durability::Durable).expect("a write alone");
    assert_eq!(alone.together, 1, "a write nobody else waited with is its sync's only write");
    let deferred =
        store.write(Poke::Put("later".into()), &now, Durability::Deferred(std::time::Duration::from_secs(60)));
    assert_eq!(deferred.expect("a deferred write").together, 0, "nobody waited for a deferred write's sync");
    store.flush().expect("flush");
    let queued = || match &*store.engine.current().expect("the store's mode") {
        crate::store::Mode::Owner(owned) => owned.shared.committer.queued(),
        _ => panic!("this process owns the store"),
    };
    const WRITERS: usize = 3;
    let answers = std::thread::scope(|scope| {
        let mut writers = Vec::new();
        store
            .tamper(|_| {
                for n in 0..WRITERS {
                    let store = &store;
                    let now = &now;
                    writers
                        .push(scope.spawn(move || store.write(Poke::Put(format!("k{n}")), now, Durability::Durable)));
                }
                // The writer is held here, so every caller queues; none is answered yet.
                while queued() < WRITERS {
                    std::thread::yield_now();
                }
                Ok(())
            })
            .expect("hold the writer while the callers queue");
        writers.into_iter().map(|writer| writer.join().expect("a writer thread")).collect::<Vec<_>>()
    });
    for answer in answers {
        assert_eq!(answer.expect("a queued write").together, u32::try_from(WRITERS).unwrap());
    }
}
