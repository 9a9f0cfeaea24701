//! Snapshots: append-only records of query results (post-redaction) in the store, paged
//! history per window or endpoint, and a bounded diff of two snapshots of one window.
//!
//! Nothing here updates or deletes. A snapshot holds exactly the result the agent saw (which
//! never carries the raw body, the URL's query or a credential), the window's canonical
//! params, and the window's config fingerprint (`Source::fingerprint`): two snapshots taken
//! under different fingerprints (another origin, path, auth mode or reference) are not
//! compared.

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::config::Sources;
use super::confine::{confine, Confined, Query};
use super::shape::SightResult;
use crate::action::{is_id, IdKind};
use crate::clock::Micros;
use crate::error::SightError;
use crate::error::{Error, StoreFaultKind};
use crate::kernel::Kernel;

/// Page size bounds of `history`.
pub const MAX_PAGE: usize = 100;
/// The page size of `history` unless a limit is given.
pub const DEFAULT_PAGE: usize = 20;
/// At most this many entries in a diff; the rest are counted in `omitted`.
pub const MAX_DIFF_ENTRIES: usize = 50;

pub use crate::snapshot_record::SnapshotRecord;

fn endpoint_scope(source: &str, endpoint: &str) -> String {
    format!("endpoint:{source}/{endpoint}")
}

fn window_scope(window: &str) -> String {
    format!("window:{}", hex::encode(Sha256::digest(window.as_bytes())))
}

/// The index scopes a snapshot of `confined` is listed under.
pub fn scopes(confined: &Confined<'_>) -> Vec<String> {
    vec![endpoint_scope(&confined.source.id, &confined.endpoint.id), window_scope(&confined.window)]
}

/// Store `result` (already shaped and redacted) as a new snapshot of `confined`'s window, in
/// one write transaction. Returns the result with its `snapshotId`.
pub fn append(
    store: &Kernel,
    confined: &Confined<'_>,
    mut result: SightResult,
    now: Micros,
) -> Result<SightResult, Error> {
    let id = crate::action::new_id(IdKind::Snapshot).map_err(|e| Error::store(StoreFaultKind::Io, e.to_string()))?;
    result.snapshot_id = Some(id.clone());
    let text = serde_json::to_string(&result)
        .map_err(|e| Error::store(StoreFaultKind::Defect, format!("cannot encode a snapshot: {e}")))?;
    let record = SnapshotRecord {
        id,
        seq: 0,
        source: confined.source.id.clone(),
        endpoint: confined.endpoint.id.clone(),
        window: confined.window.clone(),
        fingerprint: confined.source.fingerprint(confined.endpoint),
        taken_at: now,
        result: text,
    };
    store.append_snapshot(record, scopes(confined))?;
    Ok(result)
}

fn refuse(code: &'static str, message: impl Into<String>) -> Error {
    Error::Sight(SightError::new(code, message))
}

/// `history` arguments: `{source, endpoint, params?, cursor?, limit?}`; nothing else.
const HISTORY_KEYS: [&str; 5] = ["cursor", "endpoint", "limit", "params", "source"];

/// One page of snapshots, newest first: `{source, endpoint, params?, snapshots, hasMore,
/// nextCursor?}`. With `params`, only that window (defaults applied, as a query would);
/// without, every window of the endpoint. `cursor` is the `nextCursor` of the previous page.
pub fn history(store: &Kernel, sources: &Sources, request: &Value) -> Result<Value, Error> {
    let Value::Object(map) = request else {
        return Err(refuse(
            "invalid_params",
            "history takes a JSON object {source, endpoint, params?, cursor?, limit?}",
        ));
    };
    if let Some(unknown) = map.keys().find(|k| !HISTORY_KEYS.contains(&k.as_str())) {
        return Err(refuse(
            "invalid_params",
            format!(
                "unknown argument {} for history; it takes only source, endpoint, params, cursor and limit",
                super::confine::shown(unknown)
            ),
        ));
    }
    let limit = match map.get("limit") {
        None | Some(Value::Null) => DEFAULT_PAGE,
        Some(Value::Number(n)) => match n.as_u64() {
            Some(n @ 1..=100) => n as usize,
            _ => return Err(refuse("invalid_page", format!("limit must be an integer from 1 to {MAX_PAGE}"))),
        },
        Some(_) => return Err(refuse("invalid_page", format!("limit must be an integer from 1 to {MAX_PAGE}"))),
    };
    // The window check is the query's own: same unknown-source, endpoint and param refusals.
    let mut as_query = Map::new();
    for key in ["source", "endpoint", "params"] {
        if let Some(value) = map.get(key) {
            as_query.insert(key.into(), value.clone());
        }
    }
    let query = Query::from_json(&Value::Object(as_query)).map_err(Error::Sight)?;
    let confined = confine(sources, &query).map_err(Error::Sight)?;
    let scope = if map.contains_key("params") {
        window_scope(&confined.window)
    } else {
        endpoint_scope(&confined.source.id, &confined.endpoint.id)
    };
    let before = match map.get("cursor") {
        None | Some(Value::Null) => None,
        Some(Value::String(cursor)) => Some(cursor_seq(store, cursor, &confined, map.contains_key("params"))?),
        Some(_) => return Err(refuse("invalid_page", "cursor must be the nextCursor string of the previous page")),
    };
    let (records, more) = store.snapshot_page(&scope, before, limit)?;
    let snapshots = records.iter().map(SnapshotRecord::to_json).collect::<Result<Vec<_>, _>>()?;
    let mut page = serde_json::json!({
        "source": confined.source.id,
        "endpoint": confined.endpoint.id,
        "snapshots": snapshots,
        "hasMore": more,
    });
    if map.contains_key("params") {
        let window: Value = serde_json::from_str(&confined.window).unwrap_or(Value::Null);
        page["params"] = window.get(2).cloned().unwrap_or(Value::Null);
    }
    if more {
        if let Some(last) = records.last() {
            page["nextCursor"] = Value::String(last.id.clone());
        }
    }
    Ok(page)
}

/// A cursor is the id of the last snapshot of the previous page; it must name a snapshot of
/// the same endpoint (and window, when the page is per window).
fn cursor_seq(store: &Kernel, cursor: &str, confined: &Confined<'_>, per_window: bool) -> Result<u64, Error> {
    let bad = || {
        refuse(
            "invalid_page",
            "cursor is not a page position of this history; pass the nextCursor of the previous page, or omit it for the newest page",
        )
    };
    if !is_id(IdKind::Snapshot, cursor) {
        return Err(bad());
    }
    let record = store.snapshot(cursor)?.ok_or_else(bad)?;
    let same_endpoint = record.source == confined.source.id && record.endpoint == confined.endpoint.id;
    if !same_endpoint || (per_window && record.window != confined.window) {
        return Err(bad());
    }
    Ok(record.seq)
}

/// `diff` arguments: `{a, b}`, two snapshot ids.
const DIFF_KEYS: [&str; 2] = ["a", "b"];

/// Compare snapshots `a` (before) and `b` (after) of one window: `{a, b, source, endpoint,
/// params, fetchedAt: {a, b}, entries: [{change, path, before?, after?}], total, omitted}`.
/// `path` is an RFC 6901 pointer starting with the alias. Refused across windows, across
/// config fingerprints, and for a snapshot whose source or endpoint is no longer configured.
pub fn diff(store: &Kernel, sources: &Sources, request: &Value) -> Result<Value, Error> {
    let Value::Object(map) = request else {
        return Err(refuse("invalid_params", "diff takes a JSON object {a, b} of two snapshot ids"));
    };
    if let Some(unknown) = map.keys().find(|k| !DIFF_KEYS.contains(&k.as_str())) {
        return Err(refuse(
            "invalid_params",
            format!("unknown argument {} for diff; it takes only a and b", super::confine::shown(unknown)),
        ));
    }
    // Both ids are checked for shape before either is looked up, so the refusal does not
    // depend on the order of the arguments.
    let id_of = |key: &str| -> Result<&String, Error> {
        match map.get(key) {
            Some(Value::String(id)) if is_id(IdKind::Snapshot, id) => Ok(id),
            Some(Value::String(_)) => {
                Err(refuse("invalid_params", format!("'{key}' is not a snapshot id (snp_ and 32 hex digits)")))
            }
            _ => Err(refuse("invalid_params", format!("'{key}' is required: a snapshot id"))),
        }
    };
    id_of("a")?;
    id_of("b")?;
    let load = |key: &str| -> Result<SnapshotRecord, Error> {
        let id = id_of(key)?;
        let record = store
            .snapshot(id)?
            .ok_or_else(|| refuse("snapshot_not_found", format!("no snapshot {id} in this store")))?;
        let configured = sources.get(&record.source).is_some_and(|s| s.endpoint(&record.endpoint).is_some());
        if !configured {
            return Err(refuse(
                "unknown_source",
                format!(
                    "snapshot {id} is of {}.{}, which the configuration no longer has",
                    record.source, record.endpoint
                ),
            ));
        }
        Ok(record)
    };
    let (a, b) = (load("a")?, load("b")?);
    if a.window != b.window {
        return Err(refuse(
            "invalid_params",
            format!("snapshots {} and {} are of different windows; a diff compares one window over time", a.id, b.id),
        ));
    }
    if a.fingerprint != b.fingerprint {
        return Err(refuse(
            "invalid_params",
            format!(
                "snapshots {} and {} were taken under different configurations of the window (origin, path or credential changed); they are not comparable",
                a.id, b.id
            ),
        ));
    }
    // Each snapshot's JSON is parsed once; `values` is always an object in a stored result.
    let (a_json, b_json) = (a.to_json()?, b.to_json()?);
    let values = |json: &Value| json.get("values").and_then(Value::as_object).cloned().unwrap_or_default();
    let (before, after) = (values(&a_json), values(&b_json));
    let mut entries = Vec::new();
    let mut total = 0usize;
    compare_maps("", &before, &after, &mut entries, &mut total);
    Ok(serde_json::json!({
        "a": a.id,
        "b": b.id,
        "source": a.source,
        "endpoint": a.endpoint,
        "params": a_json.get("params").cloned().unwrap_or(Value::Null),
        "fetchedAt": {"a": a_json.get("fetchedAt"), "b": b_json.get("fetchedAt")},
        "entries": entries,
        "total": total,
        "omitted": total - entries.len(),
    }))
}

fn escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

fn record(entries: &mut Vec<Value>, total: &mut usize, entry: Value) {
    *total += 1;
    if entries.len() < MAX_DIFF_ENTRIES {
        entries.push(entry);
    }
}

fn compare_maps(
    path: &str,
    before: &Map<String, Value>,
    after: &Map<String, Value>,
    out: &mut Vec<Value>,
    total: &mut usize,
) {
    for (key, old) in before {
        let here = format!("{path}/{}", escape(key));
        match after.get(key) {
            None => record(out, total, serde_json::json!({"change": "removed", "path": here, "before": old})),
            Some(new) => compare(&here, old, new, out, total),
        }
    }
    for (key, new) in after {
        if !before.contains_key(key) {
            let here = format!("{path}/{}", escape(key));
            record(out, total, serde_json::json!({"change": "added", "path": here, "after": new}));
        }
    }
}

/// Leaf-level differences: objects by key, arrays by index, anything else by value.
fn compare(path: &str, before: &Value, after: &Value, out: &mut Vec<Value>, total: &mut usize) {
    match (before, after) {
        (Value::Object(old), Value::Object(new)) => compare_maps(path, old, new, out, total),
        (Value::Array(old), Value::Array(new)) => {
            for (index, old_item) in old.iter().enumerate() {
                let here = format!("{path}/{index}");
                match new.get(index) {
                    Some(new_item) => compare(&here, old_item, new_item, out, total),
                    None => {
                        record(out, total, serde_json::json!({"change": "removed", "path": here, "before": old_item}));
                    }
                }
            }
            for (index, new_item) in new.iter().enumerate().skip(old.len()) {
                let here = format!("{path}/{index}");
                record(out, total, serde_json::json!({"change": "added", "path": here, "after": new_item}));
            }
        }
        _ if before == after => {}
        _ => {
            record(
                out,
                total,
                serde_json::json!({"change": "changed", "path": path, "before": before, "after": after}),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(before: Value, after: Value) -> (Vec<Value>, usize) {
        let (mut out, mut total) = (Vec::new(), 0);
        let (Value::Object(b), Value::Object(a)) = (before, after) else { panic!("objects") };
        compare_maps("", &b, &a, &mut out, &mut total);
        (out, total)
    }

    #[test]
    fn differences_are_leaves_named_by_pointer() {
        let (entries, total) = run(
            json!({"price": {"amount": 10, "cur": "EUR"}, "tags": ["a", "b"], "gone": 1, "a/b": "x"}),
            json!({"price": {"amount": 12, "cur": "EUR"}, "tags": ["a"], "new": null, "a/b": "y"}),
        );
        assert_eq!(total, 5);
        assert_eq!(
            entries,
            vec![
                json!({"change": "changed", "path": "/a~1b", "before": "x", "after": "y"}),
                json!({"change": "removed", "path": "/gone", "before": 1}),
                json!({"change": "changed", "path": "/price/amount", "before": 10, "after": 12}),
                json!({"change": "removed", "path": "/tags/1", "before": "b"}),
                json!({"change": "added", "path": "/new", "after": null}),
            ]
        );
    }

    #[test]
    fn equal_values_have_no_entries_and_type_changes_are_changes() {
        assert_eq!(run(json!({"a": [1, {"b": 2}]}), json!({"a": [1, {"b": 2}]})).1, 0);
        let (entries, _) = run(json!({"a": [1]}), json!({"a": {"0": 1}}));
        assert_eq!(entries, vec![json!({"change": "changed", "path": "/a", "before": [1], "after": {"0": 1}})]);
    }

    #[test]
    fn entries_are_bounded_and_the_rest_counted() {
        let before: Map<String, Value> = (0..120).map(|i| (format!("k{i:03}"), json!(i))).collect();
        let after: Map<String, Value> = (0..120).map(|i| (format!("k{i:03}"), json!(i + 1))).collect();
        let (entries, total) = run(Value::Object(before), Value::Object(after));
        assert_eq!((entries.len(), total), (MAX_DIFF_ENTRIES, 120));
    }
}
