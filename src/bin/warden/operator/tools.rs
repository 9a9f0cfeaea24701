//! The operator server's MCP methods, the same over both transports: `initialize`, `ping`,
//! `tools/list` and `tools/call` of ten tools. The read tools return what the CLI's `--json`
//! commands print (`pending`, `inspect`, `effects`, `receipts`, `stats`, `grants list`: the same
//! functions); the write tools answer through `Kernel::answer`, `Kernel::answer_scoped`,
//! `Kernel::revoke_scoped_grant` and `Kernel::resolve` as the console does,
//! as `operator:NAME`, verified by `warden-operator`, only for a caller whose operator token
//! the approvers file holds now.

use std::path::PathBuf;

use serde_json::{json, Map, Value};

use warden::approval::Approver;
use warden::{EffectState, Kernel};

use crate::console::approvers;
use crate::exit::Failure;
use crate::output::shown;
use crate::store_commands;

/// The agent every operator answers as (`operator:NAME`).
pub const AGENT: &str = "operator";
/// The issuer the operator's approvers are verified by, as recorded on their votes.
pub const ISSUER: &str = "warden-operator";
/// The MCP revisions this server speaks, newest first (`initialize` answers the client's own
/// when it is one of them, else the first).
pub const REVISIONS: [&str; 3] = ["2025-11-25", "2025-06-18", "2025-03-26"];

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;

/// How `effects` and `receipts` default, as the CLI's flags do.
const EFFECTS_LIMIT: u64 = 100;
const RECEIPTS_LAST: u64 = 50;

/// What every refused write says last.
const UNCHANGED: &str = "nothing was changed";

/// The store and the approvers file one server answers from.
pub struct Server {
    pub kernel: Kernel,
    pub registry: PathBuf,
    /// The document's `sign_in` issuer: a token it signed stands for an operator token.
    pub sso: Option<std::sync::Arc<crate::console::sso::Sso>>,
}

/// `{"jsonrpc":"2.0","id":…,"error":{"code","message"}}`.
pub fn rpc_error(id: &Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

fn rpc_result(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

impl Server {
    /// The answer to one JSON-RPC message, or `None` when nothing is to be answered (a
    /// notification, or a response from the client). `token` is the caller's operator token, if
    /// it gave one; only the write tools need it.
    pub fn handle(&self, message: &Value, token: Option<&str>) -> Option<Value> {
        let Some(object) = message.as_object() else {
            return Some(rpc_error(&Value::Null, INVALID_REQUEST, "a JSON-RPC message is a JSON object"));
        };
        let id = object.get("id");
        if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return Some(rpc_error(id.unwrap_or(&Value::Null), INVALID_REQUEST, "jsonrpc must be \"2.0\""));
        }
        // A response (the client answering a request this server never sent) needs no answer.
        let method = object.get("method")?;
        // A notification (notifications/initialized, notifications/cancelled) neither.
        let id = id?;
        if !(id.is_string() || id.is_i64() || id.is_u64()) {
            return Some(rpc_error(&Value::Null, INVALID_REQUEST, "id must be a string or an integer"));
        }
        let Some(method) = method.as_str() else {
            return Some(rpc_error(id, INVALID_REQUEST, "method must be a string"));
        };
        let params = object.get("params");
        Some(match method {
            "initialize" => rpc_result(id, initialize(params)),
            "ping" => rpc_result(id, json!({})),
            "tools/list" => rpc_result(id, json!({"tools": tool_list()})),
            "tools/call" => self.call(id, params, token),
            other => rpc_error(
                id,
                METHOD_NOT_FOUND,
                &format!(
                    "the method {} is not one this server answers (initialize, ping, tools/list, tools/call)",
                    shown_short(other)
                ),
            ),
        })
    }

    fn call(&self, id: &Value, params: Option<&Value>, token: Option<&str>) -> Value {
        let Some(params) = params.and_then(Value::as_object) else {
            return rpc_error(id, INVALID_PARAMS, "tools/call needs params {\"name\", \"arguments\"}");
        };
        let Some(name) = params.get("name").and_then(Value::as_str) else {
            return rpc_error(id, INVALID_PARAMS, "tools/call needs a string params.name");
        };
        let empty = Map::new();
        let arguments = match params.get("arguments") {
            None | Some(Value::Null) => &empty,
            Some(Value::Object(arguments)) => arguments,
            Some(_) => return rpc_error(id, INVALID_PARAMS, "params.arguments must be a JSON object"),
        };
        let Some(tool) = TOOLS.iter().find(|tool| tool.name == name) else {
            return rpc_error(
                id,
                INVALID_PARAMS,
                &format!("there is no tool {}; tools/list names them", shown_short(name)),
            );
        };
        let outcome = Args::new(tool, arguments).and_then(|args| self.run(tool, &args, token));
        rpc_result(id, tool_result(outcome, tool.writes))
    }

    fn run(&self, tool: &Tool, args: &Args<'_>, token: Option<&str>) -> Result<Value, Failure> {
        let kernel = &self.kernel;
        // Writes: the caller's identity first, before any argument is looked at.
        let approver = if tool.writes { Some(self.approver(token)?) } else { None };
        match (tool.name, approver) {
            ("list_pending_approvals", _) => Ok(json!({"approvals": parsed(&store_commands::pending(kernel, true)?)?})),
            ("inspect", _) => parsed(&crate::inspect::inspect(kernel, args.text("id")?, true)?),
            ("effects", _) => {
                let state = match args.optional_text("state")? {
                    Some(text) => Some(EffectState::parse(text).ok_or_else(|| {
                        Failure::usage("state must be one of reserved, executing, committed, failed, ambiguous")
                    })?),
                    None => None,
                };
                let limit = crate::output::count(args.count("limit", EFFECTS_LIMIT)?);
                Ok(json!({"effects": parsed(&store_commands::effects(kernel, state, limit, true)?)?}))
            }
            ("receipts", _) => {
                if args.flag("verify_chain")? {
                    if args.has("last") {
                        return Err(Failure::usage("give last or verify_chain, not both"));
                    }
                    return parsed(&store_commands::chain(&kernel.verify_chain()?, true)?.stdout);
                }
                let last = crate::output::count(args.count("last", RECEIPTS_LAST)?);
                Ok(json!({"receipts": parsed(&store_commands::receipts(kernel, last, true)?)?}))
            }
            ("stats", _) => parsed(&store_commands::stats(kernel, true)?),
            ("list_scoped_grants", _) => parsed(&crate::grant_commands::list(kernel, args.flag("all")?, true)?),
            ("approve", Some((_, approver))) => {
                let id = args.text("approval_id")?;
                let hash = args.text("action_hash")?;
                // `warden approve --ttl`'s parser; its message names the flag, here the argument.
                let ttl = args
                    .optional_text("ttl")?
                    .map(|text| {
                        store_commands::parse_ttl(text)
                            .map_err(|f| Failure::usage(f.message.replacen("--ttl", "ttl", 1)))
                    })
                    .transpose()?;
                // As `warden approve` and the console: the grant names the action hash shown.
                if let Some(scope) = args.scope()? {
                    if ttl.is_some() {
                        return Err(Failure::usage("give ttl or scope, not both"));
                    }
                    let done = kernel.answer_scoped(id, &approver, &scope, Some(hash))?;
                    return Ok(done.to_json(kernel.now()));
                }
                let record = kernel.answer(id, &approver, None, true, ttl, Some(hash))?;
                Ok(json!({"approval": record.to_json()}))
            }
            ("deny", Some((_, approver))) => {
                let id = args.text("approval_id")?;
                let reason = args.reason()?;
                let record = kernel.answer(id, &approver, Some(&reason), false, None, None)?;
                Ok(json!({"approval": record.to_json()}))
            }
            ("resolve", Some((name, _))) => {
                let key = args.text("effect_key")?;
                let to = match args.text("outcome")? {
                    "committed" => EffectState::Committed,
                    "failed" => EffectState::Failed,
                    _ => return Err(Failure::usage("outcome must be committed or failed")),
                };
                let reason = args.reason()?;
                // The attempt the operator looked at (`effects`, `inspect`): a later attempt that
                // is AMBIGUOUS now is refused, never resolved in its place.
                let attempt = args.attempt()?;
                // The kernel keeps one resolver line per effect: who, and why (as the console).
                let resolver = format!("{AGENT}:{name} ({reason})");
                let record = kernel.resolve_attempt(key, Some(attempt), to, &resolver)?;
                Ok(json!({"effect": record.to_json()}))
            }
            ("revoke_scoped_grant", Some((name, _))) => {
                let id = args.text("grant_id")?;
                let reason = args.reason()?;
                // Recorded as who revoked it: the operator the token names (as `approve` answers).
                let by = format!("{AGENT}:{name}");
                let done = kernel.revoke_scoped_grant(id, &by, &reason)?;
                Ok(done.to_json(kernel.now()))
            }
            _ => Err(Failure::internal(format!("the tool {} has no handler", tool.name))),
        }
    }

    /// Who a bearer token names: an operator token (`wot_…`) the approvers file holds now (a
    /// removed approver's is nobody's), or a token the document's `sign_in` issuer signed. Why
    /// not, in words that never contain the token.
    pub fn caller(&self, token: &str) -> Result<(String, Approver), String> {
        match &self.sso {
            Some(sso) if !token.starts_with(approvers::OPERATOR_TOKEN_PREFIX) => {
                let user = sso.verify(token).map_err(|why| format!("the single sign-on token was refused: {why}"))?;
                let approver = sso.approver(AGENT, &user.name, &user.roles).map_err(|failure| failure.message)?;
                Ok((user.name, approver))
            }
            _ => {
                let entry = approvers::operator(&self.registry, token)
                    .ok_or("the operator token is not valid: unknown, or its approver was removed")?;
                let approver = approvers::verified_approver(AGENT, ISSUER, "operator_token", &entry.name, &entry.roles)
                    .map_err(|failure| failure.message)?;
                Ok((entry.name, approver))
            }
        }
    }

    /// The approver the caller's bearer token names (`caller`), checked now, before anything
    /// else a write does.
    fn approver(&self, token: Option<&str>) -> Result<(String, Approver), Failure> {
        let Some(token) = token else {
            return Err(Failure::check(
                "unauthenticated",
                format!(
                    "a write needs an operator token (`warden approvers add NAME --operator` prints one; give it as \
                     ${} or --token-file to `warden operator --stdio`, or as `Authorization: Bearer` over HTTP); \
                     {UNCHANGED}",
                    super::TOKEN_ENV
                ),
            ));
        };
        self.caller(token).map_err(|why| Failure::check("unauthenticated", format!("{why}; {UNCHANGED}")))
    }
}

/// A tool's answer: its JSON as `structuredContent` and as text; a refusal as `isError` with
/// the message (a refused write says nothing was changed) and `{"error": …}` as the CLI's
/// `--json` prints it.
fn tool_result(outcome: Result<Value, Failure>, writes: bool) -> Value {
    match outcome {
        Ok(value) => {
            let text = serde_json::to_string_pretty(&value).unwrap_or_default();
            json!({"content": [{"type": "text", "text": text}], "structuredContent": value, "isError": false})
        }
        Err(failure) => {
            let mut message = failure.message;
            if writes && !message.ends_with(UNCHANGED) {
                message.push_str("; ");
                message.push_str(UNCHANGED);
            }
            json!({"content": [{"type": "text", "text": message}], "structuredContent": {"error": failure.json},
                   "isError": true})
        }
    }
}

/// The CLI's `--json` document, read back.
fn parsed(text: &str) -> Result<Value, Failure> {
    serde_json::from_str(text).map_err(|e| Failure::internal(format!("a command's JSON did not read back: {e}")))
}

/// A client's name for an error message: quoted, escaped, at most 64 characters.
fn shown_short(text: &str) -> String {
    let mut short: String = text.chars().take(64).collect();
    if short.len() < text.len() {
        short.push('…');
    }
    format!("\"{}\"", shown(&short))
}

fn initialize(params: Option<&Value>) -> Value {
    let asked = params.and_then(|p| p.get("protocolVersion")).and_then(Value::as_str);
    let revision = asked.and_then(|asked| REVISIONS.iter().find(|known| **known == asked)).unwrap_or(&REVISIONS[0]);
    json!({
        "protocolVersion": revision,
        "capabilities": {"tools": {"listChanged": false}},
        "serverInfo": {"name": "warden-operator", "title": "Warden operator", "version": env!("CARGO_PKG_VERSION")},
        "instructions": "Warden's operator tools for one store. Read before you write: list_pending_approvals shows \
                         each request's whole action and its action_hash; approve names that hash, so a request \
                         that binds anything else is refused. deny, revoke_scoped_grant and resolve need a reason. \
                         Writes answer as the approver the operator token names, never as the agent that asked.",
    })
}

/// One tool: its name, whether it writes, and its `tools/list` entry.
struct Tool {
    name: &'static str,
    writes: bool,
    description: &'static str,
    /// `(name, JSON Schema, required)`.
    properties: &'static [(&'static str, &'static str, bool)],
}

const TEXT: &str = r#"{"type": "string"}"#;

const TOOLS: [Tool; 10] = [
    Tool {
        name: "list_pending_approvals",
        writes: false,
        description: "The approval requests still pending, oldest first, each with its whole action (name, \
                      canonical arguments, resource, environment, principal), its action_hash, the rule and policy \
                      hash that asked, the votes so far and the expiry (as `warden pending --json`).",
        properties: &[],
    },
    Tool {
        name: "inspect",
        writes: false,
        description: "Everything the store knows about an approval id (apr_…), an action id (act_…), a receipt id \
                      (rct_…) or seq, or an effect key: its record, events and receipts (as `warden inspect ID \
                      --json`).",
        properties: &[("id", TEXT, true)],
    },
    Tool {
        name: "effects",
        writes: false,
        description: "Effect records, optionally of one state (as `warden effects --json`).",
        properties: &[
            (
                "state",
                r#"{"type": "string", "enum": ["reserved", "executing", "committed", "failed", "ambiguous"]}"#,
                false,
            ),
            ("limit", r#"{"type": "integer", "minimum": 1, "default": 100}"#, false),
        ],
    },
    Tool {
        name: "receipts",
        writes: false,
        description: "The last receipts, or with verify_chain the receipt chain verified (as `warden receipts \
                      --json` / `--verify-chain --json`).",
        properties: &[
            ("last", r#"{"type": "integer", "minimum": 1, "default": 50}"#, false),
            ("verify_chain", r#"{"type": "boolean", "default": false}"#, false),
        ],
    },
    Tool {
        name: "stats",
        writes: false,
        description: "The store in numbers: pending approvals, effects by state, receipts held, the chain's size, \
                      the last signed checkpoint (as `warden stats --json`).",
        properties: &[],
    },
    Tool {
        name: "list_scoped_grants",
        writes: false,
        description: "The scoped grants that may still be spent (with all, every one ever made): each with what it \
                      covers (action, rule, requester, the scope's fixed and bounded arguments), the uses left, the \
                      expiry, its state (live, used_up, expired, revoked) and who granted or revoked it (as `warden \
                      grants list --json`).",
        properties: &[("all", r#"{"type": "boolean", "default": false}"#, false)],
    },
    Tool {
        name: "approve",
        writes: true,
        description: "Grant a pending approval request as the approver the operator token names. action_hash must \
                      be the request's own (list_pending_approvals shows it): anything else is refused. ttl, an ISO \
                      8601 duration (PT15M), makes the approval usable for that long from now. scope (instead of \
                      ttl) also grants the next `uses` requests of the same action, requester and rule for \
                      `minutes`, whose arguments at the `fixed` JSON pointers equal this request's and at the \
                      `at_most` pointers are at most the numbers given: a scoped grant, within the caps the \
                      document sets on the rule (approval.scoped), else refused.",
        properties: &[
            ("approval_id", TEXT, true),
            ("action_hash", TEXT, true),
            ("ttl", TEXT, false),
            ("scope", SCOPE, false),
        ],
    },
    Tool {
        name: "deny",
        writes: true,
        description: "Deny a pending approval request as the approver the operator token names; a reason is \
                      required.",
        properties: &[("approval_id", TEXT, true), ("reason", TEXT, true)],
    },
    Tool {
        name: "revoke_scoped_grant",
        writes: true,
        description: "Revoke a scoped grant (sgr_…, list_scoped_grants shows them) as the approver the operator \
                      token names: no later proposal is covered by it, and the next one asks a human again. A \
                      reason is required; a grant revoked already is refused.",
        properties: &[("grant_id", TEXT, true), ("reason", TEXT, true)],
    },
    Tool {
        name: "resolve",
        writes: true,
        description: "Say how an AMBIGUOUS effect ended, committed or failed, as the approver the operator token \
                      names; a reason (what was checked) is required, and the attempt you looked at (effects or \
                      inspect show it): if the effect has moved on to another attempt, nothing is resolved.",
        properties: &[
            ("effect_key", TEXT, true),
            ("attempt", r#"{"type": "integer", "minimum": 1}"#, true),
            ("outcome", r#"{"type": "string", "enum": ["committed", "failed"]}"#, true),
            ("reason", TEXT, true),
        ],
    },
];

fn tool_list() -> Vec<Value> {
    TOOLS
        .iter()
        .map(|tool| {
            let properties: Map<String, Value> = tool
                .properties
                .iter()
                .map(|(name, schema, _)| ((*name).to_owned(), serde_json::from_str(schema).unwrap_or(Value::Null)))
                .collect();
            let required: Vec<&str> =
                tool.properties.iter().filter(|(_, _, required)| *required).map(|(name, _, _)| *name).collect();
            json!({
                "name": tool.name,
                "description": tool.description,
                "inputSchema": {"type": "object", "properties": properties, "required": required,
                                "additionalProperties": false},
                "annotations": {"readOnlyHint": !tool.writes, "destructiveHint": false,
                                "idempotentHint": !tool.writes, "openWorldHint": false},
            })
        })
        .collect()
}

/// A call's arguments, checked against the tool's properties: an argument the tool does not
/// take is refused (a misspelt `reasn` is not a missing reason to be forgiven).
/// The approve tool's `scope`: a scoped grant's uses, minutes, fixed pointers and numeric bounds.
const SCOPE: &str = r#"{"type": "object", "properties": {"uses": {"type": "integer", "minimum": 1}, "minutes": {"type": "integer", "minimum": 1}, "fixed": {"type": "array", "items": {"type": "string"}}, "at_most": {"type": "object", "additionalProperties": {"type": "number"}}}, "required": ["uses", "minutes"], "additionalProperties": false}"#;

struct Args<'a> {
    arguments: &'a Map<String, Value>,
}

impl<'a> Args<'a> {
    fn new(tool: &Tool, arguments: &'a Map<String, Value>) -> Result<Args<'a>, Failure> {
        if let Some(unknown) = arguments.keys().find(|key| !tool.properties.iter().any(|(name, _, _)| name == key)) {
            return Err(Failure::usage(format!("{} takes no argument {}", tool.name, shown_short(unknown))));
        }
        Ok(Args { arguments })
    }

    fn has(&self, name: &str) -> bool {
        self.arguments.get(name).is_some_and(|value| !value.is_null())
    }

    fn optional_text(&self, name: &str) -> Result<Option<&'a str>, Failure> {
        match self.arguments.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(text)) => Ok(Some(text)),
            Some(_) => Err(Failure::usage(format!("{name} must be a string"))),
        }
    }

    fn text(&self, name: &str) -> Result<&'a str, Failure> {
        self.optional_text(name)?.ok_or_else(|| Failure::usage(format!("{name} is required")))
    }

    /// The reason a deny or a resolve needs: given and not blank.
    fn reason(&self) -> Result<String, Failure> {
        match self.optional_text("reason")?.map(str::trim) {
            Some(reason) if !reason.is_empty() => Ok(reason.to_owned()),
            _ => Err(Failure::usage("a reason is required (what was checked, why)")),
        }
    }

    /// The effect's attempt the caller saw: required, 1 or more.
    fn attempt(&self) -> Result<u32, Failure> {
        match self.arguments.get("attempt") {
            None | Some(Value::Null) => Err(Failure::usage(
                "attempt is required: the attempt of the effect you looked at (effects or inspect show it)",
            )),
            Some(value) => match value.as_u64().and_then(|n| u32::try_from(n).ok()) {
                Some(n) if n >= 1 => Ok(n),
                _ => Err(Failure::usage("attempt must be an integer of 1 or more")),
            },
        }
    }

    fn count(&self, name: &str, default: u64) -> Result<u64, Failure> {
        match self.arguments.get(name) {
            None | Some(Value::Null) => Ok(default),
            Some(value) => match value.as_u64() {
                Some(n) if n >= 1 => Ok(n),
                _ => Err(Failure::usage(format!("{name} must be an integer of 1 or more"))),
            },
        }
    }

    /// The approve tool's `scope`, when given: `{uses, minutes, fixed?, at_most?}`, read as the
    /// C ABI reads it (`Scope::from_json`).
    fn scope(&self) -> Result<Option<warden::approval::scope::Scope>, Failure> {
        match self.arguments.get("scope") {
            None | Some(Value::Null) => Ok(None),
            Some(scope) => warden::approval::scope::Scope::from_json(scope).map(Some).map_err(|error| match error {
                warden::Error::InvalidInput(invalid) => Failure::usage(invalid.message),
                other => other.into(),
            }),
        }
    }

    fn flag(&self, name: &str) -> Result<bool, Failure> {
        match self.arguments.get(name) {
            None | Some(Value::Null) => Ok(false),
            Some(Value::Bool(flag)) => Ok(*flag),
            Some(_) => Err(Failure::usage(format!("{name} must be true or false"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_schema_is_json_and_names_its_required_arguments() {
        let listed = tool_list();
        assert_eq!(listed.len(), TOOLS.len());
        for tool in &listed {
            let properties = tool["inputSchema"]["properties"].as_object().expect("properties");
            assert!(properties.values().all(Value::is_object), "{tool}");
            for required in tool["inputSchema"]["required"].as_array().expect("required") {
                assert!(properties.contains_key(required.as_str().unwrap_or_default()), "{tool}");
            }
        }
        let writes: Vec<&str> = TOOLS.iter().filter(|t| t.writes).map(|t| t.name).collect();
        assert_eq!(writes, ["approve", "deny", "revoke_scoped_grant", "resolve"]);
    }

    #[test]
    fn initialize_answers_the_clients_revision_when_known() {
        for (asked, answered) in [
            (json!({"protocolVersion": "2025-06-18"}), "2025-06-18"),
            (json!({"protocolVersion": "1999-01-01"}), REVISIONS[0]),
            (json!({}), REVISIONS[0]),
        ] {
            assert_eq!(initialize(Some(&asked))["protocolVersion"], answered, "{asked}");
        }
    }
}
