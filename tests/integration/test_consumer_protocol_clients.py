"""KIP-848 with real clients (issue #21, acceptance 1): Java's KafkaConsumer and confluent-kafka
with ``group.protocol=consumer``.

Members of one group join one by one and then leave one by one on a 6-partition topic while a
producer keeps producing. Checked without comparing clocks:

- no partition is owned by two members at once: the members' rebalance callbacks are numbered by
  one counter, and replaying them in that order never assigns a partition another member still
  holds (``support.rebalance_checks``);
- every acknowledged record was consumed by some member;
- the group's committed offsets, read again and again by a third party while it runs, never go
  back, and end at the log end.

And a regex subscription (Java's ``SubscriptionPattern``, RE2/J evaluated by the broker;
librdkafka's ``^``-prefixed topic names) picks up a topic created after the member joined.

Java's members all run in one JVM (``tests/java/GroupMembers.java``, a thread per member).
Runs the same against Apache Kafka (RIVERLOG_TEST_TARGET=kafka).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from support.brokers import BrokerProcess
from support.clients import create_topic
from support.groups import GROUP_BROKER_SETTINGS
from support.java_group_members import WAIT_S, sharing, wait_status
from support.java_programs import JavaPrograms, JavaSession
from support.rebalance_checks import (
    ASSIGNED,
    LOST,
    REVOKED,
    CommittedOffsetsWatch,
    EventLog,
    final_owners,
    log_ends,
    ownership_overlaps,
    partitions_of,
    wait_committed,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

PARTITIONS = 6
SETTINGS = {**GROUP_BROKER_SETTINGS, "group.consumer.heartbeat.interval.ms": 500,
            "group.consumer.min.heartbeat.interval.ms": 500}
CONSUMER_PROTOCOL = ["group.protocol=consumer"]
PRODUCE_PAUSE_MS = 10


@pytest.fixture(scope="module")
def broker(module_broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    return module_broker_factory(SETTINGS)


@pytest.fixture(scope="module")
def java_programs(kafka_libs: Path) -> JavaPrograms:
    programs = JavaPrograms(kafka_libs)
    programs.classes()
    return programs


@pytest.fixture
def members(java_programs: JavaPrograms, broker: BrokerProcess, tmp_path: Path) -> Iterator[JavaSession]:
    with java_programs.session("GroupMembers", [broker.bootstrap], log_path=tmp_path / "group-members.log") as s:
        yield s


# --- Java -----------------------------------------------------------------------------------------


def check_run(s: JavaSession, names: list[str], acked: list[list[Any]], watch: CommittedOffsetsWatch) -> None:
    events = s.call("events", 0)["events"]
    assert ownership_overlaps(events) == []
    assert not [e for e in events if e["kind"] == LOST], "a member lost its partitions (fenced)"
    consumed = {tuple(r) for name in names for r in s.call("consumed", name)["records"]}
    missing = {tuple(r) for r in acked} - consumed
    assert not missing, f"{len(missing)} acknowledged records never consumed, e.g. {sorted(missing)[:5]}"
    assert watch.readings > 0 and watch.regressions() == {}
    assert watch.latest() == log_ends(acked)


def test_java_members_join_and_leave_while_records_flow(members: JavaSession, broker: BrokerProcess) -> None:
    topic = group = "kip848-java-flow"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    everything = partitions_of(topic, PARTITIONS)
    names = ["m0", "m1", "m2"]
    with CommittedOffsetsWatch(broker.bootstrap, group) as watch:
        members.call("produce_start", "flow", topic, PARTITIONS, PRODUCE_PAUSE_MS)
        active: list[str] = []
        for name in names:
            before = members.call("status")["produced"]["flow"]
            members.call("member", name, group, f"topics:{topic}", *CONSUMER_PROTOCOL)
            active.append(name)
            wait_status(members, sharing(list(active), everything), f"{active} sharing the partitions")
            # Records keep flowing to the new member: it reads some produced after it joined.
            wait_status(members, lambda st, n=name, b=before: st["members"][n]["consumed"] > 0
                        and st["produced"]["flow"] > b + PARTITIONS, f"{name} consuming")
        for name in names[:-1]:
            assert members.call("close", name)["closed"]
            active.remove(name)
            wait_status(members, sharing(list(active), everything), f"{active} sharing after {name} left")
        produced = members.call("produce_stop", "flow")
        assert produced["failed"] == []
        wait_committed(watch, log_ends(produced["acked"]))
        assert members.call("close", names[-1])["closed"]
    check_run(members, names, produced["acked"], watch)


def test_java_regex_subscription_picks_up_a_topic_created_later(members: JavaSession,
                                                                broker: BrokerProcess) -> None:
    group = "kip848-java-regex"
    first, later = "kip848-jre-a", "kip848-jre-b"
    create_topic(broker.bootstrap, first, 2)
    with CommittedOffsetsWatch(broker.bootstrap, group) as watch:
        members.call("produce_start", "first", first, 2, PRODUCE_PAUSE_MS)
        members.call("member", "r0", group, "pattern:kip848-jre-.*", *CONSUMER_PROTOCOL)
        wait_status(members, sharing(["r0"], partitions_of(first, 2)), "r0 owning the first topic")
        create_topic(broker.bootstrap, later, 2)
        members.call("produce_start", "later", later, 2, PRODUCE_PAUSE_MS)
        wait_status(members, sharing(["r0"], partitions_of(first, 2) | partitions_of(later, 2)),
                    "r0 owning the topic created later too")
        acked = [r for name in ("first", "later") for r in members.call("produce_stop", name)["acked"]]
        wait_committed(watch, log_ends(acked))
        assert members.call("close", "r0")["closed"]
    check_run(members, ["r0"], acked, watch)


# --- confluent-kafka ------------------------------------------------------------------------------


class PythonProducer:
    """Produces to the partitions of a topic in turn on a thread until stopped; keeps what was
    acknowledged."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.topic, self.partitions = topic, partitions
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "log_level": 3})
        self.acked: list[list[Any]] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _on_delivery(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.errors.append(str(err))
        else:
            self.acked.append([msg.topic(), msg.partition(), msg.offset()])

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            self.producer.produce(self.topic, value=f"{self.topic}-{i}".encode(), partition=i % self.partitions,
                                  on_delivery=self._on_delivery)
            self.producer.poll(0)
            i += 1
            time.sleep(PRODUCE_PAUSE_MS / 1000)

    def stop(self) -> list[list[Any]]:
        self._stop.set()
        self._thread.join(30)
        assert self.producer.flush(30) == 0 and self.errors == [], self.errors[:5]
        return self.acked


class PythonMember:
    """A confluent-kafka consumer whose rebalance callbacks go to a shared :class:`EventLog`;
    every consumer of a test is polled from the test's thread, so the log's order is theirs."""

    def __init__(self, bootstrap: str, group: str, subscription: list[str], name: str, log: EventLog) -> None:
        self.name, self.log = name, log
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
            "client.id": name, "enable.auto.commit": False, "auto.offset.reset": "earliest", "log_level": 3,
        })
        self.owned: set[str] = set()
        self.consumed: set[tuple[str, int, int]] = set()
        self.closed = False
        self.consumer.subscribe(subscription, on_assign=self._assigned, on_revoke=self._revoked,
                                on_lost=self._lost)

    def _assigned(self, _consumer: Any, partitions: list[TopicPartition]) -> None:
        self.log.add(self.name, ASSIGNED, [(tp.topic, tp.partition) for tp in partitions])
        self.owned |= {f"{tp.topic}:{tp.partition}" for tp in partitions}

    def _revoked(self, _consumer: Any, partitions: list[TopicPartition]) -> None:
        self.owned -= {f"{tp.topic}:{tp.partition}" for tp in partitions}
        self.log.add(self.name, REVOKED, [(tp.topic, tp.partition) for tp in partitions])

    def _lost(self, _consumer: Any, partitions: list[TopicPartition]) -> None:
        self.owned -= {f"{tp.topic}:{tp.partition}" for tp in partitions}
        self.log.add(self.name, LOST, [(tp.topic, tp.partition) for tp in partitions])

    def poll(self) -> None:
        messages = [m for m in self.consumer.consume(100, 0.05) if m.error() is None]
        if not messages:
            return
        nexts: dict[tuple[str, int], int] = {}
        for m in messages:
            self.consumed.add((m.topic(), m.partition(), m.offset()))
            nexts[(m.topic(), m.partition())] = max(nexts.get((m.topic(), m.partition()), 0), m.offset() + 1)
        # Refused while the assignment moves: those records stay uncommitted (read again later).
        with contextlib.suppress(KafkaException):
            self.consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in nexts.items()],
                                 asynchronous=False)

    def close(self) -> None:
        self.consumer.close()  # revokes (the callback runs) and leaves
        self.closed = True


def poll_until(everyone: list[PythonMember], done: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}: " + \
            str({m.name: sorted(m.owned) for m in everyone if not m.closed})
        for m in everyone:
            if not m.closed:
                m.poll()


def python_sharing(active: list[PythonMember], wanted: set[str]) -> Callable[[], bool]:
    return lambda: (all(m.owned for m in active) and set().union(*(m.owned for m in active)) == wanted
                    and sum(len(m.owned) for m in active) == len(wanted))


def python_committed_all(watch: CommittedOffsetsWatch, acked: list[list[Any]]) -> Callable[[], bool]:
    ends = log_ends(acked)
    return lambda: all(watch.latest().get(tp, -1) >= end for tp, end in ends.items())


def check_python_run(log: EventLog, everyone: list[PythonMember], acked: list[list[Any]],
                     watch: CommittedOffsetsWatch) -> None:
    assert ownership_overlaps(log.events) == []
    assert not [e for e in log.events if e["kind"] == LOST], "a member lost its partitions (fenced)"
    assert final_owners(log.events) == {}
    consumed = set().union(*(m.consumed for m in everyone))
    missing = {tuple(r) for r in acked} - consumed
    assert not missing, f"{len(missing)} acknowledged records never consumed, e.g. {sorted(missing)[:5]}"
    assert watch.readings > 0 and watch.regressions() == {}
    assert watch.latest() == log_ends(acked)


def test_confluent_members_join_and_leave_while_records_flow(broker: BrokerProcess) -> None:
    topic = group = "kip848-confluent-flow"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    everything = partitions_of(topic, PARTITIONS)
    log = EventLog()
    everyone: list[PythonMember] = []
    producer = PythonProducer(broker.bootstrap, topic, PARTITIONS)
    try:
        with CommittedOffsetsWatch(broker.bootstrap, group) as watch:
            for i in range(3):
                everyone.append(PythonMember(broker.bootstrap, group, [topic], f"c{i}", log))
                active = [m for m in everyone if not m.closed]
                poll_until(everyone, python_sharing(active, everything), f"{len(active)} members sharing")
                newest, before = everyone[-1], len(producer.acked)
                poll_until(everyone, lambda n=newest, b=before: bool(n.consumed) and len(producer.acked) > b + 6,
                           f"{newest.name} consuming")
            for leaving in everyone[:2]:
                leaving.close()
                active = [m for m in everyone if not m.closed]
                poll_until(everyone, python_sharing(active, everything), f"{leaving.name} gone, the rest sharing")
            acked = producer.stop()
            poll_until(everyone, python_committed_all(watch, acked), "every record committed")
            everyone[-1].close()
    finally:
        for m in everyone:
            if not m.closed:
                m.close()
    check_python_run(log, everyone, acked, watch)


def test_confluent_regex_subscription_picks_up_a_topic_created_later(broker: BrokerProcess) -> None:
    group = "kip848-confluent-regex"
    first, later = "kip848-cre-a", "kip848-cre-b"
    create_topic(broker.bootstrap, first, 2)
    log = EventLog()
    member = PythonMember(broker.bootstrap, group, ["^kip848-cre-.*"], "r0", log)
    producers = [PythonProducer(broker.bootstrap, first, 2)]
    try:
        with CommittedOffsetsWatch(broker.bootstrap, group) as watch:
            poll_until([member], python_sharing([member], partitions_of(first, 2)), "r0 owning the first topic")
            create_topic(broker.bootstrap, later, 2)
            producers.append(PythonProducer(broker.bootstrap, later, 2))
            poll_until([member], python_sharing([member], partitions_of(first, 2) | partitions_of(later, 2)),
                       "r0 owning the topic created later too")
            acked = [r for p in producers for r in p.stop()]
            poll_until([member], python_committed_all(watch, acked), "every record committed")
            member.close()
    finally:
        if not member.closed:
            member.close()
    check_python_run(log, [member], acked, watch)
