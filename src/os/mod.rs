//! The operating system's glue that needs `unsafe`, each block with a `SAFETY` line (the same
//! lints as `ffi`). Here: the two calls into the C library that Rust's standard library has no
//! safe form of, both about `fork()`: registering the hook that runs in a forked child, and
//! closing a descriptor the child inherited. Everything that decides what to do with them lives
//! in `store::fork`; this file only crosses the boundary. `signals`: SIGTERM/SIGINT as a flag,
//! for the gateway's graceful shutdown.

#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks, clippy::missing_safety_doc)]

pub mod signals;

use std::os::fd::RawFd;
use std::sync::{Once, OnceLock};

static INSTALLED: Once = Once::new();
static CHILD_HOOK: OnceLock<fn()> = OnceLock::new();

extern "C" fn in_child() {
    // An atomic load: safe in the child of a multi-threaded parent.
    if let Some(hook) = CHILD_HOOK.get() {
        hook();
    }
}

/// Registers `hook` to run in the child right after every `fork()` of this process (through
/// `pthread_atfork`, so Python's `os.fork`, `multiprocessing` and C's `fork` all run it).
/// Only the first call registers; later calls do nothing. Returns whether a hook is in place.
pub(crate) fn install_fork_hook(hook: fn()) -> bool {
    let mut registered = true;
    INSTALLED.call_once(|| {
        let _ = CHILD_HOOK.set(hook);
        // SAFETY: `in_child` is an `extern "C" fn()` with static lifetime that never unwinds
        // (the hook it calls only does atomic stores and `close`).
        registered = unsafe { libc::pthread_atfork(None, None, Some(in_child)) } == 0;
    });
    registered
}

static EXIT_INSTALLED: Once = Once::new();
static EXIT_HOOK: OnceLock<fn()> = OnceLock::new();

extern "C" fn at_exit() {
    if let Some(hook) = EXIT_HOOK.get() {
        // Never unwind into the C library's exit path.
        let _ = std::panic::catch_unwind(hook);
    }
}

/// Registers `hook` to run when the process exits normally (`exit()`, returning from `main`,
/// Python's and Node's normal shutdown), through `atexit`. Only the first call registers.
pub(crate) fn install_exit_hook(hook: fn()) {
    EXIT_INSTALLED.call_once(|| {
        let _ = EXIT_HOOK.set(hook);
        // SAFETY: `at_exit` is an `extern "C" fn()` with static lifetime that catches every
        // panic of the hook it calls.
        let _ = unsafe { libc::atexit(at_exit) };
    });
}

/// Closes `fd` in a forked child, where the descriptor is a copy this process must not use (the
/// parent keeps its own). Async-signal-safe: only `close(2)`.
pub(crate) fn close_inherited(fd: RawFd) {
    // SAFETY: called only from the fork hook, in the child, for descriptors the store layer
    // registered and whose Rust owners are never used or dropped in the child (they are leaked
    // there), so nothing closes or reads this number again through its old owner.
    unsafe { libc::close(fd) };
}
