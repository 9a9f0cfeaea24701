//! One PostgreSQL transaction as the backend's operations use it: statements prepared once per
//! connection and reused, every error mapped to the fault it is (`unavailable`: the server or
//! the network, the next call may succeed; `invariant`: an answer of a shape this build never
//! writes, which poisons the handle), and a latch that refuses to commit a transaction in which
//! any statement failed (PostgreSQL answers COMMIT of an aborted transaction with ROLLBACK, not
//! an error).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use postgres::types::ToSql;
use postgres::{Client, Row, SimpleQueryMessage, SimpleQueryRow, Statement};

use crate::error::{Error, InvalidInputKind, Result, StoreFaultKind};

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
        // A NUL character in a text value (PostgreSQL text cannot hold one): the input's fault.
        Some(db) if db.code().code() == "22021" => Error::invalid(
            InvalidInputKind::NotCanonical,
            format!(
                "a value holds a character PostgreSQL text cannot hold (NUL) while {doing}: {}; nothing was written",
                db.message()
            ),
        ),
        Some(db) if unavailable_code(db.code().code()) => Error::Unavailable(format!(
            "PostgreSQL refused while {doing}: {} (SQLSTATE {}); nothing was applied by this call",
            db.message(),
            db.code().code()
        )),
        Some(db) => Error::store(
            StoreFaultKind::Io,
            format!(
                "PostgreSQL failed while {doing}: {} (SQLSTATE {}); nothing was applied. The database holds something \
             this build did not write; run `warden doctor` on the store",
                db.message(),
                db.code().code()
            ),
        ),
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

/// A value written into a buffered statement as an SQL literal (`Sql::write`).
pub(super) enum Lit<'a> {
    /// Text: quoted, `'` doubled (`standard_conforming_strings` is on in every transaction, so
    /// a backslash is itself); text holding NUL is refused (PostgreSQL text cannot hold it).
    Text(&'a str),
    /// Bytes, as a hex `bytea` literal.
    Bytes(&'a [u8]),
    /// A bigint.
    Int(i64),
}

impl Lit<'_> {
    fn render(&self, out: &mut String) -> Result<()> {
        match self {
            Lit::Text(text) => {
                if text.contains('\0') {
                    return Err(Error::invalid(
                        InvalidInputKind::NotCanonical,
                        "a value to store holds a NUL character, which PostgreSQL text cannot",
                    ));
                }
                out.push('\'');
                out.push_str(&text.replace('\'', "''"));
                out.push('\'');
            }
            Lit::Bytes(bytes) => {
                out.push_str("'\\x");
                out.push_str(&hex::encode(bytes));
                out.push_str("'::bytea");
            }
            Lit::Int(value) => out.push_str(&value.to_string()),
        }
        Ok(())
    }
}

/// `template` with `$1`, `$2`, … replaced by the rendered `values`.
fn render(template: &str, values: &[Lit<'_>]) -> Result<String> {
    let mut out = String::with_capacity(template.len() + 64);
    let mut rest = template;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let digits: String = rest[at + 1..].chars().take_while(char::is_ascii_digit).collect();
        let index: usize = digits.parse().map_err(|_| {
            Error::store(StoreFaultKind::Defect, format!("a statement template has a bare $: {template}"))
        })?;
        let value = values.get(index.wrapping_sub(1)).ok_or_else(|| {
            Error::store(
                StoreFaultKind::Defect,
                format!("a statement template names ${index}, which was not given: {template}"),
            )
        })?;
        value.render(&mut out)?;
        rest = &rest[at + 1 + digits.len()..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The `warden_…` tables a statement of this backend names (its own static text, so a plain
/// scan: every identifier that starts with `warden_`).
fn tables(sql: &'static str) -> impl Iterator<Item = &'static str> {
    let identifier = |c: char| c.is_ascii_alphanumeric() || c == '_';
    sql.match_indices("warden_").filter_map(move |(at, _)| {
        if sql[..at].chars().next_back().is_some_and(identifier) {
            return None;
        }
        let end = sql[at..].find(|c: char| !identifier(c)).map_or(sql.len(), |n| at + n);
        Some(&sql[at..end])
    })
}

/// Rows read ahead with a transaction's first statement, by (table's file name, key); `None`
/// when the row was absent. A statement that writes a table drops that table's rows, so what is
/// left is what a read now would answer.
/// What a row read ahead says.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Ahead {
    /// Not read ahead, or written since: read it.
    NotRead,
    /// Read ahead, and there was no such row.
    Absent,
    /// Read ahead: its value column.
    Row(Vec<u8>),
}

#[derive(Default)]
struct ReadAhead {
    rows: HashMap<(&'static str, String), Option<Vec<u8>>>,
}

impl ReadAhead {
    fn keep(&mut self, table: &'static str, key: String, value: Option<Vec<u8>>) {
        self.rows.insert((table, key), value);
    }

    fn get(&self, table: &'static str, key: &str) -> Ahead {
        match self.rows.get(&(table, key.to_string())) {
            None => Ahead::NotRead,
            Some(None) => Ahead::Absent,
            Some(Some(value)) => Ahead::Row(value.clone()),
        }
    }

    fn forget(&mut self, statement: &'static str) {
        for table in tables(statement) {
            let file_name = table.trim_start_matches("warden_");
            self.rows.retain(|(read, _), _| *read != file_name);
        }
    }
}

/// One open transaction on one connection. Writes whose result is not needed are buffered and
/// sent together — before the next read of a table they touch (so every read sees them) or with
/// COMMIT, in one round trip — so the store's lock is held for fewer round trips. A write
/// that fails aborts the transaction on the server, so COMMIT cannot succeed after it.
pub(super) struct Sql<'c> {
    client: RefCell<&'c mut Client>,
    cache: RefCell<&'c mut Cache>,
    pending: RefCell<String>,
    /// The tables the buffered writes touch.
    touched: RefCell<Vec<&'static str>>,
    /// Rows read ahead with the transaction's first statement.
    prefetched: RefCell<ReadAhead>,
    failed: Cell<bool>,
    ended: Cell<bool>,
}

impl Drop for Sql<'_> {
    /// A transaction never ended (an early return): roll it back, so the connection goes back
    /// to the pool outside any transaction.
    fn drop(&mut self) {
        if !self.ended.get() {
            let client: &mut Client = self.client.get_mut();
            let _ = client.batch_execute("ROLLBACK");
        }
    }
}

impl<'c> Sql<'c> {
    /// Start a transaction: `begin` is sent as one simple query (BEGIN, its settings, and any
    /// statements that belong in the same round trip); the rows those answered come back. When
    /// it fails, the transaction it may have opened is rolled back, so the connection is outside
    /// any transaction again.
    pub(super) fn begin(
        client: &'c mut Client,
        cache: &'c mut Cache,
        begin: &str,
    ) -> std::result::Result<(Sql<'c>, Vec<SimpleQueryRow>), postgres::Error> {
        let answered = match client.simple_query(begin) {
            Ok(answered) => answered,
            Err(error) => {
                if !client.is_closed() {
                    let _ = client.batch_execute("ROLLBACK");
                }
                return Err(error);
            }
        };
        let rows = answered
            .into_iter()
            .filter_map(|message| match message {
                SimpleQueryMessage::Row(row) => Some(row),
                _ => None,
            })
            .collect();
        let sql = Sql {
            client: RefCell::new(client),
            cache: RefCell::new(cache),
            pending: RefCell::new(String::new()),
            touched: RefCell::new(Vec::new()),
            prefetched: RefCell::new(ReadAhead::default()),
            failed: Cell::new(false),
            ended: Cell::new(false),
        };
        Ok((sql, rows))
    }

    /// A literal for a simple query's text (`Lit::render`).
    pub(super) fn literal(value: &Lit<'_>) -> Result<String> {
        let mut out = String::new();
        value.render(&mut out)?;
        Ok(out)
    }

    /// Keep a row read ahead (`None`: absent).
    pub(super) fn read_ahead(&self, table: &'static str, key: String, value: Option<Vec<u8>>) -> Result<()> {
        self.prefetched
            .try_borrow_mut()
            .map_err(|_| Error::store(StoreFaultKind::Defect, "the read-ahead rows were re-entered"))?
            .keep(table, key, value);
        Ok(())
    }

    /// A row read ahead and not written since.
    pub(super) fn read_before(&self, table: &'static str, key: &str) -> Result<Ahead> {
        let prefetched = self
            .prefetched
            .try_borrow()
            .map_err(|_| Error::store(StoreFaultKind::Defect, "the read-ahead rows were re-entered"))?;
        Ok(prefetched.get(table, key))
    }

    fn client(&self) -> Result<std::cell::RefMut<'_, &'c mut Client>> {
        self.client
            .try_borrow_mut()
            .map_err(|_| Error::store(StoreFaultKind::Defect, "a PostgreSQL transaction was re-entered"))
    }

    /// Send the buffered writes now, when `read` names a table one of them touches.
    fn flush(&self, read: &'static str, doing: &str) -> Result<()> {
        {
            let touched = self
                .touched
                .try_borrow()
                .map_err(|_| Error::store(StoreFaultKind::Defect, "the write buffer was re-entered"))?;
            if touched.is_empty() || !tables(read).any(|table| touched.contains(&table)) {
                return Ok(());
            }
        }
        self.touched
            .try_borrow_mut()
            .map_err(|_| Error::store(StoreFaultKind::Defect, "the write buffer was re-entered"))?
            .clear();
        let batch = std::mem::take(
            &mut *self
                .pending
                .try_borrow_mut()
                .map_err(|_| Error::store(StoreFaultKind::Defect, "the write buffer was re-entered"))?,
        );
        let mut client = self.client()?;
        client.batch_execute(&batch).map_err(|error| {
            self.failed.set(true);
            fault(doing, &error)
        })
    }

    fn run<T>(
        &self,
        sql: &'static str,
        doing: &str,
        work: impl FnOnce(&mut Client, &Statement) -> std::result::Result<T, postgres::Error>,
    ) -> Result<T> {
        self.flush(sql, doing)?;
        let mut client = self.client()?;
        let mut cache = self
            .cache
            .try_borrow_mut()
            .map_err(|_| Error::store(StoreFaultKind::Defect, "a statement cache was re-entered"))?;
        let statement = match cache.get(sql) {
            Some(statement) => statement.clone(),
            None => match client.prepare(sql) {
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
        work(&mut client, &statement).map_err(|error| {
            self.failed.set(true);
            fault(doing, &error)
        })
    }

    /// Every row `sql` answers (buffered writes are sent first).
    pub(super) fn rows(&self, sql: &'static str, params: &[&(dyn ToSql + Sync)], doing: &str) -> Result<Vec<Row>> {
        self.run(sql, doing, |client, statement| client.query(statement, params))
    }

    /// At most one row.
    pub(super) fn row(&self, sql: &'static str, params: &[&(dyn ToSql + Sync)], doing: &str) -> Result<Option<Row>> {
        self.run(sql, doing, |client, statement| client.query_opt(statement, params))
    }

    /// Drop the rows read ahead from the tables `statement` names (it writes them).
    fn forget(&self, statement: &'static str) -> Result<()> {
        self.prefetched
            .try_borrow_mut()
            .map_err(|_| Error::store(StoreFaultKind::Defect, "the read-ahead rows were re-entered"))?
            .forget(statement);
        Ok(())
    }

    /// Buffer a write; its guard is checked by the server. A plain INSERT of a key that exists
    /// fails as a unique violation, which aborts the transaction the same way.
    pub(super) fn write(&self, template: &'static str, values: &[Lit<'_>]) -> Result<()> {
        let statement = render(template, values)?;
        if tables(template).next().is_none() {
            // A read must know which buffered writes it has to see first.
            return Err(Error::store(
                StoreFaultKind::Defect,
                format!("a buffered write names no warden_ table: {template}"),
            ));
        }
        self.forget(template)?;
        let mut touched = self
            .touched
            .try_borrow_mut()
            .map_err(|_| Error::store(StoreFaultKind::Defect, "the write buffer was re-entered"))?;
        for table in tables(template) {
            if !touched.contains(&table) {
                touched.push(table);
            }
        }
        let mut pending = self
            .pending
            .try_borrow_mut()
            .map_err(|_| Error::store(StoreFaultKind::Defect, "the write buffer was re-entered"))?;
        pending.push_str(&statement);
        pending.push_str(";\n");
        Ok(())
    }

    /// End the transaction: the buffered writes and COMMIT, in one round trip. `Err` carries the
    /// driver's error so the caller can tell an answered refusal from an unknown outcome
    /// (`commit_unknown`).
    pub(super) fn commit(self) -> std::result::Result<std::result::Result<(), postgres::Error>, Error> {
        if self.failed.get() {
            return Err(Error::store(
                StoreFaultKind::Stopped,
                "refusing to commit a PostgreSQL transaction in which a statement failed",
            ));
        }
        let mut batch = std::mem::take(
            &mut *self
                .pending
                .try_borrow_mut()
                .map_err(|_| Error::store(StoreFaultKind::Defect, "the write buffer was re-entered"))?,
        );
        batch.push_str("COMMIT");
        self.ended.set(true);
        let mut client = self.client()?;
        match client.batch_execute(&batch) {
            Ok(()) => Ok(Ok(())),
            Err(error) => {
                if error.as_db_error().is_some() {
                    // A statement before COMMIT failed, so COMMIT never ran: end the aborted
                    // transaction.
                    let _ = client.batch_execute("ROLLBACK");
                }
                Ok(Err(error))
            }
        }
    }

    /// End the transaction: ROLLBACK, the buffered writes dropped (errors ignored: the server
    /// rolls back a transaction whose connection is gone).
    pub(super) fn rollback(self) {
        self.ended.set(true);
        if let Ok(mut client) = self.client() {
            let _ = client.batch_execute("ROLLBACK");
        }
    }
}

/// A column of a row, or a store fault naming it (a row of an unexpected shape).
pub(super) fn column<'r, T: postgres::types::FromSql<'r>>(row: &'r Row, index: usize, table: &str) -> Result<T> {
    row.try_get(index).map_err(|error| {
        Error::store(
            StoreFaultKind::Damaged,
            format!(
            "the PostgreSQL table {table} answered a column of an unexpected type ({error}); the schema was altered. \
             Run `warden doctor` on the store"
        ),
        )
    })
}

/// A stored u64 (seq, event id, attempt) as the bigint PostgreSQL keeps.
pub(super) fn int(value: u64, what: &str) -> Result<i64> {
    i64::try_from(value).map_err(|_| {
        Error::store(StoreFaultKind::Limit, format!("the {what} {value} does not fit a PostgreSQL bigint"))
    })
}

/// A bigint read back as the u64 it was written from.
pub(super) fn uint(value: i64, table: &str) -> Result<u64> {
    u64::try_from(value).map_err(|_| {
        Error::store(
            StoreFaultKind::Damaged,
            format!("the PostgreSQL table {table} holds a negative number {value}; it was altered"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::{render, Ahead, Lit};

    #[test]
    fn values_are_rendered_as_literals_and_never_read_as_placeholders() {
        // (template, values, rendered)
        let rows: Vec<(&str, Vec<Lit<'_>>, &str)> = vec![
            ("VALUES ($1)", vec![Lit::Text("it's")], "VALUES ('it''s')"),
            ("VALUES ($1)", vec![Lit::Text("\\'; DROP TABLE t; --")], "VALUES ('\\''; DROP TABLE t; --')"),
            ("VALUES ($1, $2)", vec![Lit::Text("$2"), Lit::Int(-7)], "VALUES ('$2', -7)"),
            ("VALUES ($2, $1)", vec![Lit::Int(i64::MIN), Lit::Text("x")], "VALUES ('x', -9223372036854775808)"),
            ("VALUES ($1)", vec![Lit::Bytes(&[0, 0xff, b'\''])], "VALUES ('\\x00ff27'::bytea)"),
            ("VALUES ($1)", vec![Lit::Text("")], "VALUES ('')"),
        ];
        for (template, values, rendered) in rows {
            assert_eq!(render(template, &values).unwrap(), rendered, "{template}");
        }
    }

    #[test]
    fn a_row_read_ahead_is_answered_until_a_statement_writes_its_table() {
        let mut ahead = super::ReadAhead::default();
        ahead.keep("effects", "k1".into(), Some(vec![1]));
        ahead.keep("effects", "k2".into(), None);
        ahead.keep("meta", "chain_head".into(), Some(vec![2]));
        assert_eq!(ahead.get("effects", "k1"), Ahead::Row(vec![1]));
        assert_eq!(ahead.get("effects", "k2"), Ahead::Absent, "an absent row is an answer too");
        assert_eq!(ahead.get("effects", "k3"), Ahead::NotRead, "a row never read ahead");
        assert_eq!(ahead.get("approvals", "k1"), Ahead::NotRead, "another table's row of the same key");
        // A write to another table (even one whose name ends the same) keeps them.
        ahead.forget("INSERT INTO warden_effect_receipts (k, v) VALUES ($1, $2)");
        assert_eq!(ahead.get("effects", "k1"), Ahead::Row(vec![1]));
        ahead.forget("INSERT INTO warden_effects (k, v) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v");
        assert_eq!(ahead.get("effects", "k1"), Ahead::NotRead);
        assert_eq!(ahead.get("effects", "k2"), Ahead::NotRead);
        assert_eq!(ahead.get("meta", "chain_head"), Ahead::Row(vec![2]));
    }

    #[test]
    fn the_tables_a_statement_names_are_found_and_nothing_else() {
        let named = |sql: &'static str| super::tables(sql).collect::<Vec<_>>();
        assert_eq!(
            named("INSERT INTO warden_witness (a) VALUES (1) RETURNING (SELECT max(id) FROM warden_events)"),
            ["warden_witness", "warden_events"]
        );
        assert_eq!(named("SELECT v FROM warden_effects WHERE k = $1"), ["warden_effects"]);
        assert_eq!(named("SELECT x_warden_effects FROM t"), Vec::<&str>::new());
        assert_eq!(named("SELECT 1 FROM warden_meta"), ["warden_meta"]);
        assert_eq!(named("SELECT clock_timestamp()"), Vec::<&str>::new());
    }

    #[test]
    fn a_template_naming_a_missing_value_or_a_nul_in_text_is_refused() {
        assert!(render("VALUES ($2)", &[Lit::Int(1)]).is_err());
        assert!(render("VALUES ($0)", &[Lit::Int(1)]).is_err());
        assert!(render("VALUES ($)", &[Lit::Int(1)]).is_err());
        let nul = render("VALUES ($1)", &[Lit::Text("a\0b")]).unwrap_err();
        assert!(nul.to_string().contains("NUL"), "{nul}");
    }
}
