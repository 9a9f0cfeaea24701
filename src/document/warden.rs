//! The `warden/v1` dialect: its key sets and the sections only it has.

use serde_json::Value;

use crate::clock::{parse_duration, Micros};

use super::tree::{child_path, Member, NodeValue};
use super::validate::Cx;
use super::DocumentError;

pub(super) const WARDEN_V1: &str = "warden/v1";
pub(super) const WARDEN_TOP_KEYS: [&str; 8] =
    ["actions", "allow_insecure_http", "authority", "environment", "mode", "schema", "sources", "version"];
pub(super) const WARDEN_ENTRY_KEYS: [&str; 7] =
    ["decision", "description", "effect", "lease", "max_attempts", "resource", "rules"];
pub(super) const WARDEN_RULE_KEYS: [&str; 2] = ["decision", "when"];

impl Cx<'_> {
    pub(super) fn allow_insecure_http(&self, member: &Member) -> Result<bool, DocumentError> {
        match member.value.value {
            NodeValue::Bool(b) => Ok(b),
            _ => Err(self.error(
                "allow_insecure_http",
                Some(member.line),
                format!("'allow_insecure_http' must be true or false, got {}", member.value.shown()),
            )),
        }
    }

    pub(super) fn sources(&self, member: &Member) -> Result<Value, DocumentError> {
        if !matches!(member.value.value, NodeValue::Seq(_)) {
            return Err(self.error(
                "sources",
                Some(member.line),
                format!("'sources' must be a list of source windows, got {}", member.value.kind()),
            ));
        }
        self.json(&member.value, "sources")
    }

    /// The `authority` section: a mapping in `warden/v1`, kept as JSON; in a ctrlrun document only
    /// `null` loads.
    pub(super) fn authority(&self, member: &Member) -> Result<Option<Value>, DocumentError> {
        if !self.warden() {
            if member.value.is_null() {
                return Ok(None);
            }
            return Err(self.error(
                "authority",
                Some(member.line),
                "an 'authority' section in a ctrlrun document is not supported: Warden does not implement \
                 ctrlrun's grant semantics or the policy hash taken over them; declare the grants in a \
                 'warden/v1' document",
            ));
        }
        if !matches!(member.value.value, NodeValue::Map(_)) {
            return Err(self.error(
                "authority",
                Some(member.line),
                format!("'authority' must be a mapping (with 'grants'), got {}", member.value.kind()),
            ));
        }
        self.json(&member.value, "authority").map(Some)
    }

    pub(super) fn lease(&self, member: &Member, path: &str) -> Result<Micros, DocumentError> {
        let path = child_path(path, "lease");
        let Some(text) = member.value.as_str() else {
            return Err(self.error(
                &path,
                Some(member.line),
                format!("'lease' must be an ISO 8601 duration such as PT15M, got {}", member.value.shown()),
            ));
        };
        let micros = parse_duration(text).map_err(|e| self.error(&path, Some(member.line), e))?;
        if micros <= 0 {
            return Err(self.error(&path, Some(member.line), "'lease' must be longer than zero"));
        }
        Ok(micros)
    }

    pub(super) fn description(&self, member: &Member, path: &str) -> Result<String, DocumentError> {
        match member.value.as_str() {
            Some(text) => Ok(text.to_owned()),
            None => Err(self.error(
                &child_path(path, "description"),
                Some(member.line),
                format!("'description' must be a string, got {}", member.value.shown()),
            )),
        }
    }
}
