//! ctrlrun 0.12.2's authority outcomes, replayed: pattern validity, `matches` and `contains`;
//! delegation creation (created with its depth, or refused with reason and dimension); and
//! evaluation (passed, reason, deciding grant, depth and evidence) over generated scenarios of
//! root grants, delegation chains, revocations, hops and boundary instants. The vectors were
//! computed by `tests/vectors/generate_authority.py`; ctrlrun is not needed to run this.

use serde_json::Value;
use warden::authority::{
    contains, evaluate, matches, parse_instant, plan_delegation, validate_pattern, Authority, Call, CreatedVia,
    CreationError, MemorySource, PatternKind, Proposal, Revocation,
};
use warden::document::{load_grant_str, load_str};
use warden::{Action, Principal};

const VECTORS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/vectors/ctrlrun-0.12.2/");

fn read(file: &str) -> Value {
    let path = format!("{VECTORS}{file}");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn kind(name: &str) -> PatternKind {
    match name {
        "subject" => PatternKind::Subject,
        "action" => PatternKind::Action,
        "resource" => PatternKind::Resource,
        "task" => PatternKind::Task,
        other => panic!("unknown kind {other}"),
    }
}

fn text<'v>(row: &'v Value, field: &str) -> &'v str {
    row[field].as_str().unwrap_or_else(|| panic!("{field} is not a string in {row}"))
}

fn report(what: &str, total: usize, failures: &[String]) {
    assert!(
        failures.is_empty(),
        "{} of {total} {what} disagree with ctrlrun:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn pattern_validity_matching_and_containment_agree_with_ctrlrun() {
    let vectors = read("authority_patterns.json");
    let mut failures = Vec::new();
    let mut total = 0;
    for row in vectors["validity"].as_array().unwrap() {
        total += 1;
        let valid = validate_pattern(text(row, "pattern"), kind(text(row, "kind"))).is_ok();
        if valid != row["valid"].as_bool().unwrap() {
            failures.push(format!("validity {row}: warden says {valid}"));
        }
    }
    for row in vectors["matches"].as_array().unwrap() {
        total += 1;
        let actual = matches(text(row, "pattern"), text(row, "value"), kind(text(row, "kind")));
        if actual != row["matches"].as_bool().unwrap() {
            failures.push(format!("matches {row}: warden says {actual}"));
        }
    }
    for row in vectors["contains"].as_array().unwrap() {
        total += 1;
        let actual = contains(text(row, "parent"), text(row, "child"), kind(text(row, "kind")));
        if actual != row["contains"].as_bool().unwrap() {
            failures.push(format!("contains {row}: warden says {actual}"));
        }
    }
    assert!(total > 5000, "{total} rows");
    report("pattern rows", total, &failures);
}

struct Replay {
    authority: Authority,
    source: MemorySource,
    ids: Vec<String>,
}

impl Replay {
    fn resolve(&self, reference: &str) -> String {
        match reference.strip_prefix('@') {
            Some(index) => self.ids[index.parse::<usize>().unwrap()].clone(),
            None => reference.to_owned(),
        }
    }

    fn refer(&self, id: Option<&str>) -> Value {
        match id {
            None => Value::Null,
            Some(id) => match self.ids.iter().position(|known| known == id) {
                Some(index) => Value::String(format!("@{index}")),
                None => Value::String(id.to_owned()),
            },
        }
    }

    /// Create one delegation as the vector row asks; the outcome in the vectors' shape.
    fn create(&mut self, row: &Value) -> Value {
        let child = load_grant_str(&row["grant"].to_string(), "child.json").unwrap_or_else(|e| panic!("{e}: {row}"));
        let by = Principal::new(text(&row["by"], "agent"), row["by"]["user"].as_str()).unwrap();
        let by_expires_at = row["by_expires_at"].as_str().map(|t| parse_instant(t).unwrap());
        let parent = self.resolve(text(row, "parent"));
        // The id ctrlrun minted (or would have): ties between delegations then break alike.
        let id = text(row, "id").to_owned();
        let proposal = Proposal {
            parent_id: &parent,
            grant: &child,
            by: &by,
            by_expires_at,
            via: CreatedVia::Api,
            now: parse_instant(text(row, "now")).unwrap(),
            new_id: &id,
        };
        match plan_delegation(&self.authority, &proposal, &self.source) {
            Ok(planned) => {
                let depth = planned.record.depth;
                self.source.insert(planned.record, &planned.index_keys).unwrap();
                self.ids.push(id);
                serde_json::json!({"created": format!("@{}", self.ids.len() - 1), "depth": depth})
            }
            Err(CreationError::Refused(refused)) => serde_json::json!({
                "refused": refused.reason.as_str(),
                "dimension": refused.dimension.map(warden::authority::Dimension::as_str),
            }),
            Err(other) => serde_json::json!({"error": other.to_string()}),
        }
    }
}

#[test]
fn delegation_creation_and_evaluation_agree_with_ctrlrun() {
    let scenarios = read("authority_scenarios.json");
    let scenarios = scenarios.as_array().unwrap();
    let mut failures = Vec::new();
    let (mut creations, mut evaluations) = (0, 0);
    for (index, scenario) in scenarios.iter().enumerate() {
        let document = format!("schema: warden/v1\nauthority: {}\n", scenario["authority"]);
        let authority = match load_str(&document, "scenario.yaml") {
            Ok(document) => document.authority_config.unwrap(),
            Err(e) => {
                failures.push(format!("scenario {index}: ctrlrun loads it, warden refuses: {e}"));
                continue;
            }
        };
        let mut replay = Replay { authority, source: MemorySource::new(), ids: Vec::new() };
        for row in scenario["creations"].as_array().unwrap() {
            creations += 1;
            let actual = replay.create(row);
            if actual != row["expected"] {
                failures.push(format!("scenario {index} creation {row}: warden {actual}"));
            }
        }
        for reference in scenario["revoked"].as_array().unwrap() {
            let delegation_id = replay.resolve(reference.as_str().unwrap());
            let at = parse_instant("2026-11-01T00:00:00Z").unwrap();
            replay.source.revoke(Revocation { delegation_id, revoked_at: at, revoked_by: Some("ops".into()) }).unwrap();
        }
        for row in scenario["late_creations"].as_array().unwrap() {
            creations += 1;
            let actual = replay.create(row);
            if actual != row["expected"] {
                failures.push(format!("scenario {index} late creation {row}: warden {actual}"));
            }
        }
        for case in scenario["evaluations"].as_array().unwrap() {
            evaluations += 1;
            let principal =
                Principal::new(text(&case["principal"], "agent"), case["principal"]["user"].as_str()).unwrap();
            let action = Action::new(
                text(case, "name"),
                case["arguments"].clone(),
                principal,
                case["resource"].as_str(),
                text(case, "environment"),
            )
            .unwrap();
            let hop = case["hop"].as_str().map(|h| replay.resolve(h));
            let call = Call {
                task: case["task"].as_str(),
                hop: hop.as_deref(),
                ..Call::new(&action, parse_instant(text(case, "now")).unwrap())
            };
            let result = evaluate(&replay.authority, &call, &replay.source).unwrap();
            let actual = serde_json::json!({
                "passed": result.passed,
                "reason": result.reason.as_str(),
                "grant_id": replay.refer(result.grant_id.as_deref()),
                "delegation_id": replay.refer(result.delegation_id.as_deref()),
                "depth": result.depth,
                "dimension": result.dimension.map(warden::authority::Dimension::as_str),
                "expired_parent_id": replay.refer(result.expired_parent_id.as_deref()),
                "depth_exceeded": result.depth_exceeded,
            });
            if actual != case["expected"] {
                failures.push(format!("scenario {index} evaluation {case}: warden {actual}"));
            }
        }
    }
    assert!(creations > 500 && evaluations > 1500, "{creations} creations, {evaluations} evaluations");
    report("scenario rows", creations + evaluations, &failures);
}
