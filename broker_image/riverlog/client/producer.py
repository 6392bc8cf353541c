"""A minimal async producer: per-partition batching, key partitioning, retries on leader moves.

``send()`` puts a record into its partition's open batch and returns a future for the record's
offset. A sender task closes batches when they are full or ``linger_ms`` after the first record,
groups them by partition leader into Produce requests (several in flight per broker), and resolves
the futures from the answers. Without idempotence a retried batch may be written twice or land
after a later batch of the same partition, as with Kafka's non-idempotent producer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..protocol.api_keys import ApiKey
from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.primitives import ZERO_UUID
from ..protocol.record_batch import Compression, NewRecord, build_batch
from ..security.client_config import ClientSecurity
from .cluster import Cluster, TopicInfo
from .errors import (
    RETRIABLE_CODES,
    STALE_METADATA_CODES,
    BrokerError,
    BrokerUnreachableError,
    ClientError,
    ConnectionClosedError,
    RequestTimeoutError,
)
from .partitioner import DefaultPartitioner

log = logging.getLogger(__name__)

# Produce version 13 names topics by id; older versions by name.
_FIRST_TOPIC_ID_VERSION = 13
# Per-record framing overhead in a batch (length, attributes, deltas, counts): an upper bound
# used only to decide when a batch is full.
_RECORD_OVERHEAD = 24

# Transport failures after which resending may work (a restarted or replaced leader).
_TRANSIENT = (ConnectionClosedError, BrokerUnreachableError, RequestTimeoutError, OSError)

COMPRESSION_NAMES = {c.name.lower(): c for c in Compression}


def parse_acks(value: str | int) -> int:
    """``all``/``-1``, ``0`` or ``1`` to the wire value."""
    text = str(value).strip().lower()
    if text in ("all", "-1"):
        return -1
    if text in ("0", "1"):
        return int(text)
    raise ValueError(f"acks must be all, -1, 0 or 1, not {value!r}")


def parse_compression(value: str | int) -> Compression:
    if isinstance(value, int):
        return Compression(value)
    try:
        return COMPRESSION_NAMES[value.strip().lower()]
    except KeyError:
        raise ValueError(
            f"unknown compression {value!r}: use one of {', '.join(COMPRESSION_NAMES)}"
        ) from None


@dataclass(frozen=True, slots=True)
class RecordMetadata:
    topic: str
    partition: int
    offset: int  # -1 with acks=0: the broker does not say
    timestamp: int  # the record's create time, or the broker's log append time


@dataclass(eq=False)
class _Batch:
    topic: str
    partition: int
    records: list[NewRecord] = field(default_factory=list)
    futures: list[asyncio.Future[RecordMetadata]] = field(default_factory=list)
    size: int = 0
    created: float = field(default_factory=time.monotonic)
    payload: bytes | None = None
    attempts: int = 0
    last_error: Exception | None = None

    def fail(self, error: Exception) -> None:
        for f in self.futures:
            if not f.done():
                f.set_exception(error)


class Producer:
    """Produce records to a cluster reached through ``bootstrap``.

    ``acks``: -1 (all in-sync replicas), 1 (leader) or 0 (no answer). ``compression``: a
    :class:`Compression` or its name. Use as an async context manager or call :meth:`close`,
    which flushes.
    """

    def __init__(
        self,
        bootstrap: str,
        *,
        acks: int | str = -1,
        compression: Compression | str | int = Compression.NONE,
        client_id: str = "riverlog-producer",
        linger_ms: float = 5.0,
        batch_size: int = 256 * 1024,
        max_request_size: int = 1024 * 1024,
        buffer_memory: int = 32 * 1024 * 1024,
        max_in_flight: int = 5,
        connect_timeout: float = 10.0,
        request_timeout: float = 30.0,
        delivery_timeout: float = 120.0,
        max_block: float = 10.0,
        allow_auto_create_topics: bool = False,
        security: ClientSecurity | None = None,
    ) -> None:
        self.cluster = Cluster(bootstrap, client_id=client_id, connect_timeout=connect_timeout,
                               request_timeout=request_timeout, security=security)
        self.acks = parse_acks(acks)
        self.compression = parse_compression(compression)
        self.linger = linger_ms / 1000.0
        self.batch_size = batch_size
        self.max_request_size = max_request_size
        self.buffer_memory = buffer_memory
        self.delivery_timeout = delivery_timeout
        self.max_block = max_block
        self.allow_auto_create_topics = allow_auto_create_topics
        self.partitioner = DefaultPartitioner()
        self._max_in_flight = max_in_flight
        self._open: dict[tuple[str, int], _Batch] = {}  # batches still accepting records
        self._ready: list[_Batch] = []  # closed batches waiting for the sender
        self._buffered = 0  # bytes held by unacknowledged batches, bounded by buffer_memory
        self._space = asyncio.Condition()
        self._wakeup = asyncio.Event()
        self._flush_now = False
        self._in_flight: dict[int, asyncio.Semaphore] = {}
        self._requests: set[asyncio.Task[None]] = set()
        self._unfinished: set[_Batch] = set()
        self._idle = asyncio.Event()
        self._idle.set()
        self._sender: asyncio.Task[None] | None = None
        self._closed = False
        self._fatal: Exception | None = None

    async def __aenter__(self) -> Producer:
        await self.start()
        return self

    async def __aexit__(self, exc_type: object, *exc: object) -> None:
        await self.close(flush=exc_type is None)

    async def start(self) -> None:
        """Connect and read cluster metadata now, so a bad bootstrap fails here, not on send."""
        await self.cluster.refresh_metadata([])
        if self._sender is None:
            self._sender = asyncio.get_running_loop().create_task(self._sender_loop())

    async def close(self, *, flush: bool = True) -> None:
        if self._closed:
            return
        if flush and self._fatal is None:
            await self.flush()
        self._closed = True
        if self._sender is not None:
            self._sender.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sender
        for task in list(self._requests):
            task.cancel()
        error = ClientError("producer closed before the record was delivered")
        for batch in [*self._open.values(), *self._ready, *self._unfinished]:
            batch.fail(error)
        await self.cluster.close()

    # --- sending --------------------------------------------------------------------------------

    async def topic_info(self, topic: str) -> TopicInfo:
        """Metadata of ``topic``, waiting up to ``max_block`` for a topic that is just being created."""
        deadline = time.monotonic() + self.max_block
        refresh = False
        while True:
            try:
                return await self.cluster.topic(topic, refresh=refresh,
                                                allow_auto_create=self.allow_auto_create_topics)
            except BrokerError as exc:
                if exc.code not in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.LEADER_NOT_AVAILABLE):
                    raise
                if time.monotonic() + 0.2 > deadline:
                    raise
            refresh = True
            await asyncio.sleep(0.2)

    async def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        headers: Sequence[tuple[str, bytes | None]] = (),
        *,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> asyncio.Future[RecordMetadata]:
        """Queue a record; the returned future resolves once the broker has it (per ``acks``).

        Waits (rather than buffering without bound) while ``buffer_memory`` bytes are pending.
        """
        if self._closed:
            raise ClientError("producer is closed")
        if self._fatal is not None:
            raise self._fatal
        if self._sender is None:
            await self.start()
        info = await self.topic_info(topic)
        count = len(info.partitions)
        if partition is None:
            partition = self.partitioner.partition(topic, key, count)
        elif not 0 <= partition < count:
            raise BrokerError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"produce to '{topic}'",
                              f"topic '{topic}' has no partition {partition} (it has {count})")
        record = NewRecord(
            value=value,
            key=key,
            headers=tuple(headers),
            timestamp=int(time.time() * 1000) if timestamp_ms is None else timestamp_ms,
        )
        size = _record_size(record)
        await self._reserve(size)
        future: asyncio.Future[RecordMetadata] = asyncio.get_running_loop().create_future()
        slot = (topic, partition)
        batch = self._open.get(slot)
        if batch is not None and batch.size + size > self.batch_size:
            self._close_batch(slot)
            batch = None
        if batch is None:
            batch = _Batch(topic, partition)
            self._open[slot] = batch
            self._unfinished.add(batch)
            self._idle.clear()
        batch.records.append(record)
        batch.futures.append(future)
        batch.size += size
        if batch.size >= self.batch_size:
            self._close_batch(slot)
        self._wakeup.set()
        return future

    async def send_and_wait(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        headers: Sequence[tuple[str, bytes | None]] = (),
        *,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> RecordMetadata:
        future = await self.send(topic, value, key, headers, partition=partition, timestamp_ms=timestamp_ms)
        return await future

    async def flush(self) -> None:
        """Send every buffered record now and wait until each one is acknowledged or failed."""
        for slot in list(self._open):
            self._close_batch(slot)
        self._flush_now = True
        self._wakeup.set()
        await self._idle.wait()

    async def _reserve(self, size: int) -> None:
        async with self._space:
            await self._space.wait_for(lambda: self._buffered == 0 or self._buffered + size <= self.buffer_memory)
            self._buffered += size

    async def _release(self, size: int) -> None:
        async with self._space:
            self._buffered -= size
            self._space.notify_all()

    def _close_batch(self, slot: tuple[str, int]) -> None:
        batch = self._open.pop(slot, None)
        if batch is not None:
            self._ready.append(batch)

    # --- the sender -----------------------------------------------------------------------------

    async def _sender_loop(self) -> None:
        try:
            await self._send_forever()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            # A bug, not a broker problem: fail every pending record rather than hang flush().
            log.exception("producer sender stopped")
            self._fatal = ClientError(f"producer failed: {exc!r}")
            self._ready.extend(self._open.values())
            self._open.clear()
            for batch in [*self._ready, *self._unfinished]:
                await self._finish(batch, error=self._fatal)
            self._ready.clear()

    async def _send_forever(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            if not self._ready and not self._flush_now:
                # Let the open batches fill for up to linger_ms after their first record.
                oldest = min((b.created for b in self._open.values()), default=None)
                if oldest is not None:
                    delay = oldest + self.linger - time.monotonic()
                    if delay > 0:
                        with contextlib.suppress(TimeoutError):
                            await asyncio.wait_for(self._wait_for_full_batch(), delay)
                for slot, batch in list(self._open.items()):
                    if time.monotonic() >= batch.created + self.linger:
                        self._close_batch(slot)
            self._flush_now = False
            ready, self._ready = self._ready, []
            if ready:
                await self._dispatch(ready)
            if self._open:
                self._wakeup.set()  # come back to close them when their linger expires

    async def _wait_for_full_batch(self) -> None:
        while not self._ready and not self._flush_now:
            self._wakeup.clear()
            await self._wakeup.wait()

    async def _dispatch(self, batches: list[_Batch]) -> None:
        """Route batches to their leaders and start Produce requests (waiting only for a free
        in-flight slot, not for answers)."""
        by_leader: dict[int, list[_Batch]] = {}
        for batch in batches:
            if time.monotonic() > batch.created + self.delivery_timeout:
                await self._finish(batch, error=batch.last_error or ClientError(
                    f"record to {batch.topic}-{batch.partition} not delivered within {self.delivery_timeout:g}s"))
                continue
            try:
                info = await self.cluster.topic(batch.topic)
            except (KafkaError, ClientError) as exc:
                await self._retry_or_fail(batch, exc)
                continue
            part = info.partition(batch.partition)
            if part is None or part.leader < 0:
                await self._retry_or_fail(batch, BrokerError(
                    ErrorCode.LEADER_NOT_AVAILABLE, f"produce to {batch.topic}-{batch.partition}",
                    "the partition has no leader"))
                continue
            if batch.payload is None:
                batch.payload = build_batch(batch.records, compression=self.compression)
            by_leader.setdefault(part.leader, []).append(batch)
        for leader, group in by_leader.items():
            for chunk in self._split_requests(group):
                semaphore = self._in_flight.setdefault(leader, asyncio.Semaphore(self._max_in_flight))
                await semaphore.acquire()
                task = asyncio.get_running_loop().create_task(self._produce(leader, chunk, semaphore))
                self._requests.add(task)
                task.add_done_callback(self._requests.discard)

    def _split_requests(self, batches: list[_Batch]) -> list[list[_Batch]]:
        """Pack batches into requests of at most ``max_request_size`` bytes, with at most one
        batch per partition in each: Kafka accepts a single record batch per partition per
        Produce request, and a second batch of a partition waits for the next request (sent
        after it on the same connection, so the partition's order is kept)."""
        chunks: list[list[_Batch]] = [[]]
        slots: set[tuple[str, int]] = set()
        size = 0
        for batch in batches:
            n = len(batch.payload or b"")
            slot = (batch.topic, batch.partition)
            if chunks[-1] and (size + n > self.max_request_size or slot in slots):
                chunks.append([])
                slots = set()
                size = 0
            chunks[-1].append(batch)
            slots.add(slot)
            size += n
        return chunks

    async def _produce(self, leader: int, batches: list[_Batch], semaphore: asyncio.Semaphore) -> None:
        try:
            await self._produce_unguarded(leader, batches)
        except asyncio.CancelledError:
            raise
        except (ConnectionClosedError, ClientError, KafkaError, OSError) as exc:
            for batch in batches:
                await self._retry_or_fail(batch, exc)
        except Exception as exc:  # a bug: fail the records rather than leave futures hanging
            log.exception("produce request failed unexpectedly")
            for batch in batches:
                await self._finish(batch, error=exc)
        finally:
            semaphore.release()

    async def _produce_unguarded(self, leader: int, batches: list[_Batch]) -> None:
        conn = await self.cluster.connection_to(leader)
        version = conn.version_for(ApiKey.PRODUCE)
        ids: dict[str, uuid.UUID] = {}
        for b in batches:
            info = self.cluster.topics.get(b.topic)
            ids[b.topic] = info.topic_id if info else ZERO_UUID
        if version >= _FIRST_TOPIC_ID_VERSION and any(i == ZERO_UUID for i in ids.values()):
            version = _FIRST_TOPIC_ID_VERSION - 1  # a topic without a known id: name it instead
        topics: dict[str, list[dict[str, Any]]] = {}
        for b in batches:
            topics.setdefault(b.topic, []).append({"index": b.partition, "records": b.payload})
        body = {
            "transactional_id": None,
            "acks": self.acks,
            "timeout_ms": int(self.cluster.request_timeout * 1000),
            "topic_data": [
                {"name": name, "topic_id": ids[name], "partition_data": parts} for name, parts in topics.items()
            ],
        }
        if self.acks == 0:
            await conn.send_only(ApiKey.PRODUCE, body, version)
            for b in batches:
                await self._finish(b, base_offset=-1, append_time=-1)
            return
        response = await conn.request(ApiKey.PRODUCE, body, version)
        names_by_id = {v: k for k, v in ids.items()}
        answers: dict[tuple[str, int], dict[str, Any]] = {}
        for t in response["responses"]:
            name = t.get("name") or names_by_id.get(t.get("topic_id") or ZERO_UUID, "")
            for p in t["partition_responses"]:
                answers[(name, p["index"])] = p
        for b in batches:
            answer = answers.get((b.topic, b.partition))
            if answer is None:
                await self._retry_or_fail(b, BrokerError(
                    ErrorCode.UNKNOWN_SERVER_ERROR, f"produce to {b.topic}-{b.partition}",
                    "the broker's answer does not mention this partition"))
                continue
            code = answer["error_code"]
            if code != ErrorCode.NONE:
                message = answer.get("error_message")
                if not message and answer.get("record_errors"):
                    message = answer["record_errors"][0].get("batch_index_error_message")
                if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and not message:
                    message = f"topic '{b.topic}' or its partition {b.partition} does not exist"
                await self._retry_or_fail(b, BrokerError(code, f"produce to {b.topic}-{b.partition}", message))
                continue
            await self._finish(b, base_offset=answer["base_offset"], append_time=answer.get("log_append_time_ms", -1))

    async def _retry_or_fail(self, batch: _Batch, error: Exception) -> None:
        """Requeue the batch after a backoff if the error is transient and time remains."""
        batch.attempts += 1
        batch.last_error = error
        retriable = isinstance(error, _TRANSIENT) or (
            isinstance(error, BrokerError) and error.code in RETRIABLE_CODES
        )
        if not retriable or time.monotonic() > batch.created + self.delivery_timeout:
            await self._finish(batch, error=error)
            return
        stale = not isinstance(error, BrokerError) or error.code in STALE_METADATA_CODES
        backoff = min(0.05 * 2 ** min(batch.attempts, 5), 1.0)

        async def requeue() -> None:
            await asyncio.sleep(backoff)
            if stale:
                with contextlib.suppress(KafkaError, ClientError, OSError):
                    await self.cluster.topic(batch.topic, refresh=True)
            self._ready.append(batch)
            self._wakeup.set()

        task = asyncio.get_running_loop().create_task(requeue())
        self._requests.add(task)
        task.add_done_callback(self._requests.discard)

    async def _finish(
        self, batch: _Batch, *, base_offset: int = -1, append_time: int = -1, error: Exception | None = None
    ) -> None:
        for i, (record, future) in enumerate(zip(batch.records, batch.futures, strict=True)):
            if future.done():
                continue
            if error is not None:
                future.set_exception(error)
            else:
                offset = base_offset + i if base_offset >= 0 else -1
                timestamp = append_time if append_time >= 0 else record.timestamp
                future.set_result(RecordMetadata(batch.topic, batch.partition, offset, timestamp))
        self._unfinished.discard(batch)
        await self._release(batch.size)
        if not self._unfinished:
            self._idle.set()


def _record_size(record: NewRecord) -> int:
    size = _RECORD_OVERHEAD + len(record.key or b"") + len(record.value or b"")
    for name, value in record.headers:
        size += len(name) + len(value or b"") + 4
    return size
