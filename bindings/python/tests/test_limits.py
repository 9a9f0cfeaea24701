"""Every input bound at its edge and one byte past it, through the binding (the core decides)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import warden

LIMITS = {
    "max_name_bytes": 13,
    "max_arguments_bytes": 120,
    "max_result_bytes": 64,
    "max_message_bytes": 32,
}


@pytest.fixture()
def limited(store: Path, config: Path) -> Any:
    with warden.Warden(store=store, config=config, limits=LIMITS) as w:
        yield w


def test_a_name_one_byte_over_its_bound_is_refused_naming_the_limit_and_not_echoed(limited: Any, agent: Any) -> None:
    with pytest.raises(warden.InvalidInput) as refused:
        limited.propose("stripe.refundx", {"payment_id": "p", "amount": 1})
    assert "max_name_bytes" in str(refused.value) and "stripe.refundx" not in str(refused.value)


def test_arguments_at_their_bound_pass_and_one_byte_more_is_refused(limited: Any, agent: Any) -> None:
    # {"amount":1,"payment_id":"…"} is 28 bytes plus the id.
    permit = limited.propose("stripe.refund", {"payment_id": "p" * 92, "amount": 1})
    permit.not_executed("test")
    with pytest.raises(warden.InvalidInput) as refused:
        limited.propose("stripe.refund", {"payment_id": "q" * 93, "amount": 1})
    assert "max_arguments_bytes" in str(refused.value)


def test_a_result_past_its_bound_commits_as_a_marked_excerpt_and_one_at_it_is_kept_whole(limited: Any, agent: Any) -> None:
    @limited.protect("stripe.refund")
    def refund(payment_id: str, amount: int) -> str:
        return "x" * (62 if payment_id == "whole" else 63)  # 64 and 65 bytes of JSON

    assert refund("whole", 1) == "x" * 62
    assert refund("over", 1) == "x" * 63  # the caller still gets its value
    assert limited.effect("refund:whole")["result"] == "x" * 62
    over = limited.effect("refund:over")
    assert over["state"] == "committed"
    assert over["result"]["warden_result"] == "truncated" and over["result"]["bytes"] == 65
    assert over["result"]["sha256"].startswith("sha256:")


def test_a_message_past_its_bound_is_cut_and_the_outcome_recorded(limited: Any, agent: Any) -> None:
    permit = limited.propose("stripe.refund", {"payment_id": "m", "amount": 1})
    permit.not_executed("declined: the card issuer refused the charge outright")
    effect = limited.effect("refund:m")
    assert effect["state"] == "failed"
    assert "[cut: 53 bytes in all]" in effect["error"]


def test_limits_are_checked_when_the_store_is_opened(store: Path, config: Path) -> None:
    with pytest.raises(warden.InvalidInput) as refused:
        warden.Warden(store=store, config=config, limits={"max_name_bytes": 0})
    assert "max_name_bytes" in str(refused.value)
