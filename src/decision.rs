//! What a policy says about an action: `allow`, `approve` or `deny`, with the rule that said
//! so. `policy` produces these from the administrator's document and `pipeline` hands them to
//! the kernel; no caller outside the crate passes one in.

use serde::{Deserialize, Serialize};

/// What the document says about an action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Run it.
    Allow,
    /// Run it once a human has approved this exact action.
    Approve,
    /// Refuse it.
    Deny,
}

impl Decision {
    /// The decision as the document, receipts and events spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Approve => "approve",
            Decision::Deny => "deny",
        }
    }

    /// The decision spelled `text`, if it is one.
    pub fn parse(text: &str) -> Option<Decision> {
        match text {
            "allow" => Some(Decision::Allow),
            "approve" => Some(Decision::Approve),
            "deny" => Some(Decision::Deny),
            _ => None,
        }
    }
}

/// A decision with the reason that produced it (`decision`, `rule[N]`, `no_matching_rule`,
/// `unknown_action`, or whatever the host says).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ruling {
    /// What was decided.
    pub decision: Decision,
    /// Why, in the words receipts record as `decision_reason`.
    pub reason: String,
    /// What the evaluation could not check (a missing argument, a non-integer for an order
    /// operator); recorded on the POLICY_EVALUATED event.
    pub warnings: Vec<String>,
}

impl Ruling {
    /// A ruling with no warnings.
    pub fn new(decision: Decision, reason: &str) -> Ruling {
        Ruling { decision, reason: reason.to_owned(), warnings: Vec::new() }
    }
}
