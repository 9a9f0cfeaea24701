//! Chain tampering: each of the six break names is provoked by editing stored rows and is
//! reported by name at the seq where it happened, and nothing else is.

mod common;

use common::*;
use warden::receipt::StoredReceipt;
use warden::test_support::KernelInternals;

fn store_with_receipts(n: usize) -> Fixture {
    let f = Fixture::new();
    let t = key_template();
    for i in 0..n {
        f.kernel.propose(&allow(&refund(&format!("p{i}"), 1), &t)).unwrap().commit(&serde_json::json!(i)).unwrap();
    }
    assert!(f.kernel.verify_chain().unwrap().ok);
    f
}

fn breaks(f: &Fixture) -> Vec<(String, Option<u64>)> {
    let report = f.kernel.verify_chain().unwrap();
    assert!(!report.ok);
    report.breaks.iter().map(|b| (b.name.to_owned(), b.seq)).collect()
}

fn edit(f: &Fixture, seq: u64, change: impl FnOnce(&mut StoredReceipt)) {
    f.kernel
        .store()
        .tamper(|raw| {
            let mut row = raw.receipt(seq)?.unwrap();
            change(&mut row);
            raw.put_receipt(seq, &row)
        })
        .unwrap();
}

#[test]
fn an_edited_document_is_content_altered() {
    let f = store_with_receipts(4);
    edit(&f, 2, |row| row.document = row.document.replace("\"committed\"", "\"failed\""));
    assert_eq!(breaks(&f), [("content_altered".to_owned(), Some(2))]);
}

#[test]
fn editing_the_last_receipt_is_content_altered_only() {
    let f = store_with_receipts(4);
    edit(&f, 4, |row| row.document = row.document.replace("\"committed\"", "\"failed\""));
    assert_eq!(breaks(&f), [("content_altered".to_owned(), Some(4))]);
}

#[test]
fn a_removed_hash_is_hash_missing() {
    let f = store_with_receipts(4);
    edit(&f, 3, |row| row.hash = None);
    assert_eq!(breaks(&f), [("hash_missing".to_owned(), Some(3))]);
}

#[test]
fn a_rehashed_edit_breaks_the_next_link() {
    let f = store_with_receipts(4);
    // Edit receipt 2 and recompute its own hash: the row is self-consistent, but receipt 3
    // still points at the old hash.
    edit(&f, 2, |row| {
        row.document = row.document.replace("\"committed\"", "\"failed\"");
        row.hash = Some(warden::canonical::sha256_prefixed(row.document.as_bytes()));
    });
    assert_eq!(breaks(&f), [("link_broken".to_owned(), Some(3))]);
}

#[test]
fn a_deleted_row_is_missing() {
    let f = store_with_receipts(4);
    f.kernel.store().tamper(|raw| raw.remove_receipt(2)).unwrap();
    assert_eq!(breaks(&f), [("missing".to_owned(), Some(2))]);
}

#[test]
fn a_head_that_disagrees_is_head_mismatch() {
    let f = store_with_receipts(4);
    f.kernel.store().tamper(|raw| raw.set_head(3, "sha256:ffff")).unwrap();
    assert_eq!(breaks(&f), [("head_mismatch".to_owned(), Some(3))]);
}

#[test]
fn a_receipt_without_a_seq_is_unchained() {
    let f = store_with_receipts(3);
    // Append a row the chain never saw: a document with no seq at the next position.
    f.kernel
        .store()
        .tamper(|raw| {
            let mut row = raw.receipt(3)?.unwrap();
            let mut doc = warden::canonical::parse_json(&row.document).unwrap();
            doc.as_object_mut().unwrap().remove("seq");
            row.document = warden::canonical::to_canonical_string(&doc, "receipt").unwrap();
            row.hash = None;
            raw.put_receipt(4, &row)
        })
        .unwrap();
    assert_eq!(breaks(&f), [("unchained".to_owned(), None)]);
}

#[test]
fn an_intact_chain_verifies_and_counts_every_receipt() {
    let f = store_with_receipts(7);
    let report = f.kernel.verify_chain().unwrap();
    assert_eq!((report.ok, report.verified, report.chained, report.unchained), (true, 7, 7, 0));
}
