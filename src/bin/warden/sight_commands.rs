//! `warden sources`, `query`, `history` and `diff`: the configured windows, one confined read
//! through them (credentials from the environment or a credentials directory), and the
//! snapshots kept in the store. The CLI runs the same code an agent's binding does; it cannot
//! name anything the document does not configure.

use std::path::Path;

use serde_json::{json, Map, Value};
use warden::document::Document;
use warden::http::CancelToken;
use warden::pipeline::Warden;
use warden::sight::config::ParamKind;
use warden::sight::credentials::{CredentialProvider, DirectoryProvider, EnvProvider};
use warden::sight::query::run;

use crate::exit::Failure;
use crate::output::{document, shown, table};
use crate::store_commands::open_store;

pub fn sources(doc: &Document, json_out: bool) -> Result<String, Failure> {
    let mut listed = Vec::new();
    let mut rows = Vec::new();
    for source in &doc.sources_config {
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

/// `warden query`'s arguments.
pub struct QueryArgs<'a> {
    pub source: &'a str,
    pub endpoint: &'a str,
    pub params: &'a [String],
    pub fields: &'a [String],
    pub snapshot: bool,
}

fn provider(credentials_dir: Option<&Path>) -> Result<Box<dyn CredentialProvider>, Failure> {
    match credentials_dir {
        None => Ok(Box::new(EnvProvider)),
        Some(dir) if dir.is_dir() => Ok(Box::new(DirectoryProvider { dir: dir.to_path_buf() })),
        Some(dir) => Err(Failure::usage(format!(
            "--credentials-dir {} is not a directory (one file per credential reference)",
            shown(&dir.display().to_string())
        ))),
    }
}

/// The `Warden` over an existing store (history and diff only read; a missing store is a
/// mistake in --store, never a request for an empty one).
fn existing(doc: Document, store: Option<&Path>) -> Result<Warden, Failure> {
    let kernel = open_store(store)?;
    Ok(Warden::open(kernel.store_path(), doc, crate::store_commands::cli_options())?)
}

pub fn query(
    doc: Document,
    store: Option<&Path>,
    credentials_dir: Option<&Path>,
    args: &QueryArgs<'_>,
    json_out: bool,
) -> Result<String, Failure> {
    let mut request = json!({
        "source": args.source,
        "endpoint": args.endpoint,
        "params": typed_params(&doc, args.source, args.endpoint, args.params)?,
    });
    if !args.fields.is_empty() {
        request["fields"] = json!(args.fields);
    }
    let provider = provider(credentials_dir)?;
    let result = if args.snapshot {
        request["snapshot"] = Value::Bool(true);
        let Some(store) = store.filter(|p| !p.as_os_str().is_empty()) else {
            return Err(Failure::usage(
                "--snapshot keeps the result in a store; pass --store PATH or set WARDEN_STORE",
            ));
        };
        let warden = Warden::open(store, doc, crate::store_commands::cli_options())?;
        warden.query(&request, provider.as_ref(), &CancelToken::default())?
    } else {
        let now = warden::Clock::now(&warden::SystemClock);
        run(&doc.sources_config, &request, provider.as_ref(), &CancelToken::default(), now)
            .map_err(warden::Error::Sight)?
    };
    let value = serde_json::to_value(&result).map_err(|e| Failure::internal(e.to_string()))?;
    if json_out {
        return Ok(document(&value));
    }
    let mut out = format!("{} {} — HTTP {} at {}\n", result.source, result.endpoint, result.status, result.fetched_at);
    out.push_str(&values_block(&result.values, "  "));
    out.push_str(&truncation_block(&result.truncation, "  "));
    for warning in &result.warnings {
        out.push_str(&format!("  warning: {}\n", shown(warning)));
    }
    if let Some(id) = &result.snapshot_id {
        out.push_str(&format!("  snapshot: {id}\n"));
    }
    Ok(out)
}

fn values_block(values: &Map<String, Value>, indent: &str) -> String {
    values.iter().map(|(alias, value)| format!("{indent}{alias} = {}\n", shown(&value.to_string()))).collect()
}

/// One line per alias something was cut from: `truncated: ALIAS: strings 2000 of 6000
/// characters (1 string); …`, read from the result's `{shown, total}` flags.
fn truncation_block(truncation: &Map<String, Value>, indent: &str) -> String {
    const KINDS: [(&str, &str, &str, &str); 3] = [
        ("depth", "levels", "containers", "container"),
        ("items", "entries", "containers", "container"),
        ("strings", "characters", "strings", "string"),
    ];
    let mut out = String::new();
    for (alias, flags) in truncation {
        let parts: Vec<String> = KINDS
            .iter()
            .filter_map(|(kind, unit, counted, one)| {
                let flag = flags.get(*kind)?;
                let count = flag[*counted].as_u64().unwrap_or(0);
                Some(format!(
                    "{kind} {} of {} {unit} ({count} {})",
                    flag["shown"],
                    flag["total"],
                    if count == 1 { *one } else { *counted }
                ))
            })
            .collect();
        if !parts.is_empty() {
            out.push_str(&format!("{indent}truncated: {}: {}\n", shown(alias), parts.join("; ")));
        }
    }
    out
}

/// `warden history`'s paging arguments.
pub struct Page<'a> {
    pub cursor: Option<&'a str>,
    pub limit: u64,
    pub window: bool,
}

pub fn history(
    doc: Document,
    store: Option<&Path>,
    source: &str,
    endpoint: &str,
    params: &[String],
    page: &Page<'_>,
    json_out: bool,
) -> Result<String, Failure> {
    let mut request = json!({"source": source, "endpoint": endpoint, "limit": page.limit});
    if page.window || !params.is_empty() {
        request["params"] = Value::Object(typed_params(&doc, source, endpoint, params)?);
    }
    if let Some(cursor) = page.cursor {
        request["cursor"] = json!(cursor);
    }
    let answer = existing(doc, store)?.history(&request)?;
    if json_out {
        return Ok(document(&answer));
    }
    let snapshots = answer["snapshots"].as_array().cloned().unwrap_or_default();
    if snapshots.is_empty() {
        return Ok(format!("no snapshots of {} {}\n", shown(source), shown(endpoint)));
    }
    let mut out = String::new();
    for snapshot in &snapshots {
        let text = |key: &str| shown(snapshot[key].as_str().unwrap_or("-"));
        out.push_str(&format!(
            "{} {} HTTP {} params {}\n",
            text("snapshotId"),
            text("fetchedAt"),
            snapshot["status"],
            shown(&snapshot["params"].to_string())
        ));
        if let Some(values) = snapshot["values"].as_object() {
            out.push_str(&values_block(values, "  "));
        }
        if let Some(truncation) = snapshot["truncation"].as_object() {
            out.push_str(&truncation_block(truncation, "  "));
        }
    }
    if let Some(next) = answer["nextCursor"].as_str() {
        out.push_str(&format!("more: --cursor {}\n", shown(next)));
    }
    Ok(out)
}

pub fn diff(doc: Document, store: Option<&Path>, a: &str, b: &str, json_out: bool) -> Result<String, Failure> {
    let answer = existing(doc, store)?.diff(&json!({"a": a, "b": b}))?;
    if json_out {
        return Ok(document(&answer));
    }
    let entries = answer["entries"].as_array().cloned().unwrap_or_default();
    let mut out = format!(
        "{} {} params {}: {} -> {}\n",
        shown(answer["source"].as_str().unwrap_or("-")),
        shown(answer["endpoint"].as_str().unwrap_or("-")),
        shown(&answer["params"].to_string()),
        shown(answer["fetchedAt"]["a"].as_str().unwrap_or("-")),
        shown(answer["fetchedAt"]["b"].as_str().unwrap_or("-")),
    );
    if entries.is_empty() {
        out.push_str("  no differences\n");
    }
    for entry in &entries {
        let path = shown(entry["path"].as_str().unwrap_or("-"));
        let line = match entry["change"].as_str() {
            Some("added") => format!("  + {path} = {}\n", shown(&entry["after"].to_string())),
            Some("removed") => format!("  - {path} = {}\n", shown(&entry["before"].to_string())),
            _ => format!(
                "  ~ {path}: {} -> {}\n",
                shown(&entry["before"].to_string()),
                shown(&entry["after"].to_string())
            ),
        };
        out.push_str(&line);
    }
    if answer["omitted"].as_u64().unwrap_or(0) > 0 {
        out.push_str(&format!("  … and {} more\n", answer["omitted"]));
    }
    Ok(out)
}
