#!/usr/bin/env bash
# The Python binding's tests, against the library built once for the whole repository.
#
#   bindings/python/run-tests.sh [pytest args...]
#
# - CARGO_TARGET_DIR (default <repo>/target) is shared with every other build.
# - WARDEN_LIB, when set, is the library to test and nothing is compiled; otherwise
#   `cargo build --release --lib --bin warden` runs (a no-op when both are up to date; the
#   proof tests sign their checkpoints with that CLI, and are skipped when none is found).
# - The venv lives at $CARGO_TARGET_DIR/py-venv and is reused; pytest, setuptools>=70.1
#   (which builds wheels itself), cryptography (for warden.evidence's Ed25519) and
#   opentelemetry-sdk (the telemetry tests export to its in-memory span exporter and metric
#   reader) are installed into it once.
# - The package is installed from this directory with WARDEN_LIB pointing at the built
#   library, so its build step copies that library instead of compiling it again.
# - A library built with `--features test-exports` may be named in WARDEN_TEST_EXPORTS_LIB
#   to run the panic → poisoned test (skipped otherwise).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
target=${CARGO_TARGET_DIR:-$repo/target}
export RUST_BACKTRACE=0

case "$(uname -s)" in
    Darwin) libname=libwarden.dylib ;;
    *) libname=libwarden.so ;;
esac

if [ -n "${WARDEN_LIB:-}" ]; then
    lib=$WARDEN_LIB
    [ -f "$lib" ] || { echo "run-tests.sh: WARDEN_LIB=$lib is not a file" >&2; exit 2; }
else
    lib=$target/release/$libname
    CARGO_TARGET_DIR=$target cargo build --quiet --release --lib --bin warden -p warden-effects --manifest-path "$repo/Cargo.toml"
fi

venv=$target/py-venv
python=${PYTHON:-python3}
if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv"
fi
# setuptools 70.1+ builds wheels by itself (no separate `wheel` package).
if ! "$venv/bin/python" -c 'import pytest, setuptools.command.bdist_wheel, cryptography, opentelemetry.sdk' 2>/dev/null; then
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "pytest>=7" "setuptools>=70.1" \
        "cryptography>=42" "opentelemetry-sdk>=1.27"
fi

WARDEN_LIB=$lib "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    --no-deps --no-build-isolation --force-reinstall "$here"
rm -rf "$here/build" "$here/warden_effects.egg-info"  # setuptools' in-tree leftovers

# The installed package (with its bundled copy of the library) is what the tests import
# (the pytest script, not `python -m pytest`, which would import ./warden from the source);
# WARDEN_BUILT_LIB tells the tests which library that copy came from.
cd "$here"
WARDEN_BUILT_LIB=$lib WARDEN_REPO=$repo exec env -u WARDEN_LIB "$venv/bin/pytest" -q "$@"
