"""OpenTelemetry for protected calls: the library's span record made a span of the
application's tracer, and its measurements recorded with the application's meter.

The library assembles the record of each protected call (`warden_trace_span`: the name, the
times, the attributes, the events, the status, the measurements; docs/TELEMETRY.md); this module
only translates it. `opentelemetry-api` is optional (the `otel` extra): without it, or when the
application configured no SDK provider (and passed none to `Warden(tracer_provider=...,
meter_provider=...)`), a protected call asks the library for no record and nothing is traced.

With a tracer, Warden's span is a child of the caller's current span, and the protected function
runs with Warden's span current, so the spans of its own outbound calls are children of it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import threading
import weakref
from collections.abc import Iterator
from typing import Any

from . import _ffi
from ._errors import WardenError
from ._managed import Managed

try:  # the optional dependency
    from opentelemetry import context as otel_context
    from opentelemetry import metrics as otel_metrics
    from opentelemetry import trace as otel_trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
except ImportError:  # pragma: no cover - exercised by the tests that run without it
    otel_trace = None  # type: ignore[assignment]

_LOG = logging.getLogger("warden")
_UNSET = object()

#: The instrumentation scope's name.
SCOPE = "warden"


def _version() -> str:
    return str(getattr(sys.modules.get("warden"), "__version__", ""))


def _configured(provider: Any, api_package: str) -> bool:
    """Whether `provider` is one an application configured: not the API's own proxy or no-op."""
    return provider is not None and not type(provider).__module__.startswith(api_package)


class _Trace(Managed):
    """A `warden_trace`: where the library records one protected call's span."""

    _what = "trace"
    _free = "warden_trace_free"
    _closed_message = "this trace was already freed"
    _fork_bound = True

    def __init__(self, lib: _ffi.Library) -> None:
        super().__init__(lib)
        pointer = lib.fn("warden_trace_new")()
        if not pointer:
            raise MemoryError("warden_trace_new returned NULL")
        self._adopt(int(pointer))

    def record(self) -> dict[str, Any]:
        return json.loads(self._call_out("warden_trace_span"))


class Telemetry:
    """One `Warden`'s tracer and meter: the providers it was given, else the global ones."""

    def __init__(self, tracer_provider: Any = None, meter_provider: Any = None) -> None:
        self._tracer_provider = tracer_provider
        self._meter_provider = meter_provider
        self._lock = threading.Lock()
        self._scopes: dict[int, Any] = {}
        self._instruments: dict[tuple[int, str], Any] = {}

    def _scope(self, provider: Any, make: str) -> Any:
        key = id(provider)
        with self._lock:
            scope = self._scopes.get(key)
            if scope is None:
                scope = getattr(provider, make)(SCOPE, _version())
                self._scopes[key] = scope
            return scope

    def meter_provider(self) -> Any:
        if otel_trace is None:
            return None
        return self._meter_provider or otel_metrics.get_meter_provider()

    def begin(self) -> Call | None:
        """This call's tracing, made in the caller's context; `None` when no SDK is configured
        (then the library is asked for nothing)."""
        if otel_trace is None:
            return None
        tracer_provider = self._tracer_provider or otel_trace.get_tracer_provider()
        meter_provider = self.meter_provider()
        tracing = _configured(tracer_provider, "opentelemetry.trace")
        measuring = _configured(meter_provider, "opentelemetry.metrics")
        if not (tracing or measuring):
            return None
        tracer = self._scope(tracer_provider, "get_tracer") if tracing else None
        meter = self._scope(meter_provider, "get_meter") if measuring else None
        return Call(self, tracer, meter, otel_context.get_current())

    def instrument(self, meter: Any, measurement: dict[str, Any]) -> Any:
        kind, name = measurement["instrument"], measurement["name"]
        key = (id(meter), name)
        with self._lock:
            made = self._instruments.get(key)
            if made is None:
                create = meter.create_counter if kind == "counter" else meter.create_histogram
                made = create(name, unit=measurement["unit"], description=measurement["description"])
                self._instruments[key] = made
            return made


class Call:
    """One protected call's tracing: the tracer and meter, and the caller's context."""

    def __init__(self, telemetry: Telemetry, tracer: Any, meter: Any, parent: Any) -> None:
        self.telemetry = telemetry
        self.tracer = tracer
        self.meter = meter
        self.parent = parent

    def traceparent(self) -> str | None:
        """The caller's W3C trace context, for the call's receipts (`None` outside a span)."""
        carrier: dict[str, str] = {}
        TraceContextTextMapPropagator().inject(carrier, context=self.parent)
        return carrier.get("traceparent")

    def started(self, record: dict[str, Any]) -> Any:
        """A span started as the record says, a child of the caller's span; `None` without a
        tracer."""
        if self.tracer is None:
            return None
        return self.tracer.start_span(
            record["name"],
            context=self.parent,
            kind=otel_trace.SpanKind.INTERNAL,
            attributes=record["attributes"],
            start_time=record["start_time_unix_nano"],
        )

    def ended(self, span: Any, record: dict[str, Any], set_already: dict[str, Any] | None = None) -> None:
        """`span` (or a new one, for a call refused before any permit) given the ended record's
        attributes (those not `set_already` at its start), events and status, and ended at its
        time; its measurements recorded."""
        if span is None:
            span, set_already = self.started(record), record["attributes"]
        if span is not None:
            known = set_already or {}
            span.set_attributes({k: v for k, v in record["attributes"].items() if known.get(k, _UNSET) != v})
            for event in record["events"]:
                span.add_event(event["name"], attributes=event["attributes"], timestamp=event["time_unix_nano"])
            status = record["status"]
            if status["code"] == "error":
                span.set_status(otel_trace.Status(otel_trace.StatusCode.ERROR, status.get("description")))
            span.end(end_time=record["end_time_unix_nano"])
        if self.meter is not None:
            for measurement in record["metrics"]:
                instrument = self.telemetry.instrument(self.meter, measurement)
                if measurement["instrument"] == "counter":
                    instrument.add(measurement["value"], attributes=measurement["attributes"])
                else:
                    instrument.record(measurement["value"], attributes=measurement["attributes"])


class Traced:
    """The span of one protected call that got a permit: started from the record when the permit
    was issued, ended from it once the permit reported its outcome (or was released)."""

    def __init__(self, call: Call, trace: _Trace) -> None:
        self._call = call
        self._trace = trace
        self._lock = threading.Lock()
        self._ended = False
        self.span = None
        self._started: dict[str, Any] = {}
        with _quiet("starting the span"):
            record = trace.record()
            self.span = call.started(record)
            self._started = record["attributes"]

    @contextlib.contextmanager
    def current(self) -> Iterator[None]:
        """Warden's span is the current one inside the block (the protected function's calls are
        its children)."""
        if self.span is None:
            yield
            return
        with otel_trace.use_span(self.span, end_on_exit=False, record_exception=False, set_status_on_exception=False):
            yield

    def end(self) -> None:
        """End the span from the record, once the library says the call ended (idempotent)."""
        with self._lock:
            if self._ended:
                return
            with _quiet("ending the span"):
                record = self._trace.record()
                if record["end_time_unix_nano"] is None:
                    return
                self._ended = True
                self._call.ended(self.span, record, self._started)
            self._trace.close()


def refused(call: Call, trace: _Trace) -> None:
    """The span of a call that ended without a permit (a refusal or a fault)."""
    with _quiet("recording the refusal's span"):
        record = trace.record()
        if record["end_time_unix_nano"] is not None:
            call.ended(None, record)
    trace.close()


@contextlib.contextmanager
def _quiet(what: str) -> Iterator[None]:
    """Telemetry never changes what a protected call does: a failure here is logged."""
    try:
        yield
    except Exception:  # noqa: BLE001 - the action's outcome is already decided and recorded
        _LOG.warning("warden: %s failed; the action is not affected", what, exc_info=True)


def register_gauges(warden: Any, meter_provider: Any = None) -> list[str]:
    """Observable gauges for `warden`, read from its store whenever the meter collects them:
    the names `warden_gauges_describe` lists. Returns the names registered."""
    if otel_trace is None:
        raise ImportError("register_gauges needs opentelemetry-api: pip install 'warden-effects[otel]'")
    provider = meter_provider or warden._telemetry.meter_provider()
    meter = provider.get_meter(SCOPE, _version())
    described = json.loads(warden._lib.call_out("warden_gauges_describe"))
    owner = weakref.ref(warden)
    names = []
    for gauge in described:
        name = gauge["name"]

        def observe(_options: Any, name: str = name) -> list[Any]:
            opened = owner()
            if opened is None or opened.closed:
                return []
            try:
                points = opened._gauge(name)
            except WardenError:
                _LOG.warning("warden: reading the gauge %s failed", name, exc_info=True)
                return []
            return [otel_metrics.Observation(point["value"], point["attributes"]) for point in points]

        meter.create_observable_gauge(name, callbacks=[observe], unit=gauge["unit"], description=gauge["description"])
        names.append(name)
    return names
