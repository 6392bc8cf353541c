"""KIP-848 consumer groups at the boundary with classic ones, with confluent-kafka: what a
``group.protocol=consumer`` member gets from a group id a running classic group uses.

With Kafka 4's default ``group.consumer.migration.policy`` (bidirectional) the classic group
becomes a consumer group, its classic member keeps going (told to rejoin by its heartbeat) and the
two share the partitions; when the consumer-protocol member leaves, the group is a classic group
again and the classic member takes every partition back. With the policy ``disabled`` the
consumer-protocol member gets nothing while the classic group runs. Runs the same against Apache
Kafka (RIVERLOG_TEST_TARGET=kafka). Members joining and leaving while records flow are in
test_consumer_protocol_clients.py, a whole group migrating in test_group_protocol_migration.py.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupType
from support.brokers import BrokerProcess
from support.clients import create_topic, group_type
from support.groups import GROUP_BROKER_SETTINGS

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

SETTINGS = {**GROUP_BROKER_SETTINGS, "group.consumer.heartbeat.interval.ms": 500,
            "group.consumer.min.heartbeat.interval.ms": 500}


def classic_consumer(bootstrap: str, group: str) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "log_level": 3, "session.timeout.ms": 10000,
                     "heartbeat.interval.ms": 500, "auto.offset.reset": "earliest"})


def modern_consumer(bootstrap: str, group: str, errors: list[Any]) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                     "log_level": 3, "error_cb": errors.append})


def owned(consumer: Consumer) -> set[int]:
    return {tp.partition for tp in consumer.assignment()}


def poll_until(consumers: list[Consumer], done: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}: {[owned(c) for c in consumers]}"
        for c in consumers:
            c.poll(0.05)


def test_a_consumer_member_upgrades_a_classic_group_in_use_and_leaving_downgrades_it(
        broker_factory: Callable[..., BrokerProcess]) -> None:
    broker = broker_factory(SETTINGS)
    topic = group = "kip848-classic"
    create_topic(broker.bootstrap, topic, 2)
    classic = classic_consumer(broker.bootstrap, group)
    classic.subscribe([topic])
    errors: list[Any] = []
    modern = modern_consumer(broker.bootstrap, group, errors)
    try:
        poll_until([classic], lambda: owned(classic) == {0, 1}, "the classic member owning both partitions")
        assert group_type(broker.bootstrap, group) == ConsumerGroupType.CLASSIC
        modern.subscribe([topic])
        poll_until([classic, modern], lambda: len(owned(classic)) == len(owned(modern)) == 1,
                   "the two members sharing the partitions")
        assert owned(classic) | owned(modern) == {0, 1}
        assert group_type(broker.bootstrap, group) == ConsumerGroupType.CONSUMER
        modern.close()
        poll_until([classic], lambda: owned(classic) == {0, 1}, "the classic member owning both partitions again")
        assert group_type(broker.bootstrap, group) == ConsumerGroupType.CLASSIC
    finally:
        modern.close()
        classic.close()


def test_without_migration_a_consumer_member_cannot_join_a_classic_group_in_use(
        broker_factory: Callable[..., BrokerProcess]) -> None:
    broker = broker_factory({**SETTINGS, "group.consumer.migration.policy": "disabled"})
    topic = group = "kip848-classic-disabled"
    create_topic(broker.bootstrap, topic, 2)
    classic = classic_consumer(broker.bootstrap, group)
    classic.subscribe([topic])
    errors: list[Any] = []
    modern = modern_consumer(broker.bootstrap, group, errors)
    try:
        poll_until([classic], lambda: bool(owned(classic)), "the classic member getting its partitions")
        modern.subscribe([topic])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not modern.assignment():
            modern.poll(0.2)
            classic.poll(0.05)
        assert modern.assignment() == [] and classic.assignment() != []
    finally:
        modern.close()
        classic.close()
