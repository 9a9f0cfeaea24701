//! Evidence that leaves the box: `keygen`, `checkpoint`, `checkpoints`, `proof`, `export` and
//! `verify-bundle` (docs/EVIDENCE.md).

use std::path::Path;

use base64::prelude::{Engine, BASE64_STANDARD};
use serde_json::json;

use warden::clock::render;
use warden::evidence::bundle::{self, Verdict};
use warden::evidence::checkpoint::StoredCheckpoint;
use warden::evidence::key::{NoteSigner, NoteVerifier};
use warden::evidence::tree::{check_consistency, check_inclusion, leaf_hash};
use warden::kernel::ProofAsk;
use warden::Kernel;

use crate::exit::{Done, Failure};
use crate::output::{document, shown, table};

fn b64(hash: &[u8; 32]) -> String {
    BASE64_STANDARD.encode(hash)
}

pub fn keygen(out: &Path, name: &str, json: bool) -> Result<String, Failure> {
    let signer = NoteSigner::generate(name)?;
    signer.save(out)?;
    let verifier = signer.verifier().encoded();
    Ok(if json {
        document(&json!({"key_file": out.display().to_string(), "verifier_key": verifier}))
    } else {
        format!(
            "wrote the signing key {} (mode 0600; keep it off the store's machine if you can)\nverifier key: {verifier}\n",
            shown(&out.display().to_string())
        )
    })
}

fn checkpoint_json(cp: &StoredCheckpoint) -> serde_json::Value {
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

pub fn checkpoint(kernel: &Kernel, key: &Path, origin: Option<&str>, json: bool) -> Result<String, Failure> {
    let signer = NoteSigner::load(key)?;
    let cp = kernel.checkpoint(&signer, origin)?;
    Ok(if json {
        document(&checkpoint_json(&cp))
    } else {
        format!(
            "checkpoint {} of {}: {} receipts, root {}\n\n{}",
            cp.number,
            shown(&cp.origin),
            cp.size,
            cp.root,
            cp.note
        )
    })
}

pub fn checkpoints(kernel: &Kernel, json: bool) -> Result<String, Failure> {
    let mut all = Vec::new();
    let mut from = 1;
    loop {
        let page = kernel.checkpoints(from, 256)?;
        let Some(last) = page.last() else { break };
        from = last.number + 1;
        all.extend(page);
    }
    Ok(if json {
        document(&json!({"checkpoints": all.iter().map(checkpoint_json).collect::<Vec<_>>()}))
    } else if all.is_empty() {
        "no checkpoints yet; `warden checkpoint --key FILE` makes one\n".into()
    } else {
        let rows = all
            .iter()
            .map(|cp| {
                vec![cp.number.to_string(), cp.size.to_string(), render(cp.time), cp.root.clone(), shown(&cp.origin)]
            })
            .collect();
        table(Some(&["NUMBER", "SIZE", "TIME", "ROOT", "ORIGIN"]), rows)
    })
}

fn numbered(kernel: &Kernel, number: Option<u64>) -> Result<StoredCheckpoint, Failure> {
    kernel.checkpoint_numbered(number)?.ok_or_else(|| match number {
        Some(n) => Failure::usage(format!("there is no checkpoint {n}; `warden checkpoints` lists them")),
        None => Failure::usage("the store has no checkpoint yet; make one with `warden checkpoint --key FILE`"),
    })
}

fn root_of(cp: &StoredCheckpoint) -> Result<[u8; 32], Failure> {
    warden::evidence::checkpoint::decode_hash(&cp.root)
        .ok_or_else(|| Failure::internal(format!("checkpoint {}'s stored root is not a base64 SHA-256", cp.number)))
}

pub fn inclusion(kernel: &Kernel, receipt_id: &str, number: Option<u64>, json: bool) -> Result<String, Failure> {
    let cp = numbered(kernel, number)?;
    let seq = kernel
        .receipt_seq(receipt_id)?
        .ok_or_else(|| Failure::usage(format!("no receipt {} is on the chain", shown(receipt_id))))?;
    if seq > cp.size {
        return Err(Failure::usage(format!(
            "receipt {} (seq {seq}) came after checkpoint {} ({} receipts); name a later checkpoint, or make one",
            shown(receipt_id),
            cp.number,
            cp.size
        )));
    }
    let document_text = kernel
        .receipts(seq, 1)?
        .pop()
        .map(|(_, receipt)| receipt.document)
        .ok_or_else(|| Failure::internal(format!("receipt {seq} vanished while proving it")))?;
    let leaf = leaf_hash(document_text.as_bytes());
    let proof = kernel.proof(ProofAsk::Inclusion { seq, size: cp.size })?;
    let root = root_of(&cp)?;
    // Checked here as a verifier would, so a wrong proof is never printed as one.
    if !check_inclusion(&proof, cp.size, root, seq - 1, leaf) {
        return Err(Failure::internal(format!(
            "the proof computed for receipt {seq} does not verify against checkpoint {}; run `warden doctor`",
            cp.number
        )));
    }
    let hashes: Vec<String> = proof.iter().map(b64).collect();
    Ok(if json {
        document(&json!({
            "receipt_id": receipt_id, "seq": seq, "leaf_index": seq - 1, "leaf_hash": b64(&leaf),
            "checkpoint": cp.number, "tree_size": cp.size, "root": cp.root, "proof": hashes,
            "proof_bytes": proof.len() * 32,
        }))
    } else {
        format!(
            "receipt {} (seq {seq}) is leaf {} of checkpoint {} ({} receipts, root {})\nleaf hash {}\naudit path, {} hashes ({} bytes):\n{}",
            shown(receipt_id),
            seq - 1,
            cp.number,
            cp.size,
            cp.root,
            b64(&leaf),
            proof.len(),
            proof.len() * 32,
            hashes.iter().map(|h| format!("  {h}\n")).collect::<String>()
        )
    })
}

pub fn consistency(kernel: &Kernel, old: u64, new: u64, json: bool) -> Result<String, Failure> {
    let (a, b) = (numbered(kernel, Some(old))?, numbered(kernel, Some(new))?);
    if a.size > b.size {
        return Err(Failure::usage(format!(
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
        return Err(Failure::internal(format!(
            "checkpoints {old} and {new} are not consistent: the log was forked or altered. Run `warden doctor`"
        )));
    }
    let hashes: Vec<String> = proof.iter().map(b64).collect();
    Ok(if json {
        document(&json!({
            "old_checkpoint": old, "new_checkpoint": new, "old_size": a.size, "new_size": b.size,
            "old_root": a.root, "new_root": b.root, "proof": hashes,
        }))
    } else {
        format!(
            "checkpoint {new} ({} receipts) extends checkpoint {old} ({} receipts); consistency proof, {} hashes:\n{}",
            b.size,
            a.size,
            proof.len(),
            hashes.iter().map(|h| format!("  {h}\n")).collect::<String>()
        )
    })
}

pub fn export(
    kernel: &Kernel,
    out: &Path,
    from: Option<u64>,
    to: Option<u64>,
    tar: bool,
    json: bool,
) -> Result<String, Failure> {
    let archive = tar.then(|| {
        let mut name = out.as_os_str().to_owned();
        name.push(".tar");
        std::path::PathBuf::from(name)
    });
    if let Some(archive) = archive.as_ref().filter(|archive| archive.exists()) {
        return Err(Failure::usage(format!(
            "{} exists; export writes a new archive",
            shown(&archive.display().to_string())
        )));
    }
    let done = bundle::export(kernel, out, from, to)?;
    if let Some(archive) = &archive {
        bundle::write_tar(out, archive)?;
    }
    Ok(if json {
        document(&json!({
            "dir": done.dir.display().to_string(), "receipts": done.receipts,
            "checkpoints": done.checkpoints, "approvals": done.approvals,
            "tar": archive.as_ref().map(|archive| archive.display().to_string()),
        }))
    } else {
        format!(
            "wrote {}: {} receipts, checkpoint(s) {}, {} approval(s)\ncheck it anywhere with: warden verify-bundle {} --key VERIFIER_KEY\n",
            shown(&done.dir.display().to_string()),
            done.receipts,
            done.checkpoints.iter().map(u64::to_string).collect::<Vec<_>>().join(", "),
            done.approvals,
            shown(&done.dir.display().to_string())
        ) + &archive.map(|archive| format!("and the same as one archive: {}\n", shown(&archive.display().to_string()))).unwrap_or_default()
    })
}

/// A `--key` value: a verifier key, or a file holding one.
fn trusted_key(text: &str) -> Result<NoteVerifier, Failure> {
    if let Ok(key) = NoteVerifier::parse(text) {
        return Ok(key);
    }
    let contents = std::fs::read_to_string(text).map_err(|e| {
        Failure::usage(format!(
            "--key {}: neither a verifier key (NAME+ID+BASE64) nor a readable file ({e})",
            shown(text)
        ))
    })?;
    NoteVerifier::parse(&contents).map_err(|e| Failure::usage(format!("--key {}: {e}", shown(text))))
}

pub fn verify_bundle(dir: &Path, keys: &[String], json: bool) -> Result<Done, Failure> {
    let trusted = keys.iter().map(|key| trusted_key(key)).collect::<Result<Vec<_>, _>>()?;
    let verdict: Verdict = bundle::verify_bundle(dir, &trusted);
    let stdout = if json {
        document(
            &serde_json::to_value(&verdict)
                .map_err(|e| Failure::internal(format!("cannot encode the verdict: {e}")))?,
        )
    } else if verdict.ok {
        let pinned = if verdict.keys_pinned {
            ""
        } else {
            "\nthe keys were taken from the bundle itself; pass --key VERIFIER_KEY to pin the signer"
        };
        format!(
            "bundle ok: {}\nopen at the last checkpoint: {}; closed without a receipt (attested by the signer): {}{pinned}\n",
            shown(&verdict.detail),
            verdict.open_at_end,
            verdict.closed_without_receipt
        )
    } else {
        format!("bundle refused: {}: {}\n", verdict.reason.as_deref().unwrap_or("unknown"), shown(&verdict.detail))
    };
    let failed = (!verdict.ok).then(|| {
        Failure::check(
            verdict.reason.as_deref().unwrap_or("bundle_refused"),
            format!("the bundle does not verify: {}", verdict.detail),
        )
    });
    Ok(Done { stdout, failed })
}
