//! `DenialReason`: why `Error::Denied` said no, as one closed vocabulary instead of string
//! literals at each place that denies. A leaf module: it names nothing else in the crate.

use std::borrow::Cow;
use std::fmt;

/// `Denied.reason`. Serialised, displayed and recorded (receipts' `decision_reason`, events,
/// every binding's `.reason`) as `as_str`, exactly the text each denial always carried.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(from = "String", into = "String")]
#[non_exhaustive]
pub enum DenialReason {
    /// The document does not list the action (`unknown_action`).
    UnknownAction,
    /// None of the action's rules matched (`no_matching_rule`).
    NoMatchingRule,
    /// The action's entry is a bare `decision: deny` (`decision`).
    BareDecision,
    /// The document's rule at this 0-based index denies (`rule[N]`).
    Rule(usize),
    /// The caller's credential had lapsed when the action was proposed (`principal_expired`).
    PrincipalExpired,
    /// The action is for another environment than the kernel's (`environment_mismatch`).
    EnvironmentMismatch,
    /// The effect key template could not be rendered from the arguments (`effect_key_error`).
    EffectKeyError,
    /// The presented approval was denied by a human (`approval_denied`).
    ApprovalDenied,
    /// A reason the host gave when it refused before any decision (`Kernel::record_denial`).
    Host(String),
}

impl DenialReason {
    /// Every reason with a fixed spelling, for `parse`.
    const FIXED: [DenialReason; 7] = [
        DenialReason::UnknownAction,
        DenialReason::NoMatchingRule,
        DenialReason::BareDecision,
        DenialReason::PrincipalExpired,
        DenialReason::EnvironmentMismatch,
        DenialReason::EffectKeyError,
        DenialReason::ApprovalDenied,
    ];

    /// The reason's text, as receipts, events and the bindings carry it.
    pub fn as_str(&self) -> Cow<'_, str> {
        Cow::Borrowed(match self {
            DenialReason::UnknownAction => "unknown_action",
            DenialReason::NoMatchingRule => "no_matching_rule",
            DenialReason::BareDecision => "decision",
            DenialReason::Rule(index) => return Cow::Owned(format!("rule[{index}]")),
            DenialReason::PrincipalExpired => "principal_expired",
            DenialReason::EnvironmentMismatch => "environment_mismatch",
            DenialReason::EffectKeyError => "effect_key_error",
            DenialReason::ApprovalDenied => "approval_denied",
            DenialReason::Host(reason) => reason,
        })
    }

    /// The reason a ruling (or a host) spelled: a known one as its variant, any other text as
    /// `Host`, so that `DenialReason::parse(text).as_str() == text` for every `text`.
    pub fn parse(text: &str) -> DenialReason {
        if let Some(fixed) = DenialReason::FIXED.into_iter().find(|fixed| fixed.as_str() == text) {
            return fixed;
        }
        let index = text.strip_prefix("rule[").and_then(|rest| rest.strip_suffix(']')).and_then(|n| n.parse().ok());
        match index {
            Some(index) if format!("rule[{index}]") == text => DenialReason::Rule(index),
            _ => DenialReason::Host(text.to_owned()),
        }
    }
}

impl fmt::Display for DenialReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.as_str())
    }
}

impl From<String> for DenialReason {
    fn from(text: String) -> DenialReason {
        DenialReason::parse(&text)
    }
}

impl From<&str> for DenialReason {
    fn from(text: &str) -> DenialReason {
        DenialReason::parse(text)
    }
}

impl From<DenialReason> for String {
    fn from(reason: DenialReason) -> String {
        reason.as_str().into_owned()
    }
}

/// Compared with its text, so a caller matching on a reason's spelling keeps working.
impl PartialEq<str> for DenialReason {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for DenialReason {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

#[cfg(test)]
mod tests {
    use super::DenialReason;

    #[test]
    fn every_reason_reads_back_as_the_text_it_was_parsed_from() {
        for text in [
            "unknown_action",
            "no_matching_rule",
            "decision",
            "rule[0]",
            "rule[12]",
            "rule[007]",
            "rule[x]",
            "principal_expired",
            "environment_mismatch",
            "effect_key_error",
            "approval_denied",
            "upstream_unverified",
            "",
        ] {
            let reason = DenialReason::parse(text);
            assert_eq!(reason.as_str(), text);
            assert_eq!(String::from(reason.clone()), text);
            assert_eq!(serde_json::to_value(&reason).ok(), Some(serde_json::Value::from(text)));
            assert_eq!(serde_json::from_value::<DenialReason>(text.into()).ok(), Some(reason));
        }
        assert_eq!(DenialReason::parse("rule[3]"), DenialReason::Rule(3));
        assert_eq!(DenialReason::Rule(3).to_string(), "rule[3]");
        assert_eq!(DenialReason::from("approval_denied"), DenialReason::ApprovalDenied);
        assert!(DenialReason::ApprovalDenied == "approval_denied" && DenialReason::ApprovalDenied != "decision");
        assert!(DenialReason::NoMatchingRule == *"no_matching_rule" && DenialReason::NoMatchingRule != *"decision");
        assert_eq!(DenialReason::parse("rule[007]"), DenialReason::Host("rule[007]".into()));
    }

    #[test]
    fn the_policy_spells_its_reasons_as_the_denial_reasons_do() {
        assert_eq!(DenialReason::UnknownAction.as_str(), crate::policy::UNKNOWN_ACTION);
        assert_eq!(DenialReason::NoMatchingRule.as_str(), crate::policy::NO_MATCHING_RULE);
        assert_eq!(DenialReason::BareDecision.as_str(), crate::policy::BARE_DECISION);
    }
}
