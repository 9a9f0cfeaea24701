//! What this build is and how a shell learns it: `warden --version [--json]` (one version for
//! the crate, the CLI, the bindings, the C ABI and the store schema), `warden completions SHELL`
//! and `warden man-pages DIR`, both generated from the clap definition itself.

use std::path::Path;

use clap::CommandFactory;
use clap_complete::Shell;
use serde_json::json;

use crate::exit::Failure;
use crate::output::document;
use crate::Cli;

/// The distribution name on crates.io and PyPI, where `warden` is an unrelated project; it
/// installs the library `warden` (Rust `use warden::…`, Python `import warden`).
pub const DISTRIBUTION: &str = "warden-effects";
/// The package name on npm, which is also what `require` takes.
pub const NPM_PACKAGE: &str = "warden";

/// `warden --version`: the version on the first line (`warden 0.1.0`, as clap prints it), then
/// the C ABI and store schema it implements. With `--json`, one document with the same facts.
pub fn version(json: bool) -> String {
    let version = env!("CARGO_PKG_VERSION");
    let abi = warden::ffi::WARDEN_ABI_VERSION;
    let schema = warden::store::SCHEMA_VERSION;
    if json {
        return document(&json!({
            "name": "warden",
            "version": version,
            "abi_version": abi,
            "store_schema": schema,
            "distributions": {
                "crates_io": DISTRIBUTION,
                "pypi": DISTRIBUTION,
                "npm": NPM_PACKAGE,
            },
        }));
    }
    format!("warden {version}\nC ABI version {abi}, store schema {schema}\n")
}

/// `warden completions SHELL`: the completion script on stdout, to be sourced by that shell.
pub fn completions(shell: Shell) -> String {
    let mut command = Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command, "warden", &mut script);
    // clap_complete writes only what it built from our own definition, which is UTF-8.
    String::from_utf8_lossy(&script).into_owned()
}

/// `warden man-pages DIR`: `warden.1` and one `warden-SUBCOMMAND.1` per visible subcommand.
pub fn man_pages(dir: &Path, json: bool) -> Result<String, Failure> {
    if !dir.is_dir() {
        return Err(Failure::usage(format!(
            "{} is not a directory; create it first (mkdir -p {})",
            dir.display(),
            dir.display()
        )));
    }
    // Each page's header names the version (clap gives it to the top-level command only).
    let command = Cli::command().mut_subcommands(|sub| sub.version(env!("CARGO_PKG_VERSION")));
    clap_mangen::generate_to(command, dir)
        .map_err(|e| Failure::config(format!("cannot write the man pages into {}: {e}", dir.display())))?;
    let mut pages: Vec<String> = std::fs::read_dir(dir)
        .map_err(|e| Failure::config(format!("cannot list {}: {e}", dir.display())))?
        .filter_map(|entry| entry.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .filter(|name| name.starts_with("warden") && name.ends_with(".1"))
        .collect();
    pages.sort();
    if json {
        return Ok(document(&json!({"dir": dir.display().to_string(), "pages": pages})));
    }
    Ok(format!("wrote {} man pages into {}\n", pages.len(), dir.display()))
}
