//! The row layer: what a store engine knows — tables of ordered keys and byte values, read and
//! written inside the engine's own transaction — and nothing of what the rows mean.
//!
//! Above it, written once for every engine: the codec (every value CRC'd, maybe compressed,
//! checked on every read; `codec`) and the store's semantics (`semantics`: the chain append,
//! the FAILED cross-check, budgets, every index, events). Below it, each engine implements only
//! [`RowRead`] and [`RowWrite`] over its transactions: the file (`store::redb`), PostgreSQL
//! (`store::pg`), memory (`store::mem`). All three store exactly the same value bytes.
//!
//! A key is a short tuple of text and integer parts, in the shape its table declares
//! ([`Shape`]): ordered part by part, text by its bytes and integers by value — the order redb
//! keeps for its tuple keys, and PostgreSQL for `text COLLATE "C"` and `bigint` columns. The
//! tuples are the engines' native keys, so no store file or database is rewritten.

mod access;
pub(crate) mod codec;
mod dictionary;
mod evidence;
pub(crate) mod records;
mod retention;
mod scoped;
pub(crate) mod semantics;

use std::ops::Bound;

use crate::error::{Error, Result, StoreFaultKind};

/// The parts of a table's key, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(clippy::upper_case_acronyms)] // T for text, I for integer, one letter per part
pub(crate) enum Shape {
    /// One text.
    T,
    /// One integer.
    I,
    /// A text and an integer.
    TI,
    /// Two texts.
    TT,
    /// Three texts.
    TTT,
    /// Two texts and an integer.
    TTI,
}

impl Shape {
    /// How many parts a key of this shape has.
    pub(crate) fn len(self) -> usize {
        match self {
            Shape::T | Shape::I => 1,
            Shape::TI | Shape::TT => 2,
            Shape::TTT | Shape::TTI => 3,
        }
    }

    /// Whether part `index` is an integer.
    pub(crate) fn is_int(self, index: usize) -> bool {
        matches!((self, index), (Shape::I, 0) | (Shape::TI, 1) | (Shape::TTI, 2))
    }
}

macro_rules! tables {
    ($($variant:ident = $name:literal, $shape:ident;)*) => {
        /// Every table of a store, by the name its rows' checksums are made with.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub(crate) enum Table { $($variant,)* }

        impl Table {
            /// Every table, in one order (the order `warden doctor` reports them).
            pub(crate) const ALL: &'static [Table] = &[$(Table::$variant,)*];

            /// The table's name: the file's table, `warden_NAME` in PostgreSQL, and what the
            /// checksum of each row covers.
            pub(crate) fn name(self) -> &'static str {
                match self { $(Table::$variant => $name,)* }
            }

            /// Its place in [`Table::ALL`] (the declaration order), for engines that keep one
            /// slot per table.
            pub(crate) fn index(self) -> usize {
                self as usize
            }

            /// Its key's parts.
            pub(crate) fn shape(self) -> Shape {
                match self { $(Table::$variant => Shape::$shape,)* }
            }
        }
    };
}

tables! {
    Meta = "meta", T;
    Effects = "effects", T;
    Approvals = "approvals", T;
    ApprovalsByAction = "approvals_by_action", T;
    Receipts = "receipts", I;
    ReceiptIds = "receipt_ids", T;
    EffectReceipts = "effect_receipts", T;
    Events = "events", I;
    Snapshots = "snapshots", T;
    SnapshotIndex = "snapshot_index", TI;
    Delegations = "delegations", T;
    Revocations = "revocations", T;
    DelegationIndex = "delegation_index", TTT;
    DelegationChildren = "delegation_children", TT;
    DelegationCreators = "delegation_creators", TT;
    BudgetLedger = "budget_ledger", TTI;
    BudgetSums = "budget_sums", TTI;
    BudgetByEffect = "budget_by_effect", TI;
    MerkleNodes = "merkle_nodes", I;
    Checkpoints = "checkpoints", I;
    Policies = "policies", T;
    Anchors = "anchors", TI;
    Holds = "holds", T;
    PrunedOutcomes = "pruned_outcomes", T;
    ScopedGrants = "scoped_grants", T;
    ScopedGrantsByAction = "scoped_grants_by_action", TT;
}

/// One part of a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Part<'a> {
    /// Text, ordered by its bytes.
    Text(&'a str),
    /// An integer, ordered by value.
    Int(u64),
}

impl<'a> Part<'a> {
    /// The text, or a store fault naming what was expected.
    pub(crate) fn text(self, table: Table) -> Result<&'a str> {
        match self {
            Part::Text(text) => Ok(text),
            Part::Int(_) => Err(shape_fault(table)),
        }
    }

    /// The integer, or a store fault naming what was expected.
    pub(crate) fn int(self, table: Table) -> Result<u64> {
        match self {
            Part::Int(value) => Ok(value),
            Part::Text(_) => Err(shape_fault(table)),
        }
    }
}

/// A key part, owned: a stored key an engine keeps, or where a walk resumes.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Own {
    Text(String),
    Int(u64),
}

/// A key, owned.
pub(crate) fn own(key: &[Part<'_>]) -> Vec<Own> {
    key.iter()
        .map(|part| match part {
            Part::Text(text) => Own::Text((*text).to_owned()),
            Part::Int(value) => Own::Int(*value),
        })
        .collect()
}

/// The parts of an owned key.
pub(crate) fn parts(key: &[Own]) -> Vec<Part<'_>> {
    key.iter()
        .map(|part| match part {
            Own::Text(text) => Part::Text(text),
            Own::Int(value) => Part::Int(*value),
        })
        .collect()
}

/// A key given to an engine that does not have its table's shape: a defect of this build.
pub(crate) fn shape_fault(table: Table) -> Error {
    Error::store(
        StoreFaultKind::Defect,
        format!("a key of the wrong shape was given for the {} table (a defect of this build)", table.name()),
    )
}

/// Check that `key` has `table`'s shape.
pub(crate) fn check_shape(table: Table, key: &[Part<'_>]) -> Result<()> {
    let shape = table.shape();
    let fits = key.len() == shape.len()
        && key.iter().enumerate().all(|(index, part)| matches!(part, Part::Int(_)) == shape.is_int(index));
    if fits {
        Ok(())
    } else {
        Err(shape_fault(table))
    }
}

/// Which rows of a table a scan visits: those whose first parts equal `prefix`, with the part
/// after the prefix within `from`/`to` (bounds only apply when exactly one part follows the
/// prefix), in key order or, with `reverse`, backwards.
#[derive(Clone, Debug)]
pub(crate) struct Scan<'a> {
    pub prefix: &'a [Part<'a>],
    pub from: Bound<Part<'a>>,
    pub to: Bound<Part<'a>>,
    pub reverse: bool,
}

impl<'a> Scan<'a> {
    /// Every row, in key order.
    pub(crate) fn all() -> Scan<'a> {
        Scan { prefix: &[], from: Bound::Unbounded, to: Bound::Unbounded, reverse: false }
    }

    /// Every row under `prefix`, in key order.
    pub(crate) fn under(prefix: &'a [Part<'a>]) -> Scan<'a> {
        Scan { prefix, from: Bound::Unbounded, to: Bound::Unbounded, reverse: false }
    }

    /// The same rows, backwards.
    pub(crate) fn backwards(mut self) -> Scan<'a> {
        self.reverse = true;
        self
    }

    /// From `from` on (the part after the prefix).
    pub(crate) fn from(mut self, from: Bound<Part<'a>>) -> Scan<'a> {
        self.from = from;
        self
    }

    /// Up to `to` (the part after the prefix).
    pub(crate) fn to(mut self, to: Bound<Part<'a>>) -> Scan<'a> {
        self.to = to;
        self
    }

    /// Where a stored key lies relative to this scan, in key order: before the rows it visits,
    /// among them, or after them.
    pub(crate) fn position(&self, key: &[Part<'_>]) -> std::cmp::Ordering {
        use std::cmp::Ordering;
        let head = &key[..self.prefix.len().min(key.len())];
        match head.cmp(self.prefix) {
            Ordering::Equal => {}
            other => return other,
        }
        let Some(next) = key.get(self.prefix.len()) else { return Ordering::Equal };
        let below = match self.from {
            Bound::Unbounded => false,
            Bound::Included(from) => *next < from,
            Bound::Excluded(from) => *next <= from,
        };
        let above = match self.to {
            Bound::Unbounded => false,
            Bound::Included(to) => *next > to,
            Bound::Excluded(to) => *next >= to,
        };
        if below {
            Ordering::Less
        } else if above {
            Ordering::Greater
        } else {
            Ordering::Equal
        }
    }

    /// What a walk in this scan's direction does at `key`: `Some(true)` visit it, `Some(false)`
    /// pass it by (the rows it visits lie further on), `None` stop (they lie behind).
    pub(crate) fn step(&self, key: &[Part<'_>]) -> Option<bool> {
        use std::cmp::Ordering;
        match (self.position(key), self.reverse) {
            (Ordering::Equal, _) => Some(true),
            (Ordering::Less, false) | (Ordering::Greater, true) => Some(false),
            _ => None,
        }
    }

    /// Refuse bounds on a scan that leaves more than one part after its prefix (a defect).
    pub(crate) fn check(&self, table: Table) -> Result<()> {
        let bounded = !matches!((self.from, self.to), (Bound::Unbounded, Bound::Unbounded));
        if bounded && self.prefix.len() + 1 != table.shape().len() {
            return Err(Error::store(
                StoreFaultKind::Defect,
                format!(
                    "a bounded scan of the {} table must leave one key part after its prefix (a defect of this build)",
                    table.name()
                ),
            ));
        }
        Ok(())
    }
}

/// What a visitor tells a scan: go on, or stop here.
pub(crate) type Visit<'v> = dyn FnMut(&[Part<'_>], &[u8]) -> Result<bool> + 'v;

/// Reading rows inside one transaction of an engine.
pub(crate) trait RowRead {
    /// The value stored under `key`, as stored.
    fn get(&self, table: Table, key: &[Part<'_>]) -> Result<Option<Vec<u8>>>;

    /// Visit the rows `scan` selects, in its order, until the visitor answers `false`.
    fn scan(&self, table: Table, scan: &Scan<'_>, visit: &mut Visit<'_>) -> Result<()>;

    /// How many rows `table` holds.
    fn count(&self, table: Table) -> Result<u64>;

    /// The tables the engine's own directory lacks (a damaged file); empty where the engine
    /// keeps no directory of its own.
    fn missing_tables(&self) -> Result<Vec<Table>> {
        Ok(Vec::new())
    }

    /// Whether the engine lays out the pages its lookups go through (the file: a damaged page
    /// can hide a row, so the neighbours of a missing key are worth reading), or leaves them to
    /// a database that checks its own (PostgreSQL).
    fn lays_out_pages(&self) -> bool {
        false
    }

    /// The bytes the tables occupy, as the engine counts them.
    fn bytes_in_use(&self) -> Result<u64>;

    /// The largest integer key of a one-integer table (events, receipts), if any.
    fn last_int(&self, table: Table) -> Result<Option<u64>> {
        let mut last = None;
        self.scan(table, &Scan::all().backwards(), &mut |key, _| {
            last = key.first().copied().map(|part| part.int(table)).transpose()?;
            Ok(false)
        })?;
        Ok(last)
    }
}

/// How a row is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Put {
    /// Replace whatever is stored under the key.
    Replace,
    /// The key must hold nothing yet: a row there is an invariant fault, and the transaction
    /// writes nothing (the engine checks now, or makes its commit fail).
    New,
}

/// Writing rows inside one transaction of an engine; nothing is visible to others, nor
/// durable, before the engine commits the transaction.
pub(crate) trait RowWrite: RowRead {
    /// Write `value` under `key`.
    fn put(&mut self, table: Table, key: &[Part<'_>], value: &[u8], how: Put) -> Result<()>;

    /// Remove the row under `key`, if there is one (test support: Warden itself never
    /// removes a row).
    #[cfg_attr(not(any(test, feature = "test-exports")), allow(dead_code))]
    fn delete(&mut self, table: Table, key: &[Part<'_>]) -> Result<()>;
}

/// The fault when [`Put::New`] finds a row: named by table and key.
pub(crate) fn exists_fault(table: Table, key: &[Part<'_>]) -> Error {
    Error::store(
        StoreFaultKind::Damaged,
        format!(
            "the {} row {} already exists, and it is only ever written once; nothing was written. The store was \
         altered, or the random source repeated itself",
            table.name(),
            KeyView(key).shown_text()
        ),
    )
}

/// A key as the codec's checksum and the messages see it: the same bytes the typed keys of
/// earlier builds gave, so every stored checksum still matches.
pub(crate) struct KeyView<'k>(pub &'k [Part<'k>]);

fn push_text(out: &mut Vec<u8>, text: &str) {
    out.extend_from_slice(&(text.len() as u64).to_le_bytes());
    out.extend_from_slice(text.as_bytes());
}

impl KeyView<'_> {
    fn shown_text(&self) -> String {
        match self.0 {
            [Part::Text(text)] => {
                let mut shown: String = text.chars().take(200).collect();
                if shown.len() < text.len() {
                    shown.push('…');
                }
                format!("{shown:?}")
            }
            [Part::Int(value)] => value.to_string(),
            parts => {
                let shown: Vec<String> = parts
                    .iter()
                    .map(|part| match part {
                        Part::Text(text) => format!("{text:?}"),
                        Part::Int(value) => value.to_string(),
                    })
                    .collect();
                format!("({})", shown.join(", "))
            }
        }
    }
}

impl codec::KeyBytes for KeyView<'_> {
    fn bytes(&self) -> std::borrow::Cow<'_, [u8]> {
        use std::borrow::Cow;
        match self.0 {
            [Part::Text(text)] => Cow::Borrowed(text.as_bytes()),
            [Part::Int(value)] => Cow::Owned(value.to_le_bytes().to_vec()),
            // (text, integer): the text, a zero byte, the integer (the snapshot index's form).
            [Part::Text(text), Part::Int(value)] => {
                let mut out = text.as_bytes().to_vec();
                out.push(0);
                out.extend_from_slice(&value.to_le_bytes());
                Cow::Owned(out)
            }
            parts => {
                let mut out = Vec::new();
                for part in parts {
                    match part {
                        Part::Text(text) => push_text(&mut out, text),
                        Part::Int(value) => out.extend_from_slice(&value.to_le_bytes()),
                    }
                }
                Cow::Owned(out)
            }
        }
    }

    fn shown(&self) -> String {
        self.shown_text()
    }
}

#[cfg(test)]
mod tests {
    use super::codec_keys::*;
    use super::*;
    use crate::store::rows::codec::KeyBytes;

    #[test]
    fn every_shape_checks_the_bytes_and_shows_the_key_as_the_typed_keys_did() {
        let cases: Vec<(Vec<Part<'_>>, Vec<u8>, &str)> = vec![
            (vec![Part::Text("refund:pay_1")], b"refund:pay_1".to_vec(), "\"refund:pay_1\""),
            (vec![Part::Int(7)], 7u64.to_le_bytes().to_vec(), "7"),
            (vec![Part::Text("s"), Part::Int(2)], [b"s".as_slice(), &[0], &2u64.to_le_bytes()].concat(), "(\"s\", 2)"),
            (
                vec![Part::Text("a"), Part::Text("bc")],
                [len(1), b"a".to_vec(), len(2), b"bc".to_vec()].concat(),
                "(\"a\", \"bc\")",
            ),
            (
                vec![Part::Text("g"), Part::Text("m"), Part::Int(3)],
                [len(1), b"g".to_vec(), len(1), b"m".to_vec(), 3u64.to_le_bytes().to_vec()].concat(),
                "(\"g\", \"m\", 3)",
            ),
        ];
        for (key, bytes, shown) in cases {
            assert_eq!(KeyView(&key).bytes().as_ref(), bytes.as_slice(), "{key:?}");
            assert_eq!(KeyView(&key).shown(), shown, "{key:?}");
        }
        let long = "x".repeat(300);
        assert!(KeyView(&[Part::Text(&long)]).shown().ends_with("…\""));
    }

    #[test]
    fn a_scan_visits_its_prefix_within_its_bounds_at_the_instant_and_not_one_past() {
        let prefix = [Part::Text("g"), Part::Text("m")];
        let scan = Scan::under(&prefix).from(Bound::Included(Part::Int(2))).to(Bound::Excluded(Part::Int(5)));
        let key = |seq| [Part::Text("g"), Part::Text("m"), Part::Int(seq)];
        use std::cmp::Ordering::{Equal, Greater, Less};
        let at = |seq| scan.position(&key(seq));
        assert_eq!([at(1), at(2), at(4), at(5)], [Less, Equal, Equal, Greater]);
        assert_eq!(scan.position(&[Part::Text("g"), Part::Text("n"), Part::Int(3)]), Greater);
        assert_eq!(scan.position(&[Part::Text("a"), Part::Text("z"), Part::Int(3)]), Less);
        assert_eq!((scan.step(&key(1)), scan.step(&key(3)), scan.step(&key(5))), (Some(false), Some(true), None));
        let back = scan.clone().backwards();
        assert_eq!((back.step(&key(5)), back.step(&key(3)), back.step(&key(1))), (Some(false), Some(true), None));
        let excluded = Scan::all().from(Bound::Excluded(Part::Text("b")));
        assert_eq!((excluded.position(&[Part::Text("b")]), excluded.position(&[Part::Text("ba")])), (Less, Equal));
        assert!(Scan::all().from(Bound::Included(Part::Int(1))).check(Table::DelegationIndex).is_err());
        assert!(scan.check(Table::BudgetLedger).is_ok());
    }

    #[test]
    fn every_table_sits_at_its_index_in_all() {
        for (at, table) in Table::ALL.iter().enumerate() {
            assert_eq!(table.index(), at, "{table:?}");
        }
        assert_eq!(Table::ALL.len(), 26);
    }

    #[test]
    fn a_key_of_the_wrong_shape_is_refused() {
        assert!(check_shape(Table::Effects, &[Part::Text("k")]).is_ok());
        assert!(check_shape(Table::Effects, &[Part::Int(1)]).is_err());
        assert!(check_shape(Table::Receipts, &[Part::Int(1), Part::Int(2)]).is_err());
        assert!(check_shape(Table::BudgetLedger, &[Part::Text("g"), Part::Text("m"), Part::Text("3")]).is_err());
    }
}

#[cfg(test)]
mod codec_keys {
    pub(in crate::store) fn len(n: u64) -> Vec<u8> {
        n.to_le_bytes().to_vec()
    }
}
