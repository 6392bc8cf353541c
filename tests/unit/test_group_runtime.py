"""The coordinator's asyncio shell over real partition logs: loading on leadership, writes
acknowledged through the high watermark, timers, unloading, and rebuilding after a restart."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest
from riverlog.controller.image import MetadataImage
from riverlog.controller.records import Endpoint, PartitionRecord, RegisterBrokerRecord, TopicRecord
from riverlog.coordinator.config import GroupConfig
from riverlog.coordinator.membership import JoinRequest, SyncRequest
from riverlog.coordinator.offset_ops import CommitPartition, CommitRequest
from riverlog.coordinator.placement import GROUP_METADATA_TOPIC, partition_for
from riverlog.coordinator.runtime import GroupCoordinator
from riverlog.protocol.errors import ErrorCode, KafkaError
from support.coordinator_replicas import FakeReplicas

pytestmark = pytest.mark.unit

PARTITIONS = 3
NODE = 1
TOPIC_ID = uuid.uuid4()


class FakeController:
    def __init__(self, leader: int = NODE) -> None:
        self.image = image_with_leader(leader)


def image_with_leader(leader: int) -> MetadataImage:
    records: list[Any] = [RegisterBrokerRecord(NODE, (Endpoint("PLAINTEXT", "localhost", 9092),)),
                          TopicRecord(GROUP_METADATA_TOPIC, TOPIC_ID)]
    records += [PartitionRecord(TOPIC_ID, i, (NODE,), (NODE,), leader) for i in range(PARTITIONS)]
    return MetadataImage(cluster_id="test").apply(records)


def join_request(group: str, member_id: str = "") -> JoinRequest:
    return JoinRequest(group, member_id, None, "cli", "/127.0.0.1", 10_000, 10_000, "consumer",
                       (("range", b"m"),), version=3)


async def loaded(coordinator: GroupCoordinator) -> None:
    for _ in range(200):
        if len(coordinator.loaded_shards()) == PARTITIONS:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("shards did not load")


def make(tmp_path: Path, replicas: FakeReplicas) -> tuple[GroupCoordinator, FakeController]:
    controller = FakeController()
    config = GroupConfig(initial_rebalance_delay_ms=0, offsets_topic_num_partitions=PARTITIONS)
    return GroupCoordinator(config, NODE, replicas, controller), controller  # type: ignore[arg-type]


def test_join_commit_restart_and_unload(tmp_path: Path) -> None:
    replicas = FakeReplicas(tmp_path, GROUP_METADATA_TOPIC, TOPIC_ID, PARTITIONS, NODE)
    orders = (("orders", (CommitPartition(0, 17, 3, "m"),)),)

    async def first_life() -> str:
        coordinator, controller = make(tmp_path, replicas)
        coordinator.on_image(controller.image)
        with pytest.raises(KafkaError) as loading:
            coordinator.shard_for("g")
        assert loading.value.code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        await loaded(coordinator)
        # The join completes on the shard's timer (initial delay 0), driven by the loop.
        joined = await asyncio.wait_for(coordinator.call("g", lambda s, t: s.join_group(t, join_request("g"))), 5)
        assert joined["error_code"] == ErrorCode.NONE and joined["generation_id"] == 1
        member: str = joined["member_id"]
        commit = CommitRequest("g", 1, member, None, -1, orders, 8)
        body = await coordinator.call("g", lambda s, t: s.commit_offsets(t, commit))
        assert body["topics"] == [("orders", [(0, ErrorCode.REBALANCE_IN_PROGRESS)])]  # not synced yet
        synced = await coordinator.call("g", lambda s, t: s.sync_group(t, SyncRequest(
            "g", 1, member, None, None, None, ((member, b"assignment"),))))
        assert synced["assignment"] == b"assignment"
        body = await coordinator.call("g", lambda s, t: s.commit_offsets(t, commit))
        assert body["topics"] == [("orders", [(0, ErrorCode.NONE)])]
        partition = replicas.get(GROUP_METADATA_TOPIC, partition_for("g", PARTITIONS))
        assert partition is not None and partition.high_watermark == 3  # new group, assignment, offset
        await coordinator.stop()
        return member

    member = asyncio.run(first_life())

    async def second_life() -> None:
        coordinator, controller = make(tmp_path, replicas)
        coordinator.on_image(controller.image)
        await loaded(coordinator)
        shard = coordinator.shard_for("g")
        assert shard.fetch_offsets("g", [("orders", [0])])[0]["partitions"][0]["committed_offset"] == 17
        assert shard.groups["g"].generation_id == 1 and member in shard.groups["g"].members
        hb = await coordinator.call("g", lambda s, t: s.heartbeat(t, "g", member, None, 1))
        assert hb == {"error_code": ErrorCode.NONE}
        # A newcomer starts a rebalance that waits for the existing member to rejoin...
        parked = asyncio.ensure_future(coordinator.call("g", lambda s, t: s.join_group(t, join_request("g"))))
        await asyncio.sleep(0.05)
        assert not parked.done()
        # ... when another broker becomes the leader: the shard unloads, releasing it.
        controller.image = image_with_leader(2)
        for p in replicas.partitions.values():
            p.leader = 2
        coordinator.on_image(controller.image)
        assert (await parked)["error_code"] == ErrorCode.NOT_COORDINATOR
        with pytest.raises(KafkaError) as gone:
            coordinator.shard_for("g")
        assert gone.value.code == ErrorCode.NOT_COORDINATOR
        await coordinator.stop()

    asyncio.run(second_life())
    replicas.close()
