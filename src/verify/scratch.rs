//! The scratch store verify runs in: a fresh temporary directory, never the live store.

use std::path::PathBuf;

use crate::error::{Error, Result, StoreFaultKind};
use crate::scratch::ScratchDir;

/// The scratch directory, its I/O errors reported as store errors (verify cannot run without it),
/// and where the scratch stores go: files in it, or schemas of their own in a PostgreSQL
/// database (`run_on`), dropped at the end.
pub(super) struct Scratch {
    dir: ScratchDir,
    #[cfg(feature = "postgres")]
    postgres: Option<crate::store::ScratchSchemas>,
}

impl Scratch {
    pub(super) fn create(postgres: Option<&str>) -> Result<Scratch> {
        let dir = ScratchDir::create("warden-verify").map_err(|e| {
            Error::store(
                StoreFaultKind::Io,
                format!("cannot create a scratch directory under {}: {e}", std::env::temp_dir().display()),
            )
        })?;
        #[cfg(feature = "postgres")]
        let postgres = postgres.map(crate::store::ScratchSchemas::new).transpose()?;
        #[cfg(not(feature = "postgres"))]
        if postgres.is_some() {
            return Err(Error::Config(
                "this build has no PostgreSQL support; build with --features postgres to verify on PostgreSQL".into(),
            ));
        }
        Ok(Scratch {
            dir,
            #[cfg(feature = "postgres")]
            postgres,
        })
    }

    pub(super) fn path(&self, name: &str) -> PathBuf {
        self.dir.path(name)
    }

    /// A new scratch store named `name`: a file in the directory, or a fresh PostgreSQL schema.
    pub(super) fn store(&self, name: &str) -> Result<PathBuf> {
        #[cfg(feature = "postgres")]
        if let Some(schemas) = &self.postgres {
            return schemas.location(name).map(PathBuf::from);
        }
        Ok(self.path(&format!("{name}.redb")))
    }
}
