#!/usr/bin/env bash
# Runs every test Ottla has: formatting and lint gates, unit and property tests,
# crash and integration tests (which drive real ottla processes with the stock
# Kafka clients). Installs what it needs on a bare machine first.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== setup"
scripts/setup.sh

echo "== cargo fmt"
cargo fmt --all -- --check

echo "== module cycles"
python3 scripts/module-cycles.py

# Clippy's lints, as errors, run inside the release build: clippy-driver is
# the compiler of the workspace's crates (what `cargo clippy` does, minus the
# stop after type-checking). A separate `cargo clippy` type-checks the whole
# workspace and its dependencies a second time, a seventh of CI's time on two
# cores. The test run below sees the same variables, so it builds nothing again;
# a plain `cargo build` afterwards recompiles the workspace's crates (the
# wrapper is part of cargo's fingerprint), as the benchmarks' builds do.
CLIPPY_DRIVER="$(rustc --print sysroot)/bin/clippy-driver"
if [ ! -x "$CLIPPY_DRIVER" ]; then
  echo "clippy is missing: rustup component add clippy" >&2
  exit 1
fi
export RUSTC_WORKSPACE_WRAPPER="$CLIPPY_DRIVER"
export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"
# CLIPPY_ARGS is how cargo-clippy hands lint levels to the driver; make sure
# this driver still reads it, so a lint cannot pass unnoticed.
canary="$(mktemp -d)"
printf 'fn main() {\n    let v = [1];\n    if v.len() == 0 {}\n}\n' >"$canary/lint.rs"
canary_out="$("$CLIPPY_DRIVER" --edition 2021 --emit=metadata \
  -o "$canary/lint.rmeta" "$canary/lint.rs" 2>&1 || true)"
if [[ "$canary_out" != *"error: length comparison to zero"* ]]; then
  echo "clippy-driver ignored CLIPPY_ARGS: run cargo clippy -- -D warnings instead" >&2
  exit 1
fi
rm -rf "$canary"

echo "== build, with clippy's lints as errors"
cargo build --workspace --all-targets --locked --release

echo "== tests"
cargo nextest run --workspace --locked --release --no-fail-fast
