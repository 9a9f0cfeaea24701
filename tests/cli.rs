//! The `warden` binary, driven as a user would: arguments, stdin, stdout, stderr and exit code.
//! Store commands run against a store set up through the library in a temporary directory.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use warden::test_support::KernelInternals;

use serde_json::{json, Value};
use warden::store::EventKind;
use warden::{Action, Decision, Error, Kernel, KernelOptions, Principal, Proposal, Ruling, Template, TemplateMode};

const VECTORS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/vectors/ctrlrun-0.12.2/");

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

/// Runs the binary with `WARDEN_STORE` taken from `store_env` (never from the test's own
/// environment).
fn warden_with(args: &[&str], stdin: &str, store_env: Option<&Path>) -> Run {
    let mut command = Command::new(env!("CARGO_BIN_EXE_warden"));
    command
        .args(args)
        .env_remove("WARDEN_STORE")
        .env_remove("WARDEN_CONFIG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(path) = store_env {
        command.env("WARDEN_STORE", path);
    }
    let mut child = command.spawn().expect("spawn warden");
    child.stdin.take().expect("stdin").write_all(stdin.as_bytes()).expect("write stdin");
    let output = child.wait_with_output().expect("wait for warden");
    Run {
        code: output.status.code().expect("warden exited by a signal"),
        stdout: String::from_utf8(output.stdout).expect("stdout is UTF-8"),
        stderr: String::from_utf8(output.stderr).expect("stderr is UTF-8"),
    }
}

fn warden(args: &[&str], stdin: &str) -> Run {
    warden_with(args, stdin, None)
}

/// Exactly one JSON document on stdout.
fn one_document(run: &Run) -> Value {
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}):\n{run}"))
}

// ---- pure commands -----------------------------------------------------------------------------

struct Case {
    what: &'static str,
    args: &'static [&'static str],
    stdin: &'static str,
    code: i32,
    /// Exact stdout, when given.
    stdout: Option<&'static str>,
    /// Must appear in stderr (empty: stderr must be empty).
    stderr: &'static str,
}

const CASES: &[Case] = &[
    Case {
        what: "canonical sorts keys and drops whitespace",
        args: &["canonical"],
        stdin: r#"{"b":1,"a":[true,null]}"#,
        code: 0,
        stdout: Some("{\"a\":[true,null],\"b\":1}\n"),
        stderr: "",
    },
    Case {
        what: "canonical keeps big integers exactly",
        args: &["canonical"],
        stdin: " [18446744073709551616, -0, \"é\"] ",
        code: 0,
        stdout: Some("[18446744073709551616,0,\"é\"]\n"),
        stderr: "",
    },
    Case {
        what: "canonical refuses a nested float and names its path",
        args: &["canonical"],
        stdin: r#"{"items":[{"price":1.5}]}"#,
        code: 1,
        stdout: Some(""),
        stderr: "warden: float is not encodable at items[0].price",
    },
    Case {
        what: "canonical refuses a top-level float",
        args: &["canonical"],
        stdin: "1e3",
        code: 1,
        stdout: Some(""),
        stderr: "at the top level",
    },
    Case {
        what: "canonical refuses invalid JSON",
        args: &["canonical"],
        stdin: r#"{"a":}"#,
        code: 1,
        stdout: Some(""),
        stderr: "warden: invalid JSON",
    },
    Case {
        what: "canonical refuses empty stdin",
        args: &["canonical"],
        stdin: "",
        code: 1,
        stdout: Some(""),
        stderr: "warden: invalid JSON",
    },
    Case {
        what: "canonical refuses a key given twice, naming its path",
        args: &["canonical"],
        stdin: r#"{"refund":{"amount":400,"amount":400000}}"#,
        code: 1,
        stdout: Some(""),
        stderr: "warden: invalid JSON: duplicate key at refund.amount: an object may give each key once",
    },
    Case {
        what: "canonical refuses trailing data",
        args: &["canonical"],
        stdin: "1 2",
        code: 1,
        stdout: Some(""),
        stderr: "extra data",
    },
    Case {
        what: "template escapes a delimiter inside a value",
        args: &["template", "refund:{tenant}:{payment_id}", "--args", r#"{"tenant":"acme:evil","payment_id":"p1"}"#],
        stdin: "",
        code: 0,
        stdout: Some("refund:acme%3Aevil:p1\n"),
        stderr: "",
    },
    Case {
        what: "template --raw inserts values as they are",
        args: &[
            "template",
            "refund:{tenant}:{payment_id}",
            "--args",
            r#"{"tenant":"acme:evil","payment_id":"p1"}"#,
            "--raw",
        ],
        stdin: "",
        code: 0,
        stdout: Some("refund:acme:evil:p1\n"),
        stderr: "",
    },
    Case {
        what: "template renders {resource} from --resource",
        args: &["template", "close:{resource}", "--resource", "ticket:7"],
        stdin: "",
        code: 0,
        stdout: Some("close:ticket%3A7\n"),
        stderr: "",
    },
    Case {
        what: "template refuses a missing placeholder value",
        args: &["template", "refund:{payment_id}", "--args", r#"{"amount":5}"#],
        stdin: "",
        code: 1,
        stdout: Some(""),
        stderr: "no value for '{payment_id}' (have: amount)",
    },
    Case {
        what: "template refuses a malformed template",
        args: &["template", "refund:{payment_id", "--args", "{}"],
        stdin: "",
        code: 1,
        stdout: Some(""),
        stderr: "is not a valid template",
    },
    Case {
        what: "escaped template refuses adjacent placeholders",
        args: &["template", "{a}{b}", "--args", r#"{"a":"x","b":"y"}"#],
        stdin: "",
        code: 1,
        stdout: Some(""),
        stderr: "warden: ",
    },
    Case {
        what: "template refuses a float placeholder value in raw mode, as ctrlrun documents do",
        args: &["template", "--raw", "k:{n}", "--args", r#"{"n":1.5}"#],
        stdin: "",
        code: 1,
        stdout: Some(""),
        stderr: "is a float",
    },
    Case {
        what: "escaped template renders a float as its RFC 8785 text, escaped",
        args: &["template", "k:{n}/{m}", "--args", r#"{"n":1.50,"m":1e21}"#],
        stdin: "",
        code: 0,
        stdout: Some("k:1.5/1e%2B21\n"),
        stderr: "",
    },
    Case {
        what: "template refuses --args that are not an object",
        args: &["template", "k:{n}", "--args", "[1]"],
        stdin: "",
        code: 2,
        stdout: Some(""),
        stderr: "--args must be a JSON object",
    },
    Case {
        what: "template refuses --args that are not JSON",
        args: &["template", "k:{n}", "--args", "{n:1}"],
        stdin: "",
        code: 2,
        stdout: Some(""),
        stderr: "--args: invalid JSON",
    },
    Case {
        what: "action-hash refuses a document with no name",
        args: &["action-hash"],
        stdin: r#"{"arguments":{},"principal":{"agent":"a"}}"#,
        code: 1,
        stdout: Some(""),
        stderr: "needs \"name\"",
    },
    Case {
        what: "action-hash refuses an unknown field",
        args: &["action-hash"],
        stdin: r#"{"name":"n","arguments":{},"principal":{"agent":"a"},"enviroment":"staging"}"#,
        code: 1,
        stdout: Some(""),
        stderr: "unknown field \"enviroment\"",
    },
    Case {
        what: "action-hash refuses a float argument and names its path",
        args: &["action-hash"],
        stdin: r#"{"name":"n","arguments":{"amount":1.5},"principal":{"agent":"a"}}"#,
        code: 1,
        stdout: Some(""),
        stderr: "arguments.amount",
    },
    Case {
        what: "action-hash refuses arguments that are not an object",
        args: &["action-hash"],
        stdin: r#"{"name":"n","arguments":[],"principal":{"agent":"a"}}"#,
        code: 1,
        stdout: Some(""),
        stderr: "must be a JSON object",
    },
    Case {
        what: "action-hash refuses an empty agent",
        args: &["action-hash"],
        stdin: r#"{"name":"n","arguments":{},"principal":{"agent":""}}"#,
        code: 1,
        stdout: Some(""),
        stderr: "principal.agent",
    },
    Case {
        what: "action-hash refuses invalid JSON",
        args: &["action-hash"],
        stdin: "{",
        code: 1,
        stdout: Some(""),
        stderr: "invalid JSON",
    },
    Case {
        what: "an unknown subcommand is a usage error",
        args: &["frobnicate"],
        stdin: "",
        code: 2,
        stdout: Some(""),
        stderr: "unrecognized subcommand",
    },
    Case { what: "no subcommand is a usage error", args: &[], stdin: "", code: 2, stdout: Some(""), stderr: "Usage" },
    Case {
        what: "template without a template is a usage error",
        args: &["template"],
        stdin: "",
        code: 2,
        stdout: Some(""),
        stderr: "required",
    },
    Case {
        what: "an unknown effect state is a usage error",
        args: &["effects", "--state", "done", "--store", "/nonexistent"],
        stdin: "",
        code: 2,
        stdout: Some(""),
        stderr: "invalid value",
    },
    Case {
        what: "resolve needs --committed or --failed",
        args: &["resolve", "k", "--store", "/nonexistent"],
        stdin: "",
        code: 2,
        stdout: Some(""),
        stderr: "--committed|--failed",
    },
    Case {
        what: "resolve refuses both --committed and --failed",
        args: &["resolve", "k", "--committed", "--failed", "--store", "/nonexistent"],
        stdin: "",
        code: 2,
        stdout: Some(""),
        stderr: "cannot be used with",
    },
    Case {
        what: "a zero limit is a usage error",
        args: &["events", "--limit", "0", "--store", "/nonexistent"],
        stdin: "",
        code: 2,
        stdout: Some(""),
        stderr: "invalid value",
    },
    Case {
        what: "approve --ttl must be an ISO 8601 duration",
        args: &["approve", "apr_x", "--by", "ops:bob", "--ttl", "15 minutes", "--store", "/nonexistent"],
        stdin: "",
        code: 2,
        stdout: Some(""),
        stderr: "warden: --ttl: '15 minutes' is not an ISO 8601 duration",
    },
    Case {
        what: "action-hash --json prints one object",
        args: &["action-hash", "--json"],
        stdin: r#"{"name":"n","arguments":{},"principal":{"agent":"a"}}"#,
        code: 0,
        stdout: None,
        stderr: "",
    },
    Case {
        what: "template --json prints one object",
        args: &["template", "k:{n}", "--args", r#"{"n":7}"#, "--json"],
        stdin: "",
        code: 0,
        stdout: Some("{\n  \"effect_key\": \"k:7\"\n}\n"),
        stderr: "",
    },
];

#[test]
fn pure_commands_print_exact_output_and_exit_with_the_documented_code() {
    let mut failures = Vec::new();
    for case in CASES {
        let run = warden(case.args, case.stdin);
        let stdout_ok = case.stdout.is_none_or(|expected| run.stdout == expected);
        let stderr_ok = if case.stderr.is_empty() { run.stderr.is_empty() } else { run.stderr.contains(case.stderr) };
        if run.code != case.code || !stdout_ok || !stderr_ok {
            failures.push(format!("{} (wanted exit {}):\n{run}", case.what, case.code));
        }
    }
    assert!(failures.is_empty(), "{} case(s) failed:\n\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn error_messages_are_one_line_prefixed_with_warden() {
    for (args, stdin) in [
        (&["canonical"][..], "[0.5]"),
        (&["template", "k:{a}"][..], ""),
        (&["effects", "--store", "/nonexistent/x"][..], ""),
    ] {
        let run = warden(args, stdin);
        assert_ne!(run.code, 0, "{run}");
        assert!(run.stderr.starts_with("warden: "), "{run}");
        assert_eq!(run.stderr.lines().count(), 1, "{run}");
    }
}

fn action_document(row: &Value) -> String {
    // The arguments go in as ctrlrun's own text, so the CLI's parser reads exactly what
    // ctrlrun hashed.
    format!(
        r#"{{"name":{},"arguments":{},"principal":{},"resource":{},"environment":{}}}"#,
        row["name"],
        row["arguments_json"].as_str().expect("arguments_json"),
        row["principal"],
        row["resource"],
        row["environment"]
    )
}

#[test]
fn action_hash_matches_ctrlrun_on_the_first_action_vector() {
    let text = std::fs::read_to_string(format!("{VECTORS}actions.json")).expect("actions.json");
    let rows: Vec<Value> = serde_json::from_str(&text).expect("actions.json parses");
    let row = &rows[0];
    let run = warden(&["action-hash"], &action_document(row));
    assert_eq!(run.code, 0, "{run}");
    assert_eq!(run.stdout, format!("{}\n", row["action_hash"].as_str().expect("action_hash")), "{run}");
}

#[test]
fn action_hash_matches_ctrlrun_on_every_action_vector() {
    let text = std::fs::read_to_string(format!("{VECTORS}actions.json")).expect("actions.json");
    let rows: Vec<Value> = serde_json::from_str(&text).expect("actions.json parses");
    let mut failures = Vec::new();
    for (index, row) in rows.iter().enumerate() {
        let run = warden(&["action-hash"], &action_document(row));
        if run.code != 0 || run.stdout.trim_end() != row["action_hash"].as_str().unwrap_or("") {
            failures.push(format!("row {index}: {run}"));
        }
    }
    assert!(failures.is_empty(), "{} of {} rows failed:\n{}", failures.len(), rows.len(), failures.join("\n"));
}

#[test]
fn action_hash_defaults_to_production_and_treats_absent_user_and_resource_as_null() {
    let expected = Action::new(
        "stripe.refund",
        json!({"payment_id": "p1"}),
        Principal::new("agent", None).unwrap(),
        None,
        "production",
    )
    .unwrap()
    .hash()
    .unwrap();
    let short = warden(
        &["action-hash"],
        r#"{"name":"stripe.refund","arguments":{"payment_id":"p1"},"principal":{"agent":"agent"}}"#,
    );
    let spelled_out = warden(
        &["action-hash"],
        r#"{"name":"stripe.refund","arguments":{"payment_id":"p1"},"principal":{"agent":"agent","user":null},"resource":null,"environment":"production"}"#,
    );
    assert_eq!((short.code, short.stdout.trim_end()), (0, expected.as_str()), "{short}");
    assert_eq!(spelled_out.stdout, short.stdout, "{spelled_out}");
    let staging = warden(
        &["action-hash"],
        r#"{"name":"stripe.refund","arguments":{"payment_id":"p1"},"principal":{"agent":"agent"},"environment":"staging"}"#,
    );
    assert_ne!(staging.stdout, short.stdout, "{staging}");
}

// ---- store commands ----------------------------------------------------------------------------

/// A store with one AMBIGUOUS effect `refund:p1` (and its receipt) and one pending approval.
struct Store {
    dir: tempfile::TempDir,
    kernel: Kernel,
    approval_id: String,
}

impl Store {
    fn new() -> Store {
        let dir = tempfile::tempdir().expect("tempdir");
        let kernel = Kernel::open(dir.path().join("state.redb"), KernelOptions::default()).expect("open kernel");
        let template = Template::parse("refund:{payment_id}", TemplateMode::Escaped).expect("template");
        let principal = Principal::new("refund-agent", Some("ada")).expect("principal");
        let action = Action::new(
            "stripe.refund",
            json!({"payment_id": "p1", "amount": 500}),
            principal.clone(),
            None,
            "production",
        )
        .expect("action");
        let mut proposal = Proposal::new(&action, Ruling::new(Decision::Allow, "rule[0]"));
        proposal.effect = Some(&template);
        let permit = kernel.propose(&proposal).expect("permit");
        permit.ambiguous("the provider timed out").expect("report ambiguous");

        let big =
            Action::new("stripe.refund", json!({"payment_id": "p2", "amount": 900000}), principal, None, "production")
                .expect("action");
        let mut ask = Proposal::new(&big, Ruling::new(Decision::Approve, "rule[1]"));
        ask.effect = Some(&template);
        let approval_id = match kernel.propose(&ask) {
            Err(Error::ApprovalRequired { request_id, .. }) => request_id,
            other => panic!("expected an approval request, got {other:?}"),
        };
        Store { dir, kernel, approval_id }
    }

    fn path(&self) -> PathBuf {
        self.dir.path().join("state.redb")
    }

    fn run(&self, args: &[&str]) -> Run {
        let path = self.path();
        let mut all: Vec<&str> = args.to_vec();
        all.extend(["--store", path.to_str().expect("UTF-8 temp path")]);
        warden(&all, "")
    }
}

#[test]
fn effects_json_is_one_array_showing_the_ambiguous_effect() {
    let store = Store::new();
    let run = store.run(&["effects", "--json"]);
    assert_eq!(run.code, 0, "{run}");
    let effects = one_document(&run);
    let effects = effects.as_array().expect("an array");
    assert_eq!(effects.len(), 1, "{run}");
    assert_eq!(effects[0]["effect_key"], "refund:p1");
    assert_eq!(effects[0]["state"], "ambiguous");
    assert_eq!(effects[0]["attempt"], 1);
}

#[test]
fn effects_filters_by_state_and_limits_the_count() {
    let store = Store::new();
    let none = one_document(&store.run(&["effects", "--json", "--state", "committed"]));
    assert_eq!(none, json!([]));
    let some = one_document(&store.run(&["effects", "--json", "--state", "ambiguous", "--limit", "1"]));
    assert_eq!(some.as_array().map(Vec::len), Some(1));
    let human = store.run(&["effects", "--state", "failed"]);
    assert_eq!((human.code, human.stdout.as_str()), (0, "no failed effects\n"), "{human}");
}

#[test]
fn effects_prints_a_table_with_the_documented_columns() {
    let store = Store::new();
    let run = store.run(&["effects"]);
    assert_eq!(run.code, 0, "{run}");
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(
        lines[0].split_whitespace().collect::<Vec<_>>(),
        ["KEY", "STATE", "ATTEMPT", "ACTION", "UPDATED", "RESOLVED_BY"],
        "{run}"
    );
    let row: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(
        (row[0], row[1], row[2], row[3], row[5]),
        ("refund:p1", "ambiguous", "1", "stripe.refund", "-"),
        "{run}"
    );
    assert!(row[4].ends_with('Z') && row[4].len() == "2025-11-24T16:00:00.123Z".len(), "{run}");
}

#[test]
fn resolve_moves_an_ambiguous_effect_once_and_refuses_the_second_time() {
    let store = Store::new();
    let first = store.run(&["resolve", "refund:p1", "--committed", "--by", "ops:ada"]);
    assert_eq!((first.code, first.stdout.as_str()), (0, "committed\n"), "{first}");
    let record = store.kernel.effect("refund:p1").unwrap().unwrap();
    assert_eq!(record.resolved_by.as_deref(), Some("ops:ada"));

    let second = store.run(&["resolve", "refund:p1", "--failed", "--by", "ops:ada"]);
    assert_eq!(second.code, 1, "{second}");
    assert!(second.stderr.contains("is committed, not ambiguous"), "{second}");

    let table = store.run(&["effects"]);
    assert!(
        table.stdout.lines().nth(1).is_some_and(|row| row.contains("committed") && row.trim_end().ends_with("ops:ada")),
        "{table}"
    );
}

#[test]
fn resolve_names_the_cli_user_when_by_is_absent() {
    let store = Store::new();
    let path = store.path();
    let mut command = Command::new(env!("CARGO_BIN_EXE_warden"));
    command.args(["resolve", "refund:p1", "--failed", "--json"]).env("WARDEN_STORE", &path).env("USER", "grace");
    let output = command.output().expect("run warden");
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    let record: Value = serde_json::from_slice(&output.stdout).expect("one JSON document");
    assert_eq!((record["state"].as_str(), record["resolved_by"].as_str()), (Some("failed"), Some("cli:grace")));
}

#[test]
fn resolve_of_an_unknown_key_is_refused_with_one_json_error_document() {
    let store = Store::new();
    let run = store.run(&["resolve", "refund:nope", "--committed", "--by", "ops:ada", "--json"]);
    assert_eq!(run.code, 1, "{run}");
    let error = one_document(&run);
    assert_eq!(error["error"]["reason"], "not_found", "{run}");
    assert_eq!(error["error"]["refusal"], true, "{run}");
    assert!(run.stderr.starts_with("warden: no effect"), "{run}");
}

#[test]
fn a_resolver_name_with_a_newline_is_a_usage_error() {
    let store = Store::new();
    let run = store.run(&["resolve", "refund:p1", "--committed", "--by", "a\nb"]);
    assert_eq!(run.code, 2, "{run}");
    assert!(run.stderr.contains("control or format character U+000A"), "{run}");
    assert_eq!(run.stderr.lines().count(), 1, "{run}");
    assert_eq!(store.kernel.effect("refund:p1").unwrap().unwrap().state, warden::EffectState::Ambiguous);
}

#[test]
fn receipts_verify_chain_passes_on_an_untouched_store() {
    let store = Store::new();
    let run = store.run(&["receipts", "--verify-chain"]);
    assert_eq!((run.code, run.stdout.as_str()), (0, "chain ok: 1 receipts verified, head seq 1\n"), "{run}");
    let report = one_document(&store.run(&["receipts", "--verify-chain", "--json"]));
    assert_eq!(
        (report["ok"].as_bool(), report["verified"].as_u64(), report["head_seq"].as_u64()),
        (Some(true), Some(1), Some(1))
    );
}

#[test]
fn receipts_verify_chain_names_a_tampered_receipt_and_exits_1() {
    let store = Store::new();
    store
        .kernel
        .store()
        .tamper(|t| {
            let mut row = t.receipt(1)?.expect("receipt 1");
            row.document = row.document.replace("\"ambiguous\"", "\"committed\"");
            t.put_receipt(1, &row)
        })
        .expect("tamper");
    let run = store.run(&["receipts", "--verify-chain"]);
    assert_eq!(run.code, 1, "{run}");
    assert!(run.stdout.starts_with("break content_altered at seq 1: "), "{run}");
    assert!(run.stderr.starts_with("warden: the receipt chain is broken"), "{run}");

    let json = store.run(&["receipts", "--verify-chain", "--json"]);
    assert_eq!(json.code, 1, "{json}");
    let report = one_document(&json);
    assert_eq!(report["ok"], false);
    assert_eq!(report["breaks"][0]["name"], "content_altered");
}

#[test]
fn receipts_json_is_one_array_of_receipt_documents() {
    let store = Store::new();
    let run = store.run(&["receipts", "--json"]);
    assert_eq!(run.code, 0, "{run}");
    let receipts = one_document(&run);
    let receipts = receipts.as_array().expect("an array");
    assert_eq!(receipts.len(), 1, "{run}");
    assert_eq!((receipts[0]["seq"].as_u64(), receipts[0]["result"].as_str()), (Some(1), Some("ambiguous")));
    assert!(receipts[0]["hash"].as_str().is_some_and(|h| h.starts_with("sha256:")));
}

#[test]
fn receipts_prints_one_line_per_receipt_and_last_keeps_the_newest() {
    let store = Store::new();
    let denied = Action::new("db.drop", json!({}), Principal::new("agent", None).unwrap(), None, "production").unwrap();
    let _ = store.kernel.propose(&Proposal::new(&denied, Ruling::new(Decision::Deny, "rule[9]")));
    let all = store.run(&["receipts"]);
    assert_eq!(all.code, 0, "{all}");
    let lines: Vec<Vec<&str>> = all.stdout.lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(lines.len(), 3, "a header and two receipts: {all}");
    assert_eq!(lines[0], ["SEQ", "RECEIPT", "FINISHED", "RESULT", "ACTION", "EFFECT_KEY", "REASON"], "{all}");
    assert_eq!(
        (lines[1][0], lines[1][3], lines[1][4], lines[1][5], lines[1][6]),
        ("1", "ambiguous", "stripe.refund", "refund:p1", "rule[0]"),
        "{all}"
    );
    assert!(lines[1][1].starts_with("rct_"), "{all}");
    assert_eq!((lines[2][0], lines[2][3], lines[2][4], lines[2][5]), ("2", "denied", "db.drop", "-"), "{all}");
    let last = store.run(&["receipts", "--last", "1"]);
    assert_eq!(last.stdout.lines().count(), 2, "{last}");
    assert!(last.stdout.lines().nth(1).is_some_and(|row| row.starts_with("2 ")), "{last}");
}

#[test]
fn events_json_is_one_array_in_id_order_and_after_skips_what_was_seen() {
    let store = Store::new();
    let run = store.run(&["events", "--json"]);
    assert_eq!(run.code, 0, "{run}");
    let events = one_document(&run);
    let events = events.as_array().expect("an array");
    let ids: Vec<u64> = events.iter().filter_map(|e| e["event_id"].as_u64()).collect();
    assert_eq!(ids, (1..=ids.len() as u64).collect::<Vec<_>>(), "{run}");
    assert_eq!(events[0]["type"], EventKind::ACTION_PROPOSED.as_str());
    assert!(
        events.iter().any(|e| e["type"] == EventKind::EXECUTION_AMBIGUOUS.as_str() && e["effect_key"] == "refund:p1"),
        "{run}"
    );

    let after = one_document(&store.run(&["events", "--json", "--after", "2", "--limit", "1"]));
    assert_eq!(
        after.as_array().map(|a| a.iter().filter_map(|e| e["event_id"].as_u64()).collect::<Vec<_>>()),
        Some(vec![3])
    );
    let human = store.run(&["events", "--limit", "2"]);
    assert_eq!(human.stdout.lines().count(), 3, "{human}");
    assert!(human.stdout.starts_with("ID "), "{human}");
}

#[test]
fn pending_lists_the_request_and_approve_answers_it_exactly_once() {
    let store = Store::new();
    let id = store.approval_id.as_str();
    let pending = one_document(&store.run(&["pending", "--json"]));
    assert_eq!(
        pending.as_array().map(|a| a.iter().filter_map(|r| r["approval_id"].as_str()).collect::<Vec<_>>()),
        Some(vec![id])
    );
    let human = store.run(&["pending"]);
    assert!(
        human.stdout.lines().nth(1).is_some_and(|l| l.starts_with(id) && l.contains("refund-agent for ada")),
        "{human}"
    );

    let granted = store.run(&["approve", id, "--by", "ops:bob", "--yes"]);
    assert_eq!(granted.code, 0, "{granted}");
    assert!(granted.stdout.ends_with(&format!("approval {id} granted by ops:bob\n")), "{granted}");
    let again = store.run(&["approve", id, "--by", "ops:bob", "--yes"]);
    assert_eq!(again.code, 1, "{again}");
    assert!(again.stderr.contains("already granted"), "{again}");
    assert_eq!(one_document(&store.run(&["pending", "--json"])), json!([]));
    assert_eq!(store.run(&["pending"]).stdout, "no pending approvals\n");
}

#[test]
fn the_arguments_an_approval_binds_are_visible_in_pending_inspect_and_json() {
    let store = Store::new();
    let id = store.approval_id.as_str();
    let listed = one_document(&store.run(&["pending", "--json"]));
    assert_eq!(listed[0]["arguments"], json!({"amount": 900000, "payment_id": "p2"}), "{listed}");
    assert_eq!(listed[0]["requested_by"]["user"], "ada");
    assert_eq!(listed[0]["rule"], "rule[1]");
    assert_eq!(listed[0]["environment"], "production");
    let human = store.run(&["pending"]);
    assert!(human.stdout.contains(r#"{"amount":900000,"payment_id":"p2"}"#), "{human}");

    let inspected = store.run(&["inspect", id]);
    assert_eq!(inspected.code, 0, "{inspected}");
    for shown in [
        "action (canonical JSON; its SHA-256 is sha256:",
        "  \"arguments\": {\n    \"amount\": 900000,\n    \"payment_id\": \"p2\"\n  },",
        "\"schema\": \"ctrlrun.action/v1\"",
        "requested by: refund-agent for ada (not verified)",
        "rule:         rule[1]",
        "expires:",
    ] {
        assert!(inspected.stdout.contains(shown), "{shown:?} missing:\n{inspected}");
    }
    let document = one_document(&store.run(&["inspect", id, "--json"]));
    assert_eq!(document["approval"]["arguments"]["amount"], 900000);
    assert_eq!(document["action_document"]["arguments"], json!({"amount": 900000, "payment_id": "p2"}));
    // The document shown is exactly what the hash covers.
    let canonical = warden::canonical::to_canonical_string(&document["action_document"], "").unwrap();
    assert_eq!(warden::canonical::sha256_prefixed(canonical.as_bytes()), document["approval"]["action_hash"]);
}

#[test]
fn approve_shows_the_action_and_without_a_terminal_needs_yes() {
    let store = Store::new();
    let id = store.approval_id.as_str();
    let refused = store.run(&["approve", id, "--by", "ops:bob"]);
    assert_eq!(refused.code, 2, "{refused}");
    assert!(refused.stderr.contains("stdin is not a terminal") && refused.stderr.contains("--yes"), "{refused}");
    assert_eq!(refused.stdout, "", "{refused}");
    assert_eq!(one_document(&store.run(&["pending", "--json"]))[0]["status"], "pending");
    let missing_by = store.run(&["approve", id, "--yes"]);
    assert_eq!(missing_by.code, 2, "{missing_by}");
    assert!(missing_by.stderr.contains("--by"), "{missing_by}");

    let granted = store.run(&["approve", id, "--by", "ops:bob", "--yes"]);
    assert_eq!(granted.code, 0, "{granted}");
    assert!(granted.stdout.contains("\"payment_id\": \"p2\""), "{granted}");
    assert!(granted.stdout.contains("\"amount\": 900000"), "{granted}");
}

#[test]
fn every_spelling_of_the_requester_is_refused_as_approver() {
    let store = Store::new();
    let id = store.approval_id.as_str();
    for requester in ["ada", "ADA", "ada ", "cli:ada", "ａｄａ", "refund-agent", "REFUND-AGENT"] {
        let refused = store.run(&["approve", id, "--by", requester, "--yes"]);
        assert_eq!(refused.code, 1, "{requester:?}: {refused}");
        assert!(refused.stderr.contains("approver_is_requester"), "{requester:?}: {refused}");
    }
    assert_eq!(one_document(&store.run(&["pending", "--json"]))[0]["votes"], json!([]));
}

#[test]
fn the_requester_cannot_approve_under_a_principal_form_or_look_alike_and_unparseable_names_are_refused_by_name() {
    let store = Store::new();
    let id = store.approval_id.as_str();
    // The requester is refund-agent for ada.
    for requester in [
        "ada:",
        "refund-agent:",
        "refund-agent/ada",
        "ada/refund-agent",
        "refund\u{2011}agent:",
        "ad\u{0430}",
        "ｒｅｆｕｎｄ－ａｇｅｎｔ",
        "Refund_Agent/",
    ] {
        let refused = store.run(&["approve", id, "--by", requester, "--yes"]);
        assert_eq!(refused.code, 1, "{requester:?}: {refused}");
        assert!(refused.stderr.contains("approver_is_requester"), "{requester:?}: {refused}");
        let denied = store.run(&["deny", id, "--by", requester]);
        assert!(denied.stderr.contains("approver_is_requester"), "{requester:?}: {denied}");
    }
    for (name, why) in [("ops:bob:x", "has more than one separator"), ("b\u{034F}ob", "U+034F")] {
        let refused = store.run(&["approve", id, "--by", name, "--yes"]);
        assert_eq!(refused.code, 2, "{name:?}: {refused}");
        assert!(refused.stderr.contains(&format!("the approver name {name:?}")), "{name:?}: {refused}");
        assert!(refused.stderr.contains(why) && refused.stderr.contains("AGENT:USER"), "{name:?}: {refused}");
    }
    assert_eq!(one_document(&store.run(&["pending", "--json"]))[0]["votes"], json!([]));
}

#[test]
fn deny_records_the_reason_and_the_requester_cannot_answer() {
    let store = Store::new();
    let id = store.approval_id.as_str();
    for requester in ["refund-agent", "ada"] {
        let refused = store.run(&["deny", id, "--by", requester]);
        assert_eq!(refused.code, 1, "{refused}");
        assert!(refused.stderr.contains("approver_is_requester"), "{refused}");
    }
    let denied = store.run(&["deny", id, "--by", "ops:bob", "--reason", "too large", "--json"]);
    assert_eq!(denied.code, 0, "{denied}");
    let record = one_document(&denied);
    assert_eq!(
        (record["status"].as_str(), record["approver"].as_str(), record["note"].as_str()),
        (Some("denied"), Some("ops:bob"), Some("too large"))
    );
}

#[test]
fn approving_an_unknown_request_is_refused() {
    let store = Store::new();
    let run = store.run(&["approve", "apr_00000000000000000000000000000000", "--by", "ops:bob", "--json"]);
    assert_eq!(run.code, 1, "{run}");
    assert_eq!(one_document(&run)["error"]["reason"], "unknown", "{run}");
}

#[test]
fn warden_store_is_the_default_for_store() {
    let store = Store::new();
    let run = warden_with(&["effects", "--json"], "", Some(&store.path()));
    assert_eq!(run.code, 0, "{run}");
    assert_eq!(one_document(&run)[0]["effect_key"], "refund:p1");
    // --store wins over the environment.
    let elsewhere = tempfile::tempdir().unwrap();
    let missing = elsewhere.path().join("missing.redb");
    let run = warden_with(&["effects", "--store", missing.to_str().unwrap()], "", Some(&store.path()));
    assert_eq!(run.code, 2, "{run}");
}

#[test]
fn read_commands_against_a_missing_store_exit_2_and_create_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.redb");
    let path = missing.to_str().unwrap();
    let commands: &[&[&str]] = &[
        &["effects"],
        &["effects", "--json"],
        &["receipts"],
        &["receipts", "--verify-chain"],
        &["events"],
        &["pending"],
        &["resolve", "k", "--committed", "--by", "ops:ada"],
        &["approve", "apr_x", "--by", "ops:ada"],
        &["deny", "apr_x", "--by", "ops:ada"],
    ];
    for args in commands {
        let mut all = args.to_vec();
        all.extend(["--store", path]);
        let run = warden(&all, "");
        assert_eq!(run.code, 2, "{args:?}: {run}");
        assert!(run.stderr.starts_with(&format!("warden: no store at {path}; ")), "{args:?}: {run}");
        if args.contains(&"--json") {
            assert_eq!(one_document(&run)["error"]["reason"], "usage", "{run}");
        } else {
            assert_eq!(run.stdout, "", "{args:?}: {run}");
        }
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "a read command created a file");
}

#[test]
fn store_commands_without_any_store_path_exit_2() {
    // No --store and no WARDEN_STORE: the default, warden.redb here, which is not there.
    let run = warden(&["effects"], "");
    assert_eq!(run.code, 2, "{run}");
    assert!(run.stderr.contains("no store at warden.redb; name the store with --store PATH or WARDEN_STORE"), "{run}");
}
