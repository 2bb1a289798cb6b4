#!/usr/bin/env bash
# End-to-end smoke test of the Kafka tooling against a broker: Kafka's own
# command-line tools (topics, console producer/consumer, configs, offsets,
# consumer groups, producer/consumer perf tests) and the Python clients
# (tests/python with confluent-kafka and kafka-python).
#
#   scripts/kafka-smoke.sh                       # against a fresh Apache Kafka
#   scripts/kafka-smoke.sh --port 19192          # ... on that port (and +1)
#   scripts/kafka-smoke.sh --bootstrap HOST:PORT # against a running broker
#                                                #   (e.g. Ottla)
# Prints one "ok"/"not ok" line per check with its time, then
# "smoke: N passed, N failed"; exits non-zero if any check failed.
set -euo pipefail
# shellcheck source=scripts/_common.sh
. "$(dirname "$0")/_common.sh"

BOOTSTRAP=
PORT=19192
while [ $# -gt 0 ]; do
  case $1 in
    --bootstrap) BOOTSTRAP=$2; shift 2 ;;
    --port) PORT=$2; shift 2 ;;
    -h|--help) sed -n '2,13s/^# \{0,1\}//p' "$0" >&2; exit 2 ;;
    *) ottla_die "unknown argument: $1" ;;
  esac
done

BIN=$("$OTTLA_ROOT/scripts/kafka-tools.sh" | tail -1)
PY=$("$OTTLA_ROOT/scripts/python-env.sh" | tail -1)
WORK=$(mktemp -d)
STARTED=0
SMOKE_DIR=$OTTLA_CACHE/run/smoke-$PORT
FAILED=1
cleanup() {
  if [ "$STARTED" = 1 ]; then
    "$OTTLA_ROOT/scripts/apache-kafka.sh" stop --dir "$SMOKE_DIR" || true
    # Keep the broker's dir (log, data) only when something failed.
    [ "$FAILED" != 0 ] || rm -rf "$SMOKE_DIR"
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT
if [ -z "$BOOTSTRAP" ]; then
  STARTED=1
  BOOTSTRAP=$("$OTTLA_ROOT/scripts/apache-kafka.sh" start --fresh --port "$PORT" \
    --dir "$SMOKE_DIR" | tail -1)
fi
B=$BOOTSTRAP
T=smoke-$(date +%s)-$$
PASSED=0
FAILED=0

# check NAME COMMAND...: runs COMMAND, output in $WORK/out; it passes when
# the command exits 0.
check() {
  local name=$1 start ms
  shift
  start=$(date +%s%N)
  if "$@" >"$WORK/out" 2>&1; then
    ms=$(( ($(date +%s%N) - start) / 1000000 ))
    echo "ok - $name (${ms}ms)"
    PASSED=$((PASSED + 1))
  else
    ms=$(( ($(date +%s%N) - start) / 1000000 ))
    echo "not ok - $name (${ms}ms)"
    sed 's/^/    /' "$WORK/out" | tail -n 30
    FAILED=$((FAILED + 1))
  fi
}

keyed_lines() { for i in $(seq 1 10); do echo "k$i:v$i"; done; }

topics_create() {
  "$BIN/kafka-topics.sh" --bootstrap-server "$B" --create --topic "$T" --partitions 3 --replication-factor 1
}
topics_list() {
  "$BIN/kafka-topics.sh" --bootstrap-server "$B" --list | grep -qxF "$T"
}
topics_describe() {
  "$BIN/kafka-topics.sh" --bootstrap-server "$B" --describe --topic "$T" | tee "$WORK/describe" &&
    grep -q 'PartitionCount: 3' "$WORK/describe" &&
    [ "$(grep -c 'Partition: [0-9]' "$WORK/describe")" = 3 ]
}
console_produce() {
  keyed_lines | "$BIN/kafka-console-producer.sh" --bootstrap-server "$B" --topic "$T" \
    --reader-property parse.key=true --reader-property key.separator=:
}
console_consume() {
  "$BIN/kafka-console-consumer.sh" --bootstrap-server "$B" --topic "$T" --from-beginning \
    --max-messages 10 --timeout-ms 30000 \
    --formatter-property print.key=true --formatter-property key.separator=: >"$WORK/consumed" &&
    diff <(keyed_lines | sort) <(sort "$WORK/consumed")
}
get_offsets() {
  "$BIN/kafka-get-offsets.sh" --bootstrap-server "$B" --topic "$T" | tee "$WORK/offsets" &&
    [ "$(awk -F: '{s += $3} END {print s}' "$WORK/offsets")" = 10 ]
}
configs_describe() {
  "$BIN/kafka-configs.sh" --bootstrap-server "$B" --describe --entity-type topics --entity-name "$T" --all |
    grep -q 'cleanup.policy='
}
consumer_groups() {
  "$BIN/kafka-consumer-groups.sh" --bootstrap-server "$B" --list
}
producer_perf() {
  "$BIN/kafka-topics.sh" --bootstrap-server "$B" --create --topic "$T-perf" --partitions 1 \
    --replication-factor 1 &&
  "$BIN/kafka-producer-perf-test.sh" --bootstrap-server "$B" --topic "$T-perf" --num-records 10000 \
    --record-size 100 --throughput -1 --command-property acks=all | tee "$WORK/pperf" &&
    grep -q '^10000 records sent' "$WORK/pperf"
}
consumer_perf() {
  "$BIN/kafka-consumer-perf-test.sh" --bootstrap-server "$B" --topic "$T-perf" --num-records 10000 \
    --timeout 30000 | tee "$WORK/cperf" &&
    [ "$(tail -1 "$WORK/cperf" | awk -F', ' '{print $5}')" = 10000 ]
}
python_clients() {
  OTTLA_BOOTSTRAP=$B "$PY" -m pytest -q -p no:cacheprovider "$OTTLA_ROOT/tests/python"
}

echo "smoke: Kafka tools $(cat "$BIN/../VERSION") against $B"
check "kafka-topics --create" topics_create
check "kafka-topics --list" topics_list
check "kafka-topics --describe" topics_describe
check "kafka-console-producer (10 keyed lines)" console_produce
check "kafka-console-consumer --from-beginning --max-messages 10" console_consume
check "kafka-get-offsets" get_offsets
check "kafka-configs --describe" configs_describe
check "kafka-consumer-groups --list" consumer_groups
check "kafka-producer-perf-test (10000 records)" producer_perf
check "kafka-consumer-perf-test (10000 records)" consumer_perf
check "python clients (confluent-kafka, kafka-python)" python_clients
echo "smoke: $PASSED passed, $FAILED failed"
[ "$FAILED" = 0 ]
