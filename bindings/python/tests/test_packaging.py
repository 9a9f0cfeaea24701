"""The package ships its library and type marker, and its build step runs cargo when asked."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import warden
from warden import _ffi

PACKAGE_DIR = Path(__file__).resolve().parents[1]


def test_the_package_is_typed() -> None:
    assert (Path(warden.__file__).parent / "py.typed").is_file()


def test_the_loaded_library_is_the_bundled_copy_unless_overridden() -> None:
    path = _ffi.library().path
    if os.environ.get("WARDEN_LIB"):
        assert path == Path(os.environ["WARDEN_LIB"])
    else:
        assert path.parent == Path(warden.__file__).resolve().parent
    assert warden.abi_version() == warden.ABI_VERSION == 1


def test_the_bundled_copy_is_the_library_run_tests_built() -> None:
    built = os.environ.get("WARDEN_BUILT_LIB")
    if not built or os.environ.get("WARDEN_LIB"):
        pytest.skip("not run by run-tests.sh against an installed package")
    bundled = _ffi.library().path
    assert bundled.read_bytes() == Path(built).read_bytes()


def _setuptools_usable() -> bool:
    try:
        import setuptools  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.skipif(not _setuptools_usable(), reason="setuptools is not installed")
@pytest.mark.skipif(shutil.which("cargo") is None, reason="cargo is not installed")
def test_building_a_wheel_runs_cargo_and_bundles_the_library(tmp_path: Path) -> None:
    """What `pip install ./bindings/python` does on a fresh machine (here cargo finds the
    library up to date in the shared target dir, so nothing is compiled again)."""
    env = {key: value for key, value in os.environ.items() if key != "WARDEN_LIB"}
    leftovers = [PACKAGE_DIR / "build", PACKAGE_DIR / "warden_effects.egg-info"]
    existed = [path.exists() for path in leftovers]
    try:
        result = _pip_wheel(tmp_path, env)
        # setuptools' build folders go under the cargo target directory, never into the checkout.
        left = [path.name for path, was_there in zip(leftovers, existed) if not was_there and path.exists()]
    finally:
        for path, was_there in zip(leftovers, existed):
            if not was_there:
                shutil.rmtree(path, ignore_errors=True)
    assert left == [], f"the build left {left} in {PACKAGE_DIR}"
    assert result.returncode == 0, result.stdout + result.stderr
    assert "warden: cargo build --release --lib -p warden-effects" in result.stdout + result.stderr
    (wheel,) = tmp_path.glob("warden_effects-*.whl")
    assert "-py3-none-" in wheel.name
    names = zipfile.ZipFile(wheel).namelist()
    assert "warden/libwarden.so" in names or "warden/libwarden.dylib" in names
    assert "warden/py.typed" in names
    assert "warden/_ffi.py" in names


def _pip_wheel(into: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-v",
            "--no-deps",
            "--no-build-isolation",
            "--disable-pip-version-check",
            "--wheel-dir",
            str(into),
            str(PACKAGE_DIR),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=1200,
    )
