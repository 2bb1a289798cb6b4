#!/usr/bin/env python3
"""Share groups (KIP-932, queues) on Apache Kafka and Ottla, side by side.

Per round, each broker is started fresh (Kafka from the same 4.4 jars the
tests use, through scripts/apache-kafka.sh; Ottla from its release build),
a topic of `--partitions` partitions gets `--records` records of
`--size` bytes (kafka-producer-perf-test), and
kafka-share-consumer-perf-test reads them all in one share group
(`--threads` share consumers, implicit acknowledgement) starting at the
earliest offset. Figures per broker: the share consumers' records/s (which
include their join, as the tool counts it), and the broker's CPU seconds
(user + system) over the read and per million records.

Then the redelivery latency, with librdkafka's share consumer
(confluent-kafka's ShareConsumer) against both brokers: `--redeliveries`
times, one record is produced, polled, RELEASEd (explicit acknowledgement,
`commit_sync`), and polled again; the latency is from the release's
commit returning to the record's second delivery. Prints the medians over
`--rounds` and the ratios Ottla/Kafka: above 1 favours Ottla for
records/s, below 1 for CPU and latency.

    scripts/share-bench.py [--records N] [--size B] [--partitions P] [--threads T] [--rounds R]
                           [--redeliveries N]

On a 2-core machine the consumer JVMs share the cores with the broker, so
records/s can be the client's limit; the broker CPU figures are its own.
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench  # noqa: E402  (the broker runners and perf-tool wrappers)

GROUP = "share-bench"
TOPIC = "share-bench"


def share_consume(bin_dir, broker, records, threads):
    out = bench.sh([
        str(bin_dir / "kafka-share-consumer-perf-test.sh"), "--bootstrap-server", broker.bootstrap(),
        "--topic", TOPIC, "--group", GROUP, "--num-records", str(records), "--threads", str(threads),
        "--timeout", "120000", "--hide-header",
    ]).stdout
    # start.time, end.time, data.consumed.in.MB, MB.sec, nMsg.sec, data.consumed.in.nMsg, ...
    fields = [f.strip() for f in out.strip().splitlines()[-1].split(",")]
    consumed = int(fields[5])
    if consumed < records:
        raise RuntimeError(f"{broker.name}: the share consumers read {consumed} of {records} records")
    return float(fields[4])


def start_at_earliest(bin_dir, broker):
    bench.sh([
        str(bin_dir / "kafka-configs.sh"), "--bootstrap-server", broker.bootstrap(), "--alter",
        "--entity-type", "groups", "--entity-name", GROUP, "--add-config", "share.auto.offset.reset=earliest",
    ])


# Runs in the tests' venv (confluent-kafka): prints each redelivery's
# latency in ms, as JSON.
REDELIVERY = r"""
import json, sys, time
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
bootstrap, topic, group, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
producer = Producer({"bootstrap.servers": bootstrap})
consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                          "share.acknowledgement.mode": "explicit"})
consumer.subscribe([topic])

def delivery(value, deadline):
    while time.time() < deadline:
        for m in consumer.poll(0.1):
            if m.error():
                raise SystemExit(f"poll: {m.error()}")
            if m.value() == value:
                return m
            consumer.acknowledge(m, AcknowledgeType.ACCEPT)
    raise SystemExit(f"{value!r} never came")

latencies = []
for i in range(count):
    value = f"r{i}".encode()
    producer.produce(topic, value=value)
    producer.flush(10)
    first = delivery(value, time.time() + 60)
    consumer.acknowledge(first, AcknowledgeType.RELEASE)
    consumer.commit_sync(30)
    released = time.perf_counter()
    again = delivery(value, time.time() + 60)
    latencies.append((time.perf_counter() - released) * 1000)
    if again.delivery_count() != 2:
        raise SystemExit(f"second delivery counted {again.delivery_count()}")
    consumer.acknowledge(again, AcknowledgeType.ACCEPT)
    consumer.commit_sync(30)
consumer.close()
print(json.dumps(latencies))
"""


def redelivery_latencies(bin_dir, broker, count):
    """Each release-to-redelivery latency (ms) of `count` records."""
    topic = "share-redelivery"
    bench.create_topic(bin_dir, broker, topic, 1)
    bench.sh([
        str(bin_dir / "kafka-configs.sh"), "--bootstrap-server", broker.bootstrap(), "--alter",
        "--entity-type", "groups", "--entity-name", topic, "--add-config", "share.auto.offset.reset=earliest",
    ])
    python = bench.last_line("python-env.sh")
    out = subprocess.run([python, "-c", REDELIVERY, broker.bootstrap(), topic, topic, str(count)],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def one_run(broker, bin_dir, args, work):
    broker.start()
    try:
        bench.create_topic(bin_dir, broker, TOPIC, args.partitions)
        start_at_earliest(bin_dir, broker)
        bench.produce(bin_dir, broker, TOPIC, args.records, args.size, "1", work)
        before = bench.cpu_seconds(broker.pid)
        rate = share_consume(bin_dir, broker, args.records, args.threads)
        cpu = bench.cpu_seconds(broker.pid) - before
        latencies = redelivery_latencies(bin_dir, broker, args.redeliveries)
        return {"rec/s": rate, "cpu s": cpu, "cpu s/M": cpu / args.records * 1e6,
                "redeliver p50": percentile(latencies, 0.5), "redeliver p99": percentile(latencies, 0.99)}
    finally:
        broker.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2, help="share consumers in the group")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--redeliveries", type=int, default=200, help="records released and redelivered")
    args = ap.parse_args()
    bin_dir = Path(bench.last_line("kafka-tools.sh"))
    binary = bench.build_release() / "ottla"
    results = {"kafka": [], "ottla": []}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for round_no in range(args.rounds):
            brokers = [bench.ApacheKafka("kafka", bench.KAFKA_PORT),
                       bench.Ottla("ottla", bench.OTTLA_PORT, binary)]
            if round_no % 2:
                brokers.reverse()
            for broker in brokers:
                r = one_run(broker, bin_dir, args, work)
                results[broker.name].append(r)
                print(f"round {round_no + 1} {broker.name}: {r['rec/s']:,.0f} records/s, "
                      f"broker CPU {r['cpu s']:.2f} s ({r['cpu s/M']:.2f} s per million), "
                      f"redelivery p50 {r['redeliver p50']:.1f} ms, p99 {r['redeliver p99']:.1f} ms",
                      flush=True)
                time.sleep(1)
    print(f"\n{args.records:,} records of {args.size} B, {args.partitions} partitions, "
          f"{args.threads} share consumers, {args.rounds} rounds (medians)")
    print(f"{'figure':<28}{'Kafka':>14}{'Ottla':>14}{'Ottla/Kafka':>14}")
    for key, label in [("rec/s", "share consume records/s"), ("cpu s", "broker CPU s"),
                       ("cpu s/M", "broker CPU s per million"),
                       ("redeliver p50", "redelivery p50 ms"), ("redeliver p99", "redelivery p99 ms")]:
        k = statistics.median(r[key] for r in results["kafka"])
        o = statistics.median(r[key] for r in results["ottla"])
        ratio = o / k if k else float("nan")
        print(f"{label:<28}{k:>14,.2f}{o:>14,.2f}{ratio:>14.2f}")


if __name__ == "__main__":
    main()
