"""Build step: put a built libwarden inside the `warden` package.

The library comes from, in order:
1. `$WARDEN_LIB`, when it names an existing file (CI and tests: nothing is compiled twice);
2. `cargo build --release --lib -p warden-effects` in the Rust sources: `rust/` beside this file
   in an sdist (scripts/dist.sh puts the crate there), else the repository that holds this
   directory (found by walking up to the Cargo.toml of package `warden-effects`), or
   `$WARDEN_SOURCE_DIR`; honouring `$CARGO_TARGET_DIR` and any `target-dir` cargo is configured
   with.

The compile takes minutes; pip hides a build's output unless `-v`, so when a terminal is
attached cargo's progress goes straight to it (`/dev/tty`) instead of into pip's capture.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = Path(__file__).resolve().parent

if sys.platform == "darwin":
    LIBRARY = "libwarden.dylib"
elif sys.platform == "win32":
    LIBRARY = "warden.dll"
else:
    LIBRARY = "libwarden.so"


def _is_warden_manifest(path: Path) -> bool:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return False
    return "[package]" in text and 'name = "warden-effects"' in text


def repository_root() -> Path:
    override = os.environ.get("WARDEN_SOURCE_DIR")
    if override:
        root = Path(override).resolve()
        if not _is_warden_manifest(root / "Cargo.toml"):
            raise SystemExit(f"WARDEN_SOURCE_DIR={override} holds no Cargo.toml of package warden")
        return root
    for candidate in (HERE / "rust", HERE, *HERE.parents):
        if _is_warden_manifest(candidate / "Cargo.toml"):
            return candidate
    raise SystemExit(
        f"cannot find the Warden repository above {HERE} to build libwarden with cargo; "
        "set WARDEN_LIB to a built library or WARDEN_SOURCE_DIR to the repository"
    )


def target_directory(manifest: Path) -> Path:
    """Where cargo puts its output: $CARGO_TARGET_DIR, cargo's configured target-dir, or target/."""
    if os.environ.get("CARGO_TARGET_DIR"):
        return Path(os.environ["CARGO_TARGET_DIR"]).resolve()
    try:
        metadata = subprocess.run(
            ["cargo", "metadata", "--format-version", "1", "--no-deps", "--manifest-path", str(manifest)],
            check=True,
            capture_output=True,
            text=True,
        )
        return Path(json.loads(metadata.stdout)["target_directory"])
    except (OSError, subprocess.CalledProcessError, ValueError, KeyError):
        return manifest.parent / "target"


def built_library() -> Path:
    override = os.environ.get("WARDEN_LIB")
    if override:
        path = Path(override)
        if not path.is_file():
            raise SystemExit(f"WARDEN_LIB={override} is not a file; build the library or unset WARDEN_LIB")
        print(f"warden: bundling {path} (WARDEN_LIB)", file=sys.stderr)
        return path
    root = repository_root()
    manifest = root / "Cargo.toml"
    command = ["cargo", "build", "--release", "--lib", "-p", "warden-effects", "--manifest-path", str(manifest)]
    terminal = _terminal()
    for stream in {sys.stderr, terminal} - {None}:
        print(f"warden: {' '.join(command)}", file=stream)
        print("warden: compiling libwarden in release mode takes about 7 minutes on 2 cores", file=stream, flush=True)
    try:
        subprocess.run(command, check=True, stderr=terminal)
    except FileNotFoundError:
        raise SystemExit("cargo is not installed: install Rust (https://rustup.rs) or set WARDEN_LIB") from None
    except subprocess.CalledProcessError as exc:
        raise SystemExit(f"cargo build failed with exit status {exc.returncode}") from None
    path = target_directory(manifest) / "release" / LIBRARY
    if not path.is_file():
        raise SystemExit(f"cargo build succeeded but {path} does not exist")
    return path


def _terminal():
    """The user's terminal, when there is one, for cargo's progress (pip captures our stderr)."""
    if sys.stderr.isatty():
        return None  # already visible
    try:
        return open("/dev/tty", "w", encoding="utf-8")  # noqa: SIM115 - lives until the process ends
    except OSError:
        return None


class build_py_with_library(build_py):
    """build_py, plus the compiled library copied into the package."""

    def run(self) -> None:
        super().run()
        library = built_library()
        if getattr(self, "editable_mode", False):
            destination = HERE / "warden" / LIBRARY
        else:
            destination = Path(self.build_lib) / "warden" / LIBRARY
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(library, destination)
        os.chmod(destination, 0o755)

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        outputs = list(super().get_outputs(include_bytecode))
        outputs.append(str(Path(self.build_lib) / "warden" / LIBRARY))
        return outputs


class PlatformDistribution(Distribution):
    """The wheel carries a native library, so it is tied to a platform (not to a Python ABI)."""

    def has_ext_modules(self) -> bool:
        return True


commands: dict[str, type] = {"build_py": build_py_with_library}

try:
    try:
        from setuptools.command.bdist_wheel import bdist_wheel
    except ImportError:
        from wheel.bdist_wheel import bdist_wheel  # type: ignore[no-redef]

    class bdist_wheel_any_python(bdist_wheel):  # type: ignore[misc,valid-type]
        """ctypes needs no Python ABI: tag the wheel py3-none-<platform>."""

        def get_tag(self) -> tuple[str, str, str]:
            _, _, platform = super().get_tag()
            return "py3", "none", platform

    commands["bdist_wheel"] = bdist_wheel_any_python
except ImportError:
    pass

def scratch_options() -> dict[str, dict[str, str]]:
    """setuptools' own build folders (`build/`, `warden.egg-info/`) go under the cargo target
    directory, next to the library, so installing from a checkout leaves nothing in it."""
    try:
        scratch = target_directory(repository_root() / "Cargo.toml") / "python-build"
    except SystemExit:
        return {}  # not inside a checkout (an sdist): setuptools' defaults
    scratch.mkdir(parents=True, exist_ok=True)
    return {"build": {"build_base": str(scratch / "build")}, "egg_info": {"egg_base": str(scratch)}}


setup(cmdclass=commands, distclass=PlatformDistribution, options=scratch_options())
