#!/usr/bin/env bash
# Two hosts on one PostgreSQL store: two network namespaces, each joined to the server's by a
# veth pair (iproute2 only), a private server listening on the namespaces' side of each pair, and
# Warden's Python binding in 4 processes per host. Everything this creates is removed at the
# end, also on failure; every wait is bounded.
#
#   tests/netns/two_hosts.sh PYTHON     (PYTHON: an interpreter with the warden binding installed)
#
# Cases:
#   1. one winner among 8 processes, 4 per host, for each of 20 keys;
#   2. host A partitioned from the server (a blackhole route inside A) for 3 s while both hosts
#      run: host B keeps committing (A's abandoned transactions and their lock die within the
#      store's bounds), no key is ever won twice, every reported win is committed, the chain
#      verifies;
#   3. the server's replies to host A dropped for 3 s (a blackhole route on the server's side),
#      so COMMITs can land unanswered: the same checks.
# Needs root (ip netns); elsewhere it says so and stops (exit 0).
set -euo pipefail
cd "$(dirname "$0")/../.."
python=${1:?usage: tests/netns/two_hosts.sh PYTHON}
if [ "$(id -u)" != 0 ] || ! ip netns list >/dev/null 2>&1; then
    echo "skipped: the two-host tests need root and ip netns"
    exit 0
fi

tag=wn$$
a=${tag}a
b=${tag}b
work=$(mktemp -d /tmp/warden-netns.XXXXXX)
chmod 755 "$work" # the server runs as its own user inside it
server=$work/server
# shellcheck source=../../scripts/netns-hosts.sh
. scripts/netns-hosts.sh
cleanup() {
    netns_remove "$a" "$b"
    scripts/pg-server.sh stop "$server" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

netns_host "$a" 10.231.1.1 10.231.1.2
netns_host "$b" 10.231.2.1 10.231.2.2

url=$(PG_LISTEN="127.0.0.1,10.231.1.1,10.231.2.1" PG_HBA_NET=10.231.0.0/16 scripts/pg-server.sh start "$server")
port=$(cat "$server/port")
# Each host reaches the server on its own link; sslmode=disable: a test network.
store_a="postgresql://postgres@10.231.1.1:$port/warden?sslmode=disable&options=-csearch_path%3D"
store_b="postgresql://postgres@10.231.2.1:$port/warden?sslmode=disable&options=-csearch_path%3D"
cat >"$work/warden.yaml" <<'EOF'
schema: warden/v1
environment: production
actions:
  bench.noop:
    effect: "noop:{n}"
    rules:
      - decision: allow
EOF

psql_admin() { runuser -u postgres -- psql -h 127.0.0.1 -p "$port" -U postgres -d warden -Atqc "$1"; }

# run SCHEMA START_FILE OUT_PREFIX EXTRA_ARGS KEYS...: 4 workers per host in the background
run_workers() {
    local schema=$1 start=$2 prefix=$3 extra=$4
    shift 4
    local i
    for i in 0 1 2 3; do
        # shellcheck disable=SC2086 # EXTRA_ARGS is word-split on purpose
        ip netns exec "$a" timeout 120 "$python" tests/netns/worker.py "$store_a$schema" "$work/warden.yaml" "$start" "$@" $extra \
            >"$prefix.a$i" 2>&1 &
        # shellcheck disable=SC2086
        ip netns exec "$b" timeout 120 "$python" tests/netns/worker.py "$store_b$schema" "$work/warden.yaml" "$start" "$@" $extra \
            >"$prefix.b$i" 2>&1 &
    done
}

check_store() { # SCHEMA: every reported win committed, the chain verified
    local schema=$1 prefix=$2
    "$python" - "postgresql://postgres@127.0.0.1:$port/warden?options=-csearch_path%3D$schema" "$prefix" <<'EOF'
import glob, sys
from collections import Counter
import warden
store, prefix = sys.argv[1], sys.argv[2]
wins = Counter()
for path in glob.glob(prefix + ".*"):
    for line in open(path):
        word, _, key = line.strip().partition(" ")
        if word == "won":
            wins[key] += 1
        elif word == "error":
            sys.exit(f"{path}: {line.strip()}")
twice = [k for k, n in wins.items() if n > 1]
assert not twice, f"keys won twice: {twice}"
with warden.Warden(store=store) as w:
    committed = {e["effect_key"] for e in w.effects(state="committed", limit=0)}
    report = w.verify_chain()
missing = [k for k in wins if f"noop:{k}" not in committed]
assert not missing, f"reported wins not committed: {missing}"
assert report.get("ok"), report
print(f"{len(wins)} keys won once each, all committed; chain of {report.get('verified')} receipts verifies")
EOF
}

# ---- 1: one winner per key among 8 processes on two hosts ----------------------------------
psql_admin "CREATE SCHEMA race"
keys=()
for k in $(seq 1 20); do keys+=("k$k"); done
run_workers race "$work/go1" "$work/race" "" "${keys[@]}"
sleep 1
touch "$work/go1"
wait
check_store race "$work/race"
won=$(cat "$work"/race.* | grep -c '^won ' || true)
[ "$won" = 20 ] || { echo "expected 20 wins in all, got $won" >&2; cat "$work"/race.* >&2; exit 1; }
echo "case 1: 20 keys, 8 processes on 2 hosts: each key won exactly once"

# cut SCHEMA PREFIX WHAT ROUTE...: both hosts propose 150 keys (retrying what is unavailable)
# while `ROUTE` is a blackhole for 3 s (added and removed with `PREFIX ip route`); host B must
# keep winning meanwhile, and the store checks hold after.
cut() {
    local schema=$1 prefix=$2 what=$3 route=$4
    psql_admin "CREATE SCHEMA $schema"
    local keys=() k
    for k in $(seq 1 150); do keys+=("$schema$k"); done
    run_workers "$schema" "$work/go-$schema" "$work/$schema" "--retry-until 60" "${keys[@]}"
    sleep 1
    touch "$work/go-$schema"
    sleep 1
    # shellcheck disable=SC2086 # PREFIX is a command prefix, word-split on purpose
    $prefix ip route add blackhole "$route"
    local before after unavailable
    before=$(cat "$work/$schema".b* | grep -c '^won ' || true)
    sleep 3
    after=$(cat "$work/$schema".b* | grep -c '^won ' || true)
    # shellcheck disable=SC2086
    $prefix ip route del blackhole "$route"
    wait
    check_store "$schema" "$work/$schema"
    [ "$after" -gt "$before" ] || { echo "host B made no progress while $what ($before → $after)" >&2; exit 1; }
    unavailable=$(cat "$work/$schema".a* | grep -c '^unavailable ' || true)
    echo "$what for 3 s: host B won $((after - before)) keys meanwhile; A saw $unavailable unavailable calls; no key won twice"
}

export WARDEN_WRITE_WAIT_MS=2000
# ---- 2: host A partitioned from the server (a blackhole route inside A) ---------------------
cut part "ip netns exec $a" "case 2: host A partitioned" 10.231.1.1/32
# ---- 3: the server's replies to host A dropped (a blackhole route on the server's side) -----
# A's requests still arrive, so some COMMITs land whose answers are lost: those are decided by
# the witness on a fresh connection (or fail closed while the link is down), never applied twice.
cut reply "" "case 3: the server's replies to host A dropped" 10.231.1.2/32
