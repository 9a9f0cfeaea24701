#!/usr/bin/env bash
# Every test Warden has: the prerequisites first, then Rust (unit, integration, vectors,
# multi-process, crash, CLI, C ABI under valgrind), the header freshness check, clippy with
# -D warnings, the Python and Node bindings against the library built here once, every code block
# of the READMEs and docs as a newcomer pastes it, the installable artifacts installed and run
# without Rust (scripts/dist.sh, scripts/dist-check.sh), mutation testing of the decider files
# changed since the commit recorded in .ci/mutants-base, a fresh clone with nothing beside it,
# and a clean checkout at the end.
#
#   ./scripts/test.sh                  everything, stage by stage (--help lists the stages)
#   ./scripts/test.sh --prerequisites  only check what the suite needs, and that nothing it reads
#                                      lies outside the repository
#   ./scripts/test.sh --help           this text and the stages, in the order they run
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

case "${1:-}" in
    "" | --prerequisites) ;;
    -h | --help)
        sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
        echo
        echo "Stages, in order (each prints '== NAME' as it starts, and its time at the end):"
        grep -E '^ *stage "' "$0" | sed -E 's/^ *stage "([^"]*)".*/  \1/'
        exit 0
        ;;
    *)
        echo "scripts/test.sh: unknown option $1; run it with no option for everything, or see ./scripts/test.sh --help" >&2
        exit 2
        ;;
esac

# ---- prerequisites ------------------------------------------------------------------------------

missing=()
faketime_present() { command -v faketime || [ -x /usr/bin/faketime ]; }
need() { # need WHAT HOW-TO-GET-IT COMMAND...
    local what=$1 how=$2
    shift 2
    if ! "$@" >/dev/null 2>&1; then
        missing+=("$what — $how")
    fi
}
version_at_least() { # version_at_least WANT HAVE
    [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -n1)" = "$1" ]
}
rust_version() { rustc --version | awk '{print $2}'; }
# Shell builtins only: the prerequisite check runs with a minimal PATH too.
postgres_binaries() {
    local candidate
    for candidate in "${PG_BIN:-}" /usr/lib/postgresql/*/bin; do
        if [ -n "$candidate" ] && [ -x "$candidate/initdb" ] && [ -x "$candidate/pg_ctl" ]; then return 0; fi
    done
    command -v initdb && command -v pg_ctl
}
prerequisites() {
    need "Rust (cargo, rustc)" "install it from https://rustup.rs" cargo --version
    if command -v rustc >/dev/null 2>&1; then
        need "Rust >= 1.90 (this is $(rust_version))" "rustup update stable" version_at_least 1.90 "$(rust_version)"
    fi
    need "clippy" "rustup component add clippy" cargo clippy --version
    need "git" "install git (apt install git)" git --version
    need "gcc" "install a C toolchain (apt install build-essential)" gcc --version
    need "nm (binutils)" "install binutils (apt install binutils)" nm --version
    need "Python >= 3.10" "install Python 3.10 or later (apt install python3)" \
        python3 -c 'import sys; sys.exit(sys.version_info < (3, 10))'
    need "Python's venv and pip" "install them (apt install python3-venv python3-pip)" \
        python3 -c 'import venv, ensurepip'
    need "Node >= 18" "install Node.js 18 or later (https://nodejs.org, or apt install nodejs)" \
        node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 18 ? 0 : 1)'
    need "npm" "install npm (apt install npm)" npm --version
    need "PostgreSQL >= 12 server binaries (initdb, pg_ctl)" "install them (apt install postgresql), or set PG_BIN" \
        postgres_binaries
    if [ "$(id -u)" = 0 ]; then
        # As root the two-host tests run, and skew one host's clock with faketime.
        need "faketime (for the two-host tests, which run as root)" "install it (apt install faketime)" faketime_present
    fi
    if [ ${#missing[@]} -gt 0 ]; then
        echo "scripts/test.sh needs what is missing here:" >&2
        printf '  - %s\n' "${missing[@]}" >&2
        exit 1
    fi
    if command -v valgrind >/dev/null 2>&1; then
        echo "prerequisites: all present (the C tests run under valgrind)"
    else
        echo "prerequisites: all present; valgrind is not installed, so the C tests run without it (optional: apt install valgrind)"
    fi
}

# Nothing the suite reads may lie outside the repository: a clone is all a newcomer has.
self_contained() {
    local outside
    outside=$(git ls-files -z | xargs -0 grep -nIE '\.\./(sha[r]ed|vectors)|/work/(main|sha[r]ed|wt-)' -- 2>/dev/null \
        | grep -v '^scripts/test.sh:' || true)
    if [ -n "$outside" ]; then
        echo "these tracked files name paths outside the repository:" >&2
        echo "$outside" >&2
        exit 1
    fi
    echo "self-contained: no tracked file names a path outside the repository"
}

prerequisites
self_contained
if [ "${1:-}" = "--prerequisites" ]; then
    exit 0
fi

# The README's first block names this script; when the README blocks stage runs that block,
# this is that nested call, and the suite is already running.
if [ -n "${IN_WARDEN_TEST_SH:-}" ]; then
    echo "scripts/test.sh: already running (this is its own README blocks stage); not started again"
    exit 0
fi
export IN_WARDEN_TEST_SH=1

# ---- the suite ----------------------------------------------------------------------------------

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
# With test-exports: three benches drive the kernel's internals (`required-features` in Cargo.toml).
benches_build() { cargo test --locked --benches --no-run --features test-exports; }
# The default build: the targets gated on test-exports are skipped here and run in the next
# stage, so tests/every_target.rs's check that nothing was skipped runs there, not here.
rust_tests() { cargo test --locked -- --skip no_test_target_was_skipped_for_a_missing_feature 2>&1 | tee -a "$log"; }
# The tests with `required-features = ["test-exports"]` in Cargo.toml (they drive internals that
# are `pub` only in that build), the broken-build controls and the test-only C exports.
gated_tests() { awk '/^\[/{test=($0=="[[test]]"); name=""} test && /^name = /{gsub(/"/,"",$3); name=$3} test && /^required-features = \["test-exports"\]/{print "--test " name}' Cargo.toml; }
broken_build_controls() {
    # shellcheck disable=SC2046 # one word per flag
    cargo test --locked --features test-exports --test verify --test every_target $(gated_tests) --lib 2>&1 | tee -a "$log"
    # The doc tests that prove internals private must compile here, where those are public (a
    # typo in one would otherwise pass as "does not compile"; see `private_outside!` in lib.rs).
    cargo test --locked --features test-exports --doc 2>&1 | tee -a "$log"
    # The C programs already ran under valgrind against the default build (`cargo test`); here
    # only the ones that need this build: the forced panic and the test-only symbol check.
    cargo test --locked --features test-exports --test c_abi -- a_forced_panic \
        the_library_this_run_built_has_test_only_symbols 2>&1 | tee -a "$log"
}
readme_blocks() { python3 scripts/readme_blocks.py; }
# The conformance tests again with every store in PostgreSQL (a private server started here and
# removed at the end, also on failure), and the PostgreSQL backend's own tests.
pg_dir=""
stop_postgres() { if [ -n "$pg_dir" ]; then scripts/pg-server.sh stop "$pg_dir"; pg_dir=""; fi; }
trap stop_postgres EXIT
# The store conformance suite: what every engine must do alike. It runs on the file in the
# "cargo test" stage, and here on PostgreSQL and on memory. Not applicable elsewhere than the file,
# so not listed: file_faults, store_migration, bitflip_sweep, contention (redb's pages, schema
# rows and single writer; PostgreSQL's own are tests/postgres.rs), takeover (the file's owner
# election). multiprocess needs a store other processes can open: PostgreSQL, not memory.
conformance=(--test kernel --test approvals --test authority_store --test authority_document --test pipeline
    --test kernel_refusal_kinds --test approval_webhook --test authority_budgets --test chain --test store_faults
    --test authority_budget_store --test evidence --test auto_checkpoints --test anchors --test retention)
postgres_tests() {
    pg_dir=$(mktemp -d /tmp/warden-pg.XXXXXX)
    local url; url=$(scripts/pg-server.sh start "$pg_dir")
    echo "PostgreSQL: $url (data in $pg_dir)"
    WARDEN_TEST_STORE="$url" WARDEN_TEST_PG_DIR="$pg_dir" cargo test --locked --features test-exports \
        "${conformance[@]}" --test multiprocess --test postgres 2>&1 | tee -a "$log"
    stop_postgres
}
memory_tests() {
    WARDEN_TEST_STORE=memory cargo test --locked --features test-exports "${conformance[@]}" 2>&1 | tee -a "$log"
}

# With Node and npm off the PATH, the prerequisite check stops before building and names both.
prerequisites_are_named() {
    local bin; bin=$(mktemp -d)
    local tool
    for tool in cargo rustc git gcc nm bash sort head awk dirname grep xargs; do
        ln -s "$(command -v "$tool")" "$bin/$tool"
    done
    # The interpreter itself, not a version manager's shim that needs more of the PATH.
    ln -s "$(python3 -c 'import sys; print(sys.executable)')" "$bin/python3"
    local out status=0
    out=$(PATH="$bin" CARGO_HOME="${CARGO_HOME:-$HOME/.cargo}" RUSTUP_HOME="${RUSTUP_HOME:-$HOME/.rustup}" \
        "$bin/bash" ./scripts/test.sh --prerequisites 2>&1) || status=$?
    rm -rf "$bin"
    local named; named=$(grep -c '^  - ' <<<"$out" || true)
    if [ "$status" -ne 1 ] || [ "$named" -ne 2 ] || ! grep -q '^  - Node >= 18 — ' <<<"$out" \
        || ! grep -q '^  - npm — ' <<<"$out"; then
        echo "the prerequisite check did not name exactly the missing Node and npm (exit $status):" >&2
        echo "$out" >&2
        exit 1
    fi
    echo "the prerequisite check names what is missing (Node and npm, here)"
}

# A clone in a folder with nothing beside it (no sibling folders): the prerequisites and
# self-containment checks pass there (and name what is missing when something is), and the vector
# suites read the clone's own vectors.
fresh_clone() {
    local dir; dir=$(mktemp -d)
    git clone --quiet --no-hardlinks "$root" "$dir/warden"
    (cd "$dir/warden" && ./scripts/test.sh --prerequisites && prerequisites_are_named)
    # The Python suites of the clone (vectors and header) against the library built here.
    (cd "$dir/warden/bindings/python" && WARDEN_REPO="$dir/warden" WARDEN_BUILT_LIB="$CARGO_TARGET_DIR/release/libwarden.so" \
        "$CARGO_TARGET_DIR/py-venv/bin/pytest" -q tests/test_vectors.py tests/test_header.py)
    rm -rf "$dir"
}

# The file the mutation stage (below) may advance: the one change a run may leave.
mutants_base_file=.ci/mutants-base

# The whole run leaves nothing behind that git would see.
clean_checkout() {
    # The one change the suite may make: the mutation stage advancing its base, to be committed.
    local changes; changes=$(git status --porcelain | grep -vxF " M $mutants_base_file" || true)
    if [ -n "$changes" ] && [ "$changes" != "${checkout_before:-}" ]; then
        echo "the suite changed the checkout (git status --porcelain):" >&2
        diff <(echo "${checkout_before:-}") <(echo "$changes") >&2 || true
        exit 1
    fi
    echo "the checkout is as it was before the suite (git status --porcelain)"
}
checkout_before=$(git status --porcelain | grep -vxF " M $mutants_base_file" || true)

stage "clippy (-D warnings)" clippy
stage "public API: cargo doc --no-deps lists docs/public-api.txt" scripts/public-api.sh
stage "import cycles: no file-level import cycle in src/ (scripts/import-cycles.py)" python3 scripts/import-cycles.py
stage "release build (library + CLI, shared by bindings)" release_build
stage "cargo test" rust_tests
stage "cargo test --features test-exports" broken_build_controls
stage "PostgreSQL: the conformance tests and the backend's own" postgres_tests
stage "memory: the conformance tests" memory_tests
# Built and linked in the test profile, sharing the build above; `cargo bench` builds them optimized.
stage "benches compile and link (cargo test --benches --no-run)" benches_build
if [ -x bindings/python/run-tests.sh ]; then
    stage "python binding" bash -c "set -o pipefail; bindings/python/run-tests.sh 2>&1 | tee -a '$log'"
fi
# `warden console` in a real browser: headless Chromium from the distribution's packages (.ci/run
# installs chromium and chromium-driver; the stage says SKIP without them), Selenium from PyPI,
# and a real agent on the binding just installed, whose blocked call proceeds once approved.
if [ -x bindings/python/run-tests.sh ]; then
    stage "console in a real browser (headless Chromium)" bash -c "set -o pipefail; tests/console_browser/run.sh '$CARGO_TARGET_DIR/py-venv/bin/python' '$CARGO_TARGET_DIR/release/warden' 2>&1 | tee -a '$log'"
fi
# Two hosts (network namespaces) on one PostgreSQL store, through the Python binding just
# installed: needs root for ip netns, and says it skipped otherwise.
stage "PostgreSQL: two network-namespace hosts, a partition" bash -c "set -o pipefail; tests/netns/two_hosts.sh '$CARGO_TARGET_DIR/py-venv/bin/python' 2>&1 | tee -a '$log'"
if [ -x bindings/node/run-tests.sh ]; then
    stage "node binding" bash -c "set -o pipefail; bindings/node/run-tests.sh 2>&1 | tee -a '$log'"
fi
if [ -x bindings/python/run-tests.sh ] && [ -x bindings/node/run-tests.sh ]; then
    stage "cross-language race (python + node + cli)" bash -c "set -o pipefail; '$CARGO_TARGET_DIR/py-venv/bin/python' tests/cross_language/run.py '$root' '$CARGO_TARGET_DIR' 50 2>&1 | tee -a '$log'"
fi
# The gateway with real MCP software (the official Python SDK as client and server, the official
# TypeScript SDK as client, the reference server-everything from npm), through the debug CLI the
# Rust tests built.
stage "MCP interop: official Python and TypeScript SDKs and server-everything through the gateway" bash -c "set -o pipefail; tests/interop/run.sh 2>&1 | tee -a '$log'"
# The installable artifacts: scripts/dist.sh compiles once in its own `dist` profile (the release
# build above cannot be reused: the shipped binaries are built with this machine's source paths
# remapped, which changes every crate's flags), then scripts/dist-check.sh installs the wheel, the
# npm tarball and the CLI archive with no cargo, rustc or cc on PATH and runs the quickstarts.
dist_artifacts() { scripts/dist.sh && scripts/dist-check.sh; }
stage "artifacts: dist.sh, installed and run without Rust" dist_artifacts
stage "README blocks, as pasted (demo, quickstarts)" readme_blocks
# Mutation testing (scripts/mutants.sh) of the decider files changed since the last commit this
# stage verified: .ci/mutants-base, a tracked file committed with the code, names that commit, so
# a clean clone in CI mutates everything a submission of any number of commits changed. After a
# run with nothing missed, the stage writes HEAD there (when the working tree's deciders are
# HEAD's); committing that file with the next commit is what advances the base. It fails closed: a
# base that is missing, unreadable, not a commit here or not an ancestor of HEAD stops the suite.
# Needs cargo-mutants (.ci/run installs it); without it the stage says it skipped.
mutants_base() { { grep -Ev '^[[:space:]]*(#|$)' "$mutants_base_file" 2>/dev/null || true; } | head -n1 | tr -d '[:space:]'; }
mutants_in_diff() {
    local base; base=$(mutants_base)
    if [ -z "$base" ]; then
        echo "mutation testing: $mutants_base_file names no commit; write the id of the last commit whose deciders" \
            "were mutation-tested there (git rev-parse HEAD after a full scripts/mutants.sh run)" >&2
        exit 1
    fi
    if ! git rev-parse --verify --quiet "$base^{commit}" >/dev/null; then
        echo "mutation testing: $mutants_base_file names $base, which is not a commit in this clone" \
            "(a shallow clone needs git fetch --unshallow; a rewritten history needs a new base)" >&2
        exit 1
    fi
    if ! git merge-base --is-ancestor "$base" HEAD; then
        echo "mutation testing: $mutants_base_file names $base, which is not an ancestor of HEAD, so the" \
            "deciders changed since it cannot be told; write there the newest ancestor of HEAD whose deciders" \
            "were mutation-tested (git merge-base $base HEAD, if that one was)" >&2
        exit 1
    fi
    if ! cargo mutants --version >/dev/null 2>&1; then
        echo "skipped: cargo-mutants is not installed (cargo install --locked cargo-mutants@27.1.0);" \
            "the deciders changed since $(git rev-parse --short "$base") are not mutation-tested"
        return 0
    fi
    local out status=0
    out=$(mktemp)
    scripts/mutants.sh --in-diff "$base" 2>&1 | tee "$out" || status=$?
    # mutants.sh's summary row: total CAUGHT MISSED UNVIABLE TIMEOUTS.
    local total; total=$(awk '$1 == "total" && NF == 5 {print $2, $3, $4, $5}' "$out")
    rm -f "$out"
    local caught=0 missed=0 unviable=0 timeouts=0
    [ -z "$total" ] || read -r caught missed unviable timeouts <<<"$total"
    local ran=$((caught + missed + timeouts))
    local since; since="since $(git rev-parse --short "$base")"
    if [ "$ran" -eq 0 ] && [ "$status" -eq 0 ]; then
        echo "mutation testing: no mutant ran $since: no decider changed, or the changes touch no mutable code"
    else
        echo "mutation testing $since: $ran mutant(s) ran, $((caught + timeouts)) caught" \
            "($timeouts by timeout), $missed missed; $unviable did not build"
    fi
    if [ "$status" -ne 0 ]; then
        exit "$status"
    fi
    local head; head=$(git rev-parse HEAD)
    if [ "$base" = "$head" ]; then
        :
    elif [ -z "$(git status --porcelain -- src)" ]; then
        printf '%s\n%s\n' "$(grep -E '^[[:space:]]*#' "$mutants_base_file")" "$head" > "$mutants_base_file"
        echo "mutation testing: the base advanced to $head in $mutants_base_file; commit it with your next commit"
    else
        echo "mutation testing: the base stays at $base: src/ differs from HEAD, so no commit was verified" \
            "as it is; commit the change and run the suite again to advance it"
    fi
}
stage "mutation testing (deciders changed since .ci/mutants-base)" mutants_in_diff
stage "a fresh clone with nothing beside it" fresh_clone
stage "the checkout is left clean" clean_checkout

echo
echo "== stage timings"
printf '%s\n' "${timings[@]}"
passed=$(grep -Eo '(^|[^0-9])[0-9]+ passed' "$log" | grep -Eo '[0-9]+' | awk '{s+=$1} END {print s+0}')
failed=$(grep -Eo '(^|[^0-9])[0-9]+ failed' "$log" | grep -Eo '[0-9]+' | awk '{s+=$1} END {print s+0}')
echo "all: ${passed} passed, ${failed} failed"
