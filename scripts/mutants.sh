#!/usr/bin/env bash
# Mutation testing of the pure deciders with cargo-mutants: each mutant (a `>` made `>=`, a
# match arm deleted, a function made to return a constant) must make a fast test fail. A mutant
# no test catches fails this script, unless `.cargo/mutants.toml` lists it under `exclude_re`
# with a one-line reason (equivalent mutants only: no test can tell them apart).
#
#   scripts/mutants.sh                  every decider file below
#   scripts/mutants.sh FILE...          only these decider files (while iterating)
#   scripts/mutants.sh --in-diff BASE   only code changed since BASE (`git diff BASE`) in them
#
# Each group of files below names its fast test targets; the cargo profile and the exclusions
# live in .cargo/mutants.toml. One job at a time by default: builds then share $CARGO_TARGET_DIR
# (default target/) under the `mutants` profile, so dependencies are built once and the debug
# build is never overwritten. MUTANTS_JOBS=N runs N mutants at once, each job building in its
# own scratch copy's target/ (dependencies built once per job): concurrent builds into one
# shared target directory would overwrite each other's test binaries, so a job could test
# another job's mutant. Reports: $CARGO_TARGET_DIR/mutants-report/.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

# The pure deciders, in groups that share their fast test targets: each group is one cargo-mutants
# run that builds and runs only those targets for each mutant. To add a file: add it to a group
# (or a new group with its own targets), run `scripts/mutants.sh FILE`, and either write the tests its
# survivors call for or list the equivalent ones in .cargo/mutants.toml with the reason.
GROUP_NAMES=(effects json policy sight authority approvals identity evidence)
GROUP_FILES=(
    "src/effect.rs src/effect_state.rs src/approval.rs src/hint.rs src/error/denial.rs src/receipt.rs src/kernel/claim.rs"
    "src/canonical.rs src/action.rs src/template.rs"
    "src/policy.rs src/document/conditions.rs src/condition.rs"
    "src/sight/confine.rs"
    "src/authority/pattern.rs src/authority/containment.rs src/authority/evaluate.rs src/authority/chain.rs src/authority/budget.rs"
    "src/approval/requirement.rs src/approval/person.rs src/approval/precondition.rs src/approval/scope.rs"
    "src/identity/jwt.rs"
    "src/evidence/settings.rs src/evidence/anchoring.rs src/evidence/retention.rs"
)
# Cargo features a group's targets need (kernel, chain, authority, approvals and retention are
# test-exports targets: Cargo.toml's required-features).
GROUP_FEATURES=("test-exports" "" "" "" "test-exports" "test-exports" "" "test-exports")
GROUP_TESTS=(
    "--lib --test kernel --test chain --test idempotency --test pipeline"
    "--lib --test canonical_props --test vectors --test template_props"
    "--lib --test policy_vectors --test document_load --test document_props"
    "--lib --test sight_confine"
    "--lib --test authority --test authority_vectors --test authority_props --test authority_budgets"
    "--lib --test approvals"
    "--lib --test identity"
    "--lib --test anchors --test retention"
)
read -r -a DECIDERS <<< "${GROUP_FILES[*]}"

usage() {
    sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 1
}

base=""
files=()
while [ $# -gt 0 ]; do
    case "$1" in
        --in-diff)
            [ $# -ge 2 ] || usage
            base=$2
            shift 2
            ;;
        -h | --help) usage ;;
        -*) echo "mutants.sh: unknown option $1" >&2; usage ;;
        *)
            if ! printf '%s\n' "${DECIDERS[@]}" | grep -qxF "$1"; then
                echo "mutants.sh: $1 is not one of the decider files: ${DECIDERS[*]}" >&2
                exit 1
            fi
            files+=("$1")
            shift
            ;;
    esac
done
[ ${#files[@]} -gt 0 ] || files=("${DECIDERS[@]}")

if ! version=$(cargo mutants --version 2>/dev/null); then
    echo "mutants.sh: cargo-mutants is not installed; install it with:" >&2
    echo "    cargo install --locked cargo-mutants" >&2
    exit 1
fi

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
report="$CARGO_TARGET_DIR/mutants-report"

if [ -n "$base" ]; then
    if ! git rev-parse --verify --quiet "$base^{commit}" >/dev/null; then
        echo "mutants.sh: --in-diff $base: not a commit in this repository (a shallow clone?)" >&2
        exit 1
    fi
    # The working tree against BASE, as cargo-mutants copies the working tree.
    mapfile -t changed < <(git diff --name-only "$base" -- "${files[@]}")
    if [ ${#changed[@]} -eq 0 ]; then
        echo "mutants.sh: no decider file changed since $base; nothing to test"
        exit 0
    fi
    files=("${changed[@]}")
    echo "mutants.sh: decider files changed since $base: ${files[*]}"
fi

echo "mutants.sh: $version, ${#files[@]} file(s), $(nproc) CPU(s), ${MUTANTS_JOBS:-1} job(s)"
# The previous run's report goes only now: a run with nothing to test leaves it alone.
rm -rf "$report"
mkdir -p "$report"

# One cargo-mutants run, judged by its exit status: 0 all caught, 2 some missed, 3 some timed
# out (a hang the tests never let finish counts as caught; missed ones are still listed).
# Anything else is a baseline failure or a diff that does not apply: the run tells nothing.
run_pass() {
    local what=$1 out=$2
    shift 2
    local status=0
    if [ "${MUTANTS_JOBS:-1}" -gt 1 ]; then
        env -u CARGO_TARGET_DIR cargo mutants "$@" || status=$?
    else
        cargo mutants "$@" || status=$?
    fi
    case $status in
        0 | 2 | 3) ;;
        *)
            echo "mutants.sh: cargo mutants failed (exit $status) before judging $what;" \
                "see $out/mutants.out/debug.log" >&2
            exit 1
            ;;
    esac
}

# Test-target arguments (`--lib --test kernel`) as cargo-mutants arguments for every cargo
# invocation (`--cargo-arg=--lib --cargo-arg=--test=kernel`).
cargo_args() {
    while [ $# -gt 0 ]; do
        case "$1" in
            --test) printf -- '--cargo-arg=--test=%s\n' "$2"; shift 2 ;;
            *) printf -- '--cargo-arg=%s\n' "$1"; shift ;;
        esac
    done
}

# Every cargo-mutants run builds Warden from a new scratch copy, so Warden's own artifacts under
# the profile are never reused: drop them at the end (the dependencies stay built).
prune() {
    local dir="$CARGO_TARGET_DIR/mutants" name
    rm -rf "$dir/incremental" "$dir"/build/warden-*
    for name in warden $(basename -s .rs tests/*.rs); do
        rm -f "$dir/deps/$name"-* "$dir/deps/lib$name"-*
    done
}
trap prune EXIT

started=$SECONDS
for kind in caught missed unviable timeout; do : > "$report/$kind.txt"; done
for index in "${!GROUP_NAMES[@]}"; do
    name=${GROUP_NAMES[$index]}
    selected=()
    for file in ${GROUP_FILES[$index]}; do
        if printf '%s\n' "${files[@]}" | grep -qxF "$file"; then selected+=("$file"); fi
    done
    [ ${#selected[@]} -gt 0 ] || continue
    read -r -a tests <<< "${GROUP_TESTS[$index]}"
    out="$report/$name"
    args=(--jobs "${MUTANTS_JOBS:-1}" --output "$out" --colors never)
    for file in "${selected[@]}"; do
        args+=(--file "$file")
    done
    if [ -n "$base" ]; then
        git diff "$base" -- "${selected[@]}" > "$report/$name.patch"
        args+=(--in-diff "$report/$name.patch")
    fi
    group_started=$SECONDS
    # Pass 1, the unit tests alone: one small binary to rebuild per mutant, and most mutants die
    # here. Pass 2 (--iterate skips what pass 1 caught) runs the survivors against the group's
    # targets. The verdicts are those of one run over all the targets, in a fraction of the time.
    echo
    echo "== $name, pass 1: ${selected[*]} against --lib"
    # The targets go to every cargo invocation (`--cargo-arg`), not only to `cargo test`: given
    # after `--` they reach the test run alone, and each mutant's build step compiled every
    # test target of the crate (30–100 s a mutant's build on this machine instead of 3–5 s).
    run_pass "$name (pass 1)" "$out" "${args[@]}" --cargo-arg=--lib
    # An in-diff run whose changes touch no mutable code writes no report.
    [ -d "$out/mutants.out" ] || continue
    cat "$out/mutants.out/caught.txt" >> "$report/caught.txt"
    cat "$out/mutants.out/unviable.txt" >> "$report/unviable.txt"
    if [ -s "$out/mutants.out/missed.txt" ] || [ -s "$out/mutants.out/timeout.txt" ]; then
        echo "== $name, pass 2: the survivors of pass 1 against ${tests[*]}"
        features=()
        [ -z "${GROUP_FEATURES[$index]}" ] || features=(--features "${GROUP_FEATURES[$index]}")
        mapfile -t targets < <(cargo_args "${tests[@]}")
        run_pass "$name (pass 2)" "$out" "${args[@]}" "${features[@]}" --iterate "${targets[@]}"
        for kind in caught missed unviable timeout; do
            cat "$out/mutants.out/$kind.txt" >> "$report/$kind.txt"
        done
    fi
    echo "== $name: $((SECONDS - group_started))s"
done
elapsed=$((SECONDS - started))

count() { grep -c "^$1:" "$report/$2.txt" || true; }
echo
printf '%-28s %7s %7s %9s %9s\n' file caught missed unviable timeouts
for file in "${files[@]}"; do
    printf '%-28s %7s %7s %9s %9s\n' "$file" \
        "$(count "$file" caught)" "$(count "$file" missed)" "$(count "$file" unviable)" "$(count "$file" timeout)"
done
printf '%-28s %7s %7s %9s %9s\n' total \
    "$(wc -l < "$report/caught.txt")" "$(wc -l < "$report/missed.txt")" \
    "$(wc -l < "$report/unviable.txt")" "$(wc -l < "$report/timeout.txt")"
echo "mutants.sh: ${elapsed}s in all; reports in $report"
if [ -s "$report/timeout.txt" ]; then
    echo "mutants.sh: timed out (counted as caught; rerun the file if the machine was busy):"
    sed 's/^/    /' "$report/timeout.txt"
fi
if [ -s "$report/missed.txt" ]; then
    echo "mutants.sh: FAILED: mutants no test caught (write the test that fails on each, or, only if" >&2
    echo "no test can tell it apart, add it to exclude_re in .cargo/mutants.toml with the reason):" >&2
    sed 's/^/    /' "$report/missed.txt" >&2
    exit 1
fi
echo "mutants.sh: every mutant was caught or is listed as equivalent"
