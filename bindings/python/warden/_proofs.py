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

import atexit
import base64
import ctypes
import json
import logging
import weakref
from collections.abc import Callable, Mapping
from typing import Any

from . import _ffi
from ._convert import _count, _count_or_default, _record, _records, _text_arg
from ._errors import InvalidInput
from ._managed import Managed

_LOG = logging.getLogger("warden")

#: A host anchor: called with one signed checkpoint `{"number", "size", "origin", "note"}`;
#: returns `None` (taken, nothing to keep) or `{"kind": str, "receipt": bytes,
#: "description": str}` to keep beside the checkpoint; raises to fail (retried later).
Anchor = Callable[[dict[str, Any]], "Mapping[str, Any] | None"]


def _anchor_answer(kept: Mapping[str, Any]) -> bytes:
    """`warden_anchor_put`'s JSON for what an anchor returned to keep."""
    if not isinstance(kept, Mapping):
        raise InvalidInput(f"an anchor returns None or a mapping with kind and receipt, not {type(kept).__name__}")
    receipt = kept.get("receipt")
    if not isinstance(receipt, (bytes, bytearray, memoryview)):
        raise InvalidInput("an anchor's receipt is bytes")
    answer = {
        "kind": kept.get("kind"),
        "receipt": base64.b64encode(bytes(receipt)).decode("ascii"),
        "description": kept.get("description") or "",
    }
    return json.dumps(answer).encode("utf-8")


def _anchor_callback(lib: _ffi.Library, name: str, anchor: Anchor) -> Any:
    """A `warden_anchor_fn` calling `anchor(checkpoint)`. An exception, or an answer the
    library refuses, is a failure whose message is kept for `warden doctor`."""

    def callback(user_data: int | None, checkpoint: int | None, checkpoint_len: int, sink: int | None) -> int:
        put = lib.fn("warden_anchor_put")
        try:
            signed = json.loads(ctypes.string_at(checkpoint, checkpoint_len)) if checkpoint else {}
            kept = anchor(signed)
            if kept is None:
                return 0
            answer = _anchor_answer(kept)
            if put(sink, answer, len(answer)) != 0:
                raise InvalidInput("the library refused the anchor's answer: kind is 1 to 64 printable ASCII characters, receipt at most 64 KiB")
            return 0
        except BaseException as exc:  # noqa: BLE001 - nothing may unwind into C
            _LOG.warning("warden: the anchor %r failed; it is retried: %s", name, exc)
            try:
                failure = json.dumps({"error": f"{type(exc).__name__}: {exc}"}).encode("utf-8")
                put(sink, failure, len(failure))
            except BaseException:  # noqa: BLE001 - the failure is reported by the return value
                pass
            return 1

    return _ffi.ANCHOR_FN(callback)


_ANCHORED: "weakref.WeakSet[Proofs]" = weakref.WeakSet()


@atexit.register
def _close_anchored_at_exit() -> None:
    """No checkpoint thread may call an anchor in an interpreter that is shutting down: close
    the handles that have one (closing waits for a call in progress)."""
    for w in list(_ANCHORED):
        try:
            w.close()
        except Exception:  # noqa: BLE001 - best effort at exit
            pass


class Proofs(Managed):
    """`Warden`'s proof and anchor calls."""

    _anchors: list[Any]

    def add_anchor(self, name: str, anchor: Anchor) -> None:
        """Send every checkpoint this handle's automatic-checkpoint thread signs to
        `anchor(checkpoint)` too, after the document's `evidence.anchors`, under the sink name
        `host NAME` (`warden doctor` reports it; `warden export` carries what it returned).
        `checkpoint` is `{"number", "size", "origin", "note"}`, `note` the signed note exactly as
        signed. Return `None` when it was taken with nothing to keep, or `{"kind": str,
        "receipt": bytes, "description": str}` to keep a receipt (a cosignature, a log entry)
        beside it. An exception is a failure: logged, kept with its message (never put a
        secret in it) and retried after a delay that doubles from 2 s to 5 minutes. It never
        fails an action.

        It runs on the library's checkpoint thread, one call at a time. `name` is 1 to 64 of
        `A-Z a-z 0-9 . _ : / -`, new on this handle; an anchor stays until the handle closes.
        Raises `ConfigError` when the document has no `evidence` section (the handle makes no
        checkpoints), `InvalidInput` for a bad or repeated name or a non-callable `anchor`.
        """
        if not callable(anchor):
            raise InvalidInput(f"add_anchor() needs a callable, not {anchor!r}")
        callback = _anchor_callback(self._lib, name, anchor)
        self._call("warden_anchor_add", *_text_arg(name, "the anchor's name"), callback, None)
        # The library calls it until the handle closes: keep it alive as long.
        if not hasattr(self, "_anchors"):
            self._anchors = []
        self._anchors.append(callback)
        _ANCHORED.add(self)

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
