//! G8 (expired authority refused) and G9 (a delegation cannot escalate), on a scratch
//! `authority:` section over one of the document's allowed actions: verify cannot act as the
//! operator's own principals, so it grants its own principal that action, in a copy of the
//! document, in the scratch store. What is shown is the kernel's handling of expiry and
//! containment, whatever grants the live document holds.

use serde_json::{Map, Value};

use crate::action::Principal;
use crate::authority::{Authority, Budget, CreatedVia, Dimension, Grant, Subject};
use crate::clock::{Clock, ManualClock, Micros, MICROS_PER_SECOND};
use crate::document::Document;
use crate::error::{Error, InvalidInputKind, Result};
use crate::pipeline::{ActionRequest, Warden, WardenOptions};

use super::names::{AGENT, USER};
use super::outcome::{fail, not_applicable, pass, refused, Outcome};
use super::scenarios::Ctx;
use super::synthesis::Case;

/// What verify cannot see about a document's own grants.
pub(super) const GRANTS_BLIND_SPOT: &str = "the document's own grants: verify cannot act as your principals, so the \
     policy guarantees ran with a scratch root grant giving verify's own principal every action, and G8 and G9 ran \
     on a scratch authority section; whether your grants give the right principals the right actions is yours to \
     review (`warden decide`, `warden delegations`)";

/// The root grant the policy scenarios run under when the document has an `authority:` section.
const VERIFY_GRANT: &str = "warden-verify";

/// The agent a delegation is handed to.
const DELEGATE: &str = "warden-verify-delegate";
const HOUR: Micros = 3600 * MICROS_PER_SECOND;
/// The argument the scratch constraints test; no document rule reads it (checked per case).
const CONSTRAINED: &str = "warden_verify_amount";

fn subject(agent: &str) -> Subject {
    Subject { agent: Some(agent.to_owned()), user: Some(USER.to_owned()) }
}

fn grant(id: &str, agent: &str, action: &str, expires_at: Micros) -> Grant {
    Grant {
        id: id.to_owned(),
        subject: subject(agent),
        actions: vec![action.to_owned()],
        resources: None,
        constraints: Vec::new(),
        environments: None,
        expires_at: Some(expires_at),
        delegable: true,
        tasks: None,
        budgets: None,
    }
}

fn constraint(limit: i64) -> Result<Vec<crate::condition::Condition>> {
    let mut map = Map::new();
    map.insert(format!("{CONSTRAINED}_lte"), Value::from(limit));
    crate::document::conditions_from_json(&map).map_err(|message| Error::invalid(InvalidInputKind::Malformed, message))
}

/// `document`, plus (when it has an `authority:` section) a root grant for verify's principal
/// over every action, so the policy scenarios are not all refused `no_authority`.
pub(super) fn with_verify_grant(document: &Document) -> Result<Document> {
    let Some(authority) = &document.authority_config else { return Ok(document.clone()) };
    let mut grants: Vec<Grant> = authority.grants.values().cloned().collect();
    let mut id = VERIFY_GRANT.to_owned();
    while authority.grants.contains_key(&id) {
        id.push('_');
    }
    grants.push(Grant {
        id,
        subject: subject(AGENT),
        actions: vec!["**".to_owned()],
        resources: None,
        constraints: Vec::new(),
        environments: None,
        expires_at: None,
        delegable: false,
        tasks: None,
        budgets: None,
    });
    let mut copy = document.clone();
    copy.authority_config = Some(
        Authority::new(grants, authority.max_delegation_depth)
            .map_err(|message| Error::invalid(InvalidInputKind::Malformed, message))?,
    );
    Ok(copy)
}

/// The document with its `authority:` section replaced by `grants`.
fn scratch_document(document: &Document, grants: Vec<Grant>) -> Result<Document> {
    let mut copy = document.clone();
    copy.authority_config =
        Some(Authority::new(grants, 3).map_err(|message| Error::invalid(InvalidInputKind::Malformed, message))?);
    Ok(copy)
}

fn open(ctx: &Ctx<'_>, store: &str, document: Document, clock: &ManualClock) -> Result<Warden> {
    Warden::open(
        ctx.scratch.store(store)?,
        document,
        WardenOptions {
            clock: std::sync::Arc::new(clock.clone()),
            environment: Some(ctx.environment.clone()),
            ..WardenOptions::default()
        },
    )
}

/// An allowed case whose rule does not read the scratch constraint's argument.
fn allowed_case<'c, 'd>(ctx: &'c Ctx<'d>) -> Option<&'c Case<'d>> {
    ctx.allowed().filter(|case| case.conditions().iter().all(|c| c.subject != CONSTRAINED))
}

fn request<'a>(ctx: &Ctx<'_>, case: &Case<'a>, tag: &str, agent: &str) -> Result<ActionRequest<'a>> {
    let call = case.call(ctx.document, tag)?;
    let principal = Principal::new(agent, Some(USER))?;
    let mut request = ActionRequest::new(case.action, Value::Object(call.arguments), principal);
    request.resource = call.resource;
    Ok(request)
}

/// `Ok(())` when the call got a permit (committed); `Err(why)` otherwise.
fn runs(warden: &Warden, request: &ActionRequest<'_>, what: &str) -> Result<std::result::Result<(), String>> {
    match warden.submit(request) {
        Ok(permit) => {
            permit.commit(&serde_json::json!({"warden_verify": what}))?;
            Ok(Ok(()))
        }
        Err(error) => Ok(Err(format!("{what}: {}", refused(&error)))),
    }
}

/// `Ok(())` when the call was refused `authority_expired`.
fn expired(warden: &Warden, request: &ActionRequest<'_>, what: &str) -> Result<std::result::Result<(), String>> {
    match warden.submit(request) {
        Ok(permit) => {
            permit.not_executed("warden verify: never executed")?;
            Ok(Err(format!("{what}: got a permit one microsecond after the expiry")))
        }
        Err(error) if error.reason() == "authority_expired" => Ok(Ok(())),
        Err(error) => {
            Ok(Err(format!("{what}: was refused for {} instead of authority_expired: {error}", error.reason())))
        }
    }
}

/// G8: a grant (root, and delegated) is valid at its expiry instant and refused one
/// microsecond later, `authority_expired`.
pub(super) fn g8_expired_authority(ctx: &Ctx<'_>) -> Result<Outcome> {
    let Some(case) = allowed_case(ctx) else {
        return not_applicable("the document allows no action, so no grant can be shown to expire");
    };
    let start = ctx.clock.now();
    let root_expiry = start + 24 * HOUR;
    let child_expiry = root_expiry - HOUR;
    let document =
        scratch_document(ctx.document, vec![grant("warden-verify-expiring", AGENT, case.action, root_expiry)])?;
    let clock = ManualClock::new(start);
    let warden = open(ctx, "g8", document, &clock)?;
    let child = Grant { id: String::new(), delegable: false, ..grant("", DELEGATE, case.action, child_expiry) };
    warden.delegate("warden-verify-expiring", &child, &ctx.principal, None, CreatedVia::Api)?;
    clock.set(child_expiry);
    if let Err(why) =
        runs(&warden, &request(ctx, case, "g8-child-at", DELEGATE)?, "the delegation at its expiry instant")?
    {
        return fail(why);
    }
    clock.set(child_expiry + 1);
    if let Err(why) = expired(&warden, &request(ctx, case, "g8-child-after", DELEGATE)?, "the delegation")? {
        return fail(why);
    }
    clock.set(root_expiry);
    if let Err(why) = runs(&warden, &request(ctx, case, "g8-root-at", AGENT)?, "the root grant at its expiry instant")?
    {
        return fail(why);
    }
    clock.set(root_expiry + 1);
    if let Err(why) = expired(&warden, &request(ctx, case, "g8-root-after", AGENT)?, "the root grant")? {
        return fail(why);
    }
    pass(format!(
        "{}: a root grant and a delegation of it each authorised the call at their expiry instant and were \
         refused (authority_expired) one microsecond later (scratch authority section)",
        case.label()
    ))
}

/// The contained child every G9 row changes in exactly one dimension.
fn contained_child(ctx: &Ctx<'_>, action: &str, root_expiry: Micros) -> Result<Grant> {
    Ok(Grant {
        id: String::new(),
        subject: subject(DELEGATE),
        actions: vec![action.to_owned()],
        resources: Some(vec!["verify:1".to_owned()]),
        constraints: constraint(500)?,
        environments: Some(vec![ctx.environment.clone()]),
        expires_at: Some(root_expiry - HOUR),
        delegable: false,
        tasks: Some(vec!["verify:1".to_owned()]),
        budgets: Some(vec![Budget { metric: "count".into(), limit: 5, window_seconds: 2 * 86_400 }]),
    })
}

/// Each row: what was changed, the child, and the dimension it must be refused on.
fn escalations(base: &Grant, root_expiry: Micros) -> Result<Vec<(&'static str, Grant, Dimension)>> {
    let with = |change: &dyn Fn(&mut Grant)| {
        let mut child = base.clone();
        change(&mut child);
        child
    };
    let mut rows = vec![
        ("a wildcard grantee", with(&|g| g.subject.agent = Some("*".into())), Dimension::Subject),
        ("the user dropped", with(&|g| g.subject.user = None), Dimension::Subject),
        ("another action", with(&|g| g.actions.push("warden.verify.other".into())), Dimension::Actions),
        ("a wider resource", with(&|g| g.resources = Some(vec!["other:1".into()])), Dimension::Resources),
        ("resources omitted", with(&|g| g.resources = None), Dimension::Resources),
        ("constraints omitted", with(&|g| g.constraints = Vec::new()), Dimension::Constraints),
        (
            "another environment",
            with(&|g| g.environments = Some(vec!["warden-verify-elsewhere".into()])),
            Dimension::Environments,
        ),
        ("environments omitted", with(&|g| g.environments = None), Dimension::Environments),
        ("a later expiry", with(&|g| g.expires_at = Some(root_expiry + 1)), Dimension::ExpiresAt),
        ("expiry omitted", with(&|g| g.expires_at = None), Dimension::ExpiresAt),
        ("a wider task", with(&|g| g.tasks = Some(vec!["other:1".into()])), Dimension::Tasks),
        ("tasks omitted", with(&|g| g.tasks = None), Dimension::Tasks),
        (
            "a higher budget limit",
            with(&|g| g.budgets = Some(vec![Budget { metric: "count".into(), limit: 11, window_seconds: 86_400 }])),
            Dimension::Budgets,
        ),
        (
            "a shorter budget window",
            with(&|g| g.budgets = Some(vec![Budget { metric: "count".into(), limit: 10, window_seconds: 3600 }])),
            Dimension::Budgets,
        ),
        ("budgets omitted", with(&|g| g.budgets = None), Dimension::Budgets),
    ];
    let mut wider = base.clone();
    wider.constraints = constraint(5000)?;
    rows.push(("a wider constraint", wider, Dimension::Constraints));
    Ok(rows)
}

/// G9: a delegation that widens or omits any dimension of its parent is refused at creation
/// with that dimension; the contained child the rows are made from is accepted, and a contained
/// delegation authorises a call.
pub(super) fn g9_no_escalation(ctx: &Ctx<'_>) -> Result<Outcome> {
    let Some(case) = allowed_case(ctx) else {
        return not_applicable("the document allows no action, so no delegation can be shown to authorise one");
    };
    let start = ctx.clock.now();
    let root_expiry = start + 24 * HOUR;
    let full = Grant {
        resources: Some(vec!["verify:*".into()]),
        constraints: constraint(1000)?,
        environments: Some(vec![ctx.environment.clone()]),
        tasks: Some(vec!["verify:*".into()]),
        budgets: Some(vec![Budget { metric: "count".into(), limit: 10, window_seconds: 86_400 }]),
        ..grant("warden-verify-full", AGENT, case.action, root_expiry)
    };
    let control_root = grant("warden-verify-root", AGENT, case.action, root_expiry);
    let document = scratch_document(ctx.document, vec![full, control_root])?;
    let clock = ManualClock::new(start);
    let warden = open(ctx, "g9", document, &clock)?;
    let base = contained_child(ctx, case.action, root_expiry)?;
    let rows = escalations(&base, root_expiry)?;
    for (what, child, dimension) in &rows {
        match warden.delegate("warden-verify-full", child, &ctx.principal, None, CreatedVia::Api) {
            Ok(id) => return fail(format!("a child with {what} was created ({id}); it widens its parent")),
            Err(Error::DelegationRefused { reason, dimension: got, .. })
                if reason == "containment" && got.as_deref() == Some(dimension.as_str()) => {}
            Err(error) => {
                return fail(format!(
                    "a child with {what} was refused for {} instead of containment on {dimension}: {error}",
                    error.reason()
                ))
            }
        }
    }
    if let Err(error) = warden.delegate("warden-verify-full", &base, &ctx.principal, None, CreatedVia::Api) {
        return fail(format!("control failed: the contained child the rows are made from {}", refused(&error)));
    }
    let child = Grant { id: String::new(), delegable: false, ..grant("", DELEGATE, case.action, root_expiry - HOUR) };
    warden.delegate("warden-verify-root", &child, &ctx.principal, None, CreatedVia::Api)?;
    if let Err(why) = runs(&warden, &request(ctx, case, "g9-control", DELEGATE)?, "the contained delegation's call")? {
        return fail(format!("control failed: {why}"));
    }
    pass(format!(
        "{} children that widen or omit one dimension of their parent (subject, actions, resources, constraints, \
         environments, expires_at, tasks, budgets) were refused on that dimension; control: the contained child was \
         accepted, and a contained delegation authorised {} (scratch authority section)",
        rows.len(),
        case.label()
    ))
}
