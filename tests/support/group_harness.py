"""Drives the pure group state machine (``GroupShard``) by hand for the unit tests.

Time only moves when a test says so; records are "written" at once unless a test holds them
back to look at the state in between (``hold_writes``); every reply is kept by token.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

from riverlog.coordinator.config import GroupConfig
from riverlog.coordinator.consumer_records import TopicMetadata
from riverlog.coordinator.effects import AfterWrite, Result
from riverlog.coordinator.membership import JoinRequest, LeavingMember, SyncRequest
from riverlog.coordinator.offset_ops import CommitPartition, CommitRequest, TxnCommitRequest
from riverlog.coordinator.records import CoordinatorRecord, decode, encode
from riverlog.coordinator.shard import GroupShard
from riverlog.protocol.errors import ErrorCode

Body = dict[str, Any]


def subscription(*topics: str, version: int = 0) -> bytes:
    """A ConsumerProtocolSubscription (v0 layout: version, topics, user data)."""
    out = struct.pack(">hi", version, len(topics))
    for topic in topics:
        data = topic.encode()
        out += struct.pack(">h", len(data)) + data
    return out + struct.pack(">i", -1)


@dataclass
class Harness:
    config: GroupConfig = field(default_factory=lambda: GroupConfig(initial_rebalance_delay_ms=0))
    now: int = 1_000_000
    hold_writes: bool = False

    def __post_init__(self) -> None:
        self.shard = GroupShard(0, self.config)
        self.replies: dict[int, Body] = {}
        self.written: list[CoordinatorRecord] = []
        # (producer id, producer epoch, records) of every transactional batch written
        self.txn_written: list[tuple[int, int, list[CoordinatorRecord]]] = []
        self.held: list[tuple[list[CoordinatorRecord], list[AfterWrite]]] = []
        self._token = 0
        self._apply(self.shard.on_loaded(self.now))

    def reloaded(self, topics: dict[str, TopicMetadata] | None = None) -> Harness:
        """A new coordinator replaying everything this one wrote (through the byte format), as
        after a coordinator move; ``topics`` the cluster's topics it sees when it loads."""
        fresh = Harness.__new__(Harness)
        fresh.config, fresh.now, fresh.hold_writes = self.config, self.now + 1000, False
        fresh.shard = GroupShard(0, self.config)
        fresh.replies, fresh.written, fresh.txn_written, fresh.held, fresh._token = {}, [], [], [], 0
        if topics is not None:
            fresh.shard.set_topics(topics)
        for record in self.written:
            key, value = encode(record)
            fresh.shard.replay(decode(key, value))
        fresh._apply(fresh.shard.on_loaded(fresh.now))
        return fresh

    # plumbing ----------------------------------------------------------------------------

    def _apply(self, result: Result) -> None:
        for token, body in result.replies:
            assert token not in self.replies, f"token {token} answered twice"
            self.replies[token] = body
        writes = [(result.records, result.after_write)] if result.records or result.after_write else []
        for txn in result.txn_writes:
            self.txn_written.append((txn.producer_id, txn.producer_epoch, txn.records))
            writes.append((txn.records, [txn.after]))
        for records, callbacks in writes:
            if self.hold_writes:
                self.held.append((records, callbacks))
            else:
                self.written.extend(records)
                self._apply(self.shard.complete_write(callbacks, ErrorCode.NONE, self.now))

    def release_writes(self, error: ErrorCode = ErrorCode.NONE) -> None:
        held, self.held = self.held, []
        for records, callbacks in held:
            if error == ErrorCode.NONE:
                self.written.extend(records)
            self._apply(self.shard.complete_write(callbacks, error, self.now))

    def run(self, operation: Any, *args: Any) -> int:
        self._token += 1
        self._apply(self.shard.run(self.now, operation, self._token, *args))
        return self._token

    def reply(self, token: int) -> Body | None:
        return self.replies.get(token)

    def error(self, token: int) -> ErrorCode:
        body = self.replies[token]
        return ErrorCode(body["error_code"])

    def advance(self, ms: int) -> None:
        self.now += ms
        self._apply(self.shard.tick(self.now))

    def group(self, group_id: str = "g") -> Any:
        return self.shard.groups.get(group_id)

    # requests ----------------------------------------------------------------------------

    def join(self, member_id: str = "", *, group: str = "g", instance: str | None = None,
             protocols: tuple[tuple[str, bytes], ...] = (("range", b"meta"),), version: int = 9,
             session: int = 10_000, rebalance: int = 30_000, protocol_type: str = "consumer",
             client_id: str = "client") -> int:
        return self.run(self.shard.join_group, JoinRequest(
            group, member_id, instance, client_id, "/127.0.0.1", session, rebalance, protocol_type, protocols,
            version))

    def join_new(self, *, group: str = "g", **kwargs: Any) -> int:
        """A dynamic member's two-step first join (v4+): returns the token of the second join."""
        first = self.join(group=group, **kwargs)
        assert self.error(first) == ErrorCode.MEMBER_ID_REQUIRED
        return self.join(self.replies[first]["member_id"], group=group, **kwargs)

    def sync(self, member_id: str, generation: int, assignments: dict[str, bytes] | None = None, *,
             group: str = "g", instance: str | None = None, protocol_type: str | None = None,
             protocol_name: str | None = None) -> int:
        return self.run(self.shard.sync_group, SyncRequest(
            group, generation, member_id, instance, protocol_type, protocol_name,
            tuple((assignments or {}).items())))

    def heartbeat(self, member_id: str, generation: int, *, group: str = "g", instance: str | None = None) -> int:
        return self.run(self.shard.heartbeat, group, member_id, instance, generation)

    def leave(self, *members: LeavingMember, group: str = "g") -> int:
        return self.run(self.shard.leave_group, group, list(members))

    def commit(self, offsets: dict[tuple[str, int], int], *, group: str = "g", generation: int = -1,
               member_id: str = "", instance: str | None = None, metadata: str | None = "",
               version: int = 9, retention: int = -1) -> int:
        topics: dict[str, list[CommitPartition]] = {}
        for (topic, partition), offset in offsets.items():
            topics.setdefault(topic, []).append(CommitPartition(partition, offset, -1, metadata))
        return self.run(self.shard.commit_offsets, CommitRequest(
            group, generation, member_id, instance, retention,
            tuple((t, tuple(ps)) for t, ps in topics.items()), version))

    def txn_commit(self, offsets: dict[tuple[str, int], int], *, producer_id: int = 7, producer_epoch: int = 0,
                   group: str = "g", generation: int = -1, member_id: str = "", instance: str | None = None,
                   metadata: str | None = "", version: int = 3) -> int:
        topics: dict[str, list[CommitPartition]] = {}
        for (topic, partition), offset in offsets.items():
            topics.setdefault(topic, []).append(CommitPartition(partition, offset, -1, metadata))
        return self.run(self.shard.commit_txn_offsets, TxnCommitRequest(
            "txn", group, producer_id, producer_epoch, generation, member_id, instance,
            tuple((t, tuple(ps)) for t, ps in topics.items()), version))

    def marker(self, producer_id: int, committed: bool) -> None:
        """The transaction marker of ``producer_id`` was written (WriteTxnMarkers)."""
        self._apply(self.shard.run(self.now, self.shard.complete_transaction, producer_id, committed))

    def fetch_stable(self, topics: dict[str, list[int]] | None, *,
                     group: str = "g") -> dict[tuple[str, int], tuple[int, ErrorCode]]:
        """OffsetFetch with require_stable: (offset, error) by partition."""
        wanted = None if topics is None else list(topics.items())
        return {(t["name"], p["partition_index"]): (p["committed_offset"], ErrorCode(p["error_code"]))
                for t in self.shard.fetch_offsets(group, wanted, True) for p in t["partitions"]}

    def commit_errors(self, token: int) -> dict[tuple[str, int], ErrorCode]:
        return {(topic, p): ErrorCode(e) for topic, parts in self.replies[token]["topics"] for p, e in parts}

    def fetch(self, topics: dict[str, list[int]] | None, *, group: str = "g") -> dict[tuple[str, int], int]:
        wanted = None if topics is None else list(topics.items())
        return {(t["name"], p["partition_index"]): p["committed_offset"]
                for t in self.shard.fetch_offsets(group, wanted) for p in t["partitions"]}

    # whole flows -------------------------------------------------------------------------

    def stable_group(self, n: int, *, group: str = "g", instances: list[str | None] | None = None,
                     **kwargs: Any) -> list[str]:
        """n members joined and synced; returns member ids, the leader first."""
        tokens = []
        for i in range(n):
            instance = instances[i] if instances else None
            if instance is None:
                tokens.append(self.join_new(group=group, **kwargs))
            else:
                tokens.append(self.join(group=group, instance=instance, **kwargs))
        self.advance(0)  # initial rebalance delay 0
        bodies = [self.replies[t] for t in tokens]
        assert all(b["error_code"] == ErrorCode.NONE for b in bodies), bodies
        leader = bodies[0]["leader"]
        ids = [b["member_id"] for b in bodies]
        generation = bodies[0]["generation_id"]
        ordered = [leader] + [m for m in ids if m != leader]
        syncs = [self.sync(m, generation, {x: x.encode() for x in ids} if m == leader else None, group=group,
                           instance=(instances[ids.index(m)] if instances else None))
                 for m in ordered]
        assert all(self.error(t) == ErrorCode.NONE for t in syncs)
        return ordered
