"""@w.protect on an `async def`: the same pipeline, with every blocking C call off the event loop."""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import warden
from warden import _ffi, _threads


@pytest.fixture()
def c_calls() -> Iterator[list[tuple[str, int]]]:
    """Every foreign call made during the test, with the thread it was made on."""
    lib = _ffi.library()
    original = dict(lib.functions)
    seen: list[tuple[str, int]] = []

    def recording(name: str, fn: Any) -> Any:
        def call(*args: Any) -> Any:
            seen.append((name, threading.get_ident()))
            return fn(*args)

        return call

    for name, fn in original.items():
        lib.functions[name] = recording(name, fn)
    try:
        yield seen
    finally:
        lib.functions.clear()
        lib.functions.update(original)


def test_an_async_call_commits_once_and_its_retry_is_a_duplicate(w: warden.Warden, agent: Any) -> None:
    calls: list[str] = []

    @w.protect("stripe.refund")
    async def refund(payment_id: str, amount: int = 1200) -> dict[str, str]:
        await asyncio.sleep(0)
        calls.append(payment_id)
        return {"refund": "re_1", "token": warden.idempotency_token()}

    async def main() -> None:
        result = await refund("pay_1")
        assert result["refund"] == "re_1"
        with pytest.raises(warden.Duplicate) as refused:
            await refund("pay_1")
        assert refused.value.state == "committed"

    asyncio.run(main())
    assert calls == ["pay_1"]
    assert w.effect("refund:pay_1")["state"] == "committed"  # type: ignore[index]


def test_the_event_loop_keeps_running_and_no_c_call_runs_on_it(
    w: warden.Warden, agent: Any, c_calls: list[tuple[str, int]]
) -> None:
    ticks_during_call: list[int] = []

    async def main() -> None:
        loop_thread = threading.get_ident()
        ticks = 0
        stop = asyncio.Event()

        async def ticker() -> None:
            nonlocal ticks
            while not stop.is_set():
                ticks += 1
                await asyncio.sleep(0.001)

        @w.protect("stripe.refund")
        async def refund(payment_id: str, amount: int) -> str:
            before = ticks
            await asyncio.sleep(0.05)
            ticks_during_call.append(ticks - before)
            return "ok"

        ticking = asyncio.create_task(ticker())
        assert await refund("pay_1", 1200) == "ok"
        with pytest.raises(warden.Duplicate):
            await refund("pay_1", 1200)
        stop.set()
        await ticking
        on_loop = [name for name, thread in c_calls if thread == loop_thread]
        assert on_loop == [], f"blocking C calls made on the event loop: {on_loop}"

    asyncio.run(main())
    assert ticks_during_call and ticks_during_call[0] > 0
    names = {name for name, _ in c_calls}
    assert {"warden_propose_recovering", "warden_permit_commit", "warden_permit_free"} <= names
    # One call per proposal: the description comes with the permit.
    assert "warden_permit_info" not in names and "warden_propose" not in names


def test_cancelling_a_running_call_records_ambiguous(w: warden.Warden, agent: Any) -> None:
    async def main() -> None:
        started = asyncio.Event()

        @w.protect("stripe.refund")
        async def refund(payment_id: str, amount: int) -> None:
            started.set()
            await asyncio.Event().wait()  # the provider never answers

        task = asyncio.create_task(refund("pay_1", 1200))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        record = w.effect("refund:pay_1")
        assert record is not None and record["state"] == "ambiguous"
        assert "CancelledError" in record["error"]
        with pytest.raises(warden.Ambiguous):
            await refund("pay_1", 1200)

    asyncio.run(main())


def test_cancelling_before_the_function_runs_records_failed(w: warden.Warden, agent: Any) -> None:
    """Cancelled while the proposal was in the worker thread: the permit arrives afterwards,
    the function never ran, and the binding reports exactly that (FAILED, retry allowed)."""
    proceed = threading.Event()
    entered = threading.Event()
    real_propose = w._propose

    def slow_propose(*request: Any) -> warden.Permit:
        entered.set()
        proceed.wait(10)
        return real_propose(*request)

    w._propose = slow_propose  # type: ignore[method-assign]
    ran: list[int] = []

    @w.protect("stripe.refund")
    async def refund(payment_id: str, amount: int) -> None:
        ran.append(amount)

    async def main() -> None:
        task = asyncio.create_task(refund("pay_1", 1200))
        await asyncio.to_thread(entered.wait, 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        proceed.set()
        for _ in range(500):
            record = await asyncio.to_thread(w.effect, "refund:pay_1")
            if record is not None and record["state"] == "failed":
                break
            await asyncio.sleep(0.01)
        assert record is not None and record["state"] == "failed", record

    asyncio.run(main())
    assert ran == []
    del w._propose  # type: ignore[attr-defined]
    with warden.context(agent="support-agent"):
        asyncio.run(refund("pay_1", 1200))
    assert ran == [1200]
    assert w.effect("refund:pay_1")["attempt"] == 2  # type: ignore[index]


def test_async_exceptions_map_like_sync_ones(w: warden.Warden, agent: Any) -> None:
    boom = ConnectionResetError("reset mid-reply")

    @w.protect("stripe.refund")
    async def refund(payment_id: str, amount: int, mode: str) -> str:
        if mode == "declined":
            raise warden.NotExecuted("declined")
        if mode == "lost":
            raise boom
        return "ok"

    async def main() -> None:
        with pytest.raises(warden.NotExecuted):
            await refund("pay_1", 100, "declined")
        assert (await asyncio.to_thread(w.effect, "refund:pay_1"))["state"] == "failed"
        assert await refund("pay_1", 100, "ok") == "ok"
        with pytest.raises(ConnectionResetError) as raised:
            await refund("pay_2", 100, "lost")
        assert raised.value is boom
        assert (await asyncio.to_thread(w.effect, "refund:pay_2"))["state"] == "ambiguous"

    asyncio.run(main())


def test_many_tasks_racing_on_one_key_have_one_winner(w: warden.Warden) -> None:
    ran: list[str] = []

    @w.protect("stripe.refund")
    async def refund(payment_id: str, amount: int) -> None:
        await asyncio.sleep(0.01)
        ran.append(payment_id)

    async def racer(n: int) -> str:
        with warden.context(agent=f"agent-{n}"):
            try:
                await refund("pay_race", 500)
                return "ran"
            except warden.Duplicate as exc:
                return exc.state or "?"

    async def main() -> list[str]:
        return list(await asyncio.gather(*(racer(n) for n in range(10))))

    outcomes = asyncio.run(main())
    assert outcomes.count("ran") == 1
    assert ran == ["pay_race"]


def test_extend_lease_async_runs_off_the_loop(w: warden.Warden, agent: Any) -> None:
    @w.protect("stripe.refund")
    async def refund(payment_id: str, amount: int) -> str | None:
        return await warden.extend_lease_async(3600)

    expiry = asyncio.run(refund("pay_1", 100))
    assert isinstance(expiry, str) and expiry > time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())


# ---- cancelled before the function ran, whatever happens to the loop afterwards -------------


def _settled(w: warden.Warden, key: str) -> dict[str, Any] | None:
    """The effect record once no permit holds it any more (bounded wait).

    `asyncio.run` does not wait for Warden's worker threads (only for the loop's default
    executor), so a proposal its caller abandoned may still be in flight when it returns:
    let the pool finish what it was given first."""
    _drain_worker_threads()
    record = None
    for _ in range(1000):
        record = w.effect(key)
        if record is None or record["state"] not in ("reserved", "executing"):
            return record
        time.sleep(0.01)
    return record


def _drain_worker_threads() -> None:
    """Wait for every call handed to Warden's pool; the next call starts a fresh pool."""
    with _threads._lock:
        pool, _threads._pool = _threads._pool, None
    if pool is not None:
        pool.shutdown(wait=True)


def _hold_proposals(w: warden.Warden) -> tuple[threading.Event, threading.Event]:
    """Make `w`'s proposals wait in their worker thread: (entered, proceed)."""
    entered, proceed = threading.Event(), threading.Event()
    real_propose = w._propose

    def held(*request: Any) -> warden.Permit:
        entered.set()
        proceed.wait(30)
        return real_propose(*request)

    w._propose = held  # type: ignore[method-assign]
    return entered, proceed


def test_cancel_then_loop_shutdown_records_not_executed_for_a_function_that_never_ran(
    w: warden.Warden, agent: Any
) -> None:
    """The caller is cancelled while the proposal is in its worker thread and `asyncio.run`
    returns at once: the loop cancels what is left and shuts down, and the permit arrives
    after that. The function never ran, so the record is FAILED (not executed), never
    AMBIGUOUS, and a retry runs."""
    entered, proceed = _hold_proposals(w)
    ran: list[int] = []

    @w.protect("stripe.refund")
    async def refund(payment_id: str, amount: int) -> None:
        ran.append(amount)

    async def main() -> None:
        task = asyncio.create_task(refund("pay_1", 1200))
        await asyncio.to_thread(entered.wait, 10)
        task.cancel()
        await asyncio.sleep(0)  # the cancellation reaches the task
        assert task.done()
        proceed.set()
        # Return now: asyncio.run cancels the proposal's own task and shuts the loop down.

    asyncio.run(main())
    record = _settled(w, "refund:pay_1")
    assert record is not None and record["state"] == "failed", record
    assert "cancelled before the protected function ran" in record["error"]
    assert ran == []
    del w._propose  # type: ignore[attr-defined]
    asyncio.run(refund("pay_1", 1200))
    assert ran == [1200]


def test_cancel_right_after_the_proposal_starts_never_records_ambiguous(w: warden.Warden, agent: Any) -> None:
    """The reported case, unhooked: cancel right after the call starts, then `asyncio.run`
    returns. Whether or not the proposal got as far as a reservation, nothing is AMBIGUOUS."""

    @w.protect("stripe.refund")
    async def refund(payment_id: str, amount: int) -> None:
        raise AssertionError("the function must not run after its caller was cancelled")

    for n in range(6):

        async def main(n: int = n) -> None:
            task = asyncio.create_task(refund(f"pay_{n}", 1200))
            await asyncio.sleep(0)
            task.cancel()

        asyncio.run(main())
    states = [(_settled(w, f"refund:pay_{n}") or {}).get("state") for n in range(6)]
    assert set(states) <= {None, "failed"}, states


def test_ctrl_c_during_asyncio_run_records_not_executed_for_a_function_that_never_ran(
    w: warden.Warden, agent: Any
) -> None:
    """SIGINT while the proposal is in flight: asyncio.run cancels the main task, raises
    KeyboardInterrupt and shuts the loop down; the permit arriving afterwards is recorded as
    not executed."""
    entered, proceed = _hold_proposals(w)
    ran: list[int] = []
    main_task: list[asyncio.Task[Any]] = []

    @w.protect("stripe.refund")
    async def refund(payment_id: str, amount: int) -> None:
        ran.append(amount)

    async def main() -> None:
        main_task.append(asyncio.current_task())  # type: ignore[arg-type]
        await refund("pay_1", 1200)

    def interrupter() -> None:
        entered.wait(10)
        # To the main thread, as Ctrl-C is: its select() returns EINTR and the handler runs at
        # once. (raise_signal here would signal this thread, and nothing would wake the loop
        # until the held proposal returned: the handler then raced the permit's delivery.)
        signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)
        for _ in range(1000):  # let the permit arrive only once the main task has ended
            if main_task and main_task[0].done():
                break
            time.sleep(0.01)
        proceed.set()

    # Python's own Ctrl-C handler, whatever this process inherited: a shell runs a background job
    # with SIGINT ignored, and asyncio.run then installs no handler of its own.
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    helper = threading.Thread(target=interrupter)
    helper.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            asyncio.run(main())
    finally:
        proceed.set()
        helper.join(30)
        signal.signal(signal.SIGINT, inherited)
    record = _settled(w, "refund:pay_1")
    assert record is not None and record["state"] == "failed", record
    assert ran == []


def test_a_thousand_concurrent_tasks_on_250_keys_run_each_key_once(w: warden.Warden) -> None:
    """1,000 tasks at once, four per key: every proposal goes through the worker threads and
    the store's group commit, and each key runs exactly once."""
    runs: dict[str, int] = {}

    @w.protect("email.send")
    async def send(message_id: str) -> str:
        runs[message_id] = runs.get(message_id, 0) + 1
        await asyncio.sleep(0)
        return "sent"

    async def one(n: int) -> str:
        with warden.context(agent=f"agent-{n % 7}"):
            try:
                await send(f"m{n % 250}")
                return "ran"
            except warden.Duplicate:
                return "duplicate"

    async def main() -> list[str]:
        return list(await asyncio.gather(*(one(n) for n in range(1000))))

    outcomes = asyncio.run(main())
    assert outcomes.count("ran") == 250 and outcomes.count("duplicate") == 750
    assert runs == {f"m{k}": 1 for k in range(250)}
    assert len(w.effects(state="committed", limit=0)) == 250
    assert w.verify_chain()["ok"] is True


def test_many_concurrent_tasks_reach_the_store_at_once_not_six_at_a_time(w: warden.Warden, agent: Any) -> None:
    """The blocking calls of coroutines run on Warden's own pool: 24 tasks have 24 proposals
    in flight together (so they can share commits), where the event loop's default executor
    (min(32, cores + 4) threads) would let 6 through on a 2-core machine."""
    lib = _ffi.library()
    real = lib.functions["warden_propose_recovering"]
    lock = threading.Lock()
    inside = 0
    most = 0
    tasks = 24
    everyone_in = threading.Event()

    def counting(*args: Any) -> Any:
        nonlocal inside, most
        with lock:
            inside += 1
            most = max(most, inside)
            if inside == tasks:
                everyone_in.set()
        everyone_in.wait(5)  # a pool smaller than `tasks` never gets everyone in: bounded
        try:
            return real(*args)
        finally:
            with lock:
                inside -= 1

    @w.protect("stripe.refund")
    async def refund(payment_id: str, amount: int = 1200) -> str:
        return payment_id

    async def main() -> list[str]:
        return await asyncio.gather(*(refund(f"pay_c{i}") for i in range(tasks)))

    lib.functions["warden_propose_recovering"] = counting
    try:
        done = asyncio.run(main())
    finally:
        lib.functions["warden_propose_recovering"] = real
    assert sorted(done) == sorted(f"pay_c{i}" for i in range(tasks))
    assert most == tasks, f"at most {most} proposals were in flight together"


def test_context_variables_travel_to_the_pool_threads(w: warden.Warden) -> None:
    """`warden.context` set in a coroutine is the principal of the call made on the pool."""

    @w.protect("stripe.refund")
    async def refund(payment_id: str, amount: int = 1200) -> str:
        return payment_id

    async def as_someone(agent: str) -> None:
        with warden.context(agent=agent, user="ada"):
            await refund(f"pay_{agent}")

    async def main() -> None:
        await asyncio.gather(as_someone("agent-a"), as_someone("agent-b"))

    asyncio.run(main())
    receipts = {r["effect_key"]: r["principal"]["agent"] for r in w.receipts()}  # type: ignore[index]
    assert receipts["refund:pay_agent-a"] == "agent-a"
    assert receipts["refund:pay_agent-b"] == "agent-b"
