//! A real run of the effect kernel against a store file: one refund committed, its retry
//! refused, an approval required and granted, a lost reply left AMBIGUOUS and refused until a
//! human resolves it, and the receipt chain verified.
//!
//!     cargo run --release --example demo [STORE_PATH]

use std::sync::Arc;

use warden::{
    Action, Decision, EffectState, Error, Kernel, KernelOptions, Principal, Proposal, Ruling, SystemClock, Template,
    TemplateMode,
};

fn refund(payment: &str, amount: i64) -> Result<Action, Box<dyn std::error::Error>> {
    Ok(Action::new(
        "stripe.refund",
        serde_json::json!({"payment_id": payment, "amount": amount}),
        Principal::new("refund-agent", Some("ada"))?,
        None,
        "production",
    )?)
}

fn say(step: &str, outcome: impl std::fmt::Display) {
    println!("{step:<48} {outcome}");
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile_dir()?;
    let path = std::env::args().nth(1).map(std::path::PathBuf::from).unwrap_or_else(|| dir.join("demo.redb"));
    let kernel = Kernel::open(
        &path,
        KernelOptions {
            clock: Arc::new(SystemClock),
            policy_hash: None,
            policy_version: Some("demo".into()),
            environment: None,
        },
    )?;
    println!("store: {}\n", path.display());
    let key = Template::parse("refund:{payment_id}", TemplateMode::Escaped)?;

    // 1. An allowed refund runs once.
    let action = refund("txn_1001", 4_200)?;
    let mut proposal = Proposal::new(&action, Ruling::new(Decision::Allow, "rule[0]"));
    proposal.effect = Some(&key);
    let permit = kernel.propose(&proposal)?;
    say(
        "propose refund txn_1001 (allow)",
        format!(
            "permit {} attempt {} token {}",
            permit.effect_key().unwrap_or("-"),
            permit.attempt(),
            permit.idempotency_token().unwrap_or("-")
        ),
    );
    permit.commit(&serde_json::json!({"refund_id": "re_3PQ"}))?;
    say("  executor succeeded", "COMMITTED");

    // 2. The agent retries the same refund.
    let retry = refund("txn_1001", 4_200)?;
    let mut proposal = Proposal::new(&retry, Ruling::new(Decision::Allow, "rule[0]"));
    proposal.effect = Some(&key);
    say("retry refund txn_1001", refusal(kernel.propose(&proposal).map(drop)));

    // 3. A large refund needs a human.
    let big = refund("txn_2002", 250_000)?;
    let mut proposal = Proposal::new(&big, Ruling::new(Decision::Approve, "rule[1]"));
    proposal.effect = Some(&key);
    let request_id = match kernel.propose(&proposal) {
        Err(Error::ApprovalRequired { request_id, .. }) => request_id,
        other => return Err(format!("expected approval required, got {:?}", other.map(drop)).into()),
    };
    say("propose refund txn_2002 (approve)", format!("approval required: {request_id}"));
    say("  the agent approves its own request", refusal(kernel.grant(&request_id, "ada").map(drop)));
    kernel.grant(&request_id, "ops:bob")?;
    say("  ops:bob grants it", "granted");
    let tampered = refund("txn_2002", 2_500_000)?;
    let mut mutated = Proposal::new(&tampered, Ruling::new(Decision::Approve, "rule[1]"));
    mutated.effect = Some(&key);
    mutated.approval_id = Some(&request_id);
    say("  present it for a different amount", refusal(kernel.propose(&mutated).map(drop)));
    proposal.approval_id = Some(&request_id);
    let permit = kernel.propose(&proposal)?;
    say("  present it for the approved action", format!("permit {}", permit.effect_key().unwrap_or("-")));
    // 4. The reply is lost: the outcome is unknown.
    permit.ambiguous("connection reset after the request was sent")?;
    say("  the reply is lost", "AMBIGUOUS");
    let again = refund("txn_2002", 250_000)?;
    let mut blind = Proposal::new(&again, Ruling::new(Decision::Allow, "rule[0]"));
    blind.effect = Some(&key);
    say("blind retry of txn_2002", refusal(kernel.propose(&blind).map(drop)));
    let resolved = kernel.resolve("refund:txn_2002", EffectState::Committed, "ops:bob")?;
    say(
        "ops:bob resolves it (checked the provider)",
        format!("{} (resolved_by {})", resolved.state, resolved.resolved_by.unwrap_or_default()),
    );

    println!("\nreceipts:");
    for (seq, row) in kernel.receipts(1, 100)? {
        let doc = warden::canonical::parse_json(&row.document)?;
        println!(
            "  #{seq} {:<10} {:<14} {:<18} {}",
            doc["result"].as_str().unwrap_or(""),
            doc["action"].as_str().unwrap_or(""),
            doc["effect_key"].as_str().unwrap_or("-"),
            doc["decision_reason"].as_str().unwrap_or("")
        );
    }
    let report = kernel.verify_chain()?;
    println!("\nchain: ok={} verified={} head seq={}", report.ok, report.verified, report.head_seq.unwrap_or(0));
    Ok(())
}

fn refusal(outcome: Result<(), Error>) -> String {
    match outcome {
        Ok(()) => "allowed (unexpected)".into(),
        Err(error) => format!("refused: {}", error.reason()),
    }
}

fn tempfile_dir() -> Result<std::path::PathBuf, Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("warden-demo-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}
