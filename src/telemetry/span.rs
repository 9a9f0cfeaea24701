//! The span record of one protected action, as the OpenTelemetry semantic conventions for
//! generative AI name it, built from what the kernel knows (`Facts`). Pure: no store, no clock.
//!
//! Followed (docs/TELEMETRY.md cites the versions): the *execute tool span* of
//! `open-telemetry/semantic-conventions-genai` (`docs/gen-ai/gen-ai-spans.md`): name
//! `execute_tool {gen_ai.tool.name}`, kind INTERNAL, `gen_ai.operation.name` set at creation,
//! `gen_ai.tool.call.arguments` and `gen_ai.tool.call.result` opt-in; its guardrail result
//! event (`docs/gen-ai/gen-ai-guardrails.md`): `gen_ai.guardrail.result`, with the policy and
//! the provider-native result; and *Recording errors* (`docs/general/recording-errors.md` of
//! `open-telemetry/semantic-conventions`): a failed operation has status `Error`, `error.type`
//! and a description, a successful one leaves the status unset. Everything Warden adds is under
//! `warden.*`.

use std::time::Duration;

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::Value;

use crate::clock::Micros;
use crate::decision::Decision;
use crate::effect_state::EffectState;

/// What the operator allows a span to carry beyond Warden's own identifiers: the tool call's
/// arguments and its result, each redacted as sights redact (sensitive keys at any depth,
/// credential shapes in strings) and bounded, and scrubbed of every value the arguments hold
/// under a sensitive key wherever it is repeated. Both are off unless the operator opts in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Capture {
    /// Record `gen_ai.tool.call.arguments`: the canonical arguments the receipt holds.
    pub arguments: bool,
    /// Record `gen_ai.tool.call.result` (the result as the receipt stores it) and the host's
    /// message of a FAILED or AMBIGUOUS outcome as the status description.
    pub results: bool,
}

/// One attribute value: the primitive types every OpenTelemetry SDK takes.
#[derive(Debug, Clone, PartialEq)]
pub enum AttributeValue {
    /// A string.
    Str(String),
    /// A signed 64-bit integer.
    Int(i64),
    /// A double (durations, in seconds).
    Double(f64),
    /// A boolean.
    Bool(bool),
}

/// Attributes in the order they were set.
pub type Attributes = Vec<(&'static str, AttributeValue)>;

/// Attributes as one JSON object.
pub(crate) fn attributes_json(attributes: &Attributes) -> Value {
    serde_json::to_value(AttributesJson(attributes)).unwrap_or(Value::Null)
}

/// An event on the span.
#[derive(Debug, Clone, PartialEq)]
pub struct SpanEvent {
    /// Its name, e.g. `gen_ai.guardrail.result`.
    pub name: &'static str,
    /// When it happened, by the kernel's clock.
    pub at: Micros,
    /// Its attributes.
    pub attributes: Attributes,
}

/// The span's status: unset, or an error with a description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpanStatus {
    /// The operation ended without an error (or has not ended).
    Unset,
    /// The operation failed; the description says how (never an argument value or a secret).
    Error(String),
}

/// Which instrument a measurement goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Instrument {
    /// A monotonic counter (`add`).
    Counter,
    /// A histogram (`record`).
    Histogram,
}

/// One measurement the host's metrics SDK records for this action, made when the span ends.
#[derive(Debug, Clone, PartialEq)]
pub struct Measurement {
    /// The instrument kind.
    pub instrument: Instrument,
    /// The instrument's name, e.g. `warden.actions`.
    pub name: &'static str,
    /// Its unit (UCUM, as OpenTelemetry writes them: `s`, `{action}`).
    pub unit: &'static str,
    /// Its description.
    pub description: &'static str,
    /// The value: 1 for a counter, seconds for a duration.
    pub value: f64,
    /// The measurement's attributes (low cardinality only).
    pub attributes: Attributes,
}

/// The span of one protected action as the kernel recorded it: before the action ends, what is
/// known so far (no end, no measurements); afterwards, everything.
#[derive(Debug, Clone, PartialEq)]
pub struct ActionSpan {
    /// `execute_tool {gen_ai.tool.name}` (`execute_tool` before the name is known).
    pub name: String,
    /// When the protected call began, by the kernel's clock.
    pub start: Micros,
    /// When it ended; `None` while the permit's function runs.
    pub end: Option<Micros>,
    /// The attributes, `gen_ai.*` first, then `warden.*`.
    pub attributes: Attributes,
    /// The events, in order.
    pub events: Vec<SpanEvent>,
    /// The status.
    pub status: SpanStatus,
    /// What the metrics SDK records (only once the span ended).
    pub measurements: Vec<Measurement>,
}

/// The span kind every action span has (the conventions' INTERNAL).
pub const SPAN_KIND: &str = "internal";

/// Nanoseconds since the epoch, for the record's `*_unix_nano` fields.
fn nanos(at: Micros) -> i128 {
    i128::from(at) * 1000
}

/// Attributes serialized as one JSON object, in the order they were set.
struct AttributesJson<'a>(&'a Attributes);

impl Serialize for AttributesJson<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (key, value) in self.0 {
            match value {
                AttributeValue::Str(text) => map.serialize_entry(key, text)?,
                AttributeValue::Int(n) => map.serialize_entry(key, n)?,
                AttributeValue::Double(x) => map.serialize_entry(key, x)?,
                AttributeValue::Bool(b) => map.serialize_entry(key, b)?,
            }
        }
        map.end()
    }
}

impl Serialize for SpanEvent {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(3))?;
        map.serialize_entry("name", self.name)?;
        map.serialize_entry("time_unix_nano", &nanos(self.at))?;
        map.serialize_entry("attributes", &AttributesJson(&self.attributes))?;
        map.end()
    }
}

impl Serialize for SpanStatus {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            SpanStatus::Unset => {
                let mut map = serializer.serialize_map(Some(1))?;
                map.serialize_entry("code", "unset")?;
                map.end()
            }
            SpanStatus::Error(description) => {
                let mut map = serializer.serialize_map(Some(2))?;
                map.serialize_entry("code", "error")?;
                map.serialize_entry("description", description)?;
                map.end()
            }
        }
    }
}

impl Serialize for Measurement {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(6))?;
        match self.instrument {
            // A count is a whole number: an integer on the wire.
            Instrument::Counter => {
                map.serialize_entry("instrument", "counter")?;
                map.serialize_entry("value", &(self.value as i64))?;
            }
            Instrument::Histogram => {
                map.serialize_entry("instrument", "histogram")?;
                map.serialize_entry("value", &self.value)?;
            }
        }
        map.serialize_entry("name", self.name)?;
        map.serialize_entry("unit", self.unit)?;
        map.serialize_entry("description", self.description)?;
        map.serialize_entry("attributes", &AttributesJson(&self.attributes))?;
        map.end()
    }
}

impl Serialize for ActionSpan {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(8))?;
        map.serialize_entry("name", &self.name)?;
        map.serialize_entry("kind", SPAN_KIND)?;
        map.serialize_entry("start_time_unix_nano", &nanos(self.start))?;
        map.serialize_entry("end_time_unix_nano", &self.end.map(nanos))?;
        map.serialize_entry("attributes", &AttributesJson(&self.attributes))?;
        map.serialize_entry("events", &self.events)?;
        map.serialize_entry("status", &self.status)?;
        map.serialize_entry("metrics", &self.measurements)?;
        map.end()
    }
}

impl ActionSpan {
    /// The record as JSON (the C ABI's `warden_trace_span`): `{"name", "kind": "internal",
    /// "start_time_unix_nano", "end_time_unix_nano": int|null, "attributes": {...}, "events":
    /// [{"name", "time_unix_nano", "attributes"}], "status": {"code": "unset"|"error",
    /// "description"?}, "metrics": [{"instrument": "counter"|"histogram", "name", "unit",
    /// "description", "value", "attributes"}]}`. [`ActionSpan::to_json_text`] writes the same
    /// document without building it in memory first.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// The record as compact JSON text (what crosses the C ABI).
    pub fn to_json_text(&self) -> Vec<u8> {
        // Every key is a string and every number finite: writing to memory cannot fail.
        serde_json::to_vec(self).unwrap_or_else(|_| b"null".to_vec())
    }

    /// The value of attribute `key`, if set.
    pub fn attribute(&self, key: &str) -> Option<&AttributeValue> {
        self.attributes.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
    }
}

/// How a protected action ended, as the span reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ended {
    /// When, by the kernel's clock.
    pub at: Micros,
    /// `warden.outcome`: `committed`, `failed`, `ambiguous`, `refused` or `error`.
    pub outcome: &'static str,
    /// `error.type`, for every outcome but `committed`.
    pub error_type: Option<String>,
    /// The status description of a failed operation.
    pub description: Option<String>,
}

/// Everything the kernel recorded about one protected call (`ActionTrace` holds it).
#[derive(Debug, Clone, Default)]
pub(crate) struct Facts {
    pub started_at: Option<Micros>,
    pub ended: Option<Ended>,
    pub tool: Option<String>,
    pub capture: Capture,
    /// `durable` or `deferred`.
    pub outcomes: Option<&'static str>,
    pub action_id: Option<String>,
    pub action_hash: Option<String>,
    pub decision: Option<Decision>,
    /// The ruling's reason: the rule that decided (`rule[N]`, `decision`, `no_matching_rule`, …).
    pub rule: Option<String>,
    /// What the receipt records as `decision_reason`: the refusal's reason, else the rule.
    pub decision_reason: Option<String>,
    pub policy_hash: Option<String>,
    pub policy_version: Option<String>,
    pub observe: bool,
    pub effect_key: Option<String>,
    pub attempt: Option<u32>,
    pub effect_state: Option<EffectState>,
    pub approval_id: Option<String>,
    /// How long this call waited for a human's answer.
    pub approval_wait: Option<Micros>,
    /// From the request to its answer, for the approval this call spent or was denied by.
    pub approval_decided_in: Option<Micros>,
    pub receipt_id: Option<String>,
    pub receipt_seq: Option<u64>,
    pub receipt_hash: Option<String>,
    /// Captured (opt-in) and redacted.
    pub arguments: Option<Value>,
    /// Captured (opt-in) and redacted; only a committed result.
    pub result: Option<Value>,
    /// With a capture opted in: the echo guard of the arguments' sensitive values, which the
    /// captured arguments, result and host message are scrubbed of.
    pub guard: Option<std::sync::Arc<crate::sight::echo::Echo>>,
    pub events: Vec<SpanEvent>,
    /// Each store write the action waited for: which (`proposal`, `outcome`), how long, and how
    /// many writes its commit carried (0: none seen).
    pub writes: Vec<(&'static str, Duration, u32)>,
    /// A permit was issued: its outcome, not a refusal, ends the span.
    pub permitted: bool,
}

fn seconds(micros: Micros) -> AttributeValue {
    AttributeValue::Double(micros as f64 / 1e6)
}

fn text(value: &str) -> AttributeValue {
    AttributeValue::Str(value.to_owned())
}

/// Compact JSON text of a captured value (attributes carry primitives only, so a structured
/// value crosses as its JSON string, as the conventions allow).
fn json_text(value: &Value) -> AttributeValue {
    AttributeValue::Str(value.to_string())
}

impl Facts {
    /// The span as far as it is known.
    pub(crate) fn span(&self) -> ActionSpan {
        // The name, the start and the creation attributes first, in that order.
        let mut span = self.span_at_start();
        let mut put = |key: &'static str, value: Option<AttributeValue>| {
            if let Some(value) = value {
                span.attributes.push((key, value));
            }
        };
        put("gen_ai.tool.call.id", self.action_id.as_deref().map(text));
        put("error.type", self.ended.as_ref().and_then(|e| e.error_type.as_deref()).map(text));
        put("gen_ai.tool.call.arguments", self.arguments.as_ref().map(json_text));
        put("gen_ai.tool.call.result", self.result.as_ref().map(json_text));
        put("warden.decision", self.decision.map(|d| text(d.as_str())));
        put("warden.decision.reason", self.decision_reason.as_deref().map(text));
        put("warden.rule", self.rule.as_deref().map(text));
        put("warden.policy.hash", self.policy_hash.as_deref().map(text));
        put("warden.policy.version", self.policy_version.as_deref().map(text));
        put("warden.action.hash", self.action_hash.as_deref().map(text));
        put("warden.effect.key", self.effect_key.as_deref().map(text));
        put("warden.effect.attempt", self.attempt.map(|n| AttributeValue::Int(i64::from(n))));
        put("warden.effect.state", self.effect_state.map(|s| text(s.as_str())));
        put("warden.approval.id", self.approval_id.as_deref().map(text));
        put("warden.approval.wait_time", self.approval_wait.map(seconds));
        put("warden.approval.decision_time", self.approval_decided_in.map(seconds));
        put("warden.receipt.id", self.receipt_id.as_deref().map(text));
        put("warden.receipt.seq", self.receipt_seq.map(|n| AttributeValue::Int(i64::try_from(n).unwrap_or(i64::MAX))));
        put("warden.receipt.hash", self.receipt_hash.as_deref().map(text));
        put("warden.outcome", self.ended.as_ref().map(|e| text(e.outcome)));
        put("warden.outcomes", self.outcomes.map(text));
        put("warden.observe", self.observe.then_some(AttributeValue::Bool(true)));
        let status = match &self.ended {
            Some(Ended { error_type: Some(kind), description, .. }) => {
                SpanStatus::Error(description.clone().unwrap_or_else(|| kind.clone()))
            }
            _ => SpanStatus::Unset,
        };
        span.end = self.ended.as_ref().map(|e| e.at);
        span.events.clone_from(&self.events);
        span.status = status;
        span.measurements = self.ended.as_ref().map(|ended| self.measurements(ended, span.start)).unwrap_or_default();
        span
    }

    /// `span`'s name, start and creation attributes only (`ActionTrace::span_at_start`).
    pub(crate) fn span_at_start(&self) -> ActionSpan {
        let (name, attributes) = match &self.tool {
            Some(tool) => (
                format!("execute_tool {tool}"),
                vec![("gen_ai.operation.name", text("execute_tool")), ("gen_ai.tool.name", text(tool))],
            ),
            None => ("execute_tool".to_owned(), vec![("gen_ai.operation.name", text("execute_tool"))]),
        };
        ActionSpan {
            name,
            start: self.started_at.unwrap_or_default(),
            end: None,
            attributes,
            events: Vec::new(),
            status: SpanStatus::Unset,
            measurements: Vec::new(),
        }
    }

    /// What the metrics SDK records for this action, once it ended.
    fn measurements(&self, ended: &Ended, start: Micros) -> Vec<Measurement> {
        let tool = self.tool.as_deref().map(|tool| ("gen_ai.tool.name", text(tool)));
        let error_type = ended.error_type.as_deref().map(|kind| ("error.type", text(kind)));
        let outcome = Some(("warden.outcome", text(ended.outcome)));
        let mut actions: Attributes = tool.iter().cloned().chain(outcome.clone()).collect();
        actions.extend(self.decision.map(|d| ("warden.decision", text(d.as_str()))));
        actions.extend(self.decision_reason.as_deref().map(|r| ("warden.decision.reason", text(r))));
        actions.extend(error_type.clone());
        let mut out = vec![
            Measurement {
                instrument: Instrument::Counter,
                name: "warden.actions",
                unit: "{action}",
                description: "Protected actions, by decision, reason and outcome",
                value: 1.0,
                attributes: actions,
            },
            Measurement {
                instrument: Instrument::Histogram,
                name: "warden.action.duration",
                unit: "s",
                description: "How long a protected action took, from its proposal to its recorded outcome",
                value: ((ended.at - start).max(0)) as f64 / 1e6,
                attributes: tool.into_iter().chain(outcome).chain(error_type).collect(),
            },
        ];
        if let Some(decided_in) = self.approval_decided_in {
            out.push(Measurement {
                instrument: Instrument::Histogram,
                name: "warden.approval.decision.duration",
                unit: "s",
                description:
                    "From an approval request to a human's answer, for the approvals actions spent or were denied by",
                value: decided_in.max(0) as f64 / 1e6,
                attributes: Vec::new(),
            });
        }
        for (write, took, together) in &self.writes {
            out.push(Measurement {
                instrument: Instrument::Histogram,
                name: "warden.store.write.duration",
                unit: "s",
                description: "How long an action's durable write took to commit, as the action waited for it",
                value: took.as_secs_f64(),
                attributes: vec![("warden.store.write", text(write))],
            });
            if *together > 0 {
                out.push(Measurement {
                    instrument: Instrument::Histogram,
                    name: "warden.store.write.batch_size",
                    unit: "{write}",
                    description: "How many writes the commit (a file store's journal sync) that made an action's \
                                  durable write durable carried, that write included: the group commit's batch",
                    value: f64::from(*together),
                    attributes: vec![("warden.store.write", text(write))],
                });
            }
        }
        out
    }
}

/// The `gen_ai.guardrail.result` event of one decision: the provider-native result (`decision`:
/// `allow`, `approve`, `deny`), the policy (its hash and version) and the rule that decided.
pub(crate) fn guardrail_event(
    at: Micros,
    decision: Decision,
    rule: &str,
    policy_hash: Option<&str>,
    policy_version: Option<&str>,
) -> SpanEvent {
    let mut attributes: Attributes = vec![("gen_ai.guardrail.component.name", text("Warden"))];
    attributes.extend(policy_hash.map(|hash| ("gen_ai.guardrail.policy.id", text(hash))));
    attributes.extend(policy_version.map(|version| ("gen_ai.guardrail.policy.version", text(version))));
    attributes.push(("gen_ai.guardrail.policy.rule.id", text(rule)));
    attributes.push(("gen_ai.guardrail.result.type", text("decision")));
    attributes.push(("gen_ai.guardrail.result.value", text(decision.as_str())));
    SpanEvent { name: "gen_ai.guardrail.result", at, attributes }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ended(error_type: Option<&str>, description: Option<&str>) -> Ended {
        Ended {
            at: 7_000_000,
            outcome: if error_type.is_some() { "refused" } else { "committed" },
            error_type: error_type.map(str::to_owned),
            description: description.map(str::to_owned),
        }
    }

    fn keys(span: &ActionSpan) -> Vec<&'static str> {
        span.attributes.iter().map(|(key, _)| *key).collect()
    }

    #[test]
    fn a_span_before_anything_is_known_is_execute_tool_with_its_operation_and_nothing_else() {
        let span = Facts::default().span();
        assert_eq!(span.name, "execute_tool");
        assert_eq!(keys(&span), ["gen_ai.operation.name"]);
        assert_eq!((span.end, span.status.clone(), span.measurements.len()), (None, SpanStatus::Unset, 0));
        assert_eq!(span.to_json()["end_time_unix_nano"], Value::Null);
    }

    #[test]
    fn the_span_at_start_is_the_spans_name_start_and_creation_attributes_and_nothing_else() {
        for tool in [None, Some("stripe.refund")] {
            let facts = Facts {
                started_at: Some(1_000_000),
                tool: tool.map(str::to_owned),
                action_id: Some("act_1".into()),
                decision: Some(Decision::Allow),
                events: vec![SpanEvent { name: "gen_ai.guardrail.result", at: 1_000_100, attributes: Vec::new() }],
                ended: Some(ended(Some("denied"), Some("no"))),
                ..Facts::default()
            };
            let (whole, opening) = (facts.span(), facts.span_at_start());
            assert_eq!((&opening.name, opening.start), (&whole.name, whole.start), "{tool:?}");
            let created = if tool.is_some() { 2 } else { 1 };
            assert_eq!(opening.attributes, whole.attributes[..created], "{tool:?}");
            assert!(whole.attributes.len() > created && !whole.events.is_empty() && !whole.measurements.is_empty());
            assert_eq!(
                (opening.end, opening.events.len(), opening.status, opening.measurements.len()),
                (None, 0, SpanStatus::Unset, 0),
                "{tool:?}"
            );
        }
    }

    #[test]
    fn the_status_is_an_error_exactly_when_an_error_type_is_set() {
        let cases = [
            (None, None, SpanStatus::Unset),
            (Some("denied"), Some("action denied (rule[2])"), SpanStatus::Error("action denied (rule[2])".into())),
            // No description: the error type says what happened.
            (Some("store"), None, SpanStatus::Error("store".into())),
        ];
        for (error_type, description, status) in cases {
            let facts = Facts { ended: Some(ended(error_type, description)), ..Facts::default() };
            let span = facts.span();
            assert_eq!(span.status, status, "{error_type:?}");
            assert_eq!(span.attribute("error.type").is_some(), error_type.is_some(), "{error_type:?}");
            let counted = &span.measurements[0];
            assert_eq!(counted.attributes.iter().any(|(k, _)| *k == "error.type"), error_type.is_some());
        }
    }

    #[test]
    fn measurements_exist_only_once_the_span_ended_and_durations_are_seconds() {
        let mut facts = Facts {
            started_at: Some(1_000_000),
            tool: Some("stripe.refund".into()),
            approval_decided_in: Some(90_500_000),
            writes: vec![("proposal", Duration::from_micros(1500), 3), ("outcome", Duration::from_micros(900), 0)],
            ..Facts::default()
        };
        assert!(facts.span().measurements.is_empty());
        facts.ended = Some(ended(None, None));
        let span = facts.span();
        let value = |name: &str| span.measurements.iter().find(|m| m.name == name).map(|m| m.value);
        assert_eq!(value("warden.actions"), Some(1.0));
        assert_eq!(value("warden.action.duration"), Some(6.0));
        assert_eq!(value("warden.approval.decision.duration"), Some(90.5));
        assert_eq!(value("warden.store.write.duration"), Some(0.0015));
        let batches: Vec<_> = span.measurements.iter().filter(|m| m.name == "warden.store.write.batch_size").collect();
        assert_eq!(batches.len(), 1, "a write that saw no commit has no batch size");
        assert_eq!((batches[0].value, batches[0].unit), (3.0, "{write}"));
        assert_eq!(batches[0].attributes, vec![("warden.store.write", AttributeValue::Str("proposal".into()))]);
        assert_eq!(span.to_json()["metrics"][0]["value"], serde_json::json!(1), "a count is an integer");
    }

    #[test]
    fn captured_values_cross_as_json_text_and_times_as_nanoseconds() {
        let facts = Facts {
            started_at: Some(1_764_000_000_000_001),
            arguments: Some(serde_json::json!({"a": [1, "x"]})),
            observe: true,
            ..Facts::default()
        };
        let record = facts.span().to_json();
        assert_eq!(record["attributes"]["gen_ai.tool.call.arguments"], r#"{"a":[1,"x"]}"#);
        assert_eq!(record["attributes"]["warden.observe"], true);
        assert_eq!(record["start_time_unix_nano"], serde_json::json!(1_764_000_000_000_001_000_i128));
    }

    #[test]
    fn the_json_text_is_the_json_document_of_every_field() {
        let mut facts = Facts {
            started_at: Some(1_000_000),
            tool: Some("stripe.refund".into()),
            decision: Some(Decision::Deny),
            attempt: Some(2),
            approval_wait: Some(1_500_000),
            observe: true,
            events: vec![guardrail_event(2_000_000, Decision::Deny, "rule[0]", Some("sha256:ab"), Some("7"))],
            writes: vec![("proposal", Duration::from_micros(250), 1)],
            ..Facts::default()
        };
        facts.ended = Some(ended(Some("denied"), Some("action denied (rule[0])")));
        let span = facts.span();
        let text: Value = serde_json::from_slice(&span.to_json_text()).expect("the text is JSON");
        assert_eq!(text, span.to_json());
        assert_eq!(text["attributes"]["warden.effect.attempt"], 2);
        assert_eq!(text["attributes"]["warden.approval.wait_time"], 1.5);
        assert_eq!(text["status"], serde_json::json!({"code": "error", "description": "action denied (rule[0])"}));
        assert_eq!(text["events"][0]["time_unix_nano"], 2_000_000_000_i64);
        assert_eq!(text["metrics"][0]["instrument"], "counter");
        assert_eq!(text["metrics"].as_array().map(Vec::len), Some(4), "actions, duration, one write, its batch");
        assert_eq!(text["attributes"].as_object().map(serde_json::Map::len), Some(span.attributes.len()));
    }

    #[test]
    fn the_guardrail_event_names_the_policy_the_rule_and_the_native_decision() {
        let event = guardrail_event(5, Decision::Approve, "rule[1]", Some("sha256:ab"), None);
        let keys: Vec<_> = event.attributes.iter().map(|(k, _)| *k).collect();
        assert_eq!(
            keys,
            [
                "gen_ai.guardrail.component.name",
                "gen_ai.guardrail.policy.id",
                "gen_ai.guardrail.policy.rule.id",
                "gen_ai.guardrail.result.type",
                "gen_ai.guardrail.result.value",
            ]
        );
        assert_eq!(event.attributes[4].1, AttributeValue::Str("approve".into()));
    }
}
