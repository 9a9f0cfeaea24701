"""Who is acting, which approval is presented, and which permit is running: contextvars.

Each thread starts with nothing set; each asyncio task sees a copy of the context it was
created in, so `with warden.context(...)` inside one task never leaks into another.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ._errors import InvalidInput

if TYPE_CHECKING:
    from ._permit import Permit

__all__ = [
    "Principal",
    "context",
    "with_approval",
    "current_principal",
    "current_approval",
    "current_task",
    "current_hop",
]


@dataclass(frozen=True)
class Principal:
    """The agent acting, and the user it acts for (if any)."""

    agent: str
    user: str | None = None

    def to_json(self) -> dict[str, str | None]:
        return {"agent": self.agent, "user": self.user}


_PRINCIPAL: ContextVar[Principal | None] = ContextVar("warden_principal", default=None)
_APPROVAL: ContextVar[str | None] = ContextVar("warden_approval", default=None)
#: The task and hop of the innermost `context()`: (task, hop).
_CALL: ContextVar[tuple[str | None, str | None]] = ContextVar("warden_call", default=(None, None))
_PERMIT: ContextVar["Permit | None"] = ContextVar("warden_permit", default=None)


@contextmanager
def context(
    agent: str, user: str | None = None, *, task: str | None = None, hop: str | None = None
) -> Iterator[Principal]:
    """Set the principal for protected calls made inside the block.

    A protected call made outside any `context()` has no principal: a programming error,
    raised as `InvalidInput` (reason `no_principal`), with nothing recorded. `task` names the unit of work (grants that name
    `tasks` need a matching one); `hop` is a delegation id (`dlg_…`) another agent handed
    over, which is then the only grant the calls are judged against. Both belong to this
    block: an inner `context()` starts without them.
    """
    principal = Principal(agent, user)
    token = _PRINCIPAL.set(principal)
    call = _CALL.set((task, hop))
    try:
        yield principal
    finally:
        _CALL.reset(call)
        _PRINCIPAL.reset(token)


@contextmanager
def with_approval(approval_id: str) -> Iterator[str]:
    """Present a granted approval (`apr_…`) to the protected calls made inside the block."""
    token = _APPROVAL.set(approval_id)
    try:
        yield approval_id
    finally:
        _APPROVAL.reset(token)


def current_principal() -> Principal | None:
    """The principal set by the innermost `context()` in this thread or task, if any."""
    return _PRINCIPAL.get()


def current_task() -> str | None:
    """The task set by the innermost `context()`, if any."""
    return _CALL.get()[0]


def current_hop() -> str | None:
    """The hop (`dlg_…`) set by the innermost `context()`, if any."""
    return _CALL.get()[1]


def current_approval() -> str | None:
    """The approval id set by the innermost `with_approval()`, if any."""
    return _APPROVAL.get()


def current_permit() -> "Permit":
    permit = _PERMIT.get()
    if permit is None:
        raise InvalidInput(
            "there is no protected call running here: idempotency_token() and extend_lease() work only "
            "inside a function decorated with @w.protect (and in threads started with its context copied)"
        )
    return permit
