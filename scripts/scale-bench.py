#!/usr/bin/env python3
"""Apache Kafka and Ottla at scale: many partitions, many connections.

For each partition count N (`--partitions 2000,10000` by default), Apache
Kafka 4.4 and Ottla are each started fresh as a single broker (Kafka from
scripts/apache-kafka.sh in `--kafka-dir`, KRaft, `--kafka-heap`; Ottla from
`--binary` as scripts/bench.py starts it), one after the other, the order
alternating from one N to the next, and measured the same way:

  create       one topic of N partitions (raw requests: CreateTopics of
               up to 5,000 partitions, then CreatePartitions adding 5,000 at
               a time, since Kafka refuses one operation of more than 10,000
               metadata records): until the responses, until Metadata shows
               a leader (and no error) for every partition, and until every
               partition answers ListOffsets without an error (both brokers
               list a partition in Metadata before they have opened its log:
               the last figure is when the topic can be used);
  metadata     a Metadata request for that topic (all N partitions), and a
               full DescribeTopicPartitions of it (what kafka-topics.sh
               --describe sends in Kafka 4.x, paged 2,000 partitions a
               response by the broker, so several requests): the median of
               `--metadata-runs`, raw requests from this script, so no
               client JVM start is counted;
  idle         broker CPU (% of one core, from /proc/PID/stat) over
               `--idle-seconds` with the N partitions and no client, and
               the broker's RSS;
  produce      kafka-producer-perf-test, acks=1, 200-byte records,
               linger.ms=5, with the round-robin partitioner so that every
               partition gets records (the default sticky partitioner
               fills a 64 KiB batch of one partition at a time and leaves
               most of 10,000 partitions empty): max(200 * N, 1,000,000)
               records by default (`--records`); records/s and the
               broker's CPU seconds over the run. A ListOffsets afterwards
               counts the partitions that got records. Spread over N
               partitions, a batch holds one or a few records, so this is
               the per-partition cost of a produce request, not bulk
               throughput;
  consume      kafka-consumer-perf-test reading them all back (bench.py's
               helper), `--consumer-runs` times (3; one run varies by a
               quarter from the next): the medians of records/s once it has
               its partitions, of the time to join its group (N partitions to
               assign and fetch offsets for), and of the broker's CPU
               seconds;
  connections  `--connections` (10,000) plain sockets opened by this
               script (asyncio, `--connect-concurrency` at a time), each
               sending one ApiVersions request, so each is a real client
               connection; then `--active` (1,000) of them send ApiVersions
               and Metadata (a 1-partition topic) requests in a loop for
               `--active-seconds`, while the others stay idle. Reports
               connect-to-first-answer latency p50/p99 of the first and of
               the last 1,000 connections, RSS before, while open and after
               the loop, RSS per connection, the broker's open files
               (/proc/PID/fd) before, while open and after all are closed
               (and how long they took to return to the baseline), the
               busy connections' requests/s and p99, and any connection
               that failed. Kafka's RSS hardly moves: its connections live in
               a JVM heap that is already resident, so its "per connection"
               figure is not the cost of a connection;
  restart      a clean stop (SIGTERM) and start on the same data, then a
               kill -9 and start: seconds until the broker answers an
               ApiVersions request and until Metadata shows all N leaders
               again (counted from the start command), and how long the
               clean stop took (both flush every log at a clean stop).

Then, once per broker, max.connections: a fresh broker started with
max.connections=M (`--max-connections`, 100; Ottla `--override`, Kafka
`--prop`), M connections opened, and connection M+1 tried: whether it is
served, closed, refused or left unanswered (both brokers stop accepting at
the limit, so the kernel completes its handshake and it waits in the
listen backlog), and whether it is served once one of the M closes.

The open-file limit: Ottla raises its soft RLIMIT_NOFILE to the hard limit
at start (as the JVM does for Kafka), so no `ulimit -n` is needed before
starting it unless the hard limit is too low. Each broker holds about one
descriptor per partition (the active segment's .log) plus one per
connection, so 10,000 partitions and 10,000 connections need more than
20,000. This script raises its own soft and hard limit to `--nofile`
(65,536; raising the hard limit needs CAP_SYS_RESOURCE), and both brokers
inherit it; where it cannot, it says so and the connections beyond the
limit fail (they wait in the listen backlog, unaccepted, and time out
after 10 s; after 100 failures the rest are not tried). The limit each
broker ran with, from /proc/PID/limits, is a row of the table.

Every figure is printed as `metric  kafka  ottla  ratio` (Ottla / Kafka;
below 1 favours Ottla for times, CPU, memory and descriptors, above 1 for
records/s). A figure that could not be taken is printed as FAILED and its
reason listed after the table; the script then exits with status 1.

    scripts/scale-bench.py [--partitions 2000,10000] [--quick] [--binary PATH]
                           [--kafka-port 19292] [--ottla-port 29292] [--markdown]
                           [--only metadata,idle,produce,connections,restart,max.connections]
                           [--brokers kafka,ottla]

`--quick`: 1,000 partitions, 2,000 connections (200 busy), 5 s idle;
2 to 3.5 minutes on a 2-core machine; the full run takes about 45.
`--binary` runs that Ottla binary as it is (by default the repository's
target/release/ottla, built first with cargo). `--only` skips the other
measurements ("produce" is the producer and the consumer); `--brokers ottla`
runs Ottla alone (no ratios). Figures from a
machine that runs other work at the same time are noisy.
"""

import argparse
import asyncio
import os
import resource
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench  # noqa: E402  (scripts/bench.py: brokers, perf-test helpers)
from kafka_wire import (  # noqa: E402  (scripts/kafka_wire.py)
    API_VERSIONS, CREATE_PARTITIONS, CREATE_TOPICS, DESCRIBE_TOPIC_PARTITIONS, METADATA, NO_TAGS,
    Connection, array, compact_string, end_offsets, i8, i16, i32, request_frame, split_response,
    string, uvarint,
)


ROOT = bench.ROOT
RECORD_SIZE = 200
SMALL_TOPIC = "scale-small"

# ---------------------------------------------------------------------------
# The requests this benchmark sends (their primitives: scripts/kafka_wire.py).


def api_versions_body():
    return b""  # v0


def metadata_body(topics):
    """Metadata v4 for `topics`, no auto-creation."""
    return array(topics, string) + i8(0)


def parse_metadata(r):
    """Metadata v4 response: {topic: (error, [(partition, error, leader)])}."""
    r.i32()  # throttle
    r.array(lambda: (r.i32(), r.string(), r.i32(), r.string()))  # brokers
    r.string()  # cluster id
    r.i32()  # controller

    def partition():
        error, index, leader = r.i16(), r.i32(), r.i32()
        r.array(r.i32)  # replicas
        r.array(r.i32)  # isr
        return index, error, leader

    def topic():
        error, name = r.i16(), r.string()
        r.i8()  # internal
        return name, (error, r.array(partition))

    return dict(r.array(topic))


def leaders_ready(conn, topic):
    """How many of `topic`'s partitions Metadata shows with a leader and no
    error (0 while the topic itself has an error)."""
    error, parts = parse_metadata(conn.call(METADATA, 4, metadata_body([topic])))[topic]
    return 0 if error else sum(1 for _, err, leader in parts if err == 0 and leader >= 0)


def create_topic(conn, topic, partitions, timeout_ms=120_000):
    """CreateTopics v2; raises on an error code."""
    no_assignments = no_configs = i32(0)
    body = array([topic], lambda name: string(name) + i32(partitions) + i16(1) + no_assignments
                  + no_configs) + i32(timeout_ms) + i8(0)
    check_results("CreateTopics", conn.call(CREATE_TOPICS, 2, body))


def add_partitions(conn, topic, total, timeout_ms=120_000):
    """CreatePartitions v1: `topic` grows to `total` partitions."""
    no_assignments = i32(-1)
    body = array([topic], lambda name: string(name) + i32(total) + no_assignments) + i32(timeout_ms) + i8(0)
    check_results("CreatePartitions", conn.call(CREATE_PARTITIONS, 1, body))


def check_results(request, r):
    """Raises on an error in a CreateTopics v2 / CreatePartitions v1 response."""
    r.i32()  # throttle
    for name, error, message in r.array(lambda: (r.string(), r.i16(), r.string())):
        if error:
            raise RuntimeError(f"{request} {name}: error {error} {message or ''}")


# Kafka's controller refuses an operation of more than 10,000 records
# (QuorumController's MAX_RECORDS_PER_USER_OP: "Unable to perform
# excessively large batch operation"), and a topic of N partitions takes
# N + 1 records: so topics are created this many partitions at a time,
# on both brokers alike.
PARTITIONS_PER_REQUEST = 5_000


def create_in_steps(conn, topic, partitions):
    """CreateTopics with up to PARTITIONS_PER_REQUEST partitions, then
    CreatePartitions adding as many at a time. Returns the requests sent."""
    create_topic(conn, topic, min(partitions, PARTITIONS_PER_REQUEST))
    requests, total = 1, min(partitions, PARTITIONS_PER_REQUEST)
    while total < partitions:
        total = min(partitions, total + PARTITIONS_PER_REQUEST)
        add_partitions(conn, topic, total)
        requests += 1
    return requests


def describe_topic_partitions(conn, topic):
    """Every partition of `topic` by DescribeTopicPartitions v0, following
    the cursor from page to page. Returns (partitions, requests)."""
    cursor, seen, requests = None, 0, 0
    while True:
        body = uvarint(2) + compact_string(topic) + NO_TAGS + i32(2000)
        body += i8(-1) if cursor is None else i8(1) + compact_string(cursor[0]) + i32(cursor[1]) + NO_TAGS
        r = conn.call(DESCRIBE_TOPIC_PARTITIONS, 0, body + NO_TAGS, flexible=True)
        requests += 1
        r.i32()  # throttle

        def partition():
            error = r.i16()
            r.skip(12)  # index, leader, leader epoch
            # replicas, isr, eligible leader replicas, last known elr, offline
            for _ in range(5):
                r.compact_array(r.i32)
            r.tags()
            return error

        def topic_entry():
            error, name = r.i16(), r.compact_string()
            r.skip(17)  # topic id, internal
            parts = r.compact_array(partition)
            r.i32()  # authorized operations
            r.tags()
            if error:
                raise RuntimeError(f"DescribeTopicPartitions {name}: error {error}")
            return len(parts)

        seen += sum(r.compact_array(topic_entry))
        if r.i8() < 0:
            return seen, requests
        cursor = (r.compact_string(), r.i32())
        r.tags()


# ---------------------------------------------------------------------------
# The brokers: bench.py's, with a data dir, heap and extra settings for
# Kafka, extra overrides for Ottla, and restarts on the same data.


class Kafka(bench.ApacheKafka):
    """Apache Kafka from scripts/apache-kafka.sh in `dir`."""

    def __init__(self, name, port, dir, heap, props=()):
        super().__init__(name, port)
        self.dir, self.heap, self.props = Path(dir), heap, list(props)

    def _script(self, *args):
        return ["bash", str(ROOT / "scripts" / "apache-kafka.sh"), *args, "--port", str(self.port),
                "--dir", str(self.dir)]

    def launch(self, fresh=False):
        """Starts the broker and returns without waiting for it. The log
        of the run before is kept as server.log.<n> (apache-kafka.sh keeps
        one only)."""
        log = self.dir / "server.log"
        if fresh:
            bench.ensure_free(self.port)
            for old in self.dir.glob("server.log.*"):
                old.unlink()
        elif log.exists():
            log.rename(self.dir / f"server.log.{len(list(self.dir.glob('server.log.*'))) + 1}")
        args = self._script("start", *(["--fresh"] if fresh else []), "--heap", self.heap, "--timeout", "600")
        for prop in self.props:
            args += ["--prop", prop]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def gone(self):
        """Why the broker being started will not answer, if it will not."""
        if self.proc.poll() not in (None, 0):
            return f"apache-kafka.sh start failed: {self.proc.stderr.read()[-2000:]}"
        return None

    def started(self):
        """Waits for the start script: the broker answers."""
        _, err = self.proc.communicate()
        if self.proc.returncode != 0:
            raise RuntimeError(f"apache-kafka.sh start failed: {err[-2000:]}")
        self.pid = int((self.dir / "kafka.pid").read_text().split()[0])

    def start(self):
        self.launch(fresh=True)
        self.started()

    def halt(self, kill):
        if kill:
            os.kill(self.pid, signal.SIGKILL)
            # Its last threads may hold the listeners a moment after it dies.
            wait_for(lambda: not (bench.listening(self.port) or bench.listening(self.port + 1)), 60,
                     f"{self.name}'s ports closing after kill -9")
        else:
            bench.sh(self._script("stop", "--timeout", "300"))

    def stop(self):
        subprocess.run(self._script("stop"), check=False, capture_output=True)


class Ottla(bench.Ottla):
    """An Ottla node started as bench.py does, plus `overrides`."""

    def __init__(self, name, port, binary, overrides=()):
        self.wrapper = with_overrides(binary, overrides) if overrides else None
        super().__init__(name, port, self.wrapper or binary)

    def stop(self):
        super().stop()
        if self.wrapper:
            shutil.rmtree(self.wrapper.parent, ignore_errors=True)

    def launch(self, fresh=False):
        self.start()

    def started(self):
        pass

    def gone(self):
        return f"ottla exited with {self.proc.returncode}" if self.proc.poll() is not None else None

    def halt(self, kill):
        if kill:
            self.proc.kill()
        else:
            self.proc.terminate()
        self.proc.wait(timeout=300)


def with_overrides(binary, overrides):
    """bench.Ottla builds Ottla's command line itself: a wrapper that execs
    the binary (same pid) with `overrides` appended gives it more."""
    wrapper = Path(tempfile.mkdtemp(prefix="ottla-scale-")) / "ottla"
    extra = " ".join(f"--override '{o}'" for o in overrides)
    wrapper.write_text(f'#!/bin/sh\nexec \'{binary}\' "$@" {extra}\n')
    wrapper.chmod(0o755)
    return wrapper


def alive(broker):
    """True, or raises if the broker's process has gone."""
    try:
        state = Path(f"/proc/{broker.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        state = "gone"
    if state in ("Z", "X", "gone"):
        raise RuntimeError(f"the broker's process {broker.pid} has gone (see its log)")
    return True


def rss_mib(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def open_files(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def open_file_limit(pid):
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            return int(line.split()[3])
    raise RuntimeError(f"no open-file limit for pid {pid}")


def raise_own_nofile(wanted):
    """Raises this process's RLIMIT_NOFILE (soft and hard) to `wanted`, or
    as far as allowed; the brokers and the sockets here inherit it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, wanted), max(hard, wanted)))
    except (ValueError, OSError) as e:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        print(f"could not raise RLIMIT_NOFILE to {wanted} ({e}); it is {hard}", file=sys.stderr)
    return resource.getrlimit(resource.RLIMIT_NOFILE)


# ---------------------------------------------------------------------------
# Measurements. Each returns {metric: value}; `Results` records them.


def wait_for(check, timeout, what, interval=0.05, gone=lambda: None):
    """Calls `check` until it returns true; seconds it took. Gives up when
    `gone` returns why the broker will never pass it."""
    t0 = time.monotonic()
    while True:
        try:
            if check():
                return time.monotonic() - t0
        except OSError:
            pass
        reason = gone()
        if reason:
            raise RuntimeError(f"{what}: {reason}")
        if time.monotonic() - t0 > timeout:
            raise RuntimeError(f"{what}: not within {timeout} s")
        time.sleep(interval)


def answers(port):
    with Connection(port, timeout=5) as c:
        c.call(API_VERSIONS, 0, api_versions_body())
    return True


def all_leaders(port, topic, partitions):
    with Connection(port) as c:
        return leaders_ready(c, topic) == partitions


def all_hosted(conn, topic, partitions):
    """Whether every partition answers ListOffsets without an error: the
    broker has it open as its leader, not only in its metadata."""
    offsets = end_offsets(conn, topic, partitions)
    return len(offsets) == partitions and not any(error for error, _ in offsets.values())


def measure_create(broker, topic, partitions):
    with Connection(broker.port) as c:
        t0 = time.monotonic()
        requests = create_in_steps(c, topic, partitions)
        response = time.monotonic() - t0
        wait_for(lambda: leaders_ready(c, topic) == partitions, 300, f"{partitions} leaders in Metadata")
        leaders = time.monotonic() - t0
        wait_for(lambda: all_hosted(c, topic, partitions), 300, f"{partitions} partitions answering ListOffsets",
                 interval=0.1)
        hosted = time.monotonic() - t0
        create_topic(c, SMALL_TOPIC, 1)
        wait_for(lambda: all_hosted(c, SMALL_TOPIC, 1), 60, f"{SMALL_TOPIC} answering ListOffsets")
    return {"create: requests": requests, "create: responses s": response,
            "create: all leaders in Metadata s": leaders,
            "create: all answer ListOffsets s": hosted}


def median_ms(runs, conn, call):
    """The median time `call`'s requests on `conn` took, in ms."""
    times = []
    for _ in range(runs):
        conn.waited = 0.0
        call()
        times.append(conn.waited)
    return statistics.median(times) * 1000


def measure_metadata(broker, topic, partitions, runs):
    with Connection(broker.port) as c:
        def metadata():
            if leaders_ready(c, topic) != partitions:
                raise RuntimeError(f"Metadata lists fewer than {partitions} led partitions")

        def describe():
            seen, _ = describe_topic_partitions(c, topic)
            if seen != partitions:
                raise RuntimeError(f"DescribeTopicPartitions gave {seen} of {partitions} partitions")

        figures = {"metadata: Metadata ms": median_ms(runs, c, metadata),
                   "metadata: DescribeTopicPartitions ms": median_ms(runs, c, describe)}
        figures["metadata: DescribeTopicPartitions requests"] = describe_topic_partitions(c, topic)[1]
    return figures


def measure_idle(broker, seconds):
    time.sleep(2)  # let the creation's aftermath settle
    before, t0 = bench.cpu_seconds(broker.pid), time.monotonic()
    time.sleep(seconds)
    cpu = bench.cpu_seconds(broker.pid) - before
    return {"idle: CPU % of a core": 100 * cpu / (time.monotonic() - t0), "idle: RSS MiB": rss_mib(broker.pid),
            "idle: open files": open_files(broker.pid)}


def produce_spread(bin_dir, broker, topic, records):
    """kafka-producer-perf-test, acks=1, RECORD_SIZE-byte records,
    linger.ms=5, round-robin over the partitions."""
    out = bench.sh([
        str(bin_dir / "kafka-producer-perf-test.sh"), "--topic", topic, "--num-records", str(records),
        "--record-size", str(RECORD_SIZE), "--throughput", "-1", "--producer-props",
        f"bootstrap.servers={broker.bootstrap()}", "acks=1", "linger.ms=5",
        "partitioner.class=org.apache.kafka.clients.producer.RoundRobinPartitioner",
    ]).stdout
    m = bench.PRODUCER.search(out.strip().splitlines()[-1])
    if not m:
        raise RuntimeError(f"unexpected producer output: {out[-500:]}")
    return {"rec/s": float(m[2])}


def measure_produce(bin_dir, broker, topic, partitions, records):
    p = bench.measured(broker, lambda: produce_spread(bin_dir, broker, topic, records))
    with Connection(broker.port) as c:
        offsets = end_offsets(c, topic, partitions)
    held = sum(offset for error, offset in offsets.values() if not error)
    # acks=1 without idempotence: a retried request may be written twice.
    return {"produce: records/s": p["rec/s"], "produce: broker CPU s": p["cpu s"],
            "produce: partitions with records": sum(1 for _, offset in offsets.values() if offset > 0),
            "produce: records in the topic": held if held >= records else Failed(
                f"{held}, fewer than the {records} acknowledged")}


def measure_consume(bin_dir, broker, topic, records, runs):
    """`runs` consumers read the topic one after another (one consumer run
    varies by a quarter from the next): the medians."""
    samples = []
    for _ in range(runs):
        c = bench.measured(broker, lambda: bench.consume(bin_dir, broker, topic, records))
        if not c["rec/s"]:
            return {"consume: records/s": Failed("read nothing before kafka-consumer-perf-test's timeout")}
        samples.append(c)
    median = lambda key: statistics.median(c[key] for c in samples)
    return {"consume: records/s": median("rec/s"), "consume: join ms": median("join ms"),
            "consume: broker CPU s": median("cpu s")}


def measure_restart(broker, topic, partitions, kill):
    kind = "kill -9" if kill else "clean"
    t0 = time.monotonic()
    broker.halt(kill)
    figures = {} if kill else {"restart clean: stop s": time.monotonic() - t0}
    t0 = time.monotonic()
    broker.launch()
    answered = wait_for(lambda: answers(broker.port), 600, f"{broker.name} answering after {kind} restart",
                        gone=broker.gone)
    led = wait_for(lambda: all_leaders(broker.port, topic, partitions), 600,
                   f"{broker.name} leading {partitions} partitions after {kind} restart", interval=0.1,
                   gone=broker.gone)
    with Connection(broker.port) as c:
        hosted = wait_for(lambda: all_hosted(c, topic, partitions), 600,
                          f"{broker.name}'s {partitions} partitions answering ListOffsets after {kind} restart",
                          interval=0.1, gone=broker.gone)
    broker.started()
    figures[f"restart {kind}: answers s"] = answered
    figures[f"restart {kind}: all leaders in Metadata s"] = answered + led
    figures[f"restart {kind}: all answer ListOffsets s"] = answered + led + hosted
    return figures


# --- many connections, with asyncio ---------------------------------------


async def read_frame(reader):
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    return await reader.readexactly(size)


async def round_trip(reader, writer, api_key, version, correlation_id, body):
    writer.write(request_frame(api_key, version, correlation_id, body))
    frame = await read_frame(reader)
    if split_response(frame)[0] != correlation_id:
        raise RuntimeError("mismatched correlation id")
    return frame


async def open_client(port, timeout):
    """One connection that has had its ApiVersions answered: (reader,
    writer, seconds from connect() to the answer)."""
    t0 = time.monotonic()
    reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), timeout)
    try:
        await asyncio.wait_for(round_trip(reader, writer, API_VERSIONS, 0, 1, api_versions_body()), timeout)
    except BaseException:
        writer.close()
        raise
    return reader, writer, time.monotonic() - t0


async def open_many(port, count, concurrency, timeout=10.0, give_up=100):
    """`count` connections, `concurrency` being opened at a time, in
    order. Returns the open ones (None for a failure) and the failures by
    kind; after `give_up` failures the rest are not tried."""
    gate = asyncio.Semaphore(concurrency)
    failures = {}

    async def one(i):
        async with gate:
            if sum(failures.values()) >= give_up:
                failures["not tried"] = failures.get("not tried", 0) + 1
                return None
            try:
                return await open_client(port, timeout)
            except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, RuntimeError) as e:
                kind = type(e).__name__ + (f" {e.strerror}" if isinstance(e, OSError) and e.strerror else "")
                failures[kind] = failures.get(kind, 0) + 1
                return None

    opened = await asyncio.gather(*(one(i) for i in range(count)))
    return opened, failures


def percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] * 1000 if values else float("nan")


async def keep_busy(clients, seconds):
    """ApiVersions and Metadata (the small topic) alternately on each of
    `clients` until `seconds` pass: requests/s and latencies."""
    deadline = time.monotonic() + seconds
    latencies, errors = [], []
    metadata = metadata_body([SMALL_TOPIC])

    async def loop(reader, writer):
        n = 1
        while time.monotonic() < deadline:
            n += 1
            api = (API_VERSIONS, 0, api_versions_body()) if n % 2 else (METADATA, 4, metadata)
            t0 = time.monotonic()
            try:
                await asyncio.wait_for(round_trip(reader, writer, api[0], api[1], n, api[2]), 30)
            except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, RuntimeError) as e:
                errors.append(type(e).__name__)
                return
            latencies.append(time.monotonic() - t0)

    t0 = time.monotonic()
    await asyncio.gather(*(loop(r, w) for r, w, _ in clients))
    return len(latencies) / (time.monotonic() - t0), latencies, errors


async def close_all(clients):
    for _, writer, _ in clients:
        writer.close()
    await asyncio.gather(*(w.wait_closed() for _, w, _ in clients), return_exceptions=True)


def measure_connections(broker, count, active, active_seconds, concurrency):
    pid = broker.pid
    files_before, rss_before = open_files(pid), rss_mib(pid)
    figures = {"connections: broker open-file limit": open_file_limit(pid)}

    async def run():
        opened, failures = await open_many(broker.port, count, concurrency)
        clients = [c for c in opened if c is not None]
        times = [c[2] for c in opened if c is not None]
        first, last = [c[2] for c in opened[:1000] if c], [c[2] for c in opened[-1000:] if c]
        await asyncio.sleep(1)
        rss_open = rss_mib(pid)
        figures.update({
            "connections: opened": len(clients),
            "connections: first 1,000 connect+answer p50 ms": percentile(first, 0.5),
            "connections: first 1,000 connect+answer p99 ms": percentile(first, 0.99),
            "connections: last 1,000 connect+answer p50 ms": percentile(last, 0.5),
            "connections: last 1,000 connect+answer p99 ms": percentile(last, 0.99),
            "connections: all connect+answer p99 ms": percentile(times, 0.99),
            "connections: RSS before MiB": rss_before,
            "connections: RSS open MiB": rss_open,
            "connections: RSS per connection KiB": (rss_open - rss_before) * 1024 / max(1, len(clients)),
            "connections: open files before": files_before,
            "connections: open files while open": open_files(pid),
        })
        rate, latencies, errors = await keep_busy(clients[:active], active_seconds)
        figures.update({
            "connections: busy requests/s": rate,
            "connections: busy request p99 ms": percentile(latencies, 0.99),
            "connections: RSS after busy MiB": rss_mib(pid),
        })
        if errors:
            failures[f"busy: {errors[0]}"] = len(errors)
        await close_all(clients)
        return failures

    failures = asyncio.run(run())
    try:
        figures["connections: open files back to baseline s"] = wait_for(
            lambda: open_files(pid) <= files_before, 30, "open files back to baseline", interval=0.05)
    except RuntimeError:
        figures["connections: open files back to baseline s"] = Failed(
            f"still {open_files(pid)} open files 30 s after closing (baseline {files_before})")
    figures["connections: open files after closing"] = open_files(pid)
    try:
        figures["connections: answers after closing"] = Note("yes") if answers(broker.port) else None
    except OSError as e:
        figures["connections: answers after closing"] = Failed(f"no: {e}")
    if failures:
        figures["connections: failed"] = Failed(", ".join(f"{n} x {k}" for k, n in failures.items()))
    return figures


def measure_max_connections(broker, limit, wait=3.0):
    """With max.connections=`limit`: how connection `limit`+1 fares."""

    async def run():
        opened, failures = await open_many(broker.port, limit, 16)
        clients = [c for c in opened if c is not None]
        extra = {"answered of the first M": len(clients)}
        reader, writer = await asyncio.open_connection("127.0.0.1", broker.port)
        reply = asyncio.ensure_future(round_trip(reader, writer, API_VERSIONS, 0, 1, api_versions_body()))
        done, _ = await asyncio.wait([reply], timeout=wait)
        extra[f"connection M+1 within {wait:.0f} s"] = outcome(reply) if done else Note("unanswered")
        if not done:
            t0 = time.monotonic()
            await close_all(clients[:1])
            done, _ = await asyncio.wait([reply], timeout=wait)
            extra["M+1 served after one closed, ms"] = (
                (time.monotonic() - t0) * 1000 if done and outcome(reply) == Note("served") else
                Failed(f"{outcome(reply) if done else 'unanswered'} {wait} s after one closed"))
            clients = clients[1:]
        reply.cancel()
        writer.close()
        await close_all(clients)
        return extra

    return asyncio.run(run())


def outcome(reply):
    e = reply.exception()
    if e is None:
        return Note("served")
    return Note("closed" if isinstance(e, (asyncio.IncompleteReadError, ConnectionResetError)) else type(e).__name__)


# ---------------------------------------------------------------------------
# Recording and printing.


class Note(str):
    """A figure that is a word, not a number."""


class Failed(str):
    """A figure that could not be taken, and why."""


class Results:
    def __init__(self):
        self.rows = {}  # metric -> {broker name: value}

    def add(self, broker, prefix, figures):
        for metric, value in figures.items():
            self.rows.setdefault(f"{prefix}{metric}", {})[broker] = value

    def take(self, broker, prefix, what, measure):
        """Runs `measure` and records its figures; a failure is recorded
        as the figure `what`, with its reason, and does not stop the run."""
        print(f"  {broker}: {prefix}{what}", file=sys.stderr, flush=True)
        try:
            figures = measure()
        except Exception as e:  # noqa: BLE001 - every failure becomes a reported figure
            figures = {what: Failed(f"{type(e).__name__}: {e}")}
        self.add(broker, prefix, figures)
        print(f"    {figures}", file=sys.stderr, flush=True)
        return figures

    def failures(self):
        return [(m, b, v) for m, row in self.rows.items() for b, v in row.items() if isinstance(v, Failed)]

    def print(self, markdown):
        def cell(v):
            if v is None:
                return "-"
            if isinstance(v, Failed):
                return "FAILED"
            if isinstance(v, str):
                return v
            return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.2f}"

        def ratio(row):
            k, o = row.get("kafka"), row.get("ottla")
            if isinstance(k, (int, float)) and isinstance(o, (int, float)) and k:
                return f"{o / k:.2f}"
            return ""

        if markdown:
            print("| metric | Kafka | Ottla | ratio |\n| --- | ---: | ---: | ---: |")
        else:
            print(f"{'metric':<64}{'kafka':>12}{'ottla':>12}{'ratio':>8}")
        for metric, row in self.rows.items():
            k, o = cell(row.get("kafka")), cell(row.get("ottla"))
            if markdown:
                print(f"| {metric} | {k} | {o} | {ratio(row)} |")
            else:
                print(f"{metric:<64}{k:>12}{o:>12}{ratio(row):>8}")


# ---------------------------------------------------------------------------


# What --only chooses from; create always runs, the rest need its topic
# ("produce" is the producer and then the consumer reading it back).
STEPS = ("metadata", "idle", "produce", "connections", "restart", "max.connections")


def scale_pass(broker, bin_dir, partitions, args, results):
    """Everything at one partition count, on a fresh `broker`."""
    prefix = f"[{partitions:,}] "
    topic = f"scale-{partitions}"
    records = args.records or max(200 * partitions, 1_000_000)
    name = broker.name
    print(f"{name}, {partitions} partitions", file=sys.stderr, flush=True)
    # (what --only calls it, name, measurement)
    steps = [
        ("metadata", "metadata", lambda: measure_metadata(broker, topic, partitions, args.metadata_runs)),
        ("idle", "idle", lambda: measure_idle(broker, args.idle_seconds)),
        ("produce", "produce", lambda: measure_produce(bin_dir, broker, topic, partitions, records)),
        ("produce", "consume", lambda: measure_consume(bin_dir, broker, topic, records, args.consumer_runs)),
        ("connections", "connections", lambda: measure_connections(
            broker, args.connections, args.active, args.active_seconds, args.connect_concurrency)),
        ("restart", "restart clean", lambda: measure_restart(broker, topic, partitions, kill=False)),
        ("restart", "restart kill -9", lambda: measure_restart(broker, topic, partitions, kill=True)),
    ]
    broker.start()
    try:
        created = results.take(name, prefix, "create", lambda: measure_create(broker, topic, partitions))
        if any(isinstance(v, Failed) for v in created.values()):
            return  # nothing else can be measured without the topic
        for selector, step, measure in steps:
            if selector in args.only:
                results.take(name, prefix, step, lambda: alive(broker) and measure())
    finally:
        broker.stop()


def max_connections_pass(broker, limit, results):
    print(f"{broker.name}, max.connections={limit}", file=sys.stderr, flush=True)
    broker.start()
    try:
        results.take(broker.name, f"[max.connections={limit}] ", "max.connections",
                     lambda: measure_max_connections(broker, limit))
    finally:
        broker.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", default="2000,10000", help="partition counts, comma-separated")
    ap.add_argument("--quick", action="store_true", help="1,000 partitions, 2,000 connections, 5 s idle")
    ap.add_argument("--binary", type=Path, help="Ottla binary to run as it is (default: build target/release/ottla)")
    ap.add_argument("--kafka-port", type=int, default=19292)
    ap.add_argument("--ottla-port", type=int, default=29292)
    ap.add_argument("--kafka-dir", default="/tmp/k-scale")
    ap.add_argument("--kafka-heap", default="-Xmx2g")
    ap.add_argument("--records", type=int, help="records to produce (default max(200 * N, 1,000,000))")
    ap.add_argument("--metadata-runs", type=int, default=5)
    ap.add_argument("--consumer-runs", type=int, default=3, help="consumers reading the produced records")
    ap.add_argument("--idle-seconds", type=float, default=15)
    ap.add_argument("--connections", type=int, default=10_000)
    ap.add_argument("--active", type=int, default=1_000, help="connections kept busy")
    ap.add_argument("--active-seconds", type=float, default=5)
    ap.add_argument("--connect-concurrency", type=int, default=32)
    ap.add_argument("--max-connections", type=int, default=100, help="the limit max.connections is tested with")
    ap.add_argument("--nofile", type=int, default=65_536, help="RLIMIT_NOFILE for this script and the brokers")
    ap.add_argument("--only", default=",".join(STEPS),
                    help=f"measure only these, comma-separated, of {','.join(STEPS)} (create is always measured)")
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown too")
    ap.add_argument("--brokers", default="kafka,ottla",
                    help="which brokers to run: kafka,ottla (both, for ratios), or one of them")
    args = ap.parse_args()
    if args.quick:
        args.partitions, args.connections, args.active, args.idle_seconds = "1000", 2_000, 200, 5
    partition_counts = [int(p) for p in args.partitions.split(",")]
    chosen = set(args.brokers.split(","))
    if not chosen or chosen - {"kafka", "ottla"}:
        sys.exit(f"--brokers: choose kafka, ottla or both, not {args.brokers}")
    args.only = set(args.only.split(","))
    if args.only - set(STEPS):
        sys.exit(f"--only: unknown {', '.join(sorted(args.only - set(STEPS)))}; choose from {', '.join(STEPS)}")

    soft, hard = raise_own_nofile(args.nofile)
    print(f"RLIMIT_NOFILE of this script (inherited by the brokers): soft {soft}, hard {hard}", file=sys.stderr)
    bin_dir = Path(bench.last_line("kafka-tools.sh"))
    binary = args.binary
    if binary is None:
        bench.sh(["cargo", "build", "--release", "-p", "ottla-broker", "--bin", "ottla"], cwd=ROOT)
        binary = ROOT / "target" / "release" / "ottla"
    if not os.access(binary, os.X_OK):
        sys.exit(f"no Ottla binary at {binary}")

    def kafka(props=()):
        return Kafka("kafka", args.kafka_port, args.kafka_dir, args.kafka_heap, props)

    def ottla(overrides=()):
        return Ottla("ottla", args.ottla_port, binary.resolve(), overrides)

    results = Results()
    for i, partitions in enumerate(partition_counts):
        # The order alternates, so a machine that gets busier or quieter
        # during the run favours neither.
        pair = [b for b in (kafka(), ottla()) if b.name in chosen]
        for broker in pair if i % 2 == 0 else reversed(pair):
            scale_pass(broker, bin_dir, partitions, args, results)
    limit = args.max_connections
    if "max.connections" in args.only:
        for broker in (kafka([f"max.connections={limit}"]), ottla([f"max.connections={limit}"])):
            if broker.name in chosen:
                max_connections_pass(broker, limit, results)

    print(f"\nOttla / Apache Kafka at scale, single broker each, this machine ({os.cpu_count()} cores)")
    if not results.rows:
        sys.exit("nothing was measured")
    results.print(markdown=False)
    if args.markdown:
        print()
        results.print(markdown=True)
    for metric, broker, reason in results.failures():
        print(f"FAILED {broker} {metric}: {reason}")
    sys.exit(1 if results.failures() else 0)


if __name__ == "__main__":
    main()
