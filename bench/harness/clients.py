"""confluent-kafka (librdkafka) load: create topics, produce N records as fast as possible,
consume them back. The same client library and settings drive both systems."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

# Batches up to 1 MiB and a deep local queue: the producer, not its buffer, must be the limit.
PRODUCER_BASE: dict[str, Any] = {
    "batch.size": 1 << 20,
    "compression.type": "none",
    "queue.buffering.max.messages": 1_000_000,
    "queue.buffering.max.kbytes": 1 << 20,
    "log_level": 3,
}
CONSUMER_BASE: dict[str, Any] = {
    "group.id": "bench",
    "enable.auto.commit": False,
    "fetch.max.bytes": 50 << 20,
    "max.partition.fetch.bytes": 8 << 20,
    "log_level": 3,
}


def create_topics(bootstrap: str, topics: Mapping[str, int], replication: int = 1, timeout: float = 300.0,
                  config: Mapping[str, str] | None = None) -> None:
    """CreateTopics, one request per topic, then wait until metadata shows a leader for every
    partition. One request per topic because Kafka's controller refuses a single operation of
    more than 10,000 metadata records ("excessively large batch operation"), which W8's
    10,000 partitions in one request would be."""
    # log_level 2: a failure surfaces as the exception below; librdkafka's own error lines about
    # brokers of earlier runs that are gone would only clutter the progress log.
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 2})
    for name, count in topics.items():
        futures = admin.create_topics([NewTopic(name, count, replication, config=dict(config or {}))],
                                      operation_timeout=timeout, request_timeout=timeout)
        futures[name].result(timeout)
    deadline = time.monotonic() + timeout
    while True:
        meta = admin.list_topics(timeout=30)
        led = sum(
            1 for name in topics if name in meta.topics
            for p in meta.topics[name].partitions.values() if p.leader >= 0
        )
        if led == sum(topics.values()):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"only {led} of {sum(topics.values())} partitions have a leader")
        time.sleep(0.5)


def payload(size: int) -> bytes:
    # Random bytes: nothing along the path can shortcut incompressible data.
    return os.urandom(size)


def produce(bootstrap: str, topic: str, count: int, size: int, *, linger_ms: float, acks: str,
            timeout: float = 900.0, latencies: list[float] | None = None,
            conf: Mapping[str, str] | None = None) -> float:
    """Produce ``count`` records of ``size`` bytes; seconds from the first send to the last ack.
    ``latencies`` collects every record's send-to-ack time in seconds (librdkafka measures it);
    ``conf`` adds settings (TLS and SASL for a secured listener)."""
    producer = Producer({**PRODUCER_BASE, **(conf or {}), "bootstrap.servers": bootstrap, "acks": acks,
                         "linger.ms": linger_ms})
    value = payload(size)
    errors: list[str] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(str(err))
        elif latencies is not None:
            latencies.append(msg.latency() or 0.0)

    start = time.perf_counter()
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value=value, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.005)
        if i % 5000 == 0:
            producer.poll(0)
    remaining = producer.flush(timeout)
    elapsed = time.perf_counter() - start
    if remaining or errors:
        raise RuntimeError(f"{remaining} records undelivered; errors: {errors[:3]}")
    return elapsed


def produce_to_each(bootstrap: str, topic: str, partitions: int, *, acks: str, timeout: float = 900.0) -> None:
    """One acknowledged record in every partition: a topic's partitions have leaders in the
    metadata before every broker has created their logs and followers fetch them (Kafka applies
    the metadata asynchronously); an acks=all write to each shows that all of it is in place."""
    producer = Producer({**PRODUCER_BASE, "bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5})
    value = payload(64)
    errors: list[str] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(f"{topic}-{msg.partition()}: {err}")

    for p in range(partitions):
        producer.produce(topic, value=value, partition=p, on_delivery=delivered)
    if producer.flush(timeout):
        raise TimeoutError(f"not every partition of {topic} acknowledged a record within {timeout:.0f}s")
    if errors:
        raise RuntimeError(f"{len(errors)} partitions of {topic} refused a record: {errors[:3]}")


def consume_all(bootstrap: str, topic: str, partitions: int, count: int, timeout: float = 900.0,
                conf: Mapping[str, str] | None = None) -> float:
    """Read ``count`` records from offset 0 of every partition; seconds until the last one."""
    consumer = Consumer({**CONSUMER_BASE, **(conf or {}), "bootstrap.servers": bootstrap})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen = 0
    start = time.perf_counter()
    try:
        while seen < count:
            if time.perf_counter() - start > timeout:
                raise TimeoutError(f"consumed {seen} of {count} records in {timeout:.0f}s")
            for msg in consumer.consume(min(10_000, count - seen), 0.2):
                error = msg.error()
                if error is None:
                    seen += 1
                elif not error.retriable() and error.fatal():
                    raise KafkaException(error)
        return time.perf_counter() - start
    finally:
        consumer.close()


def wait_for_login(bootstrap: str, conf: Mapping[str, str], timeout: float) -> None:
    """Until a client with ``conf`` gets metadata from ``bootstrap`` (a new SCRAM user is known
    to the listener once the broker has applied its record)."""
    deadline = time.monotonic() + timeout
    while True:
        admin = AdminClient({**conf, "bootstrap.servers": bootstrap, "log_level": 0})
        try:
            admin.list_topics(timeout=5)
            return
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def produce_and_fetch_one(bootstrap: str, topic: str, timeout: float) -> None:
    """One acknowledged record, then that record read back: the broker serves both directions.
    Retries until ``timeout`` (a restarting broker refuses or times out at first)."""
    deadline = time.monotonic() + timeout
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, "log_level": 2,
                         "reconnect.backoff.ms": 20, "reconnect.backoff.max.ms": 100,
                         "message.timeout.ms": 5000, "topic.metadata.refresh.interval.ms": 200})
    offset: list[int] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is None:
            offset.append(msg.offset())

    while not offset:
        if time.monotonic() > deadline:
            raise TimeoutError("no acknowledged produce")
        producer.produce(topic, value=b"restart-probe", partition=0, on_delivery=delivered)
        producer.flush(6)
    consumer = Consumer({**CONSUMER_BASE, "bootstrap.servers": bootstrap, "log_level": 2})
    consumer.assign([TopicPartition(topic, 0, offset[0])])
    try:
        while True:
            if time.monotonic() > deadline:
                raise TimeoutError("acknowledged record not fetched")
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None and msg.offset() == offset[0]:
                return
    finally:
        consumer.close()
