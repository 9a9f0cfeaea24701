//! The memory engine: the row layer over ordered maps in this process, for tests (the
//! conformance suite runs on it beside the file and PostgreSQL: `WARDEN_TEST_STORE=memory`)
//! and for what needs a store without a disk. A store is named (`memory:NAME`); every open of
//! one name in a process shares it, for the life of the process. A write transaction works on
//! a copy of the maps and replaces them when its operation succeeds, so a refused operation
//! leaves nothing behind. Nothing is durable: the store ends with the process.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use crate::error::{Error, InvalidInputKind, Result, StoreFaultKind};
use crate::store::rows::semantics::{self, Reads, Writes};
use crate::store::rows::{
    check_shape, exists_fault, own, parts, Own, Part, Put, RowRead, RowWrite, Scan, Table, Visit,
};
use crate::store::{Now, ReadOp, WriteOp};

type Key = Vec<Own>;
/// Every table's rows, in key order (the order of `Part`: text by bytes, integers by value).
type Tables = Vec<BTreeMap<Key, Vec<u8>>>;

/// The rows of one transaction: the maps it reads and (for a write) changes.
struct MemRows<'m> {
    tables: &'m mut Tables,
}

impl RowRead for MemRows<'_> {
    fn get(&self, table: Table, key: &[Part<'_>]) -> Result<Option<Vec<u8>>> {
        check_shape(table, key)?;
        Ok(self.tables[table.index()].get(&own(key)).cloned())
    }

    fn scan(&self, table: Table, scan: &Scan<'_>, visit: &mut Visit<'_>) -> Result<()> {
        scan.check(table)?;
        let rows = &self.tables[table.index()];
        let walk: Box<dyn Iterator<Item = (&Key, &Vec<u8>)>> =
            if scan.reverse { Box::new(rows.iter().rev()) } else { Box::new(rows.iter()) };
        for (key, value) in walk {
            let key = parts(key);
            match scan.step(&key) {
                Some(true) => {
                    if !visit(&key, value)? {
                        return Ok(());
                    }
                }
                Some(false) => {}
                None => return Ok(()),
            }
        }
        Ok(())
    }

    fn count(&self, table: Table) -> Result<u64> {
        Ok(self.tables[table.index()].len() as u64)
    }

    fn bytes_in_use(&self) -> Result<u64> {
        let bytes: usize = self.tables.iter().flat_map(|rows| rows.values()).map(Vec::len).sum();
        Ok(bytes as u64)
    }
}

impl RowWrite for MemRows<'_> {
    fn put(&mut self, table: Table, key: &[Part<'_>], value: &[u8], how: Put) -> Result<()> {
        check_shape(table, key)?;
        let rows = &mut self.tables[table.index()];
        let key_owned = own(key);
        if how == Put::New && rows.contains_key(&key_owned) {
            return Err(exists_fault(table, key));
        }
        rows.insert(key_owned, value.to_vec());
        Ok(())
    }

    fn delete(&mut self, table: Table, key: &[Part<'_>]) -> Result<()> {
        check_shape(table, key)?;
        self.tables[table.index()].remove(&own(key));
        Ok(())
    }
}

/// One store in memory.
pub(crate) struct MemStore {
    name: String,
    tables: Mutex<Tables>,
}

impl std::fmt::Debug for MemStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemStore").field("name", &self.name).finish()
    }
}

/// Whether a store location names a store in memory (`memory:NAME`).
pub fn is_memory(location: &str) -> bool {
    location.starts_with("memory:")
}

impl MemStore {
    /// The store named by `location` (`memory:NAME`), created with the genesis rows the first
    /// time this process opens it.
    pub(crate) fn open(location: &str) -> Result<Arc<MemStore>> {
        static STORES: OnceLock<Mutex<HashMap<String, Arc<MemStore>>>> = OnceLock::new();
        let name = location.trim_start_matches("memory:");
        if name.is_empty() {
            return Err(Error::invalid_at(
                InvalidInputKind::Missing,
                "store",
                "a memory store needs a name: memory:NAME",
            ));
        }
        let mut stores = STORES.get_or_init(Mutex::default).lock().map_err(|_| {
            Error::store(StoreFaultKind::Defect, "the memory stores' registry is poisoned by an earlier panic")
        })?;
        if let Some(store) = stores.get(name) {
            return Ok(store.clone());
        }
        let mut tables: Tables = vec![BTreeMap::new(); Table::ALL.len()];
        let meta = &mut tables[Table::Meta.index()];
        meta.insert(vec![Own::Text(crate::store::tables::META_HEAD.into())], semantics::genesis_head()?);
        meta.insert(
            vec![Own::Text(crate::store::tables::META_SNAPSHOT_SEQ.into())],
            semantics::zero_snapshot_counter()?,
        );
        let store = Arc::new(MemStore { name: name.to_owned(), tables: Mutex::new(tables) });
        stores.insert(name.to_owned(), store.clone());
        Ok(store)
    }

    /// The location it was opened as.
    pub(crate) fn shown(&self) -> String {
        format!("memory:{}", self.name)
    }

    fn lock(&self) -> Result<MutexGuard<'_, Tables>> {
        self.tables.lock().map_err(|_| {
            Error::store(StoreFaultKind::Defect, format!("the memory store {} is poisoned by a panic", self.name))
        })
    }

    /// Apply one write in its own transaction: all of it, or (on an error) none.
    pub(crate) fn write<W: WriteOp>(&self, op: &W, now: &Now) -> Result<W::Reply> {
        self.edit(|writes| op.apply(writes, now.read()))
    }

    /// Run `work` over the rows of one write transaction; its changes stand only if it succeeds.
    pub(crate) fn edit<T>(&self, work: impl FnOnce(&mut Writes<'_>) -> Result<T>) -> Result<T> {
        let mut tables = self.lock()?;
        let mut copy = tables.clone();
        let done = {
            let mut rows = MemRows { tables: &mut copy };
            work(&mut Writes::new(&mut rows))
        }?;
        *tables = copy;
        Ok(done)
    }

    /// Run one read over a consistent view.
    pub(crate) fn read<R: ReadOp>(&self, op: &R, now: &Now) -> Result<R::Reply> {
        let mut tables = self.lock()?;
        let rows = MemRows { tables: &mut tables };
        op.run(&Reads::new(&rows), now.read())
    }
}
