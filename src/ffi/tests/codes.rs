//! Result codes: every error maps to a code in its family with its error object, and
//! `warden_result_name` names each code.

use super::super::result::*;
use super::super::{warden_abi_version, WARDEN_ABI_VERSION};
use super::{known_codes, name};
use crate::error::{DuplicateState, Error, StoreFaultKind};
use crate::EffectState;

#[test]
fn every_error_maps_to_a_code_in_its_family() {
    let errors = [
        Error::Denied { reason: "r".into(), detail: "d".into() },
        Error::ApprovalRequired { request_id: "apr_x".into(), expires_at: 0, action_hash: "sha256:x".into() },
        Error::ApprovalMismatch { reason: "r".into(), approval_id: "apr_x".into(), detail: "d".into() },
        Error::Duplicate { state: DuplicateState::Committed, effect_key: "k".into(), holder: "act_x".into() },
        Error::Duplicate { state: DuplicateState::InProgress, effect_key: "k".into(), holder: "act_x".into() },
        Error::Ambiguous { effect_key: "k".into(), action_id: "act_x".into(), detail: "d".into() },
        Error::AttemptCeiling { effect_key: "k".into(), attempts: 3, max_attempts: 3 },
        Error::NotResolvable { effect_key: "k".into(), state: EffectState::Committed },
        Error::LateOutcome { effect_key: "k".into(), state: EffectState::Ambiguous, holder: "act_x".into() },
        Error::NotFound("n".into()),
        Error::DelegationRefused {
            reason: "containment".into(),
            parent_id: "root".into(),
            dimension: Some("constraints".into()),
            detail: "d".into(),
        },
        Error::invalid(crate::error::InvalidInputKind::Malformed, "i"),
        Error::store(StoreFaultKind::Io, "s"),
        Error::Config("c".into()),
        Error::Poisoned("p".into()),
        Error::Panic("p".into()),
    ];
    let mut seen = std::collections::BTreeSet::new();
    for error in &errors {
        let code = code_of(error);
        let family = if error.is_refusal() { 100..200 } else { 200..300 };
        assert!(family.contains(&code), "{error:?} maps to {code}");
        assert_ne!(name(code), "WARDEN_RESULT_UNKNOWN");
        assert_eq!(error_json(error)["code"], name(code));
        seen.insert(code);
    }
    assert_eq!(seen.len(), errors.len(), "two errors share a code");
    assert_eq!(code_of(&errors[3]), WARDEN_RESULT_DUPLICATE);
    assert_eq!(code_of(&errors[4]), WARDEN_RESULT_IN_PROGRESS);
    assert_eq!(code_of(&errors[10]), WARDEN_RESULT_AUTHORITY_ESCALATION);
    assert_eq!(error_json(&errors[10])["dimension"], "constraints");
}

#[test]
fn an_authority_denial_is_denied_and_says_so_in_its_error_object() {
    let denied = Error::AuthorityDenied {
        reason: "authority_revoked".into(),
        grant_id: Some("dlg_1".into()),
        hop: None,
        dimension: None,
        detail: "d".into(),
    };
    assert_eq!(code_of(&denied), WARDEN_RESULT_DENIED);
    let object = error_json(&denied);
    assert_eq!(
        (object["authority"].as_bool(), object["grant_id"].as_str(), object["reason"].as_str()),
        (Some(true), Some("dlg_1"), Some("authority_revoked"))
    );
    assert!(error_json(&Error::Denied { reason: "r".into(), detail: "d".into() }).get("authority").is_none());
}

#[test]
fn result_name_names_every_code_and_says_unknown_otherwise() {
    for (code, expected) in known_codes() {
        assert_eq!(name(code), expected);
    }
    for unknown in [1, 99, 112, 199, 207, 300, u32::MAX] {
        assert_eq!(name(unknown), "WARDEN_RESULT_UNKNOWN");
    }
    assert_eq!(warden_abi_version(), WARDEN_ABI_VERSION);
    assert_eq!(warden_abi_version(), 1);
}
