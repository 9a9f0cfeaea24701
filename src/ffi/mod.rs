//! The `extern "C"` surface: with `os` (fork hooks, signals) the only place `unsafe` is
//! allowed, each block with a `SAFETY` line. `include/warden.h` is generated from these files by cbindgen (see `build.rs`).
//!
//! Plumbing (all the FFI machinery): `result` (codes, the exhaustive `Error` → code match),
//! `panic` (the panic boundary and the poisoned latch; `unwind`, the infallible exports' boundary), `bytes` (borrowed byte views in, owned
//! `warden_buf` out, out-parameters), `request` (the JSON documents callers pass in).
//! One file per concept for the exports: `handle`, `permit`, `approvals`, `approval_hooks`, `precondition`, `recovering`, `effects`, `pure`,
//! `store_ops`, `sight`, `authority`, `evidence`, `anchors`, `telemetry`, and `test_exports` behind the non-default `test-exports` feature.

#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks, clippy::missing_safety_doc)]

// Plumbing. The declaration order is the header's order.
mod unwind;

pub mod result;

pub mod bytes;

pub mod panic;

mod request;

// The exports, one concept per file.
pub mod handle;

pub mod permit;

pub mod approvals;

pub mod approval_hooks;

pub mod precondition;

pub mod recovering;

pub mod effects;

pub mod pure;

pub mod store_ops;

pub mod sight;

pub mod authority;

pub mod evidence;

pub mod anchors;

pub mod telemetry;

#[cfg(feature = "test-exports")]
pub mod test_exports;

#[cfg(test)]
mod tests;

/// The ABI version of this library. A binding built for another version must refuse to load.
/// Bumped only when an existing symbol's meaning changes; added symbols do not bump it.
pub const WARDEN_ABI_VERSION: u32 = 1;

/// Returns the ABI version this library implements (WARDEN_ABI_VERSION). A binding compares it
/// with the version it was built for and refuses to load on a difference. Never fails, never
/// allocates.
///
/// Thread safety: safe from any thread.
#[no_mangle]
pub extern "C" fn warden_abi_version() -> u32 {
    unwind::infallible(WARDEN_ABI_VERSION, || WARDEN_ABI_VERSION)
}
