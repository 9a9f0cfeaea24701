//! Approvals a person can trust (issue 13): the request keeps the whole action and the stored
//! action must hash to the stored hash; approvers are principals and the requester cannot
//! answer in any spelling; M-of-N with roles; preconditions; a re-proposal reports the pending
//! request and a denied one is not asked again; waiting by the kernel's clock; the host's hook.

mod common;

use std::sync::{Arc, Mutex};
use warden::test_support::KernelInternals;

use common::*;
use serde_json::{json, Value};
use warden::approval::precondition::{fingerprint, PreconditionSource};
use warden::approval::{ApprovalStatus, Approver, Verified};
use warden::event::EventKind;
use warden::pipeline::{ActionRequest, Warden, WardenOptions};
use warden::{Error, ManualClock, Principal};

const DOCUMENT: &str = r#"
schema: warden/v1
actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    rules:
      - when: { amount_lte: 1000 }
        decision: allow
      - when: { amount_lte: 100000 }
        decision: approve
      - decision: approve
        approval: { required: 2, roles: [finance, risk] }
"#;

struct Setup {
    dir: tempfile::TempDir,
    clock: ManualClock,
    warden: Warden,
}

fn setup() -> Setup {
    setup_with(DOCUMENT)
}

fn setup_with(document: &str) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let document = warden::document::load_str(document, "test.yaml").unwrap();
    let options = WardenOptions { clock: Arc::new(clock.clone()), ..WardenOptions::default() };
    let warden = Warden::open(dir.path().join("state.redb"), document, options).unwrap();
    Setup { dir, clock, warden }
}

fn ada() -> Principal {
    Principal::new("refund-agent", Some("ada")).unwrap()
}

fn request(payment: &str, amount: i64) -> ActionRequest<'static> {
    ActionRequest::new("stripe.refund", json!({"payment_id": payment, "amount": amount}), ada())
}

fn ask(warden: &Warden, request: &ActionRequest<'_>) -> String {
    match warden.submit(request) {
        Err(Error::ApprovalRequired { request_id, .. }) => request_id,
        other => panic!("expected an approval request, got {other:?}"),
    }
}

fn verified(user: &str, roles: &[&str]) -> Approver {
    let claims = json!({"roles": roles, "sub": user});
    Approver::verified(
        Principal::new("slack", Some(user)).unwrap(),
        Verified::new(Some("https://id.example"), &claims).unwrap(),
    )
}

fn reason(error: &Error) -> String {
    error.reason()
}

#[test]
fn a_request_keeps_the_whole_action_and_returns_it_from_get_and_pending() {
    let s = setup();
    let id = ask(&s.warden, &request("pay_9", 50_000));
    let kernel = s.warden.kernel();
    let record = kernel.approval(&id).unwrap().unwrap();
    let shown = record.to_json();
    assert_eq!(shown["arguments"], json!({"amount": 50_000, "payment_id": "pay_9"}));
    assert_eq!(shown["environment"], "production");
    assert_eq!(shown["resource"], Value::Null);
    assert_eq!(shown["requested_by"], json!({"agent": "refund-agent", "user": "ada"}));
    assert_eq!(shown["requester_identity"], json!({"verified": false, "issuer": null, "claims": null}));
    assert_eq!(shown["rule"], "rule[1]");
    assert_eq!(shown["when"], json!({"amount_lte": 100000}));
    assert_eq!(shown["policy_hash"], s.warden.document().policy_hash.as_str());
    assert_eq!((shown["required"].as_u64(), shown["grants"].as_u64()), (Some(1), Some(0)));
    let pending = kernel.pending_approvals().unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].to_json()["arguments"]["payment_id"], "pay_9");
    // The document shown hashes to the hash the approval binds.
    let document = record.action_document().unwrap();
    let canonical = warden::canonical::to_canonical_string(&document, "").unwrap();
    assert_eq!(warden::canonical::sha256_prefixed(canonical.as_bytes()), record.action_hash);
}

#[test]
fn a_verified_requester_identity_is_kept_with_the_request() {
    let s = setup();
    let mut call = request("pay_v", 50_000);
    call.identity = Some(Verified::new(Some("https://id.example"), &json!({"roles": ["support"]})).unwrap());
    let id = ask(&s.warden, &call);
    let shown = s.warden.kernel().approval(&id).unwrap().unwrap().to_json();
    assert_eq!(shown["requester_identity"]["verified"], true);
    assert_eq!(shown["requester_identity"]["issuer"], "https://id.example");
    assert_eq!(shown["requester_identity"]["claims"], json!({"roles": ["support"]}));
}

#[test]
fn a_stored_action_edited_in_the_store_is_a_store_fault_never_approvable() {
    let s = setup();
    let id = ask(&s.warden, &request("pay_t", 50_000));
    let kernel = s.warden.kernel();
    let mut record = kernel.approval(&id).unwrap().unwrap();
    if let Some(stored) = record.action.as_mut() {
        stored.arguments = r#"{"amount":99999999,"payment_id":"pay_t"}"#.into();
    }
    // A valid checksum: only the binding check can notice.
    kernel.store().tamper(|raw| raw.put_approval(&record)).unwrap();
    let read = kernel.approval(&id).unwrap_err();
    assert!(matches!(read, Error::Store(_)), "{read}");
    assert!(read.to_string().contains("was altered") && read.to_string().contains(&id), "{read}");
    // The handle latched closed: nothing is decided from a damaged store.
    assert!(matches!(kernel.pending_approvals().unwrap_err(), Error::Poisoned(_)));
    let reopened = || open(&s.dir.path().join("state.redb"), &s.clock);
    assert!(matches!(reopened().pending_approvals().unwrap_err(), Error::Store(_)));
    assert!(matches!(reopened().grant(&id, "ops:bob").unwrap_err(), Error::Store(_)));
    let mut present = request("pay_t", 50_000);
    present.approval_id = Some(&id);
    let fresh = Warden::open(
        s.dir.path().join("state.redb"),
        warden::document::load_str(DOCUMENT, "test.yaml").unwrap(),
        WardenOptions { clock: Arc::new(s.clock.clone()), ..WardenOptions::default() },
    )
    .unwrap();
    assert!(matches!(fresh.submit(&present).unwrap_err(), Error::Store(_)));
    let doctor = open(&s.dir.path().join("state.redb"), &s.clock).doctor().unwrap();
    let approvals = doctor.tables.iter().find(|(table, _, _)| table == "approvals").unwrap();
    assert_eq!(approvals.2.len(), 1, "{doctor:?}");
}

#[test]
fn every_spelling_of_the_requester_is_refused_and_nothing_is_recorded() {
    let s = setup();
    let id = ask(&s.warden, &request("pay_s", 50_000));
    let kernel = s.warden.kernel();
    for name in ["ada", "ADA", "ada ", "cli:ada", "ａｄａ", "Ａｄａ", "refund-agent", "ops:Refund-Agent"] {
        let refused = kernel.grant(&id, name).unwrap_err();
        assert_eq!(reason(&refused), "approver_is_requester", "{name:?}: {refused}");
        let denied = kernel.deny(&id, name, None).unwrap_err();
        assert_eq!(reason(&denied), "approver_is_requester", "{name:?}: {denied}");
    }
    // As a principal through the answer API, verified or not.
    for approver in [verified("ADA", &[]), Approver::asserted(Principal::new("ada", None).unwrap())] {
        let refused = kernel.answer(&id, &approver, None, true, None, None).unwrap_err();
        assert_eq!(reason(&refused), "approver_is_requester", "{approver:?}");
    }
    let record = kernel.approval(&id).unwrap().unwrap();
    assert_eq!((record.status, record.votes.len()), (ApprovalStatus::Pending, 0));
    assert_eq!(kernel.grant(&id, "bob").unwrap().status, ApprovalStatus::Granted);
}

#[test]
fn the_approver_is_recorded_as_a_principal_verified_or_asserted() {
    let s = setup();
    let kernel = s.warden.kernel();
    let asserted = ask(&s.warden, &request("pay_a", 50_000));
    let record = kernel.grant(&asserted, "bob").unwrap();
    assert_eq!(record.votes[0].approver, Principal::new("cli", Some("bob")).unwrap());
    assert!(record.votes[0].verified.is_none());
    assert_eq!(record.approver.as_deref(), Some("cli:bob"));
    let by_host = ask(&s.warden, &request("pay_b", 50_000));
    let record = kernel.answer(&by_host, &verified("carol", &[]), None, true, None, None).unwrap();
    let vote = &record.to_json()["votes"][0];
    assert_eq!((vote["verified"].as_bool(), vote["issuer"].as_str()), (Some(true), Some("https://id.example")));
}

#[test]
fn two_distinct_verified_approvers_with_the_roles_grant_and_one_person_counts_once() {
    let s = setup();
    let id = ask(&s.warden, &request("pay_big", 900_000));
    let kernel = s.warden.kernel();
    let record = kernel.approval(&id).unwrap().unwrap();
    assert_eq!(
        (record.requirement.required, record.requirement.roles.clone()),
        (2, vec!["finance".into(), "risk".into()])
    );

    let first = kernel.answer(&id, &verified("bob", &["finance"]), None, true, None, None).unwrap();
    assert_eq!((first.status, first.grants()), (ApprovalStatus::Pending, 1));
    // The same person again, in another spelling and through another agent: counted once.
    let mut again = verified("BOB", &["risk"]);
    again.principal.agent = "teams".into();
    let refused = kernel.answer(&id, &again, None, true, None, None).unwrap_err();
    assert_eq!(reason(&refused), "already_answered", "{refused}");
    // An asserted CLI grant does not count when two are required.
    assert_eq!(reason(&kernel.grant(&id, "dave").unwrap_err()), "approver_not_verified");
    // A verified approver without one of the roles does not count.
    assert_eq!(
        reason(&kernel.answer(&id, &verified("erin", &["support"]), None, true, None, None).unwrap_err()),
        "approver_lacks_role"
    );
    assert_eq!(kernel.approval(&id).unwrap().unwrap().grants(), 1);
    // Still not usable.
    let mut present = request("pay_big", 900_000);
    present.approval_id = Some(&id);
    assert_eq!(reason(&s.warden.submit(&present).unwrap_err()), "pending");

    let second = kernel.answer(&id, &verified("carol", &["Risk"]), None, true, None, None).unwrap();
    assert_eq!((second.status, second.grants()), (ApprovalStatus::Granted, 2));
    assert_eq!(second.approver.as_deref(), Some("slack:carol"));
    s.warden.submit(&present).unwrap().commit(&json!({"refund": "re_big"})).unwrap();
    let kinds: Vec<EventKind> = kernel.events(0, 100).unwrap().iter().map(|e| e.kind).collect();
    assert!(kinds.contains(&EventKind::APPROVAL_VOTED) && kinds.contains(&EventKind::APPROVAL_GRANTED), "{kinds:?}");
}

#[test]
fn a_deny_by_an_entitled_approver_denies_and_an_unentitled_one_is_refused() {
    let s = setup();
    let id = ask(&s.warden, &request("pay_d", 900_000));
    let kernel = s.warden.kernel();
    kernel.answer(&id, &verified("bob", &["finance"]), None, true, None, None).unwrap();
    assert_eq!(
        reason(&kernel.answer(&id, &verified("mallory", &[]), Some("no"), false, None, None).unwrap_err()),
        "approver_lacks_role"
    );
    let denied = kernel.answer(&id, &verified("carol", &["risk"]), Some("too large"), false, None, None).unwrap();
    assert_eq!((denied.status, denied.votes.len()), (ApprovalStatus::Denied, 2));
    assert_eq!(reason(&kernel.answer(&id, &verified("dan", &["risk"]), None, true, None, None).unwrap_err()), "denied");
}

#[test]
fn an_asserted_approver_counts_when_one_approver_with_no_role_is_required() {
    let s = setup();
    let id = ask(&s.warden, &request("pay_one", 50_000));
    assert_eq!(s.warden.kernel().grant(&id, "bob").unwrap().status, ApprovalStatus::Granted);
}

#[test]
fn a_re_proposal_reports_the_pending_request_and_a_denied_one_is_not_asked_again_until_it_expires() {
    let s = setup();
    let kernel = s.warden.kernel();
    let hooked = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&hooked);
    s.warden.notifier().set_hook(Some(Arc::new(move |request: &Value| {
        seen.lock().unwrap().push(request["approval_id"].as_str().unwrap_or_default().to_owned());
        Ok(())
    })));
    let first = ask(&s.warden, &request("pay_r", 50_000));
    let second = ask(&s.warden, &request("pay_r", 50_000));
    assert_eq!(first, second, "a second request was made for a pending one");
    let requested = |kernel: &warden::Kernel| {
        kernel.events(0, 1000).unwrap().iter().filter(|e| e.kind == EventKind::APPROVAL_REQUESTED).count()
    };
    assert_eq!(requested(kernel), 1);
    kernel.deny(&first, "bob", Some("no")).unwrap();
    let refused = s.warden.submit(&request("pay_r", 50_000)).unwrap_err();
    assert!(matches!(&refused, Error::Denied { reason, .. } if reason == "approval_denied"), "{refused}");
    assert_eq!(requested(kernel), 1);
    // At the instant it expires it still suppresses; one step past, a new request is made.
    let expires = kernel.approval(&first).unwrap().unwrap().expires_at;
    s.clock.set(expires);
    assert!(matches!(s.warden.submit(&request("pay_r", 50_000)), Err(Error::Denied { .. })));
    s.clock.set(expires + 1);
    let third = ask(&s.warden, &request("pay_r", 50_000));
    assert_ne!(third, first);
    assert_eq!(requested(kernel), 2);
    // The hook heard of each new request once, never of the re-proposal.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while hooked.lock().unwrap().len() < 2 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert_eq!(*hooked.lock().unwrap(), vec![first, third]);
}

#[test]
fn a_lapsed_pending_request_is_marked_expired_and_a_new_one_made() {
    let s = setup();
    let first = ask(&s.warden, &request("pay_l", 50_000));
    let expires = s.warden.kernel().approval(&first).unwrap().unwrap().expires_at;
    s.clock.set(expires);
    assert_eq!(ask(&s.warden, &request("pay_l", 50_000)), first);
    s.clock.set(expires + 1);
    let second = ask(&s.warden, &request("pay_l", 50_000));
    assert_ne!(second, first);
    assert_eq!(s.warden.kernel().approval(&first).unwrap().unwrap().status, ApprovalStatus::Expired);
}

#[test]
fn an_unchanged_precondition_permits_and_a_changed_one_is_refused_with_the_approval_still_granted() {
    let s = setup();
    let kernel = s.warden.kernel();
    let world = Arc::new(Mutex::new(json!({"balance": 500, "ticket": "open"})));
    let calls = Arc::new(Mutex::new(0));
    let (state, counted) = (Arc::clone(&world), Arc::clone(&calls));
    let provider = move |action: &Value| -> Result<Value, String> {
        assert_eq!(action["name"], "stripe.refund");
        *counted.lock().unwrap() += 1;
        Ok(state.lock().unwrap().clone())
    };
    let with_provider = |payment: &'static str, approval: Option<&'static str>| {
        let mut call = request(payment, 50_000);
        call.approval_id = approval;
        call.precondition = Some(PreconditionSource::Provider(&provider));
        call
    };
    let id = ask(&s.warden, &with_provider("pay_p", None));
    let id: &'static str = Box::leak(id.into_boxed_str());
    let record = kernel.approval(id).unwrap().unwrap();
    assert_eq!(record.precondition, Some(fingerprint(&json!({"balance": 500, "ticket": "open"})).unwrap()));
    kernel.grant(id, "bob").unwrap();

    *world.lock().unwrap() = json!({"balance": 0, "ticket": "open"});
    let refused = s.warden.submit(&with_provider("pay_p", Some(id))).unwrap_err();
    assert_eq!(reason(&refused), "precondition_changed", "{refused}");
    assert_eq!(kernel.approval(id).unwrap().unwrap().status, ApprovalStatus::Granted);
    // Presented without any precondition: refused the same way (fail closed).
    let mut bare = request("pay_p", 50_000);
    bare.approval_id = Some(id);
    assert_eq!(reason(&s.warden.submit(&bare).unwrap_err()), "precondition_changed");

    *world.lock().unwrap() = json!({"ticket": "open", "balance": 500});
    s.warden.submit(&with_provider("pay_p", Some(id))).unwrap().commit(&json!(null)).unwrap();
    assert_eq!(kernel.approval(id).unwrap().unwrap().status, ApprovalStatus::Consumed);
    assert_eq!(*calls.lock().unwrap(), 3, "asked at the request and before each spend");
    // An allowed action never asks the provider.
    s.warden
        .submit(&{
            let mut call = request("pay_small", 10);
            call.precondition = Some(PreconditionSource::Provider(&provider));
            call
        })
        .unwrap()
        .commit(&json!(null))
        .unwrap();
    assert_eq!(*calls.lock().unwrap(), 3);
}

#[test]
fn a_failing_precondition_provider_refuses_and_requests_nothing() {
    let s = setup();
    let failing = |_: &Value| -> Result<Value, String> { Err("the ledger is down".into()) };
    let mut call = request("pay_f", 50_000);
    call.precondition = Some(PreconditionSource::Provider(&failing));
    let refused = s.warden.submit(&call).unwrap_err();
    assert!(matches!(&refused, Error::InvalidInput(m) if m.message.contains("the ledger is down")), "{refused}");
    assert_eq!(refused.invalid_input_kind(), Some(warden::error::InvalidInputKind::HookFailed));
    assert!(s.warden.kernel().pending_approvals().unwrap().is_empty());
    call.precondition = Some(PreconditionSource::State(json!({"x": 0.5})));
    let unprintable = s.warden.submit(&call).unwrap_err();
    assert_eq!(unprintable.invalid_input_kind(), Some(warden::error::InvalidInputKind::NotCanonical), "{unprintable}");
    assert_eq!(unprintable.invalid_input_path(), Some("precondition"), "{unprintable}");
}

#[test]
fn waiting_returns_the_answer_and_ends_by_the_kernels_clock() {
    let s = setup();
    let kernel = s.warden.kernel().clone();
    let id = ask(&s.warden, &request("pay_w", 50_000));
    let answering = {
        let (kernel, id) = (kernel.clone(), id.clone());
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(30));
            kernel.grant(&id, "bob").unwrap();
        })
    };
    let answered = kernel.wait_for_answer(&id, 60 * SECOND).unwrap().unwrap();
    answering.join().unwrap();
    assert_eq!(answered.status, ApprovalStatus::Granted);

    // A wait that nobody answers ends when the kernel's clock passes its deadline, whatever
    // the wall clock says.
    let other = ask(&s.warden, &request("pay_w2", 50_000));
    let clock = s.clock.clone();
    let mover = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(30));
        clock.advance(10 * SECOND);
    });
    let waited = kernel.wait_for_answer(&other, 10 * SECOND).unwrap().unwrap();
    mover.join().unwrap();
    assert_eq!(waited.status, ApprovalStatus::Pending);
    // Past its expiry a pending request reads expired.
    s.clock.set(waited.expires_at + 1);
    assert_eq!(kernel.wait_for_answer(&other, 0).unwrap().unwrap().status, ApprovalStatus::Expired);
    assert!(kernel.wait_for_answer("apr_00000000000000000000000000000000", 0).unwrap().is_none());
    assert!(matches!(kernel.wait_for_answer(&other, warden::kernel::MAX_WAIT + 1), Err(Error::InvalidInput(_))));
}

#[test]
fn a_failing_or_panicking_hook_never_fails_the_action_and_is_recorded() {
    let s = setup();
    let kernel = s.warden.kernel();
    let failed = |id: &str| {
        kernel
            .events(0, 1000)
            .unwrap()
            .into_iter()
            .find(|e| e.kind == EventKind::APPROVAL_NOTIFY_FAILED && e.approval_id.as_deref() == Some(id))
    };
    let settle = |id: &str| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while failed(id).is_none() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    };
    s.warden.notifier().set_hook(Some(Arc::new(|_: &Value| Err("the pager is down".to_owned()))));
    let id = ask(&s.warden, &request("pay_h", 50_000));
    settle(&id);
    s.warden.notifier().set_hook(Some(Arc::new(|_: &Value| panic!("a host bug"))));
    let other = ask(&s.warden, &request("pay_h2", 50_000));
    settle(&other);
    assert!(failed(&id).unwrap().data.contains("the pager is down"));
    assert!(failed(&other).unwrap().data.contains("panicked"));
    kernel.grant(&id, "bob").unwrap();
    let mut present = request("pay_h", 50_000);
    present.approval_id = Some(&id);
    s.warden.submit(&present).unwrap().commit(&json!(null)).unwrap();
}

#[test]
fn approve_rules_are_refused_where_they_cannot_apply() {
    let table = [
        ("      - decision: allow\n        approval: { required: 2 }\n", "only with 'decision: approve'"),
        ("      - decision: approve\n        approval: { required: 0 }\n", "1..=20"),
        ("      - decision: approve\n        approval: { required: 21 }\n", "1..=20"),
        ("      - decision: approve\n        approval: { roles: finance }\n", "a list of role names"),
        ("      - decision: approve\n        approval: { roles: [a, A] }\n", "named twice"),
        ("      - decision: approve\n        approval: { quorum: 2 }\n", "unknown key 'quorum'"),
    ];
    for (rule, expected) in table {
        let text = format!("schema: warden/v1\nactions:\n  a:\n    rules:\n{rule}");
        let error = warden::document::load_str(&text, "t.yaml").unwrap_err().to_string();
        assert!(error.contains(expected), "{rule:?}: {error}");
    }
    let plain = "schema: warden/v1\nactions:\n  a:\n    rules:\n      - decision: approve\n";
    let with =
        "schema: warden/v1\nactions:\n  a:\n    rules:\n      - decision: approve\n        approval: { required: 1 }\n";
    let hash = |text: &str| warden::document::load_str(text, "t.yaml").unwrap().policy_hash;
    assert_ne!(hash(plain), hash(with), "who must approve is part of the policy");
}

#[test]
fn a_schema_2_store_migrates_its_approvals_to_schema_4() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.redb");
    std::fs::copy(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/store-v2.redb"), &path).unwrap();
    let clock = ManualClock::new(1_790_000_000_000_000);
    let kernel = open(&path, &clock);
    let get = |id: &str| kernel.approval(id).unwrap().unwrap();
    let pending = get("apr_4d1c055e973f24629202431db454b7cb");
    let granted = get("apr_352475085a789fc63c8847d08a3ac00f");
    let denied = get("apr_4fb348828af2178d58508650d29ee932");
    let consumed = get("apr_27011e6954ffed05e54619d3cf0443b8");
    assert_eq!(
        [pending.status, granted.status, denied.status, consumed.status],
        [ApprovalStatus::Pending, ApprovalStatus::Granted, ApprovalStatus::Denied, ApprovalStatus::Consumed]
    );
    assert!(pending.action.is_none() && pending.to_json()["action_recorded"] == false);
    assert_eq!(granted.votes.len(), 1);
    assert_eq!(granted.votes[0].approver, Principal::new("ops", Some("bob")).unwrap());
    assert!(!denied.votes[0].grant);
    // What cannot be shown cannot be answered; the grant given before still binds its hash.
    assert_eq!(reason(&kernel.grant(&pending.approval_id, "carol").unwrap_err()), "action_not_recorded");
    let action = Action::new(
        "stripe.refund",
        json!({"payment_id": "pay_granted", "amount": 90000}),
        Principal::new("support-agent", Some("ada")).unwrap(),
        None,
        "production",
    )
    .unwrap();
    let template = key_template();
    kernel.propose(&approve(&action, &template, Some(&granted.approval_id))).unwrap().commit(&json!(1)).unwrap();
    assert!(kernel.doctor().unwrap().tables.iter().all(|(_, _, problems)| problems.is_empty()));
    assert!(kernel.verify_chain().unwrap().ok);
}

use warden::Action;

/// A request by `agent-7` for `ada`, one approver with no role.
fn ask_as_agent_7(s: &Setup, payment: &str) -> String {
    let principal = Principal::new("agent-7", Some("ada")).unwrap();
    ask(&s.warden, &ActionRequest::new("stripe.refund", json!({"payment_id": payment, "amount": 50_000}), principal))
}

#[test]
fn the_requester_cannot_approve_itself_under_any_principal_form_or_look_alike_and_its_call_stays_refused() {
    let s = setup();
    let id = ask_as_agent_7(&s, "pay_self");
    let kernel = s.warden.kernel();
    // The principal forms, then each class of look-alike: U+2011 and U+2010 hyphens, Cyrillic
    // and Greek letters, fullwidth, case, spaces and connectors.
    let spellings = [
        "ada:",
        "agent-7:",
        "agent-7/ada",
        "agent-7:ada",
        "ada/agent-7",
        "ada/",
        "cli:ada",
        "ops/agent-7",
        "agent\u{2011}7:",
        "agent\u{2010}7/ada",
        "ad\u{0430}",
        "\u{0430}d\u{0430}:",
        "\u{0391}DA",
        "ＡＤＡ",
        "ａｇｅｎｔ－７/ａｄａ",
        "Agent_7:",
        "agent 7",
        "A D A",
    ];
    for name in spellings {
        let refused = kernel.grant(&id, name).unwrap_err();
        assert_eq!(reason(&refused), "approver_is_requester", "{name:?}: {refused}");
        let denied = kernel.deny(&id, name, None).unwrap_err();
        assert_eq!(reason(&denied), "approver_is_requester", "{name:?}: {denied}");
    }
    let record = kernel.approval(&id).unwrap().unwrap();
    assert_eq!((record.status, record.votes.len()), (ApprovalStatus::Pending, 0));
    // The requester's next call, presenting the request, is still refused.
    let principal = Principal::new("agent-7", Some("ada")).unwrap();
    let mut present =
        ActionRequest::new("stripe.refund", json!({"payment_id": "pay_self", "amount": 50_000}), principal);
    present.approval_id = Some(&id);
    assert_eq!(reason(&s.warden.submit(&present).unwrap_err()), "pending");
}

#[test]
fn an_approver_name_that_cannot_be_parsed_is_refused_by_name_and_nothing_is_recorded() {
    let s = setup();
    let id = ask_as_agent_7(&s, "pay_parse");
    let kernel = s.warden.kernel();
    let table = [
        ("ops:bob:x", "has more than one separator"),
        ("ops/bob:x", "has more than one separator"),
        (":bob", "has nothing before its separator"),
        ("ops\u{FF1A}bob", "contains U+FF1A, which reads as a separator"),
        ("ops\u{2236}bob", "contains U+2236, which reads as a separator"),
        ("b\u{034F}ob", "contains the invisible or control character U+034F"),
        ("bob\u{200D}", "contains the invisible or control character U+200D"),
    ];
    for (name, why) in table {
        let Err(Error::InvalidInput(warden::error::InvalidInput { message, .. })) = kernel.grant(&id, name) else {
            panic!("{name:?} was not refused as input");
        };
        assert!(message.starts_with(&format!("the approver name {name:?} {why}")), "{name:?}: {message}");
        assert!(message.contains("write USER, AGENT:USER or AGENT/USER"), "{message}");
    }
    // Fields given apart must each be one plain name.
    let fields = Approver::asserted(Principal::new("slack", Some("agent-7/ada")).unwrap());
    let refused = kernel.answer(&id, &fields, None, true, None, None).unwrap_err();
    assert!(refused.to_string().contains("\"agent-7/ada\" contains '/', a separator"), "{refused}");
    assert_eq!(kernel.approval(&id).unwrap().unwrap().votes.len(), 0);
}

const TWO_OF_ANY: &str = r#"
schema: warden/v1
actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    rules:
      - decision: approve
        approval: { required: 2 }
"#;

fn idp(principal: Principal, sub: &str) -> Approver {
    Approver::verified(principal, Verified::new(Some("https://idp.test"), &json!({"sub": sub})).unwrap())
}

#[test]
fn m_of_n_counts_one_verified_identity_once_whatever_name_it_answers_under() {
    let s = setup_with(TWO_OF_ANY);
    let id = ask(&s.warden, &request("pay_twice", 50));
    let kernel = s.warden.kernel();
    let bob = kernel.answer(&id, &idp(Principal::new("slack", Some("bob")).unwrap(), "u-123"), None, true, None, None);
    assert_eq!(bob.unwrap().grants(), 1);
    let robert = idp(Principal::new("teams", Some("robert")).unwrap(), "u-123");
    let refused = kernel.answer(&id, &robert, None, true, None, None).unwrap_err();
    assert_eq!(reason(&refused), "already_answered", "{refused}");
    assert!(refused.to_string().contains("each verified identity counts once"), "{refused}");
    // Nor may it deny under its second name, nor an asserted `bob` add a vote.
    assert_eq!(reason(&kernel.answer(&id, &robert, None, false, None, None).unwrap_err()), "already_answered");
    let record = kernel.approval(&id).unwrap().unwrap();
    assert_eq!((record.status, record.grants(), record.votes.len()), (ApprovalStatus::Pending, 1, 1));
    let mut present = request("pay_twice", 50);
    present.approval_id = Some(&id);
    assert_eq!(reason(&s.warden.submit(&present).unwrap_err()), "pending");
    // A second identity grants it.
    let carol = idp(Principal::new("slack", Some("carol")).unwrap(), "u-456");
    let granted = kernel.answer(&id, &carol, None, true, None, None).unwrap();
    assert_eq!((granted.status, granted.grants()), (ApprovalStatus::Granted, 2));
}

#[test]
fn an_approver_carrying_the_requesters_verified_identity_is_the_requester_under_any_name() {
    let s = setup_with(TWO_OF_ANY);
    let mut call = request("pay_ident", 50);
    call.identity = Some(Verified::new(Some("https://idp.test"), &json!({"sub": "u-9"})).unwrap());
    let id = ask(&s.warden, &call);
    let kernel = s.warden.kernel();
    let robert = idp(Principal::new("slack", Some("robert")).unwrap(), "u-9");
    let refused = kernel.answer(&id, &robert, None, true, None, None).unwrap_err();
    assert_eq!(reason(&refused), "approver_is_requester", "{refused}");
    assert!(refused.to_string().contains("carries the requester's verified identity"), "{refused}");
    // Another identity under the same issuer may answer.
    kernel.answer(&id, &idp(Principal::new("slack", Some("carol")).unwrap(), "u-1"), None, true, None, None).unwrap();
}
