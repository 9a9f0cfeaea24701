//! Snapshots through a `Warden`: `snapshot: true` appends the shaped result in the store,
//! history pages newest first, diff compares two snapshots of one window, refusals name the
//! problem, failed fetches store nothing, and the credential never reaches the store file.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use base64::Engine as _;
use serde_json::{json, Value};
use support::{response, Conn, Recorded, Server};
use warden::document::load_str;
use warden::http::CancelToken;
use warden::pipeline::{Warden, WardenOptions};
use warden::sight::credentials::CallbackProvider;
use warden::Error;

const TOKEN: &str = "tok-5a4b3c2d1e0f99887766";

fn config(port: u16, reference: &str) -> String {
    format!(
        "schema: warden/v1\nactions: {{}}\nsources:\n  - id: status\n    base_url: http://127.0.0.1:{port}/v2\n    auth: {{ mode: bearer, credential: {reference} }}\n    timeout_ms: 2000\n    endpoints:\n      - id: summary\n        path: /summary\n        params:\n          - {{ name: region, type: enum, values: [eu, us], default: eu }}\n        fields:\n          state: /status/indicator\n          count: /count\n          debug: /debug\n      - id: other\n        path: /other\n        fields:\n          state: /status/indicator\n"
    )
}

fn open(dir: &std::path::Path, port: u16, reference: &str) -> Warden {
    let document = load_str(&config(port, reference), "test.yaml").expect("the fixture loads");
    Warden::open(dir.join("store.redb"), document, WardenOptions::default()).expect("open")
}

fn provider() -> CallbackProvider<impl Fn(&str) -> Option<String> + Send + Sync> {
    CallbackProvider(|reference: &str| reference.starts_with("STATUS").then(|| TOKEN.to_owned()))
}

/// Answers `{"status": {"indicator": "s<n>"}, "count": n, "debug": "Bearer <token>"}` where n
/// counts requests, so every fetch differs from the one before.
fn counting_server() -> Server {
    let counter = Arc::new(AtomicUsize::new(0));
    Server::http(move |mut conn: Conn, _: &Recorded| {
        let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
        let body =
            json!({"status": {"indicator": format!("s{n}")}, "count": n, "debug": format!("echo Bearer {TOKEN}")});
        conn.send(&response("200 OK", &[("content-type", "application/json")], body.to_string().as_bytes()));
        Some(conn)
    })
}

fn query(w: &Warden, q: Value) -> Result<warden::sight::shape::SightResult, Error> {
    w.query(&q, &provider(), &CancelToken::default())
}

fn reason(error: Error) -> String {
    match error {
        Error::Sight(sight) => sight.code.to_owned(),
        other => panic!("not a sight error: {other}"),
    }
}

#[test]
fn snapshots_page_newest_first_with_a_cursor_and_filter_by_window() {
    let server = counting_server();
    let dir = tempfile::tempdir().unwrap();
    let w = open(dir.path(), server.port, "STATUS_TOKEN");
    let mut ids = Vec::new();
    for region in ["eu", "us", "eu", "eu", "us"] {
        let result = query(
            &w,
            json!({"source": "status", "endpoint": "summary", "params": {"region": region}, "snapshot": true}),
        )
        .unwrap();
        let id = result.snapshot_id.clone().expect("a snapshot id");
        assert!(id.starts_with("snp_") && id.len() == 36, "{id}");
        ids.push(id);
    }
    // Without snapshot: true nothing is kept.
    assert!(query(&w, json!({"source": "status", "endpoint": "summary"})).unwrap().snapshot_id.is_none());

    let page = w.history(&json!({"source": "status", "endpoint": "summary", "limit": 2})).unwrap();
    let got: Vec<&str> =
        page["snapshots"].as_array().unwrap().iter().map(|s| s["snapshotId"].as_str().unwrap()).collect();
    assert_eq!(got, [ids[4].as_str(), ids[3].as_str()]);
    assert_eq!(page["hasMore"], true);
    assert_eq!(page["nextCursor"], ids[3].as_str());
    assert_eq!(page["snapshots"][0]["params"], json!({"region": "us"}));
    assert_eq!(page["snapshots"][0]["values"]["count"], 5);
    assert_eq!(page["snapshots"][0]["values"]["debug"], "echo Bearer [REDACTED]");

    let rest = w.history(&json!({"source": "status", "endpoint": "summary", "cursor": ids[3], "limit": 100})).unwrap();
    let got: Vec<&str> =
        rest["snapshots"].as_array().unwrap().iter().map(|s| s["snapshotId"].as_str().unwrap()).collect();
    assert_eq!(got, [ids[2].as_str(), ids[1].as_str(), ids[0].as_str()]);
    assert_eq!(rest["hasMore"], false);
    assert!(rest.get("nextCursor").is_none());

    // One window: the default region is the window {"region": "eu"}.
    let eu = w.history(&json!({"source": "status", "endpoint": "summary", "params": {}})).unwrap();
    let got: Vec<&str> =
        eu["snapshots"].as_array().unwrap().iter().map(|s| s["snapshotId"].as_str().unwrap()).collect();
    assert_eq!(got, [ids[3].as_str(), ids[2].as_str(), ids[0].as_str()]);
    assert_eq!(eu["params"], json!({"region": "eu"}));

    // Another endpoint has its own (empty) history.
    let other = w.history(&json!({"source": "status", "endpoint": "other"})).unwrap();
    assert_eq!(other["snapshots"], json!([]));
    assert_eq!(other["hasMore"], false);
}

#[test]
fn history_refuses_bad_pages_unknown_windows_and_unknown_arguments() {
    let server = counting_server();
    let dir = tempfile::tempdir().unwrap();
    let w = open(dir.path(), server.port, "STATUS_TOKEN");
    let eu = query(&w, json!({"source": "status", "endpoint": "summary", "snapshot": true})).unwrap();
    let eu_id = eu.snapshot_id.unwrap();
    let base = json!({"source": "status", "endpoint": "summary"});
    let with = |extra: Value| {
        let mut request = base.clone();
        for (k, v) in extra.as_object().unwrap() {
            request[k] = v.clone();
        }
        request
    };
    let cases = [
        (with(json!({"limit": 0})), "invalid_page"),
        (with(json!({"limit": 101})), "invalid_page"),
        (with(json!({"limit": "10"})), "invalid_page"),
        (with(json!({"limit": -1})), "invalid_page"),
        (with(json!({"cursor": "snp_00000000000000000000000000000000"})), "invalid_page"),
        (with(json!({"cursor": "../../etc/passwd"})), "invalid_page"),
        (with(json!({"cursor": 7})), "invalid_page"),
        // A cursor of another window is not a position in this one.
        (with(json!({"params": {"region": "us"}, "cursor": eu_id})), "invalid_page"),
        (json!({"source": "status", "endpoint": "other", "cursor": eu_id}), "invalid_page"),
        (json!({"source": "nope", "endpoint": "summary"}), "unknown_source"),
        (json!({"source": "status", "endpoint": "https://evil.com"}), "unknown_endpoint"),
        (with(json!({"params": {"region": "mars"}})), "invalid_params"),
        (with(json!({"params": {"url": "https://evil.com"}})), "invalid_params"),
        (with(json!({"url": "https://evil.com"})), "invalid_params"),
        (with(json!({"headers": {}})), "invalid_params"),
        (json!("status"), "invalid_params"),
    ];
    for (request, expected) in cases {
        let error = w.history(&request).expect_err(&request.to_string());
        let text = error.to_string();
        assert_eq!(reason(error), expected, "{request}: {text}");
        assert!(!text.contains("evil.com") && !text.contains("passwd"), "{text}");
    }
    assert_eq!(server.requests().len(), 1, "history never fetches");
}

#[test]
fn diff_compares_two_snapshots_of_one_window_and_refuses_anything_else() {
    let server = counting_server();
    let dir = tempfile::tempdir().unwrap();
    let w = open(dir.path(), server.port, "STATUS_TOKEN");
    let snap = |q: Value| query(&w, q).unwrap().snapshot_id.unwrap();
    let a = snap(json!({"source": "status", "endpoint": "summary", "snapshot": true}));
    let b = snap(json!({"source": "status", "endpoint": "summary", "snapshot": true}));
    let us = snap(json!({"source": "status", "endpoint": "summary", "params": {"region": "us"}, "snapshot": true}));
    let few = snap(json!({"source": "status", "endpoint": "summary", "fields": ["state"], "snapshot": true}));

    let diff = w.diff(&json!({"a": a, "b": b})).unwrap();
    assert_eq!(
        diff["entries"],
        json!([
            {"change": "changed", "path": "/count", "before": 1, "after": 2},
            {"change": "changed", "path": "/state", "before": "s1", "after": "s2"},
        ])
    );
    assert_eq!((diff["total"].as_u64(), diff["omitted"].as_u64()), (Some(2), Some(0)));
    assert_eq!(diff["params"], json!({"region": "eu"}));
    assert_eq!(w.diff(&json!({"a": a, "b": a})).unwrap()["entries"], json!([]));
    // Fewer fields in one snapshot of the same window: the others show as removed.
    let narrowed = w.diff(&json!({"a": b, "b": few})).unwrap();
    assert_eq!(narrowed["total"], 3, "{narrowed}");

    let cases = [
        (json!({"a": a, "b": us}), "invalid_params"),
        (json!({"a": a, "b": "snp_0123456789abcdef0123456789abcdef"}), "snapshot_not_found"),
        (json!({"a": a, "b": "snp_../../x"}), "invalid_params"),
        (json!({"a": a}), "invalid_params"),
        (json!({"a": a, "b": b, "url": "https://evil.com"}), "invalid_params"),
        (json!([a, b]), "invalid_params"),
    ];
    for (request, expected) in cases {
        let error = w.diff(&request).expect_err(&request.to_string());
        assert_eq!(reason(error), expected, "{request}");
    }

    // The same store under a configuration whose window changed (another credential
    // reference): the old snapshots are still readable, but not comparable with new ones.
    drop(w);
    let changed = open(dir.path(), server.port, "STATUS_TOKEN_V2");
    let c = query(&changed, json!({"source": "status", "endpoint": "summary", "snapshot": true}))
        .unwrap()
        .snapshot_id
        .unwrap();
    let error = changed.diff(&json!({"a": a, "b": c})).unwrap_err();
    assert!(error.to_string().contains("different configurations"), "{error}");
    assert_eq!(reason(error), "invalid_params");
    assert!(changed.diff(&json!({"a": a, "b": b})).is_ok(), "two old snapshots still compare");
}

#[test]
fn failed_and_refused_queries_store_nothing() {
    let server = Server::http(|mut conn: Conn, _: &Recorded| {
        conn.send(&response("500 Internal Server Error", &[("content-type", "application/json")], b"{}"));
        Some(conn)
    });
    let dir = tempfile::tempdir().unwrap();
    let w = open(dir.path(), server.port, "STATUS_TOKEN");
    let error = query(&w, json!({"source": "status", "endpoint": "summary", "snapshot": true})).unwrap_err();
    assert_eq!(reason(error), "upstream_error");
    let error =
        query(&w, json!({"source": "status", "endpoint": "summary", "snapshot": true, "url": "x"})).unwrap_err();
    assert_eq!(reason(error), "invalid_params");
    let missing = w.query(
        &json!({"source": "status", "endpoint": "summary", "snapshot": true}),
        &CallbackProvider(|_: &str| None),
        &CancelToken::default(),
    );
    assert_eq!(reason(missing.unwrap_err()), "credential_unavailable");
    let cancelled = CancelToken::new();
    cancelled.cancel();
    let aborted =
        w.query(&json!({"source": "status", "endpoint": "summary", "snapshot": true}), &provider(), &cancelled);
    assert_eq!(reason(aborted.unwrap_err()), "aborted");
    let page = w.history(&json!({"source": "status", "endpoint": "summary"})).unwrap();
    assert_eq!(page["snapshots"], json!([]));
    assert_eq!(server.requests().len(), 1, "only the upstream_error query was sent");
}

#[test]
fn the_store_file_never_holds_the_credential_raw_or_base64() {
    let server = counting_server();
    let dir = tempfile::tempdir().unwrap();
    let w = open(dir.path(), server.port, "STATUS_TOKEN");
    let mut outputs = Vec::new();
    for _ in 0..5 {
        let result = query(&w, json!({"source": "status", "endpoint": "summary", "snapshot": true})).unwrap();
        outputs.push(serde_json::to_string(&result).unwrap());
    }
    outputs.push(w.history(&json!({"source": "status", "endpoint": "summary", "limit": 100})).unwrap().to_string());
    drop(w);
    let bytes = std::fs::read(dir.path().join("store.redb")).unwrap();
    let engines = [
        base64::engine::general_purpose::STANDARD,
        base64::engine::general_purpose::STANDARD_NO_PAD,
        base64::engine::general_purpose::URL_SAFE_NO_PAD,
    ];
    let mut needles = vec![TOKEN.to_owned(), format!("Bearer {TOKEN}")];
    for engine in engines {
        needles.push(engine.encode(TOKEN));
        needles.push(engine.encode(format!("Bearer {TOKEN}")));
    }
    for needle in &needles {
        let found = bytes.windows(needle.len()).any(|window| window == needle.as_bytes());
        assert!(!found, "the store file holds {needle:?}");
        for output in &outputs {
            assert!(!output.contains(needle.as_str()), "an output holds {needle:?}: {output}");
        }
    }
    // The positive control: the snapshots are in the file.
    assert!(bytes.windows(4).any(|w| w == b"snp_"));
    assert!(bytes.windows(8).any(|w| w == b"[REDACTE"));
}
