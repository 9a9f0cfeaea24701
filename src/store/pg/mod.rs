//! The PostgreSQL backend: the same kernel operations, applied in PostgreSQL transactions
//! instead of redb's (`docs/POSTGRES.md`).
//!
//! - **One writer at a time per store**: every write transaction takes the store's advisory
//!   lock (`pg_advisory_xact_lock`, keyed by the schema) as its first statement, then reads and
//!   writes under READ COMMITTED. Reads after the lock see every earlier commit, so an operation
//!   decides exactly as it would in the file, on every host; receipt seq and event ids are
//!   assigned in commit order. Locks are taken in one order (that one), so nothing deadlocks.
//! - **The database clock**: `Now::System` is the server's `clock_timestamp()`, read under the
//!   lock in the same round trip, so hosts with skewed clocks judge leases and expiry alike.
//! - **Lost commits resolved exactly**: every write transaction inserts a random 128-bit
//!   `write_id` into `warden_witness`. When COMMIT gets no answer the outcome is decided on a
//!   fresh connection, under the lock (which the lost transaction held until it ended): its
//!   witness present → it committed, and its reply stands; absent → it did not, and the operation
//!   is applied once more there. If that fails too the call is "unavailable" and hands out no
//!   permit.
//! - **Bounded waits**: every transaction sets `lock_timeout`, `statement_timeout` and
//!   `idle_in_transaction_session_timeout`; connections set `connect_timeout`, keepalives and
//!   `tcp_user_timeout`. A zombie transaction of a partitioned client dies by itself.
//! - **Connections**: a small pool of idle connections, no background thread. A connection the
//!   server closed is dropped and replaced at the next checkout, never in the middle of a
//!   transaction. A handle is refused in a forked child (`Store::check_fork`), so a child never
//!   touches the parent's sockets.

mod passfile;
mod rows;
mod schema;
mod sql;
mod tls;

use std::sync::Mutex;
use std::time::Duration;

use postgres::{Client, NoTls};

use super::{Durability, Now, Prefetch, ReadOp, WriteOp};
use crate::clock::{Clock, Micros, SystemClock};
use crate::error::{Error, Result, StoreFaultKind};
use crate::store::rows::Table;
use sql::{commit_unknown, fault, Cache, Lit, Sql};

/// The advisory lock class of a store's writes (the second key is the schema's hash).
const WRITE_LOCK_CLASS: i32 = 0x5744_0002;
/// Idle connections kept per handle.
const POOL: usize = 8;
/// Witness rows older than this are removed (by the writes themselves, a few at a time).
const WITNESS_KEEP: Micros = 24 * 3600 * 1_000_000;

/// The bounds of every wait (`docs/STORE.md`, "PostgreSQL: the worst case of a call").
#[derive(Clone, Copy, Debug)]
pub(crate) struct Bounds {
    /// Connecting, TLS included.
    pub connect: Duration,
    /// Waiting for the store's lock (another writer's transaction).
    pub lock: Duration,
    /// Any one statement.
    pub statement: Duration,
    /// A transaction left idle by a client that went away (the server ends it).
    pub idle: Duration,
}

impl Bounds {
    /// From the store's wait (`WARDEN_WRITE_WAIT_MS`): the lock may take all of it; a statement,
    /// a connection and an abandoned transaction a fraction, never more than a few seconds.
    pub(crate) fn from_wait(wait: Duration) -> Bounds {
        let short = (wait / 4).clamp(Duration::from_millis(100), Duration::from_secs(5));
        Bounds { connect: short, lock: wait, statement: wait.max(short), idle: short }
    }
}

/// How connections are made: plain, or TLS verified by rustls (`tls`).
#[derive(Clone)]
enum Connector {
    Plain,
    Tls(tokio_postgres_rustls::MakeRustlsConnect),
}

struct Conn {
    client: Client,
    cache: Cache,
}

/// One PostgreSQL store, as one process uses it.
pub(crate) struct PgStore {
    config: postgres::Config,
    connector: Connector,
    /// The URL without its password, for messages.
    shown: String,
    pool: Mutex<Vec<Conn>>,
    /// The schema's hash: the second key of the store's advisory locks.
    schema_hash: i32,
    bounds: Bounds,
    /// The database's clock minus this host's, in microseconds, measured at open.
    skew: Micros,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore").field("location", &self.shown).finish()
    }
}

/// A password the URL does not give: `PGPASSWORD`, else the password file's matching line.
fn password_from_environment(config: &postgres::Config) -> Result<Option<String>> {
    if let Ok(password) = std::env::var("PGPASSWORD") {
        return Ok(Some(password));
    }
    let Some(path) = passfile::location() else { return Ok(None) };
    let host = match config.get_hosts().first() {
        Some(postgres::config::Host::Tcp(name)) => name.clone(),
        Some(postgres::config::Host::Unix(path)) => path.display().to_string(),
        None => "localhost".to_owned(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let user = config.get_user().unwrap_or_default().to_owned();
    let database = config.get_dbname().map_or_else(|| user.clone(), str::to_owned);
    passfile::lookup(&path, &host, port, &database, &user).map_err(Error::Config)
}

/// The URL as messages show it: no password, ever.
pub(crate) fn shown(location: &str) -> String {
    match url::Url::parse(location) {
        Ok(mut parsed) => {
            if parsed.password().is_some() {
                let _ = parsed.set_password(Some("***"));
            }
            let pairs: Vec<(String, String)> = parsed
                .query_pairs()
                .map(|(k, v)| {
                    let secret = k.eq_ignore_ascii_case("password") || k.eq_ignore_ascii_case("sslpassword");
                    (k.into_owned(), if secret { "***".into() } else { v.into_owned() })
                })
                .collect();
            if !pairs.is_empty() {
                parsed.query_pairs_mut().clear().extend_pairs(pairs);
            }
            parsed.to_string()
        }
        Err(_) => "a postgresql:// URL that does not parse".into(),
    }
}

impl PgStore {
    /// Connect, check the server and bring the schema up to date.
    pub(crate) fn open(location: &str, wait: Duration) -> Result<PgStore> {
        let mut store = PgStore::configure(location, wait)?;
        let mut conn = store.connect()?;
        schema::ensure(&mut conn.client, &store.shown)?;
        store.schema_hash = schema::schema_hash(&mut conn.client)?;
        store.skew = store.measure_skew(&mut conn.client)?;
        store.checkin(conn);
        Ok(store)
    }

    /// The connection settings of `location`, connecting to nothing yet.
    fn configure(location: &str, wait: Duration) -> Result<PgStore> {
        let shown = shown(location);
        let (location, wanted) = tls::split(location, &shown)?;
        let mut config: postgres::Config = location
            .parse()
            .map_err(|e| Error::Config(format!("the store URL {shown} is not a PostgreSQL connection URL: {e}")))?;
        if config.get_password().is_none() {
            if let Some(password) = password_from_environment(&config)? {
                config.password(password);
            }
        }
        let connector = match &wanted {
            tls::Tls::Disabled => {
                config.ssl_mode(postgres::config::SslMode::Disable);
                Connector::Plain
            }
            tls::Tls::Verified { root_file } => {
                config.ssl_mode(postgres::config::SslMode::Require);
                Connector::Tls(tokio_postgres_rustls::MakeRustlsConnect::new(tls::client_config(root_file.as_deref())?))
            }
        };
        let bounds = Bounds::from_wait(wait);
        config
            .connect_timeout(bounds.connect)
            .tcp_user_timeout(bounds.connect.max(Duration::from_secs(1)))
            .keepalives(true)
            .keepalives_idle(Duration::from_secs(10))
            .keepalives_interval(Duration::from_secs(2))
            .keepalives_retries(3);
        if config.get_application_name().is_none() {
            config.application_name("warden");
        }
        Ok(PgStore { config, connector, shown, pool: Mutex::new(Vec::new()), schema_hash: 0, bounds, skew: 0 })
    }
}

impl PgStore {
    /// Edit rows in one write transaction under the store's lock, outside every operation's
    /// rules (`Store::edit_rows`).
    pub(crate) fn edit_rows(
        &self,
        edit: impl FnOnce(&mut crate::store::rows::semantics::Writes<'_>) -> Result<()>,
    ) -> Result<()> {
        let (mut conn, _) = self.checkout()?;
        let Conn { client, cache } = &mut conn;
        let opening = format!(
            "{}; {}; SELECT coalesce(max(id), 0) AS last_event_id FROM warden_events",
            self.begin(Durability::Durable),
            self.lock_statement()
        );
        let (sql, answered) = Sql::begin(client, cache, &opening).map_err(|e| fault("starting a transaction", &e))?;
        let edited = (|| {
            let last = sql::uint(rows::simple_int(&answered, "last_event_id")?, "warden_events")?;
            let mut rows = rows::PgRows::new(&sql);
            edit(&mut crate::store::rows::semantics::Writes::with_last_event_id(&mut rows, last))
        })();
        let done = match edited {
            Err(error) => {
                sql.rollback();
                Err(error)
            }
            Ok(()) => match sql.commit() {
                Err(refused) => Err(refused),
                Ok(Ok(())) => Ok(()),
                Ok(Err(error)) => Err(fault("committing", &error)),
            },
        };
        self.checkin(conn);
        done
    }
}

/// Schemas made under one base URL for a scratch use (`warden verify --store postgresql://…`),
/// each dropped with everything in it when this is dropped.
pub(crate) struct ScratchSchemas {
    base: PgStore,
    url: String,
    tag: String,
    made: Mutex<Vec<String>>,
}

impl ScratchSchemas {
    /// `url` names the database (its user needs CREATE there); it must not choose a schema.
    pub(crate) fn new(url: &str) -> Result<ScratchSchemas> {
        let base = PgStore::configure(url, Duration::from_secs(30))?;
        if url::Url::parse(url).is_ok_and(|u| u.query_pairs().any(|(k, _)| k == "options")) {
            return Err(Error::Config(format!(
                "the scratch PostgreSQL URL {} sets options=; give the database only: each scratch store gets a \
                 schema of its own",
                base.shown
            )));
        }
        let tag = hex::encode(random_id()?).chars().take(12).collect();
        Ok(ScratchSchemas { base, url: url.to_owned(), tag, made: Mutex::new(Vec::new()) })
    }

    /// The schema for the store `name` (other characters than letters and digits become `_`),
    /// created empty the first time, and the URL that opens it.
    pub(crate) fn location(&self, name: &str) -> Result<String> {
        let clean: String =
            name.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' }).collect();
        let schema = format!("warden_scratch_{}_{clean}", self.tag);
        let mut made = self
            .made
            .lock()
            .map_err(|_| Error::store(StoreFaultKind::Defect, "the scratch schema list was poisoned"))?;
        if !made.contains(&schema) {
            let mut conn = self.base.connect()?;
            conn.client
                .batch_execute(&format!("CREATE SCHEMA \"{schema}\""))
                .map_err(|e| fault(&format!("creating the scratch schema {schema}"), &e))?;
            made.push(schema.clone());
        }
        let separator = if self.url.contains('?') { '&' } else { '?' };
        Ok(format!("{}{separator}options=-csearch_path%3D{schema}", self.url))
    }
}

impl Drop for ScratchSchemas {
    fn drop(&mut self) {
        let made = self.made.get_mut().map(std::mem::take).unwrap_or_default();
        if made.is_empty() {
            return;
        }
        if let Ok(mut conn) = self.base.connect() {
            for schema in made {
                let _ = conn.client.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"));
            }
        }
    }
}

impl PgStore {
    /// The URL as messages show it.
    pub(crate) fn shown(&self) -> &str {
        &self.shown
    }

    /// The database clock minus this host's at open, in microseconds.
    pub(crate) fn skew(&self) -> Micros {
        self.skew
    }

    fn connect(&self) -> Result<Conn> {
        let connected = match &self.connector {
            Connector::Plain => self.config.connect(NoTls),
            Connector::Tls(tls) => self.config.connect(tls.clone()),
        };
        let client = connected.map_err(|e| {
            // The driver's messages name the host and the cause, never the password.
            Error::Unavailable(format!("cannot connect to the PostgreSQL store {}: {}", self.shown, sql::describe(&e)))
        })?;
        Ok(Conn { client, cache: Cache::new() })
    }

    /// An idle connection (`true`: reused, and perhaps closed by the server since) or a new one.
    fn checkout(&self) -> Result<(Conn, bool)> {
        loop {
            let idle = self
                .pool
                .lock()
                .map_err(|_| Error::store(StoreFaultKind::Defect, "the PostgreSQL pool lock was poisoned"))?
                .pop();
            match idle {
                Some(conn) if conn.client.is_closed() => {}
                Some(conn) => return Ok((conn, true)),
                None => return Ok((self.connect()?, false)),
            }
        }
    }

    fn checkin(&self, conn: Conn) {
        if conn.client.is_closed() {
            return;
        }
        if let Ok(mut pool) = self.pool.lock() {
            if pool.len() < POOL {
                pool.push(conn);
            }
        }
    }

    fn measure_skew(&self, client: &mut Client) -> Result<Micros> {
        let before = SystemClock.now();
        let db = database_clock(client)?;
        let after = SystemClock.now();
        Ok(db - (before / 2 + after / 2))
    }

    /// The statement that takes the store's write lock (the first of every write transaction).
    fn lock_statement(&self) -> String {
        format!("SELECT pg_advisory_xact_lock({WRITE_LOCK_CLASS}, {})", self.schema_hash)
    }

    /// BEGIN and the transaction's settings, sent as one simple query.
    fn begin(&self, durability: Durability) -> String {
        let mut text = format!(
            "BEGIN; SET LOCAL standard_conforming_strings = on; SET LOCAL lock_timeout = {}; \
             SET LOCAL statement_timeout = {}; SET LOCAL idle_in_transaction_session_timeout = {}",
            self.bounds.lock.as_millis().max(1),
            self.bounds.statement.as_millis().max(1),
            self.bounds.idle.as_millis().max(1)
        );
        if let Durability::Deferred(_) = durability {
            // Committed without waiting for the WAL flush: durable within the server's
            // wal_writer_delay, lost in a crash before it (what a deferred outcome promises).
            text.push_str("; SET LOCAL synchronous_commit = off");
        }
        text
    }

    /// A write transaction's first round trip, one simple query: BEGIN and its settings; the
    /// store's lock; with `lost`, whether that earlier write's witness is there; this
    /// transaction's witness, with the database clock and the last event id. The lock statement
    /// reads nothing: under READ COMMITTED each statement of the query reads a snapshot taken
    /// when it starts, so the ones after the lock see every commit that came before it (a
    /// statement that waited for the lock would read a snapshot from before its wait).
    ///
    /// Then the rows the operation named ahead (`WriteOp::prefetch`), each answered with its
    /// index in `ahead`; the indices sent are returned (a key PostgreSQL text cannot hold is
    /// left to the operation's own read, which refuses it).
    fn opening(
        &self,
        durability: Durability,
        write_id: &[u8; 16],
        lost: Option<&[u8; 16]>,
        ahead: &[Prefetch],
    ) -> (String, Vec<usize>) {
        let mut text = self.begin(durability);
        text.push_str("; ");
        text.push_str(&self.lock_statement());
        if let Some(lost) = lost {
            text.push_str(&format!(
                "; SELECT count(*) AS lost_found FROM warden_witness WHERE write_id = '\\x{}'::bytea",
                hex::encode(lost)
            ));
        }
        text.push_str(&format!(
            "; INSERT INTO warden_witness (write_id, at) VALUES ('\\x{}'::bytea, {DB_NOW}) \
             RETURNING at AS witness_at, (SELECT coalesce(max(id), 0) FROM warden_events) AS last_event_id",
            hex::encode(write_id)
        ));
        let mut sent = Vec::new();
        for (index, row) in ahead.iter().enumerate() {
            let keyed = [Table::Meta, Table::Effects, Table::EffectReceipts, Table::Approvals, Table::ReceiptIds]
                .map(Table::name);
            let (Some(table), Ok(key)) = (keyed.iter().find(|t| **t == row.table), Sql::literal(&Lit::Text(&row.key)))
            else {
                continue;
            };
            text.push_str(&format!(
                "; SELECT {index} AS ahead, encode(v, 'hex') AS ahead_v FROM warden_{table} WHERE k = {key}"
            ));
            sent.push(index);
        }
        (text, sent)
    }

    /// Apply one write in its own transaction.
    pub(crate) fn write<W: WriteOp>(&self, op: &W, now: &Now, durability: Durability) -> Result<W::Reply> {
        let write_id: [u8; 16] = random_id()?;
        let (mut conn, reused) = self.checkout()?;
        let mut outcome = self.attempt(&mut conn, op, now, durability, &write_id, None);
        if let (Attempt::Stale(_), true) = (&outcome, reused) {
            // An idle connection the server had closed (a restart, an idle timeout): nothing was
            // applied on it; once more on a new one.
            conn = self.connect()?;
            outcome = self.attempt(&mut conn, op, now, durability, &write_id, None);
        }
        #[cfg(feature = "test-exports")]
        if !matches!(outcome, Attempt::Unknown(_)) {
            gate::disarm();
        }
        match outcome {
            Attempt::Stale(error) => Err(error),
            Attempt::Done(result) => {
                self.checkin(conn);
                result?
                    .ok_or_else(|| Error::store(StoreFaultKind::Defect, "a first write found itself already committed"))
            }
            // The server never answered COMMIT: decide from the witness, on a fresh connection.
            Attempt::Unknown(reply) => {
                drop(conn);
                self.resolve(op, now, durability, &write_id, reply)
            }
        }
    }

    /// After a COMMIT whose answer was lost: under the lock (which the lost transaction held
    /// until it ended, so it has ended now) its witness says whether it committed. If it did,
    /// its reply stands; if not, the operation is applied here once more.
    fn resolve<W: WriteOp>(
        &self,
        op: &W,
        now: &Now,
        durability: Durability,
        lost: &[u8; 16],
        reply: W::Reply,
    ) -> Result<W::Reply> {
        let unavailable = |why: &str| {
            Error::Unavailable(format!(
                "PostgreSQL did not answer the commit of this call, and whether it was applied could not be read back \
                 ({why}); it may or may not have been applied (a reservation it made is in progress until its lease \
                 lapses, then AMBIGUOUS). Nothing will retry it blindly"
            ))
        };
        #[cfg(feature = "test-exports")]
        gate::before_reread();
        let mut conn = self.connect().map_err(|e| unavailable(&e.to_string()))?;
        let write_id: [u8; 16] = random_id()?;
        match self.attempt(&mut conn, op, now, durability, &write_id, Some(lost)) {
            Attempt::Stale(error) => Err(unavailable(&error.to_string())),
            Attempt::Done(Ok(Some(again))) => {
                self.checkin(conn);
                Ok(again)
            }
            // The lost transaction's witness is there: it committed, and is confirmed now.
            Attempt::Done(Ok(None)) => {
                let confirmed = self.clock(&mut conn, now).map_err(|e| unavailable(&e.to_string()))?;
                self.checkin(conn);
                Ok(W::confirmed_late(reply, confirmed))
            }
            Attempt::Done(Err(error)) => Err(match error {
                Error::Unavailable(why) => unavailable(&why),
                other => other,
            }),
            Attempt::Unknown(_) => Err(unavailable("the second commit's answer was lost too")),
        }
    }

    /// One transaction: settings, lock and clock, witness, the operation, COMMIT. With `lost`,
    /// first ask whether that earlier write committed (then `Ok(None)`, and nothing else runs).
    fn attempt<W: WriteOp>(
        &self,
        conn: &mut Conn,
        op: &W,
        now: &Now,
        durability: Durability,
        write_id: &[u8; 16],
        lost: Option<&[u8; 16]>,
    ) -> Attempt<W::Reply> {
        let Conn { client, cache } = conn;
        let ahead = op.prefetch();
        let (opening, sent) = self.opening(durability, write_id, lost, &ahead);
        let (sql, answered) = match Sql::begin(client, cache, &opening) {
            Ok(opened) => opened,
            // Nothing ran: the transaction (if it began) ended with the connection.
            Err(error) if sql::connection_gone(&error) => {
                return Attempt::Stale(fault("starting a transaction", &error))
            }
            Err(error) => return Attempt::Done(Err(fault("taking the store's write lock", &error))),
        };
        let started = std::cell::Cell::new(false);
        let applied = (|| -> Result<Option<W::Reply>> {
            if lost.is_some() && rows::simple_int(&answered, "lost_found")? > 0 {
                // The lost transaction's witness is there: it committed.
                return Ok(None);
            }
            for index in sent {
                let value = rows::read_ahead(&answered, index)?;
                let row = &ahead[index];
                sql.read_ahead(row.table, row.key.clone(), value)?;
            }
            let db_now = rows::simple_int(&answered, "witness_at")?;
            let last_event_id = rows::simple_int(&answered, "last_event_id")?;
            let last_event_id = sql::uint(last_event_id, "warden_events")?;
            let at = match now {
                Now::System => db_now,
                other => other.read(),
            };
            if write_id[0] == 0 {
                // About one write in 256 removes old witness rows (bounded, under the lock).
                sql.write(
                    "DELETE FROM warden_witness WHERE write_id IN \
                     (SELECT write_id FROM warden_witness WHERE at < $1 LIMIT 1000)",
                    &[Lit::Int(db_now - WITNESS_KEEP)],
                )?;
            }
            let mut rows = rows::PgRows::new(&sql);
            let mut tables = crate::store::rows::semantics::Writes::with_last_event_id(&mut rows, last_event_id);
            started.set(true);
            op.apply(&mut tables, at).map(Some)
        })();
        let reply = match applied {
            // The lost write committed: this transaction (its own witness) is not needed.
            Ok(None) => {
                sql.rollback();
                return Attempt::Done(Ok(None));
            }
            Ok(Some(reply)) => reply,
            Err(error) => {
                sql.rollback();
                if !started.get() && client.is_closed() {
                    return Attempt::Stale(error);
                }
                return Attempt::Done(Err(error));
            }
        };
        #[cfg(feature = "test-exports")]
        if lost.is_none() {
            gate::before_commit();
        }
        #[cfg(feature = "test-exports")]
        let reply = {
            let injected = if lost.is_none() { COMMIT_FAULT.with(|fault| fault.replace(0)) } else { 0 };
            match injected {
                // COMMIT never reached the server: the transaction ends without it.
                LOSE_COMMIT => {
                    sql.rollback();
                    return Attempt::Unknown(reply);
                }
                // COMMIT landed and its answer was lost.
                LOSE_ANSWER => {
                    return match sql.commit() {
                        Ok(Ok(())) => Attempt::Unknown(reply),
                        Ok(Err(error)) => Attempt::Done(Err(fault("committing", &error))),
                        Err(refused) => Attempt::Done(Err(refused)),
                    };
                }
                _ => reply,
            }
        };
        match sql.commit() {
            Err(refused) => Attempt::Done(Err(refused)),
            Ok(Ok(())) => Attempt::Done(Ok(Some(reply))),
            Ok(Err(error)) if commit_unknown(&error) && lost.is_none() => Attempt::Unknown(reply),
            Ok(Err(error)) => Attempt::Done(Err(fault("committing", &error))),
        }
    }

    /// "Now" by this store's clock: the database's for `Now::System`.
    fn clock(&self, conn: &mut Conn, now: &Now) -> Result<Micros> {
        match now {
            Now::System => database_clock(&mut conn.client),
            other => Ok(other.read()),
        }
    }

    /// Run one read in a REPEATABLE READ, READ ONLY transaction.
    pub(crate) fn read<R: ReadOp>(&self, op: &R, now: &Now) -> Result<R::Reply> {
        let (mut conn, reused) = self.checkout()?;
        let mut result = self.read_in(&mut conn, op, now);
        if result.is_err() && reused && conn.client.is_closed() {
            // An idle connection the server had closed: a read is simply run again.
            conn = self.connect()?;
            result = self.read_in(&mut conn, op, now);
        }
        self.checkin(conn);
        result
    }

    fn read_in<R: ReadOp>(&self, conn: &mut Conn, op: &R, now: &Now) -> Result<R::Reply> {
        let Conn { client, cache } = conn;
        // The clock is read in the same round trip (the snapshot is taken at this first
        // statement).
        let begin = format!(
            "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY; SET LOCAL statement_timeout = {}; \
             SELECT {DB_NOW} AS read_at",
            self.bounds.statement.as_millis().max(1)
        );
        let (sql, answered) = Sql::begin(client, cache, &begin).map_err(|e| fault("starting a read", &e))?;
        let ran = (|| {
            let at = match now {
                Now::System => rows::simple_int(&answered, "read_at")?,
                other => other.read(),
            };
            op.run(&crate::store::rows::semantics::Reads::new(&rows::PgRows::new(&sql)), at)
        })();
        sql.rollback();
        ran
    }

    /// Make every deferred write of this process durable: one commit with an xid waits for the
    /// WAL to be flushed up to it, and so past every earlier commit.
    pub(crate) fn flush(&self) -> Result<()> {
        let (mut conn, _) = self.checkout()?;
        let done = conn
            .client
            .batch_execute("BEGIN; SELECT txid_current(); COMMIT")
            .map_err(|e| fault("flushing deferred writes", &e));
        self.checkin(conn);
        done
    }
}

enum Attempt<Reply> {
    /// The transaction ended with an answer: `Ok(None)` when it found a lost write committed.
    Done(Result<Option<Reply>>),
    /// COMMIT got no answer; the reply the operation computed, should it turn out applied.
    Unknown(Reply),
    /// The connection was closed before the operation ran: nothing was applied.
    Stale(Error),
}

#[cfg(feature = "test-exports")]
thread_local! {
    /// Test support: what the next first commit on this thread does instead of committing plainly.
    static COMMIT_FAULT: std::cell::Cell<u8> = const { std::cell::Cell::new(0) };
}
#[cfg(feature = "test-exports")]
const LOSE_COMMIT: u8 = 1;
#[cfg(feature = "test-exports")]
const LOSE_ANSWER: u8 = 2;

/// Test support: make the next write of this process lose its COMMIT (`answer_lost` false: the
/// COMMIT never reaches the server) or only COMMIT's answer (`answer_lost` true: it committed),
/// so the witness has to decide. Injected at the client, in place of a partitioned network.
#[cfg(feature = "test-exports")]
pub fn lose_next_commit(answer_lost: bool) {
    COMMIT_FAULT.with(|fault| fault.set(if answer_lost { LOSE_ANSWER } else { LOSE_COMMIT }));
}

/// Test support: stop a write at COMMIT, and at reading its witness back, while a test changes
/// the network (`tests/netns/two_hosts.sh`). With `WARDEN_TEST_COMMIT_GATE=DIR`, the first write
/// that finds `DIR/armed` (and removes it) creates `DIR/at-commit` before sending COMMIT and
/// waits for `DIR/go-commit`; when that COMMIT's answer is then lost, it creates `DIR/at-reread`
/// before the fresh connection that reads the witness and waits for `DIR/go-reread`. Each wait
/// ends after 60 s whatever happens.
#[cfg(feature = "test-exports")]
mod gate {
    use std::cell::Cell;
    use std::path::{Path, PathBuf};
    use std::time::{Duration, Instant};

    thread_local! {
        /// The write stopped at COMMIT on this thread, until it ends or reaches its re-read.
        static ARMED: Cell<bool> = const { Cell::new(false) };
    }

    fn dir() -> Option<PathBuf> {
        std::env::var_os("WARDEN_TEST_COMMIT_GATE").map(PathBuf::from)
    }

    fn stop(dir: &Path, point: &str) {
        let _ = std::fs::File::create(dir.join(format!("at-{point}")));
        let go = dir.join(format!("go-{point}"));
        let until = Instant::now() + Duration::from_secs(60);
        while !go.exists() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    pub(super) fn before_commit() {
        let Some(dir) = dir() else { return };
        if std::fs::remove_file(dir.join("armed")).is_ok() {
            ARMED.set(true);
            stop(&dir, "commit");
        }
    }

    pub(super) fn before_reread() {
        if let (true, Some(dir)) = (ARMED.replace(false), dir()) {
            stop(&dir, "reread");
        }
    }

    pub(super) fn disarm() {
        ARMED.set(false);
    }
}

/// The database clock in integer microseconds since the epoch, as SQL.
const DB_NOW: &str = "(extract(epoch FROM clock_timestamp()) * 1000000)::int8";

/// The database clock now, in its own statement.
fn database_clock(client: &mut Client) -> Result<Micros> {
    let row =
        client.query_one(&format!("SELECT {DB_NOW}"), &[]).map_err(|e| fault("reading the database clock", &e))?;
    sql::column(&row, 0, "clock_timestamp")
}

fn random_id() -> Result<[u8; 16]> {
    let mut id = [0u8; 16];
    getrandom::fill(&mut id)
        .map_err(|e| Error::store(StoreFaultKind::Io, format!("the system's random source failed: {e}")))?;
    Ok(id)
}
