"""The share coordinator's RPCs (KIP-932): InitializeShareGroupState, ReadShareGroupState,
WriteShareGroupState, DeleteShareGroupState and ReadShareGroupStateSummary.

Partition leaders (and the group coordinator) send them to the broker FindCoordinator (key type 2,
key ``"<group>:<topic id>:<partition>"``) names for each share-partition; every share-partition of
a request is answered on its own, NOT_COORDINATOR where this broker is not its coordinator
(``share/coordinator.py``). Inter-broker APIs: CLUSTER_ACTION on the cluster, as Kafka.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..protocol.errors import ErrorCode, KafkaError
from ..server.dispatch import RequestContext
from ..share.coordinator import StateShardRunner, coordinator_key
from ..share.partition import StateBatch
from ..share.state_records import ShareStateKey
from .authorize import Operation, on_cluster
from .common import Body

if TYPE_CHECKING:
    from .host import BrokerHost

Operation_ = Callable[[StateShardRunner, int], None]


async def _call(broker: BrokerHost, key: ShareStateKey, operation: Operation_) -> Body:
    try:
        return await broker.share_coordinator.call(coordinator_key(key.group_id, key.topic_id, key.partition),
                                                   operation)
    except KafkaError as exc:
        return {"error_code": exc.code, "error_message": None, "state": None}


async def _each(broker: BrokerHost, ctx: RequestContext, req: Body,
                answer: Callable[[ShareStateKey, Body], Any]) -> list[Body]:
    """The request's share-partitions answered one by one, grouped by topic as requested."""
    allowed = on_cluster(broker, ctx, Operation.CLUSTER_ACTION)
    results = []
    for t in req["topics"]:
        parts: list[Body] = []
        for p in t["partitions"]:
            key = ShareStateKey(req["group_id"], t["topic_id"], p["partition"])
            if not allowed:
                parts.append({"partition": key.partition, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                              "error_message": None})
                continue
            topic = broker.image.topic_by_id(key.topic_id)
            if topic is None or key.partition not in topic.partitions:
                parts.append({"partition": key.partition, "error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                              "error_message": "This server does not host this topic-partition."})
                continue
            parts.append({"partition": key.partition, **(await answer(key, p))})
        results.append({"topic_id": t["topic_id"], "partitions": parts})
    return results


def _batches(entries: list[Body]) -> tuple[StateBatch, ...]:
    return tuple(StateBatch(b["first_offset"], b["last_offset"], b["delivery_state"], b["delivery_count"])
                 for b in entries)


async def handle_write_share_group_state(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    async def answer(key: ShareStateKey, p: Body) -> Body:
        body = await _call(broker, key, lambda s, token: s.write_state(
            token, key, p["state_epoch"], p["leader_epoch"], p["start_offset"], _batches(p["state_batches"]),
            p.get("delivery_complete_count", -1)))
        return {"error_code": body["error_code"], "error_message": body.get("error_message")}

    return {"results": await _each(broker, ctx, req, answer)}


async def handle_initialize_share_group_state(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    async def answer(key: ShareStateKey, p: Body) -> Body:
        body = await _call(broker, key, lambda s, token: s.initialize_state(
            token, key, p["state_epoch"], p["start_offset"]))
        return {"error_code": body["error_code"], "error_message": body.get("error_message")}

    return {"results": await _each(broker, ctx, req, answer)}


async def handle_delete_share_group_state(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    async def answer(key: ShareStateKey, p: Body) -> Body:
        body = await _call(broker, key, lambda s, token: s.delete_state(token, key))
        return {"error_code": body["error_code"], "error_message": body.get("error_message")}

    return {"results": await _each(broker, ctx, req, answer)}


async def handle_read_share_group_state(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    async def answer(key: ShareStateKey, p: Body) -> Body:
        body = await _call(broker, key, lambda s, token: s.read_state(token, key, p["leader_epoch"]))
        state = body.get("state")
        if body["error_code"] != ErrorCode.NONE or state is None:
            # Never written: start offset -1 tells the leader to start from share.auto.offset.reset.
            return {"error_code": body["error_code"], "error_message": body.get("error_message"), "state_epoch": 0,
                    "start_offset": -1, "state_batches": []}
        return {"error_code": ErrorCode.NONE, "error_message": None, "state_epoch": state.state_epoch,
                "start_offset": state.start_offset,
                "state_batches": [{"first_offset": b.first_offset, "last_offset": b.last_offset,
                                   "delivery_state": b.delivery_state, "delivery_count": b.delivery_count}
                                  for b in state.batches]}

    return {"results": await _each(broker, ctx, req, answer)}


async def handle_read_share_group_state_summary(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    async def answer(key: ShareStateKey, p: Body) -> Body:
        body = await _call(broker, key, lambda s, token: s.read_state(token, key, p["leader_epoch"]))
        state = body.get("state")
        if body["error_code"] != ErrorCode.NONE or state is None:
            return {"error_code": body["error_code"], "error_message": body.get("error_message"), "state_epoch": 0,
                    "leader_epoch": -1, "start_offset": -1, "delivery_complete_count": -1}
        return {"error_code": ErrorCode.NONE, "error_message": None, "state_epoch": state.state_epoch,
                "leader_epoch": state.leader_epoch, "start_offset": state.start_offset,
                "delivery_complete_count": state.delivery_complete_count}

    return {"results": await _each(broker, ctx, req, answer)}
