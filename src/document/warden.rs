//! The `warden/v1` dialect: its key sets and the sections only it has.

use serde_json::Value;

use crate::clock::{parse_duration, Micros};
use crate::sight::config::{parse_detailed, Sources};

use super::cx::Cx;
use super::error::DocumentError;
use super::tree::{child_path, Member, Node, NodeValue};

pub(super) const WARDEN_TOP_KEYS: [&str; 12] = [
    "actions",
    "allow_insecure_http",
    "authority",
    "environment",
    "evidence",
    "gateway",
    "mode",
    "notify",
    "schema",
    "sign_in",
    "sources",
    "version",
];
pub(super) const WARDEN_ENTRY_KEYS: [&str; 10] =
    ["approval", "decision", "description", "effect", "lease", "max_attempts", "mcp", "resource", "rules", "upstream"];
pub(super) const WARDEN_RULE_KEYS: [&str; 3] = ["approval", "decision", "when"];

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

    /// The sights configuration (`crate::sight::config`), validated fail-fast; empty when absent.
    /// A refusal names the config path and, where the path can be followed, its line.
    pub(super) fn sources_config(
        &self,
        member: Option<&Member>,
        sources: Option<&Value>,
        allow_insecure_http: Option<bool>,
    ) -> Result<Sources, DocumentError> {
        let (Some(member), Some(sources)) = (member, sources) else {
            return Ok(Sources::default());
        };
        parse_detailed(sources, allow_insecure_http).map_err(|e| {
            let line = line_of(&member.value, &e.path).unwrap_or(member.line);
            self.error(&e.path, Some(line), e.message)
        })
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
                 ctrlrun's grant semantics or the policy hash taken over them; declare the grants (their \
                 'tasks' and 'budgets' included) in a 'warden/v1' document",
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

/// The line of the node a sights config path (`sources[0].endpoints[1].path`) points at, as deep
/// as the path can be followed.
fn line_of(sources: &Node, path: &str) -> Option<usize> {
    let rest = path.strip_prefix("sources")?;
    let mut node = sources;
    let mut line = sources.line;
    let mut rest = rest;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('[') {
            let end = after.find(']')?;
            let index: usize = after.get(..end)?.parse().ok()?;
            let NodeValue::Seq(items) = &node.value else { return Some(line) };
            let Some(item) = items.get(index) else { return Some(line) };
            node = item;
            line = item.line;
            rest = after.get(end + 1..)?;
        } else if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            let key = after.get(..end)?;
            let NodeValue::Map(members) = &node.value else { return Some(line) };
            let Some(member) = members.iter().find(|m| m.key == key) else { return Some(line) };
            node = &member.value;
            line = member.line;
            rest = after.get(end..)?;
        } else {
            return Some(line);
        }
    }
    Some(line)
}
