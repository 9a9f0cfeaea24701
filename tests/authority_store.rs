//! Authority through the real store: delegations created, evaluated, revoked and swept in
//! write transactions; the deciding chain re-read inside the reservation; budgets charged inside
//! it and released only on FAILED; the reads of one evaluation flat between 10 and 100,000
//! stored delegations.

mod common;

use std::sync::Arc;
use warden::test_support::KernelInternals;

use common::*;
use serde_json::json;
use warden::authority::record::DelegationRecord;
use warden::authority::source::index_keys;
use warden::authority::{grant_to_json, CreatedVia, NewDelegation};
use warden::document::{load_grant_str, load_str};
use warden::kernel::authority::{AuthorityStamp, Sweep};
use warden::pipeline::{ActionRequest, Warden, WardenOptions};
use warden::store::EventKind::{self, *};
use warden::{EffectState, Error, ManualClock, Principal, Proposal};

const DOCUMENT: &str = r#"
schema: warden/v1
environment: production
actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    rules:
      - decision: allow
  stripe.quote:
    rules:
      - decision: allow
  customer.read:
    decision: allow
authority:
  grants:
    - id: cfo
      subject: { agent: console, user: alice }
      actions: ["stripe.*"]
      constraints: { amount_lte: 10000000 }
      expires_at: "2027-01-01T00:00:00Z"
      delegable: true
    - id: readers
      subject: { agent: "*" }
      actions: ["customer.read"]
"#;

struct Setup {
    _dir: tempfile::TempDir,
    clock: ManualClock,
    warden: Warden,
}

fn setup() -> Setup {
    setup_with(DOCUMENT)
}

fn setup_with(document: &str) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let warden = Warden::open(
        dir.path().join("state.redb"),
        load_str(document, "test.yaml").unwrap(),
        WardenOptions {
            clock: Arc::new(clock.clone()),
            environment: Some("production".into()),
            ..WardenOptions::default()
        },
    )
    .unwrap();
    Setup { _dir: dir, clock, warden }
}

fn who(agent: &str) -> Principal {
    Principal::new(agent, Some("alice")).unwrap()
}

/// A delegable link to `agent` capped at `amount_lte`, expiring before its parent.
fn link(agent: &str, amount_lte: i64, extra: &str) -> String {
    format!(
        "{{subject: {{agent: {agent}, user: alice}}, actions: [\"stripe.refund\"], constraints: {{amount_lte: {amount_lte}}}, \
         expires_at: \"2026-12-01T00:00:00Z\", delegable: true{extra}}}"
    )
}

fn delegate(s: &Setup, parent: &str, by: &str, grant: &str) -> Result<String, Error> {
    s.warden.delegate_text(parent, grant, &who(by), None, CreatedVia::Api)
}

fn refund(agent: &str, payment: &str, amount: i64) -> ActionRequest<'static> {
    ActionRequest::new("stripe.refund", json!({"payment_id": payment, "amount": amount}), who(agent))
}

fn kinds_since(s: &Setup, after: u64) -> (Vec<EventKind>, u64) {
    let events = s.warden.kernel().events(after, 10_000).unwrap();
    let last = events.last().map_or(after, |e| e.event_id);
    (events.into_iter().map(|e| e.kind).collect(), last)
}

fn last_receipt(s: &Setup) -> serde_json::Value {
    let row = s.warden.kernel().last_receipts(1).unwrap().pop().unwrap().1;
    warden::canonical::parse_json(&row.document).unwrap()
}

fn denied_reason(error: &Error) -> (&str, Option<&str>) {
    match error {
        Error::AuthorityDenied { reason, grant_id, .. } => (reason.as_str(), grant_id.as_deref()),
        other => panic!("expected an authority denial, got {other:?}"),
    }
}

/// cfo → finance (€25,000) → ops (€10,000) → support (€2,000): a depth-3 chain.
fn chain(s: &Setup) -> [String; 3] {
    let finance = delegate(s, "cfo", "console", &link("finance-agent", 2_500_000, "")).unwrap();
    let ops = delegate(s, &finance, "finance-agent", &link("ops-agent", 1_000_000, "")).unwrap();
    let support = delegate(s, &ops, "ops-agent", &link("support-agent", 200_000, "")).unwrap();
    [finance, ops, support]
}

#[test]
fn a_depth_3_chain_authorises_through_the_store_and_revoking_its_first_link_cuts_the_leaf() {
    let s = setup();
    let [finance, ops, support] = chain(&s);
    let listed = s.warden.delegations(None, 100).unwrap();
    assert_eq!(listed.len(), 3);
    let leaf = listed.iter().find(|d| d.stored.record.delegation_id == support).unwrap();
    assert_eq!((leaf.stored.record.depth, leaf.stored.record.parent_id.as_str()), (3, ops.as_str()));
    assert_eq!(leaf.stored.record.created_via, "api");

    let permit = s.warden.submit(&refund("support-agent", "pay_1", 150_000)).unwrap();
    assert_eq!(permit.authority_grant_id(), Some(support.as_str()));
    permit.commit(&json!({"refund": "re_1"})).unwrap();
    assert_eq!(last_receipt(&s)["authority_grant_id"], support.as_str());
    // The leaf's own cap holds even though every parent would allow more.
    let over = s.warden.submit(&refund("support-agent", "pay_2", 200_001)).unwrap_err();
    assert_eq!(denied_reason(&over), ("authority_constraint", Some(support.as_str())));

    assert!(s.warden.revoke(&finance, Some("ciso")).unwrap(), "the first revoke writes");
    assert!(!s.warden.revoke(&finance, Some("ciso")).unwrap(), "the second finds it revoked");
    let unknown = s.warden.revoke("dlg_00000000000000000000000000000000", None).unwrap_err();
    assert!(matches!(unknown, Error::NotFound(_)), "{unknown}");

    let (_, mark) = kinds_since(&s, 0);
    let cut = s.warden.submit(&refund("support-agent", "pay_3", 100)).unwrap_err();
    assert_eq!(denied_reason(&cut), ("authority_revoked", Some(support.as_str())));
    let (kinds, _) = kinds_since(&s, mark);
    assert_eq!(kinds, [ACTION_PROPOSED, POLICY_EVALUATED, AUTHORITY_DENIED, ACTION_DENIED]);
    let receipt = last_receipt(&s);
    assert_eq!((receipt["result"].as_str(), receipt["decision"].as_str()), (Some("denied"), Some("deny")));
    assert_eq!(receipt["decision_reason"], "authority_revoked");
    assert_eq!(receipt["authority_grant_id"], support.as_str());
    // Every node under the cut is denied, and nothing beneath was rewritten.
    let middle = s.warden.submit(&refund("ops-agent", "pay_4", 100)).unwrap_err();
    assert_eq!(denied_reason(&middle).0, "authority_revoked");
    let rows = s.warden.delegations(None, 100).unwrap();
    let revoked: Vec<bool> = [&finance, &ops, &support]
        .iter()
        .map(|id| rows.iter().find(|d| &&d.stored.record.delegation_id == id).unwrap().stored.revocation.is_some())
        .collect();
    assert_eq!(revoked, [true, false, false]);
    assert!(s.warden.kernel().verify_chain().unwrap().ok);
}

#[test]
fn a_revocation_that_lands_after_evaluation_is_found_inside_the_reservation() {
    let s = setup();
    let [_, ops, _] = chain(&s);
    let request = refund("support-agent", "pay_1", 100);
    // Evaluate (as submit does), then revoke before the reservation's transaction runs.
    let evaluation = s.warden.evaluate_authority(&request).unwrap();
    assert!(evaluation.result.passed, "{:?}", evaluation.result);
    assert_eq!(evaluation.result.chain.len(), 3);
    s.warden.revoke(&ops, None).unwrap();
    let action = warden::Action::new(
        "stripe.refund",
        json!({"payment_id": "pay_1", "amount": 100}),
        who("support-agent"),
        None,
        "production",
    )
    .unwrap();
    let template = key_template();
    let mut proposal = Proposal::new(&action, warden::Ruling::new(warden::Decision::Allow, "rule[0]"));
    proposal.effect = Some(&template);
    proposal.authority = Some(AuthorityStamp::from_result(&evaluation.result));
    let refused = s.warden.kernel().propose(&proposal).unwrap_err();
    assert_eq!(denied_reason(&refused).0, "authority_revoked");
    assert!(s.warden.kernel().effect("refund:pay_1").unwrap().is_none(), "nothing was reserved");
}

#[test]
fn creation_refusals_name_their_reason_write_a_rejected_event_and_no_row() {
    let s = setup();
    let finance = delegate(&s, "cfo", "console", &link("finance-agent", 2_500_000, "")).unwrap();
    let cases: [(&str, &str, String, &str, Option<&str>); 6] = [
        // €50,000 under €25,000: the escalation the demo shows.
        (finance.as_str(), "finance-agent", link("support-agent", 5_000_000, ""), "containment", Some("constraints")),
        // Omitting the parent's constraint is not "unlimited".
        (
            finance.as_str(),
            "finance-agent",
            "{subject: {agent: support-agent, user: alice}, actions: [stripe.refund], expires_at: \"2026-12-01T00:00:00Z\"}"
                .into(),
            "containment",
            Some("constraints"),
        ),
        (
            finance.as_str(),
            "finance-agent",
            link("support-agent", 100, "").replace("stripe.refund", "stripe.*"),
            "containment",
            Some("actions"),
        ),
        (finance.as_str(), "ops-agent", link("support-agent", 100, ""), "not_the_subject", None),
        ("nope", "finance-agent", link("support-agent", 100, ""), "unknown_parent", None),
        ("readers", "x", "{subject: {agent: reader-2}, actions: [customer.read]}".into(), "parent_not_delegable", None),
    ];
    for (parent, by, grant, reason, dimension) in cases {
        let (_, mark) = kinds_since(&s, 0);
        let refused = delegate(&s, parent, by, &grant).unwrap_err();
        let Error::DelegationRefused { reason: got, dimension: dim, parent_id, .. } = &refused else {
            panic!("{refused:?}")
        };
        assert_eq!((got.as_str(), dim.as_deref(), parent_id.as_str()), (reason, dimension, parent), "{grant}");
        let (kinds, _) = kinds_since(&s, mark);
        assert_eq!(kinds, [DELEGATION_REJECTED], "{grant}");
        assert_eq!(s.warden.delegations(None, 100).unwrap().len(), 1, "no row for {grant}");
    }
    // Depth: max_delegation_depth 3 stops a fourth link.
    let [_, _, support] = chain(&s);
    let too_deep = delegate(&s, &support, "support-agent", &link("intern", 100, "")).unwrap_err();
    assert!(matches!(&too_deep, Error::DelegationRefused { reason, .. } if reason == "max_depth"), "{too_deep}");
}

const BUDGETED: &str = r#"{subject: {agent: support-agent, user: alice}, actions: ["stripe.refund"],
  constraints: {amount_lte: 200000}, expires_at: "2026-12-01T00:00:00Z",
  budgets: [{metric: amount, limit: 500000, window: PT1H}]}"#;

fn budget_setup() -> (Setup, String) {
    let s = setup();
    let finance = delegate(&s, "cfo", "console", &link("finance-agent", 2_500_000, "")).unwrap();
    let support = delegate(&s, &finance, "finance-agent", BUDGETED).unwrap();
    (s, support)
}

#[test]
fn the_third_refund_in_the_hour_is_refused_while_the_first_two_still_execute() {
    let (s, support) = budget_setup();
    let first = s.warden.submit(&refund("support-agent", "pay_1", 200_000)).unwrap();
    let second = s.warden.submit(&refund("support-agent", "pay_2", 200_000)).unwrap();
    assert_eq!(first.budget_charges().len(), 1);
    assert_eq!(first.budget_charges()[0].amount, 200_000);
    assert_eq!(s.warden.kernel().budget_spent(&support, "amount", 3600).unwrap(), 400_000);
    let (_, mark) = kinds_since(&s, 0);
    let third = s.warden.submit(&refund("support-agent", "pay_3", 200_000)).unwrap_err();
    assert_eq!(denied_reason(&third), ("budget_exhausted", Some(support.as_str())));
    let (kinds, _) = kinds_since(&s, mark);
    assert_eq!(kinds, [ACTION_PROPOSED, POLICY_EVALUATED, AUTHORITY_DENIED, ACTION_DENIED]);
    assert!(s.warden.kernel().effect("refund:pay_3").unwrap().is_none(), "nothing reserved");
    // The limit is inclusive: 400,000 + 100,000 = 500,000 fits, one more unit does not.
    s.warden.submit(&refund("support-agent", "pay_4", 100_000)).unwrap().commit(&json!(4)).unwrap();
    let one_more = s.warden.submit(&refund("support-agent", "pay_5", 1)).unwrap_err();
    assert_eq!(denied_reason(&one_more).0, "budget_exhausted");
    // The first proves it never ran: FAILED releases its charge, and the third now fits.
    first.not_executed("card declined before sending").unwrap();
    assert_eq!(s.warden.kernel().budget_spent(&support, "amount", 3600).unwrap(), 300_000);
    let third = s.warden.submit(&refund("support-agent", "pay_3", 200_000)).unwrap();
    third.commit(&json!(3)).unwrap();
    second.commit(&json!(2)).unwrap();
    let receipt = last_receipt(&s);
    assert_eq!(receipt["budget_charges"][0]["grant_id"], support.as_str());
    assert_eq!(receipt["budget_charges"][0]["amount"], 200_000);
    // At the window's end the charges still count; one microsecond later the first ones left.
    s.clock.advance(3600 * SECOND);
    assert_eq!(
        denied_reason(&s.warden.submit(&refund("support-agent", "pay_6", 1)).unwrap_err()).0,
        "budget_exhausted"
    );
    s.clock.advance(1);
    s.warden.submit(&refund("support-agent", "pay_6", 200_000)).unwrap().commit(&json!(6)).unwrap();
}

#[test]
fn charges_are_released_only_when_the_effect_reaches_failed() {
    let (s, support) = budget_setup();
    let spent = || s.warden.kernel().budget_spent(&support, "amount", 3600).unwrap();
    s.warden.submit(&refund("support-agent", "pay_c", 100_000)).unwrap().commit(&json!(1)).unwrap();
    s.warden.submit(&refund("support-agent", "pay_a", 100_000)).unwrap().ambiguous("timeout").unwrap();
    assert_eq!(spent(), 200_000, "COMMITTED and AMBIGUOUS hold their charges");
    let kernel = s.warden.kernel();
    kernel.resolve("refund:pay_a", EffectState::Failed, "ops:bob").unwrap();
    assert_eq!(spent(), 100_000, "resolved FAILED releases");
    // Reconciliation to not_executed releases; a lease lapsing into AMBIGUOUS holds.
    s.warden.submit(&refund("support-agent", "pay_r", 100_000)).unwrap().ambiguous("lost").unwrap();
    kernel.reconcile("refund:pay_r", "stripe.refund", warden::kernel::ReconcileAnswer::NotExecuted).unwrap();
    assert_eq!(spent(), 100_000);
    let dropped = s.warden.submit(&refund("support-agent", "pay_l", 100_000)).unwrap();
    std::mem::forget(dropped);
    s.clock.advance(301 * SECOND);
    assert!(s.warden.submit(&refund("support-agent", "pay_l", 100_000)).is_err());
    assert_eq!(kernel.effect("refund:pay_l").unwrap().unwrap().state, EffectState::Ambiguous);
    assert_eq!(spent(), 200_000);
    // A retry after FAILED charges its own attempt once.
    s.warden.submit(&refund("support-agent", "pay_a", 100_000)).unwrap().commit(&json!(2)).unwrap();
    assert_eq!(spent(), 300_000);
    let released = kernel.events(0, 10_000).unwrap().into_iter().filter(|e| e.kind == BUDGET_RELEASED).count();
    assert_eq!(released, 2);
}

#[test]
fn unmeasurable_and_unkeyed_budgets_are_refused_before_anything_is_reserved() {
    let s = setup();
    let finance_grant = link("finance-agent", 2_500_000, "").replace("stripe.refund", "stripe.*");
    let finance = delegate(&s, "cfo", "console", &finance_grant).unwrap();
    let grant = r#"{subject: {agent: support-agent, user: alice}, actions: ["stripe.refund", "stripe.quote"],
      constraints: {amount_lte: 200000}, expires_at: "2026-12-01T00:00:00Z",
      budgets: [{metric: amount, limit: 500000, window: PT1H}, {metric: count, limit: 20, window: P1D}]}"#;
    delegate(&s, &finance, "finance-agent", grant).unwrap();
    let negative = s.warden.submit(&refund("support-agent", "pay_1", -5)).unwrap_err();
    assert_eq!(denied_reason(&negative).0, "budget_unmeasurable");
    let quote = ActionRequest::new("stripe.quote", json!({"amount": 5}), who("support-agent"));
    assert_eq!(denied_reason(&s.warden.submit(&quote).unwrap_err()).0, "budget_unkeyed");
    assert!(s.warden.kernel().effect("refund:pay_1").unwrap().is_none());
    // Both budgets are charged on one reservation, each with its own metric.
    let permit = s.warden.submit(&refund("support-agent", "pay_2", 7)).unwrap();
    let charged: Vec<(&str, u64)> = permit.budget_charges().iter().map(|c| (c.metric.as_str(), c.amount)).collect();
    assert_eq!(charged, [("amount", 7), ("count", 1)]);
}

#[test]
fn a_hop_makes_its_delegation_the_only_candidate() {
    let s = setup();
    let [finance, _, support] = chain(&s);
    let mut request = refund("support-agent", "pay_1", 100);
    request.hop = Some(&support);
    s.warden.submit(&request).unwrap().commit(&json!(1)).unwrap();
    assert_eq!(last_receipt(&s)["hop"], support.as_str());
    // A hop the caller's action does not fit is authority_hop, even though another grant would.
    let mut wrong = refund("finance-agent", "pay_2", 100);
    wrong.hop = Some(&support);
    assert_eq!(denied_reason(&s.warden.submit(&wrong).unwrap_err()).0, "authority_hop");
    let mut missing = refund("support-agent", "pay_3", 100);
    missing.hop = Some("dlg_00000000000000000000000000000000");
    assert_eq!(denied_reason(&s.warden.submit(&missing).unwrap_err()).0, "authority_hop");
    let mut malformed = refund("support-agent", "pay_3", 100);
    malformed.hop = Some("not-a-delegation");
    assert!(matches!(s.warden.submit(&malformed).unwrap_err(), Error::InvalidInput(_)));
    let _ = finance;
}

#[test]
fn a_grant_naming_tasks_needs_a_call_carrying_a_matching_task() {
    let s = setup();
    let finance = delegate(&s, "cfo", "console", &link("finance-agent", 2_500_000, "")).unwrap();
    delegate(&s, &finance, "finance-agent", &link("support-agent", 100_000, ", tasks: [\"ticket:*\"]")).unwrap();
    let none = s.warden.submit(&refund("support-agent", "pay_1", 100)).unwrap_err();
    assert_eq!(denied_reason(&none).0, "authority_task");
    let mut tasked = refund("support-agent", "pay_1", 100);
    tasked.task = Some("ticket:42");
    s.warden.submit(&tasked).unwrap().commit(&json!(1)).unwrap();
}

/// `crowd` unrelated delegations: most to other agents, a tenth to the same agent under other
/// first action segments (neither is a key one evaluation reads).
fn crowd_rows(crowd: usize) -> Vec<NewDelegation> {
    let template = load_grant_str(&link("someone", 100, ""), "crowd").unwrap();
    (0..crowd)
        .map(|i| {
            let mut grant = template.clone();
            if i % 10 == 0 {
                grant.subject.agent = Some("support-agent".into());
                grant.actions = vec![format!("other{i}.refund")];
            } else {
                grant.subject.agent = Some(format!("agent-{i}"));
            }
            grant.id = format!("dlg_{:032x}", i + 1);
            NewDelegation {
                index_keys: index_keys(&grant),
                record: DelegationRecord {
                    delegation_id: grant.id.clone(),
                    parent_id: "cfo".into(),
                    depth: 1,
                    grant_json: grant_to_json(&grant),
                    created_by: who("console"),
                    created_via: "api".into(),
                    created_at: T0,
                },
            }
        })
        .collect()
}

fn reads_among(crowd: usize) -> u64 {
    let s = setup();
    let rows = crowd_rows(crowd);
    s.warden.kernel().store().tamper(|t| t.put_delegations(&rows)).unwrap();
    let [_, _, support] = chain(&s);
    let count = s.warden.kernel().store().tamper(|t| t.delegation_count().map(|n| assert_eq!(n as usize, crowd + 3)));
    count.unwrap();
    let evaluation = s.warden.evaluate_authority(&refund("support-agent", "pay_1", 100)).unwrap();
    assert!(evaluation.result.passed && evaluation.result.grant_id.as_deref() == Some(support.as_str()));
    evaluation.store_reads
}

#[test]
fn one_evaluation_reads_as_many_rows_among_100000_delegations_as_among_10() {
    let few = reads_among(10);
    let many = reads_among(100_000);
    // Two index ranges (each one read plus one per entry), the leaf, and its chain of three
    // (row and revocation each), plus the root grant's id looked up once.
    println!("store reads of one evaluation: {few} among 10 delegations, {many} among 100,000");
    assert_eq!(few, many, "reads grew with the delegations stored");
    assert!(few <= 16, "{few} reads for one evaluation");
}

#[test]
fn a_damaged_delegation_row_denies_as_unreadable_and_can_still_be_revoked() {
    let s = setup();
    let [finance, _, _] = chain(&s);
    s.warden
        .kernel()
        .store()
        .tamper(|t| {
            let mut bytes = t.raw_delegation(&finance)?.unwrap();
            let middle = bytes.len() / 2;
            bytes[middle] ^= 0x04;
            t.set_raw_delegation(&finance, &bytes)
        })
        .unwrap();
    let denied = s.warden.submit(&refund("support-agent", "pay_1", 100)).unwrap_err();
    assert_eq!(denied_reason(&denied).0, "authority_unreadable");
    assert!(s.warden.revoke(&finance, Some("ciso")).unwrap());
    let doctor = s.warden.kernel().doctor().unwrap();
    let problems: usize = doctor.tables.iter().filter(|(t, _, _)| t == "delegations").map(|(_, _, p)| p.len()).sum();
    assert_eq!(problems, 1);
}

#[test]
fn sweeps_revoke_what_a_creator_made_and_everything_beneath_an_id() {
    let s = setup();
    let [finance, ops, support] = chain(&s);
    let other = delegate(&s, &finance, "finance-agent", &link("other-agent", 100, "")).unwrap();
    let swept =
        s.warden.revoke_sweep(Sweep::CreatedBy { agent: "finance-agent".into(), user: None }, Some("ciso")).unwrap();
    let mut ids: Vec<&str> = swept.iter().map(|(id, _)| id.as_str()).collect();
    ids.sort_unstable();
    let mut expected = vec![ops.as_str(), other.as_str()];
    expected.sort_unstable();
    assert_eq!(ids, expected);
    assert!(swept.iter().all(|(_, written)| *written));
    let under = s.warden.revoke_sweep(Sweep::Under { id: "cfo".into() }, None).unwrap();
    let written: Vec<(&str, bool)> = under.iter().map(|(id, w)| (id.as_str(), *w)).collect();
    assert_eq!(written.len(), 4);
    for (id, was_written) in written {
        assert_eq!(was_written, id == finance || id == support, "{id}");
    }
    let (kinds, _) = kinds_since(&s, 0);
    assert_eq!(kinds.iter().filter(|k| **k == DELEGATION_REVOKED).count(), 4);
}

#[test]
fn an_expired_principal_may_not_delegate_and_a_cli_delegation_says_so() {
    let s = setup();
    let refused =
        s.warden.delegate_text("cfo", &link("finance-agent", 100, ""), &who("console"), Some(T0 - 1), CreatedVia::Cli);
    assert!(matches!(&refused, Err(Error::DelegationRefused { reason, .. }) if reason == "principal_expired"));
    let id = s
        .warden
        .delegate_text("cfo", &link("finance-agent", 100, ""), &who("console"), Some(T0), CreatedVia::Cli)
        .unwrap();
    let listed = s.warden.delegations(None, 10).unwrap();
    assert_eq!(listed[0].to_json()["created_via"], "cli");
    assert_eq!(listed[0].to_json()["delegation_id"], id.as_str());
}

#[test]
fn a_store_without_delegations_still_decides_root_grants_and_denies_without_one() {
    let s = setup();
    let read = ActionRequest::new("customer.read", json!({}), Principal::new("anyone", None).unwrap());
    s.warden.submit(&read).unwrap().commit(&json!(null)).unwrap();
    assert_eq!(last_receipt(&s)["authority_grant_id"], "readers");
    let refund_alone = ActionRequest::new(
        "stripe.refund",
        json!({"payment_id": "p", "amount": 1}),
        Principal::new("bot", None).unwrap(),
    );
    assert_eq!(denied_reason(&s.warden.submit(&refund_alone).unwrap_err()), ("no_authority", None));
}
