#!/bin/sh
# kafka-mirrors.sh: KIP-1279's mirror tool, served by `ottla mirrors`.
# Runs $OTTLA_BIN if set, else this repository's target/release/ottla, else
# `ottla` from PATH. Options: kafka-mirrors.sh --help.
set -eu

if [ -n "${OTTLA_BIN:-}" ]; then
    ottla=$OTTLA_BIN
else
    repo=$(CDPATH='' cd -- "$(dirname -- "$0")/.." && pwd)
    if [ -x "$repo/target/release/ottla" ]; then
        ottla=$repo/target/release/ottla
    elif command -v ottla >/dev/null 2>&1; then
        ottla=ottla
    else
        echo "kafka-mirrors.sh: no ottla binary: run 'cargo build --release -p ottla-broker'," \
            "put ottla on PATH or set OTTLA_BIN" >&2
        exit 127
    fi
fi
exec "$ottla" mirrors "$@"
