"""Metadata snapshots (``controller/snapshot.py``): an image written as records rebuilds an equal
image, and records applied afterwards give equal images (same broker epochs, same offsets)."""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable

import pytest
from riverlog.config import BrokerConfig, ConfigError
from riverlog.controller import leader_balance, partition_ops, reassignment, topic_ops
from riverlog.controller.image import BROKER_RESOURCE, TOPIC_RESOURCE, MetadataImage
from riverlog.controller.local import PRODUCER_ID_BLOCK
from riverlog.controller.partition_ops import PREFERRED_ELECTION, UNCLEAN_ELECTION, AlterPartitionRequest
from riverlog.controller.quorum import codec
from riverlog.controller.quorum.controller import snapshot_settings
from riverlog.controller.records import (
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    Endpoint,
    MetadataOffsetRecord,
    PartitionRecord,
    ProducerIdsRecord,
    Record,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    from_json,
    to_json,
)
from riverlog.controller.snapshot import image_to_records
from riverlog.controller.topic_ops import NewTopic

pytestmark = pytest.mark.unit

BROKERS = (1, 2, 3, 4, 5)
TOPICS = ("orders", "payments", "audit", "__internal")


def endpoint(n: int) -> tuple[Endpoint, ...]:
    return (Endpoint("PLAINTEXT", "127.0.0.1", 9000 + n), Endpoint("CONTROLLER", "127.0.0.1", 9100 + n))


def rebuild(image: MetadataImage) -> MetadataImage:
    """What a node restoring a snapshot of ``image`` gets (through the log's JSON encoding)."""
    data = codec.encode_records(image_to_records(image))
    return MetadataImage(cluster_id=image.cluster_id).apply(codec.decode_records(data))


def assert_same(rebuilt: MetadataImage, image: MetadataImage) -> None:
    assert rebuilt == image
    # Equal and iterated alike, so decisions that walk the image walk it in the same order.
    assert list(rebuilt.brokers) == list(image.brokers)
    assert list(rebuilt.topics) == list(image.topics)
    for name, topic in image.topics.items():
        assert list(rebuilt.topics[name].partitions) == list(topic.partitions)


# Targeted cases -----------------------------------------------------------------------------


def test_empty_image_round_trips() -> None:
    image = MetadataImage(cluster_id="c")
    assert_same(rebuild(image), image)
    assert rebuild(image).apply([RegisterBrokerRecord(1, endpoint(1))]).brokers[1].epoch == 0


def test_broker_epochs_and_the_offset_survive_a_snapshot() -> None:
    records: list[Record] = [RegisterBrokerRecord(n, endpoint(n), f"rack-{n}", True, f"inc-{n}") for n in (1, 2, 3)]
    records += [TopicRecord(f"t{i}", uuid.uuid4()) for i in range(5)]  # the offset moves on
    records += [BrokerRegistrationChangeRecord(2, 1, False), RegisterBrokerRecord(1, endpoint(1), None, True, "inc-1b")]
    image = MetadataImage(cluster_id="c").apply(records)
    assert [image.brokers[n].epoch for n in (1, 2, 3)] == [9, 1, 2]
    assert image.offset == 9
    rebuilt = rebuild(image)
    assert_same(rebuilt, image)
    assert [rebuilt.brokers[n].epoch for n in (1, 2, 3)] == [9, 1, 2]
    assert rebuilt.brokers[2].fenced is False and rebuilt.brokers[3].fenced is True
    # A fencing aimed at the registration the snapshot kept still matches it ...
    after = [BrokerRegistrationChangeRecord(2, 1, True), RegisterBrokerRecord(4, endpoint(4), None, True, "inc-4")]
    assert_same(rebuilt.apply(after), image.apply(after))
    # ... and the next registration gets the epoch a full replay would give it.
    assert rebuilt.apply(after).brokers[4].epoch == 11


def test_partitions_keep_epochs_and_reassignment_state() -> None:
    tid = uuid.uuid4()
    image = MetadataImage(cluster_id="c").apply([
        TopicRecord("t", tid),
        PartitionRecord(tid, 0, (4, 5, 1, 2), (1, 2, 4), 2, 7, 19, (4, 5), (1, 2)),
        PartitionRecord(tid, 1, (3,), (3,), -1, 2, 3),
        ConfigRecord(TOPIC_RESOURCE, "t", "retention.ms", "1000"),
        ConfigRecord(BROKER_RESOURCE, "1", "log.cleaner.threads", "2"),
        ProducerIdsRecord(3, 4000),
    ])
    rebuilt = rebuild(image)
    assert_same(rebuilt, image)
    part = rebuilt.topics["t"].partitions[0]
    assert (part.leader_epoch, part.partition_epoch) == (7, 19)
    assert (part.adding_replicas, part.removing_replicas) == ((4, 5), (1, 2))
    assert rebuilt.next_producer_id == 4000
    assert rebuilt.configs[(BROKER_RESOURCE, "1")] == {"log.cleaner.threads": "2"}


def test_snapshot_records_round_trip_through_json() -> None:
    for record in (RegisterBrokerRecord(1, endpoint(1), None, True, "x", broker_epoch=42), MetadataOffsetRecord(99)):
        assert from_json(to_json(record)) == record
    # Registrations written before the field existed load with the derived epoch.
    old = {"type": "register_broker", "broker_id": 1, "endpoints": [], "rack": None, "fenced": False,
           "incarnation_id": "a"}
    assert from_json(old) == RegisterBrokerRecord(1, (), None, False, "a", broker_epoch=-1)


def test_snapshot_settings_are_checked_as_kafka_checks_them() -> None:
    assert snapshot_settings(BrokerConfig({})) == (20 * 1024 * 1024, 3_600_000)
    assert snapshot_settings(BrokerConfig({"metadata.log.max.snapshot.interval.ms": "0"}))[1] == 0
    with pytest.raises(ConfigError):
        snapshot_settings(BrokerConfig({"metadata.log.max.record.bytes.between.snapshots": "0"}))
    with pytest.raises(ConfigError):
        snapshot_settings(BrokerConfig({"metadata.log.max.snapshot.interval.ms": "-1"}))


# Random workloads of real controller decisions ---------------------------------------------


class Workload:
    """Random controller operations, decided by the real pure functions on a given image."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.incarnations = 0
        self.ops: list[Callable[[MetadataImage], list[Record]]] = [
            self.register, self.register, self.unfence, self.unfence, self.unfence, self.fence,
            self.create_topic, self.create_topic, self.delete_topic, self.create_partitions, self.alter_configs,
            self.alter_partition, self.alter_partition, self.elect, self.reassign, self.reassign,
            self.producer_ids, self.balance, self.broker_config,
        ]

    def step(self, image: MetadataImage) -> list[Record]:
        return self.rng.choice(self.ops)(image)

    def _partition(self, image: MetadataImage) -> tuple[str, int] | None:
        parts = [(name, p) for name, t in image.topics.items() for p in t.partitions]
        return self.rng.choice(parts) if parts else None

    def register(self, image: MetadataImage) -> list[Record]:
        self.incarnations += 1
        broker = self.rng.choice(BROKERS)
        return partition_ops.register_broker(image, broker, f"inc-{self.incarnations}", endpoint(broker),
                                             self.rng.choice([None, "a", "b"]), unclean_default=self.rng.random() < 0.2)

    def unfence(self, image: MetadataImage) -> list[Record]:
        return partition_ops.unfence_broker(image, self.rng.choice(BROKERS))

    def fence(self, image: MetadataImage) -> list[Record]:
        return partition_ops.fence_broker(image, self.rng.choice(BROKERS), unclean_default=self.rng.random() < 0.3)

    def create_topic(self, image: MetadataImage) -> list[Record]:
        rng = self.rng
        configs = {"retention.ms": str(rng.randint(1000, 10**6))} if rng.random() < 0.5 else {}
        if rng.random() < 0.3:
            configs["unclean.leader.election.enable"] = rng.choice(["true", "false"])
        req = NewTopic(rng.choice(TOPICS), rng.randint(1, 4), rng.randint(1, 3), configs=configs)
        return topic_ops.create_topic(image, req, default_partitions=1, default_replication=1,
                                      start_index=rng.randint(0, 10)).records

    def delete_topic(self, image: MetadataImage) -> list[Record]:
        return topic_ops.delete_topic(image, self.rng.choice(TOPICS), None).records

    def create_partitions(self, image: MetadataImage) -> list[Record]:
        name = self.rng.choice(TOPICS)
        current = len(image.topics[name].partitions) if name in image.topics else 0
        return topic_ops.create_partitions(image, name, current + self.rng.randint(1, 2), None).records

    def alter_configs(self, image: MetadataImage) -> list[Record]:
        rng = self.rng
        values: dict[str, str | None] = {"retention.ms": rng.choice([None, "5000", "60000"]),
                                         "cleanup.policy": rng.choice(["compact", "delete"])}
        return topic_ops.alter_topic_configs(image, rng.choice(TOPICS), values, replace_all=rng.random() < 0.3).records

    def alter_partition(self, image: MetadataImage) -> list[Record]:
        """The leader shrinks or expands its ISR (sometimes with stale epochs, refused)."""
        found = self._partition(image)
        if found is None:
            return []
        topic = image.topics[found[0]]
        part = topic.partitions[found[1]]
        leader = image.brokers.get(part.leader)
        if leader is None:
            return []
        others = [r for r in part.replicas if r != part.leader and self.rng.random() < 0.6]
        isr = (part.leader, *others)
        epochs = tuple(image.brokers[r].epoch if r in image.brokers else -1 for r in isr)
        stale = self.rng.random() < 0.1
        req = AlterPartitionRequest(topic.topic_id, part.partition, part.leader_epoch - stale, part.partition_epoch,
                                    isr, epochs)
        return partition_ops.alter_partition(image, part.leader, leader.epoch, [req]).records

    def elect(self, image: MetadataImage) -> list[Record]:
        found = self._partition(image)
        if found is None:
            return []
        kind = self.rng.choice([PREFERRED_ELECTION, UNCLEAN_ELECTION])
        return partition_ops.elect_leaders(image, found[0], found[1], kind).records

    def reassign(self, image: MetadataImage) -> list[Record]:
        found = self._partition(image)
        if found is None:
            return []
        target = None if self.rng.random() < 0.25 else self.rng.sample(BROKERS, self.rng.randint(1, 3))
        return reassignment.alter_partition_reassignments(image, [(found[0], found[1], target)],
                                                          unclean_default=self.rng.random() < 0.3).records

    def producer_ids(self, image: MetadataImage) -> list[Record]:
        return [ProducerIdsRecord(self.rng.choice(BROKERS), image.next_producer_id + PRODUCER_ID_BLOCK)]

    def balance(self, image: MetadataImage) -> list[Record]:
        return leader_balance.preferred_leader_elections(image, self.rng.choice([0, 10, 50]))

    def broker_config(self, image: MetadataImage) -> list[Record]:
        value = self.rng.choice([None, "1", "2"])
        return [ConfigRecord(BROKER_RESOURCE, str(self.rng.choice(BROKERS)), "log.cleaner.threads", value)]


def test_snapshots_of_random_workloads_rebuild_equal_images() -> None:
    """Property: for images made by random sequences of real operations, the snapshot rebuilds an
    equal image, and both stay equal under every later change, whichever of the two decides it."""
    seen = {"reassigning": 0, "fenced": 0, "offline": 0, "configs": 0, "producer ids": 0, "deleted": 0,
            "epochs": 0, "reregistered": 0}
    for seed in range(60):
        rng = random.Random(seed)
        workload = Workload(rng)
        image = MetadataImage(cluster_id=f"c{seed}")
        rebuilt: MetadataImage | None = None
        for _ in range(250):
            decider = image if rebuilt is None or rng.random() < 0.5 else rebuilt
            records = workload.step(decider)
            if any(isinstance(r, RemoveTopicRecord) for r in records):
                seen["deleted"] += 1
            image = image.apply(records)
            if rebuilt is not None:
                rebuilt = rebuilt.apply(records)
                assert rebuilt == image, f"seed {seed}: images part after {records}"
            if rng.random() < 0.08:
                rebuilt = rebuild(image)
                assert_same(rebuilt, image)
                parts = [p for t in image.topics.values() for p in t.partitions.values()]
                seen["reassigning"] += any(p.reassigning for p in parts)
                seen["offline"] += any(p.leader == -1 for p in parts)
                seen["epochs"] += any(p.leader_epoch > 0 and p.partition_epoch > p.leader_epoch for p in parts)
                seen["fenced"] += any(b.fenced for b in image.brokers.values())
                seen["reregistered"] += any(b.epoch > 10 for b in image.brokers.values())
                seen["configs"] += bool(image.configs)
                seen["producer ids"] += image.next_producer_id > 0
        assert_same(rebuild(image), image)
    # The workloads reached the states a snapshot must carry.
    assert all(count > 0 for count in seen.values()), seen
