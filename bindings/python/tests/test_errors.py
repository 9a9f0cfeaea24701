"""C results become a Python exception tree carrying `.code`, `.reason` and the refusal fields."""

from __future__ import annotations

import os
import pickle
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import warden
from warden._errors import error_from_result

from conftest import REPO

REFUSALS = {
    100: warden.Denied,
    101: warden.ApprovalRequired,
    102: warden.ApprovalMismatch,
    103: warden.Duplicate,
    104: warden.Duplicate,
    105: warden.Ambiguous,
    106: warden.AttemptCeiling,
    107: warden.NotResolvable,
    108: warden.LateOutcome,
    109: warden.NotFound,
    110: warden.OutOfWindow,
    111: warden.AuthorityEscalation,
}
FAULTS = {
    200: warden.InvalidInput,
    201: warden.StoreFault,
    202: warden.ConfigError,
    203: warden.FetchFault,
    204: warden.Panic,
    205: warden.Poisoned,
    206: warden.AbiMismatch,
}


@pytest.mark.parametrize("code,cls", sorted({**REFUSALS, **FAULTS}.items()))
def test_every_code_maps_to_its_class_and_family(code: int, cls: type) -> None:
    exc = error_from_result(code, None, warden.result_name(code))
    assert type(exc) is cls
    assert exc.code == warden.RESULT_CODES[code]
    assert isinstance(exc, warden.Refused if code < 200 else warden.Fault)
    assert isinstance(exc, warden.WardenError) and isinstance(exc, Exception)
    assert exc.reason and exc.message


def test_an_authority_denial_is_a_denied_with_its_grant() -> None:
    body = b'{"code":"WARDEN_RESULT_DENIED","reason":"authority_revoked","authority":true,"grant_id":"dlg_1","hop":null}'
    exc = error_from_result(100, body)
    assert type(exc) is warden.AuthorityDenied and isinstance(exc, warden.Denied)
    assert (exc.reason, exc.grant_id, exc.hop) == ("authority_revoked", "dlg_1", None)
    assert type(error_from_result(100, b'{"code":"WARDEN_RESULT_DENIED","reason":"rule[2]"}')) is warden.Denied


def test_in_progress_is_a_duplicate_with_that_state() -> None:
    assert error_from_result(104, None, "WARDEN_RESULT_IN_PROGRESS").state == "in_progress"
    assert error_from_result(103, None, "WARDEN_RESULT_DUPLICATE").state == "committed"
    unknown = error_from_result(150, b'{"reason": "new_refusal", "message": "m"}', "WARDEN_RESULT_UNKNOWN")
    assert type(unknown) is warden.Refused and unknown.reason == "new_refusal"


def test_not_executed_is_not_a_warden_error() -> None:
    assert not issubclass(warden.NotExecuted, warden.WardenError)


def test_a_real_refusal_carries_the_error_object(w: warden.Warden, agent: Any) -> None:
    @w.protect("stripe.refund")
    def refund(payment_id: str, amount: int) -> None:
        pass

    refund("pay_1", 1)
    with pytest.raises(warden.Duplicate) as refused:
        refund("pay_1", 1)
    exc = refused.value
    assert (exc.code, exc.reason, exc.state, exc.effect_key) == (
        "WARDEN_RESULT_DUPLICATE",
        "duplicate",
        "committed",
        "refund:pay_1",
    )
    assert exc.details["refusal"] is True
    assert str(exc) == exc.message and "refund:pay_1" in exc.message
    assert exc.request_id is None and exc.attempts is None
    again = pickle.loads(pickle.dumps(exc))
    assert type(again) is warden.Duplicate and again.state == "committed" and again.message == exc.message


def test_the_attempt_ceiling_carries_its_counts(w: warden.Warden, agent: Any) -> None:
    @w.protect("stripe.refund")
    def refund(payment_id: str, amount: int) -> None:
        raise warden.NotExecuted("declined")

    for _ in range(3):
        with pytest.raises(warden.NotExecuted):
            refund("pay_1", 1)
    with pytest.raises(warden.AttemptCeiling) as refused:
        refund("pay_1", 1)
    assert (refused.value.attempts, refused.value.max_attempts) == (3, 3)
    assert refused.value.reason == "attempt_ceiling"


def test_configuration_faults(tmp_path: Path, config: Path) -> None:
    with pytest.raises(warden.ConfigError) as missing:
        warden.Warden(store=tmp_path / "s.redb", config=tmp_path / "nope.yaml")
    assert missing.value.code == "WARDEN_RESULT_CONFIG"
    assert missing.value.details["refusal"] is False
    bad = tmp_path / "bad.yaml"
    bad.write_text("schema: warden/v1\nactions:\n  x:\n    decision: maybe\n", encoding="utf-8")
    with pytest.raises(warden.ConfigError):
        warden.Warden(store=tmp_path / "s.redb", config=bad)
    with pytest.raises(warden.InvalidInput):
        warden.Warden(store="", config=config)


def test_a_store_fault_names_its_kind(tmp_path: Path, config: Path) -> None:
    not_a_store = tmp_path / "notes.redb"
    not_a_store.write_text("these are notes, not a store\n", encoding="utf-8")
    with pytest.raises(warden.StoreFault) as refused:
        warden.Warden(store=not_a_store, config=config)
    assert refused.value.code == "WARDEN_RESULT_STORE"
    assert refused.value.kind == "not_a_store", refused.value.details
    assert not_a_store.read_text(encoding="utf-8") == "these are notes, not a store\n"
    assert warden.StoreFault("raised by the binding").kind is None


def test_invalid_input_names_its_kind_and_path(w: warden.Warden, agent: Any) -> None:
    @w.protect("stripe.refund")
    def refund(payment_id: str, amount: int) -> None:
        raise AssertionError("an over-long call must not run")

    with pytest.raises(warden.InvalidInput) as refused:
        refund("p" * (300 * 1024), 1)
    exc = refused.value
    assert (exc.code, exc.kind, exc.path) == ("WARDEN_RESULT_INVALID_INPUT", "too_large", "arguments"), exc.details
    assert "max_arguments_bytes" in exc.message
    again = pickle.loads(pickle.dumps(exc))
    assert (again.kind, again.path) == ("too_large", "arguments")
    assert (warden.InvalidInput("raised by the binding").kind, warden.InvalidInput("x").path) == (None, None)


def _run(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "RUST_BACKTRACE": "0", **env}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=environment, timeout=120
    )


def test_a_library_with_another_abi_version_is_refused(tmp_path: Path) -> None:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler to build a fake library")
    source = tmp_path / "fake.c"
    source.write_text("unsigned int warden_abi_version(void) { return 2; }\n", encoding="utf-8")
    fake = tmp_path / "libwarden.so"
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(fake), str(source)], check=True)
    probe = """
        import warden
        try:
            warden.canonical({})
        except warden.AbiMismatch as exc:
            print(exc.code, exc.reason, exc.message)
    """
    result = _run(probe, WARDEN_LIB=str(fake))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("WARDEN_RESULT_ABI_MISMATCH abi_version ")
    assert "version 2" in result.stdout
    missing = _run(probe, WARDEN_LIB=str(tmp_path / "nothing.so"))
    assert missing.stdout.startswith("WARDEN_RESULT_ABI_MISMATCH library_not_found "), missing.stderr


def _test_exports_library() -> Path | None:
    candidates = [os.environ.get("WARDEN_TEST_EXPORTS_LIB", "")]
    target = Path(os.environ.get("CARGO_TARGET_DIR") or REPO / "target")
    # `cargo build --features test-exports --lib` leaves it in debug/; `cargo test --features
    # test-exports` (the suite's stage before this one) in debug/deps/.
    candidates.append(str(target / "debug" / "libwarden.so"))
    candidates.append(str(target / "debug" / "deps" / "libwarden.so"))
    for candidate in candidates:
        if candidate and Path(candidate).is_file() and b"warden_test_panic" in Path(candidate).read_bytes():
            return Path(candidate)
    return None


def test_a_panic_inside_the_library_is_panic_then_poisoned(tmp_path: Path, config: Path) -> None:
    library = _test_exports_library()
    if library is None:
        pytest.skip("no library built with --features test-exports (set WARDEN_TEST_EXPORTS_LIB)")
    probe = f"""
        import warden
        from warden import _ffi
        lib = _ffi.library()
        # Test-only export: declared here, never by the package.
        lib.functions["warden_test_panic"] = lib._declare("warden_test_panic", (_ffi._result, (_ffi._handle, _ffi._buf_p)))
        assert lib.has("warden_test_panic")
        w = warden.Warden(store={str(tmp_path / "s.redb")!r}, config={str(config)!r})
        try:
            with w._held() as handle:
                lib.call("warden_test_panic", handle)
        except warden.Panic as exc:
            print(exc.code)
        try:
            w.effects()
        except warden.Poisoned as exc:
            print(exc.code, exc.reason)
        w.close()
        with warden.Warden(store={str(tmp_path / "s.redb")!r}, config={str(config)!r}) as again:
            print(again.effects())
    """
    result = _run(probe, WARDEN_LIB=str(library))
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:3] == [
        "WARDEN_RESULT_PANIC",
        "WARDEN_RESULT_POISONED poisoned",
        "[]",
    ]
