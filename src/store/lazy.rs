//! A table of a write transaction, opened the first time an operation touches it.
//!
//! A batch touches a few of the store's tables (an outcome: five), but redb charges for every
//! table opened — a lookup in its table tree when opened, another when the transaction commits
//! and finds it unchanged — so opening all of them for each batch cost more than the writes of
//! a small one.

use std::cell::OnceCell;

use redb::{Key, TableDefinition, Value, WriteTransaction};

use super::tx::fault_in;
use crate::error::Result;

pub(super) struct LazyTable<'t, K: Key + 'static, V: Value + 'static> {
    txn: &'t WriteTransaction,
    definition: TableDefinition<'static, K, V>,
    name: &'static str,
    table: OnceCell<redb::Table<'t, K, V>>,
}

impl<'t, K: Key + 'static, V: Value + 'static> LazyTable<'t, K, V> {
    pub(super) fn new(
        txn: &'t WriteTransaction,
        definition: TableDefinition<'static, K, V>,
        name: &'static str,
    ) -> Self {
        LazyTable { txn, definition, name, table: OnceCell::new() }
    }

    fn open(&self) -> Result<()> {
        if self.table.get().is_none() {
            let table = self.txn.open_table(self.definition).map_err(fault_in(self.name))?;
            let _ = self.table.set(table);
        }
        Ok(())
    }

    /// The table, to read.
    pub(super) fn get(&self) -> Result<&redb::Table<'t, K, V>> {
        self.open()?;
        self.table.get().ok_or_else(|| unopened(self.name))
    }

    /// The table, to write.
    pub(super) fn get_mut(&mut self) -> Result<&mut redb::Table<'t, K, V>> {
        self.open()?;
        let name = self.name;
        self.table.get_mut().ok_or_else(|| unopened(name))
    }
}

/// Unreachable: `open` either stored the table or returned its error.
fn unopened(name: &str) -> crate::error::Error {
    crate::error::Error::Store(format!("the {name} table could not be opened"))
}
