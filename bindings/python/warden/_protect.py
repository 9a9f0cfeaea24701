"""Proposing and `@w.protect`: a Python call turned into one proposed, decided, recorded action.

The kernel decides; this module binds the call's arguments by name, proposes them with one
`warden_propose_recovering` call (the wait, the precondition provider and the reconcile hook as
its options: the library owns the reconcile-then-retry and wait-then-present loop), runs the
function with the permit's canonical arguments and reports its outcome. The async face is the
same blocking call made in a worker thread (Warden's own pool, `_threads.in_thread`), never on
the event loop; an async hook is awaited on the loop from there.
"""

from __future__ import annotations

import asyncio
import ctypes
import functools
import inspect
import json
import threading
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, TypeVar, Union, cast

from ._threads import in_thread
from . import _ffi, _telemetry
from ._context import _PERMIT, current_approval, current_hop, current_principal, current_task
from ._convert import _awaited, _describe, _dumps, _loads, _millis, _swallow_result
from ._errors import InvalidInput, NotExecuted
from ._approvals import Approvals
from ._permit import _AMBIGUOUS, _NOT_EXECUTED, Permit, _finish_unused, _Handoff, _result_payload

P = ParamSpec("P")
R = TypeVar("R")

#: What a reconcile hook answers about an AMBIGUOUS effect.
ReconcileAnswer = str  # "committed" | "not_executed" | "unknown"
ReconcileHook = Callable[[str], Union[ReconcileAnswer, Awaitable[ReconcileAnswer]]]
#: A precondition provider: the action (name, arguments, principal, resource, environment) in,
#: the state it depends on (any JSON value) out; may be async for an async protected function.
PreconditionProvider = Callable[[dict[str, Any]], Any]


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


def _answered(hook: Callable[[Any], Any], argument: Any, loop: asyncio.AbstractEventLoop | None, what: str) -> Any:
    """`hook(argument)` on this (the proposing) thread; an awaitable answer is awaited on
    `loop`, the caller's event loop, which only an async protected function has."""
    answer = hook(argument)
    if inspect.isawaitable(answer):
        if loop is None:
            _close_awaitable(answer)
            raise InvalidInput(f"an async {what} needs an async protected function")
        answer = asyncio.run_coroutine_threadsafe(_awaited(answer), loop).result()
    return answer


def _close_awaitable(answer: Any) -> None:
    close = getattr(answer, "close", None)
    if callable(close):
        close()


class _Hooks:
    """The options of one `warden_propose_recovering` call: the wait and the host's callbacks
    as C functions, kept alive for the call; what a callback raised is kept in `failures` and
    re-raised in place of the library's INVALID_INPUT."""

    def __init__(
        self,
        lib: _ffi.Library,
        wait_ms: int,
        precondition: PreconditionProvider | None,
        reconcile: ReconcileHook | None,
        loop: asyncio.AbstractEventLoop | None,
    ) -> None:
        self.failures: list[BaseException] = []

        def provide(user_data: int | None, action: int | None, action_len: int, sink: int | None) -> int:
            try:
                described = json.loads(ctypes.string_at(action, action_len)) if action else {}
                state = _answered(cast("PreconditionProvider", precondition), described, loop, "precondition provider")
                payload = _dumps(state, "the precondition state")
                return 0 if lib.fn("warden_precondition_put")(sink, payload, len(payload)) == 0 else 1
            except BaseException as exc:  # noqa: BLE001 - nothing may unwind into C
                self.failures.append(exc)
                return 1

        def answer(user_data: int | None, key: int | None, key_len: int, sink: int | None) -> int:
            try:
                effect_key = ctypes.string_at(key, key_len).decode("utf-8") if key else ""
                said = _answered(cast("ReconcileHook", reconcile), effect_key, loop, "reconcile hook")
                text = (said if isinstance(said, str) else repr(said)).encode("utf-8")
                return 0 if lib.fn("warden_reconcile_put")(sink, text, len(text)) == 0 else 1
            except BaseException as exc:  # noqa: BLE001 - nothing may unwind into C
                self.failures.append(exc)
                return 1

        self.options = _ffi.ProposeOptions(
            wait_ms=wait_ms,
            poll_ms=0,
            precondition=_ffi.PRECONDITION_FN() if precondition is None else _ffi.PRECONDITION_FN(provide),
            reconcile=_ffi.RECONCILE_FN() if reconcile is None else _ffi.RECONCILE_FN(answer),
            user_data=None,
        )


def _wait_ms(wait: float | None) -> int:
    """`wait=` seconds as the library's `wait_ms` (0: no wait), at most what a u64 holds."""
    return 0 if wait is None else min(_millis(wait, "wait", zero=True), 2**64 - 1)


class Protecting(Approvals):
    """`Warden`'s proposing calls: `propose`, `protect` and the one library call under them."""

    def _request(
        self,
        name: str,
        arguments: dict[str, Any],
        lease_ms: int | None,
        approval_id: str | None,
        call: _telemetry.Call | None = None,
    ) -> bytes:
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
                # The caller's trace context, which the call's receipts record.
                "traceparent": None if call is None else call.traceparent(),
            },
            f"the arguments of {name}",
        )

    def _propose(
        self,
        request: bytes,
        precondition: PreconditionProvider | None = None,
        reconcile: ReconcileHook | None = None,
        wait: float | None = None,
        loop: asyncio.AbstractEventLoop | None = None,
        call: _telemetry.Call | None = None,
    ) -> Permit:
        """One `warden_propose_recovering` call (`warden_propose_traced` when `call` traces it):
        the permit, or the refusal it ends with."""
        hooks = _Hooks(self._lib, _wait_ms(wait), precondition, reconcile, loop)
        trace = None if call is None else _telemetry._Trace(self._lib)
        with self._held() as handle:
            try:
                if trace is None:
                    pointer, described = self._lib.call_handle_described(
                        "warden_propose_recovering", handle, *_ffi.arg(request), ctypes.byref(hooks.options)
                    )
                else:
                    with trace._held() as traced:
                        pointer, described = self._lib.call_handle_described(
                            "warden_propose_traced", handle, *_ffi.arg(request), ctypes.byref(hooks.options), traced
                        )
            except BaseException as exc:
                if call is not None and trace is not None:
                    _telemetry.refused(call, trace)
                if isinstance(exc, InvalidInput) and hooks.failures:
                    raise hooks.failures[0] from None
                raise
        traced = None if call is None or trace is None else _telemetry.Traced(call, trace)
        try:
            info = _loads(described)
            if not isinstance(info, dict):
                raise InvalidInput("warden_propose_recovering described the permit with something other than an object")
        except BaseException as exc:
            permit = Permit(self._lib, pointer, traced=traced)
            permit._finish(_NOT_EXECUTED, b"reading the permit failed: " + _describe(exc), True)
            raise
        return Permit(self._lib, pointer, info, traced)

    def propose(self, name: str, arguments: dict[str, Any] | None = None, *, lease: float | None = None) -> Permit:
        """Propose one action with the current principal and approval; the permit, or a refusal.

        The lower-level path under `protect`: report exactly one outcome on the permit.
        """
        lease_ms = None if lease is None else _millis(lease, "lease")
        call = self._telemetry.begin()
        request = self._request(name, dict(arguments or {}), lease_ms, current_approval(), call)
        return self._propose(request, None, None, None, None, call)

    def _propose_handing_over(self, handoff: _Handoff, request: bytes, *hooks: Any) -> None:
        """In the worker thread: propose, then hand the permit over, or record it as not
        executed right here when its caller already left (the loop may be gone by now)."""
        permit = self._propose(request, *hooks)
        if not handoff.deliver(permit):
            _finish_unused(permit)

    async def _propose_async(
        self,
        request: bytes,
        precondition: PreconditionProvider | None,
        reconcile: ReconcileHook | None,
        wait: float | None,
        call: _telemetry.Call | None = None,
    ) -> Permit:
        """`_propose` in a worker thread, its async hooks awaited on this loop."""
        handoff = _Handoff()
        loop = asyncio.get_running_loop()
        job = asyncio.ensure_future(
            in_thread(self._propose_handing_over, handoff, request, precondition, reconcile, wait, loop, call)
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

    @staticmethod
    async def _finish_async(permit: Permit, function: str, payload: bytes, quiet: bool) -> None:
        # Shielded: once started, the outcome lands (and the permit is freed) even if the
        # caller is cancelled while it is being written.
        job = asyncio.ensure_future(in_thread(permit._finish, function, payload, quiet))
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
        "not_executed" resolves it and the proposal is retried once, "unknown" leaves it. It
        runs where the precondition runs (below); its exception is raised to the caller.
        `lease`: seconds this attempt holds the effect (overrides the document's).
        `wait`: seconds to wait for a human to answer an approval request, then present it
        (the library waits, judged by the kernel's clock; any length, over a day too — the
        request's own expiry ends it first; 0 or None: no wait).
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
            call = self._telemetry.begin()
            request = self._request(name, arguments, lease_ms, current_approval(), call)
            permit = self._propose(request, precondition, reconcile, wait, None, call)
            try:
                positional, keywords = _invocation(signature, permit.arguments)
            except BaseException as exc:
                permit._finish(_NOT_EXECUTED, b"not called: " + _describe(exc), True)
                raise
            token = _PERMIT.set(permit)
            try:
                with permit._current():
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
            call = self._telemetry.begin()
            request = self._request(name, arguments, lease_ms, current_approval(), call)
            permit = await self._propose_async(request, precondition, reconcile, wait, call)
            try:
                positional, keywords = _invocation(signature, permit.arguments)
            except BaseException as exc:
                await self._finish_async(permit, _NOT_EXECUTED, b"not called: " + _describe(exc), True)
                raise
            token = _PERMIT.set(permit)
            try:
                with permit._current():
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
