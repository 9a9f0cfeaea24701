"""Integers beyond 64 bits cross the boundary exactly, both ways."""

from __future__ import annotations

from typing import Any

import warden

BIG = 2**70


def test_a_big_integer_round_trips_through_a_protected_call(w: warden.Warden, agent: Any) -> None:
    seen: list[Any] = []

    @w.protect("ledger.credit")
    def credit(entry: int, units: int, history: list[int]) -> dict[str, int]:
        seen.append((entry, units, history))
        return {"balance": units * 2 + 1}

    assert credit(BIG, BIG + 1, [-(2**65), 2**64]) == {"balance": (BIG + 1) * 2 + 1}
    ((entry, units, history),) = seen
    assert (entry, units, history) == (BIG, BIG + 1, [-(2**65), 2**64])
    assert all(type(v) is int for v in (entry, units, *history))
    key = f"credit:{BIG}"
    assert w.effect(key)["result"] == {"balance": (BIG + 1) * 2 + 1}  # type: ignore[index]
    receipt = w.receipts()[-1]
    assert receipt["arguments"] == {"entry": BIG, "units": BIG + 1, "history": [-(2**65), 2**64]}
    assert receipt["executor_result"] == {"balance": (BIG + 1) * 2 + 1}


def test_big_integers_in_canonical_and_action_hash() -> None:
    assert warden.canonical({"n": BIG, "m": -BIG}) == '{"m":-1180591620717411303424,"n":1180591620717411303424}'
    one = warden.action_hash("ledger.credit", {"units": BIG}, "agent")
    other = warden.action_hash("ledger.credit", {"units": BIG + 1}, "agent")
    assert one.startswith("sha256:") and one != other
