#!/usr/bin/env bash
# ctrlrun 0.12.2's PostgreSQL store beside Warden's, one command: builds the release library,
# makes a venv at $CARGO_TARGET_DIR/compare-pg-venv with ctrlrun[postgres]==0.12.2 from PyPI and
# the Python binding, starts a private PostgreSQL server (scripts/pg-server.sh, removed at the
# end, also on failure), and runs benches/compare/postgres.py against it. Options are passed on:
#
#   benches/compare/postgres.sh                      # 3 rounds of 800 actions per row
#   benches/compare/postgres.sh --actions 200 --rounds 1
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
target=${CARGO_TARGET_DIR:-$root/target}
venv=$target/compare-pg-venv

echo "building the release library" >&2
cargo build --release --lib --quiet
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
if ! "$venv/bin/python" -c 'import importlib.metadata as m, sys; sys.exit(m.version("ctrlrun") != "0.12.2")' 2>/dev/null; then
    echo "installing ctrlrun[postgres]==0.12.2 into $venv" >&2
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "ctrlrun[postgres]==0.12.2"
fi
if ! "$venv/bin/python" -c 'import warden' 2>/dev/null; then
    echo "installing the Python binding into $venv" >&2
    WARDEN_LIB="$target/release/libwarden.so" "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
        "$root/bindings/python"
fi

server=$(mktemp -d /tmp/warden-pg-bench.XXXXXX)
trap 'scripts/pg-server.sh stop "$server"' EXIT
url=$(scripts/pg-server.sh start "$server")
echo "PostgreSQL: $url" >&2
"$venv/bin/python" benches/compare/postgres.py --url "$url" --lib "$target/release/libwarden.so" "$@"
