"""What the group and the transaction coordinator's asyncio shells share.

Both keep their state in pure per-partition state machines ("shards") of an internal,
compacted topic (``__consumer_offsets``, ``__transaction_state``) and both need the same
machinery around them, which :class:`CoordinatorShell` holds:

- placement: the topic's partition count (the configured one until it exists), a key's
  partition (Kafka's ``Utils.abs(key.hashCode) % partitions``, given as ``place``) and the
  broker leading it;
- creating the topic on first need (once, however many ask);
- following leadership: a shard per partition this broker leads, loaded from the log (read in
  chunks on a worker thread, :func:`read_chunk`, replayed on the loop) and unloaded when
  leadership moves, failing what waited with NOT_COORDINATOR; meanwhile requests are answered
  COORDINATOR_LOAD_IN_PROGRESS;
- requests: a reply token per request, whose future the handler awaits;
- writing: the records of one decision appended as one batch (acks=all, in decision order) and
  the shard told once the high watermark passed them, or the error (:func:`coordinator_error`).

Each coordinator keeps only its own: its shard, records and configuration, what a result asks
for besides writes (the group's timers, the transactions' markers), what loading and
unloading mean to the shard.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from .clock import now_ms
from .controller.image import MetadataImage
from .controller.topic_ops import NewTopic, live_brokers
from .protocol.errors import ErrorCode, KafkaError
from .protocol.record_batch import NewRecord, build_batch, iter_batches

if TYPE_CHECKING:
    from .cluster.partition import Partition
    from .cluster.replica_manager import ReplicaManager
    from .controller.api import ControllerApi
    from .protocol.record_batch import BatchHeader
    from .storage import Log

log = logging.getLogger(__name__)

# Told apart by every coordinator: errors about the partition become coordinator errors the
# client knows how to retry (Kafka's mapping in GroupMetadataManager / TransactionStateManager).
_RETRIABLE = frozenset({ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT})
_MOVED = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR})
TOO_LARGE = frozenset({ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE})


def coordinator_error(code: ErrorCode, too_large: frozenset[ErrorCode] = TOO_LARGE) -> ErrorCode:
    """What a client is told when appending to the coordinator's partition failed with ``code``;
    ``too_large``: the codes that become UNKNOWN_SERVER_ERROR."""
    if code in _RETRIABLE:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if code in _MOVED:
        return ErrorCode.NOT_COORDINATOR
    if code in too_large:
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return code


ItemT = TypeVar("ItemT")


def read_chunk(log_obj: Log, offset: int, max_bytes: int,
               decode_batch: Callable[[bytes, BatchHeader], Iterable[ItemT]]) -> tuple[list[ItemT], int]:
    """What ``decode_batch`` makes of each batch from ``offset`` (run on a worker thread), and the
    next offset to read from."""
    data = log_obj.read_records_bytes(offset, max_bytes)
    items: list[ItemT] = []
    next_offset = offset
    for header in iter_batches(data):
        next_offset = max(next_offset, header.next_offset)
        items.extend(decode_batch(data, header))
    if next_offset == offset:
        # Nothing readable at this offset (should not happen): skip to the end to avoid spinning.
        next_offset = log_obj.log_end_offset
    return items, next_offset


class Shard(Protocol):
    """What the shell asks of a shard (``ResultT`` is the shard's result type)."""

    def run(self, now_ms: int, operation: Callable[..., Any], *args: Any) -> Any: ...

    def complete_write(self, callbacks: list[Any], error: ErrorCode, now_ms: int) -> Any: ...


ShardT = TypeVar("ShardT", bound=Shard)
Body = dict[str, Any]


@dataclass
class ShardHandle(Generic[ShardT]):
    """One partition's shard as the shell keeps it."""

    partition: int
    key: tuple[Any, int]  # (topic id, leader epoch) the shard was loaded for
    shard: ShardT
    loaded: bool = False
    closed: bool = False
    load_task: asyncio.Task[None] | None = None
    tokens: set[int] = field(default_factory=set)  # requests waiting for an answer from it


HandleT = TypeVar("HandleT", bound=ShardHandle[Any])


class CoordinatorShell(Generic[ShardT, HandleT, ItemT]):
    """The shared asyncio shell of a coordinator over the partitions of ``topic``."""

    topic: str
    # What a partition's keys are, for log lines ("groups", "transactional ids").
    keys_name: str
    # The append error codes that become UNKNOWN_SERVER_ERROR.
    too_large: frozenset[ErrorCode] = TOO_LARGE

    def __init__(self, node_id: int, replicas: ReplicaManager, controller: ControllerApi,
                 place: Callable[[str, int], int]) -> None:
        self.node_id = node_id
        self.replicas = replicas
        self.controller = controller
        self._place = place
        self._handles: dict[int, HandleT] = {}
        self._waiting: dict[int, asyncio.Future[Body]] = {}
        self._next_token = 0
        self._creating: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._stopped = False
        # Told the seconds each partition took to load (metrics).
        self.on_load_time: Callable[[float], None] | None = None

    # What each coordinator defines -------------------------------------------------------

    def _configured_partitions(self) -> int:
        raise NotImplementedError

    def _new_topic(self, replication_for: Callable[[int], int]) -> NewTopic:
        """The topic to create; ``replication_for(configured)`` caps a replication factor at the
        live brokers."""
        raise NotImplementedError

    def _new_handle(self, index: int, key: tuple[Any, int]) -> HandleT:
        raise NotImplementedError

    def _leads(self, replica: Partition) -> bool:
        """Whether this broker's replica of a partition it leads in the image may host a shard."""
        return replica.is_leader

    def _load_chunk(self, log_obj: Log, offset: int) -> tuple[list[ItemT], int]:
        """Items from ``offset`` (a worker thread) and the next offset."""
        raise NotImplementedError

    def _replay(self, shard: ShardT, item: ItemT) -> None:
        raise NotImplementedError

    def _loaded(self, handle: HandleT) -> Any:
        """The shard's result of being loaded."""
        raise NotImplementedError

    def _loaded_detail(self, handle: HandleT) -> str:
        return ""

    def _closing(self, handle: HandleT) -> None:
        """The shard is being unloaded (``handle.closed`` is set)."""

    def _encode(self, record: Any) -> tuple[bytes | None, bytes | None]:
        raise NotImplementedError

    def _write_timeout_s(self) -> float:
        raise NotImplementedError

    def _process(self, handle: HandleT, result: Any) -> None:
        """Deliver a shard's result: replies, writes and whatever else it asks for."""
        raise NotImplementedError

    def _write_confirmed(self, handle: HandleT, callbacks: list[Any], error: ErrorCode) -> None:
        """A write is durable (NONE) or failed: tell the shard."""
        self._complete_write(handle, callbacks, error)

    def _write_cancelled(self, handle: HandleT, callbacks: list[Any]) -> None:
        """Waiting for a write was cancelled (the coordinator stops)."""

    # Placement ---------------------------------------------------------------------------

    @property
    def image(self) -> MetadataImage:
        return self.controller.image

    def num_partitions(self) -> int:
        """The topic's partition count (the configured one until it exists)."""
        topic = self.image.topics.get(self.topic)
        if topic is not None and topic.partitions:
            return len(topic.partitions)
        return self._configured_partitions()

    def partition_for(self, key: str) -> int:
        return self._place(key, self.num_partitions())

    def coordinator_of(self, key: str) -> int | None:
        """The broker leading the key's partition, None if there is none (yet)."""
        topic = self.image.topics.get(self.topic)
        if topic is None:
            return None
        part = topic.partitions.get(self.partition_for(key))
        if part is None or part.leader < 0:
            return None
        broker = self.image.brokers.get(part.leader)
        if broker is None or broker.fenced:
            return None
        return part.leader

    async def ensure_topic(self) -> None:
        """Create the topic if it does not exist (once, however many ask)."""
        if self.topic in self.image.topics or self._stopped:
            return
        if self._creating is None or self._creating.done():
            self._creating = asyncio.get_running_loop().create_task(self._create_topic())
        await asyncio.shield(self._creating)

    async def _create_topic(self) -> None:
        live = len(live_brokers(self.image))
        request = self._new_topic(lambda configured: max(1, min(configured, live)))
        try:
            (outcome,) = await self.controller.create_topics(
                [request], validate_only=False, default_partitions=request.num_partitions,
                default_replication=request.replication_factor)
        except Exception:
            log.exception("could not create %s", self.topic)
            return
        if outcome.error not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
            log.warning("could not create %s: %s %s", self.topic, outcome.error.name, outcome.message)
        else:
            log.info("created %s with %d partitions, replication factor %d", self.topic,
                     request.num_partitions, request.replication_factor)

    # Leadership --------------------------------------------------------------------------

    def on_image(self, image: MetadataImage) -> None:
        """Load the shards of the topic's partitions this broker now leads, unload the others."""
        if self._stopped:
            return
        wanted: dict[int, tuple[Any, int]] = {}
        topic = image.topics.get(self.topic)
        if topic is not None:
            for part in topic.partitions.values():
                replica = self.replicas.get(self.topic, part.partition)
                if part.leader == self.node_id and replica is not None and self._leads(replica):
                    wanted[part.partition] = (topic.topic_id, part.leader_epoch)
        for index, handle in list(self._handles.items()):
            if wanted.get(index) != handle.key:
                self._unload(index)
        for index, key in wanted.items():
            if index not in self._handles:
                handle = self._new_handle(index, key)
                self._handles[index] = handle
                handle.load_task = asyncio.get_running_loop().create_task(self._load(handle))

    async def _load(self, handle: HandleT) -> None:
        partition = self.replicas.get(self.topic, handle.partition)
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
                items, offset = await loop.run_in_executor(None, self._load_chunk, log_obj, offset)
                if handle.closed:
                    return
                for item in items:
                    self._replay(handle.shard, item)
                count += len(items)
        except Exception:
            log.exception("loading %s-%d failed; its %s stay unavailable", self.topic, handle.partition,
                          self.keys_name)
            return
        if handle.closed:
            return
        handle.loaded = True
        elapsed = time.monotonic() - started
        log.log(logging.INFO if count else logging.DEBUG, "loaded %s-%d%s: %d records in %.3fs",
                self.topic, handle.partition, self._loaded_detail(handle), count, elapsed)
        if self.on_load_time is not None:
            self.on_load_time(elapsed)
        self._process(handle, self._loaded(handle))

    def _unload(self, index: int) -> None:
        handle = self._handles.pop(index)
        handle.closed = True
        if handle.load_task is not None and not handle.load_task.done():
            handle.load_task.cancel()
        if handle.loaded:
            log.info("unloading %s-%d: no longer its leader", self.topic, index)
        self._closing(handle)
        # Requests still parked there would otherwise wait forever.
        for token in list(handle.tokens):
            self._fail(token, ErrorCode.NOT_COORDINATOR)

    # Requests ----------------------------------------------------------------------------

    def _handle_for(self, index: int) -> HandleT:
        handle = self._handles.get(index)
        if handle is None or handle.closed:
            raise KafkaError("", ErrorCode.NOT_COORDINATOR)
        if not handle.loaded:
            raise KafkaError("", ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        return handle

    def shard_for(self, key: str) -> ShardT:
        """The loaded shard of the key, or KafkaError NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS."""
        return self._handle_for(self.partition_for(key)).shard

    def loaded_handles(self) -> list[HandleT]:
        return [h for h in self._handles.values() if h.loaded and not h.closed]

    def loaded_shards(self) -> list[ShardT]:
        return [h.shard for h in self.loaded_handles()]

    def any_loading(self) -> bool:
        return any(not h.loaded for h in self._handles.values())

    async def call(self, key: str, operation: Callable[[ShardT, int], None]) -> Body:
        """Run ``operation(shard, token)`` on the key's shard and wait for the answer it (or a
        later event) gives to ``token``.

        Raises KafkaError with the coordinator-level error when the request cannot be served.
        """
        handle = self._handle_for(self.partition_for(key))
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

    # Writes ------------------------------------------------------------------------------

    def _spawn(self, work: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _complete_write(self, handle: HandleT, callbacks: list[Any], error: ErrorCode) -> None:
        self._process(handle, handle.shard.complete_write(callbacks, error, now_ms()))

    def _write(self, handle: HandleT, records: list[Any], callbacks: list[Any],
               producer: tuple[int, int] | None = None) -> None:
        """Append now (so the log keeps the order of decisions), confirm asynchronously.

        ``producer`` (id, epoch): the records are a transactional batch of that producer (no
        sequence number: the partition skips sequence checks for coordinator writes, but the
        batch joins the producer's open transaction, so its marker closes it)."""
        waiter: asyncio.Future[None] | None = None
        error = ErrorCode.NONE
        if handle.closed:
            error = ErrorCode.NOT_COORDINATOR
        elif records:
            partition = self.replicas.get(self.topic, handle.partition)
            try:
                if partition is None:
                    raise KafkaError("", ErrorCode.NOT_LEADER_OR_FOLLOWER)
                now = now_ms()
                new_records = [NewRecord(value=value, key=key, timestamp=now)
                               for key, value in (self._encode(r) for r in records)]
                if producer is None:
                    info = partition.append(memoryview(build_batch(new_records)), acks=-1, now_ms=now)
                else:
                    batch = build_batch(new_records, producer_id=producer[0], producer_epoch=producer[1],
                                        transactional=True)
                    info = partition.append(memoryview(batch), acks=-1, now_ms=now, from_coordinator=True)
                waiter = partition.wait_for_high_watermark(info.last_offset)
            except KafkaError as exc:
                error = coordinator_error(exc.code, self.too_large)
                log.warning("%s-%d: could not append %d records: %s", self.topic, handle.partition,
                            len(records), exc.code.name)
        if waiter is None:
            self._complete_write(handle, callbacks, error)
            return
        self._spawn(self._confirm(handle, waiter, callbacks))

    async def _confirm(self, handle: HandleT, waiter: asyncio.Future[None], callbacks: list[Any]) -> None:
        error = ErrorCode.NONE
        try:
            await asyncio.wait_for(waiter, self._write_timeout_s())
        except TimeoutError:
            error = ErrorCode.COORDINATOR_NOT_AVAILABLE  # Kafka: REQUEST_TIMED_OUT, mapped
        except KafkaError as exc:
            error = coordinator_error(exc.code, self.too_large)
        except asyncio.CancelledError:
            self._write_cancelled(handle, callbacks)
            raise
        self._write_confirmed(handle, callbacks, error)

    # Shutdown ----------------------------------------------------------------------------

    def _stop_shards(self) -> None:
        """Unload every shard and fail every waiting request (NOT_COORDINATOR)."""
        self._stopped = True
        for index in list(self._handles):
            self._unload(index)
        for token in list(self._waiting):
            self._fail(token, ErrorCode.NOT_COORDINATOR)

    async def _cancel_tasks(self, *extra: asyncio.Task[Any]) -> None:
        tasks = list(self._tasks) + list(extra)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
