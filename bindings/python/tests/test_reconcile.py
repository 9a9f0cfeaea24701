"""reconcile=fn: asked once about an AMBIGUOUS effect; its answer moves it (or not) and the
proposal is retried once."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import warden


def _make_ambiguous(w: warden.Warden, payment_id: str) -> None:
    @w.protect("stripe.refund")
    def lost(payment_id: str, amount: int) -> None:
        raise TimeoutError("the reply was lost")

    with pytest.raises(TimeoutError):
        lost(payment_id, 1200)
    assert w.effect(f"refund:{payment_id}")["state"] == "ambiguous"  # type: ignore[index]


def test_not_executed_answer_lets_the_retry_run(w: warden.Warden, agent: Any) -> None:
    _make_ambiguous(w, "pay_1")
    asked: list[str] = []
    ran: list[int] = []

    def ask_provider(effect_key: str) -> str:
        asked.append(effect_key)
        return "not_executed"

    @w.protect("stripe.refund", reconcile=ask_provider)
    def refund(payment_id: str, amount: int) -> str:
        ran.append(w.effect(f"refund:{payment_id}")["attempt"])  # type: ignore[index]
        return "ok"

    assert refund("pay_1", 1200) == "ok"
    assert asked == ["refund:pay_1"]
    assert ran == [2]
    record = w.effect("refund:pay_1")
    assert record is not None and record["state"] == "committed"
    resolved = [e for e in w.events(limit=0) if e["type"] == "EFFECT_RESOLVED"]
    assert resolved[-1]["data"]["resolved_by"] == "reconcile:stripe.refund"


def test_committed_answer_resolves_and_the_retry_is_a_duplicate(w: warden.Warden, agent: Any) -> None:
    _make_ambiguous(w, "pay_1")
    asked: list[str] = []

    @w.protect("stripe.refund", reconcile=lambda key: asked.append(key) or "committed")
    def refund(payment_id: str, amount: int) -> str:
        raise AssertionError("must not run twice")

    with pytest.raises(warden.Duplicate) as refused:
        refund("pay_1", 1200)
    assert refused.value.state == "committed"
    assert asked == ["refund:pay_1"]
    assert w.effect("refund:pay_1")["state"] == "committed"  # type: ignore[index]


def test_unknown_answer_leaves_it_ambiguous(w: warden.Warden, agent: Any) -> None:
    _make_ambiguous(w, "pay_1")
    asked: list[str] = []

    @w.protect("stripe.refund", reconcile=lambda key: asked.append(key) or "unknown")
    def refund(payment_id: str, amount: int) -> str:
        raise AssertionError("must not run")

    with pytest.raises(warden.Ambiguous) as refused:
        refund("pay_1", 1200)
    assert refused.value.effect_key == "refund:pay_1"
    assert asked == ["refund:pay_1"]
    assert w.effect("refund:pay_1")["state"] == "ambiguous"  # type: ignore[index]


def test_the_hook_is_not_asked_when_nothing_is_ambiguous(w: warden.Warden, agent: Any) -> None:
    asked: list[str] = []

    @w.protect("stripe.refund", reconcile=lambda key: asked.append(key) or "unknown")
    def refund(payment_id: str, amount: int) -> str:
        return "ok"

    assert refund("pay_1", 1200) == "ok"
    with pytest.raises(warden.Duplicate):
        refund("pay_1", 1200)
    assert asked == []


def test_a_bad_answer_is_invalid_input(w: warden.Warden, agent: Any) -> None:
    _make_ambiguous(w, "pay_1")

    @w.protect("stripe.refund", reconcile=lambda key: "maybe")
    def refund(payment_id: str, amount: int) -> str:
        return "ok"

    with pytest.raises(warden.InvalidInput):
        refund("pay_1", 1200)
    assert w.effect("refund:pay_1")["state"] == "ambiguous"  # type: ignore[index]


def test_an_async_hook_on_an_async_function(w: warden.Warden, agent: Any) -> None:
    _make_ambiguous(w, "pay_1")
    asked: list[str] = []

    async def ask_provider(effect_key: str) -> str:
        await asyncio.sleep(0)
        asked.append(effect_key)
        return "not_executed"

    @w.protect("stripe.refund", reconcile=ask_provider)
    async def refund(payment_id: str, amount: int) -> str:
        return "ok"

    assert asyncio.run(refund("pay_1", 1200)) == "ok"
    assert asked == ["refund:pay_1"]
    assert w.effect("refund:pay_1")["attempt"] == 2  # type: ignore[index]
