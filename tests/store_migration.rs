//! A store written by the schema-1 build (`tests/fixtures/store-v1.redb`, made by the program in
//! `tests/fixtures/store-v1-generator.rs.txt` against the commit before schema 2) opens, migrates
//! forward in one transaction, and decides exactly as before.

mod common;

use common::*;
use warden::{EffectState, Error};

fn migrated() -> (tempfile::TempDir, warden::Kernel) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.redb");
    std::fs::copy(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/store-v1.redb"), &path).unwrap();
    // The fixture's clock: 2026-09-21, its leases still live at T.
    let kernel = open(&path, &warden::ManualClock::new(1_790_000_000_000_000));
    (dir, kernel)
}

#[test]
fn a_schema_1_store_migrates_and_keeps_every_state_result_and_receipt() {
    let (_dir, kernel) = migrated();
    let state = |key: &str| kernel.effect(key).unwrap().unwrap().state;
    assert_eq!(state("refund:pay_1"), EffectState::Committed);
    assert_eq!(state("refund:pay_2"), EffectState::Failed);
    assert_eq!(state("refund:pay_3"), EffectState::Ambiguous);
    assert_eq!(state("refund:pay_4"), EffectState::Executing);
    assert_eq!(state("refund:pay_6"), EffectState::Committed);
    // The result, once stored twice, is read from the committing receipt.
    let result = kernel.effect("refund:pay_1").unwrap().unwrap().result.unwrap().to_value();
    assert_eq!(result, serde_json::json!({"refund": "re_1"}));
    let report = kernel.verify_chain().unwrap();
    assert!(report.ok && report.verified == 6, "{report:?}");
    assert_eq!(kernel.pending_approvals().unwrap().len(), 1);
    assert_eq!(kernel.snapshot_page("endpoint:status/summary", None, 10).unwrap().0.len(), 1);
    // The receipt id index was built.
    let (_, first) = kernel.receipts(1, 1).unwrap().remove(0);
    let id = first.to_json()["receipt_id"].as_str().unwrap().to_owned();
    assert_eq!(kernel.receipt_seq(&id).unwrap(), Some(1));
    assert!(kernel.doctor().unwrap().tables.iter().all(|(_, _, problems)| problems.is_empty()));
}

#[test]
fn a_migrated_store_decides_as_before() {
    let (_dir, kernel) = migrated();
    let t = key_template();
    let refused = kernel.propose(&allow(&refund("pay_1", 1200), &t)).unwrap_err();
    assert!(matches!(refused, Error::Duplicate { .. }), "{refused}");
    assert!(matches!(kernel.propose(&allow(&refund("pay_3", 1), &t)).unwrap_err(), Error::Ambiguous { .. }));
    // FAILED renews: the cross-check against its receipt (failed) lets it through.
    assert_eq!(kernel.propose(&allow(&refund("pay_2", 1300), &t)).unwrap().attempt(), 2);
    kernel.propose(&allow(&refund("pay_7", 1), &t)).unwrap().commit(&serde_json::json!(7)).unwrap();
    assert!(kernel.verify_chain().unwrap().ok);
}
