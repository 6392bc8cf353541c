"""What a transaction test checks from the outside, with confluent-kafka (librdkafka).

- :func:`read_all`: every record a consumer of one isolation level can read, from the
  beginning to the end that consumer is allowed to reach; librdkafka reports that end as
  "partition EOF", which for ``read_committed`` is the last stable offset (an open transaction
  holds it back) and for ``read_uncommitted`` the high watermark;
- :func:`end_offsets`: ListOffsets(latest) per isolation level (read_committed: the LSO);
- :func:`wait_stable`: until no transaction is open on the partitions, i.e. until the LSO has
  caught up with the high watermark. ``commitTransaction`` returns once the coordinator has
  decided, and the markers reach the partitions just after, so a test waits for this before it
  reads what a transaction left behind.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    ConsumerGroupTopicPartitions,
    IsolationLevel,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka.admin import OffsetSpec

from support.clients import admin, wait_until

READ_COMMITTED = "read_committed"
READ_UNCOMMITTED = "read_uncommitted"

# The module-scoped broker of the transaction tests: no rebalance delay, small internal topics.
TXN_BROKER_SETTINGS: dict[str, object] = {
    "group.initial.rebalance.delay.ms": 0,
    "offsets.topic.num.partitions": 3,
    "transaction.state.log.num.partitions": 3,
}

# How long a test waits for the markers of a finished transaction to reach its partitions.
STABLE_TIMEOUT = 60.0

Topics = Mapping[str, int]  # topic -> partition count


@dataclass(frozen=True)
class Rec:
    topic: str
    partition: int
    offset: int
    key: str | None
    value: str | None


@dataclass(frozen=True)
class ReadResult:
    records: list[Rec]
    ends: dict[tuple[str, int], int]  # where the consumer hit the end (partition EOF)

    def values(self, topic: str | None = None, partition: int | None = None) -> list[str | None]:
        return [r.value for r in self.records
                if (topic is None or r.topic == topic) and (partition is None or r.partition == partition)]

    def offsets(self, topic: str, partition: int) -> list[int]:
        return [r.offset for r in self.records if r.topic == topic and r.partition == partition]


def _partitions(topics: Topics) -> list[tuple[str, int]]:
    return [(topic, p) for topic, count in topics.items() for p in range(count)]


def read_all(bootstrap: str, topics: Topics, isolation: str, *, timeout: float = 60.0) -> ReadResult:
    """Read every partition from its beginning until librdkafka reports its end (EOF)."""
    settings: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": "riverlog-txn-checks-unused",  # assign() never joins it
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "isolation.level": isolation,
        "log_level": 3,
    }
    consumer = ConfluentConsumer(settings)
    records: list[Rec] = []
    ends: dict[tuple[str, int], int] = {}
    todo = set(_partitions(topics))
    try:
        consumer.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t, p in todo])
        deadline = time.monotonic() + timeout
        while todo:
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{isolation} consumer did not reach the end of {sorted(todo)} within {timeout:.0f}s; "
                    f"read {len(records)} records"
                )
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
            assert topic is not None and partition is not None and offset is not None
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    ends[(topic, partition)] = offset
                    todo.discard((topic, partition))
                    continue
                raise KafkaException(err)
            key, value = msg.key(), msg.value()
            records.append(Rec(topic, partition, offset,
                               None if key is None else bytes(key).decode(),
                               None if value is None else bytes(value).decode()))
    finally:
        consumer.close()
    return ReadResult(records, ends)


def end_offsets(bootstrap: str, topics: Topics, isolation: str, *, timeout: float = 30.0) -> dict[tuple[str, int], int]:
    level = IsolationLevel.READ_COMMITTED if isolation == READ_COMMITTED else IsolationLevel.READ_UNCOMMITTED
    request = {TopicPartition(t, p): OffsetSpec.latest() for t, p in _partitions(topics)}
    # Keep the client referenced until the futures resolve: a collected AdminClient never
    # completes them.
    client = admin(bootstrap)
    futures = client.list_offsets(request, isolation_level=level, request_timeout=timeout)
    return {(tp.topic, tp.partition): fut.result(timeout=timeout).offset for tp, fut in futures.items()}


def wait_stable(bootstrap: str, topics: Topics, *, timeout: float = STABLE_TIMEOUT) -> dict[tuple[str, int], int]:
    """Wait until no transaction is open on any partition of ``topics`` (LSO == high watermark);
    returns the end offsets then."""

    def stable() -> dict[tuple[str, int], int] | None:
        committed = end_offsets(bootstrap, topics, READ_COMMITTED)
        uncommitted = end_offsets(bootstrap, topics, READ_UNCOMMITTED)
        return uncommitted if committed == uncommitted else None

    return wait_until(stable, timeout=timeout, interval=0.3,
                      message=f"no open transaction on {dict(topics)} (LSO == high watermark)")


def wait_end_offsets(bootstrap: str, topics: Topics, expected: Mapping[tuple[str, int], int], *,
                     timeout: float = STABLE_TIMEOUT) -> None:
    """Wait until the high watermarks are ``expected`` (records and markers written)."""
    wait_until(lambda: end_offsets(bootstrap, topics, READ_UNCOMMITTED) == dict(expected),
               timeout=timeout, interval=0.3, message=f"high watermarks {dict(expected)}")


def group_offsets(bootstrap: str, group: str, *, timeout: float = 30.0) -> dict[tuple[str, int], int]:
    """The group's committed offsets, asked with require_stable (KIP-447) so pending
    transactional offsets are never taken for committed ones."""
    client = admin(bootstrap)  # referenced until the future resolves (see end_offsets)
    futures = client.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group)], require_stable=True, request_timeout=timeout)
    result = futures[group].result(timeout=timeout)
    out: dict[tuple[str, int], int] = {}
    for tp in result.topic_partitions:
        if tp.error is not None:
            raise KafkaException(tp.error)
        out[(tp.topic, tp.partition)] = tp.offset
    return out
