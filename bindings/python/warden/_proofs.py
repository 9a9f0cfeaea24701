"""Proofs: a receipt's inclusion in a signed checkpoint, one checkpoint's consistency with a
later one, and the checkpoints themselves, as the documents `warden proof inclusion|consistency
--json` and `warden checkpoints --json` print (`warden_proof_inclusion`,
`warden_proof_consistency`, `warden_checkpoints`).

The library computes each proof and checks it against the checkpoint's stored root before it
returns it; this module only passes the numbers across and parses the JSON. Making a checkpoint
needs a signing key and stays with `warden checkpoint --key FILE` (or the Rust library): no key
crosses the C ABI. `warden.evidence` checks the returned proofs with nothing but the standard
library (`check_inclusion`, `check_consistency`, `leaf_hash`).
"""

from __future__ import annotations

from typing import Any

from ._convert import _count, _count_or_default, _record, _records, _text_arg
from ._managed import Managed


class Proofs(Managed):
    """`Warden`'s proof calls."""

    def proof_inclusion(self, receipt_id: str, checkpoint: int | None = None) -> dict[str, Any]:
        """The audit path (RFC 9162) of receipt `receipt_id` (`rct_…`) in checkpoint number
        `checkpoint` (`None` or 0: the last one): `{"receipt_id", "seq", "leaf_index",
        "leaf_hash", "checkpoint", "tree_size", "root", "proof": [base64 SHA-256…],
        "proof_bytes"}`. The leaf hash is SHA-256(0x00 ‖ the receipt's document); the root is
        base64, as the checkpoint's signed note spells it.

        Raises `NotFound` for a receipt not on the chain, a checkpoint of no such number, a
        store with no checkpoint yet, or a receipt that came after the checkpoint; `StoreFault`
        when the computed proof does not verify against the stored root (run `warden doctor`).
        """
        number = 0 if checkpoint is None else _count(checkpoint, "proof_inclusion(checkpoint=...)")
        return _record(
            self._call_out("warden_proof_inclusion", *_text_arg(receipt_id, "the receipt id"), number)
        )

    def proof_consistency(self, old: int, new: int) -> dict[str, Any]:
        """The consistency proof (RFC 9162) from checkpoint number `old` to checkpoint number
        `new`, the older first: `{"old_checkpoint", "new_checkpoint", "old_size", "new_size",
        "old_root", "new_root", "proof": [base64 SHA-256…]}`; an empty proof when both trees
        have one size.

        Raises `NotFound` for a checkpoint of no such number; `InvalidInput` for a number of 0
        or a first checkpoint covering more receipts than the second; `StoreFault` when the two are not consistent (the
        log was forked or altered: run `warden doctor`).
        """
        first = _count(old, "proof_consistency(old)")
        second = _count(new, "proof_consistency(new)")
        return _record(self._call_out("warden_proof_consistency", first, second))

    def checkpoints(self, from_number: int | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        """The signed checkpoints numbered `from_number` on (`None`, 0 or 1: from the first), in
        number order, at most `limit` (default: the library's `list_limit`; 0: all):
        `[{"number", "origin", "size", "root", "time", "verifier_key", "note"}]`, each as
        `warden checkpoints --json` lists it (`note` is the signed note exactly as signed).
        `[]` when there is none yet."""
        first = 0 if from_number is None else _count(from_number, "checkpoints(from_number=...)")
        count = _count_or_default(limit, "list_limit", "checkpoints(limit=...)")
        return _records(self._call_out("warden_checkpoints", first, count))
