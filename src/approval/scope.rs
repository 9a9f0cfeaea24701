//! Scoped grants as pure checks: "approve this and the next N actions of this shape for T
//! minutes". The document opts in per approve rule (`approval: {scoped: {max_uses, max_minutes}}`,
//! [`ScopeLimits`]); an approver asks for a [`Scope`] when answering one request; [`check_scope`]
//! refuses anything past the document's caps or not anchored in the approved action, and keeps
//! the [`Shape`] a later action must have; [`applies`] says whether a grant covers a later
//! proposal (same action name, rule, policy hash and requester, and the shape), and
//! [`ScopedGrant::state`] whether it can still be spent at an instant.

use std::cmp::Ordering;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Number, Value};

use super::person::{same_person, Verified};
use crate::action::Principal;
use crate::clock::{Micros, MICROS_PER_SECOND};
use crate::error::Error;

/// The most further uses a document may let one scoped grant have.
pub const MAX_SCOPE_USES: u32 = 1000;
/// The longest a document may let one scoped grant last, in minutes (a day).
pub const MAX_SCOPE_MINUTES: u32 = 1440;
/// The most argument pointers one scope may name (fixed and bounded together).
pub const MAX_SCOPE_POINTERS: usize = 32;
/// The longest argument pointer accepted, in bytes.
pub const MAX_POINTER_BYTES: usize = 256;
/// The action name a scoped grant's own receipt carries.
pub const SCOPED_GRANT_ACTION: &str = "warden.approval.scoped_grant";
/// The action name a revocation's own receipt carries.
pub const SCOPED_REVOKE_ACTION: &str = "warden.approval.scoped_revoke";
/// The agent a scoped grant's and a revocation's receipts name (the person is their user).
pub const SCOPED_AGENT: &str = "warden-approval";

/// What the document lets a scoped grant made under one approve rule reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScopeLimits {
    /// The most further actions one grant may cover (1..=[`MAX_SCOPE_USES`]).
    pub max_uses: u32,
    /// The longest one grant may last, in minutes (1..=[`MAX_SCOPE_MINUTES`]).
    pub max_minutes: u32,
}

impl ScopeLimits {
    /// Both caps in range, or the reason naming the field.
    pub fn new(max_uses: u32, max_minutes: u32) -> Result<ScopeLimits, String> {
        if !(1..=MAX_SCOPE_USES).contains(&max_uses) {
            return Err(format!("'max_uses' must be 1..={MAX_SCOPE_USES}, got {max_uses}"));
        }
        if !(1..=MAX_SCOPE_MINUTES).contains(&max_minutes) {
            return Err(format!("'max_minutes' must be 1..={MAX_SCOPE_MINUTES}, got {max_minutes}"));
        }
        Ok(ScopeLimits { max_uses, max_minutes })
    }

    /// `{max_uses, max_minutes}`, as the canonical policy holds it.
    pub fn to_json(&self) -> Value {
        serde_json::json!({"max_uses": self.max_uses, "max_minutes": self.max_minutes})
    }

    /// The limits as the canonical policy holds them; `None` for anything else.
    pub fn from_json(value: &Value) -> Option<ScopeLimits> {
        let field = |name: &str| value.get(name)?.as_u64().and_then(|n| u32::try_from(n).ok());
        ScopeLimits::new(field("max_uses")?, field("max_minutes")?).ok()
    }
}

/// What an approver asks for with a grant: how many further actions, for how long, and their
/// shape. Bounds are JSON number texts (`5000`, `49.5`), compared exactly.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scope {
    /// How many further actions the grant covers (beyond the approved one).
    pub uses: u32,
    /// How long it lasts from the grant, in minutes.
    pub minutes: u32,
    /// JSON pointers into the arguments whose values must equal the approved action's.
    pub fixed: Vec<String>,
    /// JSON pointers to numeric arguments, each with the bound it must not exceed.
    pub at_most: Vec<(String, String)>,
}

/// The fields a scope given as JSON may have.
pub const SCOPE_FIELDS: [&str; 4] = ["uses", "minutes", "fixed", "at_most"];

impl Scope {
    /// A scope given as JSON (the C ABI, the bindings, the operator's approve tool): `{"uses":
    /// int, "minutes": int, "fixed": [pointer, …], "at_most": {pointer: number, …}}`, `fixed` and
    /// `at_most` optional. Refused, naming the field: not an object, an unknown field, `uses` or
    /// `minutes` missing or not a whole number, a pointer that is not a string, a bound that is
    /// not a JSON number. The caps and the pointers are [`check_scope`]'s.
    pub fn from_json(value: &Value) -> Result<Scope, Error> {
        let Value::Object(scope) = value else {
            return Err(refuse("scope must be an object {uses, minutes, fixed, at_most}".into()));
        };
        if let Some(unknown) = scope.keys().find(|key| !SCOPE_FIELDS.contains(&key.as_str())) {
            return Err(refuse(format!(
                "scope has no field {unknown:?}; its fields are uses, minutes, fixed, at_most"
            )));
        }
        let whole = |name: &str| {
            scope
                .get(name)
                .and_then(Value::as_u64)
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| refuse(format!("scope.{name} must be an integer")))
        };
        let (uses, minutes) = (whole("uses")?, whole("minutes")?);
        let fixed = match scope.get("fixed") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .map(|item| item.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| refuse("scope.fixed must be a list of JSON pointers".into()))?,
            Some(_) => return Err(refuse("scope.fixed must be a list of JSON pointers".into())),
        };
        let at_most = match scope.get("at_most") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Object(bounds)) => bounds
                .iter()
                .map(|(pointer, bound)| match bound {
                    Value::Number(number) => Some((pointer.clone(), number.to_string())),
                    _ => None,
                })
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| refuse("scope.at_most maps JSON pointers to numbers".into()))?,
            Some(_) => return Err(refuse("scope.at_most maps JSON pointers to numbers".into())),
        };
        Ok(Scope { uses, minutes, fixed, at_most })
    }

    /// `{uses, minutes, fixed, at_most}` as records and receipts show it.
    pub fn to_json(&self) -> Value {
        let at_most: Map<String, Value> =
            self.at_most.iter().map(|(pointer, bound)| (pointer.clone(), Value::String(bound.clone()))).collect();
        serde_json::json!({"uses": self.uses, "minutes": self.minutes, "fixed": self.fixed, "at_most": at_most})
    }
}

/// The shape a later action must have, as a grant keeps it: each fixed pointer with the approved
/// action's canonical value there, and each bounded pointer with its bound's number text.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shape {
    /// (pointer, canonical JSON text of the approved action's value).
    pub fixed: Vec<(String, String)>,
    /// (pointer, the bound as JSON number text).
    pub at_most: Vec<(String, String)>,
}

/// How a scoped grant ended early.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrantRevocation {
    /// Who revoked it.
    pub by: String,
    /// Why.
    pub reason: String,
    /// When.
    pub at: Micros,
}

/// One scoped grant, as stored: made by the answer that granted `approval_id`, spent one use
/// per later action it covers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScopedGrant {
    /// `sgr_` + 32 lowercase hex digits.
    pub grant_id: String,
    /// The approval request whose answer made it.
    pub approval_id: String,
    /// The action name it covers.
    pub action_name: String,
    /// The rule that asked (`rule[N]` or `decision`).
    pub rule: String,
    /// The hash of the document that asked.
    pub policy_hash: String,
    /// Who proposed the approved action; only that requester's proposals are covered.
    pub requested_by: Principal,
    /// The requester's verified identity, when there was one.
    pub requester_identity: Option<Verified>,
    /// Who granted it, as a label.
    pub approver: String,
    /// What the host verified about the approver, if anything.
    pub approver_verified: Option<Verified>,
    /// What the approver asked for.
    pub scope: Scope,
    /// What a later action must look like.
    pub shape: Shape,
    /// Uses not yet spent.
    pub uses_left: u32,
    /// When it was made.
    pub granted_at: Micros,
    /// The last instant it may be spent.
    pub expires_at: Micros,
    /// Set when it was revoked.
    pub revoked: Option<GrantRevocation>,
}

/// Where a scoped grant stands at an instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrantState {
    /// It may be spent.
    Live,
    /// Every use was spent.
    UsedUp,
    /// Its time ran out.
    Expired,
    /// Someone revoked it.
    Revoked,
}

impl GrantState {
    /// The state as records spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            GrantState::Live => "live",
            GrantState::UsedUp => "used_up",
            GrantState::Expired => "expired",
            GrantState::Revoked => "revoked",
        }
    }
}

impl ScopedGrant {
    /// Revoked first, then used up, then expired (by `now`), else live.
    pub fn state(&self, now: Micros) -> GrantState {
        if self.revoked.is_some() {
            GrantState::Revoked
        } else if self.uses_left == 0 {
            GrantState::UsedUp
        } else if now > self.expires_at {
            GrantState::Expired
        } else {
            GrantState::Live
        }
    }

    /// The record as `warden grants list`, `inspect` and the bindings show it.
    pub fn to_json(&self, now: Micros) -> Value {
        let fixed: Map<String, Value> = self
            .shape
            .fixed
            .iter()
            .map(|(pointer, text)| (pointer.clone(), crate::canonical::parse_json(text).unwrap_or(Value::Null)))
            .collect();
        serde_json::json!({
            "grant_id": self.grant_id,
            "approval_id": self.approval_id,
            "action": self.action_name,
            "rule": self.rule,
            "policy_hash": self.policy_hash,
            "requested_by": {"agent": self.requested_by.agent, "user": self.requested_by.user},
            "approver": self.approver,
            "approver_verified": self.approver_verified.is_some(),
            "scope": self.scope.to_json(),
            "fixed_values": fixed,
            "uses_left": self.uses_left,
            "granted_at": crate::clock::render(self.granted_at),
            "expires_at": crate::clock::render(self.expires_at),
            "state": self.state(now).as_str(),
            "revoked": self.revoked.as_ref().map(|r| serde_json::json!({
                "by": r.by, "reason": r.reason, "at": crate::clock::render(r.at),
            })),
        })
    }
}

fn refuse(message: String) -> Error {
    Error::invalid(crate::error::InvalidInputKind::Malformed, message)
}

/// The value `pointer` (RFC 6901, `/customer_id`, `/refund/amount`) names in `arguments`; a
/// pointer must name at least one argument (the empty pointer names them all and is refused).
pub fn lookup<'a>(arguments: &'a Map<String, Value>, pointer: &str) -> Option<&'a Value> {
    let rest = pointer.strip_prefix('/')?;
    let (head, tail) = rest.find('/').map_or((rest, ""), |at| rest.split_at(at));
    let head = head.replace("~1", "/").replace("~0", "~");
    arguments.get(&head)?.pointer(tail)
}

/// A bound's text as a JSON number, or `None`.
fn number(text: &str) -> Option<Number> {
    match serde_json::from_str::<Value>(text.trim()) {
        Ok(Value::Number(number)) => Some(number),
        _ => None,
    }
}

/// Check what an approver asks for against the document's caps (`limits`; `None`: the rule lets
/// no scoped grant be made) and the approved action's arguments, and keep the shape later
/// actions must have. Refused, naming the field: `uses` or `minutes` 0 or past the cap, a
/// pointer malformed, absent from the approved action or listed twice, a bound that is not a
/// number, a bounded argument that is not a number, a bound below the approved action's value.
pub fn check_scope<'s>(
    approved: &Map<String, Value>,
    scope: &'s Scope,
    limits: Option<ScopeLimits>,
) -> Result<Shape, Error> {
    let Some(limits) = limits else {
        return Err(refuse(
            "the rule that asked does not allow scoped grants (its document sets no approval.scoped); grant this \
             request alone"
                .into(),
        ));
    };
    if !(1..=limits.max_uses).contains(&scope.uses) {
        return Err(refuse(format!(
            "scope uses must be 1..={} (the document's approval.scoped.max_uses), got {}",
            limits.max_uses, scope.uses
        )));
    }
    if !(1..=limits.max_minutes).contains(&scope.minutes) {
        return Err(refuse(format!(
            "scope minutes must be 1..={} (the document's approval.scoped.max_minutes), got {}",
            limits.max_minutes, scope.minutes
        )));
    }
    let count = scope.fixed.len() + scope.at_most.len();
    if count > MAX_SCOPE_POINTERS {
        return Err(refuse(format!("a scope names at most {MAX_SCOPE_POINTERS} arguments, got {count}")));
    }
    let mut seen: Vec<&'s str> = Vec::with_capacity(count);
    let mut anchored = |field: &str, pointer: &'s str| -> Result<(), Error> {
        if pointer.len() > MAX_POINTER_BYTES || !pointer.starts_with('/') || pointer.chars().any(char::is_control) {
            return Err(refuse(format!(
                "scope {field} {pointer:?} is not an argument pointer such as /customer_id (at most \
                 {MAX_POINTER_BYTES} bytes, no control characters)"
            )));
        }
        if seen.contains(&pointer) {
            return Err(refuse(format!("scope {field} {pointer} is listed twice")));
        }
        seen.push(pointer);
        Ok(())
    };
    let mut shape = Shape::default();
    for pointer in &scope.fixed {
        anchored("fixed", pointer)?;
        let Some(value) = lookup(approved, pointer) else {
            return Err(refuse(format!("scope fixed {pointer} is not an argument of the approved action")));
        };
        let text = crate::canonical::to_canonical_string_with(value, "", crate::canonical::Floats::Rfc8785)
            .map_err(|e| refuse(format!("scope fixed {pointer}: {e}")))?;
        shape.fixed.push((pointer.clone(), text));
    }
    for (pointer, bound) in &scope.at_most {
        anchored("at_most", pointer)?;
        let Some(bound_number) = number(bound) else {
            return Err(refuse(format!("scope at_most {pointer}: the bound {bound:?} is not a number")));
        };
        let Some(value) = lookup(approved, pointer) else {
            return Err(refuse(format!("scope at_most {pointer} is not an argument of the approved action")));
        };
        let Value::Number(value) = value else {
            return Err(refuse(format!("scope at_most {pointer} is not a number in the approved action")));
        };
        if !matches!(crate::condition::compare_numbers(value, &bound_number), Some(Ordering::Less | Ordering::Equal)) {
            return Err(refuse(format!(
                "scope at_most {pointer}: the bound {bound} is below the approved action's own value {value}"
            )));
        }
        shape.at_most.push((pointer.clone(), bound_number.to_string()));
    }
    Ok(shape)
}

/// Whether `candidate`'s arguments have `shape`: every fixed pointer present with the identical
/// canonical value, every bounded pointer a number at most its bound (compared exactly).
pub fn matches(shape: &Shape, candidate: &Map<String, Value>) -> bool {
    let fixed = shape.fixed.iter().all(|(pointer, text)| {
        lookup(candidate, pointer)
            .and_then(|value| {
                crate::canonical::to_canonical_string_with(value, "", crate::canonical::Floats::Rfc8785).ok()
            })
            .is_some_and(|value| &value == text)
    });
    fixed
        && shape.at_most.iter().all(|(pointer, bound)| match (lookup(candidate, pointer), number(bound)) {
            (Some(Value::Number(value)), Some(bound)) => {
                matches!(crate::condition::compare_numbers(value, &bound), Some(Ordering::Less | Ordering::Equal))
            }
            _ => false,
        })
}

/// A later proposal, as a scoped grant is checked against it.
#[derive(Debug, Clone, Copy)]
pub struct Candidate<'a> {
    /// Its action name.
    pub action_name: &'a str,
    /// The rule that decided `approve` for it (`rule[N]` or `decision`).
    pub rule: &'a str,
    /// The hash of the document that decided.
    pub policy_hash: Option<&'a str>,
    /// Who proposes it.
    pub principal: &'a Principal,
    /// The proposer's verified identity, if any.
    pub identity: Option<&'a Verified>,
    /// Its arguments.
    pub arguments: &'a Map<String, Value>,
}

/// Whether `grant` covers `candidate` at `now`: live, the same action name, rule and policy hash,
/// the same requester (the same agent, and one person by `same_person`), and the shape.
pub fn applies(grant: &ScopedGrant, candidate: &Candidate<'_>, now: Micros) -> bool {
    grant.state(now) == GrantState::Live
        && grant.action_name == candidate.action_name
        && grant.rule == candidate.rule
        && candidate.policy_hash == Some(grant.policy_hash.as_str())
        && grant.requested_by.agent == candidate.principal.agent
        && same_person(&grant.requested_by, grant.requester_identity.as_ref(), candidate.principal, candidate.identity)
            .is_some()
        && matches(&grant.shape, candidate.arguments)
}

/// The last instant a grant made at `now` for `minutes` may be spent.
pub fn expires_at(now: Micros, minutes: u32) -> Micros {
    now.saturating_add(i64::from(minutes).saturating_mul(60 * MICROS_PER_SECOND))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            _ => unreachable!("an object"),
        }
    }

    fn approved() -> Map<String, Value> {
        args(serde_json::json!({"customer_id": "cus_1", "amount": 4000, "meta": {"a/b": 1, "t~": [1, 2]}, "note": "x"}))
    }

    fn limits() -> Option<ScopeLimits> {
        Some(ScopeLimits { max_uses: 9, max_minutes: 30 })
    }

    fn scope(uses: u32, minutes: u32, fixed: &[&str], at_most: &[(&str, &str)]) -> Scope {
        Scope {
            uses,
            minutes,
            fixed: fixed.iter().map(|p| (*p).to_owned()).collect(),
            at_most: at_most.iter().map(|(p, b)| ((*p).to_owned(), (*b).to_owned())).collect(),
        }
    }

    #[test]
    fn document_limits_are_refused_outside_their_ranges() {
        let table: [(u32, u32, Option<&str>); 8] = [
            (0, 1, Some("'max_uses' must be 1..=1000, got 0")),
            (1, 1, None),
            (MAX_SCOPE_USES, MAX_SCOPE_MINUTES, None),
            (MAX_SCOPE_USES + 1, 1, Some("'max_uses' must be 1..=1000, got 1001")),
            (1, 0, Some("'max_minutes' must be 1..=1440, got 0")),
            (1, MAX_SCOPE_MINUTES + 1, Some("'max_minutes' must be 1..=1440, got 1441")),
            (5, 7, None),
            (u32::MAX, 1, Some("'max_uses'")),
        ];
        for (uses, minutes, refusal) in table {
            match (ScopeLimits::new(uses, minutes), refusal) {
                (Ok(limits), None) => {
                    assert_eq!((limits.max_uses, limits.max_minutes), (uses, minutes));
                    assert_eq!(ScopeLimits::from_json(&limits.to_json()), Some(limits));
                }
                (Err(message), Some(wanted)) => assert!(message.contains(wanted), "{message}"),
                (got, wanted) => panic!("({uses}, {minutes}): {got:?}, wanted {wanted:?}"),
            }
        }
        for bad in [
            serde_json::json!({"max_uses": 0, "max_minutes": 1}),
            serde_json::json!({"max_uses": 1}),
            serde_json::json!({"max_minutes": 1}),
            serde_json::json!({"max_uses": "1", "max_minutes": 1}),
            serde_json::json!({"max_uses": 1, "max_minutes": 1441}),
            serde_json::json!({"max_uses": 4_294_967_297u64, "max_minutes": 1}),
            serde_json::json!(null),
        ] {
            assert_eq!(ScopeLimits::from_json(&bad), None, "{bad}");
        }
    }

    /// (scope, limits, the refusal's words or None when accepted)
    #[test]
    fn check_scope_refuses_each_way_past_the_document_or_the_approved_action() {
        let table: Vec<(Scope, Option<ScopeLimits>, Option<&str>)> = vec![
            (scope(1, 1, &[], &[]), None, Some("does not allow scoped grants")),
            (
                scope(0, 30, &[], &[]),
                limits(),
                Some("scope uses must be 1..=9 (the document's approval.scoped.max_uses), got 0"),
            ),
            (scope(1, 30, &[], &[]), limits(), None),
            (scope(9, 30, &[], &[]), limits(), None),
            (scope(10, 30, &[], &[]), limits(), Some("scope uses must be 1..=9")),
            (
                scope(9, 0, &[], &[]),
                limits(),
                Some("scope minutes must be 1..=30 (the document's approval.scoped.max_minutes), got 0"),
            ),
            (scope(9, 1, &[], &[]), limits(), None),
            (scope(9, 31, &[], &[]), limits(), Some("scope minutes must be 1..=30")),
            (scope(1, 1, &["/customer_id"], &[("/amount", "5000")]), limits(), None),
            (
                scope(1, 1, &["customer_id"], &[]),
                limits(),
                Some("scope fixed \"customer_id\" is not an argument pointer"),
            ),
            (scope(1, 1, &[""], &[]), limits(), Some("is not an argument pointer")),
            (scope(1, 1, &["/cus\ntomer"], &[]), limits(), Some("is not an argument pointer")),
            (
                scope(1, 1, &[], &[("amount", "5000")]),
                limits(),
                Some("scope at_most \"amount\" is not an argument pointer"),
            ),
            (
                scope(1, 1, &["/customer"], &[]),
                limits(),
                Some("scope fixed /customer is not an argument of the approved action"),
            ),
            (
                scope(1, 1, &[], &[("/total", "5")]),
                limits(),
                Some("scope at_most /total is not an argument of the approved action"),
            ),
            (
                scope(1, 1, &["/customer_id", "/customer_id"], &[]),
                limits(),
                Some("scope fixed /customer_id is listed twice"),
            ),
            (
                scope(1, 1, &["/amount"], &[("/amount", "5000")]),
                limits(),
                Some("scope at_most /amount is listed twice"),
            ),
            (
                scope(1, 1, &[], &[("/note", "5")]),
                limits(),
                Some("scope at_most /note is not a number in the approved action"),
            ),
            (scope(1, 1, &[], &[("/amount", "lots")]), limits(), Some("the bound \"lots\" is not a number")),
            (scope(1, 1, &[], &[("/amount", "\"5000\"")]), limits(), Some("is not a number")),
            (
                scope(1, 1, &[], &[("/amount", "3999")]),
                limits(),
                Some("the bound 3999 is below the approved action's own value 4000"),
            ),
            (scope(1, 1, &[], &[("/amount", "3999.99")]), limits(), Some("is below")),
            (scope(1, 1, &[], &[("/amount", "4000")]), limits(), None),
            (scope(1, 1, &[], &[("/amount", "4000.0")]), limits(), None),
            (scope(1, 1, &[], &[("/amount", "4e3")]), limits(), None),
            (scope(1, 1, &["/meta/a~1b", "/meta/t~0/1"], &[]), limits(), None),
            (scope(1, 1, &["/meta/a/b"], &[]), limits(), Some("is not an argument of the approved action")),
        ];
        for (index, (scope, limits, refusal)) in table.into_iter().enumerate() {
            match (check_scope(&approved(), &scope, limits), refusal) {
                (Ok(_), None) => {}
                (Err(Error::InvalidInput(crate::error::InvalidInput { message, .. })), Some(wanted)) => {
                    assert!(message.contains(wanted), "row {index}: {message}");
                }
                (got, wanted) => panic!("row {index}: {got:?}, wanted {wanted:?}"),
            }
        }
    }

    #[test]
    fn too_many_pointers_are_refused_and_a_long_pointer_too() {
        let many: Vec<String> = (0..=MAX_SCOPE_POINTERS).map(|i| format!("/a{i}")).collect();
        let mut arguments = Map::new();
        for pointer in &many {
            arguments.insert(pointer[1..].to_owned(), Value::from(1));
        }
        let mut asked = scope(1, 1, &[], &[]);
        asked.fixed = many[..MAX_SCOPE_POINTERS].to_vec();
        assert!(check_scope(&arguments, &asked, limits()).is_ok());
        asked.fixed = many.clone();
        let refused = check_scope(&arguments, &asked, limits()).unwrap_err().to_string();
        assert!(refused.contains("at most 32 arguments, got 33"), "{refused}");
        asked.fixed = many[..MAX_SCOPE_POINTERS - 1].to_vec();
        asked.at_most = vec![("/a32".into(), "1".into())];
        assert!(check_scope(&arguments, &asked, limits()).is_ok());
        asked.at_most.push(("/a31".into(), "1".into()));
        assert!(check_scope(&arguments, &asked, limits()).is_err());
        let long = format!("/{}", "k".repeat(MAX_POINTER_BYTES - 1));
        arguments.insert(long[1..].to_owned(), Value::from(1));
        assert!(check_scope(&arguments, &scope(1, 1, &[long.as_str()], &[]), limits()).is_ok());
        let longer = format!("/{}", "k".repeat(MAX_POINTER_BYTES));
        arguments.insert(longer[1..].to_owned(), Value::from(1));
        assert!(check_scope(&arguments, &scope(1, 1, &[longer.as_str()], &[]), limits()).is_err());
    }

    #[test]
    fn the_shape_keeps_the_approved_values_and_the_bounds() {
        let shape =
            check_scope(&approved(), &scope(2, 3, &["/customer_id", "/meta"], &[("/amount", "5000.50")]), limits())
                .unwrap();
        assert_eq!(
            shape,
            Shape {
                fixed: vec![
                    ("/customer_id".into(), "\"cus_1\"".into()),
                    ("/meta".into(), r#"{"a/b":1,"t~":[1,2]}"#.into())
                ],
                at_most: vec![("/amount".into(), "5000.50".into())],
            }
        );
    }

    /// (candidate arguments, inside the shape?) for fixed /customer_id and /amount <= 5000.
    #[test]
    fn matches_is_exact_on_fixed_values_and_bounds() {
        let shape =
            check_scope(&approved(), &scope(1, 1, &["/customer_id"], &[("/amount", "5000")]), limits()).unwrap();
        let table = [
            (serde_json::json!({"customer_id": "cus_1", "amount": 4000}), true),
            (serde_json::json!({"customer_id": "cus_1", "amount": 5000}), true),
            (serde_json::json!({"customer_id": "cus_1", "amount": 5000.0}), true),
            (serde_json::json!({"customer_id": "cus_1", "amount": 0}), true),
            (serde_json::json!({"customer_id": "cus_1", "amount": -7, "other": true}), true),
            (serde_json::json!({"customer_id": "cus_1", "amount": 5001}), false),
            (serde_json::json!({"customer_id": "cus_1", "amount": 5_000.000_001}), false),
            (serde_json::json!({"customer_id": "cus_1", "amount": "4000"}), false),
            (serde_json::json!({"customer_id": "cus_1"}), false),
            (serde_json::json!({"customer_id": "cus_2", "amount": 4000}), false),
            (serde_json::json!({"customer_id": ["cus_1"], "amount": 4000}), false),
            (serde_json::json!({"amount": 4000}), false),
        ];
        for (candidate, inside) in table {
            assert_eq!(matches(&shape, &args(candidate.clone())), inside, "{candidate}");
        }
        // A bound far past f64's exact integers still compares exactly.
        let big = Shape { fixed: vec![], at_most: vec![("/n".into(), "9007199254740993".into())] };
        assert!(matches(&big, &args(serde_json::json!({"n": 9_007_199_254_740_993u64}))));
        assert!(!matches(&big, &args(serde_json::json!({"n": 9_007_199_254_740_994u64}))));
        // A damaged bound matches nothing.
        let damaged = Shape { fixed: vec![], at_most: vec![("/n".into(), "x".into())] };
        assert!(!matches(&damaged, &args(serde_json::json!({"n": 1}))));
        // The empty shape covers any arguments.
        assert!(matches(&Shape::default(), &args(serde_json::json!({"n": 1}))));
    }

    fn principal(agent: &str, user: Option<&str>) -> Principal {
        Principal { agent: agent.into(), user: user.map(str::to_owned) }
    }

    fn grant() -> ScopedGrant {
        let asked = scope(3, 10, &["/customer_id"], &[("/amount", "5000")]);
        ScopedGrant {
            grant_id: format!("sgr_{}", "0".repeat(32)),
            approval_id: format!("apr_{}", "0".repeat(32)),
            action_name: "stripe.refund".into(),
            rule: "rule[1]".into(),
            policy_hash: "sha256:p".into(),
            requested_by: principal("support-bot", Some("ada")),
            requester_identity: None,
            approver: "cli:bob".into(),
            approver_verified: None,
            shape: check_scope(&approved(), &asked, limits()).unwrap(),
            scope: asked,
            uses_left: 3,
            granted_at: 1_000,
            expires_at: expires_at(1_000, 10),
            revoked: None,
        }
    }

    #[test]
    fn a_grant_is_live_until_its_expiry_instant_and_not_a_microsecond_past() {
        let grant = grant();
        assert_eq!(grant.expires_at, 1_000 + 10 * 60 * MICROS_PER_SECOND);
        assert_eq!(grant.state(grant.granted_at), GrantState::Live);
        assert_eq!(grant.state(grant.expires_at), GrantState::Live);
        assert_eq!(grant.state(grant.expires_at + 1), GrantState::Expired);
        let mut one = grant.clone();
        one.uses_left = 1;
        assert_eq!(one.state(one.expires_at), GrantState::Live);
        one.uses_left = 0;
        assert_eq!(one.state(one.granted_at), GrantState::UsedUp);
        let mut revoked = grant.clone();
        revoked.revoked = Some(GrantRevocation { by: "carol".into(), reason: "done".into(), at: 2_000 });
        assert_eq!(revoked.state(revoked.granted_at), GrantState::Revoked);
        revoked.uses_left = 0;
        assert_eq!(revoked.state(revoked.expires_at + 1), GrantState::Revoked);
        let mut lapsed = grant;
        lapsed.uses_left = 0;
        assert_eq!(lapsed.state(lapsed.expires_at + 1), GrantState::UsedUp);
        assert_eq!(expires_at(i64::MAX - 5, 1), i64::MAX);
        let states = [GrantState::Live, GrantState::UsedUp, GrantState::Expired, GrantState::Revoked];
        let names: Vec<&str> = states.iter().map(|s| s.as_str()).collect();
        assert_eq!(names, ["live", "used_up", "expired", "revoked"]);
    }

    /// Each way a later proposal can differ from the approved one's: only the first applies.
    #[test]
    fn applies_needs_the_same_name_rule_policy_requester_and_shape() {
        let grant = grant();
        let inside = args(serde_json::json!({"customer_id": "cus_1", "amount": 4500}));
        let outside = args(serde_json::json!({"customer_id": "cus_2", "amount": 4500}));
        let ada = principal("support-bot", Some("ada"));
        let ada_elsewhere = principal("other-bot", Some("ada"));
        let eve = principal("support-bot", Some("eve"));
        let base = Candidate {
            action_name: "stripe.refund",
            rule: "rule[1]",
            policy_hash: Some("sha256:p"),
            principal: &ada,
            identity: None,
            arguments: &inside,
        };
        let now = grant.granted_at;
        assert!(applies(&grant, &base, now));
        assert!(applies(&grant, &base, grant.expires_at));
        let table: Vec<(&str, Candidate<'_>, Micros)> = vec![
            ("another action", Candidate { action_name: "stripe.charge", ..base }, now),
            ("another rule", Candidate { rule: "rule[0]", ..base }, now),
            ("another policy", Candidate { policy_hash: Some("sha256:q"), ..base }, now),
            ("no policy", Candidate { policy_hash: None, ..base }, now),
            ("another agent", Candidate { principal: &ada_elsewhere, ..base }, now),
            ("another user", Candidate { principal: &eve, ..base }, now),
            ("outside the shape", Candidate { arguments: &outside, ..base }, now),
            ("expired", base, grant.expires_at + 1),
        ];
        for (why, candidate, at) in table {
            assert!(!applies(&grant, &candidate, at), "{why}");
        }
        let mut used = grant.clone();
        used.uses_left = 0;
        assert!(!applies(&used, &base, now), "used up");
        let mut revoked = grant;
        revoked.revoked = Some(GrantRevocation { by: "c".into(), reason: "r".into(), at: now });
        assert!(!applies(&revoked, &base, now), "revoked");
    }

    #[test]
    fn records_show_the_scope_and_the_state() {
        let grant = grant();
        let shown = grant.to_json(grant.granted_at);
        assert_eq!(shown["state"], "live");
        assert_eq!(shown["uses_left"], 3);
        assert_eq!(shown["fixed_values"], serde_json::json!({"/customer_id": "cus_1"}));
        assert_eq!(
            shown["scope"],
            serde_json::json!({"uses": 3, "minutes": 10, "fixed": ["/customer_id"], "at_most": {"/amount": "5000"}})
        );
        assert_eq!(grant.to_json(grant.expires_at + 1)["state"], "expired");
    }

    #[test]
    fn a_scope_given_as_json_is_read_whole_or_refused_naming_the_field() {
        let read = Scope::from_json(&serde_json::json!(
            {"uses": 9, "minutes": 30, "fixed": ["/customer_id"], "at_most": {"/amount": 5000, "/fee": 2.5}}
        ));
        assert_eq!(
            read.ok(),
            Some(scope(9, 30, &["/customer_id"], &[("/amount", "5000"), ("/fee", "2.5")])),
            "every field, bounds as their JSON number text"
        );
        let bare = Scope::from_json(&serde_json::json!({"uses": 1, "minutes": 2, "fixed": null}));
        assert_eq!(bare.ok(), Some(scope(1, 2, &[], &[])));
        for (value, says) in [
            (serde_json::json!([1]), "scope must be an object"),
            (serde_json::json!({"uses": 1, "minutes": 1, "max": 2}), "scope has no field \"max\""),
            (serde_json::json!({"minutes": 1}), "scope.uses must be an integer"),
            (serde_json::json!({"uses": 1}), "scope.minutes must be an integer"),
            (serde_json::json!({"uses": -1, "minutes": 1}), "scope.uses must be an integer"),
            (serde_json::json!({"uses": 1.5, "minutes": 1}), "scope.uses must be an integer"),
            (serde_json::json!({"uses": 1, "minutes": 4_294_967_296_u64}), "scope.minutes must be an integer"),
            (serde_json::json!({"uses": 1, "minutes": 1, "fixed": "/a"}), "scope.fixed must be a list"),
            (serde_json::json!({"uses": 1, "minutes": 1, "fixed": [1]}), "scope.fixed must be a list"),
            (serde_json::json!({"uses": 1, "minutes": 1, "at_most": {"/a": "5"}}), "scope.at_most maps"),
            (serde_json::json!({"uses": 1, "minutes": 1, "at_most": ["/a"]}), "scope.at_most maps"),
        ] {
            match Scope::from_json(&value) {
                Err(Error::InvalidInput(refused)) => assert!(refused.message.contains(says), "{value}: {refused}"),
                other => panic!("{value}: {other:?}"),
            }
        }
    }
}
