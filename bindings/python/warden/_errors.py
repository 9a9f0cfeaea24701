"""The exception tree: every non-OK `warden_result` becomes one of these.

`WardenError` > `Refused` (the kernel said no, by design: codes 100..199) and
`WardenError` > `Fault` (something is broken: codes 200..299). Every exception carries
`.code` (the C constant's full name), `.reason` (the short machine reason), `.message` (what
happened and what to do) and the refusal's fields from the C error object; a field the error
object does not carry is `None`.

`NotExecuted` is not a `WardenError`: a protected function raises it to say the remote side
provably did nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, ClassVar

__all__ = [
    "RESULT_CODES",
    "WardenError",
    "Refused",
    "Denied",
    "AuthorityDenied",
    "AuthorityEscalation",
    "ApprovalRequired",
    "ApprovalMismatch",
    "Duplicate",
    "Ambiguous",
    "AttemptCeiling",
    "NotResolvable",
    "LateOutcome",
    "NotFound",
    "OutOfWindow",
    "Fault",
    "InvalidInput",
    "StoreFault",
    "ConfigError",
    "FetchFault",
    "Panic",
    "Poisoned",
    "AbiMismatch",
    "NotExecuted",
    "error_from_result",
]

#: The numbered result codes of ABI version 1 (docs/ABI.md); codes are only ever added.
RESULT_CODES: dict[int, str] = {
    0: "WARDEN_RESULT_OK",
    100: "WARDEN_RESULT_DENIED",
    101: "WARDEN_RESULT_APPROVAL_REQUIRED",
    102: "WARDEN_RESULT_APPROVAL_MISMATCH",
    103: "WARDEN_RESULT_DUPLICATE",
    104: "WARDEN_RESULT_IN_PROGRESS",
    105: "WARDEN_RESULT_AMBIGUOUS",
    106: "WARDEN_RESULT_ATTEMPT_CEILING",
    107: "WARDEN_RESULT_NOT_RESOLVABLE",
    108: "WARDEN_RESULT_LATE_OUTCOME",
    109: "WARDEN_RESULT_NOT_FOUND",
    110: "WARDEN_RESULT_OUT_OF_WINDOW",
    111: "WARDEN_RESULT_AUTHORITY_ESCALATION",
    200: "WARDEN_RESULT_INVALID_INPUT",
    201: "WARDEN_RESULT_STORE",
    202: "WARDEN_RESULT_CONFIG",
    203: "WARDEN_RESULT_FETCH",
    204: "WARDEN_RESULT_PANIC",
    205: "WARDEN_RESULT_POISONED",
    206: "WARDEN_RESULT_ABI_MISMATCH",
}

#: The refusal fields an error object may carry (docs/ABI.md, "Conventions").
FIELDS: tuple[str, ...] = (
    "request_id",
    "expires_at",
    "action_hash",
    "approval_id",
    "state",
    "effect_key",
    "action_id",
    "attempts",
    "max_attempts",
)


class WardenError(Exception):
    """Any non-OK result from the Warden library."""

    #: The C constant this class stands for when the error object does not name one.
    default_code: ClassVar[str] = "WARDEN_RESULT_UNKNOWN"
    default_reason: ClassVar[str] = "unknown"

    code: str
    reason: str
    message: str
    #: The whole error object as the library sent it (empty when it sent none).
    details: dict[str, Any]
    request_id: str | None
    expires_at: str | None
    action_hash: str | None
    approval_id: str | None
    state: str | None
    effect_key: str | None
    action_id: str | None
    attempts: int | None
    max_attempts: int | None

    def __init__(
        self,
        message: str | None = None,
        *,
        code: str | None = None,
        reason: str | None = None,
        details: dict[str, Any] | None = None,
        **fields: Any,
    ) -> None:
        details = dict(details or {})
        self.code = code or details.get("code") or self.default_code
        self.reason = reason or details.get("reason") or self.default_reason
        self.message = message or details.get("message") or self.code
        self.details = details
        for name in FIELDS:
            setattr(self, name, fields.get(name, details.get(name)))
        unknown = set(fields) - set(FIELDS)
        if unknown:
            raise TypeError(f"unknown error field(s): {', '.join(sorted(unknown))}")
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        extra = "".join(f", {name}={getattr(self, name)!r}" for name in FIELDS if getattr(self, name) is not None)
        return f"{type(self).__name__}(code={self.code!r}, reason={self.reason!r}{extra}, message={self.message!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        # Keyword-only state survives pickling (multiprocessing, concurrent.futures).
        fields = {name: getattr(self, name) for name in FIELDS}
        return (_rebuild, (type(self), self.message, self.code, self.reason, self.details, fields))


def _rebuild(
    cls: type[WardenError], message: str, code: str, reason: str, details: dict[str, Any], fields: dict[str, Any]
) -> WardenError:
    return cls(message, code=code, reason=reason, details=details, **fields)


# ---- refusals (100..199) --------------------------------------------------------------------


class Refused(WardenError):
    """The kernel refused, as designed; its evidence is already written."""


class Denied(Refused):
    """The policy (or an answered approval, or a missing principal) denies the action."""

    default_code = "WARDEN_RESULT_DENIED"
    default_reason = "denied"


class AuthorityDenied(Denied):
    """The authority axis said no: no grant covers the action, the deciding delegation chain is
    revoked, expired or escalating, or a budget refuses.

    `.reason` is `no_authority`, `authority_revoked`, `authority_expired`,
    `authority_escalation`, `authority_task`, `authority_constraint`, `authority_hop`,
    `authority_unreadable`, `budget_exhausted`, `budget_unmeasurable` or `budget_unkeyed`;
    `.grant_id` names the grant (a root grant id or `dlg_…`) the reason is about.
    """

    default_reason = "no_authority"

    @property
    def grant_id(self) -> str | None:
        return self.details.get("grant_id")

    @property
    def hop(self) -> str | None:
        return self.details.get("hop")

    @property
    def dimension(self) -> str | None:
        return self.details.get("dimension")


class AuthorityEscalation(Refused):
    """A delegation was refused at creation; nothing was written but the rejection event.

    `.reason` is `principal_expired`, `id_assigned`, `unknown_parent`, `parent_not_delegable`,
    `parent_not_valid`, `not_the_subject`, `max_depth` or `containment`; for `containment`,
    `.dimension` names what the child would widen or drop (`subject`, `actions`, `resources`,
    `constraints`, `environments`, `expires_at`, `tasks`, `budgets`).
    """

    default_code = "WARDEN_RESULT_AUTHORITY_ESCALATION"
    default_reason = "containment"

    @property
    def dimension(self) -> str | None:
        return self.details.get("dimension")

    @property
    def parent_id(self) -> str | None:
        return self.details.get("parent_id")


class ApprovalRequired(Refused):
    """A human must approve first: `.request_id` names the request, `.expires_at` its end."""

    default_code = "WARDEN_RESULT_APPROVAL_REQUIRED"
    default_reason = "approval_required"


class ApprovalMismatch(Refused):
    """A presented or answered approval does not fit (`.reason` says how)."""

    default_code = "WARDEN_RESULT_APPROVAL_MISMATCH"
    default_reason = "mismatch"


class Duplicate(Refused):
    """The effect is done (`.state == "committed"`) or held right now (`"in_progress"`)."""

    default_code = "WARDEN_RESULT_DUPLICATE"
    default_reason = "duplicate"

    def __init__(self, message: str | None = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        if self.state is None:
            self.state = "in_progress" if self.code == "WARDEN_RESULT_IN_PROGRESS" else "committed"


class Ambiguous(Refused):
    """The effect's outcome is unknown; a human (or a reconcile hook) must resolve it."""

    default_code = "WARDEN_RESULT_AMBIGUOUS"
    default_reason = "ambiguous"


class AttemptCeiling(Refused):
    """The effect failed `max_attempts` times; no further attempt is allowed."""

    default_code = "WARDEN_RESULT_ATTEMPT_CEILING"
    default_reason = "attempt_ceiling"


class NotResolvable(Refused):
    """Only an AMBIGUOUS effect is resolved by hand; this one is `.state`."""

    default_code = "WARDEN_RESULT_NOT_RESOLVABLE"
    default_reason = "not_ambiguous"


class LateOutcome(Refused):
    """The effect moved on before this outcome arrived; it was kept as evidence only."""

    default_code = "WARDEN_RESULT_LATE_OUTCOME"
    default_reason = "late_outcome"


class NotFound(Refused):
    """No such record (for a sight diff, `.reason == "snapshot_not_found"`)."""

    default_code = "WARDEN_RESULT_NOT_FOUND"
    default_reason = "not_found"


class OutOfWindow(Refused):
    """A sight query named something outside the configured windows; nothing was sent.

    `.reason` is the sight code: `unknown_source`, `unknown_endpoint`, `invalid_params`,
    `unknown_field` or `invalid_page`.
    """

    default_code = "WARDEN_RESULT_OUT_OF_WINDOW"
    default_reason = "out_of_window"


# ---- faults (200..299) ----------------------------------------------------------------------


class Fault(WardenError):
    """Something is broken: bad input, the store, the configuration, the library itself."""


class InvalidInput(Fault):
    """The call was handed something it cannot take; nothing was done. ``kind`` says what, for
    code that branches on it: ``malformed``, ``not_canonical``, ``too_large``, ``missing``,
    ``out_of_range``, ``unknown``, ``conflict``, ``state``, ``hook_failed`` (``None`` when the
    binding raised it itself). ``path`` names the offending field where the library knows it
    (``arguments.b``, ``request.principal.agent``), else ``None``."""

    default_code = "WARDEN_RESULT_INVALID_INPUT"
    default_reason = "invalid_input"

    @property
    def kind(self) -> str | None:
        kind = self.details.get("kind")
        return kind if isinstance(kind, str) else None

    @property
    def path(self) -> str | None:
        path = self.details.get("path")
        return path if isinstance(path, str) else None


class StoreFault(Fault):
    """The store failed. ``kind`` says how, for code that branches on it: ``io``, ``no_space``,
    ``permission``, ``damaged``, ``version``, ``needs_recovery``, ``not_a_store``, ``absent``,
    ``busy``, ``limit``, ``stopped``, ``defect`` (``None`` when the store could not be reached
    at all, reason ``store_unavailable``)."""

    default_code = "WARDEN_RESULT_STORE"
    default_reason = "store"

    @property
    def kind(self) -> str | None:
        kind = self.details.get("kind")
        return kind if isinstance(kind, str) else None


class ConfigError(Fault):
    default_code = "WARDEN_RESULT_CONFIG"
    default_reason = "configuration_invalid"


class FetchFault(Fault):
    """A sight's fetch failed, was refused or was cancelled; no values were returned.

    `.reason` is the sight code: `credential_unavailable`, `redirect_refused`,
    `response_too_large`, `timeout`, `aborted`, `upstream_error`, `network_error` or
    `invalid_response`.
    """

    default_code = "WARDEN_RESULT_FETCH"
    default_reason = "fetch"


class Panic(Fault):
    default_code = "WARDEN_RESULT_PANIC"
    default_reason = "panic"


class Poisoned(Fault):
    """An earlier fault latched the handle closed; close it and open the store again."""

    default_code = "WARDEN_RESULT_POISONED"
    default_reason = "poisoned"


class AbiMismatch(Fault):
    """The library cannot be used by this binding (wrong ABI version, missing symbols, absent)."""

    default_code = "WARDEN_RESULT_ABI_MISMATCH"
    default_reason = "abi_mismatch"


class NotExecuted(Exception):
    """Raised by a protected function: the remote side provably did nothing.

    The only exception that records FAILED (so a retry may run as the next attempt); any other
    exception records AMBIGUOUS. It is re-raised to the caller after the outcome is recorded.
    """


def _coded_classes(cls: type[WardenError]) -> Iterator[type[WardenError]]:
    """Every class below `cls` that stands for a result code of its own (`default_code`)."""
    for sub in cls.__subclasses__():
        if "default_code" in vars(sub):
            yield sub
        yield from _coded_classes(sub)


#: The class of each result code (IN_PROGRESS is a `Duplicate` too).
_CLASS_BY_CODE: dict[str, type[WardenError]] = {cls.default_code: cls for cls in _coded_classes(WardenError)}
_CLASS_BY_CODE["WARDEN_RESULT_IN_PROGRESS"] = Duplicate


def error_from_result(result: int, error_json: bytes | None, name: str | None = None) -> WardenError:
    """The exception for a non-OK `result` and its (optional) error object.

    `name` is `warden_result_name(result)`; the error object's own `code` wins when present.
    """
    details: dict[str, Any] = {}
    if error_json:
        try:
            parsed = json.loads(error_json)
        except ValueError:
            parsed = {"message": error_json.decode("utf-8", "replace")}
        if isinstance(parsed, dict):
            details = parsed
    code = details.get("code") or name or RESULT_CODES.get(result) or "WARDEN_RESULT_UNKNOWN"
    if code in ("WARDEN_RESULT_UNKNOWN", "WARDEN_RESULT_OK"):
        code = RESULT_CODES.get(result, f"WARDEN_RESULT_UNKNOWN({result})")
    cls = _CLASS_BY_CODE.get(code)
    if cls is Denied and details.get("authority") is True:
        cls = AuthorityDenied
    if cls is None:
        cls = Refused if 100 <= result < 200 else Fault if 200 <= result < 300 else WardenError
    reason = details.get("reason")
    if reason is None and cls in (Refused, Fault, WardenError):
        reason = code.removeprefix("WARDEN_RESULT_").lower()
    fields = {field: details.get(field) for field in FIELDS}
    if code == "WARDEN_RESULT_IN_PROGRESS" and fields["state"] is None:
        fields["state"] = "in_progress"
    return cls(details.get("message"), code=code, reason=reason, details=details, **fields)
