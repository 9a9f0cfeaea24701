#!/usr/bin/env bash
# The whole fault-injected task sweep of the gateway (tests/gateway_task_faults.rs): RUNS
# task-returning tools/calls (default 1,000, issue 31's target) in batches of 50, one fault per
# run (replies dropped, cancelled, failed, lost, isError) and the gateway SIGKILLed in about one
# batch in four. CI runs the same test with 100 runs. Prints the seed (WARDEN_TASK_FAULT_SEED=N
# replays it), the progress and the totals.
#
#   scripts/task-faults.sh [RUNS]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
runs=${1:-1000}
case "$runs" in ''|*[!0-9]*) echo "task-faults: RUNS must be a number, got '$runs'" >&2; exit 2 ;; esac
WARDEN_TASK_FAULT_RUNS=$runs cargo test --locked --test gateway_task_faults -- --nocapture 2>&1 |
    grep -E "task fault runs|^test |test result|panicked|assert|left|right"
