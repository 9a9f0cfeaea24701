#!/usr/bin/env bash
# ctrlrun 0.12.2's PostgreSQL store beside Warden's, one command: builds the release library,
# makes a venv at $CARGO_TARGET_DIR/compare-pg-venv with ctrlrun[postgres]==0.12.2 from PyPI and
# the Python binding, starts a private PostgreSQL server (scripts/pg-server.sh, removed at the
# end, also on failure), and runs benches/compare/postgres.py against it. Options are passed on:
#
#   benches/compare/postgres.sh                      # 3 rounds of 800 actions per row
#   benches/compare/postgres.sh --actions 200 --rounds 1
#   benches/compare/postgres.sh --two-hosts         # as root: also 4 + 4 processes on two
#                                                   # network-namespace hosts (veth pairs)
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
chmod 755 "$server"
two_hosts=()
args=()
for arg in "$@"; do
    if [ "$arg" = --two-hosts ]; then two_hosts=(yes); else args+=("$arg"); fi
done
tag=wb$$
# shellcheck source=../../scripts/netns-hosts.sh
. scripts/netns-hosts.sh
trap 'netns_remove "${tag}a" "${tag}b"; scripts/pg-server.sh stop "$server/pg"; rm -rf "$server"' EXIT
if [ ${#two_hosts[@]} -gt 0 ]; then
    [ "$(id -u)" = 0 ] || { echo "--two-hosts needs root (ip netns)" >&2; exit 2; }
    netns_host "${tag}a" 10.232.1.1 10.232.1.2
    netns_host "${tag}b" 10.232.2.1 10.232.2.2
    url=$(PG_LISTEN="127.0.0.1,10.232.1.1,10.232.2.1" PG_HBA_NET=10.232.0.0/16 scripts/pg-server.sh start "$server/pg")
    port=$(cat "$server/pg/port")
    args+=(--hosts "${tag}a=postgresql://postgres@10.232.1.1:$port/warden?sslmode=disable,${tag}b=postgresql://postgres@10.232.2.1:$port/warden?sslmode=disable")
else
    url=$(scripts/pg-server.sh start "$server/pg")
fi
echo "PostgreSQL: $url" >&2
"$venv/bin/python" benches/compare/postgres.py --url "$url" --lib "$target/release/libwarden.so" "${args[@]}"
