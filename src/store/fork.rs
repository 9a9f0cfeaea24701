//! No state crosses a `fork()`.
//!
//! A child inherits the parent's memory — every open store, its redb `Database`, its threads'
//! data (not the threads) — and copies of the parent's descriptors, whose locks belong to open
//! file descriptions the two processes now share. Using any of it in the child would let parent
//! and child both believe they own the writer. So:
//!
//! - every process has a *fork generation*, bumped by a hook that runs in each forked child;
//!   a handle remembers the generation it was opened in and refuses every call from another
//!   one, before it takes any lock (a lock may have been held by a parent thread at the fork);
//! - every descriptor the store layer opens is registered here, and the hook closes the
//!   child's copies, so a child never holds the parent's locks, listening socket or
//!   connections (the parent's own copies are untouched);
//! - objects from before the fork are leaked in the child, never dropped (dropping would
//!   close descriptor numbers the child may since have reused, or join threads that do not
//!   exist there).

use crate::error::{InvalidInputKind, StoreFaultKind};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};

static GENERATION: AtomicU64 = AtomicU64::new(0);

/// Descriptors the store layer holds, closed in a forked child. A fixed table: the hook runs
/// in the child of a possibly multi-threaded parent, where it may not allocate or lock.
const SLOTS: usize = 4096;
static FDS: [AtomicI32; SLOTS] = [const { AtomicI32::new(-1) }; SLOTS];

fn in_child() {
    GENERATION.fetch_add(1, Ordering::SeqCst);
    for slot in &FDS {
        let fd = slot.swap(-1, Ordering::SeqCst);
        if fd >= 0 {
            crate::os::close_inherited(fd);
        }
    }
}

/// Installs the hook (once per process) and returns the current generation.
pub(crate) fn current() -> u64 {
    crate::os::install_fork_hook(in_child);
    GENERATION.load(Ordering::SeqCst)
}

/// The generation without installing anything: for the per-call check.
pub(crate) fn generation() -> u64 {
    GENERATION.load(Ordering::SeqCst)
}

/// The error every call on a handle from before a fork gets; it touches nothing.
pub(crate) fn forked_error(opened_in: u32) -> crate::error::Error {
    crate::error::Error::invalid(
        InvalidInputKind::State,
        format!(
            "this handle was opened in process {opened_in} before a fork; a forked child must open its own \
         handle (open the store again in the child), and nothing was done"
        ),
    )
}

/// A registered descriptor: closed in a forked child, unregistered when dropped (the owner of
/// the descriptor closes it as usual). Registration fails only when 4,096 are registered.
#[derive(Debug)]
pub(crate) struct Registered {
    slot: Option<usize>,
    fd: RawFd,
}

impl Registered {
    pub(crate) fn new(fd: RawFd) -> Result<Registered, crate::error::Error> {
        for (index, slot) in FDS.iter().enumerate() {
            if slot.compare_exchange(-1, fd, Ordering::SeqCst, Ordering::SeqCst).is_ok() {
                return Ok(Registered { slot: Some(index), fd });
            }
        }
        Err(crate::error::Error::store(
            StoreFaultKind::Limit,
            format!("this process already holds {SLOTS} store descriptors; close some handles or connections"),
        ))
    }
}

impl Registered {
    /// Forget the registration without touching the slot (in a forked child, where the hook
    /// already cleared it and the slot may hold the child's own descriptor since).
    pub(crate) fn disarm(&mut self) {
        self.slot = None;
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        if let Some(index) = self.slot.take() {
            // Only clear our own registration: in a child the hook already cleared it, and the
            // slot may hold someone else's descriptor since.
            let _ = FDS[index].compare_exchange(self.fd, -1, Ordering::SeqCst, Ordering::SeqCst);
        }
    }
}
