"""Fetch: hand consumers and followers file regions of segment files, waiting for data up to
max_wait_ms.

Record data is never read into Python: the log returns regions and the connection sendfiles
them. Fetch sessions (KIP-227, ``cluster/fetch_sessions.py``): a full fetch with epoch 0 gets a
session if the cache has room; an incremental fetch names only changed partitions and is answered
with only the partitions that have news (records, a moved high watermark or log start offset, an
error). Partitions are read in the session's order, and one that returned records goes last next
time, so under ``fetch.max.bytes`` none starves.

A fetch carrying a replica id comes from a follower. It may read up to the log end rather than
the high watermark; its last fetched epoch is checked against our epochs first (a mismatch is
answered with the diverging epoch and no records, and the follower truncates); and its fetch
offset, once per request, tells the leader how far the follower is (high watermark, ISR), for
every partition of its session, named in the request or not.

isolation_level 1 (read_committed, consumers only): data only below the last stable offset, and
the aborted transactions overlapping what could be returned (producer id and first offset, from
the segments' transaction indexes) so the consumer can drop their records. The bound used is the
LSO rather than the last returned batch: a few extra entries are harmless (the consumer uses an
entry only once it reaches its first offset) and spare a scan for the batch boundary.

With an authorizer (as Kafka): a follower needs CLUSTER_ACTION on the cluster, a consumer READ on
each topic; every partition denied is answered TOPIC_AUTHORIZATION_FAILED (a topic that does not
exist too, so its existence does not leak), checked on every request of a session.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..clock import now_ms
from ..cluster.fetch_sessions import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    CachedPartition,
    FetchPosition,
    FetchSession,
    PartitionKey,
    SessionError,
)
from ..cluster.partition import Partition
from ..protocol.api_keys import ApiKey
from ..protocol.errors import ErrorCode, KafkaError
from ..server.dispatch import RequestContext
from .authorize import Operation, on_cluster, on_topic
from .common import Body, resolve_topic, unknown_topic_code
from .quorum import handle_raft_request, is_metadata_fetch

if TYPE_CHECKING:
    from .host import BrokerHost

MAX_INT32 = (1 << 31) - 1
READ_COMMITTED = 1
TOPIC_IDS_VERSION = 13


def _partition_error(index: int, code: ErrorCode, p: Partition | None = None) -> Body:
    """A partition answered without records. Its offsets are -1 unless ``p`` is given: Kafka
    answers a consumer's failed partition so, and librdkafka reads an answered end equal to its
    position as the partition's end (PARTITION_EOF, in place of the error). Riverlog's followers
    are given them (``p``) with OFFSET_OUT_OF_RANGE, to start over at the leader's log start
    (Kafka's ask with ListOffsets), and with a diverging epoch (no error)."""
    return {
        "partition_index": index, "error_code": code,
        "high_watermark": p.high_watermark if p else -1,
        "last_stable_offset": p.high_watermark if p else -1,
        "log_start_offset": p.log.log_start_offset if p else -1,
        # Kafka sends empty (not null) records with errors; librdkafka rejects a null record set.
        "aborted_transactions": None, "preferred_read_replica": -1, "records": b"",
    }


@dataclass
class _Outcome:
    """One pass over the fetch list: an answer per partition, in fetch order."""

    answers: list[tuple[CachedPartition, Body]]
    total: int
    involved: list[Partition]
    had_error: bool

async def handle_fetch(broker: BrokerHost, ctx: RequestContext, req: Body) -> Body | None:
    if is_metadata_fetch(req):
        # A voter or observer of the metadata quorum replicating __cluster_metadata.
        return await handle_raft_request(ApiKey.FETCH, broker, ctx, req)
    replica_state = req.get("replica_state") or {}
    replica_id = req.get("replica_id", -1)
    if replica_id is None or replica_id < 0:
        replica_id = replica_state.get("replica_id", -1) if replica_state else -1
    is_replica = replica_id is not None and replica_id >= 0
    max_bytes = req.get("max_bytes") or MAX_INT32
    min_bytes = max(req.get("min_bytes", 1), 0)
    max_wait = max(req.get("max_wait_ms", 0), 0) / 1000
    replica_epoch = replica_state.get("replica_epoch", -1) if replica_state else -1
    follower = (replica_id, replica_epoch if replica_epoch is not None else -1) if is_replica else None
    read_committed = not is_replica and req.get("isolation_level", 0) == READ_COMMITTED

    # The session decides what to read: the request's partitions, or the whole session's.
    uses_ids = ctx.version >= TOPIC_IDS_VERSION
    session_id = req.get("session_id", INVALID_SESSION_ID)
    epoch = req.get("session_epoch", FINAL_EPOCH)
    requested = _requested(broker, req, uses_ids)
    cache = broker.fetch_sessions
    session: FetchSession | None = None
    if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
        if session_id != INVALID_SESSION_ID:
            cache.remove(session_id)  # a full fetch closes the fetcher's old session
        fetch_list = requested
    else:
        try:
            session = cache.incremental(session_id, epoch, uses_ids, now_ms())
        except SessionError as exc:
            return {"throttle_time_ms": 0, "error_code": ErrorCode(exc.code), "session_id": INVALID_SESSION_ID,
                    "responses": []}
        session.update(requested, _forgotten(req, uses_ids))
        fetch_list = list(session.partitions.values())

    if is_replica:
        denied = {c.topic for c in fetch_list} if not on_cluster(broker, ctx, Operation.CLUSTER_ACTION) else set()
    else:
        denied = {name for name in {c.topic for c in fetch_list if c.topic}
                  if not on_topic(broker, ctx, Operation.READ, name)}
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max_wait
    first = True
    while True:
        # Only the first pass reports the follower's position: later passes re-read after a wake-up.
        outcome = _collect(broker, fetch_list, max_bytes, follower, first, read_committed, denied)
        first = False
        remaining = deadline - loop.time()
        if outcome.total >= min_bytes or outcome.had_error or remaining <= 0 or not outcome.involved:
            break
        waiters = [p.data_arrived() for p in outcome.involved]
        await asyncio.wait(waiters, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
        for w in waiters:
            w.cancel()

    answers = outcome.answers
    if session is not None:
        answers = _news_only(session, answers, uses_ids)
    elif epoch == INITIAL_EPOCH:
        session = cache.create(fetch_list, privileged=is_replica, uses_topic_ids=uses_ids, now_ms=now_ms())
        if session is not None:
            for cached, body in answers:  # what the fetcher now knows, for the next incremental answer
                _has_news(cached, body)
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE,
            "session_id": session.session_id if session is not None else INVALID_SESSION_ID,
            "responses": _by_topic(answers, uses_ids)}


def _requested(broker: BrokerHost, req: Body, uses_ids: bool) -> list[CachedPartition]:
    """The request's partitions, each with its topic's name where this broker knows the topic."""
    found: list[CachedPartition] = []
    for t in req["topics"]:
        topic_id = t.get("topic_id") if uses_ids else None
        topic = resolve_topic(broker, t.get("topic"), topic_id)
        name = topic.name if topic is not None else (t.get("topic") or "")
        for fp in t["partitions"]:
            position = FetchPosition(fp["fetch_offset"], fp["partition_max_bytes"], fp.get("current_leader_epoch", -1),
                                     fp.get("last_fetched_epoch", -1), fp.get("log_start_offset", -1))
            found.append(CachedPartition(name, topic_id, fp["partition"], position))
    return found


def _forgotten(req: Body, uses_ids: bool) -> list[PartitionKey]:
    keys: list[PartitionKey] = []
    for t in req.get("forgotten_topics_data") or []:
        topic: Any = t.get("topic_id") if uses_ids else t.get("topic")
        keys += [(topic, index) for index in t["partitions"]]
    return keys


def _has_news(cached: CachedPartition, body: Body) -> bool:
    records = body["records"]
    size = sum(r.size for r in records) if isinstance(records, list) else len(records)
    return cached.must_respond(records=size, error=body["error_code"], high_watermark=body["high_watermark"],
                               last_stable_offset=body["last_stable_offset"],
                               log_start_offset=body["log_start_offset"], diverging="diverging_epoch" in body)


def _news_only(session: FetchSession, answers: list[tuple[CachedPartition, Body]],
               uses_ids: bool) -> list[tuple[CachedPartition, Body]]:
    """An incremental answer: only partitions with news; those with records go last next time."""
    kept = []
    for cached, body in answers:
        if _has_news(cached, body):
            kept.append((cached, body))
            if body["records"]:
                key: PartitionKey = (cached.topic_id if uses_ids and cached.topic_id is not None else cached.topic,
                                     cached.partition)
                session.rotate_to_back(key)
    return kept


def _by_topic(answers: list[tuple[CachedPartition, Body]], uses_ids: bool) -> list[Body]:
    """Group answers into the response's topics, consecutive partitions of a topic together."""
    responses: list[Body] = []
    last: object = None
    for cached, body in answers:
        key = cached.topic_id if uses_ids else cached.topic
        if not responses or key != last:
            responses.append({"topic": cached.topic, "topic_id": cached.topic_id, "partitions": []})
            last = key
        responses[-1]["partitions"].append(body)
    return responses


def _collect(
    broker: BrokerHost, fetch_list: list[CachedPartition], max_bytes: int, follower: tuple[int, int] | None,
    report: bool, read_committed: bool = False, denied: frozenset[str] | set[str] = frozenset(),
) -> _Outcome:
    is_replica = follower is not None
    fetch_time = now_ms()
    total = 0
    had_error = False
    involved: list[Partition] = []
    answers: list[tuple[CachedPartition, Body]] = []
    metrics = broker.metrics
    for cached in fetch_list:
        index = cached.partition
        fp = cached.position
        if cached.topic in denied:
            answers.append((cached, _partition_error(index, ErrorCode.TOPIC_AUTHORIZATION_FAILED)))
            continue
        topic = resolve_topic(broker, cached.topic, cached.topic_id)
        if topic is None:
            answers.append((cached, _partition_error(index, unknown_topic_code(cached.topic_id))))
            had_error = True
            continue
        cached.topic = topic.name
        p = broker.replicas.get(topic.name, index)
        try:
            if p is None:
                raise KafkaError("", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            p.check_leader(fp.current_leader_epoch)
            if follower is not None:
                if follower[0] not in p.replicas:
                    raise KafkaError("", ErrorCode.NOT_LEADER_OR_FOLLOWER)
                diverging = p.diverging_epoch(fp.last_fetched_epoch, fp.fetch_offset)
                if diverging is not None:
                    entry = _partition_error(index, ErrorCode.NONE, p)
                    entry["diverging_epoch"] = {"epoch": diverging[0], "end_offset": diverging[1]}
                    answers.append((cached, entry))
                    had_error = True  # answer at once: the follower must truncate first
                    continue
            budget = min(fp.partition_max_bytes, max_bytes - total)
            lso = p.last_stable_offset  # once per partition and pass: the read and the answer
            # KIP-74: only the first partition with data may exceed the byte limits.
            read = p.read(fp.fetch_offset, max(budget, 0), replica=is_replica, min_one_batch=total == 0,
                          read_committed=read_committed, last_stable_offset=lso) \
                if budget > 0 or total == 0 else None
        except KafkaError as exc:
            answers.append((cached, _partition_error(index, exc.code, p if is_replica else None)))
            had_error = True
            continue
        if follower is not None and report and p.log.log_start_offset <= fp.fetch_offset <= p.log.log_end_offset:
            broker.replicas.record_follower_fetch(p, follower[0], fp.fetch_offset, follower[1], fetch_time)
        involved.append(p)
        regions = read.regions if read is not None else []
        size = read.size if read is not None else 0
        total += size
        if size and not is_replica:  # the metric counts what consumers read
            metrics.bytes_out.labels(topic=topic.name).inc(size)
        aborted = None
        if read_committed and size:
            # None when there are none: clients read null and an empty list alike (Kafka sends
            # the empty list). Measured here, an empty list in every answer made librdkafka's
            # read_committed consumer of 100 partitions wait ~10x longer at p99 (O100x1: 28 ms
            # against 3 ms, docs/benchmarks.md); why was not found.
            aborted = [{"producer_id": t.producer_id, "first_offset": t.first_offset}
                       for t in p.log.aborted_transactions(fp.fetch_offset, lso)] or None
        answers.append((cached, {
            "partition_index": index, "error_code": ErrorCode.NONE,
            "high_watermark": p.high_watermark, "last_stable_offset": lso,
            "log_start_offset": p.log.log_start_offset, "aborted_transactions": aborted,
            "preferred_read_replica": -1, "records": regions,
        }))
    return _Outcome(answers, total, involved, had_error)
