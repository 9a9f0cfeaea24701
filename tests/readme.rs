//! The README quotes `warden demo` verbatim, store paths aside: a changed demo fails here
//! until the README is updated with a real run.

use std::process::Command;

/// Replace the one thing that differs between runs: where the store lives.
fn normalized(text: &str) -> String {
    let pattern = regex::Regex::new(r"/\S*warden-demo-\d+-[0-9a-f]{16}/demo\.redb").expect("pattern");
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

/// `#define WARDEN_RESULT_NAME N` in the generated header.
fn header_codes() -> Vec<(String, u32)> {
    let header = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/include/warden.h")).unwrap();
    let pattern = regex::Regex::new(r"(?m)^#define WARDEN_RESULT_([A-Z_]+) (\d+)$").expect("pattern");
    pattern.captures_iter(&header).map(|c| (c[1].to_owned(), c[2].parse().unwrap())).collect()
}

#[test]
fn the_readme_lists_every_result_code_of_the_header() {
    let codes = header_codes();
    assert!(codes.len() >= 19, "the header's codes were not found: {codes:?}");
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let start = readme.find("Result codes (append-only)").expect("the README's result-code list");
    let list: String = readme[start..].split("\n\n").next().unwrap().split_whitespace().collect::<Vec<_>>().join(" ");
    for (name, code) in codes {
        if name == "OK" {
            continue;
        }
        assert!(list.contains(&format!("`{code}` {name}")), "README.md's result codes lack `{code}` {name}:\n{list}");
    }
}
