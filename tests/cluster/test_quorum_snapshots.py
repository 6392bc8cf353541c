"""Snapshots of the Raft metadata log between real brokers in one process (in-process quorum
cluster, loopback TCP): snapshots are written and the log compacted; a broker that was away while
the leader compacted past its log end catches up by FetchSnapshot; a full restart loads the
snapshots. ``metadata.log.max.record.bytes.between.snapshots=1`` makes every committed batch of
records due for a snapshot."""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from riverlog.controller.image import MetadataImage
from riverlog.controller.quorum import codec
from riverlog.controller.quorum.controller import QuorumController
from riverlog.controller.quorum.storage import METADATA_DIR_NAME, QuorumStorage
from riverlog.controller.topic_ops import NewTopic
from riverlog.protocol.errors import ErrorCode
from support.quorum_cluster import QuorumCluster

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(240)]

TINY = {"metadata.log.max.record.bytes.between.snapshots": "1"}
KAFKA_DEFAULT_BYTES = str(20 * 1024 * 1024)


def produce(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(count):
        producer.produce(topic, key=b"%d" % i, value=b"v%d" % i, partition=i % 3)
    assert producer.flush(30) == 0


def read_all(bootstrap: str, topic: str, count: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "s", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(3)])
    seen: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(seen) < count and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is not None and msg.error() is None:
            seen.append(msg.value())
    consumer.close()
    return seen


def run(tmp_path: Path, scenario: Callable[[QuorumCluster], Awaitable[None]],
        overrides: dict[str, str] | None = None) -> None:
    async def main() -> None:
        cluster = QuorumCluster(tmp_path, 3, TINY if overrides is None else overrides)
        await cluster.start()
        try:
            await scenario(cluster)
        finally:
            await cluster.stop()

    asyncio.run(main())


def quorum(cluster: QuorumCluster, node_id: int) -> QuorumController:
    q = cluster.brokers[node_id].quorum
    assert q is not None
    return q


def metadata_dir(cluster: QuorumCluster, node_id: int) -> Path:
    return cluster.config(node_id).metadata_log_dir / METADATA_DIR_NAME


def checkpoints(cluster: QuorumCluster, node_id: int) -> list[str]:
    return sorted(p.name for p in metadata_dir(cluster, node_id).glob("*.checkpoint"))


def first_stored_offset(cluster: QuorumCluster, node_id: int) -> int | None:
    """Offset of the first entry in ``raft.log`` (frame: length, crc, then offset int64)."""
    head = (metadata_dir(cluster, node_id) / "raft.log").read_bytes()[:16]
    return struct.unpack(">IIq", head)[2] if len(head) == 16 else None


def snapshot_image(q: QuorumController) -> MetadataImage | None:
    snap = q.driver.node.snapshot
    if snap is None:
        return None
    return MetadataImage(cluster_id=q.image.cluster_id).apply(codec.decode_records(snap.data))


async def create_topics(cluster: QuorumCluster, via: int, names: list[str], rf: int = 3) -> None:
    outcomes = await cluster.brokers[via].controller.create_topics(
        [NewTopic(n, 3, rf, configs={"min.insync.replicas": "2"}) for n in names],
        validate_only=False, default_partitions=1, default_replication=3)
    assert [o.error for o in outcomes] == [ErrorCode.NONE] * len(names), [o.message for o in outcomes]
    await cluster.wait_until(lambda: all(set(names) <= set(img.topics) for img in cluster.images().values()),
                             what=f"{names} in every broker's image")


def images_equal(cluster: QuorumCluster) -> bool:
    images = list(cluster.images().values())
    return all(img == images[0] for img in images[1:])


def test_snapshots_are_written_and_the_log_compacted(tmp_path: Path) -> None:
    async def scenario(cluster: QuorumCluster) -> None:
        for i in range(5):
            await create_topics(cluster, 1 + i % 3, [f"t{i}"])
        for n in cluster.brokers:
            q = quorum(cluster, n)
            await cluster.wait_until(lambda q=q: q.driver.node.log.start > 0, what=f"node {n} compacting its log")
            snap = q.driver.node.snapshot
            assert snap is not None
            # One checkpoint file (older ones are deleted), named by its end offset and epoch.
            await cluster.wait_until(lambda n=n: len(checkpoints(cluster, n)) == 1, what=f"one checkpoint on {n}")
            # The stored log begins at (or, once a newer snapshot compacted it, after) a snapshot.
            first = first_stored_offset(cluster, n)
            assert first is None or first > 0
            # Each node's snapshot rebuilds the image it had at that offset: here, with nothing
            # else happening, its current one.
            await cluster.wait_until(lambda q=q: snapshot_image(q) == q.image, what=f"node {n}'s snapshot current")
            assert {f"t{i}" for i in range(5)} <= set(q.image.topics)

    run(tmp_path, scenario)


def test_broker_behind_the_leaders_log_start_catches_up_by_fetch_snapshot(tmp_path: Path) -> None:
    async def scenario(cluster: QuorumCluster) -> None:
        await cluster.wait_until(lambda: cluster.active_controller() is not None, what="an active controller")
        leader = cluster.active_controller()
        assert leader is not None
        away = next(n for n in cluster.brokers if n != leader)
        await create_topics(cluster, leader, ["before"])
        away_end = quorum(cluster, away).driver.node.log.end
        await cluster.stop_broker(away)
        # The leader goes on and compacts its log past where the stopped broker's log ends.
        for i in range(4):
            await create_topics(cluster, leader, [f"while-away-{i}"], rf=2)
        lq = quorum(cluster, leader)
        await cluster.wait_until(lambda: lq.driver.node.log.start > away_end,
                                 what="the leader compacting past the stopped broker's log end")
        # Back with Kafka's default threshold, so it takes no snapshot of its own: any snapshot
        # it holds beyond its old log end was downloaded from the leader.
        cluster.overrides["metadata.log.max.record.bytes.between.snapshots"] = KAFKA_DEFAULT_BYTES
        await cluster.start_broker(away)
        aq = quorum(cluster, away)
        assert aq.snapshot_max_bytes == 20 * 1024 * 1024
        snap = aq.driver.node.snapshot
        assert snap is not None and snap.end_offset > away_end
        await cluster.wait_until(lambda: away in aq.image.live_broker_ids(), what="the returning broker unfenced")
        await cluster.wait_until(lambda: images_equal(cluster), what="every broker with the same image")
        assert {"before", *(f"while-away-{i}" for i in range(4))} <= set(aq.image.topics)
        # It keeps following the log after the snapshot.
        await create_topics(cluster, away, ["after"])
        await cluster.wait_until(lambda: images_equal(cluster), what="every broker with the same image")

    run(tmp_path, scenario)


def test_full_restart_loads_the_snapshots(tmp_path: Path) -> None:
    async def scenario(cluster: QuorumCluster) -> None:
        await create_topics(cluster, 1, ["durable", "other"])
        (outcome,) = [await cluster.brokers[2].controller.alter_topic_configs(
            "durable", {"retention.ms": "123456"}, replace_all=False, validate_only=False)]
        assert outcome.error == ErrorCode.NONE
        await asyncio.to_thread(produce, cluster.bootstrap, "durable", 90)
        # Quiet: every node's latest snapshot holds its whole image.
        for n in cluster.brokers:
            q = quorum(cluster, n)
            await cluster.wait_until(lambda q=q: snapshot_image(q) == q.image, what=f"node {n}'s snapshot current")
        before = cluster.images()
        for n in list(cluster.brokers):
            await cluster.crash(n)  # no controlled shutdown: no records after the snapshots
        ends: dict[int, int] = {}
        for n, image in before.items():
            storage = QuorumStorage(metadata_dir(cluster, n))
            stored = storage.load()  # what the driver loads at start
            storage.close()
            assert stored.snapshot is not None
            ends[n] = stored.snapshot.end_offset
            loaded = MetadataImage(cluster_id=image.cluster_id).apply(codec.decode_records(stored.snapshot.data))
            assert loaded == image
            assert all(e.offset >= stored.snapshot.end_offset for e in stored.entries)
        await cluster.start()
        for n in cluster.brokers:
            q = quorum(cluster, n)
            assert q.driver.node.log.start >= ends[n]  # nothing below the snapshot was replayed
        await cluster.wait_until(lambda: all(img.live_broker_ids() == {1, 2, 3} for img in cluster.images().values()),
                                 what="three live brokers in every image")
        await cluster.wait_until(lambda: images_equal(cluster), what="every broker with the same image")
        for img in cluster.images().values():
            assert img.topic_configs("durable").get("retention.ms") == "123456"
            assert {"durable", "other"} <= set(img.topics)
        # The brokers registered again: new epochs above the ones the snapshots kept.
        for n, img in cluster.images().items():
            assert img.brokers[n].epoch > before[n].brokers[n].epoch
        seen = await asyncio.to_thread(read_all, cluster.bootstrap, "durable", 90)
        assert sorted(seen) == sorted(b"v%d" % i for i in range(90))

    run(tmp_path, scenario)


def test_interval_snapshots_a_log_below_the_byte_threshold(tmp_path: Path) -> None:
    async def scenario(cluster: QuorumCluster) -> None:
        await create_topics(cluster, 1, ["quiet"])
        for n in cluster.brokers:
            q = quorum(cluster, n)
            assert q.snapshot_max_bytes == 20 * 1024 * 1024  # far from reached: only time triggers
            await cluster.wait_until(lambda q=q: snapshot_image(q) == q.image, what=f"node {n}'s timed snapshot")
            assert "quiet" in q.image.topics

    run(tmp_path, scenario, {"metadata.log.max.snapshot.interval.ms": "300"})
