//! The `ctrlrun.policy/v1`…`v8` dialect: what each schema version admits, and the ctrlrun
//! features Warden cannot honour, refused by name unless they are written as no-ops.
//!
//! What v6–v8 add over v5 (ctrlrun 0.12.2): v6 `approver_role` on a control-registry entry,
//! `approvals_required` on an action entry and the right to declare `ctrlrun.policy.change`;
//! v7 `tasks` and `budgets` on a grant; v8 `upstream` pins on an action entry. Warden loads
//! the gateway's keys (`mcp`, since v2, and `upstream`) with ctrlrun's meaning, and
//! `approvals_required: 1` (ctrlrun's default, spelled out); the rest is refused by name.

use crate::template::Template;

use super::cx::Cx;
use super::error::DocumentError;
use super::schema_kind::Schema;
use super::tree::{child_path, Member, Node, NodeValue};

pub(super) const NEWEST_CTRLRUN: u8 = 8;

/// ctrlrun's derived subject (data labels, `ctrlrun.policy/v4`). Warden has no data labels, so
/// it is refused as a subject and as a placeholder rather than read as an ordinary argument.
pub(super) const DATA_SCOPE: &str = "data_scope";

/// The one action name ctrlrun's policy-change flow owns (`ctrlrun.policy/v6`).
pub(super) const POLICY_CHANGE_ACTION: &str = "ctrlrun.policy.change";

pub(super) const CTRLRUN_TOP_KEYS: [&str; 7] =
    ["actions", "authority", "controls", "environment", "mode", "schema", "version"];
/// ctrlrun 0.12.2's `_ENTRY_KEYS`; `approvals_required` and `upstream` need v6 and v8.
pub(super) const CTRLRUN_ENTRY_KEYS: [&str; 10] = [
    "approvals_required",
    "controls",
    "data",
    "decision",
    "effect",
    "max_attempts",
    "mcp",
    "resource",
    "rules",
    "upstream",
];
pub(super) const CTRLRUN_RULE_KEYS: [&str; 3] = ["controls", "decision", "when"];
const MCP_KEYS: [&str; 1] = ["not_executed_on_error"];

impl Cx<'_> {
    /// Top-level keys a ctrlrun document may use only from the schema version that introduced
    /// them; a `warden/v1` document passes.
    pub(super) fn ctrlrun_top_level_needs(&self, members: &[Member]) -> Result<(), DocumentError> {
        let Schema::Ctrlrun(version) = self.schema else { return Ok(()) };
        let get = |key: &str| members.iter().find(|m| m.key == key);
        for (key, needs, consequence) in [
            ("environment", 3, "an older reader would ignore it and put every action in the wrong deployment"),
            ("authority", 3, "an older reader would ignore it and run every action with no authority check at all"),
            ("mode", 3, "an older reader would enforce a configuration that was deployed to observe"),
            ("version", 4, "an older reader would refuse the document outright, since its top-level key set is closed"),
            (
                "controls",
                4,
                "an older reader would ignore the registry and load a document whose rules cite ids nothing defines",
            ),
        ] {
            if let Some(member) = get(key) {
                if version < needs {
                    return Err(self.needs_schema(key, member.line, needs, consequence));
                }
            }
        }
        Ok(())
    }

    /// Entry keys a ctrlrun document may use only from the schema version that introduced them,
    /// and those of versions Warden does not implement; a `warden/v1` document passes.
    pub(super) fn ctrlrun_entry_needs(&self, members: &[Member], path: &str) -> Result<(), DocumentError> {
        let Schema::Ctrlrun(version) = self.schema else { return Ok(()) };
        let get = |key: &str| members.iter().find(|m| m.key == key);
        if version < 2 {
            if let Some(member) = members.iter().find(|m| matches!(m.key.as_str(), "effect" | "resource" | "mcp")) {
                return Err(self.error(
                    &child_path(path, &member.key),
                    Some(member.line),
                    format!(
                        "'{}' needs 'schema: ctrlrun.policy/v2'; this document declares 'ctrlrun.policy/v1', and a \
                         v0.1 reader would ignore the template and execute with no duplicate protection",
                        member.key
                    ),
                ));
            }
        }
        for (key, needs, consequence) in [
            ("data", 4, "an older reader would ignore the labels"),
            ("max_attempts", 5, "an older reader would ignore the ceiling and renew over FAILED without bound"),
        ] {
            if let Some(member) = get(key) {
                if version < needs {
                    return Err(self.needs_schema(&child_path(path, key), member.line, needs, consequence));
                }
            }
        }
        if let Some(member) = get("upstream") {
            if version < 8 {
                return Err(self.needs_schema(
                    &child_path(path, "upstream"),
                    member.line,
                    8,
                    "an older reader would ignore the pin and authorise the action against any server at all",
                ));
            }
        }
        if let Some(member) = get("approvals_required") {
            let here = child_path(path, "approvals_required");
            if version < 6 {
                return Err(self.needs_schema(
                    &here,
                    member.line,
                    6,
                    "an older reader would ignore the threshold and consume on the first grant (and Warden does not \
                     implement ctrlrun's M-of-N approvals either)",
                ));
            }
            // One approval is ctrlrun's default and Warden's: written out, it changes nothing.
            if !matches!(&member.value.value, NodeValue::Int(text) if text == "1") {
                return Err(self.error(
                    &here,
                    Some(member.line),
                    format!(
                        "'approvals_required' is {}, and M-of-N approvals (ctrlrun.policy/v6) are not implemented for \
                         ctrlrun documents; remove the key for one approval, or write the document as 'warden/v1' and \
                         put 'approval: {{required: N}}' beside 'decision: approve'",
                        member.value.shown()
                    ),
                ));
            }
        }
        Ok(())
    }

    fn needs_schema(&self, key: &str, line: usize, version: u8, consequence: &str) -> DocumentError {
        self.error(
            key,
            Some(line),
            format!(
                "'{key}' needs 'schema: ctrlrun.policy/v{version}'; this document declares '{}', and {consequence}",
                self.schema.name()
            ),
        )
    }

    /// `ctrlrun.policy.change` declared as an action: ctrlrun's policy-change flow (v6), which
    /// Warden does not implement, so the entry would be an ordinary action under a name that
    /// means something else to ctrlrun.
    pub(super) fn policy_change_refusal(&self) -> String {
        let Schema::Ctrlrun(version) = self.schema else { return String::new() };
        if version < 6 {
            return format!(
                "declaring '{POLICY_CHANGE_ACTION}' needs 'schema: ctrlrun.policy/v6', and Warden does not implement \
                 ctrlrun's policy-change flow; remove the entry"
            );
        }
        format!(
            "'{POLICY_CHANGE_ACTION}' is ctrlrun's policy-change flow (ctrlrun.policy/v6), which Warden does not \
             implement; remove the entry (a Warden document changes when a new file is deployed, and every receipt \
             names the policy hash that decided it)"
        )
    }

    /// ctrlrun: `mode` is top level and nothing else, and says so rather than "unknown key".
    pub(super) fn reject_nested_mode(&self, members: &[Member], path: &str) -> Result<(), DocumentError> {
        if let Some(member) = members.iter().find(|m| m.key == "mode") {
            return Err(self.error(
                &child_path(path, "mode"),
                Some(member.line),
                "'mode' is top level and nothing else: a configuration where some actions are observed and \
                 some enforced is one where nobody can say whether an action was permitted or merely \
                 watched; move it beside 'schema:'",
            ));
        }
        Ok(())
    }

    /// ctrlrun's control registry (v4). Warden records no control attribution, so only an
    /// empty registry — which changes nothing — is accepted.
    pub(super) fn no_op_controls_registry(&self, member: &Member) -> Result<(), DocumentError> {
        if is_null_or_empty_mapping(&member.value) {
            return Ok(());
        }
        Err(self.error(
            "controls",
            Some(member.line),
            "the control registry ('controls:') is not supported: Warden does not attribute decisions to \
             controls, and loading the registry without that would drop evidence the document promises",
        ))
    }

    /// ctrlrun refuses templates that could mint its policy-change marker.
    pub(super) fn reserved_templates(
        &self,
        effect: Option<&Template>,
        resource: Option<&Template>,
        path: &str,
        member: Option<&Member>,
    ) -> Result<(), DocumentError> {
        let line = member.map(|m| m.line);
        for (label, template) in [("resource", resource), ("effect", effect)] {
            if let Some(template) = template {
                if template.source().contains(POLICY_CHANGE_ACTION) {
                    return Err(self.error(
                        &child_path(path, label),
                        line,
                        format!(
                            "the '{label}' template names '{POLICY_CHANGE_ACTION}', which is reserved for ctrlrun's \
                             policy-change flow"
                        ),
                    ));
                }
            }
        }
        if let Some(template) = effect {
            if template.source().starts_with("policy:") {
                return Err(self.error(
                    &child_path(path, "effect"),
                    line,
                    "an 'effect' template may not begin 'policy:', the effect key ctrlrun records policy approvals under",
                ));
            }
        }
        Ok(())
    }

    /// `mcp: {not_executed_on_error: bool}` (closed key set): the operator's claim, read by
    /// `warden gateway`, that the upstream's `isError` means the tool did nothing.
    pub(super) fn mcp_options(&self, member: &Member, path: &str) -> Result<bool, DocumentError> {
        let path = child_path(path, "mcp");
        match &member.value.value {
            NodeValue::Null => Ok(false),
            NodeValue::Map(members) => {
                self.reject_unknown(members, &MCP_KEYS, &path)?;
                match members.first() {
                    None => Ok(false),
                    Some(claim) => match claim.value.value {
                        NodeValue::Bool(flag) => Ok(flag),
                        _ => Err(self.error(
                            &child_path(&path, "not_executed_on_error"),
                            Some(claim.line),
                            format!("'not_executed_on_error' must be true or false, got {}", claim.value.shown()),
                        )),
                    },
                }
            }
            _ => Err(self.error(
                &path,
                Some(member.line),
                format!("'mcp' must be a mapping, got {}", member.value.kind()),
            )),
        }
    }

    /// Control citations on an entry or a rule. With no registry (the only kind Warden
    /// accepts), ctrlrun itself refuses any id, so only an empty citation list loads.
    pub(super) fn no_op_citations(&self, member: &Member, path: &str) -> Result<(), DocumentError> {
        match &member.value.value {
            NodeValue::Null => Ok(()),
            NodeValue::Seq(items) if items.is_empty() => Ok(()),
            NodeValue::Seq(_) => Err(self.error(
                path,
                Some(member.line),
                "control citations are not supported: Warden has no control registry, so a cited id resolves to nothing",
            )),
            _ => Err(self.error(
                path,
                Some(member.line),
                format!("'controls' must be a list of ids, got {}", member.value.kind()),
            )),
        }
    }

    pub(super) fn no_op_data(&self, member: &Member, path: &str) -> Result<(), DocumentError> {
        if is_null_or_empty_mapping(&member.value) {
            return Ok(());
        }
        Err(self.error(
            &child_path(path, "data"),
            Some(member.line),
            "data labels ('data:' and the 'data_scope' subject) are not supported by Warden",
        ))
    }
}

/// `null` or `{}`: a section that is written but holds nothing, and so changes nothing.
fn is_null_or_empty_mapping(node: &Node) -> bool {
    match &node.value {
        NodeValue::Null => true,
        NodeValue::Map(entries) => entries.is_empty(),
        _ => false,
    }
}
