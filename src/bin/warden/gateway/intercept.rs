//! One intercepted `tools/call` through the kernel, whatever the transport: the principal,
//! the action `mcp.<alias>.<tool>`, the decision and the reservation (`admit`), then the
//! observed outcome recorded and the answer built (`finish`). What the client is told is
//! `answer`'s (refusals, `_meta`, the log line per call), tool use inside sampling is
//! `sampling`'s, and a call waiting on its client's input (suspensions, continuations) is
//! `elicitation`'s.

use std::collections::HashMap;
use std::sync::Mutex;

use serde_json::{json, Map, Value};

use warden::approval::ApprovalStatus;
use warden::document::SamplingTools;
use warden::event::EventKind;
use warden::identity::{IdentityContext, IdentityProvider};
use warden::kernel::{AnswerWait, Permit};
use warden::pipeline::{resource_for, ActionRequest, Recovery, Warden};

use super::answer::{arguments_of, refusal, refusal_line, Answer, Finished};
use super::catalog::{Catalog, ListTools};
use super::classify::{self, Effect, Observation, Reply};
use super::elicitation::{keys, requested_state, Elicitation, Lapsed, Suspension};
use super::log;
use super::sampling::{release, sampling_with_tools, tool_uses};
use super::telemetry::{CallSpan, InFlight, Telemetry};

/// The only argument of the action a `-41008` refusal records: `{pointer, arguments_sha256}`
/// in place of arguments that have no canonical form.
pub const UNREPRESENTABLE: &str = "warden.unrepresentable_arguments";

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
    pub(super) suspended: Mutex<HashMap<String, Suspension>>,
    /// Suspensions whose continuation did not come in time, recorded AMBIGUOUS by the sweep:
    /// a continuation that comes after all is told the effect is ambiguous (`-41005`), not that
    /// the `requestState` is unknown. The latest `LAPSED_KEPT`, by `requestState`.
    pub(super) lapsed: Mutex<std::collections::VecDeque<(String, Lapsed)>>,
    /// Legacy (2025) elicitation: server requests relayed on an intercepted event stream, by
    /// `answer_key`, each with the stream's thread waiting to record the client's answer.
    pub(super) answers: Mutex<HashMap<String, std::sync::mpsc::Sender<Value>>>,
    pub(super) elicitation: Elicitation,
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
            for line in found.session_lines(&self.alias) {
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
    pub(super) fn granted_approval(&self, hash: &str) -> Option<String> {
        let id = self.latest_request(hash)?;
        let record = self.warden.kernel().approval(&id).ok()??;
        (record.status == ApprovalStatus::Granted).then_some(id)
    }

    /// The latest approval request for `hash`, after reading the events written since the last
    /// look (one read when nothing is new).
    pub(super) fn latest_request(&self, hash: &str) -> Option<String> {
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

    /// The protected call ended: its `execute_tool` span with it.
    pub(super) fn end_flight(&self, flight: Option<InFlight>) {
        if let Some(flight) = flight {
            // A call still not ended (it could not be recorded) ends its span when dropped.
            let _ = self.telemetry.action_ended(flight);
        }
    }
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

pub(super) fn micros(duration: std::time::Duration) -> warden::Micros {
    i64::try_from(duration.as_micros()).unwrap_or(i64::MAX)
}
