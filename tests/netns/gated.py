"""One proposal of the two-host cases (tests/netns/two_hosts.sh), run inside a network
namespace: opens the PostgreSQL store through the Python binding, proposes KEY once, runs it
and commits, and says one line, flushed at once:

    won KEY MS                 permitted, ran and committed; MS: milliseconds from the proposal
    late KEY CLASS MS          permitted and ran, but its outcome was refused (a lapsed lease)
    refused KEY CLASS MS       refused (Duplicate, Ambiguous, ...)
    unavailable KEY MS         the store could not be reached or decide; no permit
    error KEY CLASS: MESSAGE   anything else

    gated.py STORE CONFIG KEY [--lease S] [--hold S] [--gate DIR] [--start FILE]

--gate DIR arms the library's commit gate (a test-exports build, WARDEN_TEST_COMMIT_GATE=DIR):
the reservation's write stops before COMMIT and before its witness is read back, so the test
can change the network at that instant. --hold S waits S seconds between the permit and its
commit. --start FILE waits for FILE to exist before proposing (after opening).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import warden


def main() -> None:
    args = sys.argv[1:]
    options = {"--lease": None, "--hold": None, "--gate": None, "--start": None}
    for name in options:
        if name in args:
            at = args.index(name)
            options[name] = args[at + 1]
            del args[at : at + 2]
    store, config, key = args
    w = warden.Warden(store=store, config=config)
    if options["--start"]:
        while not Path(options["--start"]).exists():
            time.sleep(0.002)
    if options["--gate"]:
        Path(options["--gate"], "armed").touch()
    lease = float(options["--lease"]) if options["--lease"] else None
    started = time.monotonic()

    def ms() -> int:
        return round((time.monotonic() - started) * 1000)

    with warden.context(agent="netns-agent"):
        try:
            permit = w.propose("bench.noop", {"n": key}, lease=lease)
        except warden.Refused as refusal:
            line = f"refused {key} {type(refusal).__name__} {ms()}"
        except warden.WardenError as error:
            if "unavailable" in str(error).lower():
                line = f"unavailable {key} {ms()}"
            else:
                line = f"error {key} {type(error).__name__}: {error}"
        else:
            if options["--hold"]:
                time.sleep(float(options["--hold"]))
            try:
                permit.commit({"ok": True})
                line = f"won {key} {ms()}"
            except warden.Refused as refusal:
                line = f"late {key} {type(refusal).__name__} {ms()}"
    sys.stdout.write(line + "\n")
    sys.stdout.flush()
    w.close()


if __name__ == "__main__":
    main()
