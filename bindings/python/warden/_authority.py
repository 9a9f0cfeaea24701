"""Authority: delegating part of a grant, revoking delegations, and listing them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._context import Principal
from ._convert import _json_arg, _millis, _optional_text_arg, _principal_json, _record, _records, _revoker, _text_arg
from ._errors import InvalidInput
from ._managed import Managed


class Authority(Managed):
    """`Warden`'s authority calls."""

    def delegate(
        self,
        parent_id: str,
        grant: Mapping[str, Any],
        *,
        by: Principal | Mapping[str, Any],
        by_expires_at: float | None = None,
        via: str = "api",
    ) -> str:
        """Delegate part of `parent_id` (a root grant id or a `dlg_…` id) to the grantee
        `grant` names, as `by` (`{"agent": …, "user": …}` or a `Principal`), and return the new
        `dlg_…` id. `grant` has the keys of a grant minus `id` (assigned here); every dimension
        the parent constrains must be stated at least as narrowly — omitting one is refused.
        `by_expires_at` (Unix seconds) is when `by`'s credential lapses. Raises
        `AuthorityEscalation` (`.reason`, `.dimension`) when the delegation is refused."""
        if not isinstance(grant, Mapping):
            raise InvalidInput("delegate(grant=...) must be a mapping with the keys of a grant")
        request: dict[str, Any] = {
            "parent_id": parent_id,
            "grant": dict(grant),
            "by": _principal_json(by, "delegate(by=...)"),
            "by_expires_at_ms": None if by_expires_at is None else _millis(by_expires_at, "by_expires_at"),
            "via": via,
        }
        created = _record(self._call_out("warden_delegate", *_json_arg(request, "the delegation")))
        return str(created["delegation_id"])

    def revoke(self, delegation_id: str, *, by: Principal | Mapping[str, Any] | str | None = None) -> bool:
        """Revoke a delegation: `True` when this call revoked it, `False` when it already was.
        Every delegation beneath it is denied from now on. An unknown id raises `NotFound`."""
        data = self._call_out(
            "warden_revoke",
            *_text_arg(delegation_id, "delegation id"),
            *_optional_text_arg(_revoker(by), "revoke(by=...)"),
        )
        return bool(_record(data)["revoked"])

    def revoke_sweep(
        self,
        *,
        created_by: Principal | Mapping[str, Any] | None = None,
        under: str | None = None,
        by: Principal | Mapping[str, Any] | str | None = None,
    ) -> list[dict[str, Any]]:
        """Revoke, in one write, every delegation `created_by` made (all its users when the
        user is None) or every delegation beneath `under`; returns `[{"delegation_id",
        "revoked"}]` (`revoked` False: it already was)."""
        request: dict[str, Any] = {"by": _revoker(by)}
        if created_by is not None:
            request["created_by"] = _principal_json(created_by, "revoke_sweep(created_by=...)")
        if under is not None:
            request["under"] = under
        return _records(self._call_out("warden_revoke_sweep", *_json_arg(request, "the sweep")))

    def delegations(self) -> list[dict[str, Any]]:
        """Every stored delegation in id order, revoked ones included (`revoked`,
        `revoked_at`, `revoked_by`), with its grant, creator and `created_via`."""
        return _records(self._call_out("warden_delegations_all"))
