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
(user + system) over the read and per million records. Prints the medians
over `--rounds` and the ratios Ottla/Kafka: above 1 favours Ottla for
records/s, below 1 for CPU.

    scripts/share-bench.py [--records N] [--size B] [--partitions P] [--threads T] [--rounds R]

On a 2-core machine the consumer JVMs share the cores with the broker, so
records/s can be the client's limit; the broker CPU figures are its own.
"""

import argparse
import statistics
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


def one_run(broker, bin_dir, args, work):
    broker.start()
    try:
        bench.create_topic(bin_dir, broker, TOPIC, args.partitions)
        start_at_earliest(bin_dir, broker)
        bench.produce(bin_dir, broker, TOPIC, args.records, args.size, "1", work)
        before = bench.cpu_seconds(broker.pid)
        rate = share_consume(bin_dir, broker, args.records, args.threads)
        cpu = bench.cpu_seconds(broker.pid) - before
        return {"rec/s": rate, "cpu s": cpu, "cpu s/M": cpu / args.records * 1e6}
    finally:
        broker.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2, help="share consumers in the group")
    ap.add_argument("--rounds", type=int, default=3)
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
                      f"broker CPU {r['cpu s']:.2f} s ({r['cpu s/M']:.2f} s per million)", flush=True)
                time.sleep(1)
    print(f"\n{args.records:,} records of {args.size} B, {args.partitions} partitions, "
          f"{args.threads} share consumers, {args.rounds} rounds (medians)")
    print(f"{'figure':<28}{'Kafka':>14}{'Ottla':>14}{'Ottla/Kafka':>14}")
    for key, label in [("rec/s", "share consume records/s"), ("cpu s", "broker CPU s"),
                       ("cpu s/M", "broker CPU s per million")]:
        k = statistics.median(r[key] for r in results["kafka"])
        o = statistics.median(r[key] for r in results["ottla"])
        ratio = o / k if k else float("nan")
        print(f"{label:<28}{k:>14,.2f}{o:>14,.2f}{ratio:>14.2f}")


if __name__ == "__main__":
    main()
