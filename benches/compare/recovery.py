"""How long an open takes to replay a full journal lap (docs/STORE.md, "Recovery").

    python benches/compare/recovery.py --dir DIR [--actions N]

A child process opens a fresh store in DIR, runs N keyed no-op `@w.protect` actions with
deferred outcomes (so batches are small and many), flushes, and exits without closing: no
checkpoint, so every batch since its open is only in the journal's current lap. Then this
process opens the store again — the open replays the lap and checkpoints — and prints the
journal's size, the open's time and the receipts the store then holds. A lap never passes
8 MiB (a batch that would take it past is checkpointed instead), so the default 3,900 actions
come close to the most one open can ever replay. The binding is the installed `warden` (the
harness's venv: `target/compare-venv/bin/python`).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import warden
from compare import WARDEN_DOCUMENT  # the harness's document: the same action, the same rule


def write(directory: Path, actions: int) -> None:
    w = warden.Warden(store=directory / "warden.redb", config=directory / "warden.yaml", outcomes="deferred")

    @w.protect("bench.noop")
    def noop(n: str) -> dict[str, bool]:
        return {"ok": True}

    with warden.context(agent="bench-agent"):
        for n in range(actions):
            noop(f"recovery-{n}")
    w.flush()
    os._exit(0)  # no close: the journal keeps the lap, the next open replays it


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", required=True, help="where the scratch store goes (the disk measured)")
    parser.add_argument("--actions", type=int, default=3900)
    parser.add_argument("--write-only", metavar="STORE_DIR", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.write_only:
        write(Path(args.write_only), args.actions)
    if args.actions < 1:
        parser.error("--actions must be at least 1")
    directory = Path(tempfile.mkdtemp(prefix="warden-recovery-", dir=args.dir))
    try:
        (directory / "warden.yaml").write_text(WARDEN_DOCUMENT)
        subprocess.run(
            [sys.executable, __file__, "--dir", args.dir, "--actions", str(args.actions), "--write-only", str(directory)],
            check=True,
        )
        journal = (directory / "warden.redb.journal").stat().st_size
        began = time.perf_counter()
        w = warden.Warden(store=directory / "warden.redb", config=directory / "warden.yaml")
        took = time.perf_counter() - began
        report = w.verify_chain()
        w.close()
        if not report.get("ok") or report.get("verified") != args.actions:
            raise SystemExit(f"recovery.py: after the replay the chain says {report}; expected {args.actions} receipts")
        print(
            f"{args.actions} actions left only in the journal ({journal / 2**20:.2f} MiB file): the next open "
            f"replayed them in {took * 1000:.0f} ms; the chain verifies, {report['verified']} receipts"
        )
    finally:
        shutil.rmtree(directory)


if __name__ == "__main__":
    main()
