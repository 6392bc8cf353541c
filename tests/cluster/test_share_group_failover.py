"""Share groups across a partition leader's kill -9 in a 3-process cluster (issue #21,
acceptance 3): records accepted before the kill are never delivered again, records released
before it are delivered after it, and nothing produced is lost -- the share-partition's state
went to the share coordinator (``__share_group_state``, three replicas) and the new leader takes
it up from there.

The group id is chosen so that the share-partition's share coordinator (FindCoordinator key type
2) is another broker than the partition's leader: the leader writes the state over the network,
not to a coordinator in its own process."""

from __future__ import annotations

import asyncio
import base64
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from riverlog.client.connection import BrokerConnection
from riverlog.protocol.api_keys import ApiKey
from riverlog.protocol.errors import ErrorCode
from support.cluster_workload import create_topic
from support.java_programs import JavaPrograms
from support.kafka_wire import PartitionState
from support.process_cluster import ProcessCluster
from support.share_client import WAIT_S, poll, warm_up

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(420)]

TOPIC = "share-failover"
SETTINGS = {
    "group.share.record.lock.duration.ms": 5000,
    "group.share.min.record.lock.duration.ms": 1000,
    "share.coordinator.state.topic.num.partitions": 3,
}


async def _remote_coordinator_group(bootstrap: str, leader: int) -> str:
    """A group id whose share coordinator for the topic's partition 0 is not ``leader``."""
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    conn = await BrokerConnection.connect(host, int(port))
    try:
        resp = await conn.request(ApiKey.METADATA, {"topics": [{"name": TOPIC, "topic_id": uuid.UUID(int=0)}],
                                                    "allow_auto_topic_creation": False})
        topic_id: uuid.UUID = resp["topics"][0]["topic_id"]
        encoded = base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")
        deadline = time.monotonic() + WAIT_S
        for i in range(1000):
            group = f"failover-group-{i}"
            while True:
                found = await conn.request(ApiKey.FIND_COORDINATOR,
                                           {"key_type": 2, "coordinator_keys": [f"{group}:{encoded}:0"]})
                [coordinator] = found["coordinators"]
                if coordinator["error_code"] == ErrorCode.NONE:
                    break
                assert time.monotonic() < deadline, coordinator
                await asyncio.sleep(0.5)
            if coordinator["node_id"] != leader:
                return group
        raise AssertionError("every group's share coordinator is the partition leader")
    finally:
        await conn.close()


def test_partition_leader_kill_keeps_accepted_records_done_and_loses_none(
        process_cluster_factory: Callable[..., ProcessCluster], kafka_libs: Path, tmp_path: Path) -> None:
    cluster = process_cluster_factory(3, overrides=SETTINGS)
    create_topic(cluster, TOPIC, partitions=1, replication=3, config={"min.insync.replicas": "2"})
    programs = JavaPrograms(kafka_libs)
    group = asyncio.run(_remote_coordinator_group(cluster.bootstrap, cluster.partition_state(TOPIC, 0).leader))
    values = [f"item-{i}" for i in range(20)]
    accepted, released = values[::2], values[1::2]
    with programs.session("ShareClient", [cluster.bootstrap], log_path=tmp_path / "before.log") as before:
        before.call("consumer", "first", group, TOPIC)
        warm_up(before, ["first"], TOPIC, 1)
        before.call("produce", TOPIC, 0, *values)
        seen: set[str] = set()
        deadline = time.monotonic() + WAIT_S
        while seen != set(values):
            assert time.monotonic() < deadline, seen
            seen.update(r["value"] for r in poll(before, "first", "release", **dict.fromkeys(accepted, "accept"))
                        if r["value"] in values)
        before.call("close", "first")

    victim = cluster.partition_state(TOPIC, 0).leader
    cluster.node(victim).kill()

    def failed_over() -> PartitionState | None:
        state = cluster.partition_state(TOPIC, 0)
        return state if state.leader not in (-1, victim) else None

    cluster.wait_until(failed_over, timeout=60, what="a new leader")
    delivered: list[dict[str, Any]] = []
    with programs.session("ShareClient", [cluster.bootstrap], log_path=tmp_path / "after.log") as after:
        after.call("consumer", "second", group, TOPIC)
        deadline = time.monotonic() + WAIT_S
        while not {r["value"] for r in delivered} >= set(released):
            assert time.monotonic() < deadline, delivered
            delivered += poll(after, "second")
        after.call("produce", TOPIC, 0, "after-the-kill")
        while not any(r["value"] == "after-the-kill" for r in delivered):
            assert time.monotonic() < deadline, delivered
            delivered += poll(after, "second")
    assert not [r for r in delivered if r["value"] in accepted], "an accepted record was delivered again"
    assert sorted(r["value"] for r in delivered if r["value"] in values) == sorted(released)
    assert all(r["delivery_count"] >= 2 for r in delivered if r["value"] in released), delivered
