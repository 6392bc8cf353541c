"""Client-side helpers for integration tests, built on confluent-kafka (librdkafka).

Everything here is bounded in time: a broker that never answers makes a test fail with a clear
message instead of hanging.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

T = TypeVar("T")


def wait_until(
    probe: Callable[[], T | None],
    *,
    timeout: float,
    interval: float = 0.2,
    message: str = "condition not met",
) -> T:
    """Call ``probe`` until it returns something truthy, at most ``timeout`` seconds.

    Exceptions from the probe count as "not yet" (a broker coming up refuses connections), but
    the last one is reported if time runs out.
    """
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    last_value: object = None
    while True:
        try:
            value = probe()
            if value:
                return value
            last_value = value
        except Exception as exc:  # the probe's failure is "not yet"; reported below if final
            last_error = exc
        if time.monotonic() >= deadline:
            raise AssertionError(
                f"{message} within {timeout:.0f}s (last value {last_value!r}, last error {last_error!r})"
            )
        time.sleep(interval)


def group_type(bootstrap: str, group: str) -> Any:
    """The type ListGroups gives ``group`` (a ConsumerGroupType: CLASSIC or CONSUMER), None if
    it is not listed."""
    client = admin(bootstrap)  # held while its future is awaited (a dropped handle fails it)
    listed = client.list_consumer_groups(request_timeout=15).result(20)
    return next((g.type for g in listed.valid if g.group_id == group), None)


def admin(bootstrap: str, **conf: object) -> AdminClient:
    settings: dict[str, Any] = {"bootstrap.servers": bootstrap, "log_level": 3}
    settings.update(conf)
    return AdminClient(settings)


def create_topic(
    bootstrap: str,
    topic: str,
    partitions: int,
    config: Mapping[str, str] | None = None,
    *,
    timeout: float = 30.0,
) -> None:
    """Create a topic and wait until metadata shows a leader for every partition."""
    client = admin(bootstrap)
    futures = client.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1, config=dict(config or {}))],
        operation_timeout=timeout,
        request_timeout=timeout,
    )
    futures[topic].result(timeout=timeout)
    wait_for_leaders(bootstrap, topic, partitions, timeout=timeout)


def wait_for_leaders(bootstrap: str, topic: str, partitions: int, *, timeout: float = 30.0) -> None:
    client = admin(bootstrap)

    def ready() -> bool:
        md = client.list_topics(topic=topic, timeout=5)
        meta = md.topics.get(topic)
        if meta is None or meta.error is not None or len(meta.partitions) != partitions:
            return False
        return all(p.leader >= 0 and p.error is None for p in meta.partitions.values())

    wait_until(ready, timeout=timeout, message=f"topic {topic} with {partitions} led partitions")


def list_offsets(
    bootstrap: str, topic: str, partitions: Iterable[int], spec: OffsetSpec, *, timeout: float = 30.0
) -> dict[int, int]:
    """ListOffsets through the admin API; -1 (no such offset) is returned as is."""
    client = admin(bootstrap)
    request = {TopicPartition(topic, p): spec for p in partitions}
    futures = client.list_offsets(request, request_timeout=timeout)
    return {tp.partition: fut.result(timeout=timeout).offset for tp, fut in futures.items()}


def earliest_offsets(bootstrap: str, topic: str, partitions: Iterable[int]) -> dict[int, int]:
    return list_offsets(bootstrap, topic, partitions, OffsetSpec.earliest())


def latest_offsets(bootstrap: str, topic: str, partitions: Iterable[int]) -> dict[int, int]:
    return list_offsets(bootstrap, topic, partitions, OffsetSpec.latest())


@dataclass(frozen=True)
class Record:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int


def consume_range(
    bootstrap: str,
    topic: str,
    end_offsets: Mapping[int, int],
    *,
    start_offsets: Mapping[int, int] | None = None,
    timeout: float = 60.0,
    conf: Mapping[str, object] | None = None,
) -> dict[int, list[Record]]:
    """Read each partition from its start (default: the beginning) up to ``end_offsets``.

    Uses manual assignment and no commits: no consumer group is needed on the broker (librdkafka
    insists on a group.id setting, but assign() never joins the group).
    """
    settings: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": "riverlog-tests-unused",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "log_level": 3,
    }
    settings.update(conf or {})
    consumer = Consumer(settings)
    out: dict[int, list[Record]] = {p: [] for p in end_offsets}
    try:
        todo = {p for p, end in end_offsets.items() if end > (start_offsets or {}).get(p, 0)}
        consumer.assign(
            [
                TopicPartition(topic, p, (start_offsets or {}).get(p, OFFSET_BEGINNING))
                for p in end_offsets
            ]
        )
        deadline = time.monotonic() + timeout
        while todo:
            if time.monotonic() > deadline:
                got = {p: len(v) for p, v in out.items()}
                raise AssertionError(
                    f"timed out reading {topic}: wanted up to {dict(end_offsets)}, got counts {got}"
                )
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    continue
                raise KafkaException(err)
            p, offset = msg.partition(), msg.offset()
            assert p is not None and offset is not None, "a record without partition or offset"
            if offset >= end_offsets[p]:
                todo.discard(p)
                continue
            out[p].append(
                Record(
                    partition=p,
                    offset=offset,
                    key=msg.key(),
                    value=msg.value(),
                    headers=_headers(msg),
                    timestamp=msg.timestamp()[1],
                )
            )
            if offset + 1 >= end_offsets[p]:
                todo.discard(p)
    finally:
        consumer.close()
    return out


def _headers(msg: Any) -> tuple[tuple[str, bytes | None], ...]:
    # librdkafka hands headers over as a list of (name, bytes-or-None) pairs, in wire order.
    return tuple((str(name), value) for name, value in (msg.headers() or ()))


def group_values(conf: dict[str, Any], topic: str, group: str, count: int, timeout: float = 60.0) -> list[bytes]:
    """The first ``count`` values a new consumer group reads from ``topic`` (from the earliest
    offset), with the given client configuration (bootstrap, security)."""
    consumer = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < count and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
    finally:
        consumer.close()
    return got



def create_produce_consume(bootstrap: str, settings: Mapping[str, Any], topic: str, count: int = 5) -> None:
    """Create ``topic``, produce ``count`` records and read them back through a consumer group,
    all with ``settings`` (a secured listener's librdkafka settings): the listener serves."""
    conf = {"bootstrap.servers": bootstrap, **settings}
    admin = AdminClient(conf)  # held while its future is awaited: a dropped handle fails it (_DESTROY)
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer = Producer(conf)
    for i in range(count):
        producer.produce(topic, f"{topic}-{i}".encode())
    assert producer.flush(30) == 0
    assert group_values(conf, topic, topic, count) == [f"{topic}-{i}".encode() for i in range(count)]
