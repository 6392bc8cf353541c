"""KIP-848 consumer group APIs: ConsumerGroupHeartbeat and ConsumerGroupDescribe.

The request checks are Kafka's (``throwIfConsumerGroupHeartbeatRequestIsInvalid``: INVALID_REQUEST
with Kafka's messages, UNSUPPORTED_ASSIGNOR, INVALID_REGULAR_EXPRESSION); the protocol itself is
the group coordinator's (``coordinator/consumer_membership.py``). As Kafka: READ on the group for a
heartbeat, DESCRIBE for a describe, and DESCRIBE on every subscribed topic name (otherwise
TOPIC_AUTHORIZATION_FAILED: a client may not learn of topics it cannot describe); a regex
subscription takes only the matching topics the member's principal may describe (as Kafka's).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..coordinator.consumer_group import LEAVE_EPOCH, LEAVE_STATIC_EPOCH
from ..coordinator.consumer_membership import HeartbeatRequest, heartbeat_error
from ..coordinator.consumer_records import Assignment
from ..coordinator.shard import AUTHORIZED_OPERATIONS_OMITTED, GROUP_AUTHORIZED_OPERATIONS, GroupShard
from ..coordinator.topic_regex import InvalidRegex, compile_regex
from ..protocol.errors import ErrorCode, KafkaError
from ..security.acl import ResourceType
from ..server.dispatch import RequestContext
from .authorize import Operation, allowed, on_group, on_topic
from .common import Body
from .groups import client_host

if TYPE_CHECKING:
    from .host import BrokerHost

# ConsumerGroupHeartbeat v1+: the client generates its member id (KIP-1082).
MIN_VERSION_CLIENT_MEMBER_ID = 1


class _Invalid(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


def _validate(broker: BrokerHost, version: int, req: Body) -> None:
    def require(condition: bool, message: str, code: ErrorCode = ErrorCode.INVALID_REQUEST) -> None:
        if not condition:
            raise _Invalid(code, message)

    require(bool(req["group_id"]), "GroupId can't be empty.")
    require(req.get("instance_id") != "", "InstanceId can't be empty.")
    require(req.get("rack_id") != "", "RackId can't be empty.")
    epoch = req["member_epoch"]
    if version >= MIN_VERSION_CLIENT_MEMBER_ID:
        require(bool(req["member_id"]), "MemberId can't be empty.")
    if epoch > 0 or epoch == LEAVE_EPOCH:
        require(bool(req["member_id"]), "MemberId can't be empty.")
    elif epoch == 0:
        require(req["rebalance_timeout_ms"] != -1, "RebalanceTimeoutMs must be provided in first request.")
        require(req["topic_partitions"] == [], "TopicPartitions must be empty when (re-)joining.")
        require(req["subscribed_topic_names"] is not None or req.get("subscribed_topic_regex") is not None,
                "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
    elif epoch == LEAVE_STATIC_EPOCH:
        require(bool(req["member_id"]), "MemberId can't be empty.")
        require(req.get("instance_id") is not None, "InstanceId can't be null.")
    else:
        raise _Invalid(ErrorCode.INVALID_REQUEST, "MemberEpoch is invalid.")
    assignor = req.get("server_assignor")
    assignors = broker.coordinator.config.consumer_assignors
    require(assignor is None or assignor in assignors,
            f"ServerAssignor {assignor} is not supported. Supported assignors: {', '.join(assignors)}.",
            ErrorCode.UNSUPPORTED_ASSIGNOR)
    regex = req.get("subscribed_topic_regex")
    if regex is not None:
        try:
            compile_regex(regex)
        except InvalidRegex as exc:
            raise _Invalid(ErrorCode.INVALID_REGULAR_EXPRESSION, f"SubscribedTopicRegex `{regex}` is not a valid "
                                                                  f"regular expression: {exc}.") from exc


def _owned(entries: list[Body] | None) -> Assignment | None:
    if entries is None:
        return None
    out: Assignment = {}
    for e in entries:
        out[e["topic_id"]] = out.get(e["topic_id"], frozenset()) | frozenset(e["partitions"])
    return out


async def handle_consumer_group_heartbeat(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    body: Body
    if not on_group(broker, ctx, Operation.READ, req["group_id"]):
        body = heartbeat_error(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    else:
        try:
            _validate(broker, ctx.version, req)
        except _Invalid as exc:
            return {"throttle_time_ms": 0, **heartbeat_error(exc.code, exc.message)}
        names = req["subscribed_topic_names"]
        if names and not all(on_topic(broker, ctx, Operation.DESCRIBE, name) for name in set(names)):
            return {"throttle_time_ms": 0, **heartbeat_error(ErrorCode.TOPIC_AUTHORIZATION_FAILED)}
        request = HeartbeatRequest(
            group_id=req["group_id"], member_id=req["member_id"], member_epoch=req["member_epoch"],
            instance_id=req.get("instance_id"), rack_id=req.get("rack_id"),
            rebalance_timeout_ms=req["rebalance_timeout_ms"],
            subscribed_topic_names=tuple(names) if names is not None else None,
            subscribed_topic_regex=req.get("subscribed_topic_regex"), server_assignor=req.get("server_assignor"),
            owned=_owned(req["topic_partitions"]), client_id=ctx.header.client_id or "", client_host=client_host(ctx),
            may_describe=(lambda name: allowed(broker, ctx, Operation.DESCRIBE, ResourceType.TOPIC, name,
                                               log_denial=False)) if broker.access.enabled else None,
        )
        try:
            body = await broker.coordinator.call(request.group_id,
                                                 lambda s, token: s.consumer_group_heartbeat(token, request))
        except KafkaError as exc:
            body = heartbeat_error(exc.code)
    return {"throttle_time_ms": 0, **body}


def _describe_error(group_id: str, code: ErrorCode, message: str | None = None) -> Body:
    return {"error_code": code, "error_message": message, "group_id": group_id, "group_state": "", "group_epoch": 0,
            "assignment_epoch": 0, "assignor_name": "", "members": [],
            "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}


def describe_modern_groups(broker: BrokerHost, ctx: RequestContext, req: Body,
                           describe: Callable[[GroupShard, list[str], int], list[Body]]) -> Body:
    """ConsumerGroupDescribe and ShareGroupDescribe, whose answers share one shape: DESCRIBE on
    each group, then ``describe`` (the shard's method for that kind of group) where it lives."""
    operations = GROUP_AUTHORIZED_OPERATIONS if req.get("include_authorized_operations") \
        else AUTHORIZED_OPERATIONS_OMITTED
    groups: list[Body] = []
    for group_id in req["group_ids"]:
        if not on_group(broker, ctx, Operation.DESCRIBE, group_id):
            groups.append(_describe_error(group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED))
        elif not group_id:
            groups.append(_describe_error(group_id, ErrorCode.INVALID_GROUP_ID))
        else:
            try:
                shard = broker.coordinator.shard_for(group_id)
            except KafkaError as exc:
                groups.append(_describe_error(group_id, exc.code))
                continue
            groups.extend(describe(shard, [group_id], operations))
    return {"throttle_time_ms": 0, "groups": groups}


async def handle_consumer_group_describe(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    return describe_modern_groups(broker, ctx, req, GroupShard.describe_consumer_groups)
