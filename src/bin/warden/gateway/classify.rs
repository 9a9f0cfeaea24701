//! The outcome table (mcp-gateway.md §3.2) as one pure function: what the upstream did to an
//! intercepted `tools/call` → the effect's state and what the client receives. Asymmetric on
//! purpose: only proof that nothing ran gives FAILED; everything else that is not a clean
//! result is AMBIGUOUS.

use serde_json::Value;

/// JSON-RPC codes a server returns before it dispatches anything (the closed pre-dispatch set).
pub const PRE_DISPATCH: [i64; 7] = [-32700, -32600, -32601, -32602, -32020, -32021, -32022];

/// What was observed of one forwarded call.
#[derive(Debug, Clone, PartialEq)]
pub enum Observation {
    /// No connection was ever established (refused, unresolvable, connect timeout, TLS
    /// handshake failure, child process gone before the request was written).
    NeverConnected(String),
    /// Something broke after the connection was up: reset, close, timeout, unreadable framing.
    Broken(String),
    /// An answer arrived: the HTTP status (200 on stdio), whether a `WWW-Authenticate` challenge
    /// came with it, and the body parsed as JSON when it was JSON.
    Answered { status: u16, challenge: bool, body: Option<Value> },
    /// The upstream asked the client to sample with tools on the call's stream
    /// (`gateway.sampling_tools: refuse`); the stream was cut there, so the leg may have acted.
    SamplingRefused(String),
}

/// The effect's state after the call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    Committed,
    /// FAILED: the upstream provably did nothing; the text names the observation.
    Failed(String),
    /// AMBIGUOUS: the outcome is unknown; the text names the observation.
    Ambiguous(String),
}

/// What the client gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// The upstream's own answer (status, headers, body), with the receipt `_meta` added when
    /// the body is a JSON object.
    Relay,
    /// `502 -41011 warden.upstream_not_executed`.
    NotExecuted,
    /// `502 -41010 warden.upstream_ambiguous`.
    Ambiguous,
    /// `403 -41019 warden.sampling_tools_refused`: the answer asked for sampling with tools
    /// (`gateway.sampling_tools: refuse`); the effect is AMBIGUOUS.
    SamplingRefused,
}

/// How the call was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Context<'a> {
    pub request_id: &'a Value,
    /// The MCP revision the client spoke: on 2026-07-28 a result must say `resultType`.
    pub revision: &'a str,
    /// The entry's `mcp.not_executed_on_error`: an operator's claim that `isError` means nothing ran.
    pub not_executed_on_error: bool,
}

pub fn classify(observation: &Observation, context: &Context<'_>) -> (Effect, Reply) {
    match observation {
        Observation::NeverConnected(what) => (Effect::Failed(what.clone()), Reply::NotExecuted),
        Observation::Broken(what) => (Effect::Ambiguous(what.clone()), Reply::Ambiguous),
        Observation::SamplingRefused(what) => (Effect::Ambiguous(what.clone()), Reply::SamplingRefused),
        Observation::Answered { status: 401, .. } => (Effect::Failed("HTTP 401".into()), Reply::Relay),
        Observation::Answered { status: 403, challenge: true, .. } => {
            (Effect::Failed("HTTP 403 with challenge".into()), Reply::Relay)
        }
        Observation::Answered { status, body, .. } => match body.as_ref().map(|b| envelope(b, context)) {
            Some(Ok(effect)) => (effect, Reply::Relay),
            Some(Err(what)) => (Effect::Ambiguous(format!("HTTP {status}: {what}")), Reply::Ambiguous),
            None => (Effect::Ambiguous(format!("HTTP {status} without a JSON-RPC body")), Reply::Ambiguous),
        },
    }
}

/// A well-formed JSON-RPC response for this request → its effect; anything else → why not.
fn envelope(body: &Value, context: &Context<'_>) -> Result<Effect, String> {
    let Some(object) = body.as_object() else { return Err("the body is not a JSON object".into()) };
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err("the body is not JSON-RPC 2.0".into());
    }
    // Exact JSON equality: 1 and "1" differ, and so do 42 and 42.0.
    if object.get("id") != Some(context.request_id) {
        return Err("the response's id is not the request's".into());
    }
    if object.get("_meta").is_some_and(|meta| !meta.is_object()) {
        return Err("_meta is not an object".into());
    }
    match (object.get("result"), object.get("error")) {
        (Some(result), None) => result_effect(result, context),
        (None, Some(error)) => {
            let code = error.get("code").and_then(Value::as_i64);
            let message = error.get("message").map(Value::is_string).unwrap_or(false);
            let integral = error.get("code").and_then(Value::as_number).is_some_and(super::wire::is_integer);
            match code {
                Some(code) if message && integral => {
                    if PRE_DISPATCH.contains(&code) {
                        Ok(Effect::Failed(format!("upstream error {code}")))
                    } else {
                        Ok(Effect::Ambiguous(format!("upstream error {code}")))
                    }
                }
                _ => Err("the error has no integer code or no string message".into()),
            }
        }
        _ => Err("the body has both or neither of result and error".into()),
    }
}

fn result_effect(result: &Value, context: &Context<'_>) -> Result<Effect, String> {
    let Some(result) = result.as_object() else { return Err("result is not an object".into()) };
    let is_error = match result.get("isError") {
        None => false,
        Some(Value::Bool(flag)) => *flag,
        Some(_) => return Err("isError is not a boolean".into()),
    };
    match result.get("resultType") {
        Some(Value::String(kind)) if kind == "complete" => {}
        Some(Value::String(kind)) if kind == "input_required" => {
            // Unless the gateway holds it as a suspension (a requestState and an effect key, see
            // `intercept`), the outcome of a call the client will continue is unknown.
            return Ok(Effect::Ambiguous("input_required with nothing held".into()));
        }
        Some(_) => return Ok(Effect::Ambiguous("resultType unknown".into())),
        None if context.revision == super::wire::REVISION_2026 => {
            return Ok(Effect::Ambiguous("result without resultType on 2026-07-28".into()));
        }
        None => {}
    }
    if is_error {
        if context.not_executed_on_error {
            return Ok(Effect::Failed("isError (not_executed_on_error)".into()));
        }
        return Ok(Effect::Ambiguous("isError".into()));
    }
    Ok(Effect::Committed)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn answered(status: u16, challenge: bool, body: Option<Value>) -> Observation {
        Observation::Answered { status, challenge, body }
    }

    fn result(id: Value, result: Value) -> Option<Value> {
        Some(json!({"jsonrpc": "2.0", "id": id, "result": result}))
    }

    fn error(code: Value) -> Option<Value> {
        Some(json!({"jsonrpc": "2.0", "id": 1, "error": {"code": code, "message": "m"}}))
    }

    #[test]
    fn every_row_of_the_outcome_table() {
        let id = json!(1);
        let new = Context { request_id: &id, revision: "2026-07-28", not_executed_on_error: false };
        let old = Context { request_id: &id, revision: "2025-06-18", not_executed_on_error: false };
        let careful = Context { not_executed_on_error: true, ..new };
        let complete = json!({"resultType": "complete", "content": []});
        let failed = |what: &str| Effect::Failed(what.into());
        let table: Vec<(Observation, Context<'_>, Effect, Reply)> = vec![
            (Observation::NeverConnected("connect refused".into()), new, failed("connect refused"), Reply::NotExecuted),
            (Observation::Broken("reset".into()), new, Effect::Ambiguous("reset".into()), Reply::Ambiguous),
            (answered(200, false, result(json!(1), complete.clone())), new, Effect::Committed, Reply::Relay),
            (answered(429, false, result(json!(1), complete.clone())), new, Effect::Committed, Reply::Relay),
            (answered(200, false, result(json!(1), json!({"content": []}))), old, Effect::Committed, Reply::Relay),
            (
                answered(200, false, result(json!(1), json!({"content": []}))),
                new,
                Effect::Ambiguous("result without resultType on 2026-07-28".into()),
                Reply::Relay,
            ),
            (
                answered(200, false, result(json!(1), json!({"resultType": "partial"}))),
                new,
                Effect::Ambiguous("resultType unknown".into()),
                Reply::Relay,
            ),
            (
                answered(200, false, result(json!(1), json!({"resultType": "complete", "isError": true}))),
                new,
                Effect::Ambiguous("isError".into()),
                Reply::Relay,
            ),
            (
                answered(200, false, result(json!(1), json!({"resultType": "complete", "isError": true}))),
                careful,
                failed("isError (not_executed_on_error)"),
                Reply::Relay,
            ),
            (answered(200, false, error(json!(-32602))), new, failed("upstream error -32602"), Reply::Relay),
            (answered(400, false, error(json!(-32700))), new, failed("upstream error -32700"), Reply::Relay),
            (
                answered(200, false, error(json!(-32603))),
                new,
                Effect::Ambiguous("upstream error -32603".into()),
                Reply::Relay,
            ),
            (answered(200, false, error(json!(42))), new, Effect::Ambiguous("upstream error 42".into()), Reply::Relay),
            (answered(401, false, None), new, failed("HTTP 401"), Reply::Relay),
            (answered(401, false, error(json!(-32603))), new, failed("HTTP 401"), Reply::Relay),
            (answered(403, true, None), new, failed("HTTP 403 with challenge"), Reply::Relay),
            (
                answered(403, false, error(json!(-32001))),
                new,
                Effect::Ambiguous("upstream error -32001".into()),
                Reply::Relay,
            ),
        ];
        for (observation, context, effect, reply) in table {
            assert_eq!(classify(&observation, &context), (effect, reply), "{observation:?}");
        }
    }

    #[test]
    fn malformed_envelopes_are_ambiguous() {
        let id = json!(1);
        let context = Context { request_id: &id, revision: "2025-06-18", not_executed_on_error: false };
        let bodies = [
            None,
            Some(json!("text")),
            Some(json!({"jsonrpc": "2.0", "id": "1", "result": {}})),
            Some(json!({"jsonrpc": "2.0", "id": 1.0, "result": {}})),
            Some(json!({"jsonrpc": "2.0", "id": true, "result": {}})),
            Some(json!({"jsonrpc": "2.0", "id": null, "result": {}})),
            Some(json!({"jsonrpc": "2.0", "result": {}})),
            Some(json!({"jsonrpc": "2.0", "id": 1})),
            Some(json!({"jsonrpc": "2.0", "id": 1, "result": {}, "error": {"code": 1, "message": "m"}})),
            Some(json!({"jsonrpc": "2.0", "id": 1, "error": {"code": "1", "message": "m"}})),
            Some(json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32602.0, "message": "m"}})),
            Some(json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32602}})),
            Some(json!({"jsonrpc": "2.0", "id": 1, "result": {"isError": "yes"}})),
            Some(json!({"jsonrpc": "2.0", "id": 1, "result": {}, "_meta": []})),
            Some(json!({"jsonrpc": "2.0", "id": 1, "result": []})),
        ];
        for body in bodies {
            for status in [200, 500, 502] {
                let (effect, reply) = classify(&answered(status, false, body.clone()), &context);
                assert!(matches!(effect, Effect::Ambiguous(_)), "{body:?}");
                assert_eq!(reply, Reply::Ambiguous, "{body:?}");
            }
        }
    }
}
