"""One measured process of the side-by-side harness (started by compare.py, never by hand).

    py_worker.py run    --system S --dir D --workers N [--asyncio] --per-worker K --tag T [--outcomes O]
    py_worker.py create --system S --dir D [--outcomes O]
    py_worker.py check  --system S --dir D --expect N

`run` opens a fresh store in D (or joins the one `create` made), runs one warm-up action per
thread (per process with --asyncio), prints `ready`, waits for `go` on stdin, runs N workers
(threads, or asyncio tasks) of K keyed no-op protected actions each, makes deferred outcomes
durable (Warden's `flush`, inside the timed span), prints one JSON line (CLOCK_MONOTONIC start
and end, so several processes can be put on one time line, and every latency in µs), then
waits for `exit` before closing: a store's owner process stays up until every worker is done,
so a multi-process run measures processes sharing a store, not a hand-over.

`check` reopens the store after a run and counts what the run left: every action committed,
nothing else, and (Warden) the receipt chain verified.

Systems: `ctrlrun-default` is ctrlrun's README quickstart: module-level `@ctrlrun.protect`,
whose Control is `Control.from_file()` found through $CTRLRUN_CONFIG (SQLite WAL
`synchronous=NORMAL` in `.ctrlrun/state.db` beside the policy, JSONL event and receipt sinks).
`ctrlrun-fast` is the fastest in-process setup it offers for a store shared across processes:
`Control(policy, SQLiteStateStore(path))`, no sinks. `warden` is the Python binding.

PostgreSQL (`postgres.py` starts these): `ctrlrun-postgres` is
`Control(policy, PostgresStateStore($BENCH_PG_URL, schema=$BENCH_PG_SCHEMA))`, no sinks;
`warden-postgres` is the Python binding (a library built with `--features postgres`) with
`store=` the same database and `search_path` that schema.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

ACTION = "bench.noop"
AGENT = "bench-agent"


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def expect_line(word: str) -> None:
    line = sys.stdin.readline()
    if line.strip() != word:
        raise SystemExit(f"py_worker: expected {word!r} on stdin, got {line.strip()!r}")


# ---- the systems ---------------------------------------------------------------------------


class System:
    """A protected no-op action `act(key)`, the context it needs, and how to close."""

    context: Callable[[], Any]
    act: Callable[[str], Any]
    act_async: Callable[[str], Any] | None = None

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


def ctrlrun_system(system: str, directory: Path) -> System:
    import ctrlrun

    out = System()
    out.context = lambda: ctrlrun.context(agent=AGENT)
    if system == "ctrlrun-default":
        # The quickstart: no Control passed; the module's default one is
        # Control.from_file() of $CTRLRUN_CONFIG, built on first call.
        configured = os.environ.get("CTRLRUN_CONFIG", "")
        if Path(configured).resolve() != (directory / "ctrlrun.yaml").resolve():
            raise SystemExit(f"py_worker: CTRLRUN_CONFIG is {configured!r}, not this run's policy")
        if "CTRLRUN_STATE" in os.environ:
            raise SystemExit("py_worker: CTRLRUN_STATE is set; the default store must sit beside the policy")

        @ctrlrun.protect(ACTION, effect="noop:{n}")
        def noop(n: str) -> dict[str, bool]:
            return {"ok": True}

    elif system == "ctrlrun-fast":
        control = ctrlrun.Control(
            ctrlrun.Policy.from_file(directory / "ctrlrun.yaml"),
            ctrlrun.SQLiteStateStore(directory / "fast.db"),
        )

        @ctrlrun.protect(ACTION, effect="noop:{n}", control=control)
        def noop(n: str) -> dict[str, bool]:
            return {"ok": True}

        out.close = control.store.close  # type: ignore[method-assign]
    elif system == "ctrlrun-postgres":
        from ctrlrun.postgres import PostgresStateStore

        control = ctrlrun.Control(
            ctrlrun.Policy.from_file(directory / "ctrlrun.yaml"),
            PostgresStateStore(os.environ["BENCH_PG_URL"], schema=os.environ["BENCH_PG_SCHEMA"]),
        )

        @ctrlrun.protect(ACTION, effect="noop:{n}", control=control)
        def noop(n: str) -> dict[str, bool]:
            return {"ok": True}

        out.close = control.store.close  # type: ignore[method-assign]
    else:
        raise SystemExit(f"py_worker: unknown system {system!r}")
    out.act = noop
    return out


def warden_location(system: str, directory: Path) -> str | Path:
    if system == "warden-postgres":
        url, schema = os.environ["BENCH_PG_URL"], os.environ["BENCH_PG_SCHEMA"]
        return f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}"
    return directory / "warden.redb"


def warden_system(directory: Path, outcomes: str, system: str = "warden", durability: str | None = None) -> System:
    import warden

    w = warden.Warden(
        store=warden_location(system, directory),
        config=directory / "warden.yaml",
        outcomes=outcomes,
        durability=durability,
    )
    out = System()
    out.context = lambda: warden.context(agent=AGENT)

    @w.protect(ACTION)
    def noop(n: str) -> dict[str, bool]:
        return {"ok": True}

    @w.protect(ACTION)
    async def noop_async(n: str) -> dict[str, bool]:
        return {"ok": True}

    out.act = noop
    out.act_async = noop_async
    out.flush = w.flush  # type: ignore[method-assign]
    out.close = w.close  # type: ignore[method-assign]
    return out


def open_system(args: argparse.Namespace) -> System:
    directory = Path(args.dir)
    if args.system in ("warden", "warden-postgres"):
        return warden_system(directory, args.outcomes, args.system)
    if args.system == "warden-process":
        return warden_system(directory, args.outcomes, "warden", durability="process")
    return ctrlrun_system(args.system, directory)


def checked(result: Any) -> None:
    if result != {"ok": True}:
        raise SystemExit(f"py_worker: the protected function returned {result!r}")


# ---- run ----------------------------------------------------------------------------------


def run_threads(system: System, args: argparse.Namespace) -> dict[str, Any]:
    warmed = threading.Barrier(args.workers + 1)
    start = threading.Event()
    latencies: list[list[int]] = [[] for _ in range(args.workers)]
    failures: list[BaseException] = []

    def worker(index: int) -> None:
        try:
            with system.context():
                checked(system.act(f"{args.tag}-{index}-warm"))
                warmed.wait()
                start.wait()
                mine = latencies[index]
                clock = time.perf_counter_ns
                for n in range(args.per_worker):
                    began = clock()
                    checked(system.act(f"{args.tag}-{index}-{n}"))
                    mine.append((clock() - began) // 1000)
        except BaseException as exc:  # re-raised by the main thread
            failures.append(exc)
            warmed.abort()

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(args.workers)]
    for thread in threads:
        thread.start()
    try:
        warmed.wait()
    except threading.BrokenBarrierError:
        for thread in threads:
            thread.join()
        raise failures[0] if failures else SystemExit("py_worker: a thread failed while warming up")
    say("ready")
    expect_line("go")
    began = time.monotonic()
    start.set()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]
    system.flush()
    ended = time.monotonic()
    return {"start": began, "end": ended, "latencies_us": [x for mine in latencies for x in mine]}


def run_asyncio(system: System, args: argparse.Namespace) -> dict[str, Any]:
    act = system.act_async
    if act is None:
        raise SystemExit(f"py_worker: {args.system} has no async protected function")

    async def task(index: int, out: list[int]) -> None:
        with system.context():
            clock = time.perf_counter_ns
            for n in range(args.per_worker):
                began = clock()
                checked(await act(f"{args.tag}-{index}-{n}"))
                out.append((clock() - began) // 1000)

    async def measured() -> dict[str, Any]:
        with system.context():
            checked(await act(f"{args.tag}-warm"))
        say("ready")
        expect_line("go")
        latencies: list[list[int]] = [[] for _ in range(args.workers)]
        began = time.monotonic()
        await asyncio.gather(*(task(i, latencies[i]) for i in range(args.workers)))
        system.flush()
        ended = time.monotonic()
        return {"start": began, "end": ended, "latencies_us": [x for mine in latencies for x in mine]}

    return asyncio.run(measured())


def run(args: argparse.Namespace) -> None:
    system = open_system(args)
    result = run_asyncio(system, args) if args.asyncio else run_threads(system, args)
    expected = args.workers * args.per_worker
    if len(result["latencies_us"]) != expected:
        raise SystemExit(f"py_worker: {len(result['latencies_us'])} actions measured, {expected} expected")
    say(json.dumps(result))
    expect_line("exit")
    system.close()


# ---- check --------------------------------------------------------------------------------


def check(args: argparse.Namespace) -> dict[str, Any]:
    directory = Path(args.dir)
    if args.system in ("warden", "warden-process", "warden-postgres"):
        import warden

        with warden.Warden(store=warden_location(args.system, directory)) as w:
            states: dict[str, int] = {}
            for record in w.effects(limit=0):
                states[record["state"]] = states.get(record["state"], 0) + 1
            began = time.perf_counter()
            report = w.verify_chain()
            seconds = time.perf_counter() - began
        chain = {"ok": bool(report.get("ok")), "report": report, "seconds": seconds}
    elif args.system == "ctrlrun-postgres":
        import psycopg

        with psycopg.connect(os.environ["BENCH_PG_URL"]) as db:
            query = f"SELECT state, count(*) FROM {os.environ['BENCH_PG_SCHEMA']}.effects GROUP BY state"
            states = {str(state).lower(): count for state, count in db.execute(query).fetchall()}
        chain = None
    else:
        path = directory / (".ctrlrun/state.db" if args.system == "ctrlrun-default" else "fast.db")
        if not path.is_file():
            raise SystemExit(f"py_worker: {path} does not exist; the run wrote its state elsewhere")
        with sqlite3.connect(path) as db:
            states = dict(db.execute("SELECT state, count(*) FROM effects GROUP BY state").fetchall())
            # The durability statement of the report rests on this (and on the
            # `PRAGMA synchronous=NORMAL` every ctrlrun connection sets, state.py).
            journal = db.execute("PRAGMA journal_mode").fetchone()[0]
        if journal != "wal":
            raise SystemExit(f"py_worker: {path} is in journal mode {journal!r}, not WAL")
        chain = None
    committed = states.get("committed", 0)
    if committed != args.expect or sum(states.values()) != args.expect:
        raise SystemExit(f"py_worker: the store holds {states}, expected {args.expect} committed")
    if chain is not None and not (chain["ok"] and chain["report"].get("verified") == args.expect):
        raise SystemExit(
            f"py_worker: the receipt chain does not verify one receipt per committed action: {chain['report']}"
        )
    return {"states": states, "chain": chain}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["run", "create", "check"])
    parser.add_argument(
        "--system", required=True, choices=["ctrlrun-default", "ctrlrun-fast", "warden", "warden-process", "ctrlrun-postgres", "warden-postgres"]
    )
    parser.add_argument("--dir", required=True)
    parser.add_argument("--outcomes", default="durable", choices=["durable", "deferred"])
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--asyncio", action="store_true")
    parser.add_argument("--per-worker", type=int, default=100)
    parser.add_argument("--tag", default="w0")
    parser.add_argument("--expect", type=int, default=0)
    args = parser.parse_args()
    if args.command == "create":
        if args.system == "ctrlrun-default":
            # The module's default Control is built on the first call; build the same one here.
            import ctrlrun

            ctrlrun.Control.from_file(Path(args.dir) / "ctrlrun.yaml").store.close()
        else:
            open_system(args).close()
        say(json.dumps({"created": True}))
    elif args.command == "check":
        say(json.dumps(check(args)))
    else:
        run(args)


if __name__ == "__main__":
    main()
