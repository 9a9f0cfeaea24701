//! `warden_proof_inclusion`, `warden_proof_consistency` and `warden_checkpoints`: the documents
//! the CLI prints (`evidence::proof`), proofs that verify against the signed notes, and each
//! refusal as its own code with a message that says what to do.

use std::ptr;

use serde_json::{json, Value};

use super::super::evidence::*;
use super::super::result::*;
use super::{commit, free, open, propose, refund, with_out, Failure, Handle, POLICY};
use crate::evidence::checkpoint::{self, decode_hash};
use crate::evidence::key::{open_note, NoteSigner};
use crate::evidence::proof;
use crate::evidence::tree::{check_consistency, check_inclusion, leaf_hash};

/// A store with checkpoint 1 at 5 receipts, checkpoints 2 and 3 both at 8, and a ninth receipt
/// no checkpoint covers yet.
struct Log {
    handle: Handle,
    signer: NoteSigner,
    /// Receipt ids by seq - 1.
    receipts: Vec<String>,
}

fn refunds(handle: &Handle, from: u32, to: u32) {
    for n in from..=to {
        let permit = propose(handle, &refund(&format!("pay_ev{n}"), 100)).expect("allowed");
        commit(permit, r#"{"ok": true}"#).expect("committed");
        free(permit);
    }
}

fn kernel(handle: &Handle) -> &crate::Kernel {
    // SAFETY: a live handle from `warden_open`, borrowed while `handle` lives.
    &unsafe { &*handle.raw }.kernel
}

fn receipt_id(receipt: &crate::receipt::StoredReceipt) -> String {
    receipt.to_json()["receipt_id"].as_str().expect("a receipt id").to_owned()
}

fn log() -> Log {
    let handle = open(Some(POLICY));
    let signer = NoteSigner::generate("warden.test/ffi").expect("key");
    refunds(&handle, 1, 5);
    kernel(&handle).checkpoint(&signer, Some("warden.test/ffi")).expect("checkpoint 1");
    refunds(&handle, 6, 8);
    kernel(&handle).checkpoint(&signer, None).expect("checkpoint 2");
    kernel(&handle).checkpoint(&signer, None).expect("checkpoint 3");
    refunds(&handle, 9, 9);
    let receipts = kernel(&handle)
        .receipts(1, 100)
        .expect("receipts")
        .into_iter()
        .map(|(_, receipt)| receipt_id(&receipt))
        .collect();
    Log { handle, signer, receipts }
}

fn inclusion(handle: &Handle, id: &[u8], checkpoint: u64) -> Result<Value, Failure> {
    // SAFETY: a live handle, a live byte slice and writable out-parameters.
    with_out(|out, err| unsafe { warden_proof_inclusion(handle.raw, id.as_ptr(), id.len(), checkpoint, out, err) })
        .map(|owned| owned.json())
}

fn consistency(handle: &Handle, old: u64, new: u64) -> Result<Value, Failure> {
    // SAFETY: a live handle and writable out-parameters.
    with_out(|out, err| unsafe { warden_proof_consistency(handle.raw, old, new, out, err) }).map(|owned| owned.json())
}

fn checkpoints(handle: &Handle, from: u64, limit: u64) -> Result<Value, Failure> {
    // SAFETY: a live handle and writable out-parameters.
    with_out(|out, err| unsafe { warden_checkpoints(handle.raw, from, limit, out, err) }).map(|owned| owned.json())
}

fn hash(value: &Value) -> [u8; 32] {
    decode_hash(value.as_str().expect("a base64 hash")).expect("a SHA-256")
}

fn path(document: &Value) -> Vec<[u8; 32]> {
    document.as_array().expect("a proof array").iter().map(hash).collect()
}

/// The root a checkpoint's signed note states, read from the note with the signer's key.
fn signed_root(log: &Log, number: u64) -> ([u8; 32], u64) {
    let listed = checkpoints(&log.handle, number, 1).expect("listed");
    let note = listed[0]["note"].as_str().expect("a note");
    let text = open_note(note.as_bytes(), &[log.signer.verifier()]).expect("signed by the log's key");
    let body = checkpoint::parse(&text).expect("a checkpoint");
    (body.root, body.size)
}

#[test]
fn an_inclusion_proof_is_the_cli_document_and_verifies_against_the_signed_note() {
    let log = log();
    // (receipt seq, checkpoint asked, checkpoint answered, tree size)
    let cases = [(1, 0, 3, 8), (5, 1, 1, 5), (5, 2, 2, 8), (8, 0, 3, 8), (8, 3, 3, 8), (6, 2, 2, 8)];
    for (seq, asked, answered, size) in cases {
        let id = &log.receipts[seq - 1];
        let got = inclusion(&log.handle, id.as_bytes(), asked).expect("a proof");
        let library = proof::inclusion(kernel(&log.handle), id, (asked != 0).then_some(asked)).expect("library");
        assert_eq!(got, library.to_json(), "the CLI's document, receipt {seq} in checkpoint {asked}");
        assert_eq!(
            (got["receipt_id"].as_str(), got["seq"].as_u64(), got["leaf_index"].as_u64()),
            (Some(id.as_str()), Some(seq as u64), Some(seq as u64 - 1))
        );
        assert_eq!((got["checkpoint"].as_u64(), got["tree_size"].as_u64()), (Some(answered), Some(size)));
        let hashes = path(&got["proof"]);
        assert_eq!(got["proof_bytes"].as_u64(), Some(hashes.len() as u64 * 32));
        let document = kernel(&log.handle).receipts(seq as u64, 1).expect("receipt").remove(0).1.document;
        let leaf = leaf_hash(document.as_bytes());
        assert_eq!(hash(&got["leaf_hash"]), leaf, "the leaf is the receipt's document");
        let (root, signed_size) = signed_root(&log, answered);
        assert_eq!((hash(&got["root"]), signed_size), (root, size), "the root and size the note signs");
        assert!(check_inclusion(&hashes, size, root, seq as u64 - 1, leaf), "receipt {seq} in checkpoint {answered}");
        for at in 0..hashes.len() {
            let mut flipped = hashes.clone();
            flipped[at][0] ^= 1;
            assert!(!check_inclusion(&flipped, size, root, seq as u64 - 1, leaf), "a flipped hash {at} is refused");
        }
        assert!(!check_inclusion(&hashes, size, root, seq as u64 % size, leaf), "the path proves no other place");
    }
}

#[test]
fn a_consistency_proof_is_the_cli_document_and_links_the_signed_roots() {
    let log = log();
    // (old, new, proof hashes: none for equal sizes)
    for (old, new, empty) in [(1, 2, false), (1, 3, false), (2, 3, true), (3, 3, true), (1, 1, true), (3, 2, true)] {
        let got = consistency(&log.handle, old, new).expect("a proof");
        assert_eq!(got, proof::consistency(kernel(&log.handle), old, new).expect("library").to_json(), "{old} → {new}");
        let ((old_root, old_size), (new_root, new_size)) = (signed_root(&log, old), signed_root(&log, new));
        assert_eq!(
            (got["old_size"].as_u64(), got["new_size"].as_u64(), hash(&got["old_root"]), hash(&got["new_root"])),
            (Some(old_size), Some(new_size), old_root, new_root)
        );
        let hashes = path(&got["proof"]);
        assert_eq!(hashes.is_empty(), empty, "{old} → {new}: {got}");
        assert!(check_consistency(&hashes, old_size, old_root, new_size, new_root), "{old} → {new}");
        for at in 0..hashes.len() {
            let mut flipped = hashes.clone();
            flipped[at][31] ^= 0x80;
            assert!(!check_consistency(&flipped, old_size, old_root, new_size, new_root), "flipped hash {at}");
        }
    }
}

#[test]
fn checkpoints_are_listed_from_a_number_up_to_a_limit_with_no_secret() {
    let log = log();
    for (from, limit, numbers) in [
        (0, 0, vec![1, 2, 3]),
        (1, 0, vec![1, 2, 3]),
        (2, 0, vec![2, 3]),
        (1, 2, vec![1, 2]),
        (3, 5, vec![3]),
        (4, 0, vec![]),
        (u64::MAX, 1, vec![]),
    ] {
        let listed = checkpoints(&log.handle, from, limit).expect("listed");
        let got: Vec<u64> =
            listed.as_array().expect("an array").iter().filter_map(|cp| cp["number"].as_u64()).collect();
        assert_eq!(got, numbers, "from {from}, limit {limit}");
    }
    let all = checkpoints(&log.handle, 1, 0).expect("listed");
    let library: Vec<Value> =
        kernel(&log.handle).checkpoints(1, 10).expect("rows").iter().map(proof::checkpoint_json).collect();
    assert_eq!(all, Value::Array(library), "each object as `warden checkpoints --json` lists it");
    let verifier = log.signer.verifier().encoded();
    for cp in all.as_array().expect("an array") {
        assert_eq!(cp["verifier_key"], json!(verifier));
        assert_eq!(cp["origin"], "warden.test/ffi");
    }
    assert!(!all.to_string().contains("PRIVATE+KEY"), "no signing key crosses the boundary");
}

#[test]
fn each_refusal_has_its_code_and_a_message_that_says_what_to_do() {
    let log = log();
    let covered = log.receipts[0].clone();
    let uncovered = log.receipts[8].clone();
    let unknown = "rct_00000000000000000000000000000000";
    // (the call, its code, words its message holds)
    let cases: Vec<(&str, Result<Value, Failure>, warden_result, &str)> = vec![
        ("unknown receipt", inclusion(&log.handle, unknown.as_bytes(), 0), WARDEN_RESULT_NOT_FOUND, "no receipt rct_0"),
        (
            "a receipt after the last checkpoint",
            inclusion(&log.handle, uncovered.as_bytes(), 0),
            WARDEN_RESULT_NOT_FOUND,
            "came after checkpoint 3 (8 receipts); name a later checkpoint, or make one",
        ),
        (
            "a receipt after the named checkpoint",
            inclusion(&log.handle, log.receipts[6].as_bytes(), 1),
            WARDEN_RESULT_NOT_FOUND,
            "came after checkpoint 1 (5 receipts)",
        ),
        (
            "no such checkpoint",
            inclusion(&log.handle, covered.as_bytes(), 4),
            WARDEN_RESULT_NOT_FOUND,
            "there is no checkpoint 4; `warden checkpoints` lists them",
        ),
        ("an id that is not UTF-8", inclusion(&log.handle, b"rct_\xff", 0), WARDEN_RESULT_INVALID_INPUT, "UTF-8"),
        (
            "checkpoints newest first",
            consistency(&log.handle, 2, 1),
            WARDEN_RESULT_INVALID_INPUT,
            "checkpoint 2 covers 8 receipts, more than checkpoint 1 (5); name the older one first",
        ),
        ("old is 0", consistency(&log.handle, 0, 2), WARDEN_RESULT_INVALID_INPUT, "old_checkpoint is 0"),
        ("new is 0", consistency(&log.handle, 1, 0), WARDEN_RESULT_INVALID_INPUT, "new_checkpoint is 0"),
        ("no such newer checkpoint", consistency(&log.handle, 1, 9), WARDEN_RESULT_NOT_FOUND, "no checkpoint 9"),
    ];
    for (what, result, code, words) in cases {
        let failed = result.expect_err(what);
        assert_eq!(failed.code, code, "{what}: {:?}", failed.error);
        assert_eq!(failed.error["code"], name_str(code), "{what}");
        let message = failed.error["message"].as_str().unwrap_or_default();
        assert!(message.contains(words), "{what}: {message:?} lacks {words:?}");
    }
    // The refusals above read only: every proof still comes out.
    assert!(inclusion(&log.handle, covered.as_bytes(), 0).is_ok());
}

#[test]
fn a_store_with_no_checkpoint_says_how_to_make_one() {
    let handle = open(Some(POLICY));
    refunds(&handle, 1, 1);
    let id = receipt_id(&kernel(&handle).receipts(1, 1).expect("receipt").remove(0).1);
    let failed = inclusion(&handle, id.as_bytes(), 0).expect_err("no checkpoint");
    assert_eq!(failed.code, WARDEN_RESULT_NOT_FOUND);
    assert_eq!(
        failed.error["message"],
        "the store has no checkpoint yet; make one with `warden checkpoint --key FILE`"
    );
    assert_eq!(consistency(&handle, 1, 1).expect_err("none").code, WARDEN_RESULT_NOT_FOUND);
    assert_eq!(checkpoints(&handle, 1, 0).expect("listed"), json!([]));
}

#[test]
fn null_pointers_are_refused_before_any_read() {
    let log = log();
    let id = log.receipts[0].as_bytes();
    let mut err = super::empty();
    // SAFETY: NULL out-parameters and a NULL id with a length are what is under test; the
    // handle is live and `err` is writable.
    let codes = unsafe {
        [
            warden_proof_inclusion(log.handle.raw, id.as_ptr(), id.len(), 0, ptr::null_mut(), ptr::null_mut()),
            warden_proof_inclusion(log.handle.raw, ptr::null(), 4, 0, &raw mut err, ptr::null_mut()),
            warden_proof_inclusion(log.handle.raw, ptr::null(), 0, 0, &raw mut err, ptr::null_mut()),
            warden_proof_consistency(log.handle.raw, 1, 2, ptr::null_mut(), ptr::null_mut()),
            warden_checkpoints(log.handle.raw, 1, 0, ptr::null_mut(), ptr::null_mut()),
            warden_checkpoints(ptr::null_mut(), 1, 0, &raw mut err, ptr::null_mut()),
        ]
    };
    assert_eq!(codes, [WARDEN_RESULT_INVALID_INPUT; 6]);
    assert!(err.ptr.is_null(), "out is written only on success");
}
