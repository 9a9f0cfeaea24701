"""Resolve, effects, receipts, events, the chain, and the handle's lifetime."""

from __future__ import annotations

import contextvars
import threading
from pathlib import Path
from typing import Any

import pytest

import warden


def _ambiguous(w: warden.Warden, payment_id: str) -> str:
    @w.protect("stripe.refund")
    def lost(payment_id: str, amount: int) -> None:
        raise TimeoutError("reply lost")

    with pytest.raises(TimeoutError):
        lost(payment_id, 1200)
    return f"refund:{payment_id}"


def test_a_human_resolves_an_ambiguous_effect(w: warden.Warden, agent: Any) -> None:
    key = _ambiguous(w, "pay_1")
    resolved = w.resolve(key, "failed", by="ops:carol")
    assert resolved["state"] == "failed" and resolved["resolved_by"] == "ops:carol"

    @w.protect("stripe.refund")
    def refund(payment_id: str, amount: int) -> str:
        return "ok"

    assert refund("pay_1", 1200) == "ok"  # FAILED may be retried
    with pytest.raises(warden.NotResolvable) as refused:
        w.resolve(key, "failed", by="ops:carol")
    assert refused.value.state == "committed"
    assert refused.value.code == "WARDEN_RESULT_NOT_RESOLVABLE"
    with pytest.raises(warden.NotFound):
        w.resolve("refund:nope", "committed", by="ops:carol")


def test_a_resolution_bound_to_an_attempt_moves_only_that_attempt(w: warden.Warden, agent: Any) -> None:
    key = _ambiguous(w, "pay_at")
    assert w.effect(key)["attempt"] == 1
    w.resolve(key, "failed", by="ops:carol", attempt=1)
    _ambiguous(w, "pay_at")  # tried again: attempt 2 is lost too
    before = w.effect(key)
    assert (before["state"], before["attempt"]) == ("ambiguous", 2)
    with pytest.raises(warden.InvalidInput) as stale:
        w.resolve(key, "committed", by="ops:carol", attempt=1)
    assert "at attempt 2, not at attempt 1" in str(stale.value)
    assert w.effect(key) == before
    for bad in (0, -1, True, 1.0, "2", 2**32):
        with pytest.raises(ValueError):
            w.resolve(key, "committed", by="ops:carol", attempt=bad)  # type: ignore[arg-type]
    assert w.effect(key) == before
    assert w.resolve(key, "committed", by="ops:carol", attempt=2)["state"] == "committed"


def test_effects_receipts_events_and_the_chain(w: warden.Warden, agent: Any) -> None:
    @w.protect("stripe.refund")
    def refund(payment_id: str, amount: int) -> str:
        return "ok"

    for n in range(3):
        refund(f"pay_{n}", 100 + n)
    _ambiguous(w, "pay_lost")

    assert [e["effect_key"] for e in w.effects()] == ["refund:pay_0", "refund:pay_1", "refund:pay_2", "refund:pay_lost"]
    assert [e["effect_key"] for e in w.effects(state="ambiguous")] == ["refund:pay_lost"]
    assert len(w.effects(limit=2)) == 2
    assert w.effect("refund:pay_1")["result"] == "ok"  # type: ignore[index]
    assert w.effect("refund:never") is None

    receipts = w.receipts()
    assert [r["seq"] for r in receipts] == list(range(1, len(receipts) + 1))
    assert [r["result"] for r in receipts] == ["committed"] * 3 + ["ambiguous"]
    assert [r["seq"] for r in w.receipts(from_seq=3, limit=1)] == [3]

    events = w.events()
    assert events[0]["event_id"] == 1 and events[0]["type"] == "ACTION_PROPOSED"
    after = w.events(after=events[4]["event_id"], limit=2)
    assert [e["event_id"] for e in after] == [events[5]["event_id"], events[6]["event_id"]]

    report = w.verify_chain()
    assert report["ok"] is True and report["verified"] == len(receipts) and report["breaks"] == []


def test_close_is_idempotent_and_a_closed_handle_refuses_calls(store: Path, config: Path) -> None:
    w = warden.Warden(store=store, config=config)
    assert not w.closed
    w.close()
    w.close()
    assert w.closed
    with pytest.raises(warden.InvalidInput, match="closed"):
        w.effects()
    # The store is really released: it opens again, and so does a second handle meanwhile.
    with warden.Warden(store=store, config=config) as again, warden.Warden(store=store) as kernel_only:
        assert again.effects() == [] and kernel_only.effects() == []


def test_the_context_manager_closes(store: Path, config: Path) -> None:
    with warden.Warden(store=store, config=config) as w:
        assert w.verify_chain()["ok"]
    assert w.closed
    w.close()


def test_close_waits_for_a_permit_in_flight(w: warden.Warden, agent: Any) -> None:
    entered = threading.Event()
    release = threading.Event()

    @w.protect("stripe.refund")
    def refund(payment_id: str, amount: int) -> str:
        entered.set()
        release.wait(10)
        return "ok"

    results: list[str] = []
    context = contextvars.copy_context()  # a new thread starts with no principal
    worker = threading.Thread(target=lambda: results.append(context.run(refund, "pay_1", 1200)))
    worker.start()
    entered.wait(10)
    w.close()  # deferred: the running call still reports its outcome
    release.set()
    worker.join()
    assert results == ["ok"]
    with warden.Warden(store=w.store, config=w.config) as again:
        assert again.effect("refund:pay_1")["state"] == "committed"  # type: ignore[index]


def test_a_handle_without_a_document_serves_the_kernel_calls_only(store: Path, config: Path) -> None:
    with warden.Warden(store=store, config=config) as w, warden.context(agent="support-agent"):
        w.protect("email.send")(lambda message_id: None)("msg_1")
    with warden.Warden(store=store) as kernel:
        assert kernel.effect("email:msg_1")["state"] == "committed"  # type: ignore[index]
        with warden.context(agent="support-agent"), pytest.raises(warden.ConfigError):
            kernel.protect("email.send")(lambda message_id: None)("msg_2")


def test_the_low_level_permit(w: warden.Warden, agent: Any) -> None:
    with w.propose("stripe.refund", {"payment_id": "pay_1", "amount": 1200}) as permit:
        assert permit.effect_key == "refund:pay_1"
        assert permit.attempt == 1
        assert permit.arguments == {"payment_id": "pay_1", "amount": 1200}
        assert permit.decision == "allow"
        permit.commit({"id": "re_1"})
    assert w.effect("refund:pay_1")["result"] == {"id": "re_1"}  # type: ignore[index]
    # Released without an outcome: the library records AMBIGUOUS.
    permit = w.propose("stripe.refund", {"payment_id": "pay_2", "amount": 1200})
    permit.release()
    permit.release()
    assert w.effect("refund:pay_2")["state"] == "ambiguous"  # type: ignore[index]


def test_durability_process_is_the_open_option_and_a_misspelling_names_both_values(store: Path, config: Path) -> None:
    with warden.Warden(store=store, config=config, durability="process") as w, warden.context(agent="support-agent"):
        w.protect("email.send")(lambda message_id: None)("msg_1")
    with warden.Warden(store=store, config=config) as again:
        assert again.effect("email:msg_1")["state"] == "committed"  # type: ignore[index]
    with pytest.raises(warden.InvalidInput) as refused:
        warden.Warden(store=store, config=config, durability="disk")
    message = str(refused.value)
    assert "durability" in message and '"power"' in message and '"process"' in message and "disk" in message
