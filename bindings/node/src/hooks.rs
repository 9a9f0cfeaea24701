//! The host's callbacks of one proposal (`warden_propose_recovering`): the precondition
//! provider and the reconcile hook are JavaScript functions, called on the JavaScript thread
//! while the proposal blocks its pool thread for the answer. The library owns the loop; this
//! only carries one question to JavaScript and its answer back.

use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Condvar, Mutex};

use napi::bindgen_prelude::{FnArgs, Function, Unknown};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::Status;
use napi_derive::napi;

use crate::call::borrowed_text;
use crate::ffi::{self, WardenPreconditionSink, WardenProposeOptions, WardenReconcileSink, WARDEN_RESULT_OK};

/// Where JavaScript answers one question: `Some(Some(text))` an answer, `Some(None)` a
/// failure (the bridge threw, rejected, or the request was collected unsettled).
struct Reply {
    answer: Mutex<Option<Option<String>>>,
    ready: Condvar,
}

impl Reply {
    fn settle(&self, answer: Option<String>) {
        if let Ok(mut slot) = self.answer.lock() {
            if slot.is_none() {
                *slot = Some(answer);
                self.ready.notify_all();
            }
        }
    }

    /// The answer; `None` (a failure) once `open()` says the asker is going.
    fn wait_while(&self, open: &dyn Fn() -> bool) -> Option<String> {
        let Ok(mut slot) = self.answer.lock() else { return None };
        loop {
            if let Some(answer) = slot.take() {
                return answer;
            }
            if !open() {
                return None;
            }
            slot = match self.ready.wait_timeout(slot, std::time::Duration::from_millis(50)) {
                Ok((slot, _)) => slot,
                Err(_) => return None,
            };
        }
    }
}

/// The right to answer: dropped unanswered, it answers "failed".
struct ReplyGuard(std::sync::Arc<Reply>);

impl Drop for ReplyGuard {
    fn drop(&mut self) {
        self.0.settle(None);
    }
}

/// The object a JavaScript bridge settles once: `settle(text)` answers, `settle(null)` fails.
#[napi]
pub struct HookReply {
    reply: Mutex<Option<ReplyGuard>>,
}

#[napi]
impl HookReply {
    #[napi]
    pub fn settle(&self, answer: Option<String>) {
        if let Some(guard) = self.reply.lock().ok().and_then(|mut reply| reply.take()) {
            guard.0.settle(answer);
        }
    }
}

struct Ask {
    question: String,
    reply: ReplyGuard,
}

type HookTsfn = ThreadsafeFunction<Ask, Unknown<'static>, FnArgs<(String, HookReply)>, Status, false, true, 0>;

/// A JavaScript bridge's signature: `(questionJson, reply) => void`.
pub type HookFunction<'f> = Function<'f, FnArgs<(String, HookReply)>, Unknown<'static>>;

/// One JavaScript callback, callable from a pool thread.
pub struct Callback {
    tsfn: HookTsfn,
}

impl Callback {
    /// Wrap `function` (on the JavaScript thread); weak: it never keeps the process alive (the
    /// proposal's own async work does).
    pub fn new(function: &HookFunction<'_>) -> napi::Result<Callback> {
        let tsfn =
            function.build_threadsafe_function::<Ask>().callee_handled::<false>().weak::<true>().build_callback(
                |ctx: napi::threadsafe_function::ThreadsafeCallContext<Ask>| {
                    let Ask { question, reply } = ctx.value;
                    Ok(FnArgs::from((question, HookReply { reply: Mutex::new(Some(reply)) })))
                },
            )?;
        Ok(Callback { tsfn })
    }

    /// Ask JavaScript and wait for the answer (on a pool thread: the JavaScript thread is free).
    fn ask(&self, question: String) -> Option<String> {
        self.ask_while(question, &|| true)
    }

    /// `ask`, giving up (a failure) once `open()` turns false: a thread that is not the
    /// JavaScript thread's own waiter may have to let a closing handle go.
    pub fn ask_while(&self, question: String, open: &dyn Fn() -> bool) -> Option<String> {
        let reply = std::sync::Arc::new(Reply { answer: Mutex::new(None), ready: Condvar::new() });
        let ask = Ask { question, reply: ReplyGuard(reply.clone()) };
        // A refused call drops `ask`, whose guard answers "failed" at once.
        let _ = self.tsfn.call(ask, ThreadsafeFunctionCallMode::NonBlocking);
        reply.wait_while(open)
    }
}

/// The callbacks of one proposal; its address is the `user_data` of the options, so it must
/// outlive the `warden_propose_recovering` call (the task owns it).
pub struct Hooks {
    precondition: Option<Callback>,
    reconcile: Option<Callback>,
    wait_ms: u64,
}

impl Hooks {
    pub fn new(wait_ms: u64, precondition: Option<Callback>, reconcile: Option<Callback>) -> Hooks {
        Hooks { precondition, reconcile, wait_ms }
    }

    /// The C options pointing back at `self`.
    pub fn options(&self) -> WardenProposeOptions {
        WardenProposeOptions {
            wait_ms: self.wait_ms,
            poll_ms: 0,
            precondition: self.precondition.as_ref().map(|_| provide as ffi::PreconditionCallback),
            reconcile: self.reconcile.as_ref().map(|_| answer as ffi::ReconcileCallback),
            user_data: self as *const Hooks as *mut c_void,
        }
    }
}

/// The `warden_precondition_fn`: the action JSON to the JavaScript provider, its state back.
unsafe extern "C" fn provide(
    user_data: *mut c_void,
    action: *const u8,
    action_len: usize,
    sink: *mut WardenPreconditionSink,
) -> i32 {
    let work = || -> i32 {
        // SAFETY: `user_data` is the `Hooks` the running proposal's task owns.
        let hooks = unsafe { &*(user_data as *const Hooks) };
        // SAFETY: (action, action_len) is live for this call.
        let Some(action) = (unsafe { borrowed_text(action, action_len) }) else { return 1 };
        let Some(callback) = &hooks.precondition else { return 1 };
        let Some(state) = callback.ask(action.to_owned()) else { return 1 };
        // SAFETY: `sink` is this running callback's; the state borrows a String alive here.
        i32::from(unsafe { ffi::warden_precondition_put(sink, state.as_ptr(), state.len()) } != WARDEN_RESULT_OK)
    };
    catch_unwind(AssertUnwindSafe(work)).unwrap_or(1)
}

/// The `warden_reconcile_fn`: the effect key to the JavaScript hook, its answer back.
unsafe extern "C" fn answer(
    user_data: *mut c_void,
    key: *const u8,
    key_len: usize,
    sink: *mut WardenReconcileSink,
) -> i32 {
    let work = || -> i32 {
        // SAFETY: `user_data` is the `Hooks` the running proposal's task owns.
        let hooks = unsafe { &*(user_data as *const Hooks) };
        // SAFETY: (key, key_len) is live for this call.
        let Some(key) = (unsafe { borrowed_text(key, key_len) }) else { return 1 };
        let Some(callback) = &hooks.reconcile else { return 1 };
        let Some(answer) = callback.ask(key.to_owned()) else { return 1 };
        // SAFETY: `sink` is this running callback's; the answer borrows a String alive here.
        i32::from(unsafe { ffi::warden_reconcile_put(sink, answer.as_ptr(), answer.len()) } != WARDEN_RESULT_OK)
    };
    catch_unwind(AssertUnwindSafe(work)).unwrap_or(1)
}
