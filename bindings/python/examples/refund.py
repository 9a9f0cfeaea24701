"""The refund story, in process: what Warden does for an agent that refunds payments.

    python bindings/python/examples/refund.py [--dir DIR]

1. An allowed refund runs once; the agent's retry is refused as a duplicate.
2. A large refund needs a human: ApprovalRequired, ops approves, the agent presents it.
3. The provider refunds but the reply is lost: AMBIGUOUS, and the retry is refused, so the
   customer is not refunded twice (remote calls: 1).

The payment provider is a fake that counts its calls; everything else is the real library.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

import warden

DOCUMENT = """\
schema: warden/v1
version: "refund-example"
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


class FakeStripe:
    """Stands in for the payment provider: counts refunds, and can lose one reply."""

    def __init__(self) -> None:
        self.refunds: list[tuple[str, int, str]] = []
        self.lose_next_reply = False

    def refund(self, payment_id: str, amount: int, idempotency_key: str) -> dict[str, Any]:
        self.refunds.append((payment_id, amount, idempotency_key))
        refund_id = f"re_{len(self.refunds)}"
        if self.lose_next_reply:
            self.lose_next_reply = False
            raise TimeoutError(f"the refund {refund_id} went through but its reply was lost")
        return {"id": refund_id, "amount": amount}

    def calls_for(self, payment_id: str) -> int:
        return sum(1 for refunded, _, _ in self.refunds if refunded == payment_id)


def say(text: str) -> None:
    print(text, flush=True)


def story(directory: Path) -> None:
    config = directory / "warden.yaml"
    config.write_text(DOCUMENT, encoding="utf-8")
    store = directory / "state.redb"
    stripe = FakeStripe()

    with warden.Warden(store=store, config=config) as w:

        @w.protect("stripe.refund")
        def refund(payment_id: str, amount: int) -> dict[str, Any]:
            return stripe.refund(payment_id, amount, idempotency_key=warden.idempotency_token())

        with warden.context(agent="support-agent", user="ada"):
            say("1. an allowed refund runs once")
            result = refund("pay_1001", 1200)
            say(f"   refund(pay_1001, 1200)          -> refunded {result['id']}")
            try:
                refund("pay_1001", 1200)
            except warden.Duplicate as exc:
                say(f"   retry refund(pay_1001, 1200)    -> refused: {exc.code} (state {exc.state})")
            say(f"   provider calls for pay_1001: {stripe.calls_for('pay_1001')}")

            say("2. a large refund waits for a human")
            try:
                refund("pay_2002", 120_000)
            except warden.ApprovalRequired as exc:
                request_id = exc.request_id
                say(f"   refund(pay_2002, 120000)        -> refused: {exc.code}")
                say(f"   approval request {request_id}, pending until {exc.expires_at}")
            assert request_id is not None
            try:
                w.approve(request_id, by="ada")
            except warden.ApprovalMismatch as exc:
                say(f"   ada approves her own request    -> refused: {exc.code} ({exc.reason})")
            granted = w.approve(request_id, by="ops:bob")
            say(f"   ops:bob approves                -> {granted['status']}")
            with warden.with_approval(request_id):
                result = refund("pay_2002", 120_000)
            say(f"   refund with the approval        -> refunded {result['id']}")

            say("3. the provider refunds, but the reply is lost")
            stripe.lose_next_reply = True
            try:
                refund("pay_3003", 4500)
            except TimeoutError as exc:
                say(f"   refund(pay_3003, 4500)          -> TimeoutError: {exc}")
            effect = w.effect("refund:pay_3003")
            assert effect is not None
            say(f"   effect refund:pay_3003 is {effect['state'].upper()}")
            try:
                refund("pay_3003", 4500)
            except warden.Ambiguous as exc:
                say(f"   retry refund(pay_3003, 4500)    -> refused: {exc.code}")
            say(f"   provider calls for pay_3003: {stripe.calls_for('pay_3003')} (the customer was refunded once)")

        resolved = w.resolve("refund:pay_3003", "committed", by="ops:carol")
        say(f"   ops:carol resolves it           -> {resolved['state'].upper()}")

        report = w.verify_chain()
        receipts = w.receipts(limit=0)
        say("")
        say(f"provider refunds: {len(stripe.refunds)}; receipts: {len(receipts)}; "
            f"chain {'verified' if report['ok'] else 'BROKEN'} ({report['verified']} receipts)")
        say(f"store: {store}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, help="where to keep the store and document (default: a temp dir)")
    options = parser.parse_args()
    if options.dir is not None:
        options.dir.mkdir(parents=True, exist_ok=True)
        story(options.dir)
    else:
        story(Path(tempfile.mkdtemp(prefix="warden-refund-")))


if __name__ == "__main__":
    main()
