"""Schemas of the KIP-932 share-group APIs: ShareGroupHeartbeat (76), ShareGroupDescribe (77),
ShareFetch (78), ShareAcknowledge (79), the share-state RPCs (83-87) and the share-group offset
admin calls (90-92).

kafka-python vendors no JSON for these, so the schemas are compared with the JSON specs inside
Kafka 4.3's kafka-clients jar (the release the Kafka test target runs), and a few wire encodings
are checked against bytes written out by hand from those specs.
"""

from __future__ import annotations

import uuid

import pytest
from riverlog.protocol.api_keys import ApiKey
from riverlog.protocol.messages import (
    MESSAGES,
    alter_share_group_offsets,
    delete_share_group_offsets,
    delete_share_group_state,
    describe_share_group_offsets,
    initialize_share_group_state,
    read_share_group_state,
    read_share_group_state_summary,
    share_acknowledge,
    share_fetch,
    share_group_describe,
    share_group_heartbeat,
    write_share_group_state,
)
from riverlog.protocol.schema import MAX_VERSION, Message
from support import protocol_crosscheck as crosscheck
from support.protocol_samples import roundtrip

pytestmark = pytest.mark.unit

MODULES = [
    share_group_heartbeat,
    share_group_describe,
    share_fetch,
    share_acknowledge,
    initialize_share_group_state,
    read_share_group_state,
    write_share_group_state,
    delete_share_group_state,
    read_share_group_state_summary,
    describe_share_group_offsets,
    alter_share_group_offsets,
    delete_share_group_offsets,
]
MESSAGES_HERE: list[Message] = [m for mod in MODULES for m in (mod.REQUEST, mod.RESPONSE)]
FLEX = (0, MAX_VERSION)
EXPECTED = {
    ApiKey.SHARE_GROUP_HEARTBEAT: ((1, 1), FLEX),
    ApiKey.SHARE_GROUP_DESCRIBE: ((1, 1), FLEX),
    ApiKey.SHARE_FETCH: ((1, 2), FLEX),
    ApiKey.SHARE_ACKNOWLEDGE: ((1, 2), FLEX),
    ApiKey.INITIALIZE_SHARE_GROUP_STATE: ((0, 0), FLEX),
    ApiKey.READ_SHARE_GROUP_STATE: ((0, 0), FLEX),
    ApiKey.WRITE_SHARE_GROUP_STATE: ((0, 1), FLEX),
    ApiKey.DELETE_SHARE_GROUP_STATE: ((0, 0), FLEX),
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: ((0, 1), FLEX),
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: ((0, 1), FLEX),
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: ((0, 0), FLEX),
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: ((0, 0), FLEX),
}
CASES = crosscheck.cases(MESSAGES_HERE)

test_version_ranges = crosscheck.version_ranges_test(MODULES, EXPECTED)
test_schema_matches_kafka_json = crosscheck.schema_matches_kafka_json_test(MESSAGES_HERE)
test_roundtrip_populated = crosscheck.roundtrip_populated_test(CASES)
test_roundtrip_nulls = crosscheck.roundtrip_nulls_test(CASES)
test_missing_keys_take_defaults = crosscheck.missing_keys_take_defaults_test(CASES)


@pytest.mark.parametrize("mod", MODULES, ids=lambda mod: mod.__name__.rsplit(".", 1)[-1])
def test_registered_by_api_key(mod: object) -> None:
    request: Message = mod.REQUEST  # type: ignore[attr-defined]
    response: Message = mod.RESPONSE  # type: ignore[attr-defined]
    assert MESSAGES[request.api_key] == (request, response)


def test_share_group_heartbeat_request_golden_bytes() -> None:
    value = {"group_id": "g", "member_id": "m", "member_epoch": 0, "rack_id": None,
             "subscribed_topic_names": ["t"]}
    expected = (
        b"\x02g" + b"\x02m" + b"\x00\x00\x00\x00"  # group id, member id, epoch 0 (join)
        + b"\x00"  # rack id null
        + b"\x02\x02t"  # one subscribed topic
        + b"\x00"  # no tagged fields
    )
    assert share_group_heartbeat.REQUEST.encode(value, 1) == expected
    assert share_group_heartbeat.REQUEST.decode(expected, 1) == value


def test_share_fetch_request_golden_bytes_v1_and_v2() -> None:
    topic = uuid.UUID(int=5)
    value = {
        "group_id": "g", "member_id": "m", "share_session_epoch": 1, "max_wait_ms": 500,
        "min_bytes": 1, "max_bytes": 0x7FFFFFFF, "max_records": 500, "batch_size": 500,
        "share_acquire_mode": 1, "is_renew_ack": True,
        "topics": [{"topic_id": topic, "partitions": [{
            "partition_index": 0, "partition_max_bytes": 0,
            "acknowledgement_batches": [{"first_offset": 3, "last_offset": 4, "acknowledge_types": [1, 2]}],
        }]}],
        "forgotten_topics_data": [],
    }
    v1 = (
        b"\x02g" + b"\x02m" + b"\x00\x00\x00\x01"  # group, member, session epoch 1
        + b"\x00\x00\x01\xf4" + b"\x00\x00\x00\x01" + b"\x7f\xff\xff\xff"  # wait, min, max bytes
        + b"\x00\x00\x01\xf4" + b"\x00\x00\x01\xf4"  # max records, batch size (v1+)
        + b"\x02" + topic.bytes  # one topic
        + b"\x02" + b"\x00\x00\x00\x00"  # one partition, index 0 (no partition max bytes after v0)
        + b"\x02" + (3).to_bytes(8, "big") + (4).to_bytes(8, "big") + b"\x03\x01\x02" + b"\x00"
        + b"\x00"  # partition's tags
        + b"\x00"  # topic's tags
        + b"\x01"  # no forgotten topics
        + b"\x00"
    )
    assert share_fetch.REQUEST.encode(value, 1) == v1
    decoded = share_fetch.REQUEST.decode(v1, 1)
    assert (decoded["share_acquire_mode"], decoded["is_renew_ack"]) == (0, False)
    # Version 2 puts the acquire mode and the renew flag after the batch size.
    v2 = share_fetch.REQUEST.encode(value, 2)
    at = v1.index(topic.bytes) - 1
    assert v2 == v1[:at] + b"\x01\x01" + v1[at:]
    assert share_fetch.REQUEST.decode(v2, 2) == value


def test_share_fetch_response_acquired_records_and_lock_timeout() -> None:
    topic = uuid.UUID(int=9)
    part = {"partition_index": 1, "error_code": 0, "acknowledge_error_code": 0,
            "current_leader": {"leader_id": 2, "leader_epoch": 7}, "records": b"",
            "acquired_records": [{"first_offset": 10, "last_offset": 19, "delivery_count": 2}]}
    body = roundtrip(share_fetch.RESPONSE, 1, {"acquisition_lock_timeout_ms": 30000,
                                               "responses": [{"topic_id": topic, "partitions": [part]}]})
    assert body["acquisition_lock_timeout_ms"] == 30000
    got = body["responses"][0]["partitions"][0]
    assert got["acquired_records"] == [{"first_offset": 10, "last_offset": 19, "delivery_count": 2}]
    assert got["current_leader"] == {"leader_id": 2, "leader_epoch": 7}


def test_share_acknowledge_lock_timeout_only_from_v2() -> None:
    value = {"acquisition_lock_timeout_ms": 15000, "responses": [], "node_endpoints": []}
    assert roundtrip(share_acknowledge.RESPONSE, 2, value)["acquisition_lock_timeout_ms"] == 15000
    assert roundtrip(share_acknowledge.RESPONSE, 1, value)["acquisition_lock_timeout_ms"] == 0


def test_write_share_group_state_delivery_complete_count_from_v1() -> None:
    topic = uuid.UUID(int=3)
    batch = {"first_offset": 0, "last_offset": 4, "delivery_state": 2, "delivery_count": 1}
    part = {"partition": 0, "state_epoch": 1, "leader_epoch": 0, "start_offset": 5,
            "delivery_complete_count": 3, "state_batches": [batch]}
    value = {"group_id": "g", "topics": [{"topic_id": topic, "partitions": [part]}]}
    assert roundtrip(write_share_group_state.REQUEST, 1, value) == value
    v0 = roundtrip(write_share_group_state.REQUEST, 0, value)
    assert v0["topics"][0]["partitions"][0]["delivery_complete_count"] == -1


def test_describe_share_group_offsets_null_topics_means_all() -> None:
    value = {"groups": [{"group_id": "g", "topics": None}]}
    encoded = describe_share_group_offsets.REQUEST.encode(value, 1)
    assert encoded == b"\x02" + b"\x02g" + b"\x00" + b"\x00" + b"\x00"  # one group, null topics
    assert describe_share_group_offsets.REQUEST.decode(encoded, 1) == value
