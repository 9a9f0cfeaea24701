//! The signed approval webhook against a local HTTPS server with its own CA: the signature
//! verifies, a redirect is not followed, a hanging server is bounded and never delays the
//! action, failures are retried with backoff and recorded as events, and the secret appears in
//! no output, event or store byte.

mod common;
mod support;

use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use hmac::Mac;
use serde_json::{json, Value};
use support::{response, Server, TestCa};
use warden::event::{Event, EventKind};
use warden::pipeline::{ActionRequest, Warden, WardenOptions};
use warden::sight::credentials::CallbackProvider;
use warden::{Error, ManualClock, Principal};

const SECRET: &str = "whsec_9f8e7d6c5b4a39281706f5e4d3c2b1a0";

struct Hooked {
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
    warden: Warden,
}

fn open(url: &str, ca: &TestCa, extra: &str) -> Hooked {
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        r#"
schema: warden/v1
actions:
  stripe.refund:
    effect: "refund:{{payment_id}}"
    decision: approve
notify:
  webhook:
    url: "{url}"
    secret_ref: APPROVAL_WEBHOOK_SECRET
    ca_certs: "{}"
{extra}
"#,
        ca.pem_path.display()
    );
    let document = warden::document::load_str(&text, "hooked.yaml").unwrap();
    let options = WardenOptions { clock: Arc::new(ManualClock::new(T0)), ..WardenOptions::default() };
    let path = dir.path().join("state.redb");
    let warden = Warden::open(&path, document, options).unwrap();
    warden.notifier().set_credentials(Arc::new(CallbackProvider(|reference: &str| {
        (reference == "APPROVAL_WEBHOOK_SECRET").then(|| SECRET.to_owned())
    })));
    Hooked { _dir: dir, path, warden }
}

fn ask(warden: &Warden, payment: &str) -> String {
    let request = ActionRequest::new(
        "stripe.refund",
        json!({"payment_id": payment, "amount": 4200}),
        Principal::new("refund-agent", Some("ada")).unwrap(),
    );
    match warden.submit(&request) {
        Err(Error::ApprovalRequired { request_id, .. }) => request_id,
        other => panic!("expected an approval request, got {other:?}"),
    }
}

fn notify_events(warden: &Warden, id: &str) -> Vec<Event> {
    warden
        .kernel()
        .events(0, 1000)
        .unwrap()
        .into_iter()
        .filter(|e| {
            e.approval_id.as_deref() == Some(id)
                && matches!(e.kind, EventKind::APPROVAL_NOTIFIED | EventKind::APPROVAL_NOTIFY_FAILED)
        })
        .collect()
}

/// Wait (bounded) until `id` has a notification event that ends its delivery.
fn settled(warden: &Warden, id: &str) -> Vec<Event> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let events = notify_events(warden, id);
        let done = events.iter().any(|e| {
            let data: Value = serde_json::from_str(&e.data).unwrap();
            e.kind == EventKind::APPROVAL_NOTIFIED || data["will_retry"] == false
        });
        if done || Instant::now() > deadline {
            return events;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn data(event: &Event) -> Value {
    serde_json::from_str(&event.data).unwrap()
}

/// A webhook receiver for `localhost` under `ca` that answers 204 and keeps every body.
fn receiver(ca: &TestCa) -> (Server, Arc<Mutex<Vec<Vec<u8>>>>) {
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let kept = Arc::clone(&bodies);
    let server = Server::https(&ca.leaf(&["localhost"]), move |mut conn, seen| {
        kept.lock().unwrap().push(support::read_body(&mut conn, seen));
        conn.send(&response("204 No Content", &[], b""));
        Some(conn)
    });
    (server, bodies)
}

#[test]
fn the_request_is_posted_with_a_signature_the_receiver_can_verify() {
    let ca = TestCa::new();
    let (server, bodies) = receiver(&ca);
    let hooked = open(server.https_url("localhost", "/approvals?team=ops").as_str(), &ca, "");
    let id = ask(&hooked.warden, "pay_1");
    let events = settled(&hooked.warden, &id);
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].kind, EventKind::APPROVAL_NOTIFIED);
    assert_eq!(data(&events[0]), json!({"channel": "webhook", "attempt": 1, "status": 204}));

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let seen = &requests[0];
    assert_eq!((seen.method.as_str(), seen.target.as_str()), ("POST", "/approvals?team=ops"));
    assert_eq!(seen.header("content-type"), Some("application/json"));
    let body = bodies.lock().unwrap()[0].clone();
    let signature = seen.header("warden-signature").expect("Warden-Signature header");
    let (t, v1) = signature.split_once(',').expect("t=…,v1=…");
    let t = t.strip_prefix("t=").expect("t=");
    let v1 = v1.strip_prefix("v1=").expect("v1=");
    assert!(t.parse::<i64>().unwrap() > 1_700_000_000, "a Unix time: {t}");
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
    mac.update(format!("{t}.").as_bytes());
    mac.update(&body);
    mac.verify_slice(&hex::decode(v1).unwrap()).expect("the signature verifies with the shared secret");
    let mut forged = hmac::Hmac::<sha2::Sha256>::new_from_slice(b"another secret").unwrap();
    forged.update(format!("{t}.").as_bytes());
    forged.update(&body);
    assert!(forged.verify_slice(&hex::decode(v1).unwrap()).is_err());
    // The body is the request, arguments included.
    let posted: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(posted["approval_id"], id.as_str());
    assert_eq!(posted["arguments"], json!({"amount": 4200, "payment_id": "pay_1"}));
    assert_eq!(posted["status"], "pending");
    // Nobody else is told again when the same action is proposed while the request waits.
    assert_eq!(ask(&hooked.warden, "pay_1"), id);
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn with_a_console_url_the_webhook_and_the_hook_carry_the_requests_page() {
    let ca = TestCa::new();
    let (server, bodies) = receiver(&ca);
    let extra = "  console_url: \"http://127.0.0.1:8080/warden\"";
    let hooked = open(server.https_url("localhost", "/approvals").as_str(), &ca, extra);
    let (sender, hook_bodies) = mpsc::channel::<Value>();
    let sender = Mutex::new(sender);
    hooked.warden.notifier().set_hook(Some(Arc::new(move |request: &Value| {
        sender.lock().map_err(|_| "poisoned".to_owned())?.send(request.clone()).map_err(|e| e.to_string())
    })));
    let id = ask(&hooked.warden, "pay_2");
    let expected = format!("http://127.0.0.1:8080/warden/approval/{id}");
    let hooked_body = hook_bodies.recv_timeout(Duration::from_secs(10)).expect("the hook is called");
    assert_eq!(hooked_body["link"], expected.as_str(), "{hooked_body}");
    settled(&hooked.warden, &id);
    let posted: Value = serde_json::from_slice(&bodies.lock().unwrap()[0]).unwrap();
    assert_eq!(posted["link"], expected.as_str(), "{posted}");
    assert_eq!(posted["approval_id"], id.as_str());
}

#[test]
fn a_redirect_is_not_followed_and_is_not_retried() {
    let ca = TestCa::new();
    let server = Server::https(&ca.leaf(&["localhost"]), |mut conn, _| {
        conn.send(&response("302 Found", &[("location", "/elsewhere")], b""));
        Some(conn)
    });
    let hooked = open(server.https_url("localhost", "/hook").as_str(), &ca, "");
    let id = ask(&hooked.warden, "pay_2");
    let events = settled(&hooked.warden, &id);
    assert_eq!(events.len(), 1, "{events:?}");
    let failed = data(&events[0]);
    assert_eq!((failed["attempt"].as_u64(), failed["will_retry"].as_bool()), (Some(1), Some(false)));
    assert!(failed["error"].as_str().unwrap().contains("redirect"), "{failed}");
    assert_eq!(server.requests().iter().map(|r| r.target.clone()).collect::<Vec<_>>(), ["/hook"]);
}

#[test]
fn a_hanging_server_never_delays_the_action() {
    let ca = TestCa::new();
    let (arrived, seen_arrival) = mpsc::channel::<()>();
    let (release, hold) = mpsc::channel::<()>();
    let (arrived, hold) = (Mutex::new(arrived), Mutex::new(hold));
    let server = Server::https(&ca.leaf(&["localhost"]), move |conn, _| {
        let _ = arrived.lock().unwrap().send(());
        // Hold the connection, never answering, until the test lets go; then hang up.
        let _ = hold.lock().unwrap().recv_timeout(Duration::from_secs(60));
        conn.reset();
        None
    });
    let hooked = open(
        server.https_url("localhost", "/hook").as_str(),
        &ca,
        "    timeout_ms: 60000
    max_attempts: 1
",
    );
    let id = ask(&hooked.warden, "pay_3");
    // The proposal returned; the delivery is still held by the server, with nothing recorded.
    seen_arrival.recv_timeout(Duration::from_secs(30)).expect("the webhook was posted");
    assert!(notify_events(&hooked.warden, &id).is_empty());
    // Another action is not held up either.
    let other = ask(&hooked.warden, "pay_3b");
    assert_ne!(other, id);
    release.send(()).unwrap();
    let events = settled(&hooked.warden, &id);
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(data(&events[0])["will_retry"], false);
}

#[test]
fn each_attempt_against_a_silent_server_is_bounded_and_recorded() {
    let ca = TestCa::new();
    let server = Server::https(&ca.leaf(&["localhost"]), move |conn, _| {
        std::thread::sleep(Duration::from_secs(5));
        Some(conn)
    });
    let hooked = open(
        server.https_url("localhost", "/hook").as_str(),
        &ca,
        "    timeout_ms: 300
    max_attempts: 2
",
    );
    let id = ask(&hooked.warden, "pay_3");
    let events = settled(&hooked.warden, &id);
    let attempts: Vec<(u64, bool)> = events
        .iter()
        .map(|e| (data(e)["attempt"].as_u64().unwrap(), data(e)["will_retry"].as_bool().unwrap()))
        .collect();
    assert_eq!(attempts, [(1, true), (2, false)], "{events:?}");
    assert!(events.iter().all(|e| e.kind == EventKind::APPROVAL_NOTIFY_FAILED));
    assert!(data(&events[0])["error"].as_str().unwrap().contains("timeout"), "{events:?}");
}

#[test]
fn a_server_error_is_retried_with_backoff_until_delivered() {
    let ca = TestCa::new();
    let calls = Arc::new(Mutex::new(0));
    let counted = Arc::clone(&calls);
    let server = Server::https(&ca.leaf(&["localhost"]), move |mut conn, _| {
        let mut calls = counted.lock().unwrap();
        *calls += 1;
        let status = if *calls == 1 { "503 Service Unavailable" } else { "200 OK" };
        conn.send(&response(status, &[], b"{}"));
        Some(conn)
    });
    let hooked = open(server.https_url("localhost", "/hook").as_str(), &ca, "");
    let id = ask(&hooked.warden, "pay_4");
    let events = settled(&hooked.warden, &id);
    let kinds: Vec<EventKind> = events.iter().map(|e| e.kind).collect();
    assert_eq!(kinds, [EventKind::APPROVAL_NOTIFY_FAILED, EventKind::APPROVAL_NOTIFIED], "{events:?}");
    assert_eq!(data(&events[0])["will_retry"], true);
    assert_eq!(data(&events[1])["attempt"], 2);
    assert_eq!(server.requests().len(), 2);
}

#[test]
fn a_missing_secret_sends_nothing_and_an_untrusted_certificate_is_refused() {
    let ca = TestCa::new();
    let server = Server::https(&ca.leaf(&["localhost"]), |mut conn, _| {
        conn.send(&response("200 OK", &[], b""));
        Some(conn)
    });
    let hooked = open(server.https_url("localhost", "/hook").as_str(), &ca, "");
    hooked.warden.notifier().set_credentials(Arc::new(CallbackProvider(|_: &str| None)));
    let id = ask(&hooked.warden, "pay_5");
    let events = settled(&hooked.warden, &id);
    assert_eq!(events.len(), 1);
    assert!(data(&events[0])["error"].as_str().unwrap().contains("APPROVAL_WEBHOOK_SECRET has no value"));
    assert!(server.requests().is_empty());

    let stranger = TestCa::new();
    let hooked = open(server.https_url("localhost", "/hook").as_str(), &stranger, "    max_attempts: 1\n");
    let id = ask(&hooked.warden, "pay_6");
    let events = settled(&hooked.warden, &id);
    assert!(data(&events[0])["error"].as_str().unwrap().contains("TLS"), "{events:?}");
    assert!(server.requests().is_empty(), "a request went out over an untrusted connection");
}

#[test]
fn the_secret_is_in_no_event_output_error_or_store_byte() {
    let ca = TestCa::new();
    let server = Server::https(&ca.leaf(&["localhost"]), |mut conn, seen| {
        let _ = support::read_body(&mut conn, seen);
        conn.send(&response("500 Internal Server Error", &[], SECRET.as_bytes()));
        Some(conn)
    });
    let hooked = open(server.https_url("localhost", "/hook").as_str(), &ca, "    max_attempts: 2\n");
    let id = ask(&hooked.warden, "pay_7");
    let events = settled(&hooked.warden, &id);
    assert_eq!(events.len(), 2, "{events:?}");
    let mut everything = format!("{:?}\n{:?}\n", hooked.warden.document(), hooked.warden.notifier());
    for event in hooked.warden.kernel().events(0, 1000).unwrap() {
        everything.push_str(&event.to_json().to_string());
    }
    everything.push_str(&hooked.warden.kernel().approval(&id).unwrap().unwrap().to_json().to_string());
    assert!(!everything.contains(SECRET), "the secret leaked:\n{everything}");
    hooked.warden.kernel().flush().unwrap();
    let bytes = std::fs::read(&hooked.path).unwrap();
    assert!(!bytes.windows(SECRET.len()).any(|w| w == SECRET.as_bytes()), "the secret is in the store file");
}
