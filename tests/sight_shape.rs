//! Shaping a sight's response: strict parsing, selection, redaction, pruning and error texts.
//! Rows F01–F23 and E17 of `hostile-fetch-sample.md` are covered here by name.

use base64::Engine as _;
use serde_json::{json, Value};
use warden::sight::shape::{
    error_text, is_sensitive_key, parse_body, scrub_text, shape, Echo, Limits, Shaped, REDACTED, TRUNCATED_DEPTH,
};

fn aliases(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(a, p)| ((*a).to_owned(), (*p).to_owned())).collect()
}

fn shape_default(document: &Value, pairs: &[(&str, &str)]) -> Shaped {
    shape(document, &aliases(pairs), &Limits::default(), &Echo::none())
}

fn shape_echo(document: &Value, pairs: &[(&str, &str)], sent: &str) -> Shaped {
    shape(document, &aliases(pairs), &Limits::default(), &Echo::new(Some(sent)))
}

fn serialized(shaped: &Shaped) -> String {
    serde_json::to_string(&json!({
        "values": shaped.values,
        "warnings": shaped.warnings,
        "truncation": shaped.truncation,
        "redactions": shaped.redactions,
    }))
    .unwrap_or_default()
}

fn scrub(text: &str) -> String {
    scrub_text(text, &Echo::none()).0
}

// ---------------------------------------------------------------- parsing

#[test]
fn f01_ten_thousand_nested_brackets_are_an_invalid_response_without_overflowing_the_stack() {
    let body = "[".repeat(10_000);
    let error = parse_body(body.as_bytes()).err().map(|e| e.code);
    assert_eq!(error, Some("invalid_response"));
    let closed = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    assert_eq!(parse_body(closed.as_bytes()).err().map(|e| e.code), Some("invalid_response"));
}

#[test]
fn f19_trailing_garbage_after_a_value_is_an_invalid_response() {
    for body in ["{} x", "{}{}", "[1] ,", "null null"] {
        assert_eq!(parse_body(body.as_bytes()).err().map(|e| e.code), Some("invalid_response"), "{body}");
    }
}

#[test]
fn html_invalid_utf8_and_an_empty_body_are_invalid_responses() {
    let bodies: [&[u8]; 6] =
        [b"<html><body>hi</body></html>", b"\"\xff\xfe\"", b"", b"   \n", b"\xEF\xBB\xBF", b"{'a':1}"];
    for body in bodies {
        assert_eq!(parse_body(body).err().map(|e| e.code), Some("invalid_response"), "{body:?}");
    }
}

#[test]
fn parse_errors_are_single_line_bounded_and_carry_no_body_content() {
    let body = "{\"secret\": \"hunter2-very-secret\" trailing Bearer abcdef}";
    let Err(error) = parse_body(body.as_bytes()) else { panic!("a malformed body parses") };
    assert!(!error.message.contains("hunter2"), "{}", error.message);
    assert!(!error.message.contains('\n'));
    assert!(error.message.chars().count() <= 300);
}

#[test]
fn a_leading_utf8_bom_is_stripped() {
    let parsed = parse_body(b"\xEF\xBB\xBF{\"a\":1}").ok();
    assert_eq!(parsed, Some(json!({"a": 1})));
}

#[test]
fn f17_huge_exponents_and_thirty_digit_integers_keep_their_exact_text() {
    let Ok(document) =
        parse_body(br#"{"big": 123456789012345678901234567890, "huge": 1e400, "neg": -0.000000000000000000000000001}"#)
    else {
        panic!("numbers beyond f64 parse");
    };
    let shaped = shape_default(&document, &[("big", "/big"), ("huge", "/huge"), ("neg", "/neg")]);
    let text = serialized(&shaped);
    assert!(text.contains("123456789012345678901234567890"), "{text}");
    // serde_json normalises the exponent's sign; the value is exact and still valid JSON.
    assert!(text.contains("\"huge\":1e+400"), "{text}");
    assert!(text.contains("-0.000000000000000000000000001"), "{text}");
    // The result stays valid JSON.
    assert!(serde_json::from_str::<Value>(&text).is_ok());
}

#[test]
fn f23_an_empty_body_is_invalid_but_null_and_an_empty_array_at_the_root_give_null_values_with_warnings() {
    assert_eq!(parse_body(b"").err().map(|e| e.code), Some("invalid_response"));
    for body in [&b"null"[..], b"[]", b"{}", b"\"text\"", b"3"] {
        let Ok(document) = parse_body(body) else { panic!("{body:?} is JSON") };
        let shaped = shape_default(&document, &[("a", "/a"), ("b", "/0/b")]);
        assert_eq!(shaped.values.get("a"), Some(&Value::Null));
        assert_eq!(shaped.values.get("b"), Some(&Value::Null));
        assert_eq!(shaped.warnings.len(), 2, "{:?}", shaped.warnings);
        assert!(shaped.warnings.iter().all(|w| w.contains("not found")));
    }
}

// ---------------------------------------------------------------- sensitive keys

#[test]
fn f05_password_keys_in_any_spelling_are_redacted() {
    for key in ["password", "Password", "PASS_WORD", "api-key", "apiKey", "API.KEY", "pass word", "client_secret"] {
        let document = json!({"data": {key: "x-value-1234", "keep": "visible"}});
        let shaped = shape_default(&document, &[("data", "/data")]);
        assert_eq!(shaped.values.get("data"), Some(&json!({key: REDACTED, "keep": "visible"})), "{key}");
        assert_eq!(shaped.redactions.get("data"), Some(&json!(1)), "{key}");
    }
}

#[test]
fn every_listed_sensitive_key_is_recognised() {
    for key in [
        "password",
        "passwd",
        "pwd",
        "secret",
        "client_secret",
        "token",
        "access_token",
        "refresh_token",
        "id_token",
        "api_key",
        "apiKey",
        "api_secret",
        "authorization",
        "Proxy-Authorization",
        "cookie",
        "Set-Cookie",
        "credential",
        "private_key",
    ] {
        assert!(is_sensitive_key(key), "{key}");
    }
}

#[test]
fn keys_ending_with_a_sensitive_word_are_redacted() {
    for key in [
        "db_password",
        "userPasswd",
        "webhookSecret",
        "stripe_api_key",
        "ssh-private-key",
        "github.accessToken",
        "oauth_refresh_token",
        "google_id_token",
        "x-auth-token",
        "sessionToken",
        "aws_credential",
        "serviceCredentials",
    ] {
        assert!(is_sensitive_key(key), "{key}");
    }
}

#[test]
fn pagination_tokens_and_ordinary_keys_are_not_sensitive() {
    for key in [
        "nextPageToken",
        "next_page_token",
        "pageToken",
        "continuation_token",
        "tokens_used",
        "token_count",
        "name",
        "keyboard",
        "monkey",
        "author",
        "secretary_name",
        "passage",
    ] {
        assert!(!is_sensitive_key(key), "{key}");
    }
    let document = json!({"items": [1, 2], "nextPageToken": "CAEQAA"});
    let shaped = shape_default(&document, &[("page", "")]);
    assert_eq!(shaped.values.get("page"), Some(&document));
    assert!(shaped.redactions.is_empty());
}

#[test]
fn f07_a_sensitive_key_redacts_its_whole_object_or_array_value() {
    let document = json!({"credential": {"user": "a", "pass": "b"}, "secret": ["x", {"y": 1}], "ok": 1});
    let shaped = shape_default(&document, &[("all", "")]);
    assert_eq!(shaped.values.get("all"), Some(&json!({"credential": REDACTED, "secret": REDACTED, "ok": 1})));
    assert_eq!(shaped.redactions.get("all"), Some(&json!(2)));
}

#[test]
fn sensitive_keys_are_redacted_at_any_depth() {
    let document = json!({"a": [{"b": {"c": [{"refresh_token": "rt-1234567"}]}}]});
    let shaped = shape_default(&document, &[("a", "/a")]);
    assert!(!serialized(&shaped).contains("rt-1234567"));
    assert_eq!(shaped.values.get("a"), Some(&json!([{"b": {"c": [{"refresh_token": REDACTED}]}}])));
}

#[test]
fn f11_duplicate_sensitive_keys_are_redacted_whichever_wins() {
    let Ok(document) = parse_body(br#"{"token":"a-first","token":"b-second"}"#) else { panic!("duplicates parse") };
    let shaped = shape_default(&document, &[("all", "")]);
    let text = serialized(&shaped);
    assert!(!text.contains("a-first") && !text.contains("b-second"), "{text}");
    assert_eq!(shaped.values.get("all"), Some(&json!({"token": REDACTED})));
}

// ---------------------------------------------------------------- pointer guard

#[test]
fn a_pointer_through_a_sensitive_key_redacts_the_whole_selected_value() {
    let document = json!({
        "db": {"password": "hunter2", "host": "db"},
        "credential": {"user": "alice", "deep": {"x": 1}},
        "auth": {"apiKey": {"value": "k-123"}}
    });
    let shaped = shape_default(
        &document,
        &[
            ("pw", "/db/password"),
            ("user", "/credential/user"),
            ("deep", "/credential/deep"),
            ("key", "/auth/apiKey/value"),
        ],
    );
    for alias in ["pw", "user", "deep", "key"] {
        assert_eq!(shaped.values.get(alias), Some(&json!(REDACTED)), "{alias}");
        assert_eq!(shaped.redactions.get(alias), Some(&json!(1)), "{alias}");
    }
    let text = serialized(&shaped);
    assert!(!text.contains("hunter2") && !text.contains("alice") && !text.contains("k-123"));
}

#[test]
fn the_pointer_guard_unescapes_rfc6901_tokens_and_an_escaped_sensitive_key_is_still_caught() {
    let document = json!({"a/password": "hunter2", "x~token": {"t": "v"}});
    let shaped = shape_default(&document, &[("one", "/a~1password"), ("two", "/x~0token/t")]);
    assert_eq!(shaped.values.get("one"), Some(&json!(REDACTED)));
    // "x~token" normalises to "x~token": not sensitive; its child is kept.
    assert_eq!(shaped.values.get("two"), Some(&json!("v")));
}

#[test]
fn a_missing_pointer_gives_null_with_a_warning_and_an_invalid_pointer_too() {
    let document = json!({"a": {"b": [1, 2]}});
    let shaped =
        shape_default(&document, &[("missing", "/a/c"), ("index", "/a/b/7"), ("bad", "a/b"), ("tilde", "/a~2")]);
    for alias in ["missing", "index", "bad", "tilde"] {
        assert_eq!(shaped.values.get(alias), Some(&Value::Null), "{alias}");
    }
    assert_eq!(shaped.warnings.len(), 4);
    let shaped = shape_default(&document, &[("nl", "/a\nb\u{1b}[2J")]);
    assert!(shaped.warnings.iter().all(|w| !w.contains(['\n', '\u{1b}'])), "{:?}", shaped.warnings);
    assert!(shaped.warnings.iter().all(|w| w.chars().count() <= 240 && !w.contains('\n')));
}

// ---------------------------------------------------------------- patterns in strings

#[test]
fn f09_bearer_basic_password_assignments_and_sk_keys_are_scrubbed_inside_strings() {
    let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJlLXZhbHVl";
    let cases = [
        (format!("note: Bearer {jwt} ok"), jwt.to_owned()),
        ("auth is Basic dXNlcjpwYXNz here".to_owned(), "dXNlcjpwYXNz".to_owned()),
        ("password=hunter2&x=1".to_owned(), "hunter2".to_owned()),
        ("key sk-proj-AbCdEfGhIjKlMnOpQrStUv123 leaked".to_owned(), "sk-proj-AbCdEfGh".to_owned()),
    ];
    for (text, secret) in cases {
        let document = json!({"note": text});
        let shaped = shape_default(&document, &[("note", "/note")]);
        let out = serialized(&shaped);
        assert!(!out.contains(&secret), "{out}");
        assert!(out.contains(REDACTED), "{out}");
        assert!(shaped.redactions.get("note").and_then(Value::as_u64).unwrap_or(0) >= 1);
    }
    assert_eq!(scrub("password=hunter2&x=1"), "password=[REDACTED]&x=1");
    assert_eq!(scrub("Authorization: Bearer abc.def"), "Authorization: Bearer [REDACTED]");
    assert_eq!(scrub("Basic dXNlcjpwYXNz"), "Basic [REDACTED]");
}

#[test]
fn key_value_shapes_in_text_follow_the_sensitive_key_rules() {
    assert_eq!(scrub(r#"{"client_secret": "two words"}"#), r#"{"client_secret": "[REDACTED]"}"#);
    assert_eq!(scrub("db_password: s3cr3t, next"), "db_password: [REDACTED], next");
    assert_eq!(scrub("Set-Cookie: sid=abc123; Path=/"), "Set-Cookie: [REDACTED]; Path=/");
    assert_eq!(scrub("api_key='k-1'"), "api_key='[REDACTED]'");
    assert_eq!(scrub("éépassword=s3cr3t"), "éépassword=[REDACTED]");
    assert_eq!(scrub("x-auth-token: abc"), "x-auth-token: [REDACTED]");
    // Pagination tokens and ordinary words are left alone.
    assert_eq!(scrub("nextPageToken=CAEQAA&limit=5"), "nextPageToken=CAEQAA&limit=5");
    assert_eq!(scrub("monkey=banana"), "monkey=banana");
}

#[test]
fn prose_that_merely_mentions_basic_is_not_redacted() {
    assert_eq!(scrub("Basic information about the plan"), "Basic information about the plan");
}

#[test]
fn other_well_known_token_shapes_are_scrubbed() {
    for secret in [
        "ghp_0123456789abcdefghijABCDEFGHIJ",
        "github_pat_11ABCDEFG0123456789_abcdefghij",
        "xoxb-1234567890-abcdefghij",
        "AKIAIOSFODNN7EXAMPLE",
    ] {
        let out = scrub(&format!("value {secret} end"));
        assert!(!out.contains(secret), "{out}");
    }
}

#[test]
fn f21_a_mebibyte_of_bearer_bearer_is_scrubbed_in_linear_time_with_bounded_output() {
    let text = "Bearer ".repeat((1 << 20) / 7);
    let (out, _) = scrub_text(&text, &Echo::none());
    assert!(out.len() <= text.len() * 2, "{}", out.len());
    let document = json!({"s": text});
    let shaped = shape_default(&document, &[("s", "/s")]);
    let shown = shaped.values.get("s").and_then(Value::as_str).map_or(0, |s| s.chars().count());
    assert!(shown <= 2000);
    assert!(shaped.truncation.get("s").and_then(|t| t.get("strings")).is_some());
    // Other pathological shapes stay fast too.
    for unit in ["password=", "password=\"", "sk-", "Basic ", "eyJ", "a_password: '"] {
        let text = unit.repeat((1 << 18) / unit.len());
        let (out, _) = scrub_text(&text, &Echo::new(Some("Bearer some-sent-token-value")));
        assert!(out.len() <= text.len() * 3);
    }
}

// ---------------------------------------------------------------- echo guard

const SENT: &str = "Bearer s3cr3t-T0ken/value+xyz";
const TOKEN: &str = "s3cr3t-T0ken/value+xyz";

#[test]
fn f13_an_httpbin_style_echo_is_redacted_by_key_pattern_and_echo_guard() {
    let document = json!({"headers": {"Authorization": SENT, "Host": "api.example.com", "X-Echo": SENT}, "args": {}});
    let shaped = shape_echo(&document, &[("headers", "/headers"), ("echo", "/headers/X-Echo")], SENT);
    let text = serialized(&shaped);
    assert!(!text.contains(TOKEN), "{text}");
    assert_eq!(shaped.values.get("echo"), Some(&json!("Bearer [REDACTED]")));
    assert_eq!(
        shaped.values.get("headers"),
        Some(&json!({"Authorization": REDACTED, "Host": "api.example.com", "X-Echo": "Bearer [REDACTED]"}))
    );
}

#[test]
fn the_echo_guard_scrubs_the_raw_value_under_an_innocent_key_and_inside_text() {
    let document = json!({"note": format!("you sent {TOKEN}!"), "n": TOKEN, "keys": {TOKEN: 1}});
    let shaped = shape_echo(&document, &[("all", "")], SENT);
    let text = serialized(&shaped);
    assert!(!text.contains(TOKEN), "{text}");
    assert!(text.contains("you sent [REDACTED]!"), "{text}");
}

#[test]
fn the_echo_guard_scrubs_every_base64_alignment_of_the_value() {
    let b64 = base64::engine::general_purpose::STANDARD;
    for prefix in ["", "a", "ab", "user:", "Authorization: "] {
        for suffix in ["", "x", "yz"] {
            let encoded = b64.encode(format!("{prefix}{SENT}{suffix}"));
            let document = json!({"blob": encoded.clone(), "url": base64::engine::general_purpose::URL_SAFE.encode(format!("{prefix}{TOKEN}"))});
            let shaped = shape_echo(&document, &[("all", "")], SENT);
            let text = serialized(&shaped);
            assert!(text.contains(REDACTED), "{prefix:?} {suffix:?}: {text}");
            // No run of the token's own base64 survives.
            for skip in 0..3 {
                let groups = &TOKEN.as_bytes()[skip..];
                let whole = groups.len() / 3 * 3;
                let form = base64::engine::general_purpose::STANDARD_NO_PAD.encode(&groups[..whole]);
                assert!(!text.contains(&form), "{prefix:?} {suffix:?}: {text}");
            }
        }
    }
}

#[test]
fn the_echo_guard_scrubs_percent_encoded_forms_in_either_hex_case_and_with_plus_for_space() {
    let sent = "token ab cd/ef+gh:ij";
    let secret = "ab cd/ef+gh:ij";
    let forms = ["ab%20cd%2Fef%2Bgh%3Aij", "ab%20cd%2fef%2bgh%3aij", "ab+cd%2Fef%2Bgh%3Aij"];
    for form in forms {
        let document = json!({"echo": format!("https://x.example/?q={form}&z=1")});
        let shaped = shape_echo(&document, &[("echo", "/echo")], sent);
        let text = serialized(&shaped);
        assert!(!text.contains(form), "{text}");
        assert!(text.contains("?q=[REDACTED]&z=1"), "{text}");
    }
    let shaped = shape_echo(&json!({"raw": secret}), &[("raw", "/raw")], sent);
    assert_eq!(shaped.values.get("raw"), Some(&json!(REDACTED)));
}

#[test]
fn the_echo_guard_scrubs_a_basic_credentials_decoded_pair_and_password() {
    let pair = "alice:correct-horse-battery";
    let sent = format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(pair));
    let document = json!({"a": format!("login {pair}"), "b": "pw correct-horse-battery", "c": sent.clone()});
    let shaped = shape_echo(&document, &[("all", "")], &sent);
    let text = serialized(&shaped);
    assert!(!text.contains("correct-horse-battery"), "{text}");
    assert!(!text.contains(&sent[6..]), "{text}");
}

#[test]
fn the_echo_guard_scrubs_a_numeric_api_key_echoed_as_a_json_number() {
    let Ok(document) = parse_body(br#"{"echo": 98765432109876}"#) else { panic!("parses") };
    let shaped = shape_echo(&document, &[("echo", "/echo")], "98765432109876");
    assert_eq!(shaped.values.get("echo"), Some(&json!(REDACTED)));
}

#[test]
fn an_api_key_after_a_prefix_without_a_space_is_guarded_alone_and_inside_the_header_value() {
    for prefix in ["key=", "Token:", "token ", ""] {
        let key = "k3y-0a1b2c3d4e5f";
        let sent = format!("{prefix}{key}");
        let echo = Echo::for_sent(Some(&sent), &[key]);
        let document = json!({"alone": key, "header": sent.clone(), "text": format!("got {key}!")});
        let shaped = shape(&document, &aliases(&[("all", "")]), &Limits::default(), &echo);
        let text = serialized(&shaped);
        assert!(!text.contains(key), "{prefix:?}: {text}");
        assert_eq!(shaped.values["all"]["alone"], json!(REDACTED), "{prefix:?}");
        assert_eq!(shaped.values["all"]["header"], json!(format!("{prefix}{REDACTED}")), "{prefix:?}");
        assert_eq!(shaped.values["all"]["text"], json!(format!("got {REDACTED}!")), "{prefix:?}");
    }
}

#[test]
fn values_of_eight_characters_are_scrubbed_anywhere_and_shorter_ones_only_as_whole_tokens() {
    let scrubbed = |part: &str, text: &str| scrub_text(text, &Echo::for_sent(None, &[part])).0;
    // Eight characters: anywhere, inside a longer word too.
    assert_eq!(scrubbed("abcd1234", "xxabcd1234yy"), format!("xx{REDACTED}yy"));
    // Seven: only where no letter, digit or '_' touches it.
    assert_eq!(scrubbed("abcd123", "you sent abcd123."), format!("you sent {REDACTED}."));
    assert_eq!(scrubbed("abcd123", "(abcd123)"), format!("({REDACTED})"));
    assert_eq!(scrubbed("abcd123", "abcd123"), REDACTED);
    for kept in ["xabcd123", "abcd123x", "abcd123_", "_abcd123", "abcd1234", "éabcd123"] {
        assert_eq!(scrubbed("abcd123", kept), kept);
    }
    // A later occurrence standing alone is found after an embedded one.
    assert_eq!(scrubbed("abcd123", "abcd123abcd123 abcd123"), format!("abcd123abcd123 {REDACTED}"));
    // Four characters: the shortest value guarded, as a whole token.
    assert_eq!(scrubbed("hunt", "pw: hunt"), format!("pw: {REDACTED}"));
    assert_eq!(scrubbed("hunt", "hunting season"), "hunting season");
    // Three characters: not guarded at all (it would redact ordinary words).
    assert_eq!(scrubbed("abc", "abc"), "abc");
    assert_eq!(scrubbed("abc", "say abc."), "say abc.");
}

#[test]
fn a_short_basic_password_is_guarded_alone_from_the_header_value_too() {
    let sent = format!("Basic {}", base64::engine::general_purpose::STANDARD.encode("svc-reader:hunt3r"));
    for echo in [Echo::new(Some(&sent)), Echo::for_sent(Some(&sent), &["svc-reader:hunt3r", "svc-reader", "hunt3r"])] {
        let document = json!({"a": "you sent hunt3r.", "b": "hunt3rs hunt3r_x", "c": "svc-reader"});
        let shaped = shape(&document, &aliases(&[("all", "")]), &Limits::default(), &echo);
        assert_eq!(shaped.values["all"]["a"], json!(format!("you sent {REDACTED}.")));
        assert_eq!(shaped.values["all"]["b"], json!("hunt3rs hunt3r_x"));
        assert_eq!(shaped.values["all"]["c"], json!(REDACTED), "the username is a part of the header too");
    }
}

#[test]
fn a_numeric_short_key_is_redacted_as_a_whole_number_only() {
    let Ok(document) = parse_body(br#"{"same": 4821, "longer": 48210, "text": "id 4821"}"#) else { panic!("parses") };
    let shaped = shape(&document, &aliases(&[("all", "")]), &Limits::default(), &Echo::for_sent(None, &["4821"]));
    assert_eq!(shaped.values["all"]["same"], json!(REDACTED));
    assert_eq!(shaped.values["all"]["longer"], json!(48210));
    assert_eq!(shaped.values["all"]["text"], json!(format!("id {REDACTED}")));
}

/// Base64 with a line break every 76 characters (MIME).
fn mime(bytes: &[u8], newline: &str) -> String {
    let flat = base64::engine::general_purpose::STANDARD.encode(bytes);
    flat.as_bytes().chunks(76).map(|line| String::from_utf8_lossy(line).into_owned()).collect::<Vec<_>>().join(newline)
}

#[test]
fn mime_base64_of_the_header_is_scrubbed_across_line_breaks_in_values_and_in_error_texts() {
    for pad in 0..76 {
        let head = format!("{}Authorization: {SENT}\r\n", "x".repeat(pad));
        for newline in ["\r\n", "\n"] {
            let wrapped = mime(head.as_bytes(), newline);
            let shaped = shape_echo(&json!({"log": format!("dump:\n{wrapped}\nend")}), &[("log", "/log")], SENT);
            let text: String = serialized(&shaped).replace("\\r", "").replace("\\n", "");
            let line = error_text(&format!("HTTP 401: {wrapped}"), &Echo::new(Some(SENT)));
            // The error excerpt arrives with its line breaks collapsed to spaces.
            let collapsed = error_text(&format!("HTTP 401: {}", wrapped.replace(newline, " ")), &Echo::new(Some(SENT)));
            for skip in 0..3 {
                let groups = &TOKEN.as_bytes()[skip..];
                let form = base64::engine::general_purpose::STANDARD_NO_PAD.encode(&groups[..groups.len() / 3 * 3]);
                assert!(!text.contains(&form), "pad {pad}: {text}");
                for out in [&line, &collapsed] {
                    assert!(!out.replace(' ', "").contains(&form), "pad {pad}: {out}");
                }
            }
            assert!(text.contains(REDACTED) && line.contains(REDACTED) && collapsed.contains(REDACTED), "pad {pad}");
            assert!(text.contains("dump:"), "the text around the block is kept: {text}");
        }
    }
}

#[test]
fn a_token_written_as_json_escapes_is_scrubbed_with_the_text_around_it_kept() {
    let escaped: String = TOKEN.chars().map(|c| format!("\\u{:04X}", u32::from(c))).collect();
    let slashes = TOKEN.replace('/', "\\/");
    let half: String = TOKEN
        .chars()
        .enumerate()
        .map(|(i, c)| if i % 2 == 0 { format!("\\u{:04x}", u32::from(c)) } else { c.to_string() })
        .collect();
    for form in [escaped, slashes, half] {
        let body = format!("{{\"error\":\"bad token \\\"{form}\\\" (see docs)\"}}");
        let line = error_text(&body, &Echo::new(Some(SENT)));
        assert_eq!(line, format!("{{\"error\":\"bad token \\\"{REDACTED}\\\" (see docs)\"}}"), "{form}");
        let shaped = shape_echo(&json!({"raw": body}), &[("raw", "/raw")], SENT);
        assert!(!serialized(&shaped).contains(&form), "{form}");
    }
    // Escapes that decode to nothing guarded are left exactly as written.
    let plain = r#"{"a":"\u0041\n\ud83d\ude00 \x \u12"}"#;
    assert_eq!(scrub_text(plain, &Echo::new(Some(SENT))).0, plain);
}

#[test]
fn an_echo_never_prints_its_value_in_debug_output() {
    let echo = Echo::new(Some(SENT));
    let debug = format!("{echo:?}");
    assert!(!debug.contains(TOKEN) && !debug.contains("s3cr3t"), "{debug}");
}

// ---------------------------------------------------------------- pruning

#[test]
fn f03_a_wide_array_keeps_the_first_items_and_records_shown_and_total() {
    let Ok(document) = parse_body(format!("[{}]", vec!["1"; 500_000].join(",")).as_bytes()) else { panic!("parses") };
    let shaped = shape_default(&document, &[("all", "")]);
    assert_eq!(shaped.values.get("all").and_then(Value::as_array).map(Vec::len), Some(50));
    let items = shaped.truncation.get("all").and_then(|t| t.get("items")).cloned();
    assert_eq!(items, Some(json!({"shown": 50, "total": 500_000, "containers": 1})));
}

#[test]
fn wide_objects_keep_the_first_entries_with_a_flag() {
    let document: Value = (0..120).map(|i| (format!("k{i:03}"), json!(i))).collect::<serde_json::Map<_, _>>().into();
    let shaped = shape_default(&document, &[("all", "")]);
    assert_eq!(shaped.values.get("all").and_then(Value::as_object).map(serde_json::Map::len), Some(50));
    assert_eq!(
        shaped.truncation.get("all").and_then(|t| t.get("items")).and_then(|i| i.get("total")),
        Some(&json!(120))
    );
}

#[test]
fn deep_values_are_cut_at_the_depth_limit_with_a_flag() {
    let mut document = json!("leaf");
    for _ in 0..20 {
        document = json!({"d": document});
    }
    let shaped = shape_default(&document, &[("all", "")]);
    let mut node = shaped.values.get("all").cloned().unwrap_or(Value::Null);
    for _ in 0..8 {
        node = node.get("d").cloned().unwrap_or(Value::Null);
    }
    assert_eq!(node, json!(TRUNCATED_DEPTH));
    // Twenty levels of objects, eight shown: the flag keeps the original depth.
    assert_eq!(
        shaped.truncation.get("all").and_then(|t| t.get("depth")),
        Some(&json!({"shown": 8, "total": 20, "containers": 1}))
    );
    // A shallow value is untouched and unflagged.
    let shaped = shape_default(&json!({"a": {"b": [1, {"c": 2}]}}), &[("a", "/a")]);
    assert!(shaped.truncation.is_empty());
}

#[test]
fn long_strings_are_cut_at_a_character_boundary_with_a_flag() {
    let text = "é😀".repeat(3000);
    let shaped = shape_default(&json!({"s": text}), &[("s", "/s")]);
    let shown = shaped.values.get("s").and_then(Value::as_str).unwrap_or_default();
    assert_eq!(shown.chars().count(), 2000);
    assert!(text.starts_with(shown));
    assert_eq!(
        shaped.truncation.get("s").and_then(|t| t.get("strings")),
        Some(&json!({"shown": 2000, "total": 6000, "strings": 1}))
    );
}

#[test]
fn truncation_flags_report_what_was_shown_out_of_the_original_total_at_the_limit_and_one_past() {
    let limits = Limits { max_depth: 2, max_items: 3, max_string: 4 };
    let flags = |document: Value| {
        let shaped = shape(&document, &aliases(&[("v", "")]), &limits, &Echo::none());
        shaped.truncation.get("v").cloned()
    };
    // Exactly at each limit: nothing is cut and nothing is flagged.
    assert_eq!(flags(json!({"a": [1, 2, 3], "s": "abcd"})), None);
    assert_eq!(flags(json!(["abcd", "wxyz"])), None);
    // One past each limit.
    assert_eq!(flags(json!([1, 2, 3, 4])), Some(json!({"items": {"shown": 3, "total": 4, "containers": 1}})));
    assert_eq!(flags(json!("abcde")), Some(json!({"strings": {"shown": 4, "total": 5, "strings": 1}})));
    assert_eq!(flags(json!({"a": {"b": {"c": 1}}})), Some(json!({"depth": {"shown": 2, "total": 3, "containers": 1}})));
    // Several cuts: the count of places and the largest original, whichever came first.
    assert_eq!(
        flags(json!(["abcde", "abcdefghij", "abcdef"])),
        Some(json!({"strings": {"shown": 4, "total": 10, "strings": 3}}))
    );
    assert_eq!(
        flags(json!({"a": [1, 2, 3, 4], "b": [1, 2, 3, 4, 5, 6, 7]})),
        Some(json!({"items": {"shown": 3, "total": 7, "containers": 2}}))
    );
    assert_eq!(
        flags(json!([{"x": {"y": 1}}, {"x": {"y": {"z": {"w": 1}}}}])),
        Some(json!({"depth": {"shown": 2, "total": 5, "containers": 2}}))
    );
    // A number too long to show counts as a cut string, with its length.
    let Ok(number) = parse_body(b"123456789") else { panic!("parses") };
    assert_eq!(flags(number), Some(json!({"strings": {"shown": 4, "total": 9, "strings": 1}})));
}

#[test]
fn a_depth_flag_measures_a_value_nested_far_deeper_than_the_stack_could_recurse() {
    let mut document = json!(1);
    for _ in 0..200_000 {
        document = Value::Array(vec![document]);
    }
    let limits = Limits { max_depth: 1, max_items: 50, max_string: 2000 };
    let shaped = shape(&document, &aliases(&[("v", "")]), &limits, &Echo::none());
    assert_eq!(
        shaped.truncation.get("v").and_then(|t| t.get("depth")),
        Some(&json!({"shown": 1, "total": 200_000, "containers": 1}))
    );
    // serde_json's Value drops recursively; leak it rather than overflow the test's stack.
    std::mem::forget(document);
}

#[test]
fn limits_are_configurable() {
    let limits = Limits { max_depth: 1, max_items: 2, max_string: 3 };
    let document = json!({"a": [1, 2, 3], "b": "abcdef"});
    let shaped = shape(&document, &aliases(&[("a", "/a"), ("b", "/b"), ("all", "")]), &limits, &Echo::none());
    assert_eq!(shaped.values.get("a"), Some(&json!([1, 2])));
    assert_eq!(shaped.values.get("b"), Some(&json!("abc")));
    assert_eq!(shaped.values.get("all"), Some(&json!({"a": "[TR", "b": "abc"})));
}

// ---------------------------------------------------------------- warnings

#[test]
fn f15_ansi_bidi_and_zero_width_characters_are_kept_escaped_and_flagged() {
    let document =
        json!({"ansi": "\u{1b}[31mred\u{1b}[0m", "bidi": "abc\u{202e}fed", "zw": "a\u{200b}b", "plain": "ok\n"});
    let shaped = shape_default(&document, &[("ansi", "/ansi"), ("bidi", "/bidi"), ("zw", "/zw"), ("plain", "/plain")]);
    assert_eq!(shaped.values.get("ansi"), Some(&json!("\u{1b}[31mred\u{1b}[0m")));
    assert_eq!(shaped.values.get("bidi"), Some(&json!("abc\u{202e}fed")));
    let text = serialized(&shaped);
    assert!(text.contains("\\u001b"), "{text}");
    assert_eq!(shaped.warnings.len(), 3, "{:?}", shaped.warnings);
}

#[test]
fn warnings_are_at_most_twenty_of_at_most_240_characters() {
    let long_alias = "a".repeat(64);
    let pairs: Vec<(String, String)> =
        (0..30).map(|i| (format!("{long_alias}{i}"), format!("/{}/{i}", "missing".repeat(40)))).collect();
    let shaped = shape(&json!({}), &pairs, &Limits::default(), &Echo::none());
    assert_eq!(shaped.warnings.len(), 20);
    assert!(shaped.warnings_truncated);
    assert!(shaped.warnings.iter().all(|w| w.chars().count() <= 240));
    assert_eq!(shaped.values.len(), 30);
}

// ---------------------------------------------------------------- error texts

#[test]
fn e17_an_html_error_page_echoing_a_bearer_token_becomes_a_short_redacted_single_line() {
    let secret = "sk-live-0123456789abcdefghijklmnop";
    let body = format!(
        "<html>\n<head><title>500 Internal Server Error</title></head>\n<body>\n<h1>Oops</h1>\n\
         <pre>\r\nRequest headers:\n  Authorization: Bearer {secret}\n\tHost: api.example.com\n</pre>\n{}\n</body></html>",
        "padding ".repeat(200)
    );
    let text = error_text(&body, &Echo::new(Some(&format!("Bearer {secret}"))));
    assert!(text.contains("Bearer [REDACTED]"), "{text}");
    assert!(!text.contains("sk-live"), "{text}");
    assert!(!text.contains(['\n', '\r', '\t']), "{text}");
    assert!(!text.contains("  "), "{text}");
    assert!(text.chars().count() <= 300);
    // Without the echo guard, the pattern alone catches it.
    let text = error_text(&body, &Echo::none());
    assert!(text.contains("Bearer [REDACTED]") && !text.contains("sk-live"), "{text}");
}

#[test]
fn error_texts_are_cut_at_a_character_boundary_and_drop_control_characters() {
    let text = error_text(&format!("\u{1b}[31m{}\u{202e}", "😀".repeat(1000)), &Echo::none());
    assert!(text.chars().count() <= 300);
    assert!(text.ends_with('…'));
    assert!(!text.contains('\u{1b}') && !text.contains('\u{202e}'));
    assert_eq!(error_text("  short \n text  ", &Echo::none()), "short text");
}

// ---------------------------------------------------------------- result

#[test]
fn a_result_serialises_with_the_documented_camel_case_fields() {
    let shaped = shape_default(&json!({"a": 1}), &[("a", "/a"), ("b", "/b")]);
    let result = shaped.into_result("github", "repo", "2026-01-01T00:00:00Z", 200, None);
    let value = serde_json::to_value(&result).unwrap_or_default();
    let mut keys: Vec<&str> = value.as_object().map(|o| o.keys().map(String::as_str).collect()).unwrap_or_default();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "endpoint",
            "fetchedAt",
            "redactions",
            "source",
            "status",
            "truncation",
            "values",
            "warnings",
            "warningsTruncated"
        ]
    );
    assert_eq!(value.get("values"), Some(&json!({"a": 1, "b": null})));
    let with_snapshot = shape_default(&json!({}), &[]).into_result("s", "e", "t", 200, Some("snp_00".into()));
    assert_eq!(
        serde_json::to_value(&with_snapshot).ok().and_then(|v| v.get("snapshotId").cloned()),
        Some(json!("snp_00"))
    );
}
