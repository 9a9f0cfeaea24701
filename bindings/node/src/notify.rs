//! The JavaScript approval hook: libwarden calls `notify_approval` on its notification thread
//! for each new approval request; the request JSON is queued to the JavaScript thread through
//! a weak threadsafe function (an idle hook never keeps the process alive) and the call returns
//! at once. What the JavaScript function does with it never reaches the action.

use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;

use napi::bindgen_prelude::{Function, Status, Unknown};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};

use crate::call::{borrowed_text, CallResult};
use crate::ffi;
use crate::handle::{register, HandlePtr, Registered};

type HookTsfn = ThreadsafeFunction<String, Unknown<'static>, String, Status, false, true, 0>;

/// The JavaScript wrapper's signature: `(requestJson) => void`.
pub type HookFunction<'f> = Function<'f, String, Unknown<'static>>;

/// A registered JavaScript hook; its address is the `user_data` libwarden passes back, and
/// `HandlePtr` keeps it alive until `warden_close`.
pub struct Hook {
    tsfn: Mutex<Option<HookTsfn>>,
}

impl Hook {
    /// Wrap `function` (on the JavaScript thread).
    pub fn new(function: &HookFunction<'_>) -> napi::Result<Hook> {
        let tsfn = function
            .build_threadsafe_function::<String>()
            .callee_handled::<false>()
            .weak::<true>()
            .build_callback(|ctx: napi::threadsafe_function::ThreadsafeCallContext<String>| Ok(ctx.value))?;
        Ok(Hook { tsfn: Mutex::new(Some(tsfn)) })
    }

    fn deliver(&self, request: String) -> i32 {
        let Ok(tsfn) = self.tsfn.lock() else { return 1 };
        let Some(tsfn) = tsfn.as_ref() else { return 1 };
        i32::from(tsfn.call(request, ThreadsafeFunctionCallMode::NonBlocking) != Status::Ok)
    }
}

impl Registered for Hook {
    /// Stop delivering: later requests are dropped (reported to libwarden as a failure).
    fn release(&self) {
        let tsfn = self.tsfn.lock().ok().and_then(|mut tsfn| tsfn.take());
        drop(tsfn);
    }
}

/// The `warden_approval_fn` registered for every JavaScript hook; `user_data` is the `Hook`.
unsafe extern "C" fn notify_approval(user_data: *mut c_void, request: *const u8, request_len: usize) -> i32 {
    let work = || -> i32 {
        if user_data.is_null() {
            return 1;
        }
        // SAFETY: (request, request_len) is live for this call.
        let Some(text) = (unsafe { borrowed_text(request, request_len) }) else { return 1 };
        // SAFETY: `user_data` is the address of a Hook that HandlePtr keeps alive until
        // warden_close, which stops the calls first.
        let hook = unsafe { &*(user_data as *const Hook) };
        hook.deliver(text.to_owned())
    };
    // A panic must not unwind into C.
    catch_unwind(AssertUnwindSafe(work)).unwrap_or(1)
}

/// Register `hook` (or remove it with None) on the handle, releasing the previous one, which
/// libwarden no longer calls (notify_set waited for a call in progress), so it is dropped.
pub fn set_hook(handle: &HandlePtr, hook: Option<Hook>) -> CallResult<()> {
    register(&handle.hooks, "approval hook", hook, false, |user_data, err| match user_data {
        // SAFETY: the handle is live; the Hook outlives its registration (kept in `hooks` until
        // warden_close); notify_approval has the warden_approval_fn signature and may be called
        // from any thread.
        Some(user_data) => unsafe {
            ffi::warden_approval_notify_set(handle.raw(), Some(notify_approval), user_data, err)
        },
        // SAFETY: the handle is live; NULL removes the hook.
        None => unsafe { ffi::warden_approval_notify_set(handle.raw(), None, std::ptr::null_mut(), err) },
    })
}
