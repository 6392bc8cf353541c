"""Producer ids: InitProducerId for idempotent producers (an id from the controller) and for
transactional ones (through the transaction coordinator), and DescribeProducers, what a
partition leader knows of the producers writing to it.

With an authorizer, as Kafka: a transactional InitProducerId needs WRITE on the transactional id
(else TRANSACTIONAL_ID_AUTHORIZATION_FAILED), an idempotent one IDEMPOTENT_WRITE on the cluster or
WRITE on some topic (else CLUSTER_AUTHORIZATION_FAILED); DescribeProducers READ on each topic."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..protocol.errors import ErrorCode, KafkaError
from ..server.dispatch import RequestContext
from .authorize import Operation, ResourceType, on_cluster, on_topic, on_transactional_id
from .common import Body

if TYPE_CHECKING:
    from .host import BrokerHost


# InitProducerId versions before 4 do not know PRODUCER_FENCED (KIP-588).
INIT_FENCED_KNOWN_FROM = 4


async def handle_init_producer_id(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    transactional_id = req.get("transactional_id")
    failed = {"throttle_time_ms": 0, "producer_id": -1, "producer_epoch": -1}
    if transactional_id is not None and not on_transactional_id(broker, ctx, Operation.WRITE, transactional_id):
        return {**failed, "error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    idempotent_ok = transactional_id is not None or on_cluster(broker, ctx, Operation.IDEMPOTENT_WRITE) or \
        broker.access.allowed_any(ctx.connection, Operation.WRITE, ResourceType.TOPIC)
    if not idempotent_ok:
        return {**failed, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED}
    if transactional_id is not None:
        return {"throttle_time_ms": 0, **await _init_transactional(broker, ctx.version, transactional_id, req)}
    # An idempotent producer re-initialising (KIP-360) simply gets a fresh id: its old
    # sequences can never collide with the new id's.
    producer_id = await broker.controller.allocate_producer_id(broker.node_id)
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "producer_id": producer_id,
            "producer_epoch": 0}


async def _init_transactional(broker: BrokerHost, version: int, transactional_id: str, req: Body) -> Body:
    """A transactional producer's id and epoch from the transaction coordinator, which fences
    older epochs and aborts what a previous incarnation left open."""
    failed = {"producer_id": -1, "producer_epoch": -1}
    expected_pid, expected_epoch = req.get("producer_id", -1), req.get("producer_epoch", -1)
    if not transactional_id or (expected_pid == -1) != (expected_epoch == -1):
        return {"error_code": ErrorCode.INVALID_REQUEST, **failed}
    timeout = req["transaction_timeout_ms"]
    if not 0 < timeout <= broker.transactions.config.max_timeout_ms:
        return {"error_code": ErrorCode.INVALID_TRANSACTION_TIMEOUT, **failed}
    expected = None if expected_pid == -1 else (expected_pid, expected_epoch)
    try:
        body = await broker.transactions.init_producer_id(transactional_id, timeout, expected)
    except KafkaError as exc:
        return {"error_code": exc.code, **failed}
    code = ErrorCode(body["error_code"])
    if code == ErrorCode.PRODUCER_FENCED and version < INIT_FENCED_KNOWN_FROM:
        code = ErrorCode.INVALID_PRODUCER_EPOCH
    return {**body, "error_code": code}


async def handle_describe_producers(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    """The active producers of each requested partition, from its leader's producer state (what
    `kafka-transactions describe-producers` shows): the coordinator epoch of each one's last
    transaction marker and the first offset of its open transaction (-1: none)."""
    topics = []
    for t in req["topics"]:
        parts = []
        for index in t["partition_indexes"]:
            result: Body = {"partition_index": index, "error_code": ErrorCode.NONE, "error_message": None,
                            "active_producers": []}
            if not on_topic(broker, ctx, Operation.READ, t["name"]):
                result.update(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, error_message=None)
                parts.append(result)
                continue
            try:
                p = broker.replicas.leader_partition(t["name"], index, -1)
            except KafkaError as exc:
                result.update(error_code=exc.code, error_message=str(exc))
            else:
                result["active_producers"] = [{
                    "producer_id": e.producer_id, "producer_epoch": e.epoch, "last_sequence": e.last_seq,
                    "last_timestamp": e.last_timestamp, "coordinator_epoch": e.coordinator_epoch,
                    "current_txn_start_offset": e.current_txn_first_offset,
                } for e in sorted(p.log.producers.producers.values(), key=lambda e: e.producer_id)]
            parts.append(result)
        topics.append({"name": t["name"], "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}
