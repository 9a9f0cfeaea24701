"""`Permit`: the right to execute one action once, and the outcome reported on it.

Also the calls a protected function makes on its own running permit (`idempotency_token`,
`extend_lease`) and the handoff of a permit from a worker thread to the task awaiting it.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

from ._threads import in_thread
from . import _ffi
from ._context import current_permit
from ._convert import _loads, _millis, _text
from ._errors import InvalidInput
from ._managed import Managed

if TYPE_CHECKING:
    from ._telemetry import Traced

__all__ = ["Permit", "idempotency_token", "extend_lease", "extend_lease_async"]

_LOG = logging.getLogger("warden")

_COMMIT = "warden_permit_commit"
_COMMIT_TEXT = "warden_permit_commit_text"
_CANCEL = "warden_permit_cancel"
_NOT_EXECUTED = "warden_permit_not_executed"
_AMBIGUOUS = "warden_permit_ambiguous"


def _result_payload(value: Any) -> tuple[str, bytes]:
    """What the library is handed for a result: its JSON, or (no JSON form) its repr as text.
    The library decides how it is stored and never refuses it."""
    try:
        return _COMMIT, json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    except (TypeError, ValueError, RecursionError):
        try:
            text = repr(value)
        except BaseException as exc:  # noqa: BLE001 - a broken __repr__ must not lose the commit
            text = f"<{type(value).__qualname__} whose repr raised {type(exc).__qualname__}>"
        return _COMMIT_TEXT, text.encode("utf-8", "replace")


class Permit(Managed):
    """The right to execute one action once, until its lease expires.

    Report exactly one outcome: `commit(result)`, `not_executed(message)` (the remote side
    provably did nothing: FAILED) or `ambiguous(message)`. A permit released without an
    outcome (`release()`, the end of a `with` block, garbage collection) records AMBIGUOUS.
    """

    _what = "permit"
    _free = "warden_permit_free"
    _closed_message = "this permit was already released"
    _exclusive = True

    def __init__(
        self, lib: _ffi.Library, pointer: int, info: dict[str, Any] | None = None, traced: Traced | None = None
    ) -> None:
        # A permit outlives `Warden.close()`: the library keeps the store open until it is freed.
        super().__init__(lib)
        self._traced = traced
        self._adopt(pointer)
        self._info: dict[str, Any] = info or {}

    # -- what the kernel granted --

    def refresh(self) -> dict[str, Any]:
        """Read the permit's JSON again from the library (after a lease extension, say)."""
        info = _loads(self._call_out("warden_permit_info"))
        if not isinstance(info, dict):
            raise InvalidInput("warden_permit_info returned something other than a JSON object")
        self._info = info
        return info

    @property
    def info(self) -> dict[str, Any]:
        """The permit JSON: action_id, action, action_hash, effect_key, attempt, ..."""
        return dict(self._info) if self._info else self.refresh()

    @property
    def action_id(self) -> str:
        return str(self.info["action_id"])

    @property
    def action(self) -> str:
        return str(self.info["action"])

    @property
    def action_hash(self) -> str:
        return str(self.info["action_hash"])

    @property
    def effect_key(self) -> str | None:
        return self.info.get("effect_key")

    @property
    def attempt(self) -> int:
        return int(self.info["attempt"])

    @property
    def lease_expires_at(self) -> str | None:
        return self.info.get("lease_expires_at")

    @property
    def idempotency_token(self) -> str | None:
        return self.info.get("idempotency_token")

    @property
    def approval_id(self) -> str | None:
        return self.info.get("approval_id")

    @property
    def decision(self) -> str | None:
        return self.info.get("decision")

    @property
    def arguments(self) -> dict[str, Any]:
        """The canonical arguments the kernel decided on (what the function is called with)."""
        arguments = self.info.get("arguments")
        if not isinstance(arguments, dict):
            raise InvalidInput("the permit JSON carries no `arguments` object")
        return arguments

    # -- outcomes --

    def commit(self, result: Any = None) -> None:
        """The call succeeded: COMMITTED, with `result` stored (as itself when it is canonical
        JSON within the library's bounds, else in the library's marked form)."""
        self._report(*_result_payload(result))

    def cancel(self) -> None:
        """The function will not run (its caller left): NOT_EXECUTED, with the library's message."""
        self._report(_CANCEL, None)

    def not_executed(self, message: str) -> None:
        """The remote side provably did nothing: FAILED, and a retry may run as the next attempt."""
        self._report(_NOT_EXECUTED, _text(message, "the not_executed message"))

    def ambiguous(self, message: str) -> None:
        """The outcome is unknown: AMBIGUOUS until a human (or a reconcile hook) resolves it."""
        self._report(_AMBIGUOUS, _text(message, "the ambiguous message"))

    def extend_lease(self, seconds: float) -> str | None:
        """Set this attempt's lease to expire at now + `seconds`, never shorter than it is:
        `InvalidInput` when that would end it sooner (`extend_lease(30)` under a 5-minute
        lease), or when the attempt no longer holds its effect. Returns the new expiry."""
        lease_ms = _millis(seconds, "extend_lease(seconds)")
        self._call("warden_permit_extend_lease", lease_ms)
        return self.refresh().get("lease_expires_at")

    def _report(self, function: str, payload: bytes | None) -> None:
        try:
            self._call(function, *(() if payload is None else _ffi.arg(payload)))
        finally:
            self._end_span()

    def _end_span(self) -> None:
        traced = getattr(self, "_traced", None)
        # In a forked child the permit (and its span) is the parent's.
        if traced is not None and os.getpid() == self._pid:
            traced.end()

    def _current(self) -> AbstractContextManager[None]:
        """Inside the block, this permit's span (if traced) is the current one."""
        traced = getattr(self, "_traced", None)
        return nullcontext() if traced is None else traced.current()

    def _finish(self, function: str, payload: bytes | None, quiet: bool) -> None:
        """Report an outcome, then release; `quiet` logs a failed report instead of raising."""
        try:
            self._report(function, payload)
        except Exception:
            if not quiet:
                raise
            _LOG.warning("warden: recording %s failed", function.removeprefix("warden_permit_"), exc_info=True)
        finally:
            self.release()

    # -- lifetime --

    def release(self) -> None:
        """Free the permit (idempotent). Without an outcome, the library records AMBIGUOUS.

        In a child process forked after the permit was issued, nothing is freed or recorded:
        the permit belongs to the parent."""
        self.close()

    def close(self) -> None:
        """`release()`: also what `with` and garbage collection call. Its span ends with the
        outcome the library recorded."""
        super().close()
        self._end_span()

    def __repr__(self) -> str:
        state = "released" if self._pointer is None else "live"
        return f"<warden.Permit {self._info.get('action')} key={self._info.get('effect_key')!r} {state}>"


def idempotency_token() -> str:
    """The provider idempotency token of the attempt the current protected call is running.

    Raises `InvalidInput` outside a protected call, or when the action has no effect key.
    """
    token = current_permit().idempotency_token
    if token is None:
        raise InvalidInput("this action has no effect key, so its attempt has no idempotency token")
    return token


def extend_lease(seconds: float) -> str | None:
    """Set the current protected call's lease to expire at now + `seconds`, never shorter
    than it is (`InvalidInput` otherwise); returns the new expiry. A blocking C call."""
    return current_permit().extend_lease(seconds)


async def extend_lease_async(seconds: float) -> str | None:
    """`extend_lease` for an `async def` (to now + `seconds`, never shorter than the current
    lease): the C call runs in a worker thread."""
    permit = current_permit()
    return await in_thread(permit.extend_lease, seconds)


class _Handoff:
    """A permit on its way from the worker thread that proposed it to the task awaiting it.

    The task may be gone by the time the permit exists: cancelled, its loop shut down by
    `asyncio.run` (which also cancels the proposal's own task), Ctrl-C, or the coroutine
    closed by garbage collection. None of that reaches the worker thread, so the handoff is
    decided under a lock, by whichever side comes second: a permit nobody will take is
    finished as not executed (the function never ran), by the worker thread itself when the
    task left first, else by the task as it leaves. Nothing here depends on the loop."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._permit: Permit | None = None
        self._abandoned = False

    def deliver(self, permit: Permit) -> bool:
        """From the worker thread: False when the task already left (then finish it there)."""
        with self._lock:
            if self._abandoned:
                return False
            self._permit = permit
            return True

    def take(self) -> Permit:
        with self._lock:
            permit, self._permit = self._permit, None
        if permit is None:
            raise InvalidInput("the proposal finished without handing over its permit")
        return permit

    def abandon(self) -> Permit | None:
        """From the leaving task: the permit if it already arrived (the task finishes it)."""
        with self._lock:
            self._abandoned = True
            permit, self._permit = self._permit, None
        return permit


def _finish_unused(permit: Permit) -> None:
    permit._finish(_CANCEL, None, True)
