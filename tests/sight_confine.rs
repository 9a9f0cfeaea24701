//! Request-time confinement (DESIGN.md §6; hostile-fetch-sample.md section D): an agent's
//! query becomes a URL on the configured origin and path, or a refusal with the right code.
//! Nothing here performs I/O, so "no request" holds by construction.

use proptest::prelude::*;
use serde_json::{json, Value};
use warden::sight::config::{parse, Sources};
use warden::sight::confine::{confine, Query};

fn sources() -> Sources {
    let config = json!([
        {
            "id": "gh",
            "base_url": "https://api.example.com/v2",
            "auth": {"mode": "bearer", "credential": "GH_TOKEN"},
            "endpoints": [
                {
                    "id": "search",
                    "path": "/search/issues",
                    "params": [
                        {"name": "q", "type": "string", "required": true, "min_length": 1, "max_length": 256},
                        {"name": "per_page", "type": "integer", "min": 1, "max": 100, "default": 30},
                        {"name": "sort", "type": "enum", "values": ["desc", "asc"], "default": "desc"},
                        {"name": "open", "type": "boolean"}
                    ],
                    "fields": {"title": "/items/0/title", "total": "/total_count", "conn": "/db/password"}
                },
                {"id": "rate", "path": "/rate_limit", "fields": {"remaining": "/rate/remaining"}}
            ]
        },
        {
            "id": "local",
            "base_url": "http://127.0.0.1:8080",
            "endpoints": [{"id": "health", "path": "/", "fields": {"ok": "/ok"}}]
        }
    ]);
    parse(&config, None).unwrap_or_else(|e| panic!("the fixture is refused: {e}"))
}

fn query(value: Value) -> Result<Query, warden::sight::SightError> {
    Query::from_json(&value)
}

/// Parse and confine; the code of the refusal, or the URL.
fn run(sources: &Sources, value: Value) -> Result<String, (String, String)> {
    let q = query(value).map_err(|e| (e.code.to_owned(), e.message))?;
    confine(sources, &q).map(|c| c.url.to_string()).map_err(|e| (e.code.to_owned(), e.message))
}

/// A refusal: label, the agent's query, the expected code, a phrase, and strings the message
/// must not repeat.
struct Refusal {
    label: String,
    query: Value,
    code: &'static str,
    phrase: &'static str,
    never: &'static [&'static str],
}

fn refusal(label: impl Into<String>, query: Value, code: &'static str, phrase: &'static str) -> Refusal {
    Refusal { label: label.into(), query, code, phrase, never: &[] }
}

fn check(rows: Vec<Refusal>) {
    let sources = sources();
    let mut failures = Vec::new();
    for row in &rows {
        match run(&sources, row.query.clone()) {
            Ok(url) => failures.push(format!("{}: confined to {url}", row.label)),
            Err((code, message)) => {
                if code != row.code {
                    failures.push(format!("{}: code {code}, expected {} ({message})", row.label, row.code));
                }
                if !message.contains(row.phrase) {
                    failures.push(format!("{}: message lacks {:?}: {message}", row.label, row.phrase));
                }
                if message.contains('\n') || message.contains('\r') {
                    failures.push(format!("{}: message is not one line: {message:?}", row.label));
                }
                for bad in row.never {
                    if message.contains(bad) {
                        failures.push(format!("{}: message repeats {bad:?}: {message}", row.label));
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} of {} rows failed:\n{}", failures.len(), rows.len(), failures.join("\n"));
}

fn search(params: Value) -> Value {
    json!({"source": "gh", "endpoint": "search", "params": params})
}

#[test]
fn a_query_that_tries_to_steer_the_request_is_refused_naming_the_key() {
    let mut rows = Vec::new();
    for key in
        ["url", "host", "port", "protocol", "path", "method", "headers", "credentials", "base_url", "URL", "Host"]
    {
        let mut q = search(json!({"q": "x"}));
        if let Some(map) = q.as_object_mut() {
            map.insert(key.to_owned(), json!("https://evil.com"));
        }
        rows.push(Refusal {
            label: format!("D03 {key}"),
            query: q,
            code: "invalid_params",
            phrase: "may not carry",
            never: &["evil.com"],
        });
    }
    rows.push(refusal(
        "an unknown key",
        json!({"source": "gh", "endpoint": "search", "extra": 1}),
        "invalid_params",
        "unknown key 'extra'",
    ));
    rows.push(refusal(
        "D13 params as a string",
        json!({"source": "gh", "endpoint": "search", "params": "a=1&b=2"}),
        "invalid_params",
        "'params' must be an object",
    ));
    rows.push(refusal(
        "params as a list",
        json!({"source": "gh", "endpoint": "search", "params": [["q", "x"]]}),
        "invalid_params",
        "'params' must be an object",
    ));
    rows.push(refusal(
        "fields as a string",
        json!({"source": "gh", "endpoint": "search", "params": {"q": "x"}, "fields": "title"}),
        "invalid_params",
        "'fields' must be a list",
    ));
    rows.push(refusal(
        "fields holding a number",
        json!({"source": "gh", "endpoint": "search", "params": {"q": "x"}, "fields": [1]}),
        "invalid_params",
        "'fields' must be a list",
    ));
    rows.push(refusal(
        "source as a number",
        json!({"source": 1, "endpoint": "search"}),
        "invalid_params",
        "'source' must be a string",
    ));
    rows.push(refusal("no endpoint", json!({"source": "gh"}), "invalid_params", "needs 'endpoint'"));
    rows.push(refusal("not an object", json!(["gh", "search"]), "invalid_params", "must be an object"));
    rows.push(refusal(
        "snapshot as a string",
        json!({"source": "gh", "endpoint": "rate", "snapshot": "yes"}),
        "invalid_params",
        "'snapshot'",
    ));
    check(rows);
}

#[test]
fn unknown_sources_and_endpoints_are_refused_without_repeating_hostile_names() {
    check(vec![
        Refusal {
            label: "D01 a URL as the source".into(),
            query: json!({"source": "https://evil.com", "endpoint": "search"}),
            code: "unknown_source",
            phrase: "unknown source",
            never: &["evil"],
        },
        refusal(
            "an upper-case id",
            json!({"source": "GH", "endpoint": "search"}),
            "unknown_source",
            "configured sources: gh, local",
        ),
        refusal("an empty id", json!({"source": "", "endpoint": "search"}), "unknown_source", "unknown source"),
        Refusal {
            label: "a traversal as the endpoint".into(),
            query: json!({"source": "gh", "endpoint": "../admin"}),
            code: "unknown_endpoint",
            phrase: "search, rate",
            never: &["admin"],
        },
        refusal(
            "another source's endpoint",
            json!({"source": "gh", "endpoint": "health"}),
            "unknown_endpoint",
            "unknown endpoint 'health'",
        ),
        Refusal {
            label: "a path as the endpoint".into(),
            query: json!({"source": "gh", "endpoint": "/search/issues"}),
            code: "unknown_endpoint",
            phrase: "unknown endpoint",
            never: &["/search/issues"],
        },
    ]);
}

#[test]
fn params_of_the_wrong_type_range_or_value_are_refused_before_any_request() {
    let big = "x".repeat(257);
    let mut rows = vec![
        refusal(
            "D09 integer as a string",
            search(json!({"q": "x", "per_page": "5"})),
            "invalid_params",
            "must be an integer",
        ),
        refusal(
            "D09 integer with a fraction",
            search(json!({"q": "x", "per_page": 5.5})),
            "invalid_params",
            "must be an integer",
        ),
        refusal(
            "D09 integer as NaN text",
            search(json!({"q": "x", "per_page": "NaN"})),
            "invalid_params",
            "must be an integer",
        ),
        refusal(
            "D09 integer as a boolean",
            search(json!({"q": "x", "per_page": true})),
            "invalid_params",
            "must be an integer",
        ),
        refusal(
            "D09 integer in a list",
            search(json!({"q": "x", "per_page": [5]})),
            "invalid_params",
            "must be an integer",
        ),
        refusal(
            "D09 integer as an object",
            search(json!({"q": "x", "per_page": {}})),
            "invalid_params",
            "must be an integer",
        ),
        refusal("integer as null", search(json!({"q": "x", "per_page": null})), "invalid_params", "must be an integer"),
        refusal("integer as 5.0", search(json!({"q": "x", "per_page": 5.0})), "invalid_params", "must be an integer"),
        refusal("integer below min", search(json!({"q": "x", "per_page": 0})), "invalid_params", "between 1 and 100"),
        refusal("integer above max", search(json!({"q": "x", "per_page": 101})), "invalid_params", "between 1 and 100"),
        refusal(
            "integer beyond 64 bits",
            search(json!({"q": "x", "per_page": u64::MAX})),
            "invalid_params",
            "must be an integer",
        ),
        refusal(
            "D11 enum in upper case",
            search(json!({"q": "x", "sort": "DESC"})),
            "invalid_params",
            "exactly one of: desc, asc",
        ),
        refusal(
            "D11 enum with a trailing space",
            search(json!({"q": "x", "sort": "desc "})),
            "invalid_params",
            "exactly one of",
        ),
        refusal(
            "D11 enum with a Cyrillic e",
            search(json!({"q": "x", "sort": "d\u{435}sc"})),
            "invalid_params",
            "exactly one of",
        ),
        refusal("enum as a number", search(json!({"q": "x", "sort": 1})), "invalid_params", "must be a string"),
        refusal("boolean as a string", search(json!({"q": "x", "open": "true"})), "invalid_params", "true or false"),
        refusal(
            "D07 CR LF in a string",
            search(json!({"q": "x\r\nHost: evil.com"})),
            "invalid_params",
            "control characters",
        ),
        refusal("D07 NUL in a string", search(json!({"q": "x\u{0}y"})), "invalid_params", "control characters"),
        refusal("a tab in a string", search(json!({"q": "\tx"})), "invalid_params", "control characters"),
        refusal("DEL in a string", search(json!({"q": "x\u{7f}"})), "invalid_params", "control characters"),
        refusal("a C1 control in a string", search(json!({"q": "x\u{85}"})), "invalid_params", "control characters"),
        refusal("an overlong string", search(json!({"q": big})), "invalid_params", "1 to 256 characters long, got 257"),
        refusal("an empty string below min_length", search(json!({"q": ""})), "invalid_params", "1 to 256"),
        refusal("a missing required param", search(json!({})), "invalid_params", "missing required param 'q'"),
        refusal("an unknown param", search(json!({"q": "x", "page": 2})), "invalid_params", "unknown param 'page'"),
        refusal(
            "a param name in another case",
            search(json!({"q": "x", "Q": "y"})),
            "invalid_params",
            "unknown param 'Q'",
        ),
        refusal(
            "params on an endpoint without params",
            json!({"source": "gh", "endpoint": "rate", "params": {"url": "x"}}),
            "invalid_params",
            "(none)",
        ),
    ];
    // 1e309 only exists as a number with arbitrary precision: parse it from text.
    let huge: Value =
        serde_json::from_str(r#"{"source": "gh", "endpoint": "search", "params": {"q": "x", "per_page": 1e309}}"#)
            .unwrap_or_else(|e| panic!("{e}"));
    rows.push(refusal("D09 integer as 1e309", huge, "invalid_params", "must be an integer"));
    let exp: Value =
        serde_json::from_str(r#"{"source": "gh", "endpoint": "search", "params": {"q": "x", "per_page": 1e1}}"#)
            .unwrap_or_else(|e| panic!("{e}"));
    rows.push(refusal("integer as 1e1", exp, "invalid_params", "must be an integer"));
    check(rows);
}

#[test]
fn fields_are_aliases_only_and_pointers_or_wildcards_are_unknown() {
    let with = |fields: Value| json!({"source": "gh", "endpoint": "search", "params": {"q": "x"}, "fields": fields});
    let unknown: Vec<String> = (0..10_000).map(|i| format!("f{i}")).collect();
    check(vec![
        Refusal {
            label: "D15 a pointer".into(),
            query: with(json!(["/db/password"])),
            code: "unknown_field",
            phrase: "not an alias name",
            never: &["password"],
        },
        refusal("D15 a fragment pointer", with(json!(["#/x"])), "unknown_field", "aliases, not pointers"),
        refusal("D15 a wildcard", with(json!(["*"])), "unknown_field", "unknown field"),
        refusal(
            "an alias of another endpoint",
            with(json!(["remaining"])),
            "unknown_field",
            "unknown field 'remaining'",
        ),
        refusal("an alias in another case", with(json!(["Title"])), "unknown_field", "title, total"),
        refusal("D17 ten thousand unknown fields", with(json!(unknown)), "unknown_field", "unknown field"),
        refusal("an empty list", with(json!([])), "unknown_field", "omit it"),
    ]);
}

#[test]
fn duplicate_fields_are_deduplicated_keeping_the_order_asked() {
    let sources = sources();
    let mut fields = vec!["total".to_owned(); 10_000];
    fields.push("title".to_owned());
    fields.push("total".to_owned());
    let q = query(json!({"source": "gh", "endpoint": "search", "params": {"q": "x"}, "fields": fields}))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(q.fields.as_deref(), Some(&["total".to_owned(), "title".to_owned()][..]));
    let confined = confine(&sources, &q).unwrap_or_else(|e| panic!("{e}"));
    let aliases: Vec<(&str, &str)> = confined.aliases.iter().map(|(a, p)| (a.as_str(), p.as_str())).collect();
    assert_eq!(aliases, [("total", "/total_count"), ("title", "/items/0/title")]);

    let all = query(search(json!({"q": "x"}))).unwrap_or_else(|e| panic!("{e}"));
    let confined = confine(&sources, &all).unwrap_or_else(|e| panic!("{e}"));
    let names: Vec<&str> = confined.aliases.iter().map(|(a, _)| a.as_str()).collect();
    assert_eq!(names, ["conn", "title", "total"], "no fields selects every alias");
}

#[test]
fn accepted_queries_build_the_configured_url_with_an_encoded_query_string() {
    let sources = sources();
    let cases: Vec<(Value, &str)> = vec![
        (
            search(json!({"q": "https://evil.com"})),
            "https://api.example.com/v2/search/issues?q=https%3A%2F%2Fevil.com&per_page=30&sort=desc",
        ),
        (
            search(json!({"sort": "asc", "open": false, "per_page": 100, "q": "a&b=c#d ../%2e"})),
            "https://api.example.com/v2/search/issues?q=a%26b%3Dc%23d+..%2F%252e&per_page=100&sort=asc&open=false",
        ),
        (
            search(json!({"q": "//evil.com/@x"})),
            "https://api.example.com/v2/search/issues?q=%2F%2Fevil.com%2F%40x&per_page=30&sort=desc",
        ),
        (
            search(json!({"q": "é🦀"})),
            "https://api.example.com/v2/search/issues?q=%C3%A9%F0%9F%A6%80&per_page=30&sort=desc",
        ),
        (json!({"source": "gh", "endpoint": "rate"}), "https://api.example.com/v2/rate_limit"),
        (
            json!({"source": "gh", "endpoint": "rate", "params": null, "fields": null}),
            "https://api.example.com/v2/rate_limit",
        ),
        (json!({"source": "local", "endpoint": "health"}), "http://127.0.0.1:8080/"),
    ];
    for (q, expected) in cases {
        assert_eq!(run(&sources, q.clone()), Ok(expected.to_owned()), "{q}");
    }
    // Length counts Unicode scalar values: 256 crabs are 1,024 bytes but 256 characters.
    let crabs = "🦀".repeat(256);
    assert!(run(&sources, search(json!({"q": crabs}))).is_ok());
}

#[test]
fn the_window_is_stable_and_includes_defaults() {
    let sources = sources();
    let a = query(search(json!({"q": "x", "sort": "desc"}))).unwrap_or_else(|e| panic!("{e}"));
    let b = query(search(json!({"sort": "desc", "per_page": 30, "q": "x"}))).unwrap_or_else(|e| panic!("{e}"));
    let wa = confine(&sources, &a).map_or_else(|e| panic!("{e}"), |c| c.window);
    let wb = confine(&sources, &b).map_or_else(|e| panic!("{e}"), |c| c.window);
    assert_eq!(wa, wb);
    assert_eq!(wa, r#"["gh","search",{"per_page":30,"q":"x","sort":"desc"}]"#);
    let c = query(search(json!({"q": "y"}))).unwrap_or_else(|e| panic!("{e}"));
    assert_ne!(confine(&sources, &c).map(|c| c.window).unwrap_or_default(), wa);
}

proptest! {
    #[test]
    fn any_string_param_either_is_refused_or_stays_in_the_query_string(q in any::<String>()) {
        let sources = sources();
        match run(&sources, search(json!({"q": q.clone()}))) {
            Err((code, _)) => prop_assert_eq!(code, "invalid_params"),
            Ok(text) => {
                let url = url::Url::parse(&text).map_err(|e| TestCaseError::fail(e.to_string()))?;
                prop_assert_eq!(url.origin().ascii_serialization(), "https://api.example.com");
                prop_assert_eq!(url.path(), "/v2/search/issues");
                prop_assert_eq!(url.username(), "");
                prop_assert!(url.password().is_none() && url.fragment().is_none());
                let pairs: Vec<(String, String)> = url.query_pairs().map(|(k, v)| (k.into_owned(), v.into_owned())).collect();
                prop_assert_eq!(pairs.first().cloned(), Some(("q".to_owned(), q)));
            }
        }
    }

    #[test]
    fn hostile_looking_strings_never_move_the_origin_or_path(
        q in prop::string::string_regex(r"(https?:|//|\.\./|%2[eEfF]|[@#?&=\\ /:]|evil\.com|[a-z]){1,40}")
            .unwrap_or_else(|e| panic!("{e}")),
        source in prop::sample::select(vec!["gh", "local", "GH", "gh ", "https://evil.com", "../gh"]),
    ) {
        let sources = sources();
        let endpoint = if source == "local" { "health" } else { "search" };
        let params = if source == "local" { json!({}) } else { json!({"q": q}) };
        match run(&sources, json!({"source": source, "endpoint": endpoint, "params": params})) {
            Err((code, _)) => prop_assert!(["unknown_source", "invalid_params"].contains(&code.as_str())),
            Ok(text) => {
                let url = url::Url::parse(&text).map_err(|e| TestCaseError::fail(e.to_string()))?;
                let expected = if source == "local" {
                    ("http://127.0.0.1:8080", "/")
                } else {
                    ("https://api.example.com", "/v2/search/issues")
                };
                prop_assert_eq!(url.origin().ascii_serialization(), expected.0);
                prop_assert_eq!(url.path(), expected.1);
            }
        }
    }
}
