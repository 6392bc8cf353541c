"""Metadata: brokers, controller and topic/partition leadership, from the metadata image.

Topics named in a Metadata request are created on the fly when the client allows it and
``auto.create.topics.enable`` is on, as Kafka does.
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
from .common import Body

if TYPE_CHECKING:
    from ..broker import Broker

log = logging.getLogger(__name__)

# The "not requested" marker of authorized-operations fields.
OPS_NOT_REQUESTED = -(1 << 31)


def broker_entries(broker: Broker, image: MetadataImage) -> list[Body]:
    out = []
    for b in sorted(image.brokers.values(), key=lambda b: b.broker_id):
        if b.fenced:
            continue
        ep = b.endpoint(broker.config.get("inter.broker.listener.name")) or b.endpoint()
        if ep is None:
            continue
        out.append({"node_id": b.broker_id, "host": ep.host, "port": ep.port, "rack": b.rack})
    return out


def topic_entry(topic: TopicImage, image: MetadataImage) -> Body:
    live = {b.broker_id for b in image.brokers.values() if not b.fenced}
    partitions = []
    for part in sorted(topic.partitions.values(), key=lambda p: p.partition):
        leader_ok = part.leader in live
        partitions.append({
            "error_code": ErrorCode.NONE if leader_ok else ErrorCode.LEADER_NOT_AVAILABLE,
            "partition_index": part.partition,
            "leader_id": part.leader if leader_ok else -1,
            "leader_epoch": part.leader_epoch,
            "replica_nodes": list(part.replicas),
            "isr_nodes": list(part.isr),
            "offline_replicas": [r for r in part.replicas if r not in live],
        })
    return {
        "error_code": ErrorCode.NONE,
        "name": topic.name,
        "topic_id": topic.topic_id,
        "is_internal": topic.internal,
        "partitions": partitions,
        "topic_authorized_operations": OPS_NOT_REQUESTED,
    }


async def handle_metadata(broker: Broker, ctx: RequestContext, req: Body) -> Body:
    requested: list[Any] | None = req.get("topics")
    if ctx.version == 0 and requested == []:
        requested = None  # v0: an empty list means "all topics"
    allow_create = req.get("allow_auto_topic_creation", True) and broker.config.get_bool(
        "auto.create.topics.enable"
    )
    image = broker.image
    topics: list[Body] = []
    if requested is None:
        topics = [topic_entry(t, image) for t in sorted(image.topics.values(), key=lambda t: t.name)]
    else:
        missing = [
            r["name"] for r in requested
            if r.get("name") and r["name"] not in image.topics and not topic_name_error(r["name"])
        ]
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
        for r in requested:
            name, topic_id = r.get("name"), r.get("topic_id")
            topic = image.topics.get(name) if name else (
                image.topic_by_id(topic_id) if topic_id and topic_id != ZERO_UUID else None)
            if topic is not None:
                topics.append(topic_entry(topic, image))
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
        "brokers": broker_entries(broker, image),
        "cluster_id": image.cluster_id,
        "controller_id": broker.controller.controller_id,
        "topics": topics,
        "cluster_authorized_operations": OPS_NOT_REQUESTED,
    }
