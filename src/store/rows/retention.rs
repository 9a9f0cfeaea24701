//! The retention rows, written once for every engine: the holds (`holds`, by name), the marker of
//! the pruned prefix (the meta row `pruned`) and the deletion a prune makes. The rule that says
//! whether a prune may go ahead is the kernel's (`evidence::retention::may_prune`); these only
//! read, check and delete what they are told, in the caller's transaction.

use std::ops::Bound;

use super::codec::{damaged, decode};
use super::semantics::{each, read, write, Writes};
use super::{KeyView, Part, Put, RowRead, Scan, Table};
use crate::clock::Micros;
use crate::error::Result;
use crate::event::Event;
use crate::evidence::retention::{Hold, PrunedPrefix};
use crate::receipt::StoredReceipt;
use crate::store::tables::META_PRUNED;

use Part::{Int, Text};

/// The pruned prefix, if anything was pruned.
pub(super) fn pruned(rows: &dyn RowRead) -> Result<Option<PrunedPrefix>> {
    read(rows, Table::Meta, &[Text(META_PRUNED)])
}

/// How far receipts were pruned: 0 when nothing was.
pub(super) fn pruned_through(rows: &dyn RowRead) -> Result<u64> {
    Ok(pruned(rows)?.map_or(0, |prefix| prefix.through_seq))
}

/// Every hold, standing or released, by name.
pub(super) fn holds(rows: &dyn RowRead) -> Result<Vec<Hold>> {
    let mut out = Vec::new();
    each::<Hold>(rows, Table::Holds, &Scan::all(), |key, hold| {
        out.push(filed(key, hold)?);
        Ok(true)
    })?;
    Ok(out)
}

/// The id of the last event of the longest prefix of events written at or before `until`
/// (0 when the first event is later, or there is none).
pub(super) fn events_through(rows: &dyn RowRead, until: Micros) -> Result<u64> {
    let mut through = 0;
    each::<Event>(rows, Table::Events, &Scan::all(), |_, event| {
        if event.ts > until {
            return Ok(false);
        }
        through = event.event_id;
        Ok(true)
    })?;
    Ok(through)
}

impl Writes<'_> {
    pub(super) fn put_hold_row(&mut self, hold: &Hold) -> Result<()> {
        write(self.write_rows(), Table::Holds, &[Text(&hold.name)], hold, Put::Replace)
    }

    /// Write `marker` and delete receipts `from..=marker.through_seq` (each with its id row) and
    /// every event up to `marker.events_through`: the receipts removed. A receipt missing from the
    /// range, or whose id row names another seq, is damage and nothing is deleted (the caller's
    /// transaction is dropped). The effects' outcome index is kept: an effect whose outcome
    /// receipt is gone still shows it had one.
    pub(super) fn prune_rows(&mut self, marker: &PrunedPrefix, from: u64) -> Result<u64> {
        let mut removed = 0u64;
        for seq in from..=marker.through_seq {
            let key = [Int(seq)];
            let receipt: StoredReceipt = read(self.read_rows(), Table::Receipts, &key)?.ok_or_else(|| {
                damaged(Table::Receipts.name(), &KeyView(&key), "is missing from the prefix to prune")
            })?;
            let document = crate::canonical::parse_json(&receipt.document)
                .map_err(|_| damaged(Table::Receipts.name(), &KeyView(&key), "holds a document that is not JSON"))?;
            let id = document.get("receipt_id").and_then(serde_json::Value::as_str).unwrap_or_default().to_owned();
            let id_key = [Text(&id)];
            if read::<u64>(self.read_rows(), Table::ReceiptIds, &id_key)? != Some(seq) {
                return Err(damaged(
                    Table::ReceiptIds.name(),
                    &KeyView(&id_key),
                    &format!("does not name receipt {seq}, whose id it is"),
                ));
            }
            self.write_rows().delete(Table::Receipts, &key)?;
            self.write_rows().delete(Table::ReceiptIds, &id_key)?;
            removed += 1;
        }
        let mut events = Vec::new();
        self.read_rows().scan(
            Table::Events,
            &Scan::all().to(Bound::Included(Int(marker.events_through))),
            &mut |key, bytes| {
                decode::<Event>(Table::Events.name(), &KeyView(key), bytes)?;
                events.push(key.first().copied().map(|part| part.int(Table::Events)).transpose()?.unwrap_or(0));
                Ok(true)
            },
        )?;
        for id in events {
            self.write_rows().delete(Table::Events, &[Int(id)])?;
        }
        write(self.write_rows(), Table::Meta, &[Text(META_PRUNED)], marker, Put::Replace)?;
        Ok(removed)
    }
}

/// A receipt the outcome index names that is not stored: pruned (no fault) when a prune removed
/// its seq, damage otherwise.
pub(super) fn was_pruned(rows: &dyn RowRead, seq: u64) -> Result<bool> {
    Ok(seq <= pruned_through(rows)?)
}

/// The chain's start for its walk: the seq before the first receipt kept, and the hash it names.
pub(super) fn chain_start(rows: &dyn RowRead) -> Result<Option<(u64, String)>> {
    Ok(pruned(rows)?.map(|prefix| (prefix.through_seq, prefix.last_hash)))
}

/// A hold row, checked to be filed under its own name.
pub(super) fn hold(rows: &dyn RowRead, name: &str) -> Result<Option<Hold>> {
    let key = [Text(name)];
    read::<Hold>(rows, Table::Holds, &key)?.map(|hold| filed(&key, hold)).transpose()
}

/// `hold`, when it is filed under its own name; damage otherwise.
pub(super) fn filed(key: &[Part<'_>], hold: Hold) -> Result<Hold> {
    match key {
        [Text(name)] if *name == hold.name => Ok(hold),
        _ => Err(damaged(Table::Holds.name(), &KeyView(key), &format!("holds the record of the hold {:?}", hold.name))),
    }
}
