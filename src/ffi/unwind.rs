//! The panic boundary of an export that cannot report an error: a panic never unwinds into C,
//! it yields the export's fallback value (`panic` has the fallible exports' boundary).

use std::panic::{catch_unwind, AssertUnwindSafe};

/// Runs one export that cannot report an error: a panic yields `fallback`.
pub(super) fn infallible<T>(fallback: T, work: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(work)).unwrap_or(fallback)
}
