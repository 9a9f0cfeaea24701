//! What an agent proposes to do, and the hash an approval binds to.
//!
//! The canonical form and hash are ctrlrun's (`ctrlrun.action/v1`), so a hash computed here can
//! be checked by ctrlrun and the other way round. `action_id` is excluded from the canonical form:
//! it names one proposal, while the hash names its content, and two proposals with the same
//! content are the same thing to an approver.
//!
//! Which numbers the arguments may hold is the document's to say ([`Floats`], decided by its
//! schema): [`Action::new`] is ctrlrun's reading, floats refused; [`Action::new_with`] takes the
//! choice. An action holds a float only if its door admitted one, so the hash and every other
//! encoding of an action ([`Action::canonical`], [`Action::arguments_text`]) print floats as
//! RFC 8785 does and are byte-identical to ctrlrun's for an action without floats.

use serde_json::{Map, Value};

use crate::canonical::{
    nesting_depth, parse_json, sha256_prefixed, to_canonical_string_with, CanonicalError, Floats, MAX_INPUT_DEPTH,
};
use crate::error::InvalidInput;
use crate::error::InvalidInputKind::{self, Malformed, Missing, NotCanonical, State, TooLarge};

/// The `schema` member of the hashed action document (ctrlrun's, so hashes agree).
pub const ACTION_SCHEMA: &str = "ctrlrun.action/v1";

/// Why a principal or an action is not valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ActionError {
    /// A field is missing, empty or of the wrong shape; the kind and path say which.
    #[error("{0}")]
    Invalid(InvalidInput),
    /// The arguments have no canonical form (a float where floats are refused, invalid JSON).
    #[error(transparent)]
    Canonical(#[from] CanonicalError),
}

// The action's refusals as the crate's errors. Here, beside `ActionError`, so that `error`
// (a leaf every module uses) knows nothing of actions.
impl From<ActionError> for InvalidInput {
    /// The action's own finding: its kind and path, or the canonical form's.
    fn from(error: ActionError) -> InvalidInput {
        match error {
            ActionError::Invalid(invalid) => invalid,
            ActionError::Canonical(error) => error.into(),
        }
    }
}

impl From<ActionError> for crate::error::Error {
    /// An action or principal refused by its own rules: invalid input of the kind and at the
    /// path the action module found.
    fn from(error: ActionError) -> crate::error::Error {
        crate::error::Error::InvalidInput(error.into())
    }
}

/// Who is acting: an agent, optionally on behalf of a human.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Principal {
    /// The agent's name; never empty.
    pub agent: String,
    /// The human the agent acts for, if any; never empty when present.
    pub user: Option<String>,
}

impl Principal {
    /// A validated principal.
    pub fn new(agent: &str, user: Option<&str>) -> Result<Principal, ActionError> {
        let principal = Principal { agent: agent.to_owned(), user: user.map(str::to_owned) };
        principal.validate()?;
        Ok(principal)
    }

    /// An empty identity names nobody, so it cannot be attributed or granted anything.
    pub fn validate(&self) -> Result<(), ActionError> {
        if self.agent.is_empty() {
            return Err(invalid(Missing, "principal.agent", "principal.agent must be a non-empty string"));
        }
        if self.user.as_deref() == Some("") {
            return Err(invalid(Missing, "principal.user", "principal.user must be a non-empty string or absent"));
        }
        Ok(())
    }
}

/// A proposed agent action: what, with which arguments, by whom, on what, where.
///
/// The fields are public for reading and for serde; anything built or changed by hand is checked
/// again by [`Action::canonical`], so an invalid action cannot be hashed.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Action {
    /// This proposal's id (`act_…`); not part of the hash.
    pub action_id: String,
    /// The action's name, as the document lists it.
    pub name: String,
    /// The arguments, in their canonical reading.
    pub arguments: Map<String, Value>,
    /// Who proposes it.
    pub principal: Principal,
    /// What it acts on, rendered from the document's resource template or given by the host.
    pub resource: Option<String>,
    /// Where it acts (`production`, …); a kernel refuses another environment's action.
    pub environment: String,
}

impl Action {
    /// Validates and assigns a fresh `act_` id, refusing floats as ctrlrun does: what an action
    /// is when no document says otherwise (the pure functions, a `ctrlrun.policy/*` document).
    ///
    /// The arguments are stored in their canonical reading (parsed back from the canonical
    /// text), which is what the executor is given and what the hash covers; ctrlrun does the
    /// same. A float anywhere is refused with its path (`arguments.items[3].price`), and so is
    /// nesting deeper than [`MAX_INPUT_DEPTH`].
    pub fn new(
        name: &str,
        arguments: Value,
        principal: Principal,
        resource: Option<&str>,
        environment: &str,
    ) -> Result<Action, ActionError> {
        Action::new_with(name, arguments, principal, resource, environment, Floats::Refused)
    }

    /// [`Action::new`] with `floats` saying whether the arguments may hold floats: the
    /// document's choice (`Schema::floats`). Under [`Floats::Rfc8785`] a float is kept in its
    /// canonical reading, the double's RFC 8785 text: `1.50` is held as `1.5`, and `1.0` and `1e3`
    /// as the integers `1` and `1000`, which is what the executor is given and the hash covers;
    /// a text beyond the double range (`1e400`) is refused with its path.
    pub fn new_with(
        name: &str,
        arguments: Value,
        principal: Principal,
        resource: Option<&str>,
        environment: &str,
        floats: Floats,
    ) -> Result<Action, ActionError> {
        let depth = nesting_depth(&arguments);
        let Value::Object(arguments) = arguments else {
            return Err(invalid(
                Malformed,
                "arguments",
                &format!("action.arguments must be a JSON object, got {}", kind_of(&arguments)),
            ));
        };
        let mut action = Action {
            action_id: String::new(),
            name: name.to_owned(),
            arguments,
            principal,
            resource: resource.map(str::to_owned),
            environment: environment.to_owned(),
        };
        action.validate()?;
        if depth > MAX_INPUT_DEPTH {
            return Err(invalid(
                TooLarge,
                "arguments",
                &format!(
                    "action.arguments nest {depth} levels deep; at most {MAX_INPUT_DEPTH} are \
                 accepted, so that receipts and events wrapping them can be read back"
                ),
            ));
        }
        let text = to_canonical_string_with(&Value::Object(action.arguments), "arguments", floats)?;
        let Value::Object(canonical_arguments) = parse_json(&text)? else {
            return Err(invalid(
                NotCanonical,
                "arguments",
                "action.arguments did not read back as an object from their canonical form",
            ));
        };
        action.arguments = canonical_arguments;
        action.action_id = new_id(IdKind::Action)?;
        Ok(action)
    }

    /// The field rules of [`Action::new`], minus the arguments, which are checked by encoding them.
    pub fn validate(&self) -> Result<(), ActionError> {
        if self.name.is_empty() {
            return Err(invalid(Missing, "name", "action.name must be a non-empty string"));
        }
        if self.environment.is_empty() {
            return Err(invalid(Missing, "environment", "action.environment must be a non-empty string"));
        }
        if self.resource.as_deref() == Some("") {
            return Err(invalid(Missing, "resource", "action.resource must be a non-empty string or absent"));
        }
        self.principal.validate()
    }

    /// The canonical six-key object `{arguments, environment, name, principal{agent,user},
    /// resource, schema}`. Fails only for an action whose public fields were changed after
    /// [`Action::new`] into something no door admits (an empty name, a number beyond the double
    /// range).
    pub fn canonical(&self) -> Result<String, ActionError> {
        self.validate()?;
        let mut principal = Map::new();
        principal.insert("agent".into(), Value::String(self.principal.agent.clone()));
        principal.insert("user".into(), optional_string(self.principal.user.as_deref()));
        let mut object = Map::new();
        object.insert("arguments".into(), Value::Object(self.arguments.clone()));
        object.insert("environment".into(), Value::String(self.environment.clone()));
        object.insert("name".into(), Value::String(self.name.clone()));
        object.insert("principal".into(), Value::Object(principal));
        object.insert("resource".into(), optional_string(self.resource.as_deref()));
        object.insert("schema".into(), Value::String(ACTION_SCHEMA.into()));
        // An empty root makes a number's path read `arguments.…`, as it does from `new`.
        Ok(to_canonical_string_with(&Value::Object(object), "", Floats::ADMITTED)?)
    }

    /// The canonical text of the arguments alone: what an approval request keeps and what the
    /// argument-size limit counts.
    pub fn arguments_text(&self) -> Result<String, ActionError> {
        Ok(to_canonical_string_with(&self.canonical_arguments(), "arguments", Floats::ADMITTED)?)
    }

    /// `"sha256:"` + hex of the SHA-256 of [`Action::canonical`]: what an approval binds to.
    pub fn hash(&self) -> Result<String, ActionError> {
        Ok(sha256_prefixed(self.canonical()?.as_bytes()))
    }

    /// The arguments as a JSON object, a fresh copy, so the executor cannot reach the action.
    pub fn canonical_arguments(&self) -> Value {
        Value::Object(self.arguments.clone())
    }
}

/// The kinds of identifier Warden issues; the prefix says which kind a string is at a glance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdKind {
    /// `act_`: one proposal.
    Action,
    /// `apr_`: an approval request.
    Approval,
    /// `ctr_`: a control id (the prefix is reserved; nothing in this crate issues one yet).
    Control,
    /// `dlg_`: a delegation.
    Delegation,
    /// `rct_`: a receipt.
    Receipt,
    /// `snp_`: a sight snapshot.
    Snapshot,
    /// `sgr_`: a scoped grant (an approval's grant of the next actions of one shape).
    ScopedGrant,
}

impl IdKind {
    /// The prefix ids of this kind start with.
    pub fn prefix(self) -> &'static str {
        match self {
            IdKind::Action => "act_",
            IdKind::Approval => "apr_",
            IdKind::Control => "ctr_",
            IdKind::Delegation => "dlg_",
            IdKind::Receipt => "rct_",
            IdKind::Snapshot => "snp_",
            IdKind::ScopedGrant => "sgr_",
        }
    }
}

const ID_RANDOM_BYTES: usize = 16;

/// The prefix for `kind` and 32 lowercase hex digits from the operating system's CSPRNG.
///
/// An approval id is a bearer of authority, so it must not be guessable; if the random source
/// fails there is no safe fallback, and the caller is refused rather than given a weak id.
pub fn new_id(kind: IdKind) -> Result<String, ActionError> {
    let mut random = [0u8; ID_RANDOM_BYTES];
    getrandom::fill(&mut random).map_err(|error| {
        ActionError::Invalid(InvalidInput::new(
            State,
            format!("the operating system's random source failed ({error}); no {} id can be issued", kind.prefix()),
        ))
    })?;
    Ok(format!("{}{}", kind.prefix(), hex::encode(random)))
}

/// Whether `text` has the shape [`new_id`] produces for `kind`.
pub fn is_id(kind: IdKind, text: &str) -> bool {
    text.strip_prefix(kind.prefix()).is_some_and(|digits| {
        digits.len() == 2 * ID_RANDOM_BYTES && digits.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

fn invalid(kind: InvalidInputKind, path: &str, message: &str) -> ActionError {
    ActionError::Invalid(InvalidInput::at(kind, path, message))
}

fn optional_string(text: Option<&str>) -> Value {
    text.map_or(Value::Null, |t| Value::String(t.to_owned()))
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn principal() -> Principal {
        Principal::new("refund-agent", Some("ada")).unwrap()
    }

    fn refund(arguments: Value) -> Result<Action, ActionError> {
        Action::new("stripe.refund", arguments, principal(), Some("payment:txn_1"), "production")
    }

    #[test]
    fn float_in_arguments_is_refused_with_its_exact_path() {
        let refused = refund(json!({"items": [{}, {}, {}, {"price": 19.99}]}));
        assert_eq!(
            refused,
            Err(ActionError::Canonical(CanonicalError::Float { path: "arguments.items[3].price".into() }))
        );
        let message = refused.unwrap_err().to_string();
        assert!(message.contains("arguments.items[3].price"), "{message}");
    }

    #[test]
    fn arguments_that_are_not_an_object_are_refused_naming_what_they_are() {
        let table = [
            (json!([1]), "an array"),
            (json!("x"), "a string"),
            (json!(null), "null"),
            (json!(1), "a number"),
            (json!(true), "a boolean"),
        ];
        for (arguments, kind) in table {
            assert_eq!(
                refund(arguments),
                Err(ActionError::Invalid(InvalidInput::at(
                    Malformed,
                    "arguments",
                    format!("action.arguments must be a JSON object, got {kind}")
                )))
            );
        }
        assert_eq!(kind_of(&json!({})), "an object");
    }

    #[test]
    fn empty_names_are_refused_everywhere_they_can_appear() {
        let args = || json!({});
        let p = principal;
        assert!(Action::new("", args(), p(), None, "prod").is_err());
        assert!(Action::new("a", args(), p(), None, "").is_err());
        assert!(Action::new("a", args(), p(), Some(""), "prod").is_err());
        assert!(Principal::new("", None).is_err());
        assert!(Principal::new("agent", Some("")).is_err());
        let nobody = Principal { agent: String::new(), user: None };
        assert!(Action::new("a", args(), nobody, None, "prod").is_err());
        assert!(Principal::new("agent", None).is_ok());
    }

    #[test]
    fn canonical_form_is_the_six_key_object_with_the_schema_tag() {
        let action =
            Action::new("email.send", json!({}), Principal::new("a", Some("bob")).unwrap(), None, "staging").unwrap();
        assert_eq!(
            action.canonical().unwrap(),
            r#"{"arguments":{},"environment":"staging","name":"email.send","principal":{"agent":"a","user":"bob"},"resource":null,"schema":"ctrlrun.action/v1"}"#
        );
        // From ctrlrun 0.12.2's vectors (actions.json row 3).
        assert_eq!(action.hash().unwrap(), "sha256:8b113a75ca3fee715ffc7c33d687b6805820678eecdf4287ac34610a13dcd097");
    }

    #[test]
    fn the_hash_follows_content_and_ignores_the_action_id() {
        let first = refund(json!({"amount": 200000, "payment_id": "txn_1"})).unwrap();
        let second = refund(json!({"payment_id": "txn_1", "amount": 200000})).unwrap();
        assert_ne!(first.action_id, second.action_id);
        assert_eq!(first.hash().unwrap(), second.hash().unwrap());
        let other = refund(json!({"amount": 200001, "payment_id": "txn_1"})).unwrap();
        assert_ne!(first.hash().unwrap(), other.hash().unwrap());
    }

    #[test]
    fn big_integers_in_arguments_survive_exactly() {
        let value: Value = parse_json(r#"{"n":1180591620717411303424}"#).unwrap();
        let action = refund(value).unwrap();
        assert!(action.canonical().unwrap().contains(r#"{"n":1180591620717411303424}"#));
        assert_eq!(action.canonical_arguments()["n"].to_string(), "1180591620717411303424");
    }

    #[test]
    fn arguments_are_kept_in_their_canonical_reading() {
        let action = refund(parse_json(r#"{"n":-0}"#).unwrap()).unwrap();
        assert_eq!(action.canonical_arguments(), json!({"n": 0}));
    }

    #[test]
    fn an_action_changed_after_construction_cannot_be_hashed_if_new_would_refuse_it() {
        let mut action = refund(json!({"amount": 1})).unwrap();
        action.name.clear();
        assert!(matches!(action.hash(), Err(ActionError::Invalid(_))));

        // A number no door admits: beyond the double range, it has no canonical text at all.
        let mut action = refund(json!({"amount": 1})).unwrap();
        action.arguments.insert("price".into(), Value::Number("1e400".parse().unwrap()));
        let beyond = Err(ActionError::Canonical(CanonicalError::BeyondDouble { path: "arguments.price".into() }));
        assert_eq!(action.hash(), beyond);
        assert_eq!(action.arguments_text(), beyond.map(|_: String| String::new()));
    }

    #[test]
    fn an_admitted_float_is_held_in_its_canonical_reading_and_hashed_as_rfc_8785_writes_it() {
        let admit = |text: &str| {
            Action::new_with("get-sum", parse_json(text).unwrap(), principal(), None, "production", Floats::Rfc8785)
        };
        let action = admit(r#"{"a":1.50,"b":[1.0,1e3,-0.0,1e21,0.1]}"#).unwrap();
        assert_eq!(action.arguments_text().unwrap(), r#"{"a":1.5,"b":[1,1000,0,1e+21,0.1]}"#);
        assert_eq!(action.canonical_arguments()["b"][0].to_string(), "1", "1.0 is held as the integer 1");
        assert!(action.canonical().unwrap().starts_with(r#"{"arguments":{"a":1.5,"b":[1,1000,0,1e+21,0.1]},"#));
        // Spelling does not change the action: 1.5 however written, 1.0 and 1 alike.
        let respelled = admit(r#"{"b":[1,1000.000,0,1000000000000000000000.0,1e-1],"a":15e-1}"#).unwrap();
        assert_eq!(respelled.hash().unwrap(), action.hash().unwrap());
        // An integer keeps every digit in both forms: 2^53 + 1 is not rounded to a double.
        let big = admit(r#"{"n":9007199254740993}"#).unwrap();
        assert_eq!(big.arguments_text().unwrap(), r#"{"n":9007199254740993}"#);
        assert_eq!(big.hash().unwrap(), refund_like_get_sum(r#"{"n":9007199254740993}"#));
        // The float of that text is the double 2^53, and is held as that integer.
        assert_eq!(
            admit(r#"{"n":9007199254740993.0}"#).unwrap().arguments_text().unwrap(),
            r#"{"n":9007199254740992}"#
        );
        assert_eq!(
            admit(r#"{"a":{"b":-1e400}}"#),
            Err(ActionError::Canonical(CanonicalError::BeyondDouble { path: "arguments.a.b".into() }))
        );
        assert_eq!(
            Action::new("get-sum", json!({"a": 1.5}), principal(), None, "production"),
            Err(ActionError::Canonical(CanonicalError::Float { path: "arguments.a".into() }))
        );
    }

    /// The hash of `get-sum` with these arguments as ctrlrun's `Action::new` builds it.
    fn refund_like_get_sum(arguments: &str) -> String {
        Action::new("get-sum", parse_json(arguments).unwrap(), principal(), None, "production").unwrap().hash().unwrap()
    }

    #[test]
    fn arguments_nested_past_the_input_limit_are_refused() {
        let nest = |levels: usize| {
            let mut value = json!(1);
            for _ in 0..levels {
                value = json!([value]);
            }
            json!({ "a": value })
        };
        assert!(refund(nest(MAX_INPUT_DEPTH - 1)).is_ok());
        assert!(matches!(
            refund(nest(MAX_INPUT_DEPTH)),
            Err(ActionError::Invalid(InvalidInput { kind: TooLarge, path: Some(p), message }))
                if p == "arguments" && message.contains("nest")
        ));
    }

    #[test]
    fn a_reserved_serde_json_key_in_arguments_is_refused() {
        let mut arguments = Map::new();
        arguments.insert("$serde_json::private::Number".into(), json!("12"));
        assert!(refund(Value::Object(arguments)).is_err());
    }

    #[test]
    fn ids_have_their_prefix_and_32_lowercase_hex_digits() {
        for (kind, prefix) in [
            (IdKind::Action, "act_"),
            (IdKind::Approval, "apr_"),
            (IdKind::Control, "ctr_"),
            (IdKind::Delegation, "dlg_"),
            (IdKind::Receipt, "rct_"),
            (IdKind::Snapshot, "snp_"),
            (IdKind::ScopedGrant, "sgr_"),
        ] {
            let id = new_id(kind).unwrap();
            let digits = id.strip_prefix(prefix).unwrap();
            assert_eq!(digits.len(), 32, "{id}");
            assert!(digits.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')));
            assert!(is_id(kind, &id));
        }
    }

    #[test]
    fn two_ids_differ() {
        assert_ne!(new_id(IdKind::Approval).unwrap(), new_id(IdKind::Approval).unwrap());
        let action = refund(json!({})).unwrap();
        assert!(is_id(IdKind::Action, &action.action_id));
    }

    #[test]
    fn is_id_refuses_other_shapes() {
        let good = "apr_0123456789abcdef0123456789abcdef";
        assert!(is_id(IdKind::Approval, good));
        assert!(!is_id(IdKind::Action, good));
        assert!(!is_id(IdKind::Approval, &good.to_uppercase()));
        assert!(!is_id(IdKind::Approval, "apr_0123456789ABCDEF0123456789abcdef"));
        assert!(!is_id(IdKind::Approval, "apr_0123456789abcdef0123456789abcde"));
        assert!(!is_id(IdKind::Approval, "apr_0123456789abcdef0123456789abcdef0"));
        assert!(!is_id(IdKind::Approval, "apr_0123456789abcdef0123456789abcdeg"));
        assert!(!is_id(IdKind::Approval, ""));
    }

    #[test]
    fn actions_round_trip_through_serde_json() {
        let action = refund(json!({"n": 1, "s": "x"})).unwrap();
        let text = serde_json::to_string(&action).unwrap();
        let back: Action = serde_json::from_str(&text).unwrap();
        assert_eq!(back, action);
        assert_eq!(back.hash().unwrap(), action.hash().unwrap());
    }
}
