//! The `warden_*` C functions this addon calls, hand-written from `include/warden.h`.
//!
//! This block is the addon's whole view of Warden: no Rust path into the `warden` crate, only
//! these symbols from `libwarden.so`. `test/abi_surface.test.js` checks every declaration
//! here against the header (name and parameter count) and that nothing else is called.

use std::os::raw::{c_char, c_void};

/// `warden_result`: 0 is OK, 100..199 refusals, 200..299 faults.
pub type WardenResult = u32;

pub const WARDEN_RESULT_OK: WardenResult = 0;
// 110 WARDEN_RESULT_OUT_OF_WINDOW and 203 WARDEN_RESULT_FETCH carry the sight code as their
// error object's `reason`; the addon passes them through by name like every other code.

/// An owned output (`warden_buf`), written only on success and freed with `warden_buf_free`.
#[repr(C)]
#[derive(Debug)]
pub struct WardenBuf {
    pub ptr: *mut u8,
    pub len: usize,
}

impl WardenBuf {
    pub const fn empty() -> WardenBuf {
        WardenBuf { ptr: std::ptr::null_mut(), len: 0 }
    }
}

/// `warden_handle`: opaque, thread-safe.
#[repr(C)]
pub struct WardenHandle {
    _opaque: [u8; 0],
}

/// `warden_permit`: opaque, never used from two threads at once.
#[repr(C)]
pub struct WardenPermit {
    _opaque: [u8; 0],
}

/// `warden_trace`: opaque; read from any thread, also while its permit records into it.
#[repr(C)]
pub struct WardenTrace {
    _opaque: [u8; 0],
}

/// `warden_cancel`: opaque; triggered from any thread, freed only after its queries returned.
#[repr(C)]
pub struct WardenCancel {
    _opaque: [u8; 0],
}

/// `warden_credential_sink`: opaque; valid only during the callback call that received it.
#[repr(C)]
pub struct WardenCredentialSink {
    _opaque: [u8; 0],
}

/// `warden_credential_fn`: called on the thread running the query.
pub type WardenCredentialFn = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        reference: *const u8,
        reference_len: usize,
        sink: *mut WardenCredentialSink,
    ) -> i32,
>;

/// `warden_precondition_sink`: opaque; valid only during the callback call that received it.
#[repr(C)]
pub struct WardenPreconditionSink {
    _opaque: [u8; 0],
}

/// `warden_reconcile_sink`: opaque; valid only during the callback call that received it.
#[repr(C)]
pub struct WardenReconcileSink {
    _opaque: [u8; 0],
}

/// `warden_anchor_sink`: opaque; valid only during the callback call that received it.
#[repr(C)]
pub struct WardenAnchorSink {
    _opaque: [u8; 0],
}

/// `warden_anchor_fn`, called on the handle's checkpoint thread.
pub type AnchorCallback = unsafe extern "C" fn(*mut c_void, *const u8, usize, *mut WardenAnchorSink) -> i32;

/// `warden_precondition_fn`, called on the proposing thread.
pub type PreconditionCallback = unsafe extern "C" fn(*mut c_void, *const u8, usize, *mut WardenPreconditionSink) -> i32;

/// `warden_reconcile_fn`, called on the proposing thread.
pub type ReconcileCallback = unsafe extern "C" fn(*mut c_void, *const u8, usize, *mut WardenReconcileSink) -> i32;

/// `warden_propose_options`: the wait and the callbacks of one `warden_propose_recovering`.
#[repr(C)]
pub struct WardenProposeOptions {
    pub wait_ms: u64,
    pub poll_ms: u64,
    pub precondition: Option<PreconditionCallback>,
    pub reconcile: Option<ReconcileCallback>,
    pub user_data: *mut c_void,
}

/// `warden_approval_fn`: called on the library's notification thread with one new request.
pub type WardenApprovalFn =
    Option<unsafe extern "C" fn(user_data: *mut c_void, request: *const u8, request_len: usize) -> i32>;

extern "C" {
    pub fn warden_abi_version() -> u32;
    pub fn warden_result_name(code: WardenResult) -> *const c_char;
    pub fn warden_buf_free(buf: WardenBuf);

    pub fn warden_open(
        store: *const u8,
        store_len: usize,
        config: *const u8,
        config_len: usize,
        options_json: *const u8,
        options_len: usize,
        out: *mut *mut WardenHandle,
        err: *mut WardenBuf,
    ) -> WardenResult;
    pub fn warden_close(handle: *mut WardenHandle);

    pub fn warden_propose_recovering(
        handle: *mut WardenHandle,
        request: *const u8,
        len: usize,
        options: *const WardenProposeOptions,
        out: *mut *mut WardenPermit,
        info: *mut WardenBuf,
        err: *mut WardenBuf,
    ) -> WardenResult;
    pub fn warden_precondition_put(sink: *mut WardenPreconditionSink, state: *const u8, len: usize) -> WardenResult;
    pub fn warden_trace_new() -> *mut WardenTrace;
    pub fn warden_trace_free(trace: *mut WardenTrace);
    pub fn warden_trace_span(trace: *const WardenTrace, out: *mut WardenBuf, err: *mut WardenBuf) -> WardenResult;
    pub fn warden_propose_traced(
        handle: *mut WardenHandle,
        request: *const u8,
        len: usize,
        options: *const WardenProposeOptions,
        trace: *const WardenTrace,
        out: *mut *mut WardenPermit,
        info: *mut WardenBuf,
        err: *mut WardenBuf,
    ) -> WardenResult;
    pub fn warden_gauges_describe(out: *mut WardenBuf, err: *mut WardenBuf) -> WardenResult;
    pub fn warden_gauge_read(
        handle: *const WardenHandle,
        name: *const u8,
        name_len: usize,
        out: *mut WardenBuf,
        err: *mut WardenBuf,
    ) -> WardenResult;
    pub fn warden_reconcile_put(sink: *mut WardenReconcileSink, answer: *const u8, len: usize) -> WardenResult;
    pub fn warden_flush(handle: *const WardenHandle, err: *mut WardenBuf) -> WardenResult;
    pub fn warden_permit_info(permit: *const WardenPermit, out: *mut WardenBuf, err: *mut WardenBuf) -> WardenResult;
    pub fn warden_permit_commit(
        permit: *mut WardenPermit,
        result_json: *const u8,
        len: usize,
        err: *mut WardenBuf,
    ) -> WardenResult;
    pub fn warden_defaults(out: *mut WardenBuf, err: *mut WardenBuf) -> WardenResult;
    pub fn warden_permit_commit_text(
        permit: *mut WardenPermit,
        text: *const u8,
        len: usize,
        err: *mut WardenBuf,
    ) -> WardenResult;
    pub fn warden_permit_cancel(permit: *mut WardenPermit, err: *mut WardenBuf) -> WardenResult;
    pub fn warden_permit_not_executed(
        permit: *mut WardenPermit,
        msg: *const u8,
        len: usize,
        err: *mut WardenBuf,
    ) -> WardenResult;
    pub fn warden_permit_ambiguous(
        permit: *mut WardenPermit,
        msg: *const u8,
        len: usize,
        err: *mut WardenBuf,
    ) -> WardenResult;
    pub fn warden_permit_extend_lease(permit: *mut WardenPermit, lease_ms: u64, err: *mut WardenBuf) -> WardenResult;
    pub fn warden_permit_free(permit: *mut WardenPermit);

    pub fn warden_approval_grant(
        handle: *mut WardenHandle,
        id: *const u8,
        id_len: usize,
        by: *const u8,
        by_len: usize,
        ttl_ms: i64,
        out: *mut WardenBuf,
        err: *mut WardenBuf,
    ) -> WardenResult;
    pub fn warden_approval_deny(
        handle: *mut WardenHandle,
        id: *const u8,
        id_len: usize,
        by: *const u8,
        by_len: usize,
        reason: *const u8,
        reason_len: usize,
        out: *mut WardenBuf,
        err: *mut WardenBuf,
    ) -> WardenResult;
    pub fn warden_approval_get(
        handle: *mut WardenHandle,
        id: *const u8,
        id_len: usize,
        out: *mut WardenBuf,
        err: *mut WardenBuf,
    ) -> WardenResult;
    pub fn warden_approvals_pending(
        handle: *mut WardenHandle,
        out: *mut WardenBuf,
        err: *mut WardenBuf,
    ) -> WardenResult;
    pub fn warden_approval_grant_scoped(
        handle: *mut WardenHandle,
        answer: *const u8,
        len: usize,
        out: *mut WardenBuf,
        err: *mut WardenBuf,
    ) -> WardenResult;
    pub fn warden_scoped_grants(
        handle: *mut WardenHandle,
        live_only: bool,
        out: *mut WardenBuf,
        err: *mut WardenBuf,
    ) -> WardenResult;
    #[allow(clippy::too_many_arguments)]
    pub fn warden_scoped_grant_revoke(
        handle: *mut WardenHandle,
        id: *const u8,
        id_len: usize,
        by: *const u8,
        by_len: usize,
        reason: *const u8,
        reason_len: usize,
        out: *mut WardenBuf,
        err: *mut WardenBuf,
    ) -> WardenResult;
    pub fn warden_approval_answer(
        handle: *mut WardenHandle,
        answer: *const u8,
        len: usize,
        out: *mut WardenBuf,
        err: *mut WardenBuf,
    ) -> WardenResult;
    pub fn warden_approval_wait(
        handle: *mut WardenHandle,
        id: *const u8,
        id_len: usize,
        timeout_ms: u64,
        out: *mut WardenBuf,
        err: *mut WardenBuf,
    ) -> WardenResult;
    pub fn warden_approval_notify_set(
        handle: *const WardenHandle,
        callback: WardenApprovalFn,
        user_data: *mut c_void,
        err: *mut WardenBuf,
    ) -> WardenResult;
    pub fn warden_anchor_add(
        handle: *const WardenHandle,
        name: *const u8,
        name_len: usize,
        callback: Option<AnchorCallback>,
        user_data: *mut c_void,
        err: *mut WardenBuf,
    ) -> WardenResult;
    pub fn warden_anchor_put(sink: *mut WardenAnchorSink, answer: *const u8, len: usize) -> WardenResult;

    pub fn warden_delegate(
        handle: *mut WardenHandle,
        request: *const u8,
        len: usize,
        out: *mut WardenBuf,
        err: *mut WardenBuf,
    ) -> WardenResult;
    pub fn warden_revoke(
        handle: *mut WardenHandle,
        id: *const u8,
        id_len: usize,
        by: *const u8,
        by_len: usize,
        out: *mut WardenBuf,
        err: *mut WardenBuf,
    ) -> WardenResult;
    pub fn warden_revoke_sweep(
        handle: *mut WardenHandle,
        request: *const u8,
        len: usize,
        out: *mut WardenBuf,
        err: *mut WardenBuf,
    ) -> WardenResult;
    pub fn warden_delegations_all(handle: *mut WardenHandle, out: *mut WardenBuf, err: *mut WardenBuf) -> WardenResult;

    pub fn warden_effect_resolve(
        handle: *mut WardenHandle,
        key: *const u8,
        key_len: usize,
        to: *const u8,
        to_len: usize,
        by: *const u8,
        by_len: usize,
        out: *mut WardenBuf,
        err: *mut WardenBuf,
    ) -> WardenResult;
    #[allow(clippy::too_many_arguments)]
    pub fn warden_effect_resolve_attempt(
        handle: *mut WardenHandle,
        key: *const u8,
        key_len: usize,
        attempt: u32,
        to: *const u8,
        to_len: usize,
        by: *const u8,
        by_len: usize,
        out: *mut WardenBuf,
        err: *mut WardenBuf,
    ) -> WardenResult;
    pub fn warden_effect_get(
        handle: *mut WardenHandle,
        key: *const u8,
        key_len: usize,
        out: *mut WardenBuf,
        err: *mut WardenBuf,
    ) -> WardenResult;
    pub fn warden_effects_list(
        handle: *mut WardenHandle,
        state: *const u8,
        state_len: usize,
        limit: u64,
        out: *mut WardenBuf,
        err: *mut WardenBuf,
    ) -> WardenResult;
    pub fn warden_receipts_list(
        handle: *mut WardenHandle,
        from_seq: u64,
        limit: u64,
        out: *mut WardenBuf,
        err: *mut WardenBuf,
    ) -> WardenResult;
    pub fn warden_chain_verify(handle: *mut WardenHandle, out: *mut WardenBuf, err: *mut WardenBuf) -> WardenResult;
    pub fn warden_events_list(
        handle: *mut WardenHandle,
        after_id: u64,
        limit: u64,
        out: *mut WardenBuf,
        err: *mut WardenBuf,
    ) -> WardenResult;

    pub fn warden_proof_inclusion(
        handle: *mut WardenHandle,
        receipt_id: *const u8,
        receipt_id_len: usize,
        checkpoint: u64,
        out: *mut WardenBuf,
        err: *mut WardenBuf,
    ) -> WardenResult;
    pub fn warden_proof_consistency(
        handle: *mut WardenHandle,
        old_checkpoint: u64,
        new_checkpoint: u64,
        out: *mut WardenBuf,
        err: *mut WardenBuf,
    ) -> WardenResult;
    pub fn warden_checkpoints(
        handle: *mut WardenHandle,
        from: u64,
        limit: u64,
        out: *mut WardenBuf,
        err: *mut WardenBuf,
    ) -> WardenResult;

    pub fn warden_canonical(json: *const u8, len: usize, out: *mut WardenBuf, err: *mut WardenBuf) -> WardenResult;
    pub fn warden_action_hash(
        action_json: *const u8,
        len: usize,
        out: *mut WardenBuf,
        err: *mut WardenBuf,
    ) -> WardenResult;

    pub fn warden_cancel_new() -> *mut WardenCancel;
    pub fn warden_cancel_trigger(cancel: *const WardenCancel);
    pub fn warden_cancel_free(cancel: *mut WardenCancel);
    pub fn warden_credential_put(sink: *mut WardenCredentialSink, value: *const u8, len: usize) -> WardenResult;
    pub fn warden_sight_credentials_set(
        handle: *const WardenHandle,
        callback: WardenCredentialFn,
        user_data: *mut c_void,
        err: *mut WardenBuf,
    ) -> WardenResult;
    pub fn warden_sight_sources(handle: *const WardenHandle, out: *mut WardenBuf, err: *mut WardenBuf) -> WardenResult;
    pub fn warden_sight_tool_schema(
        handle: *const WardenHandle,
        out: *mut WardenBuf,
        err: *mut WardenBuf,
    ) -> WardenResult;
    pub fn warden_sight_call_tool(
        handle: *const WardenHandle,
        name: *const u8,
        name_len: usize,
        arguments: *const u8,
        arguments_len: usize,
        cancel: *const WardenCancel,
        out: *mut WardenBuf,
        err: *mut WardenBuf,
    ) -> WardenResult;
    pub fn warden_sight_query(
        handle: *const WardenHandle,
        query_json: *const u8,
        len: usize,
        cancel: *const WardenCancel,
        out: *mut WardenBuf,
        err: *mut WardenBuf,
    ) -> WardenResult;
    pub fn warden_sight_history(
        handle: *const WardenHandle,
        request_json: *const u8,
        len: usize,
        out: *mut WardenBuf,
        err: *mut WardenBuf,
    ) -> WardenResult;
    pub fn warden_sight_diff(
        handle: *const WardenHandle,
        request_json: *const u8,
        len: usize,
        out: *mut WardenBuf,
        err: *mut WardenBuf,
    ) -> WardenResult;
}
