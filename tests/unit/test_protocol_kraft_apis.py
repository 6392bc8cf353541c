"""Schemas of the KRaft APIs: Vote, BeginQuorumEpoch, EndQuorumEpoch, DescribeQuorum,
AlterPartition, FetchSnapshot, BrokerRegistration, BrokerHeartbeat, AllocateProducerIds.

For every valid version of every request and response, the round trips of ``protocol_crosscheck``.
kafka-python vendors only DescribeQuorum, so only it is checked against Kafka's JSON and
kafka-python's codec; every other API has hand-written bytes for its latest version (request and
response), derived from the spec field by field, so that a slip in a field's type, order,
version range or tag shows up as a byte difference.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from riverlog.protocol.api_keys import ApiKey
from riverlog.protocol.messages import (
    MESSAGES as ALL_MESSAGES,
)
from riverlog.protocol.messages import (
    allocate_producer_ids,
    alter_partition,
    begin_quorum_epoch,
    broker_heartbeat,
    broker_registration,
    describe_quorum,
    end_quorum_epoch,
    fetch_snapshot,
    vote,
)
from riverlog.protocol.primitives import ZERO_UUID
from riverlog.protocol.schema import MAX_VERSION, Message
from support import protocol_crosscheck as crosscheck
from support.protocol_samples import normalize, roundtrip

pytestmark = [
    pytest.mark.unit,
    # kafka-python 3.0.12 loads its JSON with importlib.resources' deprecated functions.
    pytest.mark.filterwarnings("ignore:(read|open)_text is deprecated:DeprecationWarning"),
]

MODULES = [
    vote,
    begin_quorum_epoch,
    end_quorum_epoch,
    describe_quorum,
    alter_partition,
    fetch_snapshot,
    broker_registration,
    broker_heartbeat,
    allocate_producer_ids,
]
MESSAGES: list[Message] = [m for mod in MODULES for m in (mod.REQUEST, mod.RESPONSE)]

# Kafka 4.x's valid and flexible versions (as Kafka 4.3.1's generated message classes have them;
# KIP-896 removed AlterPartition v0-1).
EXPECTED: dict[int, tuple[tuple[int, int], tuple[int, int]]] = {
    ApiKey.VOTE: ((0, 2), (0, MAX_VERSION)),
    ApiKey.BEGIN_QUORUM_EPOCH: ((0, 1), (1, MAX_VERSION)),
    ApiKey.END_QUORUM_EPOCH: ((0, 1), (1, MAX_VERSION)),
    ApiKey.DESCRIBE_QUORUM: ((0, 2), (0, MAX_VERSION)),
    ApiKey.ALTER_PARTITION: ((2, 3), (0, MAX_VERSION)),
    ApiKey.FETCH_SNAPSHOT: ((0, 1), (0, MAX_VERSION)),
    ApiKey.BROKER_REGISTRATION: ((0, 4), (0, MAX_VERSION)),
    ApiKey.BROKER_HEARTBEAT: ((0, 2), (0, MAX_VERSION)),
    ApiKey.ALLOCATE_PRODUCER_IDS: ((0, 0), (0, MAX_VERSION)),
}

CASES = crosscheck.cases(MESSAGES)
VENDORED = [describe_quorum.REQUEST, describe_quorum.RESPONSE]


# --- shape ------------------------------------------------------------------------------------

test_version_ranges = crosscheck.version_ranges_test(MODULES, EXPECTED)
test_schema_matches_kafka_json = crosscheck.schema_matches_kafka_json_test(VENDORED)


def test_registered_in_the_codec_table() -> None:
    for mod in MODULES:
        assert ALL_MESSAGES[mod.REQUEST.api_key] == (mod.REQUEST, mod.RESPONSE)


# --- round trips ------------------------------------------------------------------------------

test_roundtrip_populated = crosscheck.roundtrip_populated_test(CASES)
test_roundtrip_nulls = crosscheck.roundtrip_nulls_test(CASES)
test_missing_keys_take_defaults = crosscheck.missing_keys_take_defaults_test(CASES)


# --- against kafka-python's JSON-driven codec (DescribeQuorum only) ----------------------------

test_kafka_python_json_codec_agrees = crosscheck.kafka_python_json_codec_test(
    crosscheck.cases(VENDORED), ("kafka.protocol.admin.cluster",)
)


# --- hand-checked bytes for the latest version of the APIs kafka-python lacks -------------------
#
# Every version of these APIs here is flexible except BeginQuorumEpoch/EndQuorumEpoch v0: compact
# strings and arrays carry uvarint(length + 1) (0 = null), and every struct ends with its tagged
# fields: uvarint(count), then per field uvarint(tag), uvarint(size), the value.

METADATA = b"\x13__cluster_metadata"  # compact string: 18 characters
NO_TAGS = b"\x00"


def _uuid(n: int) -> uuid.UUID:
    return uuid.UUID(int=n)


def _uuid_bytes(n: int) -> bytes:
    return n.to_bytes(16, "big")


GOLDEN: list[Any] = [
    pytest.param(
        vote.REQUEST,
        2,
        {
            "cluster_id": "c1",
            "voter_id": 2,
            "topics": [
                {
                    "topic_name": "__cluster_metadata",
                    "partitions": [
                        {
                            "partition_index": 0,
                            "replica_epoch": 5,
                            "replica_id": 1,
                            "replica_directory_id": _uuid(1),
                            "voter_directory_id": _uuid(2),
                            "last_offset_epoch": 4,
                            "last_offset": 100,
                            "pre_vote": True,
                        }
                    ],
                }
            ],
        },
        b"\x03c1"  # cluster_id: compact nullable string
        + b"\x00\x00\x00\x02"  # voter_id (v1+)
        + b"\x02"  # topics: 1
        + METADATA
        + b"\x02"  # partitions: 1
        + b"\x00\x00\x00\x00"  # partition_index
        + b"\x00\x00\x00\x05"  # replica_epoch
        + b"\x00\x00\x00\x01"  # replica_id
        + _uuid_bytes(1)  # replica_directory_id (v1+)
        + _uuid_bytes(2)  # voter_directory_id (v1+)
        + b"\x00\x00\x00\x04"  # last_offset_epoch
        + b"\x00\x00\x00\x00\x00\x00\x00\x64"  # last_offset
        + b"\x01"  # pre_vote (v2+)
        + NO_TAGS  # partition
        + NO_TAGS  # topic
        + NO_TAGS,  # request
        id="VoteRequest-v2",
    ),
    pytest.param(
        vote.RESPONSE,
        2,
        {
            "error_code": 0,
            "topics": [
                {
                    "topic_name": "m",
                    "partitions": [
                        {
                            "partition_index": 0,
                            "error_code": 0,
                            "leader_id": 3,
                            "leader_epoch": 5,
                            "vote_granted": False,
                        }
                    ],
                }
            ],
            "node_endpoints": [{"node_id": 3, "host": "h", "port": 9093}],
        },
        b"\x00\x00"  # error_code
        + b"\x02\x02m"  # topics: 1, topic_name "m"
        + b"\x02"  # partitions: 1
        + b"\x00\x00\x00\x00"  # partition_index
        + b"\x00\x00"  # error_code
        + b"\x00\x00\x00\x03"  # leader_id
        + b"\x00\x00\x00\x05"  # leader_epoch
        + b"\x00"  # vote_granted
        + NO_TAGS  # partition
        + NO_TAGS  # topic
        # One tagged field: tag 0 (node_endpoints), 10 bytes: 1 endpoint (node_id, host "h",
        # port 9093 as uint16 0x2385, no tags).
        + b"\x01\x00\x0a"
        + b"\x02\x00\x00\x00\x03\x02h\x23\x85\x00",
        id="VoteResponse-v2",
    ),
    pytest.param(
        begin_quorum_epoch.REQUEST,
        1,
        {
            "cluster_id": None,
            "voter_id": 2,
            "topics": [
                {
                    "topic_name": "m",
                    "partitions": [
                        {"partition_index": 0, "voter_directory_id": _uuid(0x0102), "leader_id": 1, "leader_epoch": 7}
                    ],
                }
            ],
            "leader_endpoints": [{"name": "CONTROLLER", "host": "h", "port": 9093}],
        },
        b"\x00"  # cluster_id: null
        + b"\x00\x00\x00\x02"  # voter_id
        + b"\x02\x02m"  # topics: 1, topic_name "m"
        + b"\x02"  # partitions: 1
        + b"\x00\x00\x00\x00"  # partition_index
        + _uuid_bytes(0x0102)  # voter_directory_id
        + b"\x00\x00\x00\x01"  # leader_id
        + b"\x00\x00\x00\x07"  # leader_epoch
        + NO_TAGS  # partition
        + NO_TAGS  # topic
        + b"\x02"  # leader_endpoints: 1 (a regular field, after topics)
        + b"\x0bCONTROLLER"  # name
        + b"\x02h"  # host
        + b"\x23\x85"  # port (uint16)
        + NO_TAGS  # endpoint
        + NO_TAGS,  # request
        id="BeginQuorumEpochRequest-v1",
    ),
    pytest.param(
        begin_quorum_epoch.RESPONSE,
        1,
        {
            "error_code": 0,
            "topics": [
                {
                    "topic_name": "m",
                    "partitions": [{"partition_index": 0, "error_code": 74, "leader_id": 1, "leader_epoch": 8}],
                }
            ],
            "node_endpoints": [],
        },
        b"\x00\x00"  # error_code
        + b"\x02\x02m"  # topics: 1, topic_name "m"
        + b"\x02"  # partitions: 1
        + b"\x00\x00\x00\x00"  # partition_index
        + b"\x00\x4a"  # error_code FENCED_LEADER_EPOCH (74)
        + b"\x00\x00\x00\x01"  # leader_id
        + b"\x00\x00\x00\x08"  # leader_epoch
        + NO_TAGS  # partition
        + NO_TAGS  # topic
        + NO_TAGS,  # response: empty node_endpoints is the default, so not sent
        id="BeginQuorumEpochResponse-v1",
    ),
    pytest.param(
        end_quorum_epoch.REQUEST,
        1,
        {
            "cluster_id": "c1",
            "topics": [
                {
                    "topic_name": "m",
                    "partitions": [
                        {
                            "partition_index": 0,
                            "leader_id": 1,
                            "leader_epoch": 7,
                            "preferred_successors": [],
                            "preferred_candidates": [
                                {"candidate_id": 2, "candidate_directory_id": ZERO_UUID},
                                {"candidate_id": 3, "candidate_directory_id": _uuid(3)},
                            ],
                        }
                    ],
                }
            ],
            "leader_endpoints": [],
        },
        b"\x03c1"  # cluster_id
        + b"\x02\x02m"  # topics: 1, topic_name "m"
        + b"\x02"  # partitions: 1
        + b"\x00\x00\x00\x00"  # partition_index
        + b"\x00\x00\x00\x01"  # leader_id
        + b"\x00\x00\x00\x07"  # leader_epoch
        # (preferred_successors is version 0 only)
        + b"\x03"  # preferred_candidates: 2
        + b"\x00\x00\x00\x02" + _uuid_bytes(0) + NO_TAGS
        + b"\x00\x00\x00\x03" + _uuid_bytes(3) + NO_TAGS
        + NO_TAGS  # partition
        + NO_TAGS  # topic
        + b"\x01"  # leader_endpoints: 0
        + NO_TAGS,  # request
        id="EndQuorumEpochRequest-v1",
    ),
    pytest.param(
        end_quorum_epoch.REQUEST,
        0,
        {
            "cluster_id": None,
            "topics": [
                {
                    "topic_name": "m",
                    "partitions": [
                        {
                            "partition_index": 0,
                            "leader_id": 1,
                            "leader_epoch": 7,
                            "preferred_successors": [2, 3],
                            "preferred_candidates": [],
                        }
                    ],
                }
            ],
            "leader_endpoints": [],
        },
        # Version 0 is not flexible: int16 string lengths, int32 array lengths, no tagged fields.
        b"\xff\xff"  # cluster_id: null
        + b"\x00\x00\x00\x01"  # topics: 1
        + b"\x00\x01m"  # topic_name
        + b"\x00\x00\x00\x01"  # partitions: 1
        + b"\x00\x00\x00\x00"  # partition_index
        + b"\x00\x00\x00\x01"  # leader_id
        + b"\x00\x00\x00\x07"  # leader_epoch
        + b"\x00\x00\x00\x02\x00\x00\x00\x02\x00\x00\x00\x03",  # preferred_successors: [2, 3]
        id="EndQuorumEpochRequest-v0",
    ),
    pytest.param(
        end_quorum_epoch.RESPONSE,
        1,
        {"error_code": 0, "topics": [], "node_endpoints": [{"node_id": 1, "host": "h", "port": 9093}]},
        b"\x00\x00"  # error_code
        + b"\x01"  # topics: 0
        + b"\x01\x00\x0a"  # one tagged field: tag 0 (node_endpoints), 10 bytes
        + b"\x02\x00\x00\x00\x01\x02h\x23\x85\x00",
        id="EndQuorumEpochResponse-v1",
    ),
    pytest.param(
        alter_partition.REQUEST,
        3,
        {
            "broker_id": 1,
            "broker_epoch": 100,
            "topics": [
                {
                    "topic_id": _uuid(0x0A),
                    "partitions": [
                        {
                            "partition_index": 2,
                            "leader_epoch": 3,
                            "new_isr": [],
                            "new_isr_with_epochs": [
                                {"broker_id": 1, "broker_epoch": 100},
                                {"broker_id": 2, "broker_epoch": -1},
                            ],
                            "leader_recovery_state": 0,
                            "partition_epoch": 9,
                        }
                    ],
                }
            ],
        },
        b"\x00\x00\x00\x01"  # broker_id
        + b"\x00\x00\x00\x00\x00\x00\x00\x64"  # broker_epoch
        + b"\x02"  # topics: 1
        + _uuid_bytes(0x0A)  # topic_id
        + b"\x02"  # partitions: 1
        + b"\x00\x00\x00\x02"  # partition_index
        + b"\x00\x00\x00\x03"  # leader_epoch
        # (new_isr is versions 0-2)
        + b"\x03"  # new_isr_with_epochs: 2
        + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x00\x00\x00\x00\x64" + NO_TAGS
        + b"\x00\x00\x00\x02" + b"\xff" * 8 + NO_TAGS
        + b"\x00"  # leader_recovery_state (int8)
        + b"\x00\x00\x00\x09"  # partition_epoch
        + NO_TAGS  # partition
        + NO_TAGS  # topic
        + NO_TAGS,  # request
        id="AlterPartitionRequest-v3",
    ),
    pytest.param(
        alter_partition.RESPONSE,
        3,
        {
            "throttle_time_ms": 0,
            "error_code": 0,
            "topics": [
                {
                    "topic_id": _uuid(0x0A),
                    "partitions": [
                        {
                            "partition_index": 2,
                            "error_code": 0,
                            "leader_id": 1,
                            "leader_epoch": 3,
                            "isr": [1, 2],
                            "leader_recovery_state": 1,
                            "partition_epoch": 10,
                        }
                    ],
                }
            ],
        },
        b"\x00\x00\x00\x00"  # throttle_time_ms
        + b"\x00\x00"  # error_code
        + b"\x02"  # topics: 1
        + _uuid_bytes(0x0A)  # topic_id
        + b"\x02"  # partitions: 1
        + b"\x00\x00\x00\x02"  # partition_index
        + b"\x00\x00"  # error_code
        + b"\x00\x00\x00\x01"  # leader_id
        + b"\x00\x00\x00\x03"  # leader_epoch
        + b"\x03\x00\x00\x00\x01\x00\x00\x00\x02"  # isr: [1, 2]
        + b"\x01"  # leader_recovery_state
        + b"\x00\x00\x00\x0a"  # partition_epoch
        + NO_TAGS  # partition
        + NO_TAGS  # topic
        + NO_TAGS,  # response
        id="AlterPartitionResponse-v3",
    ),
    pytest.param(
        fetch_snapshot.REQUEST,
        1,
        {
            "cluster_id": "c1",
            "replica_id": 4,
            "max_bytes": 1 << 20,
            "topics": [
                {
                    "name": "m",
                    "partitions": [
                        {
                            "partition": 0,
                            "current_leader_epoch": 5,
                            "snapshot_id": {"end_offset": 200, "epoch": 4},
                            "position": 0,
                            "replica_directory_id": _uuid(7),
                        }
                    ],
                }
            ],
        },
        # cluster_id comes first in the spec but is tagged: it is written with the request's tags.
        b"\x00\x00\x00\x04"  # replica_id
        + b"\x00\x10\x00\x00"  # max_bytes
        + b"\x02\x02m"  # topics: 1, name "m"
        + b"\x02"  # partitions: 1
        + b"\x00\x00\x00\x00"  # partition
        + b"\x00\x00\x00\x05"  # current_leader_epoch
        + b"\x00\x00\x00\x00\x00\x00\x00\xc8" + b"\x00\x00\x00\x04" + NO_TAGS  # snapshot_id struct
        + b"\x00\x00\x00\x00\x00\x00\x00\x00"  # position
        + b"\x01\x00\x10" + _uuid_bytes(7)  # partition tags: tag 0 replica_directory_id, 16 bytes
        + NO_TAGS  # topic
        + b"\x01\x00\x03\x03c1",  # request tags: tag 0 cluster_id, 3 bytes (compact string "c1")
        id="FetchSnapshotRequest-v1",
    ),
    pytest.param(
        fetch_snapshot.RESPONSE,
        1,
        {
            "throttle_time_ms": 0,
            "error_code": 0,
            "topics": [
                {
                    "name": "m",
                    "partitions": [
                        {
                            "index": 0,
                            "error_code": 0,
                            "snapshot_id": {"end_offset": 200, "epoch": 4},
                            "current_leader": {"leader_id": 1, "leader_epoch": 5},
                            "size": 10,
                            "position": 4,
                            "unaligned_records": b"abc",
                        }
                    ],
                }
            ],
            "node_endpoints": [],
        },
        b"\x00\x00\x00\x00"  # throttle_time_ms
        + b"\x00\x00"  # error_code
        + b"\x02\x02m"  # topics: 1, name "m"
        + b"\x02"  # partitions: 1
        + b"\x00\x00\x00\x00"  # index
        + b"\x00\x00"  # error_code
        + b"\x00\x00\x00\x00\x00\x00\x00\xc8" + b"\x00\x00\x00\x04" + NO_TAGS  # snapshot_id
        + b"\x00\x00\x00\x00\x00\x00\x00\x0a"  # size
        + b"\x00\x00\x00\x00\x00\x00\x00\x04"  # position
        + b"\x04abc"  # unaligned_records: compact bytes
        # partition tags: tag 0 current_leader (struct: leader_id, leader_epoch, no tags), 9 bytes
        + b"\x01\x00\x09" + b"\x00\x00\x00\x01\x00\x00\x00\x05" + NO_TAGS
        + NO_TAGS  # topic
        + NO_TAGS,  # response
        id="FetchSnapshotResponse-v1",
    ),
    pytest.param(
        broker_registration.REQUEST,
        4,
        {
            "broker_id": 1,
            "cluster_id": "c1",
            "incarnation_id": _uuid(5),
            "listeners": [{"name": "PLAINTEXT", "host": "h", "port": 9092, "security_protocol": 0}],
            "features": [{"name": "metadata.version", "min_supported_version": 7, "max_supported_version": 27}],
            "rack": None,
            "is_migrating_zk_broker": False,
            "log_dirs": [_uuid(9)],
            "previous_broker_epoch": 42,
        },
        b"\x00\x00\x00\x01"  # broker_id
        + b"\x03c1"  # cluster_id
        + _uuid_bytes(5)  # incarnation_id
        + b"\x02"  # listeners: 1
        + b"\x0aPLAINTEXT" + b"\x02h" + b"\x23\x84" + b"\x00\x00" + NO_TAGS  # name, host, port, protocol
        + b"\x02"  # features: 1
        + b"\x11metadata.version" + b"\x00\x07" + b"\x00\x1b" + NO_TAGS
        + b"\x00"  # rack: null
        + b"\x00"  # is_migrating_zk_broker (v1+)
        + b"\x02" + _uuid_bytes(9)  # log_dirs (v2+)
        + b"\x00\x00\x00\x00\x00\x00\x00\x2a"  # previous_broker_epoch (v3+)
        + NO_TAGS,
        id="BrokerRegistrationRequest-v4",
    ),
    pytest.param(
        broker_registration.RESPONSE,
        4,
        {"throttle_time_ms": 0, "error_code": 0, "broker_epoch": 42},
        b"\x00\x00\x00\x00" + b"\x00\x00" + b"\x00\x00\x00\x00\x00\x00\x00\x2a" + NO_TAGS,
        id="BrokerRegistrationResponse-v4",
    ),
    pytest.param(
        broker_heartbeat.REQUEST,
        2,
        {
            "broker_id": 1,
            "broker_epoch": 42,
            "current_metadata_offset": 1000,
            "want_fence": False,
            "want_shut_down": True,
            "offline_log_dirs": [_uuid(9)],
            "cordoned_log_dirs": [],
        },
        b"\x00\x00\x00\x01"  # broker_id
        + b"\x00\x00\x00\x00\x00\x00\x00\x2a"  # broker_epoch
        + b"\x00\x00\x00\x00\x00\x00\x03\xe8"  # current_metadata_offset
        + b"\x00"  # want_fence
        + b"\x01"  # want_shut_down
        + b"\x02"  # two tagged fields, in tag order:
        + b"\x00\x11" + b"\x02" + _uuid_bytes(9)  # tag 0 offline_log_dirs, 17 bytes
        + b"\x01\x01" + b"\x01",  # tag 1 cordoned_log_dirs, 1 byte: empty (not null, the default)
        id="BrokerHeartbeatRequest-v2",
    ),
    pytest.param(
        broker_heartbeat.RESPONSE,
        2,
        {"throttle_time_ms": 0, "error_code": 0, "is_caught_up": True, "is_fenced": False, "should_shut_down": False},
        b"\x00\x00\x00\x00" + b"\x00\x00" + b"\x01" + b"\x00" + b"\x00" + NO_TAGS,
        id="BrokerHeartbeatResponse-v2",
    ),
    pytest.param(
        allocate_producer_ids.REQUEST,
        0,
        {"broker_id": 1, "broker_epoch": 42},
        b"\x00\x00\x00\x01" + b"\x00\x00\x00\x00\x00\x00\x00\x2a" + NO_TAGS,
        id="AllocateProducerIdsRequest-v0",
    ),
    pytest.param(
        allocate_producer_ids.RESPONSE,
        0,
        {"throttle_time_ms": 0, "error_code": 0, "producer_id_start": 1000, "producer_id_len": 1000},
        b"\x00\x00\x00\x00"  # throttle_time_ms
        + b"\x00\x00"  # error_code
        + b"\x00\x00\x00\x00\x00\x00\x03\xe8"  # producer_id_start
        + b"\x00\x00\x03\xe8"  # producer_id_len
        + NO_TAGS,
        id="AllocateProducerIdsResponse-v0",
    ),
]


@pytest.mark.parametrize(("message", "version", "value", "expected"), GOLDEN)
def test_golden_bytes(message: Message, version: int, value: dict[str, Any], expected: bytes) -> None:
    assert message.encode(value, version) == expected
    assert normalize(message.decode(expected, version)) == value


def test_golden_bytes_cover_the_latest_version_of_each_unvendored_api() -> None:
    covered = {(p.values[0].name, p.values[1]) for p in GOLDEN}
    for mod in MODULES:
        if mod is describe_quorum:
            continue
        for m in (mod.REQUEST, mod.RESPONSE):
            assert (m.name, m.valid[1]) in covered, m.name


# --- specifics --------------------------------------------------------------------------------


def test_vote_versions() -> None:
    partition = {"replica_epoch": 3, "replica_id": 1, "pre_vote": True, "replica_directory_id": _uuid(1)}
    value = {"cluster_id": "c", "voter_id": 2, "topics": [{"topic_name": "m", "partitions": [partition]}]}
    v2 = roundtrip(vote.REQUEST, 2, value)["topics"][0]["partitions"][0]
    assert v2["pre_vote"] is True and v2["replica_directory_id"] == _uuid(1)
    # Version 1 has no pre-vote: a pre-vote can't be asked for in it.
    v1 = roundtrip(vote.REQUEST, 1, value)
    assert v1["topics"][0]["partitions"][0]["pre_vote"] is False
    # Version 0 has no voter key either; the voter id reads as Kafka's "unknown".
    v0 = roundtrip(vote.REQUEST, 0, value)
    assert v0["voter_id"] == -1
    assert v0["topics"][0]["partitions"][0]["replica_directory_id"] == ZERO_UUID
    assert roundtrip(vote.REQUEST, 2, {})["cluster_id"] is None


def test_end_quorum_epoch_successors_by_version() -> None:
    partition = {"preferred_successors": [2, 3], "preferred_candidates": [{"candidate_id": 2}]}
    value = {"topics": [{"topic_name": "m", "partitions": [partition]}]}
    v0 = roundtrip(end_quorum_epoch.REQUEST, 0, value)["topics"][0]["partitions"][0]
    assert (v0["preferred_successors"], v0["preferred_candidates"]) == ([2, 3], [])
    v1 = roundtrip(end_quorum_epoch.REQUEST, 1, value)["topics"][0]["partitions"][0]
    assert v1["preferred_successors"] == []
    assert v1["preferred_candidates"] == [{"candidate_id": 2, "candidate_directory_id": ZERO_UUID}]


def test_fetch_snapshot_defaults() -> None:
    partition = {"replica_directory_id": _uuid(1)}  # and no snapshot_id: its fields' defaults
    req = roundtrip(fetch_snapshot.REQUEST, 0, {"topics": [{"name": "m", "partitions": [partition]}]})
    assert (req["cluster_id"], req["replica_id"], req["max_bytes"]) == (None, -1, 0x7FFF_FFFF)
    # The directory id is tagged from version 1 only.
    assert req["topics"][0]["partitions"][0]["replica_directory_id"] == ZERO_UUID
    assert req["topics"][0]["partitions"][0]["snapshot_id"] == {"end_offset": 0, "epoch": 0}
    resp = roundtrip(fetch_snapshot.RESPONSE, 0, {"topics": [{"name": "m", "partitions": [{}]}]})
    partition = resp["topics"][0]["partitions"][0]
    assert partition["current_leader"] is None  # not sent: absent tagged struct
    assert partition["unaligned_records"] == b""
    assert partition["snapshot_id"] == {"end_offset": 0, "epoch": 0}


def test_describe_quorum_versions() -> None:
    replica = {"replica_id": 1, "replica_directory_id": _uuid(1), "log_end_offset": 10, "last_fetch_timestamp": 5}
    value = {"topics": [{"topic_name": "m", "partitions": [{"current_voters": [replica], "error_message": "x"}]}]}
    v0 = roundtrip(describe_quorum.RESPONSE, 0, value)["topics"][0]["partitions"][0]
    assert v0["current_voters"] == [
        {"replica_id": 1, "replica_directory_id": ZERO_UUID, "log_end_offset": 10, "last_fetch_timestamp": -1,
         "last_caught_up_timestamp": -1}
    ]
    assert v0["error_message"] == ""
    v2 = roundtrip(describe_quorum.RESPONSE, 2, value)["topics"][0]["partitions"][0]
    assert v2["current_voters"][0]["replica_directory_id"] == _uuid(1)
    assert v2["error_message"] == "x"


def test_broker_heartbeat_defaults() -> None:
    # A broker is fenced unless the controller says otherwise; no cordoned-dirs report is null.
    assert roundtrip(broker_heartbeat.RESPONSE, 0, {})["is_fenced"] is True
    req = roundtrip(broker_heartbeat.REQUEST, 2, {})
    assert req["cordoned_log_dirs"] is None and req["offline_log_dirs"] == [] and req["broker_epoch"] == -1
    assert roundtrip(broker_heartbeat.REQUEST, 0, {"offline_log_dirs": [_uuid(1)]})["offline_log_dirs"] == []


def test_alter_partition_isr_by_version() -> None:
    partition = {"new_isr": [1, 2], "new_isr_with_epochs": [{"broker_id": 1, "broker_epoch": 5}]}
    value = {"topics": [{"topic_id": _uuid(1), "partitions": [partition]}]}
    v2 = roundtrip(alter_partition.REQUEST, 2, value)["topics"][0]["partitions"][0]
    assert (v2["new_isr"], v2["new_isr_with_epochs"]) == ([1, 2], [])
    v3 = roundtrip(alter_partition.REQUEST, 3, value)["topics"][0]["partitions"][0]
    assert (v3["new_isr"], v3["new_isr_with_epochs"]) == ([], [{"broker_id": 1, "broker_epoch": 5}])
