//! Side-by-side throughput: protected reserve→commit cycles per second from one thread and
//! from N OS processes sharing one store file. Every cycle is two durable write transactions
//! (the permit, then the outcome with its receipt).
//!
//!     cargo bench --features test-exports --bench throughput -- [cycles_per_worker] [processes]
//!
//! Prints one line per configuration; the README's table is copied from its output.

use std::process::Command;
use std::time::Instant;
use warden::test_support::KernelInternals;

use warden::{Action, Decision, Kernel, KernelOptions, Principal, Proposal, Ruling, Template, TemplateMode};

fn run_cycles(path: &std::path::Path, worker: usize, cycles: usize) {
    let kernel = Kernel::open(path, KernelOptions::default()).expect("open store");
    let template = Template::parse("refund:{payment_id}", TemplateMode::Escaped).expect("template");
    for n in 0..cycles {
        let action = Action::new(
            "stripe.refund",
            serde_json::json!({"payment_id": format!("w{worker}_{n}"), "amount": 4200}),
            Principal::new("refund-agent", Some("ada")).expect("principal"),
            None,
            "production",
        )
        .expect("action");
        let mut proposal = Proposal::new(&action, Ruling::new(Decision::Allow, "decision"));
        proposal.effect = Some(&template);
        kernel.propose(&proposal).expect("permit").commit(&serde_json::json!({"ok": true})).expect("commit");
    }
}

fn main() {
    if let (Ok(path), Ok(worker), Ok(cycles)) = (
        std::env::var("WARDEN_BENCH_STORE"),
        std::env::var("WARDEN_BENCH_WORKER"),
        std::env::var("WARDEN_BENCH_CYCLES"),
    ) {
        run_cycles(std::path::Path::new(&path), worker.parse().unwrap_or(0), cycles.parse().unwrap_or(0));
        return;
    }
    let numbers: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let cycles = numbers.first().copied().unwrap_or(500);
    let processes = numbers.get(1).copied().unwrap_or(8);
    let dir = tempfile::tempdir().expect("tempdir");

    let one = dir.path().join("one.redb");
    let started = Instant::now();
    run_cycles(&one, 0, cycles);
    let elapsed = started.elapsed().as_secs_f64();
    println!("1 thread:     {cycles} cycles in {elapsed:.2}s = {:.0} cycles/s", cycles as f64 / elapsed);

    let shared = dir.path().join("shared.redb");
    drop(Kernel::open(&shared, KernelOptions::default()).expect("create shared store"));
    let exe = std::env::current_exe().expect("current exe");
    let started = Instant::now();
    let children: Vec<_> = (0..processes)
        .map(|worker| {
            Command::new(&exe)
                .env("WARDEN_BENCH_STORE", &shared)
                .env("WARDEN_BENCH_WORKER", worker.to_string())
                .env("WARDEN_BENCH_CYCLES", cycles.to_string())
                .spawn()
                .expect("spawn worker")
        })
        .collect();
    for mut child in children {
        let status = child.wait().expect("worker");
        assert!(status.success(), "a worker failed");
    }
    let elapsed = started.elapsed().as_secs_f64();
    let total = cycles * processes;
    println!(
        "{processes} processes: {total} cycles in {elapsed:.2}s = {:.0} cycles/s (one shared file)",
        total as f64 / elapsed
    );
    let kernel = Kernel::open(&shared, KernelOptions::default()).expect("reopen");
    let report = kernel.verify_chain().expect("verify");
    println!("shared store: {} receipts, chain ok = {}", report.chained, report.ok);
}
