"""Shared fixtures: a small warden/v1 document and a fresh store per test."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

import warden

REPO = Path(os.environ.get("WARDEN_REPO") or Path(__file__).resolve().parents[3])
VECTORS = REPO / "tests" / "vectors" / "ctrlrun-0.12.2"

DOCUMENT = """\
schema: warden/v1
version: "python-tests"
environment: production
mode: enforce
actions:
  customer.read:
    description: "Look up a customer record"
    decision: allow
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
  email.send:
    description: "Send one transactional email"
    effect: "email:{message_id}"
    decision: allow
  ledger.credit:
    description: "Credit a ledger entry; units may exceed 64 bits"
    effect: "credit:{entry}"
    decision: allow
"""


@pytest.fixture()
def config(tmp_path: Path) -> Path:
    path = tmp_path / "warden.yaml"
    path.write_text(DOCUMENT, encoding="utf-8")
    return path


@pytest.fixture()
def store(tmp_path: Path) -> Path:
    return tmp_path / "state.redb"


@pytest.fixture()
def w(store: Path, config: Path) -> Iterator[warden.Warden]:
    with warden.Warden(store=store, config=config) as handle:
        yield handle


@pytest.fixture()
def agent() -> Iterator[warden.Principal]:
    """The principal most tests act as."""
    with warden.context(agent="support-agent", user="ada") as principal:
        yield principal
