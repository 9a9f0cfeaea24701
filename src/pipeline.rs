//! The full pipeline with the administrator's document as the trust boundary:
//! principal → authority → policy → attempt ceiling → approval gate → one write → permit.
//!
//! `Warden` pairs a loaded `Document` with a `Kernel`. The agent's influence enters only as
//! the action name, its arguments and a presented approval id; the decision, the effect key
//! template, the lease and the attempt ceiling all come from the document.

use std::path::Path;
use std::sync::Arc;

use crate::action::{Action, IdKind, Principal};
use crate::authority::{self, AuthorityResult, Call, CreatedVia, Grant};
use crate::clock::{Clock, Micros, SystemClock};
use crate::decision::{Decision, Ruling};
use crate::document::{Document, Mode};
use crate::error::{DenialReason, Error, InvalidInputKind, Result, StoreFaultKind};
use crate::kernel::authority::{AuthorityStamp, ListedDelegation, Sweep};
use crate::kernel::{
    resolve_environment, AnswerWait, Kernel, KernelOptions, Outcomes, Permit, Proposal, ReconcileAnswer,
};
use crate::policy::{evaluate, Evaluation};
use crate::store::StoreOptions;

/// One authority evaluation and what it cost the store.
#[derive(Debug, Clone)]
pub struct AuthorityEvaluation {
    /// What the authority axis decided, with its evidence.
    pub result: AuthorityResult,
    /// Store reads the evaluation's one read operation made (index ranges, rows, chain links).
    pub store_reads: u64,
}

/// The longest task name a call may carry, in bytes.
pub const MAX_TASK_BYTES: usize = 256;

/// A notifier for `kernel`'s new approval requests, installed as its listener. The notifier
/// records its events through a weak handle, so it never keeps the store open.
pub fn notifier_for(
    kernel: &Kernel,
    notify: Option<crate::approval::webhook::NotifyConfig>,
) -> Arc<crate::approval::notify::Notifier> {
    let notifier = Arc::new(crate::approval::notify::Notifier::new(notify, Arc::new(kernel.downgrade())));
    let listener = Arc::clone(&notifier);
    kernel.set_approval_listener(Some(Arc::new(move |record| listener.requested(record))));
    notifier
}

/// How a `Warden` is opened.
#[derive(Debug, Clone)]
pub struct WardenOptions {
    /// Where "now" comes from (the system clock unless a test sets one).
    pub clock: Arc<dyn Clock>,
    /// The environment argument; see `kernel::resolve_environment` for the order.
    pub environment: Option<String>,
    /// When outcomes are durable (`durable` unless the host chooses `deferred`).
    pub outcomes: Outcomes,
    /// How the store file is opened.
    pub store: StoreOptions,
    /// The bounds on inputs.
    pub limits: crate::limits::Limits,
    /// Run the document's automatic checkpoints (its `evidence` section) in this handle. On by
    /// default; a short-lived command (the CLI's) turns it off, so an operator need not be able
    /// to read the signing key to approve.
    pub automatic_checkpoints: bool,
    /// What the spans of traced calls may carry beyond Warden's own identifiers (the
    /// arguments, the result); nothing unless the operator opts in.
    pub telemetry: crate::telemetry::Capture,
}

impl Default for WardenOptions {
    fn default() -> Self {
        WardenOptions {
            clock: Arc::new(SystemClock),
            environment: None,
            outcomes: Outcomes::Durable,
            store: StoreOptions::default(),
            limits: crate::limits::Limits::default(),
            automatic_checkpoints: true,
            telemetry: crate::telemetry::Capture::default(),
        }
    }
}

/// One call an agent asks for. Everything else comes from the document.
#[derive(Debug, Clone)]
pub struct ActionRequest<'a> {
    /// The action's name, as the document lists it.
    pub name: &'a str,
    /// The action's arguments: a JSON object (no floats).
    pub arguments: serde_json::Value,
    /// `None`: nobody to attribute the call to; refused with no receipt.
    pub principal: Option<Principal>,
    /// When the principal's credential expires (from the host's identity provider).
    pub principal_expires_at: Option<Micros>,
    /// Used only when the document gives the action no `resource` template.
    pub resource: Option<String>,
    /// A granted approval (`apr_…`) presented for this exact action.
    pub approval_id: Option<&'a str>,
    /// Overrides the document's lease for this call.
    pub lease: Option<Micros>,
    /// The unit of work the call belongs to; grants that name `tasks` need one that matches.
    pub task: Option<&'a str>,
    /// A delegation id (`dlg_…`) handed over by another agent: then it is the only candidate.
    pub hop: Option<&'a str>,
    /// What the host's identity provider verified about the principal (issuer, claims); kept
    /// with an approval request so the approver sees who asked.
    pub identity: Option<crate::approval::Verified>,
    /// The state an approval depends on (`approval::precondition`).
    pub precondition: Option<crate::approval::precondition::PreconditionSource<'a>>,
    /// The caller's W3C trace context (`00-<trace id>-<parent id>-<flags>`), recorded on the
    /// call's receipts as `traceparent`; one that is not valid is refused as invalid input.
    pub traceparent: Option<&'a str>,
    /// Where the call's span is recorded (`telemetry::ActionTrace`): the decision, the refusal
    /// or the permit's outcome, read back with `ActionTrace::span`. One trace per call; `None`
    /// records nothing.
    pub trace: Option<Arc<crate::telemetry::ActionTrace>>,
}

impl<'a> ActionRequest<'a> {
    /// A request by `principal` with nothing else set.
    pub fn new(name: &'a str, arguments: serde_json::Value, principal: Principal) -> ActionRequest<'a> {
        ActionRequest {
            name,
            arguments,
            principal: Some(principal),
            principal_expires_at: None,
            resource: None,
            approval_id: None,
            lease: None,
            task: None,
            hop: None,
            identity: None,
            precondition: None,
            traceparent: None,
            trace: None,
        }
    }
}

/// The one place a request becomes an [`Action`] (the pipeline's, the gateway's, the C ABI's,
/// `warden policy decide`'s and `warden verify`'s): the request's name, arguments and principal
/// in `environment`, on the resource the document's `resource` template renders from the
/// arguments when `document` gives the action one, else on the request's own resource.
///
/// `environment` is the one the caller acts in: a [`Warden`]'s is fixed when it opens (see
/// `kernel::resolve_environment`); a dry run resolves it the same way. A request with no
/// principal is [`Error::NoPrincipal`]; arguments that are not an object, a template that does
/// not render and an action `Action::new` refuses are [`Error::InvalidInput`].
pub fn action_for(document: Option<&Document>, request: &ActionRequest<'_>, environment: &str) -> Result<Action> {
    build_action(document, request, environment, Unrenderable::Refuse)
}

/// [`action_for`] for a call refused before it is submitted, whose denied receipt still names
/// it: a resource template that cannot render leaves the resource empty (the receipt's reason
/// says why) instead of refusing to build the action.
pub fn refused_action_for(
    document: Option<&Document>,
    request: &ActionRequest<'_>,
    environment: &str,
) -> Result<Action> {
    build_action(document, request, environment, Unrenderable::NoResource)
}

/// The resource of the action `name`: the document's `resource` template rendered from the
/// arguments when `document` gives the action one (the caller's `resource` is then ignored: the
/// document decides what the action is on), else the caller's `resource`.
pub fn resource_for(
    document: Option<&Document>,
    name: &str,
    arguments: &serde_json::Value,
    resource: Option<&str>,
) -> std::result::Result<Option<String>, crate::template::TemplateError> {
    let template = document.and_then(|d| d.actions.get(name)).and_then(|e| e.resource.as_ref());
    let Some(template) = template else { return Ok(resource.map(str::to_owned)) };
    match arguments {
        serde_json::Value::Object(arguments) => template.render_resource(arguments).map(Some),
        _ => Err(crate::template::TemplateError::Invalid("arguments must be a JSON object".into())),
    }
}

/// What [`build_action`] does with a resource template that cannot render.
#[derive(Clone, Copy)]
enum Unrenderable {
    Refuse,
    NoResource,
}

fn build_action(
    document: Option<&Document>,
    request: &ActionRequest<'_>,
    environment: &str,
    unrenderable: Unrenderable,
) -> Result<Action> {
    let Some(principal) = request.principal.clone() else {
        // The host never set one: a programming error, and no receipt names a stranger.
        return Err(Error::NoPrincipal { action: request.name.to_owned() });
    };
    if !request.arguments.is_object() {
        return Err(Error::invalid_at(InvalidInputKind::Malformed, "arguments", "arguments must be a JSON object"));
    }
    let resource =
        match (resource_for(document, request.name, &request.arguments, request.resource.as_deref()), unrenderable) {
            (Ok(resource), _) => resource,
            (Err(_), Unrenderable::NoResource) => None,
            (Err(e), Unrenderable::Refuse) => {
                return Err(Error::invalid_at(InvalidInputKind::Malformed, "resource", e.to_string()))
            }
        };
    // The document's schema says which numbers the arguments may hold; with no document,
    // ctrlrun's rule (no floats).
    let floats = document.map_or(crate::canonical::Floats::Refused, |document| document.schema.floats());
    Action::new_with(request.name, request.arguments.clone(), principal, resource.as_deref(), environment, floats)
        .map_err(Error::from)
}

/// A kernel governed by one administrator's document.
#[derive(Debug, Clone)]
pub struct Warden {
    /// Signs the document's automatic checkpoints, if it asks for them (stopped first when the
    /// last clone of the handle goes).
    checkpointer: Option<Arc<crate::evidence::auto::Checkpointer>>,
    kernel: Kernel,
    document: Arc<Document>,
    /// Tells the host's hook and the document's webhook of each new approval request.
    notifier: Arc<crate::approval::notify::Notifier>,
    /// What traced calls' spans may carry (`WardenOptions::telemetry`).
    capture: crate::telemetry::Capture,
}

impl Warden {
    /// Open `store` governed by `document`. The environment is fixed here for the handle's life.
    pub fn open(store: impl AsRef<Path>, document: Document, options: WardenOptions) -> Result<Warden> {
        let environment = resolve_environment(options.environment.as_deref(), document.environment.as_deref());
        let read_only = options.store.read_only;
        let capture = options.telemetry;
        let kernel = Kernel::open(
            store,
            KernelOptions {
                clock: options.clock,
                policy_hash: Some(document.policy_hash.clone()),
                policy_version: document.version.clone(),
                environment: Some(environment),
                outcomes: options.outcomes,
                store: options.store,
                limits: options.limits,
            },
        )?;
        // Before any receipt names it: the policy the receipts' `policy_hash` is the hash of.
        if !read_only {
            kernel.keep_policy(&document.policy_hash, &document.canonical_policy)?;
        }
        let notifier = notifier_for(&kernel, document.notify.clone());
        let checkpointer = match (&document.evidence, options.automatic_checkpoints) {
            (Some(settings), true) => {
                Some(Arc::new(crate::evidence::auto::Checkpointer::start(settings, kernel.downgrade())?))
            }
            _ => None,
        };
        Ok(Warden { checkpointer, kernel, document: Arc::new(document), notifier, capture })
    }

    /// The document's automatic checkpoints in this handle, if they run here.
    pub fn checkpointer(&self) -> Option<&Arc<crate::evidence::auto::Checkpointer>> {
        self.checkpointer.as_ref()
    }

    /// The notification channels of this handle (set the host's hook, the webhook's
    /// credential provider).
    pub fn notifier(&self) -> &Arc<crate::approval::notify::Notifier> {
        &self.notifier
    }

    /// Load the document at `config` (refusing a malformed one: no kernel runs without a valid
    /// document) and open `store` under it.
    pub fn open_files(store: impl AsRef<Path>, config: &Path, options: WardenOptions) -> Result<Warden> {
        let document = crate::document::load_file(config).map_err(|e| Error::Config(e.to_string()))?;
        Warden::open(store, document, options)
    }

    /// The kernel under this handle.
    pub fn kernel(&self) -> &Kernel {
        &self.kernel
    }

    /// The administrator's document this handle decides with.
    pub fn document(&self) -> &Document {
        &self.document
    }

    /// A dry run of the policy: no store access, nothing written.
    pub fn decide(&self, name: &str, arguments: &serde_json::Map<String, serde_json::Value>) -> Evaluation {
        evaluate(&self.document, name, arguments)
    }

    /// Run the pipeline for one request and return a permit, or the refusal with its evidence
    /// already written.
    pub fn submit(&self, request: &ActionRequest<'_>) -> Result<Permit> {
        self.submit_naming_action(request).1
    }

    /// `submit`, and the id of the action the request became (`None` when it never became
    /// one: a missing principal, arguments that are not an object, …). A refusal's receipt
    /// carries that id and the refusal does not, so a caller that reports the receipt (the MCP
    /// gateway) takes it from here rather than searching the receipts for it.
    pub fn submit_naming_action(&self, request: &ActionRequest<'_>) -> (Option<String>, Result<Permit>) {
        // With no reconcile hook and no wait, the one propose-and-wait proposes once.
        self.submit_recovering(request, &Recovery::default())
    }

    /// One proposal of `request`, and the id of the action it became.
    fn propose_once(&self, request: &ActionRequest<'_>) -> (Option<String>, Result<Permit>) {
        let mut action_id = None;
        let result = self.run_pipeline(request, &mut action_id);
        (action_id, result)
    }

    fn run_pipeline(&self, request: &ActionRequest<'_>, action_id: &mut Option<String>) -> Result<Permit> {
        let limits = self.kernel.limits();
        // Before anything echoes the name.
        limits.check_name(request.name)?;
        let entry = self.document.actions.get(request.name);
        let action = self.action_for(request)?;
        *action_id = Some(action.action_id.clone());
        let arguments = action.arguments_text()?;
        limits.check_arguments(arguments.len())?;
        let (ruling, stamp) = self.rule(request, &action)?;
        let mut proposal = Proposal::new(&action, ruling);
        proposal.authority = stamp;
        proposal.effect = entry.and_then(|e| e.effect.as_ref());
        proposal.max_attempts = entry.and_then(|e| e.max_attempts);
        proposal.lease = request.lease.or_else(|| entry.and_then(|e| e.lease));
        proposal.approval_id = request.approval_id;
        proposal.observe = self.document.mode == Mode::Observe;
        proposal.traceparent = request.traceparent;
        proposal.trace = request.trace.as_ref();
        if proposal.ruling.decision == Decision::Approve {
            proposal.ask = self.approval_ask(entry, &proposal.ruling, request);
            if let Some(source) = &request.precondition {
                proposal.precondition = Some(source.fingerprint_for(&action).map_err(Error::InvalidInput)?);
            }
        }
        self.kernel.propose(&proposal)
    }

    /// What an approval request for this ruling needs: the matched rule's (or the entry's)
    /// `approval` requirement, the rule's `when` as canonical JSON, the verified identity.
    fn approval_ask(
        &self,
        entry: Option<&crate::document::ActionEntry>,
        ruling: &Ruling,
        request: &ActionRequest<'_>,
    ) -> crate::approval::ApprovalAsk {
        let rule = entry.and_then(|entry| crate::policy::matched_rule(entry, &ruling.reason));
        let requirement = rule
            .and_then(|rule| rule.approval.clone())
            .or_else(|| entry.and_then(|entry| entry.approval.clone()))
            .unwrap_or_default();
        let when = rule.filter(|rule| !rule.when.is_empty()).and_then(|rule| {
            let map: serde_json::Map<String, serde_json::Value> =
                rule.when.iter().map(|c| (c.key.clone(), c.operand.clone())).collect();
            crate::canonical::to_canonical_string(&serde_json::Value::Object(map), "when").ok()
        });
        crate::approval::ApprovalAsk { requirement, when, identity: request.identity.clone() }
    }

    /// Principal expiry, then authority, then policy: the first that says no decides.
    fn rule(&self, request: &ActionRequest<'_>, action: &Action) -> Result<(Ruling, Option<AuthorityStamp>)> {
        if request.principal_expires_at.is_some_and(|at| at < self.kernel.now()) {
            return Ok((Ruling::new(Decision::Deny, &DenialReason::PrincipalExpired.as_str()), None));
        }
        let mut stamp = None;
        if self.document.authority_config.is_some() {
            let evaluation = self.evaluate_action(request, action)?;
            let result = evaluation.result;
            stamp = Some(AuthorityStamp::from_result(&result));
            if !result.passed {
                let mut ruling = Ruling::new(Decision::Deny, result.reason.as_str());
                ruling.warnings = result.warnings;
                return Ok((ruling, stamp));
            }
        }
        let evaluation = evaluate(&self.document, &action.name, &action.arguments);
        let mut ruling = evaluation.ruling;
        ruling.warnings.extend(evaluation.warnings);
        Ok((ruling, stamp))
    }

    /// The authority axis for `action`: the document's root grants and the store's delegations
    /// indexed under the principal's agent and the action's first segment (or the one hop
    /// presented), read in one read operation whose cost does not grow with the delegations
    /// stored. A store fault decides nothing and permits nothing: it is an error.
    fn evaluate_action(&self, request: &ActionRequest<'_>, action: &Action) -> Result<AuthorityEvaluation> {
        let Some(authority) = &self.document.authority_config else {
            return Err(Error::Config("the document has no authority section; nothing to evaluate".into()));
        };
        if let Some(hop) = request.hop {
            if !crate::action::is_id(IdKind::Delegation, hop) {
                return Err(Error::invalid_at(
                    InvalidInputKind::Malformed,
                    "hop",
                    "a hop is the delegation id another agent handed over: dlg_ followed by 32 lowercase hex digits",
                ));
            }
        }
        if let Some(task) = request.task {
            check_task(task)?;
        }
        let rows = self.kernel.authority_rows(action, request.hop, authority.max_delegation_depth)?;
        let mut call = Call::new(action, self.kernel.now());
        call.task = request.task;
        call.hop = request.hop;
        let result = authority::evaluate(authority, &call, &rows)
            .map_err(|fault| Error::store(StoreFaultKind::Damaged, fault.to_string()))?;
        Ok(AuthorityEvaluation { result, store_reads: rows.reads })
    }

    /// A dry run of the authority axis for one request, against the store's delegations: what
    /// `submit` would decide on authority, and how many store reads it took. Writes nothing.
    pub fn evaluate_authority(&self, request: &ActionRequest<'_>) -> Result<AuthorityEvaluation> {
        let action = self.action_for(request)?;
        self.evaluate_action(request, &action)
    }

    /// The action `request` names under this handle's document, in its environment: see
    /// [`action_for`].
    pub fn action_for(&self, request: &ActionRequest<'_>) -> Result<Action> {
        action_for(Some(&self.document), request, self.kernel.environment())
    }

    /// The action a call refused before `submit` names: see [`refused_action_for`].
    pub fn refused_action_for(&self, request: &ActionRequest<'_>) -> Result<Action> {
        refused_action_for(Some(&self.document), request, self.kernel.environment())
    }

    /// Record a call its host refused before `submit` (a gateway's check before forwarding):
    /// the action `request` names (see [`refused_action_for`]) is denied with `reason` through
    /// [`Kernel::record_denial`] — its events and denied receipt, carrying
    /// `request.traceparent`. With `request.trace`, the call's span is recorded there, begun
    /// and ended here as `submit_recovering` does: a refusal is a span too. The id of the
    /// action recorded, or why nothing was (the request names no action, or the store failed).
    pub fn record_denial(&self, request: &ActionRequest<'_>, reason: &str) -> Result<String> {
        let action = self.refused_action_for(request)?;
        let trace = request.trace.as_ref();
        if let Some(trace) = trace {
            self.begin_trace(trace, request)?;
        }
        let answer = self.kernel.record_denial(&action, reason, request.traceparent, trace);
        if let Some(trace) = trace {
            let error = match &answer {
                Ok(refusal) | Err(refusal) => refusal,
            };
            trace.end_error(self.kernel.now(), error);
        }
        answer.map(|_| action.action_id)
    }

    // ---- delegation ----------------------------------------------------------------------------

    fn authority_section(&self) -> Result<&authority::Authority> {
        self.document.authority_config.as_ref().ok_or_else(|| {
            Error::Config(
                "the document has no authority section, so there is nothing to delegate; add 'authority:' with the \
                 root grants first"
                    .into(),
            )
        })
    }

    /// Delegate part of `parent_id` (a root grant id or a `dlg_…` id) to the grantee `grant`
    /// names, as `by`: every check of ctrlrun's order, then the row, in one write. Returns the
    /// new `dlg_…` id; a refusal is `DelegationRefused` with its reason and dimension.
    pub fn delegate(
        &self,
        parent_id: &str,
        grant: &Grant,
        by: &Principal,
        by_expires_at: Option<Micros>,
        via: CreatedVia,
    ) -> Result<String> {
        let authority = self.authority_section()?;
        let record = self.kernel.delegate(authority, parent_id, grant, by, by_expires_at, via)?;
        Ok(record.delegation_id)
    }

    /// `delegate` with the grant as YAML or JSON text (the keys of a grant minus `id`).
    pub fn delegate_text(
        &self,
        parent_id: &str,
        grant: &str,
        by: &Principal,
        by_expires_at: Option<Micros>,
        via: CreatedVia,
    ) -> Result<String> {
        let grant = crate::document::load_grant_str(grant, "the delegated grant").map_err(|e| {
            let path = if e.path.is_empty() { "grant".to_owned() } else { format!("grant.{}", e.path) };
            Error::invalid_at(InvalidInputKind::Malformed, path, e.to_string())
        })?;
        self.delegate(parent_id, &grant, by, by_expires_at, via)
    }

    /// Revoke one delegation: `true` when this call revoked it, `false` when it already was.
    pub fn revoke(&self, delegation_id: &str, by: Option<&str>) -> Result<bool> {
        self.kernel.revoke(delegation_id, by)
    }

    /// Revoke every delegation `sweep` selects, in one write.
    pub fn revoke_sweep(&self, sweep: Sweep, by: Option<&str>) -> Result<Vec<(String, bool)>> {
        self.kernel.revoke_sweep(sweep, by)
    }

    /// One stored delegation by id.
    pub fn delegation(&self, delegation_id: &str) -> Result<Option<ListedDelegation>> {
        self.kernel.delegation(delegation_id)
    }

    /// Stored delegations in id order, revoked ones included.
    pub fn delegations(&self, after: Option<&str>, limit: usize) -> Result<Vec<ListedDelegation>> {
        self.kernel.delegations(after, limit)
    }

    /// `submit`, and when the key is AMBIGUOUS, ask `hook` once: `committed` or `not_executed`
    /// resolves it (resolver `reconcile:<action>`) and the reservation is retried once;
    /// `unknown` leaves it AMBIGUOUS and the refusal stands. [`Warden::submit_recovering`] with
    /// a reconcile hook and no wait.
    pub fn submit_reconciling(
        &self,
        request: &ActionRequest<'_>,
        hook: impl FnOnce(&str) -> ReconcileAnswer,
    ) -> Result<Permit> {
        // Without a wait the loop asks a hook at most once.
        let once = std::cell::Cell::new(Some(hook));
        let hook = |key: &str| once.take().map(|hook| hook(key)).ok_or_else(|| "asked a second time".to_owned());
        self.submit_recovering(request, &Recovery { reconcile: Some(&hook), wait: None }).1
    }

    /// The one propose-and-wait every host uses (the C ABI's `warden_propose_recovering`, so
    /// both bindings, and the MCP gateway): `submit`; when the effect is AMBIGUOUS and there is
    /// a reconcile hook, ask it once about the key (`committed`/`not_executed` resolve it as
    /// `reconcile:<action>` and the proposal runs once more; `unknown` is recorded and the
    /// AMBIGUOUS refusal stands); when an approval is required and there is a wait, wait for a
    /// human's answer by the kernel's clock and, once answered, present it in the same request
    /// (a grant is spent; a denial refuses as denied) — reconciling again if that proposal is
    /// AMBIGUOUS. A request still pending when the wait ends keeps the ApprovalRequired
    /// refusal; one that lapsed unanswered is presented too and refused `approval_expired`
    /// (never `approval_denied`), with its receipt, and the next proposal asks anew. The precondition, if the request has one, is read by the
    /// pipeline only when the policy says `approve`: when the request is made and again just
    /// before a presented approval is spent.
    ///
    /// Returns the id of the action the request became (see [`Warden::submit_naming_action`])
    /// with the outcome. A failing hook stops here with InvalidInput naming why, and nothing is
    /// resolved.
    ///
    /// With `request.trace`, the call's span is recorded there: it begins here and ends with the
    /// refusal or fault this returns, or with the permit's outcome. A trace that already
    /// recorded a call is refused (InvalidInput) and left as it was.
    pub fn submit_recovering(
        &self,
        request: &ActionRequest<'_>,
        recovery: &Recovery<'_>,
    ) -> (Option<String>, Result<Permit>) {
        let Some(trace) = &request.trace else { return self.recover(request, recovery) };
        if let Err(reused) = self.begin_trace(trace, request) {
            return (None, Err(reused));
        }
        let (action_id, outcome) = self.recover(request, recovery);
        if let Err(error) = &outcome {
            trace.end_error(self.kernel.now(), error);
        }
        (action_id, outcome)
    }

    /// Begin `request`'s call in `trace`: its tool (the name is echoed only once it is known to
    /// be within bounds), what the operator lets the span carry, the outcome mode. A trace that
    /// already recorded a call is refused.
    fn begin_trace(&self, trace: &crate::telemetry::ActionTrace, request: &ActionRequest<'_>) -> Result<()> {
        let tool = self.kernel.limits().check_name(request.name).is_ok().then_some(request.name);
        trace.begin(self.kernel.now(), tool, self.capture, self.kernel.outcomes().name())
    }

    /// `submit_recovering` without the trace's beginning and end.
    fn recover(&self, request: &ActionRequest<'_>, recovery: &Recovery<'_>) -> (Option<String>, Result<Permit>) {
        let (action_id, outcome) = self.submit_reconciled(request, recovery.reconcile);
        let (Err(Error::ApprovalRequired { request_id, .. }), Some(wait)) = (&outcome, &recovery.wait) else {
            return (action_id, outcome);
        };
        let waited_from = self.kernel.now();
        let record = match self.kernel.wait_until_answered(request_id, wait) {
            Ok(record) => record,
            Err(fault) => return (action_id, Err(fault)),
        };
        if let Some(trace) = &request.trace {
            trace.waited(self.kernel.now() - waited_from, record.as_ref());
        }
        // Still pending when the wait ended: the approval is still required. Anything else —
        // granted, denied, or lapsed unanswered — is presented, so the kernel refuses a denied
        // request as denied and a lapsed one as `approval_expired`, each with its receipt.
        let settled = record.is_some_and(|record| record.status != crate::approval::ApprovalStatus::Pending);
        if !settled {
            return (action_id, outcome);
        }
        let request_id = request_id.clone();
        let presented = ActionRequest { approval_id: Some(&request_id), ..request.clone() };
        self.submit_reconciled(&presented, recovery.reconcile)
    }

    /// `submit`, then on AMBIGUOUS the reconcile step of [`Warden::submit_recovering`].
    fn submit_reconciled(
        &self,
        request: &ActionRequest<'_>,
        reconcile: Option<&ReconcileHook<'_>>,
    ) -> (Option<String>, Result<Permit>) {
        let (action_id, outcome) = self.propose_once(request);
        let (Err(Error::Ambiguous { effect_key, .. }), Some(hook)) = (&outcome, reconcile) else {
            return (action_id, outcome);
        };
        let answer = match hook(effect_key) {
            Ok(answer) => answer,
            Err(why) => {
                return (
                    action_id,
                    Err(Error::invalid(
                        InvalidInputKind::HookFailed,
                        format!(
                        "the reconcile hook failed for {effect_key:?} ({why}); nothing was resolved, and the effect \
                         stays AMBIGUOUS"
                    ),
                    )),
                )
            }
        };
        if let Some(trace) = &request.trace {
            trace.reconciled(self.kernel.now(), effect_key, answer.as_str());
        }
        if let Err(fault) = self.kernel.reconcile(effect_key, request.name, answer) {
            return (action_id, Err(fault));
        }
        match answer {
            ReconcileAnswer::Unknown => (action_id, outcome),
            ReconcileAnswer::Committed | ReconcileAnswer::NotExecuted => self.propose_once(request),
        }
    }
}

/// A host's reconcile hook: asked about an AMBIGUOUS effect key, it answers what happened, or
/// why it could not answer (then nothing is resolved and the caller gets InvalidInput).
pub type ReconcileHook<'a> = dyn Fn(&str) -> std::result::Result<ReconcileAnswer, String> + 'a;

/// What [`Warden::submit_recovering`] may do after a first refusal.
#[derive(Default)]
pub struct Recovery<'a> {
    /// Asked once about an AMBIGUOUS effect key; `None`: the refusal stands.
    pub reconcile: Option<&'a ReconcileHook<'a>>,
    /// How long to wait for a human to answer an approval request (by the kernel's clock) and
    /// how; `None`: ApprovalRequired comes back at once.
    pub wait: Option<AnswerWait<'a>>,
}

impl std::fmt::Debug for Recovery<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recovery").field("reconcile", &self.reconcile.is_some()).field("wait", &self.wait).finish()
    }
}

/// A task name: non-empty, bounded, one plain line.
fn check_task(task: &str) -> Result<()> {
    if task.is_empty() || task.len() > MAX_TASK_BYTES || task.chars().any(char::is_control) {
        return Err(Error::invalid_at(
            InvalidInputKind::Malformed,
            "task",
            format!("a task is a non-empty name of at most {MAX_TASK_BYTES} bytes with no control characters"),
        ));
    }
    Ok(())
}
