"""Schemas of the admin APIs: CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs,
AlterConfigs, IncrementalAlterConfigs, DescribeLogDirs, ElectLeaders, AlterPartitionReassignments,
ListPartitionReassignments, DescribeTopicPartitions.

For every valid version of every request and response:

* round trips of fully populated values, of values with every nullable field null, and of empty
  values (missing keys take the defaults);
* the schema against Kafka's own message JSON as vendored by kafka-python 3.0.12;
* the wire bytes against kafka-python's JSON-driven codec, both ways (their encoder fed the same
  values writes our bytes; their decoder reads our bytes back into the same values);
* the wire bytes against the hand-written legacy classes of aiokafka 0.14 and kafka-python
  (``kafka.protocol.old``), independent of the JSON, for the versions they have.
"""

from __future__ import annotations

import io
import uuid
import warnings
from typing import Any

import pytest
from protocol_samples import (
    has_tagged_values,
    kafka_python_build,
    kafka_python_values,
    legacy_classes,
    legacy_normalize,
    legacy_values,
    legacy_version,
    positional,
    present_only,
    roundtrip,
    sample,
    spec_differences,
    spec_json,
    spec_versions,
)
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
from riverlog.protocol.schema import INT16, MAX_VERSION, STRING, Array, Message, Struct, _in, f, message

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


def _versions(m: Message) -> range:
    return range(m.valid[0], m.valid[1] + 1)


CASES = [pytest.param(m, v, id=f"{m.name}-v{v}") for m in MESSAGES for v in _versions(m)]


# --- shape ------------------------------------------------------------------------------------


@pytest.mark.parametrize("mod", MODULES, ids=lambda mod: mod.__name__.rsplit(".", 1)[-1])
def test_version_ranges(mod: Any) -> None:
    assert mod.REQUEST.api_key == mod.RESPONSE.api_key
    assert mod.REQUEST.name.endswith("Request") and mod.RESPONSE.name.endswith("Response")
    valid, flexible = EXPECTED[mod.REQUEST.api_key]
    for m in (mod.REQUEST, mod.RESPONSE):
        assert (m.valid, m.flexible) == (valid, flexible), m.name


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: m.name)
def test_schema_matches_kafka_json(message: Message) -> None:
    spec = spec_json(message)
    assert not spec.get("latestVersionUnstable")
    assert spec_versions(spec["validVersions"]) == message.valid
    assert spec_differences(message) == []


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


@pytest.mark.parametrize(("message", "version"), CASES)
def test_roundtrip_populated(message: Message, version: int) -> None:
    value = sample(message, version)
    assert roundtrip(message, version, value) == value


@pytest.mark.parametrize(("message", "version"), CASES)
def test_roundtrip_nulls(message: Message, version: int) -> None:
    value = sample(message, version, nulls=True)
    assert roundtrip(message, version, value) == value


@pytest.mark.parametrize(("message", "version"), CASES)
def test_missing_keys_take_defaults(message: Message, version: int) -> None:
    decoded = roundtrip(message, version, {})
    for fld in message.body.fields:
        nullable_now = fld.tag is None and _in(fld.versions, version) and _in(fld.nullable, version)
        # A missing nullable field is sent as null; anything else takes its default.
        assert decoded[fld.name] == (None if nullable_now else fld.default_value()), fld.name


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


def _kafka_python_class(m: Message) -> Any:
    from kafka.protocol.admin import cluster, configs, topics

    for mod in (topics, configs, cluster):
        cls = getattr(mod, m.name, None)
        if cls is not None:
            assert m.api_key == cls.API_KEY
            return cls
    raise AssertionError(f"kafka-python has no {m.name}")


@pytest.mark.parametrize("nulls", [False, True], ids=["populated", "nulls"])
@pytest.mark.parametrize(("message", "version"), CASES)
def test_kafka_python_json_codec_agrees(message: Message, version: int, nulls: bool) -> None:
    kp = _kafka_python_class(message)
    value = sample(message, version, nulls=nulls)
    ours = message.encode(value, version)
    # Their encoder, fed the same values field by field, writes the same bytes...
    assert bytes(kafka_python_build(kp, version, value).encode(version=version)) == ours
    # ...and their decoder reads ours back into the same values.
    theirs = kp.decode(ours, version=version)
    assert kafka_python_values(theirs) == present_only(message, version, value)


# --- against the hand-written legacy classes of aiokafka and kafka-python ----------------------


def _legacy_cases() -> list[Any]:
    by_key = {(m.api_key, m.name.endswith("Request")): m for m in MESSAGES}
    cases = []
    for label, cls in legacy_classes():
        m = by_key.get((cls.API_KEY, "Request" in label.rsplit(".", 1)[-1]))
        version = legacy_version(label)
        if m is not None and m.supports(version):
            cases.append(pytest.param(cls, m, version, id=label))
    return cases


with warnings.catch_warnings():
    warnings.filterwarnings("ignore", "(read|open)_text is deprecated", DeprecationWarning)
    LEGACY_CASES = _legacy_cases()


def test_legacy_cross_check_coverage() -> None:
    covered = {(m.name, v) for _, m, v in (c.values for c in LEGACY_CASES)}
    for api, versions in LEGACY_COVERAGE.items():
        for v in versions:
            for kind in ("Request", "Response"):
                assert (api + kind, v) in covered, (api + kind, v)


@pytest.mark.parametrize(("legacy", "message", "version"), LEGACY_CASES)
def test_legacy_codec_agrees(legacy: Any, message: Message, version: int) -> None:
    assert not has_tagged_values(message, version)  # the legacy classes can't write them
    for nulls in (False, True):
        value = sample(message, version, nulls=nulls)
        ours = message.encode(value, version)
        theirs = legacy_values(legacy.SCHEMA, positional(message, version, value))
        # Their encoder on the same values gives the same bytes...
        assert bytes(legacy.SCHEMA.encode(theirs)) == ours
        # ...and their decoder reads all of ours back into the same values.
        buf = io.BytesIO(ours)
        decoded = legacy.SCHEMA.decode(buf)
        assert buf.read() == b""
        assert legacy_normalize(decoded) == legacy_normalize(theirs)
