"""Incremental fetch sessions (KIP-227): the broker remembers what a fetcher asked for last time.

A consumer or follower of many partitions would otherwise name every partition in every Fetch
request and get every partition back in every response. With a session, a request names only
partitions whose fetch position or limits changed (and those to forget), and a response carries
only partitions with something new: records, a moved high watermark or log start offset, an
error. Pure state, no I/O: the Fetch handler (``handlers/fetch.py``) drives it.

Request metadata, as in KIP-227 (session id, epoch):

    (0, -1)     sessionless full fetch (no session used or made)
    (0, 0)      full fetch; make a session if the cache has room
    (id, 0)     close session id, full fetch, make a new session
    (id, -1)    close session id, sessionless full fetch
    (id, e>0)   incremental fetch in session id; e must be the session's next epoch

The cache holds ``max.incremental.fetch.session.cache.slots`` sessions. A new session takes a
free slot, else evicts, in Kafka's order: first a session unused for longer than the eviction
time; otherwise the least valuable evictable session if the new one is worth more.
Value orders by follower before consumer, then partition count. Sessions younger than the
eviction time are protected: from consumers always, from followers only if they are followers'.

Partitions that returned records move to the back of their session, so under ``fetch.max.bytes``
the others are read first next time and none starves.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from uuid import UUID

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MAX_EPOCH = (1 << 31) - 1
DEFAULT_EVICTION_MS = 120_000  # Kafka's MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS

# A partition in a session: (topic id, partition) for v13+ requests, (topic name, partition) before.
PartitionKey = tuple[UUID | str, int]


def next_epoch(epoch: int) -> int:
    """The epoch after ``epoch``: wraps to 1, never back to the initial or final epoch."""
    return 1 if epoch >= MAX_EPOCH else epoch + 1


@dataclass
class FetchPosition:
    """What a fetcher asks of one partition (from a Fetch request's partition entry)."""

    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    log_start_offset: int = -1  # the follower's


@dataclass
class CachedPartition:
    """A partition of a session: the fetcher's last request, and what we last told it."""

    topic: str  # name, "" while a topic id is unknown here
    topic_id: UUID | None
    partition: int
    position: FetchPosition
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1

    def must_respond(self, *, records: int, error: int, high_watermark: int, last_stable_offset: int,
                     log_start_offset: int, diverging: bool) -> bool:
        """Whether this partition goes into an incremental response; remembers what it sends."""
        changed = (high_watermark != self.high_watermark or last_stable_offset != self.last_stable_offset
                   or log_start_offset != self.log_start_offset)
        # After an error nothing is known to the fetcher: once the error clears, the partition
        # must be sent again even if its offsets did not move (Kafka forgets the watermark too).
        self.high_watermark = -1 if error != 0 else high_watermark
        self.last_stable_offset, self.log_start_offset = last_stable_offset, log_start_offset
        return changed or records > 0 or error != 0 or diverging


@dataclass
class FetchSession:
    session_id: int
    privileged: bool  # a follower's: worth more than a consumer's when slots run out
    uses_topic_ids: bool
    creation_ms: int
    last_used_ms: int
    epoch: int = 1
    partitions: dict[PartitionKey, CachedPartition] = field(default_factory=dict)  # in fetch order

    def update(self, changed: Iterable[CachedPartition], forgotten: Iterable[PartitionKey]) -> None:
        """An incremental request: new or changed positions, partitions to drop."""
        for part in changed:
            key = (part.topic_id if self.uses_topic_ids and part.topic_id is not None else part.topic, part.partition)
            cached = self.partitions.get(key)
            if cached is None:
                self.partitions[key] = part
            else:
                cached.position = part.position
                if part.topic:
                    cached.topic = part.topic
        for key in forgotten:
            self.partitions.pop(key, None)

    def rotate_to_back(self, key: PartitionKey) -> None:
        """A partition that returned records goes last next time (fairness under fetch.max.bytes)."""
        cached = self.partitions.pop(key, None)
        if cached is not None:
            self.partitions[key] = cached


class SessionError(Exception):
    """An incremental request the cache cannot serve; ``code`` is the Kafka error for it."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


# Kafka's error codes (protocol/errors.py holds them all; repeated here so this module stays pure
# of the protocol package, and checked equal by the unit tests).
FETCH_SESSION_ID_NOT_FOUND = 70
INVALID_FETCH_SESSION_EPOCH = 71
FETCH_SESSION_TOPIC_ID_ERROR = 106


class FetchSessionCache:
    def __init__(self, max_sessions: int, eviction_ms: int = DEFAULT_EVICTION_MS,
                 rng: random.Random | None = None) -> None:
        self.max_sessions = max(0, max_sessions)
        self.eviction_ms = eviction_ms
        self._rng = rng or random.Random()
        self._sessions: dict[int, FetchSession] = {}
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, session_id: int) -> FetchSession | None:
        return self._sessions.get(session_id)

    def remove(self, session_id: int) -> FetchSession | None:
        return self._sessions.pop(session_id, None)

    def incremental(self, session_id: int, epoch: int, uses_topic_ids: bool, now_ms: int) -> FetchSession:
        """The session of an incremental request, its epoch advanced; SessionError if it is
        gone (evicted, or a broker restart) or the epoch is not the expected one."""
        session = self._sessions.get(session_id)
        if session is None:
            raise SessionError(FETCH_SESSION_ID_NOT_FOUND, f"fetch session {session_id} not found")
        if session.epoch != epoch:
            raise SessionError(INVALID_FETCH_SESSION_EPOCH,
                               f"fetch session {session_id} expects epoch {session.epoch}, got {epoch}")
        if session.uses_topic_ids != uses_topic_ids:
            raise SessionError(FETCH_SESSION_TOPIC_ID_ERROR,
                               f"fetch session {session_id} was made with{'' if session.uses_topic_ids else 'out'} "
                               "topic ids")
        session.epoch = next_epoch(session.epoch)
        session.last_used_ms = now_ms
        return session

    def create(self, partitions: list[CachedPartition], *, privileged: bool, uses_topic_ids: bool,
               now_ms: int) -> FetchSession | None:
        """A session for a full fetch, if a slot is free or one can be evicted; None otherwise
        (the fetcher then goes on with full fetches)."""
        if not partitions or self.max_sessions == 0:
            return None
        if len(self._sessions) >= self.max_sessions and not self._evict_for(privileged, len(partitions), now_ms):
            return None
        session = FetchSession(self._new_id(), privileged, uses_topic_ids, now_ms, now_ms)
        session.update(partitions, ())
        self._sessions[session.session_id] = session
        return session

    def _new_id(self) -> int:
        while True:  # random ids, as Kafka's: a stale client cannot guess its way into another session
            candidate = self._rng.randint(1, MAX_EPOCH)
            if candidate not in self._sessions:
                return candidate

    def _evict_for(self, privileged: bool, size: int, now_ms: int) -> bool:
        # 1. A session nobody used for the eviction time is fair game for anyone.
        stale = min(self._sessions.values(), key=lambda s: s.last_used_ms)
        if now_ms - stale.last_used_ms > self.eviction_ms:
            self._evict(stale)
            return True
        # 2. Otherwise the least valuable session the newcomer may evict, if the newcomer is worth more.
        def evictable(s: FetchSession) -> bool:
            old_enough = now_ms - s.creation_ms > self.eviction_ms
            return old_enough or (privileged and not s.privileged)
        candidates = [s for s in self._sessions.values() if evictable(s)]
        if not candidates:
            return False
        victim = min(candidates, key=lambda s: (s.privileged, len(s.partitions), s.session_id))
        if (privileged, size) <= (victim.privileged, len(victim.partitions)):
            return False  # Kafka's tie-break (by session id, the newcomer's being 0) keeps the old one
        self._evict(victim)
        return True

    def _evict(self, session: FetchSession) -> None:
        del self._sessions[session.session_id]
        self.evictions += 1
