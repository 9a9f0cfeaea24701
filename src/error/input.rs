//! What kind of invalid input a call was handed, for callers that branch on it. The message
//! says what was wrong and what to send instead; the kind is what code matches on (a binding's
//! `.kind`, a gateway's answer), and `path` names the offending field where the site knows it,
//! in the dotted form the canonical module writes (`arguments.items[3].price`,
//! `answer.approver`), so no caller reads the wording.

use crate::canonical::CanonicalError;

/// Invalid input: its kind, where it is (when known) and the message derived from what happened.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct InvalidInput {
    /// What a caller branches on.
    pub kind: InvalidInputKind,
    /// The field path of the offending value (`arguments.b`, `request.principal`), when known.
    pub path: Option<String>,
    /// What was wrong and what to do, in words (never a secret or an argument value).
    pub message: String,
}

impl std::fmt::Display for InvalidInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// The kinds of invalid input. Every kind fails closed: nothing was done with the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum InvalidInputKind {
    /// Not JSON, not UTF-8, the wrong type or shape, an unknown field or spelling, an id or
    /// name that does not have the form it must have.
    Malformed,
    /// A value with no canonical form: a float where floats are refused, a number beyond the
    /// range of a double, `NaN`, a lone UTF-16 surrogate, something that cannot be encoded.
    NotCanonical,
    /// Over a limit: `limits.*`, a hard size bound, nesting too deep, too many items.
    TooLarge,
    /// A required field or value is absent, empty or NULL.
    Missing,
    /// A value outside what it may be: a zero or negative duration, a count from 0 where it
    /// starts at 1, a time not in the future, a number beyond its ceiling.
    OutOfRange,
    /// A name that refers to nothing the caller may name (a gauge, a tool, an event kind).
    Unknown,
    /// Two inputs contradict: both of two exclusive fields, an option that applies only with
    /// another, a key given twice, an answer about another action.
    Conflict,
    /// The call is not possible in the state its subject is in: a permit that already
    /// reported, a hold that stands, an effect that moved on, a handle from before a fork.
    State,
    /// A host callback the call depends on (a precondition provider, a reconcile hook) failed
    /// or answered nothing usable; nothing was decided from it.
    HookFailed,
}

impl InvalidInputKind {
    /// The kind as error objects spell it (`"malformed"`, `"not_canonical"`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            InvalidInputKind::Malformed => "malformed",
            InvalidInputKind::NotCanonical => "not_canonical",
            InvalidInputKind::TooLarge => "too_large",
            InvalidInputKind::Missing => "missing",
            InvalidInputKind::OutOfRange => "out_of_range",
            InvalidInputKind::Unknown => "unknown",
            InvalidInputKind::Conflict => "conflict",
            InvalidInputKind::State => "state",
            InvalidInputKind::HookFailed => "hook_failed",
        }
    }
}

impl InvalidInput {
    /// Invalid input of `kind` with no known path.
    pub fn new(kind: InvalidInputKind, message: impl Into<String>) -> InvalidInput {
        InvalidInput { kind, path: None, message: message.into() }
    }

    /// Invalid input of `kind` at the field `path`.
    pub fn at(kind: InvalidInputKind, path: impl Into<String>, message: impl Into<String>) -> InvalidInput {
        InvalidInput { kind, path: Some(path.into()), message: message.into() }
    }

    /// The same fault with `prefix` put before its message (`"answer.approver: "`), kind and
    /// path kept.
    pub fn prefixed(mut self, prefix: &str) -> InvalidInput {
        self.message = format!("{prefix}{}", self.message);
        self
    }
}

impl InvalidInput {
    /// The same fault with its path's first member replaced by `root`: a principal's
    /// `principal.agent`, read under `request.by`, is `request.by.agent`.
    pub(crate) fn rerooted(mut self, root: &str) -> InvalidInput {
        self.path = Some(match self.path.as_deref().and_then(|path| path.split_once('.')) {
            Some((_, rest)) => format!("{root}.{rest}"),
            None => root.to_owned(),
        });
        self
    }
}

impl From<CanonicalError> for InvalidInput {
    fn from(error: CanonicalError) -> InvalidInput {
        let message = error.to_string();
        match error {
            CanonicalError::Float { path } | CanonicalError::BeyondDouble { path } => {
                InvalidInput::at(InvalidInputKind::NotCanonical, path, message)
            }
            CanonicalError::Parse { .. } => InvalidInput::new(InvalidInputKind::Malformed, message),
            CanonicalError::NoForm { .. } => InvalidInput::new(InvalidInputKind::NotCanonical, message),
            CanonicalError::TooDeep { path, .. } => match path {
                Some(path) => InvalidInput::at(InvalidInputKind::TooLarge, path, message),
                None => InvalidInput::new(InvalidInputKind::TooLarge, message),
            },
            // A key repeated at the top level has no path to give.
            CanonicalError::Duplicate { path, .. } if path.is_empty() => {
                InvalidInput::new(InvalidInputKind::Conflict, message)
            }
            CanonicalError::Duplicate { path, .. } => InvalidInput::at(InvalidInputKind::Conflict, path, message),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::InvalidInput;
    use super::InvalidInputKind::{self, *};
    use crate::canonical::{parse_json, to_canonical_string};

    #[test]
    fn every_kind_is_spelled_as_serde_spells_it() {
        let all = [Malformed, NotCanonical, TooLarge, Missing, OutOfRange, Unknown, Conflict, State, HookFailed];
        let mut seen = std::collections::HashSet::new();
        for kind in all {
            let serde = serde_json::to_value(kind).unwrap();
            assert_eq!(serde, kind.as_str(), "{kind:?}");
            assert!(seen.insert(kind.as_str()), "{kind:?} is spelled like another kind");
            assert_eq!(serde_json::from_value::<InvalidInputKind>(serde).unwrap(), kind);
        }
    }

    #[test]
    fn canonical_errors_keep_their_kind_and_path() {
        let parsed = |text: &str| InvalidInput::from(parse_json(text).expect_err(text));
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        let table: [(InvalidInput, InvalidInputKind, Option<&str>); 7] = [
            (parsed("{"), Malformed, None),
            (parsed("[1, NaN]"), NotCanonical, None),
            (parsed(r#""\ud800""#), NotCanonical, None),
            (parsed(&deep), TooLarge, None),
            (parsed(r#"{"a": {"k": 1, "k": 2}}"#), Conflict, Some("a.k")),
            (parsed(r#"{"": 1, "": 2}"#), Conflict, None),
            (
                InvalidInput::from(to_canonical_string(&serde_json::json!({"b": [0, 1.5]}), "arguments").unwrap_err()),
                NotCanonical,
                Some("arguments.b[1]"),
            ),
        ];
        for (index, (invalid, kind, path)) in table.into_iter().enumerate() {
            assert_eq!((invalid.kind, invalid.path.as_deref()), (kind, path), "row {index}: {invalid}");
        }
    }

    #[test]
    fn a_path_is_rerooted_and_a_prefix_keeps_kind_and_path() {
        let agent = InvalidInput::at(Missing, "principal.agent", "principal.agent must be a non-empty string");
        let moved = agent.clone().prefixed("answer.approver: ").rerooted("answer.approver");
        assert_eq!(moved.kind, Missing);
        assert_eq!(moved.path.as_deref(), Some("answer.approver.agent"));
        assert_eq!(moved.message, "answer.approver: principal.agent must be a non-empty string");
        let whole = InvalidInput::new(Malformed, "m").rerooted("request.by");
        assert_eq!(whole.path.as_deref(), Some("request.by"));
    }
}
