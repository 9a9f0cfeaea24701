//! Request-time confinement: an agent's (source, endpoint, params, fields) becomes a URL the
//! administrator's configuration already allows, or a refusal. No I/O happens here.
//!
//! The agent names four things and nothing else exists: a query carrying `url`, `host`,
//! `path`, `headers` or any other key is refused. Params are checked against their declared
//! types before anything is built; the query string is form-encoded by construction; the
//! built URL is re-checked against the configured origin and path.

use serde_json::{Map, Value};
use url::Url;

use super::config::{check_param_value, exact_i64, is_alias, kind_of, Endpoint, Source, Sources};
use crate::error::SightError;

/// Keys that would let an agent steer the request; named explicitly in the refusal.
const STEERING_KEYS: [&str; 12] = [
    "url",
    "host",
    "port",
    "protocol",
    "scheme",
    "path",
    "method",
    "headers",
    "credentials",
    "base_url",
    "body",
    "auth",
];

/// The keys a query may carry.
const QUERY_KEYS: [&str; 5] = ["endpoint", "fields", "params", "snapshot", "source"];

/// An agent's query, parsed with unknown keys denied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    /// The source's id.
    pub source: String,
    /// The endpoint's id.
    pub endpoint: String,
    /// The param values, by name.
    pub params: Map<String, Value>,
    /// Deduplicated, first occurrence first; `None` selects every alias.
    pub fields: Option<Vec<String>>,
    /// Store the (redacted) result as a snapshot.
    pub snapshot: bool,
}

fn invalid(message: impl Into<String>) -> SightError {
    SightError::new("invalid_params", message)
}

/// Repeat an agent-supplied name only when it is plainly a name.
pub(crate) fn shown(name: &str) -> String {
    let plain = !name.is_empty()
        && name.len() <= 64
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if plain {
        format!("'{name}'")
    } else {
        "(a name that is not shown)".to_owned()
    }
}

impl Query {
    /// A query with these parts (fields deduplicated) and no snapshot.
    pub fn new(source: &str, endpoint: &str, params: Map<String, Value>, fields: Option<Vec<String>>) -> Query {
        Query {
            source: source.to_owned(),
            endpoint: endpoint.to_owned(),
            params,
            fields: fields.map(dedupe),
            snapshot: false,
        }
    }

    /// Parse the agent-facing JSON object `{source, endpoint, params?, fields?, snapshot?}`.
    pub fn from_json(value: &Value) -> Result<Query, SightError> {
        let Value::Object(map) = value else {
            return Err(invalid(format!("a query must be an object, got {}", kind_of(value))));
        };
        for key in map.keys() {
            if STEERING_KEYS.contains(&key.to_ascii_lowercase().as_str()) {
                return Err(invalid(format!(
                    "a query may not carry {}: the administrator's configuration decides where requests go; a \
                     query names only source, endpoint, params and fields",
                    shown(key)
                )));
            }
            if !QUERY_KEYS.contains(&key.as_str()) {
                return Err(invalid(format!(
                    "unknown key {} in the query; allowed: {}",
                    shown(key),
                    QUERY_KEYS.join(", ")
                )));
            }
        }
        let name = |key: &str| -> Result<String, SightError> {
            match map.get(key) {
                Some(Value::String(s)) => Ok(s.clone()),
                Some(other) => Err(invalid(format!("'{key}' must be a string, got {}", kind_of(other)))),
                None => Err(invalid(format!("the query needs '{key}'"))),
            }
        };
        let source = name("source")?;
        let endpoint = name("endpoint")?;
        let params = match map.get("params") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(params)) => params.clone(),
            Some(other) => {
                return Err(invalid(format!("'params' must be an object of name to value, got {}", kind_of(other))))
            }
        };
        let fields = match map.get("fields") {
            None | Some(Value::Null) => None,
            Some(Value::Array(items)) => {
                let mut names = Vec::with_capacity(items.len().min(64));
                for item in items {
                    match item {
                        Value::String(s) => names.push(s.clone()),
                        other => {
                            return Err(invalid(format!(
                                "'fields' must be a list of alias names, got {} in it",
                                kind_of(other)
                            )))
                        }
                    }
                }
                Some(dedupe(names))
            }
            Some(other) => {
                return Err(invalid(format!("'fields' must be a list of alias names, got {}", kind_of(other))))
            }
        };
        let snapshot = match map.get("snapshot") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(other) => return Err(invalid(format!("'snapshot' must be true or false, got {}", kind_of(other)))),
        };
        Ok(Query { source, endpoint, params, fields, snapshot })
    }
}

fn dedupe(names: Vec<String>) -> Vec<String> {
    let mut seen = std::collections::BTreeSet::new();
    names.into_iter().filter(|n| seen.insert(n.clone())).collect()
}

/// A query the configuration allows: everything the transport needs, nothing the agent chose
/// beyond validated param values.
#[derive(Debug, Clone)]
pub struct Confined<'a> {
    /// The configured source.
    pub source: &'a Source,
    /// The configured endpoint.
    pub endpoint: &'a Endpoint,
    /// The GET target: configured origin, `base_path + endpoint.path`, a form-encoded query
    /// built from validated params (declaration order), no userinfo, no fragment.
    pub url: Url,
    /// Selected aliases and their pointers, in the order asked (all, by alias, when `fields`
    /// is absent).
    pub aliases: Vec<(String, String)>,
    /// `[source, endpoint, {param: value}]` as JSON with sorted keys: the snapshot window.
    pub window: String,
}

/// Turn a query into a confined request, or refuse it. Never performs I/O.
pub fn confine<'a>(sources: &'a Sources, query: &Query) -> Result<Confined<'a>, SightError> {
    let Some(source) = sources.get(&query.source) else {
        let known: Vec<&str> = sources.iter().map(|s| s.id.as_str()).take(32).collect();
        return Err(SightError::new(
            "unknown_source",
            format!("unknown source {}; configured sources: {}", shown(&query.source), known.join(", ")),
        ));
    };
    let Some(endpoint) = source.endpoint(&query.endpoint) else {
        let known: Vec<&str> = source.endpoints.iter().map(|e| e.id.as_str()).take(32).collect();
        return Err(SightError::new(
            "unknown_endpoint",
            format!(
                "unknown endpoint {} of source '{}'; its endpoints: {}",
                shown(&query.endpoint),
                source.id,
                known.join(", ")
            ),
        ));
    };

    // Params: every given name declared, every value of its declared type.
    for name in query.params.keys() {
        if endpoint.param(name).is_none() {
            let known: Vec<&str> = endpoint.params.iter().map(|p| p.name.as_str()).collect();
            return Err(invalid(format!(
                "unknown param {} for {}.{}; its params: {}",
                shown(name),
                source.id,
                endpoint.id,
                if known.is_empty() { "(none)".to_owned() } else { known.join(", ") }
            )));
        }
    }
    let mut effective: Vec<(&str, Value)> = Vec::with_capacity(endpoint.params.len());
    for param in &endpoint.params {
        let value = match (query.params.get(&param.name), &param.default) {
            (Some(value), _) => value,
            (None, Some(default)) => default,
            (None, None) if param.required => {
                return Err(invalid(format!("missing required param '{}'", param.name)));
            }
            (None, None) => continue,
        };
        check_param_value(&param.kind, value).map_err(|m| invalid(format!("param '{}' {m}", param.name)))?;
        // Integers in one spelling (`-0` is `0`), so equal windows compare equal.
        let value = match value {
            Value::Number(n) => exact_i64(n).map(Value::from).unwrap_or_else(|| value.clone()),
            other => other.clone(),
        };
        effective.push((param.name.as_str(), value));
    }

    // Fields: known aliases only.
    let aliases: Vec<(String, String)> = match &query.fields {
        None => endpoint.fields.iter().map(|(a, p)| (a.clone(), p.clone())).collect(),
        Some(names) => {
            if names.is_empty() {
                return Err(SightError::new("unknown_field", "'fields' is empty; omit it to select every alias"));
            }
            let mut selected = Vec::with_capacity(names.len().min(endpoint.fields.len()));
            for name in names {
                let Some(pointer) = endpoint.fields.get(name) else {
                    let what = if is_alias(name) { format!("'{name}'") } else { "(not an alias name)".to_owned() };
                    let known: Vec<&str> = endpoint.fields.keys().map(String::as_str).collect();
                    return Err(SightError::new(
                        "unknown_field",
                        format!(
                            "unknown field {what}; fields are aliases, not pointers; this endpoint's: {}",
                            known.join(", ")
                        ),
                    ));
                };
                selected.push((name.clone(), pointer.clone()));
                if selected.len() > endpoint.fields.len() {
                    return Err(SightError::new("unknown_field", "more fields than the endpoint has"));
                }
            }
            selected
        }
    };

    let url = build_url(source, endpoint, &effective)?;
    let mut window_params = Map::new();
    for (name, value) in &effective {
        window_params.insert((*name).to_owned(), value.clone());
    }
    let window = serde_json::json!([source.id, endpoint.id, Value::Object(window_params)]).to_string();
    Ok(Confined { source, endpoint, url, aliases, window })
}

fn build_url(source: &Source, endpoint: &Endpoint, params: &[(&str, Value)]) -> Result<Url, SightError> {
    let expected_path = format!("{}{}", source.base_path, endpoint.path);
    let refused = |why: &str| {
        SightError::new(
            "configuration_invalid",
            format!("the request URL for {}.{} {why}; nothing was sent", source.id, endpoint.id),
        )
    };
    let mut url = source.base_url.clone();
    url.set_path(&expected_path);
    url.set_fragment(None);
    if params.is_empty() {
        url.set_query(None);
    } else {
        let mut pairs = url.query_pairs_mut();
        pairs.clear();
        for (name, value) in params {
            let text = match value {
                Value::String(s) => s.clone(),
                Value::Bool(b) => b.to_string(),
                Value::Number(n) => n.to_string(),
                _ => return Err(invalid(format!("param '{name}' has an unsupported type"))),
            };
            pairs.append_pair(name, &text);
        }
        drop(pairs);
    }
    if url.origin().ascii_serialization() != source.origin {
        return Err(refused("left the configured origin"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(refused("carries userinfo"));
    }
    if url.path() != expected_path || url.fragment().is_some() {
        return Err(refused("does not have the configured path"));
    }
    Ok(url)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::*;
    use crate::sight::config::{Auth, Limits};

    fn source(base_url: &str, origin: &str, base_path: &str, endpoint_path: &str) -> Source {
        let mut fields = BTreeMap::new();
        fields.insert("a".to_owned(), "/a".to_owned());
        fields.insert("b".to_owned(), "/b".to_owned());
        Source {
            id: "s".into(),
            base_url: Url::parse(base_url).expect("a URL"),
            origin: origin.into(),
            base_path: base_path.into(),
            auth: Auth::None,
            timeout_ms: 10_000,
            max_response_bytes: 1_048_576,
            ca_certs: None,
            limits: Limits::default(),
            description: None,
            endpoints: vec![Endpoint {
                id: "e".into(),
                path: endpoint_path.into(),
                params: Vec::new(),
                fields,
                description: None,
            }],
            allow_insecure_http: false,
        }
    }

    fn good() -> Source {
        source("https://api.example.com/v2", "https://api.example.com", "/v2", "/items")
    }

    fn built(source: &Source, params: &[(&str, Value)]) -> Result<String, String> {
        build_url(source, &source.endpoints[0], params).map(|url| url.to_string()).map_err(|e| e.message)
    }

    #[test]
    fn a_plain_name_of_up_to_64_characters_is_repeated_and_anything_else_is_not() {
        let hidden = "(a name that is not shown)";
        assert_eq!(shown("per_page-2.x"), "'per_page-2.x'");
        assert_eq!(shown(&"n".repeat(64)), format!("'{}'", "n".repeat(64)));
        assert_eq!(shown(&"n".repeat(65)), hidden);
        for name in ["", "a b", "a/b", "é", "a\nb", "url:"] {
            assert_eq!(shown(name), hidden, "{name:?}");
        }
    }

    #[test]
    fn string_boolean_and_integer_params_are_form_encoded_in_order() {
        let url = built(&good(), &[("q", json!("a b&c")), ("open", json!(true)), ("n", json!(-7))]);
        assert_eq!(url.as_deref(), Ok("https://api.example.com/v2/items?q=a+b%26c&open=true&n=-7"));
        assert_eq!(built(&good(), &[]).as_deref(), Ok("https://api.example.com/v2/items"));
        let refused = built(&good(), &[("q", json!(["x"]))]).unwrap_err();
        assert!(refused.contains("unsupported type"), "{refused}");
    }

    #[test]
    fn a_url_that_would_leave_the_configured_origin_is_refused() {
        let moved = source("https://api.example.com/v2", "https://other.example.com", "/v2", "/items");
        let refused = built(&moved, &[]).unwrap_err();
        assert!(refused.contains("left the configured origin"), "{refused}");
    }

    #[test]
    fn a_url_carrying_a_user_name_or_a_password_is_refused() {
        for base in ["https://user@api.example.com/v2", "https://:secret@api.example.com/v2"] {
            let with_userinfo = source(base, "https://api.example.com", "/v2", "/items");
            let refused = built(&with_userinfo, &[]).unwrap_err();
            assert!(refused.contains("carries userinfo"), "{base}: {refused}");
        }
    }

    #[test]
    fn a_path_the_url_parser_would_rewrite_is_refused() {
        let dotted = source("https://api.example.com/v2", "https://api.example.com", "/v2", "/items/../admin");
        let refused = built(&dotted, &[]).unwrap_err();
        assert!(refused.contains("does not have the configured path"), "{refused}");
    }

    #[test]
    fn naming_every_alias_or_some_of_them_selects_exactly_those() {
        let sources = crate::sight::config::parse(
            &json!([{
                "id": "s",
                "base_url": "https://api.example.com/v2",
                "endpoints": [{"id": "e", "path": "/items", "fields": {"a": "/a", "b": "/b"}}]
            }]),
            None,
        )
        .expect("the configuration loads");
        for (asked, expected) in [(vec!["b", "a"], vec!["b", "a"]), (vec!["a"], vec!["a"])] {
            let fields = asked.iter().map(|name| (*name).to_owned()).collect();
            let query = Query::new("s", "e", Map::new(), Some(fields));
            let confined = confine(&sources, &query).expect("confined");
            let names: Vec<&str> = confined.aliases.iter().map(|(alias, _)| alias.as_str()).collect();
            assert_eq!(names, expected);
        }
    }
}
