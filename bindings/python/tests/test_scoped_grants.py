"""Scoped grants through the C ABI: `approve_scoped` grants a request and lets the next
proposals of its shape run without a human until its uses run out; `revoke_scoped_grant` ends
one early; `scoped_grants` lists them. Every refusal names what was wrong and changes nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import warden

# Refunds of at most 10000 ask a human and allow a scoped grant of at most 3 uses and 30
# minutes; larger ones ask a human and allow none.
DOCUMENT = """\
schema: warden/v1
environment: production
actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    rules:
      - when: { amount_lte: 10000 }
        decision: approve
        approval: { scoped: { max_uses: 3, max_minutes: 30 } }
      - decision: approve
"""

# The customer fixed, the amount at most 5000.
SCOPE = {"uses": 2, "minutes": 30, "fixed": ["/customer_id"], "at_most": {"/amount": 5000}}


@pytest.fixture()
def sw(tmp_path: Path) -> Iterator[warden.Warden]:
    config = tmp_path / "scoped.yaml"
    config.write_text(DOCUMENT, encoding="utf-8")
    with warden.Warden(store=tmp_path / "state.redb", config=config) as handle:
        with warden.context(agent="refund-agent", user="ada"):
            yield handle


@pytest.fixture()
def refund(sw: warden.Warden) -> Any:
    ran: list[str] = []

    @sw.protect("stripe.refund")
    def refund(payment_id: str, customer_id: str, amount: int) -> str:
        ran.append(payment_id)
        return payment_id

    refund.ran = ran  # type: ignore[attr-defined]
    return refund


def asks(refund: Any, payment: str, amount: int) -> str:
    with pytest.raises(warden.ApprovalRequired) as required:
        refund(payment, "cus_1", amount)
    assert required.value.request_id is not None
    return required.value.request_id


def covered_by(sw: warden.Warden, refund: Any, payment: str, amount: int) -> str:
    """Runs the refund with no approval presented; the grant its receipt names."""
    assert refund(payment, "cus_1", amount) == payment
    receipt = sw.receipts()[-1]
    assert receipt["arguments"]["payment_id"] == payment and receipt["result"] == "committed"
    assert receipt["approval_id"] is None
    return receipt["scoped_grant_id"]


def test_a_scoped_grant_covers_the_next_refunds_until_used_up_and_a_revoked_one_covers_none(
    sw: warden.Warden, refund: Any
) -> None:
    first = asks(refund, "p0", 2000)
    done = sw.approve_scoped(first, by="ops:bob", scope=SCOPE)
    assert done["approval"]["status"] == "granted"
    grant = done["grant"]
    assert (grant["uses_left"], grant["approver"], grant["state"]) == (2, "ops:bob", "live")
    assert grant["fixed_values"] == {"/customer_id": "cus_1"}
    assert [g["grant_id"] for g in sw.scoped_grants()] == [grant["grant_id"]]

    with warden.with_approval(first):
        refund("p0", "cus_1", 2000)
    assert covered_by(sw, refund, "p1", 4000) == grant["grant_id"]
    # Past the bound: a human is asked, and no use is spent.
    asks(refund, "p2", 6000)
    assert covered_by(sw, refund, "p3", 5000) == grant["grant_id"]
    # Used up: the next refund of the same shape asks again.
    asked = asks(refund, "p4", 3000)
    assert sw.scoped_grants() == []
    [used] = sw.scoped_grants(live_only=False)
    assert (used["state"], used["uses_left"]) == ("used_up", 0)

    second = sw.approve_scoped(asked, by="ops:bob", scope=SCOPE)["grant"]
    revoked = sw.revoke_scoped_grant(second["grant_id"], by="ops:carol", reason="the customer complained")
    assert revoked["approval"] is None
    assert revoked["grant"]["state"] == "revoked" and revoked["grant"]["uses_left"] == 2
    assert revoked["grant"]["revoked"]["by"] == "ops:carol"
    with warden.with_approval(asked):
        refund("p4", "cus_1", 3000)
    # Revoked: the next refund asks again.
    asks(refund, "p5", 3000)
    assert refund.ran == ["p0", "p1", "p3", "p4"]
    assert sorted(g["state"] for g in sw.scoped_grants(live_only=False)) == ["revoked", "used_up"]


_GRANT_REFUSALS = [
    ("an unknown scope field", {"scope": {"uses": 1, "minutes": 1, "max": 3}}, warden.InvalidInput, 'scope has no field "max"'),
    ("a scope that is not a mapping", {"scope": ["uses", 1]}, warden.InvalidInput, "must be a mapping"),
    ("no minutes", {"scope": {"uses": 1}}, warden.InvalidInput, "scope.minutes must be an integer"),
    ("uses as text", {"scope": {"uses": "two", "minutes": 1}}, warden.InvalidInput, "scope.uses must be an integer"),
    ("a value JSON cannot carry", {"scope": {"uses": float("nan"), "minutes": 1}}, warden.InvalidInput, "JSON"),
    ("a bound as text", {"scope": {"uses": 1, "minutes": 1, "at_most": {"/amount": "5000"}}}, warden.InvalidInput, "maps JSON pointers to numbers"),
    ("more uses than the document allows", {"scope": {"uses": 4, "minutes": 30}}, warden.InvalidInput, "scope uses must be 1..=3"),
    ("longer than the document allows", {"scope": {"uses": 1, "minutes": 31}}, warden.InvalidInput, "scope minutes must be 1..=30"),
    ("a bound below the approved value", {"scope": {"uses": 1, "minutes": 1, "at_most": {"/amount": 1999}}}, warden.InvalidInput, "below the approved action's own value"),
    ("a pointer the action lacks", {"scope": {"uses": 1, "minutes": 1, "fixed": ["/merchant"]}}, warden.InvalidInput, "not an argument of the approved action"),
    ("the requester", {"by": "refund-agent:ada"}, warden.ApprovalMismatch, "approver_is_requester"),
    ("another action hash", {"action_hash": "sha256:" + "0" * 64}, warden.ApprovalMismatch, "mismatch"),
    ("an unknown request", {"approval_id": "apr_" + "0" * 32}, warden.NotFound, "no approval apr_0000"),
]


@pytest.mark.parametrize(("why", "change", "error", "says"), _GRANT_REFUSALS, ids=[c[0] for c in _GRANT_REFUSALS])
def test_a_refused_scoped_grant_names_why_and_changes_nothing(
    sw: warden.Warden, refund: Any, why: str, change: dict[str, Any], error: type[warden.WardenError], says: str
) -> None:
    pending = asks(refund, "p0", 2000)
    call: dict[str, Any] = {"approval_id": pending, "by": "ops:bob", "scope": SCOPE, **change}
    with pytest.raises(error) as refused:
        sw.approve_scoped(call.pop("approval_id"), **call)
    assert says in refused.value.message or says == refused.value.reason, repr(refused.value)
    assert sw.scoped_grants(live_only=False) == []
    assert sw.approval(pending)["status"] == "pending"  # type: ignore[index]


def test_a_rule_without_scoped_grants_refuses_one(sw: warden.Warden, refund: Any) -> None:
    large = asks(refund, "p9", 20_000)
    with pytest.raises(warden.InvalidInput) as refused:
        sw.approve_scoped(large, by="ops:bob", scope={"uses": 1, "minutes": 1})
    assert "does not allow scoped grants" in refused.value.message
    assert sw.approval(large)["status"] == "pending"  # type: ignore[index]


def test_refused_revocations_name_why_and_change_nothing(sw: warden.Warden, refund: Any) -> None:
    pending = asks(refund, "p0", 2000)
    grant_id = sw.approve_scoped(pending, by="ops:bob", scope=SCOPE)["grant"]["grant_id"]
    before = sw.scoped_grants(live_only=False)
    cases: list[tuple[str, Any, Any, Any, type[warden.WardenError], str]] = [
        ("an unknown grant", "sgr_" + "0" * 32, "ops:bob", "x", warden.NotFound, "no scoped grant sgr_0000"),
        ("a malformed id", "sgr_1", "ops:bob", "x", warden.InvalidInput, "sgr_ followed by 32"),
        ("an empty reason", grant_id, "ops:bob", "", warden.InvalidInput, "reason must be a non-empty name"),
        ("a blank reason", grant_id, "ops:bob", "   ", warden.InvalidInput, "reason must be a non-empty name"),
        ("an empty by", grant_id, "", "x", warden.InvalidInput, "by must be a non-empty name"),
        ("a reason that is not text", grant_id, "ops:bob", None, warden.InvalidInput, "must be a str"),
        ("a two-line reason", grant_id, "ops:bob", "a\nb", warden.InvalidInput, "one plain line"),
    ]
    for why, target, by, reason, error, says in cases:
        with pytest.raises(error) as refused:
            sw.revoke_scoped_grant(target, by=by, reason=reason)
        assert says in refused.value.message, (why, refused.value)
        assert sw.scoped_grants(live_only=False) == before, why
    sw.revoke_scoped_grant(grant_id, by="ops:bob", reason="done")
    revoked = sw.scoped_grants(live_only=False)
    with pytest.raises(warden.InvalidInput) as twice:
        sw.revoke_scoped_grant(grant_id, by="ops:bob", reason="again")
    assert "was revoked already, by ops:bob" in twice.value.message
    assert sw.scoped_grants(live_only=False) == revoked
    with pytest.raises(warden.InvalidInput):
        sw.scoped_grants(live_only=1)  # type: ignore[arg-type]
