#!/usr/bin/env bash
# Every test Warden has: Rust (unit, integration, vectors, multi-process, crash, CLI, C ABI
# under valgrind), the header freshness check, clippy with -D warnings, the demo, the
# Python and Node bindings against the library built here once, and mutation testing of the
# decider files the last commit changed.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
export RUST_BACKTRACE=0
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
mkdir -p "$CARGO_TARGET_DIR"
log="$CARGO_TARGET_DIR/test-output.txt"
: > "$log"


timings=()
stage() {
    local name=$1; shift
    local started=$SECONDS
    echo "== $name"
    "$@"
    timings+=("$(printf '%-44s %4ss' "$name" $((SECONDS - started)))")
}

clippy() { cargo clippy --locked --all-targets -- -D warnings; }
release_build() { cargo build --locked --release --lib --bin warden; }
demo() { "$CARGO_TARGET_DIR/release/warden" demo >/dev/null; }
rust_tests() { cargo test --locked 2>&1 | tee -a "$log"; }
broken_build_controls() { cargo test --locked --features test-exports --test verify --test c_abi --lib 2>&1 | tee -a "$log"; }

stage "clippy (-D warnings)" clippy
stage "release build (library + CLI, shared by bindings)" release_build
stage "demo" demo
c_quickstart() {
    gcc -std=c11 -Wall -Wextra -Werror -pedantic -I include bindings/c/quickstart.c \
        -L "$CARGO_TARGET_DIR/release" -lwarden -Wl,-rpath,"$CARGO_TARGET_DIR/release" -o "$CARGO_TARGET_DIR/quickstart"
    local dir; dir=$(mktemp -d)
    "$CARGO_TARGET_DIR/quickstart" "$dir/q.redb" src/bin/warden/starter.yaml | grep -q "WARDEN_RESULT_DUPLICATE"
    rm -rf "$dir"
}
stage "C quickstart (compile -Werror, run)" c_quickstart
stage "cargo test" rust_tests
stage "cargo test --features test-exports" broken_build_controls
if [ -x bindings/python/run-tests.sh ]; then
    stage "python binding" bash -c "set -o pipefail; bindings/python/run-tests.sh 2>&1 | tee -a '$log'"
fi
if [ -x bindings/node/run-tests.sh ]; then
    stage "node binding" bash -c "set -o pipefail; bindings/node/run-tests.sh 2>&1 | tee -a '$log'"
fi
if [ -x bindings/python/run-tests.sh ] && [ -x bindings/node/run-tests.sh ]; then
    stage "cross-language race (python + node + cli)" bash -c "set -o pipefail; '$CARGO_TARGET_DIR/py-venv/bin/python' tests/cross_language/run.py '$root' '$CARGO_TARGET_DIR' 50 2>&1 | tee -a '$log'"
fi
# Mutation testing of the decider files the last commit changed (scripts/mutants.sh), when
# cargo-mutants is installed (.ci/run installs it); the full run is `scripts/mutants.sh`.
mutants_in_diff() {
    if ! cargo mutants --version >/dev/null 2>&1; then
        echo "skipped: cargo-mutants is not installed (cargo install --locked cargo-mutants@27.1.0)"
    elif ! git rev-parse --verify --quiet HEAD~1 >/dev/null 2>&1; then
        echo "skipped: no previous commit to compare against (not a git clone, or a shallow one)"
    else
        scripts/mutants.sh --in-diff HEAD~1
    fi
}
stage "mutation testing (deciders changed since HEAD~1)" mutants_in_diff

echo
echo "== stage timings"
printf '%s\n' "${timings[@]}"
passed=$(grep -Eo '(^|[^0-9])[0-9]+ passed' "$log" | grep -Eo '[0-9]+' | awk '{s+=$1} END {print s+0}')
failed=$(grep -Eo '(^|[^0-9])[0-9]+ failed' "$log" | grep -Eo '[0-9]+' | awk '{s+=$1} END {print s+0}')
echo "all: ${passed} passed, ${failed} failed"
