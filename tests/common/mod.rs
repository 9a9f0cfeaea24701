//! Shared helpers for the kernel's integration tests.
#![allow(dead_code)]

pub mod idp;

use std::path::PathBuf;
use std::sync::Arc;

use warden::{
    Action, Decision, Kernel, KernelOptions, ManualClock, Principal, Proposal, Ruling, Template, TemplateMode,
};

pub const T0: i64 = 1_764_000_000_000_000;
pub const SECOND: i64 = 1_000_000;

pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub clock: ManualClock,
    pub kernel: Kernel,
    location: PathBuf,
}

/// Where the conformance tests keep their store: a file in a fresh directory; when
/// `WARDEN_TEST_STORE` names a PostgreSQL database (`postgresql://…`), a fresh schema in it;
/// when it says `memory`, a fresh store in the test process's memory.
/// A PostgreSQL location is also written to `DIR/store-location`, where child processes given
/// `DIR` find it (`located`).
pub fn store_location(dir: &std::path::Path) -> PathBuf {
    match std::env::var("WARDEN_TEST_STORE") {
        // A store in this process's memory, named afresh (`WARDEN_TEST_STORE=memory`).
        Ok(engine) if engine == "memory" => {
            static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            PathBuf::from(format!("memory:{}-{n}", dir.display()))
        }
        Ok(base) if warden::store::is_postgres(&base) => {
            let url = fresh_postgres_schema(&base);
            std::fs::write(dir.join("store-location"), &url).expect("write store-location");
            PathBuf::from(url)
        }
        _ => dir.join("state.redb"),
    }
}

/// An empty schema with a fresh name in the database at `base`, and the store URL that keeps a
/// store's tables there (`options=-csearch_path=NAME`).
pub fn fresh_postgres_schema(base: &str) -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut client = postgres::Client::connect(base, postgres::NoTls).expect("connect to the test database");
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = format!("t_{}_{}_{n}", std::process::id(), nanos % 1_000_000_000_000);
    client.batch_execute(&format!("CREATE SCHEMA {name}")).expect("create a test schema");
    let separator = if base.contains('?') { '&' } else { '?' };
    format!("{base}{separator}options=-csearch_path%3D{name}")
}

/// The store of the test that prepared `dir` (`store_location`): its PostgreSQL URL, or the file.
pub fn located(dir: &std::path::Path) -> PathBuf {
    match std::fs::read_to_string(dir.join("store-location")) {
        Ok(url) => PathBuf::from(url),
        Err(_) => dir.join("state.redb"),
    }
}

/// Whether the tests run against PostgreSQL (tests of the file's own layout skip themselves).
pub fn on_postgres() -> bool {
    std::env::var("WARDEN_TEST_STORE").is_ok_and(|base| warden::store::is_postgres(&base))
}

impl Fixture {
    pub fn new() -> Fixture {
        let dir = tempfile::tempdir().expect("tempdir");
        let clock = ManualClock::new(T0);
        let location = store_location(dir.path());
        let kernel = open(&location, &clock);
        Fixture { dir, clock, kernel, location }
    }

    pub fn path(&self) -> PathBuf {
        self.location.clone()
    }
}

pub fn open(path: &std::path::Path, clock: &ManualClock) -> Kernel {
    Kernel::open(
        path,
        KernelOptions {
            clock: Arc::new(clock.clone()),
            policy_hash: Some("sha256:test".into()),
            policy_version: None,
            environment: None,
            ..KernelOptions::default()
        },
    )
    .expect("open kernel")
}

pub fn refund(payment: &str, amount: i64) -> Action {
    refund_by(payment, amount, "refund-agent", Some("ada"))
}

pub fn refund_by(payment: &str, amount: i64, agent: &str, user: Option<&str>) -> Action {
    Action::new(
        "stripe.refund",
        serde_json::json!({"payment_id": payment, "amount": amount}),
        Principal::new(agent, user).expect("principal"),
        None,
        "production",
    )
    .expect("action")
}

pub fn key_template() -> Template {
    Template::parse("refund:{payment_id}", TemplateMode::Escaped).expect("template")
}

pub fn allow<'a>(action: &'a Action, template: &'a Template) -> Proposal<'a> {
    let mut proposal = Proposal::new(action, Ruling::new(Decision::Allow, "decision"));
    proposal.effect = Some(template);
    proposal
}

pub fn approve<'a>(action: &'a Action, template: &'a Template, approval: Option<&'a str>) -> Proposal<'a> {
    let mut proposal = Proposal::new(action, Ruling::new(Decision::Approve, "rule[1]"));
    proposal.effect = Some(template);
    proposal.approval_id = approval;
    proposal
}

/// A store fault that says the store is damaged and names the table and key.
pub fn assert_store_fault(error: &warden::Error, table: &str, key: &str) {
    let text = error.to_string();
    assert!(matches!(error, warden::Error::Store(_)), "expected a store fault, got {text}");
    assert_eq!(error.store_fault_kind(), Some(warden::error::StoreFaultKind::Damaged), "{text}");
    assert!(text.contains(table) && text.contains(key), "the fault must name {table} and {key}: {text}");
    assert!(text.contains("damaged"), "{text}");
}

/// The store opened only to read (no owner taken when none runs).
pub fn open_to_read(path: &std::path::Path) -> Kernel {
    let store = warden::store::StoreOptions { read_only: true, ..warden::store::StoreOptions::default() };
    Kernel::open(path, KernelOptions { store, ..KernelOptions::default() }).unwrap()
}

pub fn assert_hidden_row_fault(error: &warden::Error, key: &str) {
    let text = error.to_string();
    assert!(matches!(error, warden::Error::Store(_)), "expected a store fault, got {text}");
    assert_eq!(error.store_fault_kind(), Some(warden::error::StoreFaultKind::Damaged), "{text}");
    assert!(text.contains(&format!("{key:?}")) && text.contains("warden doctor") && text.contains("damaged"), "{text}");
}

/// Wait (generously: this is no timing test) until `check` holds, or fail naming `what`.
pub fn eventually(what: &str, check: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !check() {
        assert!(std::time::Instant::now() < deadline, "never happened: {what}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// `n` allowed `customer.read` actions through `warden`'s pipeline, each committed.
pub fn read_customers(warden: &warden::pipeline::Warden, n: usize) {
    let ada = Principal::new("agent", Some("ada")).unwrap();
    for i in 0..n {
        let request = warden::pipeline::ActionRequest::new(
            "customer.read",
            serde_json::json!({"id": format!("c_{i}")}),
            ada.clone(),
        );
        warden.submit(&request).unwrap().commit(&serde_json::json!({"ok": true})).unwrap();
    }
}

/// Copy the directory `from` (files and subdirectories) to a new `to`.
pub fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// The `warden` binary on `store` with `args`: (exit code, stdout, stderr).
pub fn cli(store: &std::path::Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_warden"))
        .arg("--store")
        .arg(store)
        .args(args)
        .output()
        .expect("run warden");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
