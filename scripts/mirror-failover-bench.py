#!/usr/bin/env python3
"""Ottla's mirroring at scale: a source of one or more brokers with one
topic of N partitions (one record each, leaders spread over the brokers)
mirrored into a single-node destination.

Reported:
- the time from `ottla mirrors --add` until every partition is MIRRORING;
- CPU of the source's brokers (summed) and of the destination over 10 s
  while the mirror is caught up and idle;
- the TCP connections the destination holds to the source's brokers while
  idle (fetch loops, `mirror.num.fetchers` per source broker, default 1,
  plus the connections of the metadata, config and group syncs);
- failover: the time from `ottla mirrors --remove` until every partition
  has accepted an acks=all write on the destination (librdkafka producer,
  one record per partition, retried until each lands), and until the last
  partition became writable by the destination's own account (the
  WRITABLE-AT-MS of `--describe`), which leaves out the client's retries;
  and, for scale, what the same writes take once every partition is writable;
- recovery, before the failover: kill -9 of a source broker (held 1 s, then
  restarted), one record written to every partition on the source once it
  takes writes again, and the time from the restart until the destination
  holds every record (the end offsets of both clusters agree); then kill -9
  of the destination, one record per partition written to the source while
  it is down, and the time from its restart until it holds them all.

    scripts/mirror-failover-bench.py [--partitions N ...] [--source-nodes K]

Issue 22 measured the failover at 2.7 s for 100 partitions and 23 s for
1,000 before the epoch bumps were batched.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from bench import ROOT, Ottla, cpu_seconds, last_line, ottla_cluster, wait_port
from kafka_wire import Connection, end_offsets

try:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
except ImportError:
    # The test venv has librdkafka's client: run again under it.
    os.execv(last_line("python-env.sh"), [last_line("python-env.sh"), *sys.argv])

IDLE_SECONDS = 10


def progress(what):
    print(f"  {time.strftime('%H:%M:%S')} {what}", file=sys.stderr, flush=True)


def mirrors_cli(binary, bootstrap, *args):
    return subprocess.run([str(binary), "mirrors", "--bootstrap-server", bootstrap, *args],
                          capture_output=True, text=True, check=False)


def write_each(bootstrap, topic, partitions, deadline_s=120):
    """Seconds until every partition took one acks=all record."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "retries": 0, "message.timeout.ms": 2000, "log_level": 3})
    pending, t0 = set(range(partitions)), time.monotonic()
    while pending:
        landed = set()
        for p in pending:
            producer.produce(topic, b"after failover", partition=p,
                             on_delivery=lambda err, msg: err is None and landed.add(msg.partition()))
        producer.flush(10)
        pending -= landed
        if time.monotonic() - t0 > deadline_s:
            raise RuntimeError(f"{len(pending)} partitions still refuse writes after {deadline_s} s")
    return time.monotonic() - t0


def end_offsets_of(brokers, topic, partitions):
    """Every partition's end offset, asked of each broker with a raw
    ListOffsets (its leaders answer); None where no leader did."""
    ends = [None] * partitions
    for broker in brokers:
        try:
            with Connection(broker.port, timeout=10) as conn:
                for p, (error, offset) in end_offsets(conn, topic, partitions).items():
                    if error == 0:
                        ends[p] = offset
        except OSError:
            pass  # down, or not listening yet
    return ends


def wait_caught_up(sources, destination, topic, partitions, deadline_s=300):
    """Seconds until the destination's end offsets are the source's."""
    t0, reported = time.monotonic(), time.monotonic()
    wanted = end_offsets_of(sources, topic, partitions)
    if None in wanted:
        raise RuntimeError(f"{wanted.count(None)} source partitions give no end offset")
    while (held := end_offsets_of([destination], topic, partitions)) != wanted:
        behind = sum(h != w for h, w in zip(held, wanted))
        if time.monotonic() - t0 > deadline_s:
            raise RuntimeError(f"{behind} partitions still behind the source after {deadline_s} s")
        if time.monotonic() - reported > 10:
            progress(f"{behind} of {partitions} partitions behind the source")
            reported = time.monotonic()
        time.sleep(0.05)
    return time.monotonic() - t0


def kill9(broker):
    broker.proc.kill()
    broker.proc.wait()


def recovery(sources, destination, partitions):
    """The two recovery figures (see the module's doc)."""
    src = ",".join(s.bootstrap() for s in sources)
    victim = sources[-1]
    kill9(victim)
    time.sleep(1)
    restarted = time.monotonic()
    victim.start()
    wait_port(victim.port, victim.proc)
    write_each(src, "scale", partitions)
    source_writable = time.monotonic() - restarted
    source_restart = source_writable + wait_caught_up(sources, destination, "scale", partitions)
    progress(f"source broker restarted: every partition caught up after {source_restart:.1f} s")
    kill9(destination)
    write_each(src, "scale", partitions)
    restarted = time.monotonic()
    destination.start()
    wait_caught_up(sources, destination, "scale", partitions)
    destination_restart = time.monotonic() - restarted
    progress(f"destination restarted: every partition caught up after {destination_restart:.1f} s")
    return source_writable, source_restart, destination_restart


def values_of(document, key):
    """Every value of `key` anywhere in a JSON document."""
    if isinstance(document, dict):
        for k, v in document.items():
            if k == key and v is not None:
                yield v
            else:
                yield from values_of(v, key)
    elif isinstance(document, list):
        for v in document:
            yield from values_of(v, key)


def connections(pid, ports):
    """Established TCP connections of process `pid` to any of `ports`
    (from /proc: its socket inodes matched against the kernel's table)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            remote_port, state, inode = int(fields[2].rsplit(":", 1)[1], 16), fields[3], fields[9]
            count += state == "01" and inode in inodes and remote_port in ports
    return count


def run(binary, partitions, port, source_nodes):
    """One run; returns its figures by column."""
    destination = Ottla("destination", port + 100, binary)
    sources = []
    try:
        sources = ottla_cluster("source", port, binary, source_nodes)
        destination.start()
        src = ",".join(s.bootstrap() for s in sources)
        dst = destination.bootstrap()
        admin = AdminClient({"bootstrap.servers": src})
        # In steps of 5,000: one request may write at most 10,000 metadata
        # records (Kafka's limit, which Ottla keeps).
        count = min(partitions, 5000)
        admin.create_topics([NewTopic("scale", count, 1)])["scale"].result()
        while count < partitions:
            count = min(partitions, count + 5000)
            admin.create_partitions([NewPartitions("scale", count)])["scale"].result()
        del admin  # closed, so it does not log the source going away
        producer = Producer({"bootstrap.servers": src, "linger.ms": 20, "log_level": 3})
        for p in range(partitions):
            producer.produce("scale", b"x" * 100, partition=p)
        producer.flush(60)
        del producer  # closed, so it does not log the source going away
        progress(f"source has {partitions} partitions with a record each")
        config = destination.dir / "mirror.properties"
        config.write_text(f"bootstrap.servers={src}\n")
        mirrors_cli(binary, dst, "--create", "--mirror", "scale", "--mirror-config", str(config))
        t0 = time.monotonic()
        mirrors_cli(binary, dst, "--add", "--mirror", "scale", "--topics", "scale")
        reported = t0
        while (mirroring := mirrors_cli(binary, dst, "--describe", "--mirror", "scale")
               .stdout.count("MIRRORING")) < partitions:
            if time.monotonic() - reported > 10:
                progress(f"{mirroring} of {partitions} partitions MIRRORING")
                reported = time.monotonic()
            time.sleep(0.2)
        figures = {"add": time.monotonic() - t0}
        time.sleep(2)
        brokers = [*sources, destination]
        before = [cpu_seconds(b.pid) for b in brokers]
        time.sleep(IDLE_SECONDS)
        idle = [(cpu_seconds(b.pid) - was) / IDLE_SECONDS * 100 for b, was in zip(brokers, before)]
        figures["idle source"], figures["idle destination"] = sum(idle[:-1]), idle[-1]
        figures["connections"] = connections(destination.pid, {s.port for s in sources})
        (figures["source writable"], figures["source restart"],
         figures["destination restart"]) = recovery(sources, destination, partitions)
        t0, wall_t0_ms = time.monotonic(), time.time() * 1000
        removed = mirrors_cli(binary, dst, "--remove", "--mirror", "scale", "--topics", "scale")
        if removed.returncode != 0:
            raise RuntimeError(f"--remove failed: {removed.stderr}")
        progress("--remove answered; writing to every partition")
        write_each(dst, "scale", partitions)
        figures["failover"] = time.monotonic() - t0
        described = mirrors_cli(binary, dst, "--describe", "--mirror", "scale", "--json")
        writable = list(values_of(json.loads(described.stdout), "writable_at_ms"))
        if len(writable) != partitions:
            raise RuntimeError(f"{len(writable)} of {partitions} partitions report when they became writable")
        figures["writable"] = (max(writable) - wall_t0_ms) / 1000
        figures["baseline"] = write_each(dst, "scale", partitions)
        return figures
    finally:
        for broker in [*sources, destination]:
            broker.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", type=int, nargs="+", default=[100, 1000])
    ap.add_argument("--source-nodes", type=int, default=1,
                    help="brokers of the source cluster (the topic's leaders are spread over them)")
    # Below the kernel's ephemeral range, so no client socket holds it.
    ap.add_argument("--port", type=int, default=17092)
    ap.add_argument("--binary", type=Path, default=ROOT / "target" / "release" / "ottla",
                    help="the ottla binary (built with cargo when it is the default and missing)")
    args = ap.parse_args()
    binary = args.binary
    if not binary.exists():
        subprocess.run(["cargo", "build", "--release", "-p", "ottla-broker", "--bin", "ottla"],
                       cwd=ROOT, check=True)
    print(f"Source: {args.source_nodes} broker(s); destination: 1 broker.\n")
    print("| partitions | --add until MIRRORING | idle CPU source / destination (% of a core) "
          "| connections destination -> source "
          "| --remove until every partition took a write | ... until the last was writable (broker's account) "
          "| the same writes, all partitions writable "
          "| kill -9 of a source broker: its restart until the source takes writes / the destination holds them "
          "| kill -9 of the destination: its restart until it holds what the source took meanwhile |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for n in args.partitions:
        f = run(binary, n, args.port, args.source_nodes)
        print(f"| {n:,} | {f['add']:.1f} s | {f['idle source']:.1f} / {f['idle destination']:.1f} "
              f"| {f['connections']} | {f['failover']:.2f} s | {f['writable']:.2f} s | {f['baseline']:.2f} s "
              f"| {f['source writable']:.1f} / {f['source restart']:.1f} s | {f['destination restart']:.1f} s |",
              flush=True)


if __name__ == "__main__":
    main()
