"""Approval required → a human approves → the agent presents it; and the ways that can go wrong."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

import warden


@pytest.fixture()
def refund(w: warden.Warden) -> Any:
    ran: list[tuple[str, int]] = []

    @w.protect("stripe.refund")
    def refund(payment_id: str, amount: int) -> str:
        ran.append((payment_id, amount))
        return f"refunded {payment_id}"

    refund.ran = ran  # type: ignore[attr-defined]
    return refund


def test_approval_required_then_approved_then_presented(w: warden.Warden, agent: Any, refund: Any) -> None:
    with pytest.raises(warden.ApprovalRequired) as required:
        refund("pay_big", 120_000)
    exc = required.value
    assert exc.code == "WARDEN_RESULT_APPROVAL_REQUIRED"
    assert exc.reason == "approval_required"
    assert exc.request_id is not None and exc.request_id.startswith("apr_")
    assert exc.expires_at is not None and exc.expires_at.endswith("Z")
    assert exc.action_hash == warden.action_hash(
        "stripe.refund", {"payment_id": "pay_big", "amount": 120_000}, "support-agent", "ada"
    )
    assert [r["approval_id"] for r in w.pending()] == [exc.request_id]
    assert refund.ran == []

    granted = w.approve(exc.request_id, by="ops:bob")
    assert granted["status"] == "granted" and granted["approver"] == "ops:bob"
    assert w.pending() == []

    with warden.with_approval(exc.request_id):
        assert refund("pay_big", 120_000) == "refunded pay_big"
    assert refund.ran == [("pay_big", 120_000)]
    assert w.approval(exc.request_id)["status"] == "consumed"  # type: ignore[index]
    receipt = w.receipts()[-1]
    assert receipt["approval_id"] == exc.request_id and receipt["approver"] == "ops:bob"


def test_the_requester_cannot_approve_their_own_request(w: warden.Warden, agent: Any, refund: Any) -> None:
    with pytest.raises(warden.ApprovalRequired) as required:
        refund("pay_big", 120_000)
    for requester in ("ada", "support-agent", "ADA"):
        with pytest.raises(warden.ApprovalMismatch) as refused:
            w.approve(required.value.request_id, by=requester)  # type: ignore[arg-type]
        assert refused.value.reason == "approver_is_requester"
        assert refused.value.code == "WARDEN_RESULT_APPROVAL_MISMATCH"
        assert refused.value.approval_id == required.value.request_id
    assert w.approval(required.value.request_id)["status"] == "pending"  # type: ignore[index]


def test_an_approval_binds_to_the_exact_action(w: warden.Warden, agent: Any, refund: Any) -> None:
    with pytest.raises(warden.ApprovalRequired) as required:
        refund("pay_big", 120_000)
    request_id = required.value.request_id
    assert request_id is not None
    w.approve(request_id, by="ops:bob")
    with warden.with_approval(request_id):
        with pytest.raises(warden.ApprovalMismatch) as mutated:
            refund("pay_big", 499_999)  # not what the human saw
        assert mutated.value.reason == "mismatch"
        # The reason the class names when none is given is the core's, as Node's table says.
        assert warden.ApprovalMismatch.default_reason == mutated.value.reason
        assert refund("pay_big", 120_000) == "refunded pay_big"
        with pytest.raises(warden.ApprovalMismatch) as replayed:
            refund("pay_other", 120_000)
    assert replayed.value.approval_id == request_id
    assert refund.ran == [("pay_big", 120_000)]


def test_a_denied_request_denies_the_action(w: warden.Warden, agent: Any, refund: Any) -> None:
    with pytest.raises(warden.ApprovalRequired) as required:
        refund("pay_big", 120_000)
    request_id = required.value.request_id
    assert request_id is not None
    denied = w.deny(request_id, by="ops:bob", reason="customer already refunded by hand")
    assert denied["status"] == "denied" and denied["note"] == "customer already refunded by hand"
    with warden.with_approval(request_id), pytest.raises(warden.Denied) as refused:
        refund("pay_big", 120_000)
    assert refused.value.reason == "approval_denied"


def test_wait_blocks_until_a_human_approves(w: warden.Warden, agent: Any) -> None:
    ran: list[str] = []

    @w.protect("stripe.refund", wait=30)
    def refund(payment_id: str, amount: int) -> str:
        ran.append(payment_id)
        return "done"

    approved: list[dict[str, Any]] = []

    def human() -> None:
        for _ in range(3000):
            pending = w.pending()
            if pending:
                approved.append(w.approve(pending[0]["approval_id"], by="ops:bob"))
                return
            time.sleep(0.01)

    approver = threading.Thread(target=human)
    approver.start()
    try:
        assert refund("pay_big", 120_000) == "done"
    finally:
        approver.join()
    assert ran == ["pay_big"]
    assert approved and approved[0]["status"] == "granted"
    assert w.approval(approved[0]["approval_id"])["status"] == "consumed"  # type: ignore[index]


def test_wait_presents_a_denial_too(w: warden.Warden, agent: Any) -> None:
    @w.protect("stripe.refund", wait=30)
    def refund(payment_id: str, amount: int) -> str:
        raise AssertionError("must not run")

    def human() -> None:
        for _ in range(3000):
            pending = w.pending()
            if pending:
                w.deny(pending[0]["approval_id"], by="ops:bob")
                return
            time.sleep(0.01)

    approver = threading.Thread(target=human)
    approver.start()
    try:
        with pytest.raises(warden.Denied) as refused:
            refund("pay_big", 120_000)
    finally:
        approver.join()
    assert refused.value.reason == "approval_denied"


def test_wait_gives_up_with_the_original_refusal_when_nobody_answers(w: warden.Warden, agent: Any) -> None:
    @w.protect("stripe.refund", wait=0.1)
    def refund(payment_id: str, amount: int) -> str:
        raise AssertionError("must not run")

    with pytest.raises(warden.ApprovalRequired) as required:
        refund("pay_big", 120_000)
    assert w.approval(required.value.request_id)["status"] == "pending"  # type: ignore[arg-type,index]


def test_async_wait_polls_without_blocking_the_loop(w: warden.Warden, agent: Any) -> None:
    @w.protect("stripe.refund", wait=30)
    async def refund(payment_id: str, amount: int) -> str:
        return "done"

    async def human() -> None:
        while True:
            pending = await asyncio.to_thread(w.pending)
            if pending:
                await asyncio.to_thread(w.approve, pending[0]["approval_id"], by="ops:bob")
                return
            await asyncio.sleep(0.01)

    async def main() -> str:
        # The human runs on the same loop: it only gets a turn if the waiting call yields.
        result, _ = await asyncio.gather(refund("pay_big", 120_000), human())
        return result

    assert asyncio.run(main()) == "done"


def test_approve_with_a_ttl(w: warden.Warden, agent: Any, refund: Any) -> None:
    with pytest.raises(warden.ApprovalRequired) as required:
        refund("pay_big", 120_000)
    request_id = required.value.request_id
    assert request_id is not None
    before = w.approval(request_id)["expires_at"]  # type: ignore[index]
    granted = w.approve(request_id, by="ops:bob", ttl=24 * 3600)
    assert granted["expires_at"] > before
    with pytest.raises(warden.InvalidInput):
        w.approve(request_id, by="ops:bob", ttl=0)


def test_answering_twice_or_an_unknown_request_is_refused(w: warden.Warden, agent: Any, refund: Any) -> None:
    with pytest.raises(warden.ApprovalRequired) as required:
        refund("pay_big", 120_000)
    request_id = required.value.request_id
    assert request_id is not None
    w.approve(request_id, by="ops:bob")
    with pytest.raises(warden.ApprovalMismatch) as twice:
        w.deny(request_id, by="ops:carol")
    assert twice.value.reason == "granted"
    with pytest.raises(warden.Refused):
        w.approve("apr_" + "f" * 32, by="ops:bob")
    assert w.approval("apr_" + "f" * 32) is None
