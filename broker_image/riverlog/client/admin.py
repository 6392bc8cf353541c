"""An async admin client: topics, partitions, configs, offsets, consumer groups, transactions
and the cluster.

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
from ..protocol.primitives import ZERO_UUID, DecodeError
from ..security.acl import AclBinding, AclFilter
from ..security.client_config import ClientSecurity
from .cluster import BrokerInfo, Cluster, TopicInfo
from .connection import BrokerConnection
from .consumer_protocol import PROTOCOL_TYPE as CONSUMER_PROTOCOL_TYPE
from .consumer_protocol import decode_assignment
from .errors import BrokerError, BrokerUnreachableError, ConnectionClosedError, check_error
from .offsets import LATEST, OffsetInfo, list_offsets
from .retry import Final, with_retries

T = TypeVar("T")

# Default time an admin operation keeps retrying after leadership or controller changes.
DEFAULT_OPERATION_TIMEOUT = 30.0

# The newest OffsetCommit and OffsetFetch versions that name topics (later ones use topic ids).
_MAX_OFFSET_COMMIT_BY_NAME = 9
_MAX_OFFSET_FETCH_BY_NAME = 9
# Answers that mean "ask the group's coordinator again": it moved, or is still loading the
# group's offsets partition (right after it became the partition's leader).
_COORDINATOR_RETRY_CODES = frozenset({
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.NOT_COORDINATOR,
})
# States in which a classic group has no members (Dead: it does not exist, or is being removed).
EMPTY_GROUP_STATES = frozenset({"Empty", "Dead"})

TopicPartition = tuple[str, int]


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
class GroupListing:
    """One group in a ListGroups answer; ``state`` and ``group_type`` need ListGroups v4/v5."""

    group_id: str
    protocol_type: str
    state: str | None
    group_type: str | None
    coordinator: int


@dataclass(frozen=True, slots=True)
class GroupMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    # Decoded from the consumer protocol; None when the group speaks another protocol or the
    # member's assignment cannot be decoded. In a consumer group (KIP-848): what it owns now.
    assignment: tuple[TopicPartition, ...] | None
    # Consumer groups (KIP-848) only: the member's epoch, the partitions the broker's assignor
    # means it to own (its current assignment moves there as it revokes and acquires), its rack
    # and what it subscribed to (topic names, or a regular expression).
    member_epoch: int | None = None
    target_assignment: tuple[TopicPartition, ...] | None = None
    rack_id: str | None = None
    subscribed_topics: tuple[str, ...] = ()
    subscribed_regex: str | None = None


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: tuple[GroupMember, ...]
    coordinator: BrokerInfo
    # "classic" (JoinGroup/SyncGroup), "consumer" (KIP-848's ConsumerGroupHeartbeat) or "share"
    # (KIP-932); consumer and share groups also have their group epoch, the epoch of their
    # target assignment and the server-side assignor that computed it.
    group_type: str = "classic"
    group_epoch: int | None = None
    assignment_epoch: int | None = None
    assignor: str | None = None

    @property
    def is_empty(self) -> bool:
        return not self.members and self.state in EMPTY_GROUP_STATES


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = None


@dataclass(frozen=True, slots=True)
class ClusterDescription:
    cluster_id: str | None
    controller_id: int
    brokers: tuple[BrokerInfo, ...]


@dataclass(frozen=True, slots=True)
class QuorumReplica:
    node_id: int
    log_end_offset: int
    last_fetch_timestamp: int  # ms since the epoch, -1 if unknown


@dataclass(frozen=True, slots=True)
class QuorumDescription:
    """The metadata quorum as its leader sees it (DescribeQuorum)."""

    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: tuple[QuorumReplica, ...]
    observers: tuple[QuorumReplica, ...]


@dataclass(frozen=True, slots=True)
class TransactionListing:
    """One transactional id in a ListTransactions answer, with the broker coordinating it."""

    transactional_id: str
    producer_id: int
    state: str  # Kafka's names: Empty, Ongoing, PrepareCommit, CompleteAbort, ...
    coordinator: int


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    """A DescribeTransactions answer: the coordinator's view of one transactional id."""

    transactional_id: str
    state: str
    timeout_ms: int
    start_time_ms: int  # -1 when no transaction is open
    producer_id: int
    producer_epoch: int
    partitions: tuple[TopicPartition, ...]
    coordinator: BrokerInfo


@dataclass(frozen=True, slots=True)
class ProducerState:
    """An active producer of a partition, as its leader knows it (DescribeProducers)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int  # of the last marker written for it, -1 if none
    current_txn_start_offset: int  # first offset of its open transaction, -1 if none


# Key types of FindCoordinator.
GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1


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
        security: ClientSecurity | None = None,
    ) -> None:
        self.cluster = Cluster(
            bootstrap, client_id=client_id, connect_timeout=connect_timeout, request_timeout=request_timeout,
            security=security,
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

    async def describe_quorum(self) -> QuorumDescription | None:
        """The metadata quorum (DescribeQuorum), or None from a cluster without one (brokers
        sharing an in-process test controller, or a broker that does not implement the API)."""
        conn = await self.cluster.any_connection()
        if not conn.supports(ApiKey.DESCRIBE_QUORUM):
            return None
        response = await conn.request(
            ApiKey.DESCRIBE_QUORUM, {"topics": [{"topic_name": "__cluster_metadata", "partitions": [
                {"partition_index": 0}]}]})
        if response["error_code"] or not response["topics"]:
            return None
        part = response["topics"][0]["partitions"][0]
        if part["error_code"]:
            return None

        def replicas(items: list[dict[str, Any]]) -> tuple[QuorumReplica, ...]:
            return tuple(QuorumReplica(r["replica_id"], r["log_end_offset"], r.get("last_fetch_timestamp", -1))
                         for r in items)

        return QuorumDescription(part["leader_id"], part["leader_epoch"], part["high_watermark"],
                                 replicas(part["current_voters"]), replicas(part["observers"]))

    # --- partition reassignments ------------------------------------------------------------------

    async def alter_partition_reassignments(
        self, targets: Mapping[TopicPartition, Sequence[int] | None], *, timeout_ms: int = 60_000
    ) -> dict[TopicPartition, BrokerError | None]:
        """Start (a replica list) or cancel (None) reassignments; per partition, None when the
        controller accepted it, else the refusal (INVALID_REPLICA_ASSIGNMENT, ...)."""
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (topic, partition), replicas in sorted(targets.items()):
            by_topic.setdefault(topic, []).append(
                {"partition_index": partition, "replicas": None if replicas is None else list(replicas)})
        body = {"timeout_ms": timeout_ms, "allow_replication_factor_change": True,
                "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}
        out: dict[TopicPartition, BrokerError | None] = {}

        async def attempt() -> None:
            response = await self._controller_request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, body)
            check_error(response["error_code"], "alter partition reassignments", response.get("error_message"))
            out.clear()
            for t in response["responses"]:
                for p in t["partitions"]:
                    code = p["error_code"]
                    out[(t["name"], p["partition_index"])] = None if code == ErrorCode.NONE else BrokerError(
                        code, f"reassign {t['name']} partition {p['partition_index']}", p.get("error_message"))

        await self._retry_controller(attempt)
        return out

    async def list_partition_reassignments(self) -> dict[TopicPartition, tuple[list[int], list[int], list[int]]]:
        """Ongoing reassignments: (replicas, adding, removing) per partition."""
        out: dict[TopicPartition, tuple[list[int], list[int], list[int]]] = {}

        async def attempt() -> None:
            response = await self._controller_request(
                ApiKey.LIST_PARTITION_REASSIGNMENTS, {"timeout_ms": 30_000, "topics": None})
            check_error(response["error_code"], "list partition reassignments", response.get("error_message"))
            out.clear()
            for t in response["topics"]:
                for p in t["partitions"]:
                    out[(t["name"], p["partition_index"])] = (
                        list(p["replicas"]), list(p["adding_replicas"]), list(p["removing_replicas"]))

        await self._retry_controller(attempt)
        return dict(sorted(out.items()))

    # --- consumer groups ------------------------------------------------------------------------

    # --- ACLs (CreateAcls, DescribeAcls, DeleteAcls: any broker answers) --------------------------

    async def create_acls(self, bindings: Sequence[AclBinding]) -> None:
        """Create ``bindings`` (one that exists already is fine); BrokerError for the first refused."""
        body = {"creations": [{
            "resource_type": int(b.resource_type), "resource_name": b.resource_name,
            "resource_pattern_type": int(b.pattern_type), "principal": b.principal, "host": b.host,
            "operation": int(b.operation), "permission_type": int(b.permission)} for b in bindings]}
        conn = await self.cluster.any_connection()
        response = await conn.request(ApiKey.CREATE_ACLS, body)
        for binding, result in zip(bindings, response["results"], strict=False):
            check_error(result["error_code"], f"create ACL {binding.describe()}", result.get("error_message"))

    async def describe_acls(self, acl_filter: AclFilter) -> list[AclBinding]:
        conn = await self.cluster.any_connection()
        response = await conn.request(ApiKey.DESCRIBE_ACLS, _filter_body(acl_filter))
        check_error(response["error_code"], "describe ACLs", response.get("error_message"))
        return [AclBinding.of(r["resource_type"], r["resource_name"], r["pattern_type"], a["principal"], a["host"],
                              a["operation"], a["permission_type"])
                for r in response["resources"] for a in r["acls"]]

    async def delete_acls(self, filters: Sequence[AclFilter]) -> list[AclBinding]:
        """Delete every binding a filter matches; the bindings deleted."""
        conn = await self.cluster.any_connection()
        response = await conn.request(ApiKey.DELETE_ACLS, {"filters": [_filter_body(f) for f in filters]})
        deleted: list[AclBinding] = []
        for result in response["filter_results"]:
            check_error(result["error_code"], "delete ACLs", result.get("error_message"))
            deleted += [AclBinding.of(m["resource_type"], m["resource_name"], m["pattern_type"], m["principal"],
                                      m["host"], m["operation"], m["permission_type"])
                        for m in result["matching_acls"]]
        return deleted

    async def find_group_coordinator(self, group_id: str) -> BrokerInfo:
        """The broker coordinating ``group_id`` (FindCoordinator, batched form from version 4).

        Raises BrokerError with COORDINATOR_NOT_AVAILABLE while the cluster has none yet (the
        first lookup makes a broker create ``__consumer_offsets``); callers retry that.
        """
        return await self._find_coordinator(GROUP_KEY_TYPE, group_id, f"group '{group_id}'")

    async def find_transaction_coordinator(self, transactional_id: str) -> BrokerInfo:
        """The broker coordinating ``transactional_id`` (FindCoordinator key type 1)."""
        return await self._find_coordinator(TRANSACTION_KEY_TYPE, transactional_id,
                                            f"transactional id '{transactional_id}'")

    async def _find_coordinator(self, key_type: int, key: str, what: str) -> BrokerInfo:
        conn = await self.cluster.any_connection()
        version = conn.version_for(ApiKey.FIND_COORDINATOR)
        operation = f"find the coordinator of {what}"
        if version >= 4:
            response = await conn.request(
                ApiKey.FIND_COORDINATOR, {"key_type": key_type, "coordinator_keys": [key]}, version
            )
            entry = _single(response["coordinators"], "key", key, operation)
        else:
            entry = await conn.request(ApiKey.FIND_COORDINATOR, {"key": key, "key_type": key_type}, version)
        check_error(entry["error_code"], operation, entry.get("error_message"))
        return BrokerInfo(entry["node_id"], entry["host"], entry["port"])

    async def _coordinator_call(
        self, group_id: str, call: Callable[[BrokerConnection, BrokerInfo], Awaitable[T]],
        *, key_type: int = GROUP_KEY_TYPE,
    ) -> T:
        """Run ``call`` against the coordinator of a group (or, with key type 1, of a
        transactional id); when the answer says the coordinator moved or is loading, find it
        again and retry until the operation timeout."""
        deadline = time.monotonic() + self.operation_timeout
        backoff = 0.05
        while True:
            try:
                if key_type == TRANSACTION_KEY_TYPE:
                    coordinator = await self.find_transaction_coordinator(group_id)
                else:
                    coordinator = await self.find_group_coordinator(group_id)
                conn = await self.cluster.connection_to(coordinator.node_id)
                return await call(conn, coordinator)
            except BrokerError as exc:
                if exc.code not in _COORDINATOR_RETRY_CODES or time.monotonic() + backoff > deadline:
                    raise
            except (ConnectionClosedError, BrokerUnreachableError):
                if time.monotonic() + backoff > deadline:
                    raise
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 1.0)

    async def list_groups(self, states: Sequence[str] | None = None) -> list[GroupListing]:
        """Every group of the cluster, sorted by id. Each broker lists only the groups it
        coordinates, so every broker is asked. ``states`` (Kafka's names: Stable, Empty, ...)
        filters on the broker when it supports ListGroups v4, here otherwise."""
        metadata = await self.cluster.refresh_metadata([])
        wanted = {s.lower() for s in states or ()}
        found: dict[str, GroupListing] = {}
        for node_id in sorted(metadata.brokers):
            conn = await self.cluster.connection_to(node_id)
            version = conn.version_for(ApiKey.LIST_GROUPS)
            body = {"states_filter": list(states or ()), "types_filter": []}
            response = await conn.request(ApiKey.LIST_GROUPS, body, version)
            check_error(response["error_code"], f"list groups on broker {node_id}")
            for g in response["groups"]:
                state = g["group_state"] if version >= 4 else None
                if wanted and state is not None and state.lower() not in wanted:
                    continue
                found[g["group_id"]] = GroupListing(
                    g["group_id"], g["protocol_type"], state, g["group_type"] if version >= 5 else None, node_id
                )
        return [found[k] for k in sorted(found)]

    async def describe_group(self, group_id: str) -> GroupDescription:
        """State, protocol and members of a group; a group that does not exist raises
        BrokerError GROUP_ID_NOT_FOUND (whichever way the broker says so)."""
        operation = f"describe group '{group_id}'"

        async def call(conn: BrokerConnection, coordinator: BrokerInfo) -> GroupDescription:
            # As Kafka's Admin client: ConsumerGroupDescribe first where the broker has it; it
            # answers GROUP_ID_NOT_FOUND for a classic group (and for none), which DescribeGroups
            # then describes (or says does not exist).
            if conn.supports(ApiKey.CONSUMER_GROUP_DESCRIBE):
                described = await _describe_consumer_group(conn, coordinator, group_id, operation)
                if described is not None:
                    return described
            if conn.supports(ApiKey.SHARE_GROUP_DESCRIBE):
                described = await _describe_share_group(conn, coordinator, group_id, operation)
                if described is not None:
                    return described
            response = await conn.request(
                ApiKey.DESCRIBE_GROUPS, {"groups": [group_id], "include_authorized_operations": False}
            )
            g = _single(response["groups"], "group_id", group_id, operation)
            code = g["error_code"]
            # DescribeGroups before v6 reports an unknown group as state Dead without an error.
            if code == ErrorCode.GROUP_ID_NOT_FOUND or (
                code == ErrorCode.NONE and g["group_state"] == "Dead" and not g["members"]
            ):
                raise BrokerError(ErrorCode.GROUP_ID_NOT_FOUND, operation, f"group '{group_id}' does not exist")
            check_error(code, operation, g.get("error_message"))
            members = tuple(
                GroupMember(
                    m["member_id"], m["group_instance_id"], m["client_id"], m["client_host"],
                    _member_assignment(g["protocol_type"], m["member_assignment"]),
                )
                for m in g["members"]
            )
            return GroupDescription(group_id, g["group_state"], g["protocol_type"], g["protocol_data"], members,
                                    coordinator)

        return await self._coordinator_call(group_id, call)

    async def share_group_offsets(self, group_id: str) -> dict[TopicPartition, tuple[int, int]]:
        """A share group's (start offset, lag) per share-partition (DescribeShareGroupOffsets,
        every topic its members subscribe to); lag -1 where the broker did not compute it."""
        operation = f"describe the offsets of share group '{group_id}'"

        async def call(conn: BrokerConnection, coordinator: BrokerInfo) -> dict[TopicPartition, tuple[int, int]]:
            response = await conn.request(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
                                          {"groups": [{"group_id": group_id, "topics": None}]})
            g = _single(response["groups"], "group_id", group_id, operation)
            check_error(g["error_code"], operation, g.get("error_message"))
            out: dict[TopicPartition, tuple[int, int]] = {}
            for t in g["topics"]:
                for part in t["partitions"]:
                    if part["error_code"] == ErrorCode.NONE:
                        out[(t["topic_name"], part["partition_index"])] = (part["start_offset"], part["lag"])
            return out

        return await self._coordinator_call(group_id, call)

    async def list_group_offsets(
        self, group_id: str, topics: Sequence[str] | None = None
    ) -> dict[TopicPartition, CommittedOffset]:
        """The group's committed offsets (OffsetFetch), for ``topics`` or every topic it has
        offsets for. Partitions without a committed offset are left out."""
        operation = f"fetch the offsets of group '{group_id}'"

        async def call(conn: BrokerConnection, coordinator: BrokerInfo) -> dict[TopicPartition, CommittedOffset]:
            version = min(conn.version_for(ApiKey.OFFSET_FETCH), _MAX_OFFSET_FETCH_BY_NAME)
            # None asks for every topic the group has offsets for; named topics need their
            # partition lists spelled out, so ask for every partition they have.
            requested: list[dict[str, Any]] | None = None
            if topics is not None:
                requested = [{"name": t.name, "partition_indexes": [p.partition for p in t.partitions]}
                             for t in await self.describe_topics(list(topics))]
            if version >= 8:
                body: dict[str, Any] = {
                    "groups": [{"group_id": group_id, "member_id": None, "member_epoch": -1, "topics": requested}],
                    "require_stable": False,
                }
            else:
                body = {"group_id": group_id, "topics": requested, "require_stable": False}
            response = await conn.request(ApiKey.OFFSET_FETCH, body, version)
            if version >= 8:
                entry = _single(response["groups"], "group_id", group_id, operation)
                code, answered = entry["error_code"], entry["topics"]
            else:
                code, answered = response.get("error_code", 0), response["topics"]
            check_error(code, operation)
            out: dict[TopicPartition, CommittedOffset] = {}
            for t in answered:
                for p in t["partitions"]:
                    if p["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                        continue  # older brokers' way of saying "nothing committed here"
                    check_error(p["error_code"], f"{operation} ({t['name']} partition {p['partition_index']})")
                    if p["committed_offset"] < 0:
                        continue
                    out[(t["name"], p["partition_index"])] = CommittedOffset(
                        t["name"], p["partition_index"], p["committed_offset"],
                        p["committed_leader_epoch"], p["metadata"],
                    )
            return dict(sorted(out.items()))

        return await self._coordinator_call(group_id, call)

    async def alter_group_offsets(
        self, group_id: str, offsets: Mapping[TopicPartition, int], *, metadata: str = ""
    ) -> None:
        """Commit ``offsets`` for the group as an outsider (OffsetCommit with generation -1 and
        no member id). Kafka accepts that only while the group has no members: for an active
        group the broker answers UNKNOWN_MEMBER_ID, raised here as a BrokerError."""
        operation = f"commit offsets for group '{group_id}'"
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (topic, partition), offset in sorted(offsets.items()):
            by_topic.setdefault(topic, []).append({
                "partition_index": partition, "committed_offset": offset,
                "committed_leader_epoch": -1, "committed_metadata": metadata,
            })
        body = {
            "group_id": group_id,
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "group_instance_id": None,
            "retention_time_ms": -1,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
        }

        async def call(conn: BrokerConnection, coordinator: BrokerInfo) -> None:
            version = min(conn.version_for(ApiKey.OFFSET_COMMIT), _MAX_OFFSET_COMMIT_BY_NAME)
            response = await conn.request(ApiKey.OFFSET_COMMIT, body, version)
            errors = [(t["name"], p["partition_index"], p["error_code"])
                      for t in response["topics"] for p in t["partitions"] if p["error_code"] != ErrorCode.NONE]
            if errors:
                # Coordinator moves are answered the same for every partition: retry them all.
                topic, partition, code = errors[0]
                raise BrokerError(code, operation, f"refused for {topic} partition {partition}")

        await self._coordinator_call(group_id, call)

    async def delete_groups(self, group_ids: Sequence[str]) -> dict[str, int]:
        """Delete groups and their committed offsets (only empty groups can be deleted).

        Returns the error code for every group: 0, NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND, ...
        """
        out: dict[str, int] = {}
        for group_id in group_ids:

            async def call(conn: BrokerConnection, coordinator: BrokerInfo, group_id: str = group_id) -> int:
                response = await conn.request(ApiKey.DELETE_GROUPS, {"groups_names": [group_id]})
                code: int = _single(response["results"], "group_id", group_id, f"delete group '{group_id}'")[
                    "error_code"]
                if code in _COORDINATOR_RETRY_CODES:
                    raise BrokerError(code, f"delete group '{group_id}'")
                return code

            out[group_id] = await self._coordinator_call(group_id, call)
        return out


    # --- transactions ---------------------------------------------------------------------------

    async def list_transactions(
        self,
        states: Sequence[str] | None = None,
        producer_ids: Sequence[int] | None = None,
        duration_ms: int | None = None,
        transactional_id_pattern: str | None = None,
    ) -> list[TransactionListing]:
        """Every transactional id of the cluster, sorted by id: each broker lists the ids it
        coordinates, so every broker is asked (ListTransactions). ``states`` (Kafka's names),
        ``producer_ids``, ``duration_ms`` (only transactions running longer than that;
        ListTransactions v1) and ``transactional_id_pattern`` (a Java regular expression the
        whole id matches; v2) filter on the brokers."""
        metadata = await self.cluster.refresh_metadata([])
        found: dict[str, TransactionListing] = {}
        body = {
            "state_filters": list(states or ()),
            "producer_id_filters": list(producer_ids or ()),
            "duration_filter": -1 if duration_ms is None else duration_ms,
            "transactional_id_pattern": transactional_id_pattern,
        }
        for node_id in sorted(metadata.brokers):
            operation = f"list transactions on broker {node_id}"
            deadline = time.monotonic() + self.operation_timeout
            while True:
                conn = await self.cluster.connection_to(node_id)
                version = conn.version_for(ApiKey.LIST_TRANSACTIONS)
                if duration_ms is not None and version < 1:
                    raise BrokerError(ErrorCode.UNSUPPORTED_VERSION, operation,
                                      "the broker does not filter transactions by duration (ListTransactions v1)")
                if transactional_id_pattern is not None and version < 2:
                    raise BrokerError(ErrorCode.UNSUPPORTED_VERSION, operation,
                                      "the broker does not filter transactional ids by pattern (ListTransactions v2)")
                response = await conn.request(ApiKey.LIST_TRANSACTIONS, body, version)
                code = response["error_code"]
                if code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS and time.monotonic() < deadline:
                    await asyncio.sleep(0.2)  # the broker is loading __transaction_state: ask again
                    continue
                check_error(code, operation)
                break
            for t in response["transaction_states"]:
                found[t["transactional_id"]] = TransactionListing(
                    t["transactional_id"], t["producer_id"], t["transaction_state"], node_id)
        return [found[k] for k in sorted(found)]

    async def describe_transaction(self, transactional_id: str) -> TransactionDescription:
        """The coordinator's state of a transactional id (FindCoordinator key type 1, then
        DescribeTransactions); an unknown id raises BrokerError TRANSACTIONAL_ID_NOT_FOUND."""
        operation = f"describe transactional id '{transactional_id}'"

        async def call(conn: BrokerConnection, coordinator: BrokerInfo) -> TransactionDescription:
            response = await conn.request(ApiKey.DESCRIBE_TRANSACTIONS, {"transactional_ids": [transactional_id]})
            t = _single(response["transaction_states"], "transactional_id", transactional_id, operation)
            code = t["error_code"]
            message = None
            if code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:
                message = f"transactional id '{transactional_id}' is not known to its coordinator"
            check_error(code, operation, message)
            partitions = tuple(sorted((topic["topic"], p) for topic in t["topics"] for p in topic["partitions"]))
            return TransactionDescription(
                transactional_id, t["transaction_state"], t["transaction_timeout_ms"],
                t["transaction_start_time_ms"], t["producer_id"], t["producer_epoch"], partitions, coordinator)

        return await self._coordinator_call(transactional_id, call, key_type=TRANSACTION_KEY_TYPE)

    async def describe_producers(self, topic: str, partition: int) -> list[ProducerState]:
        """The active producers of a partition, asked of its leader (DescribeProducers),
        sorted by producer id."""
        operation = f"describe the producers of {topic} partition {partition}"

        async def attempt() -> list[ProducerState]:
            conn = await self._partition_leader(topic, partition, operation)
            response = await conn.request(ApiKey.DESCRIBE_PRODUCERS, {
                "topics": [{"name": topic, "partition_indexes": [partition]}]})
            t = _single(response["topics"], "name", topic, operation)
            p = _single_partition(t["partitions"], partition, operation)
            check_error(p["error_code"], operation, p.get("error_message"))
            return sorted((ProducerState(s["producer_id"], s["producer_epoch"], s["last_sequence"],
                                         s["last_timestamp"], s["coordinator_epoch"], s["current_txn_start_offset"])
                           for s in p["active_producers"]), key=lambda s: s.producer_id)

        return await self._with_retries(attempt)

    async def abort_transaction(
        self, topic: str, partition: int, producer_id: int, producer_epoch: int, coordinator_epoch: int
    ) -> None:
        """Write an abort marker for ``producer_id``'s transaction on one partition, as Kafka's
        ``Admin.abortTransaction`` does: WriteTxnMarkers sent to the partition's leader, for a
        hanging transaction its coordinator will never end. A coordinator epoch below 0 (the
        producer never had a marker) is sent as 0, as Kafka's tool does."""
        operation = f"abort the transaction of producer {producer_id} on {topic} partition {partition}"
        body = {"markers": [{
            "producer_id": producer_id,
            "producer_epoch": producer_epoch,
            "transaction_result": False,
            "topics": [{"name": topic, "partition_indexes": [partition]}],
            "coordinator_epoch": max(coordinator_epoch, 0),
            "transaction_version": 0,
        }]}

        async def attempt() -> None:
            conn = await self._partition_leader(topic, partition, operation)
            response = await conn.request(ApiKey.WRITE_TXN_MARKERS, body)
            marker = _single(response["markers"], "producer_id", producer_id, operation)
            t = _single(marker["topics"], "name", topic, operation)
            p = _single_partition(t["partitions"], partition, operation)
            check_error(p["error_code"], operation)

        await self._with_retries(attempt)

    async def _partition_leader(self, topic: str, partition: int, operation: str) -> BrokerConnection:
        """A connection to the partition's leader; a topic or partition that does not exist is
        final (not retried)."""
        try:
            info = await self.cluster.topic(topic, refresh=True)
        except BrokerError as exc:
            if exc.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                raise Final(BrokerError(exc.code, operation, f"topic '{topic}' does not exist")) from None
            raise
        part = info.partition(partition)
        if part is None:
            raise Final(BrokerError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, operation,
                                    f"topic '{topic}' has no partition {partition} (it has {len(info.partitions)})"))
        if part.leader < 0:
            raise BrokerError(ErrorCode.LEADER_NOT_AVAILABLE, operation, f"partition {partition} has no leader")
        return await self.cluster.connection_to(part.leader)

async def _describe_consumer_group(
    conn: BrokerConnection, coordinator: BrokerInfo, group_id: str, operation: str
) -> GroupDescription | None:
    """A KIP-848 consumer group through ConsumerGroupDescribe, or None when the coordinator
    knows no consumer group of that id (it may be a classic one)."""
    response = await conn.request(
        ApiKey.CONSUMER_GROUP_DESCRIBE, {"group_ids": [group_id], "include_authorized_operations": False}
    )
    g = _single(response["groups"], "group_id", group_id, operation)
    if g["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND:
        return None
    check_error(g["error_code"], operation, g.get("error_message"))
    members = tuple(
        GroupMember(
            m["member_id"], m["instance_id"], m["client_id"], m["client_host"],
            _described_partitions(m["assignment"]),
            member_epoch=m["member_epoch"],
            target_assignment=_described_partitions(m["target_assignment"]),
            rack_id=m["rack_id"],
            subscribed_topics=tuple(m["subscribed_topic_names"]),
            subscribed_regex=m["subscribed_topic_regex"] or None,  # "" is no regex
        )
        for m in g["members"]
    )
    return GroupDescription(
        group_id, g["group_state"], CONSUMER_PROTOCOL_TYPE, "", members, coordinator,
        group_type="consumer", group_epoch=g["group_epoch"], assignment_epoch=g["assignment_epoch"],
        assignor=g["assignor_name"],
    )


async def _describe_share_group(
    conn: BrokerConnection, coordinator: BrokerInfo, group_id: str, operation: str
) -> GroupDescription | None:
    """A KIP-932 share group through ShareGroupDescribe, or None when the coordinator knows no
    share group of that id."""
    response = await conn.request(
        ApiKey.SHARE_GROUP_DESCRIBE, {"group_ids": [group_id], "include_authorized_operations": False}
    )
    g = _single(response["groups"], "group_id", group_id, operation)
    if g["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND:
        return None
    check_error(g["error_code"], operation, g.get("error_message"))
    members = tuple(
        GroupMember(m["member_id"], None, m["client_id"], m["client_host"], _described_partitions(m["assignment"]),
                    member_epoch=m["member_epoch"], rack_id=m["rack_id"],
                    subscribed_topics=tuple(m["subscribed_topic_names"]))
        for m in g["members"]
    )
    return GroupDescription(group_id, g["group_state"], "share", "", members, coordinator, group_type="share",
                            group_epoch=g["group_epoch"], assignment_epoch=g["assignment_epoch"],
                            assignor=g["assignor_name"])


def _described_partitions(assignment: dict[str, Any]) -> tuple[TopicPartition, ...]:
    return tuple(sorted((t["topic_name"], p) for t in assignment["topic_partitions"] for p in t["partitions"]))


def _member_assignment(protocol_type: str, data: bytes) -> tuple[TopicPartition, ...] | None:
    if protocol_type != CONSUMER_PROTOCOL_TYPE:
        return None
    try:
        return tuple(decode_assignment(data).topic_partitions())
    except DecodeError:
        return None


def _single_partition(results: list[dict[str, Any]], partition: int, operation: str) -> dict[str, Any]:
    for r in results:
        if r.get("partition_index") == partition:
            return r
    raise BrokerError(ErrorCode.UNKNOWN_SERVER_ERROR, operation,
                      f"the response has no result for partition {partition}")


def _single(results: list[dict[str, Any]], key: str, name: str | int, operation: str) -> dict[str, Any]:
    """The result entry for ``name``; a broker leaving it out is itself an error."""
    for r in results:
        if r.get(key) == name:
            return r
    if len(results) == 1 and results[0].get(key) in (None, ""):
        return results[0]
    raise BrokerError(ErrorCode.UNKNOWN_SERVER_ERROR, operation, f"the response has no result for '{name}'")


def _filter_body(acl_filter: AclFilter) -> dict[str, Any]:
    return {"resource_type_filter": int(acl_filter.resource_type), "resource_name_filter": acl_filter.resource_name,
            "pattern_type_filter": int(acl_filter.pattern_type), "principal_filter": acl_filter.principal,
            "host_filter": acl_filter.host, "operation": int(acl_filter.operation),
            "permission_type": int(acl_filter.permission)}
