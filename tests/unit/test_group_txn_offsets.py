"""Transactional offset commits in the pure group state machine: TxnOffsetCommit validation,
pending offsets, their completion by transaction markers, OffsetFetch ``require_stable``,
deletion and expiry while a transaction is open, and rebuilding from a log that holds
transactional batches and markers."""

from __future__ import annotations

import asyncio
import struct
from dataclasses import dataclass, field
from typing import Any

import pytest
from riverlog.coordinator.config import GroupConfig
from riverlog.coordinator.group import GroupState
from riverlog.coordinator.offsets import OffsetAndMetadata
from riverlog.coordinator.records import (
    CoordinatorRecord,
    GroupMetadataKey,
    OffsetCommitKey,
    OffsetCommitValue,
    encode,
)
from riverlog.coordinator.runtime import _Marker, _read_chunk
from riverlog.coordinator.shard import GroupShard
from riverlog.coordinator.txn_offsets import PendingTxnOffsets
from riverlog.handlers.group_offsets import handle_offset_fetch, handle_txn_offset_commit
from riverlog.protocol.errors import ErrorCode
from riverlog.protocol.record_batch import NewRecord, build_batch
from riverlog.security.access import AccessControl, allow_all
from support.group_harness import Harness, subscription

pytestmark = pytest.mark.unit

E = ErrorCode
DAY = 24 * 3_600_000
PID, OTHER = 7, 8


def _errors(h: Harness, token: int) -> dict[tuple[str, int], ErrorCode]:
    return h.commit_errors(token)


# TxnOffsetCommit --------------------------------------------------------------------------


def test_txn_commit_is_pending_until_the_commit_marker() -> None:
    h = Harness()
    h.commit({("t", 0): 3})
    token = h.txn_commit({("t", 0): 10, ("t", 1): 11}, producer_id=PID, producer_epoch=4)
    assert _errors(h, token) == {("t", 0): E.NONE, ("t", 1): E.NONE}
    # Written as one transactional batch of the producer.
    (pid, epoch, records), = h.txn_written
    assert (pid, epoch) == (PID, 4)
    assert [r.key for r in records] == [OffsetCommitKey("g", "t", 0), OffsetCommitKey("g", "t", 1)]
    # Invisible to a plain fetch; require_stable says the partitions are unstable.
    assert h.fetch({"t": [0, 1]}) == {("t", 0): 3, ("t", 1): -1}
    assert h.fetch_stable({"t": [0, 1, 2]}) == {("t", 0): (-1, E.UNSTABLE_OFFSET_COMMIT),
                                                ("t", 1): (-1, E.UNSTABLE_OFFSET_COMMIT),
                                                ("t", 2): (-1, E.NONE)}
    h.marker(PID, committed=True)
    assert h.fetch({"t": [0, 1]}) == {("t", 0): 10, ("t", 1): 11}
    assert h.fetch_stable({"t": [0, 1]}) == {("t", 0): (10, E.NONE), ("t", 1): (11, E.NONE)}
    assert len(h.shard.pending_txn_offsets) == 0


def test_abort_marker_drops_the_pending_offsets() -> None:
    h = Harness()
    h.commit({("t", 0): 3})
    h.txn_commit({("t", 0): 10}, producer_id=PID)
    h.marker(PID, committed=False)
    assert h.fetch_stable({"t": [0]}) == {("t", 0): (3, E.NONE)}
    # A marker replayed again, or for a producer without pending offsets, changes nothing.
    h.marker(PID, committed=True)
    h.marker(99, committed=True)
    assert h.fetch({"t": [0]}) == {("t", 0): 3}


def test_pending_offsets_are_kept_per_producer() -> None:
    h = Harness()
    h.txn_commit({("t", 0): 10}, producer_id=PID)
    h.txn_commit({("t", 0): 20}, producer_id=OTHER)
    h.marker(PID, committed=False)
    assert h.fetch_stable({"t": [0]}) == {("t", 0): (-1, E.UNSTABLE_OFFSET_COMMIT)}  # OTHER still open
    h.marker(OTHER, committed=True)
    assert h.fetch_stable({"t": [0]}) == {("t", 0): (20, E.NONE)}


def test_a_later_plain_commit_wins_over_an_earlier_transactional_one() -> None:
    h = Harness()
    h.txn_commit({("t", 0): 10}, producer_id=PID)
    h.commit({("t", 0): 12})  # written after the transactional offset
    h.marker(PID, committed=True)
    assert h.fetch({"t": [0]}) == {("t", 0): 12}
    # ... while a transactional commit written after the plain one replaces it.
    h.txn_commit({("t", 0): 15}, producer_id=PID)
    h.marker(PID, committed=True)
    assert h.fetch({"t": [0]}) == {("t", 0): 15}


def test_fetch_all_with_require_stable_reports_only_committed_partitions() -> None:
    h = Harness()
    h.commit({("t", 0): 3})
    h.txn_commit({("t", 0): 10, ("u", 0): 1}, producer_id=PID)
    # As Kafka: partitions with only a pending offset are not listed; committed ones that have
    # a pending offset too are unstable.
    assert h.fetch_stable(None) == {("t", 0): (-1, E.UNSTABLE_OFFSET_COMMIT)}
    assert h.fetch(None) == {("t", 0): 3}


def test_txn_commit_creates_a_simple_group_and_checks_metadata_size() -> None:
    h = Harness(GroupConfig(initial_rebalance_delay_ms=0, offset_metadata_max_bytes=4))
    token = h.txn_commit({("t", 0): 1}, metadata="too long")
    assert _errors(h, token) == {("t", 0): E.OFFSET_METADATA_TOO_LARGE}
    assert h.txn_written == []
    token = h.txn_commit({("t", 0): 1}, metadata="ok")
    assert _errors(h, token) == {("t", 0): E.NONE}
    group = h.group()
    assert group.state is GroupState.EMPTY and group.protocol_type is None


def test_txn_commit_without_a_producer_id_is_refused() -> None:
    h = Harness()
    assert _errors(h, h.txn_commit({("t", 0): 1}, producer_id=-1)) == {("t", 0): E.INVALID_PRODUCER_ID_MAPPING}
    assert h.txn_written == [] and h.fetch({"t": [0]}) == {("t", 0): -1}


def test_txn_commit_to_an_unknown_group_with_a_generation_is_illegal_generation() -> None:
    h = Harness()
    # Never GROUP_ID_NOT_FOUND, whatever the version (unlike OffsetCommit v9+).
    token = h.txn_commit({("t", 0): 1}, generation=2, member_id="m", version=5)
    assert _errors(h, token) == {("t", 0): E.ILLEGAL_GENERATION}
    assert h.group() is None


def test_txn_commit_checks_member_and_generation_but_not_the_group_state() -> None:
    h = Harness()
    leader, follower = h.stable_group(2)
    assert _errors(h, h.txn_commit({("t", 0): 1}, generation=1, member_id=follower)) == {("t", 0): E.NONE}
    assert _errors(h, h.txn_commit({("t", 0): 1}, generation=0, member_id=follower)) == \
        {("t", 0): E.ILLEGAL_GENERATION}
    assert _errors(h, h.txn_commit({("t", 0): 1}, generation=1, member_id="stranger")) == \
        {("t", 0): E.UNKNOWN_MEMBER_ID}
    # Versions 0-2 carry no member id nor generation: accepted on a group in use.
    assert _errors(h, h.txn_commit({("t", 0): 1}, version=2)) == {("t", 0): E.NONE}
    # A rebalance in its CompletingRebalance phase does not stop transactional commits.
    token = h.join_new()
    h.heartbeat(leader, 1)
    h.heartbeat(follower, 1)
    rejoin = [h.join(m) for m in (leader, follower)]
    assert all(h.error(t) == E.NONE for t in rejoin)
    assert h.group().state is GroupState.COMPLETING_REBALANCE
    assert _errors(h, h.txn_commit({("t", 0): 2}, generation=2, member_id=follower)) == {("t", 0): E.NONE}
    assert h.error(token) == E.NONE


def test_txn_commit_by_a_fenced_static_member() -> None:
    h = Harness()
    (member,) = h.stable_group(1, instances=["i-1"])
    token = h.txn_commit({("t", 0): 1}, generation=1, member_id="other", instance="i-1")
    assert _errors(h, token) == {("t", 0): E.FENCED_INSTANCE_ID}
    token = h.txn_commit({("t", 0): 1}, generation=1, member_id=member, instance="i-1")
    assert _errors(h, token) == {("t", 0): E.NONE}


def test_failed_transactional_write_leaves_nothing_pending() -> None:
    h = Harness(hold_writes=True)
    token = h.txn_commit({("t", 0): 1}, producer_id=PID)
    assert h.reply(token) is None
    assert h.fetch_stable({"t": [0]}) == {("t", 0): (-1, E.NONE)}  # not durable yet: not pending
    h.release_writes(E.INVALID_PRODUCER_EPOCH)
    assert _errors(h, token) == {("t", 0): E.INVALID_PRODUCER_EPOCH}
    assert len(h.shard.pending_txn_offsets) == 0


# Deletion and expiry with open transactions ------------------------------------------------


def test_delete_group_drops_pending_offsets() -> None:
    h = Harness()
    h.commit({("t", 0): 1})
    h.txn_commit({("t", 0): 5, ("u", 0): 6}, producer_id=PID)
    token = h.run(h.shard.delete_groups, ["g"])
    assert h.replies[token]["results"] == [{"group_id": "g", "error_code": E.NONE}]
    tombstones = [r.key for r in h.written if r.value is None]
    # One tombstone per partition, committed or only pending.
    assert sorted(tombstones, key=repr) == sorted([OffsetCommitKey("g", "t", 0), OffsetCommitKey("g", "u", 0),
                                                   GroupMetadataKey("g")], key=repr)
    assert len(h.shard.pending_txn_offsets) == 0
    h.marker(PID, committed=True)  # the transaction commits later: nothing comes back
    assert h.fetch({"t": [0], "u": [0]}) == {("t", 0): -1, ("u", 0): -1}


def test_offset_delete_writes_a_tombstone_for_a_pending_offset() -> None:
    h = Harness()
    h.commit({("t", 1): 1})
    h.txn_commit({("t", 0): 5}, producer_id=PID)
    body = h.replies[h.run(h.shard.delete_offsets, "g", [("t", [0])])]
    assert body == {"error_code": E.NONE, "topics": [("t", [(0, E.NONE)])]}
    assert h.written[-1] == CoordinatorRecord(OffsetCommitKey("g", "t", 0), None)
    h.marker(PID, committed=True)
    assert h.fetch_stable({"t": [0, 1]}) == {("t", 0): (-1, E.NONE), ("t", 1): (1, E.NONE)}


def test_expiry_waits_for_open_transactions() -> None:
    config = GroupConfig(offsets_retention_ms=DAY, offsets_retention_check_interval_ms=3_600_000)
    h = Harness(config)
    h.commit({("t", 0): 1, ("t", 1): 1})
    h.txn_commit({("t", 0): 2}, producer_id=PID)
    h.advance(DAY + 3_600_000)
    # t-1 expired; t-0 has a pending offset: kept, and so is the group.
    assert h.fetch({"t": [0, 1]}) == {("t", 0): 1, ("t", 1): -1}
    assert "g" in h.shard.groups
    h.marker(PID, committed=True)
    assert h.fetch({"t": [0]}) == {("t", 0): 2}


def test_a_group_with_only_pending_offsets_is_not_expired() -> None:
    config = GroupConfig(offsets_retention_ms=DAY, offsets_retention_check_interval_ms=3_600_000)
    h = Harness(config)
    h.txn_commit({("t", 0): 2}, producer_id=PID)
    h.advance(2 * DAY)
    assert "g" in h.shard.groups
    h.marker(PID, committed=False)
    h.advance(3_600_000)
    assert "g" not in h.shard.groups  # nothing left: removed at the next check


def test_deleted_topics_drop_pending_offsets() -> None:
    h = Harness()
    h.txn_commit({("gone", 0): 1, ("kept", 0): 2}, producer_id=PID)
    h._apply(h.shard.run(h.now, h.shard.tombstone_deleted_topics, {"gone"}))
    assert h.written[-1] == CoordinatorRecord(OffsetCommitKey("g", "gone", 0), None)
    h.marker(PID, committed=True)
    assert h.fetch(None) == {("kept", 0): 2}


def test_consumer_group_with_pending_offsets_keeps_a_subscribed_member_working() -> None:
    h = Harness()
    (member,) = h.stable_group(1, protocols=(("range", subscription("t")),))
    assert _errors(h, h.txn_commit({("t", 0): 4}, generation=1, member_id=member)) == {("t", 0): E.NONE}
    h.marker(PID, committed=True)
    assert h.fetch_stable({"t": [0]}) == {("t", 0): (4, E.NONE)}


# The pending store ------------------------------------------------------------------------


def test_pending_store_indexes_by_partition() -> None:
    store = PendingTxnOffsets()
    value = OffsetAndMetadata(1, -1, "", 0, -1)
    store.put(PID, "g", "t", 0, value)
    store.put(OTHER, "g", "t", 0, value)
    store.put(OTHER, "g", "t", 1, value)
    assert store.has_pending("g", "t", 0) and store.has_group("g")
    assert sorted(store.partitions("g")) == [("t", 0), ("t", 1)]
    store.remove_partition("g", "t", 0)
    assert not store.has_pending("g", "t", 0) and store.producers() == [OTHER]
    completed = store.complete(OTHER)
    assert completed is not None and len(completed) == 1
    assert not store.has_group("g") and len(store) == 0 and store.complete(OTHER) is None


# Rebuilding from the log -------------------------------------------------------------------


@dataclass
class _BytesLog:
    """Just what ``_read_chunk`` reads of a log: its bytes and end offset."""

    data: bytes
    log_end_offset: int

    def read_records_bytes(self, offset: int, max_bytes: int) -> bytes:
        assert offset == 0
        return self.data


def _offset_record(group: str, topic: str, partition: int, offset: int) -> NewRecord:
    key, value = encode(CoordinatorRecord(OffsetCommitKey(group, topic, partition),
                                          OffsetCommitValue(offset, "", 1000)))
    return NewRecord(value=value, key=key, timestamp=1000)


def _marker(producer_id: int, committed: bool, base_offset: int) -> bytes:
    key = struct.pack(">hh", 0, 1 if committed else 0)
    value = struct.pack(">hi", 0, 3)  # version 0, coordinator epoch 3
    return build_batch([NewRecord(value=value, key=key, timestamp=1000)], base_offset=base_offset,
                       producer_id=producer_id, producer_epoch=0, transactional=True, control=True)


def _txn_batch(producer_id: int, base_offset: int, *records: NewRecord) -> bytes:
    return build_batch(list(records), base_offset=base_offset, producer_id=producer_id, producer_epoch=0,
                       transactional=True)


def _replay(data: bytes, end: int) -> GroupShard:
    items, next_offset = _read_chunk(_BytesLog(data, end), 0, 1 << 20)  # type: ignore[arg-type]
    assert next_offset == end
    shard = GroupShard(0, GroupConfig())
    for item in items:
        if isinstance(item, _Marker):
            shard.replay_marker(item.producer_id, item.committed)
        else:
            shard.replay(*item)
    shard.on_loaded(2000)
    return shard


def _fetch(shard: GroupShard, topics: dict[str, list[int]], stable: bool = False) -> dict[tuple[str, int], int]:
    return {(t["name"], p["partition_index"]): p["committed_offset"] if p["error_code"] == E.NONE
            else -p["error_code"] for t in shard.fetch_offsets("g", list(topics.items()), stable)
            for p in t["partitions"]}


def test_replay_of_transactional_batches_and_markers() -> None:
    data = b"".join([
        build_batch([_offset_record("g", "t", 0, 1)], base_offset=0),                      # 0 plain commit
        _txn_batch(PID, 1, _offset_record("g", "t", 0, 5), _offset_record("g", "t", 1, 6)),  # 1-2 pending
        _txn_batch(OTHER, 3, _offset_record("g", "t", 2, 9)),                               # 3 pending
        _marker(PID, True, 4),                                                              # 4 commit PID
        _marker(OTHER, False, 5),                                                           # 5 abort OTHER
        _txn_batch(PID, 6, _offset_record("g", "t", 3, 11)),                                # 6 still open
    ])
    shard = _replay(data, 7)
    assert _fetch(shard, {"t": [0, 1, 2, 3]}) == {("t", 0): 5, ("t", 1): 6, ("t", 2): -1, ("t", 3): -1}
    unstable = -int(E.UNSTABLE_OFFSET_COMMIT)
    assert _fetch(shard, {"t": [3]}, stable=True) == {("t", 3): unstable}
    assert shard.pending_txn_offsets.producers() == [PID]
    shard.complete_transaction(PID, True)  # the open transaction's marker arrives after loading
    assert _fetch(shard, {"t": [3]}, stable=True) == {("t", 3): 11}


def test_replay_keeps_a_plain_commit_written_after_a_transactional_one() -> None:
    data = b"".join([
        _txn_batch(PID, 0, _offset_record("g", "t", 0, 5)),
        build_batch([_offset_record("g", "t", 0, 8)], base_offset=1),
        _marker(PID, True, 2),
    ])
    assert _fetch(_replay(data, 3), {"t": [0]}) == {("t", 0): 8}


def test_replay_of_a_tombstone_drops_pending_offsets() -> None:
    key, _ = encode(CoordinatorRecord(OffsetCommitKey("g", "t", 0), None))
    data = b"".join([
        _txn_batch(PID, 0, _offset_record("g", "t", 0, 5)),
        build_batch([NewRecord(value=None, key=key, timestamp=1000)], base_offset=1),
        _marker(PID, True, 2),
    ])
    shard = _replay(data, 3)
    assert _fetch(shard, {"t": [0]}, stable=True) == {("t", 0): -1}
    assert len(shard.pending_txn_offsets) == 0


def test_unknown_control_records_are_skipped() -> None:
    # A control batch whose record is not a transaction marker (e.g. KRaft's): nothing to replay.
    odd = build_batch([NewRecord(value=b"\x00\x00", key=struct.pack(">hh", 0, 5), timestamp=1000)],
                      base_offset=1, producer_id=PID, producer_epoch=0, transactional=True, control=True)
    data = _txn_batch(PID, 0, _offset_record("g", "t", 0, 5)) + odd
    shard = _replay(data, 2)
    assert shard.pending_txn_offsets.producers() == [PID]


# The handlers: TxnOffsetCommit and OffsetFetch require_stable -----------------------------


@dataclass
class _Topic:
    partitions: dict[int, object]


@dataclass
class _Image:
    topics: dict[str, _Topic]


class _Coordinator:
    """Runs requests on a harness's shard, as ``GroupCoordinator.call`` / ``shard_for`` do."""

    def __init__(self, h: Harness) -> None:
        self.h = h

    async def call(self, group_id: str, operation: Any) -> Any:
        token = self.h.run(lambda t: operation(self.h.shard, t))
        return self.h.replies[token]

    def shard_for(self, group_id: str) -> GroupShard:
        return self.h.shard


@dataclass
class _Broker:
    image: _Image
    coordinator: _Coordinator
    config: _Config = field(default_factory=lambda: _Config())
    access: AccessControl = field(default_factory=allow_all)


class _Config:
    """Transaction verification (KIP-890) off: these handler tests have no transaction
    coordinator (test_transactions_verification covers it on the wire)."""

    def get_bool(self, key: str) -> bool:
        assert key == "transaction.partition.verification.enable"
        return False


@dataclass
class _Header:
    api_version: int


@dataclass
class _Ctx:
    header: _Header

    @property
    def version(self) -> int:
        return self.header.api_version


def _txn_request(group: str, topics: dict[str, list[int]]) -> dict[str, Any]:
    return {"transactional_id": "tx", "group_id": group, "producer_id": PID, "producer_epoch": 0,
            "generation_id": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": t, "partitions": [{"partition_index": p, "committed_offset": 40 + p,
                                                   "committed_leader_epoch": -1, "committed_metadata": ""}
                                                  for p in ps]} for t, ps in topics.items()]}


def test_txn_offset_commit_and_stable_fetch_handlers() -> None:
    h = Harness()
    broker = _Broker(_Image({"t": _Topic({0: None, 1: None})}), _Coordinator(h))
    response = asyncio.run(handle_txn_offset_commit(
        broker, _Ctx(_Header(3)), _txn_request("g", {"t": [0, 7], "nope": [0]})))  # type: ignore[arg-type]
    assert response == {"throttle_time_ms": 0, "topics": [
        {"name": "t", "partitions": [{"partition_index": 7, "error_code": E.UNKNOWN_TOPIC_OR_PARTITION},
                                     {"partition_index": 0, "error_code": E.NONE}]},
        {"name": "nope", "partitions": [{"partition_index": 0, "error_code": E.UNKNOWN_TOPIC_OR_PARTITION}]}]}
    empty_group = asyncio.run(handle_txn_offset_commit(
        broker, _Ctx(_Header(3)), _txn_request("", {"t": [1]})))  # type: ignore[arg-type]
    assert empty_group["topics"][0]["partitions"] == [{"partition_index": 1, "error_code": E.INVALID_GROUP_ID}]

    def fetch(version: int, stable: bool) -> list[Any]:
        if version >= 8:
            req: dict[str, Any] = {"groups": [{"group_id": "g", "topics": [{"name": "t", "partition_indexes": [0]}]}],
                                   "require_stable": stable}
            body = asyncio.run(handle_offset_fetch(broker, _Ctx(_Header(version)), req))  # type: ignore[arg-type]
            return list(body["groups"][0]["topics"][0]["partitions"])
        req = {"group_id": "g", "topics": [{"name": "t", "partition_indexes": [0]}], "require_stable": stable}
        body = asyncio.run(handle_offset_fetch(broker, _Ctx(_Header(version)), req))  # type: ignore[arg-type]
        return list(body["topics"][0]["partitions"])

    for version in (7, 8):
        (unstable,) = fetch(version, True)
        assert (unstable["committed_offset"], unstable["error_code"]) == (-1, E.UNSTABLE_OFFSET_COMMIT)
        (plain,) = fetch(version, False)
        assert (plain["committed_offset"], plain["error_code"]) == (-1, E.NONE)
    h.marker(PID, committed=True)
    (stable,) = fetch(8, True)
    assert (stable["committed_offset"], stable["error_code"]) == (40, E.NONE)
