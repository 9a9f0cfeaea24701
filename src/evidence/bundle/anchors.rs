//! `anchors.jsonl`: the anchors' receipts of the exported checkpoints, one line each, and their
//! check (`docs/EVIDENCE.md`, "Verifying a bundle", step 8).

use std::path::Path;

use base64::prelude::{Engine, BASE64_STANDARD};
use serde::{Deserialize, Serialize};

use super::failure::{fail, Failure};
use crate::evidence::anchor::{FileSink, SignedCheckpoint, KIND_FILE, KIND_RFC3161};
use crate::evidence::anchoring::StoredAnchor;
use crate::evidence::tsa::{verify_with, TrustedTsa};

/// The file's name in a bundle.
pub const ANCHORS_FILE: &str = "anchors.jsonl";

/// One line of `anchors.jsonl`: a sink's receipt of one checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnchorLine {
    /// The checkpoint's number.
    pub checkpoint: u64,
    /// The sink that took it.
    pub sink: String,
    /// What the sink handed back (`file`, `http`, `rfc3161`, a custom kind), or `null`.
    pub kind: Option<String>,
    /// Its bytes, base64, or `null` when it handed back nothing.
    pub receipt: Option<String>,
    /// The line for people the worker kept.
    pub description: String,
    /// When it was anchored (RFC 3339).
    pub anchored_at: String,
}

impl AnchorLine {
    /// The line of an anchored row; `None` for a row that still fails.
    pub fn of(row: &StoredAnchor) -> Option<AnchorLine> {
        Some(AnchorLine {
            checkpoint: row.checkpoint,
            sink: row.sink.clone(),
            kind: row.kind.clone(),
            receipt: row.receipt.clone(),
            description: row.description.clone(),
            anchored_at: crate::clock::render(row.anchored_at?),
        })
    }
}

/// What the anchor check counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Counted {
    pub lines: u64,
    pub checked: u64,
}

/// Check every line against the checkpoint it names (`notes`: number → note bytes, with size).
/// A `file` receipt must be that sink's line for the note; an `rfc3161` token must verify
/// against one of `tsas` for the note (left unchecked when none is given); other kinds are
/// carried unchecked.
pub(super) fn check(
    dir: &Path,
    notes: &std::collections::BTreeMap<u64, (String, u64)>,
    tsas: &[TrustedTsa],
) -> std::result::Result<Counted, Failure> {
    let path = dir.join(ANCHORS_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        // A bundle exported before anchors were wired has no file: nothing to check.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Counted::default()),
        Err(e) => return fail("bundle_malformed", format!("cannot read {ANCHORS_FILE}: {e}")),
    };
    let mut counted = Counted::default();
    for (index, raw) in text.lines().enumerate() {
        let at = index + 1;
        let line: AnchorLine = serde_json::from_str(raw)
            .or_else(|e| fail("bundle_malformed", format!("{ANCHORS_FILE} line {at} is not an anchor line: {e}")))?;
        let Some((note, size)) = notes.get(&line.checkpoint) else {
            return fail(
                "bundle_malformed",
                format!(
                    "{ANCHORS_FILE} line {at} anchors checkpoint {}, which the bundle does not hold",
                    line.checkpoint
                ),
            );
        };
        let receipt =
            match &line.receipt {
                None => None,
                Some(encoded) => Some(BASE64_STANDARD.decode(encoded).or_else(|_| {
                    fail("bundle_malformed", format!("{ANCHORS_FILE} line {at}'s receipt is not base64"))
                })?),
            };
        counted.lines += 1;
        let signed = SignedCheckpoint { note: note.as_bytes(), size: *size, number: line.checkpoint };
        match (line.kind.as_deref(), receipt) {
            (Some(KIND_FILE), Some(bytes)) => {
                let expected = FileSink::line(&signed).or_else(|why| fail("bundle_malformed", why))?;
                // The receipt is the line without its newline.
                if bytes != expected.strip_suffix('\n').unwrap_or(&expected).as_bytes() {
                    return fail(
                        "anchor_invalid",
                        format!(
                            "{ANCHORS_FILE} line {at}: the line {} wrote is not checkpoint {}'s",
                            line.sink, line.checkpoint
                        ),
                    );
                }
                counted.checked += 1;
            }
            (Some(KIND_RFC3161), Some(token)) if !tsas.is_empty() => {
                if !tsas.iter().any(|tsa| verify_with(&token, note.as_bytes(), tsa).is_ok()) {
                    return fail(
                        "anchor_invalid",
                        format!(
                            "{ANCHORS_FILE} line {at}: the RFC 3161 token from {} does not verify for checkpoint {} \
                             against the TSA certificate(s) given",
                            line.sink, line.checkpoint
                        ),
                    );
                }
                counted.checked += 1;
            }
            (Some(KIND_FILE | KIND_RFC3161), None) => {
                return fail(
                    "bundle_malformed",
                    format!(
                        "{ANCHORS_FILE} line {at} is a {} anchor without its receipt",
                        line.kind.as_deref().unwrap_or("")
                    ),
                );
            }
            _ => {}
        }
    }
    Ok(counted)
}
