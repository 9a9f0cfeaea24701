//! Shared helpers for the kernel's integration tests.
#![allow(dead_code)]

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

/// Where the conformance tests keep their store: a file in a fresh directory, or, when
/// `WARDEN_TEST_STORE` names a PostgreSQL database (`postgresql://…`), a fresh schema in it.
pub fn store_location(dir: &std::path::Path) -> PathBuf {
    match std::env::var("WARDEN_TEST_STORE") {
        Ok(base) if warden::store::is_postgres(&base) => {
            PathBuf::from(warden::store::fresh_postgres_schema(&base).expect("a fresh PostgreSQL schema"))
        }
        _ => dir.join("state.redb"),
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
