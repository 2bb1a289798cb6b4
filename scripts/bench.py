#!/usr/bin/env python3
"""Apache Kafka and Ottla side by side on this machine.

Runs rounds; in each, Apache Kafka (from the same 4.x jars the tests use)
and Ottla are started fresh one after the other, in alternating order, and
kafka-producer-perf-test then kafka-consumer-perf-test run every case
against each with the same settings. A consumer's rate counts from when it
has its partitions; the time it took to join its group (a quarter of a
500 MiB run, most of it the client JVM warming up) is its own figure,
"join ms". Each round reads each case's topic `--consumer-runs` times (3
by default), since one consumer run varies by ±25 % from the next on
either broker. Prints, per case, the ratio Ottla/Kafka of the medians of
all samples (rounds, and consumer runs) for records/s, MB/s, p50 and p99
latency and the broker's CPU time (user + system) over the run, plus the
highest peak RSS and the slowest time from process start to the first
accepted connection. On a small machine the perf-test JVMs share the cores
with the broker, so throughput can be the client's limit; the CPU figure is
the broker's own cost.

    scripts/bench.py [--mib M] [--rounds R] [--consumer-runs C] [--quick] [--cases 1024:all:8,...]
                     [--latency-mib-s 10]

Every run moves the same amount of data (`--mib`, 500 MiB by default: 512,000
records of 1 KiB, 5,242,880 of 100 bytes), so small-record runs last as long
as large-record ones instead of being over before the JVMs warm up.

The latency of an unthrottled producer measures how full its buffer gets,
not the broker. So each case also runs the producer for 15 s at a fixed
rate both brokers sustain (`--latency-mib-s`, 10 MiB/s by default: 10,240
records/s of 1 KiB, 104,857 of 100 bytes); its p50 and p99 are the
latency figures to compare ("latency" rows).

Ratios above 1 favour Ottla for throughput; below 1 favour Ottla for
latency, memory and start time.

    scripts/bench.py --capacity [--mib M] [--rounds R] [--consumer-runs C] [--partitions 1,8,64]
                     [--cases ...]

Capacity mode measures what a broker costs per record, with no client JVM
on its core: each broker, once started, has all its threads pinned to core 0
(`taskset -a -p`; threads started later inherit it), and the light native
client `ottla-loadgen` (tests/src/bin/ottla-loadgen.rs, one thread) runs on
core 1. After an unmeasured warm-up (100 MiB written and read of each record
size, so Kafka's JIT has compiled its hot paths), every case (1 KiB and
100 B records, acks=1 and acks=all, on each of `--partitions`) produces
`--mib` in batches filled to 64 KiB like the perf-test producer's, up to
16 partitions in each request (1 MiB, the producer's max.request.size),
5 requests in flight, then reads it back
`--consumer-runs` times (50 MiB fetches, 1 MiB per partition). Figures per
case: records/s, MB/s, the broker's CPU seconds over the run, records/s per
broker core (records / broker CPU seconds: the rate one core would sustain
at that cost) and broker CPU seconds per million records. The client rate
is bounded by one core for both; the per-core figures are the broker's own.

Options for either mode: `--kafka-port` / `--ottla-port` (19092 / 29092 by
default), `--kafka-dir` (Apache Kafka's state dir), and CARGO_TARGET_DIR is
where the binaries are built.
"""

import argparse
import base64
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KAFKA_PORT = 19092
OTTLA_PORT = 29092


def sh(cmd, **kw):
    done = subprocess.run(cmd, text=True, capture_output=True, **kw)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} exited with {done.returncode}:\n"
                           f"{done.stdout}{done.stderr}")
    return done


def last_line(script):
    return sh(["bash", str(ROOT / "scripts" / script)]).stdout.strip().splitlines()[-1]


def listening(port):
    """Whether something accepts connections on 127.0.0.1:`port`."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def ensure_free(port):
    """Refuses a port something already listens on: it would answer for
    the broker under test."""
    if listening(port):
        raise RuntimeError(f"port {port} is already in use: stop what listens there first")


def wait_port(port, proc=None, timeout=120.0):
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if listening(port):
            return
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"broker exited with {proc.returncode}")
        time.sleep(0.01)
    raise RuntimeError(f"port {port} did not open within {timeout}s")


def cpu_seconds(pid):
    """User + system CPU time of a process so far."""
    user, system = user_system_seconds(pid)
    return user + system


def user_system_seconds(pid):
    """User and system CPU time of a process so far, in clock ticks."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def thread_cpu_ns(pid):
    """Each live thread's CPU time so far, in nanoseconds (schedstat), by
    thread id: /proc/PID/stat counts in clock ticks (10 ms), too coarse for
    a read that costs the broker 0.1 s."""
    times = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            times[task.name] = int((task / "schedstat").read_text().split()[0])
        except (OSError, IndexError, ValueError):
            pass  # the thread ended while being listed
    return times


def cpu_between(pid, run):
    """Runs `run`; returns its result, the CPU seconds `pid` used meanwhile
    and the share of them spent in the kernel. The sum of per-thread times
    misses a thread that ended during the run, so when the process total (in
    ticks, which counts ended threads) is more than two ticks above it, the
    total is taken. The kernel's share comes from ticks alone."""
    (user, system), threads = user_system_seconds(pid), thread_cpu_ns(pid)
    result = run()
    (after_user, after_system), after_threads = user_system_seconds(pid), thread_cpu_ns(pid)
    precise = sum(ns - threads.get(tid, 0) for tid, ns in after_threads.items()) / 1e9
    coarse = after_user + after_system - user - system
    cpu = coarse if coarse - precise > 2 / os.sysconf("SC_CLK_TCK") else precise
    return result, cpu, (after_system - system) / coarse if coarse else float("nan")


def measured(broker, run):
    """Runs `run` and adds the broker's CPU seconds over it, and the kernel's
    share of them, to its figures."""
    figures, cpu, kernel = cpu_between(broker.pid, run)
    figures["cpu s"] = cpu
    figures["kernel share"] = kernel
    return figures


def peak_rss_mib(pid):
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


class Broker:
    """One broker under test: start, pid, stop."""

    def __init__(self, name, port):
        self.name, self.port = name, port
        self.proc, self.pid, self.ready_ms = None, None, None

    def bootstrap(self):
        return f"127.0.0.1:{self.port}"


class ApacheKafka(Broker):
    """scripts/apache-kafka.sh's broker; its state in `run_dir` (the
    script's default for the port if None)."""

    def __init__(self, name, port, run_dir=None):
        super().__init__(name, port)
        cache = Path(os.environ.get("OTTLA_CACHE", ROOT / ".cache"))
        self.run_dir = Path(run_dir) if run_dir else cache / "run" / f"apache-kafka-{port}"

    def script(self, command, *extra):
        return ["bash", str(ROOT / "scripts" / "apache-kafka.sh"), command,
                "--port", str(self.port), "--dir", str(self.run_dir), *extra]

    def start(self):
        ensure_free(self.port)
        t0 = time.monotonic()
        self.proc = subprocess.Popen(self.script("start", "--fresh", "--heap", "-Xmx1g"), stdout=subprocess.DEVNULL)
        wait_port(self.port)
        self.ready_ms = (time.monotonic() - t0) * 1000
        self.proc.wait()
        pid_file = next(self.run_dir.glob("*.pid"))
        self.pid = int(pid_file.read_text().split()[0])

    def stop(self):
        subprocess.run(self.script("stop"), check=False, capture_output=True)


class Ottla(Broker):
    """One Ottla node: client port `port`, controller port `port + 1`. Alone
    by default; `cluster` makes it node `node_id` of the quorum of nodes on
    those client ports (see `ottla_cluster`)."""

    def __init__(self, name, port, binary, node_id=1, cluster=None, cluster_id=None):
        super().__init__(name, port)
        self.binary, self.node_id, self.cluster_id = binary, node_id, cluster_id
        self.cluster = cluster or [port]
        self.dir = Path(tempfile.mkdtemp(prefix="ottla-bench-"))

    def start(self):
        voters = ",".join(f"{i}@127.0.0.1:{p + 1}" for i, p in enumerate(self.cluster, start=1))
        args = [
            str(self.binary), "server",
            "--override", f"listeners=PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.port + 1}",
            "--override", f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.port}",
            "--override", f"node.id={self.node_id}",
            "--override", f"controller.quorum.voters={voters}",
            "--override", f"log.dirs={self.dir / 'logs'}",
            # Same as scripts/apache-kafka.sh gives the reference broker.
            "--override", "group.initial.rebalance.delay.ms=0",
        ]
        if self.cluster_id:
            args += ["--override", f"cluster.id={self.cluster_id}"]
        ensure_free(self.port)
        t0 = time.monotonic()
        # Its log (stdout) and errors, kept while it runs for a look at a slow run.
        log = open(self.dir / "ottla.log", "a")
        self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        self.pid = self.proc.pid
        # A node of a cluster listens only once a quorum has formed.
        if len(self.cluster) == 1:
            wait_port(self.port, self.proc)
            self.ready_ms = (time.monotonic() - t0) * 1000

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=60)
        if os.environ.get("OTTLA_BENCH_KEEP_DIRS"):
            print(f"kept {self.name}'s data and log in {self.dir}", file=sys.stderr)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)


def ottla_cluster(name, first_port, binary, nodes):
    """`nodes` Ottla nodes forming one cluster, on client ports `first_port`,
    `first_port + 2`, ..., started and listening."""
    ports = [first_port + 2 * i for i in range(nodes)]
    # Every node must be given the same id: 16 random bytes, URL-safe base64.
    cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
    cluster = [Ottla(f"{name}-{i}", p, binary, node_id=i, cluster=ports, cluster_id=cluster_id)
               for i, p in enumerate(ports, start=1)]
    for node in cluster:
        node.start()
    for node in cluster:
        wait_port(node.port, node.proc)
    wait_all_listed(cluster)
    return cluster


def wait_all_listed(cluster, timeout=60.0):
    """Until every node's Metadata lists every node: a node listens once the
    controller has unfenced it, but its copy of the metadata may still lack
    the others for a moment, and a topic created then can be placed on
    fewer brokers than the cluster has."""
    from confluent_kafka.admin import AdminClient  # the venv's; only clusters need it

    want = {n.node_id for n in cluster}
    deadline = time.monotonic() + timeout
    for node in cluster:
        admin = AdminClient({"bootstrap.servers": node.bootstrap(), "allow.auto.create.topics": False})
        while set(admin.list_topics(timeout=10).brokers) != want:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{node.name} does not list all of brokers {sorted(want)} after {timeout} s")
            time.sleep(0.1)


PRODUCER = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), [\d.]+ ms avg latency, "
    r"[\d.]+ ms max latency, (\d+) ms 50th, \d+ ms 95th, (\d+) ms 99th"
)


def produce(bin_dir, broker, topic, records, size, acks, work, rate=-1):
    """kafka-producer-perf-test; `rate` records/s (-1: as fast as it goes)."""
    props = work / f"producer-{acks}.properties"
    props.write_text(f"acks={acks}\nlinger.ms=5\nbatch.size=65536\n")
    out = sh([
        str(bin_dir / "kafka-producer-perf-test.sh"), "--topic", topic, "--num-records", str(records),
        "--record-size", str(size), "--throughput", str(rate), "--bootstrap-server", broker.bootstrap(),
        "--command-config", str(props),
    ]).stdout
    m = PRODUCER.search(out.strip().splitlines()[-1])
    if not m:
        raise RuntimeError(f"unexpected producer output: {out[-500:]}")
    return {"rec/s": float(m[2]), "MB/s": float(m[3]), "p50 ms": float(m[4]), "p99 ms": float(m[5])}


def consume(bin_dir, broker, topic, records):
    """kafka-consumer-perf-test: the rate of fetching once the consumer has
    its partitions, and how long joining its group took before that."""
    out = sh([
        str(bin_dir / "kafka-consumer-perf-test.sh"), "--bootstrap-server", broker.bootstrap(), "--topic", topic,
        "--num-records", str(records), "--timeout", "60000", "--hide-header",
    ]).stdout
    # start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec,
    # rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
    fields = [f.strip() for f in out.strip().splitlines()[-1].split(",")]
    return {"rec/s": float(fields[9]), "MB/s": float(fields[8]), "join ms": float(fields[6])}


# Partitions a create or an alter adds at once: Kafka refuses one operation
# of more than 10,000 metadata records (POLICY_VIOLATION).
PARTITIONS_PER_STEP = 5000


def create_topic(bin_dir, broker, topic, partitions):
    topics = [str(bin_dir / "kafka-topics.sh"), "--bootstrap-server", broker.bootstrap(), "--topic", topic]
    count = min(partitions, PARTITIONS_PER_STEP)
    sh([*topics, "--create", "--partitions", str(count), "--replication-factor", "1"])
    while count < partitions:
        count = min(partitions, count + PARTITIONS_PER_STEP)
        sh([*topics, "--alter", "--partitions", str(count)])


def run_pass(broker, bin_dir, cases, run_bytes, latency_rate, consumer_runs, results, round_no):
    """One pass over every case on a freshly started broker: produce, then
    consume what was produced `consumer_runs` times, then produce at
    `latency_rate` bytes/s (if any) for LATENCY_SECONDS. Samples are
    appended to `results`."""
    work = Path(tempfile.mkdtemp(prefix="bench-work-"))
    broker.start()
    try:
        for size, acks, parts in cases:
            records = run_bytes // size
            topic = f"bench-{size}-{acks}-{parts}"
            create_topic(bin_dir, broker, topic, parts)
            p = measured(broker, lambda: produce(bin_dir, broker, topic, records, size, acks, work))
            results.setdefault(("produce", size, acks, parts), []).append(p)
            print(f"  round {round_no} {broker.name} {size}B acks={acks} p={parts}: produce {p}", file=sys.stderr)
            for _ in range(consumer_runs):
                c = measured(broker, lambda: consume(bin_dir, broker, topic, records))
                results.setdefault(("consume", size, acks, parts), []).append(c)
                print(f"  round {round_no} {broker.name} {size}B acks={acks} p={parts}: consume {c}", file=sys.stderr)
            if latency_rate:
                rate = latency_rate // size
                topic = f"latency-{size}-{acks}-{parts}"
                create_topic(bin_dir, broker, topic, parts)
                lat = measured(broker, lambda: produce(
                    bin_dir, broker, topic, rate * LATENCY_SECONDS, size, acks, work, rate))
                results.setdefault(("latency", size, acks, parts), []).append(lat)
                print(f"  round {round_no} {broker.name} {size}B acks={acks} p={parts}: at {rate} rec/s {lat}",
                      file=sys.stderr)
        results.setdefault("peak RSS MiB", []).append(peak_rss_mib(broker.pid))
        results.setdefault("start ms", []).append(broker.ready_ms)
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)


# How long each fixed-rate latency run lasts.
LATENCY_SECONDS = 15

# Capacity mode: the broker gets core 0 to itself, the load generator core 1.
BROKER_CORE, CLIENT_CORE = "0", "1"
# The perf-test producer's batch.size, which it fills when it runs flat out;
# a record costs about 8 bytes of framing on top of its value.
CAPACITY_BATCH_BYTES = 65536
# The Java producer's max.request.size: a request carries at most this many
# bytes of batches, so many-partition cases send a few partitions at a time.
CAPACITY_REQUEST_BYTES = 1 << 20
RECORD_FRAMING = 8
WARM_UP_MIB = 100


def pin(pid, core):
    """Moves every thread of `pid` to `core`; threads it starts later
    inherit the affinity of the thread that starts them."""
    sh(["taskset", "-a", "-p", "-c", core, str(pid)])


def loadgen(loadgen_bin, *args):
    """One ottla-loadgen run on CLIENT_CORE; its JSON report."""
    out = sh(["taskset", "-c", CLIENT_CORE, str(loadgen_bin), *map(str, args)]).stdout
    return json.loads(out.strip().splitlines()[-1])


def capacity_run(broker, loadgen_bin, *args):
    """One load generator run against `broker`: its rate, the broker's CPU
    seconds over it, the records one broker core would pass per second at
    that cost, and the broker's CPU seconds per million records."""
    report = measured(broker, lambda: loadgen(loadgen_bin, *args))
    records, cpu = report["records"], report["cpu s"]
    return {"rec/s": report["rec_per_s"], "MB/s": report["mb_per_s"], "cpu s": cpu,
            "rec/s/core": records / cpu if cpu else float("nan"), "cpu s/M": cpu / records * 1e6,
            "kernel share": report["kernel share"]}


def warm_up(broker, bin_dir, loadgen_bin):
    """An unmeasured WARM_UP_MIB written and read of each record size, so
    the first case does not time a JVM still compiling its hot paths."""
    for size in (1024, 100):
        topic, records = f"warm-up-{size}", (WARM_UP_MIB << 20) // size
        create_topic(bin_dir, broker, topic, 8)
        common = ("--bootstrap", broker.bootstrap(), "--topic", topic, "--records", records)
        loadgen(loadgen_bin, "produce", *common, "--record-size", size, "--acks", "1",
                "--records-per-batch", records_per_batch(size))
        loadgen(loadgen_bin, "consume", *common)


def drop_page_cache():
    """Writes back and drops the page cache, so each case starts with free
    memory: after a few GiB written, the kernel reclaiming pages made a
    case's broker CPU mostly system time, whichever case came last."""
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("1\n")
    except OSError as e:
        print(f"  could not drop the page cache ({e}); later cases may pay for reclaim", file=sys.stderr)


def records_per_batch(size):
    """Records of `size` bytes in a batch filled to CAPACITY_BATCH_BYTES."""
    return max(1, CAPACITY_BATCH_BYTES // (size + RECORD_FRAMING))


def capacity_pass(broker, bin_dir, loadgen_bin, cases, run_bytes, consumer_runs, results, round_no):
    """One pass over every case on a freshly started broker pinned to
    BROKER_CORE: the load generator produces each case's records, then
    reads them `consumer_runs` times. Samples are appended to `results`."""
    broker.start()
    try:
        pin(broker.pid, BROKER_CORE)
        warm_up(broker, bin_dir, loadgen_bin)
        for size, acks, parts in cases:
            records = run_bytes // size
            topic = f"capacity-{size}-{acks}-{parts}"
            create_topic(bin_dir, broker, topic, parts)
            drop_page_cache()
            common = ("--bootstrap", broker.bootstrap(), "--topic", topic, "--records", records)
            p = capacity_run(broker, loadgen_bin, "produce", *common, "--record-size", size, "--acks", acks,
                             "--records-per-batch", records_per_batch(size),
                             "--partitions-per-request", min(parts, CAPACITY_REQUEST_BYTES // CAPACITY_BATCH_BYTES))
            results.setdefault(("produce", size, acks, parts), []).append(p)
            print(f"  round {round_no} {broker.name} {size}B acks={acks} p={parts}: produce {p}", file=sys.stderr)
            for _ in range(consumer_runs):
                c = capacity_run(broker, loadgen_bin, "consume", *common)
                results.setdefault(("consume", size, acks, parts), []).append(c)
                print(f"  round {round_no} {broker.name} {size}B acks={acks} p={parts}: consume {c}",
                      file=sys.stderr)
    finally:
        broker.stop()


def typical(samples, key):
    """The median sample: one unusually fast or slow run, on either broker,
    does not decide a ratio."""
    return statistics.median(s[key] for s in samples)


def print_ratios(kafka, ottla):
    """One row per case and metric: Kafka's median, Ottla's, Ottla / Kafka."""
    print(f"{'case':<34}{'metric':<13}{'kafka':>12}{'ottla':>12}{'ratio':>9}")
    for key in sorted(k for k in kafka if isinstance(k, tuple)):
        kind, size, acks, parts = key
        name = f"{kind} {size}B acks={acks} p={parts}"
        for metric in kafka[key][0]:
            k, o = typical(kafka[key], metric), typical(ottla[key], metric)
            ratio = o / k if k else float("nan")
            print(f"{name:<34}{metric:<13}{figure(k):>12}{figure(o):>12}{ratio:>9.2f}")


def figure(value):
    """A table figure: small ones (CPU seconds) keep three decimals."""
    return f"{value:.3f}" if abs(value) < 10 else f"{value:.1f}"


def build_release(with_loadgen=False):
    """Builds `ottla` (and `ottla-loadgen`) in release; their directory."""
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")) / "release"
    build = ["cargo", "build", "--release", "-p", "ottla-broker", "--bin", "ottla"]
    if with_loadgen:
        build += ["-p", "ottla-tests", "--bin", "ottla-loadgen"]
    sh(build, cwd=ROOT)
    return target


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mib", type=int, default=500, help="data per run, MiB")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--consumer-runs", type=int, default=3, help="consumer runs per case and round")
    ap.add_argument("--quick", action="store_true", help="one case per record size, one round")
    ap.add_argument("--cases", help="only these cases, as SIZE:ACKS:PARTITIONS[,...], e.g. 1024:all:8")
    ap.add_argument("--latency-mib-s", type=float, default=10,
                    help="rate of the fixed-rate latency runs, MiB/s (0: none)")
    ap.add_argument("--capacity", action="store_true",
                    help="broker pinned to core 0, ottla-loadgen on core 1: records/s per broker core")
    ap.add_argument("--partitions", default="1,8", help="partition counts of the cases, e.g. 1,8,64")
    ap.add_argument("--kafka-port", type=int, default=KAFKA_PORT)
    ap.add_argument("--ottla-port", type=int, default=OTTLA_PORT)
    ap.add_argument("--kafka-dir", help="Apache Kafka's state dir (default: apache-kafka.sh's for the port)")
    args = ap.parse_args()
    bin_dir = Path(last_line("kafka-tools.sh"))
    target = build_release(with_loadgen=args.capacity)
    binary = target / "ottla"
    partitions = [int(p) for p in args.partitions.split(",")]
    cases = [(s, a, p) for s in (1024, 100) for a in ("1", "all") for p in partitions]
    if args.quick:
        cases, args.rounds = [(1024, "1", 1), (100, "all", 8)], 1
    if args.cases:
        cases = [(int(s), a, int(p)) for s, a, p in (c.split(":") for c in args.cases.split(","))]
    # Rounds alternate which broker goes first, so a machine that slows
    # down or speeds up during the run does not favour either.
    kafka_broker = ApacheKafka("kafka", args.kafka_port, args.kafka_dir)
    kafka, ottla = {}, {}
    for r in range(args.rounds):
        ottla_broker = Ottla("ottla", args.ottla_port, binary)
        passes = [(kafka_broker, kafka), (ottla_broker, ottla)]
        for broker, results in passes if r % 2 == 0 else reversed(passes):
            if args.capacity:
                capacity_pass(broker, bin_dir, target / "ottla-loadgen", cases, args.mib << 20,
                              args.consumer_runs, results, r + 1)
            else:
                run_pass(broker, bin_dir, cases, args.mib << 20, int(args.latency_mib_s * (1 << 20)),
                         args.consumer_runs, results, r + 1)
    if args.capacity:
        print(f"\nOttla / Apache Kafka, broker on core {BROKER_CORE}, ottla-loadgen on core {CLIENT_CORE}, "
              f"{args.mib} MiB per run, medians over {args.rounds} round(s) ({args.consumer_runs} consumer "
              f"runs each), this machine")
        print_ratios(kafka, ottla)
        return
    print(f"\nOttla / Apache Kafka, {args.mib} MiB per run, medians over {args.rounds} round(s) "
          f"({args.consumer_runs} consumer runs each), this machine")
    print_ratios(kafka, ottla)
    for metric in ("peak RSS MiB", "start ms"):
        # The highest peak and the slowest start: the conservative figures.
        k, o = max(kafka[metric]), max(ottla[metric])
        print(f"{'broker':<34}{metric:<13}{k:>12.1f}{o:>12.1f}{o / k:>9.2f}")


if __name__ == "__main__":
    main()
