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
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ..clock import now_ms
from ..controller.topic_ops import NewTopic
from ..coordinator_runtime import CoordinatorShell, ShardHandle, read_chunk
from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.primitives import DecodeError
from ..protocol.record_batch import BatchHeader, decode_records
from ..storage import Log
from .config import TxnConfig
from .markers import LocalMarkerWriter, MarkerChannel
from .partition_adder import PartitionAdder
from .placement import TRANSACTION_STATE_TOPIC, partition_for
from .records import TxnLogRecord, UnknownTxnRecord, decode, encode
from .shard import AfterWrite, Body, MarkerJob, NeedProducerId, Result, TxnShard
from .state import TopicPartition

if TYPE_CHECKING:
    from ..cluster.partition import Partition
    from ..cluster.replica_manager import ReplicaManager
    from ..controller.api import ControllerApi

log = logging.getLogger(__name__)

_ShardHandle = ShardHandle[TxnShard]


class TransactionCoordinator(CoordinatorShell[TxnShard, _ShardHandle, TxnLogRecord]):
    topic = TRANSACTION_STATE_TOPIC
    keys_name = "transactional ids"

    def __init__(self, config: TxnConfig, node_id: int, replicas: ReplicaManager, controller: ControllerApi,
                 listener_name: str, local_markers: LocalMarkerWriter | None = None) -> None:
        super().__init__(node_id, replicas, controller, partition_for)
        self.config = config
        self.markers = MarkerChannel(node_id, config, lambda: self.controller.image, listener_name, local_markers)
        # Transaction version 2: partition leaders and group coordinators add partitions here.
        self.adder = PartitionAdder(node_id, lambda: self.controller.image, listener_name, self._add_locally,
                                    config.marker_request_timeout_ms / 1000, self._verify_locally,
                                    security=config.security)
        self._maintenance: asyncio.Task[None] | None = None
        # Told (committed, seconds from Prepare* written to Complete* written) per completed
        # transaction (metrics).
        self.on_completed: Callable[[bool, float], None] | None = None

    # The shell's hooks -------------------------------------------------------------------

    def _configured_partitions(self) -> int:
        return self.config.topic_num_partitions

    def _new_topic(self, replication_for: Callable[[int], int]) -> NewTopic:
        cfg = self.config
        replication = replication_for(cfg.topic_replication_factor)
        return NewTopic(
            TRANSACTION_STATE_TOPIC, cfg.topic_num_partitions, replication,
            configs={"cleanup.policy": "compact", "compression.type": "uncompressed",
                     "min.insync.replicas": str(max(1, min(cfg.topic_min_isr, replication))),
                     "segment.bytes": str(cfg.topic_segment_bytes),
                     "unclean.leader.election.enable": "false"},
        )

    def _leads(self, replica: Partition) -> bool:
        return replica.is_leader and not replica.offline

    def _new_handle(self, index: int, key: tuple[Any, int]) -> _ShardHandle:
        return _ShardHandle(index, key, TxnShard(index, key[1], self.config))

    def _load_chunk(self, log_obj: Log, offset: int) -> tuple[list[TxnLogRecord], int]:
        return _read_chunk(log_obj, offset, self.config.load_buffer_size)

    def _replay(self, shard: TxnShard, item: TxnLogRecord) -> None:
        shard.replay(item)

    def _loaded(self, handle: _ShardHandle) -> Result:
        return handle.shard.run(now_ms(), handle.shard.on_loaded)

    def _loaded_detail(self, handle: _ShardHandle) -> str:
        return f" (coordinator epoch {handle.key[1]})"

    def _encode(self, record: TxnLogRecord) -> tuple[bytes | None, bytes | None]:
        return encode(record)

    def _write_timeout_s(self) -> float:
        return self.config.write_timeout_ms / 1000

    def _write_confirmed(self, handle: _ShardHandle, callbacks: list[AfterWrite], error: ErrorCode) -> None:
        self._complete_write(handle, callbacks, ErrorCode.NOT_COORDINATOR if handle.closed else error)

    # Requests ----------------------------------------------------------------------------

    async def init_producer_id(self, transactional_id: str, timeout_ms: int,
                               expected: tuple[int, int] | None) -> Body:
        return await self._with_producer_id(transactional_id, lambda shard, token, fresh: shard.init_producer_id(
            token, transactional_id, timeout_ms, expected, fresh))

    async def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, committed: bool,
                      client_transaction_version: int) -> Body:
        return await self._with_producer_id(transactional_id, lambda shard, token, fresh: shard.end_txn(
            token, transactional_id, producer_id, producer_epoch, committed, client_transaction_version, fresh))

    async def _with_producer_id(self, transactional_id: str,
                                operation: Callable[[TxnShard, int, int | None], None]) -> Body:
        """Run ``operation`` (shard, token, fresh producer id); when it needs a new producer id
        (:class:`NeedProducerId`), allocate one from the controller and run it again."""
        fresh: int | None = None
        while True:
            def run(shard: TxnShard, token: int, fresh: int | None = fresh) -> None:
                operation(shard, token, fresh)

            try:
                return await self.call(transactional_id, run)
            except NeedProducerId:
                fresh = await self.controller.allocate_producer_id(self.node_id)

    def _verify_locally(self, transactional_id: str, producer_id: int, producer_epoch: int,
                        partitions: Sequence[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """KIP-890 part 1's verification, for a coordinator that is this broker."""
        try:
            shard = self.shard_for(transactional_id)
        except KafkaError as exc:
            return dict.fromkeys(partitions, exc.code)
        return shard.verify_partitions(transactional_id, producer_id, producer_epoch, partitions)

    async def _add_locally(self, transactional_id: str, producer_id: int, producer_epoch: int,
                           partitions: Sequence[TopicPartition]) -> ErrorCode:
        """Transaction version 2's implicit add, for a coordinator that is this broker."""
        try:
            body = await self.call(transactional_id, lambda shard, token: shard.add_partitions(
                token, transactional_id, producer_id, producer_epoch, partitions, 2))
        except KafkaError as exc:
            return exc.code
        return ErrorCode(body["error_code"])

    # Effects -----------------------------------------------------------------------------

    def _process(self, handle: _ShardHandle, result: Result) -> None:
        self._deliver(result.replies)
        if result.records or result.after_write:
            self._write(handle, result.records, result.after_write)
        for job in result.markers:
            self._spawn(self._write_markers(handle, job))
        if self.on_completed is not None:
            for committed, latency_ms in result.completed:
                self.on_completed(committed, latency_ms / 1000)

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

    def start(self) -> None:
        """Start the periodic abort of timed-out transactions and expiry of idle ids."""
        if self._maintenance is None:
            self._maintenance = asyncio.get_running_loop().create_task(self._maintenance_loop())

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

    # Introspection -----------------------------------------------------------------------

    def open_transaction_samples(self) -> Iterator[tuple[int, int, float | None]]:
        """(partition, open transactions, age in seconds of the oldest) per partition loaded here."""
        now = now_ms()
        for handle in self.loaded_handles():
            count, oldest = handle.shard.open_transactions()
            yield handle.partition, count, None if oldest is None else max(0, now - oldest) / 1000

    # Shutdown ----------------------------------------------------------------------------

    async def stop(self) -> None:
        if self._maintenance is not None:
            self._maintenance.cancel()
        self._stop_shards()
        await self.markers.stop()
        await self.adder.stop()
        await self._cancel_tasks(*([self._maintenance] if self._maintenance is not None else []))


def _read_chunk(log_obj: Log, offset: int, max_bytes: int) -> tuple[list[TxnLogRecord], int]:
    """Records of the batches from ``offset`` (worker thread); returns them and the next offset."""
    return read_chunk(log_obj, offset, max_bytes, _decode_batch)


def _decode_batch(data: bytes, header: BatchHeader) -> list[TxnLogRecord]:
    records: list[TxnLogRecord] = []
    if header.is_control:
        return records
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
    return records
