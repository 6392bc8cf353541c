"""KIP-848 with Java's KafkaConsumer (issue #21, acceptance point 1, the Java part): members of a
``group.protocol=consumer`` group join one by one and leave one by one while records flow into a
6-partition topic; a ``SubscriptionPattern`` (a regular expression the broker evaluates) picks up
a topic created after the member joined. Runs the same against Apache Kafka
(RIVERLOG_TEST_TARGET=kafka).

The members run in one JVM (``tests/java/GroupProtocolClient.java``), a thread each; their
rebalance listeners, records and commits are numbered by one shared counter, and the checks
replay them in that order: no partition is ever owned by two members at once, every record
produced is consumed, and each partition's committed offsets never go back.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.brokers import BrokerProcess
from support.clients import create_topic
from support.groups import GROUP_BROKER_SETTINGS, produce_known
from support.java_programs import JavaPrograms, JavaSession

pytestmark = [pytest.mark.integration, pytest.mark.timeout(400)]

PARTITIONS = 6
PER_ROUND = 10
WAIT_S = 90.0
# Members hear of a new assignment at their next heartbeat: every 0.5 s rather than 5 s, so the
# group settles quickly (Kafka checks the minimum too).
SETTINGS = {**GROUP_BROKER_SETTINGS, "group.consumer.heartbeat.interval.ms": 500,
            "group.consumer.min.heartbeat.interval.ms": 500}


@pytest.fixture(scope="module")
def java_broker(module_broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    return module_broker_factory(SETTINGS)


@pytest.fixture
def client(kafka_libs: Path, java_broker: BrokerProcess, tmp_path: Path) -> Iterator[JavaSession]:
    with JavaPrograms(kafka_libs).session("GroupProtocolClient", [java_broker.bootstrap],
                                          log_path=tmp_path / "client.log") as session:
        yield session


def events(client: JavaSession) -> list[dict[str, Any]]:
    return sorted(client.call("report")["events"], key=lambda e: e["seq"])


def consumed(client: JavaSession, topic: str) -> dict[tuple[int, int], str]:
    return {(e["partition"], e["offset"]): e["value"] for e in events(client)
            if e["kind"] == "record" and e["topic"] == topic}


def wait_consumed(client: JavaSession, topic: str, produced: dict[tuple[int, int], str], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not set(produced) <= set(consumed(client, topic)):
        assert time.monotonic() < deadline, f"timed out waiting for {what}: {client.transcript[-3:]}"
        time.sleep(0.2)


def check_ownership(history: list[dict[str, Any]]) -> None:
    """Replay the listeners' events in order: a partition is assigned only when nobody owns it."""
    owner: dict[str, str] = {}
    for e in history:
        if e["kind"] == "assigned":
            for tp in e["partitions"]:
                assert owner.get(tp) in (None, e["member"]), f"{tp} assigned to {e['member']} while {owner[tp]} owns it"
                owner[tp] = e["member"]
        elif e["kind"] in ("revoked", "lost"):
            for tp in e["partitions"]:
                if owner.get(tp) == e["member"]:
                    del owner[tp]


def test_java_members_join_and_leave_one_by_one_while_records_flow(client: JavaSession,
                                                                  java_broker: BrokerProcess) -> None:
    topic = group = "kip848-java"
    create_topic(java_broker.bootstrap, topic, PARTITIONS)
    produced: dict[tuple[int, int], str] = {}
    steps = [("member", "m0"), ("member", "m1"), ("member", "m2"), ("stop", "m0"), ("stop", "m1")]
    for i, (command, name) in enumerate(steps):
        if command == "member":
            client.call("member", name, group, topic)
        else:
            client.call("stop", name, timeout=150)
        produced.update(produce_known(java_broker.bootstrap, topic, PARTITIONS, PER_ROUND, f"step{i}"))
        wait_consumed(client, topic, produced, f"every record after {command} {name}")

    history = events(client)
    check_ownership(history)
    values = consumed(client, topic)
    assert {k: values[k] for k in produced} == produced
    # Each partition's commits, in the order they happened, never go back; the last reaches the end.
    committed: dict[int, list[int]] = {}
    for e in history:
        if e["kind"] == "commit" and e["topic"] == topic:
            committed.setdefault(e["partition"], []).append(e["offset"])
    for partition, offsets in committed.items():
        assert offsets == sorted(offsets), f"partition {partition} committed backwards: {offsets}"
    ends = {p: max(o for (q, o) in produced if q == p) + 1 for p in range(PARTITIONS)}
    assert {p: offsets[-1] for p, offsets in committed.items()} == ends
    # Everyone got partitions at some point, and m2, the one left, owns all of them in the end.
    assigned_to = {e["member"] for e in history if e["kind"] == "assigned"}
    assert assigned_to == {"m0", "m1", "m2"}
    last_owner: dict[str, str] = {}
    for e in history:
        for tp in e.get("partitions", []):
            if e["kind"] == "assigned":
                last_owner[tp] = e["member"]
    assert set(last_owner.values()) == {"m2"} and len(last_owner) == PARTITIONS


def test_a_pattern_subscription_picks_up_a_topic_created_later(client: JavaSession,
                                                               java_broker: BrokerProcess) -> None:
    create_topic(java_broker.bootstrap, "kip848-re-first", 2)
    client.call("pattern", "r0", "kip848-re-group", "kip848-re-.*")
    first = produce_known(java_broker.bootstrap, "kip848-re-first", 2, 3, "first")
    wait_consumed(client, "kip848-re-first", first, "the first topic's records")
    create_topic(java_broker.bootstrap, "kip848-re-later", 1)
    later = produce_known(java_broker.bootstrap, "kip848-re-later", 1, 3, "later")
    wait_consumed(client, "kip848-re-later", later, "the records of the topic created later")
    assigned = {tp for e in events(client) if e["kind"] == "assigned" for tp in e["partitions"]}
    assert {"kip848-re-first:0", "kip848-re-first:1", "kip848-re-later:0"} <= assigned
    client.call("stop", "r0", timeout=150)
