//! A damaged, emptied, replaced, full or deleted store is a fault, never a decision: no fault
//! may turn into a second execution of an effect that committed.
//!
//! Child processes (the stopped owner) are this test binary run again with
//! `child_process_entry` selected.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use warden::test_support::KernelInternals;

use common::*;
use warden::error::StoreFaultKind;
use warden::store::RawTable;
use warden::{EffectState, Error, Kernel, KernelOptions, ManualClock};

fn committed(f: &Fixture, payment: &str) {
    let t = key_template();
    f.kernel.propose(&allow(&refund(payment, 1), &t)).unwrap().commit(&serde_json::json!({"ok": payment})).unwrap();
}

fn raw_effect(f: &Fixture, key: &str) -> Vec<u8> {
    let mut bytes = None;
    f.kernel
        .store()
        .tamper(|raw| {
            bytes = raw.raw(RawTable::Effects, key)?;
            Ok(())
        })
        .unwrap();
    bytes.expect("the effect row exists")
}

fn set_raw(f: &Fixture, table: RawTable, key: &str, bytes: &[u8]) {
    f.kernel.store().tamper(|raw| raw.set_raw(table, key, bytes)).unwrap();
}

#[test]
fn a_flipped_state_byte_in_a_committed_effect_row_is_a_store_fault_and_never_a_second_permit() {
    let f = Fixture::new();
    committed(&f, "pay_1");
    let mut row = raw_effect(&f, "refund:pay_1");
    match row[0] {
        // Layout 2: layout byte, key length, key, then the state: postcard's index 2 is
        // COMMITTED, 3 FAILED.
        2 => {
            let state_at = 2 + "refund:pay_1".len();
            assert_eq!(row[state_at], 2, "the state byte of a committed row");
            row[state_at] = 3;
        }
        // Layout 3 (compressed): the state is somewhere in the compressed bytes, after the
        // layout byte and the 4-byte length; one flipped bit there changes what decompresses.
        3 => {
            let payload = 5..row.len() - 4;
            row[payload.start + payload.len() / 2] ^= 0x01;
        }
        other => panic!("unknown row layout {other}"),
    }
    set_raw(&f, RawTable::Effects, "refund:pay_1", &row);

    let refused = f.kernel.propose(&allow(&refund("pay_1", 1), &key_template())).unwrap_err();
    assert_store_fault(&refused, "effects", "refund:pay_1");
    // The fault latched this handle; a fresh one reads the same fault, and still no permit.
    let reopened = open(&f.path(), &f.clock);
    let again = reopened.propose(&allow(&refund("pay_1", 1), &key_template())).unwrap_err();
    assert_store_fault(&again, "effects", "refund:pay_1");
}

#[test]
fn a_failed_row_with_a_valid_checksum_is_refused_when_its_receipt_says_committed() {
    let f = Fixture::new();
    committed(&f, "pay_1");
    let mut record = f.kernel.effect("refund:pay_1").unwrap().unwrap();
    record.state = EffectState::Failed;
    record.result = None;
    f.kernel.store().tamper(|raw| raw.put_effect(&record)).unwrap();

    let refused = f.kernel.propose(&allow(&refund("pay_1", 1), &key_template())).unwrap_err();
    let text = refused.to_string();
    assert!(matches!(refused, Error::Store(_)), "{text}");
    assert!(text.contains("says failed") && text.contains("committed") && text.contains("refund:pay_1"), "{text}");
    // Control: a key that really failed is renewed (on a fresh handle: the fault latched this one).
    let t = key_template();
    let reopened = open(&f.path(), &f.clock);
    reopened.propose(&allow(&refund("pay_2", 1), &t)).unwrap().not_executed("declined").unwrap();
    assert_eq!(reopened.propose(&allow(&refund("pay_2", 1), &t)).unwrap().attempt(), 2);
}

#[test]
fn a_flipped_byte_in_an_approval_row_is_a_store_fault_for_the_answer_and_the_consumer() {
    let f = Fixture::new();
    let t = key_template();
    let action = refund("pay_9", 90_000);
    let request = match f.kernel.propose(&approve(&action, &t, None)).unwrap_err() {
        Error::ApprovalRequired { request_id, .. } => request_id,
        other => panic!("{other}"),
    };
    let mut row = None;
    f.kernel
        .store()
        .tamper(|raw| {
            row = raw.raw(RawTable::Approvals, &request)?;
            Ok(())
        })
        .unwrap();
    let mut row = row.unwrap();
    let last = row.len() - 6;
    row[last] ^= 0x10;
    set_raw(&f, RawTable::Approvals, &request, &row);

    let other = open(&f.path(), &f.clock);
    let refused = other.grant(&request, "ops:bob").unwrap_err();
    assert_store_fault(&refused, "approvals", &request);
    let third = open(&f.path(), &f.clock);
    let consumer = third.propose(&approve(&action, &t, Some(&request))).unwrap_err();
    assert_store_fault(&consumer, "approvals", &request);
}

#[test]
fn a_flipped_byte_in_the_chain_head_stops_the_next_receipt_and_is_reported_by_verification() {
    let f = Fixture::new();
    committed(&f, "pay_1");
    let mut head = None;
    f.kernel
        .store()
        .tamper(|raw| {
            head = raw.raw(RawTable::Meta, "chain_head")?;
            Ok(())
        })
        .unwrap();
    let mut head = head.unwrap();
    head[3] ^= 0x01;
    set_raw(&f, RawTable::Meta, "chain_head", &head);

    let permit = f.kernel.propose(&allow(&refund("pay_2", 1), &key_template()));
    // Either the permit transaction or the outcome needs the head: neither may succeed.
    let outcome = permit.and_then(|permit| permit.commit(&serde_json::json!(2)));
    assert_store_fault(&outcome.unwrap_err(), "meta", "chain_head");
    let report = open(&f.path(), &f.clock).verify_chain().unwrap();
    assert!(!report.ok, "{report:?}");
}

fn open_default(path: &Path) -> Result<Kernel, Error> {
    Kernel::open(path, KernelOptions::default())
}

#[test]
fn an_empty_file_a_foreign_file_and_a_redb_file_without_warden_schema_are_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.redb");
    std::fs::write(&empty, b"").unwrap();
    let refused = open_default(&empty).unwrap_err();
    assert!(
        refused.to_string().contains("is not a Warden store") && refused.to_string().contains("empty"),
        "{refused}"
    );
    assert_eq!(std::fs::metadata(&empty).unwrap().len(), 0, "the empty file was written to");

    let foreign = dir.path().join("notes.txt");
    std::fs::write(&foreign, b"shopping list\n").unwrap();
    let refused = open_default(&foreign).unwrap_err();
    assert!(refused.to_string().contains("magic number"), "{refused}");
    assert_eq!(std::fs::read(&foreign).unwrap(), b"shopping list\n");

    let other_app = dir.path().join("other.redb");
    {
        let db = redb::Database::create(&other_app).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let mut table = txn.open_table(redb::TableDefinition::<&str, u64>::new("orders")).unwrap();
            table.insert("o1", 7).unwrap();
        }
        txn.commit().unwrap();
    }
    let before = std::fs::read(&other_app).unwrap();
    let refused = open_default(&other_app).unwrap_err();
    assert!(refused.to_string().contains("no Warden schema"), "{refused}");
    assert!(std::fs::read(&other_app).unwrap() == before, "the foreign database was written to");

    // Control: where nothing exists, a store is created.
    let fresh = dir.path().join("fresh.redb");
    open_default(&fresh).unwrap();
    assert!(fresh.exists());
}

/// A small tmpfs, unmounted when dropped. `None` where mounting is not allowed (not root).
struct SmallFs {
    dir: tempfile::TempDir,
}

impl SmallFs {
    fn mount(size: &str) -> Option<SmallFs> {
        let dir = tempfile::tempdir().ok()?;
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .stderr(Stdio::null())
            .status()
            .ok()?;
        status.success().then_some(SmallFs { dir })
    }
    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

#[test]
fn a_full_disk_while_creating_leaves_no_partial_store_and_the_store_is_created_once_space_is_freed() {
    let Some(fs) = SmallFs::mount("512k") else {
        eprintln!("SKIPPED: mounting a tmpfs needs root (CI runs as root)");
        return;
    };
    // Leave 8 KiB: less than a new redb file needs.
    let filler = fs.path().join("filler");
    let total = 512 * 1024;
    std::fs::write(&filler, vec![0u8; total - 8 * 1024]).unwrap();
    let store = fs.path().join("state.redb");
    let refused = open_default(&store).unwrap_err();
    assert!(refused.to_string().contains("no space left"), "{refused}");
    assert!(!store.exists(), "a partial store was left at the path");
    let leftovers: Vec<String> = std::fs::read_dir(fs.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.contains("creating"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left behind: {leftovers:?}");

    std::fs::remove_file(&filler).unwrap();
    let kernel = open_default(&store).unwrap();
    let permit = kernel.propose(&allow(&refund("pay_1", 1), &key_template())).unwrap();
    permit.commit(&serde_json::json!(1)).unwrap();
}

#[test]
fn a_store_whose_directory_is_deleted_under_an_open_handle_takes_no_further_write() {
    let top = tempfile::tempdir().unwrap();
    let dir = top.path().join("state");
    std::fs::create_dir(&dir).unwrap();
    let clock = ManualClock::new(T0);
    let kernel = open(&dir.join("state.redb"), &clock);
    let t = key_template();
    kernel.propose(&allow(&refund("pay_1", 1), &t)).unwrap().commit(&serde_json::json!(1)).unwrap();

    std::fs::remove_dir_all(&dir).unwrap();
    let refused = kernel.propose(&allow(&refund("pay_2", 1), &t)).unwrap_err();
    assert!(
        matches!(&refused, Error::Store(fault) if fault.kind == StoreFaultKind::Damaged && fault.message.contains("was deleted")),
        "{refused}"
    );
    // Latched: nothing more goes into the unlinked file.
    assert!(matches!(kernel.propose(&allow(&refund("pay_3", 1), &t)).unwrap_err(), Error::Poisoned(_)));
}

// ---- a row the lookup cannot find: absence is proven, not assumed ------------------------------

#[test]
fn a_key_with_receipts_but_no_effect_row_is_a_fault_not_a_permit() {
    let f = Fixture::new();
    committed(&f, "pay_1");
    committed(&f, "pay_2");
    // An effect still in flight, reserved last: the file's open checks (the effects table holds
    // as many rows as effects have outcomes; the last reservation's row is there) still pass
    // after pay_1's row is gone, so the proposal's own proof is what must refuse.
    f.kernel.reserve_only(&refund("pay_0", 1), "refund:pay_0", None, None).unwrap();
    f.kernel.store().tamper(|raw| raw.remove_raw(RawTable::Effects, "refund:pay_1")).unwrap();
    let t = key_template();
    let refused = f.kernel.propose(&allow(&refund("pay_1", 1), &t)).expect_err("receipts without a row got a permit");
    assert_hidden_row_fault(&refused, "refund:pay_1");
    assert!(refused.to_string().contains("receipts without an effect row"), "{refused}");
    // The refusal poisons the handle, as every store fault does; on a new one a key that never
    // had anything is still new, and doctor names the damage.
    let location = f.path();
    let Fixture { dir: _dir, clock, kernel, .. } = f;
    drop(kernel);
    let kernel = open(&location, &clock);
    kernel.propose(&allow(&refund("pay_3", 1), &t)).unwrap().commit(&serde_json::json!(3)).unwrap();
    let report = kernel.doctor().unwrap();
    assert!(report.orphans.iter().any(|o| o.contains("refund:pay_1")), "{:?}", report.orphans);
}

// ---- a stopped owner: every wait of an open is bounded ---------------------------------------

fn spawn_child(role: &str, dir: &Path) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["child_process_entry", "--exact", "--ignored", "--nocapture", "--test-threads=1", "--quiet"])
        .env("WARDEN_CHILD_ROLE", role)
        .env("WARDEN_CHILD_DIR", dir)
        .env("RUST_BACKTRACE", "0")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

/// Not a test: the body of child processes, selected by `WARDEN_CHILD_ROLE`.
#[test]
#[ignore = "entry point for child processes"]
fn child_process_entry() {
    let Ok(role) = std::env::var("WARDEN_CHILD_ROLE") else { return };
    let dir = PathBuf::from(std::env::var("WARDEN_CHILD_DIR").unwrap());
    if role == "owner" {
        let kernel = open(&dir.join("state.redb"), &ManualClock::new(T0));
        std::fs::write(dir.join("ready"), b"").unwrap();
        // Serve until killed.
        loop {
            std::thread::sleep(Duration::from_secs(60));
            let _ = kernel.poisoned();
        }
    }
}

fn wait_for(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !path.exists() {
        assert!(Instant::now() < deadline, "the child never got ready");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn an_open_behind_a_stopped_owner_gives_up_within_the_bound_and_names_the_cause() {
    let dir = tempfile::tempdir().unwrap();
    let mut owner = spawn_child("owner", dir.path());
    wait_for(&dir.path().join("ready"));
    let pid = owner.id().to_string();
    assert!(Command::new("kill").args(["-STOP", &pid]).status().unwrap().success());

    let started = Instant::now();
    let options = KernelOptions {
        store: warden::store::StoreOptions {
            wait: Duration::from_millis(300),
            read_only: false,
            ..warden::store::StoreOptions::default()
        },
        ..KernelOptions::default()
    };
    let refused = Kernel::open(dir.path().join("state.redb"), options).unwrap_err();
    let waited = started.elapsed();
    let _ = Command::new("kill").args(["-CONT", &pid]).status();
    let _ = owner.kill();
    let _ = owner.wait();
    assert!(matches!(&refused, Error::Unavailable(text) if text.contains("did not answer within 300 ms")), "{refused}");
    // Bounded: nowhere near forever (a generous ceiling, not a timing assertion on speed).
    assert!(waited < Duration::from_secs(20), "the open waited {waited:?}");

    // Control: once the owner is gone, the store opens and serves.
    let kernel = open_default(&dir.path().join("state.redb")).unwrap();
    kernel.propose(&allow(&refund("pay_1", 1), &key_template())).unwrap().commit(&serde_json::json!(1)).unwrap();
}

// ---- the corruption sweep ---------------------------------------------------------------------

/// A small deterministic generator, so a failing seed can be replayed.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn no_single_flipped_byte_anywhere_in_a_store_ever_hands_out_a_permit_for_a_committed_key() {
    let source = tempfile::tempdir().unwrap();
    let path = source.path().join("state.redb");
    let keys = ["pay_1", "pay_2", "pay_3", "pay_4"];
    {
        let kernel = open_default(&path).unwrap();
        let t = key_template();
        for key in keys {
            kernel.propose(&allow(&refund(key, 1), &t)).unwrap().commit(&serde_json::json!({"paid": key})).unwrap();
        }
    }
    let pristine = std::fs::read(&path).unwrap();
    let trials: usize = std::env::var("WARDEN_SWEEP_TRIALS").ok().and_then(|v| v.parse().ok()).unwrap_or(400);
    let mut rng = XorShift(0x5eed_1234_abcd_ef01);
    let work = tempfile::tempdir().unwrap();
    let (mut refused_open, mut refused_all) = (0usize, 0usize);
    for trial in 0..trials {
        let offset = (rng.next() % pristine.len() as u64) as usize;
        let bit = (rng.next() % 8) as u8;
        let mut damaged = pristine.clone();
        damaged[offset] ^= 1 << bit;
        let copy = work.path().join(format!("t{trial}.redb"));
        std::fs::write(&copy, &damaged).unwrap();
        let Ok(kernel) = open_default(&copy) else {
            refused_open += 1;
            continue;
        };
        let t = key_template();
        for key in keys {
            assert!(
                kernel.propose(&allow(&refund(key, 1), &t)).is_err(),
                "trial {trial}: flipping bit {bit} of byte {offset} handed out a permit for committed {key}"
            );
        }
        refused_all += 1;
        drop(kernel);
        let _ = std::fs::remove_file(&copy);
    }
    eprintln!(
        "{trials} single-bit flips: {refused_open} refused at open, {refused_all} opened and refused every retry"
    );
}
