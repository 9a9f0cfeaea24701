//! `PgWriteTx`: the boundary's write tables over one PostgreSQL transaction.
//!
//! Every write transaction of a store holds the store's advisory lock from its first statement
//! (`engine`), so the rows it reads cannot change under it and its inserts cannot collide: the
//! guards below are checked row counts, and a count that disagrees is an invariant fault, never
//! a decision. Sequence numbers (receipt seq, event id, snapshot seq) are read and advanced
//! under that lock, so they are contiguous across hosts and assigned in commit order.

use std::cell::Cell;

use super::rows::{self, seq_column, text_row, PgDelegations};
use super::sql::{column, int, Guard, Lit, Sql};
use crate::approval::ApprovalRecord;
use crate::authority::record::Revocation;
use crate::authority::{Charge, NewDelegation};
use crate::clock::Micros;
use crate::effect::{EffectRecord, EffectState, StoredResult};
use crate::error::{Error, Result};
use crate::event::EventKind;
use crate::receipt::{ReceiptDraft, StoredReceipt};
use crate::snapshot_record::SnapshotRecord;
use crate::store::authority_rows::LedgerEntry;
use crate::store::boundary::{AbsenceWitnesses, AuthorityWrites, CountedSource, WriteTables};
use crate::store::codec::{decode, encode};
use crate::store::records::{ChainHead, StoredEffect};
use crate::store::shared_rules;
use crate::store::tables::{self, name};
use crate::store::RawTable;

/// One write transaction.
pub(crate) struct PgWriteTx<'s, 'c> {
    sql: &'s Sql<'c>,
    last_event_id: Option<u64>,
}

impl<'s, 'c> PgWriteTx<'s, 'c> {
    /// `last_event_id` was read under the lock, with the clock.
    pub(super) fn new(sql: &'s Sql<'c>, last_event_id: u64) -> PgWriteTx<'s, 'c> {
        PgWriteTx { sql, last_event_id: Some(last_event_id) }
    }

    /// Write one row of a text-keyed table, replacing any (an upsert changes one row, always).
    fn upsert(&self, statement: &'static str, key: &str, row: &[u8]) -> Result<()> {
        self.sql.write(statement, &[Lit::Text(key), Lit::Bytes(row)], Guard::None)
    }

    /// Insert rows that must not exist yet: a plain INSERT, so a key that exists (which the
    /// lock held makes an invariant fault) fails as a unique violation and aborts the
    /// transaction; nothing is written.
    fn insert(&self, statement: &'static str, values: &[Lit<'_>]) -> Result<()> {
        self.sql.write(statement, values, Guard::None)
    }

    fn meta<T: serde::de::DeserializeOwned>(&self, key: &'static str) -> Result<Option<T>> {
        text_row(self.sql, "SELECT v FROM warden_meta WHERE k = $1", name::META, key)
    }

    fn put_meta(&self, key: &'static str, row: &[u8]) -> Result<()> {
        self.upsert(
            "INSERT INTO warden_meta (k, v) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v",
            key,
            row,
        )
    }

    fn ledger_entry(&self, grant: &str, metric: &str, seq: u64) -> Result<Option<LedgerEntry>> {
        let at = int(seq, "ledger seq")?;
        let Some(row) = self.sql.row(
            "SELECT v FROM warden_budget_ledger WHERE grant_id = $1 AND metric = $2 AND seq = $3",
            &[&grant, &metric, &at],
            "reading the budget ledger",
        )?
        else {
            return Ok(None);
        };
        let bytes: Vec<u8> = column(&row, 0, name::BUDGET_LEDGER)?;
        decode(name::BUDGET_LEDGER, &(grant, metric, seq), &bytes).map(Some)
    }

    fn put_ledger(&self, grant: &str, metric: &str, seq: u64, entry: &LedgerEntry, insert: bool) -> Result<()> {
        let row = encode(name::BUDGET_LEDGER, &(grant, metric, seq), entry)?;
        let values = [
            Lit::Text(grant),
            Lit::Text(metric),
            Lit::Int(int(seq, "ledger seq")?),
            Lit::Int(entry.consumed_at),
            Lit::Numeric(entry.amount),
            Lit::Bool(entry.released),
            Lit::Bytes(&row),
        ];
        if insert {
            self.insert(
                "INSERT INTO warden_budget_ledger (grant_id, metric, seq, consumed_at, amount, released, v) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7)",
                &values,
            )
        } else {
            self.sql.write(
                "UPDATE warden_budget_ledger SET consumed_at = $4, amount = $5, released = $6, v = $7 \
                 WHERE grant_id = $1 AND metric = $2 AND seq = $3",
                &values,
                Guard::ExactlyOne,
            )
        }
    }

    /// Release the charges of `(effect_key, attempt)` once, with a BUDGET_RELEASED event.
    fn release_budget_charges(&mut self, effect_key: &str, attempt: u32, action_id: &str, now: Micros) -> Result<()> {
        let key = (effect_key, u64::from(attempt));
        let at = i64::from(attempt);
        let Some(row) = self.sql.row(
            "SELECT v FROM warden_budget_by_effect WHERE effect_key = $1 AND attempt = $2",
            &[&effect_key, &at],
            "reading the budget charges of an effect",
        )?
        else {
            return Ok(());
        };
        let bytes: Vec<u8> = column(&row, 0, name::BUDGET_BY_EFFECT)?;
        let charged: Vec<(String, String, u64)> = decode(name::BUDGET_BY_EFFECT, &key, &bytes)?;
        let mut released = Vec::new();
        for (grant, metric, seq) in &charged {
            let mut entry = self.ledger_entry(grant, metric, *seq)?.ok_or_else(|| {
                Error::Store(format!(
                    "the budget ledger of grant {grant:?} metric {metric:?} is missing row {seq}; the store was \
                     altered. Run `warden doctor` on the store"
                ))
            })?;
            if entry.released {
                continue;
            }
            entry.released = true;
            self.put_ledger(grant, metric, *seq, &entry, false)?;
            released.push(serde_json::json!({"grant_id": grant, "metric": metric, "amount": entry.amount}));
        }
        shared_rules::budget_released(self, effect_key, attempt, action_id, now, released)
    }
}

impl WriteTables for PgWriteTx<'_, '_> {
    fn effect(&self, effect_key: &str) -> Result<Option<EffectRecord>> {
        let Some(stored) = rows::effect_row(self.sql, effect_key)? else { return Ok(None) };
        if stored.state == EffectState::Failed {
            rows::check_failed(self.sql, &stored)?;
        }
        Ok(Some(stored.into_record(None)))
    }

    fn absence_witnesses(&self, effect_key: &str) -> Result<AbsenceWitnesses> {
        // The outcome index row is read ahead with the transaction's first statement
        // (`Write::prefetch`), so this costs no round trip. No neighbours: a lookup here goes
        // through PostgreSQL's own index, and its pages are PostgreSQL's to check (data
        // checksums, amcheck), not rows this backend lays out.
        Ok(AbsenceWitnesses { outcome_receipt: rows::outcome_seq(self.sql, effect_key)?, neighbours: Vec::new() })
    }

    fn put_effect(&mut self, record: &EffectRecord) -> Result<()> {
        let key = record.effect_key.as_str();
        let row = encode(name::EFFECTS, &key, &StoredEffect::from_record(record))?;
        self.upsert(
            "INSERT INTO warden_effects (k, v) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v",
            key,
            &row,
        )?;
        // As in the file: whatever moved the effect to FAILED releases its charges here.
        if crate::authority::budget::releases_charges(record.state) {
            self.release_budget_charges(&record.effect_key, record.attempt, &record.action_id, record.updated_at)?;
        }
        Ok(())
    }

    fn approval(&self, approval_id: &str) -> Result<Option<ApprovalRecord>> {
        rows::approval(self.sql, approval_id)
    }

    fn latest_approval_for(&self, action_hash: &str) -> Result<Option<ApprovalRecord>> {
        let id: Option<String> = text_row(
            self.sql,
            "SELECT v FROM warden_approvals_by_action WHERE k = $1",
            name::APPROVALS_BY_ACTION,
            action_hash,
        )?;
        shared_rules::indexed_approval(self, action_hash, id)
    }

    fn index_approval(&mut self, action_hash: &str, approval_id: &str) -> Result<()> {
        let row = encode(name::APPROVALS_BY_ACTION, &action_hash, &approval_id.to_owned())?;
        self.upsert(
            "INSERT INTO warden_approvals_by_action (k, v) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v",
            action_hash,
            &row,
        )
    }

    fn put_approval(&mut self, record: &ApprovalRecord) -> Result<()> {
        let key = record.approval_id.as_str();
        let row = encode(name::APPROVALS, &key, record)?;
        self.upsert(
            "INSERT INTO warden_approvals (k, v) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v",
            key,
            &row,
        )
    }

    fn event(
        &mut self,
        kind: EventKind,
        ts: Micros,
        action_id: Option<&str>,
        effect_key: Option<&str>,
        approval_id: Option<&str>,
        data: serde_json::Value,
    ) -> Result<u64> {
        let last = match self.last_event_id {
            Some(last) => last,
            None => {
                let row =
                    self.sql.row("SELECT coalesce(max(id), 0) FROM warden_events", &[], "reading the last event id")?;
                row.map(|row| seq_column(&row, 0, name::EVENTS)).transpose()?.unwrap_or(0)
            }
        };
        let event_id = last + 1;
        self.last_event_id = Some(event_id);
        let event = shared_rules::event_row(event_id, ts, kind, [action_id, effect_key, approval_id], &data);
        let row = encode(name::EVENTS, &event_id, &event)?;
        self.insert(
            "INSERT INTO warden_events (id, v) VALUES ($1, $2)",
            &[Lit::Int(int(event_id, "event id")?), Lit::Bytes(&row)],
        )?;
        Ok(event_id)
    }

    fn receipt_seq(&self, receipt_id: &str) -> Result<Option<u64>> {
        rows::receipt_seq(self.sql, receipt_id)
    }

    fn append_receipt(&mut self, draft: &ReceiptDraft, executor_result: Option<StoredResult>) -> Result<(u64, String)> {
        let head: ChainHead = self
            .meta(tables::META_HEAD)?
            .ok_or_else(|| Error::Store("the store has no chain head row; it was altered".into()))?;
        let seq = head.seq + 1;
        if self.receipt_seq(&draft.receipt_id)?.is_some() {
            return Err(Error::Store(format!(
                "receipt id {} is already on the chain; nothing was written (the random source repeated itself)",
                draft.receipt_id
            )));
        }
        let (document, hash) =
            draft.seal(seq, &head.hash).map_err(|e| Error::InvalidInput(format!("cannot encode a receipt: {e}")))?;
        let row = StoredReceipt { document, hash: Some(hash.clone()), executor_result };
        // A receipt at this seq already (the head was altered) fails the insert and the transaction.
        self.insert(
            "INSERT INTO warden_receipts (seq, v) VALUES ($1, $2)",
            &[Lit::Int(int(seq, "receipt seq")?), Lit::Bytes(&encode(name::RECEIPTS, &seq, &row)?)],
        )?;
        let id = draft.receipt_id.as_str();
        self.insert(
            "INSERT INTO warden_receipt_ids (k, v) VALUES ($1, $2)",
            &[Lit::Text(id), Lit::Bytes(&encode(name::RECEIPT_IDS, &id, &seq)?)],
        )?;
        let outcome = shared_rules::records_outcome(draft);
        if let (true, Some(key)) = (outcome, draft.effect_key.as_deref()) {
            self.upsert(
                "INSERT INTO warden_effect_receipts (k, v) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v",
                key,
                &encode(name::EFFECT_RECEIPTS, &key, &seq)?,
            )?;
        }
        self.put_meta(
            tables::META_HEAD,
            &encode(name::META, &tables::META_HEAD, &ChainHead { seq, hash: hash.clone() })?,
        )?;
        Ok((seq, hash))
    }

    fn append_snapshot(&mut self, mut record: SnapshotRecord, scopes: &[String]) -> Result<SnapshotRecord> {
        let last: u64 = self.meta(tables::META_SNAPSHOT_SEQ)?.unwrap_or(0);
        record.seq = last + 1;
        let id = record.id.as_str();
        // An id that exists (the random source repeated itself) fails the insert and the transaction.
        self.insert(
            "INSERT INTO warden_snapshots (k, v) VALUES ($1, $2)",
            &[Lit::Text(id), Lit::Bytes(&encode(name::SNAPSHOTS, &id, &record)?)],
        )?;
        let seq = int(record.seq, "snapshot seq")?;
        for scope in scopes {
            let key = (scope.as_str(), record.seq);
            self.insert(
                "INSERT INTO warden_snapshot_index (scope, seq, v) VALUES ($1, $2, $3)",
                &[Lit::Text(scope), Lit::Int(seq), Lit::Bytes(&encode(name::SNAPSHOT_INDEX, &key, &record.id)?)],
            )?;
        }
        self.put_meta(tables::META_SNAPSHOT_SEQ, &encode(name::META, &tables::META_SNAPSHOT_SEQ, &record.seq)?)?;
        Ok(record)
    }
}

impl AuthorityWrites for PgWriteTx<'_, '_> {
    fn delegations(&self) -> Box<dyn CountedSource + '_> {
        Box::new(PgDelegations { sql: self.sql, reads: Cell::new(0) })
    }

    fn insert_delegation(&mut self, new: &NewDelegation) -> Result<()> {
        let record = &new.record;
        let id = record.delegation_id.as_str();
        // Insert-only: an id that exists fails the insert and the transaction.
        self.insert(
            "INSERT INTO warden_delegations (k, v) VALUES ($1, $2)",
            &[Lit::Text(id), Lit::Bytes(&encode(name::DELEGATIONS, &id, record)?)],
        )?;
        for key in &new.index_keys {
            let key = (key.agent.as_str(), key.action.as_str(), id);
            self.insert(
                "INSERT INTO warden_delegation_index (agent, action, id, v) VALUES ($1, $2, $3, $4)",
                &[
                    Lit::Text(key.0),
                    Lit::Text(key.1),
                    Lit::Text(key.2),
                    Lit::Bytes(&encode(name::DELEGATION_INDEX, &key, &())?),
                ],
            )?;
        }
        let child = (record.parent_id.as_str(), id);
        self.insert(
            "INSERT INTO warden_delegation_children (parent, id, v) VALUES ($1, $2, $3)",
            &[Lit::Text(child.0), Lit::Text(child.1), Lit::Bytes(&encode(name::DELEGATION_CHILDREN, &child, &())?)],
        )?;
        let creator = (record.created_by.agent.as_str(), id);
        self.insert(
            "INSERT INTO warden_delegation_creators (agent, id, v) VALUES ($1, $2, $3)",
            &[
                Lit::Text(creator.0),
                Lit::Text(creator.1),
                Lit::Bytes(&encode(name::DELEGATION_CREATORS, &creator, &record.created_by.user)?),
            ],
        )
    }

    fn insert_revocation(&mut self, revocation: &Revocation) -> Result<bool> {
        let id = revocation.delegation_id.as_str();
        let written = self.sql.exec(
            "INSERT INTO warden_revocations (k, v) VALUES ($1, $2) ON CONFLICT DO NOTHING",
            &[&id, &encode(name::REVOCATIONS, &id, revocation)?],
            "writing a revocation",
        )?;
        Ok(written == 1)
    }

    fn is_revoked(&self, delegation_id: &str) -> Result<bool> {
        let found: Option<Revocation> =
            text_row(self.sql, "SELECT v FROM warden_revocations WHERE k = $1", name::REVOCATIONS, delegation_id)?;
        Ok(found.is_some_and(|revocation| revocation.delegation_id == delegation_id))
    }

    fn delegations_created_by(&self, agent: &str, user: Option<&str>) -> Result<Vec<String>> {
        let mut ids = Vec::new();
        for row in self.sql.rows(
            "SELECT id, v FROM warden_delegation_creators WHERE agent = $1 ORDER BY id",
            &[&agent],
            "reading the delegation creators",
        )? {
            let id: String = column(&row, 0, name::DELEGATION_CREATORS)?;
            let bytes: Vec<u8> = column(&row, 1, name::DELEGATION_CREATORS)?;
            let created_as: Option<String> = decode(name::DELEGATION_CREATORS, &(agent, id.as_str()), &bytes)?;
            if user.is_none_or(|wanted| created_as.as_deref() == Some(wanted)) {
                ids.push(id);
            }
        }
        Ok(ids)
    }

    // The ledger's unreleased rows from the window's floor on, summed by the server over its
    // partial index (rows charged after a clock step back count too: an overcount, never an
    // undercount, as in the file's running sums).
    fn budget_window_sum(&mut self, charge: &Charge, now: Micros) -> Result<u128> {
        let floor = now.saturating_sub(charge.window());
        let row = self.sql.row(
            "SELECT coalesce(sum(amount), 0)::text FROM warden_budget_ledger \
             WHERE grant_id = $1 AND metric = $2 AND NOT released AND consumed_at >= $3",
            &[&charge.grant_id, &charge.metric, &floor],
            "summing a budget window",
        )?;
        let text: String =
            row.map(|row| column(&row, 0, name::BUDGET_LEDGER)).transpose()?.unwrap_or_else(|| "0".into());
        text.parse::<u128>().map_err(|_| {
            Error::Store(format!("the budget ledger summed to {text:?}, which is not a whole amount; it was altered"))
        })
    }

    fn charge_budgets(&mut self, charges: &[Charge], effect_key: &str, attempt: u32, now: Micros) -> Result<()> {
        let mut written: Vec<(String, String, u64)> = Vec::new();
        for (grant, metric, amount) in crate::authority::budget::ledger_entries(charges) {
            let tail = self.sql.row(
                "SELECT seq, consumed_at FROM warden_budget_ledger WHERE grant_id = $1 AND metric = $2 \
                 ORDER BY seq DESC LIMIT 1",
                &[&grant, &metric],
                "reading a budget series",
            )?;
            let (seq, last) = match tail {
                None => (0, None),
                Some(row) => (
                    seq_column(&row, 0, name::BUDGET_LEDGER)?.saturating_add(1),
                    Some(column::<i64>(&row, 1, name::BUDGET_LEDGER)?),
                ),
            };
            // A series' times never go back (as in the file).
            let consumed_at = last.map_or(now, |last| last.max(now));
            let entry =
                LedgerEntry { consumed_at, amount, released: false, effect_key: effect_key.to_owned(), attempt };
            self.put_ledger(&grant, &metric, seq, &entry, true)?;
            written.push((grant, metric, seq));
        }
        if written.is_empty() {
            return Ok(());
        }
        let key = (effect_key, u64::from(attempt));
        let written_row = encode(name::BUDGET_BY_EFFECT, &key, &written)?;
        // An attempt that already has charges (the store was altered) fails the insert.
        self.insert(
            "INSERT INTO warden_budget_by_effect (effect_key, attempt, v) VALUES ($1, $2, $3)",
            &[Lit::Text(effect_key), Lit::Int(i64::from(attempt)), Lit::Bytes(&written_row)],
        )
    }
}

/// Test support (`Store::tamper` on PostgreSQL): the raw edits tests make, in one transaction
/// under the store's lock. Rows go in as the codec writes them (or as the bytes given), outside
/// every rule.
pub(super) struct RawEdits<'s, 'c> {
    sql: &'s Sql<'c>,
    tx: PgWriteTx<'s, 'c>,
}

impl<'s, 'c> RawEdits<'s, 'c> {
    pub(super) fn new(sql: &'s Sql<'c>, last_event_id: u64) -> RawEdits<'s, 'c> {
        RawEdits { sql, tx: PgWriteTx::new(sql, last_event_id) }
    }
}

impl crate::store::RawRows for RawEdits<'_, '_> {
    fn receipt(&mut self, seq: u64) -> Result<Option<StoredReceipt>> {
        rows::receipt(self.sql, seq)
    }

    fn put_receipt(&mut self, seq: u64, row: &StoredReceipt) -> Result<()> {
        let bytes = encode(name::RECEIPTS, &seq, row)?;
        self.set_raw_receipt(seq, &bytes)
    }

    fn remove_receipt(&mut self, seq: u64) -> Result<()> {
        self.sql.write("DELETE FROM warden_receipts WHERE seq = $1", &[Lit::Int(int(seq, "receipt seq")?)], Guard::None)
    }

    fn set_head(&mut self, seq: u64, hash: &str) -> Result<()> {
        let head = ChainHead { seq, hash: hash.to_owned() };
        let bytes = encode(name::META, &tables::META_HEAD, &head)?;
        self.set_raw(RawTable::Meta, tables::META_HEAD, &bytes)
    }

    fn put_effect(&mut self, record: &EffectRecord) -> Result<()> {
        self.tx.put_effect(record)
    }

    fn put_approval(&mut self, record: &ApprovalRecord) -> Result<()> {
        self.tx.put_approval(record)
    }

    fn raw(&mut self, table: RawTable, key: &str) -> Result<Option<Vec<u8>>> {
        let select = match table {
            RawTable::Meta => "SELECT v FROM warden_meta WHERE k = $1",
            RawTable::Effects => "SELECT v FROM warden_effects WHERE k = $1",
            RawTable::Approvals => "SELECT v FROM warden_approvals WHERE k = $1",
        };
        let found = self.sql.row(select, &[&key], "reading a raw row")?;
        found.map(|row| column(&row, 0, "a raw row")).transpose()
    }

    fn set_raw(&mut self, table: RawTable, key: &str, bytes: &[u8]) -> Result<()> {
        let statement = match table {
            RawTable::Meta => {
                "INSERT INTO warden_meta (k, v) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v"
            }
            RawTable::Effects => {
                "INSERT INTO warden_effects (k, v) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v"
            }
            RawTable::Approvals => {
                "INSERT INTO warden_approvals (k, v) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v"
            }
        };
        self.sql.write(statement, &[Lit::Text(key), Lit::Bytes(bytes)], Guard::None)
    }

    fn remove_raw(&mut self, table: RawTable, key: &str) -> Result<()> {
        let statement = match table {
            RawTable::Meta => "DELETE FROM warden_meta WHERE k = $1",
            RawTable::Effects => "DELETE FROM warden_effects WHERE k = $1",
            RawTable::Approvals => "DELETE FROM warden_approvals WHERE k = $1",
        };
        self.sql.write(statement, &[Lit::Text(key)], Guard::None)
    }

    fn raw_receipt(&mut self, seq: u64) -> Result<Option<Vec<u8>>> {
        let at = int(seq, "receipt seq")?;
        let found = self.sql.row("SELECT v FROM warden_receipts WHERE seq = $1", &[&at], "reading a raw receipt")?;
        found.map(|row| column(&row, 0, name::RECEIPTS)).transpose()
    }

    fn put_budget_charges(&mut self, charges: &[Charge], effect_key: &str, attempt: u32, now: Micros) -> Result<()> {
        self.tx.charge_budgets(charges, effect_key, attempt, now)
    }

    fn budget_window_sum(&mut self, charge: &Charge, now: Micros) -> Result<u128> {
        self.tx.budget_window_sum(charge, now)
    }

    fn set_raw_receipt(&mut self, seq: u64, bytes: &[u8]) -> Result<()> {
        self.sql.write(
            "INSERT INTO warden_receipts (seq, v) VALUES ($1, $2) ON CONFLICT (seq) DO UPDATE SET v = EXCLUDED.v",
            &[Lit::Int(int(seq, "receipt seq")?), Lit::Bytes(bytes)],
            Guard::None,
        )
    }
}
