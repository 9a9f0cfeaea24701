//! Authority as pure decisions: grant matching, the failure precedence, delegation creation in
//! ctrlrun's order, containment on every dimension, transitive revocation, expiry at the instant,
//! hops, unreadable rows, and the flatness of one evaluation's reads.

use std::collections::BTreeSet;

use serde_json::json;
use warden::action::{new_id, IdKind};
use warden::authority::revoke::{beneath, created_by, descendants, parse_created_by};
use warden::authority::{
    evaluate, parse_instant, plan_delegation, plan_revocation, Authority, AuthorityReason, AuthorityResult, Call,
    CreatedVia, CreationError, CreationReason, DelegationRecord, Dimension, Grant, MemorySource, Proposal,
    RevocationError, RevocationPlan, StoredDelegation,
};
use warden::document::{load_grant_str, load_str};
use warden::{Action, Principal};

/// 2026-11-01T00:00:00Z
fn t0() -> i64 {
    parse_instant("2026-11-01T00:00:00Z").unwrap()
}

const HOUR: i64 = 3_600_000_000;

fn authority(section: &str) -> Authority {
    let text = format!("schema: warden/v1\nauthority:\n{section}");
    load_str(&text, "test.yaml").unwrap_or_else(|e| panic!("{e}\n{text}")).authority_config.unwrap()
}

fn grant(yaml: &str) -> Grant {
    load_grant_str(yaml, "grant.yaml").unwrap_or_else(|e| panic!("{e}\n{yaml}"))
}

fn principal(agent: &str, user: Option<&str>) -> Principal {
    Principal::new(agent, user).unwrap()
}

fn action(name: &str, arguments: serde_json::Value, who: &Principal, resource: Option<&str>) -> Action {
    Action::new(name, arguments, who.clone(), resource, "production").unwrap()
}

fn decide(authority: &Authority, action: &Action, now: i64, source: &MemorySource) -> AuthorityResult {
    evaluate(authority, &Call::new(action, now), source).unwrap()
}

/// Create a delegation through the planner and store it; panics on a refusal.
fn delegate(
    authority: &Authority,
    source: &mut MemorySource,
    parent: &str,
    child: &str,
    by: &Principal,
    now: i64,
) -> String {
    let child = grant(child);
    let id = new_id(IdKind::Delegation).unwrap();
    let proposal =
        Proposal { parent_id: parent, grant: &child, by, by_expires_at: None, via: CreatedVia::Api, now, new_id: &id };
    let planned = plan_delegation(authority, &proposal, source).unwrap_or_else(|e| panic!("{e}"));
    source.insert(planned.record, &planned.index_keys).unwrap();
    id
}

fn refusal(
    authority: &Authority,
    source: &MemorySource,
    parent: &str,
    child: &Grant,
    by: &Principal,
    by_expires_at: Option<i64>,
    now: i64,
) -> (CreationReason, Option<Dimension>) {
    let id = new_id(IdKind::Delegation).unwrap();
    let proposal =
        Proposal { parent_id: parent, grant: child, by, by_expires_at, via: CreatedVia::Cli, now, new_id: &id };
    match plan_delegation(authority, &proposal, source) {
        Err(CreationError::Refused(refused)) => {
            assert!(!refused.message.is_empty());
            assert_eq!(refused.parent_id, parent);
            (refused.reason, refused.dimension)
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

const FINANCE: &str = r#"
  grants:
    - id: head-of-finance
      subject: { agent: "finance-*", user: alice }
      actions: ["stripe.**"]
      resources: ["customer:*"]
      constraints: { amount_lte: 2500000 }
      environments: [production, staging]
      expires_at: "2026-12-01T00:00:00Z"
      delegable: true
      tasks: ["quarter-close:*"]
      budgets: [{ metric: amount, limit: 10000000, window: P1D }]
    - id: readers
      subject: { agent: "*" }
      actions: ["customer.read", "customer.list"]
"#;

#[test]
fn grant_matching_table() {
    let a = authority(FINANCE);
    let alice_fin = principal("finance-7", Some("alice"));
    let bob_fin = principal("finance-7", Some("bob"));
    let alone = principal("finance-7", None);
    let source = MemorySource::new();
    let call =
        |name: &str, args: serde_json::Value, who: &Principal, resource: Option<&str>, task: Option<&str>, now: i64| {
            let act = action(name, args, who, resource);
            let result = evaluate(&a, &Call { task, ..Call::new(&act, now) }, &source).unwrap();
            (result.reason.as_str().to_owned(), result.grant_id)
        };
    let refund = json!({"amount": 200000});
    let grant_id = |id: &str| Some(id.to_owned());
    type Outcome = (String, Option<String>);
    type Row<'a> = (&'a str, Outcome, (&'a str, Option<String>));
    let rows: Vec<Row<'_>> = vec![
        (
            "covered",
            call("stripe.refund", refund.clone(), &alice_fin, Some("customer:acme"), Some("quarter-close:q4"), t0()),
            ("authority_grant", grant_id("head-of-finance")),
        ),
        (
            "deep action",
            call(
                "stripe.refund.partial",
                refund.clone(),
                &alice_fin,
                Some("customer:acme"),
                Some("quarter-close:q4"),
                t0(),
            ),
            ("authority_grant", grant_id("head-of-finance")),
        ),
        (
            "other user",
            call("stripe.refund", refund.clone(), &bob_fin, Some("customer:acme"), Some("quarter-close:q4"), t0()),
            ("no_authority", None),
        ),
        (
            "agent alone",
            call("stripe.refund", refund.clone(), &alone, Some("customer:acme"), Some("quarter-close:q4"), t0()),
            ("no_authority", None),
        ),
        (
            "other agent",
            call(
                "stripe.refund",
                refund.clone(),
                &principal("support-1", Some("alice")),
                Some("customer:acme"),
                Some("quarter-close:q4"),
                t0(),
            ),
            ("no_authority", None),
        ),
        (
            "no resource",
            call("stripe.refund", refund.clone(), &alice_fin, None, Some("quarter-close:q4"), t0()),
            ("no_authority", None),
        ),
        (
            "other resource",
            call("stripe.refund", refund.clone(), &alice_fin, Some("vendor:acme"), Some("quarter-close:q4"), t0()),
            ("no_authority", None),
        ),
        (
            "nested resource",
            call("stripe.refund", refund.clone(), &alice_fin, Some("customer:acme:eu"), Some("quarter-close:q4"), t0()),
            ("no_authority", None),
        ),
        (
            "case differs",
            call("Stripe.refund", refund.clone(), &alice_fin, Some("customer:acme"), Some("quarter-close:q4"), t0()),
            ("no_authority", None),
        ),
        (
            "over constraint",
            call(
                "stripe.refund",
                json!({"amount": 2500001}),
                &alice_fin,
                Some("customer:acme"),
                Some("quarter-close:q4"),
                t0(),
            ),
            ("authority_constraint", grant_id("head-of-finance")),
        ),
        (
            "constraint argument missing",
            call("stripe.refund", json!({}), &alice_fin, Some("customer:acme"), Some("quarter-close:q4"), t0()),
            ("authority_constraint", grant_id("head-of-finance")),
        ),
        (
            "no task",
            call("stripe.refund", refund.clone(), &alice_fin, Some("customer:acme"), None, t0()),
            ("authority_task", grant_id("head-of-finance")),
        ),
        (
            "other task",
            call("stripe.refund", refund.clone(), &alice_fin, Some("customer:acme"), Some("payroll:q4"), t0()),
            ("authority_task", grant_id("head-of-finance")),
        ),
        (
            "expired and over",
            call(
                "stripe.refund",
                json!({"amount": 9999999}),
                &alice_fin,
                Some("customer:acme"),
                None,
                parse_instant("2026-12-02T00:00:00Z").unwrap(),
            ),
            ("authority_expired", grant_id("head-of-finance")),
        ),
        (
            "read by anyone",
            call("customer.read", json!({}), &principal("bot", None), None, None, t0()),
            ("authority_grant", grant_id("readers")),
        ),
        (
            "unlisted read",
            call("customer.delete", json!({}), &principal("bot", None), None, None, t0()),
            ("no_authority", None),
        ),
    ];
    for (name, actual, (reason, id)) in rows {
        assert_eq!(actual, (reason.to_owned(), id), "{name}");
    }
}

#[test]
fn environments_match_by_exact_name() {
    let a = authority(FINANCE);
    let who = principal("finance-7", Some("alice"));
    let act =
        Action::new("stripe.refund", json!({"amount": 1}), who, Some("customer:acme"), "production-canary").unwrap();
    let result =
        evaluate(&a, &Call { task: Some("quarter-close:q4"), ..Call::new(&act, t0()) }, &MemorySource::new()).unwrap();
    assert_eq!(result.reason, AuthorityReason::NoAuthority);
}

#[test]
fn the_smallest_passing_grant_id_wins_whatever_the_document_order() {
    let forward = authority(
        r#"
  grants:
    - { id: b-grant, subject: { agent: bot }, actions: ["x.y"] }
    - { id: a-grant, subject: { agent: "b*" }, actions: ["x.*"] }
    - { id: B-grant, subject: { agent: bot }, actions: ["**"] }
"#,
    );
    let act = action("x.y", json!({}), &principal("bot", None), None);
    let result = decide(&forward, &act, t0(), &MemorySource::new());
    // Code-point order: uppercase sorts before lowercase.
    assert_eq!(result.grant_id.as_deref(), Some("B-grant"));
    assert!(result.passed);
}

#[test]
fn failures_report_the_first_reason_in_precedence_order_from_the_smallest_id() {
    let a = authority(
        r#"
  grants:
    - { id: z-constraint, subject: { agent: bot }, actions: ["x.y"], constraints: { n_lt: 5 } }
    - { id: y-expired, subject: { agent: bot }, actions: ["x.y"], expires_at: "2026-10-01T00:00:00Z" }
    - { id: x-task, subject: { agent: bot }, actions: ["x.y"], tasks: ["run-*"] }
    - { id: w-expired, subject: { agent: bot }, actions: ["x.y"], expires_at: "2026-10-01T00:00:00Z", constraints: { n_lt: 5 } }
"#,
    );
    let act = action("x.y", json!({"n": 9}), &principal("bot", None), None);
    let result = decide(&a, &act, t0(), &MemorySource::new());
    assert_eq!((result.reason, result.grant_id.as_deref()), (AuthorityReason::Expired, Some("w-expired")));
    let fits = action("x.y", json!({"n": 1}), &principal("bot", None), None);
    assert_eq!(decide(&a, &fits, t0(), &MemorySource::new()).grant_id.as_deref(), Some("z-constraint"));
}

#[test]
fn the_instant_of_expiry_is_valid_and_one_microsecond_later_is_refused() {
    let a = authority(
        r#"
  grants:
    - { id: g, subject: { agent: bot }, actions: ["x.y"], expires_at: "2026-11-01T00:00:00Z", delegable: true }
"#,
    );
    let act = action("x.y", json!({}), &principal("bot", None), None);
    let source = MemorySource::new();
    assert_eq!(decide(&a, &act, t0(), &source).reason, AuthorityReason::Grant);
    assert_eq!(decide(&a, &act, t0() + 1, &source).reason, AuthorityReason::Expired);

    // The same boundary through a delegation, and for creating one.
    let mut source = MemorySource::new();
    let bot = principal("bot", None);
    let child = delegate(
        &a,
        &mut source,
        "g",
        r#"{subject: {agent: helper}, actions: ["x.y"], expires_at: "2026-11-01T00:00:00Z"}"#,
        &bot,
        t0() - HOUR,
    );
    let helper = action("x.y", json!({}), &principal("helper", None), None);
    let at = decide(&a, &helper, t0(), &source);
    assert_eq!((at.reason, at.grant_id.as_deref()), (AuthorityReason::Grant, Some(child.as_str())));
    let after = decide(&a, &helper, t0() + 1, &source);
    assert_eq!(after.reason, AuthorityReason::Escalation, "the expired root is named as the lapsed ancestor");
    assert_eq!(after.expired_parent_id.as_deref(), Some("g"));
    let late = grant(r#"{subject: {agent: other}, actions: ["x.y"], expires_at: "2026-11-01T00:00:00Z"}"#);
    assert_eq!(refusal(&a, &source, "g", &late, &bot, None, t0() + 1), (CreationReason::ParentNotValid, None));
    let id = new_id(IdKind::Delegation).unwrap();
    let ok = Proposal {
        parent_id: "g",
        grant: &late,
        by: &bot,
        by_expires_at: Some(t0()),
        via: CreatedVia::Api,
        now: t0(),
        new_id: &id,
    };
    assert!(plan_delegation(&a, &ok, &source).is_ok(), "the creator's expiry instant is valid too");
    assert_eq!(refusal(&a, &source, "g", &late, &bot, Some(t0() - 1), t0()), (CreationReason::PrincipalExpired, None));
}

const ESCALATION: &str = r#"
  max_delegation_depth: 3
  grants:
    - id: human
      subject: { agent: "finance-*" }
      actions: ["stripe.refund"]
      resources: ["customer:*"]
      constraints: { amount_lte: 10000000 }
      environments: [production]
      expires_at: "2026-12-01T00:00:00Z"
      delegable: true
      tasks: ["close:*"]
      budgets: [{ metric: amount, limit: 20000000, window: P1D }]
    - id: fixed
      subject: { agent: "finance-*" }
      actions: ["stripe.refund"]
      expires_at: "2026-12-01T00:00:00Z"
"#;

/// A child of `human` contained on every dimension, with one line replaced.
fn child_of_human(replace: Option<(&str, &str)>) -> String {
    let lines = [
        ("subject", "subject: { agent: support-1 }"),
        ("actions", "actions: [\"stripe.refund\"]"),
        ("resources", "resources: [\"customer:acme\"]"),
        ("constraints", "constraints: { amount_lte: 2500000 }"),
        ("environments", "environments: [production]"),
        ("expires_at", "expires_at: \"2026-11-15T00:00:00Z\""),
        ("tasks", "tasks: [\"close:q4\"]"),
        ("budgets", "budgets: [{ metric: amount, limit: 500000, window: P1D }]"),
    ];
    let mut out = String::new();
    for (key, line) in lines {
        match replace {
            Some((k, replacement)) if k == key => {
                if !replacement.is_empty() {
                    out.push_str(replacement);
                    out.push('\n');
                }
            }
            _ => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

#[test]
fn widening_or_omitting_each_dimension_is_refused_with_that_dimension() {
    let a = authority(ESCALATION);
    let source = MemorySource::new();
    let by = principal("finance-1", None);
    let now = t0();
    let contained = grant(&child_of_human(None));
    let id = new_id(IdKind::Delegation).unwrap();
    let proposal = Proposal {
        parent_id: "human",
        grant: &contained,
        by: &by,
        by_expires_at: None,
        via: CreatedVia::Api,
        now,
        new_id: &id,
    };
    assert!(plan_delegation(&a, &proposal, &source).is_ok(), "the positive control is contained on every dimension");

    let widened = [
        (Dimension::Subject, "subject: { agent: \"support-*\" }"),
        (Dimension::Actions, "actions: [\"stripe.*\"]"),
        (Dimension::Resources, "resources: [\"customer:*\", \"vendor:*\"]"),
        (Dimension::Constraints, "constraints: { amount_lte: 10000001 }"),
        (Dimension::Environments, "environments: [production, staging]"),
        (Dimension::ExpiresAt, "expires_at: \"2026-12-01T00:00:00.000001Z\""),
        (Dimension::Tasks, "tasks: [\"close:*\", \"payroll:*\"]"),
        (Dimension::Budgets, "budgets: [{ metric: amount, limit: 20000000, window: PT23H }]"),
    ];
    for (dimension, line) in widened {
        let child = grant(&child_of_human(Some((dimension.as_str(), line))));
        assert_eq!(
            refusal(&a, &source, "human", &child, &by, None, now),
            (CreationReason::Containment, Some(dimension)),
            "widening {dimension}"
        );
    }
    for dimension in Dimension::ALL {
        if dimension == Dimension::Actions {
            continue; // actions are required of every grant: omitting them is a malformed grant
        }
        // A grant needs a subject, so "omitting" it means naming no agent, only a user.
        let replacement = if dimension == Dimension::Subject { "subject: { user: carol }" } else { "" };
        let child = grant(&child_of_human(Some((dimension.as_str(), replacement))));
        assert_eq!(
            refusal(&a, &source, "human", &child, &by, None, now),
            (CreationReason::Containment, Some(dimension)),
            "omitting {dimension}"
        );
    }
    let no_actions = grant(&child_of_human(None));
    let mut no_actions = no_actions;
    no_actions.actions.clear();
    let id = new_id(IdKind::Delegation).unwrap();
    let proposal = Proposal {
        parent_id: "human",
        grant: &no_actions,
        by: &by,
        by_expires_at: None,
        via: CreatedVia::Api,
        now,
        new_id: &id,
    };
    assert!(matches!(plan_delegation(&a, &proposal, &source), Err(CreationError::InvalidGrant(_))));
}

#[test]
fn every_creation_refusal_names_its_reason_in_ctrlrun_s_order() {
    let a = authority(ESCALATION);
    let mut source = MemorySource::new();
    let by = principal("finance-1", None);
    let now = t0();
    let child = grant(&child_of_human(None));
    let mut with_id = child.clone();
    with_id.id = "mine".into();

    assert_eq!(
        refusal(&a, &source, "human", &child, &by, Some(now - 1), now),
        (CreationReason::PrincipalExpired, None)
    );
    assert_eq!(refusal(&a, &source, "human", &with_id, &by, None, now), (CreationReason::IdAssigned, None));
    assert_eq!(refusal(&a, &source, "nobody", &child, &by, None, now), (CreationReason::UnknownParent, None));
    assert_eq!(
        refusal(&a, &source, "dlg_00000000000000000000000000000000", &child, &by, None, now),
        (CreationReason::UnknownParent, None)
    );
    assert_eq!(refusal(&a, &source, "fixed", &child, &by, None, now), (CreationReason::ParentNotDelegable, None));
    let december = parse_instant("2026-12-01T00:00:00.000001Z").unwrap();
    assert_eq!(refusal(&a, &source, "human", &child, &by, None, december), (CreationReason::ParentNotValid, None));
    assert_eq!(
        refusal(&a, &source, "human", &child, &principal("support-1", None), None, now),
        (CreationReason::NotTheSubject, None)
    );

    // A delegable chain of three reaches the bound; a fourth link is refused max_depth.
    let links = [("finance-1", "finance-2"), ("finance-2", "finance-3"), ("finance-3", "finance-4")];
    let mut parent = "human".to_owned();
    for (from, to) in links {
        let text = format!(
            "{{subject: {{agent: {to}}}, actions: [\"stripe.refund\"], resources: [\"customer:*\"], constraints: {{amount_lte: 10000000}}, environments: [production], expires_at: \"2026-11-30T00:00:00Z\", delegable: true, tasks: [\"close:*\"], budgets: [{{metric: amount, limit: 20000000, window: P1D}}]}}"
        );
        parent = delegate(&a, &mut source, &parent, &text, &principal(from, None), now);
    }
    let deeper = grant(&child_of_human(Some(("subject", "subject: { agent: finance-5 }"))));
    assert_eq!(
        refusal(&a, &source, &parent, &deeper, &principal("finance-4", None), None, now),
        (CreationReason::MaxDepth, None)
    );

    // A revoked parent is not live; a parent under a revoked one is no longer valid.
    let first = source.all().into_iter().find(|row| row.record.parent_id == "human").unwrap().record.delegation_id;
    let second = source.all().into_iter().find(|row| row.record.parent_id == first).unwrap().record.delegation_id;
    let RevocationPlan::Revoke(row) = plan_revocation(&source, &first, Some("ops"), now).unwrap() else { panic!() };
    assert!(source.revoke(row).unwrap());
    assert_eq!(
        refusal(&a, &source, &first, &deeper, &principal("finance-2", None), None, now),
        (CreationReason::UnknownParent, None)
    );
    assert_eq!(
        refusal(&a, &source, &second, &deeper, &principal("finance-3", None), None, now),
        (CreationReason::ParentNotValid, None)
    );
}

#[test]
fn a_delegation_records_how_it_was_created_and_its_depth() {
    let a = authority(ESCALATION);
    let mut source = MemorySource::new();
    let id = delegate(&a, &mut source, "human", &child_of_human(None), &principal("finance-1", None), t0());
    let row = source.all().pop().unwrap();
    assert_eq!(row.record.delegation_id, id);
    assert_eq!(row.record.created_via, "api");
    assert_eq!(row.record.depth, 1);
    assert_eq!(row.record.created_by, principal("finance-1", None));
    assert!(id.starts_with("dlg_") && id.len() == 36);
}

/// root → d1 → d2 → d3, each a contained, delegable link.
fn depth_three(a: &Authority, source: &mut MemorySource) -> [String; 3] {
    let link = |agent: &str| {
        format!(
            "{{subject: {{agent: {agent}}}, actions: [\"stripe.refund\"], resources: [\"customer:*\"], constraints: {{amount_lte: 10000000}}, environments: [production], expires_at: \"2026-11-30T00:00:00Z\", delegable: true, tasks: [\"close:*\"], budgets: [{{metric: amount, limit: 20000000, window: P1D}}]}}"
        )
    };
    let d1 = delegate(a, source, "human", &link("finance-2"), &principal("finance-1", None), t0());
    let d2 = delegate(a, source, &d1, &link("finance-3"), &principal("finance-2", None), t0());
    let d3 = delegate(a, source, &d2, &link("support-1"), &principal("finance-3", None), t0());
    [d1, d2, d3]
}

#[test]
fn revoking_the_first_link_cuts_a_depth_three_chain() {
    let a = authority(ESCALATION);
    let mut source = MemorySource::new();
    let [d1, d2, d3] = depth_three(&a, &mut source);
    let refund = action("stripe.refund", json!({"amount": 100}), &principal("support-1", None), Some("customer:acme"));
    let call = Call { task: Some("close:q4"), ..Call::new(&refund, t0()) };
    let before = evaluate(&a, &call, &source).unwrap();
    assert_eq!(
        (before.reason, before.grant_id.as_deref(), before.depth),
        (AuthorityReason::Grant, Some(d3.as_str()), 3)
    );
    assert_eq!(before.delegation_id.as_deref(), Some(d3.as_str()));

    let RevocationPlan::Revoke(row) = plan_revocation(&source, &d1, Some("ops"), t0()).unwrap() else {
        panic!("a live delegation is revoked")
    };
    assert!(source.revoke(row).unwrap());
    let after = evaluate(&a, &call, &source).unwrap();
    assert_eq!((after.reason, after.grant_id.as_deref()), (AuthorityReason::Revoked, Some(d3.as_str())));
    // Nothing beneath was rewritten: d2 and d3 carry no revocation of their own.
    assert!(source.all().iter().filter(|row| row.revocation.is_some()).all(|row| row.record.delegation_id == d1));

    // Idempotent: the second revocation plans nothing; an unknown id is an error.
    assert_eq!(
        plan_revocation(&source, &d1, Some("ops"), t0() + 5).unwrap(),
        RevocationPlan::AlreadyRevoked { revoked_at: t0() }
    );
    assert!(matches!(
        plan_revocation(&source, "dlg_ffffffffffffffffffffffffffffffff", None, t0()),
        Err(RevocationError::Unknown(_))
    ));

    // The sweeps: everything strictly beneath d1, and everything finance-2 created.
    let rows = source.all();
    let under: BTreeSet<&str> = beneath(&rows, &d1).iter().map(|r| r.record.delegation_id.as_str()).collect();
    assert_eq!(under, BTreeSet::from([d2.as_str(), d3.as_str()]));
    assert_eq!(
        descendants(&source, &d1).unwrap().into_iter().collect::<BTreeSet<_>>(),
        BTreeSet::from([d2.clone(), d3.clone()])
    );
    let made: Vec<&str> =
        created_by(&rows, "finance-2", None).iter().map(|r| r.record.delegation_id.as_str()).collect();
    assert_eq!(made, [d2.as_str()]);
    assert_eq!(parse_created_by("finance-2/alice").unwrap(), ("finance-2".into(), Some("alice".into())));
    assert!(parse_created_by("finance-2/").is_err());
    assert!(parse_created_by("a/b/c").is_err());
    assert!(parse_created_by("/b").is_err());
}

#[test]
fn a_narrowed_root_narrows_every_delegation_beneath_it() {
    let a = authority(ESCALATION);
    let mut source = MemorySource::new();
    let [_, _, d3] = depth_three(&a, &mut source);
    let narrowed = authority(&ESCALATION.replace("amount_lte: 10000000", "amount_lte: 100"));
    let refund = action("stripe.refund", json!({"amount": 100}), &principal("support-1", None), Some("customer:acme"));
    let call = Call { task: Some("close:q4"), ..Call::new(&refund, t0()) };
    let result = evaluate(&narrowed, &call, &source).unwrap();
    assert_eq!(
        (result.reason, result.dimension, result.grant_id.as_deref()),
        (AuthorityReason::Escalation, Some(Dimension::Constraints), Some(d3.as_str()))
    );
    let undelegable = authority(&ESCALATION.replacen("delegable: true", "delegable: false", 1));
    assert_eq!(evaluate(&undelegable, &call, &source).unwrap().reason, AuthorityReason::Escalation);
    let shallow = authority(&ESCALATION.replace("max_delegation_depth: 3", "max_delegation_depth: 2"));
    let result = evaluate(&shallow, &call, &source).unwrap();
    assert_eq!((result.reason, result.depth_exceeded), (AuthorityReason::Escalation, Some(3)));
    let off = authority(&ESCALATION.replace("max_delegation_depth: 3", "max_delegation_depth: 0"));
    let mut single = MemorySource::new();
    let link = child_of_human(Some(("subject", "subject: { agent: support-9 }")));
    let d1 = delegate(&a, &mut single, "human", &link, &principal("finance-1", None), t0());
    let holder = action("stripe.refund", json!({"amount": 100}), &principal("support-9", None), Some("customer:acme"));
    let call = Call { task: Some("close:q4"), ..Call::new(&holder, t0()) };
    assert_eq!(evaluate(&a, &call, &single).unwrap().grant_id.as_deref(), Some(d1.as_str()));
    let result = evaluate(&off, &call, &single).unwrap();
    assert_eq!(
        (result.reason, result.depth_exceeded),
        (AuthorityReason::Escalation, Some(1)),
        "depth 0 switches delegation off"
    );
}

#[test]
fn a_hop_makes_one_delegation_the_only_candidate() {
    let a = authority(
        r#"
  grants:
    - { id: mine, subject: { agent: support-1 }, actions: ["**"] }
    - { id: issuer, subject: { agent: finance-1 }, actions: ["stripe.refund"], expires_at: "2026-12-01T00:00:00Z", delegable: true, constraints: { amount_lte: 1000 } }
"#,
    );
    let mut source = MemorySource::new();
    let hop = delegate(
        &a,
        &mut source,
        "issuer",
        r#"{subject: {agent: support-1}, actions: ["stripe.refund"], constraints: {amount_lte: 500}, expires_at: "2026-11-02T00:00:00Z"}"#,
        &principal("finance-1", None),
        t0(),
    );
    let support = principal("support-1", None);
    let over = action("stripe.refund", json!({"amount": 700}), &support, None);
    assert_eq!(
        decide(&a, &over, t0(), &source).grant_id.as_deref(),
        Some("mine"),
        "without the hop its own grant decides"
    );
    let under_hop =
        |act: &Action, hop: &str| evaluate(&a, &Call { hop: Some(hop), ..Call::new(act, t0()) }, &source).unwrap();
    let result = under_hop(&over, &hop);
    assert_eq!(
        (result.reason, result.grant_id.as_deref(), result.hop.as_deref()),
        (AuthorityReason::Constraint, Some(hop.as_str()), Some(hop.as_str()))
    );
    let fits = action("stripe.refund", json!({"amount": 400}), &support, None);
    assert_eq!(under_hop(&fits, &hop).reason, AuthorityReason::Grant);
    let other = action("stripe.charge", json!({"amount": 400}), &support, None);
    let result = under_hop(&other, &hop);
    assert_eq!(
        (result.reason, result.dimension, result.grant_id.as_deref()),
        (AuthorityReason::Hop, Some(Dimension::Actions), Some(hop.as_str()))
    );
    let result = under_hop(&fits, "dlg_0123456789abcdef0123456789abcdef");
    assert_eq!((result.reason, result.grant_id), (AuthorityReason::Hop, None));
}

fn raw_row(id: &str, parent: &str, grant_json: &str, via: &str) -> DelegationRecord {
    DelegationRecord {
        delegation_id: id.into(),
        parent_id: parent.into(),
        depth: 1,
        grant_json: grant_json.into(),
        created_by: principal("finance-1", None),
        created_via: via.into(),
        created_at: t0(),
    }
}

#[test]
fn an_unreadable_candidate_denies_rather_than_being_skipped() {
    let a = authority(
        r#"
  grants:
    - { id: broad, subject: { agent: "*" }, actions: ["**"], expires_at: "2026-12-01T00:00:00Z", delegable: true }
"#,
    );
    let good = grant(r#"{subject: {agent: bot}, actions: ["x.y"], expires_at: "2026-11-30T00:00:00Z"}"#);
    let good_json = warden::authority::grant_to_json(&good);
    let keys = warden::authority::source::index_keys(&good);
    let act = action("x.y", json!({}), &principal("bot", None), None);
    let cases = [
        ("unknown created_via", raw_row("dlg_11111111111111111111111111111111", "broad", &good_json, "break-glass")),
        ("not json", raw_row("dlg_22222222222222222222222222222222", "broad", "{", "api")),
        (
            "float constraint",
            raw_row(
                "dlg_33333333333333333333333333333333",
                "broad",
                &good_json.replace("\"constraints\":{}", "\"constraints\":{\"n_lt\":1.5}"),
                "api",
            ),
        ),
        (
            "unknown key",
            raw_row(
                "dlg_44444444444444444444444444444444",
                "broad",
                &good_json.replace("\"delegable\"", "\"admin\":true,\"delegable\""),
                "api",
            ),
        ),
        ("bad id", raw_row("head-of-finance", "broad", &good_json, "api")),
        (
            "invalid pattern",
            raw_row("dlg_55555555555555555555555555555555", "broad", &good_json.replace("x.y", "x.*y"), "api"),
        ),
    ];
    for (name, row) in cases {
        let id = row.delegation_id.clone();
        let mut source = MemorySource::new();
        source.insert(row, &keys).unwrap();
        let result = decide(&a, &act, t0(), &source);
        assert_eq!(
            (result.reason, result.delegation_id.as_deref()),
            (AuthorityReason::Unreadable, Some(id.as_str())),
            "{name}"
        );
        assert!(!result.passed, "{name}: the broad root grant must not authorise past an unreadable row");
    }
}

#[test]
fn a_missing_parent_and_a_cycle_are_refused_with_their_evidence() {
    let a = authority(r"  grants: []");
    let child = grant(r#"{subject: {agent: bot}, actions: ["x.y"]}"#);
    let json_text = warden::authority::grant_to_json(&child);
    let keys = warden::authority::source::index_keys(&child);
    let act = action("x.y", json!({}), &principal("bot", None), None);

    let mut orphan = MemorySource::new();
    orphan.insert(raw_row("dlg_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "gone", &json_text, "api"), &keys).unwrap();
    let result = decide(&a, &act, t0(), &orphan);
    assert_eq!((result.reason, result.missing_parent_id.as_deref()), (AuthorityReason::Escalation, Some("gone")));

    let mut looped = MemorySource::new();
    looped
        .insert(
            raw_row("dlg_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "dlg_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", &json_text, "api"),
            &keys,
        )
        .unwrap();
    looped
        .insert(
            raw_row("dlg_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", "dlg_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", &json_text, "cli"),
            &BTreeSet::new(),
        )
        .unwrap();
    let result = decide(&a, &act, t0(), &looped);
    assert_eq!(
        (result.reason, result.cycle_at.as_deref()),
        (AuthorityReason::Unreadable, Some("dlg_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"))
    );
}

#[test]
fn rows_are_insert_only() {
    let mut source = MemorySource::new();
    let child = grant(r#"{subject: {agent: bot}, actions: ["x.y"]}"#);
    let row = raw_row("dlg_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "g", &warden::authority::grant_to_json(&child), "api");
    source.insert(row.clone(), &BTreeSet::new()).unwrap();
    assert!(source.insert(row, &BTreeSet::new()).is_err());
}

/// `n` delegations for other agents and actions, loaded in bulk (no planner, no checks).
fn crowd(source: &mut MemorySource, n: usize) {
    let template =
        grant(r#"{subject: {agent: someone}, actions: ["stripe.refund"], expires_at: "2026-11-30T00:00:00Z"}"#);
    for i in 0..n {
        let mut g = template.clone();
        g.subject.agent = Some(format!("agent-{i}"));
        g.actions = vec![if i % 2 == 0 { "stripe.refund" } else { "mail.send" }.to_owned()];
        let text = warden::authority::grant_to_json(&g);
        let id = format!("dlg_{i:032x}");
        source.insert(raw_row(&id, "human", &text, "api"), &warden::authority::source::index_keys(&g)).unwrap();
    }
}

#[test]
fn one_evaluation_reads_the_same_rows_with_ten_or_a_hundred_thousand_delegations() {
    let a = authority(ESCALATION);
    let mut reads = Vec::new();
    for n in [10, 100_000] {
        let mut source = MemorySource::new();
        crowd(&mut source, n);
        let [_, _, d3] = depth_three(&a, &mut source);
        assert_eq!(source.len(), n + 3);
        let refund =
            action("stripe.refund", json!({"amount": 100}), &principal("support-1", None), Some("customer:acme"));
        source.reset_reads();
        let result = evaluate(&a, &Call { task: Some("close:q4"), ..Call::new(&refund, t0()) }, &source).unwrap();
        assert_eq!(result.grant_id.as_deref(), Some(d3.as_str()));
        reads.push(source.reads());
    }
    assert_eq!(reads[0], reads[1], "reads per evaluation: {reads:?}");
    assert!(reads[0] <= 8, "two index reads, the candidate, and a chain of two parents: {reads:?}");
}

#[test]
fn listing_rows_round_trips_the_stored_grant() {
    let g = grant(&child_of_human(None));
    let text = warden::authority::grant_to_json(&g);
    let mut back = warden::authority::grant_from_json(&text, "dlg_00000000000000000000000000000001").unwrap();
    back.id.clear();
    assert_eq!(back, g);
    let stored = StoredDelegation {
        record: raw_row("dlg_00000000000000000000000000000001", "human", &text, "hop"),
        revocation: None,
    };
    let parsed = warden::authority::record::parse_delegation(&stored).unwrap();
    assert_eq!(parsed.created_via, CreatedVia::Hop);
}

#[test]
fn every_result_under_a_hop_names_the_hop_refused_or_unreadable() {
    let a = authority(
        r#"
  grants:
    - { id: issuer, subject: { agent: finance-1 }, actions: ["stripe.refund"], expires_at: "2026-12-01T00:00:00Z", delegable: true }
"#,
    );
    let mut source = MemorySource::new();
    let hop = delegate(
        &a,
        &mut source,
        "issuer",
        r#"{subject: {agent: support-1}, actions: ["stripe.refund"], expires_at: "2026-11-02T00:00:00Z"}"#,
        &principal("finance-1", None),
        t0(),
    );
    let broken = "dlg_22222222222222222222222222222222";
    source.insert(raw_row(broken, "issuer", "{", "api"), &BTreeSet::new()).unwrap();
    let support = principal("support-1", None);
    let under_hop =
        |act: &Action, hop: &str| evaluate(&a, &Call { hop: Some(hop), ..Call::new(act, t0()) }, &source).unwrap();

    let other = action("stripe.charge", json!({}), &support, None);
    let refused = under_hop(&other, &hop);
    assert_eq!((refused.reason, refused.hop.as_deref()), (AuthorityReason::Hop, Some(hop.as_str())));
    let refund = action("stripe.refund", json!({}), &support, None);
    let unknown = "dlg_0123456789abcdef0123456789abcdef";
    let refused = under_hop(&refund, unknown);
    assert_eq!((refused.reason, refused.hop.as_deref()), (AuthorityReason::Hop, Some(unknown)));
    let unreadable = under_hop(&refund, broken);
    assert_eq!(
        (unreadable.reason, unreadable.delegation_id.as_deref(), unreadable.hop.as_deref()),
        (AuthorityReason::Unreadable, Some(broken), Some(broken))
    );
    assert!(!unreadable.passed);
}

#[test]
fn a_pass_through_a_delegation_lists_its_chain_leaf_first_and_a_root_pass_none() {
    let a = authority(ESCALATION);
    let mut source = MemorySource::new();
    let [d1, d2, d3] = depth_three(&a, &mut source);
    let refund = action("stripe.refund", json!({"amount": 100}), &principal("support-1", None), Some("customer:acme"));
    let result = evaluate(&a, &Call { task: Some("close:q4"), ..Call::new(&refund, t0()) }, &source).unwrap();
    assert_eq!((result.reason, result.grant_id.as_deref()), (AuthorityReason::Grant, Some(d3.as_str())));
    assert_eq!(result.chain, [d3, d2, d1]);
    let root = action("stripe.refund", json!({"amount": 100}), &principal("finance-1", None), Some("customer:acme"));
    let result = evaluate(&a, &Call { task: Some("close:q4"), ..Call::new(&root, t0()) }, &source).unwrap();
    assert_eq!((result.reason, result.grant_id.as_deref(), result.depth), (AuthorityReason::Grant, Some("fixed"), 0));
    assert!(result.chain.is_empty() && result.delegation_id.is_none());
}

#[test]
fn a_failing_delegation_names_itself_and_its_walked_depth() {
    let a = authority(ESCALATION);
    let mut source = MemorySource::new();
    let [_, _, d3] = depth_three(&a, &mut source);
    let over =
        action("stripe.refund", json!({"amount": 10000001}), &principal("support-1", None), Some("customer:acme"));
    let result = evaluate(&a, &Call { task: Some("close:q4"), ..Call::new(&over, t0()) }, &source).unwrap();
    assert_eq!(
        (result.reason, result.grant_id.as_deref(), result.delegation_id.as_deref(), result.depth),
        (AuthorityReason::Constraint, Some(d3.as_str()), Some(d3.as_str()), 3)
    );
}

#[test]
fn a_constraint_on_a_missing_argument_is_refused_with_a_warning() {
    let a = authority(ESCALATION);
    let source = MemorySource::new();
    let bare = action("stripe.refund", json!({}), &principal("finance-1", None), Some("customer:acme"));
    let result = evaluate(&a, &Call { task: Some("close:q4"), ..Call::new(&bare, t0()) }, &source).unwrap();
    assert_eq!(result.grant_id.as_deref(), Some("fixed"), "the grant with no constraint still passes");
    assert_eq!(result.warnings.len(), 1, "{:?}", result.warnings);
    assert!(result.warnings[0].contains("amount"), "{:?}", result.warnings);
}
