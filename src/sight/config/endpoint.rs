//! A source's `auth` (credential references, never values) and its `endpoints` with their
//! params.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::base_url::{check_path_text, check_resolved, Base};
use super::bounds::{
    DEFAULT_MAX_LENGTH, MAX_ENUM_VALUES, MAX_ENUM_VALUE_LEN, MAX_FIELDS, MAX_PARAMS, MAX_STRING_PARAM,
};
use super::model::{check_param_value, Auth, CredentialRef, Endpoint, Param, ParamKind};
use super::read::{boolean, bounded, deny_unknown, description, err, id, integer, object, string, ConfigError};
use super::syntax::{child, is_alias, is_param_name, is_pointer, is_token, kind_of, looks_like_secret, shown_key};

const ENDPOINT_KEYS: [&str; 5] = ["description", "fields", "id", "params", "path"];
const PARAM_KEYS: [&str; 10] =
    ["default", "description", "max", "max_length", "min", "min_length", "name", "required", "type", "values"];

/// Header names an `api_key` source may not set (compared case-insensitively; `Proxy-*` too).
const FORBIDDEN_HEADERS: [&str; 11] = [
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "upgrade",
    "te",
    "trailer",
    "cookie",
    "expect",
    "keep-alive",
    "proxy-",
];

pub(super) fn reference(
    map: &Map<String, Value>,
    key: &str,
    path: &str,
    derived: Option<CredentialRef>,
) -> Result<CredentialRef, ConfigError> {
    let p = child(path, key);
    let Some(value) = map.get(key) else {
        return derived.ok_or_else(|| {
            err(&p, format!("'{key}' must name a credential reference (such as UPSTREAM_TOKEN); none is derived here"))
        });
    };
    let text = string(value, &p)?;
    if looks_like_secret(text) {
        return Err(err(&p, format!("literal secret in {p}; a reference names a credential, it is not one")));
    }
    CredentialRef::parse(text).ok_or_else(|| {
        err(&p, "must be a credential reference matching ^[A-Za-z_][A-Za-z0-9_]{0,127}$ (the value is not repeated)")
    })
}

/// An `auth` mapping. With `source_id`, a reference left out is derived from it (a source's
/// `WARDEN_CREDENTIAL_<ID>`); without, every reference must be named.
pub(super) fn parse_auth(value: Option<&Value>, path: &str, source_id: Option<&str>) -> Result<Auth, ConfigError> {
    let Some(value) = value else { return Ok(Auth::None) };
    let map = object(value, path, "'auth'")?;
    let mode_path = child(path, "mode");
    let Some(mode) = map.get("mode") else {
        return Err(err(&mode_path, "auth needs a mode: none, bearer, basic or api_key"));
    };
    let derived = source_id.map(CredentialRef::derived);
    match string(mode, &mode_path)? {
        "none" => {
            deny_unknown(map, &["mode"], path)?;
            Ok(Auth::None)
        }
        "bearer" => {
            deny_unknown(map, &["credential", "mode"], path)?;
            Ok(Auth::Bearer { credential: reference(map, "credential", path, derived)? })
        }
        "basic" => {
            deny_unknown(map, &["mode", "password", "username"], path)?;
            let user = derived.as_ref().map(|d| CredentialRef(format!("{d}_USERNAME")));
            let pass = derived.as_ref().map(|d| CredentialRef(format!("{d}_PASSWORD")));
            Ok(Auth::Basic {
                username: reference(map, "username", path, user)?,
                password: reference(map, "password", path, pass)?,
            })
        }
        "api_key" => {
            deny_unknown(map, &["credential", "header", "mode", "prefix"], path)?;
            let hp = child(path, "header");
            let Some(header) = map.get("header") else {
                return Err(err(&hp, "api_key auth needs a header name"));
            };
            let header = string(header, &hp)?;
            if !is_token(header) {
                return Err(err(&hp, "must be a valid HTTP header name (an RFC 9110 token, at most 64 characters)"));
            }
            let lower = header.to_ascii_lowercase();
            if FORBIDDEN_HEADERS.iter().any(|f| if f.ends_with('-') { lower.starts_with(f) } else { lower == *f }) {
                return Err(err(
                    &hp,
                    format!("the header '{header}' is managed by the HTTP layer and cannot carry a key"),
                ));
            }
            let prefix = match map.get("prefix") {
                None => None,
                Some(v) => {
                    let pp = child(path, "prefix");
                    let text = string(v, &pp)?;
                    if text.len() > 64 || !text.bytes().all(|b| (0x20..0x7f).contains(&b)) {
                        return Err(err(&pp, "must be at most 64 printable ASCII characters"));
                    }
                    Some(text.to_owned())
                }
            };
            Ok(Auth::ApiKey {
                header: header.to_owned(),
                credential: reference(map, "credential", path, derived)?,
                prefix,
            })
        }
        _ => Err(err(&mode_path, "must be one of none, bearer, basic, api_key")),
    }
}

// ---------------------------------------------------------------------------------------------
// Endpoints
// ---------------------------------------------------------------------------------------------

pub(super) fn parse_endpoint(value: &Value, path: &str, base: &Base) -> Result<Endpoint, ConfigError> {
    let map = object(value, path, "an endpoint")?;
    deny_unknown(map, &ENDPOINT_KEYS, path)?;
    let id = id(map, path, "endpoint")?;
    let pp = child(path, "path");
    let Some(raw) = map.get("path") else {
        return Err(err(&pp, "every endpoint needs a path"));
    };
    let endpoint_path = string(raw, &pp)?;
    check_path_text(endpoint_path).map_err(|m| err(&pp, m))?;
    check_resolved(base, endpoint_path).map_err(|m| err(&pp, m))?;

    let mut params: Vec<Param> = Vec::new();
    if let Some(value) = map.get("params") {
        let p = child(path, "params");
        let Value::Array(items) = value else {
            return Err(err(&p, format!("must be a list, got {}", kind_of(value))));
        };
        if items.len() > MAX_PARAMS {
            return Err(err(&p, format!("at most {MAX_PARAMS} params")));
        }
        for (i, item) in items.iter().enumerate() {
            let ip = format!("{p}[{i}]");
            let param = parse_param(item, &ip)?;
            if params.iter().any(|q| q.name == param.name) {
                return Err(err(&child(&ip, "name"), format!("duplicate param name '{}'", param.name)));
            }
            params.push(param);
        }
    }

    let fp = child(path, "fields");
    let Some(value) = map.get("fields") else {
        return Err(err(&fp, "every endpoint needs fields: a mapping of alias to JSON pointer"));
    };
    let fields_map = object(value, &fp, "'fields'")?;
    if fields_map.is_empty() || fields_map.len() > MAX_FIELDS {
        return Err(err(&fp, format!("must map 1 to {MAX_FIELDS} aliases")));
    }
    let mut fields = BTreeMap::new();
    for (alias, pointer) in fields_map {
        if !is_alias(alias) {
            return Err(err(&fp, format!("alias {} must match ^[A-Za-z][A-Za-z0-9_]{{0,63}}$", shown_key(alias))));
        }
        let ap = child(&fp, alias);
        let pointer = string(pointer, &ap)?;
        if !is_pointer(pointer) {
            return Err(err(
                &ap,
                "must be an RFC 6901 JSON pointer: starting with '/', '~' only as ~0 or ~1, not empty",
            ));
        }
        fields.insert(alias.clone(), pointer.to_owned());
    }
    Ok(Endpoint { id, path: endpoint_path.to_owned(), params, fields, description: description(map, path)? })
}

fn parse_param(value: &Value, path: &str) -> Result<Param, ConfigError> {
    let map = object(value, path, "a param")?;
    deny_unknown(map, &PARAM_KEYS, path)?;
    let np = child(path, "name");
    let name = string(map.get("name").ok_or_else(|| err(&np, "every param needs a name"))?, &np)?;
    if !is_param_name(name) {
        return Err(err(&np, "must match ^[A-Za-z_][A-Za-z0-9_.-]{0,63}$"));
    }
    let tp = child(path, "type");
    let type_name = string(map.get("type").ok_or_else(|| err(&tp, "every param needs a type"))?, &tp)?;
    let only = |keys: &[&str], type_name: &str| -> Result<(), ConfigError> {
        for key in ["min", "max", "min_length", "max_length", "values"] {
            if map.contains_key(key) && !keys.contains(&key) {
                return Err(err(&child(path, key), format!("'{key}' does not apply to a {type_name} param")));
            }
        }
        Ok(())
    };
    let opt_int = |key: &str| -> Result<Option<i64>, ConfigError> {
        map.get(key).map(|v| integer(v, &child(path, key))).transpose()
    };
    let kind = match type_name {
        "string" => {
            only(&["min_length", "max_length"], "string")?;
            let min_length = bounded(map, "min_length", path, 0, (0, MAX_STRING_PARAM))?;
            let max_length =
                bounded(map, "max_length", path, DEFAULT_MAX_LENGTH.max(min_length), (1, MAX_STRING_PARAM))?;
            if min_length > max_length {
                return Err(err(&child(path, "min_length"), "must not exceed max_length"));
            }
            ParamKind::String { min_length, max_length }
        }
        "integer" => {
            only(&["min", "max"], "integer")?;
            let (min, max) = (opt_int("min")?, opt_int("max")?);
            if let (Some(lo), Some(hi)) = (min, max) {
                if lo > hi {
                    return Err(err(&child(path, "min"), "must not exceed max"));
                }
            }
            ParamKind::Integer { min, max }
        }
        "boolean" => {
            only(&[], "boolean")?;
            ParamKind::Boolean
        }
        "enum" => {
            only(&["values"], "enum")?;
            let vp = child(path, "values");
            let Some(Value::Array(items)) = map.get("values") else {
                return Err(err(&vp, "an enum param needs values: a non-empty list of strings"));
            };
            if items.is_empty() || items.len() > MAX_ENUM_VALUES {
                return Err(err(&vp, format!("must list 1 to {MAX_ENUM_VALUES} strings")));
            }
            let mut values: Vec<String> = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                let ip = format!("{vp}[{i}]");
                let text = string(item, &ip)?;
                if text.is_empty() || text.chars().count() > MAX_ENUM_VALUE_LEN || text.chars().any(char::is_control) {
                    return Err(err(
                        &ip,
                        format!("must be 1 to {MAX_ENUM_VALUE_LEN} characters without control characters"),
                    ));
                }
                if values.iter().any(|v| v == text) {
                    return Err(err(&ip, "duplicate enum value"));
                }
                values.push(text.to_owned());
            }
            ParamKind::Enum { values }
        }
        _ => return Err(err(&tp, "must be one of string, integer, boolean, enum")),
    };
    let required = match map.get("required") {
        None => false,
        Some(v) => boolean(v, &child(path, "required"))?,
    };
    let default = match map.get("default") {
        None => None,
        Some(v) => {
            let dp = child(path, "default");
            if required {
                return Err(err(&dp, "a required param cannot have a default"));
            }
            check_param_value(&kind, v).map_err(|m| err(&dp, m))?;
            Some(v.clone())
        }
    };
    Ok(Param { name: name.to_owned(), kind, required, default, description: description(map, path)? })
}
