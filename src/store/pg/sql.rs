//! One PostgreSQL transaction as the backend's operations use it: statements prepared once per
//! connection and reused, every error mapped to the fault it is (`unavailable`: the server or
//! the network, the next call may succeed; `invariant`: an answer of a shape this build never
//! writes, which poisons the handle), and a latch that refuses to commit a transaction in which
//! any statement failed (PostgreSQL answers COMMIT of an aborted transaction with ROLLBACK, not
//! an error).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use postgres::types::ToSql;
use postgres::{Row, Statement, Transaction};

use crate::error::{Error, Result};

/// Statements prepared on one connection, by their text.
pub(super) type Cache = HashMap<&'static str, Statement>;

/// SQLSTATE classes and codes that say the server or the network failed, not the data: nothing
/// half-applied (the transaction is gone), and the next call may succeed.
fn unavailable_code(code: &str) -> bool {
    code.starts_with("08") // connection exception
        || code.starts_with("53") // insufficient resources (too many connections, disk full)
        || code.starts_with("57") // operator intervention: shutdown, statement_timeout (57014)
        || code.starts_with("58") // system error (I/O)
        || code == "55P03" // lock_not_available: lock_timeout
        || code == "25P03" // idle_in_transaction_session_timeout
        || code == "40001" // serialization_failure
        || code == "40P01" // deadlock_detected
        || code == "25006" // read_only_sql_transaction: the server became a standby
}

/// The driver's error with the server's message when there is one (its own text says only "db
/// error" then).
pub(super) fn describe(error: &postgres::Error) -> String {
    match error.as_db_error() {
        Some(db) => format!("{} (SQLSTATE {})", db.message(), db.code().code()),
        None => {
            // The cause (a TLS verdict, an I/O error) is in the source chain.
            let mut text = error.to_string();
            let mut source = std::error::Error::source(error);
            while let Some(cause) = source {
                text.push_str(&format!(": {cause}"));
                source = cause.source();
            }
            text
        }
    }
}

/// A PostgreSQL error as Warden's fault, naming what was being done. Never carries the URL.
pub(super) fn fault(doing: &str, error: &postgres::Error) -> Error {
    match error.as_db_error() {
        Some(db) if unavailable_code(db.code().code()) => Error::Unavailable(format!(
            "PostgreSQL refused while {doing}: {} (SQLSTATE {}); nothing was applied by this call",
            db.message(),
            db.code().code()
        )),
        Some(db) => Error::Store(format!(
            "PostgreSQL failed while {doing}: {} (SQLSTATE {}); nothing was applied. The database holds something \
             this build did not write; run `warden doctor` on the store",
            db.message(),
            db.code().code()
        )),
        None => Error::Unavailable(format!(
            "PostgreSQL could not be reached while {doing} ({}); nothing was applied by this call",
            describe(error)
        )),
    }
}

/// Whether the connection itself is gone: closed, or the server ended the session (a restart,
/// an administrator, an idle timeout).
pub(super) fn connection_gone(error: &postgres::Error) -> bool {
    error.is_closed()
        || error.as_db_error().is_some_and(|db| {
            let code = db.code().code();
            code.starts_with("57P0") || code.starts_with("08") || code == "25P03"
        })
}

/// Whether an error at COMMIT leaves the outcome unknown: the server did not answer (the
/// network, a closed connection). A database error is the server's answer: not committed.
pub(super) fn commit_unknown(error: &postgres::Error) -> bool {
    error.as_db_error().is_none()
}

/// One open transaction.
pub(super) struct Sql<'c> {
    tx: RefCell<Option<Transaction<'c>>>,
    cache: RefCell<&'c mut Cache>,
    failed: Cell<bool>,
}

impl<'c> Sql<'c> {
    pub(super) fn new(tx: Transaction<'c>, cache: &'c mut Cache) -> Sql<'c> {
        Sql { tx: RefCell::new(Some(tx)), cache: RefCell::new(cache), failed: Cell::new(false) }
    }

    fn run<T>(
        &self,
        sql: &'static str,
        doing: &str,
        work: impl FnOnce(&mut Transaction<'c>, &Statement) -> std::result::Result<T, postgres::Error>,
    ) -> Result<T> {
        let mut slot =
            self.tx.try_borrow_mut().map_err(|_| Error::Store("a PostgreSQL transaction was re-entered".into()))?;
        let tx = slot.as_mut().ok_or_else(|| Error::Store("the PostgreSQL transaction already ended".into()))?;
        let mut cache =
            self.cache.try_borrow_mut().map_err(|_| Error::Store("a statement cache was re-entered".into()))?;
        let statement = match cache.get(sql) {
            Some(statement) => statement.clone(),
            None => match tx.prepare(sql) {
                Ok(statement) => {
                    cache.insert(sql, statement.clone());
                    statement
                }
                Err(error) => {
                    self.failed.set(true);
                    return Err(fault(doing, &error));
                }
            },
        };
        work(tx, &statement).map_err(|error| {
            self.failed.set(true);
            fault(doing, &error)
        })
    }

    /// Every row `sql` answers.
    pub(super) fn rows(&self, sql: &'static str, params: &[&(dyn ToSql + Sync)], doing: &str) -> Result<Vec<Row>> {
        self.run(sql, doing, |tx, statement| tx.query(statement, params))
    }

    /// At most one row.
    pub(super) fn row(&self, sql: &'static str, params: &[&(dyn ToSql + Sync)], doing: &str) -> Result<Option<Row>> {
        self.run(sql, doing, |tx, statement| tx.query_opt(statement, params))
    }

    /// The number of rows a statement wrote.
    pub(super) fn exec(&self, sql: &'static str, params: &[&(dyn ToSql + Sync)], doing: &str) -> Result<u64> {
        self.run(sql, doing, |tx, statement| tx.execute(statement, params))
    }

    /// A statement run once, not prepared (settings at the start of a transaction).
    pub(super) fn batch(&self, sql: &str, doing: &str) -> Result<()> {
        let mut slot =
            self.tx.try_borrow_mut().map_err(|_| Error::Store("a PostgreSQL transaction was re-entered".into()))?;
        let tx = slot.as_mut().ok_or_else(|| Error::Store("the PostgreSQL transaction already ended".into()))?;
        tx.batch_execute(sql).map_err(|error| {
            self.failed.set(true);
            fault(doing, &error)
        })
    }

    /// End the transaction: COMMIT. `Err` carries the driver's error so the caller can tell an
    /// answered refusal from an unknown outcome (`commit_unknown`).
    pub(super) fn commit(self) -> std::result::Result<std::result::Result<(), postgres::Error>, Error> {
        if self.failed.get() {
            return Err(Error::Store("refusing to commit a PostgreSQL transaction in which a statement failed".into()));
        }
        let tx = self.tx.into_inner().ok_or_else(|| Error::Store("the PostgreSQL transaction already ended".into()))?;
        Ok(tx.commit())
    }

    /// End the transaction: ROLLBACK (errors ignored: the server rolls back a transaction whose
    /// connection is gone).
    pub(super) fn rollback(self) {
        if let Some(tx) = self.tx.into_inner() {
            let _ = tx.rollback();
        }
    }
}

/// A column of a row, or a store fault naming it (a row of an unexpected shape).
pub(super) fn column<'r, T: postgres::types::FromSql<'r>>(row: &'r Row, index: usize, table: &str) -> Result<T> {
    row.try_get(index).map_err(|error| {
        Error::Store(format!(
            "the PostgreSQL table {table} answered a column of an unexpected type ({error}); the schema was altered. \
             Run `warden doctor` on the store"
        ))
    })
}

/// A stored u64 (seq, event id, attempt) as the bigint PostgreSQL keeps.
pub(super) fn int(value: u64, what: &str) -> Result<i64> {
    i64::try_from(value).map_err(|_| Error::Store(format!("the {what} {value} does not fit a PostgreSQL bigint")))
}

/// A bigint read back as the u64 it was written from.
pub(super) fn uint(value: i64, table: &str) -> Result<u64> {
    u64::try_from(value).map_err(|_| {
        Error::Store(format!("the PostgreSQL table {table} holds a negative number {value}; it was altered"))
    })
}
