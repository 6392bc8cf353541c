"""Fetch: hand consumers file regions of segment files, waiting for data up to max_wait_ms.

Record data is never read into Python: the log returns regions and the connection sendfiles
them. Fetch sessions are answered with session id 0 (the protocol's "no session"), so clients
keep sending full fetch requests, which is always correct.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from ..cluster.partition import Partition
from ..protocol.errors import ErrorCode, KafkaError
from ..server.dispatch import RequestContext
from .common import Body, resolve_topic, unknown_topic_code

if TYPE_CHECKING:
    from ..broker import Broker

MAX_INT32 = (1 << 31) - 1


def _partition_error(index: int, code: ErrorCode, p: Partition | None = None) -> Body:
    return {
        "partition_index": index, "error_code": code,
        "high_watermark": p.high_watermark if p else -1,
        "last_stable_offset": p.high_watermark if p else -1,
        "log_start_offset": p.log.log_start_offset if p else -1,
        # Kafka sends empty (not null) records with errors; librdkafka rejects a null record set.
        "aborted_transactions": None, "preferred_read_replica": -1, "records": b"",
    }


async def handle_fetch(broker: Broker, ctx: RequestContext, req: Body) -> Body:
    if req.get("session_id", 0) != 0:
        # We never hand out sessions, so any id a client sends is unknown to us.
        return {"throttle_time_ms": 0, "error_code": ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
                "session_id": 0, "responses": []}
    replica_state = req.get("replica_state") or {}
    replica_id = req.get("replica_id", -1)
    if replica_id is None or replica_id < 0:
        replica_id = replica_state.get("replica_id", -1) if replica_state else -1
    is_replica = replica_id is not None and replica_id >= 0
    max_bytes = req.get("max_bytes") or MAX_INT32
    min_bytes = max(req.get("min_bytes", 1), 0)
    max_wait = max(req.get("max_wait_ms", 0), 0) / 1000
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max_wait
    while True:
        responses, total, partitions, had_error = _collect(broker, req, max_bytes, is_replica)
        remaining = deadline - loop.time()
        if total >= min_bytes or had_error or remaining <= 0 or not partitions:
            break
        waiters = [p.data_arrived() for p in partitions]
        await asyncio.wait(waiters, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
        for w in waiters:
            w.cancel()
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "session_id": 0, "responses": responses}


def _collect(
    broker: Broker, req: Body, max_bytes: int, is_replica: bool
) -> tuple[list[Body], int, list[Partition], bool]:
    total = 0
    had_error = False
    involved: list[Partition] = []
    responses: list[Body] = []
    metrics = broker.metrics
    for t in req["topics"]:
        topic_id = t.get("topic_id")
        topic = resolve_topic(broker, t.get("topic"), topic_id)
        parts: list[Any] = []
        for fp in t["partitions"]:
            index = fp["partition"]
            if topic is None:
                parts.append(_partition_error(index, unknown_topic_code(topic_id)))
                had_error = True
                continue
            p = broker.replicas.get(topic.name, index)
            try:
                if p is None:
                    raise KafkaError("", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                p.check_leader(fp.get("current_leader_epoch", -1))
                budget = min(fp["partition_max_bytes"], max_bytes - total)
                # KIP-74: only the first partition with data may exceed the byte limits.
                read = p.read(fp["fetch_offset"], max(budget, 0), replica=is_replica, min_one_batch=total == 0) \
                    if budget > 0 or total == 0 else None
            except KafkaError as exc:
                parts.append(_partition_error(index, exc.code, p))
                had_error = True
                continue
            involved.append(p)
            regions = read.regions if read is not None else []
            size = read.size if read is not None else 0
            total += size
            if size:
                metrics.bytes_out.labels(topic=topic.name).inc(size)
            parts.append({
                "partition_index": index, "error_code": ErrorCode.NONE,
                "high_watermark": p.high_watermark, "last_stable_offset": p.high_watermark,
                "log_start_offset": p.log.log_start_offset, "aborted_transactions": None,
                "preferred_read_replica": -1, "records": regions,
            })
        responses.append({"topic": topic.name if topic else t.get("topic"), "topic_id": topic_id,
                          "partitions": parts})
    return responses, total, involved, had_error
