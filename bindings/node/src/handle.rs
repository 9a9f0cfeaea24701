//! `Handle`: one open `warden_handle`, and every handle-level call as async work.
//!
//! The pointer lives in an `Arc`: `close()` only drops the handle's own reference, so work
//! already queued on the thread pool (and every live permit) keeps the store open until it
//! finishes; `warden_close` runs when the last reference goes.
//!
//! Sights (`sight.rs`) hang off the same handle: their calls are async work too, and the
//! JavaScript credential providers registered on it live in `HandlePtr` until `warden_close`.

use std::sync::{Arc, Mutex};

use napi::bindgen_prelude::AsyncTask;
use napi::{Env, Task};
use napi_derive::napi;

use crate::call::{bytes, check, optional, structured, take, thrown, unsigned, CallResult, Failure};
use crate::ffi::{self, WardenBuf, WardenHandle};
use crate::permit::{Permit, PermitPtr};
use crate::sight::{self, Cancel, Provider, ProviderFunction, SightOp};

/// An open handle. `warden_handle` is safe to use from many threads at once.
pub struct HandlePtr {
    raw: *mut WardenHandle,
    /// Every JavaScript credential provider registered on this handle. libwarden holds their
    /// addresses as `user_data` and a running query may still call a replaced one, so they
    /// stay allocated (released, answering "no value") until `warden_close`.
    pub providers: Mutex<Vec<Arc<Provider>>>,
    /// The JavaScript approval hook registered on this handle (`notify.rs`), alive until
    /// `warden_close`, which stops libwarden calling it first.
    pub hooks: Mutex<Vec<Arc<crate::notify::Hook>>>,
}

// SAFETY: the C ABI documents a warden_handle as usable from many threads at the same time.
unsafe impl Send for HandlePtr {}
// SAFETY: as above; every call through &HandlePtr is a thread-safe C function.
unsafe impl Sync for HandlePtr {}

impl HandlePtr {
    pub fn raw(&self) -> *mut WardenHandle {
        self.raw
    }
}

impl Drop for HandlePtr {
    fn drop(&mut self) {
        // SAFETY: the pointer came from warden_open and this is the last reference to it.
        unsafe { ffi::warden_close(self.raw) };
        // Only now, with no query left to call them, are the providers freed (field drop).
    }
}

#[napi]
pub struct Handle {
    slot: Mutex<Option<Arc<HandlePtr>>>,
}

fn opened(store: String, config: Option<String>, options: Option<String>) -> napi::Result<Handle> {
    let (store_ptr, store_len) = bytes(&store);
    let (config_ptr, config_len) = optional(config.as_deref());
    let (options_ptr, options_len) = optional(options.as_deref());
    let mut out: *mut WardenHandle = std::ptr::null_mut();
    let mut err = WardenBuf::empty();
    // SAFETY: every (ptr, len) borrows a String alive for the call; out and err point at
    // locals.
    let code = unsafe {
        ffi::warden_open(store_ptr, store_len, config_ptr, config_len, options_ptr, options_len, &mut out, &mut err)
    };
    check(code, err)?;
    if out.is_null() {
        return Err(
            Failure::binding("WARDEN_RESULT_PANIC", "panic", "warden_open returned OK and no handle").into()
        );
    }
    let ptr = HandlePtr { raw: out, providers: Mutex::new(Vec::new()), hooks: Mutex::new(Vec::new()) };
    Ok(Handle { slot: Mutex::new(Some(Arc::new(ptr))) })
}

#[napi]
impl Handle {
    /// Open `store` governed by the document at `config` (optional); `options` is the C
    /// options JSON (`{"environment": …}`) or absent.
    #[napi(factory)]
    pub fn open(env: Env, store: String, config: Option<String>, options: Option<String>) -> napi::Result<Handle> {
        thrown(&env, opened(store, config, options))
    }

    /// Idempotent. Queued work and live permits keep the store open until they finish; the
    /// credential provider is released at once (a query still asking it gets no value).
    #[napi]
    pub fn close(&self) {
        let taken = self.slot.lock().map(|mut slot| slot.take()).unwrap_or(None);
        if let Some(handle) = &taken {
            sight::release_providers(handle);
            crate::notify::release_hooks(handle);
        }
        drop(taken);
    }

    #[napi(getter)]
    pub fn closed(&self) -> bool {
        self.slot.lock().map(|slot| slot.is_none()).unwrap_or(true)
    }

    /// Run the pipeline: resolves to a `Permit`, rejects with the refusal.
    #[napi(ts_return_type = "Promise<Permit>")]
    pub fn propose(&self, request: String) -> napi::Result<AsyncTask<Propose>> {
        Ok(AsyncTask::new(Propose { handle: self.held(), request }))
    }

    #[napi(ts_return_type = "Promise<string>")]
    pub fn reconcile(&self, key: String, action: String, answer: String) -> napi::Result<AsyncTask<HandleCall>> {
        self.call(Op::Reconcile { key, action, answer })
    }

    #[napi(ts_return_type = "Promise<string>")]
    pub fn approval_grant(&self, id: String, by: String, ttl_ms: i64) -> napi::Result<AsyncTask<HandleCall>> {
        self.call(Op::ApprovalGrant { id, by, ttl_ms })
    }

    #[napi(ts_return_type = "Promise<string>")]
    pub fn approval_deny(&self, id: String, by: String, reason: Option<String>) -> napi::Result<AsyncTask<HandleCall>> {
        self.call(Op::ApprovalDeny { id, by, reason })
    }

    /// One approver's answer (`warden_approval_answer`): the answer JSON.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn approval_answer(&self, answer: String) -> napi::Result<AsyncTask<HandleCall>> {
        self.call(Op::ApprovalAnswer { answer })
    }

    /// Wait in the library, by its clock, for the request to be answered or to expire.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn approval_wait(&self, id: String, timeout_ms: i64) -> napi::Result<AsyncTask<HandleCall>> {
        self.call(Op::ApprovalWait { id, timeout_ms })
    }

    /// Register the JavaScript hook wrapper `(requestJson) => void`, or remove it with null.
    #[napi]
    pub fn set_approval_hook(&self, env: Env, hook: Option<crate::notify::HookFunction<'_>>) -> napi::Result<()> {
        thrown(&env, (|| {
            let handle = self.live()?;
            let hook = hook.as_ref().map(crate::notify::Hook::new).transpose()?;
            Ok(crate::notify::set_hook(&handle, hook)?)
        })())
    }

    #[napi(ts_return_type = "Promise<string>")]
    pub fn approval_get(&self, id: String) -> napi::Result<AsyncTask<HandleCall>> {
        self.call(Op::ApprovalGet { id })
    }

    #[napi(ts_return_type = "Promise<string>")]
    pub fn approvals_pending(&self) -> napi::Result<AsyncTask<HandleCall>> {
        self.call(Op::ApprovalsPending)
    }

    #[napi(ts_return_type = "Promise<string>")]
    pub fn delegate(&self, request: String) -> napi::Result<AsyncTask<HandleCall>> {
        self.call(Op::Delegate { request })
    }

    #[napi(ts_return_type = "Promise<string>")]
    pub fn revoke(&self, id: String, by: Option<String>) -> napi::Result<AsyncTask<HandleCall>> {
        self.call(Op::Revoke { id, by })
    }

    #[napi(ts_return_type = "Promise<string>")]
    pub fn revoke_sweep(&self, request: String) -> napi::Result<AsyncTask<HandleCall>> {
        self.call(Op::RevokeSweep { request })
    }

    #[napi(ts_return_type = "Promise<string>")]
    pub fn delegations(&self, after: Option<String>, limit: u32) -> napi::Result<AsyncTask<HandleCall>> {
        self.call(Op::Delegations { after, limit })
    }

    #[napi(ts_return_type = "Promise<string>")]
    pub fn effect_resolve(&self, key: String, to: String, by: String) -> napi::Result<AsyncTask<HandleCall>> {
        self.call(Op::EffectResolve { key, to, by })
    }

    #[napi(ts_return_type = "Promise<string>")]
    pub fn effect_get(&self, key: String) -> napi::Result<AsyncTask<HandleCall>> {
        self.call(Op::EffectGet { key })
    }

    #[napi(ts_return_type = "Promise<string>")]
    pub fn effects_list(&self, state: Option<String>, limit: i64) -> napi::Result<AsyncTask<HandleCall>> {
        self.call(Op::EffectsList { state, limit })
    }

    #[napi(ts_return_type = "Promise<string>")]
    pub fn receipts_list(&self, from_seq: i64, limit: i64) -> napi::Result<AsyncTask<HandleCall>> {
        self.call(Op::ReceiptsList { from_seq, limit })
    }

    #[napi(ts_return_type = "Promise<string>")]
    pub fn chain_verify(&self) -> napi::Result<AsyncTask<HandleCall>> {
        self.call(Op::ChainVerify)
    }

    #[napi(ts_return_type = "Promise<string>")]
    pub fn events_list(&self, after_id: i64, limit: i64) -> napi::Result<AsyncTask<HandleCall>> {
        self.call(Op::EventsList { after_id, limit })
    }

    /// Make this process's deferred outcomes durable (`warden_flush`).
    #[napi(ts_return_type = "Promise<string>")]
    pub fn flush(&self) -> napi::Result<AsyncTask<HandleCall>> {
        self.call(Op::Flush)
    }
}

#[napi]
impl Handle {
    /// Read one configured window (`{"source", "endpoint", "params"?, "fields"?, "snapshot"?}`),
    /// abortable through `cancel`.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn sight_query(
        &self,
        request: String,
        cancel: Option<&Cancel>,
    ) -> napi::Result<AsyncTask<HandleCall<SightOp>>> {
        self.sight(SightOp::query(request, cancel))
    }

    /// Run one tool call an LLM made (`warden_sight_call_tool`), abortable through `cancel`.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn sight_call_tool(
        &self,
        name: String,
        arguments: String,
        cancel: Option<&Cancel>,
    ) -> napi::Result<AsyncTask<HandleCall<SightOp>>> {
        self.sight(SightOp::tool(name, arguments, cancel))
    }

    #[napi(ts_return_type = "Promise<string>")]
    pub fn sight_history(&self, request: String) -> napi::Result<AsyncTask<HandleCall<SightOp>>> {
        self.sight(SightOp::History { request })
    }

    #[napi(ts_return_type = "Promise<string>")]
    pub fn sight_diff(&self, request: String) -> napi::Result<AsyncTask<HandleCall<SightOp>>> {
        self.sight(SightOp::Diff { request })
    }

    /// The configured windows as JSON text (no I/O: synchronous).
    #[napi]
    pub fn sight_sources(&self, env: Env) -> napi::Result<String> {
        thrown(&env, (|| Ok(SightOp::Sources.run(self.live()?.raw())?))())
    }

    /// The four tool definitions as JSON text (no I/O: synchronous).
    #[napi]
    pub fn sight_tool_schema(&self, env: Env) -> napi::Result<String> {
        thrown(&env, (|| Ok(SightOp::ToolSchema.run(self.live()?.raw())?))())
    }

    /// Register the JavaScript provider wrapper `(reference, request) => void`, or restore the
    /// default provider with null.
    #[napi]
    pub fn set_credential_provider(&self, env: Env, provider: Option<ProviderFunction<'_>>) -> napi::Result<()> {
        thrown(&env, (|| {
            let handle = self.live()?;
            let provider = provider.as_ref().map(Provider::new).transpose()?;
            Ok(sight::set_provider(&handle, provider)?)
        })())
    }
}

impl Handle {
    fn sight(&self, op: SightOp) -> napi::Result<AsyncTask<HandleCall<SightOp>>> {
        Ok(AsyncTask::new(HandleCall { handle: self.held(), op }))
    }

    fn live(&self) -> napi::Result<Arc<HandlePtr>> {
        Ok(self.held()?)
    }

    /// The open handle, or why not (reported when the task runs, as a structured rejection).
    fn held(&self) -> CallResult<Arc<HandlePtr>> {
        let slot = self
            .slot
            .lock()
            .map_err(|_| Failure::binding("WARDEN_RESULT_POISONED", "poisoned", "the handle's lock is poisoned"))?;
        slot.clone().ok_or_else(|| {
            Failure::binding(
                "WARDEN_RESULT_INVALID_INPUT",
                "invalid_input",
                "this Warden is closed; open the store again to use it",
            )
        })
    }

    fn call(&self, op: Op) -> napi::Result<AsyncTask<HandleCall>> {
        Ok(AsyncTask::new(HandleCall { handle: self.held(), op }))
    }
}

/// One handle-level C call that answers JSON text.
pub enum Op {
    Reconcile { key: String, action: String, answer: String },
    ApprovalGrant { id: String, by: String, ttl_ms: i64 },
    ApprovalDeny { id: String, by: String, reason: Option<String> },
    ApprovalGet { id: String },
    ApprovalsPending,
    ApprovalAnswer { answer: String },
    ApprovalWait { id: String, timeout_ms: i64 },
    EffectResolve { key: String, to: String, by: String },
    EffectGet { key: String },
    EffectsList { state: Option<String>, limit: i64 },
    ReceiptsList { from_seq: i64, limit: i64 },
    ChainVerify,
    EventsList { after_id: i64, limit: i64 },
    Flush,
    Delegate { request: String },
    Revoke { id: String, by: Option<String> },
    RevokeSweep { request: String },
    Delegations { after: Option<String>, limit: u32 },
}

impl Op {
    fn run(&self, h: *mut WardenHandle) -> CallResult<String> {
        let mut out = WardenBuf::empty();
        let mut err = WardenBuf::empty();
        // SAFETY (every arm): `h` is a live handle held by an Arc for the whole call; each
        // (ptr, len) borrows a String owned by `self`; out and err point at locals.
        let code = match self {
            Op::Reconcile { key, action, answer } => {
                let ((k, kl), (a, al), (r, rl)) = (bytes(key), bytes(action), bytes(answer));
                let code = unsafe { ffi::warden_effect_reconcile(h, k, kl, a, al, r, rl, &mut err) };
                check(code, err)?;
                return Ok("null".to_owned());
            }
            Op::ApprovalGrant { id, by, ttl_ms } => {
                let ((i, il), (b, bl)) = (bytes(id), bytes(by));
                unsafe { ffi::warden_approval_grant(h, i, il, b, bl, *ttl_ms, &mut out, &mut err) }
            }
            Op::ApprovalDeny { id, by, reason } => {
                let ((i, il), (b, bl), (r, rl)) = (bytes(id), bytes(by), optional(reason.as_deref()));
                unsafe { ffi::warden_approval_deny(h, i, il, b, bl, r, rl, &mut out, &mut err) }
            }
            Op::ApprovalGet { id } => {
                let (i, il) = bytes(id);
                unsafe { ffi::warden_approval_get(h, i, il, &mut out, &mut err) }
            }
            Op::ApprovalsPending => unsafe { ffi::warden_approvals_pending(h, &mut out, &mut err) },
            Op::ApprovalAnswer { answer } => {
                let (a, al) = bytes(answer);
                unsafe { ffi::warden_approval_answer(h, a, al, &mut out, &mut err) }
            }
            Op::ApprovalWait { id, timeout_ms } => {
                let (i, il) = bytes(id);
                let timeout_ms = unsigned("timeoutMs", *timeout_ms)?;
                unsafe { ffi::warden_approval_wait(h, i, il, timeout_ms, &mut out, &mut err) }
            }
            Op::EffectResolve { key, to, by } => {
                let ((k, kl), (t, tl), (b, bl)) = (bytes(key), bytes(to), bytes(by));
                unsafe { ffi::warden_effect_resolve(h, k, kl, t, tl, b, bl, &mut out, &mut err) }
            }
            Op::EffectGet { key } => {
                let (k, kl) = bytes(key);
                unsafe { ffi::warden_effect_get(h, k, kl, &mut out, &mut err) }
            }
            Op::EffectsList { state, limit } => {
                let (s, sl) = optional(state.as_deref());
                let limit = unsigned("limit", *limit)?;
                unsafe { ffi::warden_effects_list(h, s, sl, limit, &mut out, &mut err) }
            }
            Op::ReceiptsList { from_seq, limit } => {
                let (from_seq, limit) = (unsigned("fromSeq", *from_seq)?, unsigned("limit", *limit)?);
                unsafe { ffi::warden_receipts_list(h, from_seq, limit, &mut out, &mut err) }
            }
            Op::ChainVerify => unsafe { ffi::warden_chain_verify(h, &mut out, &mut err) },
            Op::EventsList { after_id, limit } => {
                let (after_id, limit) = (unsigned("afterId", *after_id)?, unsigned("limit", *limit)?);
                unsafe { ffi::warden_events_list(h, after_id, limit, &mut out, &mut err) }
            }
            Op::Flush => {
                let code = unsafe { ffi::warden_flush(h, &mut err) };
                check(code, err)?;
                return Ok("null".to_owned());
            }
            Op::Delegate { request } => {
                let (r, rl) = bytes(request);
                unsafe { ffi::warden_delegate(h, r, rl, &mut out, &mut err) }
            }
            Op::Revoke { id, by } => {
                let ((i, il), (b, bl)) = (bytes(id), optional(by.as_deref()));
                unsafe { ffi::warden_revoke(h, i, il, b, bl, &mut out, &mut err) }
            }
            Op::RevokeSweep { request } => {
                let (r, rl) = bytes(request);
                unsafe { ffi::warden_revoke_sweep(h, r, rl, &mut out, &mut err) }
            }
            Op::Delegations { after, limit } => {
                let (a, al) = optional(after.as_deref());
                unsafe { ffi::warden_delegations(h, a, al, *limit, &mut out, &mut err) }
            }
        };
        check(code, err)?;
        Ok(take(out))
    }
}

/// One blocking call on a handle: the effect and management calls (`Op`) and the sight calls
/// (`SightOp`) run the same way, off the event loop.
pub trait HandleOp: Send + 'static {
    fn run(&self, h: *mut WardenHandle) -> CallResult<String>;
}

impl HandleOp for Op {
    fn run(&self, h: *mut WardenHandle) -> CallResult<String> {
        Op::run(self, h)
    }
}

pub struct HandleCall<O: HandleOp = Op> {
    pub handle: CallResult<Arc<HandlePtr>>,
    pub op: O,
}

impl<O: HandleOp> Task for HandleCall<O> {
    type Output = String;
    type JsValue = String;

    fn compute(&mut self) -> napi::Result<String> {
        let handle = self.handle.clone()?;
        Ok(self.op.run(handle.raw())?)
    }

    fn resolve(&mut self, _env: Env, output: String) -> napi::Result<String> {
        Ok(output)
    }

    fn reject(&mut self, env: Env, err: napi::Error) -> napi::Result<String> {
        Err(structured(&env, err))
    }
}

pub struct Propose {
    handle: CallResult<Arc<HandlePtr>>,
    request: String,
}

impl Task for Propose {
    type Output = (PermitPtr, String);
    type JsValue = Permit;

    fn compute(&mut self) -> napi::Result<(PermitPtr, String)> {
        let handle = self.handle.clone()?;
        let (request, request_len) = bytes(&self.request);
        let mut out = std::ptr::null_mut();
        let mut info = WardenBuf::empty();
        let mut err = WardenBuf::empty();
        // SAFETY: the handle is alive (Arc); the request borrows a String owned by self; out,
        // info and err point at locals.
        let code = unsafe {
            ffi::warden_propose_described(handle.raw(), request, request_len, &mut out, &mut info, &mut err)
        };
        check(code, err)?;
        let info = take(info);
        if out.is_null() {
            return Err(
                Failure::binding("WARDEN_RESULT_PANIC", "panic", "warden_propose_described returned OK and no permit")
                    .into(),
            );
        }
        // From here on the permit is owned: dropping it without an outcome records AMBIGUOUS.
        let permit = PermitPtr::new(out, handle);
        Ok((permit, info))
    }

    fn resolve(&mut self, _env: Env, (permit, info): (PermitPtr, String)) -> napi::Result<Permit> {
        Ok(Permit::new(permit, info))
    }

    fn reject(&mut self, env: Env, err: napi::Error) -> napi::Result<Permit> {
        Err(structured(&env, err))
    }
}
