"""`w.proof_inclusion`, `w.proof_consistency` and `w.checkpoints` (through `warden_proof_inclusion`,
`warden_proof_consistency`, `warden_checkpoints`): the documents `warden proof ... --json` and
`warden checkpoints --json` print, proofs that the pure-Python verifier's own Merkle code
(`warden.evidence`) checks against the roots the signed notes state, and each refusal as the
package's error type with the library's message.

Checkpoints are signed outside the C ABI (no key crosses it), so the store's checkpoints are made
with the `warden` CLI: `$WARDEN_CLI`, else the one built beside the library under test, else
`target/{release,debug}/warden`. Without one these tests are skipped
(`cargo build --release --bin warden` builds it; `run-tests.sh` does).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import warden
from warden import evidence

from conftest import REPO

UNKNOWN = "rct_00000000000000000000000000000000"


def _find_cli() -> Path | None:
    """A built `warden` CLI that knows `proof`, preferring the one built with the library."""
    candidates = [Path(os.environ["WARDEN_CLI"])] if os.environ.get("WARDEN_CLI") else []
    if os.environ.get("WARDEN_BUILT_LIB"):
        candidates.append(Path(os.environ["WARDEN_BUILT_LIB"]).parent / "warden")
    target = Path(os.environ.get("CARGO_TARGET_DIR") or REPO / "target")
    candidates += [target / "release" / "warden", target / "debug" / "warden"]
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            probe = subprocess.run([str(path), "proof", "--help"], capture_output=True, text=True)
            if probe.returncode == 0:
                return path
    return None


CLI = _find_cli()
needs_cli = pytest.mark.skipif(CLI is None, reason="no built warden CLI (cargo build --release --bin warden)")


def _cli(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert CLI is not None
    env = {key: value for key, value in os.environ.items() if not key.startswith("WARDEN_")}
    return subprocess.run(
        [str(CLI), "--store", str(store), *args], capture_output=True, text=True, env=env, timeout=120
    )


def _cli_json(store: Path, *args: str) -> Any:
    run = _cli(store, "--json", *args)
    assert run.returncode == 0, f"warden {' '.join(args)} exited {run.returncode}: {run.stdout}{run.stderr}"
    return json.loads(run.stdout)


def _hash(text: str) -> bytes:
    raw = base64.b64decode(text, validate=True)
    assert len(raw) == 32, text
    return raw


def _mth(leaves: list[bytes]) -> bytes:
    """RFC 9162 §2.1.1's Merkle tree hash of leaf hashes, written out directly."""
    if not leaves:
        return hashlib.sha256(b"").digest()
    if len(leaves) == 1:
        return leaves[0]
    split = 1
    while split * 2 < len(leaves):
        split *= 2
    return evidence.node_hash(_mth(leaves[:split]), _mth(leaves[split:]))


@dataclass
class Log:
    """A store with checkpoint 1 at 5 receipts, checkpoints 2 and 3 both at 8, and a ninth
    receipt no checkpoint covers yet."""

    w: warden.Warden
    store: Path
    verifier: evidence.NoteVerifier
    receipts: list[dict[str, Any]]

    def leaf(self, seq: int) -> bytes:
        """The leaf hash of receipt `seq`, from its document as listed: the record without the
        two members the store keeps beside it, in canonical form; its SHA-256 is the receipt's
        own `hash`, so these are the bytes the chain covers."""
        record = {k: v for k, v in self.receipts[seq - 1].items() if k not in ("hash", "executor_result")}
        document = warden.canonical(record).encode("utf-8")
        assert "sha256:" + hashlib.sha256(document).hexdigest() == self.receipts[seq - 1]["hash"]
        return evidence.leaf_hash(document)

    def signed(self, number: int) -> evidence.CheckpointBody:
        """What checkpoint `number`'s note states, opened with the key that signed the log."""
        listed = self.w.checkpoints(from_number=number, limit=1)
        assert [cp["number"] for cp in listed] == [number]
        return evidence.parse_checkpoint(evidence.open_note(listed[0]["note"].encode("utf-8"), [self.verifier]))


def _refunds(w: warden.Warden, first: int, last: int) -> None:
    with warden.context(agent="support-agent", user="ada"):
        for n in range(first, last + 1):
            with w.propose("stripe.refund", {"payment_id": f"pay_pr{n}", "amount": 100}) as permit:
                permit.commit({"id": f"re_{n}"})


def _checkpoint(store: Path, key: Path, *more: str) -> dict[str, Any]:
    return dict(_cli_json(store, "checkpoint", "--key", str(key), *more))


@pytest.fixture()
def log(w: warden.Warden, store: Path, tmp_path: Path) -> Iterator[Log]:
    key = tmp_path / "log.key"
    made = _cli_json(store, "keygen", "--out", str(key), "--name", "warden.test")
    verifier = evidence.NoteVerifier.parse(made["verifier_key"])
    _refunds(w, 1, 5)
    assert _checkpoint(store, key, "--origin", "warden.test/python")["size"] == 5
    _refunds(w, 6, 8)
    assert _checkpoint(store, key)["number"] == 2
    assert _checkpoint(store, key)["size"] == 8
    _refunds(w, 9, 9)
    yield Log(w, store, verifier, w.receipts(limit=0))


@needs_cli
def test_an_inclusion_proof_verifies_against_the_signed_root_with_the_pure_python_merkle_code(log: Log) -> None:
    # (receipt seq, checkpoint asked (None: the last), checkpoint answered, tree size)
    for seq, asked, answered, size in [(1, None, 3, 8), (5, 1, 1, 5), (5, 2, 2, 8), (8, None, 3, 8), (6, 3, 3, 8)]:
        receipt_id = log.receipts[seq - 1]["receipt_id"]
        got = log.w.proof_inclusion(receipt_id, checkpoint=asked)
        assert (got["receipt_id"], got["seq"], got["leaf_index"]) == (receipt_id, seq, seq - 1)
        assert (got["checkpoint"], got["tree_size"]) == (answered, size)
        proof = [_hash(h) for h in got["proof"]]
        assert got["proof_bytes"] == 32 * len(proof)
        leaf = log.leaf(seq)
        assert _hash(got["leaf_hash"]) == leaf, "the leaf is the receipt's document"
        body = log.signed(answered)
        assert (body.size, body.root) == (size, _hash(got["root"])), "the size and root the note signs"
        assert body.root == _mth([log.leaf(n) for n in range(1, size + 1)]), "the root of the receipts themselves"
        assert evidence.check_inclusion(proof, size, body.root, seq - 1, leaf)
        for at in range(len(proof)):
            flipped = list(proof)
            flipped[at] = bytes([flipped[at][0] ^ 1]) + flipped[at][1:]
            assert not evidence.check_inclusion(flipped, size, body.root, seq - 1, leaf), f"hash {at} flipped"
        assert not evidence.check_inclusion(proof, size, body.root, seq % size, leaf), "no other place"


@needs_cli
def test_a_consistency_proof_links_the_signed_roots_with_the_pure_python_merkle_code(log: Log) -> None:
    for old, new, empty in [(1, 2, False), (1, 3, False), (2, 3, True), (3, 3, True), (1, 1, True)]:
        got = log.w.proof_consistency(old, new)
        a, b = log.signed(old), log.signed(new)
        assert (got["old_checkpoint"], got["new_checkpoint"]) == (old, new)
        assert (got["old_size"], got["new_size"]) == (a.size, b.size)
        assert (_hash(got["old_root"]), _hash(got["new_root"])) == (a.root, b.root)
        proof = [_hash(h) for h in got["proof"]]
        assert (len(proof) == 0) == empty, got
        assert evidence.check_consistency(proof, a.size, a.root, b.size, b.root), f"{old} -> {new}"
        for at in range(len(proof)):
            flipped = list(proof)
            flipped[at] = flipped[at][:31] + bytes([flipped[at][31] ^ 0x80])
            assert not evidence.check_consistency(flipped, a.size, a.root, b.size, b.root), f"hash {at} flipped"


@needs_cli
def test_the_documents_are_the_ones_the_cli_prints(log: Log) -> None:
    receipt_id = log.receipts[2]["receipt_id"]
    assert log.w.proof_inclusion(receipt_id) == _cli_json(log.store, "proof", "inclusion", receipt_id)
    assert log.w.proof_inclusion(receipt_id, checkpoint=1) == _cli_json(
        log.store, "proof", "inclusion", receipt_id, "--checkpoint", "1"
    )
    assert log.w.proof_consistency(1, 3) == _cli_json(log.store, "proof", "consistency", "1", "3")
    assert {"checkpoints": log.w.checkpoints()} == _cli_json(log.store, "checkpoints")


@needs_cli
def test_checkpoints_are_listed_from_a_number_up_to_a_limit_each_note_signed(log: Log) -> None:
    for from_number, limit, numbers in [
        (None, None, [1, 2, 3]),
        (0, 0, [1, 2, 3]),
        (2, None, [2, 3]),
        (1, 2, [1, 2]),
        (3, 5, [3]),
        (4, None, []),
        (2**64 - 1, 1, []),
    ]:
        listed = log.w.checkpoints(from_number=from_number, limit=limit)
        assert [cp["number"] for cp in listed] == numbers, (from_number, limit)
    for cp in log.w.checkpoints():
        assert set(cp) == {"number", "origin", "size", "root", "time", "verifier_key", "note"}
        assert (cp["origin"], cp["verifier_key"]) == ("warden.test/python", log.verifier.encoded())
        body = evidence.parse_checkpoint(evidence.open_note(cp["note"].encode("utf-8"), [log.verifier]))
        assert (body.origin, body.size, body.root, body.time) == (cp["origin"], cp["size"], _hash(cp["root"]), cp["time"])
        assert "PRIVATE+KEY" not in json.dumps(cp), "no signing key is stored or returned"


@needs_cli
def test_each_refusal_raises_the_packages_error_with_the_librarys_message(log: Log) -> None:
    covered, uncovered = log.receipts[0]["receipt_id"], log.receipts[8]["receipt_id"]
    cases: list[tuple[str, Any, type[warden.WardenError], str]] = [
        ("unknown receipt", lambda: log.w.proof_inclusion(UNKNOWN), warden.NotFound, f"no receipt {UNKNOWN} is on the chain"),
        (
            "unknown checkpoint",
            lambda: log.w.proof_inclusion(covered, checkpoint=7),
            warden.NotFound,
            "there is no checkpoint 7; `warden checkpoints` lists them",
        ),
        (
            "a receipt after the last checkpoint",
            lambda: log.w.proof_inclusion(uncovered),
            warden.NotFound,
            "came after checkpoint 3 (8 receipts); name a later checkpoint, or make one",
        ),
        (
            "a receipt after the named checkpoint",
            lambda: log.w.proof_inclusion(log.receipts[6]["receipt_id"], checkpoint=1),
            warden.NotFound,
            "came after checkpoint 1 (5 receipts)",
        ),
        (
            "A after B",
            lambda: log.w.proof_consistency(2, 1),
            warden.InvalidInput,
            "checkpoint 2 covers 8 receipts, more than checkpoint 1 (5); name the older one first",
        ),
        ("unknown newer checkpoint", lambda: log.w.proof_consistency(1, 9), warden.NotFound, "there is no checkpoint 9"),
        ("a checkpoint numbered 0", lambda: log.w.proof_consistency(0, 2), warden.InvalidInput, "old_checkpoint is 0"),
    ]
    for what, call, error, words in cases:
        with pytest.raises(error) as raised:
            call()
        assert words in raised.value.message, f"{what}: {raised.value.message!r}"
        assert raised.value.code == error.default_code, what
    # Refused here, before any call: what cannot cross as a number or as text.
    for call in (
        lambda: log.w.proof_inclusion(covered, checkpoint=-1),
        lambda: log.w.proof_inclusion(123),  # type: ignore[arg-type]
        lambda: log.w.proof_consistency(1, 2**64),
        lambda: log.w.checkpoints(limit=True),
    ):
        with pytest.raises(warden.InvalidInput):
            call()
    assert log.w.proof_inclusion(covered)["checkpoint"] == 3, "the refusals changed nothing"


def test_a_store_with_no_checkpoint_says_how_to_make_one(w: warden.Warden) -> None:
    _refunds(w, 1, 1)
    receipt_id = w.receipts()[0]["receipt_id"]
    with pytest.raises(warden.NotFound) as raised:
        w.proof_inclusion(receipt_id)
    assert raised.value.message == "the store has no checkpoint yet; make one with `warden checkpoint --key FILE`"
    with pytest.raises(warden.NotFound):
        w.proof_consistency(1, 1)
    assert w.checkpoints() == []


def test_a_closed_warden_refuses_the_proof_calls(store: Path, config: Path) -> None:
    handle = warden.Warden(store=store, config=config)
    handle.close()
    for call in (lambda: handle.proof_inclusion(UNKNOWN), lambda: handle.proof_consistency(1, 2), handle.checkpoints):
        with pytest.raises(warden.InvalidInput, match="closed"):
            call()
