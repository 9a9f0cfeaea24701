//! Scoped grants (issue 30 item 4): "approve this and the next N actions of this shape for T
//! minutes". The 50-prompt session needs at most 5 human decisions and executes nothing outside a
//! grant; every way a later proposal can differ asks a human and is never executed; a scope past
//! the document's caps is refused and changes nothing; the grant, every use and a revocation have
//! their receipts and the chain verifies.

mod common;

use std::sync::Arc;

use common::*;
use serde_json::{json, Value};
use warden::approval::scope::{Scope, ScopedGrant};
use warden::approval::ApprovalStatus;
use warden::kernel::asserted;
use warden::pipeline::{ActionRequest, Warden, WardenOptions};
use warden::{Error, ManualClock, Principal};

const DOCUMENT: &str = r#"
schema: warden/v1
actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    rules:
      - when: { amount_lte: 100 }
        decision: allow
      - when: { amount_lte: 10000 }
        decision: approve
        approval: { scoped: { max_uses: 10, max_minutes: 30 } }
      - decision: approve
"#;

const MINUTE: i64 = 60_000_000;

struct Setup {
    dir: tempfile::TempDir,
    path: std::path::PathBuf,
    clock: ManualClock,
    warden: Warden,
}

fn open_with(path: &std::path::Path, clock: &ManualClock, document: &str) -> Warden {
    let document = warden::document::load_str(document, "test.yaml").unwrap();
    let options = WardenOptions { clock: Arc::new(clock.clone()), ..WardenOptions::default() };
    Warden::open(path, document, options).unwrap()
}

fn setup() -> Setup {
    setup_at(T0)
}

fn setup_at(now: i64) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.redb");
    let clock = ManualClock::new(now);
    let warden = open_with(&path, &clock, DOCUMENT);
    Setup { dir, path, clock, warden }
}

fn agent(user: &str) -> Principal {
    Principal::new("refund-agent", Some(user)).unwrap()
}

fn refund_of(payment: &str, customer: &str, amount: i64, by: Principal) -> ActionRequest<'static> {
    ActionRequest::new("stripe.refund", json!({"payment_id": payment, "customer_id": customer, "amount": amount}), by)
}

fn ada_refund(payment: &str, customer: &str, amount: i64) -> ActionRequest<'static> {
    refund_of(payment, customer, amount, agent("ada"))
}

fn ask(warden: &Warden, request: &ActionRequest<'_>) -> String {
    match warden.submit(request) {
        Err(Error::ApprovalRequired { request_id, .. }) => request_id,
        Ok(permit) => panic!("expected an approval request, got a permit {:?}", permit.scoped_grant_id()),
        Err(other) => panic!("expected an approval request, got {other:?}"),
    }
}

/// The customer fixed, the amount at most 5000, `uses` further actions, 30 minutes.
fn customer_scope(uses: u32) -> Scope {
    Scope { uses, minutes: 30, fixed: vec!["/customer_id".into()], at_most: vec![("/amount".into(), "5000".into())] }
}

fn grant(warden: &Warden, approval_id: &str, scope: &Scope) -> ScopedGrant {
    warden.kernel().answer_scoped(approval_id, &asserted("bob").unwrap(), scope, None).unwrap().grant
}

/// The receipts' documents, in chain order.
fn receipts(warden: &Warden) -> Vec<Value> {
    let kernel = warden.kernel();
    kernel
        .receipts(1, 100_000)
        .unwrap()
        .into_iter()
        .map(|(_, row)| serde_json::from_str(&row.document).unwrap())
        .collect()
}

#[test]
fn the_fifty_prompt_session_needs_five_human_decisions_and_runs_nothing_outside_a_grant() {
    let s = setup();
    let mut decisions = 0;
    let mut grants: Vec<ScopedGrant> = Vec::new();
    for i in 0..50 {
        let request = ada_refund(&format!("pay_{i}"), "cus_1", 1000 + i);
        match s.warden.submit(&request) {
            Ok(permit) => {
                assert!(permit.scoped_grant_id().is_some(), "refund {i} ran without a grant");
                permit.commit(&json!({"refund": i})).unwrap();
            }
            Err(Error::ApprovalRequired { request_id, .. }) => {
                // The human's one decision: this refund and the next 9 of its shape.
                decisions += 1;
                grants.push(grant(&s.warden, &request_id, &customer_scope(9)));
                let mut approved = ada_refund(&format!("pay_{i}"), "cus_1", 1000 + i);
                approved.approval_id = Some(&request_id);
                let permit = s.warden.submit(&approved).unwrap();
                assert_eq!(permit.approval_id(), Some(request_id.as_str()));
                permit.commit(&json!({"refund": i})).unwrap();
            }
            Err(other) => panic!("refund {i}: {other:?}"),
        }
    }
    assert!(decisions <= 5, "{decisions} human decisions");
    assert_eq!(decisions, 5);
    // Every executed refund was approved by a human or covered by a grant whose shape it has.
    let documents = receipts(&s.warden);
    let refunds: Vec<&Value> =
        documents.iter().filter(|d| d["action"] == "stripe.refund" && d["result"] == "committed").collect();
    assert_eq!(refunds.len(), 50);
    let mut covered = 0;
    for receipt in &refunds {
        match receipt["scoped_grant_id"].as_str() {
            Some(id) => {
                let grant = grants.iter().find(|g| g.grant_id == id).expect("a grant made in the session");
                assert_eq!(receipt["arguments"]["customer_id"], "cus_1");
                assert!(receipt["arguments"]["amount"].as_i64().unwrap() <= 5000);
                assert_eq!(receipt["approver"], grant.approver.as_str());
                assert_eq!(receipt["approval_id"], Value::Null);
                covered += 1;
            }
            None => {
                let approval = receipt["approval_id"].as_str().expect("outside any grant and no approval");
                assert!(grants.iter().any(|g| g.approval_id == approval));
            }
        }
    }
    assert_eq!(covered, 45);
    // Each grant has its own receipt, and each use its event; every grant is used up.
    for made in &grants {
        let own: Vec<&Value> = documents
            .iter()
            .filter(|d| d["action"] == "warden.approval.scoped_grant" && d["scoped_grant_id"] == made.grant_id.as_str())
            .collect();
        assert_eq!(own.len(), 1);
        assert_eq!(own[0]["arguments"]["approval_id"], made.approval_id.as_str());
        assert_eq!((&own[0]["approval_id"], &own[0]["approver"]), (&Value::Null, &Value::Null));
        assert_eq!(own[0]["principal"], json!({"agent": "warden-approval", "user": "cli:bob"}));
        assert_eq!(own[0]["arguments"]["scope"]["uses"], 9);
        let stored = s.warden.kernel().scoped_grant(&made.grant_id).unwrap().unwrap();
        assert_eq!(stored.uses_left, 0);
        assert_eq!(
            documents.iter().filter(|d| d["scoped_grant_id"] == made.grant_id.as_str()).count(),
            1 + 9,
            "its own receipt and one per use"
        );
    }
    let events = s.warden.kernel().events(0, 100_000).unwrap();
    let used = events.iter().filter(|e| e.kind.as_str() == "SCOPED_GRANT_USED").count();
    let made = events.iter().filter(|e| e.kind.as_str() == "SCOPED_GRANT_MADE").count();
    assert_eq!((made, used), (5, 45));
    assert!(s.warden.kernel().verify_chain().unwrap().ok);
    // An offline bundle of the session verifies: the grants' receipts name no spent approval.
    let signer = warden::evidence::key::NoteSigner::generate("warden.test/scoped").unwrap();
    s.warden.kernel().checkpoint(&signer, None).unwrap();
    let out = s.dir.path().join("bundle");
    warden::evidence::bundle::export(s.warden.kernel(), &out, None, None).unwrap();
    let verdict = warden::evidence::bundle::verify_bundle(&out, &[signer.verifier()]);
    assert!(verdict.ok, "{verdict:?}");
}

/// A grant for ada's refunds of cus_1 up to 5000 (rule[1]); then each way a proposal can differ.
#[test]
fn a_proposal_outside_the_grant_asks_a_human_and_is_never_executed() {
    let s = setup();
    let first = ask(&s.warden, &ada_refund("pay_0", "cus_1", 2000));
    let made = grant(&s.warden, &first, &customer_scope(5));
    let eve = agent("eve");
    let other_bot = Principal::new("other-bot", Some("ada")).unwrap();
    let table: Vec<(&str, ActionRequest<'static>)> = vec![
        ("another customer", ada_refund("pay_1", "cus_2", 2000)),
        ("an amount over the bound", ada_refund("pay_2", "cus_1", 5001)),
        ("another requester", refund_of("pay_3", "cus_1", 2000, eve)),
        ("another agent for the same user", refund_of("pay_4", "cus_1", 2000, other_bot)),
        ("another rule", ada_refund("pay_5", "cus_1", 20_000)),
        (
            "a missing fixed argument",
            ActionRequest::new("stripe.refund", json!({"payment_id": "pay_6", "amount": 10}), agent("ada")),
        ),
    ];
    for (why, request) in &table {
        // pay_6's amount is under the allow rule: it needs no human at all and is not covered.
        if *why == "a missing fixed argument" {
            let permit = s.warden.submit(request).unwrap();
            assert_eq!(permit.scoped_grant_id(), None, "{why}");
            permit.commit(&json!(null)).unwrap();
            continue;
        }
        assert!(matches!(s.warden.submit(request), Err(Error::ApprovalRequired { .. })), "{why}");
    }
    // A precondition asks a human, whatever the grant covers.
    let mut with_precondition = ada_refund("pay_7", "cus_1", 2000);
    with_precondition.precondition = Some(warden::approval::precondition::PreconditionSource::State(json!({"v": 1})));
    match s.warden.submit(&with_precondition) {
        Err(Error::ApprovalRequired { .. }) => {}
        other => panic!("a precondition: {other:?}"),
    }
    assert_eq!(s.warden.kernel().scoped_grant(&made.grant_id).unwrap().unwrap().uses_left, 5, "nothing spent");
    // Inside: covered, up to the bound itself.
    let permit = s.warden.submit(&ada_refund("pay_8", "cus_1", 5000)).unwrap();
    assert_eq!(permit.scoped_grant_id(), Some(made.grant_id.as_str()));
    permit.commit(&json!(null)).unwrap();
    // Nothing outside the grant ran: the only committed refunds are pay_8 and the allowed pay_6.
    let committed: Vec<String> = receipts(&s.warden)
        .iter()
        .filter(|d| d["action"] == "stripe.refund" && d["result"] == "committed")
        .map(|d| d["arguments"]["payment_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(committed, ["pay_6", "pay_8"]);
}

#[test]
fn expired_revoked_and_used_up_grants_cover_nothing() {
    let s = setup();
    let first = ask(&s.warden, &ada_refund("pay_0", "cus_1", 2000));
    let made = grant(&s.warden, &first, &customer_scope(2));
    // At its expiry instant it still covers; one microsecond past, it does not.
    s.clock.advance(30 * MINUTE);
    let permit = s.warden.submit(&ada_refund("pay_1", "cus_1", 2000)).unwrap();
    assert_eq!(permit.scoped_grant_id(), Some(made.grant_id.as_str()));
    permit.commit(&json!(null)).unwrap();
    s.clock.advance(1);
    assert!(matches!(s.warden.submit(&ada_refund("pay_2", "cus_1", 2000)), Err(Error::ApprovalRequired { .. })));
    assert_eq!(s.warden.kernel().scoped_grants(true).unwrap().len(), 0);
    assert_eq!(s.warden.kernel().scoped_grants(false).unwrap().len(), 1);

    // Used up: one use, spent, then a human is asked.
    let second = ask(&s.warden, &ada_refund("pay_3", "cus_1", 2000));
    let one = grant(&s.warden, &second, &customer_scope(1));
    s.warden.submit(&ada_refund("pay_4", "cus_1", 2000)).unwrap().commit(&json!(null)).unwrap();
    assert_eq!(s.warden.kernel().scoped_grant(&one.grant_id).unwrap().unwrap().uses_left, 0);
    assert!(matches!(s.warden.submit(&ada_refund("pay_5", "cus_1", 2000)), Err(Error::ApprovalRequired { .. })));

    // Revoked: with its receipt, and a second revocation is refused.
    let third = ask(&s.warden, &ada_refund("pay_6", "cus_1", 2000));
    let revoked = grant(&s.warden, &third, &customer_scope(3));
    let kernel = s.warden.kernel();
    let done = kernel.revoke_scoped_grant(&revoked.grant_id, "carol", "the customer called").unwrap();
    assert_eq!(done.grant.revoked.as_ref().unwrap().by, "carol");
    assert!(matches!(s.warden.submit(&ada_refund("pay_7", "cus_1", 2000)), Err(Error::ApprovalRequired { .. })));
    let again = kernel.revoke_scoped_grant(&revoked.grant_id, "carol", "twice").unwrap_err();
    assert!(again.to_string().contains("revoked already"), "{again}");
    let missing = kernel.revoke_scoped_grant(&format!("sgr_{}", "0".repeat(32)), "carol", "x").unwrap_err();
    assert!(matches!(missing, Error::NotFound(_)), "{missing}");
    assert!(kernel.revoke_scoped_grant("sgr_nope", "carol", "x").is_err());
    let documents = receipts(&s.warden);
    let revocation: Vec<&Value> = documents.iter().filter(|d| d["action"] == "warden.approval.scoped_revoke").collect();
    assert_eq!(revocation.len(), 1);
    assert_eq!(revocation[0]["scoped_grant_id"], revoked.grant_id.as_str());
    assert_eq!(revocation[0]["principal"]["user"], "carol");
    assert_eq!(revocation[0]["arguments"]["reason"], "the customer called");
    assert!(kernel.verify_chain().unwrap().ok);
    // The expired, the used-up and the revoked grant all left the index a proposal reads; their
    // rows stay, and doctor finds nothing wrong.
    let doctor = kernel.doctor().unwrap();
    let rows = |name: &str| doctor.tables.iter().find(|(table, _, _)| *table == name).map(|(_, n, _)| *n);
    assert_eq!((rows("scoped_grants"), rows("scoped_grants_by_action")), (Some(3), Some(0)));
    assert!(doctor.tables.iter().all(|(_, _, problems)| problems.is_empty()), "{:?}", doctor.tables);
}

#[test]
fn another_policy_hash_is_not_covered() {
    let s = setup();
    let first = ask(&s.warden, &ada_refund("pay_0", "cus_1", 2000));
    grant(&s.warden, &first, &customer_scope(5));
    let Setup { dir: _dir, path, clock, warden } = s;
    drop(warden);
    // The same rules with another description: another policy hash.
    let edited = DOCUMENT.replace("    effect:", "    description: edited\n    effect:");
    let reopened = open_with(&path, &clock, &edited);
    assert!(matches!(reopened.submit(&ada_refund("pay_1", "cus_1", 2000)), Err(Error::ApprovalRequired { .. })));
    drop(reopened);
    // Under the first document again, the grant covers.
    let back = open_with(&path, &clock, DOCUMENT);
    assert!(back.submit(&ada_refund("pay_2", "cus_1", 2000)).unwrap().scoped_grant_id().is_some());
}

/// A scope the document does not allow is refused, the request stays pending, and nothing was
/// written (no vote, no grant, no receipt).
#[test]
fn a_scope_past_the_documents_caps_is_refused_and_changes_nothing() {
    let s = setup();
    let id = ask(&s.warden, &ada_refund("pay_0", "cus_1", 2000));
    let big = ask(&s.warden, &ada_refund("pay_1", "cus_1", 20_000));
    let kernel = s.warden.kernel();
    let before = kernel.receipts(1, 1000).unwrap().len();
    let bob = asserted("bob").unwrap();
    let cases: Vec<(&str, Scope, &str)> = vec![
        (id.as_str(), customer_scope(11), "scope uses must be 1..=10"),
        (id.as_str(), customer_scope(0), "scope uses must be 1..=10"),
        (id.as_str(), Scope { minutes: 31, ..customer_scope(1) }, "scope minutes must be 1..=30"),
        (id.as_str(), Scope { at_most: vec![("/amount".into(), "1999".into())], ..customer_scope(1) }, "below"),
        (id.as_str(), Scope { fixed: vec!["/currency".into()], ..customer_scope(1) }, "not an argument"),
        (big.as_str(), customer_scope(1), "does not allow scoped grants"),
    ];
    for (approval, scope, words) in cases {
        let refused = kernel.answer_scoped(approval, &bob, &scope, None).unwrap_err();
        assert!(matches!(refused, Error::InvalidInput(_)), "{refused:?}");
        assert!(refused.to_string().contains(words), "{refused}");
    }
    // The requester cannot grant it either, nor may a hash other than the request's.
    let requester = asserted("ada").unwrap();
    assert!(kernel.answer_scoped(&id, &requester, &customer_scope(1), None).is_err());
    assert!(kernel.answer_scoped(&id, &bob, &customer_scope(1), Some("sha256:other")).is_err());
    for approval in [&id, &big] {
        let record = kernel.approval(approval).unwrap().unwrap();
        assert_eq!((record.status, record.votes.len()), (ApprovalStatus::Pending, 0));
    }
    assert!(kernel.scoped_grants(false).unwrap().is_empty());
    assert_eq!(kernel.receipts(1, 1000).unwrap().len(), before);
    // Within the caps it is made, once: a second scoped answer finds the request granted.
    let made = kernel.answer_scoped(&id, &bob, &customer_scope(10), None).unwrap();
    assert_eq!(made.approval.as_ref().unwrap().status, ApprovalStatus::Granted);
    assert_eq!((made.grant.uses_left, made.grant.expires_at - made.grant.granted_at), (10, 30 * MINUTE));
    assert!(kernel.answer_scoped(&id, &bob, &customer_scope(10), None).is_err());
    assert_eq!(kernel.scoped_grants(false).unwrap().len(), 1);
}

#[test]
fn the_document_refuses_scoped_with_more_than_one_approver_and_out_of_range_caps() {
    let cases = [
        ("{ required: 2, scoped: { max_uses: 3, max_minutes: 5 } }", "'scoped' goes only with 'required: 1'"),
        ("{ scoped: { max_uses: 0, max_minutes: 5 } }", "'max_uses' must be 1..=1000, got 0"),
        ("{ scoped: { max_uses: 1001, max_minutes: 5 } }", "'max_uses' must be 1..=1000, got 1001"),
        ("{ scoped: { max_uses: 1, max_minutes: 1441 } }", "'max_minutes' must be 1..=1440, got 1441"),
        ("{ scoped: { max_uses: 1 } }", "'scoped' needs 'max_minutes'"),
        ("{ scoped: { max_uses: 1, max_minutes: 2, forever: true } }", "forever"),
        ("{ scoped: 5 }", "'scoped' must be a mapping"),
        ("{ scoped: { max_uses: x, max_minutes: 2 } }", "'max_uses' must be an integer"),
    ];
    for (approval, words) in cases {
        let text = DOCUMENT.replace("{ scoped: { max_uses: 10, max_minutes: 30 } }", approval);
        let refused = warden::document::load_str(&text, "test.yaml").unwrap_err().to_string();
        assert!(refused.contains(words), "{approval}: {refused}");
    }
    // The caps are in the policy hash; a document without them keeps the hash it had.
    let with = warden::document::load_str(DOCUMENT, "a.yaml").unwrap();
    let other = warden::document::load_str(&DOCUMENT.replace("max_uses: 10", "max_uses: 9"), "b.yaml").unwrap();
    assert_ne!(with.policy_hash, other.policy_hash);
    let policy: Value = serde_json::from_slice(&with.canonical_policy).unwrap();
    assert_eq!(
        policy["actions"]["stripe.refund"]["rules"][1]["approval"],
        json!({"required": 1, "roles": [], "scoped": {"max_uses": 10, "max_minutes": 30}})
    );
    assert_eq!(policy["actions"]["stripe.refund"]["rules"][2].get("approval"), None);
    assert_eq!(
        warden::kernel::limits_in_policy(&policy, "stripe.refund", "rule[1]"),
        Some(warden::approval::scope::ScopeLimits { max_uses: 10, max_minutes: 30 })
    );
    for (name, rule) in [
        ("stripe.refund", "rule[2]"),
        ("stripe.refund", "rule[0]"),
        ("stripe.charge", "rule[1]"),
        ("stripe.refund", "decision"),
        ("stripe.refund", "rule[x]"),
    ] {
        assert_eq!(warden::kernel::limits_in_policy(&policy, name, rule), None, "{name} {rule}");
    }
    let bare = "schema: warden/v1\nactions:\n  a.b:\n    decision: approve\n    approval: { scoped: { max_uses: 2, max_minutes: 3 } }\n";
    let bare = warden::document::load_str(bare, "c.yaml").unwrap();
    let policy: Value = serde_json::from_slice(&bare.canonical_policy).unwrap();
    assert_eq!(
        warden::kernel::limits_in_policy(&policy, "a.b", "decision"),
        Some(warden::approval::scope::ScopeLimits { max_uses: 2, max_minutes: 3 })
    );
}

/// The CLI: `warden approve --scope-…` makes a grant (refused past the caps, usage errors for
/// half a scope), `warden grants list|revoke` and `warden inspect sgr_…` show and end it.
#[test]
fn the_cli_makes_lists_inspects_and_revokes_a_scoped_grant() {
    // The CLI reads the system clock: the request is made now.
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_micros();
    let s = setup_at(i64::try_from(now).unwrap());
    let id = ask(&s.warden, &ada_refund("pay_0", "cus_1", 2000));
    let Setup { dir: _dir, path, clock, warden } = s;
    drop(warden);
    let approve = |extra: &[&str]| {
        let mut args = vec!["approve", id.as_str(), "--by", "bob", "--yes"];
        args.extend_from_slice(extra);
        cli(&path, &args)
    };
    let (code, _, stderr) = approve(&["--scope-uses", "11", "--scope-minutes", "30"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("scope uses must be 1..=10"), "{stderr}");
    let (code, _, stderr) = approve(&["--scope-minutes", "30"]);
    assert_eq!(code, Some(2), "{stderr}");
    let (code, _, stderr) = approve(&["--scope-uses", "3"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--scope-minutes"), "{stderr}");
    let (code, _, stderr) = approve(&["--scope-uses", "3", "--scope-minutes", "30", "--scope-at-most", "/amount"]);
    assert_eq!(code, Some(2), "{stderr}");
    let (code, _, stderr) = approve(&["--scope-uses", "3", "--scope-minutes", "30", "--ttl", "PT1H"]);
    assert_eq!(code, Some(2), "{stderr}");
    let (code, _, stderr) = approve(&["--scope-uses", "3", "--scope-minutes", "30", "--scope-at-most", "/amount=1"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("below the approved action's own value"), "{stderr}");
    let (code, stdout, _) = cli(&path, &["grants", "list"]);
    assert_eq!((code, stdout.as_str()), (Some(0), "no scoped grant is live\n"));
    let (code, stdout, stderr) = approve(&[
        "--scope-uses",
        "9",
        "--scope-minutes",
        "30",
        "--scope-fixed",
        "/customer_id",
        "--scope-at-most",
        "/amount=5000",
        "--json",
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    let made: Value = serde_json::from_str(&stdout).unwrap();
    let grant_id = made["grant"]["grant_id"].as_str().unwrap().to_owned();
    assert_eq!(made["grant"]["uses_left"], 9);
    assert_eq!(made["grant"]["scope"]["at_most"], json!({"/amount": "5000"}));
    assert_eq!(made["approval"]["status"], "granted");
    let (code, stdout, _) = cli(&path, &["grants", "list"]);
    assert_eq!(code, Some(0));
    assert!(stdout.contains(&grant_id) && stdout.contains("9/9") && stdout.contains("live"), "{stdout}");
    // The agent's next refund of that customer is covered.
    let warden = open_with(&path, &clock, DOCUMENT);
    let permit = warden.submit(&ada_refund("pay_1", "cus_1", 3000)).unwrap();
    assert_eq!(permit.scoped_grant_id(), Some(grant_id.as_str()));
    permit.commit(&json!(null)).unwrap();
    drop(warden);
    let (code, stdout, _) = cli(&path, &["inspect", &grant_id]);
    assert_eq!(code, Some(0));
    assert!(stdout.contains("8 of 9 use(s) left") && stdout.contains("/customer_id fixed"), "{stdout}");
    let (code, stdout, _) = cli(&path, &["inspect", &grant_id, "--json"]);
    assert_eq!(code, Some(0));
    let shown: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(shown["kind"], "scoped_grant");
    assert_eq!(shown["receipts"].as_array().unwrap().len(), 2, "its own receipt and one use");
    let (code, _, stderr) = cli(&path, &["grants", "revoke", &grant_id, "--by", "carol"]);
    assert_eq!(code, Some(2), "{stderr}");
    let (code, stdout, stderr) = cli(&path, &["grants", "revoke", &grant_id, "--by", "carol", "--reason", "done"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("revoked with 8 use(s) left"), "{stdout}");
    let (code, _, stderr) = cli(&path, &["grants", "revoke", &grant_id, "--by", "carol", "--reason", "done"]);
    assert_eq!(code, Some(1), "{stderr}");
    let (_, stdout, _) = cli(&path, &["grants", "list"]);
    assert_eq!(stdout, "no scoped grant is live\n");
    let (_, stdout, _) = cli(&path, &["grants", "list", "--all"]);
    assert!(stdout.contains("revoked"), "{stdout}");
    let warden = open_with(&path, &clock, DOCUMENT);
    assert!(matches!(warden.submit(&ada_refund("pay_2", "cus_1", 3000)), Err(Error::ApprovalRequired { .. })));
}

/// Observe mode never spends a scoped grant. A grant is bound to the policy hash of the request
/// it answered, and the hash covers the document's `mode`, so switching a document to observe
/// leaves every grant made under enforce unmatched; observe mode's own path never reaches the gate
/// that spends one. The observed actions run with "approval_required" named as what enforce mode
/// would have blocked on, the grant keeps every use, and back under the enforce document it covers
/// with all of them.
#[test]
fn observe_mode_spends_no_scoped_grant() {
    let s = setup();
    let first = ask(&s.warden, &ada_refund("pay_0", "cus_1", 2000));
    let made = grant(&s.warden, &first, &customer_scope(2));
    let Setup { dir: _dir, path, clock, warden } = s;
    drop(warden);
    let observed = open_with(&path, &clock, &format!("mode: observe\n{DOCUMENT}"));
    for payment in ["pay_1", "pay_2", "pay_3"] {
        let permit = observed.submit(&ada_refund(payment, "cus_1", 2000)).unwrap();
        assert_eq!(permit.scoped_grant_id(), None);
        permit.commit(&json!(null)).unwrap();
    }
    let kernel = observed.kernel();
    assert_eq!(kernel.scoped_grant(&made.grant_id).unwrap().unwrap().uses_left, 2);
    let documents = receipts(&observed);
    let observed_refunds: Vec<&Value> =
        documents.iter().filter(|d| d["action"] == "stripe.refund" && d["would_have"].is_object()).collect();
    assert_eq!(observed_refunds.len(), 3);
    for document in observed_refunds {
        assert_eq!(document["would_have"]["blocked_reason"], "approval_required");
        assert!(document["scoped_grant_id"].is_null(), "{document}");
    }
    assert!(kernel.verify_chain().unwrap().ok);
    drop(observed);
    let enforced = open_with(&path, &clock, DOCUMENT);
    for payment in ["pay_5", "pay_6"] {
        let permit = enforced.submit(&ada_refund(payment, "cus_1", 2000)).unwrap();
        assert_eq!(permit.scoped_grant_id(), Some(made.grant_id.as_str()));
        permit.commit(&json!(null)).unwrap();
    }
    assert!(matches!(enforced.submit(&ada_refund("pay_7", "cus_1", 2000)), Err(Error::ApprovalRequired { .. })));
}
