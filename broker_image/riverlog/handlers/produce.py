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
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from ..clock import now_ms
from ..controller.topic_names import INTERNAL_TOPICS
from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.record_batch import HEADER_SIZE, check_produce_records, read_header
from ..server.dispatch import RequestContext
from ..transactions.partition_adder import UNAVAILABLE
from ..transactions.state import TopicPartition
from .common import Body, resolve_topic, unknown_topic_code

if TYPE_CHECKING:
    from ..controller.image import TopicImage
    from .host import BrokerHost

# Kafka lets only a request with this client id append to its internal topics.
ADMIN_CLIENT_ID = "__admin_client"
# Produce from a transaction version 2 producer: the leader adds partitions to its transaction.
TXN_V2_FROM_VERSION = 12


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
    not_added = await _add_to_transaction(broker, req) if ctx.version >= TXN_V2_FROM_VERSION else {}
    for topic_data in req["topic_data"]:
        topic_id = topic_data.get("topic_id")
        topic = resolve_topic(broker, topic_data.get("name"), topic_id)
        parts: list[Body] = []
        for pd in topic_data["partition_data"]:
            index = pd["index"]
            if global_error is not None:
                parts.append(_error(index, global_error, message))
                continue
            if topic is None:
                parts.append(_error(index, unknown_topic_code(topic_id)))
                continue
            records = pd["records"]
            refusal = _refusal(topic, index, records, ctx.header.client_id, ctx.version)
            if refusal is not None:
                parts.append(refusal)
                continue
            if (topic.name, index) in not_added:
                parts.append(_error(index, not_added[(topic.name, index)]))
                continue
            try:
                partition = broker.replicas.leader_partition(topic.name, index)
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


async def _add_to_transaction(broker: BrokerHost, req: Body) -> dict[TopicPartition, ErrorCode]:
    """Transaction version 2: the partitions of this request whose transactional batch starts the
    producer's transaction here (no transaction of that producer and epoch open on the
    partition) are added at the coordinator first, in one call. Returns the partitions that
    could not be added, with the error to answer (Kafka's: the coordinator being unavailable is
    NOT_ENOUGH_REPLICAS, which producers retry)."""
    transactional_id = req.get("transactional_id")
    if not transactional_id:
        return {}
    wanted: list[TopicPartition] = []
    producer: tuple[int, int] | None = None
    for topic_data in req["topic_data"]:
        topic = resolve_topic(broker, topic_data.get("name"), topic_data.get("topic_id"))
        if topic is None:
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
            entry = partition.log.producers.producers.get(header.producer_id)
            if entry is not None and entry.epoch == header.producer_epoch and entry.current_txn_first_offset >= 0:
                continue  # its transaction is already open here
            wanted.append((topic.name, pd["index"]))
            producer = (header.producer_id, header.producer_epoch)
    if producer is None:
        return {}
    code = await broker.transactions.adder.add(transactional_id, producer[0], producer[1], wanted)
    if code == ErrorCode.NONE:
        return {}
    return dict.fromkeys(wanted, ErrorCode.NOT_ENOUGH_REPLICAS if code in UNAVAILABLE else code)


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
