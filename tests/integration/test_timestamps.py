"""Timestamps: LogAppendTime topics stamp records with the broker's clock; ListOffsets finds the
record with the largest timestamp (MAX_TIMESTAMP) and the first at or after a given time."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

pytestmark = pytest.mark.integration


def consume_all(bootstrap: str, topic: str, count: int) -> list:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "ts", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    out = []
    deadline = time.monotonic() + 30
    while len(out) < count and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            out.append(msg)
    consumer.close()
    assert len(out) == count
    return out


def list_offset(admin: AdminClient, topic: str, spec: OffsetSpec) -> tuple[int, int]:
    tp = TopicPartition(topic, 0)
    info = admin.list_offsets({tp: spec}, request_timeout=15)[tp].result(15)
    return info.offset, info.timestamp


def test_log_append_time_and_max_timestamp(broker_factory) -> None:
    broker = broker_factory()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.create_topics([
        NewTopic("appended", 1, 1, config={"message.timestamp.type": "LogAppendTime"}),
        NewTopic("created", 1, 1),
    ])
    for fut in futures.values():
        fut.result(15)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    old = int(time.time() * 1000) - 3_600_000  # an hour ago: within Kafka's default skew limits
    before = int(time.time() * 1000)
    for i in range(3):
        producer.produce("appended", value=b"a%d" % i, timestamp=old + i)
    # Out of order create times: the largest is the second record.
    for i, ts in enumerate([old + 10, old + 50, old + 20]):
        producer.produce("created", value=b"c%d" % i, timestamp=ts)
    assert producer.flush(15) == 0
    after = int(time.time() * 1000)

    for msg in consume_all(broker.bootstrap, "appended", 3):
        kind, ts = msg.timestamp()
        assert kind == TIMESTAMP_LOG_APPEND_TIME
        assert before - 1000 <= ts <= after + 1000, (before, ts, after)  # the broker's clock, not old
    created = consume_all(broker.bootstrap, "created", 3)
    assert [m.timestamp() for m in created] == [(TIMESTAMP_CREATE_TIME, t) for t in (old + 10, old + 50, old + 20)]

    assert list_offset(admin, "created", OffsetSpec.max_timestamp()) == (1, old + 50)
    assert list_offset(admin, "created", OffsetSpec.for_timestamp(old + 15))[0] == 1
    assert list_offset(admin, "created", OffsetSpec.for_timestamp(old + 51))[0] == -1
    assert list_offset(admin, "created", OffsetSpec.earliest())[0] == 0
    assert list_offset(admin, "created", OffsetSpec.latest())[0] == 3
    # On the LogAppendTime topic lookups use the broker-assigned times.
    assert list_offset(admin, "appended", OffsetSpec.for_timestamp(old))[0] == 0
    assert list_offset(admin, "appended", OffsetSpec.for_timestamp(after + 60_000))[0] == -1
