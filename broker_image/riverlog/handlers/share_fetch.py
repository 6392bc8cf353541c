"""ShareFetch and ShareAcknowledge: a share group's members fetch and acknowledge records at the
partition leaders (KIP-932).

Per partition the leader keeps a share-partition (``share/partition.py``): ShareFetch releases the
locks that expired, applies the acknowledgements riding on the request (their state writes run
while the fetch does, and the answer waits for both), then acquires records for the member -- it
reads the log from the lowest acquirable offset, and acquires only offsets the read covers (whole
batches; the walk over their headers gives the covered end), up to the request's ``MaxRecords``.
The records go back as the batches read up to the one holding the last acquired offset, with the
acquired ranges and their delivery counts: the client keeps only records inside those ranges and
acknowledges gaps.
With nothing to acquire the request waits up to ``MaxWaitMs`` for data or released records.
A group with ``share.isolation.level=read_committed`` reads only below the last stable offset, and
the records of aborted transactions it acquires are archived at once, not handed out.

Share sessions (``share/sessions.py``) carry the partitions between requests; closing one (epoch
-1) releases what the member still holds here. ShareAcknowledge is the acknowledgement half alone.
READ on the group and on each topic is required, as in Kafka.
"""

from __future__ import annotations

import asyncio
import os
import struct
import uuid
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..clock import now_ms
from ..group_config import GROUP_RESOURCE, share_read_committed, share_reset
from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.file_region import FileRegion
from ..server.dispatch import RequestContext
from ..share.manager import Start, share_settings
from ..share.partition import AcknowledgementBatch, InvalidAcknowledgement, InvalidRecordState, ShareSettings
from ..share.sessions import FINAL_EPOCH, INITIAL_EPOCH, SharePartitionKey, ShareSessionError
from ..storage.txn_index import AbortedTxn
from .authorize import Operation, on_group, on_topic
from .common import Body

if TYPE_CHECKING:
    from ..cluster.partition import Partition
    from .host import BrokerHost

MAX_INT32 = (1 << 31) - 1
DEFAULT_MAX_RECORDS = 500
# Re-check for released records or expired locks this often while a fetch waits (they do not
# wake the log's data waiters).
RECHECK_S = 0.1
_BATCH_START = struct.Struct(">qi")  # base offset, batch length (from the byte after it)
_HEAD = 61  # a v2 batch header up to its record count
_ATTRIBUTES = struct.Struct(">h")
_ATTRIBUTES_AT = 21
_LAST_OFFSET_DELTA = struct.Struct(">i")
_LAST_OFFSET_DELTA_AT = 23
_PRODUCER_ID = struct.Struct(">q")
_PRODUCER_ID_AT = 43
_TRANSACTIONAL, _CONTROL = 0x10, 0x20


@dataclass(frozen=True)
class _Batch:
    region: FileRegion
    position: int  # where the batch ends in its file
    next_offset: int
    base_offset: int = 0
    producer_id: int = -1
    attributes: int = 0

    @property
    def transactional_data(self) -> bool:
        return bool(self.attributes & _TRANSACTIONAL) and not self.attributes & _CONTROL


def whole_batches(regions: list[FileRegion]) -> list[_Batch]:
    """The whole batches in ``regions``, each with where it ends, the offset after it and what a
    read_committed share group needs to tell an aborted transaction's batch."""
    out: list[_Batch] = []
    for region in regions:
        pos, stop = region.position, region.position + region.size
        while pos + _HEAD <= stop:
            head = os.pread(region.fileno(), _HEAD, pos)
            base, length = _BATCH_START.unpack_from(head)
            if pos + 12 + length > stop:
                break
            (delta,) = _LAST_OFFSET_DELTA.unpack_from(head, _LAST_OFFSET_DELTA_AT)
            (attributes,) = _ATTRIBUTES.unpack_from(head, _ATTRIBUTES_AT)
            (producer_id,) = _PRODUCER_ID.unpack_from(head, _PRODUCER_ID_AT)
            pos += 12 + length
            out.append(_Batch(region, pos, base + delta + 1, base, producer_id, attributes))
    return out


def aborted_spans(batches: list[_Batch], aborted: list[AbortedTxn]) -> list[tuple[int, int]]:
    """The (first, last) offsets of the batches that belong to an aborted transaction: data
    batches of its producer between its first offset and its abort marker."""
    return [(b.base_offset, b.next_offset - 1) for b in batches if b.transactional_data
            and any(t.producer_id == b.producer_id and t.first_offset <= b.base_offset <= t.last_offset
                    for t in aborted)]


def up_to(batches: list[_Batch], last_offset: int) -> list[FileRegion]:
    """The regions cut after the batch holding ``last_offset``: what the acquired records need,
    not everything read."""
    out: list[FileRegion] = []
    for batch in batches:
        region = batch.region
        start = region.position
        if out and out[-1].file is region.file and out[-1].position == start:
            out[-1] = FileRegion(region.file, start, batch.position - start)
        else:
            out.append(FileRegion(region.file, start, batch.position - start))
        if batch.next_offset > last_offset:
            break
    return out


def _batches(entries: list[Body]) -> list[AcknowledgementBatch]:
    return [AcknowledgementBatch(b["first_offset"], b["last_offset"], tuple(b["acknowledge_types"]))
            for b in entries]


def _leader(broker: BrokerHost, p: Partition | None) -> Body:
    if p is None:
        return {"leader_id": -1, "leader_epoch": -1}
    return {"leader_id": broker.node_id, "leader_epoch": p.leader_epoch}


def _resolve(broker: BrokerHost, topic_id: uuid.UUID, index: int) -> tuple[Partition | None, ErrorCode]:
    topic = broker.image.topic_by_id(topic_id)
    if topic is None:
        return None, ErrorCode.UNKNOWN_TOPIC_ID
    p = broker.replicas.get(topic.name, index)
    if p is None:
        return None, ErrorCode.NOT_LEADER_OR_FOLLOWER
    try:
        p.check_leader(-1)
    except KafkaError as exc:
        return None, exc.code
    return p, ErrorCode.NONE


def _acknowledge(broker: BrokerHost, group_id: str, member_id: str, topic_id: uuid.UUID, index: int,
                 batches: list[AcknowledgementBatch], now: int) -> Coroutine[Any, Any, ErrorCode]:
    """Apply a member's acknowledgements now, and return the durable write of the share-partition's
    state to await (an accepted record must not be delivered again after a leader change). Applied
    before the request's fetch, so records it releases can be acquired again by that fetch; written
    while the fetch runs, so a member's poll waits for the longer of the two, not for both."""
    p, code = _resolve(broker, topic_id, index)
    if p is None:
        return _answer(code)
    key = (group_id, topic_id, index)
    part = broker.share_partitions.get(key, p.leader_epoch)
    if part is None:
        return _answer(ErrorCode.INVALID_RECORD_STATE)
    part.expire_locks(now)
    try:
        undo = part.acknowledge(member_id, batches, now)
    except InvalidRecordState:
        return _answer(ErrorCode.INVALID_RECORD_STATE)
    except InvalidAcknowledgement:
        return _answer(ErrorCode.INVALID_REQUEST)
    # Asked now, so the write starts with the state as it is now: before the fetch acquires more.
    return _persisted(broker.share_partitions.persist_soon(key, undo))


async def _answer(code: ErrorCode) -> ErrorCode:
    return code


async def _persisted(write: asyncio.Future[ErrorCode]) -> ErrorCode:
    return persister_error(await asyncio.shield(write))


def persister_error(code: ErrorCode) -> ErrorCode:
    """The error a member gets for a failed state write, as Kafka's share-partition leader maps it:
    a coordinator moving is COORDINATOR_NOT_AVAILABLE, a newer leader NOT_LEADER_OR_FOLLOWER (the
    client looks the leader up again)."""
    if code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if code == ErrorCode.FENCED_LEADER_EPOCH:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    return code


def _denied_topics(broker: BrokerHost, ctx: RequestContext, topic_ids: set[uuid.UUID]) -> set[uuid.UUID]:
    denied = set()
    for topic_id in topic_ids:
        topic = broker.image.topic_by_id(topic_id)
        if topic is not None and not on_topic(broker, ctx, Operation.READ, topic.name):
            denied.add(topic_id)
    return denied


def _top_error(code: ErrorCode, message: str | None = None, **extra: Any) -> Body:
    return {"throttle_time_ms": 0, "error_code": code, "error_message": message, "responses": [],
            "node_endpoints": [], **extra}


async def handle_share_fetch(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    group_id, member_id, epoch = req["group_id"] or "", req["member_id"] or "", req["share_session_epoch"]
    lock_ms = _group_settings(broker, group_id).record_lock_duration_ms
    if not group_id or not member_id:
        return _top_error(ErrorCode.INVALID_REQUEST, "GroupId and MemberId are required.")
    if not on_group(broker, ctx, Operation.READ, group_id):
        return _top_error(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    requested: list[SharePartitionKey] = []
    acks: dict[SharePartitionKey, list[AcknowledgementBatch]] = {}
    for t in req["topics"]:
        for fp in t["partitions"]:
            key = (t["topic_id"], fp["partition_index"])
            requested.append(key)
            if fp["acknowledgement_batches"]:
                acks[key] = _batches(fp["acknowledgement_batches"])
    forgotten = [(t["topic_id"], i) for t in req["forgotten_topics_data"] for i in t["partitions"]]
    sessions = broker.share_sessions
    try:
        if epoch == INITIAL_EPOCH:
            if acks:
                return _top_error(ErrorCode.INVALID_REQUEST, "Acknowledge data present on initial fetch request.")
            session_partitions = sessions.open(group_id, member_id, requested).partitions
            for topic_id, index in session_partitions:
                broker.share_partitions.refresh_if_idle((group_id, topic_id, index))
        elif epoch == FINAL_EPOCH:
            session_partitions = []
        else:
            session = sessions.advance(group_id, member_id, epoch)
            session.update(requested, forgotten)
            session_partitions = session.partitions
    except ShareSessionError as exc:
        return _top_error(exc.code, exc.message)

    denied = _denied_topics(broker, ctx, {k[0] for k in requested + session_partitions})
    now = now_ms()
    answers: dict[SharePartitionKey, Body] = {}

    def answer(key: SharePartitionKey, p: Partition | None = None) -> Body:
        if key not in answers:
            answers[key] = {"partition_index": key[1], "error_code": ErrorCode.NONE, "error_message": None,
                            "acknowledge_error_code": ErrorCode.NONE, "acknowledge_error_message": None,
                            "current_leader": _leader(broker, p), "records": b"", "acquired_records": []}
        return answers[key]

    writes: dict[SharePartitionKey, Coroutine[Any, Any, ErrorCode]] = {}
    for key, batches in acks.items():
        if key[0] in denied:
            answer(key)["acknowledge_error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        else:
            writes[key] = _acknowledge(broker, group_id, member_id, key[0], key[1], batches, now)
    if epoch == FINAL_EPOCH:
        sessions.close(group_id, member_id)
        broker.share_partitions.release_member(group_id, member_id, now_ms())
    else:
        await _fetch(broker, req, group_id, member_id, session_partitions, denied, answer)
    for key, write in writes.items():
        answer(key)["acknowledge_error_code"] = await write
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
            "acquisition_lock_timeout_ms": lock_ms, "responses": _by_topic(answers),
            "node_endpoints": []}


def _group_settings(broker: BrokerHost, group_id: str) -> ShareSettings:
    """The group's share-partition settings: its group configs in this broker's metadata image
    over the broker's own settings (those, already built, for a group without any: the common
    case, and this runs on every fetch)."""
    overrides = broker.image.configs.get((GROUP_RESOURCE, group_id))
    return share_settings(broker.config, overrides) if overrides else broker.share_partitions.settings


def _start(broker: BrokerHost, group_id: str, p: Partition) -> Start:
    """Where a share-partition of the group without state starts (its share.auto.offset.reset);
    by_duration looks the time up in the log's time index, as ListOffsets does."""
    def offset_for_timestamp(timestamp: int) -> int | None:
        found = p.log.offset_for_timestamp(timestamp, max_offset=p.high_watermark)
        return None if found is None else found[0]

    return Start(share_reset(broker.image.configs.get((GROUP_RESOURCE, group_id))), now_ms(), offset_for_timestamp)


async def _fetch(broker: BrokerHost, req: Body, group_id: str, member_id: str,
                 partitions: list[SharePartitionKey], denied: set[uuid.UUID], answer: Any) -> None:
    settings = _group_settings(broker, group_id)
    read_committed = share_read_committed(broker.image.configs.get((GROUP_RESOURCE, group_id)))
    max_bytes = req["max_bytes"] or MAX_INT32
    max_records = req.get("max_records") or DEFAULT_MAX_RECORDS
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(req["max_wait_ms"], 0) / 1000
    while True:
        now = now_ms()
        total_bytes = acquired_count = 0
        involved: list[Partition] = []
        had_error = False
        for key in partitions:
            topic_id = key[0]
            index = key[1]
            if topic_id in denied:
                answer(key)["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                had_error = True
                continue
            p, code = _resolve(broker, topic_id, index)
            if p is None:
                answer(key)["error_code"] = code
                had_error = True
                continue
            involved.append(p)
            if acquired_count >= max_records or total_bytes >= max_bytes:
                continue
            hw = p.high_watermark
            # read_committed: nothing at or past the last stable offset (an open transaction).
            end = p.last_stable_offset if read_committed else hw
            try:
                part = await broker.share_partitions.take_up((group_id, topic_id, index), p.leader_epoch,
                                                             p.log.log_start_offset, hw, settings,
                                                             _start(broker, group_id, p))
            except KafkaError:
                continue  # its state cannot be read yet (the share coordinator is loading): next pass
            now = now_ms()
            part.expire_locks(now)
            first = part.next_acquirable_offset(end)
            if first is None:
                continue
            try:
                read = p.read(first, max_bytes - total_bytes, min_one_batch=total_bytes == 0,
                              read_committed=read_committed, last_stable_offset=end if read_committed else None)
            except KafkaError as exc:
                answer(key, p)["error_code"] = exc.code
                had_error = True
                continue
            batches = whole_batches(read.regions)
            if not batches:
                continue
            ranges = part.acquire(member_id, now, min(end, batches[-1].next_offset), max_records - acquired_count)
            if ranges and read_committed:
                # Records of aborted transactions are archived, never delivered (Kafka's
                # filterAbortedTransactionalAcquiredRecords); the client skips what is not acquired.
                aborted = aborted_spans(batches, p.log.aborted_transactions(ranges[0].first_offset,
                                                                            ranges[-1].last_offset + 1))
                if aborted:
                    ranges = part.archive_acquired(member_id, ranges, aborted)
            if not ranges:
                continue
            regions = up_to(batches, ranges[-1].last_offset)
            body = answer(key, p)
            body["records"] = regions
            body["acquired_records"] = [{"first_offset": r.first_offset, "last_offset": r.last_offset,
                                         "delivery_count": r.delivery_count} for r in ranges]
            total_bytes += sum(r.size for r in regions)
            acquired_count += sum(r.last_offset - r.first_offset + 1 for r in ranges)
        remaining = deadline - loop.time()
        if acquired_count or had_error or remaining <= 0:
            return
        waiters = [p.data_arrived() for p in involved]
        if waiters:
            await asyncio.wait(waiters, timeout=min(remaining, RECHECK_S), return_when=asyncio.FIRST_COMPLETED)
            for w in waiters:
                w.cancel()
        else:
            await asyncio.sleep(min(remaining, RECHECK_S))


def _by_topic(answers: dict[SharePartitionKey, Body]) -> list[Body]:
    out: dict[uuid.UUID, list[Body]] = {}
    for (topic_id, _), body in answers.items():
        out.setdefault(topic_id, []).append(body)
    return [{"topic_id": topic_id, "partitions": parts} for topic_id, parts in out.items()]


async def handle_share_acknowledge(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body:
    group_id, member_id, epoch = req["group_id"] or "", req["member_id"] or "", req["share_session_epoch"]
    lock_ms = _group_settings(broker, group_id).record_lock_duration_ms
    if not group_id or not member_id:
        return _top_error(ErrorCode.INVALID_REQUEST, "GroupId and MemberId are required.")
    if not on_group(broker, ctx, Operation.READ, group_id):
        return _top_error(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if epoch == INITIAL_EPOCH:
        return _top_error(ErrorCode.INVALID_SHARE_SESSION_EPOCH, "ShareAcknowledge cannot open a share session.")
    if epoch != FINAL_EPOCH:
        try:
            broker.share_sessions.advance(group_id, member_id, epoch)
        except ShareSessionError as exc:
            return _top_error(exc.code, exc.message)
    denied = _denied_topics(broker, ctx, {t["topic_id"] for t in req["topics"]})
    now = now_ms()
    # Every partition's acknowledgements applied in order, their state writes awaited together.
    writes = [(t["topic_id"], ap["partition_index"], _answer(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
               if t["topic_id"] in denied else
               _acknowledge(broker, group_id, member_id, t["topic_id"], ap["partition_index"],
                            _batches(ap["acknowledgement_batches"]), now))
              for t in req["topics"] for ap in t["partitions"]]
    codes = await asyncio.gather(*(write for _, _, write in writes))
    by_topic: dict[uuid.UUID, list[Body]] = {}
    for (topic_id, index, _), code in zip(writes, codes, strict=True):
        p, _ = _resolve(broker, topic_id, index)
        by_topic.setdefault(topic_id, []).append({"partition_index": index, "error_code": code, "error_message": None,
                                                  "current_leader": _leader(broker, p)})
    responses = [{"topic_id": topic_id, "partitions": parts} for topic_id, parts in by_topic.items()]
    if epoch == FINAL_EPOCH:
        broker.share_sessions.close(group_id, member_id)
        broker.share_partitions.release_member(group_id, member_id, now_ms())
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
            "acquisition_lock_timeout_ms": lock_ms, "responses": responses, "node_endpoints": []}
