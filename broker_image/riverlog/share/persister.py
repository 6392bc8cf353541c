"""The partition leader's side of share-state persistence: reading a share-partition's state
from its share coordinator when the leader takes it up, and writing it back after changes.

The coordinator is the leader of the ``__share_group_state`` partition the share-partition's key
hashes to: on this broker it is called directly, elsewhere with Read/WriteShareGroupState over
one connection per broker (on the inter-broker listener, with the inter-broker security). Errors
come back as codes; the caller decides (a fetch goes on from the log end, an acknowledgement
reports the error).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..client.connection import BrokerConnection
from ..protocol.api_keys import ApiKey
from ..protocol.errors import ErrorCode, KafkaError
from .coordinator import ShareCoordinator, StateShardRunner, coordinator_key
from .partition import StateBatch
from .state_records import ShareStateKey

if TYPE_CHECKING:
    from ..controller.image import MetadataImage
    from ..security.client_config import ClientSecurity

log = logging.getLogger(__name__)

Body = dict[str, Any]

# Errors of a coordinator moving, and the pauses before each retry (about 3 s in all: a broker's
# partitions move to new leaders within a few seconds of its loss).
RETRIABLE = frozenset({ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR,
                       ErrorCode.COORDINATOR_LOAD_IN_PROGRESS})
RETRY_BACKOFF_S = (0.1, 0.2, 0.4, 0.8, 1.6)


@dataclass(frozen=True)
class PersistedState:
    state_epoch: int
    start_offset: int  # -1: never written
    batches: tuple[StateBatch, ...]
    delivery_complete_count: int = -1  # records past the start already done (-1: unknown)


class SharePersister:
    def __init__(self, node_id: int, coordinator: ShareCoordinator, image: Callable[[], MetadataImage],
                 listener_name: str, security: ClientSecurity | None, timeout_s: float) -> None:
        self.node_id = node_id
        self.coordinator = coordinator
        self.image = image
        self.listener_name = listener_name
        self.security = security
        self.timeout_s = timeout_s
        self._conns: dict[int, BrokerConnection] = {}

    async def read(self, group_id: str, topic_id: uuid.UUID, partition: int,
                   leader_epoch: int) -> tuple[ErrorCode, PersistedState | None]:
        key = ShareStateKey(group_id, topic_id, partition)
        body = await self._request(ApiKey.READ_SHARE_GROUP_STATE, key, {"leader_epoch": leader_epoch},
                                   lambda s, token: s.read_state(token, key, leader_epoch))
        code = ErrorCode(body["error_code"])
        if code != ErrorCode.NONE:
            return code, None
        if "state" in body:  # answered by the coordinator on this broker
            state = body["state"]
            if state is None:
                return code, PersistedState(0, -1, ())
            return code, PersistedState(state.state_epoch, state.start_offset, state.batches)
        batches = tuple(StateBatch(b["first_offset"], b["last_offset"], b["delivery_state"], b["delivery_count"])
                        for b in body["state_batches"])
        return code, PersistedState(body["state_epoch"], body["start_offset"], batches)

    async def summary(self, group_id: str, topic_id: uuid.UUID,
                      partition: int) -> tuple[ErrorCode, PersistedState | None]:
        """The state as an admin sees it (no leader epoch to fence): for DescribeShareGroupOffsets."""
        key = ShareStateKey(group_id, topic_id, partition)
        body = await self._request(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, key, {"leader_epoch": -1},
                                   lambda s, token: s.read_state(token, key, -1))
        code = ErrorCode(body["error_code"])
        if code != ErrorCode.NONE:
            return code, None
        if "state" in body:
            state = body["state"]
            return code, None if state is None else PersistedState(state.state_epoch, state.start_offset, (),
                                                                   state.delivery_complete_count)
        if body["start_offset"] < 0:
            return code, None
        return code, PersistedState(body["state_epoch"], body["start_offset"], (),
                                    body.get("delivery_complete_count", -1))

    async def initialize(self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int,
                         start_offset: int) -> ErrorCode:
        """Start the share-partition afresh at ``start_offset`` in a new state epoch (offsets altered)."""
        key = ShareStateKey(group_id, topic_id, partition)
        body = await self._request(ApiKey.INITIALIZE_SHARE_GROUP_STATE, key,
                                   {"state_epoch": state_epoch, "start_offset": start_offset},
                                   lambda s, token: s.initialize_state(token, key, state_epoch, start_offset))
        return ErrorCode(body["error_code"])

    async def delete(self, group_id: str, topic_id: uuid.UUID, partition: int) -> ErrorCode:
        """Drop the share-partition's state (DeleteShareGroupOffsets)."""
        key = ShareStateKey(group_id, topic_id, partition)
        body = await self._request(ApiKey.DELETE_SHARE_GROUP_STATE, key, {},
                                   lambda s, token: s.delete_state(token, key))
        return ErrorCode(body["error_code"])

    async def write(self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int, leader_epoch: int,
                    start_offset: int, batches: list[StateBatch], delivery_complete_count: int) -> ErrorCode:
        key = ShareStateKey(group_id, topic_id, partition)
        wire = {"state_epoch": state_epoch, "leader_epoch": leader_epoch, "start_offset": start_offset,
                "delivery_complete_count": delivery_complete_count,
                "state_batches": [{"first_offset": b.first_offset, "last_offset": b.last_offset,
                                   "delivery_state": b.delivery_state, "delivery_count": b.delivery_count}
                                  for b in batches]}
        body = await self._request(ApiKey.WRITE_SHARE_GROUP_STATE, key, wire, lambda s, token: s.write_state(
            token, key, state_epoch, leader_epoch, start_offset, tuple(batches), delivery_complete_count))
        return ErrorCode(body["error_code"])

    async def high_watermark(self, leader: int, topic: str, partition: int) -> int | None:
        """A partition's high watermark asked of its leader (ListOffsets, latest, read uncommitted)
        over the persister's inter-broker connections: the share lag where this broker does not
        lead the partition. None when the leader cannot answer."""
        request = {"replica_id": -1, "isolation_level": 0, "timeout_ms": int(self.timeout_s * 1000), "topics": [
            {"name": topic, "partitions": [{"partition_index": partition, "current_leader_epoch": -1,
                                            "timestamp": -1}]}]}
        try:
            conn = await self._connection(leader)
            resp = await conn.request(ApiKey.LIST_OFFSETS, request)
        except Exception as exc:  # the lag is then unknown (-1), as for any partition without a leader
            log.info("high watermark of %s-%d from broker %d failed: %s", topic, partition, leader, exc)
            await self._drop(leader)
            return None
        answer = resp["topics"][0]["partitions"][0]
        return int(answer["offset"]) if answer["error_code"] == ErrorCode.NONE else None

    async def _request(self, api: ApiKey, key: ShareStateKey, partition_body: Body,
                       local: Callable[[StateShardRunner, int], None]) -> Body:
        """One call, retried while the coordinator is moving (as Kafka's persister retries with
        backoff): a leader change of ``__share_group_state`` would otherwise fail every
        acknowledgement of the share-partitions it coordinates until the new leader is known."""
        deadline = asyncio.get_running_loop().time() + self.timeout_s
        body = await self._attempt(api, key, partition_body, local)
        for delay in RETRY_BACKOFF_S:
            if body["error_code"] not in RETRIABLE or asyncio.get_running_loop().time() + delay >= deadline:
                break
            await asyncio.sleep(delay)
            body = await self._attempt(api, key, partition_body, local)
        return body

    async def _attempt(self, api: ApiKey, key: ShareStateKey, partition_body: Body,
                       local: Callable[[StateShardRunner, int], None]) -> Body:
        coordinator_id = coordinator_key(key.group_id, key.topic_id, key.partition)
        try:
            await asyncio.wait_for(self.coordinator.ensure_topic(), self.timeout_s)
        except TimeoutError:
            return {"error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE}
        node = self.coordinator.coordinator_of(coordinator_id)
        if node is None:
            return {"error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE}
        if node == self.node_id:
            try:
                return await asyncio.wait_for(self.coordinator.call(coordinator_id, local), self.timeout_s)
            except KafkaError as exc:
                return {"error_code": exc.code}
            except TimeoutError:
                return {"error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE}
        request = {"group_id": key.group_id, "topics": [{"topic_id": key.topic_id, "partitions": [
            {"partition": key.partition, **partition_body}]}]}
        try:
            conn = await self._connection(node)
            resp = await conn.request(api, request)
        except Exception as exc:  # the connection broke or timed out: retried by the caller's next change
            log.info("share state %s to broker %d failed: %s", api.name, node, exc)
            await self._drop(node)
            return {"error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE}
        result: Body = resp["results"][0]["partitions"][0]
        return result

    async def _connection(self, node: int) -> BrokerConnection:
        conn = self._conns.get(node)
        if conn is not None and not conn.closed:
            return conn
        broker = self.image().brokers.get(node)
        ep = (broker.endpoint(self.listener_name) or broker.endpoint()) if broker is not None else None
        if ep is None:
            raise KafkaError(f"broker {node} has no endpoint", ErrorCode.COORDINATOR_NOT_AVAILABLE)
        conn = await BrokerConnection.connect(ep.host, ep.port, client_id=f"share-persister-{self.node_id}",
                                              connect_timeout=self.timeout_s, request_timeout=self.timeout_s,
                                              security=self.security)
        self._conns[node] = conn
        return conn

    async def _drop(self, node: int) -> None:
        conn = self._conns.pop(node, None)
        if conn is not None:
            await conn.close()

    async def stop(self) -> None:
        for node in list(self._conns):
            await self._drop(node)
