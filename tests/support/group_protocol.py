"""Raw consumer-group protocol requests, for tests that must control every field of a request.

Real clients never send a wrong generation, an unknown member id or a session timeout outside
the broker's range on purpose, so tests of those answers speak the protocol themselves through
Riverlog's own client connection (:class:`riverlog.client.connection.BrokerConnection`) and the
project's protocol schemas. Everything is asyncio; tests wrap a scenario in ``asyncio.run``.

Kafka handles one request at a time per connection (the socket is muted until the answer is
sent), and a JoinGroup can stay pending until the other members rejoin, so each
:class:`RawMember` owns its own connection.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from riverlog.client.connection import BrokerConnection
from riverlog.client.consumer_protocol import PROTOCOL_TYPE, encode_assignment, encode_subscription
from riverlog.protocol.api_keys import ApiKey
from riverlog.protocol.errors import ErrorCode

# Group APIs whose newest versions name topics by id; tests that build requests by topic name
# stay below them.
MAX_OFFSET_COMMIT_BY_NAME = 9
MAX_OFFSET_FETCH_BY_NAME = 9

RETRIABLE_COORDINATOR_CODES = frozenset({
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.NOT_COORDINATOR,
})


def code_name(code: int) -> str:
    try:
        return f"{ErrorCode(code).name}({code})"
    except ValueError:
        return str(code)


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode`` (on UTF-16 code units), which Kafka hashes group ids with."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def offsets_partition(group_id: str, partitions: int) -> int:
    """The ``__consumer_offsets`` partition Kafka places a group in (``Utils.abs(hash) % n``,
    where ``Utils.abs`` maps Integer.MIN_VALUE to 0)."""
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def colocated_group(group_id: str, partitions: int, prefix: str) -> str:
    """A group id starting with ``prefix`` whose offsets partition is the same as ``group_id``'s."""
    target = offsets_partition(group_id, partitions)
    for i in range(100_000):
        candidate = f"{prefix}-{i}"
        if candidate != group_id and offsets_partition(candidate, partitions) == target:
            return candidate
    raise AssertionError("no colocated group id found")


async def connect(host: str, port: int, client_id: str = "group-tests") -> BrokerConnection:
    return await BrokerConnection.connect(host, port, client_id=client_id, request_timeout=30.0)


async def find_coordinator(
    conn: BrokerConnection, group_id: str, *, timeout: float = 30.0
) -> tuple[int, str, int]:
    """(node id, host, port) of ``group_id``'s coordinator, waiting out "not available yet"
    (the first lookup makes the broker create ``__consumer_offsets``)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    version = conn.version_for(ApiKey.FIND_COORDINATOR)
    while True:
        if version >= 4:
            response = await conn.request(
                ApiKey.FIND_COORDINATOR, {"key_type": 0, "coordinator_keys": [group_id]}, version
            )
            (entry,) = response["coordinators"]
        else:
            entry = await conn.request(ApiKey.FIND_COORDINATOR, {"key": group_id, "key_type": 0}, version)
        code = entry["error_code"]
        if code == ErrorCode.NONE:
            return entry["node_id"], entry["host"], entry["port"]
        if code not in RETRIABLE_COORDINATOR_CODES or loop.time() > deadline:
            raise AssertionError(f"FindCoordinator({group_id!r}) failed: {code_name(code)} {entry}")
        await asyncio.sleep(0.2)


async def coordinator_connection(
    host: str, port: int, group_id: str, client_id: str = "group-tests"
) -> BrokerConnection:
    """A connection to ``group_id``'s coordinator, found through the broker at host:port."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 30.0
    while True:
        boot = await connect(host, port, client_id)
        try:
            _, chost, cport = await find_coordinator(boot, group_id)
        finally:
            await boot.close()
        conn = await connect(chost, cport, client_id)
        # FindCoordinator may name a broker that has not finished loading the group's offsets
        # partition (right after it created __consumer_offsets): wait until the coordinator
        # answers a read of the group, so that tests see only the answers they provoke.
        error, _ = await fetch_offsets(conn, group_id, {})
        if error == ErrorCode.NONE:
            return conn
        await conn.close()
        if error not in RETRIABLE_COORDINATOR_CODES or loop.time() > deadline:
            raise AssertionError(f"coordinator of {group_id!r} not ready: OffsetFetch {code_name(error)}")
        await asyncio.sleep(0.2)


def subscription(topics: Sequence[str]) -> bytes:
    return encode_subscription(list(topics))


def assignment(partitions: Mapping[str, Sequence[int]]) -> bytes:
    return encode_assignment(partitions)


@dataclass
class RawMember:
    """One classic-group member driven request by request.

    ``join`` handles MEMBER_ID_REQUIRED by rejoining with the id the broker handed out (as every
    client does) unless told not to; each method returns the decoded response so tests can look
    at every field, and keeps member id and generation up to date on success.
    """

    conn: BrokerConnection
    group_id: str
    member_id: str = ""
    generation: int = -1
    protocol_name: str | None = None
    leader: str | None = None
    instance_id: str | None = None
    session_timeout_ms: int = 10_000
    rebalance_timeout_ms: int = 30_000
    last_join: dict[str, Any] = field(default_factory=dict)

    @classmethod
    async def open(
        cls, host: str, port: int, group_id: str, *, client_id: str = "group-tests", **kwargs: Any
    ) -> RawMember:
        conn = await coordinator_connection(host, port, group_id, client_id)
        return cls(conn, group_id, **kwargs)

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self.conn.close()

    def version(self, api_key: int, cap: int | None = None) -> int:
        v = self.conn.version_for(api_key)
        return v if cap is None else min(v, cap)

    async def join(
        self,
        protocols: Sequence[tuple[str, bytes]] | None = None,
        *,
        topics: Sequence[str] = ("t",),
        protocol_type: str = PROTOCOL_TYPE,
        session_timeout_ms: int | None = None,
        rebalance_timeout_ms: int | None = None,
        member_id: str | None = None,
        follow_member_id_required: bool = True,
        version: int | None = None,
        timeout: float = 60.0,
    ) -> dict[str, Any]:
        if protocols is None:
            protocols = [("range", subscription(topics))]
        body = {
            "group_id": self.group_id,
            "session_timeout_ms": self.session_timeout_ms if session_timeout_ms is None else session_timeout_ms,
            "rebalance_timeout_ms": (
                self.rebalance_timeout_ms if rebalance_timeout_ms is None else rebalance_timeout_ms
            ),
            "member_id": self.member_id if member_id is None else member_id,
            "group_instance_id": self.instance_id,
            "protocol_type": protocol_type,
            "protocols": [{"name": n, "metadata": m} for n, m in protocols],
            "reason": None,
        }
        v = self.version(ApiKey.JOIN_GROUP) if version is None else version
        response = await self.conn.request(ApiKey.JOIN_GROUP, body, v, timeout=timeout)
        if response["error_code"] == ErrorCode.MEMBER_ID_REQUIRED and follow_member_id_required:
            body["member_id"] = response["member_id"]
            response = await self.conn.request(ApiKey.JOIN_GROUP, body, v, timeout=timeout)
        self.last_join = response
        if response["error_code"] == ErrorCode.NONE:
            self.member_id = response["member_id"]
            self.generation = response["generation_id"]
            self.protocol_name = response["protocol_name"]
            self.leader = response["leader"]
        return response

    @property
    def is_leader(self) -> bool:
        return self.leader == self.member_id

    async def sync(
        self,
        assignments: Mapping[str, bytes] | None = None,
        *,
        generation: int | None = None,
        member_id: str | None = None,
        timeout: float = 60.0,
    ) -> dict[str, Any]:
        body = {
            "group_id": self.group_id,
            "generation_id": self.generation if generation is None else generation,
            "member_id": self.member_id if member_id is None else member_id,
            "group_instance_id": self.instance_id,
            "protocol_type": PROTOCOL_TYPE,
            "protocol_name": self.protocol_name,
            "assignments": [{"member_id": m, "assignment": a} for m, a in (assignments or {}).items()],
        }
        return await self.conn.request(ApiKey.SYNC_GROUP, body, self.version(ApiKey.SYNC_GROUP), timeout=timeout)

    async def join_and_sync(
        self, partitions: Mapping[str, Sequence[int]] | None = None, **join_kwargs: Any
    ) -> dict[str, Any]:
        """Join, and (as the group's only member and leader) assign ``partitions`` to itself."""
        joined = await self.join(**join_kwargs)
        assert joined["error_code"] == ErrorCode.NONE, f"JoinGroup: {code_name(joined['error_code'])} {joined}"
        assignments = {self.member_id: assignment(partitions or {})} if self.is_leader else {}
        synced = await self.sync(assignments)
        assert synced["error_code"] == ErrorCode.NONE, f"SyncGroup: {code_name(synced['error_code'])} {synced}"
        return synced

    async def heartbeat(self, *, generation: int | None = None, member_id: str | None = None) -> int:
        body = {
            "group_id": self.group_id,
            "generation_id": self.generation if generation is None else generation,
            "member_id": self.member_id if member_id is None else member_id,
            "group_instance_id": self.instance_id,
        }
        response = await self.conn.request(ApiKey.HEARTBEAT, body, self.version(ApiKey.HEARTBEAT))
        code: int = response["error_code"]
        return code

    async def leave(self) -> dict[str, Any]:
        v = self.version(ApiKey.LEAVE_GROUP)
        body = {
            "group_id": self.group_id,
            "member_id": self.member_id,
            "members": [{"member_id": self.member_id, "group_instance_id": self.instance_id}],
        }
        return await self.conn.request(ApiKey.LEAVE_GROUP, body, v)

    async def commit(
        self,
        offsets: Mapping[tuple[str, int], int],
        *,
        metadata: str | Mapping[tuple[str, int], str] = "",
        generation: int | None = None,
        member_id: str | None = None,
        version: int | None = None,
    ) -> dict[tuple[str, int], int]:
        """OffsetCommit as this member; returns the error code of every partition."""
        return await commit_offsets(
            self.conn,
            self.group_id,
            offsets,
            metadata=metadata,
            generation=self.generation if generation is None else generation,
            member_id=self.member_id if member_id is None else member_id,
            instance_id=self.instance_id,
            version=version,
        )


async def commit_offsets(
    conn: BrokerConnection,
    group_id: str,
    offsets: Mapping[tuple[str, int], int],
    *,
    metadata: str | Mapping[tuple[str, int], str] = "",
    generation: int = -1,
    member_id: str = "",
    instance_id: str | None = None,
    version: int | None = None,
) -> dict[tuple[str, int], int]:
    """OffsetCommit by topic name; generation -1 and no member id is a "simple" commit, which a
    Kafka broker accepts for an empty or unknown group."""
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), offset in offsets.items():
        meta = metadata if isinstance(metadata, str) else metadata.get((topic, partition), "")
        by_topic.setdefault(topic, []).append(
            {"partition_index": partition, "committed_offset": offset, "committed_metadata": meta}
        )
    body = {
        "group_id": group_id,
        "generation_id_or_member_epoch": generation,
        "member_id": member_id,
        "group_instance_id": instance_id,
        "retention_time_ms": -1,
        "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
    }
    v = version if version is not None else min(conn.version_for(ApiKey.OFFSET_COMMIT), MAX_OFFSET_COMMIT_BY_NAME)
    response = await conn.request(ApiKey.OFFSET_COMMIT, body, v)
    out: dict[tuple[str, int], int] = {}
    for t in response["topics"]:
        for p in t["partitions"]:
            out[(t["name"], p["partition_index"])] = p["error_code"]
    return out


async def fetch_offsets(
    conn: BrokerConnection, group_id: str, partitions: Mapping[str, Sequence[int]] | None = None
) -> tuple[int, dict[tuple[str, int], tuple[int, str | None, int]]]:
    """OffsetFetch by topic name: (group error code, {(topic, partition): (offset, metadata,
    partition error code)}); ``partitions`` None asks for every committed partition."""
    v = min(conn.version_for(ApiKey.OFFSET_FETCH), MAX_OFFSET_FETCH_BY_NAME)
    topics = None if partitions is None else [
        {"name": t, "partition_indexes": list(ps)} for t, ps in partitions.items()
    ]
    if v >= 8:
        body: dict[str, Any] = {
            "groups": [{"group_id": group_id, "member_id": None, "member_epoch": -1, "topics": topics}],
            "require_stable": False,
        }
    else:
        body = {"group_id": group_id, "topics": topics, "require_stable": False}
    response = await conn.request(ApiKey.OFFSET_FETCH, body, v)
    if v >= 8:
        (group,) = response["groups"]
        error, topic_list = group["error_code"], group["topics"]
    else:
        error, topic_list = response["error_code"], response["topics"]
    out: dict[tuple[str, int], tuple[int, str | None, int]] = {}
    for t in topic_list:
        for p in t["partitions"]:
            out[(t["name"], p["partition_index"])] = (p["committed_offset"], p["metadata"], p["error_code"])
    return error, out


async def describe_group(conn: BrokerConnection, group_id: str) -> dict[str, Any]:
    response = await conn.request(
        ApiKey.DESCRIBE_GROUPS, {"groups": [group_id], "include_authorized_operations": False}
    )
    (group,) = response["groups"]
    result: dict[str, Any] = group
    return result


class Heartbeater:
    """Keeps a joined :class:`RawMember` alive in the background and records every answer.

    A healthy group next to the misbehaving one: if the broker disturbs it (rebalance, lost
    membership, dropped connection), its heartbeat answers show it.
    """

    def __init__(self, member: RawMember, interval: float = 0.3) -> None:
        self.member = member
        self.interval = interval
        self.codes: list[int] = []
        self.errors: list[BaseException] = []
        self._task: asyncio.Task[None] | None = None

    def start(self) -> Heartbeater:
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    async def _run(self) -> None:
        while True:
            try:
                self.codes.append(await self.member.heartbeat())
            except Exception as exc:  # recorded and reported by check(); the loop goes on
                self.errors.append(exc)
            await asyncio.sleep(self.interval)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def check(self) -> None:
        assert not self.errors, f"healthy member's heartbeats failed: {self.errors!r}"
        assert self.codes, "healthy member sent no heartbeat"
        bad = [code_name(c) for c in self.codes if c != ErrorCode.NONE]
        assert not bad, f"healthy group disturbed: heartbeat answers {bad} (of {len(self.codes)})"
