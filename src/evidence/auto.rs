//! Automatic checkpoints: one background thread per handle whose document has an `evidence`
//! section signs the next checkpoint whenever one is due (`every_receipts` receipts or `every`
//! after the last one). It runs on its own commits, never on an action's: an action never waits
//! for it, and a failure (an unreadable key, a store fault) never fails one. Failures are kept
//! in [`Status`] and retried at the next wake; `warden doctor` reports a checkpoint that is
//! overdue. After each look it sends the document's anchors what waits for them
//! ([`super::anchoring`]), on commits of their own too.

use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::Duration;

use super::anchor::AnchorProvider;
use super::anchoring::{bounded, AnchorTry, Anchors, SinkProvider};
use super::checkpoint::StoredCheckpoint;
use super::key::NoteSigner;
use super::settings::{Due, EvidenceSettings, KeySource};
use crate::clock::{Micros, MICROS_PER_SECOND};
use crate::error::{Error, InvalidInputKind, Result};
use crate::sight::credentials::{CredentialProvider, EnvProvider};

/// The longest sleep between two looks at the log.
const WAKE_MAX: Duration = Duration::from_secs(1);

/// The log the worker checkpoints: the kernel, held weakly so the worker never keeps a store
/// open.
pub trait Log: Send + Sync + 'static {
    /// Sign the next checkpoint with `signer` if one is `due`; `None` once the store is closed.
    fn checkpoint_if_due(
        &self,
        signer: &NoteSigner,
        origin: Option<&str>,
        due: &Due,
    ) -> Option<Result<Option<StoredCheckpoint>>>;

    /// Send each sink the checkpoints waiting for it (`Kernel::anchor_pending`); `None` once
    /// the store is closed.
    fn anchor_pending(&self, providers: &[SinkProvider]) -> Option<Result<Vec<AnchorTry>>>;
}

/// What the worker has done since the handle opened.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Status {
    /// Checkpoints it signed.
    pub made: u64,
    /// The last checkpoint it signed: number and tree size.
    pub last: Option<(u64, u64)>,
    /// Why its last attempt failed, if it did; cleared by the next attempt that does not.
    pub error: Option<String>,
    /// Attempts that failed.
    pub failures: u64,
    /// Checkpoints anchored, by all sinks together.
    pub anchored: u64,
    /// Anchor tries that failed.
    pub anchor_failures: u64,
    /// The last anchor failure (`sink: message`); cleared by the next pass without one.
    pub anchor_error: Option<String>,
}

enum Signer {
    Loaded(Box<NoteSigner>),
    Reference(String),
}

struct Shared {
    signer: Signer,
    anchors: Anchors,
    /// The host's own anchors (`Checkpointer::add_anchor`), after the document's.
    hosted: RwLock<Vec<Arc<dyn AnchorProvider>>>,
    origin: Option<String>,
    due: Due,
    credentials: RwLock<Arc<dyn CredentialProvider>>,
    status: Mutex<Status>,
    /// Set when the handle goes: the worker stops at its next wake.
    stop: Mutex<bool>,
    wake: Condvar,
}

/// A handle's automatic checkpoints. Dropping it stops the worker and waits for it (in the
/// process that started it; a forked child never joins a thread it does not have).
pub struct Checkpointer {
    shared: Arc<Shared>,
    worker: Mutex<Option<JoinHandle<()>>>,
    started_in: u32,
}

impl std::fmt::Debug for Checkpointer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Checkpointer").field("due", &self.shared.due).finish_non_exhaustive()
    }
}

/// How long the worker sleeps between looks: `every`, at most a second.
fn wake_interval(every: Micros) -> Duration {
    let every = Duration::from_micros(u64::try_from(every.max(MICROS_PER_SECOND / 10)).unwrap_or(u64::MAX));
    every.min(WAKE_MAX)
}

impl Shared {
    /// The signing key: loaded at open, or resolved through the credential provider now. The
    /// error names the reference, never a value.
    fn with_signer<T>(&self, work: impl FnOnce(&NoteSigner) -> T) -> Result<T> {
        match &self.signer {
            Signer::Loaded(signer) => Ok(work(signer)),
            Signer::Reference(reference) => {
                let provider =
                    self.credentials.read().map(|slot| Arc::clone(&slot)).unwrap_or_else(|_| Arc::new(EnvProvider));
                let Some(line) = provider.resolve(reference) else {
                    return Err(Error::Config(format!(
                        "the evidence signing key {reference} is unavailable: {}",
                        provider.looked_in(reference)
                    )));
                };
                let signer = NoteSigner::parse(line.trim()).map_err(|_| {
                    Error::Config(format!(
                        "the evidence signing key {reference} is not a key written by `warden keygen` \
                         (one line, PRIVATE+KEY+NAME+ID+KEY)"
                    ))
                })?;
                Ok(work(&signer))
            }
        }
    }

    /// One look at the log; `false` once the store is closed.
    fn tick(&self, log: &dyn Log) -> bool {
        let outcome = self.with_signer(|signer| log.checkpoint_if_due(signer, self.origin.as_deref(), &self.due));
        let outcome = match outcome {
            Ok(None) => return false,
            Ok(Some(outcome)) => outcome,
            Err(error) => Err(error),
        };
        if let Ok(mut status) = self.status.lock() {
            match outcome {
                Ok(made) => {
                    if let Some(made) = made {
                        status.made += 1;
                        status.last = Some((made.number, made.size));
                    }
                    status.error = None;
                }
                Err(error) => {
                    status.failures += 1;
                    status.error = Some(bounded(&error.to_string()));
                }
            }
        }
        self.anchor(log)
    }

    /// One anchoring pass; `false` once the store is closed.
    fn anchor(&self, log: &dyn Log) -> bool {
        let hosted = self.hosted.read().map(|hosted| hosted.clone()).unwrap_or_default();
        if self.anchors.is_empty() && hosted.is_empty() {
            return true;
        }
        let credentials =
            self.credentials.read().map(|slot| Arc::clone(&slot)).unwrap_or_else(|_| Arc::new(EnvProvider));
        let mut providers = self.anchors.providers(&credentials);
        providers.extend(hosted.into_iter().map(|provider| (provider.name(), Ok(provider))));
        let Some(outcome) = log.anchor_pending(&providers) else { return false };
        if let Ok(mut status) = self.status.lock() {
            match outcome {
                Ok(tries) => {
                    status.anchor_error = None;
                    for tried in tries {
                        match tried.error {
                            None => status.anchored += 1,
                            Some(error) => {
                                status.anchor_failures += 1;
                                status.anchor_error = Some(bounded(&error.to_string()));
                            }
                        }
                    }
                }
                Err(error) => {
                    status.anchor_failures += 1;
                    status.anchor_error = Some(bounded(&format!("anchors: {error}")));
                }
            }
        }
        true
    }
}

impl Checkpointer {
    /// Start the worker for `settings` over `log`. A key file is read now and refused (with
    /// its path) if it cannot be; a key reference is resolved at each checkpoint.
    pub fn start(settings: &EvidenceSettings, log: impl Log) -> Result<Checkpointer> {
        let signer = match &settings.key {
            KeySource::File(path) => Signer::Loaded(Box::new(NoteSigner::load(path).map_err(|e| match e {
                Error::Config(why) => Error::Config(format!("the document's evidence.key_file cannot be used: {why}")),
                other => other,
            })?)),
            KeySource::Ref(reference) => Signer::Reference(reference.clone()),
        };
        let anchors = Anchors::load(&settings.anchors)?;
        let shared = Arc::new(Shared {
            signer,
            anchors,
            hosted: RwLock::new(Vec::new()),
            origin: settings.origin.clone(),
            due: settings.due,
            credentials: RwLock::new(Arc::new(EnvProvider)),
            status: Mutex::new(Status::default()),
            stop: Mutex::new(false),
            wake: Condvar::new(),
        });
        let worker = Arc::clone(&shared);
        let interval = wake_interval(settings.due.every);
        let handle = std::thread::Builder::new()
            .name("warden-checkpoints".into())
            .spawn(move || loop {
                {
                    let Ok(stopped) = worker.stop.lock() else { return };
                    let Ok((stopped, _)) = worker.wake.wait_timeout_while(stopped, interval, |stop| !*stop) else {
                        return;
                    };
                    if *stopped {
                        return;
                    }
                }
                let alive = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| worker.tick(&log)));
                match alive {
                    Ok(true) => {}
                    Ok(false) => return,
                    Err(_) => {
                        if let Ok(mut status) = worker.status.lock() {
                            status.failures += 1;
                            status.error = Some("the automatic checkpoint panicked".into());
                        }
                    }
                }
            })
            .map_err(|e| Error::Config(format!("cannot start the automatic checkpoint thread: {e}")))?;
        Ok(Checkpointer { shared, worker: Mutex::new(Some(handle)), started_in: std::process::id() })
    }

    /// Resolve a `key_ref` through `provider` from now on (the host's, as for sights).
    pub fn set_credentials(&self, provider: Arc<dyn CredentialProvider>) {
        if let Ok(mut slot) = self.shared.credentials.write() {
            *slot = provider;
        }
    }

    /// Send every checkpoint to `provider` too, after the document's anchors, until the handle
    /// closes. Its name must be new among this handle's sinks (a provider is never replaced, so
    /// one that was called may be freed only once the handle is closed).
    pub fn add_anchor(&self, provider: Arc<dyn AnchorProvider>) -> Result<()> {
        let name = provider.name();
        let mut hosted =
            self.shared.hosted.write().map_err(|_| Error::Config("the anchors' list was poisoned".into()))?;
        if self.shared.anchors.sinks().contains(&name) || hosted.iter().any(|other| other.name() == name) {
            return Err(Error::invalid_at(
                InvalidInputKind::Conflict,
                "name",
                format!("this handle already sends checkpoints to an anchor named {name:?}"),
            ));
        }
        hosted.push(provider);
        Ok(())
    }

    /// What the worker has done so far.
    pub fn status(&self) -> Status {
        self.shared.status.lock().map(|status| status.clone()).unwrap_or_default()
    }

    /// The bounds it checkpoints by.
    pub fn due(&self) -> Due {
        self.shared.due
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        if let Ok(mut stop) = self.shared.stop.lock() {
            *stop = true;
        }
        self.shared.wake.notify_all();
        let worker = self.worker.get_mut().ok().and_then(Option::take);
        if let Some(worker) = worker {
            if std::process::id() == self.started_in {
                let _ = worker.join();
            } else {
                // A forked child has no such thread to join.
                std::mem::forget(worker);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

    /// A log that is always due and counts the checkpoints asked for.
    #[derive(Default)]
    struct Counting {
        asked: AtomicU64,
        closed: AtomicBool,
        fail: AtomicBool,
    }

    impl Log for Arc<Counting> {
        fn checkpoint_if_due(
            &self,
            signer: &NoteSigner,
            _: Option<&str>,
            _: &Due,
        ) -> Option<Result<Option<StoredCheckpoint>>> {
            if self.closed.load(Ordering::SeqCst) {
                return None;
            }
            let n = self.asked.fetch_add(1, Ordering::SeqCst) + 1;
            if self.fail.load(Ordering::SeqCst) {
                return Some(Err(Error::store(crate::error::StoreFaultKind::NoSpace, "the disk is full")));
            }
            Some(Ok(Some(StoredCheckpoint {
                number: n,
                origin: "o".into(),
                size: n,
                root: String::new(),
                time: 0,
                note: String::new(),
                companion: String::new(),
                verifier: signer.verifier().encoded(),
            })))
        }

        fn anchor_pending(&self, _: &[SinkProvider]) -> Option<Result<Vec<AnchorTry>>> {
            Some(Ok(Vec::new()))
        }
    }

    fn settings(key: KeySource) -> EvidenceSettings {
        EvidenceSettings {
            key,
            origin: None,
            due: Due { every_receipts: 1, every: MICROS_PER_SECOND },
            anchors: Vec::new(),
        }
    }

    fn eventually(what: &str, check: impl Fn() -> bool) {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while !check() {
            assert!(std::time::Instant::now() < deadline, "never: {what}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[test]
    fn the_worker_checkpoints_reports_failures_and_stops_when_the_store_closes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k");
        NoteSigner::generate("test").unwrap().save(&path).unwrap();
        let log = Arc::new(Counting::default());
        let checkpointer = Checkpointer::start(&settings(KeySource::File(path)), Arc::clone(&log)).unwrap();
        eventually("a checkpoint", || checkpointer.status().made >= 1);
        log.fail.store(true, Ordering::SeqCst);
        eventually("a failure", || checkpointer.status().error.as_deref() == Some("store error: the disk is full"));
        log.fail.store(false, Ordering::SeqCst);
        eventually("the error cleared", || checkpointer.status().error.is_none());
        let status = checkpointer.status();
        assert!(status.failures >= 1 && status.made >= 2, "{status:?}");
        log.closed.store(true, Ordering::SeqCst);
        let asked = log.asked.load(Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(2_500));
        assert_eq!(log.asked.load(Ordering::SeqCst), asked, "the worker stopped once the store closed");
        drop(checkpointer);
    }

    #[test]
    fn a_key_file_is_refused_at_start_and_a_reference_is_resolved_at_each_checkpoint() {
        let missing = Checkpointer::start(
            &settings(KeySource::File("/nonexistent/evidence.key".into())),
            Arc::new(Counting::default()),
        )
        .expect_err("refused");
        let text = missing.to_string();
        assert!(text.contains("evidence.key_file") && text.contains("/nonexistent/evidence.key"), "{text}");

        struct One(String);
        impl CredentialProvider for One {
            fn resolve(&self, reference: &str) -> Option<zeroize::Zeroizing<String>> {
                (reference == "WARDEN_TEST_EVIDENCE_KEY").then(|| zeroize::Zeroizing::new(self.0.clone()))
            }
        }
        let log = Arc::new(Counting::default());
        let checkpointer =
            Checkpointer::start(&settings(KeySource::Ref("WARDEN_TEST_EVIDENCE_KEY".into())), Arc::clone(&log))
                .unwrap();
        eventually("the reference refused", || {
            checkpointer.status().error.is_some_and(|e| e.contains("WARDEN_TEST_EVIDENCE_KEY is unavailable"))
        });
        assert_eq!(log.asked.load(Ordering::SeqCst), 0, "nothing is signed without the key");
        checkpointer.set_credentials(Arc::new(One("s3cr3t-not-a-key".into())));
        eventually("a bad key refused", || {
            checkpointer.status().error.is_some_and(|e| e.contains("is not a key written by `warden keygen`"))
        });
        let error = checkpointer.status().error.unwrap_or_default();
        assert!(!error.contains("s3cr3t"), "the value is never shown: {error}");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k");
        NoteSigner::generate("test").unwrap().save(&path).unwrap();
        let line = std::fs::read_to_string(&path).unwrap();
        checkpointer.set_credentials(Arc::new(One(line)));
        eventually("a checkpoint", || checkpointer.status().made >= 1);
        assert!(checkpointer.status().error.is_none());
    }
}
