#!/usr/bin/env bash
# `warden console` in a real browser: headless Chromium from the distribution's `chromium` and
# `chromium-driver` packages, driven by Selenium (pinned, from PyPI, in a venv of its own), with a
# real agent on the Python binding. Skips, saying so, where Chromium or chromedriver is missing.
#
#   tests/console_browser/run.sh [AGENT_PYTHON [WARDEN_BIN]]
#
# AGENT_PYTHON: a Python with the `warden` package installed (./scripts/test.sh passes the
# binding's venv); without it, the library and CLI are built here (debug) and the binding is
# imported from bindings/python with WARDEN_LIB. WARDEN_BIN: the CLI (default: target/debug/warden,
# built here). Screenshots go to $CARGO_TARGET_DIR/console-screenshots/.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
chromium=$(command -v chromium || true)
driver=$(command -v chromedriver || true)
if [ -z "$chromium" ] || [ -z "$driver" ]; then
    echo "SKIP: the console browser test needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver); not found here"
    exit 0
fi
agent_python=${1:-}
warden_bin=${2:-}
if [ -z "$agent_python" ] || [ -z "$warden_bin" ]; then
    cargo build --quiet --locked --lib --bin warden --manifest-path "$root/Cargo.toml"
fi
if [ -z "$agent_python" ]; then
    export WARDEN_LIB="$target/debug/libwarden.so"
    export PYTHONPATH="$root/bindings/python${PYTHONPATH:+:$PYTHONPATH}"
    agent_python=python3
fi
warden_bin=${warden_bin:-$target/debug/warden}
work="$target/console-browser"
mkdir -p "$work"
if [ ! -x "$work/venv/bin/python" ]; then
    python3 -m venv "$work/venv"
fi
if ! "$work/venv/bin/python" -c 'import selenium' 2>/dev/null; then
    "$work/venv/bin/pip" install --quiet --disable-pip-version-check "selenium==4.27.1"
fi
run="$(mktemp -d "$work/run.XXXXXX")"
trap 'rm -rf "$run"' EXIT
"$work/venv/bin/python" "$root/tests/console_browser/run.py" \
    --warden "$warden_bin" --agent-python "$agent_python" \
    --screenshots "$target/console-screenshots" --work "$run" \
    --chromium "$chromium" --chromedriver "$driver"
