#!/usr/bin/env bash
# The C ABI's own checks: the header is fresh and documented, the Rust-side FFI tests, and the
# C programs in tests/c (gcc -std=c11 -Wall -Wextra -Werror -pedantic; shared and static; under
# valgrind), without and with the test-only exports.
set -euo pipefail
cd "$(dirname "$0")/.."
export RUST_BACKTRACE=0
cargo test --lib ffi
cargo test --features test-exports --lib ffi
cargo test --test c_abi
cargo test --features test-exports --test c_abi
