//! A store written by the schema-1 build (`tests/fixtures/store-v1.redb`, made by the program in
//! `tests/fixtures/store-v1-generator.rs.txt` against the commit before schema 2) opens, migrates
//! forward in one transaction, and decides exactly as before.

mod common;

use common::*;
use warden::store::SCHEMA_VERSION;
use warden::test_support::KernelInternals;
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

/// The tables schema 3 added; a schema-2 file has none of them.
const SCHEMA_3_TABLES: [&str; 8] = [
    "delegations",
    "revocations",
    "delegation_index",
    "delegation_children",
    "delegation_creators",
    "budget_ledger",
    "budget_sums",
    "budget_by_effect",
];

/// Write the version row of a closed store file, as a build of that schema would have.
fn set_schema_version(path: &std::path::Path, version: u32) {
    let db = redb::Database::open(path).unwrap();
    let txn = db.begin_write().unwrap();
    {
        let mut meta = txn.open_table(redb::TableDefinition::<&str, &[u8]>::new("meta")).unwrap();
        meta.insert("schema_version", version.to_le_bytes().as_slice()).unwrap();
    }
    txn.commit().unwrap();
}

fn schema_version(path: &std::path::Path) -> u32 {
    use redb::ReadableDatabase;
    let db = redb::Database::open(path).unwrap();
    let txn = db.begin_read().unwrap();
    let meta = txn.open_table(redb::TableDefinition::<&str, &[u8]>::new("meta")).unwrap();
    let bytes = meta.get("schema_version").unwrap().unwrap();
    u32::from_le_bytes(bytes.value().try_into().unwrap())
}

#[test]
fn a_schema_2_store_gains_the_empty_authority_tables_and_keeps_every_row() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.redb");
    let clock = warden::ManualClock::new(T0);
    {
        let kernel = open(&path, &clock);
        kernel.propose(&allow(&refund("pay_1", 1200), &key_template())).unwrap().commit(&serde_json::json!(1)).unwrap();
    }
    assert_eq!(schema_version(&path), SCHEMA_VERSION);
    // Lay the file out exactly as schema 2 did: without the schema-3 tables, version row 2.
    {
        let db = redb::Database::open(&path).unwrap();
        let txn = db.begin_write().unwrap();
        for table in SCHEMA_3_TABLES {
            assert!(txn.delete_table(redb::TableDefinition::<&str, &[u8]>::new(table)).unwrap(), "{table}");
        }
        {
            let mut meta = txn.open_table(redb::TableDefinition::<&str, &[u8]>::new("meta")).unwrap();
            meta.insert("schema_version", 2u32.to_le_bytes().as_slice()).unwrap();
        }
        txn.commit().unwrap();
    }
    assert_eq!(schema_version(&path), 2);
    {
        let kernel = open(&path, &clock);
        let refused = kernel.propose(&allow(&refund("pay_1", 1200), &key_template())).unwrap_err();
        assert!(matches!(refused, Error::Duplicate { .. }), "{refused}");
        assert!(kernel.verify_chain().unwrap().ok);
        let doctor = kernel.doctor().unwrap();
        for table in SCHEMA_3_TABLES {
            let (_, rows, problems) = doctor.tables.iter().find(|(name, _, _)| name == table).unwrap();
            assert_eq!((*rows, problems.len()), (0, 0), "{table}");
        }
        // The new tables work: a delegation is created and listed.
        let document = warden::document::load_str(
            "schema: warden/v1\nauthority:\n  grants:\n    - {id: root, subject: {agent: a}, actions: [x.y], expires_at: \"2027-01-01T00:00:00Z\", delegable: true}\n",
            "t.yaml",
        )
        .unwrap();
        let grant = warden::document::load_grant_str(
            "{subject: {agent: b}, actions: [x.y], expires_at: \"2026-12-01T00:00:00Z\"}",
            "g",
        )
        .unwrap();
        let by = warden::Principal::new("a", None).unwrap();
        let authority = document.authority_config.unwrap();
        kernel.delegate(&authority, "root", &grant, &by, None, warden::authority::CreatedVia::Cli).unwrap();
        assert_eq!(kernel.delegations(None, 10).unwrap().len(), 1);
    }
    assert_eq!(schema_version(&path), SCHEMA_VERSION);
}

#[test]
fn a_newer_schema_is_refused_and_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.redb");
    drop(open(&path, &warden::ManualClock::new(T0)));
    set_schema_version(&path, SCHEMA_VERSION + 1);
    let refused = warden::Kernel::open(&path, warden::KernelOptions::default()).unwrap_err();
    let words = format!("schema version {}, newer than this build's {SCHEMA_VERSION}", SCHEMA_VERSION + 1);
    assert!(refused.to_string().contains(&words), "{refused}");
    assert_eq!(schema_version(&path), SCHEMA_VERSION + 1);
}

#[test]
fn a_schema_4_store_is_read_without_a_writer_and_becomes_current_when_opened_to_write() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.redb");
    let clock = warden::ManualClock::new(T0);
    {
        let kernel = open(&path, &clock);
        for n in 0..3 {
            let payment = format!("pay_{n}");
            kernel
                .propose(&allow(&refund(&payment, 1200), &key_template()))
                .unwrap()
                .commit(&serde_json::json!(n))
                .unwrap();
        }
    }
    // Schema 4 differs from 8 only in never holding a compressed row, having no journal, no evidence tables and no
    // policies table: its version row says 4 (the journal mark of a clean close is left, as a schema-4 file ignores it).
    set_schema_version(&path, 4);
    // A reader (no owner running: the file is opened read-only) needs no migration first.
    let read = std::process::Command::new(env!("CARGO_BIN_EXE_warden"))
        .args(["receipts", "--verify-chain", "--json", "--store"])
        .arg(&path)
        .env_remove("WARDEN_CONFIG")
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&read.stdout).unwrap();
    assert!(read.status.success() && report["ok"] == true && report["verified"] == 3, "{report}");
    assert_eq!(schema_version(&path), 4, "reading never migrates");
    // A writer migrates, and every row decides as before.
    {
        let kernel = open(&path, &clock);
        let refused = kernel.propose(&allow(&refund("pay_1", 1200), &key_template())).unwrap_err();
        assert!(matches!(refused, Error::Duplicate { .. }), "{refused}");
        assert!(kernel.verify_chain().unwrap().ok);
        // The evidence tables came with the migration: the old receipts are checkpointed.
        let signer = warden::evidence::key::NoteSigner::generate("migrated").unwrap();
        let checkpoint = kernel.checkpoint(&signer, None).unwrap();
        assert_eq!((checkpoint.number, checkpoint.size), (1, 4), "three receipts and the refusal's");
    }
    assert_eq!(schema_version(&path), SCHEMA_VERSION);
}

#[test]
fn a_schema_7_store_is_read_without_its_policies_table_and_gains_it_when_opened_to_write() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.redb");
    let clock = warden::ManualClock::new(T0);
    {
        let kernel = open(&path, &clock);
        kernel.propose(&allow(&refund("pay_1", 1200), &key_template())).unwrap().commit(&serde_json::json!(1)).unwrap();
    }
    // Schema 7 is schema 10 without the anchors, policies, holds, pruned_outcomes and scoped grants tables.
    drop_table(&path, "policies");
    drop_table(&path, "anchors");
    drop_table(&path, "holds");
    drop_table(&path, "pruned_outcomes");
    drop_table(&path, "scoped_grants");
    drop_table(&path, "scoped_grants_by_action");
    set_schema_version(&path, 7);
    // A reader needs no migration, and finds no policy kept.
    let reader = open_to_read(&path);
    assert!(reader.verify_chain().unwrap().ok);
    assert_eq!(reader.policy("sha256:test").unwrap(), None);
    drop(reader);
    assert_eq!((schema_version(&path), table_exists(&path, "policies")), (7, false), "reading never migrates");
    // A writer migrates: the table comes empty, and a governed handle keeps its policy there.
    let document = warden::document::load_str(
        "schema: warden/v1\nactions:\n  stripe.refund:\n    effect: \"refund:{payment_id}\"\n    decision: allow\n",
        "policy.yaml",
    )
    .unwrap();
    let (hash, canonical) = (document.policy_hash.clone(), document.canonical_policy.clone());
    let options = warden::WardenOptions { clock: std::sync::Arc::new(clock), ..warden::WardenOptions::default() };
    let warden = warden::Warden::open(&path, document, options).unwrap();
    assert_eq!(warden.kernel().policy(&hash).unwrap(), Some(canonical));
    drop(warden);
    assert_eq!(
        (schema_version(&path), table_exists(&path, "policies"), table_exists(&path, "anchors")),
        (10, true, true)
    );
    assert!(table_exists(&path, "holds") && table_exists(&path, "pruned_outcomes"));
    assert!(table_exists(&path, "scoped_grants") && table_exists(&path, "scoped_grants_by_action"));
}

#[test]
fn a_schema_9_store_is_read_without_its_scoped_grants_tables_and_gains_them_empty_when_opened_to_write() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.redb");
    let clock = warden::ManualClock::new(T0);
    {
        let kernel = open(&path, &clock);
        kernel.propose(&allow(&refund("pay_1", 1200), &key_template())).unwrap().commit(&serde_json::json!(1)).unwrap();
    }
    // Schema 9 is schema 10 without the scoped grants tables.
    drop_table(&path, "scoped_grants");
    drop_table(&path, "scoped_grants_by_action");
    set_schema_version(&path, 9);
    // A reader needs no migration, and finds no scoped grant.
    let reader = open_to_read(&path);
    assert!(reader.verify_chain().unwrap().ok);
    assert!(reader.scoped_grants(false).unwrap().is_empty());
    drop(reader);
    assert_eq!((schema_version(&path), table_exists(&path, "scoped_grants")), (9, false), "reading never migrates");
    // A writer migrates: the tables come empty, and the chain goes on.
    let kernel = open(&path, &clock);
    assert!(kernel.scoped_grants(false).unwrap().is_empty());
    kernel.propose(&allow(&refund("pay_2", 1200), &key_template())).unwrap().commit(&serde_json::json!(2)).unwrap();
    assert!(kernel.verify_chain().unwrap().ok);
    assert_eq!(kernel.receipts(1, 10).unwrap().len(), 2);
    drop(kernel);
    assert_eq!(
        (schema_version(&path), table_exists(&path, "scoped_grants"), table_exists(&path, "scoped_grants_by_action")),
        (10, true, true)
    );
}

/// Remove `table` from a closed store file's table directory, as a damaged directory page would.
fn drop_table(path: &std::path::Path, table: &str) {
    let db = redb::Database::open(path).unwrap();
    let txn = db.begin_write().unwrap();
    assert!(txn.delete_table(redb::TableDefinition::<&str, &[u8]>::new(table)).unwrap(), "{table}");
    txn.commit().unwrap();
}

fn table_exists(path: &std::path::Path, table: &str) -> bool {
    use redb::{ReadableDatabase, TableHandle};
    let db = redb::Database::open(path).unwrap();
    let txn = db.begin_read().unwrap();
    let found = txn.list_tables().unwrap().any(|t| t.name() == table);
    found
}

#[test]
fn a_store_whose_table_directory_lost_a_table_is_refused_and_never_given_an_empty_one() {
    // Without this, the first write transaction would create `effects` empty and every key
    // would look new: a committed refund could run again.
    for table in ["effects", "effect_receipts", "receipts", "meta", "budget_ledger", "approvals_by_action"] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.redb");
        let clock = warden::ManualClock::new(T0);
        {
            let kernel = open(&path, &clock);
            kernel
                .propose(&allow(&refund("pay_1", 1200), &key_template()))
                .unwrap()
                .commit(&serde_json::json!(1))
                .unwrap();
        }
        drop_table(&path, table);
        let refused = warden::Kernel::open(&path, warden::KernelOptions::default()).unwrap_err();
        let text = refused.to_string();
        assert!(matches!(refused, Error::Store(_)), "{table}: {text}");
        assert!(text.contains(&format!("has no {table} table")) && text.contains("warden doctor"), "{table}: {text}");
        assert!(!table_exists(&path, table), "{table}: the refused open created the table");
        // `warden doctor` (read-only) names it.
        let doctor = std::process::Command::new(env!("CARGO_BIN_EXE_warden"))
            .args(["doctor", "--store"])
            .arg(&path)
            .env_remove("WARDEN_CONFIG")
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&doctor.stdout).to_string() + &String::from_utf8_lossy(&doctor.stderr);
        assert!(!doctor.status.success(), "{table}: doctor passed a store without it:\n{said}");
        assert!(said.contains(table), "{table}: {said}");
    }
}

#[test]
fn a_store_with_every_table_opens_and_the_control_keeps_deciding() {
    // The control for the test above: the same store, nothing dropped, opens and refuses the
    // duplicate (so the refusal above is the missing table's, not the open's).
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.redb");
    let clock = warden::ManualClock::new(T0);
    {
        let kernel = open(&path, &clock);
        kernel.propose(&allow(&refund("pay_1", 1200), &key_template())).unwrap().commit(&serde_json::json!(1)).unwrap();
    }
    let kernel = open(&path, &clock);
    let refused = kernel.propose(&allow(&refund("pay_1", 1200), &key_template())).unwrap_err();
    assert!(matches!(refused, Error::Duplicate { .. }), "{refused}");
}

#[test]
fn a_newer_schema_is_refused_at_open() {
    let f = Fixture::new();
    f.kernel.store().tamper(|raw| raw.set_schema_version(99)).unwrap();
    let path = f.path();
    drop(f.kernel);
    let refused = warden::Kernel::open(&path, warden::KernelOptions::default()).unwrap_err();
    assert!(refused.to_string().contains("newer"), "{refused}");
}

#[test]
fn an_older_or_unknown_schema_is_refused_at_open() {
    let f = Fixture::new();
    f.kernel.store().tamper(|raw| raw.set_schema_version(0)).unwrap();
    let path = f.path();
    drop(f.kernel);
    let refused = warden::Kernel::open(&path, warden::KernelOptions::default()).unwrap_err();
    assert!(refused.to_string().contains("schema version 0"), "{refused}");
}
