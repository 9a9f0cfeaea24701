"""Where the time goes: Warden Python's actions/s beside the CPU time each action costs.

    python benches/compare/cost.py --dir DIR [--workers N] [--asyncio] [--actions N] [--runs N]

Runs keyed no-op `@w.protect` actions (`durable` unless --outcomes deferred) from N threads, or
N asyncio tasks with --asyncio, on a fresh store in DIR, and prints per run: actions/s, the
process's CPU time per action (user + system, every thread) and how many CPUs it kept busy.
Unlike the side-by-side harness it accepts a tmpfs: run it on the disk and on /dev/shm to see
what the disk costs (a sync on tmpfs costs nothing), and under `strace -f -c` or `perf stat` to
count system calls or context switches per action. The binding is the installed `warden`
(the harness's venv: `target/compare-venv/bin/python`).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import warden
from compare import WARDEN_DOCUMENT  # the harness's document: the same action, the same rule


def one_run(args: argparse.Namespace, tag: int) -> dict[str, float]:
    directory = Path(tempfile.mkdtemp(prefix="warden-cost-", dir=args.dir))
    try:
        (directory / "warden.yaml").write_text(WARDEN_DOCUMENT)
        w = warden.Warden(store=directory / "warden.redb", config=directory / "warden.yaml", outcomes=args.outcomes)
        try:
            return (measure_tasks if args.asyncio else measure_threads)(w, args, f"r{tag}")
        finally:
            w.close()
    finally:
        shutil.rmtree(directory)


def measure_threads(w: warden.Warden, args: argparse.Namespace, tag: str) -> dict[str, float]:
    @w.protect("bench.noop")
    def noop(n: str) -> dict[str, bool]:
        return {"ok": True}

    per_worker = max(1, args.actions // args.workers)
    ready = threading.Barrier(args.workers + 1)

    def worker(index: int) -> None:
        with warden.context(agent="bench-agent"):
            noop(f"{tag}-{index}-warm")
            ready.wait()
            for n in range(per_worker):
                noop(f"{tag}-{index}-{n}")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(args.workers)]
    for thread in threads:
        thread.start()
    ready.wait()
    wall, cpu = time.perf_counter(), time.process_time()
    for thread in threads:
        thread.join()
    w.flush()
    return summary(per_worker * args.workers, time.perf_counter() - wall, time.process_time() - cpu)


def measure_tasks(w: warden.Warden, args: argparse.Namespace, tag: str) -> dict[str, float]:
    @w.protect("bench.noop")
    async def noop(n: str) -> dict[str, bool]:
        return {"ok": True}

    per_task = max(1, args.actions // args.workers)

    async def task(index: int) -> None:
        for n in range(per_task):
            await noop(f"{tag}-{index}-{n}")

    async def main() -> dict[str, float]:
        with warden.context(agent="bench-agent"):
            await noop(f"{tag}-warm")
            wall, cpu = time.perf_counter(), time.process_time()
            await asyncio.gather(*(task(i) for i in range(args.workers)))
            await asyncio.to_thread(w.flush)
            return summary(per_task * args.workers, time.perf_counter() - wall, time.process_time() - cpu)

    return asyncio.run(main())


def summary(actions: int, wall: float, cpu: float) -> dict[str, float]:
    return {"actions_per_s": actions / wall, "cpu_us_per_action": cpu / actions * 1e6, "cpus_busy": cpu / wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", required=True, help="where the scratch stores go (the disk measured)")
    parser.add_argument("--workers", type=int, default=1, help="threads, or asyncio tasks with --asyncio")
    parser.add_argument("--asyncio", action="store_true", help="asyncio tasks instead of threads")
    parser.add_argument("--actions", type=int, default=2000, help="actions per run, split across workers")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--outcomes", choices=("durable", "deferred"), default="durable")
    args = parser.parse_args()
    if args.workers < 1 or args.actions < 1 or args.runs < 1:
        parser.error("--workers, --actions and --runs must be at least 1")
    kind = ("asyncio task" if args.asyncio else "thread") + ("s" if args.workers > 1 else "")
    runs = []
    for run in range(args.runs):
        result = one_run(args, run)
        runs.append(result)
        print(
            f"{args.workers} {kind}, {args.outcomes}, {args.dir}: {result['actions_per_s']:,.0f} actions/s, "
            f"{result['cpu_us_per_action']:.0f} µs CPU per action, {result['cpus_busy']:.2f} CPUs busy",
            flush=True,
        )
    if args.runs > 1:
        median: dict[str, Any] = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
        print(
            f"median of {args.runs}: {median['actions_per_s']:,.0f} actions/s, "
            f"{median['cpu_us_per_action']:.0f} µs CPU per action, {median['cpus_busy']:.2f} CPUs busy"
        )


if __name__ == "__main__":
    main()
