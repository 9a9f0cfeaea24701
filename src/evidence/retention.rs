//! Retention: deleting a prefix of the receipts (and the events of its time) once a checkpoint
//! covering it has left the box, and the holds that forbid it. Pure: the records and the one
//! rule that says whether a prune may go ahead; the kernel reads the rows and writes them in one
//! transaction (`kernel::retention`), the CLI is `warden prune` and `warden hold`.
//!
//! What a prune keeps is what lets everything after it be proved: the [`PrunedPrefix`] marker
//! holds the checkpoint it pruned through, the hash of the last receipt it deleted (the next
//! receipt names it as `prev_hash`) and the Merkle tree's complete subtrees at that size (every
//! later root, inclusion and consistency proof is computed from them and the receipts that
//! remain). The effect rows stay: at most once does not depend on the receipts.

use serde::{Deserialize, Serialize};

use crate::clock::{render, Micros};
use crate::error::{Error, InvalidInputKind, Result};

/// The agent every retention receipt names: the store's own administration.
pub const RETENTION_AGENT: &str = "warden";

/// The action names of the receipts retention writes.
pub const PRUNE_ACTION: &str = "warden.prune";
/// The receipt of a hold placed.
pub const HOLD_PLACE_ACTION: &str = "warden.hold.place";
/// The receipt of a hold released.
pub const HOLD_RELEASE_ACTION: &str = "warden.hold.release";

/// The longest hold name.
pub const MAX_HOLD_NAME: usize = 64;

/// The first part of the store that a prune removed: receipts `1..=through_seq`, events
/// `1..=events_through`. Kept as the meta row `pruned`; a later prune moves it forward.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrunedPrefix {
    /// The checkpoint pruned through (its size is `through_seq`).
    pub checkpoint: u64,
    /// The last receipt removed.
    pub through_seq: u64,
    /// That receipt's hash (`sha256:…`), which the first receipt left names as `prev_hash`.
    pub last_hash: String,
    /// The Merkle tree's complete subtrees at `through_seq`, largest first: (level, hash).
    pub frontier: Vec<(u8, [u8; 32])>,
    /// The last event removed (0: none).
    pub events_through: u64,
    /// The last `EFFECT_RESERVED` event removed, (event id, effect key): what the open check
    /// that looks for the last reservation among the events falls back to.
    #[serde(default)]
    pub last_reservation: Option<(u64, String)>,
    /// The seq of the prune's own receipt.
    pub receipt_seq: u64,
    /// When.
    pub at: Micros,
    /// Who pruned.
    pub by: String,
    /// Why.
    pub reason: String,
}

/// A hold: while one stands, nothing is pruned. Released holds are kept, with who released
/// them and why, so `warden hold list --all` shows the history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hold {
    /// Its name (`[A-Za-z0-9._:-]`, at most [`MAX_HOLD_NAME`]).
    pub name: String,
    /// Who placed it.
    pub placed_by: String,
    /// Why.
    pub reason: String,
    /// When.
    pub placed_at: Micros,
    /// Set once it is released.
    pub released: Option<Release>,
}

/// How a hold ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Release {
    /// Who released it.
    pub by: String,
    /// Why.
    pub reason: String,
    /// When.
    pub at: Micros,
}

impl Hold {
    /// Whether it still stands.
    pub fn stands(&self) -> bool {
        self.released.is_none()
    }

    /// One line for a refusal or a listing: name, who, when, why.
    pub fn describe(&self) -> String {
        format!("{:?} placed by {} at {} ({})", self.name, self.placed_by, render(self.placed_at), self.reason)
    }
}

/// A hold name: 1 to [`MAX_HOLD_NAME`] of letters, digits, `.`, `_`, `:` and `-`.
pub fn check_hold_name(name: &str) -> Result<()> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-');
    if name.is_empty() || name.len() > MAX_HOLD_NAME || !name.chars().all(allowed) {
        return Err(Error::invalid_at(
            InvalidInputKind::Malformed,
            "name",
            format!("a hold name is 1 to {MAX_HOLD_NAME} letters, digits, '.', '_', ':' or '-'; {name:?} is not"),
        ));
    }
    Ok(())
}

/// What a prune found in the store, for [`may_prune`].
#[derive(Debug, Clone, Copy)]
pub struct PruneFacts<'a> {
    /// The checkpoint asked for, with its size.
    pub checkpoint: u64,
    /// Its size.
    pub size: u64,
    /// The receipts already pruned (0: none).
    pub pruned_through: u64,
    /// Every hold that stands.
    pub standing: &'a [Hold],
    /// The newest checkpoint numbered `checkpoint` or later that a sink anchored, if any.
    pub anchored: Option<u64>,
}

/// Whether the prefix through `facts.checkpoint` may be pruned: no hold stands, the
/// checkpoint covers receipts not pruned yet, and it or a later checkpoint (which covers it: a
/// verifier checks their consistency) was anchored. The refusal names what to do.
pub fn may_prune(facts: &PruneFacts<'_>) -> std::result::Result<(), Error> {
    if let Some(hold) = facts.standing.first() {
        let more = match facts.standing.len() {
            1 => String::new(),
            n => format!(" (and {} more)", n - 1),
        };
        return Err(Error::invalid(
            InvalidInputKind::State,
            format!(
            "nothing was pruned: the hold {}{more} stands; `warden hold release NAME --by NAME --reason TEXT` ends it",
            hold.describe()
        ),
        ));
    }
    if facts.size <= facts.pruned_through {
        return Err(Error::invalid(
            InvalidInputKind::State,
            format!(
                "nothing was pruned: checkpoint {} covers {} receipts, and the first {} are pruned already",
                facts.checkpoint, facts.size, facts.pruned_through
            ),
        ));
    }
    if facts.anchored.is_none() {
        return Err(Error::invalid(
            InvalidInputKind::State,
            format!(
                "nothing was pruned: neither checkpoint {} nor any later one was anchored, so nothing outside this \
             machine vouches for the receipts it would delete. Configure `evidence.anchors` and run `warden anchor`",
                facts.checkpoint
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hold(name: &str) -> Hold {
        Hold { name: name.into(), placed_by: "ada".into(), reason: "litigation".into(), placed_at: 0, released: None }
    }

    #[test]
    fn hold_names_are_refused_by_length_and_by_character() {
        let long = "a".repeat(MAX_HOLD_NAME);
        for (name, ok) in [
            ("case-2026:17", true),
            ("a", true),
            ("A.b_c", true),
            (long.as_str(), true),
            ("", false),
            ("two words", false),
            ("tab\t", false),
            ("é", false),
            ("a/b", false),
        ] {
            assert_eq!(check_hold_name(name).is_ok(), ok, "{name:?}");
        }
        assert!(check_hold_name(&"a".repeat(MAX_HOLD_NAME + 1)).is_err());
    }

    #[test]
    fn a_prune_is_refused_under_a_hold_before_anything_else_and_names_it() {
        let standing = [hold("case-1"), hold("case-2")];
        let facts = PruneFacts { checkpoint: 3, size: 10, pruned_through: 0, standing: &standing, anchored: None };
        let error = may_prune(&facts).unwrap_err().to_string();
        assert!(error.contains("\"case-1\" placed by ada") && error.contains("(and 1 more)"), "{error}");
        let one = [hold("case-1")];
        let error = may_prune(&PruneFacts { standing: &one, anchored: Some(3), ..facts }).unwrap_err().to_string();
        assert!(error.contains("\"case-1\"") && !error.contains("more"), "{error}");
    }

    #[test]
    fn a_prune_needs_new_receipts_and_an_anchor_at_or_after_its_checkpoint() {
        let base = PruneFacts { checkpoint: 3, size: 10, pruned_through: 0, standing: &[], anchored: Some(3) };
        assert!(may_prune(&base).is_ok());
        assert!(may_prune(&PruneFacts { pruned_through: 9, ..base }).is_ok(), "one receipt past the prefix");
        let error = may_prune(&PruneFacts { pruned_through: 10, ..base }).unwrap_err().to_string();
        assert!(error.contains("pruned already"), "{error}");
        let error = may_prune(&PruneFacts { anchored: None, ..base }).unwrap_err().to_string();
        assert!(error.contains("was anchored"), "{error}");
        let mut released = hold("old");
        released.released = Some(Release { by: "bob".into(), reason: "settled".into(), at: 1 });
        assert!(!released.stands() && hold("x").stands());
    }
}
