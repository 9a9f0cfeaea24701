//! Anchors wired to checkpoints: the document's `evidence.anchors` make a handle's worker send
//! each checkpoint to a file and to a time-stamp authority (`openssl ts -reply` on loopback),
//! failures are kept and retried after their delay, `warden anchor` and `warden doctor` see
//! them, and a bundle carries the receipts for `verify-bundle` to check.

mod common;
#[path = "../src/evidence/tsa/local_tsa.rs"]
mod local_tsa;
mod support;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use common::{copy_dir, eventually, read_customers, store_location};
use local_tsa::{openssl_available, KeyKind, Pki};
use support::{response, Server};
use warden::clock::MICROS_PER_SECOND;
use warden::document::load_str;
use warden::evidence::anchor::{AnchorError, AnchorProvider, AnchorReceipt, FileSink, SignedCheckpoint};
use warden::evidence::anchoring::{AnchorTry, FIRST_RETRY_DELAY};
use warden::evidence::bundle::{export, verify_bundle, verify_bundle_with, ANCHORS_FILE};
use warden::evidence::key::NoteSigner;
use warden::evidence::tsa::TrustedTsa;
use warden::pipeline::{Warden, WardenOptions};
use warden::{Kernel, ManualClock};

const T0: i64 = 1_800_000_000 * MICROS_PER_SECOND;

fn key(dir: &Path) -> (PathBuf, NoteSigner) {
    let path = dir.join("evidence.key");
    let signer = NoteSigner::generate("warden.test/anchors").unwrap();
    signer.save(&path).unwrap();
    (path, signer)
}

fn document(key: &Path, anchors: &str) -> String {
    format!(
        "schema: warden/v1\nactions:\n  customer.read:\n    decision: allow\n\
         evidence:\n  key_file: {}\n  origin: warden.test/anchors\n  every_receipts: 1\n  every: PT1S\n  anchors:\n{anchors}",
        key.display()
    )
}

fn open(store: &Path, document: &str, clock: Option<&ManualClock>, automatic: bool) -> Warden {
    let mut options = WardenOptions { automatic_checkpoints: automatic, ..WardenOptions::default() };
    if let Some(clock) = clock {
        options.clock = Arc::new(clock.clone());
    }
    Warden::open(store, load_str(document, "test.yaml").unwrap(), options).unwrap()
}

/// A loopback TSA answering with `openssl ts -reply`; while `failing`, HTTP 503.
fn tsa(pki: &Arc<Pki>, failing: &Arc<AtomicBool>) -> Server {
    let (pki, failing) = (Arc::clone(pki), Arc::clone(failing));
    Server::http(move |mut conn, seen| {
        let query = support::read_body(&mut conn, seen);
        let reply = if failing.load(Ordering::SeqCst) {
            response("503 Service Unavailable", &[], b"down for maintenance")
        } else {
            response("200 OK", &[("content-type", "application/timestamp-reply")], &pki.reply(&query))
        };
        conn.send(&reply);
        None
    })
}

#[test]
fn a_running_handle_anchors_each_checkpoint_to_a_file_and_a_tsa_and_the_bundle_carries_them() {
    if !openssl_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (key_path, signer) = key(dir.path());
    let pki = Arc::new(Pki::new(KeyKind::Rsa, "anchors"));
    let server = tsa(&pki, &Arc::new(AtomicBool::new(false)));
    let tsa_cert = pki.path("tsa.pem");
    let anchor_file = dir.path().join("anchors.jsonl");
    let url = server.url("/tsr");
    let doc = document(
        &key_path,
        &format!(
            "    - file: {}\n    - rfc3161: {url}\n      tsa_cert: {}\n      timeout_ms: 20000\n",
            anchor_file.display(),
            tsa_cert.display()
        ),
    );
    let store = store_location(dir.path());
    let warden = open(&store, &doc, None, true);
    let kernel = warden.kernel().clone();
    let sinks = vec![format!("file {}", anchor_file.display()), format!("rfc3161 {url}")];
    let both_have_the_last = || {
        let Some(last) = kernel.checkpoint_numbered(None).unwrap() else { return false };
        kernel.anchor_states(&sinks).unwrap().iter().all(|state| state.last_anchored == Some(last.number))
    };
    read_customers(&warden, 2);
    eventually("the first checkpoint anchored by both sinks", both_have_the_last);
    read_customers(&warden, 2);
    let size = kernel.receipt_count().unwrap();
    eventually("every receipt checkpointed and anchored", || {
        kernel.checkpoint_numbered(None).unwrap().is_some_and(|last| last.size == size) && both_have_the_last()
    });
    let status = warden.checkpointer().unwrap().status();
    assert!(status.anchored >= 2 && status.anchor_error.is_none(), "{status:?}");
    let last = kernel.checkpoint_numbered(None).unwrap().unwrap();
    drop(kernel);
    drop(warden);

    // The file sink's lines: one per checkpoint it was sent, each the note's own line.
    let reopened = open(&store, &doc, None, false);
    let kernel = reopened.kernel();
    let rows = kernel.anchors(1, last.number).unwrap();
    for row in rows.iter().filter(|row| row.sink.starts_with("file ")) {
        let checkpoint = kernel.checkpoint_numbered(Some(row.checkpoint)).unwrap().unwrap();
        let line = FileSink::line(&SignedCheckpoint {
            note: checkpoint.note.as_bytes(),
            size: checkpoint.size,
            number: checkpoint.number,
        })
        .unwrap();
        let kept = String::from_utf8(row.receipt_bytes().unwrap()).unwrap();
        assert_eq!(kept, line.trim_end(), "the receipt is the line without its newline");
        assert!(std::fs::read_to_string(&anchor_file).unwrap().contains(&line), "the file holds the line too");
    }
    // Each token verifies offline against the TSA's certificate, and with openssl.
    let tokens: Vec<_> = rows.iter().filter(|row| row.kind.as_deref() == Some("rfc3161")).collect();
    assert!(!tokens.is_empty(), "{rows:?}");
    for row in &tokens {
        let note = kernel.checkpoint_numbered(Some(row.checkpoint)).unwrap().unwrap().note;
        let token = row.receipt_bytes().unwrap();
        warden::evidence::tsa::verify(&token, note.as_bytes(), &pki.tsa_pem()).expect("the token verifies");
        pki.openssl_verifies(&token, note.as_bytes()).expect("openssl ts -verify agrees");
    }

    // The bundle carries them; verify-bundle checks the file lines always and the tokens given
    // the TSA's certificate.
    let bundle = dir.path().join("bundle");
    let exported = export(kernel, &bundle, None, None).unwrap();
    assert_eq!(exported.anchors, rows.iter().filter(|row| row.anchored()).count() as u64);
    let trusted = [signer.verifier()];
    let tsa = TrustedTsa::parse(&pki.tsa_pem()).unwrap();
    let plain = verify_bundle(&bundle, &trusted);
    assert!(plain.ok, "{plain:?}");
    assert_eq!(plain.anchors, exported.anchors);
    assert_eq!(plain.anchors_checked, exported.anchors - tokens.len() as u64, "tokens unchecked without the TSA");
    let pinned = verify_bundle_with(&bundle, &trusted, std::slice::from_ref(&tsa));
    assert!(pinned.ok && pinned.anchors_checked == exported.anchors, "{pinned:?}");

    // An anchor line edited, or a token damaged, is anchor_invalid.
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(bundle.join(ANCHORS_FILE))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let rewrite = |name: &str, edit: &dyn Fn(&mut serde_json::Value) -> bool| -> PathBuf {
        let copy = dir.path().join(name);
        copy_dir(&bundle, &copy);
        let mut edited = false;
        let text: String = lines
            .iter()
            .map(|line| {
                let mut line = line.clone();
                if !edited {
                    edited = edit(&mut line);
                }
                format!("{line}\n")
            })
            .collect();
        assert!(edited, "{name}: nothing to edit");
        std::fs::write(copy.join(ANCHORS_FILE), text).unwrap();
        copy
    };
    let b64 = |bytes: &[u8]| base64::Engine::encode(&base64::prelude::BASE64_STANDARD, bytes);
    let unb64 = |text: &str| base64::Engine::decode(&base64::prelude::BASE64_STANDARD, text).unwrap();
    let other_line = rewrite("other-line", &|line| {
        if line["kind"] != "file" {
            return false;
        }
        let mut text = String::from_utf8(unb64(line["receipt"].as_str().unwrap())).unwrap();
        text = text.replacen("\"size\":", "\"size\":1", 1);
        line["receipt"] = b64(text.as_bytes()).into();
        true
    });
    let verdict = verify_bundle(&other_line, &trusted);
    assert_eq!(verdict.reason.as_deref(), Some("anchor_invalid"), "{verdict:?}");
    let bad_token = rewrite("bad-token", &|line| {
        if line["kind"] != "rfc3161" {
            return false;
        }
        let mut token = unb64(line["receipt"].as_str().unwrap());
        let at = token.len() - 10;
        token[at] ^= 1;
        line["receipt"] = b64(&token).into();
        true
    });
    assert!(verify_bundle(&bad_token, &trusted).ok, "unchecked without the TSA's certificate");
    let verdict = verify_bundle_with(&bad_token, &trusted, std::slice::from_ref(&tsa));
    assert_eq!(verdict.reason.as_deref(), Some("anchor_invalid"), "{verdict:?}");
    let elsewhere = rewrite("elsewhere", &|line| {
        line["checkpoint"] = 999.into();
        true
    });
    assert_eq!(verify_bundle(&elsewhere, &trusted).reason.as_deref(), Some("bundle_malformed"));
    let moved = rewrite("moved", &|line| {
        if line["kind"] != "rfc3161" || line["checkpoint"] == 1 {
            return false;
        }
        line["checkpoint"] = 1.into();
        true
    });
    let verdict = verify_bundle_with(&moved, &trusted, std::slice::from_ref(&tsa));
    assert_eq!(verdict.reason.as_deref(), Some("anchor_invalid"), "a token for another checkpoint: {verdict:?}");
    drop(server);
}

/// A provider whose answers the test sets: it fails while `failing`, and counts its calls.
struct Scripted {
    failing: AtomicBool,
    calls: AtomicUsize,
    seen: Mutex<Vec<u64>>,
}

/// The provider the kernel is handed: the test keeps the script.
struct Shared(Arc<Scripted>);

impl AnchorProvider for Shared {
    fn name(&self) -> String {
        "scripted".into()
    }
    fn anchor(&self, checkpoint: &SignedCheckpoint<'_>) -> Result<Option<AnchorReceipt>, AnchorError> {
        self.0.calls.fetch_add(1, Ordering::SeqCst);
        self.0.seen.lock().unwrap().push(checkpoint.number);
        if self.0.failing.load(Ordering::SeqCst) {
            return Err(AnchorError { sink: self.name(), code: "timeout".into(), message: "it timed out".into() });
        }
        Ok(Some(AnchorReceipt { kind: "scripted".into(), bytes: vec![7], description: "kept".into() }))
    }
}

fn pass(kernel: &Kernel, provider: &Arc<Scripted>, force: bool) -> Vec<AnchorTry> {
    let boxed: Arc<dyn AnchorProvider> = Arc::new(Shared(Arc::clone(provider)));
    kernel.anchor_pending(&[("scripted".to_owned(), Ok(boxed))], force).unwrap()
}

#[test]
fn a_failed_anchor_waits_its_delay_a_new_sink_starts_at_the_newest_and_a_failing_sink_stops_its_pass() {
    let dir = tempfile::tempdir().unwrap();
    let (key_path, signer) = key(dir.path());
    let clock = ManualClock::new(T0);
    let doc = document(&key_path, "    - file: /nonexistent/never-used.jsonl\n");
    let warden = open(&store_location(dir.path()), &doc, Some(&clock), false);
    let kernel = warden.kernel();
    let provider = Arc::new(Scripted { failing: AtomicBool::new(true), calls: 0.into(), seen: Mutex::default() });
    assert!(pass(kernel, &provider, false).is_empty(), "no checkpoint, nothing to send");
    for _ in 0..3 {
        read_customers(&warden, 1);
        kernel.checkpoint(&signer, None).unwrap();
    }
    // A sink that never anchored starts at the newest checkpoint.
    let tries = pass(kernel, &provider, false);
    assert_eq!(tries.len(), 1);
    assert_eq!((tries[0].row.checkpoint, tries[0].row.attempts, tries[0].row.anchored()), (3, 1, false));
    assert_eq!(tries[0].error.as_ref().map(|e| e.code.as_str()), Some("timeout"));
    assert_eq!(tries[0].row.error_code.as_deref(), Some("timeout"));
    // Not again before its delay; at the instant it is due.
    clock.advance(FIRST_RETRY_DELAY - 1);
    assert!(pass(kernel, &provider, false).is_empty(), "one microsecond early");
    clock.advance(1);
    let tries = pass(kernel, &provider, false);
    assert_eq!((tries.len(), tries[0].row.attempts), (1, 2));
    // The second failure doubles the delay; forced, it is tried now.
    clock.advance(FIRST_RETRY_DELAY);
    assert!(pass(kernel, &provider, false).is_empty(), "the delay doubled");
    provider.failing.store(false, Ordering::SeqCst);
    let tries = pass(kernel, &provider, true);
    assert_eq!((tries.len(), tries[0].row.attempts, tries[0].row.anchored()), (1, 3, true));
    assert_eq!(tries[0].row.receipt_bytes(), Some(vec![7]));
    // Anchored: nothing waits, and later checkpoints each follow in order.
    assert!(pass(kernel, &provider, true).is_empty());
    for _ in 0..2 {
        read_customers(&warden, 1);
        kernel.checkpoint(&signer, None).unwrap();
    }
    let tries = pass(kernel, &provider, false);
    assert_eq!(tries.iter().map(|t| t.row.checkpoint).collect::<Vec<_>>(), [4, 5]);
    assert_eq!(*provider.seen.lock().unwrap(), [3, 3, 3, 4, 5]);
    let states = kernel.anchor_states(&["scripted".into()]).unwrap();
    assert_eq!((states[0].last_anchored, states[0].waiting.len()), (Some(5), 0));
    provider.failing.store(true, Ordering::SeqCst);
    // A sink that fails stops for the pass at its first failure.
    for _ in 0..2 {
        read_customers(&warden, 1);
        kernel.checkpoint(&signer, None).unwrap();
    }
    let calls = provider.calls.load(Ordering::SeqCst);
    let tries = pass(kernel, &provider, false);
    assert_eq!((tries.len(), tries[0].row.checkpoint), (1, 6), "{tries:?}");
    assert_eq!(provider.calls.load(Ordering::SeqCst), calls + 1);
    // A provider that could not be built records its failure on what it would have been sent.
    let missing =
        AnchorError { sink: "scripted".into(), code: "credential_missing".into(), message: "no token".into() };
    let tries = kernel.anchor_pending(&[("scripted".to_owned(), Err(missing))], true).unwrap();
    assert_eq!(tries[0].row.error_code.as_deref(), Some("credential_missing"));
    assert_eq!(tries[0].row.attempts, 2);
}

#[test]
fn warden_anchor_and_doctor_report_a_failing_tsa_and_a_missing_credential_then_the_retry() {
    let probe = tempfile::tempdir().unwrap();
    if !openssl_available() || store_location(probe.path()).starts_with("memory:") {
        return; // another process reaches a file or PostgreSQL store only
    }
    let dir = tempfile::tempdir().unwrap();
    let (key_path, signer) = key(dir.path());
    let pki = Arc::new(Pki::new(KeyKind::P256, "cli"));
    let failing = Arc::new(AtomicBool::new(true));
    let server = tsa(&pki, &failing);
    let witness_seen = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&witness_seen);
    let witness = Server::http(move |mut conn, request| {
        let _ = support::read_body(&mut conn, request);
        seen.lock().unwrap().push(request.header("x-witness-token").unwrap_or("").to_owned());
        conn.send(&response("200 OK", &[], b""));
        None
    });
    let url = server.url("/tsr");
    let witness_url = witness.url("/add");
    let doc = document(
        &key_path,
        &format!(
            "    - rfc3161: {url}\n    - http: {witness_url}\n      header: X-Witness-Token\n      header_ref: WARDEN_TEST_WITNESS_TOKEN\n"
        ),
    );
    let doc_path = dir.path().join("warden.yaml");
    std::fs::write(&doc_path, &doc).unwrap();
    let store = store_location(dir.path());
    {
        let warden = open(&store, &doc, None, false);
        read_customers(&warden, 2);
        warden.kernel().checkpoint(&signer, None).unwrap();
    }
    let cli = |args: &[&str], token: Option<&str>| {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_warden"));
        command.arg("--store").arg(&store).arg("--config").arg(&doc_path).args(args);
        match token {
            Some(token) => command.env("WARDEN_TEST_WITNESS_TOKEN", token),
            None => command.env_remove("WARDEN_TEST_WITNESS_TOKEN"),
        };
        let out = command.output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, stdout, stderr) = cli(&["anchor", "--json"], None);
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    let tries: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let codes: Vec<&str> = tries["tries"].as_array().unwrap().iter().map(|t| t["code"].as_str().unwrap()).collect();
    assert_eq!(codes, ["upstream_error", "credential_missing"], "{stdout}");
    assert!(stderr.contains("anchor rfc3161"), "{stderr}");
    assert!(witness_seen.lock().unwrap().is_empty(), "nothing is sent without the credential");

    let (code, stdout, _) = cli(&["doctor"], None);
    assert_eq!(code, Some(0), "failing anchors are no damage: {stdout}");
    assert!(stdout.contains(&format!("anchor           rfc3161 {url}: no checkpoint anchored yet")), "{stdout}");
    assert!(
        stdout.contains("WARNING: anchoring checkpoint 1 to rfc3161") && stdout.contains("(upstream_error)"),
        "{stdout}"
    );
    assert!(stdout.contains("WARDEN_TEST_WITNESS_TOKEN"), "the reference is named: {stdout}");
    let (_, stdout, _) = cli(&["doctor", "--json"], None);
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["anchors"][0]["failing"]["attempts"], 1, "{report}");
    assert_eq!(report["anchors"][1]["failing"]["code"], "credential_missing", "{report}");

    // The TSA is back and the credential is given: `warden anchor` sends both now.
    failing.store(false, Ordering::SeqCst);
    let (code, stdout, stderr) = cli(&["anchor"], Some("s3cr3t-witness-token"));
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("checkpoint 1 → rfc3161") && stdout.contains("anchored (try 2)"), "{stdout}");
    assert!(!stdout.contains("s3cr3t") && !stderr.contains("s3cr3t"), "{stdout}{stderr}");
    assert_eq!(*witness_seen.lock().unwrap(), ["s3cr3t-witness-token"], "the header carried the credential");
    let (code, stdout, _) = cli(&["anchor"], Some("s3cr3t-witness-token"));
    assert_eq!(code, Some(0));
    assert!(stdout.starts_with("nothing to anchor"), "{stdout}");
    let (_, stdout, _) = cli(&["doctor"], None);
    assert!(stdout.contains(&format!("anchor           rfc3161 {url}: checkpoint 1, the last, anchored")), "{stdout}");
    assert!(!stdout.contains("WARNING"), "{stdout}");

    // The bundle's token checks out through the CLI with --tsa-cert.
    let bundle = dir.path().join("bundle");
    let (code, _, stderr) = cli(&["export", "--out", bundle.to_str().unwrap()], None);
    assert_eq!(code, Some(0), "{stderr}");
    let tsa_cert = pki.path("tsa.pem");
    let (code, stdout, stderr) =
        cli(&["verify-bundle", bundle.to_str().unwrap(), "--tsa-cert", tsa_cert.to_str().unwrap(), "--json"], None);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let verdict: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!((verdict["anchors"].as_u64(), verdict["anchors_checked"].as_u64()), (Some(2), Some(1)), "{verdict}");
    let (_, stdout, _) = cli(&["verify-bundle", bundle.to_str().unwrap()], None);
    assert!(stdout.contains("anchor receipts: 2, 2 not checked"), "{stdout}");
    drop((server, witness));
}
