"""The shared result vectors (tests/vectors/results.json): what a protected function returns
is committed and stored by the library's one rule, never refused, never AMBIGUOUS; a call
cancelled before its function ran is NOT_EXECUTED. The same file is run from C and Node."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest

import warden

from conftest import REPO

_VECTORS = json.loads((REPO / "tests" / "vectors" / "results.json").read_text(encoding="utf-8"))["cases"]


class _Text:
    """A value with no JSON form whose repr is the case's text."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth - 1):
        value = [value]
    return value


def _result(case: dict[str, Any]) -> Any:
    if "json_text" in case:
        return json.loads(case["json_text"])
    if "nested" in case:
        return _nested(case["nested"])
    if "string_of_x" in case:
        return "x" * case["string_of_x"]
    return _Text(case["text"])


def _cancelled_before_run(w: warden.Warden, payment_id: str) -> None:
    """The caller is cancelled while its proposal is on the way; the permit arrives after."""
    entered, proceed = threading.Event(), threading.Event()
    real_propose = w._propose

    def held(*args: Any) -> warden.Permit:
        entered.set()
        proceed.wait(30)
        return real_propose(*args)

    w._propose = held  # type: ignore[method-assign]

    @w.protect("stripe.refund")
    async def refund(payment_id: str, amount: int) -> None:
        raise AssertionError("must not run")

    async def main() -> None:
        task = asyncio.create_task(refund(payment_id, 1))
        await asyncio.to_thread(entered.wait, 10)
        task.cancel()
        await asyncio.sleep(0)
        proceed.set()

    asyncio.run(main())
    del w._propose  # type: ignore[attr-defined]


def _settled(w: warden.Warden, key: str) -> dict[str, Any]:
    for _ in range(1000):
        record = w.effect(key)
        if record is not None and record["state"] not in ("reserved", "executing"):
            return record
        threading.Event().wait(0.01)
    raise AssertionError(f"{key} never settled")


@pytest.mark.parametrize("case", _VECTORS, ids=lambda case: case["name"])
def test_result_vector(w: warden.Warden, agent: Any, case: dict[str, Any]) -> None:
    payment_id = f"vec_{case['name']}"
    key = f"refund:{payment_id}"
    if case.get("cancelled_before_run"):
        _cancelled_before_run(w, payment_id)
    else:
        value = _result(case)

        @w.protect("stripe.refund")
        def refund(payment_id: str, amount: int) -> Any:
            return value

        assert refund(payment_id, 1) is value, "the caller gets its function's own value back"
    record = _settled(w, key)
    assert record["state"] == case["state"]
    if "error" in case:
        assert record["error"] == case["error"]
    stored = case.get("stored")
    if stored == "whole":
        assert record["result"] == _result(case)
    elif stored is not None:
        marked = record["result"]
        assert marked["warden_result"] in (stored, case.get("stored_or")), marked["warden_result"]
        assert marked["sha256"].startswith("sha256:") and isinstance(marked["bytes"], int)
        if stored == "text":
            assert marked["excerpt"] == case["text"]
