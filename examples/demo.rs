//! A real run of Warden under the starter policy (`warden init` writes the same document):
//! an allowed refund committed once and its retry refused, a large refund that needs a human,
//! a tampered approval refused, a lost reply left AMBIGUOUS and refused until resolved, a
//! denied refund, an unknown action, and the receipt chain verified.
//!
//!     cargo run --release --example demo [STORE_PATH]

use warden::document::load_str;
use warden::pipeline::{ActionRequest, Warden, WardenOptions};
use warden::{EffectState, Error, Principal};

const POLICY: &str = include_str!("../src/bin/warden/starter.yaml");

fn agent() -> Result<Principal, Box<dyn std::error::Error>> {
    Ok(Principal::new("refund-agent", Some("ada"))?)
}

fn refund(payment: &str, amount: i64) -> Result<ActionRequest<'static>, Box<dyn std::error::Error>> {
    Ok(ActionRequest::new("stripe.refund", serde_json::json!({"payment_id": payment, "amount": amount}), agent()?))
}

fn say(step: &str, outcome: impl std::fmt::Display) {
    println!("{step:<50} {outcome}");
}

/// What a step that must be refused printed; a permit that slipped through is reported and
/// released as not executed (the demo never runs an effect it did not mean to).
fn refused<T: Into<Outcome>>(outcome: Result<T, Error>) -> String {
    match outcome.map(Into::into) {
        Ok(Outcome::Permit(permit)) => {
            let _ = permit.not_executed("demo: should have been refused");
            "allowed (unexpected)".into()
        }
        Ok(Outcome::Other) => "allowed (unexpected)".into(),
        Err(error) => format!("refused: {}", error.reason()),
    }
}

enum Outcome {
    Permit(Box<warden::Permit>),
    Other,
}

impl From<warden::Permit> for Outcome {
    fn from(permit: warden::Permit) -> Outcome {
        Outcome::Permit(Box::new(permit))
    }
}

impl From<warden::approval::ApprovalRecord> for Outcome {
    fn from(_: warden::approval::ApprovalRecord) -> Outcome {
        Outcome::Other
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("warden-demo-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let path = std::env::args().nth(1).map(std::path::PathBuf::from).unwrap_or_else(|| dir.join("demo.redb"));
    let document = load_str(POLICY, "starter warden.yaml")?;
    println!("policy {} ({} actions), store {}\n", document.policy_hash, document.actions.len(), path.display());
    let warden = Warden::open(&path, document, WardenOptions::default())?;

    // 1. Allowed by rule[0]: runs once.
    let permit = warden.submit(&refund("pay_1001", 4_200)?)?;
    say(
        "refund pay_1001, 4200 (rule[0]: allow)",
        format!("permit {} token {}", permit.effect_key().unwrap_or("-"), permit.idempotency_token().unwrap_or("-")),
    );
    permit.commit(&serde_json::json!({"refund_id": "re_3PQ"}))?;
    say("  the executor succeeded", "COMMITTED");
    say("the agent retries pay_1001", refused(warden.submit(&refund("pay_1001", 4_200)?)));

    // 2. rule[1]: a human must approve.
    let request_id = match warden.submit(&refund("pay_2002", 250_000)?) {
        Err(Error::ApprovalRequired { request_id, .. }) => request_id,
        other => return Err(format!("expected approval required, got {:?}", other.map(|_| ())).into()),
    };
    say("refund pay_2002, 250000 (rule[1]: approve)", format!("approval required: {request_id}"));
    say("  the agent approves its own request", refused(warden.kernel().grant(&request_id, "ada")));
    warden.kernel().grant(&request_id, "ops:bob")?;
    say("  ops:bob grants it", "granted");
    let mut tampered = refund("pay_2002", 490_000)?;
    tampered.approval_id = Some(&request_id);
    say("  presented for a different amount", refused(warden.submit(&tampered)));
    let mut approved = refund("pay_2002", 250_000)?;
    approved.approval_id = Some(&request_id);
    let permit = warden.submit(&approved)?;
    say("  presented for the approved refund", format!("permit {}", permit.effect_key().unwrap_or("-")));
    // 3. The reply is lost: the outcome is unknown.
    permit.ambiguous("connection reset after the request was sent")?;
    say("  the reply is lost", "AMBIGUOUS");
    say("a blind retry of pay_2002", refused(warden.submit(&refund("pay_2002", 250_000)?)));
    say("  (no human was asked to approve it)", format!("{} pending", warden.kernel().pending_approvals()?.len()));
    let resolved = warden.kernel().resolve("refund:pay_2002", EffectState::Committed, "ops:bob")?;
    say(
        "ops:bob checks the provider and resolves it",
        format!("{} (resolved_by {})", resolved.state, resolved.resolved_by.unwrap_or_default()),
    );

    // 4. rule[2] and an action nobody listed.
    say("refund pay_3003, 9000000 (rule[2]: deny)", refused(warden.submit(&refund("pay_3003", 9_000_000)?)));
    let drop = ActionRequest::new("db.drop_table", serde_json::json!({"table": "customers"}), agent()?);
    say("db.drop_table (not in the policy)", refused(warden.submit(&drop)));

    println!("\nreceipts:");
    for (seq, row) in warden.kernel().receipts(1, 100)? {
        let doc = warden::canonical::parse_json(&row.document)?;
        println!(
            "  #{seq} {:<10} {:<14} {:<17} {}",
            doc["result"].as_str().unwrap_or(""),
            doc["action"].as_str().unwrap_or(""),
            doc["effect_key"].as_str().unwrap_or("-"),
            doc["decision_reason"].as_str().unwrap_or("")
        );
    }
    let report = warden.kernel().verify_chain()?;
    println!("\nchain: ok={} verified={} head seq={}", report.ok, report.verified, report.head_seq.unwrap_or(0));
    Ok(())
}
