"""DescribeCluster, DescribeLogDirs and ElectLeaders.

With an authorizer, as Kafka: DescribeCluster is answered to anyone; DescribeLogDirs needs
DESCRIBE on the cluster (else no results and CLUSTER_AUTHORIZATION_FAILED), ElectLeaders ALTER
(else CLUSTER_AUTHORIZATION_FAILED, on every partition too).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from ..protocol.errors import ErrorCode
from ..server.dispatch import RequestContext
from .authorize import DENIED_MESSAGE, Operation, on_cluster
from .common import Body, client_endpoint
from .metadata import OPS_NOT_REQUESTED

if TYPE_CHECKING:
    from .host import BrokerHost

BROKER_ENDPOINT_TYPE = 1


async def handle_describe_cluster(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    endpoint_type = req.get("endpoint_type", BROKER_ENDPOINT_TYPE)
    if endpoint_type != BROKER_ENDPOINT_TYPE:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
                "error_message": "only broker endpoints (type 1) can be described",
                "endpoint_type": endpoint_type, "cluster_id": broker.image.cluster_id, "controller_id": -1,
                "brokers": [], "cluster_authorized_operations": OPS_NOT_REQUESTED}
    include_fenced = bool(req.get("include_fenced_brokers"))
    brokers = []
    for b in sorted(broker.image.brokers.values(), key=lambda b: b.broker_id):
        if b.fenced and not include_fenced:
            continue
        ep = client_endpoint(broker, ctx, b)
        if ep is None:
            continue
        brokers.append({"broker_id": b.broker_id, "host": ep.host, "port": ep.port, "rack": b.rack,
                        "is_fenced": b.fenced})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
            "endpoint_type": endpoint_type, "cluster_id": broker.image.cluster_id,
            "controller_id": broker.controller.controller_id, "brokers": brokers,
            "cluster_authorized_operations": OPS_NOT_REQUESTED}


async def handle_describe_log_dirs(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    """One result per log directory, as Kafka answers: an offline directory has the error
    KAFKA_STORAGE_ERROR, no partitions and unknown (-1) sizes."""
    if not on_cluster(broker, ctx, Operation.DESCRIBE):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "results": []}
    wanted = req.get("topics")
    selected: dict[str, set[int] | None] | None = None
    if wanted is not None:
        selected = {t["topic"]: set(t["partitions"]) for t in wanted}
    by_dir: dict[Path, dict[str, list[Body]]] = {}
    for (topic, index), p in sorted(broker.replicas.partitions.items()):
        if p.offline:
            continue
        if selected is not None:
            want = selected.get(topic)
            if want is None or index not in want:
                continue
        by_dir.setdefault(p.log.directory.parent, {}).setdefault(topic, []).append({
            "partition_index": index, "partition_size": p.log.size_bytes(),
            "offset_lag": max(0, p.log.log_end_offset - p.high_watermark), "is_future_key": False,
        })
    results = []
    for d in broker.replicas.log_dirs.dirs:
        total = usable = -1
        error = ErrorCode.NONE if d.online else ErrorCode.KAFKA_STORAGE_ERROR
        if d.online:
            try:
                usage = shutil.disk_usage(d.path)
                total, usable = usage.total, usage.free
            except OSError:
                pass
        topics = by_dir.get(d.path, {}) if d.online else {}
        results.append({
            "error_code": error, "log_dir": str(d.path),
            "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()],
            "total_bytes": total, "usable_bytes": usable,
        })
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "results": results}


async def handle_elect_leaders(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    """ElectLeaders: preferred (0) or unclean (1) elections, decided by the controller.

    A null partition list means every partition (what `kafka-leader-election --all-topic-partitions`
    sends); then only partitions that need an election are reported, as Kafka does."""
    election_type = req.get("election_type", 0) if ctx.version >= 1 else 0
    requested: list[Body] | None = req.get("topic_partitions")
    everything = requested is None
    if requested is None:
        items = [(t.name, p) for t in broker.image.topics.values() for p in sorted(t.partitions)]
    else:
        items = [(t["topic"], p) for t in requested for p in t["partitions"]]
    if not on_cluster(broker, ctx, Operation.ALTER):
        denied: dict[str, list[Body]] = {}
        for topic, partition in items:
            denied.setdefault(topic, []).append({
                "partition_id": partition, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "error_message": DENIED_MESSAGE[ErrorCode.CLUSTER_AUTHORIZATION_FAILED]})
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "replica_election_results": [{"topic": t, "partition_result": p} for t, p in denied.items()]}
    outcomes = await broker.controller.elect_leaders(items, election_type)
    by_topic: dict[str, list[Body]] = {}
    for (topic, partition), outcome in zip(items, outcomes, strict=True):
        if everything and outcome.error == ErrorCode.ELECTION_NOT_NEEDED:
            continue
        by_topic.setdefault(topic, []).append({
            "partition_id": partition, "error_code": outcome.error,
            "error_message": outcome.message if outcome.error else None,
        })
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "replica_election_results": [
        {"topic": topic, "partition_result": parts} for topic, parts in by_topic.items()]}
