//! Several OS processes on one store file: the winners are unique, nothing granted is lost
//! across SIGKILL, and a brand-new file opened by many at once gets one schema.
//!
//! Child processes are this test binary run again with `child_process_entry` selected and a
//! role in the environment. Children never sleep to decide anything: they use a fixed
//! injected clock, and wait on a start file only to line up at the barrier.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use warden::test_support::KernelInternals;

use common::*;
use warden::{Decision, EffectState, Error, Kernel, KernelOptions, ManualClock, Proposal, Ruling};

const PROCESSES: usize = 8;

/// A document whose approve rule lets an approver make scoped grants.
const SCOPED_DOCUMENT: &str = r#"
schema: warden/v1
actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    rules:
      - when: { amount_lte: 10000 }
        decision: approve
        approval: { scoped: { max_uses: 5, max_minutes: 30 } }
"#;

/// A governed handle on the store in `dir` under `SCOPED_DOCUMENT`, with a fixed clock at `now`.
fn scoped_warden(dir: &Path, now: i64) -> warden::Warden {
    let document = warden::document::load_str(SCOPED_DOCUMENT, "scoped.yaml").unwrap();
    let options =
        warden::WardenOptions { clock: std::sync::Arc::new(ManualClock::new(now)), ..warden::WardenOptions::default() };
    warden::Warden::open(located(dir), document, options).expect("opens the store with the document")
}

fn scoped_refund(payment: &str) -> warden::ActionRequest<'static> {
    warden::ActionRequest::new(
        "stripe.refund",
        serde_json::json!({"payment_id": payment, "customer_id": "cus_1", "amount": 2000}),
        warden::Principal::new("refund-agent", Some("ada")).unwrap(),
    )
}

fn spawn_child(role: &str, dir: &Path, index: usize, extra: &[(&str, String)]) -> Child {
    let exe = std::env::current_exe().expect("current exe");
    let mut command = Command::new(exe);
    command
        .args(["child_process_entry", "--exact", "--ignored", "--nocapture", "--test-threads=1", "--quiet"])
        .env("WARDEN_CHILD_ROLE", role)
        .env("WARDEN_CHILD_DIR", dir)
        .env("WARDEN_CHILD_INDEX", index.to_string())
        .env("RUST_BACKTRACE", "0")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    for (key, value) in extra {
        command.env(key, value);
    }
    command.spawn().expect("spawn child")
}

/// Start `PROCESSES` children, wait until all are at the barrier, release them together, and
/// collect each one's `CHILD:` lines and exit status.
fn race(role: &str, dir: &Path, extra: &[(&str, String)]) -> Vec<(bool, Vec<String>)> {
    let children: Vec<Child> = (0..PROCESSES).map(|i| spawn_child(role, dir, i, extra)).collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    while (0..PROCESSES).any(|i| !dir.join(format!("ready.{i}")).exists()) {
        assert!(Instant::now() < deadline, "children never reached the barrier");
        std::thread::sleep(Duration::from_millis(2));
    }
    std::fs::write(dir.join("go"), b"").unwrap();
    children
        .into_iter()
        .map(|child| {
            let output = child.wait_with_output().expect("child output");
            let lines = String::from_utf8_lossy(&output.stdout)
                .lines()
                .filter_map(|l| l.strip_prefix("CHILD:").map(str::to_owned))
                .collect();
            (output.status.success(), lines)
        })
        .collect()
}

fn child_kernel(dir: &Path) -> Kernel {
    let now: i64 = std::env::var("WARDEN_CHILD_NOW").ok().and_then(|v| v.parse().ok()).unwrap_or(T0);
    let clock = ManualClock::new(now);
    Kernel::open(
        located(dir),
        KernelOptions {
            clock: std::sync::Arc::new(clock),
            policy_hash: None,
            policy_version: None,
            environment: None,
            ..KernelOptions::default()
        },
    )
    .expect("child opens the store")
}

fn barrier(dir: &Path, index: &str) {
    std::fs::write(dir.join(format!("ready.{index}")), b"").unwrap();
    while !dir.join("go").exists() {
        std::thread::sleep(Duration::from_micros(200));
    }
}

fn say(line: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "CHILD:{line}");
    let _ = out.flush();
}

/// Not a test: the body every child process runs, selected by `WARDEN_CHILD_ROLE`.
#[test]
#[ignore = "entry point for child processes of the multi-process tests"]
fn child_process_entry() {
    let Ok(role) = std::env::var("WARDEN_CHILD_ROLE") else { return };
    let dir = PathBuf::from(std::env::var("WARDEN_CHILD_DIR").unwrap());
    let index = std::env::var("WARDEN_CHILD_INDEX").unwrap();
    let template = key_template();
    match role.as_str() {
        "race_reserve" => {
            let kernel = child_kernel(&dir);
            let action = refund("txn_race", 5);
            barrier(&dir, &index);
            match kernel.propose(&allow(&action, &template)) {
                Ok(permit) => {
                    // The "remote call": only one process may ever get here.
                    std::fs::OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        .open(dir.join("remote_call"))
                        .expect("a second remote call happened");
                    permit.commit(&serde_json::json!({"winner": index})).unwrap();
                    say("won");
                }
                Err(Error::Duplicate { .. }) => say("lost"),
                Err(other) => panic!("unexpected refusal {other}"),
            }
        }
        "race_scoped" => {
            let warden = scoped_warden(&dir, T0);
            barrier(&dir, &index);
            match warden.submit(&scoped_refund(&format!("pay_race_{index}"))) {
                Ok(permit) => {
                    let grant = permit.scoped_grant_id().expect("covered by the grant").to_owned();
                    permit.commit(&serde_json::json!(null)).unwrap();
                    say(&format!("covered {grant}"));
                }
                Err(Error::ApprovalRequired { .. }) => say("asked"),
                Err(other) => panic!("unexpected refusal {other}"),
            }
        }
        "race_consume" => {
            let kernel = child_kernel(&dir);
            let approval = std::env::var("WARDEN_CHILD_APPROVAL").unwrap();
            let action = refund("txn_approved", 90_000);
            barrier(&dir, &index);
            let mut proposal = Proposal::new(&action, Ruling::new(Decision::Approve, "rule[1]"));
            proposal.approval_id = Some(&approval);
            match kernel.propose(&proposal) {
                Ok(permit) => {
                    permit.commit(&serde_json::json!(null)).unwrap();
                    say("consumed");
                }
                Err(Error::ApprovalMismatch { reason, .. }) if reason == "consumed" => say("refused"),
                Err(other) => panic!("unexpected refusal {other}"),
            }
        }
        "race_answer" => {
            let kernel = child_kernel(&dir);
            let approval = std::env::var("WARDEN_CHILD_APPROVAL").unwrap();
            barrier(&dir, &index);
            let who = format!("ops:{index}");
            let answered = if index.parse::<usize>().unwrap() % 2 == 0 {
                kernel.grant(&approval, &who)
            } else {
                kernel.deny(&approval, &who, None)
            };
            match answered {
                Ok(record) => say(&format!("answered {}", record.status.as_str())),
                Err(Error::ApprovalMismatch { .. }) => say("refused"),
                Err(other) => panic!("unexpected refusal {other}"),
            }
        }
        "race_votes" => {
            let kernel = child_kernel(&dir);
            let approval = std::env::var("WARDEN_CHILD_APPROVAL").unwrap();
            barrier(&dir, &index);
            let grant = index.parse::<usize>().unwrap() % 3 != 2;
            let approver = warden::approval::Approver::verified(
                warden::Principal::new("idp", Some(&format!("approver{index}"))).unwrap(),
                warden::approval::Verified::new(Some("https://id.example"), &serde_json::json!({})).unwrap(),
            );
            match kernel.answer(&approval, &approver, None, grant, None, None) {
                Ok(record) => {
                    say(&format!("voted {} {}", if grant { "grant" } else { "deny" }, record.status.as_str()));
                }
                Err(Error::ApprovalMismatch { reason, .. }) => say(&format!("refused {reason}")),
                Err(other) => panic!("unexpected refusal {other}"),
            }
        }
        "race_request" => {
            let kernel = child_kernel(&dir);
            barrier(&dir, &index);
            // Each process proposes the same action (its own action id, the same hash) and
            // retries: every proposal must report the one request.
            for _ in 0..5 {
                let action = refund("txn_asked", 90_000);
                let mut proposal = Proposal::new(&action, Ruling::new(Decision::Approve, "rule[1]"));
                proposal.effect = Some(&template);
                match kernel.propose(&proposal) {
                    Err(Error::ApprovalRequired { request_id, .. }) => say(&format!("asked {request_id}")),
                    Err(other) => panic!("unexpected refusal {other}"),
                    Ok(_) => panic!("an approve decision was permitted without an approval"),
                }
            }
        }
        "open_new" => {
            barrier(&dir, &index);
            let kernel = child_kernel(&dir);
            let action = refund(&format!("p{index}"), 1);
            kernel.propose(&allow(&action, &template)).unwrap().commit(&serde_json::json!(1)).unwrap();
            say("opened");
        }
        "crash_after_reserve" => {
            let kernel = child_kernel(&dir);
            let permit = kernel.propose(&allow(&refund("txn_crash", 5), &template)).unwrap();
            say(&format!("permit {}", permit.effect_key().unwrap()));
            std::mem::forget(permit);
            loop {
                std::thread::park();
            }
        }
        "crash_stream" => {
            let kernel = child_kernel(&dir);
            for n in 0.. {
                let permit = kernel.propose(&allow(&refund(&format!("s{n}"), 1), &template)).unwrap();
                say(&format!("permit {n}"));
                permit.commit(&serde_json::json!(n)).unwrap();
                say(&format!("commit {n}"));
            }
        }
        other => panic!("unknown child role {other}"),
    }
}

#[test]
fn one_winner_among_eight_processes() {
    let f = Fixture::new();
    let outcomes = race("race_reserve", f.dir.path(), &[]);
    assert!(outcomes.iter().all(|(ok, _)| *ok), "a child failed: {outcomes:?}");
    let won = outcomes.iter().filter(|(_, lines)| lines == &["won"]).count();
    let lost = outcomes.iter().filter(|(_, lines)| lines == &["lost"]).count();
    assert_eq!((won, lost), (1, PROCESSES - 1));
    assert!(f.dir.path().join("remote_call").exists());
    assert_eq!(f.kernel.effect("refund:txn_race").unwrap().unwrap().state, EffectState::Committed);
    assert!(f.kernel.verify_chain().unwrap().ok);
}

#[test]
fn eight_processes_racing_for_the_last_use_of_a_scoped_grant_spend_it_once() {
    let f = Fixture::new();
    let warden = scoped_warden(f.dir.path(), T0);
    let request_id = match warden.submit(&scoped_refund("pay_first")) {
        Err(Error::ApprovalRequired { request_id, .. }) => request_id,
        other => panic!("expected an approval request, got {other:?}"),
    };
    let scope = warden::approval::scope::Scope {
        uses: 2,
        minutes: 30,
        fixed: vec!["/customer_id".into()],
        at_most: vec![("/amount".into(), "5000".into())],
    };
    let bob = warden::kernel::asserted("bob").unwrap();
    let grant = warden.kernel().answer_scoped(&request_id, &bob, &scope, None).unwrap().grant;
    // One of the two uses is spent here: the race is for the last one.
    let permit = warden.submit(&scoped_refund("pay_second")).unwrap();
    assert_eq!(permit.scoped_grant_id(), Some(grant.grant_id.as_str()));
    permit.commit(&serde_json::json!(null)).unwrap();
    drop(warden);
    let outcomes = race("race_scoped", f.dir.path(), &[]);
    assert!(outcomes.iter().all(|(ok, _)| *ok), "a child failed: {outcomes:?}");
    let covered = outcomes.iter().filter(|(_, l)| l == &[format!("covered {}", grant.grant_id)]).count();
    let asked = outcomes.iter().filter(|(_, l)| l == &["asked"]).count();
    assert_eq!((covered, asked), (1, PROCESSES - 1), "{outcomes:?}");
    let stored = f.kernel.scoped_grant(&grant.grant_id).unwrap().unwrap();
    assert_eq!(stored.uses_left, 0);
    let spent = f
        .kernel
        .events(0, 10_000)
        .unwrap()
        .iter()
        .filter(|e| e.kind.as_str() == "SCOPED_GRANT_USED" && e.data.contains(&grant.grant_id))
        .count();
    assert_eq!(spent, 2);
    assert!(f.kernel.verify_chain().unwrap().ok);
}

#[test]
fn an_approval_is_consumed_once_among_eight_processes() {
    let f = Fixture::new();
    let request = f.kernel.request_approval(&refund("txn_approved", 90_000), None).unwrap();
    f.kernel.grant(&request.approval_id, "ops:bob").unwrap();
    let outcomes = race("race_consume", f.dir.path(), &[("WARDEN_CHILD_APPROVAL", request.approval_id.clone())]);
    assert!(outcomes.iter().all(|(ok, _)| *ok), "a child failed: {outcomes:?}");
    let consumed = outcomes.iter().filter(|(_, l)| l == &["consumed"]).count();
    assert_eq!(consumed, 1, "{outcomes:?}");
    assert_eq!(
        f.kernel.approval(&request.approval_id).unwrap().unwrap().status,
        warden::approval::ApprovalStatus::Consumed
    );
}

#[test]
fn eight_processes_retrying_one_action_make_one_pending_request() {
    let f = Fixture::new();
    let outcomes = race("race_request", f.dir.path(), &[]);
    assert!(outcomes.iter().all(|(ok, _)| *ok), "a child failed: {outcomes:?}");
    let ids: std::collections::BTreeSet<&str> =
        outcomes.iter().flat_map(|(_, lines)| lines.iter().filter_map(|l| l.strip_prefix("asked "))).collect();
    let reported = outcomes.iter().map(|(_, lines)| lines.len()).sum::<usize>();
    assert_eq!(reported, PROCESSES * 5, "{outcomes:?}");
    assert_eq!(ids.len(), 1, "every proposal reports the same request: {ids:?}");
    let pending = f.kernel.pending_approvals().unwrap();
    assert_eq!(pending.len(), 1, "{pending:?}");
    assert!(ids.contains(pending[0].approval_id.as_str()));
}

#[test]
fn grant_or_deny_is_answered_once_among_eight_processes() {
    let f = Fixture::new();
    let request = f.kernel.request_approval(&refund("txn_1", 90_000), None).unwrap();
    let outcomes = race("race_answer", f.dir.path(), &[("WARDEN_CHILD_APPROVAL", request.approval_id.clone())]);
    assert!(outcomes.iter().all(|(ok, _)| *ok), "a child failed: {outcomes:?}");
    let answered: Vec<_> = outcomes.iter().filter(|(_, l)| l.iter().any(|x| x.starts_with("answered"))).collect();
    assert_eq!(answered.len(), 1, "{outcomes:?}");
    let status = f.kernel.approval(&request.approval_id).unwrap().unwrap().status;
    assert_eq!(answered[0].1[0], format!("answered {}", status.as_str()));
}

#[test]
fn m_of_n_grants_and_denies_from_eight_processes_reach_one_outcome_and_lose_no_vote() {
    let f = Fixture::new();
    let action = refund("txn_votes", 900_000);
    let mut ask = Proposal::new(&action, Ruling::new(Decision::Approve, "rule[2]"));
    ask.ask.requirement = warden::approval::Requirement::new(3, &[]).unwrap();
    let id = match f.kernel.propose(&ask) {
        Err(Error::ApprovalRequired { request_id, .. }) => request_id,
        other => panic!("expected a request, got {other:?}"),
    };
    let outcomes = race("race_votes", f.dir.path(), &[("WARDEN_CHILD_APPROVAL", id.clone())]);
    assert!(outcomes.iter().all(|(ok, lines)| *ok && lines.len() == 1), "a child failed: {outcomes:?}");
    let said: Vec<&str> = outcomes.iter().map(|(_, lines)| lines[0].as_str()).collect();
    let record = f.kernel.approval(&id).unwrap().unwrap();
    let status = record.status;
    assert!(matches!(status, warden::approval::ApprovalStatus::Granted | warden::approval::ApprovalStatus::Denied));
    // Every vote a process was told was recorded is in the row, and no other.
    let recorded = said.iter().filter(|s| s.starts_with("voted")).count();
    assert_eq!(record.votes.len(), recorded, "{said:?} vs {:?}", record.votes);
    // Exactly one vote decided; every later one was refused because it was decided.
    let deciding = said.iter().filter(|s| s.ends_with(status.as_str()) && s.starts_with("voted")).count();
    assert_eq!(deciding, 1, "{said:?}");
    let refused = said.iter().filter(|s| s.starts_with("refused")).count();
    assert!(
        said.iter().filter(|s| s.starts_with("refused")).all(|s| *s == format!("refused {}", status.as_str())),
        "{said:?}"
    );
    assert_eq!(recorded + refused, PROCESSES);
    // The row tells the same story: the last vote decided, the ones before it did not.
    let last = record.votes.last().unwrap();
    let grants_before = record.votes[..record.votes.len() - 1].iter().filter(|v| v.grant).count();
    match status {
        warden::approval::ApprovalStatus::Granted => {
            assert!(
                last.grant && record.votes.iter().all(|v| v.grant) && record.votes.len() == 3,
                "{:?}",
                record.votes
            );
        }
        _ => {
            assert!(!last.grant && grants_before < 3 && record.votes[..record.votes.len() - 1].iter().all(|v| v.grant));
        }
    }
    let events = f.kernel.events(0, 1000).unwrap();
    let voted = events.iter().filter(|e| e.kind == warden::event::EventKind::APPROVAL_VOTED).count();
    let decided = events
        .iter()
        .filter(|e| {
            matches!(e.kind, warden::event::EventKind::APPROVAL_GRANTED | warden::event::EventKind::APPROVAL_DENIED)
        })
        .count();
    assert_eq!((voted + decided, decided), (recorded, 1));
}

#[test]
fn eight_processes_opening_a_brand_new_store_agree_on_one_schema() {
    let dir = tempfile::tempdir().unwrap();
    let location = store_location(dir.path());
    let outcomes = race("open_new", dir.path(), &[]);
    assert!(outcomes.iter().all(|(ok, lines)| *ok && lines == &["opened"]), "{outcomes:?}");
    let kernel = open(&location, &ManualClock::new(T0));
    assert_eq!(kernel.effects(None, 100).unwrap().len(), PROCESSES);
    let report = kernel.verify_chain().unwrap();
    assert!(report.ok && report.chained == PROCESSES as u64, "{report:?}");
}

fn read_lines_until(child: &mut Child, mut stop: impl FnMut(&str) -> bool) -> Vec<String> {
    let stdout = child.stdout.take().unwrap();
    let mut seen = Vec::new();
    for line in BufReader::new(stdout).lines() {
        let Ok(line) = line else { break };
        if let Some(said) = line.strip_prefix("CHILD:") {
            seen.push(said.to_owned());
            if stop(said) {
                break;
            }
        }
    }
    seen
}

fn sigkill(child: &mut Child) {
    child.kill().expect("SIGKILL the child"); // std's kill is SIGKILL on Unix
    let _ = child.wait();
}

#[test]
fn a_reservation_survives_sigkill_and_is_in_progress_until_its_lease_lapses() {
    let dir = tempfile::tempdir().unwrap();
    let location = store_location(dir.path());
    let mut child = spawn_child("crash_after_reserve", dir.path(), 0, &[]);
    let said = read_lines_until(&mut child, |l| l.starts_with("permit"));
    assert_eq!(said, ["permit refund:txn_crash"]);
    sigkill(&mut child);

    let clock = ManualClock::new(T0);
    let kernel = open(&location, &clock);
    let t = key_template();
    let refused = kernel.propose(&allow(&refund("txn_crash", 5), &t)).unwrap_err();
    assert!(matches!(refused, Error::Duplicate { state: warden::DuplicateState::InProgress, .. }), "{refused}");
    clock.advance(5 * 60 * SECOND + 1);
    let refused = kernel.propose(&allow(&refund("txn_crash", 5), &t)).unwrap_err();
    assert!(matches!(refused, Error::Ambiguous { .. }), "{refused}");
    assert_eq!(kernel.effect("refund:txn_crash").unwrap().unwrap().state, EffectState::Ambiguous);
    assert!(kernel.verify_chain().unwrap().ok);
}

#[test]
fn sigkill_mid_stream_loses_no_reported_permit_and_the_chain_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let location = store_location(dir.path());
    let mut child = spawn_child("crash_stream", dir.path(), 0, &[]);
    let stdout = child.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let mut said = Vec::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        let done = line == "CHILD:permit 60";
        said.push(line);
        if done {
            break;
        }
    }
    sigkill(&mut child);
    // What the child flushed before it died is still in the pipe: all of it counts as reported.
    said.extend(lines.map_while(Result::ok));
    let said: Vec<String> = said.iter().filter_map(|l| l.strip_prefix("CHILD:").map(str::to_owned)).collect();
    let permits: Vec<usize> =
        said.iter().filter_map(|l| l.strip_prefix("permit ")).map(|n| n.parse().unwrap()).collect();
    let commits: Vec<usize> =
        said.iter().filter_map(|l| l.strip_prefix("commit ")).map(|n| n.parse().unwrap()).collect();

    let kernel = open(&location, &ManualClock::new(T0));
    for n in &permits {
        let record = kernel.effect(&format!("refund:s{n}")).unwrap();
        assert!(record.is_some(), "reported permit {n} was lost");
    }
    for n in &commits {
        assert_eq!(
            kernel.effect(&format!("refund:s{n}")).unwrap().unwrap().state,
            EffectState::Committed,
            "reported commit {n}"
        );
    }
    let stored = kernel.effects(None, 10_000).unwrap().len();
    assert!(
        stored == permits.len() || stored == permits.len() + 1,
        "{stored} records for {} reported permits",
        permits.len()
    );
    let report = kernel.verify_chain().unwrap();
    assert!(report.ok, "{report:?}");
}
