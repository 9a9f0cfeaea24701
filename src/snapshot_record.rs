//! The stored form of a sight snapshot: a leaf type the store and the kernel encode without
//! knowing sights (which use the kernel), so no module cycle runs through it.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::clock::Micros;
use crate::error::{Error, StoreFaultKind};

/// One stored snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotRecord {
    /// `snp_` + 32 hex.
    pub id: String,
    /// Append order, assigned by the store.
    pub seq: u64,
    /// The source's id.
    pub source: String,
    /// The endpoint's id.
    pub endpoint: String,
    /// The window: `[source, endpoint, {param: value}]` with defaults applied, sorted keys.
    pub window: String,
    /// `Source::fingerprint` of the window's configuration when the snapshot was taken.
    pub fingerprint: String,
    /// When the result was fetched.
    pub taken_at: Micros,
    /// The result as JSON text (postcard cannot carry a `serde_json::Value`), `snapshotId`
    /// included.
    pub result: String,
}

impl SnapshotRecord {
    /// The result the agent saw, plus the window's `params`.
    pub fn to_json(&self) -> Result<Value, Error> {
        let mut result: Value = serde_json::from_str(&self.result).map_err(|e| corrupt(&self.id, &e))?;
        let window: Value = serde_json::from_str(&self.window).map_err(|e| corrupt(&self.id, &e))?;
        if let Value::Object(map) = &mut result {
            map.insert("params".into(), window.get(2).cloned().unwrap_or(Value::Object(Map::new())));
        }
        Ok(result)
    }
}

fn corrupt(id: &str, error: &serde_json::Error) -> Error {
    Error::store(
        StoreFaultKind::Damaged,
        format!("snapshot {id} holds unreadable JSON ({error}); the store file was altered"),
    )
}
