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

# ---- 2: host A partitioned for 3 s while both hosts run ------------------------------------
psql_admin "CREATE SCHEMA part"
export WARDEN_WRITE_WAIT_MS=2000
keys=()
for k in $(seq 1 150); do keys+=("p$k"); done
run_workers part "$work/go2" "$work/part" "--retry-until 60" "${keys[@]}"
sleep 1
touch "$work/go2"
sleep 1
ip netns exec "$a" ip route add blackhole 10.231.1.1/32
before=$(cat "$work"/part.b* | grep -c '^won ' || true)
sleep 3
after=$(cat "$work"/part.b* | grep -c '^won ' || true)
ip netns exec "$a" ip route del blackhole 10.231.1.1/32
wait
check_store part "$work/part"
[ "$after" -gt "$before" ] || { echo "host B made no progress while A was partitioned ($before → $after)" >&2; exit 1; }
unavailable=$(cat "$work"/part.a* | grep -c '^unavailable ' || true)
echo "case 2: host A partitioned 3 s: host B won $((after - before)) keys meanwhile; A saw $unavailable unavailable calls; no key won twice"

# ---- 3: the server's replies to host A dropped for 3 s (a blackhole route on the server's side)
# A's requests still arrive, so some COMMITs land whose answers are lost: those are decided by
# the witness on a fresh connection (or fail closed while the link is down), never applied twice.
psql_admin "CREATE SCHEMA reply"
keys=()
for k in $(seq 1 150); do keys+=("r$k"); done
run_workers reply "$work/go3" "$work/reply" "--retry-until 60" "${keys[@]}"
sleep 1
touch "$work/go3"
sleep 1
ip route add blackhole 10.231.1.2/32
before=$(cat "$work"/reply.b* | grep -c '^won ' || true)
sleep 3
after=$(cat "$work"/reply.b* | grep -c '^won ' || true)
ip route del blackhole 10.231.1.2/32
wait
check_store reply "$work/reply"
[ "$after" -gt "$before" ] || { echo "host B made no progress while A's replies were dropped ($before → $after)" >&2; exit 1; }
unavailable=$(cat "$work"/reply.a* | grep -c '^unavailable ' || true)
echo "case 3: replies to host A dropped 3 s: host B won $((after - before)) keys meanwhile; A saw $unavailable unavailable calls; no key won twice"
