//! Offline bundles: `warden export` writes a directory a third party can check with no access
//! to the store, and [`verify_bundle`] checks one in constant memory (the receipts are streamed;
//! only the checkpoints, the keys, the approvals and the effects a checkpoint saw open are
//! held). The layout and the checks, in the order they run, are in `docs/EVIDENCE.md`; the
//! Python and Node verifiers make the same checks in the same order and name the same reasons.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use base64::prelude::{Engine, BASE64_STANDARD};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::checkpoint::{self, Companion, StoredCheckpoint};
use super::key::{open_note, NoteRefusal, NoteVerifier};
use super::retention::PrunedPrefix;
use super::tree::{check_consistency, leaf_hash, Frontier};
use crate::error::{Error, InvalidInputKind, Result, StoreFaultKind};
use crate::kernel::{Kernel, ProofAsk};
use crate::receipt::GENESIS_HASH;

mod anchors;
mod failure;
pub use anchors::{AnchorLine, ANCHORS_FILE};
use failure::{fail, Failure};

/// The `format` member of `bundle.json`.
pub const BUNDLE_FORMAT: &str = "warden.bundle/v1";

/// Every reason a verifier may give, in the order the checks run (`docs/EVIDENCE.md`).
pub const REASONS: [&str; 16] = [
    "bundle_malformed",
    "key_untrusted",
    "signature_invalid",
    "checkpoint_altered",
    "log_forked",
    "checkpoint_backdated",
    "proof_invalid",
    "receipt_malformed",
    "receipts_reordered",
    "receipt_dropped",
    "receipt_altered",
    "root_mismatch",
    "outcome_missing",
    "truncated",
    "anchor_invalid",
    "policy_altered",
];

/// `bundle.json`: what the bundle holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// Always [`BUNDLE_FORMAT`].
    pub format: String,
    /// The log's origin.
    pub origin: String,
    /// The checkpoints included, in number order (`checkpoints/NNNNNN.note` and `.json`).
    pub checkpoints: Vec<u64>,
    /// The receipts before the first one in `receipts.jsonl` (0, or the `--from` checkpoint's
    /// size; then `start.json` holds the tree's frontier there).
    pub start_size: u64,
    /// The verifier keys, as files under `keys/`.
    pub keys: Vec<String>,
    /// The policy hashes the receipts name, each once.
    pub policies: Vec<String>,
    /// Those of them the bundle does not carry (the store kept no policy under the hash: a
    /// receipt written before policies were kept, or by another tool). Every other one is
    /// carried as `policies/<hex>.json`, the canonical policy whose SHA-256 is the hash.
    pub policies_missing: Vec<String>,
}

/// `start.json`: where a bundle that starts after the first receipt picks the log up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Start {
    /// The receipts before the bundle's first.
    pub size: u64,
    /// The hash (`sha256:…`) of the receipt at `size`, which the first receipt names.
    pub last_hash: String,
    /// The tree's complete subtrees at `size`, largest first, base64.
    pub frontier: Vec<String>,
}

/// `proofs/consistency-A-B.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsistencyFile {
    /// The older checkpoint.
    pub old_checkpoint: u64,
    /// The newer checkpoint.
    pub new_checkpoint: u64,
    /// The older size.
    pub old_size: u64,
    /// The newer size.
    pub new_size: u64,
    /// The proof's hashes, base64.
    pub proof: Vec<String>,
}

/// What `warden export` wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Exported {
    /// The directory.
    pub dir: PathBuf,
    /// The receipts written.
    pub receipts: u64,
    /// The checkpoints written.
    pub checkpoints: Vec<u64>,
    /// The approvals written.
    pub approvals: u64,
    /// The anchors' receipts written.
    pub anchors: u64,
    /// The policies written (`policies/<hex>.json`).
    pub policies: u64,
    /// The policy hashes the receipts name that the store kept no policy under.
    pub policies_missing: Vec<String>,
}

fn io<'p>(what: &str, path: &'p Path) -> impl FnOnce(std::io::Error) -> Error + 'p {
    let what = what.to_owned();
    move |e| Error::Config(format!("cannot {what} {}: {e}", path.display()))
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    std::fs::write(path, bytes).map_err(io("write", path))
}

fn json_line<T: Serialize>(value: &T) -> Result<String> {
    let mut text = serde_json::to_string_pretty(value)
        .map_err(|e| Error::invalid(InvalidInputKind::NotCanonical, format!("cannot encode a bundle file: {e}")))?;
    text.push('\n');
    Ok(text)
}

/// A key's file name under `keys/`.
fn key_file(verifier: &NoteVerifier) -> String {
    format!("keys/{:08x}.vkey", verifier.id())
}

/// A policy's file name under `policies/`: the hex of its `sha256:` hash. `None` for a hash
/// of another form (a tool's own), which no file can carry.
pub fn policy_file(policy_hash: &str) -> Option<String> {
    let hex = policy_hash.strip_prefix("sha256:")?;
    let lower_hex = hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    lower_hex.then(|| format!("policies/{hex}.json"))
}

/// Write the bundle of checkpoints `from` (exclusive of its receipts; `None`: from the first
/// receipt) through `to` (`None`: the last checkpoint) into `out`, a directory that must not
/// exist. It is written beside `out` under a temporary name and renamed when whole.
pub fn export(kernel: &Kernel, out: &Path, from: Option<u64>, to: Option<u64>) -> Result<Exported> {
    if out.exists() {
        return Err(Error::Config(format!("{} exists; export writes a new directory", out.display())));
    }
    let last = kernel.checkpoint_numbered(to)?.ok_or_else(|| match to {
        Some(n) => Error::NotFound(format!("there is no checkpoint {n}; `warden checkpoints` lists them")),
        None => Error::NotFound("the store has no checkpoint yet; make one with `warden checkpoint --key FILE`".into()),
    })?;
    let first =
        match from {
            Some(n) if n > last.number => {
                return Err(Error::invalid_at(
                    InvalidInputKind::Conflict,
                    "from",
                    format!("--from {n} is after --to {}", last.number),
                ));
            }
            Some(n) => Some(kernel.checkpoint_numbered(Some(n))?.ok_or_else(|| {
                Error::NotFound(format!("there is no checkpoint {n}; `warden checkpoints` lists them"))
            })?),
            None => None,
        };
    // After a prune the bundle starts where the receipts kept start, at the checkpoint pruned
    // through (the frontier there is all that is left of the receipts before it).
    let pruned = kernel.pruned()?;
    if let Some(prefix) = pruned.as_ref().filter(|prefix| last.size < prefix.through_seq) {
        return Err(pruned_away("to", last.number, prefix));
    }
    let first = match (first, &pruned) {
        (None, Some(prefix)) => Some(kernel.checkpoint_numbered(Some(prefix.checkpoint))?.ok_or_else(|| {
            Error::store(
                StoreFaultKind::Damaged,
                format!(
                    "checkpoint {} the receipts were pruned through is missing; run `warden doctor`",
                    prefix.checkpoint
                ),
            )
        })?),
        (Some(cp), Some(prefix)) if cp.size < prefix.through_seq => return Err(pruned_away("from", cp.number, prefix)),
        (first, _) => first,
    };
    let partial = out.with_file_name(format!(
        "{}.partial-{}",
        out.file_name().and_then(|n| n.to_str()).unwrap_or("bundle"),
        std::process::id()
    ));
    let result = write_bundle(kernel, &partial, first.as_ref(), &last, pruned.as_ref());
    match result {
        Ok(mut exported) => {
            std::fs::rename(&partial, out).map_err(io("rename the bundle to", out))?;
            exported.dir = out.to_owned();
            Ok(exported)
        }
        Err(error) => {
            let _ = std::fs::remove_dir_all(&partial);
            Err(error)
        }
    }
}

fn write_bundle(
    kernel: &Kernel,
    dir: &Path,
    first: Option<&StoredCheckpoint>,
    last: &StoredCheckpoint,
    pruned: Option<&PrunedPrefix>,
) -> Result<Exported> {
    for sub in ["", "checkpoints", "keys", "proofs", "policies"] {
        let path = dir.join(sub);
        std::fs::create_dir_all(&path).map_err(io("create", &path))?;
    }
    let start_number = first.map_or(1, |cp| cp.number);
    let mut checkpoints = Vec::new();
    let mut next = start_number;
    while next <= last.number {
        let page = kernel.checkpoints(next, 256)?;
        let Some(tail) = page.last() else { break };
        next = tail.number + 1;
        checkpoints.extend(page.into_iter().filter(|cp| cp.number <= last.number));
    }
    let mut keys = BTreeSet::new();
    for cp in &checkpoints {
        write_file(&dir.join(format!("checkpoints/{:06}.note", cp.number)), cp.note.as_bytes())?;
        write_file(&dir.join(format!("checkpoints/{:06}.json", cp.number)), cp.companion.as_bytes())?;
        let verifier = NoteVerifier::parse(&cp.verifier)?;
        if keys.insert(key_file(&verifier)) {
            write_file(&dir.join(key_file(&verifier)), format!("{}\n", verifier.encoded()).as_bytes())?;
        }
    }
    for pair in checkpoints.windows(2) {
        let (old, new) = (&pair[0], &pair[1]);
        let proof = if old.size == new.size || old.size == 0 {
            Vec::new()
        } else {
            kernel.proof(ProofAsk::Consistency { old: old.size, new: new.size })?
        };
        let file = ConsistencyFile {
            old_checkpoint: old.number,
            new_checkpoint: new.number,
            old_size: old.size,
            new_size: new.size,
            proof: proof.iter().map(|h| BASE64_STANDARD.encode(h)).collect(),
        };
        write_file(
            &dir.join(format!("proofs/consistency-{:06}-{:06}.json", old.number, new.number)),
            json_line(&file)?.as_bytes(),
        )?;
    }
    let start_size = first.map_or(0, |cp| cp.size);
    if start_size > 0 {
        let last_hash = match pruned.filter(|prefix| prefix.through_seq == start_size) {
            Some(prefix) => prefix.last_hash.clone(),
            None => {
                let before = kernel.receipts(start_size, 1)?;
                before
                    .first()
                    .filter(|(at, _)| *at == start_size)
                    .and_then(|(_, receipt)| receipt.hash.clone())
                    .ok_or_else(|| {
                        Error::store(
                            StoreFaultKind::Damaged,
                            format!("receipt {start_size} is missing or has no hash; run `warden doctor`"),
                        )
                    })?
            }
        };
        let frontier = kernel.proof(ProofAsk::Frontier { size: start_size })?;
        let start = Start {
            size: start_size,
            last_hash,
            frontier: frontier.iter().map(|h| BASE64_STANDARD.encode(h)).collect(),
        };
        write_file(&dir.join("start.json"), json_line(&start)?.as_bytes())?;
    }
    let receipts_path = dir.join("receipts.jsonl");
    let mut receipts =
        std::io::BufWriter::new(std::fs::File::create(&receipts_path).map_err(io("create", &receipts_path))?);
    let (mut approvals, mut policies) = (BTreeSet::new(), BTreeSet::new());
    let mut seq = start_size;
    while seq < last.size {
        let page = kernel.receipts(seq + 1, 1000)?;
        if page.is_empty() {
            return Err(Error::store(
                StoreFaultKind::Damaged,
                format!("receipt {} is missing from the chain; run `warden doctor`", seq + 1),
            ));
        }
        for (at, receipt) in page {
            if at != seq + 1 {
                return Err(Error::store(
                    StoreFaultKind::Damaged,
                    format!("receipt {} is missing from the chain; run `warden doctor`", seq + 1),
                ));
            }
            if at > last.size {
                break;
            }
            let document = crate::canonical::parse_json(&receipt.document).map_err(|e| {
                Error::store(StoreFaultKind::Damaged, format!("receipt {at} does not parse ({e}); run `warden doctor`"))
            })?;
            if let Some(id) = document.get("approval_id").and_then(|v| v.as_str()) {
                approvals.insert(id.to_owned());
            }
            if let Some(hash) = document.get("policy_hash").and_then(|v| v.as_str()) {
                policies.insert(hash.to_owned());
            }
            receipts
                .write_all(receipt.document.as_bytes())
                .and_then(|()| receipts.write_all(b"\n"))
                .map_err(io("write", &receipts_path))?;
            seq = at;
        }
    }
    receipts.flush().map_err(io("write", &receipts_path))?;
    let approvals_path = dir.join("approvals.jsonl");
    let mut lines = String::new();
    for id in &approvals {
        let record = kernel.approval(id)?.ok_or_else(|| {
            Error::store(
                StoreFaultKind::Damaged,
                format!("a receipt spent approval {id}, which the store does not hold"),
            )
        })?;
        let line = serde_json::json!({
            "approval_id": record.approval_id,
            "action_hash": record.action_hash,
            "action_name": record.action_name,
            "status": record.status,
            "requested_by": record.requested_by,
            "approver": record.approver,
            "votes": record.votes.iter().map(|vote| serde_json::json!({
                "approver": vote.approver, "verified": vote.verified, "grant": vote.grant,
                "at": crate::clock::render(vote.at),
            })).collect::<Vec<_>>(),
            "requested_at": crate::clock::render(record.requested_at),
            "answered_at": record.answered_at.map(crate::clock::render),
            "consumed_at": record.consumed_at.map(crate::clock::render),
        });
        lines.push_str(&line.to_string());
        lines.push('\n');
    }
    write_file(&approvals_path, lines.as_bytes())?;
    let anchor_lines = write_anchors(kernel, dir, start_number, last.number)?;
    let mut missing = Vec::new();
    for hash in &policies {
        let kept = match policy_file(hash) {
            Some(name) => kernel.policy(hash)?.map(|canonical| (name, canonical)),
            None => None,
        };
        match kept {
            Some((name, canonical)) => write_file(&dir.join(name), &canonical)?,
            None => missing.push(hash.clone()),
        }
    }
    let manifest = Manifest {
        format: BUNDLE_FORMAT.into(),
        origin: last.origin.clone(),
        checkpoints: checkpoints.iter().map(|cp| cp.number).collect(),
        start_size,
        keys: keys.into_iter().collect(),
        policies: policies.iter().cloned().collect(),
        policies_missing: missing.clone(),
    };
    write_file(&dir.join("bundle.json"), json_line(&manifest)?.as_bytes())?;
    Ok(Exported {
        dir: dir.to_owned(),
        receipts: last.size - start_size,
        checkpoints: manifest.checkpoints,
        approvals: approvals.len() as u64,
        anchors: anchor_lines,
        policies: (policies.len() - missing.len()) as u64,
        policies_missing: missing,
    })
}

/// `anchors.jsonl`: every anchored record of checkpoints `from..=to`, by sink then checkpoint.
fn write_anchors(kernel: &Kernel, dir: &Path, from: u64, to: u64) -> Result<u64> {
    let mut text = String::new();
    let mut count = 0;
    for line in kernel.anchors(from, to)?.iter().filter_map(AnchorLine::of) {
        text.push_str(
            &serde_json::to_string(&line)
                .map_err(|e| Error::invalid(InvalidInputKind::NotCanonical, format!("cannot encode an anchor: {e}")))?,
        );
        text.push('\n');
        count += 1;
    }
    write_file(&dir.join(ANCHORS_FILE), text.as_bytes())?;
    Ok(count)
}

/// Write the bundle directory `dir` as one tar archive at `out` (a new file): its files in name
/// order under the directory's name, each mode 0644 with time 0, so one bundle makes one archive.
pub fn write_tar(dir: &Path, out: &Path) -> Result<()> {
    let name = dir.file_name().ok_or_else(|| {
        Error::invalid(InvalidInputKind::Malformed, format!("{} has no name to archive under", dir.display()))
    })?;
    let file = std::fs::OpenOptions::new().write(true).create_new(true).open(out).map_err(io("create", out))?;
    let mut archive = tar::Builder::new(std::io::BufWriter::new(file));
    let mut files = Vec::new();
    let mut pending = vec![PathBuf::new()];
    while let Some(relative) = pending.pop() {
        let here = dir.join(&relative);
        for entry in std::fs::read_dir(&here).map_err(io("read", &here))? {
            let entry = entry.map_err(io("read", &here))?;
            let path = relative.join(entry.file_name());
            if entry.file_type().map_err(io("read", &here))?.is_dir() {
                pending.push(path);
            } else {
                files.push(path);
            }
        }
    }
    files.sort();
    for relative in files {
        let bytes = std::fs::read(dir.join(&relative)).map_err(io("read", &dir.join(&relative)))?;
        let mut header = tar::Header::new_gnu();
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        header.set_mtime(0);
        archive
            .append_data(&mut header, Path::new(name).join(&relative), bytes.as_slice())
            .map_err(io("write", out))?;
    }
    archive.into_inner().and_then(|mut w| w.flush()).map_err(io("write", out))?;
    Ok(())
}

// ---- the verifier -------------------------------------------------------------------------------

/// What [`verify_bundle`] concluded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verdict {
    /// Whether every check passed.
    pub ok: bool,
    /// The first failure's name (one of [`REASONS`]), when one failed.
    pub reason: Option<String>,
    /// What exactly failed, or what was proven.
    pub detail: String,
    /// Receipts checked.
    pub receipts: u64,
    /// Checkpoints checked.
    pub checkpoints: u64,
    /// Whether the keys were given by the caller (`true`) or taken from the bundle.
    pub keys_pinned: bool,
    /// Effects the last checkpoint counts open (no outcome yet).
    pub open_at_end: u64,
    /// Effects a checkpoint saw open that closed with no receipt (the signer attests how).
    pub closed_without_receipt: u64,
    /// Lines of `anchors.jsonl`.
    pub anchors: u64,
    /// Those whose receipt was checked (a `file` line; an `rfc3161` token, given its TSA).
    pub anchors_checked: u64,
    /// The policy hashes the receipts name whose policy the bundle carries, each file hashing
    /// to its name (filled when every check passed).
    pub policies_carried: Vec<String>,
    /// The policy hashes the receipts name whose policy the bundle does not carry: nothing
    /// shows what those policies said (filled when every check passed).
    pub policies_missing: Vec<String>,
}

/// The verdict's line about the policies, as every verifier prints it.
pub fn policies_line(verdict: &Verdict) -> String {
    let list = |hashes: &[String]| if hashes.is_empty() { "none".to_owned() } else { hashes.join(", ") };
    format!(
        "policies carried: {}; not carried (nothing shows what they said): {}",
        list(&verdict.policies_carried),
        list(&verdict.policies_missing)
    )
}

struct Checked {
    number: u64,
    size: u64,
    root: [u8; 32],
    time: String,
    companion: Companion,
}

/// Check the bundle in `dir`. `trusted`: the verifier keys the caller trusts; empty means the
/// bundle's own keys are trusted (the verdict says so: a swapped key is then not detectable).
pub fn verify_bundle(dir: &Path, trusted: &[NoteVerifier]) -> Verdict {
    verify_bundle_with(dir, trusted, &[])
}

/// [`verify_bundle`], also checking every RFC 3161 token in `anchors.jsonl` against one of
/// `tsas` (a TSA's own certificate each, as [`crate::evidence::tsa::verify_with`] pins it).
pub fn verify_bundle_with(dir: &Path, trusted: &[NoteVerifier], tsas: &[crate::evidence::tsa::TrustedTsa]) -> Verdict {
    let mut verdict = Verdict {
        ok: false,
        reason: None,
        detail: String::new(),
        receipts: 0,
        checkpoints: 0,
        keys_pinned: !trusted.is_empty(),
        open_at_end: 0,
        closed_without_receipt: 0,
        anchors: 0,
        anchors_checked: 0,
        policies_carried: Vec::new(),
        policies_missing: Vec::new(),
    };
    match run(dir, trusted, tsas, &mut verdict) {
        Ok(detail) => {
            verdict.ok = true;
            verdict.detail = detail;
        }
        Err(Failure(reason, detail)) => {
            verdict.reason = Some(reason.to_owned());
            verdict.detail = detail;
        }
    }
    verdict
}

fn read_text(dir: &Path, name: &str) -> std::result::Result<String, Failure> {
    std::fs::read_to_string(dir.join(name)).or_else(|e| fail("bundle_malformed", format!("cannot read {name}: {e}")))
}

fn parse_file<T: for<'de> Deserialize<'de>>(dir: &Path, name: &str) -> std::result::Result<T, Failure> {
    let text = read_text(dir, name)?;
    serde_json::from_str(&text).or_else(|e| fail("bundle_malformed", format!("{name} is not what it should be: {e}")))
}

fn hashes(list: &[String], name: &str) -> std::result::Result<Vec<[u8; 32]>, Failure> {
    list.iter()
        .map(|h| {
            checkpoint::decode_hash(h)
                .ok_or_else(|| Failure("bundle_malformed", format!("{name} holds {h:?}, not a base64 SHA-256")))
        })
        .collect()
}

fn run(
    dir: &Path,
    trusted: &[NoteVerifier],
    tsas: &[crate::evidence::tsa::TrustedTsa],
    verdict: &mut Verdict,
) -> std::result::Result<String, Failure> {
    // 1. The manifest and the keys.
    let manifest: Manifest = parse_file(dir, "bundle.json")?;
    if manifest.format != BUNDLE_FORMAT {
        return fail(
            "bundle_malformed",
            format!("bundle.json says format {:?}, not {BUNDLE_FORMAT:?}", manifest.format),
        );
    }
    let keys: Vec<NoteVerifier> = if trusted.is_empty() {
        let mut keys = Vec::new();
        for name in &manifest.keys {
            let text = read_text(dir, name)?;
            keys.push(NoteVerifier::parse(&text).or_else(|e| fail("bundle_malformed", format!("{name}: {e}")))?);
        }
        keys
    } else {
        trusted.to_vec()
    };
    if manifest.checkpoints.is_empty() {
        return fail("bundle_malformed", "bundle.json lists no checkpoint");
    }
    if !manifest.checkpoints.windows(2).all(|pair| pair[0] < pair[1]) {
        return fail("bundle_malformed", "bundle.json lists its checkpoints out of number order");
    }
    let listed = listed_policies(&manifest)?;
    // 2. Each checkpoint: signed by a trusted key, its text a checkpoint of this origin, its
    // companion the one it hashes.
    let mut checked: Vec<Checked> = Vec::new();
    let mut notes = BTreeMap::new();
    for &number in &manifest.checkpoints {
        let name = format!("checkpoints/{number:06}.note");
        let note = read_text(dir, &name)?;
        let text = match open_note(note.as_bytes(), &keys) {
            Ok(text) => text,
            Err(NoteRefusal::Malformed(why)) => {
                return fail("bundle_malformed", format!("{name} is not a signed note: {why}"))
            }
            Err(NoteRefusal::Untrusted(seen)) => {
                return fail(
                    "key_untrusted",
                    format!("{name} is signed only by keys not trusted here ({})", seen.join(", ")),
                )
            }
            Err(NoteRefusal::BadSignature(key)) => {
                return fail("signature_invalid", format!("{name}'s signature by {key} does not verify"))
            }
        };
        let body = checkpoint::parse(&text).or_else(|why| fail("checkpoint_altered", format!("{name}: {why}")))?;
        if body.origin != manifest.origin {
            return fail(
                "checkpoint_altered",
                format!("{name} is of the log {:?}, not {:?}", body.origin, manifest.origin),
            );
        }
        let companion_name = format!("checkpoints/{number:06}.json");
        let companion_text = read_text(dir, &companion_name)?;
        if checkpoint::companion_hash(&companion_text) != body.companion_hash {
            return fail("checkpoint_altered", format!("{companion_name} is not the document {name} signed"));
        }
        let companion: Companion = serde_json::from_str(&companion_text)
            .or_else(|e| fail("checkpoint_altered", format!("{companion_name} does not parse: {e}")))?;
        let agrees = companion.format == checkpoint::COMPANION_FORMAT
            && companion.checkpoint == number
            && companion.origin == body.origin
            && companion.size == body.size
            && companion.time == body.time
            && companion.open.len() as u64 == body.open;
        if !agrees {
            return fail("checkpoint_altered", format!("{companion_name} does not state what {name} states"));
        }
        notes.insert(number, (note, body.size));
        checked.push(Checked { number, size: body.size, root: body.root, time: body.time, companion });
    }
    verdict.checkpoints = checked.len() as u64;
    // 3. The checkpoints against each other: one root per size, sizes and times never going back.
    let mut roots: BTreeMap<u64, (u64, [u8; 32])> = BTreeMap::new();
    for cp in &checked {
        if let Some((other, root)) = roots.get(&cp.size) {
            if *root != cp.root {
                return fail(
                    "log_forked",
                    format!(
                        "checkpoints {other} and {} both sign {} receipts with different roots",
                        cp.number, cp.size
                    ),
                );
            }
        }
        roots.insert(cp.size, (cp.number, cp.root));
    }
    for pair in checked.windows(2) {
        let (old, new) = (&pair[0], &pair[1]);
        if new.size < old.size {
            return fail(
                "log_forked",
                format!(
                    "checkpoint {} signs {} receipts, fewer than checkpoint {}'s {}",
                    new.number, new.size, old.number, old.size
                ),
            );
        }
        if new.time < old.time {
            return fail(
                "checkpoint_backdated",
                format!(
                    "checkpoint {} is dated {}, before checkpoint {} ({})",
                    new.number, new.time, old.number, old.time
                ),
            );
        }
    }
    // 4. The consistency proofs between consecutive checkpoints.
    for pair in checked.windows(2) {
        let (old, new) = (&pair[0], &pair[1]);
        let name = format!("proofs/consistency-{:06}-{:06}.json", old.number, new.number);
        let file: ConsistencyFile = parse_file(dir, &name)?;
        let proof = hashes(&file.proof, &name)?;
        let sound = file.old_size == old.size
            && file.new_size == new.size
            && (old.size == 0 || check_consistency(&proof, old.size, old.root, new.size, new.root));
        if !sound {
            return fail(
                "proof_invalid",
                format!("{name} does not prove checkpoint {} extends checkpoint {}", new.number, old.number),
            );
        }
    }
    // 5. The receipts, streamed.
    let (mut frontier, mut prev_hash) = if manifest.start_size == 0 {
        (Frontier::default(), GENESIS_HASH.to_owned())
    } else {
        let start: Start = parse_file(dir, "start.json")?;
        let subtrees = hashes(&start.frontier, "start.json")?;
        let levels: Vec<u8> = (0..64u8).rev().filter(|level| start.size & (1u64 << level) != 0).collect();
        let frontier = (start.size == manifest.start_size && levels.len() == subtrees.len())
            .then(|| Frontier::resume(start.size, levels.into_iter().zip(subtrees).collect()))
            .flatten()
            .ok_or_else(|| Failure("bundle_malformed", "start.json's frontier does not fit its size".into()))?;
        (frontier, start.last_hash)
    };
    if let Some(cp) = checked.iter().find(|cp| cp.size < frontier.size()) {
        return fail(
            "bundle_malformed",
            format!(
                "checkpoint {} covers {} receipts, fewer than the {} the bundle starts after",
                cp.number,
                cp.size,
                frontier.size()
            ),
        );
    }
    let approvals = load_approvals(dir)?;
    let file = std::fs::File::open(dir.join("receipts.jsonl"))
        .or_else(|e| fail("bundle_malformed", format!("cannot read receipts.jsonl: {e}")))?;
    let mut pending_gap: Option<u64> = None;
    let mut named: BTreeSet<String> = BTreeSet::new();
    let mut walk = Walk::default();
    walk.arrive(&checked, &frontier, verdict)?;
    std::thread::scope(|scope| -> std::result::Result<(), Failure> {
        let parsed = read_in_parallel(scope, file);
        for batch in &parsed {
            for line in batch? {
                let expected = frontier.size() + 1;
                if !line.ends {
                    return fail(
                        "receipt_malformed",
                        format!("the line after receipt {} does not end with a newline", expected - 1),
                    );
                }
                let fields = line.fields.or_else(|e| {
                    fail("receipt_malformed", format!("the line for receipt {expected} is not JSON: {e}"))
                })?;
                let Some(seq) = fields.seq else {
                    return fail("receipt_malformed", format!("the line for receipt {expected} has no seq"));
                };
                if let Some(missing) = pending_gap {
                    return if seq == missing {
                        fail("receipts_reordered", format!("receipt {missing} comes after receipt {}", missing + 1))
                    } else {
                        fail(
                            "receipt_dropped",
                            format!(
                                "receipt {missing} is missing: receipt {} follows receipt {}",
                                missing + 1,
                                missing - 1
                            ),
                        )
                    };
                }
                if seq < expected {
                    return fail("receipts_reordered", format!("receipt {seq} comes after receipt {}", expected - 1));
                }
                if seq > expected {
                    pending_gap = Some(expected);
                    continue;
                }
                if fields.prev_hash != prev_hash {
                    return fail(
                        "receipt_altered",
                        format!(
                            "receipt {seq} names a previous hash that is not receipt {}'s: receipt {} was altered",
                            seq - 1,
                            seq - 1
                        ),
                    );
                }
                prev_hash = line.chain_hash;
                frontier.push(line.leaf);
                verdict.receipts += 1;
                if let Some(finished) = fields.finished_at {
                    if finished > walk.latest {
                        walk.latest = finished;
                    }
                }
                if let Some(spent) = &fields.spent {
                    check_approval(&approvals, spent, seq)?;
                }
                if let Some(hash) = &fields.policy {
                    if !listed.contains(hash.as_str()) {
                        return fail(
                            "bundle_malformed",
                            format!("receipt {seq} names policy {hash:?}, which bundle.json does not list"),
                        );
                    }
                    named.insert(hash.clone());
                }
                if let Some(key) = fields.closes {
                    if walk.waiting.contains(&key) {
                        walk.closed.insert(key);
                    }
                }
                walk.arrive(&checked, &frontier, verdict)?;
            }
        }
        Ok(())
    })?;
    if let Some(missing) = pending_gap {
        return fail(
            "receipt_dropped",
            format!("receipt {missing} is missing: the file ends with receipt {}", missing + 1),
        );
    }
    if let Some(cp) = checked.get(walk.next) {
        return fail(
            "truncated",
            format!(
                "checkpoint {} signs {} receipts; the bundle holds receipts only through {}",
                cp.number,
                cp.size,
                frontier.size()
            ),
        );
    }
    // 8. The anchors' receipts of those checkpoints: after the log's own checks, which name
    // what a re-signed checkpoint changed before its anchors say the note was another.
    let counted = anchors::check(dir, &notes, tsas)?;
    (verdict.anchors, verdict.anchors_checked) = (counted.lines, counted.checked);
    // 9. The policies: every one listed is named by a receipt, and each carried one is the
    // document its name is the hash of.
    check_policies(dir, &manifest, &named, verdict)?;
    let last = checked.last().map_or(0, |cp| cp.number);
    verdict.open_at_end = checked.last().map_or(0, |cp| cp.companion.open.len() as u64);
    Ok(format!(
        "{} receipts hash to the roots of {} checkpoint(s) (last: {last}, {} receipts); every effect a checkpoint saw open is open later, closed by a receipt, or attested closed without one",
        verdict.receipts,
        checked.len(),
        frontier.size()
    ))
}

/// A receipt that spent an approval: it names the approval and its approver (a refusal may name
/// one it was shown, bound to another action, with no approver: that one spent nothing).
struct Spent {
    approval_id: String,
    action_hash: String,
    approver: String,
}

/// What the checks need of one receipt line.
struct Fields {
    seq: Option<u64>,
    prev_hash: String,
    finished_at: Option<String>,
    spent: Option<Spent>,
    closes: Option<(String, u32)>,
    policy: Option<String>,
}

/// One line of `receipts.jsonl`, read and hashed by a worker.
struct Line {
    /// Whether it ended with a newline (only the file's last line may not).
    ends: bool,
    fields: std::result::Result<Fields, String>,
    /// `sha256:` and the hex of its bytes: what the next receipt's `prev_hash` names.
    chain_hash: String,
    leaf: [u8; 32],
}

fn read_line(bytes: &[u8]) -> Line {
    let (text, ends) = match bytes.strip_suffix(b"\n") {
        Some(text) => (text, true),
        None => (bytes, false),
    };
    let fields = serde_json::from_slice::<serde_json::Value>(text).map_err(|e| e.to_string()).map(|document| {
        let text_of = |name: &str| document.get(name).and_then(serde_json::Value::as_str).map(str::to_owned);
        let spent = match (text_of("approval_id"), text_of("approver")) {
            (Some(approval_id), Some(approver)) => {
                Some(Spent { approval_id, action_hash: text_of("action_hash").unwrap_or_default(), approver })
            }
            _ => None,
        };
        Fields {
            seq: document.get("seq").and_then(serde_json::Value::as_u64),
            prev_hash: text_of("prev_hash").unwrap_or_default(),
            finished_at: text_of("finished_at"),
            spent,
            closes: checkpoint::closes(&document),
            policy: text_of("policy_hash"),
        }
    });
    Line { ends, fields, chain_hash: format!("sha256:{}", hex::encode(Sha256::digest(text))), leaf: leaf_hash(text) }
}

/// Lines per batch handed to a worker.
const BATCH: usize = 512;

/// Read `file` line by line on one thread and parse and hash the lines on the others, handing
/// them back in file order. What is in flight is bounded (a few batches per worker), so memory
/// stays constant whatever the file's size; dropping the receiver stops every thread.
fn read_in_parallel<'s>(
    scope: &'s std::thread::Scope<'s, '_>,
    file: std::fs::File,
) -> std::sync::mpsc::Receiver<std::result::Result<Vec<Line>, Failure>> {
    use std::sync::mpsc::sync_channel;
    use std::sync::{Arc, Mutex};
    let workers = std::thread::available_parallelism().map_or(1, std::num::NonZero::get).clamp(1, 4);
    let (work_tx, work_rx) = sync_channel::<(u64, std::result::Result<Vec<Vec<u8>>, Failure>)>(workers * 2);
    let (done_tx, done_rx) = sync_channel::<(u64, std::result::Result<Vec<Line>, Failure>)>(workers * 2);
    let (ordered_tx, ordered_rx) = sync_channel(workers * 2);
    scope.spawn(move || {
        let mut lines = BufReader::new(file);
        for n in 0u64.. {
            let mut batch = Vec::with_capacity(BATCH);
            let mut failed = None;
            while batch.len() < BATCH {
                let mut line = Vec::new();
                match lines.read_until(b'\n', &mut line) {
                    Ok(0) => break,
                    Ok(_) => batch.push(line),
                    Err(e) => {
                        failed = Some(Failure("bundle_malformed", format!("cannot read receipts.jsonl: {e}")));
                        break;
                    }
                }
            }
            let last = batch.len() < BATCH || failed.is_some();
            if work_tx.send((2 * n, Ok(batch))).is_err() {
                return;
            }
            // A read error after some lines: the lines first, then the error in its place.
            if let Some(failure) = failed {
                let _ = work_tx.send((2 * n + 1, Err(failure)));
                return;
            }
            if last {
                return;
            }
        }
    });
    let work_rx = Arc::new(Mutex::new(work_rx));
    for _ in 0..workers {
        let (work_rx, done_tx) = (Arc::clone(&work_rx), done_tx.clone());
        scope.spawn(move || loop {
            let next = match work_rx.lock() {
                Ok(rx) => rx.recv(),
                Err(_) => return,
            };
            let Ok((n, batch)) = next else { return };
            let lines = batch.map(|batch| batch.iter().map(|line| read_line(line)).collect());
            if done_tx.send((n, lines)).is_err() {
                return;
            }
        });
    }
    drop(done_tx);
    scope.spawn(move || {
        let mut early = BTreeMap::new();
        let mut next = 0u64;
        // Batch n arrives as 2n; a read error after it, as 2n + 1 (so odd numbers are mostly absent).
        for (n, lines) in done_rx {
            early.insert(n, lines);
            loop {
                if let Some(lines) = early.remove(&next) {
                    if ordered_tx.send(lines).is_err() {
                        return;
                    }
                    next += 1;
                } else if next % 2 == 1 && early.contains_key(&(next + 1)) {
                    next += 1;
                } else {
                    break;
                }
            }
        }
        // At the end, whatever is left in order (an error after the last batch).
        for (_, lines) in early {
            if ordered_tx.send(lines).is_err() {
                return;
            }
        }
    });
    ordered_rx
}

/// Where the stream of receipts stands against the checkpoints.
#[derive(Default)]
struct Walk {
    /// The next checkpoint to reach.
    next: usize,
    /// The last checkpoint reached.
    previous: Option<usize>,
    /// The effects the last checkpoint reached saw open.
    waiting: BTreeSet<(String, u32)>,
    /// Those of them a receipt since closed.
    closed: BTreeSet<(String, u32)>,
    /// The latest `finished_at` so far.
    latest: String,
}

impl Walk {
    /// Check every checkpoint whose size the stream has reached: its root, its time against the
    /// receipts it covers, and every effect the one before it saw open.
    fn arrive(
        &mut self,
        checked: &[Checked],
        frontier: &Frontier,
        verdict: &mut Verdict,
    ) -> std::result::Result<(), Failure> {
        while let Some(cp) = checked.get(self.next).filter(|cp| cp.size == frontier.size()) {
            if cp.root != frontier.root() {
                return fail(
                    "root_mismatch",
                    format!("the receipts through {} do not hash to checkpoint {}'s root", cp.size, cp.number),
                );
            }
            if self.latest.as_str() > cp.time.as_str() {
                return fail(
                    "checkpoint_backdated",
                    format!(
                        "checkpoint {} is dated {}, before a receipt it covers finished ({})",
                        cp.number, cp.time, self.latest
                    ),
                );
            }
            if let Some(at) = self.previous {
                outcomes_accounted(&checked[at], cp, &self.waiting, &self.closed)?;
                verdict.closed_without_receipt += cp.companion.closed_without_receipt.len() as u64;
            }
            self.waiting = cp.companion.open.iter().map(|open| (open.effect_key.clone(), open.attempt)).collect();
            self.closed.clear();
            self.previous = Some(self.next);
            self.next += 1;
        }
        Ok(())
    }
}

fn outcomes_accounted(
    old: &Checked,
    new: &Checked,
    waiting: &BTreeSet<(String, u32)>,
    closed: &BTreeSet<(String, u32)>,
) -> std::result::Result<(), Failure> {
    for key in waiting {
        let still_open = new.companion.open.iter().any(|open| open.effect_key == key.0 && open.attempt == key.1);
        let attested = new.companion.closed_without_receipt.iter().any(|c| c.effect_key == key.0 && c.attempt == key.1);
        if !(still_open || closed.contains(key) || attested) {
            return fail(
                "outcome_missing",
                format!(
                    "effect {:?} attempt {} was open at checkpoint {}; checkpoint {} counts it closed, but no receipt records its outcome",
                    key.0, key.1, old.number, new.number
                ),
            );
        }
    }
    Ok(())
}

type Approvals = HashMap<String, (String, Option<String>)>;

fn load_approvals(dir: &Path) -> std::result::Result<Approvals, Failure> {
    let text = read_text(dir, "approvals.jsonl")?;
    let mut out = HashMap::new();
    for (at, line) in text.lines().enumerate() {
        let value: serde_json::Value = serde_json::from_str(line)
            .or_else(|e| fail("bundle_malformed", format!("approvals.jsonl line {} is not JSON: {e}", at + 1)))?;
        let field = |name: &str| value.get(name).and_then(|v| v.as_str()).map(str::to_owned);
        let (Some(id), Some(hash)) = (field("approval_id"), field("action_hash")) else {
            return fail(
                "bundle_malformed",
                format!("approvals.jsonl line {} has no approval_id or action_hash", at + 1),
            );
        };
        out.insert(id, (hash, field("approver")));
    }
    Ok(out)
}

fn check_approval(approvals: &Approvals, spent: &Spent, seq: u64) -> std::result::Result<(), Failure> {
    let Some((hash, approver)) = approvals.get(&spent.approval_id) else {
        return fail(
            "bundle_malformed",
            format!("receipt {seq} spent approval {}, which approvals.jsonl does not hold", spent.approval_id),
        );
    };
    if *hash != spent.action_hash || Some(spent.approver.as_str()) != approver.as_deref() {
        return fail(
            "receipt_altered",
            format!("receipt {seq} and approval {} disagree on the action or the approver", spent.approval_id),
        );
    }
    Ok(())
}

/// Step 1's look at the policies bundle.json lists: each once, and those it says are missing
/// among them. Returns the listed hashes.
fn listed_policies(manifest: &Manifest) -> std::result::Result<BTreeSet<&str>, Failure> {
    let mut listed = BTreeSet::new();
    for hash in &manifest.policies {
        if !listed.insert(hash.as_str()) {
            return fail("bundle_malformed", format!("bundle.json lists policy {hash:?} twice"));
        }
    }
    let mut missing = BTreeSet::new();
    for hash in &manifest.policies_missing {
        if !missing.insert(hash.as_str()) {
            return fail("bundle_malformed", format!("bundle.json lists policy {hash:?} as missing twice"));
        }
        if !listed.contains(hash.as_str()) {
            return fail(
                "bundle_malformed",
                format!("bundle.json lists policy {hash:?} as missing but not among the policies"),
            );
        }
    }
    Ok(listed)
}

/// Step 6: every policy listed is named by a receipt the bundle holds; each one not listed as
/// missing is carried as `policies/<hex>.json`, whose bytes hash to its name.
fn check_policies(
    dir: &Path,
    manifest: &Manifest,
    named: &BTreeSet<String>,
    verdict: &mut Verdict,
) -> std::result::Result<(), Failure> {
    if let Some(hash) = manifest.policies.iter().find(|hash| !named.contains(hash.as_str())) {
        return fail("bundle_malformed", format!("bundle.json lists policy {hash:?}, which no receipt names"));
    }
    let mut carried = Vec::new();
    for hash in manifest.policies.iter().filter(|hash| !manifest.policies_missing.contains(hash)) {
        let Some(name) = policy_file(hash) else {
            return fail(
                "bundle_malformed",
                format!("bundle.json lists policy {hash:?} as carried, but no file can carry a hash of that form"),
            );
        };
        let bytes =
            std::fs::read(dir.join(&name)).or_else(|e| fail("bundle_malformed", format!("cannot read {name}: {e}")))?;
        if crate::canonical::sha256_prefixed(&bytes) != *hash {
            return fail(
                "policy_altered",
                format!("{name} does not hash to {hash}: it is not the policy the receipts name"),
            );
        }
        carried.push(hash.clone());
    }
    verdict.policies_carried = carried;
    verdict.policies_missing = manifest.policies_missing.clone();
    Ok(())
}

/// The refusal of a `--from`/`--to` checkpoint whose receipts a prune removed, naming the first
/// checkpoint an export can still use.
fn pruned_away(flag: &str, number: u64, prefix: &PrunedPrefix) -> Error {
    Error::invalid_at(
        InvalidInputKind::State,
        flag,
        format!(
            "--{flag} {number}: its receipts were pruned (the first {} were, through checkpoint {}); export --{flag} {} or later",
            prefix.through_seq, prefix.checkpoint, prefix.checkpoint
        ),
    )
}
