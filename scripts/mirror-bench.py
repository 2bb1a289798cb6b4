#!/usr/bin/env python3
"""Ottla's cluster mirroring and MirrorMaker 2 side by side on this machine.

Three single-node Ottla clusters run: a source, a destination for Ottla's
own mirror, and a destination for MirrorMaker 2 (Apache Kafka's
connect-mirror jars from Maven Central, 4.3.1: 4.4.0's are not published). Both mirrors move
the same data:

1. backlog: N records produced to the source before mirroring starts; the
   mirror copies them all. Reported: MB/s from the first record seen on
   the destination to the last, and the wall time including start-up.
2. steady: a producer writes at a fixed rate (default 50 MB/s, or what
   this machine manages) while the mirror runs; the summed end offsets of
   both sides are sampled every 100 ms, and the lag of a destination sample
   is how long before it the source had as many records (interpolated
   between source samples). Reported: p50 and p99 lag.

The two mirrors run one after the other, never together, so they do not
compete for the CPU.

    scripts/mirror-bench.py [--records N] [--size BYTES] [--rate MBPS] [--seconds S] [--partitions N]

Ratios are Ottla / MirrorMaker 2: above 1 favours Ottla for throughput,
below 1 favours Ottla for lag.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench import ROOT, Ottla, last_line, sh

TOPIC = "bench"
# The newest MirrorMaker 2 that Maven Central serves here (connect-mirror
# 4.4.0 is not published there yet); it runs on its own classpath.
MM2_VERSION = "4.3.1"
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"


def mm2_libs():
    """MirrorMaker 2's jars (connect-mirror and its runtime dependencies),
    fetched once with Maven into the cache."""
    cache = Path(os.environ.get("OTTLA_CACHE", ROOT / ".cache"))
    libs = cache / f"mm2-{MM2_VERSION}" / "libs"
    if (libs / ".complete").exists():
        return libs
    work = Path(tempfile.mkdtemp(prefix="mm2-fetch-"))
    (work / "pom.xml").write_text(f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>dev.ottla</groupId><artifactId>mm2-libs</artifactId><version>0</version>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>connect-mirror</artifactId><version>{MM2_VERSION}</version></dependency>
  </dependencies>
</project>
""")
    print(f"fetching MirrorMaker 2 {MM2_VERSION} from Maven Central", file=sys.stderr)
    sh(["mvn", "-B", "-q", "-ntp", f"-Dmaven.repo.local={cache / 'm2'}", "-f", str(work / "pom.xml"),
        f"{DEPENDENCY_PLUGIN}:copy-dependencies", "-DincludeScope=runtime", f"-DoutputDirectory={libs}"])
    (libs / ".complete").write_text(MM2_VERSION)
    return libs


class Watcher:
    """Samples the summed end offsets of one or more (bootstrap, topic)
    pairs every 100 ms, from one Python process (confluent-kafka). Each
    figure is stamped with the middle of the request that read it, so two
    pairs read one after the other are not taken for simultaneous."""

    CODE = (
        "import sys, time\n"
        "from confluent_kafka import TopicPartition\n"
        "from confluent_kafka.admin import AdminClient, OffsetSpec\n"
        "# Its Metadata requests must not create the topic the mirror is to create.\n"
        "pairs = [(AdminClient({'bootstrap.servers': b, 'allow.auto.create.topics': False}), t)\n"
        "         for b, t in zip(sys.argv[1::2], sys.argv[2::2])]\n"
        "def total(admin, topic):\n"
        "    md = admin.list_topics(topic, timeout=5).topics.get(topic)\n"
        "    if md is None or md.error is not None:\n"
        "        return 0\n"
        "    # One ListOffsets per broker, not one request per partition.\n"
        "    asked = {TopicPartition(topic, p): OffsetSpec.latest() for p in md.partitions}\n"
        "    return sum(f.result().offset for f in admin.list_offsets(asked, request_timeout=5).values())\n"
        "def stamped(admin, topic):\n"
        "    before = time.time()\n"
        "    n = total(admin, topic)\n"
        "    return f'{(before + time.time()) / 2} {n}'\n"
        "while True:\n"
        "    now = time.time()\n"
        "    try:\n"
        "        print(*[stamped(a, t) for a, t in pairs], flush=True)\n"
        "    except Exception:\n"
        "        pass  # a partition without a leader yet: no sample this time\n"
        "    time.sleep(max(0.0, 0.1 - (time.time() - now)))\n"
    )

    def __init__(self, py, *pairs):
        # One list per pair of (time, summed end offsets).
        self.series = [[] for _ in pairs]
        args = [x for pair in pairs for x in pair]
        self.proc = subprocess.Popen([py, "-c", self.CODE, *args], stdout=subprocess.PIPE, text=True)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for line in self.proc.stdout:
            fields = line.split()
            for series, t, n in zip(self.series, fields[0::2], fields[1::2]):
                series.append((float(t), int(n)))

    def latest(self, i=0):
        return self.series[i][-1][1] if self.series[i] else 0

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


def reached_at(series, count):
    """When a growing count first reached `count`, interpolated between the
    samples around it (None before the first sample that has it)."""
    for (t0, n0), (t1, n1) in zip(series, series[1:]):
        if n1 >= count:
            if n0 >= count or n1 == n0:
                return t0 if n0 >= count else t1
            return t0 + (count - n0) / (n1 - n0) * (t1 - t0)
    return None


def produce(bin_dir, bootstrap, records, size, throughput=-1):
    sh([
        str(bin_dir / "kafka-producer-perf-test.sh"), "--topic", TOPIC, "--num-records", str(records),
        "--record-size", str(size), "--throughput", str(throughput),
        "--producer-props", f"bootstrap.servers={bootstrap}", "acks=1", "linger.ms=5", "batch.size=65536",
    ])


class OttlaMirror:
    name = "ottla"

    def __init__(self, binary, source, destination, work):
        self.binary, self.source, self.destination, self.work = binary, source, destination, work
        self.topic = TOPIC

    def cli(self, *args):
        return sh([str(self.binary), "mirrors", "--bootstrap-server", self.destination.bootstrap(), *args])

    def start(self):
        config = self.work / "mirror.properties"
        config.write_text(f"bootstrap.servers={self.source.bootstrap()}\n")
        self.cli("--create", "--mirror", "bench", "--mirror-config", str(config))
        self.cli("--add", "--mirror", "bench", "--topics", TOPIC)

    def pause(self):
        self.cli("--pause", "--mirror", "bench", "--topics", TOPIC)

    def resume(self):
        self.cli("--resume", "--mirror", "bench", "--topics", TOPIC)

    def stop(self):
        pass


class MirrorMaker2:
    name = "mm2"

    def __init__(self, libs, source, destination, work, partitions):
        self.libs, self.source, self.destination, self.work = libs, source, destination, work
        # A task per partition up to 4, as many as this 2-core machine can use.
        self.tasks = min(partitions, 4)
        # MirrorMaker 2's default replication policy prefixes the source alias.
        self.topic = f"src.{TOPIC}"
        self.proc = None

    def start(self):
        props = self.work / "mm2.properties"
        props.write_text("\n".join([
            "clusters = src, dst",
            f"src.bootstrap.servers = {self.source.bootstrap()}",
            f"dst.bootstrap.servers = {self.destination.bootstrap()}",
            "src->dst.enabled = true",
            f"src->dst.topics = {TOPIC}",
            "dst->src.enabled = false",
            f"tasks.max = {self.tasks}",
            "replication.factor = 1",
            "checkpoints.topic.replication.factor = 1",
            "heartbeats.topic.replication.factor = 1",
            "offset-syncs.topic.replication.factor = 1",
            "offset.storage.replication.factor = 1",
            "status.storage.replication.factor = 1",
            "config.storage.replication.factor = 1",
            "sync.topic.acls.enabled = false",
            "refresh.topics.interval.seconds = 1",
            "",
        ]))
        log = open(self.work / "mm2.log", "w")
        self.proc = subprocess.Popen(
            ["java", "-Xmx1g", "-cp", f"{self.libs}/*", "org.apache.kafka.connect.mirror.MirrorMaker", str(props)],
            stdout=log,
            stderr=subprocess.STDOUT,
        )

    def pause(self):
        self.stop()

    def resume(self):
        self.start()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def backlog(py, mirror, records, size):
    watcher = Watcher(py, (mirror.destination.bootstrap(), mirror.topic))
    time.sleep(1)
    t0 = time.time()
    mirror.start()
    try:
        while watcher.latest() < records:
            if time.time() - t0 > 600:
                raise RuntimeError(f"{mirror.name} did not copy the backlog within 600 s")
            time.sleep(0.1)
    finally:
        watcher.stop()
    first = next(t for t, n in watcher.series[0] if n > 0)
    last = next(t for t, n in watcher.series[0] if n >= records)
    mb = records * size / 1e6
    # From the first record on the destination to the last (the copy), and
    # from the start command (start-up included).
    return {"MB/s": mb / max(last - first, 0.1), "MB/s wall": mb / (last - t0), "wall s": last - t0}


def steady(py, bin_dir, mirror, rate_mbps, seconds, size):
    """Lag percentiles while producing at `rate_mbps` for `seconds`. The lag
    of a destination sample is how long before it the source had reached
    the same number of records."""
    per_second = int(rate_mbps * 1e6 / size)
    records = per_second * seconds
    watch = Watcher(py, (mirror.destination.bootstrap(), mirror.topic), (mirror.source.bootstrap(), TOPIC))
    time.sleep(2)
    base_dest, base_source = watch.latest(0), watch.latest(1)
    t0 = time.time()
    produce(bin_dir, mirror.source.bootstrap(), records, size, per_second)
    produced_s = time.time() - t0
    deadline = time.time() + 120
    while watch.latest(0) - base_dest < records and time.time() < deadline:
        time.sleep(0.1)
    watch.stop()
    achieved = records / produced_s
    source = [(t, n - base_source) for t, n in watch.series[1]]
    lags = []
    for t, n in watch.series[0]:
        copied = n - base_dest
        if t0 <= t <= t0 + produced_s and copied > 0:
            at = reached_at(source, copied)
            if at is not None:
                lags.append(max(0.0, t - at) * 1000)
    lags.sort()
    pct = lambda q: lags[min(len(lags) - 1, int(q * len(lags)))] if lags else float("nan")
    return {
        "MB/s produced": achieved * size / 1e6,
        "lag p50 ms": pct(0.50),
        "lag p99 ms": pct(0.99),
        "mean lag ms": statistics.mean(lags) if lags else float("nan"),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--rate", type=float, default=50.0, help="steady produce rate, MB/s")
    ap.add_argument("--seconds", type=int, default=20)
    ap.add_argument("--partitions", type=int, default=4, help="of the mirrored topic")
    args = ap.parse_args()
    bin_dir = Path(last_line("kafka-tools.sh"))
    py = last_line("python-env.sh")
    libs = mm2_libs()
    binary = ROOT / "target" / "release" / "ottla"
    if not binary.exists():
        sh(["cargo", "build", "--release", "-p", "ottla-broker", "--bin", "ottla"], cwd=ROOT)
    source = Ottla("source", 31092, binary)
    results = {}
    work = Path(tempfile.mkdtemp(prefix="mirror-bench-"))
    source.start()
    try:
        sh([str(bin_dir / "kafka-topics.sh"), "--bootstrap-server", source.bootstrap(), "--create",
            "--topic", TOPIC, "--partitions", str(args.partitions), "--replication-factor", "1"])
        produce(bin_dir, source.bootstrap(), args.records, args.size)
        for make, port in (
            (lambda d: OttlaMirror(binary, source, d, work), 32092),
            (lambda d: MirrorMaker2(libs, source, d, work, args.partitions), 33092),
        ):
            destination = Ottla("destination", port, binary)
            destination.start()
            mirror = make(destination)
            try:
                b = backlog(py, mirror, args.records, args.size)
                print(f"  {mirror.name} backlog: {b}", file=sys.stderr)
                s = steady(py, bin_dir, mirror, args.rate, args.seconds, args.size)
                print(f"  {mirror.name} steady: {s}", file=sys.stderr)
                results[mirror.name] = {**b, **s}
            finally:
                mirror.stop()
                destination.stop()
    finally:
        source.stop()

    o, m = results["ottla"], results["mm2"]
    print(f"\nOttla mirror / MirrorMaker 2: {args.partitions} partitions, {args.records} records of {args.size} B backlog, "
          f"then {args.seconds} s at {args.rate} MB/s target, this machine")
    print(f"{'metric':<16}{'mm2':>12}{'ottla':>12}{'ratio':>9}")
    for metric in ("MB/s", "MB/s wall", "wall s", "MB/s produced", "lag p50 ms", "lag p99 ms", "mean lag ms"):
        ratio = o[metric] / m[metric] if m[metric] else float("nan")
        print(f"{metric:<16}{m[metric]:>12.1f}{o[metric]:>12.1f}{ratio:>9.2f}")


if __name__ == "__main__":
    main()
