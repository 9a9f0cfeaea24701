//! The README quotes `warden demo` verbatim, store paths aside: a changed demo fails here
//! until the README is updated with a real run.

use std::process::Command;

/// Replace the one thing that differs between runs: where the store lives.
fn normalized(text: &str) -> String {
    let pattern = regex::Regex::new(r"/\S*warden-demo-\d+/demo\.redb").expect("pattern");
    pattern.replace_all(text, "<STORE>").into_owned()
}

#[test]
fn the_readme_quotes_the_demo_verbatim() {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_warden")).arg("demo").env("TMPDIR", dir.path()).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let demo = normalized(&String::from_utf8(output.stdout).unwrap());
    let readme = normalized(&std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap());
    assert!(
        readme.contains(demo.trim_end()),
        "README.md does not quote the current `warden demo` output; paste a real run:\n{demo}"
    );
}
