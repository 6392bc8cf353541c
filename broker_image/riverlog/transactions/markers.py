"""Writing transaction markers: WriteTxnMarkers to the leader of every partition of a finished
transaction, retried until each leader wrote its marker (Kafka's
``TransactionMarkerChannelManager``).

One :class:`_LeaderQueue` per leader broker collects the markers due there and sends them
together, one request at a time (a request holds at most one marker per producer id, as the
response is keyed by it). This broker's own partitions go through ``local`` (the WriteTxnMarkers
handler called in-process) when the broker wires one; other leaders get an inter-broker
connection like the replica fetchers', opened on first use and dropped on error.

Per partition, as Kafka's completion handler: NONE (and UNSUPPORTED_FOR_MESSAGE_FORMAT) is done;
leadership and availability errors are retried, against whichever broker leads then; a
partition whose topic is gone is dropped; INVALID_PRODUCER_EPOCH or
TRANSACTION_COORDINATOR_FENCED stops the job (a newer producer or coordinator took over).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ..client.connection import BrokerConnection
from ..client.errors import ClientError
from ..controller.image import MetadataImage
from ..protocol.api_keys import ApiKey
from ..protocol.errors import ErrorCode
from .config import TxnConfig
from .shard import MarkerJob
from .state import TopicPartition

log = logging.getLogger("riverlog.transactions.markers")

Body = dict[str, Any]
# The WriteTxnMarkers request body in, the response body out (this broker's handler).
LocalMarkerWriter = Callable[[Body], Awaitable[Body]]

DONE_CODES = frozenset({ErrorCode.NONE, ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT})
STOP_CODES = frozenset({ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED})
# What Kafka's TransactionMarkerRequestCompletionHandler retries; anything else is logged, and
# retried too (Kafka treats it as a bug and throws; a retry is the safer thing for a broker).
RETRY_CODES = frozenset({ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                         ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                         ErrorCode.REQUEST_TIMED_OUT, ErrorCode.KAFKA_STORAGE_ERROR})
MAX_BACKOFF_S = 1.0
MAX_IN_FLIGHT = 5  # WriteTxnMarkers requests per leader at once (Kafka's default in-flight limit)


@dataclass
class _Entry:
    job: MarkerJob
    partitions: list[TopicPartition]
    future: asyncio.Future[dict[TopicPartition, ErrorCode]] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future())


class MarkerChannel:
    def __init__(self, node_id: int, config: TxnConfig, image: Callable[[], MetadataImage],
                 listener_name: str, local: LocalMarkerWriter | None = None) -> None:
        self.node_id = node_id
        self.config = config
        self.image = image
        self.listener_name = listener_name
        self.local = local
        self._queues: dict[int, _LeaderQueue] = {}
        self._stopped = False

    async def write(self, job: MarkerJob, still_wanted: Callable[[], bool]) -> bool:
        """Have every partition's leader write the job's marker. True once all did (or their
        topics are gone); False when the job was given up (unwanted now, or fenced)."""
        remaining = set(job.partitions)
        backoff = self.config.marker_retry_backoff_ms / 1000
        if job.attempt:
            await asyncio.sleep(min(MAX_BACKOFF_S, backoff * job.attempt))
        while remaining:
            if self._stopped or not still_wanted():
                return False
            by_leader = self._route(job, remaining)
            entries = [self._queue(leader).submit(job, parts) for leader, parts in by_leader.items()]
            for errors in await asyncio.gather(*(e.future for e in entries)):
                for tp, code in errors.items():
                    if code in DONE_CODES:
                        remaining.discard(tp)
                    elif code in STOP_CODES:
                        log.warning("transactional id %s: %s-%d refused the %s marker (%s); not retrying",
                                    job.transactional_id, tp[0], tp[1], _kind(job), code.name)
                        return False
                    elif code not in RETRY_CODES:
                        log.error("transactional id %s: %s-%d answered the %s marker with %s; retrying",
                                  job.transactional_id, tp[0], tp[1], _kind(job), code.name)
            if remaining:
                await asyncio.sleep(backoff)
                backoff = min(MAX_BACKOFF_S, backoff * 2)
        return not self._stopped and still_wanted()

    def _route(self, job: MarkerJob, remaining: set[TopicPartition]) -> dict[int, list[TopicPartition]]:
        """Group the partitions by current leader; drop those whose topic or partition is gone."""
        image = self.image()
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in sorted(remaining):
            topic = image.topics.get(tp[0])
            part = topic.partitions.get(tp[1]) if topic is not None else None
            if part is None:
                log.info("transactional id %s: %s-%d no longer exists; no marker for it", job.transactional_id,
                         tp[0], tp[1])
                remaining.discard(tp)
            elif part.leader >= 0:
                by_leader.setdefault(part.leader, []).append(tp)
        return by_leader

    def _queue(self, broker_id: int) -> _LeaderQueue:
        queue = self._queues.get(broker_id)
        if queue is None:
            queue = self._queues[broker_id] = _LeaderQueue(self, broker_id)
        return queue

    def endpoint_of(self, broker_id: int) -> tuple[str, int] | None:
        broker = self.image().brokers.get(broker_id)
        if broker is None:
            return None
        ep = broker.endpoint(self.listener_name) or broker.endpoint()
        return (ep.host, ep.port) if ep is not None else None

    async def stop(self) -> None:
        self._stopped = True
        queues, self._queues = list(self._queues.values()), {}
        for queue in queues:
            await queue.close()


class _LeaderQueue:
    """The markers due at one leader broker, sent in batches over one connection, a few requests
    in flight at once (each waits for its markers' replication, so one at a time would make
    every transaction ending meanwhile wait a replication round trip more)."""

    def __init__(self, channel: MarkerChannel, broker_id: int) -> None:
        self.channel = channel
        self.broker_id = broker_id
        self._entries: list[_Entry] = []
        self._sending: dict[asyncio.Task[None], list[_Entry]] = {}
        self._slots = asyncio.Semaphore(MAX_IN_FLIGHT)
        self._wake = asyncio.Event()
        self._conn: BrokerConnection | None = None
        self._connecting = asyncio.Lock()
        self._task = asyncio.get_running_loop().create_task(self._run())

    def submit(self, job: MarkerJob, partitions: list[TopicPartition]) -> _Entry:
        entry = _Entry(job, partitions)
        self._entries.append(entry)
        self._wake.set()
        return entry

    async def _run(self) -> None:
        try:
            while True:
                await self._wake.wait()
                self._wake.clear()
                while self._entries:
                    batch, seen, rest = [], set(), []
                    for entry in self._entries:
                        if entry.job.producer_id in seen:
                            rest.append(entry)
                        else:
                            seen.add(entry.job.producer_id)
                            batch.append(entry)
                    self._entries = rest
                    await self._slots.acquire()
                    task = asyncio.get_running_loop().create_task(self._send(batch))
                    self._sending[task] = batch
                    task.add_done_callback(self._sent)
        finally:
            # Stopping: whoever waits is answered (and finds the channel stopped).
            sending = dict(self._sending)
            for task in sending:
                task.cancel()
            for entry in [e for batch in sending.values() for e in batch] + self._entries:
                _resolve(entry, ErrorCode.NOT_LEADER_OR_FOLLOWER)
            await asyncio.gather(*sending, return_exceptions=True)
            await self._drop_connection()

    def _sent(self, task: asyncio.Task[None]) -> None:
        self._sending.pop(task, None)
        self._slots.release()

    async def _send(self, batch: list[_Entry]) -> None:
        request = {"markers": [_marker(entry) for entry in batch]}
        try:
            response = await self._request(request)
        except Exception as exc:  # a lost connection, a timeout, or a failure of the local handler
            log.warning("writing %d transaction markers at broker %d failed: %s", len(batch), self.broker_id, exc)
            await self._drop_connection()
            for entry in batch:
                _resolve(entry, ErrorCode.NOT_LEADER_OR_FOLLOWER)
            return
        by_producer = {m["producer_id"]: m for m in response.get("markers", [])}
        for entry in batch:
            answered: dict[TopicPartition, ErrorCode] = {}
            result = by_producer.get(entry.job.producer_id)
            for topic in (result or {}).get("topics", []):
                for p in topic["partitions"]:
                    answered[(topic["name"], p["partition_index"])] = ErrorCode(p["error_code"])
            if not entry.future.done():
                # A partition the answer leaves out is asked again.
                entry.future.set_result({tp: answered.get(tp, ErrorCode.REQUEST_TIMED_OUT)
                                         for tp in entry.partitions})

    async def _request(self, body: Body) -> Body:
        channel = self.channel
        if self.broker_id == channel.node_id and channel.local is not None:
            return await channel.local(body)
        conn = await self._connection()
        return await conn.request(ApiKey.WRITE_TXN_MARKERS, body)

    async def _connection(self) -> BrokerConnection:
        async with self._connecting:  # requests in flight together share one connection
            if self._conn is not None and not self._conn.closed:
                return self._conn
            self._conn = await self._connect()
            return self._conn

    async def _connect(self) -> BrokerConnection:
        address = self.channel.endpoint_of(self.broker_id)
        if address is None:
            raise ClientError(f"broker {self.broker_id} has no registered endpoint")
        timeout = self.channel.config.marker_request_timeout_ms / 1000
        return await BrokerConnection.connect(
            address[0], address[1], client_id=f"txn-marker-channel-{self.channel.node_id}",
            connect_timeout=timeout, request_timeout=timeout, security=self.channel.config.security)

    async def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()

    async def close(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


def _marker(entry: _Entry) -> Body:
    topics: dict[str, list[int]] = {}
    for topic, index in entry.partitions:
        topics.setdefault(topic, []).append(index)
    job = entry.job
    return {"producer_id": job.producer_id, "producer_epoch": job.producer_epoch,
            "transaction_result": job.committed, "coordinator_epoch": job.coordinator_epoch,
            "transaction_version": job.complete.client_transaction_version,
            "topics": [{"name": t, "partition_indexes": p} for t, p in topics.items()]}


def _resolve(entry: _Entry, code: ErrorCode) -> None:
    if not entry.future.done():
        entry.future.set_result({tp: code for tp in entry.partitions})


def _kind(job: MarkerJob) -> str:
    return "commit" if job.committed else "abort"
