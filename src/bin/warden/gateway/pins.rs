//! The pin file: the upstream's tool set as an operator accepted it (the first complete
//! `tools/list` is accepted as it comes), and the latest one observed when it differs. One file
//! per alias beside the store (`<store>.<alias>.pins.json`, or `--pins FILE`), written whole
//! to a temporary file, synced and renamed, under an exclusive lock on `<file>.lock`, so a
//! gateway and `warden gateway pins accept` never interleave. Read back, every digest is
//! recomputed: a file that does not parse, names another alias or whose digests do not match
//! its tools is damaged, and nothing is let through until it is repaired (docs/GATEWAY.md,
//! "Pins over the whole tool set").

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::toolset::ToolSet;

/// The `schema` of a pin file.
pub const SCHEMA: &str = "warden.gateway.pins/v1";

/// The largest pin file read.
const MAX_PIN_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// Who accepted the first set: nobody; it was pinned as it came.
pub const FIRST_LISTING: &str = "first tools/list";

/// A tool set with when it was recorded (and, for the accepted one, by whom).
#[derive(Debug, Clone, PartialEq)]
pub struct Recorded {
    pub set: ToolSet,
    pub at: String,
    pub by: Option<String>,
}

/// What the file holds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Pins {
    pub accepted: Option<Recorded>,
    /// The latest complete listing, when it differs from the accepted set.
    pub observed: Option<Recorded>,
}

/// What identifies one version of the file on disk (a rename gives a new inode).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    inode: u64,
    length: u64,
    modified: i64,
    modified_nanos: i64,
}

pub struct PinFile {
    pub path: PathBuf,
    alias: String,
}

impl PinFile {
    pub fn new(path: PathBuf, alias: &str) -> PinFile {
        PinFile { path, alias: alias.to_owned() }
    }

    /// `<store>.<alias>.pins.json` beside a file store; a PostgreSQL store has no "beside",
    /// so it needs `--pins FILE`.
    pub fn beside(store: &Path, alias: &str) -> Result<PathBuf, String> {
        let location = store.to_string_lossy();
        if warden::store::is_postgres(&location) {
            return Err(format!(
                "the store is a PostgreSQL database, so the gateway's tool-set pins have no file beside it; give --pins FILE (a path every gateway with --alias {alias} shares)"
            ));
        }
        let mut name = store.file_name().map(std::ffi::OsStr::to_os_string).unwrap_or_default();
        name.push(format!(".{alias}.pins.json"));
        Ok(store.with_file_name(name))
    }

    /// The file's stamp, `None` when it does not exist.
    pub fn stamp(&self) -> Result<Option<Stamp>, String> {
        match std::fs::metadata(&self.path) {
            Ok(meta) => Ok(Some(Stamp {
                inode: meta.ino(),
                length: meta.len(),
                modified: meta.mtime(),
                modified_nanos: meta.mtime_nsec(),
            })),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(format!("{}: {error}", self.path.display())),
        }
    }

    /// What the file holds (nothing when it does not exist yet), with its stamp.
    pub fn read(&self) -> Result<(Pins, Option<Stamp>), String> {
        let damaged = |why: String| {
            format!(
                "the pin file {} is damaged ({why}); nothing is let through until it is repaired: restore it, or remove it to pin the next tools/list as it comes",
                self.path.display()
            )
        };
        let before = self.stamp()?;
        let Some(stamp) = before else { return Ok((Pins::default(), None)) };
        let file = warden::files::open_regular(&self.path).map_err(|e| damaged(e.to_string()))?;
        let mut text = Vec::new();
        file.take(MAX_PIN_FILE_BYTES + 1).read_to_end(&mut text).map_err(|e| damaged(e.to_string()))?;
        if text.len() as u64 > MAX_PIN_FILE_BYTES {
            return Err(damaged("it is larger than 64 MiB".into()));
        }
        let document: Value = serde_json::from_slice(&text).map_err(|e| damaged(format!("not JSON: {e}")))?;
        if document.get("schema").and_then(Value::as_str) != Some(SCHEMA) {
            return Err(damaged(format!("its schema is not {SCHEMA}")));
        }
        if document.get("alias").and_then(Value::as_str) != Some(self.alias.as_str()) {
            return Err(damaged(format!("it is not the pin file of alias {:?}", self.alias)));
        }
        let recorded = |member: &str| -> Result<Option<Recorded>, String> {
            let Some(value) = document.get(member).filter(|v| !v.is_null()) else { return Ok(None) };
            let tools: BTreeMap<String, Value> = value
                .get("tools")
                .and_then(Value::as_object)
                .ok_or_else(|| damaged(format!("{member}.tools is not an object")))?
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let set = ToolSet::from_map(tools).map_err(|e| damaged(format!("{member}: {e}")))?;
            if value.get("digest").and_then(Value::as_str) != Some(set.digest().as_str()) {
                return Err(damaged(format!("{member}.digest does not match its tools")));
            }
            let text = |key: &str| value.get(key).and_then(Value::as_str).map(str::to_owned);
            let at = text("at").ok_or_else(|| damaged(format!("{member}.at is missing")))?;
            Ok(Some(Recorded { set, at, by: text("by") }))
        };
        let pins = Pins { accepted: recorded("accepted")?, observed: recorded("observed")? };
        if pins.accepted.is_none() && pins.observed.is_some() {
            return Err(damaged("it has an observed set and no accepted one".into()));
        }
        Ok((pins, Some(stamp)))
    }

    /// Read, change and write back under the lock. `change` returns whether it changed
    /// anything (nothing is written when it did not). The pins as they now are on disk.
    pub fn update(
        &self,
        change: impl FnOnce(&mut Pins) -> Result<bool, String>,
    ) -> Result<(Pins, Option<Stamp>), String> {
        let _lock = self.lock()?;
        let (mut pins, stamp) = self.read()?;
        if !change(&mut pins)? {
            return Ok((pins, stamp));
        }
        self.write(&pins)?;
        let stamp = self.stamp()?;
        Ok((pins, stamp))
    }

    fn lock(&self) -> Result<std::fs::File, String> {
        let mut name = self.path.file_name().map(std::ffi::OsStr::to_os_string).unwrap_or_default();
        name.push(".lock");
        let path = self.path.with_file_name(name);
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| format!("cannot open the pin file's lock {}: {e}", path.display()))?;
        rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)
            .map_err(|e| format!("cannot lock {}: {e}", path.display()))?;
        Ok(file)
    }

    /// The whole file, written to a temporary file beside it, synced, renamed over it, and the
    /// directory synced: a crash leaves the old file or the new one, never a part.
    fn write(&self, pins: &Pins) -> Result<(), String> {
        let recorded = |r: &Option<Recorded>| match r {
            None => Value::Null,
            Some(r) => json!({"digest": r.set.digest(), "at": r.at, "by": r.by, "tools": r.set.tools()}),
        };
        let document = json!({
            "schema": SCHEMA,
            "alias": self.alias,
            "accepted": recorded(&pins.accepted),
            "observed": recorded(&pins.observed),
        });
        let mut text = serde_json::to_vec_pretty(&document).map_err(|e| e.to_string())?;
        text.push(b'\n');
        let mut random = [0u8; 6];
        let _ = getrandom::fill(&mut random);
        let mut name = std::ffi::OsString::from(".");
        name.push(self.path.file_name().unwrap_or_default());
        name.push(format!(".tmp-{}", hex::encode(random)));
        let temporary = self.path.with_file_name(name);
        let written = (|| -> std::io::Result<()> {
            let mut file = std::fs::OpenOptions::new().write(true).create_new(true).open(&temporary)?;
            file.write_all(&text)?;
            file.sync_all()?;
            std::fs::rename(&temporary, &self.path)?;
            let directory = self.path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
            std::fs::File::open(directory)?.sync_all()
        })();
        written.map_err(|e| {
            let _ = std::fs::remove_file(&temporary);
            format!("cannot write the pin file {}: {e}", self.path.display())
        })
    }
}

/// Now, as receipts write it.
pub fn now() -> String {
    use warden::clock::Clock as _;
    warden::clock::render(warden::SystemClock.now())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(names: &[&str]) -> ToolSet {
        let entries: Vec<Value> = names.iter().map(|n| json!({"name": n, "inputSchema": {"type": "object"}})).collect();
        ToolSet::from_entries(&entries).expect("set")
    }

    #[test]
    fn pins_survive_a_reopen_and_a_damaged_file_is_refused_naming_the_fix() {
        let dir = tempfile::tempdir().expect("dir");
        let path = PinFile::beside(&dir.path().join("warden.redb"), "shop").expect("beside");
        assert_eq!(path, dir.path().join("warden.redb.shop.pins.json"));
        let file = PinFile::new(path.clone(), "shop");
        assert_eq!(file.read().expect("no file yet"), (Pins::default(), None));
        let (written, stamp) = file
            .update(|pins| {
                pins.accepted = Some(Recorded { set: set(&["a"]), at: now(), by: Some(FIRST_LISTING.into()) });
                pins.observed = Some(Recorded { set: set(&["a", "b"]), at: now(), by: None });
                Ok(true)
            })
            .expect("written");
        let reopened = PinFile::new(path.clone(), "shop");
        assert_eq!(reopened.read().expect("read"), (written.clone(), stamp));
        let unchanged = file.update(|_| Ok(false)).expect("nothing to write");
        assert_eq!(unchanged.1, stamp, "nothing written, same stamp");

        let text = std::fs::read_to_string(&path).expect("text");
        let table = [
            ("{", "not JSON"),
            (&text.replace(SCHEMA, "warden.gateway.pins/v0") as &str, "schema"),
            (&text.replace("\"shop\"", "\"other\""), "alias"),
            (&text.replacen("\"name\": \"a\"", "\"name\": \"z\"", 1), "not its own"),
            (&text.replacen("\"type\": \"object\"", "\"type\": \"array\"", 1), "digest does not match"),
        ];
        for (damaged, why) in table {
            std::fs::write(&path, damaged).expect("write");
            let error = reopened.read().expect_err(why);
            assert!(error.contains(why) && error.contains("remove it to pin"), "{why}: {error}");
        }
        assert!(PinFile::beside(Path::new("postgresql://db/warden"), "shop").expect_err("pg").contains("--pins FILE"));
    }
}
