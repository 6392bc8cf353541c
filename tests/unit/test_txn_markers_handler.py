"""Partition leaders and transactions: WriteTxnMarkers (acks=all, per-partition errors, the group
coordinator told of markers in __consumer_offsets) and read_committed reads below the LSO."""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from riverlog.cluster.partition import Partition
from riverlog.controller.image import MetadataImage, TopicImage
from riverlog.handlers.fetch import handle_fetch
from riverlog.handlers.producer_ids import handle_describe_producers
from riverlog.handlers.txn_markers import write_txn_markers
from riverlog.protocol.errors import ErrorCode, KafkaError
from riverlog.protocol.record_batch import NewRecord, build_batch, iter_records
from riverlog.security.access import allow_all
from riverlog.storage import Log, LogConfig

pytestmark = pytest.mark.unit

NOW = 1_700_000_000_000
PID = 77


class _Replicas:
    def __init__(self, partitions: dict[tuple[str, int], Partition]) -> None:
        self.partitions = partitions

    def get(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    def leader_partition(self, topic: str, index: int, current_leader_epoch: int = -1) -> Partition:
        p = self.partitions.get((topic, index))
        if p is None:
            raise KafkaError("", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        p.check_leader(current_leader_epoch)
        return p


class _Coordinator:
    def __init__(self) -> None:
        self.completed: list[tuple[int, int, bool]] = []

    def complete_transaction(self, partition_index: int, producer_id: int, committed: bool) -> None:
        self.completed.append((partition_index, producer_id, committed))


class _Broker:
    def __init__(self, partitions: dict[tuple[str, int], Partition]) -> None:
        self.replicas = _Replicas(partitions)
        self.coordinator = _Coordinator()
        self.access = allow_all()


def leader(tmp_path: Path, topic: str, index: int, *, replicas: tuple[int, ...] = (1,)) -> Partition:
    log = Log.open(tmp_path / f"{topic}-{index}", LogConfig(), now_ms=NOW)
    p = Partition(topic, index, uuid.uuid4(), log, node_id=1)
    p.become_leader(1, replicas, replicas, now_ms=NOW)
    return p


def txn_data(seq: int = 0, *, epoch: int = 0) -> memoryview:
    return memoryview(build_batch([NewRecord(b"v%d" % seq, None, (), NOW)], producer_id=PID, producer_epoch=epoch,
                                  base_sequence=seq, transactional=True))


def request(committed: bool, topics: dict[str, list[int]], *, epoch: int = 0, coordinator_epoch: int = 1) -> Any:
    return {"markers": [{"producer_id": PID, "producer_epoch": epoch, "transaction_result": committed,
                         "coordinator_epoch": coordinator_epoch, "transaction_version": 0,
                         "topics": [{"name": t, "partition_indexes": i} for t, i in topics.items()]}]}


def codes(response: Any) -> dict[tuple[str, int], ErrorCode]:
    (m,) = response["markers"]
    assert m["producer_id"] == PID
    return {(t["name"], p["partition_index"]): p["error_code"] for t in m["topics"] for p in t["partitions"]}


def test_markers_are_written_and_the_group_coordinator_told(tmp_path: Path) -> None:
    async def main() -> None:
        data, offsets = leader(tmp_path, "t", 0), leader(tmp_path, "__consumer_offsets", 3)
        broker = _Broker({("t", 0): data, ("__consumer_offsets", 3): offsets})
        data.append(txn_data(), acks=-1, now_ms=NOW)
        assert data.last_stable_offset == 0
        response = await write_txn_markers(cast(Any, broker), request(True, {"t": [0, 5], "__consumer_offsets": [3]}))
        assert codes(response) == {("t", 0): ErrorCode.NONE, ("t", 5): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                   ("__consumer_offsets", 3): ErrorCode.NONE}
        assert broker.coordinator.completed == [(3, PID, True)]
        assert data.last_stable_offset == data.log.log_end_offset == 2
        assert offsets.log.log_end_offset == 1  # a marker even without data there (AddOffsetsToTxn only)

    asyncio.run(main())


def test_marker_errors_per_partition(tmp_path: Path) -> None:
    async def main() -> None:
        a, b = leader(tmp_path, "t", 0), leader(tmp_path, "t", 1)
        broker = _Broker({("t", 0): a, ("t", 1): b})
        a.append(txn_data(epoch=2), acks=-1, now_ms=NOW)
        await write_txn_markers(cast(Any, broker), request(False, {"t": [1]}, epoch=2, coordinator_epoch=5))
        b.become_follower(2, 2, 1, (1, 2), (1, 2))
        response = await write_txn_markers(cast(Any, broker), request(False, {"t": [0, 1]}, epoch=1))
        assert codes(response) == {("t", 0): ErrorCode.INVALID_PRODUCER_EPOCH,
                                   ("t", 1): ErrorCode.NOT_LEADER_OR_FOLLOWER}
        b.become_leader(3, (1,), (1,), now_ms=NOW)
        stale = request(False, {"t": [1]}, epoch=2, coordinator_epoch=4)
        response = await write_txn_markers(cast(Any, broker), stale)
        assert codes(response) == {("t", 1): ErrorCode.TRANSACTION_COORDINATOR_FENCED}
        assert broker.coordinator.completed == []

    asyncio.run(main())


def test_markers_wait_for_replication(tmp_path: Path) -> None:
    async def main() -> None:
        p = leader(tmp_path, "t", 0, replicas=(1, 2))
        broker = _Broker({("t", 0): p})
        task = asyncio.ensure_future(write_txn_markers(cast(Any, broker), request(True, {"t": [0]})))
        await asyncio.sleep(0)
        assert not task.done() and p.log.log_end_offset == 1
        p.update_follower(2, 1, -1, NOW)
        assert codes(await task) == {("t", 0): ErrorCode.NONE}
        timed_out = await write_txn_markers(cast(Any, broker), request(True, {"t": [0]}), timeout_ms=0)
        assert codes(timed_out) == {("t", 0): ErrorCode.REQUEST_TIMED_OUT}

    asyncio.run(main())


def test_read_committed_reads_below_the_last_stable_offset(tmp_path: Path) -> None:
    p = leader(tmp_path, "t", 0)
    p.append(memoryview(build_batch([NewRecord(b"plain")])), acks=1, now_ms=NOW)
    p.append(txn_data(), acks=1, now_ms=NOW)
    assert (p.high_watermark, p.last_stable_offset) == (2, 1)

    def values(read_committed: bool) -> list[bytes | None]:
        info = p.read(0, 1 << 20, read_committed=read_committed)
        data = b"".join(os.pread(r.fileno(), r.size, r.position) for r in info.regions)
        return [r.value for h, r in iter_records(data) if not h.is_control]

    assert values(False) == [b"plain", b"v0"]
    assert values(True) == [b"plain"]
    p.append_txn_marker(PID, 0, 1, False, now_ms=NOW)
    assert p.last_stable_offset == 3
    assert values(True) == [b"plain", b"v0"]  # the consumer drops v0: the fetch names the abort
    assert [(t.producer_id, t.first_offset) for t in p.log.aborted_transactions(0, 3)] == [(PID, 1)]


class _Counter:
    def labels(self, **_labels: str) -> _Counter:
        return self

    def inc(self, _amount: float = 1) -> None:
        pass


class _FetchBroker(_Broker):
    def __init__(self, p: Partition) -> None:
        super().__init__({(p.topic, p.index): p})
        self.image = MetadataImage(topics={p.topic: TopicImage(p.topic, p.topic_id)})
        self.metrics = SimpleNamespace(bytes_out=_Counter())
        self.fetch_sessions = None  # a sessionless fetch (epoch -1) never touches the cache


def fetch_request(isolation_level: int, fetch_offset: int = 0) -> Any:
    return {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": isolation_level, "session_id": 0, "session_epoch": -1,
            "forgotten_topics_data": [], "rack_id": "",
            "topics": [{"topic": "t", "partitions": [{
                "partition": 0, "fetch_offset": fetch_offset, "partition_max_bytes": 1 << 20,
                "current_leader_epoch": -1, "last_fetched_epoch": -1, "log_start_offset": -1}]}]}


def test_fetch_isolation_levels(tmp_path: Path) -> None:
    async def main() -> None:
        p = leader(tmp_path, "t", 0)
        broker = cast(Any, _FetchBroker(p))
        ctx = cast(Any, SimpleNamespace(version=12))

        async def fetch(isolation_level: int, fetch_offset: int = 0) -> Any:
            response = await handle_fetch(broker, ctx, fetch_request(isolation_level, fetch_offset))
            (topic,) = response["responses"]
            (part,) = topic["partitions"]
            size = sum(r.size for r in part["records"])
            return part["last_stable_offset"], part["aborted_transactions"], size

        p.append(memoryview(build_batch([NewRecord(b"plain")])), acks=1, now_ms=NOW)
        p.append(txn_data(), acks=1, now_ms=NOW)
        lso, aborted, uncommitted_size = await fetch(0)
        assert (lso, aborted) == (1, None) and uncommitted_size > 0
        # No aborted transaction to tell of: null (clients read it as an empty list).
        lso, aborted, committed_size = await fetch(1)
        assert (lso, aborted) == (1, None) and 0 < committed_size < uncommitted_size
        assert await fetch(1, 1) == (1, None, 0)  # blocked at the open transaction
        p.append_txn_marker(PID, 0, 1, False, now_ms=NOW)
        lso, aborted, size = await fetch(1, 1)
        assert lso == 3 and aborted == [{"producer_id": PID, "first_offset": 1}] and size > 0
        lso, aborted, size = await fetch(1, 3)
        assert (lso, aborted, size) == (3, None, 0)

    asyncio.run(main())


def test_describe_producers_shows_open_transactions(tmp_path: Path) -> None:
    async def main() -> None:
        p = leader(tmp_path, "t", 0)
        broker = cast(Any, _Broker({("t", 0): p}))
        p.append(txn_data(), acks=1, now_ms=NOW)
        p.append_txn_marker(PID, 0, 4, True, now_ms=NOW)
        p.append(txn_data(1), acks=1, now_ms=NOW)
        response = await handle_describe_producers(broker, cast(Any, None),
                                                   {"topics": [{"name": "t", "partition_indexes": [0]}]})
        (state,) = response["topics"][0]["partitions"][0]["active_producers"]
        assert (state["producer_id"], state["last_sequence"], state["coordinator_epoch"],
                state["current_txn_start_offset"]) == (PID, 1, 4, 2)

    asyncio.run(main())
