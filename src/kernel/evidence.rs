//! Checkpoints and proofs: the kernel gathers what a checkpoint states from one read snapshot
//! (so the writer, and every action behind it, never waits for the scan of the open effects),
//! the caller signs it outside the store, and one write transaction appends it after checking
//! the signature, the root and the order against the store's own rows (caching the Merkle
//! nodes it computed). Reads compute proofs from one read snapshot.

use super::ops::{ProofAsk, Read, ReadReply, Write, WriteReply};
use super::{ops::unexpected, Kernel};
use crate::clock::{render, Micros};
use crate::error::{Error, InvalidInputKind, Result, StoreFaultKind};
use crate::evidence::anchor::SignedCheckpoint;
use crate::evidence::anchoring::{self, AnchorTry, SinkProvider, SinkState, StoredAnchor};
use crate::evidence::checkpoint::{self, Basis, ClosedWithoutReceipt, OpenEffect, StoredCheckpoint};
use crate::evidence::key::{open_note, NoteRefusal, NoteSigner, NoteVerifier};
use crate::evidence::retention::PrunedPrefix;
use crate::evidence::settings::Due;
use crate::evidence::tree::{LogRows, Tree};
use crate::store::{EvidenceReads, ReadTables, ReadTx, Role, WriteTx};

/// The rows of a transaction, as the tree reads them, and what a prune kept of the receipts it
/// deleted.
pub(super) struct Rows<'a> {
    tx: &'a dyn EvidenceReads,
    pruned: Option<PrunedPrefix>,
}

impl<'a> Rows<'a> {
    pub(super) fn of(tx: &'a dyn EvidenceReads) -> Result<Rows<'a>> {
        Ok(Rows { tx, pruned: tx.pruned()? })
    }

    /// The tree of the first `size` receipts, resuming from the pruned prefix's frontier.
    pub(super) fn tree(&self, size: u64) -> Tree<'_> {
        let tree = Tree::new(self, size);
        match &self.pruned {
            Some(prefix) => tree.resuming(prefix.through_seq, &prefix.frontier),
            None => tree,
        }
    }
}

impl LogRows for Rows<'_> {
    fn receipt_document(&self, seq: u64) -> Result<Option<String>> {
        if let Some(prefix) = self.pruned.as_ref().filter(|prefix| seq <= prefix.through_seq) {
            return Err(Error::NotFound(format!(
                "receipt {seq} was pruned (the first {} receipts were, through checkpoint {}): only trees of {} receipts \
                 or more, and proofs about receipts after them, can be computed",
                prefix.through_seq, prefix.checkpoint, prefix.through_seq
            )));
        }
        self.tx.receipt_document(seq)
    }
    fn cached_node(&self, level: u8, index: u64) -> Result<Option<[u8; 32]>> {
        self.tx.cached_node(level, index)
    }
}

/// The root of the first `size` receipts, caching every complete subtree it computed.
fn cached_root(tx: &mut WriteTx<'_>, size: u64) -> Result<[u8; 32]> {
    let (root, made) = {
        let rows = Rows::of(&*tx)?;
        let tree = rows.tree(size);
        (tree.root()?, tree.made())
    };
    for (level, index, hash) in made {
        tx.cache_node(level, index, hash)?;
    }
    Ok(root)
}

/// A new log's origin: `warden/` and 16 random hex digits.
fn new_origin() -> Result<String> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes)
        .map_err(|e| Error::store(StoreFaultKind::Io, format!("no randomness for a log origin: {e}")))?;
    Ok(format!("warden/{}", hex::encode(bytes)))
}

/// The previous checkpoint's open effects that are not open now and have no closing receipt
/// after it, with what their rows say now.
fn closed_without_receipt(
    tx: &dyn ReadTables,
    last: &StoredCheckpoint,
    open: &[OpenEffect],
    size: u64,
) -> Result<Vec<ClosedWithoutReceipt>> {
    let before: checkpoint::Companion = serde_json::from_str(&last.companion).map_err(|e| {
        Error::store(
            StoreFaultKind::Damaged,
            format!("checkpoint {}'s companion document does not parse ({e}); the store was altered", last.number),
        )
    })?;
    let mut waiting: Vec<&OpenEffect> = before
        .open
        .iter()
        .filter(|was| !open.iter().any(|now| now.effect_key == was.effect_key && now.attempt == was.attempt))
        .collect();
    let mut seq = last.size;
    while !waiting.is_empty() && seq < size {
        seq += 1;
        let document = tx.receipt_document(seq)?.ok_or_else(|| {
            Error::store(
                StoreFaultKind::Damaged,
                format!("receipt {seq} is missing from the chain; run `warden doctor`"),
            )
        })?;
        let parsed = crate::canonical::parse_json(&document).map_err(|e| {
            Error::store(StoreFaultKind::Damaged, format!("receipt {seq} does not parse ({e}); run `warden doctor`"))
        })?;
        if let Some((key, attempt)) = checkpoint::closes(&parsed) {
            waiting.retain(|was| !(was.effect_key == key && was.attempt == attempt));
        }
    }
    let mut out = Vec::new();
    for was in waiting {
        let row = tx.effect(&was.effect_key)?.ok_or_else(|| {
            Error::store(
                StoreFaultKind::Damaged,
                format!(
                    "effect {:?} was open at checkpoint {} and has no row now; the store was altered",
                    was.effect_key, last.number
                ),
            )
        })?;
        out.push(ClosedWithoutReceipt {
            effect_key: was.effect_key.clone(),
            attempt: was.attempt,
            state: row.state.as_str().to_owned(),
            resolved_by: row.resolved_by,
        });
    }
    Ok(out)
}

pub(super) fn gather(tx: &ReadTx<'_>, origin: Option<&str>, due: Option<&Due>, now: Micros) -> Result<ReadReply> {
    let last = tx.last_checkpoint()?;
    let size = tx.chain_size()?;
    if let Some(due) = due {
        if !due.is_due(size, last.as_ref().map(|last| (last.size, last.time)), now) {
            return Ok(ReadReply::NotDue);
        }
    }
    let origin = match (origin, &last) {
        (Some(asked), Some(last)) if asked != last.origin => {
            return Ok(ReadReply::Refused(Error::invalid_at(
                InvalidInputKind::Conflict,
                "origin",
                format!("this store's log is {:?}; a checkpoint cannot name another origin ({asked:?})", last.origin),
            )))
        }
        (Some(asked), _) => asked.to_owned(),
        (None, Some(last)) => last.origin.clone(),
        (None, None) => new_origin()?,
    };
    if let Some(last) = &last {
        if size < last.size {
            return Err(Error::store(StoreFaultKind::Damaged, format!(
                "the chain holds {size} receipts but checkpoint {} was signed at {}; receipts were removed. Run `warden doctor`",
                last.number, last.size
            )));
        }
    }
    let root = Rows::of(tx)?.tree(size).root()?;
    let open = tx.open_effects()?;
    let closed_without_receipt = match &last {
        Some(last) => closed_without_receipt(tx, last, &open, size)?,
        None => Vec::new(),
    };
    let number = last.as_ref().map_or(1, |last| last.number + 1);
    Ok(ReadReply::Basis(Box::new(Basis { number, origin, size, root, time: now, open, closed_without_receipt })))
}

/// Why `row` may not follow `last`, if it may not.
fn out_of_order(row: &StoredCheckpoint, last: Option<&StoredCheckpoint>, size: u64) -> Option<String> {
    let expected = last.map_or(1, |last| last.number + 1);
    if row.number != expected {
        return Some(format!(
            "checkpoint {} was made meanwhile; this one was gathered as {}. Make it again",
            expected.saturating_sub(1),
            row.number
        ));
    }
    if row.size > size {
        return Some(format!("it covers {} receipts but the chain holds {size}", row.size));
    }
    let last = last?;
    if row.origin != last.origin {
        return Some(format!("its origin {:?} is not the log's ({:?})", row.origin, last.origin));
    }
    if row.size < last.size {
        return Some(format!("it covers {} receipts, fewer than checkpoint {} ({})", row.size, last.number, last.size));
    }
    if row.time < last.time {
        return Some(format!("its time is before checkpoint {}'s", last.number));
    }
    None
}

/// Why the signed note of `row` does not state what `row` says, if it does not.
fn misstated(row: &StoredCheckpoint, root: [u8; 32]) -> Option<String> {
    let verifier = match NoteVerifier::parse(&row.verifier) {
        Ok(verifier) => verifier,
        Err(error) => return Some(error.to_string()),
    };
    let text = match open_note(row.note.as_bytes(), &[verifier]) {
        Ok(text) => text,
        Err(NoteRefusal::Malformed(why)) => return Some(format!("its note is malformed: {why}")),
        Err(NoteRefusal::Untrusted(_) | NoteRefusal::BadSignature(_)) => {
            return Some("its signature does not verify with the key it names".into())
        }
    };
    let body = match checkpoint::parse(&text) {
        Ok(body) => body,
        Err(why) => return Some(format!("its text is not a checkpoint: {why}")),
    };
    let stated = [
        (body.origin == row.origin, "origin"),
        (body.size == row.size, "size"),
        (body.root == root, "root (the store's receipts hash to another)"),
        (body.time == render(row.time), "time"),
        (body.companion_hash == checkpoint::companion_hash(&row.companion), "companion document"),
    ];
    stated.iter().find(|(agrees, _)| !agrees).map(|(_, what)| format!("its note states another {what}"))
}

pub(super) fn apply_append(tx: &mut WriteTx<'_>, row: &StoredCheckpoint) -> Result<WriteReply> {
    let last = tx.last_checkpoint()?;
    let size = tx.chain_size()?;
    if let Some(why) = out_of_order(row, last.as_ref(), size) {
        return Ok(WriteReply::Refused(Error::invalid(
            InvalidInputKind::Conflict,
            format!("checkpoint not appended: {why}"),
        )));
    }
    let root = cached_root(tx, row.size)?;
    if let Some(why) = misstated(row, root) {
        return Ok(WriteReply::Refused(Error::invalid(
            InvalidInputKind::Conflict,
            format!("checkpoint not appended: {why}"),
        )));
    }
    tx.append_checkpoint(row)?;
    Ok(WriteReply::Checkpoint(Box::new(row.clone())))
}

pub(super) fn apply_anchor(tx: &mut WriteTx<'_>, row: &StoredAnchor) -> Result<WriteReply> {
    if tx.checkpoint(row.checkpoint)?.is_none() {
        return Ok(WriteReply::Refused(Error::NotFound(format!(
            "there is no checkpoint {} to record an anchor of",
            row.checkpoint
        ))));
    }
    if let Some(stored) = tx.anchor(&row.sink, row.checkpoint)? {
        if stored.anchored() {
            return Ok(WriteReply::Anchor(Box::new(stored)));
        }
    }
    tx.put_anchor(row)?;
    Ok(WriteReply::Anchor(Box::new(row.clone())))
}

pub(super) fn anchor_states(rx: &ReadTx<'_>, sinks: &[String]) -> Result<Vec<SinkState>> {
    let newest = rx.last_checkpoint()?.map(|last| last.number);
    let mut states = Vec::with_capacity(sinks.len());
    for sink in sinks {
        let last_anchored = rx.last_anchored(sink)?;
        let mut waiting = Vec::new();
        if let Some(from) = anchoring::waiting_from(last_anchored, newest) {
            for checkpoint in rx.checkpoints(from, anchoring::MAX_PER_PASS)? {
                let row = rx.anchor(sink, checkpoint.number)?;
                waiting.push((checkpoint, row));
            }
        }
        states.push(SinkState { sink: sink.clone(), last_anchored, waiting });
    }
    Ok(states)
}

/// Keep a policy under its hash (the store checks the bytes hash to it, and never overwrites).
pub(super) fn apply_keep_policy(tx: &mut WriteTx<'_>, policy_hash: &str, canonical: &[u8]) -> Result<WriteReply> {
    tx.keep_policy(policy_hash, canonical)?;
    Ok(WriteReply::Done)
}

pub(super) fn run_proof(rx: &ReadTx<'_>, ask: &ProofAsk) -> Result<ReadReply> {
    let size = match ask {
        ProofAsk::Root { size } | ProofAsk::Inclusion { size, .. } | ProofAsk::Frontier { size } => *size,
        ProofAsk::Consistency { new, .. } => *new,
    };
    let chain = rx.chain_size()?;
    if size > chain {
        return Err(Error::NotFound(format!("the chain holds {chain} receipts, not {size}")));
    }
    let rows = Rows::of(rx)?;
    let tree = rows.tree(size);
    let hashes = match ask {
        ProofAsk::Root { .. } => vec![tree.root()?],
        ProofAsk::Inclusion { seq, .. } => {
            let index = seq
                .checked_sub(1)
                .ok_or_else(|| Error::invalid_at(InvalidInputKind::OutOfRange, "seq", "receipt seqs start at 1"))?;
            tree.inclusion(index)?
        }
        ProofAsk::Consistency { old, .. } => tree.consistency(*old)?,
        ProofAsk::Frontier { .. } => tree.frontier()?.into_iter().map(|(_, hash)| hash).collect(),
    };
    Ok(ReadReply::Hashes(hashes))
}

impl crate::evidence::auto::Log for super::WeakKernel {
    fn checkpoint_if_due(
        &self,
        signer: &NoteSigner,
        origin: Option<&str>,
        due: &Due,
    ) -> Option<Result<Option<StoredCheckpoint>>> {
        let kernel = self.upgrade()?;
        // On a file store the owner process makes them (another takes over when it goes): the
        // other processes' looks would only be more reads for the owner to serve, and more
        // checkpoints gathered to be dropped.
        if matches!(kernel.store().role(), Ok(Role::Client { .. } | Role::ReadOnly)) {
            return Some(Ok(None));
        }
        Some(kernel.checkpoint_if_due(signer, origin, due))
    }

    fn anchor_pending(&self, providers: &[SinkProvider]) -> Option<Result<Vec<AnchorTry>>> {
        let kernel = self.upgrade()?;
        if matches!(kernel.store().role(), Ok(Role::Client { .. } | Role::ReadOnly)) {
            return Some(Ok(Vec::new()));
        }
        Some(kernel.anchor_pending(providers, false))
    }
}

impl Kernel {
    /// Make, sign and append the next checkpoint: what it states is gathered in one write
    /// transaction, signed here with `signer` (which never reaches the store), and appended in a
    /// second one that checks the signature and recomputes the root. `origin` names the log on
    /// its first checkpoint (default `warden/<random>`); later ones must repeat it or omit it.
    pub fn checkpoint(&self, signer: &NoteSigner, origin: Option<&str>) -> Result<StoredCheckpoint> {
        self.sign_checkpoint(signer, origin, None)?.ok_or_else(|| unexpected("checkpoint"))
    }

    /// The automatic checkpoint: like [`Kernel::checkpoint`], but only when one is `due` after
    /// the last (`None` when not, or when another handle appended the same one first). Whether
    /// one is due is the first thing its read looks at, so a quiet store costs one small read
    /// and no write.
    pub fn checkpoint_if_due(
        &self,
        signer: &NoteSigner,
        origin: Option<&str>,
        due: &Due,
    ) -> Result<Option<StoredCheckpoint>> {
        self.sign_checkpoint(signer, origin, Some(*due))
    }

    fn sign_checkpoint(
        &self,
        signer: &NoteSigner,
        origin: Option<&str>,
        due: Option<Due>,
    ) -> Result<Option<StoredCheckpoint>> {
        let ask = Read::CheckpointBasis { origin: origin.map(str::to_owned), due };
        let basis = match self.guarded(|kernel, _| kernel.read(&ask))? {
            ReadReply::Basis(basis) => *basis,
            ReadReply::NotDue if due.is_some() => return Ok(None),
            ReadReply::Refused(refusal) => return Err(refusal),
            _ => return Err(unexpected("checkpoint")),
        };
        let (companion, text) = checkpoint::texts(&basis)?;
        let note = signer.sign_note(&text)?;
        let row = StoredCheckpoint {
            number: basis.number,
            origin: basis.origin,
            size: basis.size,
            root: base64::Engine::encode(&base64::prelude::BASE64_STANDARD, basis.root),
            time: basis.time,
            note,
            companion,
            verifier: signer.verifier().encoded(),
        };
        let number = row.number;
        match self.guarded(|kernel, _| kernel.write(Write::AppendCheckpoint(Box::new(row))))? {
            WriteReply::Checkpoint(row) => Ok(Some(*row)),
            // An automatic checkpoint another handle made first: nothing to do.
            WriteReply::Refused(_)
                if due.is_some() && self.checkpoint_numbered(None)?.is_some_and(|last| last.number >= number) =>
            {
                Ok(None)
            }
            WriteReply::Refused(refusal) => Err(refusal),
            _ => Err(unexpected("checkpoint")),
        }
    }

    /// Send each sink the checkpoints waiting for it (those never tried, and failed ones whose
    /// retry delay passed; every waiting one when `force`), oldest first, and record each try
    /// on its own commit. A sink stops for this pass at its first failure. A sink whose provider
    /// could not be built (a credential missing) records that failure on the checkpoints it
    /// would have been sent.
    pub fn anchor_pending(&self, providers: &[SinkProvider], force: bool) -> Result<Vec<AnchorTry>> {
        if providers.is_empty() {
            return Ok(Vec::new());
        }
        let sinks = providers.iter().map(|(sink, _)| sink.clone()).collect();
        let ReadReply::AnchorStates(states) = self.guarded(|kernel, _| kernel.read(&Read::AnchorStates { sinks }))?
        else {
            return Err(unexpected("anchor states"));
        };
        let mut tries = Vec::new();
        for ((sink, provider), state) in providers.iter().zip(states) {
            for (checkpoint, before) in state.to_try(self.now(), force) {
                let outcome = match provider {
                    Ok(provider) => provider.anchor(&SignedCheckpoint {
                        note: checkpoint.note.as_bytes(),
                        size: checkpoint.size,
                        number: checkpoint.number,
                    }),
                    Err(error) => Err(error.clone()),
                };
                let row = StoredAnchor::after_try(sink, checkpoint.number, before.as_ref(), self.now(), &outcome);
                let stored = match self.guarded(|kernel, _| kernel.write(Write::RecordAnchor(Box::new(row))))? {
                    WriteReply::Anchor(row) => *row,
                    WriteReply::Refused(refusal) => return Err(refusal),
                    _ => return Err(unexpected("anchor")),
                };
                let failed = outcome.err();
                let stop = failed.is_some();
                tries.push(AnchorTry { row: stored, error: failed });
                if stop {
                    break;
                }
            }
        }
        Ok(tries)
    }

    /// Where each sink stands: its last anchored checkpoint and the ones waiting for it.
    pub fn anchor_states(&self, sinks: &[String]) -> Result<Vec<SinkState>> {
        match self.guarded(|kernel, _| kernel.read(&Read::AnchorStates { sinks: sinks.to_vec() }))? {
            ReadReply::AnchorStates(states) => Ok(states),
            _ => Err(unexpected("anchor states")),
        }
    }

    /// Every sink's records of checkpoints `from..=to`, by sink then checkpoint.
    pub fn anchors(&self, from: u64, to: u64) -> Result<Vec<StoredAnchor>> {
        match self.guarded(|kernel, _| kernel.read(&Read::Anchors { from, to }))? {
            ReadReply::Anchors(rows) => Ok(rows),
            _ => Err(unexpected("anchors")),
        }
    }

    /// The canonical policy the store keeps under `policy_hash` (`sha256:…`), checked to hash to
    /// it; `None` when it keeps none (a receipt written before policies were kept, or by a tool
    /// that does not keep them).
    pub fn policy(&self, policy_hash: &str) -> Result<Option<Vec<u8>>> {
        let ask = Read::Policy { policy_hash: policy_hash.to_owned() };
        match self.guarded(|kernel, _| kernel.read(&ask))? {
            ReadReply::Policy(policy) => Ok(policy),
            _ => Err(unexpected("policy")),
        }
    }

    /// Keep the canonical policy this handle runs under, by its hash, before its first receipt
    /// names it: one durable write the first time, a read after that. A read-only handle keeps
    /// nothing (it writes no receipt).
    pub(crate) fn keep_policy(&self, policy_hash: &str, canonical: &[u8]) -> Result<()> {
        if matches!(self.store().role()?, Role::ReadOnly) {
            return Ok(());
        }
        // Kept already: a read, and no write. Anything else is the write's to decide (other bytes
        // under the hash are its fault to name).
        if self.policy(policy_hash)?.as_deref() == Some(canonical) {
            return Ok(());
        }
        let op = Write::KeepPolicy { policy_hash: policy_hash.to_owned(), canonical: canonical.to_vec() };
        match self.guarded(|kernel, _| kernel.write(op))? {
            WriteReply::Done => Ok(()),
            WriteReply::Refused(refusal) => Err(refusal),
            _ => Err(unexpected("policy")),
        }
    }

    /// Checkpoints numbered `from..`, at most `limit`.
    pub fn checkpoints(&self, from: u64, limit: usize) -> Result<Vec<StoredCheckpoint>> {
        match self.guarded(|kernel, _| kernel.read(&Read::Checkpoints { from, limit }))? {
            ReadReply::Checkpoints(rows) => Ok(rows),
            _ => Err(unexpected("checkpoints")),
        }
    }

    /// The checkpoint numbered `number`, or the last one when `None`.
    pub fn checkpoint_numbered(&self, number: Option<u64>) -> Result<Option<StoredCheckpoint>> {
        match self.guarded(|kernel, _| kernel.read(&Read::Checkpoint { number }))? {
            ReadReply::Checkpoints(mut rows) => Ok(rows.pop()),
            _ => Err(unexpected("checkpoint")),
        }
    }

    /// Hashes of the receipts' Merkle tree: a root, an audit path, a consistency proof or a
    /// frontier, from one read snapshot.
    pub fn proof(&self, ask: ProofAsk) -> Result<Vec<[u8; 32]>> {
        match self.guarded(|kernel, _| kernel.read(&Read::Proof(ask)))? {
            ReadReply::Hashes(hashes) => Ok(hashes),
            _ => Err(unexpected("proof")),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::evidence::checkpoint::closes;
    use serde_json::json;

    #[test]
    fn only_a_committed_or_failed_outcome_closes_an_attempt() {
        let cases = [
            (json!({"effect_key": "k", "attempt": 2, "result": "committed"}), Some(("k".to_owned(), 2))),
            (json!({"effect_key": "k", "attempt": 1, "result": "failed"}), Some(("k".to_owned(), 1))),
            (json!({"effect_key": "k", "attempt": 1, "result": "ambiguous"}), None),
            (json!({"effect_key": "k", "attempt": 1, "result": "blocked"}), None),
            (
                json!({"effect_key": "k", "attempt": 1, "result": "observed", "execution": "committed"}),
                Some(("k".to_owned(), 1)),
            ),
            (json!({"effect_key": null, "attempt": 1, "result": "committed"}), None),
            (json!({"effect_key": "k", "result": "committed"}), None),
        ];
        for (document, expected) in cases {
            assert_eq!(closes(&document), expected, "{document}");
        }
    }
}
