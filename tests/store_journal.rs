//! The file store's journal under real crashes: an owner process SIGKILLed after its writes
//! returned, with redb holding only its last checkpoint, and the journal then damaged, torn,
//! missing or swapped. Every answered write comes back from the journal on the next open; every
//! doubt about the journal is a store fault naming the file (and offset), and nothing is
//! decided from a store that refuses to open.
//!
//! Children are this test binary run again with `child_process_entry` selected: each commits
//! actions and logs `done KEY` after each commit returned, then waits to be killed.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use warden::test_support::KernelInternals;

use common::*;
use warden::{Error, Kernel, KernelOptions};

const RECORDS_FROM: u64 = 4096;

fn spawn_writer(store: &Path, first: usize, count: usize, durability: &str) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["child_process_entry", "--exact", "--ignored", "--nocapture", "--test-threads=1", "--quiet"])
        .env("WARDEN_JOURNAL_CHILD_STORE", store)
        .env("WARDEN_JOURNAL_CHILD_FIRST", first.to_string())
        .env("WARDEN_JOURNAL_CHILD_COUNT", count.to_string())
        .env("WARDEN_JOURNAL_CHILD_DURABILITY", durability)
        .env("RUST_BACKTRACE", "0")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

/// Not a test: the body of child processes.
#[test]
#[ignore = "entry point for child processes"]
fn child_process_entry() {
    let Ok(store) = std::env::var("WARDEN_JOURNAL_CHILD_STORE") else { return };
    let first: usize = std::env::var("WARDEN_JOURNAL_CHILD_FIRST").unwrap().parse().unwrap();
    let count: usize = std::env::var("WARDEN_JOURNAL_CHILD_COUNT").unwrap().parse().unwrap();
    let durability =
        warden::store::Withstands::parse(&std::env::var("WARDEN_JOURNAL_CHILD_DURABILITY").unwrap()).unwrap();
    let store_options = warden::store::StoreOptions { durability, ..warden::store::StoreOptions::default() };
    let kernel = Kernel::open(&store, KernelOptions { store: store_options, ..KernelOptions::default() }).unwrap();
    let t = key_template();
    for n in first..first + count {
        let payment = format!("pay_{n}");
        kernel.propose(&allow(&refund(&payment, 1), &t)).unwrap().commit(&serde_json::json!(n)).unwrap();
        println!("done {payment}");
    }
    println!("all done");
    // Wait to be killed: no close, no checkpoint.
    std::thread::sleep(Duration::from_secs(600));
}

/// Run a writer that commits `count` actions from `first`, and SIGKILL it once every commit
/// returned. The keys it reported done.
fn commit_then_kill(store: &Path, first: usize, count: usize) -> Vec<String> {
    commit_then_kill_at(store, first, count, "power")
}

fn commit_then_kill_at(store: &Path, first: usize, count: usize, durability: &str) -> Vec<String> {
    let mut child = spawn_writer(store, first, count, durability);
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut done = Vec::new();
    for line in stdout.lines() {
        let line = line.unwrap();
        if line == "all done" {
            break;
        }
        if let Some(key) = line.strip_prefix("done ") {
            done.push(key.to_owned());
        }
        assert!(Instant::now() < deadline, "the writer is stuck");
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(done.len(), count, "the writer reported every commit");
    done
}

fn journal_of(store: &Path) -> PathBuf {
    let mut name = store.as_os_str().to_owned();
    name.push(".journal");
    PathBuf::from(name)
}

/// Effect rows in the file alone (redb opened directly, as a build without the journal would).
fn effects_in_the_file(store: &Path) -> u64 {
    use redb::{ReadableDatabase, ReadableTableMetadata};
    let copy = store.with_extension("copy");
    std::fs::copy(store, &copy).unwrap();
    let db = redb::Database::open(&copy).unwrap();
    let txn = db.begin_read().unwrap();
    let table = txn.open_table(redb::TableDefinition::<&str, &[u8]>::new("effects")).unwrap();
    let rows = table.len().unwrap();
    drop(table);
    drop(txn);
    drop(db);
    std::fs::remove_file(&copy).unwrap();
    rows
}

fn assert_all_committed(kernel: &Kernel, keys: &[String]) {
    let t = key_template();
    for payment in keys {
        let again = kernel.propose(&allow(&refund(payment, 1), &t)).unwrap_err();
        assert!(matches!(again, Error::Duplicate { .. }), "{payment}: {again}");
    }
    let chain = kernel.verify_chain().unwrap();
    assert!(chain.ok, "{chain:?}");
}

fn open_store(store: &Path) -> Result<Kernel, Error> {
    Kernel::open(store, KernelOptions::default())
}

/// Why the store refuses to open (a test failure when it opens).
fn refusal(store: &Path) -> Error {
    match open_store(store) {
        Ok(_) => panic!("{} opened", store.display()),
        Err(error) => error,
    }
}

/// A store that a killed writer left with `count` answered commits, redb holding none of them.
fn crashed(count: usize) -> (tempfile::TempDir, PathBuf, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("state.redb");
    let done = commit_then_kill(&store, 0, count);
    (dir, store, done)
}

#[test]
fn every_answered_write_of_a_killed_owner_comes_back_from_the_journal_and_twice_in_a_row() {
    let (_dir, store, mut done) = crashed(40);
    assert_eq!(effects_in_the_file(&store), 0, "the file alone holds none of them: only the journal does");
    // A second owner replays, checkpoints, writes 10 more in a new lap over the old one's
    // records, and is killed too.
    done.extend(commit_then_kill(&store, 40, 10));
    assert_eq!(effects_in_the_file(&store), 40, "the second open's checkpoint holds the first 40");
    let kernel = open_store(&store).unwrap();
    assert_eq!(kernel.verify_chain().unwrap().verified, 50, "one receipt per committed action");
    assert_all_committed(&kernel, &done);
    drop(kernel);
    // A clean close leaves the file whole: the journal is not needed to read it.
    assert_eq!(effects_in_the_file(&store), 50);
}

/// `process` writes the journal without syncing it: a crash of the process (not of the machine)
/// still loses nothing, since the kernel's page cache holds what was written.
#[test]
fn under_durability_process_a_killed_owner_loses_nothing_either() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("state.redb");
    let done = commit_then_kill_at(&store, 0, 20, "process");
    assert_eq!(effects_in_the_file(&store), 0);
    assert_all_committed(&open_store(&store).unwrap(), &done);
}

#[test]
fn a_damaged_record_with_valid_records_after_it_is_a_fault_naming_the_journal_and_offset() {
    let (_dir, store, done) = crashed(5);
    let journal = journal_of(&store);
    let mut bytes = std::fs::read(&journal).unwrap();
    // One bit inside the first record's payload (its head is 28 bytes).
    bytes[RECORDS_FROM as usize + 40] ^= 0x10;
    std::fs::write(&journal, &bytes).unwrap();
    let refused = refusal(&store);
    let text = refused.to_string();
    assert!(matches!(refused, Error::Store(_)), "{text}");
    assert!(text.contains(&journal.display().to_string()) && text.contains("at offset 4096"), "{text}");
    assert!(text.contains("is damaged") && text.contains("follows it"), "{text}");
    // Nothing was decided or replayed: the file still holds none of the writes, and the same
    // refusal comes again.
    assert_eq!(effects_in_the_file(&store), 0);
    assert!(open_store(&store).is_err());
    // The twin: the bit put back, every write is there.
    bytes[RECORDS_FROM as usize + 40] ^= 0x10;
    std::fs::write(&journal, &bytes).unwrap();
    assert_all_committed(&open_store(&store).unwrap(), &done);
}

#[test]
fn a_torn_last_record_is_dropped_and_the_rest_is_replayed() {
    let (_dir, store, done) = crashed(6);
    let journal = journal_of(&store);
    let mut bytes = std::fs::read(&journal).unwrap();
    // The last record: the last sector with a record magic in it.
    let last = (RECORDS_FROM as usize..bytes.len()).step_by(512).rfind(|at| &bytes[*at..*at + 4] == b"WJR1");
    let last = last.expect("a record");
    // Torn: its second half never reached the disk (zeros from there).
    let end = (last + 512).min(bytes.len());
    for byte in &mut bytes[last + 30..end] {
        *byte = 0;
    }
    std::fs::write(&journal, &bytes).unwrap();
    let kernel = open_store(&store).unwrap();
    // The last batch was the last commit's outcome: its effect is back to executing, every
    // earlier one is there.
    assert_all_committed(&kernel, &done[..5]);
    let last_key = format!("refund:{}", done[5]);
    let effect = kernel.effect(&last_key).unwrap().expect("reserved");
    assert_eq!(effect.state, warden::EffectState::Executing, "{effect:?}");
}

#[test]
fn a_missing_journal_after_a_crash_is_a_fault_and_after_a_clean_close_is_recreated() {
    let (_dir, store, _) = crashed(3);
    let journal = journal_of(&store);
    let kept = journal.with_extension("kept");
    std::fs::rename(&journal, &kept).unwrap();
    let text = refusal(&store).to_string();
    assert!(text.contains("is missing") && text.contains("not closed cleanly"), "{text}");
    assert!(text.contains(&journal.display().to_string()), "{text}");
    std::fs::rename(&kept, &journal).unwrap();
    let kernel = open_store(&store).unwrap();
    drop(kernel);
    // Closed cleanly: the journal may go, and a new one is made.
    std::fs::remove_file(&journal).unwrap();
    let kernel = open_store(&store).unwrap();
    assert!(journal.exists());
    assert_eq!(kernel.verify_chain().unwrap().verified, 3);
}

#[test]
fn another_store_s_journal_is_refused() {
    let (_dir, store, _) = crashed(2);
    let other_dir = tempfile::tempdir().unwrap();
    let other = other_dir.path().join("other.redb");
    drop(open_store(&other).unwrap());
    std::fs::copy(journal_of(&other), journal_of(&store)).unwrap();
    let text = refusal(&store).to_string();
    assert!(text.contains("belongs to another store"), "{text}");
    // A journal beside a store that never had one (the store restored without it, say).
    let bare_dir = tempfile::tempdir().unwrap();
    let bare = bare_dir.path().join("bare.redb");
    drop(open_store(&bare).unwrap());
    std::fs::copy(journal_of(&store), journal_of(&bare)).unwrap();
    let text = refusal(&bare).to_string();
    assert!(text.contains("belongs to another store"), "{text}");
}

/// A reader never takes the file alone for the store while the journal holds more: opened to
/// read after a crash, the store is recovered first (as an owner's open, which a user who may
/// only read is refused with "needs recovery"), and every answered write is there.
/// `rm state.redb` and start again: the journal the deleted store left is set aside (renamed,
/// kept), never replayed into the new store nor a reason to refuse it.
#[test]
fn a_store_deleted_and_made_again_at_its_path_sets_the_old_journal_aside() {
    let (_dir, store, _) = crashed(2);
    std::fs::remove_file(&store).unwrap();
    let kernel = open_store(&store).unwrap();
    assert_eq!(kernel.verify_chain().unwrap().verified, 0, "a new, empty store");
    let aside: Vec<String> = std::fs::read_dir(store.parent().unwrap())
        .unwrap()
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("state.redb.journal.of-"))
        .collect();
    let all: Vec<_> = std::fs::read_dir(store.parent().unwrap()).unwrap().flatten().map(|e| e.file_name()).collect();
    assert_eq!(aside.len(), 1, "the old journal is kept aside: {aside:?} in {all:?}");
    assert!(journal_of(&store).exists(), "the new store has its own");
}

#[test]
fn a_read_only_open_of_a_crashed_store_recovers_it_instead_of_reading_the_file_alone() {
    let (_dir, store, done) = crashed(3);
    let reader = open_to_read(&store);
    assert_eq!(reader.verify_chain().unwrap().verified, done.len() as u64);
    assert_all_committed(&reader, &done);
}

#[test]
fn durability_is_power_or_process_and_a_misspelling_names_both() {
    let refused = warden::store::Withstands::parse("disk").unwrap_err().to_string();
    assert!(refused.contains("\"power\"") && refused.contains("\"process\"") && refused.contains("disk"), "{refused}");
    assert_eq!(warden::store::Withstands::parse("process").unwrap(), warden::store::Withstands::Process);
    assert_eq!(warden::store::Withstands::parse("power").unwrap(), warden::store::Withstands::Power);
}
