"""DeleteRecords and OffsetForLeaderEpoch: moving the log start, and epoch end offsets."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..controller.topic_names import INTERNAL_TOPICS
from ..protocol.errors import ErrorCode, KafkaError
from ..server.dispatch import RequestContext
from .authorize import Operation, on_cluster, on_topic
from .common import Body

if TYPE_CHECKING:
    from .host import BrokerHost


async def handle_delete_records(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    topics = []
    for t in req["topics"]:
        parts = []
        # Kafka: DELETE on the topic, else TOPIC_AUTHORIZATION_FAILED (existing or not).
        permitted = on_topic(broker, ctx, Operation.DELETE, t["name"])
        for rp in t["partitions"]:
            index = rp["partition_index"]
            topic = broker.image.topics.get(t["name"])
            if not permitted:
                parts.append({"partition_index": index, "low_watermark": -1,
                              "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED})
                continue
            if t["name"] in INTERNAL_TOPICS and topic is not None and index in topic.partitions:
                # Kafka refuses these once it knows the partition, before looking for its leader.
                parts.append({"partition_index": index, "low_watermark": -1,
                              "error_code": ErrorCode.INVALID_TOPIC_EXCEPTION})
                continue
            try:
                p = broker.replicas.leader_partition(t["name"], index)
                offset = rp["offset"]
                if offset == -1:
                    offset = p.high_watermark  # -1 means "up to the high watermark"
                if offset < 0 or offset > p.high_watermark:
                    raise KafkaError("", ErrorCode.OFFSET_OUT_OF_RANGE)
                low = p.log.delete_records_before(offset)
                parts.append({"partition_index": index, "low_watermark": low, "error_code": ErrorCode.NONE})
            except KafkaError as exc:
                parts.append({"partition_index": index, "low_watermark": -1, "error_code": exc.code})
        topics.append({"name": t["name"], "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}


async def handle_offset_for_leader_epoch(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    topics = []
    # Kafka: a follower (replica id >= 0) needs CLUSTER_ACTION, a client DESCRIBE on each topic.
    follower_denied = req.get("replica_id", -1) >= 0 and not on_cluster(broker, ctx, Operation.CLUSTER_ACTION)
    for t in req["topics"]:
        parts = []
        denied = (ErrorCode.CLUSTER_AUTHORIZATION_FAILED if follower_denied
                  else None if on_topic(broker, ctx, Operation.DESCRIBE, t["topic"])
                  else ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        for rp in t["partitions"]:
            index = rp["partition"]
            try:
                if denied is not None:
                    raise KafkaError("", denied)
                p = broker.replicas.leader_partition(t["topic"], index, rp.get("current_leader_epoch", -1))
                epoch, end = p.log.end_offset_for_epoch(rp["leader_epoch"])
                parts.append({"error_code": ErrorCode.NONE, "partition": index, "leader_epoch": epoch,
                              "end_offset": end})
            except KafkaError as exc:
                parts.append({"error_code": exc.code, "partition": index, "leader_epoch": -1, "end_offset": -1})
        topics.append({"topic": t["topic"], "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}
