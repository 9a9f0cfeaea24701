"""Cross-language, cross-process: a Python agent process and a Node agent process race on one
store for the same effect keys, round after round, while the `warden` CLI approves a pending
request. Exactly one winner per round, remote calls == rounds, nothing lost, the chain verifies.
Then the propose-and-wait scenario of wait.py: the same behaviour in both bindings.

    run.py REPO TARGET_DIR [ROUNDS]
"""

import json
import os
import subprocess
import sys
import tempfile
import time

import warden

import wait


def main() -> int:
    repo, target = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 50
    here = os.path.dirname(os.path.abspath(__file__))
    config = os.path.join(here, "policy.yaml")
    cli = os.path.join(target, "release", "warden")
    with tempfile.TemporaryDirectory() as work:
        store = os.path.join(work, "state.redb")
        os.mkdir(os.path.join(work, "calls"))
        # A pending request for the CLI to approve while the agents race.
        w = warden.Warden(store=store, config=config)
        try:
            with warden.context(agent="payout-agent", user="carol"):
                w.propose("payout.large", {"id": "p1"})
            raise SystemExit("expected an approval request")
        except warden.ApprovalRequired as required:
            request_id = required.request_id
        env = dict(os.environ, WARDEN_NODE_PACKAGE=os.path.join(repo, "bindings", "node"))
        agents = [
            subprocess.Popen([sys.executable, os.path.join(here, "agent.py"), store, config, work, str(rounds)],
                             stdout=subprocess.PIPE, text=True),
            subprocess.Popen(["node", os.path.join(here, "agent.js"), store, config, work, str(rounds)],
                             stdout=subprocess.PIPE, text=True, env=env),
        ]
        deadline = time.monotonic() + 120
        while not all(os.path.exists(os.path.join(work, f"ready.{who}")) for who in ("python", "node")):
            if time.monotonic() > deadline or any(a.poll() not in (None, 0) for a in agents):
                raise SystemExit("an agent never reached the start line")
            time.sleep(0.005)
        open(os.path.join(work, "go"), "w").close()
        approve = subprocess.run([cli, "--store", store, "approve", request_id, "--by", "ops:cli", "--yes"],
                                 capture_output=True, text=True)
        outputs = [a.communicate(timeout=300)[0].strip() for a in agents]
        codes = [a.returncode for a in agents]
        if approve.returncode != 0 or codes != [0, 0]:
            print(approve.stdout, approve.stderr, outputs, codes)
            return 1
        wins = {line.split()[0]: int(line.split()[-1]) for line in outputs}
        calls = sorted(int(name) for name in os.listdir(os.path.join(work, "calls")))
        effects = w.effects(limit=0)
        committed = [e for e in effects if e["state"] == "committed" and e["effect_key"].startswith("race:")]
        chain = subprocess.run([cli, "--store", store, "--json", "receipts", "--verify-chain"], capture_output=True, text=True)
        report = json.loads(chain.stdout)
        approval = w.approval(request_id)
        w.close()
        checks = {
            "exactly one winner per round": wins.get("python", 0) + wins.get("node", 0) == rounds,
            f"remote calls == {rounds}": calls == list(range(rounds)),
            "every round committed": len(committed) == rounds,
            "the CLI's approval landed": approval is not None and approval["status"] == "granted",
            "the chain verifies": chain.returncode == 0 and report["ok"],
            **wait.check(repo),
        }
        print(f"{rounds} rounds: python won {wins.get('python')}, node won {wins.get('node')}, "
              f"remote calls {len(calls)}, receipts {report['chained']}")
        for name, ok in checks.items():
            print(f"  {'ok  ' if ok else 'FAIL'} {name}")
        passed = sum(checks.values())
        print(f"cross-language: {passed} passed, {len(checks) - passed} failed")
        return 0 if passed == len(checks) else 1


if __name__ == "__main__":
    sys.exit(main())
