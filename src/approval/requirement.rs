//! M-of-N with roles: `approval: {required: 2, roles: [finance, risk]}` on an `approve` rule.
//!
//! A request is granted once `required` distinct entitled approvers granted it. An approver is
//! entitled when it holds one of `roles` (when roles are named) in its verified identity's
//! `roles` claim, and, when more than one approver is required, when it is verified at all: an
//! asserted approval (a name typed at a CLI) counts only when `required` is 1 (ctrlrun's rule).
//! Anyone entitled may deny, and one deny ends the request.

use serde::{Deserialize, Serialize};

use super::person::{role, Approver};

/// The most approvers a rule may require.
pub const MAX_REQUIRED: u32 = 20;
/// The most roles a rule may name.
pub const MAX_ROLES: usize = 32;

/// How many entitled approvers must grant, and which roles entitle them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Requirement {
    /// How many distinct approvers must grant (at least 1).
    pub required: u32,
    /// Folded (`person::role`); empty: any approver.
    pub roles: Vec<String>,
}

impl Default for Requirement {
    /// One approver, any role: an approval as before M-of-N.
    fn default() -> Self {
        Requirement { required: 1, roles: Vec::new() }
    }
}

impl Requirement {
    /// `required` in 1..=[`MAX_REQUIRED`], roles non-empty strings, at most [`MAX_ROLES`],
    /// folded and de-duplicated.
    pub fn new(required: u32, roles: &[String]) -> Result<Requirement, String> {
        if !(1..=MAX_REQUIRED).contains(&required) {
            return Err(format!("'required' must be 1..={MAX_REQUIRED}, got {required}"));
        }
        if roles.len() > MAX_ROLES {
            return Err(format!("at most {MAX_ROLES} roles may be named, got {}", roles.len()));
        }
        let mut folded: Vec<String> = Vec::with_capacity(roles.len());
        for name in roles {
            let key = role(name);
            if key.is_empty() || name.chars().any(super::is_control_or_format) {
                return Err(format!("role {name:?} must be a non-empty plain name"));
            }
            if folded.contains(&key) {
                return Err(format!("role {name:?} is named twice"));
            }
            folded.push(key);
        }
        Ok(Requirement { required, roles: folded })
    }

    /// `Ok` when `approver` may answer under this requirement, else the refusal's reason and
    /// detail.
    pub fn entitles(&self, approver: &Approver) -> Result<(), (&'static str, String)> {
        let needs_verified = self.required > 1 || !self.roles.is_empty();
        let Some(verified) = &approver.verified else {
            if needs_verified {
                let why = if self.required > 1 {
                    format!("it needs {} verified approvers", self.required)
                } else {
                    format!("it needs an approver holding one of the roles {}", self.roles.join(", "))
                };
                return Err((
                    "approver_not_verified",
                    format!(
                        "{} is asserted (typed, not verified by an identity provider), and {why}; an asserted \
                         approval counts only when one approver with no role is required",
                        approver.label()
                    ),
                ));
            }
            return Ok(());
        };
        if !self.roles.is_empty() {
            let held = verified.roles();
            if !self.roles.iter().any(|wanted| held.contains(wanted)) {
                return Err((
                    "approver_lacks_role",
                    format!(
                        "{} holds none of the roles {} in its verified roles claim",
                        approver.label(),
                        self.roles.join(", ")
                    ),
                ));
            }
        }
        Ok(())
    }

    /// `{required, roles}`, as records show it.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({"required": self.required, "roles": self.roles})
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::action::Principal;
    use crate::approval::Verified;

    fn approver(roles: Option<serde_json::Value>) -> Approver {
        let principal = Principal { agent: "slack".into(), user: Some("bob".into()) };
        match roles {
            None => Approver::asserted(principal),
            Some(roles) => {
                Approver::verified(principal, Verified::new(Some("idp"), &serde_json::json!({"roles": roles})).unwrap())
            }
        }
    }

    #[test]
    fn an_asserted_approver_counts_only_for_one_approver_and_no_roles() {
        assert!(Requirement::default().entitles(&approver(None)).is_ok());
        let two = Requirement::new(2, &[]).unwrap();
        assert_eq!(two.entitles(&approver(None)).unwrap_err().0, "approver_not_verified");
        assert!(two.entitles(&approver(Some(serde_json::json!([])))).is_ok());
        let finance = Requirement::new(1, &["Finance".into()]).unwrap();
        assert_eq!(finance.entitles(&approver(None)).unwrap_err().0, "approver_not_verified");
        assert_eq!(
            finance.entitles(&approver(Some(serde_json::json!(["risk"])))).unwrap_err().0,
            "approver_lacks_role"
        );
        assert!(finance.entitles(&approver(Some(serde_json::json!(["FINANCE"])))).is_ok());
        assert!(finance.entitles(&approver(Some(serde_json::json!("finance")))).is_ok());
    }

    #[test]
    fn bounds_are_refused_at_the_edges() {
        assert!(Requirement::new(0, &[]).is_err());
        assert!(Requirement::new(MAX_REQUIRED, &[]).is_ok());
        assert!(Requirement::new(MAX_REQUIRED + 1, &[]).is_err());
        assert!(Requirement::new(1, &["a".into(), "A".into()]).is_err());
        assert!(Requirement::new(1, &[" ".into()]).is_err());
        let many: Vec<String> = (0..=MAX_ROLES).map(|i| format!("r{i}")).collect();
        assert!(Requirement::new(1, &many[..MAX_ROLES]).is_ok());
        assert!(Requirement::new(1, &many).is_err());
    }

    #[test]
    fn an_asserted_approver_is_told_which_requirement_needs_verification() {
        let table = [
            (Requirement::new(2, &[]).unwrap(), "it needs 2 verified approvers"),
            (
                Requirement::new(1, &["Finance".into()]).unwrap(),
                "it needs an approver holding one of the roles finance",
            ),
            (Requirement::new(3, &["risk".into()]).unwrap(), "it needs 3 verified approvers"),
        ];
        for (requirement, why) in table {
            let (reason, detail) = requirement.entitles(&approver(None)).unwrap_err();
            assert_eq!(reason, "approver_not_verified");
            assert!(detail.contains(&format!("(typed, not verified by an identity provider), and {why};")), "{detail}");
        }
    }

    #[test]
    fn records_show_the_requirement_as_required_and_folded_roles() {
        let requirement = Requirement::new(2, &["Finance".into(), "risk".into()]).unwrap();
        assert_eq!(requirement.to_json(), serde_json::json!({"required": 2, "roles": ["finance", "risk"]}));
        assert_eq!(Requirement::default().to_json(), serde_json::json!({"required": 1, "roles": []}));
    }
}
