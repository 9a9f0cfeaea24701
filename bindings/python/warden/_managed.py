"""`Managed`: the one base class of every object that owns a C pointer (a `Warden` handle, a
`Permit`, a `CancelToken`).

It holds the pointer, its lock and the count of calls using it; `close()` is idempotent and
frees the pointer once no call is using it (so closing while another thread is in a call is
safe); `__del__` and `with` close it. A pointer inherited through `fork()` belongs to the
parent: a fork-bound object refuses every call in the child and frees nothing there.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, ClassVar, TypeVar

from . import _ffi
from ._errors import InvalidInput

_M = TypeVar("_M", bound="Managed")


class Managed:
    """A C pointer owned by one Python object: locked, counted, closed once."""

    #: How messages name the object ("permit", "warden.Warden", ...).
    _what: ClassVar[str]
    #: The C function that frees the pointer.
    _free: ClassVar[str]
    #: What a call made after `close()` raises (as `InvalidInput`).
    _closed_message: ClassVar[str]
    #: The pointer belongs to the process that made it: a forked child neither uses nor frees it.
    _fork_bound: ClassVar[bool] = True
    #: Calls run one at a time (the C object must not be used from two threads at once).
    _exclusive: ClassVar[bool] = False

    def __init__(self, lib: _ffi.Library) -> None:
        self._lib = lib
        self._lock = threading.Lock()
        self._call_lock = threading.Lock() if self._exclusive else None
        self._pid = os.getpid()
        self._pointer: int | None = None
        self._users = 0
        self._closed = True

    def _adopt(self, pointer: int) -> None:
        """Take ownership of `pointer` (once, right after the C call that made it)."""
        self._pointer = pointer
        self._closed = False

    def _refuse_after_fork(self) -> None:
        """Used in a child forked after it was made: refused before any lock (a lock may have
        been held by a parent thread at the fork)."""
        if self._fork_bound and os.getpid() != self._pid:
            raise InvalidInput(
                f"this {self._what} was opened in process {self._pid} before a fork; a forked child must open "
                "its own warden.Warden (open the store again in the child), and nothing was done"
            )

    @contextmanager
    def _held(self) -> Iterator[int]:
        """The pointer, kept alive (not freed by `close()`) until the block ends."""
        self._refuse_after_fork()
        with self._lock:
            if self._closed or self._pointer is None:
                raise InvalidInput(self._closed_message)
            self._users += 1
            pointer = self._pointer
        try:
            if self._call_lock is None:
                yield pointer
            else:
                with self._call_lock:
                    yield pointer
        finally:
            with self._lock:
                self._users -= 1
                idle = self._take_if_idle()
            self._free_pointer(idle)

    def _call(self, function: str, *args: Any) -> None:
        """`function(pointer, *args, &err)` on the pointer, kept alive for the call."""
        with self._held() as pointer:
            self._lib.call(function, pointer, *args)

    def _call_out(self, function: str, *args: Any) -> bytes:
        """`function(pointer, *args, &out, &err)` on the pointer: the output's bytes."""
        with self._held() as pointer:
            return self._lib.call_out(function, pointer, *args)

    def _take_if_idle(self) -> int | None:
        # Called with the lock held: the pointer leaves the object before it is freed, so a
        # call that reads it under the lock never sees a freed one.
        if self._closed and self._users == 0 and self._pointer is not None:
            pointer, self._pointer = self._pointer, None
            return pointer
        return None

    def _free_pointer(self, pointer: int | None) -> None:
        if pointer is not None:
            self._lib.fn(self._free)(pointer)

    def close(self) -> None:
        """Release the C object (idempotent): now, or when the last call using it returns.
        In a child forked after it was made this does nothing (it belongs to the parent)."""
        lock = getattr(self, "_lock", None)
        if lock is None or (self._fork_bound and os.getpid() != self._pid):
            return
        with lock:
            self._closed = True
            idle = self._take_if_idle()
        self._free_pointer(idle)

    @property
    def closed(self) -> bool:
        """True once `close()` was called."""
        return self._closed

    def __enter__(self: _M) -> _M:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass
