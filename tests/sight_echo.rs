//! The echo guard end to end: a real local upstream echoes the credential it received in a
//! derived form, in a 200 body (the result, `history` and the stored snapshot) and in a 4xx
//! body (the error text). None of it may come back, and the store file must not hold it; nor
//! may the span of a protected call that is handed what came back (its arguments, its result
//! and its failure message recorded, the operator having opted in).

mod support;

use base64::Engine as _;
use serde_json::json;
use support::{response, Conn, Recorded, Server};
use warden::document::load_str;
use warden::http::CancelToken;
use warden::pipeline::{ActionRequest, Recovery, Warden, WardenOptions};
use warden::sight::credentials::CallbackProvider;
use warden::Error;

/// How the upstream answers: the body of `/ok` (JSON, served 200) and of `/fail` (served 401).
struct Upstream {
    ok: String,
    fail: String,
}

fn serve(upstream: Upstream) -> Server {
    Server::http(move |mut conn: Conn, recorded: &Recorded| {
        let answer = if recorded.target.starts_with("/ok") {
            response("200 OK", &[("content-type", "application/json")], upstream.ok.as_bytes())
        } else {
            response("401 Unauthorized", &[("content-type", "application/json")], upstream.fail.as_bytes())
        };
        conn.send(&answer);
        Some(conn)
    })
}

/// One case: the source's auth (YAML flow mapping), the credential values by reference.
struct Case {
    label: &'static str,
    auth: &'static str,
    values: Vec<(&'static str, &'static str)>,
}

fn open(dir: &std::path::Path, port: u16, case: &Case) -> Warden {
    let yaml = format!(
        "schema: warden/v1\nactions:\n  ticket.file:\n    decision: allow\nsources:\n  - id: echo\n    base_url: http://127.0.0.1:{port}\n    auth: {}\n    timeout_ms: 2000\n    endpoints:\n      - id: ok\n        path: /ok\n        fields:\n          echo: /echo\n          note: /note\n      - id: fail\n        path: /fail\n        fields:\n          echo: /echo\n",
        case.auth
    );
    let document = load_str(&yaml, "echo.yaml").expect("the fixture loads");
    // The operator opted in to arguments and results on spans: the most a span can carry.
    let telemetry = warden::telemetry::Capture { arguments: true, results: true };
    Warden::open(dir.join("store.redb"), document, WardenOptions { telemetry, ..WardenOptions::default() })
        .expect("open")
}

/// The spans of two protected calls handed what the sight returned: one with the result as its
/// arguments and its result, one failing with the refused query's message.
fn spans_of_calls_handed(w: &Warden, result: &serde_json::Value, error: &str) -> String {
    let principal = warden::Principal::new("agent", None).expect("principal");
    let mut spans = String::new();
    for fails in [false, true] {
        let trace = warden::telemetry::ActionTrace::new();
        let mut request = ActionRequest::new("ticket.file", json!({"seen": result}), principal.clone());
        request.trace = Some(std::sync::Arc::clone(&trace));
        let permit = w.submit_recovering(&request, &Recovery::default()).1.expect("allowed");
        if fails {
            permit.not_executed(error).expect("recorded");
        } else {
            permit.commit(result).expect("recorded");
        }
        spans.push_str(&trace.span().to_json().to_string());
    }
    spans
}

/// The text with every line break (raw or JSON-escaped) and space removed, so a wrapped base64
/// block reads as one run.
fn squeezed(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'\\' && matches!(bytes.get(i + 1), Some(b'r' | b'n')) {
            i += 2;
            continue;
        }
        if !matches!(b, b'\r' | b'\n' | b' ') {
            out.push(b);
        }
        i += 1;
    }
    out
}

/// The text with JSON escapes decoded, twice over (an escaped escape, as a serialised result
/// holding an embedded JSON string has): `\\` and `\uXXXX`; other bytes as they are.
fn unescaped(bytes: &[u8]) -> Vec<u8> {
    let mut text = String::from_utf8_lossy(bytes).into_owned();
    for _ in 0..2 {
        let mut out = String::with_capacity(text.len());
        let mut rest = text.as_str();
        while let Some(at) = rest.find('\\') {
            out.push_str(&rest[..at]);
            let after = &rest[at + 1..];
            if let Some(stripped) = after.strip_prefix('\\') {
                out.push('\\');
                rest = stripped;
            } else if let Some(c) = after
                .strip_prefix('u')
                .and_then(|hex| hex.get(..4))
                .and_then(|hex| u32::from_str_radix(hex, 16).ok())
                .and_then(char::from_u32)
            {
                out.push(c);
                rest = &after[5..];
            } else {
                out.push('\\');
                rest = after;
            }
        }
        out.push_str(rest);
        text = out;
    }
    text.into_bytes()
}

fn holds(haystack: &[u8], needle: &str) -> bool {
    haystack.windows(needle.len()).any(|window| window == needle.as_bytes())
}

/// The secret as is and its base64 alignments of at least eight characters.
fn needles(secret: &str) -> Vec<String> {
    let mut out = vec![secret.to_owned()];
    for skip in 0..3 {
        let rest = &secret.as_bytes()[skip..];
        let whole = rest.len() / 3 * 3;
        let form = base64::engine::general_purpose::STANDARD_NO_PAD.encode(&rest[..whole]);
        if form.len() >= 8 {
            out.push(form);
        }
    }
    out
}

/// Runs the case: a snapshot query of `/ok`, `history`, a query of `/fail`; then checks that
/// none of `secret`'s needles is in any output or in the store file, and that the echo was
/// redacted (not dropped: the positive control).
fn assert_echo_never_comes_back(case: &Case, upstream: Upstream, secret: &str) {
    let server = serve(upstream);
    let dir = tempfile::tempdir().expect("tempdir");
    let w = open(dir.path(), server.port, case);
    let values = case.values.clone();
    let provider = CallbackProvider(move |reference: &str| {
        values.iter().find(|(r, _)| *r == reference).map(|(_, v)| (*v).to_owned())
    });
    let cancel = CancelToken::default();

    let result = w
        .query(&json!({"source": "echo", "endpoint": "ok", "snapshot": true}), &provider, &cancel)
        .unwrap_or_else(|e| panic!("{}: the query failed: {e}", case.label));
    let result_text = serde_json::to_string(&result).expect("serialise");
    assert!(result_text.contains("[REDACTED]"), "{}: nothing was redacted: {result_text}", case.label);
    let history = w.history(&json!({"source": "echo", "endpoint": "ok"})).expect("history").to_string();
    let refused = match w.query(&json!({"source": "echo", "endpoint": "fail"}), &provider, &cancel) {
        Err(Error::Sight(refused)) => refused,
        other => panic!("{}: expected upstream_error, got {other:?}", case.label),
    };
    assert_eq!(refused.code, "upstream_error", "{}: {refused}", case.label);
    assert!(refused.message.contains("[REDACTED]"), "{}: nothing was redacted: {refused}", case.label);
    let result_value: serde_json::Value = serde_json::from_str(&result_text).expect("the result is JSON");
    let spans = spans_of_calls_handed(&w, &result_value, &refused.message);
    assert!(spans.contains("gen_ai.tool.call.arguments"), "{}: the arguments were not recorded: {spans}", case.label);
    drop(w);
    let store = std::fs::read(dir.path().join("store.redb")).expect("read the store");
    assert!(holds(&store, "snp_"), "{}: no snapshot in the store", case.label);

    let outputs = [
        ("the result", result_text.into_bytes()),
        ("history", history.into_bytes()),
        ("the error", refused.message.into_bytes()),
        ("the spans", spans.into_bytes()),
        ("the store file", store),
    ];
    for (what, bytes) in &outputs {
        for needle in needles(secret) {
            assert!(!holds(bytes, &needle), "{}: {what} holds {needle:?}", case.label);
            assert!(!holds(&squeezed(bytes), &needle), "{}: {what} holds {needle:?} across line breaks", case.label);
            assert!(!holds(&unescaped(bytes), &needle), "{}: {what} holds {needle:?} as JSON escapes", case.label);
        }
    }
    assert_eq!(server.requests().len(), 2, "{}", case.label);
}

const KEY: &str = "kEy-5f2e9a7c41d03b86";

#[test]
fn an_api_key_sent_after_a_prefix_without_a_space_is_scrubbed_when_echoed_alone() {
    for (label, auth) in [
        ("prefix key=", "{ mode: api_key, header: X-Api-Key, credential: ECHO_KEY, prefix: \"key=\" }"),
        ("prefix Token:", "{ mode: api_key, header: X-Auth, credential: ECHO_KEY, prefix: \"Token:\" }"),
    ] {
        let case = Case { label, auth, values: vec![("ECHO_KEY", KEY)] };
        let upstream = Upstream {
            ok: json!({"echo": format!("your key is {KEY}"), "note": KEY}).to_string(),
            fail: format!("{{\"error\": \"key {KEY} is not valid\"}}"),
        };
        assert_echo_never_comes_back(&case, upstream, KEY);
    }
}

#[test]
fn a_short_basic_password_echoed_alone_is_scrubbed() {
    for password in ["hunt", "hunt3r", "hunt3r7"] {
        let case = Case {
            label: password_label(password),
            auth: "{ mode: basic, username: ECHO_USER, password: ECHO_PASS }",
            values: vec![("ECHO_USER", "svc-reader"), ("ECHO_PASS", password)],
        };
        let upstream = Upstream {
            ok: json!({"echo": format!("you sent {password}."), "note": password}).to_string(),
            fail: format!("{{\"error\": \"bad pass {password} for svc-reader\"}}"),
        };
        assert_echo_never_comes_back(&case, upstream, password);
    }
}

fn password_label(password: &str) -> &'static str {
    match password.len() {
        4 => "basic, 4-character password",
        6 => "basic, 6-character password",
        _ => "basic, 7-character password",
    }
}

const TOKEN: &str = "tok-3c9a1f7e5b2d8064";

/// Base64 with a line break every 76 characters (MIME).
fn mime_base64(bytes: &[u8]) -> String {
    let flat = base64::engine::general_purpose::STANDARD.encode(bytes);
    let lines: Vec<&str> = flat.as_bytes().chunks(76).map(|line| std::str::from_utf8(line).unwrap_or("")).collect();
    lines.join("\r\n")
}

#[test]
fn the_authorization_header_echoed_in_mime_base64_is_scrubbed() {
    let case = Case {
        label: "mime base64",
        auth: "{ mode: bearer, credential: ECHO_TOKEN }",
        values: vec![("ECHO_TOKEN", TOKEN)],
    };
    // The request head as an upstream might log it, padded so the token straddles the second
    // line break (bytes 114 of the head) in each of the three base64 alignments.
    for pad in 36..39 {
        let head = format!(
            "GET /ok HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: {}\r\nAuthorization: Bearer {TOKEN}\r\n\r\n",
            "p".repeat(pad)
        );
        let wrapped = mime_base64(head.as_bytes());
        // The precondition: no whole base64 alignment of the token sits on one line.
        for needle in needles(TOKEN).iter().skip(1) {
            assert!(!wrapped.contains(needle.as_str()), "pad {pad}: the token does not straddle a line break");
        }
        let upstream = Upstream {
            ok: json!({"echo": wrapped.clone(), "note": "logged"}).to_string(),
            fail: format!("request was:\r\n{wrapped}\r\nend"),
        };
        assert_echo_never_comes_back(&case, upstream, TOKEN);
    }
}

/// Every character as a JSON `\u` escape.
fn unicode_escaped(text: &str) -> String {
    text.chars().map(|c| format!("\\u{:04x}", u32::from(c))).collect()
}

#[test]
fn a_token_written_as_json_unicode_escapes_is_scrubbed_from_the_error_and_from_embedded_json() {
    let case = Case {
        label: "json escapes",
        auth: "{ mode: bearer, credential: ECHO_TOKEN }",
        values: vec![("ECHO_TOKEN", TOKEN)],
    };
    let escaped = unicode_escaped(TOKEN);
    // Half escaped, half not, with an escaped slash nowhere near: a mix an encoder may produce.
    let (head, tail) = TOKEN.split_at(7);
    let mixed = format!("{}{tail}", unicode_escaped(head));
    let upstream = Upstream {
        // The 200 body embeds JSON as a string: serde decodes one level, the guard the next.
        ok: json!({"echo": format!("{{\"seen\":\"{escaped}\"}}"), "note": format!("{{\"seen\":\"{mixed}\"}}")})
            .to_string(),
        fail: format!("{{\"error\":\"invalid bearer \\\"{escaped}\\\"\",\"hint\":\"{mixed}\"}}"),
    };
    assert_echo_never_comes_back(&case, upstream, TOKEN);
}
