#!/usr/bin/env bash
# Action throughput with automatic checkpoints on and off (issue: "≥ 95% of the same run
# without"). `warden bench` runs the same document with and without its evidence section; this
# alternates the two for ROUNDS rounds (off first in odd rounds, on first in even ones, so a
# drift of the disk favours neither) and prints each round's ratio and their geometric mean
# (the second run of a pair is often slower, so the medians of the cells alone are biased).
#
#   benches/checkpoints.sh [ROUNDS] [ACTIONS]      default 3 rounds of 6,000 actions per row
#
# Stores go in target/checkpoints-bench (removed by `warden bench` after each run).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
actions=${2:-6000}
cargo build --locked --release --bin warden >&2
out=target/checkpoints-bench
mkdir -p "$out"
rm -f "$out"/*.json
for round in $(seq 1 "$rounds"); do
    if (( round % 2 )); then order="off on"; else order="on off"; fi
    for mode in $order; do
        echo "round $round/$rounds: checkpoints $mode" >&2
        target/release/warden bench --dir "$out" --actions "$actions" --threads 1,8 --processes 8 \
            --outcomes durable --checkpoints "$mode" --json 2>/dev/null >"$out/$round-$mode.json"
    done
done
python3 - "$out" "$rounds" <<'EOF'
import json, math, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
cells = {}
machine = None
for n in range(1, rounds + 1):
    for mode in ("off", "on"):
        doc = json.load(open(f"{out}/{n}-{mode}.json"))
        machine = doc["machine"]
        for row in doc["rows"]:
            cells.setdefault(row["workload"], {}).setdefault(mode, []).append(row)
print(f"{machine}; {rounds} rounds, off and on alternating which runs first\n")
print("| workload (durable) | off, median actions/s | on, median actions/s | on / off per round | on / off, geometric mean | checkpoints per run |")
print("|---|---|---|---|---|---|")
for workload, modes in cells.items():
    off = [r["actions_per_second"] for r in modes["off"]]
    on = [r["actions_per_second"] for r in modes["on"]]
    ratios = [b / a for a, b in zip(off, on)]
    mean = math.exp(sum(map(math.log, ratios)) / len(ratios))
    made = ", ".join(str(r["checkpoints"]) for r in modes["on"])
    print(f"| {workload} | {statistics.median(off):,.0f} | {statistics.median(on):,.0f} | "
          f"{' '.join(f'{x:.2f}' for x in ratios)} | {mean:.1%} | {made} |")
EOF
