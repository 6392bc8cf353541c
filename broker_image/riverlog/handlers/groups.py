"""Consumer group membership APIs: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
ListGroups, DescribeGroups and DeleteGroups.

The handlers translate between the wire versions and the group coordinator
(``riverlog.coordinator``), which decides as Kafka's does. Requests for a group whose offsets
partition this broker does not lead get NOT_COORDINATOR; while that partition loads,
COORDINATOR_LOAD_IN_PROGRESS.

With an authorizer, as Kafka: FindCoordinator needs DESCRIBE on the group (or transactional id);
JoinGroup, SyncGroup, Heartbeat and LeaveGroup READ on the group; DescribeGroups DESCRIBE and
DeleteGroups DELETE, group by group; ListGroups lists every group with DESCRIBE on the cluster,
else those the principal may DESCRIBE.
"""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, Any

from ..coordinator.membership import JoinRequest, LeavingMember, SyncRequest, join_error, sync_error
from ..coordinator.shard import AUTHORIZED_OPERATIONS_OMITTED, GroupShard
from ..protocol.errors import ErrorCode, KafkaError
from ..server.dispatch import RequestContext
from .authorize import DENIED_MESSAGE, Operation, ResourceType, allowed, on_cluster, on_group, on_transactional_id
from .common import Body, client_endpoint

if TYPE_CHECKING:
    from .host import BrokerHost

log = logging.getLogger(__name__)

KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1
KEY_TYPE_SHARE = 2
# What Kafka's Errors.message() says for the codes FindCoordinator v1-3 can return.
_MESSAGES = {
    ErrorCode.NONE: "NONE",
    ErrorCode.COORDINATOR_NOT_AVAILABLE: "The coordinator is not available.",
    **DENIED_MESSAGE,
    ErrorCode.INVALID_REQUEST: "This most likely occurs because of a request being malformed by the client "
                               "library or the message was sent to an incompatible broker. See the broker "
                               "logs for more details.",
}


def client_host(ctx: RequestContext) -> str:
    """How Kafka shows a member's host: Java's InetAddress.toString() of the peer, "/<ip>"."""
    return "/" + ctx.connection.peer.rsplit(":", 1)[0]


# FindCoordinator ------------------------------------------------------------------------


async def _find(broker: BrokerHost, ctx: RequestContext, key_type: int, key: str) -> tuple[ErrorCode, int, str, int]:
    if key_type == KEY_TYPE_TRANSACTION and not on_transactional_id(broker, ctx, Operation.DESCRIBE, key):
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1, "", -1
    if key_type == KEY_TYPE_GROUP and not on_group(broker, ctx, Operation.DESCRIBE, key):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, -1, "", -1
    if key_type == KEY_TYPE_TRANSACTION:
        # The leader of the id's __transaction_state partition (the topic is made on first need).
        await broker.transactions.ensure_topic()
        node_id = broker.transactions.coordinator_of(key)
    elif key_type == KEY_TYPE_SHARE:
        # A share-partition's share coordinator ("group:topic id:partition"): inter-broker.
        if not on_cluster(broker, ctx, Operation.CLUSTER_ACTION):
            return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, -1, "", -1
        await broker.share_coordinator.ensure_topic()
        node_id = broker.share_coordinator.coordinator_of(key)
    elif key_type != KEY_TYPE_GROUP:
        return ErrorCode.INVALID_REQUEST, -1, "", -1
    else:
        await broker.coordinator.ensure_offsets_topic()
        node_id = broker.coordinator.coordinator_of(key)
    node = broker.image.brokers.get(node_id) if node_id is not None else None
    endpoint = client_endpoint(broker, ctx, node) if node is not None else None
    if node_id is None or endpoint is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
    return ErrorCode.NONE, node_id, endpoint.host, endpoint.port


async def handle_find_coordinator(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    key_type = req.get("key_type", KEY_TYPE_GROUP)
    if ctx.version >= 4:
        coordinators = []
        for key in req["coordinator_keys"]:
            error, node_id, host, port = await _find(broker, ctx, key_type, key)
            # Kafka leaves the per-key message empty, whatever the error.
            coordinators.append({"key": key, "node_id": node_id, "host": host, "port": port,
                                 "error_code": error, "error_message": ""})
        return {"throttle_time_ms": 0, "coordinators": coordinators}
    error, node_id, host, port = await _find(broker, ctx, key_type, req["key"])
    return {"throttle_time_ms": 0, "error_code": error, "error_message": _MESSAGES.get(error, error.name),
            "node_id": node_id, "host": host, "port": port}


# JoinGroup / SyncGroup / Heartbeat / LeaveGroup -----------------------------------------


def _protocols(entries: list[Body]) -> tuple[tuple[str, bytes], ...]:
    """The member's protocols in preference order; a name listed twice counts once (its first
    entry), so the per-protocol member counts used for protocol selection stay exact."""
    seen: dict[str, bytes] = {}
    for p in entries:
        seen.setdefault(p["name"], bytes(p["metadata"]))
    return tuple(seen.items())


def _session_timeout_ok(broker: BrokerHost, session_timeout_ms: int) -> bool:
    cfg = broker.coordinator.config
    return cfg.min_session_timeout_ms <= session_timeout_ms <= cfg.max_session_timeout_ms


async def handle_join_group(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    member_id = req["member_id"]
    body: Body
    if not on_group(broker, ctx, Operation.READ, req["group_id"]):
        body = join_error(member_id, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    elif not req["group_id"]:
        body = join_error(member_id, ErrorCode.INVALID_GROUP_ID)
    elif not _session_timeout_ok(broker, req["session_timeout_ms"]):
        body = join_error(member_id, ErrorCode.INVALID_SESSION_TIMEOUT)
    else:
        rebalance_timeout = req.get("rebalance_timeout_ms", -1)
        if ctx.version == 0 or rebalance_timeout < 0:
            rebalance_timeout = req["session_timeout_ms"]  # v0 has none: the session timeout stands in
        request = JoinRequest(
            group_id=req["group_id"], member_id=member_id, group_instance_id=req.get("group_instance_id"),
            client_id=ctx.header.client_id or "", client_host=client_host(ctx),
            session_timeout_ms=req["session_timeout_ms"], rebalance_timeout_ms=rebalance_timeout,
            protocol_type=req["protocol_type"],
            protocols=_protocols(req["protocols"]),
            version=ctx.version, reason=req.get("reason"),
        )
        try:
            body = await broker.coordinator.call(request.group_id, lambda s, token: s.join_group(token, request))
        except KafkaError as exc:
            body = join_error(member_id, exc.code)
    return {"throttle_time_ms": 0, **body}


async def handle_sync_group(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    body: Body
    if ctx.version >= 5 and (req.get("protocol_type") is None or req.get("protocol_name") is None):
        body = sync_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)  # mandatory from v5
    elif not on_group(broker, ctx, Operation.READ, req["group_id"]):
        body = sync_error(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    elif not req["group_id"]:
        body = sync_error(ErrorCode.INVALID_GROUP_ID)
    else:
        request = SyncRequest(
            group_id=req["group_id"], generation_id=req["generation_id"], member_id=req["member_id"],
            group_instance_id=req.get("group_instance_id"), protocol_type=req.get("protocol_type"),
            protocol_name=req.get("protocol_name"),
            assignments=tuple((a["member_id"], bytes(a["assignment"])) for a in req["assignments"]),
        )
        try:
            body = await broker.coordinator.call(request.group_id, lambda s, token: s.sync_group(token, request))
        except KafkaError as exc:
            body = sync_error(exc.code)
    return {"throttle_time_ms": 0, **body}


async def handle_heartbeat(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    group_id = req["group_id"]
    if not on_group(broker, ctx, Operation.READ, group_id):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED}
    if not group_id:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.INVALID_GROUP_ID}
    try:
        body = await broker.coordinator.call(group_id, lambda s, token: s.heartbeat(
            token, group_id, req["member_id"], req.get("group_instance_id"), req["generation_id"]))
    except KafkaError as exc:
        # While the group loads, Kafka answers heartbeats blindly: the member keeps its session.
        code = ErrorCode.NONE if exc.code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS else exc.code
        body = {"error_code": code}
    return {"throttle_time_ms": 0, **body}


async def handle_leave_group(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    group_id = req["group_id"]
    if ctx.version >= 3:
        leaving = [LeavingMember(m["member_id"], m.get("group_instance_id"), m.get("reason"))
                   for m in req["members"]]
    else:
        leaving = [LeavingMember(req["member_id"])]
    body: Body
    if not on_group(broker, ctx, Operation.READ, group_id):
        body = {"error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "members": []}
    elif not group_id:
        body = {"error_code": ErrorCode.INVALID_GROUP_ID, "members": []}
    else:
        try:
            body = await broker.coordinator.call(group_id, lambda s, token: s.leave_group(token, group_id, leaving))
        except KafkaError as exc:
            body = {"error_code": exc.code, "members": []}
    if ctx.version < 3:
        # One member, one error: the member's own if the request as a whole went through.
        error = body["error_code"]
        if error == ErrorCode.NONE and body["members"]:
            error = body["members"][0]["error_code"]
        return {"throttle_time_ms": 0, "error_code": error}
    return {"throttle_time_ms": 0, **body}


# ListGroups / DescribeGroups / DeleteGroups ---------------------------------------------


async def handle_list_groups(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    coordinator = broker.coordinator
    if coordinator.any_loading():
        return {"throttle_time_ms": 0, "error_code": ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, "groups": []}
    states = req.get("states_filter") or []
    types = req.get("types_filter") or []
    groups = [g for shard in coordinator.loaded_shards() for g in shard.list_groups(states, types)]
    if not on_cluster(broker, ctx, Operation.DESCRIBE):
        groups = [g for g in groups
                  if allowed(broker, ctx, Operation.DESCRIBE, ResourceType.GROUP, g["group_id"], log_denial=False)]
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "groups": groups}


def _group_error(group_id: str, code: ErrorCode) -> Body:
    return {"error_code": code, "error_message": None, "group_id": group_id, "group_state": "",
            "protocol_type": "", "protocol_data": "", "members": [],
            "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}


def _shards_by_group(broker: BrokerHost, group_ids: list[str]) -> dict[str, GroupShard | ErrorCode]:
    out: dict[str, GroupShard | ErrorCode] = {}
    for group_id in group_ids:
        try:
            out[group_id] = broker.coordinator.shard_for(group_id)
        except KafkaError as exc:
            out[group_id] = exc.code
    return out


async def handle_describe_groups(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    include_ops = bool(req.get("include_authorized_operations")) and ctx.version >= 3
    described: list[Body] = []
    permitted = [g for g in req["groups"] if on_group(broker, ctx, Operation.DESCRIBE, g)]
    described.extend(_group_error(g, ErrorCode.GROUP_AUTHORIZATION_FAILED) for g in req["groups"] if g not in permitted)
    for group_id, shard in _shards_by_group(broker, permitted).items():
        if isinstance(shard, ErrorCode):
            described.append(_group_error(group_id, shard))
        else:
            described.extend(shard.describe_groups([group_id], ctx.version, include_ops))
    return {"throttle_time_ms": 0, "groups": described}


async def handle_delete_groups(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    group_ids = list(dict.fromkeys(req["groups_names"]))  # Kafka answers duplicates once
    results: list[Body] = []
    by_partition: dict[int, list[str]] = {}
    permitted = [g for g in group_ids if on_group(broker, ctx, Operation.DELETE, g)]
    results.extend({"group_id": g, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED}
                   for g in group_ids if g not in permitted)
    for group_id, shard in _shards_by_group(broker, permitted).items():
        if isinstance(shard, ErrorCode):
            results.append({"group_id": group_id, "error_code": shard})
        else:
            by_partition.setdefault(shard.partition, []).append(group_id)
    for ids in by_partition.values():
        results.extend(await _delete_on_shard(broker, ids))
    return {"throttle_time_ms": 0, "results": results}


async def _delete_on_shard(broker: BrokerHost, group_ids: list[str]) -> list[Body]:
    """Delete groups that share one offsets partition (one write for all of them); a share group's
    share state goes too, through the share coordinator (best effort: a failure is logged)."""
    state_topics: dict[str, list[tuple[uuid.UUID, int]]] = {}
    try:
        shard = broker.coordinator.shard_for(group_ids[0])
        for g in group_ids:
            share_group = shard.share_groups.get(g)
            if share_group is not None:
                state_topics[g] = [(tid, count) for tid, (_, count) in share_group.state_topics.items()]
        body: dict[str, Any] = await broker.coordinator.call(
            group_ids[0], lambda s, token: s.delete_groups(token, group_ids))
    except KafkaError as exc:
        return [{"group_id": g, "error_code": exc.code} for g in group_ids]
    results: list[Body] = body["results"]
    persister = broker.share_partitions.persister
    for result in results:
        topics = state_topics.get(result["group_id"])
        if persister is None or not topics or result["error_code"] != ErrorCode.NONE:
            continue
        for topic_id, count in topics:
            if broker.image.topic_by_id(topic_id) is None:
                continue
            for index in range(count):
                code = await persister.delete(result["group_id"], topic_id, index)
                if code != ErrorCode.NONE:
                    log.warning("share group %s deleted, but not its share state of %s-%d: %s",
                                result["group_id"], topic_id, index, code.name)
    return results
