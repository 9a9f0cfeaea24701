"""Pure functions of the library: canonical JSON and the action hash, with no store."""

from __future__ import annotations

from typing import Any

from . import _ffi
from ._convert import _json_arg

__all__ = ["canonical", "action_hash"]


def canonical(value: Any) -> str:
    """The canonical JSON text of `value` (sorted keys, exact integers; floats are refused)."""
    data = _ffi.library().call_out("warden_canonical", *_json_arg(value, "canonical(value)"))
    return data.decode("utf-8")


def action_hash(
    name: str,
    arguments: dict[str, Any],
    agent: str,
    user: str | None = None,
    resource: str | None = None,
    environment: str | None = None,
) -> str:
    """The action hash (`sha256:…`) the kernel computes for this action (`environment`
    absent: the library's default)."""
    action: dict[str, Any] = {
        "name": name,
        "arguments": arguments,
        "principal": {"agent": agent, "user": user},
        "resource": resource,
    }
    if environment is not None:
        action["environment"] = environment
    data = _ffi.library().call_out("warden_action_hash", *_json_arg(action, "the action"))
    return data.decode("utf-8")
