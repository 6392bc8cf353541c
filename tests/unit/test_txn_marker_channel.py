"""The transaction coordinator's marker channel (``transactions/markers.py``): markers routed to
each partition's current leader, batched per leader with one marker per producer id, retried
on leadership errors, dropped for deleted topics, given up on when fenced. Leaders are faked at
the request level (no sockets)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from riverlog.controller.image import MetadataImage
from riverlog.controller.records import Endpoint, PartitionRecord, RegisterBrokerRecord, TopicRecord
from riverlog.protocol.errors import ErrorCode
from riverlog.transactions import markers
from riverlog.transactions.config import TxnConfig
from riverlog.transactions.markers import MarkerChannel
from riverlog.transactions.shard import MarkerJob
from riverlog.transactions.state import TxnState, TxnTransit

pytestmark = pytest.mark.unit

TOPIC_ID = uuid.uuid4()
CONFIG = TxnConfig(marker_retry_backoff_ms=1)


def image(leaders: dict[int, int]) -> MetadataImage:
    records: list[Any] = [RegisterBrokerRecord(n, (Endpoint("PLAINTEXT", "localhost", 9090 + n),)) for n in (1, 2)]
    records.append(TopicRecord("t", TOPIC_ID))
    records += [PartitionRecord(TOPIC_ID, p, (1, 2), (1, 2), leader) for p, leader in leaders.items()]
    return MetadataImage(cluster_id="test").apply(records)


def job(producer_id: int, *partitions: int, committed: bool = True) -> MarkerJob:
    complete = TxnTransit(producer_id, -1, -1, 0, -1, 60_000, TxnState.COMPLETE_COMMIT, frozenset(), 1, 2)
    return MarkerJob(f"tx-{producer_id}", 3, producer_id, 0, committed,
                     frozenset(("t", p) for p in partitions), complete)


class Leaders:
    """Every broker's WriteTxnMarkers, faked; ``errors[(broker, partition)]`` lists the next
    answers for that partition (NONE once used up)."""

    def __init__(self) -> None:
        self.requests: list[tuple[int, dict[str, Any]]] = []
        self.errors: dict[tuple[int, int], list[ErrorCode]] = {}

    async def answer(self, broker_id: int, body: dict[str, Any]) -> dict[str, Any]:
        self.requests.append((broker_id, body))
        out = []
        for m in body["markers"]:
            topics = []
            for t in m["topics"]:
                parts = []
                for index in t["partition_indexes"]:
                    queued = self.errors.get((broker_id, index), [])
                    parts.append({"partition_index": index,
                                  "error_code": queued.pop(0) if queued else ErrorCode.NONE})
                topics.append({"name": t["name"], "partitions": parts})
            out.append({"producer_id": m["producer_id"], "topics": topics})
        return {"markers": out}


def run(leaders: Leaders, current: list[MetadataImage], scenario: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    async def request(queue: Any, body: dict[str, Any]) -> dict[str, Any]:
        return await leaders.answer(queue.broker_id, body)

    monkeypatch.setattr(markers._LeaderQueue, "_request", request)

    async def main() -> Any:
        channel = MarkerChannel(1, CONFIG, lambda: current[0], "PLAINTEXT")
        try:
            return await scenario(channel)
        finally:
            await channel.stop()

    return asyncio.run(main())


def test_markers_go_to_each_leader(monkeypatch: pytest.MonkeyPatch) -> None:
    leaders = Leaders()
    done = run(leaders, [image({0: 1, 1: 2, 2: 2})], lambda ch: ch.write(job(7, 0, 1, 2), lambda: True), monkeypatch)
    assert done is True
    by_broker = {b: body for b, body in leaders.requests}
    assert by_broker[1]["markers"] == [{"producer_id": 7, "producer_epoch": 0, "transaction_result": True,
                                        "coordinator_epoch": 3, "transaction_version": 0,
                                        "topics": [{"name": "t", "partition_indexes": [0]}]}]
    assert by_broker[2]["markers"][0]["topics"] == [{"name": "t", "partition_indexes": [1, 2]}]


def test_leadership_errors_are_retried_at_the_new_leader(monkeypatch: pytest.MonkeyPatch) -> None:
    leaders = Leaders()
    leaders.errors[(2, 1)] = [ErrorCode.NOT_LEADER_OR_FOLLOWER]
    current = [image({0: 1, 1: 2})]

    async def scenario(channel: MarkerChannel) -> bool:
        writing = asyncio.ensure_future(channel.write(job(7, 0, 1), lambda: True))
        while not leaders.requests:
            await asyncio.sleep(0)
        current[0] = image({0: 1, 1: 1})  # partition 1 moved to broker 1
        return await writing

    assert run(leaders, current, scenario, monkeypatch) is True
    assert [(b, body["markers"][0]["topics"][0]["partition_indexes"]) for b, body in leaders.requests][-1] == (1, [1])


def test_fenced_markers_stop_the_job(monkeypatch: pytest.MonkeyPatch) -> None:
    leaders = Leaders()
    leaders.errors[(1, 0)] = [ErrorCode.TRANSACTION_COORDINATOR_FENCED]
    assert run(leaders, [image({0: 1})], lambda ch: ch.write(job(7, 0), lambda: True), monkeypatch) is False
    leaders = Leaders()
    leaders.errors[(1, 0)] = [ErrorCode.INVALID_PRODUCER_EPOCH]
    assert run(leaders, [image({0: 1})], lambda ch: ch.write(job(7, 0), lambda: True), monkeypatch) is False


def test_deleted_partitions_are_dropped_and_unwanted_jobs_stop(monkeypatch: pytest.MonkeyPatch) -> None:
    leaders = Leaders()
    assert run(leaders, [image({0: 1})], lambda ch: ch.write(job(7, 0, 5), lambda: True), monkeypatch) is True
    assert [body["markers"][0]["topics"] for _, body in leaders.requests] == [
        [{"name": "t", "partition_indexes": [0]}]]
    leaders = Leaders()
    assert run(leaders, [image({0: 1})], lambda ch: ch.write(job(7, 0), lambda: False), monkeypatch) is False
    assert leaders.requests == []


def test_one_marker_per_producer_id_per_request(monkeypatch: pytest.MonkeyPatch) -> None:
    leaders = Leaders()

    async def scenario(channel: MarkerChannel) -> list[bool]:
        return list(await asyncio.gather(channel.write(job(7, 0), lambda: True),
                                         channel.write(job(7, 1, committed=False), lambda: True),
                                         channel.write(job(8, 0), lambda: True)))

    assert run(leaders, [image({0: 1, 1: 1})], scenario, monkeypatch) == [True, True, True]
    for _, body in leaders.requests:
        ids = [m["producer_id"] for m in body["markers"]]
        assert len(ids) == len(set(ids))
    assert sum(len(body["markers"]) for _, body in leaders.requests) == 3
