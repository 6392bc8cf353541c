"""KIP-932 share group APIs of the group coordinator: ShareGroupHeartbeat, ShareGroupDescribe,
DescribeShareGroupOffsets, AlterShareGroupOffsets and DeleteShareGroupOffsets.

The request checks are Kafka's (``throwIfShareGroupHeartbeatRequestIsInvalid``: INVALID_REQUEST
with Kafka's messages); the protocol is the group coordinator's (``coordinator/share_membership.py``).
As Kafka: READ on the group for a heartbeat, DESCRIBE for a describe. DescribeShareGroupOffsets
answers each partition's share-partition start offset from the share coordinator (through the
leader's persister); a null topic list means the topics the group's members subscribe to
(Kafka: the topics whose share state it initialized); the lag (KIP-1226) is the partition's high
watermark, asked of its leader, less the start offset and the records done past it.
AlterShareGroupOffsets, on an empty group only (NON_EMPTY_GROUP otherwise), starts each named
share-partition afresh at the given offset in a new state epoch (InitializeShareGroupState): the
leaders read it again when the next share session opens. DeleteShareGroupOffsets, likewise on an
empty group, drops the state of every partition of the named topics: the group starts on them
again as ``share.auto.offset.reset`` says.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from ..coordinator.shard import GroupShard
from ..coordinator.share_group import LEAVE_EPOCH
from ..coordinator.share_membership import share_heartbeat_error
from ..protocol.errors import ErrorCode, KafkaError
from ..server.dispatch import RequestContext
from ..share.persister import PersistedState
from .authorize import Operation, on_group, on_topic
from .common import Body
from .consumer_groups import describe_modern_groups
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


async def handle_share_group_describe(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    return describe_modern_groups(broker, ctx, req, GroupShard.describe_share_groups)


async def handle_describe_share_group_offsets(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    groups: list[Body] = []
    for g in req["groups"]:
        group_id = g["group_id"]

        def failed(code: ErrorCode, message: str | None = None, gid: str = group_id) -> Body:
            return {"group_id": gid, "topics": [], "error_code": code, "error_message": message}

        if not on_group(broker, ctx, Operation.DESCRIBE, group_id):
            groups.append(failed(ErrorCode.GROUP_AUTHORIZATION_FAILED))
            continue
        try:
            shard = broker.coordinator.shard_for(group_id)
        except KafkaError as exc:
            groups.append(failed(exc.code))
            continue
        group = shard.share_groups.get(group_id)
        if group is None:
            groups.append(failed(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group."))
            continue
        wanted = g["topics"]
        if wanted is None:
            wanted = [{"topic_name": name, "partitions": None} for name in sorted(group.subscribed_topics)]
        groups.append({"group_id": group_id, "error_code": ErrorCode.NONE, "error_message": None,
                       "topics": [await _describe_topic_offsets(broker, ctx, group_id, t) for t in wanted]})
    return {"throttle_time_ms": 0, "groups": groups}


async def _lag(broker: BrokerHost, topic: str, index: int, state: PersistedState | None) -> int:
    """Records up to the high watermark not yet done (KIP-1226); -1 when the state does not count
    what is done past its start or the partition's leader cannot say its high watermark."""
    if state is None or state.delivery_complete_count < 0:
        return -1
    replica = broker.replicas.get(topic, index)
    if replica is not None and replica.is_leader:
        high_watermark: int | None = replica.high_watermark
    else:
        leader = broker.image.topics[topic].partitions[index].leader
        persister = broker.share_partitions.persister
        high_watermark = None if leader < 0 or persister is None else \
            await persister.high_watermark(leader, topic, index)
    if high_watermark is None:
        return -1
    return max(0, high_watermark - state.start_offset - state.delivery_complete_count)


async def _describe_topic_offsets(broker: BrokerHost, ctx: RequestContext, group_id: str, wanted: Body) -> Body:
    name = wanted["topic_name"]
    topic = broker.image.topics.get(name)
    indexes = wanted["partitions"]
    if topic is None or not on_topic(broker, ctx, Operation.DESCRIBE, name):
        code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if topic is None else ErrorCode.TOPIC_AUTHORIZATION_FAILED
        return {"topic_name": name, "topic_id": uuid.UUID(int=0), "partitions": [
            {"partition_index": i, "start_offset": -1, "leader_epoch": -1, "lag": -1, "error_code": code,
             "error_message": None} for i in indexes or []]}
    persister = broker.share_partitions.persister
    parts = []
    for index in indexes if indexes is not None else sorted(topic.partitions):
        if index not in topic.partitions:
            parts.append({"partition_index": index, "start_offset": -1, "leader_epoch": -1, "lag": -1,
                          "error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "error_message": None})
            continue
        code, state = (ErrorCode.NONE, None) if persister is None else \
            await persister.summary(group_id, topic.topic_id, index)
        lag = await _lag(broker, name, index, state)
        parts.append({"partition_index": index, "start_offset": state.start_offset if state is not None else -1,
                      "leader_epoch": topic.partitions[index].leader_epoch, "lag": lag,
                      "error_code": code, "error_message": None})
    return {"topic_name": name, "topic_id": topic.topic_id, "partitions": parts}


def _empty_share_group_error(broker: BrokerHost, ctx: RequestContext, group_id: str,
                             operation: Operation) -> tuple[ErrorCode, str | None] | None:
    """Why the offsets of ``group_id`` cannot be changed now, or None: they can."""
    if not on_group(broker, ctx, operation, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, None
    try:
        shard = broker.coordinator.shard_for(group_id)
    except KafkaError as exc:
        return exc.code, None
    group = shard.share_groups.get(group_id)
    if group is None and (group_id in shard.groups or group_id in shard.consumer_groups):
        return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group."
    if group is not None and group.members:
        return ErrorCode.NON_EMPTY_GROUP, "The group is not empty."
    return None


async def handle_alter_share_group_offsets(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    group_id = req["group_id"]
    refused = _empty_share_group_error(broker, ctx, group_id, Operation.READ)
    if refused is not None:
        return {"throttle_time_ms": 0, "error_code": refused[0], "error_message": refused[1], "responses": []}
    persister = broker.share_partitions.persister
    responses = []
    for t in req["topics"]:
        name = t["topic_name"]
        topic = broker.image.topics.get(name)
        parts = []
        for p in t["partitions"]:
            index = p["partition_index"]
            if topic is None or index not in topic.partitions:
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif not on_topic(broker, ctx, Operation.READ, name):
                code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif persister is None:
                code = ErrorCode.NONE
            else:
                code, state = await persister.summary(group_id, topic.topic_id, index)
                if code == ErrorCode.NONE:
                    epoch = state.state_epoch + 1 if state is not None else 0
                    code = await persister.initialize(group_id, topic.topic_id, index, epoch, p["start_offset"])
            parts.append({"partition_index": index, "error_code": code, "error_message": None})
        responses.append({"topic_name": name, "topic_id": topic.topic_id if topic is not None else uuid.UUID(int=0),
                          "partitions": parts})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None, "responses": responses}


async def handle_delete_share_group_offsets(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    group_id = req["group_id"]
    refused = _empty_share_group_error(broker, ctx, group_id, Operation.DELETE)
    if refused is not None:
        return {"throttle_time_ms": 0, "error_code": refused[0], "error_message": refused[1], "responses": []}
    persister = broker.share_partitions.persister
    responses = []
    for t in req["topics"]:
        name = t["topic_name"]
        topic = broker.image.topics.get(name)
        code = ErrorCode.NONE
        if topic is None:
            code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        elif not on_topic(broker, ctx, Operation.READ, name):
            code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif persister is not None:
            for index in sorted(topic.partitions):
                result = await persister.delete(group_id, topic.topic_id, index)
                if result != ErrorCode.NONE:
                    code = result
        responses.append({"topic_name": name, "topic_id": topic.topic_id if topic is not None else uuid.UUID(int=0),
                          "error_code": code, "error_message": None})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None, "responses": responses}
