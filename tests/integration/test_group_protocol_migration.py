"""Online migration between the group protocols (issue #21, acceptance 2), with Java consumers.

A classic group (``group.protocol=classic``, three members on a 6-partition topic) keeps
consuming while its members restart one by one with ``group.protocol=consumer`` - the first one
turns the group into a consumer group whose classic members go on with JoinGroup/SyncGroup/
Heartbeat - and then back, one by one, to classic (the last consumer-protocol member leaving turns
it into a classic group again), while a producer keeps producing. Checked without clocks, as in
test_consumer_protocol_clients.py: no partition owned by two members at once (rebalance callbacks
numbered by one counter), every acknowledged record consumed, committed offsets never going back,
and a record read twice only if the commit of its first reading did not succeed.

Kafka's default ``group.consumer.migration.policy`` (bidirectional) on both targets; runs the same
against Apache Kafka (RIVERLOG_TEST_TARGET=kafka).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupType
from support.brokers import BrokerProcess
from support.clients import create_topic, group_type
from support.groups import GROUP_BROKER_SETTINGS
from support.java_group_members import sharing, wait_status
from support.java_programs import JavaPrograms, JavaSession
from support.rebalance_checks import (
    LOST,
    CommittedOffsetsWatch,
    log_ends,
    ownership_overlaps,
    partitions_of,
    wait_committed,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

PARTITIONS = 6
SETTINGS = {**GROUP_BROKER_SETTINGS, "group.consumer.heartbeat.interval.ms": 500,
            "group.consumer.min.heartbeat.interval.ms": 500}
# Classic members heartbeat often too, so that they hear of each rebalance quickly.
CLASSIC = ["group.protocol=classic", "heartbeat.interval.ms=500", "session.timeout.ms=10000"]
CONSUMER = ["group.protocol=consumer"]


@pytest.fixture
def broker(broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    return broker_factory(SETTINGS)


@pytest.fixture
def members(kafka_libs: Path, broker: BrokerProcess, tmp_path: Path) -> Iterator[JavaSession]:
    programs = JavaPrograms(kafka_libs)
    with programs.session("GroupMembers", [broker.bootstrap], log_path=tmp_path / "group-members.log") as s:
        yield s


def join(members: JavaSession, group: str, topic: str, active: list[str], name: str, protocol: list[str]) -> None:
    """Start member ``name`` and wait until it and the ``active`` ones share every partition."""
    members.call("member", name, group, f"topics:{topic}", *protocol)
    active.append(name)
    wait_status(members, sharing(list(active), partitions_of(topic, PARTITIONS)), f"{active} sharing the partitions")


def test_a_classic_group_migrates_to_the_consumer_protocol_and_back_while_consuming(
        members: JavaSession, broker: BrokerProcess) -> None:
    topic = group = "migrating"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    everything = partitions_of(topic, PARTITIONS)
    names: list[str] = []
    active: list[str] = []

    def start(name: str, protocol: list[str]) -> None:
        join(members, group, topic, active, name, protocol)
        names.append(name)
        # Records flow to it: it reads some produced after it joined.
        wait_status(members, lambda st: st["members"][name]["consumed"] > 0, f"{name} consuming")

    def stop(name: str) -> None:
        assert members.call("close", name)["closed"]
        active.remove(name)
        wait_status(members, sharing(list(active), everything), f"{active} sharing after {name} left")

    with CommittedOffsetsWatch(broker.bootstrap, group) as watch:
        members.call("produce_start", "flow", topic, PARTITIONS, 10)
        for i in range(3):
            start(f"classic{i}", CLASSIC)
        assert group_type(broker.bootstrap, group) == ConsumerGroupType.CLASSIC
        for i in range(3):  # upgrade: restart each member with the consumer protocol
            stop(f"classic{i}")
            start(f"consumer{i}", CONSUMER)
            assert group_type(broker.bootstrap, group) == ConsumerGroupType.CONSUMER
        for i in range(3):  # and back: restart each with the classic protocol
            stop(f"consumer{i}")
            start(f"classic-again{i}", CLASSIC)
            expected = ConsumerGroupType.CONSUMER if i < 2 else ConsumerGroupType.CLASSIC
            assert group_type(broker.bootstrap, group) == expected
        produced = members.call("produce_stop", "flow")
        assert produced["failed"] == []
        wait_committed(watch, log_ends(produced["acked"]))
        for name in list(active):
            assert members.call("close", name)["closed"]
    events = members.call("events", 0)["events"]
    assert ownership_overlaps(events) == []
    assert not [e for e in events if e["kind"] == LOST], "a member lost its partitions (fenced)"
    readings: Counter[tuple[Any, ...]] = Counter()
    uncommitted: set[tuple[Any, ...]] = set()
    for name in names:
        answer = members.call("consumed", name)
        readings.update(tuple(r) for r in answer["records"])
        uncommitted.update(tuple(r) for r in answer["uncommitted"])
    missing = {tuple(r) for r in produced["acked"]} - set(readings)
    assert not missing, f"{len(missing)} acknowledged records never consumed, e.g. {sorted(missing)[:5]}"
    reread = {r for r, n in readings.items() if n > 1}
    assert reread <= uncommitted, f"records read again although committed: {sorted(reread - uncommitted)[:10]}"
    assert watch.readings > 0 and watch.regressions() == {}
    assert watch.latest() == log_ends(produced["acked"])


def test_a_classic_static_member_replacing_the_last_consumer_member_downgrades_the_group_at_once(
        members: JavaSession, broker: BrokerProcess) -> None:
    # A static member (group.instance.id) of the consumer protocol closes -- a temporary leave
    # (member epoch -2): it keeps its place until its session ends -- and the same instance comes
    # back with the classic protocol. It takes the old member's place, and since every member is
    # classic then, the group is a classic group again at once, not after the 45 s session.
    topic = group = "static-downgrade"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    active: list[str] = []

    def start(name: str, protocol: list[str]) -> None:
        join(members, group, topic, active, name, protocol)

    start("classic0", CLASSIC)
    start("classic1", CLASSIC)
    start("static", [*CONSUMER, "group.instance.id=instance-s"])
    assert group_type(broker.bootstrap, group) == ConsumerGroupType.CONSUMER
    assert members.call("close", "static")["closed"]
    active.remove("static")
    assert group_type(broker.bootstrap, group) == ConsumerGroupType.CONSUMER  # its place is kept
    start("static-again", [*CLASSIC, "group.instance.id=instance-s"])
    assert group_type(broker.bootstrap, group) == ConsumerGroupType.CLASSIC
    for name in active:
        assert members.call("close", name)["closed"]
    assert ownership_overlaps(members.call("events", 0)["events"]) == []
