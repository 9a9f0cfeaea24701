"""ctypes declarations for every function of the C ABI (docs/ABI.md, include/warden.h).

Conventions this module relies on:

- Owned outputs are `warden_buf` structures whose `ptr` is a `c_void_p` (never `c_char_p`,
  which would copy and drop the pointer): the bytes are copied out and the buffer is handed
  back to `warden_buf_free` every time, on every path.
- Handles, permits and cancellation tokens are opaque pointers, also `c_void_p`.
- The credential callback type is `CREDENTIAL_FN` (a `CFUNCTYPE`); its reference argument is
  a `c_void_p` read with its length (it is not NUL-terminated), and the object ctypes makes
  of a Python function must be kept alive for as long as the library may call it.
- Input bytes are `c_char_p` with an explicit length; `None` with length 0 means "absent".
- ctypes releases the GIL around every foreign call, so other Python threads (and an asyncio
  loop whose blocking calls went to a worker thread) keep running.

The library is loaded once, on first use: `$WARDEN_LIB` when set, else the copy bundled in
this package. It is refused, with `AbiMismatch`, when `warden_abi_version()` is not the
version this binding was written for, or when a declared function is missing.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from ctypes import (
    CFUNCTYPE,
    POINTER,
    Structure,
    byref,
    c_bool,
    c_char_p,
    c_int32,
    c_int64,
    c_size_t,
    c_uint32,
    c_uint64,
    c_void_p,
)
from pathlib import Path
from typing import Any

from ._errors import RESULT_CODES, AbiMismatch, WardenError, error_from_result

__all__ = [
    "ABI_VERSION",
    "ANCHOR_FN",
    "APPROVAL_FN",
    "CREDENTIAL_FN",
    "PRECONDITION_FN",
    "RECONCILE_FN",
    "ProposeOptions",
    "SIGNATURES",
    "Library",
    "WardenBuf",
    "library",
    "library_path",
]

#: The ABI version this binding is written for; any other is refused at load.
ABI_VERSION = 1

OK = 0


class WardenBuf(Structure):
    """`warden_buf`: an owned UTF-8 buffer, freed with `warden_buf_free`."""

    _fields_ = [("ptr", c_void_p), ("len", c_size_t)]


_bytes = c_char_p  # const uint8_t *  (with a size_t length after it)
_len = c_size_t
_handle = c_void_p  # warden_handle *
_permit = c_void_p  # warden_permit * / const warden_permit *
_out_handle = POINTER(c_void_p)  # warden_handle ** / warden_permit **
_buf_p = POINTER(WardenBuf)  # warden_buf *
_result = c_uint32  # warden_result
_cancel = c_void_p  # warden_cancel * / const warden_cancel *
_sink = c_void_p  # warden_credential_sink *

#: `warden_credential_fn`: int32_t (*)(void *user_data, const uint8_t *reference,
#: size_t reference_len, warden_credential_sink *sink). The reference is read with
#: `ctypes.string_at(reference, reference_len)`: it is not NUL-terminated.
CREDENTIAL_FN = CFUNCTYPE(c_int32, c_void_p, c_void_p, c_size_t, _sink)

#: `warden_approval_fn`: int32_t (*)(void *user_data, const uint8_t *request, size_t
#: request_len). Called on the library's notification thread with one new request's JSON.
APPROVAL_FN = CFUNCTYPE(c_int32, c_void_p, c_void_p, c_size_t)

_precondition_sink = c_void_p  # warden_precondition_sink *

#: `warden_precondition_fn`: int32_t (*)(void *user_data, const uint8_t *action, size_t
#: action_len, warden_precondition_sink *sink). Called on the proposing thread.
PRECONDITION_FN = CFUNCTYPE(c_int32, c_void_p, c_void_p, c_size_t, _precondition_sink)

#: `warden_anchor_fn`: int32_t (*)(void *user_data, const uint8_t *checkpoint, size_t
#: checkpoint_len, warden_anchor_sink *sink). Called on the handle's checkpoint thread.
ANCHOR_FN = CFUNCTYPE(c_int32, c_void_p, c_void_p, c_size_t, c_void_p)

#: `warden_reconcile_fn`: int32_t (*)(void *user_data, const uint8_t *effect_key, size_t
#: effect_key_len, warden_reconcile_sink *sink). Called on the proposing thread.
RECONCILE_FN = CFUNCTYPE(c_int32, c_void_p, c_void_p, c_size_t, c_void_p)


class ProposeOptions(Structure):
    """`warden_propose_options`: the wait and the callbacks of one `warden_propose_recovering`."""

    _fields_ = [
        ("wait_ms", c_uint64),
        ("poll_ms", c_uint64),
        ("precondition", PRECONDITION_FN),
        ("reconcile", RECONCILE_FN),
        ("user_data", c_void_p),
    ]


Signature = tuple[Any, tuple[Any, ...]]

#: name -> (restype, argtypes) for every public function in docs/ABI.md.
SIGNATURES: dict[str, Signature] = {
    "warden_abi_version": (c_uint32, ()),
    "warden_result_name": (c_char_p, (_result,)),  # static string, never freed
    "warden_buf_free": (None, (WardenBuf,)),
    # open/close
    "warden_open": (_result, (_bytes, _len, _bytes, _len, _bytes, _len, _out_handle, _buf_p)),
    "warden_close": (None, (_handle,)),
    # the pipeline
    "warden_propose": (_result, (_handle, _bytes, _len, _out_handle, _buf_p)),
    "warden_propose_described": (_result, (_handle, _bytes, _len, _out_handle, _buf_p, _buf_p)),
    "warden_flush": (_result, (_handle, _buf_p)),
    "warden_permit_info": (_result, (_permit, _buf_p, _buf_p)),
    "warden_defaults": (_result, (_buf_p, _buf_p)),
    "warden_permit_commit": (_result, (_permit, _bytes, _len, _buf_p)),
    "warden_permit_commit_text": (_result, (_permit, _bytes, _len, _buf_p)),
    "warden_permit_cancel": (_result, (_permit, _buf_p)),
    "warden_permit_not_executed": (_result, (_permit, _bytes, _len, _buf_p)),
    "warden_permit_ambiguous": (_result, (_permit, _bytes, _len, _buf_p)),
    "warden_permit_extend_lease": (_result, (_permit, c_uint64, _buf_p)),
    "warden_permit_free": (None, (_permit,)),
    "warden_effect_reconcile": (_result, (_handle, _bytes, _len, _bytes, _len, _bytes, _len, _buf_p)),
    # approvals
    "warden_approval_request": (_result, (_handle, _bytes, _len, _buf_p, _buf_p)),
    "warden_approval_grant": (_result, (_handle, _bytes, _len, _bytes, _len, c_int64, _buf_p, _buf_p)),
    "warden_approval_deny": (_result, (_handle, _bytes, _len, _bytes, _len, _bytes, _len, _buf_p, _buf_p)),
    "warden_approval_get": (_result, (_handle, _bytes, _len, _buf_p, _buf_p)),
    "warden_approvals_pending": (_result, (_handle, _buf_p, _buf_p)),
    "warden_approval_grant_scoped": (_result, (_handle, _bytes, _len, _buf_p, _buf_p)),
    "warden_scoped_grants": (_result, (_handle, c_bool, _buf_p, _buf_p)),
    "warden_scoped_grant_revoke": (_result, (_handle, _bytes, _len, _bytes, _len, _bytes, _len, _buf_p, _buf_p)),
    # authority
    "warden_delegate": (_result, (_handle, _bytes, _len, _buf_p, _buf_p)),
    "warden_revoke": (_result, (_handle, _bytes, _len, _bytes, _len, _buf_p, _buf_p)),
    "warden_revoke_sweep": (_result, (_handle, _bytes, _len, _buf_p, _buf_p)),
    "warden_delegations": (_result, (_handle, _bytes, _len, c_uint32, _buf_p, _buf_p)),
    "warden_delegations_all": (_result, (_handle, _buf_p, _buf_p)),
    "warden_approval_answer": (_result, (_handle, _bytes, _len, _buf_p, _buf_p)),
    "warden_approval_wait": (_result, (_handle, _bytes, _len, c_uint64, _buf_p, _buf_p)),
    "warden_approval_notify_set": (_result, (_handle, APPROVAL_FN, c_void_p, _buf_p)),
    "warden_propose_checked": (
        _result,
        (_handle, _bytes, _len, PRECONDITION_FN, c_void_p, _out_handle, _buf_p, _buf_p),
    ),
    "warden_precondition_put": (_result, (_precondition_sink, _bytes, _len)),
    "warden_propose_recovering": (
        _result,
        (_handle, _bytes, _len, POINTER(ProposeOptions), _out_handle, _buf_p, _buf_p),
    ),
    "warden_reconcile_put": (_result, (c_void_p, _bytes, _len)),
    # telemetry: one trace per protected call, and the gauges
    "warden_trace_new": (c_void_p, ()),
    "warden_trace_free": (None, (c_void_p,)),
    "warden_trace_span": (_result, (c_void_p, _buf_p, _buf_p)),
    "warden_propose_traced": (
        _result,
        (_handle, _bytes, _len, POINTER(ProposeOptions), c_void_p, _out_handle, _buf_p, _buf_p),
    ),
    "warden_gauges_describe": (_result, (_buf_p, _buf_p)),
    "warden_gauge_read": (_result, (_handle, _bytes, _len, _buf_p, _buf_p)),
    # effects, receipts, events
    "warden_effect_resolve": (_result, (_handle, _bytes, _len, _bytes, _len, _bytes, _len, _buf_p, _buf_p)),
    "warden_effect_resolve_attempt": (
        _result,
        (_handle, _bytes, _len, c_uint32, _bytes, _len, _bytes, _len, _buf_p, _buf_p),
    ),
    "warden_effect_get": (_result, (_handle, _bytes, _len, _buf_p, _buf_p)),
    "warden_effects_list": (_result, (_handle, _bytes, _len, c_uint64, _buf_p, _buf_p)),
    "warden_receipts_list": (_result, (_handle, c_uint64, c_uint64, _buf_p, _buf_p)),
    "warden_chain_verify": (_result, (_handle, _buf_p, _buf_p)),
    "warden_events_list": (_result, (_handle, c_uint64, c_uint64, _buf_p, _buf_p)),
    # evidence: proofs and checkpoints
    "warden_proof_inclusion": (_result, (_handle, _bytes, _len, c_uint64, _buf_p, _buf_p)),
    "warden_proof_consistency": (_result, (_handle, c_uint64, c_uint64, _buf_p, _buf_p)),
    "warden_checkpoints": (_result, (_handle, c_uint64, c_uint64, _buf_p, _buf_p)),
    "warden_anchor_add": (_result, (_handle, _bytes, _len, ANCHOR_FN, c_void_p, _buf_p)),
    "warden_anchor_put": (_result, (c_void_p, _bytes, _len)),
    # pure
    "warden_canonical": (_result, (_bytes, _len, _buf_p, _buf_p)),
    "warden_action_hash": (_result, (_bytes, _len, _buf_p, _buf_p)),
    # lower-level store operations
    "warden_store_reserve": (
        _result,
        (_handle, _bytes, _len, _bytes, _len, _bytes, _len, c_uint64, _buf_p, _buf_p),
    ),
    "warden_store_begin": (_result, (_handle, _bytes, _len, _bytes, _len, c_uint32, _buf_p, _buf_p)),
    "warden_store_complete": (
        _result,
        (_handle, _bytes, _len, _bytes, _len, c_uint32, _bytes, _len, _buf_p, _buf_p),
    ),
    "warden_store_mark_ambiguous": (
        _result,
        (_handle, _bytes, _len, _bytes, _len, c_uint32, _bytes, _len, _buf_p, _buf_p),
    ),
    "warden_store_extend_lease": (
        _result,
        (_handle, _bytes, _len, _bytes, _len, c_uint32, c_uint64, _buf_p, _buf_p),
    ),
    "warden_store_consume_approval": (_result, (_handle, _bytes, _len, _bytes, _len, _buf_p, _buf_p)),
    # sights
    "warden_cancel_new": (_cancel, ()),
    "warden_cancel_trigger": (None, (_cancel,)),
    "warden_cancel_free": (None, (_cancel,)),
    "warden_credential_put": (_result, (_sink, _bytes, _len)),
    "warden_sight_credentials_set": (_result, (_handle, CREDENTIAL_FN, c_void_p, _buf_p)),
    "warden_sight_sources": (_result, (_handle, _buf_p, _buf_p)),
    "warden_sight_tool_schema": (_result, (_handle, _buf_p, _buf_p)),
    "warden_sight_query": (_result, (_handle, _bytes, _len, _cancel, _buf_p, _buf_p)),
    "warden_sight_history": (_result, (_handle, _bytes, _len, _buf_p, _buf_p)),
    "warden_sight_call_tool": (_result, (_handle, _bytes, _len, _bytes, _len, _cancel, _buf_p, _buf_p)),
    "warden_sight_diff": (_result, (_handle, _bytes, _len, _buf_p, _buf_p)),
}

def _library_names() -> tuple[str, ...]:
    if sys.platform == "darwin":
        return ("libwarden.dylib",)
    if sys.platform == "win32":
        return ("warden.dll",)
    return ("libwarden.so",)


def library_path() -> Path:
    """Which library will be loaded: `$WARDEN_LIB`, else the one bundled in this package."""
    override = os.environ.get("WARDEN_LIB")
    if override:
        path = Path(override)
        if not path.is_file():
            raise AbiMismatch(
                f"WARDEN_LIB is {override!r}, which is not a file; point it at a built libwarden "
                "(cargo build --release --lib) or unset it to use the bundled library",
                reason="library_not_found",
            )
        return path
    here = Path(__file__).resolve().parent
    for name in _library_names():
        candidate = here / name
        if candidate.is_file():
            return candidate
    raise AbiMismatch(
        f"no Warden library is bundled in {here} and WARDEN_LIB is not set; reinstall the "
        "package with `pip install ./bindings/python` (which builds it with cargo) or set "
        "WARDEN_LIB to a built libwarden",
        reason="library_not_found",
    )


class Library:
    """One loaded libwarden with every function declared, plus the call plumbing."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self.cdll = ctypes.CDLL(str(path))
        except OSError as exc:
            raise AbiMismatch(f"cannot load the Warden library {path}: {exc}", reason="library_not_loadable") from exc
        try:
            version_fn = self.cdll.warden_abi_version
        except AttributeError as exc:
            raise AbiMismatch(
                f"{path} does not export warden_abi_version; it is not a Warden library", reason="abi_version"
            ) from exc
        version_fn.restype = c_uint32
        version_fn.argtypes = []
        self.abi_version = int(version_fn())
        if self.abi_version != ABI_VERSION:
            raise AbiMismatch(
                f"{path} implements Warden ABI version {self.abi_version}, and this binding was written "
                f"for version {ABI_VERSION}; install the binding that matches the library",
                reason="abi_version",
            )
        missing = [name for name in SIGNATURES if not hasattr(self.cdll, name)]
        if missing:
            raise AbiMismatch(
                f"{path} reports ABI version {ABI_VERSION} but lacks {', '.join(missing)}; rebuild the "
                "library from the same source as this binding",
                reason="missing_symbols",
            )
        self.functions: dict[str, Any] = {}
        for name, signature in SIGNATURES.items():
            self.functions[name] = self._declare(name, signature)

    def _declare(self, name: str, signature: Signature) -> Any:
        restype, argtypes = signature
        fn = getattr(self.cdll, name)
        fn.restype = restype
        fn.argtypes = list(argtypes)
        return fn

    def has(self, name: str) -> bool:
        return name in self.functions

    def fn(self, name: str) -> Any:
        return self.functions[name]

    # ---- plumbing -----------------------------------------------------------------------

    def result_name(self, code: int) -> str:
        raw = self.functions["warden_result_name"](code)
        return raw.decode("utf-8", "replace") if raw else RESULT_CODES.get(code, "WARDEN_RESULT_UNKNOWN")

    def take(self, buf: WardenBuf) -> bytes | None:
        """Copy an owned buffer out and free it; `None` for an unwritten one."""
        if not buf.ptr:
            return None
        try:
            return ctypes.string_at(buf.ptr, buf.len)
        finally:
            self.functions["warden_buf_free"](buf)
            buf.ptr = None
            buf.len = 0

    def error(self, result: int, err: WardenBuf) -> WardenError:
        return error_from_result(result, self.take(err), self.result_name(result))

    def _invoke(self, name: str, args: tuple[Any, ...], *outs: Any) -> None:
        """Call `name` with `args`, then a pointer to each of `outs` and to the error buffer;
        a non-OK result is raised (after every output buffer is freed)."""
        err = WardenBuf()
        result = self.functions[name](*args, *map(byref, outs), byref(err))
        if result != OK:
            for out in outs:
                if isinstance(out, WardenBuf):
                    self.take(out)
            raise self.error(result, err)
        self.take(err)  # left untouched on success; freed if a library wrote it anyway

    def call(self, name: str, *args: Any) -> None:
        """A function whose last parameter is `warden_buf *err` and that has no output."""
        self._invoke(name, args)

    def call_out(self, name: str, *args: Any) -> bytes:
        """A function ending `(warden_buf *out, warden_buf *err)`: the output's bytes."""
        out = WardenBuf()
        self._invoke(name, args, out)
        return self.take(out) or b""

    def call_handle_described(self, name: str, *args: Any) -> tuple[int, bytes]:
        """A function ending `(T **out, warden_buf *info, warden_buf *err)`: the new opaque
        pointer and the description written with it."""
        out, info = c_void_p(), WardenBuf()
        self._invoke(name, args, out, info)
        data = self.take(info)
        if not out.value or data is None:
            raise AbiMismatch(f"{name} returned OK without writing its handle and description", reason="abi_contract")
        return int(out.value), data

    def call_handle(self, name: str, *args: Any) -> int:
        """A function ending `(T **out, warden_buf *err)`: the new opaque pointer."""
        out = c_void_p()
        self._invoke(name, args, out)
        if not out.value:
            raise AbiMismatch(f"{name} returned OK without writing its handle", reason="abi_contract")
        return int(out.value)


_lock = threading.Lock()
_loaded: Library | None = None


def library() -> Library:
    """The process-wide library, loaded (and version-checked) on first use."""
    global _loaded
    loaded = _loaded
    if loaded is not None:
        return loaded
    with _lock:
        if _loaded is None:
            path = library_path()
            _loaded = Library(path)
        return _loaded


def arg(data: bytes | None) -> tuple[bytes | None, int]:
    """(ptr, len) for an input: `None` is absent (NULL, 0)."""
    if data is None:
        return None, 0
    return data, len(data)
