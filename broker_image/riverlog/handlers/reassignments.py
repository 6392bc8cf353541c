"""AlterPartitionReassignments (45) and ListPartitionReassignments (46), decided by the
controller (``controller/reassignment.py``); this module only translates the wire format."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..protocol.errors import ErrorCode
from ..server.dispatch import RequestContext
from .common import Body

if TYPE_CHECKING:
    from .host import BrokerHost


async def handle_alter_partition_reassignments(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    allow_rf_change = bool(req.get("allow_replication_factor_change", True)) if ctx.version >= 1 else True
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
