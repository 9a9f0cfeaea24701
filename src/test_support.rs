//! Test support: what the integration tests reach that no other build offers. Compiled only
//! with the test-only `test-exports` feature (never in a release build, a binding's library
//! or the CLI), so a release build's `Kernel` offers no way to hand it a ruling or to reach
//! its store, and these doc tests say so:
//!
//! - `Kernel::propose` trusts the ruling its caller hands in (`Warden::submit`, which decides
//!   with the administrator's document, is the only way in otherwise);
//! - `Kernel::store` is the raw store, for tests that inspect or damage rows;
//! - `Kernel::force_panic` latches the handle as a panic inside it would.
//!
//! Bring [`KernelInternals`] into scope (`use warden::test_support::KernelInternals;`) and call
//! them as methods: outside the crate the kernel's own crate-private methods are not
//! candidates, so the trait's are chosen.

use crate::error::Result;
use crate::kernel::{Kernel, Ops, Permit, Proposal};

pub use crate::store::handle::Store;
pub use crate::store::protocol::WriteTx;

/// The kernel's internals, for tests.
pub trait KernelInternals {
    /// `Kernel::propose`: normalize → (the ruling handed in) → approval gate → one write
    /// transaction → permit.
    fn propose(&self, proposal: &Proposal<'_>) -> Result<Permit>;
    /// `Kernel::store`: the store under this kernel.
    fn store(&self) -> &Store<Ops>;
    /// `Kernel::force_panic`: latch the handle as if a panic had happened inside it.
    fn force_panic(&self) -> Result<()>;
}

impl KernelInternals for Kernel {
    fn propose(&self, proposal: &Proposal<'_>) -> Result<Permit> {
        Kernel::propose(self, proposal)
    }

    fn store(&self) -> &Store<Ops> {
        Kernel::store(self)
    }

    fn force_panic(&self) -> Result<()> {
        Kernel::force_panic(self)
    }
}
