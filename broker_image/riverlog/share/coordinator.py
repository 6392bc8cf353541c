"""The share coordinator (KIP-932): the durable state of share-partitions, kept in
``__share_group_state`` and served to partition leaders by Read/Write/Initialize/Delete
ShareGroupState.

It is a third :class:`~riverlog.coordinator_runtime.CoordinatorShell`, like the group and
transaction coordinators: a pure :class:`~riverlog.share.state_shard.ShareStateShard` per
partition this broker leads, loaded from the log when it becomes leader and unloaded when
leadership moves, each decision's records appended as one batch with acks=all and answered once
the high watermark passes them. A share-partition's state lives on the partition its key
``"<group>:<topic id>:<partition>"`` hashes to (Java's ``String.hashCode``, as Kafka's
SharePartitionKey.asCoordinatorKey), so FindCoordinator (key type 2) finds the same broker.
"""

from __future__ import annotations

import base64
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..config import BrokerConfig
from ..controller.topic_names import SHARE_GROUP_STATE_TOPIC
from ..controller.topic_ops import NewTopic
from ..coordinator.placement import partition_for
from ..coordinator_runtime import CoordinatorShell, ShardHandle, read_chunk
from ..protocol.errors import ErrorCode
from ..protocol.primitives import DecodeError
from ..protocol.record_batch import BatchHeader, decode_records
from ..storage import Log
from . import state_records
from .partition import StateBatch
from .state_records import ShareStateKey, ShareStateRecord
from .state_shard import Decision, ShareStateShard

if TYPE_CHECKING:
    from ..cluster.replica_manager import ReplicaManager
    from ..controller.api import ControllerApi

log = logging.getLogger(__name__)

Body = dict[str, Any]
AfterWrite = Callable[[ErrorCode], None]
LOAD_BUFFER_BYTES = 5 * 1024 * 1024


def coordinator_key(group_id: str, topic_id: uuid.UUID, partition: int) -> str:
    """The string a share-partition's coordinator is placed by (Kafka's coordinator key)."""
    return f"{group_id}:{topic_id_string(topic_id)}:{partition}"


def topic_id_string(topic_id: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``: URL-safe base64 of the 16 bytes, unpadded."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


@dataclass(frozen=True)
class ShareCoordinatorConfig:
    num_partitions: int = 50
    replication_factor: int = 3
    min_isr: int = 2
    segment_bytes: int = 100 * 1024 * 1024
    write_timeout_ms: int = 5000

    @classmethod
    def from_broker(cls, config: BrokerConfig) -> ShareCoordinatorConfig:
        return cls(config.get_int("share.coordinator.state.topic.num.partitions"),
                   config.get_int("share.coordinator.state.topic.replication.factor"),
                   config.get_int("share.coordinator.state.topic.min.isr"),
                   config.get_int("share.coordinator.state.topic.segment.bytes"),
                   config.get_int("share.coordinator.write.timeout.ms"))


@dataclass
class StateResult:
    replies: list[tuple[int, Body]] = field(default_factory=list)
    records: list[ShareStateRecord] = field(default_factory=list)
    after_write: list[AfterWrite] = field(default_factory=list)


class StateShardRunner:
    """A :class:`ShareStateShard` behind the shell's shard interface: operations take a reply
    token and answer once their records are durable."""

    def __init__(self, partition: int) -> None:
        self.state = ShareStateShard(partition)
        self._out = StateResult()
        self.now_ms = 0

    def run(self, now: int, operation: Callable[..., None], *args: Any) -> StateResult:
        self.now_ms = max(self.now_ms, now)
        out, self._out = self._out, StateResult()
        try:
            operation(*args)
            return self._out
        finally:
            self._out = out

    def complete_write(self, callbacks: list[AfterWrite], error: ErrorCode, now: int) -> StateResult:
        def run() -> None:
            for callback in callbacks:
                callback(error)

        return self.run(now, run)

    def _answer(self, token: int, decision: Decision) -> None:
        if decision.error != ErrorCode.NONE or not decision.records:
            self._out.replies.append((token, {"error_code": decision.error, "error_message": decision.message}))
            return

        def after(error: ErrorCode) -> None:
            self._out.replies.append((token, {"error_code": error, "error_message": None}))

        self._out.records.extend(decision.records)
        self._out.after_write.append(after)

    # Operations (called through CoordinatorShell.call) ------------------------------------

    def write_state(self, token: int, key: ShareStateKey, state_epoch: int, leader_epoch: int, start_offset: int,
                    batches: tuple[StateBatch, ...], delivery_complete_count: int) -> None:
        self._answer(token, self.state.write(key, state_epoch, leader_epoch, start_offset, batches,
                                             delivery_complete_count, self.now_ms))

    def initialize_state(self, token: int, key: ShareStateKey, state_epoch: int, start_offset: int) -> None:
        self._answer(token, self.state.initialize(key, state_epoch, start_offset, self.now_ms))

    def delete_state(self, token: int, key: ShareStateKey) -> None:
        self._answer(token, self.state.delete(key))

    def read_state(self, token: int, key: ShareStateKey, leader_epoch: int) -> None:
        error, state = self.state.read(key, leader_epoch)
        self._out.replies.append((token, {"error_code": error, "error_message": None, "state": state}))


class _Handle(ShardHandle[StateShardRunner]):
    pass


class ShareCoordinator(CoordinatorShell[StateShardRunner, _Handle, ShareStateRecord]):
    topic = SHARE_GROUP_STATE_TOPIC
    keys_name = "share-partitions"

    def __init__(self, config: ShareCoordinatorConfig, node_id: int, replicas: ReplicaManager,
                 controller: ControllerApi) -> None:
        super().__init__(node_id, replicas, controller, partition_for)
        self.config = config

    def _configured_partitions(self) -> int:
        return self.config.num_partitions

    def _new_topic(self, replication_for: Callable[[int], int]) -> NewTopic:
        cfg = self.config
        replication = replication_for(cfg.replication_factor)
        return NewTopic(SHARE_GROUP_STATE_TOPIC, cfg.num_partitions, replication,
                        configs={"cleanup.policy": "compact", "compression.type": "producer",
                                 "min.insync.replicas": str(max(1, min(cfg.min_isr, replication))),
                                 "segment.bytes": str(cfg.segment_bytes),
                                 "unclean.leader.election.enable": "false"})

    def _new_handle(self, index: int, key: tuple[Any, int]) -> _Handle:
        return _Handle(index, key, StateShardRunner(index))

    def _load_chunk(self, log_obj: Log, offset: int) -> tuple[list[ShareStateRecord], int]:
        return read_chunk(log_obj, offset, LOAD_BUFFER_BYTES, _decode_batch)

    def _replay(self, shard: StateShardRunner, item: ShareStateRecord) -> None:
        shard.state.replay(item)

    def _loaded(self, handle: _Handle) -> StateResult:
        return StateResult()

    def _loaded_detail(self, handle: _Handle) -> str:
        return f" ({len(handle.shard.state.states)} share-partitions)"

    def _encode(self, record: ShareStateRecord) -> tuple[bytes | None, bytes | None]:
        return state_records.encode(record)

    def _write_timeout_s(self) -> float:
        return self.config.write_timeout_ms / 1000

    def _write_cancelled(self, handle: _Handle, callbacks: list[Any]) -> None:
        self._complete_write(handle, callbacks, ErrorCode.NOT_COORDINATOR)

    def _process(self, handle: _Handle, result: StateResult) -> None:
        self._deliver(result.replies)
        if result.records or result.after_write:
            self._write(handle, result.records, result.after_write)

    async def stop(self) -> None:
        self._stop_shards()
        await self._cancel_tasks()


def _decode_batch(data: bytes, header: BatchHeader) -> list[ShareStateRecord]:
    items: list[ShareStateRecord] = []
    if header.is_control:
        return items
    for record in decode_records(data, header):
        if record.key is None:
            continue
        try:
            items.append(state_records.decode(record.key, record.value))
        except DecodeError as exc:
            log.warning("%s: skipping undecodable record at offset %d: %s", SHARE_GROUP_STATE_TOPIC,
                        record.offset, exc)
    return items
