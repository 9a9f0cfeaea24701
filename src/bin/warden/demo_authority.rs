//! The demo's authority chapters: a human's €100,000 delegable grant, delegated €25,000 to a
//! finance agent and €2,000 on to a support agent; a €50,000 refund refused, a €50,000
//! delegation under €25,000 refused; then the support agent's budget of €5,000 an hour, whose
//! third €2,000 refund is refused while the first two are still executing. Same store as the
//! rest of the demo, under a second document that adds the `authority:` section.

use std::path::Path;

use serde_json::json;
use warden::authority::CreatedVia;
use warden::pipeline::{ActionRequest, Warden, WardenOptions};
use warden::{Clock, Error, Principal, SystemClock};

use crate::exit::Failure;

const DAY: i64 = 86_400_000_000;

fn document(now: i64) -> String {
    format!(
        r#"schema: warden/v1
environment: production
actions:
  stripe.refund:
    effect: "refund:{{payment_id}}"
    rules:
      - decision: allow
authority:
  grants:
    - id: head-of-finance
      subject: {{ agent: finance-console, user: alice }}
      actions: [stripe.refund]
      constraints: {{ amount_lte: 100000 }}
      expires_at: "{}"
      delegable: true
"#,
        warden::clock::render(now + 30 * DAY)
    )
}

fn who(agent: &str) -> Result<Principal, Failure> {
    Principal::new(agent, Some("alice")).map_err(|e| Failure::internal(e.to_string()))
}

fn link(agent: &str, euros: i64, expires_at: i64, extra: &str) -> String {
    format!(
        "{{subject: {{agent: {agent}, user: alice}}, actions: [stripe.refund], constraints: {{amount_lte: {euros}}}, \
         expires_at: \"{}\"{extra}}}",
        warden::clock::render(expires_at)
    )
}

fn refund(agent: &str, payment: &str, euros: i64) -> Result<ActionRequest<'static>, Failure> {
    Ok(ActionRequest::new("stripe.refund", json!({"payment_id": payment, "amount": euros}), who(agent)?))
}

fn outcome<T>(result: Result<T, Error>) -> String {
    match result {
        Ok(_) => "ALLOWED (the demo expected a refusal)".into(),
        Err(Error::DelegationRefused { reason, dimension, .. }) => {
            format!("refused: {reason}{}", dimension.map(|d| format!(" on {d}")).unwrap_or_default())
        }
        Err(error) => format!("refused: {}", error.reason()),
    }
}

fn say(lines: &mut Vec<String>, step: &str, outcome: impl std::fmt::Display) {
    lines.push(format!("  {step:<46} {outcome}"));
}

fn title(lines: &mut Vec<String>, text: &str) {
    lines.push(String::new());
    lines.push(text.to_owned());
}

/// Append chapters 5 to 7 to `lines`.
pub fn chapters(store: &Path, lines: &mut Vec<String>) -> Result<(), Failure> {
    let now = SystemClock.now();
    let document = warden::document::load_str(&document(now), "the demo's authority document")
        .map_err(|e| Failure::internal(e.to_string()))?;
    let warden = Warden::open(store, document, WardenOptions::default())?;
    let finance_agent = who("finance-agent")?;

    title(lines, "5. Delegation narrows authority and cannot widen it");
    let finance_grant = link("finance-agent", 25_000, now + 14 * DAY, ", delegable: true");
    let finance =
        warden.delegate_text("head-of-finance", &finance_grant, &who("finance-console")?, None, CreatedVia::Api)?;
    say(lines, "alice (€100,000, delegable) → finance-agent", "delegated €25,000, delegable");
    let budget = ", budgets: [{metric: amount, limit: 5000, window: PT1H}]";
    let support_grant = link("support-agent", 2_000, now + 7 * DAY, budget);
    warden.delegate_text(&finance, &support_grant, &finance_agent, None, CreatedVia::Api)?;
    say(lines, "finance-agent → support-agent", "delegated €2,000 a refund, €5,000 an hour");
    say(lines, "support-agent refunds €50,000", outcome(warden.submit(&refund("support-agent", "pay_5001", 50_000)?)));
    let wider = link("support-agent", 50_000, now + 7 * DAY, "");
    let escalation = warden.delegate_text(&finance, &wider, &finance_agent, None, CreatedVia::Api);
    say(lines, "finance-agent delegates €50,000 under €25,000", outcome(escalation));

    title(lines, "6. A budget counts refunds still executing");
    let first = warden.submit(&refund("support-agent", "pay_6001", 2_000)?)?;
    say(lines, "support-agent refunds €2,000 (pay_6001)", "executing: €2,000 of €5,000 charged");
    let second = warden.submit(&refund("support-agent", "pay_6002", 2_000)?)?;
    say(lines, "support-agent refunds €2,000 (pay_6002)", "executing: €4,000 of €5,000 charged");
    let third = warden.submit(&refund("support-agent", "pay_6003", 2_000)?);
    say(lines, "a third €2,000 inside the hour (pay_6003)", outcome(third));
    first.commit(&json!({"refund_id": "re_6001"}))?;
    second.not_executed("card declined before anything was sent")?;
    say(lines, "pay_6001 commits, pay_6002 FAILED", "pay_6002's €2,000 is released");
    let third = warden.submit(&refund("support-agent", "pay_6003", 2_000)?)?;
    third.commit(&json!({"refund_id": "re_6003"}))?;
    say(lines, "the third €2,000 again", "COMMITTED (€4,000 of €5,000)");

    title(lines, "7. Revoking one link cuts everything beneath it");
    warden.revoke(&finance, Some("ops:bob"))?;
    say(lines, "ops:bob revokes finance-agent's delegation", "revoked");
    say(lines, "support-agent refunds €100", outcome(warden.submit(&refund("support-agent", "pay_7001", 100)?)));
    Ok(())
}
