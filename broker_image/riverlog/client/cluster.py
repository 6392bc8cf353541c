"""What every client needs: a view of the cluster (Metadata) and one connection per broker.

Admin, producer and consumer share this class so that routing rules (leaders for partition data,
the controller for admin changes, any broker otherwise) and reconnection live in one place.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..protocol.api_keys import ApiKey
from ..protocol.errors import ErrorCode
from ..protocol.primitives import ZERO_UUID
from ..security.client_config import ClientSecurity
from .bootstrap import format_address, parse_bootstrap
from .connection import BrokerConnection
from .errors import (
    BrokerError,
    BrokerUnreachableError,
    ClientError,
    ConnectionClosedError,
    RequestTimeoutError,
    check_error,
)


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None = None

    @property
    def address(self) -> str:
        return format_address(self.host, self.port)


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    partition: int
    leader: int  # -1 when there is no leader
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    error_code: int = 0


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: tuple[PartitionInfo, ...]
    is_internal: bool = False
    error_code: int = 0

    @property
    def replication_factor(self) -> int:
        return max((len(p.replicas) for p in self.partitions), default=0)

    def partition(self, index: int) -> PartitionInfo | None:
        for p in self.partitions:
            if p.partition == index:
                return p
        return None


@dataclass(frozen=True, slots=True)
class ClusterMetadata:
    """One Metadata answer. ``topics`` holds only the topics asked for (all when none were)."""

    cluster_id: str | None
    controller_id: int
    brokers: dict[int, BrokerInfo]
    topics: dict[str, TopicInfo] = field(default_factory=dict)


def _topic_from_response(entry: dict[str, Any]) -> TopicInfo:
    partitions = tuple(
        PartitionInfo(
            partition=p["partition_index"],
            leader=p["leader_id"],
            leader_epoch=p["leader_epoch"],
            replicas=tuple(p["replica_nodes"]),
            isr=tuple(p["isr_nodes"]),
            offline_replicas=tuple(p["offline_replicas"]),
            error_code=p["error_code"],
        )
        for p in sorted(entry["partitions"], key=lambda p: p["partition_index"])
    )
    return TopicInfo(
        name=entry["name"] or "",
        topic_id=entry["topic_id"] or ZERO_UUID,
        partitions=partitions,
        is_internal=bool(entry["is_internal"]),
        error_code=entry["error_code"],
    )


class Cluster:
    """Connections to a cluster's brokers, found from a bootstrap list and kept up by Metadata."""

    def __init__(
        self,
        bootstrap: str | Sequence[tuple[str, int]],
        *,
        client_id: str | None = "riverlog",
        connect_timeout: float = 10.0,
        request_timeout: float = 30.0,
        security: ClientSecurity | None = None,
    ) -> None:
        self.bootstrap = parse_bootstrap(bootstrap) if isinstance(bootstrap, str) else list(bootstrap)
        if not self.bootstrap:
            raise ValueError("no bootstrap servers given")
        self.client_id = client_id
        self.security = security
        self.connect_timeout = connect_timeout
        self.request_timeout = request_timeout
        self.metadata: ClusterMetadata | None = None
        # Topic metadata seen so far, refreshed per topic when a request says it is stale.
        self.topics: dict[str, TopicInfo] = {}
        self._by_node: dict[int, BrokerConnection] = {}
        self._by_address: dict[tuple[str, int], BrokerConnection] = {}
        self._connecting: dict[tuple[str, int], asyncio.Task[BrokerConnection]] = {}
        self._closed = False

    async def __aenter__(self) -> Cluster:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        self._closed = True
        for task in list(self._connecting.values()):
            task.cancel()
        conns = {id(c): c for c in [*self._by_node.values(), *self._by_address.values()]}
        self._by_node.clear()
        self._by_address.clear()
        for conn in conns.values():
            with contextlib.suppress(Exception):
                await conn.close()

    # --- connections ----------------------------------------------------------------------------

    async def _connect(self, host: str, port: int) -> BrokerConnection:
        """A live connection to ``host:port``, reusing an open one; concurrent callers share one
        connection attempt instead of racing to open several."""
        if self._closed:
            raise ClientError("client is closed")
        key = (host, port)
        conn = self._by_address.get(key)
        if conn is not None and not conn.closed:
            return conn
        task = self._connecting.get(key)
        if task is None:
            task = asyncio.get_running_loop().create_task(
                BrokerConnection.connect(
                    host, port, client_id=self.client_id,
                    connect_timeout=self.connect_timeout, request_timeout=self.request_timeout,
                    security=self.security,
                )
            )
            self._connecting[key] = task

            def forget(t: asyncio.Task[BrokerConnection]) -> None:
                self._connecting.pop(key, None)
                if not t.cancelled():
                    t.exception()  # the awaiters re-raise it; this only silences asyncio's warning

            task.add_done_callback(forget)
        conn = await asyncio.shield(task)
        self._by_address[key] = conn
        return conn

    async def any_connection(self) -> BrokerConnection:
        """A connection to some broker: an open one if any, else known brokers, else bootstrap."""
        for conn in [*self._by_node.values(), *self._by_address.values()]:
            if not conn.closed:
                return conn
        candidates: list[tuple[str, int]] = []
        if self.metadata is not None:
            candidates += [(b.host, b.port) for b in self.metadata.brokers.values()]
        candidates += [a for a in self.bootstrap if a not in candidates]
        reasons: list[str] = []
        errors: list[ClientError] = []
        for host, port in candidates:
            try:
                return await self._connect(host, port)
            except (BrokerUnreachableError, ConnectionClosedError, RequestTimeoutError) as exc:
                # Try the next address: one dead or wrong bootstrap entry must not stop us.
                errors.append(exc)
                reason = exc.reason if isinstance(exc, BrokerUnreachableError) else str(exc)
                if reason not in reasons:
                    reasons.append(reason)
        if len(errors) == 1:
            raise errors[0]
        raise BrokerUnreachableError([format_address(h, p) for h, p in candidates], "; ".join(reasons))

    async def connection_to(self, node_id: int) -> BrokerConnection:
        """A connection to broker ``node_id`` as advertised in the latest metadata."""
        conn = self._by_node.get(node_id)
        if conn is not None and not conn.closed:
            return conn
        broker = self.metadata.brokers.get(node_id) if self.metadata else None
        if broker is None:
            await self.refresh_metadata([])
            broker = self.metadata.brokers.get(node_id) if self.metadata else None
        if broker is None:
            raise BrokerError(ErrorCode.BROKER_NOT_AVAILABLE, f"connect to broker {node_id}",
                              "the broker is not in the cluster metadata")
        conn = await self._connect(broker.host, broker.port)
        self._by_node[node_id] = conn
        return conn

    async def controller_connection(self) -> BrokerConnection:
        """Where admin changes go: the controller Metadata names, or any broker (which forwards)."""
        if self.metadata is None:
            await self.refresh_metadata([])
        assert self.metadata is not None
        controller = self.metadata.controller_id
        if controller in self.metadata.brokers:
            try:
                return await self.connection_to(controller)
            except BrokerUnreachableError:
                pass
        return await self.any_connection()

    async def request_any(self, api_key: int, body: dict[str, Any]) -> dict[str, Any]:
        """Send to any broker, retrying once on a fresh connection if the first one broke."""
        for attempt in range(2):
            conn = await self.any_connection()
            try:
                return await conn.request(api_key, body)
            except ConnectionClosedError:
                if attempt:
                    raise
        raise AssertionError("unreachable")

    # --- metadata -------------------------------------------------------------------------------

    async def refresh_metadata(
        self, topics: Sequence[str] | None = None, *, allow_auto_create: bool = False
    ) -> ClusterMetadata:
        """Ask for metadata of ``topics`` (``None``: every topic, ``[]``: brokers only).

        Topics the broker reports with an error are included with their ``error_code``; it is
        up to the caller to decide whether, say, an unknown topic is an error.
        """
        body = {
            "topics": None if topics is None else [{"name": t, "topic_id": ZERO_UUID} for t in topics],
            "allow_auto_topic_creation": allow_auto_create,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False,
        }
        response = await self.request_any(ApiKey.METADATA, body)
        check_error(response.get("error_code", 0), "fetch metadata")
        brokers = {
            b["node_id"]: BrokerInfo(b["node_id"], b["host"], b["port"], b["rack"]) for b in response["brokers"]
        }
        found = {}
        for entry in response["topics"]:
            info = _topic_from_response(entry)
            found[info.name] = info
            if info.error_code == ErrorCode.NONE:
                self.topics[info.name] = info
            else:
                self.topics.pop(info.name, None)
        if topics is None:
            # A full listing also tells us which cached topics are gone.
            for name in list(self.topics):
                if name not in found:
                    del self.topics[name]
        metadata = ClusterMetadata(response["cluster_id"], response["controller_id"], brokers, found)
        self.metadata = metadata
        # Forget node connections whose broker moved or left, so the next use reconnects.
        for node_id, conn in list(self._by_node.items()):
            b = brokers.get(node_id)
            if b is None or (b.host, b.port) != (conn.host, conn.port):
                del self._by_node[node_id]
        return metadata

    async def topic(self, name: str, *, refresh: bool = False, allow_auto_create: bool = False) -> TopicInfo:
        """Metadata of one topic; raises :class:`BrokerError` if the broker reports an error."""
        info = None if refresh else self.topics.get(name)
        if info is not None:
            return info
        metadata = await self.refresh_metadata([name], allow_auto_create=allow_auto_create)
        info = metadata.topics.get(name)
        if info is None:
            raise BrokerError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"describe topic '{name}'",
                              "the broker did not return it")
        check_error(info.error_code, f"describe topic '{name}'", _topic_error_text(name, info.error_code))
        return info


def _topic_error_text(name: str, code: int) -> str | None:
    if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        return f"topic '{name}' does not exist"
    if code == ErrorCode.INVALID_TOPIC_EXCEPTION:
        return f"'{name}' is not a valid topic name"
    return None
