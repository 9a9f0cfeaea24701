"""One client process of the two-host tests (tests/netns/two_hosts.sh runs it inside a network
namespace): opens the PostgreSQL store through the Python binding, waits for the start file,
then proposes each key in turn and says what happened, one line each, flushed at once:

    won KEY          the protected call ran and committed
    refused KEY      Duplicate or Ambiguous: another attempt holds or held the key
    unavailable KEY  the store could not be reached; the key is retried until --until

    worker.py STORE_URL CONFIG START_FILE KEY... [--retry-until SECONDS]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import warden


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main() -> None:
    args = sys.argv[1:]
    retry_until = 0.0
    if "--retry-until" in args:
        at = args.index("--retry-until")
        retry_until = time.monotonic() + float(args[at + 1])
        del args[at : at + 2]
    store, config, start, *keys = args
    w = warden.Warden(store=store, config=config)

    @w.protect("bench.noop")
    def noop(n: str) -> dict[str, bool]:
        return {"ok": True}

    while not Path(start).exists():
        time.sleep(0.002)
    with warden.context(agent="netns-agent"):
        for key in keys:
            while True:
                try:
                    noop(n=key)
                    say(f"won {key}")
                except (warden.Duplicate, warden.Ambiguous):
                    say(f"refused {key}")
                except warden.WardenError as error:
                    if time.monotonic() < retry_until and "unavailable" in type(error).__name__.lower() + str(error).lower():
                        say(f"unavailable {key}")
                        time.sleep(0.2)
                        continue
                    say(f"error {key} {type(error).__name__}: {error}")
                break
    w.close()


if __name__ == "__main__":
    main()
