"""The ``__consumer_offsets`` records of KIP-932 share groups, in Kafka's formats.

As for consumer groups (``consumer_records.py``) a key starts with an int16 naming the record type,
a value with an int16 version (0); keys are not flexible, values are. The layouts follow Kafka's
``ShareGroup*Key``/``Value`` JSON specs (group-coordinator):

====  ========================================  =============================================
type  key (group id, and member id for 10/13/14)  value
====  ========================================  =============================================
10    ShareGroupMemberMetadata                   a member's rack, client and subscription
11    ShareGroupMetadata                         the group epoch (and metadata hash)
12    ShareGroupTargetAssignmentMetadata         the epoch of the target assignment
13    ShareGroupTargetAssignmentMember           a member's target partitions
14    ShareGroupCurrentMemberAssignment          a member's epochs, state and partitions
15    ShareGroupStatePartitionMetadata           the topics whose share state the group may have
====  ========================================  =============================================

Riverlog writes type 15's initialized topics as the topics ever assigned in the group (a
partition leader creates the share state on first fetch, so Kafka's initializing and deleting
lists stay empty): deleting the group deletes their share state. A null value deletes the key.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from ..protocol.primitives import Reader
from ..protocol.schema import INT8, INT32, INT64, STRING, UUID, Array, Struct, f
from .consumer_records import (
    Assignment,
    assignment_in,
    assignment_out,
    decode_group_key,
    decode_value_v0,
    encode_group_key,
    encode_value_v0,
)

SHARE_MEMBER_METADATA = 10
SHARE_GROUP_METADATA = 11
SHARE_TARGET_ASSIGNMENT_METADATA = 12
SHARE_TARGET_ASSIGNMENT_MEMBER = 13
SHARE_CURRENT_MEMBER_ASSIGNMENT = 14
SHARE_STATE_PARTITION_METADATA = 15
SHARE_KEY_TYPES = frozenset(range(SHARE_MEMBER_METADATA, SHARE_STATE_PARTITION_METADATA + 1))
_MEMBER_TYPES = (SHARE_MEMBER_METADATA, SHARE_TARGET_ASSIGNMENT_MEMBER, SHARE_CURRENT_MEMBER_ASSIGNMENT)

_TOPIC_PARTITIONS = Struct([f("topic_id", UUID), f("partitions", Array(INT32))])

_MEMBER_METADATA_VALUE = Struct([
    f("rack_id", STRING, nullable="0+"),
    f("client_id", STRING),
    f("client_host", STRING),
    f("subscribed_topic_names", Array(STRING)),
])
_GROUP_METADATA_VALUE = Struct([
    f("epoch", INT32),
    f("metadata_hash", INT64),
])
_TARGET_METADATA_VALUE = Struct([
    f("assignment_epoch", INT32),
    f("assignment_timestamp", INT64, tag=0, tagged="0+", default=0),
])
_TARGET_MEMBER_VALUE = Struct([f("topic_partitions", Array(_TOPIC_PARTITIONS))])
_TOPIC_PARTITIONS_INFO = Struct([f("topic_id", UUID), f("topic_name", STRING), f("partitions", Array(INT32))])
_STATE_PARTITION_METADATA_VALUE = Struct([
    f("initializing_topics", Array(_TOPIC_PARTITIONS_INFO)),
    f("initialized_topics", Array(_TOPIC_PARTITIONS_INFO)),
    f("deleting_topics", Array(Struct([f("topic_id", UUID), f("topic_name", STRING)]))),
])
_CURRENT_ASSIGNMENT_VALUE = Struct([
    f("member_epoch", INT32),
    f("previous_member_epoch", INT32),
    f("state", INT8),
    f("assigned_partitions", Array(_TOPIC_PARTITIONS)),
])


@dataclass(frozen=True)
class ShareGroupKey:
    """Key of record types 11 and 12 (group-wide)."""

    record_type: int
    group: str


@dataclass(frozen=True)
class ShareMemberKey:
    """Key of record types 10, 13 and 14 (one member)."""

    record_type: int
    group: str
    member_id: str


@dataclass(frozen=True)
class ShareMemberMetadataValue:
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]


@dataclass(frozen=True)
class ShareGroupEpochValue:
    epoch: int
    metadata_hash: int = 0


@dataclass(frozen=True)
class ShareTargetEpochValue:
    assignment_epoch: int
    assignment_timestamp: int = 0


@dataclass(frozen=True)
class ShareTargetMemberValue:
    partitions: Assignment = field(default_factory=dict)


@dataclass(frozen=True)
class ShareCurrentAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: Assignment = field(default_factory=dict)


@dataclass(frozen=True)
class ShareStateTopicsValue:
    """Type 15: topic id -> (name, partitions) whose share state the group may have."""

    initialized: tuple[tuple[uuid.UUID, str, tuple[int, ...]], ...] = ()


ShareKey = ShareGroupKey | ShareMemberKey
ShareValue = (ShareMemberMetadataValue | ShareGroupEpochValue | ShareTargetEpochValue | ShareTargetMemberValue
              | ShareCurrentAssignmentValue | ShareStateTopicsValue)


def encode_share_key(key: ShareKey) -> bytes:
    return encode_group_key(key.record_type, key.group, key.member_id if isinstance(key, ShareMemberKey) else None)


def decode_share_key(record_type: int, r: Reader) -> ShareKey:
    group, member_id = decode_group_key(r, record_type in _MEMBER_TYPES)
    if member_id is not None:
        return ShareMemberKey(record_type, group, member_id)
    return ShareGroupKey(record_type, group)


def _value_struct_and_body(value: ShareValue) -> tuple[Struct, dict[str, object]]:
    if isinstance(value, ShareMemberMetadataValue):
        return _MEMBER_METADATA_VALUE, {"rack_id": value.rack_id, "client_id": value.client_id,
                                        "client_host": value.client_host,
                                        "subscribed_topic_names": list(value.subscribed_topic_names)}
    if isinstance(value, ShareGroupEpochValue):
        return _GROUP_METADATA_VALUE, {"epoch": value.epoch, "metadata_hash": value.metadata_hash}
    if isinstance(value, ShareTargetEpochValue):
        return _TARGET_METADATA_VALUE, {"assignment_epoch": value.assignment_epoch,
                                        "assignment_timestamp": value.assignment_timestamp}
    if isinstance(value, ShareTargetMemberValue):
        return _TARGET_MEMBER_VALUE, {"topic_partitions": assignment_out(value.partitions)}
    if isinstance(value, ShareStateTopicsValue):
        return _STATE_PARTITION_METADATA_VALUE, {
            "initializing_topics": [], "deleting_topics": [],
            "initialized_topics": [{"topic_id": t, "topic_name": n, "partitions": list(p)}
                                   for t, n, p in value.initialized]}
    return _CURRENT_ASSIGNMENT_VALUE, {
        "member_epoch": value.member_epoch, "previous_member_epoch": value.previous_member_epoch,
        "state": value.state, "assigned_partitions": assignment_out(value.assigned)}


def encode_share_value(value: ShareValue) -> bytes:
    return encode_value_v0(*_value_struct_and_body(value))


_VALUE_STRUCTS = {
    SHARE_MEMBER_METADATA: _MEMBER_METADATA_VALUE,
    SHARE_GROUP_METADATA: _GROUP_METADATA_VALUE,
    SHARE_TARGET_ASSIGNMENT_METADATA: _TARGET_METADATA_VALUE,
    SHARE_TARGET_ASSIGNMENT_MEMBER: _TARGET_MEMBER_VALUE,
    SHARE_CURRENT_MEMBER_ASSIGNMENT: _CURRENT_ASSIGNMENT_VALUE,
    SHARE_STATE_PARTITION_METADATA: _STATE_PARTITION_METADATA_VALUE,
}


def decode_share_value(record_type: int, data: bytes) -> ShareValue:
    body = decode_value_v0(_VALUE_STRUCTS[record_type], data, f"share group record type {record_type}")
    if record_type == SHARE_MEMBER_METADATA:
        return ShareMemberMetadataValue(body["rack_id"], body["client_id"], body["client_host"],
                                        tuple(body["subscribed_topic_names"]))
    if record_type == SHARE_GROUP_METADATA:
        return ShareGroupEpochValue(body["epoch"], body["metadata_hash"])
    if record_type == SHARE_TARGET_ASSIGNMENT_METADATA:
        return ShareTargetEpochValue(body["assignment_epoch"], body["assignment_timestamp"])
    if record_type == SHARE_TARGET_ASSIGNMENT_MEMBER:
        return ShareTargetMemberValue(assignment_in(body["topic_partitions"]))
    if record_type == SHARE_STATE_PARTITION_METADATA:
        # Kafka's initializing topics may have share state too: kept with the initialized ones.
        topics = [*body["initializing_topics"], *body["initialized_topics"]]
        return ShareStateTopicsValue(tuple((t["topic_id"], t["topic_name"], tuple(t["partitions"])) for t in topics))
    return ShareCurrentAssignmentValue(body["member_epoch"], body["previous_member_epoch"], body["state"],
                                       assignment_in(body["assigned_partitions"]))
