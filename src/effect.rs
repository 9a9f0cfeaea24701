//! The effect state machine as pure planners: the retry table, lease rules, outcomes and
//! resolution. Every store decides here and then only writes, so the rule that refuses a
//! duplicate lives in exactly one place.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::clock::{Micros, MICROS_PER_SECOND};
use crate::error::{DuplicateState, Error, InvalidInput, InvalidInputKind};

pub use crate::effect_state::EffectState;

/// SPEC: a reservation is held for five minutes unless the call says otherwise.
pub const DEFAULT_LEASE: Micros = 5 * 60 * MICROS_PER_SECOND;

/// Domain tag inside the idempotency token's canonical input (ctrlrun's, so tokens agree).
pub const IDEMPOTENCY_SCHEMA: &str = "ctrlrun.idempotency/v1";

/// Recorded on a record whose holder disappeared with its lease still held.
pub const LEASE_EXPIRED: &str = "lease expired: the worker holding this effect never finished";

/// An executor's result as stored: plain JSON text, outside any hashed content. `canonical`
/// says whether the text is the canonical form; a result that has none (a float, say) is
/// still kept, in serde_json's text form, because encoding must never turn a successful effect
/// into an unknown one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredResult {
    /// The result's JSON text (the marked form when it could not be stored as itself).
    pub json: String,
    /// Whether `json` is the canonical form of the result.
    pub canonical: bool,
}

// The bounds live with the other limits (a leaf module, so `limits` depends on nothing here).
pub use crate::limits::{MAX_OUTCOME_MESSAGE, MAX_RESULT_BYTES, RESULT_EXCERPT_BYTES};

/// What a binding hands `warden_permit_commit*` for a successful call: JSON text, or text that
/// describes a value with no JSON form (a Python object's `repr`, say), marked as such.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultForm {
    /// UTF-8 JSON text.
    Json,
    /// Text describing a value with no JSON form, marked as such when stored.
    Text,
}

impl ResultForm {
    /// The C parameter that carries it, for error messages.
    pub fn parameter(self) -> &'static str {
        match self {
            ResultForm::Json => "result_json",
            ResultForm::Text => "text",
        }
    }
}

/// Why a result is stored as the marked form rather than as itself: the value of its
/// `warden_result` member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Marked {
    /// Over `limits.max_result_bytes`.
    Truncated,
    /// Nested deeper than [`crate::canonical::MAX_INPUT_DEPTH`].
    TooDeep,
    /// JSON with no canonical form (a float).
    NotCanonical,
    /// Not JSON: text the binding marked as such, or bytes that do not parse.
    Text,
}

impl Marked {
    /// The `warden_result` member's value.
    pub fn as_str(self) -> &'static str {
        match self {
            Marked::Truncated => "truncated",
            Marked::TooDeep => "too_deep",
            Marked::NotCanonical => "not_canonical",
            Marked::Text => "text",
        }
    }
}

impl StoredResult {
    /// `value` stored within the default `MAX_RESULT_BYTES` (see `from_value_within`).
    pub fn from_value(value: &serde_json::Value) -> StoredResult {
        Self::from_value_within(value, MAX_RESULT_BYTES)
    }

    /// The result, stored whole when it is canonical JSON within the depth and `max_bytes`,
    /// else as the marked form of its text. Never fails: encoding must never turn a successful
    /// effect into an unknown one.
    pub fn from_value_within(value: &serde_json::Value, max_bytes: usize) -> StoredResult {
        if crate::canonical::nesting_depth(value) > crate::canonical::MAX_INPUT_DEPTH {
            // serde_json writes recursively: only a value a parser could have built is written.
            let text = if crate::canonical::nesting_depth(value) <= crate::canonical::MAX_PARSE_DEPTH {
                serde_json::to_string(value).unwrap_or_default()
            } else {
                String::new()
            };
            return Self::marked(Marked::TooDeep, text.as_bytes(), max_bytes);
        }
        match crate::canonical::to_canonical_string(value, "result") {
            Ok(json) if json.len() <= max_bytes => StoredResult { json, canonical: true },
            Ok(json) => Self::marked(Marked::Truncated, json.as_bytes(), max_bytes),
            Err(_) => {
                let text = serde_json::to_string(value).unwrap_or_default();
                let why = if text.len() > max_bytes { Marked::Truncated } else { Marked::NotCanonical };
                Self::marked(why, text.as_bytes(), max_bytes)
            }
        }
    }

    /// The one rule for what a binding hands over: any bytes are stored, never refused. JSON
    /// that is canonical, within the depth and within `max_bytes` is stored whole; anything
    /// else (over-size, over-deep, floats, text, bytes that are not JSON) as the marked form.
    pub fn from_bytes(bytes: &[u8], form: ResultForm, max_bytes: usize) -> StoredResult {
        if bytes.len() > max_bytes {
            // Over its bound, a result is never parsed.
            return Self::marked(Marked::Truncated, bytes, max_bytes);
        }
        if form == ResultForm::Text {
            return Self::marked(Marked::Text, bytes, max_bytes);
        }
        let Ok(text) = std::str::from_utf8(bytes) else {
            return Self::marked(Marked::Text, bytes, max_bytes);
        };
        match crate::canonical::parse_json(text) {
            Ok(value) if crate::canonical::nesting_depth(&value) > crate::canonical::MAX_INPUT_DEPTH => {
                Self::marked(Marked::TooDeep, bytes, max_bytes)
            }
            Ok(value) => match crate::canonical::to_canonical_string(&value, "result") {
                Ok(json) if json.len() <= max_bytes => StoredResult { json, canonical: true },
                Ok(_) | Err(_) => {
                    let why = if crate::canonical::find_float(&value, "result").is_some() {
                        Marked::NotCanonical
                    } else {
                        Marked::Truncated
                    };
                    Self::marked(why, bytes, max_bytes)
                }
            },
            Err(_) if bracket_depth(bytes) > crate::canonical::MAX_INPUT_DEPTH => {
                Self::marked(Marked::TooDeep, bytes, max_bytes)
            }
            Err(_) => Self::marked(Marked::Text, bytes, max_bytes),
        }
    }

    /// Over `max_bytes`: the marked excerpt of its text.
    pub fn bounded(self, max_bytes: usize) -> StoredResult {
        if self.json.len() <= max_bytes {
            return self;
        }
        Self::marked(Marked::Truncated, self.json.as_bytes(), max_bytes)
    }

    /// The marked form, `{"warden_result": why, "bytes", "sha256", "excerpt"}`, for a result's
    /// raw bytes (never parsed): its first `RESULT_EXCERPT_BYTES` (or `max_bytes`, if smaller)
    /// as text, its size and the SHA-256 of all of it.
    pub fn marked(why: Marked, bytes: &[u8], max_bytes: usize) -> StoredResult {
        let keep = RESULT_EXCERPT_BYTES.min(max_bytes);
        let head = &bytes[..bytes.len().min(keep)];
        let text = String::from_utf8_lossy(head);
        let marked = serde_json::json!({
            "warden_result": why.as_str(),
            "bytes": bytes.len(),
            "sha256": crate::canonical::sha256_prefixed(bytes),
            "excerpt": cut_at_char_boundary(&text, keep),
        });
        StoredResult { json: marked.to_string(), canonical: false }
    }

    /// The stored result as JSON (its text as a string if it does not parse).
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::from_str(&self.json).unwrap_or(serde_json::Value::String(self.json.clone()))
    }
}

/// How deep the brackets of some JSON-looking text nest, outside strings; iterative, for text
/// the parser refused.
fn bracket_depth(bytes: &[u8]) -> usize {
    let (mut depth, mut deepest, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for &byte in bytes {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// What the store holds for one effect key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EffectRecord {
    /// The effect key this record is for.
    pub effect_key: String,
    /// Where the effect stands.
    pub state: EffectState,
    /// The action whose attempt holds (or last held) the effect.
    pub action_id: String,
    /// That action's name.
    pub action_name: String,
    /// That action's hash.
    pub action_hash: String,
    /// The attempt number, from 1; a FAILED effect's retry is the next one.
    pub attempt: u32,
    /// When the key was first reserved.
    pub created_at: Micros,
    /// When the record last changed.
    pub updated_at: Micros,
    /// Until when the holding attempt may run (RESERVED, EXECUTING).
    pub lease_expires_at: Option<Micros>,
    /// The executor's result, once COMMITTED.
    pub result: Option<StoredResult>,
    /// What went wrong, for FAILED and AMBIGUOUS (bounded, marked when cut).
    pub error: Option<String>,
    /// Who resolved it by hand (or `reconcile:<action>`), if anyone did.
    pub resolved_by: Option<String>,
    /// The approval consumed by the holding attempt, if any.
    pub approval_id: Option<String>,
}

impl EffectRecord {
    /// Whether an attempt is still holding this effect. A reserved/executing record with no
    /// lease counts as expired: the conservative reading.
    pub fn lease_is_live(&self, now: Micros) -> bool {
        matches!(self.state, EffectState::Reserved | EffectState::Executing)
            && self.lease_expires_at.is_some_and(|until| now <= until)
    }

    /// The record as the CLI and the bindings show it.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "effect_key": self.effect_key,
            "state": self.state.as_str(),
            "action_id": self.action_id,
            "action": self.action_name,
            "action_hash": self.action_hash,
            "attempt": self.attempt,
            "created_at": crate::clock::render(self.created_at),
            "updated_at": crate::clock::render(self.updated_at),
            "lease_expires_at": self.lease_expires_at.map(crate::clock::render),
            "result": self.result.as_ref().map(StoredResult::to_value),
            "error": self.error,
            "resolved_by": self.resolved_by,
            "approval_id": self.approval_id,
        })
    }
}

/// Who is asking for a reservation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim<'a> {
    /// The key to reserve.
    pub effect_key: &'a str,
    /// The proposing action.
    pub action_id: &'a str,
    /// Its name.
    pub action_name: &'a str,
    /// Its hash.
    pub action_hash: &'a str,
    /// The approval it consumes, if any.
    pub approval_id: Option<&'a str>,
    /// How long the reservation holds.
    pub lease: Micros,
    /// `None` means no ceiling.
    pub max_attempts: Option<u32>,
}

/// What a store must do about one reservation attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReservationPlan {
    /// Write this record (insert, or renew a FAILED one).
    Grant(EffectRecord),
    /// Write nothing; refuse.
    Refuse(Error),
    /// The lease expired mid-flight: write this AMBIGUOUS record, keep that write, and refuse.
    AmbiguateAndRefuse(EffectRecord, Error),
}

/// The retry table of DESIGN.md §4 as one pure function.
pub fn plan_reservation(
    record: Option<&EffectRecord>,
    claim: &Claim<'_>,
    now: Micros,
) -> Result<ReservationPlan, InvalidInput> {
    use InvalidInputKind::{Missing, OutOfRange};
    if claim.effect_key.is_empty() {
        return Err(InvalidInput::at(Missing, "effect_key", "effect_key must be a non-empty string"));
    }
    if claim.action_id.is_empty() {
        return Err(InvalidInput::at(Missing, "action_id", "action_id must be a non-empty string"));
    }
    if claim.lease <= 0 {
        let message = format!("a reservation lease must be positive, got {} µs", claim.lease);
        return Err(InvalidInput::at(OutOfRange, "lease", message));
    }
    if claim.max_attempts == Some(0) {
        return Err(InvalidInput::at(OutOfRange, "max_attempts", "max_attempts must be at least 1"));
    }
    let lease_until = now.saturating_add(claim.lease);
    let granted = |attempt: u32, created_at: Micros| EffectRecord {
        effect_key: claim.effect_key.to_owned(),
        // Reserve and begin in one write: the permit is only handed out executing.
        state: EffectState::Executing,
        action_id: claim.action_id.to_owned(),
        action_name: claim.action_name.to_owned(),
        action_hash: claim.action_hash.to_owned(),
        attempt,
        created_at,
        updated_at: now,
        lease_expires_at: Some(lease_until),
        result: None,
        error: None,
        resolved_by: None,
        approval_id: claim.approval_id.map(str::to_owned),
    };
    let Some(record) = record else {
        return Ok(ReservationPlan::Grant(granted(1, now)));
    };
    let key = claim.effect_key.to_owned();
    Ok(match record.state {
        EffectState::Committed => ReservationPlan::Refuse(Error::Duplicate {
            state: DuplicateState::Committed,
            effect_key: key,
            holder: record.action_id.clone(),
        }),
        EffectState::Ambiguous => ReservationPlan::Refuse(Error::Ambiguous {
            effect_key: key,
            action_id: record.action_id.clone(),
            detail: "its outcome is unknown".into(),
        }),
        EffectState::Failed => {
            let attempt = record.attempt.saturating_add(1);
            match claim.max_attempts {
                Some(max) if record.attempt >= max => ReservationPlan::Refuse(Error::AttemptCeiling {
                    effect_key: key,
                    attempts: record.attempt,
                    max_attempts: max,
                }),
                // The only automatic retry: the executor proved nothing happened. A renewal
                // clears result, error and resolution attribution of the failed attempt.
                _ => ReservationPlan::Grant(granted(attempt, record.created_at)),
            }
        }
        EffectState::Reserved | EffectState::Executing => {
            if record.lease_is_live(now) {
                ReservationPlan::Refuse(Error::Duplicate {
                    state: DuplicateState::InProgress,
                    effect_key: key,
                    holder: record.action_id.clone(),
                })
            } else {
                // The remote may have committed before the holder vanished: never release it.
                let mut ambiguous = record.clone();
                ambiguous.state = EffectState::Ambiguous;
                ambiguous.updated_at = now;
                ambiguous.lease_expires_at = None;
                ambiguous.error = Some(LEASE_EXPIRED.to_owned());
                ReservationPlan::AmbiguateAndRefuse(
                    ambiguous,
                    Error::Ambiguous {
                        effect_key: key,
                        action_id: record.action_id.clone(),
                        detail: "it was left in flight and its lease expired".into(),
                    },
                )
            }
        }
    })
}

/// The record to write when an integrator's separate `begin` moves RESERVED to EXECUTING.
pub fn plan_begin(
    record: Option<&EffectRecord>,
    effect_key: &str,
    action_id: &str,
    attempt: u32,
    now: Micros,
) -> Result<EffectRecord, Error> {
    let record = held(record, effect_key, action_id, attempt, &[EffectState::Reserved], now)?;
    if !record.lease_is_live(now) {
        return Err(Error::Ambiguous {
            effect_key: effect_key.to_owned(),
            action_id: record.action_id.clone(),
            detail: "its lease expired before execution began".into(),
        });
    }
    let mut next = record.clone();
    next.state = EffectState::Executing;
    next.updated_at = now;
    Ok(next)
}

/// An executor's outcome for the attempt it holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    /// The call succeeded, with its result.
    Committed(StoredResult),
    /// The executor proved the remote side did nothing. The only way to FAILED.
    NotExecuted(String),
    /// The outcome is unknown, with what is known.
    Ambiguous(String),
}

impl Outcome {
    /// The outcome with its message within `limits` (a result is bounded where it is made:
    /// `StoredResult::from_value_within`, `StoredResult::from_bytes`).
    pub fn bounded(self, limits: &crate::limits::Limits) -> Outcome {
        match self {
            Outcome::Committed(result) => Outcome::Committed(result),
            Outcome::NotExecuted(message) => Outcome::NotExecuted(bounded_message(message, limits.max_message_bytes)),
            Outcome::Ambiguous(message) => Outcome::Ambiguous(bounded_message(message, limits.max_message_bytes)),
        }
    }
}

/// A message cut to `max` bytes (at a character boundary), marked when cut.
pub fn bounded_message(message: String, max: usize) -> String {
    if message.len() <= max {
        return message;
    }
    format!("{} … [cut: {} bytes in all]", cut_at_char_boundary(&message, max), message.len())
}

fn cut_at_char_boundary(text: &str, max: usize) -> &str {
    let mut end = max.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// What an outcome writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutcomePlan {
    /// Write this record.
    Write(EffectRecord),
    /// Already AMBIGUOUS under this attempt: `mark_ambiguous` is idempotent; write nothing.
    Unchanged(EffectRecord),
}

/// Apply an outcome reported by the attempt `action_id`. A record that moved on (a lapsed
/// lease someone ambiguated, a human resolution) is refused here; the kernel then records the
/// late outcome as ambiguous evidence without touching the record.
pub fn plan_outcome(
    record: Option<&EffectRecord>,
    effect_key: &str,
    action_id: &str,
    attempt: u32,
    outcome: &Outcome,
    now: Micros,
) -> Result<OutcomePlan, Error> {
    let allowed: &[EffectState] = match outcome {
        Outcome::Ambiguous(_) => &[EffectState::Reserved, EffectState::Executing, EffectState::Ambiguous],
        _ => &[EffectState::Reserved, EffectState::Executing],
    };
    let record = held(record, effect_key, action_id, attempt, allowed, now)?;
    if record.state == EffectState::Ambiguous {
        return Ok(OutcomePlan::Unchanged(record.clone()));
    }
    let mut next = record.clone();
    next.updated_at = now;
    next.lease_expires_at = None;
    match outcome {
        Outcome::Committed(result) => {
            next.state = EffectState::Committed;
            next.result = Some(result.clone());
            next.error = None;
        }
        Outcome::NotExecuted(error) => {
            next.state = EffectState::Failed;
            next.error = Some(error.clone());
        }
        Outcome::Ambiguous(error) => {
            next.state = EffectState::Ambiguous;
            next.error = Some(error.clone());
        }
    }
    Ok(OutcomePlan::Write(next))
}

/// `extend_lease`: only the EXECUTING holder, only while its lease is live, only later.
///
/// A RESERVED attempt is refused as in progress (`Duplicate`, `in_progress`) even when the caller
/// is its own holder: the call is well formed and the record's state is what refuses it, so it is
/// a state refusal, not bad input — the answer ctrlrun's store gives. The holder calls `begin`
/// first; anyone else waits for the outcome or the lease.
pub fn plan_lease_extension(
    record: Option<&EffectRecord>,
    effect_key: &str,
    action_id: &str,
    attempt: u32,
    until: Micros,
    now: Micros,
) -> Result<EffectRecord, Error> {
    if until <= now {
        return Err(Error::invalid_at(
            InvalidInputKind::OutOfRange,
            "until",
            format!(
                "extend_lease until {} is not in the future; an expired lease reserves nothing",
                crate::clock::render(until)
            ),
        ));
    }
    let Some(record) = record else {
        return Err(Error::Ambiguous {
            effect_key: effect_key.to_owned(),
            action_id: action_id.to_owned(),
            detail: "there is no record to extend".into(),
        });
    };
    if record.state == EffectState::Committed {
        return Err(Error::Duplicate {
            state: DuplicateState::Committed,
            effect_key: effect_key.to_owned(),
            holder: record.action_id.clone(),
        });
    }
    let live = record.lease_is_live(now);
    if live && (record.state != EffectState::Executing || record.action_id != action_id || record.attempt != attempt) {
        return Err(Error::Duplicate {
            state: DuplicateState::InProgress,
            effect_key: effect_key.to_owned(),
            holder: record.action_id.clone(),
        });
    }
    if !(record.state == EffectState::Executing && live) {
        // A lapsed lease may already have been declared AMBIGUOUS by another attempt:
        // extending it would resurrect a reservation someone else has moved on from.
        return Err(Error::Ambiguous {
            effect_key: effect_key.to_owned(),
            action_id: record.action_id.clone(),
            detail: format!("it is {} with no live lease and cannot be extended", record.state),
        });
    }
    if record.lease_expires_at.is_some_and(|current| until < current) {
        return Err(Error::invalid_at(
            InvalidInputKind::OutOfRange,
            "until",
            format!("extend_lease would shorten the lease on {effect_key:?}; a lease is only ever extended"),
        ));
    }
    let mut next = record.clone();
    next.lease_expires_at = Some(until);
    next.updated_at = now;
    Ok(next)
}

/// `mark_ambiguous` by anyone holding the key's evidence (the CLI, a reconcile pass): idempotent
/// from reserved, executing and ambiguous; refused from committed and failed, which are known.
pub fn plan_mark_ambiguous(
    record: Option<&EffectRecord>,
    effect_key: &str,
    error: &str,
    now: Micros,
) -> Result<OutcomePlan, Error> {
    let Some(record) = record else {
        return Err(Error::invalid_at(
            InvalidInputKind::Unknown,
            "effect_key",
            format!("no effect {effect_key:?} to mark ambiguous"),
        ));
    };
    match record.state {
        EffectState::Ambiguous => Ok(OutcomePlan::Unchanged(record.clone())),
        EffectState::Reserved | EffectState::Executing => {
            let mut next = record.clone();
            next.state = EffectState::Ambiguous;
            next.updated_at = now;
            next.lease_expires_at = None;
            next.error = Some(error.to_owned());
            Ok(OutcomePlan::Write(next))
        }
        EffectState::Committed | EffectState::Failed => Err(Error::invalid(
            InvalidInputKind::State,
            format!("effect {effect_key:?} is {}; a known outcome is never made ambiguous", record.state),
        )),
    }
}

/// `resolve`: AMBIGUOUS only, to COMMITTED or FAILED, recording who said so. With
/// `expect_attempt`, only that attempt: the one the resolver was shown.
pub fn plan_resolution(
    record: Option<&EffectRecord>,
    effect_key: &str,
    to: EffectState,
    resolver: &str,
    expect_attempt: Option<u32>,
    now: Micros,
) -> Result<EffectRecord, Error> {
    if !matches!(to, EffectState::Committed | EffectState::Failed) {
        return Err(Error::invalid_at(
            InvalidInputKind::Malformed,
            "to",
            format!("an effect resolves to committed or failed, not {to}"),
        ));
    }
    let Some(record) = record else {
        return Err(Error::NotFound(format!("no effect {effect_key:?} to resolve")));
    };
    if record.state != EffectState::Ambiguous {
        return Err(Error::NotResolvable { effect_key: effect_key.to_owned(), state: record.state });
    }
    if let Some(seen) = expect_attempt.filter(|seen| *seen != record.attempt) {
        return Err(Error::invalid(
            InvalidInputKind::State,
            format!(
                "effect {effect_key:?} is ambiguous at attempt {}, not at attempt {seen}, the one this resolution was \
             made for (it was resolved and tried again since); nothing was changed: look at it again (warden \
             inspect {}) and resolve what it is now",
                record.attempt,
                crate::hint::shell_word(effect_key)
            ),
        ));
    }
    let note = format!("resolved {to} by {resolver}");
    let mut next = record.clone();
    next.state = to;
    next.updated_at = now;
    next.lease_expires_at = None;
    next.error = Some(match &record.error {
        Some(was) => format!("{note} (was: {was})"),
        None => note,
    });
    next.resolved_by = Some(resolver.to_owned());
    Ok(next)
}

fn held<'r>(
    record: Option<&'r EffectRecord>,
    effect_key: &str,
    action_id: &str,
    attempt: u32,
    expected: &[EffectState],
    now: Micros,
) -> Result<&'r EffectRecord, Error> {
    let Some(record) = record else {
        return Err(Error::NotFound(format!("no reservation for effect {effect_key:?}")));
    };
    // The holder is the proposal *and* its attempt: a host that reuses one Action value across
    // a renewal must not let the old permit report into the new attempt.
    if record.action_id == action_id && record.attempt == attempt && expected.contains(&record.state) {
        return Ok(record);
    }
    Err(match record.state {
        EffectState::Ambiguous => Error::Ambiguous {
            effect_key: effect_key.to_owned(),
            action_id: record.action_id.clone(),
            detail: "its outcome is unknown".into(),
        },
        EffectState::Committed => Error::Duplicate {
            state: DuplicateState::Committed,
            effect_key: effect_key.to_owned(),
            holder: record.action_id.clone(),
        },
        _ if record.action_id != action_id && record.lease_is_live(now) => Error::Duplicate {
            state: DuplicateState::InProgress,
            effect_key: effect_key.to_owned(),
            holder: record.action_id.clone(),
        },
        _ => Error::LateOutcome {
            effect_key: effect_key.to_owned(),
            state: record.state,
            holder: record.action_id.clone(),
        },
    })
}

/// The provider idempotency token for one attempt on one effect key: SHA-256 over the canonical
/// `{attempt, effect_key, schema}` document, truncated to 16 bytes, rendered as a UUID of
/// version 8. Derived from (key, attempt), never the key alone, so the one retry that FAILED
/// permits is not answered with the provider's cached failure.
pub fn idempotency_token(effect_key: &str, attempt: u32) -> Result<String, InvalidInput> {
    if effect_key.is_empty() {
        return Err(InvalidInput::at(
            InvalidInputKind::Missing,
            "effect_key",
            "an idempotency token names an attempt on a non-empty effect key",
        ));
    }
    if attempt < 1 {
        return Err(InvalidInput::at(InvalidInputKind::OutOfRange, "attempt", "attempts are numbered from 1"));
    }
    let document = serde_json::json!({
        "schema": IDEMPOTENCY_SCHEMA,
        "effect_key": effect_key,
        "attempt": attempt,
    });
    let bytes = crate::canonical::canonical_bytes(&document, "idempotency")?;
    let digest = Sha256::digest(&bytes);
    let mut id = [0u8; 16];
    id.copy_from_slice(&digest[..16]);
    id[6] = (id[6] & 0x0f) | 0x80;
    id[8] = (id[8] & 0x3f) | 0x80;
    let hex = hex::encode(id);
    Ok(format!("{}-{}-{}-{}-{}", &hex[0..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..32]))
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "refund:p1";
    const HOLDER: &str = "act_holder";
    const OTHER: &str = "act_other";
    /// The lease of every record below ends here.
    const UNTIL: Micros = 1_000_000;

    fn record(state: EffectState, action_id: &str, attempt: u32) -> EffectRecord {
        EffectRecord {
            effect_key: KEY.into(),
            state,
            action_id: action_id.into(),
            action_name: "stripe.refund".into(),
            action_hash: "sha256:aa".into(),
            attempt,
            created_at: 0,
            updated_at: 0,
            lease_expires_at: Some(UNTIL),
            result: None,
            error: None,
            resolved_by: None,
            approval_id: None,
        }
    }

    fn begin_refusal(record: &EffectRecord, action_id: &str, attempt: u32, now: Micros) -> Error {
        plan_begin(Some(record), KEY, action_id, attempt, now).expect_err("begin is refused")
    }

    fn commit_refusal(record: &EffectRecord, action_id: &str, attempt: u32, now: Micros) -> Error {
        let outcome = Outcome::Committed(StoredResult::from_value(&serde_json::json!({"ok": true})));
        plan_outcome(Some(record), KEY, action_id, attempt, &outcome, now).expect_err("the outcome is refused")
    }

    /// The canonical text of a JSON string result exactly `bytes` long, with an `é` (two bytes)
    /// starting at byte `at`, and what is stored for it.
    fn result_of(bytes: usize, at: usize) -> (String, StoredResult) {
        let mut text = "x".repeat(bytes - 4);
        text.insert(at - 1, 'é');
        let value = serde_json::json!(text);
        let canonical = crate::canonical::to_canonical_string(&value, "result").unwrap_or_default();
        assert_eq!(canonical.len(), bytes);
        (canonical, StoredResult::from_value(&value))
    }

    #[test]
    fn the_stored_bounds_are_one_mebibyte_sixty_four_kibibytes_and_four_kibibytes() {
        assert_eq!((MAX_RESULT_BYTES, RESULT_EXCERPT_BYTES, MAX_OUTCOME_MESSAGE), (1_048_576, 65_536, 4096));
    }

    #[test]
    fn a_result_of_exactly_the_bound_is_stored_whole_and_one_byte_more_is_an_excerpt() {
        let (text, whole) = result_of(MAX_RESULT_BYTES, 10);
        assert_eq!(whole, StoredResult { json: text, canonical: true });

        // The `é` straddles the excerpt's last byte: the excerpt ends before it, never inside it.
        let (text, over) = result_of(MAX_RESULT_BYTES + 1, RESULT_EXCERPT_BYTES - 1);
        assert!(!over.canonical);
        let marked = over.to_value();
        assert_eq!(marked["warden_result"], "truncated");
        assert_eq!(marked["bytes"], MAX_RESULT_BYTES + 1);
        assert_eq!(marked["sha256"], crate::canonical::sha256_prefixed(text.as_bytes()));
        assert_eq!(marked["excerpt"].as_str(), text.get(..RESULT_EXCERPT_BYTES - 1));
    }

    #[test]
    fn a_resolution_bound_to_an_attempt_moves_only_that_attempt() {
        let ambiguous = record(EffectState::Ambiguous, HOLDER, 3);
        // (the attempt the resolver saw, whether it moves)
        let table: [(Option<u32>, bool); 5] =
            [(None, true), (Some(3), true), (Some(2), false), (Some(4), false), (Some(0), false)];
        for (seen, moves) in table {
            let planned = plan_resolution(Some(&ambiguous), KEY, EffectState::Failed, "ops:ada", seen, 7);
            match planned {
                Ok(next) => {
                    assert!(moves, "{seen:?} must be refused");
                    assert_eq!((next.state, next.attempt, next.updated_at), (EffectState::Failed, 3, 7));
                    assert_eq!(next.resolved_by.as_deref(), Some("ops:ada"));
                }
                Err(Error::InvalidInput(InvalidInput { kind: InvalidInputKind::State, message: why, .. })) => {
                    assert!(!moves, "{seen:?} must move the effect: {why}");
                    let seen = seen.unwrap_or_default();
                    assert!(why.contains(&format!("at attempt 3, not at attempt {seen}")), "{why}");
                    assert!(why.contains("warden inspect refund:p1"), "{why}");
                }
                Err(other) => panic!("{seen:?}: {other:?}"),
            }
        }
        // A state other than AMBIGUOUS is refused as before, whatever attempt is named.
        let committed = record(EffectState::Committed, HOLDER, 3);
        let refused = plan_resolution(Some(&committed), KEY, EffectState::Failed, "ops:ada", Some(3), 7);
        assert!(matches!(refused, Err(Error::NotResolvable { .. })), "{refused:?}");
    }

    fn nested(depth: usize) -> String {
        format!("{}{}", "[".repeat(depth), "]".repeat(depth))
    }

    fn stored(bytes: &str, form: ResultForm) -> StoredResult {
        StoredResult::from_bytes(bytes.as_bytes(), form, MAX_RESULT_BYTES)
    }

    #[test]
    fn a_result_nested_at_the_input_depth_is_stored_whole_and_reads_back_as_itself() {
        let text = nested(crate::canonical::MAX_INPUT_DEPTH);
        let whole = stored(&text, ResultForm::Json);
        assert_eq!(whole, StoredResult { json: text.clone(), canonical: true });
        assert_eq!(crate::canonical::nesting_depth(&whole.to_value()), crate::canonical::MAX_INPUT_DEPTH);
    }

    #[test]
    fn any_bytes_handed_over_are_stored_and_what_is_not_canonical_json_is_marked_with_why() {
        for (text, form, why) in [
            (nested(101), ResultForm::Json, "too_deep"),
            (nested(128), ResultForm::Json, "too_deep"),
            (nested(129), ResultForm::Json, "too_deep"),
            (nested(5000), ResultForm::Json, "too_deep"),
            (r#"{"fee": 0.3}"#.to_owned(), ResultForm::Json, "not_canonical"),
            ("<Receipt re_9>".to_owned(), ResultForm::Json, "text"),
            ("[1, NaN]".to_owned(), ResultForm::Json, "text"),
            (r#"{"a": 1}"#.to_owned(), ResultForm::Text, "text"),
        ] {
            let marked = stored(&text, form).to_value();
            assert_eq!(marked["warden_result"], why, "{}", &text[..text.len().min(40)]);
            assert_eq!(marked["bytes"], text.len());
            assert_eq!(marked["sha256"], crate::canonical::sha256_prefixed(text.as_bytes()));
            assert_eq!(marked["excerpt"].as_str(), Some(text.as_str()));
        }
        let not_utf8 = StoredResult::from_bytes(&[0xff, b'1'], ResultForm::Json, MAX_RESULT_BYTES).to_value();
        assert_eq!((not_utf8["warden_result"].as_str(), not_utf8["bytes"].as_u64()), (Some("text"), Some(2)));
        let over = StoredResult::from_bytes(nested(5000).as_bytes(), ResultForm::Json, 9000).to_value();
        assert_eq!(over["warden_result"], "truncated");
    }

    fn value_nested(depth: usize) -> serde_json::Value {
        let mut value = serde_json::json!([]);
        for _ in 1..depth {
            value = serde_json::json!([value]);
        }
        value
    }

    #[test]
    fn a_values_depth_bounds_hold_at_the_instant_and_one_past() {
        use crate::canonical::{MAX_INPUT_DEPTH, MAX_PARSE_DEPTH};
        let at = StoredResult::from_value(&value_nested(MAX_INPUT_DEPTH));
        assert!(at.canonical, "exactly the input depth is stored whole");
        // Past the input depth the text is still written while a parser could have built it...
        for depth in [MAX_INPUT_DEPTH + 1, MAX_PARSE_DEPTH] {
            let marked = StoredResult::from_value(&value_nested(depth)).to_value();
            assert_eq!(
                (marked["warden_result"].as_str(), marked["bytes"].as_u64()),
                (Some("too_deep"), Some(2 * depth as u64))
            );
        }
        // ...and not past that (serde_json writes recursively).
        let beyond = StoredResult::from_value(&value_nested(MAX_PARSE_DEPTH + 1)).to_value();
        assert_eq!((beyond["warden_result"].as_str(), beyond["bytes"].as_u64()), (Some("too_deep"), Some(0)));
    }

    #[test]
    fn size_bounds_hold_at_the_instant_and_one_byte_past() {
        let why = |stored: StoredResult| stored.to_value()["warden_result"].as_str().map(str::to_owned);
        // A float's text (11 bytes) within the bound is not canonical; one byte over, truncated.
        let float = serde_json::json!({"fee": 0.3});
        assert_eq!(why(StoredResult::from_value_within(&float, 11)).as_deref(), Some("not_canonical"));
        assert_eq!(why(StoredResult::from_value_within(&float, 10)).as_deref(), Some("truncated"));
        // Bytes handed over: exactly the bound is parsed and stored whole; one byte over is not.
        let whole = StoredResult::from_bytes(b"[1]", ResultForm::Json, 3);
        assert_eq!(whole, StoredResult { json: "[1]".into(), canonical: true });
        assert_eq!(why(StoredResult::from_bytes(b"[1]", ResultForm::Json, 2)).as_deref(), Some("truncated"));
        // Re-bounding: exactly the bound is kept as it is; one byte less cuts it.
        let kept = StoredResult { json: "[1]".into(), canonical: true };
        assert_eq!(kept.clone().bounded(3), kept);
        assert_eq!(why(kept.bounded(2)).as_deref(), Some("truncated"));
    }

    #[test]
    fn unparseable_bytes_are_too_deep_only_past_the_input_depth() {
        use crate::canonical::MAX_INPUT_DEPTH;
        let open = |depth: usize| "[".repeat(depth); // never closed, so never JSON
        let at = stored(&open(MAX_INPUT_DEPTH), ResultForm::Json).to_value();
        assert_eq!(at["warden_result"], "text");
        let past = stored(&open(MAX_INPUT_DEPTH + 1), ResultForm::Json).to_value();
        assert_eq!(past["warden_result"], "too_deep");
        // Brackets inside a string do not nest, an escaped quote does not end the string, and
        // brackets after a string's end do.
        let inside = format!(r#""\"{}" x"#, open(MAX_INPUT_DEPTH + 1));
        assert_eq!(stored(&inside, ResultForm::Json).to_value()["warden_result"], "text", "{inside}");
        let after = format!(r#""a" {}"#, open(MAX_INPUT_DEPTH + 1));
        assert_eq!(stored(&after, ResultForm::Json).to_value()["warden_result"], "too_deep");
        // A closing bracket ends its level: two groups of 60 are 60 deep, not 120.
        let groups = format!("{} {} x", nested(60), nested(60));
        assert_eq!(stored(&groups, ResultForm::Json).to_value()["warden_result"], "text");
    }

    #[test]
    fn a_value_with_a_float_or_nested_too_deep_is_marked_not_refused() {
        let float = StoredResult::from_value(&serde_json::json!({"fee": 0.3})).to_value();
        assert_eq!(
            (float["warden_result"].as_str(), float["excerpt"].as_str()),
            (Some("not_canonical"), Some(r#"{"fee":0.3}"#))
        );
        let mut deep = serde_json::json!([]);
        for _ in 0..128 {
            deep = serde_json::json!([deep]);
        }
        assert_eq!(StoredResult::from_value(&deep).to_value()["warden_result"], "too_deep");
    }

    #[test]
    fn an_outcome_message_of_exactly_the_bound_is_kept_and_a_longer_one_is_cut_at_a_character() {
        let exact = "m".repeat(MAX_OUTCOME_MESSAGE);
        assert_eq!(bounded_message(exact.clone(), MAX_OUTCOME_MESSAGE), exact);
        let mut long = "m".repeat(MAX_OUTCOME_MESSAGE - 1);
        long.push('é');
        let cut = bounded_message(long, MAX_OUTCOME_MESSAGE);
        assert_eq!(
            cut,
            format!("{} … [cut: {} bytes in all]", "m".repeat(MAX_OUTCOME_MESSAGE - 1), MAX_OUTCOME_MESSAGE + 1)
        );
        let bounded =
            Outcome::Ambiguous("a".repeat(MAX_OUTCOME_MESSAGE + 1)).bounded(&crate::limits::Limits::default());
        assert!(matches!(bounded, Outcome::Ambiguous(ref m) if m.ends_with("[cut: 4097 bytes in all]")), "{bounded:?}");
        let bounded =
            Outcome::NotExecuted("a".repeat(MAX_OUTCOME_MESSAGE + 1)).bounded(&crate::limits::Limits::default());
        assert!(
            matches!(bounded, Outcome::NotExecuted(ref m) if m.ends_with("[cut: 4097 bytes in all]")),
            "{bounded:?}"
        );
    }

    fn claim(action_id: &str, max_attempts: Option<u32>) -> Claim<'_> {
        Claim {
            effect_key: KEY,
            action_id,
            action_name: "stripe.refund",
            action_hash: "sha256:bb",
            approval_id: Some("apr_1"),
            lease: 60,
            max_attempts,
        }
    }

    #[test]
    fn a_new_key_is_granted_attempt_one_executing_with_its_lease() {
        let plan = plan_reservation(None, &claim(OTHER, None), 500);
        let Ok(ReservationPlan::Grant(granted)) = plan else { panic!("{plan:?}") };
        assert_eq!(
            (granted.state, granted.attempt, granted.created_at, granted.updated_at, granted.lease_expires_at),
            (EffectState::Executing, 1, 500, 500, Some(560))
        );
        assert_eq!((granted.action_id.as_str(), granted.action_hash.as_str()), (OTHER, "sha256:bb"));
        assert_eq!(granted.approval_id.as_deref(), Some("apr_1"));
    }

    #[test]
    fn a_failed_effect_is_renewed_up_to_its_attempt_ceiling_and_not_past_it() {
        let mut failed = record(EffectState::Failed, HOLDER, 2);
        failed.error = Some("declined".into());
        failed.resolved_by = Some("ops".into());
        failed.created_at = 7;
        let plan = plan_reservation(Some(&failed), &claim(OTHER, Some(3)), 500);
        let Ok(ReservationPlan::Grant(renewed)) = plan else { panic!("{plan:?}") };
        assert_eq!((renewed.attempt, renewed.created_at, renewed.state), (3, 7, EffectState::Executing));
        assert_eq!((renewed.error, renewed.resolved_by, renewed.result), (None, None, None));

        failed.attempt = 3;
        let refused = plan_reservation(Some(&failed), &claim(OTHER, Some(3)), 500);
        assert!(
            matches!(refused, Ok(ReservationPlan::Refuse(Error::AttemptCeiling { attempts: 3, max_attempts: 3, .. }))),
            "{refused:?}"
        );
        let unbounded = plan_reservation(Some(&failed), &claim(OTHER, None), 500);
        assert!(matches!(unbounded, Ok(ReservationPlan::Grant(ref r)) if r.attempt == 4), "{unbounded:?}");
    }

    #[test]
    fn committed_ambiguous_and_live_records_refuse_a_reservation() {
        let refuse = |existing: &EffectRecord, now: Micros| plan_reservation(Some(existing), &claim(OTHER, None), now);
        let committed = refuse(&record(EffectState::Committed, HOLDER, 1), 0);
        assert!(
            matches!(committed, Ok(ReservationPlan::Refuse(Error::Duplicate { state: DuplicateState::Committed, .. }))),
            "{committed:?}"
        );
        let ambiguous = refuse(&record(EffectState::Ambiguous, HOLDER, 1), 0);
        assert!(matches!(ambiguous, Ok(ReservationPlan::Refuse(Error::Ambiguous { .. }))), "{ambiguous:?}");
        for state in [EffectState::Reserved, EffectState::Executing] {
            let live = refuse(&record(state, HOLDER, 1), UNTIL);
            assert!(
                matches!(live, Ok(ReservationPlan::Refuse(Error::Duplicate { state: DuplicateState::InProgress, .. }))),
                "{state} at the instant: {live:?}"
            );
        }
    }

    #[test]
    fn a_lapsed_lease_becomes_ambiguous_and_the_reservation_is_refused() {
        let lapsed = plan_reservation(Some(&record(EffectState::Executing, HOLDER, 1)), &claim(OTHER, None), UNTIL + 1);
        let Ok(ReservationPlan::AmbiguateAndRefuse(ambiguous, Error::Ambiguous { .. })) = lapsed else {
            panic!("{lapsed:?}")
        };
        assert_eq!(
            (ambiguous.state, ambiguous.updated_at, ambiguous.lease_expires_at, ambiguous.error.as_deref()),
            (EffectState::Ambiguous, UNTIL + 1, None, Some(LEASE_EXPIRED))
        );
        assert_eq!(ambiguous.action_id, HOLDER);
    }

    #[test]
    fn a_claim_without_a_key_an_id_a_positive_lease_or_a_ceiling_of_one_is_an_error() {
        let mut bad = claim(OTHER, None);
        bad.effect_key = "";
        assert!(plan_reservation(None, &bad, 0).is_err());
        let mut bad = claim("", None);
        assert!(plan_reservation(None, &bad, 0).is_err());
        bad = claim(OTHER, None);
        bad.lease = 0;
        assert!(plan_reservation(None, &bad, 0).is_err());
        bad.lease = 1;
        assert!(plan_reservation(None, &bad, 0).is_ok());
        assert!(plan_reservation(None, &claim(OTHER, Some(0)), 0).is_err());
        assert!(plan_reservation(None, &claim(OTHER, Some(1)), 0).is_ok());
    }

    #[test]
    fn another_proposal_extending_a_lapsed_lease_is_told_the_effect_is_ambiguous() {
        let lapsed = record(EffectState::Executing, HOLDER, 1);
        let refused = plan_lease_extension(Some(&lapsed), KEY, OTHER, 1, UNTIL + 10, UNTIL + 1);
        assert!(matches!(refused, Err(Error::Ambiguous { .. })), "{refused:?}");
    }

    #[test]
    fn idempotency_tokens_are_ctrlruns_uuids_per_attempt() {
        // tests/vectors/ctrlrun-0.12.2/idempotency.json, rows 0 and 1.
        assert_eq!(idempotency_token("refund:txn_1", 1).as_deref(), Ok("382ee448-97da-8107-b674-8c253650d93f"));
        assert_eq!(idempotency_token("refund:txn_1", 2).as_deref(), Ok("28bb40af-814c-8fb6-ba63-e8663b1c036d"));
        assert!(idempotency_token("", 1).is_err());
        assert!(idempotency_token("k", 0).is_err());
    }

    #[test]
    fn the_default_lease_is_exactly_five_minutes() {
        assert_eq!(DEFAULT_LEASE, 300_000_000);
    }

    #[test]
    fn a_lease_is_live_at_its_expiry_instant_and_lapsed_one_microsecond_after() {
        for state in [EffectState::Reserved, EffectState::Executing] {
            let held = record(state, HOLDER, 1);
            assert!(held.lease_is_live(UNTIL), "{state} at the instant");
            assert!(!held.lease_is_live(UNTIL + 1), "{state} one microsecond after");
        }
    }

    #[test]
    fn only_a_reserved_or_executing_record_with_a_lease_holds_the_effect() {
        for state in [EffectState::Committed, EffectState::Failed, EffectState::Ambiguous] {
            assert!(!record(state, HOLDER, 1).lease_is_live(0), "{state}");
        }
        let mut leaseless = record(EffectState::Executing, HOLDER, 1);
        leaseless.lease_expires_at = None;
        assert!(!leaseless.lease_is_live(0));
    }

    #[test]
    fn every_state_name_parses_back_to_its_state_and_nothing_else_parses() {
        let all = [
            EffectState::Reserved,
            EffectState::Executing,
            EffectState::Committed,
            EffectState::Failed,
            EffectState::Ambiguous,
        ];
        for state in all {
            assert_eq!(EffectState::parse(state.as_str()), Some(state));
            assert_eq!(state.to_string(), state.as_str());
        }
        assert_eq!(EffectState::parse("reserved"), Some(EffectState::Reserved));
        assert_eq!(EffectState::parse("executing"), Some(EffectState::Executing));
        for unknown in ["", "Reserved", "in_progress", "done", "executing "] {
            assert_eq!(EffectState::parse(unknown), None, "{unknown:?}");
        }
    }

    #[test]
    fn an_ambiguous_outcome_on_a_record_already_ambiguous_under_the_same_attempt_changes_nothing() {
        let ambiguous = record(EffectState::Ambiguous, HOLDER, 2);
        let plan = plan_outcome(Some(&ambiguous), KEY, HOLDER, 2, &Outcome::Ambiguous("timeout".into()), UNTIL + 5);
        assert_eq!(plan, Ok(OutcomePlan::Unchanged(ambiguous.clone())));
        // A known outcome arriving after the record became ambiguous is refused, not applied.
        assert!(matches!(commit_refusal(&ambiguous, HOLDER, 2, UNTIL + 5), Error::Ambiguous { .. }));
    }

    #[test]
    fn an_old_permit_of_a_reused_action_cannot_extend_the_renewed_attempts_live_lease() {
        let renewed = record(EffectState::Executing, HOLDER, 2);
        let refused = plan_lease_extension(Some(&renewed), KEY, HOLDER, 1, UNTIL + 10, UNTIL - 10);
        assert!(
            matches!(refused, Err(Error::Duplicate { state: DuplicateState::InProgress, ref holder, .. }) if holder == HOLDER),
            "{refused:?}"
        );
        let extended = plan_lease_extension(Some(&renewed), KEY, HOLDER, 2, UNTIL + 10, UNTIL - 10);
        assert_eq!(extended.map(|next| next.lease_expires_at), Ok(Some(UNTIL + 10)));
    }

    #[test]
    fn a_reserved_lease_is_not_extended_even_by_its_holder_it_is_in_progress_until_begun() {
        let reserved = record(EffectState::Reserved, HOLDER, 1);
        let refused = plan_lease_extension(Some(&reserved), KEY, HOLDER, 1, UNTIL + 10, UNTIL - 10);
        assert!(matches!(refused, Err(Error::Duplicate { state: DuplicateState::InProgress, .. })), "{refused:?}");
        // Once the lease lapsed the record reserves nothing, and extending it is refused as ambiguous.
        let lapsed = plan_lease_extension(Some(&reserved), KEY, HOLDER, 1, UNTIL + 10, UNTIL + 1);
        assert!(matches!(lapsed, Err(Error::Ambiguous { .. })), "{lapsed:?}");
    }

    #[test]
    fn another_proposal_cannot_extend_a_live_lease() {
        let live = record(EffectState::Executing, HOLDER, 1);
        let refused = plan_lease_extension(Some(&live), KEY, OTHER, 1, UNTIL + 10, UNTIL - 10);
        assert!(matches!(refused, Err(Error::Duplicate { state: DuplicateState::InProgress, .. })), "{refused:?}");
    }

    #[test]
    fn a_lease_extends_to_exactly_its_current_expiry_but_never_shortens() {
        let live = record(EffectState::Executing, HOLDER, 1);
        let same = plan_lease_extension(Some(&live), KEY, HOLDER, 1, UNTIL, UNTIL - 10);
        assert_eq!(same.map(|next| (next.lease_expires_at, next.updated_at)), Ok((Some(UNTIL), UNTIL - 10)));
        let shorter = plan_lease_extension(Some(&live), KEY, HOLDER, 1, UNTIL - 1, UNTIL - 10);
        assert_eq!(shorter.map(|_| ()).map_err(|e| e.invalid_input_kind()), Err(Some(InvalidInputKind::OutOfRange)));
    }

    #[test]
    fn the_holder_is_refused_by_kind_when_its_record_moved_on() {
        // A record resolved or ambiguated under another attempt says so by kind.
        let ambiguous = record(EffectState::Ambiguous, OTHER, 1);
        assert!(matches!(begin_refusal(&ambiguous, HOLDER, 1, 0), Error::Ambiguous { .. }));
        assert!(matches!(commit_refusal(&ambiguous, HOLDER, 1, 0), Error::Ambiguous { .. }));
        let committed = record(EffectState::Committed, HOLDER, 1);
        for refusal in [begin_refusal(&committed, HOLDER, 1, 0), commit_refusal(&committed, HOLDER, 1, 0)] {
            assert!(
                matches!(refusal, Error::Duplicate { state: DuplicateState::Committed, ref holder, .. } if holder == HOLDER),
                "{refusal:?}"
            );
        }
    }

    #[test]
    fn another_proposal_reporting_into_a_live_lease_is_told_it_is_in_progress() {
        let live = record(EffectState::Executing, HOLDER, 1);
        for now in [0, UNTIL] {
            let refusal = commit_refusal(&live, OTHER, 1, now);
            assert!(
                matches!(refusal, Error::Duplicate { state: DuplicateState::InProgress, ref holder, .. } if holder == HOLDER),
                "at {now}: {refusal:?}"
            );
        }
        let reserved = record(EffectState::Reserved, HOLDER, 1);
        assert!(matches!(
            begin_refusal(&reserved, OTHER, 1, UNTIL),
            Error::Duplicate { state: DuplicateState::InProgress, .. }
        ));
    }

    #[test]
    fn a_report_into_a_lapsed_lease_or_from_an_earlier_attempt_is_a_late_outcome() {
        let live = record(EffectState::Executing, HOLDER, 2);
        // Another proposal, one microsecond after the lease lapsed.
        let lapsed = commit_refusal(&live, OTHER, 1, UNTIL + 1);
        assert!(matches!(lapsed, Error::LateOutcome { state: EffectState::Executing, .. }), "{lapsed:?}");
        // The same action's earlier attempt, with the renewed attempt's lease still live.
        let earlier = commit_refusal(&live, HOLDER, 1, 0);
        assert!(matches!(earlier, Error::LateOutcome { state: EffectState::Executing, .. }), "{earlier:?}");
        // The holder itself, in a state its call does not apply to.
        let began = begin_refusal(&live, HOLDER, 2, 0);
        assert!(matches!(began, Error::LateOutcome { state: EffectState::Executing, .. }), "{began:?}");
        let failed = record(EffectState::Failed, HOLDER, 2);
        let late = commit_refusal(&failed, HOLDER, 2, 0);
        assert!(matches!(late, Error::LateOutcome { state: EffectState::Failed, .. }), "{late:?}");
    }

    #[test]
    fn a_call_for_an_effect_with_no_record_is_not_found() {
        assert!(matches!(plan_begin(None, KEY, HOLDER, 1, 0), Err(Error::NotFound(_))));
        let outcome = Outcome::NotExecuted("refused upstream".into());
        assert!(matches!(plan_outcome(None, KEY, HOLDER, 1, &outcome, 0), Err(Error::NotFound(_))));
    }
}
