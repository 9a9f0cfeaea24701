//! Tool use inside sampling (SEP-1577): the upstream asking the client's model to use tools
//! (`sampling_with_tools`, `request_uses_tools`), the `tool_use` blocks a client's answers carry
//! (`tool_uses`), the `-41019` refusals of tool use the gateway does not relay, and with
//! `gateway.sampling_tools: govern` each tool use decided as the action
//! `sampling.<alias>.<tool>` and settled with the leg that carried it.

use serde_json::{json, Value};

use warden::document::SamplingTools;
use warden::kernel::Permit;
use warden::pipeline::ActionRequest;

use super::answer::{refusal, Answer};
use super::classify::Effect;
use super::intercept::Engine;
use super::log;

impl Engine {
    /// Each `tool_use` as the action `sampling.<alias>.<tool>` through the kernel, by the
    /// principal of the call that carries it: every permit, or the first refusal (the permits
    /// already issued released as not executed, since nothing is forwarded).
    pub(super) fn govern_tool_uses(
        &self,
        id: &Value,
        uses: &[ToolUse],
        identity: &warden::identity::Identity,
    ) -> Result<Vec<Permit>, Answer> {
        let mut permits = Vec::new();
        for used in uses {
            let name = format!("sampling.{}.{}", self.alias, used.name);
            let Value::Object(_) = &used.input else {
                release(permits, "a sibling tool use was refused; nothing was forwarded");
                return Err(refusal(
                    id,
                    400,
                    -32602,
                    "warden.invalid_arguments",
                    &format!("{}: a tool_use's input must be an object", log::printable(&name)),
                    json!({}),
                ));
            };
            let mut request = ActionRequest::new(&name, used.input.clone(), identity.principal.clone());
            request.principal_expires_at = identity.expires_at;
            let hash = self.warden.action_for(&request).ok().and_then(|action| action.hash().ok());
            let presented = hash.as_deref().and_then(|hash| self.granted_approval(hash));
            request.approval_id = presented.as_deref();
            let (action_id, outcome) = self.warden.submit_naming_action(&request);
            match outcome {
                Ok(permit) => permits.push(permit),
                Err(error) => {
                    release(permits, "a sibling tool use was refused; nothing was forwarded");
                    log::warn(&format!("{}: a tool use inside sampling was refused", log::printable(&name)));
                    return Err(self.refused(id, &name, hash.as_deref(), action_id, error));
                }
            }
        }
        Ok(permits)
    }

    /// `gateway.sampling_tools: refuse`.
    pub fn refuses_sampling_tools(&self) -> bool {
        self.warden.document().gateway.sampling_tools == SamplingTools::Refuse
    }

    /// The outcome of the tool uses a leg carried (`gateway.sampling_tools: govern`) is the
    /// leg's: the upstream answered with a result or with another `input_required`
    /// (`asks_more`: it took the tool uses and goes on) → committed, it provably did nothing →
    /// not executed, anything else → AMBIGUOUS. Their summaries.
    pub(super) fn settle_nested(&self, nested: Vec<Permit>, effect: &Effect, asks_more: bool) -> Vec<Value> {
        let mut out = Vec::new();
        for permit in nested {
            let action = permit.action().name.clone();
            let action_id = permit.action().action_id.clone();
            let receipt_id = permit.receipt_id().to_owned();
            let (result, recorded) = match effect {
                Effect::Failed(what) => ("failed", permit.not_executed(&log::printable(what))),
                Effect::Committed => ("committed", permit.commit(&Value::Null)),
                Effect::Ambiguous(_) if asks_more => ("committed", permit.commit(&Value::Null)),
                Effect::Ambiguous(what) => ("ambiguous", permit.ambiguous(&log::printable(what))),
            };
            let (result, receipt_id) = match recorded {
                Ok(()) => (result, Some(receipt_id)),
                Err(error) => {
                    log::warn(&format!("recording the outcome of {action_id} failed: {error}"));
                    ("ambiguous", None)
                }
            };
            out.push(json!({"action": action, "action_id": action_id, "receipt_id": receipt_id, "result": result}));
        }
        out
    }
}

/// How many request keys a refusal names (every member and block is looked at: the body is
/// already bounded, and one unread block could hide a tool use).
const MAX_NAMED_KEYS: usize = 256;

/// The keys of an `input_required` result's `sampling/createMessage` requests that involve
/// tools (SEP-1577): `tools` offered to the model, or `tool_use`/`tool_result` content in its
/// messages (a loop already under way).
pub fn sampling_with_tools(envelope: &Value) -> Vec<String> {
    let Some(requests) = envelope.get("result").and_then(|r| r.get("inputRequests")).and_then(Value::as_object) else {
        return Vec::new();
    };
    requests
        .iter()
        .filter(|(_, request)| request_uses_tools(request))
        .take(MAX_NAMED_KEYS)
        .map(|(key, _)| key.chars().take(256).collect())
        .collect()
}

/// Whether a request (`{method, params}`: an MRTR input request, or a legacy server request)
/// is a `sampling/createMessage` that offers tools or carries a tool loop.
pub fn request_uses_tools(request: &Value) -> bool {
    if request.get("method").and_then(Value::as_str) != Some("sampling/createMessage") {
        return false;
    }
    let params = request.get("params");
    let offered = params.and_then(|p| p.get("tools")).is_some_and(|t| t.as_array().is_none_or(|t| !t.is_empty()));
    let looped = params.and_then(|p| p.get("messages")).and_then(Value::as_array).is_some_and(|messages| {
        messages.iter().any(|m| !blocks(m.get("content"), &["tool_use", "tool_result"]).is_empty())
    });
    offered || looped
}

/// The tools a client's JSON-RPC response to a legacy sampling server request asks the server
/// to run (its `result` is a sampling result with `tool_use` content).
pub fn response_tool_uses(message: &Value) -> Vec<ToolUse> {
    let Some(result) = message.get("result") else { return Vec::new() };
    tool_uses(Some(&json!({"r": result})))
}

/// The content blocks of `content` (one block or a list) whose `type` is one of `kinds`.
fn blocks<'a>(content: Option<&'a Value>, kinds: &[&str]) -> Vec<&'a Value> {
    let of_kind = |block: &&Value| block.get("type").and_then(Value::as_str).is_some_and(|t| kinds.contains(&t));
    match content {
        Some(Value::Array(list)) => list.iter().filter(of_kind).collect(),
        Some(block @ Value::Object(_)) => std::iter::once(block).filter(of_kind).collect(),
        _ => Vec::new(),
    }
}

/// One `tool_use` block of a sampling result: the tool the client's model asked for, and its
/// input.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolUse {
    pub name: String,
    pub input: Value,
}

/// The `tool_use` blocks among `inputResponses`: every answer but an elicitation's (which has
/// an `action`) is read as a sampling result, with or without its `role` — a lenient server
/// would run a tool use whose answer left `role` out. A block without a string name is still
/// a tool use: it is named `?` so it is refused, never skipped. Every member and block is read.
pub fn tool_uses(responses: Option<&Value>) -> Vec<ToolUse> {
    let Some(responses) = responses.and_then(Value::as_object) else { return Vec::new() };
    responses
        .values()
        .filter(|response| response.get("action").is_none())
        .flat_map(|response| blocks(response.get("content"), &["tool_use"]))
        .map(|block| ToolUse {
            name: block.get("name").and_then(Value::as_str).filter(|n| !n.is_empty()).unwrap_or("?").to_owned(),
            input: block.get("input").cloned().unwrap_or(Value::Null),
        })
        .collect()
}

/// The refusal of a client's answer to a legacy sampling server request that uses tools: never
/// relayed, whatever `gateway.sampling_tools` says (there is no call leg to settle tool uses
/// with).
pub fn legacy_tool_use_refusal(id: &Value, uses: &[ToolUse]) -> Answer {
    tool_use_refusal(
        id,
        uses,
        "a client's sampling answer",
        "this answer to a sampling request uses tools, which the server would run with no decision; the gateway \
         does not relay tool use inside sampling on a 2025 revision",
    )
}

/// A relayed request (`prompts/get`, `resources/read`, …) retried with answers to sampling
/// requests that use tools: refused whole and never forwarded, whatever `gateway.sampling_tools`
/// says — only a `tools/call`'s tool use can be governed as an action.
pub fn relayed_tool_use_refusal(message: &Value) -> Option<Answer> {
    let method = message.get("method").and_then(Value::as_str)?;
    let uses = tool_uses(message.get("params").and_then(|p| p.get("inputResponses")));
    if uses.is_empty() {
        return None;
    }
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    Some(tool_use_refusal(
        &id,
        &uses,
        &format!("a {} retry's sampling answers", log::printable(method)),
        "this request's answers to sampling requests use tools, which the server would run with no decision; the \
         gateway relays tool use inside sampling on no request but a tools/call it decides",
    ))
}

/// The `-41019` refusal of tool use the gateway does not relay, logged with the tools' names.
fn tool_use_refusal(id: &Value, uses: &[ToolUse], what: &str, message: &str) -> Answer {
    let tools: Vec<&str> = uses.iter().map(|u| u.name.as_str()).collect();
    log::warn(&format!(
        "refused {what} with tool use ({}): not relayed to the upstream",
        log::printable(&tools.join(", "))
    ));
    refusal(
        id,
        403,
        -41019,
        "warden.sampling_tools_refused",
        message,
        json!({"reason": "sampling_tool_use", "tools": tools}),
    )
}

/// Permits that were issued for tool uses that will never be forwarded: not executed.
pub(super) fn release(permits: Vec<Permit>, why: &str) {
    for permit in permits {
        if let Err(error) = permit.not_executed(why) {
            log::warn(&format!("releasing a tool use's permit failed: {error}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Map;

    use super::*;

    #[test]
    fn tool_uses_are_read_from_sampling_answers_only_and_a_nameless_one_is_kept() {
        // (inputResponses, the tool names found)
        let many_texts: Vec<Value> = (0..300).map(|n| json!({"type": "text", "text": n.to_string()})).collect();
        let mut past_the_texts = many_texts.clone();
        past_the_texts.push(json!({"type": "tool_use", "name": "late", "input": {}}));
        let mut many_answers: Map<String, Value> =
            (0..300).map(|n| (format!("a{n:03}"), json!({"action": "decline"}))).collect();
        many_answers
            .insert("zzz".into(), json!({"role": "assistant", "content": {"type": "tool_use", "name": "last"}}));
        let table: [(Value, &[&str]); 10] = [
            (json!({"w": {"role": "assistant", "content": {"type": "tool_use", "name": "a", "input": {}}}}), &["a"]),
            // Past any count of other blocks or members: every one is read.
            (json!({"w": {"role": "assistant", "content": past_the_texts}}), &["late"]),
            (Value::Object(many_answers), &["last"]),
            (json!({"w": {"role": "assistant", "content": many_texts}}), &[]),
            // A sampling answer that left out its role is read all the same.
            (json!({"w": {"content": {"type": "tool_use", "name": "roleless", "input": {}}}}), &["roleless"]),
            (
                json!({"w": {"role": "assistant", "content": [
                    {"type": "text", "text": "x"},
                    {"type": "tool_use", "name": "a", "input": {"k": 1}},
                    {"type": "tool_use", "input": {}},
                ]}}),
                &["a", "?"],
            ),
            (json!({"w": {"role": "assistant", "content": {"type": "text", "text": "tool_use"}}}), &[]),
            // An elicitation's answer has an action: form data that happens to say tool_use is not one.
            (json!({"e": {"action": "accept", "content": {"type": "tool_use", "name": "a"}}}), &[]),
            (json!({"w": "not an object"}), &[]),
            (json!([1, 2]), &[]),
        ];
        for (responses, names) in table {
            let found: Vec<String> = tool_uses(Some(&responses)).into_iter().map(|u| u.name).collect();
            assert_eq!(found, names, "{responses}");
        }
        assert!(tool_uses(None).is_empty());
    }

    #[test]
    fn a_relayed_retry_with_tool_use_in_its_sampling_answers_is_refused_whole() {
        let answers = json!({"s": {"role": "assistant", "content": {"type": "tool_use", "name": "rm", "input": {}}}});
        for method in ["prompts/get", "resources/read", "some/other"] {
            let message = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": {"inputResponses": answers}});
            let answer = relayed_tool_use_refusal(&message).expect(method);
            assert_eq!(answer.status, 403, "{method}");
            assert_eq!(answer.body["id"], 7);
            assert_eq!(answer.body["error"]["code"], -41019, "{method}");
            assert_eq!(answer.body["error"]["data"]["tools"], json!(["rm"]));
        }
        let elicited = json!({"e": {"action": "accept", "content": {"x": 1}}});
        let plain = json!({"jsonrpc": "2.0", "id": 7, "method": "prompts/get", "params": {"inputResponses": elicited}});
        assert!(relayed_tool_use_refusal(&plain).is_none(), "an elicitation's answer is relayed");
        let response = json!({"jsonrpc": "2.0", "id": 7, "result": {"inputResponses": answers}});
        assert!(relayed_tool_use_refusal(&response).is_none(), "a response is the legacy path's to check");
    }

    #[test]
    fn sampling_requests_with_tools_are_named_by_their_keys() {
        let envelope = |requests: Value| json!({"result": {"resultType": "input_required", "inputRequests": requests}});
        let with_tools =
            json!({"method": "sampling/createMessage", "params": {"messages": [], "tools": [{"name": "t"}]}});
        let looped = json!({"method": "sampling/createMessage", "params": {"messages": [
            {"role": "user", "content": [{"type": "tool_result", "toolUseId": "1", "content": []}]}
        ]}});
        let plain = json!({"method": "sampling/createMessage", "params": {"messages": [], "tools": []}});
        let elicit = json!({"method": "elicitation/create", "params": {"tools": [{"name": "t"}]}});
        let table: [(Value, &[&str]); 5] = [
            (json!({"a": with_tools}), &["a"]),
            (json!({"a": looped}), &["a"]),
            (json!({"a": plain, "b": elicit}), &[]),
            (json!({"a": with_tools, "b": plain}), &["a"]),
            (json!("no requests"), &[]),
        ];
        for (requests, keys) in table {
            assert_eq!(sampling_with_tools(&envelope(requests.clone())), keys, "{requests}");
        }
    }
}
