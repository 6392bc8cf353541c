"""The follower's side of a fetch session (KIP-227), as Kafka's ``FetchSessionHandler``: pure
bookkeeping of what the leader's session holds, so each Fetch request names only what changed.
The replica fetcher (``fetcher.py``) drives it; the leader's side is ``fetch_sessions.py``."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from ..protocol.errors import ErrorCode
from .fetch_sessions import INITIAL_EPOCH, INVALID_SESSION_ID, next_epoch

# A partition as the leader's session knows it: (topic id, partition) when the request version
# uses topic ids, (topic name, partition) before. Keying by id also tells a re-created topic of
# the same name from the old one: the old is forgotten and the new added.
SessionKey = tuple[uuid.UUID | str, int]


@dataclass(frozen=True, slots=True)
class PartitionFetch:
    """One partition entry of a Fetch request. The leader's session keeps the last one it was
    sent and reads on from it, so an incremental request names a partition only when it changes."""

    fetch_offset: int
    current_leader_epoch: int
    last_fetched_epoch: int
    log_start_offset: int
    partition_max_bytes: int


@dataclass(frozen=True)
class SessionRequest:
    """The session part of one Fetch request, as :meth:`FetchSessionHandler.build` decided it."""

    session_id: int
    epoch: int
    uses_topic_ids: bool
    send: dict[SessionKey, PartitionFetch]  # partitions the request names (every one if full)
    forget: list[SessionKey]  # its forgotten_topics_data
    wanted: dict[SessionKey, PartitionFetch]  # what the leader's session holds once it is served

    @property
    def full(self) -> bool:
        return self.epoch == INITIAL_EPOCH


class FetchSessionHandler:
    """The follower's side of one fetch session (Kafka's ``FetchSessionHandler``), without I/O.

    ``build`` turns the partitions to fetch now into the next request, full or incremental;
    ``handle_response`` takes in the answer's top level; ``refresh`` (one partition) and
    ``request_full`` (all of them) make the leader answer afresh. The next request's (session id,
    epoch) is always one of: (0, 0), a full fetch asking for a session; (id, 0), a full fetch that
    also closes session ``id``, which the leader may still hold; (id, e > 0), incremental.
    One request at a time: ``build`` expects the previous request's answer to have been handled
    (or ``request_full`` called) first.
    """

    def __init__(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        # The partitions of the leader's session as of the last request it served, with the data
        # it has for each: incremental requests name only differences from this.
        self._leader_view: dict[SessionKey, PartitionFetch] = {}
        # Partitions to take out of the leader's session with the next request (see refresh).
        self._refresh: set[SessionKey] = set()
        self._uses_topic_ids = False
        # Requests built, by kind, and partition entries named in them (for tests and debugging).
        self.full_requests = 0
        self.incremental_requests = 0
        self.partitions_sent = 0

    @property
    def incremental(self) -> bool:
        """Whether the next request will be incremental."""
        return self.session_id != INVALID_SESSION_ID and self.epoch != INITIAL_EPOCH

    def build(self, wanted: Mapping[SessionKey, PartitionFetch], uses_topic_ids: bool) -> SessionRequest:
        """The next request for fetching exactly ``wanted`` (the partitions ready now)."""
        if self.incremental and uses_topic_ids != self._uses_topic_ids:
            # A session made with topic names cannot go on with ids (nor back): the leader would
            # refuse it (FETCH_SESSION_TOPIC_ID_ERROR). Only a reconnect changes the version, and
            # that restarts the session anyway; this is the safety net.
            self._restart(keep_id=True)
        if self.incremental:
            # Partitions to refresh sit this request out (forgotten), and the next one adds them.
            leaving = self._refresh & self._leader_view.keys()
            kept = {k: fetch for k, fetch in wanted.items() if k not in leaving}
            send = {k: fetch for k, fetch in kept.items() if self._leader_view.get(k) != fetch}
            forget = [k for k in self._leader_view if k not in kept]
            self.incremental_requests += 1
        else:
            kept = dict(wanted)
            send, forget = kept, []
            self.full_requests += 1
        self._refresh.clear()
        self.partitions_sent += len(send)
        return SessionRequest(self.session_id, self.epoch, uses_topic_ids, send, forget, kept)

    def handle_response(self, request: SessionRequest, error_code: int, session_id: int) -> bool:
        """Take in the top level of the answer to ``request``. True if its partitions are to be
        applied; False if the answer is only about the session (the next request is full)."""
        if (request.session_id, request.epoch) != (self.session_id, self.epoch):
            # The session restarted while the request was out: its answer's data is still good,
            # but it says nothing about the session the next (full) request starts.
            return error_code == ErrorCode.NONE
        if error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND:
            self._restart(keep_id=False)  # nothing left to close (evicted, or the leader restarted)
            return False
        if error_code != ErrorCode.NONE:
            # A wrong epoch (a request or answer got lost) or any other error: the leader may
            # still hold the session, so close it with the full request that follows.
            self._restart(keep_id=True)
            return False
        if request.full:
            self._uses_topic_ids = request.uses_topic_ids
            if session_id == INVALID_SESSION_ID:
                self._restart(keep_id=False)  # no room in the leader's cache: full fetches go on
            else:
                self.session_id, self.epoch = session_id, next_epoch(INITIAL_EPOCH)
                self._leader_view = request.wanted
            return True
        if session_id == INVALID_SESSION_ID:
            # The leader ended the session without an error: start a new one. Kafka ignores
            # such an answer's partitions; so do we, the full request re-reads them.
            self._restart(keep_id=False)
            return False
        if session_id != self.session_id:
            self._restart(keep_id=True)  # an answer from another session: not to be trusted
            return False
        self.epoch = next_epoch(self.epoch)
        self._leader_view = request.wanted
        return True

    def refresh(self, key: SessionKey) -> None:
        """The leader's session counts its last answer for ``key`` as told (it repeats a high
        watermark only once it moves), but we did not apply it (an error, the partition backs
        off). Have the leader forget the partition, so it comes back as new and is answered in
        full. A partition that waits out its backoff is left out of the requests and forgotten
        anyway; this covers one asked for again before another request went out."""
        self._refresh.add(key)

    def request_full(self) -> None:
        """Make the next request full, closing the current session: after a lost connection
        (the leader may or may not have served the last request), or when part of an answer was
        not applied, which the leader's session counts as told and would not repeat."""
        self._restart(keep_id=True)

    def _restart(self, *, keep_id: bool) -> None:
        if not keep_id:
            self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        self._leader_view = {}
        self._refresh.clear()
