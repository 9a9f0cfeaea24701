//! Criterion benches: the pure hot path (canonical form, action hash) and one durable
//! reserve→commit cycle on a real store file.

use std::hint::black_box;
use warden::test_support::KernelInternals;

use criterion::{criterion_group, criterion_main, Criterion};
use warden::{Action, Decision, Kernel, KernelOptions, Principal, Proposal, Ruling, Template, TemplateMode};

fn refund(n: u64) -> Action {
    Action::new(
        "stripe.refund",
        serde_json::json!({"payment_id": format!("txn_{n}"), "amount": 4200, "meta": {"reason": "duplicate", "tags": ["a", "b"]}}),
        Principal::new("refund-agent", Some("ada")).unwrap(),
        None,
        "production",
    )
    .unwrap()
}

fn pure(c: &mut Criterion) {
    let action = refund(1);
    c.bench_function("action_hash", |b| b.iter(|| black_box(&action).hash().unwrap()));
    let template = Template::parse("refund:{payment_id}", TemplateMode::Escaped).unwrap();
    c.bench_function("effect_key_escaped", |b| b.iter(|| template.render_effect_key(&action.arguments, None).unwrap()));
}

fn cycle(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let kernel = Kernel::open(dir.path().join("bench.redb"), KernelOptions::default()).unwrap();
    let template = Template::parse("refund:{payment_id}", TemplateMode::Escaped).unwrap();
    let mut n = 0u64;
    c.bench_function("reserve_commit_cycle_durable", |b| {
        b.iter(|| {
            n += 1;
            let action = refund(n);
            let mut proposal = Proposal::new(&action, Ruling::new(Decision::Allow, "decision"));
            proposal.effect = Some(&template);
            kernel.propose(&proposal).unwrap().commit(&serde_json::json!({"ok": true})).unwrap();
        });
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = pure, cycle
}
criterion_main!(benches);
