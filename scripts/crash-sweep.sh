#!/usr/bin/env bash
# The whole crash-state sweep of the file store (src/store/redb/crash_tests.rs): every write
# and sync point of the scripted workload, with SUBSETS random subsets of the unsynced writes
# (torn at 512-byte boundaries) per sync point beside "none" and "all". CI runs the same tests
# with 2 subsets; this runs as many as asked (default 32) and prints how many distinct crash
# states were checked.
#
#   scripts/crash-sweep.sh [SUBSETS]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
subsets=${1:-32}
case "$subsets" in ''|*[!0-9]*) echo "crash-sweep: SUBSETS must be a number, got '$subsets'" >&2; exit 2 ;; esac
WARDEN_CRASH_SUBSETS=$subsets cargo test --locked --features test-exports --lib store::redb::crash_tests -- --nocapture --test-threads=1 2>&1 |
    grep -E "crash states|recoveries|bytes left|^test |test result|broke|^capture"
