//! The scenarios of G1–G3 and G5–G14: each refusal beside the positive control that must
//! succeed on the same path.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::names::{APPROVER, APPROVER_AGENT, MUTATION_KEY, UNKNOWN_ACTION};
use super::outcome::{fail, not_applicable, pass, refused, Outcome};
use super::scratch::Scratch;
use super::synthesis::{Call, Case};
use crate::action::Principal;
use crate::canonical::Floats;
use crate::clock::ManualClock;
use crate::decision::Decision;
use crate::document::Document;
use crate::effect::EffectState;
use crate::error::{Error, InvalidInputKind, Result, StoreFaultKind};
use crate::kernel::Kernel;
use crate::pipeline::{ActionRequest, Warden, WardenOptions};

pub(super) struct Ctx<'d> {
    pub(super) document: &'d Document,
    /// What the scratch kernels are governed by: the document, with a root grant for verify's
    /// own principal when it has an `authority:` section (the policy guarantees are about the
    /// policy; G8 and G9 show authority).
    pub(super) governed: Document,
    pub(super) scratch: Scratch,
    pub(super) clock: ManualClock,
    pub(super) environment: String,
    pub(super) principal: Principal,
    pub(super) cases: Vec<Case<'d>>,
}

impl<'d> Ctx<'d> {
    /// A kernel under the document on its own scratch store file, so no scenario sees another's keys.
    pub(super) fn warden(&self, store: &str) -> Result<Warden> {
        Warden::open(
            self.scratch.store(store)?,
            self.governed.clone(),
            WardenOptions {
                clock: Arc::new(self.clock.clone()),
                environment: Some(self.environment.clone()),
                ..WardenOptions::default()
            },
        )
    }

    pub(super) fn request<'a>(&self, name: &'a str, call: &Call) -> ActionRequest<'a> {
        let mut request = ActionRequest::new(name, Value::Object(call.arguments.clone()), self.principal.clone());
        request.resource = call.resource.clone();
        request
    }

    fn cases_where(&self, keep: impl Fn(&Case<'d>) -> bool) -> Vec<&Case<'d>> {
        self.cases.iter().filter(|case| keep(case)).collect()
    }

    /// An allowed action with an effect template, preferring one whose key two scenarios do not share.
    pub(super) fn allowed_effect(&self) -> Option<&Case<'d>> {
        let allowed = self.cases_where(|c| c.decision == Decision::Allow && c.entry.effect.is_some());
        allowed.iter().find(|c| c.fresh_keys).or(allowed.first()).copied()
    }

    pub(super) fn allowed(&self) -> Option<&Case<'d>> {
        self.allowed_effect().or_else(|| self.cases_where(|c| c.decision == Decision::Allow).first().copied())
    }

    fn approvable(&self) -> Vec<&Case<'d>> {
        self.cases_where(|c| c.decision == Decision::Approve)
    }

    fn has_approve_rule(&self) -> bool {
        self.document.actions.values().any(|entry| {
            entry.decision == Some(Decision::Approve) || entry.rules.iter().any(|r| r.decision == Decision::Approve)
        })
    }

    pub(super) fn unknown_action(&self) -> String {
        let mut name = UNKNOWN_ACTION.to_owned();
        while self.document.actions.contains_key(&name) {
            name.push('_');
        }
        name
    }
}

const NO_APPROVE_RULE: &str = "the document has no approve rule";
pub(super) const NO_ALLOWED_EFFECT: &str = "the document allows no action with an effect template";

fn no_approve_case(ctx: &Ctx<'_>) -> Result<Outcome> {
    if ctx.has_approve_rule() {
        not_applicable("no synthesized arguments reach the document's approve rule(s); see `verify cannot see`")
    } else {
        not_applicable(NO_APPROVE_RULE)
    }
}

/// Ask for approval of `request` and grant it as other people, as many and with the roles
/// the rule requires (verified approvers, so an M-of-N rule is met); the approval id.
fn approved(warden: &Warden, request: &ActionRequest<'_>) -> Result<std::result::Result<String, String>> {
    match warden.submit(request) {
        Err(Error::ApprovalRequired { request_id, .. }) => {
            grant_fully(warden.kernel(), &request_id)?;
            Ok(Ok(request_id))
        }
        Ok(permit) => {
            permit.not_executed("warden verify: never executed")?;
            Ok(Err("got a permit without any approval".into()))
        }
        Err(error) => Ok(Err(format!("was refused ({}) instead of asking for approval: {error}", error.reason()))),
    }
}

/// Grant `approval_id` with as many distinct verified approvers, holding its roles, as it
/// requires.
fn grant_fully(kernel: &Kernel, approval_id: &str) -> Result<()> {
    let record = kernel
        .approval(approval_id)?
        .ok_or_else(|| Error::NotFound(format!("the approval request {approval_id} vanished")))?;
    let claims = serde_json::json!({"roles": record.requirement.roles});
    let verified = crate::approval::Verified::new(Some("warden verify"), &claims)
        .map_err(|message| Error::invalid(InvalidInputKind::Malformed, message))?;
    for n in 0..record.requirement.required {
        let principal = Principal::new(APPROVER_AGENT, Some(&format!("{APPROVER}-{n}")))?;
        let approver = crate::approval::Approver::verified(principal, verified.clone());
        kernel.answer(approval_id, &approver, None, true, None, None)?;
    }
    Ok(())
}

/// An argument name the entry neither tests nor renders, so adding it keeps the same rule.
fn mutation_key(case: &Case<'_>, arguments: &Map<String, Value>) -> String {
    let used = |name: &str| {
        arguments.contains_key(name)
            || case.entry.rules.iter().flat_map(|r| &r.when).any(|c| c.subject == name)
            || case.entry.effect.as_ref().is_some_and(|t| t.placeholders().contains(&name))
            || case.entry.resource.as_ref().is_some_and(|t| t.placeholders().contains(&name))
    };
    let mut key = MUTATION_KEY.to_owned();
    while used(&key) {
        key.push('_');
    }
    key
}

pub(super) fn g1_mutated_approval(ctx: &Ctx<'_>) -> Result<Outcome> {
    let mut chosen = None;
    for case in ctx.approvable() {
        let call = case.call(ctx.document, "g1")?;
        let key = mutation_key(case, &call.arguments);
        let mut mutated = call.clone();
        mutated.arguments.insert(key.clone(), Value::from(1));
        let ruling = crate::policy::evaluate(ctx.document, case.action, &mutated.arguments).ruling;
        if ruling.decision == case.decision && ruling.reason == case.reason {
            chosen = Some((case, call, mutated, key));
            break;
        }
    }
    let Some((case, call, mutated, key)) = chosen else {
        if ctx.approvable().is_empty() {
            return no_approve_case(ctx);
        }
        return not_applicable("no approve rule keeps its decision when an argument it does not test is added");
    };
    let warden = ctx.warden("g1")?;
    let request = ctx.request(case.action, &call);
    let approval = match approved(&warden, &request)? {
        Ok(id) => id,
        Err(why) => return fail(format!("{}: the action {why}", case.label())),
    };
    let mut altered = ctx.request(case.action, &mutated);
    altered.approval_id = Some(&approval);
    #[cfg(test)]
    if broken_build::REBIND_G1.with(std::cell::Cell::get) {
        broken_build::rebind(&warden, &approval, &altered)?;
    }
    let refusal = match warden.submit(&altered) {
        Ok(permit) => {
            permit.not_executed("warden verify: never executed")?;
            return fail(format!(
                "{}: a copy mutated with {key:?} got a permit with the approval granted for the original action",
                case.label()
            ));
        }
        Err(error) => error,
    };
    if refusal.reason() != "mismatch" {
        return fail(format!(
            "{}: the mutated copy was refused for {} instead of mismatch: {refusal}",
            case.label(),
            refusal.reason()
        ));
    }
    let mut exact = ctx.request(case.action, &call);
    exact.approval_id = Some(&approval);
    match warden.submit(&exact) {
        Ok(permit) => permit.commit(&serde_json::json!({"warden_verify": "G1 control"}))?,
        Err(error) => {
            return fail(format!(
                "{}: control failed: the exact approved action was refused ({}): {error}",
                case.label(),
                error.reason()
            ))
        }
    }
    pass(format!(
        "{}: a copy with {key:?} added was refused (mismatch); control: the exact approved action got a permit",
        case.label()
    ))
}

pub(super) fn g2_replayed_approval(ctx: &Ctx<'_>) -> Result<Outcome> {
    let Some(case) = ctx.approvable().first().copied() else { return no_approve_case(ctx) };
    let warden = ctx.warden("g2")?;
    let call = case.call(ctx.document, "g2")?;
    let request = ctx.request(case.action, &call);
    let approval = match approved(&warden, &request)? {
        Ok(id) => id,
        Err(why) => return fail(format!("{}: the action {why}", case.label())),
    };
    let mut with_approval = ctx.request(case.action, &call);
    with_approval.approval_id = Some(&approval);
    match warden.submit(&with_approval) {
        Ok(permit) => permit.commit(&serde_json::json!({"warden_verify": "G2 control"}))?,
        Err(error) => {
            return fail(format!(
                "{}: control failed: the first use of the approval was refused ({}): {error}",
                case.label(),
                error.reason()
            ))
        }
    }
    match warden.submit(&with_approval) {
        Ok(permit) => {
            permit.not_executed("warden verify: never executed")?;
            fail(format!("{}: the spent approval got a second permit", case.label()))
        }
        Err(error) if error.reason() == "consumed" => pass(format!(
            "{}: presenting the spent approval again was refused (consumed); control: its first use got a permit",
            case.label()
        )),
        Err(error) => fail(format!(
            "{}: the replay was refused for {} instead of consumed: {error}",
            case.label(),
            error.reason()
        )),
    }
}

pub(super) fn g3_duplicate_effect(ctx: &Ctx<'_>) -> Result<Outcome> {
    let Some(case) = ctx.allowed_effect() else { return not_applicable(NO_ALLOWED_EFFECT) };
    let warden = ctx.warden("g3")?;
    let call = case.call(ctx.document, "g3")?;
    let request = ctx.request(case.action, &call);
    match warden.submit(&request) {
        Ok(permit) => permit.commit(&serde_json::json!({"warden_verify": "G3 first"}))?,
        Err(error) => return fail(format!("{}: control failed: the first call {}", case.label(), refused(&error))),
    }
    let second = warden.submit(&request);
    let key = call.effect_key.clone().unwrap_or_default();
    match second {
        Ok(permit) => {
            permit.not_executed("warden verify: never executed")?;
            return fail(format!("{}: a second call for the committed effect {key:?} got a permit", case.label()));
        }
        Err(error) if error.reason() == "duplicate" => {}
        Err(error) => {
            return fail(format!(
                "{}: the second call was refused for {} instead of duplicate: {error}",
                case.label(),
                error.reason()
            ))
        }
    }
    let control = if case.fresh_keys {
        let other = case.call(ctx.document, "g3-control")?;
        match warden.submit(&ctx.request(case.action, &other)) {
            Ok(permit) => permit.commit(&serde_json::json!({"warden_verify": "G3 control"}))?,
            Err(error) => {
                return fail(format!(
                    "{}: control failed: a call for another effect key {}",
                    case.label(),
                    refused(&error)
                ))
            }
        }
        "the first call and a call for another key got permits"
    } else {
        "the first call got a permit (the rule fixes every placeholder, so there is no other key)"
    };
    pass(format!("{}: a second call for {key:?} was refused (duplicate); control: {control}", case.label()))
}

/// Permit → not executed → FAILED, then a retry is admitted (or stopped only by a ceiling of 1).
fn not_executed_control(ctx: &Ctx<'_>, case: &Case<'_>, store: &str) -> Result<std::result::Result<String, String>> {
    let warden = ctx.warden(store)?;
    let call = case.call(ctx.document, store)?;
    let request = ctx.request(case.action, &call);
    match warden.submit(&request) {
        Ok(permit) => permit.not_executed("warden verify: declined before anything was sent")?,
        Err(error) => return Ok(Err(format!("the first call {}", refused(&error)))),
    }
    let key = call.effect_key.clone().unwrap_or_default();
    let state = warden.kernel().effect(&key)?.map(|r| r.state);
    if state != Some(EffectState::Failed) {
        return Ok(Err(format!("not_executed left {key:?} {}, not failed", state.map_or("absent", |s| s.as_str()))));
    }
    let retry = warden.submit(&request);
    match (retry, case.entry.max_attempts) {
        (Ok(permit), _) => {
            let attempt = permit.attempt();
            permit.commit(&serde_json::json!({"warden_verify": "retry"}))?;
            Ok(Ok(format!("not_executed gave FAILED and a retry was admitted (attempt {attempt})")))
        }
        (Err(error), Some(1)) if error.reason() == "attempt_ceiling" => Ok(Ok(
            "not_executed gave FAILED and the retry met only the document's max_attempts of 1 (attempt_ceiling), \
             not ambiguous"
                .into(),
        )),
        (Err(error), _) => Ok(Err(format!("the retry after not_executed {}", refused(&error)))),
    }
}

pub(super) fn g5_ambiguous_blocks_retry(ctx: &Ctx<'_>) -> Result<Outcome> {
    let Some(case) = ctx.allowed_effect() else { return not_applicable(NO_ALLOWED_EFFECT) };
    let warden = ctx.warden("g5")?;
    let call = case.call(ctx.document, "g5")?;
    let request = ctx.request(case.action, &call);
    match warden.submit(&request) {
        Ok(permit) => permit.ambiguous("warden verify: the executor timed out")?,
        Err(error) => return fail(format!("{}: the first call {}", case.label(), refused(&error))),
    }
    let key = call.effect_key.clone().unwrap_or_default();
    let state = warden.kernel().effect(&key)?.map(|r| r.state);
    if state != Some(EffectState::Ambiguous) {
        return fail(format!(
            "{}: an ambiguous outcome left {key:?} {}",
            case.label(),
            state.map_or("absent", |s| s.as_str())
        ));
    }
    match warden.submit(&request) {
        Ok(permit) => {
            permit.not_executed("warden verify: never executed")?;
            return fail(format!("{}: a blind retry of the ambiguous {key:?} got a permit", case.label()));
        }
        Err(error) if error.reason() == "ambiguous" => {}
        Err(error) => {
            return fail(format!(
                "{}: the blind retry was refused for {} instead of ambiguous: {error}",
                case.label(),
                error.reason()
            ))
        }
    }
    match not_executed_control(ctx, case, "g5-control")? {
        Ok(control) => pass(format!(
            "{}: after an ambiguous outcome a blind retry was refused (ambiguous); control: {control}",
            case.label()
        )),
        Err(why) => fail(format!("{}: control failed: {why}", case.label())),
    }
}

pub(super) fn g10_unknown_error(ctx: &Ctx<'_>) -> Result<Outcome> {
    let Some(case) = ctx.allowed_effect() else { return not_applicable(NO_ALLOWED_EFFECT) };
    let warden = ctx.warden("g10")?;
    let call = case.call(ctx.document, "g10")?;
    let request = ctx.request(case.action, &call);
    match warden.submit(&request) {
        // The executor failed in a way nobody classified: the permit is dropped with no outcome.
        Ok(permit) => drop(permit),
        Err(error) => return fail(format!("{}: the first call {}", case.label(), refused(&error))),
    }
    let key = call.effect_key.clone().unwrap_or_default();
    let state = warden.kernel().effect(&key)?.map(|r| r.state);
    if state != Some(EffectState::Ambiguous) {
        return fail(format!(
            "{}: a permit dropped without an outcome left {key:?} {}, not ambiguous",
            case.label(),
            state.map_or("absent", |s| s.as_str())
        ));
    }
    match warden.submit(&request) {
        Ok(permit) => {
            permit.not_executed("warden verify: never executed")?;
            return fail(format!("{}: a retry after an unknown error got a permit", case.label()));
        }
        Err(error) if error.reason() == "ambiguous" => {}
        Err(error) => {
            return fail(format!(
                "{}: the retry was refused for {} instead of ambiguous: {error}",
                case.label(),
                error.reason()
            ))
        }
    }
    match not_executed_control(ctx, case, "g10-control")? {
        Ok(control) => pass(format!(
            "{}: a permit dropped without an outcome left the effect AMBIGUOUS and a retry was refused (ambiguous); \
             control: {control}",
            case.label()
        )),
        Err(why) => fail(format!("{}: control failed: {why}", case.label())),
    }
}

pub(super) fn g6_unknown_action(ctx: &Ctx<'_>) -> Result<Outcome> {
    let warden = ctx.warden("g6")?;
    let name = ctx.unknown_action();
    let unknown = Call { arguments: Map::new(), resource: None, effect_key: None };
    match warden.submit(&ctx.request(&name, &unknown)) {
        Ok(permit) => {
            permit.not_executed("warden verify: never executed")?;
            return fail(format!("{name:?}, which the document does not list, got a permit"));
        }
        Err(error) if error.reason() == "unknown_action" => {}
        Err(error) => {
            return fail(format!("{name:?} was refused for {} instead of unknown_action: {error}", error.reason()))
        }
    }
    let Some(case) = ctx.allowed() else {
        return not_applicable(
            "the document allows no action, so the control (an allowed action gets a permit) cannot run",
        );
    };
    let call = case.call(ctx.document, "g6")?;
    match warden.submit(&ctx.request(case.action, &call)) {
        Ok(permit) => permit.commit(&serde_json::json!({"warden_verify": "G6 control"}))?,
        Err(error) => return fail(format!("{}: control failed: the allowed action {}", case.label(), refused(&error))),
    }
    pass(format!("{name:?} was refused (unknown_action); control: the allowed {} got a permit", case.label()))
}

pub(super) fn g7_no_principal(ctx: &Ctx<'_>) -> Result<Outcome> {
    let warden = ctx.warden("g7")?;
    // An action whose call with a principal leaves a receipt: allowed, else denied, else unknown.
    let case = ctx.allowed().or_else(|| ctx.cases_where(|c| c.decision == Decision::Deny).first().copied());
    let unknown = ctx.unknown_action();
    let (name, call, label) = match case {
        Some(case) => (case.action, case.call(ctx.document, "g7")?, case.label()),
        None => (
            unknown.as_str(),
            Call { arguments: Map::new(), resource: None, effect_key: None },
            format!("{unknown} (unlisted)"),
        ),
    };
    let store = warden.kernel();
    let evidence = || -> Result<(u64, usize)> { Ok((store.receipt_count()?, store.events(0, usize::MAX)?.len())) };
    let before = evidence()?;
    let mut anonymous = ctx.request(name, &call);
    anonymous.principal = None;
    match warden.submit(&anonymous) {
        Ok(permit) => {
            permit.not_executed("warden verify: never executed")?;
            return fail(format!("{label}: a call with no principal got a permit"));
        }
        Err(error) if error.reason() == "no_principal" => {}
        Err(error) => {
            return fail(format!(
                "{label}: the call with no principal was refused for {} instead: {error}",
                error.reason()
            ))
        }
    }
    let after = evidence()?;
    if after != before {
        return fail(format!(
            "{label}: the call with no principal was refused but left {} receipt(s) and {} event(s)",
            after.0.saturating_sub(before.0),
            after.1.saturating_sub(before.1)
        ));
    }
    // A denied call leaves its receipt too; an allowed one leaves it on its outcome.
    if let Ok(permit) = warden.submit(&ctx.request(name, &call)) {
        permit.commit(&serde_json::json!({"warden_verify": "G7 control"}))?;
    }
    let receipts = store.receipt_count()?;
    if receipts <= after.0 {
        return fail(format!("{label}: control failed: the same call with a principal wrote no receipt"));
    }
    pass(format!(
        "{label}: a call with no principal was refused (no_principal) with no receipt and no event; \
         control: with a principal it wrote a receipt"
    ))
}

pub(super) fn g11_altered_receipt(ctx: &Ctx<'_>) -> Result<Outcome> {
    let warden = ctx.warden("g11")?;
    write_receipts(ctx, &warden, "g11", 2)?;
    let kernel = warden.kernel();
    let untouched = kernel.verify_chain()?;
    if !untouched.ok || untouched.chained < 2 {
        return fail(format!(
            "control failed: the untouched chain of {} receipt(s) did not verify ({:?})",
            untouched.chained,
            untouched.breaks.iter().map(|b| b.name).collect::<Vec<_>>()
        ));
    }
    kernel.store().edit_receipt(1, |row| {
        let mut document = crate::canonical::parse_json(&row.document)?;
        let Some(fields) = document.as_object_mut() else {
            return Err(Error::invalid(InvalidInputKind::Malformed, "receipt 1 is not a JSON object"));
        };
        fields.insert("decision_reason".into(), Value::String("edited-by-warden-verify".into()));
        row.document = crate::canonical::to_canonical_string_with(&document, "receipt", Floats::ADMITTED)?;
        Ok(())
    })?;
    let altered = kernel.verify_chain()?;
    let detected = altered.breaks.iter().any(|b| b.name == "content_altered" && b.seq == Some(1));
    if altered.ok || !detected {
        return fail(format!(
            "receipt 1 was edited in place and verify_chain reported {:?} (ok: {})",
            altered.breaks.iter().map(|b| b.name).collect::<Vec<_>>(),
            altered.ok
        ));
    }
    pass(format!(
        "receipt 1's decision_reason was edited in the store and verify_chain reported content_altered at seq 1; \
         control: the untouched chain of {} receipts verified",
        untouched.chained
    ))
}

/// Receipts under this document: an allowed call committed when there is one, and `refusals`
/// calls of an unlisted action.
fn write_receipts(ctx: &Ctx<'_>, warden: &Warden, tag: &str, refusals: usize) -> Result<()> {
    if let Some(case) = ctx.allowed() {
        let call = case.call(ctx.document, tag)?;
        if let Ok(permit) = warden.submit(&ctx.request(case.action, &call)) {
            permit.commit(&serde_json::json!({"warden_verify": tag.to_uppercase()}))?;
        }
    }
    let unknown = ctx.unknown_action();
    let empty = Call { arguments: Map::new(), resource: None, effect_key: None };
    for _ in 0..refusals {
        let _refused = warden.submit(&ctx.request(&unknown, &empty));
    }
    Ok(())
}

/// G13: a signed checkpoint fixes the log: a bundle whose receipts stop short of the last
/// checkpoint is refused as `truncated`, and two checkpoints of one size with different roots as
/// `log_forked`; control: the bundle as exported verifies. The key is made here and never stored.
pub(super) fn g13_checkpointed_log(ctx: &Ctx<'_>) -> Result<Outcome> {
    use crate::evidence::{bundle, checkpoint, key::NoteSigner};
    let warden = ctx.warden("g13")?;
    write_receipts(ctx, &warden, "g13", 3)?;
    let kernel = warden.kernel();
    let signer = NoteSigner::generate("warden-verify")?;
    let one = kernel.checkpoint(&signer, Some("warden-verify/g13"))?;
    let dir = crate::scratch::ScratchDir::create("warden-verify-g13")
        .map_err(|e| Error::Config(format!("cannot create a scratch directory for G13: {e}")))?;
    let sound = dir.path("sound");
    bundle::export(kernel, &sound, None, None)?;
    let trusted = [signer.verifier()];
    let control = bundle::verify_bundle(&sound, &trusted);
    if !control.ok {
        return fail(format!(
            "control failed: the bundle as exported was refused: {:?} {}",
            control.reason, control.detail
        ));
    }
    let io = |e: std::io::Error| Error::Config(format!("G13's scratch bundle: {e}"));
    let copy = |name: &str| -> Result<std::path::PathBuf> {
        let to = dir.path(name);
        for sub in ["", "checkpoints", "keys", "proofs"] {
            std::fs::create_dir_all(to.join(sub)).map_err(io)?;
            for entry in std::fs::read_dir(sound.join(sub)).map_err(io)? {
                let entry = entry.map_err(io)?;
                if entry.file_type().map_err(io)?.is_file() {
                    std::fs::copy(entry.path(), to.join(sub).join(entry.file_name())).map_err(io)?;
                }
            }
        }
        Ok(to)
    };
    // Truncated: the last receipt cut off the end, as a rewritten store file would show it.
    let truncated = copy("truncated")?;
    let text = std::fs::read_to_string(truncated.join("receipts.jsonl")).map_err(io)?;
    let kept: Vec<&str> = text.lines().collect();
    let shorter = kept[..kept.len().saturating_sub(1)].iter().map(|line| format!("{line}\n")).collect::<String>();
    std::fs::write(truncated.join("receipts.jsonl"), shorter).map_err(io)?;
    let cut = bundle::verify_bundle(&truncated, &trusted);
    if cut.reason.as_deref() != Some("truncated") {
        return fail(format!(
            "the last receipt was cut off and the bundle verdict was {:?}: {}",
            cut.reason, cut.detail
        ));
    }
    // Forked: the key signs a second checkpoint of the same size with another root.
    let forked = copy("forked")?;
    let companion: checkpoint::Companion = serde_json::from_str(&one.companion)
        .map_err(|e| Error::store(StoreFaultKind::Damaged, format!("checkpoint 1's companion does not parse: {e}")))?;
    let mut root = checkpoint::decode_hash(&one.root)
        .ok_or_else(|| Error::store(StoreFaultKind::Damaged, "checkpoint 1's root is unreadable"))?;
    root[0] ^= 1;
    let fork = checkpoint::Basis {
        number: 2,
        origin: one.origin.clone(),
        size: one.size,
        root,
        time: one.time,
        open: companion.open,
        closed_without_receipt: companion.closed_without_receipt,
    };
    let (fork_companion, text) = checkpoint::texts(&fork)?;
    std::fs::write(forked.join("checkpoints/000002.note"), signer.sign_note(&text)?).map_err(io)?;
    std::fs::write(forked.join("checkpoints/000002.json"), fork_companion).map_err(io)?;
    let mut manifest: Value = serde_json::from_slice(&std::fs::read(forked.join("bundle.json")).map_err(io)?)
        .map_err(|e| Error::store(StoreFaultKind::Damaged, format!("G13's bundle.json: {e}")))?;
    manifest["checkpoints"] = serde_json::json!([1, 2]);
    std::fs::write(forked.join("bundle.json"), manifest.to_string()).map_err(io)?;
    let split = bundle::verify_bundle(&forked, &trusted);
    if split.reason.as_deref() != Some("log_forked") {
        return fail(format!(
            "two checkpoints of {} receipts with different roots gave {:?}: {}",
            one.size, split.reason, split.detail
        ));
    }
    pass(format!(
        "a checkpoint of {} receipts was signed and exported; the bundle without its last receipt was refused as \
         truncated, and a second checkpoint of the same size with another root as log_forked; control: the bundle \
         as exported verified",
        one.size
    ))
}

/// G14: a prune deletes receipts only when it may: refused before its checkpoint (or a later
/// one) was anchored, and refused while a hold stands, each time with nothing deleted; control:
/// with the anchor made and the hold released the prune goes ahead, and what is left — the
/// chain from the pruned prefix on, and a bundle exported after it — still verifies.
pub(super) fn g14_prune_under_hold(ctx: &Ctx<'_>) -> Result<Outcome> {
    use crate::evidence::{anchor::FileSink, anchoring::SinkProvider, bundle, key::NoteSigner};
    let warden = ctx.warden("g14")?;
    write_receipts(ctx, &warden, "g14", 3)?;
    let kernel = warden.kernel();
    let signer = NoteSigner::generate("warden-verify")?;
    let checkpoint = kernel.checkpoint(&signer, Some("warden-verify/g14"))?;
    let dir = crate::scratch::ScratchDir::create("warden-verify-g14")
        .map_err(|e| Error::Config(format!("cannot create a scratch directory for G14: {e}")))?;
    let intact = |when: &str| -> Result<Option<String>> {
        let (count, pruned) = (kernel.receipt_count()?, kernel.pruned()?);
        Ok((pruned.is_some() || count < checkpoint.size).then(|| {
            format!("{when} the prune was refused but the store holds {count} receipts and pruned {pruned:?}")
        }))
    };
    let (by, reason) = (APPROVER, "warden verify G14");
    match kernel.prune(checkpoint.number, by, reason) {
        Err(Error::InvalidInput(refused)) if refused.message.contains("was anchored") => {}
        other => return fail(format!("a prune before any anchor was not refused for it: {other:?}")),
    }
    if let Some(why) = intact("before any anchor,")? {
        return fail(why);
    }
    let file = dir.path("anchors.jsonl");
    let sinks: Vec<SinkProvider> =
        vec![(format!("file {}", file.display()), Ok(Arc::new(FileSink::new(file)) as Arc<_>))];
    let tries = kernel.anchor_pending(&sinks, true)?;
    if !tries.iter().any(|tried| tried.row.anchored()) {
        return fail(format!("the scratch file anchor did not take checkpoint {}: {tries:?}", checkpoint.number));
    }
    kernel.place_hold("warden-verify-g14", by, reason)?;
    match kernel.prune(checkpoint.number, by, reason) {
        Err(Error::InvalidInput(refused)) if refused.message.contains("warden-verify-g14") => {}
        other => return fail(format!("a prune under a standing hold was not refused naming it: {other:?}")),
    }
    if let Some(why) = intact("under the hold,")? {
        return fail(why);
    }
    kernel.release_hold("warden-verify-g14", by, reason)?;
    let done = match kernel.prune(checkpoint.number, by, reason) {
        Ok(done) => done,
        Err(error) => return fail(format!("control failed: with the hold released the prune was refused: {error}")),
    };
    let chain = kernel.verify_chain()?;
    if !chain.ok || chain.pruned_through != checkpoint.size {
        return fail(format!("control failed: after the prune the chain reports {:?}", chain.breaks));
    }
    let after = kernel.checkpoint(&signer, None)?;
    let out = dir.path("bundle");
    bundle::export(kernel, &out, None, None)?;
    let verdict = bundle::verify_bundle(&out, &[signer.verifier()]);
    if !verdict.ok {
        return fail(format!(
            "control failed: the bundle exported after the prune was refused: {:?} {}",
            verdict.reason, verdict.detail
        ));
    }
    pass(format!(
        "checkpoint {} of {} receipts: a prune through it was refused before it was anchored and again while a hold \
         stood, deleting nothing; control: anchored and released, the prune deleted {} receipts, and the chain after \
         it and a bundle to checkpoint {} verified",
        checkpoint.number, checkpoint.size, done.receipts_deleted, after.number
    ))
}

/// G12: the pending request an approver reads carries the very action its hash binds — the
/// canonical arguments, resource, environment and principal the proposal had — and a stored
/// action that differs from the bound one is refused as damage, never shown as approvable.
pub(super) fn g12_approval_shows_its_action(ctx: &Ctx<'_>) -> Result<Outcome> {
    let Some(case) = ctx.approvable().first().copied() else { return no_approve_case(ctx) };
    let call = case.call(ctx.document, "g12")?;
    let warden = ctx.warden("g12")?;
    let request = ctx.request(case.action, &call);
    let approval_id = match warden.submit(&request) {
        Err(Error::ApprovalRequired { request_id, .. }) => request_id,
        Ok(permit) => {
            permit.not_executed("warden verify: never executed")?;
            return fail(format!("{}: got a permit without any approval", case.label()));
        }
        Err(error) => return fail(format!("{}: {}", case.label(), refused(&error))),
    };
    // The action the proposal was built as, by the pipeline's own builder.
    let proposed = warden.action_for(&request)?;
    let hash = proposed.hash()?;
    let shown = warden.kernel().pending_approvals()?.into_iter().find(|r| r.approval_id == approval_id);
    let Some(record) = shown else {
        return fail(format!("{}: the request {approval_id} is not among the pending ones", case.label()));
    };
    let json = record.to_json();
    let same = json["arguments"] == proposed.canonical_arguments()
        && json["environment"] == proposed.environment.as_str()
        && json["resource"] == serde_json::json!(proposed.resource)
        && record.requested_by == proposed.principal
        && record.action_hash == hash;
    if !same {
        return fail(format!(
            "{}: the request shows {} for {} but the proposal was {} for {hash}",
            case.label(),
            json["arguments"],
            record.action_hash,
            proposed.canonical_arguments()
        ));
    }
    let document_hash = record
        .action_document()
        .and_then(|document| crate::canonical::to_canonical_string_with(&document, "", Floats::ADMITTED).ok())
        .map(|text| crate::canonical::sha256_prefixed(text.as_bytes()));
    if document_hash.as_deref() != Some(hash.as_str()) {
        return fail(format!("{}: the action document shown does not hash to {hash}", case.label()));
    }
    // Alter the shown action (a checksum-valid row): it must be refused, not shown.
    let key = mutation_key(case, &call.arguments);
    let mut altered = record.clone();
    if let Some(stored) = altered.action.as_mut() {
        let mut arguments = call.arguments.clone();
        arguments.insert(key.clone(), Value::from(1));
        stored.arguments =
            crate::canonical::to_canonical_string_with(&Value::Object(arguments), "arguments", Floats::ADMITTED)?;
    }
    warden.kernel().store().overwrite_approval(&altered)?;
    let reader = ctx.warden("g12")?;
    match reader.kernel().approval(&approval_id) {
        Err(Error::Store(_)) => {}
        Ok(_) => {
            return fail(format!(
                "{}: a request whose shown arguments gained {key:?} was still read as approvable",
                case.label()
            ))
        }
        Err(other) => return fail(format!("{}: the altered request {}", case.label(), refused(&other))),
    }
    pass(format!(
        "{}: the pending request showed the proposal's canonical arguments, resource, environment and principal, \
         and its action document hashed to the bound {hash}; control: the same request with {key:?} added to its \
         shown arguments was refused as store damage",
        case.label()
    ))
}

// ---- G4: one winner among racing processes ------------------------------------------------------

/// The positive control for G1, in the library's own unit tests only (no library build carries
/// it): the approval granted for the original action is rebound in the store, through the row
/// layer G12 uses, to the mutated copy, as a store that forgot which action a human approved
/// would be. G1 must then fail, and only G1.
#[cfg(test)]
mod broken_build {
    use super::*;
    use crate::verify::{run, Status};

    thread_local! {
        pub(super) static REBIND_G1: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }

    /// Rewrite `approval_id`'s row so that it binds `request`'s action, hash and shown action both.
    pub(super) fn rebind(warden: &Warden, approval_id: &str, request: &ActionRequest<'_>) -> Result<()> {
        let action = warden.action_for(request)?;
        let mut record = warden.kernel().approval(approval_id)?.ok_or_else(|| {
            Error::invalid(InvalidInputKind::Unknown, format!("{approval_id} is not in the scratch store"))
        })?;
        record.action_hash = action.hash()?;
        if let Some(stored) = record.action.as_mut() {
            stored.arguments = action.arguments_text()?;
        }
        warden.kernel().store().overwrite_approval(&record)
    }

    const DOCUMENT: &str =
        "schema: warden/v1\nenvironment: production\nmode: enforce\nactions:\n  stripe.refund:\n    \
                            effect: \"refund:{payment_id}\"\n    rules:\n      - when: { amount_lte: 50000 }\n        \
                            decision: allow\n      - decision: approve\n";

    #[test]
    fn a_store_that_lets_an_approval_bind_another_action_fails_g1_and_only_g1() {
        let document = crate::document::load_str(DOCUMENT, "verify-unit.yaml").unwrap();
        let control = run(&document, None).unwrap();
        assert!(control.ok(), "{}", control.render());
        REBIND_G1.with(|on| on.set(true));
        let report = run(&document, None);
        REBIND_G1.with(|on| on.set(false));
        let report = report.unwrap();
        assert!(!report.ok(), "{}", report.render());
        for guarantee in &report.guarantees {
            if guarantee.id == "G1" {
                assert_eq!(guarantee.status, Status::Fail, "{}", report.render());
                assert!(guarantee.detail.contains("got a permit"), "{}", guarantee.detail);
            } else {
                assert_ne!(guarantee.status, Status::Fail, "only G1 depends on the binding: {}", report.render());
            }
        }
    }
}
