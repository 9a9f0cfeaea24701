"""The binding's result-code tables are checked against the library's own list,
src/ffi/result.rs: every code there has its name here and an exception class, and nothing else."""

from __future__ import annotations

import re

import warden
from warden import _errors, _ffi

from conftest import REPO


def _codes_in_result_rs() -> dict[int, str]:
    text = (REPO / "src" / "ffi" / "result.rs").read_text(encoding="utf-8")
    found = re.findall(r"pub const (WARDEN_RESULT_\w+): warden_result = (\d+);", text)
    assert len(found) >= 20, "src/ffi/result.rs no longer reads as expected; update this test"
    return {int(number): name for name, number in found}


def test_the_code_table_is_the_one_in_result_rs() -> None:
    assert warden.RESULT_CODES == _codes_in_result_rs()


def test_every_code_but_ok_has_its_exception_class_and_nothing_else_does() -> None:
    names = set(_codes_in_result_rs().values()) - {"WARDEN_RESULT_OK"}
    assert set(_errors._CLASS_BY_CODE) == names


def test_the_library_names_every_code_as_the_table_does() -> None:
    lib = _ffi.library()
    for number, name in _codes_in_result_rs().items():
        assert lib.result_name(number) == name
