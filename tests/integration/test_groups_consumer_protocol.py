"""KIP-848 (issue #21, acceptance point 1 with confluent-kafka): consumers with
``group.protocol=consumer``, assigned by the broker.

Three consumers of one group join one by one while records flow into a 6-partition topic, then
two leave one by one. Polled round-robin from this process (librdkafka heartbeats on its own
threads); at every poll the assignments the clients hold are checked to be disjoint; in the end
every record was consumed and the committed offsets never went back. Runs the same against
Apache Kafka (RIVERLOG_TEST_TARGET=kafka).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from support.brokers import BrokerProcess
from support.clients import create_topic
from support.groups import GROUP_BROKER_SETTINGS, produce_known

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

PARTITIONS = 6
PER_ROUND = 20
SETTINGS = {**GROUP_BROKER_SETTINGS, "group.consumer.heartbeat.interval.ms": 500,
            "group.consumer.min.heartbeat.interval.ms": 500,
            # Online migration classic <-> consumer is a later step: Kafka as Riverlog answers now.
            "group.consumer.migration.policy": "disabled"}


@pytest.fixture
def broker(broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    return broker_factory(SETTINGS)


class Member:
    def __init__(self, bootstrap: str, group: str, topic: str, name: str) -> None:
        self.name = name
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
            "client.id": name, "enable.auto.commit": False, "auto.offset.reset": "earliest", "log_level": 3,
        })
        self.consumer.subscribe([topic])
        self.seen: dict[tuple[int, int], str] = {}
        self.committed: dict[int, list[int]] = {}

    def poll(self) -> None:
        msg = self.consumer.poll(0.05)
        if msg is None or msg.error() is not None:
            return
        self.seen[(msg.partition(), msg.offset())] = msg.value().decode()
        tp = TopicPartition(msg.topic(), msg.partition(), msg.offset() + 1)
        try:
            self.consumer.commit(offsets=[tp], asynchronous=False)
            self.committed.setdefault(msg.partition(), []).append(msg.offset() + 1)
        except KafkaException:
            pass  # a stale epoch while the assignment moves: the next record's commit covers it

    def owned(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}


def poll_until(members: list[Member], done: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        for m in members:
            m.poll()
        owned = [m.owned() for m in members]
        flat = [p for ps in owned for p in ps]
        assert len(flat) == len(set(flat)), f"a partition owned twice: {owned}"


def consumed(everyone: list[Member]) -> set[tuple[int, int]]:
    return {k for m in everyone for k in m.seen}


def test_members_join_and_leave_while_records_flow(broker: BrokerProcess) -> None:
    topic = group = "kip848-flow"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    everyone: list[Member] = []
    active: list[Member] = []
    produced: dict[tuple[int, int], str] = {}
    try:
        for i in range(3):
            member = Member(broker.bootstrap, group, topic, f"m{i}")
            everyone.append(member)
            active.append(member)
            produced.update(produce_known(broker.bootstrap, topic, PARTITIONS, PER_ROUND, f"join{i}"))
            poll_until(active, lambda: sum(len(m.owned()) for m in active) == PARTITIONS
                       and all(m.owned() for m in active), 60, f"{len(active)} members sharing the partitions")
            poll_until(active, lambda: consumed(everyone) >= set(produced), 60, "every record consumed")
        for leaving in everyone[:2]:
            leaving.consumer.close()
            active.remove(leaving)
            produced.update(produce_known(broker.bootstrap, topic, PARTITIONS, PER_ROUND, f"leave-{leaving.name}"))
            poll_until(active, lambda: consumed(everyone) >= set(produced), 90,
                       f"every record consumed after {leaving.name} left")
        assert active[0].owned() == set(range(PARTITIONS))
        values = {k: v for m in everyone for k, v in m.seen.items()}
        assert {k: values[k] for k in produced} == produced
        for m in everyone:
            for partition, offsets in m.committed.items():
                assert offsets == sorted(offsets), f"{m.name} committed backwards on {partition}"
        # The last member's view of the group: one member, every partition, as Kafka describes it.
        group_offsets = active[0].consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], 10)
        assert sum(tp.offset for tp in group_offsets) == len(produced)
    finally:
        for m in active:
            m.consumer.close()


def test_consumer_member_cannot_join_a_classic_group_in_use(broker: BrokerProcess) -> None:
    topic = group = "kip848-classic"
    create_topic(broker.bootstrap, topic, 2)
    classic = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "log_level": 3,
                        "session.timeout.ms": 10000, "auto.offset.reset": "earliest"})
    classic.subscribe([topic])
    errors: list[Any] = []
    modern = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "group.protocol": "consumer",
                       "log_level": 3, "error_cb": errors.append})
    try:
        deadline = time.monotonic() + 60
        while not classic.assignment():
            assert time.monotonic() < deadline, "the classic member never got its partitions"
            classic.poll(0.1)
        modern.subscribe([topic])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not modern.assignment():
            modern.poll(0.2)
            classic.poll(0.05)
        assert modern.assignment() == [] and classic.assignment() != []
    finally:
        modern.close()
        classic.close()
