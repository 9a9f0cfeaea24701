//! The full pipeline with the administrator's document as the trust boundary:
//! principal → authority → policy → attempt ceiling → approval gate → one write → permit.
//!
//! `Warden` pairs a loaded `Document` with a `Kernel`. The agent's influence enters only as
//! the action name, its arguments and a presented approval id; the decision, the effect key
//! template, the lease and the attempt ceiling all come from the document.

use std::path::Path;
use std::sync::Arc;

use crate::action::{Action, Principal};
use crate::authority::{self, Authority, AuthorityReason, Call, NoDelegations};
use crate::clock::{Clock, Micros, SystemClock};
use crate::decision::{Decision, Ruling};
use crate::document::{Document, Mode};
use crate::error::{Error, Result};
use crate::kernel::{resolve_environment, Kernel, KernelOptions, Outcomes, Permit, Proposal, ReconcileAnswer};
use crate::policy::{evaluate, Evaluation};
use crate::store::StoreOptions;

/// The authority axis for one action, or `None` where a grant covers it. Root grants only for
/// now: stored delegations join when the store keeps them (`NoDelegations` until then).
/// Authority runs before policy and sees every action, reads included: once a document has an
/// `authority:` section, no grant means no action.
fn authority_denial(authority: &Authority, action: &Action, now: Micros) -> Option<Ruling> {
    match authority::evaluate(authority, &Call::new(action, now), &NoDelegations) {
        Ok(result) if result.passed => None,
        Ok(result) => {
            let mut ruling = Ruling::new(Decision::Deny, result.reason.as_str());
            ruling.warnings = result.warnings;
            Some(ruling)
        }
        // A source fault decides nothing, so nothing is permitted either.
        Err(fault) => {
            let mut ruling = Ruling::new(Decision::Deny, AuthorityReason::Unreadable.as_str());
            ruling.warnings.push(fault.to_string());
            Some(ruling)
        }
    }
}

/// A notifier for `kernel`'s new approval requests, installed as its listener. The notifier
/// records its events through a weak handle, so it never keeps the store open.
pub fn notifier_for(
    kernel: &Kernel,
    webhook: Option<crate::approval::webhook::WebhookConfig>,
) -> Arc<crate::approval::notify::Notifier> {
    let notifier = Arc::new(crate::approval::notify::Notifier::new(webhook, Arc::new(kernel.downgrade())));
    let listener = Arc::clone(&notifier);
    kernel.set_approval_listener(Some(Arc::new(move |record| listener.requested(record))));
    notifier
}

/// How a `Warden` is opened.
#[derive(Debug, Clone)]
pub struct WardenOptions {
    pub clock: Arc<dyn Clock>,
    /// The environment argument; see `kernel::resolve_environment` for the order.
    pub environment: Option<String>,
    /// When outcomes are durable (`durable` unless the host chooses `deferred`).
    pub outcomes: Outcomes,
    pub store: StoreOptions,
    pub limits: crate::limits::Limits,
}

impl Default for WardenOptions {
    fn default() -> Self {
        WardenOptions {
            clock: Arc::new(SystemClock),
            environment: None,
            outcomes: Outcomes::Durable,
            store: StoreOptions::default(),
            limits: crate::limits::Limits::default(),
        }
    }
}

/// One call an agent asks for. Everything else comes from the document.
#[derive(Debug, Clone)]
pub struct ActionRequest<'a> {
    pub name: &'a str,
    pub arguments: serde_json::Value,
    /// `None`: nobody to attribute the call to; refused with no receipt.
    pub principal: Option<Principal>,
    /// When the principal's credential expires (from the host's identity provider).
    pub principal_expires_at: Option<Micros>,
    /// Used only when the document gives the action no `resource` template.
    pub resource: Option<String>,
    pub approval_id: Option<&'a str>,
    /// Overrides the document's lease for this call.
    pub lease: Option<Micros>,
    /// What the host's identity provider verified about the principal (issuer, claims); kept
    /// with an approval request so the approver sees who asked.
    pub identity: Option<crate::approval::Verified>,
    /// The state an approval depends on (`approval::precondition`).
    pub precondition: Option<crate::approval::precondition::PreconditionSource<'a>>,
}

impl<'a> ActionRequest<'a> {
    pub fn new(name: &'a str, arguments: serde_json::Value, principal: Principal) -> ActionRequest<'a> {
        ActionRequest {
            name,
            arguments,
            principal: Some(principal),
            principal_expires_at: None,
            resource: None,
            approval_id: None,
            lease: None,
            identity: None,
            precondition: None,
        }
    }
}

/// A kernel governed by one administrator's document.
#[derive(Debug, Clone)]
pub struct Warden {
    kernel: Kernel,
    document: Arc<Document>,
    /// Tells the host's hook and the document's webhook of each new approval request.
    notifier: Arc<crate::approval::notify::Notifier>,
}

impl Warden {
    /// Open `store` governed by `document`. The environment is fixed here for the handle's life.
    pub fn open(store: impl AsRef<Path>, document: Document, options: WardenOptions) -> Result<Warden> {
        let environment = resolve_environment(options.environment.as_deref(), document.environment.as_deref());
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
        let webhook = document.notify.as_ref().and_then(|notify| notify.webhook.clone());
        let notifier = notifier_for(&kernel, webhook);
        Ok(Warden { kernel, document: Arc::new(document), notifier })
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

    pub fn kernel(&self) -> &Kernel {
        &self.kernel
    }

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
        let limits = self.kernel.limits();
        // Before anything echoes the name.
        limits.check_name(request.name)?;
        let Some(principal) = request.principal.clone() else {
            // Nobody to attribute it to: refused, and no receipt names a stranger.
            return Err(Error::Denied {
                reason: "no_principal".into(),
                detail: format!("{} was proposed with no principal; set the agent (and user) first", request.name),
            });
        };
        let entry = self.document.actions.get(request.name);
        let arguments = match &request.arguments {
            serde_json::Value::Object(map) => map,
            _ => return Err(Error::InvalidInput("arguments must be a JSON object".into())),
        };
        let resource = match entry.and_then(|e| e.resource.as_ref()) {
            Some(template) => {
                Some(template.render_resource(arguments).map_err(|e| Error::InvalidInput(e.to_string()))?)
            }
            None => request.resource.clone(),
        };
        let environment = self.kernel.environment().to_owned();
        let action = Action::new(request.name, request.arguments.clone(), principal, resource.as_deref(), &environment)
            .map_err(|e| Error::InvalidInput(e.to_string()))?;
        let arguments = crate::canonical::to_canonical_string(&action.canonical_arguments(), "arguments")
            .map_err(|e| Error::InvalidInput(e.to_string()))?;
        limits.check_arguments(arguments.len())?;
        let ruling = self.rule(request, &action);
        let mut proposal = Proposal::new(&action, ruling);
        proposal.effect = entry.and_then(|e| e.effect.as_ref());
        proposal.max_attempts = entry.and_then(|e| e.max_attempts);
        proposal.lease = request.lease.or_else(|| entry.and_then(|e| e.lease));
        proposal.approval_id = request.approval_id;
        proposal.observe = self.document.mode == Mode::Observe;
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
    fn rule(&self, request: &ActionRequest<'_>, action: &Action) -> Ruling {
        if request.principal_expires_at.is_some_and(|at| at < self.kernel.now()) {
            return Ruling::new(Decision::Deny, "principal_expired");
        }
        if let Some(authority) = &self.document.authority_config {
            if let Some(denied) = authority_denial(authority, action, self.kernel.now()) {
                return denied;
            }
        }
        let evaluation = evaluate(&self.document, &action.name, &action.arguments);
        let mut ruling = evaluation.ruling;
        ruling.warnings.extend(evaluation.warnings);
        ruling
    }

    /// `submit`, and when the key is AMBIGUOUS, ask `hook` once: `committed` or `not_executed`
    /// resolves it (resolver `reconcile:<action>`) and the reservation is retried once;
    /// `unknown` leaves it AMBIGUOUS and the refusal stands.
    pub fn submit_reconciling(
        &self,
        request: &ActionRequest<'_>,
        hook: impl FnOnce(&str) -> ReconcileAnswer,
    ) -> Result<Permit> {
        match self.submit(request) {
            Err(Error::Ambiguous { effect_key, action_id, detail }) => {
                let answer = hook(&effect_key);
                self.kernel.reconcile(&effect_key, request.name, answer)?;
                match answer {
                    ReconcileAnswer::Unknown => Err(Error::Ambiguous { effect_key, action_id, detail }),
                    ReconcileAnswer::Committed | ReconcileAnswer::NotExecuted => self.submit(request),
                }
            }
            other => other,
        }
    }
}
