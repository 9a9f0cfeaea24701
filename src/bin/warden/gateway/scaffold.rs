//! `warden gateway scaffold`: a commented `warden.yaml` skeleton from a server's tool list. Every
//! tool gets an `mcp.<alias>.<tool>` action that denies (or asks approval) until the operator
//! decides, with what the server says of it as comments, and an effect template suggested from
//! the schema's required properties — except for a tool the server marks read-only. Pure: the
//! listing comes from `client`.

use serde_json::Value;

use super::client::Listed;

/// A placeholder name the template grammar accepts (src/template.rs): letters, digits and `_`,
/// not starting with a digit.
fn placeholder_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_alphabetic() || c == '_') && chars.all(|c| c.is_alphanumeric() || c == '_')
}

/// One line of text for a comment: the first line, control and format characters escaped, at
/// most `most` characters.
fn comment_text(text: &str, most: usize) -> String {
    let first = text.lines().next().unwrap_or_default().trim();
    let shown = crate::output::shown(first);
    if shown.chars().count() > most {
        let cut: String = shown.chars().take(most).collect();
        format!("{cut}…")
    } else {
        shown
    }
}

/// A JSON Schema's `type`, as a word.
fn type_of(schema: &Value) -> String {
    match schema.get("type") {
        Some(Value::String(kind)) => kind.clone(),
        Some(Value::Array(kinds)) => kinds.iter().filter_map(Value::as_str).collect::<Vec<_>>().join("|"),
        _ => "any".to_owned(),
    }
}

/// The effect template suggested for a tool: its name, then each required property that can
/// key an effect (a string, an integer or a boolean, named as the template grammar allows),
/// `:`-separated. `None` when there is none.
pub fn suggested_effect(tool: &str, schema: Option<&Value>) -> Option<String> {
    let schema = schema?;
    let properties = schema.get("properties").and_then(Value::as_object)?;
    let required = schema.get("required").and_then(Value::as_array)?;
    let keys: Vec<&str> = required
        .iter()
        .filter_map(Value::as_str)
        .filter(|name| placeholder_name(name))
        .filter(|name| {
            properties.get(*name).is_some_and(|p| matches!(type_of(p).as_str(), "string" | "integer" | "boolean"))
        })
        .collect();
    if keys.is_empty() {
        return None;
    }
    let prefix: String = tool.chars().filter(|c| *c != '{' && *c != '}').collect();
    let placeholders: Vec<String> = keys.iter().map(|k| format!("{{{k}}}")).collect();
    Some(format!("{prefix}:{}", placeholders.join(":")))
}

/// The skeleton: a header saying where it came from and what to do, then one action per tool.
pub fn skeleton(listed: &Listed, alias: &str, source: &str, decision: &str) -> String {
    let server = &listed.server;
    let name = server.get("name").and_then(Value::as_str).unwrap_or("an MCP server");
    let version = server.get("version").and_then(Value::as_str).unwrap_or("");
    let mut out = String::new();
    out.push_str(&format!(
        "# warden.yaml for {} {} (MCP {}), {}\n",
        comment_text(name, 80),
        comment_text(version, 40),
        comment_text(&listed.revision, 20),
        comment_text(source, 200)
    ));
    out.push_str(&format!(
        "# written by `warden gateway scaffold --alias {alias}`: {} tool(s), each the action mcp.{alias}.<tool>.\n",
        listed.tools.len()
    ));
    out.push_str(&format!(
        "#\n# Nothing runs yet: every action below is `decision: {decision}` until you decide — allow,\n\
         # approve, deny, or rules on the arguments (docs/GATEWAY.md). An effect template names what\n\
         # makes one call's effect one effect (a refund's payment id), so a retry is never run twice;\n\
         # each one below is only a suggestion from the schema's required properties: keep what\n\
         # identifies the effect, drop the rest. A read needs none. Then:\n\
         #   warden check warden.yaml --alias {alias} --upstream … (or -- COMMAND …)\n\
         # reports tools without an action and templates naming properties the schema lacks.\n"
    ));
    out.push_str("schema: warden/v1\nactions:\n");
    if listed.tools.is_empty() {
        out.push_str("  {}\n");
    }
    for entry in &listed.tools {
        let Some(tool) = entry.get("name").and_then(Value::as_str) else { continue };
        out.push('\n');
        let description = entry.get("description").and_then(Value::as_str).map(|d| comment_text(d, 120));
        match description.filter(|d| !d.is_empty()) {
            Some(description) => out.push_str(&format!("  # {} — {description}\n", comment_text(tool, 80))),
            None => out.push_str(&format!("  # {}\n", comment_text(tool, 80))),
        }
        let annotations = entry.get("annotations");
        let hint = |key: &str| annotations.and_then(|a| a.get(key)).and_then(Value::as_bool);
        let hints: Vec<&str> = ["readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"]
            .into_iter()
            .filter(|key| hint(key) == Some(true))
            .collect();
        if !hints.is_empty() {
            out.push_str(&format!("  # the server says: {}\n", hints.join(", ")));
        }
        let schema = entry.get("inputSchema");
        let properties = schema.and_then(|s| s.get("properties")).and_then(Value::as_object);
        if let Some(properties) = properties.filter(|p| !p.is_empty()) {
            let required: Vec<&str> = schema
                .and_then(|s| s.get("required"))
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let shown: Vec<String> = properties
                .iter()
                .take(12)
                .map(|(name, property)| {
                    let needed = if required.contains(&name.as_str()) { ", required" } else { "" };
                    format!("{} ({}{needed})", comment_text(name, 40), comment_text(&type_of(property), 30))
                })
                .collect();
            let more = properties.len().saturating_sub(12);
            let more = if more > 0 { format!(", and {more} more") } else { String::new() };
            out.push_str(&format!("  # arguments: {}{more}\n", shown.join(", ")));
        }
        let action = serde_json::to_string(&format!("mcp.{alias}.{tool}")).unwrap_or_default();
        out.push_str(&format!("  {action}:\n"));
        if hint("readOnlyHint") == Some(true) {
            out.push_str("    # read-only, the server says: no effect template (no reservation)\n");
        } else {
            match suggested_effect(tool, schema) {
                Some(template) => out.push_str(&format!(
                    "    effect: {}   # suggested; keep what identifies one effect\n",
                    serde_json::to_string(&template).unwrap_or_default()
                )),
                None => out.push_str(
                    "    # no effect template suggested (no required string, integer or boolean property):\n    \
                     # a tool that changes the world needs one, e.g. effect: \"name:{id}\"\n",
                ),
            }
        }
        out.push_str(&format!("    decision: {decision}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_skeleton_loads_denies_every_tool_and_suggests_keys_from_required_properties() {
        let listed = Listed {
            server: json!({"name": "shop\nserver", "version": "1.2"}),
            revision: "2025-06-18".into(),
            tools: vec![
                json!({"name": "refund", "description": "Refund a payment.\nSecond line # not a comment end",
                       "annotations": {"destructiveHint": true},
                       "inputSchema": {"type": "object", "required": ["payment_id", "amount", "lines", "note-id"],
                         "properties": {"payment_id": {"type": "string"}, "amount": {"type": "integer"},
                                        "lines": {"type": "array"}, "note-id": {"type": "string"}, "memo": {"type": "string"}}}}),
                json!({"name": "lookup", "annotations": {"readOnlyHint": true},
                       "inputSchema": {"type": "object", "required": ["id"], "properties": {"id": {"type": "string"}}}}),
                json!({"name": "get-sum", "inputSchema": {"type": "object", "required": ["a"], "properties": {"a": {"type": "number"}}}}),
                json!({"name": "we:ird {tool}\"", "inputSchema": {"type": "object"}}),
                json!({"name": "noargs", "inputSchema": {"type": "object", "properties": {}}}),
            ],
        };
        let text = skeleton(&listed, "shop", "http://127.0.0.1:9000/mcp", "deny");
        let document = warden::document::load_str(&text, "scaffold.yaml").unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(document.actions.len(), 5);
        assert!(!text.contains("# arguments: \n"), "no empty argument line: {text}");
        assert!(text.contains("# arguments: a (number, required)\n"), "{text}");
        for name in document.actions.keys() {
            let decision = warden::policy::evaluate(&document, name, &serde_json::Map::new()).ruling.decision;
            assert_eq!(decision.as_str(), "deny", "{name}: {text}");
        }
        let refund = &document.actions["mcp.shop.refund"];
        assert_eq!(refund.effect.as_ref().map(|t| t.source()), Some("refund:{payment_id}:{amount}"), "{text}");
        assert!(document.actions["mcp.shop.lookup"].effect.is_none(), "read-only: no key");
        assert!(document.actions["mcp.shop.get-sum"].effect.is_none(), "a number keys no effect");
        assert!(document.actions.contains_key("mcp.shop.we:ird {tool}\""));
        assert!(text.contains("# refund — Refund a payment.\n"), "the first line only: {text}");
        assert!(text.starts_with("# warden.yaml for shop 1.2 (MCP 2025-06-18)"), "a name's first line only: {text}");
        let approve = skeleton(&listed, "shop", "x", "approve");
        let document = warden::document::load_str(&approve, "scaffold.yaml").expect("loads");
        let decision = warden::policy::evaluate(&document, "mcp.shop.refund", &serde_json::Map::new()).ruling.decision;
        assert_eq!(decision.as_str(), "approve");
        let empty = Listed { server: json!({}), revision: "2025-06-18".into(), tools: vec![] };
        assert!(warden::document::load_str(&skeleton(&empty, "shop", "x", "deny"), "e.yaml").is_ok());
    }
}
