"""Metadata: brokers, controller and topic/partition leadership, from the metadata image.

Topics named in a Metadata request are created on the fly when the client allows it and
``auto.create.topics.enable`` is on, as Kafka does.

With an authorizer, as Kafka's: a listing of all topics shows only those the principal may
DESCRIBE; a named topic it may not describe is TOPIC_AUTHORIZATION_FAILED whether or not it
exists (existence does not leak); a missing one is auto-created only with CREATE on the cluster or
the topic, else TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ..controller.image import MetadataImage, TopicImage
from ..controller.topic_ops import NewTopic, topic_name_error
from ..coordinator.placement import GROUP_METADATA_TOPIC
from ..protocol.errors import ErrorCode
from ..protocol.primitives import ZERO_UUID
from ..server.dispatch import RequestContext
from .authorize import Operation, ResourceType, allowed, on_cluster, on_topic
from .common import Body, client_endpoint

if TYPE_CHECKING:
    from .host import BrokerHost

log = logging.getLogger(__name__)

# The "not requested" marker of authorized-operations fields.
OPS_NOT_REQUESTED = -(1 << 31)


def broker_entries(broker: BrokerHost, ctx: RequestContext, image: MetadataImage) -> list[Body]:
    """The live (unfenced) brokers. When none is live, e.g. right after a new controller fenced
    brokers whose heartbeats were still on their way to the old one, this broker lists itself:
    librdkafka drops every broker an empty list leaves out and can then find no coordinator."""
    live_ids = {b.broker_id for b in image.brokers.values() if not b.fenced}
    if not live_ids and broker.node_id in image.brokers:
        live_ids = {broker.node_id}
    out = []
    for b in sorted(image.brokers.values(), key=lambda b: b.broker_id):
        if b.broker_id not in live_ids:
            continue
        ep = client_endpoint(broker, ctx, b)
        if ep is None:
            continue
        out.append({"node_id": b.broker_id, "host": ep.host, "port": ep.port, "rack": b.rack})
    return out


def reachable_brokers(brokers: list[Body]) -> set[int]:
    return {b["node_id"] for b in brokers}


def topic_entry(topic: TopicImage, image: MetadataImage, reachable: set[int] | None = None,
                unreachable_error: ErrorCode = ErrorCode.LISTENER_NOT_FOUND) -> Body:
    """``reachable``: the brokers with an address on the request's listener (None: all). A live
    leader without one is reported as Kafka does: LISTENER_NOT_FOUND (Metadata v6+ and
    DescribeTopicPartitions) or LEADER_NOT_AVAILABLE, with no leader."""
    live = {b.broker_id for b in image.brokers.values() if not b.fenced}
    partitions = []
    for part in sorted(topic.partitions.values(), key=lambda p: p.partition):
        leader_ok = part.leader in live
        error = ErrorCode.NONE if leader_ok else ErrorCode.LEADER_NOT_AVAILABLE
        if leader_ok and reachable is not None and part.leader not in reachable:
            leader_ok, error = False, unreachable_error
        partitions.append({
            "error_code": error,
            "partition_index": part.partition,
            "leader_id": part.leader if leader_ok else -1,
            "leader_epoch": part.leader_epoch,
            "replica_nodes": list(part.replicas),
            "isr_nodes": list(part.isr),
            "offline_replicas": [r for r in part.replicas if r not in live],
            # DescribeTopicPartitions only; Kafka's Java admin needs lists here, never null.
            "eligible_leader_replicas": [],
            "last_known_elr": [],
        })
    return {
        "error_code": ErrorCode.NONE,
        "name": topic.name,
        "topic_id": topic.topic_id,
        "is_internal": topic.internal,
        "partitions": partitions,
        "topic_authorized_operations": OPS_NOT_REQUESTED,
    }


async def handle_metadata(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    requested: list[Any] | None = req.get("topics")
    if ctx.version == 0 and requested == []:
        requested = None  # v0: an empty list means "all topics"
    allow_create = req.get("allow_auto_topic_creation", True) and broker.config.get_bool(
        "auto.create.topics.enable"
    )
    image = broker.image
    denied: set[str] = set()  # named topics the principal may not describe, or not create
    if requested is not None:
        denied = {r["name"] for r in requested
                  if r.get("name") and not on_topic(broker, ctx, Operation.DESCRIBE, r["name"])}
        missing = [
            r["name"] for r in requested
            if r.get("name") and r["name"] not in image.topics and not topic_name_error(r["name"])
            and r["name"] not in denied
        ]
        if missing and allow_create and not on_cluster(broker, ctx, Operation.CREATE):
            uncreatable = {name for name in missing if not on_topic(broker, ctx, Operation.CREATE, name)}
            denied |= uncreatable
            missing = [name for name in missing if name not in uncreatable]
        if GROUP_METADATA_TOPIC in missing and allow_create:
            # The internal offsets topic has its own partition count and compacted config.
            await broker.coordinator.ensure_offsets_topic()
            missing = [name for name in missing if name != GROUP_METADATA_TOPIC]
        if missing and allow_create:
            await broker.controller.create_topics(
                [NewTopic(name) for name in dict.fromkeys(missing)], validate_only=False,
                default_partitions=broker.config.get_int("num.partitions"),
                default_replication=min(broker.config.get_int("default.replication.factor"),
                                        max(1, len(image.brokers))),
            )
            image = broker.image
    # Brokers and leaders as the answer's image has them, by their address on this listener.
    brokers = broker_entries(broker, ctx, image)
    reachable = reachable_brokers(brokers)
    unreachable = ErrorCode.LISTENER_NOT_FOUND if ctx.version >= 6 else ErrorCode.LEADER_NOT_AVAILABLE
    topics: list[Body] = []
    if requested is None:
        topics = [topic_entry(t, image, reachable, unreachable)
                  for t in sorted(image.topics.values(), key=lambda t: t.name)
                  if allowed(broker, ctx, Operation.DESCRIBE, ResourceType.TOPIC, t.name, log_denial=False)]
    else:
        for r in requested:
            name, topic_id = r.get("name"), r.get("topic_id")
            topic = image.topics.get(name) if name else (
                image.topic_by_id(topic_id) if topic_id and topic_id != ZERO_UUID else None)
            if name in denied or (topic is not None and not name
                                  and not on_topic(broker, ctx, Operation.DESCRIBE, topic.name)):
                topics.append({"error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "name": name,
                               "topic_id": topic_id if not name else ZERO_UUID, "partitions": [],
                               "is_internal": False})
            elif topic is not None:
                topics.append(topic_entry(topic, image, reachable, unreachable))
            elif name and topic_name_error(name):
                topics.append({"error_code": ErrorCode.INVALID_TOPIC_EXCEPTION, "name": name,
                               "topic_id": ZERO_UUID, "partitions": []})
            elif name:
                topics.append({"error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "name": name,
                               "topic_id": ZERO_UUID, "partitions": []})
            else:
                topics.append({"error_code": ErrorCode.UNKNOWN_TOPIC_ID, "name": None,
                               "topic_id": topic_id, "partitions": []})
    return {
        "throttle_time_ms": 0,
        "brokers": brokers,
        "cluster_id": image.cluster_id,
        "controller_id": broker.controller.controller_id,
        "topics": topics,
        "cluster_authorized_operations": OPS_NOT_REQUESTED,
    }


MAX_PARTITIONS_PER_RESPONSE = 2000


async def handle_describe_topic_partitions(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    """Kafka 4's paginated topic description (what Admin.describeTopics uses first)."""
    image = broker.image
    limit = max(1, min(req.get("response_partition_limit") or MAX_PARTITIONS_PER_RESPONSE,
                       MAX_PARTITIONS_PER_RESPONSE))
    listing_all = not req["topics"]
    names = [t["name"] for t in req["topics"]] or [
        name for name in image.topics
        if allowed(broker, ctx, Operation.DESCRIBE, ResourceType.TOPIC, name, log_denial=False)]
    cursor = req.get("cursor")
    start_topic, start_partition = (cursor["topic_name"], cursor["partition_index"]) if cursor else ("", 0)
    topics: list[Body] = []
    reachable = reachable_brokers(broker_entries(broker, ctx, image))
    next_cursor: Body | None = None
    budget = limit
    for name in sorted(set(names)):
        if name < start_topic:
            continue
        topic = image.topics.get(name)
        if not listing_all and not on_topic(broker, ctx, Operation.DESCRIBE, name):
            topics.append({"error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "name": name, "topic_id": ZERO_UUID,
                           "partitions": []})
            continue
        if topic is None:
            code = ErrorCode.INVALID_TOPIC_EXCEPTION if topic_name_error(name) else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            topics.append({"error_code": code, "name": name, "topic_id": ZERO_UUID, "partitions": []})
            continue
        if budget == 0:
            next_cursor = {"topic_name": name, "partition_index": 0}
            break
        entry = topic_entry(topic, image, reachable)
        first = start_partition if name == start_topic else 0
        parts = [p for p in entry["partitions"] if p["partition_index"] >= first]
        if len(parts) > budget:
            next_cursor = {"topic_name": name, "partition_index": parts[budget]["partition_index"]}
            parts = parts[:budget]
        entry["partitions"] = parts
        budget -= len(parts)
        topics.append(entry)
        if next_cursor is not None:
            break
    return {"throttle_time_ms": 0, "topics": topics, "next_cursor": next_cursor}
