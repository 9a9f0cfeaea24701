//! One exit-code rule for every command (`warden --help`, README "CLI reference"): a document
//! that does not load or a file that is missing is 2 (usage or configuration), whatever the
//! command; a refusal or a failed check is 1. Each command is driven as a user would, in a
//! temporary directory, with no WARDEN_* variable but the ones a case sets.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;
use warden::document::load_str;
use warden::pipeline::{ActionRequest, Warden, WardenOptions};
use warden::Principal;

const STARTER: &str = include_str!("../src/bin/warden/starter.yaml");
/// Loads as YAML, refused as a document: an unknown top-level key.
const TYPO: &str = "schema: warden/v1\nacti0ns: {}\n";

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

fn warden(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut command = Command::new(env!("CARGO_BIN_EXE_warden"));
    command
        .args(args)
        .current_dir(cwd)
        .env_remove("WARDEN_STORE")
        .env_remove("WARDEN_CONFIG")
        .env_remove("WARDEN_CREDENTIALS_DIR");
    for (name, value) in env {
        command.env(name, value);
    }
    let output = command.output().expect("run warden");
    Run {
        code: output.status.code().expect("warden exited by a signal"),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// A directory with a good document (`warden.yaml`), a broken one (`typo.yaml`), a store with
/// one committed effect (`state.redb`), a directory named like a store and an empty file.
struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("warden.yaml"), STARTER).expect("write");
        std::fs::write(dir.path().join("typo.yaml"), TYPO).expect("write");
        std::fs::create_dir(dir.path().join("folder.redb")).expect("mkdir");
        std::fs::write(dir.path().join("empty.redb"), b"").expect("write");
        let document = load_str(STARTER, "starter").expect("the starter loads");
        let w = Warden::open(dir.path().join("state.redb"), document, WardenOptions::default()).expect("open");
        let request = ActionRequest::new(
            "stripe.refund",
            json!({"payment_id": "pay_1", "amount": 100}),
            Principal::new("agent", Some("ada")).expect("principal"),
        );
        w.submit(&request).expect("allowed").commit(&json!({"ok": true})).expect("commit");
        Fixture { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

/// Every command that reads the administrator's document, with the arguments it needs besides
/// the document (given by `--config`).
const DOCUMENT_COMMANDS: &[&[&str]] = &[
    &["check"],
    &["decide", "--action", "stripe.refund"],
    &["verify"],
    &["sources"],
    &["query", "status", "summary"],
    &["history", "status", "summary"],
    &["diff", "snp_00000000000000000000000000000000", "snp_00000000000000000000000000000001"],
];

#[test]
fn every_command_that_reads_a_document_exits_2_when_it_does_not_load_or_is_missing() {
    let f = Fixture::new();
    let store = f.file("state.redb");
    let store = store.to_str().expect("utf-8");
    for command in DOCUMENT_COMMANDS {
        for (document, what) in [("typo.yaml", "does not load"), ("missing.yaml", "is missing")] {
            let mut args: Vec<&str> = command.to_vec();
            args.extend(["--config", document, "--store", store]);
            let run = warden(f.path(), &args, &[]);
            assert_eq!(run.code, 2, "{command:?} with a document that {what}:\n{run}");
            assert!(run.stderr.contains(document), "the message names the file: {command:?}\n{run}");
            // The same through the environment variable.
            let mut args: Vec<&str> = command.to_vec();
            args.extend(["--store", store]);
            let run = warden(f.path(), &args, &[("WARDEN_CONFIG", document)]);
            assert_eq!(run.code, 2, "{command:?} with WARDEN_CONFIG naming a document that {what}:\n{run}");
        }
        let run = warden(f.path(), command, &[]);
        assert_eq!(run.code, 2, "{command:?} with no document at all:\n{run}");
        assert!(run.stderr.contains("WARDEN_CONFIG"), "the message says how to name one: {command:?}\n{run}");
    }
}

#[test]
fn commands_that_take_the_document_as_an_argument_exit_2_for_it_too() {
    let f = Fixture::new();
    for command in [&["check"][..], &["decide", "--action", "x"], &["verify"], &["sources"]] {
        for document in ["typo.yaml", "missing.yaml"] {
            let mut args = vec![command[0], document];
            args.extend(&command[1..]);
            let run = warden(f.path(), &args, &[]);
            assert_eq!(run.code, 2, "{args:?}:\n{run}");
        }
    }
    // --json keeps check's own report, with the same exit code.
    let run = warden(f.path(), &["check", "typo.yaml", "--json"], &[]);
    assert_eq!(run.code, 2, "{run}");
    let report: serde_json::Value = serde_json::from_str(&run.stdout).expect("one JSON document");
    assert_eq!(report["ok"], false, "{run}");
}

/// Every command that reads a store, with the arguments it needs besides the store.
const STORE_COMMANDS: &[&[&str]] = &[
    &["effects"],
    &["resolve", "refund:pay_1", "--committed"],
    &["receipts"],
    &["receipts", "--verify-chain"],
    &["events"],
    &["pending"],
    &["approve", "apr_00000000000000000000000000000000", "--by", "ops:bob"],
    &["deny", "apr_00000000000000000000000000000000", "--by", "ops:bob"],
    &["inspect", "refund:pay_1"],
    &["doctor"],
    &["history", "status", "summary", "--config", "warden.yaml"],
    &[
        "diff",
        "snp_00000000000000000000000000000000",
        "snp_00000000000000000000000000000001",
        "--config",
        "warden.yaml",
    ],
];

#[test]
fn every_command_that_reads_a_store_exits_2_when_the_store_is_missing_or_not_a_store_file() {
    let f = Fixture::new();
    for command in STORE_COMMANDS {
        for store in ["missing.redb", "folder.redb", "empty.redb"] {
            let mut args: Vec<&str> = command.to_vec();
            args.extend(["--store", store]);
            let run = warden(f.path(), &args, &[]);
            assert_eq!(run.code, 2, "{command:?} --store {store}:\n{run}");
            assert!(run.stderr.contains(store), "the message names the path: {command:?}\n{run}");
            let run = warden(f.path(), command, &[("WARDEN_STORE", store)]);
            assert_eq!(run.code, 2, "{command:?} with WARDEN_STORE={store}:\n{run}");
        }
        let run = warden(f.path(), command, &[]);
        assert_eq!(run.code, 2, "{command:?} with no store:\n{run}");
        assert!(run.stderr.contains("--store PATH"), "the message says how to name one: {command:?}\n{run}");
    }
    assert!(!f.file("missing.redb").exists(), "no command created the missing store");
}

#[test]
fn a_refusal_or_a_failed_check_is_exit_1_for_every_command_that_can_refuse() {
    let f = Fixture::new();
    let cases: &[(&[&str], &str)] = &[
        (&["init", "warden.yaml"], "already exists"),
        (&["resolve", "refund:pay_1", "--committed", "--store", "state.redb"], "not ambiguous"),
        (&["approve", "apr_00000000000000000000000000000000", "--by", "ops:bob", "--store", "state.redb"], "apr_"),
        (&["deny", "apr_00000000000000000000000000000000", "--by", "ops:bob", "--store", "state.redb"], "apr_"),
        (&["inspect", "refund:nobody", "--store", "state.redb"], "nothing known"),
        (&["query", "status", "summary", "--config", "warden.yaml"], "status"),
        (&["template", "k:{missing}", "--args", "{}"], "missing"),
    ];
    for (args, says) in cases {
        let run = warden(f.path(), args, &[]);
        assert_eq!(run.code, 1, "{args:?}:\n{run}");
        assert!(run.stderr.contains(says), "{args:?} says {says:?}:\n{run}");
    }
}

#[test]
fn bad_arguments_are_exit_2_for_every_command_that_takes_them() {
    let f = Fixture::new();
    let cases: &[&[&str]] = &[
        &["decide", "warden.yaml", "--action", "stripe.refund", "--args", "[1]"],
        &["template", "k:{n}", "--args", "{n:1}"],
        &["approve", "apr_x", "--ttl", "soon", "--store", "state.redb"],
        &["resolve", "refund:pay_1", "--store", "state.redb"],
        &["query", "status", "summary", "--config", "warden.yaml", "--credentials-dir", "missing-dir"],
        &["init", "no/such/folder/warden.yaml"],
        &["effects", "--limit", "0", "--store", "state.redb"],
        &["no-such-command"],
    ];
    for args in cases {
        let run = warden(f.path(), args, &[]);
        assert_eq!(run.code, 2, "{args:?}:\n{run}");
    }
}

#[test]
fn the_help_states_the_one_rule() {
    let run = warden(Path::new("."), &["--help"], &[]);
    assert_eq!(run.code, 0, "{run}");
    assert!(run.stdout.contains("Exit codes, one rule for every command:"), "{run}");
    assert!(run.stdout.contains("a document that does not load, for `check` too"), "{run}");
}

/// One kind of mistake, one exit code, whichever file the mistake names: a path that is not a
/// store is 2 like a missing one (a document, the `.lock` beside a store), and a mistyped command
/// is 2 without naming a hidden worker subcommand.
#[test]
fn each_kind_of_mistake_has_one_exit_code() {
    let f = Fixture::new();
    // (arguments, exit code, what stderr says, what it must not say)
    let cases: &[(&[&str], i32, &str, &str)] = &[
        (&["effects", "--store", "missing.redb"], 2, "no store at missing.redb", "internal"),
        (&["effects", "--store", "warden.yaml"], 2, "warden.yaml is not a Warden store", "store error"),
        (&["receipts", "--store", "typo.yaml"], 2, "typo.yaml is not a Warden store", "store error"),
        (&["effects", "--store", "state.redb.lock"], 2, "the lock file", "internal"),
        (&["inspect", "refund:pay_1", "--store", "warden.yaml"], 2, "is not a Warden store", "store error"),
        (&["effects"], 2, "no store at warden.redb", "internal"),
        (&["verfy"], 2, "'verify'", "__"),
        (&["bench-child"], 2, "unrecognized subcommand", "__"),
        (&["inspect", "refund:nobody", "--store", "state.redb"], 1, "nothing known", "internal"),
    ];
    for (args, code, says, never) in cases {
        let run = warden(f.path(), args, &[]);
        assert_eq!(run.code, *code, "{args:?}:\n{run}");
        assert!(run.stderr.contains(says), "{args:?} says {says:?}:\n{run}");
        assert!(!run.stderr.contains(never), "{args:?} must not say {never:?}:\n{run}");
    }
    assert!(!f.file("warden.redb").exists(), "no command created the default store");
}

#[test]
fn the_help_lists_no_hidden_worker_subcommand() {
    let run = warden(Path::new("."), &["--help"], &[]);
    assert_eq!(run.code, 0, "{run}");
    assert!(!run.stdout.contains("__"), "{run}");
}
