"""KIP-848 consumer groups at the boundary with classic ones, with confluent-kafka: what a
``group.protocol=consumer`` member gets from a group id a classic group uses. Runs the same
against Apache Kafka (RIVERLOG_TEST_TARGET=kafka). Members joining and leaving while records flow
are in test_consumer_protocol_clients.py.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer
from support.brokers import BrokerProcess
from support.clients import create_topic
from support.groups import GROUP_BROKER_SETTINGS

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
