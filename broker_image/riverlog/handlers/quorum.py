"""The metadata quorum's RPCs: KRaft's Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch and
FetchSnapshot on ``__cluster_metadata``, DescribeQuorum, and Riverlog's controller call.

The Raft messages are handed to this node's Raft driver through the transport, which waits for
the core's answer (``controller/quorum/transport.py``). A broker without a quorum (one of
several sharing an in-process test controller) answers them with an error: it is nobody's voter.
With an authorizer, as Kafka's controllers: the Raft RPCs and controller calls need CLUSTER_ACTION
on the cluster (other nodes' principal), DescribeQuorum DESCRIBE; else CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import time
from typing import Any

from ..client.connection import BrokerConnection
from ..controller.quorum import wire
from ..controller.raft import (
    BeginQuorumEpochResponse,
    EndQuorumEpochResponse,
    FetchResponse,
    FetchSnapshotResponse,
    VoteResponse,
)
from ..protocol.api_keys import ApiKey
from ..protocol.errors import ErrorCode
from ..server.dispatch import RequestContext
from .authorize import DENIED_MESSAGE, Operation, on_cluster
from .common import Body
from .host import QuorumHost

CLUSTER_DENIED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED

_RESPONSE_TYPE: dict[int, type] = {
    ApiKey.VOTE: VoteResponse,
    ApiKey.BEGIN_QUORUM_EPOCH: BeginQuorumEpochResponse,
    ApiKey.END_QUORUM_EPOCH: EndQuorumEpochResponse,
    ApiKey.FETCH: FetchResponse,
    ApiKey.FETCH_SNAPSHOT: FetchSnapshotResponse,
}


def is_metadata_fetch(req: Body) -> bool:
    """A Fetch for ``__cluster_metadata`` (by name before v13, by topic id after)."""
    topics: list[dict[str, Any]] = req.get("topics") or []
    return any(t.get("topic") == wire.METADATA_TOPIC or t.get("topic_id") == wire.METADATA_TOPIC_ID for t in topics)


async def handle_raft_request(api_key: int, broker: QuorumHost, ctx: RequestContext, req: Body) -> Body | None:
    quorum = broker.quorum
    version = ctx.version
    if not on_cluster(broker, ctx, Operation.CLUSTER_ACTION):
        return wire.error_response(api_key, version, CLUSTER_DENIED)
    if quorum is None:
        return wire.error_response(api_key, version, ErrorCode.INCONSISTENT_VOTER_SET)
    decoded = wire.decode_request(api_key, version, req, local_id=broker.node_id, cluster_id=broker.cluster_id)
    if isinstance(decoded, ErrorCode):
        return wire.error_response(api_key, version, decoded)
    answer = await quorum.transport.handle(decoded, _RESPONSE_TYPE[api_key])
    if answer is None:
        return None  # no answer in time: as if lost; the sender re-sends after its timeout
    return wire.encode_response(answer, api_key, version)


async def handle_vote(broker: QuorumHost, ctx: RequestContext, req: Body) -> Body | None:
    return await handle_raft_request(ApiKey.VOTE, broker, ctx, req)


async def handle_begin_quorum_epoch(broker: QuorumHost, ctx: RequestContext, req: Body) -> Body | None:
    return await handle_raft_request(ApiKey.BEGIN_QUORUM_EPOCH, broker, ctx, req)


async def handle_end_quorum_epoch(broker: QuorumHost, ctx: RequestContext, req: Body) -> Body | None:
    return await handle_raft_request(ApiKey.END_QUORUM_EPOCH, broker, ctx, req)


async def handle_fetch_snapshot(broker: QuorumHost, ctx: RequestContext, req: Body) -> Body | None:
    return await handle_raft_request(ApiKey.FETCH_SNAPSHOT, broker, ctx, req)


async def handle_controller_call(broker: QuorumHost, ctx: RequestContext, req: Body) -> Body:
    quorum = broker.quorum
    if not on_cluster(broker, ctx, Operation.CLUSTER_ACTION):
        return {"error_code": CLUSTER_DENIED, "error_message": DENIED_MESSAGE[CLUSTER_DENIED]}
    if quorum is None:
        return {"error_code": ErrorCode.NOT_CONTROLLER,
                "error_message": f"node {broker.node_id} runs without a metadata quorum"}
    return await quorum.serve_call(req["caller_id"], req["cluster_id"], req["method"], req["arguments"])


async def handle_describe_quorum(broker: QuorumHost, ctx: RequestContext, req: Body) -> Body:
    """The quorum's state as its leader knows it (``kafka-metadata-quorum describe --status
    --replication``). Any broker may be asked: a non-leader passes the request to the leader."""
    quorum = broker.quorum
    if not on_cluster(broker, ctx, Operation.DESCRIBE):
        return _describe_quorum_error(CLUSTER_DENIED, DENIED_MESSAGE[CLUSTER_DENIED])
    if quorum is None:
        return _describe_quorum_error(ErrorCode.INVALID_REQUEST,
                                      f"node {broker.node_id} runs without a metadata quorum")
    driver = quorum.driver
    if not driver.is_leader:
        leader = driver.leader_id
        if leader is None or leader not in quorum.transport.voters:
            return _describe_quorum_error(ErrorCode.NOT_LEADER_OR_FOLLOWER, "the quorum has no leader right now")
        address = quorum.transport.voters[leader]
        try:
            conn = await BrokerConnection.connect(address.host, address.port, negotiate=False, connect_timeout=2.0,
                                                  request_timeout=5.0, security=quorum.transport.security)
            try:
                return await conn.request(ApiKey.DESCRIBE_QUORUM, req, ctx.version)
            finally:
                await conn.close()
        except Exception as exc:
            return _describe_quorum_error(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"leader {leader} unreachable: {exc}")
    node = driver.node
    now_wall = int(time.time() * 1000)
    fetched = node.replica_last_fetch_ms()

    def replica(replica_id: int, end: int) -> dict[str, Any]:
        if replica_id == node.id:
            return {"replica_id": replica_id, "log_end_offset": end, "last_fetch_timestamp": now_wall,
                    "last_caught_up_timestamp": now_wall}
        last = fetched.get(replica_id)
        wall = -1 if last is None else now_wall - (node.now_ms - last)
        caught_up = wall if end >= node.high_watermark else -1
        return {"replica_id": replica_id, "log_end_offset": end, "last_fetch_timestamp": wall,
                "last_caught_up_timestamp": caught_up}

    ends = node.replica_end_offsets()
    ends[node.id] = node.log_end_offset
    voters = [replica(v, ends.get(v, -1)) for v in sorted(node.voters)]
    observers = [replica(o, end) for o, end in sorted(ends.items()) if o not in node.voters]
    nodes = [{"node_id": v, "listeners": [{"name": "CONTROLLER", "host": a.host, "port": a.port}]}
             for v, a in sorted(quorum.transport.voters.items())]
    return {"error_code": 0, "error_message": None, "nodes": nodes, "topics": [{
        "topic_name": wire.METADATA_TOPIC,
        "partitions": [{"partition_index": 0, "error_code": 0, "error_message": None, "leader_id": node.id,
                        "leader_epoch": node.epoch, "high_watermark": node.high_watermark,
                        "current_voters": voters, "observers": observers}],
    }]}


def _describe_quorum_error(code: ErrorCode, message: str) -> Body:
    return {"error_code": code, "error_message": message, "topics": [], "nodes": []}


async def handle_controller_fetch(broker: QuorumHost, ctx: RequestContext, req: Body) -> Body | None:
    """Fetch on a dedicated controller: only ``__cluster_metadata`` lives here."""
    if not is_metadata_fetch(req):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "session_id": 0,
                "responses": []}
    return await handle_raft_request(ApiKey.FETCH, broker, ctx, req)


async def handle_controller_api_versions(broker: QuorumHost, ctx: RequestContext, req: Body) -> Body:
    return dict(broker.dispatcher.supported_versions(), throttle_time_ms=0)
