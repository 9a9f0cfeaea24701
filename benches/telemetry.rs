//! What a traced protected call costs over an untraced one, in Rust: the same allow → commit
//! cycle through `Warden::submit_recovering`, without a trace and with one whose span is read
//! when the permit is issued and again after the outcome (what a Rust host hands its own SDK).
//! The store lives on tmpfs when `/dev/shm` exists, so a sync costs next to nothing and the
//! difference is CPU: the recording, the receipt's read-back (its seq and hash), the record.
//! `span_record_json_text` is what a binding adds per read across the C ABI (two per call).

use std::hint::black_box;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion};
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

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30);
    targets = cycle
}
criterion_main!(benches);
