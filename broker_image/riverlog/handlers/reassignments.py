"""AlterPartitionReassignments (45) and ListPartitionReassignments (46), decided by the
controller (``controller/reassignment.py``); this module only translates the wire format.
With an authorizer they need ALTER (resp. DESCRIBE) on the cluster, as in Kafka."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..protocol.errors import ErrorCode
from ..server.dispatch import RequestContext
from .authorize import DENIED_MESSAGE, Operation, on_cluster
from .common import Body

if TYPE_CHECKING:
    from .host import BrokerHost

CLUSTER_DENIED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED


async def handle_alter_partition_reassignments(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    allow_rf_change = bool(req.get("allow_replication_factor_change", True)) if ctx.version >= 1 else True
    if not on_cluster(broker, ctx, Operation.ALTER):
        return {"throttle_time_ms": 0, "allow_replication_factor_change": allow_rf_change,
                "error_code": CLUSTER_DENIED, "error_message": DENIED_MESSAGE[CLUSTER_DENIED], "responses": []}
    items = [(t["name"], p["partition_index"], p["replicas"]) for t in req["topics"] for p in t["partitions"]]
    results = await broker.controller.alter_partition_reassignments(
        items, allow_replication_factor_change=allow_rf_change)
    by_topic: dict[str, list[Body]] = {}
    for result in results:
        by_topic.setdefault(result.topic, []).append({
            "partition_index": result.partition, "error_code": result.error,
            "error_message": result.message if result.error else None})
    return {"throttle_time_ms": 0, "allow_replication_factor_change": allow_rf_change,
            "error_code": ErrorCode.NONE, "error_message": None,
            "responses": [{"name": name, "partitions": parts} for name, parts in by_topic.items()]}


async def handle_list_partition_reassignments(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    if not on_cluster(broker, ctx, Operation.DESCRIBE):
        return {"throttle_time_ms": 0, "error_code": CLUSTER_DENIED, "error_message": DENIED_MESSAGE[CLUSTER_DENIED],
                "topics": []}
    requested = req.get("topics")
    wanted = None if requested is None else [(t["name"], t["partition_indexes"]) for t in requested]
    ongoing = await broker.controller.list_partition_reassignments(wanted)
    by_topic: dict[str, list[Body]] = {}
    for item in ongoing:
        by_topic.setdefault(item.topic, []).append({
            "partition_index": item.partition, "replicas": list(item.replicas),
            "adding_replicas": list(item.adding), "removing_replicas": list(item.removing)})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
            "topics": [{"name": name, "partitions": parts} for name, parts in by_topic.items()]}
