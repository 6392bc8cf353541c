"""KIP-932 share group membership APIs: ShareGroupHeartbeat and ShareGroupDescribe.

The request checks are Kafka's (``throwIfShareGroupHeartbeatRequestIsInvalid``: INVALID_REQUEST
with Kafka's messages); the protocol is the group coordinator's (``coordinator/share_membership.py``).
As Kafka: READ on the group for a heartbeat, DESCRIBE for a describe.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..coordinator.shard import AUTHORIZED_OPERATIONS_OMITTED, GROUP_AUTHORIZED_OPERATIONS
from ..coordinator.share_group import LEAVE_EPOCH
from ..coordinator.share_membership import share_heartbeat_error
from ..protocol.errors import ErrorCode, KafkaError
from ..server.dispatch import RequestContext
from .authorize import Operation, on_group
from .common import Body
from .groups import client_host

if TYPE_CHECKING:
    from .host import BrokerHost


def _invalid(req: Body) -> str | None:
    """Kafka's message for an invalid heartbeat, or None."""
    if not req["group_id"]:
        return "GroupId can't be empty."
    if not req["member_id"]:
        return "MemberId can't be empty."
    if req.get("rack_id") == "":
        return "RackId can't be empty."
    epoch = req["member_epoch"]
    if epoch == 0:
        if not req["subscribed_topic_names"]:
            return "SubscribedTopicNames must be set in first request."
    elif epoch < LEAVE_EPOCH:
        return "MemberEpoch is invalid."
    return None


async def handle_share_group_heartbeat(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    body: Body
    if not on_group(broker, ctx, Operation.READ, req["group_id"]):
        body = share_heartbeat_error(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    elif (message := _invalid(req)) is not None:
        body = share_heartbeat_error(ErrorCode.INVALID_REQUEST, message)
    else:
        names = req["subscribed_topic_names"]
        args = (req["group_id"], req["member_id"], req["member_epoch"], req.get("rack_id"),
                tuple(names) if names is not None else None, ctx.header.client_id or "", client_host(ctx))
        try:
            body = await broker.coordinator.call(req["group_id"],
                                                 lambda s, token: s.share_group_heartbeat(token, *args))
        except KafkaError as exc:
            body = share_heartbeat_error(exc.code)
    return {"throttle_time_ms": 0, **body}


def _describe_error(group_id: str, code: ErrorCode, message: str | None = None) -> Body:
    return {"error_code": code, "error_message": message, "group_id": group_id, "group_state": "", "group_epoch": 0,
            "assignment_epoch": 0, "assignor_name": "", "members": [],
            "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}


async def handle_share_group_describe(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
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
            groups.extend(shard.describe_share_groups([group_id], operations))
    return {"throttle_time_ms": 0, "groups": groups}
