//! Opening the files an administrator names (the document, a certificate or CA file, a
//! credential, a password file, a signing key) for reading, refusing what is not a regular file.
//!
//! A leaf: it depends on nothing in the crate (the standard library and `libc` only), so the
//! document loader, the HTTP client, sight credentials, evidence keys and anchors and the store's
//! Postgres files share it without depending on one another.

use std::path::Path;

/// What a file of type `kind` is, in words, when it is not a regular file (`None` when it is).
pub fn not_regular(kind: &std::fs::FileType) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt as _;
    Some(if kind.is_file() {
        return None;
    } else if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a named pipe (FIFO)"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_char_device() || kind.is_block_device() {
        "a device"
    } else {
        "not a file"
    })
}

/// Opens a file the administrator named (the document, a certificate or CA file, a credential,
/// a password file) for reading, and refuses anything that is not a regular file, by what it is.
///
/// A plain `open` of a FIFO nobody writes waits forever, and a device or a socket is never a
/// document: the file is opened without blocking (`O_NONBLOCK`, which changes nothing for reads
/// of a regular file) and its type is checked on the opened descriptor, so a path swapped
/// between a check and the open cannot slip past.
pub fn open_regular(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path)?;
    let Some(what) = not_regular(&file.metadata()?.file_type()) else {
        return Ok(file);
    };
    Err(std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        format!("it is {what}, not a regular file; give the path of a regular file"),
    ))
}

#[cfg(test)]
mod tests {
    use super::open_regular;

    #[test]
    fn open_regular_names_what_is_not_a_regular_file_and_opens_one_that_is() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fifo = dir.path().join("fifo");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().expect("mkfifo").success());
        let socket = dir.path().join("socket");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).expect("bind");
        let file = dir.path().join("file.yaml");
        std::fs::write(&file, "schema: warden/v1\n").expect("write");
        for (path, what) in [
            (fifo.as_path(), "a named pipe (FIFO)"),
            (dir.path(), "a directory"),
            (std::path::Path::new("/dev/null"), "a device"),
        ] {
            let refused = open_regular(path).expect_err("refused");
            assert_eq!(refused.kind(), std::io::ErrorKind::InvalidInput, "{}", path.display());
            assert_eq!(
                refused.to_string(),
                format!("it is {what}, not a regular file; give the path of a regular file")
            );
        }
        // A socket cannot be opened at all (ENXIO): refused by the OS before its type is read.
        assert!(open_regular(&socket).is_err());
        let mut text = String::new();
        std::io::Read::read_to_string(&mut open_regular(&file).expect("a regular file opens"), &mut text)
            .expect("read");
        assert_eq!(text, "schema: warden/v1\n");
    }
}
