#!/usr/bin/env bash
# The full single-bit sweep: every bit of every used byte of the store pages that hold a key in
# each state that must never run again (reserved, executing, committed, AMBIGUOUS), each flip in
# its own copy, every key proposed again. Prints the tally and fails on any permit.
#
#   scripts/bitflip-sweep.sh            # the full sweep, release build (tens of minutes)
#   SWEEP=all scripts/bitflip-sweep.sh  # every used byte of every non-zero page of the file
#   SWEEP=sample TRIALS=2000 scripts/bitflip-sweep.sh   # a larger seeded sample
#
# CI runs the sampled version as a normal test: `cargo test --features test-exports --test bitflip_sweep`.
set -euo pipefail
cd "$(dirname "$0")/.."
export RUST_BACKTRACE=0
export WARDEN_SWEEP="${SWEEP:-full}"
export WARDEN_SWEEP_TRIALS="${TRIALS:-300}"
# A file store only: the sweep flips the file's bytes.
unset WARDEN_TEST_STORE
start=$(date +%s)
cargo test --release --features test-exports --test bitflip_sweep -- --nocapture
echo "bitflip-sweep: ${WARDEN_SWEEP} sweep finished in $(( $(date +%s) - start )) s (build included)"
