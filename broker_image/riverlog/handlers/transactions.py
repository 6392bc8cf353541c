"""Transaction APIs answered by the transaction coordinator: AddPartitionsToTxn, AddOffsetsToTxn,
EndTxn, DescribeTransactions and ListTransactions (InitProducerId is in ``producer_ids.py``,
FindCoordinator in ``groups.py``).

The handlers translate between wire versions and the coordinator (``riverlog.transactions``),
which decides as Kafka's does. Requests for an id whose ``__transaction_state`` partition this
broker does not lead get NOT_COORDINATOR; while it loads, COORDINATOR_LOAD_IN_PROGRESS. Clients
older than KIP-588 (AddPartitionsToTxn, AddOffsetsToTxn and EndTxn before version 2) do not know
PRODUCER_FENCED and get INVALID_PRODUCER_EPOCH instead, as from Kafka. As in Kafka, the request's
version says whether the client speaks transaction version 2 (EndTxn 5, AddPartitionsToTxn 4+
from a broker), not the cluster's ``transaction.version``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..clock import now_ms
from ..controller.topic_names import GROUP_METADATA_TOPIC
from ..protocol.errors import ErrorCode, KafkaError
from ..server.dispatch import RequestContext
from ..transactions.shard import TxnShard
from ..transactions.state import TopicPartition, TxnState
from .authorize import Operation, ResourceType, allowed, on_cluster, on_group, on_topic, on_transactional_id
from .common import Body

if TYPE_CHECKING:
    from .host import BrokerHost

FENCED_KNOWN_FROM = 2  # the first version of AddPartitionsToTxn/AddOffsetsToTxn/EndTxn with PRODUCER_FENCED
END_TXN_V2_FROM = 5  # EndTxn from a transaction version 2 client (KIP-890 part 2)
ABORTABLE_KNOWN_FROM = 5  # the first AddPartitionsToTxn version with TRANSACTION_ABORTABLE


def fenced_for(version: int, code: ErrorCode, known_from: int = FENCED_KNOWN_FROM) -> ErrorCode:
    if code == ErrorCode.PRODUCER_FENCED and version < known_from:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return code


# AddPartitionsToTxn ---------------------------------------------------------------------


async def handle_add_partitions_to_txn(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    if ctx.version < 4:
        if not on_transactional_id(broker, ctx, Operation.WRITE, req["v3_and_below_transactional_id"]):
            return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": _all_failed(
                req["v3_and_below_topics"], ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)}
        denied = {t["name"] for t in req["v3_and_below_topics"]
                  if not on_topic(broker, ctx, Operation.WRITE, t["name"])}
        if denied:
            return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": [
                {"name": t["name"], "results_by_partition": [
                    {"partition_index": index, "partition_error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED
                     if t["name"] in denied else ErrorCode.OPERATION_NOT_ATTEMPTED} for index in t["partitions"]]}
                for t in req["v3_and_below_topics"]]}
        results = await _add_partitions(broker, ctx.version, req["v3_and_below_transactional_id"],
                                        req["v3_and_below_producer_id"], req["v3_and_below_producer_epoch"],
                                        req["v3_and_below_topics"], verify_only=False)
        return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": results}
    # Version 4+: a partition leader verifying (KIP-890), several transactions at once.
    if not on_cluster(broker, ctx, Operation.CLUSTER_ACTION):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "results_by_transaction": []}
    by_transaction = []
    for txn in req["transactions"]:
        results = await _add_partitions(broker, ctx.version, txn["transactional_id"], txn["producer_id"],
                                        txn["producer_epoch"], txn["topics"], verify_only=txn["verify_only"])
        by_transaction.append({"transactional_id": txn["transactional_id"], "topic_results": results})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "results_by_transaction": by_transaction}


async def _add_partitions(broker: BrokerHost, version: int, transactional_id: str, producer_id: int,
                          producer_epoch: int, topics: list[Body], *, verify_only: bool) -> list[Body]:
    wanted = [(t["name"], index) for t in topics for index in t["partitions"]]
    errors: dict[TopicPartition, ErrorCode]
    unknown = [tp for tp in wanted if not _exists(broker, tp)]
    if not transactional_id:
        errors = dict.fromkeys(wanted, ErrorCode.INVALID_REQUEST)
    elif unknown:
        # As Kafka: the unknown partitions say so, the others were not attempted.
        errors = {tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else ErrorCode.OPERATION_NOT_ATTEMPTED
                  for tp in wanted}
    elif verify_only:
        try:
            shard = broker.transactions.shard_for(transactional_id)
            errors = shard.verify_partitions(transactional_id, producer_id, producer_epoch, wanted)
        except KafkaError as exc:
            errors = dict.fromkeys(wanted, exc.code)
    else:
        # Version 4+ without verify_only comes from a partition leader or group coordinator
        # adding for a transaction version 2 client (Kafka: version > 3 means version 2).
        client_transaction_version = 2 if version >= 4 else 0
        code = await _call(broker, transactional_id, lambda s, token: s.add_partitions(
            token, transactional_id, producer_id, producer_epoch, wanted, client_transaction_version))
        errors = dict.fromkeys(wanted, code)
    by_topic: dict[str, list[Body]] = {}
    for (topic, index), code in errors.items():
        if code == ErrorCode.TRANSACTION_ABORTABLE and version < ABORTABLE_KNOWN_FROM:
            code = ErrorCode.INVALID_TXN_STATE
        by_topic.setdefault(topic, []).append(
            {"partition_index": index, "partition_error_code": fenced_for(version, code)})
    return [{"name": topic, "results_by_partition": parts} for topic, parts in by_topic.items()]


def _all_failed(topics: list[Body], code: ErrorCode) -> list[Body]:
    return [{"name": t["name"], "results_by_partition": [{"partition_index": index, "partition_error_code": code}
                                                         for index in t["partitions"]]} for t in topics]


def _exists(broker: BrokerHost, tp: TopicPartition) -> bool:
    topic = broker.image.topics.get(tp[0])
    return topic is not None and tp[1] in topic.partitions


async def _call(broker: BrokerHost, transactional_id: str, operation: Callable[[TxnShard, int], None]) -> ErrorCode:
    try:
        body = await broker.transactions.call(transactional_id, operation)
    except KafkaError as exc:
        return exc.code
    return ErrorCode(body["error_code"])


# AddOffsetsToTxn / EndTxn ---------------------------------------------------------------


async def handle_add_offsets_to_txn(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    transactional_id = req["transactional_id"]
    if not on_transactional_id(broker, ctx, Operation.WRITE, transactional_id):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    if not on_group(broker, ctx, Operation.READ, req["group_id"]):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED}
    if not transactional_id:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.INVALID_REQUEST}
    # The group's __consumer_offsets partition joins the transaction: its leader gets a marker,
    # which makes the offsets TxnOffsetCommit wrote there committed (or drops them).
    offsets_partition = (GROUP_METADATA_TOPIC, broker.coordinator.partition_for(req["group_id"]))
    producer_id, producer_epoch = req["producer_id"], req["producer_epoch"]
    code = await _call(broker, transactional_id, lambda s, token: s.add_partitions(
        token, transactional_id, producer_id, producer_epoch, [offsets_partition]))
    return {"throttle_time_ms": 0, "error_code": fenced_for(ctx.version, code)}


async def handle_end_txn(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    transactional_id = req["transactional_id"]
    if not on_transactional_id(broker, ctx, Operation.WRITE, transactional_id):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                "producer_id": -1, "producer_epoch": -1}
    if not transactional_id:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.INVALID_REQUEST}
    producer_id, producer_epoch, committed = req["producer_id"], req["producer_epoch"], req["committed"]
    # Version 5 is a transaction version 2 client: the epoch is bumped at every end and the
    # answer names the producer id and epoch to go on with.
    client_transaction_version = 2 if ctx.version >= END_TXN_V2_FROM else 0
    try:
        body = await broker.transactions.end_txn(transactional_id, producer_id, producer_epoch, committed,
                                                 client_transaction_version)
    except KafkaError as exc:
        body = {"error_code": exc.code}
    return {"throttle_time_ms": 0, "error_code": fenced_for(ctx.version, ErrorCode(body["error_code"])),
            "producer_id": body.get("producer_id", -1), "producer_epoch": body.get("producer_epoch", -1)}


# DescribeTransactions / ListTransactions ------------------------------------------------


async def handle_describe_transactions(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    states = []
    for transactional_id in req["transactional_ids"]:
        if not on_transactional_id(broker, ctx, Operation.DESCRIBE, transactional_id):
            states.append(_describe_error(transactional_id, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
            continue
        if not transactional_id:
            states.append(_describe_error(transactional_id, ErrorCode.INVALID_REQUEST))
            continue
        try:
            shard = broker.transactions.shard_for(transactional_id)
        except KafkaError as exc:
            states.append(_describe_error(transactional_id, exc.code))
            continue
        state = shard.describe(transactional_id)
        # As Kafka: the transaction's topics the principal may not describe are left out.
        state["topics"] = [t for t in state["topics"] if allowed(
            broker, ctx, Operation.DESCRIBE, ResourceType.TOPIC, t["topic"], log_denial=False)]
        states.append(state)
    return {"throttle_time_ms": 0, "transaction_states": states}


def _describe_error(transactional_id: str, code: ErrorCode) -> Body:
    return {"error_code": code, "transactional_id": transactional_id, "transaction_state": "",
            "transaction_start_time_ms": -1, "producer_id": -1, "producer_epoch": -1, "topics": []}


async def handle_list_transactions(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    coordinator = broker.transactions
    body: Body = {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "unknown_state_filters": [],
                  "transaction_states": []}
    if coordinator.any_loading():
        body["error_code"] = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return body
    states = frozenset(req["state_filters"])
    body["unknown_state_filters"] = sorted(s for s in states if TxnState.from_label(s) is None)
    pattern = None
    if req.get("transactional_id_pattern"):
        try:
            pattern = re.compile(req["transactional_id_pattern"])
        except re.error:
            body["error_code"] = ErrorCode.INVALID_REQUEST
            return body
    producer_ids = frozenset(req["producer_id_filters"])
    duration = req.get("duration_filter", -1)
    for shard in coordinator.loaded_shards():
        body["transaction_states"].extend(
            t for t in shard.list_transactions(now_ms(), states, producer_ids, duration, pattern)
            if allowed(broker, ctx, Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, t["transactional_id"],
                       log_denial=False))
    return body
