"""The records of the share coordinator's ``__share_group_state`` topic, in Kafka's formats.

A key starts with an int16 record type, then group id, topic id and partition (not flexible);
a value with an int16 version (0) and a flexible struct. Kafka's share coordinator writes
ShareUpdate records (type 1: the batches that changed) and every so often a ShareSnapshot (type
0: the whole state). Riverlog's leader always sends the whole in-flight state, so Riverlog
writes only snapshots -- compaction then keeps one record per share-partition -- and reads both
(an update is applied on top of the snapshot before it) in a log Kafka wrote.

A null value deletes the share-partition's state (DeleteShareGroupState).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from ..protocol.primitives import DecodeError, Reader, Writer
from ..protocol.schema import INT8, INT16, INT32, INT64, STRING, UUID, Array, Struct, f
from .partition import StateBatch

SNAPSHOT = 0
UPDATE = 1

_KEY = Struct([f("group_id", STRING), f("topic_id", UUID), f("partition", INT32)])
_STATE_BATCH = Struct([
    f("first_offset", INT64),
    f("last_offset", INT64),
    f("delivery_state", INT8),
    f("delivery_count", INT16),
])
_SNAPSHOT_VALUE = Struct([
    f("snapshot_epoch", INT32),
    f("state_epoch", INT32),
    f("leader_epoch", INT32),
    f("start_offset", INT64),
    f("delivery_complete_count", INT32, tag=0, tagged="0+", default=-1),
    f("create_timestamp", INT64),
    f("write_timestamp", INT64),
    f("state_batches", Array(_STATE_BATCH)),
])
_UPDATE_VALUE = Struct([
    f("snapshot_epoch", INT32),
    f("leader_epoch", INT32),
    f("start_offset", INT64),
    f("delivery_complete_count", INT32, tag=0, tagged="0+", default=-1),
    f("state_batches", Array(_STATE_BATCH)),
])


@dataclass(frozen=True)
class ShareStateKey:
    group_id: str
    topic_id: uuid.UUID
    partition: int


@dataclass(frozen=True)
class ShareSnapshot:
    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: tuple[StateBatch, ...]
    delivery_complete_count: int = -1
    create_timestamp: int = 0
    write_timestamp: int = 0


@dataclass(frozen=True)
class ShareUpdate:
    snapshot_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: tuple[StateBatch, ...]
    delivery_complete_count: int = -1


@dataclass(frozen=True)
class ShareStateRecord:
    key: ShareStateKey
    value: ShareSnapshot | ShareUpdate | None
    record_type: int = SNAPSHOT


def _batches_out(batches: tuple[StateBatch, ...]) -> list[dict[str, int]]:
    return [{"first_offset": b.first_offset, "last_offset": b.last_offset, "delivery_state": b.delivery_state,
             "delivery_count": b.delivery_count} for b in batches]


def _batches_in(entries: list[dict[str, int]]) -> tuple[StateBatch, ...]:
    return tuple(StateBatch(e["first_offset"], e["last_offset"], e["delivery_state"], e["delivery_count"])
                 for e in entries)


def encode(record: ShareStateRecord) -> tuple[bytes, bytes | None]:
    w = Writer()
    w.int16(record.record_type)
    _KEY.encode(w, {"group_id": record.key.group_id, "topic_id": record.key.topic_id,
                    "partition": record.key.partition}, False, 0, False)
    value = record.value
    if value is None:
        return bytes(w.buf), None
    v = Writer()
    v.int16(0)
    if isinstance(value, ShareSnapshot):
        _SNAPSHOT_VALUE.encode(v, {
            "snapshot_epoch": value.snapshot_epoch, "state_epoch": value.state_epoch,
            "leader_epoch": value.leader_epoch, "start_offset": value.start_offset,
            "delivery_complete_count": value.delivery_complete_count, "create_timestamp": value.create_timestamp,
            "write_timestamp": value.write_timestamp, "state_batches": _batches_out(value.state_batches)},
            True, 0, False)
    else:
        _UPDATE_VALUE.encode(v, {
            "snapshot_epoch": value.snapshot_epoch, "leader_epoch": value.leader_epoch,
            "start_offset": value.start_offset, "delivery_complete_count": value.delivery_complete_count,
            "state_batches": _batches_out(value.state_batches)}, True, 0, False)
    return bytes(w.buf), bytes(v.buf)


def decode(key: bytes, value: bytes | None) -> ShareStateRecord:
    r = Reader(key)
    record_type = r.int16()
    if record_type not in (SNAPSHOT, UPDATE):
        raise DecodeError(f"share state record type {record_type}")
    k = _KEY.decode(r, False, 0, False)
    state_key = ShareStateKey(k["group_id"], k["topic_id"], k["partition"])
    if value is None:
        return ShareStateRecord(state_key, None, record_type)
    rv = Reader(value)
    version = rv.int16()
    if version != 0:
        raise DecodeError(f"share state record type {record_type}: unknown value version {version}")
    if record_type == SNAPSHOT:
        body = _SNAPSHOT_VALUE.decode(rv, True, 0, False)
        return ShareStateRecord(state_key, ShareSnapshot(
            body["snapshot_epoch"], body["state_epoch"], body["leader_epoch"], body["start_offset"],
            _batches_in(body["state_batches"]), body["delivery_complete_count"], body["create_timestamp"],
            body["write_timestamp"]), SNAPSHOT)
    body = _UPDATE_VALUE.decode(rv, True, 0, False)
    return ShareStateRecord(state_key, ShareUpdate(
        body["snapshot_epoch"], body["leader_epoch"], body["start_offset"], _batches_in(body["state_batches"]),
        body["delivery_complete_count"]), UPDATE)
