"""Log start offset moves: time-based retention and DeleteRecords.

(a) With small segments and a short retention.ms, the broker's retention check deletes closed
    segments whose records are all older than retention.ms: ListOffsets(earliest) moves up to
    the base offset of a later segment, and reading from there still works.
(b) DeleteRecords moves the log start offset to exactly the requested offset. A consumer whose
    position is below it gets OFFSET_OUT_OF_RANGE: with auto.offset.reset=earliest it lands
    on the new start; with auto.offset.reset=error (librdkafka) the error reaches the app.
"""

from __future__ import annotations

import os
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource
from support.brokers import BrokerProcess
from support.clients import (
    admin,
    consume_range,
    create_topic,
    earliest_offsets,
    latest_offsets,
    wait_until,
)

pytestmark = [
    pytest.mark.integration,
    pytest.mark.timeout(180),
    # kafka-python 3.0.12 loads its protocol schemas through importlib.resources APIs that
    # Python deprecates; the noise says nothing about the broker.
    pytest.mark.filterwarnings("ignore:(read|open)_text is deprecated:DeprecationWarning"),
]

SEGMENT_BYTES = 1024 * 1024  # Kafka 4.x's minimum segment.bytes
RETENTION_MS = 3000


def produce(bootstrap: str, topic: str, count: int, size: int, *, partition: int = 0, start: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "log_level": 3})
    failures: list[str] = []
    for n in range(start, start + count):
        # Incompressible filler is irrelevant here (no codec); the number prefix identifies it.
        value = f"{n:08d}|".encode() + os.urandom(size)
        producer.produce(topic, value=value, partition=partition,
                         on_delivery=lambda err, _msg: failures.append(str(err)) if err else None)
        producer.poll(0)
    assert producer.flush(60) == 0, "records still queued after flush"
    assert not failures, failures[:5]


def test_time_retention_advances_log_start(broker_factory: Any) -> None:
    broker: BrokerProcess = broker_factory(overrides={"log.retention.check.interval.ms": 500})
    topic = "retention-time"
    create_topic(broker.bootstrap, topic, 1,
                 config={"segment.bytes": str(SEGMENT_BYTES), "retention.ms": str(RETENTION_MS)})

    # ~2.5 MiB in 1 MiB segments: at least two closed segments plus the active one.
    produce(broker.bootstrap, topic, 250, 10 * 1024)
    produced_end = latest_offsets(broker.bootstrap, topic, [0])[0]
    assert produced_end == 250

    # Closed segments expire retention.ms after their newest record; the active one never does.
    earliest = wait_until(
        lambda: earliest_offsets(broker.bootstrap, topic, [0])[0] or None,
        timeout=60,
        interval=0.5,
        message="ListOffsets(earliest) moving past 0 through time-based retention",
    )
    # Kafka rolls and deletes even the active segment once all its records have expired, so
    # the start may reach the end of the log (an empty log that keeps its offsets).
    assert 0 < earliest <= produced_end, earliest
    assert latest_offsets(broker.bootstrap, topic, [0])[0] == produced_end

    # Stop further expiry (a dynamic topic config change), then append a newer segment's worth:
    # offsets continue from the old end.
    retention = ConfigResource(
        "topic", topic,
        incremental_configs=[ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)],
    )
    ck_admin = admin(broker.bootstrap)
    for f in ck_admin.incremental_alter_configs([retention]).values():
        f.result(timeout=30)
    wait_until(
        lambda: next(iter(ck_admin.describe_configs([ConfigResource("topic", topic)]).values()))
        .result(timeout=10)["retention.ms"].value == "3600000",
        timeout=30,
        message="retention.ms raised",
    )
    produce(broker.bootstrap, topic, 5, 100, start=250)
    assert latest_offsets(broker.bootstrap, topic, [0])[0] == produced_end + 5

    # Reading from the new start works, and the first record there is the one at that offset.
    start = earliest_offsets(broker.bootstrap, topic, [0])[0]
    assert start >= earliest
    records = consume_range(broker.bootstrap, topic, {0: produced_end + 5}, timeout=60)[0]
    assert records and records[0].offset == start, records[:1]
    assert [r.offset for r in records] == list(range(start, produced_end + 5))
    assert all(r.value is not None and r.value.startswith(f"{r.offset:08d}|".encode()) for r in records)
    broker.assert_alive()


def _first_message(consumer: Consumer, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None:
            return msg
    raise AssertionError(f"no message or error event within {timeout:.0f}s")


def test_delete_records_moves_log_start(broker: BrokerProcess) -> None:
    topic = "retention-delete"
    create_topic(broker.bootstrap, topic, 2)
    for p in (0, 1):
        produce(broker.bootstrap, topic, 50, 100, partition=p)

    # confluent-kafka's AdminClient.delete_records on partition 0.
    # Keep the client referenced until the future resolves: a collected AdminClient is
    # destroyed along with its pending requests, and the future then never completes.
    ck_admin = admin(broker.bootstrap)
    futures = ck_admin.delete_records([TopicPartition(topic, 0, 20)], request_timeout=30)
    (result,) = [f.result(timeout=30) for f in futures.values()]
    assert result.low_watermark == 20, result.low_watermark

    # kafka-python's KafkaAdminClient.delete_records on partition 1.
    from kafka import TopicPartition as KpTopicPartition
    from kafka.admin import KafkaAdminClient

    kp_admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="retention-kafka-python")
    try:
        answer = kp_admin.delete_records({KpTopicPartition(topic, 1): 35}, timeout_ms=30000)
    finally:
        kp_admin.close()
    assert {tp.partition: (v["error_code"], v["low_watermark"]) for tp, v in answer.items()} == {1: (0, 35)}

    assert earliest_offsets(broker.bootstrap, topic, [0, 1]) == {0: 20, 1: 35}
    assert latest_offsets(broker.bootstrap, topic, [0, 1]) == {0: 50, 1: 50}

    # librdkafka, position 5 < 20, auto.offset.reset=earliest: silently resets to 20.
    base = {"bootstrap.servers": broker.bootstrap, "group.id": "riverlog-tests-unused",
            "enable.auto.commit": False, "log_level": 3}
    consumer = Consumer({**base, "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(topic, 0, 5)])
        msg = _first_message(consumer)
        assert msg.error() is None, msg.error()
        assert msg.offset() == 20 and msg.value().startswith(b"00000020|")
    finally:
        consumer.close()

    # auto.offset.reset=error: the OFFSET_OUT_OF_RANGE surfaces as an error event.
    consumer = Consumer({**base, "auto.offset.reset": "error"})
    try:
        consumer.assign([TopicPartition(topic, 0, 5)])
        msg = _first_message(consumer)
        err = msg.error()
        assert err is not None, f"expected an error event, got the record at offset {msg.offset()}"
        # librdkafka reports the broker's OFFSET_OUT_OF_RANGE as _AUTO_OFFSET_RESET ("fetch failed
        # due to requested offset not available on the broker: Broker: Offset out of range").
        assert err.code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE), err
        assert "out of range" in err.str().lower(), err
    finally:
        consumer.close()

    # kafka-python, position 10 < 35 on partition 1: reset to earliest lands on 35, and with
    # no reset policy the consumer raises OffsetOutOfRangeError.
    from kafka import KafkaConsumer
    from kafka.errors import OffsetOutOfRangeError

    tp = KpTopicPartition(topic, 1)
    kp = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False,
                       auto_offset_reset="earliest")
    try:
        kp.assign([tp])
        kp.seek(tp, 10)
        got = wait_until(lambda: kp.poll(timeout_ms=500).get(tp), timeout=30,
                         message="kafka-python reading after the reset")
        assert got[0].offset == 35 and got[0].value.startswith(b"00000035|")
    finally:
        kp.close()

    kp = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False,
                       auto_offset_reset="none")
    try:
        kp.assign([tp])
        kp.seek(tp, 10)
        with pytest.raises(OffsetOutOfRangeError):
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                kp.poll(timeout_ms=500)
    finally:
        kp.close()
    broker.assert_alive()
