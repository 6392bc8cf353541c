"""The group coordinator against real clients and a real broker process: a group splits a
topic's partitions, committed offsets survive broker restarts, a static member gets its
partitions back after a restart, and lag shows up in the metrics.

(The issue's full acceptance suite, across all clients, lives in its own modules.)
"""

from __future__ import annotations

import threading
import time
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from support.brokers import BrokerProcess
from support.clients import create_topic, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

FAST_GROUPS = {"group.initial.rebalance.delay.ms": 0}


def consumer(broker: BrokerProcess, group: str, **conf: Any) -> Consumer:
    settings: dict[str, Any] = {
        "bootstrap.servers": broker.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
        "log_level": 3,
    }
    settings.update(conf)
    return Consumer(settings)


def produce(broker: BrokerProcess, topic: str, per_partition: int, partitions: int) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "log_level": 3})
    for p in range(partitions):
        for i in range(per_partition):
            producer.produce(topic, value=f"{p}-{i}".encode(), partition=p)
    assert producer.flush(30) == 0


class PollingMember:
    """A confluent-kafka group member polling in its own thread (librdkafka drives the group
    protocol from poll), recording its assignment and every revocation."""

    def __init__(self, make: Callable[[], Consumer], topic: str) -> None:
        self.consumer = make()
        self.assignment: set[int] = set()
        self.revocations = 0
        self.consumed: list[tuple[int | None, int | None]] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.consumer.subscribe([topic], on_assign=self._on_assign, on_revoke=self._on_revoke)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _on_assign(self, _c: Consumer, partitions: list[TopicPartition]) -> None:
        with self._lock:
            self.assignment = {tp.partition for tp in partitions}

    def _on_revoke(self, _c: Consumer, partitions: list[TopicPartition]) -> None:
        with self._lock:
            self.revocations += 1
            self.assignment = set()

    def _run(self) -> None:
        while not self._stop.is_set():
            msg = self.consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                with self._lock:
                    self.consumed.append((msg.partition(), msg.offset()))
                self.consumer.commit(message=msg, asynchronous=False)

    def snapshot(self) -> set[int]:
        with self._lock:
            return set(self.assignment)

    def stop(self, *, close: bool = True) -> None:
        self._stop.set()
        self._thread.join(30)
        if close:
            self.consumer.close()


def test_three_members_split_six_partitions_and_consume_each_record_once(broker_factory) -> None:
    broker = broker_factory(overrides=FAST_GROUPS)
    create_topic(broker.bootstrap, "split", 6)
    produce(broker, "split", 20, 6)
    members = [PollingMember(lambda: consumer(broker, "splitters"), "split") for _ in range(3)]
    try:
        def balanced() -> list[set[int]] | None:
            parts = [m.snapshot() for m in members]
            return parts if all(len(p) == 2 for p in parts) else None

        parts = wait_until(balanced, timeout=60, message="three members with two partitions each")
        assert sorted(p for s in parts for p in s) == list(range(6)), parts  # no overlap, no gap
        wait_until(lambda: sum(len(m.consumed) for m in members) >= 120, timeout=60,
                   message="all 120 records consumed")
        time.sleep(1)
        consumed = [r for m in members for r in m.consumed]
        assert len(consumed) == len(set(consumed)) == 120
    finally:
        for m in members:
            m.stop()
    check = consumer(broker, "splitters")
    committed = check.committed([TopicPartition("split", p) for p in range(6)], timeout=15)
    check.close()
    assert [tp.offset for tp in committed] == [20] * 6


def _committed(broker: BrokerProcess, group: str, topic: str, partitions: int) -> list[int]:
    def probe() -> list[int] | None:
        c = consumer(broker, group)
        try:
            return [tp.offset for tp in c.committed([TopicPartition(topic, p) for p in range(partitions)],
                                                     timeout=10)]
        except KafkaException:
            return None
        finally:
            c.close()

    return wait_until(probe, timeout=60, message="committed offsets readable")


def test_commits_and_group_state_survive_kill_and_clean_restart(broker_factory) -> None:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTopicPartition

    broker = broker_factory(overrides=FAST_GROUPS)
    create_topic(broker.bootstrap, "durable", 3)
    produce(broker, "durable", 10, 3)
    # kafka-python as the group member this time: subscribe, consume, commit.
    kp = KafkaConsumer("durable", bootstrap_servers=broker.bootstrap, group_id="keeper",
                       auto_offset_reset="earliest", enable_auto_commit=False, consumer_timeout_ms=15000)
    for seen, _ in enumerate(kp, start=1):
        if seen == 30:
            break
    kp.commit()
    assert {tp.partition: kp.committed(tp) for tp in (KTopicPartition("durable", p) for p in range(3))} == \
        {0: 10, 1: 10, 2: 10}
    kp.close()
    # A standalone commit (assign, no membership) for a second group on the same topic.
    c = consumer(broker, "independent")
    c.assign([TopicPartition("durable", 0, 4)])
    c.commit(offsets=[TopicPartition("durable", 0, 4)], asynchronous=False)
    c.close()

    broker.restart(hard=True)
    assert _committed(broker, "keeper", "durable", 3) == [10, 10, 10]
    assert _committed(broker, "independent", "durable", 1) == [4]
    broker.restart()
    assert _committed(broker, "keeper", "durable", 3) == [10, 10, 10]
    # The group itself is back too, Empty after its member left.
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 3})
    described = admin.describe_consumer_groups(["keeper"])["keeper"].result(30)
    assert described.state.name == "EMPTY"
    # A new member resumes where the group left off: nothing is read twice.
    produce(broker, "durable", 1, 3)
    resumed = consumer(broker, "keeper")
    resumed.subscribe(["durable"])
    got: list[tuple[int | None, int | None]] = []
    deadline = time.monotonic() + 30
    while len(got) < 3 and time.monotonic() < deadline:
        msg = resumed.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append((msg.partition(), msg.offset()))
    resumed.close()
    assert sorted(got) == [(0, 10), (1, 10), (2, 10)]


def test_members_keep_going_through_a_broker_restart(broker_factory) -> None:
    broker = broker_factory(overrides=FAST_GROUPS)
    create_topic(broker.bootstrap, "steady", 2)
    members = [PollingMember(lambda: consumer(broker, "steady-group", **{"session.timeout.ms": 20000}), "steady")
               for _ in range(2)]
    try:
        wait_until(lambda: all(len(m.snapshot()) == 1 for m in members), timeout=60, message="balanced")
        revocations = [m.revocations for m in members]
        broker.restart(hard=True)
        # The group was reloaded as Stable with the same generation: heartbeats carry on.
        produce(broker, "steady", 5, 2)
        wait_until(lambda: sum(len(m.consumed) for m in members) >= 10, timeout=60, message="consumed after restart")
        assert [m.revocations for m in members] == revocations
    finally:
        for m in members:
            m.stop()


def test_static_member_restart_keeps_its_partitions_without_rebalancing_others(broker_factory) -> None:
    broker = broker_factory(overrides=FAST_GROUPS)
    create_topic(broker.bootstrap, "static", 4)

    def member(instance: str) -> PollingMember:
        return PollingMember(lambda: consumer(broker, "statics", **{"group.instance.id": instance,
                                                                     "session.timeout.ms": 30000}), "static")

    a, b = member("static-a"), member("static-b")
    try:
        wait_until(lambda: len(a.snapshot()) == 2 and len(b.snapshot()) == 2, timeout=60, message="balanced")
        b_parts, a_revocations = b.snapshot(), a.revocations
        b.stop()  # a static member does not leave the group when it closes
        b2 = member("static-b")
        try:
            wait_until(lambda: b2.snapshot() == b_parts, timeout=30, message="same partitions back")
            time.sleep(2)
            assert a.revocations == a_revocations, "the other member was rebalanced"
            assert len(a.snapshot()) == 2
        finally:
            b2.stop()
    finally:
        a.stop()


def test_lag_metric(broker_factory, broker_target) -> None:
    if broker_target != "riverlog":
        pytest.skip("the lag metric is Riverlog's own")
    broker = broker_factory(overrides=FAST_GROUPS)
    create_topic(broker.bootstrap, "lagging", 2)
    produce(broker, "lagging", 7, 2)
    c = consumer(broker, "laggards")
    c.assign([TopicPartition("lagging", 0), TopicPartition("lagging", 1)])
    c.commit(offsets=[TopicPartition("lagging", 0, 3), TopicPartition("lagging", 1, 7)], asynchronous=False)
    c.close()

    def sample(name: str, partition: int) -> float | None:
        text = urllib.request.urlopen(broker.metrics_url, timeout=10).read().decode()
        for line in text.splitlines():
            if line.startswith(name + "{") and 'group="laggards"' in line and f'partition="{partition}"' in line:
                return float(line.rsplit(" ", 1)[1])
        return None

    assert sample("riverlog_consumer_group_lag", 0) == 4
    assert sample("riverlog_consumer_group_lag", 1) == 0
    assert sample("riverlog_consumer_group_committed_offset", 0) == 3
