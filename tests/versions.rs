//! One version everywhere, and the shell integration generated from the CLI's definition.
//!
//! The crate, the CLI, the Python and Node packages, the changelog, the C ABI constant each
//! binding is written for and the store schema must agree; `warden --version --json` reports
//! them together. The bash completion is loaded into a real bash and asked to complete.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

const VERSION: &str = env!("CARGO_PKG_VERSION");
const DISTRIBUTION: &str = env!("CARGO_PKG_NAME");

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &str) -> String {
    let path = repo().join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// The value of the first line `KEY = "VALUE"` (TOML, Python) in `text`.
fn quoted_assignment(text: &str, key: &str) -> Option<String> {
    text.lines().find_map(|line| {
        let rest = line.trim().strip_prefix(key)?.trim_start().strip_prefix('=')?.trim();
        Some(rest.strip_prefix('"')?.strip_suffix('"')?.to_owned())
    })
}

fn warden(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_warden"))
        .args(args)
        .env_remove("WARDEN_STORE")
        .env_remove("WARDEN_CONFIG")
        .output()
        .expect("run warden");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).expect("stdout is UTF-8"),
        String::from_utf8(out.stderr).expect("stderr is UTF-8"),
    )
}

#[test]
fn every_package_declares_the_crate_version_and_distribution_name() {
    let pyproject = read("bindings/python/pyproject.toml");
    assert_eq!(quoted_assignment(&pyproject, "version").as_deref(), Some(VERSION), "bindings/python/pyproject.toml");
    assert_eq!(quoted_assignment(&pyproject, "name").as_deref(), Some(DISTRIBUTION), "bindings/python/pyproject.toml");
    let init = read("bindings/python/warden/__init__.py");
    assert_eq!(quoted_assignment(&init, "__version__").as_deref(), Some(VERSION), "warden.__version__");

    let package: Value = serde_json::from_str(&read("bindings/node/package.json")).expect("package.json is JSON");
    assert_eq!(package["version"], VERSION, "bindings/node/package.json");
    // npm has no `warden` package, so there the name is the one `require('warden')` takes.
    assert_eq!(package["name"], "warden", "bindings/node/package.json");
    let addon = read("bindings/node/Cargo.toml");
    assert_eq!(quoted_assignment(&addon, "version").as_deref(), Some(VERSION), "bindings/node/Cargo.toml");

    // Keep a Changelog: the newest release heading is this version.
    let changelog = read("CHANGELOG.md");
    let newest = changelog
        .lines()
        .find_map(|line| line.strip_prefix("## [").filter(|rest| !rest.starts_with("Unreleased")))
        .and_then(|rest| rest.split(']').next());
    assert_eq!(newest, Some(VERSION), "the newest release in CHANGELOG.md");
}

#[test]
fn every_binding_is_written_for_the_abi_this_library_implements() {
    let abi = warden::ffi::WARDEN_ABI_VERSION;
    let python = read("bindings/python/warden/_ffi.py");
    assert!(python.lines().any(|l| l == format!("ABI_VERSION = {abi}")), "ABI_VERSION in warden/_ffi.py is not {abi}");
    // The Node binding states it where it loads the addon (lib/native.js), and index.js exports it.
    let node = read("bindings/node/lib/native.js");
    assert!(
        node.lines().any(|l| l == format!("const ABI_VERSION = {abi};")),
        "ABI_VERSION in bindings/node/lib/native.js is not {abi}"
    );
    let index = read("bindings/node/index.js");
    assert!(
        index.lines().any(|l| l.starts_with("const { ABI_VERSION,") && l.ends_with("require('./lib/native');")),
        "bindings/node/index.js does not take ABI_VERSION from lib/native.js"
    );
    let types = read("bindings/node/index.d.ts");
    assert!(
        types.lines().any(|l| l == format!("export declare const ABI_VERSION: {abi};")),
        "ABI_VERSION in index.d.ts is not {abi}"
    );
}

#[test]
fn version_json_reports_the_crate_abi_and_store_schema_together() {
    let (code, stdout, stderr) = warden(&["--version", "--json"]);
    assert_eq!(code, 0, "{stderr}");
    let report: Value = serde_json::from_str(&stdout).expect("--version --json prints one JSON document");
    assert_eq!(report["version"], VERSION);
    assert_eq!(report["abi_version"], warden::ffi::WARDEN_ABI_VERSION);
    assert_eq!(report["store_schema"], warden::store::SCHEMA_VERSION);
    assert_eq!(report["distributions"]["crates_io"], DISTRIBUTION);
    assert_eq!(report["distributions"]["pypi"], DISTRIBUTION);
    assert_eq!(report["distributions"]["npm"], "warden");

    let (code, stdout, _) = warden(&["--version"]);
    assert_eq!(code, 0);
    assert_eq!(stdout.lines().next(), Some(format!("warden {VERSION}").as_str()));
}

#[test]
fn no_command_is_a_usage_error() {
    let (code, stdout, stderr) = warden(&[]);
    assert_eq!(code, 2, "{stdout}{stderr}");
    assert!(stderr.contains("warden --help"), "{stderr}");
}

/// Source the generated script in bash and ask it to complete `warden <words>` at the end.
fn bash_complete(script: &Path, words: &[&str]) -> Vec<String> {
    let line = std::iter::once("warden").chain(words.iter().copied()).collect::<Vec<_>>().join(" ");
    let program = format!(
        "source {script}\n\
         COMP_WORDS=({line}); COMP_CWORD={cword}; COMP_LINE='{line}'; COMP_POINT=${{#COMP_LINE}}\n\
         _warden warden \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"\n\
         printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        script = script.display(),
        cword = words.len(),
    );
    let out = Command::new("bash").arg("--norc").arg("-c").arg(program).output().expect("run bash");
    assert!(out.status.success(), "bash: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("UTF-8").lines().map(str::to_owned).filter(|l| !l.is_empty()).collect()
}

#[test]
fn the_bash_completion_completes_subcommands_and_their_options() {
    let (code, script, stderr) = warden(&["completions", "bash"]);
    assert_eq!(code, 0, "{stderr}");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("warden.bash");
    std::fs::write(&path, script).expect("write the completion script");

    assert_eq!(bash_complete(&path, &["appr"]), ["approve", "approvers"]);
    assert_eq!(bash_complete(&path, &["approvers", "r"]), ["remove"]);
    assert_eq!(bash_complete(&path, &["oper"]), ["operator"]);
    let operator = bash_complete(&path, &["operator", "--"]);
    for flag in ["--stdio", "--listen", "--token-file", "--approvers"] {
        assert!(operator.iter().any(|o| o == flag), "{flag}: {operator:?}");
    }
    assert!(
        !operator.iter().any(|o| o.contains("token") && o != "--token-file"),
        "a token is never an argument: {operator:?}"
    );
    assert_eq!(bash_complete(&path, &["completions", "f"]), ["fish"]);
    let options = bash_complete(&path, &["approve", "--"]);
    assert!(options.iter().any(|o| o == "--by") && options.iter().any(|o| o == "--yes"), "{options:?}");
    // Every command is offered (clap_complete also lists the hidden `__*-child` workers, whose
    // names start with `__` so that no word a person types completes to them).
    let all = bash_complete(&path, &[""]);
    for command in ["demo", "approve", "gateway", "operator", "stats", "completions", "man-pages"] {
        assert!(all.iter().any(|c| c == command), "{command} missing from {all:?}");
    }
    assert!(all.iter().filter(|c| c.contains("child")).all(|c| c.starts_with("__")), "{all:?}");
}

#[test]
fn zsh_and_fish_completions_name_the_subcommands() {
    let (code, zsh, _) = warden(&["completions", "zsh"]);
    assert_eq!(code, 0);
    assert!(zsh.starts_with("#compdef warden"), "{}", &zsh[..zsh.len().min(80)]);
    assert!(zsh.contains("'approve:"), "zsh completion lacks approve");
    let (code, fish, _) = warden(&["completions", "fish"]);
    assert_eq!(code, 0);
    assert!(fish.contains("-a \"approve\""), "fish completion lacks approve");
    let (code, _, stderr) = warden(&["completions", "tcsh"]);
    assert_eq!(code, 2, "{stderr}");
}

#[test]
fn man_pages_are_written_for_the_command_and_each_subcommand() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (code, stdout, stderr) = warden(&["man-pages", &dir.path().display().to_string(), "--json"]);
    assert_eq!(code, 0, "{stderr}");
    let report: Value = serde_json::from_str(&stdout).expect("JSON");
    let pages: Vec<&str> = report["pages"].as_array().expect("pages").iter().filter_map(Value::as_str).collect();
    assert!(pages.contains(&"warden.1") && pages.contains(&"warden-approve.1"), "{pages:?}");
    assert!(!pages.iter().any(|p| p.contains("child")), "{pages:?}");
    let approve = std::fs::read_to_string(dir.path().join("warden-approve.1")).expect("warden-approve.1");
    let title = format!(".TH warden-approve 1  \"approve {VERSION}\"");
    assert!(approve.lines().any(|l| l.trim_end() == title), "no {title} in {}", &approve[..approve.len().min(200)]);
    assert!(approve.contains("\\-\\-by"), "the page documents --by");

    let missing = dir.path().join("absent");
    let (code, _, stderr) = warden(&["man-pages", &missing.display().to_string()]);
    assert_eq!(code, 2);
    assert!(stderr.contains("mkdir -p"), "{stderr}");
}
