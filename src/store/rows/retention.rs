//! The retention rows, written once for every engine: the holds (`holds`, by name), the marker of
//! the pruned prefix (the meta row `pruned`), what a prune keeps of each effect's last outcome
//! receipt (`pruned_outcomes`, by effect key) and the deletion a prune makes. The rule that says
//! whether a prune may go ahead is the kernel's (`evidence::retention::may_prune`); these only
//! read, check and delete what they are told, in the caller's transaction.

use std::ops::Bound;

use serde::{Deserialize, Serialize};

use super::access::{each, read, write, Writes};
use super::codec::{damaged, decode};
use super::{KeyView, Part, Put, RowRead, Scan, Table};
use crate::clock::Micros;
use crate::error::Result;
use crate::event::{Event, EventKind};
use crate::evidence::retention::{Hold, PrunedPrefix, PRUNE_ACTION};
use crate::receipt::StoredReceipt;
use crate::store::tables::META_PRUNED;

use Part::{Int, Text};

/// What a prune keeps of an effect's last outcome receipt when it deletes it: its seq, and a
/// receipt row whose document holds only the fields the FAILED cross-check reads (`effect_key`,
/// `result`, `execution`, `attempt`), with the deleted receipt's hash and executor result (what
/// a duplicate of a committed effect returns).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct PrunedOutcome {
    seq: u64,
    receipt: StoredReceipt,
}

/// The meta row as stored, unchecked (for the open check itself).
fn marker(rows: &dyn RowRead) -> Result<Option<PrunedPrefix>> {
    read(rows, Table::Meta, &[Text(META_PRUNED)])
}

/// The pruned prefix, if anything was pruned, checked against what it must agree with: the
/// prune's own receipt (kept, since it comes after the prefix) names the same checkpoint, seq
/// and hash; that checkpoint covers exactly the prefix and signed the root its frontier makes;
/// and the first receipt kept is the one after it. Anything else is damage, never a prefix.
pub(super) fn pruned(rows: &dyn RowRead) -> Result<Option<PrunedPrefix>> {
    let Some(prefix) = marker(rows)? else { return Ok(None) };
    let key = KeyView(&[Text(META_PRUNED)]);
    let fault = |why: String| damaged(Table::Meta.name(), &key, &why);
    let receipt: Option<StoredReceipt> = read(rows, Table::Receipts, &[Int(prefix.receipt_seq)])?;
    let document = receipt.and_then(|receipt| crate::canonical::parse_json(&receipt.document).ok());
    let says = |document: &serde_json::Value| {
        let arguments = &document["arguments"];
        document["action"].as_str() == Some(PRUNE_ACTION)
            && arguments["checkpoint"].as_u64() == Some(prefix.checkpoint)
            && arguments["through_seq"].as_u64() == Some(prefix.through_seq)
            && arguments["last_hash"].as_str() == Some(prefix.last_hash.as_str())
    };
    if !document.as_ref().is_some_and(says) {
        return Err(fault(format!(
            "names receipt {} as the prune's own, which is missing or records another prune",
            prefix.receipt_seq
        )));
    }
    let checkpoint: Option<crate::evidence::checkpoint::StoredCheckpoint> =
        read(rows, Table::Checkpoints, &[Int(prefix.checkpoint)])?;
    let frontier = crate::evidence::tree::Frontier::resume(prefix.through_seq, prefix.frontier.clone());
    let signed = checkpoint
        .as_ref()
        .filter(|cp| cp.size == prefix.through_seq)
        .and_then(|cp| crate::evidence::checkpoint::decode_hash(&cp.root));
    if signed.is_none() || frontier.map(|frontier| frontier.root()) != signed {
        return Err(fault(format!(
            "holds a frontier that does not make the root checkpoint {} signed over {} receipts",
            prefix.checkpoint, prefix.through_seq
        )));
    }
    let mut first = None;
    rows.scan(Table::Receipts, &Scan::all(), &mut |key, _| {
        first = key.first().copied().map(|part| part.int(Table::Receipts)).transpose()?;
        Ok(false)
    })?;
    if first != Some(prefix.through_seq + 1) {
        return Err(fault(format!(
            "says receipts 1..={} were pruned, but the first receipt kept is {first:?}",
            prefix.through_seq
        )));
    }
    Ok(Some(prefix))
}

/// The chain's start for its walk: the seq before the first receipt kept, and the hash it names.
pub(super) fn chain_start(rows: &dyn RowRead) -> Result<Option<(u64, String)>> {
    Ok(pruned(rows)?.map(|prefix| (prefix.through_seq, prefix.last_hash)))
}

/// How far receipts were pruned: 0 when nothing was.
pub(super) fn pruned_through(rows: &dyn RowRead) -> Result<u64> {
    Ok(pruned(rows)?.map_or(0, |prefix| prefix.through_seq))
}

/// The receipt at `seq` that the outcome index of `effect_key` names: the row itself, or once a
/// prune deleted it, what the prune kept of it. `None` when neither is there (damage for the
/// caller to name).
pub(super) fn outcome_receipt(rows: &dyn RowRead, effect_key: &str, seq: u64) -> Result<Option<StoredReceipt>> {
    outcome_receipt_within(rows, effect_key, seq, || pruned_through(rows))
}

/// `outcome_receipt`, with how far receipts were pruned given (asked only when the row is
/// missing), for a walk that checked the pruned prefix once.
pub(super) fn outcome_receipt_within(
    rows: &dyn RowRead,
    effect_key: &str,
    seq: u64,
    pruned_through: impl FnOnce() -> Result<u64>,
) -> Result<Option<StoredReceipt>> {
    if let Some(receipt) = read::<StoredReceipt>(rows, Table::Receipts, &[Int(seq)])? {
        return Ok(Some(receipt));
    }
    if seq > pruned_through()? {
        return Ok(None);
    }
    let kept: Option<PrunedOutcome> = read(rows, Table::PrunedOutcomes, &[Text(effect_key)])?;
    Ok(kept.filter(|kept| kept.seq == seq).map(|kept| kept.receipt))
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

/// The last reservation a prune deleted the event of, for the open check that looks for the
/// last reservation among the events (`semantics::check_last_reservation`).
pub(super) fn last_pruned_reservation(rows: &dyn RowRead) -> Result<Option<(u64, String)>> {
    Ok(marker(rows)?.and_then(|prefix| prefix.last_reservation))
}

/// The fields of an outcome receipt's document that the FAILED cross-check reads.
fn outcome_summary(document: &serde_json::Value) -> Option<(String, String)> {
    let effect_key = document["effect_key"].as_str()?;
    let result = document["result"].as_str()?;
    if !matches!(result, "committed" | "failed" | "ambiguous" | "observed") {
        return None;
    }
    let summary = serde_json::json!({
        "effect_key": effect_key,
        "result": result,
        "execution": document["execution"],
        "attempt": document["attempt"],
    });
    Some((effect_key.to_owned(), summary.to_string()))
}

impl Writes<'_> {
    pub(super) fn put_hold_row(&mut self, hold: &Hold) -> Result<()> {
        write(self.write_rows(), Table::Holds, &[Text(&hold.name)], hold, Put::Replace)
    }

    /// Delete receipts `from..=marker.through_seq` and every event up to
    /// `marker.events_through`, keep what the FAILED cross-check and a duplicate need of each
    /// effect's last outcome receipt among them, and write `marker` (with the last reservation
    /// whose event went): the receipts removed. A receipt missing from the range is damage and
    /// nothing is deleted (the caller's transaction is dropped). The receipt ids and the
    /// effects' outcome index are kept: a re-sent outcome still finds its receipt id, and an
    /// effect whose outcome receipt is gone still shows it had one.
    pub(super) fn prune_rows(&mut self, marker: &mut PrunedPrefix, from: u64) -> Result<u64> {
        // Each receipt's seq, and for an outcome receipt what would be kept of it: a few dozen
        // bytes a receipt held, never the documents.
        let mut receipts: Vec<(u64, Option<(String, PrunedOutcome)>)> = Vec::new();
        let scan = Scan::all().from(Bound::Included(Int(from))).to(Bound::Included(Int(marker.through_seq)));
        each::<StoredReceipt>(self.read_rows(), Table::Receipts, &scan, |key, receipt| {
            let seq = key.first().copied().map(|part| part.int(Table::Receipts)).transpose()?.unwrap_or_default();
            let expected = from + receipts.len() as u64;
            if seq != expected {
                return Err(damaged(
                    Table::Receipts.name(),
                    &KeyView(&[Int(expected)]),
                    "is missing from the prefix to prune",
                ));
            }
            let document = crate::canonical::parse_json(&receipt.document)
                .map_err(|_| damaged(Table::Receipts.name(), &KeyView(key), "holds a document that is not JSON"))?;
            let outcome = outcome_summary(&document).map(|(effect_key, summary)| {
                let receipt =
                    StoredReceipt { document: summary, hash: receipt.hash, executor_result: receipt.executor_result };
                (effect_key, PrunedOutcome { seq, receipt })
            });
            receipts.push((seq, outcome));
            Ok(true)
        })?;
        let expected = marker.through_seq.saturating_add(1).saturating_sub(from);
        if receipts.len() as u64 != expected {
            let missing = from + receipts.len() as u64;
            return Err(damaged(
                Table::Receipts.name(),
                &KeyView(&[Int(missing)]),
                "is missing from the prefix to prune",
            ));
        }
        // Every read first, then every write: an engine that buffers writes (PostgreSQL) sends
        // them in one go instead of before each read. What is kept of an outcome receipt is kept
        // only while the effect's outcome index still names it (a later outcome supersedes it).
        let mut kept = Vec::new();
        for (seq, outcome) in &mut receipts {
            if let Some((effect_key, outcome)) = outcome.take() {
                if read::<u64>(self.read_rows(), Table::EffectReceipts, &[Text(effect_key.as_str())])? == Some(*seq) {
                    kept.push((effect_key, outcome));
                }
            }
        }
        let mut events = Vec::new();
        each::<Event>(
            self.read_rows(),
            Table::Events,
            &Scan::all().to(Bound::Included(Int(marker.events_through))),
            |_, event| {
                if event.kind == EventKind::EFFECT_RESERVED {
                    if let Some(key) = &event.effect_key {
                        marker.last_reservation = Some((event.event_id, key.clone()));
                    }
                }
                events.push(event.event_id);
                Ok(true)
            },
        )?;
        for (effect_key, outcome) in &kept {
            write(self.write_rows(), Table::PrunedOutcomes, &[Text(effect_key)], outcome, Put::Replace)?;
        }
        for (seq, _) in &receipts {
            self.write_rows().delete(Table::Receipts, &[Int(*seq)])?;
        }
        for id in events {
            self.write_rows().delete(Table::Events, &[Int(id)])?;
        }
        write(self.write_rows(), Table::Meta, &[Text(META_PRUNED)], &*marker, Put::Replace)?;
        Ok(receipts.len() as u64)
    }
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

/// A check for `warden doctor`'s walk of `pruned_outcomes`: the effect it is kept for has a row.
pub(super) fn check_pruned_outcome(rows: &dyn RowRead, key: &[Part<'_>], bytes: &[u8]) -> Result<()> {
    decode::<PrunedOutcome>(Table::PrunedOutcomes.name(), &KeyView(key), bytes)?;
    match key {
        [Text(effect_key)] if rows.get(Table::Effects, &[Text(effect_key)])?.is_some() => Ok(()),
        _ => Err(damaged(Table::PrunedOutcomes.name(), &KeyView(key), "is kept for an effect that has no row")),
    }
}
