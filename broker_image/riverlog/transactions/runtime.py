"""The transaction coordinator's asyncio shell around the pure per-partition state machines.

For every ``__transaction_state`` partition this broker leads there is one
:class:`~riverlog.transactions.shard.TxnShard`, whose coordinator epoch is the partition's
leader epoch. The shell

- creates ``__transaction_state`` on first need (FindCoordinator), as the group coordinator
  creates ``__consumer_offsets``;
- loads a shard when the broker becomes the partition's leader (reading the log in chunks, in a
  worker thread) and unloads it when leadership moves, answering what waited with NOT_COORDINATOR;
  requests meanwhile get COORDINATOR_LOAD_IN_PROGRESS;
- runs requests against the shard (a reply token per request, its future awaited by the
  handler), allocating producer ids from the controller when the shard asks for one;
- appends the records a decision produced (in decision order, one batch, acks=all) and reports
  back once the high watermark passed them, or the error;
- hands marker jobs to the :class:`~riverlog.transactions.markers.MarkerChannel` and, once every
  leader wrote its marker, tells the shard so it appends Complete*;
- every ``transaction.abort.timed.out.transaction.cleanup.interval.ms`` aborts timed-out
  transactions, every ``transaction.remove.expired.transaction.cleanup.interval.ms`` expires
  idle transactional ids.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..clock import now_ms
from ..controller.image import MetadataImage
from ..controller.topic_ops import NewTopic, live_brokers
from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.primitives import DecodeError
from ..protocol.record_batch import NewRecord, build_batch, decode_records, iter_batches
from ..storage import Log
from .config import TxnConfig
from .markers import LocalMarkerWriter, MarkerChannel
from .placement import TRANSACTION_STATE_TOPIC, partition_for
from .records import TxnLogRecord, UnknownTxnRecord, decode, encode
from .shard import AfterWrite, Body, MarkerJob, NeedProducerId, Result, TxnShard

if TYPE_CHECKING:
    from ..cluster.replica_manager import ReplicaManager
    from ..controller.api import ControllerApi

log = logging.getLogger(__name__)


def coordinator_error(code: ErrorCode) -> ErrorCode:
    """What a client is told when appending to ``__transaction_state`` failed (Kafka's mapping
    in ``TransactionStateManager.appendTransactionToLog``)."""
    if code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if code in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE):
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return code


@dataclass
class _ShardHandle:
    partition: int
    key: tuple[Any, int]  # (topic id, leader epoch) the shard was loaded for
    shard: TxnShard
    loaded: bool = False
    closed: bool = False
    load_task: asyncio.Task[None] | None = None
    tokens: set[int] = field(default_factory=set)


class TransactionCoordinator:
    def __init__(self, config: TxnConfig, node_id: int, replicas: ReplicaManager, controller: ControllerApi,
                 listener_name: str, local_markers: LocalMarkerWriter | None = None) -> None:
        self.config = config
        self.node_id = node_id
        self.replicas = replicas
        self.controller = controller
        self.markers = MarkerChannel(node_id, config, lambda: self.controller.image, listener_name, local_markers)
        self._handles: dict[int, _ShardHandle] = {}
        self._waiting: dict[int, asyncio.Future[Body]] = {}
        self._next_token = 0
        self._creating: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._maintenance: asyncio.Task[None] | None = None
        self._stopped = False

    # Placement ---------------------------------------------------------------------------

    @property
    def image(self) -> MetadataImage:
        return self.controller.image

    def num_partitions(self) -> int:
        """The partition count of ``__transaction_state`` (the configured one until it exists)."""
        topic = self.image.topics.get(TRANSACTION_STATE_TOPIC)
        if topic is not None and topic.partitions:
            return len(topic.partitions)
        return self.config.topic_num_partitions

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.num_partitions())

    def coordinator_of(self, transactional_id: str) -> int | None:
        """The broker leading the id's partition, None if there is none (yet)."""
        topic = self.image.topics.get(TRANSACTION_STATE_TOPIC)
        if topic is None:
            return None
        part = topic.partitions.get(self.partition_for(transactional_id))
        if part is None or part.leader < 0:
            return None
        broker = self.image.brokers.get(part.leader)
        if broker is None or broker.fenced:
            return None
        return part.leader

    async def ensure_topic(self) -> None:
        """Create ``__transaction_state`` if it does not exist (once, however many ask)."""
        if TRANSACTION_STATE_TOPIC in self.image.topics or self._stopped:
            return
        if self._creating is None or self._creating.done():
            self._creating = asyncio.get_running_loop().create_task(self._create_topic())
        await asyncio.shield(self._creating)

    async def _create_topic(self) -> None:
        cfg = self.config
        replication = max(1, min(cfg.topic_replication_factor, len(live_brokers(self.image))))
        request = NewTopic(
            TRANSACTION_STATE_TOPIC, cfg.topic_num_partitions, replication,
            configs={"cleanup.policy": "compact", "compression.type": "uncompressed",
                     "min.insync.replicas": str(max(1, min(cfg.topic_min_isr, replication))),
                     "segment.bytes": str(cfg.topic_segment_bytes),
                     "unclean.leader.election.enable": "false"},
        )
        try:
            (outcome,) = await self.controller.create_topics(
                [request], validate_only=False, default_partitions=cfg.topic_num_partitions,
                default_replication=replication)
        except Exception:
            log.exception("could not create %s", TRANSACTION_STATE_TOPIC)
            return
        if outcome.error not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
            log.warning("could not create %s: %s %s", TRANSACTION_STATE_TOPIC, outcome.error.name, outcome.message)
        else:
            log.info("created %s with %d partitions, replication factor %d", TRANSACTION_STATE_TOPIC,
                     cfg.topic_num_partitions, replication)

    # Leadership --------------------------------------------------------------------------

    def start(self) -> None:
        if self._maintenance is None:
            self._maintenance = asyncio.get_running_loop().create_task(self._maintenance_loop())

    def on_image(self, image: MetadataImage) -> None:
        """Load the shards of the ``__transaction_state`` partitions this broker now leads,
        unload the others."""
        if self._stopped:
            return
        wanted: dict[int, tuple[Any, int]] = {}
        topic = image.topics.get(TRANSACTION_STATE_TOPIC)
        if topic is not None:
            for part in topic.partitions.values():
                replica = self.replicas.get(TRANSACTION_STATE_TOPIC, part.partition)
                if part.leader == self.node_id and replica is not None and replica.is_leader and not replica.offline:
                    wanted[part.partition] = (topic.topic_id, part.leader_epoch)
        for index, handle in list(self._handles.items()):
            if wanted.get(index) != handle.key:
                self._unload(index)
        for index, key in wanted.items():
            if index not in self._handles:
                handle = _ShardHandle(index, key, TxnShard(index, key[1], self.config))
                self._handles[index] = handle
                handle.load_task = asyncio.get_running_loop().create_task(self._load(handle))

    async def _load(self, handle: _ShardHandle) -> None:
        partition = self.replicas.get(TRANSACTION_STATE_TOPIC, handle.partition)
        if partition is None:
            return
        started = time.monotonic()
        loop = asyncio.get_running_loop()
        log_obj = partition.log
        offset = log_obj.log_start_offset
        count = 0
        try:
            # Nothing else writes meanwhile: requests for this partition are answered
            # COORDINATOR_LOAD_IN_PROGRESS until it is loaded.
            while offset < log_obj.log_end_offset and not handle.closed:
                records, offset = await loop.run_in_executor(
                    None, _read_chunk, log_obj, offset, self.config.load_buffer_size)
                if handle.closed:
                    return
                for record in records:
                    handle.shard.replay(record)
                count += len(records)
        except Exception:
            log.exception("loading %s-%d failed; its transactional ids stay unavailable", TRANSACTION_STATE_TOPIC,
                          handle.partition)
            return
        if handle.closed:
            return
        handle.loaded = True
        log.log(logging.INFO if count else logging.DEBUG, "loaded %s-%d (coordinator epoch %d): %d records in %.3fs",
                TRANSACTION_STATE_TOPIC, handle.partition, handle.key[1], count, time.monotonic() - started)
        self._process(handle, handle.shard.run(now_ms(), handle.shard.on_loaded))

    def _unload(self, index: int) -> None:
        handle = self._handles.pop(index)
        handle.closed = True
        if handle.load_task is not None and not handle.load_task.done():
            handle.load_task.cancel()
        if handle.loaded:
            log.info("unloading %s-%d: no longer its leader", TRANSACTION_STATE_TOPIC, index)
        for token in list(handle.tokens):
            self._fail(token, ErrorCode.NOT_COORDINATOR)

    # Requests ----------------------------------------------------------------------------

    def _handle_for(self, index: int) -> _ShardHandle:
        handle = self._handles.get(index)
        if handle is None or handle.closed:
            raise KafkaError("", ErrorCode.NOT_COORDINATOR)
        if not handle.loaded:
            raise KafkaError("", ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        return handle

    def shard_for(self, transactional_id: str) -> TxnShard:
        """The loaded shard of the id, or KafkaError NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS."""
        return self._handle_for(self.partition_for(transactional_id)).shard

    def loaded_shards(self) -> list[TxnShard]:
        return [h.shard for h in self._handles.values() if h.loaded and not h.closed]

    def any_loading(self) -> bool:
        return any(not h.loaded for h in self._handles.values())

    async def call(self, transactional_id: str, operation: Callable[[TxnShard, int], None]) -> Body:
        """Run ``operation(shard, token)`` on the id's shard and wait for its answer to ``token``.

        Raises KafkaError with the coordinator-level error when the request cannot be served."""
        handle = self._handle_for(self.partition_for(transactional_id))
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

    async def init_producer_id(self, transactional_id: str, timeout_ms: int,
                               expected: tuple[int, int] | None) -> Body:
        fresh: int | None = None
        while True:
            def operation(shard: TxnShard, token: int, fresh: int | None = fresh) -> None:
                shard.init_producer_id(token, transactional_id, timeout_ms, expected, fresh)

            try:
                return await self.call(transactional_id, operation)
            except NeedProducerId:
                fresh = await self.controller.allocate_producer_id(self.node_id)

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
        for job in result.markers:
            self._spawn(self._write_markers(handle, job))

    def _spawn(self, work: Any) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _write(self, handle: _ShardHandle, records: list[TxnLogRecord], callbacks: list[AfterWrite]) -> None:
        """Append now (so the log keeps the order of decisions), confirm asynchronously."""
        waiter: asyncio.Future[None] | None = None
        error = ErrorCode.NONE
        if handle.closed:
            error = ErrorCode.NOT_COORDINATOR
        elif records:
            partition = self.replicas.get(TRANSACTION_STATE_TOPIC, handle.partition)
            try:
                if partition is None:
                    raise KafkaError("", ErrorCode.NOT_LEADER_OR_FOLLOWER)
                now = now_ms()
                batch = build_batch([NewRecord(value=value, key=key, timestamp=now)
                                     for key, value in (encode(r) for r in records)])
                info = partition.append(memoryview(batch), acks=-1, now_ms=now)
                waiter = partition.wait_for_high_watermark(info.last_offset)
            except KafkaError as exc:
                error = coordinator_error(exc.code)
                log.warning("%s-%d: could not append %d records: %s", TRANSACTION_STATE_TOPIC, handle.partition,
                            len(records), exc.code.name)
        if waiter is None:
            self._process(handle, handle.shard.complete_write(callbacks, error, now_ms()))
            return
        self._spawn(self._confirm(handle, waiter, callbacks))

    async def _confirm(self, handle: _ShardHandle, waiter: asyncio.Future[None], callbacks: list[AfterWrite]) -> None:
        error = ErrorCode.NONE
        try:
            await asyncio.wait_for(waiter, self.config.write_timeout_ms / 1000)
        except TimeoutError:
            error = ErrorCode.COORDINATOR_NOT_AVAILABLE  # Kafka: REQUEST_TIMED_OUT, mapped
        except KafkaError as exc:
            error = coordinator_error(exc.code)
        if handle.closed:
            error = ErrorCode.NOT_COORDINATOR
        self._process(handle, handle.shard.complete_write(callbacks, error, now_ms()))

    async def _write_markers(self, handle: _ShardHandle, job: MarkerJob) -> None:
        started = time.monotonic()
        done = await self.markers.write(job, lambda: not handle.closed)
        if handle.closed:
            return
        shard = handle.shard
        if done:
            log.debug("transactional id %s: %d markers written in %.3fs", job.transactional_id,
                      len(job.partitions), time.monotonic() - started)
            self._process(handle, shard.run(now_ms(), shard.markers_written, job))
        else:
            self._process(handle, shard.run(now_ms(), shard.markers_abandoned, job))

    # Timers ------------------------------------------------------------------------------

    async def _maintenance_loop(self) -> None:
        abort_every = self.config.abort_timed_out_interval_ms / 1000
        expire_every = self.config.remove_expired_interval_ms / 1000
        loop = asyncio.get_running_loop()
        next_expiry = loop.time() + expire_every
        while True:
            await asyncio.sleep(abort_every if abort_every < expire_every else expire_every)
            self.run_on_loaded(lambda s: s.abort_timed_out)
            if loop.time() >= next_expiry:
                next_expiry = loop.time() + expire_every
                self.run_on_loaded(lambda s: s.expire_transactional_ids)

    def run_on_loaded(self, operation: Callable[[TxnShard], Callable[[], None]]) -> None:
        """Run a parameterless operation on every loaded shard now."""
        for handle in list(self._handles.values()):
            if handle.loaded and not handle.closed:
                try:
                    result = handle.shard.run(now_ms(), operation(handle.shard))
                except Exception:
                    log.exception("%s-%d: periodic task failed", TRANSACTION_STATE_TOPIC, handle.partition)
                    continue
                self._process(handle, result)

    # Shutdown ----------------------------------------------------------------------------

    async def stop(self) -> None:
        self._stopped = True
        if self._maintenance is not None:
            self._maintenance.cancel()
        for index in list(self._handles):
            self._unload(index)
        for token in list(self._waiting):
            self._fail(token, ErrorCode.NOT_COORDINATOR)
        await self.markers.stop()
        tasks = list(self._tasks) + ([self._maintenance] if self._maintenance is not None else [])
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)


def _read_chunk(log_obj: Log, offset: int, max_bytes: int) -> tuple[list[TxnLogRecord], int]:
    """Records of the batches from ``offset`` (worker thread); returns them and the next offset."""
    data = log_obj.read_records_bytes(offset, max_bytes)
    records: list[TxnLogRecord] = []
    next_offset = offset
    for header in iter_batches(data):
        next_offset = max(next_offset, header.next_offset)
        if header.is_control:
            continue
        for record in decode_records(data, header):
            if record.key is None:
                continue
            try:
                records.append(decode(record.key, record.value))
            except UnknownTxnRecord as exc:
                log.warning("%s: skipping record at offset %d: %s", TRANSACTION_STATE_TOPIC, record.offset, exc)
            except DecodeError as exc:
                log.warning("%s: skipping undecodable record at offset %d: %s", TRANSACTION_STATE_TOPIC,
                            record.offset, exc)
    if next_offset == offset:
        next_offset = log_obj.log_end_offset  # nothing readable here: do not spin
    return records, next_offset
