#!/usr/bin/env bash
# Creates (or brings up to date) the Python virtualenv that the tests use,
# $OTTLA_CACHE/venv, with the packages pinned in tests/python/requirements.txt:
# confluent-kafka, kafka-python with its compression codecs and crc32c, pytest.
#
# The last line of stdout is the venv's python:
#   PY=$(scripts/python-env.sh | tail -1)
#
# Idempotent; when the venv matches the requirements and the interpreter it
# runs no pip and takes some tens of milliseconds. Safe to call from parallel tests (a lock serialises them).
#
# Environment:
#   OTTLA_CACHE   cache root (default <repo>/.cache)
#   OTTLA_PYTHON  interpreter to build the venv from (default python3, 3.9+)
set -euo pipefail
# shellcheck source=scripts/_common.sh
. "$(dirname "$0")/_common.sh"

VENV=$OTTLA_CACHE/venv
REQ=$OTTLA_ROOT/tests/python/requirements.txt
STAMP=$VENV/.ottla-requirements
BASE_PY=${OTTLA_PYTHON:-python3}

# Imports that prove the install works (kafka-python finds its codecs lazily,
# so ask it directly rather than trusting pip).
CHECK='
import confluent_kafka, kafka, kafka.codec, crc32c, lz4, snappy, zstandard, pytest
missing = [n for n, ok in [
    ("gzip", kafka.codec.has_gzip()), ("snappy", kafka.codec.has_snappy()),
    ("lz4", kafka.codec.has_lz4()), ("zstd", kafka.codec.has_zstd())] if not ok]
assert not missing, "kafka-python lacks codecs: %s" % missing
'

stamp_of() {
  # What the venv is built from: the requirements and the base interpreter.
  { cat "$REQ"; "$BASE_PY" -c 'import sys; print(sys.executable, sys.version)'; } |
    sha256sum | cut -d' ' -f1
}

up_to_date() {
  [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$(stamp_of 2>/dev/null)" ] &&
    "$VENV/bin/python" -c '' 2>/dev/null
}

if up_to_date; then
  printf '%s\n' "$VENV/bin/python"
  exit 0
fi

ottla_lock "$OTTLA_CACHE/venv.lock"
if ! up_to_date; then
  start=$(date +%s)
  command -v "$BASE_PY" >/dev/null 2>&1 || ottla_apt_install python3 python3-venv
  "$BASE_PY" -c 'import sys; assert sys.version_info >= (3, 9), sys.version' ||
    ottla_die "$BASE_PY is older than Python 3.9"
  # Debian's own python3 has no ensurepip until python3-venv is installed.
  "$BASE_PY" -c 'import ensurepip, venv' 2>/dev/null || ottla_apt_install python3-venv
  # Built from scratch whenever the requirements or the interpreter change,
  # so nothing stale survives (a few seconds with pip's cache warm).
  ottla_log "creating the Python venv $VENV"
  rm -rf "$VENV"
  "$BASE_PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check -r "$REQ" >&2
  "$VENV/bin/python" -c "$CHECK" || ottla_die "the venv $VENV is incomplete"
  stamp_of >"$STAMP"
  ottla_log "Python venv ready in $(( $(date +%s) - start ))s"
fi
printf '%s\n' "$VENV/bin/python"
