//! A store a user may read but not write: the read commands work (the store opens read-only,
//! without its lock file), a write command is refused as a permission problem (exit 2) naming
//! the store, and nothing is written. Runs the CLI as the unprivileged user `nobody` (CI runs
//! as root; elsewhere the test says it is skipped).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

fn warden() -> &'static str {
    env!("CARGO_BIN_EXE_warden")
}

fn as_nobody(args: &[&str], store: &Path) -> Output {
    Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(warden())
        .arg("--store")
        .arg(store)
        .args(args)
        .env("WARDEN_WRITE_WAIT_MS", "2000")
        .output()
        .expect("setpriv runs")
}

fn text(output: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

#[test]
fn a_user_who_may_only_read_a_store_can_read_it_and_a_write_is_a_permission_error() {
    if !rustix::process::getuid().is_root() {
        eprintln!("SKIPPED: needs root to run the CLI as another user (CI runs as root)");
        return;
    }
    let top = tempfile::tempdir().unwrap();
    let dir = top.path().join("shared");
    std::fs::create_dir(&dir).unwrap();
    let store = dir.join("state.redb");
    // A store with a pending approval and a receipt, written as root.
    let config = dir.join("warden.yaml");
    assert!(Command::new(warden()).arg("init").arg(&config).output().unwrap().status.success());
    {
        let w = warden::pipeline::Warden::open_files(&store, &config, Default::default()).unwrap();
        let principal = warden::kernel::principal("support-agent", Some("ada")).unwrap();
        let request = warden::pipeline::ActionRequest::new(
            "stripe.refund",
            serde_json::json!({"payment_id": "pay_ro", "amount": 1200}),
            principal.clone(),
        );
        w.submit(&request).unwrap().commit(&serde_json::json!({"ok": true})).unwrap();
        let big = warden::pipeline::ActionRequest::new(
            "stripe.refund",
            serde_json::json!({"payment_id": "pay_big", "amount": 120_000}),
            principal,
        );
        assert!(w.submit(&big).is_err());
    }
    // Readable by everyone; the directory and the lock file writable only by root.
    for path in [&top.path().to_path_buf(), &dir] {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::fs::set_permissions(&store, std::fs::Permissions::from_mode(0o644)).unwrap();
    let before = std::fs::read(&store).unwrap();

    for args in [
        &["receipts"][..],
        &["pending"],
        &["effects"],
        &["receipts", "--verify-chain"],
        &["doctor"],
        &["stats"],
        &["delegations"],
        &["budgets"],
    ] {
        let output = as_nobody(args, &store);
        assert!(output.status.success(), "warden {args:?} as nobody: {}", text(&output));
    }
    let pending = text(&as_nobody(&["--json", "pending"], &store));
    assert!(pending.contains("apr_"), "{pending}");

    // A command that opens a handle under a document only to read, a document the store keeps
    // no policy for: the handle keeps none (a user who cannot write could not), and the command
    // gets to its own answer.
    let other = dir.join("other.yaml");
    std::fs::write(&other, "schema: warden/v1\nactions:\n  other.read:\n    decision: allow\n").unwrap();
    std::fs::set_permissions(&other, std::fs::Permissions::from_mode(0o644)).unwrap();
    let under_document = as_nobody(&["--config", other.to_str().unwrap(), "diff", "snp_a", "snp_b"], &store);
    let said = text(&under_document);
    assert_eq!(under_document.status.code(), Some(1), "{said}");
    assert!(said.contains("is not a snapshot id") && !said.contains("read-only"), "{said}");

    let refused = as_nobody(&["resolve", "refund:pay_ro", "--committed", "--by", "ops:ada"], &store);
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused));
    let message = text(&refused);
    assert!(message.contains("read-only") && message.contains("state.redb"), "{message}");
    assert!(!message.contains(".lock"), "the message is about the store, not a sidecar file: {message}");
    assert!(std::fs::read(&store).unwrap() == before, "a read-only user changed the store");
}
