"""`Warden` (one open store under one document), `Permit`, and `@w.protect`.

Everything here is a thin layer over the C functions: the kernel decides, hashes, counts
attempts and writes evidence; this module turns Python calls into JSON, JSON into Python
values, and C results into exceptions. Blocking C calls made for an `async def` run in a
worker thread (`asyncio.to_thread`), never on the event loop.
"""

from __future__ import annotations

import asyncio
import atexit
import ctypes
import functools
import inspect
import json
import logging
import math
import os
import threading
import weakref
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, ParamSpec, TypeVar, Union, cast

from . import _ffi
from ._context import (
    _PERMIT,
    Principal,
    current_approval,
    current_hop,
    current_permit,
    current_principal,
    current_task,
)
from ._errors import Ambiguous, ApprovalRequired, InvalidInput, NotExecuted, NotFound, OutOfWindow, Panic

__all__ = [
    "Warden",
    "Permit",
    "CancelToken",
    "CredentialProvider",
    "canonical",
    "action_hash",
    "defaults",
    "idempotency_token",
    "extend_lease",
]

_LOG = logging.getLogger("warden")

P = ParamSpec("P")
R = TypeVar("R")

#: What a reconcile hook answers about an AMBIGUOUS effect.
ReconcileAnswer = str  # "committed" | "not_executed" | "unknown"
ReconcileHook = Callable[[str], Union[ReconcileAnswer, Awaitable[ReconcileAnswer]]]
PathLike = Union[str, "os.PathLike[str]"]
#: A sight credential resolver: a credential reference in, its value (or `None`) out.
CredentialProvider = Callable[[str], Union[str, None]]

_COMMIT = "warden_permit_commit"
_COMMIT_TEXT = "warden_permit_commit_text"
_CANCEL = "warden_permit_cancel"
_NOT_EXECUTED = "warden_permit_not_executed"
_AMBIGUOUS = "warden_permit_ambiguous"


@functools.cache
def defaults() -> dict[str, Any]:
    """The library's defaults (`warden_defaults`): `environment`, `list_limit`, `from_seq`,
    `after_id`, `limits`, ... The binding reads them here and never restates them."""
    value = _loads(_ffi.library().call_out("warden_defaults"))
    if not isinstance(value, dict):
        raise InvalidInput("warden_defaults returned something other than a JSON object")
    return value


def _or_default(value: int | None, name: str) -> int:
    return defaults()[name] if value is None else value


# ---- JSON across the boundary -----------------------------------------------------------------


def _dumps(value: Any, what: str) -> bytes:
    """UTF-8 JSON for the library. Python ints of any size are written exactly."""
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidInput(f"{what} cannot be sent to Warden as JSON: {exc}") from exc


def _loads(data: bytes) -> Any:
    return json.loads(data) if data else None


def _record(data: bytes) -> dict[str, Any]:
    return cast("dict[str, Any]", _loads(data))


def _maybe_record(data: bytes) -> dict[str, Any] | None:
    return cast("dict[str, Any] | None", _loads(data))


def _records(data: bytes) -> list[dict[str, Any]]:
    return cast("list[dict[str, Any]]", _loads(data) or [])


def _text(value: str, what: str) -> bytes:
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be a str, not {type(value).__name__}")
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInput(f"{what} is not valid Unicode text: {exc}") from exc


def _optional_text(value: str | None, what: str) -> bytes | None:
    return None if value is None else _text(value, what)


def _millis(seconds: float, what: str) -> int:
    """A positive duration in whole milliseconds (rounded up, so it never becomes 0)."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds):
        raise InvalidInput(f"{what} must be a number of seconds, not {seconds!r}")
    if seconds <= 0:
        raise InvalidInput(f"{what} must be positive, got {seconds!r}")
    return max(1, math.ceil(seconds * 1000))


def _count(value: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**64:
        raise InvalidInput(f"{what} must be an integer from 0 to 2**64-1, not {value!r}")
    return value


#: How many delegations one `warden_delegations` call returns while `delegations()` pages.
_DELEGATION_PAGE = 1000


def _principal_json(value: Any, what: str) -> dict[str, Any]:
    if isinstance(value, Principal):
        return value.to_json()
    if isinstance(value, Mapping) and set(value) <= {"agent", "user"} and isinstance(value.get("agent"), str):
        return {"agent": value["agent"], "user": value.get("user")}
    raise InvalidInput(f'{what} must be a Principal or {{"agent": str, "user": str | None}}')


def _revoker(by: Any) -> str | None:
    """Who revokes, as the one-line name the store records: `agent` or `agent/user`."""
    if by is None or isinstance(by, str):
        return by
    principal = _principal_json(by, "by")
    return principal["agent"] if principal["user"] is None else f"{principal['agent']}/{principal['user']}"


def _describe(exc: BaseException) -> bytes:
    """The message an AMBIGUOUS or FAILED outcome records for `exc` (never raises)."""
    if isinstance(exc, asyncio.CancelledError):
        text = "asyncio.CancelledError: the protected call was cancelled mid-flight"
    else:
        try:
            detail = str(exc)
        except Exception:
            detail = ""
        text = f"{type(exc).__qualname__}: {detail}" if detail else type(exc).__qualname__
    # The library cuts a long message to its own bound (limits.max_message_bytes) and marks it.
    return text.encode("utf-8", "replace")


def _reconciled(request: bytes, effect_key: str, answer: Any) -> bytes:
    """The request again, with the reconcile hook's answer for the library to apply."""
    return _dumps({**json.loads(request), "reconciled": {"effect_key": effect_key, "answer": answer}}, "the answer")


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


# ---- the permit --------------------------------------------------------------------------------


class Permit:
    """The right to execute one action once, until its lease expires.

    Report exactly one outcome: `commit(result)`, `not_executed(message)` (the remote side
    provably did nothing: FAILED) or `ambiguous(message)`. A permit released without an
    outcome (`release()`, the end of a `with` block, garbage collection) records AMBIGUOUS.
    """

    def __init__(self, lib: _ffi.Library, pointer: int, info: dict[str, Any] | None = None) -> None:
        # A permit outlives `Warden.close()`: the library keeps the store open until it is freed.
        self._lib = lib
        self._pointer: int | None = pointer
        self._lock = threading.Lock()
        self._info: dict[str, Any] = info or {}
        self._pid = os.getpid()

    # -- what the kernel granted --

    def refresh(self) -> dict[str, Any]:
        """Read the permit's JSON again from the library (after a lease extension, say)."""
        with self._held() as pointer:
            info = _loads(self._lib.call_out("warden_permit_info", pointer))
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
        with self._held() as pointer:
            self._lib.call("warden_permit_extend_lease", pointer, lease_ms)
        return self.refresh().get("lease_expires_at")

    def _report(self, function: str, payload: bytes | None) -> None:
        with self._held() as pointer:
            self._lib.call(function, pointer, *(() if payload is None else _ffi.arg(payload)))

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

    @contextmanager
    def _held(self) -> Iterator[int]:
        _refuse_after_fork(self._pid, "permit")
        with self._lock:
            if self._pointer is None:
                raise InvalidInput("this permit was already released")
            yield self._pointer

    def release(self) -> None:
        """Free the permit (idempotent). Without an outcome, the library records AMBIGUOUS.

        In a child process forked after the permit was issued, nothing is freed or recorded:
        the permit belongs to the parent."""
        if os.getpid() != getattr(self, "_pid", os.getpid()):
            return
        with self._lock:
            pointer, self._pointer = self._pointer, None
        if pointer is not None:
            self._lib.fn("warden_permit_free")(pointer)

    close = release

    def __enter__(self) -> Permit:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()

    def __del__(self) -> None:
        try:
            self.release()
        except Exception:
            pass

    def __repr__(self) -> str:
        state = "released" if self._pointer is None else "live"
        return f"<warden.Permit {self._info.get('action')} key={self._info.get('effect_key')!r} {state}>"


def _refuse_after_fork(pid: int, what: str) -> None:
    """A handle or permit used in a child forked after it was made: refused before any lock
    (a lock may have been held by a parent thread at the fork)."""
    if os.getpid() != pid:
        raise InvalidInput(
            f"this {what} was opened in process {pid} before a fork; a forked child must open its own "
            "warden.Warden (open the store again in the child), and nothing was done"
        )


# ---- protected calls -----------------------------------------------------------------------------


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
    return await asyncio.to_thread(permit.extend_lease, seconds)


def _check_signature(name: str, fn: Callable[..., Any]) -> inspect.Signature:
    if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
        raise InvalidInput(
            f"protect({name!r}): a generator has no single return value to commit; protect a plain "
            "function (or an async def) instead"
        )
    signature = inspect.signature(fn)
    variadic = [
        p.name for p in signature.parameters.values() if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]
    if variadic:
        raise InvalidInput(
            f"protect({name!r}): a protected function cannot take *args or **kwargs ({', '.join(variadic)}); "
            "every argument must have a name the policy can refer to"
        )
    return signature


def _bind(signature: inspect.Signature, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    bound = signature.bind(*args, **kwargs)
    bound.apply_defaults()
    return dict(bound.arguments)


def _invocation(signature: inspect.Signature, arguments: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """Positional-only parameters by position, every other one by keyword."""
    positional = [p.name for p in signature.parameters.values() if p.kind is p.POSITIONAL_ONLY]
    keywords = {key: value for key, value in arguments.items() if key not in positional}
    return [arguments[key] for key in positional], keywords


#: A precondition provider: the action (name, arguments, principal, resource, environment) in,
#: the state it depends on (any JSON value) out; may be async for an async protected function.
PreconditionProvider = Callable[[dict[str, Any]], Any]
#: A hook told of each new approval request (the request record, arguments included).
ApprovalHook = Callable[[dict[str, Any]], Any]


def _precondition_callback(
    lib: _ffi.Library, provider: PreconditionProvider, loop: asyncio.AbstractEventLoop | None, failures: list[BaseException]
) -> Any:
    """A `warden_precondition_fn` asking `provider` (on the proposing thread; an async
    provider runs on `loop`). Its exception is kept in `failures` and re-raised by the caller."""

    def callback(user_data: int | None, action: int | None, action_len: int, sink: int | None) -> int:
        try:
            described = json.loads(ctypes.string_at(action, action_len)) if action else {}
            state = provider(described)
            if inspect.isawaitable(state):
                if loop is None:
                    raise InvalidInput("an async precondition provider needs an async protected function")
                state = asyncio.run_coroutine_threadsafe(_awaited(state), loop).result()
            payload = _dumps(state, "the precondition state")
            return 0 if lib.fn("warden_precondition_put")(sink, payload, len(payload)) == 0 else 1
        except BaseException as exc:  # noqa: BLE001 - nothing may unwind into C
            failures.append(exc)
            return 1

    return _ffi.PRECONDITION_FN(callback)


async def _awaited(value: Awaitable[Any]) -> Any:
    return await value


def _approval_hook_callback(hook: ApprovalHook) -> Any:
    """A `warden_approval_fn` calling `hook(request)`; an exception is logged and reported to
    the library as a failed notification, never raised into the action."""

    def callback(user_data: int | None, request: int | None, request_len: int) -> int:
        try:
            record = json.loads(ctypes.string_at(request, request_len)) if request else {}
            outcome = hook(record)
            if inspect.isawaitable(outcome):
                asyncio.run(_awaited(outcome))
            return 0
        except BaseException:  # noqa: BLE001 - nothing may unwind into C
            _LOG.exception("warden: the approval hook raised; the action is not affected")
            return 1

    return _ffi.APPROVAL_FN(callback)


_HOOKED: "weakref.WeakSet[Warden]" = weakref.WeakSet()


@atexit.register
def _unhook_at_exit() -> None:
    """No notification thread may call into an interpreter that is shutting down."""
    for w in list(_HOOKED):
        try:
            w.on_approval_request(None)
        except Exception:  # noqa: BLE001 - best effort at exit
            pass


def _swallow_result(job: asyncio.Future[Any]) -> None:
    if not job.cancelled():
        job.exception()



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


# ---- sights: cancellation and the credential callback ---------------------------------------


class CancelToken:
    """A cancellation token for sight queries (`warden_cancel_new`).

    Pass it as `w.query(..., cancel=token)`; `token.cancel()`, from any thread, makes every
    query running (or later started) with it raise `FetchFault` with reason `aborted`, and
    nothing is stored. Cancelling is sticky: a cancelled token stays cancelled.

    `close()` (or the end of a `with` block, or garbage collection) releases it; the C token
    is freed only once no query is using it, so closing while a query runs is safe. A closed
    token cannot be passed to a new query.
    """

    def __init__(self) -> None:
        self._lib = _ffi.library()
        self._lock = threading.Lock()
        self._users = 0
        self._closed = False
        self._cancelled = False
        pointer = self._lib.fn("warden_cancel_new")()
        if not pointer:
            raise Panic("warden_cancel_new returned NULL (the library could not allocate a token)")
        self._pointer: int | None = int(pointer)

    def cancel(self) -> None:
        """Abort every query using this token (idempotent; safe from any thread)."""
        with self._lock:
            self._cancelled = True
            if self._pointer is not None:
                self._lib.fn("warden_cancel_trigger")(self._pointer)

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    @contextmanager
    def _held(self) -> Iterator[int]:
        """The C token, kept alive (not freed by `close()`) until the block ends."""
        with self._lock:
            if self._closed or self._pointer is None:
                raise InvalidInput("this CancelToken was closed; create a new one")
            self._users += 1
            pointer = self._pointer
        try:
            yield pointer
        finally:
            with self._lock:
                self._users -= 1
                self._free_if_idle()

    def _free_if_idle(self) -> None:
        # Called with the lock held: `cancel()` never races the free.
        if self._closed and self._users == 0 and self._pointer is not None:
            pointer, self._pointer = self._pointer, None
            self._lib.fn("warden_cancel_free")(pointer)

    def close(self) -> None:
        """Release the token (idempotent); freed now, or when the last query using it returns."""
        lock = getattr(self, "_lock", None)
        if lock is None:
            return
        with lock:
            self._closed = True
            self._free_if_idle()

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> CancelToken:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        state = "cancelled" if self._cancelled else "live"
        return f"<warden.CancelToken {state}{' closed' if self._closed else ''}>"


def _credential_callback(lib: _ffi.Library, provider: CredentialProvider) -> Any:
    """The `warden_credential_fn` calling `provider`: nothing it does ever reaches C as an
    exception; any failure (an exception, a non-str answer, a value the library refuses)
    leaves the reference unresolved (non-zero), which the query reports as
    `credential_unavailable`. The value is never logged."""
    put = lib.fn("warden_credential_put")

    def callback(user_data: int | None, reference: int | None, reference_len: int, sink: int | None) -> int:
        name = "<unreadable>"
        try:
            raw = ctypes.string_at(reference, reference_len) if reference and reference_len else b""
            name = raw.decode("utf-8")
            value = provider(name)
            if value is None:
                return 1
            if not isinstance(value, str):
                _LOG.warning(
                    "warden: the credential provider answered %s for %r, not a str or None; "
                    "the reference stays unresolved",
                    type(value).__qualname__,
                    name,
                )
                return 1
            data = value.encode("utf-8")
            return 0 if put(sink, data, len(data)) == _ffi.OK else 1
        except BaseException as exc:  # nothing may unwind into the library
            try:
                _LOG.warning(
                    "warden: the credential provider raised %s for %r; the reference stays unresolved",
                    type(exc).__qualname__,
                    name,
                )
            except BaseException:
                pass
            return 1

    return _ffi.CREDENTIAL_FN(callback)


def _release_token(job: asyncio.Future[Any], token: CancelToken) -> None:
    token.close()


# ---- the handle ------------------------------------------------------------------------------


class Warden:
    """One store, governed by one administrator's document (`warden.yaml`).

    `config` may be `None`: then only the kernel-level calls work (proposing needs a
    document). `environment` overrides the document's (see the library for the order).
    `credentials_dir` makes sights read each credential reference from the file of that name
    in that directory instead of from environment variables (unless a provider is set with
    `set_credential_provider`).
    `outcomes="deferred"` makes `commit`/`not_executed`/`ambiguous` return at once; the outcome
    becomes durable with the store's next commit or within `max_delay` seconds (default
    0.01), on `flush()` and on `close()`. A crash in that window leaves the effect in flight,
    then AMBIGUOUS when its lease lapses: never FAILED, never run twice. The default,
    `"durable"`, returns only once the outcome and its receipt are on disk.
    Thread-safe; also a context manager. `close()` is idempotent; calls still running on
    other threads finish first, and permits stay usable until freed (the library keeps the
    store open for them).
    `limits` overrides the bounds on inputs (`max_request_bytes`, `max_name_bytes`,
    `max_arguments_bytes`, `max_result_bytes`, `max_message_bytes`; see the library): past a
    bound a proposal raises `InvalidInput` naming the limit, a result is stored as an excerpt
    with its SHA-256 (the call still commits) and a message is cut.
    Fork: a `Warden` (and its permits) belongs to the process that opened it; in a child made
    by `os.fork()` or `multiprocessing` (fork start method) every call on it raises
    `InvalidInput` and touches nothing. Open a new `Warden` in the child.
    """

    def __init__(
        self,
        store: PathLike,
        config: PathLike | None = None,
        environment: str | None = None,
        credentials_dir: PathLike | None = None,
        outcomes: str | None = None,
        max_delay: float | None = None,
        limits: Mapping[str, int] | None = None,
    ) -> None:
        self._pid = os.getpid()
        self._mutex = threading.Lock()
        self._users = 0
        self._closed = True
        self._handle: int | None = None
        # Sight queries in flight, and every credential callback one of them may still call.
        self._sight_lock = threading.Lock()
        self._queries = 0
        self._callbacks: list[Any] = []
        self._approval_hook: Any = None
        self._lib = _ffi.library()
        open_options: dict[str, Any] = {}
        if environment is not None:
            open_options["environment"] = environment
        if credentials_dir is not None:
            open_options["credentials_dir"] = os.fsdecode(os.fspath(credentials_dir))
        if outcomes is not None:
            open_options["outcomes"] = outcomes
        if max_delay is not None:
            open_options["max_delay_ms"] = _millis(max_delay, "max_delay")
        if limits is not None:
            open_options["limits"] = dict(limits)
        options = _dumps(open_options, "options") if open_options else None
        store_bytes = os.fsencode(store)
        config_bytes = None if config is None else os.fsencode(config)
        self._handle = self._lib.call_handle(
            "warden_open", *_ffi.arg(store_bytes), *_ffi.arg(config_bytes), *_ffi.arg(options)
        )
        self._closed = False
        self.store = os.fspath(store)
        self.config = None if config is None else os.fspath(config)

    # -- lifetime --

    def _enter(self) -> int:
        _refuse_after_fork(self._pid, "warden.Warden")
        with self._mutex:
            if self._closed or self._handle is None:
                raise InvalidInput("this Warden is closed; open the store again to use it")
            self._users += 1
            return self._handle

    def _leave(self) -> None:
        with self._mutex:
            self._users -= 1
            handle = self._take_handle_if_idle()
        if handle is not None:
            self._lib.fn("warden_close")(handle)

    def _take_handle_if_idle(self) -> int | None:
        if self._closed and self._users == 0 and self._handle is not None:
            handle, self._handle = self._handle, None
            return handle
        return None

    @contextmanager
    def _using(self) -> Iterator[int]:
        handle = self._enter()
        try:
            yield handle
        finally:
            self._leave()

    def close(self) -> None:
        """Close the handle (idempotent). Calls still running on other threads finish first.
        Deferred outcomes are made durable first. In a child forked after the handle was
        opened this does nothing: the handle belongs to the parent."""
        mutex = getattr(self, "_mutex", None)
        if mutex is None or os.getpid() != getattr(self, "_pid", None):
            return
        with mutex:
            self._closed = True
            handle = self._take_handle_if_idle()
        if handle is not None:
            self._lib.fn("warden_close")(handle)

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> Warden:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        return f"<warden.Warden store={getattr(self, 'store', None)!r}{' closed' if self._closed else ''}>"

    # -- the pipeline --

    def _request(self, name: str, arguments: dict[str, Any], lease_ms: int | None, approval_id: str | None) -> bytes:
        principal = current_principal()
        return _dumps(
            {
                "name": name,
                "arguments": arguments,
                "principal": None if principal is None else principal.to_json(),
                "approval_id": approval_id,
                "lease_ms": lease_ms,
                "resource": None,
                "principal_expires_at_ms": None,
                "task": current_task(),
                "hop": current_hop(),
            },
            f"the arguments of {name}",
        )

    def _propose(
        self,
        request: bytes,
        precondition: PreconditionProvider | None = None,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> Permit:
        with self._using() as handle:
            if precondition is None:
                pointer, described = self._lib.call_handle_described(
                    "warden_propose_described", handle, *_ffi.arg(request)
                )
            else:
                failures: list[BaseException] = []
                callback = _precondition_callback(self._lib, precondition, loop, failures)
                try:
                    pointer, described = self._lib.call_handle_described(
                        "warden_propose_checked", handle, *_ffi.arg(request), callback, None
                    )
                except InvalidInput:
                    if failures:
                        raise failures[0] from None
                    raise
        try:
            info = _loads(described)
            if not isinstance(info, dict):
                raise InvalidInput("warden_propose_described described the permit with something other than an object")
        except BaseException as exc:
            permit = Permit(self._lib, pointer)
            permit._finish(_NOT_EXECUTED, b"reading the permit failed: " + _describe(exc), True)
            raise
        return Permit(self._lib, pointer, info)

    def flush(self) -> None:
        """Make every deferred outcome of this process durable now (see `outcomes`)."""
        with self._using() as handle:
            self._lib.call("warden_flush", handle)

    def propose(self, name: str, arguments: dict[str, Any] | None = None, *, lease: float | None = None) -> Permit:
        """Propose one action with the current principal and approval; the permit, or a refusal.

        The lower-level path under `protect`: report exactly one outcome on the permit.
        """
        lease_ms = None if lease is None else _millis(lease, "lease")
        return self._propose(self._request(name, dict(arguments or {}), lease_ms, current_approval()))

    def _propose_reconciling(
        self,
        request: bytes,
        reconcile: ReconcileHook | None,
        precondition: PreconditionProvider | None = None,
    ) -> Permit:
        try:
            return self._propose(request) if precondition is None else self._propose(request, precondition)
        except Ambiguous as refusal:
            if reconcile is None or refusal.effect_key is None:
                raise
            answer = reconcile(refusal.effect_key)
            if inspect.isawaitable(answer):
                raise InvalidInput("an async reconcile hook needs an async protected function") from None
            # The library applies the answer and proposes once more (unknown: still AMBIGUOUS).
            again = _reconciled(request, refusal.effect_key, answer)
        return self._propose(again) if precondition is None else self._propose(again, precondition)

    def _acquire(
        self,
        name: str,
        arguments: dict[str, Any],
        lease_ms: int | None,
        reconcile: ReconcileHook | None,
        wait: float | None,
        precondition: PreconditionProvider | None = None,
    ) -> Permit:
        request = self._request(name, arguments, lease_ms, current_approval())
        try:
            return self._propose_reconciling(request, reconcile, precondition)
        except ApprovalRequired as pending:
            if wait is None or not pending.request_id:
                raise
            if not self._wait_for_answer(pending.request_id, wait):
                raise
            presented = self._request(name, arguments, lease_ms, pending.request_id)
        return self._propose_reconciling(presented, reconcile, precondition)

    def _wait_for_answer(self, request_id: str, wait: float) -> bool:
        """Wait in the library (by the kernel's clock) for a human to answer; True when the
        request was answered (present it: granted permits, denied refuses as denied)."""
        record = self.wait_for_answer(request_id, wait)
        return isinstance(record, dict) and record.get("status") not in ("pending", "expired")

    # async twins: every C call in a worker thread, every wait an asyncio.sleep

    def _propose_handing_over(
        self,
        request: bytes,
        handoff: _Handoff,
        precondition: PreconditionProvider | None = None,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        """In the worker thread: propose, then hand the permit over, or record it as not
        executed right here when its caller already left (the loop may be gone by now)."""
        if precondition is None:
            permit = self._propose(request)
        else:
            permit = self._propose(request, precondition, loop)
        if not handoff.deliver(permit):
            _finish_unused(permit)

    async def _propose_async(self, request: bytes, precondition: PreconditionProvider | None = None) -> Permit:
        handoff = _Handoff()
        loop = asyncio.get_running_loop() if precondition is not None else None
        job = asyncio.ensure_future(
            asyncio.to_thread(self._propose_handing_over, request, handoff, precondition, loop)
        )
        try:
            await asyncio.shield(job)
        except BaseException as exc:
            # Cancelled, interrupted, or closed with the loop: the function will not run.
            unused = handoff.abandon()
            if unused is not None:
                # Not on the loop (a blocking C call), and not a daemon thread, so the
                # outcome lands even when the interpreter is exiting.
                try:
                    threading.Thread(target=_finish_unused, args=(unused,), name="warden-release").start()
                except RuntimeError:  # no new threads at interpreter shutdown: finish it here
                    _finish_unused(unused)
            if isinstance(exc, (asyncio.CancelledError, GeneratorExit)):
                job.add_done_callback(_swallow_result)
            raise
        return handoff.take()

    async def _propose_reconciling_async(
        self,
        request: bytes,
        reconcile: ReconcileHook | None,
        precondition: PreconditionProvider | None = None,
    ) -> Permit:
        try:
            return await self._propose_async(request, precondition)
        except Ambiguous as refusal:
            if reconcile is None or refusal.effect_key is None:
                raise
            key = refusal.effect_key
            if inspect.iscoroutinefunction(reconcile):
                answer = await reconcile(key)
            else:
                answer = await asyncio.to_thread(reconcile, key)
                if inspect.isawaitable(answer):
                    answer = await answer
            again = _reconciled(request, key, answer)
        return await self._propose_async(again, precondition)

    async def _acquire_async(
        self,
        name: str,
        arguments: dict[str, Any],
        lease_ms: int | None,
        reconcile: ReconcileHook | None,
        wait: float | None,
        precondition: PreconditionProvider | None = None,
    ) -> Permit:
        request = self._request(name, arguments, lease_ms, current_approval())
        try:
            return await self._propose_reconciling_async(request, reconcile, precondition)
        except ApprovalRequired as pending:
            if wait is None or not pending.request_id:
                raise
            if not await asyncio.to_thread(self._wait_for_answer, pending.request_id, wait):
                raise
            presented = self._request(name, arguments, lease_ms, pending.request_id)
        return await self._propose_reconciling_async(presented, reconcile, precondition)

    @staticmethod
    async def _finish_async(permit: Permit, function: str, payload: bytes, quiet: bool) -> None:
        # Shielded: once started, the outcome lands (and the permit is freed) even if the
        # caller is cancelled while it is being written.
        job = asyncio.ensure_future(asyncio.to_thread(permit._finish, function, payload, quiet))
        job.add_done_callback(_swallow_result)
        await asyncio.shield(job)

    def protect(
        self,
        name: str,
        *,
        reconcile: ReconcileHook | None = None,
        lease: float | None = None,
        wait: float | None = None,
        precondition: PreconditionProvider | None = None,
    ) -> Callable[[Callable[P, R]], Callable[P, R]]:
        """Make every call of the decorated function one proposed, decided, recorded action.

        The call's arguments (defaults included) are bound by name and proposed as `name`
        with the principal of the current `warden.context()` and the approval of the current
        `warden.with_approval()`. On a permit the function runs with the kernel's canonical
        arguments, and its return value is committed. `NotExecuted` records FAILED; any other
        exception (`KeyboardInterrupt` and `asyncio.CancelledError` included) records
        AMBIGUOUS. Either is re-raised unchanged. Refusals raise `warden.Refused` subclasses.

        `reconcile(effect_key)`: asked once when the effect is AMBIGUOUS; "committed" or
        "not_executed" resolves it and the proposal is retried once, "unknown" leaves it.
        `lease`: seconds this attempt holds the effect (overrides the document's).
        `wait`: seconds to wait for a human to answer an approval request, then present it
        (the library waits, judged by the kernel's clock).
        `precondition(action) -> state`: asked only when an approval is involved — when the
        request is made and again just before a granted approval is spent; a different state
        refuses with `ApprovalMismatch` (reason `precondition_changed`) and the approval stays
        granted. `action` is `{"name", "arguments", "principal", "resource", "environment"}`;
        the state is any JSON value (no floats). It runs on the thread that proposes (a worker
        thread for an async function, where an async provider is awaited on the loop); its
        exception is raised to the caller and nothing is requested or spent.
        """
        if not isinstance(name, str) or not name:
            raise InvalidInput("protect(name) needs a non-empty action name")
        if reconcile is not None and not callable(reconcile):
            raise InvalidInput(f"protect({name!r}, reconcile=...) must be callable")
        lease_ms = None if lease is None else _millis(lease, f"protect({name!r}, lease=...)")
        if wait is not None and (
            isinstance(wait, bool) or not isinstance(wait, (int, float)) or not wait >= 0
        ):
            raise InvalidInput(f"protect({name!r}, wait=...) must be a number of seconds >= 0")
        if precondition is not None and not callable(precondition):
            raise InvalidInput(f"protect({name!r}, precondition=...) must be callable")

        def decorator(fn: Callable[P, R]) -> Callable[P, R]:
            signature = _check_signature(name, fn)
            if inspect.iscoroutinefunction(fn):
                wrapper = self._async_wrapper(name, fn, signature, reconcile, lease_ms, wait, precondition)
            else:
                if precondition is not None and inspect.iscoroutinefunction(precondition):
                    raise InvalidInput(f"protect({name!r}): an async precondition needs an async function")
                wrapper = self._sync_wrapper(name, fn, signature, reconcile, lease_ms, wait, precondition)
            return cast("Callable[P, R]", functools.wraps(fn)(wrapper))

        return decorator

    def _sync_wrapper(
        self,
        name: str,
        fn: Callable[..., Any],
        signature: inspect.Signature,
        reconcile: ReconcileHook | None,
        lease_ms: int | None,
        wait: float | None,
        precondition: PreconditionProvider | None = None,
    ) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            arguments = _bind(signature, args, kwargs)
            permit = self._acquire(name, arguments, lease_ms, reconcile, wait, precondition)
            try:
                positional, keywords = _invocation(signature, permit.arguments)
            except BaseException as exc:
                permit._finish(_NOT_EXECUTED, b"not called: " + _describe(exc), True)
                raise
            token = _PERMIT.set(permit)
            try:
                result = fn(*positional, **keywords)
            except NotExecuted as exc:
                permit._finish(_NOT_EXECUTED, _describe(exc), True)
                raise
            except BaseException as exc:
                permit._finish(_AMBIGUOUS, _describe(exc), True)
                raise
            finally:
                _PERMIT.reset(token)
            permit._finish(*_result_payload(result), False)
            return result

        return wrapper

    def _async_wrapper(
        self,
        name: str,
        fn: Callable[..., Awaitable[Any]],
        signature: inspect.Signature,
        reconcile: ReconcileHook | None,
        lease_ms: int | None,
        wait: float | None,
        precondition: PreconditionProvider | None = None,
    ) -> Callable[..., Awaitable[Any]]:
        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            arguments = _bind(signature, args, kwargs)
            permit = await self._acquire_async(name, arguments, lease_ms, reconcile, wait, precondition)
            try:
                positional, keywords = _invocation(signature, permit.arguments)
            except BaseException as exc:
                await self._finish_async(permit, _NOT_EXECUTED, b"not called: " + _describe(exc), True)
                raise
            token = _PERMIT.set(permit)
            try:
                result = await fn(*positional, **keywords)
            except NotExecuted as exc:
                await self._finish_async(permit, _NOT_EXECUTED, _describe(exc), True)
                raise
            except BaseException as exc:
                await self._finish_async(permit, _AMBIGUOUS, _describe(exc), True)
                raise
            finally:
                _PERMIT.reset(token)
            await self._finish_async(permit, *_result_payload(result), False)
            return result

        return wrapper

    # -- approvals --

    def approve(
        self,
        approval_id: str,
        *,
        by: str,
        ttl: float | None = None,
        agent: str | None = None,
        verified: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Grant a pending request as `by` (refused when `by` is the requester, in any spelling:
        compared after Unicode NFKC case folding). `ttl`: seconds the grant stays usable from
        now, instead of until the request's own expiry.

        The approver is a principal: `agent` (default: the part of `by` before a `:`, else
        "host") and the user `by`. `verified={"issuer": ..., "claims": {...}}` says your
        identity provider vouched for them (a rule's `roles` are read from `claims["roles"]`);
        without it the approver is asserted and counts only where one approver with no role is
        required. An M-of-N request stays `pending` until enough entitled approvers granted."""
        if agent is None and verified is None:
            ttl_ms = 0 if ttl is None else _millis(ttl, "approve(ttl=...)")
            with self._using() as handle:
                data = self._lib.call_out(
                    "warden_approval_grant",
                    handle,
                    *_ffi.arg(_text(approval_id, "approval id")),
                    *_ffi.arg(_text(by, "approve(by=...)")),
                    ttl_ms,
                )
            return _record(data)
        ttl_ms = None if ttl is None else _millis(ttl, "approve(ttl=...)")
        return self._answer(approval_id, "grant", by, agent, verified, ttl_ms=ttl_ms)

    def deny(
        self,
        approval_id: str,
        *,
        by: str,
        reason: str | None = None,
        agent: str | None = None,
        verified: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Deny a pending request as `by`, with an optional one-line reason (`agent` and
        `verified` as for `approve`). A deny by an entitled approver denies the request."""
        if agent is None and verified is None:
            with self._using() as handle:
                data = self._lib.call_out(
                    "warden_approval_deny",
                    handle,
                    *_ffi.arg(_text(approval_id, "approval id")),
                    *_ffi.arg(_text(by, "deny(by=...)")),
                    *_ffi.arg(_optional_text(reason, "deny(reason=...)")),
                )
            return _record(data)
        return self._answer(approval_id, "deny", by, agent, verified, note=reason)

    def _answer(
        self,
        approval_id: str,
        decision: str,
        by: str,
        agent: str | None,
        verified: Mapping[str, Any] | None,
        ttl_ms: int | None = None,
        note: str | None = None,
    ) -> dict[str, Any]:
        if agent is None:
            agent, _, user = by.partition(":") if ":" in by else ("host", "", by)
        else:
            user = by
        answer: dict[str, Any] = {
            "approval_id": approval_id,
            "decision": decision,
            "approver": {"agent": agent, "user": user},
            "verified": None if verified is None else dict(verified),
            "ttl_ms": ttl_ms,
            "note": note,
        }
        with self._using() as handle:
            data = self._lib.call_out("warden_approval_answer", handle, *_ffi.arg(_dumps(answer, "the answer")))
        return _record(data)

    def wait_for_answer(self, approval_id: str, timeout: float) -> dict[str, Any] | None:
        """Block until the request is answered, expires, or `timeout` seconds pass — judged by
        the library's clock — and return the record as it then stands (`"pending"`: the wait
        ran out; `"expired"`: it lapsed), or `None` when there is no such request."""
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not math.isfinite(timeout):
            raise InvalidInput(f"wait_for_answer(timeout=...) must be a number of seconds, not {timeout!r}")
        if timeout < 0:
            raise InvalidInput(f"wait_for_answer(timeout=...) must be 0 or more seconds, got {timeout!r}")
        timeout_ms = math.ceil(timeout * 1000)
        with self._using() as handle:
            data = self._lib.call_out(
                "warden_approval_wait", handle, *_ffi.arg(_text(approval_id, "approval id")), timeout_ms
            )
        return _maybe_record(data)

    async def wait_for_answer_async(self, approval_id: str, timeout: float) -> dict[str, Any] | None:
        """`wait_for_answer` in a worker thread."""
        return await asyncio.to_thread(self.wait_for_answer, approval_id, timeout)

    def on_approval_request(self, hook: ApprovalHook | None) -> None:
        """Call `hook(request)` once for each approval request this handle's proposals create
        (not for a re-proposal that finds its request still pending), with the request record,
        arguments included. It runs on the library's notification thread, never on the caller's,
        one call at a time; an exception is logged and recorded as a failed notification and
        never fails the action. `None` removes it; once this returns the previous hook is not
        running and will not be called again. Must not be called from inside the hook."""
        if hook is not None and not callable(hook):
            raise InvalidInput(f"on_approval_request() needs a callable or None, not {hook!r}")
        callback = _ffi.APPROVAL_FN() if hook is None else _approval_hook_callback(hook)
        with self._using() as handle:
            self._lib.call("warden_approval_notify_set", handle, callback, None)
        # The library stopped calling the previous one: it may go.
        self._approval_hook = None if hook is None else callback
        if hook is None:
            _HOOKED.discard(self)
        else:
            _HOOKED.add(self)

    def approval(self, approval_id: str) -> dict[str, Any] | None:
        """One approval record, or `None` when the library reports none."""
        with self._using() as handle:
            data = self._lib.call_out(
                "warden_approval_get", handle, *_ffi.arg(_text(approval_id, "approval id"))
            )
        return _maybe_record(data)

    def pending(self) -> list[dict[str, Any]]:
        """The approval requests still waiting for a human."""
        with self._using() as handle:
            return _records(self._lib.call_out("warden_approvals_pending", handle))

    # -- authority --

    def delegate(
        self,
        parent_id: str,
        grant: Mapping[str, Any],
        *,
        by: Principal | Mapping[str, Any],
        by_expires_at: float | None = None,
        via: str = "api",
    ) -> str:
        """Delegate part of `parent_id` (a root grant id or a `dlg_…` id) to the grantee
        `grant` names, as `by` (`{"agent": …, "user": …}` or a `Principal`), and return the new
        `dlg_…` id. `grant` has the keys of a grant minus `id` (assigned here); every dimension
        the parent constrains must be stated at least as narrowly — omitting one is refused.
        `by_expires_at` (Unix seconds) is when `by`'s credential lapses. Raises
        `AuthorityEscalation` (`.reason`, `.dimension`) when the delegation is refused."""
        if not isinstance(grant, Mapping):
            raise InvalidInput("delegate(grant=...) must be a mapping with the keys of a grant")
        request: dict[str, Any] = {
            "parent_id": parent_id,
            "grant": dict(grant),
            "by": _principal_json(by, "delegate(by=...)"),
            "by_expires_at_ms": None if by_expires_at is None else _millis(by_expires_at, "by_expires_at"),
            "via": via,
        }
        with self._using() as handle:
            data = self._lib.call_out("warden_delegate", handle, *_ffi.arg(_dumps(request, "the delegation")))
        created = _record(data)
        return str(created["delegation_id"])

    def revoke(self, delegation_id: str, *, by: Principal | Mapping[str, Any] | str | None = None) -> bool:
        """Revoke a delegation: `True` when this call revoked it, `False` when it already was.
        Every delegation beneath it is denied from now on. An unknown id raises `NotFound`."""
        with self._using() as handle:
            data = self._lib.call_out(
                "warden_revoke",
                handle,
                *_ffi.arg(_text(delegation_id, "delegation id")),
                *_ffi.arg(_optional_text(_revoker(by), "revoke(by=...)")),
            )
        return bool(_record(data)["revoked"])

    def revoke_sweep(
        self,
        *,
        created_by: Principal | Mapping[str, Any] | None = None,
        under: str | None = None,
        by: Principal | Mapping[str, Any] | str | None = None,
    ) -> list[dict[str, Any]]:
        """Revoke, in one write, every delegation `created_by` made (all its users when the
        user is None) or every delegation beneath `under`; returns `[{"delegation_id",
        "revoked"}]` (`revoked` False: it already was)."""
        request: dict[str, Any] = {"by": _revoker(by)}
        if created_by is not None:
            request["created_by"] = _principal_json(created_by, "revoke_sweep(created_by=...)")
        if under is not None:
            request["under"] = under
        with self._using() as handle:
            data = self._lib.call_out("warden_revoke_sweep", handle, *_ffi.arg(_dumps(request, "the sweep")))
        return _records(data)

    def delegations(self) -> list[dict[str, Any]]:
        """Every stored delegation in id order, revoked ones included (`revoked`,
        `revoked_at`, `revoked_by`), with its grant, creator and `created_via`."""
        found: list[dict[str, Any]] = []
        after: str | None = None
        while True:
            with self._using() as handle:
                page = _records(
                    self._lib.call_out(
                        "warden_delegations", handle, *_ffi.arg(_optional_text(after, "after")), _DELEGATION_PAGE
                    )
                )
            found.extend(page)
            if len(page) < _DELEGATION_PAGE:
                return found
            after = str(page[-1]["delegation_id"])

    # -- effects, receipts, events --

    def resolve(self, effect_key: str, to: str, *, by: str) -> dict[str, Any]:
        """A human says what happened to an AMBIGUOUS effect: "committed" or "failed"."""
        with self._using() as handle:
            data = self._lib.call_out(
                "warden_effect_resolve",
                handle,
                *_ffi.arg(_text(effect_key, "effect key")),
                *_ffi.arg(_text(to, "resolve(to)")),
                *_ffi.arg(_text(by, "resolve(by=...)")),
            )
        return _record(data)

    def effect(self, effect_key: str) -> dict[str, Any] | None:
        """The effect record for `effect_key`, or `None` when there is none."""
        with self._using() as handle:
            data = self._lib.call_out("warden_effect_get", handle, *_ffi.arg(_text(effect_key, "effect key")))
        return _maybe_record(data)

    def effects(self, state: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        """Effect records, optionally only those in `state`, at most `limit` (default: the
        library's `list_limit`; 0: all)."""
        with self._using() as handle:
            data = self._lib.call_out(
                "warden_effects_list",
                handle,
                *_ffi.arg(_optional_text(state, "effects(state=...)")),
                _count(_or_default(limit, "list_limit"), "limit"),
            )
        return _records(data)

    def receipts(self, from_seq: int | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        """Receipts from sequence number `from_seq` (default: the first), at most `limit`
        (default: the library's `list_limit`; 0: all)."""
        first = _count(_or_default(from_seq, "from_seq"), "from_seq")
        count = _count(_or_default(limit, "list_limit"), "limit")
        with self._using() as handle:
            data = self._lib.call_out("warden_receipts_list", handle, first, count)
        return _records(data)

    def verify_chain(self) -> dict[str, Any]:
        """Walk the receipt chain; the report (`ok`, `verified`, `breaks`, ...)."""
        with self._using() as handle:
            return _record(self._lib.call_out("warden_chain_verify", handle))

    def events(self, after: int | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        """Events with an id greater than `after` (default: from the first), at most `limit`
        (default: the library's `list_limit`; 0: all)."""
        first = _count(_or_default(after, "after_id"), "after")
        count = _count(_or_default(limit, "list_limit"), "limit")
        with self._using() as handle:
            data = self._lib.call_out("warden_events_list", handle, first, count)
        return _records(data)


    # -- sights: confined reads --

    def sources(self) -> dict[str, Any]:
        """The configured windows as an agent may name them (no origin, path or credential)."""
        with self._using() as handle:
            return _record(self._lib.call_out("warden_sight_sources", handle))

    def tool_schema(self) -> list[dict[str, Any]]:
        """The four tool definitions (`warden_sources`, `warden_query`, `warden_history`,
        `warden_diff`), each `{"name", "description", "input_schema"}`, for an LLM."""
        with self._using() as handle:
            return _records(self._lib.call_out("warden_sight_tool_schema", handle))

    def set_credential_provider(self, provider: CredentialProvider | None) -> None:
        """Resolve sight credentials with `provider(reference) -> str | None`.

        `None` (from the provider) means "no value": the query raises `FetchFault` with reason
        `credential_unavailable`, and nothing is sent. So does a provider that raises or
        answers something other than a str; its exception is logged (never the value) and
        never propagates. `set_credential_provider(None)` restores the default (environment
        variables named by the reference, or `credentials_dir`).

        The provider is called on the thread running the query (the caller's thread for
        `query`, a worker thread for `query_async`), once per reference per query, and
        never cached; it must be safe to call from any thread. Queries already running keep
        the provider they started with (it is kept alive until they return).
        """
        if provider is not None and not callable(provider):
            raise InvalidInput(f"set_credential_provider() needs a callable or None, not {provider!r}")
        callback = _ffi.CREDENTIAL_FN() if provider is None else _credential_callback(self._lib, provider)
        with self._using() as handle:
            with self._sight_lock:
                self._lib.call("warden_sight_credentials_set", handle, callback, None)
                # The library may call any callback registered while a query runs; drop the
                # older ones only when no query is running.
                self._callbacks = [*self._callbacks, callback] if self._queries else [callback]

    @contextmanager
    def _querying(self) -> Iterator[None]:
        with self._sight_lock:
            self._queries += 1
        try:
            yield
        finally:
            with self._sight_lock:
                self._queries -= 1
                if self._queries == 0:
                    self._callbacks = self._callbacks[-1:]

    def _sight_query(self, request: bytes, cancel: CancelToken | None) -> dict[str, Any]:
        return self._cancellable("warden_sight_query", (), request, cancel)

    def _cancellable(
        self, function: str, leading: tuple[Any, ...], request: bytes, cancel: CancelToken | None
    ) -> dict[str, Any]:
        if cancel is not None and not isinstance(cancel, CancelToken):
            raise InvalidInput(f"cancel= must be a warden.CancelToken or None, not {type(cancel).__name__}")
        with self._using() as handle, self._querying():
            if cancel is None:
                data = self._lib.call_out(function, handle, *leading, *_ffi.arg(request), None)
            else:
                with cancel._held() as pointer:
                    data = self._lib.call_out(function, handle, *leading, *_ffi.arg(request), pointer)
        return _record(data)

    def _sight_call(self, function: str, request: bytes) -> dict[str, Any]:
        with self._using() as handle:
            return _record(self._lib.call_out(function, handle, *_ffi.arg(request)))

    @staticmethod
    def _query_request(
        source: str,
        endpoint: str,
        params: Mapping[str, Any] | None,
        fields: Sequence[str] | None,
        snapshot: bool,
    ) -> bytes:
        query: dict[str, Any] = {"source": source, "endpoint": endpoint}
        if params is not None:
            query["params"] = dict(params) if isinstance(params, Mapping) else params
        if fields is not None:
            query["fields"] = list(fields) if isinstance(fields, (list, tuple)) else fields
        if snapshot is not False:
            query["snapshot"] = snapshot
        return _dumps(query, "the sight query")

    def query(
        self,
        source: str,
        endpoint: str,
        params: Mapping[str, Any] | None = None,
        fields: Sequence[str] | None = None,
        snapshot: bool = False,
        cancel: CancelToken | None = None,
    ) -> dict[str, Any]:
        """Read one configured window: Warden builds the GET from the configuration.

        Returns `{"source", "endpoint", "fetchedAt", "status", "values": {alias: value},
        "warnings", "warningsTruncated", "truncation", "redactions", "snapshotId"?}`.
        `truncation` maps an alias something was cut from to `{"depth"?, "items"?, "strings"?}`,
        each `{"shown", "total"}` plus a count (`"containers"`, or `"strings"`).
        `snapshot=True` keeps the result as an append-only snapshot (`snapshotId`).

        Raises `OutOfWindow` (nothing was sent; `.reason` is `unknown_source`,
        `unknown_endpoint`, `invalid_params` or `unknown_field`), `FetchFault` (`.reason`:
        `credential_unavailable`, `redirect_refused`, `response_too_large`, `timeout`,
        `aborted`, `upstream_error`, `network_error`, `invalid_response`) or `ConfigError`.
        Blocks for at most the source's `timeout_ms` (the GIL is released); `cancel` aborts it
        from another thread. The credential provider, if set, runs on this thread.
        """
        return self._sight_query(self._query_request(source, endpoint, params, fields, snapshot), cancel)

    async def query_async(
        self,
        source: str,
        endpoint: str,
        params: Mapping[str, Any] | None = None,
        fields: Sequence[str] | None = None,
        snapshot: bool = False,
        cancel: CancelToken | None = None,
    ) -> dict[str, Any]:
        """`query` in a worker thread. Cancelling the awaiting task aborts the query: through
        `cancel` when given (which aborts every query sharing that token), else through a
        token of its own. The credential provider runs on the worker thread."""
        request = self._query_request(source, endpoint, params, fields, snapshot)
        token = CancelToken() if cancel is None else cancel
        job = asyncio.ensure_future(asyncio.to_thread(self._sight_query, request, token))
        if cancel is None:
            job.add_done_callback(functools.partial(_release_token, token=token))
        try:
            return await asyncio.shield(job)
        except asyncio.CancelledError:
            token.cancel()
            job.add_done_callback(_swallow_result)
            raise

    def history(
        self,
        source: str,
        endpoint: str,
        params: Mapping[str, Any] | None = None,
        cursor: str | None = None,
        limit: int | None = None,
    ) -> dict[str, Any]:
        """One page of a window's snapshots, newest first: `{"source", "endpoint", "params"?,
        "snapshots", "hasMore", "nextCursor"?}`. Without `params`, every window of the
        endpoint; `cursor` is the previous page's `nextCursor`; `limit` 1..100 (default 20).
        A bad cursor or limit raises `OutOfWindow` with reason `invalid_page`."""
        request: dict[str, Any] = {"source": source, "endpoint": endpoint}
        if params is not None:
            request["params"] = dict(params) if isinstance(params, Mapping) else params
        if cursor is not None:
            request["cursor"] = cursor
        if limit is not None:
            request["limit"] = limit
        return self._sight_call("warden_sight_history", _dumps(request, "the history request"))

    async def history_async(
        self,
        source: str,
        endpoint: str,
        params: Mapping[str, Any] | None = None,
        cursor: str | None = None,
        limit: int | None = None,
    ) -> dict[str, Any]:
        """`history` in a worker thread."""
        return await asyncio.to_thread(self.history, source, endpoint, params, cursor, limit)

    def diff(self, a: str, b: str) -> dict[str, Any]:
        """Compare two snapshots of one window: `{"a", "b", "source", "endpoint", "params",
        "fetchedAt", "entries": [{"change", "path", "before"?, "after"?}], "total", "omitted"}`.
        An unknown id raises `NotFound` (reason `snapshot_not_found`); snapshots of different
        windows raise `OutOfWindow`."""
        return self._sight_call("warden_sight_diff", _dumps({"a": a, "b": b}, "the diff request"))

    async def diff_async(self, a: str, b: str) -> dict[str, Any]:
        """`diff` in a worker thread."""
        return await asyncio.to_thread(self.diff, a, b)

    def call_tool(self, name: str, arguments: Any = None, *, cancel: CancelToken | None = None) -> Any:
        """Run one tool call an LLM made against `tool_schema()`, its arguments unchanged.

        `name` is `warden_sources`, `warden_query`, `warden_history` or `warden_diff`;
        `arguments` is the call's input object as the model sent it (`None` is `{}`). It goes
        to the library as is, so any key the schema does not declare (`url`, `headers`, ...)
        is refused there with `OutOfWindow`, before any I/O.
        """
        arguments = {} if arguments is None else arguments
        tool = _ffi.arg(_text(name, "call_tool(name)"))
        return self._cancellable("warden_sight_call_tool", tool, _dumps(arguments, f"the {name} arguments"), cancel)


# ---- pure functions ----------------------------------------------------------------------------


def canonical(value: Any) -> str:
    """The canonical JSON text of `value` (sorted keys, exact integers; floats are refused)."""
    data = _ffi.library().call_out("warden_canonical", *_ffi.arg(_dumps(value, "canonical(value)")))
    return data.decode("utf-8")


def action_hash(
    name: str,
    arguments: dict[str, Any],
    agent: str,
    user: str | None = None,
    resource: str | None = None,
    environment: str | None = None,
) -> str:
    """The action hash (`sha256:…`) the kernel computes for this action (`environment`
    absent: the library's default)."""
    action: dict[str, Any] = {
        "name": name,
        "arguments": arguments,
        "principal": {"agent": agent, "user": user},
        "resource": resource,
    }
    if environment is not None:
        action["environment"] = environment
    data = _ffi.library().call_out("warden_action_hash", *_ffi.arg(_dumps(action, "the action")))
    return data.decode("utf-8")
