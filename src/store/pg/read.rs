//! `PgReadTx`: the boundary's read tables over one REPEATABLE READ, READ ONLY transaction (one
//! snapshot of the whole store, as a redb read transaction is).

use std::cell::Cell;

use super::rows::{self, seq_column, PgDelegations};
use super::sql::{column, int, Sql};
use crate::approval::{ApprovalRecord, ApprovalStatus};
use crate::authority::record::{DelegationRecord, Revocation, StoredDelegation};
use crate::clock::Micros;
use crate::effect::{EffectRecord, EffectState};
use crate::error::{Error, Result};
use crate::event::Event;
use crate::receipt::{ChainReport, StoredReceipt};
use crate::snapshot_record::SnapshotRecord;
use crate::store::authority_rows::LedgerEntry;
use crate::store::boundary::{AuthorityReads, CountedSource, ReadTables};
use crate::store::codec::decode;
use crate::store::records::{ChainHead, StoredEffect};
use crate::store::tables::{self, name};
use crate::store::tx::bound;

/// Rows fetched per round trip when a read walks a whole table.
const PAGE: i64 = 1000;

/// One consistent read.
pub(crate) struct PgReadTx<'s, 'c> {
    sql: &'s Sql<'c>,
}

impl<'s, 'c> PgReadTx<'s, 'c> {
    pub(super) fn new(sql: &'s Sql<'c>) -> PgReadTx<'s, 'c> {
        PgReadTx { sql }
    }

    fn with_result(&self, stored: StoredEffect) -> Result<EffectRecord> {
        if stored.state != EffectState::Committed || stored.result.is_some() {
            if stored.state == EffectState::Failed {
                rows::check_failed(self.sql, &stored)?;
            }
            return Ok(stored.into_record(None));
        }
        let result = match rows::outcome_seq(self.sql, &stored.effect_key)? {
            None => None,
            Some(seq) => rows::receipt(self.sql, seq)?.and_then(|receipt| receipt.executor_result),
        };
        Ok(stored.into_record(result))
    }

    /// Every `(key, value)` of a text-keyed table in key order, a page per round trip.
    fn text_table(
        &self,
        page: &'static str,
        table: &'static str,
        mut each: impl FnMut(String, Vec<u8>) -> Result<bool>,
    ) -> Result<()> {
        let mut after = String::new();
        let mut first = true;
        loop {
            let rows = self.sql.rows(page, &[&first, &after, &PAGE], &format!("reading the {table} table"))?;
            let full = rows.len() as i64 == PAGE;
            for row in rows {
                let key: String = column(&row, 0, table)?;
                let value: Vec<u8> = column(&row, 1, table)?;
                after.clone_from(&key);
                if !each(key, value)? {
                    return Ok(());
                }
            }
            first = false;
            if !full {
                return Ok(());
            }
        }
    }

    /// Every `(seq, value)` of a bigint-keyed table from `from` on, in order.
    fn seq_table(
        &self,
        page: &'static str,
        table: &'static str,
        from: u64,
        mut each: impl FnMut(u64, Vec<u8>) -> Result<bool>,
    ) -> Result<()> {
        let mut next = int(from, "seq")?;
        loop {
            let rows = self.sql.rows(page, &[&next, &PAGE], &format!("reading the {table} table"))?;
            let full = rows.len() as i64 == PAGE;
            for row in rows {
                let seq = seq_column(&row, 0, table)?;
                let value: Vec<u8> = column(&row, 1, table)?;
                next = int(seq, "seq")?.saturating_add(1);
                if !each(seq, value)? {
                    return Ok(());
                }
            }
            if !full {
                return Ok(());
            }
        }
    }

    fn check_text_table<T: serde::de::DeserializeOwned>(
        &self,
        report: &mut Vec<(&'static str, u64, Vec<String>)>,
        page: &'static str,
        table: &'static str,
        check: impl Fn(T, &str) -> Result<()>,
    ) -> Result<()> {
        let mut rows = 0u64;
        let mut problems = Vec::new();
        self.text_table(page, table, |key, value| {
            rows += 1;
            if let Err(error) = decode::<T>(table, &key.as_str(), &value).and_then(|row| check(row, &key)) {
                problems.push(error.to_string());
            }
            Ok(true)
        })?;
        report.push((table, rows, problems));
        Ok(())
    }

    /// Rows of a table with a composite key, each decoded under the key its columns spell.
    fn check_rows(
        &self,
        report: &mut Vec<(&'static str, u64, Vec<String>)>,
        select: &'static str,
        table: &'static str,
        check: impl Fn(&postgres::Row) -> Result<()>,
    ) -> Result<()> {
        let mut problems = Vec::new();
        let found = self.sql.rows(select, &[], &format!("reading the {table} table"))?;
        for row in &found {
            if let Err(error) = check(row) {
                problems.push(error.to_string());
            }
        }
        report.push((table, found.len() as u64, problems));
        Ok(())
    }
}

/// Paging statements: `$1` says whether this is the first page (no lower bound).
macro_rules! text_page {
    ($table:literal) => {
        concat!("SELECT k, v FROM ", $table, " WHERE $1 OR k > $2 ORDER BY k LIMIT $3")
    };
}

impl ReadTables for PgReadTx<'_, '_> {
    fn effect(&self, effect_key: &str) -> Result<Option<EffectRecord>> {
        let Some(stored) = rows::effect_row(self.sql, effect_key)? else { return Ok(None) };
        self.with_result(stored).map(Some)
    }

    fn effects(&self, state: Option<EffectState>, limit: usize) -> Result<Vec<EffectRecord>> {
        let mut out = Vec::new();
        if limit == 0 {
            return Ok(out);
        }
        self.text_table(text_page!("warden_effects"), name::EFFECTS, |key, value| {
            let stored: StoredEffect = decode(name::EFFECTS, &key.as_str(), &value)?;
            if state.is_none_or(|wanted| stored.state == wanted) {
                out.push(self.with_result(stored)?);
            }
            Ok(out.len() < limit)
        })?;
        Ok(out)
    }

    fn approval(&self, approval_id: &str) -> Result<Option<ApprovalRecord>> {
        rows::approval(self.sql, approval_id)
    }

    fn pending_approvals(&self, now: Micros) -> Result<Vec<ApprovalRecord>> {
        let mut out = Vec::new();
        self.text_table(text_page!("warden_approvals"), name::APPROVALS, |key, value| {
            let record: ApprovalRecord = decode(name::APPROVALS, &key.as_str(), &value)?;
            let record = bound(record, &key)?;
            if record.status == ApprovalStatus::Pending && now <= record.expires_at {
                out.push(record);
            }
            Ok(true)
        })?;
        out.sort_by_key(|record| record.requested_at);
        Ok(out)
    }

    fn receipt(&self, seq: u64) -> Result<Option<StoredReceipt>> {
        rows::receipt(self.sql, seq)
    }

    fn receipt_seq(&self, receipt_id: &str) -> Result<Option<u64>> {
        rows::receipt_seq(self.sql, receipt_id)
    }

    fn receipts(&self, from: u64, limit: usize) -> Result<Vec<(u64, StoredReceipt)>> {
        let mut out = Vec::new();
        if limit == 0 {
            return Ok(out);
        }
        self.seq_table(
            "SELECT seq, v FROM warden_receipts WHERE seq >= $1 ORDER BY seq LIMIT $2",
            name::RECEIPTS,
            from,
            |seq, value| {
                out.push((seq, decode(name::RECEIPTS, &seq, &value)?));
                Ok(out.len() < limit)
            },
        )?;
        Ok(out)
    }

    fn last_receipts(&self, n: usize) -> Result<Vec<(u64, StoredReceipt)>> {
        let count = i64::try_from(n).unwrap_or(i64::MAX);
        let mut out = Vec::new();
        for row in self.sql.rows(
            "SELECT seq, v FROM warden_receipts ORDER BY seq DESC LIMIT $1",
            &[&count],
            "reading the last receipts",
        )? {
            let seq = seq_column(&row, 0, name::RECEIPTS)?;
            let value: Vec<u8> = column(&row, 1, name::RECEIPTS)?;
            out.push((seq, decode(name::RECEIPTS, &seq, &value)?));
        }
        out.reverse();
        Ok(out)
    }

    fn receipt_count(&self) -> Result<u64> {
        let row = self.sql.row("SELECT count(*) FROM warden_receipts", &[], "counting the receipts")?;
        row.map(|row| seq_column(&row, 0, name::RECEIPTS)).transpose().map(Option::unwrap_or_default)
    }

    fn events(&self, after: u64, limit: usize) -> Result<Vec<Event>> {
        let mut out = Vec::new();
        if limit == 0 {
            return Ok(out);
        }
        self.seq_table(
            "SELECT id, v FROM warden_events WHERE id >= $1 ORDER BY id LIMIT $2",
            name::EVENTS,
            after.saturating_add(1),
            |id, value| {
                out.push(decode(name::EVENTS, &id, &value)?);
                Ok(out.len() < limit)
            },
        )?;
        Ok(out)
    }

    fn verify_chain(&self) -> Result<ChainReport> {
        let head = match self.sql.row(
            "SELECT v FROM warden_meta WHERE k = $1",
            &[&tables::META_HEAD],
            "reading the chain head",
        )? {
            // A head that fails its check is reported as no head (`head_mismatch`).
            Some(row) => {
                let bytes: Vec<u8> = column(&row, 0, name::META)?;
                decode::<ChainHead>(name::META, &tables::META_HEAD, &bytes).ok().map(|head| (head.seq, head.hash))
            }
            None => None,
        };
        let mut rows = Vec::new();
        self.seq_table(
            "SELECT seq, v FROM warden_receipts WHERE seq >= $1 ORDER BY seq LIMIT $2",
            name::RECEIPTS,
            0,
            |seq, value| {
                rows.push((seq, decode::<StoredReceipt>(name::RECEIPTS, &seq, &value).map_err(|e| e.to_string())));
                Ok(true)
            },
        )?;
        Ok(crate::receipt::verify_chain(rows, head))
    }

    fn snapshot(&self, id: &str) -> Result<Option<SnapshotRecord>> {
        rows::text_row(self.sql, "SELECT v FROM warden_snapshots WHERE k = $1", name::SNAPSHOTS, id)
    }

    fn snapshot_page(&self, scope: &str, before: Option<u64>, limit: usize) -> Result<(Vec<SnapshotRecord>, bool)> {
        let upper = int(before.unwrap_or(u64::MAX >> 1), "snapshot seq")?;
        let take = i64::try_from(limit).unwrap_or(i64::MAX - 1).saturating_add(1);
        let found = self.sql.rows(
            "SELECT seq, v FROM warden_snapshot_index WHERE scope = $1 AND seq < $2 ORDER BY seq DESC LIMIT $3",
            &[&scope, &upper, &take],
            "reading the snapshot index",
        )?;
        let more = found.len() > limit;
        let mut out = Vec::new();
        for row in found.iter().take(limit) {
            let seq = seq_column(row, 0, name::SNAPSHOT_INDEX)?;
            let value: Vec<u8> = column(row, 1, name::SNAPSHOT_INDEX)?;
            let id: String = decode(name::SNAPSHOT_INDEX, &(scope, seq), &value)?;
            let record = self
                .snapshot(&id)?
                .ok_or_else(|| Error::Store(format!("snapshot {id} is indexed but missing; the store was altered")))?;
            out.push(record);
        }
        Ok((out, more))
    }

    fn check_all(&self) -> Result<Vec<(&'static str, u64, Vec<String>)>> {
        let mut report = Vec::new();
        self.check_text_table::<StoredEffect>(&mut report, text_page!("warden_effects"), name::EFFECTS, |_, _| Ok(()))?;
        self.check_text_table::<ApprovalRecord>(
            &mut report,
            text_page!("warden_approvals"),
            name::APPROVALS,
            |r, k| bound(r, k).map(drop),
        )?;
        self.check_text_table::<String>(
            &mut report,
            text_page!("warden_approvals_by_action"),
            name::APPROVALS_BY_ACTION,
            |_, _| Ok(()),
        )?;
        self.check_text_table::<SnapshotRecord>(
            &mut report,
            text_page!("warden_snapshots"),
            name::SNAPSHOTS,
            |_, _| Ok(()),
        )?;
        self.check_text_table::<u64>(&mut report, text_page!("warden_receipt_ids"), name::RECEIPT_IDS, |_, _| Ok(()))?;
        self.check_text_table::<u64>(
            &mut report,
            text_page!("warden_effect_receipts"),
            name::EFFECT_RECEIPTS,
            |_, _| Ok(()),
        )?;
        self.check_text_table::<DelegationRecord>(
            &mut report,
            text_page!("warden_delegations"),
            name::DELEGATIONS,
            |_, _| Ok(()),
        )?;
        self.check_text_table::<Revocation>(
            &mut report,
            text_page!("warden_revocations"),
            name::REVOCATIONS,
            |_, _| Ok(()),
        )?;
        let mut events = (0u64, Vec::new());
        self.seq_table(
            "SELECT id, v FROM warden_events WHERE id >= $1 ORDER BY id LIMIT $2",
            name::EVENTS,
            0,
            |id, value| {
                events.0 += 1;
                if let Err(error) = decode::<Event>(name::EVENTS, &id, &value) {
                    events.1.push(error.to_string());
                }
                Ok(true)
            },
        )?;
        report.push((name::EVENTS, events.0, events.1));
        self.check_rows(&mut report, "SELECT scope, seq, v FROM warden_snapshot_index", name::SNAPSHOT_INDEX, |row| {
            let scope: String = column(row, 0, name::SNAPSHOT_INDEX)?;
            let seq = seq_column(row, 1, name::SNAPSHOT_INDEX)?;
            decode::<String>(
                name::SNAPSHOT_INDEX,
                &(scope.as_str(), seq),
                &column::<Vec<u8>>(row, 2, name::SNAPSHOT_INDEX)?,
            )
            .map(drop)
        })?;
        self.check_rows(&mut report, "SELECT k, v FROM warden_meta", name::META, |row| {
            let key: String = column(row, 0, name::META)?;
            let value: Vec<u8> = column(row, 1, name::META)?;
            match key.as_str() {
                tables::META_HEAD => decode::<ChainHead>(name::META, &tables::META_HEAD, &value).map(drop),
                tables::META_SNAPSHOT_SEQ => decode::<u64>(name::META, &tables::META_SNAPSHOT_SEQ, &value).map(drop),
                other => Err(Error::Store(format!("the meta table holds an unknown row {other:?}"))),
            }
        })?;
        self.check_rows(
            &mut report,
            "SELECT agent, action, id, v FROM warden_delegation_index",
            name::DELEGATION_INDEX,
            |row| {
                let (agent, action, id): (String, String, String) = (
                    column(row, 0, name::DELEGATION_INDEX)?,
                    column(row, 1, name::DELEGATION_INDEX)?,
                    column(row, 2, name::DELEGATION_INDEX)?,
                );
                decode::<()>(
                    name::DELEGATION_INDEX,
                    &(agent.as_str(), action.as_str(), id.as_str()),
                    &column::<Vec<u8>>(row, 3, name::DELEGATION_INDEX)?,
                )
            },
        )?;
        self.check_rows(
            &mut report,
            "SELECT parent, id, v FROM warden_delegation_children",
            name::DELEGATION_CHILDREN,
            |row| {
                let (parent, id): (String, String) =
                    (column(row, 0, name::DELEGATION_CHILDREN)?, column(row, 1, name::DELEGATION_CHILDREN)?);
                decode::<()>(
                    name::DELEGATION_CHILDREN,
                    &(parent.as_str(), id.as_str()),
                    &column::<Vec<u8>>(row, 2, name::DELEGATION_CHILDREN)?,
                )
            },
        )?;
        self.check_rows(
            &mut report,
            "SELECT agent, id, v FROM warden_delegation_creators",
            name::DELEGATION_CREATORS,
            |row| {
                let (agent, id): (String, String) =
                    (column(row, 0, name::DELEGATION_CREATORS)?, column(row, 1, name::DELEGATION_CREATORS)?);
                decode::<Option<String>>(
                    name::DELEGATION_CREATORS,
                    &(agent.as_str(), id.as_str()),
                    &column::<Vec<u8>>(row, 2, name::DELEGATION_CREATORS)?,
                )
                .map(drop)
            },
        )?;
        self.check_rows(
            &mut report,
            "SELECT grant_id, metric, seq, consumed_at, amount::text, released, v FROM warden_budget_ledger",
            name::BUDGET_LEDGER,
            |row| {
                let (grant, metric): (String, String) = (column(row, 0, name::BUDGET_LEDGER)?, column(row, 1, name::BUDGET_LEDGER)?);
                let seq = seq_column(row, 2, name::BUDGET_LEDGER)?;
                let key = (grant.as_str(), metric.as_str(), seq);
                let entry: LedgerEntry = decode(name::BUDGET_LEDGER, &key, &column::<Vec<u8>>(row, 6, name::BUDGET_LEDGER)?)?;
                let columns = (column::<i64>(row, 3, name::BUDGET_LEDGER)?, column::<String>(row, 4, name::BUDGET_LEDGER)?, column::<bool>(row, 5, name::BUDGET_LEDGER)?);
                if columns != (entry.consumed_at, entry.amount.to_string(), entry.released) {
                    return Err(Error::Store(format!(
                        "the budget_ledger row {key:?} has columns {columns:?} that disagree with its checked value; it was altered"
                    )));
                }
                Ok(())
            },
        )?;
        self.check_rows(
            &mut report,
            "SELECT effect_key, attempt, v FROM warden_budget_by_effect",
            name::BUDGET_BY_EFFECT,
            |row| {
                let effect_key: String = column(row, 0, name::BUDGET_BY_EFFECT)?;
                let attempt = seq_column(row, 1, name::BUDGET_BY_EFFECT)?;
                decode::<Vec<(String, String, u64)>>(
                    name::BUDGET_BY_EFFECT,
                    &(effect_key.as_str(), attempt),
                    &column::<Vec<u8>>(row, 2, name::BUDGET_BY_EFFECT)?,
                )
                .map(drop)
            },
        )?;
        Ok(report)
    }

    // Every warden_ table of this schema with its indexes and TOAST, as PostgreSQL counts it.
    fn bytes_in_use(&self) -> Result<u64> {
        let row = self.sql.row(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c \
             WHERE c.relkind = 'r' AND c.relname LIKE 'warden\\_%' AND c.relnamespace = current_schema()::regnamespace",
            &[],
            "measuring the tables",
        )?;
        row.map(|row| seq_column(&row, 0, "pg_class")).transpose().map(Option::unwrap_or_default)
    }

    fn orphans(&self) -> Result<Vec<String>> {
        let mut out = Vec::new();
        self.text_table(text_page!("warden_receipt_ids"), name::RECEIPT_IDS, |id, value| {
            if let Ok(seq) = decode::<u64>(name::RECEIPT_IDS, &id.as_str(), &value) {
                if rows::receipt(self.sql, seq).ok().flatten().is_none() {
                    out.push(format!("receipt id {id} points at receipt {seq}, which is missing"));
                }
            }
            Ok(true)
        })?;
        self.text_table(text_page!("warden_effect_receipts"), name::EFFECT_RECEIPTS, |key, _| {
            if rows::effect_row(self.sql, &key).ok().flatten().is_none() {
                out.push(format!("effect {key:?} has receipts but no effect row"));
            }
            Ok(true)
        })?;
        self.text_table(text_page!("warden_effects"), name::EFFECTS, |key, value| {
            if let Ok(stored) = decode::<StoredEffect>(name::EFFECTS, &key.as_str(), &value) {
                if stored.state == EffectState::Failed {
                    if let Err(error) = rows::check_failed(self.sql, &stored) {
                        out.push(error.to_string());
                    }
                }
            }
            Ok(true)
        })?;
        for row in self.sql.rows(
            "SELECT i.scope, i.seq, i.v FROM warden_snapshot_index i",
            &[],
            "reading the snapshot index",
        )? {
            let scope: String = column(&row, 0, name::SNAPSHOT_INDEX)?;
            let seq = seq_column(&row, 1, name::SNAPSHOT_INDEX)?;
            let value: Vec<u8> = column(&row, 2, name::SNAPSHOT_INDEX)?;
            if let Ok(id) = decode::<String>(name::SNAPSHOT_INDEX, &(scope.as_str(), seq), &value) {
                if self.snapshot(&id).ok().flatten().is_none() {
                    out.push(format!("snapshot index {:?} names {id}, which is missing", (scope.as_str(), seq)));
                }
            }
        }
        Ok(out)
    }
}

impl AuthorityReads for PgReadTx<'_, '_> {
    fn delegation_source(&self) -> Result<Box<dyn CountedSource + '_>> {
        Ok(Box::new(PgDelegations { sql: self.sql, reads: Cell::new(0) }))
    }

    fn delegation_page(&self, after: Option<&str>, limit: usize) -> Result<Vec<StoredDelegation>> {
        let take = i64::try_from(limit).unwrap_or(i64::MAX);
        let first = after.is_none();
        let after = after.unwrap_or("");
        let mut out = Vec::new();
        for row in self.sql.rows(
            "SELECT d.k, d.v, r.v FROM warden_delegations d LEFT JOIN warden_revocations r ON r.k = d.k \
             WHERE $1 OR d.k > $2 ORDER BY d.k LIMIT $3",
            &[&first, &after, &take],
            "reading the delegations",
        )? {
            let id: String = column(&row, 0, name::DELEGATIONS)?;
            let record: DelegationRecord =
                decode(name::DELEGATIONS, &id.as_str(), &column::<Vec<u8>>(&row, 1, name::DELEGATIONS)?)?;
            let revocation = column::<Option<Vec<u8>>>(&row, 2, name::REVOCATIONS)?
                .map(|bytes| decode::<Revocation>(name::REVOCATIONS, &id.as_str(), &bytes))
                .transpose()?;
            out.push(StoredDelegation { record, revocation });
        }
        Ok(out)
    }

    fn budget_spent(&self, grant_id: &str, metric: &str, window_seconds: u64, now: Micros) -> Result<u128> {
        let window = crate::authority::Charge {
            grant_id: String::new(),
            metric: String::new(),
            amount: 0,
            limit: 0,
            window_seconds,
        }
        .window();
        let floor = now.saturating_sub(window);
        let row = self.sql.row(
            "SELECT coalesce(sum(amount), 0)::text FROM warden_budget_ledger \
             WHERE grant_id = $1 AND metric = $2 AND NOT released AND consumed_at >= $3 AND consumed_at <= $4",
            &[&grant_id, &metric, &floor, &now],
            "summing a budget window",
        )?;
        let text: String =
            row.map(|row| column(&row, 0, name::BUDGET_LEDGER)).transpose()?.unwrap_or_else(|| "0".into());
        text.parse::<u128>().map_err(|_| Error::Store(format!("the budget ledger summed to {text:?}; it was altered")))
    }
}
