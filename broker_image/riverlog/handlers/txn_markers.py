"""WriteTxnMarkers: a transaction coordinator has this broker, as partition leader, write the
commit or abort marker ending a producer's transaction in each named partition.

As Kafka does, markers are appended with acks=all and answered once the high watermark passed
them (REQUEST_TIMED_OUT after the request timeout): the coordinator writes CompleteCommit /
CompleteAbort only when every marker is committed. Per partition errors: UNKNOWN_TOPIC_OR_PARTITION
or NOT_LEADER_OR_FOLLOWER (not led here), NOT_ENOUGH_REPLICAS, INVALID_PRODUCER_EPOCH (a marker for
an older producer epoch), TRANSACTION_COORDINATOR_FENCED (an older coordinator than the last
marker's), KAFKA_STORAGE_ERROR.

A committed marker in a ``__consumer_offsets`` partition completes the group coordinator's
pending transactional offsets (``GroupCoordinator.complete_transaction``).

:func:`write_txn_markers` is the request's work without a connection, so the local transaction
coordinator can call it in-process for partitions this broker leads.

With an authorizer, only a principal with CLUSTER_ACTION (another broker) may write markers;
anyone else gets CLUSTER_AUTHORIZATION_FAILED on every partition, as from Kafka.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from ..clock import now_ms
from ..controller.topic_names import GROUP_METADATA_TOPIC
from ..protocol.errors import ErrorCode, KafkaError
from ..server.dispatch import RequestContext
from .authorize import Operation, on_cluster
from .common import Body

if TYPE_CHECKING:
    from .host import BrokerHost

# Kafka waits request.timeout.ms (default 30 s) for the markers' replication.
MARKER_REPLICATION_TIMEOUT_MS = 30_000


async def handle_write_txn_markers(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    if not on_cluster(broker, ctx, Operation.CLUSTER_ACTION):
        denied = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return {"markers": [{"producer_id": m["producer_id"], "topics": [
            {"name": t["name"], "partitions": [{"partition_index": i, "error_code": denied}
                                               for i in t["partition_indexes"]]} for t in m["topics"]]}
            for m in req["markers"]]}
    return await write_txn_markers(broker, req)


async def write_txn_markers(broker: BrokerHost, req: Body, *,
                            timeout_ms: int = MARKER_REPLICATION_TIMEOUT_MS) -> Body:
    timestamp = now_ms()
    # (future, result body, then: (offsets partition, producer id, committed) or None)
    waits: list[tuple[asyncio.Future[None], Body, tuple[int, int, bool] | None]] = []
    markers: list[Body] = []
    for marker in req["markers"]:
        producer_id = marker["producer_id"]
        committed = bool(marker["transaction_result"])
        topics: list[Body] = []
        for t in marker["topics"]:
            name = t["name"]
            parts: list[Body] = []
            for index in t["partition_indexes"]:
                result: Body = {"partition_index": index, "error_code": ErrorCode.NONE}
                parts.append(result)
                try:
                    partition = broker.replicas.leader_partition(name, index)
                    info = partition.append_txn_marker(
                        producer_id, marker["producer_epoch"], marker["coordinator_epoch"], committed,
                        now_ms=timestamp, transaction_version=marker.get("transaction_version", 0))
                except KafkaError as exc:
                    result["error_code"] = exc.code
                    continue
                then = (index, producer_id, committed) if name == GROUP_METADATA_TOPIC else None
                waits.append((partition.wait_for_high_watermark(info.last_offset), result, then))
            topics.append({"name": name, "partitions": parts})
        markers.append({"producer_id": producer_id, "topics": topics})
    await _await_replication(broker, waits, timeout_ms)
    return {"markers": markers}


async def _await_replication(broker: BrokerHost,
                             waits: list[tuple[asyncio.Future[None], Body, tuple[int, int, bool] | None]],
                             timeout_ms: int) -> None:
    futures = [fut for fut, _, _ in waits]
    pending: set[asyncio.Future[None]] = set()
    if any(not f.done() for f in futures):
        _, pending = await asyncio.wait(futures, timeout=timeout_ms / 1000)
    for fut, result, then in waits:
        if fut in pending:
            fut.cancel()
            result["error_code"] = ErrorCode.REQUEST_TIMED_OUT
            continue
        exc = fut.exception()
        if exc is not None:
            result["error_code"] = exc.code if isinstance(exc, KafkaError) else ErrorCode.UNKNOWN_SERVER_ERROR
            continue
        if then is not None:
            broker.coordinator.complete_transaction(*then)
