use super::*;
use serde_json::json;

#[test]
fn each_kind_of_anchor_parses_and_is_named_by_its_sink() {
    let specs = AnchorSpec::parse_list(&json!([
        {"file": "/var/log/warden-anchors.jsonl"},
        {"http": "https://witness.example/add?token=s3cr3t", "header": "Authorization", "header_ref": "WITNESS_TOKEN",
         "ca_certs": "/etc/ssl/witness.pem", "timeout_ms": 5000},
        {"rfc3161": "http://127.0.0.1:8318/tsr", "tsa_cert": "/etc/warden/tsa.pem"},
    ]))
    .expect("parses");
    let sinks: Vec<String> = specs.iter().map(AnchorSpec::sink).collect();
    assert_eq!(
        sinks,
        ["file /var/log/warden-anchors.jsonl", "http https://witness.example/add", "rfc3161 http://127.0.0.1:8318/tsr"]
    );
    assert_eq!(specs[1].header, Some(("authorization".into(), "WITNESS_TOKEN".into())));
    assert_eq!(specs[1].timeout_ms, Some(5000));
    assert_eq!(specs[2].tsa_cert.as_deref(), Some(std::path::Path::new("/etc/warden/tsa.pem")));
    assert!(AnchorSpec::parse_list(&json!([])).expect("empty").is_empty());
}

#[test]
fn a_bad_anchor_is_refused_naming_its_path() {
    let refused = [
        (json!({"file": "/a"}), "evidence.anchors", "must be a list"),
        (json!(["/a"]), "evidence.anchors[0]", "a mapping"),
        (json!([{}]), "evidence.anchors[0]", "needs one of"),
        (json!([{"file": "/a", "http": "https://w/"}]), "evidence.anchors[0]", "names file and http"),
        (json!([{"file": "relative.jsonl"}]), "evidence.anchors[0].file", "absolute path"),
        (json!([{"file": ""}]), "evidence.anchors[0].file", "non-empty string"),
        (json!([{"file": 7}]), "evidence.anchors[0].file", "non-empty string"),
        (json!([{"file": "/a", "tsa_cert": "/t"}]), "evidence.anchors[0].tsa_cert", "for rfc3161"),
        (json!([{"http": "https://w/", "tsa_cert": "/t"}]), "evidence.anchors[0].tsa_cert", "for rfc3161"),
        (json!([{"file": "/a", "timeout_ms": 500}]), "evidence.anchors[0].timeout_ms", "for http and rfc3161"),
        (json!([{"file": "/a", "ca_certs": "/c"}]), "evidence.anchors[0].ca_certs", "for http and rfc3161"),
        (json!([{"rfc3161": "ftp://tsa/"}]), "evidence.anchors[0].rfc3161", "http:// or https://"),
        (json!([{"http": "https://user:pw@w/"}]), "evidence.anchors[0].http", "user name or password"),
        (json!([{"http": "not a url"}]), "evidence.anchors[0].http", "not an absolute URL"),
        (
            json!([{"http": "https://w/", "header": "authorization"}]),
            "evidence.anchors[0].header",
            "needs 'header_ref'",
        ),
        (json!([{"http": "https://w/", "header_ref": "T"}]), "evidence.anchors[0].header_ref", "needs 'header'"),
        (
            json!([{"http": "https://w/", "header": "authorization", "header_ref": "Bearer abc"}]),
            "evidence.anchors[0].header_ref",
            "never the value itself",
        ),
        (
            json!([{"http": "https://w/", "header": "bad header", "header_ref": "T"}]),
            "evidence.anchors[0].header",
            "a header name",
        ),
        (
            json!([{"http": "https://w/", "header": "Content-Length", "header_ref": "T"}]),
            "evidence.anchors[0].header",
            "set by the client",
        ),
        (json!([{"http": "https://w/", "timeout_ms": 99}]), "evidence.anchors[0].timeout_ms", "100 to 60000"),
        (json!([{"http": "https://w/", "timeout_ms": 60_001}]), "evidence.anchors[0].timeout_ms", "100 to 60000"),
        (json!([{"http": "https://w/", "retries": 3}]), "evidence.anchors[0].retries", "unknown key 'retries'"),
        (json!([{"file": "/a"}, {"rfc3161": "https://tsa/"}, {"file": "/a"}]), "evidence.anchors[2]", "listed twice"),
    ];
    for (value, path, message) in refused {
        let error = AnchorSpec::parse_list(&value).expect_err("refused");
        assert_eq!(error.path, path, "{value}");
        assert!(error.message.contains(message), "{value}: {}", error.message);
        assert!(!error.message.contains("pw@") && !error.message.contains("Bearer"), "{}", error.message);
    }
    // The bounds themselves are accepted.
    for ms in [100, 60_000] {
        AnchorSpec::parse_list(&json!([{"http": "https://w/", "timeout_ms": ms}])).expect("at the bound");
    }
}

#[test]
fn the_retry_delay_doubles_from_two_seconds_up_to_five_minutes() {
    let cases = [(0, 2), (1, 2), (2, 4), (3, 8), (8, 256), (9, 300), (10, 300), (u32::MAX, 300)];
    for (attempts, seconds) in cases {
        assert_eq!(retry_delay(attempts), seconds * MICROS_PER_SECOND, "{attempts}");
    }
}

#[test]
fn a_sink_waits_on_what_follows_its_last_anchor_or_on_the_newest() {
    let cases = [
        (None, None, None),
        (Some(3), None, None),
        (None, Some(7), Some(7)),
        (Some(3), Some(7), Some(4)),
        (Some(6), Some(7), Some(7)),
        (Some(7), Some(7), None),
        (Some(8), Some(7), None),
    ];
    for (last, newest, expected) in cases {
        assert_eq!(waiting_from(last, newest), expected, "{last:?} {newest:?}");
    }
}

fn checkpoint(number: u64) -> StoredCheckpoint {
    StoredCheckpoint {
        number,
        origin: "o".into(),
        size: number,
        root: String::new(),
        time: 0,
        note: format!("note {number}"),
        companion: String::new(),
        verifier: String::new(),
    }
}

fn failed(number: u64, attempts: u32, last_try: Micros) -> StoredAnchor {
    let error = AnchorError { sink: "s".into(), code: "timeout".into(), message: "timed out".into() };
    let mut row = StoredAnchor::after_try("s", number, None, last_try, &Err(error));
    row.attempts = attempts;
    row
}

#[test]
fn only_untried_and_due_retries_are_tried_and_force_tries_every_failure() {
    let now = 1_000 * MICROS_PER_SECOND;
    let anchored = StoredAnchor::after_try("s", 5, None, 0, &Ok(None));
    let state = SinkState {
        sink: "s".into(),
        last_anchored: Some(1),
        waiting: vec![
            (checkpoint(2), None),
            // Failed once 2 s ago: due at the instant.
            (checkpoint(3), Some(failed(3, 1, now - 2 * MICROS_PER_SECOND))),
            // Failed once, one microsecond short of the delay.
            (checkpoint(4), Some(failed(4, 1, now - 2 * MICROS_PER_SECOND + 1))),
            (checkpoint(5), Some(anchored)),
            // Failed many times: five minutes apart at most.
            (checkpoint(6), Some(failed(6, 30, now - 300 * MICROS_PER_SECOND))),
        ],
    };
    let numbers = |force| state.to_try(now, force).iter().map(|(c, _)| c.number).collect::<Vec<_>>();
    assert_eq!(numbers(false), [2, 3, 6]);
    assert_eq!(numbers(true), [2, 3, 4, 6], "forced, every one not anchored");
}

#[test]
fn a_try_counts_attempts_and_keeps_what_came_back() {
    let error = AnchorError { sink: "s".into(), code: "timeout".into(), message: "x".repeat(400) };
    let first = StoredAnchor::after_try("s", 3, None, 10, &Err(error));
    assert_eq!((first.attempts, first.anchored(), first.error_code.as_deref()), (1, false, Some("timeout")));
    assert_eq!(first.description.chars().count(), 301, "bounded, with an ellipsis");
    let receipt =
        super::super::anchor::AnchorReceipt { kind: "rfc3161".into(), bytes: vec![1, 2, 3], description: "ok".into() };
    let second = StoredAnchor::after_try("s", 3, Some(&first), 20, &Ok(Some(receipt)));
    assert_eq!((second.attempts, second.anchored_at, second.error_code.as_deref()), (2, Some(20), None));
    assert_eq!((second.kind.as_deref(), second.receipt_bytes()), (Some("rfc3161"), Some(vec![1, 2, 3])));
    let delivered = StoredAnchor::after_try("s", 4, None, 30, &Ok(None));
    assert!(delivered.anchored() && delivered.receipt.is_none() && delivered.kind.is_none());
}

#[test]
fn a_handles_anchors_name_their_sinks_in_order_and_build_the_provider_of_each_kind() {
    use crate::sight::credentials::CredentialProvider;
    struct Witness(bool);
    impl CredentialProvider for Witness {
        fn resolve(&self, reference: &str) -> Option<Zeroizing<String>> {
            (self.0 && reference == "WITNESS_TOKEN").then(|| Zeroizing::new("s3cr3t".into()))
        }
    }
    let known: Arc<dyn CredentialProvider> = Arc::new(Witness(true));
    let unknown: Arc<dyn CredentialProvider> = Arc::new(Witness(false));

    let none = Anchors::load(&[]).expect("nothing to read");
    assert!(none.is_empty());
    assert_eq!((none.sinks(), format!("{none:?}")), (Vec::<String>::new(), "[]".to_owned()));
    assert!(none.providers(&known).is_empty());

    let specs = AnchorSpec::parse_list(&json!([
        {"file": "/var/log/warden-anchors.jsonl"},
        {"http": "https://witness.example/add", "header": "Authorization", "header_ref": "WITNESS_TOKEN",
         "timeout_ms": 5000},
        {"rfc3161": "http://127.0.0.1:8318/tsr"},
    ]))
    .expect("parses");
    let anchors = Anchors::load(&specs).expect("no tsa_cert to read");
    let names =
        ["file /var/log/warden-anchors.jsonl", "http https://witness.example/add", "rfc3161 http://127.0.0.1:8318/tsr"];
    assert!(!anchors.is_empty());
    assert_eq!(anchors.sinks(), names);
    assert_eq!(format!("{anchors:?}"), format!("{names:?}"), "Debug lists the sinks, never a header's value");

    // Each kind's own provider (a file sink, an HTTP sink, a TSA client), under the sink's name.
    let built: Vec<(String, String)> = anchors
        .providers(&known)
        .into_iter()
        .map(|(sink, provider)| (sink, provider.map_or_else(|e| format!("error {}", e.code), |p| p.name())))
        .collect();
    let expected: Vec<(String, String)> = names.iter().map(|name| ((*name).to_owned(), (*name).to_owned())).collect();
    assert_eq!(built, expected);

    // A header whose credential is missing fails that sink alone.
    let outcomes: Vec<(String, Option<AnchorError>)> =
        anchors.providers(&unknown).into_iter().map(|(sink, provider)| (sink, provider.err())).collect();
    assert_eq!(outcomes.len(), 3);
    assert!(outcomes[0].1.is_none() && outcomes[2].1.is_none(), "{outcomes:?}");
    let error = outcomes[1].1.as_ref().expect("the HTTP sink's credential is missing");
    assert_eq!(
        (outcomes[1].0.as_str(), error.sink.as_str(), error.code.as_str()),
        (names[1], names[1], "credential_missing")
    );
    assert!(error.message.contains("WITNESS_TOKEN") && error.message.contains("'authorization'"), "{}", error.message);
}
