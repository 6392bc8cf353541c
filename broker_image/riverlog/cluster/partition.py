"""A partition replica on this broker: its log plus the replication state around it.

The leader appends, tracks the high watermark (the offset every in-sync replica has reached)
and resolves acks=all waiters when it passes their batch. With one replica the high watermark
follows the log end offset directly; followers' fetch positions will feed ``update_follower``
once replication arrives, through the same waiter mechanism.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field

from ..protocol.errors import ErrorCode, KafkaError
from ..storage import AppendInfo, Log, ReadInfo


@dataclass
class ReplicaState:
    log_end_offset: int = 0
    last_caught_up_ms: int = 0


@dataclass
class Partition:
    topic: str
    index: int
    topic_id: uuid.UUID
    log: Log
    node_id: int
    leader: int = -1
    leader_epoch: int = 0
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    min_insync_replicas: int = 1
    followers: dict[int, ReplicaState] = field(default_factory=dict)
    flush_pending: bool = False
    # Futures resolved when the high watermark moves (acks=all) or data arrives (fetch waits).
    _hw_waiters: list[tuple[int, asyncio.Future[None]]] = field(default_factory=list)
    _data_waiters: list[asyncio.Future[None]] = field(default_factory=list)

    @property
    def is_leader(self) -> bool:
        return self.leader == self.node_id

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    def become_leader(self, leader_epoch: int, replicas: tuple[int, ...], isr: tuple[int, ...]) -> None:
        if leader_epoch > self.log.latest_epoch():
            self.log.assign_epoch(leader_epoch, self.log.log_end_offset)
        self.leader = self.node_id
        self.leader_epoch = leader_epoch
        self.replicas = replicas
        self.isr = isr
        self.followers = {r: self.followers.get(r, ReplicaState()) for r in replicas if r != self.node_id}
        self._maybe_advance_hw()

    def check_leader(self, current_leader_epoch: int = -1) -> None:
        """Raise the error a client must see when this broker can't serve the partition."""
        if current_leader_epoch >= 0:
            if current_leader_epoch < self.leader_epoch:
                raise KafkaError("", ErrorCode.FENCED_LEADER_EPOCH)
            if current_leader_epoch > self.leader_epoch:
                raise KafkaError("", ErrorCode.UNKNOWN_LEADER_EPOCH)
        if not self.is_leader:
            raise KafkaError("", ErrorCode.NOT_LEADER_OR_FOLLOWER)

    # Writes ------------------------------------------------------------------------------

    def append(self, records: memoryview, *, acks: int, now_ms: int) -> AppendInfo:
        self.check_leader()
        # KIP-966 (Kafka 4.x): the effective min ISR is capped at the replication factor, so an
        # RF=1 topic with min.insync.replicas=2 still accepts acks=all, as Kafka does.
        if acks == -1 and len(self.isr) < min(self.min_insync_replicas, len(self.replicas)):
            raise KafkaError(
                f"The size of the current ISR {set(self.isr)} is insufficient to satisfy the "
                f"min.isr requirement of {self.min_insync_replicas}",
                ErrorCode.NOT_ENOUGH_REPLICAS,
            )
        info = self.log.append_as_leader(records, leader_epoch=self.leader_epoch, now_ms=now_ms)
        self._maybe_advance_hw()
        self._wake_data_waiters()
        return info

    def wait_for_high_watermark(self, offset: int) -> asyncio.Future[None]:
        """A future resolved once the high watermark is above ``offset`` (acks=all)."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self.high_watermark > offset:
            fut.set_result(None)
        else:
            self._hw_waiters.append((offset, fut))
        return fut

    def _maybe_advance_hw(self) -> None:
        if not self.is_leader:
            return
        leo = self.log.log_end_offset
        in_sync = [self.followers[r].log_end_offset for r in self.isr if r in self.followers]
        new_hw = min([leo, *in_sync])
        if new_hw > self.log.high_watermark:
            self.log.update_high_watermark(new_hw)
            self._resolve_hw_waiters()

    def _resolve_hw_waiters(self) -> None:
        hw = self.high_watermark
        keep: list[tuple[int, asyncio.Future[None]]] = []
        for offset, fut in self._hw_waiters:
            if fut.done():
                continue
            if hw > offset:
                fut.set_result(None)
            else:
                keep.append((offset, fut))
        self._hw_waiters = keep

    # Reads -------------------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, *, replica: bool = False, min_one_batch: bool = True) -> ReadInfo:
        # Consumers see only committed data (below the high watermark); followers read to the end.
        limit = self.log.log_end_offset if replica else self.high_watermark
        return self.log.read(offset, max_bytes, max_offset=limit, min_one_batch=min_one_batch)

    def data_arrived(self) -> asyncio.Future[None]:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._data_waiters.append(fut)
        return fut

    def _wake_data_waiters(self) -> None:
        waiters, self._data_waiters = self._data_waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    def fail_waiters(self, code: ErrorCode) -> None:
        """Leadership moved or the partition is gone: nobody may wait for this replica any more."""
        for _, fut in self._hw_waiters:
            if not fut.done():
                fut.set_exception(KafkaError("", code))
        self._hw_waiters = []
        self._wake_data_waiters()
