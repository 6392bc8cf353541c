"""Schemas of the KIP-848 consumer group APIs: ConsumerGroupHeartbeat (68), ConsumerGroupDescribe (69).

kafka-python vendors no JSON for these, so besides the shared round trips the wire bytes are
checked against encodings written out by hand from Kafka 4.3's message specs.
"""

from __future__ import annotations

import uuid

import pytest
from riverlog.protocol.api_keys import ApiKey
from riverlog.protocol.messages import MESSAGES, consumer_group_describe, consumer_group_heartbeat
from riverlog.protocol.schema import MAX_VERSION, Message
from support import protocol_crosscheck as crosscheck
from support.protocol_samples import roundtrip

pytestmark = pytest.mark.unit

MODULES = [consumer_group_heartbeat, consumer_group_describe]
MESSAGES_HERE: list[Message] = [m for mod in MODULES for m in (mod.REQUEST, mod.RESPONSE)]
EXPECTED = {
    ApiKey.CONSUMER_GROUP_HEARTBEAT: ((0, 1), (0, MAX_VERSION)),
    ApiKey.CONSUMER_GROUP_DESCRIBE: ((0, 1), (0, MAX_VERSION)),
}
CASES = crosscheck.cases(MESSAGES_HERE)

test_version_ranges = crosscheck.version_ranges_test(MODULES, EXPECTED)
test_roundtrip_populated = crosscheck.roundtrip_populated_test(CASES)
test_roundtrip_nulls = crosscheck.roundtrip_nulls_test(CASES)
test_missing_keys_take_defaults = crosscheck.missing_keys_take_defaults_test(CASES)


def test_registered_by_api_key() -> None:
    assert MESSAGES[ApiKey.CONSUMER_GROUP_HEARTBEAT] == (consumer_group_heartbeat.REQUEST,
                                                         consumer_group_heartbeat.RESPONSE)
    assert MESSAGES[ApiKey.CONSUMER_GROUP_DESCRIBE] == (consumer_group_describe.REQUEST,
                                                        consumer_group_describe.RESPONSE)


def test_heartbeat_request_golden_bytes_v1() -> None:
    topic = uuid.UUID(int=1)
    value = {
        "group_id": "g", "member_id": "m", "member_epoch": 0, "instance_id": None, "rack_id": "r",
        "rebalance_timeout_ms": 300000, "subscribed_topic_names": ["t"], "subscribed_topic_regex": None,
        "server_assignor": None, "topic_partitions": [{"topic_id": topic, "partitions": [2]}],
    }
    expected = (
        b"\x02g" + b"\x02m" + b"\x00\x00\x00\x00"  # group id, member id, epoch 0
        + b"\x00" + b"\x02r"  # instance id null, rack id "r"
        + b"\x00\x04\x93\xe0"  # rebalance timeout 300000
        + b"\x02\x02t"  # one subscribed topic
        + b"\x00"  # regex null (v1+)
        + b"\x00"  # server assignor null
        + b"\x02" + topic.bytes + b"\x02\x00\x00\x00\x02" + b"\x00"  # owned: topic id, [2], no tags
        + b"\x00"  # no tagged fields
    )
    assert consumer_group_heartbeat.REQUEST.encode(value, 1) == expected
    assert consumer_group_heartbeat.REQUEST.decode(expected, 1) == value
    # Version 0 has no regex field: one byte shorter, and it decodes as null.
    v0 = consumer_group_heartbeat.REQUEST.encode({**value, "subscribed_topic_regex": "x.*"}, 0)
    assert len(v0) == len(expected) - 1
    assert consumer_group_heartbeat.REQUEST.decode(v0, 0)["subscribed_topic_regex"] is None


def test_heartbeat_response_null_and_present_assignment() -> None:
    base = {"member_id": "m", "member_epoch": 3, "heartbeat_interval_ms": 5000}
    without = consumer_group_heartbeat.RESPONSE.encode({**base, "assignment": None}, 1)
    # throttle, error, message null, member id, epoch, interval, assignment null (int8 -1), tags
    assert without == b"\x00" * 4 + b"\x00\x00" + b"\x00" + b"\x02m" + b"\x00\x00\x00\x03" \
        + b"\x00\x00\x13\x88" + b"\xff" + b"\x00"
    topic = uuid.UUID(int=7)
    body = roundtrip(consumer_group_heartbeat.RESPONSE, 1,
                     {**base, "assignment": {"topic_partitions": [{"topic_id": topic, "partitions": [0, 1]}]}})
    assert body["assignment"] == {"topic_partitions": [{"topic_id": topic, "partitions": [0, 1]}]}


def test_describe_member_type_only_in_v1() -> None:
    member = {"member_id": "m", "member_epoch": 2, "client_id": "c", "client_host": "/h",
              "subscribed_topic_names": ["t"], "member_type": 1,
              "assignment": {"topic_partitions": []}, "target_assignment": {"topic_partitions": []}}
    group = {"group_id": "g", "group_state": "Stable", "group_epoch": 2, "assignment_epoch": 2,
             "assignor_name": "uniform", "members": [member]}
    v1 = roundtrip(consumer_group_describe.RESPONSE, 1, {"groups": [group]})
    assert v1["groups"][0]["members"][0]["member_type"] == 1
    v0 = roundtrip(consumer_group_describe.RESPONSE, 0, {"groups": [group]})
    assert v0["groups"][0]["members"][0]["member_type"] == -1
    assert v0["groups"][0]["authorized_operations"] == -(2**31)
