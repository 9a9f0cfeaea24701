//! Crash consistency of the file store, tested as file-system researchers test (ALICE,
//! CrashMonkey), in process: a scripted workload runs on the simulated disk (`disk::sim`), and
//! at every write (a process crash: the page cache survives) and before every sync (a power
//! loss: the synced bytes survive, with any subset of the unsynced writes torn at 512-byte
//! boundaries) the disk's state is captured. Each distinct crash state is then written to real
//! files and opened as the next process would, and the invariants are checked:
//!
//! - it opens (a crash never leaves a store that refuses to open);
//! - every step that returned before the crash is there (the `power` promise);
//! - no effect is FAILED that its caller did not report not executed, none committed twice;
//! - the tables, the indexes and the receipt chain agree (`doctor`).
//!
//! The workload covers reservations, commits, a not-executed outcome, an effect left in flight,
//! an approval granted and consumed, a delegation and the budget charges it brings, a checkpoint
//! anchored and the receipts pruned through it, and enough
//! batches to pass several checkpoints and journal laps. `WARDEN_CRASH_SUBSETS` (default 2)
//! sets how many random subsets of the unsynced writes each sync point gets beside "none" and
//! "all"; `scripts/crash-sweep.sh` runs the sweep with many.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::json;
use sha2::{Digest, Sha256};

use crate::authority::CreatedVia;
use crate::clock::ManualClock;
use crate::effect::EffectState;
use crate::error::Error;
use crate::pipeline::{ActionRequest, Warden, WardenOptions};
use crate::store::redb::disk::sim::{after_power_loss, Event, SimDisk, SimFile};
use crate::Principal;

const T0: i64 = 1_764_000_000_000_000;

const DOCUMENT: &str = r#"
schema: warden/v1
environment: production
actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    decision: allow
  email.send:
    effect: "email:{message_id}"
    decision: approve
authority:
  grants:
    - id: finance
      subject: { agent: finance-agent }
      actions: [stripe.refund]
      constraints: { amount_lte: 2500000 }
      expires_at: "2030-01-01T00:00:00Z"
      delegable: true
      budgets: [{ metric: count, limit: 1000, window: P1D }]
    - id: mail
      subject: { agent: mail-agent }
      actions: [email.send]
      expires_at: "2030-01-01T00:00:00Z"
"#;

const SUPPORT_GRANT: &str = r#"
subject: { agent: support-agent }
actions: [stripe.refund]
constraints: { amount_lte: 200000 }
expires_at: "2029-01-01T00:00:00Z"
budgets: [{ metric: count, limit: 100, window: P1D }, { metric: amount, limit: 5000000, window: PT1H }]
"#;

/// One step of the workload, and what must hold once it returned.
#[derive(Clone, Debug)]
enum Step {
    Delegate,
    Commit(&'static str, String),
    NotExecuted(String),
    Leave(String),
    Approve(String),
    /// A checkpoint, its anchor (a file beside the store) and a prune through it.
    Prune,
}

fn workload() -> Vec<Step> {
    let mut steps = vec![Step::Delegate];
    steps.extend((0..4).map(|n| Step::Commit("finance-agent", format!("p{n}"))));
    steps.push(Step::NotExecuted("pf".into()));
    steps.push(Step::Leave("px".into()));
    steps.push(Step::Approve("m1".into()));
    steps.push(Step::Prune);
    steps.push(Step::Commit("support-agent", "s0".into()));
    steps.extend((4..12).map(|n| Step::Commit("finance-agent", format!("p{n}"))));
    steps
}

fn principal(agent: &str) -> Principal {
    Principal::new(agent, None).expect("principal")
}

fn refund(agent: &str, payment: &str) -> ActionRequest<'static> {
    ActionRequest::new("stripe.refund", json!({"payment_id": payment, "amount": 1200}), principal(agent))
}

fn open(path: &Path) -> crate::error::Result<Warden> {
    let document = crate::document::load_str(DOCUMENT, "crash.yaml").expect("document");
    Warden::open(path, document, WardenOptions { clock: Arc::new(ManualClock::new(T0)), ..WardenOptions::default() })
}

/// Run one step; permits left in flight are kept (never dropped: dropping records AMBIGUOUS).
fn run(warden: &Warden, step: &Step, kept: &mut Vec<crate::kernel::Permit>) -> crate::error::Result<()> {
    match step {
        Step::Delegate => {
            warden.delegate_text("finance", SUPPORT_GRANT, &principal("finance-agent"), None, CreatedVia::Api)?;
        }
        Step::Commit(agent, payment) => warden.submit(&refund(agent, payment))?.commit(&json!({"id": payment}))?,
        Step::NotExecuted(payment) => warden.submit(&refund("finance-agent", payment))?.not_executed("declined")?,
        Step::Leave(payment) => kept.push(warden.submit(&refund("finance-agent", payment))?),
        Step::Approve(message) => {
            let request = ActionRequest::new("email.send", json!({"message_id": message}), principal("mail-agent"));
            let id = match warden.submit(&request) {
                Err(Error::ApprovalRequired { request_id, .. }) => request_id,
                other => panic!("expected an approval request, got {other:?}"),
            };
            warden.kernel().grant(&id, "ops:carol")?;
            let presented = ActionRequest { approval_id: Some(&id), ..request };
            warden.submit(&presented)?.commit(&json!({"sent": message}))?;
        }
        Step::Prune => {
            let kernel = warden.kernel();
            let signer = crate::evidence::key::NoteSigner::generate("crash")?;
            let checkpoint = kernel.checkpoint(&signer, None)?;
            let file = kernel.store_path().with_file_name("anchors.jsonl");
            let sink = crate::evidence::anchor::FileSink::new(file.clone());
            let sinks: Vec<crate::evidence::anchoring::SinkProvider> =
                vec![(format!("file {}", file.display()), Ok(Arc::new(sink)))];
            kernel.anchor_pending(&sinks, true)?;
            kernel.prune(checkpoint.number, "ops:carol", "crash test")?;
        }
    }
    Ok(())
}

/// A crash state: the disk's files at that instant, and how many steps had returned.
#[derive(Clone)]
struct Captured {
    acked: usize,
    event: Event,
    files: BTreeMap<PathBuf, SimFile>,
}

/// The workload on a simulated disk under `root`, every event captured. Returns the captures,
/// the workload, and how far it got (all of it, unless `space_after` ran the disk full).
fn capture(root: &Path, store: &Path, space_after: Option<(usize, u64)>) -> (Vec<Captured>, Vec<Step>, usize) {
    // Laps of 12 KiB: a checkpoint every few batches, and journal wraps, within the workload.
    let (disk, _installed) = SimDisk::install(root, 12 << 10, 16 << 10);
    let acked = Arc::new(AtomicUsize::new(0));
    let captures: Arc<Mutex<Vec<Captured>>> = Arc::default();
    {
        let (acked, captures) = (acked.clone(), captures.clone());
        disk.set_hook(move |event, _path, files| {
            let acked = acked.load(Ordering::SeqCst);
            captures.lock().expect("captures").push(Captured { acked, event, files: files.clone() });
        });
    }
    let steps = workload();
    let warden = open(store).expect("open on the simulated disk");
    let mut kept = Vec::new();
    let mut done = 0;
    for (index, step) in steps.iter().enumerate() {
        if let Some((at, bytes)) = space_after {
            if index == at {
                disk.set_space_left(Some(bytes));
            }
        }
        match run(&warden, step, &mut kept) {
            Ok(()) => {
                done = index + 1;
                acked.store(done, Ordering::SeqCst);
            }
            Err(error) => {
                assert!(space_after.is_some(), "step {index} {step:?} failed: {error}");
                assert!(matches!(error, Error::Store(_)), "a full disk is a store fault: {error}");
                assert_eq!(error.store_fault_kind(), Some(crate::error::StoreFaultKind::NoSpace), "{error}");
                break;
            }
        }
    }
    std::mem::forget(kept);
    // The process "dies" here: the handle is never closed (no clean checkpoint).
    std::mem::forget(warden);
    let captured = captures.lock().expect("captures").clone();
    (captured, steps, done)
}

/// The images a crash state stands for: a process crash keeps everything written; a power
/// loss keeps nothing unsynced, everything, or `subsets` seeded random subsets of sectors.
fn images(captured: &Captured, index: usize, subsets: usize) -> Vec<BTreeMap<PathBuf, Vec<u8>>> {
    let every = |keep: &mut dyn FnMut(usize, usize, usize) -> bool| {
        captured
            .files
            .iter()
            .enumerate()
            .map(|(f, (path, file))| (path.clone(), after_power_loss(file, |w, s| keep(f, w, s))))
            .collect::<BTreeMap<_, _>>()
    };
    let mut out = vec![every(&mut |_, _, _| true)];
    if captured.event == Event::Syncing {
        out.push(every(&mut |_, _, _| false));
        for subset in 0..subsets {
            out.push(every(&mut |f, w, s| {
                let mut hash = Sha256::new();
                hash.update(format!("{index}/{subset}/{f}/{w}/{s}"));
                hash.finalize()[0] & 1 == 1
            }));
        }
    }
    out
}

fn state_of(warden: &Warden, key: &str) -> Option<EffectState> {
    warden.kernel().effect(key).expect("read an effect").map(|effect| effect.state)
}

/// `image` written to real files and opened as the next process would: it must open, `doctor`
/// must find the tables, indexes and chain agreeing, no effect may be reserved twice, and none
/// FAILED but those in `reported` (whose callers reported them not executed).
fn reopened(
    image: &BTreeMap<PathBuf, Vec<u8>>,
    store_name: &Path,
    reported: &HashSet<String>,
) -> Result<(tempfile::TempDir, Warden), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    for (path, bytes) in image {
        let name = path.file_name().ok_or("a file without a name")?;
        std::fs::write(dir.path().join(name), bytes).map_err(|e| e.to_string())?;
    }
    let path = dir.path().join(store_name.file_name().ok_or("no store name")?);
    let warden = open(&path).map_err(|e| format!("the store does not open after the crash: {e}"))?;
    let doctor = warden.kernel().doctor().map_err(|e| format!("doctor: {e}"))?;
    let problems: Vec<&String> = doctor.tables.iter().flat_map(|(_, _, problems)| problems).collect();
    if !problems.is_empty() || !doctor.orphans.is_empty() || !doctor.chain.ok {
        return Err(format!("doctor: {problems:?} orphans {:?} chain {:?}", doctor.orphans, doctor.chain));
    }
    for effect in warden.kernel().effects(None, 0).map_err(|e| e.to_string())? {
        if effect.state == EffectState::Failed && !reported.contains(&effect.effect_key) {
            return Err(format!("{} is FAILED but nobody reported it not executed", effect.effect_key));
        }
        if effect.attempt != 1 {
            return Err(format!("{} is at attempt {}: it was reserved twice", effect.effect_key, effect.attempt));
        }
    }
    Ok((dir, warden))
}

/// Open `image` as the next process would, and check every invariant. An error names what broke.
fn check(image: &BTreeMap<PathBuf, Vec<u8>>, store_name: &Path, steps: &[Step], acked: usize) -> Result<(), String> {
    // Every FAILED effect was reported not executed (by a step that had at least started).
    let reported: HashSet<String> = steps[..(acked + 1).min(steps.len())]
        .iter()
        .filter_map(|step| match step {
            Step::NotExecuted(payment) => Some(format!("refund:{payment}")),
            _ => None,
        })
        .collect();
    let (_dir, warden) = reopened(image, store_name, &reported)?;
    // Every step that returned is there.
    for step in &steps[..acked] {
        let holds = match step {
            Step::Delegate => !warden.kernel().all_delegations().map_err(|e| e.to_string())?.is_empty(),
            Step::Commit(_, payment) => state_of(&warden, &format!("refund:{payment}")) == Some(EffectState::Committed),
            Step::NotExecuted(payment) => state_of(&warden, &format!("refund:{payment}")) == Some(EffectState::Failed),
            Step::Leave(payment) => matches!(
                state_of(&warden, &format!("refund:{payment}")),
                Some(EffectState::Executing | EffectState::Ambiguous)
            ),
            Step::Approve(message) => state_of(&warden, &format!("email:{message}")) == Some(EffectState::Committed),
            Step::Prune => {
                let kernel = warden.kernel();
                let prefix = kernel.pruned().map_err(|e| e.to_string())?;
                let first = kernel.receipts(1, 1).map_err(|e| e.to_string())?;
                prefix.is_some_and(|p| first.first().is_some_and(|(seq, _)| *seq == p.through_seq + 1))
            }
        };
        if !holds {
            return Err(format!("{step:?} returned before the crash but is not in the store"));
        }
    }
    Ok(())
}

fn subsets() -> usize {
    std::env::var("WARDEN_CRASH_SUBSETS").ok().and_then(|n| n.parse().ok()).unwrap_or(2)
}

/// Check every distinct image of every capture; the count of distinct states checked.
fn check_all(captures: &[Captured], store: &Path, steps: &[Step], subsets: usize) -> usize {
    let mut seen = HashSet::new();
    let mut failures = Vec::new();
    for (index, captured) in captures.iter().enumerate() {
        for image in images(captured, index, subsets) {
            let mut hash = Sha256::new();
            for (path, bytes) in &image {
                hash.update(path.as_os_str().as_encoded_bytes());
                hash.update(bytes);
            }
            if !seen.insert((hash.finalize().to_vec(), captured.acked)) {
                continue;
            }
            if let Err(what) = check(&image, store, steps, captured.acked) {
                failures
                    .push(format!("capture {index} ({:?}, {} steps returned): {what}", captured.event, captured.acked));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} crash states broke an invariant:\n{}",
        failures.len(),
        seen.len(),
        failures.join("\n")
    );
    seen.len()
}

#[test]
fn every_crash_state_of_the_workload_opens_with_every_returned_step_and_agreeing_evidence() {
    let root = tempfile::tempdir().expect("tempdir");
    let store = root.path().join("state.redb");
    let (captures, steps, done) = capture(root.path(), &store, None);
    assert_eq!(done, steps.len());
    let syncs = captures.iter().filter(|c| c.event == Event::Syncing).count();
    let checked = check_all(&captures, &store, &steps, subsets());
    eprintln!(
        "crash states: {} captured ({syncs} sync points, {} writes), {checked} distinct states checked",
        captures.len(),
        captures.len() - syncs
    );
    // The workload passed checkpoints and laps: redb's own syncs are among the sync points.
    assert!(captures
        .iter()
        .any(|c| c.event == Event::Syncing && c.files.keys().any(|p| p.extension().is_some_and(|e| e == "redb"))));
}

#[test]
fn a_disk_that_fills_mid_workload_loses_no_returned_step_and_the_store_opens() {
    for space in [600, 5_000, 20_000] {
        let root = tempfile::tempdir().expect("tempdir");
        let store = root.path().join("state.redb");
        let (captures, steps, done) = capture(root.path(), &store, Some((6, space)));
        assert!(done < steps.len(), "with {space} bytes left the disk filled");
        let checked = check_all(&captures[captures.len().saturating_sub(40)..], &store, &steps, 1);
        eprintln!("{space} bytes left: {done} steps returned; {checked} crash states checked");
    }
}

/// A crash during recovery (a SIGKILL or a power loss while the next owner replays the journal
/// and checkpoints) is one more crash state: recovering from it again keeps every step that
/// returned before the first crash.
#[test]
fn a_crash_during_recovery_recovers_again_with_every_returned_step() {
    let root = tempfile::tempdir().expect("tempdir");
    let store = root.path().join("state.redb");
    let (captures, steps, _) = capture(root.path(), &store, None);
    let mut replays = 0;
    let mut checked = 0;
    // Every fifth power-loss point with everything written: the journal holds batches the file
    // does not, so the next open replays them.
    for (index, captured) in captures.iter().enumerate().filter(|(_, c)| c.event == Event::Syncing).step_by(5) {
        let image = &images(captured, index, 0)[0];
        let second = tempfile::tempdir().expect("tempdir");
        for (path, bytes) in image {
            std::fs::write(second.path().join(path.file_name().expect("name")), bytes).expect("write the image");
        }
        let (disk, installed) = SimDisk::install(second.path(), 12 << 10, 16 << 10);
        // Both files are on the disk from the start, so every capture holds both.
        for (path, bytes) in image {
            disk.create(&second.path().join(path.file_name().expect("name")), bytes.clone()).expect("adopt");
        }
        let during: Arc<Mutex<Vec<Captured>>> = Arc::default();
        {
            let during = during.clone();
            let acked = captured.acked;
            disk.set_hook(move |event, _path, files| {
                during.lock().expect("during").push(Captured { acked, event, files: files.clone() });
            });
        }
        let store_two = second.path().join("state.redb");
        std::mem::forget(open(&store_two).expect("recovery on the simulated disk"));
        drop(installed);
        let during = during.lock().expect("during").clone();
        replays += 1;
        checked += check_all(&during, &store_two, &steps, 1);
    }
    eprintln!("{replays} recoveries crashed at every write and sync: {checked} crash states checked");
    assert!(replays >= 3 && checked > replays, "{replays} recoveries, {checked} states");
}

/// Callers on several threads: a batch is applied and committed to redb while the record of the
/// one before it is synced (the commit's pipeline), and records may carry several batches.
/// Every crash state keeps every commit that returned before it, and no effect twice.
#[test]
fn every_crash_state_of_concurrent_callers_keeps_every_commit_that_returned() {
    let root = tempfile::tempdir().expect("tempdir");
    let store = root.path().join("state.redb");
    let (disk, installed) = SimDisk::install(root.path(), 12 << 10, 16 << 10);
    let acked: Arc<Mutex<Vec<String>>> = Arc::default();
    // Each capture with the effect keys whose commit had returned when it was taken.
    type Shared<T> = Arc<Mutex<Vec<T>>>;
    let captures: Shared<(Vec<String>, Captured)> = Arc::default();
    {
        let (acked, captures) = (acked.clone(), captures.clone());
        disk.set_hook(move |event, _path, files| {
            let returned = acked.lock().expect("acked").clone();
            let captured = Captured { acked: returned.len(), event, files: files.clone() };
            captures.lock().expect("captures").push((returned, captured));
        });
    }
    let warden = Arc::new(open(&store).expect("open on the simulated disk"));
    let threads: Vec<_> = (0..4)
        .map(|thread| {
            let (warden, acked) = (warden.clone(), acked.clone());
            std::thread::spawn(move || {
                for n in 0..6 {
                    let payment = format!("c{thread}-{n}");
                    let permit = warden.submit(&refund("finance-agent", &payment)).expect("reserve");
                    permit.commit(&json!({"id": payment})).expect("commit");
                    acked.lock().expect("acked").push(format!("refund:{payment}"));
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("a caller thread");
    }
    // The process "dies" here: the handle is never closed (no clean checkpoint).
    std::mem::forget(warden);
    drop(installed);
    let captures = captures.lock().expect("captures").clone();
    let mut seen = HashSet::new();
    let mut failures = Vec::new();
    for (index, (returned, captured)) in captures.iter().enumerate() {
        for image in images(captured, index, subsets()) {
            let mut hash = Sha256::new();
            for (path, bytes) in &image {
                hash.update(path.as_os_str().as_encoded_bytes());
                hash.update(bytes);
            }
            if !seen.insert((hash.finalize().to_vec(), returned.len())) {
                continue;
            }
            let checked = reopened(&image, &store, &HashSet::new()).and_then(|(_dir, warden)| {
                match returned.iter().find(|key| state_of(&warden, key) != Some(EffectState::Committed)) {
                    Some(key) => Err(format!("{key} returned committed before the crash but is not committed")),
                    None => Ok(()),
                }
            });
            if let Err(what) = checked {
                failures.push(format!("capture {index} ({:?}, {} returned): {what}", captured.event, returned.len()));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} crash states broke an invariant:\n{}",
        failures.len(),
        seen.len(),
        failures.join("\n")
    );
    let syncs = captures.iter().filter(|(_, c)| c.event == Event::Syncing).count();
    eprintln!(
        "concurrent callers: {} captured ({syncs} sync points), {} distinct states checked",
        captures.len(),
        seen.len()
    );
    assert!(syncs > 0 && seen.len() > syncs, "{syncs} sync points, {} states", seen.len());
}

/// The writer keeps its batches in an open redb transaction between commits to the file. A
/// fault that drops that transaction (here: the store file's device fails, the journal's does
/// not) loses nothing answered: reads and writes are refused from then on, the clean close
/// writes no checkpoint claiming the file holds those batches, and the next open replays them
/// from the journal. Without the refusal the close's checkpoint would say the file is complete
/// and the answered commits would be gone.
#[test]
fn a_fault_that_drops_the_kept_transaction_refuses_reads_and_the_next_open_replays_every_answer() {
    let root = tempfile::tempdir().expect("tempdir");
    let store = root.path().join("state.redb");
    let (disk, _installed) = SimDisk::install(root.path(), 12 << 10, 16 << 10);
    let warden = open(&store).expect("open on the simulated disk");
    let commit = |payment: &str| run(&warden, &Step::Commit("finance-agent", payment.to_owned()), &mut Vec::new());
    for n in 0..3 {
        commit(&format!("a{n}")).expect("commit before the fault");
    }
    disk.refuse_writes_to(Some(&store));
    // Commits go on into the journal until one needs the file: a checkpoint (the lap is full)
    // or a commit of the kept transaction.
    let mut answered: Vec<String> = (0..3).map(|n| format!("refund:a{n}")).collect();
    let mut fault = None;
    for n in 0..400 {
        match commit(&format!("b{n}")) {
            Ok(()) => answered.push(format!("refund:b{n}")),
            Err(error) => {
                fault = Some(error);
                break;
            }
        }
    }
    let fault = fault.expect("a commit needed the store file within 400 actions");
    assert!(matches!(fault, Error::Store(_)), "a failing device is a store fault: {fault}");
    assert!(answered.len() > 3, "some commits were answered from the journal alone");
    eprintln!("{} commits answered, then: {fault}", answered.len());
    // Nothing is read from a file that lacks answered batches, and nothing more is written.
    let read = warden.kernel().effect("refund:a0");
    assert!(matches!(&read, Err(Error::Store(_) | Error::Poisoned(_))), "{read:?}");
    assert!(commit("after").is_err(), "a writer that lost its transaction takes no further write");
    // The device recovers; the handle closes cleanly, and that close must not checkpoint.
    disk.refuse_writes_to(None);
    drop(warden);
    let image = disk.cached_files();
    let reported = HashSet::new();
    let (_dir, reopened) = reopened(&image, &store, &reported).expect("the store opens after the fault");
    for key in &answered {
        assert_eq!(state_of(&reopened, key), Some(EffectState::Committed), "{key} was answered committed");
    }
}
