//! Evidence that leaves the box: checkpoints over the receipts' Merkle tree, proofs, offline
//! bundles and the tamper corpus every verifier (Rust, Python, Node) must refuse with the same
//! reason. `WARDEN_UPDATE_CORPUS=1 cargo test --features test-exports --test evidence` rewrites
//! `tests/evidence/corpus` from a fresh store; without it the committed corpus is checked.

mod common;

use std::path::{Path, PathBuf};
use warden::test_support::KernelInternals;

use base64::prelude::{Engine, BASE64_STANDARD};
use common::{allow, cli, copy_dir, key_template, refund, Fixture, SECOND};
use warden::effect::{Outcome, StoredResult};
use warden::evidence::bundle::{export, verify_bundle, Verdict, REASONS};
use warden::evidence::checkpoint::{self, Basis, Companion, StoredCheckpoint};
use warden::evidence::key::{NoteSigner, NoteVerifier};
use warden::evidence::tree::{check_consistency, check_inclusion, leaf_hash};
use warden::kernel::ProofAsk;
use warden::{ActionRequest, EffectState, Warden, WardenOptions};

const CORPUS: &str = "tests/evidence/corpus";

/// The document the last receipts of the corpus's log ran under (the first ones name the
/// fixture's bare `sha256:test`, as receipts written before policies were kept do).
const POLICY: &str =
    "schema: warden/v1\nactions:\n  stripe.refund:\n    effect: \"refund:{payment_id}\"\n    decision: allow\n";

fn commit(f: &Fixture, payment: &str) {
    let t = key_template();
    let action = refund(payment, 100);
    let permit = f.kernel.propose(&allow(&action, &t)).expect("propose");
    permit.commit(&serde_json::json!({"ok": payment})).expect("commit");
    f.clock.advance(SECOND);
}

fn policy() -> warden::document::Document {
    warden::document::load_str(POLICY, "policy.yaml").expect("policy")
}

/// A handle on the fixture's store governed by `document` (read-only when asked).
fn governed(f: &Fixture, document: warden::document::Document, read_only: bool) -> Result<Warden, warden::Error> {
    let store = warden::store::StoreOptions { read_only, ..warden::store::StoreOptions::default() };
    let options = WardenOptions {
        clock: std::sync::Arc::new(f.clock.clone()),
        environment: Some("production".into()),
        store,
        ..WardenOptions::default()
    };
    Warden::open(f.path(), document, options)
}

/// One refund through the pipeline of `warden`, committed.
fn commit_governed(f: &Fixture, warden: &Warden, payment: &str) {
    let principal = warden::Principal::new("refund-agent", Some("ada")).expect("principal");
    let request =
        ActionRequest::new("stripe.refund", serde_json::json!({"payment_id": payment, "amount": 100}), principal);
    warden.submit(&request).expect("submit").commit(&serde_json::json!({"ok": payment})).expect("commit");
    f.clock.advance(SECOND);
}

/// A witness for the corpus: it cosigns each checkpoint with bytes naming it.
struct Witness;

impl warden::evidence::anchor::AnchorProvider for Witness {
    fn name(&self) -> String {
        "witness.test/corpus".into()
    }
    fn anchor(
        &self,
        checkpoint: &warden::evidence::anchor::SignedCheckpoint<'_>,
    ) -> Result<Option<warden::evidence::anchor::AnchorReceipt>, warden::evidence::anchor::AnchorError> {
        Ok(Some(warden::evidence::anchor::AnchorReceipt {
            kind: "cosignature".into(),
            bytes: format!("cosigned {}", checkpoint.number).into_bytes(),
            description: "the corpus's witness".into(),
        }))
    }
}

/// Send the newest checkpoint to the corpus's two anchors: a file beside the store, the witness.
fn anchor(f: &Fixture) {
    let file = f.dir.path().join("anchors.jsonl");
    let sinks: Vec<warden::evidence::anchoring::SinkProvider> = vec![
        (format!("file {}", file.display()), Ok(std::sync::Arc::new(warden::evidence::anchor::FileSink::new(file)))),
        ("witness.test/corpus".into(), Ok(std::sync::Arc::new(Witness))),
    ];
    let tries = f.kernel.anchor_pending(&sinks, false).expect("anchor");
    assert!(tries.iter().all(|tried| tried.row.anchored()), "{tries:?}");
}

/// A store with three checkpoints: 20 receipts and two effects open (one reserved through the
/// integrator API and never begun, one executing) at the first; the integrator's effect
/// completed without a receipt and 5 more receipts by the second; 3 more by the third, these
/// through the pipeline of a handle governed by [`POLICY`], whose store keeps that policy.
struct Log {
    f: Fixture,
    signer: NoteSigner,
    checkpoints: Vec<StoredCheckpoint>,
}

fn log() -> Log {
    let f = Fixture::new();
    for n in 1..=20 {
        commit(&f, &format!("txn_{n}"));
    }
    let integrator = refund("int_1", 7);
    let reserved = f.kernel.reserve_only(&integrator, "int:1", Some(3600 * SECOND), None).expect("reserve");
    let t = key_template();
    let held = refund("held_1", 9);
    let permit = f.kernel.propose(&allow(&held, &t)).expect("propose");
    let signer = NoteSigner::generate("warden.test/corpus").expect("key");
    let mut checkpoints = vec![f.kernel.checkpoint(&signer, Some("warden.test/corpus")).expect("checkpoint 1")];
    anchor(&f);
    f.clock.advance(SECOND);
    f.kernel.begin("int:1", &reserved.action_id, reserved.attempt).expect("begin");
    f.kernel
        .complete(
            "int:1",
            &reserved.action_id,
            reserved.attempt,
            Outcome::Committed(StoredResult::from_value(&serde_json::json!({"ok": 1}))),
        )
        .expect("complete");
    for n in 21..=25 {
        commit(&f, &format!("txn_{n}"));
    }
    checkpoints.push(f.kernel.checkpoint(&signer, None).expect("checkpoint 2"));
    anchor(&f);
    f.clock.advance(SECOND);
    let warden = governed(&f, policy(), false).expect("governed");
    for n in 26..=28 {
        commit_governed(&f, &warden, &format!("txn_{n}"));
    }
    checkpoints.push(f.kernel.checkpoint(&signer, None).expect("checkpoint 3"));
    anchor(&f);
    // The held permit stays open through all three checkpoints.
    std::mem::forget(permit);
    Log { f, signer, checkpoints }
}

fn companion(cp: &StoredCheckpoint) -> Companion {
    serde_json::from_str(&cp.companion).expect("companion")
}

#[test]
fn checkpoints_state_the_root_the_open_effects_and_what_closed_without_a_receipt() {
    let log = log();
    let [one, two, three] = &log.checkpoints[..] else { panic!("three checkpoints") };
    assert_eq!((one.number, one.size, two.size, three.size), (1, 20, 25, 28));
    let open: Vec<(String, String)> = companion(one).open.into_iter().map(|o| (o.effect_key, o.state)).collect();
    assert_eq!(
        open,
        [("int:1".to_owned(), "reserved".to_owned()), ("refund:held_1".to_owned(), "executing".to_owned())]
    );
    let second = companion(two);
    assert_eq!(second.open.len(), 1);
    let closed: Vec<(&str, &str)> =
        second.closed_without_receipt.iter().map(|c| (c.effect_key.as_str(), c.state.as_str())).collect();
    assert_eq!(closed, [("int:1", "committed")]);
    assert!(companion(three).closed_without_receipt.is_empty(), "only what the previous checkpoint saw open");
    // The root is the tree of the receipts as stored, and every receipt's proof verifies.
    let root = checkpoint::decode_hash(&two.root).unwrap();
    assert_eq!(log.f.kernel.proof(ProofAsk::Root { size: 25 }).unwrap(), [root]);
    for (seq, receipt) in log.f.kernel.receipts(1, 100).unwrap().into_iter().filter(|(seq, _)| *seq <= 25) {
        let path = log.f.kernel.proof(ProofAsk::Inclusion { seq, size: 25 }).unwrap();
        assert!(check_inclusion(&path, 25, root, seq - 1, leaf_hash(receipt.document.as_bytes())), "receipt {seq}");
        assert!(
            !check_inclusion(&path, 25, root, seq % 25, leaf_hash(receipt.document.as_bytes())),
            "receipt {seq} at another place"
        );
    }
    let old = checkpoint::decode_hash(&one.root).unwrap();
    let proof = log.f.kernel.proof(ProofAsk::Consistency { old: 20, new: 28 }).unwrap();
    assert!(check_consistency(&proof, 20, old, 28, checkpoint::decode_hash(&three.root).unwrap()));
    assert!(!check_consistency(&proof, 20, root, 28, checkpoint::decode_hash(&three.root).unwrap()));
    assert!(log.f.kernel.proof(ProofAsk::Root { size: 29 }).is_err(), "a size past the chain is refused");
    // Every checkpoint's note verifies with the key it names and states what the row says.
    for cp in &log.checkpoints {
        let text = warden::evidence::key::open_note(cp.note.as_bytes(), &[log.signer.verifier()]).unwrap();
        let body = checkpoint::parse(&text).unwrap();
        assert_eq!((body.size, body.origin.as_str()), (cp.size, "warden.test/corpus"));
    }
}

#[test]
fn the_store_refuses_a_checkpoint_that_misstates_the_log_or_comes_out_of_order() {
    let log = log();
    let other = NoteSigner::generate("warden.test/corpus").unwrap();
    // Another origin on a log that has one.
    let refused = log.f.kernel.checkpoint(&other, Some("warden.test/other")).unwrap_err().to_string();
    assert!(refused.contains("cannot name another origin"), "{refused}");
    // A later checkpoint is appended whoever signs it, with its own verifier key stored.
    let next = log.f.kernel.checkpoint(&other, None).unwrap();
    assert_eq!((next.number, next.verifier.clone()), (4, other.verifier().encoded()));
    assert_eq!(log.f.kernel.checkpoints(1, 10).unwrap().len(), 4);
    assert_eq!(log.f.kernel.checkpoint_numbered(None).unwrap().unwrap().number, 4);
}

fn lines(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("receipts.jsonl")).unwrap().lines().map(str::to_owned).collect()
}

fn set_lines(dir: &Path, lines: &[String]) {
    std::fs::write(dir.join("receipts.jsonl"), lines.iter().map(|l| format!("{l}\n")).collect::<String>()).unwrap();
}

/// Sign `basis` as checkpoint file `number` of the bundle in `dir`.
fn put_checkpoint(dir: &Path, signer: &NoteSigner, basis: &Basis) {
    let (companion, text) = checkpoint::texts(basis).unwrap();
    std::fs::write(dir.join(format!("checkpoints/{:06}.note", basis.number)), signer.sign_note(&text).unwrap())
        .unwrap();
    std::fs::write(dir.join(format!("checkpoints/{:06}.json", basis.number)), companion).unwrap();
}

fn basis_of(cp: &StoredCheckpoint) -> Basis {
    let c = companion(cp);
    Basis {
        number: cp.number,
        origin: cp.origin.clone(),
        size: cp.size,
        root: checkpoint::decode_hash(&cp.root).unwrap(),
        time: cp.time,
        open: c.open,
        closed_without_receipt: c.closed_without_receipt,
    }
}

type Tamper = fn(&Path, &Log);

/// Every tamper class, what it does to a sound bundle, and the reason every verifier gives.
fn tampers() -> Vec<(&'static str, Tamper, &'static str)> {
    vec![
        (
            "truncated",
            |dir, _| {
                let mut all = lines(dir);
                all.truncate(26);
                set_lines(dir, &all);
            },
            "truncated",
        ),
        (
            "reordered",
            |dir, _| {
                let mut all = lines(dir);
                all.swap(4, 5);
                set_lines(dir, &all);
            },
            "receipts_reordered",
        ),
        (
            "edited_receipt",
            |dir, _| {
                let mut all = lines(dir);
                all[6] = all[6].replace("\"amount\":100", "\"amount\":10000");
                assert!(all[6].contains("10000"));
                set_lines(dir, &all);
            },
            "receipt_altered",
        ),
        (
            "dropped_receipt",
            |dir, _| {
                let mut all = lines(dir);
                all.remove(9);
                set_lines(dir, &all);
            },
            "receipt_dropped",
        ),
        (
            "forked_log",
            |dir, log| {
                // The signer signs a second checkpoint of 28 receipts with another root.
                let mut fork = basis_of(&log.checkpoints[2]);
                fork.number = 4;
                fork.root[0] ^= 1;
                fork.time += SECOND;
                put_checkpoint(dir, &log.signer, &fork);
                let mut manifest: serde_json::Value =
                    serde_json::from_slice(&std::fs::read(dir.join("bundle.json")).unwrap()).unwrap();
                manifest["checkpoints"] = serde_json::json!([1, 2, 3, 4]);
                std::fs::write(dir.join("bundle.json"), serde_json::to_string_pretty(&manifest).unwrap()).unwrap();
            },
            "log_forked",
        ),
        (
            "backdated_checkpoint",
            |dir, log| {
                // Checkpoint 3 re-signed with a time before checkpoint 2's.
                let mut basis = basis_of(&log.checkpoints[2]);
                basis.time = log.checkpoints[1].time - SECOND;
                put_checkpoint(dir, &log.signer, &basis);
            },
            "checkpoint_backdated",
        ),
        (
            "swapped_key",
            |dir, log| {
                // Every checkpoint re-signed with another key, and the bundle's key file swapped.
                let thief = NoteSigner::generate("warden.test/corpus").unwrap();
                for cp in &log.checkpoints {
                    put_checkpoint(dir, &thief, &basis_of(cp));
                }
                for entry in std::fs::read_dir(dir.join("keys")).unwrap() {
                    std::fs::write(entry.unwrap().path(), format!("{}\n", thief.verifier().encoded())).unwrap();
                }
            },
            "key_untrusted",
        ),
        (
            "outcome_withheld",
            |dir, log| {
                // Checkpoint 2 re-signed counting the executing effect closed: no receipt says so.
                let mut basis = basis_of(&log.checkpoints[1]);
                basis.open.retain(|open| open.effect_key != "refund:held_1");
                put_checkpoint(dir, &log.signer, &basis);
            },
            "outcome_missing",
        ),
        (
            "edited_policy",
            |dir, _| {
                // The carried policy says deny where the receipts ran under allow.
                let file = carried_policy(dir);
                let text = std::fs::read_to_string(&file).unwrap();
                assert!(text.contains("\"allow\""));
                std::fs::write(&file, text.replace("\"allow\"", "\"deny\"")).unwrap();
            },
            "policy_altered",
        ),
        (
            "edited_anchor",
            |dir, _| {
                // The file anchor's line for checkpoint 2 says it covered one receipt more.
                let path = dir.join("anchors.jsonl");
                let text = std::fs::read_to_string(&path).unwrap();
                let mut edited = false;
                let out: String = text
                    .lines()
                    .map(|line| {
                        let mut value: serde_json::Value = serde_json::from_str(line).unwrap();
                        if !edited && value["kind"] == "file" && value["checkpoint"] == 2 {
                            let receipt = b64(value["receipt"].as_str().unwrap());
                            let receipt = String::from_utf8(receipt).unwrap().replace("\"size\":25", "\"size\":26");
                            value["receipt"] =
                                base64::Engine::encode(&base64::prelude::BASE64_STANDARD, receipt).into();
                            edited = true;
                        }
                        format!("{value}\n")
                    })
                    .collect();
                assert!(edited, "the bundle carries checkpoint 2's file anchor");
                std::fs::write(&path, out).unwrap();
            },
            "anchor_invalid",
        ),
    ]
}

fn b64(text: &str) -> Vec<u8> {
    base64::Engine::decode(&base64::prelude::BASE64_STANDARD, text).unwrap()
}

/// The one policy file a bundle of the log carries.
fn carried_policy(dir: &Path) -> PathBuf {
    let hash = policy().policy_hash;
    dir.join(format!("policies/{}.json", hash.strip_prefix("sha256:").unwrap()))
}

fn edit_manifest(dir: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
    let mut manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("bundle.json")).unwrap()).unwrap();
    edit(&mut manifest);
    std::fs::write(dir.join("bundle.json"), serde_json::to_string_pretty(&manifest).unwrap()).unwrap();
}

fn verdict(dir: &Path, trusted: &NoteVerifier) -> Verdict {
    verify_bundle(dir, std::slice::from_ref(trusted))
}

#[test]
fn a_sound_bundle_verifies_and_every_tamper_class_is_refused_with_its_reason() {
    let log = log();
    let scratch = tempfile::tempdir().unwrap();
    let sound = scratch.path().join("sound");
    let exported = export(&log.f.kernel, &sound, None, None).unwrap();
    assert_eq!((exported.receipts, exported.checkpoints.clone()), (28, vec![1, 2, 3]));
    assert!(export(&log.f.kernel, &sound, None, None).is_err(), "an existing directory is never written into");
    let from = scratch.path().join("from_checkpoint_1");
    assert_eq!(export(&log.f.kernel, &from, Some(1), Some(3)).unwrap().receipts, 8);
    let trusted = log.signer.verifier();
    for dir in [&sound, &from] {
        let verdict = verdict(dir, &trusted);
        assert!(verdict.ok, "{}: {verdict:?}", dir.display());
        assert!(verdict.keys_pinned);
        // Each checkpoint went to the file and the witness; the file lines are checked.
        assert_eq!((verdict.anchors, verdict.anchors_checked), (6, 3), "{}", dir.display());
    }
    let whole = verdict(&sound, &trusted);
    assert_eq!((whole.receipts, whole.checkpoints, whole.open_at_end, whole.closed_without_receipt), (28, 3, 1, 1));
    let unpinned = verify_bundle(&sound, &[]);
    assert!(unpinned.ok && !unpinned.keys_pinned);

    let mut cases: Vec<(String, PathBuf, Option<&str>)> =
        vec![("sound".into(), sound.clone(), None), ("from_checkpoint_1".into(), from.clone(), None)];
    for (name, tamper, reason) in tampers() {
        let dir = scratch.path().join(name);
        copy_dir(&sound, &dir);
        tamper(&dir, &log);
        let verdict = verdict(&dir, &trusted);
        assert_eq!(verdict.reason.as_deref(), Some(reason), "{name}: {verdict:?}");
        assert!(REASONS.contains(&reason));
        cases.push((name.into(), dir, Some(reason)));
    }
    // Without the pinned key, the file anchor's copies of the notes still show them re-signed;
    // without the anchors too, the swapped key goes unseen: the reason the verifier takes one.
    let swapped = scratch.path().join("swapped_key");
    assert_eq!(verify_bundle(&swapped, &[]).reason.as_deref(), Some("anchor_invalid"));
    let unanchored = scratch.path().join("swapped_key_unanchored");
    copy_dir(&swapped, &unanchored);
    std::fs::remove_file(unanchored.join("anchors.jsonl")).unwrap();
    assert!(verify_bundle(&unanchored, &[]).ok);
    // The policies: the one the store kept is carried as its canonical bytes, exactly; the
    // fixture's bare hash, which no store kept, is listed as missing, and the verdict says so.
    let kept = policy();
    assert_eq!(std::fs::read(carried_policy(&sound)).unwrap(), kept.canonical_policy);
    assert_eq!((exported.policies, exported.policies_missing.clone()), (1, vec!["sha256:test".to_owned()]));
    assert_eq!(
        (whole.policies_carried.clone(), whole.policies_missing.clone()),
        (vec![kept.policy_hash.clone()], vec!["sha256:test".to_owned()])
    );
    assert_eq!(std::fs::read_dir(sound.join("policies")).unwrap().count(), 1);
    let from_verdict = verdict(&from, &trusted);
    assert_eq!(
        (from_verdict.policies_carried.len(), from_verdict.policies_missing.len()),
        (1, 1),
        "receipts 21..28 name both"
    );

    if std::env::var_os("WARDEN_UPDATE_CORPUS").is_some() {
        let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join(CORPUS);
        let _ = std::fs::remove_dir_all(&corpus);
        std::fs::create_dir_all(&corpus).unwrap();
        let mut expected = serde_json::Map::new();
        for (name, dir, reason) in &cases {
            copy_dir(dir, &corpus.join(name));
            expected.insert(name.clone(), serde_json::json!({"reason": reason}));
        }
        std::fs::write(corpus.join("trusted.vkey"), format!("{}\n", trusted.encoded())).unwrap();
        std::fs::write(corpus.join("expected.json"), serde_json::to_string_pretty(&expected).unwrap() + "\n").unwrap();
    }
}

#[test]
fn the_committed_corpus_gives_every_verdict_it_expects() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join(CORPUS);
    let trusted = NoteVerifier::parse(&std::fs::read_to_string(corpus.join("trusted.vkey")).unwrap()).unwrap();
    let expected: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(corpus.join("expected.json")).unwrap()).unwrap();
    assert!(expected.len() >= 10, "the corpus holds the sound bundles and the eight tamper classes");
    for (name, want) in expected {
        let verdict = verdict(&corpus.join(&name), &trusted);
        assert_eq!(verdict.reason.as_deref(), want["reason"].as_str(), "{name}: {verdict:?}");
        assert_eq!(verdict.ok, want["reason"].is_null(), "{name}");
    }
}

#[test]
fn an_inclusion_proof_is_at_most_the_trees_height_in_hashes() {
    let log = log();
    let path = log.f.kernel.proof(ProofAsk::Inclusion { seq: 1, size: 28 }).unwrap();
    assert_eq!(path.len(), 5, "28 leaves: a tree of height 5");
    let encoded: Vec<String> = path.iter().map(|h| BASE64_STANDARD.encode(h)).collect();
    assert!(encoded.iter().all(|h| h.len() == 44));
    assert_eq!(log.f.kernel.effect("refund:held_1").unwrap().unwrap().state, EffectState::Executing);
}

#[test]
fn a_bundle_of_checkpoints_with_no_receipts_between_them_is_still_accounted() {
    let log = log();
    let again = log.f.kernel.checkpoint(&log.signer, None).unwrap();
    assert_eq!((again.number, again.size), (4, 28));
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("no_receipts");
    assert_eq!(export(&log.f.kernel, &dir, Some(3), Some(4)).unwrap().receipts, 0);
    let trusted = log.signer.verifier();
    let sound = verdict(&dir, &trusted);
    assert!(sound.ok && sound.receipts == 0 && sound.checkpoints == 2, "{sound:?}");
    // Checkpoint 4 re-signed counting the executing effect closed, with no receipt in between.
    let mut basis = basis_of(&again);
    basis.open.clear();
    put_checkpoint(&dir, &log.signer, &basis);
    assert_eq!(verdict(&dir, &trusted).reason.as_deref(), Some("outcome_missing"));
    // A checkpoint older than where the bundle starts has no receipts to be checked against.
    let older = scratch.path().join("older");
    export(&log.f.kernel, &older, Some(3), Some(4)).unwrap();
    std::fs::write(older.join("checkpoints/000002.note"), &log.checkpoints[1].note).unwrap();
    std::fs::write(older.join("checkpoints/000002.json"), &log.checkpoints[1].companion).unwrap();
    let mut manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(older.join("bundle.json")).unwrap()).unwrap();
    manifest["checkpoints"] = serde_json::json!([2, 3, 4]);
    std::fs::write(older.join("bundle.json"), manifest.to_string()).unwrap();
    let whole = scratch.path().join("whole");
    export(&log.f.kernel, &whole, None, None).unwrap();
    std::fs::copy(
        whole.join("proofs/consistency-000002-000003.json"),
        older.join("proofs/consistency-000002-000003.json"),
    )
    .unwrap();
    let refused = verdict(&older, &trusted);
    assert_eq!(refused.reason.as_deref(), Some("bundle_malformed"), "{refused:?}");
    assert!(
        refused.detail.contains("checkpoint 2 covers 25 receipts, fewer than the 28 the bundle starts after"),
        "{refused:?}"
    );
}

#[test]
fn the_tar_of_a_bundle_unpacks_to_a_bundle_that_verifies_and_is_the_same_every_time() {
    let log = log();
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("bundle");
    export(&log.f.kernel, &dir, None, None).unwrap();
    let (one, two) = (scratch.path().join("one.tar"), scratch.path().join("two.tar"));
    warden::evidence::bundle::write_tar(&dir, &one).unwrap();
    warden::evidence::bundle::write_tar(&dir, &two).unwrap();
    assert_eq!(std::fs::read(&one).unwrap(), std::fs::read(&two).unwrap());
    assert!(warden::evidence::bundle::write_tar(&dir, &one).is_err(), "an existing archive is never overwritten");
    let unpacked = scratch.path().join("unpacked");
    std::fs::create_dir(&unpacked).unwrap();
    let status = std::process::Command::new("tar").arg("-xf").arg(&one).arg("-C").arg(&unpacked).status().unwrap();
    assert!(status.success());
    let verdict = verdict(&unpacked.join("bundle"), &log.signer.verifier());
    assert!(verdict.ok, "{verdict:?}");
    assert_eq!(verdict.receipts, 28);
}

/// `warden --store STORE ARGS --json`: exit code, stdout, stderr.

#[test]
fn the_cli_prints_the_documents_the_library_and_the_c_abi_return_and_refuses_with_exit_2() {
    if common::on_postgres() || common::store_location(Path::new("/x")).starts_with("memory:") {
        return; // another process reaches a file store only
    }
    let log = log();
    let store = log.f.path();
    let kernel = &log.f.kernel;
    let id_of = |seq: u64| {
        let receipt = kernel.receipts(seq, 1).unwrap().remove(0).1;
        receipt.to_json()["receipt_id"].as_str().unwrap().to_owned()
    };
    for (seq, checkpoint) in [(1, None), (20, Some(1)), (25, Some(2)), (28, Some(3))] {
        let id = id_of(seq);
        let mut args = vec!["--json", "proof", "inclusion", id.as_str()];
        let number = checkpoint.map(|n: u64| n.to_string());
        if let Some(number) = &number {
            args.extend(["--checkpoint", number.as_str()]);
        }
        let (code, stdout, stderr) = cli(&store, &args);
        assert_eq!(code, Some(0), "{stderr}");
        let printed: serde_json::Value = serde_json::from_str(&stdout).unwrap();
        let library = warden::evidence::proof::inclusion(kernel, &id, checkpoint).unwrap();
        assert_eq!(printed, library.to_json(), "receipt {seq}");
        let (code, text, _) = cli(&store, &args[1..]);
        assert_eq!(code, Some(0));
        let first = format!(
            "receipt {id} (seq {seq}) is leaf {} of checkpoint {} ({} receipts, root {})",
            seq - 1,
            library.checkpoint,
            library.tree_size,
            library.root
        );
        assert!(text.starts_with(&first), "{text}");
        assert!(text.contains(&format!(
            "audit path, {} hashes ({} bytes):",
            library.proof.len(),
            library.proof.len() * 32
        )));
    }
    let (code, stdout, _) = cli(&store, &["--json", "proof", "consistency", "1", "3"]);
    assert_eq!(code, Some(0));
    let printed: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(printed, warden::evidence::proof::consistency(kernel, 1, 3).unwrap().to_json());
    assert_eq!((printed["old_size"].as_u64(), printed["new_size"].as_u64()), (Some(20), Some(28)));
    let (code, stdout, _) = cli(&store, &["--json", "checkpoints"]);
    assert_eq!(code, Some(0));
    let listed: Vec<serde_json::Value> = log.checkpoints.iter().map(warden::evidence::proof::checkpoint_json).collect();
    assert_eq!(serde_json::from_str::<serde_json::Value>(&stdout).unwrap(), serde_json::json!({"checkpoints": listed}));
    // Refusals are the caller's to fix: exit 2, one line naming what to do.
    let unknown = "rct_00000000000000000000000000000000";
    for (args, words) in [
        (vec!["proof", "inclusion", unknown], "no receipt rct_00000000000000000000000000000000 is on the chain"),
        (
            vec!["proof", "inclusion", unknown, "--checkpoint", "7"],
            "there is no checkpoint 7; `warden checkpoints` lists them",
        ),
        (vec!["proof", "consistency", "3", "1"], "name the older one first"),
    ] {
        let (code, _, stderr) = cli(&store, &args);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(words), "{args:?}: {stderr}");
    }
}

#[test]
fn the_store_keeps_the_policy_a_handle_runs_under_before_its_first_receipt_and_never_rewrites_it() {
    let f = Fixture::new();
    let document = policy();
    let (hash, canonical) = (document.policy_hash.clone(), document.canonical_policy.clone());
    assert_eq!(warden::canonical::sha256_prefixed(&canonical), hash);
    assert_eq!(f.kernel.policy(&hash).unwrap(), None, "a store keeps no policy before a handle runs under it");
    // A read-only handle keeps nothing: it writes no receipt.
    drop(governed(&f, policy(), true).unwrap());
    assert_eq!(f.kernel.policy(&hash).unwrap(), None, "a read-only handle wrote the policy");
    // Opening the handle keeps it, before anything is decided.
    let warden = governed(&f, policy(), false).unwrap();
    assert_eq!(f.kernel.policy(&hash).unwrap().as_deref(), Some(canonical.as_slice()));
    commit_governed(&f, &warden, "p1");
    let receipts = f.kernel.receipts(1, 10).unwrap();
    let named: Vec<serde_json::Value> = receipts
        .iter()
        .map(|(_, receipt)| {
            serde_json::from_str::<serde_json::Value>(&receipt.document).unwrap()["policy_hash"].clone()
        })
        .collect();
    assert!(!named.is_empty() && named.iter().all(|h| h == &serde_json::json!(hash)), "{named:?}");
    // Opening again keeps the same bytes and writes nothing new.
    drop(governed(&f, policy(), false).unwrap());
    assert_eq!(f.kernel.policy(&hash).unwrap().as_deref(), Some(canonical.as_slice()));
    // A hash the store keeps nothing under is absent, not an error.
    assert_eq!(f.kernel.policy("sha256:test").unwrap(), None);

    // Other bytes under the hash (a checksum that matches them): a fault naming the row, on
    // every read and on the next open; never taken for the policy, never overwritten.
    let edited = String::from_utf8(canonical.clone()).unwrap().replace("allow", "deny").into_bytes();
    f.kernel.store().tamper(|t| t.put_policy_row(&hash, &edited)).unwrap();
    let reader = common::open(&f.path(), &f.clock);
    let refused = reader.policy(&hash).unwrap_err();
    common::assert_store_fault(&refused, "policies", &hash);
    assert!(refused.to_string().contains("does not hash to its key"), "{refused}");
    let reopened = governed(&f, policy(), false).map(drop).unwrap_err();
    common::assert_store_fault(&reopened, "policies", &hash);
    let mut kept = None;
    f.kernel.store().tamper(|t| t.policy_row(&hash).map(|row| kept = row)).unwrap();
    assert_eq!(kept, Some(edited), "the row was overwritten");
}

#[test]
fn a_bundle_whose_policies_do_not_add_up_is_refused_naming_what_is_wrong() {
    let log = log();
    let scratch = tempfile::tempdir().unwrap();
    let sound = scratch.path().join("sound");
    export(&log.f.kernel, &sound, None, None).unwrap();
    let trusted = log.signer.verifier();
    let hash = policy().policy_hash;
    type Change = Box<dyn Fn(&Path)>;
    // (what is changed, the reason, words the detail must hold)
    let cases: Vec<(&str, Change, &str, &str)> = vec![
        (
            "the carried file removed",
            Box::new(|dir: &Path| std::fs::remove_file(carried_policy(dir)).unwrap()),
            "bundle_malformed",
            "cannot read policies/",
        ),
        (
            "the carried file emptied",
            Box::new(|dir: &Path| std::fs::write(carried_policy(dir), b"").unwrap()),
            "policy_altered",
            "does not hash to",
        ),
        (
            "a trailing newline",
            Box::new(|dir: &Path| {
                let mut bytes = std::fs::read(carried_policy(dir)).unwrap();
                bytes.push(b'\n');
                std::fs::write(carried_policy(dir), bytes).unwrap();
            }),
            "policy_altered",
            "does not hash to",
        ),
        (
            "the missing one claimed carried",
            Box::new(|dir: &Path| edit_manifest(dir, |m| m["policies_missing"] = serde_json::json!([]))),
            "bundle_malformed",
            "no file can carry",
        ),
        (
            "the carried one claimed missing",
            Box::new({
                let hash = hash.clone();
                move |dir: &Path| {
                    edit_manifest(dir, |m| m["policies_missing"] = serde_json::json!(["sha256:test", hash]));
                }
            }),
            "",
            "",
        ),
        (
            "a missing one not among the policies",
            Box::new(|dir: &Path| {
                edit_manifest(dir, |m| m["policies_missing"] = serde_json::json!(["sha256:test", "sha256:other"]));
            }),
            "bundle_malformed",
            "not among the policies",
        ),
        (
            "a policy listed twice",
            Box::new({
                let hash = hash.clone();
                move |dir: &Path| edit_manifest(dir, |m| m["policies"] = serde_json::json!(["sha256:test", hash, hash]))
            }),
            "bundle_malformed",
            "twice",
        ),
        (
            "a named policy not listed",
            Box::new(|dir: &Path| edit_manifest(dir, |m| m["policies"] = serde_json::json!(["sha256:test"]))),
            "bundle_malformed",
            "which bundle.json does not list",
        ),
        (
            "a listed policy no receipt names",
            Box::new({
                let hash = hash.clone();
                move |dir: &Path| {
                    edit_manifest(dir, |m| m["policies"] = serde_json::json!(["sha256:test", "sha256:unnamed", hash]));
                }
            }),
            "bundle_malformed",
            "which no receipt names",
        ),
        (
            "no policies_missing member",
            Box::new(|dir: &Path| {
                edit_manifest(dir, |m| {
                    m.as_object_mut().unwrap().remove("policies_missing");
                });
            }),
            "bundle_malformed",
            "policies_missing",
        ),
    ];
    for (what, change, reason, words) in cases {
        let dir = scratch.path().join(what.replace(' ', "_"));
        copy_dir(&sound, &dir);
        change(&dir);
        let verdict = verdict(&dir, &trusted);
        if reason.is_empty() {
            // Saying a carried policy is missing hides nothing: the verdict says it is not shown.
            assert!(verdict.ok, "{what}: {verdict:?}");
            assert_eq!((verdict.policies_carried.len(), verdict.policies_missing.len()), (0, 2), "{what}");
            continue;
        }
        assert_eq!(verdict.reason.as_deref(), Some(reason), "{what}: {verdict:?}");
        assert!(verdict.detail.contains(words), "{what}: {}", verdict.detail);
        assert!(verdict.policies_carried.is_empty() && verdict.policies_missing.is_empty(), "{what}");
    }
}
