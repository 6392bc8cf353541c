"""Log compaction of a topic written in transactions, seen by clients (issue #16).

(a) A transactional producer commits one value per key, then overwrites every key in a transaction
it aborts (more than a segment of it), then idempotent filler records with unique keys push all
of that out of the active segment. Once the cleaner has run, even a read_uncommitted consumer
sees no record of the aborted transaction, every key once with its committed value at the offset
it was written at (the aborted overwrites, later in the log, did not compact the committed values
away), and the disk the aborted transaction took is reclaimed. read_committed sees the same.
(b) ``__consumer_offsets``: a group's committed offset, then a transactional offset commit for the
    same partition that is aborted, then enough other commits to get both out of the active
    segment. After the cleaner has run and the broker restarted (the group coordinator reloads
    the compacted partition), the committed offset is still there: the aborted commit, later in
    the log, did not compact it away.

Broker properties have the same names in Riverlog and Kafka, so RIVERLOG_TEST_TARGET=kafka runs
the same expectations against Apache Kafka.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from support.brokers import BrokerProcess
from support.clients import create_topic, latest_offsets, wait_until
from support.txn_checks import READ_COMMITTED, READ_UNCOMMITTED, read_all, wait_stable

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

SEGMENT_BYTES = 1024 * 1024  # Kafka 4.x's minimum segment.bytes
VALUE_BYTES = 1000
DELETE_RETENTION_MS = 1000
CALL_TIMEOUT = 60.0
CLEANER = {
    "log.cleaner.backoff.ms": 200,
    "log.retention.check.interval.ms": 500,
    "log.segment.delete.delay.ms": 1000,
}


def partition_log_bytes(broker: BrokerProcess, topic: str) -> int:
    return partition_log_bytes_in(Path(broker.data_dir) / f"{topic}-0")


def partition_log_bytes_in(directory: Path) -> int:
    """Bytes of the partition's segment files on disk (not the renamed-away ``.deleted`` ones)."""
    total = 0
    for name in os.listdir(directory):
        if name.endswith(".log"):
            with contextlib.suppress(FileNotFoundError):  # swapped away meanwhile
                total += (directory / name).stat().st_size
    return total


def _value(tag: str, n: int) -> str:
    return f"{tag}-{n:06d}|" + os.urandom(VALUE_BYTES // 2).hex()[:VALUE_BYTES]


def test_aborted_transaction_is_compacted_away(broker_factory: Any) -> None:
    broker: BrokerProcess = broker_factory(overrides={
        **CLEANER,
        "group.initial.rebalance.delay.ms": 0,
        "offsets.topic.num.partitions": 1,
        "transaction.state.log.num.partitions": 1,
    })
    topic = "compacted-transactions"
    topics = {topic: 1}
    create_topic(broker.bootstrap, topic, 1, config={
        "cleanup.policy": "compact",
        "segment.bytes": str(SEGMENT_BYTES),
        "min.cleanable.dirty.ratio": "0.01",
        "delete.retention.ms": str(DELETE_RETENTION_MS),
    })
    keys = [f"user-{i:02d}" for i in range(12)]
    offsets: dict[str, int] = {}
    failures: list[str] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            failures.append(str(err))
        elif msg.value() is not None and not msg.value().startswith(b"aborted"):
            offsets[msg.key().decode()] = msg.offset()

    txn = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "compaction-txn",
                    "linger.ms": 5, "log_level": 3})
    txn.init_transactions(CALL_TIMEOUT)
    txn.begin_transaction()
    committed = {key: _value("committed", i) for i, key in enumerate(keys)}
    for key, value in committed.items():
        txn.produce(topic, key=key, value=value, partition=0, on_delivery=delivered)
    txn.commit_transaction(CALL_TIMEOUT)
    aborted_records = 1500  # ~1.5 MB: more than a segment
    txn.begin_transaction()
    for n in range(aborted_records):
        txn.produce(topic, key=keys[n % len(keys)], value=_value("aborted", n), partition=0, on_delivery=delivered)
    txn.flush(CALL_TIMEOUT)
    txn.abort_transaction(CALL_TIMEOUT)

    # Unique keys, so nothing of them is compacted: they push the transactions out of the active
    # segment (the cleaner never touches it).
    fillers = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "enable.idempotence": True,
                        "linger.ms": 5, "log_level": 3})
    expected = {key: (None, value) for key, value in committed.items()}
    for i in range(1200):
        key = f"filler-{i:05d}"
        value = _value("filler", i)
        expected[key] = (None, value)
        fillers.produce(topic, key=key, value=value, partition=0, on_delivery=delivered)
    assert fillers.flush(60) == 0 and txn.flush(60) == 0
    assert not failures, failures[:5]
    wait_stable(broker.bootstrap, topics)

    def cleaned() -> list[Any] | None:
        records = read_all(broker.bootstrap, topics, READ_UNCOMMITTED).records
        if any(r.value is not None and r.value.startswith("aborted") for r in records):
            return None
        return records

    records = wait_until(cleaned, timeout=90, interval=1.0, message="aborted records compacted away")
    got = {r.key: (r.offset, r.value) for r in records}
    assert len(got) == len(records), "every key once"
    assert got == {key: (offsets[key], value) for key, (_o, value) in expected.items()}
    view = read_all(broker.bootstrap, topics, READ_COMMITTED).records
    assert [(r.key, r.offset, r.value) for r in view] == [(r.key, r.offset, r.value) for r in records]
    # About 2.8 MB were written; the aborted transaction's 1.5 MB is gone from disk, what is
    # left is mostly the fillers' 1.2 MB.
    size = partition_log_bytes(broker, topic)
    assert size < 1.8 * SEGMENT_BYTES, size
    broker.assert_alive()


def test_aborted_transactional_offset_commit_is_compacted_away(broker_factory: Any) -> None:
    broker: BrokerProcess = broker_factory(overrides={
        **CLEANER,
        "group.initial.rebalance.delay.ms": 0,
        "offsets.topic.num.partitions": 1,
        "offsets.topic.segment.bytes": SEGMENT_BYTES,
        "log.cleaner.min.cleanable.ratio": "0.01",
        "transaction.state.log.num.partitions": 1,
    })
    topic = "offsets-source"
    partitions = 50
    create_topic(broker.bootstrap, topic, partitions)
    group = "compacted-txn-offsets"
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False,
                         "log_level": 3})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, 10)], asynchronous=False)
        txn = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "compaction-offsets",
                        "log_level": 3})
        txn.init_transactions(CALL_TIMEOUT)
        txn.begin_transaction()
        txn.send_offsets_to_transaction([TopicPartition(topic, 0, 20)], consumer.consumer_group_metadata(),
                                        CALL_TIMEOUT)
        txn.abort_transaction(CALL_TIMEOUT)
        # Commits of the other partitions: several segments of them, one record per partition left
        # once compacted.
        commits = 800
        for n in range(commits):
            consumer.commit(offsets=[TopicPartition(topic, p, n + 1) for p in range(1, partitions)],
                            asynchronous=False)
        written = latest_offsets(broker.bootstrap, "__consumer_offsets", [0])[0]
        assert written * 50 > 1.5 * SEGMENT_BYTES, written  # records are well over 50 bytes
        directory = Path(broker.data_dir) / "__consumer_offsets-0"
        wait_until(lambda: partition_log_bytes_in(directory) < 1.5 * SEGMENT_BYTES, timeout=90, interval=1.0,
                   message="__consumer_offsets compacted")
        committed = consumer.committed([TopicPartition(topic, 0)], timeout=30)
        assert [tp.offset for tp in committed] == [10]
    finally:
        consumer.close()

    # The group coordinator reloads the compacted partition: the aborted commit is gone, the
    # committed offset is still there.
    broker.restart()
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False,
                         "log_level": 3})
    try:
        committed = wait_until(lambda: consumer.committed([TopicPartition(topic, p) for p in (0, 1)], timeout=10),
                               timeout=60, interval=0.5, message="committed offsets after the restart")
        assert [tp.offset for tp in committed] == [10, commits]
    finally:
        consumer.close()
    broker.assert_alive()
