//! Every id Warden prints works with `warden inspect`: the `act_` ids events and refusals name,
//! the `apr_` ids of approval requests, the `rct_` ids and `seq` numbers `warden receipts` lists,
//! and effect keys. Listings have a header and show their ids. The store is the default one
//! (`warden.redb` in the current directory), so no command here names it.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};
use warden::document::load_str;
use warden::pipeline::{ActionRequest, Warden, WardenOptions};
use warden::Principal;

const STARTER: &str = include_str!("../src/bin/warden/starter.yaml");

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl std::fmt::Display for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "exit {}\n--- stdout\n{}--- stderr\n{}", self.code, self.stdout, self.stderr)
    }
}

fn warden(cwd: &Path, args: &[&str]) -> Run {
    let output = Command::new(env!("CARGO_BIN_EXE_warden"))
        .args(args)
        .current_dir(cwd)
        .env_remove("WARDEN_STORE")
        .env_remove("WARDEN_CONFIG")
        .output()
        .expect("run warden");
    Run {
        code: output.status.code().expect("warden exited by a signal"),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

fn json_of(cwd: &Path, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    let run = warden(cwd, &all);
    assert_eq!(run.code, 0, "{args:?}: {run}");
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{args:?} printed no JSON document ({e}): {run}"))
}

/// A folder holding `warden.yaml` (the starter) and `warden.redb`: one committed refund, its
/// refused duplicate, and one refund waiting for approval. Returns the refusal's message too.
fn fixture() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("warden.yaml"), STARTER).expect("write");
    let document = load_str(STARTER, "starter").expect("the starter loads");
    let w = Warden::open(dir.path().join("warden.redb"), document, WardenOptions::default()).expect("open");
    let ada = Principal::new("agent-7", Some("ada")).expect("principal");
    let small = ActionRequest::new("stripe.refund", json!({"payment_id": "pay_1", "amount": 100}), ada.clone());
    w.submit(&small).expect("allowed").commit(&json!({"ok": true})).expect("commit");
    let refusal = match w.submit(&small) {
        Err(refused) if refused.is_refusal() => refused.to_string(),
        other => panic!("the duplicate was not refused: {other:?}"),
    };
    let large = ActionRequest::new("stripe.refund", json!({"payment_id": "pay_2", "amount": 120_000}), ada);
    assert!(w.submit(&large).is_err(), "the large refund needs an approval");
    drop(w);
    (dir, refusal)
}

/// The ids in a JSON listing's rows, under `field`.
fn ids(rows: &Value, field: &str) -> BTreeSet<String> {
    rows.as_array()
        .expect("a JSON array")
        .iter()
        .filter_map(|row| match &row[field] {
            Value::String(id) => Some(id.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        })
        .collect()
}

#[test]
fn every_id_a_listing_or_a_refusal_prints_is_found_by_inspect() {
    let (dir, refusal) = fixture();
    let cwd = dir.path();
    let receipts = json_of(cwd, &["receipts"]);
    let events = json_of(cwd, &["events"]);
    let pending = json_of(cwd, &["pending"]);
    let named_by_refusal = regex::Regex::new(r"act_[0-9a-f]{32}").expect("pattern");
    let refusal_action = named_by_refusal.find(&refusal).map(|m| m.as_str().to_owned());
    let refusal_action = refusal_action.unwrap_or_else(|| panic!("the refusal names no action id: {refusal}"));

    // (where the id was printed, the id, what inspect must say it is)
    let mut cases: Vec<(&str, String, &str)> = vec![("the duplicate's refusal", refusal_action, "action")];
    for (from, rows, field, kind) in [
        ("receipts: seq", &receipts, "seq", "receipt"),
        ("receipts: receipt_id", &receipts, "receipt_id", "receipt"),
        ("receipts: action_id", &receipts, "action_id", "action"),
        ("receipts: effect_key", &receipts, "effect_key", "effect"),
        ("events: action_id", &events, "action_id", "action"),
        ("events: effect_key", &events, "effect_key", "effect"),
        ("events: approval_id", &events, "approval_id", "approval"),
        ("pending: approval_id", &pending, "approval_id", "approval"),
    ] {
        let found = ids(rows, field);
        assert!(!found.is_empty(), "{from}: the fixture prints no such id:\n{rows:#}");
        cases.extend(found.into_iter().map(|id| (from, id, kind)));
    }
    for (from, id, kind) in &cases {
        let shown = json_of(cwd, &["inspect", id]);
        assert_eq!(shown["kind"], *kind, "inspect {id} (printed by {from}):\n{shown:#}");
        let human = warden(cwd, &["inspect", id]);
        assert_eq!(human.code, 0, "inspect {id} (printed by {from}): {human}");
        assert!(human.stdout.starts_with(&format!("{kind} ")) || *kind == "approval", "inspect {id}: {human}");
    }
    // A seq names the receipt with that seq, and the receipt it shows carries the seq.
    let first = &receipts[0];
    let by_seq = json_of(cwd, &["inspect", &first["seq"].to_string()]);
    assert_eq!(by_seq["receipt"]["receipt_id"], first["receipt_id"], "{by_seq:#}");
    // An action's view holds its events and the effect they name.
    let action = json_of(cwd, &["inspect", first["action_id"].as_str().expect("an action id")]);
    assert!(action["events"].as_array().is_some_and(|e| !e.is_empty()), "{action:#}");
    assert_eq!(action["effects"][0]["effect_key"], first["effect_key"], "{action:#}");
}

#[test]
fn an_id_nothing_names_is_exit_1_and_the_message_says_what_inspect_takes() {
    let (dir, _) = fixture();
    for id in ["act_00000000000000000000000000000000", "rct_00000000000000000000000000000000", "999", "refund:nobody"] {
        let run = warden(dir.path(), &["inspect", id]);
        assert_eq!(run.code, 1, "inspect {id}: {run}");
        assert!(run.stderr.contains(&format!("nothing known about {id}")), "{run}");
        assert!(run.stderr.contains("act_") && run.stderr.contains("seq"), "the message lists the accepted ids: {run}");
    }
}

#[test]
fn listings_print_a_header_and_the_ids_inspect_takes() {
    let (dir, _) = fixture();
    // (command, its header's first column, a column that holds an id inspect takes)
    let cases: &[(&[&str], &str, &str)] = &[
        (&["effects"], "KEY", "KEY"),
        (&["receipts"], "SEQ", "RECEIPT"),
        (&["events"], "ID", "ACTION_ID"),
        (&["pending"], "APPROVAL", "APPROVAL"),
    ];
    for (args, first, id_column) in cases {
        let run = warden(dir.path(), args);
        assert_eq!(run.code, 0, "{args:?}: {run}");
        let header: Vec<&str> = run.stdout.lines().next().unwrap_or_default().split_whitespace().collect();
        assert_eq!(header.first(), Some(first), "{args:?}: {run}");
        let column =
            header.iter().position(|h| h == id_column).unwrap_or_else(|| panic!("{args:?}: no {id_column}: {run}"));
        let row: Vec<&str> = run.stdout.lines().nth(1).unwrap_or_default().split_whitespace().collect();
        let id = row.get(column).unwrap_or_else(|| panic!("{args:?}: no first row: {run}"));
        let shown = warden(dir.path(), &["inspect", id]);
        assert_eq!(shown.code, 0, "{args:?} printed {id}, which inspect does not take: {shown}");
    }
}

#[test]
fn the_default_store_is_warden_redb_in_the_current_directory() {
    let (dir, _) = fixture();
    let run = warden(dir.path(), &["effects"]);
    assert_eq!(run.code, 0, "{run}");
    assert!(run.stdout.contains("refund:pay_1"), "{run}");
    let empty = tempfile::tempdir().expect("tempdir");
    let run = warden(empty.path(), &["effects"]);
    assert_eq!(run.code, 2, "{run}");
    assert!(run.stderr.starts_with("warden: no store at warden.redb; "), "{run}");
    assert_eq!(std::fs::read_dir(empty.path()).expect("read").count(), 0, "a read command created a store");
}
