//! Scenario arguments from the document's rules: for each reachable decision, arguments that
//! satisfy its `when` conditions and fresh values for every template placeholder, confirmed by
//! the policy before a scenario uses them.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use super::Result;
use crate::condition::{Condition, Op};
use crate::decision::Decision;
use crate::document::{ActionEntry, Document};
use crate::error::{Error, InvalidInputKind};

/// At most this many values are tried per constrained argument, and this many combinations.
const VALUES_PER_SUBJECT: usize = 16;
const MAX_COMBINATIONS: usize = 512;

/// One reachable decision of the document: an action and the rule (or bare decision) that
/// synthesized arguments reach.
#[derive(Debug, Clone)]
pub(super) struct Case<'d> {
    pub(super) action: &'d str,
    pub(super) entry: &'d ActionEntry,
    pub(super) rule: Option<usize>,
    pub(super) decision: Decision,
    /// The reason `evaluate` gives: `rule[N]` or `decision`.
    pub(super) reason: String,
    /// Two scenarios' arguments render different effect keys (a placeholder is not fixed by the rule).
    pub(super) fresh_keys: bool,
}

/// Arguments (and a resource, when the effect template names one the document does not render)
/// for one call.
#[derive(Debug, Clone)]
pub(super) struct Call {
    pub(super) arguments: Map<String, Value>,
    pub(super) resource: Option<String>,
    pub(super) effect_key: Option<String>,
}

impl Case<'_> {
    pub(super) fn label(&self) -> String {
        format!("{} {}", self.action, self.reason)
    }

    pub(super) fn conditions(&self) -> &[Condition] {
        match self.rule.and_then(|index| self.entry.rules.get(index)) {
            Some(rule) => &rule.when,
            None => &[],
        }
    }

    pub(super) fn call(&self, document: &Document, tag: &str) -> Result<Call> {
        synthesize(document, self.action, self.entry, self.conditions(), self.decision, &self.reason, tag)
            .map_err(|why| Error::invalid(InvalidInputKind::Malformed, format!("{}: {why}", self.label())))
    }
}

/// Every rule of every action, with synthesized arguments checked against `evaluate`; the
/// rules no arguments could reach come back as notes.
pub(super) fn catalog(document: &Document) -> (Vec<Case<'_>>, Vec<String>) {
    let mut cases = Vec::new();
    let mut unreachable = Vec::new();
    for (action, entry) in &document.actions {
        let mut targets: Vec<(Option<usize>, Decision, String)> = Vec::new();
        if let Some(decision) = entry.decision {
            targets.push((None, decision, crate::policy::BARE_DECISION.to_owned()));
        }
        for (index, rule) in entry.rules.iter().enumerate() {
            targets.push((Some(index), rule.decision, format!("rule[{index}]")));
        }
        for (rule, decision, reason) in targets {
            let conditions: &[Condition] = match rule.and_then(|index| entry.rules.get(index)) {
                Some(rule) => &rule.when,
                None => &[],
            };
            let first = synthesize(document, action, entry, conditions, decision, &reason, "probe-a");
            match first {
                Ok(a) => {
                    let fresh_keys = match synthesize(document, action, entry, conditions, decision, &reason, "probe-b")
                    {
                        Ok(b) => a.effect_key.is_some() && a.effect_key != b.effect_key,
                        Err(_) => false,
                    };
                    cases.push(Case { action, entry, rule, decision, reason, fresh_keys });
                }
                Err(why) => unreachable.push(format!("{action} {reason} ({}): {why}", decision.as_str())),
            }
        }
    }
    (cases, unreachable)
}

pub(super) fn fresh(tag: &str, name: &str) -> String {
    format!("verify-{tag}-{name}")
}

fn integer_of(value: &Value) -> Option<i128> {
    match value {
        Value::Number(n) if crate::canonical::is_integer(n) => n.as_str().parse().ok(),
        _ => None,
    }
}

/// The integers an order condition admits, as (lowest, highest): a float bound (`warden/v1`) is
/// met by the integers on its side of it, from its floor or ceiling.
fn integer_range(op: Op, operand: &Value) -> Option<(Option<i128>, Option<i128>)> {
    let (floor, ceiling) = match integer_of(operand) {
        Some(bound) => (bound, bound),
        None => {
            let double = operand.as_f64().filter(|d| d.is_finite())?;
            (whole(double.floor())?, whole(double.ceil())?)
        }
    };
    Some(match op {
        Op::Gt => (floor.checked_add(1), None),
        Op::Gte => (Some(ceiling), None),
        Op::Lt => (None, ceiling.checked_sub(1)),
        _ => (None, Some(floor)),
    })
}

/// The integers next to an operand that other rules compare with: itself, or a float's floor
/// and ceiling.
fn integer_points(operand: &Value) -> Vec<i128> {
    match (integer_of(operand), operand.as_f64().filter(|d| d.is_finite())) {
        (Some(n), _) => vec![n],
        (None, Some(double)) => [double.floor(), double.ceil()].into_iter().filter_map(whole).collect(),
        (None, None) => Vec::new(),
    }
}

/// A whole double as an integer, within what `i128` holds.
fn whole(double: f64) -> Option<i128> {
    (double.abs() < 1e38).then_some(double as i128)
}

fn integer_value(n: i128) -> Option<Value> {
    serde_json::from_str(&n.to_string()).ok()
}

/// Whether `value` satisfies one condition, by the policy's own equality.
pub(super) fn satisfies(value: &Value, condition: &Condition) -> bool {
    let equal = crate::condition::equal;
    match condition.op {
        Op::Eq => equal(value, &condition.operand),
        Op::Neq => !equal(value, &condition.operand),
        Op::In => condition.operand.as_array().is_some_and(|items| items.iter().any(|item| equal(value, item))),
        Op::Lt | Op::Lte | Op::Gt | Op::Gte => match (value, &condition.operand) {
            (Value::Number(v), Value::Number(bound)) => match crate::condition::compare_numbers(v, bound) {
                Some(order) => match condition.op {
                    Op::Lt => order.is_lt(),
                    Op::Lte => order.is_le(),
                    Op::Gt => order.is_gt(),
                    _ => order.is_ge(),
                },
                None => false,
            },
            _ => false,
        },
    }
}

/// A value of the operand's type that is not the operand.
pub(super) fn different(operand: &Value, fresh_text: &str) -> Option<Value> {
    Some(match operand {
        Value::String(s) if s == fresh_text => Value::String(format!("{s}-other")),
        Value::String(_) | Value::Null => Value::String(fresh_text.to_owned()),
        Value::Bool(b) => Value::Bool(!b),
        Value::Number(_) => integer_value(integer_of(operand)?.checked_add(1)?)?,
        Value::Array(items) if items.is_empty() => Value::Array(vec![Value::String(fresh_text.to_owned())]),
        Value::Array(_) => Value::Array(Vec::new()),
        Value::Object(map) if map.is_empty() => {
            let mut map = Map::new();
            map.insert("verify".into(), Value::String(fresh_text.to_owned()));
            Value::Object(map)
        }
        Value::Object(_) => Value::Object(Map::new()),
    })
}

/// What an effect-key placeholder can render: a non-empty string or an integer.
pub(super) fn renders(value: &Value) -> bool {
    matches!(value, Value::String(s) if !s.is_empty()) || integer_of(value).is_some()
}

/// Up to [`VALUES_PER_SUBJECT`] values satisfying every condition on one argument. `hints` are
/// the integers any rule of the entry compares this argument with.
fn subject_values(
    subject: &str,
    conditions: &[&Condition],
    hints: &[i128],
    placeholder: bool,
    tag: &str,
) -> Vec<Value> {
    let fresh_text = fresh(tag, subject);
    let mut pool: Vec<Value> = Vec::new();
    pool.extend(conditions.iter().filter(|c| c.op == Op::Eq).map(|c| c.operand.clone()));
    for condition in conditions.iter().filter(|c| c.op == Op::In) {
        if let Some(items) = condition.operand.as_array() {
            pool.extend(items.iter().cloned());
        }
    }
    let mut low: Option<i128> = None;
    let mut high: Option<i128> = None;
    for condition in conditions.iter().filter(|c| c.op.is_order()) {
        let Some((lo, hi)) = integer_range(condition.op, &condition.operand) else { continue };
        if let Some(lo) = lo {
            low = Some(low.map_or(lo, |l| l.max(lo)));
        }
        if let Some(hi) = hi {
            high = Some(high.map_or(hi, |h| h.min(hi)));
        }
    }
    let inside = |n: i128| low.is_none_or(|l| n >= l) && high.is_none_or(|h| n <= h);
    if low.is_some() || high.is_some() {
        // The bounds, a few steps inward, and both sides of every integer the entry's other
        // rules test this argument against, so an earlier overlapping rule can be stepped past.
        let mut points: BTreeSet<i128> = BTreeSet::new();
        for end in [low, high].into_iter().flatten() {
            points.extend((0..3).filter_map(|step| end.checked_add(step)));
            points.extend((0..3).filter_map(|step| end.checked_sub(step)));
        }
        for hint in hints {
            points.extend([hint.checked_sub(1), Some(*hint), hint.checked_add(1)].into_iter().flatten());
        }
        pool.extend(points.into_iter().filter(|n| inside(*n)).filter_map(integer_value));
    }
    if placeholder {
        pool.push(Value::String(fresh_text.clone()));
    }
    for condition in conditions.iter().filter(|c| c.op == Op::Neq) {
        pool.extend(different(&condition.operand, &fresh_text));
    }
    let mut values: Vec<Value> = Vec::new();
    for value in pool {
        if conditions.iter().all(|c| satisfies(&value, c)) && !values.contains(&value) {
            values.push(value);
        }
    }
    if placeholder {
        values.sort_by_key(|value| !renders(value));
    }
    values.truncate(VALUES_PER_SUBJECT);
    values
}

/// Arguments that make `evaluate` give exactly (`decision`, `reason`) for `action`, with every
/// template placeholder filled, and the effect key and resource rendering.
fn synthesize(
    document: &Document,
    action: &str,
    entry: &ActionEntry,
    conditions: &[Condition],
    decision: Decision,
    reason: &str,
    tag: &str,
) -> std::result::Result<Call, String> {
    let mut placeholders: BTreeSet<&str> = BTreeSet::new();
    let mut needs_resource = false;
    if let Some(effect) = &entry.effect {
        for name in effect.placeholders() {
            match (name, &entry.resource) {
                ("resource", None) => needs_resource = true,
                ("resource", Some(_)) => {}
                (name, _) => {
                    placeholders.insert(name);
                }
            }
        }
    }
    if let Some(resource) = &entry.resource {
        placeholders.extend(resource.placeholders());
    }
    let mut by_subject: BTreeMap<&str, Vec<&Condition>> = BTreeMap::new();
    for condition in conditions {
        by_subject.entry(condition.subject.as_str()).or_default().push(condition);
    }
    let mut choices: Vec<(&str, Vec<Value>)> = Vec::new();
    for (subject, subject_conditions) in &by_subject {
        let hints: Vec<i128> = entry
            .rules
            .iter()
            .flat_map(|rule| &rule.when)
            .filter(|c| c.subject == *subject)
            .flat_map(|c| integer_points(&c.operand))
            .collect();
        let values = subject_values(subject, subject_conditions, &hints, placeholders.contains(subject), tag);
        if values.is_empty() {
            let keys: Vec<&str> = subject_conditions.iter().map(|c| c.key.as_str()).collect();
            return Err(format!("no value satisfies {} together", keys.join(", ")));
        }
        choices.push((subject, values));
    }
    let mut base = Map::new();
    for name in &placeholders {
        if !by_subject.contains_key(name) {
            base.insert((*name).to_owned(), Value::String(fresh(tag, name)));
        }
    }
    let resource = needs_resource.then(|| fresh(tag, "resource"));
    let mut first_miss: Option<String> = None;
    let mut picks = vec![0usize; choices.len()];
    for _ in 0..MAX_COMBINATIONS {
        let mut arguments = base.clone();
        for ((subject, values), pick) in choices.iter().zip(&picks) {
            if let Some(value) = values.get(*pick) {
                arguments.insert((*subject).to_owned(), value.clone());
            }
        }
        match check_call(document, action, entry, arguments, resource.clone(), decision, reason) {
            Ok(call) => return Ok(call),
            Err(miss) => {
                first_miss.get_or_insert(miss);
            }
        }
        // The next combination, odometer-style; stop after the last.
        let mut advanced = false;
        for (pick, (_, values)) in picks.iter_mut().zip(&choices) {
            if *pick + 1 < values.len() {
                *pick += 1;
                advanced = true;
                break;
            }
            *pick = 0;
        }
        if !advanced {
            break;
        }
    }
    Err(first_miss.unwrap_or_else(|| "no arguments could be synthesized".into()))
}

fn check_call(
    document: &Document,
    action: &str,
    entry: &ActionEntry,
    arguments: Map<String, Value>,
    resource: Option<String>,
    decision: Decision,
    reason: &str,
) -> std::result::Result<Call, String> {
    let ruling = crate::policy::evaluate(document, action, &arguments).ruling;
    if ruling.decision != decision || ruling.reason != reason {
        return Err(format!(
            "synthesized arguments were decided {} by {}, not {} by {reason}",
            ruling.decision.as_str(),
            ruling.reason,
            decision.as_str()
        ));
    }
    let rendered_resource =
        crate::pipeline::resource_for(Some(document), action, &Value::Object(arguments.clone()), resource.as_deref())
            .map_err(|e| format!("the resource does not render: {e}"))?;
    let effect_key = match &entry.effect {
        Some(template) => Some(
            template
                .render_effect_key(&arguments, rendered_resource.as_deref())
                .map_err(|e| format!("the effect key does not render: {e}"))?,
        ),
        None => None,
    };
    Ok(Call { arguments, resource, effect_key })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn number(text: &str) -> Value {
        Value::Number(text.parse().expect("a JSON number"))
    }

    #[test]
    fn a_float_bound_is_met_by_the_integers_on_its_side_and_an_integer_bound_by_itself() {
        let table = [
            (Op::Lte, "10.5", (None, Some(10))),
            (Op::Lt, "10.5", (None, Some(10))),
            (Op::Gte, "10.5", (Some(11), None)),
            (Op::Gt, "10.5", (Some(11), None)),
            (Op::Lte, "-10.5", (None, Some(-11))),
            (Op::Gt, "-10.5", (Some(-10), None)),
            (Op::Lte, "10", (None, Some(10))),
            (Op::Lt, "10", (None, Some(9))),
            (Op::Gte, "10", (Some(10), None)),
            (Op::Gt, "10", (Some(11), None)),
            (Op::Lt, "1e+21", (None, Some(999_999_999_999_999_999_999))),
        ];
        for (op, bound, expected) in table {
            assert_eq!(integer_range(op, &number(bound)), Some(expected), "{op:?} {bound}");
        }
        assert_eq!(integer_range(Op::Lte, &Value::String("10".into())), None);
        assert_eq!(integer_range(Op::Lte, &number("1e300")), None, "past what i128 holds");
        assert_eq!(integer_points(&number("10.5")), [10, 11]);
        assert_eq!(integer_points(&number("-7")), [-7]);
        assert!(integer_points(&Value::Bool(true)).is_empty());
    }

    #[test]
    fn a_float_operand_is_satisfied_by_value() {
        let condition = |op: Op, operand: &str| Condition {
            key: format!("a_{}", op.as_str()),
            subject: "a".into(),
            op,
            operand: number(operand),
        };
        assert!(satisfies(&number("10"), &condition(Op::Lte, "10.5")));
        assert!(!satisfies(&number("11"), &condition(Op::Lte, "10.5")));
        assert!(satisfies(&number("10.5"), &condition(Op::Gte, "10.5")));
        assert!(!satisfies(&number("10.5"), &condition(Op::Gt, "10.5")));
        assert!(satisfies(&number("10.25"), &condition(Op::Lt, "10.5")));
        assert!(!satisfies(&Value::String("1".into()), &condition(Op::Lt, "10.5")));
    }
}
