//! Raw edits: rows written or damaged outside the store's rules, for the tests and for `warden
//! verify`'s damage guarantees (G11, G12). Nothing on a caller's path reaches them.

use super::{read, write, ApprovalRecord, Int, Put, Result, StoredReceipt, Table, WriteTables, Writes};
#[cfg(any(test, feature = "test-exports"))]
use super::{AuthorityWrites, ChainHead, Charge, EffectRecord, Micros, NewDelegation, Text, META_HEAD, META_SCHEMA};

/// The text-keyed tables a test may edit byte by byte.
#[cfg(any(test, feature = "test-exports"))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RawTable {
    /// The `meta` table: the schema version, the chain head, the snapshot counter.
    Meta,
    /// The effect rows, by effect key.
    Effects,
    /// The approval rows, by approval id.
    Approvals,
}

#[cfg(any(test, feature = "test-exports"))]
impl RawTable {
    fn table(self) -> Table {
        match self {
            RawTable::Meta => Table::Meta,
            RawTable::Effects => Table::Effects,
            RawTable::Approvals => Table::Approvals,
        }
    }
}

impl Writes<'_> {
    /// Receipt `seq`, decoded.
    pub(crate) fn stored_receipt(&self, seq: u64) -> Result<Option<StoredReceipt>> {
        read(self.r(), Table::Receipts, &[Int(seq)])
    }

    /// Write receipt `seq` as given, with a valid checksum (outside the chain's rules).
    pub(crate) fn put_stored_receipt(&mut self, seq: u64, row: &StoredReceipt) -> Result<()> {
        write(self.rows, Table::Receipts, &[Int(seq)], row, Put::Replace)
    }

    /// Write an approval row as given, with a valid checksum (outside the approval rules).
    pub(crate) fn put_raw_approval(&mut self, record: &ApprovalRecord) -> Result<()> {
        self.put_approval(record)
    }
}

/// Raw access to rows, for tests that damage or tamper with a store on purpose. The same code
/// over every engine: the rows of one write transaction.
#[cfg(any(test, feature = "test-exports"))]
#[doc(hidden)]
pub struct Tamper<'w, 'e> {
    pub(crate) writes: &'w mut Writes<'e>,
}

#[cfg(any(test, feature = "test-exports"))]
impl Tamper<'_, '_> {
    pub fn receipt(&mut self, seq: u64) -> Result<Option<StoredReceipt>> {
        self.writes.stored_receipt(seq)
    }
    pub fn put_receipt(&mut self, seq: u64, row: &StoredReceipt) -> Result<()> {
        self.writes.put_stored_receipt(seq, row)
    }
    pub fn remove_receipt(&mut self, seq: u64) -> Result<()> {
        self.writes.rows().delete(Table::Receipts, &[Int(seq)])
    }
    pub fn set_head(&mut self, seq: u64, hash: &str) -> Result<()> {
        let head = ChainHead { seq, hash: hash.to_owned() };
        write(self.writes.rows(), Table::Meta, &[Text(META_HEAD)], &head, Put::Replace)
    }
    /// Write an effect row with a valid checksum (a consistent but wrong row).
    pub fn put_effect(&mut self, record: &EffectRecord) -> Result<()> {
        self.writes.put_effect(record)
    }
    /// Write an approval row with a valid checksum, whatever it holds (an edited action).
    pub fn put_approval(&mut self, record: &ApprovalRecord) -> Result<()> {
        self.writes.put_approval(record)
    }
    pub fn set_schema_version(&mut self, version: u32) -> Result<()> {
        self.writes.rows().put(Table::Meta, &[Text(META_SCHEMA)], &version.to_le_bytes(), Put::Replace)
    }
    /// The stored bytes of a row of a text-keyed table.
    pub fn raw(&mut self, table: RawTable, key: &str) -> Result<Option<Vec<u8>>> {
        self.writes.rows().get(table.table(), &[Text(key)])
    }
    /// Overwrite the stored bytes of a row of a text-keyed table (a disk fault, simulated).
    pub fn set_raw(&mut self, table: RawTable, key: &str, bytes: &[u8]) -> Result<()> {
        self.writes.rows().put(table.table(), &[Text(key)], bytes, Put::Replace)
    }
    /// Remove a row of a text-keyed table (a row a damaged page lost, simulated).
    pub fn remove_raw(&mut self, table: RawTable, key: &str) -> Result<()> {
        self.writes.rows().delete(table.table(), &[Text(key)])
    }
    pub fn raw_receipt(&mut self, seq: u64) -> Result<Option<Vec<u8>>> {
        self.writes.rows().get(Table::Receipts, &[Int(seq)])
    }
    pub fn set_raw_receipt(&mut self, seq: u64, bytes: &[u8]) -> Result<()> {
        self.writes.rows().put(Table::Receipts, &[Int(seq)], bytes, Put::Replace)
    }
    /// Insert delegation rows with their index entries, unchecked (a bulk load for tests).
    pub fn put_delegations(&mut self, rows: &[NewDelegation]) -> Result<()> {
        rows.iter().try_for_each(|row| self.writes.insert_delegation(row))
    }
    pub fn delegation_count(&mut self) -> Result<u64> {
        self.writes.rows().count(Table::Delegations)
    }
    /// Write one reservation's budget charges, as a reservation would (a bulk load for benches).
    pub fn put_budget_charges(
        &mut self,
        charges: &[Charge],
        effect_key: &str,
        attempt: u32,
        now: Micros,
    ) -> Result<()> {
        self.writes.charge_budgets(charges, effect_key, attempt, now)
    }
    /// The running window sum a reservation reads for `charge` (and writes back).
    pub fn budget_window_sum(&mut self, charge: &Charge, now: Micros) -> Result<u128> {
        self.writes.budget_window_sum(charge, now)
    }
    /// A policy row as stored (its checksum checked, not its hash).
    pub fn policy_row(&mut self, policy_hash: &str) -> Result<Option<Vec<u8>>> {
        read(self.writes.rows(), Table::Policies, &[Text(policy_hash)])
    }
    /// Write a policy row with a valid checksum, whatever it holds (an edited policy).
    pub fn put_policy_row(&mut self, policy_hash: &str, canonical: &[u8]) -> Result<()> {
        write(self.writes.rows(), Table::Policies, &[Text(policy_hash)], &canonical.to_vec(), Put::Replace)
    }
    /// The stored bytes of a delegation row.
    pub fn raw_delegation(&mut self, id: &str) -> Result<Option<Vec<u8>>> {
        self.writes.rows().get(Table::Delegations, &[Text(id)])
    }
    /// Overwrite the stored bytes of a delegation row (a disk fault, simulated).
    pub fn set_raw_delegation(&mut self, id: &str, bytes: &[u8]) -> Result<()> {
        self.writes.rows().put(Table::Delegations, &[Text(id)], bytes, Put::Replace)
    }
}
