//! The owner protocol under crashes: the owner, a client or a thread-heavy process killed
//! mid-burst loses no reported permit, runs no effect twice, leaves state, receipts and chain
//! agreeing, and another process takes over; deferred outcomes lost to a crash leave their
//! effects AMBIGUOUS, never FAILED; every operation reads the clock inside its transaction.
//!
//! Every child logs `exec KEY` to an O_APPEND file *before* it "executes" (after its permit
//! came back) and `done KEY` after the outcome call returned, so the log is the ground truth
//! of what ran. Children are this test binary run again with `child_process_entry` selected.

mod common;

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use warden::test_support::KernelInternals;

use common::*;
use warden::kernel::Outcomes;
use warden::{EffectState, Error, Kernel, KernelOptions, ManualClock};

const LEASE: i64 = 60 * SECOND;

fn spawn(role: &str, dir: &Path, index: usize, extra: &[(&str, String)]) -> Child {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args(["child_process_entry", "--exact", "--ignored", "--nocapture", "--test-threads=1", "--quiet"])
        .env("WARDEN_CHILD_ROLE", role)
        .env("WARDEN_CHILD_DIR", dir)
        .env("WARDEN_CHILD_INDEX", index.to_string())
        .env("RUST_BACKTRACE", "0")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    for (key, value) in extra {
        command.env(key, value);
    }
    command.spawn().unwrap()
}

fn log_line(dir: &Path, line: &str) {
    let mut log = std::fs::OpenOptions::new().append(true).create(true).open(dir.join("log")).unwrap();
    log.write_all(format!("{line}\n").as_bytes()).unwrap();
}

fn read_log(dir: &Path) -> Vec<(String, String)> {
    std::fs::read_to_string(dir.join("log"))
        .unwrap_or_default()
        .lines()
        .filter_map(|line| line.split_once(' ').map(|(a, b)| (a.to_owned(), b.to_owned())))
        .collect()
}

fn kernel_at(path: &Path, now: i64, outcomes: Outcomes) -> Kernel {
    Kernel::open(
        path,
        KernelOptions {
            clock: Arc::new(ManualClock::new(now)),
            outcomes,
            store: warden::store::StoreOptions {
                wait: Duration::from_secs(20),
                read_only: false,
                ..warden::store::StoreOptions::default()
            },
            ..KernelOptions::default()
        },
    )
    .expect("open")
}

fn propose_lease(kernel: &Kernel, key: &str) -> Result<warden::Permit, Error> {
    let t = key_template();
    let action = refund(key, 1);
    let mut proposal = allow(&action, &t);
    proposal.lease = Some(LEASE);
    kernel.propose(&proposal)
}

/// Not a test: the body of child processes, selected by `WARDEN_CHILD_ROLE`.
#[test]
#[ignore = "entry point for child processes"]
fn child_process_entry() {
    let Ok(role) = std::env::var("WARDEN_CHILD_ROLE") else { return };
    let dir = PathBuf::from(std::env::var("WARDEN_CHILD_DIR").unwrap());
    let index: usize = std::env::var("WARDEN_CHILD_INDEX").unwrap().parse().unwrap();
    let store = dir.join("state.redb");
    match role.as_str() {
        // Work through this child's keys, then the shared ones; log what runs.
        "burst" => {
            let kernel = kernel_at(&store, T0, Outcomes::Durable);
            std::fs::write(dir.join(format!("ready.{index}")), b"").unwrap();
            let keys: usize = std::env::var("WARDEN_KEYS").unwrap().parse().unwrap();
            let threads: usize = std::env::var("WARDEN_THREADS").ok().and_then(|v| v.parse().ok()).unwrap_or(1);
            let worker = |thread: usize| {
                for n in 0..keys {
                    let key = if n % 4 == 0 { format!("shared_{}", n / 4) } else { format!("c{index}t{thread}_{n}") };
                    match propose_lease(&kernel, &key) {
                        Ok(permit) => {
                            log_line(&dir, &format!("exec {key}"));
                            permit.commit(&serde_json::json!({"by": index})).ok();
                            log_line(&dir, &format!("done {key}"));
                        }
                        Err(Error::Duplicate { .. } | Error::Ambiguous { .. }) => {}
                        // The owner went away with this call in flight: fail closed, go on.
                        Err(Error::Unavailable(_)) => log_line(&dir, &format!("unavailable {key}")),
                        Err(other) => panic!("child {index}: {other}"),
                    }
                }
            };
            std::thread::scope(|scope| {
                for thread in 0..threads {
                    scope.spawn(move || worker(thread));
                }
            });
            std::fs::write(dir.join(format!("finished.{index}")), b"").unwrap();
        }
        // Deferred outcomes, then wait to be killed with the last one still pending.
        "deferred" => {
            let kernel = kernel_at(&store, T0, Outcomes::Deferred { max_delay: Duration::from_secs(60) });
            for n in 0..10 {
                let key = format!("d_{n}");
                let permit = propose_lease(&kernel, &key).unwrap();
                log_line(&dir, &format!("exec {key}"));
                permit.commit(&serde_json::json!(n)).unwrap();
                log_line(&dir, &format!("done {key}"));
            }
            std::fs::write(dir.join("ready.0"), b"").unwrap();
            loop {
                std::thread::sleep(Duration::from_secs(60));
            }
        }
        // Deferred outcomes, then a normal exit that skips every destructor (no close, no
        // flush by hand): the exit hook makes them durable.
        "deferred_exit" => {
            let kernel = kernel_at(&store, T0, Outcomes::Deferred { max_delay: Duration::from_secs(60) });
            for n in 0..5 {
                let key = format!("e_{n}");
                let permit = propose_lease(&kernel, &key).unwrap();
                log_line(&dir, &format!("exec {key}"));
                permit.commit(&serde_json::json!(n)).unwrap();
                log_line(&dir, &format!("done {key}"));
            }
            std::mem::forget(kernel);
            std::process::exit(0);
        }
        // Own the store until told to close, then hand it over and exit.
        "owner_then_close" => {
            let kernel = kernel_at(&store, T0, Outcomes::Durable);
            std::fs::write(dir.join("ready.0"), b"").unwrap();
            while !dir.join("close").exists() {
                std::thread::sleep(Duration::from_millis(1));
            }
            drop(kernel);
            std::fs::write(dir.join("closed"), b"").unwrap();
        }
        other => panic!("unknown role {other}"),
    }
}

fn wait_for(path: &Path, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !path.exists() {
        assert!(Instant::now() < deadline, "{what} never happened");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn wait_for_lines(dir: &Path, lines: usize) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while read_log(dir).len() < lines {
        assert!(Instant::now() < deadline, "the children never logged {lines} lines");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Everything the log says ran, checked against the store reopened after every child ended:
/// no key ran twice, every key that ran has its record, state and receipts agree, the chain
/// verifies, and no retry of a key that ran gets a permit.
fn check_after(dir: &Path) -> (usize, usize) {
    let log = read_log(dir);
    let mut runs: HashMap<String, usize> = HashMap::new();
    let mut done: HashSet<String> = HashSet::new();
    for (kind, key) in &log {
        match kind.as_str() {
            "exec" => *runs.entry(key.clone()).or_default() += 1,
            "done" => {
                done.insert(key.clone());
            }
            _ => {}
        }
    }
    for (key, count) in &runs {
        assert_eq!(*count, 1, "{key} was executed {count} times");
    }
    // Past every lease: an effect left in flight by a crash reads as AMBIGUOUS.
    let kernel = kernel_at(&dir.join("state.redb"), T0 + 2 * LEASE, Outcomes::Durable);
    let report = kernel.verify_chain().unwrap();
    assert!(report.ok, "{report:?}");
    let receipts = kernel.receipts(1, usize::MAX).unwrap();
    let committed_receipts: HashSet<String> = receipts
        .iter()
        .filter_map(|(_, row)| {
            let doc = row.to_json();
            (doc["result"] == "committed").then(|| doc["effect_key"].as_str().unwrap_or_default().to_owned())
        })
        .collect();
    for key in runs.keys() {
        let record = kernel
            .effect(&format!("refund:{key}"))
            .unwrap()
            .unwrap_or_else(|| panic!("{key} ran but the store has no record of its permit"));
        assert_ne!(record.state, EffectState::Failed, "{key} is FAILED without proof");
        if record.state == EffectState::Committed {
            assert!(committed_receipts.contains(&format!("refund:{key}")), "{key} is committed without a receipt");
        }
        assert!(propose_lease(&kernel, key).is_err(), "a retry of {key}, which ran, got a permit");
    }
    let committed_without_run: Vec<&String> =
        committed_receipts.iter().filter(|key| !runs.contains_key(key.trim_start_matches("refund:"))).collect();
    assert!(
        committed_without_run.is_empty(),
        "receipts say committed for keys that never ran: {committed_without_run:?}"
    );
    (runs.len(), done.len())
}

#[test]
fn killing_the_owner_mid_burst_loses_no_reported_permit_runs_nothing_twice_and_another_process_takes_over() {
    let dir = tempfile::tempdir().unwrap();
    let keys = ("WARDEN_KEYS", "200".to_owned());
    let mut owner = spawn("burst", dir.path(), 0, std::slice::from_ref(&keys));
    wait_for(&dir.path().join("ready.0"), "the owner's open");
    let others: Vec<Child> = (1..8).map(|i| spawn("burst", dir.path(), i, std::slice::from_ref(&keys))).collect();
    wait_for_lines(dir.path(), 300);
    owner.kill().unwrap();
    owner.wait().unwrap();
    let killed_at = Instant::now();
    let lines_at_kill = read_log(dir.path()).len();
    // Another process takes over: new work is logged after the kill.
    let deadline = killed_at + Duration::from_secs(30);
    while read_log(dir.path()).len() <= lines_at_kill + 10 {
        assert!(Instant::now() < deadline, "nobody took over the store after its owner was killed");
        std::thread::sleep(Duration::from_millis(1));
    }
    eprintln!("after SIGKILL of the owner, new work was logged within {:?}", killed_at.elapsed());
    for mut child in others {
        assert!(child.wait().unwrap().success(), "a surviving child failed");
    }
    let (ran, finished) = check_after(dir.path());
    eprintln!("{ran} effects ran, {finished} reported their outcome");
}

#[test]
fn killing_a_client_mid_burst_leaves_its_permits_in_flight_and_the_others_unaffected() {
    let dir = tempfile::tempdir().unwrap();
    let keys = ("WARDEN_KEYS", "150".to_owned());
    let owner = spawn("burst", dir.path(), 0, std::slice::from_ref(&keys));
    wait_for(&dir.path().join("ready.0"), "the owner's open");
    let mut victim = spawn("burst", dir.path(), 1, std::slice::from_ref(&keys));
    let others: Vec<Child> = (2..4).map(|i| spawn("burst", dir.path(), i, std::slice::from_ref(&keys))).collect();
    wait_for(&dir.path().join("ready.1"), "the client's open");
    wait_for_lines(dir.path(), 200);
    victim.kill().unwrap();
    victim.wait().unwrap();
    for mut child in others.into_iter().chain(std::iter::once(owner)) {
        assert!(child.wait().unwrap().success(), "a surviving child failed");
    }
    check_after(dir.path());
}

#[test]
fn killing_a_thread_heavy_owner_mid_burst_loses_no_reported_permit() {
    let dir = tempfile::tempdir().unwrap();
    let mut heavy =
        spawn("burst", dir.path(), 0, &[("WARDEN_KEYS", "400".to_owned()), ("WARDEN_THREADS", "8".to_owned())]);
    wait_for(&dir.path().join("ready.0"), "the open");
    wait_for_lines(dir.path(), 400);
    heavy.kill().unwrap();
    heavy.wait().unwrap();
    check_after(dir.path());
}

#[test]
fn an_owner_that_closes_hands_the_store_over_without_failing_a_single_call_of_its_clients() {
    let dir = tempfile::tempdir().unwrap();
    let mut owner = spawn("owner_then_close", dir.path(), 0, &[]);
    wait_for(&dir.path().join("ready.0"), "the owner's open");
    let kernel =
        kernel_at(&dir.path().join("state.redb"), T0, Outcomes::Deferred { max_delay: Duration::from_millis(5) });
    assert!(matches!(kernel.store().role().unwrap(), warden::store::Role::Client { .. }));
    for n in 0..300 {
        if n == 100 {
            std::fs::write(dir.path().join("close"), b"").unwrap();
        }
        let permit = propose_lease(&kernel, &format!("h_{n}")).unwrap_or_else(|e| panic!("call {n} failed: {e}"));
        log_line(dir.path(), &format!("exec h_{n}"));
        permit.commit(&serde_json::json!(n)).unwrap_or_else(|e| panic!("outcome {n} failed: {e}"));
        log_line(dir.path(), &format!("done h_{n}"));
    }
    assert!(owner.wait().unwrap().success());
    assert!(dir.path().join("closed").exists());
    // This process took the store over.
    assert_eq!(kernel.store().role().unwrap(), warden::store::Role::Owner);
    kernel.flush().unwrap();
    for n in 0..300 {
        assert_eq!(kernel.effect(&format!("refund:h_{n}")).unwrap().unwrap().state, EffectState::Committed, "h_{n}");
    }
    drop(kernel);
    check_after(dir.path());
}

#[test]
fn deferred_outcomes_lost_to_a_crash_leave_their_effects_ambiguous_never_failed() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = spawn("deferred", dir.path(), 0, &[]);
    wait_for(&dir.path().join("ready.0"), "the deferred commits");
    child.kill().unwrap();
    child.wait().unwrap();
    let kernel = kernel_at(&dir.path().join("state.redb"), T0 + 2 * LEASE, Outcomes::Durable);
    let states: Vec<EffectState> = (0..10)
        .map(|n| kernel.effect(&format!("refund:d_{n}")).unwrap().expect("every permit was durable").state)
        .collect();
    // Each deferred outcome rode with the next proposal's commit; the last one had none.
    assert!(states[..9].iter().all(|s| *s == EffectState::Committed), "{states:?}");
    assert_eq!(states[9], EffectState::Executing, "the outcome in the crash window stays in flight");
    let refused = propose_lease(&kernel, "d_9").unwrap_err();
    assert!(matches!(refused, Error::Ambiguous { .. }), "{refused}");
    assert_eq!(kernel.effect("refund:d_9").unwrap().unwrap().state, EffectState::Ambiguous);
    check_after(dir.path());
}

#[test]
fn deferred_outcomes_are_made_durable_when_the_process_exits_normally_without_closing() {
    let dir = tempfile::tempdir().unwrap();
    let status = spawn("deferred_exit", dir.path(), 0, &[]).wait().unwrap();
    assert!(status.success());
    let kernel = kernel_at(&dir.path().join("state.redb"), T0, Outcomes::Durable);
    for n in 0..5 {
        let state = kernel.effect(&format!("refund:e_{n}")).unwrap().unwrap().state;
        assert_eq!(state, EffectState::Committed, "e_{n}");
    }
    check_after(dir.path());
}

#[test]
fn an_approval_that_expires_while_its_proposal_waits_for_the_writer_is_refused() {
    let f = Fixture::new();
    let t = key_template();
    let action = refund("pay_1", 90_000);
    let request = match f.kernel.propose(&approve(&action, &t, None)).unwrap_err() {
        Error::ApprovalRequired { request_id, .. } => request_id,
        other => panic!("{other}"),
    };
    f.kernel.grant_for(&request, "ops:bob", 60 * SECOND).unwrap();

    // Hold the writer; queue the proposal behind it; let the approval lapse meanwhile.
    let (held_tx, held_rx) = std::sync::mpsc::channel::<()>();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let store = f.kernel.store().clone();
    let holder = std::thread::spawn(move || {
        store
            .tamper(|_| {
                held_tx.send(()).unwrap();
                release_rx.recv().unwrap();
                Ok(())
            })
            .unwrap();
    });
    held_rx.recv().unwrap();
    let kernel = f.kernel.clone();
    let (request_id, template) = (request.clone(), t.clone());
    let proposer = std::thread::spawn(move || {
        let action = refund("pay_1", 90_000);
        kernel.propose(&approve(&action, &template, Some(&request_id))).map(|permit| permit.attempt())
    });
    // Give the proposal time to start waiting (its outcome does not depend on this).
    std::thread::sleep(Duration::from_millis(200));
    f.clock.advance(61 * SECOND);
    release_tx.send(()).unwrap();
    holder.join().unwrap();
    let refused = proposer.join().unwrap().unwrap_err();
    assert!(
        matches!(&refused, Error::ApprovalMismatch { reason, .. } if reason.contains("expired")),
        "an approval judged after it expired was accepted: {refused:?}"
    );
    assert!(f.kernel.effect("refund:pay_1").unwrap().is_none());
}
