"""`_ffi.py` declares every function of include/warden.h, with the header's exact shapes."""

from __future__ import annotations

import ctypes
import re
from pathlib import Path
from typing import Any

import pytest

import warden
from warden import _ffi

from conftest import REPO

HEADER = REPO / "include" / "warden.h"


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def header_functions() -> dict[str, tuple[str, list[str]]]:
    """name -> (return type, [parameter types]) for every `warden_*` prototype in the header."""
    text = _strip_comments(HEADER.read_text(encoding="utf-8"))
    functions: dict[str, tuple[str, list[str]]] = {}
    for match in re.finditer(r"([A-Za-z_][\w \t\*]*?)\b(warden_\w+)\s*\(([^)]*)\)\s*;", text):
        returns, name, params = match.group(1), match.group(2), match.group(3)
        types = []
        for param in (p.strip() for p in params.split(",")):
            if param in ("", "void"):
                continue
            # Drop the parameter's name: the last identifier.
            types.append(re.sub(r"\b\w+$", "", param).strip())
        functions[name] = (" ".join(returns.split()), [" ".join(t.split()) for t in types])
    return functions


def header_defines(prefix: str) -> dict[str, int]:
    text = HEADER.read_text(encoding="utf-8")
    return {m.group(1): int(m.group(2)) for m in re.finditer(rf"#define ({prefix}\w*)\s+(\d+)", text)}


# The kind of each C type, in terms both sides can be compared on.
_C_INTEGERS = {
    "int32_t": (4, True),
    "uint32_t": (4, False),
    "warden_result": (4, False),
    "size_t": (ctypes.sizeof(ctypes.c_size_t), False),
    "uint64_t": (8, False),
    "int64_t": (8, True),
}


def c_kind(c_type: str) -> Any:
    bare = c_type.replace("const ", "").replace("struct ", "").strip()
    if bare == "void":
        return "void"
    if bare.endswith("**"):
        return "pointer to opaque pointer"
    if bare == "warden_buf *":
        return "pointer to warden_buf"
    if bare == "warden_propose_options *":
        return "pointer to ProposeOptions"
    if bare in ("uint8_t *", "char *"):
        return "byte pointer"
    if bare.endswith("*"):
        return "opaque pointer"
    if bare == "warden_buf":
        return "warden_buf by value"
    if bare in (
        "warden_credential_fn",
        "warden_approval_fn",
        "warden_precondition_fn",
        "warden_reconcile_fn",
        "warden_anchor_fn",
    ):
        return "function pointer"
    if bare == "bool":
        return "bool"
    if bare in _C_INTEGERS:
        return ("integer",) + _C_INTEGERS[bare]
    raise AssertionError(f"the test does not know the C type {c_type!r}")


def ctypes_kind(t: Any) -> Any:
    if t is None:
        return "void"
    if t is _ffi.WardenBuf:
        return "warden_buf by value"
    if t is ctypes.c_char_p:
        return "byte pointer"
    if t is ctypes.c_void_p:
        return "opaque pointer"
    if t is ctypes.c_bool:
        return "bool"
    if isinstance(t, type) and issubclass(t, ctypes._CFuncPtr):
        return "function pointer"
    if isinstance(t, type) and issubclass(t, ctypes._Pointer):
        if t._type_ is _ffi.WardenBuf:
            return "pointer to warden_buf"
        if t._type_ is ctypes.c_void_p:
            return "pointer to opaque pointer"
        return f"pointer to {t._type_.__name__}"
    if isinstance(t, type) and issubclass(t, ctypes._SimpleCData) and t._type_ in "bBhHiIlLqQ":
        return ("integer", ctypes.sizeof(t), t(-1).value < 0)
    raise AssertionError(f"the test does not know the ctypes type {t!r}")


def test_header_exists_and_declares_the_abi() -> None:
    assert HEADER.is_file(), HEADER
    assert header_defines("WARDEN_ABI_VERSION") == {"WARDEN_ABI_VERSION": _ffi.ABI_VERSION}


def test_every_header_function_is_declared_in_ffi_and_nothing_else_is() -> None:
    in_header = set(header_functions())
    declared = set(_ffi.SIGNATURES)
    assert in_header - declared == set(), "declared in warden.h but missing from _ffi.SIGNATURES"
    assert declared - in_header == set(), "declared in _ffi.SIGNATURES but not in warden.h"


def test_the_package_declares_no_test_only_function() -> None:
    # The test-only C exports (a `--features test-exports` build) are declared by the tests
    # that call them, never by the package a user installs.
    source = (Path(_ffi.__file__)).read_text()
    assert "warden_test_" not in source
    assert not [name for name in _ffi.SIGNATURES if name.startswith("warden_test_")]


@pytest.mark.parametrize("name", sorted(header_functions()))
def test_argtypes_and_restype_match_the_header(name: str) -> None:
    returns, params = header_functions()[name]
    restype, argtypes = _ffi.SIGNATURES[name]
    assert len(argtypes) == len(params), f"{name}: arity {len(argtypes)} in _ffi, {len(params)} in warden.h"
    assert ctypes_kind(restype) == c_kind(returns), f"{name}: return type"
    for index, (declared, c_type) in enumerate(zip(argtypes, params)):
        assert ctypes_kind(declared) == c_kind(c_type), f"{name}: parameter {index} ({c_type})"


def test_the_loaded_library_has_them_declared() -> None:
    lib = _ffi.library()
    for name, (restype, argtypes) in _ffi.SIGNATURES.items():
        fn = lib.fn(name)
        assert fn.restype is restype, name
        assert list(fn.argtypes) == list(argtypes), name


def header_typedef_function(name: str) -> tuple[str, list[str]]:
    """(return type, [parameter types]) of a `typedef R (*name)(params);` in the header."""
    text = _strip_comments(HEADER.read_text(encoding="utf-8"))
    match = re.search(rf"typedef\s+([\w \t\*]+?)\s*\(\s*\*\s*{name}\s*\)\s*\(([^)]*)\)\s*;", text)
    assert match, f"no function pointer typedef {name} in warden.h"
    params = [p.strip() for p in match.group(2).split(",") if p.strip() not in ("", "void")]
    types = [" ".join(re.sub(r"\b\w+$", "", p).strip().split()) for p in params]
    return " ".join(match.group(1).split()), types


@pytest.mark.parametrize(
    ("typedef", "fn_type"),
    [
        ("warden_credential_fn", _ffi.CREDENTIAL_FN),
        ("warden_approval_fn", _ffi.APPROVAL_FN),
        ("warden_precondition_fn", _ffi.PRECONDITION_FN),
        ("warden_anchor_fn", _ffi.ANCHOR_FN),
    ],
)
def test_the_callback_types_match_their_typedefs(typedef: str, fn_type: Any) -> None:
    returns, params = header_typedef_function(typedef)
    assert ctypes_kind(fn_type._restype_) == c_kind(returns)
    assert len(fn_type._argtypes_) == len(params)
    for index, (declared, c_type) in enumerate(zip(fn_type._argtypes_, params)):
        kind = c_kind(c_type)
        # `const uint8_t *reference` is read with its length (no NUL), so it is a void pointer.
        if kind == "byte pointer":
            assert declared is ctypes.c_void_p, f"parameter {index} ({c_type})"
        else:
            assert ctypes_kind(declared) == kind, f"parameter {index} ({c_type})"


def test_owned_outputs_are_void_pointers_so_they_can_be_freed() -> None:
    assert dict(_ffi.WardenBuf._fields_) == {"ptr": ctypes.c_void_p, "len": ctypes.c_size_t}
    for name, (restype, _) in _ffi.SIGNATURES.items():
        if restype is ctypes.c_char_p:
            assert name == "warden_result_name", f"{name} returns an owned string as c_char_p"


def test_result_codes_match_the_header_and_the_library() -> None:
    defines = header_defines("WARDEN_RESULT_")
    assert defines == {name: code for code, name in warden.RESULT_CODES.items()}
    for code, name in warden.RESULT_CODES.items():
        assert warden.result_name(code) == name
    assert warden.result_name(999) == "WARDEN_RESULT_UNKNOWN"


def test_the_propose_options_structure_has_the_headers_fields_in_order() -> None:
    text = re.sub(r"//.*", "", HEADER.read_text(encoding="utf-8"))
    body = re.search(r"typedef struct \{([^}]*)\} warden_propose_options;", text)
    assert body, "warden.h declares warden_propose_options"
    declarations = [re.fullmatch(r"(.*?)(\w+)", d.strip(), re.S) for d in body.group(1).split(";") if d.strip()]
    theirs = [(d.group(2), c_kind(" ".join(d.group(1).split()))) for d in declarations if d]
    ours = [(name, ctypes_kind(kind)) for name, kind in _ffi.ProposeOptions._fields_]
    assert ours == theirs
