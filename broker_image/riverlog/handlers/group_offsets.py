"""Committed offsets APIs: OffsetCommit, TxnOffsetCommit, OffsetFetch (single group v1-7,
batched v8+) and OffsetDelete.

Topics and partitions that do not exist are answered here, per partition, before the group
coordinator sees the rest (as Kafka's request layer does); the coordinator checks membership
and generations and stores the offsets in ``__consumer_offsets``.

With an authorizer, as Kafka: OffsetCommit needs READ on the group (else every partition is
GROUP_AUTHORIZATION_FAILED) and on each topic (else its partitions are TOPIC_AUTHORIZATION_FAILED,
existing or not); TxnOffsetCommit WRITE on the transactional id first, then the same; OffsetFetch
DESCRIBE on the group, and on each topic named (a listing of all the group's offsets leaves out
the topics the principal may not describe); OffsetDelete DELETE on the group and READ on each topic.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..controller.topic_names import GROUP_METADATA_TOPIC
from ..coordinator.offset_ops import CommitPartition, CommitRequest, PartitionErrors, TxnCommitRequest
from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.primitives import ZERO_UUID
from ..server.dispatch import RequestContext
from ..transactions.partition_adder import UNAVAILABLE
from .authorize import Operation, ResourceType, allowed, on_group, on_topic, on_transactional_id
from .common import Body, resolve_topic, unknown_topic_code

if TYPE_CHECKING:
    from ..cluster.partition import Partition
    from .host import BrokerHost

TOPIC_IDS_FROM_VERSION = 10  # OffsetCommit and OffsetFetch v10 name topics by id
TXN_V2_FROM_VERSION = 5  # TxnOffsetCommit from a transaction version 2 producer (KIP-890 part 2)
ABORTABLE_FROM_VERSION = 4  # the first TxnOffsetCommit version that knows TRANSACTION_ABORTABLE
VERIFICATION_ENABLE = "transaction.partition.verification.enable"
# How long CONCURRENT_TRANSACTIONS from the transaction coordinator is retried before the
# client is told to retry (the markers of its last transaction are usually written by then).
TXN_V2_CONCURRENT_WINDOW_S = 5.0


class _TopicErrors:
    """Per-partition answers collected in request order, merged from both layers."""

    def __init__(self) -> None:
        self.topics: dict[str, tuple[uuid.UUID, list[tuple[int, ErrorCode]]]] = {}

    def add(self, name: str, topic_id: uuid.UUID, partition: int, error: ErrorCode) -> None:
        self.topics.setdefault(name, (topic_id, []))[1].append((partition, error))

    def merge(self, results: PartitionErrors, ids: dict[str, uuid.UUID]) -> None:
        for name, partitions in results:
            for partition, error in partitions:
                self.add(name, ids.get(name, ZERO_UUID), partition, error)

    def body(self) -> list[Body]:
        return [{"name": name, "topic_id": topic_id,
                 "partitions": [{"partition_index": p, "error_code": e} for p, e in parts]}
                for name, (topic_id, parts) in self.topics.items()]


def _topic_id(t: Body, version: int) -> uuid.UUID | None:
    if version < TOPIC_IDS_FROM_VERSION:
        return None
    topic_id = t.get("topic_id")
    return topic_id if isinstance(topic_id, uuid.UUID) and topic_id != ZERO_UUID else None


# OffsetCommit ---------------------------------------------------------------------------


async def handle_offset_commit(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    answers = _TopicErrors()
    ids: dict[str, uuid.UUID] = {}
    valid: list[tuple[str, tuple[CommitPartition, ...]]] = []
    group_ok = on_group(broker, ctx, Operation.READ, req["group_id"])
    for t in req["topics"]:
        topic_id = _topic_id(t, ctx.version)
        topic = resolve_topic(broker, t.get("name"), topic_id)
        name = topic.name if topic is not None and topic_id is not None else t.get("name") or ""
        denied = (ErrorCode.GROUP_AUTHORIZATION_FAILED if not group_ok else
                  ErrorCode.TOPIC_AUTHORIZATION_FAILED if name and not on_topic(broker, ctx, Operation.READ, name)
                  else None)
        if denied is not None:
            for p in t["partitions"]:
                answers.add(t.get("name") or "", topic_id or ZERO_UUID, p["partition_index"], denied)
            continue
        if topic is None:
            for p in t["partitions"]:
                answers.add(t.get("name") or "", topic_id or ZERO_UUID, p["partition_index"],
                            unknown_topic_code(topic_id))
            continue
        ids[topic.name] = topic.topic_id if topic_id is not None else ZERO_UUID
        good = []
        for p in t["partitions"]:
            if p["partition_index"] in topic.partitions:
                good.append(CommitPartition(p["partition_index"], p["committed_offset"],
                                            p.get("committed_leader_epoch", -1), p.get("committed_metadata")))
            else:
                answers.add(topic.name, ids[topic.name], p["partition_index"], ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if good:
            valid.append((topic.name, tuple(good)))
    if valid:
        request = CommitRequest(
            group_id=req["group_id"], generation_id=req.get("generation_id_or_member_epoch", -1),
            member_id=req.get("member_id", ""), group_instance_id=req.get("group_instance_id"),
            retention_time_ms=req.get("retention_time_ms", -1), topics=tuple(valid), version=ctx.version,
        )
        try:
            body = await broker.coordinator.call(request.group_id, lambda s, token: s.commit_offsets(token, request))
            answers.merge(body["topics"], ids)
        except KafkaError as exc:
            answers.merge([(name, [(p.partition, exc.code) for p in parts]) for name, parts in valid], ids)
    return {"throttle_time_ms": 0, "topics": answers.body()}


# TxnOffsetCommit ------------------------------------------------------------------------


async def handle_txn_offset_commit(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    """Offsets committed inside a transaction: pending in the group's coordinator until the
    transaction's marker reaches its ``__consumer_offsets`` partition."""
    answers = _TopicErrors()
    valid: list[tuple[str, tuple[CommitPartition, ...]]] = []
    whole = (ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
             if not on_transactional_id(broker, ctx, Operation.WRITE, req["transactional_id"])
             else ErrorCode.GROUP_AUTHORIZATION_FAILED if not on_group(broker, ctx, Operation.READ, req["group_id"])
             else None)
    for t in req["topics"]:
        denied = whole if whole is not None else (
            None if on_topic(broker, ctx, Operation.READ, t["name"]) else ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        if denied is not None:
            for p in t["partitions"]:
                answers.add(t["name"], ZERO_UUID, p["partition_index"], denied)
            continue
        topic = broker.image.topics.get(t["name"])
        good = []
        for p in t["partitions"]:
            if topic is not None and p["partition_index"] in topic.partitions:
                good.append(CommitPartition(p["partition_index"], p["committed_offset"],
                                            p.get("committed_leader_epoch", -1), p.get("committed_metadata")))
            else:
                answers.add(t["name"], ZERO_UUID, p["partition_index"], ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if good:
            valid.append((t["name"], tuple(good)))
    if valid and not req["group_id"]:
        answers.merge([(name, [(p.partition, ErrorCode.INVALID_GROUP_ID) for p in parts]) for name, parts in valid],
                      {})
    elif valid and (joined := await _join_transaction(broker, req, ctx.version)).error != ErrorCode.NONE:
        answers.merge([(name, [(p.partition, joined.error) for p in parts]) for name, parts in valid], {})
    elif valid:
        request = TxnCommitRequest(
            transactional_id=req["transactional_id"], group_id=req["group_id"], producer_id=req["producer_id"],
            producer_epoch=req["producer_epoch"], generation_id=req.get("generation_id", -1),
            member_id=req.get("member_id", ""), group_instance_id=req.get("group_instance_id"),
            topics=tuple(valid), version=ctx.version,
        )
        try:
            if not joined.holds():
                # A marker ended the transaction while its coordinator was asked (the call
                # below appends before it awaits, so nothing can end it in between).
                raise KafkaError("not part of an ongoing transaction", ErrorCode.INVALID_TXN_STATE)
            body = await broker.coordinator.call(request.group_id,
                                                 lambda s, token: s.commit_txn_offsets(token, request))
            answers.merge(body["topics"], {})
        except KafkaError as exc:
            answers.merge([(name, [(p.partition, exc.code) for p in parts]) for name, parts in valid], {})
    topics = [{"name": t["name"], "partitions": t["partitions"]} for t in answers.body()]
    return {"throttle_time_ms": 0, "topics": topics}


@dataclass
class _Joined:
    """The outcome of asking the transaction coordinator about the offsets partition."""

    error: ErrorCode = ErrorCode.NONE
    partition: Partition | None = None
    guard: tuple[int, object] | None = None

    def holds(self) -> bool:
        return self.guard is None or self.partition is None or self.partition.txn_verification_holds(*self.guard)


async def _join_transaction(broker: BrokerHost, req: Body, version: int) -> _Joined:
    """Before transactional offsets are written to the group's ``__consumer_offsets`` partition
    (unless the producer's transaction is already open there), ask the transaction
    coordinator, as Kafka's group coordinator does: TxnOffsetCommit v5 comes from a transaction
    version 2 producer, which sends no AddOffsetsToTxn, so the partition is added (KIP-890 part
    2); an older one's is verified to be in the transaction (part 1,
    ``transaction.partition.verification.enable``). The partition's verification guard must
    still be there at the write. The coordinator's unavailability becomes COORDINATOR_NOT_AVAILABLE
    and CONCURRENT_TRANSACTIONS (the last transaction's markers still under way), once it has
    lasted, COORDINATOR_LOAD_IN_PROGRESS, both retried by clients; not in the transaction is
    INVALID_TXN_STATE (TRANSACTION_ABORTABLE from v4)."""
    transactional_id = req["transactional_id"]
    version_2 = version >= TXN_V2_FROM_VERSION
    if not transactional_id or not (version_2 or broker.config.get_bool(VERIFICATION_ENABLE)):
        return _Joined()
    offsets_partition = (GROUP_METADATA_TOPIC, broker.coordinator.partition_for(req["group_id"]))
    producer_id, producer_epoch = req["producer_id"], req["producer_epoch"]
    try:
        partition = broker.replicas.leader_partition(*offsets_partition)
    except KafkaError:
        return _Joined()  # not the group's coordinator: the commit itself answers
    if partition.has_open_transaction(producer_id, producer_epoch):
        return _Joined()  # the transaction is already open there
    guard = (producer_id, partition.start_txn_verification(producer_id, producer_epoch, version_2))
    adder = broker.transactions.adder
    if version_2:
        code = await adder.add(transactional_id, producer_id, producer_epoch, [offsets_partition],
                               retry_window_s=TXN_V2_CONCURRENT_WINDOW_S)
    else:
        code = (await adder.verify(transactional_id, producer_id, producer_epoch, [offsets_partition]))[
            offsets_partition]
    if code in UNAVAILABLE:
        code = ErrorCode.COORDINATOR_NOT_AVAILABLE
    elif code == ErrorCode.CONCURRENT_TRANSACTIONS:
        code = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    elif code in (ErrorCode.TRANSACTION_ABORTABLE, ErrorCode.INVALID_TXN_STATE):
        code = ErrorCode.TRANSACTION_ABORTABLE if version >= ABORTABLE_FROM_VERSION else ErrorCode.INVALID_TXN_STATE
    return _Joined(code, partition, guard)


# OffsetFetch ----------------------------------------------------------------------------


def _unfetched(name: str, topic_id: uuid.UUID | None, partitions: list[int], code: ErrorCode) -> Body:
    return {"name": name, "topic_id": topic_id, "partitions": [
        {"partition_index": p, "committed_offset": -1, "committed_leader_epoch": -1, "metadata": "",
         "error_code": code} for p in partitions]}


def _fetch_group(broker: BrokerHost, ctx: RequestContext, group_id: str, topics: list[Body] | None, version: int,
                 require_stable: bool = False, member: tuple[str | None, int] = (None, -1)) -> Body:
    """One group's answer in the v8+ shape: ``{"group_id", "topics", "error_code"}``; ``member``
    is the (member id, member epoch) of a v9+ fetch, checked against a consumer group."""
    if not on_group(broker, ctx, Operation.DESCRIBE, group_id):
        return {"group_id": group_id, "topics": [], "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED}
    try:
        shard = broker.coordinator.shard_for(group_id)
    except KafkaError as exc:
        return {"group_id": group_id, "topics": [], "error_code": exc.code}
    member_error = shard.validate_consumer_fetch(group_id, *member)
    if member_error is not None:
        return {"group_id": group_id, "topics": [], "error_code": member_error}
    image = broker.image
    if topics is None:
        fetched = [t for t in shard.fetch_offsets(group_id, None, require_stable)
                   if allowed(broker, ctx, Operation.DESCRIBE, ResourceType.TOPIC, t["name"], log_denial=False)]
        if version >= TOPIC_IDS_FROM_VERSION:
            # By id, only topics that still exist can be named.
            fetched = [dict(t, topic_id=image.topics[t["name"]].topic_id) for t in fetched if t["name"] in image.topics]
        return {"group_id": group_id, "topics": fetched, "error_code": ErrorCode.NONE}
    out: list[Body] = []
    wanted: list[tuple[str, list[int]]] = []
    for t in topics:
        topic_id = _topic_id(t, version)
        if topic_id is not None:
            topic = image.topic_by_id(topic_id)
            if topic is None:
                out.append(_unfetched("", topic_id, t["partition_indexes"], ErrorCode.UNKNOWN_TOPIC_ID))
                continue
            name = topic.name
        else:
            name = t["name"]
        if not on_topic(broker, ctx, Operation.DESCRIBE, name):
            out.append(_unfetched(t.get("name") or "", topic_id, t["partition_indexes"],
                                  ErrorCode.TOPIC_AUTHORIZATION_FAILED))
            continue
        wanted.append((name, list(t["partition_indexes"])))
    for answer in shard.fetch_offsets(group_id, wanted, require_stable):
        if version >= TOPIC_IDS_FROM_VERSION:
            answer["topic_id"] = image.topics[answer["name"]].topic_id
        out.append(answer)
    return {"group_id": group_id, "topics": out, "error_code": ErrorCode.NONE}


async def handle_offset_fetch(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    # Offsets become visible only once durable; require_stable (v7+, KIP-447) also asks that
    # partitions with pending transactional offsets answer UNSTABLE_OFFSET_COMMIT.
    stable = bool(req.get("require_stable", False))
    if ctx.version >= 8:
        groups = [_fetch_group(broker, ctx, g["group_id"], g.get("topics"), ctx.version, stable,
                               (g.get("member_id"), g.get("member_epoch", -1)))
                  for g in req["groups"]]
        return {"throttle_time_ms": 0, "groups": groups}
    requested: list[Body] | None = req.get("topics")
    topics = None if requested is None else [{"name": t["name"], "partition_indexes": t["partition_indexes"]}
                                             for t in requested]
    group = _fetch_group(broker, ctx, req["group_id"], topics, ctx.version, stable)
    error = group["error_code"]
    fetched: list[Body] = group["topics"]
    if error != ErrorCode.NONE and ctx.version < 2 and requested is not None:
        # No top-level error field before v2: the group's error goes on every partition.
        fetched = [{"name": t["name"], "partitions": [
            {"partition_index": p, "committed_offset": -1, "committed_leader_epoch": -1, "metadata": "",
             "error_code": error} for p in t["partition_indexes"]]} for t in requested]
    return {"throttle_time_ms": 0, "topics": fetched, "error_code": error}


# OffsetDelete ---------------------------------------------------------------------------


async def handle_offset_delete(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    group_id = req["group_id"]
    if not on_group(broker, ctx, Operation.DELETE, group_id):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "topics": []}
    if not group_id:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.INVALID_GROUP_ID, "topics": []}
    answers = _TopicErrors()
    valid: list[tuple[str, list[int]]] = []
    for t in req["topics"]:
        topic = broker.image.topics.get(t["name"])
        partitions = [p["partition_index"] for p in t["partitions"]]
        if not on_topic(broker, ctx, Operation.READ, t["name"]):
            for p in partitions:
                answers.add(t["name"], ZERO_UUID, p, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            continue
        if topic is None:
            for p in partitions:
                answers.add(t["name"], ZERO_UUID, p, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            continue
        good = [p for p in partitions if p in topic.partitions]
        for p in partitions:
            if p not in topic.partitions:
                answers.add(t["name"], ZERO_UUID, p, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if good:
            valid.append((t["name"], good))
    error = ErrorCode.NONE
    try:
        body: dict[str, Any] = await broker.coordinator.call(
            group_id, lambda s, token: s.delete_offsets(token, group_id, valid))
        error = body["error_code"]
        answers.merge(body["topics"], {})
    except KafkaError as exc:
        error = exc.code
    topics = [{"name": t["name"], "partitions": t["partitions"]} for t in answers.body()]
    return {"throttle_time_ms": 0, "error_code": error, "topics": topics}
