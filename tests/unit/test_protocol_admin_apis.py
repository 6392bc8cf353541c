"""Schemas of the admin APIs: CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs,
AlterConfigs, IncrementalAlterConfigs, DescribeLogDirs, ElectLeaders, AlterPartitionReassignments,
ListPartitionReassignments, DescribeTopicPartitions.

For every valid version of every request and response, the shared checks of ``protocol_crosscheck``
(round trips; the schema against Kafka's JSON; the wire bytes against kafka-python's JSON-driven
codec, both ways, and against the hand-written legacy classes), then what is particular to these APIs.
"""

from __future__ import annotations

import uuid

import pytest
from riverlog.protocol.api_keys import ApiKey
from riverlog.protocol.messages import (
    alter_configs,
    alter_partition_reassignments,
    create_partitions,
    create_topics,
    delete_topics,
    describe_configs,
    describe_log_dirs,
    describe_topic_partitions,
    elect_leaders,
    incremental_alter_configs,
    list_partition_reassignments,
)
from riverlog.protocol.primitives import ZERO_UUID
from riverlog.protocol.schema import INT16, MAX_VERSION, STRING, Array, Message, Struct, f, message
from support import protocol_crosscheck as crosscheck
from support.protocol_samples import roundtrip, spec_differences

pytestmark = [
    pytest.mark.unit,
    # kafka-python 3.0.12 loads its JSON with importlib.resources' deprecated functions.
    pytest.mark.filterwarnings("ignore:(read|open)_text is deprecated:DeprecationWarning"),
]

MODULES = [
    create_topics,
    delete_topics,
    create_partitions,
    describe_configs,
    alter_configs,
    incremental_alter_configs,
    describe_log_dirs,
    elect_leaders,
    alter_partition_reassignments,
    list_partition_reassignments,
    describe_topic_partitions,
]
MESSAGES: list[Message] = [m for mod in MODULES for m in (mod.REQUEST, mod.RESPONSE)]

# Kafka 4.x's valid and flexible versions (KIP-896 removed CreateTopics v0-1, DeleteTopics v0,
# DescribeConfigs v0 and DescribeLogDirs v0).
EXPECTED = {
    ApiKey.CREATE_TOPICS: ((2, 7), (5, MAX_VERSION)),
    ApiKey.DELETE_TOPICS: ((1, 6), (4, MAX_VERSION)),
    ApiKey.CREATE_PARTITIONS: ((0, 3), (2, MAX_VERSION)),
    ApiKey.DESCRIBE_CONFIGS: ((1, 4), (4, MAX_VERSION)),
    ApiKey.ALTER_CONFIGS: ((0, 2), (2, MAX_VERSION)),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: ((0, 1), (1, MAX_VERSION)),
    ApiKey.DESCRIBE_LOG_DIRS: ((1, 5), (2, MAX_VERSION)),
    ApiKey.ELECT_LEADERS: ((0, 2), (2, MAX_VERSION)),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: ((0, 1), (0, MAX_VERSION)),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: ((0, 0), (0, MAX_VERSION)),
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: ((0, 0), (0, MAX_VERSION)),
}

# The versions the legacy (hand-written) classes cross-check, within the valid ranges.
LEGACY_COVERAGE = {
    "CreateTopics": range(2, 4),
    "DeleteTopics": range(1, 4),
    "CreatePartitions": range(0, 2),
    "DescribeConfigs": range(1, 3),
    "AlterConfigs": range(0, 2),
    "ElectLeaders": range(0, 2),
    "AlterPartitionReassignments": range(0, 1),
    "ListPartitionReassignments": range(0, 1),
}


CASES = crosscheck.cases(MESSAGES)


# --- shape ------------------------------------------------------------------------------------

test_version_ranges = crosscheck.version_ranges_test(MODULES, EXPECTED)
test_schema_matches_kafka_json = crosscheck.schema_matches_kafka_json_test(MESSAGES)


def test_spec_comparison_catches_mistakes() -> None:
    result = Struct([f("partition_id", INT16), f("error_code", INT16), f("error_message", STRING)])
    wrong = message(
        "ElectLeadersResponse",
        ApiKey.ELECT_LEADERS,
        "0-2",
        "2+",
        [
            f("throttle_time_ms", INT16),
            f("error_code", INT16, "2+"),
            f("replica_election_results", Array(Struct([f("topic", STRING), f("partition_result", Array(result))]))),
        ],
    )
    problems = "\n".join(spec_differences(wrong))
    assert "throttle_time_ms: type" in problems
    assert "error_code: versions" in problems
    assert "partition_id: type" in problems
    assert "error_message: nullable" in problems


# --- round trips ------------------------------------------------------------------------------

test_roundtrip_populated = crosscheck.roundtrip_populated_test(CASES)
test_roundtrip_nulls = crosscheck.roundtrip_nulls_test(CASES)
test_missing_keys_take_defaults = crosscheck.missing_keys_take_defaults_test(CASES)


# --- specifics --------------------------------------------------------------------------------


def test_create_topics_defaults_and_tagged_field() -> None:
    req = roundtrip(create_topics.REQUEST, 2, {"topics": []})
    assert req["timeout_ms"] == 60000
    assert req["validate_only"] is False
    topic = {"name": "t", "error_code": 0, "configs": []}
    plain = create_topics.RESPONSE.encode({"topics": [topic]}, 5)
    tagged = create_topics.RESPONSE.encode({"topics": [{**topic, "topic_config_error_code": 40}]}, 5)
    # The tagged field costs tag (1) + size (1) + int16 (2) bytes, and only when not at its default.
    assert len(tagged) == len(plain) + 4
    assert create_topics.RESPONSE.encode({"topics": [{**topic, "topic_config_error_code": 0}]}, 5) == plain
    result = create_topics.RESPONSE.decode(tagged, 5)["topics"][0]
    assert result["topic_config_error_code"] == 40
    assert result["num_partitions"] == -1 and result["replication_factor"] == -1
    assert create_topics.RESPONSE.decode(plain, 5)["topics"][0]["topic_config_error_code"] == 0
    # Topic ids appear in version 7 only.
    tid = uuid.uuid4()
    with_id = {"topics": [{**topic, "topic_id": tid}]}
    assert roundtrip(create_topics.RESPONSE, 7, with_id)["topics"][0]["topic_id"] == tid
    assert roundtrip(create_topics.RESPONSE, 6, with_id)["topics"][0]["topic_id"] == ZERO_UUID


def test_create_topics_v2_golden_bytes() -> None:
    # Classic encoding, written out by hand from the spec.
    value = {
        "topics": [
            {
                "name": "ab",
                "num_partitions": 3,
                "replication_factor": 1,
                "assignments": [],
                "configs": [{"name": "k", "value": None}],
            }
        ],
        "timeout_ms": 1000,
        "validate_only": True,
    }
    expected = (
        b"\x00\x00\x00\x01"  # topics: 1
        + b"\x00\x02ab"  # name
        + b"\x00\x00\x00\x03"  # num_partitions
        + b"\x00\x01"  # replication_factor
        + b"\x00\x00\x00\x00"  # assignments: 0
        + b"\x00\x00\x00\x01\x00\x01k\xff\xff"  # configs: 1, name "k", value null
        + b"\x00\x00\x03\xe8"  # timeout_ms
        + b"\x01"  # validate_only
    )
    assert create_topics.REQUEST.encode(value, 2) == expected
    assert create_topics.REQUEST.decode(expected, 2) == value


def test_delete_topics_by_name_and_by_id() -> None:
    old = roundtrip(delete_topics.REQUEST, 5, {"topic_names": ["a", "b"], "timeout_ms": 5})
    assert old["topic_names"] == ["a", "b"] and old["topics"] == []
    tid = uuid.uuid4()
    new = roundtrip(delete_topics.REQUEST, 6, {"topics": [{"topic_id": tid}], "topic_names": ["ignored"]})
    assert new["topics"] == [{"name": None, "topic_id": tid}]
    assert new["topic_names"] == []
    resp = roundtrip(delete_topics.RESPONSE, 6, {"responses": [{"name": None, "topic_id": tid}]})
    assert resp["responses"][0] == {"name": None, "topic_id": tid, "error_code": 0, "error_message": None}
    v4 = roundtrip(delete_topics.RESPONSE, 4, {"responses": [{"name": "a"}]})
    assert v4["responses"][0]["error_message"] is None


def test_describe_configs_versions() -> None:
    resource = {"resource_type": 2, "resource_name": "t", "configuration_keys": None}
    assert roundtrip(describe_configs.REQUEST, 1, {"resources": [resource]})["resources"] == [resource]
    config = {"name": "retention.ms", "value": "1", "read_only": False, "is_sensitive": False}
    v1 = roundtrip(describe_configs.RESPONSE, 1, {"results": [{"configs": [config]}]})["results"][0]["configs"][0]
    assert v1["config_source"] == -1 and v1["synonyms"] == [] and v1["config_type"] == 0
    assert v1["documentation"] == ""
    v3 = roundtrip(describe_configs.RESPONSE, 3, {"results": [{"configs": [{**config, "documentation": None}]}]})
    assert v3["results"][0]["configs"][0]["documentation"] is None


def test_describe_log_dirs_null_topics_and_defaults() -> None:
    assert roundtrip(describe_log_dirs.REQUEST, 1, {"topics": None})["topics"] is None
    assert roundtrip(describe_log_dirs.REQUEST, 4, {"topics": None})["topics"] is None
    result = roundtrip(describe_log_dirs.RESPONSE, 3, {"results": [{"log_dir": "/d"}]})["results"][0]
    assert (result["total_bytes"], result["usable_bytes"], result["is_cordoned"]) == (-1, -1, False)
    result = roundtrip(describe_log_dirs.RESPONSE, 5, {"results": [{"log_dir": "/d", "is_cordoned": True}]})
    assert result["results"][0]["is_cordoned"] is True


def test_elect_leaders_all_partitions() -> None:
    req = roundtrip(elect_leaders.REQUEST, 0, {"topic_partitions": None})
    assert req == {"election_type": 0, "topic_partitions": None, "timeout_ms": 60000}


def test_partition_reassignments() -> None:
    cancel = {"topics": [{"name": "t", "partitions": [{"partition_index": 0, "replicas": None}]}]}
    req = roundtrip(alter_partition_reassignments.REQUEST, 0, cancel)
    assert req["topics"][0]["partitions"][0]["replicas"] is None
    assert req["timeout_ms"] == 60000
    # Version 0 can't say it; the default (allowed) stands.
    assert req["allow_replication_factor_change"] is True
    req = roundtrip(alter_partition_reassignments.REQUEST, 1, {"allow_replication_factor_change": False})
    assert req["allow_replication_factor_change"] is False
    req = roundtrip(alter_partition_reassignments.REQUEST, 1, {"topics": [{"partitions": [{}]}]})
    assert req["topics"][0]["partitions"][0]["replicas"] is None
    listed = roundtrip(list_partition_reassignments.REQUEST, 0, {})
    assert listed == {"timeout_ms": 60000, "topics": None}


def test_describe_topic_partitions_cursor() -> None:
    req = roundtrip(describe_topic_partitions.REQUEST, 0, {"topics": [{"name": "a"}]})
    assert req == {"topics": [{"name": "a"}], "response_partition_limit": 2000, "cursor": None}
    cursor = {"topic_name": "a", "partition_index": 7}
    assert roundtrip(describe_topic_partitions.REQUEST, 0, {"cursor": cursor})["cursor"] == cursor
    resp = roundtrip(describe_topic_partitions.RESPONSE, 0, {"topics": [{"name": "a", "partitions": [{}]}]})
    topic = resp["topics"][0]
    assert topic["topic_authorized_operations"] == -(2**31)
    assert topic["partitions"][0]["leader_epoch"] == -1
    assert topic["partitions"][0]["eligible_leader_replicas"] is None
    assert topic["partitions"][0]["last_known_elr"] is None
    assert resp["next_cursor"] is None


# --- against kafka-python's JSON-driven codec -------------------------------------------------

KAFKA_PYTHON_MODULES = ("kafka.protocol.admin.topics", "kafka.protocol.admin.configs", "kafka.protocol.admin.cluster")

test_kafka_python_json_codec_agrees = crosscheck.kafka_python_json_codec_test(CASES, KAFKA_PYTHON_MODULES)


# --- against the hand-written legacy classes of aiokafka and kafka-python ----------------------

LEGACY_CASES = crosscheck.legacy_cases(MESSAGES)
test_legacy_cross_check_coverage = crosscheck.legacy_cross_check_coverage_test(LEGACY_CASES, LEGACY_COVERAGE)
test_legacy_codec_agrees = crosscheck.legacy_codec_test(LEGACY_CASES)
