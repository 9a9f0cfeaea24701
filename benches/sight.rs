//! What a confined query costs over a bare HTTP GET: the same 64 KiB JSON body from a local
//! server on loopback, fetched (a) with a bare ureq agent, (b) bare plus a JSON parse, (c)
//! through `sight::query::run` (confine, credential, bounded fetch, parse, select, redact,
//! prune), and (d) through `Warden::query` with `snapshot: true` (plus one durable write).
//! Each request opens a fresh connection in every variant, as Warden's fetch does.
//!
//! `cargo bench --bench sight`

#[path = "../tests/support/mod.rs"]
mod support;

use std::hint::black_box;
use std::io::Read;

use criterion::{criterion_group, criterion_main, Criterion};
use serde_json::json;
use support::{response, Conn, Recorded, Server};
use warden::document::load_str;
use warden::http::CancelToken;
use warden::pipeline::{Warden, WardenOptions};
use warden::sight::credentials::CallbackProvider;
use warden::sight::query::run;

/// About 64 KiB: a status object and 400 incidents, some carrying secrets to redact.
fn body() -> Vec<u8> {
    let incidents: Vec<_> = (0..400)
        .map(|i| {
            json!({"id": format!("inc_{i:05}"), "name": format!("Elevated error rates on shard {i}"),
                   "impact": if i % 3 == 0 { "major" } else { "minor" }, "api_key": "sk-live-0000000000",
                   "updated_at": "2026-11-30T01:00:00Z", "components": ["api", "web"]})
        })
        .collect();
    let text =
        json!({"status": {"indicator": "minor", "description": "Partial outage"}, "incidents": incidents}).to_string();
    assert!((60_000..70_000).contains(&text.len()), "{}", text.len());
    text.into_bytes()
}

fn sight(c: &mut Criterion) {
    let payload = body();
    let served = payload.clone();
    let server = Server::http(move |mut conn: Conn, _: &Recorded| {
        conn.send(&response("200 OK", &[("content-type", "application/json")], &served));
        Some(conn)
    });
    let port = server.port;
    let yaml = format!(
        "schema: warden/v1\nactions: {{}}\nsources:\n  - id: status\n    base_url: http://127.0.0.1:{port}/v2\n    auth: {{ mode: bearer, credential: STATUS_TOKEN }}\n    max_response_bytes: 131072\n    endpoints:\n      - id: summary\n        path: /summary\n        fields:\n          indicator: /status/indicator\n          incidents: /incidents\n"
    );
    let document = load_str(&yaml, "bench.yaml").unwrap();
    let provider = CallbackProvider(|_: &str| Some("tok-bench-0123456789".to_owned()));
    let query = json!({"source": "status", "endpoint": "summary"});
    let url = format!("http://127.0.0.1:{port}/v2/summary");
    let bare = || {
        let agent: ureq::Agent = ureq::Agent::config_builder().proxy(None).http_status_as_error(false).build().into();
        let response = agent.get(&url).header("authorization", "Bearer tok-bench-0123456789").call().unwrap();
        let mut bytes = Vec::with_capacity(70_000);
        response.into_body().into_reader().read_to_end(&mut bytes).unwrap();
        assert_eq!(bytes.len(), payload.len());
        bytes
    };

    let mut group = c.benchmark_group("query_64KiB_loopback");
    group.bench_function("parse_only", |b| {
        b.iter(|| black_box(serde_json::from_slice::<serde_json::Value>(black_box(&payload)).unwrap()));
    });
    group.bench_function("bare_ureq_get", |b| b.iter(|| black_box(bare())));
    group.bench_function("bare_ureq_get_and_parse", |b| {
        b.iter(|| black_box(serde_json::from_slice::<serde_json::Value>(&bare()).unwrap()));
    });
    group.bench_function("warden_query", |b| {
        b.iter(|| {
            let result = run(&document.sources_config, &query, &provider, &CancelToken::default(), 0).unwrap();
            assert_eq!(result.values["indicator"], "minor");
            black_box(result)
        });
    });
    let dir = tempfile::tempdir().unwrap();
    let warden = Warden::open(dir.path().join("bench.redb"), document.clone(), WardenOptions::default()).unwrap();
    let snapshot = json!({"source": "status", "endpoint": "summary", "snapshot": true});
    group.bench_function("warden_query_snapshot", |b| {
        b.iter(|| black_box(warden.query(&snapshot, &provider, &CancelToken::default()).unwrap()));
    });
    group.finish();
}

criterion_group!(benches, sight);
criterion_main!(benches);
