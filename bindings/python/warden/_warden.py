"""`Warden`: one open store under one administrator's document.

The handle's lifetime and its record listings live here; its other calls are grouped by
concept in `_protect.py` (proposing, `@w.protect`), `_approvals.py`, `_authority.py`,
`_proofs.py` and `_sights.py`, each a base of `Warden` over the one managed-handle class
(`_managed.py`). Everything is a thin layer over the C functions: the kernel decides, hashes,
counts attempts and writes evidence.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Union

from . import _ffi, _telemetry
from ._authority import Authority
from ._convert import _count_or_default, _dumps, _maybe_record, _millis, _optional_text_arg, _record, _records, _text_arg
from ._proofs import Proofs
from ._protect import Protecting
from ._sights import Sights

__all__ = ["Warden"]

PathLike = Union[str, "os.PathLike[str]"]


class Warden(Protecting, Authority, Proofs, Sights):
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
    `durability="process"` (a file store) writes each batch's journal record without syncing
    it: a crash of the process loses nothing, a power loss or OS crash can lose the last
    writes. The default, `"power"`, loses nothing that returned to either.
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
    OpenTelemetry (with `opentelemetry-api` installed, the `otel` extra): each protected call is
    one span `execute_tool <action>` of the tracer provider given as `tracer_provider`, else of
    the global one, a child of the caller's current span, with the protected function running
    under it; its measurements go to `meter_provider` (else the global one). Without an SDK
    provider nothing is traced. `telemetry={"arguments": True, "results": True}` lets spans
    carry the call's arguments and result, redacted (docs/TELEMETRY.md); by default they carry
    neither.
    """

    _what = "warden.Warden"
    _free = "warden_close"
    _closed_message = "this Warden is closed; open the store again to use it"

    def __init__(
        self,
        store: PathLike,
        config: PathLike | None = None,
        environment: str | None = None,
        credentials_dir: PathLike | None = None,
        outcomes: str | None = None,
        max_delay: float | None = None,
        limits: Mapping[str, int] | None = None,
        durability: str | None = None,
        telemetry: Mapping[str, bool] | None = None,
        tracer_provider: Any = None,
        meter_provider: Any = None,
    ) -> None:
        super().__init__(_ffi.library())
        self._telemetry = _telemetry.Telemetry(tracer_provider, meter_provider)
        open_options = {
            "environment": environment,
            "credentials_dir": None if credentials_dir is None else os.fsdecode(os.fspath(credentials_dir)),
            "outcomes": outcomes,
            "max_delay_ms": None if max_delay is None else _millis(max_delay, "max_delay"),
            "limits": None if limits is None else dict(limits),
            "durability": durability,
            "telemetry": None if telemetry is None else dict(telemetry),
        }
        open_options = {key: value for key, value in open_options.items() if value is not None}
        options = _dumps(open_options, "options") if open_options else None
        store_bytes = os.fsencode(store)
        config_bytes = None if config is None else os.fsencode(config)
        self._adopt(
            self._lib.call_handle("warden_open", *_ffi.arg(store_bytes), *_ffi.arg(config_bytes), *_ffi.arg(options))
        )
        self.store = os.fspath(store)
        self.config = None if config is None else os.fspath(config)

    def close(self) -> None:
        """Close the handle (idempotent). Calls still running on other threads finish first.
        Deferred outcomes are made durable first. In a child forked after the handle was
        opened this does nothing: the handle belongs to the parent."""
        super().close()

    def __repr__(self) -> str:
        return f"<warden.Warden store={getattr(self, 'store', None)!r}{' closed' if self._closed else ''}>"

    def flush(self) -> None:
        """Make every deferred outcome of this process durable now (see `outcomes`)."""
        self._call("warden_flush")

    # -- telemetry --

    def register_gauges(self, meter_provider: Any = None) -> list[str]:
        """Observable gauges read from this store each time the meter collects: effects by state
        (`warden.effects`, AMBIGUOUS first), `warden.approvals.pending`, `warden.chain.length`.
        `meter_provider` defaults to the one given at open, else the global one. Returns the
        names registered; after `close()` they observe nothing. Needs `opentelemetry-api`."""
        return _telemetry.register_gauges(self, meter_provider)

    def _gauge(self, name: str) -> list[dict[str, Any]]:
        return _records(self._call_out("warden_gauge_read", *_text_arg(name, "the gauge name")))

    # -- effects, receipts, events --

    def resolve(self, effect_key: str, to: str, *, by: str, attempt: int | None = None) -> dict[str, Any]:
        """A human says what happened to an AMBIGUOUS effect: "committed" or "failed".

        With `attempt` (the effect record's `attempt` the person was shown), only that attempt
        is resolved: if the effect was resolved and tried again since, `InvalidInput` is raised
        and nothing moves."""
        if attempt is None:
            data = self._call_out(
                "warden_effect_resolve",
                *_text_arg(effect_key, "effect key"),
                *_text_arg(to, "resolve(to)"),
                *_text_arg(by, "resolve(by=...)"),
            )
            return _record(data)
        if isinstance(attempt, bool) or not isinstance(attempt, int) or not 1 <= attempt <= 0xFFFFFFFF:
            raise ValueError(f"resolve(attempt=...) is an attempt number, 1 or more; got {attempt!r}")
        data = self._call_out(
            "warden_effect_resolve_attempt",
            *_text_arg(effect_key, "effect key"),
            attempt,
            *_text_arg(to, "resolve(to)"),
            *_text_arg(by, "resolve(by=...)"),
        )
        return _record(data)

    def effect(self, effect_key: str) -> dict[str, Any] | None:
        """The effect record for `effect_key`, or `None` when there is none."""
        return _maybe_record(self._call_out("warden_effect_get", *_text_arg(effect_key, "effect key")))

    def effects(self, state: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        """Effect records, optionally only those in `state`, at most `limit` (default: the
        library's `list_limit`; 0: all)."""
        state_arg = _optional_text_arg(state, "effects(state=...)")
        count = _count_or_default(limit, "list_limit", "limit")
        return _records(self._call_out("warden_effects_list", *state_arg, count))

    def receipts(self, from_seq: int | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        """Receipts from sequence number `from_seq` (default: the first), at most `limit`
        (default: the library's `list_limit`; 0: all)."""
        first = _count_or_default(from_seq, "from_seq", "from_seq")
        count = _count_or_default(limit, "list_limit", "limit")
        return _records(self._call_out("warden_receipts_list", first, count))

    def verify_chain(self) -> dict[str, Any]:
        """Walk the receipt chain; the report (`ok`, `verified`, `breaks`, ...)."""
        return _record(self._call_out("warden_chain_verify"))

    def events(self, after: int | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        """Events with an id greater than `after` (default: from the first), at most `limit`
        (default: the library's `list_limit`; 0: all)."""
        first = _count_or_default(after, "after_id", "after")
        count = _count_or_default(limit, "list_limit", "limit")
        return _records(self._call_out("warden_events_list", first, count))
