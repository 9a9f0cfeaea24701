"""Approvals a person can trust, from Python: the request shows the arguments, every spelling of
the requester is refused, M-of-N with verified roles, preconditions, the notification hook, and
waiting in the library."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

import warden

MN_DOCUMENT = """\
schema: warden/v1
actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    rules:
      - when: { amount_lte: 1000 }
        decision: allow
      - when: { amount_lte: 100000 }
        decision: approve
      - decision: approve
        approval: { required: 2, roles: [finance, risk] }
"""


@pytest.fixture()
def mn(tmp_path: Path) -> Any:
    config = tmp_path / "mn.yaml"
    config.write_text(MN_DOCUMENT, encoding="utf-8")
    with warden.Warden(store=tmp_path / "mn.redb", config=config) as handle:
        yield handle


def ask(fn: Any, *args: Any) -> str:
    with pytest.raises(warden.ApprovalRequired) as required:
        fn(*args)
    assert required.value.request_id is not None
    return required.value.request_id


def verified(*roles: str) -> dict[str, Any]:
    return {"issuer": "https://id.example", "claims": {"roles": list(roles)}}


def test_the_request_shows_the_arguments_it_binds(w: warden.Warden, agent: Any) -> None:
    @w.protect("stripe.refund")
    def refund(payment_id: str, amount: int) -> None:
        raise AssertionError("must not run")

    request_id = ask(refund, "pay_9", 120_000)
    for record in (w.approval(request_id), w.pending()[0]):
        assert record is not None
        assert record["arguments"] == {"amount": 120_000, "payment_id": "pay_9"}
        assert record["requested_by"]["agent"] == "support-agent"
        assert record["requested_by"]["user"] == "ada"
        assert record["requester_identity"]["verified"] is False
        assert record["environment"] == "production"
        assert record["rule"] == "rule[1]"
        assert record["when"] == {"amount_gte": 0, "amount_lte": 500000}
        assert record["policy_hash"].startswith("sha256:")
        assert (record["required"], record["grants"]) == (1, 0)


def test_every_spelling_of_the_requester_is_refused(w: warden.Warden, agent: Any) -> None:
    @w.protect("stripe.refund")
    def refund(payment_id: str, amount: int) -> None:
        raise AssertionError("must not run")

    request_id = ask(refund, "pay_s", 120_000)
    for requester in ("ada", "ADA", "ada ", "cli:ada", "ａｄａ", "support-agent"):
        with pytest.raises(warden.ApprovalMismatch) as refused:
            w.approve(request_id, by=requester)
        assert refused.value.reason == "approver_is_requester", requester
    with pytest.raises(warden.ApprovalMismatch) as refused:
        w.approve(request_id, by="ADA", agent="slack", verified=verified())
    assert refused.value.reason == "approver_is_requester"
    assert w.approval(request_id)["votes"] == []  # type: ignore[index]


SELF_SPELLINGS = (
    "ada:",
    "support-agent:",
    "support-agent/ada",
    "ada/support-agent",
    "support\u2011agent:",
    "ad\u0430",
    "\uff41\uff44\uff41:",
)


def test_the_requester_is_refused_under_every_principal_form_and_look_alike(w: warden.Warden, agent: Any) -> None:
    @w.protect("stripe.refund")
    def refund(payment_id: str, amount: int) -> None:
        raise AssertionError("must not run")

    request_id = ask(refund, "pay_f", 120_000)
    # Asserted (the C grant and deny), and through the answer call (verified, no agent given).
    ways: tuple[dict[str, Any], ...] = ({}, {"verified": verified()})
    for requester in SELF_SPELLINGS:
        for way in ways:
            with pytest.raises(warden.ApprovalMismatch) as refused:
                w.approve(request_id, by=requester, **way)
            assert refused.value.reason == "approver_is_requester", requester
        with pytest.raises(warden.ApprovalMismatch) as denied:
            w.deny(request_id, by=requester)
        assert denied.value.reason == "approver_is_requester", requester
    for unreadable in ("ops:bob:x", "b\u034fob", "ops\uff1abob"):
        for way in ways:
            with pytest.raises(warden.InvalidInput) as bad:
                w.approve(request_id, by=unreadable, **way)
            assert "AGENT:USER" in str(bad.value), unreadable
    with pytest.raises(warden.InvalidInput) as fields:
        w.approve(request_id, by="ada:", agent="slack", verified=verified())
    assert "a separator" in str(fields.value)
    assert w.approval(request_id)["votes"] == []  # type: ignore[index]


TWO_DOCUMENT = """\
schema: warden/v1
actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    rules:
      - decision: approve
        approval: { required: 2 }
"""


def test_m_of_n_counts_one_verified_identity_once_under_any_name(tmp_path: Path) -> None:
    config = tmp_path / "two.yaml"
    config.write_text(TWO_DOCUMENT, encoding="utf-8")
    idp = {"issuer": "https://idp.test", "claims": {"sub": "u-123"}}
    with warden.Warden(store=tmp_path / "two.redb", config=config) as two:

        @two.protect("stripe.refund")
        def refund(payment_id: str, amount: int) -> str:
            return "refunded"

        with warden.context(agent="refund-agent", user="ada"):
            request_id = ask(refund, "pay_two", 50)
            first = two.approve(request_id, by="bob", agent="slack", verified=idp)
            assert (first["status"], first["grants"]) == ("pending", 1)
            with pytest.raises(warden.ApprovalMismatch) as again:
                two.approve(request_id, by="robert", agent="teams", verified=idp)
            assert again.value.reason == "already_answered"
            assert two.approval(request_id)["grants"] == 1  # type: ignore[index]
            other = {"issuer": "https://idp.test", "claims": {"sub": "u-456"}}
            second = two.approve(request_id, by="slack:carol", verified=other)
            assert (second["status"], second["grants"]) == ("granted", 2)


def test_m_of_n_counts_distinct_verified_approvers_holding_a_role(mn: warden.Warden) -> None:
    @mn.protect("stripe.refund")
    def refund(payment_id: str, amount: int) -> str:
        return "refunded"

    with warden.context(agent="refund-agent", user="ada"):
        request_id = ask(refund, "pay_big", 900_000)
        first = mn.approve(request_id, by="bob", agent="slack", verified=verified("finance"))
        assert (first["status"], first["grants"], first["required"]) == ("pending", 1, 2)
        with pytest.raises(warden.ApprovalMismatch) as again:
            mn.approve(request_id, by="BOB", agent="teams", verified=verified("risk"))
        assert again.value.reason == "already_answered"
        with pytest.raises(warden.ApprovalMismatch) as asserted:
            mn.approve(request_id, by="ops:dave")
        assert asserted.value.reason == "approver_not_verified"
        with pytest.raises(warden.ApprovalMismatch) as no_role:
            mn.approve(request_id, by="erin", agent="slack", verified=verified("support"))
        assert no_role.value.reason == "approver_lacks_role"
        second = mn.approve(request_id, by="carol", agent="slack", verified=verified("risk"))
        assert (second["status"], second["grants"]) == ("granted", 2)
        assert [v["user"] for v in second["votes"]] == ["bob", "carol"]
        assert all(v["verified"] for v in second["votes"])
        with warden.with_approval(request_id):
            assert refund("pay_big", 900_000) == "refunded"


def test_a_changed_precondition_refuses_and_leaves_the_approval_granted(w: warden.Warden, agent: Any) -> None:
    world = {"balance": 500}
    seen: list[dict[str, Any]] = []

    def state(action: dict[str, Any]) -> dict[str, Any]:
        seen.append(action)
        return dict(world)

    @w.protect("stripe.refund", precondition=state)
    def refund(payment_id: str, amount: int) -> str:
        return "refunded"

    request_id = ask(refund, "pay_p", 120_000)
    assert seen[0]["name"] == "stripe.refund" and seen[0]["arguments"]["payment_id"] == "pay_p"
    assert w.approval(request_id)["precondition"].startswith("sha256:")  # type: ignore[index]
    w.approve(request_id, by="ops:bob")
    world["balance"] = 0
    with warden.with_approval(request_id), pytest.raises(warden.ApprovalMismatch) as changed:
        refund("pay_p", 120_000)
    assert changed.value.reason == "precondition_changed"
    assert w.approval(request_id)["status"] == "granted"  # type: ignore[index]
    world["balance"] = 500
    with warden.with_approval(request_id):
        assert refund("pay_p", 120_000) == "refunded"
    assert w.approval(request_id)["status"] == "consumed"  # type: ignore[index]
    # An allowed call never asks.
    asked = len(seen)
    assert refund("pay_small", 10) == "refunded"
    assert len(seen) == asked


def test_a_precondition_provider_that_raises_fails_the_call_with_its_own_exception(
    w: warden.Warden, agent: Any
) -> None:
    class LedgerDown(Exception):
        pass

    def state(action: dict[str, Any]) -> Any:
        raise LedgerDown("the ledger is down")

    @w.protect("stripe.refund", precondition=state)
    def refund(payment_id: str, amount: int) -> str:
        raise AssertionError("must not run")

    with pytest.raises(LedgerDown):
        refund("pay_x", 120_000)
    assert w.pending() == []


def test_an_async_precondition_is_awaited_on_the_loop(w: warden.Warden, agent: Any) -> None:
    import asyncio

    async def state(action: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(0)
        return {"open": True}

    @w.protect("stripe.refund", precondition=state)
    async def refund(payment_id: str, amount: int) -> str:
        return "refunded"

    async def main() -> str:
        try:
            await refund("pay_a", 120_000)
        except warden.ApprovalRequired as required:
            assert required.request_id is not None
            w.approve(required.request_id, by="ops:bob")
            with warden.with_approval(required.request_id):
                return await refund("pay_a", 120_000)
        raise AssertionError("expected an approval request")

    assert asyncio.run(main()) == "refunded"


def test_the_hook_hears_each_new_request_once_off_the_callers_thread_and_its_exception_never_fails(
    w: warden.Warden, agent: Any
) -> None:
    heard: list[tuple[str, str]] = []
    done = threading.Event()

    def hook(request: dict[str, Any]) -> None:
        heard.append((request["approval_id"], threading.current_thread().name))
        done.set()
        raise RuntimeError("the pager is down")

    w.on_approval_request(hook)

    @w.protect("stripe.refund")
    def refund(payment_id: str, amount: int) -> None:
        raise AssertionError("must not run")

    first = ask(refund, "pay_h", 120_000)
    assert ask(refund, "pay_h", 120_000) == first  # the pending one, no second request
    assert done.wait(10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not any(
        e["type"] == "APPROVAL_NOTIFY_FAILED" for e in w.events(limit=1000)
    ):
        time.sleep(0.01)
    assert [request_id for request_id, _ in heard] == [first]
    assert heard[0][1] != threading.current_thread().name
    failed = [e for e in w.events(limit=1000) if e["type"] == "APPROVAL_NOTIFY_FAILED"]
    assert failed and failed[0]["approval_id"] == first and failed[0]["data"]["channel"] == "hook"
    w.on_approval_request(None)


def test_wait_for_answer_is_judged_in_the_library(w: warden.Warden, agent: Any) -> None:
    @w.protect("stripe.refund")
    def refund(payment_id: str, amount: int) -> None:
        raise AssertionError("must not run")

    request_id = ask(refund, "pay_w", 120_000)
    assert w.wait_for_answer(request_id, 0)["status"] == "pending"  # type: ignore[index]
    threading.Timer(0.05, lambda: w.approve(request_id, by="ops:bob")).start()
    assert w.wait_for_answer(request_id, 30)["status"] == "granted"  # type: ignore[index]
    assert w.wait_for_answer("apr_" + "0" * 32, 0) is None
    with pytest.raises(warden.InvalidInput):
        w.wait_for_answer(request_id, 86_400 * 2)
