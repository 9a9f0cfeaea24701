//! The evidence rows, written once for every engine: the Merkle tree's cached nodes
//! (`merkle_nodes`, keyed by level and index in one integer), the checkpoints (`checkpoints`,
//! by number) and the anchors' records of them (`anchors`, by sink and checkpoint), read in a
//! transaction of either kind.

use std::ops::Bound;

use super::semantics::{each as each_row, read, write, Reads, Writes};
use super::{Part, Put, RowRead, Scan, Table};
use crate::effect::EffectState;
use crate::error::{Error, Result};
use crate::evidence::anchoring::StoredAnchor;
use crate::evidence::checkpoint::{OpenEffect, StoredCheckpoint};
use crate::receipt::StoredReceipt;
use crate::store::boundary::EvidenceReads;
use crate::store::rows::records::{ChainHead, StoredEffect};
use crate::store::tables::META_HEAD;

use Part::{Int, Text};

/// Levels and indexes share one integer key: the level in the top byte.
const LEVEL_SHIFT: u32 = 56;

/// The key of node `index` at `level`; an index that does not fit below the level byte is refused.
fn node_key(level: u8, index: u64) -> Result<u64> {
    if index >> LEVEL_SHIFT != 0 || level >= 64 {
        return Err(Error::InvalidInput(format!("Merkle node {index} at level {level} is beyond what the store keys")));
    }
    Ok((u64::from(level) << LEVEL_SHIFT) | index)
}

fn receipt_document(rows: &dyn RowRead, seq: u64) -> Result<Option<String>> {
    Ok(read::<StoredReceipt>(rows, Table::Receipts, &[Int(seq)])?.map(|receipt| receipt.document))
}

fn cached_node(rows: &dyn RowRead, level: u8, index: u64) -> Result<Option<[u8; 32]>> {
    read(rows, Table::MerkleNodes, &[Int(node_key(level, index)?)])
}

fn chain_size(rows: &dyn RowRead) -> Result<u64> {
    let head: ChainHead = read(rows, Table::Meta, &[Text(META_HEAD)])?
        .ok_or_else(|| Error::Store("the store has no chain head row; it was altered".into()))?;
    Ok(head.seq)
}

fn checkpoint(rows: &dyn RowRead, number: u64) -> Result<Option<StoredCheckpoint>> {
    read(rows, Table::Checkpoints, &[Int(number)])
}

fn checkpoints(rows: &dyn RowRead, scan: &Scan<'_>, limit: usize) -> Result<Vec<StoredCheckpoint>> {
    let mut out = Vec::new();
    if limit == 0 {
        return Ok(out);
    }
    each_row::<StoredCheckpoint>(rows, Table::Checkpoints, scan, |key, row| {
        if key != [Int(row.number)] {
            return Err(Error::Store(format!(
                "the checkpoint stored under {key:?} says it is number {}; the store was altered",
                row.number
            )));
        }
        out.push(row);
        Ok(out.len() < limit)
    })?;
    Ok(out)
}

fn anchor(rows: &dyn RowRead, sink: &str, number: u64) -> Result<Option<StoredAnchor>> {
    let row: Option<StoredAnchor> = read(rows, Table::Anchors, &[Text(sink), Int(number)])?;
    match row {
        Some(row) if row.sink != sink || row.checkpoint != number => Err(misfiled(&[Text(sink), Int(number)], &row)),
        row => Ok(row),
    }
}

fn misfiled(key: &[Part<'_>], row: &StoredAnchor) -> Error {
    Error::Store(format!(
        "the anchor stored under {key:?} says it is {:?}'s record of checkpoint {}; the store was altered",
        row.sink, row.checkpoint
    ))
}

fn anchors(rows: &dyn RowRead, scan: &Scan<'_>, mut each: impl FnMut(StoredAnchor) -> bool) -> Result<()> {
    each_row::<StoredAnchor>(rows, Table::Anchors, scan, |key, row| {
        if key != [Text(&row.sink), Int(row.checkpoint)] {
            return Err(misfiled(key, &row));
        }
        Ok(each(row))
    })
}

fn last_anchored(rows: &dyn RowRead, sink: &str) -> Result<Option<u64>> {
    let prefix = [Text(sink)];
    let mut found = None;
    anchors(rows, &Scan::under(&prefix).backwards(), |row| {
        if row.anchored() {
            found = Some(row.checkpoint);
        }
        found.is_none()
    })?;
    Ok(found)
}

fn anchors_between(rows: &dyn RowRead, from: u64, to: u64) -> Result<Vec<StoredAnchor>> {
    let mut out = Vec::new();
    anchors(rows, &Scan::all(), |row| {
        if (from..=to).contains(&row.checkpoint) {
            out.push(row);
        }
        true
    })?;
    Ok(out)
}

fn open_effects(rows: &dyn RowRead) -> Result<Vec<OpenEffect>> {
    let mut out = Vec::new();
    each_row::<StoredEffect>(rows, Table::Effects, &Scan::all(), |_, row| {
        if matches!(row.state, EffectState::Reserved | EffectState::Executing | EffectState::Ambiguous) {
            out.push(OpenEffect {
                effect_key: row.effect_key,
                attempt: row.attempt,
                state: row.state.as_str().to_owned(),
            });
        }
        Ok(true)
    })?;
    Ok(out)
}

/// One implementation of `EvidenceReads` for each transaction kind, over its rows.
macro_rules! evidence_reads {
    ($type:ty, $rows:ident => $get:expr) => {
        impl EvidenceReads for $type {
            fn receipt_document(&self, seq: u64) -> Result<Option<String>> {
                let $rows = self;
                receipt_document($get, seq)
            }
            fn cached_node(&self, level: u8, index: u64) -> Result<Option<[u8; 32]>> {
                let $rows = self;
                cached_node($get, level, index)
            }
            fn chain_size(&self) -> Result<u64> {
                let $rows = self;
                chain_size($get)
            }
            fn checkpoint(&self, number: u64) -> Result<Option<StoredCheckpoint>> {
                let $rows = self;
                checkpoint($get, number)
            }
            fn checkpoints(&self, from: u64, limit: usize) -> Result<Vec<StoredCheckpoint>> {
                let $rows = self;
                checkpoints($get, &Scan::all().from(Bound::Included(Int(from))), limit)
            }
            fn last_checkpoint(&self) -> Result<Option<StoredCheckpoint>> {
                let $rows = self;
                Ok(checkpoints($get, &Scan::all().backwards(), 1)?.pop())
            }
            fn open_effects(&self) -> Result<Vec<OpenEffect>> {
                let $rows = self;
                open_effects($get)
            }
            fn anchor(&self, sink: &str, checkpoint: u64) -> Result<Option<StoredAnchor>> {
                let $rows = self;
                anchor($get, sink, checkpoint)
            }
            fn last_anchored(&self, sink: &str) -> Result<Option<u64>> {
                let $rows = self;
                last_anchored($get, sink)
            }
            fn anchors(&self, from: u64, to: u64) -> Result<Vec<StoredAnchor>> {
                let $rows = self;
                anchors_between($get, from, to)
            }
        }
    };
}

evidence_reads!(Reads<'_>, reads => reads.rows());
evidence_reads!(Writes<'_>, writes => writes.read_rows());

impl Writes<'_> {
    pub(super) fn put_cached_node(&mut self, level: u8, index: u64, hash: [u8; 32]) -> Result<()> {
        write(self.write_rows(), Table::MerkleNodes, &[Int(node_key(level, index)?)], &hash, Put::Replace)
    }

    pub(super) fn put_checkpoint(&mut self, row: &StoredCheckpoint) -> Result<()> {
        write(self.write_rows(), Table::Checkpoints, &[Int(row.number)], row, Put::New)
    }

    pub(super) fn put_anchor_row(&mut self, row: &StoredAnchor) -> Result<()> {
        write(self.write_rows(), Table::Anchors, &[Text(&row.sink), Int(row.checkpoint)], row, Put::Replace)
    }
}

#[cfg(test)]
mod tests {
    use super::node_key;

    #[test]
    fn node_keys_keep_levels_apart_and_refuse_what_does_not_fit() {
        assert_eq!(node_key(0, 5).unwrap(), 5);
        assert_eq!(node_key(4, 1).unwrap(), (4 << 56) | 1);
        assert_ne!(node_key(4, 1).unwrap(), node_key(5, 1).unwrap());
        assert!(node_key(4, 1 << 56).is_err());
        assert!(node_key(64, 0).is_err());
    }
}
