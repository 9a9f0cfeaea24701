"""OpenTelemetry through the real SDK: one `execute_tool` span per protected call, a child of the
caller's span and the parent of the protected function's own spans, named and attributed from
the library's record; its measurements in the SDK's metric reader; nothing when no SDK is
configured."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import warden

sdk_trace = pytest.importorskip("opentelemetry.sdk.trace")
from opentelemetry import trace  # noqa: E402
from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import SpanKind, StatusCode  # noqa: E402


class Otel:
    """A tracer provider exporting to memory and a meter provider read from memory."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = sdk_trace.TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        self.tracer = self.tracer_provider.get_tracer("app")

    def spans(self, name: str | None = None) -> list[Any]:
        return [s for s in self.exporter.get_finished_spans() if name is None or s.name == name]

    def points(self, metric: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        found = []
        for resource in data.resource_metrics if data else []:
            for scope in resource.scope_metrics:
                for m in scope.metrics:
                    if m.name == metric:
                        found.extend(m.data.data_points)
        return found


@pytest.fixture()
def otel() -> Otel:
    return Otel()


def open_traced(store: Path, config: Path, otel: Otel, **options: Any) -> warden.Warden:
    return warden.Warden(
        store=store, config=config, tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider, **options
    )


def refund_of(w: warden.Warden, otel: Otel) -> Any:
    @w.protect("stripe.refund")
    def refund(payment_id: str, amount: int) -> dict[str, Any]:
        with otel.tracer.start_as_current_span("stripe POST /v1/refunds"):
            return {"refund_id": "re_" + payment_id}

    return refund


def test_the_span_is_a_child_of_the_callers_and_the_parent_of_the_functions_own_calls(
    store: Path, config: Path, otel: Otel
) -> None:
    w = open_traced(store, config, otel)
    refund = refund_of(w, otel)
    with warden.context(agent="support-agent", user="ada"), otel.tracer.start_as_current_span("agent turn") as turn:
        assert refund("pay_1", 1200) == {"refund_id": "re_pay_1"}
    (outbound,) = otel.spans("stripe POST /v1/refunds")
    (ours,) = otel.spans("execute_tool stripe.refund")
    (caller,) = otel.spans("agent turn")
    assert ours.kind == SpanKind.INTERNAL
    assert ours.parent.span_id == caller.context.span_id
    assert outbound.parent.span_id == ours.context.span_id
    assert {s.context.trace_id for s in (outbound, ours, caller)} == {turn.get_span_context().trace_id}
    assert ours.start_time <= outbound.start_time and outbound.end_time <= ours.end_time
    assert ours.status.status_code == StatusCode.UNSET
    attributes = dict(ours.attributes)
    assert attributes["gen_ai.operation.name"] == "execute_tool"
    assert attributes["gen_ai.tool.name"] == "stripe.refund"
    assert attributes["warden.decision"] == "allow"
    assert attributes["warden.rule"] == "rule[0]"
    assert attributes["warden.effect.key"] == "refund:pay_1"
    assert attributes["warden.effect.state"] == "committed"
    assert attributes["warden.effect.attempt"] == 1
    assert attributes["warden.outcome"] == "committed"
    assert "error.type" not in attributes
    assert "gen_ai.tool.call.arguments" not in attributes and "gen_ai.tool.call.result" not in attributes
    (receipt,) = w.receipts()
    assert attributes["warden.receipt.id"] == receipt["receipt_id"]
    assert attributes["warden.receipt.hash"] == receipt["hash"]
    assert attributes["warden.policy.hash"] == receipt["policy_hash"]
    assert attributes["warden.policy.version"] == receipt["policy_version"] == "python-tests"
    assert attributes["warden.action.hash"] == receipt["action_hash"]
    assert attributes["warden.decision.reason"] == receipt["decision_reason"] == "rule[0]"
    assert attributes["warden.receipt.seq"] == receipt["seq"]
    assert attributes["warden.outcomes"] == "durable"
    assert attributes["gen_ai.tool.call.id"] == receipt["action_id"]
    context = caller.context
    expected = f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"
    assert receipt["traceparent"] == expected, "the receipt names the caller's trace"
    (event,) = ours.events
    assert event.name == "gen_ai.guardrail.result"
    assert event.attributes["gen_ai.guardrail.policy.id"] == receipt["policy_hash"]
    assert event.attributes["gen_ai.guardrail.result.value"] == "allow"
    w.close()


def test_an_async_protected_function_runs_under_the_span_too(store: Path, config: Path, otel: Otel) -> None:
    w = open_traced(store, config, otel)

    @w.protect("stripe.refund")
    async def refund(payment_id: str, amount: int) -> str:
        await asyncio.sleep(0)
        with otel.tracer.start_as_current_span("stripe POST /v1/refunds"):
            await asyncio.sleep(0)
        return payment_id

    async def main() -> None:
        with warden.context(agent="support-agent"), otel.tracer.start_as_current_span("agent turn"):
            await asyncio.gather(refund("pay_a", 1), refund("pay_b", 2))

    asyncio.run(main())
    (caller,) = otel.spans("agent turn")
    ours = otel.spans("execute_tool stripe.refund")
    outbound = otel.spans("stripe POST /v1/refunds")
    assert len(ours) == 2 and len(outbound) == 2
    assert {s.parent.span_id for s in ours} == {caller.context.span_id}
    assert {s.parent.span_id for s in outbound} == {s.context.span_id for s in ours}
    w.close()


def test_a_refusal_is_an_error_span_with_its_type_and_no_child(store: Path, config: Path, otel: Otel) -> None:
    w = open_traced(store, config, otel)
    refund = refund_of(w, otel)
    with warden.context(agent="support-agent"), otel.tracer.start_as_current_span("agent turn"):
        with pytest.raises(warden.Denied) as denied:
            refund("pay_big", 900_000)
        with pytest.raises(warden.ApprovalRequired) as required:
            refund("pay_mid", 90_000)
    assert otel.spans("stripe POST /v1/refunds") == []
    spans = otel.spans("execute_tool stripe.refund")
    assert [s.attributes["error.type"] for s in spans] == ["denied", "approval_required"]
    for span, refusal in zip(spans, (denied.value, required.value)):
        assert span.status.status_code == StatusCode.ERROR
        assert span.status.description == refusal.message
        assert span.attributes["warden.outcome"] == "refused"
    assert spans[1].attributes["warden.approval.id"] == required.value.request_id
    assert "warden.receipt.id" in spans[0].attributes and "warden.receipt.id" not in spans[1].attributes
    w.close()


def test_failed_and_ambiguous_outcomes_end_the_span_with_their_error_type(
    store: Path, config: Path, otel: Otel
) -> None:
    w = open_traced(store, config, otel)

    @w.protect("stripe.refund")
    def refund(payment_id: str, amount: int) -> None:
        if payment_id == "pay_declined":
            raise warden.NotExecuted("card declined for 4000-0000-0000-0002")
        raise TimeoutError("no answer from the processor")

    with warden.context(agent="support-agent"):
        with pytest.raises(warden.NotExecuted):
            refund("pay_declined", 1)
        with pytest.raises(TimeoutError):
            refund("pay_timeout", 1)
    failed, ambiguous = otel.spans("execute_tool stripe.refund")
    assert (failed.attributes["error.type"], failed.attributes["warden.effect.state"]) == ("not_executed", "failed")
    assert (ambiguous.attributes["error.type"], ambiguous.attributes["warden.effect.state"]) == ("ambiguous", "ambiguous")
    assert failed.status.description == "the effect was not executed (FAILED)", "the host's message is not recorded"
    assert "4000-0000" not in json.dumps(dict(failed.attributes))
    w.close()


@pytest.mark.parametrize(("outcomes", "named"), [(None, "durable"), ("durable", "durable"), ("deferred", "deferred")])
def test_the_span_names_the_outcome_mode(
    store: Path, config: Path, otel: Otel, outcomes: str | None, named: str
) -> None:
    w = open_traced(store, config, otel, **({} if outcomes is None else {"outcomes": outcomes}))
    refund = refund_of(w, otel)
    with warden.context(agent="support-agent"):
        refund("pay_1", 1200)
    w.close()
    (span,) = otel.spans("execute_tool stripe.refund")
    assert (span.attributes["warden.outcomes"], span.attributes["warden.outcome"]) == (named, "committed")


def test_a_wait_for_a_human_is_one_span_naming_the_approval_and_its_wait(store: Path, config: Path, otel: Otel) -> None:
    w = open_traced(store, config, otel)

    @w.protect("stripe.refund", wait=30)
    def refund(payment_id: str, amount: int) -> str:
        return "done"

    granted: list[str] = []

    def human() -> None:
        for _ in range(3000):
            pending = w.pending()
            if pending:
                granted.append(w.approve(pending[0]["approval_id"], by="ops:bob")["approval_id"])
                return
            time.sleep(0.01)

    approver = threading.Thread(target=human)
    with warden.context(agent="support-agent"), otel.tracer.start_as_current_span("agent turn"):
        approver.start()
        try:
            assert refund("pay_mid", 90_000) == "done"
        finally:
            approver.join()
    (span,) = otel.spans("execute_tool stripe.refund")
    (caller,) = otel.spans("agent turn")
    assert span.parent.span_id == caller.context.span_id
    attributes = dict(span.attributes)
    assert attributes["warden.approval.id"] == granted[0]
    assert attributes["warden.outcome"] == "committed" and "error.type" not in attributes
    took = (span.end_time - span.start_time) / 1e9
    for key in ("warden.approval.wait_time", "warden.approval.decision_time"):
        assert isinstance(attributes[key], float) and 0 <= attributes[key] <= took, key
    results = [e.attributes["gen_ai.guardrail.result.value"] for e in span.events if e.name == "gen_ai.guardrail.result"]
    assert results == ["approve", "approve"], "the request, then the proposal that spent the grant"
    assert attributes["warden.decision"] == "approve"
    receipts = [r for r in w.receipts() if r["approval_id"] == granted[0] and r["result"] == "committed"]
    assert [attributes["warden.receipt.id"]] == [r["receipt_id"] for r in receipts]
    (decided,) = otel.points("warden.approval.decision.duration")
    assert decided.count == 1
    w.close()


def test_exactly_one_span_per_call_over_mixed_outcomes_all_in_the_callers_trace(
    store: Path, config: Path, otel: Otel
) -> None:
    w = open_traced(store, config, otel)

    @w.protect("stripe.refund")
    def refund(payment_id: str, amount: int) -> str:
        kind = payment_id.split("_")[1]
        if kind == "fail":
            raise warden.NotExecuted("declined")
        if kind == "boom":
            raise RuntimeError("lost")
        return payment_id

    calls = 300
    outcomes: Counter[str] = Counter()
    with warden.context(agent="support-agent"), otel.tracer.start_as_current_span("agent run") as run:
        for n in range(calls):
            kind = ["ok", "fail", "boom", "dup", "big", "mid"][n % 6]
            payment, amount = f"pay_{kind}_{n}", {"big": 900_000, "mid": 90_000}.get(kind, 100)
            if kind == "dup":
                payment = "pay_ok_0"
            try:
                refund(payment, amount)
                outcomes["committed"] += 1
            except (warden.WardenError, warden.NotExecuted) as error:
                outcomes[type(error).__name__] += 1
            except RuntimeError:
                outcomes["RuntimeError"] += 1
    ours = otel.spans("execute_tool stripe.refund")
    assert len(ours) == calls, "one span per protected call"
    assert {s.context.trace_id for s in ours} == {run.get_span_context().trace_id}
    assert len({s.attributes["gen_ai.tool.call.id"] for s in ours}) == calls
    by_outcome = Counter(s.attributes["warden.outcome"] for s in ours)
    assert by_outcome == {"committed": 50, "failed": 50, "ambiguous": 50, "refused": 150}
    assert outcomes == {"committed": 50, "NotExecuted": 50, "RuntimeError": 50, "Duplicate": 50, "Denied": 50,
                        "ApprovalRequired": 50}
    counted = {tuple(sorted(p.attributes.items())): p.value for p in otel.points("warden.actions")}
    assert sum(counted.values()) == calls
    assert sum(v for k, v in counted.items() if ("error.type", "duplicate") in k) == 50
    durations = otel.points("warden.action.duration")
    assert sum(p.count for p in durations) == calls
    w.close()


def test_with_the_opt_in_the_span_carries_the_arguments_and_result_redacted(
    store: Path, config: Path, otel: Otel
) -> None:
    w = open_traced(store, config, otel, telemetry={"arguments": True, "results": True})

    @w.protect("email.send")
    def send(message_id: str, body: str, api_key: str) -> dict[str, str]:
        return {"sent": message_id, "session_token": "st-9f8e7d6c5b4a3210"}

    with warden.context(agent="mailer"):
        send("m_1", "hello, your code is Bearer tok-3c9a1f7e5b2d8064", "ak-7c1e55a2b3d94f60")
    (span,) = otel.spans("execute_tool email.send")
    arguments = json.loads(span.attributes["gen_ai.tool.call.arguments"])
    assert arguments == {"message_id": "m_1", "body": "hello, your code is Bearer [REDACTED]", "api_key": "[REDACTED]"}
    result = json.loads(span.attributes["gen_ai.tool.call.result"])
    assert result == {"sent": "m_1", "session_token": "[REDACTED]"}
    with pytest.raises(warden.InvalidInput, match="telemetry"):
        warden.Warden(store=store.with_name("other.redb"), config=config, telemetry={"arguments": "yes"})
    w.close()


def test_by_default_no_argument_result_or_host_message_reaches_a_span_or_a_measurement(
    store: Path, config: Path, otel: Otel
) -> None:
    w = open_traced(store, config, otel)
    secrets = ["Bearer tok-3c9a1f7e5b2d8064", "ak-7c1e55a2b3d94f60", "st-9f8e7d6c5b4a3210", "4000-0000-0000-0002"]

    @w.protect("email.send")
    def send(message_id: str, body: str, api_key: str) -> dict[str, str]:
        if message_id == "m_declined":
            raise warden.NotExecuted(f"rejected {secrets[3]}")
        if message_id == "m_lost":
            raise TimeoutError(f"lost with {api_key}")
        return {"sent": message_id, "session_token": secrets[2]}

    with warden.context(agent="mailer"), otel.tracer.start_as_current_span("agent turn"):
        for message in ("m_1", "m_declined", "m_lost"):
            with contextlib.suppress(warden.NotExecuted, TimeoutError):
                send(message, f"your code is {secrets[0]}", secrets[1])
    spans = otel.spans("execute_tool email.send")
    assert [s.attributes["warden.outcome"] for s in spans] == ["committed", "failed", "ambiguous"]
    seen = [dict(s.attributes) for s in spans] + [{"status": s.status.description} for s in spans]
    seen += [dict(e.attributes) for s in spans for e in s.events]
    data = otel.reader.get_metrics_data()
    seen += [
        dict(point.attributes)
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        for point in metric.data.data_points
    ]
    assert len(seen) > 2 * len(spans)
    text = json.dumps(seen)
    for secret in secrets + ["your code is"]:
        assert secret not in text, secret
    w.close()


def test_the_measurements_and_gauges_reach_the_metric_reader(store: Path, config: Path, otel: Otel) -> None:
    w = open_traced(store, config, otel)
    assert w.register_gauges() == ["warden.effects", "warden.approvals.pending", "warden.chain.length"]

    @w.protect("stripe.refund")
    def refund(payment_id: str, amount: int) -> None:
        raise TimeoutError("lost")

    with warden.context(agent="support-agent"):
        for payment in ("pay_1", "pay_2"):
            with pytest.raises(TimeoutError):
                refund(payment, 100)
        with pytest.raises(warden.ApprovalRequired):
            refund("pay_3", 90_000)
    effects = {p.attributes["warden.effect.state"]: p.value for p in otel.points("warden.effects")}
    assert effects == {"ambiguous": 2, "executing": 0, "reserved": 0, "failed": 0}
    assert [p.value for p in otel.points("warden.approvals.pending")] == [1]
    assert [p.value for p in otel.points("warden.chain.length")] == [len(w.receipts())]
    writes = {p.attributes["warden.store.write"]: p.count for p in otel.points("warden.store.write.duration")}
    assert writes == {"proposal": 3, "outcome": 2}
    batches = {p.attributes["warden.store.write"]: (p.count, p.sum) for p in otel.points("warden.store.write.batch_size")}
    assert batches == {"proposal": (3, 3), "outcome": (2, 2)}, "one caller: each write its sync's only one"
    w.close()
    assert otel.points("warden.effects") == [], "a closed Warden observes nothing"


def test_without_an_sdk_the_library_is_not_asked_for_a_record(
    store: Path, config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert type(trace.get_tracer_provider()).__module__.startswith("opentelemetry.trace"), "no global SDK here"
    w = warden.Warden(store=store, config=config)

    def refuse(*_: Any) -> None:
        raise AssertionError("a trace was made with no SDK configured")

    monkeypatch.setitem(w._lib.functions, "warden_trace_new", refuse)

    @w.protect("stripe.refund")
    def refund(payment_id: str, amount: int) -> str:
        return payment_id

    with warden.context(agent="support-agent"):
        assert refund("pay_1", 1) == "pay_1"
        with pytest.raises(warden.Duplicate):
            refund("pay_1", 1)
    (receipt,) = w.receipts(limit=1)
    assert "traceparent" not in receipt
    w.close()
