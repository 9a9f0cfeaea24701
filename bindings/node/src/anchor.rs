//! The JavaScript anchors (`addAnchor`): libwarden calls `anchor_checkpoint` on the handle's
//! checkpoint thread with each signed checkpoint; it is carried to the JavaScript bridge
//! `(checkpointJson, reply) => void` on the event loop, and the checkpoint thread waits for the
//! reply: `""` (taken, nothing to keep), `"keep:" + answer JSON` or `"fail:" + error JSON`,
//! handed to `warden_anchor_put` as they are. A closing handle stops the wait first, so
//! `warden_close` never waits on the event loop it is called from.

use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::call::{borrowed_text, bytes, status, CallResult, Failure};
use crate::ffi::{self, WardenAnchorSink, WARDEN_RESULT_OK};
use crate::handle::{HandlePtr, Registered};
use crate::hooks::{Callback, HookFunction};

/// A registered JavaScript anchor; its address is the `user_data` libwarden passes back, and
/// `HandlePtr` keeps it alive until `warden_close`.
pub struct Anchor {
    callback: Mutex<Option<Callback>>,
    open: AtomicBool,
}

impl Anchor {
    /// Wrap the bridge `function` (on the JavaScript thread).
    pub fn new(function: &HookFunction<'_>) -> napi::Result<Anchor> {
        Ok(Anchor { callback: Mutex::new(Some(Callback::new(function)?)), open: AtomicBool::new(true) })
    }

    fn ask(&self, checkpoint: String) -> Option<String> {
        let open = || self.open.load(Ordering::SeqCst);
        let callback = self.callback.lock().ok()?;
        callback.as_ref()?.ask_while(checkpoint, &open)
    }
}

impl Registered for Anchor {
    /// Stop asking: a wait in progress gives up (a failure, retried by nobody: the handle closes).
    fn release(&self) {
        self.open.store(false, Ordering::SeqCst);
    }
}

/// The `warden_anchor_fn` registered for every JavaScript anchor; `user_data` is the `Anchor`.
unsafe extern "C" fn anchor_checkpoint(
    user_data: *mut c_void,
    checkpoint: *const u8,
    checkpoint_len: usize,
    sink: *mut WardenAnchorSink,
) -> i32 {
    let work = || -> i32 {
        if user_data.is_null() {
            return 1;
        }
        // SAFETY: (checkpoint, checkpoint_len) is live for this call.
        let Some(text) = (unsafe { borrowed_text(checkpoint, checkpoint_len) }) else { return 1 };
        // SAFETY: `user_data` is the address of an Anchor that HandlePtr keeps alive until
        // warden_close, which stops the calls first.
        let anchor = unsafe { &*(user_data as *const Anchor) };
        let Some(reply) = anchor.ask(text.to_owned()) else { return 1 };
        let (answer, status) = match (reply.strip_prefix("keep:"), reply.strip_prefix("fail:")) {
            (Some(answer), _) => (answer, 0),
            (_, Some(error)) => (error, 1),
            _ if reply.is_empty() => return 0,
            _ => return 1,
        };
        let (ptr, len) = bytes(answer);
        // SAFETY: `sink` is this running callback's; the answer borrows a String alive here.
        let put = unsafe { ffi::warden_anchor_put(sink, ptr, len) };
        if put == WARDEN_RESULT_OK {
            status
        } else {
            1
        }
    };
    // A panic must not unwind into C.
    catch_unwind(AssertUnwindSafe(work)).unwrap_or(1)
}

/// Add `anchor`, named `name`, to the handle; it stays until `warden_close`. Unlike a hook, an
/// anchor replaces none: the ones added before keep being asked.
pub fn add(handle: &HandlePtr, name: &str, anchor: Anchor) -> CallResult<()> {
    let mut anchors = handle.anchors.lock().map_err(|_| Failure::poisoned("anchors'"))?;
    let anchor = Arc::new(anchor);
    let user_data = Arc::as_ptr(&anchor) as *mut c_void;
    let (n, nl) = bytes(name);
    // SAFETY: the handle is live; the Anchor outlives its registration (kept in `anchors` until
    // warden_close); anchor_checkpoint has the warden_anchor_fn signature and may be called from
    // the checkpoint thread; (n, nl) borrows `name` for the call.
    status(|err| unsafe { ffi::warden_anchor_add(handle.raw(), n, nl, Some(anchor_checkpoint), user_data, err) })?;
    anchors.push(anchor);
    Ok(())
}
