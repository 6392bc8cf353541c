"""Transactional offset commits through the coordinator's asyncio shell over a real partition:
the transactional batch it appends, completion by a marker the partition wrote, and a restart
that rebuilds committed and still-pending transactional offsets from the log."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest
from riverlog.cluster.partition import Partition
from riverlog.controller.image import MetadataImage
from riverlog.controller.records import Endpoint, PartitionRecord, RegisterBrokerRecord, TopicRecord
from riverlog.coordinator.config import GroupConfig
from riverlog.coordinator.offset_ops import CommitPartition, TxnCommitRequest
from riverlog.coordinator.placement import GROUP_METADATA_TOPIC, partition_for
from riverlog.coordinator.runtime import GroupCoordinator
from riverlog.protocol.errors import ErrorCode
from riverlog.protocol.record_batch import iter_batches
from riverlog.storage import Log, LogConfig

pytestmark = pytest.mark.unit

NODE = 1
TOPIC_ID = uuid.uuid4()
PID, OTHER = 1000, 1001


class _Replicas:
    """One ``__consumer_offsets`` partition, led by this node."""

    def __init__(self, directory: Path) -> None:
        log = Log.open(directory / f"{GROUP_METADATA_TOPIC}-0", LogConfig(cleanup_policy="compact"), now_ms=0)
        self.partition = Partition(GROUP_METADATA_TOPIC, 0, TOPIC_ID, log, NODE)
        self.partition.become_leader(0, (NODE,), (NODE,))

    def get(self, topic: str, index: int) -> Partition | None:
        return self.partition if (topic, index) == (GROUP_METADATA_TOPIC, 0) else None


class _Controller:
    def __init__(self) -> None:
        records: list[Any] = [RegisterBrokerRecord(NODE, (Endpoint("PLAINTEXT", "localhost", 9092),)),
                              TopicRecord(GROUP_METADATA_TOPIC, TOPIC_ID),
                              PartitionRecord(TOPIC_ID, 0, (NODE,), (NODE,), NODE)]
        self.image = MetadataImage(cluster_id="test").apply(records)


async def _started(replicas: _Replicas) -> GroupCoordinator:
    controller = _Controller()
    config = GroupConfig(initial_rebalance_delay_ms=0, offsets_topic_num_partitions=1)
    coordinator = GroupCoordinator(config, NODE, replicas, controller)  # type: ignore[arg-type]
    coordinator.on_image(controller.image)
    for _ in range(200):
        if coordinator.loaded_shards():
            return coordinator
        await asyncio.sleep(0.01)
    raise AssertionError("the shard did not load")


def _write_marker(replicas: _Replicas, producer_id: int, committed: bool) -> None:
    """What WriteTxnMarkers does on this partition before calling ``complete_transaction``."""
    replicas.partition.append_txn_marker(producer_id, 0, 0, committed, now_ms=1)


def _request(producer_id: int, offsets: dict[int, int]) -> TxnCommitRequest:
    parts = tuple(CommitPartition(p, o, -1, "") for p, o in offsets.items())
    return TxnCommitRequest("tx", "g", producer_id, 0, -1, "", None, (("t", parts),), 3)


def _fetch(coordinator: GroupCoordinator, partitions: list[int], stable: bool) -> list[tuple[int, int]]:
    (topic,) = coordinator.shard_for("g").fetch_offsets("g", [("t", partitions)], stable)
    return [(p["committed_offset"], p["error_code"]) for p in topic["partitions"]]


def test_txn_offsets_through_the_log_and_a_restart(tmp_path: Path) -> None:
    assert partition_for("g", 1) == 0
    replicas = _Replicas(tmp_path)

    async def first_life() -> None:
        coordinator = await _started(replicas)
        for request in (_request(PID, {0: 5, 1: 6}), _request(OTHER, {2: 9})):
            body = await coordinator.call("g", lambda s, t, r=request: s.commit_txn_offsets(t, r))
            assert {e for _, parts in body["topics"] for _, e in parts} == {ErrorCode.NONE}
        # Each commit went as a transactional batch of its producer, without a sequence.
        batches = list(iter_batches(replicas.partition.log.read_records_bytes(0, 1 << 20)))
        assert [(b.producer_id, b.is_transactional, b.base_sequence) for b in batches] == \
            [(PID, True, -1), (OTHER, True, -1)]
        assert _fetch(coordinator, [0, 2], True) == [(-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)] * 2
        _write_marker(replicas, PID, committed=True)
        coordinator.complete_transaction(0, PID, True)
        assert _fetch(coordinator, [0, 1, 2], True) == [(5, ErrorCode.NONE), (6, ErrorCode.NONE),
                                                        (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)]
        # A marker for a partition this broker does not coordinate is ignored.
        coordinator.complete_transaction(3, OTHER, True)
        await coordinator.stop()

    async def second_life() -> None:
        coordinator = await _started(replicas)
        # Rebuilt from the log: PID's offsets committed, OTHER's transaction still open.
        assert _fetch(coordinator, [0, 1, 2], False) == [(5, ErrorCode.NONE), (6, ErrorCode.NONE),
                                                         (-1, ErrorCode.NONE)]
        assert _fetch(coordinator, [2], True) == [(-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)]
        _write_marker(replicas, OTHER, committed=False)
        coordinator.complete_transaction(0, OTHER, False)
        assert _fetch(coordinator, [2], True) == [(-1, ErrorCode.NONE)]
        await coordinator.stop()

    asyncio.run(first_life())
    asyncio.run(second_life())
    replicas.partition.log.close()
