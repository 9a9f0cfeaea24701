"""Values across the boundary: Python values to the library's JSON and text, its JSON back to
Python values, durations and counts checked, and the library's defaults (read, never restated).
"""

from __future__ import annotations

import asyncio
import functools
import json
import math
from collections.abc import Awaitable, Mapping
from typing import Any, cast

from . import _ffi
from ._context import Principal
from ._errors import InvalidInput

__all__ = ["defaults"]


@functools.cache
def defaults() -> dict[str, Any]:
    """The library's defaults (`warden_defaults`): `environment`, `list_limit`, `from_seq`,
    `after_id`, `limits`, ... The binding reads them here and never restates them."""
    value = _loads(_ffi.library().call_out("warden_defaults"))
    if not isinstance(value, dict):
        raise InvalidInput("warden_defaults returned something other than a JSON object")
    return value


def _count_or_default(value: int | None, default: str, what: str) -> int:
    """`value` checked as a count, or (when `None`) the library's default named `default`."""
    return _count(defaults()[default] if value is None else value, what)


def _dumps(value: Any, what: str) -> bytes:
    """UTF-8 JSON for the library. Python ints of any size are written exactly."""
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidInput(f"{what} cannot be sent to Warden as JSON: {exc}") from exc


def _json_arg(value: Any, what: str) -> tuple[bytes | None, int]:
    """`value` as the `(ptr, len)` of a C JSON parameter."""
    return _ffi.arg(_dumps(value, what))


def _loads(data: bytes) -> Any:
    return json.loads(data) if data else None


def _record(data: bytes) -> dict[str, Any]:
    return cast("dict[str, Any]", _loads(data))


def _maybe_record(data: bytes) -> dict[str, Any] | None:
    return cast("dict[str, Any] | None", _loads(data))


def _records(data: bytes) -> list[dict[str, Any]]:
    return cast("list[dict[str, Any]]", _loads(data) or [])


def _text(value: str, what: str) -> bytes:
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be a str, not {type(value).__name__}")
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInput(f"{what} is not valid Unicode text: {exc}") from exc


def _text_arg(value: str, what: str) -> tuple[bytes | None, int]:
    """`value` as the `(ptr, len)` of a C text parameter."""
    return _ffi.arg(_text(value, what))


def _optional_text_arg(value: str | None, what: str) -> tuple[bytes | None, int]:
    """`_text_arg`, or (NULL, 0) for `None`."""
    return _ffi.arg(None if value is None else _text(value, what))


def _millis(seconds: float, what: str, *, zero: bool = False) -> int:
    """A positive duration (with `zero`, 0 or more) in whole milliseconds, rounded up (so a
    positive one never becomes 0)."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds):
        raise InvalidInput(f"{what} must be a number of seconds, not {seconds!r}")
    if seconds < 0 or (seconds == 0 and not zero):
        raise InvalidInput(f"{what} must be {'0 or more seconds' if zero else 'positive'}, got {seconds!r}")
    return max(0 if zero else 1, math.ceil(seconds * 1000))


def _count(value: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**64:
        raise InvalidInput(f"{what} must be an integer from 0 to 2**64-1, not {value!r}")
    return value


def _principal_json(value: Any, what: str) -> dict[str, Any]:
    if isinstance(value, Principal):
        return value.to_json()
    if isinstance(value, Mapping) and set(value) <= {"agent", "user"} and isinstance(value.get("agent"), str):
        return {"agent": value["agent"], "user": value.get("user")}
    raise InvalidInput(f'{what} must be a Principal or {{"agent": str, "user": str | None}}')


def _revoker(by: Any) -> str | None:
    """Who revokes, as the one-line name the store records: `agent` or `agent/user`."""
    if by is None or isinstance(by, str):
        return by
    principal = _principal_json(by, "by")
    return principal["agent"] if principal["user"] is None else f"{principal['agent']}/{principal['user']}"


def _describe(exc: BaseException) -> bytes:
    """The message an AMBIGUOUS or FAILED outcome records for `exc` (never raises)."""
    if isinstance(exc, asyncio.CancelledError):
        text = "asyncio.CancelledError: the protected call was cancelled mid-flight"
    else:
        try:
            detail = str(exc)
        except Exception:
            detail = ""
        text = f"{type(exc).__qualname__}: {detail}" if detail else type(exc).__qualname__
    # The library cuts a long message to its own bound (limits.max_message_bytes) and marks it.
    return text.encode("utf-8", "replace")


def _swallow_result(job: asyncio.Future[Any]) -> None:
    """A done callback that marks a job's outcome as seen (no "exception never retrieved")."""
    if not job.cancelled():
        job.exception()


async def _awaited(value: Awaitable[Any]) -> Any:
    """`value` awaited (to run an awaitable with `asyncio.run` or on another thread's loop)."""
    return await value
