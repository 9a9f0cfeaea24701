//! Absence is proven, not assumed. A lookup that finds no effect row is not yet evidence that
//! the key is new: a damaged page can hide a row (a flipped key-length byte in the effects leaf
//! makes the lookup of `op:refund-7` miss a row now stored as `op:refund-`), and a row's own
//! checksum cannot help when no row is found to check. So before a fresh reservation the kernel
//! asks the store what stands around the key (`WriteTables::absence_witnesses`, one read in the
//! same transaction, nothing written) and decides here, for both backends:
//!
//! - an outcome receipt indexed for the key (`effect_receipts`) means the key had an effect:
//!   receipts without an effect row are damage;
//! - an effect row next to the key that fails its check under its own key is a damaged page
//!   around it (the key may be the row that moved);
//! - a neighbour stored under the very key means the lookup missed a row the table holds.
//!
//! Each is a store fault naming the key and what was found, never "new".

use crate::effect::EffectRecord;
use crate::error::{Error, Result, StoreFaultKind};
use crate::store::{AbsenceWitnesses, WriteTx};

/// The effect row a reservation decides from: the row, or `None` once the key's absence is
/// proven by the witnesses around it.
pub(super) fn effect_to_reserve(tx: &WriteTx<'_>, effect_key: &str) -> Result<Option<EffectRecord>> {
    if let Some(record) = tx.effect(effect_key)? {
        return Ok(Some(record));
    }
    let witnesses = tx.absence_witnesses(effect_key)?;
    proven_absent(effect_key, &witnesses)?;
    Ok(None)
}

/// The rule: `Ok` only when nothing around `effect_key` says it was ever reserved.
pub(crate) fn proven_absent(effect_key: &str, witnesses: &AbsenceWitnesses) -> Result<()> {
    if let Some(seq) = witnesses.outcome_receipt {
        return Err(hidden(
            effect_key,
            &format!(
                "the outcome index names receipt {seq} for it, so it had an effect: receipts without an effect row"
            ),
        ));
    }
    for neighbour in &witnesses.neighbours {
        if neighbour.key == effect_key {
            return Err(hidden(
                effect_key,
                "the effects table still lists a row under that key when walked in order: the lookup missed it",
            ));
        }
        if let Some(damage) = &neighbour.damage {
            return Err(hidden(
                effect_key,
                &format!("the effect row next to it, stored as {}, is damaged ({damage})", shown(&neighbour.key)),
            ));
        }
    }
    Ok(())
}

fn shown(key: &str) -> String {
    let mut text: String = key.chars().take(200).collect();
    if text.len() < key.len() {
        text.push('…');
    }
    format!("{text:?}")
}

fn hidden(effect_key: &str, found: &str) -> Error {
    Error::store(StoreFaultKind::Damaged, format!(
        "the store file is damaged: no effects row was found for {}, but {found}; the key is not treated as new and \
         nothing was reserved. Run `warden doctor` on the store, and restore it from a backup if the damage is confirmed",
        shown(effect_key)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Neighbour;

    fn neighbour(key: &str, damage: Option<&str>) -> Neighbour {
        Neighbour { key: key.into(), damage: damage.map(str::to_owned) }
    }

    #[test]
    fn a_key_is_new_only_when_no_witness_contradicts_it() {
        let clean = AbsenceWitnesses {
            outcome_receipt: None,
            neighbours: vec![neighbour("op:refund-6", None), neighbour("op:refund-8", None)],
        };
        assert!(proven_absent("op:refund-7", &clean).is_ok());
        assert!(proven_absent("op:refund-7", &AbsenceWitnesses::default()).is_ok());
        let cases = [
            (AbsenceWitnesses { outcome_receipt: Some(4), neighbours: vec![] }, "receipt 4"),
            (
                AbsenceWitnesses {
                    outcome_receipt: None,
                    neighbours: vec![neighbour("op:refund-", Some("bad layout"))],
                },
                "\"op:refund-\"",
            ),
            (AbsenceWitnesses { outcome_receipt: None, neighbours: vec![neighbour("op:refund-7", None)] }, "missed"),
        ];
        for (witnesses, says) in cases {
            let error = proven_absent("op:refund-7", &witnesses).expect_err(says);
            let text = error.to_string();
            assert!(matches!(error, Error::Store(_)), "{text}");
            assert!(
                text.contains("\"op:refund-7\"") && text.contains(says) && text.contains("warden doctor"),
                "{text}"
            );
        }
    }
}
