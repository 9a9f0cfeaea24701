"""The agent side of the browser test: a real agent on the Python binding whose refund blocks
on a human, in its own process.

    python agent.py DIR

Writes DIR/warden.yaml and DIR/state.redb, then, printing one line per step:
  - a refund of 120000 is approved by ops:bob (through the library) and runs: the "last
    approved" stripe.refund the console's diff compares with;
  - a refund whose reply is lost: the effect refund:pay_3003 is AMBIGUOUS;
  - READY
  - the blocked call: refund(pay_2002, 400000) needs approval -> PENDING apr_…;
  - it waits for the answer (by the library's clock), and when granted presents the approval
    and the refund runs -> PROCEEDED re_…; when denied or expired -> STOPPED <status>.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import warden

DOCUMENT = """\
schema: warden/v1
version: "console-browser-test"
environment: production
mode: enforce
actions:
  stripe.refund:
    description: "Refund a Stripe payment; amount in cents"
    effect: "refund:{payment_id}"
    max_attempts: 3
    lease: PT5M
    rules:
      - when: { amount_gte: 0, amount_lte: 50000 }
        decision: allow
      - when: { amount_gte: 0, amount_lte: 500000 }
        decision: approve
      - decision: deny
"""


def say(text: str) -> None:
    print(text, flush=True)


def main() -> None:
    directory = Path(sys.argv[1])
    directory.mkdir(parents=True, exist_ok=True)
    config = directory / "warden.yaml"
    config.write_text(DOCUMENT, encoding="utf-8")
    refunds: list[str] = []
    lose_reply = [False]

    with warden.Warden(store=directory / "state.redb", config=config) as w:

        @w.protect("stripe.refund")
        def refund(payment_id: str, amount: int, note: str = "") -> dict[str, Any]:
            refunds.append(payment_id)
            if lose_reply[0]:
                lose_reply[0] = False
                raise TimeoutError("the refund went through but its reply was lost")
            return {"id": f"re_{len(refunds)}", "amount": amount}

        with warden.context(agent="support-agent", user="ada"):
            try:
                refund("pay_1001", 120_000, note="customer asked twice")
            except warden.ApprovalRequired as exc:
                w.approve(exc.request_id, by="ops:bob")
                with warden.with_approval(exc.request_id):
                    refund("pay_1001", 120_000, note="customer asked twice")
            lose_reply[0] = True
            try:
                refund("pay_3003", 4500)
            except TimeoutError:
                pass
            say("READY")
            try:
                refund("pay_2002", 400_000, note="<script>alert('agent text')</script>")
                say("UNEXPECTED ran without approval")
                return
            except warden.ApprovalRequired as exc:
                request_id = exc.request_id
            say(f"PENDING {request_id}")
            record: dict[str, Any] | None = None
            for _ in range(20):
                record = w.wait_for_answer(request_id, timeout=10)
                if record is None or record["status"] != "pending":
                    break
            status = None if record is None else record["status"]
            if status != "granted":
                say(f"STOPPED {status}")
                return
            with warden.with_approval(request_id):
                result = refund("pay_2002", 400_000, note="<script>alert('agent text')</script>")
            say(f"PROCEEDED {result['id']}")


if __name__ == "__main__":
    main()
