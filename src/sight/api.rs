//! The sight surface of a `Warden`: the administrator's document supplies the windows, the
//! kernel's store keeps the snapshots, the kernel's clock stamps them. Every entry point takes
//! the agent's arguments as JSON and refuses unknown keys before any I/O.

use serde_json::Value;

use super::confine::{confine, Query};
use super::credentials::CredentialProvider;
use super::query::fetch_confined;
use super::shape::SightResult;
use super::{snapshot, tool_schema};
use crate::error::Error;
use crate::http::CancelToken;
use crate::pipeline::Warden;

impl Warden {
    /// The configured windows as agents may name them (`warden_sources`).
    pub fn sources(&self) -> Value {
        tool_schema::catalog(&self.document().sources_config)
    }

    /// The four tool definitions (`warden_sources`, `warden_query`, `warden_history`,
    /// `warden_diff`).
    pub fn tool_schema(&self) -> Value {
        tool_schema::tool_schema(&self.document().sources_config)
    }

    /// One confined read: `{source, endpoint, params?, fields?, snapshot?}`. With
    /// `snapshot: true` the shaped result is appended to the store in one write transaction
    /// and carries its `snapshotId`; a failed fetch stores nothing.
    pub fn query(
        &self,
        query: &Value,
        provider: &dyn CredentialProvider,
        cancel: &CancelToken,
    ) -> Result<SightResult, Error> {
        // Guarded like every kernel operation: a poisoned handle sends nothing, and a store
        // fault or panic here poisons it.
        self.kernel().guarded(|kernel, now| {
            let parsed = Query::from_json(query).map_err(Error::Sight)?;
            let confined = confine(&self.document().sources_config, &parsed).map_err(Error::Sight)?;
            let result = fetch_confined(&confined, provider, cancel, now).map_err(Error::Sight)?;
            if parsed.snapshot {
                snapshot::append(kernel, &confined, result, now)
            } else {
                Ok(result)
            }
        })
    }

    /// A page of snapshots, newest first (`warden_history`); see `snapshot::history`.
    pub fn history(&self, request: &Value) -> Result<Value, Error> {
        self.kernel().guarded(|kernel, _| snapshot::history(kernel, &self.document().sources_config, request))
    }

    /// The bounded difference of two snapshots of one window (`warden_diff`); see
    /// `snapshot::diff`.
    pub fn diff(&self, request: &Value) -> Result<Value, Error> {
        self.kernel().guarded(|kernel, _| snapshot::diff(kernel, &self.document().sources_config, request))
    }
}
