"""Raft core messages <-> Kafka KRaft RPC bodies (the dicts the ``protocol`` schemas encode).

Pure functions, no I/O. The core's messages map one to one onto Kafka's RPCs for the single
metadata partition ``__cluster_metadata-0`` (topic id ``AAAAAAAAAAAAAAAAAAAAAQ``):

| core message                     | Kafka API (key)                                         |
|----------------------------------|---------------------------------------------------------|
| VoteRequest / VoteResponse       | Vote (52); ``pre_vote`` is v2's PreVote (KIP-996)       |
| BeginQuorumEpochRequest / Resp.  | BeginQuorumEpoch (53)                                   |
| EndQuorumEpochRequest / Resp.    | EndQuorumEpoch (54); successors -> PreferredCandidates  |
| FetchRequest / FetchResponse     | Fetch (1), entries as record batches v2                 |
| FetchSnapshotRequest / Response  | FetchSnapshot (59)                                      |

Requests are built at the highest version Riverlog's schemas define. Request bodies carry every
version's spelling of a field (topic name and id, ReplicaId and ReplicaState, PreferredSuccessors
and PreferredCandidates), so the schema writes whichever the version has.

Where Kafka's messages lack something the core's have, the requester fills it from the request it
sent: a response's ``src``/``dst`` are its request's ``dst``/``src``; ``VoteResponse.pre_vote`` and
``FetchResponse.fetch_offset`` / ``last_fetched_epoch`` echo the request. Requests name no
destination except Vote and BeginQuorumEpoch (``VoterId``); the receiver is the destination.
KIP-853 directory ids and endpoints are sent empty (zero UUIDs, no endpoints): the core has no
directory ids and voters come from ``controller.quorum.voters``.

Receiving a request, :func:`decode_request` answers a Kafka error code instead of a message when
Kafka's KRaft would refuse it before its Raft logic: another cluster's id (null is accepted, as
Kafka does), a wrong topic/partition or impossible values (INVALID_REQUEST), or a Vote or
BeginQuorumEpoch for another voter (INVALID_VOTER_KEY). :func:`error_response` builds the answer.

Receiving a response, :func:`decode_response` raises :class:`WireError` when the body cannot be
a core message: a top-level error or a code the core does not know (:class:`RemoteError`), a
malformed body, or records that contradict the request (corrupt batches, offsets that do not
start at the fetch offset or are not consecutive). Such an answer is best dropped: the core
re-sends after its request timeout, whereas feeding it would stop the node.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any

from ...protocol import record_batch
from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages import MESSAGES
from ...protocol.primitives import ZERO_UUID
from ..raft.messages import (
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
from ..raft.types import Entry, OffsetAndEpoch
from ..raft.types import ErrorCode as RaftErrorCode

Body = dict[str, Any]

METADATA_TOPIC = "__cluster_metadata"
METADATA_PARTITION = 0
# Kafka's fixed id of the metadata topic (Uuid.METADATA_TOPIC_ID), "AAAAAAAAAAAAAAAAAAAAAQ".
METADATA_TOPIC_ID = uuid.UUID(int=1)
NO_LEADER = -1  # Kafka's "no leader / unknown" for leader ids and epochs
# Per-partition byte limit a fetch asks for (Kafka's KafkaRaftClient uses 8 MiB). The leader's
# core applies its own ``max_fetch_bytes``; this only keeps the request well formed.
FETCH_PARTITION_MAX_BYTES = 8 << 20


class WireError(ValueError):
    """A received body that cannot become a core message."""


class RemoteError(WireError):
    """The peer answered with an error the core has no code for (or at the top level)."""

    def __init__(self, code: int, what: str) -> None:
        try:
            name = ErrorCode(code).name
        except ValueError:
            name = f"error {code}"
        super().__init__(f"{what}: {name}")
        self.code = code


def version_of(api_key: ApiKey) -> int:
    """The version requests of ``api_key`` are sent at: the highest our schema defines."""
    return MESSAGES[api_key][0].valid[1]


# --- small conversions ------------------------------------------------------------------------


def _leader_to_wire(leader_id: int | None) -> int:
    return NO_LEADER if leader_id is None else leader_id


def _leader_from_wire(leader_id: int) -> int | None:
    return None if leader_id < 0 else leader_id


def _raft_error(code: int, what: str) -> RaftErrorCode:
    try:
        return RaftErrorCode(code)
    except ValueError:
        raise RemoteError(code, what) from None


def _optional_id(struct: Body | None, what: str) -> OffsetAndEpoch | None:
    """A DivergingEpoch / SnapshotId struct: absent or (-1, -1) means none (Kafka's default)."""
    if struct is None:
        return None
    offset, epoch = struct["end_offset"], struct["epoch"]
    if offset == -1 and epoch == -1:
        return None
    if offset < 0 or epoch < 0:
        raise WireError(f"{what} ({offset}, {epoch}) is neither absent nor valid")
    return OffsetAndEpoch(offset, epoch)


def _check_top_level(body: Body, what: str) -> None:
    code = body.get("error_code", 0)
    if code:
        raise RemoteError(code, what)


def _only_partition(topics: Sequence[Body] | None, what: str, *, name_key: str = "topic_name",
                    index_key: str = "partition_index", by_id: bool = False) -> Body:
    """The single ``__cluster_metadata-0`` partition of a response; anything else is malformed."""
    if not topics or len(topics) != 1 or len(topics[0]["partitions"] or ()) != 1:
        raise WireError(f"{what}: expected exactly the metadata partition")
    topic = topics[0]
    matches = topic.get(name_key) == METADATA_TOPIC or (by_id and topic.get("topic_id") == METADATA_TOPIC_ID)
    partition: Body = topic["partitions"][0]
    if not matches or partition[index_key] != METADATA_PARTITION:
        raise WireError(f"{what}: answers another partition than {METADATA_TOPIC}-{METADATA_PARTITION}")
    return partition


TopicTest = Callable[[Body], bool]


def _request_partition(topics: Sequence[Body] | None, *, topic_ok: TopicTest,
                       index_key: str = "partition_index") -> Body | ErrorCode:
    """The single partition of a request, or INVALID_REQUEST (Kafka's answer, until multi-raft)."""
    if not topics or len(topics) != 1 or len(topics[0]["partitions"] or ()) != 1:
        return ErrorCode.INVALID_REQUEST
    partition: Body = topics[0]["partitions"][0]
    if not topic_ok(topics[0]) or partition[index_key] != METADATA_PARTITION:
        return ErrorCode.INVALID_REQUEST
    return partition


def _named_metadata(topic: Body, key: str = "topic_name") -> bool:
    return bool(topic.get(key) == METADATA_TOPIC)


def _voter_check(voter_id: int, local_id: int) -> ErrorCode | None:
    # Version 0 has no VoterId (it reads as -1): then the request is for whoever received it.
    if voter_id >= 0 and voter_id != local_id:
        return ErrorCode.INVALID_VOTER_KEY
    return None


def check_cluster_id(body: Body, cluster_id: str) -> ErrorCode | None:
    """INCONSISTENT_CLUSTER_ID for a request of another cluster. A request without a cluster id
    (null) passes, as in Kafka's KRaft (``hasValidClusterId``)."""
    theirs = body.get("cluster_id")
    if theirs is not None and theirs != cluster_id:
        return ErrorCode.INCONSISTENT_CLUSTER_ID
    return None


# --- entries <-> record batches ---------------------------------------------------------------


def entries_to_records(entries: Sequence[Entry]) -> bytes:
    """Record batches v2 holding ``entries`` (which must have consecutive offsets): one batch per
    run of entries with the same epoch and control flag; the batch's partition leader epoch is
    the entries' epoch, its control attribute their flag; each record's value is an entry's
    data, with a null key."""
    out = bytearray()
    run: list[Entry] = []
    for entry in entries:
        if run and entry.offset != run[-1].offset + 1:
            raise ValueError(f"entries are not consecutive: {run[-1].offset} then {entry.offset}")
        if run and (entry.epoch != run[0].epoch or entry.control != run[0].control):
            out += _batch(run)
            run = []
        run.append(entry)
    if run:
        out += _batch(run)
    return bytes(out)


def _batch(run: Sequence[Entry]) -> bytes:
    return record_batch.build_batch(
        [record_batch.NewRecord(value=bytes(e.data)) for e in run],
        base_offset=run[0].offset,
        partition_leader_epoch=run[0].epoch,
        control=run[0].control,
    )


def records_to_entries(data: bytes | bytearray | memoryview | None) -> tuple[Entry, ...]:
    """The entries of record batches written by :func:`entries_to_records` (or any v2 batches with
    one valued record per offset). Raises :class:`WireError` for a corrupt or truncated batch
    (bad CRC, magic, length or record count) and for offsets that are not consecutive, within a
    batch or from one batch to the next."""
    if not data:
        return ()
    out: list[Entry] = []
    try:
        for header in record_batch.iter_batches(data):
            record_batch.validate_batch(data, header)
            if out and header.base_offset != out[-1].offset + 1:
                raise WireError(f"batch at offset {header.base_offset} does not follow offset {out[-1].offset}")
            expected = header.base_offset
            for record in record_batch.decode_records(data, header):
                if record.offset != expected:
                    raise WireError(f"record at offset {record.offset} where {expected} was expected")
                if record.value is None:
                    raise WireError(f"record at offset {record.offset} has no value")
                out.append(Entry(record.offset, header.partition_leader_epoch, record.value, header.is_control))
                expected += 1
    except KafkaError as exc:
        raise WireError(f"bad record batch: {exc}") from exc
    return tuple(out)


# --- Vote (52) --------------------------------------------------------------------------------


def vote_request_to_wire(msg: VoteRequest, cluster_id: str) -> Body:
    partition = {
        "partition_index": METADATA_PARTITION,
        "replica_epoch": msg.epoch,
        "replica_id": msg.src,
        "replica_directory_id": ZERO_UUID,
        "voter_directory_id": ZERO_UUID,
        "last_offset_epoch": msg.last_epoch,
        "last_offset": msg.end_offset,
        "pre_vote": msg.pre_vote,
    }
    return {"cluster_id": cluster_id, "voter_id": msg.dst,
            "topics": [{"topic_name": METADATA_TOPIC, "partitions": [partition]}]}


def vote_request_from_wire(body: Body, version: int, *, local_id: int) -> VoteRequest | ErrorCode:
    p = _request_partition(body["topics"], topic_ok=_named_metadata)
    if isinstance(p, ErrorCode):
        return p
    if p["replica_id"] < 0 or p["last_offset_epoch"] < 0 or p["last_offset"] < 0:
        return ErrorCode.INVALID_REQUEST
    refused = _voter_check(body["voter_id"], local_id)
    if refused is not None:
        return refused
    # PreVote exists from version 2; below, it decodes as False (a real vote), as Kafka reads it.
    return VoteRequest(p["replica_id"], local_id, p["replica_epoch"], p["last_offset_epoch"], p["last_offset"],
                       bool(p["pre_vote"]))


def vote_response_to_wire(msg: VoteResponse) -> Body:
    partition = {
        "partition_index": METADATA_PARTITION,
        "error_code": int(msg.error),
        "leader_id": _leader_to_wire(msg.leader_id),
        "leader_epoch": msg.epoch,
        "vote_granted": msg.granted,
    }
    return {"error_code": ErrorCode.NONE, "topics": [{"topic_name": METADATA_TOPIC, "partitions": [partition]}]}


def vote_response_from_wire(body: Body, request: VoteRequest) -> VoteResponse:
    _check_top_level(body, "Vote")
    p = _only_partition(body["topics"], "Vote")
    error = _raft_error(p["error_code"], "Vote")
    return VoteResponse(request.dst, request.src, p["leader_epoch"], bool(p["vote_granted"]),
                        _leader_from_wire(p["leader_id"]), request.pre_vote, error)


# --- BeginQuorumEpoch (53) --------------------------------------------------------------------


def begin_quorum_epoch_request_to_wire(msg: BeginQuorumEpochRequest, cluster_id: str) -> Body:
    partition = {"partition_index": METADATA_PARTITION, "voter_directory_id": ZERO_UUID,
                 "leader_id": msg.src, "leader_epoch": msg.epoch}
    return {"cluster_id": cluster_id, "voter_id": msg.dst,
            "topics": [{"topic_name": METADATA_TOPIC, "partitions": [partition]}], "leader_endpoints": []}


def begin_quorum_epoch_request_from_wire(
    body: Body, version: int, *, local_id: int
) -> BeginQuorumEpochRequest | ErrorCode:
    p = _request_partition(body["topics"], topic_ok=_named_metadata)
    if isinstance(p, ErrorCode):
        return p
    if p["leader_id"] < 0 or p["leader_epoch"] < 0:
        return ErrorCode.INVALID_REQUEST
    refused = _voter_check(body["voter_id"], local_id)
    if refused is not None:
        return refused
    return BeginQuorumEpochRequest(p["leader_id"], local_id, p["leader_epoch"])


def _epoch_response_to_wire(msg: BeginQuorumEpochResponse | EndQuorumEpochResponse) -> Body:
    partition = {"partition_index": METADATA_PARTITION, "error_code": int(msg.error),
                 "leader_id": _leader_to_wire(msg.leader_id), "leader_epoch": msg.epoch}
    return {"error_code": ErrorCode.NONE, "topics": [{"topic_name": METADATA_TOPIC, "partitions": [partition]}]}


def begin_quorum_epoch_response_to_wire(msg: BeginQuorumEpochResponse) -> Body:
    return _epoch_response_to_wire(msg)


def begin_quorum_epoch_response_from_wire(body: Body, request: BeginQuorumEpochRequest) -> BeginQuorumEpochResponse:
    _check_top_level(body, "BeginQuorumEpoch")
    p = _only_partition(body["topics"], "BeginQuorumEpoch")
    error = _raft_error(p["error_code"], "BeginQuorumEpoch")
    return BeginQuorumEpochResponse(request.dst, request.src, p["leader_epoch"], _leader_from_wire(p["leader_id"]),
                                    error)


# --- EndQuorumEpoch (54) ----------------------------------------------------------------------


def end_quorum_epoch_request_to_wire(msg: EndQuorumEpochRequest, cluster_id: str) -> Body:
    successors = list(msg.preferred_successors)
    partition = {
        "partition_index": METADATA_PARTITION,
        "leader_id": msg.src,
        "leader_epoch": msg.epoch,
        "preferred_successors": successors,  # version 0
        "preferred_candidates": [{"candidate_id": s, "candidate_directory_id": ZERO_UUID} for s in successors],
    }
    return {"cluster_id": cluster_id, "topics": [{"topic_name": METADATA_TOPIC, "partitions": [partition]}],
            "leader_endpoints": []}


def end_quorum_epoch_request_from_wire(
    body: Body, version: int, *, local_id: int
) -> EndQuorumEpochRequest | ErrorCode:
    p = _request_partition(body["topics"], topic_ok=_named_metadata)
    if isinstance(p, ErrorCode):
        return p
    if p["leader_id"] < 0 or p["leader_epoch"] < 0:
        return ErrorCode.INVALID_REQUEST
    if version >= 1:
        successors = tuple(c["candidate_id"] for c in p["preferred_candidates"])
    else:
        successors = tuple(p["preferred_successors"])
    return EndQuorumEpochRequest(p["leader_id"], local_id, p["leader_epoch"], successors)


def end_quorum_epoch_response_to_wire(msg: EndQuorumEpochResponse) -> Body:
    return _epoch_response_to_wire(msg)


def end_quorum_epoch_response_from_wire(body: Body, request: EndQuorumEpochRequest) -> EndQuorumEpochResponse:
    _check_top_level(body, "EndQuorumEpoch")
    p = _only_partition(body["topics"], "EndQuorumEpoch")
    error = _raft_error(p["error_code"], "EndQuorumEpoch")
    return EndQuorumEpochResponse(request.dst, request.src, p["leader_epoch"], _leader_from_wire(p["leader_id"]),
                                  error)


# --- Fetch (1) --------------------------------------------------------------------------------


def fetch_request_to_wire(msg: FetchRequest, cluster_id: str) -> Body:
    partition = {
        "partition": METADATA_PARTITION,
        "current_leader_epoch": msg.epoch,
        "fetch_offset": msg.fetch_offset,
        "last_fetched_epoch": msg.last_fetched_epoch,
        "log_start_offset": -1,
        "partition_max_bytes": FETCH_PARTITION_MAX_BYTES,
    }
    return {
        "cluster_id": cluster_id,
        "replica_id": msg.src,  # versions 0-14
        "replica_state": {"replica_id": msg.src, "replica_epoch": -1},  # version 15+ (no broker epoch)
        "max_wait_ms": msg.max_wait_ms,
        "min_bytes": 1,
        "session_id": 0,  # no fetch session: every fetch is a full one
        "session_epoch": -1,
        "topics": [{"topic": METADATA_TOPIC, "topic_id": METADATA_TOPIC_ID, "partitions": [partition]}],
        "forgotten_topics_data": [],
    }


def _fetch_topic_ok(version: int) -> TopicTest:
    # Topics are named up to version 12 and identified by id from 13 (KIP-516).
    if version >= 13:
        return lambda topic: topic.get("topic_id") == METADATA_TOPIC_ID
    return lambda topic: _named_metadata(topic, "topic")


def fetch_request_from_wire(body: Body, version: int, *, local_id: int) -> FetchRequest | ErrorCode:
    p = _request_partition(body["topics"], topic_ok=_fetch_topic_ok(version), index_key="partition")
    if isinstance(p, ErrorCode):
        return p
    replica_id = body["replica_state"]["replica_id"] if version >= 15 and body["replica_state"] else body["replica_id"]
    # LastFetchedEpoch exists from version 12: an older fetch reads -1 and is refused, as in Kafka.
    if replica_id < 0 or p["fetch_offset"] < 0 or p["last_fetched_epoch"] < 0 or p["current_leader_epoch"] < 0:
        return ErrorCode.INVALID_REQUEST
    return FetchRequest(replica_id, local_id, p["current_leader_epoch"], p["fetch_offset"], p["last_fetched_epoch"],
                        max(body["max_wait_ms"], 0))


def fetch_response_to_wire(msg: FetchResponse) -> Body:
    partition: Body = {
        "partition_index": METADATA_PARTITION,
        "error_code": int(msg.error),
        "high_watermark": msg.high_watermark,
        "current_leader": {"leader_id": _leader_to_wire(msg.leader_id), "leader_epoch": msg.epoch},
        "records": entries_to_records(msg.entries),
    }
    if msg.diverging is not None:
        partition["diverging_epoch"] = {"epoch": msg.diverging.epoch, "end_offset": msg.diverging.offset}
    if msg.snapshot_id is not None:
        partition["snapshot_id"] = {"end_offset": msg.snapshot_id.offset, "epoch": msg.snapshot_id.epoch}
    return {
        "error_code": ErrorCode.NONE,
        "session_id": 0,
        "responses": [{"topic": METADATA_TOPIC, "topic_id": METADATA_TOPIC_ID, "partitions": [partition]}],
    }


def fetch_response_from_wire(body: Body, request: FetchRequest) -> FetchResponse:
    _check_top_level(body, "Fetch")
    p = _only_partition(body["responses"], "Fetch", name_key="topic", by_id=True)
    error = _raft_error(p["error_code"], "Fetch")
    leader = p["current_leader"]
    if leader is None:
        raise WireError("Fetch: the response names no current leader (epoch unknown)")
    epoch = leader["leader_epoch"]
    entries = records_to_entries(p["records"])
    if entries:
        _check_fetched_entries(entries, request, epoch)
    return FetchResponse(
        request.dst, request.src, epoch, _leader_from_wire(leader["leader_id"]), error,
        request.fetch_offset, request.last_fetched_epoch, p["high_watermark"], entries,
        _optional_id(p["diverging_epoch"], "diverging epoch"), _optional_id(p["snapshot_id"], "snapshot id"),
    )


def _check_fetched_entries(entries: Sequence[Entry], request: FetchRequest, leader_epoch: int) -> None:
    """Entries must continue the fetcher's log as the request described it: from the fetch offset,
    with epochs from its last fetched epoch up to the leader's, never decreasing."""
    if entries[0].offset != request.fetch_offset:
        raise WireError(f"Fetch: entries start at {entries[0].offset}, the fetch was from {request.fetch_offset}")
    previous = request.last_fetched_epoch
    for entry in entries:
        if entry.epoch < previous or entry.epoch > leader_epoch:
            raise WireError(f"Fetch: entry {entry.offset} of epoch {entry.epoch} after epoch {previous} "
                            f"from a leader of epoch {leader_epoch}")
        previous = entry.epoch


# --- FetchSnapshot (59) -----------------------------------------------------------------------


def fetch_snapshot_request_to_wire(msg: FetchSnapshotRequest, cluster_id: str) -> Body:
    partition = {
        "partition": METADATA_PARTITION,
        "current_leader_epoch": msg.epoch,
        "snapshot_id": {"end_offset": msg.snapshot_id.offset, "epoch": msg.snapshot_id.epoch},
        "position": msg.position,
    }
    return {"cluster_id": cluster_id, "replica_id": msg.src,
            "topics": [{"name": METADATA_TOPIC, "partitions": [partition]}]}


def fetch_snapshot_request_from_wire(
    body: Body, version: int, *, local_id: int
) -> FetchSnapshotRequest | ErrorCode:
    p = _request_partition(body["topics"], topic_ok=lambda t: _named_metadata(t, "name"), index_key="partition")
    if isinstance(p, ErrorCode):
        return p
    sid = p["snapshot_id"]
    if body["replica_id"] < 0 or p["current_leader_epoch"] < 0 or sid["end_offset"] < 0 or sid["epoch"] < 0:
        return ErrorCode.INVALID_REQUEST
    # A negative position is the core's to refuse (POSITION_OUT_OF_RANGE), as Kafka does.
    return FetchSnapshotRequest(body["replica_id"], local_id, p["current_leader_epoch"],
                                OffsetAndEpoch(sid["end_offset"], sid["epoch"]), p["position"])


def fetch_snapshot_response_to_wire(msg: FetchSnapshotResponse) -> Body:
    partition = {
        "index": METADATA_PARTITION,
        "error_code": int(msg.error),
        "snapshot_id": {"end_offset": msg.snapshot_id.offset, "epoch": msg.snapshot_id.epoch},
        "current_leader": {"leader_id": _leader_to_wire(msg.leader_id), "leader_epoch": msg.epoch},
        "size": msg.size,
        "position": msg.position,
        "unaligned_records": bytes(msg.chunk),
    }
    return {"error_code": ErrorCode.NONE, "topics": [{"name": METADATA_TOPIC, "partitions": [partition]}]}


def fetch_snapshot_response_from_wire(body: Body, request: FetchSnapshotRequest) -> FetchSnapshotResponse:
    _check_top_level(body, "FetchSnapshot")
    p = _only_partition(body["topics"], "FetchSnapshot", name_key="name", index_key="index")
    error = _raft_error(p["error_code"], "FetchSnapshot")
    leader = p["current_leader"]
    if leader is None:
        raise WireError("FetchSnapshot: the response names no current leader (epoch unknown)")
    sid = p["snapshot_id"]
    chunk = p["unaligned_records"]
    return FetchSnapshotResponse(
        request.dst, request.src, leader["leader_epoch"], _leader_from_wire(leader["leader_id"]), error,
        OffsetAndEpoch(sid["end_offset"], sid["epoch"]), p["position"], p["size"],
        bytes(chunk) if chunk is not None else b"",
    )


# --- entry points -----------------------------------------------------------------------------

_REQUESTS: dict[type, tuple[ApiKey, Any]] = {
    VoteRequest: (ApiKey.VOTE, vote_request_to_wire),
    BeginQuorumEpochRequest: (ApiKey.BEGIN_QUORUM_EPOCH, begin_quorum_epoch_request_to_wire),
    EndQuorumEpochRequest: (ApiKey.END_QUORUM_EPOCH, end_quorum_epoch_request_to_wire),
    FetchRequest: (ApiKey.FETCH, fetch_request_to_wire),
    FetchSnapshotRequest: (ApiKey.FETCH_SNAPSHOT, fetch_snapshot_request_to_wire),
}
_REQUEST_DECODERS: dict[int, Any] = {
    ApiKey.VOTE: vote_request_from_wire,
    ApiKey.BEGIN_QUORUM_EPOCH: begin_quorum_epoch_request_from_wire,
    ApiKey.END_QUORUM_EPOCH: end_quorum_epoch_request_from_wire,
    ApiKey.FETCH: fetch_request_from_wire,
    ApiKey.FETCH_SNAPSHOT: fetch_snapshot_request_from_wire,
}
_RESPONSES: dict[type, tuple[ApiKey, Any]] = {
    VoteResponse: (ApiKey.VOTE, vote_response_to_wire),
    BeginQuorumEpochResponse: (ApiKey.BEGIN_QUORUM_EPOCH, begin_quorum_epoch_response_to_wire),
    EndQuorumEpochResponse: (ApiKey.END_QUORUM_EPOCH, end_quorum_epoch_response_to_wire),
    FetchResponse: (ApiKey.FETCH, fetch_response_to_wire),
    FetchSnapshotResponse: (ApiKey.FETCH_SNAPSHOT, fetch_snapshot_response_to_wire),
}
_RESPONSE_DECODERS: dict[int, tuple[type, Any]] = {
    ApiKey.VOTE: (VoteRequest, vote_response_from_wire),
    ApiKey.BEGIN_QUORUM_EPOCH: (BeginQuorumEpochRequest, begin_quorum_epoch_response_from_wire),
    ApiKey.END_QUORUM_EPOCH: (EndQuorumEpochRequest, end_quorum_epoch_response_from_wire),
    ApiKey.FETCH: (FetchRequest, fetch_response_from_wire),
    ApiKey.FETCH_SNAPSHOT: (FetchSnapshotRequest, fetch_snapshot_response_from_wire),
}

RAFT_API_KEYS: frozenset[int] = frozenset(_REQUEST_DECODERS)


def encode_request(msg: Message, cluster_id: str) -> tuple[ApiKey, int, Body]:
    """(API key, version, body) of the Kafka request carrying ``msg``, a core request message."""
    entry = _REQUESTS.get(type(msg))
    if entry is None:
        raise TypeError(f"{type(msg).__name__} is not a request")
    api_key, to_wire = entry
    body: Body = to_wire(msg, cluster_id)
    return api_key, version_of(api_key), body


def decode_request(api_key: int, version: int, body: Body, *, local_id: int, cluster_id: str) -> Message | ErrorCode:
    """The core request in a received Kafka request, or the error code to answer it with (see
    :func:`error_response`). ``local_id`` is the receiving node, so the message's ``dst``."""
    decoder = _REQUEST_DECODERS.get(api_key)
    if decoder is None:
        raise ValueError(f"API {api_key} carries no Raft message")
    refused = check_cluster_id(body, cluster_id)
    if refused is not None:
        return refused
    result: Message | ErrorCode = decoder(body, version, local_id=local_id)
    return result


def encode_response(msg: Message, api_key: int, version: int) -> Body:
    """The Kafka response body carrying ``msg``, a core response to a request of ``api_key``
    received at ``version`` (the body suits every version; the schema writes what it has)."""
    entry = _RESPONSES.get(type(msg))
    if entry is None or entry[0] != api_key:
        raise TypeError(f"{type(msg).__name__} does not answer API {api_key}")
    if not MESSAGES[api_key][1].supports(version):
        raise ValueError(f"API {api_key} has no version {version}")
    body: Body = entry[1](msg)
    return body


def decode_response(api_key: int, body: Body, request_msg: Message) -> Message:
    """The core response in the Kafka response to ``request_msg`` (sent with :func:`encode_request`).
    Raises :class:`WireError` (or its :class:`RemoteError`) when there is none to give the core."""
    entry = _RESPONSE_DECODERS.get(api_key)
    if entry is None:
        raise ValueError(f"API {api_key} carries no Raft message")
    request_type, from_wire = entry
    if not isinstance(request_msg, request_type):
        raise TypeError(f"a response of API {api_key} does not answer {type(request_msg).__name__}")
    result: Message = from_wire(body, request_msg)
    return result


def error_response(api_key: int, version: int, code: ErrorCode) -> Body:
    """A response refusing a whole request with ``code`` (top-level error, no partitions), as
    Kafka's KRaft answers a cluster id or request-shape error. Fetch has a top-level error code
    from version 7 only: below, the code goes on the metadata partition."""
    if api_key not in RAFT_API_KEYS:
        raise ValueError(f"API {api_key} carries no Raft message")
    if api_key != ApiKey.FETCH:
        return {"error_code": code, "topics": []}
    body: Body = {"error_code": code, "session_id": 0, "responses": []}
    if version < 7:
        partition = {"partition_index": METADATA_PARTITION, "error_code": code, "high_watermark": -1,
                     "records": b""}
        body["responses"] = [{"topic": METADATA_TOPIC, "topic_id": METADATA_TOPIC_ID, "partitions": [partition]}]
    return body


__all__ = [
    "FETCH_PARTITION_MAX_BYTES",
    "METADATA_PARTITION",
    "METADATA_TOPIC",
    "METADATA_TOPIC_ID",
    "RAFT_API_KEYS",
    "RemoteError",
    "WireError",
    "begin_quorum_epoch_request_from_wire",
    "begin_quorum_epoch_request_to_wire",
    "begin_quorum_epoch_response_from_wire",
    "begin_quorum_epoch_response_to_wire",
    "check_cluster_id",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_response",
    "end_quorum_epoch_request_from_wire",
    "end_quorum_epoch_request_to_wire",
    "end_quorum_epoch_response_from_wire",
    "end_quorum_epoch_response_to_wire",
    "entries_to_records",
    "error_response",
    "fetch_request_from_wire",
    "fetch_request_to_wire",
    "fetch_response_from_wire",
    "fetch_response_to_wire",
    "fetch_snapshot_request_from_wire",
    "fetch_snapshot_request_to_wire",
    "fetch_snapshot_response_from_wire",
    "fetch_snapshot_response_to_wire",
    "records_to_entries",
    "version_of",
    "vote_request_from_wire",
    "vote_request_to_wire",
    "vote_response_from_wire",
    "vote_response_to_wire",
]
