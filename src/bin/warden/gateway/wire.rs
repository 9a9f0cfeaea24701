//! The checks before anything is forwarded (mcp-gateway.md §1.3), as pure functions over one
//! received request: repeated identity headers, `Origin`, the JSON-RPC envelope, the protocol
//! revision and the mirrored `Mcp-*` headers. Each refusal is the answer to send, with the
//! status and the JSON-RPC code ctrlrun uses; none of them writes anything.

use base64::Engine;
use serde_json::{json, Map, Value};
use warden::document::UnknownMethods;

/// The revisions this gateway speaks; the first is the stateless one with mirrored headers.
pub const REVISION_2026: &str = "2026-07-28";
pub const ACCEPTED_REVISIONS: [&str; 4] = [REVISION_2026, "2025-11-25", "2025-06-18", "2025-03-26"];
/// A request without `MCP-Protocol-Version` is read as the oldest revision, as the spec says.
pub const DEFAULT_REVISION: &str = "2025-03-26";

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const HEADER_MISMATCH: i64 = -32020;
pub const UNSUPPORTED_VERSION: i64 = -32022;
pub const METHOD_NOT_FOUND: i64 = -32601;

/// Every method a client sends a server in the revisions this gateway accepts (MCP 2025-03-26
/// to 2026-07-28), requests and notifications. `tools/call` is intercepted, `tools/list` is
/// relayed and its answer read (schema pins, `x-mcp-header`), the rest are relayed untouched;
/// docs/GATEWAY.md lists them. A spelling of one of them that is not exact is refused (see
/// [`check_method`]); any other method is relayed, or refused when the document says
/// `gateway: {unknown_methods: refuse}`.
pub const KNOWN_METHODS: [&str; 23] = [
    "initialize",
    "ping",
    "tools/call",
    "tools/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "logging/setLevel",
    "tasks/get",
    "tasks/result",
    "tasks/list",
    "tasks/cancel",
    "tasks/update",
    "notifications/initialized",
    "notifications/cancelled",
    "notifications/progress",
    "notifications/roots/list_changed",
    "notifications/tasks/status",
];

/// What a method means once its spelling is set aside: its look-alike key (NFKC case folding,
/// invisible characters dropped, the TR39 confusables skeleton:
/// `warden::approval::person::look_alike_key`), then only its letters and digits (whitespace,
/// punctuation and separators dropped). `TOOLS/CALL`, ` tools/call`, `tools / call`,
/// `ｔｏｏｌｓ／ｃａｌｌ`, `tools\u{200B}/call`, `tools_call` and `tооls/call` with Cyrillic `о` all
/// mean what `tools/call` means.
pub fn method_meaning(method: &str) -> String {
    warden::approval::person::look_alike_key(method).chars().filter(|c| c.is_alphanumeric()).collect()
}

/// The one rule both transports apply to a request's `method` (the body's, never a header's):
/// a known method spelled exactly passes; a method that means a known one (same
/// [`method_meaning`]) but is spelled otherwise is refused `-32600` — an upstream that matches
/// methods loosely would run it as that method with no decision, reservation or receipt; any
/// other method passes, or is refused `-32601` when the document refuses unknown methods.
pub fn check_method(method: &str, id: &Value, unknown: UnknownMethods) -> Result<(), Answer> {
    if KNOWN_METHODS.contains(&method) {
        return Ok(());
    }
    let shown = shown_method(method);
    let meaning = method_meaning(method);
    if let Some(known) = KNOWN_METHODS.iter().find(|known| method_meaning(known) == meaning) {
        return Err(Answer::rpc_error(
            400,
            id,
            INVALID_REQUEST,
            &format!(
                "the method {shown} is a misspelling of {known:?}, which this gateway acts on only when it is \
                 spelled exactly; send \"{known}\" exactly (lowercase, no spaces)"
            ),
        ));
    }
    match unknown {
        UnknownMethods::Relay => Ok(()),
        UnknownMethods::Refuse => Err(Answer::rpc_error(
            400,
            id,
            METHOD_NOT_FOUND,
            &format!(
                "the method {shown} is not one this gateway relays: the administrator's document says \
                 'gateway: {{unknown_methods: refuse}}', so only the MCP methods listed in docs/GATEWAY.md pass"
            ),
        )),
    }
}

/// A client's method for an error message: quoted, with Rust's escapes for anything invisible,
/// at most 64 characters.
fn shown_method(method: &str) -> String {
    let mut short: String = method.chars().take(64).collect();
    if short.len() < method.len() {
        short.push('…');
    }
    format!("{short:?}")
}

/// One answer the gateway makes up itself: status, JSON body (or none) and extra headers.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub status: u16,
    pub body: Option<Value>,
}

impl Answer {
    pub fn empty(status: u16) -> Answer {
        Answer { status, body: None }
    }

    /// `{"jsonrpc":"2.0","id":…,"error":{"code","message"}}`: the §1.3 shape, with no `data`.
    pub fn rpc_error(status: u16, id: &Value, code: i64, message: &str) -> Answer {
        Answer { status, body: Some(json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})) }
    }
}

/// What the gateway needs to know about one request's headers.
#[derive(Debug, Clone, Default)]
pub struct Checks<'a> {
    /// Identity header names (agent, user, JWT): each may appear once at most.
    pub identity_headers: &'a [String],
    /// `Origin` values allowed; an empty list refuses every request that sends one.
    pub allowed_origins: &'a [String],
}

/// A request that passed every check: what to do with it.
#[derive(Debug, Clone, PartialEq)]
pub struct Inbound {
    pub revision: String,
    pub message: Value,
    pub kind: Kind,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    /// `tools/call`: decided, reserved, forwarded, recorded.
    ToolCall { id: Value, tool: String },
    /// Everything else: relayed untouched.
    Relay,
}

/// The value of `name`, case-insensitively, and how many times it appears.
pub fn header<'h>(headers: &'h [(String, String)], name: &str) -> (Option<&'h str>, usize) {
    let mut found = None;
    let mut count = 0;
    for (key, value) in headers {
        if key.eq_ignore_ascii_case(name) {
            count += 1;
            found.get_or_insert(value.as_str());
        }
    }
    (found, count)
}

/// Steps 2 and 3 of §1.3, for every verb: a repeated identity header, then `Origin`.
pub fn check_headers(headers: &[(String, String)], checks: &Checks<'_>) -> Result<(), Answer> {
    for name in checks.identity_headers {
        if header(headers, name).1 > 1 {
            return Err(Answer::rpc_error(
                403,
                &Value::Null,
                -41007,
                &format!("the identity header {name} was sent more than once; send it exactly once"),
            ));
        }
    }
    if let (Some(origin), _) = header(headers, "origin") {
        if !checks.allowed_origins.iter().any(|allowed| allowed == origin) {
            return Err(Answer::empty(403));
        }
    }
    Ok(())
}

/// The revision named by `MCP-Protocol-Version`, or a `-32022` refusal.
pub fn revision(headers: &[(String, String)], id: &Value) -> Result<String, Answer> {
    match header(headers, "mcp-protocol-version").0.map(str::trim) {
        None => Ok(DEFAULT_REVISION.to_owned()),
        Some(version) if ACCEPTED_REVISIONS.contains(&version) => Ok(version.to_owned()),
        Some(_) => Err(Answer::rpc_error(
            400,
            id,
            UNSUPPORTED_VERSION,
            &format!("unsupported MCP-Protocol-Version; this gateway accepts {}", ACCEPTED_REVISIONS.join(", ")),
        )),
    }
}

/// A tool's `x-mcp-header` annotations (SEP-2243): each header name as annotated, with the
/// path of the annotated property in the arguments.
pub type Annotations = Vec<(String, Vec<String>)>;

/// The `x-mcp-header` annotations of a tool's `inputSchema`, at any depth of `properties`
/// (at most 64, 16 levels deep).
pub fn annotations(schema: &Value) -> Annotations {
    fn walk(schema: &Value, path: &mut Vec<String>, out: &mut Annotations) {
        let Some(properties) = schema.get("properties").and_then(Value::as_object) else { return };
        if path.len() >= 16 {
            return;
        }
        for (key, property) in properties {
            if out.len() >= 64 {
                return;
            }
            path.push(key.clone());
            if let Some(name) = property.get("x-mcp-header").and_then(Value::as_str) {
                out.push((name.to_owned(), path.clone()));
            }
            walk(property, path, out);
            path.pop();
        }
    }
    let mut out = Vec::new();
    walk(schema, &mut Vec::new(), &mut out);
    out
}

/// Step 4 of §1.3 for a POST body: the envelope, the method, the revision, the mirrored
/// headers, with no tool schema known and unknown methods relayed.
#[cfg(test)]
pub fn parse_post(headers: &[(String, String)], body: &[u8]) -> Result<Inbound, Answer> {
    parse_post_with(headers, body, UnknownMethods::Relay, &|_| None)
}

/// `parse_post`, with the document's rule for unknown methods and `known` giving a tool's
/// learnt `x-mcp-header` annotations (D11). Both transports call this.
pub fn parse_post_with(
    headers: &[(String, String)],
    body: &[u8],
    unknown: UnknownMethods,
    known: &dyn Fn(&str) -> Option<Annotations>,
) -> Result<Inbound, Answer> {
    let message: Value = match serde_json::from_slice(body) {
        Ok(value) => value,
        Err(_) => return Err(Answer::rpc_error(400, &Value::Null, PARSE_ERROR, "the body is not JSON")),
    };
    if message.is_array() {
        return Err(Answer::rpc_error(
            400,
            &Value::Null,
            INVALID_REQUEST,
            "batches are not accepted; send one JSON-RPC message per request",
        ));
    }
    let Some(object) = message.as_object() else {
        return Err(Answer::rpc_error(400, &Value::Null, INVALID_REQUEST, "a JSON-RPC message is a JSON object"));
    };
    let id = object.get("id").cloned().unwrap_or(Value::Null);
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(Answer::rpc_error(400, &id, INVALID_REQUEST, "jsonrpc must be \"2.0\""));
    }
    let revision = revision(headers, &id)?;
    let Some(method) = object.get("method") else {
        if !object.contains_key("result") && !object.contains_key("error") {
            return Err(Answer::rpc_error(400, &id, INVALID_REQUEST, "a message without method must be a response"));
        }
        if revision == REVISION_2026 {
            return Err(Answer::rpc_error(
                400,
                &id,
                INVALID_REQUEST,
                "a client sends no JSON-RPC responses on MCP 2026-07-28",
            ));
        }
        return Ok(Inbound { revision, message, kind: Kind::Relay });
    };
    let method = match method.as_str() {
        Some(m) if !m.is_empty() => m.to_owned(),
        _ => return Err(Answer::rpc_error(400, &id, INVALID_REQUEST, "method must be a non-empty string")),
    };
    check_method(&method, &id, unknown)?;
    let kind = if method == "tools/call" {
        let Some(tool) = object.get("params").and_then(|p| p.get("name")).and_then(Value::as_str) else {
            return Err(Answer::rpc_error(400, &id, INVALID_REQUEST, "tools/call needs a string params.name"));
        };
        // A consequential call needs an id to correlate its outcome with (D14).
        if !(id.is_string() || id.as_i64().is_some() || id.as_u64().is_some()) {
            return Err(Answer::rpc_error(
                400,
                &id,
                INVALID_REQUEST,
                "tools/call needs an id (a string or an integer): a notification cannot carry an outcome back",
            ));
        }
        Kind::ToolCall { id: id.clone(), tool: tool.to_owned() }
    } else {
        Kind::Relay
    };
    let annotated = match &kind {
        Kind::ToolCall { tool, .. } => known(tool),
        Kind::Relay => None,
    };
    check_mirrored(headers, object, &method, &revision, &id, annotated.as_ref())?;
    Ok(Inbound { revision, message, kind })
}

/// `Mcp-Method`, `Mcp-Name` and `Mcp-Param-*` must agree with the body; on 2026-07-28 the first
/// two are required.
fn check_mirrored(
    headers: &[(String, String)],
    object: &Map<String, Value>,
    method: &str,
    revision: &str,
    id: &Value,
    annotated: Option<&Annotations>,
) -> Result<(), Answer> {
    let mismatch = |what: &str| Answer::rpc_error(400, id, HEADER_MISMATCH, what);
    let strict = revision == REVISION_2026;
    match header(headers, "mcp-method").0 {
        Some(value) => match decode_sentinel(value) {
            Some(decoded) if decoded == method => {}
            _ => return Err(mismatch("the Mcp-Method header does not match the body's method")),
        },
        None if strict => return Err(mismatch("MCP 2026-07-28 requires the Mcp-Method header")),
        None => {}
    }
    let params = object.get("params").and_then(Value::as_object);
    if method == "tools/call" {
        let name = params.and_then(|p| p.get("name")).and_then(Value::as_str).unwrap_or_default();
        match header(headers, "mcp-name").0 {
            Some(value) => match decode_sentinel(value) {
                Some(decoded) if decoded == name => {}
                _ => return Err(mismatch("the Mcp-Name header does not match the body's params.name")),
            },
            None if strict => return Err(mismatch("MCP 2026-07-28 requires the Mcp-Name header on tools/call")),
            None => {}
        }
    }
    let arguments = params.and_then(|p| p.get("arguments")).and_then(Value::as_object);
    let mirrored: Vec<(String, &str)> = headers
        .iter()
        .filter_map(|(key, value)| {
            let lower = key.to_ascii_lowercase();
            lower.strip_prefix("mcp-param-").map(|suffix| (suffix.to_owned(), value.as_str()))
        })
        .collect();
    let Some(annotated) = annotated else {
        // The tool's schema (its x-mcp-header names) is not known: fall back to a
        // case-insensitive top-level argument key, as the D11 recommendation says.
        for (suffix, value) in &mirrored {
            let found = arguments.and_then(|args| args.iter().find(|(k, _)| k.eq_ignore_ascii_case(suffix)));
            let agrees = match (found, decode_sentinel(value)) {
                (Some((_, body)), Some(decoded)) => rendered(body).is_some_and(|r| r == decoded),
                _ => false,
            };
            if !agrees {
                return Err(mismatch("an Mcp-Param header does not match the body's argument of that name"));
            }
        }
        return Ok(());
    };
    // The schema is known (from a relayed tools/list): X is the x-mcp-header value, at any
    // depth (SEP-2243).
    for (suffix, value) in &mirrored {
        let Some((_, path)) = annotated.iter().find(|(name, _)| name.eq_ignore_ascii_case(suffix)) else {
            return Err(mismatch(
                "an Mcp-Param header names no x-mcp-header parameter of this tool; send only the annotated ones",
            ));
        };
        let agrees = match (at_path(arguments, path), decode_sentinel(value)) {
            (Some(body), Some(decoded)) => header_agrees(body, &decoded),
            _ => false,
        };
        if !agrees {
            return Err(mismatch("an Mcp-Param header does not match the argument its x-mcp-header annotates"));
        }
    }
    if strict {
        for (name, path) in annotated {
            let present = at_path(arguments, path).is_some_and(|value| !value.is_null());
            if present && !mirrored.iter().any(|(suffix, _)| suffix.eq_ignore_ascii_case(name)) {
                return Err(mismatch(&format!(
                    "the argument annotated x-mcp-header {name:?} was sent without its Mcp-Param-{name} header; add it"
                )));
            }
        }
    }
    Ok(())
}

/// The argument at `path` (object keys from the top).
fn at_path<'v>(arguments: Option<&'v Map<String, Value>>, path: &[String]) -> Option<&'v Value> {
    let (first, rest) = path.split_first()?;
    let mut value = arguments?.get(first)?;
    for key in rest {
        value = value.as_object()?.get(key)?;
    }
    Some(value)
}

/// SEP-2243: a string bare, a bool as `true`/`false`, an integer compared numerically (a
/// header in decimal digits, optionally signed with `-`); a float spelling never agrees.
fn header_agrees(body: &Value, header: &str) -> bool {
    match body {
        Value::Number(number) if is_integer(number) => {
            integer_digits(header).is_some_and(|h| integer_digits(&number.to_string()).is_some_and(|b| b == h))
        }
        other => rendered(other).is_some_and(|r| r == header),
    }
}

/// `-?[0-9]+` as (negative, digits without leading zeros); `None` for anything else.
fn integer_digits(text: &str) -> Option<(bool, String)> {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let trimmed = digits.trim_start_matches('0');
    let trimmed = if trimmed.is_empty() { "0" } else { trimmed };
    Some((negative && trimmed != "0", trimmed.to_owned()))
}

/// A header value, or the text inside a `=?base64?…?=` sentinel; `None` when that is undecodable.
pub fn decode_sentinel(value: &str) -> Option<String> {
    let value = value.trim();
    match value.strip_prefix("=?base64?").and_then(|rest| rest.strip_suffix("?=")) {
        Some(encoded) => {
            let bytes = base64::engine::general_purpose::STANDARD.decode(encoded).ok()?;
            String::from_utf8(bytes).ok()
        }
        None => Some(value.to_owned()),
    }
}

/// How a header renders an argument: a string bare, an integer as JSON text, a bool as
/// `true`/`false`. Any other type never agrees.
fn rendered(value: &Value) -> Option<String> {
    match value {
        Value::String(text) => Some(text.clone()),
        Value::Bool(flag) => Some(flag.to_string()),
        Value::Number(number) if is_integer(number) => Some(number.to_string()),
        _ => None,
    }
}

/// An integer of any size; `2000.0` and `2e3` are not integers.
pub fn is_integer(number: &serde_json::Number) -> bool {
    let text = number.to_string();
    !text.contains(['.', 'e', 'E'])
}

/// The JSON pointer of the first float in `value` (depth first), if any.
pub fn first_float(value: &Value) -> Option<String> {
    fn walk(value: &Value, path: &mut Vec<String>) -> Option<String> {
        match value {
            Value::Number(number) if !is_integer(number) => {
                Some(path.iter().map(|segment| format!("/{segment}")).collect::<String>())
            }
            Value::Array(items) => items.iter().enumerate().find_map(|(i, item)| {
                path.push(i.to_string());
                let found = walk(item, path);
                path.pop();
                found
            }),
            Value::Object(map) => map.iter().find_map(|(key, item)| {
                path.push(key.replace('~', "~0").replace('/', "~1"));
                let found = walk(item, path);
                path.pop();
                found
            }),
            _ => None,
        }
    }
    walk(value, &mut Vec::new())
}

#[cfg(test)]
mod annotation_tests {
    use super::*;
    use serde_json::json;

    fn h(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    fn known(_: &str) -> Option<Annotations> {
        let schema = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "order": {"type": "object", "properties": {"amount": {"type": "integer", "x-mcp-header": "Amount"}}},
            "note": {"type": "string"},
        }});
        Some(annotations(&schema))
    }

    fn call(arguments: serde_json::Value) -> Vec<u8> {
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "t", "arguments": arguments}})
            .to_string()
            .into_bytes()
    }

    const BASE: [(&str, &str); 3] =
        [("MCP-Protocol-Version", "2026-07-28"), ("Mcp-Method", "tools/call"), ("Mcp-Name", "t")];

    fn with(extra: &[(&'static str, &'static str)]) -> Vec<(String, String)> {
        let mut all: Vec<(&str, &str)> = BASE.to_vec();
        all.extend_from_slice(extra);
        h(&all)
    }

    #[test]
    fn annotations_are_found_at_any_depth() {
        let found = known("t").expect("known");
        assert!(found.contains(&("Region".to_owned(), vec!["region".to_owned()])));
        assert!(found.contains(&("Amount".to_owned(), vec!["order".to_owned(), "amount".to_owned()])));
        assert_eq!(found.len(), 2);
    }

    #[test]
    fn with_a_known_schema_headers_follow_the_annotations() {
        let arguments = json!({"region": "eu", "order": {"amount": 2000}, "note": "n"});
        let ok = with(&[("Mcp-Param-Region", "eu"), ("Mcp-Param-Amount", "02000")]);
        assert!(
            parse_post_with(&ok, &call(arguments.clone()), UnknownMethods::Relay, &known).is_ok(),
            "integers compare numerically"
        );
        let refused = |headers: Vec<(String, String)>| {
            let answer = parse_post_with(&headers, &call(arguments.clone()), UnknownMethods::Relay, &known)
                .expect_err("refused");
            answer.body.expect("body")["error"]["code"].as_i64()
        };
        // An annotated value without its header.
        assert_eq!(refused(with(&[("Mcp-Param-Region", "eu")])), Some(HEADER_MISMATCH));
        // A header for an argument that is not annotated (the top-level fallback is off).
        assert_eq!(
            refused(with(&[("Mcp-Param-Region", "eu"), ("Mcp-Param-Amount", "2000"), ("Mcp-Param-Note", "n")])),
            Some(HEADER_MISMATCH)
        );
        for bad in ["2000.0", "2e3", "+2000", "2001"] {
            let headers = h(&[BASE[0], BASE[1], BASE[2], ("Mcp-Param-Region", "eu"), ("Mcp-Param-Amount", bad)]);
            assert_eq!(refused(headers), Some(HEADER_MISMATCH), "{bad}");
        }
        // Without the schema, the same nested header has no top-level argument: refused; the
        // top-level fallback still works.
        let fallback = with(&[("Mcp-Param-Note", "n")]);
        assert!(parse_post(&fallback, &call(arguments.clone())).is_ok());
        assert!(parse_post(&with(&[("Mcp-Param-Amount", "2000")]), &call(arguments)).is_err());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    fn call(id: &str) -> Vec<u8> {
        format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"t","arguments":{{"amount":200,"note":"x"}}}}}}"#)
            .into_bytes()
    }

    fn code(answer: &Answer) -> Option<i64> {
        answer.body.as_ref()?.get("error")?.get("code")?.as_i64()
    }

    #[test]
    fn untrusted_bodies_are_refused_with_ctrlruns_codes() {
        type Row<'a> = (&'a [u8], &'a [(&'a str, &'a str)], u16, i64);
        let table: &[Row<'_>] = &[
            (b"{not json", &[], 400, PARSE_ERROR),
            (b"[]", &[], 400, INVALID_REQUEST),
            (b"42", &[], 400, INVALID_REQUEST),
            (br#"{"jsonrpc":"1.0","id":1,"method":"x"}"#, &[], 400, INVALID_REQUEST),
            (br#"{"jsonrpc":"2.0","id":1}"#, &[], 400, INVALID_REQUEST),
            (br#"{"jsonrpc":"2.0","id":1,"method":""}"#, &[], 400, INVALID_REQUEST),
            (br#"{"jsonrpc":"2.0","id":1,"method":7}"#, &[], 400, INVALID_REQUEST),
            (br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}"#, &[], 400, INVALID_REQUEST),
            (br#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"t"}}"#, &[], 400, INVALID_REQUEST),
            (br#"{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"t"}}"#, &[], 400, INVALID_REQUEST),
            (br#"{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{"name":"t"}}"#, &[], 400, INVALID_REQUEST),
            (
                br#"{"jsonrpc":"2.0","id":1,"method":"x"}"#,
                &[("MCP-Protocol-Version", "2024-11-05")],
                400,
                UNSUPPORTED_VERSION,
            ),
            (
                br#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
                &[("MCP-Protocol-Version", REVISION_2026), ("Mcp-Method", "x")],
                400,
                INVALID_REQUEST,
            ),
            (
                br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
                &[("MCP-Protocol-Version", REVISION_2026)],
                400,
                HEADER_MISMATCH,
            ),
        ];
        for (body, headers, status, expected) in table {
            let answer = parse_post(&h(headers), body).expect_err("refused");
            assert_eq!((answer.status, code(&answer)), (*status, Some(*expected)), "{}", String::from_utf8_lossy(body));
            assert!(answer.body.as_ref().and_then(|b| b.get("error")).and_then(|e| e.get("data")).is_none());
        }
    }

    #[test]
    fn mirrored_headers_must_agree_with_the_body() {
        let strict = |extra: &[(&str, &str)]| {
            let mut headers = vec![("MCP-Protocol-Version", REVISION_2026), ("Mcp-Method", "tools/call")];
            headers.extend_from_slice(extra);
            parse_post(&h(&headers), &call("1"))
        };
        assert!(strict(&[("Mcp-Name", "t")]).is_ok());
        assert!(strict(&[("Mcp-Name", "=?base64?dA==?=")]).is_ok(), "a sentinel decoding to the name passes");
        for bad in ["other", "=?base64?@@@?="] {
            assert_eq!(code(&strict(&[("Mcp-Name", bad)]).expect_err("mismatch")), Some(HEADER_MISMATCH));
        }
        assert_eq!(code(&strict(&[]).expect_err("missing Mcp-Name")), Some(HEADER_MISMATCH));
        assert!(strict(&[("Mcp-Name", "t"), ("Mcp-Param-Amount", "200")]).is_ok());
        for bad in ["+200", "02000", "2000.0", "201"] {
            assert_eq!(
                code(&strict(&[("Mcp-Name", "t"), ("Mcp-Param-amount", bad)]).expect_err(bad)),
                Some(HEADER_MISMATCH)
            );
        }
        assert_eq!(
            code(&strict(&[("Mcp-Name", "t"), ("Mcp-Param-missing", "1")]).expect_err("no such argument")),
            Some(HEADER_MISMATCH)
        );
        // 2025 revisions: mirrored headers optional, decided from the body.
        let inbound = parse_post(&h(&[("MCP-Protocol-Version", "2025-11-25")]), &call("\"a\"")).expect("passes");
        assert_eq!(inbound.kind, Kind::ToolCall { id: json!("a"), tool: "t".into() });
        let inbound = parse_post(&[], &call("7")).expect("no version header");
        assert_eq!(inbound.revision, DEFAULT_REVISION);
    }

    #[test]
    fn a_response_body_is_relayed_on_2025_only() {
        let body = br#"{"jsonrpc":"2.0","id":1,"result":{}}"#;
        assert_eq!(parse_post(&h(&[("MCP-Protocol-Version", "2025-06-18")]), body).expect("relay").kind, Kind::Relay);
    }

    #[test]
    fn repeated_identity_headers_and_foreign_origins_are_refused() {
        let names = vec!["X-Agent".to_owned()];
        let origins = vec!["https://ok.example".to_owned()];
        let checks = Checks { identity_headers: &names, allowed_origins: &origins };
        let twice = check_headers(&h(&[("x-agent", "a"), ("X-AGENT", "b")]), &checks).expect_err("twice");
        assert_eq!((twice.status, code(&twice)), (403, Some(-41007)));
        assert!(check_headers(&h(&[("X-Agent", "a"), ("X-Other", "1"), ("X-Other", "2")]), &checks).is_ok());
        assert_eq!(check_headers(&h(&[("Origin", "https://evil.example")]), &checks), Err(Answer::empty(403)));
        assert!(check_headers(&h(&[("Origin", "https://ok.example")]), &checks).is_ok());
        let none = Checks { identity_headers: &names, allowed_origins: &[] };
        assert_eq!(check_headers(&h(&[("Origin", "https://ok.example")]), &none), Err(Answer::empty(403)));
    }

    #[test]
    fn floats_are_found_at_any_depth() {
        let table = [
            (json!({"amount": 1}), None),
            (json!({"amount": 1.5}), Some("/amount")),
            (json!({"meta": {"x": [1, 2e3]}}), Some("/meta/x/1")),
            (json!({"a/b": 0.5}), Some("/a~1b")),
            (json!({"big": 123456789012345678901234567890u128}), None),
        ];
        for (value, pointer) in table {
            assert_eq!(first_float(&value).as_deref(), pointer, "{value}");
        }
    }
}

#[cfg(test)]
mod method_tests {
    use super::*;
    use proptest::prelude::*;

    fn request(method: &str) -> Vec<u8> {
        json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": {"name": "create_refund", "arguments": {}}})
            .to_string()
            .into_bytes()
    }

    fn parsed(method: &str, unknown: UnknownMethods) -> Result<Inbound, Answer> {
        parse_post_with(&[], &request(method), unknown, &|_| None)
    }

    fn message(answer: &Answer) -> String {
        answer.body.as_ref().and_then(|b| b["error"]["message"].as_str()).unwrap_or_default().to_owned()
    }

    /// Spellings that mean a method the gateway acts on, and the method each is refused as.
    const NEAR_MISSES: [(&str, &str); 25] = [
        ("TOOLS/CALL", "tools/call"),
        ("Tools/Call", "tools/call"),
        (" tools/call", "tools/call"),
        ("tools/call ", "tools/call"),
        ("tools/call\n", "tools/call"),
        ("\ttools/call", "tools/call"),
        ("tools / call", "tools/call"),
        ("tools/\u{200B}call", "tools/call"),
        ("\u{FEFF}tools/call", "tools/call"),
        ("tools\u{00AD}/call", "tools/call"),
        ("tools/call\u{2060}", "tools/call"),
        ("\u{FF54}\u{FF4F}\u{FF4F}\u{FF4C}\u{FF53}\u{FF0F}\u{FF43}\u{FF41}\u{FF4C}\u{FF4C}", "tools/call"),
        ("tool\u{017F}/call", "tools/call"),
        ("tools/cal\u{217C}", "tools/call"),
        ("\u{1D42D}ools/call", "tools/call"),
        ("tools_call", "tools/call"),
        ("tools.call", "tools/call"),
        // Look-alikes from other scripts (the TR39 skeleton): Cyrillic о, Greek ο, Cyrillic с.
        ("t\u{043E}\u{043E}ls/call", "tools/call"),
        ("to\u{03BF}ls/call", "tools/call"),
        ("tools/\u{0441}all", "tools/call"),
        ("TOOLS/LIST", "tools/list"),
        (" tools/list", "tools/list"),
        ("Initialize", "initialize"),
        ("logging/setlevel", "logging/setLevel"),
        ("Notifications/Initialized", "notifications/initialized"),
    ];

    #[test]
    fn a_near_miss_of_a_known_method_is_refused_naming_it_and_the_exact_spelling() {
        for (spelling, meant) in NEAR_MISSES {
            for unknown in [UnknownMethods::Relay, UnknownMethods::Refuse] {
                let answer = parsed(spelling, unknown).expect_err(spelling);
                assert_eq!(
                    (answer.status, answer.body.as_ref().map(|b| b["error"]["code"].clone())),
                    (400, Some(json!(INVALID_REQUEST))),
                    "{spelling:?}"
                );
                assert_eq!(answer.body.as_ref().map(|b| b["id"].clone()), Some(json!(7)));
                let text = message(&answer);
                assert!(text.contains(&format!("{spelling:?}")), "{spelling:?}: {text}");
                assert!(text.contains(&format!("send \"{meant}\" exactly")), "{spelling:?}: {text}");
            }
        }
    }

    #[test]
    fn exact_known_methods_pass_and_unknown_ones_follow_the_document() {
        for method in KNOWN_METHODS {
            for unknown in [UnknownMethods::Relay, UnknownMethods::Refuse] {
                let inbound = parsed(method, unknown).unwrap_or_else(|a| panic!("{method}: {:?}", a.body));
                let intercepted = matches!(inbound.kind, Kind::ToolCall { .. });
                assert_eq!(intercepted, method == "tools/call", "{method}");
            }
        }
        for method in ["x/custom", "acme/refund", "tools/calls", "tool/call", "tools/call2"] {
            assert_eq!(parsed(method, UnknownMethods::Relay).map(|i| i.kind), Ok(Kind::Relay), "{method}");
            let refused = parsed(method, UnknownMethods::Refuse).expect_err(method);
            assert_eq!(refused.body.as_ref().map(|b| b["error"]["code"].clone()), Some(json!(METHOD_NOT_FOUND)));
            let text = message(&refused);
            assert!(text.contains(&format!("{method:?}")) && text.contains("unknown_methods: refuse"), "{text}");
        }
    }

    #[test]
    fn known_methods_have_distinct_meanings() {
        let mut meanings: Vec<String> = KNOWN_METHODS.iter().map(|m| method_meaning(m)).collect();
        meanings.sort();
        meanings.dedup();
        assert_eq!(meanings.len(), KNOWN_METHODS.len());
    }

    #[test]
    fn an_mcp_method_header_must_name_the_bodys_method_exactly() {
        let h = |value: &str| vec![("Mcp-Method".to_owned(), value.to_owned())];
        for value in ["TOOLS/CALL", "Tools/Call", "tools/ call", "=?base64?VE9PTFMvQ0FMTA==?="] {
            let answer =
                parse_post_with(&h(value), &request("tools/call"), UnknownMethods::Relay, &|_| None).expect_err(value);
            assert_eq!(
                answer.body.as_ref().map(|b| b["error"]["code"].clone()),
                Some(json!(HEADER_MISMATCH)),
                "{value}"
            );
        }
        // A header that agrees with a misspelt body does not make the body pass.
        let answer = parse_post_with(&h("TOOLS/CALL"), &request("TOOLS/CALL"), UnknownMethods::Relay, &|_| None)
            .expect_err("misspelt");
        assert_eq!(answer.body.as_ref().map(|b| b["error"]["code"].clone()), Some(json!(INVALID_REQUEST)));
        assert!(parse_post_with(&h("tools/call"), &request("tools/call"), UnknownMethods::Relay, &|_| None).is_ok());
    }

    /// One character of `tools/call` as a client might spell it: any case, fullwidth, a
    /// mathematical letter, with invisible or blank characters around it.
    fn spelt(c: char) -> impl Strategy<Value = String> {
        let upper = c.to_ascii_uppercase();
        let wide = char::from_u32(u32::from(c) - 0x21 + 0xFF01).unwrap_or(c);
        let forms = prop::sample::select(vec![c.to_string(), upper.to_string(), wide.to_string()]);
        let noise = prop::sample::select(vec![
            "", "", "", " ", "\t", "\n", "\u{200B}", "\u{200D}", "\u{00AD}", "\u{FEFF}", "\u{2060}", "\u{3000}",
            "\u{00A0}",
        ]);
        (noise.clone(), forms, noise).prop_map(|(before, form, after)| format!("{before}{form}{after}"))
    }

    fn spelling() -> impl Strategy<Value = String> {
        "tools/call".chars().map(spelt).collect::<Vec<_>>().prop_map(|parts| parts.concat())
    }

    proptest! {
        #[test]
        fn no_spelling_that_means_tools_call_is_relayed(method in spelling()) {
            prop_assert_eq!(method_meaning(&method), "toolscall");
            for unknown in [UnknownMethods::Relay, UnknownMethods::Refuse] {
                match parsed(&method, unknown) {
                    Ok(inbound) => {
                        prop_assert_eq!(method.as_str(), "tools/call");
                        let intercepted = matches!(inbound.kind, Kind::ToolCall { .. });
                        prop_assert!(intercepted, "tools/call was not intercepted");
                    }
                    Err(answer) => {
                        prop_assert!(method != "tools/call");
                        prop_assert_eq!(answer.body.map(|b| b["error"]["code"].clone()), Some(json!(INVALID_REQUEST)));
                    }
                }
            }
        }

        #[test]
        fn any_method_is_intercepted_refused_or_means_something_else(method in "\\PC{0,16}") {
            if let Ok(inbound) = parsed(&method, UnknownMethods::Relay) {
                let intercepted = matches!(inbound.kind, Kind::ToolCall { .. });
                prop_assert_eq!(intercepted, method == "tools/call");
                prop_assert!(method == "tools/call" || method_meaning(&method) != "toolscall");
            }
        }
    }
}
