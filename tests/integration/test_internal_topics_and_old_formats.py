"""Internal topics and pre-v2 record formats, answered as Kafka 4 answers them (run with
RIVERLOG_TEST_TARGET=kafka to see Kafka give the same answers).

What Kafka 4's broker does, found by running these tests against it:

- Clients may create, grow and delete ``__consumer_offsets`` (and the other internal topics) like
  any topic, by name or by id, before or after the broker made it; only ``kafka-topics.sh``
  refuses some of that, on the client side. ``__cluster_metadata`` is not a topic: creating it is
  INVALID_REQUEST, by CreateTopics or by Metadata's auto-creation.
- Clients may not produce to an internal topic: INVALID_TOPIC_EXCEPTION, without a message
  (unless their client id is ``__admin_client``).
- Produce v3+ takes exactly one record batch of magic 2 per partition: message sets of magic 0
  or 1 (or several batches, or no whole batch) are INVALID_RECORD, without a message; entries
  shorter than a magic-0 message or of an unknown magic are CORRUPT_MESSAGE. Produce v0-2 is not
  answered at all: the broker closes the connection.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import time
import uuid
import zlib
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from riverlog.client.connection import BrokerConnection
from riverlog.protocol.api_keys import ApiKey
from riverlog.protocol.errors import ErrorCode
from riverlog.protocol.primitives import ZERO_UUID
from riverlog.protocol.record_batch import NewRecord, build_batch
from support.brokers import BrokerProcess
from support.clients import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

OFFSETS = "__consumer_offsets"
METADATA_LOG = "__cluster_metadata"
# Kafka's test properties make the offsets topic 3 partitions; Riverlog defaults to Kafka's 50.
SETTINGS = {"offsets.topic.num.partitions": "3", "auto.create.topics.enable": "true"}


@pytest.fixture(scope="module")
def shared(module_broker_factory: Any) -> BrokerProcess:
    """One broker for the tests that never touch ``__consumer_offsets``."""
    broker: BrokerProcess = module_broker_factory(overrides=SETTINGS)
    return broker


# --- requests ---------------------------------------------------------------------------------


def call(broker: BrokerProcess, api: ApiKey, body: dict[str, Any], version: int | None = None,
         *, client_id: str = "riverlog-tests") -> dict[str, Any]:
    async def run() -> dict[str, Any]:
        conn = await BrokerConnection.connect(broker.host, broker.port, client_id=client_id)
        try:
            return await conn.request(api, body, version)
        finally:
            await conn.close()

    return asyncio.run(run())


def create(broker: BrokerProcess, *names: str, partitions: int = -1, validate_only: bool = False,
           version: int | None = None) -> list[dict[str, Any]]:
    topics = [{"name": n, "num_partitions": partitions, "replication_factor": -1 if partitions == -1 else 1,
               "assignments": [], "configs": []} for n in names]
    response = call(broker, ApiKey.CREATE_TOPICS,
                    {"topics": topics, "timeout_ms": 15_000, "validate_only": validate_only}, version)
    by_name = {t["name"]: t for t in response["topics"]}
    return [by_name[n] for n in names]


def delete(broker: BrokerProcess, *, name: str | None = None, topic_id: uuid.UUID | None = None,
           version: int | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"timeout_ms": 15_000}
    if version is not None and version < 6:
        body["topic_names"] = [name]
    else:
        body["topics"] = [{"name": name, "topic_id": topic_id or ZERO_UUID}]
    (result,) = call(broker, ApiKey.DELETE_TOPICS, body, version)["responses"]
    return result


def grow(broker: BrokerProcess, name: str, count: int, *, validate_only: bool = False) -> dict[str, Any]:
    (result,) = call(broker, ApiKey.CREATE_PARTITIONS, {
        "topics": [{"name": name, "count": count, "assignments": None}], "timeout_ms": 15_000,
        "validate_only": validate_only})["results"]
    return result


def describe(broker: BrokerProcess, name: str, *, auto_create: bool = False) -> dict[str, Any]:
    (topic,) = call(broker, ApiKey.METADATA, {"topics": [{"name": name}],
                                              "allow_auto_topic_creation": auto_create})["topics"]
    return topic


def create_ready(broker: BrokerProcess, name: str, *, may_exist: bool = False) -> None:
    """A one-partition topic, created (or already there, if ``may_exist``) and known to Metadata."""
    (made,) = create(broker, name, partitions=1)
    assert made["error_code"] in ((ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS) if may_exist
                                  else (ErrorCode.NONE,)), made
    wait_until(lambda: describe(broker, name)["partitions"], timeout=15)


def produce(broker: BrokerProcess, topic: str, records: bytes, *, partition: int = 0, version: int = 12,
            topic_id: uuid.UUID | None = None, client_id: str = "riverlog-tests") -> dict[str, Any]:
    named = {"topic_id": topic_id} if version >= 13 else {"name": topic}
    response = call(broker, ApiKey.PRODUCE, {
        "acks": 1, "timeout_ms": 15_000,
        "topic_data": [{**named, "partition_data": [{"index": partition, "records": records}]}]},
        version, client_id=client_id)
    (result,) = response["responses"][0]["partition_responses"]
    return result


def outcome(result: dict[str, Any]) -> tuple[int, str | None]:
    return result["error_code"], result.get("error_message")


# --- record formats, written by hand -----------------------------------------------------------


def legacy_message(magic: int, key: bytes | None, value: bytes | None) -> bytes:
    """One entry of a magic 0 or 1 message set: offset, size, then CRC-32 (IEEE) over magic,
    attributes, (v1: timestamp), key and value."""
    body = struct.pack(">bb", magic, 0)
    if magic == 1:
        body += struct.pack(">q", 1_700_000_000_000)
    for part in (key, value):
        body += struct.pack(">i", -1) if part is None else struct.pack(">i", len(part)) + part
    message = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", 0, len(message)) + message


def v2_batch(value: bytes = b"v") -> bytes:
    return build_batch([NewRecord(value, b"k", [], 1_700_000_000_000)])


def raw_produce_frame(version: int, topic: str, records: bytes) -> bytes:
    """A Produce v0-2 request (the codec encodes only v3+): header v1, then acks, timeout and
    topics -> partitions -> records."""
    client_id = b"riverlog-tests"
    body = struct.pack(">hhih", ApiKey.PRODUCE, version, 41, len(client_id)) + client_id
    body += struct.pack(">hii", 1, 15_000, 1) + struct.pack(">h", len(topic)) + topic.encode()
    body += struct.pack(">iii", 1, 0, len(records)) + records
    return struct.pack(">i", len(body)) + body


def send_and_read_until_closed(broker: BrokerProcess, frame: bytes, timeout: float = 15.0) -> bytes | None:
    """Everything the broker sends back before closing the connection; None if it keeps the
    connection open for ``timeout`` seconds."""
    with socket.create_connection((broker.host, broker.port), timeout=timeout) as sock:
        sock.sendall(frame)
        received = b""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                return None
            except ConnectionResetError:
                return received
            if not chunk:
                return received
            received += chunk
        return None


# --- __consumer_offsets -------------------------------------------------------------------------


def commit_and_read(broker: BrokerProcess, group: str, topic: str, offset: int) -> int:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False,
                         "log_level": 3})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
        (committed,) = consumer.committed([TopicPartition(topic, 0)], timeout=15)
        return int(committed.offset)
    finally:
        consumer.close()


def test_clients_may_create_grow_and_delete_the_offsets_topic(broker_factory: Any) -> None:
    broker: BrokerProcess = broker_factory(overrides=SETTINGS)
    # A fresh broker, before any group: the offsets topic does not exist yet.
    assert describe(broker, OFFSETS)["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    (checked,) = create(broker, OFFSETS, validate_only=True)
    assert (checked["error_code"], checked["num_partitions"]) == (ErrorCode.NONE, 1)
    assert describe(broker, OFFSETS)["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    gone = delete(broker, name=OFFSETS)
    assert gone["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert "does not host this topic" in gone["error_message"]
    assert grow(broker, OFFSETS, 5)["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    # A client creates it, with its own partition count: the broker takes it as the offsets topic.
    (made,) = create(broker, OFFSETS, partitions=1)
    assert (made["error_code"], made["num_partitions"]) == (ErrorCode.NONE, 1)
    for validate_only in (True, False):
        (again,) = create(broker, OFFSETS, partitions=1, validate_only=validate_only)
        assert outcome(again) == (ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{OFFSETS}' already exists.")
    topic = describe(broker, OFFSETS)
    assert topic["is_internal"] and len(topic["partitions"]) == 1
    assert grow(broker, OFFSETS, 2, validate_only=True)["error_code"] == ErrorCode.NONE
    assert len(describe(broker, OFFSETS)["partitions"]) == 1
    assert grow(broker, OFFSETS, 2)["error_code"] == ErrorCode.NONE
    wait_until(lambda: len(describe(broker, OFFSETS)["partitions"]) == 2, timeout=15)
    assert grow(broker, OFFSETS, 1)["error_code"] == ErrorCode.INVALID_PARTITIONS

    (plain,) = create(broker, "committed-to", partitions=1)
    assert plain["error_code"] == ErrorCode.NONE
    wait_until(lambda: describe(broker, "committed-to")["partitions"], timeout=15)
    assert commit_and_read(broker, "g-client-made", "committed-to", 7) == 7
    # Clients may not write into it themselves, whatever its partitions hold.
    assert outcome(produce(broker, OFFSETS, v2_batch())) == (ErrorCode.INVALID_TOPIC_EXCEPTION, None)

    # Deleted by id, it is gone by name too.
    topic_id = describe(broker, OFFSETS)["topic_id"]
    deleted = delete(broker, topic_id=topic_id)
    assert (deleted["name"], deleted["topic_id"], deleted["error_code"]) == (OFFSETS, topic_id, ErrorCode.NONE)
    wait_until(lambda: describe(broker, OFFSETS)["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
               timeout=15)
    assert delete(broker, name=OFFSETS, version=5)["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    # The broker makes it again, its own way, the next time a group needs it.
    assert commit_and_read(broker, "g-broker-made", "committed-to", 3) == 3
    topic = describe(broker, OFFSETS)
    assert topic["is_internal"] and len(topic["partitions"]) == 3 and topic["topic_id"] != topic_id
    assert delete(broker, name=OFFSETS)["error_code"] == ErrorCode.NONE


# --- __cluster_metadata -------------------------------------------------------------------------


def test_the_metadata_log_is_not_a_topic_clients_can_create(shared: BrokerProcess) -> None:
    refused = (ErrorCode.INVALID_REQUEST, f"Creation of internal topic {METADATA_LOG} is prohibited.")
    for version in (4, None):
        for validate_only in (True, False):
            (result,) = create(shared, METADATA_LOG, validate_only=validate_only, version=version)
            assert outcome(result) == refused
    # Refused alone: the other topics of the request are created.
    result, beside = create(shared, METADATA_LOG, "beside-the-metadata-log", partitions=1)
    assert outcome(result) == refused and beside["error_code"] == ErrorCode.NONE
    # Nor does Metadata's auto-creation make it.
    for _ in range(2):
        assert describe(shared, METADATA_LOG, auto_create=True)["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        time.sleep(0.5)
    assert delete(shared, name=METADATA_LOG)["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert grow(shared, METADATA_LOG, 2)["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    listed = call(shared, ApiKey.METADATA, {"topics": None, "allow_auto_topic_creation": False})["topics"]
    assert METADATA_LOG not in {t["name"] for t in listed}
    assert describe(shared, "beside-the-metadata-log")["error_code"] == ErrorCode.NONE


# --- produce ------------------------------------------------------------------------------------


def test_clients_cannot_produce_to_internal_topics(shared: BrokerProcess) -> None:
    names = ("__transaction_state", "__share_group_state", "__not-internal")
    assert [r["error_code"] for r in create(shared, *names, partitions=1)] == [ErrorCode.NONE] * 3
    for name in names:
        wait_until(lambda name=name: describe(shared, name)["partitions"], timeout=15)
    # Metadata marks Kafka's internal topics as such, not every name that starts with "__".
    assert [describe(shared, name)["is_internal"] for name in names] == [True, True, False]
    for name in names[:2]:
        for version in (3, 9, 12):
            result = produce(shared, name, v2_batch(), version=version)
            assert (outcome(result), result["base_offset"]) == ((ErrorCode.INVALID_TOPIC_EXCEPTION, None), -1)
        # The record format is checked first.
        assert outcome(produce(shared, name, legacy_message(1, b"k", b"v"))) == (ErrorCode.INVALID_RECORD, None)
    assert outcome(produce(shared, "__not-internal", v2_batch())) == (ErrorCode.NONE, None)
    # Kafka's own admin client id may write there.
    admin = produce(shared, "__transaction_state", v2_batch(), client_id="__admin_client")
    assert (admin["error_code"], admin["base_offset"]) == (ErrorCode.NONE, 0)


def test_old_record_formats_and_extra_batches_are_invalid_records(shared: BrokerProcess) -> None:
    topic = "record-formats"
    create_ready(shared, topic)
    topic_id = describe(shared, topic)["topic_id"]
    invalid = (ErrorCode.INVALID_RECORD, None)
    for magic in (0, 1):
        one = legacy_message(magic, b"k", b"v")
        for version in (3, 8, 9, 12):
            assert outcome(produce(shared, topic, one, version=version)) == invalid, (magic, version)
        assert outcome(produce(shared, topic, one, version=13, topic_id=topic_id)) == invalid
        assert outcome(produce(shared, topic, legacy_message(magic, None, b""))) == invalid
        assert outcome(produce(shared, topic, one + legacy_message(magic, b"k2", b"v2"))) == invalid
        assert outcome(produce(shared, topic, one[:-3])) == invalid  # no whole entry
        # Which partition comes first; the format before the leader is even looked at.
        assert produce(shared, topic, one, partition=7)["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    # One batch per partition, whatever the formats.
    good = v2_batch()
    assert outcome(produce(shared, topic, good + good)) == invalid
    assert outcome(produce(shared, topic, good + legacy_message(1, b"k", b"v"))) == invalid
    assert outcome(produce(shared, topic, legacy_message(0, b"k", b"v") + good)) == invalid
    assert outcome(produce(shared, topic, good[:-1])) == invalid
    # Entries no message format allows are corrupt, with Kafka's reasons.
    tiny = struct.pack(">qi", 0, 10) + bytes(10)
    code, message = outcome(produce(shared, topic, tiny))
    assert code == ErrorCode.CORRUPT_MESSAGE and "less than the minimum record overhead" in (message or "")
    magic3 = bytearray(legacy_message(1, b"k", b"v"))
    magic3[16] = 3
    code, message = outcome(produce(shared, topic, bytes(magic3)))
    assert code == ErrorCode.CORRUPT_MESSAGE and "Invalid magic found in record: 3" in (message or "")
    # Nothing refused reached the log.
    result = produce(shared, topic, good)
    assert (result["error_code"], result["base_offset"]) == (ErrorCode.NONE, 0)


def test_produce_v0_to_v2_gets_the_connection_closed(shared: BrokerProcess) -> None:
    topic = "record-formats-v0-v2"
    create_ready(shared, topic)
    # Kafka closes the connection without a word (and so does Riverlog).
    for version in (0, 1, 2):
        for records in (legacy_message(1, b"k", b"v"), v2_batch()):
            received = send_and_read_until_closed(shared, raw_produce_frame(version, topic, records))
            assert received is not None, f"Produce v{version}: the connection stayed open"
            assert received == b"", f"Produce v{version} was answered: {received.hex()}"
    # Nothing was stored.
    result = produce(shared, topic, v2_batch())
    assert (result["error_code"], result["base_offset"]) == (ErrorCode.NONE, 0)


def test_records_of_internal_topics_cannot_be_deleted(shared: BrokerProcess) -> None:
    create_ready(shared, "__transaction_state", may_exist=True)
    # An existing partition of an internal topic is refused; one the metadata does not know is
    # unknown first, as Kafka checks in that order.
    for topic, partition, code in (("__transaction_state", 0, ErrorCode.INVALID_TOPIC_EXCEPTION),
                                   ("__transaction_state", 9, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)):
        result = call(shared, ApiKey.DELETE_RECORDS, {"topics": [{"name": topic, "partitions": [
            {"partition_index": partition, "offset": 0}]}], "timeout_ms": 5000})
        (answer,) = result["topics"][0]["partitions"]
        assert (answer["error_code"], answer["low_watermark"]) == (code, -1), (topic, partition)


def test_zstd_needs_produce_v7(shared: BrokerProcess) -> None:
    """KIP-110: ZStandard came with Produce v7; an older request using it is refused for that
    partition with UNSUPPORTED_COMPRESSION_TYPE, and nothing is appended."""
    create_ready(shared, "zstd-versions", may_exist=True)
    zstd = build_batch([NewRecord(b"squeezed", b"k", [], 1_700_000_000_000)], compression=4)
    for version in (3, 6):
        assert produce(shared, "zstd-versions", zstd, version=version)["error_code"] == \
            ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, version
    first = produce(shared, "zstd-versions", zstd, version=7)
    assert (first["error_code"], first["base_offset"]) == (ErrorCode.NONE, 0)  # the refused ones took no offset
    assert produce(shared, "zstd-versions", v2_batch(), version=6)["error_code"] == ErrorCode.NONE


def test_one_create_topics_may_not_ask_for_more_than_10000_partitions(shared: BrokerProcess) -> None:
    """Kafka's MAX_PARTITIONS_PER_BATCH: the whole request is refused, every topic with
    POLICY_VIOLATION, nothing created; and its bound of 10,000 records per request."""
    too_many = call(shared, ApiKey.CREATE_TOPICS, {"topics": [
        {"name": name, "num_partitions": count, "replication_factor": 1, "assignments": [], "configs": []}
        for name, count in (("huge-a", 6000), ("huge-b", 4001))], "timeout_ms": 15_000, "validate_only": False})
    assert [(t["name"], t["error_code"], t["error_message"]) for t in too_many["topics"]] == [
        (name, ErrorCode.POLICY_VIOLATION, "Excessively large number of partitions per request.")
        for name in ("huge-a", "huge-b")]
    assert describe(shared, "huge-a")["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    def validate(count: int) -> tuple[int, str | None]:
        (topic,) = call(shared, ApiKey.CREATE_TOPICS, {"topics": [
            {"name": "huge-c", "num_partitions": count, "replication_factor": 1, "assignments": [], "configs": []}],
            "timeout_ms": 15_000, "validate_only": True})["topics"]
        return topic["error_code"], topic["error_message"]

    assert validate(9_000) == (ErrorCode.NONE, None)
    # 10,000 partitions pass the count but not Kafka's bound on records per request (a topic
    # record and one per partition: 10,001), validate-only as well.
    assert validate(10_000) == (ErrorCode.POLICY_VIOLATION, "Unable to perform excessively large batch operation.")
