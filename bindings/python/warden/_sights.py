"""Sights: confined reads through the windows the administrator configured, their
cancellation token and the host's credential callback."""

from __future__ import annotations

import asyncio
import ctypes
import logging
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from typing import Any, Union

from ._threads import in_thread
from . import _ffi
from ._convert import _dumps, _json_arg, _record, _records, _swallow_result, _text_arg
from ._errors import InvalidInput, Panic
from ._managed import Managed

_LOG = logging.getLogger("warden")

#: A sight credential resolver: a credential reference in, its value (or `None`) out.
CredentialProvider = Callable[[str], Union[str, None]]


class CancelToken(Managed):
    """A cancellation token for sight queries (`warden_cancel_new`).

    Pass it as `w.query(..., cancel=token)`; `token.cancel()`, from any thread, makes every
    query running (or later started) with it raise `FetchFault` with reason `aborted`, and
    nothing is stored. Cancelling is sticky: a cancelled token stays cancelled.

    `close()` (or the end of a `with` block, or garbage collection) releases it; the C token
    is freed only once no query is using it, so closing while a query runs is safe. A closed
    token cannot be passed to a new query.
    """

    _what = "CancelToken"
    _free = "warden_cancel_free"
    _closed_message = "this CancelToken was closed; create a new one"
    # Not fork-bound: a token is a flag, and a child's copy is its own to trigger and free.
    _fork_bound = False

    def __init__(self) -> None:
        super().__init__(_ffi.library())
        self._cancelled = False
        pointer = self._lib.fn("warden_cancel_new")()
        if not pointer:
            raise Panic("warden_cancel_new returned NULL (the library could not allocate a token)")
        self._adopt(int(pointer))

    def cancel(self) -> None:
        """Abort every query using this token (idempotent; safe from any thread)."""
        with self._lock:
            self._cancelled = True
            if self._pointer is not None:
                self._lib.fn("warden_cancel_trigger")(self._pointer)

    @property
    def cancelled(self) -> bool:
        """True once `cancel()` was called."""
        return self._cancelled

    def close(self) -> None:
        """Release the token (idempotent); freed now, or when the last query using it returns."""
        super().close()

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


def _window(source: str, endpoint: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
    """The window a sight request names: `{"source", "endpoint", "params"?}`."""
    request: dict[str, Any] = {"source": source, "endpoint": endpoint}
    if params is not None:
        request["params"] = dict(params) if isinstance(params, Mapping) else params
    return request


class Sights(Managed):
    """`Warden`'s sight calls."""

    def __init__(self, lib: _ffi.Library) -> None:
        super().__init__(lib)
        # Sight queries in flight, and every credential callback one of them may still call.
        self._sight_lock = threading.Lock()
        self._queries = 0
        self._callbacks: list[Any] = []

    def sources(self) -> dict[str, Any]:
        """The configured windows as an agent may name them (no origin, path or credential)."""
        return _record(self._call_out("warden_sight_sources"))

    def tool_schema(self) -> list[dict[str, Any]]:
        """The four tool definitions (`warden_sources`, `warden_query`, `warden_history`,
        `warden_diff`), each `{"name", "description", "input_schema"}`, for an LLM."""
        return _records(self._call_out("warden_sight_tool_schema"))

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
        with self._held() as handle:
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

    def _cancellable(
        self, function: str, leading: tuple[Any, ...], request: bytes, cancel: CancelToken | None
    ) -> dict[str, Any]:
        if cancel is not None and not isinstance(cancel, CancelToken):
            raise InvalidInput(f"cancel= must be a warden.CancelToken or None, not {type(cancel).__name__}")
        held_token = nullcontext() if cancel is None else cancel._held()
        with self._held() as handle, self._querying(), held_token as pointer:
            data = self._lib.call_out(function, handle, *leading, *_ffi.arg(request), pointer)
        return _record(data)

    @staticmethod
    def _query_request(
        source: str,
        endpoint: str,
        params: Mapping[str, Any] | None,
        fields: Sequence[str] | None,
        snapshot: bool,
    ) -> bytes:
        query = _window(source, endpoint, params)
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
        return self._cancellable(
            "warden_sight_query", (), self._query_request(source, endpoint, params, fields, snapshot), cancel
        )

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
        job = asyncio.ensure_future(in_thread(self._cancellable, "warden_sight_query", (), request, token))
        if cancel is None:
            job.add_done_callback(lambda _: token.close())
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
        request = _window(source, endpoint, params)
        if cursor is not None:
            request["cursor"] = cursor
        if limit is not None:
            request["limit"] = limit
        return _record(self._call_out("warden_sight_history", *_json_arg(request, "the history request")))

    async def history_async(
        self,
        source: str,
        endpoint: str,
        params: Mapping[str, Any] | None = None,
        cursor: str | None = None,
        limit: int | None = None,
    ) -> dict[str, Any]:
        """`history` in a worker thread."""
        return await in_thread(self.history, source, endpoint, params, cursor, limit)

    def diff(self, a: str, b: str) -> dict[str, Any]:
        """Compare two snapshots of one window: `{"a", "b", "source", "endpoint", "params",
        "fetchedAt", "entries": [{"change", "path", "before"?, "after"?}], "total", "omitted"}`.
        An unknown id raises `NotFound` (reason `snapshot_not_found`); snapshots of different
        windows raise `OutOfWindow`."""
        return _record(self._call_out("warden_sight_diff", *_json_arg({"a": a, "b": b}, "the diff request")))

    async def diff_async(self, a: str, b: str) -> dict[str, Any]:
        """`diff` in a worker thread."""
        return await in_thread(self.diff, a, b)

    def call_tool(self, name: str, arguments: Any = None, *, cancel: CancelToken | None = None) -> Any:
        """Run one tool call an LLM made against `tool_schema()`, its arguments unchanged.

        `name` is `warden_sources`, `warden_query`, `warden_history` or `warden_diff`;
        `arguments` is the call's input object as the model sent it (`None` is `{}`). It goes
        to the library as is, so any key the schema does not declare (`url`, `headers`, ...)
        is refused there with `OutOfWindow`, before any I/O.
        """
        arguments = {} if arguments is None else arguments
        tool = _text_arg(name, "call_tool(name)")
        return self._cancellable("warden_sight_call_tool", tool, _dumps(arguments, f"the {name} arguments"), cancel)
