//! Sights: confined reads of configured HTTP windows, their snapshots, and the host's
//! credential provider.
//!
//! Queries, history pages and diffs run as async work on the libuv thread pool, like every
//! other call that can block. Two pieces need more than a C call:
//!
//! - Cancellation. A `Cancel` owns one `warden_cancel` token behind an `Arc`; the query task
//!   holds a clone, so the token is freed (`warden_cancel_free`) only once the JavaScript
//!   object is gone AND the native call has returned.
//! - The credential provider. libwarden calls `resolve_credential` ON THE THREAD RUNNING THE
//!   QUERY (a pool thread). It hands the reference to the JavaScript function through a
//!   threadsafe function and blocks that pool thread (never the JavaScript thread) until the
//!   function, and its Promise if it returns one, settles; then it puts the value into the
//!   sink. The threadsafe function is weak (it never keeps the process alive) and is released
//!   when the provider is replaced or the Warden closed; a request still waiting then gets no
//!   value, so no pool thread can wait for a JavaScript thread that will never answer.

use std::cell::RefCell;
use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::thread::ThreadId;

use napi::bindgen_prelude::{FnArgs, Function, Unknown};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::Status;
use napi_derive::napi;

use crate::call::{borrowed_text, output, CallResult, Failure};
use crate::ffi::{self, WardenBuf, WardenCancel, WardenCredentialSink, WardenResult, WARDEN_RESULT_OK};
use crate::handle::{register, HandlePtr, Registered};

// ---- cancellation -------------------------------------------------------------------------

/// One `warden_cancel` token and what a credential request waiting under it must learn.
pub struct CancelState {
    token: *mut WardenCancel,
    /// Whether `trigger` ran, and the credential request this query is waiting on (if any).
    watch: Mutex<(bool, Option<Weak<Reply>>)>,
    /// The trigger ended a credential request that was still waiting.
    aborted_credential: AtomicBool,
}

// SAFETY: the C ABI documents warden_cancel_trigger as callable from any thread while a query
// uses the token; the token is freed only in Drop, when no query or JavaScript object can
// reach it any more.
unsafe impl Send for CancelState {}
// SAFETY: as above; the only shared operation on the pointer is warden_cancel_trigger.
unsafe impl Sync for CancelState {}

impl CancelState {
    fn trigger(&self) {
        let waiting = match self.watch.lock() {
            Ok(mut watch) => {
                watch.0 = true;
                watch.1.take()
            }
            Err(_) => None,
        };
        // SAFETY: the token is live until Drop, which cannot run while `self` is borrowed.
        unsafe { ffi::warden_cancel_trigger(self.token) };
        if let Some(reply) = waiting.and_then(|reply| reply.upgrade()) {
            if reply.settle(Answer::Aborted) {
                self.aborted_credential.store(true, Ordering::SeqCst);
            }
        }
    }
}

impl Drop for CancelState {
    fn drop(&mut self) {
        // SAFETY: the token came from warden_cancel_new; this is the last reference, so every
        // query that used it has returned.
        unsafe { ffi::warden_cancel_free(self.token) };
    }
}

/// A cancellation token for one query: `trigger()` makes it return reason `aborted`.
#[napi]
pub struct Cancel {
    state: Arc<CancelState>,
}

#[napi]
impl Cancel {
    #[napi(constructor)]
    pub fn new(env: napi::Env) -> napi::Result<Cancel> {
        // SAFETY: no arguments; NULL only if the library panicked.
        let token = unsafe { ffi::warden_cancel_new() };
        if token.is_null() {
            return Err(crate::call::structured(&env, Failure::panic("warden_cancel_new returned NULL").into()));
        }
        let state = CancelState { token, watch: Mutex::new((false, None)), aborted_credential: AtomicBool::new(false) };
        Ok(Cancel { state: Arc::new(state) })
    }

    /// Abort the query using this token (from the JavaScript thread; the query runs elsewhere).
    #[napi]
    pub fn trigger(&self) {
        self.state.trigger();
    }
}

impl Cancel {
    /// The token's state, for a query task to hold while it runs.
    pub fn state(&self) -> Arc<CancelState> {
        self.state.clone()
    }
}

thread_local! {
    /// The cancel state of the query running on this thread, for the credential callback.
    static RUNNING: RefCell<Option<Arc<CancelState>>> = const { RefCell::new(None) };
}

/// Sets `RUNNING` for the duration of one query on this pool thread.
struct Running;

impl Running {
    fn enter(state: Option<Arc<CancelState>>) -> Running {
        RUNNING.with(|running| *running.borrow_mut() = state);
        Running
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        RUNNING.with(|running| running.borrow_mut().take());
    }
}

// ---- the credential provider --------------------------------------------------------------

/// What a credential request ended with.
enum Answer {
    Pending,
    Value(String),
    NoValue,
    Aborted,
}

/// Where the JavaScript thread answers a credential request the pool thread waits on.
pub struct Reply {
    answer: Mutex<Answer>,
    ready: Condvar,
}

impl Reply {
    fn new() -> Arc<Reply> {
        Arc::new(Reply { answer: Mutex::new(Answer::Pending), ready: Condvar::new() })
    }

    /// The first answer wins; later ones are dropped. True when this one was taken.
    fn settle(&self, answer: Answer) -> bool {
        let Ok(mut slot) = self.answer.lock() else { return false };
        if !matches!(*slot, Answer::Pending) {
            if let Answer::Value(mut value) = answer {
                wipe(&mut value);
            }
            return false;
        }
        *slot = answer;
        self.ready.notify_all();
        true
    }

    fn wait(&self) -> Answer {
        let Ok(mut slot) = self.answer.lock() else { return Answer::NoValue };
        while matches!(*slot, Answer::Pending) {
            slot = match self.ready.wait(slot) {
                Ok(slot) => slot,
                Err(_) => return Answer::NoValue,
            };
        }
        std::mem::replace(&mut *slot, Answer::NoValue)
    }
}

/// Owns the right to answer a request: dropped unanswered (the request never reached
/// JavaScript, or its `CredentialRequest` was collected unsettled), it answers "no value".
struct ReplyGuard(Arc<Reply>);

impl Drop for ReplyGuard {
    fn drop(&mut self) {
        self.0.settle(Answer::NoValue);
    }
}

/// One credential request on its way to the JavaScript thread.
pub struct Ask {
    reference: String,
    reply: ReplyGuard,
}

/// The request object the JavaScript provider wrapper settles exactly once.
#[napi]
pub struct CredentialRequest {
    reply: Mutex<Option<ReplyGuard>>,
}

#[napi]
impl CredentialRequest {
    /// The value for the reference, or null/undefined for "no value".
    #[napi]
    pub fn settle(&self, value: Option<String>) {
        let guard = self.reply.lock().ok().and_then(|mut reply| reply.take());
        match (guard, value) {
            (Some(guard), Some(value)) => {
                guard.0.settle(Answer::Value(value));
            }
            (Some(guard), None) => drop(guard),
            (None, Some(mut value)) => wipe(&mut value),
            (None, None) => {}
        }
    }
}

type CredentialTsfn =
    ThreadsafeFunction<Ask, Unknown<'static>, FnArgs<(String, CredentialRequest)>, Status, false, true, 0>;

/// The JavaScript provider wrapper's signature: `(reference, request) => void`.
pub type ProviderFunction<'f> = Function<'f, FnArgs<(String, CredentialRequest)>, Unknown<'static>>;

/// A registered JavaScript provider. Its address is the `user_data` libwarden passes back;
/// `HandlePtr` keeps every one it registered alive until `warden_close`, because a query that
/// started before a replacement may still call it.
pub struct Provider {
    tsfn: Mutex<Option<CredentialTsfn>>,
    pending: Mutex<Vec<Weak<Reply>>>,
    js_thread: ThreadId,
}

impl Provider {
    /// Wrap `function` (on the JavaScript thread). The threadsafe function is weak: an idle
    /// provider never keeps the process alive.
    pub fn new(function: &ProviderFunction<'_>) -> napi::Result<Provider> {
        let tsfn =
            function.build_threadsafe_function::<Ask>().callee_handled::<false>().weak::<true>().build_callback(
                |ctx: napi::threadsafe_function::ThreadsafeCallContext<Ask>| {
                    let Ask { reference, reply } = ctx.value;
                    Ok(FnArgs::from((reference, CredentialRequest { reply: Mutex::new(Some(reply)) })))
                },
            )?;
        Ok(Provider {
            tsfn: Mutex::new(Some(tsfn)),
            pending: Mutex::new(Vec::new()),
            js_thread: std::thread::current().id(),
        })
    }
}

impl Registered for Provider {
    /// Release the threadsafe function and answer every request still waiting with no value.
    fn release(&self) {
        let tsfn = self.tsfn.lock().ok().and_then(|mut tsfn| tsfn.take());
        drop(tsfn);
        let pending = self.pending.lock().map(|mut pending| std::mem::take(&mut *pending)).unwrap_or_default();
        for reply in pending.iter().filter_map(Weak::upgrade) {
            reply.settle(Answer::NoValue);
        }
    }
}

impl Provider {
    /// Ask JavaScript for `reference` and wait for its answer (on a pool thread only).
    fn resolve(&self, reference: String) -> Answer {
        if std::thread::current().id() == self.js_thread {
            // Waiting here would wait for this very thread: never.
            return Answer::NoValue;
        }
        let reply = Reply::new();
        let running = RUNNING.with(|running| running.borrow().clone());
        if let Some(state) = &running {
            let Ok(mut watch) = state.watch.lock() else { return Answer::NoValue };
            if watch.0 {
                state.aborted_credential.store(true, Ordering::SeqCst);
                return Answer::Aborted;
            }
            watch.1 = Some(Arc::downgrade(&reply));
        }
        {
            let Ok(tsfn) = self.tsfn.lock() else { return Answer::NoValue };
            let Some(tsfn) = tsfn.as_ref() else { return Answer::NoValue };
            if let Ok(mut pending) = self.pending.lock() {
                pending.retain(|reply| reply.strong_count() > 0);
                pending.push(Arc::downgrade(&reply));
            }
            let ask = Ask { reference, reply: ReplyGuard(reply.clone()) };
            // NonBlocking: the queue is unbounded. A refused call drops `ask`, whose guard
            // answers "no value" at once.
            let _ = tsfn.call(ask, ThreadsafeFunctionCallMode::NonBlocking);
        }
        let answer = reply.wait();
        if let Some(state) = &running {
            if let Ok(mut watch) = state.watch.lock() {
                watch.1 = None;
            }
        }
        answer
    }
}

/// The `warden_credential_fn` registered for every JavaScript provider; `user_data` is the
/// `Provider`. Returns 0 after a successful put, 1 for "no value".
unsafe extern "C" fn resolve_credential(
    user_data: *mut c_void,
    reference: *const u8,
    reference_len: usize,
    sink: *mut WardenCredentialSink,
) -> i32 {
    let work = || -> i32 {
        if user_data.is_null() {
            return 1;
        }
        // SAFETY: (reference, reference_len) is live for this call.
        let Some(reference) = (unsafe { borrowed_text(reference, reference_len) }) else { return 1 };
        // SAFETY: `user_data` is the address of a Provider that HandlePtr keeps alive until
        // warden_close.
        let provider = unsafe { &*(user_data as *const Provider) };
        match provider.resolve(reference.to_owned()) {
            Answer::Value(mut value) => {
                // SAFETY: `sink` is the sink of this running callback; the value borrows a
                // String alive for the call.
                let code = unsafe { ffi::warden_credential_put(sink, value.as_ptr(), value.len()) };
                wipe(&mut value);
                i32::from(code != WARDEN_RESULT_OK)
            }
            Answer::Pending | Answer::NoValue | Answer::Aborted => 1,
        }
    };
    // A panic must not unwind into C.
    catch_unwind(AssertUnwindSafe(work)).unwrap_or(1)
}

/// Overwrite a credential value before its memory is freed.
fn wipe(value: &mut String) {
    // SAFETY: zero bytes keep the String valid UTF-8.
    unsafe { value.as_mut_vec().iter_mut().for_each(|b| *b = 0) };
    std::hint::black_box(&value);
}

/// Register `provider` (or restore the default with None) on the handle, releasing the
/// previous JavaScript provider; every one stays allocated until `warden_close`.
pub fn set_provider(handle: &HandlePtr, provider: Option<Provider>) -> CallResult<()> {
    register(&handle.providers, "credential provider", provider, true, |user_data, err| match user_data {
        // SAFETY: the handle is live; the Provider outlives its registration (kept in
        // `providers` until warden_close); resolve_credential has the warden_credential_fn
        // signature and may be called from any thread.
        Some(user_data) => unsafe {
            ffi::warden_sight_credentials_set(handle.raw(), Some(resolve_credential), user_data, err)
        },
        // SAFETY: the handle is live; NULL restores the default provider.
        None => unsafe { ffi::warden_sight_credentials_set(handle.raw(), None, std::ptr::null_mut(), err) },
    })
}

// ---- the calls ----------------------------------------------------------------------------

/// A query or tool call under `cancel`: the token is passed to `call`, the query is marked as
/// running on this thread for the credential callback, and a failure after the abort ended a
/// pending credential request is reported as `aborted`.
pub fn cancellable(
    cancel: Option<Arc<CancelState>>,
    call: impl FnOnce(*const WardenCancel, *mut WardenBuf, *mut WardenBuf) -> WardenResult,
) -> CallResult<String> {
    let token = cancel.as_ref().map_or(std::ptr::null(), |state| state.token as *const WardenCancel);
    let _running = Running::enter(cancel.clone());
    output(|out, err| call(token, out, err))
        .map_err(|failure| aborted_while_resolving(cancel.as_deref()).unwrap_or(failure))
}

/// The library resolves the credential before its own cancel check, so a query aborted while
/// the JavaScript provider was still pending fails as `credential_unavailable`; report what
/// happened instead: it was aborted.
fn aborted_while_resolving(cancel: Option<&CancelState>) -> Option<Failure> {
    let cancel = cancel?;
    cancel.aborted_credential.load(Ordering::SeqCst).then(|| {
        let mut failure = Failure::binding(
            "WARDEN_RESULT_FETCH",
            "aborted",
            "aborted: the query was cancelled while the credential provider was still pending",
        );
        failure.error_json.pop();
        failure.error_json.push_str(",\"refusal\":false}");
        failure
    })
}
