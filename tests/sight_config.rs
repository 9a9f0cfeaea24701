//! The `sources:` configuration (DESIGN.md §6; hostile-fetch-sample.md sections A, B and C):
//! what loads, what is refused, where the refusal points, and that it never repeats a secret.

use serde_json::{json, Value};
use warden::document::load_str;
use warden::sight::config::{parse, parse_detailed, Auth, CredentialRef, Limits, ParamKind};

/// A valid source; `patch` replaces or adds top-level keys (a `null` removes one).
fn source(patch: Value) -> Value {
    let mut base = json!({
        "id": "status",
        "base_url": "https://api.example.com",
        "endpoints": [{"id": "now", "path": "/now", "fields": {"state": "/state"}}]
    });
    if let (Some(map), Value::Object(patch)) = (base.as_object_mut(), patch) {
        for (key, value) in patch {
            if value.is_null() {
                map.remove(&key);
            } else {
                map.insert(key, value);
            }
        }
    }
    base
}

/// A valid source whose single endpoint has `patch` applied.
fn endpoint(patch: Value) -> Value {
    let mut base = json!({"id": "now", "path": "/now", "fields": {"state": "/state"}});
    if let (Some(map), Value::Object(patch)) = (base.as_object_mut(), patch) {
        for (key, value) in patch {
            map.insert(key, value);
        }
    }
    source(json!({"endpoints": [base]}))
}

/// One refusal: the sources (a list), the global flag, the path the error must name, a phrase
/// the message must contain, and strings it must never contain.
struct Refusal {
    label: &'static str,
    sources: Value,
    global_insecure: Option<bool>,
    path: &'static str,
    phrase: &'static str,
    never: &'static [&'static str],
}

fn row(label: &'static str, one: Value, path: &'static str, phrase: &'static str) -> Refusal {
    Refusal { label, sources: json!([one]), global_insecure: None, path, phrase, never: &[] }
}

fn secret_row(
    label: &'static str,
    one: Value,
    path: &'static str,
    phrase: &'static str,
    never: &'static [&'static str],
) -> Refusal {
    Refusal { label, sources: json!([one]), global_insecure: None, path, phrase, never }
}

fn check(rows: Vec<Refusal>) {
    let mut failures = Vec::new();
    for row in &rows {
        match parse_detailed(&row.sources, row.global_insecure) {
            Ok(_) => failures.push(format!("{}: loaded", row.label)),
            Err(error) => {
                if error.path != row.path {
                    failures.push(format!(
                        "{}: path {:?}, expected {:?} ({})",
                        row.label, error.path, row.path, error.message
                    ));
                }
                if !error.message.contains(row.phrase) {
                    failures.push(format!("{}: message lacks {:?}: {}", row.label, row.phrase, error.message));
                }
                let whole = parse(&row.sources, row.global_insecure).err().map(|e| e.to_string()).unwrap_or_default();
                if !whole.starts_with("configuration_invalid: ") {
                    failures.push(format!("{}: not configuration_invalid: {whole}", row.label));
                }
                for secret in row.never {
                    if whole.contains(secret) || error.path.contains(secret) {
                        failures.push(format!("{}: the error repeats {secret:?}: {whole}", row.label));
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} of {} rows failed:\n{}", failures.len(), rows.len(), failures.join("\n"));
}

fn accepts(label: &str, sources: Value, global_insecure: Option<bool>) -> warden::sight::config::Sources {
    parse(&sources, global_insecure).unwrap_or_else(|e| panic!("{label}: refused: {e}"))
}

#[test]
fn base_urls_that_are_not_plain_https_origins_are_refused_naming_the_base_url() {
    let b = "sources[0].base_url";
    check(vec![
        row("A01 ftp scheme", source(json!({"base_url": "ftp://api.example.com"})), b, "scheme"),
        secret_row(
            "A03 userinfo",
            source(json!({"base_url": "https://user:pass@api.example.com"})),
            b,
            "userinfo",
            &["pass", "user:"],
        ),
        secret_row(
            "A05 query with a key",
            source(json!({"base_url": "https://api.example.com?api_key=abc123"})),
            b,
            "literal secret",
            &["abc123"],
        ),
        row("a plain query", source(json!({"base_url": "https://api.example.com/?page=1"})), b, "query"),
        row("a fragment", source(json!({"base_url": "https://api.example.com/#x"})), b, "fragment"),
        row("an empty userinfo", source(json!({"base_url": "https://@api.example.com"})), b, "userinfo"),
        row("A07 http without the flag", source(json!({"base_url": "http://api.example.com"})), b, "loopback"),
        row("A11 localhost as a label", source(json!({"base_url": "http://localhost.evil.com"})), b, "loopback"),
        row("A11 nip.io", source(json!({"base_url": "http://127.0.0.1.nip.io"})), b, "loopback"),
        row("A11 a localhost subdomain", source(json!({"base_url": "http://foo.localhost"})), b, "loopback"),
        row("0.0.0.0 is not loopback", source(json!({"base_url": "http://0.0.0.0"})), b, "loopback"),
        row("A13 decimal host", source(json!({"base_url": "http://2130706433/"})), b, "non-canonical numeric host"),
        row("A13 hex host", source(json!({"base_url": "http://0x7f.1/"})), b, "non-canonical numeric host"),
        row("A13 octal host", source(json!({"base_url": "http://0177.0.0.1/"})), b, "non-canonical numeric host"),
        row("A13 short host", source(json!({"base_url": "http://127.1/"})), b, "non-canonical numeric host"),
        row("A13 circled digits", source(json!({"base_url": "http://①②⑦.0.0.1/"})), b, "ASCII"),
        row("full-width digits", source(json!({"base_url": "http://１２７.0.0.1/"})), b, "ASCII"),
        row("A15 zone id", source(json!({"base_url": "http://[fe80::1%25eth0]/"})), b, "not a valid URL"),
        row("A17 tab and trailing space", source(json!({"base_url": "\thttps://api.example.com "})), b, "whitespace"),
        row("a trailing newline", source(json!({"base_url": "https://api.example.com\n"})), b, "whitespace"),
        row("an inner tab", source(json!({"base_url": "https://api.exa\tmple.com"})), b, "control"),
        row("a backslash", source(json!({"base_url": "https://api.example.com\\evil.com"})), b, "'\\'"),
        row(
            "a dot segment in the prefix",
            source(json!({"base_url": "https://api.example.com/a/../b"})),
            b,
            "canonically",
        ),
        row("an encoded dot segment", source(json!({"base_url": "https://api.example.com/%2e%2e/b"})), b, "path"),
        row("not absolute", source(json!({"base_url": "api.example.com"})), b, "absolute"),
        row("no host", source(json!({"base_url": "https:///x"})), b, "host"),
        row("a long IPv6 loopback", source(json!({"base_url": "http://[0:0:0:0:0:0:0:1]/"})), b, "[::1]"),
        row("port zero", source(json!({"base_url": "https://api.example.com:0"})), b, "port"),
        row("a number", source(json!({"base_url": 5})), b, "string"),
        row("missing", source(json!({"base_url": null})), b, "needs a base_url"),
    ]);
}

#[test]
fn loopback_http_and_flagged_http_and_path_prefixes_are_accepted() {
    for url in [
        "http://localhost:8080",
        "http://127.0.0.1",
        "http://[::1]:9000",
        "http://127.8.9.10",
        "http://[::ffff:127.0.0.1]",
        "https://api.example.com",
        "https://api.example.com/",
        "https://api.example.com:8443/v2/",
        "https://API.Example.com",
    ] {
        accepts(url, json!([source(json!({"base_url": url}))]), None);
    }
    // A19: the prefix is kept and the endpoint path is appended to it.
    let sources = accepts("prefix", json!([source(json!({"base_url": "https://api.example.com/v2"}))]), None);
    let s = sources.get("status").unwrap_or_else(|| panic!("no source"));
    assert_eq!(s.origin, "https://api.example.com");
    assert_eq!(s.base_path, "/v2");
    // The flag: global, and per source overriding it in both directions.
    let insecure = source(json!({"base_url": "http://api.example.com"}));
    accepts("global flag", json!([insecure.clone()]), Some(true));
    let mut own = insecure.clone();
    own["allow_insecure_http"] = json!(true);
    accepts("own flag", json!([own]), None);
    let mut off = insecure;
    off["allow_insecure_http"] = json!(false);
    assert!(parse(&json!([off]), Some(true)).is_err(), "a source's false overrides the global true");
}

#[test]
fn endpoint_paths_that_could_leave_the_configured_path_are_refused() {
    let p = "sources[0].endpoints[0].path";
    let long = format!("/{}", "a".repeat(10 * 1024));
    let long: &'static str = Box::leak(long.into_boxed_str());
    check(vec![
        row("B01 relative", endpoint(json!({"path": "status"})), p, "start with '/'"),
        row("B03 slash backslash", endpoint(json!({"path": "/\\evil.com"})), p, "'\\'"),
        row("B03 double backslash", endpoint(json!({"path": "\\\\evil.com"})), p, "start with '/'"),
        row("B05 scheme-relative", endpoint(json!({"path": "http:evil.com"})), p, "start with '/'"),
        row("B07 fragment", endpoint(json!({"path": "/x#frag"})), p, "'#'"),
        row("a query", endpoint(json!({"path": "/x?a=1"})), p, "'?'"),
        row("B09 tab then //", endpoint(json!({"path": "\t//evil.com"})), p, "start with '/'"),
        row("a // prefix", endpoint(json!({"path": "//evil.com"})), p, "'//'"),
        row("a scheme inside", endpoint(json!({"path": "/x/https://evil.com"})), p, "'://'"),
        row("B11 encoded backslash", endpoint(json!({"path": "/%5cevil.com"})), p, "%5C"),
        row("B13 encoded dots", endpoint(json!({"path": "/%2e%2e/admin"})), p, "%2E"),
        row("B13 half-encoded dots", endpoint(json!({"path": "/.%2e/admin"})), p, "%2E"),
        row("plain dots", endpoint(json!({"path": "/a/../admin"})), p, "'..'"),
        row("a single dot", endpoint(json!({"path": "/a/./b"})), p, "'.'"),
        row("B15 semicolon", endpoint(json!({"path": "/api;jsessionid=1/..;/admin"})), p, "';'"),
        row("B17 encoded NUL", endpoint(json!({"path": "/%00"})), p, "%00"),
        row("B17 encoded CRLF", endpoint(json!({"path": "/x%0d%0aX-Injected:1"})), p, "':'"),
        row("B17 encoded CRLF alone", endpoint(json!({"path": "/x%0d%0aX-Injected"})), p, "%0D"),
        row("a raw newline", endpoint(json!({"path": "/x\nHost: evil"})), p, "control"),
        row("B19 bad hex", endpoint(json!({"path": "/%zz"})), p, "malformed"),
        row("B19 short escape", endpoint(json!({"path": "/%2"})), p, "malformed"),
        row("B21 inner //", endpoint(json!({"path": "/a//b"})), p, "'//'"),
        row("encoded //", endpoint(json!({"path": "/%2f%2fevil.com"})), p, "%2F"),
        row("double encoding", endpoint(json!({"path": "/%252e%252e/admin"})), p, "%25"),
        row("B23 10 KiB", endpoint(json!({"path": long})), p, "at most 2048"),
        row("a placeholder", endpoint(json!({"path": "/users/{id}"})), p, "placeholders"),
        row("a space", endpoint(json!({"path": "/a b"})), p, "' '"),
        row("non-ASCII", endpoint(json!({"path": "/caf\u{e9}"})), p, "U+00E9"),
        // The authority delimiters are outside the allow-list, written or encoded.
        row("an at sign", endpoint(json!({"path": "/@evil.com"})), p, "'@'"),
        row("a port-like colon", endpoint(json!({"path": "/:8080"})), p, "':'"),
        row("a colon inside", endpoint(json!({"path": "/repos/octo/hello:world"})), p, "':'"),
        row("an encoded at sign", endpoint(json!({"path": "/%40evil.com"})), p, "%40"),
        row("an encoded colon", endpoint(json!({"path": "/%3A8080"})), p, "%3A"),
        row("an encoded bracket", endpoint(json!({"path": "/%5Bx%5D"})), p, "%5B"),
        row("missing", source(json!({"endpoints": [{"id": "now", "fields": {"a": "/a"}}]})), p, "needs a path"),
    ]);
}

#[test]
fn ordinary_endpoint_paths_are_accepted() {
    for path in ["/", "/now", "/v1/users", "/a-b_c.d~e", "/x%20y", "/repos/octo/hello-world", "/a/b.json", "/a=b,c"] {
        accepts(path, json!([endpoint(json!({"path": path}))]), None);
    }
}

#[test]
fn literal_secrets_are_refused_anywhere_without_being_repeated() {
    check(vec![
        secret_row(
            "C01 token under an unknown key",
            source(json!({"auth": {"mode": "bearer", "token": "sk-live-4f9a8b7c6d5e4f3a2b1c"}})),
            "sources[0].auth.token",
            "literal secret in sources[0].auth.token",
            &["4f9a8b7c6d5e"],
        ),
        secret_row(
            "C03 a GitHub token as a reference",
            source(json!({"auth": {"mode": "bearer", "credential": "ghp_16C7e42F292c6912E7710c838347Ae178B4a"}})),
            "sources[0].auth.credential",
            "literal secret",
            &["16C7e42F292c"],
        ),
        secret_row(
            "a fine-grained PAT",
            source(json!({"auth": {"mode": "bearer", "credential": "github_pat_11ABCDEFG0123456789_abcdefghij"}})),
            "sources[0].auth.credential",
            "literal secret",
            &["11ABCDEFG"],
        ),
        secret_row(
            "a Slack token",
            source(json!({"auth": {"mode": "api_key", "header": "X-Token", "credential": "xoxb-1234-5678-abcdefgh"}})),
            "sources[0].auth.credential",
            "literal secret",
            &["xoxb-1234"],
        ),
        secret_row(
            "an AWS key id",
            source(json!({"auth": {"mode": "bearer", "credential": "AKIAIOSFODNN7EXAMPLE"}})),
            "sources[0].auth.credential",
            "literal secret",
            &["AKIAIOSFODNN7"],
        ),
        secret_row(
            "a Stripe key shaped like a reference",
            source(json!({"auth": {"mode": "bearer", "credential": "sk_live_51Habcdefghijkl"}})),
            "sources[0].auth.credential",
            "literal secret",
            &["51Habcdef"],
        ),
        secret_row(
            "a JWT in a description",
            source(json!({"description": "use eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abc"})),
            "sources[0].description",
            "literal secret",
            &["eyJhbGci"],
        ),
        secret_row(
            "a bearer header in an endpoint description",
            endpoint(json!({"description": "send Authorization: Bearer abcdef0123456789"})),
            "sources[0].endpoints[0].description",
            "literal secret",
            &["abcdef0123456789"],
        ),
        secret_row(
            "password=... in a param description",
            endpoint(json!({"params": [{"name": "q", "type": "string", "description": "password=hunter2"}]})),
            "sources[0].endpoints[0].params[0].description",
            "literal secret",
            &["hunter2"],
        ),
        secret_row(
            "a secret as a prefix",
            source(
                json!({"auth": {"mode": "api_key", "header": "Authorization", "prefix": "Basic dXNlcjpwYXNzd29yZA=="}}),
            ),
            "sources[0].auth.prefix",
            "literal secret",
            &["dXNlcjpw"],
        ),
        secret_row(
            "a reference that is not a name",
            source(json!({"auth": {"mode": "bearer", "credential": "my token value!"}})),
            "sources[0].auth.credential",
            "credential reference",
            &["my token value"],
        ),
        secret_row(
            "a secret as a key",
            source(json!({"sk-live-abcdefghijklmnop": 1})),
            "sources[0]",
            "literal secret",
            &["abcdefghijklmnop"],
        ),
    ]);
}

#[test]
fn ordinary_prose_that_mentions_auth_schemes_is_not_a_secret() {
    for text in [
        "Basic information about the repository",
        "Bearer authentication is required upstream",
        "Returns the next_page cursor; see the Basic Information page",
        "Risk-management figures, task-level detail",
    ] {
        accepts(text, json!([source(json!({"description": text}))]), None);
    }
}

#[test]
fn auth_modes_references_and_headers_follow_the_rules() {
    let h = "sources[0].auth.header";
    check(vec![
        row("C05 Host", source(json!({"auth": {"mode": "api_key", "header": "Host"}})), h, "managed"),
        row(
            "C05 Content-Length",
            source(json!({"auth": {"mode": "api_key", "header": "Content-Length"}})),
            h,
            "managed",
        ),
        row(
            "C05 Transfer-Encoding",
            source(json!({"auth": {"mode": "api_key", "header": "transfer-encoding"}})),
            h,
            "managed",
        ),
        row("C05 Cookie", source(json!({"auth": {"mode": "api_key", "header": "Cookie"}})), h, "managed"),
        row(
            "Proxy-Authorization",
            source(json!({"auth": {"mode": "api_key", "header": "Proxy-Authorization"}})),
            h,
            "managed",
        ),
        row("Connection", source(json!({"auth": {"mode": "api_key", "header": "Connection"}})), h, "managed"),
        row("Upgrade", source(json!({"auth": {"mode": "api_key", "header": "Upgrade"}})), h, "managed"),
        row("TE", source(json!({"auth": {"mode": "api_key", "header": "TE"}})), h, "managed"),
        row("Trailer", source(json!({"auth": {"mode": "api_key", "header": "Trailer"}})), h, "managed"),
        row("Expect", source(json!({"auth": {"mode": "api_key", "header": "Expect"}})), h, "managed"),
        row("Keep-Alive", source(json!({"auth": {"mode": "api_key", "header": "Keep-Alive"}})), h, "managed"),
        row("a header with a colon", source(json!({"auth": {"mode": "api_key", "header": "X-Key: a"}})), h, "token"),
        row("a header with CRLF", source(json!({"auth": {"mode": "api_key", "header": "X-Key\r\nHost"}})), h, "token"),
        row("no header", source(json!({"auth": {"mode": "api_key"}})), h, "needs a header"),
        row("an unknown mode", source(json!({"auth": {"mode": "digest"}})), "sources[0].auth.mode", "one of"),
        row("no mode", source(json!({"auth": {}})), "sources[0].auth.mode", "needs a mode"),
        row(
            "a key for another mode",
            source(json!({"auth": {"mode": "none", "credential": "X"}})),
            "sources[0].auth.credential",
            "unknown key",
        ),
        row(
            "a prefix with CRLF",
            source(json!({"auth": {"mode": "api_key", "header": "X-Key", "prefix": "a\r\n"}})),
            "sources[0].auth.prefix",
            "printable",
        ),
        row(
            "a reference starting with a digit",
            source(json!({"auth": {"mode": "bearer", "credential": "1TOKEN"}})),
            "sources[0].auth.credential",
            "credential reference",
        ),
        row(
            "a 129-character reference",
            source(json!({"auth": {"mode": "bearer", "credential": "A".repeat(129)}})),
            "sources[0].auth.credential",
            "credential reference",
        ),
    ]);
}

#[test]
fn a_reference_derived_by_one_source_cannot_be_used_by_another() {
    let first = source(json!({"id": "proda", "auth": {"mode": "bearer"}}));
    let rows = vec![
        Refusal {
            label: "C07 an explicit reference equal to another source's derived one",
            sources: json!([
                first.clone(),
                source(json!({"id": "prod_b", "auth": {"mode": "bearer", "credential": "WARDEN_CREDENTIAL_PRODA"}}))
            ]),
            global_insecure: None,
            path: "sources[1].auth",
            phrase: "WARDEN_CREDENTIAL_PRODA",
            never: &[],
        },
        Refusal {
            label: "C07 a hyphenated id is not an id",
            sources: json!([first.clone(), source(json!({"id": "prod-a", "auth": {"mode": "bearer"}}))]),
            global_insecure: None,
            path: "sources[1].id",
            phrase: "^[a-z][a-z0-9_]{0,63}$",
            never: &[],
        },
        Refusal {
            label: "ids are unique case-insensitively",
            sources: json!([first.clone(), source(json!({"id": "proda"}))]),
            global_insecure: None,
            path: "sources[1].id",
            phrase: "duplicate source id",
            never: &[],
        },
        Refusal {
            label: "basic derives two references that another source may not name",
            sources: json!([
                source(json!({"id": "billing", "auth": {"mode": "basic"}})),
                source(
                    json!({"id": "other", "auth": {"mode": "bearer", "credential": "WARDEN_CREDENTIAL_BILLING_PASSWORD"}})
                )
            ]),
            global_insecure: None,
            path: "sources[1].auth",
            phrase: "WARDEN_CREDENTIAL_BILLING_PASSWORD",
            never: &[],
        },
    ];
    check(rows);
    // Two sources naming the same explicit (non-derived) reference share a credential: allowed.
    let shared = json!([
        source(json!({"id": "a", "auth": {"mode": "bearer", "credential": "GITHUB_TOKEN"}})),
        source(json!({"id": "b", "auth": {"mode": "bearer", "credential": "GITHUB_TOKEN"}}))
    ]);
    accepts("shared explicit reference", shared, None);
}

#[test]
fn auth_parses_into_references_with_derivation_when_omitted() {
    let cases: Vec<(Value, Auth)> = vec![
        (json!(null), Auth::None),
        (json!({"mode": "none"}), Auth::None),
        (json!({"mode": "bearer"}), Auth::Bearer { credential: CredentialRef::derived("status") }),
        (
            json!({"mode": "bearer", "credential": "STATUS_TOKEN"}),
            Auth::Bearer { credential: CredentialRef::parse("STATUS_TOKEN").unwrap_or_else(|| panic!("ref")) },
        ),
        (
            json!({"mode": "basic", "username": "U", "password": "P"}),
            Auth::Basic {
                username: CredentialRef::parse("U").unwrap_or_else(|| panic!("ref")),
                password: CredentialRef::parse("P").unwrap_or_else(|| panic!("ref")),
            },
        ),
        (
            json!({"mode": "api_key", "header": "Authorization", "prefix": "token "}),
            Auth::ApiKey {
                header: "Authorization".into(),
                credential: CredentialRef::derived("status"),
                prefix: Some("token ".into()),
            },
        ),
    ];
    for (auth, expected) in cases {
        let sources = accepts("auth", json!([source(json!({"auth": auth}))]), None);
        let got = sources.get("status").map(|s| s.auth.clone());
        assert_eq!(got, Some(expected), "auth {auth}");
    }
    assert_eq!(CredentialRef::derived("prod_a").as_str(), "WARDEN_CREDENTIAL_PROD_A");
}

#[test]
fn unknown_keys_floats_and_out_of_range_numbers_are_refused() {
    check(vec![
        row(
            "C09 allowInsecureHttp",
            source(json!({"allowInsecureHttp": true})),
            "sources[0].allowInsecureHttp",
            "snake_case",
        ),
        row("C09 timeout_MS", source(json!({"timeout_MS": 1000})), "sources[0].timeout_MS", "unknown key"),
        row("C09 timeoutMs", source(json!({"timeoutMs": 1000})), "sources[0].timeoutMs", "unknown key"),
        row(
            "an unknown endpoint key",
            endpoint(json!({"method": "POST"})),
            "sources[0].endpoints[0].method",
            "unknown key",
        ),
        row(
            "an unknown param key",
            endpoint(json!({"params": [{"name": "q", "type": "string", "pattern": ".*"}]})),
            "sources[0].endpoints[0].params[0].pattern",
            "unknown key",
        ),
        row("an unknown limits key", source(json!({"limits": {"depth": 3}})), "sources[0].limits.depth", "unknown key"),
        row(
            "C11 1023 bytes",
            source(json!({"max_response_bytes": 1023})),
            "sources[0].max_response_bytes",
            "between 1024 and 4194304",
        ),
        row(
            "C11 4194305 bytes",
            source(json!({"max_response_bytes": 4_194_305})),
            "sources[0].max_response_bytes",
            "between",
        ),
        row("C11 zero bytes", source(json!({"max_response_bytes": 0})), "sources[0].max_response_bytes", "between"),
        row("a negative cap", source(json!({"max_response_bytes": -1})), "sources[0].max_response_bytes", "between"),
        row("a float cap", source(json!({"max_response_bytes": 2048.0})), "sources[0].max_response_bytes", "integer"),
        row("a string cap", source(json!({"max_response_bytes": "2048"})), "sources[0].max_response_bytes", "integer"),
        row("timeout 499", source(json!({"timeout_ms": 499})), "sources[0].timeout_ms", "between 500 and 60000"),
        row("timeout 60001", source(json!({"timeout_ms": 60_001})), "sources[0].timeout_ms", "between"),
        row("a float timeout", source(json!({"timeout_ms": 1.5})), "sources[0].timeout_ms", "integer"),
        row("depth 0", source(json!({"limits": {"max_depth": 0}})), "sources[0].limits.max_depth", "between"),
        row(
            "a boolean flag as a string",
            source(json!({"allow_insecure_http": "yes"})),
            "sources[0].allow_insecure_http",
            "true or false",
        ),
    ]);
    let not_a_list = parse_detailed(&json!({"a": 1}), None).err().map(|e| e.path);
    assert_eq!(not_a_list.as_deref(), Some("sources"));
}

#[test]
fn defaults_apply_when_keys_are_absent() {
    let sources = accepts("defaults", json!([source(json!({}))]), None);
    let s = sources.get("status").unwrap_or_else(|| panic!("no source"));
    assert_eq!(s.timeout_ms, 10_000);
    assert_eq!(s.max_response_bytes, 1_048_576);
    assert_eq!(s.limits, Limits { max_depth: 8, max_items: 50, max_string: 2000 });
    assert_eq!(s.auth, Auth::None);
    assert!(!s.allow_insecure_http);
    assert_eq!(s.ca_certs, None);
    let bounds = accepts("bounds", json!([source(json!({"timeout_ms": 500, "max_response_bytes": 4_194_304}))]), None);
    let b = bounds.get("status").unwrap_or_else(|| panic!("no source"));
    assert_eq!((b.timeout_ms, b.max_response_bytes), (500, 4_194_304));
}

#[test]
fn ids_params_and_fields_follow_their_syntax() {
    check(vec![
        row("an upper-case source id", source(json!({"id": "Status"})), "sources[0].id", "^[a-z]"),
        row("a 65-character id", source(json!({"id": "a".repeat(65)})), "sources[0].id", "^[a-z]"),
        row("no source id", source(json!({"id": null})), "sources[0].id", "needs an id"),
        row("a dotted endpoint id", endpoint(json!({"id": "a.b"})), "sources[0].endpoints[0].id", "^[a-z]"),
        row(
            "duplicate endpoint ids",
            source(json!({"endpoints": [
                {"id": "now", "path": "/a", "fields": {"a": "/a"}},
                {"id": "now", "path": "/b", "fields": {"a": "/a"}}
            ]})),
            "sources[0].endpoints[1].id",
            "duplicate endpoint id",
        ),
        row("no endpoints", source(json!({"endpoints": []})), "sources[0].endpoints", "1 to 256"),
        row(
            "C13 pointer without a slash",
            endpoint(json!({"fields": {"pw": "db/password"}})),
            "sources[0].endpoints[0].fields.pw",
            "RFC 6901",
        ),
        row(
            "C13 a bad escape",
            endpoint(json!({"fields": {"x": "/a~2b"}})),
            "sources[0].endpoints[0].fields.x",
            "RFC 6901",
        ),
        row(
            "a trailing tilde",
            endpoint(json!({"fields": {"x": "/a~"}})),
            "sources[0].endpoints[0].fields.x",
            "RFC 6901",
        ),
        row(
            "the empty pointer",
            endpoint(json!({"fields": {"all": ""}})),
            "sources[0].endpoints[0].fields.all",
            "RFC 6901",
        ),
        row(
            "an alias with a dash",
            endpoint(json!({"fields": {"a-b": "/a"}})),
            "sources[0].endpoints[0].fields",
            "alias",
        ),
        row(
            "an alias starting with _",
            endpoint(json!({"fields": {"_a": "/a"}})),
            "sources[0].endpoints[0].fields",
            "alias",
        ),
        row("no fields", endpoint(json!({"fields": {}})), "sources[0].endpoints[0].fields", "1 to 128"),
        row(
            "a param without a type",
            endpoint(json!({"params": [{"name": "q"}]})),
            "sources[0].endpoints[0].params[0].type",
            "needs a type",
        ),
        row(
            "an unknown type",
            endpoint(json!({"params": [{"name": "q", "type": "float"}]})),
            "sources[0].endpoints[0].params[0].type",
            "one of",
        ),
        row(
            "a bad name",
            endpoint(json!({"params": [{"name": "a b", "type": "string"}]})),
            "sources[0].endpoints[0].params[0].name",
            "must match",
        ),
        row(
            "min on a string",
            endpoint(json!({"params": [{"name": "q", "type": "string", "min": 1}]})),
            "sources[0].endpoints[0].params[0].min",
            "does not apply",
        ),
        row(
            "min above max",
            endpoint(json!({"params": [{"name": "n", "type": "integer", "min": 5, "max": 1}]})),
            "sources[0].endpoints[0].params[0].min",
            "must not exceed",
        ),
        row(
            "a float bound",
            endpoint(json!({"params": [{"name": "n", "type": "integer", "max": 1.5}]})),
            "sources[0].endpoints[0].params[0].max",
            "integer",
        ),
        row(
            "an enum without values",
            endpoint(json!({"params": [{"name": "o", "type": "enum"}]})),
            "sources[0].endpoints[0].params[0].values",
            "non-empty",
        ),
        row(
            "a duplicate enum value",
            endpoint(json!({"params": [{"name": "o", "type": "enum", "values": ["a", "a"]}]})),
            "sources[0].endpoints[0].params[0].values[1]",
            "duplicate",
        ),
        row(
            "a default of the wrong type",
            endpoint(json!({"params": [{"name": "n", "type": "integer", "default": "5"}]})),
            "sources[0].endpoints[0].params[0].default",
            "integer",
        ),
        row(
            "a default out of range",
            endpoint(json!({"params": [{"name": "n", "type": "integer", "max": 10, "default": 11}]})),
            "sources[0].endpoints[0].params[0].default",
            "between",
        ),
        row(
            "a required param with a default",
            endpoint(json!({"params": [{"name": "n", "type": "boolean", "required": true, "default": true}]})),
            "sources[0].endpoints[0].params[0].default",
            "required",
        ),
        row(
            "duplicate param names",
            endpoint(json!({"params": [{"name": "q", "type": "string"}, {"name": "q", "type": "integer"}]})),
            "sources[0].endpoints[0].params[1].name",
            "duplicate",
        ),
        row(
            "a control character in a description",
            endpoint(json!({"description": "a\u{1b}[31m"})),
            "sources[0].endpoints[0].description",
            "control",
        ),
    ]);
    // C15: an alias may point through a sensitive key; redaction happens at runtime.
    let sources = accepts("C15", json!([endpoint(json!({"fields": {"conn": "/db/password", "a": "/x~1y~0z"}}))]), None);
    let fields = sources.get("status").and_then(|s| s.endpoint("now")).map(|e| e.fields.clone()).unwrap_or_default();
    assert_eq!(fields.get("conn").map(String::as_str), Some("/db/password"));
    // Param names are case-sensitive: `q` and `Q` are two params.
    let both = json!([endpoint(json!({"params": [
        {"name": "q", "type": "string", "min_length": 1, "max_length": 5},
        {"name": "Q", "type": "enum", "values": ["desc", "asc"], "default": "desc"},
        {"name": "n", "type": "integer", "min": 1, "max": 100, "default": 10},
        {"name": "b", "type": "boolean", "required": true}
    ]}))]);
    let sources = accepts("params", both, None);
    let params = sources.get("status").and_then(|s| s.endpoint("now")).map(|e| e.params.clone()).unwrap_or_default();
    let kinds: Vec<&ParamKind> = params.iter().map(|p| &p.kind).collect();
    assert_eq!(
        kinds,
        [
            &ParamKind::String { min_length: 1, max_length: 5 },
            &ParamKind::Enum { values: vec!["desc".into(), "asc".into()] },
            &ParamKind::Integer { min: Some(1), max: Some(100) },
            &ParamKind::Boolean,
        ]
    );
}

#[test]
fn the_fingerprint_changes_with_origin_path_auth_mode_and_reference_only() {
    let print = |patch: Value| {
        let sources = accepts("fingerprint", json!([source(patch)]), None);
        sources.get("status").and_then(|s| s.endpoint("now").map(|e| s.fingerprint(e))).unwrap_or_default()
    };
    let base = print(json!({}));
    assert!(base.starts_with("sha256:") && base.len() == 71, "{base}");
    assert_eq!(base, print(json!({"timeout_ms": 2000, "description": "x"})), "timeouts do not change the window");
    for patch in [
        json!({"base_url": "https://api2.example.com"}),
        json!({"base_url": "https://api.example.com/v2"}),
        json!({"auth": {"mode": "bearer"}}),
        json!({"auth": {"mode": "bearer", "credential": "OTHER"}}),
        json!({"endpoints": [{"id": "now", "path": "/later", "fields": {"state": "/state"}}]}),
    ] {
        assert_ne!(base, print(patch.clone()), "{patch}");
    }
}

#[test]
fn the_document_loader_refuses_bad_sources_naming_path_and_line() {
    let yaml = "schema: warden/v1\nsources:\n  - id: status\n    base_url: https://api.example.com\n    endpoints:\n      - id: now\n        path: /a//b\n        fields: {state: /state}\n";
    let error = load_str(yaml, "test.yaml").err().unwrap_or_else(|| panic!("loaded"));
    assert_eq!(error.path, "sources[0].endpoints[0].path");
    assert_eq!(error.line, Some(7));
    assert!(error.message.contains("'//'"), "{error}");

    let secret = "schema: warden/v1\nsources:\n  - id: status\n    base_url: https://api.example.com\n    auth:\n      mode: bearer\n      credential: ghp_16C7e42F292c6912E7710c838347Ae178B4a\n    endpoints: [{id: now, path: /now, fields: {s: /s}}]\n";
    let error = load_str(secret, "test.yaml").err().unwrap_or_else(|| panic!("loaded"));
    assert_eq!((error.path.as_str(), error.line), ("sources[0].auth.credential", Some(7)));
    assert!(!error.to_string().contains("16C7e42F"), "{error}");

    let insecure = "schema: warden/v1\nallow_insecure_http: true\nsources:\n  - id: status\n    base_url: http://api.example.com\n    endpoints: [{id: now, path: /now, fields: {s: /s}}]\n";
    let document = load_str(insecure, "test.yaml").unwrap_or_else(|e| panic!("refused: {e}"));
    assert_eq!(document.sources_config.len(), 1);
    assert!(document.sources_config.get("status").is_some_and(|s| s.allow_insecure_http));

    let none = load_str("schema: warden/v1\nactions: {}\n", "test.yaml").unwrap_or_else(|e| panic!("refused: {e}"));
    assert!(none.sources_config.is_empty());
}
