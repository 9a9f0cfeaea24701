"""The console's inbox with many pending requests (issue 30's target: an approval page renders in
at most 100 ms of server time with 10,000 pending requests).

    WARDEN_LIB=target/release/libwarden.so PYTHONPATH=bindings/python \
        python3 benches/console/inbox.py [--pending 10000] [--requests 10] [--warden target/release/warden]

Makes a store in a scratch directory with N pending approval requests (distinct refunds through
the Python binding, each one `approval_required`), registers an approver, starts `warden console`
on it, signs in, and times GET / (the inbox) and GET /approval/ID (one request's page) with the
client's clock on loopback; prints each time and the median, and the machine's load average (the
numbers mean little on a busy machine). No timing is asserted: this is a measurement.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

import warden

DOCUMENT = """\
schema: warden/v1
actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    rules:
      - decision: approve
"""


def make_store(directory: Path, pending: int) -> Path:
    config = directory / "warden.yaml"
    config.write_text(DOCUMENT, encoding="utf-8")
    store = directory / "state.redb"
    started = time.monotonic()
    with warden.Warden(store=store, config=config) as w, warden.context(agent="refund-agent", user="ada"):
        for n in range(pending):
            try:
                w.propose("stripe.refund", {"payment_id": f"pay_{n}", "amount": 1000 + n, "note": "duplicate charge"})
                raise SystemExit("a refund was permitted without approval")
            except warden.ApprovalRequired:
                pass
            if (n + 1) % 2000 == 0:
                print(f"  {n + 1} pending ({time.monotonic() - started:.0f} s)", file=sys.stderr, flush=True)
    return store


def timed_get(host: str, port: int, path: str, cookie: str) -> tuple[float, int, int]:
    connection = http.client.HTTPConnection(host, port, timeout=60)
    started = time.perf_counter()
    connection.request("GET", path, headers={"Cookie": cookie})
    response = connection.getresponse()
    body = response.read()
    elapsed = time.perf_counter() - started
    connection.close()
    return elapsed, response.status, len(body)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pending", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=10)
    parser.add_argument("--warden", default="target/release/warden")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch)
        print(f"making {args.pending} pending requests", file=sys.stderr, flush=True)
        store = make_store(directory, args.pending)
        added = subprocess.run(
            [args.warden, "approvers", "add", "bob", "--store", str(store)], capture_output=True, text=True, check=True
        )
        token = added.stdout.strip().splitlines()[-1]
        console = subprocess.Popen(
            [args.warden, "console", "--store", str(store)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
        try:
            assert console.stdout is not None
            url = urllib.parse.urlsplit(console.stdout.readline().strip())
            host, port = url.hostname or "127.0.0.1", url.port or 80
            connection = http.client.HTTPConnection(host, port, timeout=60)
            body = urllib.parse.urlencode({"token": token})
            connection.request(
                "POST",
                "/login",
                body=body,
                headers={"Content-Type": "application/x-www-form-urlencoded", "Sec-Fetch-Site": "same-origin"},
            )
            response = connection.getresponse()
            response.read()
            cookie = (response.getheader("Set-Cookie") or "").split(";")[0]
            if response.status != 303 or not cookie:
                raise SystemExit(f"sign-in failed: {response.status}")
            pending = subprocess.run(
                [args.warden, "pending", "--json", "--store", str(store)], capture_output=True, text=True, check=True
            )
            newest = json.loads(pending.stdout)[0]["approval_id"]
            for name, path in (("inbox /", "/"), ("one request /approval/ID", f"/approval/{newest}")):
                times = []
                for _ in range(args.requests):
                    elapsed, status, size = timed_get(host, port, path, cookie)
                    if status != 200:
                        raise SystemExit(f"GET {path}: {status}")
                    times.append(elapsed * 1000)
                shown = ", ".join(f"{t:.0f}" for t in times)
                print(
                    f"{name}: {args.pending} pending, {size} bytes, ms: {shown}; median {statistics.median(times):.0f} ms"
                )
            print(f"load average: {os.getloadavg()[0]:.2f} (1 min), cores: {os.cpu_count()}")
        finally:
            console.terminate()
            console.wait()


if __name__ == "__main__":
    main()
