"""The defaults (list limit, first receipt, environment, caps) are the library's, read through
`warden_defaults`; the binding's sources never restate them."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import warden


def test_the_defaults_are_the_librarys() -> None:
    defaults = warden.defaults()
    assert (defaults["environment"], defaults["list_limit"], defaults["from_seq"], defaults["after_id"]) == (
        "production",
        100,
        1,
        0,
    )
    assert defaults["limits"]["max_message_bytes"] == 4096
    assert defaults["limits"]["max_result_bytes"] == 1024 * 1024


def test_list_calls_use_the_librarys_limit_when_none_is_given(w: warden.Warden, agent: Any) -> None:
    @w.protect("email.send")
    def send(message_id: str) -> None:
        pass

    for i in range(warden.defaults()["list_limit"] + 2):
        send(f"m{i}")
    assert len(w.effects()) == warden.defaults()["list_limit"]
    assert len(w.effects(limit=0)) == warden.defaults()["list_limit"] + 2
    assert len(w.receipts()) == warden.defaults()["list_limit"]
    assert w.receipts()[0]["seq"] == warden.defaults()["from_seq"]
    assert len(w.events()) == warden.defaults()["list_limit"]


def test_the_binding_restates_no_default() -> None:
    sources = sorted(Path(warden.__file__).parent.glob("*.py"))
    assert len(sources) > 5
    text = "\n".join(source.read_text(encoding="utf-8") for source in sources)
    assert '"production"' not in text
    assert not re.search(r"(limit|from_seq|after): int = \d", text)
    assert "_MAX_MESSAGE" not in text
    # action_hash without an environment is the library's default environment.
    assert warden.action_hash("a.b", {}, "agent") == warden.action_hash(
        "a.b", {}, "agent", environment=warden.defaults()["environment"]
    )
