"""Where the blocking library calls made for an `async def` run: a thread pool of Warden's own.

`asyncio.to_thread` would use the event loop's default executor, which is shared with the
application and sized `min(32, cores + 4)` — 6 threads on a 2-core machine. Every call waiting
for a commit holds one of those threads, so 64 concurrent tasks would reach the store 6 at a
time and share commits 6 at a time. Warden's pool has `MAX_THREADS` threads, started on demand
and reused; the caller's context variables (`warden.context`) travel with each call, as with
`asyncio.to_thread`. A forked child starts a pool of its own (the parent's threads do not exist
there).

`asyncio.run` waits for the loop's default executor, not for this pool: a proposal whose
caller was cancelled may still be settling (as not executed) in its worker thread when
`asyncio.run` returns. It lands shortly after, and at interpreter exit the pool's threads are
joined before the process ends, so it is never lost.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, TypeVar

T = TypeVar("T")

#: At most this many blocking calls run at once for coroutines (per process).
MAX_THREADS = 64

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_pool_pid = 0


def _executor() -> ThreadPoolExecutor:
    global _pool, _pool_pid
    with _lock:
        if _pool is None or _pool_pid != os.getpid():
            _pool = ThreadPoolExecutor(max_workers=MAX_THREADS, thread_name_prefix="warden-call")
            _pool_pid = os.getpid()
        return _pool


def in_thread(func: Callable[..., T], /, *args: Any) -> asyncio.Future[T]:
    """`asyncio.to_thread(func, *args)` on Warden's pool, submitted now: the future of its
    result (a plain future, not a task, so that each call costs the loop no task steps)."""
    loop = asyncio.get_running_loop()
    call = functools.partial(contextvars.copy_context().run, func, *args)
    return loop.run_in_executor(_executor(), call)
