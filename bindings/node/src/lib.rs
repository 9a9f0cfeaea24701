//! The N-API addon under `index.js`: a thin, typed skin over the `warden_*` C ABI.
//!
//! It calls only the functions declared in `ffi.rs` and links `libwarden.so` dynamically, so
//! Node and Python run the very same library code. Blocking calls (everything that touches
//! the store) run as async work on the libuv thread pool and return Promises; the pure
//! functions are synchronous. Results cross as JSON text; `index.js` parses it BigInt-safely.

mod anchor;
mod call;
mod ffi;
mod handle;
mod hooks;
mod notify;
mod permit;
mod sight;
mod trace;

use napi::Env;
use napi_derive::napi;

use crate::call::{bytes, output, thrown};
use crate::ffi::WardenBuf;

pub use handle::Handle;
pub use hooks::HookReply;
pub use permit::Permit;
pub use sight::{Cancel, CredentialRequest};
pub use trace::Trace;

/// The ABI version of the loaded library; `index.js` refuses to load unless it is 1.
#[napi]
pub fn abi_version() -> u32 {
    // SAFETY: no arguments, no allocation.
    unsafe { ffi::warden_abi_version() }
}

/// The constant name of a result code, e.g. `WARDEN_RESULT_DUPLICATE`.
#[napi]
pub fn result_name(code: u32) -> String {
    call::result_name(code)
}

/// The library's defaults as JSON (`warden_defaults`): list limit, first receipt, environment,
/// limits. `index.js` reads them and never restates them.
#[napi]
pub fn defaults(env: Env) -> napi::Result<String> {
    // SAFETY: out and err point at locals.
    thrown(&env, Ok(output(|out, err| unsafe { ffi::warden_defaults(out, err) })?))
}

/// The gauges libwarden can read (`warden_gauges_describe`): `[{name, unit, description}]`.
#[napi]
pub fn gauges_describe(env: Env) -> napi::Result<String> {
    // SAFETY: out and err point at locals.
    thrown(&env, Ok(output(|out, err| unsafe { ffi::warden_gauges_describe(out, err) })?))
}

/// The canonical JSON text of `json`.
#[napi]
pub fn canonical(env: Env, json: String) -> napi::Result<String> {
    thrown(&env, pure(&json, ffi::warden_canonical))
}

/// `sha256:…` over the canonical action `{"name","arguments","principal","resource","environment"}`.
#[napi]
pub fn action_hash(env: Env, action_json: String) -> napi::Result<String> {
    thrown(&env, pure(&action_json, ffi::warden_action_hash))
}

type PureFn = unsafe extern "C" fn(*const u8, usize, *mut WardenBuf, *mut WardenBuf) -> ffi::WardenResult;

fn pure(input: &str, function: PureFn) -> napi::Result<String> {
    let (ptr, len) = bytes(input);
    // SAFETY: (ptr, len) borrows `input` for the call; out and err point at locals.
    Ok(output(|out, err| unsafe { function(ptr, len, out, err) })?)
}
