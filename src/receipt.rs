//! Receipts: one canonical JSON document per terminal outcome, chained by hash. Pure: building
//! documents and verifying a stream of stored rows; the store writes them.

use serde::{Deserialize, Serialize};

use crate::canonical::{parse_json, sha256_prefixed, to_canonical_string_with, Floats};
use crate::clock::{render, Micros};
use crate::effect::StoredResult;

/// The `schema` member of every receipt document.
pub const RECEIPT_SCHEMA: &str = "warden.receipt/v1";

/// The `prev_hash` of the first receipt.
pub const GENESIS_HASH: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000000";

/// The closed set of chain break names.
pub const CHAIN_BREAKS: [&str; 6] =
    ["content_altered", "hash_missing", "link_broken", "missing", "head_mismatch", "unchained"];

/// At most this many breaks are listed; the count beyond is still reported.
pub const MAX_LISTED_BREAKS: usize = 1000;

/// The terminal outcome a receipt records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReceiptResult {
    /// The effect ran and succeeded.
    Committed,
    /// The remote side provably did nothing.
    Failed,
    /// The outcome is unknown.
    Ambiguous,
    /// The document (or a human's denial) refused the action.
    Denied,
    /// Refused by anything else: a duplicate, an unusable approval, the authority axis, a bound.
    Blocked,
    /// Observe mode: the action ran whatever enforce mode would have done (see `execution`).
    Observed,
}

impl ReceiptResult {
    /// The result as receipts spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            ReceiptResult::Committed => "committed",
            ReceiptResult::Failed => "failed",
            ReceiptResult::Ambiguous => "ambiguous",
            ReceiptResult::Denied => "denied",
            ReceiptResult::Blocked => "blocked",
            ReceiptResult::Observed => "observed",
        }
    }
}

/// Everything a receipt says except its place in the chain.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReceiptDraft {
    /// The receipt's id (`rct_…`).
    pub receipt_id: String,
    /// The action it records (`act_…`).
    pub action_id: String,
    /// The action's name.
    pub action: String,
    /// The action's hash, which any approval was bound to.
    pub action_hash: String,
    /// The principal's agent.
    pub agent: String,
    /// The principal's user, if any.
    pub user: Option<String>,
    /// What the action acted on, if known.
    pub resource: Option<String>,
    /// The canonical arguments.
    pub arguments: serde_json::Value,
    /// Where it acted.
    pub environment: String,
    /// What was decided (`allow`, `approve`, `deny`).
    pub decision: String,
    /// Why (a rule, a denial reason, a refusal's reason).
    pub decision_reason: String,
    /// The approval consumed, if any.
    pub approval_id: Option<String>,
    /// Who granted it, if any.
    pub approver: Option<String>,
    /// The effect key, when the action has one.
    pub effect_key: Option<String>,
    /// The attempt number (1 unless a FAILED effect was retried).
    pub attempt: u32,
    /// The terminal outcome.
    pub result: ReceiptResult,
    /// Observe mode: what the executor actually did (`result` is then `observed`).
    pub execution: Option<ReceiptResult>,
    /// Observe mode: what enforce mode would have done, `{decision, reason, blocked_reason}`.
    pub would_have: Option<serde_json::Value>,
    /// The outcome's message, for FAILED, AMBIGUOUS and refusals.
    pub error: Option<String>,
    /// When the action was proposed.
    pub started_at: Micros,
    /// When its outcome was recorded.
    pub finished_at: Micros,
    /// The hash of the document that decided.
    pub policy_hash: Option<String>,
    /// That document's `version`.
    pub policy_version: Option<String>,
    /// Set when the document has an `authority:` section: which grant decided, the hop
    /// presented and the budget charges made. Absent otherwise, so receipts of documents
    /// without authority keep their shape.
    #[serde(default)]
    pub authority: Option<ReceiptAuthority>,
    /// The W3C trace context (`traceparent`) the call carried, when its host handed one over
    /// (`warden gateway`: `params._meta.traceparent`). In the hashed document only when set, so
    /// every receipt without one keeps its bytes.
    #[serde(default)]
    pub traceparent: Option<String>,
    /// `sha256:` over the result the host bound to the outcome (`warden gateway`: the tool
    /// result's `structuredContent`), when it named one. In the hashed document only when set,
    /// so every receipt without one keeps its bytes.
    #[serde(default)]
    pub result_sha256: Option<String>,
    /// The scoped grant (`sgr_…`) this receipt made, spent or revoked: an action it covered
    /// instead of a human's answer, or the grant's own receipts. In the hashed document only when
    /// set, so every receipt without one keeps its bytes.
    #[serde(default)]
    pub scoped_grant_id: Option<String>,
}

/// Whether `text` is a W3C trace context `traceparent` (Trace Context Level 1): `VV-<32 hex>-<16
/// hex>-<2 hex>`, lowercase, the version not `ff`, neither id all zeros. A version after `00`
/// may carry more fields; only the four-field form is accepted, so a receipt never records
/// what this definition does not describe.
pub fn is_traceparent(text: &str) -> bool {
    let parts: Vec<&str> = text.split('-').collect();
    let hex = |part: &str, n: usize| part.len() == n && part.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    let zero = |part: &str| part.bytes().all(|b| b == b'0');
    match parts.as_slice() {
        [version, trace_id, parent_id, flags] => {
            hex(version, 2)
                && *version != "ff"
                && hex(trace_id, 32)
                && !zero(trace_id)
                && hex(parent_id, 16)
                && !zero(parent_id)
                && hex(flags, 2)
        }
        _ => false,
    }
}

/// The authority evidence of a receipt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReceiptAuthority {
    /// The root grant or delegation (`dlg_…`) that decided, or whose failure is reported.
    pub grant_id: Option<String>,
    /// The delegation id handed over by another agent, when the call presented one.
    pub hop: Option<String>,
    /// What the reservation charged against every budget up the deciding chain.
    pub budget_charges: Vec<crate::authority::Charge>,
}

impl ReceiptAuthority {
    fn charges_json(&self) -> serde_json::Value {
        serde_json::Value::Array(
            self.budget_charges
                .iter()
                .map(|c| {
                    serde_json::json!({
                        "grant_id": c.grant_id, "metric": c.metric, "amount": c.amount,
                        "limit": c.limit, "window_seconds": c.window_seconds,
                    })
                })
                .collect(),
        )
    }
}

impl ReceiptDraft {
    /// The document as hashed: every field, plus `seq` and `prev_hash`.
    pub fn document(&self, seq: u64, prev_hash: &str) -> serde_json::Value {
        let mut document = serde_json::json!({
            "schema": RECEIPT_SCHEMA,
            "receipt_id": self.receipt_id,
            "action_id": self.action_id,
            "action": self.action,
            "action_hash": self.action_hash,
            "principal": {"agent": self.agent, "user": self.user},
            "resource": self.resource,
            "arguments": self.arguments,
            "environment": self.environment,
            "decision": self.decision,
            "decision_reason": self.decision_reason,
            "approval_id": self.approval_id,
            "approver": self.approver,
            "effect_key": self.effect_key,
            "attempt": self.attempt,
            "result": self.result.as_str(),
            "execution": self.execution.map(ReceiptResult::as_str),
            "would_have": self.would_have,
            "error": self.error,
            "started_at": render(self.started_at),
            "finished_at": render(self.finished_at),
            "seq": seq,
            "prev_hash": prev_hash,
            "policy_hash": self.policy_hash,
            "policy_version": self.policy_version,
        });
        if let (Some(authority), Some(map)) = (&self.authority, document.as_object_mut()) {
            map.insert("authority_grant_id".into(), authority.grant_id.clone().into());
            map.insert("hop".into(), authority.hop.clone().into());
            map.insert("budget_charges".into(), authority.charges_json());
        }
        if let (Some(traceparent), Some(map)) = (&self.traceparent, document.as_object_mut()) {
            map.insert("traceparent".into(), traceparent.clone().into());
        }
        if let (Some(digest), Some(map)) = (&self.result_sha256, document.as_object_mut()) {
            map.insert("result_sha256".into(), digest.clone().into());
        }
        if let (Some(grant), Some(map)) = (&self.scoped_grant_id, document.as_object_mut()) {
            map.insert("scoped_grant_id".into(), grant.clone().into());
        }
        document
    }

    /// The canonical text and its chain hash.
    pub fn seal(&self, seq: u64, prev_hash: &str) -> Result<(String, String), String> {
        // The arguments are the action's, admitted by its document.
        let text = to_canonical_string_with(&self.document(seq, prev_hash), "receipt", Floats::ADMITTED)
            .map_err(|e| e.to_string())?;
        let hash = sha256_prefixed(text.as_bytes());
        Ok((text, hash))
    }
}

/// One receipt row as stored. `executor_result` is outside the hashed document on purpose.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredReceipt {
    /// The receipt's canonical JSON text, as hashed.
    pub document: String,
    /// Its SHA-256 (`sha256:…`), absent only if removed from the store.
    pub hash: Option<String>,
    /// The executor's result, kept beside the document, not in it.
    pub executor_result: Option<StoredResult>,
}

impl StoredReceipt {
    /// The document with `hash` and `executor_result` added, as the CLI and bindings show it.
    pub fn to_json(&self) -> serde_json::Value {
        let mut doc = parse_json(&self.document).unwrap_or(serde_json::Value::Null);
        if let Some(map) = doc.as_object_mut() {
            map.insert("hash".into(), self.hash.clone().into());
            map.insert(
                "executor_result".into(),
                self.executor_result.as_ref().map(StoredResult::to_value).unwrap_or(serde_json::Value::Null),
            );
        }
        doc
    }
}

/// One break `verify_chain` found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChainBreak {
    /// Which kind (one of `CHAIN_BREAKS`).
    pub name: &'static str,
    /// The receipt's position in the chain, when it has one.
    pub seq: Option<u64>,
    /// What exactly is wrong.
    pub detail: String,
}

/// A break read back (from another process): its name must be one of `CHAIN_BREAKS`.
#[derive(Deserialize)]
struct ChainBreakRead {
    name: String,
    seq: Option<u64>,
    detail: String,
}

impl<'de> Deserialize<'de> for ChainBreak {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<ChainBreak, D::Error> {
        let read = ChainBreakRead::deserialize(deserializer)?;
        let name = CHAIN_BREAKS
            .iter()
            .copied()
            .find(|known| *known == read.name)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown chain break {:?}", read.name)))?;
        Ok(ChainBreak { name, seq: read.seq, detail: read.detail })
    }
}

/// What `verify_chain` found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChainReport {
    /// No break at all.
    pub ok: bool,
    /// Chained receipts with nothing reported against them.
    pub verified: u64,
    /// Receipts that carry a `seq`.
    pub chained: u64,
    /// Receipts that carry none (reported together as one `unchained` break).
    pub unchained: u64,
    /// The last `seq` the chain head row names.
    pub head_seq: Option<u64>,
    /// The hash the chain head row names.
    pub head_hash: Option<String>,
    /// The breaks, in store order, at most `MAX_LISTED_BREAKS`.
    pub breaks: Vec<ChainBreak>,
    /// Breaks found beyond `MAX_LISTED_BREAKS`.
    pub breaks_not_listed: u64,
    /// The receipts a prune removed before the first one walked (0: none).
    #[serde(default)]
    pub pruned_through: u64,
}

/// What the chain walk needs of one stored row.
enum RowView {
    /// A document with no `seq` (or `seq: null`): not part of the chain.
    Unchained,
    /// No document can be read back (not JSON, or no canonical form).
    Unreadable,
    /// A chained document: its `prev_hash` (`""` when absent or not a string) and the hash of
    /// its canonical form.
    Chained { prev: String, recomputed: String },
}

/// The two fields of a document the walk reads, without building the whole document.
#[derive(Deserialize)]
struct Link {
    #[serde(default)]
    seq: Option<serde_json::Value>,
    #[serde(default)]
    prev_hash: Option<serde_json::Value>,
}

impl RowView {
    fn of(stored: &StoredReceipt) -> RowView {
        // Fast path: text that hashes to the stored hash is byte for byte the canonical text
        // `seal` hashed, so its canonical form need not be rebuilt; only the link is read.
        // Anything else (an altered text, a missing hash, a duplicate key) takes the full path,
        // which names the break.
        if let Some(hash) = &stored.hash {
            let raw = sha256_prefixed(stored.document.as_bytes());
            if raw == *hash {
                if let Ok(link) = serde_json::from_str::<Link>(&stored.document) {
                    let Some(_) = link.seq else { return RowView::Unchained };
                    let prev = link.prev_hash.as_ref().and_then(serde_json::Value::as_str).unwrap_or("").to_owned();
                    return RowView::Chained { prev, recomputed: raw };
                }
            }
        }
        let Ok(document) = parse_json(&stored.document) else { return RowView::Unreadable };
        if matches!(document.get("seq"), None | Some(serde_json::Value::Null)) {
            return RowView::Unchained;
        }
        let Ok(text) = to_canonical_string_with(&document, "receipt", Floats::ADMITTED) else {
            return RowView::Unreadable;
        };
        let prev = document.get("prev_hash").and_then(serde_json::Value::as_str).unwrap_or("").to_owned();
        RowView::Chained { prev, recomputed: sha256_prefixed(text.as_bytes()) }
    }
}

/// Streams the rows in store order (by the key, never re-sorted) and names every break.
/// `rows` yields `(position, row)`; a row the store could not decode is `Err(description)`.
/// `start` is where a pruned chain picks up: the seq of the last receipt pruned and its hash,
/// which the first row must follow and name (`None`: from seq 1 and the genesis hash).
pub fn verify_chain<I>(rows: I, head: Option<(u64, String)>, start: Option<(u64, String)>) -> ChainReport
where
    I: IntoIterator<Item = (u64, Result<StoredReceipt, String>)>,
{
    const NO_HASH: &str = "<no canonical form>";
    let mut breaks = Vec::new();
    let mut not_listed = 0u64;
    let mut push = |breaks: &mut Vec<ChainBreak>, name: &'static str, seq: Option<u64>, detail: String| {
        if breaks.len() < MAX_LISTED_BREAKS {
            breaks.push(ChainBreak { name, seq, detail });
        } else {
            not_listed += 1;
        }
    };
    let pruned_through = start.as_ref().map_or(0, |(seq, _)| *seq);
    let mut expected_prev = start.map_or_else(|| GENESIS_HASH.to_owned(), |(_, hash)| hash);
    let mut expected_seq = pruned_through.saturating_add(1);
    let mut chained = 0u64;
    let mut unchained = 0u64;
    let mut accused = 0u64;
    let mut last_seq = pruned_through;
    let mut previous_stored: Option<String> = None;
    for (position, row) in rows {
        let view = match &row {
            Ok(stored) => RowView::of(stored),
            Err(_) => RowView::Unreadable,
        };
        if let RowView::Unchained = view {
            // A receipt with no place in the chain: nothing about it is verified.
            unchained += 1;
            continue;
        }
        chained += 1;
        let mut accused_here = false;
        // After a gap the link cannot be checked: the row it points at is the missing one, and
        // `missing` already names that break.
        let after_gap = position != expected_seq;
        if after_gap {
            push(&mut breaks, "missing", Some(expected_seq), format!(
                "seq {expected_seq} is not here; the next receipt is at {position}: a row was deleted or two were exchanged"
            ));
        }
        let (Ok(stored), RowView::Chained { prev, recomputed }) = (&row, view) else {
            push(
                &mut breaks,
                "content_altered",
                Some(position),
                "the stored row cannot be read back as a receipt document, so its hash cannot be recomputed".into(),
            );
            accused += 1;
            expected_prev = NO_HASH.to_owned();
            previous_stored = row.as_ref().ok().and_then(|stored| stored.hash.clone());
            expected_seq = position.saturating_add(1);
            last_seq = position;
            continue;
        };
        match &stored.hash {
            None => {
                push(
                    &mut breaks,
                    "hash_missing",
                    Some(position),
                    "the stored hash is gone, so there is nothing to compare the document against".into(),
                );
                accused_here = true;
            }
            Some(hash) if *hash != recomputed => {
                push(
                    &mut breaks,
                    "content_altered",
                    Some(position),
                    format!("the recomputed hash {recomputed} is not the stored {hash}"),
                );
                accused_here = true;
            }
            Some(_) => {}
        }
        let prev = prev.as_str();
        // The link holds if it names the previous document's recomputed hash or its stored one:
        // an edited document is then reported once (content_altered), and an edit that was
        // re-hashed still breaks here because the next row names the old hash.
        let linked = prev == expected_prev || previous_stored.as_deref() == Some(prev);
        if !linked && !after_gap {
            push(
                &mut breaks,
                "link_broken",
                Some(position),
                format!("prev_hash is {prev}, and the receipt before it hashes to {expected_prev}"),
            );
            accused_here = true;
        }
        if accused_here {
            accused += 1;
        }
        // The document's own hash, never the stored column, carries forward: one corrupted
        // column must not also accuse the next receipt.
        expected_prev = recomputed;
        previous_stored = stored.hash.clone();
        expected_seq = position.saturating_add(1);
        last_seq = position;
    }
    if unchained > 0 {
        push(
            &mut breaks,
            "unchained",
            None,
            format!("{unchained} receipt(s) carry no seq; nothing about them is verified"),
        );
    }
    let (head_seq, head_hash) = match head {
        Some((seq, hash)) => (Some(seq), Some(hash)),
        None => (None, None),
    };
    match (head_seq, &head_hash) {
        (Some(seq), Some(hash)) => {
            let names_last = *hash == expected_prev || previous_stored.as_deref() == Some(hash.as_str());
            if seq != last_seq || !names_last {
                push(
                    &mut breaks,
                    "head_mismatch",
                    Some(seq),
                    format!(
                        "the head names seq {seq} / {hash}, and the last receipt is seq {last_seq} / {expected_prev}"
                    ),
                );
            }
        }
        _ => push(&mut breaks, "head_mismatch", None, "the store has no chain head row to compare against".into()),
    }
    ChainReport {
        ok: breaks.is_empty() && not_listed == 0,
        verified: chained.saturating_sub(accused),
        chained,
        unchained,
        head_seq,
        head_hash,
        breaks,
        breaks_not_listed: not_listed,
        pruned_through,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draft(n: u64) -> ReceiptDraft {
        ReceiptDraft {
            receipt_id: format!("rcp_{n}"),
            action_id: format!("act_{n}"),
            action: "stripe.refund".into(),
            action_hash: "sha256:aa".into(),
            agent: "refund-agent".into(),
            user: None,
            resource: None,
            arguments: serde_json::json!({"payment_id": format!("p{n}"), "amount": 1}),
            environment: "production".into(),
            decision: "allow".into(),
            decision_reason: "rule[0]".into(),
            approval_id: None,
            approver: None,
            effect_key: Some(format!("refund:p{n}")),
            attempt: 1,
            result: ReceiptResult::Committed,
            execution: None,
            would_have: None,
            error: None,
            started_at: 0,
            finished_at: 1,
            policy_hash: None,
            policy_version: None,
            authority: None,
            traceparent: None,
            result_sha256: None,
            scoped_grant_id: None,
        }
    }

    /// Rows as the store yields them: position, and the row or why it could not be decoded.
    type Rows = Vec<(u64, Result<StoredReceipt, String>)>;

    /// `n` correctly chained rows, seq 1..=n, and the head that names the last.
    fn chain(n: u64) -> (Rows, (u64, String)) {
        let mut rows = Vec::new();
        let mut prev = GENESIS_HASH.to_owned();
        for seq in 1..=n {
            let (document, hash) = draft(seq).seal(seq, &prev).expect("a receipt seals");
            rows.push((seq, Ok(StoredReceipt { document, hash: Some(hash.clone()), executor_result: None })));
            prev = hash;
        }
        (rows, (n, prev))
    }

    fn names(report: &ChainReport) -> Vec<(&'static str, Option<u64>)> {
        report.breaks.iter().map(|b| (b.name, b.seq)).collect()
    }

    #[test]
    fn a_pruned_chain_is_walked_from_its_start_and_the_start_is_checked() {
        let (rows, head) = chain(5);
        let start = |through: usize| {
            let (seq, row) = &rows[through - 1];
            (*seq, row.as_ref().expect("row").hash.clone().expect("hash"))
        };
        let kept = |through: usize| rows[through..].to_vec();
        // Pruned through 2: receipts 3..=5 follow receipt 2's hash.
        let report = verify_chain(kept(2), Some(head.clone()), Some(start(2)));
        assert!(report.ok, "{:?}", names(&report));
        assert_eq!((report.verified, report.chained, report.pruned_through), (3, 3, 2));
        // Another hash at the start breaks the first link kept, and only it.
        let report = verify_chain(kept(2), Some(head.clone()), Some((2, start(1).1)));
        assert_eq!(names(&report), [("link_broken", Some(3))]);
        // A start one receipt short: receipt 3 is missing, not receipt 1.
        let report = verify_chain(kept(3), Some(head.clone()), Some(start(2)));
        assert_eq!(names(&report)[0], ("missing", Some(3)));
        // Everything pruned but the last: the head still names it.
        let report = verify_chain(kept(4), Some(head.clone()), Some(start(4)));
        assert!(report.ok && report.verified == 1, "{:?}", names(&report));
        // Nothing kept after the start: the head must name the start itself.
        let report = verify_chain(kept(5), Some(head.clone()), Some(start(5)));
        assert!(report.ok, "{:?}", names(&report));
        let report = verify_chain(kept(5), Some(head), Some(start(4)));
        assert_eq!(names(&report), [("head_mismatch", Some(5))]);
        // Unpruned, the same rows from seq 3 are two missing receipts.
        let (rows, head) = chain(5);
        let report = verify_chain(rows[2..].to_vec(), Some(head), None);
        assert_eq!(names(&report)[0], ("missing", Some(1)));
    }

    #[test]
    fn a_document_stored_in_another_spelling_is_judged_by_its_canonical_form() {
        // The hash covers the canonical form, not the stored spelling: a document stored
        // pretty-printed with its keys reversed (as another writer might) whose canonical form
        // hashes to the stored hash is intact, and its link holds.
        let (mut rows, head) = chain(3);
        if let (_, Ok(stored)) = &mut rows[1] {
            let document: serde_json::Value = serde_json::from_str(&stored.document).expect("json");
            let reversed: serde_json::Map<String, serde_json::Value> =
                document.as_object().expect("object").iter().rev().map(|(k, v)| (k.clone(), v.clone())).collect();
            stored.document = serde_json::to_string_pretty(&reversed).expect("json");
        }
        let report = verify_chain(rows, Some(head), None);
        assert!(report.ok, "{:?}", names(&report));
        assert_eq!(report.verified, 3);
    }

    #[test]
    fn the_authority_evidence_is_in_the_document_with_every_budget_charge() {
        let mut with = draft(1);
        with.authority = Some(ReceiptAuthority {
            grant_id: Some("dlg_root".into()),
            hop: None,
            budget_charges: vec![crate::authority::Charge {
                grant_id: "dlg_root".into(),
                metric: "amount".into(),
                amount: 1200,
                limit: 50_000,
                window_seconds: 86_400,
            }],
        });
        let document = with.document(1, GENESIS_HASH);
        assert_eq!(document["authority_grant_id"], "dlg_root");
        assert_eq!(document["hop"], serde_json::Value::Null);
        assert_eq!(
            document["budget_charges"],
            serde_json::json!([{"grant_id": "dlg_root", "metric": "amount", "amount": 1200, "limit": 50_000, "window_seconds": 86_400}])
        );
        let without = draft(1).document(1, GENESIS_HASH);
        assert!(without.get("budget_charges").is_none() && without.get("authority_grant_id").is_none());
    }

    #[test]
    fn a_resealed_receipt_naming_the_wrong_predecessor_breaks_its_link_but_a_gap_is_only_missing() {
        let (mut rows, head) = chain(3);
        let (document, hash) = draft(2).seal(2, "sha256:0000").expect("seals");
        let next = rows[2].clone();
        rows[1] = (2, Ok(StoredReceipt { document, hash: Some(hash), executor_result: None }));
        let report = verify_chain(rows, Some(head.clone()), None);
        // Receipt 3 still names the old receipt 2, whose recomputed hash has changed.
        assert_eq!(names(&report), [("link_broken", Some(2)), ("link_broken", Some(3))]);
        let (rows, _) = chain(3);
        let gapped: Rows = vec![rows[0].clone(), next];
        let report = verify_chain(gapped, Some(head), None);
        assert_eq!(names(&report), [("missing", Some(2))]);
    }

    #[test]
    fn a_traceparent_is_the_w3c_four_field_form() {
        for valid in [
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09",
        ] {
            assert!(is_traceparent(valid), "{valid}");
        }
        for invalid in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\n",
            "0x-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ] {
            assert!(!is_traceparent(invalid), "{invalid:?}");
        }
    }

    #[test]
    fn a_receipt_without_a_traceparent_keeps_its_document_and_one_with_it_carries_it_inside_the_hash() {
        let plain = draft(1).document(1, GENESIS_HASH);
        let keys: Vec<&str> = plain.as_object().map(|m| m.keys().map(String::as_str).collect()).unwrap_or_default();
        assert_eq!(
            keys,
            [
                "action",
                "action_hash",
                "action_id",
                "approval_id",
                "approver",
                "arguments",
                "attempt",
                "decision",
                "decision_reason",
                "effect_key",
                "environment",
                "error",
                "execution",
                "finished_at",
                "policy_hash",
                "policy_version",
                "prev_hash",
                "principal",
                "receipt_id",
                "resource",
                "result",
                "schema",
                "seq",
                "started_at",
                "would_have",
            ],
            "the document every receipt had before traceparent existed"
        );
        let (_, plain_hash) = draft(1).seal(1, GENESIS_HASH).expect("seals");
        // The hash of the canonical JSON of this document's 25 fields, computed apart from this
        // code (sorted keys, compact): a receipt without a trace is the bytes it always was.
        assert_eq!(plain_hash, "sha256:d45cbea41febe4e88a23cbb3ce92240a2ba63e23b3c5a4de21ed9a9c2ba83e49");
        let mut traced = draft(1);
        traced.traceparent = Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".into());
        let mut document = traced.document(1, GENESIS_HASH);
        assert_eq!(document["traceparent"], "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
        if let Some(map) = document.as_object_mut() {
            map.remove("traceparent");
        }
        assert_eq!(document, plain, "the field is the only difference");
        let (text, hash) = traced.seal(1, GENESIS_HASH).expect("seals");
        assert_ne!(hash, plain_hash, "the trace is inside the hashed document");
        let (second, second_hash) = draft(2).seal(2, &hash).expect("seals");
        let rows: Rows = vec![
            (1, Ok(StoredReceipt { document: text, hash: Some(hash), executor_result: None })),
            (2, Ok(StoredReceipt { document: second, hash: Some(second_hash.clone()), executor_result: None })),
        ];
        let report = verify_chain(rows, Some((2, second_hash)), None);
        assert!(report.ok && report.verified == 2, "{report:?}");
    }

    #[test]
    fn a_result_digest_is_inside_the_hashed_document_only_when_bound() {
        let plain = draft(1).document(1, GENESIS_HASH);
        assert!(plain.get("result_sha256").is_none(), "absent unless bound: every other receipt keeps its bytes");
        let (_, plain_hash) = draft(1).seal(1, GENESIS_HASH).expect("seals");
        let mut bound = draft(1);
        bound.result_sha256 = Some(format!("sha256:{}", "ab".repeat(32)));
        let mut document = bound.document(1, GENESIS_HASH);
        assert_eq!(document["result_sha256"], format!("sha256:{}", "ab".repeat(32)));
        if let Some(map) = document.as_object_mut() {
            map.remove("result_sha256");
        }
        assert_eq!(document, plain, "the field is the only difference");
        let (_, hash) = bound.seal(1, GENESIS_HASH).expect("seals");
        assert_ne!(hash, plain_hash, "the digest is inside the hashed document");
    }

    #[test]
    fn a_stored_receipt_reads_as_its_document_with_hash_and_executor_result() {
        let (mut rows, _) = chain(1);
        let Some((_, Ok(mut stored))) = rows.pop() else { panic!("one row") };
        stored.executor_result = Some(StoredResult::from_value(&serde_json::json!({"refund_id": "re_1"})));
        let json = stored.to_json();
        assert_eq!(json["seq"], 1);
        assert_eq!(json["receipt_id"], "rcp_1");
        assert_eq!(json["hash"].as_str(), stored.hash.as_deref());
        assert_eq!(json["executor_result"], serde_json::json!({"refund_id": "re_1"}));
        stored.executor_result = None;
        stored.hash = None;
        let json = stored.to_json();
        assert_eq!((&json["hash"], &json["executor_result"]), (&serde_json::Value::Null, &serde_json::Value::Null));
    }

    #[test]
    fn a_chain_break_reads_back_only_under_one_of_the_six_names() {
        for name in CHAIN_BREAKS {
            let text = serde_json::json!({"name": name, "seq": 3, "detail": "d"}).to_string();
            let read: ChainBreak = serde_json::from_str(&text).expect("a known break reads back");
            assert_eq!(read, ChainBreak { name, seq: Some(3), detail: "d".into() });
        }
        let unknown = serde_json::from_str::<ChainBreak>(r#"{"name": "rewritten", "seq": null, "detail": ""}"#);
        assert!(unknown.is_err_and(|e| e.to_string().contains("unknown chain break")));
    }

    #[test]
    fn an_intact_chain_with_its_head_is_ok() {
        let (rows, head) = chain(3);
        let report = verify_chain(rows, Some(head), None);
        assert!(report.ok, "{report:?}");
        assert_eq!((report.verified, report.chained, report.unchained, report.breaks_not_listed), (3, 3, 0, 0));
    }

    #[test]
    fn a_head_naming_the_right_seq_with_a_wrong_hash_is_head_mismatch() {
        let (rows, (seq, _)) = chain(3);
        let wrong = sha256_prefixed(b"not the last receipt");
        let report = verify_chain(rows, Some((seq, wrong)), None);
        assert!(!report.ok);
        assert_eq!(names(&report), [("head_mismatch", Some(3))]);
    }

    #[test]
    fn a_head_naming_the_right_hash_with_a_wrong_seq_is_head_mismatch() {
        let (rows, (_, hash)) = chain(3);
        let report = verify_chain(rows, Some((2, hash)), None);
        assert_eq!(names(&report), [("head_mismatch", Some(2))]);
    }

    #[test]
    fn a_store_without_a_head_row_is_head_mismatch() {
        let (rows, _) = chain(2);
        let report = verify_chain(rows, None, None);
        assert_eq!(names(&report), [("head_mismatch", None)]);
        assert_eq!((report.head_seq, report.head_hash), (None, None));
    }

    #[test]
    fn verified_counts_only_the_chained_receipts_nothing_was_reported_against() {
        let (mut rows, head) = chain(5);
        if let Ok(stored) = &mut rows[1].1 {
            stored.hash = None;
        }
        if let Ok(stored) = &mut rows[3].1 {
            stored.document = stored.document.replace("\"committed\"", "\"failed\"");
        }
        let report = verify_chain(rows, Some(head), None);
        assert_eq!(names(&report), [("hash_missing", Some(2)), ("content_altered", Some(4))]);
        assert_eq!((report.ok, report.verified, report.chained), (false, 3, 5));
    }

    #[test]
    fn a_row_that_cannot_be_read_back_is_content_altered_and_not_verified() {
        let (mut rows, head) = chain(4);
        rows[1].1 = Err("postcard: unexpected end of input".into());
        let report = verify_chain(rows, Some(head), None);
        assert_eq!(report.breaks.first().map(|b| (b.name, b.seq)), Some(("content_altered", Some(2))));
        assert!(report.breaks[0].detail.contains("cannot be read back"), "{:?}", report.breaks[0]);
        assert_eq!((report.ok, report.chained), (false, 4));
        assert!(report.verified < 4, "{report:?}");
    }

    #[test]
    fn a_document_that_is_not_json_is_content_altered_once_and_the_next_link_still_holds() {
        let (mut rows, head) = chain(4);
        if let Ok(stored) = &mut rows[1].1 {
            stored.document = "{not json".into();
        }
        let report = verify_chain(rows, Some(head), None);
        assert_eq!(names(&report), [("content_altered", Some(2))]);
        assert_eq!((report.verified, report.chained, report.unchained), (3, 4, 0));
    }

    #[test]
    fn the_last_row_unreadable_still_lets_the_head_match_its_stored_hash() {
        let (mut rows, head) = chain(3);
        if let Ok(stored) = &mut rows[2].1 {
            stored.document = "{\"seq\": 3, truncated".into();
        }
        let report = verify_chain(rows, Some(head), None);
        assert_eq!(names(&report), [("content_altered", Some(3))]);
        assert_eq!(report.verified, 2);
    }

    /// `n` rows whose stored hash is gone, each one a `hash_missing`, under a head that matches.
    fn hashless(n: u64) -> ChainReport {
        let (mut rows, head) = chain(n);
        for (_, row) in &mut rows {
            if let Ok(stored) = row {
                stored.hash = None;
            }
        }
        verify_chain(rows, Some(head), None)
    }

    #[test]
    fn exactly_the_cap_of_breaks_is_listed_with_none_left_out() {
        let report = hashless(MAX_LISTED_BREAKS as u64);
        assert_eq!((report.breaks.len(), report.breaks_not_listed), (MAX_LISTED_BREAKS, 0));
        assert!(!report.ok);
        assert_eq!(report.verified, 0);
    }

    #[test]
    fn breaks_beyond_the_cap_of_one_thousand_are_counted_not_listed() {
        assert_eq!(MAX_LISTED_BREAKS, 1000);
        let report = hashless(1003);
        assert_eq!((report.breaks.len(), report.breaks_not_listed), (1000, 3));
        assert_eq!(report.breaks.last().map(|b| (b.name, b.seq)), Some(("hash_missing", Some(1000))));
        assert!(!report.ok);
    }

    #[test]
    fn a_receipt_with_no_seq_is_unchained_and_reported_once() {
        let (mut rows, head) = chain(2);
        let document = serde_json::json!({"schema": RECEIPT_SCHEMA, "receipt_id": "rcp_x"}).to_string();
        rows.push((3, Ok(StoredReceipt { document, hash: None, executor_result: None })));
        let report = verify_chain(rows, Some(head), None);
        assert_eq!(names(&report), [("unchained", None)]);
        assert_eq!((report.verified, report.chained, report.unchained), (2, 2, 1));
    }
}
