"""Fetch: hand consumers and followers file regions of segment files, waiting for data up to
max_wait_ms.

Record data is never read into Python: the log returns regions and the connection sendfiles
them. Fetch sessions are answered with session id 0 (the protocol's "no session"), so clients
keep sending full fetch requests, which is always correct.

A fetch carrying a replica id comes from a follower. It may read up to the log end rather than
the high watermark; its last fetched epoch is checked against our epochs first (a mismatch is
answered with the diverging epoch and no records, and the follower truncates); and its fetch
offset, once per request, tells the leader how far the follower is (high watermark, ISR).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from ..clock import now_ms
from ..cluster.partition import Partition
from ..protocol.api_keys import ApiKey
from ..protocol.errors import ErrorCode, KafkaError
from ..server.dispatch import RequestContext
from .common import Body, resolve_topic, unknown_topic_code
from .quorum import handle_raft_request, is_metadata_fetch

if TYPE_CHECKING:
    from .host import BrokerHost

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


async def handle_fetch(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body | None:
    if is_metadata_fetch(req):
        # A voter or observer of the metadata quorum replicating __cluster_metadata.
        return await handle_raft_request(ApiKey.FETCH, broker, ctx, req)
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
    replica_epoch = replica_state.get("replica_epoch", -1) if replica_state else -1
    follower = (replica_id, replica_epoch if replica_epoch is not None else -1) if is_replica else None
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max_wait
    first = True
    while True:
        # Only the first pass reports the follower's position: later passes re-read after a wake-up.
        responses, total, partitions, had_error = _collect(broker, req, max_bytes, follower, first)
        first = False
        remaining = deadline - loop.time()
        if total >= min_bytes or had_error or remaining <= 0 or not partitions:
            break
        waiters = [p.data_arrived() for p in partitions]
        await asyncio.wait(waiters, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
        for w in waiters:
            w.cancel()
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "session_id": 0, "responses": responses}


def _collect(
    broker: BrokerHost, req: Body, max_bytes: int, follower: tuple[int, int] | None, report: bool
) -> tuple[list[Body], int, list[Partition], bool]:
    is_replica = follower is not None
    fetch_time = now_ms()
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
                if follower is not None:
                    if follower[0] not in p.replicas:
                        raise KafkaError("", ErrorCode.NOT_LEADER_OR_FOLLOWER)
                    diverging = p.diverging_epoch(fp.get("last_fetched_epoch", -1), fp["fetch_offset"])
                    if diverging is not None:
                        entry = _partition_error(index, ErrorCode.NONE, p)
                        entry["diverging_epoch"] = {"epoch": diverging[0], "end_offset": diverging[1]}
                        parts.append(entry)
                        had_error = True  # answer at once: the follower must truncate first
                        continue
                budget = min(fp["partition_max_bytes"], max_bytes - total)
                # KIP-74: only the first partition with data may exceed the byte limits.
                read = p.read(fp["fetch_offset"], max(budget, 0), replica=is_replica, min_one_batch=total == 0) \
                    if budget > 0 or total == 0 else None
            except KafkaError as exc:
                parts.append(_partition_error(index, exc.code, p))
                had_error = True
                continue
            if follower is not None and report and \
                    p.log.log_start_offset <= fp["fetch_offset"] <= p.log.log_end_offset:
                broker.replicas.record_follower_fetch(p, follower[0], fp["fetch_offset"], follower[1], fetch_time)
            involved.append(p)
            regions = read.regions if read is not None else []
            size = read.size if read is not None else 0
            total += size
            if size and not is_replica:  # the metric counts what consumers read
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
