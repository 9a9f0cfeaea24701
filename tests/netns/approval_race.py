"""One process of the two-host approval races (tests/netns/two_hosts.sh), run inside a network
namespace through the Python binding. Says one line, flushed at once:

    approval_race.py request STORE CONFIG KEY
        proposes bench.approve for KEY (a rule that asks a human) and prints the request id
    approval_race.py consume STORE CONFIG KEY APPROVAL START
        after START exists, presents APPROVAL for the same action: "consumed" when it got the
        permit, ran and committed; "refused CLASS" otherwise
    approval_race.py answer STORE CONFIG APPROVAL START grant|deny BY
        after START exists, grants or denies APPROVAL as BY: "answered STATUS" with the status
        this call left; "refused CLASS" when another answer came first
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import warden


def wait(start: str) -> None:
    while not Path(start).exists():
        time.sleep(0.002)


def main() -> None:
    command, store, config, *rest = sys.argv[1:]
    w = warden.Warden(store=store, config=config)
    with warden.context(agent="netns-agent"):
        if command == "request":
            (key,) = rest
            try:
                w.propose("bench.approve", {"n": key})
                line = "error: the action was permitted without an approval"
            except warden.ApprovalRequired as pending:
                line = pending.request_id or "error: no request id"
        elif command == "consume":
            key, approval, start = rest
            wait(start)
            try:
                with warden.with_approval(approval):
                    permit = w.propose("bench.approve", {"n": key})
                permit.commit({"ok": True})
                line = "consumed"
            except warden.Refused as refusal:
                line = f"refused {type(refusal).__name__}"
        elif command == "answer":
            approval, start, verb, by = rest
            wait(start)
            try:
                record = w.approve(approval, by=by) if verb == "grant" else w.deny(approval, by=by)
                line = f"answered {record['status']}"
            except warden.Refused as refusal:
                line = f"refused {type(refusal).__name__}"
        else:
            line = f"error: unknown command {command}"
    sys.stdout.write(line + "\n")
    sys.stdout.flush()
    w.close()


if __name__ == "__main__":
    main()
