//! The row layer through the codec, and the two handles the rows' meaning (`semantics`) is
//! written on: a row read, written or scanned with its integrity check under its table's name
//! and key; `Writes`, one write transaction; `Reads`, one consistent read.

use serde::{de::DeserializeOwned, Serialize};

use super::codec::{decode, encode};
use super::records::StoredEffect;
use super::{KeyView, Part, Put, RowRead, RowWrite, Scan, Table};
use crate::error::Result;

use Part::{Int, Text};

// ---- rows through the codec ----------------------------------------------------------------------

/// The row under `key`, decoded after its integrity check.
pub(crate) fn read<T: DeserializeOwned>(rows: &dyn RowRead, table: Table, key: &[Part<'_>]) -> Result<Option<T>> {
    rows.get(table, key)?.map(|bytes| decode(table.name(), &KeyView(key), &bytes)).transpose()
}

/// Encode `value` for `key` (its checksum covers table and key) and write it.
pub(crate) fn write<T: Serialize>(
    rows: &mut dyn RowWrite,
    table: Table,
    key: &[Part<'_>],
    value: &T,
    how: Put,
) -> Result<()> {
    let bytes = encode(table.name(), &KeyView(key), value)?;
    rows.put(table, key, &bytes, how)
}

/// Visit the rows `scan` selects, each decoded after its check, until `each` answers `false`.
pub(super) fn each<T: DeserializeOwned>(
    rows: &dyn RowRead,
    table: Table,
    scan: &Scan<'_>,
    mut each: impl FnMut(&[Part<'_>], T) -> Result<bool>,
) -> Result<()> {
    rows.scan(table, scan, &mut |key, bytes| each(key, decode(table.name(), &KeyView(key), bytes)?))
}

/// The first row `scan` selects, decoded.
pub(super) fn first<T: DeserializeOwned>(
    rows: &dyn RowRead,
    table: Table,
    scan: &Scan<'_>,
) -> Result<Option<(Vec<u64>, T)>> {
    let mut found = None;
    each::<T>(rows, table, scan, |key, value| {
        let ints = key.iter().filter_map(|part| if let Int(n) = part { Some(*n) } else { None }).collect();
        found = Some((ints, value));
        Ok(false)
    })?;
    Ok(found)
}

pub(super) fn effect_row(rows: &dyn RowRead, key: &str) -> Result<Option<StoredEffect>> {
    read(rows, Table::Effects, &[Text(key)])
}

// ---- one write transaction ----------------------------------------------------------------------

/// Everything one state change may read and write, over one write transaction of an engine.
pub(crate) struct Writes<'e> {
    pub(super) rows: &'e mut dyn RowWrite,
    /// The last event id, read once per transaction.
    pub(super) last_event_id: Option<u64>,
}

impl<'e> Writes<'e> {
    pub(crate) fn new(rows: &'e mut dyn RowWrite) -> Writes<'e> {
        Writes { rows, last_event_id: None }
    }

    /// With the last event id already known (PostgreSQL reads it in the first round trip).
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub(crate) fn with_last_event_id(rows: &'e mut dyn RowWrite, last_event_id: u64) -> Writes<'e> {
        Writes { rows, last_event_id: Some(last_event_id) }
    }

    pub(super) fn r(&self) -> &dyn RowRead {
        &*self.rows
    }

    pub(super) fn read_rows(&self) -> &dyn RowRead {
        &*self.rows
    }

    pub(super) fn write_rows(&mut self) -> &mut dyn RowWrite {
        &mut *self.rows
    }

    /// The raw rows of this transaction (test support).
    #[cfg(any(test, feature = "test-exports"))]
    pub(crate) fn rows(&mut self) -> &mut dyn RowWrite {
        &mut *self.rows
    }
}

// ---- one consistent read ------------------------------------------------------------------------

/// One consistent read of the whole store, over one read transaction of an engine.
pub(crate) struct Reads<'e> {
    pub(super) rows: &'e dyn RowRead,
}

impl<'e> Reads<'e> {
    pub(crate) fn new(rows: &'e dyn RowRead) -> Reads<'e> {
        Reads { rows }
    }

    pub(super) fn rows(&self) -> &dyn RowRead {
        self.rows
    }
}
