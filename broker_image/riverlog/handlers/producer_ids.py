"""Producer ids: InitProducerId for idempotent producers (transactions come later), and
DescribeProducers, what a partition leader knows of the producers writing to it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..protocol.errors import ErrorCode, KafkaError
from ..server.dispatch import RequestContext
from .common import Body

if TYPE_CHECKING:
    from .host import BrokerHost


async def handle_init_producer_id(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    if req.get("transactional_id"):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                "producer_id": -1, "producer_epoch": -1}
    # An idempotent producer re-initialising (KIP-360) simply gets a fresh id: its old
    # sequences can never collide with the new id's.
    producer_id = await broker.controller.allocate_producer_id(broker.node_id)
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "producer_id": producer_id,
            "producer_epoch": 0}


async def handle_describe_producers(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    """The active idempotent producers of each requested partition, from its leader's producer
    state (what `kafka-transactions describe-producers` shows). No transactions yet, so no
    producer has a coordinator epoch or an open transaction's start offset."""
    topics = []
    for t in req["topics"]:
        parts = []
        for index in t["partition_indexes"]:
            result: Body = {"partition_index": index, "error_code": ErrorCode.NONE, "error_message": None,
                            "active_producers": []}
            try:
                p = broker.replicas.leader_partition(t["name"], index, -1)
            except KafkaError as exc:
                result.update(error_code=exc.code, error_message=str(exc))
            else:
                result["active_producers"] = [{
                    "producer_id": e.producer_id, "producer_epoch": e.epoch, "last_sequence": e.last_seq,
                    "last_timestamp": e.last_timestamp, "coordinator_epoch": -1, "current_txn_start_offset": -1,
                } for e in sorted(p.log.producers.producers.values(), key=lambda e: e.producer_id)]
            parts.append(result)
        topics.append({"name": t["name"], "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}
