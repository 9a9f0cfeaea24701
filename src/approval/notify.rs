//! Telling someone that an approval request is waiting: the host's hook and the signed webhook.
//!
//! The process whose proposal created a request notifies once per new request (a re-proposal
//! that finds the request still pending creates none, so notifies none). Nothing here runs on
//! the caller's thread: each channel has one worker thread and a bounded queue, so a slow hook
//! or a hanging webhook never delays an action, and a failure never fails one. What happened to
//! each notification is recorded as an event on the request (`APPROVAL_NOTIFIED`,
//! `APPROVAL_NOTIFY_FAILED`), never with the secret.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, RwLock};

use serde_json::{json, Value};

use super::webhook::{backoff, console_link, deliver, Delivery, NotifyConfig, WebhookConfig};
use super::ApprovalRecord;
use crate::clock::Clock as _;
use crate::event::EventKind;
use crate::sight::credentials::{CredentialProvider, EnvProvider};

/// Requests waiting for a channel's worker; past it a notification is dropped (and recorded).
pub const QUEUE_DEPTH: usize = 1024;
/// The longest error text an event keeps.
const ERROR_CHARS: usize = 300;

/// The host's hook: given the request JSON; `Err` is a failure to record (its text bounded).
pub type Hook = Arc<dyn Fn(&Value) -> Result<(), String> + Send + Sync>;

/// Where the notifier writes its events (the kernel, as events on the request).
pub trait Recorder: Send + Sync {
    /// Record a notification event on request `approval_id`.
    fn record(&self, approval_id: &str, kind: EventKind, data: Value);
}

struct Job {
    approval_id: String,
    body: Value,
}

struct Shared {
    hook: RwLock<Option<Hook>>,
    /// Held while the hook runs, so replacing the hook can wait for a call in progress.
    hook_running: Mutex<()>,
    webhook: Option<WebhookConfig>,
    /// `notify.console_url`: each notification's `link` is the console's page for its request.
    console_url: Option<url::Url>,
    credentials: RwLock<Arc<dyn CredentialProvider>>,
    recorder: Arc<dyn Recorder>,
}

/// One handle's notification channels.
pub struct Notifier {
    shared: Arc<Shared>,
    hook_queue: Mutex<Option<SyncSender<Job>>>,
    webhook_queue: Mutex<Option<SyncSender<Job>>>,
}

impl std::fmt::Debug for Notifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notifier").field("webhook", &self.shared.webhook.as_ref().map(|w| w.url.as_str())).finish()
    }
}

fn bounded(text: &str) -> String {
    let line: String = text.chars().map(|c| if c.is_control() { ' ' } else { c }).take(ERROR_CHARS).collect();
    line.trim().to_owned()
}

impl Notifier {
    /// A notifier for the document's `notify` section (its webhook and console link, if any)
    /// and no hook yet.
    pub fn new(config: Option<NotifyConfig>, recorder: Arc<dyn Recorder>) -> Notifier {
        let NotifyConfig { webhook, console_url } = config.unwrap_or_default();
        Notifier {
            shared: Arc::new(Shared {
                hook: RwLock::new(None),
                hook_running: Mutex::new(()),
                webhook,
                console_url,
                credentials: RwLock::new(Arc::new(EnvProvider)),
                recorder,
            }),
            hook_queue: Mutex::new(None),
            webhook_queue: Mutex::new(None),
        }
    }

    /// Set (or with `None` remove) the host's hook. Requests already queued go to whichever
    /// hook is set when their turn comes. Returns once a call of the previous hook that was in
    /// progress has finished, so the host may free it; must not be called from inside the hook.
    pub fn set_hook(&self, hook: Option<Hook>) {
        if let Ok(mut slot) = self.shared.hook.write() {
            *slot = hook;
        }
        drop(self.shared.hook_running.lock());
    }

    /// Where the webhook's `secret_ref` is resolved (the handle's sight credential provider).
    pub fn set_credentials(&self, provider: Arc<dyn CredentialProvider>) {
        if let Ok(mut slot) = self.shared.credentials.write() {
            *slot = provider;
        }
    }

    /// The webhook the document configured, if any.
    pub fn webhook(&self) -> Option<&WebhookConfig> {
        self.shared.webhook.as_ref()
    }

    /// A new request was created by this process: queue it for each channel. Never blocks on a
    /// channel and never fails.
    pub fn requested(&self, record: &ApprovalRecord) {
        let hooked = self.shared.hook.read().map(|slot| slot.is_some()).unwrap_or(false);
        if !hooked && self.shared.webhook.is_none() {
            return;
        }
        let mut body = record.to_json();
        let link = self.shared.console_url.as_ref().and_then(|url| console_link(url, &record.approval_id));
        if let (Some(link), Some(fields)) = (link, body.as_object_mut()) {
            fields.insert("link".to_owned(), Value::String(link));
        }
        if hooked {
            self.enqueue(&self.hook_queue, "hook", &record.approval_id, body.clone(), run_hook);
        }
        if self.shared.webhook.is_some() {
            self.enqueue(&self.webhook_queue, "webhook", &record.approval_id, body, run_webhook);
        }
    }

    fn enqueue(
        &self,
        queue: &Mutex<Option<SyncSender<Job>>>,
        channel: &'static str,
        approval_id: &str,
        body: Value,
        work: fn(&Shared, Job),
    ) {
        let job = Job { approval_id: approval_id.to_owned(), body };
        let refused = match queue.lock() {
            Ok(mut slot) => {
                let sender = match slot.as_ref() {
                    Some(sender) => Some(sender.clone()),
                    None => match start_worker(Arc::clone(&self.shared), channel, work) {
                        Ok(sender) => {
                            *slot = Some(sender.clone());
                            Some(sender)
                        }
                        Err(error) => {
                            self.failed(approval_id, channel, &format!("no worker thread: {error}"));
                            None
                        }
                    },
                };
                match sender.map(|sender| sender.try_send(job)) {
                    None | Some(Ok(())) => None,
                    Some(Err(TrySendError::Full(_))) => {
                        Some(format!("{QUEUE_DEPTH} notifications already waiting; this one was dropped"))
                    }
                    Some(Err(TrySendError::Disconnected(_))) => {
                        *slot = None;
                        Some("the notification worker stopped; this one was dropped".to_owned())
                    }
                }
            }
            Err(_) => Some("the notification queue was poisoned by an earlier panic".to_owned()),
        };
        if let Some(error) = refused {
            self.failed(approval_id, channel, &error);
        }
    }

    fn failed(&self, approval_id: &str, channel: &str, error: &str) {
        self.shared.recorder.record(
            approval_id,
            EventKind::APPROVAL_NOTIFY_FAILED,
            json!({"channel": channel, "error": bounded(error), "will_retry": false}),
        );
    }
}

fn start_worker(
    shared: Arc<Shared>,
    channel: &'static str,
    work: fn(&Shared, Job),
) -> std::io::Result<SyncSender<Job>> {
    let (sender, receiver): (SyncSender<Job>, Receiver<Job>) = sync_channel(QUEUE_DEPTH);
    std::thread::Builder::new().name(format!("warden-notify-{channel}")).spawn(move || {
        while let Ok(job) = receiver.recv() {
            let approval_id = job.approval_id.clone();
            if catch_unwind(AssertUnwindSafe(|| work(&shared, job))).is_err() {
                shared.recorder.record(
                    &approval_id,
                    EventKind::APPROVAL_NOTIFY_FAILED,
                    json!({"channel": channel, "error": "the notification panicked", "will_retry": false}),
                );
            }
        }
    })?;
    Ok(sender)
}

fn run_hook(shared: &Shared, job: Job) {
    let _running = shared.hook_running.lock();
    let hook = shared.hook.read().ok().and_then(|slot| slot.clone());
    let Some(hook) = hook else { return };
    let outcome = match catch_unwind(AssertUnwindSafe(|| hook(&job.body))) {
        Ok(outcome) => outcome,
        Err(_) => Err("the approval hook panicked".to_owned()),
    };
    if let Err(error) = outcome {
        shared.recorder.record(
            &job.approval_id,
            EventKind::APPROVAL_NOTIFY_FAILED,
            json!({"channel": "hook", "error": bounded(&error), "will_retry": false}),
        );
    }
}

fn run_webhook(shared: &Shared, job: Job) {
    let Some(config) = &shared.webhook else { return };
    // The approval record holds the action's arguments, which its document admitted.
    let body = match crate::canonical::to_canonical_string_with(&job.body, "", crate::canonical::Floats::ADMITTED) {
        Ok(text) => text.into_bytes(),
        Err(_) => serde_json::to_vec(&job.body).unwrap_or_default(),
    };
    for attempt in 1..=config.max_attempts {
        if attempt > 1 {
            std::thread::sleep(backoff(attempt));
        }
        let provider =
            shared.credentials.read().map(|slot| Arc::clone(&slot)).unwrap_or_else(|_| Arc::new(EnvProvider));
        let now = crate::clock::SystemClock.now() / crate::clock::MICROS_PER_SECOND;
        let outcome = deliver(config, provider.as_ref(), &body, now);
        let last = attempt == config.max_attempts;
        let (kind, data, done) = match outcome {
            Delivery::Delivered { status } => (
                EventKind::APPROVAL_NOTIFIED,
                json!({"channel": "webhook", "attempt": attempt, "status": status}),
                true,
            ),
            Delivery::GiveUp { error } => (
                EventKind::APPROVAL_NOTIFY_FAILED,
                json!({"channel": "webhook", "attempt": attempt, "error": bounded(&error), "will_retry": false}),
                true,
            ),
            Delivery::Retry { error } => (
                EventKind::APPROVAL_NOTIFY_FAILED,
                json!({"channel": "webhook", "attempt": attempt, "error": bounded(&error), "will_retry": !last}),
                last,
            ),
        };
        shared.recorder.record(&job.approval_id, kind, data);
        if done {
            return;
        }
    }
}
