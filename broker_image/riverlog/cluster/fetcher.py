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

Fetch sessions (KIP-227, ``cluster/fetch_sessions.py`` has the leader's side): a follower of
1,000 partitions would otherwise name all of them in every request and get all of them back.
Each fetcher keeps one session with its leader, as Kafka's ``FetchSessionHandler``: the first
request is full, and once the leader answers with a session id the following ones are
incremental, naming only partitions whose request data changed (our log end moved, a new leader
epoch, ...) and forgetting those no longer fetched; the leader answers only partitions with
news. :class:`FetchSessionHandler` does this bookkeeping, with no I/O. A partition that backs off
is left out of the request like in Kafka, so it leaves the session and comes back as new (the
leader would otherwise answer its error at once, every time). Whenever we cannot apply what the
leader sent for a partition (we truncated instead, or its fetch state changed meanwhile), the
leader's session still counts it as told, so the next request is full again; so is the first one
after a lost connection or a session error.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
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
from ..security.client_config import ClientSecurity, inter_broker_security
from .fetch_session_handler import FetchSessionHandler, PartitionFetch, SessionKey, SessionRequest
from .fetch_sessions import INVALID_SESSION_ID
from .partition import Partition

log = logging.getLogger(__name__)

_INT32 = struct.Struct(">i")
Key = tuple[str, int]

# Errors after which only newer metadata helps; until it arrives the partition backs off.
_METADATA_ERRORS = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID,
})
# Top-level errors that say only that our session is gone or out of step with the leader's: the
# partitions are fine, so the full request that follows goes at once, without backing off.
_SESSION_ERRORS = frozenset({ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH})

# From this Fetch version on, requests and responses name topics by id, and so do sessions.
TOPIC_IDS_VERSION = 13


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
    # TLS and SASL towards leaders: the inter-broker listener's settings (None: plaintext).
    security: ClientSecurity | None = None

    @classmethod
    def from_broker(cls, config: BrokerConfig) -> FetcherConfig:
        return cls(
            security=inter_broker_security(config),
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


# Fetch sessions, the client side -----------------------------------------------------------------


def _session_key(p: Partition, uses_topic_ids: bool) -> SessionKey:
    return (p.topic_id if uses_topic_ids else p.topic, p.index)


class _Applied(enum.Enum):
    """What became of one partition's answer."""

    DONE = enum.auto()  # applied, or nothing to apply
    NOT_APPLIED = enum.auto()  # we truncated (or skipped it) instead: its high watermark was not taken
    BACK_OFF = enum.auto()  # an error: the partition waits replica.fetch.backoff.ms


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
        # Our fetch session with this leader; its counters say how many requests were full.
        self.session = FetchSessionHandler()

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
                    version = conn.version_for(ApiKey.FETCH)
                    uses_ids = version >= TOPIC_IDS_VERSION
                    # Every ready partition, named in the request or not: an incremental answer
                    # may bring news of any partition of the session.
                    sent = {_session_key(s.partition, uses_ids): (s, s.partition.log.log_end_offset)
                            for s in ready.values()}
                    request = self.session.build({k: self._fetch_of(s, offset) for k, (s, offset) in sent.items()},
                                                 uses_ids)
                    response = await conn.request(ApiKey.FETCH, self._request(request, sent), version)
                except (ClientError, OSError, KafkaError) as exc:
                    self.in_flight = False
                    # The leader may or may not have served the request: start the session over.
                    self.session.request_full()
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
                self._process(request, sent, response)
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
        # A new connection may reach a restarted leader, or one of another version: begin with a
        # full fetch (closing our old session, should the leader still hold it).
        self.session.request_full()
        self._conn = await BrokerConnection.connect(
            address[0], address[1], client_id=f"replica-fetcher-{self.manager.node_id}",
            connect_timeout=timeout, request_timeout=timeout + self.manager.config.max_wait_ms / 1000,
            security=self.manager.config.security)
        return self._conn

    async def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()

    def _fetch_of(self, state: _FetchState, fetch_offset: int) -> PartitionFetch:
        log_ = state.partition.log
        return PartitionFetch(fetch_offset=fetch_offset, current_leader_epoch=state.leader_epoch,
                              last_fetched_epoch=log_.latest_epoch(), log_start_offset=log_.log_start_offset,
                              partition_max_bytes=self.manager.config.partition_max_bytes)

    def _request(self, request: SessionRequest, sent: dict[SessionKey, tuple[_FetchState, int]]) -> dict[str, Any]:
        cfg = self.manager.config
        topics: dict[uuid.UUID | str, dict[str, Any]] = {}
        for key, fetch in request.send.items():
            p = sent[key][0].partition
            entry = topics.setdefault(key[0], {"topic": p.topic, "topic_id": p.topic_id, "partitions": []})
            entry["partitions"].append({
                "partition": p.index, "current_leader_epoch": fetch.current_leader_epoch,
                "fetch_offset": fetch.fetch_offset, "last_fetched_epoch": fetch.last_fetched_epoch,
                "log_start_offset": fetch.log_start_offset, "partition_max_bytes": fetch.partition_max_bytes,
            })
        # Forgotten partitions may no longer be followed at all: all we have is their session key.
        forgotten: dict[uuid.UUID | str, list[int]] = {}
        for topic, index in request.forget:
            forgotten.setdefault(topic, []).append(index)
        node = self.manager.node_id
        return {
            "replica_id": node, "replica_state": {"replica_id": node, "replica_epoch": self.manager.broker_epoch()},
            "max_wait_ms": cfg.max_wait_ms, "min_bytes": cfg.min_bytes, "max_bytes": cfg.max_bytes,
            "isolation_level": 0, "session_id": request.session_id, "session_epoch": request.epoch,
            "topics": list(topics.values()),
            "forgotten_topics_data": [{"topic_id" if request.uses_topic_ids else "topic": topic, "partitions": indexes}
                                      for topic, indexes in forgotten.items()],
            "rack_id": "",
        }

    # Responses ---------------------------------------------------------------------------

    def _process(self, request: SessionRequest, sent: dict[SessionKey, tuple[_FetchState, int]],
                 response: dict[str, Any]) -> None:
        """Apply a response. Synchronous on purpose: between the "still fetched at this epoch"
        check and the append nothing else runs, so a role change cannot slip in between."""
        loop_now = asyncio.get_running_loop().time()
        backoff = self.manager.config.backoff_ms / 1000
        code = response.get("error_code", ErrorCode.NONE)
        if not self.session.handle_response(request, code, response.get("session_id", INVALID_SESSION_ID)):
            if code == ErrorCode.NONE or code in _SESSION_ERRORS:
                log.debug("broker %d: fetch session with leader %d restarts (error %s)", self.manager.node_id,
                          self.leader_id, _name(code))
                return  # the partitions are fine: the full request that follows goes at once
            for state, _ in sent.values():
                state.delayed_until = loop_now + backoff
            return
        # Partitions of the session missing from the answer have no news: they stay as they are.
        for topic in response["responses"]:
            topic_key = topic.get("topic_id") if request.uses_topic_ids else topic.get("topic")
            for pr in topic["partitions"]:
                key: SessionKey = (topic_key or "", pr["partition_index"])
                entry = sent.get(key)
                if entry is None:
                    continue
                state, fetch_offset = entry
                p = state.partition
                current = self.partitions.get((p.topic, p.index))
                if current is not state:
                    # No longer fetched from here at that epoch. If it still is at another, this
                    # answer's high watermark is lost on it, and the leader would not repeat it.
                    if current is not None:
                        self.session.request_full()
                    continue
                try:
                    applied = self._apply(state, fetch_offset, pr)
                except KafkaError as exc:
                    log.warning("broker %d: replicating %s-%d from %d failed: %s", self.manager.node_id, p.topic,
                                p.index, self.leader_id, exc)
                    applied = _Applied.BACK_OFF
                if applied is _Applied.BACK_OFF:
                    state.delayed_until = loop_now + backoff
                    # The leader now counts this answer as told, but we applied none of it: the
                    # partition leaves the session and rejoins as new, to be answered in full.
                    self.session.refresh(key)
                elif applied is _Applied.NOT_APPLIED:
                    # Truncated instead: fetch everything afresh at once (rare, and the quickest
                    # way back; refreshing would leave the partition out of the next request).
                    self.session.request_full()

    def _apply(self, state: _FetchState, fetch_offset: int, pr: dict[str, Any]) -> _Applied:
        """Handle one partition's answer."""
        p = state.partition
        plog = p.log
        code = pr["error_code"]
        if code == ErrorCode.NONE:
            diverging = pr.get("diverging_epoch")
            if diverging is not None:
                return self._truncate(p, diverging["epoch"], diverging["end_offset"])
            if plog.log_end_offset != fetch_offset:
                return _Applied.NOT_APPLIED  # the log moved since the request: fetch again from where it is
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
            return _Applied.DONE
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            leader_start = pr.get("log_start_offset", -1)
            if 0 <= fetch_offset < leader_start or plog.log_end_offset < leader_start:
                # Far behind: the leader no longer has what we need. Start over at its log start.
                log.info("broker %d: %s-%d restarts at the leader's log start %d", self.manager.node_id,
                         p.topic, p.index, leader_start)
                plog.truncate_fully_and_start_at(leader_start)
                return _Applied.NOT_APPLIED
            leader_hw = pr.get("high_watermark", -1)
            if 0 <= leader_hw < plog.log_end_offset:
                # Ahead of the leader with no epoch to compare (it can only follow an unclean
                # election): keep what the leader has committed.
                plog.truncate_to(leader_hw)
                return _Applied.NOT_APPLIED
            return _Applied.BACK_OFF
        if code not in _METADATA_ERRORS:
            log.warning("broker %d: leader %d answered error %s for %s-%d", self.manager.node_id, self.leader_id,
                        _name(code), p.topic, p.index)
        return _Applied.BACK_OFF

    def _truncate(self, p: Partition, leader_epoch: int, leader_end: int) -> _Applied:
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
            return _Applied.NOT_APPLIED  # the answer's high watermark was not taken
        # No progress would repeat the same divergence forever: back off instead of spinning.
        log.warning("broker %d: %s-%d diverges from leader %d at epoch %d offset %d but truncation changed nothing",
                    self.manager.node_id, p.topic, p.index, self.leader_id, leader_epoch, leader_end)
        return _Applied.BACK_OFF
