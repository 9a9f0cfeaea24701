//! `warden demo` never touches the operator's store or document: it always runs on a fresh
//! store in a scratch folder of its own, says so when --store/--config (or their variables) are
//! given, and removes the folder unless --keep.

use std::path::Path;
use std::process::Command;

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

/// The demo with `tmp` as its temporary directory and exactly the WARDEN_* variables given.
fn demo(tmp: &Path, args: &[&str], env: &[(&str, &Path)]) -> Run {
    let mut command = Command::new(env!("CARGO_BIN_EXE_warden"));
    command.arg("demo").args(args).env("TMPDIR", tmp).env_remove("WARDEN_STORE").env_remove("WARDEN_CONFIG");
    for (name, value) in env {
        command.env(name, value);
    }
    let output = command.output().expect("run warden demo");
    Run {
        code: output.status.code().expect("exited by a signal"),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn the_demo_ignores_the_users_store_and_document_with_a_note_and_leaves_nothing_behind() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let user = tempfile::tempdir().expect("tempdir");
    let store = user.path().join("live.redb");
    let config = user.path().join("typo.yaml");
    std::fs::write(&config, "schema: warden/v1\nacti0ns: {}\n").expect("write");
    for env in [vec![("WARDEN_STORE", store.as_path()), ("WARDEN_CONFIG", config.as_path())], vec![]] {
        let run = if env.is_empty() {
            demo(tmp.path(), &["--store", store.to_str().unwrap(), "--config", config.to_str().unwrap()], &[])
        } else {
            demo(tmp.path(), &[], &env)
        };
        assert_eq!(run.code, 0, "{run}");
        assert!(run.stderr.contains("the demo ignores --store/WARDEN_STORE"), "{run}");
        assert!(run.stderr.contains("the demo ignores --config/WARDEN_CONFIG"), "{run}");
        assert!(run.stdout.contains("14 receipts, chain verified"), "{run}");
        assert!(
            run.stdout.ends_with("the scratch store is removed; to look closer, run: warden demo --keep\n"),
            "{run}"
        );
        assert!(!store.exists(), "the demo wrote into the user's store");
        assert_eq!(entries(tmp.path()), Vec::<String>::new(), "the scratch folder was removed");
    }
}

#[test]
fn a_second_demo_run_starts_afresh() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let first = demo(tmp.path(), &[], &[]);
    let second = demo(tmp.path(), &[], &[]);
    assert_eq!((first.code, second.code), (0, 0), "{first}\n{second}");
    let story = |run: &Run| run.stdout.lines().filter(|l| !l.starts_with("store: ")).collect::<Vec<_>>().join("\n");
    assert_eq!(story(&first), story(&second));
    assert_eq!(second.stderr, "", "{second}");
}

#[test]
fn keep_leaves_the_scratch_store_and_prints_a_command_that_works_as_printed() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let run = demo(tmp.path(), &["--keep"], &[]);
    assert_eq!(run.code, 0, "{run}");
    let folders = entries(tmp.path());
    assert_eq!(folders.len(), 1, "{folders:?}");
    assert!(folders[0].starts_with("warden-demo-"), "{folders:?}");
    let store = tmp.path().join(&folders[0]).join("demo.redb");
    assert!(store.is_file());
    let last = run.stdout.lines().last().expect("a last line");
    let command = last.strip_prefix("the scratch store is kept; look closer: ").expect(last);
    assert_eq!(command, format!("warden --store {} receipts", store.display()));
    // The command, run as printed (the temporary path has no character the shell would split).
    let words: Vec<&str> = command.split(' ').collect();
    let output = Command::new(env!("CARGO_BIN_EXE_warden"))
        .args(&words[1..])
        .env_remove("WARDEN_STORE")
        .env_remove("WARDEN_CONFIG")
        .output()
        .expect("run the printed command");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(String::from_utf8_lossy(&output.stdout).lines().count(), 15, "a header and fourteen receipts");
}
