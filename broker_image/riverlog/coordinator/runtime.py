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
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..clock import now_ms
from ..controller.image import MetadataImage
from ..controller.topic_ops import NewTopic
from ..coordinator_runtime import TOO_LARGE, CoordinatorShell, ShardHandle, read_chunk
from ..coordinator_runtime import coordinator_error as _coordinator_error
from ..group_config import GROUP_RESOURCE
from ..protocol.errors import ErrorCode
from ..protocol.primitives import DecodeError
from ..protocol.record_batch import BatchHeader, decode_records
from ..storage import Log
from .config import GroupConfig
from .consumer_records import TopicMetadata
from .effects import AfterWrite, Result
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

# Kafka's GroupMetadataManager also maps INVALID_FETCH_SIZE to UNKNOWN_SERVER_ERROR.
_TOO_LARGE = TOO_LARGE | {ErrorCode.INVALID_FETCH_SIZE}


def coordinator_error(code: ErrorCode) -> ErrorCode:
    """What a client is told when writing to the offsets partition failed (Kafka's mapping):
    errors about the partition become coordinator errors the client knows how to retry."""
    return _coordinator_error(code, _TOO_LARGE)


@dataclass
class _ShardHandle(ShardHandle[GroupShard]):
    timer: asyncio.TimerHandle | None = None
    timer_deadline: int | None = None


class GroupCoordinator(CoordinatorShell[GroupShard, _ShardHandle, _LoadItem]):
    topic = GROUP_METADATA_TOPIC
    keys_name = "groups"
    too_large = _TOO_LARGE

    def __init__(self, config: GroupConfig, node_id: int, replicas: ReplicaManager,
                 controller: ControllerApi) -> None:
        super().__init__(node_id, replicas, controller, partition_for)
        self.config = config
        self._image: MetadataImage | None = None
        # The topics as consumer groups see them (name -> metadata), rebuilt when the image's change.
        self._topics: dict[str, TopicMetadata] = {}
        # Group-level configs (group id -> overrides), likewise from the image.
        self._group_configs: dict[str, Mapping[str, str]] = {}

    # The shell's hooks -------------------------------------------------------------------

    def _configured_partitions(self) -> int:
        return self.config.offsets_topic_num_partitions

    def _new_topic(self, replication_for: Callable[[int], int]) -> NewTopic:
        cfg = self.config
        return NewTopic(
            GROUP_METADATA_TOPIC, cfg.offsets_topic_num_partitions,
            replication_for(cfg.offsets_topic_replication_factor),
            configs={"cleanup.policy": "compact", "compression.type": "producer",
                     "segment.bytes": str(cfg.offsets_topic_segment_bytes)},
        )

    def _new_handle(self, index: int, key: tuple[Any, int]) -> _ShardHandle:
        shard = GroupShard(index, self.config)
        shard.set_topics(self._topics)
        shard.set_group_configs(self._group_configs)
        return _ShardHandle(index, key, shard)

    def _load_chunk(self, log_obj: Log, offset: int) -> tuple[list[_LoadItem], int]:
        return _read_chunk(log_obj, offset, self.config.offsets_load_buffer_size)

    def _replay(self, shard: GroupShard, item: _LoadItem) -> None:
        if isinstance(item, _Marker):
            shard.replay_marker(item.producer_id, item.committed)
        else:
            shard.replay(*item)

    def _loaded(self, handle: _ShardHandle) -> Result:
        return handle.shard.on_loaded(now_ms())

    def _closing(self, handle: _ShardHandle) -> None:
        if handle.timer is not None:
            handle.timer.cancel()
        if handle.loaded:
            self._process(handle, handle.shard.on_unloaded(now_ms()))

    def _encode(self, record: CoordinatorRecord) -> tuple[bytes | None, bytes | None]:
        return encode(record)

    def _write_timeout_s(self) -> float:
        return self.config.offsets_commit_timeout_ms / 1000

    def _write_cancelled(self, handle: _ShardHandle, callbacks: list[AfterWrite]) -> None:
        self._complete_write(handle, callbacks, ErrorCode.NOT_COORDINATOR)

    # Placement ---------------------------------------------------------------------------

    async def ensure_offsets_topic(self) -> None:
        """Create ``__consumer_offsets`` if it does not exist (once, however many ask)."""
        await self.ensure_topic()

    # Leadership --------------------------------------------------------------------------

    def on_image(self, image: MetadataImage) -> None:
        """Load the shards of offsets partitions this broker now leads, unload the others, and
        drop offsets of deleted topics."""
        if self._stopped:
            return
        old, self._image = self._image, image
        if old is None or old.topics is not image.topics or old.brokers is not image.brokers:
            self._topics = topics_for_consumer_groups(image)
            for handle in self._handles.values():
                handle.shard.set_topics(self._topics)
        if old is None or old.configs is not image.configs:
            self._group_configs = group_configs_of(image)
            for handle in self._handles.values():
                handle.shard.set_group_configs(self._group_configs)
        super().on_image(image)
        if old is not None:
            deleted = {name for name, t in old.topics.items()
                       if name not in image.topics or image.topics[name].topic_id != t.topic_id}
            deleted.discard(GROUP_METADATA_TOPIC)
            if deleted:
                for handle in self._handles.values():
                    if handle.loaded:
                        self._process(handle, handle.shard.run(now_ms(), handle.shard.tombstone_deleted_topics,
                                                               deleted))

    # Effects -----------------------------------------------------------------------------

    def _process(self, handle: _ShardHandle, result: Result) -> None:
        self._deliver(result.replies)
        if result.records or result.after_write:
            self._write(handle, result.records, result.after_write)
        for txn in result.txn_writes:
            # A transactional offset commit: a transactional batch of its producer.
            self._write(handle, txn.records, [txn.after], (txn.producer_id, txn.producer_epoch))
        if not handle.closed:
            self._arm(handle)

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

    def group_samples(self) -> Iterator[tuple[str, str, str, int, int | None, int]]:
        for shard in self.loaded_shards():
            yield from shard.group_summaries()

    # Shutdown ----------------------------------------------------------------------------

    async def stop(self) -> None:
        self._stop_shards()
        await self._cancel_tasks()


def group_configs_of(image: MetadataImage) -> dict[str, Mapping[str, str]]:
    """The image's group-level configs by group id."""
    return {name: values for (rtype, name), values in image.configs.items() if rtype == GROUP_RESOURCE}


def topics_for_consumer_groups(image: MetadataImage) -> dict[str, TopicMetadata]:
    """Every topic with its id, partition count and, per partition, the racks of its replicas
    (what the assignors see)."""
    out: dict[str, TopicMetadata] = {}
    for name, topic in image.topics.items():
        count = len(topic.partitions)
        racks: list[tuple[str, ...]] = []
        for p in range(count):
            part = topic.partitions.get(p)
            replicas = part.replicas if part is not None else ()
            racks.append(tuple(sorted({rack for r in replicas
                                       if (b := image.brokers.get(r)) is not None and (rack := b.rack)})))
        out[name] = TopicMetadata(topic.topic_id, name, count, tuple(racks) if any(racks) else ())
    return out


def _read_chunk(log_obj: Log, offset: int, max_bytes: int) -> tuple[list[_LoadItem], int]:
    """Records and markers of the batches from ``offset`` (worker thread); returns them and the
    next offset."""
    return read_chunk(log_obj, offset, max_bytes, _decode_batch)


def _decode_batch(data: bytes, header: BatchHeader) -> list[_LoadItem]:
    items: list[_LoadItem] = []
    if header.is_control:
        for record in decode_records(data, header):
            marker = _control_type(record.key)
            if marker is not None:
                items.append(_Marker(header.producer_id, marker == CONTROL_COMMIT))
        return items
    producer_id = header.producer_id if header.is_transactional else NO_PRODUCER_ID
    for record in decode_records(data, header):
        if record.key is None:
            continue
        try:
            items.append((decode(record.key, record.value), producer_id))
        except UnknownRecord:
            continue  # another group type's record (KIP-848 etc.): not ours to replay
        except DecodeError as exc:
            log.warning("%s: skipping undecodable record at offset %d: %s", GROUP_METADATA_TOPIC,
                        record.offset, exc)
    return items


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
