"""The shared float vectors (tests/vectors/warden/floats.json) through the binding: Python's own
floats, written by `json.dumps`, reach the library intact and get the canonical arguments, action
hash, effect key and decision the Rust and Node suites check against the same file."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest

import warden

from conftest import REPO

FLOATS = REPO / "tests" / "vectors" / "warden" / "floats.json"


def _file() -> dict[str, Any]:
    if not FLOATS.is_file():
        pytest.skip(f"{FLOATS} is missing")
    return json.loads(FLOATS.read_text(encoding="utf-8"))


def _sent(case: dict[str, Any]) -> dict[str, Any]:
    """The arguments as a Python host has them: parsed from the case's text, or a double built
    from its IEEE-754 bits."""
    if "arguments_json" in case:
        return json.loads(case["arguments_json"])
    (double,) = struct.unpack(">d", bytes.fromhex(case["ieee"]))
    return {"case": case["name"], "a": double}


@pytest.fixture()
def vectors(tmp_path: Path) -> Any:
    file = _file()
    config = tmp_path / "floats.yaml"
    config.write_text(file["policy_yaml"], encoding="utf-8")
    principal = file["principal"]
    with warden.Warden(store=tmp_path / "state.redb", config=config) as handle:
        with warden.context(agent=principal["agent"], user=principal["user"]):
            yield file, handle


def test_every_float_case_is_decided_hashed_and_keyed_as_the_vectors_say(vectors: Any) -> None:
    file, w = vectors
    cases = file["cases"]
    assert len(cases) >= 40
    checked = {"allow": 0, "deny": 0}
    for case in cases:
        sent = _sent(case)
        expected_arguments = json.loads(case["canonical_arguments"])
        if case["decision"] == "allow":
            permit = w.propose(file["action"], sent)
            assert (permit.action_hash, permit.effect_key) == (case["action_hash"], case["effect_key"]), case["name"]
            assert permit.decision == "allow", case["name"]
            assert permit.arguments == expected_arguments, case["name"]
            permit.commit(None)
        else:
            with pytest.raises(warden.Denied) as denied:
                w.propose(file["action"], sent)
            assert denied.value.reason == case["reason"], case["name"]
        receipt = w.receipts(limit=0)[-1]
        assert receipt["action_hash"] == case["action_hash"], case["name"]
        assert receipt["arguments"] == expected_arguments, case["name"]
        assert receipt["decision_reason"] == case["reason"], case["name"]
        checked[case["decision"]] += 1
    assert checked["allow"] > 0 and checked["deny"] > 0, checked
    assert w.verify_chain()["ok"]


def test_a_float_the_library_holds_as_an_integer_reaches_the_executor_as_one(vectors: Any) -> None:
    file, w = vectors
    permit = w.propose(file["action"], {"case": "executor", "a": 1.0, "b": 2.5})
    # 1.0 is the number 1 (RFC 8785 writes it `1`), 2.5 stays a float.
    assert permit.arguments == {"case": "executor", "a": 1, "b": 2.5}
    assert type(permit.arguments["a"]) is int and type(permit.arguments["b"]) is float
    assert permit.effect_key == "sum:executor:1"
    permit.commit(None)


def test_a_number_with_no_canonical_form_is_refused(vectors: Any) -> None:
    file, w = vectors
    for case in file["refused"]:
        with pytest.raises(warden.InvalidInput):
            w.propose(file["action"], json.loads(case["arguments_json"]))
    for value in (float("nan"), float("inf"), float("-inf")):
        with pytest.raises(warden.InvalidInput):
            w.propose(file["action"], {"case": "nan", "a": value})


def test_the_pure_functions_know_no_document_and_keep_ctrlrun_s_refusal() -> None:
    with pytest.raises(warden.InvalidInput, match="float"):
        warden.action_hash("get-sum", {"a": 1.5}, "vector-agent")
    with pytest.raises(warden.InvalidInput, match="float"):
        warden.canonical({"a": 1.5})
