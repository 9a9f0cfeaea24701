//! The store handle's type and the write transaction's, in a module of their own: their names
//! are `pub` here, but `store` re-exports them only to the crate, so outside it a release build
//! cannot reach either (the kernel is the only way to the store, and operations are applied by
//! the store, never opened by a caller). A `test-exports` build re-exports them from
//! `crate::test_support` for the tests that inspect or damage raw rows.

use std::sync::Arc;

use super::{Engine, Protocol, WriteTables};

/// An open store. Cheap to clone; every handle on one file in one process shares it.
pub struct Store<P: Protocol> {
    pub(super) engine: Arc<Engine<P>>,
    pub(super) generation: u64,
    pub(super) opened_in: u32,
}

/// One write transaction, as a write operation sees it.
pub type WriteTx<'a> = dyn WriteTables + 'a;
