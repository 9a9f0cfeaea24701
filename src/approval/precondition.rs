//! The world an approval was given in: a host's precondition provider answers `fn(action) ->
//! JSON` about the state the action depends on (the balance, the ticket's status), and Warden
//! keeps its fingerprint with the request. Just before a granted approval is spent the provider
//! runs again; a different fingerprint refuses with `precondition_changed` and leaves the
//! approval granted: the world changed between request and approval, so the yes no longer
//! applies.

use serde_json::{json, Value};

use crate::canonical::{canonical_bytes, sha256_prefixed};
use crate::error::{InvalidInput, InvalidInputKind};

/// The `schema` member of the fingerprinted precondition document.
pub const PRECONDITION_SCHEMA: &str = "warden.precondition/v1";

/// `sha256:` + hex over the canonical `{"schema": "warden.precondition/v1", "state": state}`.
/// A state that has no canonical form (a float) is refused, naming where.
pub fn fingerprint(state: &Value) -> Result<String, String> {
    let document = json!({"schema": PRECONDITION_SCHEMA, "state": state});
    let bytes =
        canonical_bytes(&document, "").map_err(|e| format!("the precondition state cannot be fingerprinted: {e}"))?;
    Ok(sha256_prefixed(&bytes))
}

/// The action as a precondition provider is given it.
pub fn action_json(action: &crate::action::Action) -> Value {
    json!({
        "name": action.name,
        "arguments": action.canonical_arguments(),
        "principal": {"agent": action.principal.agent, "user": action.principal.user},
        "resource": action.resource,
        "environment": action.environment,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fingerprint_is_the_hash_of_the_canonical_wrapped_state() {
        let state = json!({"balance": 100, "status": "open"});
        let expected =
            sha256_prefixed(br#"{"schema":"warden.precondition/v1","state":{"balance":100,"status":"open"}}"#);
        assert_eq!(fingerprint(&state).unwrap(), expected);
        assert_eq!(fingerprint(&json!({"status": "open", "balance": 100})).unwrap(), expected);
        assert_ne!(fingerprint(&json!({"balance": 101, "status": "open"})).unwrap(), expected);
        assert!(fingerprint(&json!({"x": 0.5})).unwrap_err().contains("state"));
    }

    fn refund() -> crate::action::Action {
        let principal = crate::action::Principal::new("refund-agent", Some("ada")).unwrap();
        crate::action::Action::new("stripe.refund", json!({"amount": 5}), principal, Some("payment:1"), "prod").unwrap()
    }

    #[test]
    fn a_provider_is_given_the_action_and_its_state_is_what_gets_fingerprinted() {
        assert_eq!(
            action_json(&refund()),
            json!({
                "name": "stripe.refund",
                "arguments": {"amount": 5},
                "principal": {"agent": "refund-agent", "user": "ada"},
                "resource": "payment:1",
                "environment": "prod",
            })
        );
        let provider = |action: &Value| -> Result<Value, String> { Ok(json!({"seen": action["arguments"]["amount"]})) };
        let source = PreconditionSource::Provider(&provider);
        assert_eq!(source.fingerprint_for(&refund()).ok(), fingerprint(&json!({"seen": 5})).ok());
        let failing = |_: &Value| -> Result<Value, String> { Err("ledger offline".into()) };
        assert_eq!(
            PreconditionSource::Provider(&failing).fingerprint_for(&refund()),
            Err(InvalidInput::new(
                InvalidInputKind::HookFailed,
                "the precondition provider failed: ledger offline; nothing was requested or spent"
            ))
        );
    }

    #[test]
    fn a_source_is_shown_without_its_state() {
        let secret = json!({"balance": "do not print"});
        assert_eq!(format!("{:?}", PreconditionSource::State(secret)), "PreconditionSource::State(..)");
        let provider = |_: &Value| -> Result<Value, String> { Ok(Value::Null) };
        assert_eq!(format!("{:?}", PreconditionSource::Provider(&provider)), "PreconditionSource::Provider(..)");
    }
}

/// A host's precondition provider: given `action_json`, the state the action depends on now;
/// `Err` refuses the call.
pub trait PreconditionProvider: Sync {
    /// The state `action` depends on now, or why it cannot be read.
    fn state(&self, action: &Value) -> Result<Value, String>;
}

impl<F: Fn(&Value) -> Result<Value, String> + Sync> PreconditionProvider for F {
    fn state(&self, action: &Value) -> Result<Value, String> {
        self(action)
    }
}

/// Where a proposal's precondition state comes from.
#[derive(Clone)]
pub enum PreconditionSource<'a> {
    /// The state the host read just before proposing (what a binding sends in the request).
    State(Value),
    /// A provider asked only when an approval is involved: when the request is made and just
    /// before a granted approval is spent.
    Provider(&'a dyn PreconditionProvider),
}

impl std::fmt::Debug for PreconditionSource<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PreconditionSource::State(_) => f.write_str("PreconditionSource::State(..)"),
            PreconditionSource::Provider(_) => f.write_str("PreconditionSource::Provider(..)"),
        }
    }
}

impl PreconditionSource<'_> {
    /// The fingerprint of the state now. A provider that fails, or a state with no canonical
    /// form, refuses the call: nothing can be checked, so nothing is approved or spent.
    /// The provider's failure is [`InvalidInputKind::HookFailed`]; a state with no canonical
    /// form is [`InvalidInputKind::NotCanonical`] at `precondition`.
    pub fn fingerprint_for(&self, action: &crate::action::Action) -> Result<String, InvalidInput> {
        let unprintable = |message| InvalidInput::at(InvalidInputKind::NotCanonical, "precondition", message);
        match self {
            PreconditionSource::State(state) => fingerprint(state).map_err(unprintable),
            PreconditionSource::Provider(provider) => {
                let state = provider.state(&action_json(action)).map_err(|e| {
                    InvalidInput::new(
                        InvalidInputKind::HookFailed,
                        format!("the precondition provider failed: {e}; nothing was requested or spent"),
                    )
                })?;
                fingerprint(&state).map_err(unprintable)
            }
        }
    }
}
