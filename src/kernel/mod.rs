//! The pipeline that composes the pure modules with the store; the only place that orders
//! steps. In this issue the host (trusted code) passes the decision in; the policy module
//! will produce it.
//!
//! Every state change is one write transaction carrying the state, its events and, for a
//! terminal outcome, its receipt and the new chain head.

mod approvals;
mod claim;
mod effects;
mod permit;
mod propose;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::{Arc, Mutex};

use crate::action::{Action, Principal};
use crate::clock::{Clock, Micros, SystemClock};
use crate::decision::Ruling;
use crate::error::{Error, Result};
use crate::store::Store;
use crate::template::Template;

pub use permit::Permit;

/// How a kernel is opened.
#[derive(Debug, Clone)]
pub struct KernelOptions {
    pub clock: Arc<dyn Clock>,
    /// Recorded on every receipt: the policy in force.
    pub policy_hash: Option<String>,
    pub policy_version: Option<String>,
    /// The one environment this kernel acts in; an action from another is refused. `None`:
    /// `$WARDEN_ENVIRONMENT`, else `production`.
    pub environment: Option<String>,
}

impl Default for KernelOptions {
    fn default() -> Self {
        KernelOptions { clock: Arc::new(SystemClock), policy_hash: None, policy_version: None, environment: None }
    }
}

/// The environment a kernel acts in: the argument, then `$WARDEN_ENVIRONMENT`, then the
/// document's, then `production`.
pub fn resolve_environment(argument: Option<&str>, document: Option<&str>) -> String {
    argument
        .map(str::to_owned)
        .or_else(|| std::env::var("WARDEN_ENVIRONMENT").ok().filter(|e| !e.is_empty()))
        .or_else(|| document.map(str::to_owned))
        .unwrap_or_else(|| "production".to_owned())
}

/// What the host asks the kernel to do with one action.
#[derive(Debug, Clone)]
pub struct Proposal<'a> {
    pub action: &'a Action,
    pub ruling: Ruling,
    /// The effect-key template. `None`: the action has no effect to protect (a read); it runs
    /// with no reservation but still leaves a receipt.
    pub effect: Option<&'a Template>,
    pub max_attempts: Option<u32>,
    /// Lease in microseconds; `None` is the default five minutes.
    pub lease: Option<Micros>,
    /// A granted approval presented for this exact action.
    pub approval_id: Option<&'a str>,
    /// How long a new approval request stays answerable; `None` is fifteen minutes.
    pub approval_ttl: Option<Micros>,
    /// Observe mode: record what enforce mode would have done, and let the action run.
    pub observe: bool,
}

impl<'a> Proposal<'a> {
    pub fn new(action: &'a Action, ruling: Ruling) -> Proposal<'a> {
        Proposal {
            action,
            ruling,
            effect: None,
            max_attempts: None,
            lease: None,
            approval_id: None,
            approval_ttl: None,
            observe: false,
        }
    }
}

struct Inner {
    store: Store,
    clock: Arc<dyn Clock>,
    poisoned: Mutex<Option<String>>,
    policy_hash: Option<String>,
    policy_version: Option<String>,
    environment: String,
}

/// A handle on one store. Cheap to clone; clones share the poisoned latch.
#[derive(Clone)]
pub struct Kernel {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kernel").field("store", &self.inner.store).finish()
    }
}

impl Kernel {
    pub fn open(path: impl AsRef<Path>, options: KernelOptions) -> Result<Kernel> {
        let store = Store::open(path)?;
        Ok(Kernel {
            inner: Arc::new(Inner {
                store,
                clock: options.clock,
                poisoned: Mutex::new(None),
                policy_hash: options.policy_hash,
                policy_version: options.policy_version,
                environment: resolve_environment(options.environment.as_deref(), None),
            }),
        })
    }

    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    /// The one environment this handle acts in.
    pub fn environment(&self) -> &str {
        &self.inner.environment
    }

    pub fn now(&self) -> Micros {
        self.inner.clock.now()
    }

    /// `Some(reason)` once a fault or panic latched this handle closed.
    pub fn poisoned(&self) -> Option<String> {
        self.inner.poisoned.lock().map(|p| p.clone()).unwrap_or_else(|_| Some("poisoned latch".into()))
    }

    fn latch(&self, reason: &str) {
        if let Ok(mut slot) = self.inner.poisoned.lock() {
            slot.get_or_insert_with(|| reason.to_owned());
        }
    }

    /// Runs one operation: refuses on a poisoned handle, turns a panic into `Error::Panic`,
    /// and latches the handle on any store fault or panic.
    pub(crate) fn guarded<T>(&self, work: impl FnOnce(&Kernel, Micros) -> Result<T>) -> Result<T> {
        if let Some(reason) = self.poisoned() {
            return Err(Error::Poisoned(reason));
        }
        let now = self.inner.clock.now();
        let outcome = match catch_unwind(AssertUnwindSafe(|| work(self, now))) {
            Ok(outcome) => outcome,
            Err(payload) => {
                let text = payload
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic with no message".into());
                Err(Error::Panic(text))
            }
        };
        if let Err(error) = &outcome {
            if error.poisons() {
                self.latch(&error.to_string());
            }
        }
        outcome
    }

    /// Test support: latch the handle as if a panic had happened inside it.
    #[doc(hidden)]
    pub fn force_panic(&self) -> Result<()> {
        self.guarded(|_, _| -> Result<()> { panic!("forced panic for a test") })
    }
}

/// What a reconcile hook may say about an AMBIGUOUS effect: it happened, it provably did not,
/// or it cannot tell (which moves nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReconcileAnswer {
    Committed,
    NotExecuted,
    Unknown,
}

impl ReconcileAnswer {
    pub fn as_str(self) -> &'static str {
        match self {
            ReconcileAnswer::Committed => "committed",
            ReconcileAnswer::NotExecuted => "not_executed",
            ReconcileAnswer::Unknown => "unknown",
        }
    }

    pub fn parse(text: &str) -> Option<ReconcileAnswer> {
        match text {
            "committed" => Some(ReconcileAnswer::Committed),
            "not_executed" => Some(ReconcileAnswer::NotExecuted),
            "unknown" => Some(ReconcileAnswer::Unknown),
            _ => None,
        }
    }
}

/// Shorthand for tests and the CLI: a principal from two strings.
pub fn principal(agent: &str, user: Option<&str>) -> Result<Principal> {
    Principal::new(agent, user).map_err(|e| Error::InvalidInput(e.to_string()))
}
