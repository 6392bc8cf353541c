"""Follower replication: fetch from partition leaders over the Kafka protocol and append.

One :class:`LeaderFetcher` (an asyncio task with its own TCP connection) per leader broker
fetches every partition this broker follows from that leader in one Fetch request, like Kafka's
replica fetcher threads. Each request carries this broker's id and broker epoch
(``replica_state``, KIP-903), and per partition the current leader epoch (so a stale leader or
follower is told FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH), the fetch offset (our log end:
it tells the leader how far we are) and the epoch of our last batch.

Truncation uses Fetch's diverging epoch (KIP-595's scheme, which Kafka's followers use since
2.7) rather than a separate OffsetForLeaderEpoch round trip: the leader checks on *every* fetch
that our last fetched epoch ends at or after our fetch offset in its log, and if not answers
with the (epoch, end offset) where our logs part, and no records. We then truncate to the end of
that epoch as *we* have it (if we know that epoch) or to the end of our largest epoch below it
(and the next fetch checks again), so an ex-leader's unreplicated tail goes away when it
returns as a follower. Checking on every fetch also covers leader changes we have not heard of
yet, and needs no extra state between the two requests.

Errors: a fenced or unknown leader epoch, or "not leader", mean our metadata is behind or the
leader's is: the partition waits ``replica.fetch.backoff.ms`` (a new image re-targets it
immediately). Lost connections back off the whole fetcher. Role changes and shutdown remove
partitions synchronously; a response that comes back for a partition no longer fetched (or
fetched at another epoch) is dropped, so nothing is appended after a role change.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..client.connection import BrokerConnection
from ..client.errors import ClientError
from ..clock import now_ms
from ..config import BrokerConfig
from ..protocol.api_keys import ApiKey
from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.record_batch import LENGTH_POS, LOG_OVERHEAD
from .partition import Partition

log = logging.getLogger(__name__)

_INT32 = struct.Struct(">i")
Key = tuple[str, int]

# Errors after which only newer metadata helps; until it arrives the partition backs off.
_METADATA_ERRORS = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID,
})



def _name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


def whole_batches(data: Any) -> memoryview:
    """The complete record batches at the start of ``data`` (a fetch may end in a partial one)."""
    view = memoryview(data) if data is not None else memoryview(b"")
    pos = 0
    end = len(view)
    while end - pos >= LOG_OVERHEAD:
        (length,) = _INT32.unpack_from(view, pos + LENGTH_POS)
        nxt = pos + LOG_OVERHEAD + length
        if length <= 0 or nxt > end:
            break
        pos = nxt
    return view[:pos]


@dataclass(frozen=True)
class FetcherConfig:
    max_bytes: int = 10 * 1024 * 1024  # replica.fetch.response.max.bytes
    partition_max_bytes: int = 1024 * 1024  # replica.fetch.max.bytes
    max_wait_ms: int = 500  # replica.fetch.wait.max.ms
    min_bytes: int = 1  # replica.fetch.min.bytes
    backoff_ms: int = 1000  # replica.fetch.backoff.ms
    socket_timeout_ms: int = 30_000  # replica.socket.timeout.ms

    @classmethod
    def from_broker(cls, config: BrokerConfig) -> FetcherConfig:
        return cls(
            max_bytes=config.get_int("replica.fetch.response.max.bytes"),
            partition_max_bytes=config.get_int("replica.fetch.max.bytes"),
            max_wait_ms=config.get_int("replica.fetch.wait.max.ms"),
            min_bytes=config.get_int("replica.fetch.min.bytes"),
            backoff_ms=config.get_int("replica.fetch.backoff.ms"),
            socket_timeout_ms=config.get_int("replica.socket.timeout.ms"),
        )


class _FetchState:
    """One followed partition, for one leader epoch (a new epoch gets a new state)."""

    __slots__ = ("partition", "leader_epoch", "delayed_until")

    def __init__(self, partition: Partition, leader_epoch: int) -> None:
        self.partition = partition
        self.leader_epoch = leader_epoch
        self.delayed_until = 0.0  # loop time before which it is not fetched


class ReplicaFetcherManager:
    """Keeps one fetcher per leader broker, each fetching the partitions we follow from it."""

    def __init__(
        self,
        node_id: int,
        config: FetcherConfig,
        endpoint_of: Callable[[int], tuple[str, int] | None],
        broker_epoch: Callable[[], int],
        on_append: Callable[[Partition], None] | None = None,
    ) -> None:
        self.node_id = node_id
        self.config = config
        self.endpoint_of = endpoint_of
        self.broker_epoch = broker_epoch
        self.on_append = on_append
        self.fetchers: dict[int, LeaderFetcher] = {}
        self._leader_of: dict[Key, int] = {}
        # Fetchers told to end but maybe still closing their connection: stop() waits for them
        # too, so no fetcher task outlives the broker's event loop.
        self._retired: set[LeaderFetcher] = set()
        self.started = False
        self.closed = False
        self.unpaused = asyncio.Event()
        self.unpaused.set()

    # Which partitions are fetched from whom ----------------------------------------------

    def follow(self, p: Partition) -> None:
        """Fetch ``p`` from its current leader at its current leader epoch (idempotent)."""
        if self.closed:
            return
        key = (p.topic, p.index)
        current = self._leader_of.get(key)
        if current is not None:
            state = self.fetchers[current].partitions.get(key)
            if current == p.leader and state is not None and state.partition is p \
                    and state.leader_epoch == p.leader_epoch:
                return
            self.unfollow(p)
        fetcher = self.fetchers.get(p.leader)
        if fetcher is None:
            fetcher = self.fetchers[p.leader] = LeaderFetcher(self, p.leader)
            if self.started:
                fetcher.start()
        fetcher.add(key, _FetchState(p, p.leader_epoch))
        self._leader_of[key] = p.leader

    def unfollow(self, p: Partition) -> None:
        key = (p.topic, p.index)
        leader = self._leader_of.pop(key, None)
        if leader is None:
            return
        fetcher = self.fetchers[leader]
        fetcher.partitions.pop(key, None)
        if not fetcher.partitions:
            # Nothing left to fetch from that broker: end its task and connection.
            del self.fetchers[leader]
            fetcher.close()
            if fetcher.running:
                self._retired.add(fetcher)
                fetcher.on_done(self._retired.discard)

    def following(self, topic: str, partition: int) -> int | None:
        """The leader we fetch ``topic-partition`` from, if any."""
        return self._leader_of.get((topic, partition))

    # Lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        self.started = True
        for fetcher in self.fetchers.values():
            fetcher.start()

    def pause(self) -> None:
        """Stop sending fetches (tests use it to make a follower fall behind). A fetch already
        sent still completes: wait for ``busy`` to turn False to know nothing more arrives."""
        self.unpaused.clear()

    @property
    def busy(self) -> bool:
        """Whether a fetch is in flight or its response being applied."""
        return any(f.in_flight for f in self.fetchers.values())

    def resume(self) -> None:
        self.unpaused.set()

    async def stop(self) -> None:
        """Stop every fetcher; partitions followed later are not fetched."""
        self.closed = True
        fetchers = [*self.fetchers.values(), *self._retired]
        self.fetchers.clear()
        self._retired.clear()
        self._leader_of.clear()
        for fetcher in fetchers:
            fetcher.close()
        await asyncio.gather(*(f.wait_closed() for f in fetchers), return_exceptions=True)


class LeaderFetcher:
    def __init__(self, manager: ReplicaFetcherManager, leader_id: int) -> None:
        self.manager = manager
        self.leader_id = leader_id
        self.partitions: dict[Key, _FetchState] = {}
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._conn: BrokerConnection | None = None
        self._failing = False  # log a broken connection once, not at every retry
        self.in_flight = False

    def add(self, key: Key, state: _FetchState) -> None:
        self.partitions[key] = state
        self._changed.set()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name=f"replica-fetcher-{self.manager.node_id}-from-{self.leader_id}")

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def on_done(self, callback: Callable[[LeaderFetcher], None]) -> None:
        """Call ``callback(self)`` once the task has ended."""
        if self._task is not None:
            self._task.add_done_callback(lambda _: callback(self))

    def close(self) -> None:
        # The task owns the connection and closes it as it ends.
        if self._task is not None:
            self._task.cancel()

    async def wait_closed(self) -> None:
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    # The loop ----------------------------------------------------------------------------

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                await self.manager.unpaused.wait()
                now = loop.time()
                ready = {k: s for k, s in self.partitions.items() if s.delayed_until <= now}
                if not ready:
                    self._changed.clear()
                    wake = min((s.delayed_until for s in self.partitions.values()), default=None)
                    timeout = None if wake is None else max(0.0, wake - now)
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._changed.wait(), timeout)
                    continue
                try:
                    self.in_flight = True
                    conn = await self._connection()
                    sent = {k: (s, s.partition.log.log_end_offset) for k, s in ready.items()}
                    version = conn.version_for(ApiKey.FETCH)
                    response = await conn.request(ApiKey.FETCH, self._request(sent), version)
                except (ClientError, OSError, KafkaError) as exc:
                    self.in_flight = False
                    if not self._failing:
                        log.warning("broker %d: fetching from leader %d failed (%s); retrying every %d ms",
                                    self.manager.node_id, self.leader_id, exc, self.manager.config.backoff_ms)
                        self._failing = True
                    await self._drop_connection()
                    await asyncio.sleep(self.manager.config.backoff_ms / 1000)
                    continue
                if self._failing:
                    log.info("broker %d: fetching from leader %d again", self.manager.node_id, self.leader_id)
                    self._failing = False
                self._process(sent, response)
                self.in_flight = False
        finally:
            self.in_flight = False
            await self._drop_connection()

    async def _connection(self) -> BrokerConnection:
        if self._conn is not None and not self._conn.closed:
            return self._conn
        address = self.manager.endpoint_of(self.leader_id)
        if address is None:
            raise ClientError(f"broker {self.leader_id} has no registered endpoint")
        timeout = self.manager.config.socket_timeout_ms / 1000
        self._conn = await BrokerConnection.connect(
            address[0], address[1], client_id=f"replica-fetcher-{self.manager.node_id}",
            connect_timeout=timeout, request_timeout=timeout + self.manager.config.max_wait_ms / 1000)
        return self._conn

    async def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()

    def _request(self, sent: dict[Key, tuple[_FetchState, int]]) -> dict[str, Any]:
        cfg = self.manager.config
        topics: dict[uuid.UUID, dict[str, Any]] = {}
        for state, fetch_offset in sent.values():
            p = state.partition
            entry = topics.setdefault(p.topic_id, {"topic": p.topic, "topic_id": p.topic_id, "partitions": []})
            entry["partitions"].append({
                "partition": p.index, "current_leader_epoch": state.leader_epoch, "fetch_offset": fetch_offset,
                "last_fetched_epoch": p.log.latest_epoch(), "log_start_offset": p.log.log_start_offset,
                "partition_max_bytes": cfg.partition_max_bytes,
            })
        node = self.manager.node_id
        return {
            "replica_id": node, "replica_state": {"replica_id": node, "replica_epoch": self.manager.broker_epoch()},
            "max_wait_ms": cfg.max_wait_ms, "min_bytes": cfg.min_bytes, "max_bytes": cfg.max_bytes,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1, "topics": list(topics.values()),
            "forgotten_topics_data": [], "rack_id": "",
        }

    # Responses ---------------------------------------------------------------------------

    def _process(self, sent: dict[Key, tuple[_FetchState, int]], response: dict[str, Any]) -> None:
        """Apply a response. Synchronous on purpose: between the "still fetched at this epoch"
        check and the append nothing else runs, so a role change cannot slip in between."""
        loop_now = asyncio.get_running_loop().time()
        backoff = self.manager.config.backoff_ms / 1000
        if response.get("error_code", 0) != ErrorCode.NONE:
            for state, _ in sent.values():
                state.delayed_until = loop_now + backoff
            return
        by_id = {(s.partition.topic_id, s.partition.index): k for k, (s, _) in sent.items()}
        for topic in response["responses"]:
            for pr in topic["partitions"]:
                index = pr["partition_index"]
                key = by_id.get((topic.get("topic_id"), index)) or (topic.get("topic") or "", index)
                if key not in sent:
                    continue
                state, fetch_offset = sent[key]
                if self.partitions.get(key) is not state:
                    continue  # no longer fetched from here at that epoch
                try:
                    if not self._apply(state, fetch_offset, pr):
                        state.delayed_until = loop_now + backoff
                except KafkaError as exc:
                    p = state.partition
                    log.warning("broker %d: replicating %s-%d from %d failed: %s", self.manager.node_id, p.topic,
                                p.index, self.leader_id, exc)
                    state.delayed_until = loop_now + backoff

    def _apply(self, state: _FetchState, fetch_offset: int, pr: dict[str, Any]) -> bool:
        """Handle one partition's answer; False to back the partition off."""
        p = state.partition
        plog = p.log
        code = pr["error_code"]
        if code == ErrorCode.NONE:
            diverging = pr.get("diverging_epoch")
            if diverging is not None:
                return self._truncate(p, diverging["epoch"], diverging["end_offset"])
            if plog.log_end_offset != fetch_offset:
                return True  # the log moved since the request: fetch again from where it is
            data = whole_batches(pr.get("records"))
            if len(data):
                plog.append_as_follower(data, now_ms=now_ms())
                if self.manager.on_append is not None:
                    self.manager.on_append(p)
            leader_hw = pr["high_watermark"]
            if leader_hw >= 0:
                plog.update_high_watermark(min(leader_hw, plog.log_end_offset))
            leader_start = pr.get("log_start_offset", -1)
            if leader_start > plog.log_start_offset:
                # DeleteRecords or retention on the leader: follow it up to what we hold as committed.
                target = min(leader_start, plog.high_watermark)
                if target > plog.log_start_offset:
                    plog.delete_records_before(target)
            return True
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            leader_start = pr.get("log_start_offset", -1)
            if 0 <= fetch_offset < leader_start or plog.log_end_offset < leader_start:
                # Far behind: the leader no longer has what we need. Start over at its log start.
                log.info("broker %d: %s-%d restarts at the leader's log start %d", self.manager.node_id,
                         p.topic, p.index, leader_start)
                plog.truncate_fully_and_start_at(leader_start)
                return True
            leader_hw = pr.get("high_watermark", -1)
            if 0 <= leader_hw < plog.log_end_offset:
                # Ahead of the leader with no epoch to compare (it can only follow an unclean
                # election): keep what the leader has committed.
                plog.truncate_to(leader_hw)
                return True
            return False
        if code not in _METADATA_ERRORS:
            log.warning("broker %d: leader %d answered error %s for %s-%d", self.manager.node_id, self.leader_id,
                        _name(code), p.topic, p.index)
        return False

    def _truncate(self, p: Partition, leader_epoch: int, leader_end: int) -> bool:
        plog = p.log
        before = (plog.log_end_offset, plog.latest_epoch())
        if leader_epoch < 0 or leader_end < 0:
            # The leader knows no epoch at or below ours: keep only what we know is committed.
            target = plog.high_watermark
        else:
            local_epoch, local_end = plog.end_offset_for_epoch(leader_epoch)
            if local_epoch < 0 or local_end < 0:
                target = plog.high_watermark
            elif local_epoch == leader_epoch:
                target = min(leader_end, local_end)
            else:
                # We never had the leader's epoch: cut back to the end of our largest epoch below
                # it; the next fetch compares that epoch.
                target = local_end
        plog.truncate_to(target)
        after = (plog.log_end_offset, plog.latest_epoch())
        if after != before:
            log.info("broker %d: truncated %s-%d to offset %d (epoch %d) to match leader %d", self.manager.node_id,
                     p.topic, p.index, after[0], after[1], self.leader_id)
            return True
        # No progress would repeat the same divergence forever: back off instead of spinning.
        log.warning("broker %d: %s-%d diverges from leader %d at epoch %d offset %d but truncation changed nothing",
                    self.manager.node_id, p.topic, p.index, self.leader_id, leader_epoch, leader_end)
        return False
