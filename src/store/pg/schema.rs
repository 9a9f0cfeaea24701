//! The PostgreSQL schema: forward-only migrations recorded in `warden_schema_version`, applied
//! in one transaction under a transaction-scoped advisory lock, so any number of processes
//! opening a new schema at once apply each migration exactly once. Before anything is created
//! the server is checked: a hot standby, a database that is not UTF8, a search path naming no
//! schema, and a schema this user may not create in are each refused by name.
//!
//! Every table is named `warden_…` in the connection's current schema (the first schema of
//! `search_path` that exists; choose it with `options=-csearch_path=NAME` in the URL). Keys are
//! `text COLLATE "C"` (byte order, the order redb keeps) and bigint; values are the codec's rows
//! (`bytea`, integrity-checked like the file's); timestamps are integer microseconds.

use postgres::Client;
use sha2::{Digest, Sha256};

use super::sql::{column, fault};
use crate::error::{Error, Result};
use crate::store::rows::semantics;
use crate::store::tables;

/// The advisory lock class of schema changes (the second key is the schema's hash).
const SCHEMA_LOCK_CLASS: i32 = 0x5744_0001;

/// One migration: its number, what it does, its statements.
struct Migration {
    version: i32,
    what: &'static str,
    sql: &'static str,
}

/// Every migration this build knows, in order. Never edit one that has shipped: add the next.
const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        what: "the tables of store schema 5 (effects, approvals, receipts, events, snapshots, authority, witness)",
        sql: r#"
CREATE TABLE warden_meta (k text COLLATE "C" PRIMARY KEY, v bytea NOT NULL);
CREATE TABLE warden_effects (k text COLLATE "C" PRIMARY KEY, v bytea NOT NULL);
CREATE TABLE warden_approvals (k text COLLATE "C" PRIMARY KEY, v bytea NOT NULL);
CREATE TABLE warden_approvals_by_action (k text COLLATE "C" PRIMARY KEY, v bytea NOT NULL);
CREATE TABLE warden_receipts (seq bigint PRIMARY KEY CHECK (seq > 0), v bytea NOT NULL);
CREATE TABLE warden_receipt_ids (k text COLLATE "C" PRIMARY KEY, v bytea NOT NULL);
CREATE TABLE warden_effect_receipts (k text COLLATE "C" PRIMARY KEY, v bytea NOT NULL);
CREATE TABLE warden_events (id bigint PRIMARY KEY CHECK (id > 0), v bytea NOT NULL);
CREATE TABLE warden_snapshots (k text COLLATE "C" PRIMARY KEY, v bytea NOT NULL);
CREATE TABLE warden_snapshot_index (
    scope text COLLATE "C" NOT NULL, seq bigint NOT NULL, v bytea NOT NULL, PRIMARY KEY (scope, seq));
CREATE TABLE warden_delegations (k text COLLATE "C" PRIMARY KEY, v bytea NOT NULL);
CREATE TABLE warden_revocations (k text COLLATE "C" PRIMARY KEY, v bytea NOT NULL);
CREATE TABLE warden_delegation_index (
    agent text COLLATE "C" NOT NULL, action text COLLATE "C" NOT NULL, id text COLLATE "C" NOT NULL,
    v bytea NOT NULL, PRIMARY KEY (agent, action, id));
CREATE TABLE warden_delegation_children (
    parent text COLLATE "C" NOT NULL, id text COLLATE "C" NOT NULL, v bytea NOT NULL, PRIMARY KEY (parent, id));
CREATE TABLE warden_delegation_creators (
    agent text COLLATE "C" NOT NULL, id text COLLATE "C" NOT NULL, v bytea NOT NULL, PRIMARY KEY (agent, id));
CREATE TABLE warden_budget_ledger (
    grant_id text COLLATE "C" NOT NULL, metric text COLLATE "C" NOT NULL, seq bigint NOT NULL,
    consumed_at bigint NOT NULL, amount numeric(20, 0) NOT NULL CHECK (amount >= 0), released boolean NOT NULL,
    v bytea NOT NULL, PRIMARY KEY (grant_id, metric, seq));
CREATE INDEX warden_budget_ledger_window ON warden_budget_ledger (grant_id, metric, consumed_at) WHERE NOT released;
CREATE TABLE warden_budget_by_effect (
    effect_key text COLLATE "C" NOT NULL, attempt bigint NOT NULL, v bytea NOT NULL, PRIMARY KEY (effect_key, attempt));
CREATE TABLE warden_witness (write_id bytea PRIMARY KEY, at bigint NOT NULL);
CREATE INDEX warden_witness_at ON warden_witness (at);
"#,
    },
    Migration {
        version: 2,
        what: "one row layout for every engine: the budget ledger keeps only its key and checked value, and the \
           running window sums get their table (budget_sums), as in the file",
        sql: r#"
ALTER TABLE warden_budget_ledger DROP COLUMN consumed_at, DROP COLUMN amount, DROP COLUMN released;
CREATE TABLE warden_budget_sums (
    grant_id text COLLATE "C" NOT NULL, metric text COLLATE "C" NOT NULL, window_seconds bigint NOT NULL,
    v bytea NOT NULL, PRIMARY KEY (grant_id, metric, window_seconds));
"#,
    },
    Migration {
        version: 3,
        what: "the evidence tables: the cached nodes of the receipts' Merkle tree and the signed checkpoints",
        sql: r"
CREATE TABLE warden_merkle_nodes (node bigint PRIMARY KEY, v bytea NOT NULL);
CREATE TABLE warden_checkpoints (number bigint PRIMARY KEY, v bytea NOT NULL);
",
    },
    Migration {
        version: 4,
        what: "the anchors: each sink's record of each checkpoint it was sent",
        sql: r#"
CREATE TABLE warden_anchors (
    sink text COLLATE "C" NOT NULL, checkpoint bigint NOT NULL, v bytea NOT NULL, PRIMARY KEY (sink, checkpoint));
"#,
    },
    Migration {
        version: 5,
        what: "the policies table: the canonical policy each handle ran under, by its hash",
        sql: r#"
CREATE TABLE warden_policies (k text COLLATE "C" PRIMARY KEY, v bytea NOT NULL);
"#,
    },
    Migration {
        version: 6,
        what: "retention: the holds, by name, while which nothing is pruned, and what a prune keeps of each \
           effect's last outcome receipt",
        sql: r#"
CREATE TABLE warden_holds (k text COLLATE "C" PRIMARY KEY, v bytea NOT NULL);
CREATE TABLE warden_pruned_outcomes (k text COLLATE "C" PRIMARY KEY, v bytea NOT NULL);
"#,
    },
    Migration {
        version: 7,
        what: "scoped grants: an approval's grant of the next actions of one shape, by id and by action name",
        sql: r#"
CREATE TABLE warden_scoped_grants (k text COLLATE "C" PRIMARY KEY, v bytea NOT NULL);
CREATE TABLE warden_scoped_grants_by_action (
    action text COLLATE "C" NOT NULL, grant_id text COLLATE "C" NOT NULL, v bytea NOT NULL,
    PRIMARY KEY (action, grant_id));
"#,
    },
];

/// The newest schema this build writes.
pub(crate) const PG_SCHEMA_VERSION: i32 = 7;

fn digest(sql: &str) -> String {
    hex::encode(Sha256::digest(sql.as_bytes()))
}

/// What the server is, checked before anything is created. `shown` is the URL without secrets.
fn check_server(client: &mut Client, shown: &str) -> Result<()> {
    let row = client
        .query_one(
            "SELECT pg_is_in_recovery(), current_setting('server_encoding'), current_schema()::text, \
             current_setting('server_version_num')::int",
            &[],
        )
        .map_err(|e| fault("checking the server", &e))?;
    let in_recovery: bool = column(&row, 0, "pg_settings")?;
    let encoding: String = column(&row, 1, "pg_settings")?;
    let schema: Option<String> = column(&row, 2, "pg_settings")?;
    let version: i32 = column(&row, 3, "pg_settings")?;
    if in_recovery {
        return Err(Error::Config(format!(
            "the PostgreSQL server of {shown} is a hot standby (pg_is_in_recovery() is true): it cannot take writes. \
             Point the store at the primary"
        )));
    }
    if encoding != "UTF8" {
        return Err(Error::Config(format!(
            "the PostgreSQL database of {shown} has encoding {encoding}; Warden stores UTF-8 text and needs a \
             database created with ENCODING 'UTF8'"
        )));
    }
    if schema.is_none() {
        return Err(Error::Config(format!(
            "no schema of the search_path of {shown} exists, so Warden has nowhere to keep its tables. Create the \
             schema, or name one that exists with options=-csearch_path=NAME in the URL"
        )));
    }
    if version < 120_000 {
        return Err(Error::Config(format!(
            "the PostgreSQL server of {shown} is version {version}; Warden needs 12 or newer"
        )));
    }
    Ok(())
}

/// The advisory lock key of this schema's writes and migrations: a class and the schema's hash,
/// so stores in different schemas of one database do not wait on each other.
pub(super) fn schema_hash(client: &mut Client) -> Result<i32> {
    let row = client.query_one("SELECT hashtext(current_schema())", &[]).map_err(|e| fault("naming the schema", &e))?;
    column(&row, 0, "pg_namespace")
}

/// Bring the schema to `PG_SCHEMA_VERSION`, or refuse with the cause.
pub(super) fn ensure(client: &mut Client, shown: &str) -> Result<()> {
    check_server(client, shown)?;
    let hash = schema_hash(client)?;
    let mut tx = client.transaction().map_err(|e| fault("starting the schema check", &e))?;
    tx.execute("SELECT pg_advisory_xact_lock($1, $2)", &[&SCHEMA_LOCK_CLASS, &hash])
        .map_err(|e| fault("waiting for the schema lock", &e))?;
    let row = tx
        .query_one(
            "SELECT to_regclass('warden_schema_version') IS NOT NULL, \
             has_schema_privilege(current_schema(), 'CREATE'), current_schema()::text",
            &[],
        )
        .map_err(|e| fault("reading the schema", &e))?;
    let exists: bool = column(&row, 0, "pg_class")?;
    let may_create: bool = column(&row, 1, "pg_namespace")?;
    let schema: String = column(&row, 2, "pg_namespace")?;
    let mut applied: Vec<(i32, String)> = Vec::new();
    if exists {
        for row in tx
            .query("SELECT version, checksum FROM warden_schema_version ORDER BY version", &[])
            .map_err(|e| fault("reading warden_schema_version", &e))?
        {
            applied.push((column(&row, 0, "warden_schema_version")?, column(&row, 1, "warden_schema_version")?));
        }
    }
    for (index, (version, checksum)) in applied.iter().enumerate() {
        let expected = index as i32 + 1;
        if *version != expected {
            return Err(Error::Config(format!(
                "the Warden schema in {schema} of {shown} has a gap: migration {version} is recorded but {expected} \
                 is not. It was altered by hand; restore it from a backup"
            )));
        }
        if *version > PG_SCHEMA_VERSION {
            return Err(Error::Config(format!(
                "the Warden schema in {schema} of {shown} is at version {}, newer than this build knows \
                 ({PG_SCHEMA_VERSION}); upgrade Warden to use it",
                applied.len()
            )));
        }
        let ours = &MIGRATIONS[index];
        if *checksum != digest(ours.sql) {
            return Err(Error::Config(format!(
                "migration {version} recorded in {schema} of {shown} is not the one this build ships (its checksum \
                 differs): the schema diverged. Restore it from a backup, or use a build that wrote it"
            )));
        }
    }
    if applied.len() < MIGRATIONS.len() && !may_create {
        return Err(Error::Config(format!(
            "the user of {shown} may not CREATE in schema {schema}, and the Warden tables there are missing or older \
             than this build. Grant CREATE on the schema once (GRANT CREATE ON SCHEMA {schema} TO the user), or \
             have an administrator open the store once"
        )));
    }
    if !exists {
        tx.batch_execute(
            "CREATE TABLE warden_schema_version (version integer PRIMARY KEY, checksum text NOT NULL, \
             what text NOT NULL, applied_at timestamptz NOT NULL DEFAULT clock_timestamp())",
        )
        .map_err(|e| fault("creating warden_schema_version", &e))?;
    }
    for migration in &MIGRATIONS[applied.len()..] {
        tx.batch_execute(migration.sql).map_err(|e| fault(&format!("applying migration {}", migration.version), &e))?;
        tx.execute(
            "INSERT INTO warden_schema_version (version, checksum, what) VALUES ($1, $2, $3)",
            &[&migration.version, &digest(migration.sql), &migration.what],
        )
        .map_err(|e| fault("recording a migration", &e))?;
        if migration.version == 1 {
            let head = semantics::genesis_head()?;
            let counter = semantics::zero_snapshot_counter()?;
            tx.execute(
                "INSERT INTO warden_meta (k, v) VALUES ($1, $2), ($3, $4)",
                &[&tables::META_HEAD, &head, &tables::META_SNAPSHOT_SEQ, &counter],
            )
            .map_err(|e| fault("writing the chain's genesis", &e))?;
        }
    }
    tx.commit().map_err(|e| fault("committing the schema", &e))?;
    Ok(())
}
