"""The Raft core: a pure, deterministic state machine in the style of etcd-io/raft, speaking a
pull-based protocol modelled on Kafka's KRaft (KIP-595, KIP-630 snapshots, KIP-996 pre-vote).

No I/O, no clock, no randomness of its own: the driver feeds ``tick(now_ms)``, ``step(message)``
and ``propose(...)`` and drains a :class:`Ready` with ``ready()``. See ``docs/raft.md``.

Protocol in one paragraph: voters elect a leader per epoch with Vote (a log at least as
up-to-date as the voter's, one vote per epoch, persisted before the answer leaves). The leader
announces itself with BeginQuorumEpoch and opens its epoch with a leader-change control entry.
Followers and observers *pull* with Fetch(fetch_offset = their log end, last_fetched_epoch); the
leader checks that pair against its epoch cache and answers with entries, or a diverging epoch
(the follower truncates and asks again), or a snapshot id (the follower downloads it with
FetchSnapshot). A voter's fetch offset is its acknowledgement: the high watermark is the largest
offset that a majority of voters have reached, once that covers an entry of the leader's epoch.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .log import RaftLog
from .messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Message,
    VoteRequest,
    VoteResponse,
)
from .ready import Ready, SoftState
from .types import (
    Entry,
    ErrorCode,
    HardState,
    NotLeaderError,
    OffsetAndEpoch,
    RaftConfig,
    RaftError,
    Role,
    SafetyError,
    Snapshot,
    Storage,
)


def leader_change_data(leader_id: int, voters: Iterable[int]) -> bytes:
    """Payload of the control entry a leader writes first in its epoch (Kafka's
    LeaderChangeMessage carries the same two facts)."""
    return json.dumps({"leader_id": leader_id, "voters": sorted(voters)}, separators=(",", ":")).encode()


def parse_leader_change(data: bytes) -> tuple[int, list[int]]:
    obj = json.loads(data)
    return int(obj["leader_id"]), [int(v) for v in obj["voters"]]


class ReplicaProgress:
    """What the leader knows about one fetching replica in its epoch."""

    __slots__ = ("downloading", "end_offset", "fetched", "hw_sent", "last_fetch_ms", "park_deadline", "parked")

    def __init__(self, now_ms: int) -> None:
        # Largest fetch offset the replica sent that matched the leader's log: the replica has
        # persisted every entry below it (persist-before-send), so it counts towards commit.
        self.end_offset = 0
        self.fetched = False
        self.hw_sent = -1
        # Starts at "now" so a new leader gives every voter a full check-quorum period.
        self.last_fetch_ms = now_ms
        self.parked: FetchRequest | None = None
        self.park_deadline = 0
        # The snapshot this replica is downloading (its last request was a FetchSnapshot).
        self.downloading: OffsetAndEpoch | None = None


class _SnapshotDownload:
    __slots__ = ("buffer", "position", "snapshot_id")

    def __init__(self, snapshot_id: OffsetAndEpoch) -> None:
        self.snapshot_id = snapshot_id
        self.position = 0
        self.buffer = bytearray()


class RaftNode:
    """One member of the quorum: a voter if ``node_id`` is in ``voters``, else an observer.

    After construction (and after every call that changes state) the driver calls ``ready()``.
    """

    # Public state (read it, never write it).
    id: int
    voters: frozenset[int]
    is_voter: bool
    config: RaftConfig
    log: RaftLog
    epoch: int
    voted_for: int | None
    leader_id: int | None  # the leader of ``epoch`` this node knows of (itself when it led it)
    role: Role
    high_watermark: int  # entries below it are committed (exclusive, like Kafka's)

    def __init__(
        self,
        node_id: int,
        voters: Iterable[int],
        storage: Storage | None = None,
        config: RaftConfig | None = None,
        rng: random.Random | None = None,
        now_ms: int = 0,
    ) -> None:
        self.id = node_id
        self.voters = frozenset(voters)
        if not self.voters:
            raise RaftError("a quorum needs at least one voter")
        self.is_voter = node_id in self.voters
        self._others: tuple[int, ...] = tuple(sorted(self.voters - {node_id}))
        self._voter_list: tuple[int, ...] = tuple(sorted(self.voters))
        self._majority = len(self.voters) // 2 + 1
        self.config = config or RaftConfig()
        # Only election timing is random; a seeded Random makes a whole cluster reproducible.
        self._rng = rng or random.Random(node_id)
        self._now = now_ms

        storage = storage or Storage()
        self.log = RaftLog(storage.snapshot, storage.entries)
        self._snapshot: Snapshot | None = storage.snapshot
        # Older snapshots a replica is still downloading: served until it finishes or gives up,
        # and the log is not compacted past them, so the replica can fetch on from there.
        # Without this, a leader snapshotting faster than a slow link downloads starves it.
        self._retained: dict[OffsetAndEpoch, Snapshot] = {}
        self._compact_goal = self.log.start
        hs = storage.hard_state
        self.epoch = hs.epoch
        self.voted_for = hs.voted_for
        self.leader_id = hs.leader_id
        # Commitment is not persisted (as in KRaft): a restarted node knows only its snapshot is
        # committed and learns the rest from the leader. The application starts from that snapshot.
        self.high_watermark = self.log.start if storage.snapshot is not None else 0
        self._applied = self.high_watermark

        self._election_deadline = now_ms
        # Follower / observer state.
        self._last_leader_contact = now_ms
        self._leader_resigned = False
        self._fetch_inflight = False
        self._fetch_sent_at = now_ms
        self._fetch_target: int | None = None
        self._download: _SnapshotDownload | None = None
        # Prospective / candidate state.
        self._votes: set[int] = set()
        self._rejects: set[int] = set()
        self._vote_sent_at = now_ms
        # Leader state.
        self._progress: dict[int, ReplicaProgress] = {}
        self._epoch_start = 0
        self._begin_sent_at = now_ms
        self._begin_acked: set[int] = set()
        # Resigned state.
        self._successors: tuple[int, ...] = ()
        self._end_acked: set[int] = set()
        self._end_sent_at = now_ms

        # Outputs waiting for ready().
        self._msgs: list[Message] = []
        self._pending_snapshot: Snapshot | None = None
        self._pending_restore: Snapshot | None = None
        self._hs_reported = (hs.epoch, hs.voted_for, hs.leader_id)
        self._soft_reported: tuple[Role, int, int | None] | None = None

        self._dispatch: dict[type, Callable[[Any], None]] = {
            VoteRequest: self._on_vote_request,
            VoteResponse: self._on_vote_response,
            BeginQuorumEpochRequest: self._on_begin_epoch_request,
            BeginQuorumEpochResponse: self._on_begin_epoch_response,
            EndQuorumEpochRequest: self._on_end_epoch_request,
            EndQuorumEpochResponse: self._on_end_epoch_response,
            FetchRequest: self._on_fetch_request,
            FetchResponse: self._on_fetch_response,
            FetchSnapshotRequest: self._on_fetch_snapshot_request,
            FetchSnapshotResponse: self._on_fetch_snapshot_response,
        }

        if self.leader_id == self.id:
            # It led this epoch before a restart. Leading it again could reuse offsets it wrote
            # but never persisted; a new epoch is needed, so it starts out resigned.
            self.role = Role.RESIGNED
            self._reset_election_timer()
        elif self.leader_id is not None and self.leader_id in self.voters:
            self.role = Role.FOLLOWER
            self._follow(self.leader_id)
        else:
            self.leader_id = None
            self.role = Role.FOLLOWER
            self._reset_election_timer()

    # Read-only views ---------------------------------------------------------------------

    @property
    def now_ms(self) -> int:
        return self._now

    @property
    def is_leader(self) -> bool:
        return self.role is Role.LEADER

    @property
    def log_start_offset(self) -> int:
        return self.log.start

    @property
    def log_end_offset(self) -> int:
        return self.log.end

    @property
    def applied_offset(self) -> int:
        """Committed entries below this offset have been handed out in a Ready."""
        return self._applied

    @property
    def snapshot(self) -> Snapshot | None:
        """The latest snapshot (taken or installed); the leader serves it to lagging followers."""
        return self._snapshot

    @property
    def hard_state(self) -> HardState:
        return HardState(self.epoch, self.voted_for, self.leader_id)

    @property
    def soft_state(self) -> SoftState:
        return SoftState(self.role, self.epoch, self._hint())

    @property
    def epoch_start_offset(self) -> int | None:
        """Leader only: offset of this epoch's leader-change entry. A new controller must have
        applied everything below it (``applied_offset > epoch_start_offset``) before it decides
        anything from its state, or it would act on a stale image (KRaft does the same)."""
        return self._epoch_start if self.role is Role.LEADER else None

    def replica_end_offsets(self) -> dict[int, int]:
        """Leader only: fetch offsets of the replicas (voters and observers) in this epoch."""
        return {rid: p.end_offset for rid, p in self._progress.items()}

    def replica_last_fetch_ms(self) -> dict[int, int]:
        """Leader only: when each replica last fetched (this node's clock, see ``now_ms``)."""
        return {rid: p.last_fetch_ms for rid, p in self._progress.items() if p.fetched}

    # Inputs ------------------------------------------------------------------------------

    def tick(self, now_ms: int) -> None:
        """Advance time. Call it regularly (every few tens of ms); it fires timeouts and retries."""
        if now_ms < self._now:
            raise RaftError(f"time went backwards: {now_ms} < {self._now}")
        self._now = now_ms
        role = self.role
        if role is Role.LEADER:
            self._tick_leader()
            return
        if now_ms >= self._election_deadline:
            if self.is_voter:
                self._start_election()
                return
            if self.leader_id is not None:
                # An observer that lost its leader goes back to asking random voters.
                self.leader_id = None
                self._fetch_inflight = False
                self._download = None
            self._election_deadline = now_ms + self.config.fetch_timeout_ms
        if role is Role.FOLLOWER:
            fetching = self.leader_id is not None or not self.is_voter
            retry = not self._fetch_inflight or now_ms - self._fetch_sent_at >= self.config.request_timeout_ms
            if fetching and retry:
                self._send_fetch()
        elif role is Role.PROSPECTIVE or role is Role.CANDIDATE:
            if now_ms - self._vote_sent_at >= self.config.request_timeout_ms:
                self._request_votes(self._answered_votes())
        elif role is Role.RESIGNED and now_ms - self._end_sent_at >= self.config.request_timeout_ms:
            self._send_end_epoch(self._end_acked)

    def step(self, msg: Message) -> None:
        """Feed one message received from the network."""
        if msg.dst != self.id or msg.src == self.id:
            raise RaftError(f"message for {msg.dst} from {msg.src} delivered to {self.id}")
        self._dispatch[type(msg)](msg)

    def propose(self, data: Sequence[bytes]) -> int:
        """Append entries (leader only). Returns the offset of the last one; they are committed
        when a Ready lists them in ``committed`` with this node's current epoch. Raises
        :class:`NotLeaderError` on any other node."""
        if self.role is not Role.LEADER:
            raise NotLeaderError(self.leader_id if self._leader_known() else None, self.epoch)
        end = self.log.end
        epoch = self.epoch
        self.log.append(Entry(end + i, epoch, d) for i, d in enumerate(data))
        self._maybe_advance_high_watermark()
        self._wake_parked()
        return self.log.end - 1

    def resign(self) -> bool:
        """Give up leadership gracefully (controlled shutdown): tell the voters with
        EndQuorumEpoch, most up-to-date successor first. Returns False if not the leader."""
        if self.role is not Role.LEADER:
            return False
        progress = self._progress
        self._successors = tuple(sorted(self._others, key=lambda v: (-progress[v].end_offset, v)))
        self._fail_parked()
        self._progress = {}
        self._release_snapshots()
        self.role = Role.RESIGNED
        self._end_acked = set()
        self._send_end_epoch(self._end_acked)
        self._reset_election_timer()
        return True

    def take_snapshot(self, end_offset: int, data: bytes) -> Snapshot | None:
        """Record that the application's state after applying every entry below ``end_offset``
        is ``data``. The next Ready carries the snapshot to persist and a new ``log_start``.
        Returns None if a snapshot at or beyond ``end_offset`` exists already."""
        if end_offset > self._applied:
            raise RaftError(f"snapshot at {end_offset} beyond the applied offset {self._applied}")
        if self._snapshot is not None and end_offset <= self._snapshot.end_offset:
            return None
        epoch = self.log.epoch_at(end_offset - 1)
        if epoch is None:
            raise RaftError(f"entry {end_offset - 1} is compacted away")
        snapshot = Snapshot(end_offset, epoch, data)
        old = self._snapshot
        if old is not None and any(p.downloading == old.id for p in self._progress.values()):
            self._retained[old.id] = old
        self._snapshot = snapshot
        self._pending_snapshot = snapshot
        self._compact_goal = end_offset - self.config.snapshot_trailing_entries
        self._compact()
        return snapshot

    def _compact(self) -> None:
        target = min([self._compact_goal, *(s.end_offset for s in self._retained.values())])
        if target > self.log.start:
            self.log.compact(target)

    def _release_snapshots(self) -> None:
        """Forget retained snapshots nobody is downloading any more (a replica that has not
        asked for a chunk within the fetch timeout has given up or moved on)."""
        if not self._retained:
            return
        now, timeout = self._now, self.config.fetch_timeout_ms
        active = {p.downloading for p in self._progress.values() if now - p.last_fetch_ms < timeout}
        for snap_id in [i for i in self._retained if i not in active]:
            del self._retained[snap_id]
        self._compact()

    # Output ------------------------------------------------------------------------------

    def has_ready(self) -> bool:
        return bool(
            self._msgs
            or self._pending_snapshot is not None
            or self._pending_restore is not None
            or self.high_watermark > self._applied
            or self.log.has_changes
            or self._hs_reported != (self.epoch, self.voted_for, self.leader_id)
            or self._soft_reported != (self.role, self.epoch, self._hint())
        )

    def ready(self) -> Ready:
        """Drain the outputs. The node assumes the driver persists them before acting on any
        later Ready (see :class:`Ready` for the exact contract)."""
        r = Ready(messages=self._msgs, high_watermark=self.high_watermark)
        self._msgs = []
        hs = (self.epoch, self.voted_for, self.leader_id)
        if hs != self._hs_reported:
            r.hard_state = HardState(*hs)
            self._hs_reported = hs
        r.snapshot, self._pending_snapshot = self._pending_snapshot, None
        r.restore, self._pending_restore = self._pending_restore, None
        if self.log.has_changes:
            changes = self.log.take_changes()
            r.truncate_to, r.log_start, r.entries = changes.truncate_to, changes.log_start, changes.entries
        if self.high_watermark > self._applied:
            r.committed = self.log.slice(self._applied, self.high_watermark)
            self._applied = self.high_watermark
        soft = (self.role, self.epoch, self._hint())
        if soft != self._soft_reported:
            self._soft_reported = soft
            r.soft_state = SoftState(*soft)
        return r

    # Elections ---------------------------------------------------------------------------

    def _random_election_timeout(self) -> int:
        t = self.config.election_timeout_ms
        return t + self._rng.randrange(t)

    def _reset_election_timer(self) -> None:
        if self.voters == {self.id}:
            self._election_deadline = self._now  # a lone voter elects itself at the next tick
        else:
            self._election_deadline = self._now + self._random_election_timeout()

    def _start_election(self) -> None:
        if self.config.pre_vote:
            self._become_prospective()
        else:
            self._become_candidate()

    def _log_up_to_date(self, m: VoteRequest) -> bool:
        # Raft's election restriction: the candidate's last entry has a later epoch, or the same
        # epoch and an end at least as far. It guarantees the winner holds every committed entry.
        return (m.last_epoch, m.end_offset) >= (self.log.last_epoch, self.log.end)

    def _leader_alive(self) -> bool:
        """Whether this node believes a leader is serving (KIP-996: such voters refuse pre-votes,
        so a node partitioned away and back cannot disturb a working leader)."""
        if self.role is Role.LEADER:
            return True
        return (
            self.role is Role.FOLLOWER
            and self.leader_id is not None
            and not self._leader_resigned
            and self._now - self._last_leader_contact < self.config.fetch_timeout_ms
        )

    def _can_grant_vote(self, m: VoteRequest) -> bool:
        # One vote per epoch (voted_for is persisted before the answer leaves), never for a
        # candidate when this epoch's leader is known, and only for an up-to-date log.
        return self.voted_for in (None, m.src) and self.leader_id is None and self._log_up_to_date(m)

    def _become_prospective(self) -> None:
        self.role = Role.PROSPECTIVE
        self._votes = {self.id}
        self._rejects = set()
        self._reset_election_timer()
        if len(self._votes) >= self._majority:
            self._become_candidate()
            return
        self._request_votes(())

    def _become_candidate(self) -> None:
        self.epoch += 1
        self.voted_for = self.id
        self.leader_id = None
        self.role = Role.CANDIDATE
        self._votes = {self.id}
        self._rejects = set()
        self._leader_resigned = False
        self._reset_election_timer()
        if len(self._votes) >= self._majority:
            self._become_leader()
            return
        self._request_votes(())

    def _answered_votes(self) -> set[int]:
        return self._votes | self._rejects

    def _request_votes(self, skip: Iterable[int]) -> None:
        pre = self.role is Role.PROSPECTIVE
        epoch = self.epoch + 1 if pre else self.epoch
        last_epoch, end = self.log.last_epoch, self.log.end
        skip = set(skip)
        for v in self._others:
            if v not in skip:
                self._msgs.append(VoteRequest(self.id, v, epoch, last_epoch, end, pre))
        self._vote_sent_at = self._now

    def _become_leader(self) -> None:
        self.role = Role.LEADER
        self.leader_id = self.id
        self._leader_resigned = False
        self._download = None
        self._fetch_inflight = False
        now = self._now
        self._progress = {v: ReplicaProgress(now) for v in self._others}
        self._begin_acked = set()
        # The leader-change entry: entries of earlier epochs commit only once an entry of this
        # epoch does (Raft paper section 5.4.2), so every epoch opens with one.
        self._epoch_start = self.log.end
        self.log.append((Entry(self._epoch_start, self.epoch, leader_change_data(self.id, self.voters), True),))
        self._send_begin_epoch()
        self._maybe_advance_high_watermark()

    def _send_begin_epoch(self) -> None:
        for v in self._others:
            if v not in self._begin_acked and not self._progress[v].fetched:
                self._msgs.append(BeginQuorumEpochRequest(self.id, v, self.epoch))
        self._begin_sent_at = self._now

    def _send_end_epoch(self, skip: set[int]) -> None:
        for v in self._others:
            if v not in skip:
                self._msgs.append(EndQuorumEpochRequest(self.id, v, self.epoch, self._successors))
        self._end_sent_at = self._now

    def _become_follower(self, epoch: int, leader_id: int | None, *, contact: bool = True) -> None:
        """Move to ``epoch`` (>= the current one) following ``leader_id`` (None: unknown).

        ``contact=False`` when the leader is only named by a third party (a refused vote's hint):
        that is no sign of life, so it must not make this node refuse other voters' pre-votes."""
        if epoch < self.epoch:
            return
        if leader_id == self.id:
            leader_id = None  # a stale hint about this node's own past leadership
        if epoch > self.epoch:
            self.epoch = epoch
            self.voted_for = None
        elif self.leader_id is not None and leader_id is not None and self.leader_id != leader_id:
            # Includes a resigned leader told of another leader of its own epoch.
            raise SafetyError(f"node {self.id}: leaders {self.leader_id} and {leader_id} in epoch {epoch}")
        was_leader = self.role is Role.LEADER
        if was_leader:
            self._fail_parked()
            self._progress = {}
            self._release_snapshots()
        self.role = Role.FOLLOWER
        self._leader_resigned = False
        if leader_id is not None:
            self._follow(leader_id, contact=contact)
        else:
            self.leader_id = None
            self._fetch_inflight = False
            self._download = None
            if not self.is_voter:
                self._election_deadline = self._now + self.config.fetch_timeout_ms
            elif was_leader:
                self._reset_election_timer()
            else:
                # Learning of a later epoch never postpones our own timeout (the Raft paper resets
                # it only on granting a vote or hearing from the leader). Otherwise a voter that
                # cannot win (stale log) but times out first (fast clock) could, without pre-vote,
                # keep everyone else from ever campaigning.
                self._election_deadline = min(self._election_deadline, self._now + self._random_election_timeout())

    def _follow(self, leader_id: int, *, contact: bool = True) -> None:
        changed = self.leader_id != leader_id
        self.leader_id = leader_id
        if contact:
            self._last_leader_contact = self._now
        self._election_deadline = self._now + self.config.fetch_timeout_ms
        if changed:
            self._download = None
        if changed or not self._fetch_inflight:
            self._send_fetch()

    def _valid_hint(self, leader_id: int | None) -> int | None:
        return leader_id if leader_id is not None and leader_id != self.id and leader_id in self.voters else None

    def _leader_known(self) -> bool:
        """Whether ``leader_id`` is worth telling others (it leads, or we follow it)."""
        if self.role is Role.LEADER:
            return True
        return self.role is Role.FOLLOWER and self.leader_id is not None and not self._leader_resigned

    def _hint(self) -> int | None:
        return self.leader_id if self._leader_known() else None

    # Vote --------------------------------------------------------------------------------

    def _on_vote_request(self, m: VoteRequest) -> None:
        if not self.is_voter or m.src not in self.voters:
            self._msgs.append(
                VoteResponse(self.id, m.src, self.epoch, False, self._hint(), m.pre_vote,
                             ErrorCode.INCONSISTENT_VOTER_SET)
            )
            return
        if m.pre_vote:
            # A pre-vote changes nothing here: "would you vote for me in epoch m.epoch?"
            granted = m.epoch > self.epoch and self._log_up_to_date(m) and not self._leader_alive()
            self._msgs.append(VoteResponse(self.id, m.src, self.epoch, granted, self._hint(), True))
            return
        if m.epoch < self.epoch:
            self._msgs.append(VoteResponse(self.id, m.src, self.epoch, False, self._hint()))
            return
        if m.epoch > self.epoch:
            self._become_follower(m.epoch, None)
        granted = self._can_grant_vote(m)
        if granted:
            self.voted_for = m.src
            if self.role is not Role.FOLLOWER:
                self.role = Role.FOLLOWER  # a prospective of this epoch gives up its own attempt
            self._reset_election_timer()
        self._msgs.append(VoteResponse(self.id, m.src, self.epoch, granted, self._hint()))

    def _on_vote_response(self, m: VoteResponse) -> None:
        if m.epoch > self.epoch:
            self._become_follower(m.epoch, self._valid_hint(m.leader_id))
            return
        if m.pre_vote:
            if self.role is not Role.PROSPECTIVE:
                return
            if m.granted:
                self._votes.add(m.src)
                if len(self._votes) >= self._majority:
                    self._become_candidate()
            else:
                self._rejects.add(m.src)
                hint = self._valid_hint(m.leader_id)
                if m.epoch == self.epoch and hint is not None:
                    # Someone still follows a leader of our epoch: try fetching from it again,
                    # without taking the hint for contact (two survivors of a dead leader would
                    # otherwise keep refusing each other's pre-votes forever).
                    self._become_follower(self.epoch, hint, contact=False)
            return
        if self.role is not Role.CANDIDATE or m.epoch != self.epoch:
            return
        if m.granted:
            self._votes.add(m.src)
            if len(self._votes) >= self._majority:
                self._become_leader()
        else:
            self._rejects.add(m.src)
            hint = self._valid_hint(m.leader_id)
            if hint is not None:
                self._become_follower(self.epoch, hint, contact=False)

    # BeginQuorumEpoch / EndQuorumEpoch ---------------------------------------------------

    def _on_begin_epoch_request(self, m: BeginQuorumEpochRequest) -> None:
        if m.src not in self.voters:
            self._msgs.append(BeginQuorumEpochResponse(self.id, m.src, self.epoch, self._hint(),
                                                       ErrorCode.INCONSISTENT_VOTER_SET))
            return
        if m.epoch < self.epoch:
            self._msgs.append(BeginQuorumEpochResponse(self.id, m.src, self.epoch, self._hint(),
                                                       ErrorCode.FENCED_LEADER_EPOCH))
            return
        if m.epoch == self.epoch and (self.role is Role.LEADER or self.role is Role.RESIGNED):
            raise SafetyError(f"node {self.id} led epoch {m.epoch}, and {m.src} claims it too")
        if m.epoch > self.epoch or self.role is not Role.FOLLOWER or self.leader_id != m.src:
            self._become_follower(m.epoch, m.src)
        self._msgs.append(BeginQuorumEpochResponse(self.id, m.src, self.epoch, self._hint()))

    def _on_begin_epoch_response(self, m: BeginQuorumEpochResponse) -> None:
        if m.epoch > self.epoch:
            self._become_follower(m.epoch, self._valid_hint(m.leader_id))
        elif self.role is Role.LEADER and m.epoch == self.epoch and m.error is ErrorCode.NONE:
            self._begin_acked.add(m.src)

    def _on_end_epoch_request(self, m: EndQuorumEpochRequest) -> None:
        if m.epoch > self.epoch:
            self._become_follower(m.epoch, None)
        if m.epoch == self.epoch and self.role is Role.FOLLOWER and self.leader_id in (None, m.src):
            self._leader_resigned = True
            if self.is_voter:
                # Successors campaign in the resigning leader's order (most caught-up first), so
                # the first one usually wins without a split vote.
                succ = m.preferred_successors
                rank = succ.index(self.id) if self.id in succ else len(self.voters)
                self._election_deadline = min(
                    self._election_deadline, self._now + rank * self.config.resign_backoff_ms
                )
        self._msgs.append(EndQuorumEpochResponse(self.id, m.src, self.epoch, self._hint()))

    def _on_end_epoch_response(self, m: EndQuorumEpochResponse) -> None:
        if m.epoch > self.epoch:
            self._become_follower(m.epoch, self._valid_hint(m.leader_id))
        elif self.role is Role.RESIGNED and m.epoch == self.epoch:
            self._end_acked.add(m.src)

    # Leader side of Fetch ----------------------------------------------------------------

    def _tick_leader(self) -> None:
        now = self._now
        cfg = self.config
        progress = self._progress
        if self._others:
            # Check quorum: the leader plus (majority - 1) other voters must have fetched recently,
            # or this leader may be cut off; resigning lets clients find the real one.
            times = sorted((progress[v].last_fetch_ms for v in self._others), reverse=True)
            if now - times[self._majority - 2] >= cfg.check_quorum_timeout_ms:
                self.resign()
                return
        for p in progress.values():
            if p.parked is not None and now >= p.park_deadline:
                self._answer_fetch(p, p.parked)
        self._release_snapshots()
        if now - self._begin_sent_at >= cfg.request_timeout_ms:
            self._send_begin_epoch()

    def _check_fetch_position(self, offset: int, last_epoch: int) -> tuple[OffsetAndEpoch | None, bool]:
        """KRaft's validateOffsetAndEpoch: returns (diverging, needs_snapshot); both falsy: valid.

        The pair (offset, last_epoch) names the fetcher's last entry. If the leader has an entry
        of that epoch at offset - 1, the logs match up to there (log matching). If not, the
        leader names the largest epoch <= last_epoch it has and where it ends; the fetcher cuts
        its log there and asks again."""
        log = self.log
        if offset < log.start or last_epoch < log.prev_epoch:
            # Below the log start, or diverging somewhere inside the snapshot: send the snapshot.
            return None, True
        end = log.end_offset_for_epoch(last_epoch)
        assert end is not None  # last_epoch >= the cache's base epoch
        if end.epoch == last_epoch and end.offset >= offset:
            return None, False
        return end, False

    def _on_fetch_request(self, m: FetchRequest) -> None:
        if self.role is not Role.LEADER or m.epoch != self.epoch:
            self._msgs.append(
                FetchResponse(self.id, m.src, self.epoch, self._hint(), self._not_leader_error(m.epoch),
                              m.fetch_offset, m.last_fetched_epoch)
            )
            return
        p = self._progress.get(m.src)
        if p is None:
            p = self._progress[m.src] = ReplicaProgress(self._now)  # an observer
        p.last_fetch_ms = self._now
        p.fetched = True
        p.downloading = None
        diverging, needs_snapshot = self._check_fetch_position(m.fetch_offset, m.last_fetched_epoch)
        if needs_snapshot or diverging is not None:
            p.parked = None
            snap_id = None
            if needs_snapshot:
                assert self._snapshot is not None, "a log start above 0 implies a snapshot"
                snap_id = self._snapshot.id
            self._msgs.append(
                FetchResponse(self.id, m.src, self.epoch, self.id, ErrorCode.NONE, m.fetch_offset,
                              m.last_fetched_epoch, self.high_watermark, (), diverging, snap_id)
            )
            return
        if m.fetch_offset > p.end_offset:
            # Only a matching fetch acknowledges: the replica's log equals ours below fetch_offset.
            # Keep the maximum: a late duplicate of an older fetch must not lower it, and what a
            # replica acknowledged it has persisted and never loses.
            p.end_offset = m.fetch_offset
            if m.src in self.voters:
                self._maybe_advance_high_watermark()
        if m.fetch_offset < self.log.end or p.hw_sent < self.high_watermark:
            self._answer_fetch(p, m)
        else:
            # Long poll: answer when there is something new or fetch_max_wait_ms has passed.
            p.parked = m
            p.park_deadline = self._now + self.config.fetch_max_wait_ms

    def _answer_fetch(self, p: ReplicaProgress, m: FetchRequest) -> None:
        p.parked = None
        cfg = self.config
        entries = self.log.read(m.fetch_offset, cfg.max_fetch_bytes, cfg.max_fetch_entries)
        p.hw_sent = self.high_watermark
        self._msgs.append(
            FetchResponse(self.id, m.src, self.epoch, self.id, ErrorCode.NONE, m.fetch_offset,
                          m.last_fetched_epoch, self.high_watermark, entries)
        )

    def _wake_parked(self) -> None:
        end, hw = self.log.end, self.high_watermark
        for p in self._progress.values():
            m = p.parked
            if m is not None and (m.fetch_offset < end or p.hw_sent < hw):
                self._answer_fetch(p, m)

    def _fail_parked(self) -> None:
        # Answer held fetches at once so their senders learn of the change without waiting for
        # their request timeout.
        for p in self._progress.values():
            m = p.parked
            if m is not None:
                p.parked = None
                self._msgs.append(
                    FetchResponse(self.id, m.src, self.epoch, None, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                  m.fetch_offset, m.last_fetched_epoch)
                )

    def _not_leader_error(self, request_epoch: int) -> ErrorCode:
        if request_epoch < self.epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        if request_epoch > self.epoch:
            return ErrorCode.UNKNOWN_LEADER_EPOCH
        return ErrorCode.NOT_LEADER_OR_FOLLOWER

    def _maybe_advance_high_watermark(self) -> None:
        # The leader's own log counts although the Ready that persists it may not have been
        # handled yet: nothing is sent or applied before that Ready is persisted.
        ends = [self.log.end]
        progress = self._progress
        ends.extend(progress[v].end_offset for v in self._others)
        ends.sort(reverse=True)
        candidate = ends[self._majority - 1]
        # Only offsets past the epoch's leader-change entry: commitment by counting replicas
        # is safe only for entries of the leader's own epoch (Raft paper figure 8).
        if candidate > self.high_watermark and candidate > self._epoch_start:
            self.high_watermark = candidate
            self._wake_parked()

    def _on_fetch_snapshot_request(self, m: FetchSnapshotRequest) -> None:
        if self.role is not Role.LEADER or m.epoch != self.epoch:
            self._msgs.append(
                FetchSnapshotResponse(self.id, m.src, self.epoch, self._hint(), self._not_leader_error(m.epoch),
                                      m.snapshot_id, m.position)
            )
            return
        p = self._progress.get(m.src)
        if p is None:
            p = self._progress[m.src] = ReplicaProgress(self._now)
        p.last_fetch_ms = self._now
        p.fetched = True
        snap = self._snapshot
        if snap is not None and snap.id != m.snapshot_id:
            snap = self._retained.get(m.snapshot_id)
        if snap is None:
            error = ErrorCode.SNAPSHOT_NOT_FOUND
        elif not 0 <= m.position <= len(snap.data):
            error = ErrorCode.POSITION_OUT_OF_RANGE
        else:
            p.downloading = snap.id
            chunk = snap.data[m.position : m.position + self.config.snapshot_chunk_bytes]
            self._msgs.append(
                FetchSnapshotResponse(self.id, m.src, self.epoch, self.id, ErrorCode.NONE, m.snapshot_id,
                                      m.position, len(snap.data), chunk)
            )
            return
        self._msgs.append(FetchSnapshotResponse(self.id, m.src, self.epoch, self.id, error, m.snapshot_id, m.position))

    # Follower side of Fetch --------------------------------------------------------------

    def _send_fetch(self) -> None:
        target = self.leader_id
        if target is None:
            if self.is_voter:
                return  # voters find the leader through elections and BeginQuorumEpoch
            # An observer asks a random voter; a non-leader answers with the leader it knows.
            target = self._voter_list[self._rng.randrange(len(self._voter_list))]
        self._fetch_target = target
        dl = self._download
        if dl is not None:
            self._msgs.append(FetchSnapshotRequest(self.id, target, self.epoch, dl.snapshot_id, dl.position))
        else:
            self._msgs.append(
                FetchRequest(self.id, target, self.epoch, self.log.end, self.log.last_epoch,
                             self.config.fetch_max_wait_ms)
            )
        self._fetch_inflight = True
        self._fetch_sent_at = self._now

    def _leader_contact(self) -> None:
        self._fetch_inflight = False
        self._leader_resigned = False
        self._last_leader_contact = self._now
        self._election_deadline = self._now + self.config.fetch_timeout_ms

    def _response_from_leader(self, epoch: int, src: int, error: ErrorCode, leader_id: int | None) -> bool:
        """Common handling of Fetch/FetchSnapshot responses; True if the body is to be used."""
        if epoch > self.epoch:
            self._become_follower(epoch, self._valid_hint(leader_id))
            return False
        if epoch < self.epoch or self.role is not Role.FOLLOWER:
            return False
        if error is not ErrorCode.NONE:
            if src == self.leader_id and error is ErrorCode.NOT_LEADER_OR_FOLLOWER:
                # Our leader no longer leads this epoch (it resigned or restarted): stop
                # counting on it, so pre-votes are granted and the timeout comes early.
                if not self._leader_resigned and self.is_voter:
                    self._election_deadline = min(
                        self._election_deadline, self._now + self._random_election_timeout()
                    )
                self._leader_resigned = True
            elif self.leader_id is None:
                hint = self._valid_hint(leader_id)
                if hint is not None:
                    self._become_follower(self.epoch, hint)
            # Otherwise the request stays "in flight" and is retried after request_timeout_ms.
            return False
        if self.leader_id is None:
            self._become_follower(self.epoch, src)  # only the epoch's leader answers without error
            return False
        if src != self.leader_id:
            raise SafetyError(f"node {self.id}: {src} and {self.leader_id} both lead epoch {epoch}")
        return True

    def _on_fetch_response(self, m: FetchResponse) -> None:
        if not self._response_from_leader(m.epoch, m.src, m.error, m.leader_id):
            return
        log = self.log
        if self._download is not None or m.fetch_offset != log.end or m.last_fetched_epoch != log.last_epoch:
            return  # answers an older fetch (late or duplicated): our log has moved since
        self._leader_contact()
        if m.diverging is not None:
            local = log.end_offset_for_epoch(m.diverging.epoch)
            target = min(m.diverging.offset, local.offset if local is not None else log.start)
            if target < self.high_watermark:
                raise SafetyError(
                    f"node {self.id}: truncating to {target} below the high watermark {self.high_watermark}"
                )
            log.truncate(target)
        elif m.snapshot_id is not None:
            self._download = _SnapshotDownload(m.snapshot_id)
        else:
            if m.entries:
                if m.entries[-1].epoch > self.epoch:
                    raise SafetyError(f"node {self.id}: entry of epoch {m.entries[-1].epoch} in epoch {self.epoch}")
                log.append(m.entries)
            hw = min(m.high_watermark, log.end)
            if hw > self.high_watermark:
                self.high_watermark = hw
        self._send_fetch()

    def _on_fetch_snapshot_response(self, m: FetchSnapshotResponse) -> None:
        dl = self._download
        if m.error in (ErrorCode.SNAPSHOT_NOT_FOUND, ErrorCode.POSITION_OUT_OF_RANGE):
            # Only the leader of m.epoch answers so: it has a newer snapshot by now, and a plain
            # fetch will name it.
            if m.epoch != self.epoch or self.role is not Role.FOLLOWER or dl is None or dl.snapshot_id != m.snapshot_id:
                return
            if self.leader_id is None:
                self._become_follower(self.epoch, m.src)  # drops the download and fetches
            elif m.src == self.leader_id:
                self._leader_contact()
                self._download = None
                self._send_fetch()
            return
        if not self._response_from_leader(m.epoch, m.src, m.error, m.leader_id):
            return
        if dl is None or m.snapshot_id != dl.snapshot_id or m.position != dl.position:
            return
        self._leader_contact()
        dl.buffer += m.chunk
        dl.position += len(m.chunk)
        if dl.position >= m.size:
            self._install_snapshot(Snapshot(dl.snapshot_id.offset, dl.snapshot_id.epoch, bytes(dl.buffer)))
        elif not m.chunk:
            self._download = None  # a leader that sends nothing cannot be downloaded from; restart
        self._send_fetch()

    def _install_snapshot(self, snap: Snapshot) -> None:
        self._download = None
        if snap.end_offset <= self.high_watermark:
            return  # we already have everything it covers
        log = self.log
        if snap.end_offset <= log.end and log.epoch_at(snap.end_offset - 1) == snap.epoch:
            log.compact(snap.end_offset)  # our log continues the snapshot: keep the suffix
        else:
            log.reset(snap)
        self._snapshot = snap
        self._pending_snapshot = snap
        self._pending_restore = snap
        self.high_watermark = snap.end_offset
        self._applied = snap.end_offset
