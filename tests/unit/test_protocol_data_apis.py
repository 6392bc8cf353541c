"""Schemas of the data-path APIs: Produce, Fetch, ListOffsets, Metadata, OffsetForLeaderEpoch,
InitProducerId, DescribeCluster, DeleteRecords, DescribeProducers.

Three kinds of checks, for every valid version of every request and response:

* round trips of fully populated values (and of values with every nullable field null);
* the schema against Kafka's own message JSON as vendored by kafka-python 3.0.12 (field order,
  names, types, versions, nullable versions, tags, defaults) and the wire bytes against
  kafka-python's JSON-driven codec, in both directions;
* the wire bytes against the hand-written legacy classes of aiokafka 0.14 and kafka-python
  (``kafka.protocol.old``), an implementation independent of the JSON, where they have the version.
"""

from __future__ import annotations

import io
import uuid
from typing import Any

import pytest
from riverlog.protocol.api_keys import ApiKey
from riverlog.protocol.file_region import FileRegion
from riverlog.protocol.messages import (
    delete_records,
    describe_cluster,
    describe_producers,
    fetch,
    init_producer_id,
    list_offsets,
    metadata,
    offset_for_leader_epoch,
    produce,
)
from riverlog.protocol.primitives import ZERO_UUID, Reader, Writer
from riverlog.protocol.schema import (
    MAX_VERSION,
    Array,
    Field,
    FieldType,
    Message,
    Struct,
    _in,
)
from support import protocol_crosscheck as crosscheck
from support.protocol_samples import normalize, present_only, roundtrip, sample

pytestmark = [
    pytest.mark.unit,
    # kafka-python 3.0.12 loads its JSON with importlib.resources' deprecated functions.
    pytest.mark.filterwarnings("ignore:(read|open)_text is deprecated:DeprecationWarning"),
]

MODULES = [
    produce,
    fetch,
    list_offsets,
    metadata,
    offset_for_leader_epoch,
    init_producer_id,
    describe_cluster,
    delete_records,
    describe_producers,
]
MESSAGES: list[Message] = [m for mod in MODULES for m in (mod.REQUEST, mod.RESPONSE)]

# What Kafka 4.x's specs say (valid versions without an unstable latest version; flexible versions).
EXPECTED = {
    ApiKey.PRODUCE: ((3, 13), (9, MAX_VERSION)),
    ApiKey.FETCH: ((4, 18), (12, MAX_VERSION)),
    ApiKey.LIST_OFFSETS: ((1, 11), (6, MAX_VERSION)),
    ApiKey.METADATA: ((0, 13), (9, MAX_VERSION)),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: ((2, 4), (4, MAX_VERSION)),
    ApiKey.INIT_PRODUCER_ID: ((0, 5), (2, MAX_VERSION)),  # v6 is latestVersionUnstable
    ApiKey.DESCRIBE_CLUSTER: ((0, 2), (0, MAX_VERSION)),
    ApiKey.DELETE_RECORDS: ((0, 2), (2, MAX_VERSION)),
    ApiKey.DESCRIBE_PRODUCERS: ((0, 0), (0, MAX_VERSION)),
}


# The versions the legacy (hand-written) classes cross-check, within Kafka 4.x's valid ranges.
LEGACY_COVERAGE = {
    "Produce": range(3, 9),
    "Fetch": range(4, 12),
    "ListOffsets": range(1, 6),
    "Metadata": range(0, 9),
    "OffsetForLeaderEpoch": range(2, 5),
    "InitProducerId": range(0, 2),
    "DeleteRecords": range(0, 3),
}

CASES = crosscheck.cases(MESSAGES)


# --- shape ------------------------------------------------------------------------------------

test_version_ranges = crosscheck.version_ranges_test(MODULES, EXPECTED)


# --- round trips ------------------------------------------------------------------------------

test_roundtrip_populated = crosscheck.roundtrip_populated_test(CASES)
test_roundtrip_nulls = crosscheck.roundtrip_nulls_test(CASES)
test_missing_keys_take_defaults = crosscheck.missing_keys_take_defaults_test(CASES)


def test_null_defaults() -> None:
    # Fields whose spec default is null decode as None where absent, not as "".
    v7 = roundtrip(produce.RESPONSE, 7, {"responses": [{"partition_responses": [{}]}]})
    assert v7["responses"][0]["partition_responses"][0]["error_message"] is None
    assert roundtrip(metadata.RESPONSE, 1, {})["cluster_id"] is None
    assert roundtrip(fetch.REQUEST, 11, {})["cluster_id"] is None
    assert roundtrip(fetch.REQUEST, 12, {})["cluster_id"] is None
    assert roundtrip(produce.REQUEST, 3, {})["transactional_id"] is None


def test_entity_defaults() -> None:
    req = roundtrip(fetch.REQUEST, 4, {})
    assert req["replica_id"] == -1
    assert req["max_bytes"] == 0x7FFF_FFFF
    assert req["session_epoch"] == -1
    assert req["replica_state"] is None
    part = roundtrip(fetch.REQUEST, 18, {"topics": [{"partitions": [{}]}]})["topics"][0]["partitions"][0]
    assert part["high_watermark"] == 2**63 - 1
    assert part["replica_directory_id"] == ZERO_UUID
    assert part["current_leader_epoch"] == part["last_fetched_epoch"] == part["log_start_offset"] == -1
    assert roundtrip(offset_for_leader_epoch.REQUEST, 3, {})["replica_id"] == -2
    assert roundtrip(metadata.REQUEST, 4, {"topics": []})["allow_auto_topic_creation"] is True
    md = roundtrip(metadata.RESPONSE, 8, {"topics": [{}]})
    assert md["cluster_authorized_operations"] == md["topics"][0]["topic_authorized_operations"] == -(2**31)
    assert roundtrip(describe_cluster.REQUEST, 0, {})["endpoint_type"] == 1
    assert roundtrip(init_producer_id.RESPONSE, 0, {})["producer_id"] == -1
    lo = roundtrip(list_offsets.RESPONSE, 1, {"topics": [{"partitions": [{}]}]})
    assert lo["topics"][0]["partitions"][0]["offset"] == -1


def test_tagged_fields_at_default_are_not_sent() -> None:
    # Flexible v18 request with all tagged fields at their defaults: each struct ends in a 0 count.
    topic_id = uuid.uuid4()
    value: dict[str, Any] = {
        "max_wait_ms": 500,
        "min_bytes": 1,
        "topics": [{"topic_id": topic_id, "partitions": [{}]}],
    }
    data = fetch.REQUEST.encode(value, 18)
    at_defaults = {
        **value,
        "cluster_id": None,
        "replica_state": None,
        "topics": [
            {
                "topic_id": topic_id,
                "partitions": [{"replica_directory_id": ZERO_UUID, "high_watermark": 2**63 - 1}],
            }
        ],
    }
    assert fetch.REQUEST.encode(at_defaults, 18) == data
    # ... partition_max_bytes 0, no partition tags, no topic tags, forgotten [], rack_id "", no tags.
    assert data.endswith(b"\x00\x00\x00\x00" + b"\x00" + b"\x00" + b"\x01" + b"\x01" + b"\x00")
    with_tags = fetch.REQUEST.encode(
        {
            **value,
            "cluster_id": "c",
            "replica_state": {"replica_id": 1, "replica_epoch": 2},
            "topics": [{"topic_id": topic_id, "partitions": [{"high_watermark": 5}]}],
        },
        18,
    )
    assert len(with_tags) > len(data)
    decoded = fetch.REQUEST.decode(with_tags, 18)
    assert decoded["cluster_id"] == "c"
    assert decoded["replica_state"] == {"replica_id": 1, "replica_epoch": 2}
    assert decoded["topics"][0]["partitions"][0]["high_watermark"] == 5


def test_unknown_tags_are_skipped() -> None:
    # DescribeCluster v0 request (flexible): bool, then tagged fields with an unknown tag 7.
    data = bytes([1, 1, 7, 3, 0xAA, 0xBB, 0xCC])
    assert describe_cluster.REQUEST.decode(data, 0) == {
        "include_cluster_authorized_operations": True,
        "endpoint_type": 1,
        "include_fenced_brokers": False,
    }


def test_metadata_null_topics_means_all() -> None:
    assert roundtrip(metadata.REQUEST, 1, {"topics": None})["topics"] is None
    assert roundtrip(metadata.REQUEST, 12, {"topics": None})["topics"] is None
    assert roundtrip(metadata.REQUEST, 1, {"topics": []})["topics"] == []
    # Version 0 can't say null: all topics is an empty array there.
    assert metadata.REQUEST.encode({"topics": None}, 0) == b"\x00\x00\x00\x00"


def test_fetch_response_splices_file_regions() -> None:
    with io.BytesIO(b"x" * 100) as fake:
        region = FileRegion(fake, 10, 61)
        value = {"responses": [{"topic_id": uuid.uuid4(), "partitions": [{"records": [b"head", region]}]}]}
        w = Writer()
        fetch.RESPONSE.encode_into(w, value, 16)
        chunks = w.chunks()
        assert region in chunks
        assert w.size() == len(w.buf) + 61
        flat = b"".join(c if isinstance(c, bytes) else b"r" * 61 for c in chunks)
        decoded = fetch.RESPONSE.decode(flat, 16)
        assert bytes(decoded["responses"][0]["partitions"][0]["records"]) == b"head" + b"r" * 61


# --- against Kafka's JSON specs and kafka-python's JSON-driven codec ---------------------------


KAFKA_PYTHON_MODULES = (
    "kafka.protocol.producer.produce",
    "kafka.protocol.consumer.fetch",
    "kafka.protocol.consumer.offsets",
    "kafka.protocol.metadata.metadata",
    "kafka.protocol.producer.transaction",
    "kafka.protocol.admin.cluster",
    "kafka.protocol.admin.topics",
    "kafka.protocol.admin.transactions",
)

# InitProducerId's request spec marks version 6 unstable (the response doesn't repeat the flag).
test_schema_matches_kafka_json = crosscheck.schema_matches_kafka_json_test(
    MESSAGES, unstable_latest=[init_producer_id.REQUEST]
)


def _from_kafka_python(value: Any, ours: Any) -> Any:
    """kafka-python's to_dict() in our terms: it renames the authorized operations fields of
    Metadata and DescribeCluster responses to ``authorized_operations`` and decodes them as a set
    of bits (None for Kafka's "not requested" value, bit 31 alone)."""
    if isinstance(value, list):
        return [_from_kafka_python(v, o) for v, o in zip(value, ours or [], strict=False)]
    if not isinstance(value, dict):
        return value
    out = {}
    for key, v in value.items():
        if key == "authorized_operations":
            [key] = [k for k in ours if k.endswith("authorized_operations")]
            bits = sum(1 << b for b in v) if v is not None else 1 << 31
            v = bits - (1 << 32) if bits >= 1 << 31 else bits
        out[key] = _from_kafka_python(v, ours.get(key) if isinstance(ours, dict) else None)
    return out


@pytest.mark.parametrize("nulls", [False, True], ids=["populated", "nulls"])
@pytest.mark.parametrize(("message", "version"), CASES)
def test_kafka_python_json_codec_agrees(message: Message, version: int, nulls: bool) -> None:
    kp = crosscheck.kafka_python_class(message, KAFKA_PYTHON_MODULES)
    value = sample(message, version, nulls=nulls)
    ours = message.encode(value, version)
    theirs = kp.decode(ours, version=version, header=False)
    expected = present_only(message, version, value)
    assert _from_kafka_python(normalize(theirs.to_dict(json=False)), expected) == expected
    assert bytes(theirs.encode(header=False)) == ours


# --- against the hand-written legacy classes of aiokafka and kafka-python ----------------------


def _legacy_marks(label: str, version: int) -> list[Any]:
    if label.startswith("aiokafka.protocol.offset.OffsetRequest_v") and version >= 4:
        # aiokafka declares ListOffsets' current_leader_epoch as Int64; the spec (and
        # kafka-python's hand-written classes, which agree with us) have int32.
        return [pytest.mark.xfail(reason="aiokafka schema bug", strict=True)]
    return []


def _positional(struct: Struct, version: int, value: Any, schema: Any) -> Any:
    """Our value as the nested tuples a legacy class takes, walking its ``Schema`` alongside."""
    fields: list[Field | None] = [f for f in struct.fields if f.tag is None and _in(f.versions, version)]
    names = list(schema.names)
    if names and names[-1] == "tags":  # flexible: an (empty) tagged-fields dict
        fields.append(None)
    assert len(fields) == len(names), (names, [f.name if f else None for f in fields])
    out: list[Any] = []
    for fld, legacy_type in zip(fields, schema.fields, strict=True):
        if fld is None:
            out.append({})
            continue
        out.append(_legacy_value(fld.type, version, value[fld.name], legacy_type))
    return tuple(out)


def _legacy_value(t: FieldType, version: int, v: Any, legacy_type: Any) -> Any:
    if v is None:
        return None
    legacy_name = getattr(legacy_type, "__name__", type(legacy_type).__name__)
    if legacy_name == "BitField":  # kafka-python's authorized operations: a set of bits
        return {b for b in range(32) if v & (1 << b)} if v != -(2**31) else None
    if isinstance(t, Struct):
        return _positional(t, version, v, legacy_type)
    if isinstance(t, Array) and isinstance(t.item, Struct):
        item_type = legacy_type.array_of
        if not hasattr(item_type, "names"):
            # The legacy class flattens a one-field struct into its value (Metadata topics).
            [only] = [fld for fld in t.item.fields if _in(fld.versions, version)]
            return [x[only.name] for x in v]
        return [_positional(t.item, version, x, item_type) for x in v]
    return v


# The legacy classes can't encode tagged fields, so versions that carry them are left out.
LEGACY_CASES = crosscheck.legacy_cases(MESSAGES, skip_tagged=True, marks=_legacy_marks)
test_legacy_cross_check_coverage = crosscheck.legacy_cross_check_coverage_test(LEGACY_CASES, LEGACY_COVERAGE)


@pytest.mark.parametrize(("legacy", "message", "version"), LEGACY_CASES)
def test_legacy_codec_agrees(legacy: Any, message: Message, version: int) -> None:
    for nulls in (False, True):
        value = sample(message, version, nulls=nulls)
        ours = message.encode(value, version)
        # Their encoder on the same values gives the same bytes...
        assert bytes(legacy(*_positional(message.body, version, value, legacy.SCHEMA)).encode()) == ours
        # ...and their decoder reads all of ours back into the same values.
        buf = io.BytesIO(ours)
        decoded = legacy.decode(buf)
        assert buf.read() == b""
        assert bytes(decoded.encode()) == ours
        r = Reader(ours)
        assert normalize(message.decode(r, version)) == value
