//! The `sources:` section of the administrator's document (DESIGN.md §6), validated fail-fast.
//!
//! Every error is `configuration_invalid`, names the config path (`sources[0].auth.credential`)
//! and never repeats a value that could be a secret: values are described, not echoed, except
//! names that already passed their own syntax check. Raw strings are checked before the WHATWG
//! parser sees them, because it silently repairs tabs, `\`, `%2e` segments and numeric hosts.
//!
//! This file parses the section (`parse`, `parse_detailed`, one source at a time); the rest is
//! in leaves it re-exports from: `bounds` (the limits and defaults), `syntax` (names, kinds,
//! secret shapes), `model` (the validated types), `read` (the refusal and the value readers),
//! `base_url` and `endpoint` (a source's base URL, its auth and its endpoints).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use serde_json::Value;

use crate::error::SightError;

mod base_url;
mod bounds;
mod endpoint;
mod model;
mod read;
mod syntax;

pub use base_url::check_path_text;
use base_url::parse_base_url;
pub use bounds::{
    DEFAULT_MAX_LENGTH, DEFAULT_MAX_RESPONSE_BYTES, DEFAULT_TIMEOUT_MS, MAX_DESCRIPTION, MAX_ENDPOINTS,
    MAX_ENUM_VALUES, MAX_ENUM_VALUE_LEN, MAX_FIELDS, MAX_PARAMS, MAX_PATH_LEN, MAX_RESPONSE_BYTES_RANGE, MAX_SOURCES,
    MAX_STRING_PARAM, TIMEOUT_MS_RANGE,
};
use endpoint::{parse_auth, parse_endpoint};
pub use model::{
    check_param_value, Auth, CredentialRef, Endpoint, Limits, Param, ParamKind, Source, Sources, DEFAULT_LIMITS,
};
pub use read::ConfigError;
use read::{boolean, bounded, deny_unknown, description, err, id, object, string};
use syntax::child;
pub(crate) use syntax::kind_of;
pub use syntax::{exact_i64, is_alias, is_id, is_param_name, is_pointer, is_reference, looks_like_secret};

const SOURCE_KEYS: [&str; 10] = [
    "allow_insecure_http",
    "auth",
    "base_url",
    "ca_certs",
    "description",
    "endpoints",
    "id",
    "limits",
    "max_response_bytes",
    "timeout_ms",
];
const LIMIT_KEYS: [&str; 3] = ["max_depth", "max_items", "max_string"];

// ---------------------------------------------------------------------------------------------
// Parsing
// ---------------------------------------------------------------------------------------------

/// Validate the `sources` section; `allow_insecure_http` is the document's top-level flag.
pub fn parse(sources: &Value, allow_insecure_http: Option<bool>) -> Result<Sources, SightError> {
    parse_detailed(sources, allow_insecure_http).map_err(SightError::from)
}

/// An `auth` mapping outside `sources` (`gateway.upstream_auth`), at `path`: the modes, the
/// header checks and the refusal of literal secrets a source's `auth` has, except that nothing
/// is derived — every reference is named (there is no source id to derive one from).
pub fn parse_named_auth(value: &Value, path: &str) -> Result<Auth, ConfigError> {
    scan_secrets(value, path)?;
    parse_auth(Some(value), path, None)
}

/// As [`parse`], keeping the path apart from the message.
pub fn parse_detailed(sources: &Value, allow_insecure_http: Option<bool>) -> Result<Sources, ConfigError> {
    let Value::Array(items) = sources else {
        return Err(err("sources", format!("must be a list of sources, got {}", kind_of(sources))));
    };
    if items.len() > MAX_SOURCES {
        return Err(err("sources", format!("at most {MAX_SOURCES} sources")));
    }
    let global_insecure = allow_insecure_http.unwrap_or(false);
    let mut out = Sources::default();
    let mut seen_ids: BTreeMap<String, usize> = BTreeMap::new();
    // reference → (source index, derived?)
    let mut refs: BTreeMap<String, (usize, bool)> = BTreeMap::new();
    for (index, item) in items.iter().enumerate() {
        let path = format!("sources[{index}]");
        scan_secrets(item, &path)?;
        let source = parse_source(item, &path, global_insecure)?;
        let folded = source.id.to_ascii_lowercase();
        if let Some(first) = seen_ids.insert(folded, index) {
            return Err(err(
                &child(&path, "id"),
                format!(
                    "duplicate source id '{}' (also sources[{first}]; ids are unique case-insensitively)",
                    source.id
                ),
            ));
        }
        let derived_names: BTreeSet<String> = derived_references(&source.id).into_iter().collect();
        for reference in source.auth.references() {
            let name = reference.as_str().to_owned();
            let derived_here = derived_names.contains(&name);
            match refs.get(&name) {
                Some(&(other, derived_there)) if other != index && (derived_here || derived_there) => {
                    return Err(err(
                        &child(&path, "auth"),
                        format!(
                            "credential reference {name} is also used by sources[{other}], and one of them derives \
                             it from its id; name the references explicitly so each source has its own"
                        ),
                    ));
                }
                Some(_) => {}
                None => {
                    refs.insert(name, (index, derived_here));
                }
            }
        }
        out.by_id.insert(source.id.clone(), out.list.len());
        out.list.push(source);
    }
    Ok(out)
}

fn derived_references(id: &str) -> Vec<String> {
    let base = CredentialRef::derived(id).0;
    vec![format!("{base}_USERNAME"), format!("{base}_PASSWORD"), base]
}

/// Refuse literal secrets anywhere in a source, keys and values, naming only the path.
fn scan_secrets(value: &Value, path: &str) -> Result<(), ConfigError> {
    match value {
        Value::String(s) if looks_like_secret(s) => Err(err(
            path,
            format!(
                "literal secret in {path}: configuration holds credential references (names such as \
                 GITHUB_TOKEN), never credential values; the value is not repeated here"
            ),
        )),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                scan_secrets(item, &format!("{path}[{i}]"))?;
            }
            Ok(())
        }
        Value::Object(map) => {
            for (key, item) in map {
                if looks_like_secret(key) {
                    return Err(err(path, format!("literal secret in a key of {path}; the key is not repeated here")));
                }
                scan_secrets(item, &child(path, key))?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

fn parse_source(value: &Value, path: &str, global_insecure: bool) -> Result<Source, ConfigError> {
    let map = object(value, path, "a source")?;
    deny_unknown(map, &SOURCE_KEYS, path)?;
    let id = id(map, path, "source")?;
    let allow_insecure_http = match map.get("allow_insecure_http") {
        Some(v) => boolean(v, &child(path, "allow_insecure_http"))?,
        None => global_insecure,
    };
    let base_path_key = child(path, "base_url");
    let Some(raw) = map.get("base_url") else {
        return Err(err(&base_path_key, "every source needs a base_url"));
    };
    let base = parse_base_url(string(raw, &base_path_key)?, allow_insecure_http).map_err(|m| err(&base_path_key, m))?;
    let auth = parse_auth(map.get("auth"), &child(path, "auth"), Some(&id))?;
    let timeout_ms = bounded(map, "timeout_ms", path, DEFAULT_TIMEOUT_MS, TIMEOUT_MS_RANGE)?;
    let max_response_bytes =
        bounded(map, "max_response_bytes", path, DEFAULT_MAX_RESPONSE_BYTES, MAX_RESPONSE_BYTES_RANGE)?;
    let ca_certs = match map.get("ca_certs") {
        None => None,
        Some(v) => {
            let p = child(path, "ca_certs");
            let text = string(v, &p)?;
            if text.is_empty() || text.len() > 4096 || text.chars().any(char::is_control) {
                return Err(err(&p, "must be a non-empty file path without control characters"));
            }
            Some(PathBuf::from(text))
        }
    };
    let limits = match map.get("limits") {
        None => Limits::default(),
        Some(v) => {
            let p = child(path, "limits");
            let m = object(v, &p, "'limits'")?;
            deny_unknown(m, &LIMIT_KEYS, &p)?;
            Limits {
                max_depth: bounded(m, "max_depth", &p, DEFAULT_LIMITS.max_depth, (1, 64))?,
                max_items: bounded(m, "max_items", &p, DEFAULT_LIMITS.max_items, (1, 10_000))?,
                max_string: bounded(m, "max_string", &p, DEFAULT_LIMITS.max_string, (1, 1_000_000))?,
            }
        }
    };
    let description = description(map, path)?;
    let endpoints_path = child(path, "endpoints");
    let Some(endpoints_value) = map.get("endpoints") else {
        return Err(err(&endpoints_path, "every source needs at least one endpoint"));
    };
    let Value::Array(items) = endpoints_value else {
        return Err(err(&endpoints_path, format!("must be a list, got {}", kind_of(endpoints_value))));
    };
    if items.is_empty() || items.len() > MAX_ENDPOINTS {
        return Err(err(&endpoints_path, format!("must list 1 to {MAX_ENDPOINTS} endpoints")));
    }
    let mut endpoints: Vec<Endpoint> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let p = format!("{endpoints_path}[{i}]");
        let endpoint = parse_endpoint(item, &p, &base)?;
        if let Some(first) = endpoints.iter().position(|e| e.id.eq_ignore_ascii_case(&endpoint.id)) {
            return Err(err(
                &child(&p, "id"),
                format!("duplicate endpoint id '{}' (also {endpoints_path}[{first}])", endpoint.id),
            ));
        }
        endpoints.push(endpoint);
    }
    Ok(Source {
        id,
        base_url: base.url,
        origin: base.origin,
        base_path: base.base_path,
        auth,
        timeout_ms,
        max_response_bytes,
        ca_certs,
        limits,
        description,
        endpoints,
        allow_insecure_http,
    })
}
