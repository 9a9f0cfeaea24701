//! What the damage checks cost on a store of realistic size (`docs/STORE.md`, "Absence is
//! proven, not assumed"): an open (with its check of the last receipt's rows), one fresh
//! reservation (with its absence witnesses), `warden doctor`'s row scan and redb's page check.
//! Ignored by default (it builds a large store); run in release:
//!
//!   WARDEN_COST_ACTIONS=100000 cargo test --release --features test-exports --test damage_checks_cost -- --ignored --nocapture

mod common;

use std::time::Instant;
use warden::test_support::KernelInternals;

use common::*;
use warden::ManualClock;

#[test]
#[ignore = "builds a store of 100,000 actions; run by hand in release (see the module doc)"]
fn the_damage_checks_cost_on_a_store_of_realistic_size() {
    let actions: usize = std::env::var("WARDEN_COST_ACTIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.redb");
    let clock = ManualClock::new(T0);
    let t = key_template();
    let built = Instant::now();
    {
        let kernel = open(&path, &clock);
        for n in 0..actions {
            let payment = format!("pay_{n:08}");
            kernel.propose(&allow(&refund(&payment, 1), &t)).unwrap().commit(&serde_json::json!({"n": n})).unwrap();
        }
    }
    let bytes = std::fs::metadata(&path).unwrap().len();
    eprintln!("{actions} committed actions, {bytes} bytes, built in {:.1} s", built.elapsed().as_secs_f64());
    for round in 0..3 {
        let at = Instant::now();
        let kernel = open(&path, &clock);
        let opened = at.elapsed();
        let at = Instant::now();
        let permit = kernel.propose(&allow(&refund(&format!("new_{round}"), 1), &t)).unwrap();
        let proposed = at.elapsed();
        permit.commit(&serde_json::json!("new")).unwrap();
        let at = Instant::now();
        let report = kernel.doctor().unwrap();
        let doctored = at.elapsed();
        assert!(report.orphans.is_empty(), "{:?}", report.orphans);
        drop(kernel);
        let at = Instant::now();
        let pages = warden::store::check_pages(&path).unwrap();
        let paged = at.elapsed();
        assert_eq!(pages.problem, None);
        eprintln!(
            "round {round}: open {:.1} ms, a fresh reservation {:.2} ms, doctor's rows {:.0} ms, redb's pages {:.0} ms",
            opened.as_secs_f64() * 1e3,
            proposed.as_secs_f64() * 1e3,
            doctored.as_secs_f64() * 1e3,
            paged.as_secs_f64() * 1e3
        );
    }
}
