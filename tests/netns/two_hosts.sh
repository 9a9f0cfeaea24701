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
#   2. one granted approval presented by 8 processes on 2 hosts: consumed exactly once;
#   3. grant (4 processes on host A) and deny (4 on host B) raced for one request: answered once;
#   4. host A partitioned from the server (a blackhole route inside A) for 3 s while both hosts
#      run: host B keeps committing (A's abandoned transactions and their lock die within the
#      store's bounds), no key is ever won twice, every reported win is committed, the chain
#      verifies;
#   5. the server's replies to host A dropped for 3 s (a blackhole route on the server's side),
#      so COMMITs can land unanswered: the same checks;
#   6. the server restarted (pg_ctl restart -m fast) under the 8 processes: the same checks, and
#      nothing FAILED.
# Then one write stopped at COMMIT by the library's commit gate (a test-exports build), the
# network changed at that instant:
#   7. COMMIT lands, its answer is lost (server side), the link is back before the witness is
#      read: one permit via the witness; a blind retry from host B is refused in progress;
#   8. COMMIT never reaches the server (A cut off both ways) while its transaction holds the
#      lock and the key: the server ends it within its idle bound, B wins the key, A's re-read
#      finds no witness and is refused: never two permits;
#   9. the witness cannot be read back while the link is still down: unavailable, no permit;
#      the reservation lapses into AMBIGUOUS and a retry is refused;
#   10. host B's clock 2 h ahead (faketime): `warden doctor` on B reports it, and B's lease
#      decisions are the database clock's, not B's.
# Needs root (ip netns) and faketime; without root it says so and stops (exit 0).
set -euo pipefail
cd "$(dirname "$0")/../.."
python=${1:?usage: tests/netns/two_hosts.sh PYTHON}
if [ "$(id -u)" != 0 ] || ! ip netns list >/dev/null 2>&1; then
    echo "skipped: the two-host tests need root and ip netns"
    exit 0
fi
command -v faketime >/dev/null || { echo "the two-host tests need faketime (apt install faketime)" >&2; exit 1; }

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
  bench.approve:
    effect: "approved:{n}"
    rules:
      - decision: approve
EOF

psql_admin() { runuser -u postgres -- psql -h 127.0.0.1 -p "$port" -U postgres -d warden -Atqc "$1"; }

# start_race SCHEMA COUNT EXTRA_ARGS: in a new SCHEMA, 4 workers per host (tests/netns/worker.py,
# in the background, their lines in $work/SCHEMA.a0 … .b3) each propose the keys SCHEMA1 …
# SCHEMA<COUNT> in turn, all starting at once; returns when they have started.
start_race() {
    local schema=$1 count=$2 extra=$3
    psql_admin "CREATE SCHEMA $schema"
    local keys=() k i
    for k in $(seq 1 "$count"); do keys+=("$schema$k"); done
    for i in 0 1 2 3; do
        # shellcheck disable=SC2086 # EXTRA_ARGS is word-split on purpose
        ip netns exec "$a" timeout 120 "$python" tests/netns/worker.py "$store_a$schema" "$work/warden.yaml" \
            "$work/go-$schema" "${keys[@]}" $extra >"$work/$schema.a$i" 2>&1 &
        # shellcheck disable=SC2086
        ip netns exec "$b" timeout 120 "$python" tests/netns/worker.py "$store_b$schema" "$work/warden.yaml" \
            "$work/go-$schema" "${keys[@]}" $extra >"$work/$schema.b$i" 2>&1 &
    done
    sleep 1
    touch "$work/go-$schema"
}

check_store() { # SCHEMA PREFIX [no-failed]: every reported win committed, the chain verified
    local schema=$1 prefix=$2 failed=${3:-}
    "$python" - "postgresql://postgres@127.0.0.1:$port/warden?options=-csearch_path%3D$schema" "$prefix" "$failed" <<'EOF'
import glob, sys
from collections import Counter
import warden
store, prefix, failed = sys.argv[1], sys.argv[2], sys.argv[3]
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
    failed_keys = [e["effect_key"] for e in w.effects(state="failed", limit=0)]
    report = w.verify_chain()
if failed == "no-failed":
    assert not failed_keys, f"FAILED without proof: {failed_keys}"
missing = [k for k in wins if f"noop:{k}" not in committed]
assert not missing, f"reported wins not committed: {missing}"
assert report.get("ok"), report
print(f"{len(wins)} keys won once each, all committed; chain of {report.get('verified')} receipts verifies")
EOF
}

expect() { # FILE PATTERN: FILE's line matches PATTERN (an extended regex)
    grep -Eq "$2" "$1" || { echo "expected /$2/ in $1, got:" >&2; cat "$1" >&2; exit 1; }
}

# ---- 1: one winner per key among 8 processes on two hosts ----------------------------------
start_race race 20 ""
wait
check_store race "$work/race"
won=$(cat "$work"/race.* | grep -c '^won ' || true)
[ "$won" = 20 ] || { echo "expected 20 wins in all, got $won" >&2; cat "$work"/race.* >&2; exit 1; }
echo "case 1: 20 keys, 8 processes on 2 hosts: each key won exactly once"

approval_race() { # HOST OUT ARGS...: tests/netns/approval_race.py in HOST's namespace
    local host=$1 out=$2 store
    shift 2
    if [ "$host" = "$a" ]; then store=$store_a; else store=$store_b; fi
    local command=$1
    shift
    ip netns exec "$host" timeout 60 "$python" tests/netns/approval_race.py "$command" "${store}approval" \
        "$work/warden.yaml" "$@" >"$out" 2>&1
}
approval_status() { # ID: the request's status in the store
    "$python" - "postgresql://postgres@127.0.0.1:$port/warden?options=-csearch_path%3Dapproval" "$1" <<'PY'
import sys
import warden
with warden.Warden(store=sys.argv[1]) as w:
    print(w.approval(sys.argv[2])["status"])
PY
}

# ---- 2: one granted approval presented by 8 processes on 2 hosts: consumed exactly once ------
psql_admin "CREATE SCHEMA approval"
approval_race "$a" "$work/request1" request ap1
id=$(cat "$work/request1")
[[ $id == apr_* ]] || { echo "no approval request: $id" >&2; exit 1; }
approval_race "$b" "$work/grant1" answer "$id" /dev/null grant ops:bob
expect "$work/grant1" '^answered granted$'
for i in 0 1 2 3; do
    approval_race "$a" "$work/consume.a$i" consume ap1 "$id" "$work/go-consume" &
    approval_race "$b" "$work/consume.b$i" consume ap1 "$id" "$work/go-consume" &
done
sleep 1
touch "$work/go-consume"
wait
consumed=$(cat "$work"/consume.* | grep -c '^consumed$' || true)
refused=$(cat "$work"/consume.* | grep -c '^refused ' || true)
[ "$consumed" = 1 ] && [ "$refused" = 7 ] \
    || { echo "expected 1 consumed and 7 refused, got:" >&2; cat "$work"/consume.* >&2; exit 1; }
[ "$(approval_status "$id")" = consumed ] || { echo "the approval is $(approval_status "$id"), not consumed" >&2; exit 1; }
echo "case 2: one granted approval presented by 8 processes on 2 hosts: consumed by exactly one, 7 refused"

# ---- 3: grant (4 processes on A) and deny (4 on B) raced for one request: answered once ------
approval_race "$a" "$work/request2" request ap2
id=$(cat "$work/request2")
[[ $id == apr_* ]] || { echo "no approval request: $id" >&2; exit 1; }
for i in 0 1 2 3; do
    approval_race "$a" "$work/answer.a$i" answer "$id" "$work/go-answer" grant "ops:alice$i" &
    approval_race "$b" "$work/answer.b$i" answer "$id" "$work/go-answer" deny "ops:carol$i" &
done
sleep 1
touch "$work/go-answer"
wait
answered=$(cat "$work"/answer.* | grep '^answered ' || true)
[ "$(grep -c . <<<"$answered")" = 1 ] || { echo "expected one answer, got:" >&2; cat "$work"/answer.* >&2; exit 1; }
status=$(approval_status "$id")
[ "$answered" = "answered $status" ] || { echo "the store says $status, the winner said: $answered" >&2; exit 1; }
echo "case 3: grant on host A and deny on host B raced by 8 processes: answered once ($status), 7 refused"

# cut SCHEMA PREFIX WHAT ROUTE...: both hosts propose 150 keys (retrying what is unavailable)
# while `ROUTE` is a blackhole for 3 s (added and removed with `PREFIX ip route`); host B must
# keep winning meanwhile, and the store checks hold after.
cut() {
    local schema=$1 prefix=$2 what=$3 route=$4
    start_race "$schema" 150 "--retry-until 60"
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
# ---- 4: host A partitioned from the server (a blackhole route inside A) ---------------------
cut part "ip netns exec $a" "case 4: host A partitioned" 10.231.1.1/32
# ---- 5: the server's replies to host A dropped (a blackhole route on the server's side) -----
# A's requests still arrive, so some COMMITs land whose answers are lost: those are decided by
# the witness on a fresh connection (or fail closed while the link is down), never applied twice.
cut reply "" "case 5: the server's replies to host A dropped" 10.231.1.2/32

# ---- 6: the server restarted (pg_ctl restart -m fast) under the 8 processes ------------------
# Every session ends at once, transactions in flight roll back; the clients reconnect and retry
# what was unavailable: no key won twice, every reported win committed, nothing FAILED.
start_race restart 150 "--retry-until 60"
sleep 1
scripts/pg-server.sh restart "$server"
restarted=$(cat "$work"/restart.* | grep -c '^won ' || true)
wait
check_store restart "$work/restart" no-failed
after=$(cat "$work"/restart.* | grep -c '^won ' || true)
[ "$after" -gt "$restarted" ] || { echo "no key was won after the restart ($restarted → $after)" >&2; exit 1; }
unavailable=$(cat "$work"/restart.* | grep -c '^unavailable ' || true)
echo "case 6: the server restarted under 8 processes on 2 hosts: $((after - restarted)) keys won after it, $unavailable unavailable calls retried; no key won twice, nothing FAILED"

# ---- at COMMIT: one write stopped before its COMMIT and before its witness is read back -----
# (the library's commit gate, in a test-exports build), while the test changes the network.
echo "building the test-exports library (its commit gate) and the CLI" >&2
cargo build --quiet --locked --features test-exports --lib
cargo build --quiet --locked --release --bin warden
gated_lib=${CARGO_TARGET_DIR:-target}/debug/libwarden.so
# A cdylib's file name carries no feature hash, so a later build without test-exports may have
# replaced this file while cargo still counts the test-exports build fresh: rebuild when the
# test-only exports are missing.
if ! nm -D --defined-only "$gated_lib" | grep -q ' warden_test_'; then
    touch src/lib.rs
    cargo build --quiet --locked --features test-exports --lib
fi
nm -D --defined-only "$gated_lib" | grep -q ' warden_test_' \
    || { echo "$gated_lib has no test-only exports after a test-exports build" >&2; exit 1; }
cli=${CARGO_TARGET_DIR:-target}/release/warden
# Longer bounds than the stream cases, so that the test's own steps between the gate's stops
# (well under a second) never reach the server's idle timeout (a quarter of the wait: 2 s).
export WARDEN_WRITE_WAIT_MS=8000

wait_for() { # FILE SECONDS
    local i
    for ((i = 0; i < $2 * 50; i++)); do
        [ -e "$1" ] && return 0
        sleep 0.02
    done
    echo "timed out after $2 s waiting for $1" >&2
    exit 1
}

# gated HOST SCHEMA OUT [PREFIX...] -- ARGS...: one proposal (tests/netns/gated.py) in HOST's
# namespace through the test-exports library, its line in OUT; PREFIX wraps the interpreter
# (faketime). With --gate DIR in ARGS, the library's commit gate is DIR.
gated() {
    local host=$1 schema=$2 out=$3 store gate=""
    shift 3
    local prefix=()
    while [ "$1" != -- ]; do prefix+=("$1"); shift; done
    shift
    if [ "$host" = "$a" ]; then store=$store_a; else store=$store_b; fi
    local i
    for ((i = 1; i <= $#; i++)); do
        if [ "${!i}" = --gate ]; then local next=$((i + 1)); gate=${!next}; fi
    done
    ip netns exec "$host" env WARDEN_LIB="$gated_lib" WARDEN_TEST_COMMIT_GATE="$gate" timeout 60 \
        "${prefix[@]}" "$python" tests/netns/gated.py "$store$schema" "$work/warden.yaml" "$@" >"$out" 2>&1
}

effect_is() { # SCHEMA KEY STATE ATTEMPT: the effect's state and attempt, and the chain verifies
    "$python" - "postgresql://postgres@127.0.0.1:$port/warden?options=-csearch_path%3D$1" "noop:$2" "$3" "$4" <<'PY'
import sys
import warden
store, key, state, attempt = sys.argv[1:]
with warden.Warden(store=store) as w:
    record = w.effect(key)
    report = w.verify_chain()
assert record is not None, f"{key}: no effect record"
got = (record["state"].lower(), str(record["attempt"]))
assert got == (state, attempt), f"{key}: {got}, expected {(state, attempt)}"
assert report.get("ok"), report
PY
}

# at_commit SCHEMA KEY LEASE: in a new SCHEMA, host A proposes KEY (LEASE seconds) with the commit
# gate armed; returns once that reservation's write stopped before COMMIT ($g: the gate
# directory, $pa: A's process).
at_commit() {
    psql_admin "CREATE SCHEMA $1"
    g=$work/gate-$1
    mkdir "$g"
    gated "$a" "$1" "$work/$1.a" -- "$2" --gate "$g" --lease "$3" &
    pa=$!
    wait_for "$g/at-commit" 30
}

# ---- 7: COMMIT landed, its answer lost (blackholed on the server's side), the link restored
# before the witness is read back: one permit, via the witness; a blind retry is refused -----
at_commit lost g1 60
ip route add blackhole 10.231.1.2/32
touch "$g/go-commit"
wait_for "$g/at-reread" 30 # the client gave up on COMMIT's answer
# The reservation is in the store: a blind retry from host B is refused, in progress.
gated "$b" lost "$work/lost.b" -- g1
expect "$work/lost.b" '^refused g1 Duplicate '
ip route del blackhole 10.231.1.2/32
touch "$g/go-reread"
wait "$pa"
expect "$work/lost.a" '^won g1 '
effect_is lost g1 committed 1
echo "case 7: COMMIT's answer lost, the link back before the re-read: one permit via the witness ($(awk '{print $3}' "$work/lost.a") ms); host B's blind retry refused in progress"

# ---- 8: COMMIT never reaching the server (host A cut off both ways) while its transaction
# holds the store's lock and the key's reservation: the server ends it within its idle bound,
# host B takes the key, and A's re-read (the link back) finds no witness: never two permits ---
at_commit zombie g2 60
# Both ways: A's COMMIT never leaves A, and the server's end of the zombie (a FATAL for the idle
# timeout) never reaches A, so A cannot know which happened and must read its witness back.
ip netns exec "$a" ip route add blackhole 10.231.1.1/32
ip route add blackhole 10.231.1.2/32
touch "$g/go-commit"
gated "$b" zombie "$work/zombie.b" -- g2 # waits for the lock until the zombie is ended
expect "$work/zombie.b" '^won g2 '
waited=$(awk '{print $3}' "$work/zombie.b")
[ "$waited" -lt 8000 ] || { echo "host B waited $waited ms, past the store's lock bound (8000 ms)" >&2; exit 1; }
wait_for "$g/at-reread" 30
ip netns exec "$a" ip route del blackhole 10.231.1.1/32
ip route del blackhole 10.231.1.2/32
touch "$g/go-reread"
wait "$pa"
expect "$work/zombie.a" '^refused g2 Duplicate '
effect_is zombie g2 committed 1
echo "case 8: COMMIT never reached the server: its zombie ended within the bounds, host B won the key after $waited ms; A's re-read found no witness and was refused"

# ---- 9: the witness cannot be read back while the link is still down: unavailable, no permit;
# the reservation (its COMMIT landed) lapses into AMBIGUOUS and a retry is refused -------------
at_commit down g3 3
ip route add blackhole 10.231.1.2/32
touch "$g/go-commit"
wait_for "$g/at-reread" 30
touch "$g/go-reread" # the link still down
wait "$pa"
ip route del blackhole 10.231.1.2/32
expect "$work/down.a" '^unavailable g3 '
sleep 3 # the 3 s lease, counted from the reservation, has lapsed
gated "$b" down "$work/down.b" -- g3
expect "$work/down.b" '^refused g3 Ambiguous '
effect_is down g3 ambiguous 1
echo "case 9: the re-read failed while the link was down: unavailable, no permit; the key lapsed into AMBIGUOUS and a retry was refused"

# ---- 10: host B's clock two hours ahead (faketime): leases are judged by the database clock ---
psql_admin "CREATE SCHEMA skew"
ahead=(faketime -f +2h)
skew=$(ip netns exec "$b" "${ahead[@]}" "$cli" doctor --json --store "${store_b}skew" \
    | "$python" -c 'import json, sys; print(json.load(sys.stdin)["database_clock_skew_ms"])')
[ "$skew" -lt -7000000 ] && [ "$skew" -gt -7400000 ] \
    || { echo "warden doctor on host B measured the database clock $skew ms off, expected about -2 h" >&2; exit 1; }
started() { # SCHEMA KEY: wait until KEY's reservation is in the store
    "$python" - "postgresql://postgres@127.0.0.1:$port/warden?options=-csearch_path%3D$1" "noop:$2" <<'PY'
import sys, time
import warden
with warden.Warden(store=sys.argv[1]) as w:
    deadline = time.monotonic() + 20
    while w.effect(sys.argv[2]) is None:
        assert time.monotonic() < deadline, f"{sys.argv[2]} was never reserved"
        time.sleep(0.02)
PY
}
# A (a true clock) holds s1 under a 60 s lease; B, 2 h ahead, would call it lapsed by its own clock.
gated "$a" skew "$work/skew1.a" -- s1 --lease 60 --hold 3 &
pa=$!
started skew s1
gated "$b" skew "$work/skew1.b" "${ahead[@]}" -- s1
expect "$work/skew1.b" '^refused s1 Duplicate '
wait "$pa"
expect "$work/skew1.a" '^won s1 '
# B (2 h ahead) holds s2 under a 2 s lease; by B's clock it would run 2 h longer.
gated "$b" skew "$work/skew2.b" "${ahead[@]}" -- s2 --lease 2 --hold 5 &
pb=$!
started skew s2
sleep 3
gated "$a" skew "$work/skew2.a" -- s2
expect "$work/skew2.a" '^refused s2 Ambiguous '
wait "$pb"
expect "$work/skew2.b" '^late s2 '
echo "case 10: host B's clock 2 h ahead (doctor: $skew ms): its lease decisions follow the database clock — B's proposal refused in progress under A's 60 s lease, B's own 2 s lease lapsed after 3 s"
