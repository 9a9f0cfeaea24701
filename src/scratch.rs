//! A fresh scratch directory under the system's temporary directory, removed when dropped
//! unless it is kept: where `warden verify` and `warden demo` put their throwaway stores, so
//! neither ever touches the operator's own.

use std::path::{Path, PathBuf};

/// A directory this process created (so nothing else's files are in it), named
/// `<prefix>-<pid>-<16 random hex digits>`.
#[derive(Debug)]
pub struct ScratchDir {
    dir: PathBuf,
    keep: bool,
}

impl ScratchDir {
    /// Creates a new directory; an existing one of the same name is an error, never reused.
    pub fn create(prefix: &str) -> std::io::Result<ScratchDir> {
        let mut random = [0u8; 8];
        getrandom::fill(&mut random).map_err(|e| std::io::Error::other(format!("no randomness to name it: {e}")))?;
        let dir = std::env::temp_dir().join(format!("{prefix}-{}-{}", std::process::id(), hex::encode(random)));
        std::fs::create_dir(&dir)?;
        Ok(ScratchDir { dir, keep: false })
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The path of `name` inside the directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Leave the directory in place when this value is dropped.
    pub fn keep(&mut self) {
        self.keep = true;
    }

    /// Removes the directory now, reporting what went wrong (dropping removes it silently).
    pub fn remove(mut self) -> std::io::Result<()> {
        self.keep = true; // `drop` must not try again
        std::fs::remove_dir_all(&self.dir)
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scratch_directory_is_new_and_removed_when_dropped() {
        let first = ScratchDir::create("warden-scratch-test").expect("create");
        let second = ScratchDir::create("warden-scratch-test").expect("create");
        assert_ne!(first.dir(), second.dir());
        std::fs::write(first.path("file"), b"x").expect("write");
        let dir = first.dir().to_path_buf();
        drop(first);
        assert!(!dir.exists());
        let dir = second.dir().to_path_buf();
        second.remove().expect("remove");
        assert!(!dir.exists());
    }

    #[test]
    fn a_kept_scratch_directory_outlives_its_value() {
        let mut scratch = ScratchDir::create("warden-scratch-test").expect("create");
        scratch.keep();
        let dir = scratch.dir().to_path_buf();
        drop(scratch);
        assert!(dir.is_dir());
        std::fs::remove_dir_all(&dir).expect("clean up");
    }
}
