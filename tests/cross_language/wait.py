"""Cross-language: the library's one propose-and-wait behaves the same in Python and Node.
Each binding runs the same scenario (wait_agent.py, wait_agent.js) in its own process and store,
under libfaketime so that the library's clock jumps forward instead of anybody sleeping: a
precondition asked only when an approval is involved, a wait of two days that a grant ten
minutes in ends, a changed precondition, a request whose fifteen minutes end the wait, a
failing precondition, and a reconcile hook. The two transcripts must be equal, and right.

    wait.py REPO TARGET_DIR
"""

import json
import os
import subprocess
import sys
import tempfile

FAKETIME_DIRS = ("/usr/lib/x86_64-linux-gnu/faketime", "/usr/lib/aarch64-linux-gnu/faketime", "/usr/lib/faketime",
                 "/usr/local/lib/faketime")

EXPECTED = [
    {"step": "allowed", "returned": "sent r1", "asked": 0},
    {"step": "waited_and_granted", "returned": "paid p1", "asked": 2},
    {"step": "precondition_changed", "raised": "ApprovalMismatch", "reason": "precondition_changed",
     "approval": "granted", "asked": 4},
    {"step": "request_expired", "raised": "ApprovalMismatch", "reason": "approval_expired", "pending": 0},
    {"step": "precondition_failed", "raised": "host_error", "message": "the ledger is down", "pending": 0},
    {"step": "lost_reply", "raised": "host_error", "message": "the reply was lost"},
    {"step": "reconciled", "returned": "posted l1", "asked_about": ["ledger:l1"]},
    {"step": "ran", "ids": ["r1", "p1", "l1"]},
]


def libfaketime() -> str:
    for directory in FAKETIME_DIRS:
        path = os.path.join(directory, "libfaketimeMT.so.1")
        if os.path.exists(path):
            return path
    raise SystemExit("wait.py needs libfaketime (apt install faketime): libfaketimeMT.so.1 is in none of "
                     + ", ".join(FAKETIME_DIRS))


def transcript(command: list[str], work: str, who: str, env: dict[str, str]) -> list[dict] | str:
    clock = os.path.join(work, f"clock.{who}")
    with open(clock, "w") as f:
        f.write("+0")
    env = dict(env, LD_PRELOAD=libfaketime(), FAKETIME_TIMESTAMP_FILE=clock, FAKETIME_NO_CACHE="1",
               FAKETIME_DONT_FAKE_MONOTONIC="1")
    store = os.path.join(work, f"{who}.redb")
    config = os.path.join(os.path.dirname(os.path.abspath(__file__)), "wait_policy.yaml")
    done = subprocess.run(command + [store, config, clock], capture_output=True, text=True, env=env, timeout=300)
    if done.returncode != 0:
        return f"{who} exited {done.returncode}: {done.stderr.strip()[-2000:]}"
    return json.loads(done.stdout)


def check(repo: str) -> dict[str, bool]:
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, WARDEN_NODE_PACKAGE=os.path.join(repo, "bindings", "node"))
    with tempfile.TemporaryDirectory() as work:
        python = transcript([sys.executable, os.path.join(here, "wait_agent.py")], work, "python", env)
        node = transcript(["node", os.path.join(here, "wait_agent.js")], work, "node", env)
    for who, seen in (("python", python), ("node", node)):
        if seen != EXPECTED:
            print(f"  {who} transcript: {json.dumps(seen, sort_keys=True)}")
    return {
        "python's propose-and-wait transcript is the expected one": python == EXPECTED,
        "node's propose-and-wait transcript is the expected one": node == EXPECTED,
        "python and node behave the same (precondition, a two-day wait, reconcile)": python == node,
    }


def main() -> int:
    checks = check(sys.argv[1])
    for name, ok in checks.items():
        print(f"  {'ok  ' if ok else 'FAIL'} {name}")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
