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
//!
//! With the `otel` feature (a default), `protected_call_sdk_noop` is what `warden gateway` does
//! per call with its OpenTelemetry SDK on: the MCP server span continuing a client's
//! `traceparent`, the traced call, the `execute_tool` SDK span started at the permit and
//! propagated, completed from the record (the gateway's own `otel_record.rs`, included here), the
//! record's measurements into an SDK meter (aggregated by the Prometheus reader `/metrics` uses),
//! the spans handed to a batch processor whose exporter drops them. `interleaved` then also
//! alternates the untraced cycle with that one, and with `host sdk`: what a Rust host's SDK adds
//! per protected action — Warden's `execute_tool` span from the record and its measurements,
//! without the gateway's MCP span and propagation.

// The `warden` binary's allocator, so the SDK rows cost what they cost in `warden gateway`.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
fn interleaved(rounds: usize, per_round: u64, with: Mode) {
    let dir = scratch();
    #[cfg(feature = "otel")]
    let sdk = sdk::Sdk::new();
    let warden = open(dir.path());
    let principal = Principal::new("bench", None).unwrap();
    let mut n = 0u64;
    // CPU time of the whole process (every thread: the commit's too, the batch processor's), by
    // kind of round, in nanoseconds.
    let cpu = std::cell::Cell::new([0u64; 2]);
    let mut round = |traced: bool| -> f64 {
        let before = cpu_nanos();
        let began = Instant::now();
        for _ in 0..per_round {
            n += 1;
            let request = ActionRequest::new("bench.noop", serde_json::json!({"n": n}), principal.clone());
            #[cfg(feature = "otel")]
            if traced && with == Mode::Sdk {
                sdk.call(&warden, request);
                continue;
            }
            #[cfg(feature = "otel")]
            if traced && with == Mode::Host {
                sdk.action(&warden, request);
                continue;
            }
            let mut request = request;
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
        if let (Some(before), Some(after)) = (before, cpu_nanos()) {
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
    let label = match with {
        Mode::Traced => "traced",
        Mode::Host => "host sdk",
        Mode::Sdk => "sdk",
    };
    println!("interleaved ({label}): {rounds} rounds of {per_round} calls each way, one store");
    println!("  untraced µs/call: {}", list(&untraced));
    println!("  {label:<8} µs/call: {}", list(&traced));
    println!(
        "  median untraced {:.1} µs, {label} {:.1} µs, median per-round difference {:.1} µs",
        median(&untraced),
        median(&traced),
        median(&differences)
    );
    let cpu = cpu.get();
    if cpu[0] > 0 {
        let per_call = |nanos: u64| nanos as f64 / 1000.0 / (rounds as f64 * per_round as f64);
        println!(
            "  process CPU per call (all rounds, /proc/self/task/*/schedstat): untraced {:.1} µs, {label} {:.1} µs, difference {:.1} µs",
            per_call(cpu[0]),
            per_call(cpu[1]),
            per_call(cpu[1]) - per_call(cpu[0])
        );
    }
}

/// The CPU time the process's threads have run so far, in nanoseconds: the sum of each live
/// thread's `/proc/self/task/*/schedstat` first field (nanosecond resolution, where
/// `/proc/self/stat`'s ticks are 10 ms); `None` where there is no procfs.
fn cpu_nanos() -> Option<u64> {
    let mut total = 0u64;
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let Ok(task) = task else { continue };
        // A thread that ended between the listing and the read is skipped.
        let Ok(stat) = std::fs::read_to_string(task.path().join("schedstat")) else { continue };
        total += stat.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(total)
}

/// What `interleaved` compares the untraced cycle with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// The record read twice (what a host does before its SDK).
    Traced,
    /// What a Rust host's SDK adds per protected action (`otel` feature): the `execute_tool`
    /// span from the record, started at the permit and completed after the outcome, and the
    /// record's measurements — no MCP span, no propagation.
    #[cfg_attr(not(feature = "otel"), allow(dead_code))]
    Host,
    /// The gateway's whole SDK work (`otel` feature).
    #[cfg_attr(not(feature = "otel"), allow(dead_code))]
    Sdk,
}

#[cfg(feature = "otel")]
#[path = "../src/bin/warden/gateway/otel_record.rs"]
#[allow(dead_code)]
mod otel_record;

#[cfg(feature = "otel")]
mod sdk {
    use std::collections::HashMap;
    use std::hint::black_box;
    use std::sync::Arc;

    use opentelemetry::metrics::MeterProvider as _;
    use opentelemetry::propagation::TextMapPropagator;
    use opentelemetry::trace::{SpanKind, TraceContextExt, Tracer as _, TracerProvider as _};
    use opentelemetry::{Context, KeyValue};
    use opentelemetry_sdk::error::OTelSdkResult;
    use opentelemetry_sdk::propagation::TraceContextPropagator;
    use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider, SpanData, SpanExporter};
    use warden::pipeline::{ActionRequest, Recovery, Warden};
    use warden::telemetry::{ActionSpan, ActionTrace};

    use super::otel_record::{complete, start_attributes, time, Instruments};

    /// An exporter that drops every batch.
    #[derive(Debug)]
    struct Dropping;

    impl SpanExporter for Dropping {
        async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
            black_box(batch);
            Ok(())
        }
    }

    pub struct Sdk {
        tracer: SdkTracer,
        _provider: SdkTracerProvider,
        instruments: Instruments,
        _meters: opentelemetry_sdk::metrics::SdkMeterProvider,
    }

    impl Sdk {
        pub fn new() -> Sdk {
            let provider = SdkTracerProvider::builder().with_batch_exporter(Dropping).build();
            let reader =
                opentelemetry_prometheus::exporter().with_registry(prometheus::Registry::new()).build().unwrap();
            let meters = opentelemetry_sdk::metrics::SdkMeterProvider::builder().with_reader(reader).build();
            Sdk {
                tracer: provider.tracer("warden"),
                _provider: provider,
                instruments: Instruments::new(meters.meter("warden")),
                _meters: meters,
            }
        }

        /// The MCP server span of a `tools/call` continuing a client's `traceparent`, as the
        /// gateway starts it, in a context the protected call's span is a child of.
        fn server_span(&self, propagator: &TraceContextPropagator) -> Context {
            let carrier: HashMap<String, String> = HashMap::from([(
                "traceparent".to_owned(),
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".to_owned(),
            )]);
            let parent = propagator.extract(&carrier);
            let server = self
                .tracer
                .span_builder("tools/call noop")
                .with_kind(SpanKind::Server)
                .with_attributes([
                    KeyValue::new("mcp.method.name", "tools/call"),
                    KeyValue::new("gen_ai.tool.name", "noop"),
                    KeyValue::new("gen_ai.operation.name", "execute_tool"),
                    KeyValue::new("jsonrpc.request.id", "1"),
                ])
                .start_with_context(&self.tracer, &parent);
            parent.with_span(server)
        }

        /// The `execute_tool` span started from the record at the permit, as the gateway starts
        /// it: a child of `parent` (a root span under an empty context).
        fn execute_tool(&self, record: &ActionSpan, parent: &Context) -> Context {
            let span = self
                .tracer
                .span_builder(record.name.clone())
                .with_kind(SpanKind::Internal)
                .with_start_time(time(record.start))
                .with_attributes(start_attributes(record))
                .start_with_context(&self.tracer, parent);
            parent.with_span(span)
        }

        /// One protected call as the gateway makes it with its SDK on.
        pub fn call(&self, warden: &Warden, mut request: ActionRequest<'_>) {
            let propagator = TraceContextPropagator::new();
            let call = self.server_span(&propagator);
            let trace = ActionTrace::new();
            request.trace = Some(Arc::clone(&trace));
            let permit = warden.submit_recovering(&request, &Recovery::default()).1.unwrap();
            let action = self.execute_tool(&trace.span_at_start(), &call);
            let mut forwarded: HashMap<String, String> = HashMap::new();
            propagator.inject_context(&action, &mut forwarded);
            black_box(forwarded);
            permit.commit(&serde_json::json!({"ok": true})).unwrap();
            let mut record = trace.span();
            self.instruments.measure(std::mem::take(&mut record.measurements));
            complete(&action.span(), record);
            call.span().end();
        }

        /// One protected action as a Rust host's SDK records it: its `execute_tool` span (a
        /// root span here) started from the record when the permit is issued, completed from
        /// the record after the outcome, and the record's measurements.
        pub fn action(&self, warden: &Warden, mut request: ActionRequest<'_>) {
            let trace = ActionTrace::new();
            request.trace = Some(Arc::clone(&trace));
            let permit = warden.submit_recovering(&request, &Recovery::default()).1.unwrap();
            let action = self.execute_tool(&trace.span_at_start(), &Context::new());
            permit.commit(&serde_json::json!({"ok": true})).unwrap();
            let mut record = trace.span();
            self.instruments.measure(std::mem::take(&mut record.measurements));
            complete(&action.span(), record);
        }

        /// The two spans of a finished call from its record, propagation included (no kernel).
        pub fn spans(&self, record: &ActionSpan) {
            let propagator = TraceContextPropagator::new();
            let call = self.server_span(&propagator);
            let action = self.execute_tool(record, &call);
            let mut forwarded: HashMap<String, String> = HashMap::new();
            propagator.inject_context(&action, &mut forwarded);
            black_box(forwarded);
            complete(&action.span(), record.clone());
            call.span().end();
        }

        /// The record's measurements.
        pub fn measure(&self, record: &ActionSpan) {
            self.instruments.measure(record.measurements.clone());
        }
    }
}

#[cfg(feature = "otel")]
fn with_sdk(c: &mut Criterion) {
    let dir = scratch();
    let warden = open(dir.path());
    let principal = Principal::new("bench", None).unwrap();
    let sdk = sdk::Sdk::new();
    let mut n = 0u64;
    c.bench_function("protected_call_sdk_noop", |b| {
        b.iter(|| {
            n += 1;
            sdk.call(&warden, ActionRequest::new("bench.noop", serde_json::json!({"n": n}), principal.clone()));
        });
    });
    // Its parts, on one finished record, without the kernel.
    let trace = ActionTrace::new();
    let mut traced = ActionRequest::new("bench.noop", serde_json::json!({"n": u64::MAX}), principal.clone());
    traced.trace = Some(Arc::clone(&trace));
    warden.submit_recovering(&traced, &Recovery::default()).1.unwrap().commit(&serde_json::json!(1)).unwrap();
    c.bench_function("sdk_part_record_read", |b| b.iter(|| black_box(trace.span())));
    let record = trace.span();
    c.bench_function("sdk_part_spans", |b| b.iter(|| sdk.spans(&record)));
    c.bench_function("sdk_part_measurements", |b| b.iter(|| sdk.measure(&record)));
}

#[cfg(not(feature = "otel"))]
fn with_sdk(_c: &mut Criterion) {}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30);
    targets = cycle, with_sdk
}

fn main() {
    benches();
    // `cargo bench` passes --bench; `cargo test --benches` runs this once as a smoke test.
    let benching = std::env::args().any(|arg| arg == "--bench");
    let filtered = std::env::args().skip(1).any(|arg| !arg.starts_with('-'));
    if !filtered || std::env::args().any(|arg| arg == "interleaved") {
        let modes: &[Mode] =
            if cfg!(feature = "otel") { &[Mode::Traced, Mode::Host, Mode::Sdk] } else { &[Mode::Traced] };
        for mode in modes {
            if benching {
                interleaved(31, 300, *mode);
            } else {
                interleaved(1, 2, *mode);
            }
        }
    }
    Criterion::default().configure_from_args().final_summary();
}
