"""The replica fetcher's side of fetch sessions (KIP-227): ``FetchSessionHandler``'s bookkeeping,
checked alone (what the next request holds, how answers move the session on), against the
leader's session cache (``cluster/fetch_sessions.py``) over a random run, and inside a
``LeaderFetcher`` applying answers to real logs (no sockets)."""

from __future__ import annotations

import asyncio
import random
import uuid
from pathlib import Path
from typing import Any

import pytest
from riverlog.cluster.fetch_session_handler import FetchSessionHandler, PartitionFetch, SessionKey, SessionRequest
from riverlog.cluster.fetch_sessions import (
    MAX_EPOCH,
    CachedPartition,
    FetchPosition,
    FetchSessionCache,
    SessionError,
)
from riverlog.cluster.fetcher import FetcherConfig, LeaderFetcher, ReplicaFetcherManager, _FetchState
from riverlog.cluster.partition import Partition
from riverlog.protocol.errors import ErrorCode
from riverlog.protocol.record_batch import NewRecord, build_batch
from riverlog.storage.config import LogConfig
from riverlog.storage.log import Log

pytestmark = pytest.mark.unit

TOPIC_ID = uuid.UUID(int=7)
OTHER_ID = uuid.UUID(int=8)


def key(index: int, topic: uuid.UUID = TOPIC_ID) -> SessionKey:
    return (topic, index)


def fetch(offset: int, *, epoch: int = 1, last: int = 1, start: int = 0, max_bytes: int = 1 << 20) -> PartitionFetch:
    return PartitionFetch(fetch_offset=offset, current_leader_epoch=epoch, last_fetched_epoch=last,
                          log_start_offset=start, partition_max_bytes=max_bytes)


def positions(n: int, offset: int = 0) -> dict[SessionKey, PartitionFetch]:
    return {key(i): fetch(offset) for i in range(n)}


def established(n: int = 3, session_id: int = 42) -> tuple[FetchSessionHandler, dict[SessionKey, PartitionFetch]]:
    """A handler whose full first request got session ``session_id``: the next one is (42, 1)."""
    handler = FetchSessionHandler()
    wanted = positions(n)
    assert handler.handle_response(handler.build(wanted, True), ErrorCode.NONE, session_id)
    return handler, wanted


# The bookkeeping alone ---------------------------------------------------------------------------


def test_first_request_is_full_and_asks_for_a_session() -> None:
    handler = FetchSessionHandler()
    wanted = positions(3)
    request = handler.build(wanted, True)
    assert (request.session_id, request.epoch) == (0, 0) and request.full
    assert request.send == wanted and request.forget == []
    assert handler.full_requests == 1 and handler.incremental_requests == 0 and handler.partitions_sent == 3


def test_a_session_makes_the_next_requests_incremental_naming_only_changes() -> None:
    handler, wanted = established()
    assert (handler.session_id, handler.epoch) == (42, 1) and handler.incremental

    # Nothing changed: an empty incremental request still fetches the whole session.
    request = handler.build(wanted, True)
    assert (request.session_id, request.epoch) == (42, 1) and not request.full
    assert request.send == {} and request.forget == []
    assert handler.handle_response(request, ErrorCode.NONE, 42)
    assert handler.epoch == 2

    # Each field of a partition's request data counts as a change.
    for changed in (fetch(5), fetch(0, epoch=2), fetch(0, last=2), fetch(0, start=3), fetch(0, max_bytes=99)):
        now = {**wanted, key(1): changed}
        request = handler.build(now, True)
        assert request.send == {key(1): changed} and request.forget == []
        assert handler.handle_response(request, ErrorCode.NONE, 42)
        wanted = now
    assert handler.epoch == 7

    # A partition followed anew is added; one no longer fetched is forgotten.
    now = {k: v for k, v in wanted.items() if k != key(0)} | {key(0, OTHER_ID): fetch(9)}
    request = handler.build(now, True)
    assert request.send == {key(0, OTHER_ID): fetch(9)} and request.forget == [key(0)]
    assert request.wanted == now
    assert handler.handle_response(request, ErrorCode.NONE, 42)
    assert handler.full_requests == 1 and handler.incremental_requests == 7


def test_epoch_wraps_to_one_after_the_largest_int32() -> None:
    handler, wanted = established()
    handler.epoch = MAX_EPOCH
    request = handler.build(wanted, True)
    assert request.epoch == MAX_EPOCH
    assert handler.handle_response(request, ErrorCode.NONE, 42)
    assert handler.epoch == 1


def test_no_room_for_a_session_keeps_full_fetches_that_ask_again() -> None:
    handler = FetchSessionHandler()
    wanted = positions(2)
    for _ in range(3):
        request = handler.build(wanted, True)
        assert (request.session_id, request.epoch) == (0, 0) and request.send == wanted
        assert handler.handle_response(request, ErrorCode.NONE, 0)  # its partitions are applied
    assert handler.full_requests == 3 and handler.incremental_requests == 0


def test_session_not_found_starts_a_new_session() -> None:
    handler, wanted = established()
    request = handler.build(wanted, True)
    assert not handler.handle_response(request, ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0)
    request = handler.build(wanted, True)
    assert (request.session_id, request.epoch) == (0, 0) and request.send == wanted


@pytest.mark.parametrize("code", [ErrorCode.INVALID_FETCH_SESSION_EPOCH, ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR,
                                  ErrorCode.UNKNOWN_SERVER_ERROR])
def test_other_errors_close_the_session_with_a_full_fetch(code: ErrorCode) -> None:
    handler, wanted = established()
    request = handler.build(wanted, True)
    assert not handler.handle_response(request, code, 0)
    request = handler.build(wanted, True)
    # The leader may still hold session 42: the full request closes it and makes a new one.
    assert (request.session_id, request.epoch) == (42, 0) and request.send == wanted and request.forget == []
    assert handler.handle_response(request, ErrorCode.NONE, 77)
    request = handler.build(wanted, True)
    assert (request.session_id, request.epoch) == (77, 1) and request.send == {}


def test_a_lost_connection_restarts_with_a_full_fetch_closing_the_old_session() -> None:
    handler, wanted = established()
    handler.build({**wanted, key(0): fetch(3)}, True)  # sent, never answered
    handler.request_full()
    request = handler.build(wanted, True)
    assert (request.session_id, request.epoch) == (42, 0) and request.send == wanted


def test_an_incremental_answer_without_the_session_is_not_applied() -> None:
    handler, wanted = established()
    request = handler.build(wanted, True)
    assert not handler.handle_response(request, ErrorCode.NONE, 0)  # the leader ended the session
    assert handler.build(wanted, True).session_id == 0

    handler, wanted = established()
    request = handler.build(wanted, True)
    assert not handler.handle_response(request, ErrorCode.NONE, 43)  # another session's answer
    request = handler.build(wanted, True)
    assert (request.session_id, request.epoch) == (42, 0)


def test_a_refreshed_partition_sits_one_request_out_and_rejoins_as_new() -> None:
    handler, wanted = established()
    handler.refresh(key(1))
    request = handler.build(wanted, True)
    assert request.send == {} and request.forget == [key(1)]
    assert key(1) not in request.wanted
    assert handler.handle_response(request, ErrorCode.NONE, 42)
    request = handler.build(wanted, True)
    assert request.send == {key(1): wanted[key(1)]} and request.forget == []
    # A partition to refresh that left the session anyway (it backed off) just comes back later.
    handler.handle_response(request, ErrorCode.NONE, 42)
    handler.refresh(key(2))
    without = {k: v for k, v in wanted.items() if k != key(2)}
    request = handler.build(without, True)
    assert request.forget == [key(2)]
    handler.handle_response(request, ErrorCode.NONE, 42)
    assert handler.build(wanted, True).send == {key(2): wanted[key(2)]}


def test_a_change_of_topic_naming_needs_a_new_session() -> None:
    handler, _ = established()
    names = {("orders", 0): fetch(0)}
    request = handler.build(names, False)
    assert (request.session_id, request.epoch) == (42, 0) and request.send == names


# Against the leader's session cache -----------------------------------------------------------------


class Leader:
    """The session part of the leader's Fetch handler, over the real cache."""

    def __init__(self, slots: int, eviction_ms: int) -> None:
        self.cache = FetchSessionCache(slots, eviction_ms)
        self.now = 0

    def serve(self, request: SessionRequest) -> tuple[int, int]:
        """(error code, session id) of the answer."""
        self.now += 1
        requested = [CachedPartition("", k[0] if isinstance(k[0], uuid.UUID) else None, k[1],
                                     FetchPosition(f.fetch_offset, f.partition_max_bytes, f.current_leader_epoch,
                                                   f.last_fetched_epoch, f.log_start_offset))
                     for k, f in request.send.items()]
        if request.full:
            if request.session_id:
                self.cache.remove(request.session_id)
            session = self.cache.create(requested, privileged=True, uses_topic_ids=True, now_ms=self.now)
            return ErrorCode.NONE, session.session_id if session else 0
        try:
            session = self.cache.incremental(request.session_id, request.epoch, True, self.now)
        except SessionError as exc:
            return exc.code, 0
        session.update(requested, request.forget)
        return ErrorCode.NONE, session.session_id

    def positions(self, session_id: int) -> dict[SessionKey, PartitionFetch]:
        session = self.cache.get(session_id)
        assert session is not None
        return {k: PartitionFetch(p.position.fetch_offset, p.position.current_leader_epoch,
                                  p.position.last_fetched_epoch, p.position.log_start_offset,
                                  p.position.partition_max_bytes) for k, p in session.partitions.items()}


def test_the_leaders_session_always_holds_what_the_follower_fetches() -> None:
    rng = random.Random(227)
    # A lost answer to a full request leaves its new session orphaned at the leader (as in Kafka)
    # until it is evicted: with one slot and no eviction we would fetch in full from then on.
    leader = Leader(slots=2, eviction_ms=50)
    handler = FetchSessionHandler()
    wanted: dict[SessionKey, PartitionFetch] = positions(20)
    for _ in range(3000):
        # The follower's partitions move on, come and go.
        for k in list(wanted):
            roll = rng.random()
            if roll < 0.05:
                wanted[k] = fetch(wanted[k].fetch_offset + rng.randint(1, 9))
            elif roll < 0.06:
                del wanted[k]
        if rng.random() < 0.2:
            wanted[key(rng.randrange(40))] = fetch(rng.randrange(100), epoch=rng.randint(1, 3))
        marked = set()
        if rng.random() < 0.05 and wanted:
            marked.add(rng.choice(list(wanted)))
            handler.refresh(*marked)
        request = handler.build(wanted, True)
        fault = rng.random()
        if fault < 0.03:  # the session is evicted at the leader
            leader.cache.remove(handler.session_id)
        if fault < 0.06 and fault >= 0.03:  # the request is lost on the way
            handler.request_full()
            continue
        code, session_id = leader.serve(request)
        if fault >= 0.06 and fault < 0.08:  # the answer is lost on the way
            handler.request_full()
            continue
        applied = handler.handle_response(request, code, session_id)
        assert applied == (code == ErrorCode.NONE)
        if applied and session_id:
            # What the leader reads for us is exactly what we asked for, refreshed partitions aside.
            assert leader.positions(session_id) == request.wanted
            assert set(wanted) - set(request.wanted) <= marked
    assert handler.incremental_requests > 5 * handler.full_requests
    assert handler.partitions_sent < 3000 * 5  # a full fetch every time would send ~20 per request


# Inside a LeaderFetcher, with real logs ------------------------------------------------------------


def follower_partition(tmp_path: Path, index: int) -> Partition:
    log = Log.open(tmp_path / f"orders-{index}", LogConfig(), now_ms=0)
    return Partition("orders", index, TOPIC_ID, log, node_id=2, leader=1, leader_epoch=1, replicas=(1, 2))


def answer(index: int, *, hw: int, records: bytes = b"", error: int = ErrorCode.NONE) -> dict[str, Any]:
    return {"partition_index": index, "error_code": error, "high_watermark": hw, "last_stable_offset": hw,
            "log_start_offset": 0, "records": records}


def response(session_id: int, *parts: dict[str, Any]) -> dict[str, Any]:
    return {"error_code": ErrorCode.NONE, "session_id": session_id,
            "responses": [{"topic": "orders", "topic_id": TOPIC_ID, "partitions": list(parts)}] if parts else []}


def test_fetcher_builds_session_requests_and_keeps_partitions_without_news(tmp_path: Path) -> None:
    async def scenario() -> None:
        manager = ReplicaFetcherManager(2, FetcherConfig(backoff_ms=60_000), lambda _: None, lambda: 5)
        fetcher = LeaderFetcher(manager, 1)
        parts = [follower_partition(tmp_path, i) for i in range(3)]
        for p in parts:
            fetcher.add((p.topic, p.index), _FetchState(p, 1))

        def round_trip(resp: dict[str, Any]) -> dict[str, Any]:
            """Build a request as the fetch loop does, answer it with ``resp``; the request body."""
            sent = {(p.topic_id, p.index): (s, p.log.log_end_offset)
                    for s in fetcher.partitions.values() if (p := s.partition) and s.delayed_until == 0}
            request = fetcher.session.build({k: fetcher._fetch_of(s, o) for k, (s, o) in sent.items()}, True)
            body = fetcher._request(request, sent)
            fetcher._process(request, sent, resp)
            return body

        batch = build_batch([NewRecord(value=b"x")] * 4, base_offset=0, partition_leader_epoch=1)
        body = round_trip(response(42, answer(0, hw=4, records=batch), answer(1, hw=0), answer(2, hw=0)))
        assert (body["session_id"], body["session_epoch"]) == (0, 0)
        assert [p["partition"] for p in body["topics"][0]["partitions"]] == [0, 1, 2]
        assert body["replica_state"] == {"replica_id": 2, "replica_epoch": 5}
        assert parts[0].log.log_end_offset == 4 and parts[0].high_watermark == 4

        # Incremental: only partition 0 moved. The answer mentions partition 0 only: the others
        # had no news and stay as they are.
        body = round_trip(response(42, answer(0, hw=4)))
        assert (body["session_id"], body["session_epoch"]) == (42, 1)
        assert [(p["partition"], p["fetch_offset"]) for t in body["topics"] for p in t["partitions"]] == [(0, 4)]
        assert body["forgotten_topics_data"] == []
        assert [p.log.log_end_offset for p in parts] == [4, 0, 0] and parts[0].high_watermark == 4

        # An error backs partition 1 off: it leaves the session (forgotten, by topic id).
        round_trip(response(42, answer(1, hw=0, error=ErrorCode.NOT_LEADER_OR_FOLLOWER)))
        assert fetcher.partitions[("orders", 1)].delayed_until > 0
        body = round_trip(response(42))
        assert (body["session_id"], body["session_epoch"]) == (42, 3)
        assert body["topics"] == [] and body["forgotten_topics_data"] == [{"topic_id": TOPIC_ID, "partitions": [1]}]

        # The session is gone at the leader: the next request is full, without backing off.
        round_trip({"error_code": ErrorCode.FETCH_SESSION_ID_NOT_FOUND, "session_id": 0, "responses": []})
        assert fetcher.partitions[("orders", 0)].delayed_until == 0
        body = round_trip(response(0, answer(0, hw=4), answer(2, hw=0)))
        assert (body["session_id"], body["session_epoch"]) == (0, 0)
        assert sorted(p["partition"] for p in body["topics"][0]["partitions"]) == [0, 2]
        assert fetcher.session.full_requests == 2 and fetcher.session.incremental_requests == 4
        for p in parts:
            p.log.close()

    asyncio.run(scenario())


def test_fetcher_refetches_in_full_after_truncating(tmp_path: Path) -> None:
    async def scenario() -> None:
        manager = ReplicaFetcherManager(2, FetcherConfig(), lambda _: None, lambda: 5)
        fetcher = LeaderFetcher(manager, 1)
        p = follower_partition(tmp_path, 0)
        p.log.append_as_follower(build_batch([NewRecord(value=b"x")] * 4, base_offset=0, partition_leader_epoch=1))
        p.log.append_as_follower(build_batch([NewRecord(value=b"y")] * 2, base_offset=4, partition_leader_epoch=2))
        fetcher.add((p.topic, p.index), _FetchState(p, 3))
        key0 = (TOPIC_ID, 0)

        def round_trip(resp: dict[str, Any]) -> SessionRequest:
            sent = {key0: (fetcher.partitions[("orders", 0)], p.log.log_end_offset)}
            request = fetcher.session.build({k: fetcher._fetch_of(s, o) for k, (s, o) in sent.items()}, True)
            fetcher._process(request, sent, resp)
            return request

        round_trip(response(42, answer(0, hw=0)))
        assert fetcher.session.incremental
        # The leader never had epoch 2: it says our logs part at the end of epoch 1 (offset 4).
        diverging = {**answer(0, hw=4), "diverging_epoch": {"epoch": 1, "end_offset": 4}}
        round_trip(response(42, diverging))
        assert p.log.log_end_offset == 4
        # The answer's high watermark was not taken, and the leader would not repeat it.
        request = round_trip(response(77, answer(0, hw=4)))
        assert request.full and request.session_id == 42
        assert p.high_watermark == 4
        p.log.close()

    asyncio.run(scenario())
