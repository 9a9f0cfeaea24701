//! The payload of a journal record: a batch's row changes (every `put` and `delete`, whole
//! values), as the row layer appends them and recovery reads them back.

use crate::store::rows::{Part, Table};

const PUT: u8 = 1;
const DELETE: u8 = 2;

/// Append a `put` of `value` under `key` in `table` to a batch's payload.
pub(crate) fn record_put(out: &mut Vec<u8>, table: Table, key: &[Part<'_>], value: &[u8]) {
    out.push(PUT);
    record_key(out, table, key);
    out.extend_from_slice(&(value.len() as u32).to_le_bytes());
    out.extend_from_slice(value);
}

/// Append a `delete` of `key` in `table` to a batch's payload.
pub(crate) fn record_delete(out: &mut Vec<u8>, table: Table, key: &[Part<'_>]) {
    out.push(DELETE);
    record_key(out, table, key);
}

fn record_key(out: &mut Vec<u8>, table: Table, key: &[Part<'_>]) {
    out.push(table.index() as u8);
    for part in key {
        match part {
            Part::Text(text) => {
                out.extend_from_slice(&(text.len() as u32).to_le_bytes());
                out.extend_from_slice(text.as_bytes());
            }
            Part::Int(value) => out.extend_from_slice(&value.to_le_bytes()),
        }
    }
}

/// A reader over a payload (or a journal header) that refuses to run past its end.
pub(super) struct Cursor<'a> {
    pub(super) bytes: &'a [u8],
}

impl<'a> Cursor<'a> {
    pub(super) fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.bytes.len() < n {
            return None;
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Some(head)
    }

    pub(super) fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    pub(super) fn u32(&mut self) -> Option<u32> {
        self.take(4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub(super) fn u64(&mut self) -> Option<u64> {
        self.take(8).and_then(|b| b.try_into().ok()).map(u64::from_le_bytes)
    }
}

/// One change of a payload.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Change<'a> {
    Put(Table, Vec<Part<'a>>, &'a [u8]),
    Delete(Table, Vec<Part<'a>>),
}

/// Every change of a payload, or `None` when it does not parse (a record that passed its CRC
/// but does not parse is a fault of the caller's making, named there).
pub(crate) fn changes(payload: &[u8]) -> Option<Vec<Change<'_>>> {
    let mut cursor = Cursor { bytes: payload };
    let mut out = Vec::new();
    while !cursor.bytes.is_empty() {
        let op = cursor.u8()?;
        let table = *Table::ALL.get(usize::from(cursor.u8()?))?;
        let shape = table.shape();
        let mut key = Vec::with_capacity(shape.len());
        for index in 0..shape.len() {
            if shape.is_int(index) {
                key.push(Part::Int(cursor.u64()?));
            } else {
                let len = cursor.u32()? as usize;
                key.push(Part::Text(std::str::from_utf8(cursor.take(len)?).ok()?));
            }
        }
        out.push(match op {
            PUT => {
                let len = cursor.u32()? as usize;
                Change::Put(table, key, cursor.take(len)?)
            }
            DELETE => Change::Delete(table, key),
            _ => return None,
        });
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_payload_reads_back_change_for_change_and_a_cut_one_does_not_parse() {
        let mut payload = Vec::new();
        record_put(&mut payload, Table::Effects, &[Part::Text("refund:p1")], b"row");
        record_delete(&mut payload, Table::BudgetLedger, &[Part::Text("a"), Part::Text("b"), Part::Int(9)]);
        record_put(&mut payload, Table::Receipts, &[Part::Int(u64::MAX)], b"");
        let read = changes(&payload).expect("parses");
        assert_eq!(
            read,
            vec![
                Change::Put(Table::Effects, vec![Part::Text("refund:p1")], b"row"),
                Change::Delete(Table::BudgetLedger, vec![Part::Text("a"), Part::Text("b"), Part::Int(9)]),
                Change::Put(Table::Receipts, vec![Part::Int(u64::MAX)], b""),
            ]
        );
        for cut in 1..payload.len() {
            assert!(changes(&payload[..cut]).is_none_or(|c| c.len() < 3), "cut at {cut}");
        }
        assert!(changes(&[9, 0]).is_none(), "an unknown operation");
        assert!(changes(&[PUT, 200]).is_none(), "an unknown table");
    }
}
