//! Automatic checkpoints: the document's `evidence` section makes a handle sign the next
//! checkpoint whenever one is due, on its own commits, never failing or delaying an action.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use common::{eventually, read_customers, store_location};
use warden::clock::MICROS_PER_SECOND;
use warden::document::load_str;
use warden::evidence::key::{open_note, NoteSigner};
use warden::evidence::settings::Due;
use warden::pipeline::{Warden, WardenOptions};
use warden::{Error, ManualClock};

const T0: i64 = 1_800_000_000 * MICROS_PER_SECOND;

fn policy(key: &Path) -> String {
    format!(
        "schema: warden/v1\nactions:\n  customer.read:\n    decision: allow\n\
         evidence:\n  key_file: {}\n  origin: warden.test/auto\n  every_receipts: 5\n  every: PT10S\n",
        key.display()
    )
}

fn key(dir: &Path) -> (std::path::PathBuf, NoteSigner) {
    let path = dir.join("evidence.key");
    let signer = NoteSigner::generate("warden.test/auto").unwrap();
    signer.save(&path).unwrap();
    (path, signer)
}

fn open(store: &Path, document: &str, clock: &ManualClock, automatic: bool) -> Result<Warden, Error> {
    Warden::open(
        store,
        load_str(document, "test.yaml").unwrap(),
        WardenOptions { clock: Arc::new(clock.clone()), automatic_checkpoints: automatic, ..WardenOptions::default() },
    )
}

#[test]
fn checkpoints_follow_the_receipts_by_count_and_by_time_and_none_is_made_for_a_quiet_log() {
    let dir = tempfile::tempdir().unwrap();
    let (path, signer) = key(dir.path());
    let clock = ManualClock::new(T0);
    let store = store_location(dir.path());
    let warden = open(&store, &policy(&path), &clock, true).unwrap();
    let kernel = warden.kernel().clone();
    let checkpointer = Arc::clone(warden.checkpointer().expect("the document asks for checkpoints"));
    assert_eq!(checkpointer.due(), Due { every_receipts: 5, every: 10 * MICROS_PER_SECOND });

    read_customers(&warden, 6);
    let size = kernel.receipt_count().unwrap();
    assert!(size >= 6, "{size} receipts");
    // By count: the clock stands still, so only the receipts make one due.
    eventually("a checkpoint by count", || kernel.checkpoint_numbered(None).unwrap().is_some());
    let first = kernel.checkpoint_numbered(None).unwrap().unwrap();
    assert_eq!((first.number, first.origin.as_str()), (1, "warden.test/auto"));
    assert!(first.size >= 5, "{first:?}");
    let text = open_note(first.note.as_bytes(), &[signer.verifier()]).expect("signed by the document's key");
    assert!(text.starts_with("warden.test/auto\n"), "{text}");

    // Fewer than five new receipts wait for the time bound.
    read_customers(&warden, 1);
    let size = kernel.receipt_count().unwrap();
    eventually("everything covered once the time bound passes", || {
        let last = kernel.checkpoint_numbered(None).unwrap().unwrap();
        if last.size < size && size - last.size < 5 {
            clock.advance(10 * MICROS_PER_SECOND);
        }
        last.size == size
    });
    // The checkpoint row is in the store before the checkpointer's thread updates its status:
    // wait for the count too (a loaded machine once saw `made: 1` here).
    eventually("the checkpointer counts its second checkpoint", || checkpointer.status().made >= 2);
    let made = checkpointer.status();
    assert!(made.error.is_none(), "{made:?}");
    let last = kernel.checkpoint_numbered(None).unwrap().unwrap();

    // A quiet log: time passes, no receipt, no checkpoint.
    clock.advance(60 * MICROS_PER_SECOND);
    std::thread::sleep(Duration::from_millis(2_500));
    assert_eq!(kernel.checkpoint_numbered(None).unwrap().unwrap().number, last.number, "nothing new to cover");
    assert_eq!(checkpointer.status().made, made.made);

    // The handle goes, the worker goes: dropping the last clone waits for it, so the store can
    // be opened again at once.
    drop(checkpointer);
    drop(kernel);
    drop(warden);
    let again = open(&store, &policy(&path), &clock, false).unwrap();
    assert!(again.checkpointer().is_none(), "turned off for this handle");
    assert_eq!(again.kernel().checkpoint_numbered(None).unwrap().unwrap().number, last.number);
}

#[test]
fn due_is_checked_at_the_instant_and_one_step_before() {
    let dir = tempfile::tempdir().unwrap();
    let (path, signer) = key(dir.path());
    let clock = ManualClock::new(T0);
    let warden = open(&store_location(dir.path()), &policy(&path), &clock, false).unwrap();
    let kernel = warden.kernel();
    let due = Due { every_receipts: 3, every: 10 * MICROS_PER_SECOND };
    assert!(kernel.checkpoint_if_due(&signer, None, &due).unwrap().is_none(), "an empty log is never due");
    read_customers(&warden, 1);
    let first = kernel.checkpoint_if_due(&signer, None, &due).unwrap().expect("the first receipt is due");
    let step = kernel.receipt_count().unwrap() - first.size;
    assert_eq!(step, 0);
    // One receipt past the first checkpoint: due by time at exactly `every`, not a microsecond before.
    read_customers(&warden, 1);
    let after = kernel.receipt_count().unwrap() - first.size;
    assert!(after < 3, "one read writes fewer receipts than the count bound ({after})");
    let since = kernel.now() - first.time;
    clock.advance(10 * MICROS_PER_SECOND - since - 1);
    assert!(kernel.checkpoint_if_due(&signer, None, &due).unwrap().is_none(), "one microsecond early");
    clock.advance(1);
    let second = kernel.checkpoint_if_due(&signer, None, &due).unwrap().expect("due at the instant");
    assert_eq!(second.number, 2);
    // By count: exactly `every_receipts` new receipts, the clock standing still.
    let mut n = 0;
    while kernel.receipt_count().unwrap() - second.size < 3 {
        assert!(kernel.checkpoint_if_due(&signer, None, &due).unwrap().is_none(), "below the count");
        read_customers(&warden, 1);
        n += 1;
        assert!(n < 10);
    }
    let third = kernel.checkpoint_if_due(&signer, None, &due).unwrap().expect("due by count");
    assert_eq!(third.size, kernel.receipt_count().unwrap());
}

#[test]
fn a_key_file_others_may_read_is_refused_at_open_and_a_key_reference_waits_for_its_value() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = key(dir.path());
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let clock = ManualClock::new(T0);
    let refused = open(&store_location(dir.path()), &policy(&path), &clock, true).unwrap_err();
    assert!(matches!(refused, Error::Config(_)), "{refused:?}");
    let text = refused.to_string();
    assert!(text.contains("evidence.key_file") && text.contains(&format!("chmod 600 {}", path.display())), "{text}");
    // Without the automatic checkpoints (the CLI's commands), the same document opens.
    open(&store_location(dir.path()), &policy(&path), &clock, false).unwrap();

    // A key reference the provider cannot resolve fails the checkpoint, never an action.
    let by_reference = "schema: warden/v1\nactions:\n  customer.read:\n    decision: allow\n\
                        evidence:\n  key_ref: WARDEN_TEST_NO_SUCH_EVIDENCE_KEY\n  every_receipts: 1\n";
    let warden = open(&store_location(dir.path()), by_reference, &clock, true).unwrap();
    read_customers(&warden, 2);
    let checkpointer = warden.checkpointer().unwrap();
    eventually("the failure reported", || checkpointer.status().failures >= 1);
    let status = checkpointer.status();
    let error = status.error.unwrap_or_default();
    assert!(error.contains("WARDEN_TEST_NO_SUCH_EVIDENCE_KEY is unavailable"), "{error}");
    assert_eq!(status.made, 0);
    assert!(warden.kernel().checkpoint_numbered(None).unwrap().is_none());
}
