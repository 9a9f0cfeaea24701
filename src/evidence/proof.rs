//! The proof documents, in one place: a receipt's inclusion in a checkpoint, one checkpoint's
//! consistency with a later one, and a checkpoint as it is listed. `warden proof`, `warden
//! checkpoints --json`, the C ABI (`warden_proof_inclusion`, `warden_proof_consistency`,
//! `warden_checkpoints`) and through it both bindings return these exact documents.
//!
//! Each proof is checked here, as a verifier would check it, before it is returned: a proof that
//! does not verify against the checkpoint's stored root is never handed out as one. Built on the
//! kernel's public reads (`Kernel::checkpoint_numbered`, `Kernel::receipt_seq`,
//! `Kernel::receipts`, `Kernel::proof`), each from its own read snapshot; checkpoints and
//! receipts are append-only, so what one read saw the next still holds.

use base64::prelude::{Engine, BASE64_STANDARD};
use serde_json::{json, Value};

use super::checkpoint::{decode_hash, StoredCheckpoint};
use super::tree::{check_consistency, check_inclusion, leaf_hash};
use crate::clock::render;
use crate::error::{Error, InvalidInputKind, StoreFaultKind};
use crate::kernel::{Kernel, ProofAsk};

/// How many checkpoints one read lists when a caller asks for all of them.
const CHECKPOINT_PAGE: usize = 256;

/// Why no proof was returned. The messages name what is wrong and what to do; none carries a
/// secret (a checkpoint row holds none).
#[derive(Debug)]
pub enum ProofError {
    /// What was named is not there: no such checkpoint, no checkpoint yet, no such receipt, or
    /// no checkpoint that covers the receipt. The C ABI answers WARDEN_RESULT_NOT_FOUND.
    Missing(String),
    /// The request cannot be answered as asked: checkpoints named newest first. The C ABI
    /// answers WARDEN_RESULT_INVALID_INPUT.
    Invalid(String),
    /// The store's rows do not prove what they should (a proof that does not verify, a stored
    /// root that does not decode): the store was damaged or altered. WARDEN_RESULT_STORE.
    Damaged(String),
    /// A read failed; the store's own error.
    Failed(Error),
}

impl std::fmt::Display for ProofError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProofError::Missing(message) | ProofError::Invalid(message) | ProofError::Damaged(message) => {
                f.write_str(message)
            }
            ProofError::Failed(error) => error.fmt(f),
        }
    }
}

impl std::error::Error for ProofError {}

impl From<Error> for ProofError {
    fn from(error: Error) -> ProofError {
        ProofError::Failed(error)
    }
}

impl From<ProofError> for Error {
    fn from(error: ProofError) -> Error {
        match error {
            ProofError::Missing(message) => Error::NotFound(message),
            ProofError::Invalid(message) => Error::invalid(InvalidInputKind::Conflict, message),
            ProofError::Damaged(message) => Error::store(StoreFaultKind::Damaged, message),
            ProofError::Failed(error) => error,
        }
    }
}

/// A receipt's audit path in one checkpoint's tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InclusionProof {
    /// The receipt, as it was named.
    pub receipt_id: String,
    /// Its seq; it is leaf `seq - 1`.
    pub seq: u64,
    /// SHA-256(0x00 ‖ the receipt's document).
    pub leaf_hash: [u8; 32],
    /// The checkpoint's number.
    pub checkpoint: u64,
    /// The checkpoint's tree size.
    pub tree_size: u64,
    /// The checkpoint's root, base64 as its note spells it.
    pub root: String,
    /// The audit path, leaf to root (RFC 9162 §2.1.3).
    pub proof: Vec<[u8; 32]>,
}

impl InclusionProof {
    /// The leaf's index in the tree: `seq - 1`.
    pub fn leaf_index(&self) -> u64 {
        self.seq.saturating_sub(1)
    }

    /// The document: `{"receipt_id", "seq", "leaf_index", "leaf_hash", "checkpoint",
    /// "tree_size", "root", "proof": [base64…], "proof_bytes"}`.
    pub fn to_json(&self) -> Value {
        json!({
            "receipt_id": self.receipt_id, "seq": self.seq, "leaf_index": self.leaf_index(),
            "leaf_hash": b64(&self.leaf_hash), "checkpoint": self.checkpoint, "tree_size": self.tree_size,
            "root": self.root, "proof": hashes(&self.proof), "proof_bytes": self.proof.len() * 32,
        })
    }
}

/// A consistency proof between two checkpoints: the older tree is a prefix of the newer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsistencyProof {
    /// The older checkpoint's number.
    pub old_checkpoint: u64,
    /// The newer checkpoint's number.
    pub new_checkpoint: u64,
    /// The older tree size.
    pub old_size: u64,
    /// The newer tree size.
    pub new_size: u64,
    /// The older root, base64.
    pub old_root: String,
    /// The newer root, base64.
    pub new_root: String,
    /// The proof (RFC 9162 §2.1.4); empty when the sizes are equal or the older tree is empty.
    pub proof: Vec<[u8; 32]>,
}

impl ConsistencyProof {
    /// The document: `{"old_checkpoint", "new_checkpoint", "old_size", "new_size", "old_root",
    /// "new_root", "proof": [base64…]}`, the shape of a bundle's `proofs/consistency-A-B.json`
    /// plus the two roots.
    pub fn to_json(&self) -> Value {
        json!({
            "old_checkpoint": self.old_checkpoint, "new_checkpoint": self.new_checkpoint,
            "old_size": self.old_size, "new_size": self.new_size,
            "old_root": self.old_root, "new_root": self.new_root, "proof": hashes(&self.proof),
        })
    }
}

/// A checkpoint as it is listed: `{"number", "origin", "size", "root", "time", "verifier_key",
/// "note"}` (the signed note exactly as signed; the verifier key that signed it, never a
/// signing key).
pub fn checkpoint_json(cp: &StoredCheckpoint) -> Value {
    json!({
        "number": cp.number,
        "origin": cp.origin,
        "size": cp.size,
        "root": cp.root,
        "time": render(cp.time),
        "verifier_key": cp.verifier,
        "note": cp.note,
    })
}

/// Checkpoints numbered `from` on (0 and 1 both mean the first), at most `limit` of them
/// (`None`: all, read a page at a time).
pub fn checkpoints(kernel: &Kernel, from: u64, limit: Option<usize>) -> Result<Vec<StoredCheckpoint>, Error> {
    let mut all = Vec::new();
    let mut from = from.max(1);
    loop {
        let wanted = limit.map_or(CHECKPOINT_PAGE, |limit| limit.saturating_sub(all.len()).min(CHECKPOINT_PAGE));
        if wanted == 0 {
            break;
        }
        let page = kernel.checkpoints(from, wanted)?;
        let Some(last) = page.last() else { break };
        from = last.number.saturating_add(1);
        all.extend(page);
    }
    Ok(all)
}

/// The checkpoint numbered `number`, or the last one for `None`.
pub fn numbered(kernel: &Kernel, number: Option<u64>) -> Result<StoredCheckpoint, ProofError> {
    kernel.checkpoint_numbered(number)?.ok_or_else(|| {
        ProofError::Missing(match number {
            Some(n) => format!("there is no checkpoint {n}; `warden checkpoints` lists them"),
            None => "the store has no checkpoint yet; make one with `warden checkpoint --key FILE`".into(),
        })
    })
}

fn root_of(cp: &StoredCheckpoint) -> Result<[u8; 32], ProofError> {
    decode_hash(&cp.root)
        .ok_or_else(|| ProofError::Damaged(format!("checkpoint {}'s stored root is not a base64 SHA-256", cp.number)))
}

/// The audit path of the receipt `receipt_id` in checkpoint `checkpoint` (`None`: the last),
/// checked against the checkpoint's root before it is returned.
pub fn inclusion(kernel: &Kernel, receipt_id: &str, checkpoint: Option<u64>) -> Result<InclusionProof, ProofError> {
    let cp = numbered(kernel, checkpoint)?;
    let seq = kernel
        .receipt_seq(receipt_id)?
        .ok_or_else(|| ProofError::Missing(format!("no receipt {} is on the chain", shown(receipt_id))))?;
    if seq > cp.size {
        return Err(ProofError::Missing(format!(
            "receipt {} (seq {seq}) came after checkpoint {} ({} receipts); name a later checkpoint, or make one",
            shown(receipt_id),
            cp.number,
            cp.size
        )));
    }
    let index =
        seq.checked_sub(1).ok_or_else(|| ProofError::Damaged("a receipt has seq 0; run `warden doctor`".into()))?;
    let document = kernel
        .receipts(seq, 1)?
        .pop()
        .filter(|(found, _)| *found == seq)
        .map(|(_, receipt)| receipt.document)
        .ok_or_else(|| ProofError::Damaged(format!("receipt {seq} vanished while proving it")))?;
    let leaf = leaf_hash(document.as_bytes());
    let proof = kernel.proof(ProofAsk::Inclusion { seq, size: cp.size })?;
    let root = root_of(&cp)?;
    // Checked here as a verifier would, so a wrong proof is never returned as one.
    if !check_inclusion(&proof, cp.size, root, index, leaf) {
        return Err(ProofError::Damaged(format!(
            "the proof computed for receipt {seq} does not verify against checkpoint {}; run `warden doctor`",
            cp.number
        )));
    }
    Ok(InclusionProof {
        receipt_id: receipt_id.to_owned(),
        seq,
        leaf_hash: leaf,
        checkpoint: cp.number,
        tree_size: cp.size,
        root: cp.root,
        proof,
    })
}

/// The consistency proof from checkpoint `old` to checkpoint `new`, checked against both roots
/// before it is returned. A pair whose older tree is the larger is refused: name the older one
/// first.
pub fn consistency(kernel: &Kernel, old: u64, new: u64) -> Result<ConsistencyProof, ProofError> {
    let (a, b) = (numbered(kernel, Some(old))?, numbered(kernel, Some(new))?);
    if a.size > b.size {
        return Err(ProofError::Invalid(format!(
            "checkpoint {old} covers {} receipts, more than checkpoint {new} ({}); name the older one first",
            a.size, b.size
        )));
    }
    let proof = if a.size == 0 || a.size == b.size {
        Vec::new()
    } else {
        kernel.proof(ProofAsk::Consistency { old: a.size, new: b.size })?
    };
    let sound = a.size == 0 || check_consistency(&proof, a.size, root_of(&a)?, b.size, root_of(&b)?);
    if !sound {
        return Err(ProofError::Damaged(format!(
            "checkpoints {old} and {new} are not consistent: the log was forked or altered. Run `warden doctor`"
        )));
    }
    Ok(ConsistencyProof {
        old_checkpoint: old,
        new_checkpoint: new,
        old_size: a.size,
        new_size: b.size,
        old_root: a.root,
        new_root: b.root,
        proof,
    })
}

/// A hash in base64, as checkpoints and proofs spell them.
pub fn b64(hash: &[u8; 32]) -> String {
    BASE64_STANDARD.encode(hash)
}

fn hashes(proof: &[[u8; 32]]) -> Vec<String> {
    proof.iter().map(b64).collect()
}

/// A name as a message shows it: control and format characters escaped (`\u{000A}`), so an id
/// cannot forge a line of a message. The CLI escapes its output the same way.
fn shown(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if crate::approval::is_control_or_format(c) {
            out.push_str(&format!("\\u{{{:04X}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_with_a_control_character_is_shown_escaped() {
        assert_eq!(shown("rct_1\nforged"), "rct_1\\u{000A}forged");
        assert_eq!(shown("rct_\u{202e}x"), "rct_\\u{202E}x");
        assert_eq!(shown("rct_plain"), "rct_plain");
    }

    #[test]
    fn each_refusal_maps_to_the_error_its_c_code_follows() {
        let cases = [
            (ProofError::Missing("m".into()), "not_found"),
            (ProofError::Invalid("i".into()), "invalid_input"),
            (ProofError::Damaged("d".into()), "store"),
            (ProofError::Failed(Error::Unavailable("u".into())), "store_unavailable"),
        ];
        for (refusal, reason) in cases {
            let message = refusal.to_string();
            let error = Error::from(refusal);
            assert_eq!(error.reason(), reason, "{message}");
            assert!(error.to_string().ends_with(&message), "{error} keeps the message {message}");
        }
    }
}
