//! The policy hash: ctrlrun's definition for ctrlrun documents, Warden's for `warden/v1`.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::canonical::{canonical_bytes_with, sha256_prefixed};
use crate::decision::Decision;
use crate::template::Template;

use super::cx::Cx;
use super::error::{DocumentError, WHOLE_DOCUMENT};
use super::model::{ActionEntry, Mode};
use super::schema_kind::WARDEN_V1;
use super::tree::Member;

const DEFAULT_CTRLRUN_ENVIRONMENT: &str = "production";

impl Cx<'_> {
    /// The canonical bytes of a canonical policy, and `sha256:` + hex over them: the policy
    /// hash and the document it is the hash of, taken in one place. A `warden/v1` policy holds
    /// the floats its conditions admitted, written as RFC 8785 does; a ctrlrun one holds none.
    pub(super) fn policy_hash(&self, canonical: &Value) -> Result<(String, Vec<u8>), DocumentError> {
        let bytes = canonical_bytes_with(canonical, "", self.schema.floats())
            .map_err(|e| self.error(WHOLE_DOCUMENT, None, format!("the policy cannot be hashed: {e}")))?;
        Ok((sha256_prefixed(&bytes), bytes))
    }

    /// ctrlrun's `_canonical_policy`: the raw `actions` and `controls` sections as PyYAML
    /// produced them, the resolved environment, the mode and the schema. `authority` is `None`
    /// because a ctrlrun document with a non-null one is refused (`Cx::authority`).
    pub(super) fn ctrlrun_canonical(
        &self,
        actions: Option<&Member>,
        controls: Option<&Member>,
        environment: Option<&str>,
        mode: Mode,
    ) -> Result<Value, DocumentError> {
        let section = |member: Option<&Member>, key: &str| match member {
            None => Ok(Value::Null),
            Some(member) => self.json(&member.value, key),
        };
        let mut canonical = Map::new();
        canonical.insert("actions".into(), section(actions, "actions")?);
        canonical.insert("authority".into(), Value::Null);
        canonical.insert("controls".into(), section(controls, "controls")?);
        canonical
            .insert("environment".into(), Value::String(environment.unwrap_or(DEFAULT_CTRLRUN_ENVIRONMENT).to_owned()));
        canonical.insert("mode".into(), Value::String(mode.as_str().into()));
        canonical.insert("schema".into(), Value::String(self.schema.name()));
        Ok(Value::Object(canonical))
    }

    /// `warden/v1`: the parsed decision inputs, every entry in one fixed shape (absent fields
    /// are `null`), rules in document order, leases in microseconds.
    pub(super) fn warden_canonical(
        &self,
        actions: &BTreeMap<String, ActionEntry>,
        authority: Option<&Value>,
        environment: Option<&str>,
        mode: Mode,
        sources: Option<&Value>,
    ) -> Value {
        let optional_string = |s: Option<&str>| s.map_or(Value::Null, |s| Value::String(s.to_owned()));
        let mut entries = Map::new();
        for (name, entry) in actions {
            let mut object = Map::new();
            object.insert("decision".into(), optional_string(entry.decision.map(Decision::as_str)));
            let rules = entry
                .rules
                .iter()
                .map(|rule| {
                    let when: Map<String, Value> =
                        rule.when.iter().map(|c| (c.key.clone(), c.operand.clone())).collect();
                    let mut object = Map::new();
                    object.insert("decision".into(), Value::String(rule.decision.as_str().into()));
                    object.insert("when".into(), Value::Object(when));
                    // Only when present, so every document without one keeps its hash.
                    if let Some(approval) = &rule.approval {
                        object.insert("approval".into(), approval_json(approval, rule.scoped.as_ref()));
                    }
                    Value::Object(object)
                })
                .collect();
            object.insert("rules".into(), Value::Array(rules));
            object.insert("effect".into(), optional_string(entry.effect.as_ref().map(Template::source)));
            object.insert("resource".into(), optional_string(entry.resource.as_ref().map(Template::source)));
            object.insert("max_attempts".into(), entry.max_attempts.map_or(Value::Null, Value::from));
            object.insert("lease".into(), entry.lease.map_or(Value::Null, Value::from));
            object.insert("description".into(), optional_string(entry.description.as_deref()));
            if let Some(approval) = &entry.approval {
                object.insert("approval".into(), approval_json(approval, entry.scoped.as_ref()));
            }
            entries.insert(name.clone(), Value::Object(object));
        }
        let mut canonical = Map::new();
        canonical.insert("actions".into(), Value::Object(entries));
        canonical.insert("authority".into(), authority.cloned().unwrap_or(Value::Null));
        canonical.insert("environment".into(), optional_string(environment));
        canonical.insert("mode".into(), Value::String(mode.as_str().into()));
        canonical.insert("schema".into(), Value::String(WARDEN_V1.into()));
        canonical.insert("sources".into(), sources.cloned().unwrap_or(Value::Null));
        Value::Object(canonical)
    }
}

/// An `approval` as the canonical policy holds it: `{required, roles}`, and `scoped` only when the
/// rule allows scoped grants (so every document without one keeps its hash, and one with it
/// hashes what a human may authorize).
fn approval_json(
    approval: &crate::approval::Requirement,
    scoped: Option<&crate::approval::scope::ScopeLimits>,
) -> Value {
    let mut json = approval.to_json();
    if let (Some(scoped), Some(map)) = (scoped, json.as_object_mut()) {
        map.insert("scoped".into(), scoped.to_json());
    }
    json
}
