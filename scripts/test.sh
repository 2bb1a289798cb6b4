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

echo "== cargo clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings

echo "== build"
cargo build --workspace --all-targets --locked --release

echo "== tests"
cargo nextest run --workspace --locked --release --no-fail-fast
