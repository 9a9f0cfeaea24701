//! Evidence that leaves the box: `keygen`, `checkpoint`, `checkpoints`, `anchor`, `proof`,
//! `export` and `verify-bundle` (docs/EVIDENCE.md).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::json;

use warden::clock::render;
use warden::evidence::anchoring::Anchors;
use warden::evidence::bundle::{self, Verdict};
use warden::evidence::key::{NoteSigner, NoteVerifier};
use warden::evidence::proof::{self, b64, ProofError};
use warden::evidence::settings::EvidenceSettings;
use warden::evidence::tsa::TrustedTsa;
use warden::sight::credentials::{CredentialProvider, EnvProvider};
use warden::Kernel;

use crate::exit::{Done, Failure};
use crate::output::{document, shown, table};

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

pub fn checkpoint(kernel: &Kernel, key: &Path, origin: Option<&str>, json: bool) -> Result<String, Failure> {
    let signer = NoteSigner::load(key)?;
    let cp = kernel.checkpoint(&signer, origin)?;
    Ok(if json {
        document(&proof::checkpoint_json(&cp))
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
    let all = proof::checkpoints(kernel, 1, None)?;
    Ok(if json {
        document(&json!({"checkpoints": all.iter().map(proof::checkpoint_json).collect::<Vec<_>>()}))
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

/// A refusal of `warden proof`: what was named is missing or the request is out of order is
/// the caller's to fix (exit 2); rows that do not prove what they should are internal (exit 3).
fn refused(error: ProofError) -> Failure {
    match error {
        ProofError::Missing(message) | ProofError::Invalid(message) => Failure::usage(message),
        ProofError::Damaged(message) => Failure::internal(message),
        ProofError::Failed(error) => error.into(),
    }
}

pub fn inclusion(kernel: &Kernel, receipt_id: &str, number: Option<u64>, json: bool) -> Result<String, Failure> {
    let found = proof::inclusion(kernel, receipt_id, number).map_err(refused)?;
    Ok(if json {
        document(&found.to_json())
    } else {
        let hashes: Vec<String> = found.proof.iter().map(b64).collect();
        format!(
            "receipt {} (seq {}) is leaf {} of checkpoint {} ({} receipts, root {})\nleaf hash {}\naudit path, {} hashes ({} bytes):\n{}",
            shown(receipt_id),
            found.seq,
            found.leaf_index(),
            found.checkpoint,
            found.tree_size,
            found.root,
            b64(&found.leaf_hash),
            hashes.len(),
            hashes.len() * 32,
            hashes.iter().map(|h| format!("  {h}\n")).collect::<String>()
        )
    })
}

pub fn consistency(kernel: &Kernel, old: u64, new: u64, json: bool) -> Result<String, Failure> {
    let found = proof::consistency(kernel, old, new).map_err(refused)?;
    Ok(if json {
        document(&found.to_json())
    } else {
        let hashes: Vec<String> = found.proof.iter().map(b64).collect();
        format!(
            "checkpoint {new} ({} receipts) extends checkpoint {old} ({} receipts); consistency proof, {} hashes:\n{}",
            found.new_size,
            found.old_size,
            hashes.len(),
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
            "checkpoints": done.checkpoints, "approvals": done.approvals, "anchors": done.anchors,
            "policies": done.policies, "policies_missing": done.policies_missing,
            "tar": archive.as_ref().map(|archive| archive.display().to_string()),
        }))
    } else {
        format!(
            "wrote {}: {} receipts, checkpoint(s) {}, {} approval(s), {} anchor receipt(s), {} policy document(s){}\ncheck it anywhere with: warden verify-bundle {} --key VERIFIER_KEY\n",
            shown(&done.dir.display().to_string()),
            done.receipts,
            done.checkpoints.iter().map(u64::to_string).collect::<Vec<_>>().join(", "),
            done.approvals,
            done.anchors,
            done.policies,
            if done.policies_missing.is_empty() {
                String::new()
            } else {
                format!(" ({} named policy hash(es) the store kept no document for)", done.policies_missing.len())
            },
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

pub fn verify_bundle(dir: &Path, keys: &[String], tsa_certs: &[PathBuf], json: bool) -> Result<Done, Failure> {
    let trusted = keys.iter().map(|key| trusted_key(key)).collect::<Result<Vec<_>, _>>()?;
    let tsas = tsa_certs
        .iter()
        .map(|path| {
            let shown_path = shown(&path.display().to_string());
            let bytes = std::fs::read(path)
                .map_err(|e| Failure::usage(format!("cannot read the TSA certificate {shown_path}: {e}")))?;
            TrustedTsa::parse(&bytes)
                .map_err(|e| Failure::usage(format!("the TSA certificate {shown_path} {}", e.message)))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let verdict: Verdict = bundle::verify_bundle_with(dir, &trusted, &tsas);
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
        let anchors = match (verdict.anchors, verdict.anchors - verdict.anchors_checked) {
            (0, _) => "\nno anchor receipts in the bundle".to_owned(),
            (all, 0) => format!("\nanchor receipts: {all}, every one checked"),
            (all, unchecked) => format!(
                "\nanchor receipts: {all}, {unchecked} not checked (an RFC 3161 token needs its TSA's certificate: warden verify-bundle --tsa-cert FILE; other kinds are carried as they came)"
            ),
        };
        format!(
            "bundle ok: {}\nopen at the last checkpoint: {}; closed without a receipt (attested by the signer): {}\n{}{anchors}{pinned}\n",
            shown(&verdict.detail),
            verdict.open_at_end,
            verdict.closed_without_receipt,
            shown(&bundle::policies_line(&verdict))
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

/// `warden anchor`: send every checkpoint waiting for each of the document's anchors now, failed
/// ones included whatever their retry delay; record each try as the worker would. Exit 1 naming
/// the first sink that failed.
pub fn anchor(kernel: &Kernel, settings: &EvidenceSettings, json: bool) -> Result<Done, Failure> {
    if settings.anchors.is_empty() {
        return Err(Failure::config(
            "the document's evidence section lists no anchors; add evidence.anchors, e.g. [{file: /var/log/warden-anchors.jsonl}]",
        ));
    }
    let anchors = Anchors::load(&settings.anchors)?;
    let credentials: Arc<dyn CredentialProvider> = Arc::new(EnvProvider);
    let tries = kernel.anchor_pending(&anchors.providers(&credentials), true)?;
    let failed = tries.iter().find_map(|tried| tried.error.clone());
    let stdout = if json {
        document(&json!({
            "tries": tries.iter().map(|tried| json!({
                "sink": tried.row.sink,
                "checkpoint": tried.row.checkpoint,
                "anchored": tried.row.anchored(),
                "attempts": tried.row.attempts,
                "kind": tried.row.kind,
                "description": tried.row.description,
                "code": tried.error.as_ref().map(|e| e.code.clone()),
            })).collect::<Vec<_>>(),
            "sinks": anchors.sinks(),
        }))
    } else if tries.is_empty() {
        format!("nothing to anchor: every sink has the last checkpoint ({})\n", anchors.sinks().join(", "))
    } else {
        let mut out = String::new();
        for tried in &tries {
            let verdict = if tried.row.anchored() { "anchored" } else { "FAILED" };
            out.push_str(&format!(
                "checkpoint {} → {}: {verdict} (try {}): {}\n",
                tried.row.checkpoint,
                shown(&tried.row.sink),
                tried.row.attempts,
                shown(&tried.row.description)
            ));
        }
        out
    };
    Ok(Done {
        stdout,
        failed: failed.map(|error| Failure::check("anchor_failed", format!("{error}; the worker retries it"))),
    })
}
