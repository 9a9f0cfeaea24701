//! `Handle`: one open `warden_handle`, and every handle-level call as async work.
//!
//! The pointer lives in an `Arc`: `close()` only drops the handle's own reference, so work
//! already queued on the thread pool (and every live permit) keeps the store open until it
//! finishes; `warden_close` runs when the last reference goes.
//!
//! Sights (`sight.rs`) hang off the same handle: their calls are async work too, and the
//! JavaScript credential providers registered on it live in `HandlePtr` until `warden_close`.

use std::ffi::c_void;
use std::sync::{Arc, Mutex};

use napi::bindgen_prelude::AsyncTask;
use napi::Env;
use napi_derive::napi;

use crate::call::{bytes, optional, output, status, take, thrown, unsigned, Blocking, CallResult, Failure};
use crate::ffi::{self, WardenBuf, WardenHandle, WardenResult};
use crate::permit::{Permit, PermitPtr};
use crate::sight::{self, Cancel, Provider, ProviderFunction};

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
    /// The JavaScript anchors added to this handle (`anchor.rs`), alive until `warden_close`;
    /// released first, so a checkpoint thread waiting on one lets the close go.
    pub anchors: Mutex<Vec<Arc<crate::anchor::Anchor>>>,
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

/// What a handle registers with libwarden as a callback's `user_data` (a credential provider,
/// an approval hook): libwarden holds its address, so the handle keeps it allocated until it is
/// dropped from the handle's list or `warden_close`; once released it answers nothing.
pub trait Registered {
    fn release(&self);
}

/// Register `item` (None: unregister) with `set(user_data, err)` and release the ones before
/// it; `keep` keeps those allocated until `warden_close` (a call already running may still
/// reach them), else they are dropped now.
pub fn register<T: Registered>(
    registered: &Mutex<Vec<Arc<T>>>,
    what: &str,
    item: Option<T>,
    keep: bool,
    set: impl FnOnce(Option<*mut c_void>, *mut WardenBuf) -> WardenResult,
) -> CallResult<()> {
    let mut registered = registered.lock().map_err(|_| Failure::poisoned(what))?;
    let item = item.map(Arc::new);
    let user_data = item.as_ref().map(|item| Arc::as_ptr(item) as *mut c_void);
    if let Err(failure) = status(|err| set(user_data, err)) {
        if let Some(item) = item {
            item.release();
        }
        return Err(failure);
    }
    for old in registered.iter() {
        old.release();
    }
    if !keep {
        registered.clear();
    }
    registered.extend(item);
    Ok(())
}

/// Release everything registered on a closing handle.
fn release_all<T: Registered>(registered: &Mutex<Vec<Arc<T>>>) {
    if let Ok(registered) = registered.lock() {
        registered.iter().for_each(|item| item.release());
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
    // SAFETY: every (ptr, len) borrows a String alive for the call; out and err point at
    // locals.
    status(|err| unsafe {
        ffi::warden_open(store_ptr, store_len, config_ptr, config_len, options_ptr, options_len, &mut out, err)
    })?;
    if out.is_null() {
        return Err(Failure::panic("warden_open returned OK and no handle").into());
    }
    let ptr = HandlePtr {
        raw: out,
        providers: Mutex::new(Vec::new()),
        hooks: Mutex::new(Vec::new()),
        anchors: Mutex::new(Vec::new()),
    };
    Ok(Handle { slot: Mutex::new(Some(Arc::new(ptr))) })
}

/// A Promise of the JSON text a handle-level call answers.
type Json = AsyncTask<Blocking<String>>;

// SAFETY (every `unsafe` block in the methods below): `h` is a live handle, held by an Arc for
// the whole call (`Handle::task`); each (ptr, len) borrows a String the task owns; a cancel
// token is held by its Arc; out and err point at the locals of `output` / `status`.
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
            release_all(&handle.providers);
            release_all(&handle.hooks);
            release_all(&handle.anchors);
        }
        drop(taken);
    }

    #[napi(getter)]
    pub fn closed(&self) -> bool {
        self.slot.lock().map(|slot| slot.is_none()).unwrap_or(true)
    }

    /// Run the pipeline once (`warden_propose_recovering`): resolves to a `Permit`, rejects
    /// with the refusal it ends with. `wait_ms` (0: none) and the bridges
    /// `(questionJson, reply) => void` of the precondition provider and the reconcile hook are
    /// its options; the library waits, reconciles and retries. With `trace` the call is
    /// `warden_propose_traced`: its span is recorded there.
    #[napi(ts_return_type = "Promise<Permit>")]
    pub fn propose(
        &self,
        request: String,
        wait_ms: i64,
        precondition: Option<crate::hooks::HookFunction<'_>>,
        reconcile: Option<crate::hooks::HookFunction<'_>>,
        trace: Option<&crate::trace::Trace>,
    ) -> napi::Result<AsyncTask<Blocking<Permit>>> {
        let handle = self.held();
        let trace = trace.map(crate::trace::Trace::shared);
        let wait_ms = u64::try_from(wait_ms).unwrap_or(0);
        let precondition = precondition.as_ref().map(crate::hooks::Callback::new).transpose()?;
        let reconcile = reconcile.as_ref().map(crate::hooks::Callback::new).transpose()?;
        let hooks = crate::hooks::Hooks::new(wait_ms, precondition, reconcile);
        Ok(AsyncTask::new(Blocking::new(move || {
            let handle = handle.clone()?;
            let (r, rl) = bytes(&request);
            let options = hooks.options();
            let mut out = std::ptr::null_mut();
            let mut info = WardenBuf::empty();
            // SAFETY: as above; out and info point at locals too; `options` and the `hooks` it
            // points at live until the call returns; a trace is held by its Arc.
            status(|err| unsafe {
                match &trace {
                    None => ffi::warden_propose_recovering(handle.raw(), r, rl, &options, &mut out, &mut info, err),
                    Some(trace) => {
                        ffi::warden_propose_traced(handle.raw(), r, rl, &options, trace.raw(), &mut out, &mut info, err)
                    }
                }
            })?;
            let info = take(info);
            if out.is_null() {
                return Err(Failure::panic("warden_propose_recovering returned OK and no permit"));
            }
            // From here on the permit is owned: dropping it without an outcome records AMBIGUOUS.
            Ok(Permit::new(PermitPtr::new(out, handle), info))
        })))
    }

    #[napi(ts_return_type = "Promise<string>")]
    pub fn approval_grant(&self, id: String, by: String, ttl_ms: i64) -> Json {
        self.task(move |h| {
            let ((i, il), (b, bl)) = (bytes(&id), bytes(&by));
            output(|out, err| unsafe { ffi::warden_approval_grant(h, i, il, b, bl, ttl_ms, out, err) })
        })
    }

    #[napi(ts_return_type = "Promise<string>")]
    pub fn approval_deny(&self, id: String, by: String, reason: Option<String>) -> Json {
        self.task(move |h| {
            let ((i, il), (b, bl), (r, rl)) = (bytes(&id), bytes(&by), optional(reason.as_deref()));
            output(|out, err| unsafe { ffi::warden_approval_deny(h, i, il, b, bl, r, rl, out, err) })
        })
    }

    /// One approver's answer (`warden_approval_answer`): the answer JSON.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn approval_answer(&self, answer: String) -> Json {
        self.task(move |h| {
            let (a, al) = bytes(&answer);
            output(|out, err| unsafe { ffi::warden_approval_answer(h, a, al, out, err) })
        })
    }

    /// Grant a request as a scoped grant (`warden_approval_grant_scoped`): the answer JSON.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn approval_grant_scoped(&self, answer: String) -> Json {
        self.task(move |h| {
            let (a, al) = bytes(&answer);
            output(|out, err| unsafe { ffi::warden_approval_grant_scoped(h, a, al, out, err) })
        })
    }

    /// The scoped grants, live ones only or every one (`warden_scoped_grants`).
    #[napi(ts_return_type = "Promise<string>")]
    pub fn scoped_grants(&self, live_only: bool) -> Json {
        self.task(move |h| output(|out, err| unsafe { ffi::warden_scoped_grants(h, live_only, out, err) }))
    }

    /// Revoke one scoped grant (`warden_scoped_grant_revoke`).
    #[napi(ts_return_type = "Promise<string>")]
    pub fn scoped_grant_revoke(&self, id: String, by: String, reason: String) -> Json {
        self.task(move |h| {
            let ((i, il), (b, bl), (r, rl)) = (bytes(&id), bytes(&by), bytes(&reason));
            output(|out, err| unsafe { ffi::warden_scoped_grant_revoke(h, i, il, b, bl, r, rl, out, err) })
        })
    }

    /// One gauge read from the store now (`warden_gauge_read`): `[{value, attributes}]`.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn gauge_read(&self, name: String) -> Json {
        self.task(move |h| {
            let (n, nl) = bytes(&name);
            output(|out, err| unsafe { ffi::warden_gauge_read(h, n, nl, out, err) })
        })
    }

    /// Wait in the library, by its clock, for the request to be answered or to expire.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn approval_wait(&self, id: String, timeout_ms: i64) -> Json {
        self.task(move |h| {
            let (i, il) = bytes(&id);
            let timeout_ms = unsigned("timeoutMs", timeout_ms)?;
            output(|out, err| unsafe { ffi::warden_approval_wait(h, i, il, timeout_ms, out, err) })
        })
    }

    /// Add the JavaScript anchor bridge `(checkpointJson, reply) => void` under `name`.
    #[napi]
    pub fn add_anchor(&self, env: Env, name: String, bridge: crate::hooks::HookFunction<'_>) -> napi::Result<()> {
        self.now(&env, |handle| {
            let anchor = crate::anchor::Anchor::new(&bridge)?;
            Ok(crate::anchor::add(handle, &name, anchor)?)
        })
    }

    /// Register the JavaScript hook wrapper `(requestJson) => void`, or remove it with null.
    #[napi]
    pub fn set_approval_hook(&self, env: Env, hook: Option<crate::notify::HookFunction<'_>>) -> napi::Result<()> {
        self.now(&env, |handle| {
            let hook = hook.as_ref().map(crate::notify::Hook::new).transpose()?;
            Ok(crate::notify::set_hook(handle, hook)?)
        })
    }

    #[napi(ts_return_type = "Promise<string>")]
    pub fn approval_get(&self, id: String) -> Json {
        self.task(move |h| {
            let (i, il) = bytes(&id);
            output(|out, err| unsafe { ffi::warden_approval_get(h, i, il, out, err) })
        })
    }

    #[napi(ts_return_type = "Promise<string>")]
    pub fn approvals_pending(&self) -> Json {
        self.task(|h| output(|out, err| unsafe { ffi::warden_approvals_pending(h, out, err) }))
    }

    #[napi(ts_return_type = "Promise<string>")]
    pub fn delegate(&self, request: String) -> Json {
        self.task(move |h| {
            let (r, rl) = bytes(&request);
            output(|out, err| unsafe { ffi::warden_delegate(h, r, rl, out, err) })
        })
    }

    #[napi(ts_return_type = "Promise<string>")]
    pub fn revoke(&self, id: String, by: Option<String>) -> Json {
        self.task(move |h| {
            let ((i, il), (b, bl)) = (bytes(&id), optional(by.as_deref()));
            output(|out, err| unsafe { ffi::warden_revoke(h, i, il, b, bl, out, err) })
        })
    }

    #[napi(ts_return_type = "Promise<string>")]
    pub fn revoke_sweep(&self, request: String) -> Json {
        self.task(move |h| {
            let (r, rl) = bytes(&request);
            output(|out, err| unsafe { ffi::warden_revoke_sweep(h, r, rl, out, err) })
        })
    }

    /// Every stored delegation (the library pages).
    #[napi(ts_return_type = "Promise<string>")]
    pub fn delegations(&self) -> Json {
        self.task(|h| output(|out, err| unsafe { ffi::warden_delegations_all(h, out, err) }))
    }

    #[napi(ts_return_type = "Promise<string>")]
    pub fn effect_resolve(&self, key: String, to: String, by: String, attempt: Option<u32>) -> Json {
        self.task(move |h| {
            let ((k, kl), (t, tl), (b, bl)) = (bytes(&key), bytes(&to), bytes(&by));
            output(|out, err| match attempt {
                None => unsafe { ffi::warden_effect_resolve(h, k, kl, t, tl, b, bl, out, err) },
                Some(attempt) => unsafe {
                    ffi::warden_effect_resolve_attempt(h, k, kl, attempt, t, tl, b, bl, out, err)
                },
            })
        })
    }

    #[napi(ts_return_type = "Promise<string>")]
    pub fn effect_get(&self, key: String) -> Json {
        self.task(move |h| {
            let (k, kl) = bytes(&key);
            output(|out, err| unsafe { ffi::warden_effect_get(h, k, kl, out, err) })
        })
    }

    #[napi(ts_return_type = "Promise<string>")]
    pub fn effects_list(&self, state: Option<String>, limit: i64) -> Json {
        self.task(move |h| {
            let (s, sl) = optional(state.as_deref());
            let limit = unsigned("limit", limit)?;
            output(|out, err| unsafe { ffi::warden_effects_list(h, s, sl, limit, out, err) })
        })
    }

    #[napi(ts_return_type = "Promise<string>")]
    pub fn receipts_list(&self, from_seq: i64, limit: i64) -> Json {
        self.task(move |h| {
            let (from_seq, limit) = (unsigned("fromSeq", from_seq)?, unsigned("limit", limit)?);
            output(|out, err| unsafe { ffi::warden_receipts_list(h, from_seq, limit, out, err) })
        })
    }

    #[napi(ts_return_type = "Promise<string>")]
    pub fn chain_verify(&self) -> Json {
        self.task(|h| output(|out, err| unsafe { ffi::warden_chain_verify(h, out, err) }))
    }

    #[napi(ts_return_type = "Promise<string>")]
    pub fn events_list(&self, after_id: i64, limit: i64) -> Json {
        self.task(move |h| {
            let (after_id, limit) = (unsigned("afterId", after_id)?, unsigned("limit", limit)?);
            output(|out, err| unsafe { ffi::warden_events_list(h, after_id, limit, out, err) })
        })
    }

    /// A receipt's audit path in checkpoint `checkpoint` (0: the last), checked by the library
    /// against the stored root (`warden_proof_inclusion`): the `warden proof inclusion --json`
    /// document.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn proof_inclusion(&self, receipt_id: String, checkpoint: i64) -> Json {
        self.task(move |h| {
            let (r, rl) = bytes(&receipt_id);
            let checkpoint = unsigned("checkpoint", checkpoint)?;
            output(|out, err| unsafe { ffi::warden_proof_inclusion(h, r, rl, checkpoint, out, err) })
        })
    }

    /// The consistency proof from checkpoint `old` to checkpoint `new`
    /// (`warden_proof_consistency`): the `warden proof consistency --json` document.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn proof_consistency(&self, old: i64, new: i64) -> Json {
        self.task(move |h| {
            let (old, new) = (unsigned("old", old)?, unsigned("new", new)?);
            output(|out, err| unsafe { ffi::warden_proof_consistency(h, old, new, out, err) })
        })
    }

    /// The signed checkpoints numbered `from` on, at most `limit` (0: all; the library pages).
    #[napi(ts_return_type = "Promise<string>")]
    pub fn checkpoints(&self, from: i64, limit: i64) -> Json {
        self.task(move |h| {
            let (from, limit) = (unsigned("from", from)?, unsigned("limit", limit)?);
            output(|out, err| unsafe { ffi::warden_checkpoints(h, from, limit, out, err) })
        })
    }

    /// Make this process's deferred outcomes durable (`warden_flush`).
    #[napi(ts_return_type = "Promise<string>")]
    pub fn flush(&self) -> Json {
        self.task(|h| {
            status(|err| unsafe { ffi::warden_flush(h, err) })?;
            Ok("null".to_owned())
        })
    }
}

#[napi]
impl Handle {
    /// Read one configured window (`{"source", "endpoint", "params"?, "fields"?, "snapshot"?}`),
    /// abortable through `cancel`.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn sight_query(&self, request: String, cancel: Option<&Cancel>) -> Json {
        let cancel = cancel.map(Cancel::state);
        self.task(move |h| {
            let (q, ql) = bytes(&request);
            sight::cancellable(cancel.clone(), |token, out, err| unsafe {
                ffi::warden_sight_query(h, q, ql, token, out, err)
            })
        })
    }

    /// Run one tool call an LLM made (`warden_sight_call_tool`), abortable through `cancel`.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn sight_call_tool(&self, name: String, arguments: String, cancel: Option<&Cancel>) -> Json {
        let cancel = cancel.map(Cancel::state);
        self.task(move |h| {
            let ((n, nl), (a, al)) = (bytes(&name), bytes(&arguments));
            sight::cancellable(cancel.clone(), |token, out, err| unsafe {
                ffi::warden_sight_call_tool(h, n, nl, a, al, token, out, err)
            })
        })
    }

    #[napi(ts_return_type = "Promise<string>")]
    pub fn sight_history(&self, request: String) -> Json {
        self.task(move |h| {
            let (r, rl) = bytes(&request);
            output(|out, err| unsafe { ffi::warden_sight_history(h, r, rl, out, err) })
        })
    }

    #[napi(ts_return_type = "Promise<string>")]
    pub fn sight_diff(&self, request: String) -> Json {
        self.task(move |h| {
            let (r, rl) = bytes(&request);
            output(|out, err| unsafe { ffi::warden_sight_diff(h, r, rl, out, err) })
        })
    }

    /// The configured windows as JSON text (no I/O: synchronous).
    #[napi]
    pub fn sight_sources(&self, env: Env) -> napi::Result<String> {
        self.now(&env, |handle| Ok(output(|out, err| unsafe { ffi::warden_sight_sources(handle.raw(), out, err) })?))
    }

    /// The four tool definitions as JSON text (no I/O: synchronous).
    #[napi]
    pub fn sight_tool_schema(&self, env: Env) -> napi::Result<String> {
        self.now(&env, |handle| {
            Ok(output(|out, err| unsafe { ffi::warden_sight_tool_schema(handle.raw(), out, err) })?)
        })
    }

    /// Register the JavaScript provider wrapper `(reference, request) => void`, or restore the
    /// default provider with null.
    #[napi]
    pub fn set_credential_provider(&self, env: Env, provider: Option<ProviderFunction<'_>>) -> napi::Result<()> {
        self.now(&env, |handle| {
            let provider = provider.as_ref().map(Provider::new).transpose()?;
            Ok(sight::set_provider(handle, provider)?)
        })
    }
}

impl Handle {
    /// `call` with the open handle, now, on this thread; a failure is thrown structured.
    fn now<T>(&self, env: &Env, call: impl FnOnce(&HandlePtr) -> napi::Result<T>) -> napi::Result<T> {
        thrown(env, self.held().map_err(napi::Error::from).and_then(|handle| call(&handle)))
    }

    /// The open handle, or why not (reported when the task runs, as a structured rejection).
    fn held(&self) -> CallResult<Arc<HandlePtr>> {
        let slot = self.slot.lock().map_err(|_| Failure::poisoned("handle's"))?;
        slot.clone().ok_or_else(|| Failure::invalid("this Warden is closed; open the store again to use it"))
    }

    /// `call` with the open handle, as async work on the thread pool; the handle stays open
    /// until the task is gone.
    fn task(&self, mut call: impl FnMut(*mut WardenHandle) -> CallResult<String> + Send + 'static) -> Json {
        let handle = self.held();
        AsyncTask::new(Blocking::new(move || call(handle.clone()?.raw())))
    }
}
