//! Not an export: SIGTERM and SIGINT turned into a flag a program polls (the gateway's
//! graceful shutdown). The handler only stores the signal's number (async-signal-safe); a
//! handled signal is reset to its default across `exec`, so a child process started later is
//! stopped by it as usual.

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Once;

static RECEIVED: AtomicI32 = AtomicI32::new(0);
static INSTALLED: Once = Once::new();

extern "C" fn on_termination(signal: libc::c_int) {
    RECEIVED.store(signal, Ordering::SeqCst);
}

/// Handle SIGTERM and SIGINT by recording them (see `termination`) instead of ending the
/// process. Only the first call installs. Returns whether both handlers are in place.
pub fn catch_termination() -> bool {
    let mut installed = true;
    INSTALLED.call_once(|| {
        for signal in [libc::SIGTERM, libc::SIGINT] {
            // SAFETY: a zeroed `sigaction` is a valid value (empty mask, no flags); the
            // handler is an `extern "C" fn(c_int)` with static lifetime that only does an
            // atomic store, which is async-signal-safe and never unwinds.
            let done = unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = on_termination as extern "C" fn(libc::c_int) as libc::sighandler_t;
                action.sa_flags = libc::SA_RESTART;
                libc::sigemptyset(&raw mut action.sa_mask);
                libc::sigaction(signal, &raw const action, std::ptr::null_mut())
            };
            installed &= done == 0;
        }
    });
    installed
}

/// The signal (SIGTERM or SIGINT) received since `catch_termination`, if any.
pub fn termination() -> Option<i32> {
    match RECEIVED.load(Ordering::SeqCst) {
        0 => None,
        signal => Some(signal),
    }
}
