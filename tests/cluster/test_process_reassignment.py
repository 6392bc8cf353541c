"""Reassignment and preferred leaders in a cluster of broker processes (issue #4, acceptance 5).

1. A partition on brokers {1,2,3} is moved to {2,3,4} with Kafka's own kafka-reassign-partitions
   tool while an idempotent acks=all producer writes to it: the tool reports completion, the new
   replica set holds every acknowledged record exactly once, in order, at its acknowledged offset
   (each replica's own segment files are read), and broker 1 no longer hosts the partition.
2. The preferred leader is killed, comes back and rejoins the ISR; ElectLeaders (preferred) gives
   it the leadership back.

Both run against Kafka too (``RIVERLOG_TEST_TARGET=kafka``)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import ElectionType, TopicPartition
from confluent_kafka.admin import NewTopic
from support.cluster_workload import SequencedProducer, check_partition_copy, compare_copies, format_problems
from support.java_tools import JavaTools
from support.process_cluster import ProcessCluster

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(420)]

REASSIGN_TOOL = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"  # kafka-reassign-partitions.sh
TOPIC = "moving"


def create_assigned(cluster: ProcessCluster, replicas: list[int]) -> None:
    future = cluster.admin().create_topics(
        [NewTopic(TOPIC, num_partitions=1, replica_assignment=[replicas], config={"min.insync.replicas": "2"})],
        request_timeout=30)[TOPIC]
    future.result(60)
    cluster.wait_until(lambda: set(cluster.partition_state(TOPIC, 0).isr) == set(replicas), timeout=60,
                       what="the topic's ISR complete")


def wait_acked(cluster: ProcessCluster, producer: SequencedProducer, at_least: int) -> None:
    def enough() -> bool:
        assert not producer.errors, producer.errors[:5]
        return producer.acked_count() >= at_least

    cluster.wait_until(enough, timeout=90, what=f"{at_least} acknowledged records")


def test_reassignment_under_load_with_kafkas_tool(
    process_cluster_factory: Callable[..., ProcessCluster], java_tools: JavaTools, tmp_path: Path
) -> None:
    cluster = process_cluster_factory(4, netns=False)
    create_assigned(cluster, [1, 2, 3])
    producer = SequencedProducer(cluster.bootstrap, TOPIC, [0], name="r", rate=500).start()
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": TOPIC, "partition": 0, "replicas": [2, 3, 4], "log_dirs": ["any", "any", "any"]}]}))

    def tool(*args: str) -> str:
        result = java_tools.run(REASSIGN_TOOL, ["--bootstrap-server", cluster.bootstrap, *args], timeout=120)
        return result.stdout

    try:
        wait_acked(cluster, producer, 1000)
        executed = tool("--execute", "--reassignment-json-file", str(plan))
        assert f"Successfully started partition reassignment for {TOPIC}-0" in executed, executed

        def completed() -> bool:
            return f"Reassignment of partition {TOPIC}-0 is completed." in tool(
                "--verify", "--reassignment-json-file", str(plan))

        cluster.wait_until(completed, timeout=120, interval=1.0, what="the tool to report completion")
        assert "No partition reassignments found." in tool("--list")
        state = cluster.partition_state(TOPIC, 0)
        assert sorted(state.replicas) == [2, 3, 4] and state.leader in (2, 3, 4)
        wait_acked(cluster, producer, producer.acked_count() + 1000)  # production went on
    finally:
        remaining = producer.stop()
    assert remaining == 0 and not producer.errors, (remaining, producer.errors[:10])
    acked = producer.acked(0)
    total = producer.sent()

    deadline = time.monotonic() + 60
    while True:
        copies = {f"node {n}": cluster.node(n).read_partition(TOPIC, 0) for n in (2, 3, 4)}
        if (not compare_copies(copies) and all(len(c) >= total for c in copies.values())) \
                or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    problems = compare_copies(copies)
    for name, records in copies.items():
        problems += check_partition_copy(records, acked, where=f"replica on {name}")
    assert not problems, f"{total} records acknowledged; problems:\n{format_problems(problems)}"
    # Broker 1 let go of the partition (Kafka removes the directory, possibly after a delay).
    cluster.wait_until(lambda: not cluster.node(1).partition_dir(TOPIC, 0).exists(), timeout=90,
                       what="broker 1 to delete its old replica")


def test_elect_leaders_restores_the_preferred_leader_after_it_returns(
    process_cluster_factory: Callable[..., ProcessCluster]
) -> None:
    # Automatic rebalance off, so only ElectLeaders can bring the leadership back.
    cluster = process_cluster_factory(3, netns=False, overrides={"auto.leader.rebalance.enable": "false"})
    create_assigned(cluster, [1, 2, 3])
    assert cluster.partition_state(TOPIC, 0).leader == 1
    cluster.node(1).kill()
    cluster.wait_until(lambda: cluster.partition_state(TOPIC, 0).leader in (2, 3), timeout=60,
                       what="a new leader after the preferred one died")
    cluster.node(1).start()
    cluster.wait_until(lambda: set(cluster.partition_state(TOPIC, 0).isr) == {1, 2, 3}, timeout=60,
                       what="broker 1 back in the ISR")
    assert cluster.partition_state(TOPIC, 0).leader != 1
    result = cluster.admin().elect_leaders(ElectionType.PREFERRED, [TopicPartition(TOPIC, 0)]).result(30)
    assert all(err is None for err in result.values()), result
    cluster.wait_until(lambda: cluster.partition_state(TOPIC, 0).leader == 1, timeout=30,
                       what="the preferred leader back")
