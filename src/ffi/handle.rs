//! `warden_handle`: one open store, optionally governed by a configuration document.

use std::path::Path;
use std::sync::{Arc, RwLock};

use crate::error::Error;
use crate::kernel::{Kernel, KernelOptions};
use crate::pipeline::{Warden, WardenOptions};
use crate::sight::credentials::{CredentialProvider, DirectoryProvider, EnvProvider};

use super::bytes::{optional_json, optional_str, required_str, warden_buf, Out};
use super::panic::{fallible, infallible, Latch};
use super::request::Fields;
use super::result::warden_result;

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
}

// The header promises that one handle may be used from many threads at once.
const _: fn() = || {
    fn shared_across_threads<T: Send + Sync>() {}
    shared_across_threads::<warden_handle>();
};

impl warden_handle {
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
        let handle = unsafe { h.as_ref() }
            .ok_or_else(|| Error::InvalidInput("h (the handle) is NULL, and it is required".into()))?;
        handle.latch.guard(|| work(handle))
    };
    // SAFETY: the caller's guarantee for `err`, forwarded.
    unsafe { fallible(err, work) }
}

fn open(
    store: &str,
    config: Option<&str>,
    environment: Option<String>,
    credentials_dir: Option<&str>,
) -> Result<warden_handle, Error> {
    if store.is_empty() {
        return Err(Error::InvalidInput("store must be a non-empty path".into()));
    }
    let (kernel, warden) = match config {
        Some("") => return Err(Error::InvalidInput("config must be a non-empty path, or absent".into())),
        Some(config) => {
            let warden = Warden::open_files(
                store,
                Path::new(config),
                WardenOptions { environment, ..WardenOptions::default() },
            )?;
            (warden.kernel().clone(), Some(warden))
        }
        None => (Kernel::open(store, KernelOptions { environment, ..KernelOptions::default() })?, None),
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
    Ok(warden_handle {
        kernel,
        warden,
        latch: Arc::default(),
        credentials: RwLock::new(default_credentials.clone()),
        default_credentials,
    })
}

/// Opens (creating if needed) the store at `store`, governed by the configuration document at
/// `config`.
///
/// - `store`, `store_len`: the store file's path, UTF-8. Required.
/// - `config`, `config_len`: the path of a `warden/v1` (or ctrlrun) YAML document, UTF-8.
///   Optional (NULL, 0): without one only the kernel-level calls work, and `warden_propose`
///   returns WARDEN_RESULT_CONFIG.
/// - `options_json`, `options_len`: optional JSON `{"environment": "staging",
///   "credentials_dir": "/run/credentials/app"}`; the environment is, in order, this option,
///   `$WARDEN_ENVIRONMENT`, the document's, "production". `credentials_dir` makes sights read
///   each credential reference from the file of that name in the directory (systemd
///   credentials, container secrets) instead of from environment variables.
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
        let (environment, credentials_dir) = match &options {
            Some(options) => {
                let fields = Fields::new(options, "options_json", &["credentials_dir", "environment"])?;
                (fields.string("environment")?.map(str::to_owned), fields.string("credentials_dir")?)
            }
            None => (None, None),
        };
        let handle = open(store, config, environment, credentials_dir)?;
        // SAFETY: `out` was checked non-NULL and the caller guarantees it is writable.
        unsafe { out.write(Box::into_raw(Box::new(handle))) };
        Ok(())
    };
    // SAFETY: the caller's guarantee for `err`, forwarded.
    unsafe { fallible(err, work) }
}

/// Closes a handle. NULL is a no-op.
///
/// Ownership: takes the handle back; it is invalid afterwards. Permits it issued stay usable
/// (each keeps the store open until it is freed). Closing and reopening is also how a poisoned
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
    })
}
