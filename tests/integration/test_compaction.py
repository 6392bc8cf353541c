"""Log compaction seen by clients: a compacted topic converges to the latest value per key.

(a) Many updates of a few keys (some ending in a delete), then filler records with unique keys
    so the updates leave the active segment: once the cleaner has run, a fresh consumer from the
    beginning sees every key exactly once, with its latest value at the offset it was produced
    at, and the partition takes much less disk. Tombstones stay until delete.retention.ms has
    passed and a later pass runs, then they go too.
(b) Keyless records are refused on a compacted topic (INVALID_RECORD).
(c) ``__consumer_offsets`` is compacted too: a group committing the same partitions many times
    leaves about one record per partition behind.

Broker properties have the same names in Riverlog and Kafka (log.cleaner.backoff.ms ...), so
RIVERLOG_TEST_TARGET=kafka runs the same expectations against Apache Kafka.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from support.brokers import BrokerProcess
from support.clients import consume_range, create_topic, latest_offsets, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

SEGMENT_BYTES = 1024 * 1024  # Kafka 4.x's minimum segment.bytes
VALUE_BYTES = 1000
DELETE_RETENTION_MS = 1000
CLEANER = {
    "log.cleaner.backoff.ms": 200,
    "log.retention.check.interval.ms": 500,
    "log.segment.delete.delay.ms": 1000,
}


def partition_log_bytes(broker: BrokerProcess, topic: str, partition: int = 0) -> int:
    """Bytes of the partition's segment files on disk (not the renamed-away ``.deleted`` ones)."""
    directory = Path(broker.data_dir) / f"{topic}-{partition}"
    total = 0
    for name in os.listdir(directory):
        if name.endswith(".log"):
            with contextlib.suppress(FileNotFoundError):  # swapped away meanwhile
                total += (directory / name).stat().st_size
    return total


class _Writer:
    """An idempotent, compressing producer that remembers the offset of every record it wrote."""

    def __init__(self, bootstrap: str) -> None:
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                  "compression.codec": "lz4", "linger.ms": 5, "log_level": 3})
        self.offsets: dict[bytes, tuple[int, bytes | None]] = {}  # key -> (offset, value) of its last write
        self.failures: list[str] = []
        self.bytes = 0

    def send(self, topic: str, key: bytes, value: bytes | None) -> None:
        def delivered(err: Any, msg: Any) -> None:
            if err is not None:
                self.failures.append(str(err))
                return
            previous = self.offsets.get(key)
            if previous is None or previous[0] < msg.offset():
                self.offsets[key] = (msg.offset(), value)

        self.producer.produce(topic, key=key, value=value, partition=0, on_delivery=delivered)
        self.bytes += len(key) + len(value or b"")
        self.producer.poll(0)

    def flush(self) -> None:
        assert self.producer.flush(60) == 0, "records still queued after flush"
        assert not self.failures, self.failures[:5]


def _value(key: bytes, n: int) -> bytes:
    return b"%s=%08d|" % (key, n) + os.urandom(VALUE_BYTES // 2).hex().encode()[: VALUE_BYTES]


def _fillers(writer: _Writer, topic: str, tag: str, count: int) -> None:
    for i in range(count):
        key = f"filler-{tag}-{i:05d}".encode()
        writer.send(topic, key, _value(key, i))


def _read_all(bootstrap: str, topic: str) -> list[Any]:
    end = latest_offsets(bootstrap, topic, [0])[0]
    return consume_range(bootstrap, topic, {0: end}, timeout=60)[0]


def test_compacted_topic_keeps_the_latest_value_per_key(broker_factory: Any) -> None:
    broker: BrokerProcess = broker_factory(overrides=CLEANER)
    topic = "compacted-updates"
    create_topic(broker.bootstrap, topic, 1, config={
        "cleanup.policy": "compact",
        "segment.bytes": str(SEGMENT_BYTES),
        "min.cleanable.dirty.ratio": "0.01",
        "delete.retention.ms": str(DELETE_RETENTION_MS),
    })
    writer = _Writer(broker.bootstrap)
    keys = [f"user-{i:02d}".encode() for i in range(12)]
    deleted = set(keys[:3])
    updates = 3600
    for n in range(updates):
        key = keys[n % len(keys)]
        last_round = n >= updates - len(keys)
        writer.send(topic, key, None if last_round and key in deleted else _value(key, n))
    # Unique keys, so nothing of them is compacted; ~1.2 segments of them push every update out of
    # the active segment (the cleaner never touches the active segment).
    _fillers(writer, topic, "a", 1200)
    writer.flush()
    expected = dict(writer.offsets)
    assert {k for k, (_o, v) in expected.items() if v is None} == deleted

    def compacted() -> list[Any] | None:
        records = _read_all(broker.bootstrap, topic)
        seen: dict[bytes, Any] = {}
        for r in records:
            if r.key in seen:
                return None  # an older value of this key is still there: not cleaned yet
            seen[r.key] = r
        return records if set(seen) >= set(expected) - deleted else None

    records = wait_until(compacted, timeout=90, interval=1.0, message="every key seen exactly once")
    offsets = [r.offset for r in records]
    assert offsets == sorted(set(offsets))
    for r in records:
        # The latest value of the key, at the very offset it was produced at.
        assert (r.offset, r.value) == expected[r.key], r.key
    # A deleted key's tombstone may already be gone (a pass after delete.retention.ms), never
    # an older value of it.
    assert {r.key for r in records} - deleted == set(expected) - deleted
    size = partition_log_bytes(broker, topic)
    assert size < writer.bytes / 3, (size, writer.bytes)
    if broker.metrics_url is not None:  # Riverlog's Prometheus endpoint (Kafka has JMX instead)
        with urllib.request.urlopen(broker.metrics_url, timeout=10) as response:
            text = response.read().decode()
        cleaned = re.search(r"^riverlog_log_cleaner_cleaned_bytes_total (\S+)$", text, re.M)
        assert cleaned is not None and float(cleaned.group(1)) > SEGMENT_BYTES, text[-2000:]

    # Tombstones outlive delete.retention.ms only until the next pass: new data makes the log
    # dirty again, and that pass removes them (in Kafka too, which has no timer for them).
    time.sleep(DELETE_RETENTION_MS / 1000 + 0.5)
    _fillers(writer, topic, "b", 1200)
    writer.flush()
    wait_until(lambda: not deleted & {r.key for r in _read_all(broker.bootstrap, topic)}, timeout=90,
               interval=1.0, message="tombstones removed after delete.retention.ms")
    records = _read_all(broker.bootstrap, topic)
    assert {r.key: (r.offset, r.value) for r in records} == {
        k: v for k, v in writer.offsets.items() if k not in deleted}
    broker.assert_alive()


def test_keyless_records_are_refused_on_compacted_topics(broker: BrokerProcess) -> None:
    topic = "compacted-keyless"
    create_topic(broker.bootstrap, topic, 1, config={"cleanup.policy": "compact"})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "retries": 0, "log_level": 3})
    errors: list[Any] = []
    # Separate requests: a keyless record fails its whole batch.
    producer.produce(topic, value=b"no key", partition=0, on_delivery=lambda err, _m: errors.append(err))
    assert producer.flush(30) == 0
    producer.produce(topic, key=b"k", value=b"keyed", partition=0, on_delivery=lambda err, _m: errors.append(err))
    assert producer.flush(30) == 0
    codes = sorted((e.code() if e is not None else 0) for e in errors)
    assert codes == [0, KafkaError.INVALID_RECORD], errors
    records = _read_all(broker.bootstrap, topic)
    assert [(r.key, r.value) for r in records] == [(b"k", b"keyed")]


def test_consumer_offsets_is_compacted(broker_factory: Any) -> None:
    broker: BrokerProcess = broker_factory(overrides={
        **CLEANER,
        "offsets.topic.num.partitions": 1,
        "offsets.topic.segment.bytes": SEGMENT_BYTES,
        "log.cleaner.min.cleanable.ratio": "0.01",
    })
    topic = "committed"
    partitions = 50
    create_topic(broker.bootstrap, topic, partitions)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "many-commits",
                         "enable.auto.commit": False, "log_level": 3})
    commits = 1600
    try:
        for n in range(commits):
            consumer.commit(offsets=[TopicPartition(topic, p, n + 1) for p in range(partitions)],
                            asynchronous=False)
        written = latest_offsets(broker.bootstrap, "__consumer_offsets", [0])[0]
        assert written >= commits * partitions

        # Every commit record is well over 50 bytes: what was written spans several segments,
        # what remains is at most the active segment plus one record per partition.
        assert written * 50 > 3 * SEGMENT_BYTES
        wait_until(lambda: partition_log_bytes(broker, "__consumer_offsets") < 1.5 * SEGMENT_BYTES, timeout=90,
                   interval=1.0, message="__consumer_offsets compacted")
        committed = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)
        assert [tp.offset for tp in committed] == [commits] * partitions
    finally:
        consumer.close()

    # After a restart the group coordinator reloads the compacted partition: same offsets.
    broker.restart()
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "many-commits",
                         "enable.auto.commit": False, "log_level": 3})
    try:
        # Until the coordinator has loaded the partition, OffsetFetch answers NOT_COORDINATOR.
        committed = wait_until(
            lambda: consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10),
            timeout=60, interval=0.5, message="committed offsets after the restart")
        assert [tp.offset for tp in committed] == [commits] * partitions
    finally:
        consumer.close()
    broker.assert_alive()
