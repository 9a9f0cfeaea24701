//! The approval lifecycle as pure checks: who may answer, what may be consumed. A human's
//! approval is bound to one exact action hash, answered once, spent once, and expires.

use serde::{Deserialize, Serialize};

use crate::action::Principal;
use crate::clock::{Micros, MICROS_PER_SECOND};
use crate::error::Error;

/// How long a human has to answer unless the caller says otherwise.
pub const DEFAULT_APPROVAL_TTL: Micros = 15 * 60 * MICROS_PER_SECOND;

/// Longest approver, resolver or reason text accepted.
pub const MAX_NAME_CHARS: usize = 200;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalStatus {
    Pending,
    Granted,
    Denied,
    Expired,
    Consumed,
}

impl ApprovalStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalStatus::Pending => "pending",
            ApprovalStatus::Granted => "granted",
            ApprovalStatus::Denied => "denied",
            ApprovalStatus::Expired => "expired",
            ApprovalStatus::Consumed => "consumed",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalRecord {
    pub approval_id: String,
    pub action_hash: String,
    pub action_name: String,
    /// The proposal that asked; a different proposal of the same action may consume it.
    pub action_id: String,
    pub requested_by: Principal,
    pub status: ApprovalStatus,
    pub requested_at: Micros,
    pub expires_at: Micros,
    pub approver: Option<String>,
    pub answered_at: Option<Micros>,
    pub consumed_at: Option<Micros>,
    pub consumed_by: Option<String>,
    pub note: Option<String>,
}

impl ApprovalRecord {
    pub fn to_json(&self) -> serde_json::Value {
        use crate::clock::render;
        serde_json::json!({
            "approval_id": self.approval_id,
            "status": self.status.as_str(),
            "action": self.action_name,
            "action_hash": self.action_hash,
            "action_id": self.action_id,
            "requested_by": {"agent": self.requested_by.agent, "user": self.requested_by.user},
            "requested_at": render(self.requested_at),
            "expires_at": render(self.expires_at),
            "approver": self.approver,
            "answered_at": self.answered_at.map(render),
            "consumed_at": self.consumed_at.map(render),
            "consumed_by": self.consumed_by,
            "note": self.note,
        })
    }
}

/// What a store must do with one approval check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Proceed,
    Refuse(Error),
    /// The approval lapsed: mark it `expired`, keep that write, and refuse.
    ExpireAndRefuse(Error),
}

fn mismatch(reason: &str, approval_id: &str, detail: String) -> Error {
    Error::ApprovalMismatch { reason: reason.to_owned(), approval_id: approval_id.to_owned(), detail }
}

/// May this request still be granted or denied by `approver`?
pub fn check_answerable(record: Option<&ApprovalRecord>, approval_id: &str, approver: &str, now: Micros) -> Verdict {
    let Some(record) = record else {
        return Verdict::Refuse(mismatch("unknown", approval_id, "no such approval request".into()));
    };
    if record.status != ApprovalStatus::Pending {
        return Verdict::Refuse(mismatch(
            record.status.as_str(),
            approval_id,
            format!("it is already {}, and a request is answered exactly once", record.status.as_str()),
        ));
    }
    if now > record.expires_at {
        return Verdict::ExpireAndRefuse(mismatch(
            "expired",
            approval_id,
            format!("it expired at {}", crate::clock::render(record.expires_at)),
        ));
    }
    let requester = &record.requested_by;
    // Case-insensitive: `Ada` approving a request from `ada` is the same person by any reading
    // an auditor would accept.
    let same = |name: &str| name.trim().to_lowercase() == approver.trim().to_lowercase();
    if same(&requester.agent) || requester.user.as_deref().is_some_and(same) {
        return Verdict::Refuse(mismatch(
            "approver_is_requester",
            approval_id,
            format!("{approver:?} requested this action and cannot also approve or deny it"),
        ));
    }
    Verdict::Proceed
}

/// Does this presented approval authorize exactly this action, now? The hash is checked
/// before the status, so a mutated action leaves the approval untouched and still usable for
/// the action the human actually saw.
pub fn check_consumable(record: Option<&ApprovalRecord>, approval_id: &str, action_hash: &str, now: Micros) -> Verdict {
    let Some(record) = record else {
        return Verdict::Refuse(mismatch("unknown", approval_id, "no such approval".into()));
    };
    if record.action_hash != action_hash && !skip_hash_check() {
        return Verdict::Refuse(mismatch(
            "mismatch",
            approval_id,
            format!("it authorizes {}, not {action_hash}", record.action_hash),
        ));
    }
    match record.status {
        ApprovalStatus::Granted => {}
        ApprovalStatus::Denied => {
            return Verdict::Refuse(Error::Denied {
                reason: "approval_denied".into(),
                detail: format!(
                    "approval {approval_id} was denied by {}",
                    record.approver.as_deref().unwrap_or("an approver")
                ),
            })
        }
        other => {
            return Verdict::Refuse(mismatch(
                other.as_str(),
                approval_id,
                format!("it is {}, not granted", other.as_str()),
            ))
        }
    }
    if now > record.expires_at {
        return Verdict::ExpireAndRefuse(mismatch(
            "expired",
            approval_id,
            format!("it expired at {}", crate::clock::render(record.expires_at)),
        ));
    }
    Verdict::Proceed
}

/// Test-only: a deliberately broken build that skips the approval-hash check, so a test can
/// show `warden verify` catching it (G1 must fail). Compiled only with `test-exports`.
#[cfg(feature = "test-exports")]
pub static SKIP_HASH_CHECK: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Never true, except in the broken build above once a test sets `SKIP_HASH_CHECK`. One function
/// whatever the features, so its mutants have one name (see `.cargo/mutants.toml`).
fn skip_hash_check() -> bool {
    #[cfg(feature = "test-exports")]
    let skip = SKIP_HASH_CHECK.load(std::sync::atomic::Ordering::SeqCst);
    #[cfg(not(feature = "test-exports"))]
    let skip = false;
    skip
}

/// An approver, resolver or reason: one line, no control or format characters (so a name can
/// never forge a line of CLI output or hide text with a bidi override), bounded.
pub fn check_person_name(what: &str, name: &str) -> Result<(), Error> {
    if name.trim().is_empty() {
        return Err(Error::InvalidInput(format!("{what} must be a non-empty name")));
    }
    if name.chars().count() > MAX_NAME_CHARS {
        return Err(Error::InvalidInput(format!("{what} is longer than {MAX_NAME_CHARS} characters")));
    }
    if let Some(bad) = name.chars().find(|c| is_control_or_format(*c)) {
        return Err(Error::InvalidInput(format!(
            "{what} contains the control or format character U+{:04X}; use one plain line",
            u32::from(bad)
        )));
    }
    Ok(())
}

/// Unicode general categories Cc (control) and Cf (format), plus the line and paragraph
/// separators, which end a line just as well.
pub fn is_control_or_format(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{00AD}' | '\u{0600}'..='\u{0605}' | '\u{061C}' | '\u{06DD}' | '\u{070F}' | '\u{0890}'..='\u{0891}'
            | '\u{08E2}' | '\u{180E}' | '\u{200B}'..='\u{200F}' | '\u{2028}'..='\u{202E}' | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{206F}' | '\u{FEFF}' | '\u{FFF9}'..='\u{FFFB}' | '\u{110BD}' | '\u{110CD}'
            | '\u{13430}'..='\u{1343F}' | '\u{1BCA0}'..='\u{1BCA3}' | '\u{1D173}'..='\u{1D17A}'
            | '\u{E0001}' | '\u{E0020}'..='\u{E007F}')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(status: ApprovalStatus) -> ApprovalRecord {
        ApprovalRecord {
            approval_id: "apr_1".into(),
            action_hash: "sha256:aa".into(),
            action_name: "stripe.refund".into(),
            action_id: "act_1".into(),
            requested_by: Principal { agent: "refund-agent".into(), user: Some("ada".into()) },
            status,
            requested_at: 0,
            expires_at: 100,
            approver: None,
            answered_at: None,
            consumed_at: None,
            consumed_by: None,
            note: None,
        }
    }

    #[test]
    fn the_requester_cannot_answer_their_own_request() {
        for who in ["refund-agent", "ada"] {
            let verdict = check_answerable(Some(&record(ApprovalStatus::Pending)), "apr_1", who, 1);
            assert!(
                matches!(verdict, Verdict::Refuse(Error::ApprovalMismatch { ref reason, .. }) if reason == "approver_is_requester")
            );
        }
        assert_eq!(check_answerable(Some(&record(ApprovalStatus::Pending)), "apr_1", "bob", 1), Verdict::Proceed);
    }

    #[test]
    fn hash_is_checked_before_status() {
        let verdict = check_consumable(Some(&record(ApprovalStatus::Consumed)), "apr_1", "sha256:bb", 1);
        assert!(matches!(verdict, Verdict::Refuse(Error::ApprovalMismatch { ref reason, .. }) if reason == "mismatch"));
    }

    fn granted() -> ApprovalRecord {
        let mut granted = record(ApprovalStatus::Granted);
        granted.approver = Some("bob".into());
        granted
    }

    fn refusal_reason(verdict: &Verdict) -> Option<&str> {
        match verdict {
            Verdict::Refuse(Error::ApprovalMismatch { reason, .. })
            | Verdict::ExpireAndRefuse(Error::ApprovalMismatch { reason, .. }) => Some(reason),
            _ => None,
        }
    }

    #[test]
    fn the_default_approval_ttl_is_exactly_fifteen_minutes() {
        assert_eq!(DEFAULT_APPROVAL_TTL, 900_000_000);
    }

    #[test]
    fn a_request_is_answerable_at_its_expiry_instant_and_expires_one_microsecond_after() {
        let pending = record(ApprovalStatus::Pending);
        assert_eq!(check_answerable(Some(&pending), "apr_1", "bob", pending.expires_at), Verdict::Proceed);
        let late = check_answerable(Some(&pending), "apr_1", "bob", pending.expires_at + 1);
        assert!(matches!(late, Verdict::ExpireAndRefuse(_)), "{late:?}");
        assert_eq!(refusal_reason(&late), Some("expired"));
    }

    #[test]
    fn a_granted_approval_is_consumable_at_its_expiry_instant_and_expires_one_microsecond_after() {
        let granted = granted();
        assert_eq!(check_consumable(Some(&granted), "apr_1", "sha256:aa", granted.expires_at), Verdict::Proceed);
        let late = check_consumable(Some(&granted), "apr_1", "sha256:aa", granted.expires_at + 1);
        assert!(matches!(late, Verdict::ExpireAndRefuse(_)), "{late:?}");
        assert_eq!(refusal_reason(&late), Some("expired"));
    }

    #[test]
    fn a_request_is_answered_exactly_once() {
        for status in
            [ApprovalStatus::Granted, ApprovalStatus::Denied, ApprovalStatus::Expired, ApprovalStatus::Consumed]
        {
            let verdict = check_answerable(Some(&record(status)), "apr_1", "bob", 1);
            assert_eq!(refusal_reason(&verdict), Some(status.as_str()), "{status:?}");
            assert!(matches!(verdict, Verdict::Refuse(_)));
        }
        let unknown = check_answerable(None, "apr_9", "bob", 1);
        assert_eq!(refusal_reason(&unknown), Some("unknown"));
    }

    #[test]
    fn the_requester_is_recognized_whatever_the_case_and_surrounding_spaces() {
        for who in [" Refund-Agent", "ADA ", "Ada"] {
            let verdict = check_answerable(Some(&record(ApprovalStatus::Pending)), "apr_1", who, 1);
            assert_eq!(refusal_reason(&verdict), Some("approver_is_requester"), "{who:?}");
        }
        let mut agent_only = record(ApprovalStatus::Pending);
        agent_only.requested_by.user = None;
        assert_eq!(check_answerable(Some(&agent_only), "apr_1", "ada", 1), Verdict::Proceed);
    }

    #[test]
    fn only_a_granted_approval_for_exactly_this_hash_is_consumable() {
        assert_eq!(check_consumable(Some(&granted()), "apr_1", "sha256:aa", 1), Verdict::Proceed);
        let other = check_consumable(Some(&granted()), "apr_1", "sha256:bb", 1);
        assert_eq!(refusal_reason(&other), Some("mismatch"));
        for status in [ApprovalStatus::Pending, ApprovalStatus::Expired, ApprovalStatus::Consumed] {
            let verdict = check_consumable(Some(&record(status)), "apr_1", "sha256:aa", 1);
            assert_eq!(refusal_reason(&verdict), Some(status.as_str()), "{status:?}");
        }
        let mut denied = record(ApprovalStatus::Denied);
        denied.approver = Some("bob".into());
        let verdict = check_consumable(Some(&denied), "apr_1", "sha256:aa", 1);
        assert!(
            matches!(verdict, Verdict::Refuse(Error::Denied { ref reason, ref detail }) if reason == "approval_denied" && detail.contains("bob")),
            "{verdict:?}"
        );
        assert_eq!(refusal_reason(&check_consumable(None, "apr_9", "sha256:aa", 1)), Some("unknown"));
    }

    #[test]
    fn a_name_of_exactly_two_hundred_characters_is_accepted_and_one_more_is_refused() {
        assert_eq!(MAX_NAME_CHARS, 200);
        check_person_name("--by", &"n".repeat(200)).unwrap();
        // Characters, not bytes: two hundred two-byte characters are still two hundred.
        check_person_name("--by", &"é".repeat(200)).unwrap();
        assert!(check_person_name("--by", &"n".repeat(201)).is_err());
        assert!(check_person_name("--by", &"é".repeat(201)).is_err());
    }

    #[test]
    fn names_with_controls_or_format_characters_are_refused() {
        for bad in ["", "  ", "a\nb", "a\u{202E}b", "a\u{200B}", "x\u{0007}", &"n".repeat(201)] {
            assert!(check_person_name("--by", bad).is_err(), "{bad:?}");
        }
        check_person_name("--by", "Ada Lovelace (ops)").unwrap();
    }
}
