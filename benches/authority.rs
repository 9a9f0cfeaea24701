//! What one authority evaluation costs, and that it does not grow with the delegations stored:
//! a depth-3 chain evaluated among 10 and among 100,000 other delegations (in-memory source with
//! the store's index shape), plus a root-grant-only evaluation for scale.
//!
//! `cargo bench --bench authority`

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use serde_json::json;
use warden::authority::record::DelegationRecord;
use warden::authority::source::index_keys;
use warden::authority::{
    evaluate, grant_to_json, parse_instant, plan_delegation, Authority, Call, CreatedVia, MemorySource, Proposal,
};
use warden::document::{load_grant_str, load_str};
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
        b.iter(|| black_box(evaluate(&authority, &Call::new(&root_only, now), &empty).expect("evaluation")))
    });
    for crowd in [10, 100_000] {
        let source = source_with(&authority, crowd);
        group.bench_function(format!("depth-3 chain among {crowd} delegations"), |b| {
            b.iter(|| {
                let result = evaluate(&authority, &Call::new(&delegated, now), &source).expect("evaluation");
                assert!(result.passed);
                black_box(result)
            })
        });
    }
    group.finish();
}

criterion_group!(benches, authority_bench);
criterion_main!(benches);
