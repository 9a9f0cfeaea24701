//! The evidence's costs on a real store: filling N receipts, the first checkpoint (which computes
//! and caches the whole tree), a second one after more receipts, an inclusion proof, the export,
//! `warden verify-bundle` (the release binary, when built) with its peak memory, and a prune
//! through the first checkpoint with what follows it.
//!
//!   cargo bench --features test-exports --bench evidence              # 100,000 receipts
//!   WARDEN_EVIDENCE_RECEIPTS=1000000 cargo bench --features test-exports --bench evidence
//!
//! The store is a scratch file in `WARDEN_EVIDENCE_DIR` (default: the system's temporary
//! directory), written with `durability: process` and deferred outcomes so filling it is quick;
//! the checkpoints' own commits are durable as always.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use warden::test_support::KernelInternals;

use warden::evidence::bundle::{export, verify_bundle};
use warden::evidence::key::NoteSigner;
use warden::kernel::{Outcomes, ProofAsk};
use warden::store::{StoreOptions, Withstands};
use warden::{Action, Decision, Kernel, KernelOptions, Principal, Proposal, Ruling, Template, TemplateMode};

fn refund(n: u64) -> Action {
    Action::new(
        "stripe.refund",
        serde_json::json!({"payment_id": format!("txn_{n}"), "amount": 4200, "meta": {"reason": "duplicate"}}),
        Principal::new("refund-agent", Some("ada")).unwrap(),
        None,
        "production",
    )
    .unwrap()
}

fn fill(kernel: &Arc<Kernel>, from: u64, count: u64) {
    let threads = 4;
    std::thread::scope(|scope| {
        for t in 0..threads {
            let kernel = Arc::clone(kernel);
            scope.spawn(move || {
                let template = Template::parse("refund:{payment_id}", TemplateMode::Escaped).unwrap();
                let mut n = from + t;
                while n < from + count {
                    let action = refund(n);
                    let mut proposal = Proposal::new(&action, Ruling::new(Decision::Allow, "decision"));
                    proposal.effect = Some(&template);
                    kernel.propose(&proposal).unwrap().commit(&serde_json::json!({"ok": true})).unwrap();
                    n += threads;
                }
            });
        }
    });
}

fn timed<T>(what: &str, f: impl FnOnce() -> T) -> T {
    let start = Instant::now();
    let out = f();
    println!("| {what} | {} |", shown(start.elapsed()));
    out
}

fn shown(d: Duration) -> String {
    if d.as_secs() >= 1 {
        format!("{:.2} s", d.as_secs_f64())
    } else {
        format!("{:.1} ms", d.as_secs_f64() * 1e3)
    }
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs this with no filter too: keep it
    // small there.
    let testing = std::env::args().any(|a| a == "--test" || a == "--list");
    let n: u64 = if testing {
        200
    } else {
        std::env::var("WARDEN_EVIDENCE_RECEIPTS").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000)
    };
    let base = std::env::var_os("WARDEN_EVIDENCE_DIR").map_or_else(std::env::temp_dir, Into::into);
    let mut dir = tempfile::tempdir_in(base).unwrap();
    // WARDEN_EVIDENCE_KEEP=1 keeps the store and the bundle (to profile the verifiers on them).
    if std::env::var_os("WARDEN_EVIDENCE_KEEP").is_some() {
        dir.disable_cleanup(true);
        println!("kept: {}", dir.path().display());
    }
    let kernel = Arc::new(
        Kernel::open(
            dir.path().join("evidence.redb"),
            KernelOptions {
                outcomes: Outcomes::Deferred { max_delay: Outcomes::DEFAULT_MAX_DELAY },
                store: StoreOptions { durability: Withstands::Process, ..StoreOptions::default() },
                ..KernelOptions::default()
            },
        )
        .unwrap(),
    );
    let signer = NoteSigner::generate("bench").unwrap();
    println!("| step ({n} receipts) | time |\n|---|---|");
    timed(&format!("fill {n} receipts (4 threads, process durability, deferred)"), || fill(&kernel, 0, n));
    let first =
        timed("first checkpoint (computes and caches the whole tree)", || kernel.checkpoint(&signer, None).unwrap());
    fill(&kernel, n, 1000);
    timed("next checkpoint, 1,000 receipts later", || kernel.checkpoint(&signer, None).unwrap());
    let proof = timed("inclusion proof of receipt 1", || {
        kernel.proof(ProofAsk::Inclusion { seq: 1, size: first.size }).unwrap()
    });
    println!("| inclusion proof size | {} hashes, {} bytes |", proof.len(), proof.len() * 32);
    let out = dir.path().join("bundle");
    timed("export (all receipts, two checkpoints)", || export(&kernel, &out, None, None).unwrap());
    let verdict = timed("verify_bundle (Rust library, in process)", || verify_bundle(&out, &[signer.verifier()]));
    assert!(verdict.ok, "{verdict:?}");
    let bytes = std::fs::metadata(out.join("receipts.jsonl")).unwrap().len();
    println!("| receipts.jsonl | {:.1} MB |", bytes as f64 / 1e6);
    let cli = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release/warden");
    if cli.exists() && !testing {
        let start = Instant::now();
        let run = std::process::Command::new("/usr/bin/time")
            .arg("-f")
            .arg("%M")
            .arg(&cli)
            .arg("verify-bundle")
            .arg(&out)
            .arg("--key")
            .arg(signer.verifier().encoded())
            .output();
        if let Ok(run) = run {
            let elapsed = start.elapsed();
            let peak = String::from_utf8_lossy(&run.stderr).lines().last().unwrap_or("?").trim().to_owned();
            println!(
                "| `warden verify-bundle` (release binary), exit {} | {}, peak RSS {peak} KiB |",
                run.status.code().unwrap_or(-1),
                shown(elapsed)
            );
        }
    }
    // Retention: anchor the first checkpoint to a file, prune through it (one transaction), then
    // what goes on from the kept frontier.
    let anchors = dir.path().join("anchors.jsonl");
    let sinks: Vec<warden::evidence::anchoring::SinkProvider> =
        vec![(format!("file {}", anchors.display()), Ok(Arc::new(warden::evidence::anchor::FileSink::new(anchors))))];
    kernel.anchor_pending(&sinks, true).unwrap();
    let done = timed(&format!("prune through the first checkpoint ({} receipts, one transaction)", first.size), || {
        kernel.prune(first.number, "bench", "measured").unwrap()
    });
    assert_eq!(done.receipts_deleted, first.size);
    fill(&kernel, n + 1000, 1000);
    timed("checkpoint after the prune, 1,000 receipts later", || kernel.checkpoint(&signer, None).unwrap());
    let out = dir.path().join("bundle-after-prune");
    timed("export after the prune (from the pruned checkpoint)", || export(&kernel, &out, None, None).unwrap());
    assert!(verify_bundle(&out, &[signer.verifier()]).ok);
}
