//! What one authority evaluation costs, and that it does not grow with the delegations stored:
//! a depth-3 chain evaluated among 10 and among 100,000 other delegations (in-memory source with
//! the store's index shape), plus a root-grant-only evaluation for scale.
//!
//! Against the real store: one evaluation's read operation and evaluation (`Warden::
//! evaluate_authority`) among 10 and 100,000 stored delegations (bulk loaded), and the budget
//! check a reservation makes (the running window sum) with 10 and 100,000 charges in the window.
//!
//! `cargo bench --features test-exports --bench authority`

use std::hint::black_box;
use warden::test_support::KernelInternals;

use criterion::{criterion_group, criterion_main, Criterion};
use serde_json::json;
use std::sync::Arc;
use warden::authority::record::DelegationRecord;
use warden::authority::source::index_keys;

use warden::authority::{
    evaluate, grant_to_json, parse_instant, plan_delegation, Authority, Call, Charge, CreatedVia, MemorySource,
    Proposal,
};
use warden::document::{load_grant_str, load_str};
use warden::pipeline::{ActionRequest, Warden, WardenOptions};
use warden::ManualClock;
use warden::{Action, Principal};

const SECTION: &str = r#"
schema: warden/v1
authority:
  grants:
    - id: human
      subject: { agent: "finance-*" }
      actions: ["stripe.refund"]
      constraints: { amount_lte: 10000000 }
      expires_at: "2026-12-01T00:00:00Z"
      delegable: true
"#;

fn link(agent: &str) -> String {
    format!(
        "{{subject: {{agent: {agent}}}, actions: [\"stripe.refund\"], constraints: {{amount_lte: 10000000}}, expires_at: \"2026-11-30T00:00:00Z\", delegable: true}}"
    )
}

fn source_with(authority: &Authority, crowd: usize) -> MemorySource {
    let mut source = MemorySource::new();
    let template = load_grant_str(&link("someone"), "g").expect("grant");
    for i in 0..crowd {
        let mut grant = template.clone();
        grant.subject.agent = Some(format!("agent-{i}"));
        let record = DelegationRecord {
            delegation_id: format!("dlg_{i:032x}"),
            parent_id: "human".into(),
            depth: 1,
            grant_json: grant_to_json(&grant),
            created_by: Principal::new("finance-1", None).expect("principal"),
            created_via: "api".into(),
            created_at: 0,
        };
        source.insert(record, &index_keys(&grant)).expect("insert");
    }
    let now = parse_instant("2026-11-01T00:00:00Z").expect("instant");
    let mut parent = "human".to_owned();
    for (n, (from, to)) in
        [("finance-1", "finance-2"), ("finance-2", "finance-3"), ("finance-3", "support-1")].iter().enumerate()
    {
        let child = load_grant_str(&link(to), "g").expect("grant");
        let id = format!("dlg_{:032x}", u128::MAX - n as u128);
        let by = Principal::new(from, None).expect("principal");
        let proposal = Proposal {
            parent_id: &parent,
            grant: &child,
            by: &by,
            by_expires_at: None,
            via: CreatedVia::Api,
            now,
            new_id: &id,
        };
        let planned = plan_delegation(authority, &proposal, &source).expect("contained");
        source.insert(planned.record, &planned.index_keys).expect("insert");
        parent = id;
    }
    source
}

fn authority_bench(c: &mut Criterion) {
    let authority = load_str(SECTION, "bench.yaml").expect("document").authority_config.expect("authority");
    let now = parse_instant("2026-11-01T00:00:00Z").expect("instant");
    let root_only = Action::new(
        "stripe.refund",
        json!({"amount": 100}),
        Principal::new("finance-1", None).expect("principal"),
        None,
        "production",
    )
    .expect("action");
    let delegated = Action::new(
        "stripe.refund",
        json!({"amount": 100}),
        Principal::new("support-1", None).expect("principal"),
        None,
        "production",
    )
    .expect("action");
    let mut group = c.benchmark_group("authority");
    let empty = MemorySource::new();
    group.bench_function("root grant", |b| {
        b.iter(|| black_box(evaluate(&authority, &Call::new(&root_only, now), &empty).expect("evaluation")));
    });
    for crowd in [10, 100_000] {
        let source = source_with(&authority, crowd);
        group.bench_function(format!("depth-3 chain among {crowd} delegations"), |b| {
            b.iter(|| {
                let result = evaluate(&authority, &Call::new(&delegated, now), &source).expect("evaluation");
                assert!(result.passed);
                black_box(result)
            });
        });
    }
    group.finish();
}

const STORE_DOCUMENT: &str = r#"
schema: warden/v1
environment: production
actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    rules:
      - decision: allow
authority:
  grants:
    - id: human
      subject: { agent: "finance-*" }
      actions: ["stripe.refund"]
      constraints: { amount_lte: 10000000 }
      expires_at: "2026-12-01T00:00:00Z"
      delegable: true
"#;

fn crowd_rows(crowd: usize) -> Vec<warden::authority::NewDelegation> {
    let template = load_grant_str(&link("someone"), "g").expect("grant");
    (0..crowd)
        .map(|i| {
            let mut grant = template.clone();
            grant.subject.agent = Some(format!("agent-{i}"));
            grant.id = format!("dlg_{i:032x}");
            warden::authority::NewDelegation {
                index_keys: index_keys(&grant),
                record: DelegationRecord {
                    delegation_id: grant.id.clone(),
                    parent_id: "human".into(),
                    depth: 1,
                    grant_json: grant_to_json(&grant),
                    created_by: Principal::new("finance-1", None).expect("principal"),
                    created_via: "api".into(),
                    created_at: 0,
                },
            }
        })
        .collect()
}

fn store_bench(c: &mut Criterion) {
    let now = parse_instant("2026-11-01T00:00:00Z").expect("instant");
    let mut group = c.benchmark_group("authority in the store");
    for crowd in [10, 100_000] {
        let dir = tempfile::tempdir().expect("tempdir");
        let warden = Warden::open(
            dir.path().join("state.redb"),
            load_str(STORE_DOCUMENT, "bench.yaml").expect("document"),
            WardenOptions { clock: Arc::new(ManualClock::new(now)), ..WardenOptions::default() },
        )
        .expect("open");
        let rows = crowd_rows(crowd);
        warden.kernel().store().tamper(|t| t.put_delegations(&rows)).expect("bulk load");
        let mut parent = "human".to_owned();
        for (from, to) in [("finance-1", "finance-2"), ("finance-2", "finance-3"), ("finance-3", "support-1")] {
            let by = Principal::new(from, None).expect("principal");
            parent = warden.delegate_text(&parent, &link(to), &by, None, CreatedVia::Api).expect("delegate");
        }
        let request = ActionRequest::new(
            "stripe.refund",
            json!({"payment_id": "p", "amount": 100}),
            Principal::new("support-1", None).expect("principal"),
        );
        group.bench_function(format!("evaluate a depth-3 chain among {crowd} stored delegations"), |b| {
            b.iter(|| {
                let evaluation = warden.evaluate_authority(&request).expect("evaluation");
                assert!(evaluation.result.passed);
                black_box(evaluation)
            });
        });
    }
    for charges in [10usize, 100_000] {
        let dir = tempfile::tempdir().expect("tempdir");
        let kernel =
            warden::Kernel::open(dir.path().join("state.redb"), warden::KernelOptions::default()).expect("open");
        let charge = Charge {
            grant_id: "support".into(),
            metric: "amount".into(),
            amount: 1,
            limit: u64::MAX,
            window_seconds: 86_400,
        };
        kernel
            .store()
            .tamper(|t| {
                for i in 0..charges {
                    t.put_budget_charges(std::slice::from_ref(&charge), &format!("refund:{i}"), 1, now)?;
                }
                Ok(())
            })
            .expect("bulk charges");
        kernel
            .store()
            .tamper(|t| {
                assert_eq!(t.budget_window_sum(&charge, now)?, charges as u128);
                group.bench_function(format!("budget check with {charges} charges in the window"), |b| {
                    b.iter(|| black_box(t.budget_window_sum(&charge, now).expect("sum")));
                });
                Ok(())
            })
            .expect("bench");
    }
    group.finish();
}

criterion_group!(benches, authority_bench, store_bench);
criterion_main!(benches);
