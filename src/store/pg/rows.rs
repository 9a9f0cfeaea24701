//! The PostgreSQL engine's rows: the row layer over one transaction (`Sql`). Each table is
//! `warden_NAME` with one column per key part (`text COLLATE "C"` or `bigint`) and the value in
//! `v bytea` — the codec's bytes, exactly as the file stores them. This file knows SQL and
//! columns; what the rows mean is `rows::semantics`.

use std::collections::HashMap;
use std::ops::Bound;
use std::sync::{Mutex, OnceLock};

use postgres::types::ToSql;

use super::sql::{column, int, uint, Ahead, Lit, Sql};
use crate::error::{Error, Result, StoreFaultKind};
use crate::store::rows::{check_shape, parts, Own, Part, Put, RowRead, RowWrite, Scan, Table, Visit};

/// Rows fetched per round trip when a scan walks on.
const PAGE: usize = 1000;

/// The key columns of a table, in key order.
fn columns(table: Table) -> &'static [&'static str] {
    match table {
        Table::Receipts => &["seq"],
        Table::Events => &["id"],
        Table::SnapshotIndex => &["scope", "seq"],
        Table::DelegationIndex => &["agent", "action", "id"],
        Table::DelegationChildren => &["parent", "id"],
        Table::DelegationCreators => &["agent", "id"],
        Table::BudgetLedger => &["grant_id", "metric", "seq"],
        Table::BudgetSums => &["grant_id", "metric", "window_seconds"],
        Table::BudgetByEffect => &["effect_key", "attempt"],
        Table::MerkleNodes => &["node"],
        Table::Checkpoints => &["number"],
        Table::Anchors => &["sink", "checkpoint"],
        Table::ScopedGrantsByAction => &["action", "grant_id"],
        _ => &["k"],
    }
}

/// A statement's text, kept for the life of the process: the connection's statement cache and
/// the write buffer key statements by `&'static str`. Each table has a bounded number of them.
fn statement(text: String) -> &'static str {
    static KEPT: OnceLock<Mutex<HashMap<String, &'static str>>> = OnceLock::new();
    let kept = KEPT.get_or_init(Mutex::default);
    let mut kept = match kept.lock() {
        Ok(kept) => kept,
        Err(poisoned) => poisoned.into_inner(),
    };
    if let Some(found) = kept.get(&text) {
        return found;
    }
    let leaked: &'static str = Box::leak(text.clone().into_boxed_str());
    kept.insert(text, leaked);
    leaked
}

fn key_condition(table: Table, parts: usize, first_parameter: usize) -> String {
    columns(table)[..parts]
        .iter()
        .enumerate()
        .map(|(index, column)| format!("{column} = ${}", first_parameter + index))
        .collect::<Vec<_>>()
        .join(" AND ")
}

/// A key part as a statement parameter: text, or a bigint (`None`: beyond bigint, so no row can
/// hold it).
enum Param<'a> {
    Text(&'a str),
    Int(i64),
}

fn param(part: Part<'_>) -> Option<Param<'_>> {
    match part {
        Part::Text(text) => Some(Param::Text(text)),
        Part::Int(value) => i64::try_from(value).ok().map(Param::Int),
    }
}

fn as_sql<'p>(params: &'p [Param<'_>]) -> Vec<&'p (dyn ToSql + Sync)> {
    params
        .iter()
        .map(|param| match param {
            Param::Text(text) => text as &(dyn ToSql + Sync),
            Param::Int(value) => value as &(dyn ToSql + Sync),
        })
        .collect()
}

/// The rows of one PostgreSQL transaction.
pub(super) struct PgRows<'s, 'c> {
    sql: &'s Sql<'c>,
}

impl<'s, 'c> PgRows<'s, 'c> {
    pub(super) fn new(sql: &'s Sql<'c>) -> PgRows<'s, 'c> {
        PgRows { sql }
    }

    fn select_page(&self, table: Table, scan: &Scan<'_>, after: Option<&[Own]>) -> Result<Option<Vec<postgres::Row>>> {
        let cols = columns(table);
        let mut conditions = Vec::new();
        let mut params: Vec<Param<'_>> = Vec::new();
        for part in scan.prefix {
            let Some(value) = param(*part) else { return Ok(None) };
            params.push(value);
            conditions.push(format!("{} = ${}", cols[params.len() - 1], params.len()));
        }
        let next = cols.get(scan.prefix.len());
        for (bound, lower) in [(scan.from, true), (scan.to, false)] {
            let (value, strict) = match bound {
                Bound::Unbounded => continue,
                Bound::Included(value) => (value, false),
                Bound::Excluded(value) => (value, true),
            };
            let Some(column) = next else { return Err(crate::store::rows::shape_fault(table)) };
            match param(value) {
                Some(value) => params.push(value),
                // Beyond bigint: nothing lies at or above a lower bound there; every row lies
                // below an upper one.
                None if lower => return Ok(None),
                None => continue,
            }
            let op = match (lower, strict) {
                (true, false) => ">=",
                (true, true) => ">",
                (false, false) => "<=",
                (false, true) => "<",
            };
            conditions.push(format!("{column} {op} ${}", params.len()));
        }
        let rest = &cols[scan.prefix.len()..];
        if let Some(after) = after {
            let first = params.len() + 1;
            for part in &after[scan.prefix.len()..] {
                params.push(match part {
                    Own::Text(text) => Param::Text(text),
                    Own::Int(value) => Param::Int(int(*value, table.name())?),
                });
            }
            let marks: Vec<String> = (first..=params.len()).map(|n| format!("${n}")).collect();
            conditions.push(format!(
                "({}) {} ({})",
                rest.join(", "),
                if scan.reverse { "<" } else { ">" },
                marks.join(", ")
            ));
        }
        let order: Vec<String> =
            cols.iter().map(|c| format!("{c}{}", if scan.reverse { " DESC" } else { "" })).collect();
        let text = format!(
            "SELECT {}, v FROM warden_{}{}{} ORDER BY {} LIMIT {PAGE}",
            cols.join(", "),
            table.name(),
            if conditions.is_empty() { "" } else { " WHERE " },
            conditions.join(" AND "),
            order.join(", ")
        );
        let params = params;
        self.sql.rows(statement(text), &as_sql(&params), &format!("reading the {} table", table.name())).map(Some)
    }

    fn write_statement(table: Table, how: Put) -> &'static str {
        let cols = columns(table);
        let marks: Vec<String> = (1..=cols.len() + 1).map(|n| format!("${n}")).collect();
        let insert =
            format!("INSERT INTO warden_{} ({}, v) VALUES ({})", table.name(), cols.join(", "), marks.join(", "));
        statement(match how {
            Put::New => insert,
            Put::Replace => format!("{insert} ON CONFLICT ({}) DO UPDATE SET v = EXCLUDED.v", cols.join(", ")),
        })
    }

    fn literals<'k>(table: Table, key: &[Part<'k>]) -> Result<Vec<Lit<'k>>> {
        key.iter()
            .map(|part| match part {
                Part::Text(text) => Ok(Lit::Text(text)),
                Part::Int(value) => Ok(Lit::Int(int(*value, table.name())?)),
            })
            .collect()
    }
}

impl RowRead for PgRows<'_, '_> {
    fn get(&self, table: Table, key: &[Part<'_>]) -> Result<Option<Vec<u8>>> {
        check_shape(table, key)?;
        if let [Part::Text(text)] = key {
            match self.sql.read_before(table.name(), text)? {
                Ahead::Absent => return Ok(None),
                Ahead::Row(bytes) => return Ok(Some(bytes)),
                Ahead::NotRead => {}
            }
        }
        let mut params = Vec::with_capacity(key.len());
        for part in key {
            let Some(value) = param(*part) else { return Ok(None) };
            params.push(value);
        }
        let text =
            statement(format!("SELECT v FROM warden_{} WHERE {}", table.name(), key_condition(table, key.len(), 1)));
        let found = self.sql.row(text, &as_sql(&params), &format!("reading the {} table", table.name()))?;
        found.map(|row| column::<Vec<u8>>(&row, 0, table.name())).transpose()
    }

    fn scan(&self, table: Table, scan: &Scan<'_>, visit: &mut Visit<'_>) -> Result<()> {
        scan.check(table)?;
        let cols = columns(table);
        let shape = table.shape();
        let mut after: Option<Vec<Own>> = None;
        loop {
            let Some(rows) = self.select_page(table, scan, after.as_deref())? else { return Ok(()) };
            let full = rows.len() == PAGE;
            for row in &rows {
                let mut owned = Vec::with_capacity(cols.len());
                for index in 0..cols.len() {
                    owned.push(if shape.is_int(index) {
                        Own::Int(uint(column::<i64>(row, index, table.name())?, table.name())?)
                    } else {
                        Own::Text(column::<String>(row, index, table.name())?)
                    });
                }
                let value: Vec<u8> = column(row, cols.len(), table.name())?;
                if !visit(&parts(&owned), &value)? {
                    return Ok(());
                }
                after = Some(owned);
            }
            if !full {
                return Ok(());
            }
        }
    }

    fn count(&self, table: Table) -> Result<u64> {
        let text = statement(format!("SELECT count(*) FROM warden_{}", table.name()));
        let row = self.sql.row(text, &[], &format!("counting the {} table", table.name()))?;
        row.map(|row| uint(column(&row, 0, table.name())?, table.name())).transpose().map(Option::unwrap_or_default)
    }

    // Every warden_ table of this schema with its indexes and TOAST, as PostgreSQL counts it.
    fn bytes_in_use(&self) -> Result<u64> {
        let row = self.sql.row(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c \
             WHERE c.relkind = 'r' AND c.relname LIKE 'warden\\_%' AND c.relnamespace = current_schema()::regnamespace",
            &[],
            "measuring the tables",
        )?;
        row.map(|row| uint(column(&row, 0, "pg_class")?, "pg_class")).transpose().map(Option::unwrap_or_default)
    }
}

impl RowWrite for PgRows<'_, '_> {
    /// Buffered, sent before the next read of the table or with COMMIT (`Sql::write`). A
    /// `Put::New` of a key that exists fails as a unique violation, which aborts the transaction:
    /// nothing is written.
    fn put(&mut self, table: Table, key: &[Part<'_>], value: &[u8], how: Put) -> Result<()> {
        check_shape(table, key)?;
        let mut values = Self::literals(table, key)?;
        values.push(Lit::Bytes(value));
        self.sql.write(Self::write_statement(table, how), &values)
    }

    fn delete(&mut self, table: Table, key: &[Part<'_>]) -> Result<()> {
        check_shape(table, key)?;
        let text =
            statement(format!("DELETE FROM warden_{} WHERE {}", table.name(), key_condition(table, key.len(), 1)));
        self.sql.write(text, &Self::literals(table, key)?)
    }
}

/// The bigint column `name` of the first row of a simple query's answer that has it (the
/// answers of a transaction's first round trip), or a store fault naming it.
pub(super) fn simple_int(rows: &[postgres::SimpleQueryRow], name: &str) -> Result<i64> {
    let text = rows.iter().find_map(|row| row.try_get(name).ok()).flatten().ok_or_else(|| {
        Error::store(StoreFaultKind::Damaged, format!("PostgreSQL answered no {name} when a write transaction began"))
    })?;
    text.parse().map_err(|_| {
        Error::store(
            StoreFaultKind::Damaged,
            format!("PostgreSQL answered {name} = {text:?} when a write transaction began, not a bigint"),
        )
    })
}

/// The row read ahead as `index` in a transaction's first round trip (`engine::opening`): its
/// value column, or `None` when the row is absent.
pub(super) fn read_ahead(rows: &[postgres::SimpleQueryRow], index: usize) -> Result<Option<Vec<u8>>> {
    let wanted = index.to_string();
    let Some(row) = rows.iter().find(|row| row.try_get("ahead").ok().flatten() == Some(wanted.as_str())) else {
        return Ok(None);
    };
    let text = row.try_get("ahead_v").ok().flatten().ok_or_else(|| {
        Error::store(StoreFaultKind::Damaged, "PostgreSQL answered a row read ahead without its value")
    })?;
    hex::decode(text).map(Some).map_err(|_| {
        Error::store(StoreFaultKind::Damaged, "PostgreSQL answered a row read ahead whose value is not hex")
    })
}
