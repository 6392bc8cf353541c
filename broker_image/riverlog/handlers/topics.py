"""CreateTopics, DeleteTopics and CreatePartitions, decided by the controller.

With an authorizer, as Kafka's controller checks them: creating needs CREATE on the cluster or
the topic (else TOPIC_AUTHORIZATION_FAILED, "Authorization failed."), and the created topic's
configs are returned only with DESCRIBE_CONFIGS on it; deleting needs DELETE on the cluster or
the topic, and a topic the principal may not even DESCRIBE is TOPIC_AUTHORIZATION_FAILED whether
it exists or not; adding partitions needs ALTER on the topic.
"""

from __future__ import annotations

import uuid
from collections import Counter
from typing import TYPE_CHECKING

from ..controller.topic_ops import NewTopic
from ..protocol.errors import ErrorCode
from ..protocol.primitives import ZERO_UUID
from ..server.dispatch import RequestContext
from ..topic_config import TOPIC_CONFIGS, ConfigSource, effective_configs
from .authorize import CLUSTER_NAME, DENIED_MESSAGE, Operation, ResourceType, allowed, on_topic
from .common import Body, error_message

if TYPE_CHECKING:
    from .host import BrokerHost


async def handle_create_topics(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    cfg = broker.config
    counts = Counter(t["name"] for t in req["topics"])
    duplicates = {name for name, n in counts.items() if n > 1}
    requests = [
        NewTopic(
            t["name"], t["num_partitions"], t["replication_factor"],
            {a["partition_index"]: a["broker_ids"] for a in t["assignments"]},
            {c["name"]: c["value"] for c in t["configs"]},
        )
        for t in req["topics"] if t["name"] not in duplicates
    ]
    denied: list[str] = []
    if not allowed(broker, ctx, Operation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME, log_denial=False):
        denied = [new.name for new in requests if not on_topic(broker, ctx, Operation.CREATE, new.name)]
        requests = [new for new in requests if new.name not in denied]
    outcomes = await broker.controller.create_topics(
        requests, validate_only=bool(req.get("validate_only")),
        default_partitions=cfg.get_int("num.partitions"),
        default_replication=cfg.get_int("default.replication.factor"),
    )
    results = []
    for new, outcome in zip(requests, outcomes, strict=True):
        result: Body = {
            "name": new.name, "topic_id": outcome.topic_id or ZERO_UUID, "error_code": outcome.error,
            "error_message": error_message(outcome.error, outcome.message),
            "num_partitions": outcome.num_partitions, "replication_factor": outcome.replication_factor,
        }
        if outcome.error == ErrorCode.NONE and not allowed(broker, ctx, Operation.DESCRIBE_CONFIGS,
                                                           ResourceType.TOPIC, new.name, log_denial=False):
            result.update(configs=None, topic_config_error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        elif outcome.error == ErrorCode.NONE:
            overrides = {k: v for k, v in new.configs.items() if v is not None}
            values = effective_configs(overrides, cfg)
            result["configs"] = [
                {"name": name, "value": values[name], "read_only": False, "is_sensitive": False,
                 "config_source": ConfigSource.DYNAMIC_TOPIC_CONFIG if name in overrides
                 else ConfigSource.DEFAULT_CONFIG}
                for name in TOPIC_CONFIGS
            ]
        else:
            result["configs"] = None
        results.append(result)
    for name in duplicates:
        results.append({"name": name, "error_code": ErrorCode.INVALID_REQUEST,
                        "error_message": "Create topics request from client contains the same topic twice",
                        "configs": None})
    results.extend({"name": name, "topic_id": ZERO_UUID, "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                    "error_message": "Authorization failed.", "num_partitions": -1, "replication_factor": -1,
                    "configs": None} for name in denied)
    return {"throttle_time_ms": 0, "topics": results}


async def handle_delete_topics(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    if not broker.config.get_bool("delete.topic.enable"):
        items_off = req.get("topics") or [{"name": n} for n in req.get("topic_names", [])]
        return {"throttle_time_ms": 0, "responses": [
            {"name": t.get("name"), "topic_id": t.get("topic_id") or ZERO_UUID,
             "error_code": ErrorCode.TOPIC_DELETION_DISABLED, "error_message": "delete.topic.enable is false"}
            for t in items_off]}
    items: list[tuple[str | None, uuid.UUID | None]]
    if ctx.version >= 6:
        items = [(t.get("name"), t.get("topic_id") if t.get("topic_id") != ZERO_UUID else None)
                 for t in req["topics"]]
    else:
        items = [(name, None) for name in req["topic_names"]]
    before = broker.image
    responses = []
    if not allowed(broker, ctx, Operation.DELETE, ResourceType.CLUSTER, CLUSTER_NAME, log_denial=False):
        permitted: list[tuple[str | None, uuid.UUID | None]] = []
        for name, topic_id in items:
            known = name if name is not None else before.topic_ids.get(topic_id) if topic_id else None
            if known is None:
                permitted.append((name, topic_id))  # an unknown id: UNKNOWN_TOPIC_ID from the controller
            elif not on_topic(broker, ctx, Operation.DESCRIBE, known):
                responses.append({"name": name, "topic_id": topic_id or ZERO_UUID,
                                  "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                  "error_message": DENIED_MESSAGE[ErrorCode.TOPIC_AUTHORIZATION_FAILED]})
            elif not on_topic(broker, ctx, Operation.DELETE, known):
                responses.append({"name": known, "topic_id": topic_id or ZERO_UUID,
                                  "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                  "error_message": DENIED_MESSAGE[ErrorCode.TOPIC_AUTHORIZATION_FAILED]})
            else:
                permitted.append((name, topic_id))
        items = permitted
    outcomes = await broker.controller.delete_topics(items)
    for (name, topic_id), outcome in zip(items, outcomes, strict=True):
        resolved = name
        if resolved is None and outcome.topic_id is not None:
            resolved = before.topic_ids.get(outcome.topic_id)
        responses.append({
            "name": resolved, "topic_id": outcome.topic_id or topic_id or ZERO_UUID,
            "error_code": outcome.error, "error_message": error_message(outcome.error, outcome.message),
        })
    return {"throttle_time_ms": 0, "responses": responses}


async def handle_create_partitions(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    denied = [t["name"] for t in req["topics"] if not on_topic(broker, ctx, Operation.ALTER, t["name"])]
    items = [
        (t["name"], t["count"], [a["broker_ids"] for a in t["assignments"]] if t.get("assignments") else None)
        for t in req["topics"] if t["name"] not in denied
    ]
    outcomes = await broker.controller.create_partitions(items, validate_only=bool(req.get("validate_only")))
    return {"throttle_time_ms": 0, "results": [
        {"name": name, "error_code": o.error, "error_message": error_message(o.error, o.message)}
        for (name, _, _), o in zip(items, outcomes, strict=True)
    ] + [{"name": name, "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
          "error_message": DENIED_MESSAGE[ErrorCode.TOPIC_AUTHORIZATION_FAILED]} for name in denied]}
