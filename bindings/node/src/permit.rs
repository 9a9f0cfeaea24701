//! `Permit`: the right to run one action once, and the one outcome it reports.
//!
//! The outcome calls take the permit out of its slot, report, and free it, all on the thread
//! pool; a second outcome finds the slot empty. The library stores any result it is handed (as
//! itself, or marked), so a commit is never refused for its result. A permit released or
//! garbage-collected without an outcome is freed, which the library records as AMBIGUOUS.

use std::sync::{Arc, Mutex};

use napi::bindgen_prelude::{AsyncTask, Buffer};
use napi_derive::napi;

use crate::call::{bytes, output, status, unsigned, Blocking, CallResult, Failure};
use crate::ffi::{self, WardenPermit};
use crate::handle::HandlePtr;

/// An owned `warden_permit`, freed on drop, keeping its handle open while it lives.
pub struct PermitPtr {
    raw: *mut WardenPermit,
    _handle: Arc<HandlePtr>,
}

// SAFETY: a warden_permit may move between threads; it is never used from two at once because
// every use goes through the Mutex in `Permit::slot` (or owns the PermitPtr outright).
unsafe impl Send for PermitPtr {}

impl PermitPtr {
    pub fn new(raw: *mut WardenPermit, handle: Arc<HandlePtr>) -> PermitPtr {
        PermitPtr { raw, _handle: handle }
    }

    /// The permit JSON (`warden_permit_info`).
    pub fn info(&self) -> CallResult<String> {
        // SAFETY: `raw` is a live permit owned by self; out and err point at locals.
        output(|out, err| unsafe { ffi::warden_permit_info(self.raw, out, err) })
    }
}

impl Drop for PermitPtr {
    fn drop(&mut self) {
        // SAFETY: `raw` came from warden_propose and is freed exactly once, here, before the
        // handle reference it holds is released.
        unsafe { ffi::warden_permit_free(self.raw) };
    }
}

/// What a permit reports.
pub enum Outcome {
    Commit(String),
    /// A large result's JSON in UTF-8 pieces, joined on the thread pool.
    CommitPieces(Vec<Buffer>),
    /// A result with no JSON form, described as text.
    CommitText(String),
    /// The function never ran: the library's NOT_EXECUTED.
    Cancel,
    NotExecuted(String),
    Ambiguous(String),
}

#[napi]
pub struct Permit {
    slot: Arc<Mutex<Option<PermitPtr>>>,
    info: String,
}

impl Permit {
    pub fn new(permit: PermitPtr, info: String) -> Permit {
        Permit { slot: Arc::new(Mutex::new(Some(permit))), info }
    }
}

#[napi]
impl Permit {
    /// The permit JSON as it was when the permit was granted.
    #[napi(getter)]
    pub fn info(&self) -> String {
        self.info.clone()
    }

    /// The executor succeeded; `result_json` is stored with the effect.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn commit(&self, result_json: String) -> AsyncTask<Blocking<()>> {
        self.report(Outcome::Commit(result_json))
    }

    /// `commit` for a large result whose JSON arrives as UTF-8 pieces (written between turns
    /// of the event loop): they are joined here, on the thread pool, not on the loop.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn commit_pieces(&self, pieces: Vec<Buffer>) -> AsyncTask<Blocking<()>> {
        self.report(Outcome::CommitPieces(pieces))
    }

    /// The executor succeeded with a result that has no JSON form; `text` describes it.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn commit_text(&self, text: String) -> AsyncTask<Blocking<()>> {
        self.report(Outcome::CommitText(text))
    }

    /// The function will not run (its caller left): the library records NOT_EXECUTED.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn cancel(&self) -> AsyncTask<Blocking<()>> {
        self.report(Outcome::Cancel)
    }

    /// The executor proved the remote side did nothing: FAILED, and a retry may renew.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn not_executed(&self, message: String) -> AsyncTask<Blocking<()>> {
        self.report(Outcome::NotExecuted(message))
    }

    /// The outcome is unknown: AMBIGUOUS until a human resolves it.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn ambiguous(&self, message: String) -> AsyncTask<Blocking<()>> {
        self.report(Outcome::Ambiguous(message))
    }

    /// Extend this attempt's lease by `lease_ms` from now; resolves to the permit JSON after.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn extend_lease(&self, lease_ms: i64) -> AsyncTask<Blocking<String>> {
        let slot = self.slot.clone();
        AsyncTask::new(Blocking::new(move || {
            let lease_ms = unsigned("the lease", lease_ms)?;
            let slot = slot.lock().map_err(|_| Failure::poisoned("permit's"))?;
            let permit = slot.as_ref().ok_or_else(finished)?;
            // SAFETY: the slot's lock is held, so this thread alone uses the live permit.
            status(|err| unsafe { ffi::warden_permit_extend_lease(permit.raw, lease_ms, err) })?;
            permit.info()
        }))
    }

    /// Whether an outcome was reported (or is being reported).
    #[napi(getter)]
    pub fn finished(&self) -> bool {
        self.slot.lock().map(|slot| slot.is_none()).unwrap_or(true)
    }

    /// Free the permit now; idempotent. Without an outcome the library records AMBIGUOUS.
    #[napi]
    pub fn release(&self) {
        let taken = self.slot.lock().map(|mut slot| slot.take()).unwrap_or(None);
        drop(taken);
    }
}

impl Permit {
    /// Report `outcome` on the thread pool: the permit is taken out of its slot, reported on
    /// and freed (spent even when the report is refused).
    fn report(&self, outcome: Outcome) -> AsyncTask<Blocking<()>> {
        let slot = self.slot.clone();
        AsyncTask::new(Blocking::new(move || {
            let permit = slot.lock().map_err(|_| Failure::poisoned("permit's"))?.take().ok_or_else(finished)?;
            // A large result's pieces, joined here on the pool thread. The Buffers were made by
            // index.js for this call alone, and nothing on the JavaScript side writes them.
            let joined: Vec<u8> = match &outcome {
                Outcome::CommitPieces(pieces) => {
                    let mut joined = Vec::with_capacity(pieces.iter().map(|piece| piece.len()).sum());
                    pieces.iter().for_each(|piece| joined.extend_from_slice(piece));
                    joined
                }
                _ => Vec::new(),
            };
            // SAFETY: `permit.raw` is live and owned here (taken out of the slot, so no other
            // thread can reach it); each message borrows a String owned by the task, or
            // `joined`, a local that outlives the call; err is a local of `status`.
            status(|err| unsafe {
                match &outcome {
                    Outcome::Commit(json) => {
                        let (p, l) = bytes(json);
                        ffi::warden_permit_commit(permit.raw, p, l, err)
                    }
                    Outcome::CommitPieces(_) => {
                        ffi::warden_permit_commit(permit.raw, joined.as_ptr(), joined.len(), err)
                    }
                    Outcome::CommitText(text) => {
                        let (p, l) = bytes(text);
                        ffi::warden_permit_commit_text(permit.raw, p, l, err)
                    }
                    Outcome::Cancel => ffi::warden_permit_cancel(permit.raw, err),
                    Outcome::NotExecuted(message) => {
                        let (p, l) = bytes(message);
                        ffi::warden_permit_not_executed(permit.raw, p, l, err)
                    }
                    Outcome::Ambiguous(message) => {
                        let (p, l) = bytes(message);
                        ffi::warden_permit_ambiguous(permit.raw, p, l, err)
                    }
                }
            })
            // Reported (or refused for good): `permit` is spent and freed either way.
        }))
    }
}

fn finished() -> Failure {
    Failure::invalid("this permit already reported its outcome; a permit reports exactly one")
}
