"""Smoke test of the two Python clients against a running broker.

Needs OTTLA_BOOTSTRAP (host:port); without it the run fails rather than
skipping. The Rust test tests/tests/python_clients.rs starts Ottla and runs
this file; it also passes unchanged against real Apache Kafka:

    BOOTSTRAP=$(scripts/apache-kafka.sh start | tail -1)
    OTTLA_BOOTSTRAP=$BOOTSTRAP "$(scripts/python-env.sh | tail -1)" -m pytest tests/python
"""

import os
import uuid

import pytest

BOOTSTRAP = os.environ["OTTLA_BOOTSTRAP"]

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
N = 10


def fresh_topic(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def expected():
    # Compressible values: clients send a batch uncompressed when compression
    # would not make it smaller, and the codec would then go untested.
    return [(f"k{i}".encode(), f"v{i}-".encode() + b"x" * 1000) for i in range(N)]


def create_topic(topic, partitions=3):
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
    futures[topic].result(timeout=30)


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_kafka_roundtrip(codec):
    from confluent_kafka import Consumer, Producer

    topic = fresh_topic(f"ck-{codec}")
    create_topic(topic)
    producer = Producer(
        {"bootstrap.servers": BOOTSTRAP, "compression.type": codec, "linger.ms": 5, "acks": "all"}
    )
    delivered = []
    for key, value in expected():
        producer.produce(topic, value=value, key=key, on_delivery=lambda err, msg: delivered.append((err, msg)))
    assert producer.flush(30) == 0
    assert [err for err, _ in delivered] == [None] * N

    consumer = Consumer(
        {
            "bootstrap.servers": BOOTSTRAP,
            "group.id": fresh_topic("ck-group"),
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    got = []
    try:
        for _ in range(120):
            if len(got) >= N:
                break
            for msg in consumer.consume(num_messages=N, timeout=0.5):
                assert msg.error() is None, msg.error()
                got.append((msg.key(), msg.value()))
    finally:
        consumer.close()
    assert sorted(got) == sorted(expected())


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_roundtrip(codec):
    from kafka import KafkaConsumer, KafkaProducer

    topic = fresh_topic(f"kp-{codec}")
    create_topic(topic)
    producer = KafkaProducer(
        bootstrap_servers=BOOTSTRAP,
        compression_type=None if codec == "none" else codec,
        linger_ms=5,
        acks="all",
    )
    futures = [producer.send(topic, key=k, value=v) for k, v in expected()]
    producer.flush(timeout=30)
    offsets = [f.get(timeout=30) for f in futures]
    assert len(offsets) == N
    producer.close()

    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=BOOTSTRAP,
        group_id=fresh_topic("kp-group"),
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=30000,
    )
    got = []
    try:
        for msg in consumer:
            got.append((msg.key, msg.value))
            if len(got) >= N:
                break
    finally:
        consumer.close()
    assert sorted(got) == sorted(expected())


def test_duplicate_header_keys_survive_in_order():
    """KIP-82 headers are an ordered list: repeated keys must all come back."""
    from confluent_kafka import Producer
    from kafka import KafkaConsumer

    topic = fresh_topic("headers")
    create_topic(topic, partitions=1)
    headers = [("h", b"1"), ("h", b"2"), ("other", None), ("h", b"3")]
    producer = Producer({"bootstrap.servers": BOOTSTRAP})
    producer.produce(topic, key=b"k", value=b"v", headers=headers)
    assert producer.flush(30) == 0
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=BOOTSTRAP,
        auto_offset_reset="earliest",
        consumer_timeout_ms=30000,
    )
    try:
        msg = next(iter(consumer))
    finally:
        consumer.close()
    assert list(msg.headers) == headers
