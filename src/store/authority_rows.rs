//! The authority tables (schema 3): delegations, revocations and their indexes, and the budget
//! ledger with its running window sums. Every value is integrity-checked on every read, like
//! every other row (`codec`); the indexes carry an empty, checksummed value, so a flipped bit in
//! an index key fails its check instead of pointing somewhere else.
//!
//! Reads count themselves (one per point lookup, one per range, one per row a range returns):
//! that count is what shows an evaluation's reads do not grow with the delegations stored.

use std::cell::Cell;

use redb::{ReadableTable, ReadableTableMetadata, WriteTransaction};
use serde::{Deserialize, Serialize};

use super::boundary::{AuthorityReads, AuthorityWrites, CountedSource};
use super::codec::{decode, encode, KeyBytes};
use super::lazy::LazyTable;
use super::tables::{self, name};
use super::tx::{fault_in, RedbReadTx, RedbWriteTx};
use crate::authority::budget::{LedgerRow, WindowSum, WindowSumError};
use crate::authority::record::{DelegationRecord, Revocation, StoredDelegation};
use crate::authority::source::{DelegationSource, IndexKey, SourceError};
use crate::authority::{Charge, NewDelegation};
use crate::clock::Micros;
use crate::error::{Error, Result};

// ---- keys as the checksum sees them ------------------------------------------------------------

fn push_text(out: &mut Vec<u8>, text: &str) {
    out.extend_from_slice(&(text.len() as u64).to_le_bytes());
    out.extend_from_slice(text.as_bytes());
}

impl KeyBytes for (&str, &str) {
    fn bytes(&self) -> std::borrow::Cow<'_, [u8]> {
        let mut out = Vec::new();
        push_text(&mut out, self.0);
        push_text(&mut out, self.1);
        std::borrow::Cow::Owned(out)
    }
    fn shown(&self) -> String {
        format!("({:?}, {:?})", self.0, self.1)
    }
}

impl KeyBytes for (&str, &str, &str) {
    fn bytes(&self) -> std::borrow::Cow<'_, [u8]> {
        let mut out = Vec::new();
        push_text(&mut out, self.0);
        push_text(&mut out, self.1);
        push_text(&mut out, self.2);
        std::borrow::Cow::Owned(out)
    }
    fn shown(&self) -> String {
        format!("({:?}, {:?}, {:?})", self.0, self.1, self.2)
    }
}

impl KeyBytes for (&str, &str, u64) {
    fn bytes(&self) -> std::borrow::Cow<'_, [u8]> {
        let mut out = Vec::new();
        push_text(&mut out, self.0);
        push_text(&mut out, self.1);
        out.extend_from_slice(&self.2.to_le_bytes());
        std::borrow::Cow::Owned(out)
    }
    fn shown(&self) -> String {
        format!("({:?}, {:?}, {})", self.0, self.1, self.2)
    }
}

// ---- stored forms --------------------------------------------------------------------------------

/// One budget charge. `released` turns true once, when its effect reaches FAILED.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct LedgerEntry {
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
pub(super) struct StoredSum {
    pub sum: u128,
    pub next: u64,
    pub counted: u64,
    pub floor: Micros,
}

/// One ledger row a reservation wrote, as `budget_by_effect` lists them.
type ChargeRef = (String, String, u64);

type Str = &'static str;
type WriteTable<'t, K> = redb::Table<'t, K, &'static [u8]>;
/// A [`Reader`] over the tables of one write transaction.
type TxReader<'a, 't> = Reader<'a, WriteTable<'t, Str>, WriteTable<'t, (Str, Str, Str)>, WriteTable<'t, (Str, Str)>>;

/// The authority tables of one write transaction.
pub(crate) struct AuthorityTables<'t> {
    delegations: LazyTable<'t, Str, &'static [u8]>,
    revocations: LazyTable<'t, Str, &'static [u8]>,
    index: LazyTable<'t, (Str, Str, Str), &'static [u8]>,
    children: LazyTable<'t, (Str, Str), &'static [u8]>,
    creators: LazyTable<'t, (Str, Str), &'static [u8]>,
    ledger: LazyTable<'t, (Str, Str, u64), &'static [u8]>,
    sums: LazyTable<'t, (Str, Str, u64), &'static [u8]>,
    by_effect: LazyTable<'t, (Str, u64), &'static [u8]>,
}

impl<'t> AuthorityTables<'t> {
    /// Each table is opened when first touched (`lazy`).
    pub(super) fn open(txn: &'t WriteTransaction) -> AuthorityTables<'t> {
        AuthorityTables {
            delegations: LazyTable::new(txn, tables::DELEGATIONS, name::DELEGATIONS),
            revocations: LazyTable::new(txn, tables::REVOCATIONS, name::REVOCATIONS),
            index: LazyTable::new(txn, tables::DELEGATION_INDEX, name::DELEGATION_INDEX),
            children: LazyTable::new(txn, tables::DELEGATION_CHILDREN, name::DELEGATION_CHILDREN),
            creators: LazyTable::new(txn, tables::DELEGATION_CREATORS, name::DELEGATION_CREATORS),
            ledger: LazyTable::new(txn, tables::BUDGET_LEDGER, name::BUDGET_LEDGER),
            sums: LazyTable::new(txn, tables::BUDGET_SUMS, name::BUDGET_SUMS),
            by_effect: LazyTable::new(txn, tables::BUDGET_BY_EFFECT, name::BUDGET_BY_EFFECT),
        }
    }
}

/// Create the authority tables (a new store, or a migration).
pub(super) fn create_tables(txn: &WriteTransaction) -> Result<()> {
    txn.open_table(tables::DELEGATIONS).map_err(fault_in(name::DELEGATIONS))?;
    txn.open_table(tables::REVOCATIONS).map_err(fault_in(name::REVOCATIONS))?;
    txn.open_table(tables::DELEGATION_INDEX).map_err(fault_in(name::DELEGATION_INDEX))?;
    txn.open_table(tables::DELEGATION_CHILDREN).map_err(fault_in(name::DELEGATION_CHILDREN))?;
    txn.open_table(tables::DELEGATION_CREATORS).map_err(fault_in(name::DELEGATION_CREATORS))?;
    txn.open_table(tables::BUDGET_LEDGER).map_err(fault_in(name::BUDGET_LEDGER))?;
    txn.open_table(tables::BUDGET_SUMS).map_err(fault_in(name::BUDGET_SUMS))?;
    txn.open_table(tables::BUDGET_BY_EFFECT).map_err(fault_in(name::BUDGET_BY_EFFECT))?;
    Ok(())
}

// ---- reading delegations, from either kind of transaction --------------------------------------

fn unreadable(delegation_id: &str, error: Error) -> SourceError {
    SourceError::Unreadable { delegation_id: delegation_id.to_owned(), detail: error.to_string() }
}

fn store_fault(table: &'static str) -> impl FnOnce(redb::StorageError) -> SourceError {
    move |error| SourceError::Fault(fault_in(table)(error).to_string())
}

/// A delegation source over the tables of one transaction, counting its reads.
struct Reader<'a, D, I, C> {
    delegations: &'a D,
    revocations: &'a D,
    index: &'a I,
    children: &'a C,
    reads: &'a Cell<u64>,
}

impl<D, I, C> Reader<'_, D, I, C>
where
    D: ReadableTable<Str, &'static [u8]>,
    I: ReadableTable<(Str, Str, Str), &'static [u8]>,
    C: ReadableTable<(Str, Str), &'static [u8]>,
{
    fn count(&self) {
        self.reads.set(self.reads.get().saturating_add(1));
    }

    fn record(&self, delegation_id: &str) -> Result<Option<DelegationRecord>, SourceError> {
        self.count();
        let found = self.delegations.get(delegation_id).map_err(store_fault(name::DELEGATIONS))?;
        let Some(bytes) = found else { return Ok(None) };
        let record: DelegationRecord = decode(name::DELEGATIONS, &delegation_id, bytes.value())
            .map_err(|error| unreadable(delegation_id, error))?;
        if record.delegation_id != delegation_id {
            return Err(SourceError::Unreadable {
                delegation_id: delegation_id.to_owned(),
                detail: "the row names another delegation id".into(),
            });
        }
        Ok(Some(record))
    }

    fn revocation(&self, delegation_id: &str) -> Result<Option<Revocation>, SourceError> {
        self.count();
        let found = self.revocations.get(delegation_id).map_err(store_fault(name::REVOCATIONS))?;
        found
            .map(|bytes| decode(name::REVOCATIONS, &delegation_id, bytes.value()))
            .transpose()
            .map_err(|error| unreadable(delegation_id, error))
    }
}

impl<D, I, C> DelegationSource for Reader<'_, D, I, C>
where
    D: ReadableTable<Str, &'static [u8]>,
    I: ReadableTable<(Str, Str, Str), &'static [u8]>,
    C: ReadableTable<(Str, Str), &'static [u8]>,
{
    fn delegation(&self, delegation_id: &str) -> Result<Option<StoredDelegation>, SourceError> {
        let Some(record) = self.record(delegation_id)? else { return Ok(None) };
        let revocation = self.revocation(delegation_id)?;
        Ok(Some(StoredDelegation { record, revocation }))
    }

    fn candidates(&self, key: &IndexKey) -> Result<Vec<StoredDelegation>, SourceError> {
        self.count();
        let mut ids = Vec::new();
        let from = (key.agent.as_str(), key.action.as_str(), "");
        for entry in self.index.range(from..).map_err(store_fault(name::DELEGATION_INDEX))? {
            let (entry_key, value) = entry.map_err(store_fault(name::DELEGATION_INDEX))?;
            let (agent, action, id) = entry_key.value();
            if agent != key.agent || action != key.action {
                break;
            }
            self.count();
            decode::<()>(name::DELEGATION_INDEX, &(agent, action, id), value.value())
                .map_err(|error| unreadable(id, error))?;
            ids.push(id.to_owned());
        }
        super::shared_rules::indexed_delegations(self, ids)
    }

    fn children(&self, parent_id: &str) -> Result<Vec<String>, SourceError> {
        self.count();
        let mut ids = Vec::new();
        for entry in self.children.range((parent_id, "")..).map_err(store_fault(name::DELEGATION_CHILDREN))? {
            let (entry_key, value) = entry.map_err(store_fault(name::DELEGATION_CHILDREN))?;
            let (parent, id) = entry_key.value();
            if parent != parent_id {
                break;
            }
            self.count();
            decode::<()>(name::DELEGATION_CHILDREN, &(parent, id), value.value())
                .map_err(|error| unreadable(id, error))?;
            ids.push(id.to_owned());
        }
        Ok(ids)
    }
}

/// The delegations of one write transaction, as a source (for creation and revocation, which
/// decide and write in one transaction). Counts reads in `reads`.
pub struct TxDelegations<'a, 't> {
    tables: &'a AuthorityTables<'t>,
    reads: Cell<u64>,
}

impl CountedSource for TxDelegations<'_, '_> {
    fn reads(&self) -> u64 {
        self.reads.get()
    }
}

impl<'t> TxDelegations<'_, 't> {
    fn reader(&self) -> Result<TxReader<'_, 't>, SourceError> {
        let fault = |error: Error| SourceError::Fault(error.to_string());
        Ok(Reader {
            delegations: self.tables.delegations.get().map_err(fault)?,
            revocations: self.tables.revocations.get().map_err(fault)?,
            index: self.tables.index.get().map_err(fault)?,
            children: self.tables.children.get().map_err(fault)?,
            reads: &self.reads,
        })
    }
}

impl DelegationSource for TxDelegations<'_, '_> {
    fn delegation(&self, delegation_id: &str) -> Result<Option<StoredDelegation>, SourceError> {
        self.reader()?.delegation(delegation_id)
    }
    fn candidates(&self, key: &IndexKey) -> Result<Vec<StoredDelegation>, SourceError> {
        self.reader()?.candidates(key)
    }
    fn children(&self, parent_id: &str) -> Result<Vec<String>, SourceError> {
        self.reader()?.children(parent_id)
    }
}

type ReadTable<K> = redb::ReadOnlyTable<K, &'static [u8]>;
/// Delegations, revocations, the index and the children, as one read opened them.
type ReadTables = (ReadTable<Str>, ReadTable<Str>, ReadTable<(Str, Str, Str)>, ReadTable<(Str, Str)>);

/// The delegations of one read transaction, as a source. A store without the tables (schema 2
/// opened read-only) has no delegations.
pub struct ReadDelegations {
    tables: Option<ReadTables>,
    reads: Cell<u64>,
}

impl CountedSource for ReadDelegations {
    fn reads(&self) -> u64 {
        self.reads.get()
    }
}

impl ReadDelegations {
    fn with<T: Default>(
        &self,
        work: impl FnOnce(&dyn DelegationSource) -> Result<T, SourceError>,
    ) -> Result<T, SourceError> {
        match &self.tables {
            None => Ok(T::default()),
            Some((delegations, revocations, index, children)) => {
                work(&Reader { delegations, revocations, index, children, reads: &self.reads })
            }
        }
    }
}

impl DelegationSource for ReadDelegations {
    fn delegation(&self, delegation_id: &str) -> Result<Option<StoredDelegation>, SourceError> {
        self.with(|source| source.delegation(delegation_id))
    }
    fn candidates(&self, key: &IndexKey) -> Result<Vec<StoredDelegation>, SourceError> {
        self.with(|source| source.candidates(key))
    }
    fn children(&self, parent_id: &str) -> Result<Vec<String>, SourceError> {
        self.with(|source| source.children(parent_id))
    }
}

fn open_optional<K: redb::Key + 'static>(
    txn: &redb::ReadTransaction,
    definition: redb::TableDefinition<K, &'static [u8]>,
    table: &'static str,
) -> Result<Option<ReadTable<K>>> {
    match txn.open_table(definition) {
        Ok(opened) => Ok(Some(opened)),
        Err(redb::TableError::TableDoesNotExist(_)) => Ok(None),
        Err(other) => Err(fault_in(table)(other)),
    }
}

impl RedbReadTx {
    /// Every authority row checked, for `warden doctor`.
    pub(super) fn check_authority_tables(&self, report: &mut Vec<(&'static str, u64, Vec<String>)>) -> Result<()> {
        let txn = self.txn();
        macro_rules! check {
            ($def:expr, $name:expr, $ty:ty) => {{
                let mut problems = Vec::new();
                let mut rows = 0u64;
                if let Some(table) = open_optional(txn, $def, $name)? {
                    for row in table.iter().map_err(fault_in($name))? {
                        let (key, value) = row.map_err(fault_in($name))?;
                        rows += 1;
                        if let Err(error) = decode::<$ty>($name, &key.value(), value.value()) {
                            problems.push(error.to_string());
                        }
                    }
                }
                report.push(($name, rows, problems));
            }};
        }
        check!(tables::DELEGATIONS, name::DELEGATIONS, DelegationRecord);
        check!(tables::REVOCATIONS, name::REVOCATIONS, Revocation);
        check!(tables::DELEGATION_INDEX, name::DELEGATION_INDEX, ());
        check!(tables::DELEGATION_CHILDREN, name::DELEGATION_CHILDREN, ());
        check!(tables::DELEGATION_CREATORS, name::DELEGATION_CREATORS, Option<String>);
        check!(tables::BUDGET_LEDGER, name::BUDGET_LEDGER, LedgerEntry);
        check!(tables::BUDGET_SUMS, name::BUDGET_SUMS, StoredSum);
        check!(tables::BUDGET_BY_EFFECT, name::BUDGET_BY_EFFECT, Vec<ChargeRef>);
        Ok(())
    }
}

impl AuthorityReads for RedbReadTx {
    fn delegation_source(&self) -> Result<Box<dyn CountedSource + '_>> {
        let txn = self.txn();
        let tables = match (
            open_optional(txn, tables::DELEGATIONS, name::DELEGATIONS)?,
            open_optional(txn, tables::REVOCATIONS, name::REVOCATIONS)?,
            open_optional(txn, tables::DELEGATION_INDEX, name::DELEGATION_INDEX)?,
            open_optional(txn, tables::DELEGATION_CHILDREN, name::DELEGATION_CHILDREN)?,
        ) {
            (Some(d), Some(r), Some(i), Some(c)) => Some((d, r, i, c)),
            _ => None,
        };
        Ok(Box::new(ReadDelegations { tables, reads: Cell::new(0) }))
    }

    fn delegation_page(&self, after: Option<&str>, limit: usize) -> Result<Vec<StoredDelegation>> {
        let txn = self.txn();
        let (Some(rows), Some(revocations)) = (
            open_optional(txn, tables::DELEGATIONS, name::DELEGATIONS)?,
            open_optional(txn, tables::REVOCATIONS, name::REVOCATIONS)?,
        ) else {
            return Ok(Vec::new());
        };
        let range = match after {
            None => rows.range::<&str>(..),
            Some(last) => rows.range::<&str>((std::ops::Bound::Excluded(last), std::ops::Bound::Unbounded)),
        }
        .map_err(fault_in(name::DELEGATIONS))?;
        let mut out = Vec::new();
        for row in range.take(limit) {
            let (key, value) = row.map_err(fault_in(name::DELEGATIONS))?;
            let id = key.value();
            let record: DelegationRecord = decode(name::DELEGATIONS, &id, value.value())?;
            let revocation = match revocations.get(id).map_err(fault_in(name::REVOCATIONS))? {
                Some(bytes) => Some(decode::<Revocation>(name::REVOCATIONS, &id, bytes.value())?),
                None => None,
            };
            out.push(StoredDelegation { record, revocation });
        }
        Ok(out)
    }

    fn budget_spent(&self, grant_id: &str, metric: &str, window_seconds: u64, now: Micros) -> Result<u128> {
        let Some(ledger) = open_optional(self.txn(), tables::BUDGET_LEDGER, name::BUDGET_LEDGER)? else {
            return Ok(0);
        };
        let window =
            Charge { grant_id: String::new(), metric: String::new(), amount: 0, limit: 0, window_seconds }.window();
        let floor = now.saturating_sub(window);
        let mut sum = 0u128;
        for row in
            ledger.range((grant_id, metric, 0)..=(grant_id, metric, u64::MAX)).map_err(fault_in(name::BUDGET_LEDGER))?
        {
            let (key, value) = row.map_err(fault_in(name::BUDGET_LEDGER))?;
            let entry: LedgerEntry = decode(name::BUDGET_LEDGER, &key.value(), value.value())?;
            if !entry.released && entry.consumed_at >= floor && entry.consumed_at <= now {
                sum += u128::from(entry.amount);
            }
        }
        Ok(sum)
    }
}

// ---- writing -------------------------------------------------------------------------------------

fn empty_row(table: &'static str, key: &impl KeyBytes) -> Result<Vec<u8>> {
    encode(table, key, &())
}

impl RedbWriteTx<'_> {
    // ---- budgets -------------------------------------------------------------------------------

    fn ledger_entry(&self, grant_id: &str, metric: &str, seq: u64) -> Result<Option<LedgerEntry>> {
        let key = (grant_id, metric, seq);
        match self.authority.ledger.get()?.get(key).map_err(fault_in(name::BUDGET_LEDGER))? {
            None => Ok(None),
            Some(bytes) => decode(name::BUDGET_LEDGER, &key, bytes.value()).map(Some),
        }
    }

    /// The next `seq` of the `(grant, metric)` series: one range read from the end.
    fn series_end(&self, grant_id: &str, metric: &str) -> Result<u64> {
        Ok(self.series_tail(grant_id, metric)?.0)
    }

    /// The next `seq` of the series and when its last charge was recorded.
    fn series_tail(&self, grant_id: &str, metric: &str) -> Result<(u64, Option<Micros>)> {
        let mut range = self
            .authority
            .ledger
            .get()?
            .range((grant_id, metric, 0)..=(grant_id, metric, u64::MAX))
            .map_err(fault_in(name::BUDGET_LEDGER))?;
        match range.next_back() {
            None => Ok((0, None)),
            Some(row) => {
                let (key, value) = row.map_err(fault_in(name::BUDGET_LEDGER))?;
                let key = key.value();
                let entry: LedgerEntry = decode(name::BUDGET_LEDGER, &key, value.value())?;
                Ok((key.2.saturating_add(1), Some(entry.consumed_at)))
            }
        }
    }

    fn put_sum(&mut self, key: (&str, &str, u64), sum: &StoredSum) -> Result<()> {
        let row = encode(name::BUDGET_SUMS, &key, sum)?;
        self.authority.sums.get_mut()?.insert(key, row.as_slice()).map_err(fault_in(name::BUDGET_SUMS))?;
        Ok(())
    }

    fn required_entry(&self, grant: &str, metric: &str, seq: u64) -> Result<LedgerEntry> {
        self.ledger_entry(grant, metric, seq)?.ok_or_else(|| missing_ledger_row(grant, metric, seq))
    }

    fn sum_backwards(&self, grant: &str, metric: &str, floor: Micros, end: u64) -> Result<StoredSum> {
        let mut sum = 0u128;
        let mut next = 0;
        let range = self
            .authority
            .ledger
            .get()?
            .range((grant, metric, 0)..(grant, metric, end))
            .map_err(fault_in(name::BUDGET_LEDGER))?;
        for row in range.rev() {
            let (key, value) = row.map_err(fault_in(name::BUDGET_LEDGER))?;
            let key = key.value();
            let entry: LedgerEntry = decode(name::BUDGET_LEDGER, &key, value.value())?;
            if entry.consumed_at < floor {
                next = key.2 + 1;
                break;
            }
            if !entry.released {
                sum += u128::from(entry.amount);
            }
        }
        Ok(StoredSum { sum, next, counted: end, floor })
    }

    /// Release the charges of `(effect_key, attempt)`: each ledger row once (a second FAILED
    /// write finds them released), each running sum that still counts it, and a BUDGET_RELEASED
    /// event naming them.
    pub(super) fn release_budget_charges(
        &mut self,
        effect_key: &str,
        attempt: u32,
        action_id: &str,
        now: Micros,
    ) -> Result<()> {
        self.touch(name::BUDGET_BY_EFFECT);
        let key = (effect_key, u64::from(attempt));
        let charged: Vec<ChargeRef> =
            match self.authority.by_effect.get()?.get(key).map_err(fault_in(name::BUDGET_BY_EFFECT))? {
                None => return Ok(()),
                Some(bytes) => decode(name::BUDGET_BY_EFFECT, &key, bytes.value())?,
            };
        let mut released = Vec::new();
        for (grant, metric, seq) in &charged {
            self.touch(name::BUDGET_LEDGER);
            let mut entry = self.required_entry(grant, metric, *seq)?;
            if entry.released {
                continue;
            }
            entry.released = true;
            let ledger_key = (grant.as_str(), metric.as_str(), *seq);
            let row = encode(name::BUDGET_LEDGER, &ledger_key, &entry)?;
            self.authority
                .ledger
                .get_mut()?
                .insert(ledger_key, row.as_slice())
                .map_err(fault_in(name::BUDGET_LEDGER))?;
            self.touch(name::BUDGET_SUMS);
            let mut updates = Vec::new();
            for row in self
                .authority
                .sums
                .get()?
                .range((grant.as_str(), metric.as_str(), 0)..=(grant.as_str(), metric.as_str(), u64::MAX))
                .map_err(fault_in(name::BUDGET_SUMS))?
            {
                let (sum_key, value) = row.map_err(fault_in(name::BUDGET_SUMS))?;
                let sum_key = sum_key.value();
                let mut sum: StoredSum = decode(name::BUDGET_SUMS, &sum_key, value.value())?;
                // Counted and not yet evicted: it leaves the sum. Not yet counted: the catch-up
                // will see it released. Evicted: it already left.
                if *seq >= sum.next && *seq < sum.counted {
                    sum.sum = sum.sum.saturating_sub(u128::from(entry.amount));
                    updates.push((sum_key.2, sum));
                }
            }
            for (window, sum) in updates {
                self.put_sum((grant.as_str(), metric.as_str(), window), &sum)?;
            }
            released.push(serde_json::json!({"grant_id": grant, "metric": metric, "amount": entry.amount}));
        }
        super::shared_rules::budget_released(self, effect_key, attempt, action_id, now, released)
    }

    /// Test support: insert delegations in bulk without any check (see `Tamper`).
    pub(super) fn bulk_insert_delegations(&mut self, rows: &[NewDelegation]) -> Result<()> {
        for row in rows {
            self.insert_delegation(row)?;
        }
        Ok(())
    }

    pub(super) fn raw_delegation(&mut self, id: &str) -> Result<Option<Vec<u8>>> {
        let found = self.authority.delegations.get()?.get(id).map_err(fault_in(name::DELEGATIONS))?;
        Ok(found.map(|bytes| bytes.value().to_vec()))
    }

    pub(super) fn set_raw_delegation(&mut self, id: &str, bytes: &[u8]) -> Result<()> {
        self.authority.delegations.get_mut()?.insert(id, bytes).map_err(fault_in(name::DELEGATIONS))?;
        Ok(())
    }

    /// Test support: the number of rows in the delegations table.
    pub(super) fn delegation_count(&self) -> Result<u64> {
        self.authority.delegations.get()?.len().map_err(fault_in(name::DELEGATIONS))
    }
}

impl AuthorityWrites for RedbWriteTx<'_> {
    fn delegations(&self) -> Box<dyn CountedSource + '_> {
        self.touch(name::DELEGATIONS);
        Box::new(TxDelegations { tables: &self.authority, reads: Cell::new(0) })
    }

    fn insert_delegation(&mut self, new: &NewDelegation) -> Result<()> {
        self.touch(name::DELEGATIONS);
        let record = &new.record;
        let id = record.delegation_id.as_str();
        let tables = &mut self.authority;
        if tables.delegations.get()?.get(id).map_err(fault_in(name::DELEGATIONS))?.is_some() {
            return Err(Error::Store(format!(
                "delegation {id} already exists; rows are never rewritten (the random source repeated itself)"
            )));
        }
        let row = encode(name::DELEGATIONS, &id, record)?;
        tables.delegations.get_mut()?.insert(id, row.as_slice()).map_err(fault_in(name::DELEGATIONS))?;
        for key in &new.index_keys {
            let key = (key.agent.as_str(), key.action.as_str(), id);
            let row = empty_row(name::DELEGATION_INDEX, &key)?;
            tables.index.get_mut()?.insert(key, row.as_slice()).map_err(fault_in(name::DELEGATION_INDEX))?;
        }
        let child = (record.parent_id.as_str(), id);
        let row = empty_row(name::DELEGATION_CHILDREN, &child)?;
        tables.children.get_mut()?.insert(child, row.as_slice()).map_err(fault_in(name::DELEGATION_CHILDREN))?;
        let creator = (record.created_by.agent.as_str(), id);
        let row = encode(name::DELEGATION_CREATORS, &creator, &record.created_by.user)?;
        tables.creators.get_mut()?.insert(creator, row.as_slice()).map_err(fault_in(name::DELEGATION_CREATORS))?;
        Ok(())
    }

    fn insert_revocation(&mut self, revocation: &Revocation) -> Result<bool> {
        self.touch(name::REVOCATIONS);
        let id = revocation.delegation_id.as_str();
        let table = self.authority.revocations.get_mut()?;
        if table.get(id).map_err(fault_in(name::REVOCATIONS))?.is_some() {
            return Ok(false);
        }
        let row = encode(name::REVOCATIONS, &id, revocation)?;
        table.insert(id, row.as_slice()).map_err(fault_in(name::REVOCATIONS))?;
        Ok(true)
    }

    fn is_revoked(&self, delegation_id: &str) -> Result<bool> {
        self.touch(name::REVOCATIONS);
        match self.authority.revocations.get()?.get(delegation_id).map_err(fault_in(name::REVOCATIONS))? {
            None => Ok(false),
            Some(bytes) => {
                let revocation: Revocation = decode(name::REVOCATIONS, &delegation_id, bytes.value())?;
                Ok(revocation.delegation_id == delegation_id)
            }
        }
    }

    fn delegations_created_by(&self, agent: &str, user: Option<&str>) -> Result<Vec<String>> {
        self.touch(name::DELEGATION_CREATORS);
        let mut ids = Vec::new();
        let range = self.authority.creators.get()?.range((agent, "")..).map_err(fault_in(name::DELEGATION_CREATORS))?;
        for entry in range {
            let (key, value) = entry.map_err(fault_in(name::DELEGATION_CREATORS))?;
            let (creator, id) = key.value();
            if creator != agent {
                break;
            }
            let created_as: Option<String> = decode(name::DELEGATION_CREATORS, &(creator, id), value.value())?;
            if user.is_none_or(|wanted| created_as.as_deref() == Some(wanted)) {
                ids.push(id.to_owned());
            }
        }
        Ok(ids)
    }

    // From the running sum: catch up with rows charged since it was last read, evict rows below
    // the floor, write it back. A window seen for the first time is summed backwards from the
    // newest row until one falls below the floor (rows in the window, not the history); a floor
    // that moved back (the clock stepped back) rebuilds from the whole series rather than
    // undercount.
    fn budget_window_sum(&mut self, charge: &Charge, now: Micros) -> Result<u128> {
        self.touch(name::BUDGET_SUMS);
        let grant = charge.grant_id.as_str();
        let metric = charge.metric.as_str();
        let key = (grant, metric, charge.window_seconds);
        let floor = now.saturating_sub(charge.window());
        let end = self.series_end(grant, metric)?;
        let stored: Option<StoredSum> =
            match self.authority.sums.get()?.get(key).map_err(fault_in(name::BUDGET_SUMS))? {
                None => None,
                Some(bytes) => Some(decode(name::BUDGET_SUMS, &key, bytes.value())?),
            };
        let mut sum = match stored {
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
        sum = StoredSum { sum: window.sum, next: window.next, counted: end, floor: window.floor };
        self.put_sum(key, &sum)?;
        Ok(sum.sum)
    }

    // The running sums pick the new ledger rows up at their next check.
    fn charge_budgets(&mut self, charges: &[Charge], effect_key: &str, attempt: u32, now: Micros) -> Result<()> {
        self.touch(name::BUDGET_LEDGER);
        let mut written: Vec<ChargeRef> = Vec::new();
        for (grant, metric, amount) in crate::authority::budget::ledger_entries(charges) {
            let (seq, last) = self.series_tail(&grant, &metric)?;
            // A series' times never go back: after a clock step back a charge is recorded at its
            // predecessor's time, so it stays in windows longer (an overcount, never an
            // undercount) and every scan may stop at the first row below a floor.
            let consumed_at = last.map_or(now, |last| last.max(now));
            let key = (grant.as_str(), metric.as_str(), seq);
            let entry =
                LedgerEntry { consumed_at, amount, released: false, effect_key: effect_key.to_owned(), attempt };
            let row = encode(name::BUDGET_LEDGER, &key, &entry)?;
            self.authority.ledger.get_mut()?.insert(key, row.as_slice()).map_err(fault_in(name::BUDGET_LEDGER))?;
            written.push((grant, metric, seq));
        }
        if written.is_empty() {
            return Ok(());
        }
        self.touch(name::BUDGET_BY_EFFECT);
        let key = (effect_key, u64::from(attempt));
        if self.authority.by_effect.get()?.get(key).map_err(fault_in(name::BUDGET_BY_EFFECT))?.is_some() {
            return Err(Error::Store(format!(
                "effect {effect_key:?} attempt {attempt} already has budget charges; the store was altered"
            )));
        }
        let row = encode(name::BUDGET_BY_EFFECT, &key, &written)?;
        self.authority.by_effect.get_mut()?.insert(key, row.as_slice()).map_err(fault_in(name::BUDGET_BY_EFFECT))?;
        Ok(())
    }
}

fn missing_ledger_row(grant: &str, metric: &str, seq: u64) -> Error {
    Error::Store(format!(
        "the budget ledger of grant {grant:?} metric {metric:?} is missing row {seq}; the store was altered. Run \
         `warden doctor` on the store"
    ))
}
