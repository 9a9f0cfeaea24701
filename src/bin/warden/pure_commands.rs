//! Checks that touch no store and no document: `canonical`, `action-hash`, `template`. What
//! they check (stdin, the template) is refused with exit 1; a bad `--args` is a usage error.

use serde_json::{json, Map, Value};

use warden::canonical::{parse_json, to_canonical_string};
use warden::{Action, Principal, Template, TemplateMode};

use crate::exit::Failure;
use crate::output::document;

/// The environment every action hashed by `action-hash` is in unless the document says otherwise.
use warden::limits::DEFAULT_ENVIRONMENT;

/// The canonical form is itself one JSON document, so `--json` prints the same line.
pub fn canonical(text: &str) -> Result<String, Failure> {
    let value = parse_json(text).map_err(|e| Failure::check("invalid_json", e.to_string()))?;
    let canonical = to_canonical_string(&value, "").map_err(|e| Failure::check("float", e.to_string()))?;
    Ok(format!("{canonical}\n"))
}

pub fn action_hash(text: &str, json: bool) -> Result<String, Failure> {
    let action = action_from_document(text)?;
    let hash = action.hash().map_err(|e| Failure::check("invalid_action", e.to_string()))?;
    Ok(if json { document(&json!({"action_hash": hash})) } else { format!("{hash}\n") })
}

const ACTION_FIELDS: [&str; 5] = ["name", "arguments", "principal", "resource", "environment"];
const PRINCIPAL_FIELDS: [&str; 2] = ["agent", "user"];

fn action_from_document(text: &str) -> Result<Action, Failure> {
    let invalid = |message: String| Failure::check("invalid_action", message);
    let value = parse_json(text).map_err(|e| Failure::check("invalid_json", e.to_string()))?;
    let Value::Object(document) = value else {
        return Err(invalid(
            "the action document must be a JSON object {\"name\", \"arguments\", \"principal\", ...}".into(),
        ));
    };
    only_fields(&document, &ACTION_FIELDS, "the action document").map_err(invalid)?;
    let name = match document.get("name") {
        Some(Value::String(name)) => name.as_str(),
        _ => return Err(invalid("the action document needs \"name\", a string".into())),
    };
    let Some(arguments) = document.get("arguments") else {
        return Err(invalid("the action document needs \"arguments\", a JSON object".into()));
    };
    let Some(Value::Object(principal)) = document.get("principal") else {
        return Err(invalid("the action document needs \"principal\", an object {\"agent\", \"user\"}".into()));
    };
    only_fields(principal, &PRINCIPAL_FIELDS, "principal").map_err(invalid)?;
    let agent = match principal.get("agent") {
        Some(Value::String(agent)) => agent.as_str(),
        _ => return Err(invalid("principal needs \"agent\", a string".into())),
    };
    let user = optional_string(principal, "user", "principal.user").map_err(invalid)?;
    let resource = optional_string(&document, "resource", "resource").map_err(invalid)?;
    let environment = match document.get("environment") {
        None => DEFAULT_ENVIRONMENT,
        Some(Value::String(environment)) => environment.as_str(),
        Some(_) => return Err(invalid("environment must be a string (absent means \"production\")".into())),
    };
    let principal = Principal::new(agent, user).map_err(|e| invalid(e.to_string()))?;
    Action::new(name, arguments.clone(), principal, resource, environment).map_err(|e| invalid(e.to_string()))
}

/// A typo in a field name must not quietly hash a different action.
fn only_fields(object: &Map<String, Value>, allowed: &[&str], what: &str) -> Result<(), String> {
    match object.keys().find(|key| !allowed.contains(&key.as_str())) {
        Some(key) => Err(format!("{what} has an unknown field {:?}; the fields are {}", key, allowed.join(", "))),
        None => Ok(()),
    }
}

fn optional_string<'v>(object: &'v Map<String, Value>, field: &str, what: &str) -> Result<Option<&'v str>, String> {
    match object.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(_) => Err(format!("{what} must be a string, null or absent")),
    }
}

pub fn render_template(
    source: &str,
    args: &str,
    resource: Option<&str>,
    raw: bool,
    json: bool,
) -> Result<String, Failure> {
    let mode = if raw { TemplateMode::Raw } else { TemplateMode::Escaped };
    let template = Template::parse(source, mode).map_err(|e| Failure::check("template_invalid", e.to_string()))?;
    // --args is an argument of the command, so a bad one is a usage error, as for `decide`.
    let arguments = parse_json(args).map_err(|e| Failure::usage(format!("--args: {e}")))?;
    let Value::Object(arguments) = arguments else {
        return Err(Failure::usage("--args must be a JSON object"));
    };
    let key = template
        .render_effect_key(&arguments, resource)
        .map_err(|e| Failure::check("effect_key_error", e.to_string()))?;
    Ok(if json { document(&json!({"effect_key": key})) } else { format!("{key}\n") })
}
