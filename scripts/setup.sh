#!/usr/bin/env bash
# Installs what the build and the test suite need. Idempotent and quiet when
# everything is already present.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo >/dev/null 2>&1; then
  echo "cargo is required (rustup: https://rustup.rs)" >&2
  exit 1
fi
if ! cargo nextest --version >/dev/null 2>&1; then
  cargo install cargo-nextest --locked
fi

# The stock clients the interoperability tests drive: Apache Kafka's CLI jars
# from Maven Central and a Python venv with confluent-kafka and kafka-python.
scripts/kafka-tools.sh >/dev/null
scripts/python-env.sh >/dev/null
