"""warden.context / warden.with_approval are contextvars: each thread and task sees its own."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

import warden


def _agents_by_key(w: warden.Warden) -> dict[str, tuple[str, str | None]]:
    return {
        r["effect_key"]: (r["principal"]["agent"], r["principal"]["user"])
        for r in w.receipts(limit=0)
        if r.get("effect_key")
    }


def test_context_nests_and_restores() -> None:
    assert warden.current_principal() is None
    with warden.context(agent="a", user="u1"):
        assert warden.current_principal() == warden.Principal("a", "u1")
        with warden.context(agent="b"):
            assert warden.current_principal() == warden.Principal("b", None)
        assert warden.current_principal() == warden.Principal("a", "u1")
    assert warden.current_principal() is None
    with warden.with_approval("apr_" + "0" * 32):
        assert warden.current_approval() == "apr_" + "0" * 32
    assert warden.current_approval() is None


def test_threads_each_see_their_own_principal(w: warden.Warden) -> None:
    barrier = threading.Barrier(3)
    errors: list[BaseException] = []

    @w.protect("email.send")
    def send(message_id: str) -> None:
        pass

    def worker(agent: str, user: str | None) -> None:
        try:
            with warden.context(agent=agent, user=user):
                barrier.wait()  # all three contexts are set at once
                assert warden.current_principal() == warden.Principal(agent, user)
                send(f"msg-{agent}")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def stranger() -> None:
        barrier.wait()
        try:
            send("msg-stranger")
        except warden.WardenError as exc:
            errors.append(exc)

    threads = [
        threading.Thread(target=worker, args=("agent-a", "ada")),
        threading.Thread(target=worker, args=("agent-b", None)),
        threading.Thread(target=stranger),
    ]
    with warden.context(agent="main-thread"):
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    (nobody,) = errors
    # A programming error, not a denial: code that catches Denied does not swallow it.
    assert isinstance(nobody, warden.InvalidInput) and not isinstance(nobody, warden.Denied)
    assert nobody.reason == "no_principal" and "warden.context(" in nobody.message
    agents = _agents_by_key(w)
    assert agents["email:msg-agent-a"] == ("agent-a", "ada")
    assert agents["email:msg-agent-b"] == ("agent-b", None)
    assert "email:msg-stranger" not in agents


def test_asyncio_tasks_each_see_their_own_principal_and_approval(w: warden.Warden) -> None:
    @w.protect("email.send")
    async def send(message_id: str) -> None:
        await asyncio.sleep(0.01)

    async def as_agent(agent: str, both_set: asyncio.Barrier) -> None:
        with warden.context(agent=agent, user=f"user-of-{agent}"):
            with warden.with_approval(f"apr_{agent[-1] * 32}"):
                await both_set.wait()
                assert warden.current_principal() == warden.Principal(agent, f"user-of-{agent}")
                assert warden.current_approval() == f"apr_{agent[-1] * 32}"
            await send(f"msg-{agent}")

    async def main() -> None:
        both_set = asyncio.Barrier(2)
        await asyncio.gather(as_agent("agent-1", both_set), as_agent("agent-2", both_set))
        assert warden.current_principal() is None

    if not hasattr(asyncio, "Barrier"):  # Python < 3.11
        pytest.skip("asyncio.Barrier needs Python 3.11")
    asyncio.run(main())
    agents = _agents_by_key(w)
    assert agents["email:msg-agent-1"] == ("agent-1", "user-of-agent-1")
    assert agents["email:msg-agent-2"] == ("agent-2", "user-of-agent-2")


def test_a_task_inherits_the_context_it_was_created_in(w: warden.Warden, agent: Any) -> None:
    @w.protect("email.send")
    async def send(message_id: str) -> None:
        pass

    async def main() -> None:
        task = asyncio.create_task(send("msg-inherited"))
        with warden.context(agent="someone-else"):
            await task

    asyncio.run(main())
    assert _agents_by_key(w)["email:msg-inherited"] == ("support-agent", "ada")
