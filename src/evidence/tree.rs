//! The Merkle tree over the receipts (RFC 9162 §2.1, the hashing RFC 6962 defined): leaf `i` is
//! the receipt at seq `i + 1`, hashed as SHA-256(0x00 ‖ its canonical document, the bytes of
//! one `receipts.jsonl` line); an interior node is SHA-256(0x01 ‖ left ‖ right). Proofs are the
//! RFC's audit paths and consistency proofs, computed and checked by `tlog_tiles` (a port of
//! Go's `sumdb/tlog`).
//!
//! The tree is derived data: every hash follows from the receipts. The store caches the nodes
//! of complete subtrees of [`CACHED_LEVEL`] and above (one row per 16 receipts, amortized), in
//! the checkpoint's own write transaction, so the action path writes nothing for it; a node not
//! cached yet is computed from the receipts below it.

use std::cell::RefCell;
use std::collections::HashMap;

use tlog_tiles::tlog::{self, Hash, HashReader};

use crate::error::{Error, InvalidInputKind, Result, StoreFaultKind};

/// The lowest level whose complete subtrees the store caches: 2^4 = 16 receipts per node.
pub const CACHED_LEVEL: u8 = 4;

/// What the tree reads from a store.
pub trait LogRows {
    /// The canonical document of the receipt at `seq` (from 1), `None` when there is none.
    fn receipt_document(&self, seq: u64) -> Result<Option<String>>;
    /// The cached hash of the complete subtree `index` at `level`, when cached.
    fn cached_node(&self, level: u8, index: u64) -> Result<Option<[u8; 32]>>;
}

/// The leaf hash of one receipt document.
pub fn leaf_hash(document: &[u8]) -> [u8; 32] {
    tlog::record_hash(document).0
}

/// The hash of an interior node.
pub fn node_hash(left: [u8; 32], right: [u8; 32]) -> [u8; 32] {
    tlog::node_hash(Hash(left), Hash(right)).0
}

/// The tree of the first `size` receipts of a store, read through `rows`.
pub struct Tree<'a> {
    rows: &'a dyn LogRows,
    size: u64,
    memo: RefCell<HashMap<(u8, u64), [u8; 32]>>,
    /// Complete subtrees at `CACHED_LEVEL` or above computed here (not read from the cache).
    made: RefCell<Vec<(u8, u64, [u8; 32])>>,
    fault: RefCell<Option<Error>>,
}

impl<'a> Tree<'a> {
    /// The tree of the first `size` receipts.
    pub fn new(rows: &'a dyn LogRows, size: u64) -> Tree<'a> {
        Tree { rows, size, memo: RefCell::default(), made: RefCell::default(), fault: RefCell::default() }
    }

    /// The same tree, knowing the complete subtrees of its first `size` leaves (largest first,
    /// as [`Tree::frontier`] gives them): what a prune keeps of the receipts it deleted. Every
    /// node of a tree of `size` leaves or more outside those subtrees, and every proof about a
    /// leaf past them, is then computed without the deleted leaves. Ignored when this tree is
    /// smaller than `size`.
    pub fn resuming(self, size: u64, frontier: &[(u8, [u8; 32])]) -> Tree<'a> {
        if size <= self.size {
            let mut first = 0u64;
            let mut memo = self.memo.borrow_mut();
            for &(level, hash) in frontier {
                let Some(width) = 1u64.checked_shl(u32::from(level)) else { break };
                memo.insert((level, first >> level), hash);
                first = first.saturating_add(width);
            }
        }
        self
    }

    /// The nodes this tree computed that the store does not cache yet: (level, index, hash).
    pub fn made(&self) -> Vec<(u8, u64, [u8; 32])> {
        self.made.borrow().clone()
    }

    /// The hash of the complete subtree `index` at `level` (leaves `index·2^level ..`).
    pub fn node(&self, level: u8, index: u64) -> Result<[u8; 32]> {
        let first = index.checked_shl(u32::from(level)).filter(|first| first >> level == index);
        let end = first.and_then(|first| first.checked_add(1u64 << level));
        if level >= 64 || end.is_none_or(|end| end > self.size) {
            return Err(Error::invalid(
                InvalidInputKind::OutOfRange,
                format!("node {index} at level {level} is not in a tree of {} receipts", self.size),
            ));
        }
        if let Some(hash) = self.memo.borrow().get(&(level, index)) {
            return Ok(*hash);
        }
        let hash = if level == 0 {
            let seq = index + 1;
            let document = self.rows.receipt_document(seq)?.ok_or_else(|| {
                Error::store(StoreFaultKind::Damaged, format!(
                    "receipt {seq} is missing from the chain, so the Merkle tree cannot be computed; run `warden doctor`"
                ))
            })?;
            leaf_hash(document.as_bytes())
        } else if let Some(hash) =
            (level >= CACHED_LEVEL).then(|| self.rows.cached_node(level, index)).transpose()?.flatten()
        {
            hash
        } else {
            let hash = node_hash(self.node(level - 1, 2 * index)?, self.node(level - 1, 2 * index + 1)?);
            if level >= CACHED_LEVEL {
                self.made.borrow_mut().push((level, index, hash));
            }
            hash
        };
        self.memo.borrow_mut().insert((level, index), hash);
        Ok(hash)
    }

    fn run<T>(&self, f: impl FnOnce(&Self) -> std::result::Result<T, tlog::Error>) -> Result<T> {
        let out = f(self);
        if let Some(fault) = self.fault.borrow_mut().take() {
            return Err(fault);
        }
        out.map_err(|e| {
            Error::invalid(InvalidInputKind::OutOfRange, format!("the Merkle tree of {} receipts: {e}", self.size))
        })
    }

    /// The root hash (RFC 9162 MTH) of the whole tree.
    pub fn root(&self) -> Result<[u8; 32]> {
        self.run(|tree| tlog::tree_hash(tree.size, tree)).map(|hash| hash.0)
    }

    /// The audit path of leaf `index` (the receipt at seq `index + 1`).
    pub fn inclusion(&self, index: u64) -> Result<Vec<[u8; 32]>> {
        if index >= self.size {
            return Err(Error::invalid(
                InvalidInputKind::OutOfRange,
                format!("receipt {} is not in a tree of {} receipts", index + 1, self.size),
            ));
        }
        self.run(|tree| tlog::prove_record(tree.size, index, tree))
            .map(|proof| proof.into_iter().map(|h| h.0).collect())
    }

    /// The consistency proof from the tree of the first `old` receipts to this one.
    pub fn consistency(&self, old: u64) -> Result<Vec<[u8; 32]>> {
        if old == 0 || old > self.size {
            return Err(Error::invalid(
                InvalidInputKind::OutOfRange,
                format!("a consistency proof needs an old size from 1 to {}; {old} is not", self.size),
            ));
        }
        self.run(|tree| tlog::prove_tree(tree.size, old, tree)).map(|proof| proof.into_iter().map(|h| h.0).collect())
    }

    /// The complete subtrees that make up the tree, largest first: (level, hash). The state a
    /// verifier starts from to go on appending leaves (`Frontier::resume`).
    pub fn frontier(&self) -> Result<Vec<(u8, [u8; 32])>> {
        let mut out = Vec::new();
        let mut first = 0u64;
        for level in (0..64u8).rev() {
            if self.size & (1u64 << level) != 0 {
                out.push((level, self.node(level, first >> level)?));
                first += 1u64 << level;
            }
        }
        Ok(out)
    }
}

impl HashReader for Tree<'_> {
    fn read_hashes(&self, indexes: &[u64]) -> std::result::Result<Vec<Hash>, tlog::Error> {
        let mut out = Vec::with_capacity(indexes.len());
        for &index in indexes {
            let (level, n) = tlog::split_stored_hash_index(index);
            match self.node(level, n) {
                Ok(hash) => out.push(Hash(hash)),
                Err(fault) => {
                    *self.fault.borrow_mut() = Some(fault);
                    return Err(tlog::Error::IndexesNotInTree);
                }
            }
        }
        Ok(out)
    }
}

/// Whether `proof` shows leaf `index` with hash `leaf` in the tree of `size` with root `root`.
pub fn check_inclusion(proof: &[[u8; 32]], size: u64, root: [u8; 32], index: u64, leaf: [u8; 32]) -> bool {
    let proof: Vec<Hash> = proof.iter().copied().map(Hash).collect();
    index < size && tlog::check_record(&proof, size, Hash(root), index, Hash(leaf)).is_ok()
}

/// Whether `proof` shows the tree of `old` leaves with root `old_root` is a prefix of the tree of
/// `new` leaves with root `new_root`.
pub fn check_consistency(proof: &[[u8; 32]], old: u64, old_root: [u8; 32], new: u64, new_root: [u8; 32]) -> bool {
    if old == new {
        return proof.is_empty() && old_root == new_root;
    }
    let proof: Vec<Hash> = proof.iter().copied().map(Hash).collect();
    (1..=new).contains(&old) && tlog::check_tree(&proof, new, Hash(new_root), old, Hash(old_root)).is_ok()
}

/// A tree built one leaf at a time in constant memory (at most 64 hashes): what a verifier
/// keeps while it streams `receipts.jsonl`.
#[derive(Debug, Clone, Default)]
pub struct Frontier {
    /// Complete subtrees, largest first: (level, hash).
    stack: Vec<(u8, [u8; 32])>,
    size: u64,
}

impl Frontier {
    /// Go on from the complete subtrees of a tree of `size` leaves, largest first. `None` when
    /// the levels are not the binary digits of `size`.
    pub fn resume(size: u64, subtrees: Vec<(u8, [u8; 32])>) -> Option<Frontier> {
        let sum = subtrees
            .iter()
            .try_fold(0u64, |sum, (level, _)| 1u64.checked_shl(u32::from(*level)).and_then(|n| sum.checked_add(n)))?;
        let descending = subtrees.windows(2).all(|pair| pair[0].0 > pair[1].0);
        (sum == size && descending).then_some(Frontier { stack: subtrees, size })
    }

    /// The leaves appended so far.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Append one leaf hash.
    pub fn push(&mut self, leaf: [u8; 32]) {
        let mut hash = leaf;
        let mut level = 0u8;
        while let Some(&(top, left)) = self.stack.last() {
            if top != level {
                break;
            }
            self.stack.pop();
            hash = node_hash(left, hash);
            level += 1;
        }
        self.stack.push((level, hash));
        self.size += 1;
    }

    /// The root of the leaves so far (the empty tree's is SHA-256 of nothing).
    pub fn root(&self) -> [u8; 32] {
        let mut iter = self.stack.iter().rev();
        let Some(&(_, mut hash)) = iter.next() else { return tlog::EMPTY_HASH.0 };
        for &(_, left) in iter {
            hash = node_hash(left, hash);
        }
        hash
    }

    /// Its complete subtrees, largest first.
    pub fn subtrees(&self) -> &[(u8, [u8; 32])] {
        &self.stack
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    struct Docs {
        docs: Vec<String>,
        cache: HashMap<(u8, u64), [u8; 32]>,
    }

    impl LogRows for Docs {
        fn receipt_document(&self, seq: u64) -> Result<Option<String>> {
            Ok(seq.checked_sub(1).and_then(|i| self.docs.get(i as usize)).cloned())
        }
        fn cached_node(&self, level: u8, index: u64) -> Result<Option<[u8; 32]>> {
            Ok(self.cache.get(&(level, index)).copied())
        }
    }

    fn docs(n: usize) -> Docs {
        Docs { docs: (0..n).map(|i| format!("{{\"seq\":{}}}", i + 1)).collect(), cache: HashMap::new() }
    }

    /// RFC 9162's MTH written out as the RFC defines it, to check the computed roots against.
    fn mth(leaves: &[[u8; 32]]) -> [u8; 32] {
        match leaves.len() {
            0 => tlog::EMPTY_HASH.0,
            1 => leaves[0],
            n => {
                let k = 1usize << (usize::BITS - 1 - (n - 1).leading_zeros());
                node_hash(mth(&leaves[..k]), mth(&leaves[k..]))
            }
        }
    }

    fn leaves(d: &Docs) -> Vec<[u8; 32]> {
        d.docs.iter().map(|doc| leaf_hash(doc.as_bytes())).collect()
    }

    #[test]
    fn the_leaf_and_node_hashes_are_domain_separated() {
        use sha2::{Digest, Sha256};
        let doc = b"{\"seq\":1}";
        assert_eq!(leaf_hash(doc), <[u8; 32]>::from(Sha256::new().chain_update([0u8]).chain_update(doc).finalize()));
        let (a, b) = ([1u8; 32], [2u8; 32]);
        let expected: [u8; 32] = Sha256::new().chain_update([1u8]).chain_update(a).chain_update(b).finalize().into();
        assert_eq!(node_hash(a, b), expected);
        assert_ne!(leaf_hash(&[a, b].concat()), node_hash(a, b));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn roots_proofs_and_frontiers_agree_with_the_rfc_definition(n in 1usize..300, pick in 0usize..300, old in 1usize..300) {
            let d = docs(n);
            let all = leaves(&d);
            let tree = Tree::new(&d, n as u64);
            let root = tree.root().unwrap();
            prop_assert_eq!(root, mth(&all));
            let mut frontier = Frontier::default();
            for leaf in &all { frontier.push(*leaf); }
            prop_assert_eq!(frontier.root(), root);
            let resumed = Frontier::resume(n as u64, tree.frontier().unwrap()).unwrap();
            prop_assert_eq!(resumed.root(), root);
            let index = (pick % n) as u64;
            let path = tree.inclusion(index).unwrap();
            prop_assert!(check_inclusion(&path, n as u64, root, index, all[index as usize]));
            prop_assert!(!check_inclusion(&path, n as u64, root, index, leaf_hash(b"other")));
            let old = (old % n) + 1;
            let old_root = mth(&all[..old]);
            let proof = tree.consistency(old as u64).unwrap();
            prop_assert!(check_consistency(&proof, old as u64, old_root, n as u64, root));
            if old < n {
                prop_assert!(!check_consistency(&proof, old as u64, leaf_hash(b"forked"), n as u64, root));
            }
        }

        #[test]
        fn a_pruned_tree_proves_what_the_whole_one_does_past_its_frontier(
            n in 1usize..300, cut in 0usize..300, pick in 0usize..300, old in 0usize..300,
        ) {
            // The receipts 1..=cut are gone; only the frontier at cut is known.
            let whole = docs(n);
            let cut = cut % (n + 1);
            let frontier = Tree::new(&whole, cut as u64).frontier().unwrap();
            let mut pruned = docs(n);
            for doc in pruned.docs.iter_mut().take(cut) { doc.clear(); }
            let gone = Docs { docs: pruned.docs.clone(), cache: HashMap::new() };
            struct Pruned(Docs, usize);
            impl LogRows for Pruned {
                fn receipt_document(&self, seq: u64) -> Result<Option<String>> {
                    if seq as usize <= self.1 {
                        return Err(Error::NotFound(format!("receipt {seq} was pruned")));
                    }
                    self.0.receipt_document(seq)
                }
                fn cached_node(&self, level: u8, index: u64) -> Result<Option<[u8; 32]>> {
                    self.0.cached_node(level, index)
                }
            }
            let rows = Pruned(gone, cut);
            for size in [cut.max(1), (cut + 1).min(n), n] {
                let (full, part) = (Tree::new(&whole, size as u64), Tree::new(&rows, size as u64).resuming(cut as u64, &frontier));
                prop_assert_eq!(part.root().unwrap(), full.root().unwrap());
                prop_assert_eq!(part.frontier().unwrap(), full.frontier().unwrap());
            }
            let (full, part) = (Tree::new(&whole, n as u64), Tree::new(&rows, n as u64).resuming(cut as u64, &frontier));
            if cut < n {
                let index = (cut + pick % (n - cut)) as u64;
                prop_assert_eq!(part.inclusion(index).unwrap(), full.inclusion(index).unwrap());
            }
            let old = cut.max(1) + old % (n - cut.max(1) + 1);
            prop_assert_eq!(part.consistency(old as u64).unwrap(), full.consistency(old as u64).unwrap());
            // Before the frontier the deleted leaves are needed, and their absence is the error.
            if cut > 1 {
                let error = part.inclusion(0).unwrap_err().to_string();
                prop_assert!(error.contains("was pruned"), "{}", error);
            }
        }
    }

    #[test]
    fn cached_nodes_are_used_and_new_ones_reported() {
        let mut d = docs(40);
        let tree = Tree::new(&d, 40);
        let root = tree.root().unwrap();
        let made = tree.made();
        // 40 = 32 + 8: the level-5 subtree and its two level-4 halves are complete.
        let mut levels: Vec<(u8, u64)> = made.iter().map(|(l, i, _)| (*l, *i)).collect();
        levels.sort_unstable();
        assert_eq!(levels, vec![(4, 0), (4, 1), (5, 0)]);
        for (level, index, hash) in made {
            d.cache.insert((level, index), hash);
        }
        // With the cache, the first 32 receipts are never read again.
        d.docs[0] = "altered".into();
        assert_eq!(Tree::new(&d, 40).root().unwrap(), root);
        assert!(Tree::new(&d, 40).made().is_empty());
        // Without it, the altered receipt changes the root.
        d.cache.clear();
        assert_ne!(Tree::new(&d, 40).root().unwrap(), root);
    }

    #[test]
    fn a_missing_receipt_is_a_store_fault_and_out_of_range_asks_are_refused() {
        let mut d = docs(5);
        d.docs.truncate(3);
        assert!(matches!(Tree::new(&d, 5).root(), Err(Error::Store(_))));
        let d = docs(5);
        assert!(Tree::new(&d, 5).inclusion(5).is_err());
        assert!(Tree::new(&d, 5).consistency(0).is_err());
        assert!(Tree::new(&d, 5).consistency(6).is_err());
        assert!(Tree::new(&d, 5).node(1, 2).is_err(), "leaves 4..6 are not all in a tree of 5");
        assert!(Frontier::resume(5, vec![(0, [0; 32]), (2, [0; 32])]).is_none());
    }

    #[test]
    fn an_inclusion_proof_at_two_to_the_24_is_24_hashes() {
        // The path length is the tree's height: 24 hashes of 32 bytes, 768 bytes.
        struct Big;
        impl LogRows for Big {
            fn receipt_document(&self, seq: u64) -> Result<Option<String>> {
                Ok(Some(seq.to_string()))
            }
            fn cached_node(&self, _: u8, _: u64) -> Result<Option<[u8; 32]>> {
                Ok(Some([7u8; 32]))
            }
        }
        let path = Tree::new(&Big, 1 << 24).inclusion(12_345).unwrap();
        assert_eq!(path.len(), 24);
        assert_eq!(path.len() * 32, 768);
    }
}
