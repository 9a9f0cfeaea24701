//! Test-only exports, compiled only with the non-default cargo feature `test-exports`. They are
//! excluded from `include/warden.h` (cbindgen.toml `[export] exclude`), and a test checks that
//! the release library's dynamic symbols hold none of them.

use super::bytes::warden_buf;
use super::handle::{warden_handle, with_handle};
use super::result::warden_result;
use crate::error::InvalidInputKind;

/// Panics inside the library on purpose: returns WARDEN_RESULT_PANIC, after which the handle
/// answers WARDEN_RESULT_POISONED until it is closed and reopened. Test-only.
///
/// # Safety
/// `h` is NULL or a live handle; `err` is NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn warden_test_panic(h: *mut warden_handle, err: *mut warden_buf) -> warden_result {
    // SAFETY: the caller's guarantees, forwarded.
    unsafe { with_handle(h, err, |_| panic!("warden_test_panic: a panic forced at the C boundary by a test")) }
}

/// Sets the manual clock of a handle opened with `{"clock": {"manual_ms": N}}` to `now_ms`
/// milliseconds since the epoch (backwards too), so lease and expiry behaviour is tested
/// without sleeping. Test-only.
///
/// Returns WARDEN_RESULT_OK; WARDEN_RESULT_INVALID_INPUT (NULL `h`, a handle opened without a
/// manual clock, `now_ms` too large).
///
/// # Safety
/// `h` is NULL or a live handle; `err` is NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn warden_test_clock_set(
    h: *mut warden_handle,
    now_ms: u64,
    err: *mut warden_buf,
) -> warden_result {
    let work = |handle: &warden_handle| -> Result<(), crate::error::Error> {
        let clock = handle.manual_clock.as_ref().ok_or_else(|| {
            crate::error::Error::invalid(
                InvalidInputKind::State,
                "this handle was opened without a manual clock; pass {\"clock\": {\"manual_ms\": N}} to warden_open",
            )
        })?;
        let micros = i64::try_from(now_ms).ok().and_then(|ms| ms.checked_mul(1000)).ok_or_else(|| {
            crate::error::Error::invalid_at(InvalidInputKind::OutOfRange, "now_ms", "now_ms is too large")
        })?;
        clock.set(micros);
        Ok(())
    };
    // SAFETY: the caller's guarantees, forwarded.
    unsafe { with_handle(h, err, work) }
}
