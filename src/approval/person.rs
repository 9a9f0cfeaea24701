//! Approvers are principals, and who counts as the requester.
//!
//! An approver is `{agent, user}` plus, when the host's identity provider vouched for it, the
//! issuer and claims it verified (`Verified`); a name typed at a CLI is *asserted*. The requester
//! check and the one-answer-per-person rule compare people by `person_key`: Unicode NFKC with
//! full case folding (NFKC_Casefold's reading: `ADA`, `ada` and a fullwidth `ａｄａ` are one name),
//! default-ignorable and format characters removed, trimmed, and a `qualifier:` prefix dropped
//! (`cli:ada` is `ada`). Folding more names together only ever refuses more: a false match
//! refuses an approval, it never lets one through.

use serde::{Deserialize, Serialize};
use unicode_normalization::UnicodeNormalization;

use crate::action::Principal;
use crate::canonical::{parse_json, to_canonical_string};

/// The largest claims object kept with a verified identity, as canonical JSON.
pub const MAX_CLAIMS_BYTES: usize = 16 * 1024;

/// What the host's identity provider verified about a principal: who issued it, and the claims.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verified {
    /// Who vouched (an identity provider's issuer), if known.
    pub issuer: Option<String>,
    /// A JSON object, canonical text.
    pub claims: String,
}

impl Verified {
    /// `claims` must be a JSON object that encodes canonically (no floats), at most
    /// [`MAX_CLAIMS_BYTES`].
    pub fn new(issuer: Option<&str>, claims: &serde_json::Value) -> Result<Verified, String> {
        if !claims.is_object() {
            return Err("the verified claims must be a JSON object".into());
        }
        let text = to_canonical_string(claims, "claims").map_err(|e| format!("the verified claims: {e}"))?;
        if text.len() > MAX_CLAIMS_BYTES {
            return Err(format!("the verified claims are {} bytes; at most {MAX_CLAIMS_BYTES} are kept", text.len()));
        }
        if issuer.is_some_and(|issuer| issuer.trim().is_empty()) {
            return Err("the verified issuer must be a non-empty string or absent".into());
        }
        Ok(Verified { issuer: issuer.map(str::to_owned), claims: text })
    }

    /// The claims as a JSON value.
    pub fn claims_json(&self) -> serde_json::Value {
        parse_json(&self.claims).unwrap_or(serde_json::Value::Null)
    }

    /// The roles claim (`roles`: a list of strings, or one string), each folded like a name.
    pub fn roles(&self) -> Vec<String> {
        match self.claims_json().get("roles") {
            Some(serde_json::Value::Array(items)) => items.iter().filter_map(|v| v.as_str()).map(role_key).collect(),
            Some(serde_json::Value::String(one)) => vec![role_key(one)],
            _ => Vec::new(),
        }
    }
}

/// Who answers an approval request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approver {
    /// Who they are.
    pub principal: Principal,
    /// `None`: asserted (typed at a CLI, passed as a bare name); `Some`: verified by the host.
    pub verified: Option<Verified>,
}

impl Approver {
    /// An approver nobody verified.
    pub fn asserted(principal: Principal) -> Approver {
        Approver { principal, verified: None }
    }

    /// An approver the host verified.
    pub fn verified(principal: Principal, verified: Verified) -> Approver {
        Approver { principal, verified: Some(verified) }
    }

    /// `cli:ada`, or the agent alone when there is no user.
    pub fn label(&self) -> String {
        label(&self.principal)
    }
}

/// `agent:user`, or the agent alone.
pub fn label(principal: &Principal) -> String {
    match &principal.user {
        Some(user) => format!("{}:{user}", principal.agent),
        None => principal.agent.clone(),
    }
}

/// A name as the requester check compares it. See the module documentation.
pub fn person_key(name: &str) -> String {
    let composed: String = name.nfkc().collect();
    let folded: String = caseless::default_case_fold_str(&composed).nfkc().collect();
    let visible: String = folded.chars().filter(|c| !ignorable(*c)).collect();
    let trimmed = visible.trim();
    match trimmed.rsplit_once(':') {
        Some((_, last)) if !last.trim().is_empty() => last.trim().to_owned(),
        _ => trimmed.to_owned(),
    }
}

fn role_key(role: &str) -> String {
    let composed: String = role.nfkc().collect();
    let folded: String = caseless::default_case_fold_str(&composed).nfkc().collect();
    folded.trim().to_owned()
}

/// A role as a requirement names it, folded as the claims' roles are.
pub fn role(name: &str) -> String {
    role_key(name)
}

/// Characters NFKC_Casefold maps to nothing (default ignorables) plus controls: invisible, so
/// they must not make two spellings of one name differ.
fn ignorable(c: char) -> bool {
    super::is_control_or_format(c)
        || matches!(c, '\u{034F}' | '\u{115F}' | '\u{1160}' | '\u{17B4}' | '\u{17B5}'
        | '\u{180B}'..='\u{180F}' | '\u{3164}' | '\u{FE00}'..='\u{FE0F}' | '\u{FFA0}' | '\u{E0100}'..='\u{E01EF}')
}

/// The person a principal names: its user, or the agent when it acts for nobody.
fn person(principal: &Principal) -> String {
    person_key(principal.user.as_deref().unwrap_or(&principal.agent))
}

/// Is `approver` the principal that made the request? Its person is compared with the
/// requester's agent and with the requester's user.
pub fn is_requester(approver: &Principal, requester: &Principal) -> bool {
    let who = person(approver);
    who == person_key(&requester.agent) || requester.user.as_deref().is_some_and(|user| who == person_key(user))
}

/// Do two principals name the same person (one answer each)?
pub fn same_person(a: &Principal, b: &Principal) -> bool {
    person(a) == person(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_of_one_name_share_a_key() {
        for spelling in ["ada", "ADA", "ada ", "\tAda", "cli:ada", "ops:ADA", "ａｄａ", "ＣＬＩ：ａｄａ", "a\u{200D}da"]
        {
            assert_eq!(person_key(spelling), "ada", "{spelling:?}");
        }
        assert_eq!(person_key("Straße"), person_key("STRASSE"));
        assert_ne!(person_key("bob"), person_key("ada"));
        assert_eq!(person_key("cli:"), "cli:");
    }

    #[test]
    fn two_principals_are_the_same_person_when_their_answering_names_fold_alike() {
        let principal = |agent: &str, user: Option<&str>| Principal::new(agent, user).unwrap();
        assert!(same_person(&principal("slack", Some("Ada")), &principal("cli", Some("ADA"))));
        assert!(!same_person(&principal("slack", Some("ada")), &principal("slack", Some("bob"))));
    }

    #[test]
    fn verified_claims_must_be_an_object_without_floats() {
        assert!(Verified::new(Some("https://id"), &serde_json::json!([1])).is_err());
        assert!(Verified::new(Some("https://id"), &serde_json::json!({"x": 1.5})).is_err());
        assert!(Verified::new(Some(" "), &serde_json::json!({})).is_err());
        let roles = Verified::new(None, &serde_json::json!({"roles": ["Finance", "risk"]})).unwrap().roles();
        assert_eq!(roles, ["finance", "risk"]);
    }

    #[test]
    fn verified_claims_are_kept_up_to_16_kib_and_refused_one_byte_past() {
        // `{"k":"…"}` is the text plus 8 bytes.
        let claims = |len: usize| serde_json::json!({ "k": "x".repeat(len - 8) });
        let kept = Verified::new(None, &claims(16_384)).unwrap();
        assert_eq!(kept.claims.len(), 16_384);
        assert_eq!(
            Verified::new(None, &claims(16_385)),
            Err("the verified claims are 16385 bytes; at most 16384 are kept".into())
        );
    }
}
