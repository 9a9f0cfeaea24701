//! Evidence: a receipt's inclusion proof, a consistency proof between two checkpoints, and the
//! checkpoints themselves, as the documents `warden proof --json` and `warden checkpoints
//! --json` print (`evidence::proof`). Making a checkpoint needs a signing key and stays with
//! `warden checkpoint --key FILE` and the Rust library: no key crosses this boundary.

use serde_json::Value;

use crate::error::{Error, InvalidInputKind};
use crate::evidence::proof;

use super::bytes::{required_str, warden_buf, Out};
use super::handle::{warden_handle, with_handle};
use super::result::warden_result;

/// A list limit: 0 means no limit.
fn limit(limit: u64) -> Option<usize> {
    match limit {
        0 => None,
        n => Some(usize::try_from(n).unwrap_or(usize::MAX)),
    }
}

/// Returns the audit path of one receipt in one checkpoint's Merkle tree (RFC 9162), checked
/// against the checkpoint's stored root before it is returned: the document `warden proof
/// inclusion RCT_ID --json` prints.
///
/// - `h`: an open handle. Required.
/// - `receipt_id`, `receipt_id_len`: the receipt's id (`rct_…`), UTF-8. Required.
/// - `checkpoint`: the checkpoint's number; 0 is the last one.
/// - `out`: receives `{"receipt_id", "seq", "leaf_index", "leaf_hash", "checkpoint",
///   "tree_size", "root", "proof": [base64 SHA-256…], "proof_bytes"}` on WARDEN_RESULT_OK only
///   (hashes and the root in base64, as the checkpoint's note spells its root; the leaf hash is
///   SHA-256(0x00 ‖ the receipt's document)). Required. Free it with `warden_buf_free`.
/// - `err`: NULL, or receives the error object on failure.
///
/// Returns WARDEN_RESULT_OK; WARDEN_RESULT_NOT_FOUND (no such receipt on the chain; no
/// checkpoint of that number; no checkpoint yet — `warden checkpoint --key FILE` makes one; or
/// the receipt came after the checkpoint — name a later one or make one);
/// WARDEN_RESULT_INVALID_INPUT (a NULL or non-UTF-8 id, a NULL `out`); WARDEN_RESULT_STORE (the
/// computed proof does not verify against the stored root: the store was altered, run `warden
/// doctor`); WARDEN_RESULT_PANIC; WARDEN_RESULT_POISONED.
///
/// Thread safety: safe to call concurrently on one handle.
///
/// # Safety
/// `h` is NULL or a live handle; byte pointers follow the conventions at the top of this
/// header; `out` and `err` are NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn warden_proof_inclusion(
    h: *mut warden_handle,
    receipt_id: *const u8,
    receipt_id_len: usize,
    checkpoint: u64,
    out: *mut warden_buf,
    err: *mut warden_buf,
) -> warden_result {
    let work = |handle: &warden_handle| -> Result<(), Error> {
        let out = Out::required(out, "out")?;
        // SAFETY: the caller's guarantee for (receipt_id, receipt_id_len).
        let receipt_id = unsafe { required_str(receipt_id, receipt_id_len, "receipt_id") }?;
        let number = (checkpoint != 0).then_some(checkpoint);
        let found = proof::inclusion(&handle.kernel, receipt_id, number)?;
        // SAFETY: `out` was checked non-NULL and the caller guarantees it is writable.
        unsafe { out.write_json(&found.to_json()) };
        Ok(())
    };
    // SAFETY: the caller's guarantees for `h` and `err`, forwarded.
    unsafe { with_handle(h, err, work) }
}

/// Returns the consistency proof from checkpoint `old_checkpoint` to checkpoint
/// `new_checkpoint` (RFC 9162: the older tree is a prefix of the newer), checked against both
/// stored roots before it is returned: the document `warden proof consistency OLD NEW --json`
/// prints.
///
/// - `h`: an open handle. Required.
/// - `old_checkpoint`, `new_checkpoint`: the two checkpoints' numbers (from 1), the older
///   first. Equal numbers, or two checkpoints of one size, give an empty proof.
/// - `out`: receives `{"old_checkpoint", "new_checkpoint", "old_size", "new_size", "old_root",
///   "new_root", "proof": [base64 SHA-256…]}` on WARDEN_RESULT_OK only. Required. Free it with
///   `warden_buf_free`.
/// - `err`: NULL, or receives the error object on failure.
///
/// Returns WARDEN_RESULT_OK; WARDEN_RESULT_NOT_FOUND (no checkpoint of that number);
/// WARDEN_RESULT_INVALID_INPUT (a number of 0, a first checkpoint covering more receipts than
/// the second, a NULL `out`; two of one size give an empty proof);
/// WARDEN_RESULT_STORE (the two checkpoints are not consistent: the log was forked or altered,
/// run `warden doctor`); WARDEN_RESULT_PANIC; WARDEN_RESULT_POISONED.
///
/// Thread safety: safe to call concurrently on one handle.
///
/// # Safety
/// `h` is NULL or a live handle; `out` and `err` are NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn warden_proof_consistency(
    h: *mut warden_handle,
    old_checkpoint: u64,
    new_checkpoint: u64,
    out: *mut warden_buf,
    err: *mut warden_buf,
) -> warden_result {
    let work = |handle: &warden_handle| -> Result<(), Error> {
        let out = Out::required(out, "out")?;
        if let Some(zero) = [("old_checkpoint", old_checkpoint), ("new_checkpoint", new_checkpoint)]
            .iter()
            .find(|(_, n)| *n == 0)
            .map(|(name, _)| name)
        {
            return Err(Error::invalid_at(
                InvalidInputKind::OutOfRange,
                *zero,
                format!("{zero} is 0; checkpoints are numbered from 1 (warden_checkpoints lists them)"),
            ));
        }
        let found = proof::consistency(&handle.kernel, old_checkpoint, new_checkpoint)?;
        // SAFETY: `out` was checked non-NULL and the caller guarantees it is writable.
        unsafe { out.write_json(&found.to_json()) };
        Ok(())
    };
    // SAFETY: the caller's guarantees for `h` and `err`, forwarded.
    unsafe { with_handle(h, err, work) }
}

/// Lists the store's signed checkpoints numbered `from` on, in number order, as a JSON array of
/// `{"number", "origin", "size", "root", "time", "verifier_key", "note"}`: each object as
/// `warden checkpoints --json` lists it (`note` is the signed note exactly as signed; the
/// verifier key is public, no signing key is stored). An empty array when there is none yet.
///
/// - `h`: an open handle. Required.
/// - `from`: the first number to list; 0 and 1 both mean the first checkpoint.
/// - `limit`: at most this many; 0 means no limit (the library reads them a page at a time).
/// - `out`: receives the JSON on WARDEN_RESULT_OK only. Required. Free it with
///   `warden_buf_free`.
/// - `err`: NULL, or receives the error object on failure.
///
/// Returns WARDEN_RESULT_OK; WARDEN_RESULT_INVALID_INPUT; WARDEN_RESULT_STORE;
/// WARDEN_RESULT_PANIC; WARDEN_RESULT_POISONED.
///
/// Thread safety: safe to call concurrently on one handle.
///
/// # Safety
/// `h` is NULL or a live handle; `out` and `err` are NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn warden_checkpoints(
    h: *mut warden_handle,
    from: u64,
    limit: u64,
    out: *mut warden_buf,
    err: *mut warden_buf,
) -> warden_result {
    let work = |handle: &warden_handle| -> Result<(), Error> {
        let out = Out::required(out, "out")?;
        let listed = proof::checkpoints(&handle.kernel, from, self::limit(limit))?;
        // SAFETY: `out` was checked non-NULL and the caller guarantees it is writable.
        unsafe { out.write_json(&Value::Array(listed.iter().map(proof::checkpoint_json).collect())) };
        Ok(())
    };
    // SAFETY: the caller's guarantees for `h` and `err`, forwarded.
    unsafe { with_handle(h, err, work) }
}
