"""Produce: append record batches to partition leaders; acks decide when to answer.

acks=0 gets no response at all, acks=1 answers once the leader appended, acks=all (-1) waits for
the high watermark to pass the batch, a future resolved by replication (never a poll), bounded
by the request's timeout.

Transactional producers (a ``transactional_id``): the log opens their transaction with its first
transactional batch (storage/producer_state.py). A transaction version 2 producer (Produce v12+,
KIP-890 part 2) never adds partitions itself: before the first batch of its transaction on a
partition is appended, the leader has the partition added at the transaction coordinator
(``transactions/partition_adder.py``), as Kafka's leaders do. Kafka's KIP-890 part 1 check (that
an older producer added the partition) is not made.

With an authorizer, as Kafka: transactional records need WRITE on the request's transactional id
(else every partition is TRANSACTIONAL_ID_AUTHORIZATION_FAILED), and each topic WRITE (else its
partitions are TOPIC_AUTHORIZATION_FAILED, checked before the topic's existence).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..clock import now_ms
from ..controller.topic_names import INTERNAL_TOPICS
from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.record_batch import HEADER_SIZE, check_produce_records, read_header
from ..server.dispatch import RequestContext
from ..transactions.partition_adder import UNAVAILABLE
from ..transactions.state import TopicPartition
from .authorize import Operation, on_topic, on_transactional_id
from .common import Body, resolve_topic, unknown_topic_code

if TYPE_CHECKING:
    from ..controller.image import TopicImage
    from .host import BrokerHost

# Kafka lets only a request with this client id append to its internal topics.
ADMIN_CLIENT_ID = "__admin_client"
# Produce from a transaction version 2 producer: the leader adds partitions to its transaction.
TXN_V2_FROM_VERSION = 12
ABORTABLE_FROM_VERSION = 11  # the first Produce version that knows TRANSACTION_ABORTABLE
VERIFICATION_ENABLE = "transaction.partition.verification.enable"
NOT_IN_TRANSACTION = frozenset({ErrorCode.TRANSACTION_ABORTABLE, ErrorCode.INVALID_TXN_STATE})


def _error(index: int, code: ErrorCode, message: str | None = None) -> Body:
    return {"index": index, "error_code": code, "base_offset": -1, "log_append_time_ms": -1,
            "log_start_offset": -1, "error_message": message}


def _refusal(topic: TopicImage, index: int, records: Any, client_id: str | None, version: int) -> Body | None:
    """Kafka's checks before a partition's leader is looked at, in its order: the partition
    exists, the records are one batch of magic 2, the topic is not internal. Kafka answers these
    without a message, except for a corrupt message set."""
    if index not in topic.partitions:
        return _error(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    try:
        check_produce_records(records or b"", version)
    except KafkaError as exc:
        return _error(index, exc.code, exc.message if exc.code == ErrorCode.CORRUPT_MESSAGE else None)
    if topic.name in INTERNAL_TOPICS and client_id != ADMIN_CLIENT_ID:
        return _error(index, ErrorCode.INVALID_TOPIC_EXCEPTION)
    return None


async def handle_produce(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body | None:
    acks = req["acks"]
    timestamp = now_ms()
    waits: list[tuple[asyncio.Future[None], Body]] = []
    responses: list[Body] = []
    global_error: ErrorCode | None = None
    message: str | None = None
    if acks not in (0, 1, -1):
        global_error, message = ErrorCode.INVALID_REQUIRED_ACKS, f"acks must be 0, 1 or -1, not {acks}"
    metrics = broker.metrics
    transactional_id = req.get("transactional_id")
    if _has_transactional_records(req) and not (
            transactional_id and on_transactional_id(broker, ctx, Operation.WRITE, transactional_id)):
        global_error, message = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None
    denied: set[str] = set()
    for topic_data in req["topic_data"]:
        found = resolve_topic(broker, topic_data.get("name"), topic_data.get("topic_id"))
        name = found.name if found is not None else topic_data.get("name")
        if name and name not in denied and not on_topic(broker, ctx, Operation.WRITE, name):
            denied.add(name)
    txn_check = _TxnCheck() if global_error is not None else await _check_transaction(broker, req, ctx.version, denied)
    for topic_data in req["topic_data"]:
        topic_id = topic_data.get("topic_id")
        topic = resolve_topic(broker, topic_data.get("name"), topic_id)
        parts: list[Body] = []
        for pd in topic_data["partition_data"]:
            index = pd["index"]
            if global_error is not None:
                parts.append(_error(index, global_error, message))
                continue
            if (topic.name if topic is not None else topic_data.get("name")) in denied:
                parts.append(_error(index, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            if topic is None:
                parts.append(_error(index, unknown_topic_code(topic_id)))
                continue
            records = pd["records"]
            refusal = _refusal(topic, index, records, ctx.header.client_id, ctx.version)
            if refusal is not None:
                parts.append(refusal)
                continue
            tp = (topic.name, index)
            if tp in txn_check.errors:
                parts.append(_error(index, txn_check.errors[tp]))
                continue
            try:
                partition = broker.replicas.leader_partition(topic.name, index)
                guard = txn_check.guards.get(tp)
                if guard is not None and not partition.txn_verification_holds(*guard):
                    raise KafkaError("Record was not part of an ongoing transaction", ErrorCode.INVALID_TXN_STATE)
                info = partition.append(records, acks=acks, now_ms=timestamp)
                if partition.log.needs_flush:
                    broker.flush_soon(partition)
            except KafkaError as exc:
                parts.append(_error(index, exc.code, exc.message))
                continue
            if not info.duplicate:
                metrics.bytes_in.labels(topic=topic.name).inc(len(records))
                metrics.records_in.labels(topic=topic.name).inc(info.record_count)
            result = {"index": index, "error_code": ErrorCode.NONE, "base_offset": info.first_offset,
                      "log_append_time_ms": info.log_append_time, "log_start_offset": info.log_start_offset}
            parts.append(result)
            if acks == -1:
                waits.append((partition.wait_for_high_watermark(info.last_offset), result))
        responses.append({"name": topic.name if topic else topic_data.get("name"),
                          "topic_id": topic_id, "partition_responses": parts})
    if acks == 0:
        return None
    if waits:
        await _await_replication(waits, req["timeout_ms"])
    return {"responses": responses, "throttle_time_ms": 0}


@dataclass
class _TxnCheck:
    """What the coordinator said of this request's transactional batches: errors to answer, and
    the guards an append must still find (see ``Partition.start_txn_verification``)."""

    errors: dict[TopicPartition, ErrorCode] = field(default_factory=dict)
    guards: dict[TopicPartition, tuple[int, object]] = field(default_factory=dict)


def _has_transactional_records(req: Body) -> bool:
    """Whether any batch of the request is transactional (Kafka's hasTransactionalRecords)."""
    for topic_data in req["topic_data"]:
        for pd in topic_data["partition_data"]:
            records = pd["records"]
            if records is not None and len(records) >= HEADER_SIZE and read_header(records).is_transactional:
                return True
    return False


async def _check_transaction(broker: BrokerHost, req: Body, version: int, denied: set[str]) -> _TxnCheck:
    """Before appending a transactional batch that starts the producer's transaction on a
    partition (no transaction of that producer and epoch open there), ask its coordinator, in
    one call for the request: a transaction version 2 producer (Produce v12+) has the partitions
    added (KIP-890 part 2); an older one has them verified to be in its transaction (part 1,
    ``transaction.partition.verification.enable``), so a late or stray batch cannot open a
    transaction no one will end. Errors as Kafka's: not in the transaction is INVALID_TXN_STATE
    (TRANSACTION_ABORTABLE from v11), the coordinator unavailable or busy NOT_ENOUGH_REPLICAS,
    which producers retry."""
    check = _TxnCheck()
    transactional_id = req.get("transactional_id")
    version_2 = version >= TXN_V2_FROM_VERSION
    if not transactional_id or not (version_2 or broker.config.get_bool(VERIFICATION_ENABLE)):
        return check
    wanted: list[TopicPartition] = []
    producer: tuple[int, int] | None = None
    for topic_data in req["topic_data"]:
        topic = resolve_topic(broker, topic_data.get("name"), topic_data.get("topic_id"))
        if topic is None or topic.name in denied:
            continue
        for pd in topic_data["partition_data"]:
            records = pd["records"]
            try:
                partition = broker.replicas.leader_partition(topic.name, pd["index"])
            except KafkaError:
                continue  # not led here: the append path answers
            if records is None or len(records) < HEADER_SIZE:
                continue  # answered by the checks of the append path
            header = read_header(records)
            if not header.is_transactional or header.is_control:
                continue
            if partition.has_open_transaction(header.producer_id, header.producer_epoch):
                continue  # its transaction is already open here
            tp = (topic.name, pd["index"])
            wanted.append(tp)
            producer = (header.producer_id, header.producer_epoch)
            check.guards[tp] = (header.producer_id,
                                partition.start_txn_verification(header.producer_id, header.producer_epoch, version_2))
    if producer is None:
        return check
    adder = broker.transactions.adder
    if version_2:
        code = await adder.add(transactional_id, producer[0], producer[1], wanted)
        codes = dict.fromkeys(wanted, code)
    else:
        codes = await adder.verify(transactional_id, producer[0], producer[1], wanted)
    for tp, code in codes.items():
        if code in NOT_IN_TRANSACTION:
            code = ErrorCode.TRANSACTION_ABORTABLE if version >= ABORTABLE_FROM_VERSION else ErrorCode.INVALID_TXN_STATE
        elif code in UNAVAILABLE or (code == ErrorCode.CONCURRENT_TRANSACTIONS and not version_2):
            code = ErrorCode.NOT_ENOUGH_REPLICAS
        if code != ErrorCode.NONE:
            check.errors[tp] = code
    return check


async def _await_replication(waits: list[tuple[asyncio.Future[None], Body]], timeout_ms: int) -> None:
    futures = [fut for fut, _ in waits]
    pending: set[Any] = set()
    if any(not f.done() for f in futures):
        _, pending = await asyncio.wait(futures, timeout=max(timeout_ms, 0) / 1000)
    for fut, result in waits:
        if fut in pending:
            fut.cancel()
            result.update(error_code=ErrorCode.REQUEST_TIMED_OUT, base_offset=-1,
                          error_message="replication did not complete within the request timeout")
        elif fut.exception() is not None:
            exc = fut.exception()
            code = exc.code if isinstance(exc, KafkaError) else ErrorCode.UNKNOWN_SERVER_ERROR
            result.update(error_code=code, base_offset=-1)
