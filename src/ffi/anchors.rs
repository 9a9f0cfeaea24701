//! The host's own anchors: a callback that receives each signed checkpoint on the handle's
//! checkpoint thread and may hand back a receipt to keep beside it (a cosignature, a
//! transparency log's entry), sent after the document's `evidence.anchors`
//! (`evidence::anchoring`). A failure never fails an action; it is kept and retried.

use std::ffi::c_void;
use std::sync::Arc;

use base64::prelude::{Engine, BASE64_STANDARD};
use serde_json::Value;

use crate::error::{Error, InvalidInputKind};
use crate::evidence::anchor::{AnchorError, AnchorProvider, AnchorReceipt, SignedCheckpoint};

use super::bytes::{required_json, required_str, warden_buf};
use super::handle::{warden_handle, with_handle};
use super::request::Fields;
use super::result::warden_result;

/// The longest name a host anchor may have.
const MAX_NAME: usize = 64;

/// A host anchor: called with the `user_data` given to `warden_anchor_add` and one signed
/// checkpoint as UTF-8 JSON `{"number", "size", "origin", "note"}` (`note` is the signed note,
/// exactly as signed; not NUL-terminated, valid only during the call). Return 0 when the
/// checkpoint was taken, after `warden_anchor_put` with what to keep (or without it when there
/// is nothing to keep); any other value is a failure, retried later, whose message is the
/// `error` given to `warden_anchor_put`, if any.
///
/// Thread safety: called on the handle's checkpoint thread, never on a thread that proposes;
/// one call at a time per handle.
#[allow(non_camel_case_types)]
pub type warden_anchor_fn = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        checkpoint: *const u8,
        checkpoint_len: usize,
        sink: *mut warden_anchor_sink,
    ) -> i32,
>;

type AnchorCallback = unsafe extern "C" fn(*mut c_void, *const u8, usize, *mut warden_anchor_sink) -> i32;

/// Where a host anchor puts its answer. Opaque; valid only during the callback call that
/// received it.
#[allow(non_camel_case_types)]
pub struct warden_anchor_sink {
    answer: Option<Answer>,
}

enum Answer {
    Keep(AnchorReceipt),
    Failed(String),
}

/// A registered host anchor and its `user_data`.
struct HostAnchor {
    name: String,
    callback: AnchorCallback,
    user_data: *mut c_void,
}

// SAFETY: `warden_anchor_add` documents that the callback and `user_data` must be callable from
// the handle's checkpoint thread until the handle is closed; Warden only passes the pointer back
// to the host's own function, one call at a time.
unsafe impl Send for HostAnchor {}
// SAFETY: as above; Warden never dereferences `user_data`.
unsafe impl Sync for HostAnchor {}

impl AnchorProvider for HostAnchor {
    fn name(&self) -> String {
        format!("host {}", self.name)
    }

    fn anchor(&self, checkpoint: &SignedCheckpoint<'_>) -> Result<Option<AnchorReceipt>, AnchorError> {
        let fail = |message: String| AnchorError { sink: self.name(), code: "host_error".into(), message };
        let note = std::str::from_utf8(checkpoint.note).map_err(|_| fail("the checkpoint note is not UTF-8".into()))?;
        let origin = note.lines().next().unwrap_or_default();
        let text = serde_json::json!({
            "number": checkpoint.number, "size": checkpoint.size, "origin": origin, "note": note,
        })
        .to_string();
        let mut sink = warden_anchor_sink { answer: None };
        // SAFETY: the host registered `callback` as a valid function taking these arguments;
        // `text` is live for the call and `sink` is a live exclusive borrow for the call.
        let status = unsafe { (self.callback)(self.user_data, text.as_ptr(), text.len(), &raw mut sink) };
        match (status, sink.answer) {
            (0, Some(Answer::Keep(receipt))) => Ok(Some(receipt)),
            (0, None) => Ok(None),
            (0, Some(Answer::Failed(message))) => Err(fail(format!(
                "the host's anchor returned 0 after putting an error ({message}); return non-zero for a failure"
            ))),
            (_, Some(Answer::Failed(message))) => Err(fail(message)),
            (status, _) => Err(fail(format!("the host's anchor returned {status}; it is retried"))),
        }
    }
}

/// Adds a host anchor to this handle: every checkpoint its automatic-checkpoint thread signs is
/// sent to `callback` too, after the document's `evidence.anchors`, and each try is recorded
/// under the sink name `host NAME` (`warden doctor` reports it; `warden export` carries what
/// came back). A failure is retried after a delay that doubles from 2 s to 5 minutes. A handle
/// sends the checkpoints it did not yet send to this sink, starting at the newest.
///
/// - `h`: an open handle whose document has an `evidence` section (without one the handle makes
///   no checkpoints, so there is nothing to send). Required.
/// - `name`, `name_len`: the anchor's name, UTF-8: 1 to 64 of `A-Z a-z 0-9 . _ : / -`, new on
///   this handle. It is never a secret: it keys the store's records and shows in reports.
/// - `callback`, `user_data`: see `warden_anchor_fn`. `user_data` is passed back unchanged and
///   never dereferenced by Warden. Required callback.
/// - `err`: NULL, or receives the error object on failure.
///
/// Returns WARDEN_RESULT_OK; WARDEN_RESULT_INVALID_INPUT (a NULL callback, a bad or repeated
/// name); WARDEN_RESULT_CONFIG (the document has no `evidence` section, or the handle was
/// opened without a document or with automatic checkpoints off); WARDEN_RESULT_PANIC;
/// WARDEN_RESULT_POISONED.
///
/// Thread safety: safe from any thread. An anchor is never replaced or removed: it is called
/// until `warden_close`, after which it is not called again and the host may free it.
///
/// # Safety
/// `h` is NULL or a live handle; byte pointers follow the conventions at the top of this
/// header; `callback` is NULL or a function with the `warden_anchor_fn` signature, callable
/// from another thread until the handle is closed; `err` is NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn warden_anchor_add(
    h: *const warden_handle,
    name: *const u8,
    name_len: usize,
    callback: warden_anchor_fn,
    user_data: *mut c_void,
    err: *mut warden_buf,
) -> warden_result {
    let work = |handle: &warden_handle| -> Result<(), Error> {
        // SAFETY: the caller's guarantee for (name, name_len).
        let name = unsafe { required_str(name, name_len, "name") }?;
        let fits = !name.is_empty()
            && name.len() <= MAX_NAME
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._:/-".contains(&b));
        if !fits {
            return Err(Error::invalid_at(
                InvalidInputKind::Malformed,
                "name",
                format!("an anchor's name is 1 to {MAX_NAME} of A-Z a-z 0-9 . _ : / -, such as witness.example/log"),
            ));
        }
        let callback = callback.ok_or_else(|| {
            Error::invalid_at(InvalidInputKind::Missing, "callback", "callback is NULL; pass the function that anchors")
        })?;
        let checkpointer = handle.warden()?.checkpointer().ok_or_else(|| {
            Error::Config(
                "this handle makes no checkpoints, so it has nothing to anchor: give its document an evidence \
                 section (docs/EVIDENCE.md, \"Automatic checkpoints\") and open it with automatic checkpoints on"
                    .into(),
            )
        })?;
        checkpointer.add_anchor(Arc::new(HostAnchor { name: name.to_owned(), callback, user_data }))
    };
    // SAFETY: the caller's guarantees for `h` and `err`, forwarded.
    unsafe { with_handle(h, err, work) }
}

/// Hands Warden a host anchor's answer, as UTF-8 JSON. Call it from inside a `warden_anchor_fn`,
/// at most once per call (a second call replaces the answer).
///
/// - `sink`: the sink the callback received. Required.
/// - `answer`, `len`: `{"kind": str, "receipt": base64, "description": str}` to keep a receipt
///   beside the checkpoint (`kind` names what it is, 1 to 64 printable ASCII characters;
///   `receipt` at most 64 KiB decoded; `description` one line for people, optional), or
///   `{"error": str}` with the callback then returning non-zero (a failure's message, kept
///   for `warden doctor`; never put a secret in it).
///
/// Returns WARDEN_RESULT_OK; WARDEN_RESULT_INVALID_INPUT (NULL sink, invalid UTF-8 or JSON, an
/// answer of another shape); WARDEN_RESULT_PANIC. Never writes an error object (no `err`).
///
/// Thread safety: only on the thread running the callback that received `sink`.
///
/// # Safety
/// `sink` is NULL or the sink passed to the running callback; `(answer, len)` follows the
/// conventions at the top of this header.
#[no_mangle]
pub unsafe extern "C" fn warden_anchor_put(
    sink: *mut warden_anchor_sink,
    answer: *const u8,
    len: usize,
) -> warden_result {
    let work = |sink: &mut warden_anchor_sink| -> Result<(), Error> {
        // SAFETY: the caller's guarantee for (answer, len).
        let value = unsafe { required_json(answer, len, "answer") }?;
        sink.answer = Some(parse_answer(&value)?);
        Ok(())
    };
    // SAFETY: the caller guarantees NULL or the live sink of the running callback, which
    // nothing else touches during the callback.
    unsafe { super::panic::put_into(sink, work) }
}

/// The largest receipt a host anchor may hand back, decoded.
const MAX_RECEIPT: usize = 64 * 1024;

fn parse_answer(value: &Value) -> Result<Answer, Error> {
    let fields = Fields::new(value, "answer", &["kind", "receipt", "description", "error"])?;
    if let Some(message) = fields.string("error")? {
        if fields.get("kind").is_some() || fields.get("receipt").is_some() {
            return Err(Error::invalid_at(
                InvalidInputKind::Conflict,
                "answer",
                "answer: an error carries no kind or receipt",
            ));
        }
        return Ok(Answer::Failed(message.to_owned()));
    }
    let kind = fields.string("kind")?.ok_or_else(|| {
        Error::invalid_at(InvalidInputKind::Missing, "answer.kind", "answer.kind is required: what the receipt is")
    })?;
    if kind.is_empty() || kind.len() > 64 || !kind.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(Error::invalid_at(
            InvalidInputKind::Malformed,
            "answer.kind",
            "answer.kind is 1 to 64 printable ASCII characters",
        ));
    }
    let encoded = fields.string("receipt")?.ok_or_else(|| {
        Error::invalid_at(
            InvalidInputKind::Missing,
            "answer.receipt",
            "answer.receipt is required: the receipt's bytes, base64",
        )
    })?;
    let bytes = BASE64_STANDARD.decode(encoded).map_err(|_| {
        Error::invalid_at(InvalidInputKind::Malformed, "answer.receipt", "answer.receipt is not base64")
    })?;
    if bytes.len() > MAX_RECEIPT {
        return Err(Error::invalid_at(
            InvalidInputKind::TooLarge,
            "answer.receipt",
            format!("answer.receipt is over {MAX_RECEIPT} bytes"),
        ));
    }
    let description = fields.string("description")?.unwrap_or_default().to_owned();
    Ok(Answer::Keep(AnchorReceipt { kind: kind.to_owned(), bytes, description }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_answer_is_a_receipt_or_an_error_and_nothing_else() {
        let kept = parse_answer(&json!({"kind": "cosignature", "receipt": "AQI=", "description": "ok"})).unwrap();
        assert!(
            matches!(kept, Answer::Keep(AnchorReceipt { ref kind, ref bytes, .. }) if kind == "cosignature" && bytes == &[1, 2])
        );
        assert!(matches!(parse_answer(&json!({"error": "down"})).unwrap(), Answer::Failed(m) if m == "down"));
        let refused = [
            (json!({}), "answer.kind is required"),
            (json!({"kind": "k"}), "answer.receipt is required"),
            (json!({"kind": "", "receipt": ""}), "1 to 64 printable"),
            (json!({"kind": "two words", "receipt": ""}), "1 to 64 printable"),
            (json!({"kind": "k", "receipt": "not base64!"}), "not base64"),
            (json!({"kind": "k", "receipt": BASE64_STANDARD.encode(vec![0u8; MAX_RECEIPT + 1])}), "over 65536 bytes"),
            (json!({"error": "x", "kind": "k"}), "carries no kind"),
            (json!({"kind": "k", "receipt": "", "extra": 1}), "extra"),
            (json!([1]), "answer"),
        ];
        for (value, words) in refused {
            let Err(error) = parse_answer(&value) else { panic!("{value} was accepted") };
            assert!(error.to_string().contains(words), "{value}: {error}");
        }
        let at_the_bound = json!({"kind": "k", "receipt": BASE64_STANDARD.encode(vec![0u8; MAX_RECEIPT])});
        assert!(parse_answer(&at_the_bound).is_ok());
    }
}
