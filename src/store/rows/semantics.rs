//! What the store's rows mean, written once over the row layer for every engine: the boundary's
//! `WriteTables`/`ReadTables` and the authority traits (`Writes`, `Reads`), the chain append,
//! the FAILED cross-check against the receipts, the budget ledger and its running sums, every
//! index, events, the open check and `warden doctor`'s walks. Every value is encoded and checked
//! by the codec under its table's name and key, so every engine stores the same bytes.

use std::cell::Cell;
use std::ops::Bound;

use serde::{de::DeserializeOwned, Deserialize, Serialize};

use super::access::{each, effect_row, first};
pub(crate) use super::access::{read, write, Reads, Writes};
use super::{KeyView, Part, Put, RowRead, Scan, Table};
use crate::approval::{ApprovalRecord, ApprovalStatus};
use crate::authority::budget::{LedgerRow, WindowSum, WindowSumError};
use crate::authority::record::{DelegationRecord, Revocation, StoredDelegation};
use crate::authority::source::{DelegationSource, IndexKey, SourceError};
use crate::authority::{Charge, NewDelegation};
use crate::clock::Micros;
use crate::effect::{EffectRecord, EffectState, StoredResult};
use crate::error::{Error, InvalidInputKind, Result, StoreFaultKind};
use crate::event::{Event, EventKind};
use crate::receipt::{ChainReport, ReceiptDraft, ReceiptResult, StoredReceipt, GENESIS_HASH};
use crate::snapshot_record::SnapshotRecord;
use crate::store::boundary::{
    AbsenceWitnesses, AuthorityReads, AuthorityWrites, CountedSource, Neighbour, ReadTables, WriteTables,
};
use crate::store::rows::codec::{damaged, decode, encode};
use crate::store::rows::records::{ChainHead, JournalMark, StoredEffect};
use crate::store::tables::{META_HEAD, META_JOURNAL, META_PRUNED, META_SCHEMA, META_SNAPSHOT_SEQ};

use Part::{Int, Text};

mod open_check;
mod raw;

pub(crate) use open_check::{check_on_open, missing_tables};
#[cfg(any(test, feature = "test-exports"))]
pub use raw::{RawTable, Tamper};

/// The chain head row of a brand-new store.
pub(crate) fn genesis_head() -> Result<Vec<u8>> {
    encode(Table::Meta.name(), &KeyView(&[Text(META_HEAD)]), &ChainHead { seq: 0, hash: GENESIS_HASH.to_owned() })
}

/// The snapshot counter row of a brand-new store.
pub(crate) fn zero_snapshot_counter() -> Result<Vec<u8>> {
    encode(Table::Meta.name(), &KeyView(&[Text(META_SNAPSHOT_SEQ)]), &0u64)
}

// ---- stored forms of the authority rows ----------------------------------------------------------

/// One budget charge. `released` turns true once, when its effect reaches FAILED.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct LedgerEntry {
    pub consumed_at: Micros,
    pub amount: u64,
    pub released: bool,
    pub effect_key: String,
    pub attempt: u32,
}

/// The running sum of one window: `sum` is the unreleased amount of rows `next..counted`.
/// Rows at `counted..` (charged since) are added at the next check, rows below the floor are
/// evicted from `next`, so a check reads each row a bounded number of times over its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct StoredSum {
    pub sum: u128,
    pub next: u64,
    pub counted: u64,
    pub floor: Micros,
}

/// One ledger row a reservation wrote, as `budget_by_effect` lists them.
type ChargeRef = (String, String, u64);

// ---- rules both directions share ---------------------------------------------------------------

/// An approval row whose stored action no longer hashes to its `action_hash` is damage: it
/// is never shown as approvable and never decided from.
fn bound(record: ApprovalRecord, key: &str) -> Result<ApprovalRecord> {
    match record.check_binding() {
        Ok(()) => Ok(record),
        Err(problem) => Err(damaged(Table::Approvals.name(), &KeyView(&[Text(key)]), &problem)),
    }
}

fn approval(rows: &dyn RowRead, id: &str) -> Result<Option<ApprovalRecord>> {
    read::<ApprovalRecord>(rows, Table::Approvals, &[Text(id)])?.map(|record| bound(record, id)).transpose()
}

/// What the receipts prove about a FAILED effect: the last receipt that recorded an outcome
/// for its key (`last`: its seq from the outcome index and the row, `None` when the row is
/// missing) must be about that key and must not say it committed.
fn failed_proof(stored: &StoredEffect, last: Option<(u64, Option<StoredReceipt>)>) -> Result<()> {
    let key = KeyView(&[Text(&stored.effect_key)]);
    let Some((seq, receipt)) = last else { return Ok(()) };
    let receipt = receipt
        .ok_or_else(|| damaged(Table::Effects.name(), &key, &format!("points at receipt {seq}, which is missing")))?;
    let document = crate::canonical::parse_json(&receipt.document)
        .map_err(|_| damaged(Table::Receipts.name(), &KeyView(&[Int(seq)]), "holds a document that is not JSON"))?;
    let says = |field: &str| document.get(field).and_then(serde_json::Value::as_str);
    if says("effect_key") != Some(stored.effect_key.as_str()) {
        return Err(damaged(
            Table::EffectReceipts.name(),
            &key,
            &format!("points at receipt {seq}, which is about another effect"),
        ));
    }
    if says("result") == Some("committed") || says("execution") == Some("committed") {
        return Err(damaged(
            Table::Effects.name(),
            &key,
            &format!("says failed, but receipt {seq} on the chain says the effect committed"),
        ));
    }
    let attempt = document.get("attempt").and_then(serde_json::Value::as_u64).unwrap_or(0);
    if attempt > u64::from(stored.attempt) {
        return Err(damaged(
            Table::Effects.name(),
            &key,
            &format!("is at attempt {}, but receipt {seq} records attempt {attempt}", stored.attempt),
        ));
    }
    Ok(())
}

/// A FAILED row checked against the receipt its outcome index names (`failed_proof`).
fn check_failed(rows: &dyn RowRead, stored: &StoredEffect) -> Result<()> {
    let last = match read::<u64>(rows, Table::EffectReceipts, &[Text(&stored.effect_key)])? {
        // Schema-1 stores have no index for effects finished before the migration.
        None => None,
        // Once a prune deleted the receipt, what it kept of it.
        Some(seq) => Some((seq, super::retention::outcome_receipt(rows, &stored.effect_key, seq)?)),
    };
    failed_proof(stored, last)
}

/// Whether a receipt records an effect's outcome (so the effect's outcome index points at it).
fn records_outcome(draft: &ReceiptDraft) -> bool {
    matches!(
        draft.result,
        ReceiptResult::Committed | ReceiptResult::Failed | ReceiptResult::Ambiguous | ReceiptResult::Observed
    )
}

fn missing_ledger_row(grant: &str, metric: &str, seq: u64) -> Error {
    Error::store(
        StoreFaultKind::Damaged,
        format!(
            "the budget ledger of grant {grant:?} metric {metric:?} is missing row {seq}; the store was altered. Run \
         `warden doctor` on the store"
        ),
    )
}

// ---- delegations as a source ---------------------------------------------------------------------

/// The delegations of one transaction (either direction), counting its reads: one per point
/// lookup, one per range, one per row a range returns — what shows an evaluation's reads do not
/// grow with the delegations stored.
struct Delegations<'a> {
    rows: &'a dyn RowRead,
    reads: Cell<u64>,
}

fn unreadable(delegation_id: &str, error: Error) -> SourceError {
    SourceError::Unreadable { delegation_id: delegation_id.to_owned(), detail: error.to_string() }
}

fn source_fault(error: Error) -> SourceError {
    SourceError::Fault(error.to_string())
}

impl Delegations<'_> {
    fn count(&self) {
        self.reads.set(self.reads.get().saturating_add(1));
    }

    /// The ids listed under `prefix` of an index table, each entry's (empty) value checked.
    fn listed(&self, table: Table, prefix: &[Part<'_>]) -> Result<Vec<String>, SourceError> {
        self.count();
        let mut ids = Vec::new();
        let mut bad = None;
        self.rows
            .scan(table, &Scan::under(prefix), &mut |key, bytes| {
                self.count();
                let id = key.last().copied().map(|part| part.text(table)).transpose()?.unwrap_or_default();
                if let Err(error) = decode::<()>(table.name(), &KeyView(key), bytes) {
                    bad = Some(unreadable(id, error));
                    return Ok(false);
                }
                ids.push(id.to_owned());
                Ok(true)
            })
            .map_err(source_fault)?;
        bad.map_or(Ok(ids), Err)
    }
}

impl CountedSource for Delegations<'_> {
    fn reads(&self) -> u64 {
        self.reads.get()
    }
}

impl DelegationSource for Delegations<'_> {
    fn delegation(&self, delegation_id: &str) -> Result<Option<StoredDelegation>, SourceError> {
        self.count();
        let key = [Text(delegation_id)];
        let Some(bytes) = self.rows.get(Table::Delegations, &key).map_err(source_fault)? else { return Ok(None) };
        let record: DelegationRecord = decode(Table::Delegations.name(), &KeyView(&key), &bytes)
            .map_err(|error| unreadable(delegation_id, error))?;
        if record.delegation_id != delegation_id {
            return Err(SourceError::Unreadable {
                delegation_id: delegation_id.to_owned(),
                detail: "the row names another delegation id".into(),
            });
        }
        self.count();
        let revocation = self
            .rows
            .get(Table::Revocations, &key)
            .map_err(source_fault)?
            .map(|bytes| decode::<Revocation>(Table::Revocations.name(), &KeyView(&key), &bytes))
            .transpose()
            .map_err(|error| unreadable(delegation_id, error))?;
        Ok(Some(StoredDelegation { record, revocation }))
    }

    /// Every delegation the index lists, each required: an id indexed without its row is a fact
    /// about that row (`Unreadable`), never a silently shorter list.
    fn candidates(&self, key: &IndexKey) -> Result<Vec<StoredDelegation>, SourceError> {
        let ids = self.listed(Table::DelegationIndex, &[Text(&key.agent), Text(&key.action)])?;
        let mut found = Vec::with_capacity(ids.len());
        for id in ids {
            match self.delegation(&id)? {
                Some(stored) => found.push(stored),
                None => {
                    return Err(SourceError::Unreadable {
                        delegation_id: id,
                        detail: "it is indexed but its row is missing; the store was altered".into(),
                    })
                }
            }
        }
        Ok(found)
    }

    fn children(&self, parent_id: &str) -> Result<Vec<String>, SourceError> {
        self.listed(Table::DelegationChildren, &[Text(parent_id)])
    }
}

// ---- one write transaction ----------------------------------------------------------------------

impl Writes<'_> {
    fn ledger_entry(&self, grant: &str, metric: &str, seq: u64) -> Result<Option<LedgerEntry>> {
        read(self.r(), Table::BudgetLedger, &[Text(grant), Text(metric), Int(seq)])
    }

    fn required_entry(&self, grant: &str, metric: &str, seq: u64) -> Result<LedgerEntry> {
        self.ledger_entry(grant, metric, seq)?.ok_or_else(|| missing_ledger_row(grant, metric, seq))
    }

    /// The next `seq` of the `(grant, metric)` series and when its last charge was recorded:
    /// one range read from the end.
    fn series_tail(&self, grant: &str, metric: &str) -> Result<(u64, Option<Micros>)> {
        let prefix = [Text(grant), Text(metric)];
        match first::<LedgerEntry>(self.r(), Table::BudgetLedger, &Scan::under(&prefix).backwards())? {
            None => Ok((0, None)),
            Some((ints, entry)) => Ok((ints.first().copied().unwrap_or(0).saturating_add(1), Some(entry.consumed_at))),
        }
    }

    fn sum_backwards(&self, grant: &str, metric: &str, floor: Micros, end: u64) -> Result<StoredSum> {
        let mut sum = 0u128;
        let mut next = 0;
        let prefix = [Text(grant), Text(metric)];
        let scan = Scan::under(&prefix).to(Bound::Excluded(Int(end))).backwards();
        each::<LedgerEntry>(self.r(), Table::BudgetLedger, &scan, |key, entry| {
            if entry.consumed_at < floor {
                next = key.get(2).copied().map(|part| part.int(Table::BudgetLedger)).transpose()?.unwrap_or(0) + 1;
                return Ok(false);
            }
            if !entry.released {
                sum += u128::from(entry.amount);
            }
            Ok(true)
        })?;
        Ok(StoredSum { sum, next, counted: end, floor })
    }

    /// Release the charges of `(effect_key, attempt)`: each ledger row once (a second FAILED
    /// write finds them released), each running sum that still counts it, and a BUDGET_RELEASED
    /// event naming them.
    fn release_budget_charges(&mut self, effect_key: &str, attempt: u32, action_id: &str, now: Micros) -> Result<()> {
        let key = [Text(effect_key), Int(u64::from(attempt))];
        let Some(charged) = read::<Vec<ChargeRef>>(self.r(), Table::BudgetByEffect, &key)? else { return Ok(()) };
        let mut released = Vec::new();
        for (grant, metric, seq) in &charged {
            let mut entry = self.required_entry(grant, metric, *seq)?;
            if entry.released {
                continue;
            }
            entry.released = true;
            write(self.rows, Table::BudgetLedger, &[Text(grant), Text(metric), Int(*seq)], &entry, Put::Replace)?;
            let mut updates = Vec::new();
            let prefix = [Text(grant), Text(metric)];
            each::<StoredSum>(self.r(), Table::BudgetSums, &Scan::under(&prefix), |key, mut sum| {
                // Counted and not yet evicted: it leaves the sum. Not yet counted: the catch-up
                // will see it released. Evicted: it already left.
                if *seq >= sum.next && *seq < sum.counted {
                    sum.sum = sum.sum.saturating_sub(u128::from(entry.amount));
                    updates.push((key.get(2).copied().map(|p| p.int(Table::BudgetSums)).transpose()?, sum));
                }
                Ok(true)
            })?;
            for (window, sum) in updates {
                let window = window.unwrap_or_default();
                write(self.rows, Table::BudgetSums, &[Text(grant), Text(metric), Int(window)], &sum, Put::Replace)?;
            }
            released.push(serde_json::json!({"grant_id": grant, "metric": metric, "amount": entry.amount}));
        }
        if released.is_empty() {
            return Ok(());
        }
        self.event(
            EventKind::BUDGET_RELEASED,
            now,
            Some(action_id),
            Some(effect_key),
            None,
            serde_json::json!({"attempt": attempt, "released": released}),
        )?;
        Ok(())
    }
}

impl WriteTables for Writes<'_> {
    fn effect(&self, effect_key: &str) -> Result<Option<EffectRecord>> {
        let Some(stored) = effect_row(self.r(), effect_key)? else { return Ok(None) };
        if stored.state == EffectState::Failed {
            check_failed(self.r(), &stored)?;
        }
        Ok(Some(stored.into_record(None)))
    }

    fn absence_witnesses(&self, effect_key: &str) -> Result<AbsenceWitnesses> {
        let rows = self.r();
        let mut neighbours = Vec::with_capacity(2);
        if rows.lays_out_pages() {
            // Two descents through the pages the lookup just read (cached): a damaged key or
            // slot in the leaf shows as a neighbour that fails its check under its own key, and
            // a row the lookup missed but the tree still holds shows as one with the very key.
            let before = Scan::all().to(Bound::Excluded(Text(effect_key))).backwards();
            let after = Scan::all().from(Bound::Included(Text(effect_key)));
            for scan in [before, after] {
                rows.scan(Table::Effects, &scan, &mut |key, bytes| {
                    let damage = decode::<StoredEffect>(Table::Effects.name(), &KeyView(key), bytes)
                        .err()
                        .map(|e| e.to_string());
                    let key = key.first().copied().map(|part| part.text(Table::Effects)).transpose()?;
                    neighbours.push(Neighbour { key: key.unwrap_or_default().to_owned(), damage });
                    Ok(false)
                })?;
            }
        }
        let outcome_receipt = read(rows, Table::EffectReceipts, &[Text(effect_key)])?;
        Ok(AbsenceWitnesses { outcome_receipt, neighbours })
    }

    fn put_effect(&mut self, record: &EffectRecord) -> Result<()> {
        let key = [Text(&record.effect_key)];
        write(self.rows, Table::Effects, &key, &StoredEffect::from_record(record), Put::Replace)?;
        // FAILED is the one state in which the executor proved nothing happened: whatever moved
        // the effect there (an outcome, a resolution, a reconciliation), its budget charges are
        // released here, in the same transaction, so no path can forget them.
        if crate::authority::budget::releases_charges(record.state) {
            self.release_budget_charges(&record.effect_key, record.attempt, &record.action_id, record.updated_at)?;
        }
        Ok(())
    }

    fn approval(&self, approval_id: &str) -> Result<Option<ApprovalRecord>> {
        approval(self.r(), approval_id)
    }

    /// The request the index names must exist and bind that same action, or the index is damage.
    fn latest_approval_for(&self, action_hash: &str) -> Result<Option<ApprovalRecord>> {
        let key = [Text(action_hash)];
        let Some(id) = read::<String>(self.r(), Table::ApprovalsByAction, &key)? else { return Ok(None) };
        let index = Table::ApprovalsByAction.name();
        match approval(self.r(), &id)? {
            Some(record) if record.action_hash == action_hash => Ok(Some(record)),
            Some(_) => {
                Err(damaged(index, &KeyView(&key), &format!("points at approval {id}, which binds another action")))
            }
            None => Err(damaged(index, &KeyView(&key), &format!("points at approval {id}, which is missing"))),
        }
    }

    fn index_approval(&mut self, action_hash: &str, approval_id: &str) -> Result<()> {
        write(self.rows, Table::ApprovalsByAction, &[Text(action_hash)], &approval_id.to_owned(), Put::Replace)
    }

    fn put_approval(&mut self, record: &ApprovalRecord) -> Result<()> {
        write(self.rows, Table::Approvals, &[Text(&record.approval_id)], record, Put::Replace)
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
            None => self.rows.last_int(Table::Events)?.unwrap_or(0),
        };
        let event_id = last + 1;
        self.last_event_id = Some(event_id);
        // The data in canonical form (or plain JSON when it has no canonical form).
        let text = crate::canonical::to_canonical_string(&data, "event.data")
            .unwrap_or_else(|_| serde_json::to_string(&data).unwrap_or_else(|_| "null".into()));
        let event = Event {
            event_id,
            ts,
            kind,
            action_id: action_id.map(str::to_owned),
            effect_key: effect_key.map(str::to_owned),
            approval_id: approval_id.map(str::to_owned),
            data: text,
        };
        write(self.rows, Table::Events, &[Int(event_id)], &event, Put::New)?;
        Ok(event_id)
    }

    fn receipt_seq(&self, receipt_id: &str) -> Result<Option<u64>> {
        read(self.r(), Table::ReceiptIds, &[Text(receipt_id)])
    }

    fn append_receipt(&mut self, draft: &ReceiptDraft, executor_result: Option<StoredResult>) -> Result<(u64, String)> {
        let head: ChainHead = read(self.r(), Table::Meta, &[Text(META_HEAD)])?
            .ok_or_else(|| Error::store(StoreFaultKind::Damaged, "the store has no chain head row; it was altered"))?;
        let seq = head.seq + 1;
        if self.receipt_seq(&draft.receipt_id)?.is_some() {
            return Err(Error::store(
                StoreFaultKind::Defect,
                format!(
                    "receipt id {} is already on the chain; nothing was written (the random source repeated itself)",
                    draft.receipt_id
                ),
            ));
        }
        let (document, hash) = draft
            .seal(seq, &head.hash)
            .map_err(|e| Error::invalid(InvalidInputKind::NotCanonical, format!("cannot encode a receipt: {e}")))?;
        let row = StoredReceipt { document, hash: Some(hash.clone()), executor_result };
        // A receipt at this seq already (the head was altered) is refused by `Put::New`.
        write(self.rows, Table::Receipts, &[Int(seq)], &row, Put::New)?;
        write(self.rows, Table::ReceiptIds, &[Text(&draft.receipt_id)], &seq, Put::New)?;
        if let (true, Some(key)) = (records_outcome(draft), draft.effect_key.as_deref()) {
            write(self.rows, Table::EffectReceipts, &[Text(key)], &seq, Put::Replace)?;
        }
        let head = ChainHead { seq, hash: hash.clone() };
        write(self.rows, Table::Meta, &[Text(META_HEAD)], &head, Put::Replace)?;
        Ok((seq, hash))
    }

    fn append_snapshot(&mut self, mut record: SnapshotRecord, scopes: &[String]) -> Result<SnapshotRecord> {
        let last: u64 = read(self.r(), Table::Meta, &[Text(META_SNAPSHOT_SEQ)])?.unwrap_or(0);
        record.seq = last + 1;
        // An id that exists (the random source repeated itself) is refused by `Put::New`.
        write(self.rows, Table::Snapshots, &[Text(&record.id)], &record, Put::New)?;
        for scope in scopes {
            write(self.rows, Table::SnapshotIndex, &[Text(scope), Int(record.seq)], &record.id, Put::New)?;
        }
        write(self.rows, Table::Meta, &[Text(META_SNAPSHOT_SEQ)], &record.seq, Put::Replace)?;
        Ok(record)
    }

    fn cache_node(&mut self, level: u8, index: u64, hash: [u8; 32]) -> Result<()> {
        self.put_cached_node(level, index, hash)
    }

    fn append_checkpoint(&mut self, checkpoint: &crate::evidence::checkpoint::StoredCheckpoint) -> Result<()> {
        self.put_checkpoint(checkpoint)
    }

    fn put_anchor(&mut self, anchor: &crate::evidence::anchoring::StoredAnchor) -> Result<()> {
        self.put_anchor_row(anchor)
    }

    fn keep_policy(&mut self, policy_hash: &str, canonical: &[u8]) -> Result<bool> {
        self.put_policy(policy_hash, canonical)
    }

    fn put_hold(&mut self, hold: &crate::evidence::retention::Hold) -> Result<()> {
        self.put_hold_row(hold)
    }

    fn put_scoped_grant(&mut self, grant: &crate::approval::scope::ScopedGrant, indexed: bool) -> Result<()> {
        self.put_scoped_grant_row(grant, indexed)
    }

    fn prune(&mut self, marker: &mut crate::evidence::retention::PrunedPrefix, from: u64) -> Result<u64> {
        self.prune_rows(marker, from)
    }
}

impl AuthorityWrites for Writes<'_> {
    fn delegations(&self) -> Box<dyn CountedSource + '_> {
        Box::new(Delegations { rows: self.r(), reads: Cell::new(0) })
    }

    fn insert_delegation(&mut self, new: &NewDelegation) -> Result<()> {
        let record = &new.record;
        let id = record.delegation_id.as_str();
        // Insert-only: an id that exists is refused (`Put::New`) and nothing is written.
        write(self.rows, Table::Delegations, &[Text(id)], record, Put::New)?;
        for key in &new.index_keys {
            write(self.rows, Table::DelegationIndex, &[Text(&key.agent), Text(&key.action), Text(id)], &(), Put::New)?;
        }
        write(self.rows, Table::DelegationChildren, &[Text(&record.parent_id), Text(id)], &(), Put::New)?;
        let creator = [Text(&record.created_by.agent), Text(id)];
        write(self.rows, Table::DelegationCreators, &creator, &record.created_by.user, Put::New)
    }

    fn insert_revocation(&mut self, revocation: &Revocation) -> Result<bool> {
        let key = [Text(&revocation.delegation_id)];
        if self.rows.get(Table::Revocations, &key)?.is_some() {
            return Ok(false);
        }
        write(self.rows, Table::Revocations, &key, revocation, Put::New)?;
        Ok(true)
    }

    fn is_revoked(&self, delegation_id: &str) -> Result<bool> {
        let found: Option<Revocation> = read(self.r(), Table::Revocations, &[Text(delegation_id)])?;
        Ok(found.is_some_and(|revocation| revocation.delegation_id == delegation_id))
    }

    fn delegations_created_by(&self, agent: &str, user: Option<&str>) -> Result<Vec<String>> {
        let mut ids = Vec::new();
        let prefix = [Text(agent)];
        each::<Option<String>>(self.r(), Table::DelegationCreators, &Scan::under(&prefix), |key, created_as| {
            if user.is_none_or(|wanted| created_as.as_deref() == Some(wanted)) {
                let id = key.get(1).copied().map(|part| part.text(Table::DelegationCreators)).transpose()?;
                ids.push(id.unwrap_or_default().to_owned());
            }
            Ok(true)
        })?;
        Ok(ids)
    }

    // From the running sum: catch up with rows charged since it was last read, evict rows below
    // the floor, write it back. A window seen for the first time is summed backwards from the
    // newest row until one falls below the floor (rows in the window, not the history); a floor
    // that moved back (the clock stepped back) rebuilds from the whole series rather than
    // undercount.
    fn budget_window_sum(&mut self, charge: &Charge, now: Micros) -> Result<u128> {
        let grant = charge.grant_id.as_str();
        let metric = charge.metric.as_str();
        let key = [Text(grant), Text(metric), Int(charge.window_seconds)];
        let floor = now.saturating_sub(charge.window());
        let end = self.series_tail(grant, metric)?.0;
        let stored: Option<StoredSum> = read(self.r(), Table::BudgetSums, &key)?;
        let sum = match stored {
            None => self.sum_backwards(grant, metric, floor, end)?,
            Some(mut stored) => {
                for seq in stored.counted..end {
                    let entry = self.required_entry(grant, metric, seq)?;
                    if !entry.released {
                        stored.sum += u128::from(entry.amount);
                    }
                }
                stored.counted = end;
                stored
            }
        };
        let mut window = WindowSum { sum: sum.sum, next: sum.next, floor: sum.floor };
        let advanced = window.advance(floor, end, |seq| {
            self.ledger_entry(grant, metric, seq).map(|entry| {
                entry.map(|e| LedgerRow { seq, consumed_at: e.consumed_at, amount: e.amount, released: e.released })
            })
        });
        match advanced {
            Ok(()) => {}
            Err(WindowSumError::FloorMovedBack { .. }) => {
                let mut rows = Vec::new();
                for seq in 0..end {
                    let entry = self.required_entry(grant, metric, seq)?;
                    rows.push(LedgerRow {
                        seq,
                        consumed_at: entry.consumed_at,
                        amount: entry.amount,
                        released: entry.released,
                    });
                }
                window = WindowSum::rebuild(floor, rows);
            }
            Err(WindowSumError::MissingRow(seq)) => return Err(missing_ledger_row(grant, metric, seq)),
            Err(WindowSumError::Read(error)) => return Err(error),
        }
        let sum = StoredSum { sum: window.sum, next: window.next, counted: end, floor: window.floor };
        write(self.rows, Table::BudgetSums, &key, &sum, Put::Replace)?;
        Ok(sum.sum)
    }

    // The running sums pick the new ledger rows up at their next check.
    fn charge_budgets(&mut self, charges: &[Charge], effect_key: &str, attempt: u32, now: Micros) -> Result<()> {
        let mut written: Vec<ChargeRef> = Vec::new();
        for (grant, metric, amount) in crate::authority::budget::ledger_entries(charges) {
            let (seq, last) = self.series_tail(&grant, &metric)?;
            // A series' times never go back: after a clock step back a charge is recorded at its
            // predecessor's time, so it stays in windows longer (an overcount, never an
            // undercount) and every scan may stop at the first row below a floor.
            let consumed_at = last.map_or(now, |last| last.max(now));
            let entry =
                LedgerEntry { consumed_at, amount, released: false, effect_key: effect_key.to_owned(), attempt };
            write(self.rows, Table::BudgetLedger, &[Text(&grant), Text(&metric), Int(seq)], &entry, Put::New)?;
            written.push((grant, metric, seq));
        }
        if written.is_empty() {
            return Ok(());
        }
        // An attempt that already has charges (the store was altered) is refused by `Put::New`.
        write(self.rows, Table::BudgetByEffect, &[Text(effect_key), Int(u64::from(attempt))], &written, Put::New)
    }
}

// ---- one consistent read ------------------------------------------------------------------------

/// Rows fetched per step when a read walks the whole chain.
const CHAIN_PAGE: usize = 1024;

impl Reads<'_> {
    fn with_result(&self, stored: StoredEffect) -> Result<EffectRecord> {
        if stored.state != EffectState::Committed || stored.result.is_some() {
            if stored.state == EffectState::Failed {
                check_failed(self.rows, &stored)?;
            }
            return Ok(stored.into_record(None));
        }
        let result = match read::<u64>(self.rows, Table::EffectReceipts, &[Text(&stored.effect_key)])? {
            None => None,
            Some(seq) => super::retention::outcome_receipt(self.rows, &stored.effect_key, seq)?
                .and_then(|receipt| receipt.executor_result),
        };
        Ok(stored.into_record(result))
    }

    /// Up to `limit` receipts with their seqs, in `scan`'s order.
    fn receipts_in(&self, scan: &Scan<'_>, limit: usize) -> Result<Vec<(u64, StoredReceipt)>> {
        let mut out = Vec::new();
        if limit == 0 {
            return Ok(out);
        }
        each::<StoredReceipt>(self.rows, Table::Receipts, scan, |key, receipt| {
            out.push((key.first().copied().map(|p| p.int(Table::Receipts)).transpose()?.unwrap_or(0), receipt));
            Ok(out.len() < limit)
        })?;
        Ok(out)
    }

    /// Every row of `table` decoded as `T` and checked by `check`: (table, rows, problems).
    fn check_table<T: DeserializeOwned>(
        &self,
        table: Table,
        check: impl Fn(&[Part<'_>], T) -> Result<()>,
    ) -> Result<(&'static str, u64, Vec<String>)> {
        self.check_rows(table, |key, bytes| {
            decode::<T>(table.name(), &KeyView(key), bytes).and_then(|row| check(key, row))
        })
    }

    /// Every row of `table` as stored, checked by `check`: (table, rows, problems).
    fn check_rows(
        &self,
        table: Table,
        check: impl Fn(&[Part<'_>], &[u8]) -> Result<()>,
    ) -> Result<(&'static str, u64, Vec<String>)> {
        let mut rows = 0u64;
        let mut problems = Vec::new();
        self.rows.scan(table, &Scan::all(), &mut |key, bytes| {
            rows += 1;
            if let Err(error) = check(key, bytes) {
                problems.push(error.to_string());
            }
            Ok(true)
        })?;
        Ok((table.name(), rows, problems))
    }
}

fn no_check<T>(_: &[Part<'_>], _: T) -> Result<()> {
    Ok(())
}

fn text_key<'a>(key: &[Part<'a>]) -> &'a str {
    match key.first() {
        Some(Text(text)) => text,
        _ => "",
    }
}

impl ReadTables for Reads<'_> {
    fn effect(&self, effect_key: &str) -> Result<Option<EffectRecord>> {
        let Some(stored) = effect_row(self.rows, effect_key)? else { return Ok(None) };
        self.with_result(stored).map(Some)
    }

    fn effects(&self, state: Option<EffectState>, limit: usize) -> Result<Vec<EffectRecord>> {
        let mut out = Vec::new();
        if limit == 0 {
            return Ok(out);
        }
        let mut stored_rows = Vec::new();
        each::<StoredEffect>(self.rows, Table::Effects, &Scan::all(), |_, stored| {
            if state.is_none_or(|wanted| stored.state == wanted) {
                stored_rows.push(stored);
            }
            Ok(stored_rows.len() < limit)
        })?;
        for stored in stored_rows {
            out.push(self.with_result(stored)?);
        }
        Ok(out)
    }

    fn approval(&self, approval_id: &str) -> Result<Option<ApprovalRecord>> {
        approval(self.rows, approval_id)
    }

    fn pending_approvals(&self, now: Micros) -> Result<Vec<ApprovalRecord>> {
        let mut out = Vec::new();
        each::<ApprovalRecord>(self.rows, Table::Approvals, &Scan::all(), |key, record| {
            // Only what is returned is rehashed: answered and lapsed requests (most rows, in a
            // store that has run a while) are skipped before the binding check, which `warden
            // doctor` and every read of one request still make.
            if record.status == ApprovalStatus::Pending && now <= record.expires_at {
                out.push(bound(record, text_key(key))?);
            }
            Ok(true)
        })?;
        out.sort_by_key(|record| record.requested_at);
        Ok(out)
    }

    fn receipt(&self, seq: u64) -> Result<Option<StoredReceipt>> {
        read(self.rows, Table::Receipts, &[Int(seq)])
    }

    fn receipt_seq(&self, receipt_id: &str) -> Result<Option<u64>> {
        read(self.rows, Table::ReceiptIds, &[Text(receipt_id)])
    }

    fn receipts(&self, from: u64, limit: usize) -> Result<Vec<(u64, StoredReceipt)>> {
        self.receipts_in(&Scan::all().from(Bound::Included(Int(from))), limit)
    }

    fn last_receipts(&self, n: usize) -> Result<Vec<(u64, StoredReceipt)>> {
        let mut out = self.receipts_in(&Scan::all().backwards(), n)?;
        out.reverse();
        Ok(out)
    }

    fn receipt_count(&self) -> Result<u64> {
        self.rows.count(Table::Receipts)
    }

    fn events(&self, after: u64, limit: usize) -> Result<Vec<Event>> {
        let mut out = Vec::new();
        if limit == 0 {
            return Ok(out);
        }
        each::<Event>(self.rows, Table::Events, &Scan::all().from(Bound::Excluded(Int(after))), |_, event| {
            out.push(event);
            Ok(out.len() < limit)
        })?;
        Ok(out)
    }

    /// Walk every receipt in this one read snapshot, a page at a time (never the whole chain in
    /// memory), and name every break.
    fn verify_chain(&self) -> Result<ChainReport> {
        // A head that fails its check is reported as no head (`head_mismatch`).
        let head = match self.rows.get(Table::Meta, &[Text(META_HEAD)])? {
            Some(bytes) => decode::<ChainHead>(Table::Meta.name(), &KeyView(&[Text(META_HEAD)]), &bytes)
                .ok()
                .map(|head| (head.seq, head.hash)),
            None => None,
        };
        let start = super::retention::chain_start(self.rows)?;
        let failure: Cell<Option<Error>> = Cell::new(None);
        let mut next: Option<u64> = Some(0);
        let mut page: std::collections::VecDeque<(u64, std::result::Result<StoredReceipt, String>)> =
            Default::default();
        let rows = std::iter::from_fn(|| {
            if page.is_empty() {
                let from = next?;
                let scan = Scan::all().from(Bound::Included(Int(from)));
                let walked = self.rows.scan(Table::Receipts, &scan, &mut |key, bytes| {
                    let seq = key.first().copied().map(|p| p.int(Table::Receipts)).transpose()?.unwrap_or(0);
                    let row = decode::<StoredReceipt>(Table::Receipts.name(), &KeyView(key), bytes)
                        .map_err(|e| e.to_string());
                    page.push_back((seq, row));
                    Ok(page.len() < CHAIN_PAGE)
                });
                if let Err(error) = walked {
                    failure.set(Some(error));
                    next = None;
                    return None;
                }
                next = match page.back() {
                    Some((seq, _)) if page.len() == CHAIN_PAGE => seq.checked_add(1),
                    _ => None,
                };
            }
            page.pop_front()
        });
        let report = crate::receipt::verify_chain(rows, head, start);
        match failure.take() {
            Some(error) => Err(error),
            None => Ok(report),
        }
    }

    fn snapshot(&self, id: &str) -> Result<Option<SnapshotRecord>> {
        read(self.rows, Table::Snapshots, &[Text(id)])
    }

    fn snapshot_page(&self, scope: &str, before: Option<u64>, limit: usize) -> Result<(Vec<SnapshotRecord>, bool)> {
        let prefix = [Text(scope)];
        let scan = match before {
            Some(before) => Scan::under(&prefix).to(Bound::Excluded(Int(before))),
            None => Scan::under(&prefix),
        }
        .backwards();
        let mut ids = Vec::new();
        let mut more = false;
        each::<String>(self.rows, Table::SnapshotIndex, &scan, |_, id| {
            if ids.len() == limit {
                more = true;
                return Ok(false);
            }
            ids.push(id);
            Ok(true)
        })?;
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            let record = self.snapshot(&id)?.ok_or_else(|| {
                Error::store(
                    StoreFaultKind::Damaged,
                    format!("snapshot {id} is indexed but missing; the store was altered"),
                )
            })?;
            out.push(record);
        }
        Ok((out, more))
    }

    fn check_all(&self) -> Result<Vec<(&'static str, u64, Vec<String>)>> {
        let mut report = vec![
            self.check_table::<StoredEffect>(Table::Effects, no_check)?,
            self.check_table::<ApprovalRecord>(Table::Approvals, |key, record| bound(record, text_key(key)).map(drop))?,
            self.check_table::<String>(Table::ApprovalsByAction, no_check)?,
            self.check_table::<SnapshotRecord>(Table::Snapshots, no_check)?,
            self.check_table::<u64>(Table::ReceiptIds, no_check)?,
            self.check_table::<u64>(Table::EffectReceipts, no_check)?,
            self.check_table::<Event>(Table::Events, no_check)?,
            self.check_table::<String>(Table::SnapshotIndex, no_check)?,
        ];
        // The meta table's rows each have their own form (the schema row is the engine's).
        report.push(self.check_rows(Table::Meta, |key, bytes| match text_key(key) {
            META_SCHEMA => Ok(()),
            META_HEAD => decode::<ChainHead>(Table::Meta.name(), &KeyView(key), bytes).map(drop),
            META_SNAPSHOT_SEQ => decode::<u64>(Table::Meta.name(), &KeyView(key), bytes).map(drop),
            META_JOURNAL => decode::<JournalMark>(Table::Meta.name(), &KeyView(key), bytes).map(drop),
            META_PRUNED => {
                decode::<crate::evidence::retention::PrunedPrefix>(Table::Meta.name(), &KeyView(key), bytes).map(drop)
            }
            other => {
                Err(Error::store(StoreFaultKind::Damaged, format!("the meta table holds an unknown row {other:?}")))
            }
        })?);
        report.push(self.check_table::<DelegationRecord>(Table::Delegations, no_check)?);
        report.push(self.check_table::<Revocation>(Table::Revocations, no_check)?);
        report.push(self.check_table::<()>(Table::DelegationIndex, no_check)?);
        report.push(self.check_table::<()>(Table::DelegationChildren, no_check)?);
        report.push(self.check_table::<Option<String>>(Table::DelegationCreators, no_check)?);
        report.push(self.check_table::<LedgerEntry>(Table::BudgetLedger, no_check)?);
        report.push(self.check_table::<StoredSum>(Table::BudgetSums, no_check)?);
        report.push(self.check_table::<Vec<ChargeRef>>(Table::BudgetByEffect, no_check)?);
        report.push(self.check_table(Table::Holds, |key, hold| super::retention::filed(key, hold).map(drop))?);
        report.push(self.check_rows(Table::PrunedOutcomes, |key, bytes| {
            super::retention::check_pruned_outcome(self.rows, key, bytes)
        })?);
        report.push(self.check_table(Table::ScopedGrants, |key, grant| super::scoped::filed(key, grant).map(drop))?);
        report.push(self.check_table::<()>(Table::ScopedGrantsByAction, no_check)?);
        let missing = self.rows.missing_tables()?;
        for (table, _, problems) in &mut report {
            if missing.iter().any(|gone| gone.name() == *table) {
                problems.push(format!("the {table} table is missing from the file's table directory"));
            }
        }
        Ok(report)
    }

    fn bytes_in_use(&self) -> Result<u64> {
        self.rows.bytes_in_use()
    }

    fn orphans(&self) -> Result<Vec<String>> {
        let rows = self.rows;
        let mut out = Vec::new();
        let pruned_through = super::retention::pruned_through(rows)?;
        rows.scan(Table::ReceiptIds, &Scan::all(), &mut |key, bytes| {
            // A row that fails its check is the row check's to report.
            if let Ok(seq) = decode::<u64>(Table::ReceiptIds.name(), &KeyView(key), bytes) {
                // The ids of pruned receipts stay (a re-sent outcome still finds its id).
                if seq > pruned_through && rows.get(Table::Receipts, &[Int(seq)])?.is_none() {
                    out.push(format!("receipt id {} points at receipt {seq}, which is missing", text_key(key)));
                }
            }
            Ok(true)
        })?;
        rows.scan(Table::EffectReceipts, &Scan::all(), &mut |key, bytes| {
            let effect = text_key(key);
            if rows.get(Table::Effects, &[Text(effect)])?.is_none() {
                out.push(format!("effect {effect:?} has receipts but no effect row"));
            }
            // The index agrees with the receipts: the one it names exists and is about the key.
            if let Ok(seq) = decode::<u64>(Table::EffectReceipts.name(), &KeyView(key), bytes) {
                match super::retention::outcome_receipt_within(rows, effect, seq, || Ok(pruned_through)) {
                    Ok(None) => out
                        .push(format!("the outcome index of effect {effect:?} names receipt {seq}, which is missing")),
                    Ok(Some(receipt)) => {
                        let about = crate::canonical::parse_json(&receipt.document).ok().and_then(|document| {
                            document.get("effect_key").and_then(serde_json::Value::as_str).map(str::to_owned)
                        });
                        if about.as_deref() != Some(effect) {
                            out.push(format!(
                                "the outcome index of effect {effect:?} names receipt {seq}, which is about {about:?}"
                            ));
                        }
                    }
                    // Reported by the row check.
                    Err(_) => {}
                }
            }
            Ok(true)
        })?;
        // The walk in key order agrees with the lookup: in a file, a damaged branch or leaf page
        // can send a point lookup past a row the walk still finds, or put keys out of order.
        let pages = rows.lays_out_pages();
        let mut previous: Option<String> = None;
        rows.scan(Table::Effects, &Scan::all(), &mut |key, bytes| {
            let walked = text_key(key);
            if pages {
                if previous.as_deref().is_some_and(|before| before >= walked) {
                    out.push(format!(
                        "the effects table lists {walked:?} after {:?}: its pages are out of key order",
                        previous.as_deref().unwrap_or_default()
                    ));
                }
                if rows.get(Table::Effects, key)?.is_none() {
                    out.push(format!(
                        "the effects table lists a row {walked:?} that a lookup of that key does not find"
                    ));
                }
                previous = Some(walked.to_owned());
            }
            if let Ok(stored) = decode::<StoredEffect>(Table::Effects.name(), &KeyView(key), bytes) {
                if stored.state == EffectState::Failed {
                    if let Err(error) = check_failed(rows, &stored) {
                        out.push(error.to_string());
                    }
                }
            }
            Ok(true)
        })?;
        rows.scan(Table::SnapshotIndex, &Scan::all(), &mut |key, bytes| {
            if let Ok(id) = decode::<String>(Table::SnapshotIndex.name(), &KeyView(key), bytes) {
                if rows.get(Table::Snapshots, &[Text(&id)])?.is_none() {
                    out.push(format!("snapshot index {} names {id}, which is missing", KeyView(key).shown_text()));
                }
            }
            Ok(true)
        })?;
        Ok(out)
    }
}

impl AuthorityReads for Reads<'_> {
    fn delegation_source(&self) -> Result<Box<dyn CountedSource + '_>> {
        Ok(Box::new(Delegations { rows: self.rows, reads: Cell::new(0) }))
    }

    fn delegation_page(&self, after: Option<&str>, limit: usize) -> Result<Vec<StoredDelegation>> {
        let scan = match after {
            None => Scan::all(),
            Some(last) => Scan::all().from(Bound::Excluded(Text(last))),
        };
        let mut records = Vec::new();
        if limit > 0 {
            each::<DelegationRecord>(self.rows, Table::Delegations, &scan, |key, record| {
                records.push((text_key(key).to_owned(), record));
                Ok(records.len() < limit)
            })?;
        }
        let mut out = Vec::with_capacity(records.len());
        for (id, record) in records {
            let revocation = read::<Revocation>(self.rows, Table::Revocations, &[Text(&id)])?;
            out.push(StoredDelegation { record, revocation });
        }
        Ok(out)
    }

    fn budget_spent(&self, grant_id: &str, metric: &str, window_seconds: u64, now: Micros) -> Result<u128> {
        let window =
            Charge { grant_id: String::new(), metric: String::new(), amount: 0, limit: 0, window_seconds }.window();
        let floor = now.saturating_sub(window);
        let mut sum = 0u128;
        let prefix = [Text(grant_id), Text(metric)];
        each::<LedgerEntry>(self.rows, Table::BudgetLedger, &Scan::under(&prefix), |_, entry| {
            if !entry.released && entry.consumed_at >= floor && entry.consumed_at <= now {
                sum += u128::from(entry.amount);
            }
            Ok(true)
        })?;
        Ok(sum)
    }
}
