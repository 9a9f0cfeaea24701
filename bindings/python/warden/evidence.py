"""Check a Warden evidence bundle offline, in pure Python: the same checks, in the same order,
with the same verdict and the same reason name as the Rust verifier (`warden verify-bundle`,
`src/evidence/bundle.rs`, which is the normative definition).

    from warden import evidence

    verdict = evidence.verify_bundle("bundle", keys=["warden.example/log+1234abcd+AbC..."])
    if not verdict["ok"]:
        print(verdict["reason"], verdict["detail"])

or from a shell: ``python -m warden.evidence DIR [--key VKEY_OR_FILE ...] [--json]`` (exit 0 when
the bundle is sound, 1 when it is refused, 2 on a usage error).

What a bundle holds and what is checked, in order:

1. ``bundle.json`` (the manifest) and the keys: the caller's (pinned), else the bundle's own.
2. Every checkpoint: a signed note (C2SP signed-note, Ed25519) by a trusted key whose text is a
   checkpoint of the manifest's origin, with the companion document its hash names.
3. The checkpoints against each other: one root per size, sizes and times never going back.
4. The consistency proofs between consecutive checkpoints (RFC 9162 §2.1.4).
5. The receipts (``receipts.jsonl``, streamed): in seq order, each naming the previous one's
   hash, hashing (RFC 9162 Merkle tree) to every checkpoint's root, no receipt finishing after a
   checkpoint that counts it, spent approvals matching ``approvals.jsonl``, and every effect a
   checkpoint saw open still open later, closed by a receipt, or attested closed without one,
   and every policy hash a receipt names listed in ``bundle.json``.
6. The policies: every one listed is named by a receipt, and each not listed as missing
   (``policies_missing``) is carried as ``policies/<hex>.json``, whose bytes hash to its name.

This module stands alone: it imports nothing else from the ``warden`` package and never loads
the native library, so it may be copied or loaded from its file path. Ed25519 needs the
``cryptography`` package (``pip install 'warden-effects[evidence]'``); the Merkle and key-parsing
functions do not.

Files are read the way the Rust verifier reads them; in particular every JSON file is read with
serde_json's rules as Warden builds it (``arbitrary_precision``, ``raw_value``): numbers keep
their text, a u64 field takes only a plain non-negative integer, a string escaping half of a
UTF-16 surrogate pair is refused (except inside a member the Rust structs skip), a struct may
also be written as an array of its fields, and in ``receipts.jsonl`` and ``approvals.jsonl``
the 128th nested array or object is refused and an object whose first member is
``$serde_json::private::Number`` or ``$serde_json::private::RawValue`` is read as the number or
the JSON text that member's string holds.
"""

# No `from __future__ import annotations`: dataclasses would then look the module up in
# sys.modules, and this module must also load from its file path under any name.
import argparse
import base64
import binascii
import hashlib
import json
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO, NoReturn, Union

__all__ = [
    "ANCHORS_FILE",
    "BUNDLE_FORMAT",
    "COMPANION_FORMAT",
    "EMPTY_HASH",
    "FILE_LINE_FORMAT",
    "GENESIS_HASH",
    "INSTALL_HINT",
    "REASONS",
    "CheckpointBody",
    "Frontier",
    "NoteRefusal",
    "NoteVerifier",
    "check_consistency",
    "check_inclusion",
    "file_anchor_line",
    "is_time",
    "key_id",
    "leaf_hash",
    "main",
    "node_hash",
    "open_note",
    "parse_checkpoint",
    "policy_file",
    "trusted_key",
    "verify_bundle",
]

#: The ``format`` member of ``bundle.json``.
BUNDLE_FORMAT = "warden.bundle/v1"
#: The ``format`` member of every checkpoint's companion document.
COMPANION_FORMAT = "warden.checkpoint/v1"
#: The ``prev_hash`` the first receipt names.
GENESIS_HASH = "sha256:" + "0" * 64

#: Every reason a verifier may give, in the order the checks run.
REASONS: tuple[str, ...] = (
    "bundle_malformed",
    "key_untrusted",
    "signature_invalid",
    "checkpoint_altered",
    "log_forked",
    "checkpoint_backdated",
    "proof_invalid",
    "receipt_malformed",
    "receipts_reordered",
    "receipt_dropped",
    "receipt_altered",
    "root_mismatch",
    "outcome_missing",
    "truncated",
    "anchor_invalid",
    "policy_altered",
)

#: The bundle's file of anchor receipts.
ANCHORS_FILE = "anchors.jsonl"
#: The `format` member of every line the file anchor writes.
FILE_LINE_FORMAT = "warden.anchor/v1"

INSTALL_HINT = "pip install 'warden-effects[evidence]'"

_U64_MAX = (1 << 64) - 1
_U32_MAX = (1 << 32) - 1

# ---- small Rust-compatible helpers ---------------------------------------------------------------

#: The characters Rust's `char::is_whitespace` (Unicode White_Space) accepts; `str.trim` strips them.
_RUST_WHITESPACE = frozenset(
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
    "\u200a\u2028\u2029\u202f\u205f\u3000"
)

_B64_TEXT = re.compile(r"[A-Za-z0-9+/]*={0,2}")
_HEX8 = re.compile(r"[0-9a-fA-F]{8}")
_U64_TEXT = re.compile(r"0|[1-9][0-9]{0,19}")


def _rust_trim(text: str) -> str:
    """`str::trim`: strip Unicode White_Space from both ends."""
    start, end = 0, len(text)
    while start < end and text[start] in _RUST_WHITESPACE:
        start += 1
    while end > start and text[end - 1] in _RUST_WHITESPACE:
        end -= 1
    return text[start:end]


def _rust_lines(text: str) -> list[str]:
    """`str::lines`: split at "\\n" (dropping a "\\r" before it); no empty last line."""
    pieces = text.split("\n")
    ended = pieces[-1] == ""
    if ended:
        pieces.pop()
    lines = []
    for at, piece in enumerate(pieces):
        newline_follows = at < len(pieces) - 1 or ended
        lines.append(piece[:-1] if newline_follows and piece.endswith("\r") else piece)
    return lines


def _b64decode(text: str) -> bytes | None:
    """Standard base64 with canonical padding and zero trailing bits (the `base64` crate's
    `STANDARD`), else `None`."""
    if len(text) % 4 or not _B64_TEXT.fullmatch(text):
        return None
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw if base64.b64encode(raw).decode("ascii") == text else None


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def _decimal_u64(text: str) -> int | None:
    """A u64 written exactly as Rust writes it (no sign, no leading zero), else `None`."""
    if not _U64_TEXT.fullmatch(text):
        return None
    value = int(text)
    return value if value <= _U64_MAX else None


def _debug(text: str) -> str:
    """Roughly Rust's `{:?}` of a string, for messages."""
    out = ['"']
    for char in text:
        if char in '"\\':
            out.append("\\" + char)
        elif char == "\n":
            out.append("\\n")
        elif char == "\r":
            out.append("\\r")
        elif char == "\t":
            out.append("\\t")
        elif char == "\0":
            out.append("\\0")
        elif char.isprintable():
            out.append(char)
        else:
            out.append(f"\\u{{{ord(char):x}}}")
    out.append('"')
    return "".join(out)


# ---- JSON, read with serde_json's rules ----------------------------------------------------------

_NUMBER_TOKEN = "$serde_json::private::Number"
_RAW_TOKEN = "$serde_json::private::RawValue"
#: serde_json refuses the 128th nested array or object.
_MAX_DEPTH = 127

_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_STRING_RUN = re.compile(r'[^"\\\x00-\x1f]*')
_HEX4 = re.compile(r"[0-9a-fA-F]{4}")
_SURROGATE = re.compile("[\ud800-\udfff]")
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_WHITESPACE = " \t\n\r"


class _JsonError(ValueError):
    """Text serde_json would not read (as this type)."""


@dataclass(frozen=True)
class _JsonNumber:
    """A JSON number that is not a u64, kept as its text (serde_json's `arbitrary_precision`)."""

    text: str


@dataclass
class _Object:
    """A JSON object as written: every member in order, duplicates kept."""

    pairs: list[tuple[str, Any]] = field(default_factory=list)


@dataclass
class _Frame:
    """An array or object being read, with the key its next value belongs to."""

    container: list[Any] | _Object
    key: str = ""


class _Reader:
    """JSON text to a syntax tree, with serde_json's grammar (no depth limit: serde_json skips
    an ignored member at any depth; the limit is applied where values are built)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.at = 0

    def document(self) -> Any:
        """The one value of the text, with only whitespace around it."""
        value = self.value()
        self.skip_whitespace()
        if self.at != len(self.text):
            self.fail("trailing characters")
        return value

    def fail(self, what: str) -> NoReturn:
        raise _JsonError(f"{what} at character {self.at + 1}")

    def skip_whitespace(self) -> None:
        text, at = self.text, self.at
        while at < len(text) and text[at] in _WHITESPACE:
            at += 1
        self.at = at

    def peek(self) -> str:
        return self.text[self.at] if self.at < len(self.text) else ""

    def value(self) -> Any:
        """Read one value, arrays and objects with a stack of their own (not recursion)."""
        stack: list[_Frame] = []
        while True:
            self.skip_whitespace()
            char = self.peek()
            if char == "[":
                self.at += 1
                self.skip_whitespace()
                if self.peek() != "]":
                    stack.append(_Frame([]))
                    continue
                self.at += 1
                value: Any = []
            elif char == "{":
                self.at += 1
                self.skip_whitespace()
                if self.peek() != "}":
                    stack.append(_Frame(_Object(), self.member_key()))
                    continue
                self.at += 1
                value = _Object()
            else:
                value = self.scalar(char)
            # A value is complete: add it to the containers it closes.
            while True:
                if not stack:
                    return value
                frame = stack[-1]
                if isinstance(frame.container, list):
                    frame.container.append(value)
                else:
                    frame.container.pairs.append((frame.key, value))
                self.skip_whitespace()
                char = self.peek()
                if char == ",":
                    self.at += 1
                    if isinstance(frame.container, _Object):
                        frame.key = self.member_key()
                    break
                closing = "]" if isinstance(frame.container, list) else "}"
                if char != closing:
                    self.fail(f"expected ',' or '{closing}'" if char else f"end of text before '{closing}'")
                self.at += 1
                value = stack.pop().container

    def member_key(self) -> str:
        self.skip_whitespace()
        if self.peek() != '"':
            self.fail("end of text in an object" if not self.peek() else "key must be a string")
        key = self.string()
        self.skip_whitespace()
        if self.peek() != ":":
            self.fail("expected ':'")
        self.at += 1
        return key

    def scalar(self, char: str) -> Any:
        if char == '"':
            return self.string()
        if char == "-" or "0" <= char <= "9":
            match = _NUMBER.match(self.text, self.at)
            if match is None:
                self.fail("invalid number")
            self.at = match.end()
            return _JsonNumber(match.group())
        for word, value in (("null", None), ("true", True), ("false", False)):
            if self.text.startswith(word, self.at):
                self.at += len(word)
                return value
        self.fail("expected a value" if char else "end of text where a value should be")

    def string(self) -> str:
        """A string (at its opening quote); an escaped lone surrogate stays in it as one."""
        text = self.text
        at = self.at + 1
        out: list[str] = []
        while True:
            run = _STRING_RUN.match(text, at)
            assert run is not None  # the pattern matches the empty string
            out.append(run.group())
            at = run.end()
            char = text[at] if at < len(text) else ""
            if char == '"':
                self.at = at + 1
                joined = "".join(out)
                if _SURROGATE.search(joined):
                    # Pair the escaped halves of a surrogate pair as serde_json does.
                    joined = joined.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
                return joined
            if char != "\\":
                self.at = at
                self.fail("end of text in a string" if not char else "control character in a string")
            escape = text[at + 1 : at + 2]
            if escape in _ESCAPES:
                out.append(_ESCAPES[escape])
                at += 2
            elif escape == "u" and _HEX4.fullmatch(text, at + 2, at + 6):
                out.append(chr(int(text[at + 2 : at + 6], 16)))
                at += 6
            else:
                self.at = at
                self.fail("invalid escape")


def _checked_str(value: Any, what: str) -> str:
    """A string serde_json reads (one with no lone surrogate)."""
    if not isinstance(value, str):
        raise _JsonError(f"{what} is not a string")
    if _SURROGATE.search(value):
        raise _JsonError(f"{what} holds a lone surrogate escape")
    return value


def _number_value(text: str) -> int | _JsonNumber:
    """A number as a `serde_json::Value` holds it: an int when `as_u64` reads it."""
    value = _decimal_u64(text)
    return _JsonNumber(text) if value is None else value


def _build_value(node: Any, depth: int) -> Any:
    """A `serde_json::Value` from a syntax tree: the depth limit, surrogates refused, and the
    private members serde_json reads as a number or as raw JSON text when they come first."""
    if isinstance(node, _JsonNumber):
        return _number_value(node.text)
    if isinstance(node, str):
        return _checked_str(node, "a string")
    if isinstance(node, (list, _Object)) and depth >= _MAX_DEPTH:
        raise _JsonError("recursion limit exceeded")
    if isinstance(node, list):
        return [_build_value(item, depth + 1) for item in node]
    if isinstance(node, _Object):
        return _build_object(node, depth)
    return node


def _build_object(node: _Object, depth: int) -> Any:
    if not node.pairs:
        return {}
    first_key = _checked_str(node.pairs[0][0], "a key")
    if first_key in (_NUMBER_TOKEN, _RAW_TOKEN):
        if len(node.pairs) != 1:
            raise _JsonError(f"{first_key} must be the only member")
        text = _checked_str(node.pairs[0][1], f"the value of {first_key}")
        if first_key == _RAW_TOKEN:
            return _parse_value(text)
        if _NUMBER.fullmatch(text) is None:
            raise _JsonError(f"{text!r} is not a number")
        return _number_value(text)
    out: dict[str, Any] = {}
    for key, value in node.pairs:
        out[_checked_str(key, "a key")] = _build_value(value, depth + 1)
    return out


def _is_plain(value: Any, depth: int) -> bool:
    """Whether a value `json` read is what serde_json reads from the same text (no lone
    surrogate, within the depth limit, no private member first in an object)."""
    if isinstance(value, str):
        return _SURROGATE.search(value) is None
    if isinstance(value, list):
        return depth < _MAX_DEPTH and all(_is_plain(item, depth + 1) for item in value)
    if isinstance(value, dict):
        if depth >= _MAX_DEPTH or next(iter(value), None) in (_NUMBER_TOKEN, _RAW_TOKEN):
            return False
        return all(_SURROGATE.search(key) is None and _is_plain(item, depth + 1) for key, item in value.items())
    return True


def _refuse_constant(name: str) -> NoReturn:
    raise _JsonError(f"{name} is not JSON")


def _parse_value(text: str) -> Any:
    """`serde_json::from_str::<Value>`: objects as dicts (the last of duplicate members wins),
    u64 numbers as int, other numbers as `_JsonNumber`. Raises `_JsonError`."""
    try:
        value = json.loads(
            text,
            parse_int=_number_value,
            parse_float=_JsonNumber,
            parse_constant=_refuse_constant,
        )
    except RecursionError:
        raise _JsonError("recursion limit exceeded") from None
    except ValueError as error:
        raise _JsonError(str(error)) from None
    if _is_plain(value, 0):
        return value
    # Rare: read it again the slow way, which applies every rule.
    return _build_value(_Reader(text).document(), 0)


# Types of fields, serde-style: "u64", "u32", "str", "str?" (an Option<String>), _Vec, _Struct.
_FieldType = Union[str, "_Vec", "_Struct"]


@dataclass(frozen=True)
class _Vec:
    item: _FieldType


@dataclass(frozen=True)
class _Struct:
    """A `#[derive(Deserialize)]` struct: its fields in order, and whether unknown members are
    refused (`deny_unknown_fields`) or skipped."""

    name: str
    fields: tuple[tuple[str, _FieldType], ...]
    deny_unknown: bool = False


def _typed(node: Any, kind: _FieldType, what: str) -> Any:
    """A value of the field type `kind` from a syntax tree, as serde derives it."""
    if isinstance(kind, _Struct):
        return _typed_struct(node, kind)
    if isinstance(kind, _Vec):
        if not isinstance(node, list):
            raise _JsonError(f"{what} is not an array")
        return [_typed(item, kind.item, what) for item in node]
    if kind == "str?":
        return None if node is None else _checked_str(node, what)
    if kind == "str":
        return _checked_str(node, what)
    value = _decimal_u64(node.text) if isinstance(node, _JsonNumber) else None
    limit = _U32_MAX if kind == "u32" else _U64_MAX
    if value is None or value > limit:
        raise _JsonError(f"{what} is not a {kind}")
    return value


def _typed_struct(node: Any, kind: _Struct) -> dict[str, Any]:
    types = dict(kind.fields)
    if isinstance(node, list):
        # serde reads a struct from an array too: every field, in order, and nothing more.
        if len(node) != len(kind.fields):
            raise _JsonError(f"{kind.name} needs {len(kind.fields)} elements, not {len(node)}")
        return {name: _typed(item, kind_, name) for (name, kind_), item in zip(kind.fields, node)}
    if not isinstance(node, _Object):
        raise _JsonError(f"{kind.name} is not an object")
    out: dict[str, Any] = {}
    for key, value in node.pairs:
        key = _checked_str(key, "a key")
        if key in types:
            if key in out:
                raise _JsonError(f"duplicate field `{key}`")
            out[key] = _typed(value, types[key], f"`{key}`")
        elif kind.deny_unknown:
            raise _JsonError(f"unknown field `{key}`")
    for name, field_kind in kind.fields:
        if name not in out:
            if field_kind != "str?":
                raise _JsonError(f"missing field `{name}`")
            out[name] = None
    return out


def _parse_typed(text: str, kind: _Struct) -> dict[str, Any]:
    """`serde_json::from_str::<T>` for one of the bundle's structs. Raises `_JsonError`."""
    return _typed_struct(_Reader(text).document(), kind)


_MANIFEST = _Struct(
    "Manifest",
    (
        ("format", "str"),
        ("origin", "str"),
        ("checkpoints", _Vec("u64")),
        ("start_size", "u64"),
        ("keys", _Vec("str")),
        ("policies", _Vec("str")),
        ("policies_missing", _Vec("str")),
    ),
)
_START = _Struct("Start", (("size", "u64"), ("last_hash", "str"), ("frontier", _Vec("str"))))
_CONSISTENCY = _Struct(
    "ConsistencyFile",
    (
        ("old_checkpoint", "u64"),
        ("new_checkpoint", "u64"),
        ("old_size", "u64"),
        ("new_size", "u64"),
        ("proof", _Vec("str")),
    ),
)
_OPEN_EFFECT = _Struct("OpenEffect", (("effect_key", "str"), ("attempt", "u32"), ("state", "str")))
_CLOSED = _Struct(
    "ClosedWithoutReceipt",
    (("effect_key", "str"), ("attempt", "u32"), ("state", "str"), ("resolved_by", "str?")),
)
_COMPANION = _Struct(
    "Companion",
    (
        ("format", "str"),
        ("checkpoint", "u64"),
        ("origin", "str"),
        ("size", "u64"),
        ("time", "str"),
        ("open", _Vec(_OPEN_EFFECT)),
        ("closed_without_receipt", _Vec(_CLOSED)),
    ),
    deny_unknown=True,
)

_ANCHOR_LINE = _Struct(
    "AnchorLine",
    (
        ("checkpoint", "u64"),
        ("sink", "str"),
        ("kind", "str?"),
        ("receipt", "str?"),
        ("description", "str"),
        ("anchored_at", "str"),
    ),
    deny_unknown=True,
)

# ---- time ----------------------------------------------------------------------------------------

_TIME = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})\.[0-9]{3}Z")


def is_time(text: str) -> bool:
    """Whether `text` is a time exactly as Warden writes one (`YYYY-MM-DDTHH:MM:SS.mmmZ`, a real
    date of the proleptic Gregorian calendar, no leap second); such times compare as text."""
    match = _TIME.fullmatch(text)
    if match is None:
        return False
    year, month, day, hour, minute, second = (int(part) for part in match.groups())
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    days = (31, 29 if leap else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
    return 1 <= month <= 12 and 1 <= day <= days[month - 1] and hour < 24 and minute < 60 and second < 60


# ---- the Merkle tree (RFC 9162 §2.1) -------------------------------------------------------------

#: The root of the empty tree.
EMPTY_HASH = hashlib.sha256(b"").digest()


def leaf_hash(data: bytes) -> bytes:
    """The hash of a leaf (a receipt's line): SHA-256(0x00 ‖ data)."""
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """The hash of an interior node: SHA-256(0x01 ‖ left ‖ right)."""
    return hashlib.sha256(b"\x01" + left + right).digest()


def check_inclusion(proof: Sequence[bytes], size: int, root: bytes, index: int, leaf: bytes) -> bool:
    """Whether the audit path `proof` shows the leaf hash `leaf` at `index` in the tree of `size`
    leaves with root `root` (RFC 9162 §2.1.3.2)."""
    if not 0 <= index < size:
        return False
    fn, sn = index, size - 1
    hashed = leaf
    for sibling in proof:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            hashed = node_hash(sibling, hashed)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            hashed = node_hash(hashed, sibling)
        fn, sn = fn >> 1, sn >> 1
    return sn == 0 and hashed == root


def check_consistency(proof: Sequence[bytes], old_size: int, old_root: bytes, new_size: int, new_root: bytes) -> bool:
    """Whether `proof` shows the tree of `old_size` leaves with root `old_root` is a prefix of the
    tree of `new_size` leaves with root `new_root` (RFC 9162 §2.1.4.2; equal sizes need an empty
    proof and equal roots)."""
    if old_size == new_size:
        return len(proof) == 0 and old_root == new_root
    if not 1 <= old_size < new_size or not proof:
        return False
    path = list(proof)
    if old_size & (old_size - 1) == 0:
        path.insert(0, old_root)
    fn, sn = old_size - 1, new_size - 1
    while fn & 1:
        fn, sn = fn >> 1, sn >> 1
    old_hash = new_hash = path[0]
    for sibling in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            old_hash = node_hash(sibling, old_hash)
            new_hash = node_hash(sibling, new_hash)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            new_hash = node_hash(new_hash, sibling)
        fn, sn = fn >> 1, sn >> 1
    return sn == 0 and old_hash == old_root and new_hash == new_root


class Frontier:
    """A tree built one leaf at a time in constant memory: its complete subtrees, largest first."""

    def __init__(self) -> None:
        self.stack: list[tuple[int, bytes]] = []
        self.size = 0

    @classmethod
    def resume(cls, size: int, subtrees: Sequence[bytes]) -> "Frontier | None":
        """Go on from the complete subtrees of a tree of `size` leaves (largest first, one per set
        bit of `size`); `None` when they do not fit the size."""
        levels = [level for level in range(63, -1, -1) if size >> level & 1]
        if not 0 <= size <= _U64_MAX or len(levels) != len(subtrees):
            return None
        frontier = cls()
        frontier.stack = list(zip(levels, subtrees))
        frontier.size = size
        return frontier

    def push(self, leaf: bytes) -> None:
        """Append one leaf hash."""
        hashed, level = leaf, 0
        while self.stack and self.stack[-1][0] == level:
            hashed = node_hash(self.stack.pop()[1], hashed)
            level += 1
        self.stack.append((level, hashed))
        self.size += 1

    def root(self) -> bytes:
        """The root of the leaves so far."""
        if not self.stack:
            return EMPTY_HASH
        hashed = self.stack[-1][1]
        for _, left in reversed(self.stack[:-1]):
            hashed = node_hash(left, hashed)
        return hashed


# ---- Ed25519 -------------------------------------------------------------------------------------
# `cryptography` checks the signature equation; the point checks ed25519-dalek's `verify_strict`
# adds (and `VerifyingKey::from_bytes` makes) are done here, since OpenSSL skips them.

_P = 2**255 - 19
_L = 2**252 + 27742317777372353535851937790883648493
_D = -121665 * pow(121666, _P - 2, _P) % _P
_SQRT_M1 = pow(2, (_P - 1) // 4, _P)


def _decompress(encoded: bytes) -> tuple[int, int] | None:
    """The Edwards point a 32-byte encoding names, as curve25519-dalek decodes it (y reduced
    mod p, the sign bit applied even to x = 0), or `None` when it is not on the curve."""
    y = int.from_bytes(encoded, "little") & ((1 << 255) - 1)
    y %= _P
    u, v = (y * y - 1) % _P, (_D * y * y + 1) % _P
    x2 = u * pow(v, _P - 2, _P) % _P
    x = pow(x2, (_P + 3) // 8, _P)
    if (x * x - x2) % _P:
        x = x * _SQRT_M1 % _P
    if (x * x - x2) % _P:
        return None
    if x & 1:
        x = _P - x
    if encoded[31] >> 7:
        x = (_P - x) % _P
    return x, y


def _double(point: tuple[int, int]) -> tuple[int, int]:
    x, y = point
    t = _D * x * x * y * y % _P
    return (2 * x * y * pow(1 + t, _P - 2, _P) % _P, (y * y + x * x) * pow(1 - t, _P - 2, _P) % _P)


def _is_small_order(point: tuple[int, int]) -> bool:
    """Whether 8·point is the identity."""
    for _ in range(3):
        point = _double(point)
    return point == (0, 1)


def _require_cryptography() -> Any:
    """The Ed25519 public-key class of `cryptography`, or an ImportError saying how to get it."""
    try:
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    except ImportError as error:
        raise ImportError(f"checking Ed25519 signatures needs the cryptography package: {INSTALL_HINT}") from error
    return Ed25519PublicKey


def _verify_strict(public: bytes, message: bytes, signature: bytes) -> bool:
    """ed25519-dalek's `verify_strict`: a 64-byte signature with a canonical s, neither R nor the
    key of small order, and R = [s]B - [k]A exactly."""
    if len(signature) != 64 or int.from_bytes(signature[32:], "little") >= _L:
        return False
    r_point, a_point = _decompress(signature[:32]), _decompress(public)
    if r_point is None or a_point is None or _is_small_order(r_point) or _is_small_order(a_point):
        return False
    public_key_class = _require_cryptography()
    from cryptography.exceptions import InvalidSignature

    try:
        public_key_class.from_public_bytes(public).verify(signature, message)
    except (InvalidSignature, ValueError):
        return False
    return True


# ---- keys and signed notes (c2sp.org/signed-note) ------------------------------------------------

_ALG_ED25519 = 1
_MAX_NOTE_SIZE = 1_000_000
_MAX_NOTE_SIGNATURES = 100
_NOTE_CONTROL = re.compile("[\x00-\x09\x0b-\x1f]")
_EM_DASH = "\u2014 "


def key_id(name: str, encoded: bytes) -> int:
    """The key id of `name` and an encoded key (0x01 ‖ public key): the first four bytes of
    SHA-256(name ‖ "\\n" ‖ encoded), big-endian."""
    return int.from_bytes(hashlib.sha256(name.encode("utf-8") + b"\n" + encoded).digest()[:4], "big")


def _is_note_name(name: str) -> bool:
    """The signed-note rule for a key name: non-empty, no white space, no '+'."""
    return bool(name) and "+" not in name and not any(char in _RUST_WHITESPACE for char in name)


@dataclass(frozen=True)
class NoteVerifier:
    """A verifier key, `NAME+ID+BASE64(0x01 ‖ Ed25519 public key)`: who may have signed."""

    name: str
    id: int
    key: bytes

    @classmethod
    def parse(cls, text: str) -> "NoteVerifier":
        """Read a verifier key (surrounding white space ignored), checking its id against its
        key and its key against the curve. Raises ValueError."""
        text = _rust_trim(text)

        def bad(why: str) -> ValueError:
            return ValueError(f"{_debug(text)} is not a signed-note Ed25519 verifier key: {why}")

        parts = text.split("+", 2)  # the base64 key may itself hold a '+'
        if len(parts) != 3:
            raise bad("it does not have the fields NAME+ID+KEY")
        name, id_text, key_text = parts
        if not _is_note_name(name) or len(name.encode("utf-8")) > 128:
            raise bad("its name is empty, too long or has a space")
        if not _HEX8.fullmatch(id_text):
            raise bad("its id is not 8 hex digits")
        encoded = _b64decode(key_text)
        if encoded is None:
            raise bad("its key is not base64")
        if len(encoded) != 33 or encoded[0] != _ALG_ED25519:
            raise bad("its key is not 0x01 followed by a 32-byte Ed25519 public key")
        if key_id(name, encoded) != int(id_text, 16):
            raise bad("its id does not match its key")
        if _decompress(encoded[1:]) is None:
            raise bad("its key is not a point on the curve")
        return cls(name, int(id_text, 16), encoded[1:])

    def encoded(self) -> str:
        """The key in its text form."""
        return f"{self.name}+{self.id:08x}+{_b64(bytes([_ALG_ED25519]) + self.key)}"

    def verify(self, message: bytes, signature: bytes) -> bool:
        """Whether `signature` is this key's (strict Ed25519) signature of `message`."""
        return _verify_strict(self.key, message, signature)


class NoteRefusal(Exception):
    """Why a signed note did not verify: `kind` is "malformed" (not a signed note), "untrusted"
    (no signature by a trusted key; `seen` lists the `name+id` of each) or "bad_signature" (a
    trusted key's signature fails; `key` names it)."""

    def __init__(self, kind: str, message: str, seen: Sequence[str] = (), key: str = "") -> None:
        super().__init__(message)
        self.kind = kind
        self.seen = list(seen)
        self.key = key


def _malformed_note(why: str = "malformed note") -> NoteRefusal:
    return NoteRefusal("malformed", why)


def _signature_line(line: str) -> tuple[str, int, bytes]:
    """One signature line: `— NAME BASE64(id ‖ signature)`."""
    if not line.startswith(_EM_DASH):
        raise _malformed_note()
    name, space, encoded = line[len(_EM_DASH) :].partition(" ")
    raw = _b64decode(encoded) if space else None
    if raw is None or not encoded or len(raw) < 5 or not _is_note_name(name):
        raise _malformed_note()
    return name, int.from_bytes(raw[:4], "big"), raw[4:]


def _read_note(note: bytes) -> tuple[bytes, list[tuple[str, int, bytes]]]:
    """A signed note's text and signature lines, with signed_note's `Note::from_bytes` rules:
    at most 1,000,000 bytes of UTF-8, no control character but newline, a text, a blank line
    and 1 to 100 signature lines, each ending in a newline."""
    if len(note) > _MAX_NOTE_SIZE:
        raise _malformed_note()
    try:
        message = note.decode("utf-8")
    except UnicodeDecodeError:
        raise _malformed_note() from None
    if _NOTE_CONTROL.search(message):
        raise _malformed_note()
    split = message.rfind("\n\n")
    if split < 0 or not message.endswith("\n", split + 2):
        raise _malformed_note()
    lines = message[split + 2 : -1].split("\n")
    if len(lines) > _MAX_NOTE_SIGNATURES:
        raise _malformed_note()
    return (message[: split + 1]).encode("utf-8"), [_signature_line(line) for line in lines]


def open_note(note: bytes, trusted: Sequence[NoteVerifier]) -> str:
    """The text of `note` when at least one trusted key signed it and no trusted key's signature
    fails (a trusted key: the same name and key id). Raises `NoteRefusal`."""
    text, signatures = _read_note(note)
    verified = False
    seen: list[str] = []
    for name, id_, signature in signatures:
        key = next((key for key in trusted if key.name == name and key.id == id_), None)
        label = f"{name}+{id_:08x}"
        if key is None:
            seen.append(label)
        elif not key.verify(text, signature):
            raise NoteRefusal("bad_signature", f"the signature by {label} does not verify", key=label)
        else:
            verified = True
    if not verified:
        raise NoteRefusal("untrusted", "no signature is by a trusted key", seen=seen)
    return text.decode("utf-8")


# ---- checkpoints ---------------------------------------------------------------------------------

_TIME_LINE = "warden-time"
_OPEN_LINE = "warden-open"


@dataclass(frozen=True)
class CheckpointBody:
    """What a checkpoint's text states."""

    origin: str
    size: int
    root: bytes
    time: str
    open: int
    companion_hash: bytes


def _is_origin(origin: str) -> bool:
    """Whether `origin` may name a log: 1 to 255 printable ASCII characters, no space, no '+'."""
    return 0 < len(origin) < 256 and all("!" <= char <= "~" and char != "+" for char in origin)


def _decode_hash(text: str) -> bytes | None:
    """A base64 SHA-256, decoded (exactly 32 bytes), else `None`."""
    raw = _b64decode(text)
    return raw if raw is not None and len(raw) == 32 else None


def parse_checkpoint(text: str) -> CheckpointBody:
    """Read a checkpoint's text (five lines: origin, size, root, `warden-time`, `warden-open`).
    Raises ValueError saying what is wrong."""
    if not text.endswith("\n"):
        raise ValueError("the text does not end with a newline")
    lines = text[:-1].split("\n")
    if len(lines) != 5:
        raise ValueError(
            f"a checkpoint has 5 lines (origin, size, root, {_TIME_LINE}, {_OPEN_LINE}); this has {len(lines)}"
        )
    origin, size_text, root_text, time_line, open_line = lines
    if not _is_origin(origin):
        raise ValueError(f"{_debug(origin)} is not an origin")
    size = _decimal_u64(size_text)
    if size is None:
        raise ValueError(f"the size {_debug(size_text)} is not a decimal number")
    root = _decode_hash(root_text)
    if root is None:
        raise ValueError(f"the root {_debug(root_text)} is not a base64 SHA-256")
    time = time_line[len(_TIME_LINE) + 1 :]
    if not time_line.startswith(_TIME_LINE + " ") or not is_time(time):
        raise ValueError(f"the fourth line {_debug(time_line)} is not `{_TIME_LINE} <RFC 3339 time>`")
    bad_open = ValueError(f"the fifth line {_debug(open_line)} is not `{_OPEN_LINE} <count> <base64 SHA-256>`")
    if not open_line.startswith(_OPEN_LINE + " "):
        raise bad_open
    count_text, space, hash_text = open_line[len(_OPEN_LINE) + 1 :].partition(" ")
    count = _decimal_u64(count_text)
    companion_hash = _decode_hash(hash_text)
    if not space or count is None or companion_hash is None:
        raise bad_open
    return CheckpointBody(origin, size, root, time, count, companion_hash)


# ---- the verifier --------------------------------------------------------------------------------


class _Failure(Exception):
    """The first check that failed: its reason name and what exactly failed."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


@dataclass
class _Checked:
    """A checkpoint that passed step 2."""

    number: int
    size: int
    root: bytes
    time: str
    companion: dict[str, Any]
    #: The signed note, as the bundle holds it.
    note: str

    def open_keys(self) -> set[tuple[str, int]]:
        return {(effect["effect_key"], effect["attempt"]) for effect in self.companion["open"]}


@dataclass
class _Verdict:
    ok: bool = False
    reason: str | None = None
    detail: str = ""
    receipts: int = 0
    checkpoints: int = 0
    keys_pinned: bool = False
    open_at_end: int = 0
    closed_without_receipt: int = 0
    anchors: int = 0
    anchors_checked: int = 0
    policies_carried: list[str] = field(default_factory=list)
    policies_missing: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "reason": self.reason,
            "detail": self.detail,
            "receipts": self.receipts,
            "checkpoints": self.checkpoints,
            "keys_pinned": self.keys_pinned,
            "open_at_end": self.open_at_end,
            "closed_without_receipt": self.closed_without_receipt,
            "anchors": self.anchors,
            "anchors_checked": self.anchors_checked,
            "policies_carried": list(self.policies_carried),
            "policies_missing": list(self.policies_missing),
        }


def _os_error(error: OSError) -> str:
    """An OSError as Rust's `io::Error` displays it."""
    if error.errno is not None:
        return f"{os.strerror(error.errno)} (os error {error.errno})"
    return str(error)


def _open_error(name: str, error: Exception) -> _Failure:
    if isinstance(error, OSError):
        why = _os_error(error)
    elif isinstance(error, UnicodeDecodeError):
        why = "stream did not contain valid UTF-8"
    else:
        why = "file name contained an unexpected NUL byte"
    return _Failure("bundle_malformed", f"cannot read {name}: {why}")


def _read_text(directory: str, name: str) -> str:
    """A bundle file as UTF-8 text (`std::fs::read_to_string`)."""
    try:
        with open(os.path.join(directory, name), "rb") as file:
            return file.read().decode("utf-8")
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise _open_error(name, error) from None


def _parse_file(directory: str, name: str, kind: _Struct) -> dict[str, Any]:
    text = _read_text(directory, name)
    try:
        return _parse_typed(text, kind)
    except _JsonError as error:
        raise _Failure("bundle_malformed", f"{name} is not what it should be: {error}") from None


def _hashes(texts: Iterable[str], name: str) -> list[bytes]:
    out = []
    for text in texts:
        decoded = _decode_hash(text)
        if decoded is None:
            raise _Failure("bundle_malformed", f"{name} holds {_debug(text)}, not a base64 SHA-256")
        out.append(decoded)
    return out


def _trusted_keys(directory: str, manifest: dict[str, Any], trusted: Sequence[NoteVerifier]) -> list[NoteVerifier]:
    """The caller's keys, else the bundle's own (`keys/…` as the manifest lists them)."""
    if trusted:
        return list(trusted)
    keys = []
    for name in manifest["keys"]:
        text = _read_text(directory, name)
        try:
            keys.append(NoteVerifier.parse(text))
        except ValueError as error:
            raise _Failure("bundle_malformed", f"{name}: invalid input: {error}") from None
    return keys


def _check_manifest(directory: str, trusted: Sequence[NoteVerifier]) -> tuple[dict[str, Any], list[NoteVerifier]]:
    """Step 1: the manifest and the keys."""
    manifest = _parse_file(directory, "bundle.json", _MANIFEST)
    if manifest["format"] != BUNDLE_FORMAT:
        raise _Failure(
            "bundle_malformed", f"bundle.json says format {_debug(manifest['format'])}, not {_debug(BUNDLE_FORMAT)}"
        )
    keys = _trusted_keys(directory, manifest, trusted)
    numbers = manifest["checkpoints"]
    if not numbers:
        raise _Failure("bundle_malformed", "bundle.json lists no checkpoint")
    if any(old >= new for old, new in zip(numbers, numbers[1:])):
        raise _Failure("bundle_malformed", "bundle.json lists its checkpoints out of number order")
    _listed_policies(manifest)
    return manifest, keys


def _listed_policies(manifest: dict[str, Any]) -> set[str]:
    """Step 1's look at the policies bundle.json lists: each once, and those it says are missing
    among them. Returns the listed hashes."""
    listed: set[str] = set()
    for policy in manifest["policies"]:
        if policy in listed:
            raise _Failure("bundle_malformed", f"bundle.json lists policy {_debug(policy)} twice")
        listed.add(policy)
    missing: set[str] = set()
    for policy in manifest["policies_missing"]:
        if policy in missing:
            raise _Failure("bundle_malformed", f"bundle.json lists policy {_debug(policy)} as missing twice")
        missing.add(policy)
        if policy not in listed:
            raise _Failure(
                "bundle_malformed", f"bundle.json lists policy {_debug(policy)} as missing but not among the policies"
            )
    return listed


_POLICY_HASH = re.compile(r"sha256:([0-9a-f]{64})")


def policy_file(policy_hash: str) -> str | None:
    """A policy's file name under `policies/`: the hex of its `sha256:` hash; None for a hash of
    another form (a tool's own), which no file can carry."""
    match = _POLICY_HASH.fullmatch(policy_hash)
    return f"policies/{match.group(1)}.json" if match else None


def file_anchor_line(number: int, size: int, note: str) -> str:
    """The line the file anchor appends for checkpoint `number` of `size` receipts whose signed
    note is `note`, without its newline: what a `file` anchor receipt must be."""
    line = {
        "format": FILE_LINE_FORMAT,
        "checkpoint": number,
        "size": size,
        "sha256": hashlib.sha256(note.encode("utf-8")).hexdigest(),
        "note": note,
    }
    return json.dumps(line, separators=(",", ":"), ensure_ascii=False)


def _check_anchors(directory: str, checked: Sequence["_Checked"], verdict: "_Verdict") -> None:
    """Step 8: each line of `anchors.jsonl` names a checkpoint of the bundle and carries what its
    kind needs; a `file` receipt is that checkpoint's line. An `rfc3161` token is carried
    unchecked here (it is CMS: `warden verify-bundle --tsa-cert FILE` checks it)."""
    try:
        with open(os.path.join(directory, ANCHORS_FILE), "rb") as file:
            text = file.read().decode("utf-8")
    except FileNotFoundError:
        return  # a bundle exported before anchors were wired: nothing to check
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise _open_error(ANCHORS_FILE, error) from None
    by_number = {cp.number: cp for cp in checked}
    # Counted into the verdict only when every line passed, as the Rust verifier does.
    lines = checked_lines = 0
    for at, raw in enumerate(_rust_lines(text), start=1):
        try:
            line = _parse_typed(raw, _ANCHOR_LINE)
        except _JsonError as error:
            raise _Failure("bundle_malformed", f"{ANCHORS_FILE} line {at} is not an anchor line: {error}") from None
        number = line["checkpoint"]
        if number not in by_number:
            raise _Failure(
                "bundle_malformed",
                f"{ANCHORS_FILE} line {at} anchors checkpoint {number}, which the bundle does not hold",
            )
        receipt = None
        if line["receipt"] is not None:
            receipt = _b64decode(line["receipt"])
            if receipt is None:
                raise _Failure("bundle_malformed", f"{ANCHORS_FILE} line {at}'s receipt is not base64")
        lines += 1
        kind = line["kind"]
        if kind in ("file", "rfc3161") and receipt is None:
            raise _Failure("bundle_malformed", f"{ANCHORS_FILE} line {at} is a {kind} anchor without its receipt")
        if kind == "file" and receipt is not None:
            cp = by_number[number]
            if receipt != file_anchor_line(number, cp.size, cp.note).encode("utf-8"):
                raise _Failure(
                    "anchor_invalid",
                    f"{ANCHORS_FILE} line {at}: the line {line['sink']} wrote is not checkpoint {number}'s",
                )
            checked_lines += 1
    verdict.anchors, verdict.anchors_checked = lines, checked_lines


def _check_policies(directory: str, manifest: dict[str, Any], named: set[str], verdict: "_Verdict") -> None:
    """Step 6: every policy listed is named by a receipt the bundle holds; each one not listed as
    missing is carried as `policies/<hex>.json`, whose bytes hash to its name."""
    for policy in manifest["policies"]:
        if policy not in named:
            raise _Failure("bundle_malformed", f"bundle.json lists policy {_debug(policy)}, which no receipt names")
    carried = []
    for policy in manifest["policies"]:
        if policy in manifest["policies_missing"]:
            continue
        name = policy_file(policy)
        if name is None:
            raise _Failure(
                "bundle_malformed",
                f"bundle.json lists policy {_debug(policy)} as carried, but no file can carry a hash of that form",
            )
        try:
            with open(os.path.join(directory, name), "rb") as file:
                data = file.read()
        except (OSError, ValueError) as error:
            raise _open_error(name, error) from None
        if "sha256:" + hashlib.sha256(data).hexdigest() != policy:
            raise _Failure("policy_altered", f"{name} does not hash to {policy}: it is not the policy the receipts name")
        carried.append(policy)
    verdict.policies_carried = carried
    verdict.policies_missing = list(manifest["policies_missing"])


def _open_checkpoint(directory: str, name: str, keys: Sequence[NoteVerifier]) -> tuple[str, str]:
    """The note file's text and the checkpoint text it signs."""
    note = _read_text(directory, name)
    try:
        return note, open_note(note.encode("utf-8"), keys)
    except NoteRefusal as refusal:
        if refusal.kind == "malformed":
            raise _Failure("bundle_malformed", f"{name} is not a signed note: {refusal}") from None
        if refusal.kind == "untrusted":
            raise _Failure(
                "key_untrusted", f"{name} is signed only by keys not trusted here ({', '.join(refusal.seen)})"
            ) from None
        raise _Failure("signature_invalid", f"{name}'s signature by {refusal.key} does not verify") from None


def _check_checkpoint(directory: str, number: int, origin: str, keys: Sequence[NoteVerifier]) -> _Checked:
    """Step 2 for one checkpoint: signed by a trusted key, its text a checkpoint of this origin,
    its companion the one it hashes and stating what it states."""
    name = f"checkpoints/{number:06d}.note"
    note, text = _open_checkpoint(directory, name, keys)
    try:
        body = parse_checkpoint(text)
    except ValueError as error:
        raise _Failure("checkpoint_altered", f"{name}: {error}") from None
    if body.origin != origin:
        raise _Failure("checkpoint_altered", f"{name} is of the log {_debug(body.origin)}, not {_debug(origin)}")
    companion_name = f"checkpoints/{number:06d}.json"
    companion_text = _read_text(directory, companion_name)
    if hashlib.sha256(companion_text.encode("utf-8")).digest() != body.companion_hash:
        raise _Failure("checkpoint_altered", f"{companion_name} is not the document {name} signed")
    try:
        companion = _parse_typed(companion_text, _COMPANION)
    except _JsonError as error:
        raise _Failure("checkpoint_altered", f"{companion_name} does not parse: {error}") from None
    agrees = (
        companion["format"] == COMPANION_FORMAT
        and companion["checkpoint"] == number
        and companion["origin"] == body.origin
        and companion["size"] == body.size
        and companion["time"] == body.time
        and len(companion["open"]) == body.open
    )
    if not agrees:
        raise _Failure("checkpoint_altered", f"{companion_name} does not state what {name} states")
    return _Checked(number, body.size, body.root, body.time, companion, note)


def _check_history(checked: Sequence[_Checked]) -> None:
    """Step 3: one root per size, sizes and times never going back."""
    roots: dict[int, tuple[int, bytes]] = {}
    for cp in checked:
        if cp.size in roots and roots[cp.size][1] != cp.root:
            raise _Failure(
                "log_forked",
                f"checkpoints {roots[cp.size][0]} and {cp.number} both sign {cp.size} receipts with different roots",
            )
        roots[cp.size] = (cp.number, cp.root)
    for old, new in zip(checked, checked[1:]):
        if new.size < old.size:
            raise _Failure(
                "log_forked",
                f"checkpoint {new.number} signs {new.size} receipts, fewer than checkpoint {old.number}'s {old.size}",
            )
        if new.time < old.time:
            raise _Failure(
                "checkpoint_backdated",
                f"checkpoint {new.number} is dated {new.time}, before checkpoint {old.number} ({old.time})",
            )


def _check_proofs(directory: str, checked: Sequence[_Checked]) -> None:
    """Step 4: the consistency proofs between consecutive checkpoints."""
    for old, new in zip(checked, checked[1:]):
        name = f"proofs/consistency-{old.number:06d}-{new.number:06d}.json"
        file = _parse_file(directory, name, _CONSISTENCY)
        proof = _hashes(file["proof"], name)
        sound = (
            file["old_size"] == old.size
            and file["new_size"] == new.size
            and (old.size == 0 or check_consistency(proof, old.size, old.root, new.size, new.root))
        )
        if not sound:
            raise _Failure(
                "proof_invalid", f"{name} does not prove checkpoint {new.number} extends checkpoint {old.number}"
            )


def _start(directory: str, manifest: dict[str, Any]) -> tuple[Frontier, str]:
    """Where the receipts pick the log up: the empty tree, or `start.json`'s frontier."""
    if manifest["start_size"] == 0:
        return Frontier(), GENESIS_HASH
    start = _parse_file(directory, "start.json", _START)
    subtrees = _hashes(start["frontier"], "start.json")
    frontier = Frontier.resume(start["size"], subtrees) if start["size"] == manifest["start_size"] else None
    if frontier is None:
        raise _Failure("bundle_malformed", "start.json's frontier does not fit its size")
    return frontier, start["last_hash"]


_Approvals = dict[str, tuple[str, Union[str, None]]]


def _load_approvals(directory: str) -> _Approvals:
    """`approvals.jsonl`: approval id → (action hash, approver)."""
    text = _read_text(directory, "approvals.jsonl")
    out: _Approvals = {}
    for at, line in enumerate(_rust_lines(text), start=1):
        try:
            value = _parse_value(line)
        except _JsonError as error:
            raise _Failure("bundle_malformed", f"approvals.jsonl line {at} is not JSON: {error}") from None
        approval_id, action_hash = _get_str(value, "approval_id"), _get_str(value, "action_hash")
        if approval_id is None or action_hash is None:
            raise _Failure("bundle_malformed", f"approvals.jsonl line {at} has no approval_id or action_hash")
        out[approval_id] = (action_hash, _get_str(value, "approver"))
    return out


def _get(document: Any, name: str) -> Any:
    """`Value::get`: a member of an object, else `None`."""
    return document.get(name) if isinstance(document, dict) else None


def _get_str(document: Any, name: str) -> str | None:
    value = _get(document, name)
    return value if isinstance(value, str) else None


def _get_u64(document: Any, name: str) -> int | None:
    value = _get(document, name)
    return value if type(value) is int else None


def _check_approval(approvals: _Approvals, approval_id: str, document: Any, seq: int) -> None:
    if approval_id not in approvals:
        raise _Failure(
            "bundle_malformed", f"receipt {seq} spent approval {approval_id}, which approvals.jsonl does not hold"
        )
    action_hash, approver = approvals[approval_id]
    if action_hash != (_get_str(document, "action_hash") or "") or _get_str(document, "approver") != approver:
        raise _Failure(
            "receipt_altered", f"receipt {seq} and approval {approval_id} disagree on the action or the approver"
        )


def _terminal_outcome(document: Any) -> tuple[str, int] | None:
    """(effect_key, attempt) of a receipt recording a committed or failed outcome."""
    key, attempt = _get_str(document, "effect_key"), _get_u64(document, "attempt")
    if key is None or attempt is None or attempt > _U32_MAX:
        return None
    terminal = any(_get_str(document, name) in ("committed", "failed") for name in ("result", "execution"))
    return (key, attempt) if terminal else None


def _outcomes_accounted(
    old: _Checked, new: _Checked, waiting: set[tuple[str, int]], closed: set[tuple[str, int]]
) -> None:
    still_open = new.open_keys()
    attested = {(c["effect_key"], c["attempt"]) for c in new.companion["closed_without_receipt"]}
    for key in sorted(waiting):
        if key not in still_open and key not in closed and key not in attested:
            raise _Failure(
                "outcome_missing",
                f"effect {_debug(key[0])} attempt {key[1]} was open at checkpoint {old.number}; checkpoint "
                f"{new.number} counts it closed, but no receipt records its outcome",
            )


def _receipt_lines(file: BinaryIO) -> Iterator[bytes]:
    try:
        yield from file
    except OSError as error:
        raise _Failure("bundle_malformed", f"cannot read receipts.jsonl: {_os_error(error)}") from None


class _ReceiptWalk:
    """Step 5: the receipts, streamed, against the checkpoints (Rust's `Walk`)."""

    def __init__(
        self,
        checked: Sequence[_Checked],
        frontier: Frontier,
        prev_hash: str,
        approvals: _Approvals,
        listed: set[str],
        verdict: _Verdict,
    ) -> None:
        self.checked = checked
        #: The policy hashes bundle.json lists, and those a receipt named.
        self.listed = listed
        self.named: set[str] = set()
        self.frontier = frontier
        self.prev_hash = prev_hash
        self.approvals = approvals
        self.verdict = verdict
        self.pending_gap: int | None = None
        #: The next checkpoint to reach, and the last one reached.
        self.next = 0
        self.previous: int | None = None
        #: The effects the last checkpoint reached saw open, and those of them a receipt closed since.
        self.waiting: set[tuple[str, int]] = set()
        self.closed: set[tuple[str, int]] = set()
        #: The latest `finished_at` so far.
        self.latest = ""

    def run(self, lines: Iterable[bytes]) -> None:
        self.arrive()
        for line in lines:
            self.receipt(line)
        if self.pending_gap is not None:
            missing = self.pending_gap
            raise _Failure("receipt_dropped", f"receipt {missing} is missing: the file ends with receipt {missing + 1}")
        if self.next < len(self.checked):
            cp = self.checked[self.next]
            raise _Failure(
                "truncated",
                f"checkpoint {cp.number} signs {cp.size} receipts; the bundle holds receipts only through "
                f"{self.frontier.size}",
            )

    def receipt(self, line: bytes) -> None:
        """One line of `receipts.jsonl`."""
        expected = self.frontier.size + 1
        if not line.endswith(b"\n"):
            raise _Failure(
                "receipt_malformed", f"the line after receipt {expected - 1} does not end with a newline"
            )
        text = line[:-1]
        try:
            document = _parse_value(text.decode("utf-8"))
        except (UnicodeDecodeError, _JsonError) as error:
            raise _Failure("receipt_malformed", f"the line for receipt {expected} is not JSON: {error}") from None
        seq = _get_u64(document, "seq")
        if seq is None:
            raise _Failure("receipt_malformed", f"the line for receipt {expected} has no seq")
        if self.pending_gap is not None:
            missing = self.pending_gap
            if seq == missing:
                raise _Failure("receipts_reordered", f"receipt {missing} comes after receipt {missing + 1}")
            raise _Failure(
                "receipt_dropped", f"receipt {missing} is missing: receipt {missing + 1} follows receipt {missing - 1}"
            )
        if seq < expected:
            raise _Failure("receipts_reordered", f"receipt {seq} comes after receipt {expected - 1}")
        if seq > expected:
            self.pending_gap = expected
            return
        if (_get_str(document, "prev_hash") or "") != self.prev_hash:
            raise _Failure(
                "receipt_altered",
                f"receipt {seq} names a previous hash that is not receipt {seq - 1}'s: receipt {seq - 1} was altered",
            )
        self.prev_hash = "sha256:" + hashlib.sha256(text).hexdigest()
        self.frontier.push(leaf_hash(text))
        self.verdict.receipts += 1
        finished = _get_str(document, "finished_at")
        if finished is not None and finished > self.latest:
            self.latest = finished
        # A receipt names the approval it spent with its approver; a refusal may name one it
        # was shown (bound to another action) with no approver.
        approval_id = _get_str(document, "approval_id")
        if _get_str(document, "approver") is not None and approval_id is not None:
            _check_approval(self.approvals, approval_id, document, seq)
        policy = _get_str(document, "policy_hash")
        if policy is not None:
            if policy not in self.listed:
                raise _Failure(
                    "bundle_malformed", f"receipt {seq} names policy {_debug(policy)}, which bundle.json does not list"
                )
            self.named.add(policy)
        key = _terminal_outcome(document)
        if key is not None and key in self.waiting:
            self.closed.add(key)
        self.arrive()

    def arrive(self) -> None:
        """Check every checkpoint whose size the stream has reached: its root, its time against the
        receipts it covers, and every effect the one before it saw open."""
        while self.next < len(self.checked) and self.checked[self.next].size == self.frontier.size:
            cp = self.checked[self.next]
            if cp.root != self.frontier.root():
                raise _Failure(
                    "root_mismatch", f"the receipts through {cp.size} do not hash to checkpoint {cp.number}'s root"
                )
            if self.latest > cp.time:
                raise _Failure(
                    "checkpoint_backdated",
                    f"checkpoint {cp.number} is dated {cp.time}, before a receipt it covers finished ({self.latest})",
                )
            if self.previous is not None:
                _outcomes_accounted(self.checked[self.previous], cp, self.waiting, self.closed)
                self.verdict.closed_without_receipt += len(cp.companion["closed_without_receipt"])
            self.waiting = cp.open_keys()
            self.closed = set()
            self.previous = self.next
            self.next += 1


def _run(directory: str, trusted: Sequence[NoteVerifier], verdict: _Verdict) -> str:
    """Every check, in order; what was proven, or a `_Failure`."""
    manifest, keys = _check_manifest(directory, trusted)
    checked = [_check_checkpoint(directory, number, manifest["origin"], keys) for number in manifest["checkpoints"]]
    verdict.checkpoints = len(checked)
    _check_history(checked)
    _check_proofs(directory, checked)
    frontier, prev_hash = _start(directory, manifest)
    older = next((cp for cp in checked if cp.size < frontier.size), None)
    if older is not None:
        raise _Failure(
            "bundle_malformed",
            f"checkpoint {older.number} covers {older.size} receipts, fewer than the {frontier.size} the bundle "
            "starts after",
        )
    approvals = _load_approvals(directory)
    walk = _ReceiptWalk(checked, frontier, prev_hash, approvals, set(manifest["policies"]), verdict)
    try:
        file = open(os.path.join(directory, "receipts.jsonl"), "rb")
    except OSError as error:
        raise _open_error("receipts.jsonl", error) from None
    with file:
        walk.run(_receipt_lines(file))
    _check_anchors(directory, checked, verdict)
    _check_policies(directory, manifest, walk.named, verdict)
    last = checked[-1]
    verdict.open_at_end = len(last.companion["open"])
    return (
        f"{verdict.receipts} receipts hash to the roots of {len(checked)} checkpoint(s) (last: {last.number}, "
        f"{frontier.size} receipts); every effect a checkpoint saw open is open later, closed by a receipt, "
        "or attested closed without one"
    )


def trusted_key(value: "str | os.PathLike[str]") -> NoteVerifier:
    """A key to pin: a verifier key (`NAME+ID+BASE64`), or the path of a file holding one.
    Raises ValueError."""
    value = os.fspath(value)
    try:
        return NoteVerifier.parse(value)
    except ValueError:
        pass
    try:
        with open(value, "rb") as file:
            contents = file.read().decode("utf-8")
    except (OSError, UnicodeDecodeError, ValueError) as error:
        why = _os_error(error) if isinstance(error, OSError) else "stream did not contain valid UTF-8"
        raise ValueError(
            f"--key {value}: neither a verifier key (NAME+ID+BASE64) nor a readable file ({why})"
        ) from None
    try:
        return NoteVerifier.parse(contents)
    except ValueError as error:
        raise ValueError(f"--key {value}: invalid input: {error}") from None


def verify_bundle(
    path: "str | os.PathLike[str]", keys: "Sequence[str | os.PathLike[str] | NoteVerifier] | None" = None
) -> dict[str, Any]:
    """Check the bundle in the directory `path`.

    `keys`: the verifier keys to trust (`NAME+ID+BASE64`, a file holding one, or a parsed
    `NoteVerifier`); empty or `None` trusts the bundle's own keys, so a swapped key goes unseen
    (`keys_pinned` is then False). A key that does not parse raises ValueError; a missing
    `cryptography` package raises ImportError.

    Returns the verdict: `ok`, `reason` (one of `REASONS`, or None), `detail`, `receipts` and
    `checkpoints` checked, `keys_pinned`, `open_at_end` (effects the last checkpoint counts
    open), `closed_without_receipt` (effects a checkpoint saw open that closed with no
    receipt, as the signer attests), `anchors` (lines of `anchors.jsonl`) and `anchors_checked`
    (those whose receipt was checked: each `file` line; RFC 3161 tokens are left to
    `warden verify-bundle --tsa-cert FILE`), `policies_carried` (the policy hashes the receipts name
    whose policy the bundle carries, each file hashing to its name) and `policies_missing` (those
    it does not carry: nothing shows what they said); the two lists are filled only when every
    check passed."""
    _require_cryptography()
    trusted = [key if isinstance(key, NoteVerifier) else trusted_key(key) for key in keys or ()]
    verdict = _Verdict(keys_pinned=bool(trusted))
    try:
        verdict.detail = _run(os.fspath(path), trusted, verdict)
        verdict.ok = True
    except _Failure as failure:
        verdict.reason = failure.reason
        verdict.detail = failure.detail
    return verdict.as_dict()


# ---- the command line ----------------------------------------------------------------------------


def _human(verdict: dict[str, Any]) -> str:
    if not verdict["ok"]:
        return f"bundle refused: {verdict['reason']}: {verdict['detail']}\n"
    pinned = (
        ""
        if verdict["keys_pinned"]
        else "\nthe keys were taken from the bundle itself; pass --key VERIFIER_KEY to pin the signer"
    )
    return (
        f"bundle ok: {verdict['detail']}\nopen at the last checkpoint: {verdict['open_at_end']}; "
        f"closed without a receipt (attested by the signer): {verdict['closed_without_receipt']}\n"
        f"{_policies_line(verdict)}{_anchors_line(verdict)}{pinned}\n"
    )


def _anchors_line(verdict: dict[str, Any]) -> str:
    """The verdict's line about the anchor receipts, as every verifier prints it."""
    carried, unchecked = verdict["anchors"], verdict["anchors"] - verdict["anchors_checked"]
    if carried == 0:
        return "\nno anchor receipts in the bundle"
    if unchecked == 0:
        return f"\nanchor receipts: {carried}, every one checked"
    return (
        f"\nanchor receipts: {carried}, {unchecked} not checked (an RFC 3161 token needs its TSA's certificate: "
        "warden verify-bundle --tsa-cert FILE; other kinds are carried as they came)"
    )


def _policies_line(verdict: dict[str, Any]) -> str:
    """The verdict's line about the policies, as every verifier prints it."""

    def listed(hashes: list[str]) -> str:
        return ", ".join(hashes) if hashes else "none"

    return (
        f"policies carried: {listed(verdict['policies_carried'])}; "
        f"not carried (nothing shows what they said): {listed(verdict['policies_missing'])}"
    )


def main(argv: Sequence[str] | None = None, out: Callable[[str], Any] | None = None) -> int:
    """`python -m warden.evidence DIR [--key VKEY_OR_FILE ...] [--json]`: exit 0 when the bundle
    is sound, 1 when it is refused (naming the reason), 2 on a usage error."""
    parser = argparse.ArgumentParser(
        prog="python -m warden.evidence",
        description="Check a Warden evidence bundle offline (the checks of `warden verify-bundle`).",
    )
    parser.add_argument("dir", help="the bundle's directory")
    parser.add_argument(
        "--key",
        action="append",
        default=[],
        metavar="VKEY",
        help="a verifier key to trust (NAME+ID+BASE64, or a file holding one); repeatable. Without it "
        "the bundle's own keys are trusted, and a swapped key goes unseen.",
    )
    parser.add_argument("--json", action="store_true", help="print the verdict as one JSON document")
    args = parser.parse_args(argv)
    write = out or sys.stdout.write
    try:
        verdict = verify_bundle(args.dir, args.key)
    except (ValueError, ImportError) as error:
        print(f"warden.evidence: {error}", file=sys.stderr)
        return 2
    if args.json:
        write(json.dumps(verdict, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    else:
        write(_human(verdict))
    if not verdict["ok"]:
        print(f"warden.evidence: the bundle does not verify: {verdict['detail']}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
