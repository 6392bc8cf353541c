"""The KIP-848 consumer group records of ``__consumer_offsets``: round trips through the shared
record codec, and bytes checked against Kafka's layouts (key: int16 type, then the fields; value:
int16 version 0, then a flexible struct)."""

from __future__ import annotations

import uuid

import pytest
from riverlog.coordinator.consumer_records import (
    ClassicMemberMetadata,
    ConsumerGroupKey,
    ConsumerMemberKey,
    CurrentAssignmentValue,
    GroupEpochValue,
    MemberMetadataValue,
    PartitionMetadataValue,
    TargetEpochValue,
    TargetMemberValue,
    TopicMetadata,
)
from riverlog.coordinator.records import CoordinatorRecord, decode, encode

pytestmark = pytest.mark.unit

T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)

RECORDS = [
    CoordinatorRecord(ConsumerGroupKey(3, "g"), GroupEpochValue(7)),
    CoordinatorRecord(ConsumerGroupKey(4, "g"), PartitionMetadataValue((
        TopicMetadata(T1, "a", 3, (("r1",), ("r2",), ("r1", "r2"))), TopicMetadata(T2, "b", 1, ((),))))),
    CoordinatorRecord(ConsumerMemberKey(5, "g", "m"), MemberMetadataValue(
        "i-1", "r1", "client", "/127.0.0.1", ("a", "b"), None, 300000, "range")),
    CoordinatorRecord(ConsumerMemberKey(5, "g", "m"), MemberMetadataValue(
        None, None, "client", "/127.0.0.1", (), "a.*", -1, None)),
    CoordinatorRecord(ConsumerMemberKey(5, "g", "m"), MemberMetadataValue(
        None, None, "client", "/127.0.0.1", ("a",), None, 30000, None,
        ClassicMemberMetadata(10000, (("range", b"\x00\x01sub"), ("cooperative-sticky", b""))))),
    CoordinatorRecord(ConsumerGroupKey(6, "g"), TargetEpochValue(7)),
    CoordinatorRecord(ConsumerMemberKey(7, "g", "m"), TargetMemberValue({T1: frozenset({0, 2})})),
    CoordinatorRecord(ConsumerMemberKey(8, "g", "m"), CurrentAssignmentValue(
        7, 6, 1, {T1: frozenset({0})}, {T2: frozenset({0})})),
    CoordinatorRecord(ConsumerMemberKey(8, "g", "m"), CurrentAssignmentValue(
        7, 6, 1, {T1: frozenset({0, 1})}, {T2: frozenset({0})}, {(T1, 0): 3, (T1, 1): 7, (T2, 0): 5})),
    CoordinatorRecord(ConsumerMemberKey(8, "g", "m"), None),
    CoordinatorRecord(ConsumerGroupKey(3, "g"), None),
]


def _id(record: CoordinatorRecord) -> str:
    return f"type{record.key.record_type}-" + ("tombstone" if record.value is None else "value")  # type: ignore[union-attr]


@pytest.mark.parametrize("record", RECORDS, ids=_id)
def test_round_trip(record: CoordinatorRecord) -> None:
    key, value = encode(record)
    assert decode(key, value) == record


def test_group_metadata_bytes() -> None:
    key, value = encode(CoordinatorRecord(ConsumerGroupKey(3, "g"), GroupEpochValue(7)))
    assert key == b"\x00\x03\x00\x01g"  # type 3, classic (non-compact) string
    assert value == b"\x00\x00" + b"\x00\x00\x00\x07" + b"\x00"  # version 0, epoch, no tags
    # Kafka 4.1+ puts the metadata hash in tag 0; it is read and carried.
    with_hash = b"\x00\x00\x00\x00\x00\x07\x01\x00\x08" + (42).to_bytes(8, "big")
    assert decode(key, with_hash).value == GroupEpochValue(7, 42)


def test_current_assignment_bytes() -> None:
    key, value = encode(CoordinatorRecord(ConsumerMemberKey(8, "g", "m"),
                                          CurrentAssignmentValue(2, 1, 0, {T1: frozenset({1, 0})}, {})))
    assert key == b"\x00\x08\x00\x01g\x00\x01m"
    assert value == (b"\x00\x00" + b"\x00\x00\x00\x02" + b"\x00\x00\x00\x01" + b"\x00"
                     + b"\x02" + T1.bytes + b"\x03" + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x01" + b"\x00"
                     + b"\x01" + b"\x00")


def test_current_assignment_epochs_are_kafkas_tagged_field() -> None:
    """KIP-1251 (Kafka 4.3): each TopicPartitions entry may carry AssignmentEpochs in tag 0, one
    epoch per partition, in the partitions' order; without it (older records) none is known."""
    value = CurrentAssignmentValue(2, 1, 0, {T1: frozenset({1, 0})}, {}, {(T1, 0): 1, (T1, 1): 2})
    _, data = encode(CoordinatorRecord(ConsumerMemberKey(8, "g", "m"), value))
    entry = (b"\x02" + T1.bytes + b"\x03" + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x01"
             + b"\x01" + b"\x00" + b"\x09" + b"\x03" + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x02")
    assert data == (b"\x00\x00" + b"\x00\x00\x00\x02" + b"\x00\x00\x00\x01" + b"\x00" + entry
                    + b"\x01" + b"\x00")
    # A partition without a known epoch: the whole entry goes without the tag.
    partial = CurrentAssignmentValue(2, 1, 0, {T1: frozenset({1, 0})}, {}, {(T1, 0): 1})
    key, data = encode(CoordinatorRecord(ConsumerMemberKey(8, "g", "m"), partial))
    decoded = decode(key, data).value
    assert isinstance(decoded, CurrentAssignmentValue) and decoded.assignment_epochs == {}


def test_classic_member_metadata_is_kafkas_tagged_field() -> None:
    """A classic member of a consumer group (online migration): tag 0 of the member metadata,
    ClassicMemberMetadata {SessionTimeoutMs int32, SupportedProtocols [{Name, Metadata}]}, after
    an unsigned varint presence marker; a consumer-protocol member has it explicitly null (varint
    0), as Kafka writes it (absent, Kafka would read an empty classic metadata)."""
    _, plain = encode(CoordinatorRecord(ConsumerMemberKey(5, "g", "m"), MemberMetadataValue(
        None, None, "c", "h", (), None, -1, None)))
    _, with_classic = encode(CoordinatorRecord(ConsumerMemberKey(5, "g", "m"), MemberMetadataValue(
        None, None, "c", "h", (), None, -1, None, ClassicMemberMetadata(10000, (("range", b"\x07"),)))))
    classic = (b"\x00\x00\x27\x10"  # session timeout 10000
               + b"\x02" + b"\x06range" + b"\x02\x07" + b"\x00"  # one protocol: name, metadata, no tags
               + b"\x00")  # no tags
    assert plain.endswith(b"\x01" + b"\x00\x01" + b"\x00")  # one tagged field: tag 0, size 1, null
    assert with_classic == plain[:-3] + b"\x00" + bytes([1 + len(classic)]) + b"\x01" + classic
    # Records without the tag (written before) still read as consumer-protocol members.
    key, _ = encode(CoordinatorRecord(ConsumerMemberKey(5, "g", "m"), None))
    assert decode(key, plain[:-4] + b"\x00").value == decode(key, plain).value
