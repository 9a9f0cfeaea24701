//! The `authority:` section as a document states it: typed grants, closed key sets, errors that
//! name the path and the line, a standalone authority file, a delegated grant file, the policy
//! hash, and the pipeline deciding on root grants before policy.

mod common;

use std::sync::Arc;

use common::T0;
use warden::document::{load_authority_str, load_grant_str, load_str, DocumentError};
use warden::pipeline::{ActionRequest, Warden, WardenOptions};
use warden::{Error, ManualClock, Principal};

const HEAD: &str = "schema: warden/v1\nactions:\n  stripe.refund:\n    effect: \"refund:{payment_id}\"\n    decision: allow\n  customer.read:\n    decision: allow\n";

fn with_authority(section: &str) -> String {
    format!("{HEAD}authority:\n{section}")
}

fn refused(section: &str) -> DocumentError {
    match load_str(&with_authority(section), "doc.yaml") {
        Ok(_) => panic!("must be refused:\n{section}"),
        Err(e) => e,
    }
}

#[test]
fn every_malformed_grant_is_refused_with_its_path_and_line() {
    // HEAD is 7 lines; `authority:` is line 8, the section starts on line 9.
    let table: &[(&str, &str, usize, &str)] = &[
        ("  grants: {}\n", "authority.grants", 9, "must be a list"),
        ("  max_delegation_depth: 3\n", "authority", 8, "needs 'grants'"),
        ("  grants: []\n  max_delegation_depth: -1\n", "authority.max_delegation_depth", 10, "non-negative"),
        ("  grants: []\n  max_delegation_depth: \"3\"\n", "authority.max_delegation_depth", 10, "non-negative integer"),
        ("  grants: []\n  extra: 1\n", "authority.extra", 10, "unknown key 'extra'"),
        ("  grants: []\n  break_glass: {}\n", "authority.break_glass", 10, "not supported"),
        ("  grants: []\n  mode: observe\n", "authority.mode", 10, "top level"),
        ("  grants:\n    - id: g\n      subject: { agent: a }\n      action: [x.y]\n", "authority.grants[0].action", 12, "unknown key 'action'"),
        ("  grants:\n    - subject: { agent: a }\n      actions: [x.y]\n", "authority.grants[0]", 10, "needs an 'id'"),
        ("  grants:\n    - id: dlg_x\n      subject: { agent: a }\n      actions: [x.y]\n", "authority.grants[0].id", 10, "may not begin 'dlg_'"),
        ("  grants:\n    - id: \"-x\"\n      subject: { agent: a }\n      actions: [x.y]\n", "authority.grants[0].id", 10, "must match"),
        ("  grants:\n    - id: g\n      subject: { agent: a }\n      actions: [x.y]\n    - id: g\n      subject: { agent: b }\n      actions: [x.y]\n", "authority.grants[1].id", 13, "duplicate grant id 'g'"),
        ("  grants:\n    - id: g\n      actions: [x.y]\n", "authority.grants[0]", 10, "needs a 'subject'"),
        ("  grants:\n    - id: g\n      subject: {}\n      actions: [x.y]\n", "authority.grants[0].subject", 11, "at least one of"),
        ("  grants:\n    - id: g\n      subject: { agent: \"**\" }\n      actions: [x.y]\n", "authority.grants[0].subject.agent", 11, "may not use '**'"),
        ("  grants:\n    - id: g\n      subject: { agent: a, role: b }\n      actions: [x.y]\n", "authority.grants[0].subject.role", 11, "unknown key 'role'"),
        ("  grants:\n    - id: g\n      subject: { agent: a }\n", "authority.grants[0]", 10, "needs 'actions'"),
        ("  grants:\n    - id: g\n      subject: { agent: a }\n      actions: []\n", "authority.grants[0].actions", 12, "non-empty list"),
        ("  grants:\n    - id: g\n      subject: { agent: a }\n      actions: [\"x.**.y\"]\n", "authority.grants[0].actions[0]", 12, "only as its last segment"),
        ("  grants:\n    - id: g\n      subject: { agent: a }\n      actions: [x.y]\n      resources: []\n", "authority.grants[0].resources", 13, "non-empty list"),
        ("  grants:\n    - id: g\n      subject: { agent: a }\n      actions: [x.y]\n      tasks: [\"a*b\"]\n", "authority.grants[0].tasks[0]", 13, "trailing '*'"),
        ("  grants:\n    - id: g\n      subject: { agent: a }\n      actions: [x.y]\n      constraints: {}\n", "authority.grants[0].constraints", 13, "non-empty mapping"),
        ("  grants:\n    - id: g\n      subject: { agent: a }\n      actions: [x.y]\n      constraints: { amount_lte: \"5\" }\n", "authority.grants[0].constraints.amount_lte", 13, "integer operand"),
        ("  grants:\n    - id: g\n      subject: { agent: a }\n      actions: [x.y]\n      constraints: { agent_eq: x }\n", "authority.grants[0].constraints.agent_eq", 13, "action field"),
        ("  grants:\n    - id: g\n      subject: { agent: a }\n      actions: [x.y]\n      environments: [\"\"]\n", "authority.grants[0].environments[0]", 13, "non-empty string"),
        ("  grants:\n    - id: g\n      subject: { agent: a }\n      actions: [x.y]\n      expires_at: \"2026-11-01T00:00:00\"\n", "authority.grants[0].expires_at", 13, "offset"),
        ("  grants:\n    - id: g\n      subject: { agent: a }\n      actions: [x.y]\n      expires_at: 2026-11-01T00:00:00Z\n", "authority.grants[0].expires_at", 13, "Quote it"),
        ("  grants:\n    - id: g\n      subject: { agent: a }\n      actions: [x.y]\n      delegable: true\n", "authority.grants[0].delegable", 13, "must declare 'expires_at'"),
        ("  grants:\n    - id: g\n      subject: { agent: a }\n      actions: [x.y]\n      delegable: \"yes\"\n", "authority.grants[0].delegable", 13, "true or false"),
        ("  grants:\n    - id: g\n      subject: { agent: a }\n      actions: [x.y]\n      budgets: []\n", "authority.grants[0].budgets", 13, "non-empty list"),
        ("  grants:\n    - id: g\n      subject: { agent: a }\n      actions: [x.y]\n      budgets: [{ metric: count, limit: 5 }]\n", "authority.grants[0].budgets[0]", 13, "needs 'window'"),
        ("  grants:\n    - id: g\n      subject: { agent: a }\n      actions: [x.y]\n      budgets: [{ metric: count, limit: -1, window: P1D }]\n", "authority.grants[0].budgets[0].limit", 13, "non-negative integer"),
        ("  grants:\n    - id: g\n      subject: { agent: a }\n      actions: [x.y]\n      budgets: [{ metric: count, limit: 1, window: P1M }]\n", "authority.grants[0].budgets[0].window", 13, "ISO 8601"),
        ("  grants:\n    - id: g\n      subject: { agent: a }\n      actions: [x.y]\n      budgets: [{ metric: count, limit: 1, window: P1D, per: x }]\n", "authority.grants[0].budgets[0].per", 13, "unknown key 'per'"),
    ];
    for (section, path, line, fragment) in table {
        let error = refused(section);
        assert_eq!((error.path.as_str(), error.line), (*path, Some(*line)), "{section}\n{error}");
        assert!(error.message.contains(fragment), "{section}\nexpected '{fragment}' in: {error}");
        assert!(error.to_string().starts_with(&format!("doc.yaml:{line}: {path}: ")), "{error}");
    }
}

#[test]
fn a_valid_section_loads_with_the_default_depth() {
    let document = load_str(
        &with_authority(
            "  grants:\n    - id: g\n      subject: { agent: \"support-*\", user: alice }\n      actions: [\"stripe.*\"]\n      resources: [\"customer:*\"]\n      constraints: { amount_lte: 5000, currency_in: [eur, usd] }\n      environments: [production]\n      expires_at: \"2026-11-01T01:00:00+01:00\"\n      delegable: true\n      tasks: [\"close:*\"]\n      budgets: [{ metric: amount, limit: 5000, window: PT1H }, { metric: count, limit: 20, window: P1D }]\n",
        ),
        "doc.yaml",
    )
    .unwrap();
    let authority = document.authority_config.unwrap();
    assert_eq!(authority.max_delegation_depth, 3);
    let g = &authority.grants["g"];
    assert_eq!(g.expires_at, Some(warden::authority::parse_instant("2026-11-01T00:00:00Z").unwrap()));
    assert_eq!(g.constraints.len(), 2);
    assert_eq!(g.budgets.as_ref().unwrap()[0].window_seconds, 3600);
    assert!(g.delegable);
}

#[test]
fn the_authority_section_is_part_of_the_policy_hash_and_a_standalone_file_folds_in() {
    let section = "  grants:\n    - id: g\n      subject: { agent: a }\n      actions: [x.y]\n";
    let inline = load_str(&with_authority(section), "doc.yaml").unwrap();
    let without = load_str(HEAD, "doc.yaml").unwrap();
    let widened = load_str(&with_authority(&section.replace("x.y", "x.*")), "doc.yaml").unwrap();
    assert_ne!(inline.policy_hash, without.policy_hash);
    assert_ne!(inline.policy_hash, widened.policy_hash);

    let file = load_authority_str(&format!("schema: warden/v1\nauthority:\n{section}"), "authority.yaml").unwrap();
    let combined = without.with_authority(file.clone(), "authority.yaml").unwrap();
    assert_eq!(combined.policy_hash, inline.policy_hash, "one authority, wherever it was written");
    // The policy kept with the hash is the one folded in, not the document's own without it.
    assert_eq!(combined.canonical_policy, inline.canonical_policy);
    assert_eq!(warden::canonical::sha256_prefixed(&combined.canonical_policy), combined.policy_hash);
    assert!(combined.authority_config.is_some());
    let twice = inline.with_authority(file, "authority.yaml").unwrap_err();
    assert!(twice.message.contains("already has an 'authority:' section"), "{twice}");
}

#[test]
fn a_standalone_authority_file_holds_schema_and_authority_only() {
    let refusals = [
        ("schema: warden/v1\nactions: {}\nauthority:\n  grants: []\n", "actions"),
        ("schema: ctrlrun.policy/v3\nauthority:\n  grants: []\n", "schema"),
        ("authority:\n  grants: []\n", "top level"),
        ("schema: warden/v1\n", "top level"),
        ("", "top level"),
    ];
    for (text, path) in refusals {
        let error = load_authority_str(text, "authority.yaml").unwrap_err();
        assert_eq!(error.path, path, "{text}: {error}");
    }
    assert!(load_authority_str("schema: warden/v1\nauthority:\n  grants: []\n", "a.yaml")
        .unwrap()
        .authority
        .grants
        .is_empty());
}

#[test]
fn a_delegated_grant_file_has_no_id_and_json_reads_the_same() {
    let error = load_grant_str("id: x\nsubject: { agent: a }\nactions: [x.y]\n", "grant.yaml").unwrap_err();
    assert_eq!(error.path, "id");
    let yaml = load_grant_str("subject: { agent: a }\nactions: [x.y]\nconstraints: { amount_lte: 5 }\n", "grant.yaml")
        .unwrap();
    let json = load_grant_str(
        r#"{"subject": {"agent": "a"}, "actions": ["x.y"], "constraints": {"amount_lte": 5}}"#,
        "grant.json",
    )
    .unwrap();
    assert_eq!(yaml, json);
    assert!(yaml.id.is_empty());
    let float = load_grant_str(
        r#"{"subject": {"agent": "a"}, "actions": ["x.y"], "constraints": {"amount_lte": 5.5}}"#,
        "g.json",
    )
    .unwrap_err();
    assert_eq!(float.path, "constraints.amount_lte");
}

#[test]
fn a_ctrlrun_document_with_grants_is_still_refused() {
    let error = load_str("schema: ctrlrun.policy/v3\nactions: {}\nauthority:\n  grants: []\n", "c.yaml").unwrap_err();
    assert_eq!(error.path, "authority");
}

fn open(section: &str) -> (tempfile::TempDir, Warden) {
    let dir = tempfile::tempdir().unwrap();
    let document = load_str(&with_authority(section), "doc.yaml").unwrap();
    let warden = Warden::open(
        dir.path().join("state.redb"),
        document,
        WardenOptions {
            clock: Arc::new(ManualClock::new(T0)),
            environment: Some("production".into()),
            ..WardenOptions::default()
        },
    )
    .unwrap();
    (dir, warden)
}

fn refund(agent: &str) -> ActionRequest<'static> {
    ActionRequest::new(
        "stripe.refund",
        serde_json::json!({"payment_id": "p1", "amount": 100}),
        Principal::new(agent, None).unwrap(),
    )
}

#[test]
fn the_pipeline_denies_an_action_no_root_grant_covers_and_runs_one_that_is_covered() {
    let (_dir, warden) = open(
        "  grants:\n    - id: refunds\n      subject: { agent: \"support-*\" }\n      actions: [stripe.refund]\n      constraints: { amount_lte: 500 }\n",
    );
    match warden.submit(&refund("billing-1")) {
        Err(Error::AuthorityDenied { reason, .. }) => assert_eq!(reason, "no_authority"),
        other => panic!("expected no_authority, got {other:?}"),
    }
    // Reads too: the document allows customer.read, and no grant names it.
    let read = ActionRequest::new("customer.read", serde_json::json!({}), Principal::new("support-1", None).unwrap());
    assert!(matches!(warden.submit(&read), Err(Error::AuthorityDenied { reason, .. }) if reason == "no_authority"));
    let mut over = refund("support-1");
    over.arguments = serde_json::json!({"payment_id": "p2", "amount": 501});
    assert!(
        matches!(warden.submit(&over), Err(Error::AuthorityDenied { reason, .. }) if reason == "authority_constraint")
    );
    let permit = warden.submit(&refund("support-1")).unwrap();
    permit.commit(&serde_json::json!({"ok": true})).unwrap();
}

#[test]
fn the_pipeline_refuses_on_an_expired_grant_one_microsecond_after_its_instant() {
    let at = warden::clock::render(T0);
    let (_dir, warden) = open(&format!(
        "  grants:\n    - id: refunds\n      subject: {{ agent: \"support-*\" }}\n      actions: [stripe.refund]\n      expires_at: \"{at}\"\n"
    ));
    // `render` keeps milliseconds; T0 is a whole second, so the rendered instant is exact.
    let permit = warden.submit(&refund("support-1")).unwrap();
    permit.commit(&serde_json::json!({})).unwrap();
    let clock = ManualClock::new(T0 + 1);
    let dir = tempfile::tempdir().unwrap();
    let document = load_str(
        &with_authority(&format!(
            "  grants:\n    - id: refunds\n      subject: {{ agent: \"support-*\" }}\n      actions: [stripe.refund]\n      expires_at: \"{at}\"\n"
        )),
        "doc.yaml",
    )
    .unwrap();
    let later = Warden::open(
        dir.path().join("state.redb"),
        document,
        WardenOptions { clock: Arc::new(clock), environment: Some("production".into()), ..WardenOptions::default() },
    )
    .unwrap();
    assert!(
        matches!(later.submit(&refund("support-1")), Err(Error::AuthorityDenied { reason, .. }) if reason == "authority_expired")
    );
}
