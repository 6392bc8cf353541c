"""Raft core messages <-> Kafka KRaft RPC bodies (the dicts the ``protocol`` schemas encode).

Pure functions, no I/O. The core's messages map one to one onto Kafka's RPCs for the single
metadata partition ``__cluster_metadata-0`` (topic id ``AAAAAAAAAAAAAAAAAAAAAQ``); the table of
which message goes where is ``kraft_rpcs.py``, the conversion it drives ``wire_mapping.py`` (with
``field_codecs.py``), and entries travel as record batches v2 (``entry_batches.py``).

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

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ...protocol.messages import MESSAGES
from ..raft.messages import Message
from .entry_batches import entries_to_records, records_to_entries
from .field_codecs import Body, RemoteError, WireError
from .kraft_rpcs import FETCH_PARTITION_MAX_BYTES, RPCS, KraftRpc
from .wire_mapping import METADATA_PARTITION, METADATA_TOPIC, METADATA_TOPIC_ID

_BY_REQUEST: dict[type, KraftRpc] = {rpc.request.message: rpc for rpc in RPCS.values()}
_BY_RESPONSE: dict[type, KraftRpc] = {rpc.response.message: rpc for rpc in RPCS.values()}

RAFT_API_KEYS: frozenset[int] = frozenset(RPCS)


def version_of(api_key: ApiKey) -> int:
    """The version requests of ``api_key`` are sent at: the highest our schema defines."""
    return MESSAGES[api_key][0].valid[1]


def check_cluster_id(body: Body, cluster_id: str) -> ErrorCode | None:
    """INCONSISTENT_CLUSTER_ID for a request of another cluster. A request without a cluster id
    (null) passes, as in Kafka's KRaft (``hasValidClusterId``)."""
    theirs = body.get("cluster_id")
    if theirs is not None and theirs != cluster_id:
        return ErrorCode.INCONSISTENT_CLUSTER_ID
    return None


def _rpc(api_key: int) -> KraftRpc:
    rpc = RPCS.get(api_key)
    if rpc is None:
        raise ValueError(f"API {api_key} carries no Raft message")
    return rpc


def encode_request(msg: Message, cluster_id: str) -> tuple[ApiKey, int, Body]:
    """(API key, version, body) of the Kafka request carrying ``msg``, a core request message."""
    rpc = _BY_REQUEST.get(type(msg))
    if rpc is None:
        raise TypeError(f"{type(msg).__name__} is not a request")
    return rpc.api_key, version_of(rpc.api_key), rpc.request.to_wire(msg, cluster_id)


def decode_request(api_key: int, version: int, body: Body, *, local_id: int, cluster_id: str) -> Message | ErrorCode:
    """The core request in a received Kafka request, or the error code to answer it with (see
    :func:`error_response`). ``local_id`` is the receiving node, so the message's ``dst``."""
    rpc = _rpc(api_key)
    refused = check_cluster_id(body, cluster_id)
    if refused is not None:
        return refused
    result: Message | ErrorCode = rpc.request.from_wire(body, version, local_id=local_id)
    return result


def encode_response(msg: Message, api_key: int, version: int) -> Body:
    """The Kafka response body carrying ``msg``, a core response to a request of ``api_key``
    received at ``version`` (the body suits every version; the schema writes what it has)."""
    rpc = _BY_RESPONSE.get(type(msg))
    if rpc is None or rpc.api_key != api_key:
        raise TypeError(f"{type(msg).__name__} does not answer API {api_key}")
    if not MESSAGES[api_key][1].supports(version):
        raise ValueError(f"API {api_key} has no version {version}")
    return rpc.response.to_wire(msg)


def decode_response(api_key: int, body: Body, request_msg: Message) -> Message:
    """The core response in the Kafka response to ``request_msg`` (sent with :func:`encode_request`).
    Raises :class:`WireError` (or its :class:`RemoteError`) when there is none to give the core."""
    rpc = _rpc(api_key)
    if not isinstance(request_msg, rpc.request.message):
        raise TypeError(f"a response of API {api_key} does not answer {type(request_msg).__name__}")
    result: Message = rpc.response.from_wire(body, request_msg)
    return result


def error_response(api_key: int, version: int, code: ErrorCode) -> Body:
    """A response refusing a whole request with ``code`` (top-level error, no partitions), as
    Kafka's KRaft answers a cluster id or request-shape error. Fetch has a top-level error code
    from version 7 only: below, the code goes on the metadata partition."""
    _rpc(api_key)
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
    "check_cluster_id",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_response",
    "entries_to_records",
    "error_response",
    "records_to_entries",
    "version_of",
]
