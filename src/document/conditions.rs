//! Rules and their conditions: `<argument>_<op>` keys and the operands each operator takes.

use serde_json::Value;

use crate::canonical::Floats;
use crate::condition::{Condition, Op};

use super::ctrlrun::{CTRLRUN_RULE_KEYS, DATA_SCOPE};
use super::cx::Cx;
use super::error::DocumentError;
use super::model::{Rule, RESERVED_SUBJECTS};
use super::quote::shorten;
use super::tree::{child_path, integer_number, Member, Node, NodeValue};
use super::warden::WARDEN_RULE_KEYS;

/// ctrlrun's operators, longest first, so `amount_neq` splits as (`amount`, `neq`) and never as
/// (`amount_n`, `eq`). The order within one length is ctrlrun's (a stable sort of its tuple).
const OPERATORS_BY_LENGTH: [(&str, Op); 7] = [
    ("neq", Op::Neq),
    ("lte", Op::Lte),
    ("gte", Op::Gte),
    ("eq", Op::Eq),
    ("in", Op::In),
    ("lt", Op::Lt),
    ("gt", Op::Gt),
];

impl Cx<'_> {
    pub(super) fn rules(&self, member: &Member, path: &str) -> Result<Vec<Rule>, DocumentError> {
        let items = match &member.value.value {
            NodeValue::Seq(items) if !items.is_empty() => items,
            _ => {
                return Err(self.error(
                    path,
                    Some(member.line),
                    format!("'rules' must be a non-empty list, got {}", describe_rules(&member.value)),
                ))
            }
        };
        let mut rules = Vec::with_capacity(items.len());
        for (index, item) in items.iter().enumerate() {
            rules.push(self.rule(item, &format!("{path}[{index}]"))?);
        }
        Ok(rules)
    }

    fn rule(&self, node: &Node, path: &str) -> Result<Rule, DocumentError> {
        let NodeValue::Map(members) = &node.value else {
            return Err(self.error(path, Some(node.line), format!("a rule must be a mapping, got {}", node.kind())));
        };
        self.reject_nested_mode(members, path)?;
        let allowed: &[&str] = if self.warden() { &WARDEN_RULE_KEYS } else { &CTRLRUN_RULE_KEYS };
        self.reject_unknown(members, allowed, path)?;
        let get = |key: &str| members.iter().find(|m| m.key == key);
        let Some(decision) = get("decision") else {
            return Err(self.error(path, Some(node.line), "a rule must have a 'decision'"));
        };
        let decision = self.decision(&decision.value, &child_path(path, "decision"), decision.line)?;
        if let Some(member) = get("controls") {
            self.no_op_citations(member, &child_path(path, "controls"))?;
        }
        let (approval, scoped) = match get("approval") {
            None => (None, None),
            Some(member) => {
                let (requirement, scoped) = self.approval_requirement(member, path, decision)?;
                (Some(requirement), scoped)
            }
        };
        let Some(when) = get("when") else {
            return Ok(Rule { when: Vec::new(), decision, approval, scoped });
        };
        let when_path = child_path(path, "when");
        // An empty mapping is a truncated edit; the catch-all is spelled "no 'when'" (ctrlrun).
        let conditions = match &when.value.value {
            NodeValue::Map(conditions) if !conditions.is_empty() => conditions,
            _ => {
                return Err(self.error(
                    &when_path,
                    Some(when.line),
                    format!(
                        "'when' must be a non-empty mapping of conditions, got {}; leave 'when' out for a rule \
                         that always matches",
                        describe_when(&when.value)
                    ),
                ))
            }
        };
        let mut parsed = Vec::with_capacity(conditions.len());
        for condition in conditions {
            parsed.push(self.condition(condition, &child_path(&when_path, &condition.key), self.schema.floats())?);
        }
        Ok(Rule { when: parsed, decision, approval, scoped })
    }

    /// One `<argument>_<op>: operand`; `floats` says whether the operand may be (or hold) a
    /// float, kept in its canonical reading.
    pub(super) fn condition(&self, member: &Member, path: &str, floats: Floats) -> Result<Condition, DocumentError> {
        let key = &member.key;
        let line = Some(member.line);
        let Some((subject, op)) = split_condition_key(key) else {
            return Err(self.error(
                path,
                line,
                format!(
                    "condition '{}' must be '<argument>_<op>' where op is one of eq, gt, gte, in, lt, lte, neq",
                    shorten(key)
                ),
            ));
        };
        if subject == DATA_SCOPE {
            return Err(self.error(
                path,
                line,
                format!(
                    "condition '{}' addresses '{DATA_SCOPE}', ctrlrun's derived data-label subject; data labels are \
                     not supported by Warden",
                    shorten(key)
                ),
            ));
        }
        if RESERVED_SUBJECTS.contains(&subject) {
            return Err(self.error(
                path,
                line,
                format!(
                    "condition '{}' names the action field '{subject}', not an argument; a condition can only \
                     address the action's arguments, so this rule would never match. If the action really \
                     takes an argument called '{subject}', rename it",
                    shorten(key)
                ),
            ));
        }
        let operand = self.operand(op, &member.value, key, path, floats)?;
        Ok(Condition { key: key.clone(), subject: subject.to_owned(), op, operand })
    }

    fn operand(&self, op: Op, node: &Node, key: &str, path: &str, floats: Floats) -> Result<Value, DocumentError> {
        let key = shorten(key);
        if op.is_order() {
            return match &node.value {
                NodeValue::Int(text) => Ok(Value::Number(integer_number(text))),
                NodeValue::Float(..) if floats == Floats::Rfc8785 => self.json_with(node, path, floats),
                NodeValue::Float(..) => Err(self.error(
                    path,
                    Some(node.line),
                    format!(
                        "condition '{key}': a numeric operator needs an integer operand, got {}. Only integers can \
                         be bounded: write amounts in integer minor units (amount_lte: 200000)",
                        node.shown()
                    ),
                )),
                _ => Err(self.error(
                    path,
                    Some(node.line),
                    format!(
                        "condition '{key}': a numeric operator needs {} operand, got {}",
                        match floats {
                            Floats::Refused => "an integer",
                            Floats::Rfc8785 => "a number",
                        },
                        node.shown()
                    ),
                )),
            };
        }
        if op == Op::In {
            let NodeValue::Seq(items) = &node.value else {
                return Err(self.error(
                    path,
                    Some(node.line),
                    format!("condition '{key}': '_in' needs a list operand, got {}", node.kind()),
                ));
            };
            let mut values = Vec::with_capacity(items.len());
            for (index, item) in items.iter().enumerate() {
                values.push(self.checked_operand(item, &key, &format!("{path}[{index}]"), floats)?);
            }
            return Ok(Value::Array(values));
        }
        if let NodeValue::Seq(items) = &node.value {
            // ctrlrun refuses nested containers inside an `_eq`/`_neq` list (its set comparison
            // needs hashable elements), whatever the subject.
            if let Some((index, item)) =
                items.iter().enumerate().find(|(_, item)| matches!(item.value, NodeValue::Seq(_) | NodeValue::Map(_)))
            {
                return Err(self.error(
                    &format!("{path}[{index}]"),
                    Some(item.line),
                    format!("condition '{key}': a list operand holds scalars, got {}; write it flat", item.kind()),
                ));
            }
        }
        self.checked_operand(node, &key, path, floats)
    }

    /// An operand value: JSON without timestamps, and without floats where `floats` refuses them
    /// (ctrlrun's `_checked_operand`).
    fn checked_operand(&self, node: &Node, key: &str, path: &str, floats: Floats) -> Result<Value, DocumentError> {
        match &node.value {
            NodeValue::Float(..) if floats == Floats::Refused => Err(self.error(
                path,
                Some(node.line),
                format!(
                    "condition '{key}': float operands are not allowed, got {}; use integer minor units \
                     (amount_lte: 50000) or a decimal string",
                    node.shown()
                ),
            )),
            NodeValue::Timestamp(_) => Err(self.error(
                path,
                Some(node.line),
                format!("condition '{key}': {} is not an allowed operand type; quote it", node.shown()),
            )),
            _ => self.json_with(node, path, floats),
        }
    }
}

fn describe_rules(node: &Node) -> String {
    match &node.value {
        NodeValue::Seq(_) => "an empty list".into(),
        _ => node.kind().into(),
    }
}

fn describe_when(node: &Node) -> String {
    match &node.value {
        NodeValue::Map(_) => "an empty mapping".into(),
        _ => node.kind().into(),
    }
}

/// `<argument>_<op>`, longest operator first; the argument is never empty.
fn split_condition_key(key: &str) -> Option<(&str, Op)> {
    OPERATORS_BY_LENGTH.iter().find_map(|(name, op)| {
        let subject = key.strip_suffix(name)?.strip_suffix('_')?;
        (!subject.is_empty()).then_some((subject, *op))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn condition_keys_split_on_the_longest_operator() {
        assert_eq!(split_condition_key("amount_lte"), Some(("amount", Op::Lte)));
        assert_eq!(split_condition_key("amount_neq"), Some(("amount", Op::Neq)));
        assert_eq!(split_condition_key("a__eq"), Some(("a_", Op::Eq)));
        assert_eq!(split_condition_key("role_in"), Some(("role", Op::In)));
        assert_eq!(split_condition_key("_eq"), None);
        assert_eq!(split_condition_key("amount"), None);
        assert_eq!(split_condition_key("amount_between"), None);
    }

    /// A document with one rule whose `when` is `condition`, in the dialect `schema`.
    fn with_condition(schema: &str, condition: &str) -> String {
        format!(
            "schema: {schema}\nactions:\n  get-sum:\n    rules:\n      - when: {{ {condition} }}\n        decision: allow\n      - decision: deny\n"
        )
    }

    /// Operands by dialect: warden/v1 takes floats (RFC 8785), ctrlrun refuses them with its own
    /// words — for a bound and for an equality alike; an unquoted timestamp is refused in both
    /// (by warden/v1 before it is an operand: its meaning depends on the YAML version).
    /// `None`: the document loads; `Some(words)`: refused, the error holding those words.
    #[test]
    fn operands_are_admitted_or_refused_by_the_documents_dialect() {
        const WARDEN: &str = "warden/v1";
        const CTRLRUN: &str = "ctrlrun.policy/v3";
        let table: &[(&str, &str, Option<&str>)] = &[
            (WARDEN, "a_lte: 10.5", None),
            (WARDEN, "a_eq: 1.5", None),
            (WARDEN, "a_in: [1.5, 2]", None),
            (WARDEN, "a_lte: 10", None),
            (CTRLRUN, "a_lte: 10", None),
            (CTRLRUN, "a_eq: text", None),
            (CTRLRUN, "a_lte: 10.5", Some("Only integers can be bounded")),
            (CTRLRUN, "a_eq: 1.5", Some("float operands are not allowed")),
            (CTRLRUN, "a_in: [1.5, 2]", Some("float operands are not allowed")),
            (WARDEN, "a_lte: text", Some("a numeric operator needs a number operand")),
            (CTRLRUN, "a_lte: text", Some("a numeric operator needs an integer operand")),
            (WARDEN, "a_eq: 2026-01-01T00:00:00Z", Some("depends on the YAML version")),
            (CTRLRUN, "a_eq: 2026-01-01T00:00:00Z", Some("is not an allowed operand type")),
        ];
        for (schema, condition, refused) in table {
            let loaded = crate::document::load_str(&with_condition(schema, condition), "t.yaml");
            match (refused, &loaded) {
                (None, Ok(_)) => {}
                (Some(words), Err(error)) => {
                    assert!(error.to_string().contains(words), "{schema} {condition}: {error}");
                }
                (None, Err(error)) => panic!("{schema} {condition} is refused: {error}"),
                (Some(words), Ok(_)) => panic!("{schema} {condition} loads; expected a refusal saying {words}"),
            }
        }
    }
}
