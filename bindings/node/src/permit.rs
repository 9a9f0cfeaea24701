//! `Permit`: the right to run one action once, and the one outcome it reports.
//!
//! The outcome calls take the permit out of its slot, report, and free it, all on the thread
//! pool; a second outcome finds the slot empty. The library stores any result it is handed (as
//! itself, or marked), so a commit is never refused for its result. A permit released or
//! garbage-collected without an outcome is freed, which the library records as AMBIGUOUS.

use std::sync::{Arc, Mutex};

use napi::bindgen_prelude::{AsyncTask, Buffer};
use napi::{Env, Task};
use napi_derive::napi;

use crate::call::{bytes, check, structured, take, unsigned, CallResult, Failure};
use crate::ffi::{self, WardenBuf, WardenPermit};
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
        let mut out = WardenBuf::empty();
        let mut err = WardenBuf::empty();
        // SAFETY: `raw` is a live permit owned by self; out and err point at locals.
        let code = unsafe { ffi::warden_permit_info(self.raw, &mut out, &mut err) };
        check(code, err)?;
        Ok(take(out))
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
    pub fn commit(&self, result_json: String) -> AsyncTask<Report> {
        self.report(Outcome::Commit(result_json))
    }

    /// `commit` for a large result whose JSON arrives as UTF-8 pieces (written between turns
    /// of the event loop): they are joined here, on the thread pool, not on the loop.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn commit_pieces(&self, pieces: Vec<Buffer>) -> AsyncTask<Report> {
        self.report(Outcome::CommitPieces(pieces))
    }

    /// The executor succeeded with a result that has no JSON form; `text` describes it.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn commit_text(&self, text: String) -> AsyncTask<Report> {
        self.report(Outcome::CommitText(text))
    }

    /// The function will not run (its caller left): the library records NOT_EXECUTED.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn cancel(&self) -> AsyncTask<Report> {
        self.report(Outcome::Cancel)
    }

    /// The executor proved the remote side did nothing: FAILED, and a retry may renew.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn not_executed(&self, message: String) -> AsyncTask<Report> {
        self.report(Outcome::NotExecuted(message))
    }

    /// The outcome is unknown: AMBIGUOUS until a human resolves it.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn ambiguous(&self, message: String) -> AsyncTask<Report> {
        self.report(Outcome::Ambiguous(message))
    }

    /// Extend this attempt's lease by `lease_ms` from now; resolves to the permit JSON after.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn extend_lease(&self, lease_ms: i64) -> AsyncTask<ExtendLease> {
        AsyncTask::new(ExtendLease { slot: self.slot.clone(), lease_ms })
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
    fn report(&self, outcome: Outcome) -> AsyncTask<Report> {
        AsyncTask::new(Report { slot: self.slot.clone(), outcome })
    }
}

fn finished() -> Failure {
    Failure::binding(
        "WARDEN_RESULT_INVALID_INPUT",
        "invalid_input",
        "this permit already reported its outcome; a permit reports exactly one",
    )
}

fn lock_poisoned() -> Failure {
    Failure::binding("WARDEN_RESULT_POISONED", "poisoned", "the permit's lock is poisoned")
}

pub struct Report {
    slot: Arc<Mutex<Option<PermitPtr>>>,
    outcome: Outcome,
}

impl Task for Report {
    type Output = ();
    type JsValue = ();

    fn compute(&mut self) -> napi::Result<()> {
        let permit = self.slot.lock().map_err(|_| lock_poisoned())?.take().ok_or_else(finished)?;
        // A large result's pieces, joined here on the pool thread. The Buffers were made by
        // index.js for this call alone, and nothing on the JavaScript side writes them.
        let joined: Vec<u8> = match &self.outcome {
            Outcome::CommitPieces(pieces) => {
                let mut joined = Vec::with_capacity(pieces.iter().map(|piece| piece.len()).sum());
                for piece in pieces {
                    joined.extend_from_slice(piece);
                }
                joined
            }
            _ => Vec::new(),
        };
        let mut err = WardenBuf::empty();
        // SAFETY: `permit.raw` is live and owned here (taken out of the slot, so no other
        // thread can reach it); each message borrows a String owned by self, or `joined`, a
        // local that outlives the call; err is a local.
        let code = unsafe {
            match &self.outcome {
                Outcome::Commit(json) => {
                    let (p, l) = bytes(json);
                    ffi::warden_permit_commit(permit.raw, p, l, &mut err)
                }
                Outcome::CommitPieces(_) => {
                    ffi::warden_permit_commit(permit.raw, joined.as_ptr(), joined.len(), &mut err)
                }
                Outcome::CommitText(text) => {
                    let (p, l) = bytes(text);
                    ffi::warden_permit_commit_text(permit.raw, p, l, &mut err)
                }
                Outcome::Cancel => ffi::warden_permit_cancel(permit.raw, &mut err),
                Outcome::NotExecuted(message) => {
                    let (p, l) = bytes(message);
                    ffi::warden_permit_not_executed(permit.raw, p, l, &mut err)
                }
                Outcome::Ambiguous(message) => {
                    let (p, l) = bytes(message);
                    ffi::warden_permit_ambiguous(permit.raw, p, l, &mut err)
                }
            }
        };
        // Reported (or refused for good): spent either way.
        drop(permit);
        Ok(check(code, err)?)
    }

    fn resolve(&mut self, _env: Env, _output: ()) -> napi::Result<()> {
        Ok(())
    }

    fn reject(&mut self, env: Env, err: napi::Error) -> napi::Result<()> {
        Err(structured(&env, err))
    }
}

pub struct ExtendLease {
    slot: Arc<Mutex<Option<PermitPtr>>>,
    lease_ms: i64,
}

impl Task for ExtendLease {
    type Output = String;
    type JsValue = String;

    fn compute(&mut self) -> napi::Result<String> {
        let lease_ms = unsigned("the lease", self.lease_ms)?;
        let slot = self.slot.lock().map_err(|_| lock_poisoned())?;
        let permit = slot.as_ref().ok_or_else(finished)?;
        let mut err = WardenBuf::empty();
        // SAFETY: the slot's lock is held, so this thread alone uses the live permit.
        let code = unsafe { ffi::warden_permit_extend_lease(permit.raw, lease_ms, &mut err) };
        check(code, err)?;
        Ok(permit.info()?)
    }

    fn resolve(&mut self, _env: Env, output: String) -> napi::Result<String> {
        Ok(output)
    }

    fn reject(&mut self, env: Env, err: napi::Error) -> napi::Result<String> {
        Err(structured(&env, err))
    }
}
