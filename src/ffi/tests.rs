//! The C ABI exercised from Rust through the exported functions themselves.

use std::ffi::CStr;
use std::ptr;

use serde_json::{json, Value};

use super::approvals::*;
use super::bytes::*;
use super::effects::*;
use super::handle::*;
use super::permit::*;
use super::pure::*;
use super::result::*;
use super::store_ops::*;
use super::{warden_abi_version, WARDEN_ABI_VERSION};
use crate::error::{DuplicateState, Error, StoreFaultKind};
use crate::EffectState;

const POLICY: &str = r#"schema: warden/v1
environment: production
actions:
  customer.read:
    decision: allow
  stripe.refund:
    effect: "refund:{payment_id}"
    max_attempts: 3
    lease: PT5M
    rules:
      - when: { amount_gte: 0, amount_lte: 50000 }
        decision: allow
      - when: { amount_gte: 0, amount_lte: 500000 }
        decision: approve
      - decision: deny
"#;

/// An owned buffer from the library, freed on drop.
struct Owned(warden_buf);

impl Owned {
    fn text(&self) -> &str {
        // SAFETY: the library returned `len` bytes of UTF-8 at `ptr`, alive until freed.
        let bytes = unsafe { std::slice::from_raw_parts(self.0.ptr, self.0.len) };
        std::str::from_utf8(bytes).expect("the library returns UTF-8")
    }

    fn json(&self) -> Value {
        serde_json::from_str(self.text()).expect("the library returns JSON")
    }
}

impl std::fmt::Debug for Owned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.ptr.is_null() {
            f.write_str("<empty>")
        } else {
            f.write_str(self.text())
        }
    }
}

impl Drop for Owned {
    fn drop(&mut self) {
        // SAFETY: a buffer returned by the library, freed once here.
        unsafe { warden_buf_free(std::mem::replace(&mut self.0, empty())) }
    }
}

fn empty() -> warden_buf {
    warden_buf { ptr: ptr::null_mut(), len: 0 }
}

/// A failed call: its code and its error object.
#[derive(Debug)]
struct Failure {
    code: warden_result,
    error: Value,
}

/// Runs `call` with an output buffer and an error buffer; `Ok(output)` on WARDEN_RESULT_OK.
fn with_out(call: impl FnOnce(*mut warden_buf, *mut warden_buf) -> warden_result) -> Result<Owned, Failure> {
    let mut out = empty();
    let mut err = empty();
    let code = call(&raw mut out, &raw mut err);
    let (out, err) = (Owned(out), Owned(err));
    if code == WARDEN_RESULT_OK {
        assert!(err.0.ptr.is_null(), "err is untouched on success");
        Ok(out)
    } else {
        assert!(out.0.ptr.is_null(), "out is written only on success");
        Err(Failure { code, error: err.json() })
    }
}

fn with_err(call: impl FnOnce(*mut warden_buf) -> warden_result) -> Result<(), Failure> {
    with_out(|_, err| call(err)).map(drop)
}

struct Handle {
    raw: *mut warden_handle,
    _dir: tempfile::TempDir,
}

impl Drop for Handle {
    fn drop(&mut self) {
        // SAFETY: a handle from `warden_open`, closed once here.
        unsafe { warden_close(self.raw) }
    }
}

fn open(config: Option<&str>) -> Handle {
    open_with(config, r#"{"environment": "production"}"#).expect("the store opens")
}

/// Opens a store in a fresh directory with these `options_json`.
fn open_with(config: Option<&str>, options: &str) -> Result<Handle, Failure> {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("state.redb").to_string_lossy().into_owned();
    let config_path = config.map(|text| {
        let path = dir.path().join("warden.yaml");
        std::fs::write(&path, text).expect("write the config");
        path.to_string_lossy().into_owned()
    });
    let mut raw = ptr::null_mut();
    let opened = with_err(|err| {
        let (config, config_len) = config_path.as_deref().map_or((ptr::null(), 0), |c| (c.as_ptr(), c.len()));
        // SAFETY: every (ptr, len) pair is a live Rust string; `raw` and `err` are writable.
        unsafe {
            warden_open(
                store.as_ptr(),
                store.len(),
                config,
                config_len,
                options.as_ptr(),
                options.len(),
                &raw mut raw,
                err,
            )
        }
    });
    opened.map(|()| Handle { raw, _dir: dir })
}

fn propose(handle: &Handle, request: &Value) -> Result<*mut warden_permit, Failure> {
    let text = request.to_string();
    let mut permit = ptr::null_mut();
    // SAFETY: a live handle, a live string, writable out-parameters.
    with_err(|err| unsafe { warden_propose(handle.raw, text.as_ptr(), text.len(), &raw mut permit, err) })?;
    assert!(!permit.is_null());
    Ok(permit)
}

fn info(permit: *mut warden_permit) -> Value {
    // SAFETY: a live permit and writable out-parameters.
    with_out(|out, err| unsafe { warden_permit_info(permit, out, err) }).expect("permit info").json()
}

fn commit(permit: *mut warden_permit, result: &str) -> Result<(), Failure> {
    // SAFETY: a live permit, a live string, a writable err.
    with_err(|err| unsafe { warden_permit_commit(permit, result.as_ptr(), result.len(), err) })
}

fn free(permit: *mut warden_permit) {
    // SAFETY: a permit from `warden_propose`, freed once.
    unsafe { warden_permit_free(permit) }
}

fn effect(handle: &Handle, key: &str) -> Value {
    // SAFETY: a live handle, a live string, writable out-parameters.
    with_out(|out, err| unsafe { warden_effect_get(handle.raw, key.as_ptr(), key.len(), out, err) })
        .expect("effect get")
        .json()
}

fn refund(payment: &str, amount: i64) -> Value {
    json!({
        "name": "stripe.refund",
        "arguments": {"payment_id": payment, "amount": amount},
        "principal": {"agent": "refund-agent", "user": "ada"},
    })
}

fn name(code: warden_result) -> &'static str {
    // SAFETY: `warden_result_name` returns a static NUL-terminated string.
    unsafe { CStr::from_ptr(warden_result_name(code)) }.to_str().expect("ASCII")
}

// ---- the header ---------------------------------------------------------------------------------

const HEADER: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/include/warden.h"));

#[test]
fn the_committed_header_is_the_generated_one() {
    let generated = include_str!(concat!(env!("OUT_DIR"), "/warden.h"));
    let committed =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/include/warden.h")).unwrap_or_default();
    assert!(
        generated == committed,
        "include/warden.h is stale: regenerate it with `WARDEN_UPDATE_HEADER=1 cargo build` and commit it"
    );
}

/// `(code, name)` rows of a table, found by `parse` on each line.
fn table(text: &str, parse: impl Fn(&str) -> Option<(u32, String)>) -> Vec<(u32, String)> {
    text.lines().filter_map(parse).collect()
}

fn known_codes() -> Vec<(u32, String)> {
    CODES.iter().map(|(code, name)| (*code, name.to_str().expect("ASCII").to_owned())).collect()
}

#[test]
fn the_code_table_in_the_header_comment_the_defines_and_docs_abi_agree_with_the_library() {
    let comment_rows = table(HEADER.split("*/").next().unwrap_or_default(), |line| {
        let mut words = line.trim_start_matches([' ', '*']).split_whitespace();
        let code = words.next()?.parse().ok()?;
        Some((code, words.next()?.to_owned()))
    });
    let defines = table(HEADER, |line| {
        let rest = line.strip_prefix("#define WARDEN_RESULT_")?;
        let (name, code) = rest.split_once(' ')?;
        Some((code.trim().parse().ok()?, format!("WARDEN_RESULT_{name}")))
    });
    let abi_md = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/ABI.md")).expect("docs/ABI.md");
    let documented = table(&abi_md, |line| {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        Some((cells.get(1)?.parse().ok()?, cells.get(2)?.trim_matches('`').to_owned()))
    });
    let known = known_codes();
    assert_eq!(comment_rows, known, "the table at the top of the header (cbindgen.toml)");
    assert_eq!(defines, known, "the #define lines");
    assert_eq!(documented, known, "the table in docs/ABI.md");
}

#[test]
fn every_function_in_the_header_documents_threads_null_and_its_codes() {
    let mut comment = Vec::new();
    let mut checked = 0;
    for line in HEADER.lines() {
        if let Some(text) = line.strip_prefix("//") {
            comment.push(text.to_owned());
            continue;
        }
        let is_prototype = line.contains("warden_") && line.contains('(') && !line.starts_with([' ', '*', '/', '#']);
        if is_prototype {
            let doc = comment.join("\n");
            let function = line.split('(').next().unwrap_or_default();
            assert!(doc.contains("Thread safety"), "{function} does not document thread safety:\n{doc}");
            if line.starts_with("warden_result ") {
                assert!(doc.contains("Returns WARDEN_RESULT_OK"), "{function} does not list its codes:\n{doc}");
                assert!(doc.contains("NULL"), "{function} does not say what NULL means:\n{doc}");
            }
            checked += 1;
        }
        if !line.starts_with(' ') {
            comment.clear();
        }
    }
    assert_eq!(checked, 80, "the number of functions (75) and callback typedefs (5) in the header changed; check this test still reads them all");
}

#[test]
fn the_header_holds_no_test_only_export() {
    assert!(!HEADER.contains("warden_test_"), "a test-only export leaked into include/warden.h");
}

// ---- codes ------------------------------------------------------------------------------------

#[test]
fn every_error_maps_to_a_code_in_its_family() {
    let errors = [
        Error::Denied { reason: "r".into(), detail: "d".into() },
        Error::ApprovalRequired { request_id: "apr_x".into(), expires_at: 0, action_hash: "sha256:x".into() },
        Error::ApprovalMismatch { reason: "r".into(), approval_id: "apr_x".into(), detail: "d".into() },
        Error::Duplicate { state: DuplicateState::Committed, effect_key: "k".into(), holder: "act_x".into() },
        Error::Duplicate { state: DuplicateState::InProgress, effect_key: "k".into(), holder: "act_x".into() },
        Error::Ambiguous { effect_key: "k".into(), action_id: "act_x".into(), detail: "d".into() },
        Error::AttemptCeiling { effect_key: "k".into(), attempts: 3, max_attempts: 3 },
        Error::NotResolvable { effect_key: "k".into(), state: EffectState::Committed },
        Error::LateOutcome { effect_key: "k".into(), state: EffectState::Ambiguous, holder: "act_x".into() },
        Error::NotFound("n".into()),
        Error::DelegationRefused {
            reason: "containment".into(),
            parent_id: "root".into(),
            dimension: Some("constraints".into()),
            detail: "d".into(),
        },
        Error::InvalidInput("i".into()),
        Error::store(StoreFaultKind::Io, "s"),
        Error::Config("c".into()),
        Error::Poisoned("p".into()),
        Error::Panic("p".into()),
    ];
    let mut seen = std::collections::BTreeSet::new();
    for error in &errors {
        let code = code_of(error);
        let family = if error.is_refusal() { 100..200 } else { 200..300 };
        assert!(family.contains(&code), "{error:?} maps to {code}");
        assert_ne!(name(code), "WARDEN_RESULT_UNKNOWN");
        assert_eq!(error_json(error)["code"], name(code));
        seen.insert(code);
    }
    assert_eq!(seen.len(), errors.len(), "two errors share a code");
    assert_eq!(code_of(&errors[3]), WARDEN_RESULT_DUPLICATE);
    assert_eq!(code_of(&errors[4]), WARDEN_RESULT_IN_PROGRESS);
    assert_eq!(code_of(&errors[10]), WARDEN_RESULT_AUTHORITY_ESCALATION);
    assert_eq!(error_json(&errors[10])["dimension"], "constraints");
}

#[test]
fn an_authority_denial_is_denied_and_says_so_in_its_error_object() {
    let denied = Error::AuthorityDenied {
        reason: "authority_revoked".into(),
        grant_id: Some("dlg_1".into()),
        hop: None,
        dimension: None,
        detail: "d".into(),
    };
    assert_eq!(code_of(&denied), WARDEN_RESULT_DENIED);
    let object = error_json(&denied);
    assert_eq!(
        (object["authority"].as_bool(), object["grant_id"].as_str(), object["reason"].as_str()),
        (Some(true), Some("dlg_1"), Some("authority_revoked"))
    );
    assert!(error_json(&Error::Denied { reason: "r".into(), detail: "d".into() }).get("authority").is_none());
}

#[test]
fn result_name_names_every_code_and_says_unknown_otherwise() {
    for (code, expected) in known_codes() {
        assert_eq!(name(code), expected);
    }
    for unknown in [1, 99, 112, 199, 207, 300, u32::MAX] {
        assert_eq!(name(unknown), "WARDEN_RESULT_UNKNOWN");
    }
    assert_eq!(warden_abi_version(), WARDEN_ABI_VERSION);
    assert_eq!(warden_abi_version(), 1);
}

// ---- the boundary -------------------------------------------------------------------------------

#[test]
fn a_null_required_pointer_is_invalid_input_and_leaves_out_untouched() {
    let sentinel = ptr::dangling_mut::<warden_handle>();
    let mut out = sentinel;
    let failed = with_err(|err| {
        // SAFETY: NULL store is what is under test; `out` and `err` are writable.
        unsafe { warden_open(ptr::null(), 0, ptr::null(), 0, ptr::null(), 0, &raw mut out, err) }
    })
    .expect_err("NULL store is refused");
    assert_eq!(failed.code, WARDEN_RESULT_INVALID_INPUT);
    assert_eq!(failed.error["code"], "WARDEN_RESULT_INVALID_INPUT");
    assert!(failed.error["message"].as_str().unwrap_or_default().contains("store"), "{}", failed.error);
    assert_eq!(out, sentinel, "out is written only on success");

    let handle = open(Some(POLICY));
    let request = refund("pay_null", 100).to_string();
    // SAFETY: NULL out is what is under test.
    let code = unsafe { warden_propose(handle.raw, request.as_ptr(), request.len(), ptr::null_mut(), ptr::null_mut()) };
    assert_eq!(code, WARDEN_RESULT_INVALID_INPUT);
    assert!(effect(&handle, "refund:pay_null").is_null(), "nothing was reserved for a call that could not return");
    // SAFETY: NULL handle is what is under test.
    let code = unsafe {
        warden_propose(ptr::null_mut(), request.as_ptr(), request.len(), &mut ptr::null_mut(), ptr::null_mut())
    };
    assert_eq!(code, WARDEN_RESULT_INVALID_INPUT);
    // SAFETY: NULL with a length is what is under test.
    let code = unsafe { warden_propose(handle.raw, ptr::null(), 3, &mut ptr::null_mut(), ptr::null_mut()) };
    assert_eq!(code, WARDEN_RESULT_INVALID_INPUT);
    // Freeing NULL is a no-op.
    // SAFETY: NULL is allowed.
    unsafe {
        warden_close(ptr::null_mut());
        warden_permit_free(ptr::null_mut());
        warden_buf_free(empty());
    }
}

#[test]
fn a_result_given_as_null_with_a_length_is_refused_naming_its_parameter_and_the_permit_stays_usable() {
    let handle = open(Some(POLICY));
    let permit = propose(&handle, &refund("pay_null_result", 100)).expect("permit");
    // SAFETY: NULL with a length is what is under test; a live permit and a writable err.
    let json = with_err(|err| unsafe { warden_permit_commit(permit, ptr::null(), 5, err) }).expect_err("refused");
    assert_eq!(json.code, WARDEN_RESULT_INVALID_INPUT);
    assert_eq!(json.error["message"], "invalid input: result_json is NULL with a length of 5");
    // SAFETY: as above.
    let text = with_err(|err| unsafe { warden_permit_commit_text(permit, ptr::null(), 3, err) }).expect_err("refused");
    assert_eq!(text.error["message"], "invalid input: text is NULL with a length of 3");
    commit(permit, r#"{"ok":true}"#).expect("the refusals spent nothing: the permit still commits");
    free(permit);
    assert_eq!(effect(&handle, "refund:pay_null_result")["state"], "committed");
}

#[test]
fn invalid_utf8_and_bad_json_are_invalid_input() {
    let handle = open(Some(POLICY));
    for bytes in [&b"{\"name\": \"\xff\"}"[..], b"{not json", b"[]", b"{\"name\": \"customer.read\", \"typo\": 1}"] {
        let mut permit = ptr::null_mut();
        // SAFETY: a live handle and byte slice; writable out-parameters.
        let failed =
            with_err(|err| unsafe { warden_propose(handle.raw, bytes.as_ptr(), bytes.len(), &raw mut permit, err) })
                .expect_err("refused");
        assert_eq!(failed.code, WARDEN_RESULT_INVALID_INPUT, "{}", failed.error);
        assert!(permit.is_null());
    }
}

#[test]
fn outputs_are_nul_terminated_past_their_length() {
    let text = r#"{"b": 1, "a": [true, null]}"#;
    // SAFETY: a live string and writable out-parameters.
    let out = with_out(|out, err| unsafe { warden_canonical(text.as_ptr(), text.len(), out, err) }).expect("canonical");
    assert_eq!(out.text(), r#"{"a":[true,null],"b":1}"#);
    // SAFETY: the library promises one NUL byte after the data.
    assert_eq!(unsafe { *out.0.ptr.add(out.0.len) }, 0);
}

// ---- the pipeline -------------------------------------------------------------------------------

#[test]
fn propose_commit_then_a_retry_is_refused_as_a_duplicate() {
    let handle = open(Some(POLICY));
    let permit = propose(&handle, &refund("pay_1", 1200)).expect("allowed");
    let described = info(permit);
    assert_eq!(described["action"], "stripe.refund");
    assert_eq!(described["effect_key"], "refund:pay_1");
    assert_eq!(described["attempt"], 1);
    assert_eq!(described["decision"], "allow");
    assert_eq!(described["arguments"], json!({"amount": 1200, "payment_id": "pay_1"}));
    assert!(described["idempotency_token"].is_string());
    for field in ["action_id", "action_hash", "lease_expires_at", "approval_id", "decision_reason"] {
        assert!(described.get(field).is_some(), "permit info lacks {field}");
    }
    commit(permit, r#"{"refund_id": "re_1", "fee": 0.3}"#).expect("committed");
    assert!(commit(permit, "{}").expect_err("one outcome").code == WARDEN_RESULT_INVALID_INPUT);
    assert_eq!(info(permit)["effect_key"], "refund:pay_1", "info stays readable after the outcome");
    free(permit);
    assert_eq!(effect(&handle, "refund:pay_1")["state"], "committed");
    // A float has no canonical form: the result is kept marked, with its text and hash.
    let stored = &effect(&handle, "refund:pay_1")["result"];
    assert_eq!(stored["warden_result"], "not_canonical");
    assert!(stored["excerpt"].as_str().is_some_and(|text| text.contains("re_1")), "{stored}");

    let refused = propose(&handle, &refund("pay_1", 1200)).expect_err("a retry is refused");
    assert_eq!(refused.code, WARDEN_RESULT_DUPLICATE);
    assert_eq!(refused.error["code"], "WARDEN_RESULT_DUPLICATE");
    assert_eq!(refused.error["state"], "committed");
    assert_eq!(refused.error["effect_key"], "refund:pay_1");
    assert_eq!(refused.error["reason"], "duplicate");
    assert!(refused.error["message"].is_string());
}

#[test]
fn a_live_attempt_refuses_a_concurrent_one_as_in_progress() {
    let handle = open(Some(POLICY));
    let first = propose(&handle, &refund("pay_2", 100)).expect("allowed");
    let second = propose(&handle, &refund("pay_2", 100)).expect_err("held");
    assert_eq!(second.code, WARDEN_RESULT_IN_PROGRESS);
    assert_eq!(second.error["state"], "in_progress");
    // SAFETY: a live permit; a NULL msg is the absent message.
    with_err(|err| unsafe { warden_permit_not_executed(first, ptr::null(), 0, err) }).expect("failed");
    free(first);
    let again = propose(&handle, &refund("pay_2", 100)).expect("a FAILED effect may be retried");
    assert_eq!(info(again)["attempt"], 2);
    // SAFETY: a live permit.
    with_err(|err| unsafe { warden_permit_extend_lease(again, 600_000, err) }).expect("extended");
    // SAFETY: a live permit; a zero lease is what is under test.
    let zero = with_err(|err| unsafe { warden_permit_extend_lease(again, 0, err) }).expect_err("zero lease");
    assert_eq!(zero.code, WARDEN_RESULT_INVALID_INPUT);
    let message = "timeout";
    // SAFETY: a live permit and string.
    with_err(|err| unsafe { warden_permit_ambiguous(again, message.as_ptr(), message.len(), err) }).expect("ambiguous");
    free(again);
    let blocked = propose(&handle, &refund("pay_2", 100)).expect_err("ambiguous blocks the retry");
    assert_eq!(blocked.code, WARDEN_RESULT_AMBIGUOUS);
    assert_eq!(blocked.error["effect_key"], "refund:pay_2");
}

/// A handle pointer handed to other threads: the header promises one handle serves many.
#[derive(Clone, Copy)]
struct Shared(*mut warden_handle);

// SAFETY: `warden_handle` is `Send + Sync` (asserted in handle.rs) and the library only ever
// takes shared references to it, so its pointer may cross threads while the handle is open.
unsafe impl Send for Shared {}

#[test]
fn one_handle_serves_many_threads_and_exactly_one_of_them_wins_a_key() {
    let handle = open(Some(POLICY));
    let shared = Shared(handle.raw);
    let request = refund("pay_race", 100).to_string();
    let outcomes: Vec<warden_result> = std::thread::scope(|scope| {
        let racers: Vec<_> = (0..4)
            .map(|_| {
                let request = request.clone();
                scope.spawn(move || {
                    let shared = shared;
                    let mut permit = ptr::null_mut();
                    // SAFETY: the handle outlives the scope; the string and out-parameter are live.
                    let code = unsafe {
                        warden_propose(shared.0, request.as_ptr(), request.len(), &raw mut permit, ptr::null_mut())
                    };
                    if code == WARDEN_RESULT_OK {
                        commit(permit, "{}").expect("the winner commits");
                        free(permit);
                    }
                    code
                })
            })
            .collect();
        racers.into_iter().map(|racer| racer.join().expect("no racer panicked")).collect()
    });
    assert_eq!(outcomes.iter().filter(|code| **code == WARDEN_RESULT_OK).count(), 1, "{outcomes:?}");
    assert!(outcomes
        .iter()
        .all(|code| [WARDEN_RESULT_OK, WARDEN_RESULT_IN_PROGRESS, WARDEN_RESULT_DUPLICATE].contains(code)));
    assert_eq!(effect(&handle, "refund:pay_race")["state"], "committed");
}

#[test]
fn approval_required_then_granted_then_consumed_once() {
    let handle = open(Some(POLICY));
    let refused = propose(&handle, &refund("pay_big", 200_000)).expect_err("needs a human");
    assert_eq!(refused.code, WARDEN_RESULT_APPROVAL_REQUIRED);
    let id = refused.error["request_id"].as_str().expect("request_id").to_owned();
    assert!(refused.error["expires_at"].is_string() && refused.error["action_hash"].is_string());

    // SAFETY: a live handle and writable out-parameters.
    let pending = with_out(|out, err| unsafe { warden_approvals_pending(handle.raw, out, err) }).expect("pending");
    assert_eq!(pending.json()[0]["approval_id"], id.as_str());

    let requester = "ada";
    // SAFETY: a live handle and strings.
    let own = with_err(|err| unsafe {
        warden_approval_grant(
            handle.raw,
            id.as_ptr(),
            id.len(),
            requester.as_ptr(),
            requester.len(),
            0,
            ptr::null_mut(),
            err,
        )
    })
    .expect_err("the requester cannot approve");
    assert_eq!(own.code, WARDEN_RESULT_APPROVAL_MISMATCH);
    assert_eq!(own.error["reason"], "approver_is_requester");

    let bob = "ops:bob";
    // SAFETY: a live handle, strings and writable out-parameters.
    let granted = with_out(|out, err| unsafe {
        warden_approval_grant(handle.raw, id.as_ptr(), id.len(), bob.as_ptr(), bob.len(), 0, out, err)
    })
    .expect("granted");
    assert_eq!(granted.json()["status"], "granted");
    assert_eq!(granted.json()["approver"], "ops:bob");

    let mut presented = refund("pay_big", 200_000);
    presented["approval_id"] = json!(id);
    let mutated = {
        let mut other = refund("pay_big", 200_001);
        other["approval_id"] = json!(id);
        propose(&handle, &other).expect_err("another action")
    };
    assert_eq!(mutated.code, WARDEN_RESULT_APPROVAL_MISMATCH);
    assert_eq!(mutated.error["approval_id"], id.as_str());

    let permit = propose(&handle, &presented).expect("approved");
    assert_eq!(info(permit)["approval_id"], id.as_str());
    commit(permit, "{}").expect("committed");
    free(permit);
    // SAFETY: a live handle, string and writable out-parameters.
    let record = with_out(|out, err| unsafe { warden_approval_get(handle.raw, id.as_ptr(), id.len(), out, err) })
        .expect("get")
        .json();
    assert_eq!(record["status"], "consumed");
    let missing = "apr_00000000000000000000000000000000";
    // SAFETY: as above.
    let absent =
        with_out(|out, err| unsafe { warden_approval_get(handle.raw, missing.as_ptr(), missing.len(), out, err) });
    assert!(absent.expect("get").json().is_null());
}

#[test]
fn a_denied_request_denies_the_proposal_that_presents_it() {
    let handle = open(Some(POLICY));
    let request = json!({
        "name": "stripe.refund",
        "arguments": {"payment_id": "pay_d", "amount": 300_000},
        "principal": {"agent": "refund-agent", "user": "ada"},
        "ttl_ms": 60_000,
    })
    .to_string();
    // SAFETY: a live handle, string and writable out-parameters.
    let record =
        with_out(|out, err| unsafe { warden_approval_request(handle.raw, request.as_ptr(), request.len(), out, err) })
            .expect("requested")
            .json();
    let id = record["approval_id"].as_str().expect("id").to_owned();
    let (by, why) = ("ops:carol", "too large");
    // SAFETY: a live handle and strings; NULL out is allowed here.
    with_err(|err| unsafe {
        warden_approval_deny(
            handle.raw,
            id.as_ptr(),
            id.len(),
            by.as_ptr(),
            by.len(),
            why.as_ptr(),
            why.len(),
            ptr::null_mut(),
            err,
        )
    })
    .expect("denied");
    let mut presented = refund("pay_d", 300_000);
    presented["approval_id"] = json!(id);
    let refused = propose(&handle, &presented).expect_err("denied");
    assert_eq!(refused.code, WARDEN_RESULT_DENIED);
    assert_eq!(refused.error["reason"], "approval_denied");
}

#[test]
fn freeing_an_unfinished_permit_records_ambiguous_until_resolved() {
    let handle = open(Some(POLICY));
    let permit = propose(&handle, &refund("pay_lost", 100)).expect("allowed");
    free(permit);
    assert_eq!(effect(&handle, "refund:pay_lost")["state"], "ambiguous");
    assert_eq!(propose(&handle, &refund("pay_lost", 100)).expect_err("blocked").code, WARDEN_RESULT_AMBIGUOUS);

    let (key, to, by) = ("refund:pay_lost", "failed", "ops:bob");
    // SAFETY: a live handle, strings and writable out-parameters.
    let resolved = with_out(|out, err| unsafe {
        warden_effect_resolve(
            handle.raw,
            key.as_ptr(),
            key.len(),
            to.as_ptr(),
            to.len(),
            by.as_ptr(),
            by.len(),
            out,
            err,
        )
    })
    .expect("resolved");
    assert_eq!(resolved.json()["state"], "failed");
    // SAFETY: as above.
    let again = with_err(|err| unsafe {
        warden_effect_resolve(
            handle.raw,
            key.as_ptr(),
            key.len(),
            to.as_ptr(),
            to.len(),
            by.as_ptr(),
            by.len(),
            ptr::null_mut(),
            err,
        )
    })
    .expect_err("only AMBIGUOUS is resolved");
    assert_eq!(again.code, WARDEN_RESULT_NOT_RESOLVABLE);
    let permit = propose(&handle, &refund("pay_lost", 100)).expect("a retry after FAILED");
    commit(permit, "null").expect("committed");
    free(permit);
}

#[test]
fn reconcile_answers_an_ambiguous_effect() {
    let handle = open(Some(POLICY));
    let permit = propose(&handle, &refund("pay_r", 100)).expect("allowed");
    free(permit);
    let (key, action) = ("refund:pay_r", "stripe.refund");
    let reconcile = |answer: &str| {
        // SAFETY: a live handle and strings.
        with_err(|err| unsafe {
            warden_effect_reconcile(
                handle.raw,
                key.as_ptr(),
                key.len(),
                action.as_ptr(),
                action.len(),
                answer.as_ptr(),
                answer.len(),
                err,
            )
        })
    };
    reconcile("unknown").expect("unknown moves nothing");
    assert_eq!(effect(&handle, key)["state"], "ambiguous");
    assert_eq!(reconcile("maybe").expect_err("bad answer").code, WARDEN_RESULT_INVALID_INPUT);
    reconcile("committed").expect("resolved");
    assert_eq!(effect(&handle, key)["state"], "committed");
    assert_eq!(effect(&handle, key)["resolved_by"], "reconcile:stripe.refund");
    assert_eq!(reconcile("committed").expect_err("no longer ambiguous").code, WARDEN_RESULT_NOT_RESOLVABLE);
}

#[test]
fn refusals_carry_their_reason_and_the_chain_events_and_lists_read_back() {
    let handle = open(Some(POLICY));
    let unknown = propose(&handle, &json!({"name": "db.drop", "arguments": {}, "principal": {"agent": "a"}}))
        .expect_err("unknown action");
    assert_eq!(unknown.code, WARDEN_RESULT_DENIED);
    assert_eq!(unknown.error["reason"], "unknown_action");
    assert_eq!(unknown.error["refusal"], true);
    let nobody = propose(&handle, &json!({"name": "customer.read", "arguments": {}, "principal": null}))
        .expect_err("no principal");
    assert_eq!((nobody.code, &nobody.error["reason"]), (WARDEN_RESULT_INVALID_INPUT, &json!("no_principal")));
    assert_eq!(nobody.error["refusal"], false);
    let read = propose(&handle, &json!({"name": "customer.read", "arguments": {"id": 1}, "principal": {"agent": "a"}}))
        .expect("a read");
    assert!(info(read)["effect_key"].is_null());
    commit(read, r#"{"name": "Ada"}"#).expect("committed");
    free(read);

    // SAFETY: a live handle and writable out-parameters, for each call below.
    let chain = with_out(|out, err| unsafe { warden_chain_verify(handle.raw, out, err) }).expect("verify").json();
    assert_eq!(chain["ok"], true);
    // The unknown action and the read; a proposal with no principal leaves no receipt.
    assert_eq!(chain["chained"], 2);
    // SAFETY: as above.
    let receipts = with_out(|out, err| unsafe { warden_receipts_list(handle.raw, 1, 0, out, err) }).expect("receipts");
    assert_eq!(receipts.json().as_array().map(Vec::len), Some(2));
    // SAFETY: as above.
    let one = with_out(|out, err| unsafe { warden_receipts_list(handle.raw, 1, 1, out, err) }).expect("receipts");
    assert_eq!(one.json().as_array().map(Vec::len), Some(1));
    // SAFETY: as above.
    let events = with_out(|out, err| unsafe { warden_events_list(handle.raw, 0, 0, out, err) }).expect("events").json();
    let last = events.as_array().and_then(|e| e.last()).expect("events")["event_id"].as_u64().expect("id");
    // SAFETY: as above.
    let after = with_out(|out, err| unsafe { warden_events_list(handle.raw, last, 0, out, err) }).expect("events");
    assert_eq!(after.json(), json!([]));
    let state = "committed";
    // SAFETY: as above, with a live string.
    let effects =
        with_out(|out, err| unsafe { warden_effects_list(handle.raw, state.as_ptr(), state.len(), 0, out, err) })
            .expect("effects");
    assert_eq!(effects.json(), json!([]));
    let bad = "done";
    // SAFETY: as above.
    let refused = with_out(|out, err| unsafe { warden_effects_list(handle.raw, bad.as_ptr(), bad.len(), 0, out, err) });
    assert_eq!(refused.err().map(|f| f.code), Some(WARDEN_RESULT_INVALID_INPUT));
}

#[test]
fn a_handle_without_a_config_refuses_propose_but_serves_the_kernel_calls() {
    let handle = open(None);
    let refused = propose(&handle, &refund("pay_k", 1)).expect_err("no document");
    assert_eq!(refused.code, WARDEN_RESULT_CONFIG);

    let action = json!({
        "name": "stripe.refund",
        "arguments": {"payment_id": "pay_k", "amount": 1},
        "principal": {"agent": "worker"},
    })
    .to_string();
    let key = "refund:pay_k";
    let reserve = || {
        // SAFETY: a live handle, strings and writable out-parameters.
        with_out(|out, err| unsafe {
            warden_store_reserve(
                handle.raw,
                action.as_ptr(),
                action.len(),
                key.as_ptr(),
                key.len(),
                ptr::null(),
                0,
                0,
                out,
                err,
            )
        })
    };
    let reserved = reserve().expect("reserved").json();
    assert_eq!(reserved["state"], "reserved");
    let holder = reserved["action_id"].as_str().expect("action_id").to_owned();
    assert_eq!(reserve().expect_err("held").code, WARDEN_RESULT_IN_PROGRESS);
    // SAFETY: a live handle and strings.
    let began = with_out(|out, err| unsafe {
        warden_store_begin(handle.raw, key.as_ptr(), key.len(), holder.as_ptr(), holder.len(), 1, out, err)
    })
    .expect("began");
    assert_eq!(began.json()["state"], "executing");
    let outcome = r#"{"committed": {"refund_id": "re_9"}}"#;
    // SAFETY: as above.
    let done = with_out(|out, err| unsafe {
        warden_store_complete(
            handle.raw,
            key.as_ptr(),
            key.len(),
            holder.as_ptr(),
            holder.len(),
            1,
            outcome.as_ptr(),
            outcome.len(),
            out,
            err,
        )
    })
    .expect("completed");
    assert_eq!(done.json()["state"], "committed");
    let refused = reserve().expect_err("duplicate");
    assert_eq!(refused.code, WARDEN_RESULT_DUPLICATE);
    assert_eq!(refused.error["state"], "committed");

    let bad = r#"{"committed": 1, "ambiguous": "x"}"#;
    // SAFETY: as above.
    let shape = with_err(|err| unsafe {
        warden_store_complete(
            handle.raw,
            key.as_ptr(),
            key.len(),
            holder.as_ptr(),
            holder.len(),
            1,
            bad.as_ptr(),
            bad.len(),
            ptr::null_mut(),
            err,
        )
    });
    assert_eq!(shape.expect_err("two outcomes").code, WARDEN_RESULT_INVALID_INPUT);
    let other = "refund:pay_other";
    // SAFETY: as above.
    let missing = with_err(|err| unsafe {
        warden_store_mark_ambiguous(
            handle.raw,
            other.as_ptr(),
            other.len(),
            ptr::null(),
            0,
            0,
            ptr::null(),
            0,
            ptr::null_mut(),
            err,
        )
    });
    assert!(missing.is_err());
}

#[test]
fn the_action_hash_is_ctrlruns() {
    // From ctrlrun 0.12.2's vectors (actions.json row 3), as in `action::tests`.
    let action = r#"{"name": "email.send", "arguments": {}, "principal": {"agent": "a", "user": "bob"}, "environment": "staging"}"#;
    // SAFETY: a live string and writable out-parameters.
    let hash =
        with_out(|out, err| unsafe { warden_action_hash(action.as_ptr(), action.len(), out, err) }).expect("hash");
    assert_eq!(hash.text(), "sha256:8b113a75ca3fee715ffc7c33d687b6805820678eecdf4287ac34610a13dcd097");
    let float = r#"{"price": 1.5}"#;
    // SAFETY: as above.
    let refused = with_out(|out, err| unsafe { warden_canonical(float.as_ptr(), float.len(), out, err) });
    let refused = refused.expect_err("a float has no canonical form");
    assert_eq!(refused.code, WARDEN_RESULT_INVALID_INPUT);
    assert!(refused.error["message"].as_str().unwrap_or_default().contains("price"));
}

#[cfg(feature = "test-exports")]
#[test]
fn a_forced_panic_returns_panic_then_the_handle_and_its_permits_answer_poisoned() {
    use super::test_exports::warden_test_panic;

    let handle = open(Some(POLICY));
    let permit = propose(&handle, &refund("pay_panic", 100)).expect("allowed");
    // SAFETY: a live handle and a writable err.
    let panicked = with_err(|err| unsafe { warden_test_panic(handle.raw, err) }).expect_err("panics");
    assert_eq!(panicked.code, WARDEN_RESULT_PANIC);
    assert_eq!(panicked.error["code"], "WARDEN_RESULT_PANIC");
    assert!(panicked.error["message"].as_str().unwrap_or_default().contains("warden_test_panic"));

    let poisoned = propose(&handle, &refund("pay_other", 100)).expect_err("poisoned");
    assert_eq!(poisoned.code, WARDEN_RESULT_POISONED);
    assert_eq!(poisoned.error["code"], "WARDEN_RESULT_POISONED");
    assert_eq!(commit(permit, "{}").expect_err("poisoned").code, WARDEN_RESULT_POISONED);
    // SAFETY: a live handle and a writable err.
    let again = with_err(|err| unsafe { warden_test_panic(handle.raw, err) }).expect_err("still poisoned");
    assert_eq!(again.code, WARDEN_RESULT_POISONED);
    free(permit);
}

mod store_refusals;

mod evidence;

mod telemetry;

mod scoped;
// ---- approvals a person can trust: answer, wait, the hook, the precondition callback --------

fn approval_required(handle: &Handle, request: &Value) -> String {
    let refused = propose(handle, request).expect_err("approval required");
    assert_eq!(refused.code, WARDEN_RESULT_APPROVAL_REQUIRED, "{refused:?}");
    refused.error["request_id"].as_str().expect("a request id").to_owned()
}

fn answer(handle: &Handle, answer: &Value) -> Result<Value, Failure> {
    let text = answer.to_string();
    // SAFETY: a live handle, a live string, writable out-parameters.
    with_out(|out, err| unsafe {
        super::approvals::warden_approval_answer(handle.raw, text.as_ptr(), text.len(), out, err)
    })
    .map(|owned| owned.json())
}

fn wait(handle: &Handle, id: &str, timeout_ms: u64) -> Result<Value, Failure> {
    // SAFETY: a live handle, a live string, writable out-parameters.
    with_out(|out, err| unsafe {
        super::approvals::warden_approval_wait(handle.raw, id.as_ptr(), id.len(), timeout_ms, out, err)
    })
    .map(|owned| owned.json())
}

#[test]
fn an_answer_names_a_principal_verified_or_asserted_and_the_requester_is_refused_in_any_spelling() {
    let handle = open(Some(POLICY));
    let id = approval_required(&handle, &refund("pay_c1", 90_000));
    for user in ["ADA", "ａｄａ", " ada"] {
        let refused = answer(
            &handle,
            &json!({"approval_id": id, "decision": "grant", "approver": {"agent": "slack", "user": user}}),
        )
        .expect_err("the requester");
        assert_eq!(
            (refused.code, refused.error["reason"].as_str()),
            (WARDEN_RESULT_APPROVAL_MISMATCH, Some("approver_is_requester"))
        );
    }
    for bad in [
        json!({"approval_id": id, "decision": "maybe", "approver": {"agent": "slack", "user": "bob"}}),
        json!({"approval_id": id, "decision": "grant"}),
        json!({"approval_id": id, "decision": "deny", "approver": {"agent": "slack", "user": "bob"}, "ttl_ms": 5}),
        json!({"approval_id": id, "decision": "grant", "approver": {"agent": "slack", "user": "bob"}, "verified": {"claims": [1]}}),
        json!({"approval_id": id, "decision": "grant", "approver": {"agent": "slack", "user": "bob"}, "extra": 1}),
    ] {
        assert_eq!(answer(&handle, &bad).expect_err("refused").code, WARDEN_RESULT_INVALID_INPUT, "{bad}");
    }
    let granted = answer(
        &handle,
        &json!({"approval_id": id, "decision": "grant", "approver": {"agent": "slack", "user": "bob"},
                "verified": {"issuer": "https://id.example", "claims": {"roles": ["finance"]}}}),
    )
    .expect("granted");
    assert_eq!(granted["status"], "granted");
    assert_eq!(granted["votes"][0]["verified"], true);
    assert_eq!(granted["votes"][0]["issuer"], "https://id.example");
    assert_eq!(granted["arguments"], json!({"amount": 90_000, "payment_id": "pay_c1"}));
}

#[test]
fn an_answer_naming_another_action_hash_is_refused() {
    let handle = open(Some(POLICY));
    let id = approval_required(&handle, &refund("pay_c2", 90_000));
    let refused = answer(
        &handle,
        &json!({"approval_id": id, "decision": "grant", "approver": {"agent": "cli", "user": "bob"}, "action_hash": "sha256:00"}),
    )
    .expect_err("another action");
    assert_eq!((refused.code, refused.error["reason"].as_str()), (WARDEN_RESULT_APPROVAL_MISMATCH, Some("mismatch")));
}

#[test]
fn wait_returns_the_record_and_refuses_a_timeout_over_a_day() {
    let handle = open(Some(POLICY));
    let id = approval_required(&handle, &refund("pay_c3", 90_000));
    assert_eq!(wait(&handle, &id, 0).expect("read once")["status"], "pending");
    answer(&handle, &json!({"approval_id": id, "decision": "deny", "approver": {"agent": "cli", "user": "bob"}}))
        .expect("denied");
    assert_eq!(wait(&handle, &id, 60_000).expect("answered")["status"], "denied");
    assert_eq!(wait(&handle, "apr_00000000000000000000000000000000", 0).expect("none"), Value::Null);
    assert_eq!(wait(&handle, &id, 86_400_001).expect_err("too long").code, WARDEN_RESULT_INVALID_INPUT);
    assert!(wait(&handle, &id, 86_400_000).is_ok(), "a day is the limit (answered, so it returns at once)");
}

static HOOK_CALLS: std::sync::Mutex<Vec<(String, String)>> = std::sync::Mutex::new(Vec::new());

unsafe extern "C" fn record_hook(user_data: *mut std::ffi::c_void, request: *const u8, len: usize) -> i32 {
    // SAFETY: the library passes `len` readable bytes at `request` for the call.
    let text = String::from_utf8_lossy(unsafe { std::slice::from_raw_parts(request, len) }).into_owned();
    let tag = format!("{user_data:p}");
    if let Ok(mut calls) = HOOK_CALLS.lock() {
        calls.push((tag, text));
    }
    7 // a failure: recorded, never the action's
}

#[test]
fn the_hook_is_called_once_per_new_request_with_the_request_and_its_failure_is_only_recorded() {
    let handle = open(Some(POLICY));
    let marker = 0x5eed_usize as *mut std::ffi::c_void;
    // SAFETY: a live handle; `record_hook` has the warden_approval_fn signature and touches no
    // user data; a writable err.
    with_err(|err| unsafe {
        super::approval_hooks::warden_approval_notify_set(handle.raw, Some(record_hook), marker, err)
    })
    .expect("hook set");
    let id = approval_required(&handle, &refund("pay_c4", 90_000));
    assert_eq!(approval_required(&handle, &refund("pay_c4", 90_000)), id, "the pending request is reported again");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let events = || -> Vec<Value> {
        // SAFETY: a live handle and writable out-parameters.
        let listed = with_out(|out, err| unsafe { warden_events_list(handle.raw, 0, 1000, out, err) }).expect("events");
        listed.json().as_array().cloned().unwrap_or_default()
    };
    while !events().iter().any(|e| e["type"] == "APPROVAL_NOTIFY_FAILED") && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    // SAFETY: a live handle; NULL removes the hook; a writable err.
    with_err(|err| unsafe {
        super::approval_hooks::warden_approval_notify_set(handle.raw, None, ptr::null_mut(), err)
    })
    .expect("hook removed");
    let calls: Vec<(String, String)> = HOOK_CALLS
        .lock()
        .map(|calls| calls.iter().filter(|(_, text)| text.contains(&id)).cloned().collect())
        .unwrap_or_default();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0].0, format!("{marker:p}"));
    let request: Value = serde_json::from_str(&calls[0].1).expect("JSON");
    assert_eq!(request["arguments"]["payment_id"], "pay_c4");
    let failed: Vec<Value> = events().into_iter().filter(|e| e["type"] == "APPROVAL_NOTIFY_FAILED").collect();
    assert_eq!(failed.len(), 1);
    assert!(failed[0]["data"]["error"].as_str().unwrap_or_default().contains("returned 7"), "{failed:?}");
}

unsafe extern "C" fn ledger_state(
    user_data: *mut std::ffi::c_void,
    _action: *const u8,
    _len: usize,
    sink: *mut super::approval_hooks::warden_precondition_sink,
) -> i32 {
    // SAFETY: the test passes a pointer to a live AtomicI64 as user data.
    let balance =
        unsafe { &*(user_data as *const std::sync::atomic::AtomicI64) }.load(std::sync::atomic::Ordering::SeqCst);
    if balance < 0 {
        return 1;
    }
    let state = format!("{{\"balance\":{balance}}}");
    // SAFETY: the sink of this running callback and a live string.
    unsafe { super::approval_hooks::warden_precondition_put(sink, state.as_ptr(), state.len()) };
    0
}

fn propose_checked(
    handle: &Handle,
    request: &Value,
    balance: &std::sync::atomic::AtomicI64,
) -> Result<*mut warden_permit, Failure> {
    let text = request.to_string();
    let mut permit = ptr::null_mut();
    let user_data = std::ptr::from_ref::<std::sync::atomic::AtomicI64>(balance) as *mut std::ffi::c_void;
    let described = with_out(|info, err| {
        // SAFETY: a live handle, a live string, a callback with the right signature whose user
        // data outlives the call, writable out-parameters.
        unsafe {
            super::approval_hooks::warden_propose_checked(
                handle.raw,
                text.as_ptr(),
                text.len(),
                Some(ledger_state),
                user_data,
                &raw mut permit,
                info,
                err,
            )
        }
    })?;
    drop(described);
    Ok(permit)
}

#[test]
fn the_precondition_callback_fingerprints_the_request_and_a_changed_state_is_refused_with_the_approval_granted() {
    use std::sync::atomic::{AtomicI64, Ordering};
    let handle = open(Some(POLICY));
    let balance = AtomicI64::new(500);
    let refused = propose_checked(&handle, &refund("pay_c5", 90_000), &balance).expect_err("approval required");
    let id = refused.error["request_id"].as_str().expect("id").to_owned();
    let record = wait(&handle, &id, 0).expect("record");
    assert_eq!(
        record["precondition"],
        crate::approval::precondition::fingerprint(&json!({"balance": 500})).expect("fingerprint")
    );
    answer(&handle, &json!({"approval_id": id, "decision": "grant", "approver": {"agent": "cli", "user": "bob"}}))
        .expect("granted");
    let mut presented = refund("pay_c5", 90_000);
    presented["approval_id"] = json!(id);
    balance.store(0, Ordering::SeqCst);
    let changed = propose_checked(&handle, &presented, &balance).expect_err("changed");
    assert_eq!(
        (changed.code, changed.error["reason"].as_str()),
        (WARDEN_RESULT_APPROVAL_MISMATCH, Some("precondition_changed"))
    );
    assert_eq!(wait(&handle, &id, 0).expect("record")["status"], "granted");
    balance.store(-1, Ordering::SeqCst);
    assert_eq!(
        propose_checked(&handle, &presented, &balance).expect_err("provider failed").code,
        WARDEN_RESULT_INVALID_INPUT
    );
    let mut both = presented.clone();
    both["precondition"] = json!({"state": {"balance": 500}});
    balance.store(500, Ordering::SeqCst);
    assert_eq!(propose_checked(&handle, &both, &balance).expect_err("both").code, WARDEN_RESULT_INVALID_INPUT);
    let permit = propose_checked(&handle, &presented, &balance).expect("unchanged: a permit");
    commit(permit, "null").expect("commit");
    free(permit);
    assert_eq!(wait(&handle, &id, 0).expect("record")["status"], "consumed");
}

#[test]
fn the_defaults_cross_the_boundary_as_the_core_defines_them() {
    let mut out = empty();
    // SAFETY: out points at a local; err is NULL.
    assert_eq!(unsafe { warden_defaults(&raw mut out, ptr::null_mut()) }, WARDEN_RESULT_OK);
    // SAFETY: out was written on OK with `len` bytes.
    let text = unsafe { std::slice::from_raw_parts(out.ptr, out.len) }.to_vec();
    // SAFETY: out came from the library and is freed once.
    unsafe { warden_buf_free(out) };
    let defaults: Value = serde_json::from_slice(&text).expect("JSON");
    assert_eq!(defaults, crate::limits::defaults_json());
    assert_eq!((defaults["list_limit"].as_u64(), defaults["environment"].as_str()), (Some(100), Some("production")));
    // SAFETY: NULL out is refused before anything is written.
    assert_eq!(unsafe { warden_defaults(ptr::null_mut(), ptr::null_mut()) }, WARDEN_RESULT_INVALID_INPUT);
}

#[test]
fn a_reconciled_proposal_applies_the_hooks_answer_then_proposes_once() {
    let handle = open(Some(POLICY));
    let key = "refund:pay_rr";
    free(propose(&handle, &refund("pay_rr", 100)).expect("allowed")); // freed unfinished: AMBIGUOUS
    let refused = propose(&handle, &refund("pay_rr", 100)).expect_err("ambiguous");
    assert_eq!((refused.code, refused.error["effect_key"].as_str()), (WARDEN_RESULT_AMBIGUOUS, Some(key)));
    let answered = |answer: &str| {
        let mut request = refund("pay_rr", 100);
        request["reconciled"] = json!({"effect_key": key, "answer": answer});
        propose(&handle, &request)
    };
    // unknown: recorded, and the refusal stands.
    let unknown = answered("unknown").expect_err("still ambiguous");
    assert_eq!((unknown.code, unknown.error["effect_key"].as_str()), (WARDEN_RESULT_AMBIGUOUS, Some(key)));
    assert_eq!(answered("maybe").expect_err("bad answer").code, WARDEN_RESULT_INVALID_INPUT);
    // Another action's key is refused and changes nothing.
    let mut other = json!({"name": "customer.read", "arguments": {"id": 1}, "principal": {"agent": "a"}});
    other["reconciled"] = json!({"effect_key": key, "answer": "not_executed"});
    assert_eq!(propose(&handle, &other).expect_err("not its key").code, WARDEN_RESULT_INVALID_INPUT);
    assert_eq!(effect(&handle, key)["state"], "ambiguous");
    // not_executed: resolved FAILED, and this very call is the retry (attempt 2).
    let permit = answered("not_executed").expect("the retry runs");
    assert_eq!(info(permit)["attempt"], 2);
    commit(permit, "null").expect("committed");
    free(permit);
    assert_eq!(effect(&handle, key)["resolved_by"], serde_json::Value::Null);
}
