"""An async admin client: topics, partitions, configs, offsets and the cluster.

Usable from the CLI and from the Kubernetes operator alike, so it never prints, never exits and
returns plain dataclasses. Every broker-reported failure is raised as a
:class:`~riverlog.client.errors.BrokerError` (a ``KafkaError`` carrying the code and the broker's
own message).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, TypeVar

from ..protocol.api_keys import ApiKey
from ..protocol.errors import ErrorCode
from ..protocol.primitives import ZERO_UUID
from .cluster import BrokerInfo, Cluster, TopicInfo
from .connection import BrokerConnection
from .errors import BrokerError, ConnectionClosedError, check_error
from .offsets import LATEST, OffsetInfo, list_offsets
from .retry import with_retries

T = TypeVar("T")

# Default time an admin operation keeps retrying after leadership or controller changes.
DEFAULT_OPERATION_TIMEOUT = 30.0


class ResourceType(IntEnum):
    TOPIC = 2
    BROKER = 4


class ConfigSource(IntEnum):
    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


class _ConfigOp(IntEnum):
    SET = 0
    DELETE = 1


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None
    source: int
    read_only: bool = False
    is_sensitive: bool = False

    @property
    def is_default(self) -> bool:
        return self.source == ConfigSource.DEFAULT_CONFIG

    @property
    def is_topic_override(self) -> bool:
        return self.source == ConfigSource.DYNAMIC_TOPIC_CONFIG

    @property
    def source_name(self) -> str:
        try:
            return ConfigSource(self.source).name
        except ValueError:
            return str(self.source)


@dataclass(frozen=True, slots=True)
class CreatedTopic:
    name: str
    topic_id: uuid.UUID
    num_partitions: int
    replication_factor: int
    configs: dict[str, str | None] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ClusterDescription:
    cluster_id: str | None
    controller_id: int
    brokers: tuple[BrokerInfo, ...]


class AdminClient:
    """Admin operations against a cluster reached through ``bootstrap`` (``"host:port[,...]"``).

    Use as ``async with AdminClient("localhost:9092") as admin: ...`` or call :meth:`close`.
    """

    def __init__(
        self,
        bootstrap: str,
        *,
        client_id: str = "riverlog-admin",
        connect_timeout: float = 10.0,
        request_timeout: float = 30.0,
        operation_timeout: float = DEFAULT_OPERATION_TIMEOUT,
    ) -> None:
        self.cluster = Cluster(
            bootstrap, client_id=client_id, connect_timeout=connect_timeout, request_timeout=request_timeout
        )
        self.operation_timeout = operation_timeout

    async def __aenter__(self) -> AdminClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self.cluster.close()

    # --- retry plumbing -------------------------------------------------------------------------

    async def _with_retries(self, attempt: Callable[[], Awaitable[T]]) -> T:
        return await with_retries(self.cluster, attempt, self.operation_timeout)

    async def _controller_request(self, api_key: int, body: dict[str, Any]) -> dict[str, Any]:
        conn = await self.cluster.controller_connection()
        return await conn.request(api_key, body)

    # --- topics ---------------------------------------------------------------------------------

    async def list_topics(self, *, include_internal: bool = False) -> list[TopicInfo]:
        """Every topic, sorted by name (internal topics such as ``__consumer_offsets`` on request)."""
        metadata = await self.cluster.refresh_metadata(None)
        topics = [t for t in metadata.topics.values() if t.error_code == ErrorCode.NONE]
        if not include_internal:
            topics = [t for t in topics if not t.is_internal]
        return sorted(topics, key=lambda t: t.name)

    async def describe_topics(self, names: Sequence[str]) -> list[TopicInfo]:
        """Metadata of the named topics, in the order given; an unknown name raises BrokerError."""
        if not names:
            return []
        metadata = await self.cluster.refresh_metadata(list(names))
        out = []
        for name in names:
            info = metadata.topics.get(name)
            if info is None:
                raise BrokerError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"describe topic '{name}'",
                                  f"topic '{name}' does not exist")
            if info.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                raise BrokerError(info.error_code, f"describe topic '{name}'", f"topic '{name}' does not exist")
            check_error(info.error_code, f"describe topic '{name}'")
            out.append(info)
        return out

    async def create_topic(
        self,
        name: str,
        partitions: int = -1,
        replication_factor: int = -1,
        configs: Mapping[str, str] | None = None,
        *,
        validate_only: bool = False,
        timeout_ms: int = 30_000,
    ) -> CreatedTopic:
        """Create a topic; -1 partitions or replication factor means the broker's default."""
        body = {
            "topics": [{
                "name": name,
                "num_partitions": partitions,
                "replication_factor": replication_factor,
                "assignments": [],
                "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
            }],
            "timeout_ms": timeout_ms,
            "validate_only": validate_only,
        }

        async def attempt() -> CreatedTopic:
            response = await self._controller_request(ApiKey.CREATE_TOPICS, body)
            result = _single(response["topics"], "name", name, f"create topic '{name}'")
            check_error(result["error_code"], f"create topic '{name}'", result.get("error_message"))
            return CreatedTopic(
                name=name,
                topic_id=result.get("topic_id") or ZERO_UUID,
                num_partitions=result.get("num_partitions", -1),
                replication_factor=result.get("replication_factor", -1),
                configs={c["name"]: c["value"] for c in result.get("configs") or []},
            )

        return await self._with_retries(attempt)

    async def delete_topic(self, name: str, *, timeout_ms: int = 30_000) -> None:
        # Versions 0-5 take ``topic_names``, 6+ ``topics``; the schema encodes whichever applies.
        body = {
            "topics": [{"name": name, "topic_id": ZERO_UUID}],
            "topic_names": [name],
            "timeout_ms": timeout_ms,
        }

        async def attempt() -> None:
            response = await self._controller_request(ApiKey.DELETE_TOPICS, body)
            result = _single(response["responses"], "name", name, f"delete topic '{name}'")
            code = result["error_code"]
            message = result.get("error_message")
            if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and not message:
                message = f"topic '{name}' does not exist"
            check_error(code, f"delete topic '{name}'", message)

        await self._retry_controller(attempt)
        self.cluster.topics.pop(name, None)

    async def create_partitions(self, name: str, count: int, *, timeout_ms: int = 30_000) -> None:
        """Raise the topic's partition count to ``count`` (Kafka never lowers it)."""
        body = {
            "topics": [{"name": name, "count": count, "assignments": None}],
            "timeout_ms": timeout_ms,
            "validate_only": False,
        }

        async def attempt() -> None:
            response = await self._controller_request(ApiKey.CREATE_PARTITIONS, body)
            result = _single(response["results"], "name", name, f"add partitions to '{name}'")
            check_error(result["error_code"], f"add partitions to '{name}'", result.get("error_message"))

        await self._retry_controller(attempt)
        self.cluster.topics.pop(name, None)

    async def _retry_controller(self, attempt: Callable[[], Awaitable[None]]) -> None:
        """Retry only "not the controller" and broken connections: for deletes and partition
        changes an UNKNOWN_TOPIC answer is final, not a sign of stale metadata."""
        deadline = time.monotonic() + self.operation_timeout
        while True:
            try:
                await attempt()
                return
            except BrokerError as exc:
                if exc.code != ErrorCode.NOT_CONTROLLER or time.monotonic() > deadline:
                    raise
            except ConnectionClosedError:
                if time.monotonic() > deadline:
                    raise
            await asyncio.sleep(0.1)
            await self.cluster.refresh_metadata([])

    # --- configs --------------------------------------------------------------------------------

    async def describe_configs(self, topic: str, keys: Sequence[str] | None = None) -> list[ConfigEntry]:
        """The topic's effective configuration (every key unless ``keys`` narrows it)."""
        return await self._describe_configs(ResourceType.TOPIC, topic, keys, f"describe configs of topic '{topic}'")

    async def describe_broker_configs(self, node_id: int, keys: Sequence[str] | None = None) -> list[ConfigEntry]:
        # Broker configs are answered by the broker itself, so ask that one.
        conn = await self.cluster.connection_to(node_id)
        return await self._describe_configs(
            ResourceType.BROKER, str(node_id), keys, f"describe configs of broker {node_id}", conn
        )

    async def _describe_configs(
        self,
        resource_type: int,
        resource_name: str,
        keys: Sequence[str] | None,
        operation: str,
        conn: BrokerConnection | None = None,
    ) -> list[ConfigEntry]:
        body = {
            "resources": [{
                "resource_type": resource_type,
                "resource_name": resource_name,
                "configuration_keys": None if keys is None else list(keys),
            }],
            "include_synonyms": False,
            "include_documentation": False,
        }
        if conn is None:
            response = await self.cluster.request_any(ApiKey.DESCRIBE_CONFIGS, body)
        else:
            response = await conn.request(ApiKey.DESCRIBE_CONFIGS, body)
        result = _single(response["results"], "resource_name", resource_name, operation)
        code = result["error_code"]
        message = result.get("error_message")
        if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and not message:
            message = f"topic '{resource_name}' does not exist"
        check_error(code, operation, message)
        entries = []
        for c in result["configs"]:
            source = c.get("config_source", -1)
            if source == -1:  # version 0 only has is_default
                source = ConfigSource.DEFAULT_CONFIG if c.get("is_default") else ConfigSource.UNKNOWN
            entries.append(ConfigEntry(c["name"], c["value"], source, c["read_only"], c["is_sensitive"]))
        return sorted(entries, key=lambda e: e.name)

    async def alter_configs(
        self,
        topic: str,
        set: Mapping[str, str] | None = None,  # shadows the builtin: the operation's name in Kafka
        delete: Sequence[str] | None = None,
        *,
        validate_only: bool = False,
    ) -> None:
        """Set and/or delete (revert to default) topic configs with IncrementalAlterConfigs,
        which leaves every key not named untouched (unlike the legacy AlterConfigs)."""
        ops = [{"name": k, "config_operation": _ConfigOp.SET, "value": v} for k, v in (set or {}).items()]
        ops += [{"name": k, "config_operation": _ConfigOp.DELETE, "value": None} for k in (delete or [])]
        if not ops:
            return
        body = {
            "resources": [{"resource_type": ResourceType.TOPIC, "resource_name": topic, "configs": ops}],
            "validate_only": validate_only,
        }

        async def attempt() -> None:
            response = await self._controller_request(ApiKey.INCREMENTAL_ALTER_CONFIGS, body)
            operation = f"alter configs of topic '{topic}'"
            result = _single(response["responses"], "resource_name", topic, operation)
            code = result["error_code"]
            message = result.get("error_message")
            if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and not message:
                message = f"topic '{topic}' does not exist"
            check_error(code, operation, message)

        await self._retry_controller(attempt)

    # --- offsets --------------------------------------------------------------------------------

    async def list_offsets(self, topic: str, partition: int, timestamp: int = LATEST) -> OffsetInfo:
        """The offset for ``timestamp``: EARLIEST (-2), LATEST (-1), MAX_TIMESTAMP (-3) or a time
        in ms (the first offset whose timestamp is at least that; offset -1 if there is none)."""
        result = await self.list_partition_offsets(topic, {partition: timestamp})
        return result[partition]

    async def list_partition_offsets(self, topic: str, timestamps: Mapping[int, int]) -> dict[int, OffsetInfo]:
        """ListOffsets for several partitions of a topic, each sent to its partition's leader."""
        return await list_offsets(self.cluster, topic, timestamps, timeout=self.operation_timeout)

    # --- cluster --------------------------------------------------------------------------------

    async def describe_cluster(self) -> ClusterDescription:
        """Cluster id, controller and live brokers (DescribeCluster, or Metadata if unsupported)."""
        conn = await self.cluster.any_connection()
        if conn.supports(ApiKey.DESCRIBE_CLUSTER):
            response = await conn.request(
                ApiKey.DESCRIBE_CLUSTER,
                {"include_cluster_authorized_operations": False, "endpoint_type": 1, "include_fenced_brokers": False},
            )
            check_error(response["error_code"], "describe cluster", response.get("error_message"))
            brokers = tuple(
                BrokerInfo(b["broker_id"], b["host"], b["port"], b["rack"])
                for b in sorted(response["brokers"], key=lambda b: b["broker_id"])
            )
            return ClusterDescription(response["cluster_id"], response["controller_id"], brokers)
        metadata = await self.cluster.refresh_metadata([])
        return ClusterDescription(
            metadata.cluster_id, metadata.controller_id,
            tuple(sorted(metadata.brokers.values(), key=lambda b: b.node_id)),
        )


def _single(results: list[dict[str, Any]], key: str, name: str, operation: str) -> dict[str, Any]:
    """The result entry for ``name``; a broker leaving it out is itself an error."""
    for r in results:
        if r.get(key) == name:
            return r
    if len(results) == 1 and results[0].get(key) in (None, ""):
        return results[0]
    raise BrokerError(ErrorCode.UNKNOWN_SERVER_ERROR, operation, f"the response has no result for '{name}'")
