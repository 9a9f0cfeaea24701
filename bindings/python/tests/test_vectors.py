"""canonical() and action_hash() agree byte for byte with ctrlrun 0.12.2's own outputs."""

from __future__ import annotations

import json
from typing import Any

import pytest

import warden

from conftest import VECTORS


def _rows(name: str, count: int = 20) -> list[dict[str, Any]]:
    path = VECTORS / name
    if not path.is_file():
        pytest.skip(f"{path} is missing")
    return json.loads(path.read_text(encoding="utf-8"))[:count]


@pytest.mark.parametrize("row", _rows("actions.json"), ids=lambda row: row["action_hash"][7:19])
def test_action_rows(row: dict[str, Any]) -> None:
    arguments = json.loads(row["arguments_json"])
    principal = row["principal"]
    document = {
        "arguments": arguments,
        "environment": row["environment"],
        "name": row["name"],
        "principal": principal,
        "resource": row["resource"],
        "schema": "ctrlrun.action/v1",
    }
    assert warden.canonical(document) == row["canonical"]
    assert (
        warden.action_hash(
            row["name"],
            arguments,
            principal["agent"],
            principal.get("user"),
            resource=row["resource"],
            environment=row["environment"],
        )
        == row["action_hash"]
    )


@pytest.mark.parametrize("row", _rows("canonical.json"), ids=lambda row: str(len(row["input"])))
def test_canonical_rows(row: dict[str, Any]) -> None:
    value = json.loads(row["input"])
    if "error" in row:
        with pytest.raises(warden.InvalidInput):
            warden.canonical(value)
    else:
        assert warden.canonical(value) == row["canonical"]


def test_canonical_refuses_floats_and_nan() -> None:
    with pytest.raises(warden.InvalidInput, match="float"):
        warden.canonical({"a": [1, 2.0]})
    with pytest.raises(warden.InvalidInput):
        warden.canonical({"a": float("nan")})
