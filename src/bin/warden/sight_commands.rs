//! `warden sources` and `warden query`: the configured windows, and one confined read through
//! them with credentials from the environment. The CLI runs the same `sight::query::run` an
//! agent's binding does; it cannot name anything the document does not configure.

use serde_json::{json, Map, Value};
use warden::document::Document;
use warden::sight::config::ParamKind;
use warden::sight::credentials::EnvProvider;
use warden::sight::http::CancelToken;
use warden::sight::query::run;

use crate::exit::Failure;
use crate::output::{document, shown, table};

pub fn sources(doc: &Document, json_out: bool) -> Result<String, Failure> {
    let mut listed = Vec::new();
    let mut rows = Vec::new();
    for source in doc.sources_config.iter() {
        let endpoints: Vec<Value> = source
            .endpoints
            .iter()
            .map(|endpoint| {
                json!({
                    "id": endpoint.id,
                    "path": endpoint.path,
                    "params": endpoint.params.iter().map(|p| p.name.clone()).collect::<Vec<_>>(),
                    "fields": endpoint.fields.keys().cloned().collect::<Vec<_>>(),
                })
            })
            .collect();
        for endpoint in &source.endpoints {
            rows.push(vec![
                shown(&source.id),
                shown(&endpoint.id),
                shown(&format!("{}{}{}", source.origin, source.base_path, endpoint.path)),
                source.auth.mode().to_owned(),
                shown(&endpoint.params.iter().map(|p| p.name.as_str()).collect::<Vec<_>>().join(",")),
                shown(&endpoint.fields.keys().map(String::as_str).collect::<Vec<_>>().join(",")),
            ]);
        }
        listed.push(json!({
            "id": source.id,
            "origin": source.origin,
            "base_path": source.base_path,
            "auth": source.auth.mode(),
            "endpoints": endpoints,
        }));
    }
    if json_out {
        return Ok(document(&Value::Array(listed)));
    }
    if rows.is_empty() {
        return Ok("no sources configured\n".into());
    }
    Ok(table(Some(&["SOURCE", "ENDPOINT", "GET", "AUTH", "PARAMS", "FIELDS"]), rows))
}

/// Turn `--param k=v` into the typed JSON the agent-facing query takes, using the endpoint's
/// declared type (an undeclared name is passed as a string and refused by confinement).
fn typed_params(
    doc: &Document,
    source: &str,
    endpoint: &str,
    params: &[String],
) -> Result<Map<String, Value>, Failure> {
    let declared = doc.sources_config.get(source).and_then(|s| s.endpoint(endpoint));
    let mut out = Map::new();
    for pair in params {
        let (name, value) =
            pair.split_once('=').ok_or_else(|| Failure::usage(format!("--param {pair:?} is not NAME=VALUE")))?;
        let kind = declared.and_then(|e| e.params.iter().find(|p| p.name == name)).map(|p| &p.kind);
        let typed = match kind {
            Some(ParamKind::Integer { .. }) => value
                .parse::<i64>()
                .map(Value::from)
                .map_err(|_| Failure::usage(format!("--param {name} takes an integer")))?,
            Some(ParamKind::Boolean) => match value {
                "true" => Value::Bool(true),
                "false" => Value::Bool(false),
                _ => return Err(Failure::usage(format!("--param {name} takes true or false"))),
            },
            _ => Value::String(value.to_owned()),
        };
        out.insert(name.to_owned(), typed);
    }
    Ok(out)
}

pub fn query(
    doc: &Document,
    source: &str,
    endpoint: &str,
    params: &[String],
    fields: &[String],
    now: warden::Micros,
    json_out: bool,
) -> Result<String, Failure> {
    let mut request =
        json!({"source": source, "endpoint": endpoint, "params": typed_params(doc, source, endpoint, params)?});
    if !fields.is_empty() {
        request["fields"] = json!(fields);
    }
    let result = run(&doc.sources_config, &request, &EnvProvider, &CancelToken::default(), now)
        .map_err(|e| Failure::check(e.code, format!("{}: {}", e.code, e.message)))?;
    let value = serde_json::to_value(&result).map_err(|e| Failure::internal(e.to_string()))?;
    if json_out {
        return Ok(document(&value));
    }
    let mut out = format!("{} {} — HTTP {} at {}\n", result.source, result.endpoint, result.status, result.fetched_at);
    for (alias, value) in &result.values {
        out.push_str(&format!("  {alias} = {}\n", shown(&value.to_string())));
    }
    for warning in &result.warnings {
        out.push_str(&format!("  warning: {}\n", shown(warning)));
    }
    Ok(out)
}
