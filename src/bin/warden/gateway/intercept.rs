//! One intercepted `tools/call` through the kernel, whatever the transport: the principal,
//! the action `mcp.<alias>.<tool>`, the decision and the reservation (`admit`), then the
//! observed outcome recorded and the answer built (`finish`). Refusals are JSON-RPC errors
//! with ctrlrun's codes and `warden.*` tokens; answers carry the receipt summary as
//! `_meta["dev.warden/receipt"]` inside `result._meta` (or the error's `data._meta`), where the
//! MCP SDKs' typed results read it — not at the envelope's top level, as the reference does.

use std::collections::HashMap;
use std::sync::Mutex;

use serde_json::{json, Map, Value};

use warden::approval::ApprovalStatus;
use warden::document::SamplingTools;
use warden::event::EventKind;
use warden::identity::{IdentityContext, IdentityProvider};
use warden::kernel::{AnswerWait, Permit};
use warden::pipeline::{resource_for, ActionRequest, Recovery, Warden};
use warden::Error;

use super::catalog::{Catalog, ListTools};
use super::classify::{self, Effect, Observation, Reply};
use super::log;
use super::telemetry::{CallSpan, InFlight, Telemetry};

/// The `_meta` key of the receipt summary.
pub const META_KEY: &str = "dev.warden/receipt";

/// The only argument of the action a `-41008` refusal records: `{pointer, arguments_sha256}`
/// in place of arguments that have no canonical form.
pub const UNREPRESENTABLE: &str = "warden.unrepresentable_arguments";

/// A refusal or a made-up answer: HTTP status and the JSON-RPC body.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub status: u16,
    pub body: Value,
}

/// The call the client sent, as the transport parsed it.
pub struct Call<'a> {
    pub id: &'a Value,
    pub tool: &'a str,
    pub message: &'a Value,
    pub revision: &'a str,
    pub headers: &'a [(String, String)],
    /// The message's bytes as the client sent them.
    pub raw: &'a [u8],
    /// How the gateway lists the upstream's tools itself, on this call's transport, when no
    /// tool set is pinned yet.
    pub lister: &'a dyn ListTools,
}

/// A call the kernel let through: its permit and the request to forward.
pub struct Admitted {
    pub permit: Permit,
    /// The client's envelope with `params.arguments` replaced by the canonical arguments.
    pub forward: Value,
    pub not_executed_on_error: bool,
    /// The elicitation round this leg continues (0 for a first leg).
    pub round: u32,
    /// When the gateway began deciding the call (its log line's latency).
    pub started: std::time::Instant,
    /// The call's MCP span (ended by `finish`).
    pub span: Option<CallSpan>,
    /// The protected call's `execute_tool` span, begun when the permit was issued (a
    /// continuation carries the suspended leg's).
    pub flight: Option<InFlight>,
    /// With `gateway.sampling_tools: govern`, the permits of the `tool_use` blocks this leg's
    /// `inputResponses` carry (`sampling.<alias>.<tool>`), settled with this leg's outcome.
    pub nested: Vec<Permit>,
    /// The call's `Mcp-Session-Id`: a task it creates is polled in that session (`tasks`).
    pub session: Option<String>,
}

/// A first leg answered `input_required` with a `requestState`: the permit (and so the
/// reservation, its lease extended) is held here until the continuation arrives.
struct Suspension {
    permit: Permit,
    tool: String,
    /// The canonical arguments of the suspended call: a continuation must carry the same.
    arguments: String,
    principal: warden::Principal,
    round: u32,
    deadline: std::time::Instant,
    /// The call's `execute_tool` span, ended when the call is.
    flight: Option<InFlight>,
}

/// What is kept of a suspension that lapsed: enough to check a late continuation is the same
/// call (D1), and the effect it left AMBIGUOUS.
struct Lapsed {
    tool: String,
    arguments: String,
    principal: warden::Principal,
    effect_key: Option<String>,
}

/// How many lapsed suspensions are remembered.
const LAPSED_KEPT: usize = 4096;

/// How long suspensions are held and how many rounds a call may take.
#[derive(Debug, Clone, Copy)]
pub struct Elicitation {
    pub max_rounds: u32,
    pub timeout: std::time::Duration,
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

pub struct Engine {
    pub warden: Warden,
    pub alias: String,
    pub identity: Box<dyn IdentityProvider>,
    /// The latest approval request for each action hash, learnt from the store's
    /// APPROVAL_REQUESTED events (so a restarted gateway, or a request another process made,
    /// is found too): the identical re-sent call presents it once it is granted.
    approvals: Mutex<ApprovalIndex>,
    /// The upstream's tool set as pinned, with each tool's schema compiled: every call's tool
    /// and arguments are checked against it before anything is sent.
    pub catalog: Catalog,
    /// Held while the gateway lists the tools itself.
    listing: Mutex<()>,
    /// `--log-arguments`: each call's log line carries its arguments.
    pub log_arguments: bool,
    /// The digest of each tool's `tools/list` entry as last relayed, by tool name (D2).
    schemas: Mutex<HashMap<String, String>>,
    /// The `x-mcp-header` annotations of each tool's `inputSchema` as last relayed (D11).
    headers: Mutex<HashMap<String, super::wire::Annotations>>,
    /// Held suspensions by their exact `requestState`.
    suspended: Mutex<HashMap<String, Suspension>>,
    /// Suspensions whose continuation did not come in time, recorded AMBIGUOUS by the sweep:
    /// a continuation that comes after all is told the effect is ambiguous (`-41005`), not that
    /// the `requestState` is unknown. The latest `LAPSED_KEPT`, by `requestState`.
    lapsed: Mutex<std::collections::VecDeque<(String, Lapsed)>>,
    /// Legacy (2025) elicitation: server requests relayed on an intercepted event stream, by
    /// `answer_key`, each with the stream's thread waiting to record the client's answer.
    answers: Mutex<HashMap<String, std::sync::mpsc::Sender<Value>>>,
    elicitation: Elicitation,
    /// `--wait-approvals`: how long a call that needs approval waits for a human's answer
    /// before it is answered `-41002` (zero: at once).
    pub approval_wait: std::time::Duration,
    /// Set when the gateway is stopping: nothing waits for a human any more.
    pub stopping: std::sync::atomic::AtomicBool,
    /// Spans and measurements (`OTEL_*`, `--admin`); off unless asked for.
    pub telemetry: Telemetry,
    /// Calls answered with a task handle, held until the task ends (`tasks`).
    pub(super) tasks: Mutex<super::tasks::Tasks>,
    /// `--task-timeout`: the longest window a task is held for without being seen alive.
    pub task_timeout: std::time::Duration,
    /// Set once the gateway polls open tasks itself (over HTTP, `http::poll_tasks`).
    pub polls_tasks: std::sync::atomic::AtomicBool,
    /// `gateway.upstream_auth` (HTTP only): checked before a `tools/call` is decided, so a
    /// call that could not be sent is refused with its receipt and nothing reserved.
    pub upstream_credential: Option<std::sync::Arc<super::credential::UpstreamCredential>>,
}

/// Where a client's answer to a server request is expected: the session (when the revision
/// has one) and the request's id.
pub fn answer_key(session: Option<&str>, id: &Value) -> String {
    format!("{}\n{id}", session.unwrap_or_default())
}

/// The `tool_schema_sha256` of one advertised `tools/list` entry.
pub fn tool_schema_digest(entry: &Value) -> Option<String> {
    let document = json!({"schema": "ctrlrun.upstream.tool_schema/v1", "entry": entry});
    let text = warden::canonical::to_canonical_string(&document, "tool schema").ok()?;
    Some(warden::canonical::sha256_prefixed(text.as_bytes()))
}

#[derive(Default)]
struct ApprovalIndex {
    by_hash: HashMap<String, String>,
    /// The last event read.
    cursor: u64,
}

impl Engine {
    pub fn new(
        warden: Warden,
        alias: String,
        identity: Box<dyn IdentityProvider>,
        elicitation: Elicitation,
        catalog: Catalog,
    ) -> Engine {
        Engine {
            warden,
            alias,
            identity,
            approvals: Mutex::new(ApprovalIndex::default()),
            catalog,
            listing: Mutex::new(()),
            log_arguments: false,
            schemas: Mutex::new(HashMap::new()),
            headers: Mutex::new(HashMap::new()),
            suspended: Mutex::new(HashMap::new()),
            lapsed: Mutex::new(std::collections::VecDeque::new()),
            answers: Mutex::new(HashMap::new()),
            elicitation,
            approval_wait: std::time::Duration::ZERO,
            stopping: std::sync::atomic::AtomicBool::new(false),
            telemetry: Telemetry::off(),
            tasks: Mutex::new(super::tasks::Tasks::default()),
            task_timeout: std::time::Duration::from_secs(3600),
            polls_tasks: std::sync::atomic::AtomicBool::new(false),
            upstream_credential: None,
        }
    }

    /// Learn the tools of a relayed `tools/list` answer (a JSON-RPC response envelope) to a
    /// request that carried `cursor`.
    /// `Err` names why the answer was not pinned (it is logged too).
    pub fn observe_tools(&self, cursor: Option<&str>, envelope: &Value) -> Result<(), String> {
        let observed = self.catalog.observe(cursor, envelope);
        if let (Ok(true), Some(accepted)) = (&observed, self.catalog.accepted()) {
            // The first set the gateway knows: how well the document covers it.
            let found = super::coverage::coverage(self.warden.document(), &self.alias, accepted.set.tools());
            for line in found.lines(&self.alias) {
                log::info(&line);
            }
        }
        let pinned = observed.map(|_| ());
        if let Err(why) = &pinned {
            log::warn(&format!("a tools/list answer was not pinned: {why}"));
        }
        let Some(tools) = envelope.get("result").and_then(|r| r.get("tools")).and_then(Value::as_array) else {
            return pinned;
        };
        let (Ok(mut schemas), Ok(mut headers)) = (self.schemas.lock(), self.headers.lock()) else { return pinned };
        for entry in tools {
            let Some(name) = entry.get("name").and_then(Value::as_str) else { continue };
            let annotated = entry.get("inputSchema").map(super::wire::annotations).unwrap_or_default();
            headers.insert(name.to_owned(), annotated);
            match tool_schema_digest(entry) {
                Some(digest) => schemas.insert(name.to_owned(), digest),
                // An entry with no canonical form (a float in its schema) matches no pin.
                None => schemas.remove(name),
            };
        }
        pinned
    }

    /// The gateway lists the tools itself, on the call's transport, when no tool set is pinned
    /// yet, or when the action pins the tool's schema (`tool_schema_sha256`) and no listing
    /// has shown it in this process: a call is checked against what the upstream offers, never
    /// let through because nobody listed first. `Err` names why the listing failed.
    fn list_if_needed(&self, name: &str, tool: &str, lister: &dyn ListTools) -> Result<(), String> {
        let schema_pinned = self
            .warden
            .document()
            .actions
            .get(name)
            .and_then(|entry| entry.upstream.as_ref())
            .is_some_and(|pins| pins.tool_schema_sha256.is_some());
        let unseen = schema_pinned && self.schemas.lock().is_ok_and(|seen| !seen.contains_key(tool));
        if self.catalog.accepted().is_some() && !unseen {
            return Ok(());
        }
        // One listing at a time: calls that arrive together wait for it rather than each list.
        let _listing = self.listing.lock();
        let unseen = schema_pinned && self.schemas.lock().is_ok_and(|seen| !seen.contains_key(tool));
        if self.catalog.accepted().is_some() && !unseen {
            return Ok(());
        }
        super::catalog::list_all(lister, &|cursor, envelope| self.observe_tools(cursor, envelope))
    }

    /// A relayed answer to `method` (`lists::REWRITTEN`) on its way to the client: a
    /// `tools/list` is observed (the tool set), then the answer is rewritten as `lists` says —
    /// only the tools the accepted set offers unchanged, icons as the document says. Whether it
    /// changed.
    pub fn rewrite_answer(&self, method: &str, cursor: Option<&str>, envelope: &mut Value) -> bool {
        if super::tasks::observed(method) {
            // `cursor` is the request's `taskId` here (`tasks::read_param`).
            return self.observe_task(method, cursor, envelope);
        }
        if method == "tools/list" {
            let _ = self.observe_tools(cursor, envelope);
        }
        let icons = self.warden.document().gateway.icons;
        super::lists::rewrite(method, envelope, icons, &|entry| self.catalog.offers(entry))
    }

    /// The document's `gateway.unknown_methods`: what happens to a method not on
    /// `wire::KNOWN_METHODS`.
    pub fn unknown_methods(&self) -> warden::document::UnknownMethods {
        self.warden.document().gateway.unknown_methods
    }

    /// A tool's `x-mcp-header` annotations, once a relayed `tools/list` showed its schema.
    pub fn annotations_of(&self, tool: &str) -> Option<super::wire::Annotations> {
        self.headers.lock().ok()?.get(tool).cloned()
    }

    /// The pin check (above the approval gate): `None` when the entry pins nothing or the
    /// observed schema matches, else the reason.
    fn pin_refusal(&self, name: &str, tool: &str) -> Option<&'static str> {
        let pin = self.warden.document().actions.get(name)?.upstream.as_ref()?.tool_schema_sha256.as_ref()?;
        let observed = self.schemas.lock().ok()?.get(tool).cloned();
        match observed {
            None => Some("upstream_unverified"),
            Some(digest) if &digest != pin => Some("upstream_mismatch"),
            Some(_) => None,
        }
    }

    /// An intercepted stream relayed a server request (legacy elicitation): the client's
    /// answer, relayed later on another connection, is handed to the returned receiver as the
    /// `EXECUTION_RESUMED` data. `None` when that key is already awaited by another stream
    /// (its answer could not be told apart).
    pub fn await_answer(&self, key: &str) -> Option<std::sync::mpsc::Receiver<Value>> {
        let mut waiting = self.answers.lock().ok()?;
        if waiting.contains_key(key) {
            return None;
        }
        let (sender, receiver) = std::sync::mpsc::channel();
        waiting.insert(key.to_owned(), sender);
        Some(receiver)
    }

    pub fn forget_answer(&self, key: &str) {
        if let Ok(mut waiting) = self.answers.lock() {
            waiting.remove(key);
        }
    }

    /// A client's JSON-RPC response, about to be relayed: when an intercepted stream awaits
    /// it, that stream records `EXECUTION_RESUMED` (before the upstream can answer the call).
    pub fn client_answered(&self, session: Option<&str>, message: &Value) {
        let Some(id) = message.get("id") else { return };
        let key = answer_key(session, id);
        let Some(waiter) = self.answers.lock().ok().and_then(|mut waiting| waiting.remove(&key)) else { return };
        let (member, value) = match (message.get("result"), message.get("error")) {
            (Some(result), _) => ("result", result),
            (None, Some(error)) => ("error", error),
            (None, None) => return,
        };
        let _ = waiter.send(json!({
            "reason": "client_response",
            "request_id": id,
            "input_responses": [member],
            "input_responses_sha256": digest(value),
        }));
    }

    /// `--elicitation-timeout`: how long a call may wait on its client's input.
    pub fn elicitation_timeout(&self) -> std::time::Duration {
        self.elicitation.timeout
    }

    /// The lease that covers a wait of `--elicitation-timeout` from now.
    pub fn elicitation_lease(&self) -> warden::Micros {
        self.warden.kernel().now().saturating_add(micros(self.elicitation.timeout))
    }

    /// The kernel time of `instant` (a lease that lasts until then).
    pub fn lease_until(&self, instant: std::time::Instant) -> warden::Micros {
        let left = instant.saturating_duration_since(std::time::Instant::now());
        self.warden.kernel().now().saturating_add(micros(left))
    }

    pub fn action_name(&self, tool: &str) -> String {
        format!("mcp.{}.{tool}", self.alias)
    }

    /// Principal → arguments → approval lookup → the kernel's decision and reservation. With
    /// `--wait-approvals`, a call that needs approval waits (while `present` says its client
    /// is still there) for the human's answer, then runs or is refused.
    /// One structured log line per call: its refusal here, its outcome in `finish`.
    pub fn admit(&self, call: &Call<'_>, present: &dyn Fn() -> bool) -> Result<Admitted, Answer> {
        let started = std::time::Instant::now();
        let session = super::wire::header(call.headers, "mcp-session-id").0;
        let span = self.telemetry.start_call(call.message, call.tool, session, call.revision);
        let trace = self.telemetry.wants_trace();
        match self.decide(call, present, trace.clone()) {
            Ok(mut admitted) => {
                admitted.started = started;
                admitted.session = session.map(str::to_owned);
                match &admitted.flight {
                    // A continuation: the suspended leg's span goes on, and is the parent again.
                    Some(flight) => self.telemetry.propagate(flight, &mut admitted.forward),
                    None => admitted.flight = self.telemetry.action_started(&span, trace, &mut admitted.forward),
                }
                admitted.span = Some(span);
                Ok(admitted)
            }
            Err(mut answer) => {
                self.refusal_meta(&mut answer.body);
                self.telemetry.action_refused(&span, trace);
                self.telemetry.end_call(span, Some(&answer.body), None);
                let mut line = refusal_line(&self.action_name(call.tool), call.tool, &answer.body, started);
                if self.log_arguments {
                    line["arguments"] = arguments_of(call.message);
                }
                log::call(&line);
                Err(answer)
            }
        }
    }

    fn decide(
        &self,
        call: &Call<'_>,
        present: &dyn Fn() -> bool,
        traced: Option<std::sync::Arc<warden::telemetry::ActionTrace>>,
    ) -> Result<Admitted, Answer> {
        let name = self.action_name(call.tool);
        let params = call.message.get("params").and_then(Value::as_object);
        let arguments = match params.and_then(|p| p.get("arguments")) {
            None | Some(Value::Null) => Value::Object(Map::new()),
            Some(Value::Object(map)) => Value::Object(map.clone()),
            Some(_) => {
                return Err(refusal(
                    call.id,
                    400,
                    -32602,
                    "warden.invalid_arguments",
                    "params.arguments must be an object",
                    json!({}),
                ));
            }
        };
        let trace = traceparent(call.message);
        if trace.is_none() && params.and_then(|p| p.get("_meta")).and_then(|m| m.get("traceparent")).is_some() {
            log::warn(&format!(
                "{name}: params._meta.traceparent is not a W3C trace context; the call goes on, and its receipt \
                 carries no traceparent"
            ));
        }
        let trace = trace.as_deref();
        let environment = self.warden.kernel().environment().to_owned();
        let mut context = IdentityContext::new(&name, &environment);
        context.headers = call.headers;
        let identity = match self.identity.resolve(&context) {
            Ok(Some(identity)) => identity,
            Ok(None) => {
                log::warn(&format!("no principal could be derived for {name}"));
                return Err(refusal(
                    call.id,
                    403,
                    -41007,
                    "warden.no_principal",
                    "no principal could be derived",
                    json!({}),
                ));
            }
            Err(error) => {
                log::warn(&format!("{name}: {error}"));
                return Err(refusal(
                    call.id,
                    403,
                    -41007,
                    "warden.no_principal",
                    "the credential offered was rejected",
                    json!({}),
                ));
            }
        };
        if let Some(pointer) = super::wire::first_float(&arguments) {
            // The float itself never enters an action: the denied receipt is for a stand-in
            // that names where it was and the digest of the arguments as sent (D5).
            let stand_in = json!({UNREPRESENTABLE: {
                "pointer": pointer,
                "arguments_sha256": raw_arguments_digest(call.raw, &arguments),
            }});
            let stand_in = ActionRequest::new(&name, stand_in, identity.principal.clone());
            let action_id = self.record_denial(&stand_in, "unrepresentable_argument", trace, traced.as_ref());
            return Err(refusal(
                call.id,
                400,
                -41008,
                "warden.unrepresentable_argument",
                &format!("{name}: the argument at {pointer} is a float, which has no canonical form; send an integer or a string"),
                json!({"pointer": pointer, "action_id": action_id}),
            ));
        }
        // The upstream credential resolves now, or the call is refused before any decision,
        // reservation or byte upstream (the send resolves it again, for this request only).
        if let Some(credential) = &self.upstream_credential {
            if let Err(why) = credential.check(call.headers) {
                log::warn(&format!(
                    "{name}: refused, the upstream credential is not available: {}",
                    log::printable(&why)
                ));
                let request = ActionRequest::new(&name, arguments, identity.principal.clone());
                let action_id = self.record_denial(&request, "upstream_credential_unavailable", trace, traced.as_ref());
                return Err(refusal(
                    call.id,
                    503,
                    -41020,
                    "warden.upstream_credential_unavailable",
                    &format!("{name}: {}", credential.refusal(&why)),
                    json!({"reason": "upstream_credential_unavailable", "action_id": action_id}),
                ));
            }
        }
        // Tool use inside sampling (SEP-1577): what the client's model asked the server to run,
        // which the server runs with no tools/call of its own. Before the continuation is
        // matched or anything forwarded.
        let uses = tool_uses(params.and_then(|p| p.get("inputResponses")));
        if uses.is_empty() {
            return self.decide_call(call, present, traced, &name, arguments, trace, &identity);
        }
        let tools: Vec<&str> = uses.iter().map(|u| u.name.as_str()).collect();
        if self.warden.document().gateway.sampling_tools == SamplingTools::Refuse {
            log::warn(&format!(
                "{name}: refused, the client answered a sampling request with tool use ({}); gateway.sampling_tools is refuse",
                log::printable(&tools.join(", "))
            ));
            let request = ActionRequest::new(&name, arguments, identity.principal.clone());
            let action_id = self.record_denial(&request, "sampling_tool_use", trace, traced.as_ref());
            return Err(refusal(
                call.id,
                403,
                -41019,
                "warden.sampling_tools_refused",
                &format!(
                    "{name}: the client's answer to a sampling request uses tools, which the server would run with no \
                     decision; this gateway does not forward tool use inside sampling (gateway.sampling_tools: refuse)"
                ),
                json!({"reason": "sampling_tool_use", "tools": tools, "action_id": action_id}),
            ));
        }
        let nested = self.govern_tool_uses(call.id, &uses, &identity)?;
        match self.decide_call(call, present, traced, &name, arguments, trace, &identity) {
            Ok(mut admitted) => {
                admitted.nested = nested;
                Ok(admitted)
            }
            Err(answer) => {
                release(nested, "the call that carried it was refused; nothing was forwarded");
                Err(answer)
            }
        }
    }

    /// Each `tool_use` as the action `sampling.<alias>.<tool>` through the kernel, by the
    /// principal of the call that carries it: every permit, or the first refusal (the permits
    /// already issued released as not executed, since nothing is forwarded).
    fn govern_tool_uses(
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

    /// The rest of `decide` for a call whose principal is known: a continuation, or the
    /// checks, the decision and the reservation of a first leg.
    #[allow(clippy::too_many_arguments)]
    fn decide_call(
        &self,
        call: &Call<'_>,
        present: &dyn Fn() -> bool,
        traced: Option<std::sync::Arc<warden::telemetry::ActionTrace>>,
        name: &str,
        arguments: Value,
        trace: Option<&str>,
        identity: &warden::identity::Identity,
    ) -> Result<Admitted, Answer> {
        let name = name.to_owned();
        let params = call.message.get("params").and_then(Value::as_object);
        let state = params.and_then(|p| p.get("requestState")).and_then(Value::as_str).filter(|s| !s.is_empty());
        if let Some(state) = state {
            if let Some(continued) = self.continuation(call, &name, state, &arguments, &identity.principal)? {
                return Ok(continued);
            }
        }
        let mut request = ActionRequest::new(&name, arguments, identity.principal.clone());
        // Before anything else is decided or reserved: the tool is one the pinned tools/list
        // offers, and the arguments match its inputSchema (a schema-rejected call never runs,
        // so it must never become an AMBIGUOUS effect).
        // (An action the document does not name is left to the kernel, which denies it
        // `unknown_action` — the refusal that tells the operator what to write.)
        let checked = if self.warden.document().actions.contains_key(&name) {
            let unlisted = self.list_if_needed(&name, call.tool, call.lister).err();
            self.catalog.check(&name, call.tool, &request.arguments, unlisted.as_deref())
        } else {
            Ok(())
        };
        if let Err(refused) = checked {
            log::warn(&format!("{name}: refused, {}", refused.reason));
            let action_id = self.record_denial(&request, refused.reason, trace, traced.as_ref());
            let mut data = match refused.data {
                Value::Object(map) => map,
                _ => Map::new(),
            };
            data.insert("reason".into(), json!(refused.reason));
            data.insert("action_id".into(), json!(action_id));
            return Err(refusal(
                call.id,
                refused.status,
                refused.code,
                refused.token,
                &refused.message,
                Value::Object(data),
            ));
        }
        if let Some(reason) = self.pin_refusal(&name, call.tool) {
            log::warn(&format!(
                "{name}: refused, {reason} (the tool's tools/list entry does not match its tool_schema_sha256 pin)"
            ));
            let message = match reason {
                "upstream_unverified" => format!(
                    "{name} pins the tool's schema, and no tools/list answer has shown it yet; list the tools first"
                ),
                _ => format!(
                    "{name} pins the tool's schema, and the upstream now advertises a different one; check the server"
                ),
            };
            let action_id = self.record_denial(&request, reason, trace, traced.as_ref());
            return Err(refusal(
                call.id,
                403,
                -41016,
                "warden.upstream_unpinned",
                &message,
                json!({"reason": reason, "action_id": action_id}),
            ));
        }
        if let Err(error) =
            resource_for(Some(self.warden.document()), request.name, &request.arguments, request.resource.as_deref())
        {
            let action_id = self.record_denial(&request, "resource_template_error", trace, traced.as_ref());
            return Err(refusal(
                call.id,
                403,
                -41001,
                "warden.denied",
                &format!("{name}: the resource template cannot be rendered from these arguments ({error})"),
                json!({"reason": "resource_template_error", "action_id": action_id}),
            ));
        }
        let metadata = params.and_then(|p| p.get("metadata"));
        let hop = metadata.and_then(|m| m.get("hop")).and_then(Value::as_str);
        let task = metadata.and_then(|m| m.get("task")).and_then(Value::as_str);
        // The hash of the very action `submit` will build from this request.
        let action_hash = self.warden.action_for(&request).ok().and_then(|action| action.hash().ok());
        let presented = action_hash.as_deref().and_then(|hash| self.granted_approval(hash));
        request.principal_expires_at = identity.expires_at;
        request.approval_id = presented.as_deref();
        request.hop = hop;
        request.task = task;
        request.traceparent = trace;
        request.trace = traced;
        // The library's one propose-and-wait: a call that needs approval waits (at most
        // `--wait-approvals`, by the kernel's clock, while the client is there and the gateway
        // is not stopping) and then presents the answered request in this identical call — a
        // grant is consumed atomically with the reservation, exactly as when the client sends it
        // again; a denial refuses as denied (-41003).
        let keep_waiting = || present() && !self.stopping.load(std::sync::atomic::Ordering::SeqCst);
        let wait = (!self.approval_wait.is_zero()).then(|| AnswerWait {
            timeout: micros(self.approval_wait),
            poll: std::time::Duration::from_millis(250),
            keep_waiting: Some(&keep_waiting),
        });
        let (action_id, outcome) = self.warden.submit_recovering(&request, &Recovery { reconcile: None, wait });
        match outcome {
            Ok(permit) => {
                let mut forward = call.message.clone();
                if let Some(params) = forward.get_mut("params").and_then(Value::as_object_mut) {
                    params.insert("arguments".into(), permit.action().canonical_arguments());
                }
                let not_executed_on_error =
                    self.warden.document().actions.get(&name).is_some_and(|entry| entry.not_executed_on_error);
                Ok(Admitted {
                    permit,
                    forward,
                    not_executed_on_error,
                    round: 0,
                    started: std::time::Instant::now(),
                    span: None,
                    flight: None,
                    nested: Vec::new(),
                    session: None,
                })
            }
            Err(error) => Err(self.refused(call.id, &name, action_hash.as_deref(), action_id, error)),
        }
    }

    /// A call carrying a `requestState`: the held suspension it continues, checked against the
    /// suspended call (tool, canonical arguments, principal) **before** it is consumed (D1).
    /// `Ok(None)`: no suspension and a keyless tool, which runs as an ordinary call (D3).
    fn continuation(
        &self,
        call: &Call<'_>,
        name: &str,
        state: &str,
        arguments: &Value,
        principal: &warden::Principal,
    ) -> Result<Option<Admitted>, Answer> {
        let unknown = |why: &str| {
            refusal(
                call.id,
                400,
                -41009,
                "warden.unknown_continuation",
                &format!("{name}: {why}; start the call again without requestState"),
                json!({"tool": name}),
            )
        };
        let canonical = warden::canonical::to_canonical_string(arguments, "arguments").ok();
        let Ok(mut held) = self.suspended.lock() else { return Err(unknown("the suspension table is unavailable")) };
        let Some(suspension) = held.get(state) else {
            drop(held);
            if let Some(late) = self.lapsed_continuation(call, state, canonical.as_deref(), principal) {
                return Err(late);
            }
            let keyed = self.warden.document().actions.get(name).is_some_and(|entry| entry.effect.is_some());
            if keyed {
                return Err(unknown("this requestState continues no call held by this gateway"));
            }
            return Ok(None);
        };
        if suspension.tool != call.tool
            || canonical.as_deref() != Some(suspension.arguments.as_str())
            || &suspension.principal != principal
        {
            log::warn(&format!("{name}: a continuation with other arguments or another principal was refused"));
            return Err(unknown("this continuation's tool, arguments or principal differ from the suspended call's"));
        }
        let Some(suspension) = held.remove(state) else { return Err(unknown("the suspension is gone")) };
        drop(held);
        if suspension.deadline < std::time::Instant::now() {
            let key = suspension.permit.effect_key().map(str::to_owned);
            let _ = suspension.permit.ambiguous("elicitation timeout: the continuation came too late");
            self.end_flight(suspension.flight);
            return Err(refusal(
                call.id,
                409,
                -41005,
                "warden.ambiguous_effect",
                "the suspended call waited longer than --elicitation-timeout; its effect is AMBIGUOUS until a human resolves it",
                json!({"effect_key": key}),
            ));
        }
        let mut permit = suspension.permit;
        let flight = suspension.flight;
        let responses = call.message.get("params").and_then(|p| p.get("inputResponses"));
        let data = json!({
            "reason": "continuation",
            "round": suspension.round,
            "input_responses": keys(responses),
            "input_responses_sha256": responses.map(digest),
        });
        if let Err(error) = permit.resume(&data) {
            // Nothing is forwarded without its EXECUTION_RESUMED (D10): the first leg may have
            // acted, so the effect is AMBIGUOUS.
            log::warn(&format!("{name}: recording the continuation failed: {error}"));
            let key = permit.effect_key().map(str::to_owned);
            let _ = permit.ambiguous(&format!("the continuation could not be recorded: {error}"));
            self.end_flight(flight);
            if !error.is_refusal() {
                return Err(internal(call.id));
            }
            return Err(refusal(
                call.id,
                409,
                -41005,
                "warden.ambiguous_effect",
                "the suspended call no longer holds its effect; it is AMBIGUOUS until a human resolves it",
                json!({"effect_key": key}),
            ));
        }
        let mut forward = call.message.clone();
        if let Some(params) = forward.get_mut("params").and_then(Value::as_object_mut) {
            params.insert("arguments".into(), permit.action().canonical_arguments());
        }
        let not_executed_on_error =
            self.warden.document().actions.get(name).is_some_and(|entry| entry.not_executed_on_error);
        Ok(Some(Admitted {
            permit,
            forward,
            not_executed_on_error,
            round: suspension.round,
            started: std::time::Instant::now(),
            span: None,
            flight,
            nested: Vec::new(),
            session: None,
        }))
    }

    /// A continuation of a suspension the sweep recorded AMBIGUOUS: `409 -41005` naming the
    /// effect when it is the same call (tool, canonical arguments, principal); `None` otherwise.
    fn lapsed_continuation(
        &self,
        call: &Call<'_>,
        state: &str,
        canonical: Option<&str>,
        principal: &warden::Principal,
    ) -> Option<Answer> {
        let kept = self.lapsed.lock().ok()?;
        let (_, lapsed) = kept.iter().rev().find(|(kept_state, _)| kept_state == state)?;
        if lapsed.tool != call.tool || canonical != Some(lapsed.arguments.as_str()) || &lapsed.principal != principal {
            return None;
        }
        Some(refusal(
            call.id,
            409,
            -41005,
            "warden.ambiguous_effect",
            "the suspended call waited longer than --elicitation-timeout; its effect is AMBIGUOUS until a human resolves it",
            json!({"effect_key": lapsed.effect_key}),
        ))
    }

    /// Record every suspension whose continuation did not come in time as AMBIGUOUS (D4).
    pub fn sweep(&self) {
        let now = std::time::Instant::now();
        let lapsed: Vec<(String, Suspension)> = match self.suspended.lock() {
            Ok(mut held) => {
                let states: Vec<String> =
                    held.iter().filter(|(_, s)| s.deadline < now).map(|(state, _)| state.clone()).collect();
                states.into_iter().filter_map(|state| held.remove(&state).map(|s| (state, s))).collect()
            }
            Err(_) => return,
        };
        for (state, suspension) in lapsed {
            let seconds = self.elicitation.timeout.as_secs();
            if let Ok(mut kept) = self.lapsed.lock() {
                if kept.len() >= LAPSED_KEPT {
                    kept.pop_front();
                }
                kept.push_back((
                    state,
                    Lapsed {
                        tool: suspension.tool.clone(),
                        arguments: suspension.arguments.clone(),
                        principal: suspension.principal.clone(),
                        effect_key: suspension.permit.effect_key().map(str::to_owned),
                    },
                ));
            }
            if let Err(error) =
                suspension.permit.ambiguous(&format!("elicitation timeout: no continuation within {seconds} s"))
            {
                log::warn(&format!("recording a lapsed suspension failed: {error}"));
            }
            self.end_flight(suspension.flight);
        }
    }

    /// The gateway is stopping: every held suspension is recorded AMBIGUOUS now (its
    /// continuation can no longer come), rather than when its lease lapses.
    pub fn abandon_suspensions(&self) -> usize {
        let held: Vec<Suspension> = match self.suspended.lock() {
            Ok(mut held) => held.drain().map(|(_, suspension)| suspension).collect(),
            Err(_) => return 0,
        };
        let count = held.len();
        for suspension in held {
            if let Err(error) =
                suspension.permit.ambiguous("the gateway stopped while the call waited for its continuation")
            {
                log::warn(&format!("recording an abandoned suspension failed: {error}"));
            }
            self.end_flight(suspension.flight);
        }
        count
    }

    /// A denied receipt for a call the gateway refuses before `submit` (D5): the kernel is
    /// proposed the action with a deny ruling, which records it and refuses. `None` when the
    /// call cannot become an action or nothing was written. A resource template that cannot
    /// render leaves the receipt's resource empty; its reason says why.
    fn record_denial(
        &self,
        request: &ActionRequest<'_>,
        reason: &str,
        trace: Option<&str>,
        traced: Option<&std::sync::Arc<warden::telemetry::ActionTrace>>,
    ) -> Option<String> {
        let request = ActionRequest { traceparent: trace, trace: traced.cloned(), ..request.clone() };
        match self.warden.record_denial(&request, reason) {
            Ok(action_id) => Some(action_id),
            Err(error) => {
                log::warn(&format!("{}: recording the refusal failed: {error}", request.name));
                None
            }
        }
    }

    /// The latest request for `hash`, when a human has granted it.
    fn granted_approval(&self, hash: &str) -> Option<String> {
        let id = self.latest_request(hash)?;
        let record = self.warden.kernel().approval(&id).ok()??;
        (record.status == ApprovalStatus::Granted).then_some(id)
    }

    /// The latest approval request for `hash`, after reading the events written since the last
    /// look (one read when nothing is new).
    fn latest_request(&self, hash: &str) -> Option<String> {
        let mut index = self.approvals.lock().ok()?;
        loop {
            let events = match self.warden.kernel().events(index.cursor, 1000) {
                Ok(events) => events,
                Err(error) => {
                    log::warn(&format!("reading approval events failed: {error}"));
                    break;
                }
            };
            let Some(last) = events.last().map(|e| e.event_id) else { break };
            for event in &events {
                if event.kind != EventKind::APPROVAL_REQUESTED {
                    continue;
                }
                let data: Option<Value> = serde_json::from_str(&event.data).ok();
                let requested = data.as_ref().and_then(|d| d.get("action_hash")).and_then(Value::as_str);
                if let (Some(requested), Some(id)) = (requested, &event.approval_id) {
                    index.by_hash.insert(requested.to_owned(), id.clone());
                }
            }
            index.cursor = last;
        }
        index.by_hash.get(hash).cloned()
    }

    /// A kernel refusal (or fault) as the client's JSON-RPC error.
    fn refused(&self, id: &Value, name: &str, hash: Option<&str>, action_id: Option<String>, error: Error) -> Answer {
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

    /// Record what was observed and say what the client gets.
    pub fn finish(&self, admitted: Admitted, observation: &Observation, revision: &str) -> Finished {
        let Admitted { mut permit, forward, not_executed_on_error, round, started, span, mut flight, nested, session } =
            admitted;
        let answered = match observation {
            Observation::Answered { body: Some(body), .. } => Some(body),
            _ => None,
        };
        let icons = self.warden.document().gateway.icons;
        let decision = permit.to_json().get("decision").and_then(Value::as_str).unwrap_or_default().to_owned();
        let tool =
            forward.get("params").and_then(|p| p.get("name")).and_then(Value::as_str).unwrap_or_default().to_owned();
        let id = forward.get("id").cloned().unwrap_or(Value::Null);
        let context = classify::Context { request_id: &id, revision, not_executed_on_error };
        let (mut effect, mut reply) = classify::classify(observation, &context);
        let action_id = permit.action().action_id.clone();
        let effect_key = permit.effect_key().map(str::to_owned);
        let attempt = permit.attempt();
        let state = match observation {
            Observation::Answered { body: Some(body), .. } => requested_state(body),
            _ => None,
        };
        // The upstream asks the client's model to use tools (SEP-1577): with `refuse` the
        // request never reaches the client, and the leg, which may have acted, is AMBIGUOUS.
        let sampling = match (observation, &reply, self.warden.document().gateway.sampling_tools) {
            (Observation::Answered { body: Some(body), .. }, Reply::Relay, SamplingTools::Refuse) => {
                sampling_with_tools(body)
            }
            _ => Vec::new(),
        };
        if !sampling.is_empty() {
            log::warn(&format!(
                "{action_id}: the upstream asked for sampling with tools ({}); not relayed (gateway.sampling_tools: refuse)",
                log::printable(&sampling.join(", "))
            ));
            effect = Effect::Ambiguous(format!(
                "the upstream asked the client to sample with tools ({}), which gateway.sampling_tools: refuse does not relay",
                log::printable(&sampling.join(", "))
            ));
            reply = Reply::SamplingRefused;
        }
        // This leg reached the upstream with its tool uses: they are settled with it.
        let asks_more = matches!(reply, Reply::Relay)
            && matches!(observation, Observation::Answered { body: Some(body), .. }
                if body.get("result").and_then(|r| r.get("resultType")).and_then(Value::as_str) == Some("input_required"));
        // A task handle (the tasks extension): the call has not ended; its effect stays
        // EXECUTING under the task id until the task's terminal state is seen (`tasks`).
        let handle = match (answered, &reply) {
            (Some(body), Reply::Relay) => super::tasks::handle_of(body),
            _ => None,
        };
        let nested = self.settle_nested(nested, &effect, asks_more || handle.is_some());
        if let Some(handle) = handle {
            let held = super::tasks::HeldTask {
                permit,
                tool: tool.clone(),
                decision: decision.clone(),
                not_executed_on_error,
                started,
                deadline: std::time::Instant::now() + super::tasks::window(handle.ttl_ms, self.task_timeout),
                window: super::tasks::window(handle.ttl_ms, self.task_timeout),
                completed_seen: false,
                flight: flight.take(),
                poll: super::tasks::Polling::new(session, Some(revision), handle.poll_interval_ms),
            };
            match self.hold_task(held, &handle) {
                Ok(mut meta) => {
                    if !nested.is_empty() {
                        meta["nested"] = json!(nested);
                    }
                    self.log_outcome(&tool, &decision, &meta, round, started, &forward);
                    if let Some(span) = span {
                        self.telemetry.end_call(span, answered, Some("task"));
                    }
                    return Finished { reply: Reply::Relay, meta, action_id, effect_key, icons };
                }
                Err((held, why)) => {
                    permit = held.permit;
                    flight = held.flight;
                    effect = Effect::Ambiguous(format!(
                        "a task handle ({}), not held: {why}",
                        log::printable(&handle.task_id)
                    ));
                    reply = Reply::Ambiguous;
                }
            }
        }
        if let (Some(state), Some(_), Reply::Relay) = (state, &effect_key, &reply) {
            let next = round + 1;
            if next > self.elicitation.max_rounds {
                effect = Effect::Ambiguous(format!(
                    "the upstream asked for input {next} times, over --max-elicitation-rounds {}",
                    self.elicitation.max_rounds
                ));
                reply = Reply::Ambiguous;
            } else {
                let until = self.warden.kernel().now().saturating_add(micros(self.elicitation.timeout));
                let requests = match observation {
                    Observation::Answered { body: Some(body), .. } => {
                        keys(body.get("result").and_then(|r| r.get("inputRequests")))
                    }
                    _ => Vec::new(),
                };
                let data = json!({
                    "reason": "input_required",
                    "held": true,
                    "round": next,
                    "input_requests": requests,
                });
                // The lease covers the wait for the continuation (it is never shortened); the
                // extension and EXECUTION_SUSPENDED are one write (D10).
                match permit.suspend(Some(until), &data) {
                    Ok(()) => {
                        let mut meta = json!({
                            "action_id": action_id,
                            "receipt_id": Value::Null,
                            "effect_key": effect_key,
                            "result": "suspended",
                            "attempt": attempt,
                        });
                        if !nested.is_empty() {
                            meta["nested"] = json!(nested);
                        }
                        let arguments =
                            warden::canonical::to_canonical_string(&permit.action().canonical_arguments(), "arguments")
                                .unwrap_or_default();
                        let suspension = Suspension {
                            tool: forward["params"]["name"].as_str().unwrap_or_default().to_owned(),
                            arguments,
                            principal: permit.action().principal.clone(),
                            round: next,
                            deadline: std::time::Instant::now() + self.elicitation.timeout,
                            permit,
                            flight: flight.take(),
                        };
                        if let Ok(mut held) = self.suspended.lock() {
                            held.insert(state, suspension);
                        }
                        self.log_outcome(&tool, &decision, &meta, round, started, &forward);
                        if let Some(span) = span {
                            self.telemetry.end_call(span, answered, Some("suspended"));
                        }
                        return Finished { reply: Reply::Relay, meta, action_id, effect_key, icons };
                    }
                    Err(error) => {
                        effect = Effect::Ambiguous(format!(
                            "input_required, and the suspension could not be recorded: {error}"
                        ));
                    }
                }
            }
        }
        if round > 0 {
            // A continuation leg never proves that nothing ran: the first leg may have acted.
            if let Effect::Failed(what) = &effect {
                effect = Effect::Ambiguous(format!("{what} on a continuation leg"));
            }
        }
        // The trace the client's call belongs to (D12) is the receipt's own `traceparent`,
        // handed to `submit`; the upstream's payload is never stored (D13), but a result's
        // `structuredContent` is bound to the receipt by its digest, inside the hashed document.
        let structured = match observation {
            Observation::Answered { body: Some(body), .. } => structured_content_digest(body),
            _ => None,
        };
        if let Some(digest) = &structured {
            if let Err(error) = permit.bind_result_sha256(digest) {
                log::warn(&format!("{action_id}: the structuredContent digest was not bound: {error}"));
            }
        }
        let (result, receipt_id) = report(permit, &effect, &action_id);
        let mut meta = json!({
            "action_id": action_id,
            "receipt_id": receipt_id,
            "effect_key": effect_key,
            "result": result,
            "attempt": attempt,
        });
        if let (Some(digest), Some(map), Some(_)) = (structured, meta.as_object_mut(), &receipt_id) {
            map.insert("result_sha256".into(), json!(digest));
        }
        if !nested.is_empty() {
            meta["nested"] = json!(nested);
        }
        self.log_outcome(&tool, &decision, &meta, round, started, &forward);
        self.end_flight(flight);
        if let Some(span) = span {
            let relayed = if matches!(reply, Reply::Relay) { answered } else { None };
            self.telemetry.end_call(span, relayed, Some(result));
        }
        Finished { reply, meta, action_id, effect_key, icons }
    }
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

/// Report `effect` as `permit`'s one outcome (which writes its receipt): the outcome as the
/// receipt summary names it, and the receipt's id — or, when the store did not take it (logged,
/// naming `what`), `ambiguous` and no receipt.
pub fn report(permit: Permit, effect: &Effect, what: &str) -> (&'static str, Option<String>) {
    let receipt_id = permit.receipt_id().to_owned();
    let (result, recorded) = match effect {
        Effect::Committed => ("committed", permit.commit(&Value::Null)),
        Effect::Failed(why) => ("failed", permit.not_executed(&log::printable(why))),
        Effect::Ambiguous(why) => ("ambiguous", permit.ambiguous(&log::printable(why))),
    };
    match recorded {
        Ok(()) => (result, Some(receipt_id)),
        Err(error) => {
            log::warn(&format!("recording the outcome of {what} failed: {error}"));
            ("ambiguous", None)
        }
    }
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

/// How many of the newest receipts a refusal's receipt is looked for among.
const REFUSAL_RECEIPT_WINDOW: usize = 64;

impl Engine {
    /// A refusal that wrote a receipt (its `data.action_id` names the action) carries the
    /// receipt summary in `data._meta`, where an SDK's typed error reads it: the action id,
    /// and the receipt's id and result when it is among the newest receipts (an exact match on
    /// the action id; under a burst of other calls it may be out of the window: `null`).
    fn refusal_meta(&self, body: &mut Value) {
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

    /// `gateway.sampling_tools: refuse`.
    pub fn refuses_sampling_tools(&self) -> bool {
        self.warden.document().gateway.sampling_tools == SamplingTools::Refuse
    }

    /// The outcome of the tool uses a leg carried (`gateway.sampling_tools: govern`) is the
    /// leg's: the upstream answered with a result or with another `input_required`
    /// (`asks_more`: it took the tool uses and goes on) → committed, it provably did nothing →
    /// not executed, anything else → AMBIGUOUS. Their summaries.
    fn settle_nested(&self, nested: Vec<Permit>, effect: &Effect, asks_more: bool) -> Vec<Value> {
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

    /// The protected call ended: its `execute_tool` span with it.
    pub(super) fn end_flight(&self, flight: Option<InFlight>) {
        if let Some(flight) = flight {
            // A call still not ended (it could not be recorded) ends its span when dropped.
            let _ = self.telemetry.action_ended(flight);
        }
    }

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
    fn log_outcome(
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
fn arguments_of(message: &Value) -> Value {
    message.get("params").and_then(|p| p.get("arguments")).cloned().unwrap_or(Value::Null)
}

fn millis(started: std::time::Instant) -> f64 {
    (started.elapsed().as_micros() as f64 / 1000.0 * 10.0).round() / 10.0
}

/// The log line of a call refused before it was forwarded: what the client was told, never
/// the arguments.
fn refusal_line(action: &str, tool: &str, body: &Value, started: std::time::Instant) -> Value {
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

/// `sha256:` over a tool result's `structuredContent` as the gateway relays it (compact JSON,
/// member names sorted, numbers as the upstream spelled them), when the answer is a result
/// that has one.
fn structured_content_digest(envelope: &Value) -> Option<String> {
    envelope.get("result")?.get("structuredContent").map(digest)
}

/// `params._meta.traceparent`, when it is a W3C trace context (`warden::receipt::is_traceparent`).
fn traceparent(envelope: &Value) -> Option<String> {
    let text = envelope.get("params")?.get("_meta")?.get("traceparent")?.as_str()?;
    warden::receipt::is_traceparent(text).then(|| text.to_owned())
}

/// Permits that were issued for tool uses that will never be forwarded: not executed.
fn release(permits: Vec<Permit>, why: &str) {
    for permit in permits {
        if let Err(error) = permit.not_executed(why) {
            log::warn(&format!("releasing a tool use's permit failed: {error}"));
        }
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

/// The `requestState` of an `input_required` result, when it has a non-empty one.
fn requested_state(envelope: &Value) -> Option<String> {
    let result = envelope.get("result")?;
    if result.get("resultType").and_then(Value::as_str) != Some("input_required") {
        return None;
    }
    result.get("requestState").and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_owned)
}

/// The member names of an `inputRequests`/`inputResponses` object (at most 64, each at most
/// 256 characters): what a suspension event keeps of them, never their values.
fn keys(object: Option<&Value>) -> Vec<String> {
    let Some(map) = object.and_then(Value::as_object) else { return Vec::new() };
    map.keys().take(64).map(|key| key.chars().take(256).collect()).collect()
}

/// `sha256:` over the compact JSON of `value` as the gateway forwards it (the inputResponses
/// member of the forwarded request; map keys sorted), so the digest can be checked against
/// what the upstream received.
pub fn digest(value: &Value) -> String {
    warden::canonical::sha256_prefixed(&serde_json::to_vec(value).unwrap_or_default())
}

/// `sha256:` over the bytes of `params.arguments` exactly as the client sent them; when they
/// cannot be picked out of the message (a repeated member), over the arguments as parsed and
/// written back (keys sorted, digits kept), prefixed `parsed:` to say so.
fn raw_arguments_digest(raw: &[u8], arguments: &Value) -> String {
    #[derive(serde::Deserialize)]
    struct Envelope<'a> {
        #[serde(borrow)]
        params: Params<'a>,
    }
    #[derive(serde::Deserialize)]
    struct Params<'a> {
        #[serde(borrow)]
        arguments: &'a serde_json::value::RawValue,
    }
    match serde_json::from_slice::<Envelope<'_>>(raw) {
        Ok(envelope) => warden::canonical::sha256_prefixed(envelope.params.arguments.get().as_bytes()),
        Err(_) => format!("parsed:{}", digest(arguments)),
    }
}

fn internal(id: &Value) -> Answer {
    refusal(
        id,
        500,
        -32603,
        "warden.internal",
        "warden could not decide this call (a store fault); nothing was forwarded — see the gateway's log",
        json!({}),
    )
}

pub(super) fn micros(duration: std::time::Duration) -> warden::Micros {
    i64::try_from(duration.as_micros()).unwrap_or(i64::MAX)
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

#[cfg(test)]
mod tests {
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
