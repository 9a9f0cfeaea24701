//! `warden verify`: G1–G14 pass on real documents, are not applicable where the document gives
//! them nothing to run on, and fail on a deliberately broken build.

use std::sync::Mutex;

use warden::document::{load_str, Document};
use warden::verify::{run, Status, VerifyReport};

// The binary's G4 process race, included by path so this test races OS processes through the
// very code `warden verify` runs (the library spawns no process; docs/VERIFY.md says why).
#[path = "../src/bin/warden/verify_race.rs"]
mod verify_race;
use verify_race::ChildProgram;

/// Tests run one at a time: the broken-build switch is process-wide.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

const STARTER: &str = r#"
schema: warden/v1
version: "2026-11 r1"
environment: production
mode: enforce
actions:
  customer.read:
    decision: allow
  stripe.refund:
    effect: "refund:{payment_id}"
    max_attempts: 2
    lease: PT1M
    rules:
      - when: { amount_gte: 0, amount_lte: 50000 }
        decision: allow
      - when: { amount_gte: 0, amount_lte: 500000 }
        decision: approve
      - decision: deny
"#;

/// Every operator, a ceiling of one attempt, two placeholders and a resource template.
const MAX_ATTEMPTS_ONE: &str = r#"
schema: warden/v1
mode: enforce
actions:
  payments.transfer:
    effect: "transfer:{tenant}:{transfer_id}"
    resource: "account:{account}"
    max_attempts: 1
    rules:
      - when: { currency_in: [EUR, USD], amount_gt: 0, amount_lt: 1000, account_neq: frozen }
        decision: allow
      - when: { currency_eq: EUR, amount_gte: 1000, amount_lte: 100000, priority_neq: 3 }
        decision: approve
      - decision: deny
  payments.delete:
    decision: deny
"#;

const VECTORS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/vectors/ctrlrun-0.12.2/policies.json");

fn load(text: &str) -> Document {
    load_str(text, "verify-test.yaml").unwrap()
}

fn status(report: &VerifyReport, id: &str) -> Status {
    report.guarantees.iter().find(|g| g.id == id).unwrap_or_else(|| panic!("no {id}")).status
}

fn assert_no_failure(report: &VerifyReport) {
    assert!(report.ok(), "{}", report.render());
    assert!(report.guarantees.iter().all(|g| g.status != Status::Fail), "{}", report.render());
}

fn assert_all_pass(report: &VerifyReport) {
    assert_no_failure(report);
    for g in &report.guarantees {
        assert_eq!(g.status, Status::Pass, "{} {}: {}", g.id, g.title, g.detail);
    }
}

fn ctrlrun_grant_role() -> (String, String) {
    let text = std::fs::read_to_string(VECTORS).unwrap();
    let rows: serde_json::Value = serde_json::from_str(&text).unwrap();
    let row = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["policy_yaml"].as_str().is_some_and(|yaml| yaml.contains("iam.grant_role")))
        .expect("a ctrlrun policy with iam.grant_role");
    (row["policy_yaml"].as_str().unwrap().to_owned(), row["policy_hash"].as_str().unwrap().to_owned())
}

#[test]
fn every_guarantee_passes_on_the_warden_starter_document() {
    let _serial = serial();
    let document = load(STARTER);
    let report = run(&document, None).unwrap();
    assert_all_pass(&report);
    assert_eq!(report.policy_hash, document.policy_hash);
    let g1 = report.guarantees.iter().find(|g| g.id == "G1").unwrap();
    assert!(g1.detail.contains("stripe.refund rule[1]"), "{}", g1.detail);
    let g4 = report.guarantees.iter().find(|g| g.id == "G4").unwrap();
    assert!(g4.detail.contains("threads"), "without a child program the race says it ran on threads: {}", g4.detail);
}

#[test]
fn every_guarantee_passes_on_the_ctrlrun_grant_role_policy() {
    let _serial = serial();
    let (yaml, hash) = ctrlrun_grant_role();
    let document = load(&yaml);
    assert_eq!(document.policy_hash, hash);
    let report = run(&document, None).unwrap();
    assert_all_pass(&report);
    let g1 = report.guarantees.iter().find(|g| g.id == "G1").unwrap();
    assert!(g1.detail.contains("iam.grant_role rule[1]"), "the approve rule (role_eq, user_id_neq): {}", g1.detail);
    // Every rule of iam.grant_role was reachable, so none is listed as unexercised.
    assert!(!report.blind_spots.iter().any(|s| s.contains("iam.grant_role")), "{:?}", report.blind_spots);
}

#[test]
fn every_guarantee_passes_on_a_document_with_a_ceiling_of_one_attempt() {
    let _serial = serial();
    let report = run(&load(MAX_ATTEMPTS_ONE), None).unwrap();
    assert_all_pass(&report);
    let g5 = report.guarantees.iter().find(|g| g.id == "G5").unwrap();
    assert!(g5.detail.contains("max_attempts of 1"), "{}", g5.detail);
    assert!(report.blind_spots.len() == warden::verify::BLIND_SPOTS.len(), "{:?}", report.blind_spots);
}

#[test]
fn gateway_entries_run_through_every_guarantee_and_what_only_the_gateway_checks_is_named() {
    let _serial = serial();
    let text = r#"
schema: warden/v1
mode: enforce
gateway: { unknown_methods: refuse }
actions:
  mcp.acme.create_refund:
    effect: "refund:{payment_id}"
    upstream: { tool_schema_sha256: "sha256:0000000000000000000000000000000000000000000000000000000000000000" }
    rules:
      - when: { amount_gte: 0, amount_lte: 50000 }
        decision: allow
      - when: { amount_gte: 0, amount_lte: 500000 }
        decision: approve
      - decision: deny
  mcp.acme.careful:
    effect: "careful:{id}"
    mcp: { not_executed_on_error: true }
    decision: allow
"#;
    let report = run(&load(text), None).unwrap();
    assert_all_pass(&report);
    let g1 = report.guarantees.iter().find(|g| g.id == "G1").unwrap();
    assert!(g1.detail.contains("mcp.acme.create_refund"), "{}", g1.detail);
    let spots = report.blind_spots.join("\n");
    assert!(spots.contains("`warden gateway`'s own checks for the 2 mcp.* action(s)"), "{spots}");
    assert!(spots.contains("mcp.acme.create_refund pins the upstream's tool schema"), "{spots}");
    assert!(spots.contains("mcp.acme.careful claims mcp.not_executed_on_error"), "{spots}");
    assert!(spots.contains("gateway.unknown_methods: refuse"), "{spots}");
    // A document without gateway entries gets none of these.
    assert!(!run(&load(STARTER), None).unwrap().blind_spots.iter().any(|s| s.contains("gateway")));
}

#[test]
fn without_an_approve_rule_g1_and_g2_are_not_applicable_rather_than_passing() {
    let _serial = serial();
    let without =
        STARTER.replace("      - when: { amount_gte: 0, amount_lte: 500000 }\n        decision: approve\n", "");
    assert!(!without.contains("approve"));
    let report = run(&load(&without), None).unwrap();
    assert_no_failure(&report);
    for id in ["G1", "G2"] {
        assert_eq!(status(&report, id), Status::NotApplicable, "{}", report.render());
        let g = report.guarantees.iter().find(|g| g.id == id).unwrap();
        assert_eq!(g.detail, "the document has no approve rule");
    }
    assert_eq!(status(&report, "G3"), Status::Pass);
}

#[test]
fn without_an_effect_template_the_effect_guarantees_are_not_applicable() {
    let _serial = serial();
    let report = run(&load("schema: warden/v1\nactions:\n  customer.read:\n    decision: allow\n"), None).unwrap();
    assert_no_failure(&report);
    for id in ["G1", "G2", "G3", "G4", "G5", "G10", "G12"] {
        assert_eq!(status(&report, id), Status::NotApplicable, "{id}: {}", report.render());
    }
    // Expiry and containment need only an allowed action, effect or not.
    for id in ["G6", "G7", "G8", "G9", "G11", "G13", "G14"] {
        assert_eq!(status(&report, id), Status::Pass, "{id}: {}", report.render());
    }
}

#[test]
fn an_observe_mode_document_is_refused() {
    let _serial = serial();
    let refused = run(&load(&STARTER.replace("mode: enforce", "mode: observe")), None).unwrap_err();
    assert!(matches!(refused, warden::Error::Config(_)), "{refused}");
    assert!(refused.to_string().contains("observe"), "{refused}");
}

#[test]
fn the_json_report_has_one_entry_per_guarantee_and_the_blind_spots() {
    let _serial = serial();
    let document = load(STARTER);
    let report = run(&document, None).unwrap();
    let json = report.to_json();
    assert_eq!(json["ok"], true);
    assert_eq!(json["policy_hash"], document.policy_hash.as_str());
    assert_eq!(json["summary"], serde_json::json!({"pass": 14, "fail": 0, "not_applicable": 0}));
    let guarantees = json["guarantees"].as_array().unwrap();
    let ids: Vec<&str> = guarantees.iter().map(|g| g["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["G1", "G2", "G3", "G4", "G5", "G6", "G7", "G8", "G9", "G10", "G11", "G12", "G13", "G14"]);
    for g in guarantees {
        let keys: Vec<&String> = g.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["detail", "id", "status", "title"]);
        assert!(["pass", "fail", "not_applicable"].contains(&g["status"].as_str().unwrap()));
    }
    assert_eq!(guarantees[7]["status"], "pass");
    let spots = json["blind_spots"].as_array().unwrap();
    for needle in ["executors", "every call site", "deployment", "right policy"] {
        assert!(spots.iter().any(|s| s.as_str().unwrap().contains(needle)), "{needle}: {spots:?}");
    }
}

#[test]
fn the_human_report_prints_one_line_per_guarantee_and_what_verify_cannot_see() {
    let _serial = serial();
    let text = run(&load(STARTER), None).unwrap().render();
    assert!(text.contains("\nG1 pass  mutated approval refused — stripe.refund rule[1]"), "{text}");
    assert!(text.contains("\nG8 pass  expired authority refused — "), "{text}");
    assert!(text.contains("verify passed: 14 pass, 0 fail, 0 not applicable"), "{text}");
    let blind = text.split("verify cannot see:\n").nth(1).unwrap();
    assert_eq!(blind.lines().count(), warden::verify::BLIND_SPOTS.len(), "{text}");
    assert_eq!(text.lines().filter(|l| l.starts_with('G')).count(), 14);
}

#[test]
fn a_rule_no_arguments_can_reach_is_listed_as_unexercised() {
    let _serial = serial();
    let shadowed = STARTER.replace("amount_gte: 0, amount_lte: 500000", "amount_gte: 0, amount_lte: 50");
    let report = run(&load(&shadowed), None).unwrap();
    assert_no_failure(&report);
    assert_eq!(status(&report, "G1"), Status::NotApplicable, "{}", report.render());
    assert!(
        report.blind_spots.iter().any(|s| s.starts_with("stripe.refund rule[1] (approve)")),
        "{:?}",
        report.blind_spots
    );
}

/// Not a test: the body of a G4 child when this test binary stands in for `warden`.
#[test]
#[ignore = "entry point for the child processes of the G4 race"]
fn verify_child_entry() {
    let (Ok(spec), Ok(index)) = (std::env::var("WARDEN_VERIFY_CHILD_SPEC"), std::env::var("WARDEN_VERIFY_CHILD_INDEX"))
    else {
        return;
    };
    std::process::exit(warden::verify::child_main(&[spec, index]));
}

#[cfg(unix)]
#[test]
fn eight_os_processes_race_for_one_effect_and_exactly_one_wins() {
    use std::os::unix::fs::PermissionsExt;
    let _serial = serial();
    // A stand-in for `warden __verify-child SPEC INDEX`: this test binary, selecting the entry above.
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap().display().to_string().replace('\'', r"'\''");
    let script = dir.path().join("warden-child");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\n[ \"$1\" = __verify-child ] || exit 64\nWARDEN_VERIFY_CHILD_SPEC=\"$2\" \
             WARDEN_VERIFY_CHILD_INDEX=\"$3\" exec '{exe}' verify_child_entry --exact --ignored --nocapture \
             --test-threads=1 --quiet\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let report = run(&load(STARTER), Some(&ChildProgram(script))).unwrap();
    assert_all_pass(&report);
    let g4 = report.guarantees.iter().find(|g| g.id == "G4").unwrap();
    assert!(g4.detail.contains("8 OS processes"), "{}", g4.detail);
    assert!(g4.detail.contains("7 were refused"), "{}", g4.detail);
}

#[test]
fn a_child_program_that_cannot_race_makes_g4_fail() {
    let _serial = serial();
    let report = run(&load(STARTER), Some(&ChildProgram("/bin/false".into()))).unwrap();
    assert_eq!(status(&report, "G4"), Status::Fail, "{}", report.render());
    assert!(!report.ok());
}

#[test]
fn a_child_given_bad_arguments_says_so_and_exits_one() {
    assert_eq!(warden::verify::child_main(&[]), 1);
    assert_eq!(warden::verify::child_main(&["/nonexistent/spec.json".into(), "0".into()]), 1);
}

#[test]
fn a_document_with_an_authority_section_passes_and_lists_its_own_grants_as_unseen() {
    let _serial = serial();
    let text = format!(
        "{STARTER}authority:\n  grants:\n    - id: readers\n      subject: {{ agent: \"support-*\" }}\n      actions: [customer.read]\n"
    );
    let report = run(&load(&text), None).unwrap();
    assert_all_pass(&report);
    assert!(report.blind_spots.iter().any(|s| s.contains("the document's own grants")), "{}", report.render());
    let g9 = report.guarantees.iter().find(|g| g.id == "G9").unwrap();
    assert!(g9.detail.starts_with("16 children that widen or omit one dimension"), "{}", g9.detail);
    let g8 = report.guarantees.iter().find(|g| g.id == "G8").unwrap();
    assert!(g8.detail.contains("authority_expired"), "{}", g8.detail);
    // Without a section, nothing about grants is listed as unseen.
    let plain = run(&load(STARTER), None).unwrap();
    assert!(!plain.blind_spots.iter().any(|s| s.contains("own grants")));
}

#[test]
fn every_guarantee_passes_on_a_document_whose_approvals_need_two_verified_approvers_with_roles() {
    let _serial = serial();
    let report = run(
        &load(
            "schema: warden/v1\nactions:\n  stripe.refund:\n    effect: \"refund:{payment_id}\"\n    rules:\n      \
             - when: { amount_lte: 100 }\n        decision: allow\n      - decision: approve\n        \
             approval: { required: 2, roles: [finance, risk] }\n",
        ),
        None,
    )
    .unwrap();
    assert_no_failure(&report);
    for id in ["G1", "G2", "G12"] {
        assert_eq!(status(&report, id), Status::Pass, "{id}: {}", report.render());
    }
}
