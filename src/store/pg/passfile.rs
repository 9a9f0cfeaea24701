//! The password file libpq reads (`PGPASSFILE`, else `~/.pgpass`): lines of
//! `hostname:port:database:username:password`, each of the first four a value or `*`, `\:` and
//! `\\` escaping a colon and a backslash, `#` starting a comment. The first line that matches
//! the connection gives the password. Like libpq, a file that others may read is ignored
//! (with a message naming it, never its content).

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The most of a password file read.
const MAX_BYTES: u64 = 1 << 20;

/// Where the password file is: `PGPASSFILE`, else `~/.pgpass`.
pub(super) fn location() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("PGPASSFILE") {
        return Some(PathBuf::from(path));
    }
    std::env::var_os("HOME").map(|home| Path::new(&home).join(".pgpass"))
}

/// The password for this connection from the file at `path`: `Ok(None)` when the file does
/// not exist or no line matches; `Err` names a file that must not be used (others may read it).
pub(super) fn lookup(path: &Path, host: &str, port: u16, database: &str, user: &str) -> Result<Option<String>, String> {
    let file = match crate::files::open_regular(path) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::InvalidInput => {
            return Err(format!("the password file {} cannot be used ({error}); it was not used", path.display()))
        }
        Err(_) => return Ok(None),
    };
    let mode = file.metadata().map(|m| m.permissions().mode()).unwrap_or(0o777);
    if mode & 0o077 != 0 {
        return Err(format!(
            "the password file {} may be read by others (mode {:o}); it was not used. chmod 600 it",
            path.display(),
            mode & 0o777
        ));
    }
    let mut text = String::new();
    if file.take(MAX_BYTES).read_to_string(&mut text).is_err() {
        return Err(format!("the password file {} is not UTF-8 text; it was not used", path.display()));
    }
    Ok(find(&text, host, port, database, user))
}

/// The first matching line's password.
pub(super) fn find(text: &str, host: &str, port: u16, database: &str, user: &str) -> Option<String> {
    let port = port.to_string();
    text.lines().filter(|line| !line.trim_start().starts_with('#')).find_map(|line| {
        let fields = split(line)?;
        let wanted = [host, port.as_str(), database, user];
        fields[..4].iter().zip(wanted).all(|(field, value)| field == "*" || field == value).then(|| fields[4].clone())
    })
}

/// The five fields of a line, unescaped; `None` for a line that does not have five.
fn split(line: &str) -> Option<[String; 5]> {
    let mut fields: Vec<String> = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => fields.last_mut()?.push(chars.next().unwrap_or('\\')),
            ':' if fields.len() < 5 => fields.push(String::new()),
            other => fields.last_mut()?.push(other),
        }
    }
    fields.try_into().ok()
}

#[cfg(test)]
mod tests {
    use super::find;

    /// (file, host, port, database, user, password found)
    type Case = (&'static str, &'static str, u16, &'static str, &'static str, Option<&'static str>);

    #[test]
    fn the_first_matching_line_gives_the_password() {
        let rows: &[Case] = &[
            ("db.example:5432:warden:agent:s3cret", "db.example", 5432, "warden", "agent", Some("s3cret")),
            ("db.example:5432:warden:agent:s3cret", "db.example", 5433, "warden", "agent", None),
            ("db.example:5432:warden:agent:s3cret", "other", 5432, "warden", "agent", None),
            ("*:*:*:agent:any", "h", 1, "d", "agent", Some("any")),
            ("*:*:*:*:first\n*:*:*:*:second", "h", 1, "d", "u", Some("first")),
            ("# a comment\nh:1:d:u:pw", "h", 1, "d", "u", Some("pw")),
            ("h\\:x:1:d:u:colon", "h:x", 1, "d", "u", Some("colon")),
            ("h:1:d:u:pa\\:ss\\\\word", "h", 1, "d", "u", Some("pa:ss\\word")),
            ("h:1:d:u:with:colons:inside", "h", 1, "d", "u", Some("with:colons:inside")),
            ("h:1:d:u", "h", 1, "d", "u", None),
            ("", "h", 1, "d", "u", None),
            ("h:1:d:u:", "h", 1, "d", "u", Some("")),
        ];
        for (file, host, port, database, user, password) in rows {
            assert_eq!(find(file, host, *port, database, user).as_deref(), *password, "{file:?}");
        }
    }

    /// A FIFO at the password file's path made `open` wait for a writer forever; now it is
    /// refused by what it is, and a missing file is still "no password".
    #[test]
    fn a_fifo_is_refused_by_name_and_a_missing_file_is_none() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fifo = dir.path().join("pgpass");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().expect("mkfifo").success());
        let refused = super::lookup(&fifo, "h", 5432, "d", "u").expect_err("a FIFO is refused");
        assert!(refused.contains("it is a named pipe (FIFO), not a regular file"), "{refused}");
        assert_eq!(super::lookup(&dir.path().join("absent"), "h", 5432, "d", "u"), Ok(None));
    }
}
