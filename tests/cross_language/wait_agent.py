"""The propose-and-wait scenario in Python (the twin of wait_agent.js): a precondition, a
wait of two days judged by the library's clock (moved by libfaketime through CLOCK_FILE, never
slept), a reconcile hook. Prints one JSON transcript; wait.py compares it with Node's.

    wait_agent.py STORE CONFIG CLOCK_FILE
"""

import contextvars
import json
import sys
import threading

import warden

TWO_DAYS = 2 * 24 * 60 * 60


def pause(seconds: float) -> None:
    """A short real pause. Not time.sleep: under libfaketime, Python's absolute
    clock_nanosleep fails with EINVAL."""
    threading.Event().wait(seconds)


def main() -> int:
    store, config, clock_file = sys.argv[1], sys.argv[2], sys.argv[3]
    w = warden.Warden(store=store, config=config)
    transcript: list[dict] = []
    asked: list[str] = []
    balance = {"value": 100}
    ran: list[str] = []

    def ledger(action: dict) -> dict:
        asked.append(action["name"])
        return {"balance": balance["value"]}

    def failing_ledger(action: dict) -> dict:
        raise RuntimeError("the ledger is down")

    def move_clock(offset: str) -> None:
        with open(clock_file, "w") as f:
            f.write(offset)
        pause(0.5)  # lets the waiting call read the store at the new time

    def pending_id() -> str:
        while True:
            for record in w.pending():
                return record["approval_id"]
            pause(0.01)

    def outcome(call, *args) -> dict:
        try:
            return {"returned": call(*args)}
        except warden.WardenError as refusal:
            return {"raised": type(refusal).__name__, "reason": refusal.reason}
        except Exception as error:  # the host's own error, raised unchanged
            return {"raised": "host_error", "message": str(error)}

    def in_background(call, *args):
        box: dict = {}
        context = contextvars.copy_context()  # the principal of warden.context() goes along
        thread = threading.Thread(target=lambda: box.update(context.run(outcome, call, *args)))
        thread.start()
        return thread, box

    @w.protect("report.send", precondition=ledger)
    def report(id: str) -> str:
        ran.append(id)
        return f"sent {id}"

    @w.protect("payout.large", precondition=ledger, wait=TWO_DAYS)
    def payout(id: str) -> str:
        ran.append(id)
        return f"paid {id}"

    @w.protect("payout.large", precondition=failing_ledger, wait=TWO_DAYS)
    def payout_unchecked(id: str) -> str:
        ran.append(id)
        return f"paid {id}"

    state = {"calls": 0}

    def flaky(id: str) -> str:
        state["calls"] += 1
        if state["calls"] == 1:
            raise ConnectionError("the reply was lost")
        ran.append(id)
        return f"posted {id}"

    keys: list[str] = []

    def reconcile(key: str) -> str:
        keys.append(key)
        return "not_executed"

    post = w.protect("ledger.post")(flaky)
    post_reconciling = w.protect("ledger.post", reconcile=reconcile)(flaky)

    with warden.context(agent="payout-agent", user="carol"):
        # 1. An allowed action never asks the precondition.
        transcript.append({"step": "allowed", **outcome(report, "r1"), "asked": len(asked)})

        # 2. A wait of two days: granted ten minutes in, the same call runs, the precondition
        #    asked when the request was made and again before the grant was spent.
        thread, box = in_background(payout, "p1")
        request = pending_id()
        move_clock("+10m")
        w.approve(request, by="ops:bob")
        thread.join()
        transcript.append({"step": "waited_and_granted", **box, "asked": len(asked)})

        # 3. The state changed while waiting: the grant is not spent.
        thread, box = in_background(payout, "p2")
        request = pending_id()
        balance["value"] = 50
        w.approve(request, by="ops:bob")
        thread.join()
        status = (w.approval(request) or {}).get("status")
        transcript.append({"step": "precondition_changed", **box, "approval": status, "asked": len(asked)})

        # 4. Nobody answers: the request's fifteen minutes end the two-day wait.
        thread, box = in_background(payout, "p3")
        request = pending_id()
        move_clock("+30m")
        thread.join()
        transcript.append({"step": "request_expired", **box, "pending": len(w.pending())})

        # 5. A precondition that fails: its own error, nothing requested.
        transcript.append({"step": "precondition_failed", **outcome(payout_unchecked, "p4"), "pending": len(w.pending())})

        # 6. AMBIGUOUS, then the reconcile hook answers not_executed: the proposal runs again.
        transcript.append({"step": "lost_reply", **outcome(post, "l1")})
        transcript.append({"step": "reconciled", **outcome(post_reconciling, "l1"), "asked_about": keys})

    transcript.append({"step": "ran", "ids": ran})
    w.close()
    print(json.dumps(transcript, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
