"""``__consumer_offsets`` record formats (byte for byte as Kafka writes them) and the placement
of groups on its partitions (Java's String.hashCode and Kafka's Utils.abs)."""

from __future__ import annotations

import struct

import pytest
from riverlog.coordinator.placement import java_string_hashcode, kafka_abs, partition_for
from riverlog.coordinator.records import (
    CoordinatorRecord,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    UnknownRecord,
    decode,
    decode_key,
    encode,
)

pytestmark = pytest.mark.unit


def s16(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def b32(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


@pytest.mark.parametrize(("text", "expected"), [
    ("", 0), ("a", 97), ("hello", 99162322), ("my-group", -1906497762),
    ("polygenelubricants", -(1 << 31)),  # hashes to Integer.MIN_VALUE
    ("\u00e9t\u00e9", 233 * 961 + 116 * 31 + 233),  # UTF-16 code units, not UTF-8 bytes
    ("\U0001F600", 0xD83D * 31 + 0xDE00),  # a surrogate pair counts as two units
])
def test_java_string_hashcode(text: str, expected: int) -> None:
    assert java_string_hashcode(text) == expected


def test_partition_for_uses_kafka_abs() -> None:
    assert kafka_abs(-(1 << 31)) == 0 and kafka_abs(-5) == 5
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("my-group", 50) == 1906497762 % 50
    assert partition_for("hello", 1) == 0


def test_offset_commit_record_bytes() -> None:
    record = CoordinatorRecord(OffsetCommitKey("grp", "orders", 3),
                               OffsetCommitValue(42, "meta", 1_700_000_000_000, leader_epoch=7))
    key, value = encode(record)
    assert key == struct.pack(">h", 1) + s16("grp") + s16("orders") + struct.pack(">i", 3)
    assert value == struct.pack(">hqi", 3, 42, 7) + s16("meta") + struct.pack(">q", 1_700_000_000_000)
    assert decode(key, value) == record


def test_offset_commit_with_expiry_uses_value_version_1() -> None:
    record = CoordinatorRecord(OffsetCommitKey("g", "t", 0),
                               OffsetCommitValue(1, "", 100, leader_epoch=-1, expire_timestamp=500))
    _, value = encode(record)
    assert value == struct.pack(">hq", 1, 1) + s16("") + struct.pack(">qq", 100, 500)
    assert decode(*encode(record)) == record


def test_offset_commit_older_and_flexible_value_versions_decode() -> None:
    key = struct.pack(">h", 0) + s16("g") + s16("t") + struct.pack(">i", 1)  # legacy key version 0
    v0 = struct.pack(">hq", 0, 5) + s16("m") + struct.pack(">q", 9)
    assert decode(key, v0) == CoordinatorRecord(OffsetCommitKey("g", "t", 1), OffsetCommitValue(5, "m", 9))
    # Version 4 is flexible: compact string, then an empty tagged-field section.
    v4 = struct.pack(">hqi", 4, 5, 2) + bytes([2]) + b"m" + struct.pack(">q", 9) + bytes([0])
    assert decode(key, v4).value == OffsetCommitValue(5, "m", 9, leader_epoch=2)


def test_group_metadata_record_bytes() -> None:
    member = MemberMetadata("m-1", "inst", "client", "/10.0.0.1", 30000, 10000, b"sub", b"asg")
    record = CoordinatorRecord(GroupMetadataKey("grp"),
                               GroupMetadataValue("consumer", 4, "range", "m-1", 1234, (member,)))
    key, value = encode(record)
    assert key == struct.pack(">h", 2) + s16("grp")
    assert value == (
        struct.pack(">h", 3) + s16("consumer") + struct.pack(">i", 4) + s16("range") + s16("m-1")
        + struct.pack(">q", 1234) + struct.pack(">i", 1)
        + s16("m-1") + s16("inst") + s16("client") + s16("/10.0.0.1") + struct.pack(">ii", 30000, 10000)
        + b32(b"sub") + b32(b"asg")
    )
    assert decode(key, value) == record


def test_empty_group_has_null_protocol_and_leader() -> None:
    record = CoordinatorRecord(GroupMetadataKey("g"), GroupMetadataValue("", 0, None, None, 5, ()))
    _, value = encode(record)
    assert value == struct.pack(">h", 3) + s16("") + struct.pack(">ihhqi", 0, -1, -1, 5, 0)
    assert decode(*encode(record)) == record


def test_group_metadata_value_version_0_decodes() -> None:
    value = (struct.pack(">h", 0) + s16("consumer") + struct.pack(">i", 1) + s16("range") + s16("m")
             + struct.pack(">i", 1) + s16("m") + s16("c") + s16("/h") + struct.pack(">i", 6000)
             + b32(b"s") + b32(b"a"))
    decoded = decode(struct.pack(">h", 2) + s16("g"), value).value
    assert isinstance(decoded, GroupMetadataValue)
    (member,) = decoded.members
    assert member.rebalance_timeout == -1 and member.group_instance_id is None
    assert decoded.current_state_timestamp == -1


def test_tombstones_and_foreign_records() -> None:
    key, value = encode(CoordinatorRecord(GroupMetadataKey("g"), None))
    assert value is None
    assert decode(key, None) == CoordinatorRecord(GroupMetadataKey("g"), None)
    with pytest.raises(UnknownRecord):
        # Types 3-8 are KIP-848 consumer groups' (test_consumer_group_records); 16 (their regular
        # expressions) and the share and streams groups' are read past.
        decode_key(struct.pack(">h", 16) + s16("a KIP-848 regular expression record"))
