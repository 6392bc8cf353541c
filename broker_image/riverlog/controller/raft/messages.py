"""Messages between Raft nodes, shaped after Kafka's KRaft RPCs so the driver maps them 1:1.

| message                       | Kafka API (key)          |
|-------------------------------|--------------------------|
| VoteRequest / VoteResponse    | Vote (52), PreVote flag of v2 (KIP-996) |
| BeginQuorumEpochRequest/Resp. | BeginQuorumEpoch (53)    |
| EndQuorumEpochRequest/Resp.   | EndQuorumEpoch (54)      |
| FetchRequest / FetchResponse  | Fetch (1) with ReplicaId, on ``__cluster_metadata-0`` |
| FetchSnapshotRequest/Response | FetchSnapshot (59)       |

Every message names its sender ``src`` and destination ``dst`` (node ids) and an ``epoch``: for a
request the sender's epoch, for a response the responder's epoch (Kafka's ``LeaderEpoch`` /
``CurrentLeader.LeaderEpoch``). ``leader_id`` of ``None`` is Kafka's ``-1``.

Two fields have no Kafka counterpart: ``FetchResponse.fetch_offset`` and
``FetchResponse.last_fetched_epoch`` echo the request they answer. The driver fills them from
the request it sent (it pairs responses with requests by correlation id anyway); the core uses
them to ignore a late or duplicated answer to an older fetch, which could otherwise truncate
good entries.
"""

from __future__ import annotations

from dataclasses import dataclass

from .types import Entry, ErrorCode, OffsetAndEpoch


@dataclass(frozen=True, slots=True)
class VoteRequest:
    src: int  # CandidateId
    dst: int  # VoterId
    epoch: int  # CandidateEpoch (for a pre-vote: the epoch the candidate would run in)
    last_epoch: int  # LastOffsetEpoch: epoch of the candidate's last entry (or snapshot)
    end_offset: int  # LastOffset: the candidate's log end offset (exclusive)
    pre_vote: bool = False


@dataclass(frozen=True, slots=True)
class VoteResponse:
    src: int
    dst: int
    epoch: int  # responder's epoch
    granted: bool
    leader_id: int | None = None  # responder's known leader in its epoch
    pre_vote: bool = False
    error: ErrorCode = ErrorCode.NONE


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochRequest:
    """Sent by a new leader to the other voters (observers find it through Fetch)."""

    src: int  # LeaderId
    dst: int
    epoch: int  # LeaderEpoch


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochResponse:
    src: int
    dst: int
    epoch: int
    leader_id: int | None = None
    error: ErrorCode = ErrorCode.NONE


@dataclass(frozen=True, slots=True)
class EndQuorumEpochRequest:
    """Sent by a resigning leader: voters stop waiting for it; ``preferred_successors`` (most
    up-to-date first) campaign in that order."""

    src: int  # LeaderId
    dst: int
    epoch: int  # LeaderEpoch
    preferred_successors: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class EndQuorumEpochResponse:
    src: int
    dst: int
    epoch: int
    leader_id: int | None = None
    error: ErrorCode = ErrorCode.NONE


@dataclass(frozen=True, slots=True)
class FetchRequest:
    src: int  # ReplicaId (voters and observers alike)
    dst: int
    epoch: int  # CurrentLeaderEpoch
    fetch_offset: int  # FetchOffset: the fetcher's log end offset
    last_fetched_epoch: int  # LastFetchedEpoch: epoch of the entry at fetch_offset - 1
    max_wait_ms: int = 0  # MaxWaitMs (informational: the leader uses its own fetch_max_wait_ms)


@dataclass(frozen=True, slots=True)
class FetchResponse:
    src: int
    dst: int
    epoch: int  # CurrentLeader.LeaderEpoch
    leader_id: int | None  # CurrentLeader.LeaderId
    error: ErrorCode
    fetch_offset: int  # echo of the request (see module docstring)
    last_fetched_epoch: int  # echo of the request
    high_watermark: int = 0  # HighWatermark (exclusive, like Kafka)
    entries: tuple[Entry, ...] = ()  # Records: entries from fetch_offset on
    # DivergingEpoch: the fetcher's log diverges; it truncates to at most ``offset`` and fetches again.
    diverging: OffsetAndEpoch | None = None
    # SnapshotId: the fetch offset is below the leader's log start; fetch this snapshot.
    snapshot_id: OffsetAndEpoch | None = None


@dataclass(frozen=True, slots=True)
class FetchSnapshotRequest:
    src: int  # ReplicaId
    dst: int
    epoch: int  # CurrentLeaderEpoch
    snapshot_id: OffsetAndEpoch
    position: int


@dataclass(frozen=True, slots=True)
class FetchSnapshotResponse:
    src: int
    dst: int
    epoch: int
    leader_id: int | None
    error: ErrorCode
    snapshot_id: OffsetAndEpoch
    position: int = 0
    size: int = 0  # total size of the snapshot in bytes
    chunk: bytes = b""  # UnalignedRecords


Message = (
    VoteRequest
    | VoteResponse
    | BeginQuorumEpochRequest
    | BeginQuorumEpochResponse
    | EndQuorumEpochRequest
    | EndQuorumEpochResponse
    | FetchRequest
    | FetchResponse
    | FetchSnapshotRequest
    | FetchSnapshotResponse
)

__all__ = [
    "BeginQuorumEpochRequest",
    "BeginQuorumEpochResponse",
    "EndQuorumEpochRequest",
    "EndQuorumEpochResponse",
    "FetchRequest",
    "FetchResponse",
    "FetchSnapshotRequest",
    "FetchSnapshotResponse",
    "Message",
    "VoteRequest",
    "VoteResponse",
]
