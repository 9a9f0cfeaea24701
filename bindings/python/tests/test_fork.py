"""Fork safety: a `Warden` belongs to the process that opened it.

Servers fork (`multiprocessing`'s default start method on Linux, gunicorn and celery pre-fork
workers). A child that opens its own `Warden` becomes a client of the process that owns the
store; a `Warden` or `Permit` inherited from the parent raises `InvalidInput` there and writes
nothing. Every execution is counted in an O_APPEND log (one `write(2)` per execution, so lines
from several processes never interleave), and every child is waited for with a bound: a child
that does not exit in time is killed and the test fails, so a hang shows as a failure.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import warden
from warden import _ffi

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")

#: How long a child may take before it counts as hung (it is then killed and the test fails).
CHILD_BOUND = 120.0


def _log_execution(log: Path, key: str) -> None:
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, f"{key} {os.getpid()}\n".encode())
    finally:
        os.close(fd)


def _executions(log: Path) -> Counter[str]:
    if not log.exists():
        return Counter()
    return Counter(line.split()[0] for line in log.read_text().splitlines())


def _race(handle: warden.Warden, log: Path, keys: int, agent: str) -> int:
    """Propose every key in turn; run (log) the ones this process wins. Returns the wins."""

    @handle.protect("stripe.refund")
    def refund(payment_id: str, amount: int) -> dict[str, str]:
        _log_execution(log, payment_id)
        return {"refund": "re", "by": str(os.getpid())}

    wins = 0
    with warden.context(agent=agent):
        for k in range(keys):
            try:
                refund(f"pay_{k}", 100 + k)
                wins += 1
            except warden.Duplicate:
                pass
    return wins


def _refused_after_fork(call: Callable[[], Any]) -> None:
    try:
        call()
    except warden.InvalidInput as refusal:
        assert "before a fork" in str(refusal), refusal
        return
    raise AssertionError(f"{call} was not refused in a forked child")


def _fork(child: Callable[[], None]) -> int:
    """Run `child` in a forked process that exits 0 when it returns, 1 when it raises."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            child()
            code = 0
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    return pid


def _wait_exited(pid: int, bound: float = CHILD_BOUND) -> int:
    """The child's exit code; a child still running after `bound` seconds is killed and fails."""
    deadline = time.monotonic() + bound
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise AssertionError(f"child {pid} did not exit within {bound} s (hung); killed")
        time.sleep(0.02)


def _assert_each_key_ran_once(log: Path, keys: int) -> None:
    runs = _executions(log)
    assert set(runs) == {f"pay_{k}" for k in range(keys)}, sorted(runs)
    twice = {key: n for key, n in runs.items() if n != 1}
    assert not twice, f"keys that ran more than once: {twice}"


# ---- multiprocessing (fork start method) ------------------------------------------------------


def _pool_worker(parent: warden.Warden, store: str, config: str, log: str, keys: int, n: int, go: Any) -> None:
    # The parent's handle came along with the fork: refused, before any lock.
    _refused_after_fork(lambda: parent.effect("pay_0"))
    with warden.Warden(store=store, config=config) as mine:
        if not go.wait(CHILD_BOUND):
            raise AssertionError("the start signal never came")
        _race(mine, Path(log), keys, f"worker-{n}")


def test_four_forked_workers_with_a_parent_handle_open_run_each_of_100_keys_exactly_once(
    w: warden.Warden, store: Path, config: Path, tmp_path: Path
) -> None:
    log = tmp_path / "executions.log"
    keys = 100
    context = multiprocessing.get_context("fork")
    go = context.Event()
    workers = [
        context.Process(target=_pool_worker, args=(w, str(store), str(config), str(log), keys, n, go))
        for n in range(4)
    ]
    for worker in workers:
        worker.start()
    go.set()
    for worker in workers:
        worker.join(CHILD_BOUND)
        if worker.exitcode is None:
            worker.kill()
            worker.join()
            pytest.fail(f"worker {worker.pid} did not finish within {CHILD_BOUND} s")
    assert [worker.exitcode for worker in workers] == [0, 0, 0, 0]

    _assert_each_key_ran_once(log, keys)
    committed = w.effects(state="committed", limit=1000)
    assert len(committed) == keys
    report = w.verify_chain()
    assert report["ok"] is True and report["breaks"] == [], report
    assert report["verified"] == report["chained"] >= keys, report  # refusals leave receipts too
    # Every execution came from a worker; the parent still owns the store and keeps working.
    assert os.getpid() not in {int(line.split()[1]) for line in log.read_text().splitlines()}
    with warden.context(agent="parent"):
        permit = w.propose("stripe.refund", {"payment_id": "pay_after", "amount": 1})
        permit.commit({"ok": True})
        permit.release()
    assert w.verify_chain()["ok"] is True


# ---- raw os.fork() ------------------------------------------------------------------------------


def test_raw_forked_children_with_their_own_handles_race_the_parent_and_each_key_runs_once(
    w: warden.Warden, store: Path, config: Path, tmp_path: Path
) -> None:
    log = tmp_path / "executions.log"
    keys = 100
    read_end, write_end = os.pipe()

    def child(n: int) -> Callable[[], None]:
        def run() -> None:
            os.close(write_end)
            with warden.Warden(store=store, config=config) as mine:
                assert os.read(read_end, 1) == b"g"
                _race(mine, log, keys, f"child-{n}")

        return run

    pids = [_fork(child(n)) for n in range(4)]
    os.close(read_end)
    os.write(write_end, b"g" * len(pids))
    os.close(write_end)
    parent_wins = _race(w, log, keys, "parent")
    codes = [_wait_exited(pid) for pid in pids]
    assert codes == [0, 0, 0, 0]

    _assert_each_key_ran_once(log, keys)
    assert parent_wins < keys  # the children won some of them
    assert len(w.effects(state="committed", limit=1000)) == keys
    report = w.verify_chain()
    assert report["ok"] is True and report["breaks"] == [], report
    assert report["verified"] == report["chained"] >= keys, report  # refusals leave receipts too


def test_an_inherited_warden_and_permit_raise_invalid_input_in_the_child_and_write_nothing(
    w: warden.Warden, agent: Any
) -> None:
    permit = w.propose("stripe.refund", {"payment_id": "pay_before", "amount": 100})
    events_before = len(w.events(limit=0))
    receipts_before = len(w.receipts(limit=0))

    def child() -> None:
        _refused_after_fork(lambda: w.effect("refund:pay_before"))
        _refused_after_fork(lambda: w.propose("stripe.refund", {"payment_id": "pay_child", "amount": 1}))
        _refused_after_fork(w.verify_chain)
        _refused_after_fork(w.pending)
        _refused_after_fork(w.flush)
        _refused_after_fork(w.sources)
        _refused_after_fork(lambda: w.resolve("refund:pay_before", "committed", by="child"))
        _refused_after_fork(lambda: permit.commit({"by": "child"}))
        _refused_after_fork(lambda: permit.not_executed("child"))
        _refused_after_fork(lambda: permit.ambiguous("child"))
        _refused_after_fork(lambda: permit.extend_lease(60))
        _refused_after_fork(permit.refresh)

        @w.protect("stripe.refund")
        def refund(payment_id: str, amount: int) -> None:
            raise AssertionError("a protected function ran on an inherited handle")

        _refused_after_fork(lambda: refund("pay_child", 1))
        # Below the binding: the library itself refuses the inherited pointers.
        lib = _ffi.library()
        for call in (
            lambda: lib.call_out("warden_chain_verify", w._pointer),
            lambda: lib.call_out("warden_permit_info", permit._pointer),
            lambda: lib.call("warden_permit_commit", permit._pointer, *_ffi.arg(b"{}")),
        ):
            _refused_after_fork(call)
        # Releasing and closing do nothing in the child (they belong to the parent).
        permit.release()
        w.close()
        permit.__del__()
        w.__del__()

    assert _wait_exited(_fork(child)) == 0
    assert len(w.events(limit=0)) == events_before
    assert len(w.receipts(limit=0)) == receipts_before
    assert w.effect("refund:pay_before")["state"] == "executing"  # type: ignore[index]
    assert not w.closed
    permit.commit({"by": "parent"})
    permit.release()
    record = w.effect("refund:pay_before")
    assert record is not None and record["state"] == "committed" and record["result"] == {"by": "parent"}
    assert w.verify_chain()["ok"] is True


def test_a_child_of_a_child_refuses_both_inherited_handles_and_opens_its_own(
    w: warden.Warden, store: Path, config: Path, agent: Any
) -> None:
    def grandchild(from_child: warden.Warden) -> None:
        _refused_after_fork(from_child.verify_chain)
        _refused_after_fork(w.verify_chain)
        with warden.Warden(store=store, config=config) as own:
            own.propose("stripe.refund", {"payment_id": "pay_grandchild", "amount": 3}).commit("ok")

    def child() -> None:
        with warden.Warden(store=store, config=config) as own:
            own.propose("stripe.refund", {"payment_id": "pay_child", "amount": 2}).commit("ok")
            assert _wait_exited(_fork(lambda: grandchild(own))) == 0
            assert own.effect("refund:pay_grandchild")["state"] == "committed"  # type: ignore[index]

    assert _wait_exited(_fork(child)) == 0
    assert [e["effect_key"] for e in w.effects(state="committed")] == ["refund:pay_child", "refund:pay_grandchild"]
    assert w.verify_chain()["ok"] is True


# ---- fork while a parent thread is writing ------------------------------------------------------


def test_forking_while_a_parent_thread_is_mid_write_never_hangs_a_child(
    w: warden.Warden, store: Path, config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A background thread writes without pause (its C calls hold the library's locks while
    they run); the main thread forks children meanwhile. Each child refuses the inherited
    handle, opens its own and commits one key, and exits within the bound."""
    monkeypatch.setenv("WARDEN_WRITE_WAIT_MS", "20000")
    log = tmp_path / "executions.log"
    lib = w._lib
    in_flight = [0]
    counted = threading.Lock()
    originals = {name: lib.functions[name] for name in ("warden_propose_recovering", "warden_permit_commit")}

    def counting(fn: Any) -> Any:
        def call(*args: Any) -> Any:
            with counted:
                in_flight[0] += 1
            try:
                return fn(*args)
            finally:
                with counted:
                    in_flight[0] -= 1

        return call

    for name, fn in originals.items():
        lib.functions[name] = counting(fn)
    stop = threading.Event()
    background_runs = [0]

    @w.protect("email.send")
    def send(message_id: str) -> str:
        background_runs[0] += 1
        return "sent"

    def writer() -> None:
        with warden.context(agent="background"):
            n = 0
            while not stop.is_set():
                send(f"bg_{n}")
                n += 1

    thread = threading.Thread(target=writer, name="parent-writer")
    thread.start()
    children: list[int] = []
    mid_call = 0
    try:
        while background_runs[0] == 0:
            time.sleep(0.001)

        def child(n: int) -> Callable[[], None]:
            def run() -> None:
                _refused_after_fork(lambda: w.effect("email:bg_0"))
                with warden.Warden(store=store, config=config) as own:

                    @own.protect("stripe.refund")
                    def refund(payment_id: str, amount: int) -> str:
                        _log_execution(log, payment_id)
                        return "ok"

                    with warden.context(agent=f"child-{n}"):
                        refund(f"pay_{n}", 100)

            return run

        for n in range(40):
            busy = in_flight[0] > 0
            children.append(_fork(child(n)))
            mid_call += busy
            if len(children) >= 8 and mid_call >= 3:
                break
            time.sleep(0.003 * (n % 4))
    finally:
        stop.set()
        thread.join(CHILD_BOUND)
        lib.functions.update(originals)
    codes = [_wait_exited(pid) for pid in children]
    assert not thread.is_alive()
    assert codes == [0] * len(children)
    assert mid_call >= 1, "no fork happened while the parent thread was inside a C call"
    _assert_each_key_ran_once(log, len(children))
    assert w.verify_chain()["ok"] is True


def test_a_forked_child_gets_a_pool_of_its_own_for_async_calls(store: Path, config: Path) -> None:
    """The parent's pool threads do not exist in a child: a coroutine's blocking call made
    there must not queue forever behind them."""
    from warden import _threads

    parent_pool = asyncio.run(_pool_in_use())

    def child() -> None:
        child_pool = asyncio.run(_pool_in_use())
        assert child_pool is not parent_pool
        handle = warden.Warden(store=str(store), config=str(config))

        @handle.protect("stripe.refund")
        async def refund(payment_id: str, amount: int) -> str:
            return payment_id

        async def main() -> str:
            with warden.context(agent="child-agent", user="ada"):
                return await refund("pay_child_pool", 100)

        assert asyncio.run(main()) == "pay_child_pool"
        handle.close()

    assert _wait_exited(_fork(child)) == 0
    assert _threads._executor() is parent_pool


async def _pool_in_use() -> Any:
    from warden import _threads

    await _threads.in_thread(lambda: None)
    return _threads._executor()
