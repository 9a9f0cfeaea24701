//! `warden_handle`: one open store, optionally governed by a configuration document.

use std::path::Path;
use std::sync::{Arc, RwLock};

use crate::error::{Error, InvalidInput, InvalidInputKind};
use crate::kernel::{Kernel, KernelOptions, Outcomes};
use crate::pipeline::{Warden, WardenOptions};
use crate::sight::credentials::{CredentialProvider, DirectoryProvider, EnvProvider};

use super::bytes::{optional_json, optional_str, required_str, warden_buf, Out};
use super::panic::{fallible, Latch};
use super::request::Fields;
use super::result::warden_result;
use super::unwind::infallible;

/// An open store. Opaque: created by `warden_open`, freed by `warden_close`.
#[allow(non_camel_case_types)]
pub struct warden_handle {
    pub(super) kernel: Kernel,
    /// `None` when opened without a configuration document: only kernel-level calls work.
    warden: Option<Warden>,
    pub(super) latch: Arc<Latch>,
    /// Where sights resolve credential references: the environment, the `credentials_dir`
    /// given at open, or a host callback set with `warden_sight_credentials_set`.
    pub(super) credentials: RwLock<Arc<dyn CredentialProvider>>,
    /// The provider a NULL callback returns to.
    pub(super) default_credentials: Arc<dyn CredentialProvider>,
    /// Tells the host's hook (`warden_approval_notify_set`) and the document's webhook of each
    /// new approval request.
    pub(super) notifier: Arc<crate::approval::notify::Notifier>,
    /// The clock a test build opened this handle with (`{"clock": {"manual_ms": N}}`), moved by
    /// `warden_test_clock_set`.
    #[cfg(feature = "test-exports")]
    pub(super) manual_clock: Option<crate::clock::ManualClock>,
}

impl Drop for warden_handle {
    fn drop(&mut self) {
        // The host may free its hook once `warden_close` returns: stop calling it first.
        self.notifier.set_hook(None);
    }
}

// The header promises that one handle may be used from many threads at once.
const _: fn() = || {
    fn shared_across_threads<T: Send + Sync>() {}
    shared_across_threads::<warden_handle>();
};

impl warden_handle {
    /// Let the approval webhook's secret and the evidence key (named by reference) resolve
    /// through `provider`, as sight credentials do.
    pub(super) fn share_credentials(&self, provider: &Arc<dyn CredentialProvider>) {
        self.notifier.set_credentials(provider.clone());
        if let Some(checkpointer) = self.warden.as_ref().and_then(Warden::checkpointer) {
            checkpointer.set_credentials(provider.clone());
        }
    }

    pub(super) fn warden(&self) -> Result<&Warden, Error> {
        self.warden.as_ref().ok_or_else(|| {
            Error::Config(
                "this handle was opened without a configuration document, and proposing and sights need one; \
                 pass `config` to warden_open"
                    .into(),
            )
        })
    }

    /// The environment this handle acts in.
    pub(super) fn environment(&self) -> &str {
        self.kernel.environment()
    }
}

/// Runs one fallible export on a handle: refuses a NULL or poisoned handle, and latches the
/// handle poisoned when `work` panics.
///
/// # Safety
/// `h` is NULL or a live handle from `warden_open`; `err` is NULL or valid for one write.
pub(super) unsafe fn with_handle(
    h: *const warden_handle,
    err: *mut warden_buf,
    work: impl FnOnce(&warden_handle) -> Result<(), Error>,
) -> warden_result {
    let work = || -> Result<(), Error> {
        // SAFETY: the caller guarantees `h` is NULL or a live handle; handles are only ever
        // shared (`&`), never mutated, until `warden_close`.
        let handle = unsafe { h.as_ref() }.ok_or_else(|| {
            Error::invalid_at(InvalidInputKind::Missing, "h", "h (the handle) is NULL, and it is required")
        })?;
        // First, before anything that could take a lock: a handle from before a fork.
        handle.kernel.check_fork()?;
        handle.latch.guard(|| work(handle))
    };
    // SAFETY: the caller's guarantee for `err`, forwarded.
    unsafe { fallible(err, work) }
}

/// What `options_json` asks of `open`.
struct OpenOptions<'a> {
    environment: Option<String>,
    credentials_dir: Option<&'a str>,
    outcomes: Outcomes,
    /// What a returned write survives (a file store).
    durability: crate::store::Withstands,
    limits: crate::limits::Limits,
    /// A test build's manual clock; `None` is the system clock.
    manual_clock: Option<crate::clock::ManualClock>,
    /// What traced calls' spans may carry (`"telemetry"`).
    telemetry: crate::telemetry::Capture,
}

/// The option keys `warden_open` accepts: `clock` only in a `test-exports` build, so a release
/// library refuses it as an unknown key.
#[cfg(feature = "test-exports")]
const OPTION_KEYS: &[&str] =
    &["clock", "credentials_dir", "durability", "environment", "limits", "max_delay_ms", "outcomes", "telemetry"];
#[cfg(not(feature = "test-exports"))]
const OPTION_KEYS: &[&str] =
    &["credentials_dir", "durability", "environment", "limits", "max_delay_ms", "outcomes", "telemetry"];

/// `{"arguments": bool, "results": bool}`: what traced calls' spans may carry.
fn telemetry(value: Option<&serde_json::Value>) -> Result<crate::telemetry::Capture, Error> {
    let Some(value) = value else { return Ok(crate::telemetry::Capture::default()) };
    let fields = Fields::new(value, "options_json.telemetry", &["arguments", "results"])?;
    Ok(crate::telemetry::Capture { arguments: fields.flag("arguments")?, results: fields.flag("results")? })
}

/// `{"manual_ms": N}`: a clock that starts at N milliseconds since the epoch and moves only when
/// `warden_test_clock_set` moves it.
fn manual_clock(value: &serde_json::Value) -> Result<crate::clock::ManualClock, Error> {
    let shape = || {
        Error::invalid_at(
            InvalidInputKind::Malformed,
            "options_json.clock",
            "options_json.clock must be {\"manual_ms\": <milliseconds since the epoch>}",
        )
    };
    let map = value.as_object().filter(|map| map.len() == 1).ok_or_else(shape)?;
    let millis = map.get("manual_ms").and_then(serde_json::Value::as_u64).ok_or_else(shape)?;
    let micros = i64::try_from(millis).ok().and_then(|ms| ms.checked_mul(1000)).ok_or_else(shape)?;
    Ok(crate::clock::ManualClock::new(micros))
}

fn open(store: &str, config: Option<&str>, options: OpenOptions<'_>) -> Result<warden_handle, Error> {
    let OpenOptions { environment, credentials_dir, outcomes, durability, limits, manual_clock, telemetry } = options;
    let store_options = crate::store::StoreOptions { durability, ..crate::store::StoreOptions::default() };
    let clock: Arc<dyn crate::clock::Clock> = match &manual_clock {
        Some(clock) => Arc::new(clock.clone()),
        None => Arc::new(crate::clock::SystemClock),
    };
    if store.is_empty() {
        return Err(Error::invalid_at(InvalidInputKind::Missing, "store", "store must be a non-empty path"));
    }
    let (kernel, warden) = match config {
        Some("") => {
            return Err(Error::invalid_at(
                InvalidInputKind::Missing,
                "config",
                "config must be a non-empty path, or absent",
            ))
        }
        Some(config) => {
            let warden = Warden::open_files(
                store,
                Path::new(config),
                WardenOptions {
                    clock,
                    environment,
                    outcomes,
                    limits,
                    store: store_options,
                    automatic_checkpoints: true,
                    telemetry,
                },
            )?;
            (warden.kernel().clone(), Some(warden))
        }
        None => (
            Kernel::open(
                store,
                KernelOptions {
                    clock,
                    environment,
                    outcomes,
                    limits,
                    store: store_options,
                    ..KernelOptions::default()
                },
            )?,
            None,
        ),
    };
    let default_credentials: Arc<dyn CredentialProvider> = match credentials_dir {
        None => Arc::new(EnvProvider),
        Some(dir) => {
            if !Path::new(dir).is_dir() {
                return Err(Error::Config(format!(
                    "credentials_dir {dir:?} is not a directory; create it (one file per credential reference) or leave the option out to use environment variables"
                )));
            }
            Arc::new(DirectoryProvider { dir: dir.into() })
        }
    };
    let notifier = match &warden {
        Some(warden) => Arc::clone(warden.notifier()),
        None => crate::pipeline::notifier_for(&kernel, None),
    };
    let handle = warden_handle {
        kernel,
        warden,
        latch: Arc::default(),
        credentials: RwLock::new(default_credentials.clone()),
        default_credentials,
        notifier,
        #[cfg(feature = "test-exports")]
        manual_clock,
    };
    handle.share_credentials(&handle.default_credentials);
    Ok(handle)
}

/// Opens (creating if needed) the store at `store`, governed by the configuration document at
/// `config`.
///
/// - `store`, `store_len`: the store file's path, UTF-8. Required.
/// - `config`, `config_len`: the path of a `warden/v1` (or ctrlrun) YAML document, UTF-8.
///   Optional (NULL, 0): without one only the kernel-level calls work, and `warden_propose`
///   returns WARDEN_RESULT_CONFIG.
/// - `options_json`, `options_len`: optional JSON `{"environment": "staging",
///   "credentials_dir": "/run/credentials/app", "outcomes": "durable"|"deferred",
///   "max_delay_ms": 10, "durability": "power"|"process"}`; the environment is, in order, this option, `$WARDEN_ENVIRONMENT`,
///   the document's, "production". `credentials_dir` makes sights read each credential
///   reference from the file of that name in the directory (systemd credentials, container
///   secrets) instead of from environment variables. `outcomes` (default "durable"): with
///   "deferred", `warden_permit_commit`/`_not_executed`/`_ambiguous` return at once and the
///   outcome becomes durable with the store's next commit or within `max_delay_ms` (1–60000,
///   default 10), on `warden_flush` and on `warden_close`; a crash in that window leaves the
///   effect in flight, then AMBIGUOUS when its lease lapses — never FAILED, never run twice.
///   `durability` (default "power"; a file store): "power" syncs each batch's journal record
///   before returning, so nothing that returned is lost to a power loss or an OS crash;
///   "process" writes it unsynced: a crash of the process loses nothing, but a power loss or
///   an OS crash can lose the last writes — and then a reservation whose effect ran can be
///   forgotten. The owner's setting applies to every process of the store; a PostgreSQL store
///   refuses "process".
///   A library built with the test-only `test-exports` feature also takes `"clock":
///   {"manual_ms": N}`, a clock that starts at N ms since the epoch and moves only by the
///   test-only clock setter; a release library refuses the key.
///   `"telemetry": {"arguments": bool, "results": bool}` (both default false) lets the spans
///   of traced calls (`warden_propose_traced`) carry the tool call's arguments and its
///   committed result (with the host's message of a FAILED or AMBIGUOUS outcome), each
///   redacted and bounded as a sight's result is; without it a span carries Warden's own
///   identifiers and no argument or result value (docs/TELEMETRY.md).
///
/// `"limits"` (an object) overrides the bounds on inputs: `max_request_bytes` (the
/// `warden_propose` request, default 1 MiB), `max_name_bytes` (256), `max_arguments_bytes`
/// (canonical arguments, 256 KiB), `max_result_bytes` (a result stored whole, 1 MiB; above it
/// an excerpt and its SHA-256 are stored and the effect still commits), `max_message_bytes`
/// (an outcome message kept whole, 4 KiB; a longer one is cut and marked). Past a bound an
/// input is refused with WARDEN_RESULT_INVALID_INPUT naming the limit.
///
/// Several processes may open one store: the first becomes its owner and serves the others
/// over a Unix socket beside the store (`<store>.warden/`); when it closes or dies another
/// takes over. A handle must not be used in a child created by `fork()` after it was opened:
/// every call on it there returns WARDEN_RESULT_INVALID_INPUT and touches nothing; open a new
/// handle in the child.
/// - `out`: receives the new handle on WARDEN_RESULT_OK only. Required. The caller owns the
///   handle and frees it with `warden_close`.
/// - `err`: NULL, or receives an error object on failure (free it with `warden_buf_free`).
///
/// Returns WARDEN_RESULT_OK; WARDEN_RESULT_INVALID_INPUT (NULL `store` or `out`, invalid UTF-8,
/// bad options); WARDEN_RESULT_CONFIG (a document that is missing or invalid);
/// WARDEN_RESULT_STORE (the store cannot be opened, e.g. another process holds it).
/// Several handles on one store file in one process share it.
///
/// Thread safety: safe from any thread.
///
/// # Safety
/// Byte pointers follow the conventions at the top of this header; `out` is NULL or valid for
/// one write; `err` is NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn warden_open(
    store: *const u8,
    store_len: usize,
    config: *const u8,
    config_len: usize,
    options_json: *const u8,
    options_len: usize,
    out: *mut *mut warden_handle,
    err: *mut warden_buf,
) -> warden_result {
    let work = || -> Result<(), Error> {
        let out = Out::required(out, "out")?;
        // SAFETY: the caller's guarantee for each (ptr, len) pair.
        let store = unsafe { required_str(store, store_len, "store") }?;
        // SAFETY: as above.
        let config = unsafe { optional_str(config, config_len, "config") }?;
        // SAFETY: as above.
        let options = unsafe { optional_json(options_json, options_len, "options_json") }?;
        let options = match &options {
            Some(options) => {
                let fields = Fields::new(options, "options_json", OPTION_KEYS)?;
                let limits = match options.get("limits").filter(|v| !v.is_null()) {
                    None => crate::limits::Limits::default(),
                    Some(value) => crate::limits::Limits::from_json(value).map_err(under_options)?,
                };
                let outcomes = match (fields.string("outcomes")?, fields.unsigned("max_delay_ms")?) {
                    (None, None) => Outcomes::Durable,
                    (None, Some(_)) => {
                        return Err(Error::invalid_at(
                            InvalidInputKind::Conflict,
                            "options_json.max_delay_ms",
                            "options_json.max_delay_ms needs \"outcomes\": \"deferred\"",
                        ))
                    }
                    (Some(name), delay) => Outcomes::parse(name, delay).map_err(|e| {
                        let path = format!("options_json.{}", e.invalid_input_path().unwrap_or("outcomes"));
                        let kind = e.invalid_input_kind().unwrap_or(InvalidInputKind::Malformed);
                        Error::invalid_at(kind, path, format!("options_json.outcomes: {e}"))
                    })?,
                };
                let manual_clock = match options.get("clock").filter(|v| !v.is_null()) {
                    None => None,
                    Some(value) => Some(manual_clock(value)?),
                };
                let durability = match fields.string("durability")? {
                    None => crate::store::Withstands::Power,
                    Some(name) => crate::store::Withstands::parse(name).map_err(under_options)?,
                };
                OpenOptions {
                    environment: fields.string("environment")?.map(str::to_owned),
                    credentials_dir: fields.string("credentials_dir")?,
                    outcomes,
                    durability,
                    limits,
                    manual_clock,
                    telemetry: telemetry(fields.get("telemetry"))?,
                }
            }
            None => OpenOptions {
                environment: None,
                credentials_dir: None,
                outcomes: Outcomes::Durable,
                durability: crate::store::Withstands::Power,
                limits: crate::limits::Limits::default(),
                manual_clock: None,
                telemetry: crate::telemetry::Capture::default(),
            },
        };
        let handle = open(store, config, options)?;
        // SAFETY: `out` was checked non-NULL and the caller guarantees it is writable.
        unsafe { out.write(Box::into_raw(Box::new(handle))) };
        Ok(())
    };
    // SAFETY: the caller's guarantee for `err`, forwarded.
    unsafe { fallible(err, work) }
}

/// Closes a handle. NULL is a no-op. Deferred outcomes of this process are made durable first
/// (bounded by `WARDEN_WRITE_WAIT_MS`). In a child created by `fork()` after the handle was
/// opened, this frees nothing of the parent's (the memory is left, the descriptors were already
/// closed in the child).
///
/// Ownership: takes the handle back; it is invalid afterwards. Permits it issued stay usable
/// (each keeps the store open until it is freed). The approval hook is released first: when
/// this returns it is not running and will not be called again. Closing and reopening is also how a poisoned
/// handle is cleared.
///
/// Thread safety: no other thread may be using the handle, or use it afterwards.
///
/// # Safety
/// `handle` is NULL or a handle from `warden_open` not yet closed.
#[no_mangle]
pub unsafe extern "C" fn warden_close(handle: *mut warden_handle) {
    infallible((), || {
        if !handle.is_null() {
            // SAFETY: `handle` came from `Box::into_raw` in `warden_open`, and the caller gives
            // up every use of it.
            drop(unsafe { Box::from_raw(handle) });
        }
    });
}

/// Makes every deferred outcome of this process durable before returning (with outcomes
/// "durable" there is nothing to do). Bounded by `WARDEN_WRITE_WAIT_MS`.
///
/// - `h`: an open handle. Required.
/// - `err`: NULL, or receives the error object on failure.
///
/// Returns WARDEN_RESULT_OK; WARDEN_RESULT_STORE (the store could not confirm them in time:
/// those outcomes stay in flight and turn AMBIGUOUS when their leases lapse);
/// WARDEN_RESULT_INVALID_INPUT; WARDEN_RESULT_PANIC; WARDEN_RESULT_POISONED.
///
/// Thread safety: safe from any thread.
///
/// # Safety
/// `h` is NULL or a live handle; `err` is NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn warden_flush(h: *const warden_handle, err: *mut warden_buf) -> warden_result {
    // SAFETY: the caller's guarantees for `h` and `err`, forwarded.
    unsafe { with_handle(h, err, |handle| handle.kernel.flush()) }
}

/// An option's invalid input put under `options_json.`, in its message and its path; any
/// other error as it is.
fn under_options(error: Error) -> Error {
    match error {
        Error::InvalidInput(invalid) => {
            let path = invalid.path.as_deref().map_or("options_json".to_owned(), |path| format!("options_json.{path}"));
            Error::InvalidInput(InvalidInput { path: Some(path), ..invalid.prefixed("options_json.") })
        }
        other => other,
    }
}
