//! What the store and its user agree on: the operations the user speaks (`WriteOp`, `ReadOp`,
//! `Protocol`, the rows a write names ahead in `Prefetch`) and the terms of a write (`Now`,
//! `Durability`, `Written`, `Withstands`). A leaf the store and every backend share.

use std::sync::Arc;
use std::time::Duration;

use serde::{de::DeserializeOwned, Serialize};

use super::boundary::{ReadTables, WriteTables};
use super::{rows, tables};
use crate::clock::{Clock, Micros, SystemClock};
use crate::error::{Error, InvalidInputKind, Result};

/// One consistent read, as a read operation sees it (`ReadOp::run`).
pub type ReadTx<'a> = dyn ReadTables + 'a;
/// One write transaction, as a write operation sees it. Crate-private: operations are applied
/// by the store, never opened by a caller (`store` re-exports it to the crate only; a
/// `test-exports` build's tests reach it through `crate::test_support`).
pub type WriteTx<'a> = dyn WriteTables + 'a;

/// One state change: what it reads and writes inside the batch's transaction. Refusals that
/// must keep their writes are returned inside `Ok`; an `Err` means the operation writes
/// nothing (its part of the batch is rolled back).
pub trait WriteOp: Serialize + DeserializeOwned + Clone + Send + Sync + 'static {
    /// What applying the operation answers (carried back over the socket to a client).
    type Reply: Serialize + DeserializeOwned + Send + 'static;
    /// Apply the operation inside the batch's write transaction, at `now`.
    fn apply(&self, tx: &mut WriteTx<'_>, now: Micros) -> Result<Self::Reply>;
    /// True when applying it twice has the effect of applying it once (an outcome keyed by its
    /// receipt id): such an operation is re-sent after a lost answer instead of failing.
    fn resend_safe(&self) -> bool {
        false
    }

    /// Rows this operation will read, named ahead: a backend that pays a network round trip
    /// per read (PostgreSQL) fetches them with the transaction's first statement, under the
    /// lock. A guess, never a promise: a row not named is read when asked for; the file ignores
    /// this.
    fn prefetch(&self) -> Vec<Prefetch> {
        Vec::new()
    }

    /// The reply of a write whose commit was confirmed only later, at `now` by the store's
    /// clock (a PostgreSQL COMMIT whose answer was lost, read back from its witness): an
    /// operation marks a reply that must not be used as it is (a permit whose lease lapsed in
    /// the meantime). The default keeps it.
    fn confirmed_late(reply: Self::Reply, now: Micros) -> Self::Reply {
        let _ = now;
        reply
    }
}

/// A row of a text-keyed table a write operation expects to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prefetch {
    /// The table, by its name (`Table::name`: `effects`, …).
    pub table: &'static str,
    /// The row's key.
    pub key: String,
}

impl Prefetch {
    /// The chain head (the `meta` row every receipt appended reads).
    pub(crate) fn chain_head() -> Prefetch {
        Prefetch { table: rows::Table::Meta.name(), key: tables::META_HEAD.to_string() }
    }

    /// An effect key's row.
    pub(crate) fn effect(key: &str) -> Prefetch {
        Prefetch { table: rows::Table::Effects.name(), key: key.to_string() }
    }

    /// An effect key's outcome index row (a reservation reads it when the key has no row).
    pub(crate) fn outcome_index(key: &str) -> Prefetch {
        Prefetch { table: rows::Table::EffectReceipts.name(), key: key.to_string() }
    }

    /// Whether a receipt id is taken (every receipt appended checks).
    pub(crate) fn receipt_id(id: &str) -> Prefetch {
        Prefetch { table: rows::Table::ReceiptIds.name(), key: id.to_string() }
    }

    /// An approval request's row.
    pub(crate) fn approval(id: &str) -> Prefetch {
        Prefetch { table: rows::Table::Approvals.name(), key: id.to_string() }
    }
}

/// One consistent read.
pub trait ReadOp: Serialize + DeserializeOwned + Send + Sync + 'static {
    /// What the read answers.
    type Reply: Serialize + DeserializeOwned + Send + 'static;
    /// Run the read in one read transaction, at `now`.
    fn run(&self, rx: &ReadTx<'_>, now: Micros) -> Result<Self::Reply>;
}

/// The operations one user of the store (the kernel) speaks.
pub trait Protocol: Send + Sync + 'static {
    /// The state changes it applies.
    type Write: WriteOp;
    /// The reads it runs.
    type Read: ReadOp;
}

/// Where an operation's "now" comes from: read when the operation is applied, inside its
/// transaction.
#[derive(Clone, Debug)]
pub enum Now {
    /// The system clock, read by whichever process applies the operation.
    System,
    /// An instant fixed by the caller (a manual clock in another process).
    Fixed(Micros),
    /// The caller's clock (a manual one): read here, and sent as a fixed instant to an owner in
    /// another process.
    Clock(Arc<dyn Clock>),
}

impl Now {
    /// The instant this source gives now.
    pub fn read(&self) -> Micros {
        match self {
            Now::System => SystemClock.now(),
            Now::Fixed(at) => *at,
            Now::Clock(clock) => clock.now(),
        }
    }

    /// What another process is told: nothing for the system clock (it reads its own).
    pub(super) fn for_wire(&self) -> Option<Micros> {
        match self {
            Now::System => None,
            Now::Fixed(at) => Some(*at),
            Now::Clock(clock) => Some(clock.now()),
        }
    }
}

/// When a write must be durable before the call returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// Committed durably (with whatever else is queued) before the call returns.
    Durable,
    /// The call returns at once; the write becomes durable with the next commit of the store,
    /// or within the delay, or on flush/close. A crash in that window loses it.
    Deferred(Duration),
}

/// A write's answer: its reply (`None` for a deferred write, applied later) and how many writes
/// the commit that made it durable carried, this one included — the group commit's batch as
/// the write saw it: a file store's journal sync (or, without a journal, its commit); 1 on
/// PostgreSQL (a transaction per write); 0 where nothing was waited for (deferred, memory).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Written<R> {
    /// The write's reply; `None` only for a deferred write.
    pub reply: Option<R>,
    /// Writes made durable by the same commit as this one.
    pub together: u32,
}

impl<R> Written<R> {
    /// A write nobody waited for (deferred): no reply yet, no commit seen.
    pub const NOT_WAITED: Written<R> = Written { reply: None, together: 0 };
}

/// What a write that returned survives, for a file store (`durability` in the surfaces' open
/// options). PostgreSQL keeps its own (`synchronous_commit`), and a memory store nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Withstands {
    /// A power loss or an OS crash: each batch's journal record is synced before it returns.
    #[default]
    Power,
    /// A crash of the process only: the journal is written, not synced. A power loss or an OS
    /// crash can lose the last writes — and then a reservation whose effect ran can be forgotten.
    Process,
}

impl Withstands {
    /// `"power"` or `"process"`, as the open options spell it.
    pub fn parse(text: &str) -> Result<Withstands> {
        match text {
            "power" => Ok(Withstands::Power),
            "process" => Ok(Withstands::Process),
            other => Err(Error::invalid_at(InvalidInputKind::Malformed, "durability", format!(
                "durability must be \"power\" (the default: nothing that returned is lost to a power loss) or \"process\" \
                 (only a process crash is survived), got {other:?}"
            ))),
        }
    }

    /// How the open options spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Withstands::Power => "power",
            Withstands::Process => "process",
        }
    }
}

/// The delay of a deferred write when none is given.
pub const DEFAULT_DEFERRED_DELAY: Duration = Duration::from_millis(10);
