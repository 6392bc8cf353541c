"""Schemas of the consumer-group APIs: FindCoordinator, JoinGroup, Heartbeat, LeaveGroup,
SyncGroup, DescribeGroups, ListGroups, OffsetCommit, OffsetFetch, DeleteGroups, OffsetDelete.

For every valid version of every request and response, the shared checks of ``protocol_crosscheck``
(round trips; the schema against Kafka's JSON; the wire bytes against kafka-python's JSON-driven
codec, both ways, and against the hand-written legacy classes), then what is particular to these APIs.
"""

from __future__ import annotations

import uuid

import pytest
from riverlog.protocol.api_keys import ApiKey
from riverlog.protocol.messages import (
    delete_groups,
    describe_groups,
    find_coordinator,
    heartbeat,
    join_group,
    leave_group,
    list_groups,
    offset_commit,
    offset_delete,
    offset_fetch,
    sync_group,
)
from riverlog.protocol.schema import MAX_VERSION, NO_VERSIONS, Message
from support import protocol_crosscheck as crosscheck
from support.protocol_samples import roundtrip

pytestmark = [
    pytest.mark.unit,
    # kafka-python 3.0.12 loads its JSON with importlib.resources' deprecated functions.
    pytest.mark.filterwarnings("ignore:(read|open)_text is deprecated:DeprecationWarning"),
]

MODULES = [
    find_coordinator,
    join_group,
    heartbeat,
    leave_group,
    sync_group,
    describe_groups,
    list_groups,
    offset_commit,
    offset_fetch,
    delete_groups,
    offset_delete,
]
MESSAGES: list[Message] = [m for mod in MODULES for m in (mod.REQUEST, mod.RESPONSE)]

# Kafka 4.x's valid and flexible versions (KIP-896 removed OffsetCommit v0-1 and OffsetFetch v0;
# JoinGroup v0-1 were removed in 4.0.0 and restored in 4.0.1, KAFKA-19444).
EXPECTED = {
    ApiKey.FIND_COORDINATOR: ((0, 6), (3, MAX_VERSION)),
    ApiKey.JOIN_GROUP: ((0, 9), (6, MAX_VERSION)),
    ApiKey.HEARTBEAT: ((0, 4), (4, MAX_VERSION)),
    ApiKey.LEAVE_GROUP: ((0, 5), (4, MAX_VERSION)),
    ApiKey.SYNC_GROUP: ((0, 5), (4, MAX_VERSION)),
    ApiKey.DESCRIBE_GROUPS: ((0, 6), (5, MAX_VERSION)),
    ApiKey.LIST_GROUPS: ((0, 5), (3, MAX_VERSION)),
    ApiKey.OFFSET_COMMIT: ((2, 10), (8, MAX_VERSION)),
    ApiKey.OFFSET_FETCH: ((1, 10), (6, MAX_VERSION)),
    ApiKey.DELETE_GROUPS: ((0, 2), (2, MAX_VERSION)),
    ApiKey.OFFSET_DELETE: ((0, 0), NO_VERSIONS),
}

# The versions the legacy (hand-written) classes cross-check, within the valid ranges.
LEGACY_COVERAGE = {
    "FindCoordinator": range(0, 3),
    "JoinGroup": range(0, 6),
    "Heartbeat": range(0, 4),
    "LeaveGroup": range(0, 4),
    "SyncGroup": range(0, 4),
    "DescribeGroups": range(0, 4),
    "ListGroups": range(0, 3),
    "OffsetCommit": range(2, 8),
    "OffsetFetch": range(1, 6),
    "DeleteGroups": range(0, 2),
}


CASES = crosscheck.cases(MESSAGES)


# --- shape ------------------------------------------------------------------------------------

test_version_ranges = crosscheck.version_ranges_test(MODULES, EXPECTED)
test_schema_matches_kafka_json = crosscheck.schema_matches_kafka_json_test(MESSAGES)


# --- round trips ------------------------------------------------------------------------------

test_roundtrip_populated = crosscheck.roundtrip_populated_test(CASES)
test_roundtrip_nulls = crosscheck.roundtrip_nulls_test(CASES)
test_missing_keys_take_defaults = crosscheck.missing_keys_take_defaults_test(CASES)


# --- specifics --------------------------------------------------------------------------------


def test_find_coordinator_single_and_batched() -> None:
    v0 = roundtrip(find_coordinator.REQUEST, 0, {"key": "g", "key_type": 1})
    assert v0 == {"key": "g", "key_type": 0, "coordinator_keys": []}  # v0 knows groups only
    v4 = roundtrip(find_coordinator.REQUEST, 4, {"key_type": 1, "coordinator_keys": ["a", "b"]})
    assert v4 == {"key": "", "key_type": 1, "coordinator_keys": ["a", "b"]}
    resp = roundtrip(find_coordinator.RESPONSE, 0, {"node_id": 1, "host": "h", "port": 9092})
    assert resp["error_message"] == "" and resp["throttle_time_ms"] == 0  # both absent in v0
    coordinator = {"key": "a", "node_id": 1, "host": "h", "port": 9092, "error_code": 0, "error_message": None}
    resp = roundtrip(find_coordinator.RESPONSE, 6, {"coordinators": [coordinator]})
    assert resp["coordinators"] == [coordinator] and resp["host"] == ""


def test_join_group_versions() -> None:
    base = {"group_id": "g", "session_timeout_ms": 10000, "member_id": "", "protocol_type": "consumer"}
    protocols = [{"name": "range", "metadata": b"\x00\x01"}]
    v0 = roundtrip(join_group.REQUEST, 0, {**base, "rebalance_timeout_ms": 5, "protocols": protocols})
    # No rebalance timeout on the wire in version 0 (the session timeout stands in); no static
    # membership before version 5, no reason before version 8: all decode as their null defaults.
    assert v0["rebalance_timeout_ms"] == -1
    assert v0["group_instance_id"] is None and v0["reason"] is None
    assert v0["protocols"] == protocols
    v5 = roundtrip(join_group.REQUEST, 5, {**base, "group_instance_id": "i-1"})
    assert v5["group_instance_id"] == "i-1" and v5["reason"] is None
    v8 = roundtrip(join_group.REQUEST, 8, {**base, "reason": "rebalance"})
    assert v8["group_instance_id"] is None and v8["reason"] == "rebalance"
    resp = roundtrip(join_group.RESPONSE, 6, {"members": [{"member_id": "m", "metadata": b""}]})
    assert resp["generation_id"] == -1 and resp["protocol_type"] is None
    assert resp["members"][0]["group_instance_id"] is None
    assert roundtrip(join_group.RESPONSE, 7, {"protocol_name": None})["protocol_name"] is None
    assert roundtrip(join_group.RESPONSE, 9, {"skip_assignment": True})["skip_assignment"] is True


def test_join_group_v6_golden_bytes() -> None:
    # Compact (flexible) encoding, written out by hand from the spec.
    value = {
        "group_id": "g",
        "session_timeout_ms": 45000,
        "rebalance_timeout_ms": 300000,
        "member_id": "",
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b"\x01\x02"}],
    }
    expected = (
        b"\x02g"  # group_id: compact string, length + 1
        + b"\x00\x00\xaf\xc8"  # session_timeout_ms 45000
        + b"\x00\x04\x93\xe0"  # rebalance_timeout_ms 300000
        + b"\x01"  # member_id ""
        + b"\x00"  # group_instance_id null
        + b"\x09consumer"
        + b"\x02"  # protocols: 1 element
        + b"\x06range\x03\x01\x02\x00"  # name, metadata (compact bytes), no tagged fields
        + b"\x00"  # no tagged fields
    )
    assert join_group.REQUEST.encode(value, 6) == expected
    assert join_group.REQUEST.decode(expected, 6) == {**value, "reason": None}


def test_heartbeat_and_sync_group() -> None:
    hb = roundtrip(heartbeat.REQUEST, 2, {"group_id": "g", "generation_id": 3, "member_id": "m"})
    assert hb["group_instance_id"] is None
    assert heartbeat.REQUEST.encode({"group_id": "g", "generation_id": 3, "member_id": "m"}, 4) == (
        b"\x02g\x00\x00\x00\x03\x02m\x00\x00"
    )
    sync = roundtrip(sync_group.REQUEST, 4, {"assignments": [{"member_id": "m", "assignment": b"a"}]})
    assert sync["protocol_type"] is None and sync["protocol_name"] is None
    resp = roundtrip(sync_group.RESPONSE, 5, {"protocol_type": "consumer", "protocol_name": "range"})
    assert (resp["protocol_type"], resp["protocol_name"], resp["assignment"]) == ("consumer", "range", b"")


def test_leave_group_single_and_batched() -> None:
    v2 = roundtrip(leave_group.REQUEST, 2, {"group_id": "g", "member_id": "m"})
    assert v2 == {"group_id": "g", "member_id": "m", "members": []}
    v5 = roundtrip(leave_group.REQUEST, 5, {"group_id": "g", "members": [{"member_id": "m", "reason": "bye"}]})
    assert v5["members"] == [{"member_id": "m", "group_instance_id": None, "reason": "bye"}]
    assert v5["member_id"] == ""
    v3 = roundtrip(leave_group.REQUEST, 3, {"group_id": "g", "members": [{"member_id": "m", "reason": "bye"}]})
    assert v3["members"] == [{"member_id": "m", "group_instance_id": None, "reason": None}]


def test_describe_and_list_groups() -> None:
    resp = roundtrip(describe_groups.RESPONSE, 3, {"groups": [{"group_id": "g", "members": [{}]}]})
    group = resp["groups"][0]
    assert group["authorized_operations"] == -(2**31)
    assert group["error_message"] is None
    assert group["members"][0]["group_instance_id"] is None
    resp = roundtrip(describe_groups.RESPONSE, 6, {"groups": [{"error_code": 69, "error_message": "gone"}]})
    assert resp["groups"][0]["error_message"] == "gone"
    req = roundtrip(list_groups.REQUEST, 5, {"states_filter": ["Stable"], "types_filter": ["classic"]})
    assert req == {"states_filter": ["Stable"], "types_filter": ["classic"]}
    assert list_groups.REQUEST.encode({}, 0) == b""
    assert list_groups.REQUEST.encode({}, 3) == b"\x00"


def test_offset_commit_versions() -> None:
    partition = {"partition_index": 0, "committed_offset": 42, "committed_metadata": None}
    v2 = roundtrip(offset_commit.REQUEST, 2, {"group_id": "g", "topics": [{"name": "t", "partitions": [partition]}]})
    assert v2["retention_time_ms"] == -1 and v2["generation_id_or_member_epoch"] == -1
    assert v2["topics"][0]["partitions"][0] == {**partition, "committed_leader_epoch": -1, "commit_timestamp": -1}
    v5 = roundtrip(offset_commit.REQUEST, 5, {"retention_time_ms": 1000})
    assert v5["retention_time_ms"] == -1  # gone from the wire in version 5
    tid = uuid.uuid4()
    v10 = roundtrip(offset_commit.REQUEST, 10, {"topics": [{"name": "t", "topic_id": tid, "partitions": []}]})
    assert v10["topics"] == [{"name": "", "topic_id": tid, "partitions": []}]
    resp = roundtrip(offset_commit.RESPONSE, 10, {"topics": [{"topic_id": tid, "partitions": [{"error_code": 22}]}]})
    assert resp["topics"][0]["partitions"] == [{"partition_index": 0, "error_code": 22}]


def test_offset_fetch_single_group_and_batched() -> None:
    # Versions 2-7: null topics means every topic; version 1 can't say null.
    assert roundtrip(offset_fetch.REQUEST, 2, {"group_id": "g", "topics": None})["topics"] is None
    assert offset_fetch.REQUEST.encode({"group_id": "g", "topics": None}, 1) == b"\x00\x01g\x00\x00\x00\x00"
    v7 = roundtrip(offset_fetch.REQUEST, 7, {"group_id": "g", "topics": [{"name": "t", "partition_indexes": [0]}]})
    assert v7["require_stable"] is False and v7["groups"] == []
    group = {"group_id": "g", "topics": None}
    v9 = roundtrip(offset_fetch.REQUEST, 9, {"groups": [group], "require_stable": True})
    assert v9["groups"] == [{"group_id": "g", "member_id": None, "member_epoch": -1, "topics": None}]
    assert v9["group_id"] == "" and v9["topics"] == [] and v9["require_stable"] is True
    tid = uuid.uuid4()
    v10 = roundtrip(offset_fetch.REQUEST, 10, {"groups": [{"topics": [{"topic_id": tid, "partition_indexes": [1]}]}]})
    assert v10["groups"][0]["topics"] == [{"name": "", "topic_id": tid, "partition_indexes": [1]}]
    partition = {"partition_index": 0, "committed_offset": 5, "metadata": None, "error_code": 0}
    v4 = roundtrip(offset_fetch.RESPONSE, 4, {"topics": [{"name": "t", "partitions": [partition]}], "error_code": 16})
    assert v4["topics"][0]["partitions"][0] == {**partition, "committed_leader_epoch": -1}
    assert v4["error_code"] == 16 and v4["groups"] == []
    v8 = roundtrip(offset_fetch.RESPONSE, 8, {"groups": [{"group_id": "g", "topics": [], "error_code": 15}]})
    assert v8["groups"] == [{"group_id": "g", "topics": [], "error_code": 15}]
    assert v8["error_code"] == 0 and v8["topics"] == []


def test_delete_groups_and_offset_delete() -> None:
    assert roundtrip(delete_groups.REQUEST, 2, {"groups_names": ["a", "b"]}) == {"groups_names": ["a", "b"]}
    assert delete_groups.REQUEST.encode({"groups_names": ["a"]}, 0) == b"\x00\x00\x00\x01\x00\x01a"
    req = {"group_id": "g", "topics": [{"name": "t", "partitions": [{"partition_index": 3}]}]}
    assert offset_delete.REQUEST.encode(req, 0) == (
        b"\x00\x01g" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x03"
    )
    assert not offset_delete.REQUEST.is_flexible(0)


# --- against kafka-python's JSON-driven codec -------------------------------------------------

KAFKA_PYTHON_MODULES = (
    "kafka.protocol.consumer.group",
    "kafka.protocol.admin.groups",
    "kafka.protocol.metadata.find_coordinator",
)

test_kafka_python_json_codec_agrees = crosscheck.kafka_python_json_codec_test(CASES, KAFKA_PYTHON_MODULES)


# --- against the hand-written legacy classes of aiokafka and kafka-python ----------------------

LEGACY_CASES = crosscheck.legacy_cases(MESSAGES)
test_legacy_cross_check_coverage = crosscheck.legacy_cross_check_coverage_test(LEGACY_CASES, LEGACY_COVERAGE)
test_legacy_codec_agrees = crosscheck.legacy_codec_test(LEGACY_CASES)
