#!/usr/bin/env bash
# The full single-bit sweep: every bit of every used byte of the store pages that hold a key in
# each state that must never run again (reserved, executing, committed, AMBIGUOUS), each flip in
# its own copy, every key proposed again. Prints the tally and fails on any permit.
#
#   scripts/bitflip-sweep.sh            # the full sweep, release build (about 2 minutes of flips)
#   SWEEP=all scripts/bitflip-sweep.sh  # every used byte of every non-zero page of the file
#   SWEEP=sample TRIALS=2000 scripts/bitflip-sweep.sh   # a larger seeded sample
#
# A flip that aborts the process (redb panicking while it unwinds, on a damaged freed-page list)
# is counted, skipped, and the sweep resumed after it; the aborting flips are listed at the end.
# CI runs the sampled version as a normal test: `cargo test --features test-exports --test bitflip_sweep`.
set -euo pipefail
cd "$(dirname "$0")/.."
export RUST_BACKTRACE=0
export WARDEN_SWEEP="${SWEEP:-full}"
export WARDEN_SWEEP_TRIALS="${TRIALS:-300}"
# A file store only: the sweep flips the file's bytes.
unset WARDEN_TEST_STORE
start=$(date +%s)
cargo test --release --features test-exports --test bitflip_sweep --no-run
bin=$(cargo test --release --features test-exports --test bitflip_sweep --no-run --message-format=json 2>/dev/null \
    | grep -o '"executable":"[^"]*bitflip_sweep[^"]*"' | tail -1 | sed -E 's/.*:"(.*)"/\1/')
log=$(mktemp)
all=$(mktemp)
trap 'rm -f "$log" "$all"' EXIT
from=0
skip=""
aborted=0
while true; do
    rc=0
    WARDEN_SWEEP_FROM=$from WARDEN_SWEEP_SKIP=$skip WARDEN_SWEEP_TRACE=1 "$bin" --nocapture >"$log" 2>&1 || rc=$?
    grep -v '^flip \|^outcome ' "$log" || true
    grep '^outcome ' "$log" >>"$all" || true
    # 134: SIGABRT. Anything else (0, or a test failure) ends the sweep.
    if [ "$rc" -ne 134 ] || [ "$WARDEN_SWEEP" = sample ]; then
        break
    fi
    last=$(grep '^flip ' "$log" | tail -1)
    n=$(echo "$last" | sed -E 's/^flip ([0-9]+):.*/\1/')
    bit=$(echo "$last" | sed -E 's/.*bit ([0-9]+) of byte.*/\1/')
    byte=$(echo "$last" | sed -E 's/.*of byte ([0-9]+)$/\1/')
    echo "bitflip-sweep: flip $n (bit $bit of byte $byte) aborted the process; resuming after it"
    skip="${skip:+$skip,}$byte:$bit"
    aborted=$((aborted + 1))
    from=$((n - 1))
done
echo "bitflip-sweep: ${WARDEN_SWEEP} sweep finished in $(( $(date +%s) - start )) s (build included); $aborted flip(s) aborted the process${skip:+: $skip}"
echo "bitflip-sweep: every proposal, across resumed runs (an aborted flip's own proposals never ran):"
sort "$all" | uniq -c
exit "$rc"
