//! Test-only exports, compiled only with the non-default cargo feature `test-exports`. They are
//! excluded from `include/warden.h` (cbindgen.toml `[export] exclude`), and a test checks that
//! the release library's dynamic symbols hold none of them.

use super::bytes::warden_buf;
use super::handle::{warden_handle, with_handle};
use super::result::warden_result;

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
