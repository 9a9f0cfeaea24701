"""`w.add_anchor(name, anchor)` (through `warden_anchor_add` / `warden_anchor_put`): a Python
function receives each checkpoint the handle's automatic-checkpoint thread signs, what it
returns is kept beside the checkpoint and exported in the bundle, and what it raises is kept as a
failure and retried — never failing an action.

The signing key is written with the `warden` CLI (`warden keygen`), which also reads the store
back (`doctor --json`, `export`); without one these tests are skipped.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import warden

from conftest import DOCUMENT
from test_proofs import _cli, _cli_json, _refunds, needs_cli


def _eventually(what: str, check: Any, timeout: float = 60.0) -> None:
    """Wait (generously: this is no timing test) until `check()` holds."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.05)


@pytest.fixture()
def evidence_config(tmp_path: Path, store: Path) -> Path:
    key = tmp_path / "evidence.key"
    _cli_json(store, "keygen", "--out", str(key), "--name", "warden.test")
    path = tmp_path / "evidence.yaml"
    path.write_text(
        DOCUMENT + f"evidence:\n  key_file: {key}\n  origin: warden.test/python-anchors\n"
        "  every_receipts: 1\n  every: PT1S\n",
        encoding="utf-8",
    )
    return path


@needs_cli
def test_a_python_anchor_gets_each_checkpoint_and_what_it_returns_is_exported(
    store: Path, evidence_config: Path, tmp_path: Path
) -> None:
    seen: list[dict[str, Any]] = []
    lock = threading.Lock()

    def witness(checkpoint: dict[str, Any]) -> dict[str, Any]:
        with lock:
            seen.append(checkpoint)
        return {"kind": "cosignature", "receipt": b"\x00sig-" + str(checkpoint["number"]).encode(), "description": "ok"}

    failures = {"left": 1}

    def flaky(checkpoint: dict[str, Any]) -> None:
        if failures["left"]:
            failures["left"] -= 1
            raise RuntimeError("the witness is down")
        return None

    with warden.Warden(store=store, config=evidence_config) as w:
        w.add_anchor("witness.example/log", witness)
        w.add_anchor("flaky", flaky)
        _refunds(w, 1, 2)
        _eventually("the witness got a checkpoint", lambda: bool(seen))
        first = seen[0]
        assert set(first) == {"number", "size", "origin", "note"}
        assert first["origin"] == "warden.test/python-anchors"
        assert first["note"].startswith("warden.test/python-anchors\n")
        listed = {cp["number"]: cp for cp in w.checkpoints(limit=0)}
        assert listed[first["number"]]["note"] == first["note"], "the note exactly as signed"
        # The flaky one failed once: 2 s later it is retried and taken.
        _eventually("the flaky anchor retried", lambda: failures["left"] == 0, timeout=30)
        report = _cli_json(store, "doctor")
        sinks = {row["sink"]: row for row in report["anchors"]}
        assert set(sinks) >= {"host witness.example/log", "host flaky"}, report["anchors"]
        _eventually(
            "the flaky anchor taken",
            lambda: next(r for r in _cli_json(store, "doctor")["anchors"] if r["sink"] == "host flaky")["last_anchored"]
            is not None,
            timeout=30,
        )

    bundle = tmp_path / "bundle"
    run = _cli(store, "export", "--out", str(bundle))
    assert run.returncode == 0, run.stderr
    lines = [json.loads(line) for line in (bundle / "anchors.jsonl").read_text().splitlines()]
    kept = [line for line in lines if line["sink"] == "host witness.example/log"]
    assert kept, lines
    for line in kept:
        assert line["kind"] == "cosignature" and line["description"] == "ok"
        assert base64.b64decode(line["receipt"]) == b"\x00sig-" + str(line["checkpoint"]).encode()
    taken = [line for line in lines if line["sink"] == "host flaky"]
    assert taken and all(line["kind"] is None and line["receipt"] is None for line in taken), taken
    verdict = _cli_json(store, "verify-bundle", str(bundle))
    assert verdict["ok"] and verdict["anchors"] == len(lines) and verdict["anchors_checked"] == 0, verdict


@needs_cli
def test_a_failing_anchor_is_kept_with_its_message_and_never_fails_an_action(
    store: Path, evidence_config: Path
) -> None:
    def broken(checkpoint: dict[str, Any]) -> dict[str, Any]:
        raise ValueError("no route to the witness")

    def wrong_shape(checkpoint: dict[str, Any]) -> Any:
        return {"kind": "x", "receipt": "not bytes"}

    with warden.Warden(store=store, config=evidence_config) as w:
        w.add_anchor("broken", broken)
        w.add_anchor("wrong-shape", wrong_shape)
        _refunds(w, 1, 3)
        assert len(w.receipts(limit=0)) >= 3, "every action went through"

        def failing() -> dict[str, Any]:
            rows = {row["sink"]: row for row in _cli_json(store, "doctor")["anchors"]}
            return {sink: row["failing"] for sink, row in rows.items() if row["failing"]}

        _eventually("both failures recorded", lambda: len(failing()) == 2)
        now = failing()
        assert now["host broken"]["code"] == "host_error"
        assert now["host broken"]["message"] == "ValueError: no route to the witness", now
        assert "receipt is bytes" in now["host wrong-shape"]["message"], now


def test_add_anchor_refuses_what_it_cannot_use(w: warden.Warden, store: Path, tmp_path: Path) -> None:
    with pytest.raises(warden.ConfigError, match="makes no checkpoints"):
        w.add_anchor("witness", lambda checkpoint: None)
    with pytest.raises(warden.InvalidInput, match="needs a callable"):
        w.add_anchor("witness", "not a function")  # type: ignore[arg-type]


@needs_cli
def test_an_anchor_name_is_checked_and_used_once(store: Path, evidence_config: Path) -> None:
    with warden.Warden(store=store, config=evidence_config) as w:
        for bad in ["", "two words", "x" * 65, "semi;colon"]:
            with pytest.raises(warden.InvalidInput, match="1 to 64 of"):
                w.add_anchor(bad, lambda checkpoint: None)
        w.add_anchor("x" * 64, lambda checkpoint: None)
        w.add_anchor("once", lambda checkpoint: None)
        with pytest.raises(warden.InvalidInput, match="already sends checkpoints to an anchor named"):
            w.add_anchor("once", lambda checkpoint: None)
