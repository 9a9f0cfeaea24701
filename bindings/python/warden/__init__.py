"""Warden for Python: at-most-once effects for AI agents, in process, over one embedded store.

    import warden

    w = warden.Warden(store="state.redb", config="warden.yaml")

    @w.protect("stripe.refund")
    def refund(payment_id: str, amount: int) -> dict:
        return stripe.Refund.create(payment=payment_id, amount=amount,
                                    idempotency_key=warden.idempotency_token())

    with warden.context(agent="support-agent", user="ada"):
        refund("pay_1", 1200)   # runs once
        refund("pay_1", 1200)   # raises warden.Duplicate(state="committed")

A thin ctypes binding over the C ABI (`include/warden.h`, docs/ABI.md): every decision, hash,
count and record is the library's.
"""

from __future__ import annotations

from typing import Any

from . import _ffi
from ._context import (
    Principal,
    context,
    current_approval,
    current_hop,
    current_principal,
    current_task,
    with_approval,
)
from ._errors import (
    RESULT_CODES,
    AbiMismatch,
    Ambiguous,
    ApprovalMismatch,
    ApprovalRequired,
    AttemptCeiling,
    AuthorityDenied,
    AuthorityEscalation,
    ConfigError,
    Denied,
    Duplicate,
    Fault,
    FetchFault,
    InvalidInput,
    LateOutcome,
    NotExecuted,
    NotFound,
    NotResolvable,
    OutOfWindow,
    Panic,
    Poisoned,
    Refused,
    StoreFault,
    WardenError,
)
from ._canonical import action_hash, canonical
from ._convert import defaults
from ._permit import Permit, extend_lease, extend_lease_async, idempotency_token
from ._sights import CancelToken, CredentialProvider
from ._warden import Warden

__version__ = "0.1.0"

#: The C ABI version this binding is written for.
ABI_VERSION = _ffi.ABI_VERSION


def abi_version() -> int:
    """The ABI version of the loaded library (loading it, and checking it, if needed)."""
    return _ffi.library().abi_version


def result_name(code: int) -> str:
    """`warden_result_name(code)`: the C constant's name for a result code."""
    return _ffi.library().result_name(code)


def __getattr__(name: str) -> Any:
    """`warden.evidence`, the offline bundle verifier (pure Python), imported on first use."""
    if name == "evidence":
        import importlib

        return importlib.import_module(".evidence", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ABI_VERSION",
    "RESULT_CODES",
    "AbiMismatch",
    "Ambiguous",
    "ApprovalMismatch",
    "ApprovalRequired",
    "AttemptCeiling",
    "AuthorityDenied",
    "AuthorityEscalation",
    "CancelToken",
    "ConfigError",
    "CredentialProvider",
    "Denied",
    "Duplicate",
    "Fault",
    "FetchFault",
    "InvalidInput",
    "LateOutcome",
    "NotExecuted",
    "NotFound",
    "NotResolvable",
    "OutOfWindow",
    "Panic",
    "Permit",
    "Poisoned",
    "Principal",
    "Refused",
    "StoreFault",
    "Warden",
    "WardenError",
    "abi_version",
    "action_hash",
    "canonical",
    "context",
    "defaults",
    "current_approval",
    "current_hop",
    "current_principal",
    "current_task",
    "extend_lease",
    "extend_lease_async",
    "idempotency_token",
    "result_name",
    "with_approval",
]
