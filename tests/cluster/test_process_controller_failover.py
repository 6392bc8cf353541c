"""kill -9 of the active controller (the metadata quorum's leader, found with DescribeQuorum):
the other voters elect a new one in a later epoch, CreateTopics keeps working, and the killed
node restarts, catches up with the metadata log and serves as a broker again."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from support.cluster_workload import RESILIENT_CLIENT, create_topic
from support.kafka_wire import QuorumState
from support.process_cluster import ProcessCluster

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(300)]


def round_trip(cluster: ProcessCluster, topic: str, partitions: int) -> None:
    """Every partition takes an acks=all record and gives it back."""
    producer = Producer({**RESILIENT_CLIENT, "bootstrap.servers": cluster.bootstrap, "acks": "all",
                         "enable.idempotence": True, "message.timeout.ms": 60_000})
    errors: list[str] = []
    marker = uuid.uuid4().hex.encode()
    for p in range(partitions):
        producer.produce(topic, value=marker, partition=p,
                         on_delivery=lambda err, _msg: errors.append(str(err)) if err else None)
    assert producer.flush(60) == 0 and not errors, errors
    consumer = Consumer({**RESILIENT_CLIENT, "bootstrap.servers": cluster.bootstrap, "group.id": f"rt-{topic}",
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        got: set[int] = set()
        deadline = time.monotonic() + 60
        while len(got) < partitions:
            assert time.monotonic() < deadline, f"read back only partitions {sorted(got)} of {topic}"
            msg = consumer.poll(0.5)
            partition = None if msg is None or msg.error() or msg.value() != marker else msg.partition()
            if partition is not None:
                got.add(partition)
    finally:
        consumer.close()


def test_killed_active_controller_is_replaced_and_rejoins(
    process_cluster_factory: Callable[..., ProcessCluster], record_property: Callable[[str, object], None]
) -> None:
    cluster = process_cluster_factory(3)
    before = cluster.quorum()
    victim = before.leader_id
    assert victim in (1, 2, 3) and set(before.voters) == {1, 2, 3}, before

    killed_at = time.monotonic()
    cluster.node(victim).kill()

    def new_leader() -> QuorumState | None:
        state = cluster.quorum()
        return state if state.leader_id not in (-1, victim) else None

    after = cluster.wait_until(new_leader, timeout=60, what="a new active controller")
    elected_after = time.monotonic() - killed_at
    assert after.leader_epoch > before.leader_epoch, (before, after)
    print(f"\n[{cluster.target}] killed active controller {victim} (epoch {before.leader_epoch}); node "
          f"{after.leader_id} leads epoch {after.leader_epoch}, seen {elected_after:.2f}s after the kill")
    record_property("controller_failover_seconds", round(elected_after, 3))

    # The new controller fences the dead broker (its session lapses), and the metadata plane
    # works without it: two live brokers, so RF=2 lands on them.
    cluster.wait_until(lambda: cluster.brokers() == {1, 2, 3} - {victim}, timeout=30,
                       what=f"node {victim} fenced by the new controller")
    create_topic(cluster, "after-controller-kill", partitions=2, replication=2)
    for p in range(2):
        assert victim not in cluster.partition_state("after-controller-kill", p).replicas
    round_trip(cluster, "after-controller-kill", 2)

    # The victim restarts from its own data, catches up with the metadata log and is a live
    # broker again; a topic over all three nodes then has it in every ISR.
    cluster.node(victim).start()
    mark = cluster.quorum().high_watermark
    cluster.wait_until(lambda: cluster.quorum().voters.get(victim, -1) >= mark, timeout=60,
                       what=f"node {victim}'s metadata log to reach offset {mark}")
    assert cluster.brokers() == {1, 2, 3}
    create_topic(cluster, "after-controller-rejoin", partitions=3, replication=3)
    for p in range(3):
        state = cluster.partition_state("after-controller-rejoin", p)
        assert set(state.isr) == {1, 2, 3}, state
    round_trip(cluster, "after-controller-rejoin", 3)
    # Its return did not disturb the quorum's leadership.
    final = cluster.quorum()
    assert final.leader_id in (1, 2, 3) and final.leader_epoch >= after.leader_epoch
