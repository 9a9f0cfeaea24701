//! Sights end to end against a real local server: the agent names a window, Warden builds the
//! GET, injects the credential, and returns only the selected, redacted aliases. Hostile
//! queries never reach the transport.

mod support;

use serde_json::json;
use support::{response, Conn, Recorded, Server};
use warden::http::CancelToken;
use warden::sight::config::{parse, Sources};
use warden::sight::credentials::CallbackProvider;
use warden::sight::query::run;

const TOKEN: &str = "tok-9f8e7d6c5b4a39281706";

fn sources(port: u16) -> Sources {
    let config = json!([{
        "id": "status",
        "base_url": format!("http://127.0.0.1:{port}/v2"),
        "auth": {"mode": "bearer", "credential": "STATUS_TOKEN"},
        "timeout_ms": 2000,
        "endpoints": [{
            "id": "summary",
            "path": "/summary",
            "params": [{"name": "region", "type": "enum", "values": ["eu", "us"], "default": "eu"}],
            "fields": {"state": "/status/indicator", "echo": "/headers", "conn": "/db/password", "pages": "/next"}
        }]
    }]);
    parse(&config, None).expect("the fixture loads")
}

fn provider() -> CallbackProvider<impl Fn(&str) -> Option<String> + Send + Sync> {
    CallbackProvider(|reference: &str| (reference == "STATUS_TOKEN").then(|| TOKEN.to_owned()))
}

fn serve(body: String) -> Server {
    Server::http(move |mut conn: Conn, _: &Recorded| {
        conn.send(&response("200 OK", &[("content-type", "application/json")], body.as_bytes()));
        Some(conn)
    })
}

#[test]
fn a_query_returns_only_the_selected_redacted_aliases_and_never_the_credential() {
    // The upstream echoes the Authorization header (F13) and carries a password (C15).
    let body = json!({
        "status": {"indicator": "none"},
        "headers": {"Authorization": format!("Bearer {TOKEN}"), "note": format!("sent {TOKEN}")},
        "db": {"password": "hunter2"},
        "next": "nextPageToken=abc123",
        "private": "not selected"
    })
    .to_string();
    let server = serve(body);
    let query = json!({"source": "status", "endpoint": "summary", "params": {"region": "us"}});
    let result =
        run(&sources(server.port), &query, &provider(), &CancelToken::default(), 1_764_000_000_000_000).unwrap();
    let text = serde_json::to_string(&result).unwrap();
    assert_eq!(result.values["state"], "none");
    assert_eq!(result.values["conn"], "[REDACTED]", "the pointer guard");
    assert!(!text.contains(TOKEN), "the credential leaked: {text}");
    assert!(!text.contains("hunter2") && !text.contains("not selected"), "{text}");
    assert_eq!(result.fetched_at, "2025-11-24T16:00:00.000Z");
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].target, "/v2/summary?region=us");
    assert_eq!(requests[0].header("authorization"), Some(format!("Bearer {TOKEN}").as_str()));
}

#[test]
fn hostile_queries_are_refused_before_any_connection() {
    let server = serve("{}".into());
    let table = [
        (json!({"source": "https://evil.com", "endpoint": "summary"}), "unknown_source"),
        (json!({"source": "status", "endpoint": "//evil.com"}), "unknown_endpoint"),
        (json!({"source": "status", "endpoint": "summary", "url": "https://evil.com"}), "invalid_params"),
        (json!({"source": "status", "endpoint": "summary", "headers": {"x": "y"}}), "invalid_params"),
        (json!({"source": "status", "endpoint": "summary", "params": {"region": "eu\r\nX: 1"}}), "invalid_params"),
        (json!({"source": "status", "endpoint": "summary", "params": {"host": "evil.com"}}), "invalid_params"),
        (json!({"source": "status", "endpoint": "summary", "fields": ["/db/password"]}), "unknown_field"),
        (json!({"source": "status", "endpoint": "summary", "params": "region=eu"}), "invalid_params"),
    ];
    for (query, code) in table {
        let refused = run(&sources(server.port), &query, &provider(), &CancelToken::default(), 0).unwrap_err();
        assert_eq!(refused.code, code, "{query}: {refused}");
    }
    assert_eq!(server.connections(), 0, "a hostile query reached the transport");
}

#[test]
fn an_upstream_error_echoing_the_credential_is_redacted_to_one_short_line() {
    let page = format!("<html>\n<body>Unauthorized\nAuthorization: Bearer {TOKEN}\n{}</body></html>", "x".repeat(5000));
    let server = Server::http(move |mut conn: Conn, _: &Recorded| {
        conn.send(&response("500 Internal Server Error", &[("content-type", "text/html")], page.as_bytes()));
        Some(conn)
    });
    let query = json!({"source": "status", "endpoint": "summary"});
    let refused = run(&sources(server.port), &query, &provider(), &CancelToken::default(), 0).unwrap_err();
    assert_eq!(refused.code, "upstream_error");
    assert!(!refused.message.contains(TOKEN), "{refused}");
    assert!(!refused.message.contains('\n') && refused.message.chars().count() <= 300, "{refused}");
}

#[test]
fn a_missing_credential_sends_nothing_and_names_only_the_reference() {
    let server = serve("{}".into());
    let nobody = CallbackProvider(|_: &str| None);
    let query = json!({"source": "status", "endpoint": "summary"});
    let refused = run(&sources(server.port), &query, &nobody, &CancelToken::default(), 0).unwrap_err();
    assert_eq!(refused.code, "credential_unavailable");
    assert!(refused.message.contains("STATUS_TOKEN"), "{refused}");
    assert_eq!(server.connections(), 0);
}
