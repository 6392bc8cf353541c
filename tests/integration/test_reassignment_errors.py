"""AlterPartitionReassignments / ListPartitionReassignments refusals on a single broker, with
Kafka's error codes (run with RIVERLOG_TEST_TARGET=kafka to see Kafka give the same answers).

The multi-broker behaviour (moves under load, cancelling, Kafka's reassign tool) is in
tests/cluster/test_reassignment.py."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from riverlog.client.connection import BrokerConnection
from riverlog.protocol.api_keys import ApiKey
from riverlog.protocol.errors import ErrorCode
from support.brokers import BrokerProcess

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

TOPIC = "reassign-errors"


async def alter(bootstrap: str, partitions: list[tuple[str, int, list[int] | None]]) -> list[tuple[str, int, int]]:
    host, port = bootstrap.rsplit(":", 1)
    conn = await BrokerConnection.connect(host, int(port))
    try:
        topics: dict[str, list[dict[str, Any]]] = {}
        for name, index, replicas in partitions:
            topics.setdefault(name, []).append({"partition_index": index, "replicas": replicas})
        response = await conn.request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, {
            "timeout_ms": 10_000, "topics": [{"name": n, "partitions": p} for n, p in topics.items()]})
        assert response["error_code"] == ErrorCode.NONE
        return [(t["name"], p["partition_index"], p["error_code"]) for t in response["responses"]
                for p in t["partitions"]]
    finally:
        await conn.close()


async def listed(bootstrap: str, topics: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    host, port = bootstrap.rsplit(":", 1)
    conn = await BrokerConnection.connect(host, int(port))
    try:
        response = await conn.request(ApiKey.LIST_PARTITION_REASSIGNMENTS, {"timeout_ms": 10_000, "topics": topics})
        assert response["error_code"] == ErrorCode.NONE
        result: list[dict[str, Any]] = response["topics"]
        return result
    finally:
        await conn.close()


def test_bad_reassignments_get_kafkas_error_codes(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for fut in admin.create_topics([NewTopic(TOPIC, 2, 1)]).values():
        fut.result(30)
    me = broker.node_id
    results = asyncio.run(alter(broker.bootstrap, [
        ("no-such-topic", 0, [me]),
        (TOPIC, 5, [me]),  # no such partition
        (TOPIC, 0, []),  # empty
        (TOPIC, 0, [me, me]),  # a broker twice
        (TOPIC, 0, [me, me + 41]),  # a broker that is not registered
        (TOPIC, 1, None),  # cancel: nothing in progress
        (TOPIC, 1, [me]),  # the current assignment: nothing to do, and fine
    ]))
    assert results == [
        ("no-such-topic", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        (TOPIC, 5, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        (TOPIC, 0, ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        (TOPIC, 0, ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        (TOPIC, 0, ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        (TOPIC, 1, ErrorCode.NO_REASSIGNMENT_IN_PROGRESS),
        (TOPIC, 1, ErrorCode.NONE),
    ]
    # Nothing is in progress, whether asked for everything, for our topic or for unknown ones.
    assert asyncio.run(listed(broker.bootstrap, None)) == []
    assert asyncio.run(listed(broker.bootstrap, [{"name": TOPIC, "partition_indexes": [0, 1, 9]},
                                                 {"name": "no-such-topic", "partition_indexes": [0]}])) == []
