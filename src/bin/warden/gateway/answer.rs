//! What the client is told of an intercepted call: refusals — JSON-RPC errors with ctrlrun's
//! codes and `warden.*` tokens, the kernel's refusals among them — and the synthesised answer
//! for an outcome with no readable reply; the receipt summary as `_meta["dev.warden/receipt"]`
//! inside `result._meta` (or the error's `data._meta`), where the MCP SDKs' typed results read
//! it — not at the envelope's top level, as the reference does; and the log line per call.

use serde_json::{json, Map, Value};

use warden::Error;

use super::classify::Reply;
use super::intercept::Engine;
use super::log;
use super::telemetry::InFlight;

/// The `_meta` key of the receipt summary.
pub const META_KEY: &str = "dev.warden/receipt";

/// A refusal or a made-up answer: HTTP status and the JSON-RPC body.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub status: u16,
    pub body: Value,
}

/// The outcome as the client will see it.
pub struct Finished {
    pub reply: Reply,
    /// The receipt summary (`_meta["dev.warden/receipt"]`).
    pub meta: Value,
    pub action_id: String,
    pub effect_key: Option<String>,
    /// The document's `gateway.icons`, for a relayed result's resource links.
    pub icons: warden::document::Icons,
}

impl Finished {
    /// The upstream's answer as relayed: icons as the document says (`lists::result_icons`),
    /// then the receipt summary (`with_meta`).
    pub fn relayed(&self, envelope: &mut Value) {
        super::lists::result_icons(envelope, self.icons);
        with_meta(envelope, &self.meta);
    }
}

/// `{"jsonrpc":"2.0","id":…,"error":{"code","message","data":{"error":token,…}}}`.
pub fn refusal(id: &Value, status: u16, code: i64, token: &str, message: &str, data: Value) -> Answer {
    let mut data = match data {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    data.insert("error".into(), json!(token));
    Answer {
        status,
        body: json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message, "data": data}}),
    }
}

pub(super) fn internal(id: &Value) -> Answer {
    refusal(
        id,
        500,
        -32603,
        "warden.internal",
        "warden could not decide this call (a store fault); nothing was forwarded — see the gateway's log",
        json!({}),
    )
}

/// The synthesised answer for an outcome with no readable reply (`-41010`/`-41011`), with `_meta`.
pub fn synthesised(id: &Value, finished: &Finished) -> Answer {
    let data = json!({"effect_key": finished.effect_key, "action_id": finished.action_id});
    let mut answer = match finished.reply {
        Reply::SamplingRefused => refusal(
            id,
            403,
            -41019,
            "warden.sampling_tools_refused",
            "the upstream asked the client's model to use tools inside sampling, which the server would then run with \
             no decision; this gateway does not relay it (gateway.sampling_tools: refuse). The call's effect is \
             AMBIGUOUS until a human checks it and runs 'warden resolve'",
            json!({"reason": "sampling_tools", "effect_key": finished.effect_key, "action_id": finished.action_id}),
        ),
        Reply::NotExecuted => refusal(
            id,
            502,
            -41011,
            "warden.upstream_not_executed",
            "the upstream was never reached, so the tool did not run; the call may be sent again",
            data,
        ),
        _ => refusal(
            id,
            502,
            -41010,
            "warden.upstream_ambiguous",
            "the upstream's outcome is not known; the effect is AMBIGUOUS until a human checks it and runs 'warden resolve'",
            data,
        ),
    };
    with_meta(&mut answer.body, &finished.meta);
    answer
}

/// Merge the receipt summary into the `_meta` of the `result` object — or of the error's `data`
/// object — where an MCP SDK's typed result reads it (`CallToolResult.meta`, `McpError.data`).
/// Never at the top level of the envelope, where the reference gateway puts it: JSON-RPC 2.0
/// gives a response no other member, and the official TypeScript SDK's strict schema drops such a
/// response as unreadable (its call then times out). A `result` that is not an object, or an
/// error `data` that is neither absent nor an object, is left as the upstream sent it.
pub fn with_meta(envelope: &mut Value, meta: &Value) {
    let put = |container: &mut Map<String, Value>| {
        if let Some(slot) = container.entry("_meta").or_insert_with(|| Value::Object(Map::new())).as_object_mut() {
            slot.insert(META_KEY.into(), meta.clone());
        }
    };
    let Some(object) = envelope.as_object_mut() else { return };
    if let Some(result) = object.get_mut("result") {
        if let Some(result) = result.as_object_mut() {
            put(result);
        }
    } else if let Some(error) = object.get_mut("error").and_then(Value::as_object_mut) {
        if let Some(data) = error.entry("data").or_insert_with(|| Value::Object(Map::new())).as_object_mut() {
            put(data);
        }
    }
}

/// How many of the newest receipts a refusal's receipt is looked for among.
const REFUSAL_RECEIPT_WINDOW: usize = 64;

impl Engine {
    /// A kernel refusal (or fault) as the client's JSON-RPC error.
    pub(super) fn refused(
        &self,
        id: &Value,
        name: &str,
        hash: Option<&str>,
        action_id: Option<String>,
        error: Error,
    ) -> Answer {
        let message = error.to_string();
        match error {
            Error::ApprovalRequired { request_id, expires_at, action_hash } => refusal(
                id,
                403,
                -41002,
                "warden.approval_required",
                &format!(
                    "{name} requires approval: a human runs 'warden approve {request_id}', then this same call runs"
                ),
                json!({
                    "request_id": request_id,
                    "action_hash": action_hash,
                    "expires_at": warden::clock::render(expires_at),
                }),
            ),
            Error::Denied { reason, .. } if reason == "approval_denied" => {
                let request_id = hash.and_then(|h| self.latest_request(h));
                refusal(id, 403, -41003, "warden.approval_denied", &message, json!({"request_id": request_id}))
            }
            Error::Denied { reason, .. } if reason == "principal_expired" || reason == "no_principal" => {
                refusal(id, 403, -41007, "warden.no_principal", "the credential offered was rejected", json!({}))
            }
            Error::Denied { reason, .. } => {
                refusal(id, 403, -41001, "warden.denied", &message, json!({"reason": reason, "action_id": action_id}))
            }
            Error::AuthorityDenied { reason, .. } => refusal(
                id,
                403,
                -41012,
                "warden.unauthorized",
                &message,
                json!({"reason": reason, "action_id": action_id}),
            ),
            Error::Duplicate { state, effect_key, .. } => refusal(
                id,
                409,
                -41004,
                "warden.duplicate_effect",
                &message,
                json!({"effect_key": effect_key, "state": state.as_str()}),
            ),
            Error::Ambiguous { effect_key, .. } => {
                refusal(id, 409, -41005, "warden.ambiguous_effect", &message, json!({"effect_key": effect_key}))
            }
            Error::ApprovalMismatch { reason, .. } => {
                refusal(id, 409, -41006, "warden.blocked", &message, json!({"reason": reason}))
            }
            Error::AttemptCeiling { .. } => {
                refusal(id, 409, -41006, "warden.blocked", &message, json!({"reason": "attempt_ceiling"}))
            }
            // A template that cannot render, arguments over the limits, a bad hop or task: the
            // call cannot become an action, so it is denied.
            Error::InvalidInput(_) => refusal(id, 403, -41001, "warden.denied", &message, json!({})),
            other => {
                log::warn(&format!("{name}: the kernel failed ({other}); nothing was forwarded"));
                internal(id)
            }
        }
    }

    /// A refusal that wrote a receipt (its `data.action_id` names the action) carries the
    /// receipt summary in `data._meta`, where an SDK's typed error reads it: the action id,
    /// and the receipt's id and result when it is among the newest receipts (an exact match on
    /// the action id; under a burst of other calls it may be out of the window: `null`).
    pub(super) fn refusal_meta(&self, body: &mut Value) {
        let Some(data) = body.get("error").and_then(|e| e.get("data")) else { return };
        let Some(action_id) = data.get("action_id").and_then(Value::as_str).map(str::to_owned) else { return };
        if data.get("_meta").is_some() {
            return;
        }
        let effect_key = data.get("effect_key").cloned().unwrap_or(Value::Null);
        let found = self.warden.kernel().last_receipts(REFUSAL_RECEIPT_WINDOW).ok().and_then(|rows| {
            rows.into_iter().rev().map(|(_, receipt)| receipt.to_json()).find(|r| r["action_id"] == action_id.as_str())
        });
        let meta = json!({
            "action_id": action_id,
            "receipt_id": found.as_ref().map(|r| r["receipt_id"].clone()).unwrap_or(Value::Null),
            "effect_key": effect_key,
            "result": found.as_ref().map(|r| r["result"].clone()).unwrap_or(json!("denied")),
            "attempt": Value::Null,
        });
        if let Some(data) = body.pointer_mut("/error/data").and_then(Value::as_object_mut) {
            let slot = data.entry("_meta").or_insert_with(|| Value::Object(Map::new()));
            if let Some(slot) = slot.as_object_mut() {
                slot.insert(META_KEY.into(), meta);
            }
        }
    }
}

impl Engine {
    /// A held task ended (`tasks`): its log line (no arguments: they are not kept) and its span.
    pub(super) fn task_settled(
        &self,
        tool: &str,
        decision: &str,
        meta: &Value,
        started: std::time::Instant,
        flight: Option<InFlight>,
    ) {
        log::call(&outcome_line(&format!("mcp.{}.{tool}", self.alias), tool, decision, meta, 0, started));
        self.end_flight(flight);
    }

    /// The log line of a call whose outcome was recorded (or held), with its arguments under
    /// `--log-arguments`.
    pub(super) fn log_outcome(
        &self,
        tool: &str,
        decision: &str,
        meta: &Value,
        round: u32,
        started: std::time::Instant,
        forward: &Value,
    ) {
        let mut line = outcome_line(&format!("mcp.{}.{tool}", self.alias), tool, decision, meta, round, started);
        if self.log_arguments {
            line["arguments"] = arguments_of(forward);
        }
        log::call(&line);
    }
}

/// A `tools/call` message's `params.arguments` (null when it has none).
pub(super) fn arguments_of(message: &Value) -> Value {
    message.get("params").and_then(|p| p.get("arguments")).cloned().unwrap_or(Value::Null)
}

fn millis(started: std::time::Instant) -> f64 {
    (started.elapsed().as_micros() as f64 / 1000.0 * 10.0).round() / 10.0
}

/// The log line of a call refused before it was forwarded: what the client was told, never
/// the arguments.
pub(super) fn refusal_line(action: &str, tool: &str, body: &Value, started: std::time::Instant) -> Value {
    let error = body.get("error");
    let data = error.and_then(|e| e.get("data"));
    let code = error.and_then(|e| e.get("code")).and_then(Value::as_i64);
    // What the document decided, when the refusal says (the others come before any decision).
    let decision = match code {
        Some(-41001 | -41003 | -41012) => Some("deny"),
        Some(-41002) => Some("approve"),
        _ => None,
    };
    json!({
        "action": action,
        "tool": tool,
        "decision": decision,
        "outcome": "refused",
        "code": code,
        "error": data.and_then(|d| d.get("error")),
        "reason": data.and_then(|d| d.get("reason")),
        "effect_key": data.and_then(|d| d.get("effect_key")),
        "action_id": data.and_then(|d| d.get("action_id")),
        "request_id": data.and_then(|d| d.get("request_id")),
        "latency_ms": millis(started),
    })
}

/// The log line of a call whose outcome was recorded (or held, `suspended`).
fn outcome_line(
    action: &str,
    tool: &str,
    decision: &str,
    meta: &Value,
    round: u32,
    started: std::time::Instant,
) -> Value {
    json!({
        "action": action,
        "tool": tool,
        "decision": decision,
        "outcome": meta.get("result"),
        "effect_key": meta.get("effect_key"),
        "receipt_id": meta.get("receipt_id"),
        "action_id": meta.get("action_id"),
        "attempt": meta.get("attempt"),
        "round": round,
        "latency_ms": millis(started),
    })
}
