//! The open check: what every open verifies at the cost of a handful of point reads, whatever
//! the store's size (every table present, the chain head and the rows the last commit wrote
//! agreeing with each other). Everything older is `warden doctor`'s walk (`super`).

use super::{
    damaged, each, effect_row, read, ChainHead, Error, Event, EventKind, Int, KeyView, Result, RowRead, Scan,
    StoreFaultKind, StoredReceipt, Table, Text, META_HEAD,
};

/// What an open checks, at the cost of a handful of point reads whatever the store's size:
/// every table is there, and the rows the last receipt wrote agree with each other. The chain
/// head names the last receipt, which exists with the head's hash and has no successor; when it
/// recorded an outcome for an effect, that effect's row exists and its outcome index names this
/// receipt. The newest rows are the ones the last commit wrote; everything older is `warden
/// doctor`'s (`docs/STORE.md`).
pub(crate) fn check_on_open(rows: &dyn RowRead) -> Result<()> {
    let missing = rows.missing_tables()?;
    if !missing.is_empty() {
        let names: Vec<&str> = missing.iter().map(|table| table.name()).collect();
        return Err(missing_tables(&names));
    }
    // Counts that must agree, at one read each: every outcome index row names an effect that has
    // a row, and every receipt has its id row. A damaged table directory entry can make a whole
    // table look empty (and empty tables look new); these catch it for `effects` whenever any
    // effect has an outcome, and for `receipt_ids` always.
    let (effects, outcomes) = (rows.count(Table::Effects)?, rows.count(Table::EffectReceipts)?);
    if effects < outcomes {
        return Err(Error::store(
            StoreFaultKind::Damaged,
            format!(
            "the store file is damaged: the effects table holds {effects} rows but {outcomes} effects have outcome \
             receipts; nothing was decided from it. Run `warden doctor` on the store, and restore it from a backup"
        ),
        ));
    }
    // A prune deletes receipts and keeps their ids; the marker is checked against the prune's
    // receipt, its checkpoint and the first receipt kept.
    let pruned = super::super::retention::pruned_through(rows)?;
    let (receipts, ids) = (rows.count(Table::Receipts)?, rows.count(Table::ReceiptIds)?);
    if receipts.checked_add(pruned) != Some(ids) {
        let kept = if pruned > 0 { format!(" after the {pruned} pruned") } else { String::new() };
        return Err(Error::store(
            StoreFaultKind::Damaged,
            format!(
            "the store file is damaged: the chain holds {receipts} receipts{kept} but {ids} receipt ids are indexed; \
             nothing was decided from it. Run `warden doctor` on the store, and restore it from a backup"
        ),
        ));
    }
    check_last_reservation(rows, effects == 0)?;
    let head_key = KeyView(&[Text(META_HEAD)]);
    let meta = Table::Meta.name();
    let head: ChainHead = read(rows, Table::Meta, &[Text(META_HEAD)])?.ok_or_else(|| {
        Error::store(
            StoreFaultKind::Damaged,
            "the store has no chain head row; it was altered. Run `warden doctor` on it",
        )
    })?;
    let last = rows.last_int(Table::Receipts)?.unwrap_or(0);
    if last != head.seq {
        return Err(match head.seq {
            seq if last == 0 => damaged(meta, &head_key, &format!("names receipt {seq}, but there are no receipts")),
            seq => damaged(
                meta,
                &head_key,
                &format!("names receipt {seq} as the last, but the last receipt stored is {last}"),
            ),
        });
    }
    if head.seq == 0 {
        return Ok(());
    }
    let receipt_key = KeyView(&[Int(head.seq)]);
    let receipt: StoredReceipt = read(rows, Table::Receipts, &[Int(head.seq)])?
        .ok_or_else(|| damaged(Table::Receipts.name(), &receipt_key, "is missing, though the chain head names it"))?;
    if receipt.hash.as_deref().is_some_and(|hash| hash != head.hash) {
        return Err(damaged(meta, &head_key, &format!("does not match receipt {}'s hash", head.seq)));
    }
    let document = crate::canonical::parse_json(&receipt.document)
        .map_err(|_| damaged(Table::Receipts.name(), &receipt_key, "holds a document that is not JSON"))?;
    let says = |field: &str| document.get(field).and_then(serde_json::Value::as_str);
    let outcome = matches!(says("result"), Some("committed" | "failed" | "ambiguous" | "observed"));
    let Some(key) = says("effect_key").filter(|_| outcome) else { return Ok(()) };
    if effect_row(rows, key)?.is_none() {
        return Err(damaged(
            Table::Effects.name(),
            &KeyView(&[Text(key)]),
            &format!("is missing, though the last receipt ({}) recorded an outcome for it", head.seq),
        ));
    }
    let indexed: Option<u64> = read(rows, Table::EffectReceipts, &[Text(key)])?;
    if indexed != Some(head.seq) {
        return Err(damaged(
            Table::EffectReceipts.name(),
            &KeyView(&[Text(key)]),
            &format!("names receipt {indexed:?}, though the last receipt ({}) recorded an outcome for it", head.seq),
        ));
    }
    Ok(())
}

/// Events read back from the end, at most, looking for the last reservation (unless `effects`
/// is empty: then to the start, since one reservation anywhere is damage).
const RESERVATION_LOOKBACK: u64 = 10_000;

/// The effect the last EFFECT_RESERVED event names still has its row: rows are never removed,
/// so an event naming a key with none is damage. This is what sees a whole `effects` table gone
/// empty (a damaged table directory entry) in a store whose effects have no outcome yet.
fn check_last_reservation(rows: &dyn RowRead, effects_empty: bool) -> Result<()> {
    let mut read = 0u64;
    let mut reserved: Option<(u64, String)> = None;
    each::<Event>(rows, Table::Events, &Scan::all().backwards(), |_, event| {
        read += 1;
        if event.kind == EventKind::EFFECT_RESERVED {
            reserved = event.effect_key.map(|key| (event.event_id, key));
            return Ok(false);
        }
        Ok(effects_empty || read < RESERVATION_LOOKBACK)
    })?;
    // Every event was read and none reserved: the last reservation may be one whose event a
    // prune deleted.
    let reserved = match reserved {
        None if effects_empty || read < RESERVATION_LOOKBACK => super::super::retention::last_pruned_reservation(rows)?,
        found => found,
    };
    let Some((event_id, key)) = reserved else { return Ok(()) };
    if effect_row(rows, &key)?.is_none() {
        return Err(damaged(
            Table::Effects.name(),
            &KeyView(&[Text(&key)]),
            &format!("is missing, though event {event_id} reserved it (effect rows are never removed)"),
        ));
    }
    Ok(())
}

/// A store whose table directory lacks tables: damage, never an empty table. A write
/// transaction creates a table it opens when the directory lacks it, so a directory page that
/// lost `effects` would otherwise hand every effect key an empty table: every key new.
pub(crate) fn missing_tables(missing: &[&str]) -> Error {
    Error::store(
        StoreFaultKind::Damaged,
        format!(
            "the store file is damaged: its table directory has no {} table{} (a store holds every table from its \
         creation); nothing was decided from it and nothing was written. Run `warden doctor` on the store, and \
         restore it from a backup",
            missing.join(", "),
            if missing.len() == 1 { "" } else { "s" }
        ),
    )
}
