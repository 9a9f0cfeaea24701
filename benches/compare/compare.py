"""Side-by-side throughput: ctrlrun 0.12.2 against Warden (Python, Node, Rust) in one run.

Started by run.sh, which builds and installs everything first; see README.md. Every
measurement is one or more fresh processes on a fresh store in --dir; the systems alternate
within every round (the round's order is reversed every other round so drift in the machine
hits both sides), and each row reports the median of its rounds. Markdown on stdout (or JSON
with --json), one progress line on stderr, and both documents also written to --out.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PY_WORKER = HERE / "py_worker.py"
NODE_WORKER = HERE / "node_worker.js"

WARDEN_DOCUMENT = """schema: warden/v1
environment: production
actions:
  bench.noop:
    effect: "noop:{n}"
    rules:
      - decision: allow
"""

# ctrlrun's README quickstart policy, reduced to one always-allowed keyed action.
CTRLRUN_POLICY = """schema: ctrlrun.policy/v2
actions:
  bench.noop:
    effect: "noop:{n}"
    rules:
      - decision: allow
"""

#: How long one measurement (every process of it) may take before it is killed and the run fails.
MEASUREMENT_TIMEOUT_S = 900

DURABILITY = [
    (
        "ctrlrun 0.12.2, default `@protect`",
        "SQLite in WAL mode with `synchronous=NORMAL`: a commit is written to the WAL but not "
        "fsynced (the WAL is synced only at checkpoints), so it survives a process crash but the "
        "last transactions can be lost to a power loss or an OS crash; the JSONL event and receipt "
        "files are appended without fsync. Not durable against power loss.",
    ),
    (
        "ctrlrun 0.12.2, fastest (SQLite store, no sinks)",
        "The same SQLite settings, so the same durability; no JSONL evidence files (receipts and "
        "events stay in the SQLite file).",
    ),
    (
        "Warden, `outcomes=\"durable\"`",
        "A permit is returned only after the batch that reserved it is in the store's journal "
        "and fsynced (one record and one `fdatasync` per batch; redb is made durable at "
        "checkpoints); `commit`/`not_executed`/`ambiguous` return only after the outcome and its "
        "receipt are journaled the same way (group commit: one fsync serves every waiting "
        "caller). A crash of the process, the OS or the power loses nothing that returned.",
    ),
    (
        "Warden, `durability=\"process\"`",
        "The same journal, written but not fsynced: a crash of the process loses nothing "
        "(the kernel's page cache holds the record), a power loss or an OS crash can lose the "
        "last writes — ctrlrun's own durability. Opt-in; never the default.",
    ),
    (
        "Warden, `outcomes=\"deferred\"`",
        "Reservations exactly as above (journaled and fsynced before the permit). An outcome call "
        "returns at once; the outcome becomes durable with the store's next batch or within "
        "`max_delay` (10 ms), on `flush` and on `close`. A crash can lose the outcomes of that last "
        "window: their effects stay in progress and turn AMBIGUOUS when the lease lapses, never "
        "FAILED, never run again. Every Warden row here includes the final `flush` in its timed span.",
    ),
    (
        "Physical reference",
        "Raw `write(512 B)+fdatasync` and redb 4.6 durable commits of one small row on the same "
        "disk, measured by `warden bench` in the same run, and the harness's own probe of raw "
        "`write+fdatasync` in two calling patterns (a thread looping; each call handed to a "
        "worker thread). Where the two probe rows differ widely, the sync cost is the virtual "
        "machine's wake-up, not the disk, and Warden's durable rows depend on how each binding "
        "hands its calls over. Whether the virtual disk honours fsync is the host's business; "
        "every durable number above assumes it does.",
    ),
]


# ---- configurations -------------------------------------------------------------------------


@dataclass
class Config:
    id: str
    system: str  # display name
    kind: str  # "py" or "node"
    workload: str
    group: str  # the ctrlrun workload it is compared with: "1t", "8t" or "8p"
    py_system: str = ""  # py_worker --system
    outcomes: str | None = None
    workers: int = 1  # threads, asyncio tasks or concurrent loops per process
    processes: int = 1
    asyncio: bool = False


def configurations() -> list[Config]:
    """Every measured row, in the order one round runs them: grouped by workload so the rows
    a ratio compares run next to each other, ctrlrun and Warden alternating."""
    c: list[Config] = []

    def ctrlrun(setup: str, group: str, workload: str, workers: int, processes: int) -> Config:
        name = "ctrlrun default @protect" if setup == "default" else "ctrlrun fastest (SQLite, no sinks)"
        return Config(f"ctrlrun-{setup}/{group}", name, "py", workload, group, f"ctrlrun-{setup}", None, workers, processes)

    def py(outcomes: str, group: str, workload: str, workers: int, processes: int, asyncio: bool = False) -> Config:
        key = "64a" if asyncio else group
        return Config(f"warden-py-{outcomes}/{key}", "Warden Python", "py", workload, group, "warden", outcomes, workers, processes, asyncio)

    def node(outcomes: str, group: str, workload: str, concurrent: int) -> Config:
        return Config(f"warden-node-{outcomes}/{group}", "Warden Node", "node", workload, group, "", outcomes, concurrent, 1)

    c.append(ctrlrun("default", "1t", "1 thread", 1, 1))
    c.append(py("durable", "1t", "1 thread", 1, 1))
    c.append(Config("warden-py-process/1t", "Warden Python, `durability=\"process\"`", "py", "1 thread", "1t",
                    "warden-process", "durable", 1, 1))
    c.append(ctrlrun("fast", "1t", "1 thread", 1, 1))
    c.append(py("deferred", "1t", "1 thread", 1, 1))
    c.append(node("durable", "1t", "1 concurrent", 1))
    c.append(py("durable", "1t", "64 asyncio tasks", 64, 1, asyncio=True))
    c.append(node("deferred", "1t", "1 concurrent", 1))
    c.append(py("deferred", "1t", "64 asyncio tasks", 64, 1, asyncio=True))
    c.append(ctrlrun("default", "8t", "8 threads", 8, 1))
    c.append(py("durable", "8t", "8 threads", 8, 1))
    c.append(ctrlrun("fast", "8t", "8 threads", 8, 1))
    c.append(py("deferred", "8t", "8 threads", 8, 1))
    c.append(node("durable", "8t", "8 concurrent", 8))
    c.append(node("deferred", "8t", "8 concurrent", 8))
    c.append(ctrlrun("default", "8p", "8 processes × 1 thread", 1, 8))
    c.append(py("durable", "8p", "8 processes × 1 thread", 1, 8))
    c.append(ctrlrun("fast", "8p", "8 processes × 1 thread", 1, 8))
    c.append(py("deferred", "8p", "8 processes × 1 thread", 1, 8))
    return c


# ---- progress -------------------------------------------------------------------------------


class Progress:
    def __init__(self, total: int) -> None:
        self.total = total
        self.done = 0
        self.started = time.monotonic()
        self.tty = sys.stderr.isatty()

    def show(self, text: str, final: bool = False) -> None:
        elapsed = time.monotonic() - self.started
        eta = ""
        if self.done:
            eta = f", ~{fmt_duration(elapsed / self.done * (self.total - self.done))} left"
        line = f"compare [{self.done}/{self.total}, {fmt_duration(elapsed)}{eta}] {text}"
        if self.tty:
            sys.stderr.write("\r\x1b[2K" + line + ("\n" if final else ""))
        elif final:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()

    def step(self, text: str) -> None:
        self.done += 1
        self.show(text, final=not self.tty)

    def clear(self) -> None:
        if self.tty:
            sys.stderr.write("\r\x1b[2K")
            sys.stderr.flush()


def fmt_duration(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 60}m{seconds % 60:02d}s"


# ---- running workers ------------------------------------------------------------------------


class Failed(Exception):
    pass


@dataclass
class Result:
    rate: float
    actions: int
    seconds: float
    latencies_us: list[int]
    extra: dict[str, Any] = field(default_factory=dict)


def percentile(sorted_values: list[int], p: float) -> float:
    if not sorted_values:
        return float("nan")
    rank = round(p / 100 * (len(sorted_values) - 1))
    return float(sorted_values[min(rank, len(sorted_values) - 1)])


def free_space(directory: Path) -> str:
    """How much room the stores' filesystem has left (a full disk fails a run silently)."""
    try:
        stat = os.statvfs(directory)
    except OSError:
        return "free space unknown"
    return f"{stat.f_bavail * stat.f_frsize / 2**20:,.0f} MiB free on {directory}"


class Workers:
    """The processes of one measurement, with a watchdog that kills them all past a deadline."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.procs: list[subprocess.Popen[str]] = []
        self.logs: list[Path] = []
        self.timer = threading.Timer(MEASUREMENT_TIMEOUT_S, self.expire)
        self.timer.daemon = True
        self.timed_out = False

    def spawn(self, argv: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
        log = self.run_dir / f"worker-{len(self.procs)}.stderr"
        with log.open("w") as err:
            proc = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True, env=env, cwd=self.run_dir
            )
        self.procs.append(proc)
        self.logs.append(log)
        if len(self.procs) == 1:
            self.timer.start()
        return proc

    def expire(self) -> None:
        self.timed_out = True
        self.kill()

    def kill(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()

    def fail(self, index: int, what: str) -> Failed:
        self.kill()
        tail = ""
        try:
            tail = self.logs[index].read_text(errors="replace")[-3000:]
        except OSError:
            pass
        why = f" (killed after {MEASUREMENT_TIMEOUT_S} s)" if self.timed_out else ""
        return Failed(f"worker {index} {what}{why}; {free_space(self.run_dir)}; its stderr ({self.logs[index]}):\n{tail}")

    def read(self, index: int) -> str:
        proc = self.procs[index]
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line:
            raise self.fail(index, f"ended without answering (exit status {proc.wait()})")
        return line.strip()

    def send_all(self, word: str) -> None:
        for index, proc in enumerate(self.procs):
            assert proc.stdin is not None
            try:
                proc.stdin.write(word + "\n")
                proc.stdin.flush()
            except BrokenPipeError:
                raise self.fail(index, f"closed its stdin before {word!r}") from None

    def finish(self) -> None:
        for index, proc in enumerate(self.procs):
            if proc.stdin is not None:
                proc.stdin.close()
            status = proc.wait()
            if status != 0:
                raise self.fail(index, f"exited with status {status}")
        self.timer.cancel()

    def abandon(self) -> None:
        self.timer.cancel()
        self.kill()
        for proc in self.procs:
            proc.wait()


def measure(workers: Workers) -> Result:
    """ready → go → one result line each → exit; the aggregate over the common time line."""
    for index in range(len(workers.procs)):
        line = workers.read(index)
        if line != "ready":
            raise workers.fail(index, f"said {line[:200]!r} instead of 'ready'")
    workers.send_all("go")
    starts, ends, latencies = [], [], []
    for index in range(len(workers.procs)):
        line = workers.read(index)
        try:
            doc = json.loads(line)
            starts.append(float(doc["start"]))
            ends.append(float(doc["end"]))
            latencies.extend(int(x) for x in doc["latencies_us"])
        except (ValueError, KeyError, TypeError):
            raise workers.fail(index, f"answered {line[:200]!r} instead of a result") from None
    workers.send_all("exit")
    workers.finish()
    seconds = max(ends) - min(starts)
    if seconds <= 0:
        raise Failed(f"a measurement took {seconds} s; the clocks of its processes disagree")
    latencies.sort()
    return Result(len(latencies) / seconds, len(latencies), seconds, latencies)


class Harness:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.stores = Path(args.dir).resolve()
        self.python = sys.executable
        self.node = shutil.which("node") or "node"
        self.binding_node = Path(args.repo) / "bindings" / "node"
        self.warden_cli = Path(args.warden_cli)
        self.counter = 0
        self.empty_store_bytes: int | None = None

    def env(self, config: Config | None, run_dir: Path) -> dict[str, str]:
        env = dict(os.environ)
        env.pop("CTRLRUN_STATE", None)
        env.pop("CTRLRUN_CONFIG", None)
        env.pop("WARDEN_LIB", None)  # the installed package's bundled library is what is measured
        env["RUST_BACKTRACE"] = "0"
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        if config is not None and config.py_system == "ctrlrun-default":
            env["CTRLRUN_CONFIG"] = str(run_dir / "ctrlrun.yaml")
        return env

    def fresh_dir(self, label: str) -> Path:
        self.counter += 1
        run_dir = self.stores / f"{self.counter:03d}-{label.replace('/', '-')}"
        run_dir.mkdir(parents=True)
        (run_dir / "warden.yaml").write_text(WARDEN_DOCUMENT)
        (run_dir / "ctrlrun.yaml").write_text(CTRLRUN_POLICY)
        return run_dir

    def py_argv(self, command: str, config: Config, run_dir: Path, *more: str) -> list[str]:
        argv = [self.python, str(PY_WORKER), command, "--system", config.py_system, "--dir", str(run_dir)]
        if config.outcomes:
            argv += ["--outcomes", config.outcomes]
        return argv + list(more)

    def oneshot(self, argv: list[str], env: dict[str, str], run_dir: Path, what: str) -> dict[str, Any]:
        try:
            done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=run_dir, timeout=MEASUREMENT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise Failed(f"{what} did not finish within {MEASUREMENT_TIMEOUT_S} s") from None
        if done.returncode != 0:
            raise Failed(f"{what} failed (exit status {done.returncode}; {free_space(run_dir)}):\n{done.stderr[-3000:]}")
        try:
            return json.loads(done.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            raise Failed(f"{what} printed {done.stdout[-500:]!r}, not a JSON line") from None

    def per_worker(self, config: Config) -> int:
        return max(1, math.ceil(self.args.actions / (config.workers * config.processes)))

    def run(self, config: Config) -> Result:
        run_dir = self.fresh_dir(config.id)
        env = self.env(config, run_dir)
        per_worker = self.per_worker(config)
        if config.processes > 1:
            # Created once up front, so the workers race for actions, not for the creation.
            self.oneshot(self.py_argv("create", config, run_dir), env, run_dir, f"{config.id}: creating the store")
        workers = Workers(run_dir)
        try:
            for p in range(config.processes):
                if config.kind == "node":
                    assert config.outcomes is not None
                    argv = [self.node, str(NODE_WORKER), str(self.binding_node), str(run_dir), config.outcomes,
                            str(config.workers), str(per_worker), f"p{p}"]
                else:
                    argv = self.py_argv("run", config, run_dir, "--workers", str(config.workers),
                                        "--per-worker", str(per_worker), "--tag", f"p{p}")
                    if config.asyncio:
                        argv.append("--asyncio")
                workers.spawn(argv, env)
            result = measure(workers)
        except BaseException:
            workers.abandon()
            raise
        # One warm-up action per thread (py threads), per process otherwise.
        warmups = config.processes * (config.workers if config.kind == "py" and not config.asyncio else 1)
        expect = result.actions + warmups
        if config.kind == "node":
            check_config = Config(config.id, config.system, "py", config.workload, config.group, "warden", config.outcomes)
        else:
            check_config = config
        store = run_dir / "warden.redb"
        if check_config.py_system == "warden":
            result.extra["store_bytes"] = store.stat().st_size
            result.extra["completed_actions"] = expect
            doctor = subprocess.run([str(self.warden_cli), "doctor", "--json", "--store", str(store)],
                                    capture_output=True, text=True, timeout=300)
            try:
                result.extra["store_bytes_in_use"] = json.loads(doctor.stdout)["size"]["in_use_bytes"]
            except (ValueError, KeyError, TypeError):
                raise Failed(f"{config.id}: warden doctor printed {doctor.stdout[-500:]!r} {doctor.stderr[-500:]!r}") from None
        checked = self.oneshot(
            self.py_argv("check", check_config, run_dir, "--expect", str(expect)), env, run_dir, f"{config.id}: checking the store"
        )
        result.extra["store_states"] = checked["states"]
        chain = checked.get("chain")
        if chain:
            verified = chain["report"]["verified"]
            result.extra["chain_verified"] = verified
            result.extra["chain_verify_per_second"] = verified / chain["seconds"] if chain["seconds"] > 0 else None
        if not self.args.keep:
            shutil.rmtree(run_dir)
        return result

    def measure_empty_store(self) -> None:
        run_dir = self.fresh_dir("empty-store")
        config = Config("empty", "", "py", "", "", "warden", "durable")
        self.oneshot(self.py_argv("create", config, run_dir), self.env(None, run_dir), run_dir, "creating an empty Warden store")
        self.empty_store_bytes = (run_dir / "warden.redb").stat().st_size
        shutil.rmtree(run_dir)

    def rust_bench(self) -> dict[str, Any]:
        run_dir = self.fresh_dir("warden-bench")
        argv = [str(self.warden_cli), "bench", "--json", "--threads", "1", "--processes", "8",
                "--outcomes", "both", "--dir", str(run_dir), "--actions", str(self.args.actions)]
        try:
            with (run_dir / "bench.stderr").open("w") as err:
                done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=err, text=True, env=self.env(None, run_dir),
                                      timeout=MEASUREMENT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise Failed(f"`{' '.join(argv)}` did not finish within {MEASUREMENT_TIMEOUT_S} s") from None
        if done.returncode != 0:
            tail = (run_dir / "bench.stderr").read_text(errors="replace")[-3000:]
            raise Failed(f"`{' '.join(argv)}` failed (exit status {done.returncode}; {free_space(run_dir)}):\n{tail}")
        try:
            doc = json.loads(done.stdout)
        except ValueError:
            raise Failed(f"warden bench printed {done.stdout[-500:]!r}, not JSON") from None
        if not self.args.keep:
            shutil.rmtree(run_dir)
        return doc


# ---- the rows -------------------------------------------------------------------------------

RUST_WORKLOADS = {"1 thread(s), one process": ("1t", "1 thread"), "8 processes × 1 thread, one store": ("8p", "8 processes × 1 thread")}
REFERENCE_IDS = {
    "write(512 B) + fdatasync": "ref/fdatasync",
    "redb durable commit, single writer": "ref/redb-exclusive",
    "redb durable commit, multi-writer": "ref/redb-multi",
    "redb durable commit, one row in each of 2 tables": "ref/redb-2-tables",
    "redb durable commit, one row in each of 6 tables": "ref/redb-6-tables",
    "redb alone: one commit of each (an action's floor)": "ref/redb-action-floor",
}


@dataclass
class Row:
    id: str
    system: str
    workload: str
    group: str
    outcomes: str | None
    runs: list[float] = field(default_factory=list)
    p50_ms: list[float] = field(default_factory=list)
    p99_ms: list[float] = field(default_factory=list)
    extra: list[dict[str, Any]] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.runs) if self.runs else float("nan")

    def median_of(self, values: list[float]) -> float | None:
        values = [v for v in values if v is not None and not math.isnan(v)]
        return statistics.median(values) if values else None


PROBE_IDS = {
    "direct": ("ref/probe-direct", "write(4 KiB) + fdatasync, one thread in a loop (harness probe)"),
    "handed_off": ("ref/probe-handoff", "write(4 KiB) + fdatasync, each handed to a worker thread (harness probe)"),
}


def disk_probe(directory: Path, count: int) -> dict[str, float]:
    """The raw sync rate of the stores' disk in two calling patterns.

    On some virtual machines an fdatasync issued by a thread looping on its own is an order of
    magnitude slower than the same call handed to a worker thread while the caller waits (the
    cost is the vCPU's wake-up, not the disk); Warden's durable rows move with it while
    ctrlrun's (which never syncs) do not. Both are printed so a reader can tell.
    """
    from concurrent.futures import ThreadPoolExecutor

    path = directory / "probe.bin"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, b"\0" * 65536)
        os.fdatasync(fd)
        block = b"\x07" * 4096

        def one(n: int) -> None:
            os.pwrite(fd, block, (n % 16) * 4096)
            os.fdatasync(fd)

        rates: dict[str, float] = {}
        began = time.perf_counter()
        for n in range(count):
            one(n)
        rates["direct"] = count / (time.perf_counter() - began)
        with ThreadPoolExecutor(max_workers=1) as pool:
            pool.submit(one, 0).result()
            began = time.perf_counter()
            for n in range(count):
                pool.submit(one, n).result()
            rates["handed_off"] = count / (time.perf_counter() - began)
        return rates
    finally:
        os.close(fd)
        path.unlink()


def add_probe(rows: dict[str, Row], rates: dict[str, float]) -> None:
    for key, rate in rates.items():
        row_id, what = PROBE_IDS[key]
        rows.setdefault(row_id, Row(row_id, what, "physical reference", "ref", None)).runs.append(rate)


def add_rust(rows: dict[str, Row], doc: dict[str, Any]) -> None:
    for item in doc.get("rows", []):
        mapped = RUST_WORKLOADS.get(item.get("workload"))
        if mapped is None:
            raise Failed(f"warden bench printed a workload this harness does not know: {item.get('workload')!r}")
        group, workload = mapped
        outcomes = item["outcomes"]
        row_id = f"warden-rust-{outcomes}/{group}"
        row = rows.setdefault(row_id, Row(row_id, "Warden Rust (`warden bench`)", workload, group, outcomes))
        row.runs.append(float(item["actions_per_second"]))
        row.p50_ms.append(float(item["p50_ms"]))
        row.p99_ms.append(float(item["p99_ms"]))
    for item in doc.get("reference_per_second", []):
        row_id = REFERENCE_IDS.get(item.get("what"))
        if row_id is None:
            raise Failed(f"warden bench printed a reference this harness does not know: {item.get('what')!r}")
        row = rows.setdefault(row_id, Row(row_id, item["what"], "physical reference", "ref", None))
        row.runs.append(float(item["per_second"]))


# ---- the machine ----------------------------------------------------------------------------


def read(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""


def command_output(argv: list[str]) -> str:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def filesystem_of(directory: Path) -> tuple[str, str]:
    """(source device, filesystem type) of the mount holding `directory`."""
    best = ("", "", "")
    for line in read("/proc/self/mounts").splitlines():
        parts = line.split()
        if len(parts) < 3:
            continue
        source, mount, fstype = parts[0], parts[1].replace("\\040", " "), parts[2]
        if (str(directory) == mount or str(directory).startswith(mount.rstrip("/") + "/")) and len(mount) >= len(best[1]):
            best = (source, mount, fstype)
    return best[0], best[2]


def machine(stores: Path) -> dict[str, Any]:
    cpuinfo = read("/proc/cpuinfo")
    model = next((l.split(":", 1)[1].strip() for l in cpuinfo.splitlines() if l.startswith("model name")), "unknown")
    mem = next((l.split(":", 1)[1].strip() for l in read("/proc/meminfo").splitlines() if l.startswith("MemTotal")), "")
    source, fstype = filesystem_of(stores)
    # Named relative to the repository when inside it: the report is pasted into docs/NUMBERS.md.
    repository = HERE.parent.parent
    shown = stores.relative_to(repository) if stores.is_relative_to(repository) else stores
    disk: dict[str, Any] = {"device": source, "filesystem": fstype, "directory": str(shown)}
    name = Path(source).name if source.startswith("/dev/") else ""
    if name:
        block = Path("/sys/class/block") / name
        if (block / "partition").exists():
            block = block.resolve().parent
        disk["block_device"] = block.name
        disk["rotational"] = read(str(block / "queue" / "rotational"))
        driver = block / "device" / "driver"
        disk["driver"] = os.path.basename(os.readlink(driver)) if driver.is_symlink() else ""
        disk["model"] = read(str(block / "device" / "model"))
    os_release = dict(
        line.split("=", 1) for line in read("/etc/os-release").splitlines() if "=" in line
    )
    return {
        "cores": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)),
        "cpu_model": model,
        "memory": mem,
        "kernel": platform.release(),
        "os": os_release.get("PRETTY_NAME", "").strip('"'),
        "disk": disk,
        "python": platform.python_version(),
        "node": command_output(["node", "--version"]),
        "rustc": command_output(["rustc", "--version"]),
    }


def describe_machine(m: dict[str, Any]) -> str:
    d = m["disk"]
    disk = f"{d['device']} ({d['filesystem']}"
    if d.get("driver"):
        disk += f", {d['driver']}"
    if d.get("model"):
        disk += f", {d['model']}"
    if d.get("rotational"):
        disk += f", rotational flag {d['rotational']}"
    disk += ")"
    return (
        f"{m['cores']} cores ({m['cores_usable']} usable), {m['cpu_model']}, {m['memory']} RAM; "
        f"disk {disk}; kernel {m['kernel']} ({m['os']}); Python {m['python']}, Node {m['node']}, {m['rustc']}"
    )


# ---- reporting ------------------------------------------------------------------------------


def fmt_rate(value: float | None) -> str:
    if value is None or math.isnan(value):
        return "–"
    return f"{value:,.0f}"


def fmt_ratio(value: float | None) -> str:
    if value is None or math.isnan(value):
        return "–"
    return f"{value:.2f}×"


def fmt_ms(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:.2f}" if value < 10 else f"{value:.1f}"


TABLE_ORDER = [
    ("1t", "1 thread"), ("1t", "1 concurrent"), ("1t", "64 asyncio tasks"),
    ("8t", "8 threads"), ("8t", "8 concurrent"), ("8p", "8 processes × 1 thread"),
]


def ordered_rows(rows: dict[str, Row]) -> list[Row]:
    def key(row: Row) -> tuple[int, int, int]:
        workload_rank = next((i for i, (g, w) in enumerate(TABLE_ORDER) if g == row.group and w == row.workload), 99)
        system_rank = ["ctrlrun default", "ctrlrun fastest", "Warden Python", "Warden Node", "Warden Rust"]
        s = next((i for i, name in enumerate(system_rank) if row.system.startswith(name)), 9)
        o = {"durable": 0, "deferred": 1}.get(row.outcomes or "", 0)
        return (workload_rank, s, o)

    return sorted((r for r in rows.values() if r.group != "ref"), key=key) + [
        rows[i] for i in [*REFERENCE_IDS.values(), *(row_id for row_id, _ in PROBE_IDS.values())] if i in rows
    ]


def baseline(rows: dict[str, Row], setup: str, group: str) -> float | None:
    row = rows.get(f"ctrlrun-{setup}/{group}")
    return row.median if row and row.runs else None


def ratio(value: float, base: float | None) -> float | None:
    if base is None or base <= 0 or math.isnan(value):
        return None
    return value / base


def targets(rows: dict[str, Row]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    def versus(label: str, row_id: str, base_id: str, required: float) -> None:
        row, base = rows.get(row_id), rows.get(base_id)
        measured = ratio(row.median, base.median) if row and base and row.runs and base.runs else None
        out.append({"target": label, "required": f"≥ {required:g}×", "measured": fmt_ratio(measured),
                    "value": measured, "met": None if measured is None else measured >= required})

    versus("Python `@protect`, 1 thread, `durable` vs ctrlrun default, 1 thread", "warden-py-durable/1t", "ctrlrun-default/1t", 2)
    versus("Python `@protect`, 1 thread, `durable` vs ctrlrun fastest, 1 thread", "warden-py-durable/1t", "ctrlrun-fast/1t", 1.3)
    versus("Python `@protect`, 1 thread, `deferred` vs ctrlrun default, 1 thread", "warden-py-deferred/1t", "ctrlrun-default/1t", 3)
    versus("Python `@protect`, 1 thread, `durability=\"process\"` vs ctrlrun default, 1 thread",
           "warden-py-process/1t", "ctrlrun-default/1t", 4)
    versus("Python, 8 threads, one process, `durable` vs ctrlrun default, 8 threads", "warden-py-durable/8t", "ctrlrun-default/8t", 6)
    versus("Python, 64 asyncio tasks, `durable` vs ctrlrun default, 1 thread", "warden-py-durable/64a", "ctrlrun-default/1t", 5)
    versus("Python, 8 processes × 1 thread, one store, `durable` (aggregate) vs ctrlrun default, 8 processes",
           "warden-py-durable/8p", "ctrlrun-default/8p", 4)
    sync = rows.get("ref/fdatasync")
    for outcomes, required in (("durable", 0.4), ("deferred", 0.6)):
        rust = rows.get(f"warden-rust-{outcomes}/1t")
        measured = ratio(rust.median, sync.median) if rust and sync and rust.runs and sync.runs else None
        out.append({"target": f"Rust 1 thread, `{outcomes}` vs the same run's `write+fdatasync` rate",
                    "required": f"≥ {required:.0%}", "measured": "–" if measured is None else f"{measured:.0%}",
                    "value": measured, "met": None if measured is None else measured >= required})

    rust, redb = rows.get("warden-rust-durable/1t"), rows.get("ref/redb-exclusive")
    measured = ratio(rust.median, redb.median / 2) if rust and redb and rust.runs and redb.runs else None
    out.append({"target": "Rust reserve→commit, 1 thread, `durable` vs half of redb's `ExclusiveWriter` durable commit rate (same run)",
                "required": "≥ 0.80", "measured": "–" if measured is None else f"{measured:.2f}",
                "value": measured, "met": None if measured is None else measured >= 0.8})
    floor = rows.get("ref/redb-action-floor")
    measured = ratio(rust.median, floor.median) if rust and floor and rust.runs and floor.runs else None
    out.append({"target": "(context, not a target) Rust 1 thread `durable` vs redb alone committing one row into each table "
                          "a proposal writes, then into each an outcome writes (same run)",
                "required": "–", "measured": "–" if measured is None else f"{measured:.2f}",
                "value": measured, "met": None})

    p99_row = rows.get("warden-py-durable/8t")
    p99 = p99_row.median_of(p99_row.p99_ms) if p99_row else None
    out.append({"target": "p99 latency, 8 threads, `durable` (Python binding, median of the runs' p99)",
                "required": "≤ 3 ms", "measured": "–" if p99 is None else f"{p99:.2f} ms",
                "value": p99, "met": None if p99 is None else p99 <= 3})

    chain_row = rows.get("warden-py-durable/1t")
    rates = [e.get("chain_verify_per_second") for e in chain_row.extra] if chain_row else []
    verified = [e.get("chain_verified") for e in chain_row.extra] if chain_row else []
    rate = chain_row.median_of(rates) if chain_row else None
    n = int(statistics.median(verified)) if verified and all(v is not None for v in verified) else None
    out.append({"target": "chain verification",
                "required": "≥ 200,000 receipts/s, constant memory",
                "measured": "–" if rate is None else f"{rate:,.0f} receipts/s over {n:,} receipts (Python `verify_chain`, call overhead included; memory not measured)",
                "value": rate, "met": None if rate is None else rate >= 200_000})

    growth = None
    if chain_row and chain_row.extra:
        per = [(e["store_bytes"] - e["empty_store_bytes"]) / e["completed_actions"]
               for e in chain_row.extra if "store_bytes" in e and e.get("empty_store_bytes") is not None]
        growth = statistics.median(per) if per else None
    in_use = None
    if chain_row and chain_row.extra:
        per = [e["store_bytes_in_use"] / e["completed_actions"] for e in chain_row.extra if "store_bytes_in_use" in e]
        in_use = statistics.median(per) if per else None
    out.append({"target": "store growth per completed action (Python, 1 thread, `durable` stores: file size after the run less an empty store's, over the actions)",
                "required": "≤ 2 KiB", "measured": "–" if growth is None else f"{growth:,.0f} B",
                "value": growth, "met": None if growth is None else growth <= 2048})
    out.append({"target": "(context, not a target) the same stores: bytes the tables occupy (`warden doctor`'s `in_use_bytes`), over the actions; "
                          "the file is larger because redb grows it by doubling",
                "required": "–", "measured": "–" if in_use is None else f"{in_use:,.0f} B",
                "value": in_use, "met": None})
    return out


def markdown(report: dict[str, Any], rows: dict[str, Row]) -> str:
    s = report["settings"]
    lines = [
        f"Side-by-side, `benches/compare/run.sh{' --quick' if s['quick'] else ''}` ({report['finished_at']}): "
        f"{s['repetitions']} run(s) of each row, alternating systems, median with min–max; "
        f"{s['actions']:,} keyed no-op protected actions per run (split across threads, tasks or processes), "
        f"each run on a fresh store in `{report['machine']['disk']['directory']}`.",
        "",
        f"Machine: {describe_machine(report['machine'])}.",
        f"Load average at start {report['loadavg_start']}, at end {report['loadavg_end']}; total {fmt_duration(report['seconds'])}.",
        "",
        "| system | workload | outcomes | actions/s (median) | min–max | p50 / p99 ms | × ctrlrun default | × ctrlrun fastest |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for row in ordered_rows(rows):
        if row.group == "ref":
            lines.append(f"| {row.system} | physical reference (same disk, same run) | – | {fmt_rate(row.median)} /s | "
                         f"{fmt_rate(min(row.runs))}–{fmt_rate(max(row.runs))} | – | – | – |")
            continue
        p50, p99 = row.median_of(row.p50_ms), row.median_of(row.p99_ms)
        lines.append(
            f"| {row.system} | {row.workload} | {row.outcomes or '–'} | {fmt_rate(row.median)} | "
            f"{fmt_rate(min(row.runs))}–{fmt_rate(max(row.runs))} | {fmt_ms(p50)} / {fmt_ms(p99)} | "
            f"{fmt_ratio(ratio(row.median, baseline(rows, 'default', row.group)))} | "
            f"{fmt_ratio(ratio(row.median, baseline(rows, 'fast', row.group)))} |"
        )
    if report["failures"]:
        lines += ["", f"**Failures during this run**: {len(report['failures'])} step(s) failed and were run again; "
                  f"the table counts the repeats (the failed runs' files are kept under `{report['failed_runs_kept_under']}`):", ""]
        for f in report["failures"]:
            text = " ".join(f["error"].split())
            lines.append(f"- round {f['round']}, {f['step']}: {text[:600]}")
    lines += [
        "",
        "Ratios compare medians with the ctrlrun row of the same shape: 1 thread, 1 concurrent and "
        "64 asyncio tasks against ctrlrun's 1 thread (ctrlrun's `@protect` refuses `async def`); "
        "8 threads and 8 concurrent against its 8 threads; 8 processes against its 8 processes.",
        "",
        "The speed targets set for this release, and where each stands:",
        "",
        "| target | required | measured | met |",
        "|---|---|---|---|",
    ]
    for t in report["targets"]:
        met = "–" if t["met"] is None else ("yes" if t["met"] else "**no**")
        lines.append(f"| {t['target']} | {t['required']} | {t['measured']} | {met} |")
    lines += ["", "Durability of each system:", ""]
    for who, what in DURABILITY:
        lines.append(f"- **{who}**: {what}")
    return "\n".join(lines) + "\n"


# ---- main -----------------------------------------------------------------------------------


def refuse_memory_filesystem(directory: Path) -> None:
    _, fstype = filesystem_of(directory)
    if fstype in {"tmpfs", "ramfs", "devtmpfs"}:
        raise SystemExit(
            f"compare: {directory} is on {fstype}, where fsync costs nothing; durable numbers there say "
            "nothing about a disk. Choose a directory on a disk with --dir."
        )


def main() -> int:
    repo = HERE.parent.parent
    target = Path(os.environ.get("CARGO_TARGET_DIR") or repo / "target")
    parser = argparse.ArgumentParser(
        prog="benches/compare/run.sh", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dir", default=str(target / "compare-stores"),
                        help="where the scratch stores live, the disk being measured (default: %(default)s)")
    parser.add_argument("--repetitions", type=int, default=5, help="rounds (default: %(default)s)")
    parser.add_argument("--actions", type=int, default=2000, help="actions per run of each row (default: %(default)s)")
    parser.add_argument("--quick", action="store_true", help="1 repetition of 200 actions (smoke test)")
    parser.add_argument("--only", default="", help="comma-separated row ids or prefixes to run (debugging)")
    parser.add_argument("--no-rust", action="store_true", help="skip `warden bench` (debugging)")
    parser.add_argument("--keep", action="store_true", help="keep every run's store directory")
    parser.add_argument("--json", action="store_true", help="print JSON instead of Markdown")
    parser.add_argument("--out", default=str(target / "compare"), help="where latest.md and latest.json go (default: %(default)s)")
    args = parser.parse_args()
    args.repo = str(repo)
    args.warden_cli = str(target / "release" / "warden")
    if args.quick:
        args.repetitions, args.actions = 1, 200
    if args.repetitions < 1 or args.actions < 1:
        parser.error("--repetitions and --actions must be at least 1")

    stores = Path(args.dir).resolve()
    stores.mkdir(parents=True, exist_ok=True)
    refuse_memory_filesystem(stores)
    room = os.statvfs(stores)
    if room.f_bavail * room.f_frsize < 2 * 2**30:
        print(f"compare: warning: only {free_space(stores)}; a full disk fails a run", file=sys.stderr)
    args.dir = str(stores / f"run-{os.getpid()}")
    Path(args.dir).mkdir()

    configs = configurations()
    if args.only:
        wanted = [w.strip() for w in args.only.split(",") if w.strip()]
        configs = [c for c in configs if any(c.id.startswith(w) for w in wanted)]
    harness = Harness(args)
    rows: dict[str, Row] = {c.id: Row(c.id, c.system, c.workload, c.group, c.outcomes) for c in configs}
    steps_per_round = len(configs) + (0 if args.no_rust else 2)
    progress = Progress(args.repetitions * steps_per_round)
    started = time.monotonic()
    loadavg_start = " ".join(f"{x:.2f}" for x in os.getloadavg())
    rust_docs: list[dict[str, Any]] = []

    failures: list[dict[str, Any]] = []

    def step_label(config: Config | str | None) -> str:
        if config == "probe":
            return "raw fdatasync probe"
        if config is None:
            return "warden bench (Rust, physical reference)"
        assert isinstance(config, Config)
        return f"{config.system}, {config.workload}" + (f", {config.outcomes}" if config.outcomes else "")

    def run_step(config: Config | str | None, rep: int) -> None:
        """One step of a round; its numbers are added only once it has succeeded."""
        label = step_label(config)
        progress.show(f"round {rep + 1}/{args.repetitions}: {label} …")
        if config == "probe":
            rates = disk_probe(Path(args.dir), min(args.actions, 500))
            add_probe(rows, rates)
            progress.step(f"round {rep + 1}: fdatasync probe: {rates['direct']:,.0f}/s looping, "
                          f"{rates['handed_off']:,.0f}/s handed off")
            return
        if config is None:
            doc = harness.rust_bench()
            rust_docs.append(doc)
            add_rust(rows, doc)
            progress.step(f"round {rep + 1}: warden bench done")
            return
        assert isinstance(config, Config)
        result = harness.run(config)
        row = rows[config.id]
        row.runs.append(result.rate)
        row.p50_ms.append(percentile(result.latencies_us, 50) / 1000)
        row.p99_ms.append(percentile(result.latencies_us, 99) / 1000)
        result.extra["empty_store_bytes"] = harness.empty_store_bytes
        result.extra["seconds"] = result.seconds
        result.extra["actions"] = result.actions
        row.extra.append(result.extra)
        progress.step(f"round {rep + 1}: {label}: {result.rate:,.0f}/s")

    def interrupted(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupted)
    try:
        if any(c.py_system == "warden" for c in configs):
            progress.show("creating an empty Warden store (for store growth)")
            harness.measure_empty_store()
        for rep in range(args.repetitions):
            order: list[Config | str | None] = list(configs) + ([] if args.no_rust else ["probe", None])
            if rep % 2 == 1:
                order.reverse()
            for config in order:
                for attempt in (1, 2):
                    try:
                        run_step(config, rep)
                        break
                    except Failed as failure:
                        progress.clear()
                        what = step_label(config)
                        print(f"compare: round {rep + 1}, {what}, attempt {attempt} failed: {failure}", file=sys.stderr)
                        failures.append({"round": rep + 1, "step": what, "attempt": attempt, "error": str(failure)})
                        if attempt == 2:
                            raise
    except Failed as failure:
        progress.clear()
        print(f"compare: {failure}", file=sys.stderr)
        print(f"compare: the failed run's files are kept under {args.dir}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        progress.clear()
        print(f"compare: interrupted; scratch files are under {args.dir}", file=sys.stderr)
        return 130
    progress.clear()
    if not args.keep and not failures:
        shutil.rmtree(args.dir, ignore_errors=True)

    rows = {k: v for k, v in rows.items() if v.runs}
    report: dict[str, Any] = {
        "finished_at": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine(stores),
        "settings": {"repetitions": args.repetitions, "actions": args.actions, "quick": args.quick,
                     "ctrlrun": "0.12.2", "stores": str(stores)},
        "loadavg_start": loadavg_start,
        "loadavg_end": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "seconds": time.monotonic() - started,
    }
    report["targets"] = targets(rows)
    report["rows"] = [
        {
            "id": r.id, "system": r.system, "workload": r.workload, "outcomes": r.outcomes,
            "runs_per_second": [round(x, 1) for x in r.runs],
            "median_per_second": round(r.median, 1), "min_per_second": round(min(r.runs), 1),
            "max_per_second": round(max(r.runs), 1),
            "p50_ms": r.median_of(r.p50_ms), "p99_ms": r.median_of(r.p99_ms),
            "ratio_to_ctrlrun_default": None if r.group == "ref" else ratio(r.median, baseline(rows, "default", r.group)),
            "ratio_to_ctrlrun_fastest": None if r.group == "ref" else ratio(r.median, baseline(rows, "fast", r.group)),
            "runs": r.extra,
        }
        for r in ordered_rows(rows)
    ]
    report["failures"] = failures
    report["failed_runs_kept_under"] = args.dir if failures else None
    report["durability"] = [{"system": who, "statement": what} for who, what in DURABILITY]
    report["warden_bench_runs"] = rust_docs
    text = markdown(report, rows)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "latest.md").write_text(text)
    (out / "latest.json").write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    sys.stdout.write(json.dumps(report, indent=2, ensure_ascii=False) + "\n" if args.json else text)
    print(f"compare: done in {fmt_duration(report['seconds'])}; also written to {out}/latest.md and latest.json", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
