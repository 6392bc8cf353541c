"""A broker with two client listeners answers each with that listener's addresses (issue #17).

Kafka's rule: Metadata, FindCoordinator and DescribeCluster name every broker by its advertised
address on the listener the request arrived on. The second listener here advertises
``localhost`` and the first ``127.0.0.1``, so a client that bootstraps from the second one must
be handed ``localhost:<second port>`` everywhere, and then produces and consumes through it.
The same test runs against Apache Kafka (``RIVERLOG_TEST_TARGET=kafka``).
"""

from __future__ import annotations

import asyncio

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from riverlog.protocol.api_keys import ApiKey
from support.brokers import BrokerProcess
from support.clients import group_values
from support.group_protocol import connect, find_coordinator

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def two_listener_broker(module_broker_factory) -> tuple[BrokerProcess, int]:
    broker: BrokerProcess = module_broker_factory(start=False)
    second = broker.add_listener("SECOND", "PLAINTEXT", advertised_host="localhost")
    broker.start()
    return broker, second


def test_metadata_names_brokers_by_the_listener_asked(two_listener_broker) -> None:
    broker, second = two_listener_broker
    first = AdminClient({"bootstrap.servers": f"127.0.0.1:{broker.port}"}).list_topics(timeout=15)
    assert [(b.host, b.port) for b in first.brokers.values()] == [("127.0.0.1", broker.port)]
    other = AdminClient({"bootstrap.servers": f"localhost:{second}"}).list_topics(timeout=15)
    assert [(b.host, b.port) for b in other.brokers.values()] == [("localhost", second)]


def test_coordinator_and_cluster_description_use_the_listener_asked(two_listener_broker) -> None:
    broker, second = two_listener_broker

    async def scenario() -> None:
        conn = await connect("127.0.0.1", second)
        try:
            _node, host, port = await find_coordinator(conn, "listener-group")
            assert (host, port) == ("localhost", second)
            cluster = await conn.request(ApiKey.DESCRIBE_CLUSTER, {"include_cluster_authorized_operations": False},
                                         conn.version_for(ApiKey.DESCRIBE_CLUSTER))
            assert [(b["host"], b["port"]) for b in cluster["brokers"]] == [("localhost", second)]
        finally:
            await conn.close()
        conn = await connect("127.0.0.1", broker.port)
        try:
            _node, host, port = await find_coordinator(conn, "listener-group")
            assert (host, port) == ("127.0.0.1", broker.port)
        finally:
            await conn.close()

    asyncio.run(scenario())


def test_a_client_of_the_second_listener_produces_and_consumes_through_it(two_listener_broker) -> None:
    _broker, second = two_listener_broker
    bootstrap = f"localhost:{second}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("via-second", 1, 1)])["via-second"].result(30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(10):
        producer.produce("via-second", f"r{i}".encode())
    assert producer.flush(30) == 0
    got = group_values({"bootstrap.servers": bootstrap}, "via-second", "via-second", 10)
    assert got == [f"r{i}".encode() for i in range(10)]
