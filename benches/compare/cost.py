"""Where the time goes: Warden Python's actions/s beside the CPU time each action costs.

    python benches/compare/cost.py --dir DIR [--workers N] [--asyncio] [--actions N] [--runs N] [--abi]

Runs keyed no-op `@w.protect` actions (`durable` unless --outcomes deferred) from N threads, or
N asyncio tasks with --asyncio, on a fresh store in DIR, and prints per run: actions/s, the
process's CPU time per action (user + system, every thread) and how many CPUs it kept busy.
Unlike the side-by-side harness it accepts a tmpfs: run it on the disk and on /dev/shm to see
what the disk costs (a sync on tmpfs costs nothing), and under `strace -f -c` or `perf stat` to
count system calls or context switches per action. The binding is the installed `warden`
(the harness's venv: `target/compare-venv/bin/python`).

`--abi` (one thread) also runs the same actions, alternating with the `@protect` runs, through
the very library the binding loads, with nothing of the binding around the two C calls each
action makes (`warden_propose_recovering` with the binding's own request, `warden_permit_commit`):
- a ctypes loop, the floor of any ctypes binding: the request formatted as bytes, the two calls,
  the permit's JSON parsed (as the binding parses it), both freed;
- a C loop, `abi_loop.c` beside this file compiled with `cc` (the library's folder on its rpath).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import subprocess
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

import warden
import warden._ffi
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


def build_abi_loop(into: Path) -> Path:
    """`abi_loop.c` compiled against the library the binding loads (its folder on the rpath)."""
    here = Path(__file__).resolve().parent
    library = warden._ffi.library_path().resolve()
    include = here.parent.parent / "include"
    program = into / "abi_loop"
    command = ["cc", "-O2", f"-I{include}", str(here / "abi_loop.c"), "-o", str(program)]
    if library.name == "libwarden.so":
        command += [f"-L{library.parent}", "-lwarden", f"-Wl,-rpath,{library.parent}"]
    else:  # a library under another name (WARDEN_LIB): link that file itself
        command += [str(library), f"-Wl,-rpath,{library.parent}"]
    subprocess.run(command, check=True)
    return program


def abi_run(program: Path, args: argparse.Namespace) -> dict[str, float]:
    directory = Path(tempfile.mkdtemp(prefix="warden-cost-abi-", dir=args.dir))
    try:
        (directory / "warden.yaml").write_text(WARDEN_DOCUMENT)
        out = subprocess.run(
            [str(program), str(directory / "warden.redb"), str(directory / "warden.yaml"), str(args.actions), args.outcomes],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.split()
        rate, cpu_us = float(out[0]), float(out[1])
        return {"actions_per_s": rate, "cpu_us_per_action": cpu_us, "cpus_busy": rate * cpu_us / 1e6}
    finally:
        shutil.rmtree(directory)


def ctypes_run(args: argparse.Namespace, tag: int) -> dict[str, float]:
    """The `--abi` ctypes loop (one thread, a fresh store)."""
    import ctypes
    import json

    lib = warden._ffi.library()
    fn = lib.functions
    directory = Path(tempfile.mkdtemp(prefix="warden-cost-ctypes-", dir=args.dir))
    handle, err = ctypes.c_void_p(), warden._ffi.WardenBuf()
    store, config = str(directory / "warden.redb").encode(), str(directory / "warden.yaml").encode()
    options = json.dumps({"outcomes": args.outcomes}).encode()
    try:
        (directory / "warden.yaml").write_text(WARDEN_DOCUMENT)
        opened = fn["warden_open"](
            store, len(store), config, len(config), options, len(options), ctypes.byref(handle), ctypes.byref(err)
        )
        if opened != 0:
            raise SystemExit(f"cost.py: warden_open failed: {lib.take(err)!r}")
        none = warden._ffi.ProposeOptions(
            wait_ms=0, poll_ms=0, precondition=warden._ffi.PRECONDITION_FN(), reconcile=warden._ffi.RECONCILE_FN(), user_data=None
        )
        propose, commit = fn["warden_propose_recovering"], fn["warden_permit_commit"]
        free_permit, free_buf = fn["warden_permit_free"], fn["warden_buf_free"]
        template = (
            b'{"name":"bench.noop","arguments":{"n":"ctypes-%d-%d"},"principal":{"agent":"bench-agent"},'
            b'"approval_id":null,"lease_ms":null,"resource":null,"principal_expires_at_ms":null,'
            b'"task":null,"hop":null,"traceparent":null}'
        )
        wall = cpu = 0.0
        for n in range(-1, args.actions):  # n = -1: one warm-up action, not timed
            if n == 0:
                wall, cpu = time.perf_counter(), time.process_time()
            request = template % (tag, n)
            permit, info = ctypes.c_void_p(), warden._ffi.WardenBuf()
            if propose(handle, request, len(request), ctypes.byref(none), ctypes.byref(permit), ctypes.byref(info), ctypes.byref(err)):
                raise SystemExit(f"cost.py: warden_propose_recovering failed: {lib.take(err)!r}")
            json.loads(ctypes.string_at(info.ptr, info.len))
            free_buf(info)
            if commit(permit, b'{"ok":true}', 11, ctypes.byref(err)):
                raise SystemExit(f"cost.py: warden_permit_commit failed: {lib.take(err)!r}")
            free_permit(permit)
        if fn["warden_flush"](handle, ctypes.byref(err)):
            raise SystemExit(f"cost.py: warden_flush failed: {lib.take(err)!r}")
        return summary(args.actions, time.perf_counter() - wall, time.process_time() - cpu)
    finally:
        if handle:
            fn["warden_close"](handle)
        shutil.rmtree(directory)


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
    parser.add_argument("--abi", action="store_true", help="also the same actions through the C ABI alone (one thread)")
    args = parser.parse_args()
    if args.workers < 1 or args.actions < 1 or args.runs < 1:
        parser.error("--workers, --actions and --runs must be at least 1")
    if args.abi and (args.workers != 1 or args.asyncio):
        parser.error("--abi compares one thread: leave out --workers and --asyncio")
    kind = ("asyncio task" if args.asyncio else "thread") + ("s" if args.workers > 1 else "")
    # Each row: its name and how one run of it is made (the run's number tags its keys).
    runners: dict[str, Callable[[int], dict[str, float]]] = {
        f"{args.workers} {kind} (Python @protect)": lambda run: one_run(args, run)
    }
    build = Path(tempfile.mkdtemp(prefix="warden-cost-build-"))
    results: dict[str, list[dict[str, float]]] = {}
    try:
        if args.abi:
            program = build_abi_loop(build)
            runners["1 thread (ctypes loop)"] = lambda run: ctypes_run(args, run)
            runners["1 thread (C loop)"] = lambda run: abi_run(program, args)
        for run in range(args.runs):
            for name, runner in runners.items():
                result = runner(run)
                results.setdefault(name, []).append(result)
                print(
                    f"{name}, {args.outcomes}, {args.dir}: {result['actions_per_s']:,.0f} actions/s, "
                    f"{result['cpu_us_per_action']:.0f} µs CPU per action, {result['cpus_busy']:.2f} CPUs busy",
                    flush=True,
                )
    finally:
        shutil.rmtree(build)
    if args.runs > 1:
        for name, runs in results.items():
            median: dict[str, Any] = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
            print(
                f"median of {args.runs}, {name}: {median['actions_per_s']:,.0f} actions/s, "
                f"{median['cpu_us_per_action']:.0f} µs CPU per action, {median['cpus_busy']:.2f} CPUs busy"
            )

if __name__ == "__main__":
    main()
