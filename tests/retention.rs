//! Retention: `Kernel::prune` deletes a prefix of the receipts and the events of its time only
//! once a checkpoint covering it was anchored and no hold stands, writes its own receipt in the
//! same transaction, and leaves everything after the prefix provable: the chain, inclusion and
//! consistency proofs, new checkpoints, and an exported bundle `verify_bundle` accepts. The
//! effects stay: a pruned committed effect is still a duplicate, a pruned FAILED one may retry.

mod common;

use std::path::Path;
use std::sync::Arc;
use warden::test_support::KernelInternals;

use base64::prelude::{Engine, BASE64_STANDARD};
use common::{allow, cli, key_template, refund, Fixture, SECOND};
use warden::evidence::anchor::FileSink;
use warden::evidence::anchoring::SinkProvider;
use warden::evidence::bundle::{export, verify_bundle};
use warden::evidence::checkpoint::StoredCheckpoint;
use warden::evidence::key::NoteSigner;
use warden::evidence::retention::{HOLD_PLACE_ACTION, HOLD_RELEASE_ACTION, PRUNE_ACTION};
use warden::evidence::tree::{check_consistency, check_inclusion, leaf_hash};
use warden::kernel::ProofAsk;
use warden::Error;

fn commit(f: &Fixture, payment: &str) {
    let t = key_template();
    let permit = f.kernel.propose(&allow(&refund(payment, 100), &t)).expect("propose");
    permit.commit(&serde_json::json!({"ok": payment})).expect("commit");
    f.clock.advance(SECOND);
}

fn sinks(f: &Fixture) -> Vec<SinkProvider> {
    let file = f.dir.path().join("anchors.jsonl");
    vec![(format!("file {}", file.display()), Ok(Arc::new(FileSink::new(file))))]
}

fn root(cp: &StoredCheckpoint) -> [u8; 32] {
    BASE64_STANDARD.decode(&cp.root).expect("base64").try_into().expect("32 bytes")
}

fn refused(result: Result<warden::kernel::RetentionDone, Error>) -> String {
    match result {
        Err(error @ (Error::InvalidInput(_) | Error::NotFound(_))) => error.to_string(),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn document(f: &Fixture, seq: u64) -> serde_json::Value {
    let rows = f.kernel.receipts(seq, 1).expect("receipts");
    let (at, receipt) = rows.first().expect("a receipt");
    assert_eq!(*at, seq);
    serde_json::from_str(&receipt.document).expect("json")
}

/// 10 receipts (the first a FAILED attempt), checkpoint 1 (anchored at once when
/// `anchor_first`); 10 more, checkpoint 2; 5 more, checkpoint 3.
fn log(f: &Fixture, signer: &NoteSigner, anchor_first: bool) -> Vec<StoredCheckpoint> {
    let t = key_template();
    let permit = f.kernel.propose(&allow(&refund("failed_1", 5), &t)).expect("propose");
    permit.not_executed("card declined").expect("not executed");
    f.clock.advance(SECOND);
    let mut checkpoints = Vec::new();
    for n in 2..=25 {
        commit(f, &format!("p{n}"));
        if n == 10 || n == 20 || n == 25 {
            checkpoints.push(f.kernel.checkpoint(signer, Some("warden.test/retention")).expect("checkpoint"));
            if n == 10 && anchor_first {
                let tries = f.kernel.anchor_pending(&sinks(f), false).expect("anchor");
                assert_eq!(tries.iter().map(|t| t.row.checkpoint).collect::<Vec<_>>(), [1]);
            }
        }
    }
    checkpoints
}

#[test]
fn a_prune_waits_for_an_anchor_and_every_hold_then_deletes_the_prefix_and_the_rest_still_proves() {
    let f = Fixture::new();
    let signer = NoteSigner::generate("warden.test/retention").expect("key");
    let cps = log(&f, &signer, true);
    let (two, three) = (&cps[1], &cps[2]);
    assert_eq!((cps[0].size, two.size, three.size), (10, 20, 25));

    // Only checkpoint 1 is anchored, which does not vouch for checkpoint 2: refused, and nothing
    // changed.
    let why = refused(f.kernel.prune(2, "ada", "quarterly retention"));
    assert!(why.contains("neither checkpoint 2 nor any later one was anchored"), "{why}");
    assert_eq!(f.kernel.receipt_count().unwrap(), 25);
    assert!(refused(f.kernel.prune(9, "ada", "x")).contains("there is no checkpoint 9"));

    // The sink goes on with checkpoints 2 and 3; a hold stops the prune.
    let tries = f.kernel.anchor_pending(&sinks(&f), false).expect("anchor");
    assert_eq!(tries.iter().filter(|t| t.row.anchored()).map(|t| t.row.checkpoint).collect::<Vec<_>>(), [2, 3]);
    let placed = f.kernel.place_hold("case-17", "bob", "litigation hold").expect("hold");
    assert_eq!(placed.receipt_seq, 26);
    let why = refused(f.kernel.prune(2, "ada", "quarterly retention"));
    assert!(why.contains("the hold \"case-17\" placed by bob") && why.contains("litigation hold"), "{why}");
    assert_eq!(f.kernel.receipt_count().unwrap(), 26, "a refused prune deletes nothing");
    let released = f.kernel.release_hold("case-17", "bob", "case settled").expect("release");
    assert_eq!(released.receipt_seq, 27);

    // The prune: its own receipt at 28, receipts 1..=20 and their events gone.
    let events_before = f.kernel.events(0, usize::MAX).expect("events");
    let finished_20 = warden::clock::parse(document(&f, 20)["finished_at"].as_str().expect("time")).expect("time");
    let done = f.kernel.prune(2, "ada", "quarterly retention").expect("prune");
    assert_eq!((done.receipt_seq, done.receipts_deleted), (28, 20));
    let prefix = done.pruned.clone().expect("prefix");
    assert_eq!((prefix.checkpoint, prefix.through_seq, prefix.receipt_seq), (2, 20, 28));
    assert_eq!(f.kernel.pruned().unwrap(), Some(prefix.clone()));
    assert_eq!(f.kernel.receipt_count().unwrap(), 8);
    assert!(f.kernel.receipts(1, 1).unwrap().first().is_some_and(|(seq, _)| *seq == 21));
    let receipt = document(&f, 28);
    assert_eq!(
        (
            receipt["action"].as_str(),
            receipt["principal"]["user"].as_str(),
            receipt["arguments"]["through_seq"].as_u64()
        ),
        (Some(PRUNE_ACTION), Some("ada"), Some(20))
    );
    assert_eq!(receipt["arguments"]["last_hash"].as_str(), Some(prefix.last_hash.as_str()));
    assert_eq!(document(&f, 26)["action"].as_str(), Some(HOLD_PLACE_ACTION));
    assert_eq!(document(&f, 27)["action"].as_str(), Some(HOLD_RELEASE_ACTION));
    assert_eq!(document(&f, 21)["prev_hash"].as_str(), Some(prefix.last_hash.as_str()));
    // Events: exactly those written by receipt 20's finish went, the first kept follows them.
    let expected_through = events_before.iter().filter(|e| e.ts <= finished_20).map(|e| e.event_id).max().unwrap();
    assert_eq!(prefix.events_through, expected_through);
    let events = f.kernel.events(0, usize::MAX).expect("events");
    assert_eq!(events.first().map(|e| e.event_id), Some(expected_through + 1));
    assert!(events.iter().any(|e| e.kind.as_str() == "RECEIPTS_PRUNED"));

    // The chain verifies from where the prune left it, and doctor finds nothing wrong.
    let chain = f.kernel.verify_chain().expect("chain");
    assert!(chain.ok, "{:?}", chain.breaks);
    assert_eq!((chain.verified, chain.pruned_through, chain.head_seq), (8, 20, Some(28)));
    let doctor = f.kernel.doctor().expect("doctor");
    assert!(doctor.chain.ok && doctor.orphans.is_empty(), "{:?}", doctor.orphans);
    assert!(doctor.tables.iter().all(|(_, _, problems)| problems.is_empty()), "{:?}", doctor.tables);

    // Proofs past the prefix verify against the signed roots; before it they are refused.
    let leaf = |seq: u64| {
        let (_, receipt) = f.kernel.receipts(seq, 1).unwrap().remove(0);
        leaf_hash(receipt.document.as_bytes())
    };
    for seq in [21, 24, 25] {
        let path = f.kernel.proof(ProofAsk::Inclusion { seq, size: three.size }).expect("inclusion");
        assert!(check_inclusion(&path, three.size, root(three), seq - 1, leaf(seq)), "receipt {seq}");
    }
    let proof = f.kernel.proof(ProofAsk::Consistency { old: two.size, new: three.size }).expect("consistency");
    assert!(check_consistency(&proof, two.size, root(two), three.size, root(three)));
    for ask in [ProofAsk::Inclusion { seq: 5, size: 25 }, ProofAsk::Consistency { old: 10, new: 25 }] {
        let error = f.kernel.proof(ask).unwrap_err().to_string();
        assert!(error.contains("was pruned"), "{error}");
    }
    // A new checkpoint is made over the frontier and the receipts kept, and extends the last.
    let four = f.kernel.checkpoint(&signer, None).expect("checkpoint after the prune");
    assert_eq!(four.size, 28);
    let proof = f.kernel.proof(ProofAsk::Consistency { old: three.size, new: four.size }).expect("consistency");
    assert!(check_consistency(&proof, three.size, root(three), four.size, root(&four)));

    // The bundle starts at the checkpoint pruned through and verifies; an earlier start is refused.
    let out = f.dir.path().join("bundle");
    let exported = export(&f.kernel, &out, None, None).expect("export");
    assert_eq!((exported.receipts, exported.checkpoints.clone()), (8, vec![2, 3, 4]));
    let verdict = verify_bundle(&out, &[signer.verifier()]);
    assert!(verdict.ok, "{verdict:?}");
    let error = export(&f.kernel, &f.dir.path().join("early"), Some(1), None).unwrap_err().to_string();
    assert!(error.contains("--from 1: its receipts were pruned") && error.contains("export --from 2"), "{error}");
    assert!(!f.dir.path().join("early").exists());

    // Effects stay: a committed one whose receipt went is still a duplicate; a FAILED one may go again.
    let t = key_template();
    let again = f.kernel.propose(&allow(&refund("p5", 100), &t)).map(drop).unwrap_err();
    assert!(matches!(again, Error::Duplicate { .. }), "{again:?}");
    let kept = f.kernel.effect("refund:p5").unwrap().expect("the effect row stays");
    assert_eq!(kept.result.map(|r| r.to_value()), Some(serde_json::json!({"ok": "p5"})), "its result is kept");
    let retry = f.kernel.propose(&allow(&refund("failed_1", 5), &t)).expect("the FAILED effect retries");
    assert_eq!(retry.attempt(), 2);
    retry.commit(&serde_json::json!({"ok": 1})).expect("commit");

    // The same prefix again is refused; reopening the store checks it as it opens.
    assert!(refused(f.kernel.prune(2, "ada", "again")).contains("pruned already"));
    if !f.path().to_string_lossy().starts_with("memory:") {
        let path = f.path();
        let Fixture { kernel, clock, dir, .. } = f;
        drop(kernel);
        let kernel = common::open(&path, &clock);
        assert!(kernel.verify_chain().unwrap().ok);
        assert_eq!(kernel.pruned().unwrap().map(|p| p.through_seq), Some(20));
        drop(dir);
    }
}

#[test]
fn a_second_prune_goes_on_from_the_first_and_damage_after_a_prune_is_still_a_fault() {
    let f = Fixture::new();
    let signer = NoteSigner::generate("warden.test/retention").expect("key");
    log(&f, &signer, false);
    f.kernel.anchor_pending(&sinks(&f), false).expect("anchor");
    let first = f.kernel.prune(1, "ada", "first").expect("prune through 1");
    let second = f.kernel.prune(2, "ada", "second").expect("prune through 2");
    assert_eq!((first.receipts_deleted, second.receipts_deleted), (10, 10));
    let (one, two) = (first.pruned.unwrap(), second.pruned.unwrap());
    assert!(two.events_through >= one.events_through);
    let three = f.kernel.checkpoint_numbered(Some(3)).unwrap().unwrap();
    let leaf = |seq: u64| leaf_hash(f.kernel.receipts(seq, 1).unwrap().remove(0).1.document.as_bytes());
    let path = f.kernel.proof(ProofAsk::Inclusion { seq: 21, size: three.size }).expect("inclusion");
    assert!(check_inclusion(&path, three.size, root(&three), 20, leaf(21)));
    // A checkpoint at the head, anchored, and a prune through it: only its own receipt is left.
    let head = f.kernel.checkpoint(&signer, None).expect("checkpoint at the head");
    assert_eq!(head.size, 27);
    f.kernel.anchor_pending(&sinks(&f), false).expect("anchor");
    let third = f.kernel.prune(head.number, "ada", "everything").expect("prune through the head");
    assert_eq!((third.receipts_deleted, third.receipt_seq), (7, 28));
    assert_eq!(f.kernel.receipt_count().unwrap(), 1);
    let last = f.kernel.checkpoint(&signer, None).expect("a checkpoint of the prune's receipt");
    let proof = f.kernel.proof(ProofAsk::Consistency { old: head.size, new: last.size }).expect("consistency");
    assert!(check_consistency(&proof, head.size, root(&head), last.size, root(&last)));
    // Checkpoint 3 is before the prefix now: its consistency needs receipts that are gone.
    let error = f.kernel.proof(ProofAsk::Consistency { old: three.size, new: last.size }).unwrap_err().to_string();
    assert!(error.contains("receipt 25 was pruned"), "{error}");
    let out = f.dir.path().join("bundle");
    export(&f.kernel, &out, None, None).expect("export");
    assert!(verify_bundle(&out, &[signer.verifier()]).ok);
    let error = export(&f.kernel, &f.dir.path().join("old"), None, Some(3)).unwrap_err().to_string();
    assert!(error.contains("--to 3: its receipts were pruned"), "{error}");
    if !f.path().to_string_lossy().starts_with("memory:") {
        let path = f.path();
        let Fixture { kernel, clock, dir, .. } = f;
        drop(kernel);
        let kernel = common::open(&path, &clock);
        assert_eq!(kernel.verify_chain().unwrap().pruned_through, 27);
        assert!(kernel.doctor().unwrap().orphans.is_empty());
        drop(dir);
    }
}

/// A store with the log pruned through checkpoint 2 (receipts 1..=20; the prune's own is 26).
fn pruned(signer: &NoteSigner) -> Fixture {
    let f = Fixture::new();
    log(&f, signer, false);
    f.kernel.anchor_pending(&sinks(&f), false).expect("anchor");
    f.kernel.prune(2, "ada", "retention").expect("prune");
    f
}

#[test]
fn after_a_prune_an_edited_effect_or_a_missing_receipt_is_still_damage() {
    let signer = NoteSigner::generate("warden.test/retention").expect("key");
    // A committed effect whose receipt was pruned, its row edited to FAILED: what the prune kept
    // of its receipt still says committed, so it never runs again (and the handle stops).
    let f = pruned(&signer);
    let mut row = f.kernel.effect("refund:p5").unwrap().unwrap();
    row.state = warden::EffectState::Failed;
    f.kernel.store().tamper(|raw| raw.put_effect(&row)).unwrap();
    let again = f.kernel.propose(&allow(&refund("p5", 100), &key_template())).map(drop).unwrap_err();
    assert!(
        again.to_string().contains("says failed, but receipt 5 on the chain says the effect committed"),
        "{again:?}"
    );
    // A receipt kept that goes missing is reported as before.
    let f = pruned(&signer);
    f.kernel.store().tamper(|raw| raw.remove_receipt(24)).unwrap();
    let chain = f.kernel.verify_chain().unwrap();
    assert_eq!(chain.breaks.first().map(|b| (b.name, b.seq)), Some(("missing", Some(24))));
    // The first receipt kept, or the prune's own, missing: the pruned prefix is damage.
    for (seq, words) in [(21, "the first receipt kept is Some(22)"), (26, "names receipt 26 as the prune's own")] {
        let f = pruned(&signer);
        f.kernel.store().tamper(|raw| raw.remove_receipt(seq)).unwrap();
        let error = f.kernel.verify_chain().unwrap_err().to_string();
        assert!(error.contains(words) && error.contains("meta"), "{seq}: {error}");
    }
}

#[test]
fn holds_stand_once_by_name_release_by_name_and_are_kept_as_history() {
    let f = Fixture::new();
    f.kernel.place_hold("audit:2026", "carol", "annual audit").expect("place");
    assert!(refused(f.kernel.place_hold("audit:2026", "dave", "again")).contains("stands already"));
    assert!(refused(f.kernel.release_hold("audit:2027", "carol", "done")).contains("no hold named \"audit:2027\""));
    for (name, by, reason, words) in [
        ("two words", "carol", "x", "a hold name is"),
        ("", "carol", "x", "a hold name is"),
        ("ok", "", "x", "--by must be a non-empty name"),
        ("ok", "carol", " ", "--reason must be a non-empty name"),
        ("ok", "carol\u{202e}", "x", "--by contains the control or format character U+202E"),
    ] {
        let why = refused(f.kernel.place_hold(name, by, reason));
        assert!(why.contains(words), "{name:?} {by:?} {reason:?}: {why}");
    }
    assert_eq!(f.kernel.receipt_count().unwrap(), 1, "a refusal writes no receipt");
    f.kernel.release_hold("audit:2026", "carol", "audit closed").expect("release");
    assert!(refused(f.kernel.release_hold("audit:2026", "carol", "twice")).contains("no hold named"));
    let holds = f.kernel.holds().expect("holds");
    assert_eq!(holds.len(), 1);
    let release = holds[0].released.as_ref().expect("released");
    assert_eq!((release.by.as_str(), release.reason.as_str(), holds[0].stands()), ("carol", "audit closed", false));
    // A released name may stand again.
    f.kernel.place_hold("audit:2026", "dave", "reopened").expect("place again");
    assert!(f.kernel.holds().unwrap()[0].stands());
    assert_eq!(f.kernel.receipt_count().unwrap(), 3);
    assert!(f.kernel.verify_chain().unwrap().ok);
}

#[test]
fn the_cli_refuses_a_prune_under_a_hold_with_exit_1_and_a_bad_name_with_exit_2() {
    if common::on_postgres() || common::store_location(Path::new("/x")).starts_with("memory:") {
        return; // another process reaches a file store only
    }
    let f = Fixture::new();
    let signer = NoteSigner::generate("warden.test/retention").expect("key");
    log(&f, &signer, false);
    f.kernel.anchor_pending(&sinks(&f), false).expect("anchor");
    let store = f.path();
    // This process stays the store's owner: every command below is a client, its retention
    // writes and reads crossing the owner's socket.
    let (code, out, err) = cli(&store, &["hold", "place", "case-1", "--by", "bob", "--reason", "litigation"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.starts_with("hold case-1 placed"), "{out}");
    let (code, out, err) = cli(&store, &["prune", "--through", "2", "--by", "ada", "--reason", "retention"]);
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(err.contains("the hold \"case-1\" placed by bob"), "{err}");
    let (code, out, _) = cli(&store, &["--json", "hold", "list"]);
    assert_eq!(code, Some(0));
    let listed: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(listed["holds"][0]["name"], "case-1");
    assert_eq!(listed["holds"][0]["standing"], true);
    let (code, _, err) = cli(&store, &["hold", "place", "a b", "--by", "bob", "--reason", "x"]);
    assert_eq!(code, Some(2), "{err}");
    let (code, _, _) = cli(&store, &["hold", "release", "case-1", "--by", "bob", "--reason", "settled"]);
    assert_eq!(code, Some(0));
    let (code, out, err) = cli(&store, &["prune", "--through", "2", "--by", "ada", "--reason", "retention"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.starts_with("pruned 20 receipts"), "{out}");
    let (code, out, err) = cli(&store, &["doctor"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("retention        receipts 1..=20 pruned through checkpoint 2"), "{out}");
    assert!(out.contains("; no hold stands"), "{out}");
    let (code, out, _) = cli(&store, &["hold", "list", "--all"]);
    assert_eq!(code, Some(0));
    assert!(out.contains("case-1") && out.contains("released"), "{out}");
    // The owner sees what the clients wrote.
    assert_eq!(f.kernel.pruned().unwrap().map(|p| (p.checkpoint, p.through_seq)), Some((2, 20)));
    assert_eq!(f.kernel.holds().unwrap().len(), 1);
    assert!(f.kernel.verify_chain().unwrap().ok);
}
