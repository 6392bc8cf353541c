"""Raft consensus core for the KRaft-style metadata quorum: a pure state machine.

See ``docs/raft.md`` for the protocol choices and ``RaftNode`` / ``Ready`` for the driver contract.
"""

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
from .node import RaftNode, leader_change_data, parse_leader_change
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

__all__ = [
    "BeginQuorumEpochRequest",
    "BeginQuorumEpochResponse",
    "EndQuorumEpochRequest",
    "EndQuorumEpochResponse",
    "Entry",
    "ErrorCode",
    "FetchRequest",
    "FetchResponse",
    "FetchSnapshotRequest",
    "FetchSnapshotResponse",
    "HardState",
    "Message",
    "NotLeaderError",
    "OffsetAndEpoch",
    "RaftConfig",
    "RaftError",
    "RaftNode",
    "Ready",
    "Role",
    "SafetyError",
    "Snapshot",
    "SoftState",
    "Storage",
    "VoteRequest",
    "VoteResponse",
    "leader_change_data",
    "parse_leader_change",
]
