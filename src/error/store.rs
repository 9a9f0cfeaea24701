//! What kind of store fault happened, for callers that branch on it. The message says what
//! happened and what to do; the kind is what code matches on (the CLI's exit code, the open
//! path's retries, a binding's exception class), so no caller reads the wording.

/// A store fault: its kind and the message derived from what happened.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StoreFault {
    /// What a caller branches on.
    pub kind: StoreFaultKind,
    /// What happened and what to do, in words (never a secret or an argument value).
    pub message: String,
}

impl std::fmt::Display for StoreFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// The kinds of store fault. Every kind fails closed: nothing was decided from the fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum StoreFaultKind {
    /// The operating system failed an operation: a read, write, sync, lock, socket, thread or
    /// the random source.
    Io,
    /// The device (or the user's quota) is full.
    NoSpace,
    /// This user may not open, write or reach the store (a usage problem, not a damaged store).
    Permission,
    /// A row, table, file, journal or chain is damaged, missing, replaced or altered; `warden
    /// doctor` names what.
    Damaged,
    /// Written or served by another Warden version (schema, row layout, wire protocol).
    Version,
    /// The store needs a crash recovery that only a user who may write it can run.
    NeedsRecovery,
    /// The path holds a file that is not a Warden store.
    NotAStore,
    /// There is no store at the path (reading never creates one).
    Absent,
    /// A process outside the owner protocol holds the file open.
    Busy,
    /// A limit of this process (descriptors, nested forks, a number too large to store).
    Limit,
    /// The store was closed, or its writer stopped at an earlier fault.
    Stopped,
    /// A defect of this build: a lock poisoned by a panic, a re-entered buffer, a broken
    /// internal invariant.
    Defect,
}

impl StoreFaultKind {
    /// The kind as error objects spell it (`"no_space"`, `"damaged"`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            StoreFaultKind::Io => "io",
            StoreFaultKind::NoSpace => "no_space",
            StoreFaultKind::Permission => "permission",
            StoreFaultKind::Damaged => "damaged",
            StoreFaultKind::Version => "version",
            StoreFaultKind::NeedsRecovery => "needs_recovery",
            StoreFaultKind::NotAStore => "not_a_store",
            StoreFaultKind::Absent => "absent",
            StoreFaultKind::Busy => "busy",
            StoreFaultKind::Limit => "limit",
            StoreFaultKind::Stopped => "stopped",
            StoreFaultKind::Defect => "defect",
        }
    }
}

impl StoreFaultKind {
    /// The kind for an operating system error: a full device or quota is `NoSpace`, a refused
    /// permission `Permission`, anything else `Io`.
    pub(crate) fn of_io(error: &std::io::Error) -> StoreFaultKind {
        match error.kind() {
            std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded => StoreFaultKind::NoSpace,
            std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem => StoreFaultKind::Permission,
            _ => StoreFaultKind::Io,
        }
    }

    /// The kind for a redb error: its I/O errors as `of_io` says, corruption `Damaged`.
    pub(crate) fn of_redb(error: &redb::Error) -> StoreFaultKind {
        match error {
            redb::Error::Io(error) => StoreFaultKind::of_io(error),
            redb::Error::Corrupted(_) => StoreFaultKind::Damaged,
            _ => StoreFaultKind::Io,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::StoreFaultKind::{self, *};

    #[test]
    fn every_kind_is_spelled_as_serde_spells_it() {
        let all =
            [Io, NoSpace, Permission, Damaged, Version, NeedsRecovery, NotAStore, Absent, Busy, Limit, Stopped, Defect];
        let mut seen = std::collections::HashSet::new();
        for kind in all {
            let serde = serde_json::to_value(kind).unwrap();
            assert_eq!(serde, kind.as_str(), "{kind:?}");
            assert!(seen.insert(kind.as_str()), "{kind:?} is spelled like another kind");
            assert_eq!(serde_json::from_value::<StoreFaultKind>(serde).unwrap(), kind);
        }
    }

    #[test]
    fn operating_system_errors_map_to_their_kind() {
        let os = |code| std::io::Error::from_raw_os_error(code);
        let table = [
            (os(28), NoSpace, "ENOSPC"),
            (os(122), NoSpace, "EDQUOT"),
            (os(13), Permission, "EACCES"),
            (os(1), Permission, "EPERM"),
            (os(30), Permission, "EROFS"),
            (os(5), Io, "EIO"),
            (os(2), Io, "ENOENT"),
        ];
        for (error, kind, name) in table {
            assert_eq!(StoreFaultKind::of_io(&error), kind, "{name}");
            assert_eq!(StoreFaultKind::of_redb(&redb::Error::Io(error)), kind, "{name} through redb");
        }
        assert_eq!(StoreFaultKind::of_redb(&redb::Error::Corrupted("page".into())), Damaged);
        assert_eq!(StoreFaultKind::of_redb(&redb::Error::DatabaseClosed), Io);
    }
}
