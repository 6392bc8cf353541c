"""Where each Raft core message travels in its Kafka KRaft RPC: one field table per message.

The tables name, for each field of a core message (``controller/raft/messages.py``), its place in
the RPC body described by ``protocol/messages/<api>.py``; ``wire_mapping.py`` derives the rest
(conversions from the fields' types, the metadata partition's wrapping from the schema). A field
is either ``in_partition``, the metadata partition's struct, or ``in_body``, the body's top level.

| core message                     | Kafka API (key)                                         |
|----------------------------------|---------------------------------------------------------|
| VoteRequest / VoteResponse       | Vote (52); ``pre_vote`` is v2's PreVote (KIP-996)       |
| BeginQuorumEpochRequest / Resp.  | BeginQuorumEpoch (53)                                   |
| EndQuorumEpochRequest / Resp.    | EndQuorumEpoch (54); successors -> PreferredCandidates  |
| FetchRequest / FetchResponse     | Fetch (1), entries as record batches v2                 |
| FetchSnapshotRequest / Response  | FetchSnapshot (59)                                      |
"""

from __future__ import annotations

from dataclasses import dataclass

from ...protocol.api_keys import ApiKey
from ...protocol.messages import MESSAGES
from ..raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    VoteRequest,
    VoteResponse,
)
from .entry_batches import FetchedEntries
from .wire_mapping import ECHO, RequestMapping, ResponseMapping, in_body, in_partition

# Per-partition byte limit a fetch asks for (Kafka's KafkaRaftClient uses 8 MiB). The leader's
# core applies its own ``max_fetch_bytes``; this only keeps the request well formed.
FETCH_PARTITION_MAX_BYTES = 8 << 20


@dataclass(frozen=True)
class KraftRpc:
    """One Kafka API and the core messages its request and response carry."""

    api_key: ApiKey
    request: RequestMapping
    response: ResponseMapping


# Responses of Vote, BeginQuorumEpoch and EndQuorumEpoch: the responder's epoch and leader.
_EPOCH_AND_LEADER = {
    "epoch": in_partition("leader_epoch"),
    "leader_id": in_partition("leader_id"),
    "error": in_partition("error_code"),
}

VOTE = KraftRpc(
    ApiKey.VOTE,
    RequestMapping(VoteRequest, MESSAGES[ApiKey.VOTE][0], {
        "src": in_partition("replica_id", non_negative=True),
        "dst": in_body("voter_id"),
        "epoch": in_partition("replica_epoch"),
        "last_epoch": in_partition("last_offset_epoch", non_negative=True),
        "end_offset": in_partition("last_offset", non_negative=True),
        # PreVote exists from version 2; below, it decodes as False (a real vote), as Kafka reads it.
        "pre_vote": in_partition("pre_vote"),
    }),
    ResponseMapping(VoteResponse, MESSAGES[ApiKey.VOTE][1], {
        **_EPOCH_AND_LEADER,
        "granted": in_partition("vote_granted"),
        "pre_vote": ECHO,
    }),
)

BEGIN_QUORUM_EPOCH = KraftRpc(
    ApiKey.BEGIN_QUORUM_EPOCH,
    RequestMapping(BeginQuorumEpochRequest, MESSAGES[ApiKey.BEGIN_QUORUM_EPOCH][0], {
        "src": in_partition("leader_id", non_negative=True),
        "dst": in_body("voter_id"),
        "epoch": in_partition("leader_epoch", non_negative=True),
    }),
    ResponseMapping(BeginQuorumEpochResponse, MESSAGES[ApiKey.BEGIN_QUORUM_EPOCH][1], _EPOCH_AND_LEADER),
)

END_QUORUM_EPOCH = KraftRpc(
    ApiKey.END_QUORUM_EPOCH,
    RequestMapping(EndQuorumEpochRequest, MESSAGES[ApiKey.END_QUORUM_EPOCH][0], {
        "src": in_partition("leader_id", non_negative=True),
        "epoch": in_partition("leader_epoch", non_negative=True),
        # Ids in version 0, (id, directory id) pairs from version 1.
        "preferred_successors": in_partition("preferred_successors", "preferred_candidates[].candidate_id"),
    }),
    ResponseMapping(EndQuorumEpochResponse, MESSAGES[ApiKey.END_QUORUM_EPOCH][1], _EPOCH_AND_LEADER),
)

FETCH = KraftRpc(
    ApiKey.FETCH,
    RequestMapping(
        FetchRequest, MESSAGES[ApiKey.FETCH][0], {
            # ReplicaId in versions 0-14, ReplicaState (with no broker epoch) from 15.
            "src": in_body("replica_id", "replica_state.replica_id", non_negative=True),
            "epoch": in_partition("current_leader_epoch", non_negative=True),
            "fetch_offset": in_partition("fetch_offset", non_negative=True),
            # LastFetchedEpoch exists from version 12: an older fetch reads -1 and is refused, as in Kafka.
            "last_fetched_epoch": in_partition("last_fetched_epoch", non_negative=True),
            "max_wait_ms": in_body("max_wait_ms", at_least=0),
        },
        body_constants={
            "replica_state.replica_epoch": -1,
            "min_bytes": 1,
            "session_id": 0,  # no fetch session: every fetch is a full one
            "session_epoch": -1,
        },
        partition_constants={"log_start_offset": -1, "partition_max_bytes": FETCH_PARTITION_MAX_BYTES},
    ),
    ResponseMapping(
        FetchResponse, MESSAGES[ApiKey.FETCH][1], {
            "epoch": in_partition("current_leader.leader_epoch"),
            "leader_id": in_partition("current_leader.leader_id"),
            "error": in_partition("error_code"),
            "fetch_offset": ECHO,
            "last_fetched_epoch": ECHO,
            "high_watermark": in_partition("high_watermark"),
            "entries": in_partition("records"),
            "diverging": in_partition("diverging_epoch"),
            "snapshot_id": in_partition("snapshot_id"),
        },
        codecs={"entries": FetchedEntries()},
    ),
)

FETCH_SNAPSHOT = KraftRpc(
    ApiKey.FETCH_SNAPSHOT,
    RequestMapping(FetchSnapshotRequest, MESSAGES[ApiKey.FETCH_SNAPSHOT][0], {
        "src": in_body("replica_id", non_negative=True),
        "epoch": in_partition("current_leader_epoch", non_negative=True),
        "snapshot_id": in_partition("snapshot_id", non_negative=True),
        # A negative position is the core's to refuse (POSITION_OUT_OF_RANGE), as Kafka does.
        "position": in_partition("position"),
    }),
    ResponseMapping(FetchSnapshotResponse, MESSAGES[ApiKey.FETCH_SNAPSHOT][1], {
        "epoch": in_partition("current_leader.leader_epoch"),
        "leader_id": in_partition("current_leader.leader_id"),
        "error": in_partition("error_code"),
        "snapshot_id": in_partition("snapshot_id"),
        "position": in_partition("position"),
        "size": in_partition("size"),
        "chunk": in_partition("unaligned_records"),
    }),
)

RPCS: dict[int, KraftRpc] = {rpc.api_key: rpc for rpc in (VOTE, BEGIN_QUORUM_EPOCH, END_QUORUM_EPOCH, FETCH,
                                                          FETCH_SNAPSHOT)}

__all__ = ["FETCH_PARTITION_MAX_BYTES", "RPCS", "KraftRpc"]
