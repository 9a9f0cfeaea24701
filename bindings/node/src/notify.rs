//! The JavaScript approval hook: libwarden calls `notify_approval` on its notification thread
//! for each new approval request; the request JSON is queued to the JavaScript thread through
//! a weak threadsafe function (an idle hook never keeps the process alive) and the call returns
//! at once. What the JavaScript function does with it never reaches the action.

use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};

use napi::bindgen_prelude::{Function, Status, Unknown};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};

use crate::call::{check, CallResult, Failure};
use crate::ffi::{self, WardenBuf};
use crate::handle::HandlePtr;

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

    /// Stop delivering: later requests are dropped (reported to libwarden as a failure).
    pub fn release(&self) {
        let tsfn = self.tsfn.lock().ok().and_then(|mut tsfn| tsfn.take());
        drop(tsfn);
    }

    fn deliver(&self, request: String) -> i32 {
        let Ok(tsfn) = self.tsfn.lock() else { return 1 };
        let Some(tsfn) = tsfn.as_ref() else { return 1 };
        i32::from(tsfn.call(request, ThreadsafeFunctionCallMode::NonBlocking) != Status::Ok)
    }
}

/// The `warden_approval_fn` registered for every JavaScript hook; `user_data` is the `Hook`.
unsafe extern "C" fn notify_approval(user_data: *mut c_void, request: *const u8, request_len: usize) -> i32 {
    let work = || -> i32 {
        if user_data.is_null() || (request.is_null() && request_len > 0) {
            return 1;
        }
        // SAFETY: `user_data` is the address of a Hook that HandlePtr keeps alive until
        // warden_close, which stops the calls first; (request, request_len) is live for this call.
        let hook = unsafe { &*(user_data as *const Hook) };
        let bytes: &[u8] =
            if request_len == 0 { &[] } else { unsafe { std::slice::from_raw_parts(request, request_len) } };
        match std::str::from_utf8(bytes) {
            Ok(text) => hook.deliver(text.to_owned()),
            Err(_) => 1,
        }
    };
    // A panic must not unwind into C.
    catch_unwind(AssertUnwindSafe(work)).unwrap_or(1)
}

/// Register `hook` (or remove it with None) on the handle, releasing the previous one.
pub fn set_hook(handle: &HandlePtr, hook: Option<Hook>) -> CallResult<()> {
    let mut registered = handle
        .hooks
        .lock()
        .map_err(|_| Failure::binding("WARDEN_RESULT_POISONED", "poisoned", "the approval hook lock is poisoned"))?;
    let hook = hook.map(Arc::new);
    let mut err = WardenBuf::empty();
    let code = match &hook {
        // SAFETY: the handle is live; the Hook outlives its registration (kept in `registered`
        // until warden_close); notify_approval has the warden_approval_fn signature and may be
        // called from any thread.
        Some(hook) => unsafe {
            ffi::warden_approval_notify_set(
                handle.raw(),
                Some(notify_approval),
                Arc::as_ptr(hook) as *mut c_void,
                &mut err,
            )
        },
        // SAFETY: the handle is live; NULL removes the hook.
        None => unsafe { ffi::warden_approval_notify_set(handle.raw(), None, std::ptr::null_mut(), &mut err) },
    };
    if let Err(failure) = check(code, err) {
        if let Some(hook) = hook {
            hook.release();
        }
        return Err(failure);
    }
    // libwarden no longer calls the previous hooks (notify_set waited for a call in progress).
    for old in registered.iter() {
        old.release();
    }
    registered.clear();
    if let Some(hook) = hook {
        registered.push(hook);
    }
    Ok(())
}

/// Release every hook of the handle (close).
pub fn release_hooks(handle: &HandlePtr) {
    if let Ok(registered) = handle.hooks.lock() {
        for hook in registered.iter() {
            hook.release();
        }
    }
}
