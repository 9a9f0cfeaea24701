//! The console's approvers: who may log in, and the one-time login token each was given.
//!
//! The library has no registry of people (an approver is whoever the host names, asserted or
//! verified by its identity provider), and the store's rows are the kernel's, so the console
//! keeps its own small file beside the store: `<store>.approvers` (or `--approvers FILE`),
//! mode 0600, replaced whole by rename under an exclusive lock on `<file>.lock`. Each entry
//! holds the name, its roles, a random entry id (a session names it, so removing a name and
//! adding it again never revives an old session) and the SHA-256 of its login token until the
//! token is used. The token itself is printed once by `warden approvers add` and kept nowhere.
//!
//! An approver added with `--operator` holds a long-lived operator token instead (`wot_…`), for
//! `warden operator`'s MCP clients: an MCP client cannot exchange a one-time token for a
//! session, so it presents this bearer token on every request. Only its SHA-256 is kept; it
//! stops working when the approver is removed (`warden approvers remove`), and a new one is
//! issued by removing and adding the name again.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::exit::Failure;
use crate::output::{document, shown};

/// The format line of the file.
const FORMAT: &str = "warden-console-approvers/1";
/// A login token starts with this, so a leaked one is recognisable (secret scanners).
pub const TOKEN_PREFIX: &str = "wct_";
/// The agent every console approver answers as (`console:NAME`).
pub const AGENT: &str = "console";
/// An operator token (`warden approvers add NAME --operator`) starts with this.
pub const OPERATOR_TOKEN_PREFIX: &str = "wot_";
/// The largest registry file read (a few thousand approvers).
const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;

/// One registered approver.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Entry {
    /// The name, as the approver's user (`console:NAME`).
    pub name: String,
    /// Roles a requirement may ask for.
    #[serde(default)]
    pub roles: Vec<String>,
    /// A random id of this registration; sessions name it.
    pub entry_id: String,
    /// `sha256:<hex>` of the login token while it is unused; `None` once used.
    pub token_sha256: Option<String>,
    /// When it was added (RFC 3339).
    pub added_at: String,
    /// When its token was exchanged for a session, if it was.
    #[serde(default)]
    pub logged_in_at: Option<String>,
    /// `sha256:<hex>` of its long-lived operator token (`--operator`), if it was given one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator_token_sha256: Option<String>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Registry {
    format: String,
    approvers: Vec<Entry>,
}

/// Where the registry is: the file named, else `<store>.approvers` beside a file store. A
/// PostgreSQL store has no "beside", so it needs `--approvers`.
pub fn registry_path(named: Option<&Path>, store: &Path) -> Result<PathBuf, Failure> {
    if let Some(named) = named.filter(|p| !p.as_os_str().is_empty()) {
        return Ok(named.to_path_buf());
    }
    if store.to_str().is_some_and(warden::store::is_postgres) {
        return Err(Failure::usage(
            "a PostgreSQL store has no folder to keep the console's approvers in; name a file with --approvers FILE",
        ));
    }
    let mut name = store.as_os_str().to_owned();
    name.push(".approvers");
    Ok(PathBuf::from(name))
}

/// 32 random bytes as lowercase hex.
pub fn random_hex() -> Result<String, Failure> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| Failure::internal(format!("no randomness for a token: {e}")))?;
    Ok(hex::encode(bytes))
}

/// `sha256:<hex>` of a token.
pub fn token_hash(token: &str) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(token.as_bytes())))
}

/// Constant-time equality of two strings (their lengths are not secret).
pub fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

/// An approver's name: one plain name with no separator, as the kernel checks the user of an
/// approver given as fields (`person::check_principal`), so `console:NAME` is what answers.
pub fn check_name(name: &str) -> Result<(), Failure> {
    let principal = warden::Principal::new(AGENT, Some(name))
        .map_err(|e| Failure::usage(format!("the approver name {}: {e}", shown(name))))?;
    warden::approval::person::check_principal(&principal)
        .map_err(|e| Failure::usage(format!("the approver name: {}", shown(&e.to_string()))))
}

/// The approver a registered entry answers as: `AGENT:NAME` (`console:ada`, `operator:ada`),
/// recorded as verified by `issuer` with the entry's roles and how it signed in (`amr`).
pub fn verified_approver(
    agent: &str,
    issuer: &str,
    amr: &str,
    name: &str,
    roles: &[String],
) -> Result<warden::approval::Approver, Failure> {
    let principal =
        warden::Principal::new(agent, Some(name)).map_err(|e| Failure::usage(format!("the approver name: {e}")))?;
    let claims = json!({"sub": name, "roles": roles, "amr": [amr]});
    let verified = warden::approval::person::Verified::new(Some(issuer), &claims).map_err(Failure::usage)?;
    Ok(warden::approval::Approver::verified(principal, verified))
}

/// The registry file, locked for the whole of one read-modify-write (or one read).
struct Locked {
    path: PathBuf,
    _lock: File,
}

impl Locked {
    fn open(path: &Path) -> Result<Locked, Failure> {
        let mut lock_name = path.as_os_str().to_owned();
        lock_name.push(".lock");
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(PathBuf::from(&lock_name))
            .map_err(|e| Failure::usage(format!("cannot open the approvers' lock {}: {e}", shown_path(path))))?;
        rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive)
            .map_err(|e| Failure::internal(format!("cannot lock the approvers file: {e}")))?;
        Ok(Locked { path: path.to_path_buf(), _lock: lock })
    }

    fn read(&self) -> Result<Registry, Failure> {
        read_file(&self.path)
    }

    /// Replace the file whole: a temporary file (0600) beside it, synced, renamed over it.
    fn write(&self, registry: &Registry) -> Result<(), Failure> {
        let text = serde_json::to_string_pretty(registry)
            .map_err(|e| Failure::internal(format!("cannot write the approvers file: {e}")))?;
        let mut tmp_name = self.path.as_os_str().to_owned();
        tmp_name.push(format!(".tmp{}", std::process::id()));
        let tmp = PathBuf::from(tmp_name);
        let written = (|| {
            let mut file = OpenOptions::new().create(true).truncate(true).write(true).mode(0o600).open(&tmp)?;
            file.write_all(text.as_bytes())?;
            file.write_all(b"\n")?;
            file.sync_all()?;
            std::fs::rename(&tmp, &self.path)?;
            if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
                File::open(dir)?.sync_all()?;
            }
            Ok::<(), std::io::Error>(())
        })();
        written.map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            Failure::internal(format!("cannot write the approvers file {}: {e}", shown_path(&self.path)))
        })
    }
}

fn shown_path(path: &Path) -> String {
    shown(&path.display().to_string())
}

fn read_file(path: &Path) -> Result<Registry, Failure> {
    let mut file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Registry { format: FORMAT.to_owned(), approvers: Vec::new() })
        }
        Err(e) => return Err(Failure::usage(format!("cannot read the approvers file {}: {e}", shown_path(path)))),
    };
    let mut text = String::new();
    Read::by_ref(&mut file)
        .take(MAX_FILE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| Failure::usage(format!("cannot read the approvers file {}: {e}", shown_path(path))))?;
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(Failure::usage(format!("the approvers file {} is larger than 4 MiB", shown_path(path))));
    }
    let registry: Registry = serde_json::from_str(&text).map_err(|e| {
        Failure::usage(format!("the approvers file {} is not one the console wrote: {e}", shown_path(path)))
    })?;
    if registry.format != FORMAT {
        return Err(Failure::usage(format!(
            "the approvers file {} has format {:?}, not {FORMAT}",
            shown_path(path),
            registry.format
        )));
    }
    Ok(registry)
}

/// The entry registered under `name` with this entry id, if it still is (removal ends every
/// session of it). Any doubt — an unreadable file — is `None`.
pub fn current(path: &Path, entry_id: &str) -> Option<Entry> {
    let registry = read_file(path).ok()?;
    registry.approvers.into_iter().find(|entry| same(&entry.entry_id, entry_id))
}

/// Exchange a login token for its entry: the entry whose unused token hashes alike, its token
/// then spent (written before the session exists). `None` for an unknown, used or malformed
/// token, or any fault.
pub fn redeem(path: &Path, token: &str) -> Option<Entry> {
    if !token.starts_with(TOKEN_PREFIX) || token.len() > 200 {
        return None;
    }
    let wanted = token_hash(token);
    let locked = Locked::open(path).ok()?;
    let mut registry = locked.read().ok()?;
    let mut found = None;
    // Every entry is compared, so the time taken does not say which one matched.
    for (i, entry) in registry.approvers.iter().enumerate() {
        let matches = entry.token_sha256.as_deref().is_some_and(|hash| same(hash, &wanted));
        if matches && found.is_none() {
            found = Some(i);
        }
    }
    let index = found?;
    let entry = registry.approvers.get_mut(index)?;
    entry.token_sha256 = None;
    entry.logged_in_at = Some(warden::clock::render(warden::Clock::now(&warden::SystemClock)));
    let spent = entry.clone();
    locked.write(&registry).ok()?;
    Some(spent)
}

/// The entry whose operator token this is, read from the registry now (a removed approver's
/// token is nobody's). `None` for an unknown or malformed token, or any fault; nothing is
/// written.
pub fn operator(path: &Path, token: &str) -> Option<Entry> {
    if !token.starts_with(OPERATOR_TOKEN_PREFIX) || token.len() > 200 {
        return None;
    }
    let wanted = token_hash(token);
    let registry = read_file(path).ok()?;
    let mut found = None;
    // Every entry is compared, so the time taken does not say which one matched.
    for entry in registry.approvers {
        let matches = entry.operator_token_sha256.as_deref().is_some_and(|hash| same(hash, &wanted));
        if matches && found.is_none() {
            found = Some(entry);
        }
    }
    found
}

/// `warden approvers add NAME [--role R]... [--operator]`: register NAME and print its token on
/// the last line: a one-time console login token, or with `operator` a long-lived operator token
/// for `warden operator`. A name already registered is refused (remove it first to issue a new
/// one).
pub fn add(path: &Path, name: &str, roles: &[String], operator: bool, json: bool) -> Result<String, Failure> {
    check_name(name)?;
    for role in roles {
        warden::approval::check_person_name("a role", role).map_err(|e| Failure::usage(e.to_string()))?;
    }
    let locked = Locked::open(path)?;
    let mut registry = locked.read()?;
    let key = warden::approval::person::person_key(name);
    if let Some(existing) = registry.approvers.iter().find(|e| warden::approval::person::person_key(&e.name) == key) {
        return Err(Failure::check(
            "exists",
            format!(
                "{} is already registered (as {}); `warden approvers remove {}` first to issue a new token",
                shown(name),
                shown(&existing.name),
                shown(&existing.name)
            ),
        ));
    }
    let prefix = if operator { OPERATOR_TOKEN_PREFIX } else { TOKEN_PREFIX };
    let token = format!("{prefix}{}", random_hex()?);
    let hash = Some(token_hash(&token));
    let entry = Entry {
        name: name.trim().to_owned(),
        roles: roles.iter().map(|r| r.trim().to_owned()).collect(),
        entry_id: random_hex()?,
        token_sha256: if operator { None } else { hash.clone() },
        added_at: warden::clock::render(warden::Clock::now(&warden::SystemClock)),
        logged_in_at: None,
        operator_token_sha256: if operator { hash } else { None },
    };
    registry.format = FORMAT.to_owned();
    registry.approvers.push(entry.clone());
    locked.write(&registry)?;
    Ok(if json {
        document(&json!({"name": entry.name, "roles": entry.roles, "approvers_file": path.display().to_string(),
                         "operator": operator, "token": token}))
    } else if operator {
        format!(
            "approver {} added to {}; its operator token (long-lived, shown once, stored only as a hash; give it to \
             your MCP client as WARDEN_OPERATOR_TOKEN or a --token-file for `warden operator --stdio`, or as \
             `Authorization: Bearer` over HTTP; `warden approvers remove` revokes it):\n{token}\n",
            shown(&entry.name),
            shown_path(path)
        )
    } else {
        format!(
            "approver {} added to {}; its one-time login token (shown once, stored only as a hash; paste it into the \
             console's sign-in form):\n{token}\n",
            shown(&entry.name),
            shown_path(path)
        )
    })
}

/// `warden approvers remove NAME`: the entry and every session of it are gone.
pub fn remove(path: &Path, name: &str, json: bool) -> Result<String, Failure> {
    let locked = Locked::open(path)?;
    let mut registry = locked.read()?;
    let key = warden::approval::person::person_key(name);
    let before = registry.approvers.len();
    registry.approvers.retain(|e| warden::approval::person::person_key(&e.name) != key);
    if registry.approvers.len() == before {
        return Err(Failure::check("not_found", format!("no approver {} in {}", shown(name), shown_path(path))));
    }
    locked.write(&registry)?;
    Ok(if json {
        document(&json!({"removed": name}))
    } else {
        format!("approver {} removed; its sessions end at their next request\n", shown(name))
    })
}

/// `warden approvers list`: names, roles, whether the login token is still unused or the entry
/// holds an operator token. No hash is shown.
pub fn list(path: &Path, json: bool) -> Result<String, Failure> {
    let registry = read_file(path)?;
    if json {
        let rows: Vec<Value> = registry
            .approvers
            .iter()
            .map(|e| {
                json!({"name": e.name, "roles": e.roles, "token_unused": e.token_sha256.is_some(),
                       "operator": e.operator_token_sha256.is_some(),
                       "added_at": e.added_at, "logged_in_at": e.logged_in_at})
            })
            .collect();
        return Ok(document(&Value::Array(rows)));
    }
    if registry.approvers.is_empty() {
        return Ok("no approvers\n".to_owned());
    }
    let rows = registry
        .approvers
        .iter()
        .map(|e| {
            vec![
                shown(&e.name),
                if e.roles.is_empty() { "-".to_owned() } else { shown(&e.roles.join(",")) },
                match (&e.operator_token_sha256, &e.token_sha256) {
                    (Some(_), _) => "operator".to_owned(),
                    (None, Some(_)) => "unused".to_owned(),
                    (None, None) => "used".to_owned(),
                },
                e.added_at.clone(),
            ]
        })
        .collect();
    Ok(crate::output::table(Some(&["NAME", "ROLES", "TOKEN", "ADDED"]), rows))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_redeemed_once_and_its_hash_alone_is_stored() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.approvers");
        let out = add(&path, "ada", &[], false, false).unwrap();
        let token = out.lines().last().unwrap().to_owned();
        assert!(token.starts_with(TOKEN_PREFIX));
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains(&token[TOKEN_PREFIX.len()..]), "the token itself is stored");
        assert!(text.contains(&token_hash(&token)));
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        for wrong in ["", "wct_", "wct_00", &token.to_uppercase(), &format!("{token}x")] {
            assert!(redeem(&path, wrong).is_none(), "{wrong:?}");
        }
        let entry = redeem(&path, &token).unwrap();
        assert_eq!(entry.name, "ada");
        assert!(redeem(&path, &token).is_none(), "a token works once");
        assert!(current(&path, &entry.entry_id).is_some());
        assert!(add(&path, "ADA", &[], false, false).is_err(), "one person, one entry");
        remove(&path, "ada", false).unwrap();
        assert!(current(&path, &entry.entry_id).is_none());
        assert!(remove(&path, "ada", false).is_err());
    }

    #[test]
    fn an_operator_token_is_long_lived_hashed_and_ends_with_its_approver() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.approvers");
        let out = add(&path, "bob", &["finance".to_owned()], true, false).unwrap();
        let token = out.lines().last().unwrap().to_owned();
        assert!(token.starts_with(OPERATOR_TOKEN_PREFIX), "{out}");
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains(&token[OPERATOR_TOKEN_PREFIX.len()..]), "the token itself is stored");
        for _ in 0..2 {
            assert_eq!(operator(&path, &token).map(|e| e.roles), Some(vec!["finance".to_owned()]), "works again");
        }
        assert!(redeem(&path, &token).is_none(), "an operator token is no console login");
        let login = add(&path, "ada", &[], false, false).unwrap();
        let login = login.lines().last().unwrap();
        assert!(operator(&path, login).is_none(), "a console login token is no operator token");
        let wrong_prefix = format!("{TOKEN_PREFIX}{}", &token[OPERATOR_TOKEN_PREFIX.len()..]);
        for wrong in ["", "wot_", &token.to_uppercase(), &format!("{token}x"), &wrong_prefix] {
            assert!(operator(&path, wrong).is_none(), "{wrong:?}");
        }
        remove(&path, "bob", false).unwrap();
        assert!(operator(&path, &token).is_none(), "removal revokes it");
    }

    #[test]
    fn names_that_cannot_answer_as_console_user_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.approvers");
        for bad in ["", " ", "cli:ada", "a/b", "a\u{200B}b", "_", &"n".repeat(201)] {
            assert!(add(&path, bad, &[], false, false).is_err(), "{bad:?}");
        }
        assert!(!path.exists());
    }
}
