"""One Python agent process: races the Node agent for every round's effect key."""

import os
import sys
import time

import warden


def main() -> int:
    store, config, work, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    w = warden.Warden(store=store, config=config)

    @w.protect("race.run")
    def run(round: int) -> dict:
        # The remote call: creating the marker twice would mean the effect ran twice.
        fd = os.open(os.path.join(work, "calls", str(round)), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        os.write(fd, b"python")
        os.close(fd)
        return {"by": "python", "round": round}

    open(os.path.join(work, "ready.python"), "w").close()
    while not os.path.exists(os.path.join(work, "go")):
        time.sleep(0.001)
    won = 0
    with warden.context(agent="python-agent", user="ada"):
        for round in range(rounds):
            try:
                run(round)
                won += 1
            except warden.Duplicate:
                pass
    w.close()
    print(f"python won {won}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
