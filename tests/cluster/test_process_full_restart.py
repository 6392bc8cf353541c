"""Stop every node (SIGTERM, all at once) and start them again: topics keep their ids and
non-default configs, every record is where it was, consumer groups and their committed offsets
survive, and a group member resumes from its committed offsets."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import ConfigResource, ResourceType
from support.cluster_workload import (
    RESILIENT_CLIENT,
    CommittedOffsetMonitor,
    GroupMember,
    SequencedProducer,
    create_topic,
    end_offsets,
    read_partition,
)
from support.process_cluster import ProcessCluster

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(300)]

PLAIN = "restart-plain"
COMPACT = "restart-compact"
PLAIN_CONFIG = {"retention.ms": "86400123", "max.message.bytes": "300000", "min.insync.replicas": "2"}
COMPACT_CONFIG = {"cleanup.policy": "compact", "min.compaction.lag.ms": "60000"}
EXPLICIT_GROUP = "restart-explicit"
EXPLICIT_OFFSETS = {0: 17, 1: 42, 2: 5}
MEMBER_GROUP = "restart-member"


def produce_compacted(cluster: ProcessCluster) -> None:
    producer = Producer({**RESILIENT_CLIENT, "bootstrap.servers": cluster.bootstrap, "acks": "all",
                         "enable.idempotence": True, "message.timeout.ms": 60_000})
    errors: list[str] = []
    for p in range(2):
        for i in range(50):
            producer.produce(COMPACT, key=f"k{p}-{i}".encode(), value=f"v{i}".encode(), partition=p,
                             on_delivery=lambda err, _msg: errors.append(str(err)) if err else None)
    assert producer.flush(60) == 0 and not errors, errors


def commit_explicit(cluster: ProcessCluster) -> None:
    consumer = Consumer({**RESILIENT_CLIENT, "bootstrap.servers": cluster.bootstrap, "group.id": EXPLICIT_GROUP,
                         "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(PLAIN, p, o) for p, o in EXPLICIT_OFFSETS.items()],
                        asynchronous=False)
    finally:
        consumer.close()


def snapshot(cluster: ProcessCluster) -> dict[str, Any]:
    """Everything that must survive the restart, read through the Kafka protocol."""
    admin = cluster.admin()
    described = admin.describe_topics(TopicCollection([PLAIN, COMPACT]), request_timeout=10)
    topic_ids = {name: str(f.result(timeout=15).topic_id) for name, f in described.items()}
    configs = {}
    for name, wanted in ((PLAIN, PLAIN_CONFIG), (COMPACT, COMPACT_CONFIG)):
        (future,) = admin.describe_configs([ConfigResource(ResourceType.TOPIC, name)], request_timeout=10).values()
        entries = future.result(timeout=15)
        configs[name] = {key: entries[key].value for key in wanted}
    data = {}
    for name, partitions in ((PLAIN, 3), (COMPACT, 2)):
        ends = end_offsets(cluster.bootstrap, name, range(partitions))
        for p, end in ends.items():
            data[f"{name}-{p}"] = [(r.offset, r.key, r.value) for r in read_partition(cluster.bootstrap, name, p, end)]
    groups = {g.group_id for g in admin.list_consumer_groups(request_timeout=10).result(timeout=15).valid}
    committed = {}
    for group in (EXPLICIT_GROUP, MEMBER_GROUP):
        reader = CommittedOffsetMonitor(cluster.bootstrap, group, PLAIN, range(3))
        try:
            committed[group] = reader.committed(timeout=10)
        finally:
            reader.close()
    return {"topic ids": topic_ids, "configs": configs, "data": data, "groups": groups & {EXPLICIT_GROUP, MEMBER_GROUP},
            "committed": committed}


def test_full_restart_keeps_topics_data_groups_and_offsets(
    process_cluster_factory: Callable[..., ProcessCluster],
) -> None:
    cluster = process_cluster_factory(3)
    create_topic(cluster, PLAIN, partitions=3, config=PLAIN_CONFIG)
    create_topic(cluster, COMPACT, partitions=2, config=COMPACT_CONFIG)

    producer = SequencedProducer(cluster.bootstrap, PLAIN, [0, 1, 2], name="r", rate=3000).start()
    cluster.wait_until(lambda: producer.acked_count() >= 600, timeout=60, what="600 acknowledged records")
    assert producer.stop() == 0 and not producer.errors, producer.errors[:5]
    produce_compacted(cluster)
    commit_explicit(cluster)
    member = GroupMember(cluster.bootstrap, MEMBER_GROUP, PLAIN, "m1").start()
    try:
        total = producer.sent()
        cluster.wait_until(lambda: len({(c.partition, c.offset) for c in member.snapshot()}) >= total,
                           timeout=60, what=f"the member to consume all {total} records")
    finally:
        member.stop()  # commits what it consumed and leaves the group

    before = cluster.wait_until(lambda: snapshot(cluster), timeout=60, what="a snapshot before the restart")
    assert before["committed"][EXPLICIT_GROUP] == EXPLICIT_OFFSETS
    assert before["committed"][MEMBER_GROUP] == end_offsets(cluster.bootstrap, PLAIN, range(3))
    assert before["groups"] == {EXPLICIT_GROUP, MEMBER_GROUP}
    assert sum(len(v) for k, v in before["data"].items() if k.startswith(PLAIN)) == total

    stopping = time.monotonic()
    graceful = cluster.stop_all()
    stop_took = time.monotonic() - stopping
    print(f"\n[{cluster.target}] stop_all: exited by themselves after SIGTERM: {graceful} in {stop_took:.1f}s")
    assert all(graceful.values()), f"nodes needed SIGKILL after SIGTERM: {graceful}"
    assert not any(n.running for n in cluster.nodes)

    starting = time.monotonic()
    cluster.start_all()
    cluster.wait_until(lambda: cluster.healthy([PLAIN, COMPACT, "__consumer_offsets"]), timeout=60,
                       what="every partition led and fully in sync after the restart")
    print(f"[{cluster.target}] start_all: ready and fully replicated in {time.monotonic() - starting:.1f}s")

    after = cluster.wait_until(lambda: snapshot(cluster), timeout=60, what="a snapshot after the restart")
    for aspect in ("topic ids", "configs", "groups", "committed"):
        assert after[aspect] == before[aspect], aspect
    assert after["data"] == before["data"]

    # A member of the explicit group starts where the commits say, on every partition.
    resumed = GroupMember(cluster.bootstrap, EXPLICIT_GROUP, PLAIN, "m2").start()
    try:
        def first_offsets() -> dict[int, int] | None:
            firsts: dict[int, int] = {}
            for c in resumed.snapshot():
                firsts.setdefault(c.partition, c.offset)
            return firsts if len(firsts) == 3 else None

        firsts = cluster.wait_until(first_offsets, timeout=60, what="the resumed member to read every partition")
    finally:
        resumed.stop()
    assert firsts == EXPLICIT_OFFSETS
