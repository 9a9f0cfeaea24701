"""Approvals: answering, waiting for and listing the requests a human decides, and the hook
told of each new request."""

from __future__ import annotations

import asyncio
import atexit
import ctypes
import inspect
import json
import logging
import weakref
from collections.abc import Callable, Mapping
from typing import Any

from ._threads import in_thread
from . import _ffi
from ._convert import _awaited, _json_arg, _maybe_record, _millis, _optional_text_arg, _record, _records, _text_arg
from ._errors import InvalidInput
from ._managed import Managed

_LOG = logging.getLogger("warden")

#: A hook told of each new approval request (the request record, arguments included).
ApprovalHook = Callable[[dict[str, Any]], Any]


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


_HOOKED: "weakref.WeakSet[Approvals]" = weakref.WeakSet()


@atexit.register
def _unhook_at_exit() -> None:
    """No notification thread may call into an interpreter that is shutting down."""
    for w in list(_HOOKED):
        try:
            w.on_approval_request(None)
        except Exception:  # noqa: BLE001 - best effort at exit
            pass


class Approvals(Managed):
    """`Warden`'s approval calls."""

    _approval_hook: Any = None

    def approve(
        self,
        approval_id: str,
        *,
        by: str,
        ttl: float | None = None,
        agent: str | None = None,
        verified: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Grant a pending request as `by` (refused when `by` is the requester: any of its
        parts, agent or user, in any spelling or look-alike, or its verified identity; the
        library compares). `ttl`: seconds the grant stays usable from now, instead of until the
        request's own expiry.

        The approver is a principal: `agent` and the user `by`, or without `agent` the name `by`
        as the library reads it (`USER`, `AGENT:USER`, `AGENT/USER`; the agent "host" when it
        gives none; a name it cannot read is refused, naming it).
        `verified={"issuer": ..., "claims": {...}}` says your identity provider vouched for them
        (a rule's `roles` are read from `claims["roles"]`, their identity from `claims["sub"]`);
        without it the approver is asserted and counts only where one approver with no role is
        required. An M-of-N request stays `pending` until enough entitled approvers granted."""
        if agent is None and verified is None:
            ttl_ms = 0 if ttl is None else _millis(ttl, "approve(ttl=...)")
            data = self._call_out(
                "warden_approval_grant",
                *_text_arg(approval_id, "approval id"),
                *_text_arg(by, "approve(by=...)"),
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
            data = self._call_out(
                "warden_approval_deny",
                *_text_arg(approval_id, "approval id"),
                *_text_arg(by, "deny(by=...)"),
                *_optional_text_arg(reason, "deny(reason=...)"),
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
        # Without `agent`, the library parses `by` (approval::person::parse_name): one rule, one place.
        approver: Any = by if agent is None else {"agent": agent, "user": by}
        answer: dict[str, Any] = {
            "approval_id": approval_id,
            "decision": decision,
            "approver": approver,
            "verified": None if verified is None else dict(verified),
            "ttl_ms": ttl_ms,
            "note": note,
        }
        return _record(self._call_out("warden_approval_answer", *_json_arg(answer, "the answer")))

    def approve_scoped(
        self,
        approval_id: str,
        *,
        by: str,
        scope: Mapping[str, Any],
        agent: str | None = None,
        verified: Mapping[str, Any] | None = None,
        action_hash: str | None = None,
    ) -> dict[str, Any]:
        """Grant a pending request as `by` and, in the same write, make a scoped grant: the next
        `scope["uses"]` proposals of the same action, by the same requester, decided by the same
        rule, whose arguments have the scope's shape, are allowed without asking a human until
        `scope["minutes"]` pass (their permits name `scoped_grant_id`).

        `scope` is `{"uses": int, "minutes": int, "fixed": [pointer, ...], "at_most": {pointer:
        number, ...}}`: `fixed` JSON pointers (`"/customer_id"`) must equal the approved action's
        values, `at_most` pointers are numeric arguments bounded from above. Only a rule whose
        document sets `approval: {scoped: {max_uses, max_minutes}}` allows it, within those caps;
        anything else is refused (`InvalidInput`, naming what) and nothing changes. `by`,
        `agent` and `verified` as for `approve`; `action_hash` refuses unless the request binds
        that action. Returns `{"grant": {...}, "approval": {...}, "receipt_id", "receipt_seq"}`."""
        if not isinstance(scope, Mapping):
            raise InvalidInput(f"approve_scoped(scope=...) must be a mapping, not {type(scope).__name__}")
        # Without `agent`, the library parses `by` (approval::person::parse_name): one rule, one place.
        approver: Any = by if agent is None else {"agent": agent, "user": by}
        answer: dict[str, Any] = {
            "approval_id": approval_id,
            "approver": approver,
            "verified": None if verified is None else dict(verified),
            "action_hash": action_hash,
            "scope": dict(scope),
        }
        return _record(self._call_out("warden_approval_grant_scoped", *_json_arg(answer, "the scoped answer")))

    def scoped_grants(self, live_only: bool = True) -> list[dict[str, Any]]:
        """The scoped grants by id: those that may still be spent, or with `live_only=False`
        every one ever made (`state`: "live", "used_up", "expired" or "revoked")."""
        if not isinstance(live_only, bool):
            raise InvalidInput(f"scoped_grants(live_only=...) must be True or False, not {live_only!r}")
        return _records(self._call_out("warden_scoped_grants", live_only))

    def revoke_scoped_grant(self, grant_id: str, *, by: str, reason: str) -> dict[str, Any]:
        """Revoke a scoped grant ("sgr_..."): no later proposal is covered by it. `by` and
        `reason` are required, one plain line each; an unknown grant is `NotFound`, one revoked
        already `InvalidInput`, and a refusal changes nothing. Returns `{"grant": {...},
        "approval": None, "receipt_id", "receipt_seq"}`."""
        data = self._call_out(
            "warden_scoped_grant_revoke",
            *_text_arg(grant_id, "grant id"),
            *_text_arg(by, "revoke_scoped_grant(by=...)"),
            *_text_arg(reason, "revoke_scoped_grant(reason=...)"),
        )
        return _record(data)

    def wait_for_answer(self, approval_id: str, timeout: float) -> dict[str, Any] | None:
        """Block until the request is answered, expires, or `timeout` seconds pass — judged by
        the library's clock — and return the record as it then stands (`"pending"`: the wait
        ran out; `"expired"`: it lapsed), or `None` when there is no such request."""
        timeout_ms = _millis(timeout, "wait_for_answer(timeout=...)", zero=True)
        data = self._call_out("warden_approval_wait", *_text_arg(approval_id, "approval id"), timeout_ms)
        return _maybe_record(data)

    async def wait_for_answer_async(self, approval_id: str, timeout: float) -> dict[str, Any] | None:
        """`wait_for_answer` in a worker thread."""
        return await in_thread(self.wait_for_answer, approval_id, timeout)

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
        self._call("warden_approval_notify_set", callback, None)
        # The library stopped calling the previous one: it may go.
        self._approval_hook = None if hook is None else callback
        if hook is None:
            _HOOKED.discard(self)
        else:
            _HOOKED.add(self)

    def approval(self, approval_id: str) -> dict[str, Any] | None:
        """One approval record, or `None` when the library reports none."""
        return _maybe_record(self._call_out("warden_approval_get", *_text_arg(approval_id, "approval id")))

    def pending(self) -> list[dict[str, Any]]:
        """The approval requests still waiting for a human."""
        return _records(self._call_out("warden_approvals_pending"))
