"""Value types of the Raft core: log entries, persisted state, configuration and roles.

Naming follows Kafka's KRaft rather than the Raft paper, so the driver maps fields onto the
wire without translation: *epoch* is Raft's term, *offset* is a 0-based log index, and an *end
offset* is exclusive (the offset the next entry would get). A snapshot is identified like
Kafka's ``OffsetAndEpoch`` snapshot id: the end offset it covers and the epoch of its last entry.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import NamedTuple


class Entry(NamedTuple):
    """One log entry. A NamedTuple because millions are made in simulation and they never change.

    ``control`` entries are written by the core itself (the leader-change entry that opens every
    epoch, as Kafka's LeaderChangeMessage control batch does); the application skips them when
    applying but must persist and replicate them like any other entry.
    """

    offset: int
    epoch: int
    data: bytes
    control: bool = False


class OffsetAndEpoch(NamedTuple):
    """Kafka's OffsetAndEpoch: used for snapshot ids and diverging-epoch answers."""

    offset: int
    epoch: int


@dataclass(frozen=True, slots=True)
class HardState:
    """What must be durable before any message of the same Ready leaves the node.

    This is Kafka's ``quorum-state`` file: the epoch, the vote cast in it, and the leader known
    in it. The leader is persisted so a restarted leader knows it led this epoch and does not
    lead it a second time (it resigns and campaigns for a later epoch instead).
    """

    epoch: int = 0
    voted_for: int | None = None
    leader_id: int | None = None


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The application's state after applying every entry below ``end_offset``.

    ``epoch`` is the epoch of the entry at ``end_offset - 1`` (0 when ``end_offset`` is 0), so the
    pair is exactly Kafka's snapshot id. ``data`` is opaque to the core.
    """

    end_offset: int
    epoch: int
    data: bytes

    @property
    def id(self) -> OffsetAndEpoch:
        return OffsetAndEpoch(self.end_offset, self.epoch)


@dataclass(slots=True)
class Storage:
    """What the driver read back from disk at start-up (everything a previous life persisted).

    ``entries`` must be contiguous. Entries that a newer snapshot covers are dropped by the
    core, so the driver need not reconcile a crash between writing a snapshot and compacting.
    """

    hard_state: HardState = field(default_factory=HardState)
    snapshot: Snapshot | None = None
    entries: list[Entry] = field(default_factory=list)


class Role(enum.Enum):
    # A voter or observer that knows no leader in its epoch, or follows one (leader_id set).
    FOLLOWER = "follower"
    # Pre-vote in progress (KIP-996's "prospective"): asks whether it could win, changes nothing.
    PROSPECTIVE = "prospective"
    CANDIDATE = "candidate"
    LEADER = "leader"
    # Was leader of the current epoch and gave it up (resign, lost quorum, or restarted as the
    # leader of its persisted epoch). It serves nothing and waits to campaign for a later epoch.
    RESIGNED = "resigned"


class ErrorCode(enum.IntEnum):
    """The Kafka error codes the core answers with (values are Kafka's)."""

    NONE = 0
    NOT_LEADER_OR_FOLLOWER = 6
    INCONSISTENT_VOTER_SET = 94
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    SNAPSHOT_NOT_FOUND = 98
    POSITION_OUT_OF_RANGE = 99


@dataclass(frozen=True, slots=True)
class RaftConfig:
    """Timings in milliseconds. Defaults are Kafka's ``controller.quorum.*`` defaults, shortened
    so a local cluster fails over in about two seconds (issue #4)."""

    # Candidates and unattached voters wait a random time in [election_timeout, 2*election_timeout)
    # before (re)starting an election; the randomness breaks split votes.
    election_timeout_ms: int = 1000
    # A follower that has not had a successful fetch for this long starts an election.
    fetch_timeout_ms: int = 2000
    # The leader holds a caught-up fetch this long waiting for new entries (long polling).
    fetch_max_wait_ms: int = 500
    # Unanswered Vote / BeginQuorumEpoch / Fetch / FetchSnapshot requests are re-sent after this.
    request_timeout_ms: int = 1000
    # A leader that has not heard a fetch from a majority of voters for this long resigns
    # (Kafka: 1.5 x fetch timeout).
    check_quorum_timeout_ms: int = 3000
    # Pre-vote (KIP-996): a node that cannot win does not bump the epoch and disturb a leader.
    pre_vote: bool = True
    # After EndQuorumEpoch, the n-th preferred successor campaigns after n * this (Kafka's
    # election backoff), so the most up-to-date one usually wins at the first try.
    resign_backoff_ms: int = 100
    max_fetch_bytes: int = 1 << 20
    max_fetch_entries: int = 1024
    snapshot_chunk_bytes: int = 1 << 20
    # Entries kept below a newly taken snapshot, so followers slightly behind can still fetch
    # entries instead of the whole snapshot (etcd's SnapshotCatchUpEntries).
    snapshot_trailing_entries: int = 0

    def __post_init__(self) -> None:
        if self.fetch_max_wait_ms >= self.fetch_timeout_ms:
            raise ValueError("fetch_max_wait_ms must be below fetch_timeout_ms")
        if self.fetch_max_wait_ms >= self.request_timeout_ms:
            raise ValueError("fetch_max_wait_ms must be below request_timeout_ms (parked fetches would be re-sent)")
        if self.election_timeout_ms <= 0 or self.fetch_timeout_ms <= 0:
            raise ValueError("timeouts must be positive")


class RaftError(Exception):
    """A misuse of the API by the caller."""


class NotLeaderError(RaftError):
    """``propose`` on a node that is not the leader; carries the known leader, if any."""

    def __init__(self, leader_id: int | None, epoch: int) -> None:
        super().__init__(f"not the leader (leader {leader_id} in epoch {epoch})")
        self.leader_id = leader_id
        self.epoch = epoch


class SafetyError(AssertionError):
    """An invariant the protocol guarantees was about to be broken (e.g. truncating committed
    entries). It means a bug or corrupted storage; the node must stop rather than go on."""
