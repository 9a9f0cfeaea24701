//! The `warden` binary's authority commands, driven as an operator would: `delegate` (a grant
//! file, `--as AGENT[/USER]`, recorded created_via cli), `delegations [--json]`, `revoke` (one
//! id, `--created-by`, `--under`), and the refusals with their exit codes.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

const DOCUMENT: &str = r#"schema: warden/v1
environment: production
actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    rules:
      - decision: allow
authority:
  grants:
    - id: head-of-finance
      subject: { agent: finance-console, user: alice }
      actions: [stripe.refund]
      constraints: { amount_lte: 100000 }
      expires_at: "2099-01-01T00:00:00Z"
      delegable: true
"#;

const FINANCE: &str = r#"subject: { agent: finance-agent, user: alice }
actions: [stripe.refund]
constraints: { amount_lte: 25000 }
expires_at: "2098-01-01T00:00:00Z"
delegable: true
"#;

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

struct Setup {
    dir: tempfile::TempDir,
}

impl Setup {
    /// The document, the grant files, and a store created by opening it once.
    fn new() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("warden.yaml"), DOCUMENT).unwrap();
        std::fs::write(dir.path().join("finance.yaml"), FINANCE).unwrap();
        std::fs::write(dir.path().join("wider.yaml"), FINANCE.replace("25000", "150000")).unwrap();
        std::fs::write(dir.path().join("open.yaml"), FINANCE.replace("constraints: { amount_lte: 25000 }\n", ""))
            .unwrap();
        let document = warden::document::load_str(DOCUMENT, "warden.yaml").unwrap();
        drop(warden::pipeline::Warden::open(dir.path().join("state.redb"), document, Default::default()).unwrap());
        Setup { dir }
    }

    fn run(&self, args: &[&str]) -> Run {
        let output = Command::new(env!("CARGO_BIN_EXE_warden"))
            .args(args)
            .current_dir(self.dir.path())
            .env("WARDEN_STORE", self.dir.path().join("state.redb"))
            .env("WARDEN_CONFIG", self.dir.path().join("warden.yaml"))
            .env("USER", "ciso")
            .output()
            .unwrap();
        Run {
            code: output.status.code().unwrap(),
            stdout: String::from_utf8(output.stdout).unwrap(),
            stderr: String::from_utf8(output.stderr).unwrap(),
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

fn json(run: &Run) -> Value {
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}):\n{run}"))
}

#[test]
fn delegate_list_and_revoke_from_the_command_line() {
    let s = Setup::new();
    let run = s.run(&[
        "delegate",
        "--parent",
        "head-of-finance",
        "--file",
        "finance.yaml",
        "--as",
        "finance-console/alice",
        "--json",
    ]);
    assert_eq!(run.code, 0, "{run}");
    let created = json(&run);
    let id = created["delegation_id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("dlg_") && id.len() == 36, "{run}");
    assert_eq!(created["created_via"], "cli", "an act typed at a shell says so");
    assert_eq!(created["created_by"]["user"], "alice");

    let listed = s.run(&["delegations"]);
    assert_eq!(listed.code, 0, "{listed}");
    assert!(listed.stdout.starts_with(&format!("{id}  depth 1  under head-of-finance  to finance-agent")), "{listed}");
    assert!(listed.stdout.contains("via cli  live"), "{listed}");

    let revoked = s.run(&["revoke", &id]);
    assert_eq!((revoked.code, revoked.stdout.as_str()), (0, format!("{id}  revoked\n").as_str()), "{revoked}");
    let again = s.run(&["revoke", &id, "--json"]);
    assert_eq!(again.code, 0, "{again}");
    assert_eq!(json(&again)["delegations"][0]["revoked"], false);
    assert_eq!(json(&again)["revoked_by"], "cli:ciso");
    let listed = json(&s.run(&["delegations", "--json"]));
    assert_eq!(listed[0]["revoked"], true);
    assert_eq!(listed[0]["revoked_by"], "cli:ciso");
}

#[test]
fn refusals_are_exit_1_with_reason_and_dimension() {
    let s = Setup::new();
    let wider = s.run(&[
        "delegate",
        "--parent",
        "head-of-finance",
        "--file",
        "wider.yaml",
        "--as",
        "finance-console/alice",
        "--json",
    ]);
    assert_eq!(wider.code, 1, "{wider}");
    let error = &json(&wider)["error"];
    assert_eq!((error["reason"].as_str(), error["dimension"].as_str()), (Some("containment"), Some("constraints")));
    assert!(wider.stderr.contains("refused (containment on constraints)"), "{wider}");
    let open =
        s.run(&["delegate", "--parent", "head-of-finance", "--file", "open.yaml", "--as", "finance-console/alice"]);
    assert_eq!(open.code, 1, "omitting a constraint is not unlimited:\n{open}");
    let stranger =
        s.run(&["delegate", "--parent", "head-of-finance", "--file", "finance.yaml", "--as", "intruder/alice"]);
    assert_eq!(stranger.code, 1, "{stranger}");
    assert!(stranger.stderr.contains("not_the_subject"), "{stranger}");
    let unknown = s.run(&["revoke", "dlg_00000000000000000000000000000000"]);
    assert_eq!(unknown.code, 1, "{unknown}");
    assert_eq!(s.run(&["delegations"]).stdout, "no delegations\n");
    // Usage errors: a trailing slash, two selectors, no selector, a missing grant file.
    assert_eq!(
        s.run(&["delegate", "--parent", "head-of-finance", "--file", "finance.yaml", "--as", "finance-console/"]).code,
        2
    );
    assert_eq!(s.run(&["revoke", "dlg_x", "--under", "head-of-finance"]).code, 2);
    assert_eq!(s.run(&["revoke"]).code, 2);
    assert_eq!(s.run(&["delegate", "--parent", "head-of-finance", "--file", "missing.yaml", "--as", "a"]).code, 2);
    assert!(s.path().join("state.redb").exists());
}

#[test]
fn sweeps_revoke_by_creator_and_beneath_an_id() {
    let s = Setup::new();
    let first = json(&s.run(&[
        "delegate",
        "--parent",
        "head-of-finance",
        "--file",
        "finance.yaml",
        "--as",
        "finance-console/alice",
        "--json",
    ]));
    let first = first["delegation_id"].as_str().unwrap().to_owned();
    std::fs::write(
        s.path().join("support.yaml"),
        FINANCE.replace("finance-agent", "support-agent").replace("25000", "2000"),
    )
    .unwrap();
    let second = json(&s.run(&[
        "delegate",
        "--parent",
        &first,
        "--file",
        "support.yaml",
        "--as",
        "finance-agent/alice",
        "--json",
    ]));
    let second = second["delegation_id"].as_str().unwrap().to_owned();
    let swept = s.run(&["revoke", "--created-by", "finance-agent", "--json"]);
    assert_eq!(swept.code, 0, "{swept}");
    assert_eq!(json(&swept)["delegations"], serde_json::json!([{"delegation_id": second, "revoked": true}]));
    let under = s.run(&["revoke", "--under", "head-of-finance"]);
    assert_eq!(under.code, 0, "{under}");
    let mut lines: Vec<&str> = under.stdout.lines().collect();
    lines.sort_unstable();
    let mut expected = vec![format!("{first}  revoked"), format!("{second}  already revoked")];
    expected.sort();
    assert_eq!(lines, expected, "{under}");
    assert_eq!(s.run(&["revoke", "--under", "nothing-here"]).stdout, "nothing to revoke\n");
}

#[test]
fn budgets_list_each_window_with_what_it_holds_and_what_is_left() {
    let dir = tempfile::tempdir().unwrap();
    let text = DOCUMENT.replace(
        "      delegable: true\n",
        "      delegable: true\n      budgets: [{ metric: amount, limit: 100000, window: P1D }, { metric: count, limit: 3, window: PT1H }]\n",
    );
    std::fs::write(dir.path().join("warden.yaml"), &text).unwrap();
    let document = warden::document::load_str(&text, "warden.yaml").unwrap();
    let warden = warden::pipeline::Warden::open(dir.path().join("state.redb"), document, Default::default()).unwrap();
    for (payment, amount) in [("p1", 4200), ("p2", 800)] {
        let request = warden::pipeline::ActionRequest::new(
            "stripe.refund",
            serde_json::json!({"payment_id": payment, "amount": amount}),
            warden::Principal::new("finance-console", Some("alice")).unwrap(),
        );
        warden.submit(&request).unwrap().commit(&serde_json::json!({"ok": true})).unwrap();
    }
    drop(warden);
    let s = Setup { dir };
    let listed = json(&s.run(&["budgets", "--json"]));
    let rows: Vec<(&str, &str, &str, &str)> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            (
                row["grant_id"].as_str().unwrap(),
                row["metric"].as_str().unwrap(),
                row["spent"].as_str().unwrap(),
                row["left"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(rows, [("head-of-finance", "amount", "5000", "95000"), ("head-of-finance", "count", "2", "1")]);
    let table = s.run(&["budgets"]);
    assert_eq!(table.code, 0, "{table}");
    assert!(table.stdout.starts_with("GRANT"), "{table}");
    assert!(table.stdout.contains("86400s"), "{table}");
    // Without the document only the store's delegations are listed, and it says so.
    let bare = Command::new(env!("CARGO_BIN_EXE_warden"))
        .args(["budgets", "--store"])
        .arg(s.path().join("state.redb"))
        .env_remove("WARDEN_CONFIG")
        .env_remove("WARDEN_STORE")
        .output()
        .unwrap();
    assert_eq!(bare.status.code(), Some(0), "{bare:?}");
    assert_eq!(
        String::from_utf8_lossy(&bare.stdout),
        "(delegations only: give --config FILE for the document's grants)\nno budgets\n"
    );
}
