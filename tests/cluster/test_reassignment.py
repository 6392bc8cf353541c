"""Partition reassignment and automatic leader rebalance on an in-process cluster (shared
controller, real TCP replication), driven the way operators drive them: AlterPartitionReassignments
and ListPartitionReassignments over the Kafka protocol, and Kafka's own kafka-reassign-partitions
tool. Checks are on the replicas' logs and directories themselves."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from riverlog.controller.topic_ops import NewTopic
from riverlog.protocol.api_keys import ApiKey
from riverlog.protocol.errors import ErrorCode
from support.inprocess_cluster import InProcessCluster, run_scenario
from support.java_tools import JavaTools
from test_replication_inprocess import TOPIC, Client, NumberedProducer, caught_up, values_in_log, wait_acked

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(300)]

REASSIGN_TOOL = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"  # kafka-reassign-partitions.sh


def run(tmp_path: Path, scenario: Callable[[InProcessCluster], Awaitable[None]], size: int = 4,
        **overrides: object) -> None:
    run_scenario(tmp_path, scenario, size, overrides)


class Admin(Client):
    """AlterPartitionReassignments / ListPartitionReassignments over the wire to one broker
    (the connection handling is the raw client's)."""

    async def reassign(self, items: list[tuple[str, int, list[int] | None]], *, version: int | None = None,
                       allow_rf_change: bool = True) -> list[tuple[str, int, int, str | None]]:
        assert self.conn is not None
        topics: dict[str, list[dict[str, Any]]] = {}
        for name, index, replicas in items:
            topics.setdefault(name, []).append({"partition_index": index, "replicas": replicas})
        response = await self.conn.request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, {
            "timeout_ms": 10_000, "allow_replication_factor_change": allow_rf_change,
            "topics": [{"name": n, "partitions": p} for n, p in topics.items()]}, version)
        assert response["error_code"] == ErrorCode.NONE
        return [(t["name"], p["partition_index"], p["error_code"], p["error_message"])
                for t in response["responses"] for p in t["partitions"]]

    async def ongoing(self, topics: list[dict[str, Any]] | None = None) -> dict[tuple[str, int], tuple[list[int], ...]]:
        """(topic, partition) -> (replicas, adding, removing) of every reassignment in progress."""
        assert self.conn is not None
        response = await self.conn.request(ApiKey.LIST_PARTITION_REASSIGNMENTS,
                                           {"timeout_ms": 10_000, "topics": topics})
        assert response["error_code"] == ErrorCode.NONE
        return {(t["name"], p["partition_index"]): (p["replicas"], p["adding_replicas"], p["removing_replicas"])
                for t in response["topics"] for p in t["partitions"]}


async def create_topic(cluster: InProcessCluster, *, min_isr: int = 2) -> uuid.UUID:
    """Partition 0 on brokers 1, 2, 3 (broker 1 preferred): a fourth broker, if any, has none."""
    (outcome,) = await cluster.controller.create_topics(
        [NewTopic(TOPIC, assignments={0: [1, 2, 3]}, configs={"min.insync.replicas": str(min_isr)})],
        validate_only=False, default_partitions=1, default_replication=3)
    assert outcome.error == ErrorCode.NONE, outcome.message
    assert outcome.topic_id is not None
    await cluster.wait_until(lambda: all(cluster.brokers[n].replicas.get(TOPIC, 0) is not None for n in (1, 2, 3)),
                             what="replicas on brokers 1, 2, 3")
    return outcome.topic_id


def partition_dir(cluster: InProcessCluster, node_id: int, topic: str = TOPIC, index: int = 0) -> Path:
    return cluster.base / f"broker{node_id}" / f"{topic}-{index}"


def leads(cluster: InProcessCluster, node_id: int) -> bool:
    p = cluster.brokers[node_id].replicas.get(TOPIC, 0)
    return p is not None and p.is_leader


def check_log(cluster: InProcessCluster, nodes: list[int], producer: NumberedProducer) -> None:
    """Every acknowledged record is in each replica's log exactly once, in produce order, at the
    offset it was acknowledged with; the replicas' logs are identical."""
    logs = {n: cluster.log_bytes(n, TOPIC) for n in nodes}
    first = logs[nodes[0]]
    assert all(data == first for data in logs.values()), "the replicas' logs differ"
    records = values_in_log(cluster, nodes[0])
    values = [v for _, v in records]
    assert len(values) == len(set(values)), "a record is in the log twice"
    assert values == sorted(values), "records are out of produce order"
    offsets = dict((v, o) for o, v in records)
    missing = [v for v in producer.acked if v not in offsets]
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {missing[:5]}"
    assert all(offsets[v] == o for v, o in producer.acked.items()), "an acknowledged offset moved"


async def producing(cluster: InProcessCluster) -> tuple[NumberedProducer, asyncio.Future[None]]:
    producer = NumberedProducer(cluster.bootstrap)
    return producer, asyncio.ensure_future(asyncio.to_thread(producer.run))


async def finish(producer: NumberedProducer, task: asyncio.Future[None]) -> None:
    producer.stop.set()
    await task
    assert not producer.errors, producer.errors[:5]


def test_moving_a_replica_under_load_keeps_every_acknowledged_record(tmp_path: Path) -> None:
    async def scenario(cluster: InProcessCluster) -> None:
        await create_topic(cluster)  # partition 0 on brokers 1, 2, 3; broker 1 leads
        assert not partition_dir(cluster, 4).exists()
        producer, task = await producing(cluster)
        try:
            await wait_acked(producer, 5000)
            epoch_before = cluster.partition(TOPIC).leader_epoch
            async with Admin(cluster, 3) as admin:
                # The leader itself moves away: {1, 2, 3} -> {2, 3, 4}.
                assert await admin.reassign([(TOPIC, 0, [2, 3, 4])]) == [(TOPIC, 0, ErrorCode.NONE, None)]
                await cluster.wait_until(lambda: cluster.partition(TOPIC).replicas == (2, 3, 4),
                                         timeout=60, what="the reassignment to complete")
                assert await admin.ongoing() == {}
            part = cluster.partition(TOPIC)
            assert set(part.isr) == {2, 3, 4} and part.leader == 2 and part.leader_epoch > epoch_before
            assert (part.adding_replicas, part.removing_replicas) == ((), ())
            # Broker 1 let go of the partition: no replica object, no directory.
            assert cluster.brokers[1].replicas.get(TOPIC, 0) is None
            assert not partition_dir(cluster, 1).exists()
            await wait_acked(producer, producer.count() + 1500)
            await finish(producer, task)
            await caught_up(cluster, [2, 3, 4])
            check_log(cluster, [2, 3, 4], producer)
        finally:
            producer.stop.set()
            with contextlib.suppress(Exception):
                await task

    # Small follower fetches: the new replica needs many rounds to catch up with a moving target.
    run(tmp_path, scenario, **{"replica.lag.time.max.ms": 3000, "replica.fetch.max.bytes": 8192})


def test_growing_and_shrinking_the_replication_factor(tmp_path: Path) -> None:
    async def scenario(cluster: InProcessCluster) -> None:
        topic_id = await create_topic(cluster, min_isr=1)
        async with Client(cluster, 1) as client:
            for i in range(20):
                assert await client.produce(topic_id, [b"%d" % i], acks=-1) == ErrorCode.NONE
        async with Admin(cluster, 1) as admin:
            # RF 3 -> 4: broker 4 copies the log, joins the ISR, and the reassignment is done.
            assert (await admin.reassign([(TOPIC, 0, [1, 2, 3, 4])]))[0][2] == ErrorCode.NONE
            await cluster.wait_until(lambda: set(cluster.partition(TOPIC).isr) == {1, 2, 3, 4}
                                     and not cluster.partition(TOPIC).reassigning, what="RF 4")
            assert cluster.partition(TOPIC).replicas == (1, 2, 3, 4)
            await caught_up(cluster, [1, 2, 3, 4])
            assert cluster.log_bytes(4, TOPIC) == cluster.log_bytes(1, TOPIC)
            # RF 4 -> 2: all in sync already, so it completes in one step.
            assert (await admin.reassign([(TOPIC, 0, [4, 1])]))[0][2] == ErrorCode.NONE
            part = cluster.partition(TOPIC)
            assert (part.replicas, set(part.isr), part.leader, part.reassigning) == ((4, 1), {1, 4}, 1, False)
            await cluster.wait_until(lambda: not any(partition_dir(cluster, n).exists() for n in (2, 3)),
                                     what="the replicas of brokers 2 and 3 deleted")
            assert await admin.ongoing() == {}
        async with Client(cluster, 1) as client:
            assert await client.produce(topic_id, [b"20"], acks=-1) == ErrorCode.NONE
            hw, values = await client.fetch(topic_id, 0)
        assert values == [b"%d" % i for i in range(21)] and hw == 21

    run(tmp_path, scenario)


def test_cancelling_a_reassignment_restores_the_original_replicas(tmp_path: Path) -> None:
    async def scenario(cluster: InProcessCluster) -> None:
        await create_topic(cluster)
        producer, task = await producing(cluster)
        try:
            await wait_acked(producer, 1000)
            # Broker 4 never catches up: its fetchers are stalled.
            cluster.brokers[4].replicas.fetchers.pause()
            async with Admin(cluster, 2) as admin:
                assert await admin.reassign([(TOPIC, 0, [1, 2, 4])]) == [(TOPIC, 0, ErrorCode.NONE, None)]
                assert await admin.ongoing() == {(TOPIC, 0): ([1, 2, 4, 3], [4], [3])}
                assert await admin.ongoing([{"name": TOPIC, "partition_indexes": [0]}]) == \
                    {(TOPIC, 0): ([1, 2, 4, 3], [4], [3])}
                await cluster.wait_until(lambda: partition_dir(cluster, 4).exists(), what="broker 4's new replica")
                await wait_acked(producer, producer.count() + 500)
                assert cluster.partition(TOPIC).reassigning

                assert await admin.reassign([(TOPIC, 0, None)]) == [(TOPIC, 0, ErrorCode.NONE, None)]
                assert await admin.ongoing() == {}
                # Cancelling again: nothing in progress.
                (cancel_again,) = await admin.reassign([(TOPIC, 0, None)])
                assert cancel_again[2] == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
            part = cluster.partition(TOPIC)
            assert set(part.replicas) == {1, 2, 3} and set(part.isr) == {1, 2, 3} and part.leader == 1
            await cluster.wait_until(lambda: not partition_dir(cluster, 4).exists(), what="broker 4's copy deleted")
            assert cluster.brokers[4].replicas.get(TOPIC, 0) is None
            cluster.brokers[4].replicas.fetchers.resume()
            await wait_acked(producer, producer.count() + 500)
            await finish(producer, task)
            await caught_up(cluster, [1, 2, 3])
            check_log(cluster, [1, 2, 3], producer)
        finally:
            producer.stop.set()
            with contextlib.suppress(Exception):
                await task

    run(tmp_path, scenario, **{"replica.lag.time.max.ms": 3000})


def test_bad_reassignments_are_refused_with_kafkas_errors(tmp_path: Path) -> None:
    async def scenario(cluster: InProcessCluster) -> None:
        await create_topic(cluster)
        async with Admin(cluster, 1) as admin:
            results = await admin.reassign([
                ("nope", 0, [1, 2, 3]), (TOPIC, 3, [1, 2, 3]), (TOPIC, 0, []), (TOPIC, 0, [1, 2, 2]),
                (TOPIC, 0, [1, 2, 9]), (TOPIC, 0, None)])
            assert [r[2] for r in results] == [
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                ErrorCode.INVALID_REPLICA_ASSIGNMENT, ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                ErrorCode.INVALID_REPLICA_ASSIGNMENT, ErrorCode.NO_REASSIGNMENT_IN_PROGRESS]
            assert all(r[3] for r in results), "every refusal says why"
            # Version 1 may forbid changing the replication factor (KIP-860).
            (refused,) = await admin.reassign([(TOPIC, 0, [1, 2])], version=1, allow_rf_change=False)
            assert refused[2] == ErrorCode.INVALID_REPLICATION_FACTOR
            assert await admin.ongoing() == {}
        part = cluster.partition(TOPIC)
        assert (part.replicas, part.partition_epoch) == ((1, 2, 3), 0)

    run(tmp_path, scenario, size=3)


def test_preferred_leadership_returns_without_elect_leaders(tmp_path: Path) -> None:
    async def scenario(cluster: InProcessCluster) -> None:
        topic_id = await create_topic(cluster)
        async with Client(cluster, 1) as client:
            for i in range(10):
                assert await client.produce(topic_id, [b"%d" % i], acks=-1) == ErrorCode.NONE
        await caught_up(cluster, [1, 2, 3])
        # The preferred leader fails; leadership moves within the ISR.
        await cluster.crash(1)
        await cluster.fence(1)
        await cluster.wait_until(lambda: cluster.partition(TOPIC).leader in (2, 3), what="failover")
        async with Client(cluster, cluster.partition(TOPIC).leader) as client:
            assert await client.produce(topic_id, [b"10"], acks=-1) == ErrorCode.NONE
        # It returns and catches up; the controller's periodic check hands leadership back.
        await cluster.start_broker(1)
        await cluster.wait_until(lambda: cluster.partition(TOPIC).leader == 1, timeout=30,
                                 what="broker 1 leading again")
        assert 1 in cluster.partition(TOPIC).isr
        await cluster.wait_until(lambda: leads(cluster, 1), what="broker 1 acting as leader")
        async with Client(cluster, 1) as client:
            assert await client.produce(topic_id, [b"11"], acks=-1) == ErrorCode.NONE
            hw, values = await client.fetch(topic_id, 0)
        assert values == [b"%d" % i for i in range(12)] and hw == 12

    run(tmp_path, scenario, size=3, **{"replica.lag.time.max.ms": 1000,
                                       "leader.imbalance.check.interval.seconds": 1})


def test_kafka_reassign_partitions_tool_executes_lists_and_verifies(tmp_path: Path, java_tools: JavaTools) -> None:
    async def scenario(cluster: InProcessCluster) -> None:
        await create_topic(cluster)
        producer, task = await producing(cluster)
        try:
            await wait_acked(producer, 1000)
            plan = tmp_path / "reassignment.json"
            plan.write_text(json.dumps({"version": 1, "partitions": [
                {"topic": TOPIC, "partition": 0, "replicas": [2, 3, 4], "log_dirs": ["any", "any", "any"]}]}))

            def tool(*args: str) -> str:
                result = java_tools.run(REASSIGN_TOOL, ["--bootstrap-server", cluster.bootstrap, *args], timeout=120)
                return result.stdout

            # Hold the new replica back so --list sees the reassignment in progress.
            cluster.brokers[4].replicas.fetchers.pause()
            executed = await asyncio.to_thread(tool, "--execute", "--reassignment-json-file", str(plan))
            assert f"Successfully started partition reassignment for {TOPIC}-0" in executed, executed
            assert '"replicas":[1,2,3]' in executed, executed  # the current assignment, for a rollback
            listed = await asyncio.to_thread(tool, "--list")
            assert f"{TOPIC}-0: replicas: 2,3,4,1. adding: 4. removing: 1." in listed, listed
            cluster.brokers[4].replicas.fetchers.resume()
            await cluster.wait_until(lambda: not cluster.partition(TOPIC).reassigning, timeout=60,
                                     what="the reassignment to complete")
            verified = await asyncio.to_thread(tool, "--verify", "--reassignment-json-file", str(plan))
            assert f"Reassignment of partition {TOPIC}-0 is completed." in verified, verified
            listed = await asyncio.to_thread(tool, "--list")
            assert "No partition reassignments found." in listed, listed
            assert cluster.partition(TOPIC).replicas == (2, 3, 4)
            await wait_acked(producer, producer.count() + 500)
            await finish(producer, task)
            await caught_up(cluster, [2, 3, 4])
            check_log(cluster, [2, 3, 4], producer)
            assert not partition_dir(cluster, 1).exists()
        finally:
            producer.stop.set()
            with contextlib.suppress(Exception):
                await task

    run(tmp_path, scenario, **{"replica.lag.time.max.ms": 3000})
