//! The evidence rows, written once for every engine: the Merkle tree's cached nodes
//! (`merkle_nodes`, keyed by level and index in one integer), the checkpoints (`checkpoints`,
//! by number), the anchors' records of them (`anchors`, by sink and checkpoint) and the policies
//! the receipts name (`policies`, the canonical policy under its `sha256:` hash), read in a
//! transaction of either kind.

use std::ops::Bound;

use super::access::{each as each_row, read, write, Reads, Writes};
use super::codec::damaged;
use super::retention;
use super::{KeyView, Part, Put, RowRead, Scan, Table};
use crate::clock::Micros;
use crate::effect::EffectState;
use crate::error::{Error, InvalidInputKind, Result, StoreFaultKind};
use crate::evidence::anchoring::StoredAnchor;
use crate::evidence::checkpoint::{OpenEffect, StoredCheckpoint};
use crate::evidence::retention::{Hold, PrunedPrefix};
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
        return Err(Error::invalid(
            InvalidInputKind::OutOfRange,
            format!("Merkle node {index} at level {level} is beyond what the store keys"),
        ));
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
        .ok_or_else(|| Error::store(StoreFaultKind::Damaged, "the store has no chain head row; it was altered"))?;
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
            return Err(Error::store(
                StoreFaultKind::Damaged,
                format!("the checkpoint stored under {key:?} says it is number {}; the store was altered", row.number),
            ));
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
    Error::store(
        StoreFaultKind::Damaged,
        format!(
            "the anchor stored under {key:?} says it is {:?}'s record of checkpoint {}; the store was altered",
            row.sink, row.checkpoint
        ),
    )
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

/// The canonical policy kept under `policy_hash`, checked to hash to it: a row whose bytes hash
/// to anything else is damage, never a policy.
fn policy(rows: &dyn RowRead, policy_hash: &str) -> Result<Option<Vec<u8>>> {
    let key = [Text(policy_hash)];
    let Some(bytes) = read::<Vec<u8>>(rows, Table::Policies, &key)? else { return Ok(None) };
    check_policy(&key, &bytes)?;
    Ok(Some(bytes))
}

/// Refuse a policy row whose bytes do not hash to the key it is stored under.
pub(super) fn check_policy(key: &[Part<'_>], bytes: &[u8]) -> Result<()> {
    match key {
        [Text(hash)] if crate::canonical::sha256_prefixed(bytes) == *hash => Ok(()),
        _ => Err(damaged(Table::Policies.name(), &KeyView(key), "holds a policy that does not hash to its key")),
    }
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
            fn policy(&self, policy_hash: &str) -> Result<Option<Vec<u8>>> {
                let $rows = self;
                policy($get, policy_hash)
            }
            fn pruned(&self) -> Result<Option<PrunedPrefix>> {
                let $rows = self;
                retention::pruned($get)
            }
            fn holds(&self) -> Result<Vec<Hold>> {
                let $rows = self;
                retention::holds($get)
            }
            fn hold(&self, name: &str) -> Result<Option<Hold>> {
                let $rows = self;
                retention::hold($get, name)
            }
            fn events_through(&self, until: Micros) -> Result<u64> {
                let $rows = self;
                retention::events_through($get, until)
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

    /// Keep `canonical` under `policy_hash` once: `true` when written now, `false` when the same
    /// bytes are already there. Other bytes under the hash are a fault, and nothing is written
    /// over them.
    pub(super) fn put_policy(&mut self, policy_hash: &str, canonical: &[u8]) -> Result<bool> {
        let key = [Text(policy_hash)];
        if crate::canonical::sha256_prefixed(canonical) != policy_hash {
            return Err(Error::store(
                StoreFaultKind::Defect,
                format!(
                "the policy to keep under {policy_hash} does not hash to it (a defect of this build); nothing was kept"
            ),
            ));
        }
        match policy(self.read_rows(), policy_hash)? {
            Some(stored) if stored == canonical => Ok(false),
            Some(_) => Err(damaged(
                Table::Policies.name(),
                &KeyView(&key),
                "holds other bytes than the policy being kept under it, and is never overwritten",
            )),
            None => write(self.write_rows(), Table::Policies, &key, &canonical.to_vec(), Put::New).map(|()| true),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::node_key;
    use crate::store::boundary::EvidenceReads;
    use crate::store::mem::MemStore;

    #[test]
    fn node_keys_keep_levels_apart_and_refuse_what_does_not_fit() {
        assert_eq!(node_key(0, 5).unwrap(), 5);
        assert_eq!(node_key(4, 1).unwrap(), (4 << 56) | 1);
        assert_ne!(node_key(4, 1).unwrap(), node_key(5, 1).unwrap());
        assert!(node_key(4, 1 << 56).is_err());
        assert!(node_key(64, 0).is_err());
    }

    #[test]
    fn a_policy_is_kept_once_under_its_hash_and_never_written_over() {
        let store = MemStore::open("memory:rows-evidence-policies").unwrap();
        let policy = br#"{"actions":{},"schema":"warden/v1"}"#;
        let hash = crate::canonical::sha256_prefixed(policy);
        let other = br#"{"actions":{},"schema":"warden/v2"}"#;
        // (what is kept, under which hash, what comes back: written now, or the refusal's words)
        let cases: [(&[u8], &str, std::result::Result<bool, &str>); 4] = [
            (policy, &hash, Ok(true)),
            (policy, &hash, Ok(false)),
            (other, &hash, Err("does not hash to it")),
            (policy, "sha256:test", Err("does not hash to it")),
        ];
        for (bytes, under, expected) in cases {
            let got = store.edit(|writes| writes.put_policy(under, bytes)).map_err(|e| e.to_string());
            match (&got, expected) {
                (Ok(written), Ok(want)) => assert_eq!(*written, want, "{under}"),
                (Err(text), Err(words)) => assert!(text.contains(words), "{under}: {text}"),
                _ => panic!("{under}: {got:?}, expected {expected:?}"),
            }
        }
        // Other bytes under the hash with a valid checksum (an edited row): a read refuses them,
        // and keeping the policy again does not write over them.
        store
            .edit(|writes| {
                let key = [super::Text(hash.as_str())];
                super::write(writes.write_rows(), super::Table::Policies, &key, &other.to_vec(), super::Put::Replace)
            })
            .unwrap();
        let read = store.edit(|writes| writes.policy(&hash)).unwrap_err().to_string();
        assert!(read.contains("damaged") && read.contains("does not hash to its key"), "{read}");
        let again = store.edit(|writes| writes.put_policy(&hash, policy)).unwrap_err().to_string();
        assert!(again.contains("does not hash to its key"), "{again}");
        let kept = store.edit(|writes| {
            super::read::<Vec<u8>>(writes.read_rows(), super::Table::Policies, &[super::Text(hash.as_str())])
        });
        assert_eq!(kept.unwrap().as_deref(), Some(other.as_slice()));
        assert_eq!(store.edit(|writes| writes.policy("sha256:none")).unwrap(), None);
    }
}
