//! Sights: confined reads. Administrators define where the windows are; agents decide which
//! window to look through; agents never punch holes in the wall.
//!
//! `config` validates the `sources:` section at load; `confine` turns an agent's
//! (source, endpoint, params, fields) into a URL the administrator's config already allows;
//! `credentials` resolves a reference per request; `http` performs the one GET with every
//! bound enforced while streaming; `shape` selects, redacts and prunes the response, with
//! `echo` scrubbing whatever the upstream echoes of the credential sent.

pub mod api;
pub mod config;
pub mod confine;
pub mod credentials;
pub mod echo;
pub mod query;
pub mod shape;
pub mod snapshot;
pub mod tool_schema;

// The error type lives in the error module's leaf `error::sight`, so `error` never names
// this module; the paths under `sight` stay as they were.
pub use crate::error::sight::{SightError, SightKind, ERROR_CODES};
