#!/usr/bin/env bash
# Every test Warden has: the Rust suites (unit, integration, vectors, multi-process, crash,
# CLI), the header freshness check, clippy with -D warnings, and a run of the demo.
# C, Python and Node suites join here as the boundary lands.
set -euo pipefail
cd "$(dirname "$0")/.."
export RUST_BACKTRACE=0

if [ ! -d ../shared/vectors/ctrlrun-0.12.2 ]; then
    echo "test.sh: ../shared/vectors/ctrlrun-0.12.2 is missing; the vector tests read it from beside the repository" >&2
    exit 2
fi

echo "== clippy (-D warnings)"
cargo clippy --locked --all-targets -- -D warnings

echo "== demo"
cargo run --locked --quiet --release --bin warden -- demo >/dev/null

echo "== cargo test"
cargo test --locked 2>&1 | tee target/test-output.txt

echo "== cargo test --features test-exports (positive controls that need a deliberately broken build)"
cargo test --locked --features test-exports --test verify 2>&1 | tee -a target/test-output.txt
passed=$(grep -Eo '[0-9]+ passed' target/test-output.txt | awk '{s+=$1} END {print s+0}')
failed=$(grep -Eo '[0-9]+ failed' target/test-output.txt | awk '{s+=$1} END {print s+0}')
echo "rust: ${passed} passed, ${failed} failed"
