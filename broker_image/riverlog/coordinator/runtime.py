"""The group coordinator's asyncio shell around the pure per-partition state machines.

For every ``__consumer_offsets`` partition this broker leads there is one
:class:`~riverlog.coordinator.shard.GroupShard`. The shell

- loads a shard when the broker becomes the partition's leader (reading the log from its
  start in chunks, in a worker thread, replaying records on the loop) and unloads it when
  leadership moves away, answering whatever was parked with NOT_COORDINATOR;
- runs requests against the shard: each request gets a reply token whose future the handler
  awaits, so a JoinGroup can stay parked until its rebalance completes;
- appends the records a decision produced to the partition (in decision order, as one batch)
  and reports back once the high watermark passes them (acks=all), or the error; transactional
  offset commits go as a transactional batch of their producer (``from_coordinator``), and
  ``complete_transaction`` applies the markers the WriteTxnMarkers handler wrote;
- arms one loop timer per shard at the shard's next deadline and ticks the shard then;
- creates ``__consumer_offsets`` on first need.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..clock import now_ms
from ..controller.image import MetadataImage
from ..controller.topic_ops import NewTopic, live_brokers
from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.primitives import DecodeError
from ..protocol.record_batch import NewRecord, build_batch, decode_records, iter_batches
from ..storage import Log
from .config import GroupConfig
from .effects import AfterWrite, Body, Result, TxnWrite
from .placement import GROUP_METADATA_TOPIC, partition_for
from .records import CoordinatorRecord, UnknownRecord, decode, encode
from .shard import GroupShard
from .txn_offsets import NO_PRODUCER_ID

if TYPE_CHECKING:
    from ..cluster.replica_manager import ReplicaManager
    from ..controller.api import ControllerApi

log = logging.getLogger(__name__)

# (group, topic, partition, committed offset, high watermark or None if not hosted here)
OffsetSample = tuple[str, str, int, int, int | None]


@dataclass(frozen=True)
class _Marker:
    """A transaction marker (control batch) read back from the log."""

    producer_id: int
    committed: bool


# What loading replays, in log order: a record with the producer id of its batch (-1 unless
# the batch is transactional), or a marker.
_LoadItem = tuple[CoordinatorRecord, int] | _Marker



def coordinator_error(code: ErrorCode) -> ErrorCode:
    """What a client is told when writing to the offsets partition failed (Kafka's mapping):
    errors about the partition become coordinator errors the client knows how to retry."""
    if code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if code in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_FETCH_SIZE):
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return code


@dataclass
class _ShardHandle:
    partition: int
    key: tuple[Any, int]  # (topic id, leader epoch) the shard was loaded for
    shard: GroupShard
    loaded: bool = False
    closed: bool = False
    timer: asyncio.TimerHandle | None = None
    timer_deadline: int | None = None
    load_task: asyncio.Task[None] | None = None
    tokens: set[int] = field(default_factory=set)


class GroupCoordinator:
    def __init__(self, config: GroupConfig, node_id: int, replicas: ReplicaManager,
                 controller: ControllerApi) -> None:
        self.config = config
        self.node_id = node_id
        self.replicas = replicas
        self.controller = controller
        self._handles: dict[int, _ShardHandle] = {}
        self._waiting: dict[int, asyncio.Future[Body]] = {}
        self._next_token = 0
        self._creating: asyncio.Task[None] | None = None
        self._pending_writes: set[asyncio.Task[None]] = set()
        self._image: MetadataImage | None = None
        self._stopped = False

    # Placement ---------------------------------------------------------------------------

    @property
    def image(self) -> MetadataImage:
        return self.controller.image

    def num_partitions(self) -> int:
        """The offsets topic's partition count (the configured one until it exists)."""
        topic = self.image.topics.get(GROUP_METADATA_TOPIC)
        if topic is not None and topic.partitions:
            return len(topic.partitions)
        return self.config.offsets_topic_num_partitions

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions())

    def coordinator_of(self, group_id: str) -> int | None:
        """The broker leading the group's offsets partition, None if there is none (yet)."""
        topic = self.image.topics.get(GROUP_METADATA_TOPIC)
        if topic is None:
            return None
        part = topic.partitions.get(self.partition_for(group_id))
        if part is None or part.leader < 0:
            return None
        broker = self.image.brokers.get(part.leader)
        if broker is None or broker.fenced:
            return None
        return part.leader

    async def ensure_offsets_topic(self) -> None:
        """Create ``__consumer_offsets`` if it does not exist (once, however many ask)."""
        if GROUP_METADATA_TOPIC in self.image.topics or self._stopped:
            return
        if self._creating is None or self._creating.done():
            self._creating = asyncio.get_running_loop().create_task(self._create_offsets_topic())
        await asyncio.shield(self._creating)

    async def _create_offsets_topic(self) -> None:
        cfg = self.config
        replication = max(1, min(cfg.offsets_topic_replication_factor, len(live_brokers(self.image))))
        request = NewTopic(
            GROUP_METADATA_TOPIC, cfg.offsets_topic_num_partitions, replication,
            configs={"cleanup.policy": "compact", "compression.type": "producer",
                     "segment.bytes": str(cfg.offsets_topic_segment_bytes)},
        )
        try:
            (outcome,) = await self.controller.create_topics(
                [request], validate_only=False, default_partitions=cfg.offsets_topic_num_partitions,
                default_replication=replication)
        except Exception:
            log.exception("could not create %s", GROUP_METADATA_TOPIC)
            return
        if outcome.error not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
            log.warning("could not create %s: %s %s", GROUP_METADATA_TOPIC, outcome.error.name, outcome.message)
        else:
            log.info("created %s with %d partitions, replication factor %d", GROUP_METADATA_TOPIC,
                     cfg.offsets_topic_num_partitions, replication)

    # Leadership --------------------------------------------------------------------------

    def on_image(self, image: MetadataImage) -> None:
        """Load the shards of offsets partitions this broker now leads, unload the others, and
        drop offsets of deleted topics."""
        if self._stopped:
            return
        old, self._image = self._image, image
        wanted: dict[int, tuple[Any, int]] = {}
        topic = image.topics.get(GROUP_METADATA_TOPIC)
        if topic is not None:
            for part in topic.partitions.values():
                replica = self.replicas.get(GROUP_METADATA_TOPIC, part.partition)
                if part.leader == self.node_id and replica is not None and replica.is_leader:
                    wanted[part.partition] = (topic.topic_id, part.leader_epoch)
        for index, handle in list(self._handles.items()):
            if wanted.get(index) != handle.key:
                self._unload(index)
        for index, key in wanted.items():
            if index not in self._handles:
                self._start_load(index, key)
        if old is not None:
            deleted = {name for name, t in old.topics.items()
                       if name not in image.topics or image.topics[name].topic_id != t.topic_id}
            deleted.discard(GROUP_METADATA_TOPIC)
            if deleted:
                for handle in self._handles.values():
                    if handle.loaded:
                        self._process(handle, handle.shard.run(now_ms(), handle.shard.tombstone_deleted_topics,
                                                               deleted))

    def _start_load(self, index: int, key: tuple[Any, int]) -> None:
        handle = _ShardHandle(index, key, GroupShard(index, self.config))
        self._handles[index] = handle
        handle.load_task = asyncio.get_running_loop().create_task(self._load(handle))

    async def _load(self, handle: _ShardHandle) -> None:
        partition = self.replicas.get(GROUP_METADATA_TOPIC, handle.partition)
        if partition is None:
            return
        started = time.monotonic()
        loop = asyncio.get_running_loop()
        log_obj = partition.log
        offset = log_obj.log_start_offset
        count = 0
        try:
            # Read to the log end as it is when we get there: nothing else writes meanwhile,
            # as requests for this partition are answered COORDINATOR_LOAD_IN_PROGRESS.
            while offset < log_obj.log_end_offset and not handle.closed:
                records, offset = await loop.run_in_executor(
                    None, _read_chunk, log_obj, offset, self.config.offsets_load_buffer_size)
                if handle.closed:
                    return
                for item in records:
                    if isinstance(item, _Marker):
                        handle.shard.replay_marker(item.producer_id, item.committed)
                    else:
                        handle.shard.replay(*item)
                count += len(records)
        except Exception:
            log.exception("loading %s-%d failed; the partition's groups stay unavailable",
                          GROUP_METADATA_TOPIC, handle.partition)
            return
        if handle.closed:
            return
        handle.loaded = True
        log.log(logging.INFO if count else logging.DEBUG, "loaded %s-%d: %d records in %.3fs",
                GROUP_METADATA_TOPIC, handle.partition, count, time.monotonic() - started)
        self._process(handle, handle.shard.on_loaded(now_ms()))

    def _unload(self, index: int) -> None:
        handle = self._handles.pop(index)
        handle.closed = True
        if handle.timer is not None:
            handle.timer.cancel()
        if handle.load_task is not None and not handle.load_task.done():
            handle.load_task.cancel()
        if handle.loaded:
            log.info("unloading %s-%d: no longer its leader", GROUP_METADATA_TOPIC, index)
            self._process(handle, handle.shard.on_unloaded(now_ms()))
        # Requests still parked there would otherwise wait forever.
        for token in list(handle.tokens):
            self._fail(token, ErrorCode.NOT_COORDINATOR)

    # Requests ----------------------------------------------------------------------------

    def shard_for(self, group_id: str) -> GroupShard:
        """The loaded shard of the group, or KafkaError NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS."""
        return self._handle_for(self.partition_for(group_id)).shard

    def _handle_for(self, index: int) -> _ShardHandle:
        handle = self._handles.get(index)
        if handle is None or handle.closed:
            raise KafkaError("", ErrorCode.NOT_COORDINATOR)
        if not handle.loaded:
            raise KafkaError("", ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        return handle

    def loaded_shards(self) -> list[GroupShard]:
        return [h.shard for h in self._handles.values() if h.loaded and not h.closed]

    def any_loading(self) -> bool:
        return any(not h.loaded for h in self._handles.values())

    async def call(self, group_id: str, operation: Callable[[GroupShard, int], None]) -> Body:
        """Run ``operation(shard, token)`` on the group's shard and wait for the answer it (or a
        later event) gives to ``token``.

        Raises KafkaError with the coordinator-level error when the request cannot be served.
        """
        handle = self._handle_for(self.partition_for(group_id))
        self._next_token += 1
        token = self._next_token
        future: asyncio.Future[Body] = asyncio.get_running_loop().create_future()
        self._waiting[token] = future
        handle.tokens.add(token)
        try:
            self._process(handle, handle.shard.run(now_ms(), operation, handle.shard, token))
            return await future
        finally:
            self._waiting.pop(token, None)
            handle.tokens.discard(token)

    def _deliver(self, replies: list[tuple[int, Body]]) -> None:
        for token, body in replies:
            future = self._waiting.get(token)
            if future is not None and not future.done():
                future.set_result(body)

    def _fail(self, token: int, code: ErrorCode) -> None:
        future = self._waiting.get(token)
        if future is not None and not future.done():
            future.set_exception(KafkaError("", code))

    # Effects -----------------------------------------------------------------------------

    def _process(self, handle: _ShardHandle, result: Result) -> None:
        self._deliver(result.replies)
        if result.records or result.after_write:
            self._write(handle, result.records, result.after_write)
        for txn in result.txn_writes:
            self._write(handle, txn.records, [txn.after], txn)
        if not handle.closed:
            self._arm(handle)

    def _write(self, handle: _ShardHandle, records: list[CoordinatorRecord], callbacks: list[AfterWrite],
               txn: TxnWrite | None = None) -> None:
        """Append now (so the log keeps the order of decisions), confirm asynchronously.

        ``txn``: the records are a transactional batch of that producer (no sequence number:
        the partition skips sequence checks for coordinator writes, but the batch joins the
        producer's open transaction, so its marker closes it)."""
        waiter: asyncio.Future[None] | None = None
        error = ErrorCode.NONE
        if handle.closed:
            error = ErrorCode.NOT_COORDINATOR
        elif records:
            partition = self.replicas.get(GROUP_METADATA_TOPIC, handle.partition)
            try:
                if partition is None:
                    raise KafkaError("", ErrorCode.NOT_LEADER_OR_FOLLOWER)
                now = now_ms()
                new_records = [NewRecord(value=value, key=key, timestamp=now)
                               for key, value in (encode(r) for r in records)]
                if txn is None:
                    info = partition.append(memoryview(build_batch(new_records)), acks=-1, now_ms=now)
                else:
                    batch = build_batch(new_records, producer_id=txn.producer_id,
                                        producer_epoch=txn.producer_epoch, transactional=True)
                    info = partition.append(memoryview(batch), acks=-1, now_ms=now, from_coordinator=True)
                waiter = partition.wait_for_high_watermark(info.last_offset)
            except KafkaError as exc:
                error = coordinator_error(exc.code)
                log.warning("%s-%d: could not append %d records: %s", GROUP_METADATA_TOPIC, handle.partition,
                            len(records), exc.code.name)
        if waiter is None:
            self._process(handle, handle.shard.complete_write(callbacks, error, now_ms()))
            return
        task = asyncio.get_running_loop().create_task(self._confirm(handle, waiter, callbacks))
        self._pending_writes.add(task)
        task.add_done_callback(self._pending_writes.discard)

    async def _confirm(self, handle: _ShardHandle, waiter: asyncio.Future[None], callbacks: list[AfterWrite]) -> None:
        error = ErrorCode.NONE
        try:
            await asyncio.wait_for(waiter, self.config.offsets_commit_timeout_ms / 1000)
        except TimeoutError:
            error = ErrorCode.COORDINATOR_NOT_AVAILABLE
        except KafkaError as exc:
            error = coordinator_error(exc.code)
        except asyncio.CancelledError:
            error = ErrorCode.NOT_COORDINATOR
            self._process(handle, handle.shard.complete_write(callbacks, error, now_ms()))
            raise
        self._process(handle, handle.shard.complete_write(callbacks, error, now_ms()))

    def _arm(self, handle: _ShardHandle) -> None:
        deadline = handle.shard.next_deadline()
        if deadline == handle.timer_deadline and (deadline is None or handle.timer is not None):
            return
        if handle.timer is not None:
            handle.timer.cancel()
            handle.timer = None
        handle.timer_deadline = deadline
        if deadline is None:
            return
        delay = max(0, deadline - now_ms()) / 1000
        handle.timer = asyncio.get_running_loop().call_later(delay, self._on_timer, handle)

    def _on_timer(self, handle: _ShardHandle) -> None:
        handle.timer = None
        handle.timer_deadline = None
        if handle.closed:
            return
        try:
            result = handle.shard.tick(now_ms())
        except Exception:
            log.exception("%s-%d: timer handling failed", GROUP_METADATA_TOPIC, handle.partition)
            result = Result()
        self._process(handle, result)

    # Transactions ------------------------------------------------------------------------

    def complete_transaction(self, offsets_partition: int, producer_id: int, committed: bool) -> None:
        """A transaction marker for ``producer_id`` was written to ``offsets_partition`` (called by
        the WriteTxnMarkers handler once the marker is durable): its pending transactional offsets
        become the committed ones, or are dropped on abort. Not loaded here: nothing to do, the
        load replays the marker from the log."""
        handle = self._handles.get(offsets_partition)
        if handle is None or handle.closed or not handle.loaded:
            return
        self._process(handle, handle.shard.run(now_ms(), handle.shard.complete_transaction, producer_id, committed))

    # Introspection -----------------------------------------------------------------------

    def offset_samples(self) -> Iterator[OffsetSample]:
        for shard in self.loaded_shards():
            for group, topic, partition, value in shard.offsets.all_entries():
                replica = self.replicas.get(topic, partition)
                hw = replica.high_watermark if replica is not None and replica.is_leader else None
                yield group, topic, partition, value.offset, hw

    def group_samples(self) -> Iterator[tuple[str, str, int]]:
        for shard in self.loaded_shards():
            yield from shard.group_summaries()

    # Shutdown ----------------------------------------------------------------------------

    async def stop(self) -> None:
        self._stopped = True
        for index in list(self._handles):
            self._unload(index)
        for task in list(self._pending_writes):
            task.cancel()
        for token in list(self._waiting):
            self._fail(token, ErrorCode.NOT_COORDINATOR)
        if self._pending_writes:
            await asyncio.gather(*self._pending_writes, return_exceptions=True)


def _read_chunk(log_obj: Log, offset: int, max_bytes: int) -> tuple[list[_LoadItem], int]:
    """Records and markers of the batches from ``offset`` (worker thread); returns them and the
    next offset."""
    data = log_obj.read_records_bytes(offset, max_bytes)
    records: list[_LoadItem] = []
    next_offset = offset
    for header in iter_batches(data):
        next_offset = max(next_offset, header.next_offset)
        if header.is_control:
            for record in decode_records(data, header):
                marker = _control_type(record.key)
                if marker is not None:
                    records.append(_Marker(header.producer_id, marker == CONTROL_COMMIT))
            continue
        producer_id = header.producer_id if header.is_transactional else NO_PRODUCER_ID
        for record in decode_records(data, header):
            if record.key is None:
                continue
            try:
                records.append((decode(record.key, record.value), producer_id))
            except UnknownRecord:
                continue  # another group type's record (KIP-848 etc.): not ours to replay
            except DecodeError as exc:
                log.warning("%s: skipping undecodable record at offset %d: %s", GROUP_METADATA_TOPIC,
                            record.offset, exc)
    if next_offset == offset:
        # Nothing readable at this offset (should not happen): skip to the end to avoid spinning.
        next_offset = log_obj.log_end_offset
    return records, next_offset


CONTROL_ABORT = 0
CONTROL_COMMIT = 1


def _control_type(key: bytes | None) -> int | None:
    """The type of a control record (its key: int16 version, int16 type): 0 abort, 1 commit;
    None for other control records (KRaft's, or a version we do not know), which we skip."""
    if key is None or len(key) < 4:
        return None
    version, kind = struct.unpack_from(">hh", key)
    if version != 0 or kind not in (CONTROL_ABORT, CONTROL_COMMIT):
        return None
    return int(kind)
