"""The ``__consumer_offsets`` records of KIP-848 consumer groups, in Kafka's formats.

Like the classic records (``records.py``), a key starts with an int16 that names the record
type and a value with an int16 version (0 for all of these). Keys are not flexible; values are.
The layouts follow Kafka's ``ConsumerGroup*Key``/``Value`` JSON specs:

====  ========================================  =============================================
type  key (group id, and member id for 5/7/8)    value
====  ========================================  =============================================
3     ConsumerGroupMetadata                      the group epoch
4     ConsumerGroupPartitionMetadata             the subscribed topics' metadata
5     ConsumerGroupMemberMetadata                a member's subscription, rack, client
6     ConsumerGroupTargetAssignmentMetadata      the epoch of the target assignment
7     ConsumerGroupTargetAssignmentMember        a member's target partitions
8     ConsumerGroupCurrentMemberAssignment       a member's epochs, state and partitions
====  ========================================  =============================================

A null value deletes the key. Kafka 4.1+ writes the group's metadata hash into type 3 (a tagged
field) instead of type 4; Riverlog writes type 4, and reads and carries the hash it finds.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from ..protocol.primitives import DecodeError, Reader, Writer
from ..protocol.schema import BYTES, INT8, INT32, INT64, NULL, STRING, UUID, Array, FieldType, Struct, f

GROUP_METADATA = 3
PARTITION_METADATA = 4
MEMBER_METADATA = 5
TARGET_ASSIGNMENT_METADATA = 6
TARGET_ASSIGNMENT_MEMBER = 7
CURRENT_MEMBER_ASSIGNMENT = 8
CONSUMER_KEY_TYPES = frozenset(range(GROUP_METADATA, CURRENT_MEMBER_ASSIGNMENT + 1))

# Topic id -> partitions: how assignments are held everywhere in the coordinator.
Assignment = dict[uuid.UUID, frozenset[int]]
# KIP-1251 (Kafka 4.3): the member epoch at which each partition of a member's current
# assignment (assigned or pending revocation) was assigned to it.
AssignmentEpochs = dict[tuple[uuid.UUID, int], int]

_GROUP_KEY = Struct([f("group_id", STRING)])
_MEMBER_KEY = Struct([f("group_id", STRING), f("member_id", STRING)])

_GROUP_METADATA_VALUE = Struct([
    f("epoch", INT32),
    f("metadata_hash", INT64, tag=0, tagged="0+", default=0),
])
_PARTITION_METADATA_VALUE = Struct([
    f("topics", Array(Struct([
        f("topic_id", UUID),
        f("topic_name", STRING),
        f("num_partitions", INT32),
        f("partition_metadata", Array(Struct([f("partition", INT32), f("racks", Array(STRING))]))),
    ]))),
])
_CLASSIC_MEMBER_METADATA = Struct([
    f("session_timeout_ms", INT32),
    f("supported_protocols", Array(Struct([f("name", STRING), f("metadata", BYTES)]))),
])
# Kafka marks the presence of a tagged nullable struct with an unsigned varint, 0 for null (an
# untagged one has an int8, -1 for null), and writes the null of a consumer-protocol member
# explicitly: an absent tag 0 reads, in Kafka, as an empty (classic!) ClassicMemberMetadata.
EXPLICIT_NULL = object()


@dataclass(frozen=True)
class _TaggedNullableStruct(FieldType):
    struct: Struct

    def decode(self, r: Reader, flexible: bool, version: int, nullable: bool) -> Any:
        if r.uvarint() == 0:
            return None
        return self.struct.decode(r, flexible, version, False)

    def encode(self, w: Writer, value: Any, flexible: bool, version: int, nullable: bool) -> None:
        if value is None or value is EXPLICIT_NULL:
            w.uvarint(0)
            return
        w.uvarint(1)
        self.struct.encode(w, value, flexible, version, False)


_MEMBER_METADATA_VALUE = Struct([
    f("instance_id", STRING, nullable="0+"),
    f("rack_id", STRING, nullable="0+"),
    f("client_id", STRING),
    f("client_host", STRING),
    f("subscribed_topic_names", Array(STRING)),
    f("subscribed_topic_regex", STRING, nullable="0+"),
    f("rebalance_timeout_ms", INT32, default=-1),
    f("server_assignor", STRING, nullable="0+"),
    # Set for a classic-protocol member of a consumer group (online migration): what its
    # JoinGroup said, which SyncGroup, Heartbeat and a downgrade back to classic need.
    f("classic_member_metadata", _TaggedNullableStruct(_CLASSIC_MEMBER_METADATA), nullable="0+", tag=0,
      tagged="0+", default=NULL),
])
_TARGET_METADATA_VALUE = Struct([
    f("assignment_epoch", INT32),
    f("assignment_timestamp", INT64, tag=0, tagged="0+", default=0),
])
_TARGET_MEMBER_VALUE = Struct([
    f("topic_partitions", Array(Struct([f("topic_id", UUID), f("partitions", Array(INT32))]))),
])
_ASSIGNED = Struct([
    f("topic_id", UUID),
    f("partitions", Array(INT32)),
    f("assignment_epochs", Array(INT32), nullable="0+", tag=0, tagged="0+", default=NULL),
])
_CURRENT_ASSIGNMENT_VALUE = Struct([
    f("member_epoch", INT32),
    f("previous_member_epoch", INT32),
    f("state", INT8),
    f("assigned_partitions", Array(_ASSIGNED)),
    f("partitions_pending_revocation", Array(_ASSIGNED)),
])


@dataclass(frozen=True)
class ConsumerGroupKey:
    """Key of record types 3, 4 and 6 (group-wide)."""

    record_type: int
    group: str


@dataclass(frozen=True)
class ConsumerMemberKey:
    """Key of record types 5, 7 and 8 (one member)."""

    record_type: int
    group: str
    member_id: str


@dataclass(frozen=True)
class GroupEpochValue:
    epoch: int
    metadata_hash: int = 0


@dataclass(frozen=True)
class TopicMetadata:
    topic_id: uuid.UUID
    name: str
    num_partitions: int
    racks: tuple[tuple[str, ...], ...] = ()  # per partition: the racks of its replicas


@dataclass(frozen=True)
class PartitionMetadataValue:
    topics: tuple[TopicMetadata, ...]


@dataclass(frozen=True)
class ClassicMemberMetadata:
    """A consumer group member that speaks the classic protocol (JoinGroup/SyncGroup/Heartbeat):
    its session timeout and its JoinGroup protocols (name, embedded subscription), in order."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True)
class MemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    classic: ClassicMemberMetadata | None = None


@dataclass(frozen=True)
class TargetEpochValue:
    assignment_epoch: int
    assignment_timestamp: int = 0


@dataclass(frozen=True)
class TargetMemberValue:
    partitions: Assignment = field(default_factory=dict)


@dataclass(frozen=True)
class CurrentAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    assignment_epochs: AssignmentEpochs = field(default_factory=dict)


ConsumerKey = ConsumerGroupKey | ConsumerMemberKey
ConsumerValue = (GroupEpochValue | PartitionMetadataValue | MemberMetadataValue | TargetEpochValue
                 | TargetMemberValue | CurrentAssignmentValue)


def assignment_out(assignment: Assignment) -> list[dict[str, object]]:
    """An assignment as TopicPartitions entries (also the share group records')."""
    # Sorted so that equal assignments are equal bytes (tests and log dumps compare them).
    return [{"topic_id": tid, "partitions": sorted(parts)} for tid, parts in sorted(assignment.items())
            if parts]


def _assigned_out(assignment: Assignment, epochs: AssignmentEpochs) -> list[dict[str, object]]:
    """A current assignment with each partition's assignment epoch (a tagged field, left out
    when an epoch is unknown, as in records written before Kafka 4.3)."""
    out: list[dict[str, object]] = []
    for topic_id, parts in sorted(assignment.items()):
        if parts:
            partitions = sorted(parts)
            known = [epochs.get((topic_id, p)) for p in partitions]
            out.append({"topic_id": topic_id, "partitions": partitions,
                        "assignment_epochs": None if None in known else known})
    return out


def _assigned_epochs_in(entries: list[dict[str, Any]]) -> AssignmentEpochs:
    epochs: AssignmentEpochs = {}
    for e in entries:
        if e.get("assignment_epochs") is not None and len(e["assignment_epochs"]) == len(e["partitions"]):
            epochs.update(((e["topic_id"], p), epoch) for p, epoch in zip(e["partitions"], e["assignment_epochs"],
                                                                          strict=True))
    return epochs


def assignment_in(entries: list[dict[str, Any]]) -> Assignment:
    out: Assignment = {}
    for e in entries:
        parts: frozenset[int] = frozenset(e["partitions"])
        if parts:
            tid: uuid.UUID = e["topic_id"]
            out[tid] = out.get(tid, frozenset()) | parts
    return out


def encode_group_key(record_type: int, group: str, member_id: str | None) -> bytes:
    """A group record key (consumer and share groups alike): the type, the group id and, for a
    member's record, the member id."""
    w = Writer()
    w.int16(record_type)
    if member_id is not None:
        _MEMBER_KEY.encode(w, {"group_id": group, "member_id": member_id}, False, 0, False)
    else:
        _GROUP_KEY.encode(w, {"group_id": group}, False, 0, False)
    return bytes(w.buf)


def decode_group_key(r: Reader, member: bool) -> tuple[str, str | None]:
    """(group id, member id or None) of a group record key whose type was read already."""
    if member:
        body = _MEMBER_KEY.decode(r, False, 0, False)
        return body["group_id"], body["member_id"]
    return _GROUP_KEY.decode(r, False, 0, False)["group_id"], None


def encode_value_v0(struct: Struct, body: dict[str, object]) -> bytes:
    """A record value: version 0, then the flexible struct."""
    w = Writer()
    w.int16(0)
    struct.encode(w, body, True, 0, False)
    return bytes(w.buf)


def decode_value_v0(struct: Struct, data: bytes, what: str) -> dict[str, Any]:
    r = Reader(data)
    version = r.int16()
    if version != 0:
        raise DecodeError(f"{what}: unknown value version {version}")
    body: dict[str, Any] = struct.decode(r, True, 0, False)
    return body


def encode_consumer_key(key: ConsumerKey) -> bytes:
    return encode_group_key(key.record_type, key.group,
                            key.member_id if isinstance(key, ConsumerMemberKey) else None)


def decode_consumer_key(record_type: int, r: Reader) -> ConsumerKey:
    group, member_id = decode_group_key(r, record_type in (MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER,
                                                           CURRENT_MEMBER_ASSIGNMENT))
    if member_id is not None:
        return ConsumerMemberKey(record_type, group, member_id)
    return ConsumerGroupKey(record_type, group)


def _value_struct_and_body(value: ConsumerValue) -> tuple[Struct, dict[str, object]]:
    if isinstance(value, GroupEpochValue):
        return _GROUP_METADATA_VALUE, {"epoch": value.epoch, "metadata_hash": value.metadata_hash}
    if isinstance(value, PartitionMetadataValue):
        return _PARTITION_METADATA_VALUE, {"topics": [
            {"topic_id": t.topic_id, "topic_name": t.name, "num_partitions": t.num_partitions,
             "partition_metadata": [{"partition": p, "racks": list(racks)} for p, racks in enumerate(t.racks)
                                    if racks]}
            for t in value.topics]}
    if isinstance(value, MemberMetadataValue):
        return _MEMBER_METADATA_VALUE, {
            "instance_id": value.instance_id, "rack_id": value.rack_id, "client_id": value.client_id,
            "client_host": value.client_host, "subscribed_topic_names": list(value.subscribed_topic_names),
            "subscribed_topic_regex": value.subscribed_topic_regex,
            "rebalance_timeout_ms": value.rebalance_timeout_ms, "server_assignor": value.server_assignor,
            "classic_member_metadata": EXPLICIT_NULL if value.classic is None else {
                "session_timeout_ms": value.classic.session_timeout_ms,
                "supported_protocols": [{"name": n, "metadata": m} for n, m in value.classic.protocols]}}
    if isinstance(value, TargetEpochValue):
        return _TARGET_METADATA_VALUE, {"assignment_epoch": value.assignment_epoch,
                                        "assignment_timestamp": value.assignment_timestamp}
    if isinstance(value, TargetMemberValue):
        return _TARGET_MEMBER_VALUE, {"topic_partitions": assignment_out(value.partitions)}
    return _CURRENT_ASSIGNMENT_VALUE, {
        "member_epoch": value.member_epoch, "previous_member_epoch": value.previous_member_epoch,
        "state": value.state, "assigned_partitions": _assigned_out(value.assigned, value.assignment_epochs),
        "partitions_pending_revocation": _assigned_out(value.pending_revocation, value.assignment_epochs)}


def encode_consumer_value(value: ConsumerValue) -> bytes:
    return encode_value_v0(*_value_struct_and_body(value))


_VALUE_STRUCTS = {
    GROUP_METADATA: _GROUP_METADATA_VALUE,
    PARTITION_METADATA: _PARTITION_METADATA_VALUE,
    MEMBER_METADATA: _MEMBER_METADATA_VALUE,
    TARGET_ASSIGNMENT_METADATA: _TARGET_METADATA_VALUE,
    TARGET_ASSIGNMENT_MEMBER: _TARGET_MEMBER_VALUE,
    CURRENT_MEMBER_ASSIGNMENT: _CURRENT_ASSIGNMENT_VALUE,
}


def decode_consumer_value(record_type: int, data: bytes) -> ConsumerValue:
    body = decode_value_v0(_VALUE_STRUCTS[record_type], data, f"consumer group record type {record_type}")
    if record_type == GROUP_METADATA:
        return GroupEpochValue(body["epoch"], body["metadata_hash"])
    if record_type == PARTITION_METADATA:
        topics = []
        for t in body["topics"]:
            racks: list[tuple[str, ...]] = [() for _ in range(max(t["num_partitions"], 0))]
            for pm in t["partition_metadata"]:
                if 0 <= pm["partition"] < len(racks):
                    racks[pm["partition"]] = tuple(pm["racks"])
            topics.append(TopicMetadata(t["topic_id"], t["topic_name"], t["num_partitions"], tuple(racks)))
        return PartitionMetadataValue(tuple(topics))
    if record_type == MEMBER_METADATA:
        classic = body["classic_member_metadata"]
        return MemberMetadataValue(
            body["instance_id"], body["rack_id"], body["client_id"], body["client_host"],
            tuple(body["subscribed_topic_names"]), body["subscribed_topic_regex"], body["rebalance_timeout_ms"],
            body["server_assignor"],
            None if classic is None else ClassicMemberMetadata(
                classic["session_timeout_ms"],
                tuple((p["name"], bytes(p["metadata"])) for p in classic["supported_protocols"])))
    if record_type == TARGET_ASSIGNMENT_METADATA:
        return TargetEpochValue(body["assignment_epoch"], body["assignment_timestamp"])
    if record_type == TARGET_ASSIGNMENT_MEMBER:
        return TargetMemberValue(assignment_in(body["topic_partitions"]))
    return CurrentAssignmentValue(body["member_epoch"], body["previous_member_epoch"], body["state"],
                                  assignment_in(body["assigned_partitions"]),
                                  assignment_in(body["partitions_pending_revocation"]),
                                  {**_assigned_epochs_in(body["assigned_partitions"]),
                                   **_assigned_epochs_in(body["partitions_pending_revocation"])})
