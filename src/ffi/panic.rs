//! The panic boundary: no Rust panic ever unwinds into C. A fallible export turns a panic into
//! `WARDEN_RESULT_PANIC` (and latches its handle poisoned); an infallible one returns its
//! fallback value (`unwind::infallible`).

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;

use crate::error::{Error, InvalidInputKind};

use super::bytes::{report, warden_buf};
use super::result::{code_of, warden_result, WARDEN_RESULT_OK};

/// The text of a panic payload.
pub(super) fn panic_message(payload: &(dyn Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|text| (*text).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic with no message".into())
}

/// Runs one fallible export. `Ok` is `WARDEN_RESULT_OK`; an error or a panic becomes its code,
/// and the error object is written to `err` when `err` is not NULL.
///
/// # Safety
/// `err` is NULL or valid for writing one `warden_buf`.
pub(super) unsafe fn fallible(err: *mut warden_buf, work: impl FnOnce() -> Result<(), Error>) -> warden_result {
    let outcome = match catch_unwind(AssertUnwindSafe(work)) {
        Ok(outcome) => outcome,
        Err(payload) => Err(Error::Panic(panic_message(payload.as_ref()))),
    };
    match outcome {
        Ok(()) => WARDEN_RESULT_OK,
        Err(error) => {
            // Reporting allocates; if even that panics the code still goes out, with no object.
            // SAFETY: the caller guarantees `err` is NULL or valid for one write.
            let _ = catch_unwind(AssertUnwindSafe(|| unsafe { report(err, &error) }));
            code_of(&error)
        }
    }
}

/// Runs one `warden_*_put` of a callback's sink: refuses a NULL sink, writes no error object
/// (a put has no `err`), and turns an error or a panic into its code.
///
/// # Safety
/// `sink` is NULL or the live sink of the running callback, which nothing else touches during
/// the callback.
pub(super) unsafe fn put_into<S>(sink: *mut S, work: impl FnOnce(&mut S) -> Result<(), Error>) -> warden_result {
    let work = || -> Result<(), Error> {
        // SAFETY: the caller's guarantee for `sink`.
        let sink = unsafe { sink.as_mut() }.ok_or_else(|| {
            Error::invalid_at(InvalidInputKind::Missing, "sink", "sink is NULL; pass the sink the callback received")
        })?;
        work(sink)
    };
    // SAFETY: NULL `err`: no error object is written.
    unsafe { fallible(std::ptr::null_mut(), work) }
}

/// The handle's poisoned latch for faults caught at the C boundary (the kernel latches its own
/// for faults inside its guarded operations). Shared by a handle and every permit it issued.
/// Lock-free, so that checking it never waits (in a forked child a lock may be held forever).
#[derive(Debug, Default)]
pub(super) struct Latch {
    reason: OnceLock<String>,
}

impl Latch {
    fn check(&self) -> Result<(), Error> {
        match self.reason.get() {
            Some(reason) => Err(Error::Poisoned(reason.clone())),
            None => Ok(()),
        }
    }

    fn trip(&self, reason: String) {
        let _ = self.reason.set(reason);
    }

    /// Refuses with `Poisoned` once tripped; otherwise runs `work`, and a panic inside it trips
    /// the latch and becomes `Error::Panic`.
    pub(super) fn guard<T>(&self, work: impl FnOnce() -> Result<T, Error>) -> Result<T, Error> {
        self.check()?;
        match catch_unwind(AssertUnwindSafe(work)) {
            Ok(outcome) => outcome,
            Err(payload) => {
                let panic = Error::Panic(panic_message(payload.as_ref()));
                self.trip(panic.to_string());
                Err(panic)
            }
        }
    }
}
