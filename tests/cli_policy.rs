//! The `warden` binary's document commands (`init`, `check`, `decide`, `verify`) and the
//! operator commands that came with them (`approve --ttl`, `inspect`), driven as a user would.
//! Stores are set up through the library (`warden::pipeline::Warden`) in temporary directories.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};
use warden::document::load_str;
use warden::pipeline::{ActionRequest, Warden, WardenOptions};
use warden::{Error, Principal};

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

/// Runs the binary in `cwd` with only the `WARDEN_*` variables given in `env` (never the
/// test's own).
fn warden_in(cwd: &Path, args: &[&str], env: &[(&str, &Path)]) -> Run {
    let mut command = Command::new(env!("CARGO_BIN_EXE_warden"));
    command.args(args).current_dir(cwd).env_remove("WARDEN_STORE").env_remove("WARDEN_CONFIG");
    for (name, value) in env {
        command.env(name, value);
    }
    let output = command.output().expect("run warden");
    Run {
        code: output.status.code().expect("warden exited by a signal"),
        stdout: String::from_utf8(output.stdout).expect("stdout is UTF-8"),
        stderr: String::from_utf8(output.stderr).expect("stderr is UTF-8"),
    }
}

/// Exactly one JSON document on stdout.
fn one_document(run: &Run) -> Value {
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}):\n{run}"))
}

fn keys(value: &Value) -> Vec<&str> {
    let mut keys: Vec<&str> = value.as_object().expect("an object").keys().map(String::as_str).collect();
    keys.sort_unstable();
    keys
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|entry| entry.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn is_policy_hash(text: &str) -> bool {
    text.strip_prefix("sha256:").is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// A temporary directory holding the starter document written by `warden init`.
struct Initialized {
    dir: tempfile::TempDir,
}

impl Initialized {
    fn new() -> Initialized {
        let dir = tempfile::tempdir().expect("tempdir");
        let run = warden_in(dir.path(), &["init"], &[]);
        assert_eq!(run.code, 0, "{run}");
        Initialized { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn config(&self) -> PathBuf {
        self.dir.path().join("warden.yaml")
    }

    fn run(&self, args: &[&str]) -> Run {
        warden_in(self.path(), args, &[])
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, text).expect("write document");
        path
    }
}

// ---- init and check ----------------------------------------------------------------------------

#[test]
fn init_writes_a_document_that_check_accepts() {
    let s = Initialized::new();
    assert_eq!(files_in(s.path()), ["warden.yaml"]);
    let text = std::fs::read_to_string(s.config()).expect("read warden.yaml");
    assert!(text.starts_with('#'), "the starter is commented:\n{text}");
    let doc = load_str(&text, "warden.yaml").expect("the starter loads");
    assert!(doc.warnings.is_empty(), "{:?}", doc.warnings);
    assert_eq!(
        doc.actions.keys().map(String::as_str).collect::<Vec<_>>(),
        ["customer.read", "email.send", "stripe.refund"]
    );
    let refund = &doc.actions["stripe.refund"];
    assert_eq!(refund.effect.as_ref().map(warden::Template::source), Some("refund:{payment_id}"));
    assert_eq!(refund.max_attempts, Some(3));
    assert_eq!(refund.lease, Some(300_000_000));
    assert_eq!(refund.rules.len(), 3);
    assert!(doc.actions["email.send"].effect.is_some());

    let run = s.run(&["check", "warden.yaml"]);
    assert_eq!(run.code, 0, "{run}");
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert!(lines[0].starts_with("OK "), "{run}");
    assert_eq!(lines[1], format!("policy hash: {}", doc.policy_hash), "{run}");
    assert!(is_policy_hash(&doc.policy_hash), "{run}");
    assert_eq!(lines.len(), 2, "no warnings: {run}");
    assert_eq!(run.stderr, "", "{run}");
}

#[test]
fn init_takes_a_path_and_reports_it_in_json() {
    let dir = tempfile::tempdir().unwrap();
    let run = warden_in(dir.path(), &["init", "policy/../my.yaml", "--json"], &[]);
    // `policy/` does not exist, so the path cannot be created: a usage error, nothing written.
    assert_eq!(run.code, 2, "{run}");
    assert_eq!(one_document(&run)["error"]["reason"], "usage", "{run}");
    let run = warden_in(dir.path(), &["init", "my.yaml", "--json"], &[]);
    assert_eq!(run.code, 0, "{run}");
    let report = one_document(&run);
    assert_eq!(keys(&report), ["path", "policy_hash"], "{run}");
    assert_eq!(report["path"], "my.yaml");
    let check = one_document(&warden_in(dir.path(), &["check", "my.yaml", "--json"], &[]));
    assert_eq!(check["policy_hash"], report["policy_hash"]);
}

#[test]
fn init_refuses_to_overwrite_an_existing_file_unless_forced() {
    let s = Initialized::new();
    std::fs::write(s.config(), "# mine\n").unwrap();
    let run = s.run(&["init"]);
    assert_eq!(run.code, 1, "{run}");
    assert!(run.stderr.starts_with("warden: warden.yaml already exists"), "{run}");
    assert!(run.stderr.contains("--force"), "{run}");
    assert_eq!(std::fs::read_to_string(s.config()).unwrap(), "# mine\n", "the file was touched");
    let json = s.run(&["init", "--json"]);
    assert_eq!((json.code, one_document(&json)["error"]["reason"].as_str()), (1, Some("exists")), "{json}");

    let forced = s.run(&["init", "--force"]);
    assert_eq!(forced.code, 0, "{forced}");
    assert!(std::fs::read_to_string(s.config()).unwrap().contains("schema: warden/v1"));
}

#[test]
fn check_refuses_a_duplicate_key_and_names_the_line() {
    let s = Initialized::new();
    s.write("dup.yaml", "schema: warden/v1\nactions:\n  customer.read:\n    decision: allow\n    decision: deny\n");
    let run = s.run(&["check", "dup.yaml"]);
    assert_eq!(run.code, 2, "{run}");
    assert_eq!(run.stdout, "", "{run}");
    assert!(run.stderr.starts_with("warden: dup.yaml:5: "), "{run}");
    assert!(run.stderr.contains("duplicate key 'decision'"), "{run}");
    assert_eq!(run.stderr.lines().count(), 1, "{run}");
}

/// `check` on what is not a regular file is refused by what it is, at once: a FIFO nobody
/// writes made `open` itself wait forever. The child is given 20 s and killed past that, so a
/// hang fails the test instead of stalling the suite.
#[test]
fn check_refuses_a_fifo_a_directory_and_a_device_by_name_without_waiting() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join("policy.yaml");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("run mkfifo");
    assert!(made.success(), "mkfifo failed");
    let sub = dir.path().join("policies");
    std::fs::create_dir(&sub).expect("mkdir");
    for (path, what) in
        [(fifo.as_path(), "a named pipe (FIFO)"), (sub.as_path(), "a directory"), (Path::new("/dev/null"), "a device")]
    {
        let mut child = Command::new(env!("CARGO_BIN_EXE_warden"))
            .arg("check")
            .arg(path)
            .env_remove("WARDEN_CONFIG")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn warden");
        let started = std::time::Instant::now();
        while child.try_wait().expect("wait").is_none() {
            if started.elapsed() > std::time::Duration::from_secs(20) {
                let _ = child.kill();
                let _ = child.wait();
                panic!("warden check {} did not return within 20 s", path.display());
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let output = child.wait_with_output().expect("output");
        let stderr = String::from_utf8(output.stderr).expect("UTF-8");
        assert_eq!(output.status.code(), Some(2), "{}: {stderr}", path.display());
        assert!(
            stderr.contains(&format!("the document could not be read: it is {what}, not a regular file")),
            "{}: {stderr}",
            path.display()
        );
    }
}

#[test]
fn check_refuses_an_unknown_key_and_names_the_line() {
    let s = Initialized::new();
    s.write("unknown.yaml", "schema: warden/v1\nactions:\n  customer.read:\n    decision: allow\n    colour: red\n");
    let run = s.run(&["check", "unknown.yaml"]);
    assert_eq!(run.code, 2, "{run}");
    assert!(
        run.stderr.starts_with("warden: unknown.yaml:5: actions.customer.read.colour: unknown key 'colour'"),
        "{run}"
    );

    let json = s.run(&["check", "unknown.yaml", "--json"]);
    assert_eq!(json.code, 2, "{json}");
    let report = one_document(&json);
    assert_eq!(keys(&report), ["error", "ok", "policy_hash", "warnings"], "{json}");
    assert_eq!(
        (report["ok"].as_bool(), &report["policy_hash"], &report["warnings"]),
        (Some(false), &Value::Null, &json!([]))
    );
    assert!(report["error"].as_str().is_some_and(|e| e.starts_with("unknown.yaml:5: ")), "{json}");
}

#[test]
fn check_json_has_ok_the_policy_hash_and_every_warning() {
    let s = Initialized::new();
    let run = s.run(&["check", "warden.yaml", "--json"]);
    assert_eq!(run.code, 0, "{run}");
    let report = one_document(&run);
    assert_eq!(keys(&report), ["ok", "policy_hash", "warnings"], "{run}");
    assert_eq!(report["ok"], true);
    assert!(report["policy_hash"].as_str().is_some_and(is_policy_hash), "{run}");
    assert_eq!(report["warnings"], json!([]));

    // A write-sounding action with no effect key loads, with a warning in both outputs.
    s.write("warn.yaml", "schema: warden/v1\nactions:\n  db.delete:\n    decision: allow\n");
    let report = one_document(&s.run(&["check", "warn.yaml", "--json"]));
    assert_eq!(report["ok"], true);
    let warnings = report["warnings"].as_array().expect("warnings");
    assert_eq!(warnings.len(), 1, "{report}");
    assert!(warnings[0].as_str().is_some_and(|w| w.starts_with("actions.db.delete: ")), "{report}");
    let human = s.run(&["check", "warn.yaml"]);
    assert_eq!(human.code, 0, "{human}");
    assert!(human.stdout.lines().nth(2).is_some_and(|l| l.starts_with("warning: actions.db.delete: ")), "{human}");
}

#[test]
fn check_falls_back_to_config_and_warden_config() {
    let s = Initialized::new();
    let config = s.config();
    let by_flag = s.run(&["check", "--config", config.to_str().unwrap()]);
    assert_eq!(by_flag.code, 0, "{by_flag}");
    let by_env = warden_in(s.path(), &["check"], &[("WARDEN_CONFIG", &config)]);
    assert_eq!((by_env.code, by_env.stdout.lines().nth(1)), (0, by_flag.stdout.lines().nth(1)), "{by_env}");
    let none = s.run(&["check"]);
    assert_eq!(none.code, 2, "{none}");
    assert!(none.stderr.contains("set WARDEN_CONFIG"), "{none}");
    let missing = s.run(&["check", "missing.yaml"]);
    assert_eq!(missing.code, 2, "{missing}");
    assert!(missing.stderr.starts_with("warden: missing.yaml: "), "{missing}");
}

// ---- decide ------------------------------------------------------------------------------------

#[test]
fn decide_gives_ctrlruns_reasons() {
    let s = Initialized::new();
    let cases = [
        ("stripe.refund", r#"{"payment_id": "pay_1", "amount": 1200}"#, "allow", "rule[0]"),
        ("stripe.refund", r#"{"payment_id": "pay_1", "amount": 120000}"#, "approve", "rule[1]"),
        ("stripe.refund", r#"{"payment_id": "pay_1", "amount": 900000}"#, "deny", "rule[2]"),
        ("db.drop", "{}", "deny", "unknown_action"),
        ("customer.read", r#"{"customer_id": "c1"}"#, "allow", "decision"),
    ];
    for (action, args, decision, reason) in cases {
        let run = s.run(&["decide", "warden.yaml", "--action", action, "--args", args, "--json"]);
        assert_eq!(run.code, 0, "{action} {args}: {run}");
        let report = one_document(&run);
        assert_eq!(keys(&report), ["decision", "reason", "warnings"], "{run}");
        assert_eq!(report, json!({"decision": decision, "reason": reason, "warnings": []}), "{action} {args}");
        let human = s.run(&["decide", "warden.yaml", "--action", action, "--args", args]);
        assert_eq!(human.code, 0, "{human}");
        assert_eq!(human.stdout.lines().next(), Some(format!("{decision} ({reason})").as_str()), "{human}");
    }
}

#[test]
fn decide_reports_what_the_evaluation_could_not_check() {
    let s = Initialized::new();
    let run = s.run(&[
        "decide",
        "--action",
        "stripe.refund",
        "--args",
        r#"{"payment_id": "p", "amount": "5"}"#,
        "--json",
        "--config",
        "warden.yaml",
    ]);
    assert_eq!(run.code, 0, "{run}");
    let report = one_document(&run);
    assert_eq!((report["decision"].as_str(), report["reason"].as_str()), (Some("deny"), Some("rule[2]")));
    let warnings = report["warnings"].as_array().expect("warnings");
    assert!(
        !warnings.is_empty() && warnings.iter().all(|w| w.as_str().is_some_and(|w| w.contains("is str, not a number"))),
        "{run}"
    );

    let human = s.run(&[
        "decide",
        "warden.yaml",
        "--action",
        "stripe.refund",
        "--args",
        r#"{"payment_id": "p1", "amount": 7}"#,
        "--agent",
        "bot",
        "--user",
        "ada",
    ]);
    assert_eq!(human.stdout, "allow (rule[0])\neffect key: refund:p1\n", "{human}");
}

#[test]
fn decide_writes_nothing() {
    let s = Initialized::new();
    let store = s.path().join("state.redb");
    for args in [
        &["decide", "warden.yaml", "--action", "stripe.refund", "--args", r#"{"payment_id": "p", "amount": 1}"#][..],
        &["decide", "warden.yaml", "--action", "stripe.refund", "--args", r#"{"payment_id": "p", "amount": 100000}"#],
        &["decide", "warden.yaml", "--action", "nope"],
    ] {
        let run = warden_in(s.path(), args, &[("WARDEN_STORE", &store)]);
        assert_eq!(run.code, 0, "{run}");
    }
    assert_eq!(files_in(s.path()), ["warden.yaml"], "decide created a file");
}

#[test]
fn decide_refuses_invalid_input_and_a_broken_document_with_exit_2() {
    let s = Initialized::new();
    for (args, needle) in [
        (
            &["decide", "warden.yaml", "--action", "stripe.refund", "--args", r#"{"amount": 1e400}"#][..],
            "beyond the range of a double",
        ),
        (&["decide", "warden.yaml", "--action", "stripe.refund", "--args", "[1]"], "--args must be a JSON object"),
        (&["decide", "warden.yaml", "--action", "stripe.refund", "--args", "{"], "--args: invalid JSON"),
        (&["decide", "warden.yaml", "--action", "a", "--agent", ""], "principal.agent"),
        (&["decide", "warden.yaml"], "--action"),
        (&["decide", "--action", "a"], "no document given"),
    ] {
        let run = s.run(args);
        assert_eq!(run.code, 2, "{args:?}: {run}");
        assert!(run.stderr.contains(needle), "{args:?}: {run}");
    }
    s.write("broken.yaml", "schema: warden/v1\nactions: [1]\n");
    let run = s.run(&["decide", "broken.yaml", "--action", "a", "--json"]);
    assert_eq!(run.code, 2, "{run}");
    assert_eq!(one_document(&run)["error"]["reason"], "configuration_invalid", "{run}");
    assert!(run.stderr.starts_with("warden: broken.yaml:2: "), "{run}");
}

// ---- verify --------------------------------------------------------------------------------------

#[test]
fn verify_passes_on_the_starter_document_with_a_line_per_guarantee() {
    let s = Initialized::new();
    let run = s.run(&["verify", "--config", "warden.yaml"]);
    assert_eq!(run.code, 0, "{run}");
    for id in 1..=11 {
        let prefix = format!("G{id} pass ");
        assert!(run.stdout.lines().any(|line| line.starts_with(&prefix)), "no line {prefix:?}:\n{run}");
    }
    assert!(run.stdout.contains("verify passed: 14 pass, 0 fail, 0 not applicable"), "{run}");
    assert!(run.stdout.contains("G4 pass  one winner among 8 OS processes"), "{run}");
    assert!(!run.stdout.contains("threads"), "G4 must race processes:\n{run}");
    assert_eq!(files_in(s.path()), ["warden.yaml"], "verify wrote next to the document");
}

#[test]
fn verify_json_is_one_report() {
    let s = Initialized::new();
    let config = s.config();
    let run = warden_in(s.path(), &["verify", "--json"], &[("WARDEN_CONFIG", &config)]);
    assert_eq!(run.code, 0, "{run}");
    let report = one_document(&run);
    assert_eq!(keys(&report), ["blind_spots", "guarantees", "ok", "policy_hash", "summary"], "{run}");
    assert_eq!(report["ok"], true);
    assert_eq!(report["summary"], json!({"pass": 14, "fail": 0, "not_applicable": 0}));
    let ids: Vec<&str> = report["guarantees"].as_array().unwrap().iter().filter_map(|g| g["id"].as_str()).collect();
    assert_eq!(ids, (1..=14).map(|i| format!("G{i}")).collect::<Vec<_>>());
    for g in report["guarantees"].as_array().unwrap() {
        assert_eq!(keys(g), ["detail", "id", "status", "title"]);
    }
    let check = one_document(&s.run(&["check", "warden.yaml", "--json"]));
    assert_eq!(report["policy_hash"], check["policy_hash"]);
}

#[test]
fn verify_refuses_an_observe_mode_document_with_exit_2() {
    let s = Initialized::new();
    let text = std::fs::read_to_string(s.config()).unwrap().replace("\nmode: enforce\n", "\nmode: observe\n");
    assert!(text.contains("\nmode: observe\n"));
    s.write("observe.yaml", &text);
    let run = s.run(&["verify", "--config", "observe.yaml"]);
    assert_eq!(run.code, 2, "{run}");
    assert!(run.stderr.contains("observe mode"), "{run}");
    let json = s.run(&["verify", "--config", "observe.yaml", "--json"]);
    assert_eq!(
        (json.code, one_document(&json)["error"]["reason"].as_str()),
        (2, Some("configuration_invalid")),
        "{json}"
    );
    s.write("broken.yaml", "schema: warden/v1\nschema: warden/v1\n");
    assert_eq!(s.run(&["verify", "broken.yaml"]).code, 2);
    assert_eq!(s.run(&["verify"]).code, 2);
}

#[test]
fn the_verify_child_is_hidden_and_reports_bad_arguments() {
    let s = Initialized::new();
    let help = s.run(&["--help"]);
    assert!(!help.stdout.contains(warden::verify::CHILD_SUBCOMMAND), "{help}");
    let run = s.run(&[warden::verify::CHILD_SUBCOMMAND, "only-one"]);
    assert_eq!(run.code, 1, "{run}");
    assert!(run.stderr.contains("usage: warden __verify-child SPEC INDEX"), "{run}");
}

#[test]
fn help_documents_the_exit_codes() {
    let run = warden_in(Path::new("."), &["--help"], &[]);
    assert_eq!(run.code, 0, "{run}");
    for line in ["0  ok", "1  refused, or a check failed", "2  usage or configuration error", "3  internal error"] {
        assert!(run.stdout.contains(line), "{line:?} missing:\n{run}");
    }
    for command in ["init", "check", "decide", "verify", "inspect", "approve", "deny"] {
        assert!(run.stdout.lines().any(|l| l.trim_start().starts_with(command)), "{command} missing:\n{run}");
    }
}

// ---- approve --ttl and inspect ---------------------------------------------------------------------

/// A store governed by the starter document: `refund:p1` committed (with its receipt) and one
/// pending approval for a larger refund.
struct Store {
    s: Initialized,
    warden: Warden,
    approval_id: String,
}

impl Store {
    fn new() -> Store {
        let s = Initialized::new();
        let warden = Warden::open_files(s.path().join("state.redb"), &s.config(), WardenOptions::default())
            .expect("open the store under the starter document");
        let ada = Principal::new("refund-agent", Some("ada")).unwrap();
        let small = ActionRequest::new("stripe.refund", json!({"payment_id": "p1", "amount": 1200}), ada.clone());
        warden.submit(&small).expect("permit").commit(&json!({"refund_id": "re_1"})).expect("commit");
        let big = ActionRequest::new("stripe.refund", json!({"payment_id": "p2", "amount": 120000}), ada);
        let approval_id = match warden.submit(&big) {
            Err(Error::ApprovalRequired { request_id, .. }) => request_id,
            other => panic!("expected an approval request, got {other:?}"),
        };
        Store { s, warden, approval_id }
    }

    fn run(&self, args: &[&str]) -> Run {
        let store = self.s.path().join("state.redb");
        warden_in(self.s.path(), args, &[("WARDEN_STORE", &store)])
    }

    fn receipt_id(&self) -> String {
        let receipts = self.warden.kernel().last_receipts(10).unwrap();
        let (_, receipt) = receipts.first().expect("a receipt");
        receipt.to_json()["receipt_id"].as_str().expect("receipt_id").to_owned()
    }
}

#[test]
fn approve_with_a_bad_ttl_is_a_usage_error_and_answers_nothing() {
    let store = Store::new();
    let id = store.approval_id.as_str();
    for ttl in ["15m", "PT1.5M", "P1M", "PT0S", ""] {
        let run = store.run(&["approve", id, "--by", "ops:bob", "--ttl", ttl]);
        assert_eq!(run.code, 2, "--ttl {ttl:?}: {run}");
        assert!(run.stderr.starts_with("warden: --ttl"), "{run}");
    }
    let json = store.run(&["approve", id, "--by", "ops:bob", "--ttl", "soon", "--json"]);
    assert_eq!((json.code, one_document(&json)["error"]["reason"].as_str()), (2, Some("usage")), "{json}");
    let record = store.warden.kernel().approval(id).unwrap().unwrap();
    assert_eq!(record.status.as_str(), "pending");
}

#[test]
fn approve_with_a_ttl_sets_the_window_and_by_is_required_with_no_default_from_the_environment() {
    let store = Store::new();
    let id = store.approval_id.as_str();
    let before = store.warden.kernel().approval(id).unwrap().unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_warden"));
    command
        .args(["approve", id, "--ttl", "P1D", "--json", "--yes"])
        .env("WARDEN_STORE", store.s.path().join("state.redb"))
        .env("USER", "grace");
    let output = command.output().expect("run warden");
    assert_eq!(output.status.code(), Some(2), "no silent default from $USER");
    assert!(String::from_utf8_lossy(&output.stderr).contains("--by"));
    let output = command.args(["--by", "grace"]).output().expect("run warden");
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    let record: Value = serde_json::from_slice(&output.stdout).expect("one JSON document");
    assert_eq!((record["status"].as_str(), record["approver"].as_str()), (Some("granted"), Some("cli:grace")));
    assert_eq!(
        (record["votes"][0]["user"].as_str(), record["votes"][0]["verified"].as_bool()),
        (Some("grace"), Some(false))
    );
    let after = store.warden.kernel().approval(id).unwrap().unwrap();
    assert!(after.expires_at > before.expires_at, "P1D outlives the 15-minute request window");
    assert!(after.expires_at - after.answered_at.unwrap() == 86_400_000_000, "{after:?}");

    let human = Store::new();
    let run = human.run(&["approve", &human.approval_id, "--by", "ops:bob", "--ttl", "PT10M", "--yes"]);
    assert_eq!(run.code, 0, "{run}");
    assert!(
        run.stdout.contains(&format!("\napproval {} granted by ops:bob, usable until ", human.approval_id)),
        "{run}"
    );
    let denied = Store::new();
    let run = denied.run(&["deny", &denied.approval_id, "--by", "grace", "--reason", "too large"]);
    assert_eq!(run.code, 0, "{run}");
    assert!(run.stdout.starts_with(&format!("approval {} denied by cli:grace", denied.approval_id)), "{run}");
}

#[test]
fn inspect_an_approval_shows_the_record_and_its_events() {
    let store = Store::new();
    let id = store.approval_id.as_str();
    let run = store.run(&["inspect", id, "--json"]);
    assert_eq!(run.code, 0, "{run}");
    let found = one_document(&run);
    assert_eq!(keys(&found), ["action_document", "approval", "events", "id", "kind", "receipts"], "{run}");
    assert_eq!((found["kind"].as_str(), found["id"].as_str()), (Some("approval"), Some(id)));
    assert_eq!(
        (found["approval"]["status"].as_str(), found["approval"]["action"].as_str()),
        (Some("pending"), Some("stripe.refund"))
    );
    let types: Vec<&str> = found["events"].as_array().unwrap().iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(types, ["APPROVAL_REQUESTED"], "{run}");

    store.warden.kernel().grant(id, "ops:bob").unwrap();
    let human = store.run(&["inspect", id]);
    assert_eq!(human.code, 0, "{human}");
    assert!(human.stdout.starts_with(&format!("approval {id} (granted, 1 of 1 grant(s), expires ")), "{human}");
    assert!(human.stdout.contains("vote:         granted by ops:bob (asserted)"), "{human}");
    assert!(human.stdout.contains("APPROVAL_REQUESTED") && human.stdout.contains("APPROVAL_GRANTED"), "{human}");
}

#[test]
fn inspect_an_effect_key_shows_the_record_its_events_and_its_receipts() {
    let store = Store::new();
    let run = store.run(&["inspect", "refund:p1", "--json"]);
    assert_eq!(run.code, 0, "{run}");
    let found = one_document(&run);
    assert_eq!(keys(&found), ["effect", "events", "id", "kind", "receipts"], "{run}");
    assert_eq!(found["kind"], "effect");
    assert_eq!((found["effect"]["state"].as_str(), found["effect"]["attempt"].as_u64()), (Some("committed"), Some(1)));
    let types: Vec<&str> = found["events"].as_array().unwrap().iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(types, ["EFFECT_RESERVED", "EXECUTION_STARTED", "EXECUTION_COMMITTED"], "{run}");
    let receipts = found["receipts"].as_array().unwrap();
    assert_eq!(receipts.len(), 1, "{run}");
    assert_eq!(
        (receipts[0]["effect_key"].as_str(), receipts[0]["result"].as_str()),
        (Some("refund:p1"), Some("committed"))
    );

    let human = store.run(&["inspect", "refund:p1"]);
    assert_eq!(human.code, 0, "{human}");
    assert!(human.stdout.starts_with("effect refund:p1\n"), "{human}");
    assert!(human.stdout.contains("\nevents (3):\n") && human.stdout.contains("\nreceipts (1):\n"), "{human}");
}

#[test]
fn inspect_a_receipt_id_shows_the_receipt() {
    let store = Store::new();
    let id = store.receipt_id();
    assert!(id.starts_with("rct_"), "{id}");
    let run = store.run(&["inspect", &id, "--json"]);
    assert_eq!(run.code, 0, "{run}");
    let found = one_document(&run);
    assert_eq!(keys(&found), ["id", "kind", "receipt"], "{run}");
    assert_eq!(found["kind"], "receipt");
    assert_eq!(
        (
            found["receipt"]["receipt_id"].as_str(),
            found["receipt"]["seq"].as_u64(),
            found["receipt"]["effect_key"].as_str()
        ),
        (Some(id.as_str()), Some(1), Some("refund:p1"))
    );
    assert!(found["receipt"]["hash"].as_str().is_some_and(is_policy_hash), "{run}");
    let human = store.run(&["inspect", &id]);
    assert!(human.stdout.starts_with(&format!("receipt {id} (seq 1)\n")), "{human}");
}

#[test]
fn inspect_of_something_unknown_exits_1() {
    let store = Store::new();
    for id in ["refund:nope", "apr_00000000000000000000000000000000", "rct_00000000000000000000000000000000"] {
        let run = store.run(&["inspect", id]);
        assert_eq!(run.code, 1, "{run}");
        assert!(run.stderr.starts_with(&format!("warden: nothing known about {id}; inspect takes ")), "{run}");
        assert_eq!(run.stderr.lines().count(), 1, "{run}");
        let json = store.run(&["inspect", id, "--json"]);
        assert_eq!((json.code, one_document(&json)["error"]["reason"].as_str()), (1, Some("not_found")), "{json}");
    }
    let missing = warden_in(store.s.path(), &["inspect", "refund:p1", "--store", "missing.redb"], &[]);
    assert_eq!(missing.code, 2, "{missing}");
}

#[test]
fn decide_evaluates_the_document_s_root_grants_before_policy() {
    let s = Initialized::new();
    let policy = std::fs::read_to_string(s.config()).unwrap();
    s.write(
        "granted.yaml",
        &format!("{policy}\nauthority:\n  grants:\n    - id: readers\n      subject: {{ agent: \"support-*\" }}\n      actions: [customer.read]\n"),
    );
    let args = ["decide", "granted.yaml", "--action", "customer.read", "--args", r#"{"customer_id": "c1"}"#, "--json"];
    let mut covered = args.to_vec();
    covered.extend(["--agent", "support-1"]);
    let report = one_document(&s.run(&covered));
    assert_eq!((report["decision"].as_str(), report["reason"].as_str()), (Some("allow"), Some("decision")));
    let mut stranger = args.to_vec();
    stranger.extend(["--agent", "billing-1"]);
    let run = s.run(&stranger);
    let report = one_document(&run);
    assert_eq!((report["decision"].as_str(), report["reason"].as_str()), (Some("deny"), Some("no_authority")), "{run}");
    assert!(report["warnings"][0].as_str().is_some_and(|w| w.contains("the policy alone says allow")), "{run}");
}
