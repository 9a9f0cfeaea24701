//! The tool schema names only what the document configures and never a way out of the window.

use serde_json::{json, Value};
use warden::sight::config::parse;
use warden::sight::tool_schema::tool_schema;

const FORBIDDEN: [&str; 8] = ["url", "host", "port", "protocol", "path", "method", "headers", "credentials"];

fn schema() -> Value {
    let sources = parse(
        &json!([{
            "id": "gh",
            "base_url": "https://api.example.com/v2",
            "auth": {"mode": "bearer", "credential": "GH_TOKEN"},
            "endpoints": [
                {"id": "search", "path": "/search/issues",
                 "params": [{"name": "q", "type": "string", "required": true, "min_length": 1, "max_length": 256},
                            {"name": "per_page", "type": "integer", "min": 1, "max": 100, "default": 30},
                            {"name": "sort", "type": "enum", "values": ["desc", "asc"], "default": "desc"}],
                 "fields": {"title": "/items/0/title", "total": "/total_count"}},
                {"id": "rate", "path": "/rate_limit", "fields": {"remaining": "/rate/remaining"}}
            ]
        }]),
        None,
    )
    .expect("fixture loads");
    tool_schema(&sources)
}

/// Every property name anywhere in the schema.
fn property_names(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            if let Some(Value::Object(properties)) = map.get("properties") {
                out.extend(properties.keys().cloned());
            }
            map.values().for_each(|v| property_names(v, out));
        }
        Value::Array(items) => items.iter().for_each(|v| property_names(v, out)),
        _ => {}
    }
}

#[test]
fn no_tool_has_a_property_that_could_name_a_url_host_method_header_or_credential() {
    let mut names = Vec::new();
    property_names(&schema(), &mut names);
    assert!(!names.is_empty());
    for forbidden in FORBIDDEN {
        assert!(!names.iter().any(|n| n.eq_ignore_ascii_case(forbidden)), "{forbidden} is a property");
    }
}

#[test]
fn the_four_tools_name_sources_and_endpoints_as_enums_and_refuse_extra_properties() {
    let tools = schema();
    let names: Vec<&str> = tools.as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["warden_sources", "warden_query", "warden_history", "warden_diff"]);
    let query = &tools[1]["input_schema"];
    assert_eq!(query["additionalProperties"], false);
    assert_eq!(query["properties"]["source"]["enum"], json!(["gh"]));
    assert_eq!(query["properties"]["endpoint"]["enum"], json!(["rate", "search"]));
    let search = &query["properties"]["params"]["oneOf"][0];
    assert_eq!(search["title"], "gh.search");
    assert_eq!(search["additionalProperties"], false);
    assert_eq!(
        search["properties"]["per_page"],
        json!({"type": "integer", "minimum": 1, "maximum": 100, "default": 30})
    );
    assert_eq!(search["required"], json!(["q"]));
    for tool in tools.as_array().unwrap() {
        assert!(tool["description"].as_str().unwrap().contains("untrusted data"), "{}", tool["name"]);
        assert_eq!(tool["input_schema"]["additionalProperties"], false);
    }
}
