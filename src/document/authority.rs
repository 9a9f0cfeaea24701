//! The `authority:` section of a `warden/v1` document, a standalone authority file, and a
//! delegated grant file, parsed into the typed grants of `crate::authority` with closed key sets
//! and errors that name the path and line.

use serde_json::{Map, Value};

use crate::authority::grant::{parse_instant, MAX_WINDOW_SECONDS};
use crate::authority::section::check_root_id;
use crate::authority::{
    validate_pattern, Authority, Budget, Grant, PatternKind, Subject, DEFAULT_MAX_DELEGATION_DEPTH,
};
use crate::canonical::Floats;
use crate::clock::{parse_duration, MICROS_PER_SECOND};
use crate::condition::Condition;

use super::cx::Cx;
use super::error::DocumentError;
use super::quote::shorten;
use super::schema_kind::Schema;
use super::tree::{child_path, Member, Node, NodeValue};

/// A grant's constraints keep integer operands, though the document is `warden/v1`: a
/// delegation must constrain at least as strictly as its parent, and that containment
/// (`authority::containment`) and the budgets' metrics compare integers only, so a float bound
/// could never be narrowed by a delegation. Float arguments are still compared with integer
/// bounds by value.
const CONSTRAINT_FLOATS: Floats = Floats::Refused;

pub(super) const AUTHORITY_KEYS: [&str; 2] = ["grants", "max_delegation_depth"];
pub(super) const GRANT_KEYS: [&str; 10] = [
    "actions",
    "budgets",
    "constraints",
    "delegable",
    "environments",
    "expires_at",
    "id",
    "resources",
    "subject",
    "tasks",
];
const DELEGATED_GRANT_KEYS: [&str; 9] =
    ["actions", "budgets", "constraints", "delegable", "environments", "expires_at", "resources", "subject", "tasks"];
const SUBJECT_KEYS: [&str; 2] = ["agent", "user"];
const BUDGET_KEYS: [&str; 3] = ["limit", "metric", "window"];
pub(super) const STANDALONE_KEYS: [&str; 2] = ["authority", "schema"];

/// Root grant or delegated grant: the second has no `id` (it is assigned at creation).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum GrantOrigin {
    Root,
    Delegated,
}

impl Cx<'_> {
    /// The whole section: `max_delegation_depth` (default 3) and `grants` (required; `[]` permits
    /// nothing, an absent key would make a truncated edit look deliberate).
    pub(super) fn authority_config(&self, member: &Member) -> Result<Authority, DocumentError> {
        let path = "authority";
        let NodeValue::Map(members) = &member.value.value else {
            return Err(self.error(
                path,
                Some(member.line),
                format!("'authority' must be a mapping (with 'grants'), got {}", member.value.kind()),
            ));
        };
        self.reject_nested_mode(members, path)?;
        if let Some(glass) = members.iter().find(|m| m.key == "break_glass") {
            return Err(self.error(
                &child_path(path, "break_glass"),
                Some(glass.line),
                "break-glass envelopes are not supported by Warden; declare the grant an incident needs as an \
                 ordinary grant with a short 'expires_at'",
            ));
        }
        self.reject_unknown(members, &AUTHORITY_KEYS, path)?;
        let get = |key: &str| members.iter().find(|m| m.key == key);
        let max_delegation_depth = match get("max_delegation_depth") {
            None => DEFAULT_MAX_DELEGATION_DEPTH,
            Some(depth) => self.max_delegation_depth(depth)?,
        };
        let Some(grants_member) = get("grants") else {
            return Err(self.error(
                path,
                Some(member.line),
                "'authority' needs 'grants': a section that governs every action must state what it permits; \
                 write 'grants: []' to permit nothing",
            ));
        };
        let grants_path = child_path(path, "grants");
        let NodeValue::Seq(items) = &grants_member.value.value else {
            return Err(self.error(
                &grants_path,
                Some(grants_member.line),
                format!("'grants' must be a list of grants, got {}", grants_member.value.kind()),
            ));
        };
        let mut grants: Vec<Grant> = Vec::with_capacity(items.len());
        for (index, item) in items.iter().enumerate() {
            let item_path = format!("{grants_path}[{index}]");
            let grant = self.grant(item, &item_path, GrantOrigin::Root)?;
            if let Some(first) = grants.iter().position(|g| g.id == grant.id) {
                return Err(self.error(
                    &child_path(&item_path, "id"),
                    Some(item.line),
                    format!(
                        "duplicate grant id '{}' (first at {grants_path}[{first}]); a delegation names its parent \
                         by id, so two grants answering to one name is an ambiguity nobody can resolve later",
                        shorten(&grant.id)
                    ),
                ));
            }
            grants.push(grant);
        }
        Authority::new(grants, max_delegation_depth).map_err(|e| self.error(&grants_path, Some(grants_member.line), e))
    }

    fn max_delegation_depth(&self, member: &Member) -> Result<u32, DocumentError> {
        let path = "authority.max_delegation_depth";
        match &member.value.value {
            NodeValue::Int(text) if !text.starts_with('-') => text.parse::<u32>().map_err(|_| {
                self.error(
                    path,
                    Some(member.line),
                    format!("'max_delegation_depth' is {}, which is too large", shorten(text)),
                )
            }),
            _ => Err(self.error(
                path,
                Some(member.line),
                format!(
                    "'max_delegation_depth' must be a non-negative integer (0 forbids delegation), got {}",
                    member.value.shown()
                ),
            )),
        }
    }

    /// One grant. Every key is checked where it stands, then the model's own rules run.
    pub(super) fn grant(&self, node: &Node, path: &str, origin: GrantOrigin) -> Result<Grant, DocumentError> {
        let NodeValue::Map(members) = &node.value else {
            return Err(self.error(path, Some(node.line), format!("a grant must be a mapping, got {}", node.kind())));
        };
        self.reject_nested_mode(members, path)?;
        let get = |key: &str| members.iter().find(|m| m.key == key);
        let id = match origin {
            GrantOrigin::Root => {
                self.reject_unknown(members, &GRANT_KEYS, path)?;
                let Some(id) = get("id") else {
                    return Err(self.error(
                        path,
                        Some(node.line),
                        "a grant needs an 'id'; delegations name their parent by it",
                    ));
                };
                let id_path = child_path(path, "id");
                let Some(text) = id.value.as_str() else {
                    return Err(self.error(
                        &id_path,
                        Some(id.line),
                        format!("'id' must be a string, got {}", id.value.shown()),
                    ));
                };
                check_root_id(text).map_err(|e| self.error(&id_path, Some(id.line), e))?;
                text.to_owned()
            }
            GrantOrigin::Delegated => {
                if let Some(id) = get("id") {
                    return Err(self.error(
                        &child_path(path, "id"),
                        Some(id.line),
                        "a delegated grant may not carry 'id'; the id is assigned when the delegation is created",
                    ));
                }
                self.reject_unknown(members, &DELEGATED_GRANT_KEYS, path)?;
                String::new()
            }
        };
        let subject = match get("subject") {
            None => {
                return Err(self.error(path, Some(node.line), "a grant needs a 'subject' with 'agent' and/or 'user'"))
            }
            Some(member) => self.subject(member, &child_path(path, "subject"))?,
        };
        let actions = match get("actions") {
            None => {
                return Err(self.error(
                    path,
                    Some(node.line),
                    "a grant needs 'actions', a non-empty list of action patterns",
                ))
            }
            Some(member) => self.patterns(member, &child_path(path, "actions"), PatternKind::Action)?,
        };
        let optional_patterns = |key: &str, kind: PatternKind| match get(key) {
            None => Ok(None),
            Some(member) => self.patterns(member, &child_path(path, key), kind).map(Some),
        };
        let resources = optional_patterns("resources", PatternKind::Resource)?;
        let tasks = optional_patterns("tasks", PatternKind::Task)?;
        let constraints = match get("constraints") {
            None => Vec::new(),
            Some(member) => self.constraints(member, &child_path(path, "constraints"))?,
        };
        let environments = match get("environments") {
            None => None,
            Some(member) => Some(self.environments(member, &child_path(path, "environments"))?),
        };
        let expires_at = match get("expires_at") {
            None => None,
            Some(member) => {
                let at_path = child_path(path, "expires_at");
                let Some(text) = member.value.as_str() else {
                    return Err(self.error(
                        &at_path,
                        Some(member.line),
                        format!(
                            "'expires_at' must be a quoted RFC 3339 timestamp with an offset, such as \
                             \"2026-11-01T00:00:00Z\", got {}",
                            member.value.shown()
                        ),
                    ));
                };
                Some(parse_instant(text).map_err(|e| self.error(&at_path, Some(member.line), e))?)
            }
        };
        let delegable = match get("delegable") {
            None => false,
            Some(member) => match member.value.value {
                NodeValue::Bool(b) => b,
                _ => {
                    return Err(self.error(
                        &child_path(path, "delegable"),
                        Some(member.line),
                        format!("'delegable' must be true or false, got {}", member.value.shown()),
                    ))
                }
            },
        };
        if delegable && expires_at.is_none() {
            return Err(self.error(
                &child_path(path, "delegable"),
                get("delegable").map(|m| m.line),
                "a grant with 'delegable: true' must declare 'expires_at': nothing else bounds the population a \
                 delegable grant can reach",
            ));
        }
        let budgets = match get("budgets") {
            None => None,
            Some(member) => Some(self.budgets(member, &child_path(path, "budgets"))?),
        };
        let grant =
            Grant { id, subject, actions, resources, constraints, environments, expires_at, delegable, tasks, budgets };
        grant.validate().map_err(|e| self.error(path, Some(node.line), e))?;
        Ok(grant)
    }

    fn subject(&self, member: &Member, path: &str) -> Result<Subject, DocumentError> {
        let NodeValue::Map(members) = &member.value.value else {
            return Err(self.error(
                path,
                Some(member.line),
                format!("'subject' must be a mapping with 'agent' and/or 'user', got {}", member.value.kind()),
            ));
        };
        self.reject_unknown(members, &SUBJECT_KEYS, path)?;
        let mut fields = [None, None];
        for (slot, key) in fields.iter_mut().zip(SUBJECT_KEYS) {
            let Some(field) = members.iter().find(|m| m.key == key) else { continue };
            let field_path = child_path(path, key);
            let Some(text) = field.value.as_str() else {
                return Err(self.error(
                    &field_path,
                    Some(field.line),
                    format!("'{key}' must be a pattern string, got {}", field.value.shown()),
                ));
            };
            validate_pattern(text, PatternKind::Subject).map_err(|e| self.error(&field_path, Some(field.line), e))?;
            *slot = Some(text.to_owned());
        }
        let [agent, user] = fields;
        if agent.is_none() && user.is_none() {
            return Err(self.error(
                path,
                Some(member.line),
                "a subject must declare at least one of 'agent' and 'user'; a subject for every principal is \
                 written agent: \"*\"",
            ));
        }
        Ok(Subject { agent, user })
    }

    /// A present pattern list is non-empty; absence is what grants "any" where that exists.
    fn patterns(&self, member: &Member, path: &str, kind: PatternKind) -> Result<Vec<String>, DocumentError> {
        let items = match &member.value.value {
            NodeValue::Seq(items) if !items.is_empty() => items,
            _ => {
                return Err(self.error(
                    path,
                    Some(member.line),
                    format!(
                        "'{}' must be a non-empty list of patterns, got {}",
                        member.key,
                        describe_list(&member.value)
                    ),
                ))
            }
        };
        let mut patterns = Vec::with_capacity(items.len());
        for (index, item) in items.iter().enumerate() {
            let item_path = format!("{path}[{index}]");
            let Some(text) = item.as_str() else {
                return Err(self.error(
                    &item_path,
                    Some(item.line),
                    format!("a pattern must be a string, got {}", item.shown()),
                ));
            };
            validate_pattern(text, kind).map_err(|e| self.error(&item_path, Some(item.line), e))?;
            patterns.push(text.to_owned());
        }
        Ok(patterns)
    }

    fn environments(&self, member: &Member, path: &str) -> Result<Vec<String>, DocumentError> {
        let items = match &member.value.value {
            NodeValue::Seq(items) if !items.is_empty() => items,
            _ => {
                return Err(self.error(
                    path,
                    Some(member.line),
                    format!("'environments' must be a non-empty list of names, got {}", describe_list(&member.value)),
                ))
            }
        };
        let mut names = Vec::with_capacity(items.len());
        for (index, item) in items.iter().enumerate() {
            match item.as_str() {
                Some(text) if !text.is_empty() => names.push(text.to_owned()),
                _ => {
                    return Err(self.error(
                        &format!("{path}[{index}]"),
                        Some(item.line),
                        format!("an environment must be a non-empty string, got {}", item.shown()),
                    ))
                }
            }
        }
        Ok(names)
    }

    /// The condition syntax of rules, by the same parser; an empty mapping is a truncated edit.
    fn constraints(&self, member: &Member, path: &str) -> Result<Vec<Condition>, DocumentError> {
        let conditions = match &member.value.value {
            NodeValue::Map(conditions) if !conditions.is_empty() => conditions,
            _ => {
                return Err(self.error(
                    path,
                    Some(member.line),
                    format!(
                        "'constraints' must be a non-empty mapping of conditions, or absent, got {}",
                        match &member.value.value {
                            NodeValue::Map(_) => "an empty mapping",
                            _ => member.value.kind(),
                        }
                    ),
                ))
            }
        };
        conditions
            .iter()
            .map(|condition| self.condition(condition, &child_path(path, &condition.key), CONSTRAINT_FLOATS))
            .collect()
    }

    fn budgets(&self, member: &Member, path: &str) -> Result<Vec<Budget>, DocumentError> {
        let items = match &member.value.value {
            NodeValue::Seq(items) if !items.is_empty() => items,
            _ => {
                return Err(self.error(
                    path,
                    Some(member.line),
                    format!(
                        "'budgets' must be a non-empty list of {{metric, limit, window}} mappings, or absent, got {}",
                        describe_list(&member.value)
                    ),
                ))
            }
        };
        let mut budgets = Vec::with_capacity(items.len());
        for (index, item) in items.iter().enumerate() {
            let item_path = format!("{path}[{index}]");
            let NodeValue::Map(fields) = &item.value else {
                return Err(self.error(
                    &item_path,
                    Some(item.line),
                    format!("a budget must be a mapping, got {}", item.kind()),
                ));
            };
            self.reject_unknown(fields, &BUDGET_KEYS, &item_path)?;
            let get = |key: &str| {
                fields.iter().find(|m| m.key == key).ok_or_else(|| {
                    self.error(
                        &item_path,
                        Some(item.line),
                        format!("a budget needs '{key}' (metric, limit and window)"),
                    )
                })
            };
            let metric = get("metric")?;
            let metric_text = match metric.value.as_str() {
                Some(text) if !text.trim().is_empty() => text.to_owned(),
                _ => {
                    return Err(self.error(
                        &child_path(&item_path, "metric"),
                        Some(metric.line),
                        format!(
                            "'metric' must be 'count' or the name of an integer argument, got {}",
                            metric.value.shown()
                        ),
                    ))
                }
            };
            let limit = get("limit")?;
            let limit_value = match &limit.value.value {
                NodeValue::Int(text) if !text.starts_with('-') => text.parse::<u64>().map_err(|_| {
                    self.error(
                        &child_path(&item_path, "limit"),
                        Some(limit.line),
                        format!("'limit' is {}; Warden counts up to {}", shorten(text), u64::MAX),
                    )
                })?,
                _ => {
                    return Err(self.error(
                        &child_path(&item_path, "limit"),
                        Some(limit.line),
                        format!(
                            "'limit' must be a non-negative integer (money in minor units), got {}",
                            limit.value.shown()
                        ),
                    ))
                }
            };
            let window = get("window")?;
            let window_path = child_path(&item_path, "window");
            let Some(text) = window.value.as_str() else {
                return Err(self.error(
                    &window_path,
                    Some(window.line),
                    format!("'window' must be an ISO 8601 duration such as PT1H or P1D, got {}", window.value.shown()),
                ));
            };
            let micros = parse_duration(text).map_err(|e| self.error(&window_path, Some(window.line), e))?;
            let seconds = u64::try_from(micros / MICROS_PER_SECOND).unwrap_or(0);
            if seconds == 0 || seconds > MAX_WINDOW_SECONDS {
                return Err(self.error(
                    &window_path,
                    Some(window.line),
                    format!("'window' must be longer than zero and at most {MAX_WINDOW_SECONDS} seconds (100 years)"),
                ));
            }
            budgets.push(Budget { metric: metric_text, limit: limit_value, window_seconds: seconds });
        }
        Ok(budgets)
    }
}

fn describe_list(node: &Node) -> &'static str {
    match &node.value {
        NodeValue::Seq(_) => "an empty list",
        _ => node.kind(),
    }
}

/// Constraints read back from a stored grant (`{key: operand}`), through the same condition
/// parser a document's constraints go through.
pub(super) fn conditions_from_json(map: &Map<String, Value>) -> Result<Vec<Condition>, String> {
    let cx = Cx { origin: "(stored grant)", schema: Schema::WardenV1 };
    map.iter()
        .map(|(key, operand)| {
            let member = Member { key: key.clone(), line: 0, value: node_from_json(operand) };
            cx.condition(&member, key, CONSTRAINT_FLOATS).map_err(|e| e.message)
        })
        .collect()
}

fn node_from_json(value: &Value) -> Node {
    let value = match value {
        Value::Null => NodeValue::Null,
        Value::Bool(b) => NodeValue::Bool(*b),
        Value::Number(n) if crate::canonical::is_integer(n) => NodeValue::Int(n.as_str().to_owned()),
        Value::Number(n) => NodeValue::Float(n.as_str().to_owned(), n.as_str().parse().unwrap_or(f64::NAN)),
        Value::String(s) => NodeValue::Str(s.clone()),
        Value::Array(items) => NodeValue::Seq(items.iter().map(node_from_json).collect()),
        Value::Object(map) => NodeValue::Map(
            map.iter().map(|(key, item)| Member { key: key.clone(), line: 0, value: node_from_json(item) }).collect(),
        ),
    };
    Node { line: 0, value }
}
