//! What the gateway's check before dispatch costs per `tools/call`: the arguments validated
//! against the tool's pinned `inputSchema` (compiled once per `tools/list`), for a realistic
//! tool (a refund: strings with patterns, an enum, bounded integers, a nested object, an array
//! of objects) and for a small one; and what compiling a 50-tool list costs. Besides
//! criterion's estimates, `check_p99` times 100,000 single checks one by one and prints the
//! median, p99 and p99.9 (the target is p99 ≤ 50 µs per call).
//!
//! `cargo bench --bench gateway`

#[path = "../src/bin/warden/gateway/toolset.rs"]
#[allow(dead_code, unused_imports)]
mod toolset;

use std::hint::black_box;
use std::time::Instant;

use criterion::{criterion_group, criterion_main, Criterion};
use serde_json::{json, Value};

fn refund_tool() -> Value {
    json!({
        "name": "create_refund",
        "description": "Refund all or part of a captured payment.",
        "inputSchema": {
            "type": "object",
            "required": ["payment_id", "amount", "currency", "reason"],
            "additionalProperties": false,
            "properties": {
                "payment_id": {"type": "string", "pattern": "^pay_[A-Za-z0-9]{8,32}$"},
                "amount": {"type": "integer", "minimum": 1, "maximum": 100000000},
                "currency": {"type": "string", "enum": ["eur", "usd", "gbp", "chf", "jpy"]},
                "reason": {"type": "string", "enum": ["duplicate", "fraudulent", "requested_by_customer"]},
                "note": {"type": "string", "maxLength": 500},
                "metadata": {"type": "object", "maxProperties": 20, "additionalProperties": {"type": "string", "maxLength": 200}},
                "lines": {
                    "type": "array", "maxItems": 50,
                    "items": {"type": "object", "required": ["sku", "quantity"], "additionalProperties": false,
                              "properties": {"sku": {"type": "string", "minLength": 1}, "quantity": {"type": "integer", "minimum": 1}}}
                },
                "notify": {"type": "boolean"}
            }
        }
    })
}

fn refund_arguments() -> Value {
    json!({
        "payment_id": "pay_3MtwBwLkdIwHu7ix",
        "amount": 4200,
        "currency": "eur",
        "reason": "requested_by_customer",
        "note": "Customer returned two of three items.",
        "metadata": {"ticket": "SUP-1234", "agent": "ada"},
        "lines": [{"sku": "sku_1", "quantity": 1}, {"sku": "sku_2", "quantity": 1}],
        "notify": true
    })
}

fn tools() -> Vec<Value> {
    let mut tools = vec![
        refund_tool(),
        json!({"name": "lookup", "inputSchema": {"type": "object", "required": ["id"], "properties": {"id": {"type": "string"}}}}),
    ];
    for i in 0..48 {
        let mut tool = refund_tool();
        tool["name"] = json!(format!("tool_{i}"));
        tools.push(tool);
    }
    tools
}

fn check(c: &mut Criterion) {
    let listed = tools();
    let set = toolset::ToolSet::from_entries(&listed).expect("a tool set");
    let validators = toolset::compile(&set);
    let valid = refund_arguments();
    let mut invalid = refund_arguments();
    invalid["amount"] = json!(0);
    let small = json!({"id": "ord_1"});
    assert_eq!(validators.check("create_refund", &valid), Some(Ok(())));
    assert!(matches!(validators.check("create_refund", &invalid), Some(Err(_))));

    let mut group = c.benchmark_group("gateway_check");
    group
        .bench_function("refund_valid", |b| b.iter(|| black_box(validators.check("create_refund", black_box(&valid)))));
    group.bench_function("refund_rejected", |b| {
        b.iter(|| black_box(validators.check("create_refund", black_box(&invalid))));
    });
    group.bench_function("lookup_valid", |b| b.iter(|| black_box(validators.check("lookup", black_box(&small)))));
    group.bench_function("compile_50_tools", |b| {
        b.iter(|| black_box(toolset::compile(black_box(&set))));
    });
    group.finish();

    for (label, arguments) in [("refund_valid", &valid), ("refund_rejected", &invalid)] {
        let mut samples: Vec<u128> = Vec::with_capacity(100_000);
        for _ in 0..100_000 {
            let started = Instant::now();
            black_box(validators.check("create_refund", black_box(arguments)));
            samples.push(started.elapsed().as_nanos());
        }
        samples.sort_unstable();
        let at = |q: f64| samples[((samples.len() as f64 * q) as usize).min(samples.len() - 1)] as f64 / 1000.0;
        println!(
            "check_p99/{label}: median {:.2} µs, p99 {:.2} µs, p99.9 {:.2} µs (100000 checks)",
            at(0.5),
            at(0.99),
            at(0.999)
        );
    }
}

criterion_group!(benches, check);
criterion_main!(benches);
