//! What a traced protected call costs over an untraced one, in Rust: the same allow → commit
//! cycle through `Warden::submit_recovering`, without a trace and with one whose span is read
//! when the permit is issued and again after the outcome (what a Rust host hands its own SDK).
//! The store lives on tmpfs when `/dev/shm` exists, so a sync costs next to nothing and the
//! difference is CPU: the recording and the record (the outcome's write answers with its
//! receipt's seq and hash, so nothing is read back).
//! `span_record_json_text` is what a binding adds per read across the C ABI (two per call).
//! After criterion's runs, `interleaved` measures both cycles again in alternating rounds on one
//! store and prints the medians side by side (`cargo bench --bench telemetry -- interleaved` for
//! that alone).

use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use criterion::{criterion_group, Criterion};
use warden::document::load_str;
use warden::pipeline::{ActionRequest, Recovery, Warden, WardenOptions};
use warden::telemetry::ActionTrace;
use warden::Principal;

const POLICY: &str = r#"
schema: warden/v1
environment: production
actions:
  bench.noop:
    effect: "noop:{n}"
    decision: allow
"#;

fn open(dir: &std::path::Path) -> Warden {
    let document = load_str(POLICY, "bench.yaml").unwrap();
    let options = WardenOptions { environment: Some("production".into()), ..WardenOptions::default() };
    Warden::open(dir.join("bench.redb"), document, options).unwrap()
}

fn scratch() -> tempfile::TempDir {
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir() {
        tempfile::tempdir_in(shm).unwrap()
    } else {
        tempfile::tempdir().unwrap()
    }
}

fn cycle(c: &mut Criterion) {
    let dir = scratch();
    let warden = open(dir.path());
    let principal = Principal::new("bench", None).unwrap();
    let mut n = 0u64;
    let request = |n: u64| ActionRequest::new("bench.noop", serde_json::json!({"n": n}), principal.clone());
    c.bench_function("protected_call_untraced", |b| {
        b.iter(|| {
            n += 1;
            let permit = warden.submit_recovering(&request(n), &Recovery::default()).1.unwrap();
            permit.commit(&serde_json::json!({"ok": true})).unwrap();
        });
    });
    c.bench_function("protected_call_traced", |b| {
        b.iter(|| {
            n += 1;
            let trace = ActionTrace::new();
            let mut traced = request(n);
            traced.trace = Some(Arc::clone(&trace));
            let permit = warden.submit_recovering(&traced, &Recovery::default()).1.unwrap();
            black_box(trace.span());
            permit.commit(&serde_json::json!({"ok": true})).unwrap();
            black_box(trace.span());
        });
    });
    let trace = ActionTrace::new();
    let mut traced = request(u64::MAX);
    traced.trace = Some(Arc::clone(&trace));
    warden.submit_recovering(&traced, &Recovery::default()).1.unwrap().commit(&serde_json::json!(1)).unwrap();
    c.bench_function("span_record_json_text", |b| b.iter(|| black_box(trace.span().to_json_text())));
}

/// The two cycles interleaved on one store, in rounds of `PER_ROUND` calls each, the order
/// alternating by round: both see the same store size and the same load from the rest of the
/// machine, which two criterion runs seconds apart do not. Prints each round's µs per call, the
/// medians and the median of the per-round differences (what the issue's ≤ 5 µs is about).
fn interleaved(rounds: usize, per_round: u64) {
    let dir = scratch();
    let warden = open(dir.path());
    let principal = Principal::new("bench", None).unwrap();
    let mut n = 0u64;
    // CPU time of the whole process (every thread: the commit's too), by kind of round.
    let cpu = std::cell::Cell::new([0u64; 2]);
    let mut round = |traced: bool| -> f64 {
        let ticks = cpu_ticks();
        let began = Instant::now();
        for _ in 0..per_round {
            n += 1;
            let mut request = ActionRequest::new("bench.noop", serde_json::json!({"n": n}), principal.clone());
            let trace = traced.then(ActionTrace::new);
            request.trace = trace.clone();
            let permit = warden.submit_recovering(&request, &Recovery::default()).1.unwrap();
            if let Some(trace) = &trace {
                black_box(trace.span());
            }
            permit.commit(&serde_json::json!({"ok": true})).unwrap();
            if let Some(trace) = &trace {
                black_box(trace.span());
            }
        }
        let took = began.elapsed().as_secs_f64() * 1e6 / per_round as f64;
        if let (Some(before), Some(after)) = (ticks, cpu_ticks()) {
            let mut sum = cpu.get();
            sum[usize::from(traced)] += after.saturating_sub(before);
            cpu.set(sum);
        }
        took
    };
    round(false);
    round(true);
    cpu.set([0, 0]);
    let (mut untraced, mut traced, mut differences) = (Vec::new(), Vec::new(), Vec::new());
    for r in 0..rounds {
        let (off, on) = if r % 2 == 0 {
            let off = round(false);
            (off, round(true))
        } else {
            let on = round(true);
            (round(false), on)
        };
        untraced.push(off);
        traced.push(on);
        differences.push(on - off);
    }
    let median = |values: &[f64]| {
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        sorted[sorted.len() / 2]
    };
    let list = |values: &[f64]| values.iter().map(|v| format!("{v:.1}")).collect::<Vec<_>>().join(" ");
    println!("interleaved: {rounds} rounds of {per_round} calls each way, one store");
    println!("  untraced µs/call: {}", list(&untraced));
    println!("  traced   µs/call: {}", list(&traced));
    println!(
        "  median untraced {:.1} µs, traced {:.1} µs, median per-round difference {:.1} µs",
        median(&untraced),
        median(&traced),
        median(&differences)
    );
    let cpu = cpu.get();
    if cpu[0] > 0 {
        // USER_HZ is 100 on Linux: a tick is 10 ms.
        let per_call = |ticks: u64| ticks as f64 * 10_000.0 / (rounds as f64 * per_round as f64);
        println!(
            "  process CPU per call (all rounds, /proc/self/stat): untraced {:.1} µs, traced {:.1} µs, difference {:.1} µs",
            per_call(cpu[0]),
            per_call(cpu[1]),
            per_call(cpu[1]) - per_call(cpu[0])
        );
    }
}

/// The process's user and system CPU time so far, in clock ticks (`/proc/self/stat` fields 14
/// and 15); `None` where there is no procfs.
fn cpu_ticks() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) may hold spaces: count the fields after its closing ')'.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30);
    targets = cycle
}

fn main() {
    benches();
    // `cargo bench` passes --bench; `cargo test --benches` runs this once as a smoke test.
    let benching = std::env::args().any(|arg| arg == "--bench");
    let filtered = std::env::args().skip(1).any(|arg| !arg.starts_with('-'));
    if !filtered || std::env::args().any(|arg| arg == "interleaved") {
        if benching {
            interleaved(31, 300);
        } else {
            interleaved(1, 2);
        }
    }
    Criterion::default().configure_from_args().final_summary();
}
