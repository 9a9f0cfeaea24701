//! `warden sources` and `warden query` against a real local server.

mod support;

use std::process::Command;

use support::{response, Conn, Recorded, Server};

const TOKEN: &str = "tok-9f8e7d6c5b4a39281706";

fn config(dir: &std::path::Path, port: u16) -> std::path::PathBuf {
    let path = dir.join("warden.yaml");
    let text = format!(
        "schema: warden/v1\nactions: {{}}\nsources:\n  - id: status\n    base_url: http://127.0.0.1:{port}/v2\n    auth: {{ mode: bearer, credential: STATUS_TOKEN }}\n    endpoints:\n      - id: summary\n        path: /summary\n        params:\n          - {{ name: region, type: enum, values: [eu, us], default: eu }}\n        fields:\n          state: /status/indicator\n          secrets: /debug\n"
    );
    std::fs::write(&path, text).unwrap();
    path
}

fn warden(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_warden"))
        .args(args)
        .env("STATUS_TOKEN", TOKEN)
        .env_remove("WARDEN_CONFIG")
        .output()
        .unwrap()
}

#[test]
fn sources_lists_every_window_and_query_returns_redacted_values() {
    let body =
        format!(r#"{{"status":{{"indicator":"minor"}},"debug":{{"db_password":"hunter2","auth":"Bearer {TOKEN}"}}}}"#);
    let server = Server::http(move |mut conn: Conn, _: &Recorded| {
        conn.send(&response("200 OK", &[("content-type", "application/json")], body.as_bytes()));
        Some(conn)
    });
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), server.port);
    let cfg = cfg.to_str().unwrap();

    let listed = warden(&["sources", cfg]);
    assert!(listed.status.success());
    let listed = String::from_utf8(listed.stdout).unwrap();
    assert!(listed.contains("status") && listed.contains("summary") && listed.contains("bearer"), "{listed}");

    let out = warden(&["--config", cfg, "--json", "query", "status", "summary", "--param", "region=us"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let result: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(result["values"]["state"], "minor");
    assert!(!text.contains(TOKEN) && !text.contains("hunter2"), "{text}");
    assert_eq!(server.requests()[0].target, "/v2/summary?region=us");
}

#[test]
fn a_query_naming_a_url_is_refused_and_nothing_is_sent() {
    let server = Server::http(|mut conn: Conn, _: &Recorded| {
        conn.send(&response("200 OK", &[], b"{}"));
        Some(conn)
    });
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), server.port);
    let out =
        warden(&["--config", cfg.to_str().unwrap(), "query", "status", "summary", "--param", "url=https://evil.com"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid_params"));
    assert_eq!(server.connections(), 0);
}

#[test]
fn snapshots_through_the_cli_history_pages_and_diff_names_changes() {
    let counter = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let server = Server::http(move |mut conn: Conn, _: &Recorded| {
        let n = counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let body = format!(r#"{{"status":{{"indicator":"s{n}"}},"debug":{{"auth":"Bearer {TOKEN}"}}}}"#);
        conn.send(&response("200 OK", &[("content-type", "application/json")], body.as_bytes()));
        Some(conn)
    });
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), server.port);
    let (cfg, store) = (cfg.to_str().unwrap().to_owned(), dir.path().join("s.redb"));
    let store = store.to_str().unwrap().to_owned();
    let base = ["--config", cfg.as_str(), "--store", store.as_str(), "--json"];
    let run = |args: &[&str]| {
        let all: Vec<&str> = base.iter().copied().chain(args.iter().copied()).collect();
        warden(&all)
    };
    let mut ids = Vec::new();
    for _ in 0..3 {
        let out = run(&["query", "status", "summary", "--snapshot"]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let result: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        ids.push(result["snapshotId"].as_str().unwrap().to_owned());
    }
    let out = run(&["history", "status", "summary", "--limit", "2"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let page: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(page["snapshots"][0]["snapshotId"], ids[2].as_str());
    assert_eq!(page["nextCursor"], ids[1].as_str());
    let out = run(&["history", "status", "summary", "--cursor", &ids[1]]);
    let page: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(page["snapshots"][0]["snapshotId"], ids[0].as_str());
    assert_eq!(page["hasMore"], false);

    let out = warden(&["--config", &cfg, "--store", &store, "diff", &ids[0], &ids[2]]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains(r#"~ /state: "s0" -> "s2""#), "{text}");
    assert!(!text.contains(TOKEN));

    let refused = run(&["diff", &ids[0], "snp_0123456789abcdef0123456789abcdef"]);
    assert_eq!(refused.status.code(), Some(1));
    let error: serde_json::Value = serde_json::from_slice(&refused.stdout).unwrap();
    assert_eq!(error["error"]["reason"], "snapshot_not_found");
    let bad_page = run(&["history", "status", "summary", "--limit", "0"]);
    assert_eq!(bad_page.status.code(), Some(1));
    let missing_store = warden(&["--config", &cfg, "--store", "/nonexistent/s.redb", "history", "status", "summary"]);
    assert_eq!(missing_store.status.code(), Some(2));
    assert_eq!(server.requests().len(), 3);
}

#[test]
fn a_cut_value_is_reported_as_shown_out_of_total_in_json_and_in_text() {
    let server = Server::http(move |mut conn: Conn, _: &Recorded| {
        let body = r#"{"status":{"indicator":"abcdefghij"},"debug":[1,2,3,4,5,6,7]}"#;
        conn.send(&response("200 OK", &[("content-type", "application/json")], body.as_bytes()));
        Some(conn)
    });
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("warden.yaml");
    let text = format!(
        "schema: warden/v1\nactions: {{}}\nsources:\n  - id: status\n    base_url: http://127.0.0.1:{}/v2\n    auth: {{ mode: none }}\n    limits: {{ max_items: 3, max_string: 4 }}\n    endpoints:\n      - id: summary\n        path: /summary\n        fields:\n          state: /status/indicator\n          list: /debug\n",
        server.port
    );
    std::fs::write(&cfg, text).unwrap();
    let cfg = cfg.to_str().unwrap();

    let out = warden(&["--config", cfg, "--json", "query", "status", "summary"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let result: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result["values"]["state"], "abcd");
    assert_eq!(
        result["truncation"],
        serde_json::json!({
            "state": {"strings": {"shown": 4, "total": 10, "strings": 1}},
            "list": {"items": {"shown": 3, "total": 7, "containers": 1}}
        })
    );

    let out = warden(&["--config", cfg, "query", "status", "summary"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("  truncated: state: strings 4 of 10 characters (1 string)\n"), "{text}");
    assert!(text.contains("  truncated: list: items 3 of 7 entries (1 container)\n"), "{text}");
}
