//! How well a document covers a server's tools: tools with no `mcp.<alias>.<tool>` action
//! (denied `unknown_action`), actions naming no tool the server lists, and effect or resource
//! templates naming a property the tool's `inputSchema` does not have (such a template never
//! renders, so every call is denied). And the `--alias` check: an alias that matches no action
//! of the document is a typo, not a gateway that denies everything. Pure.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};
use warden::document::Document;

/// A template placeholder the tool's schema does not have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing {
    pub action: String,
    /// `effect` or `resource`.
    pub template: &'static str,
    pub placeholder: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Coverage {
    pub tools: usize,
    pub covered: usize,
    /// Tools the server lists that no action names.
    pub uncovered: Vec<String>,
    /// `mcp.<alias>.*` actions whose tool the server does not list.
    pub toolless: Vec<String>,
    pub missing: Vec<Missing>,
}

impl Coverage {
    /// Nothing that makes a listed tool unusable: every template can render. (Tools without an
    /// action are denied, which is safe, and reported.)
    pub fn templates_render(&self) -> bool {
        self.missing.is_empty()
    }

    /// The report, one finding a line.
    pub fn lines(&self, alias: &str) -> Vec<String> {
        let mut out =
            vec![format!("coverage: {} of {} tool(s) have an mcp.{alias}.* action", self.covered, self.tools)];
        if !self.uncovered.is_empty() {
            out.push(format!(
                "{} tool(s) have no action and are denied (unknown_action): {}",
                self.uncovered.len(),
                self.uncovered.join(", ")
            ));
        }
        if !self.toolless.is_empty() {
            out.push(format!(
                "{} action(s) name no tool the server lists: {}",
                self.toolless.len(),
                self.toolless.join(", ")
            ));
        }
        for missing in &self.missing {
            out.push(format!(
                "{}: the {} template names {{{}}}, which the tool's inputSchema does not have; every call would be denied",
                missing.action, missing.template, missing.placeholder
            ));
        }
        out
    }

    /// The report for a tool set a client's session was offered (the gateway's): `lines`, and,
    /// when actions name tools the set lacks, why that need not be a typo — `warden check` and
    /// `scaffold` declare the capabilities that some servers list more tools to.
    pub fn session_lines(&self, alias: &str) -> Vec<String> {
        let mut out = self.lines(alias);
        if !self.toolless.is_empty() {
            out.push(format!(
                "a server may list some tools only to clients that declare roots, sampling or elicitation, as `warden check --alias {alias}` does"
            ));
        }
        out
    }

    pub fn to_json(&self) -> Value {
        json!({
            "tools": self.tools,
            "covered": self.covered,
            "uncovered_tools": self.uncovered,
            "actions_without_tool": self.toolless,
            "template_properties_missing": self.missing.iter().map(|m| json!({
                "action": m.action, "template": m.template, "placeholder": m.placeholder,
            })).collect::<Vec<_>>(),
        })
    }
}

/// The top-level property names a schema declares; `None` when it leaves them open (no
/// `properties`, and `additionalProperties` not `false`), so no name can be said to be missing.
fn properties(schema: Option<&Value>) -> Option<BTreeSet<String>> {
    let schema = schema?;
    match schema.get("properties").and_then(Value::as_object) {
        Some(properties) => Some(properties.keys().cloned().collect()),
        None if schema.get("additionalProperties") == Some(&Value::Bool(false)) => Some(BTreeSet::new()),
        None => None,
    }
}

/// `document`'s coverage of `tools` (name → `tools/list` entry) under `alias`.
pub fn coverage(document: &Document, alias: &str, tools: &BTreeMap<String, Value>) -> Coverage {
    let prefix = format!("mcp.{alias}.");
    let actions: BTreeMap<&str, _> = document
        .actions
        .iter()
        .filter_map(|(name, entry)| Some((name.strip_prefix(&prefix)?, (name, entry))))
        .collect();
    let mut report = Coverage { tools: tools.len(), ..Coverage::default() };
    for (tool, entry) in tools {
        let Some((action, rules)) = actions.get(tool.as_str()) else {
            report.uncovered.push(tool.clone());
            continue;
        };
        report.covered += 1;
        let Some(known) = properties(entry.get("inputSchema")) else { continue };
        let templates = [("effect", rules.effect.as_ref()), ("resource", rules.resource.as_ref())];
        for (kind, template) in templates {
            let Some(template) = template else { continue };
            for placeholder in template.placeholders() {
                // `{resource}` in an effect template names the action's resource, not an argument.
                let names_resource = kind == "effect" && placeholder == "resource";
                let reported = report.missing.iter().any(|m| m.action == **action && m.placeholder == placeholder);
                if !names_resource && !known.contains(placeholder) && !reported {
                    report.missing.push(Missing {
                        action: (*action).clone(),
                        template: kind,
                        placeholder: placeholder.to_owned(),
                    });
                }
            }
        }
    }
    report.toolless = actions
        .iter()
        .filter(|(tool, _)| !tools.contains_key(**tool))
        .map(|(_, (action, _))| (*action).clone())
        .collect();
    report
}

/// An `--alias` that names no `mcp.<alias>.*` action of the document: why, and what to write.
pub fn alias_matches_nothing(document: &Document, alias: &str) -> Option<String> {
    let prefix = format!("mcp.{alias}.");
    if document.actions.keys().any(|name| name.starts_with(&prefix)) {
        return None;
    }
    let others: BTreeSet<&str> = document
        .actions
        .keys()
        .filter_map(|name| name.strip_prefix("mcp.")?.split_once('.').map(|(alias, _)| alias))
        .collect();
    let hint = if others.is_empty() {
        "the document has no mcp.* action at all".to_owned()
    } else {
        let named: Vec<String> = others.iter().map(|a| format!("--alias {a} (mcp.{a}.*)")).collect();
        format!("the document's mcp.* actions are for {}", named.join(", "))
    };
    Some(format!(
        "--alias {alias} matches no action of the document: every call would be mcp.{alias}.<tool> and denied unknown_action, and {hint}; give the alias the document uses, or write mcp.{alias}.<tool> actions ('warden gateway scaffold --alias {alias} …' writes a skeleton from the server's tools)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn document(actions: &str) -> Document {
        warden::document::load_str(&format!("schema: warden/v1\nactions:\n{actions}"), "t.yaml").expect("document")
    }

    #[test]
    fn the_report_names_uncovered_tools_toolless_actions_and_templates_the_schema_cannot_fill() {
        let doc = document(
            "  mcp.shop.refund:\n    effect: \"refund:{payment_id}:{mesage}\"\n    resource: \"payment:{payment}\"\n    decision: allow\n  \
             mcp.shop.echo:\n    effect: \"echo:{message}:{resource}\"\n    decision: allow\n  \
             mcp.shop.gone:\n    decision: deny\n  \
             mcp.other.x:\n    decision: deny\n  \
             mcp.shop.open:\n    effect: \"open:{anything}\"\n    decision: allow\n",
        );
        let tools: BTreeMap<String, Value> = [
            ("refund", json!({"inputSchema": {"type": "object", "properties": {"payment_id": {}, "message": {}}}})),
            ("echo", json!({"inputSchema": {"type": "object", "properties": {"message": {}}}})),
            ("open", json!({"inputSchema": {"type": "object"}})),
            ("lookup", json!({"inputSchema": {"type": "object"}})),
            ("sum", json!({"inputSchema": {"type": "object"}})),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        let report = coverage(&doc, "shop", &tools);
        assert_eq!((report.tools, report.covered), (5, 3));
        assert_eq!(report.uncovered, ["lookup", "sum"]);
        assert_eq!(report.toolless, ["mcp.shop.gone"]);
        assert_eq!(
            report.missing,
            [
                Missing { action: "mcp.shop.refund".into(), template: "effect", placeholder: "mesage".into() },
                Missing { action: "mcp.shop.refund".into(), template: "resource", placeholder: "payment".into() },
            ],
            "{{resource}} in an effect template and an open schema are not findings"
        );
        assert!(!report.templates_render());
        let lines = report.lines("shop").join("\n");
        assert!(lines.contains("3 of 5 tool(s)") && lines.contains("{mesage}"), "{lines}");
        // The gateway's report on a session's list says why an action may name no listed tool;
        // `check`'s (which declares those capabilities) does not, nor a report with none.
        let hint = "only to clients that declare roots, sampling or elicitation, as `warden check --alias shop` does";
        assert!(!lines.contains(hint), "{lines}");
        assert_eq!(
            report.session_lines("shop").last().map(String::as_str),
            Some(&*format!("a server may list some tools {hint}"))
        );
        let all = coverage(
            &doc,
            "shop",
            &["refund", "echo", "gone", "open"].map(|t| (t.to_owned(), json!({}))).into_iter().collect(),
        );
        assert!(
            all.toolless.is_empty() && all.session_lines("shop") == all.lines("shop"),
            "{:?}",
            all.session_lines("shop")
        );
        let closed = [("open".to_owned(), json!({"inputSchema": {"type": "object", "additionalProperties": false}}))];
        let report = coverage(&doc, "shop", &closed.into_iter().collect());
        assert_eq!(report.missing[0].placeholder, "anything", "a closed schema with no properties has none");
    }

    #[test]
    fn an_alias_that_matches_no_action_is_named_with_the_ones_that_do() {
        let doc = document("  mcp.shop.refund:\n    decision: allow\n  mcp.crm.note:\n    decision: allow\n  a.b:\n    decision: allow\n");
        assert_eq!(alias_matches_nothing(&doc, "shop"), None);
        let typo = alias_matches_nothing(&doc, "shopp").expect("a typo");
        assert!(typo.contains("--alias crm (mcp.crm.*), --alias shop (mcp.shop.*)"), "{typo}");
        assert!(typo.contains("warden gateway scaffold --alias shopp"), "{typo}");
        let none = alias_matches_nothing(&document("  a.b:\n    decision: allow\n"), "shop").expect("none");
        assert!(none.contains("no mcp.* action at all"), "{none}");
    }
}
