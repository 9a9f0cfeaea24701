//! Checkpoints: the signed statement "the log `origin` had `size` receipts with this Merkle root,
//! at this time, with these effects still open". The text is a C2SP `tlog-checkpoint`:
//!
//! ```text
//! <origin>
//! <size>
//! <base64 root>
//! warden-time <RFC 3339 UTC, milliseconds>
//! warden-open <open effects> <base64 SHA-256 of the companion document>
//! ```
//!
//! signed as a C2SP signed note (Ed25519). The companion document (`checkpoints/N.json` in a
//! bundle) lists the effects still open — reserved, executing or AMBIGUOUS — and the effects the
//! previous checkpoint saw open that closed without a receipt (the integrator API's `complete`,
//! a human's `resolve`), so a verifier can tell "no outcome yet" from "outcome withheld". Pure:
//! the kernel gathers a [`Basis`], this module writes and reads the texts.

use base64::prelude::{Engine, BASE64_STANDARD};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::clock::Micros;
use crate::error::{Error, InvalidInputKind, Result};

/// The extension line naming the checkpoint's time.
pub const TIME_LINE: &str = "warden-time";
/// The extension line binding the companion document.
pub const OPEN_LINE: &str = "warden-open";
/// The `format` member of every companion document.
pub const COMPANION_FORMAT: &str = "warden.checkpoint/v1";

/// One effect open when a checkpoint was made.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct OpenEffect {
    /// The effect key.
    pub effect_key: String,
    /// The attempt holding it or left AMBIGUOUS.
    pub attempt: u32,
    /// `reserved`, `executing` or `ambiguous`.
    pub state: String,
}

/// An effect the previous checkpoint saw open that closed with no receipt in between.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ClosedWithoutReceipt {
    /// The effect key.
    pub effect_key: String,
    /// The attempt the previous checkpoint saw.
    pub attempt: u32,
    /// The state the effect row has now (`committed`, `failed`, or a later attempt's).
    pub state: String,
    /// Who resolved it, when a human or a reconcile hook did.
    pub resolved_by: Option<String>,
}

/// The companion document of one checkpoint, as its `warden-open` line hashes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Companion {
    /// Always [`COMPANION_FORMAT`].
    pub format: String,
    /// The checkpoint's number, from 1.
    pub checkpoint: u64,
    /// The log's origin.
    pub origin: String,
    /// The tree size.
    pub size: u64,
    /// The checkpoint's time, as its `warden-time` line says it.
    pub time: String,
    /// The effects open at the checkpoint, by key.
    pub open: Vec<OpenEffect>,
    /// The previous checkpoint's open effects that closed without a receipt, by key.
    pub closed_without_receipt: Vec<ClosedWithoutReceipt>,
}

/// What one checkpoint states, gathered in one transaction (`Kernel::checkpoint_basis`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Basis {
    /// The checkpoint's number: the last one's plus one.
    pub number: u64,
    /// The log's origin.
    pub origin: String,
    /// The receipts on the chain.
    pub size: u64,
    /// Their Merkle root.
    pub root: [u8; 32],
    /// The instant of the transaction.
    pub time: Micros,
    /// The effects open.
    pub open: Vec<OpenEffect>,
    /// The previous checkpoint's open effects that closed without a receipt.
    pub closed_without_receipt: Vec<ClosedWithoutReceipt>,
}

/// One checkpoint as the store keeps it: the signed note, its companion document and the
/// verifier key that signed it (never the signing key).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredCheckpoint {
    /// Its number, from 1.
    pub number: u64,
    /// The log's origin.
    pub origin: String,
    /// The tree size.
    pub size: u64,
    /// The root, base64 as the note spells it.
    pub root: String,
    /// When it was made.
    pub time: Micros,
    /// The signed note, exactly as signed.
    pub note: String,
    /// The companion document, exactly as hashed.
    pub companion: String,
    /// The verifier key of the signature (`NAME+ID+BASE64`).
    pub verifier: String,
}

/// The `(effect_key, attempt)` a receipt document closes: it records that attempt's outcome as
/// committed or failed (observe mode: what the executor did). The one rule the store's checkpoint
/// and every verifier use to say an open effect got its outcome receipt.
pub fn closes(document: &serde_json::Value) -> Option<(String, u32)> {
    let key = document.get("effect_key")?.as_str()?;
    let attempt = u32::try_from(document.get("attempt")?.as_u64()?).ok()?;
    let terminal = |field: &str| {
        document.get(field).and_then(serde_json::Value::as_str).is_some_and(|result| {
            result == crate::receipt::ReceiptResult::Committed.as_str()
                || result == crate::receipt::ReceiptResult::Failed.as_str()
        })
    };
    (terminal("result") || terminal("execution")).then(|| (key.to_owned(), attempt))
}

/// Whether `origin` may name a log: 1 to 255 printable ASCII bytes, no space and no `+` (the
/// signed-note rule for names, so a key may be named after its log).
pub fn is_origin(origin: &str) -> bool {
    !origin.is_empty() && origin.len() < 256 && origin.bytes().all(|b| b.is_ascii_graphic() && b != b'+')
}

/// The companion document and the note text of `basis`.
pub fn texts(basis: &Basis) -> Result<(String, String)> {
    if !is_origin(&basis.origin) {
        return Err(Error::invalid_at(
            InvalidInputKind::Malformed,
            "origin",
            format!(
                "{:?} cannot be a log's origin: 1 to 255 printable ASCII characters, no space, no '+'",
                basis.origin
            ),
        ));
    }
    let time = crate::clock::render(basis.time);
    let companion = Companion {
        format: COMPANION_FORMAT.into(),
        checkpoint: basis.number,
        origin: basis.origin.clone(),
        size: basis.size,
        time: time.clone(),
        open: basis.open.clone(),
        closed_without_receipt: basis.closed_without_receipt.clone(),
    };
    let mut companion = serde_json::to_string_pretty(&companion).map_err(|e| {
        Error::invalid(InvalidInputKind::NotCanonical, format!("cannot encode a checkpoint's companion: {e}"))
    })?;
    companion.push('\n');
    let text = format!(
        "{}\n{}\n{}\n{TIME_LINE} {time}\n{OPEN_LINE} {} {}\n",
        basis.origin,
        basis.size,
        BASE64_STANDARD.encode(basis.root),
        basis.open.len(),
        BASE64_STANDARD.encode(Sha256::digest(companion.as_bytes()))
    );
    Ok((companion, text))
}

/// A checkpoint's text, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Body {
    /// The log's origin.
    pub origin: String,
    /// The tree size.
    pub size: u64,
    /// The root.
    pub root: [u8; 32],
    /// The `warden-time` value.
    pub time: String,
    /// The `warden-open` count.
    pub open: u64,
    /// The `warden-open` hash of the companion document.
    pub companion_hash: [u8; 32],
}

/// Read a checkpoint's text (a verified note's text), or say what is wrong with it.
pub fn parse(text: &str) -> std::result::Result<Body, String> {
    let lines: Vec<&str> = text.strip_suffix('\n').ok_or("the text does not end with a newline")?.split('\n').collect();
    let [origin, size, root, time, open] = lines[..] else {
        return Err(format!(
            "a checkpoint has 5 lines (origin, size, root, {TIME_LINE}, {OPEN_LINE}); this has {}",
            lines.len()
        ));
    };
    if !is_origin(origin) {
        return Err(format!("{origin:?} is not an origin"));
    }
    let size = size
        .parse::<u64>()
        .ok()
        .filter(|n| n.to_string() == size)
        .ok_or_else(|| format!("the size {size:?} is not a decimal number"))?;
    let root = decode_hash(root).ok_or_else(|| format!("the root {root:?} is not a base64 SHA-256"))?;
    let time = time
        .strip_prefix(TIME_LINE)
        .and_then(|rest| rest.strip_prefix(' '))
        .filter(|t| crate::clock::parse(t).is_ok())
        .ok_or_else(|| format!("the fourth line {time:?} is not `{TIME_LINE} <RFC 3339 time>`"))?;
    let bad_open = || format!("the fifth line {open:?} is not `{OPEN_LINE} <count> <base64 SHA-256>`");
    let rest = open.strip_prefix(OPEN_LINE).and_then(|rest| rest.strip_prefix(' ')).ok_or_else(bad_open)?;
    let (count, hash) = rest.split_once(' ').ok_or_else(bad_open)?;
    let count = count.parse::<u64>().ok().filter(|n| n.to_string() == count).ok_or_else(bad_open)?;
    let companion_hash = decode_hash(hash).ok_or_else(bad_open)?;
    Ok(Body { origin: origin.to_owned(), size, root, time: time.to_owned(), open: count, companion_hash })
}

/// A base64 SHA-256, decoded.
pub fn decode_hash(text: &str) -> Option<[u8; 32]> {
    BASE64_STANDARD.decode(text).ok().and_then(|bytes| <[u8; 32]>::try_from(bytes).ok())
}

/// The SHA-256 of a companion document's bytes.
pub fn companion_hash(companion: &str) -> [u8; 32] {
    Sha256::digest(companion.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basis() -> Basis {
        Basis {
            number: 2,
            origin: "warden/test".into(),
            size: 7,
            root: [9u8; 32],
            time: 1_700_000_000_123_000,
            open: vec![OpenEffect { effect_key: "k".into(), attempt: 1, state: "reserved".into() }],
            closed_without_receipt: vec![],
        }
    }

    #[test]
    fn a_checkpoint_text_reads_back_what_it_states() {
        let (companion, text) = texts(&basis()).unwrap();
        let body = parse(&text).unwrap();
        assert_eq!((body.origin.as_str(), body.size, body.root, body.open), ("warden/test", 7, [9u8; 32], 1));
        assert_eq!(body.time, "2023-11-14T22:13:20.123Z");
        assert_eq!(body.companion_hash, companion_hash(&companion));
        let read: Companion = serde_json::from_str(&companion).unwrap();
        assert_eq!(read.open, basis().open);
        // tlog_tiles reads the same three first lines and keeps the rest as extension lines.
        let parsed = tlog_tiles::checkpoint::Checkpoint::from_bytes(text.as_bytes()).unwrap();
        assert_eq!((parsed.origin(), parsed.size(), parsed.hash().0), ("warden/test", 7, [9u8; 32]));
        assert!(parsed.extension().starts_with("warden-time "));
    }

    #[test]
    fn malformed_texts_are_refused_with_what_is_wrong() {
        let (_, text) = texts(&basis()).unwrap();
        let cases: &[(&str, &str)] = &[
            ("warden/test\n7\n", "5 lines"),
            ("warden/test\n07\nCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQk=\nwarden-time 2023-11-14T22:13:20.123Z\nwarden-open 1 CQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQk=\n", "decimal"),
            ("warden test\n7\nx\ny\nz\n", "origin"),
        ];
        for (bad, says) in cases {
            let error = parse(bad).unwrap_err();
            assert!(error.contains(says), "{bad:?}: {error}");
        }
        assert!(parse(text.trim_end()).is_err());
        assert!(parse(&text.replace("warden-time", "warden-when")).is_err());
        assert!(parse(&text.replace("warden-open 1", "warden-open x")).is_err());
        let mut long = basis();
        long.origin = "a+b".into();
        assert!(texts(&long).is_err());
    }
}
