//! Properties of shaping: no JSON panics it; every output string, container and nesting stays
//! within its limit; and a secret under a sensitive key never survives, wherever it sits and
//! whichever pointer selects it.

use base64::Engine as _;
use proptest::prelude::*;
use serde_json::{Map, Value};
use warden::sight::shape::{error_text, parse_body, scrub_text, shape, Echo, Limits};

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec!["a", "b", "id", "name", "items", "nextPageToken", "0", "1", "a/b", "m~n", "é", ""])
            .prop_map(str::to_owned),
        "[a-zA-Z_\\-. ]{0,12}",
    ]
}

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from),
        ".{0,40}".prop_map(Value::String),
        "(Bearer |Basic |password=|sk-|\u{1b}\\[|\u{202e})[a-zA-Z0-9+/=\\-]{0,30}".prop_map(Value::String),
    ]
}

fn json() -> impl Strategy<Value = Value> {
    scalar().prop_recursive(6, 120, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..10).prop_map(Value::Array),
            prop::collection::vec((key(), inner), 0..10)
                .prop_map(|entries| Value::Object(entries.into_iter().collect())),
        ]
    })
}

fn limits() -> impl Strategy<Value = Limits> {
    (0usize..6, 0usize..6, 0usize..40).prop_map(|(max_depth, max_items, max_string)| Limits {
        max_depth,
        max_items,
        max_string,
    })
}

/// RFC 6901 escaping of one reference token.
fn escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

fn pointer() -> impl Strategy<Value = String> {
    prop::collection::vec(key(), 0..4).prop_map(|tokens| tokens.iter().map(|t| format!("/{}", escape(t))).collect())
}

/// Checks the limits on a shaped value; `depth` counts enclosing containers.
fn within(value: &Value, limits: &Limits, depth: usize) -> Result<(), String> {
    match value {
        Value::String(text) if text.chars().count() > limits.max_string => Err(format!("string too long: {text:?}")),
        Value::Array(items) => {
            if items.len() > limits.max_items {
                return Err(format!("{} items", items.len()));
            }
            if !items.is_empty() && depth >= limits.max_depth {
                return Err(format!("container at depth {depth}"));
            }
            items.iter().try_for_each(|item| within(item, limits, depth + 1))
        }
        Value::Object(entries) => {
            if entries.len() > limits.max_items {
                return Err(format!("{} entries", entries.len()));
            }
            if !entries.is_empty() && depth >= limits.max_depth {
                return Err(format!("container at depth {depth}"));
            }
            for (key, item) in entries {
                if key.chars().count() > limits.max_string {
                    return Err(format!("key too long: {key:?}"));
                }
                within(item, limits, depth + 1)?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// One step of a path to the planted secret: an object key or an array position.
#[derive(Debug, Clone)]
enum Step {
    Key(String),
    Index(usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![key().prop_map(Step::Key), (0usize..4).prop_map(Step::Index)]
}

fn sensitive_key() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "password",
        "Password",
        "PASS_WORD",
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
        "api-key",
        "api_secret",
        "authorization",
        "Proxy-Authorization",
        "cookie",
        "Set-Cookie",
        "credential",
        "private_key",
        "db_password",
        "webhookSecret",
        "x-auth-token",
        "sessionToken",
        "serviceCredentials",
        "privateKey",
    ])
    .prop_map(str::to_owned)
}

/// Wraps `inner` along `path`, with random siblings, returning the document.
fn plant(inner: Value, path: &[Step], filler: &[Value]) -> Value {
    let mut value = inner;
    for (i, step) in path.iter().enumerate().rev() {
        let sibling = filler.get(i % filler.len().max(1)).cloned().unwrap_or(Value::Null);
        value = match step {
            Step::Key(key) => {
                let mut map = Map::new();
                map.insert(format!("{key}_sibling"), sibling);
                map.insert(key.clone(), value);
                Value::Object(map)
            }
            Step::Index(index) => {
                let mut items = vec![sibling; *index];
                items.push(value);
                Value::Array(items)
            }
        };
    }
    value
}

fn path_pointer(path: &[Step]) -> String {
    path.iter()
        .map(|step| match step {
            Step::Key(key) => format!("/{}", escape(key)),
            Step::Index(index) => format!("/{index}"),
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn shaping_never_panics_and_every_output_stays_within_its_limits(
        document in json(),
        pointers in prop::collection::vec(pointer(), 0..5),
        limits in limits(),
        sent in proptest::option::of("(Bearer )?[a-zA-Z0-9+/\\-]{0,20}"),
    ) {
        let aliases: Vec<(String, String)> =
            pointers.iter().enumerate().map(|(i, p)| (format!("f{i}"), p.clone())).chain([("root".to_owned(), String::new())]).collect();
        let echo = Echo::new(sent.as_deref());
        let shaped = shape(&document, &aliases, &limits, &echo);
        prop_assert_eq!(shaped.values.len(), aliases.len());
        for value in shaped.values.values() {
            if let Err(problem) = within(value, &limits, 0) {
                prop_assert!(false, "{} in {:?} with {:?}", problem, value, limits);
            }
        }
        prop_assert!(shaped.warnings.len() <= 20);
        prop_assert!(shaped.warnings.iter().all(|w| w.chars().count() <= 240 && !w.contains('\n')));
        let text = serde_json::to_string(&shaped.values).unwrap_or_default();
        prop_assert!(serde_json::from_str::<Value>(&text).is_ok());
    }

    #[test]
    fn a_secret_under_a_sensitive_key_never_appears_in_the_output(
        secret in "Zq9[a-zA-Z0-9]{8,20}",
        outer in prop::collection::vec(step(), 0..8),
        sensitive in sensitive_key(),
        inner in prop::collection::vec(step(), 0..3),
        filler in prop::collection::vec(json(), 1..4),
        select in 0usize..12,
        limits in (0usize..12, 1usize..8, 1usize..60)
            .prop_map(|(max_depth, max_items, max_string)| Limits { max_depth, max_items, max_string }),
        wrap_in_container in any::<bool>(),
    ) {
        let payload = if wrap_in_container {
            plant(Value::String(secret.clone()), &inner, &filler)
        } else {
            Value::String(secret.clone())
        };
        let mut path = outer.clone();
        path.push(Step::Key(sensitive));
        let document = plant(payload, &path, &filler);
        // Select the root, a prefix of the path, the sensitive key itself, or beyond it.
        let mut full = path.clone();
        if wrap_in_container {
            full.extend(inner.iter().cloned());
        }
        let cut = select.min(full.len());
        let aliases = vec![
            ("root".to_owned(), String::new()),
            ("part".to_owned(), path_pointer(&full[..cut])),
            ("full".to_owned(), path_pointer(&full)),
        ];
        let shaped = shape(&document, &aliases, &limits, &Echo::none());
        let text = serde_json::to_string(&serde_json::json!({
            "values": shaped.values,
            "warnings": shaped.warnings,
            "truncation": shaped.truncation,
        }))
        .unwrap_or_default();
        prop_assert!(!text.contains(&secret), "{} leaked: {}", secret, text);
    }

    #[test]
    fn an_echoed_credential_never_appears_in_the_output(
        token in "[a-zA-Z0-9+/\\-_.]{8,30}",
        scheme in prop::sample::select(vec!["", "Bearer ", "token "]),
        prefix in ".{0,5}",
        suffix in ".{0,5}",
    ) {
        let sent = format!("{scheme}{token}");
        let document = serde_json::json!({"echo": format!("{prefix}{token}{suffix}"), "sent": sent.clone()});
        let shaped = shape(&document, &[("all".to_owned(), String::new())], &Limits::default(), &Echo::new(Some(&sent)));
        let text = serde_json::to_string(&shaped.values).unwrap_or_default();
        prop_assert!(!text.contains(&token), "{}", text);
    }

    #[test]
    fn parsing_and_error_texts_never_panic_and_error_texts_stay_one_bounded_line(bytes in prop::collection::vec(any::<u8>(), 0..200), text in ".{0,400}") {
        let _ = parse_body(&bytes);
        let line = error_text(&text, &Echo::new(Some("Bearer abcdefgh")));
        prop_assert!(line.chars().count() <= 300);
        prop_assert!(!line.contains(['\n', '\r']));
        let (scrubbed, _) = scrub_text(&text, &Echo::none());
        prop_assert!(scrubbed.len() <= text.len() * 3 + 16);
    }

    #[test]
    fn an_echo_written_as_json_escapes_or_as_wrapped_base64_never_survives(
        token in "[a-zA-Z0-9+/\\-_.]{8,30}",
        prefix in "[ -~]{0,12}",
        suffix in "[ -~]{0,12}",
        escape_every in 1usize..4,
        width in 16usize..80,
        newline in prop::sample::select(vec!["\r\n", "\n", " "]),
    ) {
        // A backslash right before would escape the escape: JSON reads `\\u0041` as `\u0041`.
        prop_assume!(!prefix.ends_with('\\'));
        let echo = Echo::for_sent(Some(&format!("Bearer {token}")), &[&token]);
        // Every n-th character of the token as a \u escape, in raw (unparsed) text.
        let escaped: String = token
            .chars()
            .enumerate()
            .map(|(i, c)| if i % escape_every == 0 { format!("\\u{:04x}", u32::from(c)) } else { c.to_string() })
            .collect();
        let (scrubbed, _) = scrub_text(&format!("{prefix}{escaped}{suffix}"), &echo);
        prop_assert!(!scrubbed.contains(&escaped), "{}", scrubbed);
        // Base64 of the token in some text, wrapped every `width` characters (16 or more, as the
        // guard documents: MIME wraps at 76, PEM at 64).
        let flat = base64::engine::general_purpose::STANDARD.encode(format!("{prefix}{token}{suffix}"));
        let wrapped = flat.as_bytes().chunks(width).map(|line| String::from_utf8_lossy(line).into_owned()).collect::<Vec<_>>().join(newline);
        let (scrubbed, _) = scrub_text(&format!("log: {wrapped} end"), &echo);
        let squeezed: String = scrubbed.chars().filter(|c| !c.is_whitespace()).collect();
        for skip in 0..3 {
            let groups = &token.as_bytes()[skip..];
            let form = base64::engine::general_purpose::STANDARD_NO_PAD.encode(&groups[..groups.len() / 3 * 3]);
            if form.len() >= 8 {
                prop_assert!(!squeezed.contains(&form), "{} in {}", form, scrubbed);
            }
        }
    }

    #[test]
    fn the_escape_decoding_view_never_panics_and_changes_nothing_without_an_echo(
        text in "(\\\\u[0-9a-fA-FdD]{0,4}|\\\\[nrt\"/\\\\bfx]|[0-9 \n\u{e9}\u{1F600}]){0,60}",
    ) {
        let echo = Echo::for_sent(None, &["zzzzzzzz"]);
        let (scrubbed, count) = scrub_text(&text, &echo);
        prop_assert_eq!(count, 0);
        prop_assert_eq!(scrubbed, text);
    }
}
