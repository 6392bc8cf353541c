"""DescribeProducers through Kafka's own `kafka-transactions describe-producers`: a partition's
leader lists the idempotent producers that wrote to it, with their epoch and last sequence, so an
operator can see who writes where (and, once transactions exist, which one hangs)."""

from __future__ import annotations

import asyncio

import pytest
from confluent_kafka import Producer
from riverlog.client.connection import BrokerConnection
from riverlog.protocol.api_keys import ApiKey
from riverlog.protocol.errors import ErrorCode
from support.brokers import BrokerProcess
from support.clients import create_topic
from support.java_tools import JavaTools

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

TOPIC = "described-producers"


def produce(bootstrap: str, partition: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                         "linger.ms": 5})
    for i in range(count):
        producer.produce(TOPIC, value=b"%d" % i, partition=partition)
    assert producer.flush(30) == 0


def rows(stdout: str) -> list[dict[str, str]]:
    """The tool's table: a header line of column names, then one line per producer."""
    lines = [line.split() for line in stdout.splitlines() if line.strip()]
    header = next(i for i, cols in enumerate(lines) if "ProducerId" in cols)
    return [dict(zip(lines[header], cols, strict=True)) for cols in lines[header + 1:]]


def test_describe_producers_lists_each_idempotent_writer(broker: BrokerProcess, java_tools: JavaTools) -> None:
    bootstrap = broker.bootstrap
    create_topic(bootstrap, TOPIC, 2)
    produce(bootstrap, 0, 25)  # two producers on partition 0, none on partition 1
    produce(bootstrap, 0, 7)

    described = java_tools.transactions(bootstrap, "describe-producers", "--topic", TOPIC, "--partition", "0")
    found = rows(described.stdout)
    assert len(found) == 2, described.describe()
    assert len({r["ProducerId"] for r in found}) == 2, described.describe()
    # Sequences count from 0 per producer and partition: the last is the record count minus one.
    assert sorted(int(r["LastSequence"]) for r in found) == [6, 24], described.describe()
    assert {r["ProducerEpoch"] for r in found} == {"0"}, described.describe()
    assert {r["CurrentTransactionStartOffset"] for r in found} == {"None"}, described.describe()

    idle = java_tools.transactions(bootstrap, "describe-producers", "--topic", TOPIC, "--partition", "1")
    assert rows(idle.stdout) == [], idle.describe()


async def describe(bootstrap: str, partitions: list[tuple[str, int]]) -> list[tuple[str, int, int, int]]:
    """(topic, partition, error code, active producers) for each partition, straight from the broker."""
    host, port = bootstrap.rsplit(":", 1)
    conn = await BrokerConnection.connect(host, int(port))
    try:
        topics: dict[str, list[int]] = {}
        for name, index in partitions:
            topics.setdefault(name, []).append(index)
        response = await conn.request(ApiKey.DESCRIBE_PRODUCERS, {
            "topics": [{"name": n, "partition_indexes": p} for n, p in topics.items()]})
        return [(t["name"], p["partition_index"], p["error_code"], len(p["active_producers"]))
                for t in response["topics"] for p in t["partitions"]]
    finally:
        await conn.close()


def test_describe_producers_of_missing_partitions_answers_unknown(broker: BrokerProcess) -> None:
    # Kafka's tool retries its leader lookup for a missing partition until it times out, so the
    # answer is checked on the wire: the broker says which partitions it does not host.
    create_topic(broker.bootstrap, TOPIC, 1)
    produce(broker.bootstrap, 0, 3)
    answers = asyncio.run(describe(broker.bootstrap, [(TOPIC, 0), (TOPIC, 7), ("no-such-topic", 0)]))
    assert answers == [
        (TOPIC, 0, ErrorCode.NONE, 1),
        (TOPIC, 7, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, 0),
        ("no-such-topic", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, 0),
    ]
