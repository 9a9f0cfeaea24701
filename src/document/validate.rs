//! Validation of the resolved tree into a [`Document`], the shape both dialects share.

use std::collections::BTreeMap;

use crate::template::{Template, TemplateMode};

use super::ctrlrun::{CTRLRUN_ENTRY_KEYS, CTRLRUN_TOP_KEYS, DATA_SCOPE, POLICY_CHANGE_ACTION};
use super::cx::Cx;
use super::error::DocumentError;
use super::model::{ActionEntry, Document, Mode};
use super::quote::shorten;
use super::tree::{child_path, is_blank, Member, Node, NodeValue};
use super::warden::{WARDEN_ENTRY_KEYS, WARDEN_TOP_KEYS};
use super::warnings::write_without_effect;

impl Cx<'_> {
    fn template_mode(&self) -> TemplateMode {
        if self.warden() {
            TemplateMode::Escaped
        } else {
            TemplateMode::Raw
        }
    }

    pub(super) fn document(&self, root: Node) -> Result<Document, DocumentError> {
        let NodeValue::Map(members) = &root.value else {
            return Err(self.error(
                "",
                Some(root.line),
                format!("the document must be a mapping, got {}", root.kind()),
            ));
        };
        let allowed: &[&str] = if self.warden() { &WARDEN_TOP_KEYS } else { &CTRLRUN_TOP_KEYS };
        self.reject_unknown(members, allowed, "")?;
        let get = |key: &str| members.iter().find(|m| m.key == key);

        self.ctrlrun_top_level_needs(members)?;

        let environment = match get("environment") {
            None => None,
            Some(member) => Some(self.non_empty_string(member, "environment")?),
        };
        let version = match get("version") {
            None => None,
            Some(member) => Some(self.non_empty_string(member, "version")?),
        };
        let mode = match get("mode") {
            None => Mode::Enforce,
            Some(member) => match member.value.as_str() {
                Some("enforce") => Mode::Enforce,
                Some("observe") => Mode::Observe,
                _ => {
                    return Err(self.error(
                        "mode",
                        Some(member.line),
                        format!("'mode' must be exactly 'enforce' or 'observe', got {}", member.value.shown()),
                    ))
                }
            },
        };
        let allow_insecure_http = match get("allow_insecure_http") {
            None => None,
            Some(member) => Some(self.allow_insecure_http(member)?),
        };
        let authority = match get("authority") {
            None => None,
            Some(member) => self.authority(member)?,
        };
        let authority_config = match (get("authority"), &authority) {
            (Some(member), Some(_)) => Some(self.authority_config(member)?),
            _ => None,
        };
        let sources = match get("sources") {
            None => None,
            Some(member) => Some(self.sources(member)?),
        };
        let sources_config = self.sources_config(get("sources"), sources.as_ref(), allow_insecure_http)?;
        if let Some(member) = get("controls") {
            self.no_op_controls_registry(member)?;
        }
        let notify = match get("notify") {
            None => None,
            Some(member) => Some(self.notify(member, allow_insecure_http)?),
        };
        let evidence = match get("evidence") {
            None => None,
            Some(member) => Some(self.evidence(member)?),
        };
        let sign_in = match get("sign_in") {
            None => None,
            Some(member) => Some(self.sign_in(member)?),
        };
        let gateway = match get("gateway") {
            None => Default::default(),
            Some(member) => self.gateway(member)?,
        };

        let mut actions = BTreeMap::new();
        let mut warnings = Vec::new();
        match get("actions") {
            None if self.warden() => {}
            None => return Err(self.error(
                "",
                Some(root.line),
                "missing 'actions'; a policy maps action names to entries, and an action it does not list is denied",
            )),
            Some(member) => {
                let NodeValue::Map(entries) = &member.value.value else {
                    return Err(self.error(
                        "actions",
                        Some(member.line),
                        format!("'actions' must be a mapping of action name to entry, got {}", member.value.kind()),
                    ));
                };
                for entry in entries {
                    let path = child_path("actions", &entry.key);
                    if entry.key.is_empty() {
                        return Err(self.error("actions", Some(entry.line), "action names must be non-empty strings"));
                    }
                    if !self.warden() && entry.key == POLICY_CHANGE_ACTION {
                        return Err(self.error(&path, Some(entry.line), self.policy_change_refusal()));
                    }
                    let parsed = self.entry(&entry.value, &path, entry.line)?;
                    if let Some(warning) = write_without_effect(&entry.key, &parsed, &path) {
                        warnings.push(warning);
                    }
                    actions.insert(entry.key.clone(), parsed);
                }
            }
        }

        let canonical = if self.warden() {
            self.warden_canonical(&actions, authority.as_ref(), environment.as_deref(), mode, sources.as_ref())
        } else {
            self.ctrlrun_canonical(get("actions"), get("controls"), environment.as_deref(), mode)?
        };
        let (policy_hash, canonical_policy) = self.policy_hash(&canonical)?;

        Ok(Document {
            schema: self.schema.clone(),
            version,
            environment,
            mode,
            actions,
            authority,
            authority_config,
            sources,
            sources_config,
            allow_insecure_http,
            notify,
            evidence,
            sign_in,
            gateway,
            policy_hash,
            canonical_policy,
            warnings,
        })
    }

    fn non_empty_string(&self, member: &Member, key: &str) -> Result<String, DocumentError> {
        match member.value.as_str() {
            Some(text) if !is_blank(text) => Ok(text.to_owned()),
            _ => Err(self.error(
                key,
                Some(member.line),
                format!("'{key}' must be a non-empty string, got {}", member.value.shown()),
            )),
        }
    }

    fn entry(&self, node: &Node, path: &str, line: usize) -> Result<ActionEntry, DocumentError> {
        let NodeValue::Map(members) = &node.value else {
            return Err(self.error(
                path,
                Some(line),
                format!("an action entry must be a mapping with 'decision' or 'rules', got {}", node.kind()),
            ));
        };
        self.reject_nested_mode(members, path)?;
        let allowed: &[&str] = if self.warden() { &WARDEN_ENTRY_KEYS } else { &CTRLRUN_ENTRY_KEYS };
        self.reject_unknown(members, allowed, path)?;
        let get = |key: &str| members.iter().find(|m| m.key == key);

        self.ctrlrun_entry_needs(members, path)?;

        let decision_member = get("decision");
        let rules_member = get("rules");
        if decision_member.is_some() == rules_member.is_some() {
            return Err(self.error(path, Some(line), "an entry must have exactly one of 'decision' or 'rules'"));
        }

        let effect = self.template(get("effect"), path, "effect")?;
        let resource = self.template(get("resource"), path, "resource")?;
        if !self.warden() {
            self.reserved_templates(effect.as_ref(), resource.as_ref(), path, get("effect").or(get("resource")))?;
            if let Some(member) = get("controls") {
                self.no_op_citations(member, &child_path(path, "controls"))?;
            }
            if let Some(member) = get("data") {
                self.no_op_data(member, path)?;
            }
        }
        let not_executed_on_error = match get("mcp") {
            None => false,
            Some(member) => self.mcp_options(member, path)?,
        };
        // A ctrlrun document reaches here with `upstream` only from v8 (`ctrlrun_entry_needs`).
        let upstream = match get("upstream") {
            Some(member) => self.upstream_pins(member, path)?,
            None => None,
        };
        let max_attempts = match get("max_attempts") {
            None => None,
            Some(member) => Some(self.max_attempts(member, path)?),
        };
        let lease = match get("lease") {
            None => None,
            Some(member) => Some(self.lease(member, path)?),
        };
        let description = match get("description") {
            None => None,
            Some(member) => Some(self.description(member, path)?),
        };

        let (decision, rules) = match (decision_member, rules_member) {
            (Some(member), _) => {
                (Some(self.decision(&member.value, &child_path(path, "decision"), member.line)?), Vec::new())
            }
            (None, Some(member)) => (None, self.rules(member, &child_path(path, "rules"))?),
            (None, None) => (None, Vec::new()),
        };
        let (approval, scoped) = match (get("approval"), decision) {
            (None, _) => (None, None),
            (Some(member), Some(decision)) => {
                let (requirement, scoped) = self.approval_requirement(member, path, decision)?;
                (Some(requirement), scoped)
            }
            (Some(member), None) => {
                return Err(self.error(
                    &child_path(path, "approval"),
                    Some(member.line),
                    "'approval' beside 'rules' is ambiguous; put it on the rule whose decision is approve",
                ))
            }
        };
        Ok(ActionEntry {
            decision,
            rules,
            effect,
            resource,
            max_attempts,
            lease,
            description,
            approval,
            scoped,
            not_executed_on_error,
            upstream,
        })
    }

    fn template(&self, member: Option<&Member>, path: &str, key: &str) -> Result<Option<Template>, DocumentError> {
        let Some(member) = member else { return Ok(None) };
        let path = child_path(path, key);
        // ctrlrun reads `effect: null` (or an empty `effect:`) as no template.
        if member.value.is_null() && !self.warden() {
            return Ok(None);
        }
        let Some(source) = member.value.as_str() else {
            return Err(self.error(
                &path,
                Some(member.line),
                format!(
                    "'{key}' must be a template string such as 'refund:{{payment_id}}', got {}",
                    member.value.shown()
                ),
            ));
        };
        let template = Template::parse(source, self.template_mode())
            .map_err(|e| self.error(&path, Some(member.line), format!("'{key}': {e}")))?;
        if template.placeholders().contains(&DATA_SCOPE) {
            return Err(self.error(
                &path,
                Some(member.line),
                format!("'{DATA_SCOPE}' is ctrlrun's derived data-label subject and may not be a placeholder; rename the argument"),
            ));
        }
        Ok(Some(template))
    }

    fn max_attempts(&self, member: &Member, path: &str) -> Result<u32, DocumentError> {
        let path = child_path(path, "max_attempts");
        let NodeValue::Int(text) = &member.value.value else {
            return Err(self.error(
                &path,
                Some(member.line),
                format!(
                    "'max_attempts' must be an integer of at least 1, got {}. It counts the attempts that may \
                     execute on one effect key, the first included; remove the key for no ceiling",
                    member.value.shown()
                ),
            ));
        };
        if text.starts_with('-') || text == "0" {
            return Err(self.error(
                &path,
                Some(member.line),
                format!(
                    "'max_attempts' must be at least 1, got {text}; an action that may never run is 'decision: deny'"
                ),
            ));
        }
        text.parse::<u32>().map_err(|_| {
            self.error(
                &path,
                Some(member.line),
                format!("'max_attempts' is {}; Warden counts attempts up to {}", shorten(text), u32::MAX),
            )
        })
    }
}
