"""Side by side on one PostgreSQL server: ctrlrun 0.12.2's `PostgresStateStore` and Warden's
PostgreSQL backend, through their Python APIs, in one run (started by `postgres.sh`).

    postgres.py --url postgresql://…/db --lib path/to/libwarden.so [--actions N] [--rounds R]
                [--hosts NS=URL,NS=URL]

With `--hosts` (two network namespaces and the URL of the server as each reaches it; postgres.sh
--two-hosts makes them), a fourth row runs 4 processes in each namespace.

Every run is a fresh schema, fresh processes and a warm-up action per thread outside the timed
span; workers start together on `go` (py_worker.py's protocol) and the rate is the actions over
the span from the first start to the last end. After each run the store is checked: exactly the
run's actions committed (and Warden's receipt chain verified). Rows alternate between the two
systems and every other round runs in reverse. Markdown on stdout, progress on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from compare import CTRLRUN_POLICY, WARDEN_DOCUMENT  # noqa: E402

SYSTEMS = ["ctrlrun-postgres", "warden-postgres"]
#: (label, processes, threads per process)
WORKLOADS = [("1 thread", 1, 1), ("8 threads, one process", 1, 8), ("8 processes", 8, 1)]
TIMEOUT_S = 900


def progress(text: str) -> None:
    sys.stderr.write(f"\r\x1b[2K{text}")
    sys.stderr.flush()


def worker_env(args: argparse.Namespace, schema: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"BENCH_PG_URL": args.url, "BENCH_PG_SCHEMA": schema, "WARDEN_LIB": str(args.lib)})
    return env


def fresh_schema(url: str, name: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as db:
        db.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")
        db.execute(f"CREATE SCHEMA {name}")


def one_run(
    args: argparse.Namespace, system: str, processes: int, threads: int, tag: str, hosts: list[tuple[str, str]] | None = None
) -> dict[str, Any]:
    schema = f"bench_{os.getpid()}_{tag}"
    fresh_schema(args.url, schema)
    env = worker_env(args, schema)
    with tempfile.TemporaryDirectory() as directory:
        (Path(directory) / "warden.yaml").write_text(WARDEN_DOCUMENT)
        (Path(directory) / "ctrlrun.yaml").write_text(CTRLRUN_POLICY)
        common = ["--system", system, "--dir", directory]
        subprocess.run(
            [sys.executable, str(HERE / "py_worker.py"), "create", *common],
            env=env, check=True, capture_output=True, timeout=TIMEOUT_S,
        )
        per_worker = max(1, args.actions // (processes * threads))
        workers = []
        for index in range(processes):
            prefix: list[str] = []
            process_env = env
            if hosts:
                # Alternate processes between the hosts; each reaches the server on its own link.
                namespace, url = hosts[index % len(hosts)]
                prefix = ["ip", "netns", "exec", namespace]
                process_env = dict(env, BENCH_PG_URL=url)
            workers.append(
                subprocess.Popen(
                    [*prefix, sys.executable, str(HERE / "py_worker.py"), "run", *common, "--workers", str(threads),
                     "--per-worker", str(per_worker), "--tag", f"p{index}"],
                    env=process_env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                )
            )
        for worker in workers:
            line = worker.stdout.readline().strip()  # type: ignore[union-attr]
            if line != "ready":
                raise SystemExit(f"postgres.py: a {system} worker said {line!r}, not ready")
        for worker in workers:
            worker.stdin.write("go\n")  # type: ignore[union-attr]
            worker.stdin.flush()  # type: ignore[union-attr]
        results = []
        for worker in workers:
            results.append(json.loads(worker.stdout.readline()))  # type: ignore[union-attr]
        for worker in workers:
            worker.stdin.write("exit\n")  # type: ignore[union-attr]
            worker.stdin.flush()  # type: ignore[union-attr]
            if worker.wait(timeout=TIMEOUT_S) != 0:
                raise SystemExit(f"postgres.py: a {system} worker failed")
        expect = processes * threads * (per_worker + 1)  # the warm-ups commit too
        checked = subprocess.run(
            [sys.executable, str(HERE / "py_worker.py"), "check", *common, "--expect", str(expect)],
            env=env, capture_output=True, text=True, timeout=TIMEOUT_S,
        )
        if checked.returncode != 0:
            raise SystemExit(f"postgres.py: the {system} store failed its check: {checked.stdout}{checked.stderr}")
    start = min(r["start"] for r in results)
    end = max(r["end"] for r in results)
    latencies = sorted(x for r in results for x in r["latencies_us"])
    actions = len(latencies)
    return {
        "rate": actions / (end - start),
        "p50_ms": latencies[len(latencies) // 2] / 1000,
        "p99_ms": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] / 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True, help="a database this user may create schemas in")
    parser.add_argument("--lib", required=True, type=Path, help="libwarden built with --features postgres")
    parser.add_argument("--actions", type=int, default=800)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--hosts", help="NS=URL,NS=URL: add the 4 + 4 processes on two hosts row")
    args = parser.parse_args()
    hosts = [tuple(item.split("=", 1)) for item in args.hosts.split(",")] if args.hosts else None
    workloads = WORKLOADS + ([("4 + 4 processes, two hosts", 8, 1)] if hosts else [])
    rows: dict[tuple[str, str], list[dict[str, Any]]] = {}
    order = [(w, s) for w in workloads for s in SYSTEMS]
    runs = 0
    for round_ in range(args.rounds):
        for (label, processes, threads), system in order if round_ % 2 == 0 else reversed(order):
            runs += 1
            progress(f"round {round_ + 1}/{args.rounds}: {system}, {label}")
            result = one_run(args, system, processes, threads, f"r{runs}", hosts if label.endswith("two hosts") else None)
            rows.setdefault((label, system), []).append(result)
    progress("")
    print(f"{args.actions} actions per run, {args.rounds} rounds, medians (min–max)\n")
    print("| workload | system | actions/s | min–max | p50 / p99 ms | × ctrlrun |")
    print("|---|---|---|---|---|---|")
    for label, _, _ in workloads:
        base = statistics.median(r["rate"] for r in rows[(label, "ctrlrun-postgres")])
        for system in SYSTEMS:
            found = rows[(label, system)]
            rates = [r["rate"] for r in found]
            median = statistics.median(rates)
            print(
                f"| {label} | {system} | {median:,.0f} | {min(rates):,.0f}–{max(rates):,.0f} | "
                f"{statistics.median(r['p50_ms'] for r in found):.2f} / "
                f"{statistics.median(r['p99_ms'] for r in found):.2f} | {median / base:.2f}× |"
            )


if __name__ == "__main__":
    main()
