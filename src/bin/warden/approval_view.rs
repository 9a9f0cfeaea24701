//! What an approver sees: an approval request's action in one elided line (`pending`), in full
//! as canonical pretty-printed JSON (`inspect`, `approve`), with the rule that asked, who asked
//! (verified or asserted), the policy, the votes so far and the expiry.

use serde_json::Value;

use warden::approval::ApprovalRecord;
use warden::clock::render;

use crate::output::shown;

/// How many characters of one string, key or number the one-line form keeps.
pub const VALUE_CHARS: usize = 40;
/// How many characters the one-line form of the arguments keeps in all.
pub const LINE_CHARS: usize = 100;
/// The marker of an elided value or line.
pub const ELIDED: char = '…';

/// The arguments as one line of compact canonical JSON, each long string, key or number cut to
/// [`VALUE_CHARS`] and the line to [`LINE_CHARS`], every cut marked `…`; control and format
/// characters escaped. `inspect` shows the full form.
pub fn one_line(arguments: &Value) -> String {
    let mut out = String::new();
    write_elided(arguments, &mut out);
    let line = shown(&out);
    if line.chars().count() > LINE_CHARS {
        let mut cut: String = line.chars().take(LINE_CHARS - 1).collect();
        cut.push(ELIDED);
        cut
    } else {
        line
    }
}

fn cut(text: &str) -> String {
    if text.chars().count() > VALUE_CHARS {
        let mut kept: String = text.chars().take(VALUE_CHARS).collect();
        kept.push(ELIDED);
        kept
    } else {
        text.to_owned()
    }
}

fn write_elided(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            out.push('{');
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(cut(key)).to_string());
                out.push(':');
                write_elided(item, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_elided(item, out);
            }
            out.push(']');
        }
        Value::String(text) => out.push_str(&Value::String(cut(text)).to_string()),
        other => out.push_str(&cut(&other.to_string())),
    }
}

/// `agent for user`, and how the requester's identity is known.
pub fn requester(record: &ApprovalRecord) -> String {
    let who = match &record.requested_by.user {
        Some(user) => format!("{} for {}", record.requested_by.agent, user),
        None => record.requested_by.agent.clone(),
    };
    let how = match record.action.as_ref().and_then(|a| a.identity.as_ref()) {
        Some(identity) => match &identity.issuer {
            Some(issuer) => format!("verified by {issuer}"),
            None => "verified".to_owned(),
        },
        None => "not verified".to_owned(),
    };
    shown(&format!("{who} ({how})"))
}

/// `1 of 2` (and the roles that entitle an approver).
pub fn progress(record: &ApprovalRecord) -> String {
    let roles = if record.requirement.roles.is_empty() {
        String::new()
    } else {
        format!(", roles: {}", record.requirement.roles.join(", "))
    };
    shown(&format!("{} of {} grant(s){roles}", record.grants(), record.requirement.required))
}

/// The action the request binds as canonical, pretty-printed JSON (what `action_hash` covers),
/// escaped for the terminal. `None` for a request migrated from a store that never kept it.
pub fn action_block(record: &ApprovalRecord) -> Option<String> {
    let document = record.action_document()?;
    serde_json::to_string_pretty(&document).ok().map(|text| shown_lines(&text))
}

/// Escape control and format characters on every line (the pretty form's own newlines kept).
fn shown_lines(text: &str) -> String {
    text.lines().map(shown).collect::<Vec<_>>().join("\n")
}

/// Everything an approver must see before saying yes, as a block of lines.
pub fn summary(record: &ApprovalRecord) -> String {
    let mut out = format!(
        "approval {} ({}, {}, expires {})\n",
        record.approval_id,
        record.status.as_str(),
        progress(record),
        render(record.expires_at)
    );
    match action_block(record) {
        Some(block) => {
            out.push_str(&format!("action (canonical JSON; its SHA-256 is {}):\n", record.action_hash));
            out.push_str(&block);
            out.push('\n');
        }
        None => out.push_str(&format!(
            "action: {} ({}); its arguments were not recorded (requested before schema 4), so it cannot be answered\n",
            shown(&record.action_name),
            record.action_hash
        )),
    }
    let line = |label: &str, value: String| format!("  {label:<13} {value}\n");
    out.push_str(&line("requested by:", requester(record)));
    if let Some(stored) = &record.action {
        let when = stored.when.as_deref().map_or_else(String::new, |w| format!(" when {}", shown(w)));
        out.push_str(&line("rule:", format!("{}{when}", shown(&stored.rule))));
        let version = stored.policy_version.as_deref().map_or_else(String::new, |v| format!(" ({})", shown(v)));
        out.push_str(&line("policy:", format!("{}{version}", stored.policy_hash.as_deref().unwrap_or("-"))));
    }
    out.push_str(&line("requested:", render(record.requested_at)));
    out.push_str(&line("expires:", render(record.expires_at)));
    if let Some(precondition) = &record.precondition {
        out.push_str(&line("precondition:", precondition.clone()));
    }
    for vote in &record.votes {
        let who = match &vote.approver.user {
            Some(user) => format!("{}:{user}", vote.approver.agent),
            None => vote.approver.agent.clone(),
        };
        let how = match &vote.verified {
            Some(verified) => {
                format!("verified{}", verified.issuer.as_deref().map_or_else(String::new, |i| format!(" by {i}")))
            }
            None => "asserted".to_owned(),
        };
        let what = if vote.grant { "granted" } else { "denied" };
        out.push_str(&line("vote:", shown(&format!("{what} by {who} ({how}) at {}", render(vote.at)))));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_values_are_cut_and_marked_and_the_line_is_bounded() {
        let short = serde_json::json!({"amount": 90000, "payment_id": "pay_1"});
        assert_eq!(one_line(&short), r#"{"amount":90000,"payment_id":"pay_1"}"#);
        let long = serde_json::json!({"note": "x".repeat(41), "n": 1});
        assert_eq!(one_line(&long), format!(r#"{{"n":1,"note":"{}…"}}"#, "x".repeat(40)));
        let exactly = serde_json::json!({"note": "x".repeat(40)});
        assert!(!one_line(&exactly).contains(ELIDED));
        let wide = serde_json::json!({"a": "y".repeat(40), "b": "y".repeat(40), "c": "y".repeat(40)});
        let line = one_line(&wide);
        assert_eq!(line.chars().count(), LINE_CHARS);
        assert!(line.ends_with(ELIDED));
        assert_eq!(one_line(&serde_json::json!({"bidi": "a\u{202E}b"})), r#"{"bidi":"a\u{202E}b"}"#);
    }
}
