//! `warden init [PATH]`: write a commented starter document that `check` accepts and `verify`
//! passes. An existing file is never overwritten without `--force`.

use std::io::Write;
use std::path::Path;

use serde_json::json;

use warden::document::load_str;
use warden::hint::shell_word;

use crate::exit::Failure;
use crate::output::{document, shown};

/// The starter document (`starter.yaml` next to this file).
pub const STARTER: &str = include_str!("starter.yaml");

pub fn init(path: &Path, force: bool, json: bool) -> Result<String, Failure> {
    let shown_path = shown(&path.display().to_string());
    // The starter is a constant, but a build whose loader refuses it must not write it.
    let starter = load_str(STARTER, "the starter document")
        .map_err(|e| Failure::internal(format!("the built-in starter document does not load: {e}")))?;
    let mut options = std::fs::OpenOptions::new();
    options.write(true);
    if force {
        options.create(true).truncate(true);
    } else {
        // create_new: no window between "does it exist" and "write it".
        options.create_new(true);
    }
    let mut file = match options.open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
            return Err(Failure::check(
                "exists",
                format!("{shown_path} already exists; it was left as it is (pass --force to overwrite it)"),
            ));
        }
        Err(error) => return Err(Failure::usage(format!("cannot create {shown_path}: {error}"))),
    };
    file.write_all(STARTER.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|e| Failure::internal(format!("cannot write {shown_path}: {e}")))?;
    if json {
        return Ok(document(&json!({
            "path": path.display().to_string(),
            "policy_hash": starter.policy_hash,
        })));
    }
    let word = shell_word(&path.display().to_string());
    Ok(format!(
        "wrote {shown_path} (policy {})\nnext: warden check {word}, then warden verify --config {word}\n",
        starter.policy_hash
    ))
}
