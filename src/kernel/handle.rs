//! The kernel's handle: `Kernel` and what opening one takes (`KernelOptions`, `Outcomes`), the
//! `Proposal` the pipeline hands it, and the core every concept's `impl Kernel` builds on
//! (`write`, `read`, `guarded`). A leaf below the concept files: it names only the operations
//! (`ops`), never a concept.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use crate::action::{Action, Principal};
use crate::approval::ApprovalRecord;
use crate::clock::{Clock, Micros, SystemClock};
use crate::decision::Ruling;
use crate::error::{Error, InvalidInputKind, Result, StoreFaultKind};
use crate::store::{Durability, Now, Store, StoreOptions};
use crate::template::Template;

use super::ops::{self, AuthorityStamp, Ops};

/// Told of every approval request this process created (the notifier).
pub type ApprovalListener = Arc<dyn Fn(&ApprovalRecord) + Send + Sync>;

/// The kernel's store.
pub(crate) type KernelStore = Store<Ops>;

/// When an outcome (commit, not executed, ambiguous) is durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcomes {
    /// The call returns after the outcome and its receipt are durable.
    Durable,
    /// The call returns at once; the outcome is durable with the store's next commit or within
    /// `max_delay`. A crash in that window leaves the effect in flight, then AMBIGUOUS when its
    /// lease lapses — never FAILED, never run again.
    Deferred {
        /// How long an outcome may wait to be durable when no other commit makes it so first.
        max_delay: Duration,
    },
}

impl Outcomes {
    /// The `max_delay` of `deferred` when none is given.
    pub const DEFAULT_MAX_DELAY: Duration = Duration::from_millis(10);

    pub(super) fn durability(self) -> Durability {
        match self {
            Outcomes::Durable => Durability::Durable,
            Outcomes::Deferred { max_delay } => Durability::Deferred(max_delay),
        }
    }

    /// `durable` or `deferred`, as `parse` and the spans (`warden.outcomes`) spell it.
    pub fn name(self) -> &'static str {
        match self {
            Outcomes::Durable => "durable",
            Outcomes::Deferred { .. } => "deferred",
        }
    }

    /// `durable`, or `deferred` with `max_delay_ms` (default 10, at most 60 000).
    pub fn parse(name: &str, max_delay_ms: Option<u64>) -> Result<Outcomes> {
        match (name, max_delay_ms) {
            ("durable", None) => Ok(Outcomes::Durable),
            ("durable", Some(_)) => Err(Error::invalid_at(
                InvalidInputKind::Conflict,
                "max_delay_ms",
                "max_delay_ms applies only to outcomes \"deferred\"",
            )),
            ("deferred", delay) => {
                let millis = delay.unwrap_or(Self::DEFAULT_MAX_DELAY.as_millis() as u64);
                if !(1..=60_000).contains(&millis) {
                    return Err(Error::invalid_at(
                        InvalidInputKind::OutOfRange,
                        "max_delay_ms",
                        format!("max_delay_ms must be 1..=60000, got {millis}"),
                    ));
                }
                Ok(Outcomes::Deferred { max_delay: Duration::from_millis(millis) })
            }
            (other, _) => Err(Error::invalid_at(
                InvalidInputKind::Malformed,
                "outcomes",
                format!("outcomes must be \"durable\" or \"deferred\", got {other:?}"),
            )),
        }
    }
}

/// How a kernel is opened.
#[derive(Debug, Clone)]
pub struct KernelOptions {
    /// Where the kernel reads the time.
    pub clock: Arc<dyn Clock>,
    /// Recorded on every receipt: the policy in force.
    pub policy_hash: Option<String>,
    /// The document's `version`, recorded on every receipt with the policy hash.
    pub policy_version: Option<String>,
    /// The one environment this kernel acts in; an action from another is refused. `None`:
    /// `$WARDEN_ENVIRONMENT`, else `production`.
    pub environment: Option<String>,
    /// When outcomes are durable.
    pub outcomes: Outcomes,
    /// How the store file is opened (the wait bound, read-only).
    pub store: StoreOptions,
    /// The bounds on inputs (names, arguments, results, messages).
    pub limits: crate::limits::Limits,
}

impl Default for KernelOptions {
    fn default() -> Self {
        KernelOptions {
            clock: Arc::new(SystemClock),
            policy_hash: None,
            policy_version: None,
            environment: None,
            outcomes: Outcomes::Durable,
            store: StoreOptions::default(),
            limits: crate::limits::Limits::default(),
        }
    }
}

/// The environment a kernel acts in: the argument, then `$WARDEN_ENVIRONMENT`, then the
/// document's, then `production`.
pub fn resolve_environment(argument: Option<&str>, document: Option<&str>) -> String {
    argument
        .map(str::to_owned)
        .or_else(|| std::env::var("WARDEN_ENVIRONMENT").ok().filter(|e| !e.is_empty()))
        .or_else(|| document.map(str::to_owned))
        .unwrap_or_else(|| crate::limits::DEFAULT_ENVIRONMENT.to_owned())
}

/// What the pipeline asks the kernel to do with one action, with the ruling it decided.
#[derive(Debug, Clone)]
pub struct Proposal<'a> {
    /// The action, normalized by the pipeline.
    pub action: &'a Action,
    /// What the pipeline decided; the kernel trusts it as given.
    pub ruling: Ruling,
    /// The effect-key template. `None`: the action has no effect to protect (a read); it runs
    /// with no reservation but still leaves a receipt.
    pub effect: Option<&'a Template>,
    /// The most attempts the effect key allows; `None` is no ceiling.
    pub max_attempts: Option<u32>,
    /// Lease in microseconds; `None` is the default five minutes.
    pub lease: Option<Micros>,
    /// A granted approval presented for this exact action.
    pub approval_id: Option<&'a str>,
    /// How long a new approval request stays answerable; `None` is fifteen minutes.
    pub approval_ttl: Option<Micros>,
    /// Observe mode: record what enforce mode would have done, and let the action run.
    pub observe: bool,
    /// What the authority axis decided, when the document has an `authority:` section.
    pub authority: Option<AuthorityStamp>,
    /// For an `approve` decision: how many approvers with which roles, the rule's `when`, the
    /// requester's verified identity.
    pub ask: crate::approval::ApprovalAsk,
    /// The precondition fingerprint taken for this call (`approval::precondition`).
    pub precondition: Option<String>,
    /// The call's W3C trace context (`receipt::is_traceparent`), recorded on its receipts.
    pub traceparent: Option<&'a str>,
    /// Where the host records the call's span (`telemetry`); `None` records nothing.
    pub trace: Option<&'a Arc<crate::telemetry::ActionTrace>>,
}

impl<'a> Proposal<'a> {
    /// A proposal of `action` under `ruling`: no effect, no approval, enforce mode, and every other
    /// option at its default.
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
            authority: None,
            ask: crate::approval::ApprovalAsk::default(),
            precondition: None,
            traceparent: None,
            trace: None,
        }
    }
}

pub(super) struct Inner {
    pub(super) store: KernelStore,
    pub(super) clock: Arc<dyn Clock>,
    /// How operations read their clock inside the store's transaction.
    pub(super) now: Now,
    /// Lock-free: checked on every call, also in a forked child where a lock could be held by
    /// a thread that no longer exists.
    pub(super) poisoned: OnceLock<String>,
    pub(super) policy_hash: Option<String>,
    pub(super) policy_version: Option<String>,
    pub(super) environment: String,
    pub(super) outcomes: Outcomes,
    pub(super) limits: crate::limits::Limits,
    /// Told of each approval request this handle creates (`approvals::set_approval_listener`).
    pub(super) approval_listener: std::sync::RwLock<Option<ApprovalListener>>,
}

crate::private_outside! {
    /// A handle on one store. Cheap to clone; clones share the poisoned latch.
    ///
    /// Outside the crate a release build offers no way to hand the kernel a ruling, nor to reach
    /// its store (these fail to compile; a `test-exports` build reaches the same internals
    /// through `warden::test_support`, and compiles each line below with the test-support
    /// path that follows it):
    ("fn f(k: &warden::Kernel, p: &warden::Proposal<'_>) { let _ = k.propose(p); }", "E0624",
        "use warden::test_support::KernelInternals as _;\nfn f(k: &warden::Kernel, p: &warden::Proposal<'_>) { let _ = k.propose(p); }"),
    ("fn f(k: &warden::Kernel) { let _ = k.store(); }", "E0624",
        "use warden::test_support::KernelInternals as _;\nfn f(k: &warden::Kernel) { let _ = k.store(); }"),
    ("fn f(k: &warden::Kernel) { let _ = k.force_panic(); }", "E0624",
        "use warden::test_support::KernelInternals as _;\nfn f(k: &warden::Kernel) { let _ = k.force_panic(); }"),
    ("use warden::store::WriteTx;", "E0603", "use warden::test_support::WriteTx;");
    #[derive(Clone)]
    pub struct Kernel {
        pub(super) inner: Arc<Inner>,
    }
}

impl std::fmt::Debug for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kernel").field("store", &self.inner.store).finish()
    }
}

impl Kernel {
    /// Open the store at `path`, creating it only if no file exists there.
    pub fn open(path: impl AsRef<Path>, options: KernelOptions) -> Result<Kernel> {
        let store = Store::open(path, options.store.clone())?;
        let now = if options.clock.is_system() { Now::System } else { Now::Clock(options.clock.clone()) };
        Ok(Kernel {
            inner: Arc::new(Inner {
                store,
                clock: options.clock,
                now,
                poisoned: OnceLock::new(),
                policy_hash: options.policy_hash,
                policy_version: options.policy_version,
                environment: resolve_environment(options.environment.as_deref(), None),
                outcomes: options.outcomes,
                limits: options.limits,
                approval_listener: std::sync::RwLock::new(None),
            }),
        })
    }

    /// The store under this kernel: crate-private, for the kernel's own modules (and, through
    /// `crate::test_support` in a `test-exports` build, tests that inspect or damage raw rows).
    pub(crate) fn store(&self) -> &KernelStore {
        &self.inner.store
    }

    /// The path of the store file this handle opened.
    pub fn store_path(&self) -> &Path {
        self.inner.store.path()
    }

    /// For a PostgreSQL store, the database's clock minus this host's in microseconds, measured
    /// at open (`warden doctor` shows it); `None` for a file.
    pub fn clock_skew(&self) -> Option<Micros> {
        self.inner.store.clock_skew()
    }

    /// The bounds this handle enforces on its inputs.
    pub fn limits(&self) -> &crate::limits::Limits {
        &self.inner.limits
    }

    /// When this handle's outcomes are durable.
    pub fn outcomes(&self) -> Outcomes {
        self.inner.outcomes
    }

    /// Refuse a handle used in a forked child. Lock-free; touches nothing.
    pub fn check_fork(&self) -> Result<()> {
        self.inner.store.check_fork()
    }

    /// Apply one write durably and return its reply.
    pub(crate) fn write(&self, op: ops::Write) -> Result<ops::WriteReply> {
        self.write_counted(op).map(|(reply, _)| reply)
    }

    /// `write`, and how many writes its commit carried (`Written::together`).
    pub(crate) fn write_counted(&self, op: ops::Write) -> Result<(ops::WriteReply, u32)> {
        let written = self.inner.store.write(op, &self.inner.now, Durability::Durable)?;
        let reply = written
            .reply
            .ok_or_else(|| Error::store(StoreFaultKind::Defect, "the store returned no answer for a durable write"))?;
        Ok((reply, written.together))
    }

    /// Apply an outcome with this handle's outcome durability; no reply when deferred.
    pub(crate) fn write_outcome(&self, op: ops::Write) -> Result<crate::store::Written<ops::WriteReply>> {
        self.inner.store.write(op, &self.inner.now, self.inner.outcomes.durability())
    }

    pub(crate) fn read(&self, op: &ops::Read) -> Result<ops::ReadReply> {
        self.inner.store.read(op, &self.inner.now)
    }

    /// Make this process's deferred outcomes durable now.
    pub fn flush(&self) -> Result<()> {
        self.guarded(|kernel, _| kernel.inner.store.flush())
    }

    /// The one environment this handle acts in.
    pub fn environment(&self) -> &str {
        &self.inner.environment
    }

    /// The current instant by this handle's clock.
    pub fn now(&self) -> Micros {
        self.inner.clock.now()
    }

    /// `Some(reason)` once a fault or panic latched this handle closed.
    pub fn poisoned(&self) -> Option<String> {
        self.inner.poisoned.get().cloned()
    }

    pub(super) fn latch(&self, reason: &str) {
        let _ = self.inner.poisoned.set(reason.to_owned());
    }

    /// Runs one operation: refuses a handle from before a fork (first, before anything that
    /// could wait on a lock), refuses on a poisoned handle, turns a panic into `Error::Panic`,
    /// and latches the handle on any store fault or panic.
    pub(crate) fn guarded<T>(&self, work: impl FnOnce(&Kernel, Micros) -> Result<T>) -> Result<T> {
        self.check_fork()?;
        if let Some(reason) = self.poisoned() {
            return Err(Error::Poisoned(reason));
        }
        let now = self.inner.clock.now();
        let outcome = match catch_unwind(AssertUnwindSafe(|| work(self, now))) {
            Ok(outcome) => outcome,
            Err(payload) => Err(Error::Panic(crate::error::panic_text(payload.as_ref()))),
        };
        if let Err(error) = &outcome {
            if error.poisons() {
                self.latch(&error.to_string());
            }
        }
        outcome
    }

    /// Test support (`crate::test_support`): latch the handle as if a panic had happened inside it.
    #[allow(dead_code)] // only tests call it
    pub(crate) fn force_panic(&self) -> Result<()> {
        self.guarded(|_, _| -> Result<()> { panic!("forced panic for a test") })
    }
}

/// Shorthand for tests and the CLI: a principal from two strings.
pub fn principal(agent: &str, user: Option<&str>) -> Result<Principal> {
    Principal::new(agent, user).map_err(Error::from)
}

/// A kernel handle that does not keep the store open (for a notifier's worker thread).
#[derive(Clone, Debug)]
pub struct WeakKernel(pub(super) Weak<Inner>);

impl WeakKernel {
    /// The kernel again, while any handle on it still keeps the store open.
    pub fn upgrade(&self) -> Option<Kernel> {
        self.0.upgrade().map(|inner| Kernel { inner })
    }
}
