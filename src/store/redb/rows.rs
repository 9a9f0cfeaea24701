//! The file engine's rows: the row layer over redb's transactions. Each table is a redb table
//! of its key tuple (`&str`, `u64`, `(&str, u64)`, …) and `&[u8]` values — the same tables every
//! earlier build wrote, so nothing is migrated. This file knows redb and key tuples; what the
//! rows mean is `rows::semantics`.

use std::cell::{Cell, OnceCell};
use std::ops::Bound;

use redb::{ReadTransaction, ReadableTable, ReadableTableMetadata, TableDefinition, TableHandle, WriteTransaction};

use crate::error::{Error, Result, StoreFaultKind};
use crate::store::rows::{
    check_shape, exists_fault, own, parts, Own, Part, Put, RowRead, RowWrite, Scan, Shape, Table, Visit,
};

/// A redb error while touching `table`: the storage layer failed (I/O, a damaged page).
pub(crate) fn fault_in<E: Into<redb::Error>>(table: &'static str) -> impl FnOnce(E) -> Error {
    move |error| {
        let error: redb::Error = error.into();
        match error {
            redb::Error::Corrupted(detail) => Error::store(
                StoreFaultKind::Damaged,
                format!(
                    "the store file is damaged: redb reports {detail} while reading the {table} table; nothing was \
                 decided from it. Run `warden doctor` on the store"
                ),
            ),
            other => Error::store(
                StoreFaultKind::of_redb(&other),
                format!("the store failed while using the {table} table: {other}"),
            ),
        }
    }
}

/// A redb error outside any one table.
pub(crate) fn fault<E: Into<redb::Error>>(error: E) -> Error {
    let error: redb::Error = error.into();
    Error::store(StoreFaultKind::of_redb(&error), format!("the store failed: {error}"))
}

type Bytes = &'static [u8];

/// A key tuple of a redb table, and how it maps to and from the row layer's parts.
trait FileKey: redb::Key + 'static {
    /// The tuple for `parts` (already checked against the table's shape).
    fn tuple<'a>(parts: &[Part<'a>]) -> Option<Self::SelfType<'a>>;
    /// Visit the parts of a stored key.
    fn with_parts<R>(key: Self::SelfType<'_>, visit: impl FnOnce(&[Part<'_>]) -> R) -> R;
}

/// `FileKey` for a key tuple: its type, then each part's pattern binding and how it is built.
macro_rules! file_key {
    ($ty:ty => $($part:ident: $kind:ident),+ ; $tuple:expr, |$key:ident| [$($out:expr),+]) => {
        impl FileKey for $ty {
            fn tuple<'a>(parts: &[Part<'a>]) -> Option<Self::SelfType<'a>> {
                match parts {
                    [$(Part::$kind($part)),+] => Some($tuple),
                    _ => None,
                }
            }
            fn with_parts<R>($key: Self::SelfType<'_>, visit: impl FnOnce(&[Part<'_>]) -> R) -> R {
                visit(&[$($out),+])
            }
        }
    };
}

file_key!(&'static str => a: Text; a, |key| [Part::Text(key)]);
file_key!(u64 => a: Int; *a, |key| [Part::Int(key)]);
file_key!((&'static str, u64) => a: Text, b: Int; (a, *b), |key| [Part::Text(key.0), Part::Int(key.1)]);
file_key!((&'static str, &'static str) => a: Text, b: Text; (a, b), |key| [Part::Text(key.0), Part::Text(key.1)]);
file_key!((&'static str, &'static str, &'static str) => a: Text, b: Text, c: Text; (a, b, c),
    |key| [Part::Text(key.0), Part::Text(key.1), Part::Text(key.2)]);
file_key!((&'static str, &'static str, u64) => a: Text, b: Text, c: Int; (a, b, *c),
    |key| [Part::Text(key.0), Part::Text(key.1), Part::Int(key.2)]);

fn tuple<'a, K: FileKey>(table: Table, parts: &[Part<'a>]) -> Result<K::SelfType<'a>> {
    check_shape(table, parts)?;
    K::tuple(parts).ok_or_else(|| crate::store::rows::shape_fault(table))
}

/// The smallest (or, for the integer after a prefix, the largest) key that starts with
/// `prefix` then `next`: every part after them at its minimum.
fn filled<'a>(shape: Shape, prefix: &[Part<'a>], next: Option<Part<'a>>, largest_int: bool) -> Vec<Part<'a>> {
    let mut key = prefix.to_vec();
    key.extend(next);
    while key.len() < shape.len() {
        key.push(match (shape.is_int(key.len()), largest_int) {
            (true, true) => Part::Int(u64::MAX),
            (true, false) => Part::Int(0),
            (false, _) => Part::Text(""),
        });
    }
    key
}

/// The key range of a scan, as full keys of the table's shape: `None` for an open end (then
/// the walk itself stops where the prefix ends).
fn range_of<'a>(table: Table, scan: &Scan<'a>) -> (Bound<Vec<Part<'a>>>, Bound<Vec<Part<'a>>>) {
    let shape = table.shape();
    let low = match scan.from {
        Bound::Included(from) => Bound::Included(filled(shape, scan.prefix, Some(from), false)),
        Bound::Excluded(from) => Bound::Excluded(filled(shape, scan.prefix, Some(from), false)),
        Bound::Unbounded if scan.prefix.is_empty() => Bound::Unbounded,
        Bound::Unbounded => Bound::Included(filled(shape, scan.prefix, None, false)),
    };
    let high = match scan.to {
        Bound::Included(to) => Bound::Included(filled(shape, scan.prefix, Some(to), true)),
        Bound::Excluded(to) => Bound::Excluded(filled(shape, scan.prefix, Some(to), false)),
        Bound::Unbounded
            if !scan.prefix.is_empty() && scan.prefix.len() + 1 == shape.len() && shape.is_int(scan.prefix.len()) =>
        {
            Bound::Included(filled(shape, scan.prefix, Some(Part::Int(u64::MAX)), true))
        }
        Bound::Unbounded => Bound::Unbounded,
    };
    (low, high)
}

fn empty_range<T: Ord>(low: &Bound<T>, high: &Bound<T>) -> bool {
    match (low, high) {
        (Bound::Included(l), Bound::Included(h)) => l > h,
        (Bound::Included(l), Bound::Excluded(h)) | (Bound::Excluded(l), Bound::Included(h)) => l >= h,
        (Bound::Excluded(l), Bound::Excluded(h)) => l >= h,
        _ => false,
    }
}

fn bound_tuple<'a, K: FileKey>(table: Table, bound: &Bound<Vec<Part<'a>>>) -> Result<Bound<K::SelfType<'a>>> {
    Ok(match bound {
        Bound::Included(parts) => Bound::Included(tuple::<K>(table, parts)?),
        Bound::Excluded(parts) => Bound::Excluded(tuple::<K>(table, parts)?),
        Bound::Unbounded => Bound::Unbounded,
    })
}

fn get_in<K: FileKey>(t: &impl ReadableTable<K, Bytes>, table: Table, key: &[Part<'_>]) -> Result<Option<Vec<u8>>> {
    let key = tuple::<K>(table, key)?;
    Ok(t.get(key).map_err(fault_in(table.name()))?.map(|value| value.value().to_vec()))
}

fn scan_in<K: FileKey>(
    t: &impl ReadableTable<K, Bytes>,
    table: Table,
    scan: &Scan<'_>,
    visit: &mut Visit<'_>,
) -> Result<()> {
    scan.check(table)?;
    let (low, high) = range_of(table, scan);
    if empty_range(&low, &high) {
        return Ok(());
    }
    let range = t
        .range::<K::SelfType<'_>>((bound_tuple::<K>(table, &low)?, bound_tuple::<K>(table, &high)?))
        .map_err(fault_in(table.name()))?;
    let mut walk = |row: std::result::Result<
        (redb::AccessGuard<'_, K>, redb::AccessGuard<'_, Bytes>),
        redb::StorageError,
    >|
     -> Result<bool> {
        let (key, value) = row.map_err(fault_in(table.name()))?;
        K::with_parts(key.value(), |parts| match scan.step(parts) {
            Some(true) => visit(parts, value.value()),
            Some(false) => Ok(true),
            None => Ok(false),
        })
    };
    if scan.reverse {
        for row in range.rev() {
            if !walk(row)? {
                break;
            }
        }
    } else {
        for row in range {
            if !walk(row)? {
                break;
            }
        }
    }
    Ok(())
}

/// Put `value` under `key`; with `undo`, what the row was before (its bytes, or `None` when
/// there was none) goes there first — also when the put is then refused.
fn put_in<K: FileKey>(
    t: &mut redb::Table<'_, K, Bytes>,
    table: Table,
    key: &[Part<'_>],
    value: &[u8],
    how: Put,
    undo: Option<&mut Vec<Undo>>,
) -> Result<()> {
    // One descent: the row it replaced, if any, comes back. A `Put::New` that replaced one is
    // refused, and the error rolls the batch back with the write (the whole transaction, or
    // the batch's undo log when the transaction holds batches before it).
    let replaced = t.insert(tuple::<K>(table, key)?, value).map_err(fault_in(table.name()))?;
    let was_there = replaced.is_some();
    if let Some(undo) = undo {
        undo.push(Undo { table, key: own(key), before: replaced.map(|old| old.value().to_vec()) });
    }
    if how == Put::New && was_there {
        return Err(exists_fault(table, key));
    }
    Ok(())
}

/// Delete the row under `key`; with `undo`, what it was before goes there first.
fn delete_in<K: FileKey>(
    t: &mut redb::Table<'_, K, Bytes>,
    table: Table,
    key: &[Part<'_>],
    undo: Option<&mut Vec<Undo>>,
) -> Result<()> {
    let removed = t.remove(tuple::<K>(table, key)?).map_err(fault_in(table.name()))?;
    if let Some(undo) = undo {
        undo.push(Undo { table, key: own(key), before: removed.map(|old| old.value().to_vec()) });
    }
    Ok(())
}

/// One change of a batch, undone: the row as it was before the batch touched it.
pub(crate) struct Undo {
    table: Table,
    key: Vec<Own>,
    /// `None`: there was no row.
    before: Option<Vec<u8>>,
}

fn definition<K: FileKey>(table: Table) -> TableDefinition<'static, K, Bytes> {
    TableDefinition::new(table.name())
}

// ---- one write transaction ------------------------------------------------------------------------

/// A table of a write transaction, opened the first time an operation touches it: a batch
/// touches a few of the store's tables (an outcome: five), but redb charges for every table
/// opened — a lookup in its table tree when opened, another when the transaction commits and
/// finds it unchanged — so opening all of them for each batch cost more than the writes of a
/// small one.
struct Lazy<'t, K: FileKey> {
    txn: &'t WriteTransaction,
    table: Table,
    opened: OnceCell<redb::Table<'t, K, Bytes>>,
}

impl<'t, K: FileKey> Lazy<'t, K> {
    fn new(txn: &'t WriteTransaction, table: Table) -> Self {
        Lazy { txn, table, opened: OnceCell::new() }
    }

    fn open(&self) -> Result<()> {
        if self.opened.get().is_none() {
            let opened = self.txn.open_table(definition::<K>(self.table)).map_err(fault_in(self.table.name()))?;
            let _ = self.opened.set(opened);
        }
        Ok(())
    }

    fn get(&self) -> Result<&redb::Table<'t, K, Bytes>> {
        self.open()?;
        self.opened.get().ok_or_else(|| unopened(self.table))
    }

    fn get_mut(&mut self) -> Result<&mut redb::Table<'t, K, Bytes>> {
        self.open()?;
        let table = self.table;
        self.opened.get_mut().ok_or_else(|| unopened(table))
    }
}

/// Unreachable: `open` either stored the table or returned its error.
fn unopened(table: Table) -> Error {
    Error::store(StoreFaultKind::Damaged, format!("the {} table could not be opened", table.name()))
}

#[allow(clippy::upper_case_acronyms)] // the shapes' names (`rows::Shape`)
enum AnyLazy<'t> {
    T(Lazy<'t, &'static str>),
    I(Lazy<'t, u64>),
    TI(Lazy<'t, (&'static str, u64)>),
    TT(Lazy<'t, (&'static str, &'static str)>),
    TTT(Lazy<'t, (&'static str, &'static str, &'static str)>),
    TTI(Lazy<'t, (&'static str, &'static str, u64)>),
}

/// Run `$body` with `$t` bound to the opened table of `$lazy`, whatever its key tuple.
macro_rules! with_lazy {
    ($lazy:expr, $get:ident, |$t:ident| $body:expr) => {
        with_lazy!(@ $lazy, $get, $t, $body, T I TI TT TTT TTI)
    };
    (@ $lazy:expr, $get:ident, $t:ident, $body:expr, $($shape:ident)*) => {
        match $lazy {
            $(AnyLazy::$shape(lazy) => {
                let $t = lazy.$get()?;
                $body
            })*
        }
    };
}

/// The rows of one redb write transaction.
pub(crate) struct FileWrites<'t, 'c> {
    tables: Vec<AnyLazy<'t>>,
    /// The table being touched, named when redb panics on a damaged page (the cell outlives
    /// the transaction, so the name survives the unwinding).
    touching: &'c Cell<&'static str>,
    /// The batch's changes, for the journal (`payload::record_put`), when it keeps them.
    log: Option<Vec<u8>>,
    /// What each change replaced, when the batch must be undone without aborting the
    /// transaction (it holds batches before this one: `commit`).
    undo: Option<Vec<Undo>>,
}

impl<'t, 'c> FileWrites<'t, 'c> {
    /// Keep every change from now on, for the journal.
    pub(crate) fn recording(mut self) -> FileWrites<'t, 'c> {
        self.log = Some(Vec::with_capacity(4096));
        self
    }

    /// The changes kept so far (none when not recording).
    pub(crate) fn take_log(&mut self) -> Option<Vec<u8>> {
        self.log.take()
    }

    /// Keep, from now on, what every change replaces, so that `undo` can put it back.
    pub(crate) fn undoable(mut self) -> FileWrites<'t, 'c> {
        self.undo = Some(Vec::new());
        self
    }

    /// Put back every row the changes since `undoable` replaced, newest first: the transaction
    /// holds what it held before them. Written to the tables only (never to the journal's log).
    pub(crate) fn undo(&mut self) -> Result<()> {
        let Some(changes) = self.undo.take() else { return Ok(()) };
        for change in changes.into_iter().rev() {
            let key = parts(&change.key);
            let table = change.table;
            match &change.before {
                Some(before) => {
                    with_lazy!(self.lazy_mut(table)?, get_mut, |t| put_in(t, table, &key, before, Put::Replace, None))?;
                }
                None => with_lazy!(self.lazy_mut(table)?, get_mut, |t| delete_in(t, table, &key, None))?,
            }
        }
        Ok(())
    }

    pub(crate) fn open(txn: &'t WriteTransaction, touching: &'c Cell<&'static str>) -> FileWrites<'t, 'c> {
        let tables = Table::ALL
            .iter()
            .map(|&table| match table.shape() {
                Shape::T => AnyLazy::T(Lazy::new(txn, table)),
                Shape::I => AnyLazy::I(Lazy::new(txn, table)),
                Shape::TI => AnyLazy::TI(Lazy::new(txn, table)),
                Shape::TT => AnyLazy::TT(Lazy::new(txn, table)),
                Shape::TTT => AnyLazy::TTT(Lazy::new(txn, table)),
                Shape::TTI => AnyLazy::TTI(Lazy::new(txn, table)),
            })
            .collect();
        FileWrites { tables, touching, log: None, undo: None }
    }

    /// Open (and so create) every table: a new store, or a migration.
    pub(crate) fn create_all(&self) -> Result<()> {
        for &table in Table::ALL {
            with_lazy!(self.lazy(table)?, get, |_t| ());
        }
        Ok(())
    }

    fn lazy(&self, table: Table) -> Result<&AnyLazy<'t>> {
        self.touching.set(table.name());
        self.tables.get(table.index()).ok_or_else(|| unopened(table))
    }

    fn lazy_mut(&mut self, table: Table) -> Result<&mut AnyLazy<'t>> {
        self.touching.set(table.name());
        self.tables.get_mut(table.index()).ok_or_else(|| unopened(table))
    }
}

impl RowRead for FileWrites<'_, '_> {
    fn get(&self, table: Table, key: &[Part<'_>]) -> Result<Option<Vec<u8>>> {
        with_lazy!(self.lazy(table)?, get, |t| get_in(t, table, key))
    }

    fn scan(&self, table: Table, scan: &Scan<'_>, visit: &mut Visit<'_>) -> Result<()> {
        with_lazy!(self.lazy(table)?, get, |t| scan_in(t, table, scan, visit))
    }

    fn count(&self, table: Table) -> Result<u64> {
        with_lazy!(self.lazy(table)?, get, |t| t.len().map_err(fault_in(table.name())))
    }

    fn lays_out_pages(&self) -> bool {
        true
    }

    fn bytes_in_use(&self) -> Result<u64> {
        Err(Error::store(
            StoreFaultKind::Defect,
            "the bytes a store occupies are measured in a read, not inside a write",
        ))
    }
}

impl RowWrite for FileWrites<'_, '_> {
    fn put(&mut self, table: Table, key: &[Part<'_>], value: &[u8], how: Put) -> Result<()> {
        let undo = self.undo.as_mut();
        let lazy = self.tables.get_mut(table.index()).ok_or_else(|| unopened(table))?;
        self.touching.set(table.name());
        with_lazy!(lazy, get_mut, |t| put_in(t, table, key, value, how, undo))?;
        if let Some(log) = &mut self.log {
            super::payload::record_put(log, table, key, value);
        }
        Ok(())
    }

    fn delete(&mut self, table: Table, key: &[Part<'_>]) -> Result<()> {
        let undo = self.undo.as_mut();
        let lazy = self.tables.get_mut(table.index()).ok_or_else(|| unopened(table))?;
        self.touching.set(table.name());
        with_lazy!(lazy, get_mut, |t| delete_in(t, table, key, undo))?;
        if let Some(log) = &mut self.log {
            super::payload::record_delete(log, table, key);
        }
        Ok(())
    }
}

// ---- one read transaction ---------------------------------------------------------------------------

/// The rows of one redb read transaction: one consistent snapshot of the file.
pub(crate) struct FileReads {
    txn: ReadTransaction,
}

impl FileReads {
    pub(crate) fn new(txn: ReadTransaction) -> FileReads {
        FileReads { txn }
    }

    /// The transaction itself (the schema's checks list its tables).
    pub(crate) fn txn(&self) -> &ReadTransaction {
        &self.txn
    }
}

/// Run `$body` with `$t` bound to the table opened in a read transaction, whatever its key
/// tuple; `$absent` when the file has no such table (an old schema opened read-only).
macro_rules! with_read {
    ($txn:expr, $table:expr, $absent:expr, |$t:ident| $body:expr) => {{
        fn open<K: FileKey>(txn: &ReadTransaction, table: Table) -> Result<Option<redb::ReadOnlyTable<K, Bytes>>> {
            match txn.open_table(definition::<K>(table)) {
                Ok(opened) => Ok(Some(opened)),
                Err(redb::TableError::TableDoesNotExist(_)) => Ok(None),
                Err(other) => Err(fault_in(table.name())(other)),
            }
        }
        with_read!(@ $txn, $table, $absent, $t, $body, T: &'static str, I: u64, TI: (&'static str, u64),
            TT: (&'static str, &'static str), TTT: (&'static str, &'static str, &'static str),
            TTI: (&'static str, &'static str, u64))
    }};
    (@ $txn:expr, $table:expr, $absent:expr, $t:ident, $body:expr, $($shape:ident: $key:ty),*) => {
        match $table.shape() {
            $(Shape::$shape => match open::<$key>($txn, $table)? {
                Some($t) => $body,
                None => $absent,
            },)*
        }
    };
}

impl RowRead for FileReads {
    fn get(&self, table: Table, key: &[Part<'_>]) -> Result<Option<Vec<u8>>> {
        with_read!(&self.txn, table, Ok(None), |t| get_in(&t, table, key))
    }

    fn scan(&self, table: Table, scan: &Scan<'_>, visit: &mut Visit<'_>) -> Result<()> {
        with_read!(&self.txn, table, Ok(()), |t| scan_in(&t, table, scan, visit))
    }

    fn count(&self, table: Table) -> Result<u64> {
        with_read!(&self.txn, table, Ok(0), |t| t.len().map_err(fault_in(table.name())))
    }

    fn missing_tables(&self) -> Result<Vec<Table>> {
        let present: Vec<String> =
            self.txn.list_tables().map_err(fault)?.map(|table| table.name().to_owned()).collect();
        Ok(Table::ALL.iter().copied().filter(|table| !present.iter().any(|name| name == table.name())).collect())
    }

    fn lays_out_pages(&self) -> bool {
        true
    }

    // Every table's pages (rows, their bookkeeping, and the free space inside those pages), as
    // redb counts them. The file is larger: redb grows it by doubling and keeps freed pages.
    fn bytes_in_use(&self) -> Result<u64> {
        let mut total = 0u64;
        for handle in self.txn.list_tables().map_err(fault)? {
            let table = self.txn.open_untyped_table(handle).map_err(fault)?;
            let stats = table.stats().map_err(fault)?;
            total += stats.stored_bytes() + stats.metadata_bytes() + stats.fragmented_bytes();
        }
        Ok(total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redb::ReadableDatabase;

    #[test]
    fn a_new_row_over_an_existing_one_is_refused_and_the_transaction_keeps_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let db = redb::Database::create(dir.path().join("t.redb")).unwrap();
        let touching = Cell::new("");
        let key = [Part::Text("refund:pay_1")];
        {
            let txn = db.begin_write().unwrap();
            let mut rows = FileWrites::open(&txn, &touching);
            rows.put(Table::Effects, &key, b"first", Put::New).unwrap();
            drop(rows);
            txn.commit().unwrap();
        }
        {
            let txn = db.begin_write().unwrap();
            let mut rows = FileWrites::open(&txn, &touching);
            let refused = rows.put(Table::Effects, &key, b"second", Put::New).unwrap_err().to_string();
            assert!(refused.contains("effects") && refused.contains("refund:pay_1"), "{refused}");
            // A replacing write of the same key is not refused.
            rows.put(Table::Effects, &[Part::Text("refund:pay_2")], b"x", Put::Replace).unwrap();
            rows.put(Table::Effects, &[Part::Text("refund:pay_2")], b"y", Put::Replace).unwrap();
            drop(rows);
            // The caller rolls the transaction back on the error, as the group commit does.
            txn.abort().unwrap();
        }
        let reads = FileReads::new(db.begin_read().unwrap());
        assert_eq!(reads.get(Table::Effects, &key).unwrap().as_deref(), Some(b"first".as_slice()));
        assert_eq!(reads.get(Table::Effects, &[Part::Text("refund:pay_2")]).unwrap(), None);
    }
}
