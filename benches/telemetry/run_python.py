"""Telemetry through the Python binding, at scale and at cost.

    target/py-venv/bin/python benches/telemetry/run_python.py [--actions 10000] [--rounds 5]
        [--per-round 400] [--dir DIR]

Run it with the interpreter `bindings/python/run-tests.sh` sets up (it has the binding and
`opentelemetry-sdk` installed). Two parts:

1. `--actions` protected calls of mixed outcomes (committed, not executed, an exception, a
   duplicate, a denial, an approval required; one sixth each) under one caller span, exported
   to the SDK's in-memory exporter: exactly one `execute_tool` span per call, every span in the
   caller's trace, and the `warden.actions` counter summing to the calls. It exits 1 otherwise.
2. The cost per committed action on one thread, durable outcomes, in `--rounds` interleaved
   rounds of `--per-round` actions: no SDK configured (the library is asked for nothing), and
   the SDK with a span processor whose exporter drops everything (the whole span and metric path
   runs); and the cost of the check a call makes when no SDK is configured.

The stores live in `--dir` (default: a temporary directory beside this checkout's `target/`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import warden
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

DOCUMENT = """\
schema: warden/v1
environment: production
actions:
  bench.refund:
    effect: "refund:{payment_id}"
    max_attempts: 3
    rules:
      - when: { amount_lte: 50000 }
        decision: allow
      - when: { amount_lte: 500000 }
        decision: approve
      - decision: deny
"""


class Dropping(SpanExporter):
    """An exporter that exports nothing: the SDK's own cost, and Warden's, without I/O."""

    def export(self, spans):  # type: ignore[no-untyped-def]
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


def open_store(root: Path, name: str, **options: object) -> warden.Warden:
    folder = root / name
    folder.mkdir()
    (folder / "warden.yaml").write_text(DOCUMENT, encoding="utf-8")
    return warden.Warden(store=folder / "state.redb", config=folder / "warden.yaml", **options)


def mixed(root: Path, actions: int) -> dict[str, object]:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    w = open_store(root, "mixed", tracer_provider=tracer_provider, meter_provider=MeterProvider(metric_readers=[reader]))

    @w.protect("bench.refund")
    def refund(payment_id: str, amount: int) -> str:
        kind = payment_id.split("_")[1]
        if kind == "fail":
            raise warden.NotExecuted("declined")
        if kind == "boom":
            raise RuntimeError("lost")
        return payment_id

    outcomes: Counter[str] = Counter()
    tracer = tracer_provider.get_tracer("bench")
    started = time.perf_counter()
    with warden.context(agent="bench"), tracer.start_as_current_span("agent run") as run:
        for n in range(actions):
            kind = ("ok", "fail", "boom", "dup", "big", "mid")[n % 6]
            payment = "pay_ok_0" if kind == "dup" else f"pay_{kind}_{n}"
            amount = {"big": 900_000, "mid": 90_000}.get(kind, 100)
            try:
                refund(payment, amount)
                outcomes["committed"] += 1
            except (warden.WardenError, warden.NotExecuted) as error:
                outcomes[type(error).__name__] += 1
            except RuntimeError:
                outcomes["RuntimeError"] += 1
    took = time.perf_counter() - started
    spans = [s for s in exporter.get_finished_spans() if s.name == "execute_tool bench.refund"]
    trace_id = run.get_span_context().trace_id
    counted = 0
    data = reader.get_metrics_data()
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == "warden.actions":
                    counted += sum(p.value for p in metric.data.data_points)
    w.close()
    return {
        "actions": actions,
        "seconds": round(took, 2),
        "spans": len(spans),
        "spans_in_the_callers_trace": sum(1 for s in spans if s.context.trace_id == trace_id),
        "distinct_tool_call_ids": len({s.attributes["gen_ai.tool.call.id"] for s in spans}),
        "counted_by_warden.actions": counted,
        "outcomes": dict(sorted(Counter(s.attributes["warden.outcome"] for s in spans).items())),
        "raised": dict(sorted(outcomes.items())),
    }


def per_action(w: warden.Warden, prefix: str, count: int) -> float:
    @w.protect("bench.refund")
    def refund(payment_id: str, amount: int) -> dict[str, bool]:
        return {"ok": True}

    with warden.context(agent="bench"):
        refund(f"{prefix}_warm", 1)
        started = time.perf_counter()
        for n in range(count):
            refund(f"{prefix}_{n}", 1)
        return (time.perf_counter() - started) / count * 1e6


def overhead(root: Path, rounds: int, count: int) -> dict[str, object]:
    plain = open_store(root, "plain")
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(Dropping()))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    traced = open_store(root, "traced", tracer_provider=tracer_provider, meter_provider=meter_provider)
    off: list[float] = []
    on: list[float] = []
    for r in range(rounds):
        off.append(per_action(plain, f"off{r}", count))
        on.append(per_action(traced, f"on{r}", count))
    checks = 100_000
    started = time.perf_counter()
    for _ in range(checks):
        plain._telemetry.begin()
    check_us = (time.perf_counter() - started) / checks * 1e6
    plain.close()
    traced.close()
    return {
        "rounds": rounds,
        "actions_per_round": count,
        "us_per_action_no_sdk": [round(x, 1) for x in off],
        "us_per_action_sdk_dropping_exporter": [round(x, 1) for x in on],
        "median_no_sdk_us": round(statistics.median(off), 1),
        "median_sdk_us": round(statistics.median(on), 1),
        "median_difference_us": round(statistics.median(on) - statistics.median(off), 1),
        "no_sdk_check_us_per_call": round(check_us, 3),
        "no_sdk_check_share_of_an_action": f"{check_us / statistics.median(off) * 100:.3f}%",
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--actions", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--per-round", type=int, default=400)
    parser.add_argument("--dir", type=Path, default=None)
    options = parser.parse_args()
    base = options.dir or Path(__file__).resolve().parents[2] / "target"
    base.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=base) as scratch:
        root = Path(scratch)
        report = {"mixed": mixed(root, options.actions), "overhead": overhead(root, options.rounds, options.per_round)}
    print(json.dumps(report, indent=2))
    run = report["mixed"]
    ok = run["spans"] == run["actions"] == run["spans_in_the_callers_trace"] == run["distinct_tool_call_ids"]
    ok = ok and run["counted_by_warden.actions"] == run["actions"]
    if not ok:
        print("FAILED: not exactly one span per protected call in the caller's trace", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
