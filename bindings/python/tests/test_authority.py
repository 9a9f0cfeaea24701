"""Authority from Python: delegate, the escalation refused with its dimension, a delegated call,
revocation denying the delegate (`AuthorityDenied`, a `Denied`), sweeps, the listing, task and
hop through `context()`, and a budget exhausted while earlier calls still run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import warden

DOCUMENT = """\
schema: warden/v1
environment: production
actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    rules:
      - decision: allow
authority:
  grants:
    - id: cfo
      subject: { agent: console, user: alice }
      actions: ["stripe.refund"]
      constraints: { amount_lte: 10000000 }
      expires_at: "2099-01-01T00:00:00Z"
      delegable: true
"""

HUMAN = {"agent": "console", "user": "alice"}
FINANCE = {"agent": "finance-agent", "user": "alice"}


def link(agent: str, cap: int, **extra: Any) -> dict[str, Any]:
    grant: dict[str, Any] = {
        "subject": {"agent": agent, "user": "alice"},
        "actions": ["stripe.refund"],
        "constraints": {"amount_lte": cap},
        "expires_at": "2098-01-01T00:00:00Z",
        "delegable": True,
    }
    grant.update(extra)
    return grant


@pytest.fixture()
def aw(tmp_path: Path) -> Any:
    config = tmp_path / "authority.yaml"
    config.write_text(DOCUMENT, encoding="utf-8")
    with warden.Warden(store=tmp_path / "state.redb", config=config) as handle:
        yield handle


@pytest.fixture()
def refund(aw: warden.Warden) -> Any:
    @aw.protect("stripe.refund")
    def refund(payment_id: str, amount: int) -> str:
        return f"refunded {payment_id}"

    return refund


def test_a_delegation_authorises_its_grantee_and_revocation_denies_it(aw: warden.Warden, refund: Any) -> None:
    finance = aw.delegate("cfo", link("finance-agent", 2_500_000), by=HUMAN)
    assert finance.startswith("dlg_") and len(finance) == 36
    support = aw.delegate(finance, link("support-agent", 200_000), by=warden.Principal("finance-agent", "alice"))
    with warden.context(agent="support-agent", user="alice"):
        assert refund("pay_1", 150_000) == "refunded pay_1"
    assert aw.revoke(finance, by="ciso") is True
    assert aw.revoke(finance, by={"agent": "ciso"}) is False
    with pytest.raises(warden.NotFound):
        aw.revoke("dlg_00000000000000000000000000000000")
    with warden.context(agent="support-agent", user="alice"):
        with pytest.raises(warden.AuthorityDenied) as denied:
            refund("pay_2", 100)
    exc = denied.value
    assert isinstance(exc, warden.Denied)
    assert exc.code == "WARDEN_RESULT_DENIED"
    assert (exc.reason, exc.grant_id) == ("authority_revoked", support)
    listed = {d["delegation_id"]: d for d in aw.delegations()}
    assert listed[finance]["revoked"] is True and listed[finance]["revoked_by"] == "ciso"
    assert listed[support]["revoked"] is False and listed[support]["depth"] == 2
    assert listed[support]["created_via"] == "api"


def test_an_escalation_is_refused_with_its_reason_and_dimension(aw: warden.Warden) -> None:
    finance = aw.delegate("cfo", link("finance-agent", 2_500_000), by=HUMAN)
    with pytest.raises(warden.AuthorityEscalation) as refused:
        aw.delegate(finance, link("support-agent", 5_000_000), by=FINANCE)
    exc = refused.value
    assert isinstance(exc, warden.WardenError) and not isinstance(exc, warden.Denied)
    assert exc.code == "WARDEN_RESULT_AUTHORITY_ESCALATION"
    assert (exc.reason, exc.dimension, exc.parent_id) == ("containment", "constraints", finance)
    omitted = link("support-agent", 100)
    del omitted["constraints"]
    with pytest.raises(warden.AuthorityEscalation) as dropped:
        aw.delegate(finance, omitted, by=FINANCE)
    assert dropped.value.dimension == "constraints"
    with pytest.raises(warden.AuthorityEscalation) as stranger:
        aw.delegate(finance, link("support-agent", 100), by={"agent": "intruder", "user": "alice"})
    assert (stranger.value.reason, stranger.value.dimension) == ("not_the_subject", None)
    assert [d["delegation_id"] for d in aw.delegations()] == [finance]
    with pytest.raises(warden.InvalidInput):
        aw.delegate(finance, {"subject": "nobody"}, by=FINANCE)


def test_a_hop_and_a_task_travel_in_the_context(aw: warden.Warden, refund: Any) -> None:
    finance = aw.delegate("cfo", link("finance-agent", 2_500_000), by=HUMAN)
    tasked = aw.delegate(finance, link("support-agent", 200_000, tasks=["ticket:*"]), by=FINANCE)
    with warden.context(agent="support-agent", user="alice"):
        with pytest.raises(warden.AuthorityDenied) as untasked:
            refund("pay_1", 100)
        assert untasked.value.reason == "authority_task"
    with warden.context(agent="support-agent", user="alice", task="ticket:7", hop=tasked):
        assert warden.current_task() == "ticket:7" and warden.current_hop() == tasked
        assert refund("pay_1", 100) == "refunded pay_1"
    with warden.context(agent="finance-agent", user="alice", hop=tasked):
        with pytest.raises(warden.AuthorityDenied) as hopped:
            refund("pay_2", 100)
        assert (hopped.value.reason, hopped.value.hop) == ("authority_hop", tasked)


def test_sweeps_revoke_by_creator_and_beneath_a_root_grant(aw: warden.Warden) -> None:
    finance = aw.delegate("cfo", link("finance-agent", 2_500_000), by=HUMAN)
    first = aw.delegate(finance, link("support-agent", 100), by=FINANCE)
    second = aw.delegate(finance, link("ops-agent", 100), by=FINANCE)
    swept = aw.revoke_sweep(created_by=FINANCE, by="ciso")
    assert sorted(s["delegation_id"] for s in swept) == sorted([first, second])
    assert all(s["revoked"] for s in swept)
    under = {s["delegation_id"]: s["revoked"] for s in aw.revoke_sweep(under="cfo")}
    assert under == {finance: True, first: False, second: False}
    with pytest.raises(warden.InvalidInput):
        aw.revoke_sweep(created_by=FINANCE, under="cfo")


def test_the_third_refund_in_the_hour_is_refused_while_two_still_run(aw: warden.Warden) -> None:
    finance = aw.delegate("cfo", link("finance-agent", 2_500_000), by=HUMAN)
    budgeted = link("support-agent", 200_000, budgets=[{"metric": "amount", "limit": 500_000, "window": "PT1H"}])
    del budgeted["delegable"]
    aw.delegate(finance, budgeted, by=FINANCE)
    with warden.context(agent="support-agent", user="alice"):
        first = aw.propose("stripe.refund", {"payment_id": "pay_1", "amount": 200_000})
        second = aw.propose("stripe.refund", {"payment_id": "pay_2", "amount": 200_000})
        with pytest.raises(warden.AuthorityDenied) as exhausted:
            aw.propose("stripe.refund", {"payment_id": "pay_3", "amount": 200_000})
        assert exhausted.value.reason == "budget_exhausted"
        first.not_executed("declined before sending")
        third = aw.propose("stripe.refund", {"payment_id": "pay_3", "amount": 200_000})
        for permit in (second, third):
            permit.commit({"ok": True})
