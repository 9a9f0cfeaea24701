#!/usr/bin/env bash
# Side-by-side throughput of ctrlrun 0.12.2 and Warden (Python, Node, Rust) in one run.
#
#   benches/compare/run.sh [--quick] [--json] [--dir DIR] [--repetitions N] [--actions N] [--keep]
#
# Builds what it measures, then runs compare.py (see README.md next to this file):
# - the release library and CLI: cargo build --release --lib --bin warden
# - a venv at $CARGO_TARGET_DIR/compare-venv holding ctrlrun==0.12.2 from PyPI and the Python
#   binding installed from bindings/python against that library (as bindings/python/run-tests.sh
#   installs it);
# - the Node addon, built as bindings/node/run-tests.sh builds it (its install script,
#   scripts/build.js, with plain cargo) into bindings/node/native/.
# Stores go in DIR (default $CARGO_TARGET_DIR/compare-stores; a tmpfs is refused). Markdown on
# stdout (JSON with --json), progress on stderr, and both also in $CARGO_TARGET_DIR/compare/.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
target=${CARGO_TARGET_DIR:-$repo/target}
export CARGO_TARGET_DIR=$target
export RUST_BACKTRACE=0

for arg in "$@"; do
    case "$arg" in -h|--help) exec "${PYTHON:-python3}" "$here/compare.py" --help ;; esac
done

log=$target/compare/setup.log
mkdir -p "$target/compare"
: > "$log"
step() { echo "compare: $*" >&2; }
quiet() {
    if ! "$@" >>"$log" 2>&1; then
        echo "compare: failed: $*" >&2
        tail -n 40 "$log" >&2
        exit 1
    fi
}

step "building the release library and CLI (cargo build --release --lib --bin warden)"
quiet cargo build --release --lib --bin warden --manifest-path "$repo/Cargo.toml"
case "$(uname -s)" in Darwin) lib=$target/release/libwarden.dylib ;; *) lib=$target/release/libwarden.so ;; esac

venv=$target/compare-venv
python=${PYTHON:-python3}
if [ ! -x "$venv/bin/python" ]; then
    step "creating $venv"
    quiet "$python" -m venv "$venv"
fi
if ! "$venv/bin/python" -c 'import importlib.metadata as m, sys; sys.exit(m.version("ctrlrun") != "0.12.2")' 2>/dev/null; then
    step "installing ctrlrun==0.12.2 from PyPI into $venv"
    quiet "$venv/bin/python" -m pip install --disable-pip-version-check "ctrlrun==0.12.2"
fi
# setuptools 70.1+ builds the binding's wheel by itself (no separate `wheel` package).
if ! "$venv/bin/python" -c 'import setuptools.command.bdist_wheel' 2>/dev/null; then
    quiet "$venv/bin/python" -m pip install --disable-pip-version-check "setuptools>=70.1"
fi
step "installing the Python binding against $lib"
WARDEN_LIB=$lib quiet "$venv/bin/python" -m pip install --disable-pip-version-check \
    --no-deps --no-build-isolation --force-reinstall "$repo/bindings/python"
rm -rf "$repo/bindings/python/build" "$repo/bindings/python/warden.egg-info"  # setuptools' in-tree leftovers

step "building the Node addon (bindings/node/scripts/build.js)"
(cd "$repo/bindings/node" && quiet node scripts/build.js)

exec "$venv/bin/python" "$here/compare.py" "$@"
