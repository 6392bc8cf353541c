"""The records the group coordinator keeps in ``__consumer_offsets``, in Kafka's formats.

Every record's key and value start with an int16 version; the key version also says what the
record is (Kafka's ``coordinator-key`` api keys):

- key version 0 or 1: an offset commit, key ``OffsetCommitKey`` (group, topic, partition),
  value ``OffsetCommitValue``. Kafka writes key version 1 and value version 3 (version 1 when
  the commit carried a retention time, so the expire timestamp can be stored);
- key version 2: group metadata, key ``GroupMetadataKey`` (group), value
  ``GroupMetadataValue``; Kafka writes value version 3;
- key versions 3 to 8: records of KIP-848 consumer groups (``consumer_records.py``);
- key versions 10 to 14: records of KIP-932 share groups (``share_records.py``);
- other key versions (KIP-848's regular expressions, share groups' type 15, streams groups): not written by
  Riverlog; a log that holds them (written by Kafka) is read past them.

A null value (tombstone) deletes the key: compaction eventually drops both. The layouts
follow the JSON specs in Kafka's ``group-coordinator/src/main/resources/common/message``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..protocol.primitives import DecodeError, Reader, Writer
from ..protocol.schema import BYTES, INT32, INT64, NULL, STRING, Array, Struct, f
from .consumer_records import (
    CONSUMER_KEY_TYPES,
    ConsumerGroupKey,
    ConsumerKey,
    ConsumerMemberKey,
    ConsumerValue,
    decode_consumer_key,
    decode_consumer_value,
    encode_consumer_key,
    encode_consumer_value,
)
from .share_records import (
    SHARE_KEY_TYPES,
    ShareGroupKey,
    ShareKey,
    ShareMemberKey,
    ShareValue,
    decode_share_key,
    decode_share_value,
    encode_share_key,
    encode_share_value,
)

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_METADATA_VALUE_VERSION = 3

# Value versions from which the value is a flexible (compact, tagged-field) struct.
_OFFSET_COMMIT_VALUE_FLEXIBLE = 4
_GROUP_METADATA_VALUE_FLEXIBLE = 4
_MAX_OFFSET_COMMIT_VALUE = 4
_MAX_GROUP_METADATA_VALUE = 4

_OFFSET_COMMIT_KEY = Struct([
    f("group", STRING),
    f("topic", STRING),
    f("partition", INT32),
])

_OFFSET_COMMIT_VALUE = Struct([
    f("offset", INT64),
    f("leader_epoch", INT32, "3+", default=-1),
    f("metadata", STRING),
    f("commit_timestamp", INT64),
    f("expire_timestamp", INT64, "1", default=-1),
])

_GROUP_METADATA_KEY = Struct([f("group", STRING)])

_MEMBER_METADATA = Struct([
    f("member_id", STRING),
    f("group_instance_id", STRING, "3+", nullable="3+", default=NULL),
    f("client_id", STRING),
    f("client_host", STRING),
    f("rebalance_timeout", INT32, "1+", default=-1),
    f("session_timeout", INT32),
    f("subscription", BYTES),
    f("assignment", BYTES),
])

_GROUP_METADATA_VALUE = Struct([
    f("protocol_type", STRING),
    f("generation", INT32),
    f("protocol", STRING, nullable="0+"),
    f("leader", STRING, nullable="0+"),
    f("current_state_timestamp", INT64, "2+", default=-1),
    f("members", Array(_MEMBER_METADATA)),
])


@dataclass(frozen=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class OffsetCommitValue:
    offset: int
    metadata: str
    commit_timestamp: int
    leader_epoch: int = -1
    expire_timestamp: int = -1  # only stored in value version 1 (commits with a retention time)


@dataclass(frozen=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: tuple[MemberMetadata, ...] = field(default_factory=tuple)


RecordKey = OffsetCommitKey | GroupMetadataKey | ConsumerKey | ShareKey
RecordValue = OffsetCommitValue | GroupMetadataValue | ConsumerValue | ShareValue


@dataclass(frozen=True)
class CoordinatorRecord:
    """One key/value pair for ``__consumer_offsets``; ``value`` None is a tombstone."""

    key: RecordKey
    value: RecordValue | None


class UnknownRecord(Exception):
    """A key version this coordinator does not understand (another group type's record)."""


# Encoding -------------------------------------------------------------------------------


def _with_version(version: int, struct: Struct, body: dict[str, object], flexible: bool) -> bytes:
    w = Writer()
    w.int16(version)
    struct.encode(w, body, flexible, version, False)
    return bytes(w.buf)


def encode_key(key: RecordKey) -> bytes:
    if isinstance(key, ConsumerGroupKey | ConsumerMemberKey):
        return encode_consumer_key(key)
    if isinstance(key, ShareGroupKey | ShareMemberKey):
        return encode_share_key(key)
    if isinstance(key, OffsetCommitKey):
        return _with_version(OFFSET_COMMIT_KEY_VERSION, _OFFSET_COMMIT_KEY,
                             {"group": key.group, "topic": key.topic, "partition": key.partition}, False)
    return _with_version(GROUP_METADATA_KEY_VERSION, _GROUP_METADATA_KEY, {"group": key.group}, False)


def encode_value(value: RecordValue | None) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, ShareValue):
        return encode_share_value(value)
    if not isinstance(value, OffsetCommitValue | GroupMetadataValue):
        return encode_consumer_value(value)
    if isinstance(value, OffsetCommitValue):
        # Kafka keeps the legacy version 1 only for commits that carry an expire timestamp.
        version = OFFSET_COMMIT_VALUE_VERSION if value.expire_timestamp < 0 else OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY
        return _with_version(version, _OFFSET_COMMIT_VALUE, {
            "offset": value.offset, "leader_epoch": value.leader_epoch, "metadata": value.metadata,
            "commit_timestamp": value.commit_timestamp, "expire_timestamp": value.expire_timestamp,
        }, False)
    members = [
        {"member_id": m.member_id, "group_instance_id": m.group_instance_id, "client_id": m.client_id,
         "client_host": m.client_host, "rebalance_timeout": m.rebalance_timeout,
         "session_timeout": m.session_timeout, "subscription": m.subscription, "assignment": m.assignment}
        for m in value.members
    ]
    return _with_version(GROUP_METADATA_VALUE_VERSION, _GROUP_METADATA_VALUE, {
        "protocol_type": value.protocol_type, "generation": value.generation, "protocol": value.protocol,
        "leader": value.leader, "current_state_timestamp": value.current_state_timestamp, "members": members,
    }, False)


def encode(record: CoordinatorRecord) -> tuple[bytes, bytes | None]:
    return encode_key(record.key), encode_value(record.value)


# Decoding -------------------------------------------------------------------------------


def decode_key(data: bytes) -> RecordKey:
    r = Reader(data)
    version = r.int16()
    if version in (0, 1):
        body = _OFFSET_COMMIT_KEY.decode(r, False, version, False)
        return OffsetCommitKey(body["group"], body["topic"], body["partition"])
    if version == GROUP_METADATA_KEY_VERSION:
        body = _GROUP_METADATA_KEY.decode(r, False, version, False)
        return GroupMetadataKey(body["group"])
    if version in CONSUMER_KEY_TYPES:
        return decode_consumer_key(version, r)
    if version in SHARE_KEY_TYPES:
        return decode_share_key(version, r)
    raise UnknownRecord(f"record key version {version}")


def decode_value(key: RecordKey, data: bytes | None) -> RecordValue | None:
    if data is None:
        return None
    if isinstance(key, ConsumerGroupKey | ConsumerMemberKey):
        return decode_consumer_value(key.record_type, data)
    if isinstance(key, ShareGroupKey | ShareMemberKey):
        return decode_share_value(key.record_type, data)
    r = Reader(data)
    version = r.int16()
    if isinstance(key, OffsetCommitKey):
        if not 0 <= version <= _MAX_OFFSET_COMMIT_VALUE:
            raise DecodeError(f"unknown OffsetCommitValue version {version}")
        body = _OFFSET_COMMIT_VALUE.decode(r, version >= _OFFSET_COMMIT_VALUE_FLEXIBLE, version, False)
        return OffsetCommitValue(body["offset"], body["metadata"], body["commit_timestamp"],
                                 body["leader_epoch"], body["expire_timestamp"])
    if not 0 <= version <= _MAX_GROUP_METADATA_VALUE:
        raise DecodeError(f"unknown GroupMetadataValue version {version}")
    body = _GROUP_METADATA_VALUE.decode(r, version >= _GROUP_METADATA_VALUE_FLEXIBLE, version, False)
    members = tuple(
        MemberMetadata(m["member_id"], m["group_instance_id"], m["client_id"], m["client_host"],
                       m["rebalance_timeout"], m["session_timeout"], m["subscription"], m["assignment"])
        for m in body["members"]
    )
    return GroupMetadataValue(body["protocol_type"], body["generation"], body["protocol"], body["leader"],
                              body["current_state_timestamp"], members)


def decode(key: bytes, value: bytes | None) -> CoordinatorRecord:
    """Raises :class:`UnknownRecord` for other group types' records, DecodeError when corrupt."""
    decoded_key = decode_key(key)
    return CoordinatorRecord(decoded_key, decode_value(decoded_key, value))
