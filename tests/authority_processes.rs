//! Budgets under contention: 8 OS processes charge one budget at once through one store, and
//! the charges never pass the limit — the check and the charge are one transaction, whichever
//! process owns the store.
//!
//! Children are this test binary run again with `child_entry` selected (as in
//! `tests/multiprocess.rs`); they use a fixed injected clock and wait on a start file only to
//! line up at the barrier.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use warden::document::load_str;
use warden::pipeline::{ActionRequest, Warden, WardenOptions};
use warden::{Error, ManualClock, Principal};

const PROCESSES: usize = 8;
const ATTEMPTS: usize = 10;
const AMOUNT: i64 = 7_000;
const LIMIT: u64 = 100_000;

const DOCUMENT: &str = r#"
schema: warden/v1
environment: production
actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    rules:
      - decision: allow
authority:
  grants:
    - id: support
      subject: { agent: "support-*" }
      actions: ["stripe.refund"]
      budgets: [{metric: amount, limit: 100000, window: PT1H}, {metric: count, limit: 60, window: P1D}]
"#;

fn open(dir: &Path) -> Warden {
    Warden::open(
        dir.join("state.redb"),
        load_str(DOCUMENT, "test.yaml").unwrap(),
        WardenOptions {
            clock: Arc::new(ManualClock::new(T0)),
            environment: Some("production".into()),
            ..WardenOptions::default()
        },
    )
    .expect("open")
}

fn spawn(dir: &Path, index: usize) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["child_entry", "--exact", "--ignored", "--nocapture", "--test-threads=1", "--quiet"])
        .env("WARDEN_AUTHORITY_CHILD_DIR", dir)
        .env("WARDEN_AUTHORITY_CHILD_INDEX", index.to_string())
        .env("RUST_BACKTRACE", "0")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn child")
}

#[test]
fn eight_processes_charging_one_budget_at_once_never_pass_its_limit() {
    let dir = tempfile::tempdir().unwrap();
    // The parent creates the store (and owns it while it stays open, so every child is a
    // client: the charges cross the owner's socket).
    let warden = open(dir.path());
    let children: Vec<Child> = (0..PROCESSES).map(|i| spawn(dir.path(), i)).collect();
    let deadline = Instant::now() + Duration::from_secs(120);
    while (0..PROCESSES).any(|i| !dir.path().join(format!("ready.{i}")).exists()) {
        assert!(Instant::now() < deadline, "children never reached the barrier");
        std::thread::sleep(Duration::from_millis(2));
    }
    std::fs::write(dir.path().join("go"), b"").unwrap();
    let mut granted = 0usize;
    let mut exhausted = 0usize;
    for child in children {
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success(), "a child failed");
        for line in String::from_utf8_lossy(&output.stdout).lines() {
            match line.strip_prefix("CHILD:") {
                Some("granted") => granted += 1,
                Some("budget_exhausted") => exhausted += 1,
                Some(other) => panic!("unexpected child line {other}"),
                None => {}
            }
        }
    }
    let fits = (LIMIT / AMOUNT as u64) as usize;
    assert_eq!(granted + exhausted, PROCESSES * ATTEMPTS);
    assert_eq!(granted, fits, "exactly as many charges as fit, never more");
    let spent = warden.kernel().budget_spent("support", "amount", 3600).unwrap();
    assert_eq!(spent, (fits as u128) * AMOUNT as u128);
    assert!(spent <= u128::from(LIMIT));
    assert_eq!(warden.kernel().budget_spent("support", "count", 86_400).unwrap(), fits as u128);
    assert!(warden.kernel().verify_chain().unwrap().ok);
}

/// Not a test: the body of each child process.
#[test]
#[ignore = "entry point for the child processes of the budget contention test"]
fn child_entry() {
    let Ok(dir) = std::env::var("WARDEN_AUTHORITY_CHILD_DIR") else { return };
    let dir = PathBuf::from(dir);
    let index = std::env::var("WARDEN_AUTHORITY_CHILD_INDEX").unwrap();
    let warden = open(&dir);
    let principal = Principal::new(&format!("support-{index}"), None).unwrap();
    std::fs::write(dir.join(format!("ready.{index}")), b"").unwrap();
    while !dir.join("go").exists() {
        std::thread::sleep(Duration::from_micros(200));
    }
    for attempt in 0..ATTEMPTS {
        let payment = format!("pay_{index}_{attempt}");
        let request = ActionRequest::new(
            "stripe.refund",
            serde_json::json!({"payment_id": payment, "amount": AMOUNT}),
            principal.clone(),
        );
        let line = match warden.submit(&request) {
            // Held in flight: an executing action's charge counts until it reaches FAILED.
            Ok(permit) => {
                permit.commit(&serde_json::json!({"refund": payment})).unwrap();
                "granted"
            }
            Err(Error::AuthorityDenied { reason, .. }) if reason == "budget_exhausted" => "budget_exhausted",
            Err(other) => panic!("unexpected refusal {other}"),
        };
        println!("CHILD:{line}");
    }
}
