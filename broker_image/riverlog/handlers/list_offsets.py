"""ListOffsets: earliest, latest, max-timestamp and by-timestamp offset lookups.

With isolation_level 1 (read_committed) the last stable offset takes the high watermark's place,
as in Kafka: "latest" is the LSO and lookups find nothing at or above it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..protocol.errors import ErrorCode, KafkaError
from ..server.dispatch import RequestContext
from .authorize import Operation, on_topic
from .common import Body

if TYPE_CHECKING:
    from .host import BrokerHost

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
READ_COMMITTED = 1


async def handle_list_offsets(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    topics = []
    read_committed = req.get("isolation_level", 0) == READ_COMMITTED
    for t in req["topics"]:
        parts = []
        # Kafka: DESCRIBE on the topic, else TOPIC_AUTHORIZATION_FAILED (existing or not).
        permitted = on_topic(broker, ctx, Operation.DESCRIBE, t["name"])
        for rp in t["partitions"]:
            index = rp["partition_index"]
            result: Body = {"partition_index": index, "error_code": ErrorCode.NONE, "timestamp": -1,
                            "offset": -1, "leader_epoch": -1, "old_style_offsets": []}
            try:
                if not permitted:
                    raise KafkaError("", ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                p = broker.replicas.leader_partition(t["name"], index, rp.get("current_leader_epoch", -1))
                ts = rp["timestamp"]
                hw = p.last_stable_offset if read_committed else p.high_watermark
                if ts == LATEST:
                    result.update(offset=hw, leader_epoch=p.leader_epoch)
                elif ts in (EARLIEST, EARLIEST_LOCAL):
                    result.update(offset=p.log.log_start_offset, leader_epoch=p.leader_epoch)
                elif ts == LATEST_TIERED:
                    pass  # no tiered storage: Kafka answers offset -1 here too
                elif ts == MAX_TIMESTAMP:
                    found = p.log.max_timestamp_offset()
                    if found is not None and found[0] < hw:
                        result.update(offset=found[0], timestamp=found[1], leader_epoch=found[2])
                elif ts < 0:
                    raise KafkaError(f"unknown special timestamp {ts}", ErrorCode.INVALID_REQUEST)
                else:
                    found = p.log.offset_for_timestamp(ts)
                    if found is not None and found[0] < hw:
                        result.update(offset=found[0], timestamp=found[1], leader_epoch=found[2])
                if ctx.version == 0:
                    result["old_style_offsets"] = [result["offset"]] if result["offset"] >= 0 else []
            except KafkaError as exc:
                result["error_code"] = exc.code
            parts.append(result)
        topics.append({"name": t["name"], "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}
